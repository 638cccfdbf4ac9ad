/*
 * test_core.c: core's pieces on their own: backoff bounds, the watchdog's
 * timer heap, error and capability tables, name segments, UTF-8 checks,
 * password redaction, the registry's checks, and client-open errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"

/* ---- backoff ------------------------------------------------------------------ */

static void retry__backoff_within_full_jitter_bounds(void **state)
{
    (void)state;
    for (unsigned attempt = 0; attempt < 40; attempt++) {
        uint64_t cap = 5;
        for (unsigned i = 0; i < attempt && cap < 500; i++)
            cap *= 2;
        if (cap > 500)
            cap = 500;
        for (int k = 0; k < 200; k++) {
            uint32_t d = dlock__backoff_ms(5, 500, attempt);
            assert_true(d >= 5);
            assert_true(d <= cap);
        }
    }
}

static void retry__backoff_spreads(void **state)
{
    uint32_t lo = UINT32_MAX, hi = 0;

    (void)state;
    for (int k = 0; k < 1000; k++) {
        uint32_t d = dlock__backoff_ms(10, 1000, 10);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    /* Full jitter covers most of [10, 1000], not a point. */
    assert_true(lo < 200);
    assert_true(hi > 800);
}

static void retry__backoff_degenerate_bounds(void **state)
{
    (void)state;
    assert_int_equal(dlock__backoff_ms(7, 7, 30), 7);
    assert_int_equal(dlock__backoff_ms(50, 10, 3), 50); /* max < min */
    for (int k = 0; k < 100; k++)
        assert_true(dlock__backoff_ms(0, 3, 100) <= 3);
    assert_true(dlock__backoff_ms(1, UINT32_MAX, 1000) >= 1);
}

/* ---- the heap ------------------------------------------------------------------ */

static void watchdog__heap_orders_by_due(void **state)
{
    enum { N = 1000 };
    struct dlock__heap h = {0};
    struct dlock__timer *t = calloc(N, sizeof *t);
    int64_t last = INT64_MIN;
    size_t popped = 0;

    (void)state;
    for (int i = 0; i < N; i++) {
        t[i].due = (int64_t)(dlock__rand64() % 100000);
        assert_int_equal(dlock__heap_push(&h, &t[i]), DLOCK_OK);
    }
    /* Remove a third from the middle, as cancels do. */
    for (int i = 0; i < N; i += 3) {
        dlock__heap_remove(&h, &t[i]);
        assert_int_equal(t[i].idx, SIZE_MAX);
    }
    dlock__heap_remove(&h, &t[0]); /* twice: a no-op */
    for (size_t i = 0; i < h.n; i++)
        assert_int_equal(h.v[i]->idx, i);
    while (dlock__heap_top(&h) != NULL) {
        struct dlock__timer *top = dlock__heap_top(&h);
        assert_true(top->due >= last);
        last = top->due;
        dlock__heap_remove(&h, top);
        popped++;
    }
    assert_int_equal(popped, N - (N + 2) / 3);
    dlock__heap_free(&h);
    free(t);
}

static void watchdog__heap_reserve_means_no_growth(void **state)
{
    struct dlock__heap h = {0};
    struct dlock__timer t[100];
    struct dlock__timer **v;

    (void)state;
    assert_int_equal(dlock__heap_reserve(&h, 100), DLOCK_OK);
    v = h.v;
    for (int i = 0; i < 100; i++) {
        t[i].due = 100 - i;
        assert_int_equal(dlock__heap_push(&h, &t[i]), DLOCK_OK);
    }
    assert_ptr_equal(h.v, v);
    assert_int_equal(dlock__heap_top(&h)->due, 1);
    dlock__heap_free(&h);
}

/* ---- errors and capabilities -------------------------------------------------- */

static void errors__every_code_has_text_and_name(void **state)
{
    static const int codes[] = {
#define XX(name, value, text) DLOCK_##name,
        DLOCK_ERROR_MAP(XX)
#undef XX
    };
    (void)state;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        assert_true(codes[i] < 0);
        assert_string_not_equal(dlock_strerror(codes[i]),
                                "unknown error code");
        assert_string_not_equal(dlock_err_name(codes[i]), "UNKNOWN");
        for (size_t j = 0; j < i; j++)
            assert_int_not_equal(codes[i], codes[j]);
    }
    assert_string_equal(dlock_err_name(DLOCK_EBUSY), "EBUSY");
    assert_string_equal(dlock_strerror(12345), "unknown error code");
    assert_string_equal(dlock_err_name(-9999), "UNKNOWN");
    assert_string_equal(dlock_strerror(DLOCK_OK), "success");
}

