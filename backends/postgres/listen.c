/*
 * listen.c: waiters of lease locks and of advisory permits are woken by
 * NOTIFY, not by polling.
 *
 * Each client gets, on the first wait(), one extra connection and one
 * thread that owns it. Waiters ask for a channel ("dlock_<16 hex digits of
 * the name's key>"); the thread sends LISTEN for it and, once the server
 * has confirmed, marks the channel active. Every notification on a channel
 * bumps its count and wakes the waiters on a condition variable.
 *
 * The race every LISTEN-based lock must close ([B-WAIT-1]): a release
 * announced between a failed attempt and the LISTEN is never delivered.
 * So a waiter whose channel was not yet active when it made its attempt
 * only waits for the LISTEN to be confirmed and returns, and core makes
 * the attempt again; that attempt notes the channel's count
 * (dlock__pg_listen_seq) and the next wait sleeps until the count moves.
 * Channels stay listened to while they are used and are dropped after
 * CHAN_IDLE_MS unused.
 *
 * If the connection breaks, every channel's count is bumped (a notification
 * may have been lost) and the thread reconnects with backoff; meanwhile
 * waits run out their time and core retries, i.e. it degrades to polling.
 *
 * Costs: one connection and one thread per client that waits at all; a
 * mutex and a hash lookup per lease acquire once the listener runs.
 *
 * The listener belongs to the client context (postgres.c starts and stops
 * it); lease.c and advisory.c (permits) use it, through
 * dlock__pg_listen_note() before an attempt and dlock__pg_wait() as their
 * mode's wait(). It connects with conn.c's dlock__pg_connect_raw() and
 * calls nothing above conn.c.
 *
 * Divisions: channels; the thread; what the client and waiters call.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"

/* A channel unused this long (and with no waiter) is UNLISTENed. */
#define CHAN_IDLE_MS 60000
/* Reconnect backoff of the listener connection. */
#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 2000
/* The longest LISTEN/UNLISTEN command sent at once. */
#define CMD_MAX 8192

/* ---- channels ---------------------------------------------------------- */

static size_t bucket(uint64_t key)
{
    return (size_t)(key ^ (key >> 29)) % PG_CHAN_BUCKETS;
}

/* Call with ln->mu held. */
static struct pg_chan *chan_find(struct pg_listener *ln, uint64_t key)
{
    for (struct pg_chan *c = ln->chans[bucket(key)]; c != NULL; c = c->next)
        if (c->key == key)
            return c;
    return NULL;
}

static void wake_thread(struct pg_listener *ln)
{
    uint64_t one = 1;
    ssize_t n = write(ln->wakefd, &one, sizeof one);
    (void)n; /* a full counter already means "wake up" */
}

/* Every channel must be LISTENed again (new connection), and any of them
 * may have missed a notification. Call with ln->mu held. */
static void chans_reset(struct pg_listener *ln)
{
    for (size_t b = 0; b < PG_CHAN_BUCKETS; b++)
        for (struct pg_chan *c = ln->chans[b]; c != NULL; c = c->next) {
            c->state = PG_CHAN_WANT;
            c->seq++;
        }
    pthread_cond_broadcast(&ln->cv);
}

/* Build the next command: LISTEN what is wanted, UNLISTEN (and forget)
 * what has been idle. Marks the LISTENed ones SENT. Call with ln->mu held. */
static size_t build_cmd(struct pg_listener *ln, char *cmd, int64_t now)
{
    size_t n = 0;
    char name[24];

    for (size_t b = 0; b < PG_CHAN_BUCKETS; b++) {
        for (struct pg_chan **p = &ln->chans[b]; *p != NULL;) {
            struct pg_chan *c = *p;
            if (n + 48 >= CMD_MAX)
                return n;
            dlock__pg_channel_name(name, c->key);
            if (c->state == PG_CHAN_WANT) {
                n += (size_t)snprintf(cmd + n, CMD_MAX - n, "LISTEN %s;",
                                      name);
                c->state = PG_CHAN_SENT;
            } else if (c->state == PG_CHAN_ACTIVE && c->waiters == 0 &&
                       now - c->last_used > CHAN_IDLE_MS) {
                n += (size_t)snprintf(cmd + n, CMD_MAX - n, "UNLISTEN %s;",
                                      name);
                *p = c->next;
                free(c);
                continue;
            }
            p = &c->next;
        }
    }
    return n;
}

/* ---- the thread -------------------------------------------------------- */

/* Deliver what libpq has read: notifications, and the end of our
 * LISTEN command. Returns false if the connection failed. */
