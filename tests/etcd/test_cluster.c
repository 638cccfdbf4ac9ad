/*
 * test_cluster.c: etcd:// on a 3-member etcd cluster on loopback
 * (`test_cluster --uri $DLOCK_TEST_ETCD3_URI`, under with-servers.sh
 * etcd3; the members' client endpoints come from
 * $DLOCK_TEST_ETCD3_ENDPOINTS, their control from $DLOCK_TEST_SERVERCTL).
 *
 * One member stopped, a follower and then the leader: the other two keep
 * a quorum, so new acquire/release cycles keep being granted with growing
 * fences, and a lock held all along stays held through more than two
 * leases (its watchdog's keepalives move to a live member) with its key
 * unchanged on the server. Two members stopped: no quorum; a new acquire
 * and a new client fail with a message that says no member answered,
 * within the URI's timeout and a small margin, and the held lock is
 * reported lost (on_lost, dlock_held() 0) once its lease can no longer be
 * kept. With the members back, granting resumes.
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

/* The URI's lease and timeout; SLACK_MS is for a machine shared by other
 * test runs. A lease of 3 s is an etcd lease of 4 s (its TTL covers
 * dlock_server_timeout_ms(lease) in whole seconds). */
#define LEASE_MS 3000
#define TIMEOUT_MS 2000
#define SLACK_MS 1500
/* The members' election timeout (tests/servers/lib.sh). A leader cut off
 * from its quorum steps down one or two of them later, and until then it
 * still renews leases: keepalives are the leader's alone, not agreed. */
#define ELECTION_MS 1000
#define PARAMS "lease=3s&timeout=2s"

static atomic_int lost_calls;
static _Atomic int64_t lost_at_ms;

static void count_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)p;
    atomic_store(&lost_at_ms, h_now_ms());
    fprintf(stderr, "  on_lost (%s): %s\n", dlock_err_name(code), why);
    atomic_fetch_add(&lost_calls, 1);
}

/* $DLOCK_TEST_SERVERCTL ACTION etcd3 INDEX: 0 on success. */
static int ctl(const char *action, int index)
{
    const char *sh = getenv("DLOCK_TEST_SERVERCTL");
    char cmd[1024];
    int rc;

    if (sh == NULL)
        return -1;
    snprintf(cmd, sizeof cmd, "'%s' %s etcd3 %d", sh, action, index);
    rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "  %s: exit %d\n", cmd, rc);
    return rc;
}

/* The member (1-3) that leads now, from `etcdctl endpoint status` of each
 * member (its own id against the leader it names); 0 when none says. */
static int leader(void)
{
    const char *eps = getenv("DLOCK_TEST_ETCD3_ENDPOINTS");
    char list[512], *save = NULL;
    int i = 0;

    if (eps == NULL)
        return 0;
    snprintf(list, sizeof list, "%s", eps);
    for (char *ep = strtok_r(list, ",", &save); ep != NULL;
         ep = strtok_r(NULL, ",", &save)) {
        char cmd[600], out[2048] = "";
        unsigned long long me = 0, lead = 1;
        const char *p;
        size_t n;
        FILE *f;

        i++;
        snprintf(cmd, sizeof cmd,
                 "ETCDCTL_API=3 timeout 10 etcdctl --endpoints %s endpoint "
                 "status -w json 2>/dev/null",
                 ep);
        if ((f = popen(cmd, "r")) == NULL)
            continue;
        n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        pclose(f);
        if ((p = strstr(out, "\"member_id\":")) != NULL)
            me = strtoull(p + strlen("\"member_id\":"), NULL, 10);
        if ((p = strstr(out, "\"leader\":")) != NULL)
            lead = strtoull(p + strlen("\"leader\":"), NULL, 10);
        if (me == lead)
            return i;
    }
    return 0;
}

/* Cycles on lk for at least ms (and at least 5): each granted within the
 * acquire timeout with a fence above the last; then the held lock (unless
 * NULL) is still held, renewed, and its key on the server is the one
 * granted. */
