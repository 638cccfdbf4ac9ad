/*
 * latch.c: dlock's count-down latches and Redisson's RCountDownLatch on
 * one latch (`redis_latch --uri URI` under with-servers.sh redis; URI
 * without mode=): Redisson's own scripts, sent with EVAL as a Java client
 * sends them, and its GET and SUBSCRIBE, against dlock both ways:
 *
 *   - a Java trySetCount is seen by dlock (count, a refused set), and a
 *     Java countDown to zero releases a dlock await;
 *   - a dlock set is seen by Java (its trySetCount refused, GET), and a
 *     dlock count-down to zero deletes the key and publishes Redisson's
 *     zero message on Redisson's channel, which a Java await listens to;
 *   - namespace= prefixes the key as for Redisson's locks.
 *
 * Timing bounds are generous: they check what happens, not how fast.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "../conformance/harness.h"
#include "rtest.h"

#define SLACK_MS 1500

static const char *uri; /* without mode= */

/* ---- Redisson, as a Java client sends it ------------------------------------ */

/* RedissonCountDownLatch (3.x) trySetCountAsync. KEYS: name, channel.
 * ARGV: newCountMessage (1), count, publish command. -> 1 set, 0 not. */
static const char java_try_set_count[] =
    "if redis.call('exists', KEYS[1]) == 0 then "
    "redis.call('set', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "return 1 "
    "else "
    "return 0 "
    "end";

/* RedissonCountDownLatch (3.x) countDownAsync. KEYS: name, channel.
 * ARGV: zeroCountMessage (0), publish command. */
static const char java_count_down[] =
    "local v = redis.call('decr', KEYS[1]);"
    "if v <= 0 then redis.call('del', KEYS[1]) end;"
    "if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";

static void channel_of(char *out, size_t cap, const char *key)
{
    snprintf(out, cap, "redisson_countdownlatch__channel__{%s}", key);
}

static long long java_set(redisContext *rc, const char *key, int count)
{
    char ch[512];

    channel_of(ch, sizeof ch, key);
    return rint_(rc, "EVAL %s 2 %s %s 1 %d publish", java_try_set_count, key,
                 ch, count);
}

static void java_down(redisContext *rc, const char *key)
{
    char ch[512];
    redisReply *r;

    channel_of(ch, sizeof ch, key);
    r = rcmd(rc, "EVAL %s 2 %s %s 0 publish", java_count_down, key, ch);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

static dlock_latch *latch(dlock_client *c, const char *name)
{
    dlock_latch *l = NULL;

    if (dlock_latch_new(&l, c, name) != DLOCK_OK)
        fail_msg("latch_new: %s", dlock_client_errmsg(c));
    return l;
}

struct awaiter {
    dlock_latch *l;
    atomic_int rc;
    atomic_llong done_ms;
};

static void *await_main(void *arg)
{
    struct awaiter *a = arg;

    atomic_store(&a->rc, dlock_latch_await(a->l, 10000));
    atomic_store(&a->done_ms, h_now_ms());
    return NULL;
}

/* ---- Java sets and counts down, dlock reads and waits ---------------------- */

static void latch__java_count_down_releases_dlock_await(void **state)
{
    redisContext *rc = raw();
    dlock_client *c = h_client(uri);
    const char *name = h_name("jlatch");
    struct awaiter a = {latch(c, name), 0, 0};
    uint32_t n = 0;
    pthread_t th;
    int64_t t0;

    (void)state;
    assert_int_equal(java_set(rc, name, 2), 1);
    assert_int_equal(dlock_latch_count(a.l, &n), DLOCK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(dlock_latch_set(a.l, 7), DLOCK_EBUSY);
    assert_non_null(strstr(dlock_latch_errmsg(a.l), "count 2"));
    atomic_store(&a.done_ms, 0);
    pthread_create(&th, NULL, await_main, &a);
    h_sleep_ms(300);
    java_down(rc, name);
    h_sleep_ms(200);
    assert_int_equal(atomic_load(&a.done_ms), 0); /* one left */
    t0 = h_now_ms();
    java_down(rc, name);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&a.rc), DLOCK_OK);
    assert_true(atomic_load(&a.done_ms) - t0 < SLACK_MS);
    assert_int_equal(rint_(rc, "EXISTS %s", name), 0);
    dlock_latch_free(a.l);
    dlock_client_close(c);
    redisFree(rc);
}

