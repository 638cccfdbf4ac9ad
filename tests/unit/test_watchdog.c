/*
 * test_watchdog.c: the watchdog on its own, through the public API and an
 * in-process backend of this file ("wdt://"), whose renew() does what each
 * test tells it: confirm, say the lock is gone, or fail as a cut connection
 * would. What is checked is what the watchdog owes a holder:
 *
 * - it renews a held lock before its lease runs out, again and again;
 * - a release takes the lock off its queue: no renewal of it after
 *   dlock_release() returns;
 * - a renewal the server refuses is reported once through on_lost, and
 *   dlock_held() is already 0 when on_lost runs;
 * - a renewal in doubt (no answer) is retried, and never makes the lock
 *   outlive its lease ([B-BOUND-1]);
 * - DLOCK_LOCK_NO_WATCHDOG locks are left alone;
 * - a watched connection that ends puts the lock in doubt at once, even
 *   while the watchdog thread is busy elsewhere ([B-WATCH-1]);
 * - a loss queued for dlock_client_dispatch() keeps its reason, and one
 *   whose handle is freed first is dropped with it;
 * - a grant that holds for less than the handle's lease is renewed at a
 *   third of what it holds;
 * - a lock taken after many short holds (whose wake-ups the thread keeps)
 *   is renewed in time, and the thread sleeps meanwhile: the process
 *   spends far less CPU than the wall time (a busy thread would spend
 *   all of it).
 *
 * The waits are bounded (a few seconds) and only wait for something to
 * happen; nothing here measures how fast it happens.
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <dlock/backend.h>

/* ---- the in-process backend ------------------------------------------------ */

#define WDT_NAMES 12

struct wdt_name {
    char name[32];
    char owner[128];
    int64_t expires_ms; /* 0: free */
    int renew_outcome;  /* what renew() answers: DLOCK_OK, DLOCK_ELOST... */
    int64_t vouch_ms;   /* > 0: each grant and renewal holds this long
                           only, as a client-wide lease would */
    unsigned renews;    /* renew() items seen for this name */
    unsigned releases;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct wdt_name n[WDT_NAMES];
    int in_renew; /* renew() calls running now */
    bool pair;    /* open() watches one end of a socket pair */
    int peer;     /* the other end of the last pair, -1 if none */
    bool block;   /* renew() waits until this is false */
    bool blocked; /* a renew() is waiting */
} wdt = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
         .peer = -1};

struct wdt_session {
    struct dlock_session base;
    int fd; /* watched, -1 if none */
};

static struct wdt_name *wdt_find(const char *name) /* wdt.mu held */
{
    for (size_t i = 0; i < WDT_NAMES; i++)
        if (strcmp(wdt.n[i].name, name) == 0)
            return &wdt.n[i];
    for (size_t i = 0; i < WDT_NAMES; i++)
        if (wdt.n[i].name[0] == '\0') {
            strncpy(wdt.n[i].name, name, sizeof wdt.n[i].name - 1);
            return &wdt.n[i];
        }
    fail_msg("wdt: more than %d names", WDT_NAMES);
    return NULL;
}

static void wdt_set_outcome(const char *name, int code)
{
    pthread_mutex_lock(&wdt.mu);
    wdt_find(name)->renew_outcome = code;
    pthread_mutex_unlock(&wdt.mu);
}

static unsigned wdt_renews(const char *name)
{
    pthread_mutex_lock(&wdt.mu);
    unsigned r = wdt_find(name)->renews;
    pthread_mutex_unlock(&wdt.mu);
    return r;
}

/* With wdt.pair, the session watches one end of a socket pair as its
 * connection; closing wdt.peer ends it, as a server going away would. */
static int wdt_open(struct dlock_session **out, const struct dlock_uri *u,
                    void *ctx, char *err, size_t errlen)
{
    struct wdt_session *ws = calloc(1, sizeof *ws);
    int sv[2];
    (void)u, (void)ctx, (void)err, (void)errlen;

    if (ws == NULL)
        return DLOCK_ENOMEM;
    ws->fd = -1;
    *out = &ws->base;
    pthread_mutex_lock(&wdt.mu);
    if (wdt.pair && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                               sv) == 0) {
        ws->fd = sv[0];
        wdt.peer = sv[1];
        dlock_session_watch(&ws->base, ws->fd);
    }
    pthread_mutex_unlock(&wdt.mu);
    return DLOCK_OK;
}

