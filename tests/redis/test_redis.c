/*
 * test_redis.c: the Redis backend's own tests, against real redis-server
 * processes started by tests/servers/with-servers.sh. One binary, three
 * groups (meson runs each as its own test):
 *
 *   --group interop   Redisson's own RLock/RFencedLock scripts, sent with
 *                     EVAL from here, and dlock's hash mode exclude each
 *                     other in both directions and wake each other's
 *                     waiters; the fencing token is shared.
 *   --group faults    a SIGSTOPped holder is told it lost the lock and its
 *                     token is below the next holder's; a re-grant after a
 *                     release in doubt gets a greater token; a SIGKILLed
 *                     holder frees the lock after its lease, not before;
 *                     waiters survive a server restart, and a holder stops
 *                     believing before anyone else can be granted; a
 *                     paused or stopped server gives DLOCK_ECONNECT within
 *                     timeout=; passwords never reach messages or logs;
 *                     hostile names; bad URIs; the mode picked from
 *                     redlock:// and redlock=1; no descriptor reaches an
 *                     exec'd child.
 *   --group redlock   five masters: a lock with two stopped, a clear
 *                     failure with three stopped, a paused node, a
 *                     failed acquire's late SET taken back, no two
 *                     holders while nodes stop and restart mid-run; the
 *                     delayed restart: restarted nodes count for nothing
 *                     for the longest lease, and a history of contending
 *                     processes through crashes of three nodes shows two
 *                     holders without it and none with it.
 *
 * Timing bounds are generous on purpose: they check that things happen,
 * and in which order, never how fast.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "../conformance/harness.h"
#include "rtest.h"
#include "dlock/backend.h"

#define SLACK_MS 1500

static const char *uri;
static char group[32];

/* ---- helpers ---------------------------------------------------------------- */

static void ctl(const char *fmt, ...)
{
    char args[128], cmd[512];
    va_list ap;
    const char *c = getenv("DLOCK_TEST_SERVERCTL");

    assert_non_null(c);
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s", c, args);
    if (system(cmd) != 0)
        fail_msg("%s failed", cmd);
}

/* The PID of a test server ("redis", "redis5 3"). */
static pid_t server_pid(const char *which)
{
    char cmd[512], out[32] = "";
    const char *c = getenv("DLOCK_TEST_SERVERCTL");
    FILE *p;

    assert_non_null(c);
    snprintf(cmd, sizeof cmd, "'%s' pid %s", c, which);
    p = popen(cmd, "r");
    assert_non_null(p);
    if (fgets(out, sizeof out, p) == NULL)
        out[0] = '\0';
    pclose(p);
    assert_true(atoi(out) > 0);
    return (pid_t)atoi(out);
}

static dlock_lock *new_lock(dlock_client *c, const char *name,
                            uint32_t lease, dlock_lost_fn lost, void *p)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = lease;
    o.on_lost = lost;
    o.payload = p;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static bool read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n;
    if (f == NULL)
        return false;
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n > 0;
}

static bool wait_file(const char *path, uint32_t ms)
{
    int64_t end = h_now_ms() + ms;
    struct stat st;
    while (h_now_ms() < end) {
        if (stat(path, &st) == 0 && st.st_size > 0)
            return true;
        h_sleep_ms(20);
    }
    return false;
}

/* ---- Redisson interop (mode=hash) ------------------------------------------- */

/*
 * Redisson's protocol, copied from its RedissonLock / RedissonFencedLock as
 * a Java client sends it (EVAL with these KEYS and ARGV). Field: the
 * client's uuid ":" thread id.
 */
static const char redisson_lock[] =
    "if ((redis.call('exists', KEYS[1]) == 0) "
    "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "return redis.call('pttl', KEYS[1]);";
/* KEYS: name, channel, unlock latch. ARGV: 0, lease, field, publish cmd,
 * latch timeout. */
static const char redisson_unlock[] =
    "local val = redis.call('get', KEYS[3]); "
    "if val ~= false then "
    "return tonumber(val);"
    "end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
    "return 0; "
    "else "
    "redis.call('del', KEYS[1]); "
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
    "return 1; "
    "end; ";
/* RFencedLock: KEYS name, token. -> {-1, token} taken, {pttl, -1} busy. */
static const char redisson_fenced_lock[] =
    "if (redis.call('exists', KEYS[1]) == 0 "
    "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "local token = redis.call('incr', KEYS[2]);"
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return {-1, token}; "
    "end; "
    "return {redis.call('pttl', KEYS[1]), -1};";

/* Returns 1 when Redisson got the lock, 0 when busy. */
static int java_lock(redisContext *rc, const char *name)
{
    redisReply *r = rcmd(rc, "EVAL %s 1 %s 30000 %s", redisson_lock, name,
                         JAVA_FIELD);
    int got = r->type == REDIS_REPLY_NIL;
    if (!got && r->type != REDIS_REPLY_INTEGER)
        fail_msg("redisson lock: reply type %d", r->type);
    freeReplyObject(r);
    return got;
}

static long long java_unlock(redisContext *rc, const char *name)
{
    char chan[512], latch[512];
    redisReply *r;
    long long v;

    rname(chan, sizeof chan, "redisson_lock__channel", name);
    rname(latch, sizeof latch, "redisson_unlock_latch", name);
    strcat(latch, ":req-1");
    freeReplyObject(rcmd(rc, "DEL %s", latch));
    r = rcmd(rc, "EVAL %s 3 %s %s %s 0 30000 %s publish 1000",
             redisson_unlock, name, chan, latch, JAVA_FIELD);
    v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* Redisson holds; dlock cannot take it; Redisson's unlock message wakes the
 * dlock waiter, which then holds it in Redisson's layout. */
static void interop__redisson_holds_dlock_waits(void **state)
{
    static const char *const names[] = {"orders-42", "na{me}", "sp ace"};
    redisContext *rc = raw();
    /* retry_max=20s: a waiter that missed the message would sleep for the
     * lease's 30 s TTL or 20 s, far past the bound checked below. */
    dlock_client *c = h_client(h_uri_with("retry_max=20s"));

    (void)state;
    for (size_t i = 0; i < 3; i++) {
        char name[128], field[128];
        struct waiter w = {0};
        pthread_t t;
        redisReply *r;
        long long released_ms;

        snprintf(name, sizeof name, "%s-%d", names[i], (int)getpid());
        assert_int_equal(java_lock(rc, name), 1);
        w.lk = new_lock(c, name, 0, NULL, NULL);
        assert_int_equal(dlock_try_acquire(w.lk), DLOCK_EBUSY);
        w.timeout = 60000;
        atomic_store(&w.rc, 1);
        pthread_create(&t, NULL, waiter_main, &w);
        h_sleep_ms(300); /* the waiter is subscribed and asleep */
        assert_int_equal(atomic_load(&w.rc), 1);
        released_ms = h_now_ms();
        assert_int_equal(java_unlock(rc, name), 1);
        pthread_join(t, NULL);
        assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
        /* Woken by the message: a generous bound that a missed wake-up
         * (20 s or more) cannot meet. */
        assert_true(atomic_load(&w.done_ms) - released_ms < 5000);
        /* dlock holds it in Redisson's layout. */
        snprintf(field, sizeof field, "%s", dlock_lock_owner(w.lk));
        r = rcmd(rc, "HGET %s %s", name, field);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, "1");
        freeReplyObject(r);
        assert_int_equal(rint_(rc, "HLEN %s", name), 1);
        assert_true(rint_(rc, "PTTL %s", name) > 0);
        /* ...and Redisson is refused while dlock holds. */
        assert_int_equal(java_lock(rc, name), 0);
        assert_int_equal(dlock_release(w.lk), DLOCK_OK);
        assert_int_equal(rint_(rc, "EXISTS %s", name), 0);
        dlock_lock_free(w.lk);
    }
    dlock_client_close(c);
    redisFree(rc);
}

/* dlock holds; Redisson is refused; dlock's release publishes Redisson's
 * unlock message (0) on Redisson's channel, then Redisson takes it. */
static void interop__dlock_holds_redisson_waits(void **state)
{
    redisContext *rc = raw(), *sub = raw();
    dlock_client *c = h_client(uri);
    char name[64], chan[128];
    dlock_lock *lk;
    redisReply *r;

    (void)state;
    snprintf(name, sizeof name, "inventory-%d", (int)getpid());
    rname(chan, sizeof chan, "redisson_lock__channel", name);
    lk = new_lock(c, name, 0, NULL, NULL);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(java_lock(rc, name), 0);
    /* A Redisson waiter listens on its channel. */
    r = rcmd(sub, "SUBSCRIBE %s", chan);
    freeReplyObject(r);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_string_equal(r->element[0]->str, "message");
    assert_string_equal(r->element[1]->str, chan);
    assert_string_equal(r->element[2]->str, "0"); /* UNLOCK_MESSAGE */
    freeReplyObject(r);
    assert_int_equal(java_lock(rc, name), 1);
    /* Now Redisson holds: dlock waits, and gets it after the unlock. */
    assert_int_equal(dlock_try_acquire(lk), DLOCK_EBUSY);
    assert_int_equal(java_unlock(rc, name), 1);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
    redisFree(sub);
    redisFree(rc);
}

