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
 * They share their logic (one round trip of BEGIN, limits and lock) and
 * differ in their statements and in what a name maps to (struct
 * pg_mode's row_key): each has its own mode object below.
 *
 * A held lock never needs a second server connection. Behind a
 * transaction pooler every open lock transaction, the holder's and each
 * waiter's blocked in its lock, keeps one server connection of the pool;
 * a holder that needed another (earlier versions: a fence connection of
 * its client's for the epoch and the owner row) waited behind the waiters
 * it blocks once they filled the pool, until their lock_timeout
 * (postgres/pooler's small pool checks it).
 *
 * Fences. The lock's statement draws the fence from the unlogged sequence
 * (fence.c) once the lock is granted, in the lock's own transaction:
 * nextval() is not transactional, so the value is everyone's at once, and
 * writes no WAL. The client's check of its epoch is all it costs. Only
 * when that check fails (after a crash, a new epoch, or on a fresh
 * database; a client reads the epoch when it connects, tx_on_connect) is
 * there epoch work, which the lock's transaction cannot do (it would
 * commit only at the release): the acquire rolls its
 * transaction back, letting the lock go, confirms, raises or bumps the
 * epoch over the same connection, autocommitted and holding nothing
 * (dlock__pg_fence, which draws and judges its own values), and runs
 * again, against the same deadline, at the back of the queue (hence the
 * read at connect: conformance's fair_grants_follow_arrival fails
 * without it). The value handed out is always one
 * drawn after its grant and passing the client's check, so fence.c's
 * argument holds as for a value that passed the first time. Earlier
 * versions did this over a connection of its own while holding, and
 * before that drew over it every time: an upserted counter row, and
 * before it nextval() of a logged sequence with a WAL flush per acquire.
 *
 * Owner ids. inspect finds the lock's server process (pg_locks for
 * advisory_xact, the row's xmax for for_update) and reads the holder's
 * owner id from that process's application_name in pg_stat_activity,
 * which every role may read (pg_stat_get_activity() gives application_name
 * to all callers; most other columns only to the role's members and
 * pg_read_all_stats). The lock's transaction sets it, local to the
 * transaction, to the connection's own name and " owner:<owner id>"
 * (tx_app_name), in the statement that takes the lock: it is the
 * holder's for exactly as long as the transaction holds the lock, the
 * server puts it back at COMMIT or ROLLBACK, and behind a transaction
 * pooler it is the process's own word, whichever client's transaction
 * ran there before. The server keeps 63 bytes, NAMEDATALEN - 1: owner ids
 * ("<client uuid>:<serial>", at most 57 bytes; ASCII, which the server
 * keeps as it is) fit with the tag; the connection's own name is cut to
 * make room. Earlier versions wrote an owner row in dlock_owners over the
 * fence connection when the process's session setting dlock.owner said
 * its last lock was another holder's; the table stays for their clients.
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

/* The owner id, in application_name (tx_app_name; see the top), the
 * wait's limit ($1) and the silence limit [B-BOUND-1] ($2) (bound.c), all
 * local to the transaction, which is exactly the lock's life. for_update
 * runs them as a statement of their own, with a commit that does not wait
 * for the disk (see the top); advisory_xact, whose transaction writes no
 * WAL, as conditions of its lock statement's CASE (TX_XACT below): one
 * statement less to run, 5 us a cycle, measured. The TCP keepalives are
 * the session's (tx_on_connect). */
#define TX_LIMITS                                                           \
    "set_config('application_name', $3, true),"                             \
    " set_config('lock_timeout', $1, true),"                                \
    " set_config('idle_in_transaction_session_timeout', $2, true)"
static const char SQL_SET_TX[] =
    "SELECT " TX_LIMITS ", set_config('synchronous_commit', 'off', true)";
/* The TCP keepalives [B-BOUND-1], once per connection: the server's end
 * of this connection is what they watch (behind a transaction pooler,
 * the pooler's, whichever client set them). */
static const char SQL_KEEPALIVES[] =
    "SELECT set_config('tcp_keepalives_idle', $1, false),"
    " set_config('tcp_keepalives_interval', $2, false),"
    " set_config('tcp_keepalives_count', $3, false)";
static const char SQL_ONE[] = "SELECT 1";
/* Every relation the fences need, for both modes' ddl; and dlock_owners,
 * where earlier versions kept these modes' owner ids (their inspect and
 * their acquire still read and write it). */
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
 * order is that of a CASE, not of CTEs. PostgreSQL does not define the
 * order in which the parts of an expression or a select list are
 * evaluated, but it promises it for CASE: "When it is essential to force
 * evaluation order, a CASE construct can be used" (the manual, 4.2.14,
 * Expression Evaluation Rules; 9.18.1: CASE evaluates its conditions in
 * turn and "does not evaluate any subexpressions that are not needed to
 * determine the result"). Its exceptions, immutable subexpressions folded
 * when the statement is planned and aggregates, touch nothing here: the
 * functions are volatile, and nothing is aggregated. So, in this order:
 * the owner id in application_name ($2, see the top) and the limits
 * local to the transaction (LT: the wait's lock_timeout, $4; the silence
 * limit [B-BOUND-1], $1), each the condition of a WHEN that is never true
 * (set_config answers the value set, never NULL), then the lock G (on key
 * $3) as the last condition, and the fence drawn only as its result:
 * after the grant, and only when G is true; NULL when the try was
 * refused. Server time per statement, measured against the three
 * MATERIALIZED CTEs it replaced (with their lock_timeout in a try too):
 * 2.0 us above the bare lock's instead of 3.7 (docs/backends/postgres.md),
 * before the owner read went with the owner rows.
 */
#define TX_XACT(LT, G)                                                      \
    "SELECT CASE WHEN set_config('application_name', $2, true) IS NULL"     \
    " THEN NULL" LT " WHEN set_config("                                     \
    "'idle_in_transaction_session_timeout', $1, true) IS NULL THEN NULL"    \
    " WHEN " G " THEN " DLOCK__PG_FENCE_DRAW " END"
/* A try never waits for its lock, so it sets no lock_timeout (as
 * advisory mode's); a wait bounds its wait by its own ($4). */
#define TX_XACT_LT                                                          \
    " WHEN set_config('lock_timeout', $4, true) IS NULL THEN NULL"
/* What a holder's application_name ends with: its owner id follows. */
#define TX_OWNER_TAG " owner:"
/* inspect's owner id of server process a (a row of pg_stat_activity):
 * what follows the tag at the end of its application_name, NULL if it
 * has none. */
#define TX_OWNER_OF(a)                                                      \
    "substring(" a ".application_name from '" TX_OWNER_TAG "([^ ]+)$')"

/* The application_name of the lock's transaction, in out (at most 63
 * bytes, the server's limit, NAMEDATALEN - 1): the connection's own (the
 * URI's, or dlock:<pid>: conf.c), cut where it must be, then the tag and
 * the owner id. A shared holder, or an owner id too long to fit whole,
 * leaves the connection's name as it is (inspect then says "" for it). */
static void tx_app_name(const struct pg_conf *cf, const char *owner,
                        char out[64])
{
    const char *name = "";
    size_t tag = strlen(TX_OWNER_TAG), olen = strlen(owner), keep;

    for (int i = 0; cf->kw[i] != NULL; i++)
        if (strcmp(cf->kw[i], "application_name") == 0)
            name = cf->val[i];
    keep = strlen(name);
    if (olen == 0 || tag + olen > 63) {
        snprintf(out, 64, "%.63s", name);
        return;
    }
    if (keep > 63 - tag - olen)
        keep = 63 - tag - olen;
    snprintf(out, 64, "%.*s" TX_OWNER_TAG "%s", (int)keep, name, owner);
}

/* ---- acquire ----------------------------------------------------------- */

/* A value drawn with the lock whose epoch the client cannot vouch for
 * (fence.c): the lock was let go (rolled back); confirm, raise or bump
 * the epoch over the same connection, autocommitted, holding nothing. The
 * value drawn there is discarded like the lock's: the acquire runs again
 * and draws after its grant. */
static int tx_epoch(struct pg_session *s)
{
    char err[512] = "";
    uint64_t skipped;
    int rc = dlock__pg_fence(s, 0, &skipped, err, sizeof err);

    if (rc != DLOCK_OK)
        return dlock_session_error(&s->base, rc, "fence: %s", err);
    return DLOCK_OK;
}

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
    char key[65], tkey[24], lt[16], idle[16], app[64];
    /* advisory_xact's lock statement: a try sets no lock_timeout. */
    struct pg_q xact = {cf->sql[lock], deadline != 0 ? 4 : 3,
                        {idle, app, key, lt}};
    uint8_t d[32];
    struct pg_q q[PG_MAXQ];
    struct pg_res res;
    int rc, nq, inserts = 0, epochs = 0;

    (void)retry_ms;
    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    dlock__pg_digest(cf, req->name, req->name_len, d);
    dlock__pg_digest_key(cf, d, key);
    tx_app_name(cf, sh ? "" : req->owner, app);
    dlock__pg_idle_text(idle, req->lease_ms);
    if (turn)
        dlock__pg_key_text(tkey, dlock__pg_key64(d) ^ TX_TURN_FLIP);

    /* Tries: one more after creating a missing lock row, and after each
     * epoch job (a few, as fence.c's own). */
    for (;;) {
        int lockq;
        const PGresult *last;
        uint64_t v;

        /* The wait's limit, from what is left of the deadline (a try
         * waits at the turnstile 1 ms at most). */
        dlock__pg_lock_timeout(lt, deadline);
        if (turn && deadline == 0)
            strcpy(lt, "1");

        /* BEGIN, the wait's limits, the lock and its fence: one round
         * trip. */
        nq = 0;
        q[nq++] = (struct pg_q){"BEGIN", 0, {NULL}};
        if (set)
            q[nq++] = (struct pg_q){cf->sql[TX_SET], 3, {lt, idle, app}};
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
            if (inserts++ > 0)
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
        /* The fence is the lock statement's last column. */
        v = dlock__pg_u64(last, 0, PQnfields(last) - 1);
        dlock__pg_res_clear(&res);
        if (dlock__pg_fence_ok(s->x, v)) {
            g->fence = v;
            g->word[1] = s->gen;
            s->ngrants++;
            return DLOCK_OK;
        }
        /* An epoch to confirm, raise or bump (see the top): not while
         * holding, which could wait for a second server connection. */
        dlock__pg_rollback(s);
        if (epochs++ >= 4)
            return dlock_session_error(&s->base, DLOCK_ERROR,
                                       "fence: the epoch of the values drawn "
                                       "keeps moving (is the server "
                                       "crashing, or something resetting "
                                       "dlock_fence_useq?)");
        if ((rc = tx_epoch(s)) != DLOCK_OK)
            return rc;
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
        /* The owner id of the locking process: none for shared. */
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

/* Version 15 or later, for the unlogged sequence of the fences; the
 * client's epoch, if it knows none yet, so that its first lock need not
 * let go for it (see the top: a lock let go loses its place in the
 * queue); then the session's TCP keepalives. */
static int tx_on_connect(struct pg_session *s, int64_t deadline, char *err,
                         size_t errlen)
{
    const struct pg_conf *cf = s->cf;
    struct pg_q q = {SQL_KEEPALIVES, 3,
                     {cf->ka_idle, cf->ka_interval, cf->ka_count}};
    int rc;

    if ((rc = dlock__pg_fence_server(s, err, errlen)) != DLOCK_OK ||
        (rc = dlock__pg_fence_learn(s, err, errlen)) != DLOCK_OK)
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
    .no_table = "its holders' owner ids are in their server processes' "
                "application_name",
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
        "(SELECT " TX_OWNER_OF("a") " FROM pg_stat_activity a"
        " WHERE a.pid = l.pid)"),
    .on_connect = tx_on_connect,
    .prepare = true,
};

/* The lock row's own owner, fence and locked_at columns are no longer
 * written (the release would have to commit them). A row locked by a
 * running transaction carries that transaction's id in xmax, which
 * pg_stat_activity shows with its server process: inspect's holder, whose
 * application_name names it (see the top). */
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
    .inspect = "SELECT " TX_OWNER_OF("a") ", a.pid"
               " FROM {t} t LEFT JOIN pg_stat_activity a"
               " ON a.backend_xid = t.xmax"
               " WHERE t.key = decode($1, 'hex')",
    .on_connect = tx_on_connect,
    .prepare = true,
};
