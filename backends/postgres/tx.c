/*
 * tx.c: the two transactional modes, whose lock is held by a transaction
 * kept open for the lock's life. One connection and one open transaction
 * per held lock; release is COMMIT.
 *
 *   advisory_xact  pg_advisory_xact_lock inside the transaction: works
 *                  behind transaction-pooling proxies (PgBouncer
 *                  pool_mode=transaction), where a session lock silently
 *                  breaks.
 *   for_update     a lock row held by the transaction's SELECT ... FOR
 *                  UPDATE (NOWAIT for a try, lock_timeout for a timed
 *                  wait); the row is created on first use.
 *
 * They share their logic (one round trip of BEGIN, limits and lock, then
 * one on the fence connection) and differ in their statements and in what
 * a name maps to (struct pg_mode's row_key): each has its own mode object
 * below.
 *
 * Fences. The lock's statement draws the fence from the unlogged sequence
 * (fence.c) once the lock is granted, in the lock's own transaction:
 * nextval() is not transactional, so the value is everyone's at once, and
 * writes no WAL. The client's check of its epoch is all it costs. Only
 * when that check fails (after a crash, or a new epoch) does the client
 * turn to its own autocommitted fence connection, which confirms, raises
 * or bumps the epoch and draws a new value (the lock's transaction cannot
 * commit the epoch: it ends at the release). Earlier versions drew over
 * that connection every time: an upserted counter row, and before it
 * nextval() of a logged sequence with a WAL flush per acquire.
 *
 * Owner ids. inspect names the holder from dlock_owners, the row of the
 * lock's server process for the key (inspect.c), which is written over
 * the fence connection, autocommitted (rows written inside the lock's
 * transaction would be invisible to inspect until the release), and only
 * when it may not say this holder (owner id, or "" when shared). What it
 * says is vouched for by the server process itself, not by a memory of
 * this connection's, which a transaction-pooling proxy would make wrong
 * (other clients' transactions run on the same server process): the
 * session setting dlock.owner, "key owner", set in every lock
 * transaction and so kept only by one that commits, i.e. was granted and
 * wrote its row first (a failed write rolls the lock back). The lock's
 * round trip reads the value the last one left: if it is this holder's,
 * so is the row, since only a lock transaction on that process writes
 * its row. No table read in the hot path: that cost ~20 us a cycle
 * (planning), measured.
 *
 * The lock's transaction writes nothing a crash must keep: the lock dies
 * with the server anyway. for_update's commits with synchronous_commit
 * off, so its release does not wait for the flush of the WAL record its
 * row lock wrote; advisory_xact's writes no WAL at all, so its commit
 * waits for no flush anyway (and sets nothing for it).
 *
 * Speed: the statements are prepared once per connection (conn.c), and
 * advisory_xact's limits are part of its lock statement, not a statement
 * of their own, ordered by CASE rather than CTEs (TX_XACT), and its try
 * sets no lock_timeout; the TCP keepalives are set once per connection. An
 * advisory_xact cycle measured 74 us before, 37 us after, the bare lock
 * (BEGIN, pg_try_advisory_xact_lock, COMMIT; unnamed) 38 us, with bare
 * libpq on a durable server.
 *
 * It leaves the round trips of renewal and release (and what a lost
 * connection means for them) to bound.c, advisory_xact's inspect to
 * inspect.c, the floor's loop to floor.c.
 *
 * Divisions: SQL; acquire; release and renew; for_update's inspect; the
 * floor; the modes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- SQL --------------------------------------------------------------- */

/* Indexes of the modes' statements in pg_conf.sql (printed with the table
 * name); each shared variant follows its exclusive one. TX_INSERT_ROW,
 * the turnstile and TX_SET (the limits as a statement of their own) are
 * for_update's alone. */
enum {
    TX_TRY,
    TX_TRY_SH,
    TX_WAIT,
    TX_WAIT_SH,
    TX_INSERT_ROW,
    TX_TURN,
    TX_TURN_SH,
    TX_SET
};

