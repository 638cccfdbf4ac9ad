/*
 * etcd.c: the etcd:// backend's table, its URI read into a context, and
 * sessions (one libcurl handle and one etcd lease each; etcd.h says how
 * the files divide the rest).
 *
 *   etcd://host[:port][,host[:port]...][/prefix]?lease=30s&timeout=5s
 *   etcds://host[:port]...[/prefix]?cacert=FILE&cert=FILE&key=FILE&...
 *
 * Every host is a member of one cluster; requests go to the one that
 * answered last and move on when it does not. The path is a key prefix:
 * empty (the default) gives the keys `etcdctl lock NAME` uses. etcds://
 * reaches the members over https, verified against cacert= (by default
 * the system's CA bundle), with a client certificate when cert= and key=
 * are given (etcd's --client-cert-auth).
 *
 * Divisions: the context; sessions; modes and the table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd.h"

/* ---- the context ------------------------------------------------------------- */

static void etcd_ctx_close(void *ctx)
{
    struct etcd_ctx *x = ctx;

    if (x == NULL)
        return;
    for (size_t i = 0; i < x->nmembers; i++)
        free(x->members[i]);
    free(x->cacert);
    free(x->cert);
    free(x->key);
    pthread_mutex_destroy(&x->mu);
    free(x->counts);
    free(x);
}

/* The key prefix: the URI's path without its leading '/' (ending in '/'
 * when not empty), then the namespace as one encoded segment and '/'. */
static int ctx_prefix(struct etcd_ctx *x, const struct dlock_uri *u,
                      char *err, size_t errlen)
{
    const char *p = u->path[0] == '/' ? u->path + 1 : u->path;
    size_t n = strlen(p);
    int w;

    w = snprintf(x->prefix, sizeof x->prefix, "%s%s", p,
                 n > 0 && p[n - 1] != '/' ? "/" : "");
    if (w < 0 || (size_t)w > ETCD_PREFIX_MAX ||
        3 * strlen(u->ns) + 1 > ETCD_PREFIX_MAX - (size_t)w)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "path: the key prefix (path and namespace) is "
                            "longer than %d bytes",
                            ETCD_PREFIX_MAX);
    x->prefix_len = (size_t)w;
    if (u->ns[0] != '\0') {
        char seg[ETCD_KEY_MAX + 1];
        size_t len = dlock__etcd_name_prefix(x, seg, u->ns, strlen(u->ns));
        memcpy(x->prefix, seg, len + 1);
        x->prefix_len = len;
    }
    return DLOCK_OK;
}

/* The TLS parameters, and on etcds:// a copy of each file path after a
 * check that it can be read: a path is the user's input, and libcurl
 * would only say at the first connection that it cannot load "the
 * certificate". A missing file is DLOCK_ENOENT (exit 66), one that exists
 * but cannot be read, or an empty path, DLOCK_EINVAL (64). */
static int ctx_tls(struct etcd_ctx *x, const struct dlock_uri *u, char *err,
                   size_t errlen)
{
    static const char *const names[] = {"cacert", "cert", "key"};
    char **dst[] = {&x->cacert, &x->cert, &x->key};
    const char *v[3];

    x->tls = strcmp(u->scheme, "etcds") == 0;
    for (size_t i = 0; i < 3; i++) {
        v[i] = dlock_uri_param(u, names[i]);
        if (v[i] != NULL && !x->tls)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "%s: a TLS parameter, and etcd:// is plain "
                                "http; use etcds:// for TLS",
                                names[i]);
    }
    if ((v[1] == NULL) != (v[2] == NULL))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "%s: missing; %s= is given without it, and a "
                            "client certificate needs both (cert= the "
                            "certificate, key= its private key)",
                            v[1] == NULL ? "cert" : "key",
                            v[1] == NULL ? "key" : "cert");
    for (size_t i = 0; i < 3; i++) {
        if (v[i] == NULL)
            continue;
        if (v[i][0] == '\0')
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "%s: expected a file path, got nothing",
                                names[i]);
        if (access(v[i], R_OK) != 0) {
            int e = errno;
            return dlock_errorf(
                err, errlen,
                e == ENOENT || e == ENOTDIR ? DLOCK_ENOENT : DLOCK_EINVAL,
                "%s: cannot read '%.200s': %s", names[i], v[i], strerror(e));
        }
        if ((*dst[i] = strdup(v[i])) == NULL)
            return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