/* The fencing token is RFencedLock's: tokens grow across both clients. A
 * plain RLock does not bump it (see the docs). */
static void interop__fencing_shared_with_rfencedlock(void **state)
{
    redisContext *rc = raw();
    dlock_client *c = h_client(uri);
    char name[64], token[128];
    long long java_token;
    uint64_t f1, f2;
    dlock_lock *lk;
    redisReply *r;

    (void)state;
    snprintf(name, sizeof name, "fenced-%d", (int)getpid());
    rname(token, sizeof token, "redisson_lock_token", name);
    lk = new_lock(c, name, 0, NULL, NULL);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    f1 = dlock_fence(lk);
    assert_true(f1 > 0);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    r = rcmd(rc, "EVAL %s 2 %s %s 30000 %s", redisson_fenced_lock, name,
             token, JAVA_FIELD);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->element[0]->integer, -1);
    java_token = r->element[1]->integer;
    freeReplyObject(r);
    assert_true((uint64_t)java_token > f1);
    assert_int_equal(java_unlock(rc, name), 1);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    f2 = dlock_fence(lk);
    assert_true(f2 > (uint64_t)java_token);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
    redisFree(rc);
}

/* ---- faults (mode=setnx unless said) --------------------------------------- */

/* Child "stopped NAME LEASE DIR": hold NAME, write the fence to DIR/fence,
 * then wait; on_lost writes DIR/lost. Exit 0 once lost and not held. */
static atomic_int child_lost;
static char child_dir[256];

static void child_on_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    char path[300], text[600];
    (void)lk;
    (void)p;
    snprintf(path, sizeof path, "%s/lost", child_dir);
    snprintf(text, sizeof text, "%d %s\n", code, why);
    write_file(path, text);
    atomic_store(&child_lost, 1);
}

static int stopped_child(char **args)
{
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    dlock_lock *lk;
    char path[300], text[32];

    snprintf(child_dir, sizeof child_dir, "%s", args[2]);
    if (c == NULL)
        return 3;
    lk = new_lock(c, args[0], (uint32_t)atoi(args[1]), child_on_lost, NULL);
    if (dlock_acquire(lk, 10000) != DLOCK_OK)
        return 4;
    snprintf(text, sizeof text, "%llu", (unsigned long long)dlock_fence(lk));
    snprintf(path, sizeof path, "%s/fence", child_dir);
    write_file(path, text);
    for (int i = 0; i < 3000 && !atomic_load(&child_lost); i++)
        h_sleep_ms(10);
    if (!atomic_load(&child_lost) || dlock_held(lk))
        return 5;
    dlock_release(lk); /* ELOST; must not remove the new holder's key */
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

static void faults__sigstopped_holder_lost_and_fenced(void **state)
{
    const char *name = h_name("stopped");
    dlock_client *c = h_client(uri);
    dlock_lock *b = new_lock(c, name, 0, NULL, NULL);
    char dir[300], path[320], text[600];
    unsigned long long f1;
    pid_t pid;

    (void)state;
    snprintf(dir, sizeof dir, "%s/stopped", h_scratch());
    mkdir(dir, 0700);
    pid = h_spawn("stopped", name, "1000", dir);
    snprintf(path, sizeof path, "%s/fence", dir);
    assert_true(wait_file(path, 30000));
    assert_true(read_file(path, text, sizeof text));
    f1 = strtoull(text, NULL, 10);
    assert_true(f1 > 0);
    kill(pid, SIGSTOP); /* a GC pause, a VM migration... past the lease */
    assert_int_equal(dlock_acquire(b, 10000), DLOCK_OK);
    /* The storage would reject the paused holder's token. */
    assert_true(dlock_fence(b) > f1);
    kill(pid, SIGCONT);
    snprintf(path, sizeof path, "%s/lost", dir);
    assert_true(wait_file(path, 15000));
    assert_true(read_file(path, text, sizeof text));
    assert_int_equal(atoi(text), DLOCK_ELOST);
    assert_int_equal(h_wait(pid), 0);
    /* Its release took nothing from the new holder. */
    assert_true(dlock_held(b));
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(b);
    dlock_client_close(c);
}

static int hold_child(char **args)
{
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    dlock_lock *lk = c ? new_lock(c, args[0], (uint32_t)atoi(args[1]), NULL,
                                  NULL)
                       : NULL;
    char b = 1;
    if (lk == NULL || dlock_acquire(lk, 10000) != DLOCK_OK)
        return 3;
    if (write(atoi(args[2]), &b, 1) != 1)
        return 4;
    for (;;)
        pause();
}

/* A SIGKILLed holder leaves its key to the lease: busy at once, free once
 * the lease ran out. */
static void faults__sigkilled_holder_frees_after_lease(void **state)
{
    const char *name = h_name("killed");
    dlock_client *c = h_client(uri);
    dlock_lock *b = new_lock(c, name, 0, NULL, NULL);
    struct h_gate g;
    char fd[16];
    int64_t killed;
    pid_t pid;

    (void)state;
    h_gate_init(&g);
    snprintf(fd, sizeof fd, "%d", g.fd[1]);
    pid = h_spawn("hold", name, "2000", fd);
    assert_true(h_gate_wait(&g, 30000));
    kill(pid, SIGKILL);
    killed = h_now_ms();
    assert_int_equal(h_wait(pid), 128 + SIGKILL);
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
    assert_int_equal(dlock_acquire(b, 2000 + 10000), DLOCK_OK);
    /* Not before the key's lease ran out: it was renewed at most 2/3 of a
     * lease before the kill, so at least a third of it remained. */
    assert_true(h_now_ms() - killed >= 2000 / 3 - 50);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(b);
    dlock_client_close(c);
    h_gate_close(&g);
}

static atomic_int a_lost;
static void note_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)code;
    (void)p;
    fprintf(stderr, "  on_lost: %s\n", why);
    atomic_fetch_add(&a_lost, 1);
}

/* Polls dlock_held() every millisecond and notes when it first says no. */
struct held_watch {
    dlock_lock *lk;
    atomic_bool stop;
    atomic_llong off_ms; /* 0 until seen */
};

static void *held_watch_main(void *arg)
{
    struct held_watch *hw = arg;
    for (int i = 0; i < 60000 && !atomic_load(&hw->stop); i++) {
        if (!dlock_held(hw->lk)) {
            atomic_store(&hw->off_ms, h_now_ms());
            break;
        }
        h_sleep_ms(1);
    }
    return NULL;
}

/*
 * A waiter survives a server restart. With the lock saved to disk before
 * the restart (what persistence gives), the holder keeps it through the
 * restart (in doubt until a renewal finds its key) and the waiter gets it
 * when the holder releases. Without persistence the restart frees every
 * lock: the holder must stop believing it holds at once, not at its next
 * renewal (a third of the 30 s lease here), and before the waiter can be
 * granted the lock; then it is told (on_lost: the renewal on a new
 * connection finds the server restarted and the key gone), and its
 * release says DLOCK_ELOST. Both modes; the restart is a clean one
 * (setnx) or a crash (hash: SIGKILL, timed from the kill itself).
 */
static void faults__server_restart_survived_by_waiter(void **state)
{
    (void)state;
    for (int run = 0; run < 4; run++) {
        int persist = run % 2 == 0, hash = run >= 2;
        const char *name = h_name("restart");
        const char *u = h_uri_with(hash ? "mode=hash" : "mode=setnx");
        dlock_client *ca = h_client(u), *cb = h_client(u);
        dlock_lock *a = new_lock(ca, name, persist ? 3000 : 30000, note_lost,
                                 NULL);
        struct held_watch hw = {.lk = a};
        struct waiter w = {0};
        redisContext *rc;
        int64_t t0;
        pthread_t t, th;

        atomic_store(&a_lost, 0);
        atomic_store(&hw.off_ms, 0);
        atomic_store(&hw.stop, false);
        assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
        w.lk = new_lock(cb, name, 0, NULL, NULL);
        w.timeout = 30000;
        atomic_store(&w.rc, 1);
        pthread_create(&t, NULL, waiter_main, &w);
        h_sleep_ms(300);
        if (persist) {
            rc = raw();
            freeReplyObject(rcmd(rc, "SAVE"));
            redisFree(rc);
            ctl("restart redis");
            h_sleep_ms(2500); /* the waiter is back and waiting */
            assert_int_equal(atomic_load(&w.rc), 1);
            assert_true(dlock_held(a));
            assert_int_equal(atomic_load(&a_lost), 0);
            t0 = h_now_ms();
            assert_int_equal(dlock_release(a), DLOCK_OK);
            pthread_join(t, NULL);
            assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
            assert_true(atomic_load(&w.done_ms) >= t0);
        } else {
            pthread_create(&th, NULL, held_watch_main, &hw);
            assert_true(dlock_held(a));
            if (!hash) {
                t0 = h_now_ms();
                ctl("restart redis");
            } else {
                pid_t srv = server_pid("redis");
                t0 = h_now_ms();
                assert_int_equal(kill(srv, SIGKILL), 0);
                ctl("start redis");
            }
            pthread_join(t, NULL);
            assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
            for (int i = 0; i < 1000 && atomic_load(&a_lost) == 0; i++)
                h_sleep_ms(10);
            /* The watcher has seen it by now (lost implies not held). */
            for (int i = 0; i < 100 && atomic_load(&hw.off_ms) == 0; i++)
                h_sleep_ms(10);
            atomic_store(&hw.stop, true);
            pthread_join(th, NULL);
            fprintf(stderr,
                    "  %s, %s: held 0 after %lld ms, waiter granted after "
                    "%lld ms\n",
                    hash ? "hash" : "setnx",
                    hash ? "SIGKILL and start" : "ctl restart",
                    atomic_load(&hw.off_ms)
                        ? (long long)(atomic_load(&hw.off_ms) - t0)
                        : -1LL,
                    (long long)(atomic_load(&w.done_ms) - t0));
            /* Stopped believing before the other client was granted. */
            assert_true(atomic_load(&hw.off_ms) != 0);
            assert_true(atomic_load(&hw.off_ms) <= atomic_load(&w.done_ms));
            assert_int_equal(atomic_load(&a_lost), 1);
            assert_false(dlock_held(a));
            assert_int_equal(dlock_release(a), DLOCK_ELOST);
        }
        assert_int_equal(dlock_release(w.lk), DLOCK_OK);
        dlock_lock_free(a);
        dlock_lock_free(w.lk);
        dlock_client_close(ca);
        dlock_client_close(cb);
        /* Tidy: drop the saved file so later restarts start empty. */
        rc = raw();
        freeReplyObject(rcmd(rc, "FLUSHALL"));
        freeReplyObject(rcmd(rc, "SAVE"));
        redisFree(rc);
    }
}

