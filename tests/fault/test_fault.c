/*
 * test_fault.c: core's retry loop and watchdog, driven by the fault shim
 * over a real backend (`fault --uri URI`, the same URI as the conformance
 * suite). Timing bounds here are loose on purpose: they check that things
 * happen and in which order, not how fast.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../conformance/harness.h"
#include "shim.h"

static char fault_uri[8192];
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    shim_reset();
    cl = h_client(fault_uri);
    return cl != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(cl);
    /* Core's promises, checked by the shim on every call of the test:
     * [B-SERIAL-1] (the shim aborts at once), [B-CLOSE-1] (every session
     * closed once, none with grants on it), [B-PIN-1], [B-KIND-1]. */
    assert_int_equal(atomic_load(&shim.serial_violations), 0);
    assert_int_equal(atomic_load(&shim.close_violations), 0);
    assert_int_equal(atomic_load(&shim.pin_violations), 0);
    assert_int_equal(atomic_load(&shim.kind_violations), 0);
    assert_int_equal(atomic_load(&shim.closes), atomic_load(&shim.opens));
    shim_reset();
    return 0;
}

static atomic_int lost_calls;
static atomic_int lost_code;

static void on_lost(dlock_lock *lk, int code, const char *why, void *payload)
{
    (void)lk;
    (void)payload;
    atomic_store(&lost_code, code);
    atomic_fetch_add(&lost_calls, 1);
    fprintf(stderr, "  on_lost: %s\n", why);
}

static dlock_lock *lost_lock(const char *name, uint32_t lease_ms)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = lease_ms;
    o.on_lost = on_lost;
    assert_int_equal(dlock_lock_new(&lk, cl, name, &o), DLOCK_OK);
    atomic_store(&lost_calls, 0);
    atomic_store(&lost_code, 0);
    return lk;
}

/* Wait until cond() or timeout; returns cond(). */
static bool eventually(bool (*cond)(void), uint32_t timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    while (!cond() && h_now_ms() < end)
        h_sleep_ms(10);
    return cond();
}

static bool lost_seen(void)
{
    return atomic_load(&lost_calls) > 0;
}

/* ---- the retry loop ----------------------------------------------------------- */

/* Each backend call is one attempt, the retries are core's [B-ONCE-1]: two
 * injected failures cost exactly three calls. The failure reaches the
 * handle's message with the operation named [B-ERR-1]. */
static void fault__acquire_retries_connect_errors(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("retry"), 0, 0);
    int before;

    (void)state;
    shim_fail(SHIM_ACQUIRE, DLOCK_ECONNECT, 1, 2);
    before = atomic_load(&shim.calls[SHIM_ACQUIRE]);
    assert_int_equal(dlock_acquire(lk, 10000), DLOCK_OK);
    assert_int_equal(atomic_load(&shim.calls[SHIM_ACQUIRE]) - before, 3);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    /* A try makes one attempt and reports the failure as it is. */
    shim_fail(SHIM_ACQUIRE, DLOCK_ECONNECT, 1, 1);
    assert_int_equal(dlock_try_acquire(lk), DLOCK_ECONNECT);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "injected failure"));
    assert_non_null(strstr(dlock_lock_errmsg(lk), "acquire"));
    dlock_lock_free(lk);
}

static void fault__connect_errors_until_deadline(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("deadline"), 0, 0);
    int64_t t0;

    (void)state;
    shim_fail(SHIM_ACQUIRE, DLOCK_ECONNECT, 1, 1000000);
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(lk, 500), DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 >= 450);
    assert_true(h_now_ms() - t0 < 500 + 2000);
    assert_true(atomic_load(&shim.calls[SHIM_ACQUIRE]) > 1); /* it did retry */
    shim_fail(SHIM_ACQUIRE, 0, 0, 0);
    dlock_lock_free(lk);
}

