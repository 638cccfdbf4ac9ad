/*
 * semaphore.c: permits of mode hash against a real redis-server
 * (`redis_semaphore --uri URI?mode=hash` under with-servers.sh redis), with Redisson's own RPermitExpirableSemaphore scripts sent with
 * EVAL as a Java client sends them:
 *
 *   - Redisson's permits are counted by dlock: a dlock permit is refused
 *     while Redisson holds the rest, and Redisson's release wakes a dlock
 *     waiter; a dlock request with another count is refused, naming both;
 *   - dlock's permits are counted by Redisson: its tryAcquire is refused
 *     while dlock holds them all, and dlock's release announces the free
 *     count on Redisson's channel;
 *   - a SIGKILLed dlock holder's permit is taken back by Redisson's
 *     acquire script once its lease has passed;
 *   - a name is a lock or a semaphore: each refuses the other clearly;
 *   - dlock_inspect() describes a semaphore (held when none is free).
 *
 * (At most N holders among 6 processes, and a killed holder's permit
 * coming back to dlock, are the conformance suite's, on redis-hash.)
 * Timing bounds are generous: they check what happens, not how fast.
 * The whole run takes about 2 s.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include "../conformance/harness.h"
#include "rtest.h"

#define SLACK_MS 1500
#define LEASE_MS 1000

static const char *hash_uri; /* with mode=hash */

/* ---- Redisson, as a Java client sends it ------------------------------------- */

/*
 * Copied from Redisson 4.7.0's RedissonPermitExpirableSemaphore: the name
 * holds the free permits, "{name}:timeout" the held ones scored with the
 * end of their lease, "redisson_sc:{name}" is the channel. A permit id is
 * 16 random bytes; times are the Java client's clock in ms.
 */
/* KEYS: name, timeouts, channel. ARGV: permits, lease end, now, the
 * lease-less score, publish command, ids... -> "OK", ":<first lease
 * end>" or nil. */
static const char java_acquire[] =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], "
    "'limit', 0, ARGV[1]); "
    "if #expiredIds > 0 then "
    "redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then "
    "redis.call(ARGV[5], KEYS[3], value); "
    "end;"
    "end; "
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); "
    "for i = 6, #ARGV, 1 do "
    "redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); "
    "end; "
    "local ttl = redis.call('pttl', KEYS[1]); "
    "if ttl > 0 then "
    "redis.call('pexpire', KEYS[2], ttl); "
    "end; "
    "return 'OK'; "
    "end; "
    "local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if v[1] ~= nil and v[2] ~= ARGV[4] then "
    "return ':' .. tostring(v[2]); "
    "end "
    "return nil;";
/* KEYS: name, channel, timeouts. ARGV: id, 1, now, publish command.
 * -> 1 released, 0 not held (or its lease had ended). */
static const char java_release[] =
    "local expire = redis.call('zscore', KEYS[3], ARGV[1]);"
    "local removed = redis.call('zrem', KEYS[3], ARGV[1]);"
    "if tonumber(removed) ~= 1 then "
    "return 0;"
    "end;"
    "local value = redis.call('incrby', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[4], KEYS[2], value); "
    "if tonumber(expire) <= tonumber(ARGV[3]) then "
    "return 0;"
    "end;"
    "return 1;";
/* KEYS: name, channel. ARGV: permits, publish command. -> 1 set, 0 was
 * set already. */
static const char java_try_set_permits[] =
    "local value = redis.call('get', KEYS[1]); "
    "if (value == false) then "
    "redis.call('set', KEYS[1], ARGV[1]); "
    "redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "return 1;"
    "end;"
    "return 0;";

static long long wall_ms(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL); /* System.currentTimeMillis() */
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* A Java permit id: 16 bytes, here a fixed pattern and i. */
static void java_id(unsigned char id[16], int i)
{
    for (int k = 0; k < 16; k++)
        id[k] = (unsigned char)(0xa0 + k);
    id[15] = (unsigned char)i;
}

struct sem_keys {
    char timeouts[256], chan[256];
};

static void sem_keys(struct sem_keys *k, const char *name)
{
    rsuffix(k->timeouts, sizeof k->timeouts, name, "timeout");
    rname(k->chan, sizeof k->chan, "redisson_sc", name);
}

/* Redisson's tryAcquire() of one permit with id i for lease_ms: 1 taken,
 * 0 refused. */
static int java_take(redisContext *rc, const char *name, int i,
                     long long lease_ms)
{
    struct sem_keys k;
    unsigned char id[16];
    long long now = wall_ms();
    char end[32], nows[32];
    redisReply *r;
    int got;

    sem_keys(&k, name);
    java_id(id, i);
    snprintf(end, sizeof end, "%lld", now + lease_ms);
    snprintf(nows, sizeof nows, "%lld", now);
    r = rcmd(rc, "EVAL %s 3 %s %s %s 1 %s %s 922337203685477 publish %b",
             java_acquire, name, k.timeouts, k.chan, end, nows, id,
             sizeof id);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("redisson acquire: %s", r->str);
    got = r->type == REDIS_REPLY_STRING && strcmp(r->str, "OK") == 0;
    if (!got && r->type != REDIS_REPLY_NIL &&
        !(r->type == REDIS_REPLY_STRING && r->str[0] == ':'))
        fail_msg("redisson acquire: reply type %d", r->type);
    freeReplyObject(r);
    return got;
}