/*
 * for_update's turnstile. PostgreSQL lets a FOR SHARE locker in beside the
 * row's other share lockers without queueing behind a FOR UPDATE that
 * waits for them, so a stream of overlapping readers keeps a writer out
 * for ever. Every dlock locker of the row therefore first takes a
 * transaction advisory lock on the name (exclusive for a writer, shared
 * for a reader) in the same round trip: advisory locks queue in arrival
 * order, a reader arriving after a waiting writer waits behind it, and the
 * row lock after it is then free at once. The key is the name's digest
 * with its top bits flipped, apart from advisory mode's key of the same
 * name. Clients that lock the row without dlock still exclude by the row.
 */
#define TX_TURN_FLIP 0x5a5a000000000000ull

/* for_update's limits, a statement of its own before the lock's, with a
 * commit that does not wait for the disk (see the top): the owner row the
 * lock's server process vouched for in its last committed lock
 * transaction (dlock.owner, "key owner": see the top), read first (a
 * MATERIALIZED CTE, which the rest reads), with the server process, and
 * then set to this one's ($3); the wait's limit ($1) and the silence
 * limit [B-BOUND-1] ($2) (bound.c), local to the transaction, which is
 * exactly the lock's life. advisory_xact, whose transaction writes no
 * WAL, does the same within its lock statement (TX_XACT below): one
 * statement less to run, 5 us a cycle, measured. The TCP keepalives are
 * the session's (tx_on_connect). */
static const char SQL_SET_TX[] =
    "WITH p AS MATERIALIZED (SELECT current_setting('dlock.owner', true)"
    " AS was, pg_backend_pid() AS pid)"
    " SELECT p.was, p.pid, set_config('dlock.owner', $3, false),"
    " set_config('lock_timeout', $1, true),"
    " set_config('idle_in_transaction_session_timeout', $2, true),"
    " set_config('synchronous_commit', 'off', true) FROM p";
/* The TCP keepalives [B-BOUND-1], once per connection: the server's end
 * of this connection is what they watch (behind a transaction pooler,
 * the pooler's, whichever client set them). */
static const char SQL_KEEPALIVES[] =
    "SELECT set_config('tcp_keepalives_idle', $1, false),"
    " set_config('tcp_keepalives_interval', $2, false),"
    " set_config('tcp_keepalives_count', $3, false)";
static const char SQL_ONE[] = "SELECT 1";
/* The owner row of server process $1 (inspect.c), the only one it needs:
 * a process holds one lock of these modes at a time, so its rows of other
 * keys are stale. Written over the fence connection (autocommitted). */
static const char SQL_OWNER_CLEAR[] =
    "DELETE FROM dlock_owners WHERE pid = $1::int AND key <> $2";
static const char SQL_OWNER_SET[] =
    "INSERT INTO dlock_owners (pid, key, owner) VALUES ($1::int, $2, $3)"
    " ON CONFLICT (pid, key) DO UPDATE SET owner = EXCLUDED.owner";
/* Every relation the fences and owner ids need, for both modes' ddl. */
#define TX_FENCE_DDL                                                        \
    DLOCK__PG_FENCE_DDL_EPOCH, DLOCK__PG_FENCE_DDL_EPOCH_ROW,               \
        DLOCK__PG_FENCE_DDL_SEQ, DLOCK__PG_OWNERS_DDL("dlock_owners")
/* A lock statement L in a CTE whose rows exist only when the lock was
 * taken, and the fence drawn from each (MATERIALIZED: run first, whole,
 * so the draw follows the grant). */
#define TX_DRAWN(L)                                                         \
    "WITH l AS MATERIALIZED (" L ") SELECT " DLOCK__PG_FENCE_DRAW " FROM l"
