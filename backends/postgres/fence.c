/*
 * fence.c: where the fencing tokens of every mode (advisory,
 * advisory_xact, for_update, lease) come from, at no disk flush and no
 * table write per acquire, never repeated across a server crash.
 *
 * A fence is a value v of dlock_fence_useq, an UNLOGGED SEQUENCE
 * (PostgreSQL 15 or later), drawn by nextval() in the statement that took
 * the lock (only when it took it), whole: v's top bits, v >> 40, are its
 * epoch. The durable epoch E is the one row of dlock_fence_epoch, a logged
 * table (its row made with E = 0, which no fence has) and written only by
 * the two transactions below, each committed with synchronous_commit on
 * (so a value of E that anyone can read is on disk: such a commit is
 * flushed before it becomes visible). Each client keeps the E it last
 * read or wrote (struct pg_ctx's epoch, 0 at first).
 *
 *   v may be handed out when 1 <= v >> 40 == the client's E.
 *   v >> 40 above it: confirm, i.e. read E, and if E is still below
 *     v >> 40, raise: E = greatest(E, v >> 40). Then judge v again.
 *   v >> 40 below it (0 after a crash): bump, then draw again.
 *   Bump: lock E's row (FOR UPDATE: bumpers and raisers queue), read the
 *     sequence; if it is below greatest(E, 1) << 40, E = E + 1 and
 *     setval(E << 40); commit. Otherwise someone did it first: nothing.
 *
 * Why no flush. nextval() of an unlogged sequence writes no WAL and takes
 * no transaction id (nextval_internal() asks for one only when it logs),
 * so the lock's statement commits as a read-only one. Measured with
 * pgbench on a durable server: a pg_try_advisory_lock +
 * pg_advisory_unlock cycle took 59 us bare, 68 us (1.15x) with the draw in
 * the lock's statement, 124 us with the upserted counter row of the
 * version before.
 *
 * Why never repeated, nor decreasing for a name. Within one life of the
 * server (from a start to a crash) the sequence only grows: nextval()
 * grows it, CACHE 1 keeps the order across server processes, and the bump
 * calls setval() only above the value it read under the row lock
 * (greatest(E, 1) << 40 > last value; nothing else draws 2^40 values in
 * between). A lock's fence is drawn after it was granted, so its next
 * holder draws later and larger. Across lives:
 *  - A value is handed out only with v >> 40 <= a durable E (the check
 *    against the client's E, which was read from a committed row, or a
 *    raise committed over the same connection v was drawn over, so in the
 *    same life: a raise in a later life would vouch for a value of a
 *    sequence that is gone).
 *  - A crash resets the unlogged sequence to its start, 1
 *    (ResetUnloggedRelations at the end of crash recovery, before any
 *    connection; a clean shutdown keeps it whole, and the order holds).
 *    Its values then have epoch 0, which no client hands out, until a bump
 *    finds it below E << 40 and sets it to (E + 1) << 40 with E + 1
 *    durable. Every value of the new life is above (E + 1) << 40, every
 *    earlier one below it (its epoch was at most the durable E). A value
 *    of a reset sequence would need 2^40 draws to reach epoch 1 by
 *    itself; each of them is discarded and starts a bump.
 *  - Concurrent bumpers queue on the row lock; the second finds the
 *    sequence above the new E << 40 and does nothing. Were it to setval
 *    again, to the same value, it would repeat fences: hence the check
 *    under the lock, and never a setval elsewhere.
 *  - setval() is not transactional: others draw (E + 1) << 40 and above
 *    before the bump commits. Their v >> 40 is above their E, so they
 *    confirm first: the raise waits for the bumper's row lock. A bump that
 *    fails after its setval leaves the sequence ahead of E the same way,
 *    and the next raise covers it.
 *  - A stale client E (another client bumped or raised since) is below
 *    v >> 40: one confirm refreshes it. A value drawn just before another
 *    client's raise can be below the new E: it is drawn again.
 *  - Running out: after 2^40 draws in an epoch, v >> 40 exceeds E and the
 *    first to see it raises E: the same path. E must stay below 2^23 (v is
 *    a positive bigint): 8 million crashes.
 *  - Upgrade: dlock 0.1 drew fences from a logged dlock_fence_seq (below
 *    2^40), development versions of 0.2 as e << 40 | n from unlogged
 *    counters, e at most the same row's E. A new sequence starts at 1, so
 *    the first bump moves it to (E + 1) << 40, above all of them.
 *
 * What this does not cover, as no fence source of one server does: a
 * standby promoted after asynchronous replication lost the last bump or
 * raise, or a restore to a point in time, brings back an older E; a
 * setval or RESTART of the sequence by hand within a life.
 *
 * It leaves the statements that draw with the lock to the modes, and
 * running statements to schema.c.
 */
