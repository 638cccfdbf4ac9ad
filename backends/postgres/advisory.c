/*
 * advisory.c: mode=advisory (the default), session advisory locks on a
 * 64-bit key. The server queues waiters (pg_advisory_lock under
 * lock_timeout) and frees the lock when the connection ends, so many locks
 * share one connection. The fence is drawn from the unlogged sequence
 * (fence.c) in the statement that takes the lock, when it took it.
 *
 * Session advisory locks live as long as the server process of the
 * connection, so a transaction-pooling proxy (PgBouncer
 * pool_mode=transaction) silently breaks them: every session notes its
 * server process and every answer is checked against it (advisory_xact is
 * the mode for such proxies). The server ends a session silent for longer
 * than its longest lease (idle_session_timeout). PostgreSQL 15 or later
 * (the unlogged sequence).
 *
 * Permits of a counting semaphore of N are N session advisory locks, the
 * slots, on keys derived from the name's key (SLOT_KEY below); a permit is
 * one slot held by one session, so it is freed with the connection like
 * a lock, and a crashed holder's permit comes back when the server ends
 * its session. No table is needed beyond the fence's (created on first
 * use). Why this design:
 *
 *  - One round trip takes at most one slot, by construction: a recursive
 *    query tries slot after slot, and its recursive term reads only the
 *    row of a slot that was NOT taken (a WHERE clause is evaluated before
 *    the select list that calls pg_try_advisory_lock), so after the first
 *    success there is no row to continue from. A "WHERE
 *    pg_try_advisory_lock(k) LIMIT 1" would rely on the executor
 *    stopping early, which SQL does not promise. The query starts at a
 *    random slot, to spread contenders over the slots.
 *  - The server keeps no queue over N keys, so a permit is never a native
 *    wait: a busy attempt returns EBUSY and core calls wait(), which
 *    LISTENs on the name's channel (listen.c); a release NOTIFYs it in
 *    the statement that unlocks the slot. A holder that dies sends no
 *    NOTIFY: core's retry after retry_max (500 ms by default) covers it.
 *    Permits are not granted in order of arrival (DLOCK_CAP_FAIR is the
 *    locks' claim).
 *  - Fences come from the one sequence, as for locks, drawn when a slot
 *    was taken: they strictly increase across permits.
 *  - The count N is not stored: clients that disagree on it are not
 *    detected, and at most the largest count's holders hold at once
 *    (the slots do not depend on N). A slot key that equals another
 *    name's key (2^-64 per pair) only takes capacity away, never adds.
 *  - [B-PIN-1] keeps two permits of one name off one session, which
 *    matters: a session that takes a slot it already holds is granted it
 *    again (advisory locks count re-entry per session).
 *
 * It leaves the round trips of renewal and release (and what a lost
 * connection means for them) to bound.c, inspect and the owner rows
 * (table=, dlock_owners by default) to inspect.c, the fence's epoch to
 * fence.c, the floor's loop to floor.c.
 *
 * Divisions: SQL; the session; acquire (and wait); release and renew (and
 * downgrade); the floor; the mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- SQL --------------------------------------------------------------- */

/* Indexes of the mode's statements in pg_conf.sql (printed with the
 * table name); each shared variant follows its exclusive one. */
enum {
    ADV_TRY, ADV_TRY_SH, ADV_WAIT, ADV_WAIT_SH, ADV_UNLOCK, ADV_UNLOCK_SH,
    ADV_PERMIT, ADV_PERMIT_UNDO, ADV_OWNERS_CLEAR, ADV_OWNERS_SET
};

/* The session's set-up: its server process, the keepalives and the
 * silence limit [B-BOUND-1]. */
static const char SQL_SETUP_SESSION[] =
    "SELECT pg_backend_pid(), set_config('tcp_keepalives_idle', $1, false),"
    " set_config('tcp_keepalives_interval', $2, false),"
    " set_config('tcp_keepalives_count', $3, false),"
    " set_config('idle_session_timeout', $4, false)";
static const char SQL_IDLE_LIMIT[] =
    "SELECT set_config('idle_session_timeout', $1, false)";
static const char SQL_PID[] = "SELECT pg_backend_pid()";

