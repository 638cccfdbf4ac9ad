/*
 * test_ensemble.c: zk:// on a 3-node ZooKeeper ensemble on loopback
 * (`test_ensemble --uri $DLOCK_TEST_ZK3_URI`, under with-servers.sh zk3).
 *
 * With one node stopped the ensemble keeps a quorum: locks keep being
 * granted, a lock held across the stop stays held (its session moves to
 * another node), and fences keep increasing. With two stopped there is no
 * quorum and the survivor refuses clients: acquiring and connecting fail
 * with DLOCK_ECONNECT and a message that says so, within the timeouts; a
 * held lock is in doubt and reported lost once the session timeout has
 * passed since the last answer. With the nodes back, granting resumes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../conformance/harness.h"
#include "zkt.h"

/* Generous for a machine shared by several test runs. */
#define SLACK_MS 3000
#define SESSION_MS 6000
#define TIMEOUT_MS 2000

static const char *base_uri;
static atomic_int lost_calls;

static void count_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)p;
    fprintf(stderr, "  on_lost (%s): %s\n", dlock_err_name(code), why);
    atomic_fetch_add(&lost_calls, 1);
}

static void ensemble__quorum_keeps_granting_then_refuses(void **state)
{
    const char *uri = h_uri_with("lease=6s&timeout=2s");
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *a = h_client(uri), *b = h_client(uri), *late = NULL;
    char held_name[128], name[128];
    dlock_lock *held = NULL, *lk, *again;
    uint64_t fence = 0;
    int64_t t0, took, quorum_lost;
    int rc;

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    snprintf(held_name, sizeof held_name, "%s", h_name("held"));
    snprintf(name, sizeof name, "%s", h_name("cycle"));
    o.on_lost = count_lost;
    assert_int_equal(dlock_lock_new(&held, a, held_name, &o), DLOCK_OK);
    assert_int_equal(dlock_acquire(held, 10000), DLOCK_OK);
    lk = h_lock(b, name, 0, 0);

    /* One node down: a majority (2 of 3) remains. */
    assert_int_equal(zkt_ctl("stop", "zk3", 1), 0);
    for (int i = 0; i < 20; i++) {
        rc = dlock_acquire(lk, 15000);
        if (rc != DLOCK_OK)
            fail_msg("cycle %d with one node down: %s", i,
                     dlock_lock_errmsg(lk));
        assert_true(dlock_fence(lk) > fence);
        fence = dlock_fence(lk);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
    }
    /* Held across the stop, renewed by the watchdog all along. */
    h_sleep_ms(2500);
    assert_true(dlock_held(held));
    assert_int_equal(atomic_load(&lost_calls), 0);
    assert_int_equal(dlock_renew(held), DLOCK_OK);

    /* Two down: no quorum, the survivor serves nobody. */
    assert_int_equal(zkt_ctl("stop", "zk3", 2), 0);
    quorum_lost = h_now_ms();
    t0 = h_now_ms();
    rc = dlock_acquire(lk, 3000);
    took = h_now_ms() - t0;
    fprintf(stderr, "  no quorum, acquire: %s after %lld ms: %s\n",
            dlock_err_name(rc), (long long)took, dlock_lock_errmsg(lk));
    assert_true(rc == DLOCK_ECONNECT || rc == DLOCK_ETIMEDOUT);
    assert_true(took < 3000 + TIMEOUT_MS + SLACK_MS);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "ZooKeeper"));
    t0 = h_now_ms();
    assert_int_equal(dlock_client_open(&late, uri, NULL), DLOCK_ECONNECT);
    fprintf(stderr, "  no quorum, open: %s\n", dlock_client_errmsg(late));
    assert_true(h_now_ms() - t0 < TIMEOUT_MS + SLACK_MS);
    assert_non_null(strstr(dlock_client_errmsg(late), "ZooKeeper"));
    dlock_client_close(late);
    /* The held lock: in doubt, then lost once the session timeout has
     * passed since the last answer; dlock_held() false by then. */
    for (int64_t end = quorum_lost + SESSION_MS + SLACK_MS + 2000;
         atomic_load(&lost_calls) == 0 && h_now_ms() < end;)
        h_sleep_ms(50);
    fprintf(stderr, "  held lock reported lost %lld ms after the quorum "
                    "went\n",
            (long long)(h_now_ms() - quorum_lost));
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_false(dlock_held(held));

    /* Back to three: granting resumes, fences keep increasing. */
    assert_int_equal(zkt_ctl("start-nowait", "zk3", 1), 0);
    assert_int_equal(zkt_ctl("start-nowait", "zk3", 2), 0);
    assert_int_equal(zkt_ctl("wait", "zk3", 1), 0);
    assert_int_equal(zkt_ctl("wait", "zk3", 2), 0);
    rc = dlock_acquire(lk, 30000);
    if (rc != DLOCK_OK)
        fail_msg("after the restart: %s", dlock_lock_errmsg(lk));
    assert_true(dlock_fence(lk) > fence);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(dlock_release(held), DLOCK_ELOST);
    again = h_lock(a, held_name, 0, 0);
    assert_int_equal(dlock_acquire(again, 30000), DLOCK_OK);
    assert_int_equal(dlock_release(again), DLOCK_OK);
    dlock_lock_free(again);
    dlock_lock_free(held);
    dlock_lock_free(lk);
    dlock_client_close(a);
    dlock_client_close(b);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ensemble__quorum_keeps_granting_then_refuses),
    };
    int failed;

    base_uri = h_setup(argc, argv);
    (void)base_uri;
    failed = cmocka_run_group_tests_name("zk-ensemble", tests, NULL, NULL);
    h_cleanup();
    return failed;
}