static void keep_locking(const char *what, dlock_lock *lk, uint64_t *fence,
                         dlock_lock *held, dlock_client *look,
                         int64_t ms)
{
    int64_t end = h_now_ms() + ms;
    dlock_state st = DLOCK_STATE_INIT;
    int n = 0;

    while (n < 5 || h_now_ms() < end) {
        int64_t t0 = h_now_ms();
        int rc = dlock_acquire(lk, 15000);

        if (rc != DLOCK_OK)
            fail_msg("%s: cycle %d: %s: %s", what, n, dlock_err_name(rc),
                     dlock_lock_errmsg(lk));
        if (dlock_fence(lk) <= *fence)
            fail_msg("%s: cycle %d: fence %llu after %llu", what, n,
                     (unsigned long long)dlock_fence(lk),
                     (unsigned long long)*fence);
        if (n == 0)
            fprintf(stderr, "  %s: first grant after %lld ms\n", what,
                    (long long)(h_now_ms() - t0));
        *fence = dlock_fence(lk);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        n++;
        h_sleep_ms(100);
    }
    fprintf(stderr, "  %s: %d cycles in %lld ms\n", what, n,
            (long long)(ms + h_now_ms() - end));
    if (held == NULL)
        return;
    if (!dlock_held(held))
        fail_msg("%s: the lock held all along is no longer held", what);
    assert_int_equal(atomic_load(&lost_calls), 0);
    assert_int_equal(dlock_renew(held), DLOCK_OK);
    assert_int_equal(dlock_inspect(look, dlock_lock_name(held), &st),
                     DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.fence, dlock_fence(held));
}

