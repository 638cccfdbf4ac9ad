/*
 * shim.c: the fault-injecting test backend (see shim.h). Like an
 * out-of-tree backend that wraps another, it uses backend.h alone: it
 * parses its inner URI with dlock_uri_parse(), finds the inner backend with
 * dlock_backend_find(), picks the inner mode as core would, and presents a
 * mode of its own made from it (the inner's capabilities, plus a lease core
 * can see run out, and the watchdog on even where the inner needs none).
 *
 * Divisions: faults; the inner backend; the life cycle; the methods; the
 * tables.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "dlock/backend.h"
#include "shim.h"

struct shim_knobs shim;

struct shim_ctx {
    struct dlock_uri *inner_uri;
    const struct dlock_backend *inner;
    const struct dlock_mode *inner_mode;
    void *inner_ctx;
};

struct shim_session {
    struct dlock_session base;
    struct dlock_session *inner;
    const struct dlock_mode *inner_mode;
    atomic_int in_call; /* [B-SERIAL-1] */
    int grants;         /* [B-CLOSE-1]: held grants acquired here */
};

/* [B-PIN-1]: which session each held grant was acquired on. Grants live
 * in core's lock handles, so their addresses identify them while held. */
#define PIN_SLOTS 4096
static pthread_mutex_t pin_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const struct dlock_grant *grant;
    const struct shim_session *sess;
} pins[PIN_SLOTS];

static const char *const shim_params[] = {"inner", NULL};
extern const struct dlock_backend shim_backend;

/* The mode presented for the inner one; filled by shim_pick_mode(). One
 * inner URI per process, as the fault suite runs. */
static struct dlock_mode shim_mode;
static char shim_mode_name[64];
static _Atomic(const struct dlock_backend *) shim_inner_backend;
/* The latch table forwarded to the inner mode's (below). */
static struct dlock_latch_ops shim_latch;
static int shim_latch_await(struct dlock_session *s, const char *name,
                            size_t len, int64_t deadline_ms);

/* ---- faults ----------------------------------------------------------------- */

void shim_fail(enum shim_op op, int code, int nth, int times)
{
    struct shim_fault *f = &shim.fault[op];

    atomic_store(&f->code, 0);
    atomic_store(&f->skip, nth > 1 ? nth - 1 : 0);
    atomic_store(&f->times, times);
    atomic_store(&f->code, code);
}

/* Should this call of op fail? Then with which code (else 0). */
static int fault_now(enum shim_op op)
{
    struct shim_fault *f = &shim.fault[op];
    int code = atomic_load(&f->code), v;

    atomic_fetch_add(&shim.calls[op], 1);
    if (code == 0)
        return 0;
    v = atomic_load(&f->skip);
    while (v > 0)
        if (atomic_compare_exchange_weak(&f->skip, &v, v - 1))
            return 0;
    v = atomic_load(&f->times);
    if (v < 0)
        return code;
    while (v > 0)
        if (atomic_compare_exchange_weak(&f->times, &v, v - 1))
            return code;
    return 0;
}

static void shim_sleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* [B-SERIAL-1]: a call begins on s; another already running is a broken
 * promise of core's, reported at once. */
static struct dlock_session *enter(struct dlock_session *s)
{
    struct shim_session *ss = (struct shim_session *)s;

    if (atomic_exchange(&ss->in_call, 1) != 0) {
        atomic_fetch_add(&shim.serial_violations, 1);
        fprintf(stderr, "shim: [B-SERIAL-1] broken: two calls at once on "
                        "one session\n");
        abort();
    }
    /* Inner calls report through the outer session's core state. */
    ss->inner->core = s->core;
    return ss->inner;
}

static int leave(struct dlock_session *s, int rc)
{
    atomic_store(&((struct shim_session *)s)->in_call, 0);
    return rc;
}

static void pin_note(const struct dlock_grant *g, const struct shim_session *ss)
{
    pthread_mutex_lock(&pin_mu);
    for (size_t i = 0; i < PIN_SLOTS; i++)
        if (pins[i].grant == NULL || pins[i].grant == g) {
            pins[i].grant = g;
            pins[i].sess = ss;
            break;
        }
    pthread_mutex_unlock(&pin_mu);
}

/* A renewal or release of g on ss: for a conn-bound mode it must be the
 * session that acquired it. forget: the grant ends (release), and leaves
 * the session it lived on [B-CLOSE-1]. */
