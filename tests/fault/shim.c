/*
 * shim.c: the fault-injecting test backend (see shim.h). It links core's
 * static library to parse its inner URI, like an out-of-tree backend that
 * wraps another would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "shim.h"

struct shim_knobs shim;

struct shim_ctx {
    struct dlock_uri *inner_uri;
    const struct dlock_backend *inner;
    void *inner_ctx;
};

struct shim_session {
    struct dlock_session base;
    struct dlock_session *inner;
    char mode[64];
};

static const char *const shim_params[] = {"inner", NULL};
extern const struct dlock_backend shim_backend;

static void shim_sleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Inner calls report through the outer session's core state. */
static struct dlock_session *inner_of(struct dlock_session *s)
{
    struct shim_session *ss = (struct shim_session *)s;
    ss->inner->core = s->core;
    return ss->inner;
}

static int shim_ctx_open(void **out, const struct dlock_uri *uri, char *err,
                         size_t errlen)
{
    const char *inner = dlock_uri_param(uri, "inner");
    struct shim_ctx *x;
    int rc;

    if (inner == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "inner: missing");
    x = calloc(1, sizeof *x);
    if (x == NULL)
        return DLOCK_ENOMEM;
    rc = dlock__uri_parse(&x->inner_uri, inner, strlen(inner), err, errlen);
    if (rc == DLOCK_OK) {
        x->inner = dlock_backend_find(x->inner_uri->scheme);
        if (x->inner == NULL || x->inner == &shim_backend)
            rc = dlock_errorf(err, errlen, DLOCK_ENOBACKEND, "inner: %s",
                              x->inner_uri->scheme);
    }
    if (rc == DLOCK_OK)
        rc = dlock__uri_check_params(x->inner_uri, x->inner->params, err,
                                     errlen);
    if (rc == DLOCK_OK && x->inner->ctx_open != NULL)
        rc = x->inner->ctx_open(&x->inner_ctx, x->inner_uri, err, errlen);
    if (rc != DLOCK_OK) {
        dlock__uri_free(x->inner_uri);
        free(x);
        return rc;
    }
    *out = x;
    return DLOCK_OK;
}

static void shim_ctx_close(void *ctx)
{
    struct shim_ctx *x = ctx;
    if (x->inner_ctx != NULL)
        x->inner->ctx_close(x->inner_ctx);
    dlock__uri_free(x->inner_uri);
    free(x);
}

static int shim_open(struct dlock_session **out, const struct dlock_uri *uri,
                     void *ctx, char *err, size_t errlen)
{
    struct shim_ctx *x = ctx;
    struct shim_session *ss = calloc(1, sizeof *ss);
    int rc;

    (void)uri;
    if (ss == NULL)
        return DLOCK_ENOMEM;
    rc = x->inner->open(&ss->inner, x->inner_uri, x->inner_ctx, err, errlen);
    if (rc != DLOCK_OK) {
        free(ss);
        return rc;
    }
    atomic_fetch_add(&shim.opens, 1);
    ss->base.backend = &shim_backend;
    /* Make the watchdog run even over a backend that needs no renewal,
     * and give the lock a lease core can see run out. */
    ss->base.caps = (ss->inner->caps & ~DLOCK_CAP_NO_RENEW) | DLOCK_CAP_LEASE;
    snprintf(ss->mode, sizeof ss->mode, "fault(%s)",
             ss->inner->mode ? ss->inner->mode : "default");
    ss->base.mode = ss->mode;
    ss->base.retry_min_ms = ss->inner->retry_min_ms;
    ss->base.retry_max_ms = ss->inner->retry_max_ms;
    *out = &ss->base;
    return DLOCK_OK;
}

static void shim_close(struct dlock_session *s)
{
    struct shim_session *ss = (struct shim_session *)s;
    ss->inner->backend->close(ss->inner);
    free(ss);
}

/* Take one from a counter if it is positive. */
static int take(atomic_int *n)
{
    int v = atomic_load(n);
    while (v > 0)
        if (atomic_compare_exchange_weak(n, &v, v - 1))
            return 1;
    return 0;
}

static int shim_acquire(struct dlock_session *s,
                        const struct dlock_request *req, int64_t deadline_ms,
                        struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct dlock_session *in = inner_of(s);

    atomic_fetch_add(&shim.acquires, 1);
    if (take(&shim.fail_acquire))
        return dlock_session_error(s, atomic_load(&shim.acquire_code),
                                   "injected failure");
    if (take(&shim.busy_acquire)) {
        *retry_ms = (uint32_t)atomic_load(&shim.busy_hint_ms);
        return DLOCK_EBUSY;
    }
    return in->backend->acquire(in, req, deadline_ms, grant, retry_ms);
}

static int shim_wait(struct dlock_session *s, const struct dlock_request *req,
                     uint32_t max_ms)
{
    struct dlock_session *in = inner_of(s);
    return in->backend->wait(in, req, max_ms);
}

static int shim_renew(struct dlock_session *s, struct dlock_renewal *items,
                      size_t n)
{
    struct dlock_session *in = inner_of(s);
    int code = atomic_load(&shim.renew_code), stall, rc;

    atomic_store(&shim.in_renew, 1);
    atomic_fetch_add(&shim.renews, 1);
    atomic_fetch_add(&shim.renewed_items, (int)n);
    if ((stall = atomic_load(&shim.stall_renew_ms)) > 0)
        shim_sleep(stall);
    if (code != 0)
        rc = dlock_session_error(s, code, "injected renewal failure");
    else
        rc = in->backend->renew(in, items, n);
    atomic_store(&shim.last_renew_end, atomic_fetch_add(&shim.seq, 1) + 1);
    atomic_store(&shim.in_renew, 0);
    return rc;
}

static int shim_release(struct dlock_session *s,
                        const struct dlock_request *req,
                        struct dlock_grant *grant)
{
    struct dlock_session *in = inner_of(s);

    atomic_store(&shim.last_release, atomic_fetch_add(&shim.seq, 1) + 1);
    atomic_fetch_add(&shim.releases, 1);
    return in->backend->release(in, req, grant);
}

const struct dlock_backend shim_backend = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "fault",
    .params = shim_params,
    .caps = DLOCK_CAP_LEASE,
    .summary = "test shim: injects failures into a real backend",
    .ctx_open = shim_ctx_open,
    .ctx_close = shim_ctx_close,
    .open = shim_open,
    .close = shim_close,
    .acquire = shim_acquire,
    .wait = shim_wait,
    .renew = shim_renew,
    .release = shim_release,
};

void shim_register(void)
{
    if (dlock_backend_find("fault") == NULL &&
        dlock_backend_register(&shim_backend) != DLOCK_OK) {
        fprintf(stderr, "shim: cannot register\n");
        exit(2);
    }
}

void shim_reset(void)
{
    memset(&shim, 0, sizeof shim);
}

const char *shim_uri(char *buf, size_t cap, const char *inner)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = (size_t)snprintf(buf, cap, "fault://shim?inner=");

    for (; *inner != '\0' && n + 4 < cap; inner++) {
        unsigned char ch = (unsigned char)*inner;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_') {
            buf[n++] = (char)ch;
        } else {
            buf[n++] = '%';
            buf[n++] = hex[ch >> 4];
            buf[n++] = hex[ch & 15];
        }
    }
    buf[n] = '\0';
    return buf;
}