/*
 * advisory_xact's lock statement: one SELECT list without a FROM, whose
 * order is that of nested CASEs, not of CTEs. PostgreSQL does not define
 * the order in which the parts of an expression or a select list are
 * evaluated, but it promises it for CASE: "When it is essential to force
 * evaluation order, a CASE construct can be used" (the manual, 4.2.14,
 * Expression Evaluation Rules; 9.18.1: CASE evaluates its conditions in
 * turn and "does not evaluate any subexpressions that are not needed to
 * determine the result"). Its exceptions, immutable subexpressions folded
 * when the statement is planned and aggregates, touch nothing here:
 * current_setting and pg_backend_pid are stable, the rest volatile, and
 * nothing is aggregated. So, in this order:
 *   the owner read: current_setting('dlock.owner') = $2, this holder's,
 *     the condition of the outer CASE, before either branch;
 *   then in the branch taken, TX_XACT_GO: when the read was another's,
 *     dlock.owner set to $2 (session-level, kept only by a transaction
 *     that commits, see the top; when it was this holder's, setting it
 *     again would change nothing, committed or rolled back), the limits
 *     local to the transaction (LT: the wait's lock_timeout, $4; the
 *     silence limit [B-BOUND-1], $1), each the condition of a WHEN that
 *     is never true (set_config answers the value set, never NULL), then
 *     the lock G (on key $3) as the last condition, and the fence drawn
 *     only as its result: after the grant, and only when G is true.
 * The fence comes back positive when the owner read said this holder,
 * negated when not (a fence is a positive bigint), NULL when the try was
 * refused; pg_backend_pid() (no order needed) beside it. Server time per
 * statement, measured against the three MATERIALIZED CTEs it replaces
 * (with their lock_timeout in a try too): 2.0 us above the bare lock's
 * instead of 3.7 (docs/backends/postgres.md).
 */
#define TX_XACT_OWNER                                                       \
    " WHEN set_config('dlock.owner', $2, false) IS NULL THEN NULL"
#define TX_XACT_GO(OWN, LT, G)                                              \
    "CASE" OWN LT " WHEN set_config('idle_in_transaction_session_timeout',"  \
    " $1, true) IS NULL THEN NULL WHEN " G " THEN " DLOCK__PG_FENCE_DRAW    \
    " END"
#define TX_XACT(LT, G)                                                      \
    "SELECT pg_backend_pid(), CASE WHEN current_setting('dlock.owner',"     \
    " true) = $2 THEN " TX_XACT_GO("", LT, G) " ELSE -"                     \
    TX_XACT_GO(TX_XACT_OWNER, LT, G) " END"
/* A try never waits for its lock, so it sets no lock_timeout (as
 * advisory mode's); a wait bounds its wait by its own ($4). */
#define TX_XACT_LT                                                          \
    " WHEN set_config('lock_timeout', $4, true) IS NULL THEN NULL"

/* ---- the fence connection ---------------------------------------------- */

/* Run job over the ctx's fence connection (see the top), opened on first
 * need and once more if it was lost. */
static int tx_on_fence_conn(struct pg_session *s, const char *what,
                            int (*job)(struct pg_session *fs, void *arg,
                                       char *err, size_t errlen),
                            void *arg)
{
    struct pg_ctx *x = s->x;
    char err[512] = "";
    int rc = DLOCK_ECONNECT;

    pthread_mutex_lock(&x->fence_mu);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct pg_session *fs = x->fence;
        if (fs == NULL) {
            fs = calloc(1, sizeof *fs);
            if (fs == NULL) {
                rc = dlock_errorf(err, sizeof err, DLOCK_ENOMEM,
                                  "out of memory");
                break;
            }
            fs->x = x;
            fs->cf = &x->cf;
            fs->fence_conn = true;
            if ((rc = dlock__pg_connect(fs, err, sizeof err)) != DLOCK_OK) {
                free(fs);
                break;
            }
            x->fence = fs;
        }
        if ((rc = job(fs, arg, err, sizeof err)) != DLOCK_ECONNECT)
            break;
        dlock__pg_drop(fs);
        free(fs);
        x->fence = NULL;
    }
    pthread_mutex_unlock(&x->fence_mu);
    if (rc != DLOCK_OK)
        return dlock_session_error(&s->base, rc, "fence connection: %s: %s",
                                   what, err);
    return DLOCK_OK;
}

