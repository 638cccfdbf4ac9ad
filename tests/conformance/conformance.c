/*
 * conformance.c: the one suite every backend and mode must pass, on the
 * public API alone. Run as `conformance --uri URI`; meson runs it once per
 * enabled backend and mode against a real server (tests/meson.build).
 *
 * A case that needs a capability the backend does not claim checks that the
 * API refuses cleanly instead (e.g. shared mode), or says what it skipped.
 * Test names say area and case; promises of backend.h are named where a case
 * checks one.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define PROCS 8
#define CYCLES 500
/* Slack for "returns within the deadline": generous, since these machines
 * are shared and noisy; the point is that it returns, not how fast. */
#define SLACK_MS 1500

static const char *uri;
static dlock_client *cl;
static uint32_t caps;

static int setup(void **state)
{
    (void)state;
    cl = h_client(uri);
    if (cl == NULL)
        return -1;
    caps = h_caps(cl);
    dlock_info info;
    dlock_client_info(cl, &info);
    fprintf(stderr, "conformance: %s (mode %s)\n", info.uri, info.mode);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(cl);
    cl = NULL;
    return 0;
}

/* ---- mutual exclusion ------------------------------------------------------ */

/* Child role "counter NAME PATH": CYCLES locked increments of PATH. */
static int counter_child(char **args)
{
    const char *name = args[0], *path = args[1];
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    dlock_lock *lk;
    int fd, bad = 0;

    if (c == NULL)
        return 3;
    lk = h_lock(c, name, 0, 0);
    fd = open(path, O_RDWR);
    if (lk == NULL || fd < 0)
        return 4;
    for (int i = 0; i < CYCLES && !bad; i++) {
        long v = 0;
        char buf[32];
        int rc = dlock_acquire(lk, 120000);
        if (rc != DLOCK_OK) {
            fprintf(stderr, "child: acquire: %s\n", dlock_lock_errmsg(lk));
            bad = 5;
            break;
        }
        /* Unprotected read-increment-write: only the lock keeps it exact. */
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            v = strtol(buf, NULL, 10);
        }
        n = snprintf(buf, sizeof buf, "%-20ld", v + 1);
        if (pwrite(fd, buf, (size_t)n, 0) != n)
            bad = 6;
        if (dlock_release(lk) != DLOCK_OK) {
            fprintf(stderr, "child: release: %s\n", dlock_lock_errmsg(lk));
            bad = 7;
        }
    }
    close(fd);
    dlock_lock_free(lk);
    dlock_client_close(c);
    return bad;
}

static void conformance__mutual_exclusion_8_processes(void **state)
{
    char path[512], buf[32] = {0};
    const char *name = h_name("mutex");
    pid_t pids[PROCS];
    int fd;

    (void)state;
    snprintf(path, sizeof path, "%s/counter", h_scratch());
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    for (int i = 0; i < PROCS; i++)
        pids[i] = h_spawn("counter", name, path, NULL);
    for (int i = 0; i < PROCS; i++)
        assert_int_equal(h_wait(pids[i]), 0);
    assert_true(pread(fd, buf, sizeof buf - 1, 0) > 0);
    close(fd);
    assert_int_equal(strtol(buf, NULL, 10), PROCS * CYCLES);
}

struct thread_job {
    dlock_client *c;
    const char *name;
    long *counter;
    int failures;
};

static void *counter_thread(void *arg)
{
    struct thread_job *job = arg;
    dlock_lock *lk = h_lock(job->c, job->name, 0, 0);

    for (int i = 0; i < 200 && lk != NULL; i++) {
        if (dlock_acquire(lk, 60000) != DLOCK_OK) {
            job->failures++;
            continue;
        }
        long v = *(volatile long *)job->counter;
        sched_yield();
        *(volatile long *)job->counter = v + 1;
        if (dlock_release(lk) != DLOCK_OK)
            job->failures++;
    }
    dlock_lock_free(lk);
    return NULL;
}

/* Owners are handles, not threads or processes: two handles in one process
 * exclude each other. */
static void conformance__threads_share_client_exclude(void **state)
{
    struct thread_job jobs[4];
    pthread_t t[4];
    long counter = 0;
    const char *name = h_name("threads");

    (void)state;
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct thread_job){cl, name, &counter, 0};
        pthread_create(&t[i], NULL, counter_thread, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].failures, 0);
    }
    assert_int_equal(counter, 4 * 200);
}

