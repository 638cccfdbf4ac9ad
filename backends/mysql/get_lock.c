/*
 * get_lock.c: mode get_lock, the server's named locks: GET_LOCK(name,
 * timeout) and RELEASE_LOCK(name). They die with their connection, but one
 * connection can hold many (MariaDB >= 10.0.2, MySQL >= 5.7), so a client
 * holding a thousand locks needs a handful of connections. The server
 * waits for us, with fractional-second timeouts on MariaDB. The name the
 * server sees is keys.c's (the name itself when short, else a hash).
 *
 * What it shares with for_update (the silence limit, renewal by ping) is
 * bound.c's; the raw floor of this mode is floor.c's.
 *
 * Divisions: statements; acquire; release; inspect; the mode.
 */
#include <stdio.h>

#include "my.h"

/* A native wait ends this long before the read timeout would. */
#define MY_WAIT_MARGIN_MS 500

/* ---- statements ---------------------------------------------------------- */

/* No table but the fences'. */
static const char *const gl_ddl[] = {dlock__my_fence_ddl,
                                     dlock__my_fence_owner_ddl, NULL};

enum {
    GL_GET_LOCK = MY_SLOT_MODE,
    GL_RELEASE_LOCK,
    GL_IS_USED_LOCK,
    GL_SLOTS
};
_Static_assert(GL_SLOTS <= MY_SLOTS, "get_lock: too many statements");

/* 1 granted, 0 timed out, NULL an error (killed, out of memory). */
static const struct dlock__my_stmt gl_get_lock = {GL_GET_LOCK,
                                                  "SELECT GET_LOCK(?, ?)"};
/* 1 ours, 0 another connection's, NULL nobody's. */
static const struct dlock__my_stmt gl_release_lock = {
    GL_RELEASE_LOCK, "SELECT RELEASE_LOCK(?)"};
/* The holder's connection id, or NULL. */
static const struct dlock__my_stmt gl_is_used_lock = {
    GL_IS_USED_LOCK, "SELECT IS_USED_LOCK(?)"};

/* Run one of them on GET_LOCK name ul; *v is its value, *null if NULL. */
static unsigned gl_call(struct dlock__my_conn *c,
                        const struct dlock__my_stmt *q, const char *ul,
                        size_t ul_len, double *timeout_s, long long *v,
                        my_flag *null)
{
    MYSQL_BIND p[2];
    bool found;

    dlock__my_bind_text(&p[0], ul, ul_len);
    if (timeout_s != NULL)
        dlock__my_bind_f64(&p[1], timeout_s);
    return dlock__my_select_i64(c, q, p, v, null, &found);
}

/* The key of a name (for its fence) and its GET_LOCK name, whose length
 * it returns. */
static size_t gl_name(const struct dlock__my_session *ms, const char *name,
                      size_t len, uint8_t key[MY_KEY_LEN],
                      char ul[MY_ULOCK_BUF])
{
    dlock__my_key(ms->x, name, len, key);
    return dlock__my_ulock_name(ms->x, name, len, key, ul);
}

/* ---- acquire ------------------------------------------------------------- */

