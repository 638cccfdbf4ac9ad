/*
 * insert.c: mode insert (the default), the classic unique-key lock table:
 * a row per held lock, claimed by one INSERT (the primary key lets one
 * client win), released by a DELETE that names the owner, kept alive by an
 * UPDATE of its expiry that names the owner. The classic design has a
 * known hole: a holder that crashes leaves its row forever. Here every row
 * carries expires_at (server clock, UTC), and a row whose lease ran out is
 * taken over by one conditional UPDATE. Nothing is bound to a connection,
 * so a holder survives reconnects and server restarts, but a waiter can
 * only poll. Every statement autocommits.
 *
 * The fence is fence.c's, the key keys.c's, the statements run through
 * conn.c; the raw floor of this mode is floor.c's.
 *
 * Permits of a semaphore are rows of slot keys in the same table
 * (ins_permit_acquire).
 *
 * Divisions: the table and statements; acquire; renew; release; inspect;
 * the mode.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

/* Renewals per UPDATE. */
#define MY_BATCH 32

/* ---- the table and statements -------------------------------------------- */

/*
 * No fence column: the token lives in the counter row, which must outlive
 * this row's DELETE, and copying it here would cost a statement per
 * acquisition. No entry count either: core counts reentrant levels in the
 * handle, with no round trip, and the server sees one acquisition.
 * expires_at is UTC (UTC_TIMESTAMP), so a daylight-saving change of the
 * server's time zone cannot move leases.
 */
static const char ins_ddl_locks[] =
    "CREATE TABLE IF NOT EXISTS `%s` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
    " COMMENT 'the name, cut to 255 bytes, for people',"
    " owner VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"
    " COMMENT 'client uuid:handle serial',"
    " host VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
    " COMMENT 'host name:pid of the holder',"
    " expires_at DATETIME(6) NOT NULL COMMENT 'UTC, server clock',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

static const char *const ins_ddl[] = {ins_ddl_locks, dlock__my_epoch_ddl,
                                      dlock__my_fence_ddl,
                                      dlock__my_frec_ddl,
                                      dlock__my_latch_ddl, NULL};

enum {
    INS_CLAIM = MY_SLOT_MODE,
    INS_TAKEOVER,
    INS_DELETE,
    INS_EXTEND,
    INS_EXTEND_BATCH,
    INS_OWNERS_BATCH,
    INS_ROW_STATE,
    INS_LIVE,
    INS_SLOTS
};
_Static_assert(INS_SLOTS <= MY_SLOTS, "insert: too many statements");

/* The claim and the takeover: see ins_acquire(). */
static const struct dlock__my_stmt ins_claim = {
    INS_CLAIM,
    "INSERT INTO `%s` (lock_key, name, owner, host, expires_at) "
    "VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)"};

static const struct dlock__my_stmt ins_takeover = {
    INS_TAKEOVER,
    "UPDATE `%s` SET owner = ?, host = ?, "
    "expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
    "WHERE lock_key = ? AND (expires_at < UTC_TIMESTAMP(6) OR owner = ?)"};

static const struct dlock__my_stmt ins_delete = {
    INS_DELETE, "DELETE FROM `%s` WHERE lock_key = ? AND owner = ?"};

static const struct dlock__my_stmt ins_extend = {
    INS_EXTEND, "UPDATE `%s` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? "
                "MICROSECOND WHERE lock_key = ? AND owner = ?"};

/* MY_BATCH (32) parameter marks. */
#define MARKS8 "?, ?, ?, ?, ?, ?, ?, ?"
#define MARKS32 MARKS8 ", " MARKS8 ", " MARKS8 ", " MARKS8
_Static_assert(sizeof MARKS32 - 1 == 3 * MY_BATCH - 2,
               "insert: MARKS32 must hold MY_BATCH marks");