/* The CTE runs first and once (it calls a volatile function; MATERIALIZED
 * says so), and the WHERE clause before the select list, so the fence is
 * drawn only when the lock was granted, in the same statement and round
 * trip; an unlogged sequence, so the autocommit writes nothing and waits
 * for no disk (fence.c). The server process comes back first (not NULL
 * when the lock was taken: the floor's test), then the fence. */
#define ADV_DRAWN " SELECT pg_backend_pid(), " DLOCK__PG_FENCE_DRAW " FROM l"
static const char SQL_TRY[] =
    "WITH l AS MATERIALIZED"
    " (SELECT pg_try_advisory_lock($1::bigint) AS got)" ADV_DRAWN
    " WHERE l.got";
static const char SQL_TRY_SH[] =
    "WITH l AS MATERIALIZED"
    " (SELECT pg_try_advisory_lock_shared($1::bigint) AS got)" ADV_DRAWN
    " WHERE l.got";
/* A wait: the same, after a lock_timeout local to this implicit
 * transaction (the last parameter), set by a CTE the lock's CTE reads, so
 * it is in force before the wait begins; one statement, as fast as the
 * try when the lock is free. */
static const char SQL_WAIT[] =
    "WITH t AS MATERIALIZED"
    " (SELECT set_config('lock_timeout', $2, true) AS v),"
    " l AS MATERIALIZED (SELECT pg_advisory_lock($1::bigint) FROM t)"
    ADV_DRAWN;
static const char SQL_WAIT_SH[] =
    "WITH t AS MATERIALIZED"
    " (SELECT set_config('lock_timeout', $2, true) AS v),"
    " l AS MATERIALIZED (SELECT pg_advisory_lock_shared($1::bigint) FROM t)"
    ADV_DRAWN;

/* The key of slot I of the semaphore whose name has key K (SQL bigint
 * expressions): the first 8 bytes of SHA-256(K || "dlock permit" || I),
 * K as 8 bytes and I as 4, big-endian, read as a signed bigint. */
#define SLOT_KEY(K, I)                                                      \
    "('x' || encode(substr(sha256(int8send(" K ")"                          \
    " || 'dlock permit'::bytea || int4send(" I ")), 1, 8), 'hex'))"         \
    "::bit(64)::bigint"

/* One of $2 permits of the name with key $1, trying the slots in turn from
 * slot $3 and stopping at the first one taken: each step of the recursion
 * comes from a row whose slot was not taken (the filter runs before the
 * select list), so at most one slot is taken. The fence is drawn only when
 * one was (a row of g), in the same statement; the slot's key comes back
 * third. */
static const char SQL_PERMIT[] =
    "WITH RECURSIVE s(i, k, got) AS ("
    " SELECT 0, z.k, pg_try_advisory_lock(z.k)"
    "   FROM (SELECT " SLOT_KEY("$1::bigint", "$3::int") " AS k) z"
    " UNION ALL"
    " SELECT z.i, z.k, pg_try_advisory_lock(z.k)"
    "   FROM (SELECT s.i + 1 AS i, "
    SLOT_KEY("$1::bigint", "(s.i + 1 + $3::int) % $2::int") " AS k"
    "     FROM s WHERE NOT s.got AND s.i + 1 < $2::int) z),"
    " g AS MATERIALIZED (SELECT k FROM s WHERE got)"
    " SELECT pg_backend_pid(), " DLOCK__PG_FENCE_DRAW ", k FROM g";
/* After SQL_PERMIT failed: give back whichever of the $2 slots of the
 * name with key $1 this session holds (only the failed attempt can have
 * taken one [B-PIN-1]). */
static const char SQL_PERMIT_UNDO[] =
    "SELECT pg_advisory_unlock(z.k) FROM (SELECT "
    SLOT_KEY("$1::bigint", "i") " AS k"
    "   FROM generate_series(0, $2::int - 1) AS i) z"
    " WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory'"
    "   AND l.pid = pg_backend_pid() AND l.granted AND l.objsubid = 1"
    "   AND l.classid::bigint = ((z.k >> 32) & 4294967295)"
    "   AND l.objid::bigint = (z.k & 4294967295))";
