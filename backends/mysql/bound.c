/*
 * bound.c: what the two connection-bound modes (for_update.c, get_lock.c)
 * share. Their locks live exactly as long as the connection that took
 * them: the server frees them when it ends. So a ping proves them all, the
 * server must end a silent connection before core stops believing its
 * leases (wait_timeout), and both wait for a lock on the server, whose
 * waits end in the same way.
 *
 * Divisions: the silence limit; renewal; the end of a wait; a cancelled
 * wait.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "my.h"

/* ---- the silence limit --------------------------------------------------- */

/*
 * [B-BOUND-1] The server ends a connection-bound session (and frees its
 * GET_LOCKs, rolls back its FOR UPDATE) once it has been silent for
 * wait_timeout seconds, which must exceed the longest lease of its locks
 * plus a margin: core stops believing a lease after the last confirmed
 * round trip, and renews (pings) every third of it. Raised when a longer
 * lease comes; with no lock held it follows the new one exactly. One round
 * trip, only when it changes.
 */
unsigned dlock__my_cover_lease(struct dlock__my_session *ms,
                               uint32_t lease_ms, bool holds)
{
    uint32_t limit = dlock_server_timeout_ms(lease_ms);
    char q[80];
    int n;

    if (lease_ms == ms->covered_ms || (holds && lease_ms < ms->covered_ms))
        return 0;
    n = snprintf(q, sizeof q, "SET SESSION wait_timeout = %u",
                 (limit + 999) / 1000);
    if (mysql_real_query(ms->conn.db, q, (unsigned long)n) != 0)
        return dlock__my_db_note(&ms->conn);
    ms->covered_ms = lease_ms;
    return 0;
}

/* The caller counts the grant (ms->ngrants) when its acquire succeeds,
 * and uncounts it first thing in release. */
int dlock__my_bound_begin(struct dlock__my_session *ms,
                          const struct dlock_request *req)
{
    if (ms->conn.broken)
        return dlock__my_broken(ms);
    if (dlock__my_cover_lease(ms, req->lease_ms, ms->ngrants > 0) != 0)
        return dlock__my_fail(ms, &ms->conn, "set wait_timeout");
    return DLOCK_OK;
}

/* ---- renewal ------------------------------------------------------------- */

int dlock__my_bound_renew(struct dlock_session *s,
                          struct dlock_renewal *items, size_t n)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;

    if (!c->broken && mysql_ping(c->db) != 0)
        dlock__my_db_note(c);
    if (c->broken)
        return dlock_session_error(&ms->base, DLOCK_ELOST,
                                   "the connection holding the lock is "
                                   "gone: %s (%u)",
                                   c->msg, c->err);
    for (size_t i = 0; i < n; i++)
        items[i].result = DLOCK_OK;
    return DLOCK_OK;
}

/* ---- the end of a wait --------------------------------------------------- */

/* A native wait cut short by the read timeout's margin is retried at
 * once. */
int dlock__my_busy(int64_t deadline_ms, bool waited, uint32_t *retry_ms)
{
    if (deadline_ms == 0)
        return DLOCK_EBUSY;
    if (dlock_now_ms() >= deadline_ms)
        return DLOCK_ETIMEDOUT;
    if (waited)
        *retry_ms = 1;
    return DLOCK_EBUSY;
}

/* ---- a cancelled wait ---------------------------------------------------- */

/*
 * [B-CANCEL-1] A lock wait is a statement that blocks its connection, and
 * the protocol has no out-of-band cancel: a watcher thread waits for the
 * acquire's cancel and then sends KILL QUERY for the waiting connection
 * over a connection of its own.
 *
 * One watcher per session, started by its first wait and kept until the
 * session closes, re-armed by every wait: a thread per wait cost a
 * pthread_create before it and a join (a switch to the watcher and back)
 * after it, on the hand-off's path. Arming pokes the watcher (a byte in a
 * pipe) so that it polls this wait's cancel descriptors; disarming only
 * flips the state under the mutex, leaving the watcher asleep in its poll
 * until the next arm, unless a kill is under way, which it waits for. A
 * watcher woken by a stale descriptor (an earlier acquire's, closed or
 * fired since) finds the state not armed for its generation and sleeps
 * on the condition variable instead.
 */
enum my_watch_state {
    MY_WATCH_IDLE,    /* no wait: the watcher sleeps */
    MY_WATCH_ARMED,   /* a wait runs: the watcher polls its cancel fds */
    MY_WATCH_KILLING, /* the watcher sends KILL QUERY, without the mutex */
    MY_WATCH_FIRED    /* it did (or tried): disarm absorbs it */
};

struct dlock__my_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int wake[2];          /* a pipe: poke the watcher out of its poll */
    /* The rest under mu. */
    enum my_watch_state state;
    unsigned long gen;    /* one per arm */
    int cfds[2];          /* this wait's cancel descriptors */
    size_t ncfds;
    unsigned long id;     /* the waiting connection's thread id */
    bool sent;            /* the KILL QUERY went out */
    bool quit;
};