static const struct dlock__my_stmt ins_extend_batch = {
    INS_EXTEND_BATCH,
    "UPDATE `%s` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? "
    "MICROSECOND WHERE lock_key IN (" MARKS32 ") AND owner IN (" MARKS32
    ")"};

static const struct dlock__my_stmt ins_owners_batch = {
    INS_OWNERS_BATCH,
    "SELECT lock_key, owner FROM `%s` WHERE lock_key IN (" MARKS32 ")"};

static const struct dlock__my_stmt ins_row_state = {
    INS_ROW_STATE,
    "SELECT owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), "
    "expires_at) DIV 1000 FROM `%s` WHERE lock_key = ?"};

/* Permits: which of MY_BATCH slot keys have a row whose lease runs. */
static const struct dlock__my_stmt ins_live = {
    INS_LIVE, "SELECT lock_key FROM `%s` WHERE lock_key IN (" MARKS32
              ") AND expires_at >= UTC_TIMESTAMP(6)"};

/* The row of a request: its name's, or its permit slot's (grant->word[0]
 * when granted). */
static void ins_key(const struct dlock__my_ctx *x,
                    const struct dlock_request *req,
                    const struct dlock_grant *grant, uint8_t key[MY_KEY_LEN])
{
    if (req->kind == DLOCK_KIND_PERMIT)
        dlock__my_slot_key(x, req->name, req->name_len,
                           (unsigned)grant->word[0], key);
    else
        dlock__my_key(x, req->name, req->name_len, key);
}

/* ---- acquire ------------------------------------------------------------- */

/* DELETE key's row if owner's: 0 or an error number; affected rows say
 * whether it was. */
static unsigned ins_delete_row(struct dlock__my_conn *c,
                               const uint8_t key[MY_KEY_LEN],
                               const char *owner, size_t owner_len)
{
    MYSQL_BIND p[2];

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], owner, owner_len);
    return dlock__my_exec(c, &ins_delete, p);
}

/* Claim key's row for req: one INSERT (the primary key lets exactly one
 * client in), and the takeover of an expired row. 0 with *won, or an
 * error number. */
static unsigned ins_claim_row(struct dlock__my_session *ms,
                              const struct dlock_request *req,
                              const uint8_t key[MY_KEY_LEN], bool *won)
{
    struct dlock__my_conn *c = &ms->conn;
    struct dlock__my_ctx *x = ms->x;
    long long lease_us = (long long)req->lease_ms * 1000;
    MYSQL_BIND p[5];
    unsigned e;

    *won = false;
    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], req->name,
                        dlock__my_display_len(req->name, req->name_len));
    dlock__my_bind_text(&p[2], req->owner, req->owner_len);
    dlock__my_bind_text(&p[3], x->holder, x->holder_len);
    dlock__my_bind_i64(&p[4], &lease_us);
    e = dlock__my_exec(c, &ins_claim, p);
    if (e == ER_DUP_ENTRY) {
        /* Held, unless the lease ran out (a crashed holder): then one
         * conditional UPDATE takes the row over. Of two clients racing
         * for it, the first to update makes the row unexpired, so the
         * other's WHERE no longer matches. A row that is still this
         * handle's (its release was lost with a connection) is simply
         * ours again: nobody else can have held it meanwhile. */
        dlock__my_bind_text(&p[0], req->owner, req->owner_len);
        dlock__my_bind_text(&p[1], x->holder, x->holder_len);
        dlock__my_bind_i64(&p[2], &lease_us);
        dlock__my_bind_blob(&p[3], key, MY_KEY_LEN);
        dlock__my_bind_text(&p[4], req->owner, req->owner_len);
        e = dlock__my_exec(c, &ins_takeover, p);
        if (e == 0 && dlock__my_affected(c, &ins_takeover) != 1)
            return 0;
    }
    /* Concurrent INSERTs of one key deadlock in InnoDB now and then: the
     * loser simply found the lock busy. */
    if (e == ER_LOCK_DEADLOCK || e == ER_LOCK_WAIT_TIMEOUT)
        return 0;
    *won = e == 0;
    return e;
}

