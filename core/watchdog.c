/*
 * watchdog.c: one thread per client that keeps held locks alive and
 * watches the connections that hold them.
 *
 * Renewals. Each held lock (unless its backend says DLOCK_CAP_NO_RENEW or
 * its handle opted out) sits in a min-heap of timers due at a third of its
 * lease. When the earliest is due, the thread takes every lock due now or
 * within a quarter interval more (so locks taken close together share
 * round trips), groups them by session (a connection-bound lock must be
 * renewed on its own session), and sends each group as one renew() call,
 * which backends pipeline. A lock whose renewal says it is gone, or whose
 * lease runs out while renewals keep failing, is marked lost and its
 * on_lost callback runs.
 *
 * Connections [B-WATCH-1]. Backends register the socket of each session
 * with dlock_session_watch(); the thread sleeps in epoll_wait() on all of
 * them (for hang-up and error only, never for data, so the calls that use
 * the sockets meanwhile are not disturbed) and on an eventfd that wakes it
 * for an earlier timer or a stop. When a watched connection ends, its
 * session is marked broken; with DLOCK_CAP_CONN_BOUND the locks pinned to
 * it are lost at once (their on_lost runs here); otherwise every lock of
 * the client is put in doubt (c->doubt_gen) and renewed at once, so a
 * server that restarted and forgot them is found out within a round trip.
 *
 * Release cancels a lock's timer under the watchdog's mutex and waits for
 * a renewal or loss report in flight to finish, so a renewal never follows
 * a release and no callback runs after it.
 *
 * Costs: O(log n) per schedule and cancel; one wake-up per batch; nothing
 * per call for watching (epoll registration happens when a session
 * connects). Locks of equal leases taken together stay together, so 10 000
 * locks renew in about 10 000 / BATCH_MAX round trips per interval.
 *
 * Lock order: c->wd.mu before c->mu, never the other way.
 *
 * Divisions: the heap; the outcome of a renewal; watching connections; the
 * thread; scheduling and cancelling.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Renewals sent in one renew() call at most. */
#define BATCH_MAX 512
/* After a failed renewal, retry this often (bounded by the interval). */
#define RETRY_FLOOR_MS 50
/* A lock in doubt [B-WATCH-1] is retried this often: its holder cannot
 * use it until a renewal gets through. */
#define DOUBT_RETRY_MS 100
/* Connection events read per epoll_wait(). */
#define EVENTS_MAX 16
/* epoll key of the eventfd; sessions count from 1. */
#define WAKE_KEY 0
/* Without memory for a batch, try again this much later. */
#define NOMEM_RETRY_MS 100

#define TIMER_LOCK(t) \
    ((struct dlock_lock *)((char *)(t) - offsetof(struct dlock_lock, timer)))

/* ---- the heap ---------------------------------------------------------------- */

int dlock__heap_reserve(struct dlock__heap *h, size_t want)
{
    struct dlock__timer **v;
    size_t cap = h->cap > 0 ? h->cap : 16;

    if (want <= h->cap)
        return DLOCK_OK;
    while (cap < want)
        cap *= 2;
    v = realloc(h->v, cap * sizeof *v);
    if (v == NULL)
        return DLOCK_ENOMEM;
    h->v = v;
    h->cap = cap;
    return DLOCK_OK;
}

static void heap_set(struct dlock__heap *h, size_t i, struct dlock__timer *t)
{
    h->v[i] = t;
    t->idx = i;
}

static void heap_up(struct dlock__heap *h, size_t i)
{
    struct dlock__timer *t = h->v[i];

    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->v[parent]->due <= t->due)
            break;
        heap_set(h, i, h->v[parent]);
        i = parent;
    }
    heap_set(h, i, t);
}

static void heap_down(struct dlock__heap *h, size_t i)
{
    struct dlock__timer *t = h->v[i];

    for (;;) {
        size_t kid = 2 * i + 1;
        if (kid >= h->n)
            break;
        if (kid + 1 < h->n && h->v[kid + 1]->due < h->v[kid]->due)
            kid++;
        if (t->due <= h->v[kid]->due)
            break;
        heap_set(h, i, h->v[kid]);
        i = kid;
    }
    heap_set(h, i, t);
}