/* A fence drawn afresh, after the epoch's check: the value drawn with the
 * lock is discarded. A reply lost with the connection may have taken a
 * value: drawing once more skips one, which fencing allows. */
static int tx_fence_job(struct pg_session *fs, void *arg, char *err,
                        size_t errlen)
{
    return dlock__pg_fence(fs, 0, arg, err, errlen);
}

/* What the owner row of a lock's server process must say. */
struct tx_owner {
    const char *pid, *key, *owner;
};

static int tx_owner_job(struct pg_session *fs, void *arg, char *err,
                        size_t errlen)
{
    const struct tx_owner *o = arg;
    struct pg_q q[2] = {
        {SQL_OWNER_CLEAR, 2, {o->pid, o->key}},
        {SQL_OWNER_SET, 3, {o->pid, o->key, o->owner}},
    };
    struct pg_res res;
    int rc = dlock__pg_run(fs, q, 2, dlock__pg_deadline(fs->cf), &res);

    if (rc == PG_SQLERR)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "%s (SQLSTATE %s)",
                          PQresultErrorField(res.r[res.failed],
                                             PG_DIAG_MESSAGE_PRIMARY),
                          res.state);
    else if (rc == DLOCK_ECONNECT)
        dlock_errorf(err, errlen, rc, "%s", fs->why);
    else if (rc != DLOCK_OK)
        dlock_errorf(err, errlen, rc, "creating its tables failed");
    dlock__pg_res_clear(&res);
    return rc;
}

void dlock__pg_tx_fence_close(struct pg_ctx *x)
{
    if (x->fence != NULL) {
        dlock__pg_drop(x->fence);
        free(x->fence);
        x->fence = NULL;
    }
    pthread_mutex_destroy(&x->fence_mu);
}

/* ---- acquire ----------------------------------------------------------- */