static long long java_give(redisContext *rc, const char *name, int i)
{
    struct sem_keys k;
    unsigned char id[16];
    char nows[32];

    sem_keys(&k, name);
    java_id(id, i);
    snprintf(nows, sizeof nows, "%lld", wall_ms());
    return rint_(rc, "EVAL %s 3 %s %s %s %b 1 %s publish", java_release,
                 name, k.chan, k.timeouts, id, sizeof id, nows);
}

static long long java_set_permits(redisContext *rc, const char *name, int n)
{
    struct sem_keys k;

    sem_keys(&k, name);
    return rint_(rc, "EVAL %s 2 %s %s %d publish", java_try_set_permits,
                 name, k.chan, n);
}

static long long free_count(redisContext *rc, const char *name)
{
    redisReply *r = rcmd(rc, "GET %s", name);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;

    freeReplyObject(r);
    return v;
}

static long long held_count(redisContext *rc, const char *name)
{
    struct sem_keys k;

    sem_keys(&k, name);
    return rint_(rc, "ZCARD %s", k.timeouts);
}

/* `dlock inspect` of a semaphore whose 3 permits are held, one by a. */
static void inspect_all_held(dlock_client *c, const char *name,
                             dlock_lock *a)
{
    dlock_state st = DLOCK_STATE_INIT;

    assert_int_equal(dlock_inspect(c, name, &st), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_non_null(strstr(st.owner, "3 of 3 permits held"));
    assert_non_null(strstr(st.owner, dlock_lock_owner(a)));
    assert_true(st.remaining_ms > 0);
    assert_true(st.fence > 0);
}

/* ---- interop ---------------------------------------------------------------- */

/* Redisson sets 3 permits and takes 2: dlock gets the third and no more;
 * a dlock request for 4 is refused naming both counts; Redisson's release
 * wakes the dlock waiter at once. */
static void semaphore__redisson_permits_counted_by_dlock(void **state)
{
    static const char *const names[] = {"sem-jobs", "sem{tag}x"};
    redisContext *rc = raw();

    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char name[128];
        dlock_client *c = h_client(hash_uri);
        dlock_lock *a, *b, *four;
        struct waiter w = {0};
        pthread_t th;
        int64_t t0;

        snprintf(name, sizeof name, "%s-%s", names[i], h_name("j"));
        a = h_permit(c, name, 0, 3);
        b = h_permit(c, name, 0, 3);
        four = h_permit(c, name, 0, 4);
        assert_int_equal(java_set_permits(rc, name, 3), 1);
        assert_int_equal(java_take(rc, name, 1, 30000), 1);
        assert_int_equal(java_take(rc, name, 2, 30000), 1);
        assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
        assert_int_equal(free_count(rc, name), 0);
        assert_int_equal(held_count(rc, name), 3);
        assert_int_equal(dlock_acquire(b, 0), DLOCK_EBUSY);
        assert_int_equal(java_take(rc, name, 3, 30000), 0);
        inspect_all_held(c, name, a);
        assert_int_equal(dlock_acquire(four, 0), DLOCK_EINVAL);
        assert_non_null(strstr(dlock_lock_errmsg(four), "permits"));
        assert_non_null(strstr(dlock_lock_errmsg(four), "has 3 permits"));
        assert_non_null(strstr(dlock_lock_errmsg(four), "asks for 4"));
        w.lk = b;
        w.timeout = 20000;
        atomic_init(&w.rc, 1);
        pthread_create(&th, NULL, waiter_main, &w);
        h_sleep_ms(200);
        assert_int_equal(atomic_load(&w.rc), 1); /* still waiting */
        t0 = h_now_ms();
        assert_int_equal(java_give(rc, name, 1), 1);
        pthread_join(th, NULL);
        assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
        /* woken by Redisson's message, not a retry after 1 s */
        print_message("  dlock waiter granted %lld ms after Redisson's "
                      "release\n",
                      (long long)(atomic_load(&w.done_ms) - t0));
        assert_true(atomic_load(&w.done_ms) - t0 < SLACK_MS);
        assert_int_equal(dlock_release(a), DLOCK_OK);
        assert_int_equal(dlock_release(b), DLOCK_OK);
        assert_int_equal(java_give(rc, name, 2), 1);
        assert_int_equal(free_count(rc, name), 3);
        assert_int_equal(held_count(rc, name), 0);
        dlock_lock_free(a);
        dlock_lock_free(b);
        dlock_lock_free(four);
        dlock_client_close(c);
    }
    redisFree(rc);
}

/* dlock makes a semaphore of 2 (the count was never set) and holds both:
 * Redisson's tryAcquire is refused; dlock's release announces the free
 * count on Redisson's channel and lets Redisson in. */