int dlock__heap_push(struct dlock__heap *h, struct dlock__timer *t)
{
    if (h->n == h->cap && dlock__heap_reserve(h, h->n + 1) != DLOCK_OK)
        return DLOCK_ENOMEM;
    heap_set(h, h->n++, t);
    heap_up(h, h->n - 1);
    return DLOCK_OK;
}

struct dlock__timer *dlock__heap_top(const struct dlock__heap *h)
{
    return h->n > 0 ? h->v[0] : NULL;
}

void dlock__heap_remove(struct dlock__heap *h, struct dlock__timer *t)
{
    size_t i = t->idx;

    if (i >= h->n || h->v[i] != t)
        return;
    t->idx = SIZE_MAX;
    if (i == --h->n)
        return;
    /* Move the last timer into the hole; it may need to go either way. */
    struct dlock__timer *moved = h->v[h->n];
    heap_set(h, i, moved);
    heap_up(h, i);
    heap_down(h, moved->idx);
}

void dlock__heap_free(struct dlock__heap *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

/* ---- the outcome of a renewal ------------------------------------------------ */

bool dlock__lock_lose(struct dlock_lock *lk)
{
    int held = DLOCK__HELD;

    return atomic_compare_exchange_strong(&lk->state, &held, DLOCK__LOST);
}

bool dlock__renew_result(struct dlock_lock *lk, int rc, int64_t now)
{
    switch ((dlock_error_code)rc) {
    case DLOCK_OK:
        /* A renewal confirmed only after our own measure of the lease had
         * run out (the server was down or paused meanwhile) does not bridge
         * the gap: for a while nobody could promise the lock was ours, and
         * another holder may have come and gone. The lock is lost; the
         * backend's renewal does not resurrect it. */
        if (now >= atomic_load(&lk->expires_ms))
            return dlock__lock_lose(lk);
        atomic_store(&lk->expires_ms, lk->grant.expires_ms);
        atomic_store(&lk->confirmed_gen, lk->attempt_gen);
        return false;
    case DLOCK_ELOST:
    case DLOCK_ENOTOWNER:
    case DLOCK_ENOTHELD:
        return dlock__lock_lose(lk);
    case DLOCK_ERROR:
    case DLOCK_EBUSY:
    case DLOCK_ETIMEDOUT:
    case DLOCK_ECONNECT:
    case DLOCK_ENOBACKEND:
    case DLOCK_EINVAL:
    case DLOCK_ENOMEM:
    case DLOCK_EUNSUPPORTED:
    case DLOCK_ECLOSED:
        break;
    }
    /* In doubt: the lock may still be ours. Keep the old lease end (the
     * failed call did not extend it) and give up only when it passes. */
    lk->grant.expires_ms = atomic_load(&lk->expires_ms);
    if (now >= lk->grant.expires_ms)
        return dlock__lock_lose(lk);
    return false;
}

/* Run the handle's on_lost (on this thread) and log the loss. detail is
 * the backend's report, already prefixed by core, or "". */
static void tell_lost(struct dlock_client *c, struct dlock_lock *lk, int rc,
                      const char *detail)
{
    char why[DLOCK__ERRMSG_MAX], text[DLOCK__ERRMSG_MAX];

    if (rc == DLOCK_OK) {
        /* dlock__renew_result: confirmed too late to bridge the gap. */
        dlock__format_error(c, why, sizeof why, "renew", lk->name,
                            "the lease ran out before a renewal got through "
                            "(the service was slow or unreachable)");
        rc = DLOCK_ELOST;
    } else if (rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER ||
               rc == DLOCK_ENOTHELD) {
        if (detail[0] != '\0')
            snprintf(why, sizeof why, "%s", detail);
        else
            dlock__format_error(c, why, sizeof why, "renew", lk->name,
                                dlock_strerror(rc));
    } else {
        if (detail[0] != '\0') {
            snprintf(why, sizeof why,
                     "%s (the lease ran out while renewals kept failing)",
                     detail);
        } else {
            snprintf(text, sizeof text,
                     "the lease ran out while renewals kept failing (%s)",
                     dlock_strerror(rc));
            dlock__format_error(c, why, sizeof why, "renew", lk->name, text);
        }
        rc = DLOCK_ELOST;
    }
    if (c->opts.log != NULL && c->opts.log_level >= DLOCK_LOG_WARN)
        c->opts.log(DLOCK_LOG_WARN, why, c->opts.payload);
    if (lk->on_lost != NULL)
        lk->on_lost(lk, rc, why, lk->payload);
}

/* ---- watching connections ----------------------------------------------------- */

static void wd_wake(struct dlock__watchdog *wd)
{
    uint64_t one = 1;

    if (wd->wakefd >= 0 && write(wd->wakefd, &one, sizeof one) < 0) {
        /* Full (it never is: the thread drains it) or closed at stop. */
    }
}

/* The epoll and wake descriptors, made on first need. Under wd->mu. */
static int wd_fds(struct dlock__watchdog *wd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_KEY};

    if (wd->epfd >= 0)
        return DLOCK_OK;
    wd->epfd = epoll_create1(EPOLL_CLOEXEC);
    wd->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wd->epfd < 0 || wd->wakefd < 0 ||
        epoll_ctl(wd->epfd, EPOLL_CTL_ADD, wd->wakefd, &ev) != 0) {
        if (wd->epfd >= 0)
            close(wd->epfd);
        if (wd->wakefd >= 0)
            close(wd->wakefd);
        wd->epfd = wd->wakefd = -1;
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

static void *wd_main(void *arg);

/* Start the thread if it is not running. Under wd->mu. */
static int wd_start(struct dlock_client *c)
{
    struct dlock__watchdog *wd = &c->wd;

    if (wd->started || wd->stop)
        return DLOCK_OK;
    if (wd_fds(wd) != DLOCK_OK ||
        pthread_create(&wd->thread, NULL, wd_main, c) != 0)
        return DLOCK_ENOMEM;
    wd->started = true;
    return DLOCK_OK;
}

/* The conn-bound locks pinned to ss lose their connection: dlock_held()
 * says no from now on. Those the thread may touch are queued on *tell (the
 * thread runs their on_lost); their renewals are cancelled. Under wd->mu
 * and c->mu. */
static void pins_gone(struct dlock__watchdog *wd, struct dlock__sess *ss,
                      struct dlock_lock **tell)
{
    for (struct dlock_lock *lk = ss->pinned; lk != NULL; lk = lk->pin_next) {
        atomic_store(&lk->watch_fd, DLOCK__FD_GONE);
        if (tell == NULL || !lk->watched || lk->renewing ||
            atomic_load(&lk->state) != DLOCK__HELD)
            continue;
        if (lk->timer.idx != SIZE_MAX)
            dlock__heap_remove(&wd->heap, &lk->timer);
        lk->renewing = true; /* a release waits until we have told it */
        lk->lost_next = *tell;
        *tell = lk;
    }
}

void dlock__wd_watch(struct dlock_client *c, struct dlock__sess *ss, int fd)
{
    struct dlock__watchdog *wd = &c->wd;
    struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT};
    bool ok = true;

    pthread_mutex_lock(&wd->mu);
    if (fd >= 0 && (wd_fds(wd) != DLOCK_OK || wd_start(c) != DLOCK_OK))
        ok = false; /* no watching: renewals still find a dead connection */
    pthread_mutex_lock(&c->mu);
    if (ss->watch_fd >= 0 && ss->watch_fd != fd && wd->epfd >= 0)
        (void)epoll_ctl(wd->epfd, EPOLL_CTL_DEL, ss->watch_fd, NULL);
    if (ss->watch_fd != fd && ss->npinned > 0 &&
        (c->caps & DLOCK_CAP_CONN_BOUND)) {
        /* The connection holding these locks is being replaced or closed
         * by the backend: they are gone with it. Their next renewal, due
         * now, reports it on the watchdog thread. */
        pins_gone(wd, ss, NULL);
        for (struct dlock_lock *lk = ss->pinned; lk != NULL;
             lk = lk->pin_next)
            if (lk->timer.idx != SIZE_MAX) {
                dlock__heap_remove(&wd->heap, &lk->timer);
                lk->timer.due = dlock_now_ms();
                dlock__heap_push(&wd->heap, &lk->timer);
            }
        wd_wake(wd);
    }
    ss->watch_fd = -1;
    if (ok && fd >= 0) {
        ev.data.u64 = ss->id;
        if (epoll_ctl(wd->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ||
            (errno == EEXIST &&
             epoll_ctl(wd->epfd, EPOLL_CTL_MOD, fd, &ev) == 0))
            ss->watch_fd = fd;
    }
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&wd->mu);
}

