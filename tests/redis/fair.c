/*
 * fair.c: mode=fair (backends/redis/fair.c) against a real redis-server
 * started by tests/servers/with-servers.sh; run with
 * --uri '$DLOCK_TEST_REDIS_URI?mode=fair'.
 *
 *   arrival order   8 processes that start waiting ~50 ms apart (each
 *                   seen in the queue before the next starts) are granted
 *                   in that order; each writes its own grant and release
 *                   times (CLOCK_MONOTONIC) to a log, which also shows no
 *                   two holds overlapping; dlock_inspect() counts the 8.
 *   interop         Redisson's own RFairLock scripts, sent with EVAL from
 *                   threads here (each subscribed to its own channel, as
 *                   a Java waiter is), and dlock waiters queue in one line
 *                   and are granted alternately, in arrival order.
 *   stopped waiter  a waiter SIGSTOPped for four times wait_time keeps
 *                   its place (the next waiter is not granted), and is
 *                   skipped once it is SIGKILLed.
 *   clock=server    a waiter's timeout is the server's TIME plus the
 *                   lock's pttl and wait_time.
 *   no keys left    after a try, a timed-out wait and every release, the
 *                   queue and the timeout set are gone.
 *   bad URIs        wait_time= and clock= values, and combinations the
 *                   mode refuses, get a message naming the parameter.
 *
 * Timing bounds are generous: they check what happens and in which order,
 * never how fast.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

/* The queue's first entry into out ("" if none). */
static void first_waiter(redisContext *rc, const char *name, char *out,
                         size_t cap)
{
    redisReply *r = redisCommand(rc, "LINDEX redisson_lock_queue:{%s} 0",
                                 name);
    assert_non_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* Wait until the queue of name has n entries; false after ms. */
static bool queue_reaches(redisContext *rc, const char *name, long long n,
                          uint32_t ms)
{
    int64_t end = h_now_ms() + ms;

    while (rint_(rc, "LLEN redisson_lock_queue:{%s}", name) < n)
        if (h_now_ms() > end)
            return false;
        else
            h_sleep_ms(2);
    return true;
}

/* Neither the queue nor the timeout set of name exists. */
static void no_queue_keys(redisContext *rc, const char *name)
{
    assert_int_equal(rint_(rc, "EXISTS redisson_lock_queue:{%s} "
                               "redisson_lock_timeout:{%s}",
                           name, name),
                     0);
}

/* ---- arrival order ----------------------------------------------------------- */

static void fair__grants_follow_arrival_8_processes(void **state)
{
    const char *name = h_name("order");
    dlock_client *c = h_client(uri);
    dlock_lock *h = rt_lock(c, name, 0);
    redisContext *rc = raw();
    char log[300];
    pid_t pid[NPROC];
    dlock_state st = DLOCK_STATE_INIT;

    (void)state;
    snprintf(log, sizeof log, "%s/order.log", h_scratch());
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    for (int i = 0; i < NPROC; i++) {
        int64_t t = h_now_ms();
        pid[i] = rt_spawn_waiter(uri, name, log, i, 0, 20);
        /* In line before the next one starts, and 50 ms apart. */
        assert_true(queue_reaches(rc, name, i + 1, 10000));
        while (h_now_ms() - t < 50)
            h_sleep_ms(5);
    }
    /* dlock inspect counts the queue. */
    assert_int_equal(dlock_inspect(c, name, &st), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.waiters, NPROC);
    assert_int_equal(dlock_release(h), DLOCK_OK);
    for (int i = 0; i < NPROC; i++)
        assert_int_equal(h_wait(pid[i]), 0);
    rt_check_arrival_order(log, NPROC);
    no_queue_keys(rc, name);
    redisFree(rc);
    dlock_lock_free(h);
    dlock_client_close(c);
}

/* ---- interop with Redisson's scripts ----------------------------------------- */

/* RedissonFairLock.tryLockInnerAsync (EVAL_LONG), as Redisson sends it.
 * KEYS: name, queue, timeouts. ARGV: lease, field, threadWaitTime, now. */
static const char redisson_fair_lock[] =
    "while true do "
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
    "if firstThreadId2 == false then break;end;"
    "local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));"
    "if timeout <= tonumber(ARGV[4]) then "
    "redis.call('zrem', KEYS[3], firstThreadId2);"
    "redis.call('lpop', KEYS[2]);"
    "else break;end;"
    "end;"
    "if (redis.call('exists', KEYS[1]) == 0) "
    "and ((redis.call('exists', KEYS[2]) == 0) "
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "
    "redis.call('lpop', KEYS[2]);"
    "redis.call('zrem', KEYS[3], ARGV[2]);"
    "local keys = redis.call('zrange', KEYS[3], 0, -1);"
    "for i = 1, #keys, 1 do "
    "redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);"
    "end;"
    "redis.call('hset', KEYS[1], ARGV[2], 1);"
    "redis.call('pexpire', KEYS[1], ARGV[1]);"
    "return nil;"
    "end;"
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2],1);"
    "redis.call('pexpire', KEYS[1], ARGV[1]);"
    "return nil;"
    "end;"
    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]);"
    "if timeout ~= false then "
    "return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);"
    "end;"
    "local lastThreadId = redis.call('lindex', KEYS[2], -1);"
    "local ttl;"
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] then "
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - "
    "tonumber(ARGV[4]);"
    "else "
    "ttl = redis.call('pttl', KEYS[1]);"
    "end;"
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);"
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then "
    "redis.call('rpush', KEYS[2], ARGV[2]);"
    "end;"
    "return ttl;";