static void pin_check(const struct dlock_grant *g, struct shim_session *ss,
                      bool forget)
{
    bool conn_bound = (ss->inner_mode->caps & DLOCK_CAP_CONN_BOUND) != 0;

    pthread_mutex_lock(&pin_mu);
    for (size_t i = 0; i < PIN_SLOTS; i++)
        if (pins[i].grant == g) {
            if (conn_bound && pins[i].sess != ss) {
                atomic_fetch_add(&shim.pin_violations, 1);
                fprintf(stderr, "shim: [B-PIN-1] broken: a conn-bound grant "
                                "used on another session\n");
            }
            if (forget) {
                if (conn_bound)
                    ((struct shim_session *)pins[i].sess)->grants--;
                pins[i].grant = NULL;
            }
            break;
        }
    pthread_mutex_unlock(&pin_mu);
}

/* ---- the inner backend ------------------------------------------------------- */

/* The inner backend and mode of the inner URI, picked as core does. */
static int find_inner(const struct dlock_uri *inner_uri,
                      const struct dlock_backend **b,
                      const struct dlock_mode **m, char *err, size_t errlen)
{
    int rc;

    *b = dlock_backend_find(inner_uri->scheme);
    if (*b == NULL || *b == &shim_backend)
        return dlock_errorf(err, errlen, DLOCK_ENOBACKEND, "inner: %s",
                            inner_uri->scheme);
    *m = NULL;
    if ((*b)->pick_mode != NULL &&
        (rc = (*b)->pick_mode(inner_uri, m, err, errlen)) != DLOCK_OK)
        return rc;
    for (size_t i = 0; *m == NULL && (*b)->modes[i] != NULL; i++)
        if (inner_uri->mode == NULL ||
            strcasecmp(inner_uri->mode, (*b)->modes[i]->name) == 0)
            *m = (*b)->modes[i];
    if (*m == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "inner: mode %s",
                            inner_uri->mode);
    return DLOCK_OK;
}

static int parse_inner(const struct dlock_uri *uri, struct dlock_uri **out,
                       char *err, size_t errlen)
{
    const char *inner = dlock_uri_param(uri, "inner");

    if (inner == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "inner: missing");
    return dlock_uri_parse(out, inner, err, errlen);
}

/* ---- the life cycle ----------------------------------------------------------- */

static int shim_pick_mode(const struct dlock_uri *uri,
                          const struct dlock_mode **out, char *err,
                          size_t errlen)
{
    const struct dlock_backend *b;
    const struct dlock_mode *m;
    struct dlock_uri *inner;
    int rc;

    if ((rc = parse_inner(uri, &inner, err, errlen)) != DLOCK_OK)
        return rc;
    rc = find_inner(inner, &b, &m, err, errlen);
    dlock_uri_free(inner);
    if (rc != DLOCK_OK)
        return rc;
    atomic_store(&shim_inner_backend, b);
    snprintf(shim_mode_name, sizeof shim_mode_name, "fault(%s)", m->name);
    shim_mode.name = shim_mode_name;
    shim_mode.summary = "test shim around a real mode";
    /* Make the watchdog run even over a mode that needs no renewal, and
     * give the lock a lease core can see run out. */
    shim_mode.caps = (m->caps & ~DLOCK_CAP_NO_RENEW) | DLOCK_CAP_LEASE;
    shim_mode.kinds = m->kinds;
    shim_mode.retry_min_ms = m->retry_min_ms;
    shim_mode.retry_max_ms = m->retry_max_ms;
    /* Latches as the inner mode has them (a version 4 table). */
    shim_mode.latch = NULL;
    shim_mode.caps &= ~DLOCK_CAP_LATCH;
    if (b->version >= 4 && m->latch != NULL) {
        shim_latch.await = m->latch->await != NULL ? shim_latch_await : NULL;
        shim_latch.poll_min_ms = m->latch->poll_min_ms;
        shim_latch.poll_max_ms = m->latch->poll_max_ms;
        shim_mode.latch = &shim_latch;
        shim_mode.caps |= m->caps & DLOCK_CAP_LATCH;
    }
    *out = &shim_mode;
    return DLOCK_OK;
}

static int shim_thread_init(void)
{
    const struct dlock_backend *b = atomic_load(&shim_inner_backend);

    atomic_fetch_add(&shim.thread_inits, 1);
    if (b != NULL && b->thread_init != NULL)
        return b->thread_init();
    return DLOCK_OK;
}

static void shim_thread_end(void)
{
    const struct dlock_backend *b = atomic_load(&shim_inner_backend);

    if (b != NULL && b->thread_end != NULL)
        b->thread_end();
}

