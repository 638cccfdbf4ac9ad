/*
 * rwlock.c: mode rwlock against a real redis-server (`redis_rwlock --uri
 * URI` under with-servers.sh redis; URI without mode=):
 *
 *   - Redisson's own RReadLock/RWriteLock scripts, sent with EVAL as a
 *     Java client sends them, and dlock's readers and writers share one
 *     lock both ways: readers share across the two, a writer of either
 *     excludes everyone, and a release of either wakes the other's
 *     waiters;
 *   (prefer=writer, a writer behind a stream of overlapping readers, is
 *   the conformance suite's writer_not_starved_by_readers on
 *   redis-rwlock);
 *   - bad prefer= values and combinations name the parameter.
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
static char rw_uri[1024];

/* ---- Redisson, as a Java client sends it ------------------------------------- */

/*
 * Copied from Redisson's RedissonReadLock and RedissonWriteLock (3.x):
 * the field is "<client uuid>:<thread id>", the writer's that and
 * ":write"; a read hold's timeout key is "{name}:<field>:rwlock_timeout:N".
 */
/* KEYS: name, timeout prefix. ARGV: lease, field, field:write.
 * -> nil taken, else the pttl. */
static const char java_read_lock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'read'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':1', 1); "
    "redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (mode == 'read') or (mode == 'write' and "
    "redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
    "local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local key = KEYS[2] .. ':' .. ind;"
    "redis.call('set', key, 1); "
    "redis.call('pexpire', key, ARGV[1]); "
    "local remainTime = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); "
    "return nil; "
    "end;"
    "return redis.call('pttl', KEYS[1]);";
/* KEYS: name, channel, timeout prefix, key prefix, unlock latch.
 * ARGV: 0, field, publish command, latch timeout. */
static const char java_read_unlock[] =
    "local val = redis.call('get', KEYS[5]); "
    "if val ~= false then "
    "return tonumber(val);"
    "end; "
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[4]); "
    "return 1; "
    "end; "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); "
    "if (lockExists == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (counter == 0) then "
    "redis.call('hdel', KEYS[1], ARGV[2]); "
    "end;"
    "redis.call('del', KEYS[3] .. ':' .. (counter+1)); "
    "if (redis.call('hlen', KEYS[1]) > 1) then "
    "local maxRemainTime = -3; "
    "local keys = redis.call('hkeys', KEYS[1]); "
    "for n, key in ipairs(keys) do "
    "counter = tonumber(redis.call('hget', KEYS[1], key)); "
    "if type(counter) == 'number' then "
    "for i=counter, 1, -1 do "
    "local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. "
    "':rwlock_timeout:' .. i); "
    "maxRemainTime = math.max(remainTime, maxRemainTime);"
    "end; "
    "end; "
    "end; "
    "if maxRemainTime > 0 then "
    "redis.call('pexpire', KEYS[1], maxRemainTime); "
    "redis.call('set', KEYS[5], 0, 'px', ARGV[4]); "
    "return 0; "
    "end;"
    "if mode == 'write' then "
    "redis.call('set', KEYS[5], 0, 'px', ARGV[4]); "
    "return 0;"
    "end; "
    "end; "
    "redis.call('del', KEYS[1]); "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[4]); "
    "return 1; ";
/* KEYS: name. ARGV: lease, field:write. -> nil taken, else the pttl. */
static const char java_write_lock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'write'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (mode == 'write') then "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local currentExpire = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); "
    "return nil; "
    "end; "
    "end;"
    "return redis.call('pttl', KEYS[1]);";
/* KEYS: name, channel, unlock latch. ARGV: 1, lease, field:write,
 * publish command, latch timeout. */
static const char java_write_unlock[] =
    "local val = redis.call('get', KEYS[3]); "
    "if val ~= false then "
    "return tonumber(val);"
    "end; "
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
    "return 1; "
    "end;"
    "if (mode == 'write') then "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); "
    "if (lockExists == 0) then "
    "return nil;"
    "else "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
    "return 0; "
    "else "
    "redis.call('hdel', KEYS[1], ARGV[3]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then "
    "redis.call('del', KEYS[1]); "
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "else "
    "redis.call('hset', KEYS[1], 'mode', 'read'); "
    "end; "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
    "return 1; "
    "end; "
    "end; "
    "end; "
    "return nil;";