static void wdt_close(struct dlock_session *s)
{
    struct wdt_session *ws = (struct wdt_session *)s;

    if (ws->fd >= 0) {
        dlock_session_watch(s, -1);
        close(ws->fd);
    }
    free(ws);
}

static int wdt_acquire(struct dlock_session *s, const struct dlock_request *r,
                       int64_t deadline_ms, struct dlock_grant *g,
                       uint32_t *retry_ms)
{
    (void)s, (void)deadline_ms, (void)retry_ms;
    int rc = DLOCK_EBUSY;
    pthread_mutex_lock(&wdt.mu);
    struct wdt_name *n = wdt_find(r->name);
    if (n->expires_ms <= dlock_now_ms()) {
        if (n->vouch_ms > 0 && g->expires_ms > dlock_now_ms() + n->vouch_ms)
            g->expires_ms = dlock_now_ms() + n->vouch_ms;
        snprintf(n->owner, sizeof n->owner, "%s", r->owner);
        n->expires_ms = g->expires_ms;
        n->renew_outcome = DLOCK_OK;
        rc = DLOCK_OK;
    }
    pthread_mutex_unlock(&wdt.mu);
    return rc;
}

static int wdt_renew(struct dlock_session *s, struct dlock_renewal *items,
                     size_t n)
{
    (void)s;
    pthread_mutex_lock(&wdt.mu);
    wdt.in_renew++;
    while (wdt.block) {
        wdt.blocked = true;
        pthread_cond_wait(&wdt.cv, &wdt.mu);
    }
    wdt.blocked = false;
    for (size_t i = 0; i < n; i++) {
        struct wdt_name *w = wdt_find(items[i].req->name);
        w->renews++;
        items[i].result = w->renew_outcome;
        if (w->vouch_ms > 0 &&
            items[i].grant->expires_ms > dlock_now_ms() + w->vouch_ms)
            items[i].grant->expires_ms = dlock_now_ms() + w->vouch_ms;
        if (w->renew_outcome == DLOCK_OK)
            w->expires_ms = items[i].grant->expires_ms;
    }
    wdt.in_renew--;
    pthread_mutex_unlock(&wdt.mu);
    return DLOCK_OK;
}

static int wdt_release(struct dlock_session *s, const struct dlock_request *r,
                       struct dlock_grant *g)
{
    (void)s, (void)g;
    int rc = DLOCK_ENOTOWNER;
    pthread_mutex_lock(&wdt.mu);
    struct wdt_name *n = wdt_find(r->name);
    n->releases++;
    if (strcmp(n->owner, r->owner) == 0 && n->expires_ms > dlock_now_ms()) {
        n->expires_ms = 0;
        rc = DLOCK_OK;
    }
    pthread_mutex_unlock(&wdt.mu);
    return rc;
}

static const struct dlock_mode wdt_mode = {
    .name = "lease",
    .summary = "in-process leases for the watchdog's test",
    .caps = DLOCK_CAP_LEASE,
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
    .acquire = wdt_acquire,
    .renew = wdt_renew,
    .release = wdt_release,
};
static const struct dlock_mode *const wdt_modes[] = {&wdt_mode, NULL};
static const struct dlock_backend wdt_backend = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "wdt",
    .summary = "the watchdog test's backend",
    .modes = wdt_modes,
    .open = wdt_open,
    .close = wdt_close,
};

/* ---- helpers --------------------------------------------------------------- */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Poll until cond(arg) or 5 s have passed; returns cond's last value. */
static bool within_5s(bool (*cond)(void *), void *arg)
{
    int64_t end = dlock_now_ms() + 5000;
    while (!cond(arg) && dlock_now_ms() < end)
        sleep_ms(10);
    return cond(arg);
}

struct lost_log {
    pthread_mutex_t mu;
    int calls, code, held_then;
    char why[512];
};

