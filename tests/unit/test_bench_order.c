/*
 * test_bench_order.c: the bench's judge of arrival order and hand-offs
 * (tools/bench_order.c) on small histories written by hand, so that what
 * `dlock bench` reports as "in order" and "hand-offs" is checked against
 * answers worked out on paper: a queue that serves in arrival order, a
 * releaser that barges past waiters, a waiter that gave up, and a log
 * that filled up before the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bench_results.h"

#define G(a, e) {(a), (e), 1, 0}   /* granted at e */
#define T(a, e) {(a), (e), 0, 0}   /* gave up at e */

static void judge(const struct bench_order_rec *const *logs, const size_t *n,
                  const bool *full, unsigned workers, struct bench_order *o)
{
    assert_int_equal(bench_order_judge(logs, n, full, workers, 0, 1000, o), 0);
}

/* Three workers served in arrival order: every contested grant in order,
 * every grant a hand-off. */
static void fifo(void **state)
{
    static const struct bench_order_rec a[] = {G(0, 10), G(15, 40)};
    static const struct bench_order_rec b[] = {G(5, 20), G(25, 50)};
    static const struct bench_order_rec c[] = {G(8, 30)};
    const struct bench_order_rec *logs[] = {a, b, c};
    size_t n[] = {2, 2, 1};
    bool full[] = {false, false, false};
    struct bench_order o;

    (void)state;
    judge(logs, n, full, 3, &o);
    assert_int_equal(o.grants, 5);
    assert_int_equal(o.contested, 4); /* B's last grant had nobody waiting */
    assert_int_equal(o.in_order, 4);
    assert_int_equal(o.with_previous, 4);
    assert_int_equal(o.handoffs, 4);
    assert_true(o.in_order_share == 1.0 && o.handoff_share == 1.0);
    assert_true(o.mean_waiting > 1.39 && o.mean_waiting < 1.41); /* 7 / 5 */
}

/* A takes the lock again right after each release while B and C wait
 * (C gives up at 60): two of three contested grants are inversions, one
 * grant in three a hand-off. */
static void barging(void **state)
{
    static const struct bench_order_rec a[] = {G(0, 10), G(20, 30), G(40, 50)};
    static const struct bench_order_rec b[] = {G(5, 100)};
    static const struct bench_order_rec c[] = {T(6, 60)};
    const struct bench_order_rec *logs[] = {a, b, c};
    size_t n[] = {3, 1, 1};
    bool full[] = {false, false, false};
    struct bench_order o;

    (void)state;
    judge(logs, n, full, 3, &o);
    assert_int_equal(o.grants, 4);
    assert_int_equal(o.contested, 3); /* B at 100: C gave up at 60 */
    assert_int_equal(o.in_order, 1);  /* A at 10: it arrived first */
    assert_int_equal(o.with_previous, 3);
    assert_int_equal(o.handoffs, 1);  /* A -> B */
}

/* A's log filled at 50: grants after it are not judged, since A's later
 * attempts are missing; a window with no contest has no share. */
static void full_log(void **state)
{
    static const struct bench_order_rec a[] = {G(0, 10), G(20, 30), G(40, 50)};
    static const struct bench_order_rec b[] = {G(5, 100)};
    const struct bench_order_rec *logs[] = {a, b};
    size_t n[] = {3, 1};
    bool full[] = {true, false};
    struct bench_order o;

    (void)state;
    judge(logs, n, full, 2, &o);
    assert_int_equal(o.until, 50);
    assert_int_equal(o.grants, 2);
    assert_int_equal(o.contested, 2);
    assert_int_equal(o.in_order, 1);
    assert_int_equal(bench_order_judge(logs, n, full, 2, 60, 1000, &o), 0);
    assert_int_equal(o.grants, 0);
    assert_true(o.in_order_share < 0 && o.handoff_share < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo),
        cmocka_unit_test(barging),
        cmocka_unit_test(full_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