/* A paused server (SIGSTOP: it accepts TCP but never answers) and a
 * stopped one both give DLOCK_ECONNECT within timeout=, never a hang. */
static void faults__paused_and_stopped_server_time_out(void **state)
{
    const char *u = h_uri_with("timeout=400ms");
    dlock_client *c = h_client(u), *c2 = NULL;
    dlock_lock *lk = new_lock(c, h_name("paused"), 0, NULL, NULL);
    int64_t t0;
    int rc;

    (void)state;
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    ctl("pause redis");
    t0 = h_now_ms();
    rc = dlock_try_acquire(lk);
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 < 400 + SLACK_MS);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "no answer within 400 ms"));
    /* A new client: TCP connects (the kernel answers), the server not. */
    t0 = h_now_ms();
    rc = dlock_client_open(&c2, u, NULL);
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 < 400 + SLACK_MS);
    dlock_client_close(c2);
    /* A timed acquire keeps retrying until its own deadline, no longer. */
    t0 = h_now_ms();
    rc = dlock_acquire(lk, 1000);
    assert_true(rc == DLOCK_ECONNECT || rc == DLOCK_ETIMEDOUT);
    assert_true(h_now_ms() - t0 < 1000 + 400 + SLACK_MS);
    ctl("resume redis");
    /* Stopped: refused at once. */
    ctl("stop redis");
    t0 = h_now_ms();
    assert_int_equal(dlock_try_acquire(lk), DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 < 400 + SLACK_MS);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "connect"));
    ctl("start redis");
    /* [B-CONN-1]: the broken session was replaced. */
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

static char logged[8192];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static void keep_log(int level, const char *msg, void *p)
{
    (void)level;
    (void)p;
    pthread_mutex_lock(&log_mu);
    strncat(logged, msg, sizeof logged - strlen(logged) - 2);
    strcat(logged, "\n");
    pthread_mutex_unlock(&log_mu);
}

/* Passwords reach neither messages nor logs, right or wrong. */
static void faults__password_never_in_messages(void **state)
{
    static const char pw[] = "s3cret-Pa55-ZQ";
    const char *base = getenv("DLOCK_TEST_REDIS_URI");
    char good[256], bad[256], acl[256];
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    redisContext *rc = raw();
    dlock_client *c = NULL;
    dlock_lock *lk;

    (void)state;
    o.log = keep_log;
    o.log_level = DLOCK_LOG_DEBUG;
    freeReplyObject(rcmd(rc, "CONFIG SET requirepass %s", pw));
    snprintf(good, sizeof good, "redis://:%s@%s", pw, base + 8);
    snprintf(bad, sizeof bad, "redis://:%s-wrong@%s", pw, base + 8);
    snprintf(acl, sizeof acl, "redis://default:%s@%s?mode=hash", pw,
             base + 8);

    /* No password: refused, NOAUTH. */
    assert_int_not_equal(dlock_client_open(&c, base, &o), DLOCK_OK);
    fprintf(stderr, "  no password: %s\n", dlock_client_errmsg(c));
    dlock_client_close(c);
    /* Wrong password: the message has the server's words, not ours. */
    assert_int_not_equal(dlock_client_open(&c, bad, &o), DLOCK_OK);
    fprintf(stderr, "  wrong password: %s\n", dlock_client_errmsg(c));
    assert_null(strstr(dlock_client_errmsg(c), pw));
    assert_non_null(strstr(dlock_client_errmsg(c), "AUTH"));
    dlock_client_close(c);
    /* Right password, both AUTH forms; a failing call's message. */
    for (int i = 0; i < 2; i++) {
        dlock_info info = DLOCK_INFO_INIT;
        c = NULL;
        assert_int_equal(dlock_client_open(&c, i ? acl : good, &o), DLOCK_OK);
        dlock_client_info(c, &info);
        assert_null(strstr(info.uri, pw));
        lk = new_lock(c, pw, 0, NULL, NULL); /* even as a lock name */
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        assert_int_equal(dlock_release(lk), DLOCK_ENOTHELD);
        assert_null(strstr(dlock_lock_errmsg(lk), pw));
        dlock_lock_free(lk);
        dlock_client_close(c);
    }
    /* The server goes away under a client with a password. */
    c = NULL;
    assert_int_equal(dlock_client_open(&c, good, &o), DLOCK_OK);
    lk = new_lock(c, "pw-down", 0, NULL, NULL);
    freeReplyObject(rcmd(rc, "CLIENT KILL TYPE normal SKIPME yes"));
    int rcode = dlock_try_acquire(lk);
    fprintf(stderr, "  after kill: %d %s\n", rcode, dlock_lock_errmsg(lk));
    assert_null(strstr(dlock_lock_errmsg(lk), pw));
    dlock_lock_free(lk);
    dlock_client_close(c);
    freeReplyObject(rcmd(rc, "CONFIG SET requirepass %s", ""));
    redisFree(rc);
    pthread_mutex_lock(&log_mu);
    assert_null(strstr(logged, pw));
    pthread_mutex_unlock(&log_mu);
}

/* Lock, fence and channel keys share one hash tag, whatever the name; long
 * names give bounded keys. */
static void faults__hostile_names_share_one_tag(void **state)
{
    static const char *const names[] = {"a}b{c", "{", "}", "{}", "x{y}z",
                                        "new\nline", "quote\"'", "sp ace"};
    redisContext *rc = raw();
    dlock_client *c = h_client(uri);
    char *big = malloc(10001);

    (void)state;
    memset(big, '}', 10000);
    big[10000] = '\0';
    for (size_t i = 0; i <= 8; i++) {
        const char *n = i < 8 ? names[i] : big;
        char full[12000];
        dlock_lock *lk;
        redisReply *r;

        freeReplyObject(rcmd(rc, "FLUSHDB"));
        snprintf(full, sizeof full, "%s", n);
        lk = new_lock(c, full, 0, NULL, NULL);
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        r = rcmd(rc, "KEYS dlock:*");
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, 2); /* the lock and its fence */
        for (size_t k = 0; k < 2; k++) {
            const char *key = r->element[k]->str;
            const char *open = strchr(key, '{');
            const char *close = open ? strchr(open, '}') : NULL;
            assert_non_null(close);
            /* The tag is the whole escaped name: nothing after it but the
             * key's own suffix. */
            assert_true(close[1] == '\0' || strcmp(close, "}:fence") == 0);
            assert_true(r->element[k]->len < 500);
        }
        assert_int_equal(
            strchr(r->element[0]->str, '}') - r->element[0]->str,
            strchr(r->element[1]->str, '}') - r->element[1]->str);
        assert_memory_equal(r->element[0]->str, r->element[1]->str,
                            (size_t)(strchr(r->element[0]->str, '}') -
                                     r->element[0]->str));
        freeReplyObject(r);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        dlock_lock_free(lk);
    }
    free(big);
    dlock_client_close(c);
    redisFree(rc);
}

/*
 * [B-WAIT-1] at the vtable: wait() must return at once for a release that
 * came after the EBUSY attempt, even when nobody was subscribed yet (the
 * re-check after subscribing) and when the channel was already subscribed
 * before the attempt (the message counts). Without either, the waiter
 * would sleep the whole 5 s given here.
 */
