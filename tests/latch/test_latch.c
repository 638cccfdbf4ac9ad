/*
 * test_latch.c: count-down latches (dlock_latch_*) against a real server,
 * the same cases on every backend and mode that has them:
 *
 *   test_latch --uri URI --bound-ms B
 *
 * B is how long after the last count-down an awaiting process may return:
 * the 50 ms plus slack for a loaded machine on the backends that
 * notify, the measured polling latency plus slack on the others
 * (tests/meson.build sets it per backend). The cross-process case prints
 * what it measured ("latch latency: ...") for the report.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../conformance/harness.h"

static const char *uri;
static uint32_t bound_ms = 150;

static dlock_latch *latch(dlock_client *c, const char *name)
{
    dlock_latch *l = NULL;
    int rc = dlock_latch_new(&l, c, name);

    if (rc != DLOCK_OK)
        fail_msg("latch_new(%s): %s: %s", name, dlock_err_name(rc),
                 dlock_client_errmsg(c));
    return l;
}

static void expect(dlock_latch *l, int rc, int want, const char *what)
{
    if (rc != want)
        fail_msg("%s: %s, expected %s: %s", what, dlock_err_name(rc),
                 dlock_err_name(want), dlock_latch_errmsg(l));
}

static uint32_t count_of(dlock_latch *l)
{
    uint32_t n = 12345;

    expect(l, dlock_latch_count(l, &n), DLOCK_OK, "count");
    return n;
}

/* ---- one process ------------------------------------------------------------ */

/* set, a refused second set, down to zero, at zero, and set again. */
static void latch__set_down_count(void **state)
{
    dlock_client *c = h_client(uri);
    dlock_latch *l = latch(c, h_name("latch"));
    uint32_t left = 99;
    int rc;

    (void)state;
    assert_int_equal(count_of(l), 0);
    expect(l, dlock_latch_await(l, 0), DLOCK_OK, "await at zero");
    expect(l, dlock_latch_set(l, 3), DLOCK_OK, "set 3");
    rc = dlock_latch_set(l, 5);
    expect(l, rc, DLOCK_EBUSY, "second set");
    assert_non_null(strstr(dlock_latch_errmsg(l), "count 3"));
    assert_int_equal(count_of(l), 3);
    expect(l, dlock_latch_down(l, &left), DLOCK_OK, "down");
    assert_int_equal(left, 2);
    expect(l, dlock_latch_await(l, 0), DLOCK_ETIMEDOUT, "await, counting");
    assert_non_null(strstr(dlock_latch_errmsg(l), "2"));
    expect(l, dlock_latch_down(l, NULL), DLOCK_OK, "down");
    expect(l, dlock_latch_down(l, &left), DLOCK_OK, "down");
    assert_int_equal(left, 0);
    assert_int_equal(count_of(l), 0);
    /* At zero: nothing happens. */
    expect(l, dlock_latch_down(l, &left), DLOCK_OK, "down at zero");
    assert_int_equal(left, 0);
    assert_int_equal(count_of(l), 0);
    expect(l, dlock_latch_await(l, 1000), DLOCK_OK, "await at zero");
    /* Open again: it can be set again. */
    expect(l, dlock_latch_set(l, 1), DLOCK_OK, "set again");
    assert_int_equal(count_of(l), 1);
    expect(l, dlock_latch_down(l, &left), DLOCK_OK, "down");
    assert_int_equal(left, 0);
    dlock_latch_free(l);
    dlock_client_close(c);
}

