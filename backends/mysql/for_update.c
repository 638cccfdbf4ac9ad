/*
 * for_update.c: mode for_update, an open transaction that locked the
 * name's row with SELECT … FOR UPDATE, or LOCK IN SHARE MODE for a shared
 * (reader) lock (NOWAIT for a try, innodb_lock_wait_timeout for a timed
 * wait, so the server queues waiters). COMMIT releases it; a dead connection rolls the transaction
 * back and frees it. Each held lock ties up a connection of its own
 * (DLOCK_CAP_SESSION_PER_LOCK), whose statements all run in transactions
 * (autocommit off) at READ COMMITTED: no gap locks, no stale snapshot
 * between statements.
 *
 * The fence is bumped on the lock's connection, inside its transaction:
 * the counters are a MEMORY table, which a rollback (a killed connection)
 * does not undo, and a restart empties under a new epoch (fence.c). Only
 * a move to a new epoch, which commits, goes over a second connection,
 * one per client. A try is tried first (unless the session found the
 * name busy last time: fu_skip_try), and locks the row and draws the
 * token in one statement (fu_try), so an uncontended acquire + release
 * is two round trips, as for the bare lock; a wait (or a name's first
 * use, or a full table) takes the row and then bumps the fence, and a
 * name's first acquire since the server started bumps it with a second
 * statement, from the marker. Where the server has sequences (fence.c,
 * "The sequence") the try and the bump draw from it instead; the wait
 * still bumps after the grant, so that the counters' row names the
 * holder for inspect (no one can see which connection holds a row).
 *
 * What it shares with get_lock (the silence limit, renewal by ping) is
 * bound.c's; the raw floor of this mode is floor.c's.
 *
 * Divisions: the table and statements; the fence; acquire; release;
 * inspect; the mode.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

/* ---- the table and statements -------------------------------------------- */

/* The rows this mode locks; they are never deleted. */
static const char fu_ddl_rows[] =
    "CREATE TABLE IF NOT EXISTS `%s_rows` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
    " COMMENT 'the name, cut to 255 bytes, for people',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

static const char *const fu_ddl[] = {fu_ddl_rows, dlock__my_epoch_ddl,
                                     dlock__my_fence_ddl,
                                     dlock__my_frec_ddl,
                                     dlock__my_latch_ddl, NULL};

/* Each lock connection's first statements. A lock wait of 0 is NOWAIT on
 * MariaDB; MySQL raises it to its minimum, 1 s. */
static const char *const fu_init[] = {
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION autocommit = 0, SESSION innodb_lock_wait_timeout = 0",
    NULL};

enum {
    FU_ROW_NOWAIT = MY_SLOT_MODE,
    FU_ROW_WAIT,
    FU_ROW_NOWAIT_SH,
    FU_ROW_WAIT_SH,
    FU_ROW_CREATE,
    FU_TAKE,
    FU_TAKE_SH,
    FU_ROW_SUB,
    FU_SLOTS
};
_Static_assert(FU_SLOTS <= MY_SLOTS, "for_update: too many statements");

/* A try. */
static const struct dlock__my_stmt fu_row_nowait = {
    FU_ROW_NOWAIT,
    "SELECT 1 FROM `%s_rows` WHERE lock_key = ? FOR UPDATE NOWAIT"};

/* A wait of innodb_lock_wait_timeout. */
static const struct dlock__my_stmt fu_row_wait = {
    FU_ROW_WAIT, "SELECT 1 FROM `%s_rows` WHERE lock_key = ? FOR UPDATE"};

/* The same for a shared (reader) lock: InnoDB's S lock on the row, which
 * readers share and a writer's FOR UPDATE waits for. A reader asking
 * after a writer queued waits behind it, so readers cannot starve it.
 * MariaDB's syntax (MySQL 8 spells it FOR SHARE). */
static const struct dlock__my_stmt fu_row_nowait_sh = {
    FU_ROW_NOWAIT_SH, "SELECT 1 FROM `%s_rows` WHERE lock_key = ?"
                      " LOCK IN SHARE MODE NOWAIT"};

