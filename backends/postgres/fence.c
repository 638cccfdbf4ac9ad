/*
 * fence.c: where the fencing tokens of modes advisory, advisory_xact and
 * for_update come from, at no disk flush per acquire, never repeated
 * across a server crash.
 *
 *   fence = (e << 40) | n
 *
 * n is a per-name counter in an UNLOGGED table (the mode's: advisory's
 * table=, dlock_fence_holders for the two transactional modes), which
 * also keeps the owner id that inspect shows. e, the epoch, is stored in
 * the counter's row and comes from dlock_fence_epoch, a logged one-row
 * table, bumped only when the unlogged state was lost. The marker, the
 * one row of the unlogged dlock_fence_marker, holds the current epoch and
 * vanishes with the counters.
 *
 * Why no flush. PostgreSQL writes no WAL for an unlogged relation, and
 * RecordTransactionCommit() (src/backend/access/transam/xact.c, 15)
 * flushes the WAL at commit only when the transaction wrote WAL before
 * its commit record (wrote_xlog) or deletes files: a transaction that
 * touched unlogged tables alone commits asynchronously (its commit record
 * is written and flushed later by the WAL writer, whatever
 * synchronous_commit says), so the statement that draws a fence never
 * waits for the disk. Measured: pg_stat_wal.wal_sync counts the flushes
 * (docs/backends/postgres.md has the figures).
 *
 * Why never repeated. At the end of crash recovery (StartupXLOG:
 * ResetUnloggedRelations(UNLOGGED_RELATION_INIT)), before it accepts a
 * connection, the server replaces every unlogged relation with its empty
 * init fork; a clean shutdown (fast or smart) checkpoints them and keeps
 * them whole. So counters and marker are lost together or kept together,
 * and a fence statement that finds no marker (it inserts the name's row
 * with e NULL) knows the counters may restart: its value is discarded,
 * and the client runs the bump transaction below, whose epoch is durable
 * before any statement can see the new marker (a commit that wrote WAL,
 * with synchronous_commit on, is flushed before it becomes visible).
 * Every fence drawn afterwards has an epoch above every epoch a fence was
 * drawn with before the crash. Each row's (e, n) only grows: n by one per
 * draw; e only when a bump sets it to the new marker.
 *
 * Bump: lock the epoch row (FOR UPDATE serialises bumpers); if the marker
 * is still absent (or the bump is forced), epoch + 1 and the marker set
 * to it; then the counter rows still without an epoch (drawn while the
 * marker was absent: none of their values went out) get the marker's and
 * restart at 0; COMMIT, synchronous. A counter that reached 2^40 forces a
 * bump and restarts its own row the same way: its next fence has a larger
 * epoch. A concurrent draw waits for the row lock and then updates the
 * row's newest version, so it reads the new epoch from the row itself,
 * never a stale one from its snapshot. The epoch must stay below 2^23 (a
 * positive bigint): 8 million crashes.
 *
 * What this does not cover, as the durable counter before it did not: a
 * standby promoted after asynchronous replication lost the last bump, or
 * a restore to a point in time, brings back an older epoch; deleting or
 * truncating counter rows by hand while the marker stays restarts those
 * names' counters in the same epoch (drop the marker row with them).
 *
 * It leaves the statements that draw a fence (with the lock, or alone) to
 * the modes, which answer e and n first; running statements to schema.c.
 */
#include <stdio.h>
#include <string.h>

#include "pg.h"

/* n must stay below this; the epoch below 2^23. */
#define FENCE_N_LIMIT (1ull << 40)
#define FENCE_E_LIMIT (1ull << 23)

/* BEGIN; lock the epoch row, with this transaction's commit synchronous;
 * bump if the marker is absent or $1 (forced); mend the mode's counter
 * rows ($1, $2: the name's key, restarted when forced); COMMIT. */
static const char SQL_LOCK_EPOCH[] =
    "SELECT set_config('synchronous_commit', 'on', true)"
    " FROM dlock_fence_epoch WHERE id = 1 FOR UPDATE";
static const char SQL_BUMP[] =
    "WITH b AS (UPDATE dlock_fence_epoch SET epoch = epoch + 1"
    "   WHERE id = 1 AND ($1::bool OR NOT EXISTS"
    "     (SELECT 1 FROM dlock_fence_marker WHERE id = 1)) RETURNING epoch)"
    " INSERT INTO dlock_fence_marker AS m (id, epoch) SELECT 1, epoch FROM b"
    " ON CONFLICT (id) DO UPDATE SET epoch = EXCLUDED.epoch";

