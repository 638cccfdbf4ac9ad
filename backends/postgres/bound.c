/*
 * bound.c: what the three connection-bound modes (advisory, advisory_xact,
 * for_update) share. Their locks live as long as the session's connection
 * (and, for the transactional two, its open transaction), so a renewal is
 * one round trip that proves the connection alive, a release is one
 * statement on that connection, and a release on a connection that was
 * replaced finds the lock already gone.
 *
 * They also bound how long a holder cut off from the server may believe it
 * holds [B-BOUND-1]: the server ends a session silent for longer than
 * dlock_server_timeout_ms(lease) (idle_session_timeout for advisory's idle
 * session, idle_in_transaction_session_timeout for the open transaction of
 * the other two), and core stops believing a lease after the last confirmed
 * round trip, which is shorter. TCP keepalives besides make the server
 * notice a vanished host sooner (conf.c computes them).
 *
 * The statements, and what each mode checks in their answers, are the
 * mode's (judge and check functions); running statements is conn.c's.
 *
 * Divisions: limits as text; renewal; release.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "pg.h"

/* ---- limits as text ---------------------------------------------------- */

void dlock__pg_idle_text(char out[16], uint32_t lease_ms)
{
    snprintf(out, 16, "%u", dlock_server_timeout_ms(lease_ms));
}

void dlock__pg_lock_timeout(char out[16], int64_t deadline)
{
    int64_t left;

    if (deadline == 0 || deadline == INT64_MAX) {
        strcpy(out, "0");
        return;
    }
    left = deadline - dlock_now_ms();
    if (left < 1)
        left = 1;
    if (left > INT_MAX)
        left = INT_MAX;
    snprintf(out, 16, "%d", (int)left);
}

/* The server's lock_timeout ends a native wait at the deadline, so allow
 * one more timeout= for the answer. */
int64_t dlock__pg_wait_deadline(const struct pg_conf *cf, int64_t deadline)
{
    if (deadline == 0)
        return dlock__pg_deadline(cf);
    if (deadline == INT64_MAX || cf->timeout_ms == 0)
        return INT64_MAX;
    return deadline + cf->timeout_ms;
}

/* ---- renewal ----------------------------------------------------------- */

int dlock__pg_bound_renew(struct pg_session *s, struct dlock_renewal *items,
                          size_t n, const char *probe,
                          void (*judge)(struct pg_session *s,
                                        const PGresult *r, char *why,
                                        size_t cap))
{
    char why[512] = "";
    struct pg_res res;
    bool any = false;
    int rc;

    for (size_t i = 0; i < n; i++)
        any |= items[i].grant->word[1] == s->gen;
    if (!any)
        snprintf(why, sizeof why, "the connection that held it was lost");
    else if (!dlock__pg_alive(s))
        snprintf(why, sizeof why, "connection lost: %s", s->why);
    else {
        struct pg_q q = {probe, 0, {NULL}};
        rc = dlock__pg_exec(s, &q, 1, dlock__pg_deadline(s->cf), &res);
        if (rc == DLOCK_ECONNECT)
            snprintf(why, sizeof why, "connection lost: %s", s->why);
        else if (rc == PG_SQLERR)
            snprintf(why, sizeof why, "%s (SQLSTATE %s)",
                     PQresultErrorField(res.r[0], PG_DIAG_MESSAGE_PRIMARY),
                     res.state);
        else if (judge != NULL)
            judge(s, res.r[0], why, sizeof why);
        dlock__pg_res_clear(&res);
    }
    for (size_t i = 0; i < n; i++) {
        if (why[0] == '\0' && items[i].grant->word[1] == s->gen)
            items[i].result = DLOCK_OK;
        else
            items[i].result = dlock_session_error(
                &s->base, DLOCK_ELOST, "%s; the lock went with it",
                why[0] ? why : "the connection that held it was lost");
    }
    return DLOCK_OK;
}

/* ---- release ----------------------------------------------------------- */

int dlock__pg_bound_release(struct pg_session *s,
                            const struct dlock_grant *grant,
                            const struct pg_q *q, int nq, const char *what,
                            int (*check)(struct pg_session *s,
                                         PGresult *r))
{
    struct pg_res res;
    int rc;

    if (s->ngrants > 0)
        s->ngrants--;
    if (grant->word[1] != s->gen || !dlock__pg_alive(s))
        return dlock_session_error(&s->base, DLOCK_ELOST,
                                   "the connection that held the lock was "
                                   "lost, and the server freed the lock "
                                   "with it");
    rc = dlock__pg_exec(s, q, nq, dlock__pg_deadline(s->cf), &res);
    if (rc == DLOCK_OK)
        rc = check(s, res.r[nq - 1]);
    else if (rc == PG_SQLERR)
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, what, &res);
    dlock__pg_res_clear(&res);
    return rc;
}