static void errors__cap_names(void **state)
{
    (void)state;
    for (uint32_t bit = 1; bit <= DLOCK_CAP_SERVER_TIMEOUT; bit <<= 1) {
        assert_non_null(dlock_cap_name(bit));
        assert_non_null(dlock_cap_text(bit));
    }
    assert_null(dlock_cap_name(1u << 31));
    assert_null(dlock_cap_name(3));
}

static void errors__redact_replaces_every_occurrence(void **state)
{
    char out[128];

    (void)state;
    dlock__redact(out, sizeof out, "a pw b pw c", "pw");
    assert_string_equal(out, "a *** b *** c");
    dlock__redact(out, sizeof out, "nothing here", NULL);
    assert_string_equal(out, "nothing here");
    dlock__redact(out, 6, "pwpwpwpw", "pw");
    assert_string_equal(out, "*****");
}

/* ---- names ---------------------------------------------------------------------- */

static void util__segment_escapes(void **state)
{
    char out[300];

    (void)state;
    assert_int_equal(dlock_name_segment(out, 240, "a/b", 3), 5);
    assert_string_equal(out, "a%2Fb");
    dlock_name_segment(out, 240, ".", 1);
    assert_string_equal(out, "%2E");
    dlock_name_segment(out, 240, "..", 2);
    assert_string_equal(out, "%2E.");
    dlock_name_segment(out, 240, "x.y", 3);
    assert_string_equal(out, "x.y");
    dlock_name_segment(out, 240, "%41~", 4);
    assert_string_equal(out, "%2541%7E");
    dlock_name_segment(out, 240, "\xe9\x94\x81", 3);
    assert_string_equal(out, "%E9%94%81");
}

static void util__segment_hashes_long_names(void **state)
{
    char a[300], b[300], name[1000];

    (void)state;
    memset(name, '/', sizeof name); /* every byte escapes to 3 */
    size_t la = dlock_name_segment(a, 240, name, sizeof name);
    name[999] = 'x';
    size_t lb = dlock_name_segment(b, 240, name, sizeof name);
    assert_true(la <= 240);
    assert_true(lb <= 240);
    assert_non_null(strchr(a, '~'));
    assert_string_not_equal(a, b);
    for (size_t i = 0; i < la; i++)
        assert_non_null(strchr("ABCDEFabcdef0123456789%~_-.", a[i]) ?
                            (void *)1 : NULL);
    /* No cut escape before the '~'. */
    char *tilde = strchr(a, '~');
    assert_true(tilde - a >= 3);
    assert_true(tilde[-3] == '%' || tilde[-1] != '%');
}

static void util__sha256v_equals_one_buffer(void **state)
{
    uint8_t one[32], parts[32];
    const void *p[3] = {"name", "", "space/x"};
    size_t l[3] = {4, 0, 7};

    (void)state;
    dlock_sha256(one, "namespace/x", 11);
    dlock_sha256v(parts, p, l, 3);
    assert_memory_equal(one, parts, 32);
    dlock_sha256v(parts, p, l, 0);
    dlock_sha256(one, "", 0);
    assert_memory_equal(one, parts, 32);
}

static void util__utf8_validation(void **state)
{
    size_t bad = 0;

    (void)state;
    assert_true(dlock__utf8_valid("plain", 5, &bad));
    assert_true(dlock__utf8_valid("\xe9\x94\x81", 3, &bad));
    assert_true(dlock__utf8_valid("\xf0\x9f\x94\x92", 4, &bad));
    assert_false(dlock__utf8_valid("a\xff", 2, &bad));
    assert_int_equal(bad, 1);
    assert_false(dlock__utf8_valid("\xc0\xaf", 2, &bad)); /* overlong */
    assert_false(dlock__utf8_valid("\xed\xa0\x80", 3, &bad)); /* surrogate */
    assert_false(dlock__utf8_valid("\xf4\x90\x80\x80", 4, &bad));
    assert_false(dlock__utf8_valid("\xe9\x94", 2, &bad)); /* truncated */
    assert_false(dlock__utf8_valid("a\0b", 3, &bad));
}

