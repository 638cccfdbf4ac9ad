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

/* The watcher: sleep until the wait ends or the acquire is cancelled; on a
 * cancel, kill the waiting statement from a connection of our own (the
 * waiting one is busy, and the protocol has no out-of-band cancel). */
static void *kill_watch(void *arg)
{
    struct dlock__my_kill *k = arg;
    struct pollfd pf[3];
    struct dlock__my_conn kc;
    char q[64];
    size_t n = 0;

    pf[n++] = (struct pollfd){.fd = k->stop[0], .events = POLLIN};
    for (size_t i = 0; i < k->ncfds; i++)
        pf[n++] = (struct pollfd){.fd = k->cfds[i], .events = POLLIN};
    while (poll(pf, (nfds_t)n, -1) < 0)
        ;
    if (pf[0].revents != 0)
        return NULL; /* the wait ended by itself */
    mysql_thread_init();
    if (dlock__my_connect(&kc, k->ms->x, false) == 0) {
        int len = snprintf(q, sizeof q, "KILL QUERY %lu", k->id);
        k->sent = mysql_real_query(kc.db, q, (unsigned long)len) == 0;
    }
    dlock__my_conn_close(&kc);
    mysql_thread_end();
    return NULL;
}

void dlock__my_kill_arm(struct dlock__my_kill *k,
                        struct dlock__my_session *ms)
{
    memset(k, 0, sizeof *k);
    k->ms = ms;
    k->ncfds = dlock_session_cancel_fds(&ms->base, k->cfds, 2);
    k->id = mysql_thread_id(ms->conn.db);
    if (k->ncfds == 0 || pipe2(k->stop, O_CLOEXEC) != 0)
        return; /* not cancellable: the wait runs its time */
    k->started = pthread_create(&k->th, NULL, kill_watch, k) == 0;
    if (!k->started) {
        close(k->stop[0]);
        close(k->stop[1]);
    }
}

bool dlock__my_kill_disarm(struct dlock__my_kill *k)
{
    struct dlock__my_conn *c = &k->ms->conn;

    if (!k->started)
        return false;
    (void)!write(k->stop[1], "x", 1);
    pthread_join(k->th, NULL);
    close(k->stop[0]);
    close(k->stop[1]);
    if (!k->sent)
        return false;
    /* The kill is done: it ended the wait, or it waits for the next
     * statement. Let that be this one (twice at most), not the undo. */
    for (int i = 0; i < 2 && !c->broken; i++)
        if (mysql_real_query(c->db, "DO 0", 4) == 0)
            break;
    return true;
}