/* Send KILL QUERY id from a connection of our own; true if it went. */
static bool kill_send(const struct dlock__my_ctx *x, unsigned long id)
{
    struct dlock__my_conn kc;
    char q[64];
    bool sent = false;

    if (dlock__my_connect(&kc, x, false) == 0) {
        int len = snprintf(q, sizeof q, "KILL QUERY %lu", id);
        sent = mysql_real_query(kc.db, q, (unsigned long)len) == 0;
    }
    dlock__my_conn_close(&kc);
    return sent;
}

/* Called with w->mu held and the state armed: poll this wait's cancel
 * fds (and the poke) without the mutex; true if the wait of generation
 * gen was cancelled. */
static bool kill_poll(struct dlock__my_watch *w, unsigned long gen)
{
    struct pollfd pf[3];
    char buf[16];
    size_t n = 0;
    bool fired = false;

    pf[n++] = (struct pollfd){.fd = w->wake[0], .events = POLLIN};
    for (size_t i = 0; i < w->ncfds; i++)
        pf[n++] = (struct pollfd){.fd = w->cfds[i], .events = POLLIN};
    pthread_mutex_unlock(&w->mu);
    while (poll(pf, (nfds_t)n, -1) < 0)
        ;
    while (read(w->wake[0], buf, sizeof buf) > 0)
        ; /* non-blocking: drain the pokes */
    pthread_mutex_lock(&w->mu);
    for (size_t i = 1; i < n; i++)
        fired |= pf[i].revents != 0;
    return fired && w->state == MY_WATCH_ARMED && w->gen == gen;
}

static void *kill_watch(void *arg)
{
    struct dlock__my_session *ms = arg;
    struct dlock__my_watch *w = ms->watch;

    mysql_thread_init();
    pthread_mutex_lock(&w->mu);
    while (!w->quit) {
        if (w->state != MY_WATCH_ARMED) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        if (!kill_poll(w, w->gen))
            continue;
        w->state = MY_WATCH_KILLING;
        pthread_mutex_unlock(&w->mu);
        bool sent = kill_send(ms->x, w->id);
        pthread_mutex_lock(&w->mu);
        w->sent = sent;
        w->state = MY_WATCH_FIRED;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    mysql_thread_end();
    return NULL;
}

/* The session's watcher, started on first use; NULL if it cannot be. */
static struct dlock__my_watch *kill_watcher(struct dlock__my_session *ms)
{
    struct dlock__my_watch *w = ms->watch;

    if (w != NULL)
        return w;
    if ((w = calloc(1, sizeof *w)) == NULL)
        return NULL;
    if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    ms->watch = w;
    if (pthread_create(&w->th, NULL, kill_watch, ms) != 0) {
        ms->watch = NULL;
        dlock__my_watch_free(w, false);
        return NULL;
    }
    return w;
}

void dlock__my_kill_arm(struct dlock__my_kill *k,
                        struct dlock__my_session *ms)
{
    struct dlock__my_watch *w;
    int cfds[2];
    size_t n;

    k->ms = ms;
    k->armed = false;
    n = dlock_session_cancel_fds(&ms->base, cfds, 2);
    if (n == 0 || (w = kill_watcher(ms)) == NULL)
        return; /* not cancellable: the wait runs its time */
    pthread_mutex_lock(&w->mu);
    memcpy(w->cfds, cfds, sizeof cfds);
    w->ncfds = n;
    w->id = mysql_thread_id(ms->conn.db);
    w->sent = false;
    w->gen++;
    w->state = MY_WATCH_ARMED;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    /* Out of a poll of an earlier wait's descriptors, if it is in one. */
    (void)!write(w->wake[1], "x", 1);
    k->armed = true;
}

bool dlock__my_kill_disarm(struct dlock__my_kill *k)
{
    struct dlock__my_conn *c = &k->ms->conn;
    struct dlock__my_watch *w = k->ms->watch;
    bool sent;

    if (!k->armed)
        return false;
    pthread_mutex_lock(&w->mu);
    while (w->state == MY_WATCH_KILLING)
        pthread_cond_wait(&w->cv, &w->mu);
    sent = w->state == MY_WATCH_FIRED && w->sent;
    w->state = MY_WATCH_IDLE;
    pthread_mutex_unlock(&w->mu);
    if (!sent)
        return false;
    /* The kill is done: it ended the wait, or it waits for the next
     * statement. Let that be this one (twice at most), not the undo. */
    for (int i = 0; i < 2 && !c->broken; i++)
        if (mysql_real_query(c->db, "DO 0", 4) == 0)
            break;
    return true;
}

void dlock__my_watch_free(struct dlock__my_watch *w, bool started)
{
    if (w == NULL)
        return;
    if (started) {
        pthread_mutex_lock(&w->mu);
        w->quit = true;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        (void)!write(w->wake[1], "x", 1);
        pthread_join(w->th, NULL);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    close(w->wake[0]);
    close(w->wake[1]);
    free(w);
}