static void util__uuid_is_v4(void **state)
{
    char a[37], b[37];

    (void)state;
    assert_int_equal(dlock__uuid(a), DLOCK_OK);
    assert_int_equal(dlock__uuid(b), DLOCK_OK);
    assert_int_equal(strlen(a), 36);
    assert_int_equal(a[14], '4');
    assert_string_not_equal(a, b);
}

/* ---- registry ---------------------------------------------------------------------- */

static int dummy_open(struct dlock_session **out, const struct dlock_uri *u,
                      void *ctx, char *err, size_t errlen)
{
    (void)out, (void)u, (void)ctx;
    return dlock_errorf(err, errlen, DLOCK_ECONNECT, "dummy: refused");
}
static void dummy_close(struct dlock_session *s) { (void)s; }
static int dummy_acquire(struct dlock_session *s,
                         const struct dlock_request *r, int64_t d,
                         struct dlock_grant *g, uint32_t *h)
{
    (void)s, (void)r, (void)d, (void)g, (void)h;
    return DLOCK_ERROR;
}
static int dummy_renew(struct dlock_session *s, struct dlock_renewal *i,
                       size_t n)
{
    (void)s, (void)i, (void)n;
    return DLOCK_ERROR;
}
static int dummy_release(struct dlock_session *s,
                         const struct dlock_request *r, struct dlock_grant *g)
{
    (void)s, (void)r, (void)g;
    return DLOCK_ERROR;
}

static const struct dlock_mode dummy_mode = {
    .name = "only",
    .summary = "a dummy mode",
    .caps = DLOCK_CAP_LEASE,
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
    .acquire = dummy_acquire,
    .renew = dummy_renew,
    .release = dummy_release,
};
static const struct dlock_mode *const dummy_modes[] = {&dummy_mode, NULL};

static void registry__checks_tables(void **state)
{
    static const char *const aliases[] = {"dummy2", NULL};
    struct dlock_backend b = {
        .version = DLOCK_BACKEND_VERSION, .scheme = "dummy",
        .aliases = aliases, .modes = dummy_modes, .open = dummy_open,
        .close = dummy_close,
    };
    struct dlock_mode bad_mode = dummy_mode;
    const struct dlock_mode *bad_modes[] = {&bad_mode, NULL};
    static struct dlock_backend kept;
    const char *names[32];
    char err[256];
    size_t n;
    bool listed = false;

    (void)state;
    assert_int_equal(dlock_backend_register(NULL), DLOCK_EINVAL);
    b.version = 0;
    assert_int_equal(dlock_backend_register(&b), DLOCK_EINVAL);
    b.version = DLOCK_BACKEND_VERSION + 1;
    assert_int_equal(dlock_backend_register(&b), DLOCK_EINVAL);
    /* A version 1 table is told to rebuild. */
    b.version = 1;
    assert_int_equal(dlock__backend_check(&b, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "rebuild"));
    b.version = DLOCK_BACKEND_VERSION;
    b.modes = NULL;
    assert_int_equal(dlock_backend_register(&b), DLOCK_EINVAL);
    b.modes = bad_modes;
    bad_mode.release = NULL;
    assert_int_equal(dlock__backend_check(&b, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "release"));
    bad_mode.release = dummy_release;
    bad_mode.kinds = DLOCK_KIND_BIT(DLOCK_KIND_SHARED);
    assert_int_equal(dlock__backend_check(&b, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "exclusive"));
    /* DLOCK_CAP_LATCH goes with a latch table, and the table with it. */
    bad_mode.kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE);
    bad_mode.caps = DLOCK_CAP_LATCH;
    assert_int_equal(dlock__backend_check(&b, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "LATCH"));
    b.modes = dummy_modes;
    b.scheme = "file"; /* taken by a built-in */
    assert_int_equal(dlock_backend_register(&b), DLOCK_EINVAL);
    b.scheme = "dummy";
    kept = b;
    assert_int_equal(dlock_backend_register(&kept), DLOCK_OK);
    assert_int_equal(dlock_backend_register(&kept), DLOCK_EINVAL);
    assert_ptr_equal(dlock_backend_find("dummy"), &kept);
    assert_ptr_equal(dlock_backend_find("DUMMY2"), &kept);
    n = dlock_backend_schemes(names, 32);
    for (size_t i = 0; i < n && i < 32; i++)
        listed |= strcmp(names[i], "dummy") == 0;
    assert_true(listed);

    /* Opening a client on it reports the backend's own words. */
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, "dummy://h", NULL),
                     DLOCK_ECONNECT);
    assert_non_null(strstr(dlock_client_errmsg(c), "dummy: refused"));
    dlock_client_close(c);
    /* An unknown mode= names the modes there are. */
    assert_int_equal(dlock_client_open(&c, "dummy://h?mode=nope", NULL),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "only"));
    dlock_client_close(c);
}