/* RedissonFairLock.unlockInnerAsync. KEYS: name, queue, timeouts,
 * channel. ARGV: 0, lease, field, now. */
static const char redisson_fair_unlock[] =
    "while true do "
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
    "if firstThreadId2 == false then break;end; "
    "local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));"
    "if timeout <= tonumber(ARGV[4]) then "
    "redis.call('zrem', KEYS[3], firstThreadId2); "
    "redis.call('lpop', KEYS[2]); "
    "else break;end; "
    "end;"
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then "
    "redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
    "end; "
    "return 1; "
    "end;"
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; "
    "end; "
    "redis.call('del', KEYS[1]); "
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then "
    "redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
    "end; "
    "return 1; ";

#define JAVA_WAIT_MS "5000" /* threadWaitTime, the URI's wait_time */

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The grant order of the interop test's waiters. */
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static char order[16];
static size_t norder;

static void granted_as(char who)
{
    pthread_mutex_lock(&order_mu);
    if (norder < sizeof order - 1)
        order[norder++] = who;
    pthread_mutex_unlock(&order_mu);
}

struct java_waiter {
    const char *name;
    char who;         /* its letter in the grant order; 0: not logged */
    dlock_client *c;  /* dlock's */
    int result;
    const char *wait; /* Java's threadWaitTime in ms */
};

/* Wait for a message on sub for up to ms. */
static void sub_wait(redisContext *sub, int ms)
{
    struct pollfd p = {sub->fd, POLLIN, 0};
    void *r = NULL;

    if (redisGetReplyFromReader(sub, &r) == REDIS_OK && r != NULL) {
        freeReplyObject(r);
        return;
    }
    if (poll(&p, 1, ms) > 0 && redisBufferRead(sub) == REDIS_OK &&
        redisGetReplyFromReader(sub, &r) == REDIS_OK && r != NULL)
        freeReplyObject(r);
}

/* A Java RFairLock waiter: its channel subscribed, then Redisson's lock
 * script until it answers nil, waiting for its message in between. */