static void faults__wait_sees_release_after_attempt(void **state)
{
    const struct dlock_backend *b = dlock_backend_find("redis");
    const struct dlock_mode *m = NULL;
    struct dlock_uri *u = NULL;
    struct dlock_session *s1 = NULL, *s2 = NULL;
    struct dlock_request ra = {0}, rb = {0};
    struct dlock_grant ga = {0}, gb = {0};
    char err[256], name[64];
    void *ctx = NULL;
    uint32_t hint = 0;
    int64_t t0;

    (void)state;
    assert_non_null(b);
    assert_int_equal(dlock_uri_parse(&u, uri, err, sizeof err), DLOCK_OK);
    /* The mode as core picks it: the URI names none, so setnx. */
    assert_int_equal(b->pick_mode(u, &m, err, sizeof err), DLOCK_OK);
    assert_null(m);
    assert_null(u->mode);
    m = b->modes[0];
    assert_string_equal(m->name, "setnx");
    assert_non_null(m->wait);
    assert_int_equal(b->ctx_open(&ctx, u, m, err, sizeof err), DLOCK_OK);
    assert_int_equal(b->open(&s1, u, ctx, err, sizeof err), DLOCK_OK);
    assert_int_equal(b->open(&s2, u, ctx, err, sizeof err), DLOCK_OK);
    s1->backend = s2->backend = b; /* as core does */
    snprintf(name, sizeof name, "gap-%d", (int)getpid());
    ra.name = rb.name = name;
    ra.name_len = rb.name_len = strlen(name);
    ra.owner = "owner-a:1", ra.owner_len = 9;
    rb.owner = "owner-b:1", rb.owner_len = 9;
    ra.lease_ms = rb.lease_ms = 30000;
    ra.permits = rb.permits = 1; /* DLOCK_KIND_EXCLUSIVE, as {0} says */

    for (int subscribed_before = 0; subscribed_before < 2;
         subscribed_before++) {
        assert_int_equal(m->acquire(s1, &ra, 0, &ga, &hint), DLOCK_OK);
        if (subscribed_before) {
            /* A short wait leaves the channel subscribed (it lingers). */
            assert_int_equal(m->acquire(s2, &rb, 0, &gb, &hint), DLOCK_EBUSY);
            assert_int_equal(m->wait(s2, &rb, 200), DLOCK_OK);
        }
        assert_int_equal(m->acquire(s2, &rb, 0, &gb, &hint), DLOCK_EBUSY);
        assert_true(hint > 0 && hint <= 30000); /* the remaining TTL */
        /* The release lands between the attempt and the wait. */
        assert_int_equal(m->release(s1, &ra, &ga), DLOCK_OK);
        h_sleep_ms(50);
        t0 = h_now_ms();
        assert_int_equal(m->wait(s2, &rb, 5000), DLOCK_OK);
        assert_true(h_now_ms() - t0 < 2500);
        assert_int_equal(m->acquire(s2, &rb, 0, &gb, &hint), DLOCK_OK);
        assert_int_equal(m->release(s2, &rb, &gb), DLOCK_OK);
    }
    /* And a wait with no release runs its time out. The loop's last
     * release was published just now; under load its message can reach
     * the pub/sub thread after the next attempt and wake the wait early
     * (harmless: core retries), so let it land first. */
    h_sleep_ms(300);
    assert_int_equal(m->acquire(s1, &ra, 0, &ga, &hint), DLOCK_OK);
    assert_int_equal(m->acquire(s2, &rb, 0, &gb, &hint), DLOCK_EBUSY);
    t0 = h_now_ms();
    assert_int_equal(m->wait(s2, &rb, 300), DLOCK_OK);
    assert_true(h_now_ms() - t0 >= 250);
    assert_int_equal(m->release(s1, &ra, &ga), DLOCK_OK);
    b->close(s1);
    b->close(s2);
    b->ctx_close(ctx);
    dlock_uri_free(u);
}

/*
 * Fences strictly increase per grant, also when a release ended in doubt
 * and the same handle takes the lock again. The release must time out
 * without reaching the server, so that the key is still the handle's when
 * it acquires again: CLIENT PAUSE WRITE holds the release script back in
 * the server, and the client's timeout closes the connection, after which
 * Redis drops the held-back command (a SIGSTOPped server would run it on
 * SIGCONT: the bytes are in its socket). Before the fix the re-grant
 * handed back the fence of the grant before.
 */
static void faults__fence_grows_after_release_in_doubt(void **state)
{
    static const char *const modes[] = {"mode=setnx&timeout=300ms",
                                        "mode=hash&timeout=300ms"};
    redisContext *rc = raw();

    (void)state;
    for (size_t m = 0; m < 2; m++) {
        dlock_client *c = h_client(h_uri_with(modes[m]));
        dlock_lock *lk = new_lock(c, h_name("doubt"), 30000, NULL, NULL);
        uint64_t f1, f2;
        int rrc;

        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        f1 = dlock_fence(lk);
        freeReplyObject(rcmd(rc, "CLIENT PAUSE 3000 WRITE"));
        rrc = dlock_release(lk);
        fprintf(stderr, "  %s: release: %d %s\n", modes[m], rrc,
                dlock_lock_errmsg(lk));
        assert_int_equal(rrc, DLOCK_ECONNECT);
        h_sleep_ms(100); /* the server sees the connection closed */
        freeReplyObject(rcmd(rc, "CLIENT UNPAUSE"));
        /* The key is still ours: the release never ran. */
        assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
        f2 = dlock_fence(lk);
        fprintf(stderr, "  %s: fence %llu, then %llu\n", modes[m],
                (unsigned long long)f1, (unsigned long long)f2);
        assert_true(f2 > f1);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        dlock_lock_free(lk);
        dlock_client_close(c);
    }
    redisFree(rc);
}

/* ---- no descriptor of dlock's reaches an exec'd child ------------------ */

/* Child "idle GATE_FD": say it runs (its exec is done), then sleep until
 * killed (30 s at most). */
static int idle_child(char **args)
{
    char b = 1;
    if (write(atoi(args[0]), &b, 1) != 1)
        return 3;
    for (int i = 0; i < 3000; i++)
        h_sleep_ms(10);
    return 0;
}

/* The descriptors open now, 3 and up. */
static size_t open_fds(int *out, size_t cap)
{
    size_t n = 0;
    for (int fd = 3; fd < 1024 && n < cap; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            out[n++] = fd;
    return n;
}

/*
 * [B-EXEC-1] A process holding locks, with a waiter asleep on the same
 * names (setnx/hash: the pub/sub connection and its thread's eventfd),
 * forks and execs a child: the child has none of the descriptors dlock
 * opened, though the parent has several sockets (sessions, pub/sub,
 * Redlock's five nodes per session). The conformance suite checks a
 * holder's sessions; this adds what only waiting opens.
 */
static void exec_child_sees_no_descriptor(const char *const *uris, size_t n,
                                          size_t want_sockets)
{
    int before[256], during[256];
    size_t nbefore, nduring, sockets = 0;
    dlock_client *c[4];
    dlock_lock *held[4], *busy[4];
    struct waiter w[4];
    pthread_t t[4];
    struct h_gate gate;
    char fds[4096], gate_fd[16];
    pid_t pid;
    int leaked;

    assert_true(n <= 4);
    h_gate_init(&gate); /* the child's: before the snapshot */
    nbefore = open_fds(before, 256);
    for (size_t i = 0; i < n; i++) {
        const char *name = h_name("exec");
        c[i] = h_client(uris[i]);
        held[i] = new_lock(c[i], name, 0, NULL, NULL);
        assert_int_equal(dlock_acquire(held[i], 5000), DLOCK_OK);
        busy[i] = new_lock(c[i], name, 0, NULL, NULL);
        memset(&w[i], 0, sizeof w[i]);
        w[i].lk = busy[i];
        w[i].timeout = 20000;
        atomic_store(&w[i].rc, 1);
        pthread_create(&t[i], NULL, waiter_main, &w[i]);
    }
    h_sleep_ms(500); /* the waiters are subscribed and asleep */
    nduring = open_fds(during, 256);
    for (size_t i = 0; i < nduring; i++) {
        char link[64], target[256];
        ssize_t k;
        snprintf(link, sizeof link, "/proc/self/fd/%d", during[i]);
        k = readlink(link, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        sockets += strncmp(target, "socket:", 7) == 0;
    }
    fprintf(stderr, "  the parent has %zu sockets\n", sockets);
    assert_true(sockets >= want_sockets); /* or the test proves nothing */

    snprintf(gate_fd, sizeof gate_fd, "%d", gate.fd[1]);
    pid = h_spawn("idle", gate_fd, NULL, NULL);
    assert_true(h_gate_wait(&gate, 30000));
    leaked = h_foreign_fds(pid, before, nbefore, fds, sizeof fds);
    kill(pid, SIGKILL);
    h_wait(pid);
    if (leaked != 0)
        fail_msg("the child inherited %d descriptors:\n%s", leaked, fds);

    for (size_t i = 0; i < n; i++) {
        assert_int_equal(dlock_release(held[i]), DLOCK_OK);
        pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&w[i].rc), DLOCK_OK);
        assert_int_equal(dlock_release(busy[i]), DLOCK_OK);
        dlock_lock_free(held[i]);
        dlock_lock_free(busy[i]);
        dlock_client_close(c[i]);
    }
    h_gate_close(&gate);
}