/* Bad arguments name the parameter; hostile names are just names. */
static void latch__arguments_and_names(void **state)
{
    static const char *const names[] = {
        "a/b/../../c", "{tag}x", "with space\ttab", "..", "%2F%00",
        "\xc3\xa9t\xc3\xa9", "*", "a:b:c", "-n",
    };
    dlock_client *c = h_client(uri);
    dlock_latch *l = NULL, *l2;
    char longname[DLOCK_NAME_MAX + 2];
    uint32_t n;
    int64_t t0;

    (void)state;
    assert_int_equal(dlock_latch_new(NULL, c, "x"), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_new(&l, c, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "name"));
    assert_int_equal(dlock_latch_new(&l, c, ""), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "name"));
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(dlock_latch_new(&l, c, longname), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_new(&l, c, "bad\xff"), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "UTF-8"));
    assert_null(l);

    l = latch(c, h_name("latch-args"));
    expect(l, dlock_latch_set(l, 0), DLOCK_EINVAL, "set 0");
    assert_non_null(strstr(dlock_latch_errmsg(l), "count"));
    expect(l, dlock_latch_set(l, DLOCK_LATCH_COUNT_MAX + 1u), DLOCK_EINVAL,
           "set too many");
    expect(l, dlock_latch_count(l, NULL), DLOCK_EINVAL, "count NULL");
    assert_int_equal(dlock_latch_set(NULL, 1), DLOCK_EINVAL);
    assert_int_equal(dlock_latch_await(NULL, 1), DLOCK_EINVAL);
    dlock_latch_free(NULL);
    /* A timed await on a counting latch runs out, and says so. */
    expect(l, dlock_latch_set(l, 2), DLOCK_OK, "set 2");
    t0 = h_now_ms();
    expect(l, dlock_latch_await(l, 300), DLOCK_ETIMEDOUT, "await 300 ms");
    assert_true(h_now_ms() - t0 >= 290);
    assert_true(h_now_ms() - t0 < 300 + 3000);
    dlock_latch_free(l);

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s", h_name("h"), names[i]);
        l = latch(c, name);
        l2 = latch(c, name);
        assert_string_equal(dlock_latch_name(l), name);
        expect(l, dlock_latch_set(l, 2), DLOCK_OK, name);
        expect(l2, dlock_latch_count(l2, &n), DLOCK_OK, name);
        assert_int_equal(n, 2);
        expect(l2, dlock_latch_down(l2, NULL), DLOCK_OK, name);
        expect(l2, dlock_latch_down(l2, NULL), DLOCK_OK, name);
        expect(l, dlock_latch_await(l, 2000), DLOCK_OK, name);
        dlock_latch_free(l);
        dlock_latch_free(l2);
    }
    /* A closed client's handle says so. */
    l = latch(c, h_name("latch-closed"));
    dlock_client_close(c);
    assert_int_equal(dlock_latch_count(l, &n), DLOCK_ECLOSED);
    dlock_latch_free(l);
}

/* ---- cancel ---------------------------------------------------------------- */

struct awaiter {
    dlock_latch *l;
    dlock_cancel *cx;
    int rc;
    int64_t done_ms;
};

static void *await_main(void *arg)
{
    struct awaiter *a = arg;

    a->rc = dlock_latch_await_cancellable(a->l, 10000, a->cx);
    a->done_ms = h_now_ms();
    return NULL;
}

/* A waiting await returns DLOCK_ECANCELED soon after its cancel fires,
 * and DLOCK_ECLOSED after the client's shutdown. */
