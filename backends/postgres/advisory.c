/*
 * advisory.c: mode=advisory (the default), session advisory locks on a
 * 64-bit key. The server queues waiters (pg_advisory_lock under
 * lock_timeout) and frees the lock when the connection ends, so many locks
 * share one connection. Fencing from a counter row upserted in the
 * statement that takes the lock.
 *
 * Session advisory locks live as long as the server process of the
 * connection, so a transaction-pooling proxy (PgBouncer
 * pool_mode=transaction) silently breaks them: every session notes its
 * server process and every answer is checked against it (advisory_xact is
 * the mode for such proxies). The server ends a session silent for longer
 * than its longest lease (idle_session_timeout, PostgreSQL 14 or later).
 *
 * It leaves the round trips of renewal and release (and what a lost
 * connection means for them) to bound.c, inspect to inspect.c, the floor's
 * loop to floor.c.
 *
 * Divisions: SQL; the session; acquire; release and renew (and
 * downgrade); the floor; the mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- SQL --------------------------------------------------------------- */

/* Indexes of the mode's statements in pg_conf.sql (printed with the
 * table name); each shared variant follows its exclusive one. */
enum { ADV_TRY, ADV_TRY_SH, ADV_WAIT, ADV_WAIT_SH, ADV_UNLOCK, ADV_UNLOCK_SH };

/* The session's set-up: its server process, the keepalives and the
 * silence limit [B-BOUND-1]. */
static const char SQL_SETUP_SESSION[] =
    "SELECT pg_backend_pid(), set_config('tcp_keepalives_idle', $1, false),"
    " set_config('tcp_keepalives_interval', $2, false),"
    " set_config('tcp_keepalives_count', $3, false),"
    " set_config('idle_session_timeout', $4, false),"
    " set_config('synchronous_commit', 'on', false)";
static const char SQL_IDLE_LIMIT[] =
    "SELECT set_config('idle_session_timeout', $1, false)";
static const char SQL_PID[] = "SELECT pg_backend_pid()";

/* The CTE runs first and once (it calls a volatile function), so the
 * upsert happens only when the lock was granted, in the same statement and
 * round trip. Autocommit makes the new fence durable before the caller
 * sees it. An exclusive holder names itself in the row ($2), for inspect:
 * pg_locks knows only the server process, which holds the locks of many
 * handles. */
static const char SQL_TRY[] =
    "WITH l AS (SELECT pg_try_advisory_lock($1::bigint) AS got)"
    " INSERT INTO {t} AS f (key, fence, owner)"
    " SELECT $1::bigint, 1, $2 FROM l WHERE l.got"
    " ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1,"
    " owner = EXCLUDED.owner"
    " RETURNING f.fence, pg_backend_pid()";
static const char SQL_TRY_SH[] =
    "WITH l AS (SELECT pg_try_advisory_lock_shared($1::bigint) AS got)"
    " INSERT INTO {t} AS f (key, fence)"
    " SELECT $1::bigint, 1 FROM l WHERE l.got"
    " ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1"
    " RETURNING f.fence, pg_backend_pid()";
/* A wait: the same, after a lock_timeout local to this implicit
 * transaction (the last parameter), set by a CTE the lock's CTE reads, so
 * it is in force before the wait begins; one statement, as fast as the
 * try when the lock is free. */
static const char SQL_WAIT[] =
    "WITH t AS (SELECT set_config('lock_timeout', $3, true) AS v),"
    " l AS (SELECT pg_advisory_lock($1::bigint) FROM t)"
    " INSERT INTO {t} AS f (key, fence, owner)"
    " SELECT $1::bigint, 1, $2 FROM l"
    " ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1,"
    " owner = EXCLUDED.owner"
    " RETURNING f.fence, pg_backend_pid()";
static const char SQL_WAIT_SH[] =
    "WITH t AS (SELECT set_config('lock_timeout', $2, true) AS v),"
    " l AS (SELECT pg_advisory_lock_shared($1::bigint) FROM t)"
    " INSERT INTO {t} AS f (key, fence)"
    " SELECT $1::bigint, 1 FROM l"
    " ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1"
    " RETURNING f.fence, pg_backend_pid()";

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

    if (PQserverVersion(s->conn) < 140000)
        return dlock_errorf(err, errlen, DLOCK_EUNSUPPORTED,
                            "mode=advisory needs PostgreSQL 14 or later "
                            "(idle_session_timeout bounds how long a holder "
                            "cut off from the server believes it holds); "
                            "use mode=advisory_xact or mode=lease");
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
 * WARNING and false if it was not taken, which is harmless). */
static void adv_unlock_quietly(struct pg_session *s, const char *key, int sh)
{
    struct pg_q q = {s->cf->sql[ADV_UNLOCK + sh], 1, {key}};
    struct pg_res res;

    if (s->conn == NULL)
        return;
    dlock__pg_exec(s, &q, 1, dlock__pg_deadline(s->cf), &res);
    dlock__pg_res_clear(&res);
}