static const struct dlock__my_stmt fu_row_wait_sh = {
    FU_ROW_WAIT_SH,
    "SELECT 1 FROM `%s_rows` WHERE lock_key = ? LOCK IN SHARE MODE"};

/*
 * A wait of less than a second (MariaDB): innodb_lock_wait_timeout counts
 * whole seconds, so the statement's own max_statement_time (fractional
 * seconds, a server-side timer that interrupts the lock wait with 1969)
 * ends it at the deadline; the lock wait timeout of 1 s is only above it.
 * The wait is ours, in milliseconds, cut down to FU_SUB_STEP_MS (from
 * 100 ms up; below, to the millisecond, so that no tail of the wait is
 * left to NOWAIT polling) so that repeated waits of about the same
 * length reuse one prepared statement; it goes into the text (SET STATEMENT takes no placeholders), the key is
 * bound as everywhere. printf-style: the wait's seconds and thousandths,
 * then the lock clause; what is left has the table's %s.
 */
#define FU_SUB_STEP_MS 10
#define FU_SUB_MIN_MS 2
static const char fu_row_sub_fmt[] =
    "SET STATEMENT max_statement_time = %u.%03u, innodb_lock_wait_timeout"
    " = 1 FOR SELECT 1 FROM `%%s_rows` WHERE lock_key = ? %s";

/* First use of a name. */
static const struct dlock__my_stmt fu_row_create = {
    FU_ROW_CREATE,
    "INSERT IGNORE INTO `%s_rows` (lock_key, name) VALUES (?, ?)"};

/*
 * A try and its fence in one round trip (my.h's MY_FENCE_*): the row
 * locked NOWAIT, and the counter bumped from the same SELECT, so it is
 * written only where the row was locked. Never a wait here: the
 * statement holds the counters' table (MEMORY locks whole tables). No
 * row written: the name's row is missing (its first use), and fu_acquire
 * takes the slow path, which creates it.
 */
#define FU_TAKE_SQL(lock)                                                  \
    MY_FENCE_INSERT "SELECT lock_key, 0, ? FROM `%1$s_rows` "              \
                    "WHERE lock_key = ? " lock MY_FENCE_NEXT
static const struct dlock__my_stmt fu_take_x = {
    FU_TAKE, FU_TAKE_SQL("FOR UPDATE NOWAIT")};
static const struct dlock__my_stmt fu_take_sh = {
    FU_TAKE_SH, FU_TAKE_SQL("LOCK IN SHARE MODE NOWAIT")};
/* The same where tokens come from the sequence (my.h's MY_SEQ_*). */
#define FU_TAKE_SEQ_SQL(lock)                                              \
    MY_SEQ_INSERT "SELECT lock_key, " MY_SEQ_DRAW ", ?, CONNECTION_ID() "  \
                  "FROM `%1$s_rows` WHERE lock_key = ? " lock MY_SEQ_NEXT
static const struct dlock__my_stmt fu_take_x_seq = {
    FU_TAKE, FU_TAKE_SEQ_SQL("FOR UPDATE NOWAIT")};
static const struct dlock__my_stmt fu_take_sh_seq = {
    FU_TAKE_SH, FU_TAKE_SEQ_SQL("LOCK IN SHARE MODE NOWAIT")};

/* ---- the fence ---------------------------------------------------------- */

/* With the row locked, in its transaction. A reader does not name
 * itself: the counter row names an exclusive holder. A missing table is
 * made over the side connection: a CREATE TABLE here would commit, and
 * let the lock go. */
static unsigned fu_fence(struct dlock__my_session *ms,
                         const struct dlock_request *req,
                         const uint8_t key[MY_KEY_LEN], uint64_t *out)
{
    bool shared = req->kind == DLOCK_KIND_SHARED;

    return dlock__my_fence(&ms->conn, ms->x, key, shared ? "" : req->owner,
                           shared ? 0 : req->owner_len, out);
}

/* ---- acquire ------------------------------------------------------------- */