/* Release the slot $1 and announce it on the name's channel $2; the
 * NOTIFY is delivered when this statement commits, after the unlock. */
static const char SQL_PERMIT_RELEASE[] =
    "SELECT pg_advisory_unlock($1::bigint), pg_notify($2, '')";

/* For inspect: the server processes holding a slot of the name, at any of
 * the DLOCK_PERMITS_MAX slots a count may have (1024 hashes and a pg_locks
 * scan: 5 ms with 1024 slots held, measured with pgbench). */
_Static_assert(DLOCK_PERMITS_MAX == 1024, "SQL_PERMIT_HOLDERS' 1023");
#define SQL_PERMIT_HOLDERS                                                  \
    "(SELECT string_agg(p.pid::text, ' ' ORDER BY p.pid)"                   \
    " FROM pg_locks p JOIN (SELECT " SLOT_KEY("$1::bigint", "i") " AS k"    \
    "   FROM generate_series(0, 1023) AS i) z"                              \
    " ON p.classid::bigint = ((z.k >> 32) & 4294967295)"                    \
    " AND p.objid::bigint = (z.k & 4294967295)"                             \
    " WHERE p.locktype = 'advisory' AND p.objsubid = 1 AND p.granted"       \
    " AND p.database = (SELECT oid FROM pg_database"                        \
    "   WHERE datname = current_database()))"

/* ---- the session ------------------------------------------------------- */

/* Session advisory locks live as long as this server process: note which
 * one it is (a proxy that swaps it shows up as a change), make the server
 * end the session when it falls silent for longer than the lease
 * [B-BOUND-1], and notice a vanished client host. */
static int adv_on_connect(struct pg_session *s, int64_t deadline, char *err,
                          size_t errlen)
{
    const struct pg_conf *cf = s->cf;
    char idle[16];
    struct pg_q q = {SQL_SETUP_SESSION, 4,
                     {cf->ka_idle, cf->ka_interval, cf->ka_count, idle}};
    struct pg_res res;
    int rc;

    if ((rc = dlock__pg_fence_server(s, err, errlen)) != DLOCK_OK)
        return rc;
    dlock__pg_idle_text(idle, cf->lease_ms);
    rc = dlock__pg_exec(s, &q, 1, deadline, &res);
    if (rc == DLOCK_OK) {
        s->backend_pid = atoi(PQgetvalue(res.r[0], 0, 0));
        s->covered_ms = cf->lease_ms;
    } else if (rc == PG_SQLERR)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "session set-up: %s",
                          PQresultErrorField(res.r[res.failed],
                                             PG_DIAG_MESSAGE_PRIMARY));
    else
        dlock_errorf(err, errlen, rc, "session set-up: %s", s->why);
    dlock__pg_res_clear(&res);
    return rc;
}

/* ---- acquire ----------------------------------------------------------- */

/* After a failed statement that may have taken a session lock: session
 * advisory locks ignore transaction rollback, so unlock explicitly (a
 * WARNING and false if it was not taken, which is harmless). A permit's
 * slot is unknown then, so every slot of the name this session holds is
 * given back (n is the count). */
static void adv_unlock_quietly(struct pg_session *s, const char *key, int sh,
                               const char *n)
{
    struct pg_q q = n != NULL
                        ? (struct pg_q){s->cf->sql[ADV_PERMIT_UNDO], 2,
                                        {key, n}}
                        : (struct pg_q){s->cf->sql[ADV_UNLOCK + sh], 1,
                                        {key}};
    struct pg_res res;

    if (s->conn == NULL)
        return;
    dlock__pg_exec(s, &q, 1, dlock__pg_deadline(s->cf), &res);
    dlock__pg_res_clear(&res);
}

/* One try (deadline 0), or one wait in the server's queue until deadline.
 * A permit is always one try (the server queues no one over N keys). */
