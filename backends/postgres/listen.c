/*
 * listen.c: lease-mode waiters are woken by NOTIFY, not by polling.
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
 * the attempt again; that attempt notes the channel's count (pg_listen_seq)
 * and the next wait sleeps until the count moves. Channels stay listened
 * to while they are used and are dropped after CHAN_IDLE_MS unused.
 *
 * If the connection breaks, every channel's count is bumped (a notification
 * may have been lost) and the thread reconnects with backoff; meanwhile
 * waits run out their time and core retries, i.e. it degrades to polling.
 *
 * Costs: one connection and one thread per client that waits at all; a
 * mutex and a hash lookup per lease acquire once the listener runs.
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

static size_t bucket(uint64_t key)
{
    return (size_t)(key ^ (key >> 29)) % PG_CHAN_BUCKETS;
}

/* Call with x->mu held. */
static struct pg_chan *chan_find(struct pg_ctx *x, uint64_t key)
{
    for (struct pg_chan *c = x->chans[bucket(key)]; c != NULL; c = c->next)
        if (c->key == key)
            return c;
    return NULL;
}

static void wake_thread(struct pg_ctx *x)
{
    uint64_t one = 1;
    ssize_t n = write(x->wakefd, &one, sizeof one);
    (void)n; /* a full counter already means "wake up" */
}

static void abs_time(struct timespec *ts, int64_t at_ms)
{
    ts->tv_sec = (time_t)(at_ms / 1000);
    ts->tv_nsec = (long)(at_ms % 1000) * 1000000L;
}

void pg_listen_init(struct pg_ctx *x)
{
    pthread_condattr_t attr;

    atomic_init(&x->listening, false);
    pthread_mutex_init(&x->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&x->cv, &attr);
    pthread_condattr_destroy(&attr);
    x->wakefd = -1;
}

/* Every channel must be LISTENed again (new connection), and any of them
 * may have missed a notification. Call with x->mu held. */
static void chans_reset(struct pg_ctx *x)
{
    for (size_t b = 0; b < PG_CHAN_BUCKETS; b++)
        for (struct pg_chan *c = x->chans[b]; c != NULL; c = c->next) {
            c->state = PG_CHAN_WANT;
            c->seq++;
        }
    pthread_cond_broadcast(&x->cv);
}

/* Build the next command: LISTEN what is wanted, UNLISTEN (and forget)
 * what has been idle. Marks the LISTENed ones SENT. Call with x->mu held. */
static size_t build_cmd(struct pg_ctx *x, char *cmd, int64_t now)
{
    size_t n = 0;
    char name[24];

    for (size_t b = 0; b < PG_CHAN_BUCKETS; b++) {
        for (struct pg_chan **p = &x->chans[b]; *p != NULL;) {
            struct pg_chan *c = *p;
            if (n + 48 >= CMD_MAX)
                return n;
            pg_channel_name(name, c->key);
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

/* Deliver what libpq has read: notifications, and the end of our
 * LISTEN command. Returns false if the connection failed. */
static bool take_input(struct pg_ctx *x, PGconn *conn, bool *inflight)
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
            pthread_mutex_lock(&x->mu);
            for (size_t b = 0; b < PG_CHAN_BUCKETS; b++)
                for (struct pg_chan *c = x->chans[b]; c != NULL; c = c->next)
                    if (c->state == PG_CHAN_SENT)
                        c->state = PG_CHAN_ACTIVE;
            pthread_cond_broadcast(&x->cv);
            pthread_mutex_unlock(&x->mu);
            break;
        }
        PQclear(r);
    }
    while ((nt = PQnotifies(conn)) != NULL) {
        uint64_t key;
        if (sscanf(nt->relname, "dlock_%16" SCNx64, &key) == 1) {
            pthread_mutex_lock(&x->mu);
            struct pg_chan *c = chan_find(x, key);
            if (c != NULL) {
                c->seq++;
                pthread_cond_broadcast(&x->cv);
            }
            pthread_mutex_unlock(&x->mu);
        }
        PQfreemem(nt);
    }
    return PQstatus(conn) == CONNECTION_OK;
}

