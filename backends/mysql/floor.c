/*
 * floor.c: what `dlock bench` measures below dlock, for `dlock bench` only:
 * n acquire+release cycles of the bare lock with Connector/C alone, the
 * lock statements dlock sends (handed over by the mode's file, struct
 * dlock__my_floor_sql) and no fence, prepared before the clock starts, on
 * one connection, with no core, pool or watchdog:
 *   get_lock    SELECT GET_LOCK(?, 0), then SELECT RELEASE_LOCK(?): the
 *               server's named lock as any client takes it;
 *   for_update  SELECT .. FOR UPDATE NOWAIT on the row, then COMMIT
 *               (START TRANSACTION is implicit: autocommit is off);
 *   insert      the row's INSERT, then its DELETE: the lock is the row.
 * The contended floor (dlock__my_floor_wait): the same locks taken with
 * the statement that waits in the server's queue (GET_LOCK(?, wait), the
 * row's FOR UPDATE), in many processes at once.
 * The fence alone (dlock__my_fence_floor): the counter upsert dlock sends
 * (fence.c). And dlock__my_forget, the bench's clean-up: each name's
 * counter row and lock row (the bench's names are its own and never
 * reused: a counter row deleted restarts the name's tokens in the epoch). Nothing else of the backend calls
 * this file.
 *
 * Divisions: set-up and results; mode insert; mode for_update; mode
 * get_lock; the contended floor; the fence alone; forget.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

static const char floor_owner[] = "00000000-0000-4000-8000-000000000000:1";

/* ---- set-up and results -------------------------------------------------- */

/* What one floor run holds: the context and the lock connection c. */
struct floor_run {
    struct dlock__my_ctx *x;
    struct dlock__my_conn c;
    uint8_t key[MY_KEY_LEN];
};

/* Read the URI and connect; the name's key. */
static int floor_open(struct floor_run *r, const struct dlock__my_mode *m,
                      const struct dlock_uri *uri, const char *name,
                      char *err, size_t errlen)
{
    int rc;

    memset(r, 0, sizeof *r);
    if ((rc = dlock__my_ctx_new(&r->x, uri, m, err, errlen)) != DLOCK_OK)
        return rc;
    if (dlock__my_connect(&r->c, r->x, true) != 0) {
        rc = dlock_errorf(err, errlen, dlock__my_connect_code(r->c.err),
                          "floor: %s", r->c.msg);
        dlock__my_ctx_free(r->x);
        return rc;
    }
    dlock__my_key(r->x, name, strlen(name), r->key);
    return DLOCK_OK;
}

/* Report e (0: none), close everything; returns the run's code. */
static int floor_close(struct floor_run *r, unsigned e, char *err,
                       size_t errlen)
{
    int rc = DLOCK_OK;

    if (e != 0)
        rc = dlock_errorf(err, errlen, dlock__my_code(e), "floor: %s (%u)",
                          r->c.msg, e);
    dlock__my_conn_close(&r->c);
    dlock__my_ctx_free(r->x);
    return rc;
}

/* ---- mode insert --------------------------------------------------------- */

/* INSERT the row, DELETE the row. */
int dlock__my_floor_insert(const struct dlock__my_floor_sql *q,
                           const struct dlock_uri *uri, const char *name,
                           uint32_t n, uint64_t *ns_out, char *err,
                           size_t errlen)
{
    struct floor_run r;
    size_t len = strlen(name);
    long long lease_us = 30000000;
    MYSQL_BIND p[5];
    unsigned e = 0;
    int rc;

    if ((rc = floor_open(&r, q->mode, uri, name, err, errlen)) != 0)
        return rc;
    /* Outside the clock: clear what an interrupted run may have left,
     * create the tables, prepare. */
    dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], floor_owner, sizeof floor_owner - 1);
    e = dlock__my_exec(&r.c, q->give, p);
    if (e == 0 && dlock__my_prepare(&r.c, q->take) == NULL)
        e = r.c.err;
    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
        dlock__my_bind_text(&p[1], name, dlock__my_display_len(name, len));
        dlock__my_bind_text(&p[2], floor_owner, sizeof floor_owner - 1);
        dlock__my_bind_text(&p[3], r.x->holder, r.x->holder_len);
        dlock__my_bind_i64(&p[4], &lease_us);
        if ((e = dlock__my_exec(&r.c, q->take, p)) == 0) {
            dlock__my_bind_text(&p[1], floor_owner, sizeof floor_owner - 1);
            e = dlock__my_exec(&r.c, q->give, p);
        }
        ns_out[i] = dlock_now_ns() - t0;
    }
    return floor_close(&r, e, err, errlen);
}

/* ---- mode for_update ----------------------------------------------------- */