/* Set the session's lock wait (seconds) if it differs. */
static unsigned fu_set_wait(struct dlock__my_session *ms, long s)
{
    char q[80];
    int n;

    if (ms->lock_wait_s == s)
        return 0;
    n = snprintf(q, sizeof q, "SET SESSION innodb_lock_wait_timeout = %ld",
                 s);
    if (mysql_real_query(ms->conn.db, q, (unsigned long)n) != 0)
        return dlock__my_db_note(&ms->conn);
    ms->lock_wait_s = s;
    return 0;
}

/* Lock the row with statement q: 0 and *locked, or an error number. */
static unsigned fu_lock_row(struct dlock__my_session *ms,
                            const struct dlock__my_stmt *q,
                            const uint8_t key[MY_KEY_LEN], bool *locked)
{
    MYSQL_BIND p[1];
    long long one;
    my_flag null;

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    return dlock__my_select_i64(&ms->conn, q, p, &one, &null, locked);
}

/*
 * First use of a name: create its row and commit at once, so it is there
 * for everyone. INSERT IGNORE checks the key under a shared lock, so if
 * someone already created and locked the row this fails (lock wait 0) and
 * the lock is busy.
 */
static unsigned fu_create_row(struct dlock__my_session *ms,
                              const struct dlock_request *req,
                              const uint8_t key[MY_KEY_LEN])
{
    struct dlock__my_conn *c = &ms->conn;
    MYSQL_BIND p[2];
    unsigned e;

    if ((e = fu_set_wait(ms, 0)) != 0)
        return e;
    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], req->name,
                        dlock__my_display_len(req->name, req->name_len));
    if ((e = dlock__my_exec(c, &fu_row_create, p)) != 0)
        return e;
    if (mysql_commit(c->db) != 0)
        return dlock__my_db_note(c);
    return 0;
}

/* The statement of a wait of sub_ms (< 1 s, >= FU_SUB_MIN_MS) on
 * MariaDB: fu_row_sub_fmt, prepared anew when its text changes. */
static struct dlock__my_stmt fu_sub(struct dlock__my_session *ms, bool sh,
                                    unsigned sub_ms)
{
    if (sub_ms >= 100)
        sub_ms -= sub_ms % FU_SUB_STEP_MS;
    if (ms->sub_ms != sub_ms || ms->sub_sh != sh) {
        dlock__my_unprepare(&ms->conn, FU_ROW_SUB);
        snprintf(ms->sub_sql, sizeof ms->sub_sql, fu_row_sub_fmt,
                 sub_ms / 1000, sub_ms % 1000,
                 sh ? "LOCK IN SHARE MODE" : "FOR UPDATE");
        ms->sub_ms = sub_ms;
        ms->sub_sh = sh;
    }
    return (struct dlock__my_stmt){FU_ROW_SUB, ms->sub_sql};
}

/* Lock the row, creating it on first use: DLOCK_OK, or what the attempt
 * came to. */