static void faults__exec_child_sees_no_descriptor(void **state)
{
    const char *uris[2];
    char u0[1024], u1[1024];

    (void)state;
    snprintf(u0, sizeof u0, "%s", h_uri_with("mode=setnx"));
    snprintf(u1, sizeof u1, "%s", h_uri_with("mode=hash"));
    uris[0] = u0;
    uris[1] = u1;
    /* Per client: a session and the pub/sub connection. */
    exec_child_sees_no_descriptor(uris, 2, 4);
}

/*
 * The mode is picked once per client: redlock:// and redlock=1 make a
 * Redlock whatever mode= says, except hash, which is refused naming mode;
 * otherwise the backend leaves it to core (mode=, else setnx), and core
 * refuses an unknown mode= naming the modes. No server is needed: the
 * backend's pick_mode() and core's choice through a client that cannot
 * connect would prove the same, slower.
 */
static void faults__mode_is_picked_from_scheme_and_flag(void **state)
{
    static const struct {
        const char *uri, *want; /* want: the mode, NULL core's, "!" refused */
    } cases[] = {
        {"redis://h", NULL},
        {"redis://h?mode=hash", NULL},
        {"redis://h?mode=bogus", NULL},
        {"redlock://h1,h2,h3", "redlock"},
        {"redlock://h1?mode=setnx", "redlock"},
        {"redlock://h1?mode=REDLOCK", "redlock"},
        {"redlock://h1?mode=bogus", NULL},
        {"redis://h1,h2?redlock=1", "redlock"},
        {"redis://h1?redlock=yes&mode=setnx", "redlock"},
        {"redis://h1?redlock=0&mode=hash", NULL},
        {"redis://h1?redlock=1&mode=Hash", "!"},
        {"redlock://h1?mode=hash", "!"},
    };
    const struct dlock_backend *b = dlock_backend_find("redis");
    char err[256];

    (void)state;
    assert_non_null(b);
    assert_non_null(b->pick_mode);
    assert_ptr_equal(dlock_backend_find("redlock"), b);
    assert_string_equal(b->modes[0]->name, "setnx");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct dlock_uri *u = NULL;
        const struct dlock_mode *m = NULL;
        int rc;
        assert_int_equal(dlock_uri_parse(&u, cases[i].uri, err, sizeof err),
                         DLOCK_OK);
        err[0] = '\0';
        rc = b->pick_mode(u, &m, err, sizeof err);
        if (cases[i].want != NULL && strcmp(cases[i].want, "!") == 0) {
            assert_int_equal(rc, DLOCK_EINVAL);
            if (strstr(err, "mode: hash cannot be combined with redlock") ==
                NULL)
                fail_msg("%s: %s", cases[i].uri, err);
        } else {
            assert_int_equal(rc, DLOCK_OK);
            if (cases[i].want == NULL)
                assert_null(m);
            else if (m == NULL || strcmp(m->name, cases[i].want) != 0)
                fail_msg("%s: mode %s, expected %s", cases[i].uri,
                         m != NULL ? m->name : "(core's)", cases[i].want);
        }
        dlock_uri_free(u);
    }
}

/* Every parameter is checked, and the message names it. */
static void faults__bad_uris_name_the_parameter(void **state)
{
    static const struct {
        const char *suffix, *word;
    } cases[] = {
        {"?mode=bogus", "mode"},        {"/x", "db"},
        {"/70000", "db"},               {"/1?redlock=1", "db"},
        {"?mode=hash&redlock=1", "mode"}, {"?redlock=maybe", "redlock"},
        {"?node_timeout=10ms", "node_timeout"},
        {"?redlock=1&node_timeout=0", "node_timeout"},
        {"?redlock=1&node_timeout=1h", "node_timeout"},
        {"?redlock=1&drift=5", "drift"},
        {"?restart_delay=1s", "restart_delay"},
        {"?redlock=1&restart_delay=25h", "restart_delay"},
        {"?redlock=1&restart_delay=soon", "restart_delay"},
        {"?timeout=0", "timeout"},      {"?bogus=1", "bogus"},
        {"?sync_replicas=0", "sync_replicas"},
        {"?sync_replicas=many", "sync_replicas"},
        {"?sync_timeout=1s", "sync_timeout"},
        {"?sync_replicas=1&sync_timeout=10s", "sync_timeout"},
        {"?redlock=1&sync_replicas=1", "sync_replicas"},
        {"?redlock=1&sentinel=m", "sentinel"},
        {"?sentinel=", "sentinel"},
    };
    const char *base = getenv("DLOCK_TEST_REDIS_URI");
    char u[512];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dlock_client *c = NULL;
        snprintf(u, sizeof u, "%s%s", base, cases[i].suffix);
        assert_int_equal(dlock_client_open(&c, u, NULL), DLOCK_EINVAL);
        if (strstr(dlock_client_errmsg(c), cases[i].word) == NULL)
            fail_msg("%s: message does not name '%s': %s", u, cases[i].word,
                     dlock_client_errmsg(c));
        dlock_client_close(c);
    }
    /* Two hosts without redlock; a user without a password. */
    dlock_client *c = NULL;
    snprintf(u, sizeof u, "%s,127.0.0.1:1", base);
    assert_int_equal(dlock_client_open(&c, u, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "redlock"));
    dlock_client_close(c);
    c = NULL;
    snprintf(u, sizeof u, "redis://someone@%s", base + 8);
    assert_int_equal(dlock_client_open(&c, u, NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(c), "password"));
    dlock_client_close(c);
    /* A good db is selected: the key lands in db 3. */
    redisContext *rc = raw();
    c = NULL;
    snprintf(u, sizeof u, "%s/3", base);
    assert_int_equal(dlock_client_open(&c, u, NULL), DLOCK_OK);
    dlock_lock *lk = new_lock(c, "in-db-3", 0, NULL, NULL);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    freeReplyObject(rcmd(rc, "SELECT 3"));
    assert_int_equal(rint_(rc, "EXISTS dlock:{in-db-3}"), 1);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
    redisFree(rc);
}

/* ---- Redlock over five masters --------------------------------------------- */

static char rl_uri[1024];

static void redlock__acquires_with_two_stopped(void **state)
{
    dlock_client *c;
    dlock_lock *lk;

    (void)state;
    ctl("stop redis5 1");
    ctl("stop redis5 4");
    c = h_client(rl_uri);
    lk = new_lock(c, h_name("two-down"), 0, NULL, NULL);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    assert_int_equal(dlock_fence(lk), 0); /* no fencing on Redlock */
    assert_int_equal(dlock_renew(lk), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
    ctl("start redis5 1");
    ctl("start redis5 4");
}

static void redlock__fails_clearly_with_three_stopped(void **state)
{
    dlock_client *c = h_client(rl_uri);
    dlock_lock *lk = new_lock(c, h_name("three-down"), 0, NULL, NULL);
    int64_t t0;
    int rc;

    (void)state;
    ctl("stop redis5 2");
    ctl("stop redis5 3");
    ctl("stop redis5 5");
    t0 = h_now_ms();
    rc = dlock_acquire(lk, 1500);
    fprintf(stderr, "  three stopped: %s\n", dlock_lock_errmsg(lk));
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 < 1500 + SLACK_MS);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "majority is 3"));
    /* A new client cannot even open. */
    dlock_client *c2 = NULL;
    assert_int_equal(dlock_client_open(&c2, rl_uri, NULL), DLOCK_ECONNECT);
    dlock_client_close(c2);
    ctl("start redis5 2");
    ctl("start redis5 3");
    ctl("start redis5 5");
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* A paused node costs at most node_timeout per round; the lock is taken. */
static void redlock__paused_node_costs_node_timeout(void **state)
{
    dlock_client *c = h_client(rl_uri);
    dlock_lock *lk = new_lock(c, h_name("paused"), 0, NULL, NULL);
    int64_t t0;

    (void)state;
    ctl("pause redis5 3");
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    assert_true(h_now_ms() - t0 < 50 + SLACK_MS);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    ctl("resume redis5 3");
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* A raw connection to Redlock node i (1-based) of DLOCK_TEST_REDIS5_HOSTS. */
static redisContext *raw_node(int i)
{
    const char *p = getenv("DLOCK_TEST_REDIS5_HOSTS");
    struct timeval tv = {5, 0};
    redisContext *rc;

    assert_non_null(p);
    while (--i > 0 && p != NULL)
        if ((p = strchr(p, ',')) != NULL)
            p++;
    assert_non_null(p);
    rc = redisConnectWithTimeout("127.0.0.1", atoi(strchr(p, ':') + 1), tv);
    assert_non_null(rc);
    assert_int_equal(rc->err, 0);
    return rc;
}

/* A release whose majority answers late: nodes 4 and 5 no longer have the
 * key (as after a restart) and answer "not ours" at once, the three that
 * have it are paused. That is not "another owner's" (it was:
 * DLOCK_ENOTOWNER); it is in doubt, and once the three resume they run the
 * release that reached them, so another client gets the lock long before
 * its 30 s lease. */
static void redlock__late_majority_release_is_in_doubt(void **state)
{
    char u[1100], key[300];
    dlock_client *c, *c2;
    dlock_lock *lk, *lk2;
    const char *name = h_name("late-majority");
    int rc;

    (void)state;
    snprintf(u, sizeof u, "%s&timeout=600ms", rl_uri);
    snprintf(key, sizeof key, "dlock:{%s}", name);
    c = h_client(u);
    lk = new_lock(c, name, 30000, NULL, NULL);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    for (int i = 4; i <= 5; i++) {
        redisContext *rc5 = raw_node(i);
        assert_int_equal(rint_(rc5, "DEL %s", key), 1);
        redisFree(rc5);
    }
    ctl("pause redis5 1");
    ctl("pause redis5 2");
    ctl("pause redis5 3");
    rc = dlock_release(lk);
    fprintf(stderr, "  late majority: %s\n", dlock_lock_errmsg(lk));
    ctl("resume redis5 1");
    ctl("resume redis5 2");
    ctl("resume redis5 3");
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "none had our key"));
    c2 = h_client(rl_uri);
    lk2 = new_lock(c2, name, 0, NULL, NULL);
    assert_int_equal(dlock_acquire(lk2, 5000), DLOCK_OK);
    assert_int_equal(dlock_release(lk2), DLOCK_OK);
    dlock_lock_free(lk2);
    dlock_client_close(c2);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* A failed acquire whose SET lands late: node 3 lost the holder's key (as
 * after a restart) and is paused past node_timeout while a contender tries
 * the name, so the contender's SET runs there once it resumes, after the
 * round gave up on it. The contender owes node 3 a release and pays it
 * first in its next round that reaches the node: the key does not sit
 * there for its 30 s lease. (The paper: a client that failed unlocks every
 * instance, even those it believed it could not lock.) */