/* The modes of a URI's backend, listed without connecting (a server that
 * is down still shows what each mode would give). */
static void registry__modes_without_connecting(void **state)
{
    dlock_mode_info m[4] = {DLOCK_MODE_INFO_INIT, DLOCK_MODE_INFO_INIT,
                            DLOCK_MODE_INFO_INIT, DLOCK_MODE_INFO_INIT};
    dlock_mode_info old = DLOCK_MODE_INFO_INIT;
    char err[256] = "";
    size_t n = 0;

    (void)state;
    assert_int_equal(dlock_backend_modes("dummy://127.0.0.1:1", m, 4, &n,
                                         err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].mode, "only");
    assert_string_equal(m[0].summary, "a dummy mode");
    assert_int_equal(m[0].caps, DLOCK_CAP_LEASE);
    assert_int_equal(m[0].chosen, 1);
    assert_int_equal(dlock_backend_modes("file:///tmp", m, 4, &n, err,
                                         sizeof err),
                     DLOCK_OK);
    assert_true(n >= 1);
    assert_int_equal(dlock_backend_modes("nosuch://x", m, 4, &n, err,
                                         sizeof err),
                     DLOCK_ENOBACKEND);
    old.version = 0;
    assert_int_equal(dlock_backend_modes("file:///tmp", &old, 1, &n, err,
                                         sizeof err),
                     DLOCK_EINVAL);
    assert_non_null(strstr(err, "DLOCK_MODE_INFO_INIT"));
}

/* ---- the tables' layouts are frozen per version ----------------------------- */

/* Copies of the tables as released in version 2. If a slot is inserted
 * mid-struct, or one is retyped, the offsets differ and this test fails:
 * new slots go at the end with a new DLOCK_BACKEND_VERSION. */
struct mode_v2_frozen {
    const char *name;
    const char *summary;
    uint32_t caps;
    uint32_t kinds;
    uint32_t retry_min_ms, retry_max_ms;
    int (*acquire)(struct dlock_session *, const struct dlock_request *,
                   int64_t, struct dlock_grant *, uint32_t *);
    int (*renew)(struct dlock_session *, struct dlock_renewal *, size_t);
    int (*release)(struct dlock_session *, const struct dlock_request *,
                   struct dlock_grant *);
    int (*wait)(struct dlock_session *, const struct dlock_request *,
                uint32_t);
    int (*inspect)(struct dlock_session *, const char *, size_t,
                   dlock_state *);
    int (*floor)(const struct dlock_uri *, const char *, uint32_t,
                 uint64_t *, char *, size_t);
    const void *data;
};

struct backend_v2_frozen {
    unsigned int version;
    const char *scheme;
    const char *const *aliases;
    const char *const *params;
    const char *summary;
    const struct dlock_mode *const *modes;
    int (*pick_mode)(const struct dlock_uri *, const struct dlock_mode **,
                     char *, size_t);
    int (*global_init)(void);
    void (*global_cleanup)(void);
    int (*thread_init)(void);
    void (*thread_end)(void);
    int (*ctx_open)(void **, const struct dlock_uri *,
                    const struct dlock_mode *, char *, size_t);
    void (*ctx_close)(void *);
    int (*open)(struct dlock_session **, const struct dlock_uri *, void *,
                char *, size_t);
    void (*close)(struct dlock_session *);
};

#define SAME_SLOT(T, F, f)                               \
    assert_int_equal(offsetof(T, f), offsetof(F, f));    \
    assert_int_equal(sizeof(((T *)0)->f), sizeof(((F *)0)->f))
#define SAME_B(f) SAME_SLOT(struct dlock_backend, struct backend_v2_frozen, f)
#define SAME_M(f) SAME_SLOT(struct dlock_mode, struct mode_v2_frozen, f)