/* ---- dlock sets and counts down, Java reads and listens -------------------- */

static void latch__dlock_count_down_reaches_java(void **state)
{
    redisContext *rc = raw(), *sub = raw();
    dlock_client *c = h_client(uri);
    const char *name = h_name("dlatch");
    dlock_latch *l = latch(c, name);
    char ch[512];
    redisReply *r;
    uint32_t left;

    (void)state;
    channel_of(ch, sizeof ch, name);
    assert_int_equal(dlock_latch_set(l, 2), DLOCK_OK);
    /* Java's trySetCount is refused; its getCount is GET. */
    assert_int_equal(java_set(rc, name, 5), 0);
    r = rcmd(rc, "GET %s", name);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "2");
    freeReplyObject(r);
    /* A Java await: subscribed to the channel. */
    r = rcmd(sub, "SUBSCRIBE %s", ch);
    freeReplyObject(r);
    /* Java counts one down, dlock the last. */
    java_down(rc, name);
    assert_int_equal(dlock_latch_down(l, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[0]->str, "message");
    assert_string_equal(r->element[1]->str, ch);
    assert_string_equal(r->element[2]->str, "0"); /* zeroCountMessage */
    freeReplyObject(r);
    assert_int_equal(rint_(rc, "EXISTS %s", name), 0);
    /* Open: Java may set it again, and dlock sees that. */
    assert_int_equal(java_set(rc, name, 1), 1);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_string_equal(r->element[2]->str, "1"); /* newCountMessage */
    freeReplyObject(r);
    assert_int_equal(dlock_latch_await(l, 0), DLOCK_ETIMEDOUT);
    java_down(rc, name);
    assert_int_equal(dlock_latch_await(l, 2000), DLOCK_OK);
    dlock_latch_free(l);
    dlock_client_close(c);
    redisFree(sub);
    redisFree(rc);
}

/* namespace=: the key is "<namespace>:<name>", as for Redisson's locks. */
static void latch__namespace_prefixes_the_key(void **state)
{
    redisContext *rc = raw();
    char u[1200], key[300];
    const char *name = h_name("nslatch");
    dlock_client *c;
    dlock_latch *l;
    uint32_t n;

    (void)state;
    snprintf(u, sizeof u, "%s?mode=setnx&namespace=app1", uri);
    c = h_client(u);
    l = latch(c, name);
    snprintf(key, sizeof key, "app1:%s", name);
    assert_int_equal(java_set(rc, key, 3), 1);
    assert_int_equal(dlock_latch_count(l, &n), DLOCK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(rint_(rc, "EXISTS %s", name), 0);
    assert_int_equal(rint_(rc, "DEL %s", key), 1);
    dlock_latch_free(l);
    dlock_client_close(c);
    redisFree(rc);
}

/* A key of that name holding something else is not a count. */
static void latch__other_data_is_not_a_count(void **state)
{
    redisContext *rc = raw();
    dlock_client *c = h_client(uri);
    const char *name = h_name("notlatch");
    dlock_latch *l = latch(c, name);
    uint32_t n;

    (void)state;
    freeReplyObject(rcmd(rc, "SET %s hello", name));
    assert_int_equal(dlock_latch_count(l, &n), DLOCK_ERROR);
    assert_non_null(strstr(dlock_latch_errmsg(l), "latch count"));
    freeReplyObject(rcmd(rc, "DEL %s", name));
    freeReplyObject(rcmd(rc, "HSET %s f 1", name));
    assert_int_equal(dlock_latch_down(l, NULL), DLOCK_ERROR);
    assert_non_null(strstr(dlock_latch_errmsg(l), "WRONGTYPE"));
    freeReplyObject(rcmd(rc, "DEL %s", name));
    dlock_latch_free(l);
    dlock_client_close(c);
    redisFree(rc);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(latch__java_count_down_releases_dlock_await),
        cmocka_unit_test(latch__dlock_count_down_reaches_java),
        cmocka_unit_test(latch__namespace_prefixes_the_key),
        cmocka_unit_test(latch__other_data_is_not_a_count),
    };
    int rc;

    uri = h_setup(argc, argv);
    rc = cmocka_run_group_tests_name("redis/latch", tests, NULL, NULL);
    h_cleanup();
    return rc;
}
