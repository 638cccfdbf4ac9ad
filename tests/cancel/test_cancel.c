/*
 * test_cancel.c: cancellation and asynchronous acquires (issue 19), on the
 * public API alone, against the real server of each backend and mode. Run
 * as `test_cancel --uri URI`; meson runs it once per entry of the
 * conformance list (suite `cancel`). [B-CANCEL-1], [B-QUEUED-1].
 *
 * "Holding nothing" is always checked from outside: after the cancelled
 * waiter returns and the holder releases, an independent client must take
 * the lock at once (a try, no wait).
 *
 * DLOCK_CANCEL_RACE=N sets the race's iterations (default 300; the long
 * run of docs/design.md is N=10000); DLOCK_CANCEL_FILTER=PATTERN runs only
 * the cases whose names match (cmocka's filter, e.g. "*race*").
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cmocka.h>

#include "../conformance/harness.h"

/* The bound is 100 ms; the assertion is generous for sanitizer
 * builds on a shared machine, and the measured figure is printed. */
#define CANCEL_BOUND_MS 1000

static const char *uri;
static dlock_client *holder_c, *other_c;
static uint32_t caps;

static int setup(void **state)
{
    dlock_info info = DLOCK_INFO_INIT;

    (void)state;
    holder_c = h_client(uri);
    other_c = h_client(uri);
    if (holder_c == NULL || other_c == NULL)
        return -1;
    caps = h_caps(holder_c);
    dlock_client_info(holder_c, &info);
    fprintf(stderr, "cancel: %s (mode %s)\n", info.uri, info.mode);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_close(holder_c);
    dlock_client_close(other_c);
    return 0;
}

/* ---- a waiter on its own thread ----------------------------------------------- */

struct waiter {
    dlock_lock *lk;
    dlock_cancel *cx;
    uint32_t timeout_ms;
    int rc;
    int64_t returned_ms;
    pthread_t th;
};

static void *waiter_run(void *arg)
{
    struct waiter *w = arg;

    w->rc = dlock_acquire_cancellable(w->lk, w->timeout_ms, w->cx);
    w->returned_ms = h_now_ms();
    return NULL;
}

static void waiter_start(struct waiter *w, dlock_lock *lk, dlock_cancel *cx)
{
    w->lk = lk;
    w->cx = cx;
    w->timeout_ms = DLOCK_WAIT_FOREVER;
    w->rc = 1;
    assert_int_equal(pthread_create(&w->th, NULL, waiter_run, w), 0);
}

/* The race's round and the cancel's offset from the release, for the
 * message of a failure (-1: not in the race). */
static long race_round = -1;
static int race_offset_us;

/* After the holder let go: an independent client takes the name at once,
 * so the cancelled waiter left nothing behind. */
static void assert_free(const char *name)
{
    dlock_lock *c = h_lock(other_c, name, 0, 0);
    int rc = dlock_try_acquire(c);

    if (rc != DLOCK_OK)
        fprintf(stderr, "cancel: '%s' not free (race round %ld, cancel at "
                "%+d us): %s\n", name, race_round, race_offset_us,
                dlock_lock_errmsg(c));
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(dlock_release(c), DLOCK_OK);
    dlock_lock_free(c);
}

/* The common shape: a holder holds, a waiter (on client wc) blocks
 * forever, stop() interrupts it; it must return expect within the bound,
 * holding nothing. */
static void interrupted_wait(const char *what, dlock_client *wc,
                             dlock_cancel *cx, void (*stop)(void *),
                             void *arg, int expect)
{
    const char *name = h_name(what);
    dlock_lock *held = h_lock(holder_c, name, 0, 0);
    dlock_lock *lk = h_lock(wc, name, 0, 0);
    struct waiter w;
    int64_t fired;

    assert_int_equal(dlock_acquire(held, 5000), DLOCK_OK);
    waiter_start(&w, lk, cx);
    h_sleep_ms(300); /* well inside its wait */
    fired = h_now_ms();
    stop(arg);
    assert_int_equal(pthread_join(w.th, NULL), 0);
    fprintf(stderr, "cancel: %s: returned %lld ms after the cancel\n", what,
            (long long)(w.returned_ms - fired));
    assert_int_equal(w.rc, expect);
    assert_true(w.returned_ms - fired <= CANCEL_BOUND_MS);
    assert_int_equal(dlock_lock_depth(lk), 0);
    assert_int_equal(dlock_release(held), DLOCK_OK);
    assert_free(name);
    dlock_lock_free(lk);
    dlock_lock_free(held);
}