static int gl_acquire(struct dlock_session *s, const struct dlock_request *req,
                      int64_t deadline_ms, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    double wait_s = 0;
    struct dlock__my_kill kill;
    long long v;
    my_flag null;
    unsigned e;
    int rc;

    if ((rc = dlock__my_bound_begin(ms, req)) != DLOCK_OK)
        return rc;
    ul_len = gl_name(ms, req->name, req->name_len, key, ul);
    /* The server waits for us, in fractions of a second, but each wait
     * must end before the read timeout gives up on the connection. */
    if (deadline_ms != 0) {
        int64_t left = deadline_ms - dlock_now_ms();
        int64_t cap = ms->x->io_ms - MY_WAIT_MARGIN_MS;
        if (left > cap)
            left = cap;
        wait_s = left > 0 ? (double)left / 1000.0 : 0;
    }
    dlock__my_kill_arm(&kill, ms);
    e = gl_call(c, &gl_get_lock, ul, ul_len, &wait_s, &v, &null);
    if (dlock__my_kill_disarm(&kill)) {
        /* Cancelled [B-CANCEL-1]: granted or not, let go of the name
         * (RELEASE_LOCK frees it only if this connection holds it). */
        gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null);
        return dlock_session_error(s, dlock_session_cancelled(s),
                                   "GET_LOCK: cancelled");
    }
    if (e != 0)
        return dlock__my_fail(ms, c, "GET_LOCK");
    if (null)
        return dlock_session_error(&ms->base, DLOCK_ERROR,
                                   "GET_LOCK returned NULL (the wait was "
                                   "killed, or the server ran out of "
                                   "memory)");
    if (v != 1)
        return dlock__my_busy(deadline_ms, wait_s > 0, retry_ms);
    if (dlock__my_fence(c, key, req->owner, req->owner_len, &grant->fence) !=
        0) {
        rc = dlock__my_fail(ms, c, "fence");
        if (!c->broken)
            gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null);
        return rc;
    }
    ms->ngrants++;
    return DLOCK_OK;
}

/* ---- release ------------------------------------------------------------- */

static int gl_release(struct dlock_session *s, const struct dlock_request *req,
                      struct dlock_grant *grant)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    long long v;
    my_flag null;

    (void)grant;
    if (ms->ngrants > 0)
        ms->ngrants--;
    if (c->broken)
        return dlock_session_error(&ms->base, DLOCK_ECONNECT,
                                   "the connection holding the lock is "
                                   "gone: %s",
                                   c->msg);
    ul_len = gl_name(ms, req->name, req->name_len, key, ul);
    if (gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null) != 0)
        return dlock__my_fail(ms, c, "RELEASE_LOCK");
    if (null || v != 1)
        return dlock_session_error(&ms->base, DLOCK_ENOTOWNER,
                                   "RELEASE_LOCK returned %s",
                                   null ? "NULL: no such lock is held"
                                        : "0: another connection holds it");
    return DLOCK_OK;
}

/* ---- inspect ------------------------------------------------------------- */

static int gl_inspect(struct dlock_session *s, const char *name, size_t len,
                      dlock_state *out)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    long long id;
    my_flag null;

    if (c->broken)
        return dlock__my_broken(ms);
    ul_len = gl_name(ms, name, len, key, ul);
    if (gl_call(c, &gl_is_used_lock, ul, ul_len, NULL, &id, &null) != 0)
        return dlock__my_fail(ms, c, "inspect");
    out->held = !null;
    /* The holder's owner id is in the counter row it bumped (fence.c);
     * IS_USED_LOCK knows only the connection. */
    if (dlock__my_fence_peek(c, key, &out->fence, out->owner,
                             out->held ? sizeof out->owner : 0) != 0)
        return dlock__my_fail(ms, c, "inspect fence");
    return DLOCK_OK;
}

/* ---- the mode ------------------------------------------------------------ */

static int gl_floor(const struct dlock_uri *uri, const char *name, uint32_t n,
                    uint64_t *ns_out, char *err, size_t errlen)
{
    static const struct dlock__my_floor_sql q = {
        &dlock__my_mode_get_lock, &gl_get_lock, &gl_release_lock, NULL};

    return dlock__my_floor_get_lock(&q, uri, name, n, ns_out, err, errlen);
}

/* The server waits for us; back off only between waits. */
const struct dlock__my_mode dlock__my_mode_get_lock = {
    .base =
        {
            .name = "get_lock",
            .summary = "the server's named locks, GET_LOCK and "
                       "RELEASE_LOCK: many per connection",
            .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                    DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FENCING |
                    DLOCK_CAP_BATCH_RENEW,
            .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
            .retry_min_ms = 1,
            .retry_max_ms = 32,
            .acquire = gl_acquire,
            .renew = dlock__my_bound_renew,
            .release = gl_release,
            .inspect = gl_inspect,
            .floor = gl_floor,
        },
    .ddl = gl_ddl,
};