static void cluster__one_member_down_then_no_quorum(void **state)
{
    const char *uri = h_uri_with(PARAMS);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *a = h_client(uri), *b = h_client(uri), *late = NULL;
    char held_name[128], name[128];
    dlock_lock *held = NULL, *lk, *again;
    uint64_t fence = 0;
    int64_t t0, took, quorum_lost;
    int rc, lead, follower, other;

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    snprintf(held_name, sizeof held_name, "%s", h_name("held"));
    snprintf(name, sizeof name, "%s", h_name("cycle"));
    o.on_lost = count_lost;
    assert_int_equal(dlock_lock_new(&held, a, held_name, &o), DLOCK_OK);
    assert_int_equal(dlock_acquire(held, 10000), DLOCK_OK);
    lk = h_lock(b, name, 0, 0);
    assert_non_null(lk);

    /* A follower down: a quorum of two remains. Held through more than
     * two leases. Clients talk to the URI's first member until it fails
     * them, so that member is stopped here if it follows, or as the
     * leader next: the requests of both clients must move on. */
    lead = leader();
    assert_true(lead >= 1 && lead <= 3);
    follower = lead == 1 ? 2 : 1;
    fprintf(stderr, "  leader etcd3-%d; stopping follower etcd3-%d\n", lead,
            follower);
    assert_int_equal(ctl("stop", follower), 0);
    keep_locking("follower down", lk, &fence, held, b, 2 * LEASE_MS + 500);
    assert_int_equal(ctl("start", follower), 0);

    /* The leader down (a graceful stop hands leadership over): the same. */
    lead = leader();
    assert_true(lead >= 1 && lead <= 3);
    fprintf(stderr, "  stopping leader etcd3-%d\n", lead);
    assert_int_equal(ctl("stop", lead), 0);
    keep_locking("leader down", lk, &fence, held, b, 2 * LEASE_MS + 500);

    /* A second member down: no quorum. */
    other = lead % 3 + 1;
    fprintf(stderr, "  stopping etcd3-%d too: no quorum\n", other);
    assert_int_equal(ctl("stop", other), 0);
    quorum_lost = h_now_ms();
    /* The held lock: no keepalive works once the last member standing has
     * stepped down, so the lease the holder believes in (from the start of
     * its last renewal that worked) ends within LEASE_MS of that; on_lost
     * follows once the watchdog's renewal in flight has failed. */
    while (dlock_held(held) && h_now_ms() < quorum_lost + 3 * LEASE_MS)
        h_sleep_ms(10);
    took = h_now_ms() - quorum_lost;
    fprintf(stderr, "  held lock no longer held %lld ms after the quorum "
                    "went\n",
            (long long)took);
    assert_false(dlock_held(held));
    assert_true(took <= 2 * ELECTION_MS + LEASE_MS + 100);
    while (atomic_load(&lost_calls) == 0 &&
           h_now_ms() < quorum_lost + 2 * ELECTION_MS + LEASE_MS +
                            TIMEOUT_MS + SLACK_MS)
        h_sleep_ms(10);
    assert_int_equal(atomic_load(&lost_calls), 1);
    took = atomic_load(&lost_at_ms) - quorum_lost;
    fprintf(stderr, "  on_lost %lld ms after the quorum went\n",
            (long long)took);
    assert_true(took <= 2 * ELECTION_MS + LEASE_MS + TIMEOUT_MS + SLACK_MS);

    t0 = h_now_ms();
    rc = dlock_acquire(lk, 0);
    took = h_now_ms() - t0;
    fprintf(stderr, "  no quorum, acquire: %s after %lld ms: %s\n",
            dlock_err_name(rc), (long long)took, dlock_lock_errmsg(lk));
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(took < TIMEOUT_MS + SLACK_MS);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "etcd"));
    assert_non_null(strstr(dlock_lock_errmsg(lk), "no member"));
    /* A wait shorter than timeout=: the attempt in flight may finish. */
    t0 = h_now_ms();
    rc = dlock_acquire(lk, 1000);
    took = h_now_ms() - t0;
    fprintf(stderr, "  no quorum, acquire(1 s): %s after %lld ms\n",
            dlock_err_name(rc), (long long)took);
    assert_true(rc == DLOCK_ECONNECT || rc == DLOCK_ETIMEDOUT);
    assert_true(took < TIMEOUT_MS + SLACK_MS);
    t0 = h_now_ms();
    assert_int_equal(dlock_client_open(&late, uri, NULL), DLOCK_ECONNECT);
    took = h_now_ms() - t0;
    fprintf(stderr, "  no quorum, open after %lld ms: %s\n", (long long)took,
            dlock_client_errmsg(late));
    assert_true(took < TIMEOUT_MS + SLACK_MS);
    assert_non_null(strstr(dlock_client_errmsg(late), "no member"));
    dlock_client_close(late);
    assert_int_equal(atomic_load(&lost_calls), 1);

    /* Back to three: granting resumes, fences keep increasing. */
    assert_int_equal(ctl("start-nowait", lead), 0);
    assert_int_equal(ctl("start-nowait", other), 0);
    assert_int_equal(ctl("wait", lead), 0);
    assert_int_equal(ctl("wait", other), 0);
    keep_locking("all back", lk, &fence, NULL, b, 0);
    assert_int_equal(dlock_release(held), DLOCK_ELOST);
    /* The lost lock's key ends with its lease (etcd restarts the TTL of
     * every lease on a new leader): taken within a lease or two. */
    again = h_lock(a, held_name, 0, 0);
    t0 = h_now_ms();
    rc = dlock_acquire(again, 20000);
    if (rc != DLOCK_OK)
        fail_msg("the lost lock's name: %s", dlock_lock_errmsg(again));
    fprintf(stderr, "  the lost lock's name granted again after %lld ms\n",
            (long long)(h_now_ms() - t0));
    assert_true(dlock_fence(again) > dlock_fence(held));
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
        cmocka_unit_test(cluster__one_member_down_then_no_quorum),
    };
    int failed;

    h_setup(argc, argv);
    failed = cmocka_run_group_tests_name("etcd-cluster", tests, NULL, NULL);
    h_cleanup();
    return failed;
}