static bool take_input(struct pg_listener *ln, PGconn *conn, bool *inflight)
{
    PGnotify *nt;
    PGresult *r;

    if (!PQconsumeInput(conn))
        return false;
    while (*inflight && !PQisBusy(conn)) {
        r = PQgetResult(conn);
        if (r == NULL) {
            /* The command is done: its channels are live. */
            *inflight = false;
            pthread_mutex_lock(&ln->mu);
            for (size_t b = 0; b < PG_CHAN_BUCKETS; b++)
                for (struct pg_chan *c = ln->chans[b]; c != NULL; c = c->next)
                    if (c->state == PG_CHAN_SENT)
                        c->state = PG_CHAN_ACTIVE;
            pthread_cond_broadcast(&ln->cv);
            pthread_mutex_unlock(&ln->mu);
            break;
        }
        PQclear(r);
    }
    while ((nt = PQnotifies(conn)) != NULL) {
        uint64_t key;
        if (sscanf(nt->relname, "dlock_%16" SCNx64, &key) == 1) {
            pthread_mutex_lock(&ln->mu);
            struct pg_chan *c = chan_find(ln, key);
            if (c != NULL) {
                c->seq++;
                pthread_cond_broadcast(&ln->cv);
            }
            pthread_mutex_unlock(&ln->mu);
        }
        PQfreemem(nt);
    }
    return PQstatus(conn) == CONNECTION_OK;
}

static void *listen_main(void *arg)
{
    struct pg_listener *ln = arg;
    PGconn *conn = NULL;
    uint32_t backoff = RECONNECT_MIN_MS;
    bool inflight = false;
    char *cmd = malloc(CMD_MAX);
    char err[512];

    pthread_mutex_lock(&ln->mu);
    while (!ln->stop && cmd != NULL) {
        int64_t now = dlock_now_ms();
        size_t n = 0;

        if (conn == NULL) {
            pthread_mutex_unlock(&ln->mu);
            conn = dlock__pg_connect_raw(ln->cf, dlock__pg_deadline(ln->cf),
                                         err, sizeof err, NULL);
            if (conn != NULL && PQsetnonblocking(conn, 1) != 0) {
                PQfinish(conn);
                conn = NULL;
            }
            pthread_mutex_lock(&ln->mu);
            if (conn == NULL) {
                struct timespec ts =
                    dlock_deadline_timespec(dlock_now_ms() + backoff);
                if (!ln->stop)
                    pthread_cond_timedwait(&ln->cv, &ln->mu, &ts);
                backoff = backoff * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS
                                                         : backoff * 2;
                continue;
            }
            backoff = RECONNECT_MIN_MS;
            inflight = false;
            chans_reset(ln);
        }
        if (!inflight)
            n = build_cmd(ln, cmd, now);
        pthread_mutex_unlock(&ln->mu);

        bool ok = true;
        if (n > 0) {
            ok = PQsendQuery(conn, cmd) == 1;
            inflight = ok;
        }
        while (ok && PQflush(conn) == 1) {
            struct pollfd p = {PQsocket(conn), POLLOUT | POLLIN, 0};
            if (poll(&p, 1, 1000) < 0 && errno != EINTR)
                ok = false;
            else if (p.revents & POLLIN)
                ok = take_input(ln, conn, &inflight);
        }
        if (ok) {
            /* Sleep until the server says something, a waiter wants a
             * channel, or it is time to look for idle channels. */
            struct pollfd p[2] = {{PQsocket(conn), POLLIN, 0},
                                  {ln->wakefd, POLLIN, 0}};
            int r = poll(p, 2, CHAN_IDLE_MS / 4);
            if (r < 0 && errno != EINTR)
                ok = false;
            if (r > 0 && (p[1].revents & POLLIN)) {
                uint64_t v;
                ssize_t got = read(ln->wakefd, &v, sizeof v);
                (void)got;
            }
            if (ok && r > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                ok = take_input(ln, conn, &inflight);
        }
        pthread_mutex_lock(&ln->mu);
        if (!ok) {
            PQfinish(conn);
            conn = NULL;
            chans_reset(ln); /* wake everyone: notifications may be lost */
        }
    }
    pthread_mutex_unlock(&ln->mu);
    if (conn != NULL)
        PQfinish(conn);
    free(cmd);
    return NULL;
}

/* ---- what the client and waiters call ---------------------------------- */

void dlock__pg_listen_init(struct pg_listener *ln, const struct pg_conf *cf)
{
    ln->cf = cf;
    atomic_init(&ln->listening, false);
    pthread_mutex_init(&ln->mu, NULL);
    dlock_cond_init_monotonic(&ln->cv);
    ln->wakefd = -1;
}

/* Start the thread once; call with ln->mu held. */
static bool ensure_started(struct pg_listener *ln)
{
    if (ln->started)
        return true;
    if (ln->stop)
        return false;
    ln->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ln->wakefd < 0)
        return false;
    if (pthread_create(&ln->thread, NULL, listen_main, ln) != 0) {
        close(ln->wakefd);
        ln->wakefd = -1;
        return false;
    }
    ln->started = true;
    atomic_store(&ln->listening, true);
    return true;
}