/* The row of key is req's: take the name's fence, or give the row back. */
static int ins_fenced(struct dlock__my_session *ms,
                      const struct dlock_request *req,
                      const uint8_t key[MY_KEY_LEN], struct dlock_grant *grant)
{
    struct dlock__my_conn *c = &ms->conn;
    uint8_t name_key[MY_KEY_LEN];
    int rc;

    dlock__my_key(ms->x, req->name, req->name_len, name_key);
    if (dlock__my_fence(c, NULL, name_key, req->owner, req->owner_len,
                        &grant->fence) == 0)
        return DLOCK_OK;
    rc = dlock__my_fail(ms, c, "fence");
    /* Give the row back if we still can; else its lease frees it. */
    if (!c->broken)
        ins_delete_row(c, key, req->owner, req->owner_len);
    return rc;
}

/* Which of keys[0..n-1] (n <= MY_BATCH) have a row whose lease runs:
 * live[i]. 0 or an error number. */
static unsigned ins_live_keys(struct dlock__my_conn *c,
                              uint8_t keys[][MY_KEY_LEN], size_t n,
                              bool *live)
{
    MYSQL_BIND p[MY_BATCH], r[1];
    uint8_t rkey[MY_KEY_LEN];
    unsigned long rkey_len;
    my_flag rkey_null;
    MYSQL_STMT *st;
    unsigned e;
    int f;

    for (size_t k = 0; k < MY_BATCH; k++)
        dlock__my_bind_blob(&p[k], keys[k < n ? k : 0], MY_KEY_LEN);
    for (size_t k = 0; k < n; k++)
        live[k] = false;
    if ((e = dlock__my_exec(c, &ins_live, p)) != 0)
        return e;
    st = c->st[ins_live.slot];
    dlock__my_res_bytes(&r[0], rkey, sizeof rkey, &rkey_len, &rkey_null);
    if (mysql_stmt_bind_result(st, r) != 0)
        f = 1;
    else
        while ((f = mysql_stmt_fetch(st)) == 0)
            for (size_t k = 0; k < n; k++)
                live[k] = live[k] || (rkey_len == MY_KEY_LEN &&
                                      memcmp(rkey, keys[k], MY_KEY_LEN) == 0);
    e = f == 1 ? dlock__my_stmt_note(c, st) : 0;
    mysql_stmt_free_result(st);
    return e;
}

/*
 * A permit of N: a row of the slot's key (keys.c) in the same table, so a
 * permit is a lock of this mode in every other way (lease, takeover of an
 * expired row, renewal, owner-checked release, surviving reconnects), one
 * row per grant. From a random slot on, one SELECT per MY_BATCH slots says
 * which rows are live, and only the others are claimed: a slot freed or
 * expired meanwhile is simply won, one taken meanwhile is a duplicate key.
 * The count is not stored, as in get_lock.c.
 */
static int ins_permit_acquire(struct dlock__my_session *ms,
                              const struct dlock_request *req,
                              struct dlock_grant *grant)
{
    const unsigned n = req->permits, start = dlock__my_first_slot(req);
    uint8_t keys[MY_BATCH][MY_KEY_LEN];
    unsigned slots[MY_BATCH];
    bool live[MY_BATCH], won;

    for (unsigned base = 0; base < n; base += MY_BATCH) {
        size_t m = n - base < MY_BATCH ? n - base : MY_BATCH;

        for (size_t k = 0; k < m; k++) {
            slots[k] = (start + base + (unsigned)k) % n;
            dlock__my_slot_key(ms->x, req->name, req->name_len, slots[k],
                               keys[k]);
        }
        if (ins_live_keys(&ms->conn, keys, m, live) != 0)
            return dlock__my_fail(ms, &ms->conn, "claim a permit");
        for (size_t k = 0; k < m; k++) {
            if (live[k])
                continue;
            if (ins_claim_row(ms, req, keys[k], &won) != 0)
                return dlock__my_fail(ms, &ms->conn, "claim a permit");
            if (won) {
                grant->word[0] = slots[k];
                return ins_fenced(ms, req, keys[k], grant);
            }
        }
    }
    return DLOCK_EBUSY;
}