static void *java_main(void *arg)
{
    struct java_waiter *w = arg;
    redisContext *rc = raw(), *sub = raw();
    char field[64], q[300], t[300], ch[300], lease[] = "30000", now[24];
    redisReply *r;
    int64_t end = h_now_ms() + 20000;

    snprintf(field, sizeof field, "6f2c1e4a-java-%c:%d", w->who, 40 + w->who);
    snprintf(q, sizeof q, "redisson_lock_queue:{%s}", w->name);
    snprintf(t, sizeof t, "redisson_lock_timeout:{%s}", w->name);
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", w->name);
    r = redisCommand(sub, "SUBSCRIBE %s:%s", ch, field);
    freeReplyObject(r);
    w->result = -1;
    while (h_now_ms() < end) {
        snprintf(now, sizeof now, "%lld", wall_ms());
        r = redisCommand(rc, "EVAL %s 3 %s %s %s %s %s %s %s",
                         redisson_fair_lock, w->name, q, t, lease, field,
                         w->wait, now);
        if (r == NULL)
            break;
        if (r->type == REDIS_REPLY_NIL) {
            freeReplyObject(r);
            w->result = 0;
            break;
        }
        long long ttl = r->type == REDIS_REPLY_INTEGER ? r->integer : 100;
        freeReplyObject(r);
        sub_wait(sub, ttl > 0 && ttl < 200 ? (int)ttl : 200);
    }
    if (w->result == 0) {
        granted_as(w->who);
        h_sleep_ms(30);
        snprintf(now, sizeof now, "%lld", wall_ms());
        r = redisCommand(rc, "EVAL %s 4 %s %s %s %s 0 %s %s %s",
                         redisson_fair_unlock, w->name, q, t, ch, lease,
                         field, now);
        if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            w->result = -2;
        if (r != NULL)
            freeReplyObject(r);
    }
    redisFree(sub);
    redisFree(rc);
    return NULL;
}

static void *dlock_main(void *arg)
{
    struct java_waiter *w = arg;
    dlock_lock *lk = NULL;

    w->result = dlock_lock_new(&lk, w->c, w->name, NULL);
    if (w->result == DLOCK_OK &&
        (w->result = dlock_acquire(lk, 20000)) == DLOCK_OK) {
        if (w->who != 0)
            granted_as(w->who);
        h_sleep_ms(30);
        w->result = dlock_release(lk);
    }
    dlock_lock_free(lk);
    return NULL;
}

/*
 * Start each waiter in a thread of its own, each in the queue before the
 * next (lower-case letters run Redisson's scripts, upper-case ones are
 * dlock's), keep h held ms more, release it, and check that the grants
 * came in the order want and that the queue is gone.
 */
static void line_up(redisContext *rc, const char *name, dlock_lock *h,
                    struct java_waiter *w, int n, uint32_t ms, const char *want)
{
    pthread_t th[8];

    assert_true(n <= 8);
    norder = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(pthread_create(&th[i], NULL,
                                        islower((unsigned char)w[i].who)
                                            ? java_main
                                            : dlock_main,
                                        &w[i]),
                         0);
        assert_true(queue_reaches(rc, name, i + 1, 10000));
    }
    h_sleep_ms(ms);
    assert_int_equal(dlock_release(h), DLOCK_OK);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].result, 0);
    }
    order[norder] = '\0';
    assert_string_equal(order, want);
    norder = 0;
    no_queue_keys(rc, name);
}