static int fu_take(struct dlock__my_session *ms,
                   const struct dlock_request *req,
                   const uint8_t key[MY_KEY_LEN], int64_t deadline_ms,
                   uint32_t *retry_ms)
{
    struct dlock__my_conn *c = &ms->conn;
    bool sh = req->kind == DLOCK_KIND_SHARED;
    struct dlock__my_kill kill;
    struct dlock__my_stmt sub;
    int64_t left = 0;
    bool locked = false;
    long wait_s = 0;
    unsigned e;

    /*
     * innodb_lock_wait_timeout counts whole seconds: wait natively for the
     * whole seconds left (never past the deadline, and ending before the
     * read timeout would). Less than a second left: on MariaDB a
     * statement of its own cut at the deadline (fu_row_sub_fmt), else
     * tries with NOWAIT while core backs off for the rest.
     */
    if (deadline_ms != 0) {
        long cap = (long)ms->x->io_s - 1;
        left = deadline_ms - dlock_now_ms();
        wait_s = left >= 1000 ? (long)(left / 1000) : 0;
        if (wait_s > cap)
            wait_s = cap;
    }
    for (int round = 0; round < 2; round++) {
        const struct dlock__my_stmt *q =
            wait_s > 0 ? (sh ? &fu_row_wait_sh : &fu_row_wait)
                       : (sh ? &fu_row_nowait_sh : &fu_row_nowait);
        bool waits = wait_s > 0;

        if (!waits && deadline_ms != 0)
            left = deadline_ms - dlock_now_ms(); /* after a row's creation */
        if (!waits && left >= FU_SUB_MIN_MS && left < 1000 &&
            mariadb_connection(c->db)) {
            sub = fu_sub(ms, sh, (unsigned)left);
            q = &sub;
            waits = true;
        }
        if (wait_s > 0 && (e = fu_set_wait(ms, wait_s)) != 0)
            return dlock__my_fail(ms, c, "set lock wait");
        if (waits)
            dlock__my_kill_arm(&kill, ms);
        e = fu_lock_row(ms, q, key, &locked);
        if (waits && dlock__my_kill_disarm(&kill)) {
            /* Cancelled [B-CANCEL-1]: whether the row was locked or not,
             * the rollback lets it go. */
            mysql_rollback(c->db);
            return dlock_session_error(&ms->base,
                                       dlock_session_cancelled(&ms->base),
                                       "SELECT … FOR UPDATE: cancelled");
        }
        /* The short wait's timer ran out: as a lock wait timeout, only
         * the statement is undone, and it locked nothing. */
        if (dlock__my_code(e) == DLOCK_EBUSY ||
            (q == &sub && e == ER_STATEMENT_TIMEOUT))
            return dlock__my_busy(deadline_ms, waits, retry_ms);
        if (e != 0)
            return dlock__my_fail(ms, c, "SELECT … FOR UPDATE");
        if (locked)
            return DLOCK_OK;
        if (round > 0)
            break;
        e = fu_create_row(ms, req, key);
        if (dlock__my_code(e) == DLOCK_EBUSY)
            return dlock__my_busy(deadline_ms, false, retry_ms);
        if (e != 0)
            return dlock__my_fail(ms, c, "create the lock row");
    }
    return dlock_session_error(&ms->base, DLOCK_ERROR,
                               "the lock row vanished right after it was "
                               "created (table `%s_rows` cleared?)",
                               ms->x->table);
}

/*
 * The uncontended path, one round trip (fu_take_x or fu_take_sh):
 * DLOCK_OK or a failure with *done. A row locked whose token is not drawn
 * yet (the name's first bump since the server started, a counter run out)
 * gets it from fu_fence, which falls back on the marker and moves the
 * epoch. Busy without a deadline is EBUSY at once. With !*done the caller
 * goes on with fu_take and fu_fence in the same transaction, as before
 * this path existed: when busy with a deadline (fu_take waits), when the
 * name's row is missing (fu_take creates it), or when the table is full
 * (the row may be locked already, which fu_take finds at once). Other
 * failures roll back, which lets any lock go.
 */
/* Report the connection's last error as what failed, and roll back: the
 * row, if it was locked, is let go of. */
static int fu_undo(struct dlock__my_session *ms, const char *what)
{
    int rc = dlock__my_fail(ms, &ms->conn, what);

    mysql_rollback(ms->conn.db);
    return rc;
}

static int fu_try(struct dlock__my_session *ms,
                  const struct dlock_request *req,
                  const uint8_t key[MY_KEY_LEN], int64_t deadline_ms,
                  struct dlock_grant *grant, uint32_t *retry_ms, bool *done,
                  bool *busy)
{
    struct dlock__my_conn *c = &ms->conn;
    bool shared = req->kind == DLOCK_KIND_SHARED;
    MYSQL_BIND p[2];
    my_ulonglong rows;
    unsigned e;

    *done = true;
    *busy = false;
    /* A reader does not name itself (fu_fence). */
    dlock__my_bind_text(&p[0], shared ? "" : req->owner,
                        shared ? 0 : req->owner_len);
    dlock__my_bind_blob(&p[1], key, MY_KEY_LEN);
    if (c->seq == MY_SEQ_ON)
        e = dlock__my_fence_with(c, shared ? &fu_take_sh_seq : &fu_take_x_seq,
                                 p, &rows, &grant->fence);
    else
        e = dlock__my_fence_with(c, shared ? &fu_take_sh : &fu_take_x, p,
                                 &rows, &grant->fence);
    if (e == 0 && rows > 0) {
        if (c->seq == MY_SEQ_ON) {
            c->recorded = true;
            if (dlock__my_seq_check(c, ms->x, grant->fence) != 0)
                return fu_undo(ms, "fence epoch");
        }
        if (grant->fence == 0 && fu_fence(ms, req, key, &grant->fence) != 0)
            return fu_undo(ms, "fence");
        ms->ngrants++;
        return DLOCK_OK;
    }
    *busy = dlock__my_code(e) == DLOCK_EBUSY;
    if (*busy && deadline_ms == 0)
        return dlock__my_busy(deadline_ms, false, retry_ms);
    if (e == 0 || e == ER_RECORD_FILE_FULL ||
        dlock__my_code(e) == DLOCK_EBUSY) {
        *done = false;
        return DLOCK_OK;
    }
    return fu_undo(ms, "SELECT … FOR UPDATE with its fence");
}