static int ins_acquire(struct dlock_session *s, const struct dlock_request *req,
                       int64_t deadline_ms, struct dlock_grant *grant,
                       uint32_t *retry_ms)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    uint8_t key[MY_KEY_LEN];
    bool won;

    (void)deadline_ms; /* no native wait: core polls */
    (void)retry_ms;
    if (ms->conn.broken)
        return dlock__my_broken(ms);
    if (req->kind == DLOCK_KIND_PERMIT)
        return ins_permit_acquire(ms, req, grant);
    dlock__my_key(ms->x, req->name, req->name_len, key);
    if (ins_claim_row(ms, req, key, &won) != 0)
        return dlock__my_fail(ms, &ms->conn, "claim");
    return won ? ins_fenced(ms, req, key, grant) : DLOCK_EBUSY;
}

/* ---- renew --------------------------------------------------------------- */

static int ins_renew_one(struct dlock__my_session *ms,
                         struct dlock_renewal *it)
{
    struct dlock__my_conn *c = &ms->conn;
    long long lease_us = (long long)it->req->lease_ms * 1000;
    uint8_t key[MY_KEY_LEN];
    MYSQL_BIND p[3];

    ins_key(ms->x, it->req, it->grant, key);
    dlock__my_bind_i64(&p[0], &lease_us);
    dlock__my_bind_blob(&p[1], key, MY_KEY_LEN);
    dlock__my_bind_text(&p[2], it->req->owner, it->req->owner_len);
    if (dlock__my_exec(c, &ins_extend, p) != 0)
        return dlock__my_fail(ms, c, "renew");
    it->result = dlock__my_affected(c, &ins_extend) == 1
                     ? DLOCK_OK
                     : dlock_session_error(&ms->base, DLOCK_ELOST,
                                           "the row is gone or has another "
                                           "owner (the lease ran out and "
                                           "another client took it)");
    return DLOCK_OK;
}

/* Which of the n items still own their rows, by one SELECT: their
 * results become DLOCK_OK. */
static int ins_owners(struct dlock__my_session *ms, struct dlock_renewal *it,
                      size_t n, uint8_t keys[][MY_KEY_LEN], MYSQL_BIND *p)
{
    struct dlock__my_conn *c = &ms->conn;
    uint8_t rkey[MY_KEY_LEN];
    char rowner[65];
    unsigned long rkey_len, rowner_len;
    my_flag rkey_null, rowner_null;
    MYSQL_BIND r[2];
    MYSQL_STMT *st;
    int f;

    if (dlock__my_exec(c, &ins_owners_batch, p) != 0)
        return dlock__my_fail(ms, c, "renew");
    st = c->st[ins_owners_batch.slot];
    dlock__my_res_bytes(&r[0], rkey, sizeof rkey, &rkey_len, &rkey_null);
    dlock__my_res_bytes(&r[1], rowner, sizeof rowner - 1, &rowner_len,
                        &rowner_null);
    if (mysql_stmt_bind_result(st, r) != 0) {
        dlock__my_stmt_note(c, st);
        mysql_stmt_free_result(st);
        return dlock__my_fail(ms, c, "renew");
    }
    while ((f = mysql_stmt_fetch(st)) == 0) {
        for (size_t k = 0; k < n; k++)
            if (rkey_len == MY_KEY_LEN &&
                memcmp(rkey, keys[k], MY_KEY_LEN) == 0 &&
                rowner_len == it[k].req->owner_len &&
                memcmp(rowner, it[k].req->owner, rowner_len) == 0)
                it[k].result = DLOCK_OK;
    }
    if (f == 1) {
        dlock__my_stmt_note(c, st);
        mysql_stmt_free_result(st);
        return dlock__my_fail(ms, c, "renew");
    }
    mysql_stmt_free_result(st);
    return DLOCK_OK;
}