static void latch__await_is_cancellable(void **state)
{
    dlock_client *c = h_client(uri);
    const char *name = h_name("latch-cancel");
    struct awaiter a = {latch(c, name), NULL, 0, 0};
    pthread_t th;
    int64_t fired;

    (void)state;
    expect(a.l, dlock_latch_set(a.l, 1), DLOCK_OK, "set");
    assert_int_equal(dlock_cancel_new(&a.cx), DLOCK_OK);
    pthread_create(&th, NULL, await_main, &a);
    h_sleep_ms(300);
    fired = h_now_ms();
    dlock_cancel_fire(a.cx);
    pthread_join(th, NULL);
    expect(a.l, a.rc, DLOCK_ECANCELED, "cancelled await");
    assert_non_null(strstr(dlock_latch_errmsg(a.l), "cancelled"));
    assert_true(a.done_ms - fired < 100 + 400);
    dlock_cancel_free(a.cx);

    a.cx = NULL;
    pthread_create(&th, NULL, await_main, &a);
    h_sleep_ms(300);
    fired = h_now_ms();
    dlock_client_shutdown(c);
    pthread_join(th, NULL);
    expect(a.l, a.rc, DLOCK_ECLOSED, "await at shutdown");
    assert_non_null(strstr(dlock_latch_errmsg(a.l), "shut down"));
    assert_true(a.done_ms - fired < 100 + 400);
    dlock_latch_free(a.l);
    dlock_client_close(c);
    /* Leave nothing counting behind. */
    c = h_client(uri);
    a.l = latch(c, name);
    expect(a.l, dlock_latch_down(a.l, NULL), DLOCK_OK, "down");
    dlock_latch_free(a.l);
    dlock_client_close(c);
}

/* ---- across processes ------------------------------------------------------- */

#define ROUNDS 5
#define AWAITERS 2
#define COUNT 3

static int lines_with(const char *path, const char *word)
{
    char line[256];
    int n = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL)
        n += strncmp(line, word, strlen(word)) == 0;
    fclose(f);
    return n;
}

/* Child: for each round, say ready, await the round's latch, log when it
 * returned. args: name prefix, log path, index. */
static int role_awaiter(char **args)
{
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    char name[200], line[128];

    for (int r = 0; r < ROUNDS; r++) {
        snprintf(name, sizeof name, "%s-%d", args[0], r);
        dlock_latch *l = latch(c, name);
        snprintf(line, sizeof line, "ready %d %s\n", r, args[2]);
        h_append(args[1], line);
        int rc = dlock_latch_await(l, 20000);
        uint64_t t = h_now_ns();
        snprintf(line, sizeof line, "done %d %s %llu %d\n", r, args[2],
                 (unsigned long long)t, rc);
        h_append(args[1], line);
        dlock_latch_free(l);
        if (rc != DLOCK_OK)
            return 1;
    }
    dlock_client_close(c);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * AWAITERS processes await a latch of COUNT; this one counts it down with
 * pauses. No awaiter returns before the last count-down started, and each
 * returns within bound_ms of it: across ROUNDS latches.
 */
static void latch__await_returns_soon_after_last_down(void **state)
{
    dlock_client *c = h_client(uri);
    char prefix[128], log[512], idx[8], line[256], name[200];
    uint64_t last_down[ROUNDS], lat[ROUNDS * AWAITERS];
    pid_t pid[AWAITERS];
    size_t nlat = 0;
    FILE *f;

    (void)state;
    snprintf(prefix, sizeof prefix, "%s", h_name("latch-x"));
    snprintf(log, sizeof log, "%s/%s.log", h_scratch(), prefix);
    for (int r = 0; r < ROUNDS; r++) {
        snprintf(name, sizeof name, "%s-%d", prefix, r);
        dlock_latch *l = latch(c, name);
        expect(l, dlock_latch_set(l, COUNT), DLOCK_OK, "set");
        dlock_latch_free(l);
    }
    for (int i = 0; i < AWAITERS; i++) {
        snprintf(idx, sizeof idx, "%d", i);
        pid[i] = h_spawn("awaiter", prefix, log, idx);
    }
    for (int r = 0; r < ROUNDS; r++) {
        char word[32];
        int64_t until = h_now_ms() + 20000;
        snprintf(word, sizeof word, "ready %d ", r);
        while (lines_with(log, word) < AWAITERS && h_now_ms() < until)
            h_sleep_ms(5);
        assert_int_equal(lines_with(log, word), AWAITERS);
        /* Let them get into the wait (subscribe, look). */
        h_sleep_ms(150);
        snprintf(name, sizeof name, "%s-%d", prefix, r);
        dlock_latch *l = latch(c, name);
        for (int k = 0; k < COUNT; k++) {
            uint32_t left;
            if (k == COUNT - 1)
                last_down[r] = h_now_ns();
            expect(l, dlock_latch_down(l, &left), DLOCK_OK, "down");
            assert_int_equal(left, (uint32_t)(COUNT - 1 - k));
            if (k < COUNT - 1)
                h_sleep_ms(30);
        }
        dlock_latch_free(l);
    }
    for (int i = 0; i < AWAITERS; i++)
        assert_int_equal(h_wait(pid[i]), 0);
    f = fopen(log, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f) != NULL) {
        int r, who, rc;
        unsigned long long t;
        if (sscanf(line, "done %d %d %llu %d", &r, &who, &t, &rc) != 4)
            continue;
        assert_int_equal(rc, DLOCK_OK);
        assert_true(r >= 0 && r < ROUNDS);
        if (t < last_down[r])
            fail_msg("round %d: awaiter %d returned %.1f ms before the "
                     "last count-down",
                     r, who, (double)(last_down[r] - t) / 1e6);
        lat[nlat++] = t - last_down[r];
    }
    fclose(f);
    assert_int_equal(nlat, ROUNDS * AWAITERS);
    qsort(lat, nlat, sizeof lat[0], cmp_u64);
    printf("latch latency: await returned %.1f ms (median) / %.1f ms "
           "(max) after the last count-down started, %zu awaits, "
           "bound %u ms\n",
           (double)lat[nlat / 2] / 1e6, (double)lat[nlat - 1] / 1e6, nlat,
           bound_ms);
    if (lat[nlat - 1] > (uint64_t)bound_ms * 1000000u)
        fail_msg("an await returned %.1f ms after the last count-down "
                 "(bound %u ms)",
                 (double)lat[nlat - 1] / 1e6, bound_ms);
    dlock_client_close(c);
}