static void fire(void *arg)
{
    dlock_cancel_fire(arg);
}

static void cancel__wait_forever_returns(void **state)
{
    dlock_cancel *cx;

    (void)state;
    assert_int_equal(dlock_cancel_new(&cx), DLOCK_OK);
    interrupted_wait("cx", other_c, cx, fire, cx, DLOCK_ECANCELED);
    assert_true(dlock_cancel_fired(cx));
    dlock_cancel_free(cx);
}

static void cancel__fired_before_the_call(void **state)
{
    const char *name = h_name("before");
    dlock_lock *lk = h_lock(other_c, name, 0, 0);
    dlock_cancel *cx;

    (void)state;
    assert_int_equal(dlock_cancel_new(&cx), DLOCK_OK);
    dlock_cancel_fire(cx);
    dlock_cancel_fire(cx); /* sticky, and twice is harmless */
    assert_int_equal(dlock_acquire_cancellable(lk, DLOCK_WAIT_FOREVER, cx),
                     DLOCK_ECANCELED);
    assert_int_equal(dlock_lock_depth(lk), 0);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "cancelled"));
    /* The same handle still works without the source. */
    assert_int_equal(dlock_acquire_cancellable(lk, 5000, NULL), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_cancel_free(cx);
}

static void shut(void *arg)
{
    dlock_client_shutdown(arg);
}

static void cancel__client_shutdown_wakes_waiter(void **state)
{
    dlock_client *wc = h_client(uri);
    dlock_lock *lk;

    (void)state;
    assert_non_null(wc);
    interrupted_wait("shutdown", wc, NULL, shut, wc, DLOCK_ECLOSED);
    /* Every later acquire says closed too. */
    lk = h_lock(wc, h_name("after-shutdown"), 0, 0);
    assert_int_equal(dlock_acquire(lk, 1000), DLOCK_ECLOSED);
    dlock_lock_free(lk);
    dlock_client_close(wc);
}

static dlock_cancel *signal_cx;

static void on_usr1(int sig)
{
    (void)sig;
    dlock_cancel_fire(signal_cx);
}

static void send_signal(void *arg)
{
    (void)arg;
    kill(getpid(), SIGUSR1);
}

static void cancel__from_signal_handler(void **state)
{
    struct sigaction sa, old;

    (void)state;
    assert_int_equal(dlock_cancel_new(&signal_cx), DLOCK_OK);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &old);
    interrupted_wait("signal", other_c, signal_cx, send_signal, NULL,
                     DLOCK_ECANCELED);
    sigaction(SIGUSR1, &old, NULL);
    dlock_cancel_free(signal_cx);
    signal_cx = NULL;
}

/* ---- the race: a cancel at a random instant against a grant ----------------- */