static void redlock__failed_acquire_takes_back_late_set(void **state)
{
    char key[300];
    const char *name = h_name("late-set");
    dlock_client *c1 = h_client(rl_uri), *c2 = h_client(rl_uri);
    dlock_lock *lk1 = new_lock(c1, name, 30000, NULL, NULL);
    dlock_lock *lk2 = new_lock(c2, name, 30000, NULL, NULL);
    redisContext *rc3;

    (void)state;
    snprintf(key, sizeof key, "dlock:{%s}", name);
    assert_int_equal(dlock_acquire(lk1, 5000), DLOCK_OK);
    /* Connects the contender's session to all five: busy, nothing to undo. */
    assert_int_equal(dlock_acquire(lk2, 0), DLOCK_EBUSY);
    rc3 = raw_node(3);
    assert_int_equal(rint_(rc3, "DEL %s", key), 1);
    redisFree(rc3);
    ctl("pause redis5 3");
    assert_int_equal(dlock_acquire(lk2, 0), DLOCK_EBUSY);
    ctl("resume redis5 3");
    rc3 = raw_node(3); /* behind the late SET, which came first */
    assert_int_equal(rint_(rc3, "EXISTS %s", key), 1);
    /* Past the longest backoff (2 s) the session's next round, on any
     * name, reaches node 3 again and pays it first. */
    h_sleep_ms(2100);
    {
        dlock_lock *other = new_lock(c2, h_name("late-set-other"), 0, NULL,
                                     NULL);
        assert_int_equal(dlock_acquire(other, 5000), DLOCK_OK);
        assert_int_equal(rint_(rc3, "EXISTS %s", key), 0);
        assert_int_equal(dlock_release(other), DLOCK_OK);
        dlock_lock_free(other);
    }
    dlock_lock_free(lk2);
    dlock_client_close(c2);
    redisFree(rc3);
    assert_int_equal(dlock_release(lk1), DLOCK_OK);
    dlock_lock_free(lk1);
    dlock_client_close(c1);
}

/* A release that cannot reach a node holding our key: node 3 is paused
 * through a renewal (it is dropped from the session) and through the
 * release, so the release is never sent to it. It is owed: closing the
 * client sends it, and the key does not sit there for its 30 s lease. */