static void fault__final_errors_not_retried(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("final"), 0, 0);
    int before = atomic_load(&shim.calls[SHIM_ACQUIRE]);

    (void)state;
    shim_fail(SHIM_ACQUIRE, DLOCK_EINVAL, 1, 1);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_EINVAL);
    assert_int_equal(atomic_load(&shim.calls[SHIM_ACQUIRE]) - before, 1);
    dlock_lock_free(lk);
}

/* The backend's hint bounds the pause; the loop keeps trying until it
 * gets the lock. */
static void fault__busy_hint_then_granted(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("hint"), 0, 0);
    int before = atomic_load(&shim.calls[SHIM_ACQUIRE]);

    (void)state;
    atomic_store(&shim.busy_hint_ms, 20);
    atomic_store(&shim.busy_acquire, 5);
    assert_int_equal(dlock_acquire(lk, 10000), DLOCK_OK);
    assert_int_equal(atomic_load(&shim.calls[SHIM_ACQUIRE]) - before, 6);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
}

/* Reentrant acquires and releases make no backend call at all. */
static void fault__reentrancy_costs_no_io(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("noio"), 0, DLOCK_LOCK_NO_WATCHDOG);
    int acq, rel;

    (void)state;
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    acq = atomic_load(&shim.calls[SHIM_ACQUIRE]);
    rel = atomic_load(&shim.calls[SHIM_RELEASE]);
    for (int i = 0; i < 100; i++)
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(atomic_load(&shim.calls[SHIM_ACQUIRE]), acq);
    assert_int_equal(atomic_load(&shim.calls[SHIM_RELEASE]), rel);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(atomic_load(&shim.calls[SHIM_RELEASE]), rel + 1);
    dlock_lock_free(lk);
}

/* ---- the watchdog ---------------------------------------------------------------- */

/* Renewals come at about a third of the lease. */
static void fault__watchdog_renews_at_third_of_lease(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("third"), 900, 0);
    int before;

    (void)state;
    before = atomic_load(&shim.calls[SHIM_RENEW]);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    h_sleep_ms(2000);
    int n = atomic_load(&shim.calls[SHIM_RENEW]) - before;
    /* 2000 / 300 = 6 expected; loose bounds for a noisy machine. */
    assert_true(n >= 3);
    assert_true(n <= 12);
    assert_true(dlock_held(lk));
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
}

/* Renewals that cannot get through mark the lock lost when the lease runs
 * out, not before; the callback fires once. */
static void fault__dropped_renewals_lose_lock(void **state)
{
    dlock_lock *lk = lost_lock(h_name("dropped"), 600);
    int64_t t0;

    (void)state;
    shim_fail(SHIM_RENEW, DLOCK_ECONNECT, 1, -1);
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_true(eventually(lost_seen, 5000));
    assert_true(h_now_ms() - t0 >= 550); /* not before the lease ran out */
    assert_false(dlock_held(lk));
    assert_int_equal(atomic_load(&lost_code), DLOCK_ELOST);
    assert_true(atomic_load(&shim.calls[SHIM_RENEW]) >= 2); /* it kept trying */
    h_sleep_ms(300);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(dlock_release(lk), DLOCK_ELOST);
    shim_fail(SHIM_RENEW, 0, 0, 0);
    /* The handle can take the lock again after that release. */
    assert_int_equal(dlock_acquire(lk, 1000), DLOCK_OK);
    assert_true(dlock_held(lk));
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
}

/* A renewal that says the lock is gone marks it lost at once. */
static void fault__renewal_says_gone(void **state)
{
    dlock_lock *lk = lost_lock(h_name("gone"), 3000);
    int64_t t0;

    (void)state;
    shim_fail(SHIM_RENEW, DLOCK_ELOST, 1, -1);
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_true(eventually(lost_seen, 5000));
    assert_true(h_now_ms() - t0 < 3000); /* well before the lease end */
    assert_false(dlock_held(lk));
    assert_int_equal(atomic_load(&lost_code), DLOCK_ELOST);
    assert_int_equal(atomic_load(&shim.calls[SHIM_RENEW]), 1);
    shim_fail(SHIM_RENEW, 0, 0, 0);
    assert_int_equal(dlock_release(lk), DLOCK_ELOST);
    dlock_lock_free(lk);
}