static void fair__redisson_scripts_and_dlock_share_one_queue(void **state)
{
    const char *name = h_name("interop");
    const char *u = h_uri_with("wait_time=" JAVA_WAIT_MS "ms");
    dlock_client *c = h_client(u), *c2 = h_client(u);
    dlock_lock *h = rt_lock(c, name, 0);
    redisContext *rc = raw();
    struct java_waiter w[4] = {{name, 'a', c2, -9, JAVA_WAIT_MS},
                          {name, 'B', c2, -9, JAVA_WAIT_MS},
                          {name, 'c', c2, -9, JAVA_WAIT_MS},
                          {name, 'D', c2, -9, JAVA_WAIT_MS}};

    (void)state;
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    line_up(rc, name, h, w, 4, 0, "aBcD");
    assert_int_equal(rint_(rc, "EXISTS %s", name), 0);
    redisFree(rc);
    dlock_lock_free(h);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/*
 * Redisson's timeouts run out while a holder renews its lock: the first
 * waiter (Java) outlives its timeout, and each Java grant takes
 * threadWaitTime off every timeout. dlock's scripts keep a subscribed
 * first waiter's timeout ahead, and dlock waiters keep theirs at
 * Redisson's estimate for their place, so nobody is evicted and the
 * grants follow arrival.
 */
static void fair__java_timeouts_and_grants_keep_the_line(void **state)
{
    const char *name = h_name("javaline");
    const char *u = h_uri_with("wait_time=1000ms");
    dlock_client *c = h_client(u), *c2 = h_client(u);
    dlock_lock *h = rt_lock(c, name, 600);
    redisContext *rc = raw();
    struct java_waiter w[3] = {{name, 'a', c2, -9, "1000"},
                          {name, 'B', c2, -9, "1000"},
                          {name, 'C', c2, -9, "1000"}};

    (void)state;
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    /* Held 3.5 s more: past every timeout Redisson wrote (the holder's
     * 600 ms plus one wait per place). */
    line_up(rc, name, h, w, 3, 3500, "aBC");
    redisFree(rc);
    dlock_lock_free(h);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/* ---- a stopped waiter ---------------------------------------------------------- */

#define WAIT_TIME_MS 500

/*
 * The holder's lease is short (600 ms, renewed by its watchdog), so the
 * stopped waiter's first timeout (the lock's pttl + wait_time, Redisson's
 * rule) is ~1.1 s away: the 2 s it stays stopped after the release are
 * well past it, where Redisson's scripts would skip it.
 */
static void fair__stopped_waiter_keeps_place_killed_is_skipped(void **state)
{
    const char *name = h_name("stopped");
    const char *u = h_uri_with("wait_time=500ms");
    dlock_client *c = h_client(u);
    dlock_lock *h = rt_lock(c, name, 600);
    redisContext *rc = raw();
    char log[300], first[128], still[128];
    int idx[4];
    uint64_t from[4], to[4];
    pid_t w1, w2;
    int64_t killed;

    (void)state;
    snprintf(log, sizeof log, "%s/stopped.log", h_scratch());
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    w1 = rt_spawn_waiter(u, name, log, 1, 0, 20);
    assert_true(queue_reaches(rc, name, 1, 10000));
    first_waiter(rc, name, first, sizeof first);
    kill(w1, SIGSTOP);
    w2 = rt_spawn_waiter(u, name, log, 2, 0, 20);
    assert_true(queue_reaches(rc, name, 2, 10000));
    assert_int_equal(dlock_release(h), DLOCK_OK);
    /* Stopped four times wait_time: it keeps its place; nobody holds. */
    h_sleep_ms(4 * WAIT_TIME_MS);
    assert_int_equal(rt_read_log(log, idx, from, to, 4), 0);
    first_waiter(rc, name, still, sizeof still);
    assert_string_equal(still, first);
    assert_int_equal(rint_(rc, "LLEN redisson_lock_queue:{%s}", name), 2);
    /* Dead: skipped once its timeout passes (wait_time after the last
     * re-arm), and the next waiter is granted. */
    kill(w1, SIGKILL);
    killed = h_now_ms();
    assert_int_equal(h_wait(w1), 128 + SIGKILL);
    assert_int_equal(h_wait(w2), 0);
    assert_true(h_now_ms() - killed < 10 * WAIT_TIME_MS);
    assert_int_equal(rt_read_log(log, idx, from, to, 4), 1);
    assert_int_equal(idx[0], 2);
    no_queue_keys(rc, name);
    redisFree(rc);
    dlock_lock_free(h);
    dlock_client_close(c);
}

/* ---- clock=server ---------------------------------------------------------------- */

/* The server's TIME in ms. */
static long long server_ms(redisContext *rc)
{
    redisReply *r = rcmd(rc, "TIME");
    long long ms;

    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* With clock=server the scripts read TIME: a waiter joining behind a
 * lock with 1 s left gets the timeout TIME + 1 s + wait_time (2 s). */
static void fair__server_clock_sets_timeouts_from_time(void **state)
{
    const char *name = h_name("clock");
    const char *u = h_uri_with("clock=server&wait_time=2s");
    dlock_client *c = h_client(u), *c2 = h_client(u);
    dlock_lock *h = rt_lock(c, name, 1000);
    redisContext *rc = raw();
    struct java_waiter w = {name, 0, c2, -9, NULL}; /* 0: not logged */
    char first[128];
    long long t0, t1, score;
    redisReply *r;
    pthread_t th;

    (void)state;
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    t0 = server_ms(rc);
    assert_int_equal(pthread_create(&th, NULL, dlock_main, &w), 0);
    assert_true(queue_reaches(rc, name, 1, 10000));
    t1 = server_ms(rc);
    first_waiter(rc, name, first, sizeof first);
    r = rcmd(rc, "ZSCORE redisson_lock_timeout:{%s} %s", name, first);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    score = atoll(r->str);
    freeReplyObject(r);
    /* The lock's pttl was at most 1 s and at least what a third of a
     * lease (the watchdog's renewal) leaves. */
    assert_true(score >= t0 + 2000 + 1000 / 3 - 50);
    assert_true(score <= t1 + 2000 + 1000);
    assert_int_equal(dlock_release(h), DLOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(w.result, DLOCK_OK);
    no_queue_keys(rc, name);
    redisFree(rc);
    dlock_lock_free(h);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/* ---- no keys left -------------------------------------------------------------- */

static void fair__try_and_timeout_leave_no_queue_keys(void **state)
{
    const char *name = h_name("left");
    dlock_client *c = h_client(uri), *c2 = h_client(uri);
    dlock_lock *h = rt_lock(c, name, 0), *t = rt_lock(c2, name, 0);
    redisContext *rc = raw();

    (void)state;
    assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(t), DLOCK_EBUSY);
    no_queue_keys(rc, name);
    assert_int_equal(dlock_acquire(t, 300), DLOCK_ETIMEDOUT);
    no_queue_keys(rc, name);
    assert_int_equal(dlock_release(h), DLOCK_OK);
    /* The lock is free and nobody waits: the next try takes it. */
    assert_int_equal(dlock_try_acquire(t), DLOCK_OK);
    assert_int_equal(dlock_release(t), DLOCK_OK);
    no_queue_keys(rc, name);
    assert_int_equal(rint_(rc, "EXISTS %s", name), 0);
    redisFree(rc);
    dlock_lock_free(t);
    dlock_lock_free(h);
    dlock_client_close(c2);
    dlock_client_close(c);
}

/* ---- bad URIs ------------------------------------------------------------------ */

static void fair__bad_uris_name_the_parameter(void **state)
{
    static const struct {
        const char *params, *want;
    } bad[] = {
        {"wait_time=50ms", "wait_time"},
        {"wait_time=25h", "wait_time"},
        {"wait_time=soon", "wait_time"},
        {"wait_time=", "wait_time"},
        {"clock=moon", "clock"},
        {"clock=server&mode=hash", "clock: only for mode=fair"},
        {"wait_time=1s&mode=setnx", "wait_time: only for mode=fair"},
        {"redlock=1", "mode: fair cannot be combined with redlock"},
        {"sync_replicas=1", "sync_replicas"},
        {"cluster=1", "cluster: mode=fair is not supported"},
    };
    char u[1024];

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *base = getenv("DLOCK_TEST_REDIS_URI");

        /* mode=fair first; a later mode= is a repeat, so those cases
         * name their own mode instead. */
        snprintf(u, sizeof u, "%s?%s%s", base,
                 strstr(bad[i].params, "mode=") ? "" : "mode=fair&",
                 bad[i].params);
        rt_expect_refused(u, bad[i].want);
    }
}

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {{"wait", rt_wait_child},
                                          {NULL, NULL}};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fair__bad_uris_name_the_parameter),
        cmocka_unit_test(fair__try_and_timeout_leave_no_queue_keys),
        cmocka_unit_test(fair__grants_follow_arrival_8_processes),
        cmocka_unit_test(fair__redisson_scripts_and_dlock_share_one_queue),
        cmocka_unit_test(fair__java_timeouts_and_grants_keep_the_line),
        cmocka_unit_test(fair__stopped_waiter_keeps_place_killed_is_skipped),
        cmocka_unit_test(fair__server_clock_sets_timeouts_from_time),
    };
    int rc;

    h_child_dispatch(argc, argv, roles);
    uri = h_setup(argc, argv);
    rc = cmocka_run_group_tests_name("redis/fair", tests, NULL, NULL);
    h_cleanup();
    return rc;
}
