/*
 * queue.c: mode=queue (backends/redis/queue.c) against a real
 * redis-server started by tests/servers/with-servers.sh; run with
 * --uri '$DLOCK_TEST_REDIS_URI?mode=queue'.
 *
 *   arrival order   8 processes that start waiting ~30 ms apart (each
 *                   seen in the queue before the next starts) are granted
 *                   in that order, one holder at a time (their own
 *                   CLOCK_MONOTONIC logs); dlock_inspect() counts them.
 *   no round trip   a waiter handed the lock by the holder's release sends
 *                   no command for it: MONITOR sees one EVALSHA on the
 *                   lock's keys between the waiter queued and its acquire
 *                   returned, the release's.
 *   killed waiter   a waiter SIGKILLed while queued (its lease 30 s) is
 *                   skipped: the next waiter is granted at the release.
 *   expired holder  a holder SIGKILLed (lease 1 s) announces nothing; the
 *                   waiter is granted once its lease runs out.
 *   give-up race    waiters whose deadline falls on the release, 40 times
 *                   at shifting offsets: either granted, or the lock is
 *                   free and the line empty at once (never handed to a
 *                   waiter that has gone).
 *   broken waiter   a waiter whose session was killed cannot leave the
 *                   line; once its acquire gave up, its channel is
 *                   unsubscribed at once, and the release skips it.
 *   bad URIs        combinations the mode refuses name the parameter.
 *
 * Timing bounds are generous: they check what happens and in which order,
 * never how fast.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "../conformance/harness.h"
#include "rtest.h"

#define NPROC 8

static const char *uri;

/* ---- helpers ---------------------------------------------------------------- */

/* dlock_inspect's view of name. */
static dlock_state look(dlock_client *c, const char *name)
{
    dlock_state st = DLOCK_STATE_INIT;

    assert_int_equal(dlock_inspect(c, name, &st), DLOCK_OK);
    return st;
}

/* Wait until n waiters are in name's line; false after ms. */
static bool line_reaches(dlock_client *c, const char *name, uint32_t n,
                         uint32_t ms)
{
    int64_t end = h_now_ms() + ms;

    while (look(c, name).waiters < (int)n)
        if (h_now_ms() > end)
            return false;
        else
            h_sleep_ms(2);
    return true;
}

/* How many waiters' grant channels of name have a subscriber. */
static size_t grant_channels(redisContext *rc, const char *name)
{
    redisReply *r = rcmd(rc, "PUBSUB CHANNELS dlock:{%s}:q:grant:*", name);
    size_t n;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    n = r->elements;
    freeReplyObject(r);
    return n;
}

/* Wait until at most n of them are left; false after ms. */
static bool channels_fall_to(const char *name, size_t n, uint32_t ms)
{
    redisContext *rc = raw();
    int64_t end = h_now_ms() + ms;
    bool ok;

    while (!(ok = grant_channels(rc, name) <= n) && h_now_ms() <= end)
        h_sleep_ms(2);
    redisFree(rc);
    return ok;
}

/* ---- a waiting process -------------------------------------------------------- */

/* args: uri, name. Takes the lock with a 1 s lease (renewed by the
 * watchdog), then sleeps until killed (at most a minute). */
static int hold_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = 1000;
    if (c == NULL || dlock_lock_new(&lk, c, args[1], &o) != DLOCK_OK ||
        dlock_acquire(lk, 5000) != DLOCK_OK)
        return 3;
    for (int i = 0; i < 600; i++)
        h_sleep_ms(100);
    return 0;
}

/* ---- arrival order ------------------------------------------------------------ */

static void queue__grants_follow_arrival_8_processes(void **state)
{
    const char *name = h_name("order");
    dlock_client *c = h_client(uri);
    dlock_lock *h = rt_lock(c, name, 0);
    redisContext *rc = raw();
    char log[300];
    pid_t pid[NPROC];

    (void)state;
    snprintf(log, sizeof log, "%s/order.log", h_scratch());
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    for (int i = 0; i < NPROC; i++) {
        int64_t t = h_now_ms();
        pid[i] = rt_spawn_waiter(uri, name, log, i, 30000, 10);
        assert_true(line_reaches(c, name, (uint32_t)i + 1, 10000));
        while (h_now_ms() - t < 30)
            h_sleep_ms(5);
    }
    assert_int_equal(look(c, name).held, 1);
    assert_int_equal(dlock_release(h), DLOCK_OK);
    for (int i = 0; i < NPROC; i++)
        assert_int_equal(h_wait(pid[i]), 0);
    rt_check_arrival_order(log, NPROC);
    /* The line's list went with its last entry. */
    assert_int_equal(rint_(rc, "EXISTS dlock:{%s}:q:line dlock:{%s}:q",
                           name, name),
                     0);
    redisFree(rc);
    dlock_lock_free(h);
    dlock_client_close(c);
}

/* ---- no round trip after the hand-off -------------------------------------------- */