/* A renewal that gets through only after the lease ran out (the service
 * was paused) does not revive the lock: for a while it was nobody's. */
static void fault__late_renewal_does_not_revive(void **state)
{
    dlock_lock *lk = lost_lock(h_name("late"), 600);
    uint32_t left;
    int64_t t0;

    (void)state;
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    /* Stall the first renewal (due at ~200 ms) past the lock's expiry as
     * the client measures it: the lease, or what the backend says (a
     * ZooKeeper session timeout). */
    left = dlock_lock_remaining(lk);
    assert_true(left > 0 && left < 60000);
    atomic_store(&shim.stall_renew_ms, (int)left + 300);
    assert_true(eventually(lost_seen, left + 5000));
    assert_true(h_now_ms() - t0 >= (int64_t)left - 50);
    assert_false(dlock_held(lk));
    assert_int_equal(atomic_load(&lost_code), DLOCK_ELOST);
    atomic_store(&shim.stall_renew_ms, 0);
    h_sleep_ms(300);
    assert_false(dlock_held(lk)); /* and it stays lost */
    assert_int_equal(dlock_release(lk), DLOCK_ELOST);
    dlock_lock_free(lk);
}

static bool renew_running(void)
{
    return atomic_load(&shim.in_renew) != 0;
}

/* Release waits for a renewal in flight and cancels the next: no renewal
 * follows a release, so none can resurrect the lock. The lease outlasts
 * the stalled renewal (due at 400 ms, ending at 800 ms), so on a lease
 * backend the lock is still there to renew and release. */
static void fault__release_cancels_renewal(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("cancel"), 1200, 0);
    int renews;

    (void)state;
    atomic_store(&shim.stall_renew_ms, 400);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_true(eventually(renew_running, 3000));
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_true(atomic_load(&shim.last_release) >
                atomic_load(&shim.last_renew_end));
    renews = atomic_load(&shim.calls[SHIM_RENEW]);
    h_sleep_ms(600);
    assert_int_equal(atomic_load(&shim.calls[SHIM_RENEW]), renews);
    atomic_store(&shim.stall_renew_ms, 0);
    dlock_lock_free(lk);
}

/*
 * Is lk held, or about to say so within a second? dlock_held() of a lock
 * tied to its own connection reads 0 while a reply to its renewal waits
 * unread on that connection (unread data may be a goodbye; held.c), and a
 * connection of the client that ended puts every lock in doubt until its
 * next renewal: with a session per lock and renewals going on, one of many
 * locks can be caught in such a moment. A lost lock never comes back.
 */
static bool held_soon(dlock_lock *lk)
{
    int64_t end = h_now_ms() + 1000;

    while (!dlock_held(lk)) {
        if (h_now_ms() >= end)
            return false;
        h_sleep_ms(10);
    }
    return true;
}

/* Many locks with one lease renew together, several per round trip. */
static void fault__watchdog_batches_renewals(void **state)
{
    enum { N = 64 };
    dlock_lock *lks[N];
    char name[64];
    int calls, items;

    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "%s-%d", h_name("batch"), i);
        lks[i] = h_lock(cl, name, 1500, 0);
        /* Free names, but not tries: a Redlock round that one loaded
         * machine delays past node_timeout (50 ms) reaches no majority and
         * a try says ECONNECT (seen under ASan with five tests at once);
         * a timed acquire retries it, and a free name costs no wait. */
        assert_int_equal(dlock_acquire(lks[i], 5000), DLOCK_OK);
    }
    calls = atomic_load(&shim.calls[SHIM_RENEW]);
    items = atomic_load(&shim.renewed_items);
    h_sleep_ms(1700);
    calls = atomic_load(&shim.calls[SHIM_RENEW]) - calls;
    items = atomic_load(&shim.renewed_items) - items;
    assert_true(items >= N); /* every lock renewed at least once */
    /* Renewals are grouped by session; a mode that gives each held lock
     * a session of its own (an open FOR UPDATE transaction) has nothing
     * to batch. */
    if (!(h_caps(cl) & DLOCK_CAP_SESSION_PER_LOCK))
        assert_true(items / (calls > 0 ? calls : 1) >= 4);
    for (int i = 0; i < N; i++) {
        assert_true(held_soon(lks[i]));
        assert_int_equal(dlock_release(lks[i]), DLOCK_OK);
        dlock_lock_free(lks[i]);
    }
}