/* Four processes count one latch of 100 down 25 times each: no count-down
 * is lost or doubled (the count ends at 0 exactly, not before the last). */
static int role_downer(char **args)
{
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    dlock_latch *l = latch(c, args[0]);
    int bad = 0;

    for (int i = 0; i < 25; i++)
        bad |= dlock_latch_down(l, NULL) != DLOCK_OK;
    dlock_latch_free(l);
    dlock_client_close(c);
    return bad;
}

static void latch__concurrent_downs_count_exactly(void **state)
{
    dlock_client *c = h_client(uri);
    const char *name = h_name("latch-many");
    dlock_latch *l = latch(c, name);
    pid_t pid[4];
    uint32_t left;

    (void)state;
    expect(l, dlock_latch_set(l, 101), DLOCK_OK, "set 101");
    for (int i = 0; i < 4; i++)
        pid[i] = h_spawn("downer", name, NULL, NULL);
    for (int i = 0; i < 4; i++)
        assert_int_equal(h_wait(pid[i]), 0);
    assert_int_equal(count_of(l), 1);
    expect(l, dlock_latch_down(l, &left), DLOCK_OK, "last down");
    assert_int_equal(left, 0);
    expect(l, dlock_latch_await(l, 1000), DLOCK_OK, "await");
    dlock_latch_free(l);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(latch__set_down_count),
        cmocka_unit_test(latch__arguments_and_names),
        cmocka_unit_test(latch__await_is_cancellable),
        cmocka_unit_test(latch__await_returns_soon_after_last_down),
        cmocka_unit_test(latch__concurrent_downs_count_exactly),
    };
    static const struct h_role roles[] = {
        {"awaiter", role_awaiter},
        {"downer", role_downer},
        {NULL, NULL},
    };
    int failed;

    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--bound-ms") == 0)
            bound_ms = (uint32_t)strtoul(argv[i + 1], NULL, 10);
    h_child_dispatch(argc, argv, roles);
    uri = h_setup(argc, argv);
    failed = cmocka_run_group_tests_name("latch", tests, NULL, NULL);
    h_cleanup();
    return failed != 0;
}