/*
 * The connection of session `id` ended. Mark the session broken, and
 * either lose its conn-bound locks (queued on *tell) or put every lock of
 * the client in doubt and make all renewals due now. Under wd->mu.
 */
static void conn_ended(struct dlock_client *c, uint64_t id, int64_t now,
                       struct dlock_lock **tell)
{
    struct dlock__watchdog *wd = &c->wd;
    struct dlock__sess *ss;

    pthread_mutex_lock(&c->mu);
    for (ss = c->sessions; ss != NULL && ss->id != id; ss = ss->next)
        ;
    if (ss == NULL || ss->watch_fd < 0) {
        pthread_mutex_unlock(&c->mu); /* closed meanwhile */
        return;
    }
    (void)epoll_ctl(wd->epfd, EPOLL_CTL_DEL, ss->watch_fd, NULL);
    ss->watch_fd = -1;
    ss->broken = true;
    if (c->caps & DLOCK_CAP_CONN_BOUND) {
        pins_gone(wd, ss, tell);
    } else {
        atomic_fetch_add(&c->doubt_gen, 1);
        /* Equal keys keep the heap in order. */
        for (size_t i = 0; i < wd->heap.n; i++)
            wd->heap.v[i]->due = now;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Tell the locks conn_ended() queued that they are lost. Called with
 * wd->mu held; drops it meanwhile. */
static void tell_gone(struct dlock_client *c, struct dlock_lock *tell)
{
    struct dlock__watchdog *wd = &c->wd;
    struct dlock_lock *lk;

    if (tell == NULL)
        return;
    pthread_mutex_unlock(&wd->mu);
    for (lk = tell; lk != NULL; lk = lk->lost_next) {
        char why[DLOCK__ERRMSG_MAX];
        if (!dlock__lock_lose(lk))
            continue;
        dlock__format_error(c, why, sizeof why, "watch", lk->name,
                            "the connection holding the lock ended; the "
                            "server has freed it");
        tell_lost(c, lk, DLOCK_ELOST, why);
    }
    pthread_mutex_lock(&wd->mu);
    for (lk = tell; lk != NULL; lk = lk->lost_next)
        lk->renewing = false;
    pthread_cond_broadcast(&wd->done);
}

/* ---- the thread ---------------------------------------------------------------- */

static int by_pin(const void *a, const void *b)
{
    uintptr_t pa = (uintptr_t)(*(struct dlock_lock *const *)a)->pin;
    uintptr_t pb = (uintptr_t)(*(struct dlock_lock *const *)b)->pin;
    return pa < pb ? -1 : pa > pb;
}

/* Renew locks[0..n), all pinned to the same session (or none). */
static void renew_group(struct dlock_client *c, struct dlock_lock **locks,
                        size_t n, struct dlock_renewal *items, int *rcs)
{
    struct dlock__watchdog *wd = &c->wd;
    struct dlock__sess *ss;
    uint64_t gen;
    int64_t start;
    int rc;

    ss = dlock__checkout_grant(c, locks[0]->pin, wd->errmsg,
                               sizeof wd->errmsg, &rc);
    if (ss == NULL) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = rc;
        return;
    }
    gen = atomic_load(&c->doubt_gen);
    start = dlock_now_ms();
    for (size_t i = 0; i < n; i++) {
        struct dlock_lock *lk = locks[i];
        if (DLOCK__BOUNDED(c->caps))
            lk->grant.expires_ms = start + (int64_t)lk->req.lease_ms;
        lk->attempt_gen = gen;
        items[i].req = &lk->req;
        items[i].grant = &lk->grant;
        items[i].result = DLOCK_ERROR;
    }
    dlock__sess_begin(ss, "renew", n == 1 ? locks[0]->name : NULL,
                      wd->errmsg, sizeof wd->errmsg);
    rc = c->b->renew(ss->s, items, n);
    for (size_t i = 0; i < n; i++)
        rcs[i] = rc == DLOCK_OK ? items[i].result : rc;
    dlock__checkin(ss, rc);
}

/* Take what is due, renew it outside the mutex, and file the results.
 * Called and returns with wd->mu held. */
static void run_batch(struct dlock_client *c, int64_t now,
                      struct dlock_lock **locks, struct dlock_renewal *items,
                      int *rcs)
{
    struct dlock__watchdog *wd = &c->wd;
    struct dlock__timer *t;
    size_t n = 0, i, j;

    while (n < BATCH_MAX && (t = dlock__heap_top(&wd->heap)) != NULL) {
        struct dlock_lock *lk = TIMER_LOCK(t);
        if (t->due > now + (int64_t)(lk->interval_ms / 4))
            break;
        dlock__heap_remove(&wd->heap, t);
        if (atomic_load(&lk->state) != DLOCK__HELD)
            continue; /* lost locks are not renewed again */
        lk->renewing = true;
        locks[n++] = lk;
    }
    pthread_mutex_unlock(&wd->mu);

    qsort(locks, n, sizeof locks[0], by_pin);
    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && locks[j]->pin == locks[i]->pin; j++)
            ;
        wd->errmsg[0] = '\0';
        renew_group(c, locks + i, j - i, items + i, rcs + i);
        now = dlock_now_ms();
        for (size_t k = i; k < j; k++) {
            struct dlock_lock *lk = locks[k];
            if (dlock__renew_result(lk, rcs[k], now))
                tell_lost(c, lk, rcs[k], wd->errmsg);
        }
    }

    pthread_mutex_lock(&wd->mu);
    now = dlock_now_ms();
    for (i = 0; i < n; i++) {
        struct dlock_lock *lk = locks[i];
        if (atomic_load(&lk->state) != DLOCK__HELD)
            continue;
        if (rcs[i] == DLOCK_OK) {
            lk->timer.due = now + lk->interval_ms;
        } else {
            uint32_t retry = lk->interval_ms / 4;
            if (retry < RETRY_FLOOR_MS)
                retry = RETRY_FLOOR_MS;
            if (atomic_load(&lk->confirmed_gen) !=
                    atomic_load(&c->doubt_gen) &&
                retry > DOUBT_RETRY_MS)
                retry = DOUBT_RETRY_MS;
            if (retry > lk->interval_ms)
                retry = lk->interval_ms;
            lk->timer.due = now + retry;
        }
        dlock__heap_push(&wd->heap, &lk->timer); /* room was reserved */
    }
    /* Clear the flags of all, lost ones included (their callbacks ran):
     * a release waiting in dlock__wd_cancel() may go on. */
    for (i = 0; i < n; i++)
        locks[i]->renewing = false;
    pthread_cond_broadcast(&wd->done);
}