/* SELECT … FOR UPDATE NOWAIT, COMMIT. */
int dlock__my_floor_for_update(const struct dlock__my_floor_sql *q,
                               const struct dlock_uri *uri, const char *name,
                               uint32_t n, uint64_t *ns_out, char *err,
                               size_t errlen)
{
    struct floor_run r;
    size_t len = strlen(name);
    MYSQL_BIND p[2];
    long long v;
    my_flag null;
    unsigned e = 0;
    bool locked;
    int rc;

    if ((rc = floor_open(&r, q->mode, uri, name, err, errlen)) != 0)
        return rc;
    /* Outside the clock: create the tables and the row, prepare. */
    dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], name, dlock__my_display_len(name, len));
    e = dlock__my_exec(&r.c, q->make, p);
    if (e == 0 && mysql_commit(r.c.db) != 0)
        e = dlock__my_db_note(&r.c);
    if (e == 0 && dlock__my_prepare(&r.c, q->take) == NULL)
        e = r.c.err;
    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
        e = dlock__my_select_i64(&r.c, q->take, p, &v, &null, &locked);
        if (e == 0 && !locked)
            e = dlock__my_note(&r.c, CR_UNKNOWN_ERROR,
                               "the lock row is missing");
        if (e == 0 && mysql_commit(r.c.db) != 0)
            e = dlock__my_db_note(&r.c);
        ns_out[i] = dlock_now_ns() - t0;
    }
    return floor_close(&r, e, err, errlen);
}

/* ---- mode get_lock ------------------------------------------------------- */

/* GET_LOCK(name, 0), RELEASE_LOCK. */
int dlock__my_floor_get_lock(const struct dlock__my_floor_sql *q,
                             const struct dlock_uri *uri, const char *name,
                             uint32_t n, uint64_t *ns_out, char *err,
                             size_t errlen)
{
    struct floor_run r;
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    MYSQL_BIND p[2];
    double zero = 0;
    long long v;
    my_flag null;
    unsigned e = 0;
    bool found;
    int rc;

    if ((rc = floor_open(&r, q->mode, uri, name, err, errlen)) != 0)
        return rc;
    ul_len = dlock__my_ulock_name(r.x, name, strlen(name), r.key, ul);
    /* Outside the clock: prepare. */
    if (dlock__my_prepare(&r.c, q->take) == NULL ||
        dlock__my_prepare(&r.c, q->give) == NULL)
        e = r.c.err;
    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        dlock__my_bind_text(&p[0], ul, ul_len);
        dlock__my_bind_f64(&p[1], &zero);
        e = dlock__my_select_i64(&r.c, q->take, p, &v, &null, &found);
        if (e == 0 && (null || v != 1))
            e = dlock__my_note(&r.c, CR_UNKNOWN_ERROR,
                               "the lock is held by someone else");
        if (e == 0)
            e = dlock__my_select_i64(&r.c, q->give, p, &v, &null, &found);
        ns_out[i] = dlock_now_ns() - t0;
    }
    return floor_close(&r, e, err, errlen);
}

/* ---- the contended floor --------------------------------------------------- */

/* One waiting take: 1 taken, 0 the wait gave up, or the error's code in
 * *e. GET_LOCK says 0 at its timeout; the row's FOR UPDATE fails with
 * ER_LOCK_WAIT_TIMEOUT, which leaves the transaction open (rolled back
 * here, as a timed-out user would). */
static int wait_take(struct floor_run *r, const struct dlock__my_floor_sql *q,
                     const char *ul, size_t ul_len, double *wait_s,
                     unsigned *e)
{
    MYSQL_BIND p[2];
    long long v = 0;
    my_flag null = 0;
    bool found;

    if (q->give != NULL) {
        dlock__my_bind_text(&p[0], ul, ul_len);
        dlock__my_bind_f64(&p[1], wait_s);
    } else
        dlock__my_bind_blob(&p[0], r->key, MY_KEY_LEN);
    *e = dlock__my_select_i64(&r->c, q->wait, p, &v, &null, &found);
    if (*e == ER_LOCK_WAIT_TIMEOUT) {
        *e = mysql_rollback(r->c.db) != 0 ? dlock__my_db_note(&r->c) : 0;
        return 0;
    }
    if (*e == 0 && (!found || null))
        *e = dlock__my_note(&r->c, CR_UNKNOWN_ERROR,
                            q->give != NULL ? "GET_LOCK answered NULL"
                                            : "the lock row is missing");
    return *e == 0 && v == 1;
}

/* q->wait in a loop: GET_LOCK(name, wait) then RELEASE_LOCK (get_lock), or
 * the row's FOR UPDATE under innodb_lock_wait_timeout then COMMIT
 * (for_update): the server queues the waiters and wakes the next. */