/* One try (deadline 0), or one wait in the server's queue until deadline. */
static int adv_attempt(struct pg_session *s, const struct dlock_request *req,
                       int64_t deadline, struct dlock_grant *g)
{
    const struct pg_conf *cf = s->cf;
    int sh = req->kind == DLOCK_KIND_SHARED;
    char key[24], lt[16], idle[16];
    struct pg_q q[3];
    struct pg_res res;
    uint8_t d[32];
    uint64_t k, fence;
    int nq = 0, rc, pid;
    /* The session's silence limit must cover the longest lease of its
     * locks; with none held yet it follows this one exactly (so a short
     * lease is also freed soon after its holder fell silent). */
    bool raise = req->lease_ms > s->covered_ms ||
                 (s->ngrants == 0 && req->lease_ms != s->covered_ms);

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
    if (deadline != 0) {
        /* A wait in the server's lock queue, bounded by a lock_timeout
         * local to this implicit transaction (set_config(..., true)). */
        dlock__pg_lock_timeout(lt, deadline);
        q[nq++] = sh ? (struct pg_q){cf->sql[ADV_WAIT_SH], 2, {key, lt}}
                     : (struct pg_q){cf->sql[ADV_WAIT], 3,
                                     {key, req->owner, lt}};
    } else {
        q[nq++] = (struct pg_q){cf->sql[ADV_TRY + sh], 2 - sh,
                                {key, req->owner}};
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
        adv_unlock_quietly(s, key, sh);
        return rc;
    }
    if (PQntuples(res.r[nq - 1]) == 0) {
        dlock__pg_res_clear(&res);
        return DLOCK_EBUSY;
    }
    fence = dlock__pg_u64(res.r[nq - 1], 0, 0);
    pid = atoi(PQgetvalue(res.r[nq - 1], 0, 1));
    dlock__pg_res_clear(&res);
    if (pid != s->backend_pid) {
        adv_unlock_quietly(s, key, sh);
        return dlock_session_error(
            &s->base, DLOCK_ERROR,
            "the lock was taken by server process %d, but this connection "
            "began on process %d: a transaction-pooling proxy (e.g. "
            "PgBouncer pool_mode=transaction) stands between dlock and "
            "PostgreSQL, and session advisory locks do not hold through "
            "it; use mode=advisory_xact",
            pid, s->backend_pid);
    }
    g->fence = fence;
    g->word[0] = k;
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

static int adv_release(struct dlock_session *ds,
                       const struct dlock_request *req, struct dlock_grant *g)
{
    struct pg_session *s = (struct pg_session *)ds;
    char key[24];
    struct pg_q q = {s->cf->sql[ADV_UNLOCK + (req->kind == DLOCK_KIND_SHARED)],
                     1, {key}};

    dlock__pg_key_text(key, g->word[0]);
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

static void adv_floor_plan(const struct pg_conf *cf,
                           const struct pg_floor_keys *k,
                           struct pg_floor_plan *p)
{
    p->take[p->ntake++] =
        (struct pg_q){cf->sql[ADV_TRY], 2, {k->key, k->owner}};
    p->give = (struct pg_q){cf->sql[ADV_UNLOCK], 1, {k->key}};
}

static int adv_floor(const struct dlock_uri *uri, const char *name,
                     uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__pg_floor(uri, &dlock__pg_mode_advisory, adv_floor_plan,
                           name, n, ns_out, err, errlen);
}

/* ---- the mode ---------------------------------------------------------- */

const struct pg_mode dlock__pg_mode_advisory = {
    .pub = {
        .name = "advisory",
        .summary = "session advisory locks: queued by the server, many on "
                   "one connection, freed when it ends",
        .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR | DLOCK_CAP_SHARED |
                DLOCK_CAP_FENCING | DLOCK_CAP_BATCH_RENEW |
                DLOCK_CAP_DOWNGRADE,
        .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                 DLOCK_KIND_BIT(DLOCK_KIND_SHARED),
        .acquire = adv_acquire,
        .renew = adv_renew,
        .release = adv_release,
        .inspect = dlock__pg_inspect_locks,
        .floor = adv_floor,
        .downgrade = adv_downgrade,
    },
    .table = "dlock_fences",
    .sql = {
        [ADV_TRY] = SQL_TRY,
        [ADV_TRY_SH] = SQL_TRY_SH,
        [ADV_WAIT] = SQL_WAIT,
        [ADV_WAIT_SH] = SQL_WAIT_SH,
        [ADV_UNLOCK] = "SELECT pg_advisory_unlock($1::bigint)",
        [ADV_UNLOCK_SH] = "SELECT pg_advisory_unlock_shared($1::bigint)",
    },
    .ddl = {"CREATE TABLE IF NOT EXISTS {t} (key bigint PRIMARY KEY,"
            " fence bigint NOT NULL, owner text)",
            /* a table from before the owner column (schema.c) */
            "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS owner text", NULL},
    .inspect = DLOCK__PG_LOCKS_INSPECT(
        "(SELECT fence FROM {t} WHERE key = $1::bigint)",
        "(SELECT owner FROM {t} WHERE key = $1::bigint)"),
    .on_connect = adv_on_connect,
};