static void cancel__race_with_grant(void **state)
{
    const char *env = getenv("DLOCK_CANCEL_RACE");
    long n = env != NULL ? atol(env) : 300;
    const char *name = h_name("race");
    dlock_client *wc = h_client(uri);
    dlock_lock *held = h_lock(holder_c, name, 0, 0);
    dlock_lock *lk = h_lock(wc, name, 0, 0);
    long granted = 0, cancelled = 0;
    int64_t t0 = h_now_ms();

    (void)state;
    assert_non_null(wc);
    srand((unsigned)getpid());
    for (long i = 0; i < n; i++) {
        struct waiter w;
        dlock_cancel *cx;
        /* The cancel lands from 2 ms before the release to 2 ms after. */
        int offset_us = rand() % 4001 - 2000;

        assert_int_equal(dlock_cancel_new(&cx), DLOCK_OK);
        assert_int_equal(dlock_acquire(held, 10000), DLOCK_OK);
        waiter_start(&w, lk, cx);
        usleep((useconds_t)(rand() % 3000)); /* connecting, or waiting */
        if (offset_us < 0) {
            dlock_cancel_fire(cx);
            usleep((useconds_t)-offset_us);
            assert_int_equal(dlock_release(held), DLOCK_OK);
        } else {
            assert_int_equal(dlock_release(held), DLOCK_OK);
            usleep((useconds_t)offset_us);
            dlock_cancel_fire(cx);
        }
        assert_int_equal(pthread_join(w.th, NULL), 0);
        if (w.rc == DLOCK_OK) {
            granted++;
            assert_int_equal(dlock_release(lk), DLOCK_OK);
        } else {
            if (w.rc != DLOCK_ECANCELED)
                fprintf(stderr, "cancel: race %ld: %s: %s\n", i,
                        dlock_err_name(w.rc), dlock_lock_errmsg(lk));
            assert_int_equal(w.rc, DLOCK_ECANCELED);
            cancelled++;
        }
        assert_int_equal(dlock_lock_depth(lk), 0);
        /* Whatever happened, the waiter holds nothing now. */
        race_round = i;
        race_offset_us = offset_us;
        assert_free(name);
        dlock_cancel_free(cx);
    }
    race_round = -1;
    fprintf(stderr,
            "cancel: race: %ld iterations in %lld ms: %ld granted first, "
            "%ld cancelled, nothing left held\n",
            n, (long long)(h_now_ms() - t0), granted, cancelled);
    dlock_lock_free(lk);
    dlock_lock_free(held);
    dlock_client_close(wc);
}

/* ---- asynchronous acquires ---------------------------------------------------------- */

/* /proc/self/status's Threads: line. */
static int thread_count(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

struct grant_log {
    int order[1000];   /* job index, in completion order */
    int rc[1000];
    uint64_t fence[1000];
    int64_t from_ns[1000], to_ns[1000]; /* hold intervals */
    int n;
    int max_threads;
};

static struct grant_log glog;

struct job {
    int index;
};

static void on_done(dlock_lock *lk, int rc, void *payload)
{
    struct job *j = payload;
    int k = glog.n++;

    glog.order[k] = j->index;
    glog.rc[k] = rc;
    glog.from_ns[k] = (int64_t)h_now_ns();
    if (rc == DLOCK_OK) {
        glog.fence[k] = dlock_fence(lk);
        glog.to_ns[k] = (int64_t)h_now_ns();
        assert_int_equal(dlock_release(lk), DLOCK_OK);
    } else {
        glog.to_ns[k] = glog.from_ns[k];
    }
}

/* One epoll loop on the client's event descriptor until want callbacks
 * ran or the time is up. */
static void run_loop(dlock_client *qc, int want, int64_t limit_ms)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    int64_t end = h_now_ms() + limit_ms;

    assert_true(ep >= 0);
    ev.data.fd = dlock_client_event_fd(qc);
    assert_true(ev.data.fd >= 0);
    assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev), 0);
    while (glog.n < want && h_now_ms() < end) {
        struct epoll_event got;
        int t = thread_count();

        if (t > glog.max_threads)
            glog.max_threads = t;
        if (epoll_wait(ep, &got, 1, 200) == 1)
            dlock_client_dispatch(qc);
    }
    close(ep);
}

static dlock_client *queue_client(void)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *qc = NULL;

    o.flags = DLOCK_CLIENT_QUEUE_CALLBACKS;
    assert_int_equal(dlock_client_open(&qc, uri, &o), DLOCK_OK);
    return qc;
}

/*
 * N acquires of one name on one client, started while another client
 * holds it, driven by one epoll loop. Arrival is the order of the
 * dlock_acquire_async() calls; in a fair mode (DLOCK_CAP_FAIR with a
 * native wait) they must complete in that order. Mutual exclusion is
 * judged from the hold intervals and the fences.
 */