/*
 * The try is skipped by an acquire that may wait for a name this session
 * found busy when it last came to take it, as get_lock's (gl_skip_try):
 * there it is likely to fail, and costs a round trip plus a hold of the
 * counters' table while the holder's successor draws its token. The
 * waiting FOR UPDATE cannot say whether the row was busy when it began;
 * the token can: one above this session's last on the name means nobody
 * held it in between, and the next acquire tries again. A hint only: a
 * wrong guess costs one round trip (the wait's fence is a statement of
 * its own). (With the sequence, other names' draws come in between too,
 * so a busy table keeps the hint set longer.)
 */
static bool fu_skip_try(const struct dlock__my_session *ms,
                        const uint8_t key[MY_KEY_LEN], int64_t deadline_ms)
{
    return deadline_ms != 0 && ms->busy &&
           memcmp(ms->busy_key, key, MY_KEY_LEN) == 0;
}

/* After a wait's grant of fence: busy, the try failed as busy, or was
 * skipped (then the token says). */
static void fu_note_busy(struct dlock__my_session *ms,
                         const uint8_t key[MY_KEY_LEN], bool busy,
                         uint64_t fence)
{
    bool same = ms->busy && memcmp(ms->busy_key, key, MY_KEY_LEN) == 0;

    ms->busy = busy && !(same && fence == ms->busy_fence + 1);
    memcpy(ms->busy_key, key, MY_KEY_LEN);
    ms->busy_fence = fence;
}

static int fu_acquire(struct dlock_session *s, const struct dlock_request *req,
                      int64_t deadline_ms, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    uint8_t key[MY_KEY_LEN];
    bool done, busy = true;
    int rc;

    if ((rc = dlock__my_bound_begin(ms, req)) != DLOCK_OK)
        return rc;
    /* The source of tokens, before the first statement that draws one. */
    if (dlock__my_seq_ready(&ms->conn, ms->x) != 0)
        return fu_undo(ms, "fence sequence");
    dlock__my_key(ms->x, req->name, req->name_len, key);
    if (!fu_skip_try(ms, key, deadline_ms)) {
        rc = fu_try(ms, req, key, deadline_ms, grant, retry_ms, &done, &busy);
        if (done && rc == DLOCK_OK)
            ms->busy = false;
        if (done)
            return rc;
    }
    if ((rc = fu_take(ms, req, key, deadline_ms, retry_ms)) != DLOCK_OK)
        return rc;
    /* Held until COMMIT, or until this connection ends. */
    if (fu_fence(ms, req, key, &grant->fence) != 0)
        return fu_undo(ms, "fence");
    ms->ngrants++;
    fu_note_busy(ms, key, busy, grant->fence);
    return DLOCK_OK;
}

/* ---- release ------------------------------------------------------------- */

static int fu_release(struct dlock_session *s, const struct dlock_request *req,
                      struct dlock_grant *grant)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;

    (void)req;
    (void)grant;
    if (ms->ngrants > 0)
        ms->ngrants--;
    if (c->broken)
        return dlock_session_error(&ms->base, DLOCK_ECONNECT,
                                   "the connection holding the lock is "
                                   "gone: %s",
                                   c->msg);
    if (mysql_commit(c->db) != 0) {
        dlock__my_db_note(c);
        return dlock__my_fail(ms, c, "COMMIT");
    }
    return DLOCK_OK;
}