bool dlock__pg_listen_seq(struct pg_listener *ln, uint64_t key, uint64_t *seq)
{
    struct pg_chan *c;
    bool ok = false;

    if (!atomic_load(&ln->listening))
        return false; /* nobody has waited yet: no lock, no lookup */
    pthread_mutex_lock(&ln->mu);
    c = chan_find(ln, key);
    if (c != NULL && c->state == PG_CHAN_ACTIVE) {
        *seq = c->seq;
        c->last_used = dlock_now_ms();
        ok = true;
    }
    pthread_mutex_unlock(&ln->mu);
    return ok;
}

int dlock__pg_listen_wait(struct dlock_session *s, struct pg_listener *ln,
                          uint64_t key, bool have_seq, uint64_t seq,
                          uint32_t max_ms)
{
    int64_t end = dlock_now_ms() + max_ms;
    struct pg_chan *c;

    pthread_mutex_lock(&ln->mu);
    if (!ensure_started(ln)) {
        /* No listener: sleep the pause out, as core would. */
        while (!ln->stop && dlock_now_ms() < end &&
               dlock_session_cond_wait(s, &ln->cv, &ln->mu, end) == 0)
            ;
        pthread_mutex_unlock(&ln->mu);
        return DLOCK_OK;
    }
    c = chan_find(ln, key);
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL) {
            pthread_mutex_unlock(&ln->mu);
            return DLOCK_ENOMEM;
        }
        c->key = key;
        c->state = PG_CHAN_WANT;
        c->next = ln->chans[bucket(key)];
        ln->chans[bucket(key)] = c;
        wake_thread(ln);
        have_seq = false;
    }
    c->waiters++;
    c->last_used = dlock_now_ms();
    if (!have_seq || c->state != PG_CHAN_ACTIVE) {
        /* Not listening at the attempt: wait for the LISTEN to take
         * effect, then let core try again (a release before it would be
         * lost otherwise). */
        while (c->state != PG_CHAN_ACTIVE && !ln->stop &&
               dlock_now_ms() < end &&
               dlock_session_cond_wait(s, &ln->cv, &ln->mu, end) == 0)
            ;
    } else {
        /* Woken by a NOTIFY, or every 20 ms for a cancel [B-CANCEL-1]. */
        while (c->seq == seq && c->state == PG_CHAN_ACTIVE && !ln->stop &&
               dlock_now_ms() < end &&
               dlock_session_cond_wait(s, &ln->cv, &ln->mu, end) == 0)
            ;
    }
    c->waiters--;
    c->last_used = dlock_now_ms();
    pthread_mutex_unlock(&ln->mu);
    return DLOCK_OK;
}

void dlock__pg_listen_note(struct pg_session *s, uint64_t key)
{
    s->seen_key = key;
    s->seen_valid = dlock__pg_listen_seq(&s->x->ln, key, &s->seen_seq);
}

int dlock__pg_wait(struct dlock_session *ds, const struct dlock_request *req,
                   uint32_t max_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    uint8_t d[32];
    uint64_t k;

    dlock__pg_digest(s->cf, req->name, req->name_len, d);
    k = dlock__pg_key64(d);
    return dlock__pg_listen_wait(&s->base, &s->x->ln, k,
                                 s->seen_valid && s->seen_key == k,
                                 s->seen_seq, max_ms);
}

void dlock__pg_listen_stop(struct pg_listener *ln)
{
    bool started;

    pthread_mutex_lock(&ln->mu);
    ln->stop = true;
    started = ln->started;
    pthread_cond_broadcast(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    if (started) {
        wake_thread(ln);
        pthread_join(ln->thread, NULL);
        close(ln->wakefd);
    }
    for (size_t b = 0; b < PG_CHAN_BUCKETS; b++)
        while (ln->chans[b] != NULL) {
            struct pg_chan *c = ln->chans[b];
            ln->chans[b] = c->next;
            free(c);
        }
    pthread_cond_destroy(&ln->cv);
    pthread_mutex_destroy(&ln->mu);
}