static int adv_attempt(struct pg_session *s, const struct dlock_request *req,
                       int64_t deadline, struct dlock_grant *g)
{
    const struct pg_conf *cf = s->cf;
    int sh = req->kind == DLOCK_KIND_SHARED;
    bool permit = req->kind == DLOCK_KIND_PERMIT;
    char key[24], slot[24], lt[16], idle[16], n[12], first[12];
    char err[512];
    struct pg_q q[PG_MAXQ];
    struct pg_res res;
    uint8_t d[32];
    uint64_t k, fence, got;
    int nq = 0, nown = 0, rc, pid;
    /* The session's silence limit must cover the longest lease of its
     * locks; with none held yet it follows this one exactly (so a short
     * lease is also freed soon after its holder fell silent). */
    bool raise = req->lease_ms > s->covered_ms ||
                 (s->ngrants == 0 && req->lease_ms != s->covered_ms);

    if (permit)
        deadline = 0;
    dlock__pg_digest(cf, req->name, req->name_len, d);
    k = dlock__pg_key64(d);
    dlock__pg_key_text(key, k);
    if (raise) {
        /* In the same round trip (and only when it changes), so the
         * watchdog's renewals, a third of a lease apart, keep the session
         * and every lock on it alive [B-BOUND-1]. */
        dlock__pg_idle_text(idle, req->lease_ms);
        q[nq++] = (struct pg_q){SQL_IDLE_LIMIT, 1, {idle}};
    }
    if (!permit) {
        /* Who holds it, for inspect: only when this connection's row for
         * the key says someone else (inspect.c), in the same round trip
         * and implicit transaction as the lock. */
        const char *const *own =
            (const char *const *)&cf->sql[ADV_OWNERS_CLEAR];
        nown = dlock__pg_owner_q(s, own, key, sh ? "" : req->owner, &q[nq]);
        nq += nown;
    }
    if (permit) {
        /* [B-WAIT-1]: the channel's count before the attempt, so a
         * release after it wakes the wait() that follows a busy one. */
        dlock__pg_listen_note(s, k);
        snprintf(n, sizeof n, "%u", req->permits);
        snprintf(first, sizeof first, "%u",
                 dlock__pg_first_slot(req->permits));
        q[nq++] = (struct pg_q){cf->sql[ADV_PERMIT], 3, {key, n, first}};
    } else if (deadline != 0) {
        /* A wait in the server's lock queue, bounded by a lock_timeout
         * local to this implicit transaction (set_config(..., true)). */
        dlock__pg_lock_timeout(lt, deadline);
        q[nq++] = (struct pg_q){cf->sql[ADV_WAIT + sh], 2, {key, lt}};
    } else {
        q[nq++] = (struct pg_q){cf->sql[ADV_TRY + sh], 1, {key}};
    }
    s->waiting = deadline != 0;
    rc = dlock__pg_run(s, q, nq, dlock__pg_wait_deadline(cf, deadline), &res);
    s->waiting = false;
    if (rc < 0) /* ECONNECT, or creating the table failed */
        return rc;
    if (rc == PG_SQLERR) {
        rc = dlock__pg_busy_code(res.state, deadline);
        if (rc == 0)
            rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "lock", &res);
        dlock__pg_res_clear(&res);
        adv_unlock_quietly(s, key, sh, permit ? n : NULL);
        return rc;
    }
    if (nown > 0) /* committed with the lock's statement */
        dlock__pg_owner_noted(s, key, sh ? "" : req->owner);
    if (PQntuples(res.r[nq - 1]) == 0) {
        dlock__pg_res_clear(&res);
        /* Not queued at the server, and never will be: let the client's
         * next asynchronous acquire start [B-QUEUED-1]. */
        if (permit)
            dlock_session_queued(&s->base);
        return DLOCK_EBUSY;
    }
    pid = atoi(PQgetvalue(res.r[nq - 1], 0, 0));
    got = permit ? dlock__pg_u64(res.r[nq - 1], 0, 2) : k;
    dlock__pg_key_text(slot, got);
    if (pid != s->backend_pid) {
        dlock__pg_res_clear(&res);
        adv_unlock_quietly(s, slot, sh, NULL);
        return dlock_session_error(
            &s->base, DLOCK_ERROR,
            "the lock was taken by server process %d, but this connection "
            "began on process %d: a transaction-pooling proxy (e.g. "
            "PgBouncer pool_mode=transaction) stands between dlock and "
            "PostgreSQL, and session advisory locks do not hold through "
            "it; use mode=advisory_xact",
            pid, s->backend_pid);
    }
    /* The value drawn with the lock, or the epoch's check first: a
     * confirm, or a bump and a new draw, on this connection (fence.c). */
    fence = dlock__pg_u64(res.r[nq - 1], 0, 1);
    dlock__pg_res_clear(&res);
    rc = DLOCK_OK;
    if (!dlock__pg_fence_ok(s->x, fence))
        rc = dlock__pg_fence(s, fence, &fence, err, sizeof err);
    if (rc != DLOCK_OK) {
        adv_unlock_quietly(s, slot, sh, NULL);
        return dlock_session_error(&s->base, rc, "%s", err);
    }
    g->fence = fence;
    g->word[0] = got; /* the key to unlock: the lock's, or the slot's */
    g->word[1] = s->gen;
    s->ngrants++;
    if (raise)
        s->covered_ms = req->lease_ms;
    return DLOCK_OK;
}