static char logged[4096];
static atomic_int log_lines;

static void log_hook(int level, const char *msg, void *payload)
{
    (void)payload;
    if (level <= DLOCK_LOG_WARN) {
        snprintf(logged, sizeof logged, "%s", msg);
        atomic_fetch_add(&log_lines, 1);
    }
}

/* The client's log hook hears of a lost lock, at warning level. */
static void fault__log_hook_reports_lost_lock(void **state)
{
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;

    (void)state;
    co.log = log_hook;
    co.log_level = DLOCK_LOG_DEBUG;
    assert_int_equal(dlock_client_open(&c, fault_uri, &co), DLOCK_OK);
    o.lease_ms = 3000;
    o.on_lost = on_lost;
    assert_int_equal(dlock_lock_new(&lk, c, h_name("log"), &o), DLOCK_OK);
    atomic_store(&lost_calls, 0);
    atomic_store(&log_lines, 0);
    shim_fail(SHIM_RENEW, DLOCK_ELOST, 1, -1);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_true(eventually(lost_seen, 5000));
    assert_true(atomic_load(&log_lines) >= 1);
    assert_non_null(strstr(logged, "renew"));
    shim_fail(SHIM_RENEW, 0, 0, 0);
    assert_int_equal(dlock_release(lk), DLOCK_ELOST);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* A failed manual renewal within the lease is "in doubt", not lost. */
/* The shim fails the Nth call, or every call from the Nth on: here the
 * third acquire attempt of one timed acquire, then every attempt. */
static void fault__fail_the_nth_call(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("nth"), 0, 0);
    int before;

    (void)state;
    /* Busy twice, then the third attempt fails with a final error. */
    atomic_store(&shim.busy_acquire, 2);
    atomic_store(&shim.busy_hint_ms, 1);
    shim_fail(SHIM_ACQUIRE, DLOCK_EINVAL, 3, 1);
    before = atomic_load(&shim.calls[SHIM_ACQUIRE]);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_EINVAL);
    assert_int_equal(atomic_load(&shim.calls[SHIM_ACQUIRE]) - before, 3);
    /* From now on: every try fails, until switched off. */
    shim_fail(SHIM_ACQUIRE, DLOCK_ECONNECT, 1, -1);
    for (int i = 0; i < 5; i++)
        assert_int_equal(dlock_try_acquire(lk), DLOCK_ECONNECT);
    shim_fail(SHIM_ACQUIRE, 0, 0, 0);
    assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
}

/* Faults on opening a session and on the release. A release that fails
 * still frees the handle [B-RELEASE-1]; a session that cannot be opened
 * is an ECONNECT the acquire retries until its deadline. */
static void fault__open_and_release_faults(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("rel"), 0, 0);
    dlock_lock *other = h_lock(cl, h_name("rel2"), 0, 0);
    dlock_lock *third = h_lock(cl, h_name("rel3"), 0, 0);

    (void)state;
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    shim_fail(SHIM_RELEASE, DLOCK_ECONNECT, 1, 1);
    assert_int_equal(dlock_release(lk), DLOCK_ECONNECT);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "injected release"));
    assert_int_equal(dlock_lock_depth(lk), 0);
    assert_false(dlock_held(lk));
    /* The inner release ran: the name is free again. */
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    /* Opens fail from now on: a new client says why; this one goes on
     * with its pooled session. */
    shim_fail(SHIM_OPEN, DLOCK_ECONNECT, 1, -1);
    {
        dlock_client *c2 = NULL;
        assert_int_equal(dlock_client_open(&c2, fault_uri, NULL),
                         DLOCK_ECONNECT);
        assert_non_null(strstr(dlock_client_errmsg(c2),
                               "injected open failure"));
        dlock_client_close(c2);
    }
    assert_int_equal(dlock_acquire(other, 0), DLOCK_OK); /* pooled */
    shim_fail(SHIM_OPEN, 0, 0, 0);
    assert_int_equal(dlock_acquire(third, 1000), DLOCK_OK);
    assert_int_equal(dlock_release(third), DLOCK_OK);
    assert_int_equal(dlock_release(other), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_lock_free(other);
    dlock_lock_free(third);
}