/* Sleep until the next timer, a wake-up or a connection event; handle
 * the events. Called and returns with wd->mu held. */
static void wd_wait(struct dlock_client *c, int64_t until)
{
    struct dlock__watchdog *wd = &c->wd;
    struct epoll_event ev[EVENTS_MAX];
    struct dlock_lock *tell = NULL;
    int64_t now = dlock_now_ms();
    int timeout = -1, n;

    if (until != INT64_MAX)
        timeout = until - now > INT_MAX ? INT_MAX
                  : until > now         ? (int)(until - now)
                                        : 0;
    wd->sleeping_until = until;
    pthread_mutex_unlock(&wd->mu);
    n = epoll_wait(wd->epfd, ev, EVENTS_MAX, timeout);
    pthread_mutex_lock(&wd->mu);
    wd->sleeping_until = now = dlock_now_ms();
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == WAKE_KEY) {
            uint64_t drained;
            if (read(wd->wakefd, &drained, sizeof drained) < 0) {
                /* EAGAIN: another wake-up took it. */
            }
        } else {
            conn_ended(c, ev[i].data.u64, now, &tell);
        }
    }
    tell_gone(c, tell);
}

static void *wd_main(void *arg)
{
    struct dlock_client *c = arg;
    struct dlock__watchdog *wd = &c->wd;
    struct dlock_lock **locks = malloc(BATCH_MAX * sizeof *locks);
    struct dlock_renewal *items = malloc(BATCH_MAX * sizeof *items);
    int *rcs = malloc(BATCH_MAX * sizeof *rcs);

    if (c->b->thread_init != NULL)
        c->b->thread_init();
    pthread_mutex_lock(&wd->mu);
    while (!wd->stop) {
        struct dlock__timer *t = dlock__heap_top(&wd->heap);
        int64_t now = dlock_now_ms();

        if (t == NULL || t->due > now)
            wd_wait(c, t != NULL ? t->due : INT64_MAX);
        else if (locks == NULL || items == NULL || rcs == NULL)
            wd_wait(c, now + NOMEM_RETRY_MS);
        else
            run_batch(c, now, locks, items, rcs);
    }
    pthread_mutex_unlock(&wd->mu);
    if (c->b->thread_end != NULL)
        c->b->thread_end();
    free(locks);
    free(items);
    free(rcs);
    return NULL;
}