static int adv_acquire(struct dlock_session *ds,
                       const struct dlock_request *req, int64_t deadline,
                       struct dlock_grant *g, uint32_t *retry_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    int rc = dlock__pg_ready(s);

    (void)retry_ms;
    if (rc != DLOCK_OK)
        return rc;
    /* A wait joins the server's queue in its first round trip (the limit
     * and the lock are pipelined), which takes a free lock as fast as a
     * try would. An earlier version tried first and queued only after the
     * try failed, one round trip late: callers arriving meanwhile were
     * queued ahead, and `dlock bench` measured 0.80 of contested grants in
     * arrival order against 0.96 without the try, and fewer grants. */
    return adv_attempt(s, req, deadline, g);
}

/* ---- release and renew ------------------------------------------------- */

/* pg_advisory_unlock() says false when this session did not hold it. */
static int adv_unlocked(struct pg_session *s, PGresult *r)
{
    if (strcmp(PQgetvalue(r, 0, 0), "t") == 0)
        return DLOCK_OK;
    return dlock_session_error(
        &s->base, DLOCK_ENOTOWNER,
        "the server says this session did not hold the lock (was "
        "pg_advisory_unlock_all() run on it, or is a pooling proxy in "
        "between?)");
}

/* A permit's release also NOTIFYs the name's channel, where waiters for
 * a permit LISTEN (they cannot queue at the server). */
static int adv_release(struct dlock_session *ds,
                       const struct dlock_request *req, struct dlock_grant *g)
{
    struct pg_session *s = (struct pg_session *)ds;
    char key[24], chan[24];
    uint8_t d[32];
    struct pg_q q = {s->cf->sql[ADV_UNLOCK + (req->kind == DLOCK_KIND_SHARED)],
                     1, {key}};

    dlock__pg_key_text(key, g->word[0]);
    if (req->kind == DLOCK_KIND_PERMIT) {
        dlock__pg_digest(s->cf, req->name, req->name_len, d);
        dlock__pg_channel_name(chan, dlock__pg_key64(d));
        q = (struct pg_q){SQL_PERMIT_RELEASE, 2, {key, chan}};
    }
    return dlock__pg_bound_release(s, g, &q, 1, "unlock", adv_unlocked);
}

/* A writer becomes a reader in one round trip: the shared lock first,
 * granted at once (a server process never waits for itself, and
 * PostgreSQL puts a request that conflicts only with waiters queued behind
 * locks it holds ahead of them), then the exclusive one goes. There is no
 * moment without a lock, so a writer queued meanwhile stays queued. */
static int adv_downgrade(struct dlock_session *ds,
                         const struct dlock_request *req,
                         struct dlock_grant *g)
{
    struct pg_session *s = (struct pg_session *)ds;
    char key[24];
    struct pg_q q[2] = {
        {"SELECT pg_advisory_lock_shared($1::bigint)", 1, {key}},
        {s->cf->sql[ADV_UNLOCK], 1, {key}},
    };
    struct pg_res res;
    int rc;