/* The shim forwards the whole life cycle: the watchdog thread it started
 * ran the inner backend's thread_init (MySQL's needs it) through it. The
 * thread starts with the first held lock; the lease is long enough that a
 * loaded sanitizer build renews in time (600 ms was lost once there, on
 * PostgreSQL for_update, which is not what this test is about). */
static void fault__thread_init_forwarded(void **state)
{
    dlock_lock *lk = h_lock(cl, h_name("thr"), 3000, 0);

    (void)state;
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    h_sleep_ms(300); /* the watchdog runs by now */
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(cl);
    cl = h_client(fault_uri);
    assert_true(atomic_load(&shim.thread_inits) >= 1);
}

/* The shim forwards the inner mode's latch table (and the capability),
 * and every call of it goes through one session at a time [B-SERIAL-1]. */
static void fault__latch_forwarded(void **state)
{
    dlock_info info = DLOCK_INFO_INIT;
    dlock_latch *l = NULL;
    uint32_t n = 9;
    int rc;

    (void)state;
    assert_int_equal(dlock_client_info(cl, &info), DLOCK_OK);
    rc = dlock_latch_new(&l, cl, h_name("latch"));
    if (!(info.caps & DLOCK_CAP_LATCH)) {
        assert_int_equal(rc, DLOCK_EUNSUPPORTED);
        return;
    }
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(dlock_latch_set(l, 2), DLOCK_OK);
    assert_int_equal(dlock_latch_count(l, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(dlock_latch_down(l, &n), DLOCK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(dlock_latch_await(l, 50), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_latch_down(l, &n), DLOCK_OK);
    assert_int_equal(dlock_latch_await(l, 1000), DLOCK_OK);
    dlock_latch_free(l);
}

static void fault__manual_renew_reports_failure(void **state)
{
    dlock_lock *lk = lost_lock(h_name("manual"), 5000);

    (void)state;
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    shim_fail(SHIM_RENEW, DLOCK_ECONNECT, 1, -1);
    /* In doubt, not lost: the lease has not run out. */
    assert_int_equal(dlock_renew(lk), DLOCK_ECONNECT);
    assert_true(dlock_held(lk));
    assert_int_equal(atomic_load(&lost_calls), 0);
    shim_fail(SHIM_RENEW, 0, 0, 0);
    assert_int_equal(dlock_renew(lk), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(fault__acquire_retries_connect_errors,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__connect_errors_until_deadline,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__final_errors_not_retried,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__busy_hint_then_granted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(fault__reentrancy_costs_no_io, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            fault__watchdog_renews_at_third_of_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(fault__dropped_renewals_lose_lock,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__renewal_says_gone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(fault__release_cancels_renewal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(fault__late_renewal_does_not_revive,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__watchdog_batches_renewals,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__manual_renew_reports_failure,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__fail_the_nth_call, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(fault__open_and_release_faults,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__thread_init_forwarded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(fault__log_hook_reports_lost_lock,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fault__latch_forwarded, setup,
                                        teardown),
    };
    const char *inner = h_setup(argc, argv);
    int failed;

    shim_register();
    shim_uri(fault_uri, sizeof fault_uri, inner);
    failed = cmocka_run_group_tests_name("fault", tests, NULL, NULL);
    h_cleanup();
    return failed;
}