static void async_burst(int n, bool check_order)
{
    const char *name = h_name("async");
    dlock_client *qc = queue_client();
    dlock_lock *held = h_lock(holder_c, name, 0, 0);
    dlock_lock **lks = calloc((size_t)n, sizeof *lks);
    struct job *jobs = calloc((size_t)n, sizeof *jobs);
    int64_t t0;
    int before = thread_count();

    assert_non_null(lks);
    assert_non_null(jobs);
    memset(&glog, 0, sizeof glog);
    assert_int_equal(dlock_acquire(held, 5000), DLOCK_OK);
    t0 = h_now_ms();
    for (int i = 0; i < n; i++) {
        lks[i] = h_lock(qc, name, 0, 0);
        jobs[i].index = i;
        assert_int_equal(
            dlock_acquire_async(lks[i], DLOCK_WAIT_FOREVER, NULL, on_done,
                                &jobs[i]),
            DLOCK_OK);
    }
    /* Let the first ones reach the server queue, then let go. */
    h_sleep_ms(200);
    assert_int_equal(dlock_release(held), DLOCK_OK);
    run_loop(qc, n, 120000);
    fprintf(stderr,
            "cancel: async: %d acquires done in %lld ms; threads %d before, "
            "at most %d during\n",
            glog.n, (long long)(h_now_ms() - t0), before, glog.max_threads);
    assert_int_equal(glog.n, n);
    for (int k = 0; k < n; k++) {
        assert_int_equal(glog.rc[k], DLOCK_OK);
        if (check_order && glog.order[k] != k)
            fail_msg("completion %d was acquire %d, not %d", k,
                     glog.order[k], k);
        if (k > 0) {
            assert_true(glog.from_ns[k] >= glog.to_ns[k - 1]);
            if (caps & DLOCK_CAP_FENCING)
                assert_true(glog.fence[k] > glog.fence[k - 1]);
        }
    }
    /* At most 8 acquire threads more than before, the backend's own, and
     * for MySQL one watcher per native wait (docs/design.md). */
    assert_true(glog.max_threads <= before + 2 * 8 + 4);
    for (int i = 0; i < n; i++)
        dlock_lock_free(lks[i]);
    dlock_lock_free(held);
    dlock_client_close(qc);
    free(lks);
    free(jobs);
}

static void async__acquires_complete_exclusively(void **state)
{
    (void)state;
    async_burst(50, false);
}

static void async__fair_mode_keeps_arrival_order_1000(void **state)
{
    (void)state;
    if ((caps & (DLOCK_CAP_FAIR | DLOCK_CAP_NATIVE_WAIT)) !=
        (DLOCK_CAP_FAIR | DLOCK_CAP_NATIVE_WAIT)) {
        fprintf(stderr, "cancel: skip: not a fair mode\n");
        return;
    }
    async_burst(1000, true);
}

/* Close with acquires pending: each done runs once, with DLOCK_ECLOSED,
 * before close returns; one cancelled by its source says DLOCK_ECANCELED. */
static void async__close_completes_pending(void **state)
{
    const char *name = h_name("async-close");
    dlock_client *qc = queue_client();
    dlock_lock *held = h_lock(holder_c, name, 0, 0);
    dlock_lock *lks[20];
    struct job jobs[20];
    dlock_cancel *cx;

    (void)state;
    memset(&glog, 0, sizeof glog);
    assert_int_equal(dlock_cancel_new(&cx), DLOCK_OK);
    assert_int_equal(dlock_acquire(held, 5000), DLOCK_OK);
    for (int i = 0; i < 20; i++) {
        lks[i] = h_lock(qc, name, 0, 0);
        jobs[i].index = i;
        assert_int_equal(dlock_acquire_async(lks[i], DLOCK_WAIT_FOREVER,
                                             i == 0 ? cx : NULL, on_done,
                                             &jobs[i]),
                         DLOCK_OK);
    }
    /* A second acquire on a handle in use is refused at once. */
    assert_int_equal(dlock_acquire_async(lks[1], 0, NULL, on_done, &jobs[1]),
                     DLOCK_EINVAL);
    h_sleep_ms(300);
    dlock_cancel_fire(cx);
    run_loop(qc, 1, 5000);
    assert_int_equal(glog.n, 1);
    assert_int_equal(glog.order[0], 0);
    assert_int_equal(glog.rc[0], DLOCK_ECANCELED);
    dlock_client_close(qc);
    assert_int_equal(glog.n, 20);
    for (int k = 1; k < 20; k++)
        assert_int_equal(glog.rc[k], DLOCK_ECLOSED);
    assert_int_equal(dlock_release(held), DLOCK_OK);
    assert_free(name);
    for (int i = 0; i < 20; i++)
        dlock_lock_free(lks[i]);
    dlock_lock_free(held);
    dlock_cancel_free(cx);
}

