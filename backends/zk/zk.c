/*
 * zk.c: the zk:// backend's table (alias zookeeper://) and its entry
 * points: the per-client context and the dlock sessions over it.
 * ZooKeeper's lock recipe with Curator's node names; zk.h lists the files
 * and what each holds, recipe.c explains the recipe.
 *
 * A context is the parsed URI, the mode core picked, and the client's one
 * ZooKeeper session (conn.c). A dlock session is a thin wrapper over it
 * with a call slot of its own (call.c), so core can run calls of many
 * handles at once. The modes are objects of their own files (mutex.c,
 * rwlock.c); this file only lists them.
 *
 * Divisions: once per process; contexts; sessions; the table.
 */
#include <pthread.h>
#include <stdlib.h>

#include "zk.h"

/* ---- once per process --------------------------------------------------- */

/*
 * The C client's log level is global. At its default (INFO) every connect
 * and disconnect is formatted, and the formatting shares one static buffer
 * between the I/O threads of all handles (a race on log text). Lower it to
 * ERROR unless the application chose a level itself.
 */
extern ZOOAPI ZooLogLevel logLevel; /* zookeeper_log.h, which wants
                                       -I/usr/include/zookeeper */

static int zk_global_init(void)
{
    if (logLevel == ZOO_LOG_LEVEL_INFO)
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    return DLOCK_OK;
}

/* ---- contexts ----------------------------------------------------------- */

static const struct dlock_mode *const zk_modes[] = {
    &dlock__zk_mutex.base, /* the default: Curator's InterProcessMutex */
    &dlock__zk_rwlock.base,
    NULL,
};

/* Our mode object around core's (zk.h), or NULL if mode is not ours. */
static const struct zk_mode *zk_mode_of(const struct dlock_mode *mode)
{
    for (size_t i = 0; zk_modes[i] != NULL; i++)
        if (zk_modes[i] == mode)
            return (const struct zk_mode *)mode;
    return NULL;
}

static int zk_ctx_open(void **out, const struct dlock_uri *uri,
                       const struct dlock_mode *mode, char *err, size_t errlen)
{
    const struct zk_mode *m = zk_mode_of(mode);
    struct zk_ctx *x;
    struct zk_conn *c;
    int rc;

    if (m == NULL)
        return dlock_errorf(
            err, errlen, DLOCK_EINVAL, "mode: '%s' is not a mode of zk://",
            mode != NULL && mode->name != NULL ? mode->name : "(none)");
    rc = dlock__zk_parse(&x, uri, err, errlen);
    if (rc != DLOCK_OK)
        return rc;
    x->mode = m;
    c = dlock__zk_conn_new(x, err, errlen, &rc);
    if (c == NULL) {
        dlock__zk_ctx_free(x);
        return rc;
    }
    x->cur = c;
    /* Connect now, so a bad host shows at open time. */
    rc = dlock__zk_wait_connected(c, dlock_now_ms() + x->timeout_ms);
    if (rc != ZOK)
        rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                          "no ZooKeeper server of %s answered within %u ms",
                          x->hosts, x->timeout_ms);
    else if (!dlock__zk_lease_ok(uri->lease_ms, c->timeout_ms))
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "lease: %u ms is more than twice the ZooKeeper "
                          "session timeout (%d ms, as the server granted "
                          "it); set lease= to at most %d ms, or leave "
                          "lease= out: it then follows session_timeout=",
                          uri->lease_ms, c->timeout_ms, 2 * c->timeout_ms);
    if (rc != DLOCK_OK) {
        dlock__zk_conn_unref(c);
        dlock__zk_ctx_free(x);
        return rc;
    }
    *out = x;
    return DLOCK_OK;
}

static void zk_ctx_close(void *ctx)
{
    struct zk_ctx *x = ctx;
    struct zk_conn *c;

    pthread_mutex_lock(&x->mu);
    c = x->cur;
    x->cur = NULL;
    pthread_mutex_unlock(&x->mu);
    dlock__zk_conn_unref(c);
    dlock__zk_ctx_free(x);
}

/* ---- sessions ----------------------------------------------------------- */

static int zk_open(struct dlock_session **out, const struct dlock_uri *uri,
                   void *ctx, char *err, size_t errlen)
{
    struct zk_session *zs;
    struct zk_ctx *x = ctx;

    (void)uri;
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "no context");
    zs = calloc(1, sizeof *zs);
    if (zs == NULL || (zs->call = dlock__zk_call_new()) == NULL) {
        free(zs);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    zs->ctx = x;
    *out = &zs->base;
    return DLOCK_OK;
}

static void zk_close(struct dlock_session *s)
{
    struct zk_session *zs = (struct zk_session *)s;

    dlock__zk_call_free(zs->call);
    free(zs);
}

/* ---- the table ---------------------------------------------------------- */

static const char *const zk_params[] = {"session_timeout", "base", NULL};
static const char *const zk_aliases[] = {"zookeeper", NULL};

const struct dlock_backend dlock__backend_zk = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "zk",
    .aliases = zk_aliases,
    .params = zk_params,
    .summary = "Apache ZooKeeper: ephemeral sequential nodes, "
               "Curator-compatible names",
    .modes = zk_modes,
    .global_init = zk_global_init,
    .ctx_open = zk_ctx_open,
    .ctx_close = zk_ctx_close,
    .open = zk_open,
    .close = zk_close,
};