static void on_lost(dlock_lock *lk, int code, const char *why, void *payload)
{
    struct lost_log *l = payload;
    pthread_mutex_lock(&l->mu);
    l->calls++;
    l->code = code;
    snprintf(l->why, sizeof l->why, "%s", why);
    l->held_then = dlock_held(lk);
    pthread_mutex_unlock(&l->mu);
}

static bool lost_reported(void *arg)
{
    struct lost_log *l = arg;
    pthread_mutex_lock(&l->mu);
    bool r = l->calls > 0;
    pthread_mutex_unlock(&l->mu);
    return r;
}

struct renews_at_least {
    const char *name;
    unsigned n;
};

static bool renewed_enough(void *arg)
{
    struct renews_at_least *r = arg;
    return wdt_renews(r->name) >= r->n;
}

static dlock_client *open_client_uri(const char *uri)
{
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    return c;
}

static dlock_client *open_client(void)
{
    return open_client_uri("wdt://h?lease=300ms");
}

static bool renew_blocked(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&wdt.mu);
    bool r = wdt.blocked;
    pthread_mutex_unlock(&wdt.mu);
    return r;
}

static bool held_again(void *arg)
{
    return dlock_held(arg) == 1;
}

static dlock_lock *new_lock(dlock_client *c, const char *name,
                            struct lost_log *log, uint32_t flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;
    o.on_lost = on_lost;
    o.payload = log;
    o.flags = flags;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
}