static int etcd_ctx_open(void **out, const struct dlock_uri *u,
                         const struct dlock_mode *mode, char *err,
                         size_t errlen)
{
    struct etcd_ctx *x = calloc(1, sizeof *x);
    uint32_t server_ms;
    int rc;

    *out = NULL;
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&x->mu, NULL);
    (void)mode; /* the modes differ in their kinds alone */
    x->timeout_ms = u->timeout_ms;
    if (u->nhosts == 0 || u->hosts[0].host[0] == '\0') {
        etcd_ctx_close(x);
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: %s:// needs at least one member "
                            "(%s://host[:port][,host[:port]...])",
                            u->scheme, u->scheme);
    }
    if (u->nhosts > ETCD_MAX_MEMBERS) {
        etcd_ctx_close(x);
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: %zu members, at most %d", u->nhosts,
                            ETCD_MAX_MEMBERS);
    }
    if (u->user != NULL || u->password != NULL) {
        etcd_ctx_close(x);
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "user: etcd's authentication is not supported "
                            "by this backend; give no user or password");
    }
    if ((rc = ctx_tls(x, u, err, errlen)) != DLOCK_OK) {
        etcd_ctx_close(x);
        return rc;
    }
    for (size_t i = 0; i < u->nhosts; i++) {
        const struct dlock_uri_host *h = &u->hosts[i];
        char url[300];
        snprintf(url, sizeof url, "%s://%s%s%s:%u",
                 x->tls ? "https" : "http", h->ipv6 ? "[" : "",
                 h->host, h->ipv6 ? "]" : "",
                 h->port != 0 ? h->port : 2379u);
        if ((x->members[i] = strdup(url)) == NULL) {
            etcd_ctx_close(x);
            return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
        }
        x->nmembers++;
    }
    if (u->lease_ms < 1000) {
        etcd_ctx_close(x);
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "lease: %u ms; etcd leases count whole seconds, "
                            "so at least 1s",
                            u->lease_ms);
    }
    /* etcd ends the lease after its TTL without a keepalive; the holder
     * believes for lease_ms from before its request [B-BOUND-1]. */
    server_ms = dlock_server_timeout_ms(u->lease_ms);
    x->ttl_s = (server_ms + 999) / 1000;
    if ((rc = ctx_prefix(x, u, err, errlen)) != DLOCK_OK) {
        etcd_ctx_close(x);
        return rc;
    }
    *out = x;
    return DLOCK_OK;
}

/* ---- sessions ------------------------------------------------------------------ */

static int etcd_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? DLOCK_OK
                                                             : DLOCK_ERROR;
}

static void etcd_global_cleanup(void)
{
    dlock__etcd_multi_pool_free();
    curl_global_cleanup();
}

static void etcd_close(struct dlock_session *s)
{
    struct etcd_session *es = (struct etcd_session *)s;

    /* The lease is not revoked: grants on it may be renewed and released
     * through other sessions; with no keys it ends after its TTL. */
    if (es->curl != NULL)
        curl_easy_cleanup(es->curl);
    if (es->check != NULL)
        curl_easy_cleanup(es->check);
    if (es->multi != NULL)
        dlock__etcd_multi_put(es->multi);
    dlock__etcd_buf_free(&es->check_resp);
    dlock__etcd_buf_free(&es->body);
    dlock__etcd_buf_free(&es->resp);
    free(es);
}

static int etcd_open(struct dlock_session **out, const struct dlock_uri *u,
                     void *ctx, char *err, size_t errlen)
{
    struct etcd_session *es = calloc(1, sizeof *es);
    int rc;

    (void)u;
    *out = NULL;
    if (es == NULL || (es->curl = curl_easy_init()) == NULL ||
        (es->check = curl_easy_init()) == NULL ||
        (es->multi = dlock__etcd_multi_get()) == NULL) {
        if (es != NULL)
            etcd_close(&es->base);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    es->x = ctx;
    /* Open means reachable: grant the session's lease now. */
    rc = dlock__etcd_lease_ensure(es, dlock_now_ms() + es->x->timeout_ms);
    if (rc != DLOCK_OK) {
        /* The message went to the session; open() reports through err. */
        dlock_errorf(err, errlen, rc, "%s", es->why);
        etcd_close(&es->base);
        return rc;
    }
    *out = &es->base;
    return DLOCK_OK;
}

/* ---- modes and the table -------------------------------------------------------- */

/* Permits (<name>/s/<N>/<lease>) are the mutex mode's: one mode serves
 * them (the recipe is the same in both), and rwlock's readers add nothing
 * to a semaphore. */
static const struct dlock_mode etcd_mutex = {
    .name = "mutex",
    .summary = "etcd's concurrency.Mutex keys: excludes etcdctl lock and Go "
               "clients; permits (<name>/s/<N>/<lease>)",
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
             DLOCK_KIND_BIT(DLOCK_KIND_PERMIT),
    .caps = ETCD_CAPS | DLOCK_CAP_PERMITS,
    ETCD_MODE_COMMON,
};

/* The same queue; a reader's key is "<name>/r/<lease>" and it waits only
 * for the writers before it (recipe.c). */
static const struct dlock_mode etcd_rwlock = {
    .name = "rwlock",
    .summary = "the mutex's queue, with readers (<name>/r/<lease>) that "
               "share",
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
             DLOCK_KIND_BIT(DLOCK_KIND_SHARED),
    .caps = ETCD_CAPS | DLOCK_CAP_SHARED,
    ETCD_MODE_COMMON,
};

static const struct dlock_mode *const etcd_modes[] = {&etcd_mutex,
                                                      &etcd_rwlock, NULL};

/* etcds:// is etcd:// over TLS; its files are refused on etcd:// in
 * ctx_tls(), as core checks parameters per backend, not per scheme. */
static const char *const etcd_aliases[] = {"etcds", NULL};
static const char *const etcd_params[] = {"cacert", "cert", "key", NULL};

const struct dlock_backend dlock__backend_etcd = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "etcd",
    .aliases = etcd_aliases,
    .params = etcd_params,
    .summary = "etcd v3 through its JSON gateway: leases and etcd's own "
               "mutex recipe; etcds:// over TLS",
    .modes = etcd_modes,
    .global_init = etcd_global_init,
    .global_cleanup = etcd_global_cleanup,
    .ctx_open = etcd_ctx_open,
    .ctx_close = etcd_ctx_close,
    .open = etcd_open,
    .close = etcd_close,
};