#include <stdio.h>
#include <string.h>

#include "pg.h"

/* The epoch below this (v is a positive bigint). */
#define FENCE_E_LIMIT (1ull << 23)

static const char SQL_DRAW[] = "SELECT " DLOCK__PG_FENCE_DRAW;
static const char SQL_EPOCH[] =
    "SELECT epoch FROM dlock_fence_epoch WHERE id = 1";
/* The raise ($1: the epoch of a value drawn), committed synchronously. */
static const char SQL_SYNC[] =
    "SELECT set_config('synchronous_commit', 'on', true)";
static const char SQL_RAISE[] =
    "UPDATE dlock_fence_epoch SET epoch = greatest(epoch, $1::bigint)"
    " WHERE id = 1 RETURNING epoch";
/* The bump: lock the row (and say E), then move the sequence above a new
 * E if it is below greatest(E, 1) << 40 (one row back if it was). */
static const char SQL_LOCK_EPOCH[] =
    "SELECT epoch, set_config('synchronous_commit', 'on', true)"
    " FROM dlock_fence_epoch WHERE id = 1 FOR UPDATE";
static const char SQL_BUMP[] =
    "WITH b AS (UPDATE dlock_fence_epoch SET epoch = epoch + 1"
    "   WHERE id = 1 AND epoch + 1 < 8388608"
    "   AND (SELECT last_value FROM dlock_fence_useq)"
    "     < greatest(epoch, 1) << 40 RETURNING epoch)"
    " SELECT epoch, setval('dlock_fence_useq', epoch << 40) FROM b";
_Static_assert(FENCE_E_LIMIT == 8388608, "SQL_BUMP's limit");

/* The client's E rises to e (never falls). */
static void fence_learn(struct pg_ctx *x, uint64_t e)
{
    uint64_t old = atomic_load(&x->epoch);

    while (old < e && !atomic_compare_exchange_weak(&x->epoch, &old, e))
        ;
}

bool dlock__pg_fence_ok(struct pg_ctx *x, uint64_t v)
{
    uint64_t e = v >> 40;

    return e >= 1 && e == atomic_load(&x->epoch);
}

/* A failure of the nq statements q (rc from dlock__pg_run) as what's, in
 * err; returns the code. An open transaction is rolled back. */
static int fence_fail(struct pg_session *s, int rc, const struct pg_res *res,
                      const char *what, char *err, size_t errlen)
{
    if (rc == PG_SQLERR)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "%s: %s (SQLSTATE %s)",
                          what,
                          PQresultErrorField(res->r[res->failed],
                                             PG_DIAG_MESSAGE_PRIMARY),
                          res->state);
    else if (rc == DLOCK_ECONNECT)
        dlock_errorf(err, errlen, rc, "%s: %s", what, s->why);
    else
        dlock_errorf(err, errlen, rc, "%s: creating its tables failed", what);
    if (s->conn != NULL && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
        dlock__pg_rollback(s);
    return rc;
}

/* Run q; on success *out is the first column of statement at's first row
 * (0 if it has none) and *rows its row count. */
static int fence_run(struct pg_session *s, const struct pg_q *q, int nq,
                     int at, const char *what, uint64_t *out, int *rows,
                     char *err, size_t errlen)
{
    struct pg_res res;
    int rc = dlock__pg_run(s, q, nq, dlock__pg_deadline(s->cf), &res);
    const PGresult *r;

    if (rc != DLOCK_OK) {
        rc = fence_fail(s, rc, &res, what, err, errlen);
        dlock__pg_res_clear(&res);
        return rc;
    }
    r = res.r[at];
    *rows = PQntuples(r);
    *out = *rows > 0 && !PQgetisnull(r, 0, 0) ? dlock__pg_u64(r, 0, 0) : 0;
    dlock__pg_res_clear(&res);
    return DLOCK_OK;
}

static int fence_no_row(char *err, size_t errlen)
{
    return dlock_errorf(err, errlen, DLOCK_ERROR,
                        "the row of dlock_fence_epoch is missing; fencing "
                        "cannot go on without it (restore it with an epoch "
                        "above any used)");
}

/* v's epoch e is above the client's E: read E, raise it to e if it is
 * below (synchronous commit), and learn it. */