static void redlock__release_pays_a_node_it_missed(void **state)
{
    char key[300];
    const char *name = h_name("owed-release");
    dlock_client *c = h_client(rl_uri);
    dlock_lock *lk = new_lock(c, name, 30000, NULL, NULL);
    redisContext *rc3;

    (void)state;
    snprintf(key, sizeof key, "dlock:{%s}", name);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    ctl("pause redis5 3");
    assert_int_equal(dlock_renew(lk), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    ctl("resume redis5 3");
    rc3 = raw_node(3);
    assert_int_equal(rint_(rc3, "EXISTS %s", key), 1);
    dlock_lock_free(lk);
    dlock_client_close(c);
    assert_int_equal(rint_(rc3, "EXISTS %s", key), 0);
    redisFree(rc3);
}

/* A renewal that a majority answers "not yours" loses the lock, and takes
 * its key back from the nodes that still had it at once: before, they kept
 * it until the lease ended (30 s here) unless the user released. */
static void redlock__lost_renewal_takes_back_its_keys(void **state)
{
    char key[300];
    const char *name = h_name("lost-renewal");
    dlock_client *c = h_client(rl_uri);
    dlock_lock *lk = new_lock(c, name, 30000, NULL, NULL);
    redisContext *rc[6];

    (void)state;
    snprintf(key, sizeof key, "dlock:{%s}", name);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    for (int i = 1; i <= 5; i++) {
        rc[i] = raw_node(i);
        assert_int_equal(rint_(rc[i], "EXISTS %s", key), 1);
    }
    for (int i = 1; i <= 3; i++) /* a majority forgets it */
        assert_int_equal(rint_(rc[i], "DEL %s", key), 1);
    assert_int_equal(dlock_renew(lk), DLOCK_ELOST);
    assert_false(dlock_held(lk));
    for (int i = 4; i <= 5; i++)
        assert_int_equal(rint_(rc[i], "EXISTS %s", key), 0);
    for (int i = 1; i <= 5; i++)
        redisFree(rc[i]);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* Child "contend NAME DIR SECONDS": take NAME again and again; inside, make
 * DIR/inside with O_EXCL (it exists: two holders) and remove it. */
static int contend_child(char **args)
{
    /* Nodes come back and count at once, as before the delayed restart:
     * this test is about quorum and validity. */
    dlock_client *c = h_client(h_uri_with("restart_delay=0"));
    char inside[300], path[320], text[64];
    int64_t end = h_now_ms() + atoi(args[2]) * 1000;
    int overlaps = 0, held = 0, lost_inside = 0;
    dlock_lock *lk;

    if (c == NULL)
        return 3;
    lk = new_lock(c, args[0], 1000, NULL, NULL);
    snprintf(inside, sizeof inside, "%s/inside", args[1]);
    while (h_now_ms() < end) {
        int rc = dlock_acquire(lk, 3000);
        if (rc != DLOCK_OK) {
            h_sleep_ms(10);
            continue;
        }
        int fd = open(inside, O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (fd < 0) {
            overlaps++;
        } else {
            close(fd);
            held++;
            h_sleep_ms(3);
            /* Only a holder still sure of its lock may leave the mark for
             * the next to find; one that lost it mid-way says so. */
            if (!dlock_held(lk))
                lost_inside++;
            unlink(inside);
        }
        dlock_release(lk);
        h_sleep_ms(1);
    }
    snprintf(path, sizeof path, "%s/result-%d", args[1], (int)getpid());
    snprintf(text, sizeof text, "%d %d %d\n", held, overlaps, lost_inside);
    write_file(path, text);
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

/*
 * Four processes contend while nodes stop and restart (empty: no
 * persistence). At most two nodes are down at once, and each change waits
 * a lease before the next, so a majority never holds two owners' keys at
 * once: an overlap would be a bug of quorum or validity.
 */
static void redlock__no_two_holders_through_restarts(void **state)
{
    const char *name = h_name("chaos");
    char dir[300];
    pid_t pids[4];
    int total = 0, overlaps = 0, lost_inside = 0;

    (void)state;
    snprintf(dir, sizeof dir, "%s/chaos", h_scratch());
    mkdir(dir, 0700);
    for (int i = 0; i < 4; i++)
        pids[i] = h_spawn("contend", name, dir, "12");
    h_sleep_ms(1000);
    for (int round = 0; round < 2; round++) {
        int a = 1 + round * 2, b = a + 1;
        ctl("stop redis5 %d", a);
        h_sleep_ms(1200);
        ctl("stop redis5 %d", b);
        h_sleep_ms(1200);
        ctl("start redis5 %d", a);
        h_sleep_ms(1200);
        ctl("start redis5 %d", b);
        h_sleep_ms(1200);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(h_wait(pids[i]), 0);
    for (int i = 0; i < 4; i++) {
        char path[320], text[64];
        int h = 0, o = 0, l = 0;
        snprintf(path, sizeof path, "%s/result-%d", dir, (int)pids[i]);
        assert_true(read_file(path, text, sizeof text));
        assert_int_equal(sscanf(text, "%d %d %d", &h, &o, &l), 3);
        total += h;
        overlaps += o;
        lost_inside += l;
    }
    fprintf(stderr, "  %d holdings, %d overlaps, %d lost mid-way\n", total,
            overlaps, lost_inside);
    assert_int_equal(overlaps, 0);
    assert_true(total >= 20); /* it did contend */
}

/* ---- Redlock's delayed restart --------------------------------------------- */

/* The base URI with parameters: "redlock://hosts?params". */
static const char *rl_with(char *buf, size_t cap, const char *params)
{
    snprintf(buf, cap, "%s?%s", uri, params);
    return buf;
}

/* Nodes started (or restarted) moments ago do not count until they have
 * been up for the delay: wait until a lock can be had, bounded. */
static void rl_wait_usable(const char *u, uint32_t max_ms)
{
    dlock_client *c = h_client(u);
    dlock_lock *lk = new_lock(c, h_name("usable"), 0, NULL, NULL);
    assert_int_equal(dlock_acquire(lk, max_ms), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* The PIDs of Redlock nodes (1-based indexes), for rl_crash_restart. */
static void rl_pids(const int *nodes, size_t n, pid_t *out)
{
    char which[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(which, sizeof which, "redis5 %d", nodes[i]);
        out[i] = server_pid(which);
    }
}

/* Crash nodes (SIGKILL, all within microseconds; no persistence: they
 * come back empty) whose PIDs rl_pids() gave, and start them again. */
static void rl_crash_restart(const int *nodes, const pid_t *pids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(kill(pids[i], SIGKILL), 0);
    for (size_t i = 0; i < n; i++)
        ctl("start-nowait redis5 %d", nodes[i]);
    for (size_t i = 0; i < n; i++)
        ctl("wait redis5 %d", nodes[i]);
}

/*
 * The hazard, step by step: a holder's lock is on all five nodes; three of
 * them crash and come back empty. With restart_delay=0 another client is
 * granted the lock at once, the holder still believing it holds: two
 * holders. With the delay (here 4 s: the longest lease the client asked
 * for) the restarted nodes count for nothing until they have been up that
 * long: the other client is refused, with a message that says why, the
 * holder's renewal says the lock is lost, and the lock is granted again
 * only after the delay.
 */
static void redlock__restarted_nodes_sit_out_their_delay(void **state)
{
    static const int three[] = {1, 2, 3};
    char ua[1200], uoff[1200], name[64];
    dlock_client *ch, *cb, *coff;
    dlock_lock *h, *b, *off, *other;
    pid_t srv[3];
    int64_t crashed, got;
    int rc;

    (void)state;
    rl_with(ua, sizeof ua, "lease=2s");
    rl_with(uoff, sizeof uoff, "lease=2s&restart_delay=0");
    rl_wait_usable(ua, 20000);
    snprintf(name, sizeof name, "%s", h_name("delay"));
    ch = h_client(ua);
    cb = h_client(ua);
    coff = h_client(uoff);
    {
        /* No watchdog: a renewal of h's between the crash and the checks
         * below would already find it lost (as it should), and hide the
         * two holders this test shows without the delay. A 4 s lease: no
         * longer than b's delay. */
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.lease_ms = 4000;
        o.flags = DLOCK_LOCK_NO_WATCHDOG;
        assert_int_equal(dlock_lock_new(&h, ch, name, &o), DLOCK_OK);
    }
    b = new_lock(cb, name, 0, NULL, NULL);
    off = new_lock(coff, name, 0, NULL, NULL);
    /* b's client once asked for a 4 s lease: its delay is 4 s now. */
    other = new_lock(cb, h_name("longer"), 4000, NULL, NULL);
    assert_int_equal(dlock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_release(other), DLOCK_OK);
    assert_int_equal(dlock_acquire(h, 0), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);

    rl_pids(three, 3, srv);
    crashed = h_now_ms();
    rl_crash_restart(three, srv, 3);
    /* Without the delay: granted while h holds. */
    rc = dlock_acquire(off, 3000);
    fprintf(stderr, "  restart_delay=0 after the restart: %d (%s)\n", rc,
            dlock_lock_errmsg(off));
    assert_int_equal(rc, DLOCK_OK);
    assert_true(dlock_held(h)); /* two holders: what the delay prevents */
    assert_int_equal(dlock_release(off), DLOCK_OK);
    /* With it: refused, and told why. */
    rc = dlock_try_acquire(b);
    fprintf(stderr, "  with the delay: %d (%s)\n", rc,
            dlock_lock_errmsg(b));
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_non_null(strstr(dlock_lock_errmsg(b), "restarted less than 4000"));
    /* The holder's renewal: three nodes say the lock is gone (a node not
     * reconnected in time leaves it in doubt: ask again, bounded). */
    rc = dlock_renew(h);
    for (int i = 0; i < 10 && rc == DLOCK_ECONNECT; i++) {
        h_sleep_ms(100);
        rc = dlock_renew(h);
    }
    assert_int_equal(rc, DLOCK_ELOST);
    assert_false(dlock_held(h));
    assert_int_equal(dlock_release(h), DLOCK_ELOST);
    /* Granted again, but not before the restarted nodes were up 4 s. */
    assert_int_equal(dlock_acquire(b, 15000), DLOCK_OK);
    got = h_now_ms();
    fprintf(stderr, "  granted again %lld ms after the crash\n",
            (long long)(got - crashed));
    assert_true(got - crashed >= 4000);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(b);
    dlock_lock_free(off);
    dlock_lock_free(other);
    dlock_client_close(ch);
    dlock_client_close(cb);
    dlock_client_close(coff);
}

/*
 * Child "rlhist NAME DIR DELAY" (DELAY "on" or "off": restart_delay=0):
 * take NAME again and again with a 6 s lease, hold it ~1.8 s and, while
 * dlock_held() says yes, do a read-modify-write of the unfenced counter
 * DIR/counter. Each holding writes its start to DIR/current (the nemesis
 * waits for one to crash nodes under it). Log one line per holding to
 * DIR/log-<pid>:
 *   "<t0> <t_end> <wrote>"
 * t0 when acquire returned, t_end the last dlock_held() sample that still
 * said yes (CLOCK_MONOTONIC ms, one clock for all processes), wrote 1 if
 * the counter was written. Runs until DIR/stop exists (at most 120 s).
 */
static int rlhist_child(char **args)
{
    char u[1200], path[320], stop[320], cpath[320], cur[320];
    dlock_client *c;
    dlock_lock *lk;
    FILE *log;
    int64_t end = h_now_ms() + 120000;
    struct stat st;

    snprintf(u, sizeof u, "%s",
             h_uri_with(strcmp(args[2], "off") == 0
                            ? "lease=6s&restart_delay=0"
                            : "lease=6s"));
    c = h_client(u);
    if (c == NULL)
        return 3;
    lk = new_lock(c, args[0], 0, NULL, NULL);
    snprintf(path, sizeof path, "%s/log-%d", args[1], (int)getpid());
    snprintf(stop, sizeof stop, "%s/stop", args[1]);
    snprintf(cpath, sizeof cpath, "%s/counter", args[1]);
    snprintf(cur, sizeof cur, "%s/current", args[1]);
    log = fopen(path, "w");
    if (log == NULL)
        return 4;
    setvbuf(log, NULL, _IOLBF, 0);
    while (h_now_ms() < end && stat(stop, &st) != 0) {
        int64_t t0, t_end;
        int wrote = 0;
        if (dlock_acquire(lk, 1000) != DLOCK_OK) {
            h_sleep_ms(5);
            continue;
        }
        t0 = t_end = h_now_ms();
        {
            char text[32];
            snprintf(text, sizeof text, "%lld\n", (long long)t0);
            write_file(cur, text);
        }
        h_sleep_ms(900);
        if (dlock_held(lk)) {
            char text[32] = "0";
            FILE *f;
            long v;
            t_end = h_now_ms();
            f = fopen(cpath, "r");
            if (f != NULL) {
                if (fgets(text, sizeof text, f) == NULL)
                    text[0] = '0';
                fclose(f);
            }
            v = atol(text);
            h_sleep_ms(20); /* widen the read-modify-write */
            f = fopen(cpath, "w");
            if (f != NULL) {
                fprintf(f, "%ld\n", v + 1);
                fclose(f);
            }
            wrote = 1;
            if (dlock_held(lk)) {
                t_end = h_now_ms();
                h_sleep_ms(900);
                if (dlock_held(lk))
                    t_end = h_now_ms();
            }
        }
        fprintf(log, "%lld %lld %d\n", (long long)t0, (long long)t_end,
                wrote);
        dlock_release(lk);
        h_sleep_ms(1);
    }
    fclose(log);
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

struct hold {
    long long t0, t1;
    int wrote, pid;
};

static int hold_cmp(const void *a, const void *b)
{
    const struct hold *x = a, *y = b;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

struct history {
    int holdings, writes, counter, overlaps;
};

/* Read the logs of pids: holdings, writes, overlapping held windows of
 * two processes, and the counter's final value. */
static struct history history_check(const char *dir, const pid_t *pids,
                                    int n)
{
    struct history h = {0, 0, 0, 0};
    struct hold *v = NULL;
    size_t len = 0, cap = 0;
    char path[320], line[128];
    FILE *f;

    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/log-%d", dir, (int)pids[i]);
        f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof line, f) != NULL) {
            struct hold x;
            if (sscanf(line, "%lld %lld %d", &x.t0, &x.t1, &x.wrote) != 3)
                continue;
            x.pid = (int)pids[i];
            if (len == cap) {
                cap = cap ? cap * 2 : 256;
                v = realloc(v, cap * sizeof *v);
                assert_non_null(v);
            }
            v[len++] = x;
        }
        fclose(f);
    }
    qsort(v, len, sizeof *v, hold_cmp);
    for (size_t i = 0; i < len; i++) {
        h.writes += v[i].wrote;
        for (size_t j = i + 1; j < len && v[j].t0 < v[i].t1; j++)
            if (v[j].pid != v[i].pid) {
                if (h.overlaps < 5)
                    fprintf(stderr,
                            "  overlap: pid %d held %lld..%lld, pid %d "
                            "from %lld\n",
                            v[i].pid, v[i].t0, v[i].t1, v[j].pid, v[j].t0);
                h.overlaps++;
            }
    }
    h.holdings = (int)len;
    snprintf(path, sizeof path, "%s/counter", dir);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(line, sizeof line, f) != NULL)
            h.counter = atoi(line);
        fclose(f);
    }
    free(v);
    return h;
}

/*
 * Four processes contend (6 s leases, ~1.8 s holdings) while three of the
 * five nodes crash and come back empty, several times: the common setup
 * with no persistence. Overlaps are found from the processes' logged held
 * windows (dlock_held() samples) and the unfenced counter, not from
 * dlock's state. With restart_delay=0 the test must find an overlap (it
 * stops at the first cycle that shows one), proving it can fail; with the
 * delay, none in every cycle. DLOCK_TEST_REDLOCK_CYCLES=N runs N cycles of
 * each, without stopping early: a longer measurement.
 */
static void rl_history(bool delay, int cycles, struct history *out)
{
    const char *env = getenv("DLOCK_TEST_REDLOCK_CYCLES");
    bool measure = env != NULL && atoi(env) > 0 && atoi(env) <= 1000;
    static const int sets[][3] = {{1, 2, 3}, {3, 4, 5}, {1, 4, 5},
                                  {2, 3, 4}, {1, 2, 5}, {2, 4, 5}};
    const char *name;
    char dir[300], path[320], u[1200], seen[32] = "", now_text[32];
    pid_t pids[4], srv[3];
    int done = 0;

    /* The nodes a previous test restarted count again first. */
    rl_wait_usable(rl_with(u, sizeof u, "lease=6s"), 20000);
    name = h_name(delay ? "hist-on" : "hist-off");

    snprintf(dir, sizeof dir, "%s/%s", h_scratch(), name);
    mkdir(dir, 0700);
    for (int i = 0; i < 4; i++)
        pids[i] = h_spawn("rlhist", name, dir, delay ? "on" : "off");
    h_sleep_ms(1500);
    if (measure)
        cycles = atoi(env);
    snprintf(path, sizeof path, "%s/current", dir);
    for (int k = 0; k < cycles; k++) {
        rl_pids(sets[k % 6], 3, srv);
        /* Crash as a holding begins (within ~20 ms: the poll), so that
         * it still runs when the nodes are back (~0.5 s, more when the
         * machine is loaded), whatever the load; 5 s at most. */
        if (read_file(path, seen, sizeof seen) == false)
            seen[0] = '\0';
        for (int i = 0; i < 250; i++) {
            h_sleep_ms(20);
            if (read_file(path, now_text, sizeof now_text) &&
                strcmp(now_text, seen) != 0)
                break;
        }
        rl_crash_restart(sets[k % 6], srv, 3);
        done++;
        /* Let the delay (the 6 s lease, up to 1 s of rounding) pass, and
         * the others hold again. */
        h_sleep_ms(8000);
        /* Without the delay, the first cycle that let two in is enough
         * (the logs are line-buffered: readable while they run). */
        if (!delay && !measure && history_check(dir, pids, 4).overlaps > 0)
            break;
    }
    snprintf(path, sizeof path, "%s/stop", dir);
    write_file(path, "stop\n");
    for (int i = 0; i < 4; i++)
        assert_int_equal(h_wait(pids[i]), 0);
    *out = history_check(dir, pids, 4);
    fprintf(stderr,
            "  restart_delay %s: %d crash cycles (3 of 5 nodes each), %d "
            "holdings, %d writes, counter %d (%d lost), %d overlaps\n",
            delay ? "on" : "off", done, out->holdings, out->writes,
            out->counter, out->writes - out->counter, out->overlaps);
}

static void redlock__no_two_holders_with_delayed_restart(void **state)
{
    struct history h;

    (void)state;
    /* Three cycles crash every node at least once ({1,2,3}, {3,4,5},
     * {1,4,5}); DLOCK_TEST_REDLOCK_CYCLES runs more. */
    rl_history(true, 3, &h);
    assert_int_equal(h.overlaps, 0);
    assert_int_equal(h.writes, h.counter); /* no update lost */
    assert_true(h.holdings >= 6);          /* it did contend */
}

static void redlock__without_delay_two_holders_are_seen(void **state)
{
    struct history h;

    (void)state;
    rl_history(false, 8, &h);
    assert_true(h.overlaps > 0);
}

static void redlock__exec_child_sees_no_descriptor(void **state)
{
    char u[1200];
    const char *uris[1];

    (void)state;
    uris[0] = rl_with(u, sizeof u, "restart_delay=0");
    /* A session's five node connections at least. */
    exec_child_sees_no_descriptor(uris, 1, 5);
}

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {
        {"stopped", stopped_child},
        {"hold", hold_child},
        {"contend", contend_child},
        {"idle", idle_child},
        {"rlhist", rlhist_child},
        {NULL, NULL},
    };
    const struct CMUnitTest interop[] = {
        cmocka_unit_test(interop__redisson_holds_dlock_waits),
        cmocka_unit_test(interop__dlock_holds_redisson_waits),
        cmocka_unit_test(interop__fencing_shared_with_rfencedlock),
    };
    const struct CMUnitTest faults[] = {
        cmocka_unit_test(faults__mode_is_picked_from_scheme_and_flag),
        cmocka_unit_test(faults__bad_uris_name_the_parameter),
        cmocka_unit_test(faults__hostile_names_share_one_tag),
        cmocka_unit_test(faults__wait_sees_release_after_attempt),
        cmocka_unit_test(faults__sigstopped_holder_lost_and_fenced),
        cmocka_unit_test(faults__sigkilled_holder_frees_after_lease),
        cmocka_unit_test(faults__password_never_in_messages),
        cmocka_unit_test(faults__paused_and_stopped_server_time_out),
        cmocka_unit_test(faults__server_restart_survived_by_waiter),
        cmocka_unit_test(faults__fence_grows_after_release_in_doubt),
        cmocka_unit_test(faults__exec_child_sees_no_descriptor),
    };
    const struct CMUnitTest redlock[] = {
        cmocka_unit_test(redlock__acquires_with_two_stopped),
        cmocka_unit_test(redlock__fails_clearly_with_three_stopped),
        cmocka_unit_test(redlock__paused_node_costs_node_timeout),
        cmocka_unit_test(redlock__failed_acquire_takes_back_late_set),
        cmocka_unit_test(redlock__release_pays_a_node_it_missed),
        cmocka_unit_test(redlock__lost_renewal_takes_back_its_keys),
        cmocka_unit_test(redlock__late_majority_release_is_in_doubt),
        cmocka_unit_test(redlock__no_two_holders_through_restarts),
        cmocka_unit_test(redlock__exec_child_sees_no_descriptor),
        cmocka_unit_test(redlock__restarted_nodes_sit_out_their_delay),
        cmocka_unit_test(redlock__without_delay_two_holders_are_seen),
        cmocka_unit_test(redlock__no_two_holders_with_delayed_restart),
    };
    int rc = 0;

    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--group") == 0)
            snprintf(group, sizeof group, "%s", argv[i + 1]);
    /* Children first: they need no scratch directory of their own. */
    h_child_dispatch(argc, argv, roles);
    uri = h_setup(argc, argv);
    if (strcmp(group, "redlock") == 0) {
        /* The quorum tests stop and start nodes and expect them back at
         * once: they run without the delayed restart, which has tests of
         * its own below. */
        snprintf(rl_uri, sizeof rl_uri, "%s?restart_delay=0", uri);
        rc = cmocka_run_group_tests_name("redis/redlock", redlock, NULL,
                                         NULL);
    } else if (strcmp(group, "interop") == 0) {
        rc = cmocka_run_group_tests_name("redis/interop", interop, NULL,
                                         NULL);
    } else if (strcmp(group, "faults") == 0) {
        rc = cmocka_run_group_tests_name("redis/faults", faults, NULL, NULL);
    } else {
        fprintf(stderr, "usage: %s --uri URI --group interop|faults|redlock\n",
                argv[0]);
        rc = 2;
    }
    h_cleanup();
    return rc;
}