static int tx_acquire(struct dlock_session *ds,
                      const struct dlock_request *req, int64_t deadline,
                      struct dlock_grant *g, uint32_t *retry_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    int sh = req->kind == DLOCK_KIND_SHARED;
    bool rows = cf->mode->row_key;
    bool turn = cf->sql[TX_TURN] != NULL;
    bool set = cf->sql[TX_SET] != NULL;
    int lock = (deadline != 0 ? TX_WAIT : TX_TRY) + sh;
    char key[65], tkey[24], lt[16], idle[16], mine[136];
    /* advisory_xact's lock statement: a try sets no lock_timeout. */
    struct pg_q xact = {cf->sql[lock], deadline != 0 ? 4 : 3,
                        {idle, mine, key, lt}};
    uint8_t d[32];
    const char *owner = sh ? "" : req->owner;
    struct pg_q q[PG_MAXQ];
    struct pg_res res;
    int rc, nq;

    (void)retry_ms;
    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    dlock__pg_digest(cf, req->name, req->name_len, d);
    dlock__pg_digest_key(cf, d, key);
    snprintf(mine, sizeof mine, "%s %s", key, owner);
    dlock__pg_lock_timeout(lt, deadline);
    dlock__pg_idle_text(idle, req->lease_ms);
    if (turn) {
        dlock__pg_key_text(tkey, dlock__pg_key64(d) ^ TX_TURN_FLIP);
        if (deadline == 0) /* a try waits at the turnstile 1 ms at most */
            strcpy(lt, "1");
    }

    /* Two tries at most: the second after creating a missing lock row. */
    for (int attempt = 0; attempt < 2; attempt++) {
        int setq, lockq;
        const PGresult *last;
        uint64_t v;
        char pid[16];
        bool ours;

        /* BEGIN, the wait's limits, the lock and its fence: one round
         * trip. The owner read and the server process come from the
         * limits' statement (setq), or with the fence from the lock's. */
        nq = 0;
        q[nq++] = (struct pg_q){"BEGIN", 0, {NULL}};
        setq = nq;
        if (set)
            q[nq++] = (struct pg_q){cf->sql[TX_SET], 3, {lt, idle, mine}};
        if (turn)
            q[nq++] = (struct pg_q){cf->sql[TX_TURN + sh], 1, {tkey}};
        lockq = nq;
        q[nq++] = set ? (struct pg_q){cf->sql[lock], 1, {key}} : xact;

        s->waiting = deadline != 0;
        rc = dlock__pg_run(s, q, nq, dlock__pg_wait_deadline(cf, deadline),
                           &res);
        s->waiting = false;
        if (rc < 0) /* ECONNECT, or creating the table failed */
            return rc;
        if (rc == PG_SQLERR) {
            rc = dlock__pg_busy_code(res.state, deadline);
            if (rc == 0)
                rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "lock", &res);
            dlock__pg_res_clear(&res);
            dlock__pg_rollback(s);
            return rc;
        }
        if (rows && PQntuples(res.r[lockq]) == 0) {
            /* No lock row yet: make it, committed on its own so no other
             * client waits on our insert, then lock it. */
            struct pg_q ins = {cf->sql[TX_INSERT_ROW], 3,
                               {key, cf->ns, req->name}};
            dlock__pg_res_clear(&res);
            dlock__pg_rollback(s);
            if (attempt > 0)
                break;
            rc = dlock__pg_run(s, &ins, 1, dlock__pg_deadline(cf), &res);
            if (rc == PG_SQLERR)
                rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "insert the lock row",
                                       &res);
            dlock__pg_res_clear(&res);
            if (rc != DLOCK_OK)
                return rc;
            continue;
        }
        last = res.r[lockq];
        if (PQntuples(last) == 0 ||
            PQgetisnull(last, 0, PQnfields(last) - 1)) {
            dlock__pg_res_clear(&res);
            dlock__pg_rollback(s);
            return DLOCK_EBUSY; /* pg_try_advisory_xact_lock said no */
        }
        /* The fence is the lock statement's last column; advisory_xact's
         * is negated when the owner read was not this holder's. */
        if (set) {
            v = dlock__pg_u64(last, 0, PQnfields(last) - 1);
            snprintf(pid, sizeof pid, "%s", PQgetvalue(res.r[setq], 0, 1));
            ours = strcmp(PQgetvalue(res.r[setq], 0, 0), mine) == 0;
        } else {
            long long sv = strtoll(PQgetvalue(last, 0, 1), NULL, 10);
            ours = sv > 0;
            v = (uint64_t)(ours ? sv : -sv);
            snprintf(pid, sizeof pid, "%s", PQgetvalue(last, 0, 0));
        }
        dlock__pg_res_clear(&res);
        if (dlock__pg_fence_ok(s->x, v))
            g->fence = v;
        else
            rc = tx_on_fence_conn(s, "fence", tx_fence_job, &g->fence);
        /* Who holds it, for inspect, where the lock's server process has
         * another's (see the top). */
        if (rc == DLOCK_OK && !ours) {
            struct tx_owner o = {pid, key, owner};
            rc = tx_on_fence_conn(s, "owner id", tx_owner_job, &o);
        }
        if (rc != DLOCK_OK) {
            dlock__pg_rollback(s);
            return rc;
        }
        g->word[1] = s->gen;
        s->ngrants++;
        return DLOCK_OK;
    }
    return dlock_session_error(&s->base, DLOCK_ERROR,
                               "the lock row vanished right after it was "
                               "inserted (is something deleting rows of "
                               "table %s?)",
                               cf->table);
}

/* ---- release and renew ------------------------------------------------- */

/* A COMMIT of a failed transaction answers ROLLBACK. */
static int tx_committed(struct pg_session *s, PGresult *r)
{
    if (strcmp(PQcmdStatus(r), "COMMIT") == 0)
        return DLOCK_OK;
    return dlock_session_error(&s->base, DLOCK_ELOST,
                               "the transaction holding the lock had "
                               "failed; it was rolled back");
}