/* on_lost goes through the queue too: it runs in dlock_client_dispatch(),
 * on the thread of the loop, once the event descriptor is readable.
 * file:// only, where deleting the lock file behind the holder's back
 * makes its next renewal report the lock lost. */
static pthread_t lost_thread;
static int lost_calls;

static void on_lost_queued(dlock_lock *lk, int code, const char *why,
                           void *payload)
{
    (void)payload;
    (void)why;
    assert_int_equal(code, DLOCK_ELOST);
    assert_false(dlock_held(lk));
    lost_thread = pthread_self();
    lost_calls++;
}

static void async__on_lost_is_queued(void **state)
{
    dlock_info info = DLOCK_INFO_INIT;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    const char *name = h_name("lostq");
    dlock_client *qc;
    dlock_lock *lk = NULL;
    char path[512];
    struct pollfd pf;
    int64_t end;

    (void)state;
    if (strncmp(uri, "file://", 7) != 0) {
        fprintf(stderr, "cancel: skip: file:// only\n");
        return;
    }
    qc = queue_client();
    dlock_client_info(qc, &info);
    /* The file backend's file for a plain name: NAME.lock. */
    snprintf(path, sizeof path, "%s/%s.lock", strchr(info.uri + 7, '/'),
             name);
    lo.lease_ms = 300;
    lo.on_lost = on_lost_queued;
    assert_int_equal(dlock_lock_new(&lk, qc, name, &lo), DLOCK_OK);
    assert_int_equal(dlock_acquire(lk, 1000), DLOCK_OK);
    if (unlink(path) != 0)
        fail_msg("unlink %s: %s", path, strerror(errno));
    pf.fd = dlock_client_event_fd(qc);
    pf.events = POLLIN;
    end = h_now_ms() + 5000;
    while (lost_calls == 0 && h_now_ms() < end)
        if (poll(&pf, 1, 100) == 1)
            dlock_client_dispatch(qc);
    assert_int_equal(lost_calls, 1);
    assert_true(pthread_equal(lost_thread, pthread_self()));
    /* The queue is empty again: the descriptor is not readable. */
    assert_int_equal(poll(&pf, 1, 0), 0);
    assert_int_equal(dlock_release(lk), DLOCK_ELOST);
    dlock_lock_free(lk);
    dlock_client_close(qc);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancel__fired_before_the_call),
        cmocka_unit_test(cancel__wait_forever_returns),
        cmocka_unit_test(cancel__client_shutdown_wakes_waiter),
        cmocka_unit_test(cancel__from_signal_handler),
        cmocka_unit_test(cancel__race_with_grant),
        cmocka_unit_test(async__acquires_complete_exclusively),
        cmocka_unit_test(async__close_completes_pending),
        cmocka_unit_test(async__on_lost_is_queued),
        cmocka_unit_test(async__fair_mode_keeps_arrival_order_1000),
    };
    static const struct h_role roles[] = {{NULL, NULL}};
    int failed;

    h_child_dispatch(argc, argv, roles);
    uri = h_setup(argc, argv);
    if (getenv("DLOCK_CANCEL_FILTER") != NULL)
        cmocka_set_test_filter(getenv("DLOCK_CANCEL_FILTER"));
    failed = cmocka_run_group_tests_name("cancel", tests, setup, teardown);
    h_cleanup();
    return failed != 0;
}