static void queue__handoff_sends_no_command_after_the_wake(void **state)
{
    const char *name = h_name("mon");
    dlock_client *c = h_client(uri), *c2 = h_client(uri);
    dlock_lock *h = rt_lock(c, name, 60000);
    struct waiter w = {rt_lock(c2, name, 60000), 10000, -99, 0};
    redisContext *mon = raw(), *rc = raw();
    char key[256], marker[64];
    redisReply *r;
    pthread_t th;
    int evals = 0, lines = 0;
    bool seen = false;

    (void)state;
    snprintf(key, sizeof key, "\"dlock:{%s}:q\"", name);
    snprintf(marker, sizeof marker, "end-of-%s", name);
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
    assert_true(line_reaches(c, name, 1, 10000));
    r = rcmd(mon, "MONITOR");
    freeReplyObject(r);
    assert_int_equal(dlock_release(h), DLOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
    freeReplyObject(rcmd(rc, "ECHO %s", marker));
    /* Every command on the server since MONITOR, up to the marker: the
     * scripts on this lock's keys are the holder's release alone. */
    while (!seen && lines < 100000) {
        r = NULL;
        assert_int_equal(redisGetReply(mon, (void **)&r), REDIS_OK);
        if (r->type == REDIS_REPLY_STATUS) {
            lines++;
            if (strstr(r->str, marker) != NULL)
                seen = true;
            else if ((strstr(r->str, "\"EVALSHA\"") != NULL ||
                      strstr(r->str, "\"EVAL\"") != NULL) &&
                     strstr(r->str, key) != NULL)
                evals++;
        }
        freeReplyObject(r);
    }
    assert_true(seen);
    assert_int_equal(evals, 1);
    assert_int_equal(dlock_release(w.lk), DLOCK_OK);
    redisFree(mon);
    redisFree(rc);
    dlock_lock_free(w.lk);
    dlock_lock_free(h);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/* ---- a killed waiter, an expired holder ----------------------------------------- */

static void queue__killed_waiter_is_skipped(void **state)
{
    const char *name = h_name("killed");
    dlock_client *c = h_client(uri);
    dlock_lock *h = rt_lock(c, name, 0);
    char log[300];
    int idx[4];
    uint64_t from[4], to[4];
    pid_t w1, w2;
    int64_t t;

    (void)state;
    snprintf(log, sizeof log, "%s/killed.log", h_scratch());
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    w1 = rt_spawn_waiter(uri, name, log, 1, 30000, 10);
    assert_true(line_reaches(c, name, 1, 10000));
    w2 = rt_spawn_waiter(uri, name, log, 2, 30000, 10);
    assert_true(line_reaches(c, name, 2, 10000));
    assert_false(channels_fall_to(name, 1, 0)); /* w1 and w2 subscribed */
    kill(w1, SIGKILL);
    assert_int_equal(h_wait(w1), 128 + SIGKILL);
    /* Dead to the server too: Redis drops w1's subscription when it reads
     * the closed connection, in its own time, and a release before that
     * hands the lock to w1 for a lease (the documented limit, queue.c).
     * Only w2's channel left: this also waits out the holder's own, which
     * its client keeps subscribed for pubsub.c's linger (about 2 s). */
    assert_true(channels_fall_to(name, 1, 5000));
    t = h_now_ms();
    assert_int_equal(dlock_release(h), DLOCK_OK);
    assert_int_equal(h_wait(w2), 0);
    /* Not after w1's 30 s lease: at the release. */
    assert_true(h_now_ms() - t < 10000);
    assert_int_equal(rt_read_log(log, idx, from, to, 4), 1);
    assert_int_equal(idx[0], 2);
    dlock_lock_free(h);
    dlock_client_close(c);
}

static void queue__expired_holder_passes_to_the_line(void **state)
{
    const char *name = h_name("expired");
    dlock_client *c = h_client(uri);
    dlock_lock *w = rt_lock(c, name, 0);
    pid_t holder;
    int64_t t;

    (void)state;
    holder = h_spawn("hold", uri, name, NULL);
    for (t = h_now_ms(); look(c, name).held == 0;) {
        assert_true(h_now_ms() - t < 10000);
        h_sleep_ms(5);
    }
    kill(holder, SIGKILL);
    assert_int_equal(h_wait(holder), 128 + SIGKILL);
    t = h_now_ms();
    /* Nobody announces the expiry: the waiter wakes at the lock's PTTL
     * (≤ 1 s) and is granted then, well before its 15 s deadline. */
    assert_int_equal(dlock_acquire(w, 15000), DLOCK_OK);
    assert_true(h_now_ms() - t < 8000);
    assert_int_equal(dlock_release(w), DLOCK_OK);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* ---- the give-up race ------------------------------------------------------------ */

static void queue__giveup_race_leaves_no_stuck_lock(void **state)
{
    const char *name = h_name("race");
    dlock_client *c = h_client(uri), *c2 = h_client(uri);
    dlock_lock *h = rt_lock(c, name, 30000), *t = rt_lock(c, name, 30000);
    int granted = 0, timed_out = 0;

    (void)state;
    for (int i = 0; i < 40; i++) {
        struct waiter w = {rt_lock(c2, name, 30000), 60, -99, 0};
        pthread_t th;
        dlock_state st;

        assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
        assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
        /* The release lands near the waiter's 60 ms deadline: 40-79 ms
         * after it started (its queueing takes a round trip or two). */
        h_sleep_ms(40 + (uint32_t)(i % 40));
        assert_int_equal(dlock_release(h), DLOCK_OK);
        pthread_join(th, NULL);
        if (atomic_load(&w.rc) == DLOCK_OK) {
            granted++;
            assert_int_equal(dlock_release(w.lk), DLOCK_OK);
        } else {
            assert_int_equal(atomic_load(&w.rc), DLOCK_ETIMEDOUT);
            timed_out++;
        }
        /* Either way the lock is free now and the line empty: a try
         * takes it at once. */
        st = look(c, name);
        assert_int_equal(st.held, 0);
        assert_int_equal(st.waiters, 0);
        assert_int_equal(dlock_acquire(t, 0), DLOCK_OK);
        assert_int_equal(dlock_release(t), DLOCK_OK);
        dlock_lock_free(w.lk);
    }
    print_message("give-up race: %d granted, %d timed out\n", granted,
                  timed_out);
    dlock_lock_free(t);
    dlock_lock_free(h);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/* ---- a waiter whose session broke -------------------------------------------------- */

/* CLIENT KILL every connection of this process to the server that is not
 * subscribed (sub=0) and not rc itself: the dlock sessions, not the
 * pub/sub connection. How many. */
static int kill_sessions(redisContext *rc)
{
    redisReply *me = rcmd(rc, "CLIENT ID"), *list = rcmd(rc, "CLIENT LIST");
    char *line, *save = NULL;
    int n = 0;

    assert_int_equal(list->type, REDIS_REPLY_STRING);
    for (line = strtok_r(list->str, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        long long id = atoll(strstr(line, "id=") + 3);
        if (id == me->integer || strstr(line, " sub=0 ") == NULL ||
            strstr(line, " cmd=evalsha") == NULL)
            continue;
        freeReplyObject(rcmd(rc, "CLIENT KILL ID %lld", id));
        n++;
    }
    freeReplyObject(list);
    freeReplyObject(me);
    return n;
}

/*
 * A waiter whose session broke cannot leave the line: its entry stays.
 * Its channel must not stay subscribed after its acquire gave up, or the
 * next release hands it the lock and nobody has it for a lease (30 s).
 */
static void queue__broken_waiter_is_not_handed_the_lock(void **state)
{
    const char *name = h_name("broken");
    dlock_client *c = h_client(uri), *c2 = h_client(uri);
    dlock_lock *h = rt_lock(c, name, 30000), *t = rt_lock(c, name, 30000);
    struct waiter w = {rt_lock(c2, name, 30000), 1500, -99, 0};
    redisContext *rc = raw();
    pthread_t th;

    (void)state;
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
    assert_true(line_reaches(c, name, 1, 10000));
    /* The holder's session too (it has run a script): dlock releases
     * over a fresh one [B-CONN-2]. */
    assert_true(kill_sessions(rc) >= 1);
    pthread_join(th, NULL);
    assert_int_not_equal(atomic_load(&w.rc), DLOCK_OK);
    assert_int_equal(look(c, name).waiters, 1); /* it could not leave */
    h_sleep_ms(300); /* its process unsubscribes its channel */
    assert_int_equal(dlock_release(h), DLOCK_OK);
    /* Skipped: the lock is free for anyone. */
    assert_int_equal(dlock_acquire(t, 0), DLOCK_OK);
    assert_int_equal(dlock_release(t), DLOCK_OK);
    redisFree(rc);
    dlock_lock_free(w.lk);
    dlock_lock_free(t);
    dlock_lock_free(h);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/* ---- bad URIs ------------------------------------------------------------------ */

static void queue__bad_uris_name_the_parameter(void **state)
{
    static const struct {
        const char *params, *want;
    } bad[] = {
        {"wait_time=1s", "wait_time: only for mode=fair"},
        {"clock=server", "clock: only for mode=fair"},
        {"redlock=1", "mode: queue cannot be combined with redlock"},
        {"sync_replicas=1", "sync_replicas: not supported with mode=queue"},
        {"cluster=1", "cluster: mode=queue is not supported"},
    };
    char u[1024];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(u, sizeof u, "%s&%s", uri, bad[i].params);
        rt_expect_refused(u, bad[i].want);
    }
}

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {
        {"wait", rt_wait_child}, {"hold", hold_child}, {NULL, NULL}};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(queue__bad_uris_name_the_parameter),
        cmocka_unit_test(queue__grants_follow_arrival_8_processes),
        cmocka_unit_test(queue__handoff_sends_no_command_after_the_wake),
        cmocka_unit_test(queue__killed_waiter_is_skipped),
        cmocka_unit_test(queue__expired_holder_passes_to_the_line),
        cmocka_unit_test(queue__giveup_race_leaves_no_stuck_lock),
        cmocka_unit_test(queue__broken_waiter_is_not_handed_the_lock),
    };
    int rc;

    h_child_dispatch(argc, argv, roles);
    uri = h_setup(argc, argv);
    rc = cmocka_run_group_tests_name("redis/queue", tests, NULL, NULL);
    h_cleanup();
    return rc;
}