int dlock__my_floor_wait(const struct dlock__my_floor_sql *q,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen)
{
    struct floor_run r;
    char ul[MY_ULOCK_BUF], set[96];
    size_t ul_len = 0;
    double wait_s = wait_ms / 1000.0;
    MYSQL_BIND p[2];
    long long v;
    my_flag null;
    unsigned e = 0;
    bool found;
    int rc;

    if ((rc = floor_open(&r, q->mode, uri, name, err, errlen)) != 0)
        return rc;
    /* Outside the loop: get_lock's lock name; for_update's wait bound
     * (whole seconds), then its row, whose INSERT IGNORE waits for a
     * worker holding it. */
    if (q->give != NULL)
        ul_len = dlock__my_ulock_name(r.x, name, strlen(name), r.key, ul);
    else {
        snprintf(set, sizeof set,
                 "SET SESSION innodb_lock_wait_timeout = %u",
                 wait_ms < 1000 ? 1 : wait_ms / 1000);
        if (mysql_query(r.c.db, set) != 0)
            e = dlock__my_db_note(&r.c);
        dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
        dlock__my_bind_text(&p[1], name,
                            dlock__my_display_len(name, strlen(name)));
        if (e == 0)
            e = dlock__my_exec(&r.c, q->make, p);
        if (e == 0 && mysql_commit(r.c.db) != 0)
            e = dlock__my_db_note(&r.c);
    }
    while (e == 0) {
        int got = wait_take(&r, q, ul, ul_len, &wait_s, &e), more;
        if (e != 0)
            break;
        more = go_on(arg, got);
        if (got && q->give != NULL) {
            dlock__my_bind_text(&p[0], ul, ul_len);
            e = dlock__my_select_i64(&r.c, q->give, p, &v, &null, &found);
        } else if (got && mysql_commit(r.c.db) != 0)
            e = dlock__my_db_note(&r.c);
        if (!more)
            break;
    }
    return floor_close(&r, e, err, errlen);
}

/* ---- the fence alone ------------------------------------------------------- */

/* mode is the base of a struct dlock__my_mode. The counter upsert every
 * mode sends (fence.c: a MEMORY row, no flush), on an autocommitted
 * connection: for_update sends it inside its lock transaction, where it
 * costs the same round trip. */
int dlock__my_fence_floor(const struct dlock_mode *mode,
                          const struct dlock_uri *uri, const char *name,
                          uint32_t n, uint64_t *ns_out, char *err,
                          size_t errlen)
{
    const struct dlock__my_mode *m = (const struct dlock__my_mode *)mode;
    struct floor_run r;
    uint64_t fence;
    unsigned e;
    int rc;

    if ((rc = floor_open(&r, m, uri, name, err, errlen)) != 0)
        return rc;
    e = dlock__my_fence_prepare(&r.c);
    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        e = dlock__my_fence(&r.c, NULL, r.key, floor_owner,
                            sizeof floor_owner - 1, &fence);
        ns_out[i] = dlock_now_ns() - t0;
    }
    return floor_close(&r, e, err, errlen);
}

/* ---- forget ------------------------------------------------------------------ */

/* The last slots of the connection, which no mode's statements reach. */
static const struct dlock__my_stmt forget_fence = {
    MY_SLOTS - 1, "DELETE FROM `%s_fmem` WHERE lock_key = ?"};
static const struct dlock__my_stmt forget_row = {
    MY_SLOTS - 2, "DELETE FROM `%s_rows` WHERE lock_key = ?"};
static const struct dlock__my_stmt forget_claim = {
    MY_SLOTS - 3, "DELETE FROM `%s` WHERE lock_key = ?"};
static const struct dlock__my_stmt forget_record = {
    MY_SLOTS - 4, "DELETE FROM `%s_frec` WHERE lock_key = ?"};

/* Each name's fence row and record, and for_update's row or insert's
 * claim. The bench's names are its own and nobody holds them when it
 * calls this. */
int dlock__my_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen)
{
    const struct dlock__my_mode *m = (const struct dlock__my_mode *)mode;
    const struct dlock__my_stmt *row =
        strcmp(mode->name, "for_update") == 0 ? &forget_row
        : strcmp(mode->name, "insert") == 0   ? &forget_claim
                                              : NULL;
    struct floor_run r;
    MYSQL_BIND p[1];
    unsigned e = 0;
    int rc;

    if ((rc = floor_open(&r, m, uri, names[0], err, errlen)) != 0)
        return rc;
    for (size_t i = 0; i < n && e == 0; i++) {
        dlock__my_key(r.x, names[i], strlen(names[i]), r.key);
        dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
        e = dlock__my_exec(&r.c, &forget_fence, p);
        if (e == 0)
            e = dlock__my_exec(&r.c, &forget_record, p);
        if (e == 0 && row != NULL)
            e = dlock__my_exec(&r.c, row, p);
    }
    /* The lock connection does not autocommit (for_update's). */
    if (e == 0 && mysql_commit(r.c.db) != 0)
        e = dlock__my_db_note(&r.c);
    return floor_close(&r, e, err, errlen);
}