static void backend__tables_v2_layout_frozen(void **state)
{
    (void)state;
    /* Versions 3 to 6 append to version 2's tables, nothing more. */
    assert_int_equal(DLOCK_BACKEND_VERSION, 6);
    SAME_B(version);
    SAME_B(scheme);
    SAME_B(aliases);
    SAME_B(params);
    SAME_B(summary);
    SAME_B(modes);
    SAME_B(pick_mode);
    SAME_B(global_init);
    SAME_B(global_cleanup);
    SAME_B(thread_init);
    SAME_B(thread_end);
    SAME_B(ctx_open);
    SAME_B(ctx_close);
    SAME_B(open);
    SAME_B(close);
    assert_int_equal(sizeof(struct dlock_backend),
                     sizeof(struct backend_v2_frozen));
    SAME_M(name);
    SAME_M(summary);
    SAME_M(caps);
    SAME_M(kinds);
    SAME_M(retry_min_ms);
    SAME_M(retry_max_ms);
    SAME_M(acquire);
    SAME_M(renew);
    SAME_M(release);
    SAME_M(wait);
    SAME_M(inspect);
    SAME_M(floor);
    SAME_M(data);
    assert_int_equal(offsetof(struct dlock_mode, downgrade),
                     sizeof(struct mode_v2_frozen));
    /* Version 4: the latch table, after downgrade. */
    assert_int_equal(offsetof(struct dlock_mode, latch),
                     sizeof(struct mode_v2_frozen) + sizeof(void (*)(void)));
    /* Version 5: the bench's fence_floor, forget and floor_wait, after
     * the latch. */
    assert_int_equal(offsetof(struct dlock_mode, fence_floor),
                     sizeof(struct mode_v2_frozen) + sizeof(void (*)(void)) +
                         sizeof(void *));
    assert_int_equal(offsetof(struct dlock_mode, forget),
                     offsetof(struct dlock_mode, fence_floor) +
                         sizeof(void (*)(void)));
    assert_int_equal(offsetof(struct dlock_mode, floor_wait),
                     offsetof(struct dlock_mode, forget) +
                         sizeof(void (*)(void)));
    /* Version 6: the bench's server_cpu, after floor_wait. */
    assert_int_equal(offsetof(struct dlock_mode, server_cpu),
                     offsetof(struct dlock_mode, floor_wait) +
                         sizeof(void (*)(void)));
    assert_int_equal(sizeof(struct dlock_mode),
                     sizeof(struct mode_v2_frozen) +
                         5 * sizeof(void (*)(void)) + sizeof(void *));
    /* The session header every backend embeds first. */
    assert_int_equal(offsetof(struct dlock_session, backend), 0);
}

/* ---- client open ---------------------------------------------------------------------- */

static void client__open_errors_are_clear(void **state)
{
    dlock_client *c = NULL;

    (void)state;
    assert_int_equal(dlock_client_open(NULL, "file:///tmp", NULL),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_open(&c, "nosuch://u:sekrit@h/x", NULL),
                     DLOCK_ENOBACKEND);
    assert_non_null(c);
    assert_non_null(strstr(dlock_client_errmsg(c), "nosuch"));
    assert_non_null(strstr(dlock_client_errmsg(c), "file")); /* built list */
    assert_null(strstr(dlock_client_errmsg(c), "sekrit"));
    dlock_client_close(c);

    assert_int_equal(dlock_client_open(&c, "file:///tmp/x?bogus=1", NULL),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "bogus"));
    dlock_client_close(c);

    assert_int_equal(dlock_client_open(&c, "file://host/tmp", NULL),
                     DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "host"));
    dlock_client_close(c);

    assert_int_equal(dlock_client_open(&c, "redis://u:sekrit@h:99999", NULL),
                     DLOCK_EINVAL);
    assert_null(strstr(dlock_client_errmsg(c), "sekrit"));
    dlock_client_close(c);

    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.version = 0;
    assert_int_equal(dlock_client_open(&c, "file:///tmp", &o), DLOCK_EINVAL);
    dlock_client_close(c);
    o.version = DLOCK_CLIENT_OPTIONS_VERSION;
    o.flags = 1u << 7;
    assert_int_equal(dlock_client_open(&c, "file:///tmp", &o), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "opts.flags"));
    dlock_client_close(c);
}

/* A program built against version 1 of the options passes a struct
 * without flags: it is read field by field, never past its end (ASan
 * checks), and callbacks are not queued. */