/* ---- try, timed, release ---------------------------------------------------- */

static void conformance__try_lock_busy(void **state)
{
    const char *name = h_name("try");
    dlock_client *other = h_client(uri);
    dlock_lock *a = h_lock(cl, name, 0, 0), *b, *c2;
    int64_t t0;

    (void)state;
    assert_non_null(other);
    b = h_lock(cl, name, 0, 0);
    c2 = h_lock(other, name, 0, 0);
    assert_int_equal(dlock_try_acquire(a), DLOCK_OK);
    assert_true(dlock_held(a));
    t0 = h_now_ms();
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
    assert_int_equal(dlock_try_acquire(c2), DLOCK_EBUSY);
    assert_true(h_now_ms() - t0 < SLACK_MS);
    assert_false(dlock_held(b));
    assert_true(strlen(dlock_lock_errmsg(b)) > 0);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_false(dlock_held(a));
    assert_int_equal(dlock_try_acquire(c2), DLOCK_OK);
    assert_int_equal(dlock_release(c2), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(c2);
    dlock_client_close(other);
}

static void conformance__timed_acquire_times_out(void **state)
{
    const char *name = h_name("timed");
    dlock_lock *a = h_lock(cl, name, 0, 0), *b = h_lock(cl, name, 0, 0);
    int64_t t0, took;

    (void)state;
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(b, 400), DLOCK_ETIMEDOUT);
    took = h_now_ms() - t0;
    assert_true(took >= 390);
    assert_true(took < 400 + SLACK_MS);
    assert_false(dlock_held(b));
    assert_int_equal(dlock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

struct delayed {
    dlock_lock *lk;
    uint32_t after_ms;
    int rc;
};

static void *release_later(void *arg)
{
    struct delayed *d = arg;
    h_sleep_ms(d->after_ms);
    d->rc = dlock_release(d->lk);
    return NULL;
}

/* A waiter gets the lock soon after the holder releases, and a handle may
 * be released on another thread than the one that acquired it. */
static void conformance__timed_acquire_gets_released_lock(void **state)
{
    const char *name = h_name("handoff");
    dlock_client *other = h_client(uri);
    dlock_lock *a = h_lock(cl, name, 0, 0), *b;
    struct delayed d;
    pthread_t t;
    int64_t t0;

    (void)state;
    assert_non_null(other);
    b = h_lock(other, name, 0, 0);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    d = (struct delayed){a, 300, -100};
    pthread_create(&t, NULL, release_later, &d);
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(b, 10000), DLOCK_OK);
    assert_true(h_now_ms() - t0 >= 250);
    pthread_join(t, NULL);
    assert_int_equal(d.rc, DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(other);
}

static void conformance__release_not_held(void **state)
{
    dlock_lock *a = h_lock(cl, h_name("notheld"), 0, 0);

    (void)state;
    assert_int_equal(dlock_release(a), DLOCK_ENOTHELD);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_release(a), DLOCK_ENOTHELD);
    assert_int_equal(dlock_renew(a), DLOCK_ENOTHELD);
    assert_int_equal(dlock_fence(a), 0);
    dlock_lock_free(a);
}

/* Owner-only release: a holder whose lease ran out and was taken over must
 * not remove the new holder's lock. Lease backends only; others cannot
 * lose a lock to expiry. */
static void conformance__owner_only_release(void **state)
{
    const char *name = h_name("owner");
    dlock_client *other = h_client(uri);
    dlock_lock *a, *b, *probe;
    int rc;

    (void)state;
    assert_non_null(other);
    /* Another handle cannot release what it does not hold. */
    a = h_lock(cl, name, 800, DLOCK_LOCK_NO_WATCHDOG);
    b = h_lock(other, name, 0, 0);
    probe = h_lock(cl, name, 0, 0);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_ENOTHELD);
    assert_int_equal(dlock_try_acquire(probe), DLOCK_EBUSY);
    if (caps & DLOCK_CAP_LEASE) {
        h_sleep_ms(1200); /* a's lease runs out; nobody renews it */
        assert_false(dlock_held(a));
        assert_int_equal(dlock_acquire(b, 5000), DLOCK_OK);
        rc = dlock_release(a);
        assert_true(rc == DLOCK_ENOTOWNER || rc == DLOCK_ELOST);
        /* b still holds it. */
        assert_true(dlock_held(b));
        assert_int_equal(dlock_try_acquire(probe), DLOCK_EBUSY);
        assert_int_equal(dlock_release(b), DLOCK_OK);
    } else {
        assert_int_equal(dlock_release(a), DLOCK_OK);
    }
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(probe);
    dlock_client_close(other);
}