    (void)req;
    dlock__pg_key_text(key, g->word[0]);
    rc = dlock__pg_run(s, q, 2, dlock__pg_deadline(s->cf), &res);
    if (rc < 0)
        return rc;
    if (rc == PG_SQLERR)
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "downgrade", &res);
    else if (adv_unlocked(s, res.r[1]) != DLOCK_OK)
        rc = DLOCK_ELOST; /* the exclusive lock was not this session's */
    else
        rc = DLOCK_OK;
    dlock__pg_res_clear(&res);
    return rc;
}

/* SQL_PID's answer must still be the process that holds the locks. */
static void adv_judge(struct pg_session *s, const PGresult *r, char *why,
                      size_t cap)
{
    if (atoi(PQgetvalue(r, 0, 0)) != s->backend_pid)
        snprintf(why, cap,
                 "the connection now reaches server process %s, not %d "
                 "that holds the lock (a transaction-pooling proxy?)",
                 PQgetvalue(r, 0, 0), s->backend_pid);
}

static int adv_renew(struct dlock_session *ds, struct dlock_renewal *items,
                     size_t n)
{
    return dlock__pg_bound_renew((struct pg_session *)ds, items, n, SQL_PID,
                                 adv_judge);
}

/* ---- the floor --------------------------------------------------------- */

static int adv_floor(const struct dlock_uri *uri, const char *name,
                     uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__pg_floor_bare(uri, &dlock__pg_mode_advisory, name, n,
                                ns_out, err, errlen);
}

/* ---- the mode ---------------------------------------------------------- */

const struct pg_mode dlock__pg_mode_advisory = {
    .pub = {
        .name = "advisory",
        .summary = "session advisory locks: queued by the server, many on "
                   "one connection, freed when it ends; permits as N of "
                   "them",
        /* Locks wait natively (and fairly); permits, by NOTIFY. */
        .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR | DLOCK_CAP_SHARED |
                DLOCK_CAP_FENCING | DLOCK_CAP_BATCH_RENEW |
                DLOCK_CAP_DOWNGRADE | DLOCK_CAP_NOTIFY | DLOCK_CAP_PERMITS |
                DLOCK_CAP_LATCH,
        .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                 DLOCK_KIND_BIT(DLOCK_KIND_SHARED) |
                 DLOCK_KIND_BIT(DLOCK_KIND_PERMIT),
        .acquire = adv_acquire,
        .renew = adv_renew,
        .release = adv_release,
        .wait = dlock__pg_wait,
        .inspect = dlock__pg_inspect_locks,
        .floor = adv_floor,
        .downgrade = adv_downgrade,
        .latch = &dlock__pg_latch,
        .fence_floor = dlock__pg_fence_floor, .forget = dlock__pg_forget,
        .floor_wait = dlock__pg_floor_wait,
    },
    .table = "dlock_owners",
    .sql = {
        [ADV_TRY] = SQL_TRY,
        [ADV_TRY_SH] = SQL_TRY_SH,
        [ADV_WAIT] = SQL_WAIT,
        [ADV_WAIT_SH] = SQL_WAIT_SH,
        [ADV_UNLOCK] = "SELECT pg_advisory_unlock($1::bigint)",
        [ADV_UNLOCK_SH] = "SELECT pg_advisory_unlock_shared($1::bigint)",
        [ADV_PERMIT] = SQL_PERMIT,
        [ADV_PERMIT_UNDO] = SQL_PERMIT_UNDO,
        [ADV_OWNERS_CLEAR] = DLOCK__PG_OWNERS_CLEAR("{t}"),
        [ADV_OWNERS_SET] = DLOCK__PG_OWNERS_SET("{t}"),
    },
    .ddl = {DLOCK__PG_FENCE_DDL_EPOCH, DLOCK__PG_FENCE_DDL_EPOCH_ROW,
            DLOCK__PG_FENCE_DDL_SEQ, DLOCK__PG_OWNERS_DDL("{t}"), NULL},
    /* The fence: none per name (the sequence's last value is any name's),
     * so 0, "unknown". */
    .inspect = DLOCK__PG_LOCKS_INSPECT(
        "NULL::bigint, " SQL_PERMIT_HOLDERS,
        "(SELECT o.owner FROM {t} o WHERE o.pid = l.pid"
        " AND o.key = $1::text)"),
    .on_connect = adv_on_connect,
    .prepare = true,
};