/* 1 when the Java side got it (nil), 0 when refused (a pttl). */
static int java_got(redisReply *r)
{
    int got = r->type == REDIS_REPLY_NIL;

    if (!got && r->type != REDIS_REPLY_INTEGER)
        fail_msg("redisson: reply type %d", r->type);
    freeReplyObject(r);
    return got;
}

static int java_read(redisContext *rc, const char *name)
{
    char tp[512];

    rsuffix(tp, sizeof tp, name, JAVA_FIELD ":rwlock_timeout");
    return java_got(rcmd(rc, "EVAL %s 2 %s %s 30000 %s %s", java_read_lock,
                         name, tp, JAVA_FIELD, JAVA_FIELD ":write"));
}

static int java_write(redisContext *rc, const char *name)
{
    return java_got(rcmd(rc, "EVAL %s 1 %s 30000 %s", java_write_lock, name,
                         JAVA_FIELD ":write"));
}

static long long java_unlock(redisContext *rc, const char *name, int write)
{
    char chan[512], tp[512], kp[512], latch[512];
    redisReply *r;
    long long v;

    rname(chan, sizeof chan, "redisson_rwlock", name);
    rname(latch, sizeof latch, "redisson_unlock_latch", name);
    strcat(latch, write ? ":req-w" : ":req-r");
    freeReplyObject(rcmd(rc, "DEL %s", latch));
    if (write) {
        r = rcmd(rc, "EVAL %s 3 %s %s %s 1 30000 %s publish 1000",
                 java_write_unlock, name, chan, latch, JAVA_FIELD ":write");
    } else {
        rsuffix(tp, sizeof tp, name, JAVA_FIELD ":rwlock_timeout");
        snprintf(kp, sizeof kp, "%.*s", (int)(strstr(tp, ":" JAVA_FIELD) - tp),
                 tp);
        r = rcmd(rc, "EVAL %s 5 %s %s %s %s %s 0 %s publish 1000",
                 java_read_unlock, name, chan, tp, kp, latch, JAVA_FIELD);
    }
    v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* Keys left that carry the name: 0 once all is released. The fencing
 * token stays (it must keep growing), and so do Redisson's unlock latches
 * for a second (its own retries' guard). */
static long long keys_left(redisContext *rc, const char *name)
{
    redisReply *r = rcmd(rc, "KEYS *%s*", name);
    long long n = 0;

    for (size_t i = 0; i < r->elements; i++) {
        const char *k = r->element[i]->str;
        if (strncmp(k, "redisson_lock_token:", 20) == 0 ||
            strncmp(k, "redisson_unlock_latch:", 22) == 0)
            continue;
        print_message("  left: %s\n", k);
        n++;
    }
    freeReplyObject(r);
    return n;
}

/* ---- interop ---------------------------------------------------------------- */

/* A Java reader holds: a dlock reader shares it, a dlock writer waits;
 * the Java reader's unlock (after dlock's) frees the hash and its "0"
 * wakes the dlock writer. */
static void rwlock__java_reader_shares_with_dlock(void **state)
{
    static const char *const names[] = {"rw-orders", "rw{tag}x"};
    redisContext *rc = raw();

    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char name[128];
        dlock_client *c = h_client(rw_uri);
        dlock_lock *rd, *wr;
        struct waiter w = {0};
        pthread_t th;
        int64_t t0;

        snprintf(name, sizeof name, "%s-%s", names[i], h_name("j"));
        rd = h_lock(c, name, 0, DLOCK_LOCK_SHARED);
        wr = h_lock(c, name, 0, 0);
        assert_int_equal(java_read(rc, name), 1);
        assert_int_equal(dlock_acquire(rd, 0), DLOCK_OK);
        assert_int_equal(dlock_acquire(wr, 0), DLOCK_EBUSY);
        assert_int_equal(java_write(rc, name), 0);
        w.lk = wr;
        w.timeout = 20000;
        atomic_init(&w.rc, 1);
        pthread_create(&th, NULL, waiter_main, &w);
        h_sleep_ms(200);
        assert_int_equal(atomic_load(&w.rc), 1); /* still waiting */
        assert_int_equal(dlock_release(rd), DLOCK_OK);
        h_sleep_ms(200);
        assert_int_equal(atomic_load(&w.rc), 1); /* Java still reads */
        t0 = h_now_ms();
        assert_int_equal(java_unlock(rc, name, 0), 1);
        pthread_join(th, NULL);
        assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
        /* woken by the unlock message, not a retry after 1 s */
        assert_true(h_now_ms() - t0 < SLACK_MS);
        /* Now Java can neither read nor write. */
        assert_int_equal(java_read(rc, name), 0);
        assert_int_equal(java_write(rc, name), 0);
        assert_int_equal(dlock_release(wr), DLOCK_OK);
        assert_int_equal(keys_left(rc, name), 0);
        dlock_lock_free(rd);
        dlock_lock_free(wr);
        dlock_client_close(c);
    }
    redisFree(rc);
}

/* A dlock writer holds in Redisson's layout: Java can neither read nor
 * write; its release ("1") lets a Java reader in, whom dlock readers then
 * join, and whose last unlock frees everything. */
static void rwlock__dlock_writer_excludes_java(void **state)
{
    const char *name = h_name("rw-dw");
    redisContext *rc = raw();
    dlock_client *c = h_client(rw_uri);
    dlock_lock *wr = h_lock(c, name, 0, 0);
    dlock_lock *rd = h_lock(c, name, 0, DLOCK_LOCK_SHARED);
    char field[128];
    redisReply *r;

    (void)state;
    assert_int_equal(dlock_acquire(wr, 0), DLOCK_OK);
    r = rcmd(rc, "HGET %s mode", name);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "write");
    freeReplyObject(r);
    snprintf(field, sizeof field, "%s:write", dlock_lock_owner(wr));
    r = rcmd(rc, "HEXISTS %s %s", name, field);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    assert_int_equal(java_read(rc, name), 0);
    assert_int_equal(java_write(rc, name), 0);
    assert_int_equal(dlock_acquire(rd, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_release(wr), DLOCK_OK);
    assert_int_equal(java_read(rc, name), 1);
    assert_int_equal(dlock_acquire(rd, 0), DLOCK_OK);
    assert_int_equal(java_write(rc, name), 0);
    assert_int_equal(dlock_release(rd), DLOCK_OK);
    /* Java's read is still there: no writer yet. */
    assert_int_equal(dlock_acquire(wr, 0), DLOCK_EBUSY);
    assert_int_equal(java_unlock(rc, name, 0), 1);
    assert_int_equal(java_write(rc, name), 1);
    assert_int_equal(java_unlock(rc, name, 1), 1);
    assert_int_equal(keys_left(rc, name), 0);
    dlock_lock_free(rd);
    dlock_lock_free(wr);
    dlock_client_close(c);
    redisFree(rc);
}

/* ---- bad URIs --------------------------------------------------------------------- */

static void rwlock__bad_uris_name_the_parameter(void **state)
{
    char u[1200];

    (void)state;
    snprintf(u, sizeof u, "%s?mode=rwlock&prefer=readers", uri);
    rt_expect_refused(u, "prefer");
    snprintf(u, sizeof u, "%s?mode=hash&prefer=writer", uri);
    rt_expect_refused(u, "prefer");
    snprintf(u, sizeof u, "%s?mode=rwlock&cluster=1", uri);
    rt_expect_refused(u, "cluster");
    snprintf(u, sizeof u, "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
                          "?mode=rwlock");
    rt_expect_refused(u, "mode");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rwlock__java_reader_shares_with_dlock),
        cmocka_unit_test(rwlock__dlock_writer_excludes_java),
        cmocka_unit_test(rwlock__bad_uris_name_the_parameter),
    };
    int rc;

    uri = h_setup(argc, argv);
    snprintf(rw_uri, sizeof rw_uri, "%s?mode=rwlock", uri);
    rc = cmocka_run_group_tests_name("redis/rwlock", tests, NULL, NULL);
    h_cleanup();
    return rc;
}