static int fence_confirm(struct pg_session *s, uint64_t e, char *err,
                         size_t errlen)
{
    char es[24];
    struct pg_q read = {SQL_EPOCH, 0, {NULL}};
    struct pg_q raise[4] = {
        {"BEGIN", 0, {NULL}},
        {SQL_SYNC, 0, {NULL}},
        {SQL_RAISE, 1, {es}},
        {"COMMIT", 0, {NULL}},
    };
    uint64_t known;
    int rows, rc = fence_run(s, &read, 1, 0, "fence epoch", &known, &rows,
                             err, errlen);

    if (rc == DLOCK_OK && rows > 0 && known < e) {
        snprintf(es, sizeof es, "%llu", (unsigned long long)e);
        /* known: greatest(E, e), as committed */
        rc = fence_run(s, raise, 4, 2, "raise the fence epoch", &known,
                       &rows, err, errlen);
    }
    if (rc == DLOCK_OK && rows == 0) /* (or deleted since the read) */
        return fence_no_row(err, errlen);
    if (rc == DLOCK_OK)
        fence_learn(s->x, known);
    return rc;
}

/* The bump transaction, in one round trip; learns the E it leaves. */
static int fence_bump(struct pg_session *s, char *err, size_t errlen)
{
    struct pg_q q[4] = {
        {"BEGIN", 0, {NULL}},
        {SQL_LOCK_EPOCH, 0, {NULL}},
        {SQL_BUMP, 0, {NULL}},
        {"COMMIT", 0, {NULL}},
    };
    struct pg_res res;
    uint64_t e;
    int rc = dlock__pg_run(s, q, 4, dlock__pg_deadline(s->cf), &res);

    if (rc != DLOCK_OK) {
        rc = fence_fail(s, rc, &res, "new fence epoch", err, errlen);
        dlock__pg_res_clear(&res);
        return rc;
    }
    if (PQntuples(res.r[1]) == 0)
        rc = fence_no_row(err, errlen);
    else if ((e = dlock__pg_u64(res.r[1], 0, 0)) + 1 >= FENCE_E_LIMIT)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                          "fence epoch %llu: no new epoch left below 2^23",
                          (unsigned long long)e);
    else
        fence_learn(s->x, PQntuples(res.r[2]) > 0
                              ? dlock__pg_u64(res.r[2], 0, 0)
                              : e);
    dlock__pg_res_clear(&res);
    return rc;
}

int dlock__pg_fence_learn(struct pg_session *s, char *err, size_t errlen)
{
    if (atomic_load(&s->x->epoch) != 0)
        return DLOCK_OK;
    /* Epoch 0 is below any committed one: a read, and nothing raised. */
    return fence_confirm(s, 0, err, errlen);
}

int dlock__pg_fence(struct pg_session *s, uint64_t v, uint64_t *out,
                    char *err, size_t errlen)
{
    struct pg_q draw = {SQL_DRAW, 0, {NULL}};
    int rc = DLOCK_OK, rows;

    for (int attempt = 0; attempt < 4 && rc == DLOCK_OK; attempt++) {
        if (v == 0 &&
            (rc = fence_run(s, &draw, 1, 0, "fence", &v, &rows, err,
                            errlen)) != DLOCK_OK)
            break;
        if (v >> 40 > atomic_load(&s->x->epoch) &&
            (rc = fence_confirm(s, v >> 40, err, errlen)) != DLOCK_OK)
            break;
        if (dlock__pg_fence_ok(s->x, v)) {
            *out = v;
            return DLOCK_OK;
        }
        if (v >> 40 < atomic_load(&s->x->epoch) || v >> 40 == 0)
            rc = fence_bump(s, err, errlen);
        v = 0; /* discarded: draw again */
    }
    if (rc == DLOCK_OK)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                          "fence: dlock_fence_useq keeps falling below the "
                          "epoch in dlock_fence_epoch (is the server "
                          "crashing, or something resetting it?)");
    return rc;
}

int dlock__pg_fence_server(struct pg_session *s, char *err, size_t errlen)
{
    int v = PQserverVersion(s->conn);

    if (v >= 150000)
        return DLOCK_OK;
    return dlock_errorf(err, errlen, DLOCK_EUNSUPPORTED,
                        "mode=%s needs PostgreSQL 15 or later (this server "
                        "is %d.%d; its fencing tokens come from an UNLOGGED "
                        "SEQUENCE, new in 15)",
                        s->cf->mode->pub.name, v / 10000, v / 100 % 100);
}