/* The fence in a result's columns ecol (e) and ncol (n): 1 if it may be
 * handed out, 0 if a bump must come first (*force: the counter is full),
 * -1 if the epoch is out of range. */
static int fence_of(const PGresult *r, int ecol, int ncol, uint64_t *out,
                    bool *force)
{
    uint64_t e, n;

    *force = false;
    if (PQgetisnull(r, 0, ecol))
        return 0;
    e = dlock__pg_u64(r, 0, ecol);
    n = dlock__pg_u64(r, 0, ncol);
    if (e == 0 || e >= FENCE_E_LIMIT)
        return -1;
    if (n == 0 || n >= FENCE_N_LIMIT) {
        *force = true;
        return 0;
    }
    *out = e << 40 | n;
    return 1;
}

/* The bump transaction, in one round trip. */
static int fence_bump(struct pg_session *s, const char *mend, bool force,
                      const char *key, char *err, size_t errlen)
{
    const char *f = force ? "true" : "false";
    struct pg_q q[5] = {
        {"BEGIN", 0, {NULL}},
        {SQL_LOCK_EPOCH, 0, {NULL}},
        {SQL_BUMP, 1, {f}},
        {mend, 2, {f, key}},
        {"COMMIT", 0, {NULL}},
    };
    struct pg_res res;
    int rc = dlock__pg_run(s, q, 5, dlock__pg_deadline(s->cf), &res);

    if (rc == DLOCK_OK && PQntuples(res.r[1]) == 0)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                          "the row of dlock_fence_epoch is missing; "
                          "fencing cannot go on without it (restore it "
                          "with an epoch above any used, or drop the "
                          "table to start over at a new epoch only if no "
                          "fence of this database is kept anywhere)");
    else if (rc == PG_SQLERR)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                          "new fence epoch: %s (SQLSTATE %s)",
                          PQresultErrorField(res.r[res.failed],
                                             PG_DIAG_MESSAGE_PRIMARY),
                          res.state);
    else if (rc != DLOCK_OK)
        dlock_errorf(err, errlen, rc, "new fence epoch: %s", s->why);
    dlock__pg_res_clear(&res);
    if (rc != DLOCK_OK && s->conn != NULL &&
        PQtransactionStatus(s->conn) != PQTRANS_IDLE)
        dlock__pg_rollback(s);
    return rc;
}

/* A statement's failure (rc from dlock__pg_run) in err; returns rc. */
static int fence_fail(struct pg_session *s, int rc, const struct pg_res *res,
                      char *err, size_t errlen)
{
    if (rc == PG_SQLERR)
        return dlock_errorf(err, errlen, DLOCK_ERROR,
                            "fence: %s (SQLSTATE %s)",
                            PQresultErrorField(res->r[res->failed],
                                               PG_DIAG_MESSAGE_PRIMARY),
                            res->state);
    if (rc == DLOCK_ECONNECT)
        return dlock_errorf(err, errlen, rc, "fence: %s", s->why);
    return dlock_errorf(err, errlen, rc, "fence: creating its tables failed");
}

int dlock__pg_fence(struct pg_session *s, const PGresult *r, int ecol,
                    int ncol, const struct pg_q *draw, const char *mend,
                    const char *key, uint64_t *out, char *err, size_t errlen)
{
    struct pg_res res = {{NULL}, -1, ""};
    bool force;
    int rc = DLOCK_OK, ok;

    for (int attempt = 0; attempt < 4 && rc == DLOCK_OK; attempt++) {
        if (r == NULL) {
            /* Draw again, after a bump. */
            rc = dlock__pg_run(s, draw, 1, dlock__pg_deadline(s->cf), &res);
            if (rc != DLOCK_OK) {
                rc = fence_fail(s, rc, &res, err, errlen);
                break;
            }
            r = res.r[0];
            ecol = 0;
            ncol = 1;
        }
        ok = fence_of(r, ecol, ncol, out, &force);
        if (ok > 0)
            break;
        if (ok < 0) {
            rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                              "fence epoch %s out of range (1 to 2^23 - 1)",
                              PQgetvalue(r, 0, ecol));
            break;
        }
        /* Discarded: no marker (or a full counter). */
        dlock__pg_res_clear(&res);
        r = NULL;
        rc = fence_bump(s, mend, force, key, err, errlen);
    }
    dlock__pg_res_clear(&res);
    if (rc == DLOCK_OK && r == NULL)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                          "fence: the marker in dlock_fence_marker keeps "
                          "vanishing (is the server crashing, or something "
                          "deleting its row?)");
    return rc;
}