/* ---- inspect ------------------------------------------------------------- */

/*
 * Held or not, by a NOWAIT probe: busy means held; a row we could lock
 * was free (the ROLLBACK gives it back at once). Who holds it, InnoDB
 * tells only with the PROCESS privilege; the counter row names the owner
 * that took the last token, which is the holder while it is held.
 * (SKIP LOCKED would read better, but over a locked row MariaDB 10.11 and
 * Connector/C 3.3 end the empty result with a fetch error of errno 0.)
 */
static int fu_probe(struct dlock__my_session *ms,
                    const uint8_t key[MY_KEY_LEN], dlock_state *out)
{
    struct dlock__my_conn *c = &ms->conn;
    bool locked = false;
    unsigned e;

    e = fu_lock_row(ms, &fu_row_nowait, key, &locked);
    mysql_rollback(c->db);
    if (dlock__my_code(e) == DLOCK_EBUSY) {
        out->held = 1;
        return DLOCK_OK;
    }
    if (e != 0)
        return dlock__my_fail(ms, c, "inspect");
    out->held = 0;
    return DLOCK_OK;
}

static int fu_inspect(struct dlock_session *s, const char *name, size_t len,
                      dlock_state *out)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    uint8_t key[MY_KEY_LEN];
    int rc;

    if (ms->conn.broken)
        return dlock__my_broken(ms);
    dlock__my_key(ms->x, name, len, key);
    rc = fu_probe(ms, key, out);
    if (rc == DLOCK_OK &&
        dlock__my_fence_peek(&ms->conn, key, &out->fence, out->owner,
                             out->held > 0 ? sizeof out->owner : 0,
                             NULL) != 0)
        rc = dlock__my_fail(ms, &ms->conn, "inspect fence");
    /* The peek, too, ran in a transaction of this connection. */
    mysql_rollback(ms->conn.db);
    return rc;
}

/* ---- the mode ------------------------------------------------------------ */

static int fu_floor(const struct dlock_uri *uri, const char *name, uint32_t n,
                    uint64_t *ns_out, char *err, size_t errlen)
{
    static const struct dlock__my_floor_sql q = {
        &dlock__my_mode_for_update, &fu_row_nowait, NULL, &fu_row_create,
        NULL};

    return dlock__my_floor_for_update(&q, uri, name, n, ns_out, err, errlen);
}

static int fu_floor_wait(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen)
{
    static const struct dlock__my_floor_sql q = {
        &dlock__my_mode_for_update, NULL, NULL, &fu_row_create, &fu_row_wait};

    (void)mode;
    return dlock__my_floor_wait(&q, uri, name, wait_ms, go_on, arg, err,
                                errlen);
}

/* The server waits for us; back off only between waits. */
const struct dlock__my_mode dlock__my_mode_for_update = {
    .base =
        {
            .name = "for_update",
            .summary = "a transaction holding SELECT … FOR UPDATE on the "
                       "name's row: one connection per held lock",
            .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                    DLOCK_CAP_SESSION_PER_LOCK | DLOCK_CAP_NATIVE_WAIT |
                    DLOCK_CAP_SHARED | DLOCK_CAP_FENCING | DLOCK_CAP_LATCH,
            .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                     DLOCK_KIND_BIT(DLOCK_KIND_SHARED),
            .retry_min_ms = 1,
            .retry_max_ms = 32,
            .acquire = fu_acquire,
            .renew = dlock__my_bound_renew,
            .release = fu_release,
            .inspect = fu_inspect,
            .floor = fu_floor,
            /* No fence_floor: the lock's own request draws it. */
            .forget = dlock__my_forget,
            .latch = &dlock__my_latch,
            .floor_wait = fu_floor_wait,
        },
    .ddl = fu_ddl,
    .init = fu_init,
    .ctx_close = dlock__my_fence_side_close,
};