static void *listen_main(void *arg)
{
    struct pg_ctx *x = arg;
    PGconn *conn = NULL;
    uint32_t backoff = RECONNECT_MIN_MS;
    bool inflight = false;
    char *cmd = malloc(CMD_MAX);
    char err[512];

    pthread_mutex_lock(&x->mu);
    while (!x->stop && cmd != NULL) {
        int64_t now = dlock_now_ms();
        size_t n = 0;

        if (conn == NULL) {
            pthread_mutex_unlock(&x->mu);
            conn = pg_connect_raw(&x->cf, x->cf.timeout_ms
                                              ? now + x->cf.timeout_ms
                                              : INT64_MAX,
                                  err, sizeof err);
            if (conn != NULL && PQsetnonblocking(conn, 1) != 0) {
                PQfinish(conn);
                conn = NULL;
            }
            pthread_mutex_lock(&x->mu);
            if (conn == NULL) {
                struct timespec ts;
                abs_time(&ts, dlock_now_ms() + backoff);
                if (!x->stop)
                    pthread_cond_timedwait(&x->cv, &x->mu, &ts);
                backoff = backoff * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS
                                                         : backoff * 2;
                continue;
            }
            backoff = RECONNECT_MIN_MS;
            inflight = false;
            chans_reset(x);
        }
        if (!inflight)
            n = build_cmd(x, cmd, now);
        pthread_mutex_unlock(&x->mu);

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
                ok = take_input(x, conn, &inflight);
        }
        if (ok) {
            /* Sleep until the server says something, a waiter wants a
             * channel, or it is time to look for idle channels. */
            struct pollfd p[2] = {{PQsocket(conn), POLLIN, 0},
                                  {x->wakefd, POLLIN, 0}};
            int r = poll(p, 2, CHAN_IDLE_MS / 4);
            if (r < 0 && errno != EINTR)
                ok = false;
            if (r > 0 && (p[1].revents & POLLIN)) {
                uint64_t v;
                ssize_t got = read(x->wakefd, &v, sizeof v);
                (void)got;
            }
            if (ok && r > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                ok = take_input(x, conn, &inflight);
        }
        pthread_mutex_lock(&x->mu);
        if (!ok) {
            PQfinish(conn);
            conn = NULL;
            chans_reset(x); /* wake everyone: notifications may be lost */
        }
    }
    pthread_mutex_unlock(&x->mu);
    if (conn != NULL)
        PQfinish(conn);
    free(cmd);
    return NULL;
}

/* Start the thread once; call with x->mu held. */
static bool ensure_started(struct pg_ctx *x)
{
    if (x->started)
        return true;
    if (x->stop)
        return false;
    x->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (x->wakefd < 0)
        return false;
    if (pthread_create(&x->thread, NULL, listen_main, x) != 0) {
        close(x->wakefd);
        x->wakefd = -1;
        return false;
    }
    x->started = true;
    atomic_store(&x->listening, true);
    return true;
}

bool pg_listen_seq(struct pg_ctx *x, uint64_t key, uint64_t *seq)
{
    struct pg_chan *c;
    bool ok = false;

    if (!atomic_load(&x->listening))
        return false; /* nobody has waited yet: no lock, no lookup */
    pthread_mutex_lock(&x->mu);
    c = chan_find(x, key);
    if (c != NULL && c->state == PG_CHAN_ACTIVE) {
        *seq = c->seq;
        c->last_used = dlock_now_ms();
        ok = true;
    }
    pthread_mutex_unlock(&x->mu);
    return ok;
}

int pg_listen_wait(struct pg_ctx *x, uint64_t key, bool have_seq,
                   uint64_t seq, uint32_t max_ms)
{
    int64_t end = dlock_now_ms() + max_ms;
    struct timespec ts;
    struct pg_chan *c;

    abs_time(&ts, end);
    pthread_mutex_lock(&x->mu);
    if (!ensure_started(x)) {
        /* No listener: sleep the pause out, as core would. */
        pthread_cond_timedwait(&x->cv, &x->mu, &ts);
        pthread_mutex_unlock(&x->mu);
        return DLOCK_OK;
    }
    c = chan_find(x, key);
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL) {
            pthread_mutex_unlock(&x->mu);
            return DLOCK_ENOMEM;
        }
        c->key = key;
        c->state = PG_CHAN_WANT;
        c->next = x->chans[bucket(key)];
        x->chans[bucket(key)] = c;
        wake_thread(x);
        have_seq = false;
    }
    c->waiters++;
    c->last_used = dlock_now_ms();
    if (!have_seq || c->state != PG_CHAN_ACTIVE) {
        /* Not listening at the attempt: wait for the LISTEN to take
         * effect, then let core try again (a release before it would be
         * lost otherwise). */
        while (c->state != PG_CHAN_ACTIVE && !x->stop &&
               dlock_now_ms() < end)
            pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    } else {
        while (c->seq == seq && c->state == PG_CHAN_ACTIVE && !x->stop &&
               dlock_now_ms() < end)
            pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    }
    c->waiters--;
    c->last_used = dlock_now_ms();
    pthread_mutex_unlock(&x->mu);
    return DLOCK_OK;
}

void pg_listen_stop(struct pg_ctx *x)
{
    bool started;

    pthread_mutex_lock(&x->mu);
    x->stop = true;
    started = x->started;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    if (started) {
        wake_thread(x);
        pthread_join(x->thread, NULL);
        close(x->wakefd);
    }
    for (size_t b = 0; b < PG_CHAN_BUCKETS; b++)
        while (x->chans[b] != NULL) {
            struct pg_chan *c = x->chans[b];
            x->chans[b] = c->next;
            free(c);
        }
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
}