/* ---- reentrancy ---------------------------------------------------------------- */

static void conformance__reentrancy_counts_levels(void **state)
{
    const char *name = h_name("reentrant");
    dlock_lock *a = h_lock(cl, name, 0, 0), *b = h_lock(cl, name, 0, 0);
    uint64_t fence;

    (void)state;
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    fence = dlock_fence(a);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(a, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_depth(a), 3);
    assert_int_equal(dlock_fence(a), fence); /* one backend acquisition */
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_true(dlock_held(a));
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_depth(a), 0);
    assert_int_equal(dlock_try_acquire(b), DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* ---- fencing ---------------------------------------------------------------------- */

static void conformance__fencing_strictly_increases(void **state)
{
    const char *name = h_name("fence");
    dlock_client *other = h_client(uri);
    dlock_lock *h[2];
    uint64_t last = 0;

    (void)state;
    assert_non_null(other);
    h[0] = h_lock(cl, name, 0, 0);
    h[1] = h_lock(other, name, 0, 0);
    for (int i = 0; i < 20; i++) {
        dlock_lock *lk = h[i % 2];
        assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
        if (caps & DLOCK_CAP_FENCING) {
            assert_true(dlock_fence(lk) > last);
            last = dlock_fence(lk);
        } else {
            assert_int_equal(dlock_fence(lk), 0);
        }
        assert_int_equal(dlock_release(lk), DLOCK_OK);
    }
    dlock_lock_free(h[0]);
    dlock_lock_free(h[1]);
    dlock_client_close(other);
}

/* ---- crash release ---------------------------------------------------------------- */

/* Child role "hold NAME LEASE_MS GATE_FD": take the lock, say so on the
 * gate, and wait to be killed. */
static int hold_child(char **args)
{
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    dlock_lock *lk;
    char b = 1;

    lk = c != NULL ? h_lock(c, args[0], (uint32_t)atoi(args[1]), 0) : NULL;
    if (lk == NULL || dlock_acquire(lk, 10000) != DLOCK_OK)
        return 3;
    if (write(atoi(args[2]), &b, 1) != 1)
        return 4;
    for (;;)
        pause(); /* until SIGKILL */
}

static void conformance__holder_killed_frees_lock(void **state)
{
    const char *name = h_name("killed");
    struct h_gate gate;
    dlock_lock *b = h_lock(cl, name, 0, 0);
    uint32_t lease = 1500;
    uint64_t fence_before;
    char lease_s[16], fd_s[16];
    pid_t pid;

    (void)state;
    h_gate_init(&gate);
    snprintf(lease_s, sizeof lease_s, "%u", lease);
    snprintf(fd_s, sizeof fd_s, "%d", gate.fd[1]);
    pid = h_spawn("hold", name, lease_s, fd_s);
    assert_true(h_gate_wait(&gate, 30000));
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
    kill(pid, SIGKILL);
    assert_int_equal(h_wait(pid), 128 + SIGKILL);
    /* Freed when the kernel or server notices: at once for connection- or
     * process-bound locks, after the lease (plus a session timeout for
     * ZooKeeper) otherwise. */
    assert_int_equal(dlock_acquire(b, lease + 30000), DLOCK_OK);
    fence_before = dlock_fence(b);
    if (caps & DLOCK_CAP_FENCING)
        assert_true(fence_before > 0);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(b);
    h_gate_close(&gate);
}

/* ---- lost locks ---------------------------------------------------------------------- */

static int lost_calls;
static int lost_code;

static void count_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)why;
    (void)p;
    lost_calls++;
    lost_code = code;
}

/* A lease that runs out unrenewed is lost: dlock_held() turns false by the
 * client's own clock, renewal reports it, the callback fires once. */
