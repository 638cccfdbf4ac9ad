/*
 * floor.c: the raw floor of each mode, for `dlock bench` only: n
 * acquire+release cycles with Connector/C alone, the same statements dlock
 * sends (handed over by the mode's file, struct dlock__my_floor_sql),
 * prepared before the clock starts, on one connection (two for
 * for_update), with no core, pool or watchdog. Nothing else of the backend
 * calls this file.
 *
 * Divisions: set-up and results; mode insert; mode for_update; mode
 * get_lock.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

static const char floor_owner[] = "00000000-0000-4000-8000-000000000000:1";

/* ---- set-up and results -------------------------------------------------- */

/* What one floor run holds: the context, the lock connection c and, for
 * for_update, the fence's own connection f. */
struct floor_run {
    struct dlock__my_ctx *x;
    struct dlock__my_conn c, f;
    uint8_t key[MY_KEY_LEN];
};

/* Read the URI and connect (f too if side); the name's key. */
static int floor_open(struct floor_run *r, const struct dlock__my_mode *m,
                      const struct dlock_uri *uri, const char *name,
                      bool side, char *err, size_t errlen)
{
    int rc;

    memset(r, 0, sizeof *r);
    if ((rc = dlock__my_ctx_new(&r->x, uri, m, err, errlen)) != DLOCK_OK)
        return rc;
    if (dlock__my_connect(&r->c, r->x, true) != 0 ||
        (side && dlock__my_connect(&r->f, r->x, false) != 0)) {
        rc = dlock_errorf(
            err, errlen,
            dlock__my_connect_code(r->c.db == NULL ? r->c.err : r->f.err),
            "floor: %s", r->c.db == NULL ? r->c.msg : r->f.msg);
        dlock__my_conn_close(&r->c);
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
                          r->c.err ? r->c.msg : r->f.msg, e);
    dlock__my_conn_close(&r->c);
    if (r->f.db != NULL)
        dlock__my_conn_close(&r->f);
    dlock__my_ctx_free(r->x);
    return rc;
}

/* ---- mode insert --------------------------------------------------------- */

/* INSERT the row, bump the fence, DELETE the row. */
int dlock__my_floor_insert(const struct dlock__my_floor_sql *q,
                           const struct dlock_uri *uri, const char *name,
                           uint32_t n, uint64_t *ns_out, char *err,
                           size_t errlen)
{
    struct floor_run r;
    size_t len = strlen(name);
    long long lease_us = 30000000;
    MYSQL_BIND p[5];
    uint64_t fence;
    unsigned e = 0;
    int rc;

    if ((rc = floor_open(&r, q->mode, uri, name, false, err, errlen)) != 0)
        return rc;
    /* Outside the clock: clear what an interrupted run may have left,
     * create the tables, prepare. */
    dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], floor_owner, sizeof floor_owner - 1);
    e = dlock__my_exec(&r.c, q->give, p);
    if (e == 0 && dlock__my_prepare(&r.c, q->take) == NULL)
        e = r.c.err;
    if (e == 0)
        e = dlock__my_fence_prepare(&r.c);
    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
        dlock__my_bind_text(&p[1], name, dlock__my_display_len(name, len));
        dlock__my_bind_text(&p[2], floor_owner, sizeof floor_owner - 1);
        dlock__my_bind_text(&p[3], r.x->holder, r.x->holder_len);
        dlock__my_bind_i64(&p[4], &lease_us);
        if ((e = dlock__my_exec(&r.c, q->take, p)) == 0 &&
            (e = dlock__my_fence(&r.c, r.key, floor_owner,
                                 sizeof floor_owner - 1, &fence)) == 0) {
            dlock__my_bind_text(&p[1], floor_owner, sizeof floor_owner - 1);
            e = dlock__my_exec(&r.c, q->give, p);
        }
        ns_out[i] = dlock_now_ns() - t0;
    }
    return floor_close(&r, e, err, errlen);
}

/* ---- mode for_update ----------------------------------------------------- */

/* SELECT … FOR UPDATE NOWAIT, bump the fence on the side connection,
 * COMMIT. */
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
    uint64_t fence;
    unsigned e = 0;
    bool locked;
    int rc;

    if ((rc = floor_open(&r, q->mode, uri, name, true, err, errlen)) != 0)
        return rc;
    /* Outside the clock: create the tables and the row, prepare. */
    dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], name, dlock__my_display_len(name, len));
    e = dlock__my_exec(&r.c, q->make, p);
    if (e == 0 && mysql_commit(r.c.db) != 0)
        e = dlock__my_db_note(&r.c);
    if (e == 0 && dlock__my_prepare(&r.c, q->take) == NULL)
        e = r.c.err;
    if (e == 0)
        e = dlock__my_fence_prepare(&r.f);
    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        dlock__my_bind_blob(&p[0], r.key, MY_KEY_LEN);
        e = dlock__my_select_i64(&r.c, q->take, p, &v, &null, &locked);
        if (e == 0 && !locked)
            e = dlock__my_note(&r.c, CR_UNKNOWN_ERROR,
                               "the lock row is missing");
        if (e == 0 &&
            (e = dlock__my_fence(&r.f, r.key, floor_owner,
                                 sizeof floor_owner - 1, &fence)) != 0)
            dlock__my_note(&r.c, e, r.f.msg);
        if (e == 0 && mysql_commit(r.c.db) != 0)
            e = dlock__my_db_note(&r.c);
        ns_out[i] = dlock_now_ns() - t0;
    }
    return floor_close(&r, e, err, errlen);
}

/* ---- mode get_lock ------------------------------------------------------- */

/* GET_LOCK(name, 0), bump the fence, RELEASE_LOCK. */
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
    uint64_t fence;
    unsigned e = 0;
    bool found;
    int rc;

    if ((rc = floor_open(&r, q->mode, uri, name, false, err, errlen)) != 0)
        return rc;
    ul_len = dlock__my_ulock_name(r.x, name, strlen(name), r.key, ul);
    /* Outside the clock: prepare (and create the fence table). */
    if (dlock__my_prepare(&r.c, q->take) == NULL ||
        dlock__my_prepare(&r.c, q->give) == NULL)
        e = r.c.err;
    if (e == 0)
        e = dlock__my_fence_prepare(&r.c);
    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        dlock__my_bind_text(&p[0], ul, ul_len);
        dlock__my_bind_f64(&p[1], &zero);
        e = dlock__my_select_i64(&r.c, q->take, p, &v, &null, &found);
        if (e == 0 && (null || v != 1))
            e = dlock__my_note(&r.c, CR_UNKNOWN_ERROR,
                               "the lock is held by someone else");
        if (e == 0)
            e = dlock__my_fence(&r.c, r.key, floor_owner,
                                sizeof floor_owner - 1, &fence);
        if (e == 0)
            e = dlock__my_select_i64(&r.c, q->give, p, &v, &null, &found);
        ns_out[i] = dlock_now_ns() - t0;
    }
    return floor_close(&r, e, err, errlen);
}