/* ---- scheduling and cancelling ----------------------------------------------------- */

void dlock__wd_init(struct dlock__watchdog *wd)
{
    memset(wd, 0, sizeof *wd);
    pthread_mutex_init(&wd->mu, NULL);
    pthread_cond_init(&wd->done, NULL);
    wd->epfd = wd->wakefd = -1;
    wd->sleeping_until = INT64_MAX;
}

int dlock__wd_schedule(struct dlock_client *c, struct dlock_lock *lk,
                       struct dlock__sess *ss, bool queue)
{
    struct dlock__watchdog *wd = &c->wd;
    int rc = DLOCK_OK;

    (void)ss;
    pthread_mutex_lock(&wd->mu);
    if ((rc = wd_start(c)) != DLOCK_OK) {
        pthread_mutex_unlock(&wd->mu);
        return rc;
    }
    lk->watched = true;
    if (queue) {
        lk->timer.due = dlock_now_ms() + lk->interval_ms;
        /* Its connection ended between the grant and now: renew (and so
         * find it lost) at once. */
        if (atomic_load(&lk->watch_fd) == DLOCK__FD_GONE)
            lk->timer.due = dlock_now_ms();
        if (lk->timer.idx == SIZE_MAX)
            rc = dlock__heap_push(&wd->heap, &lk->timer);
        /* Wake the thread only if this timer is earlier than its sleep:
         * locks of one lease are scheduled in order, so this is rare. */
        if (lk->timer.due < wd->sleeping_until)
            wd_wake(wd);
    }
    pthread_mutex_unlock(&wd->mu);
    return rc;
}

void dlock__wd_cancel(struct dlock_client *c, struct dlock_lock *lk)
{
    struct dlock__watchdog *wd = &c->wd;

    pthread_mutex_lock(&wd->mu);
    while (lk->renewing)
        pthread_cond_wait(&wd->done, &wd->mu);
    if (lk->timer.idx != SIZE_MAX)
        dlock__heap_remove(&wd->heap, &lk->timer);
    lk->watched = false;
    pthread_mutex_unlock(&wd->mu);
}

void dlock__wd_stop(struct dlock_client *c)
{
    struct dlock__watchdog *wd = &c->wd;
    bool started;

    pthread_mutex_lock(&wd->mu);
    wd->stop = true;
    started = wd->started;
    wd_wake(wd);
    pthread_mutex_unlock(&wd->mu);
    if (started)
        pthread_join(wd->thread, NULL);
}

void dlock__wd_free(struct dlock__watchdog *wd)
{
    if (wd->epfd >= 0)
        close(wd->epfd);
    if (wd->wakefd >= 0)
        close(wd->wakefd);
    wd->epfd = wd->wakefd = -1;
    dlock__heap_free(&wd->heap);
    pthread_mutex_destroy(&wd->mu);
    pthread_cond_destroy(&wd->done);
}