static void conformance__lease_expiry_reported_lost(void **state)
{
    const char *name = h_name("expiry");
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *a = NULL, *b = h_lock(cl, name, 0, 0);
    int rc;

    (void)state;
    if (!(caps & DLOCK_CAP_LEASE)) {
        dlock_lock_free(b);
        skip(); /* covered by the fault suite's dropped renewals */
    }
    o.lease_ms = 800;
    o.flags = DLOCK_LOCK_NO_WATCHDOG;
    o.on_lost = count_lost;
    assert_int_equal(dlock_lock_new(&a, cl, name, &o), DLOCK_OK);
    lost_calls = 0;
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_true(dlock_held(a));
    h_sleep_ms(1300);
    assert_false(dlock_held(a));
    assert_int_equal(dlock_acquire(b, 5000), DLOCK_OK);
    rc = dlock_renew(a);
    assert_int_equal(rc, DLOCK_ELOST);
    assert_int_equal(lost_calls, 1);
    assert_int_equal(lost_code, DLOCK_ELOST);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_ELOST); /* release first */
    assert_int_equal(dlock_release(a), DLOCK_ELOST);
    assert_true(dlock_held(b));
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* With the watchdog on, a lock held past several leases stays held. */
static void conformance__watchdog_keeps_lease(void **state)
{
    const char *name = h_name("watchdog");
    dlock_lock *a = h_lock(cl, name, 900, 0), *b = h_lock(cl, name, 0, 0);

    (void)state;
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    h_sleep_ms(2500);
    assert_true(dlock_held(a));
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
    assert_int_equal(dlock_renew(a), DLOCK_OK);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(b), DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* ---- shared mode ----------------------------------------------------------------------- */

static void conformance__shared_readers_exclude_writer(void **state)
{
    const char *name = h_name("shared");
    dlock_client *other = h_client(uri);
    dlock_lock *r1, *r2 = NULL, *w;

    (void)state;
    assert_non_null(other);
    if (!(caps & DLOCK_CAP_SHARED)) {
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.flags = DLOCK_LOCK_SHARED;
        assert_int_equal(dlock_lock_new(&r2, cl, name, &o),
                         DLOCK_EUNSUPPORTED);
        assert_null(r2);
        dlock_client_close(other);
        return;
    }
    r1 = h_lock(cl, name, 0, DLOCK_LOCK_SHARED);
    r2 = h_lock(other, name, 0, DLOCK_LOCK_SHARED);
    w = h_lock(other, name, 0, 0);
    assert_int_equal(dlock_acquire(r1, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(r2, 0), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(w), DLOCK_EBUSY);
    assert_int_equal(dlock_release(r1), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(w), DLOCK_EBUSY);
    assert_int_equal(dlock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_acquire(w, 5000), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(r1), DLOCK_EBUSY);
    assert_int_equal(dlock_release(w), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(other);
}

/* ---- names ----------------------------------------------------------------------------- */

static void conformance__hostile_names(void **state)
{
    static const char *const names[] = {
        "/", "..", ".", "a/../b", "../../etc/passwd", "with space",
        "quote'single", "quote\"double", "back\\slash", "new\nline",
        "tab\there", "{braces}", "{", "}", "%41", "a%2Fb", "a/b",
        "semi;colon", "'; DROP TABLE dlock_locks; --", "\xe9\x94\x81",
        "\xf0\x9f\x94\x92 lock", "*?[]", "-dash", "~tilde", "$HOME",
    };
    size_t n = sizeof names / sizeof names[0];
    dlock_lock *held[sizeof names / sizeof names[0]];
    char prefix[64];

    (void)state;
    snprintf(prefix, sizeof prefix, "%s/", h_name("names"));
    /* Hold them all at once: distinct names must not collide. */
    for (size_t i = 0; i < n; i++) {
        char full[256];
        snprintf(full, sizeof full, "%s%s", prefix, names[i]);
        held[i] = h_lock(cl, full, 0, 0);
        assert_non_null(held[i]);
        if (dlock_acquire(held[i], 5000) != DLOCK_OK)
            fail_msg("name %zu (%s): %s", i, names[i],
                     dlock_lock_errmsg(held[i]));
    }
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(dlock_release(held[i]), DLOCK_OK);
        dlock_lock_free(held[i]);
    }
}

static void conformance__long_names(void **state)
{
    size_t len = 10000;
    char *x = malloc(len + 1), *y = malloc(len + 1);
    dlock_lock *a, *b, *a2;

    (void)state;
    /* Two 10 000-byte names that differ only in the last byte. */
    snprintf(x, len + 1, "%s", h_name("long"));
    memset(x + strlen(x), 'n', len - strlen(x));
    x[len] = '\0';
    memcpy(y, x, len + 1);
    y[len - 1] = 'm';
    a = h_lock(cl, x, 0, 0);
    b = h_lock(cl, y, 0, 0);
    a2 = h_lock(cl, x, 0, 0);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(a2), DLOCK_EBUSY);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(a2);
    free(x);
    free(y);
}

static void conformance__bad_arguments(void **state)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = (dlock_lock *)&o;
    char *big = malloc(DLOCK_NAME_MAX + 2);

    (void)state;
    assert_int_equal(dlock_lock_new(&lk, cl, "", NULL), DLOCK_EINVAL);
    assert_null(lk);
    assert_non_null(strstr(dlock_client_errmsg(cl), "name"));
    assert_int_equal(dlock_lock_new(&lk, cl, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(&lk, cl, "bad\xff", NULL), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_client_errmsg(cl), "UTF-8"));
    assert_int_equal(dlock_lock_new(&lk, cl, "over\xc0\xafong", NULL),
                     DLOCK_EINVAL);
    memset(big, 'x', DLOCK_NAME_MAX + 1);
    big[DLOCK_NAME_MAX + 1] = '\0';
    assert_int_equal(dlock_lock_new(&lk, cl, big, NULL), DLOCK_EINVAL);
    free(big);
    assert_int_equal(dlock_lock_new(NULL, cl, "x", NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(&lk, NULL, "x", NULL), DLOCK_EINVAL);
    o.version = 99;
    assert_int_equal(dlock_lock_new(&lk, cl, "x", &o), DLOCK_EINVAL);
    o.version = DLOCK_LOCK_OPTIONS_VERSION;
    o.flags = 1u << 20;
    assert_int_equal(dlock_lock_new(&lk, cl, "x", &o), DLOCK_EINVAL);
    assert_int_equal(dlock_acquire(NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_release(NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_renew(NULL), DLOCK_EINVAL);
    assert_false(dlock_held(NULL));
    assert_int_equal(dlock_fence(NULL), 0);
    dlock_lock_free(NULL);
    dlock_client_close(NULL);
}

/* Closing a client releases what its handles hold. */
static void conformance__client_close_releases(void **state)
{
    const char *name = h_name("close");
    dlock_client *other = h_client(uri);
    dlock_lock *a, *b = h_lock(cl, name, 0, 0);

    (void)state;
    assert_non_null(other);
    a = h_lock(other, name, 0, 0);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
    dlock_client_close(other);
    assert_false(dlock_held(a));
    assert_int_equal(dlock_acquire(a, 0), DLOCK_ECLOSED);
    assert_int_equal(dlock_acquire(b, 5000), DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a); /* still valid memory after the close */
    dlock_lock_free(b);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conformance__mutual_exclusion_8_processes),
        cmocka_unit_test(conformance__threads_share_client_exclude),
        cmocka_unit_test(conformance__try_lock_busy),
        cmocka_unit_test(conformance__timed_acquire_times_out),
        cmocka_unit_test(conformance__timed_acquire_gets_released_lock),
        cmocka_unit_test(conformance__release_not_held),
        cmocka_unit_test(conformance__owner_only_release),
        cmocka_unit_test(conformance__reentrancy_counts_levels),
        cmocka_unit_test(conformance__fencing_strictly_increases),
        cmocka_unit_test(conformance__holder_killed_frees_lock),
        cmocka_unit_test(conformance__lease_expiry_reported_lost),
        cmocka_unit_test(conformance__watchdog_keeps_lease),
        cmocka_unit_test(conformance__shared_readers_exclude_writer),
        cmocka_unit_test(conformance__hostile_names),
        cmocka_unit_test(conformance__long_names),
        cmocka_unit_test(conformance__bad_arguments),
        cmocka_unit_test(conformance__client_close_releases),
    };
    int failed;

    static const struct h_role roles[] = {
        {"counter", counter_child},
        {"hold", hold_child},
        {NULL, NULL},
    };

    h_child_dispatch(argc, argv, roles);
    uri = h_setup(argc, argv);
    failed = cmocka_run_group_tests_name("conformance", tests, setup,
                                         teardown);
    h_cleanup();
    return failed;
}