static void client__options_version_1_accepted(void **state)
{
    struct v1 {
        unsigned int version;
        dlock_log_fn log;
        int log_level;
        void *payload;
    } *o1 = malloc(sizeof *o1);
    dlock_client *c = NULL;

    (void)state;
    assert_non_null(o1);
    *o1 = (struct v1){1, NULL, DLOCK_LOG_WARN, NULL};
    assert_int_equal(dlock_client_open(&c, "file:///tmp",
                                       (const dlock_client_options *)o1),
                     DLOCK_OK);
    assert_int_equal(dlock_client_event_fd(c), -1);
    assert_int_equal(dlock_client_dispatch(c), 0);
    dlock_client_close(c);
    free(o1);
}

static void client__default_uri_from_env(void **state)
{
    char dir[] = "/tmp/dlock-unit-XXXXXX", want[128], run[128];
    dlock_client *c = NULL;
    dlock_info info = DLOCK_INFO_INIT;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(want, sizeof want, "file://%s/env", dir);
    assert_int_equal(mkdir(want + 7, 0700), 0); /* file:// makes none */
    setenv("DLOCK_URI", want, 1);
    assert_int_equal(dlock_client_open(&c, NULL, NULL), DLOCK_OK);
    assert_int_equal(dlock_client_info(c, &info), DLOCK_OK);
    assert_string_equal(info.uri, want);
    assert_string_equal(info.scheme, "file");
    dlock_client_close(c);

    /* No DLOCK_URI: the per-user runtime directory, which dlock makes. */
    unsetenv("DLOCK_URI");
    snprintf(run, sizeof run, "%s/run", dir);
    assert_int_equal(mkdir(run, 0700), 0);
    setenv("XDG_RUNTIME_DIR", run, 1);
    assert_int_equal(dlock_client_open(&c, "", NULL), DLOCK_OK);
    dlock_client_info(c, &info);
    snprintf(want, sizeof want, "file://%s/run/dlock", dir);
    assert_string_equal(info.uri, want);
    dlock_client_close(c);

    /* A runtime directory others can read is refused. */
    snprintf(want, sizeof want, "%s/run/dlock", dir);
    assert_int_equal(chmod(want, 0755), 0);
    assert_int_not_equal(dlock_client_open(&c, NULL, NULL), DLOCK_OK);
    assert_non_null(strstr(dlock_client_errmsg(c), "private"));
    dlock_client_close(c);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("XDG_RUNTIME_DIR");
}

static void client__duration_parse(void **state)
{
    uint32_t v;

    (void)state;
    assert_int_equal(dlock_parse_duration("250ms", &v), DLOCK_OK);
    assert_int_equal(v, 250);
    assert_int_equal(dlock_parse_duration("2m", &v), DLOCK_OK);
    assert_int_equal(v, 120000);
    assert_int_equal(dlock_parse_duration("0", &v), DLOCK_OK);
    assert_int_equal(v, 0);
    assert_int_equal(dlock_parse_duration("5", &v), DLOCK_EINVAL);
    assert_int_equal(dlock_parse_duration(NULL, &v), DLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(retry__backoff_within_full_jitter_bounds),
        cmocka_unit_test(retry__backoff_spreads),
        cmocka_unit_test(retry__backoff_degenerate_bounds),
        cmocka_unit_test(watchdog__heap_orders_by_due),
        cmocka_unit_test(watchdog__heap_reserve_means_no_growth),
        cmocka_unit_test(errors__every_code_has_text_and_name),
        cmocka_unit_test(errors__cap_names),
        cmocka_unit_test(errors__redact_replaces_every_occurrence),
        cmocka_unit_test(util__segment_escapes),
        cmocka_unit_test(util__segment_hashes_long_names),
        cmocka_unit_test(util__sha256v_equals_one_buffer),
        cmocka_unit_test(util__utf8_validation),
        cmocka_unit_test(util__uuid_is_v4),
        cmocka_unit_test(registry__checks_tables),
        cmocka_unit_test(backend__tables_v2_layout_frozen),
        cmocka_unit_test(registry__modes_without_connecting),
        cmocka_unit_test(client__open_errors_are_clear),
        cmocka_unit_test(client__options_version_1_accepted),
        cmocka_unit_test(client__default_uri_from_env),
        cmocka_unit_test(client__duration_parse),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