/*
 * Renew n <= MY_BATCH locks of one lease in one UPDATE. Unused slots
 * repeat the first item (IN ignores repeats). The WHERE is keys IN (…) AND
 * owners IN (…): a row can match a key and another item's owner only if
 * that handle holds the same name, i.e. two items share a key; so when
 * the rows matched equal n, every item is ours. Otherwise one SELECT says
 * which ones still are.
 */
static int ins_renew_batch(struct dlock__my_session *ms,
                           struct dlock_renewal *it, size_t n)
{
    struct dlock__my_conn *c = &ms->conn;
    long long lease_us = (long long)it[0].req->lease_ms * 1000;
    uint8_t keys[MY_BATCH][MY_KEY_LEN];
    MYSQL_BIND p[1 + 2 * MY_BATCH];
    int rc;

    dlock__my_bind_i64(&p[0], &lease_us);
    for (size_t k = 0; k < MY_BATCH; k++) {
        size_t src = k < n ? k : 0;
        if (k < n)
            dlock__my_key(ms->x, it[k].req->name, it[k].req->name_len,
                          keys[k]);
        dlock__my_bind_blob(&p[1 + k], keys[src], MY_KEY_LEN);
        dlock__my_bind_text(&p[1 + MY_BATCH + k], it[src].req->owner,
                            it[src].req->owner_len);
    }
    if (dlock__my_exec(c, &ins_extend_batch, p) != 0)
        return dlock__my_fail(ms, c, "renew");
    for (size_t k = 0; k < n; k++)
        it[k].result = DLOCK_ELOST;
    if (dlock__my_affected(c, &ins_extend_batch) == n) {
        for (size_t k = 0; k < n; k++)
            it[k].result = DLOCK_OK;
        return DLOCK_OK;
    }
    if ((rc = ins_owners(ms, it, n, keys, p + 1)) != DLOCK_OK)
        return rc;
    for (size_t k = 0; k < n; k++)
        if (it[k].result != DLOCK_OK)
            it[k].result = dlock_session_error(
                &ms->base, DLOCK_ELOST,
                "the row is gone or has another owner (the lease ran out "
                "and another client took it)");
    return DLOCK_OK;
}

/* Runs of one lease go by batch; a run of one by the plain UPDATE. */
static int ins_renew(struct dlock_session *s, struct dlock_renewal *items,
                     size_t n)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;

    if (ms->conn.broken)
        return dlock__my_broken(ms);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        int rc;

        /* Permits go one by one: a batch's count proves each item only
         * where a handle's row key is its name's (ins_renew_batch). */
        while (j < n && j - i < MY_BATCH &&
               items[j].req->lease_ms == items[i].req->lease_ms &&
               items[i].req->kind != DLOCK_KIND_PERMIT &&
               items[j].req->kind != DLOCK_KIND_PERMIT)
            j++;
        rc = j - i == 1 ? ins_renew_one(ms, &items[i])
                        : ins_renew_batch(ms, items + i, j - i);
        if (rc != DLOCK_OK)
            return rc;
        i = j;
    }
    return DLOCK_OK;
}

/* ---- release ------------------------------------------------------------- */

static int ins_release(struct dlock_session *s, const struct dlock_request *req,
                       struct dlock_grant *grant)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];

    if (c->broken)
        return dlock__my_broken(ms);
    ins_key(ms->x, req, grant, key);
    if (ins_delete_row(c, key, req->owner, req->owner_len) != 0)
        return dlock__my_fail(ms, c, "release");
    if (dlock__my_affected(c, &ins_delete) != 1)
        return dlock_session_error(&ms->base, DLOCK_ENOTOWNER,
                                   "no row of this owner: the lease ran "
                                   "out, and the lock is free or taken");
    return DLOCK_OK;
}