static void semaphore__dlock_permits_counted_by_redisson(void **state)
{
    const char *name = h_name("sem-dl");
    redisContext *rc = raw(), *sub = raw();
    dlock_client *c = h_client(hash_uri);
    dlock_lock *a = h_permit(c, name, 0, 2), *b = h_permit(c, name, 0, 2);
    struct sem_keys k;
    redisReply *r;

    (void)state;
    sem_keys(&k, name);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(b, 0), DLOCK_OK);
    freeReplyObject(rcmd(sub, "SUBSCRIBE %s", k.chan));
    /* The count Redisson's trySetPermits would have set, taken twice. */
    assert_int_equal(java_set_permits(rc, name, 2), 0);
    assert_int_equal(free_count(rc, name), 0);
    assert_int_equal(held_count(rc, name), 2);
    r = rcmd(rc, "ZSCORE %s %s", k.timeouts, dlock_lock_owner(a));
    assert_int_equal(r->type, REDIS_REPLY_STRING); /* a is a member */
    freeReplyObject(r);
    assert_int_equal(java_take(rc, name, 1, 30000), 0);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    /* The announcement a Redisson waiter wakes on: the free count. */
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[0]->str, "message");
    assert_string_equal(r->element[2]->str, "1");
    freeReplyObject(r);
    assert_int_equal(java_take(rc, name, 1, 30000), 1);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_EBUSY);
    assert_int_equal(java_give(rc, name, 1), 1);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    assert_int_equal(free_count(rc, name), 2);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
    redisFree(sub);
    redisFree(rc);
}

/* Child role "holdpermit NAME GATE_FD": one permit of a semaphore of 1,
 * lease LEASE_MS, then wait to be killed. */
static int holdpermit_child(char **args)
{
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    dlock_lock *lk = c != NULL ? h_permit(c, args[0], LEASE_MS, 1) : NULL;
    char b = 1;

    if (lk == NULL || dlock_acquire(lk, 10000) != DLOCK_OK)
        return 3;
    if (write(atoi(args[1]), &b, 1) != 1)
        return 4;
    for (;;)
        pause(); /* until SIGKILL */
}

/* A dlock holder of the only permit is SIGKILLed: Redisson is refused
 * until the permit's lease has passed, then its own acquire script takes
 * the permit back and gets it. */
static void semaphore__killed_dlock_holder_reclaimed_by_redisson(void **state)
{
    const char *name = h_name("sem-kill");
    redisContext *rc = raw();
    struct h_gate g;
    char fd_s[16];
    int64_t killed, waited;
    pid_t p;

    (void)state;
    h_gate_init(&g);
    snprintf(fd_s, sizeof fd_s, "%d", g.fd[1]);
    p = h_spawn("holdpermit", name, fd_s, NULL);
    assert_true(h_gate_wait(&g, 30000));
    assert_int_equal(java_take(rc, name, 1, 30000), 0);
    kill(p, SIGKILL);
    assert_int_equal(h_wait(p), 128 + SIGKILL);
    killed = h_now_ms();
    while (!java_take(rc, name, 1, 30000)) {
        if (h_now_ms() - killed > LEASE_MS + 10000)
            fail_msg("the killed holder's permit never came back");
        h_sleep_ms(50);
    }
    waited = h_now_ms() - killed;
    print_message("  permit back to Redisson %lld ms after the kill "
                  "(lease %d ms)\n",
                  (long long)waited, LEASE_MS);
    assert_int_equal(held_count(rc, name), 1); /* Redisson's only */
    assert_int_equal(java_give(rc, name, 1), 1);
    h_gate_close(&g);
    redisFree(rc);
}

/* A name is a lock or a semaphore: a permit on a held lock's name is
 * refused naming permits, a lock on a semaphore's name says so (with the
 * server's WRONGTYPE); neither is granted. */
static void semaphore__lock_and_semaphore_names_exclude(void **state)
{
    const char *name = h_name("sem-or-lock");
    dlock_client *c = h_client(hash_uri);
    dlock_lock *lk = h_lock(c, name, 0, 0), *pm = h_permit(c, name, 0, 2);

    (void)state;
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(pm, 0), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(pm), "permits"));
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(dlock_acquire(pm, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "semaphore"));
    assert_non_null(strstr(dlock_lock_errmsg(lk), "WRONGTYPE"));
    assert_int_equal(dlock_release(pm), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_lock_free(pm);
    dlock_client_close(c);
}

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {
        {"holdpermit", holdpermit_child},
        {NULL, NULL},
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(semaphore__redisson_permits_counted_by_dlock),
        cmocka_unit_test(semaphore__dlock_permits_counted_by_redisson),
        cmocka_unit_test(semaphore__killed_dlock_holder_reclaimed_by_redisson),
        cmocka_unit_test(semaphore__lock_and_semaphore_names_exclude),
    };
    int rc;

    h_child_dispatch(argc, argv, roles);
    hash_uri = h_setup(argc, argv);
    rc = cmocka_run_group_tests_name("redis/semaphore", tests, NULL, NULL);
    h_cleanup();
    return rc;
}