static int tx_release(struct dlock_session *ds,
                      const struct dlock_request *req, struct dlock_grant *g)
{
    struct pg_session *s = (struct pg_session *)ds;
    struct pg_q q = {"COMMIT", 0, {NULL}};

    (void)req;
    return dlock__pg_bound_release(s, g, &q, 1, "commit", tx_committed);
}

/* The transaction that holds the lock must still be open. */
static void tx_judge(struct pg_session *s, const PGresult *r, char *why,
                     size_t cap)
{
    (void)r;
    if (PQtransactionStatus(s->conn) != PQTRANS_INTRANS)
        snprintf(why, cap, "the transaction holding the lock has ended");
}

static int tx_renew(struct dlock_session *ds, struct dlock_renewal *items,
                    size_t n)
{
    return dlock__pg_bound_renew((struct pg_session *)ds, items, n, SQL_ONE,
                                 tx_judge);
}

/* ---- for_update's inspect ---------------------------------------------- */

/* The row's holder if a transaction has it locked (no fence per name:
 * the fence stays 0, unknown). */
static void fu_read(const PGresult *r, dlock_state *out)
{
    out->held = 0;
    if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 1)) {
        out->held = 1;
        /* The owner row of the locking process: "" for shared. */
        snprintf(out->owner, sizeof out->owner, "%s",
                 PQgetisnull(r, 0, 0) || PQgetvalue(r, 0, 0)[0] == '\0'
                     ? "(shared holders)"
                     : PQgetvalue(r, 0, 0));
    }
}

static int fu_inspect(struct dlock_session *ds, const char *name, size_t len,
                      dlock_state *out)
{
    return dlock__pg_inspect(ds, name, len, out, fu_read);
}

/* ---- the floor --------------------------------------------------------- */

static int xact_floor(const struct dlock_uri *uri, const char *name,
                      uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__pg_floor_bare(uri, &dlock__pg_mode_advisory_xact, name, n,
                                ns_out, err, errlen);
}

static int fu_floor(const struct dlock_uri *uri, const char *name,
                    uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__pg_floor_bare(uri, &dlock__pg_mode_for_update, name, n,
                                ns_out, err, errlen);
}

/* ---- the modes --------------------------------------------------------- */

#define TX_CAPS                                                             \
    (DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |                      \
     DLOCK_CAP_SESSION_PER_LOCK | DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR |  \
     DLOCK_CAP_SHARED | DLOCK_CAP_FENCING | DLOCK_CAP_LATCH)

/* Version 15 or later, for the unlogged sequence of the fences; then the
 * session's TCP keepalives. */
static int tx_on_connect(struct pg_session *s, int64_t deadline, char *err,
                         size_t errlen)
{
    const struct pg_conf *cf = s->cf;
    struct pg_q q = {SQL_KEEPALIVES, 3,
                     {cf->ka_idle, cf->ka_interval, cf->ka_count}};
    int rc;

    if ((rc = dlock__pg_fence_server(s, err, errlen)) != DLOCK_OK)
        return rc;
    return dlock__pg_setup(s, &q, deadline, err, errlen);
}

const struct pg_mode dlock__pg_mode_advisory_xact = {
    .pub = {
        .name = "advisory_xact",
        .summary = "advisory locks of a transaction held open: work "
                   "behind PgBouncer; a connection per held lock",
        .caps = TX_CAPS,
        .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                 DLOCK_KIND_BIT(DLOCK_KIND_SHARED),
        .acquire = tx_acquire,
        .renew = tx_renew,
        .release = tx_release,
        .inspect = dlock__pg_inspect_locks,
        .floor = xact_floor,
        .latch = &dlock__pg_latch,
        .fence_floor = dlock__pg_fence_floor, .forget = dlock__pg_forget,
        .floor_wait = dlock__pg_floor_wait,
    },
    .no_table = "its owner ids are kept in the table dlock_owners",
    .sql = {
        [TX_TRY] = TX_XACT("", "pg_try_advisory_xact_lock($3::bigint)"),
        [TX_TRY_SH] =
            TX_XACT("", "pg_try_advisory_xact_lock_shared($3::bigint)"),
        /* void, never NULL: the fence follows the wait's end. */
        [TX_WAIT] = TX_XACT(TX_XACT_LT,
                            "pg_advisory_xact_lock($3::bigint) IS NOT NULL"),
        [TX_WAIT_SH] = TX_XACT(
            TX_XACT_LT, "pg_advisory_xact_lock_shared($3::bigint) IS NOT NULL"),
    },
    .ddl = {TX_FENCE_DDL, NULL},
    /* No fence per name: 0, unknown. */
    .inspect = DLOCK__PG_LOCKS_INSPECT(
        "NULL::bigint",
        "(SELECT o.owner FROM dlock_owners o WHERE o.pid = l.pid"
        " AND o.key = $1::text)"),
    .on_connect = tx_on_connect,
    .prepare = true,
};