/* ---- inspect ------------------------------------------------------------- */

/* Live permit rows of a name, any count: all DLOCK_PERMITS_MAX slots'
 * keys, MY_BATCH per round trip. 0 or an error number. */
static unsigned ins_permits_held(struct dlock__my_session *ms,
                                 const char *name, size_t len,
                                 unsigned *held)
{
    uint8_t keys[MY_BATCH][MY_KEY_LEN];
    bool live[MY_BATCH];
    unsigned e;

    *held = 0;
    for (unsigned base = 0; base < DLOCK_PERMITS_MAX; base += MY_BATCH) {
        for (unsigned k = 0; k < MY_BATCH; k++)
            dlock__my_slot_key(ms->x, name, len, base + k, keys[k]);
        if ((e = ins_live_keys(&ms->conn, keys, MY_BATCH, live)) != 0)
            return e;
        for (unsigned k = 0; k < MY_BATCH; k++)
            *held += live[k];
    }
    return 0;
}

static int ins_inspect(struct dlock_session *s, const char *name, size_t len,
                       dlock_state *out)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    MYSQL_BIND p[1], r[2];
    char owner[65];
    unsigned long owner_len;
    long long left;
    my_flag owner_null, left_null;
    bool found;

    if (c->broken)
        return dlock__my_broken(ms);
    dlock__my_key(ms->x, name, len, key);
    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_res_bytes(&r[0], owner, sizeof owner - 1, &owner_len,
                        &owner_null);
    dlock__my_res_i64(&r[1], &left, &left_null);
    if (dlock__my_exec(c, &ins_row_state, p) != 0 ||
        dlock__my_fetch(c, &ins_row_state, r, &found) != 0)
        return dlock__my_fail(ms, c, "inspect");
    out->held = found && !left_null && left > 0;
    if (out->held) {
        owner[owner_len < sizeof owner ? owner_len : sizeof owner - 1] = '\0';
        snprintf(out->owner, sizeof out->owner, "%s", owner);
        out->remaining_ms = left;
    }
    if (dlock__my_fence_peek(c, key, &out->fence, NULL, 0, NULL) != 0)
        return dlock__my_fail(ms, c, "inspect fence");
    /* Free as a lock but fenced: maybe a semaphore's name, held when any
     * slot's row is live (owner and lease unknown). */
    if (!out->held && out->fence != 0) {
        unsigned permits = 0;
        if (ins_permits_held(ms, name, len, &permits) != 0)
            return dlock__my_fail(ms, c, "inspect permits");
        out->held = permits > 0;
    }
    return DLOCK_OK;
}

/* ---- the mode ------------------------------------------------------------ */

static int ins_floor(const struct dlock_uri *uri, const char *name,
                     uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    static const struct dlock__my_floor_sql q = {
        &dlock__my_mode_insert, &ins_claim, &ins_delete, NULL, NULL};

    return dlock__my_floor_insert(&q, uri, name, n, ns_out, err, errlen);
}

/* insert polls: start fast, stay fast. */
const struct dlock__my_mode dlock__my_mode_insert = {
    .base =
        {
            .name = "insert",
            .summary = "unique-key rows with a lease (INSERT, a "
                       "conditional UPDATE takes over an expired row)",
            .caps = DLOCK_CAP_LEASE | DLOCK_CAP_FENCING |
                    DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW |
                    DLOCK_CAP_PERMITS | DLOCK_CAP_LATCH,
            .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                     DLOCK_KIND_BIT(DLOCK_KIND_PERMIT),
            .retry_min_ms = 2,
            .retry_max_ms = 64,
            .acquire = ins_acquire,
            .renew = ins_renew,
            .release = ins_release,
            .inspect = ins_inspect,
            .floor = ins_floor,
            .fence_floor = dlock__my_fence_floor,
            .forget = dlock__my_forget,
            .latch = &dlock__my_latch,
        },
    .ddl = ins_ddl,
};