/* ---- tests ----------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    return dlock_backend_register(&wdt_backend) == DLOCK_OK ? 0 : -1;
}

/* Renewed past several leases; released: renewed no more. */
static void watchdog__renews_until_released(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct renews_at_least four = {"renewed", 4};
    (void)state;
    dlock_client *c = open_client();
    dlock_lock *lk = new_lock(c, "renewed", &log, 0);

    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_true(within_5s(renewed_enough, &four));
    /* Four renewals of a 300 ms lease: more than a lease has passed since
     * the acquire, and the lock is held because they confirmed it. */
    assert_int_equal(dlock_held(lk), 1);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    pthread_mutex_lock(&wdt.mu);
    unsigned after = wdt_find("renewed")->renews;
    assert_int_equal(wdt.in_renew, 0);
    assert_int_equal(wdt_find("renewed")->releases, 1);
    pthread_mutex_unlock(&wdt.mu);
    sleep_ms(700); /* two leases: the queue would have renewed twice */
    assert_int_equal(wdt_renews("renewed"), after);
    assert_int_equal(log.calls, 0);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* The server says the lock is gone: on_lost once, held already 0, and the
 * watchdog stops renewing it. */
static void watchdog__refused_renewal_reports_lost_once(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    (void)state;
    dlock_client *c = open_client();
    dlock_lock *lk = new_lock(c, "refused", &log, 0);

    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    wdt_set_outcome("refused", DLOCK_ELOST);
    assert_true(within_5s(lost_reported, &log));
    assert_int_equal(dlock_held(lk), 0);
    pthread_mutex_lock(&log.mu);
    assert_int_equal(log.code, DLOCK_ELOST);
    assert_int_equal(log.held_then, 0);
    pthread_mutex_unlock(&log.mu);
    unsigned after = wdt_renews("refused");
    sleep_ms(700);
    assert_int_equal(wdt_renews("refused"), after);
    assert_int_equal(log.calls, 1);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* No answer: retried, but the lock is not believed past its lease, and the
 * loss is reported. */
static void watchdog__renewal_in_doubt_never_outlives_the_lease(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    (void)state;
    dlock_client *c = open_client();
    dlock_lock *lk = new_lock(c, "doubt", &log, 0);

    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    /* The last confirmation was the acquire, sent before t1: its lease
     * ends by t1 + 300 ms, whatever the renewals do after. */
    int64_t t1 = dlock_now_ms();
    wdt_set_outcome("doubt", DLOCK_ECONNECT);
    while (dlock_now_ms() <= t1 + 300) {
        if (lost_reported(&log))
            break;
        sleep_ms(5);
    }
    while (!lost_reported(&log) && dlock_now_ms() < t1 + 5000) {
        assert_int_equal(dlock_held(lk), 0); /* past the lease: never held */
        sleep_ms(10);
    }
    assert_true(lost_reported(&log));
    assert_int_equal(dlock_held(lk), 0);
    assert_true(wdt_renews("doubt") >= 2); /* retried while in doubt */
    pthread_mutex_lock(&log.mu);
    assert_int_equal(log.calls, 1);
    assert_int_equal(log.held_then, 0);
    pthread_mutex_unlock(&log.mu);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* NO_WATCHDOG: nothing renews it; it ends with its lease. */
static void watchdog__leaves_no_watchdog_locks_alone(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    (void)state;
    dlock_client *c = open_client();
    dlock_lock *lk = new_lock(c, "manual", &log, DLOCK_LOCK_NO_WATCHDOG);

    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    int64_t t1 = dlock_now_ms();
    sleep_ms(700);
    assert_int_equal(wdt_renews("manual"), 0);
    assert_true(dlock_now_ms() > t1 + 300);
    assert_int_equal(dlock_held(lk), 0);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/*
 * A watched connection ends while the watchdog thread is stuck in a
 * renewal (as it is when starved of CPU): dlock_held() must say 0 at once,
 * not when the thread gets round to the event. A server that restarted
 * and forgot the lock may grant it to another client within that time
 * (seen in the history checker on Redis without persistence). Once the
 * thread runs again, a renewal confirms the lock and it is held again.
 */
static void watchdog__ended_connection_doubts_before_thread_runs(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    (void)state;
    pthread_mutex_lock(&wdt.mu);
    wdt.pair = true;
    pthread_mutex_unlock(&wdt.mu);
    /* A 3 s lease: the first renewal is due at 1 s, and the lease holds
     * 2 s longer, so only the ended connection can make held() say 0. */
    dlock_client *c = open_client_uri("wdt://h?lease=3s");
    dlock_lock *lk = new_lock(c, "cut", &log, 0);

    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_held(lk), 1);
    pthread_mutex_lock(&wdt.mu);
    wdt.block = true;
    pthread_mutex_unlock(&wdt.mu);
    assert_true(within_5s(renew_blocked, NULL));
    assert_int_equal(dlock_held(lk), 1); /* the lease still runs */

    pthread_mutex_lock(&wdt.mu);
    close(wdt.peer);
    wdt.peer = -1;
    wdt.pair = false; /* the next session is a plain one */
    pthread_mutex_unlock(&wdt.mu);
    assert_int_equal(dlock_held(lk), 0);
    sleep_ms(100);
    assert_int_equal(dlock_held(lk), 0); /* the thread is still stuck */

    pthread_mutex_lock(&wdt.mu);
    wdt.block = false;
    pthread_cond_broadcast(&wdt.cv);
    pthread_mutex_unlock(&wdt.mu);
    assert_true(within_5s(held_again, lk));
    assert_int_equal(log.calls, 0);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/*
 * A handle whose own lease is ten times what the backend vouches for (a
 * lock option above the URI's lease, where the lease is the client's: an
 * etcd lease, a ZooKeeper session) is renewed on the backend's rhythm, so
 * it stays held: renewing at a third of the handle's lease would let
 * every grant run out first.
 */
static void watchdog__renews_at_the_lease_the_grant_holds(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct renews_at_least five = {"vouched", 5};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;
    (void)state;
    dlock_client *c = open_client();

    pthread_mutex_lock(&wdt.mu);
    wdt_find("vouched")->vouch_ms = 600;
    pthread_mutex_unlock(&wdt.mu);
    o.on_lost = on_lost;
    o.payload = &log;
    o.lease_ms = 6000; /* renewed every 2 s if the grants were not heeded */
    assert_int_equal(dlock_lock_new(&lk, c, "vouched", &o), DLOCK_OK);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_true(within_5s(renewed_enough, &five));
    assert_int_equal(log.calls, 0);
    assert_int_equal(dlock_held(lk), 1);
    assert_true(dlock_lock_remaining(lk) <= 600);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

static bool event_ready(void *arg)
{
    struct pollfd p = {dlock_client_event_fd(arg), POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

/*
 * With DLOCK_CLIENT_QUEUE_CALLBACKS a loss waits for dlock_client_dispatch()
 * with its reason, copied when the loss was found: a handle freed while its
 * report is queued takes the copy with it (no call, and nothing leaks under
 * ASan), and a dispatched report says which lock and why. The handle's own
 * message then follows its calls: the release says the lock had been lost;
 * a later call that succeeds leaves it empty.
 */
static void watchdog__queued_loss_keeps_its_reason(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct lost_log gone = {.mu = PTHREAD_MUTEX_INITIALIZER};
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;
    (void)state;

    co.flags = DLOCK_CLIENT_QUEUE_CALLBACKS;
    assert_int_equal(dlock_client_open(&c, "wdt://h?lease=300ms", &co),
                     DLOCK_OK);
    dlock_lock *freed = new_lock(c, "queued-freed", &gone, 0);
    assert_int_equal(dlock_acquire(freed, 0), DLOCK_OK);
    wdt_set_outcome("queued-freed", DLOCK_ELOST);
    assert_true(within_5s(event_ready, c));
    dlock_lock_free(freed);
    assert_int_equal(dlock_client_dispatch(c), 0); /* callbacks run */
    assert_int_equal(gone.calls, 0);

    dlock_lock *lk = new_lock(c, "queued", &log, 0);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_string_equal(dlock_lock_errmsg(lk), "");
    wdt_set_outcome("queued", DLOCK_ELOST);
    assert_true(within_5s(event_ready, c));
    assert_int_equal(log.calls, 0); /* queued, not run */
    assert_int_equal(dlock_client_dispatch(c), 1);
    pthread_mutex_lock(&log.mu);
    assert_int_equal(log.calls, 1);
    assert_int_equal(log.code, DLOCK_ELOST);
    assert_non_null(strstr(log.why, "queued"));
    pthread_mutex_unlock(&log.mu);

    assert_int_equal(dlock_release(lk), DLOCK_ELOST);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "lost"));
    assert_non_null(strstr(dlock_lock_errmsg(lk), "queued"));
    wdt_set_outcome("queued", DLOCK_OK);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_string_equal(dlock_lock_errmsg(lk), "");
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_string_equal(dlock_lock_errmsg(lk), "");
    assert_int_equal(dlock_release(lk), DLOCK_ENOTHELD);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "not held"));
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* Twenty holds released at once leave the thread's wake-up at the first
 * one's renewal (it keeps it, watchdog.c); a lock taken after them, due
 * later, is renewed all the same, and the thread does not spin meanwhile. */
static void watchdog__renews_after_short_holds(void **state)
{
    struct lost_log log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct renews_at_least three = {"kept-b", 3};
    struct timespec c0, c1;
    int64_t t0;
    (void)state;
    dlock_client *c = open_client();
    dlock_lock *a = new_lock(c, "kept-a", &log, 0);
    dlock_lock *b = new_lock(c, "kept-b", &log, 0);

    assert_int_equal(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0), 0);
    t0 = dlock_now_ms();
    for (int i = 0; i < 20; i++) {
        assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
        assert_int_equal(dlock_release(a), DLOCK_OK);
    }
    sleep_ms(20);
    assert_int_equal(dlock_acquire(b, 0), DLOCK_OK);
    assert_true(within_5s(renewed_enough, &three));
    assert_int_equal(dlock_held(b), 1);
    assert_int_equal(wdt_renews("kept-a"), 0);
    assert_int_equal(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1), 0);
    /* Three renewals of a 300 ms lease: 300 ms of wall time at least; a
     * thread polling its past wake-up would use a core all along. */
    assert_true((c1.tv_sec - c0.tv_sec) * 1000 +
                    (c1.tv_nsec - c0.tv_nsec) / 1000000 <
                (dlock_now_ms() - t0) / 2);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    assert_int_equal(log.calls, 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(watchdog__renews_until_released),
        cmocka_unit_test(watchdog__refused_renewal_reports_lost_once),
        cmocka_unit_test(watchdog__renewal_in_doubt_never_outlives_the_lease),
        cmocka_unit_test(watchdog__leaves_no_watchdog_locks_alone),
        cmocka_unit_test(watchdog__ended_connection_doubts_before_thread_runs),
        cmocka_unit_test(watchdog__queued_loss_keeps_its_reason),
        cmocka_unit_test(watchdog__renews_at_the_lease_the_grant_holds),
        cmocka_unit_test(watchdog__renews_after_short_holds),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