/* The lock row's own owner, fence and locked_at columns are no longer
 * written (the release would have to commit them). A row locked by a
 * running transaction carries that transaction's id in xmax, which
 * pg_stat_activity shows with its server process: inspect's holder, whose
 * owner row (dlock_owners) names it. */
const struct pg_mode dlock__pg_mode_for_update = {
    .pub = {
        .name = "for_update",
        .summary = "a row locked by an open transaction (SELECT ... FOR "
                   "UPDATE); a connection per held lock",
        .caps = TX_CAPS,
        .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                 DLOCK_KIND_BIT(DLOCK_KIND_SHARED),
        .acquire = tx_acquire,
        .renew = tx_renew,
        .release = tx_release,
        .inspect = fu_inspect,
        .floor = fu_floor,
        .latch = &dlock__pg_latch,
        .fence_floor = dlock__pg_fence_floor, .forget = dlock__pg_forget,
        .floor_wait = dlock__pg_floor_wait,
    },
    .table = "dlock_locks",
    .row_key = true,
    .sql = {
        /* No row: no lock, no draw (the row is made, then locked). */
        [TX_TRY] = TX_DRAWN("SELECT 1 FROM {t} WHERE key = decode($1, 'hex')"
                            " FOR UPDATE NOWAIT"),
        [TX_TRY_SH] = TX_DRAWN("SELECT 1 FROM {t}"
                               " WHERE key = decode($1, 'hex')"
                               " FOR SHARE NOWAIT"),
        [TX_WAIT] = TX_DRAWN("SELECT 1 FROM {t} WHERE key = decode($1, 'hex')"
                             " FOR UPDATE"),
        [TX_WAIT_SH] = TX_DRAWN("SELECT 1 FROM {t}"
                                " WHERE key = decode($1, 'hex') FOR SHARE"),
        [TX_INSERT_ROW] = "INSERT INTO {t} (key, namespace, name)"
                          " VALUES (decode($1, 'hex'), $2, $3)"
                          " ON CONFLICT (key) DO NOTHING",
        [TX_TURN] = "SELECT pg_advisory_xact_lock($1::bigint)",
        [TX_TURN_SH] = "SELECT pg_advisory_xact_lock_shared($1::bigint)",
        [TX_SET] = SQL_SET_TX,
    },
    /* owner, fence and locked_at: written by earlier versions only. */
    .ddl = {"CREATE TABLE IF NOT EXISTS {t} (key bytea PRIMARY KEY,"
            " namespace text NOT NULL, name text NOT NULL,"
            " owner text NOT NULL DEFAULT '',"
            " fence bigint NOT NULL DEFAULT 0, locked_at timestamptz)",
            TX_FENCE_DDL, NULL},
    .inspect = "SELECT o.owner, a.pid"
               " FROM {t} t LEFT JOIN pg_stat_activity a"
               " ON a.backend_xid = t.xmax LEFT JOIN dlock_owners o"
               " ON o.pid = a.pid AND o.key = $1"
               " WHERE t.key = decode($1, 'hex')",
    .on_connect = tx_on_connect,
    .prepare = true,
};