static int shim_ctx_open(void **out, const struct dlock_uri *uri,
                         const struct dlock_mode *mode, char *err,
                         size_t errlen)
{
    struct shim_ctx *x;
    int rc;

    (void)mode;
    x = calloc(1, sizeof *x);
    if (x == NULL)
        return DLOCK_ENOMEM;
    rc = parse_inner(uri, &x->inner_uri, err, errlen);
    if (rc == DLOCK_OK)
        rc = find_inner(x->inner_uri, &x->inner, &x->inner_mode, err, errlen);
    if (rc == DLOCK_OK && x->inner->ctx_open != NULL)
        rc = x->inner->ctx_open(&x->inner_ctx, x->inner_uri, x->inner_mode,
                                err, errlen);
    if (rc != DLOCK_OK) {
        dlock_uri_free(x->inner_uri);
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
    dlock_uri_free(x->inner_uri);
    free(x);
}

static int shim_open(struct dlock_session **out, const struct dlock_uri *uri,
                     void *ctx, char *err, size_t errlen)
{
    struct shim_ctx *x = ctx;
    struct shim_session *ss;
    int rc;

    (void)uri;
    if ((rc = fault_now(SHIM_OPEN)) != 0)
        return dlock_errorf(err, errlen, rc, "injected open failure");
    ss = calloc(1, sizeof *ss);
    if (ss == NULL)
        return DLOCK_ENOMEM;
    rc = x->inner->open(&ss->inner, x->inner_uri, x->inner_ctx, err, errlen);
    if (rc != DLOCK_OK) {
        free(ss);
        return rc;
    }
    ss->inner->backend = x->inner;
    ss->inner_mode = x->inner_mode;
    atomic_fetch_add(&shim.opens, 1);
    atomic_init(&ss->in_call, 0);
    *out = &ss->base;
    return DLOCK_OK;
}

static void shim_close(struct dlock_session *s)
{
    struct shim_session *ss = (struct shim_session *)s;
    struct dlock_session *in = enter(s);

    /* [B-CLOSE-1]: only after every grant on it is released. */
    if (ss->grants != 0) {
        atomic_fetch_add(&shim.close_violations, 1);
        fprintf(stderr, "shim: [B-CLOSE-1] broken: closed with %d grants\n",
                ss->grants);
    }
    atomic_fetch_add(&shim.closes, 1);
    in->backend->close(in);
    free(ss);
}

/* ---- the methods ---------------------------------------------------------------- */

static int shim_acquire(struct dlock_session *s,
                        const struct dlock_request *req, int64_t deadline_ms,
                        struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct shim_session *ss = (struct shim_session *)s;
    const struct dlock_mode *m = ss->inner_mode;
    struct dlock_session *in = enter(s);
    int code = fault_now(SHIM_ACQUIRE), v, rc;

    /* [B-KIND-1]: core asks only for kinds the mode serves. */
    if (!(m->kinds & DLOCK_KIND_BIT(req->kind))) {
        atomic_fetch_add(&shim.kind_violations, 1);
        fprintf(stderr, "shim: [B-KIND-1] broken: kind %u reached mode %s\n",
                req->kind, m->name);
    }
    if (code != 0)
        return leave(s, dlock_session_error(s, code, "injected failure"));
    v = atomic_load(&shim.busy_acquire);
    while (v > 0)
        if (atomic_compare_exchange_weak(&shim.busy_acquire, &v, v - 1)) {
            *retry_ms = (uint32_t)atomic_load(&shim.busy_hint_ms);
            return leave(s, DLOCK_EBUSY);
        }
    rc = m->acquire(in, req, deadline_ms, grant, retry_ms);
    if (rc == DLOCK_OK) {
        if (m->caps & DLOCK_CAP_CONN_BOUND)
            ss->grants++; /* lives on this session [B-CLOSE-1] */
        pin_note(grant, ss);
    }
    return leave(s, rc);
}

static int shim_wait(struct dlock_session *s, const struct dlock_request *req,
                     uint32_t max_ms)
{
    const struct dlock_mode *m = ((struct shim_session *)s)->inner_mode;
    struct dlock_session *in = enter(s);
    int code = fault_now(SHIM_WAIT);

    if (code != 0)
        return leave(s, dlock_session_error(s, code, "injected failure"));
    if (m->wait == NULL) {
        shim_sleep((int)(max_ms < 50 ? max_ms : 50));
        return leave(s, DLOCK_OK);
    }
    return leave(s, m->wait(in, req, max_ms));
}

static int shim_renew(struct dlock_session *s, struct dlock_renewal *items,
                      size_t n)
{
    const struct dlock_mode *m = ((struct shim_session *)s)->inner_mode;
    struct dlock_session *in = enter(s);
    int code, stall, rc;

    atomic_store(&shim.in_renew, 1);
    for (size_t i = 0; i < n; i++)
        pin_check(items[i].grant, (struct shim_session *)s, false);
    code = fault_now(SHIM_RENEW);
    atomic_fetch_add(&shim.renewed_items, (int)n);
    if ((stall = atomic_load(&shim.stall_renew_ms)) > 0)
        shim_sleep(stall);
    if (code != 0)
        rc = dlock_session_error(s, code, "injected renewal failure");
    else
        rc = m->renew(in, items, n);
    atomic_store(&shim.last_renew_end, atomic_fetch_add(&shim.seq, 1) + 1);
    atomic_store(&shim.in_renew, 0);
    return leave(s, rc);
}

static int shim_release(struct dlock_session *s,
                        const struct dlock_request *req,
                        struct dlock_grant *grant)
{
    const struct dlock_mode *m = ((struct shim_session *)s)->inner_mode;
    struct dlock_session *in = enter(s);
    int code, rc;

    atomic_store(&shim.last_release, atomic_fetch_add(&shim.seq, 1) + 1);
    pin_check(grant, (struct shim_session *)s, true);
    code = fault_now(SHIM_RELEASE);
    /* [B-RELEASE-1]: the inner release runs even when we report a failure,
     * so its grant's state is freed. */
    rc = m->release(in, req, grant);
    if (code != 0)
        rc = dlock_session_error(s, code, "injected release failure");
    return leave(s, rc);
}

static int shim_inspect(struct dlock_session *s, const char *name, size_t len,
                        dlock_state *out)
{
    const struct dlock_mode *m = ((struct shim_session *)s)->inner_mode;
    struct dlock_session *in = enter(s);

    if (m->inspect == NULL)
        return leave(s, DLOCK_EUNSUPPORTED);
    return leave(s, m->inspect(in, name, len, out));
}

static int shim_downgrade(struct dlock_session *s,
                          const struct dlock_request *req,
                          struct dlock_grant *grant)
{
    const struct dlock_mode *m = ((struct shim_session *)s)->inner_mode;
    struct dlock_session *in = enter(s);

    if (m->downgrade == NULL)
        return leave(s, DLOCK_EUNSUPPORTED);
    return leave(s, m->downgrade(in, req, grant));
}

/* Latches [B-LATCH-1]: forwarded to the inner mode's table. */
static const struct dlock_latch_ops *inner_latch(struct dlock_session *s)
{
    const struct dlock_mode *m = ((struct shim_session *)s)->inner_mode;
    const struct dlock_backend *b = atomic_load(&shim_inner_backend);

    return b != NULL && b->version >= 4 ? m->latch : NULL;
}

static int shim_latch_set(struct dlock_session *s, const char *name,
                          size_t len, uint32_t count, uint32_t *current)
{
    const struct dlock_latch_ops *l = inner_latch(s);
    struct dlock_session *in = enter(s);

    if (l == NULL)
        return leave(s, DLOCK_EUNSUPPORTED);
    return leave(s, l->set(in, name, len, count, current));
}

static int shim_latch_down(struct dlock_session *s, const char *name,
                           size_t len, uint32_t *left)
{
    const struct dlock_latch_ops *l = inner_latch(s);
    struct dlock_session *in = enter(s);

    if (l == NULL)
        return leave(s, DLOCK_EUNSUPPORTED);
    return leave(s, l->down(in, name, len, left));
}

static int shim_latch_count(struct dlock_session *s, const char *name,
                            size_t len, uint32_t *count)
{
    const struct dlock_latch_ops *l = inner_latch(s);
    struct dlock_session *in = enter(s);

    if (l == NULL)
        return leave(s, DLOCK_EUNSUPPORTED);
    return leave(s, l->count(in, name, len, count));
}

static int shim_latch_await(struct dlock_session *s, const char *name,
                            size_t len, int64_t deadline_ms)
{
    const struct dlock_latch_ops *l = inner_latch(s);
    struct dlock_session *in = enter(s);

    if (l == NULL || l->await == NULL)
        return leave(s, DLOCK_EUNSUPPORTED);
    return leave(s, l->await(in, name, len, deadline_ms));
}

static struct dlock_latch_ops shim_latch = {
    .set = shim_latch_set,
    .down = shim_latch_down,
    .count = shim_latch_count,
};

/* ---- the tables ------------------------------------------------------------------ */

static struct dlock_mode shim_mode = {
    .name = "fault",
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
    .acquire = shim_acquire,
    .renew = shim_renew,
    .release = shim_release,
    .wait = shim_wait,
    .inspect = shim_inspect,
    .downgrade = shim_downgrade,
};

static const struct dlock_mode *const shim_modes[] = {&shim_mode, NULL};

const struct dlock_backend shim_backend = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "fault",
    .params = shim_params,
    .summary = "test shim: injects failures into a real backend",
    .modes = shim_modes,
    .pick_mode = shim_pick_mode,
    .thread_init = shim_thread_init,
    .thread_end = shim_thread_end,
    .ctx_open = shim_ctx_open,
    .ctx_close = shim_ctx_close,
    .open = shim_open,
    .close = shim_close,
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
