/*
 * watchdog.c: one thread per client that keeps held locks alive and
 * watches the connections that hold them (see watchdog.h).
 *
 * Renewals. Each held lock (unless its mode says DLOCK_CAP_NO_RENEW or its
 * handle opted out) sits in a min-heap of timers due at a third of its
 * lease. When the earliest is due, the thread takes every lock due now or
 * within a quarter interval more (so locks taken close together share
 * round trips), groups them by session (a connection-bound lock must be
 * renewed on its own session), and sends each group as one renew() call,
 * which backends pipeline. held.c decides from the result whether the lock
 * is lost, and the thread tells its holder.
 *
 * Connections [B-WATCH-1]. The thread sleeps in the client's watch set
 * (watch.c), which reports the end of a session's socket and wakes it for
 * an earlier timer or a stop. When a watched connection ends, the pool
 * marks its session broken; the conn-bound locks pinned to it are lost at
 * once (told here); otherwise every lock of the client is in doubt and all
 * renewals are made due now, so a server that restarted and forgot them is
 * found out within a round trip.
 *
 * Release cancels a lock's timer under the watchdog's mutex and waits for
 * a renewal or loss report in flight to finish, so a renewal never follows
 * a release and no callback runs after it.
 *
 * Costs: O(log n) per schedule and cancel; one wake-up per batch; nothing
 * per call for watching. A wake-up a lock asked for is kept when the lock
 * goes: a caller that acquires and releases in a loop wakes the thread once
 * per renewal interval, not on every acquire that follows a release (an
 * eventfd write and a thread woken; whether it happened depended on
 * whether the thread had gone back to sleep before the release). Locks of
 * equal leases taken together stay
 * together, so 10 000 locks renew in about 10 000 / BATCH_MAX round trips
 * per interval.
 *
 * Lock order: the watchdog's mutex before the pool's, never the other way.
 *
 * Divisions: the heap; ended connections; renewing; the thread;
 * scheduling and cancelling.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watchdog.h"

/* Renewals sent in one renew() call at most. */
#define BATCH_MAX 512
/* After a failed renewal, retry this often (bounded by the interval). */
#define RETRY_FLOOR_MS 50
/* A lock in doubt [B-WATCH-1] is retried this often: its holder cannot
 * use it until a renewal gets through. */
#define DOUBT_RETRY_MS 100
/* Connection events read per wait. */
#define EVENTS_MAX 16
/* Without memory for a batch, try again this much later. */
#define NOMEM_RETRY_MS 100

#define TIMER_HELD(t) \
    ((struct dlock__held *)((char *)(t) - offsetof(struct dlock__held, timer)))
#define PIN_HELD(p) \
    ((struct dlock__held *)((char *)(p) - offsetof(struct dlock__held, pin)))

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

/* ---- ended connections ---------------------------------------------------------- */

/* dlock__pool_ended()'s callback for each conn-bound lock on an ended
 * connection: queue it to be told, unless a release is taking it. Under
 * wd->mu and the pool's mutex. */
static void pin_lost(struct dlock__pin *pin, void *arg)
{
    struct dlock__watchdog *wd = ((void **)arg)[0];
    struct dlock__held **tell = ((void **)arg)[1];
    struct dlock__held *h = PIN_HELD(pin);

    if (!h->watched || h->renewing || atomic_load(&h->state) != DLOCK__HELD)
        return;
    if (h->timer.idx != SIZE_MAX)
        dlock__heap_remove(&wd->heap, &h->timer);
    h->renewing = true; /* a release waits until it has been told */
    h->lost_next = *tell;
    *tell = h;
}

/* Session `id` (0: those their backend marked) ended. Under wd->mu. */
static void conn_ended(struct dlock__watchdog *wd, uint64_t id, int64_t now,
                       struct dlock__held **tell)
{
    void *arg[2] = {wd, tell};

    if (dlock__pool_ended(wd->pool, id, pin_lost, arg) == 0 ||
        (wd->pool->mode->caps & DLOCK_CAP_CONN_BOUND))
        return;
    /* In doubt: renew everything now. Equal keys keep the heap's order. */
    for (size_t i = 0; i < wd->heap.n; i++)
        wd->heap.v[i]->due = now;
}

/* Tell the locks conn_ended() queued that they are lost. Called with
 * wd->mu held; drops it meanwhile. */
static void tell_gone(struct dlock__watchdog *wd, struct dlock__held *tell)
{
    struct dlock__held *h;
    char detail[DLOCK__ERRMSG_MAX], why[DLOCK__ERRMSG_MAX];

    if (tell == NULL)
        return;
    pthread_mutex_unlock(&wd->mu);
    for (h = tell; h != NULL; h = h->lost_next) {
        if (!dlock__held_lose(h))
            continue;
        dlock__pool_format(wd->pool, detail, sizeof detail, "watch",
                           h->req->name,
                           "the connection holding the lock ended; the "
                           "server has freed it");
        dlock__held_tell_lost(h, DLOCK_ELOST, detail, why, sizeof why);
    }
    pthread_mutex_lock(&wd->mu);
    for (h = tell; h != NULL; h = h->lost_next)
        h->renewing = false;
    pthread_cond_broadcast(&wd->done);
}

/* ---- renewing -------------------------------------------------------------------- */

static int by_pin(const void *a, const void *b)
{
    uintptr_t pa = (uintptr_t)(*(struct dlock__held *const *)a)->pin.sess;
    uintptr_t pb = (uintptr_t)(*(struct dlock__held *const *)b)->pin.sess;
    return pa < pb ? -1 : pa > pb;
}

/* Renew hs[0..n), all pinned to the same session (or none). */
static void renew_group(struct dlock__watchdog *wd, struct dlock__held **hs,
                        size_t n, struct dlock_renewal *items, int *rcs)
{
    struct dlock__sess *ss;
    int64_t start;
    int rc;

    ss = dlock__checkout_grant(wd->pool, hs[0]->pin.sess, wd->errmsg,
                               sizeof wd->errmsg, &rc);
    if (ss == NULL) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = rc;
        return;
    }
    start = dlock_now_ms();
    for (size_t i = 0; i < n; i++) {
        dlock__held_renewing(hs[i], start);
        items[i].req = hs[i]->req;
        items[i].grant = &hs[i]->grant;
        items[i].result = DLOCK_ERROR;
    }
    dlock__sess_begin(ss, "renew", n == 1 ? hs[0]->req->name : NULL,
                      wd->errmsg, sizeof wd->errmsg);
    rc = wd->pool->mode->renew(ss->s, items, n);
    for (size_t i = 0; i < n; i++)
        rcs[i] = rc == DLOCK_OK ? items[i].result : rc;
    dlock__checkin(ss, rc);
}

/* When to renew h next, after a renewal that said rc. */
static int64_t next_due(const struct dlock__held *h, int rc, int64_t now)
{
    uint32_t retry;

    if (rc == DLOCK_OK)
        return now + h->interval_ms;
    retry = h->interval_ms / 4;
    if (retry < RETRY_FLOOR_MS)
        retry = RETRY_FLOOR_MS;
    if (dlock__held_in_doubt(h) && retry > DOUBT_RETRY_MS)
        retry = DOUBT_RETRY_MS;
    if (retry > h->interval_ms)
        retry = h->interval_ms;
    return now + retry;
}

/* Take what is due, renew it outside the mutex, and file the results.
 * Called and returns with wd->mu held. */
static void run_batch(struct dlock__watchdog *wd, int64_t now,
                      struct dlock__held **hs, struct dlock_renewal *items,
                      int *rcs)
{
    char why[DLOCK__ERRMSG_MAX];
    struct dlock__timer *t;
    size_t n = 0, i, j;

    while (n < BATCH_MAX && (t = dlock__heap_top(&wd->heap)) != NULL) {
        struct dlock__held *h = TIMER_HELD(t);
        if (t->due > now + (int64_t)(h->interval_ms / 4))
            break;
        dlock__heap_remove(&wd->heap, t);
        if (atomic_load(&h->state) != DLOCK__HELD)
            continue; /* lost locks are not renewed again */
        h->renewing = true;
        hs[n++] = h;
    }
    pthread_mutex_unlock(&wd->mu);

    qsort(hs, n, sizeof hs[0], by_pin);
    for (i = 0; i < n; i = j) {
        for (j = i + 1; j < n && hs[j]->pin.sess == hs[i]->pin.sess; j++)
            ;
        wd->errmsg[0] = '\0';
        renew_group(wd, hs + i, j - i, items + i, rcs + i);
        now = dlock_now_ms();
        for (size_t k = i; k < j; k++)
            if (dlock__held_renew_result(hs[k], rcs[k], now))
                dlock__held_tell_lost(hs[k], rcs[k], wd->errmsg, why,
                                      sizeof why);
    }

    pthread_mutex_lock(&wd->mu);
    now = dlock_now_ms();
    for (i = 0; i < n; i++) {
        if (atomic_load(&hs[i]->state) != DLOCK__HELD)
            continue;
        hs[i]->timer.due = next_due(hs[i], rcs[i], now);
        dlock__heap_push(&wd->heap, &hs[i]->timer); /* room was reserved */
    }
    /* Clear the flags of all, lost ones included (their callbacks ran):
     * a release waiting in dlock__wd_cancel() may go on. */
    for (i = 0; i < n; i++)
        hs[i]->renewing = false;
    pthread_cond_broadcast(&wd->done);
}

/* ---- the thread ---------------------------------------------------------------- */

/* Sleep until `until`, a wake-up or a connection event; handle the
 * events. Called and returns with wd->mu held.
 *
 * An ended connection is pending in the watch set, where dlock_held()
 * sees it, until it is taken out here; so every lock is put in doubt
 * before the reports are taken, and no moment falls between the two in
 * which a holder could believe a lock that a restarted server forgot. */
static void wd_wait(struct dlock__watchdog *wd, int64_t until)
{
    uint64_t keys[EVENTS_MAX];
    struct dlock__held *tell = NULL;
    int64_t now = dlock_now_ms();
    int timeout = -1, seen, n = 0;

    if (until != INT64_MAX)
        timeout = until - now > INT_MAX ? INT_MAX
                  : until > now         ? (int)(until - now)
                                        : 0;
    wd->sleeping_until = until;
    pthread_mutex_unlock(&wd->mu);
    seen = dlock__watch_wait(wd->watch, timeout);
    pthread_mutex_lock(&wd->mu);
    wd->sleeping_until = now = dlock_now_ms();
    if (seen & DLOCK__WATCH_ENDED) {
        if (dlock__pool_doubt(wd->pool))
            for (size_t i = 0; i < wd->heap.n; i++)
                wd->heap.v[i]->due = now; /* renew everything now */
        n = dlock__watch_take(wd->watch, keys, EVENTS_MAX);
    }
    for (int i = 0; i < n; i++)
        conn_ended(wd, keys[i], now, &tell);
    if (seen & DLOCK__WATCH_WOKEN)
        conn_ended(wd, 0, now, &tell); /* the backend-marked ones */
    tell_gone(wd, tell);
}

static void *wd_main(void *arg)
{
    struct dlock__watchdog *wd = arg;
    const struct dlock_backend *b = wd->pool->b;
    struct dlock__held **hs = malloc(BATCH_MAX * sizeof *hs);
    struct dlock_renewal *items = malloc(BATCH_MAX * sizeof *items);
    int *rcs = malloc(BATCH_MAX * sizeof *rcs);

    if (b->thread_init != NULL)
        b->thread_init();
    pthread_mutex_lock(&wd->mu);
    while (!wd->stop) {
        struct dlock__timer *t = dlock__heap_top(&wd->heap);
        int64_t now = dlock_now_ms();

        if (wd->kept_until <= now)
            wd->kept_until = INT64_MAX;
        if (t == NULL || t->due > now)
            wd_wait(wd, t != NULL && t->due < wd->kept_until
                            ? t->due
                            : wd->kept_until);
        else if (hs == NULL || items == NULL || rcs == NULL)
            wd_wait(wd, now + NOMEM_RETRY_MS);
        else
            run_batch(wd, now, hs, items, rcs);
    }
    pthread_mutex_unlock(&wd->mu);
    if (b->thread_end != NULL)
        b->thread_end();
    free(hs);
    free(items);
    free(rcs);
    return NULL;
}

/* ---- scheduling and cancelling ----------------------------------------------------- */

void dlock__wd_init(struct dlock__watchdog *wd, struct dlock__pool *pool,
                    struct dlock__watch *watch)
{
    memset(wd, 0, sizeof *wd);
    wd->pool = pool;
    wd->watch = watch;
    pthread_mutex_init(&wd->mu, NULL);
    pthread_cond_init(&wd->done, NULL);
    wd->sleeping_until = INT64_MAX;
    wd->kept_until = INT64_MAX;
}

/* Under wd->mu. */
static int wd_start_locked(struct dlock__watchdog *wd)
{
    if (wd->started || wd->stop)
        return DLOCK_OK;
    if (pthread_create(&wd->thread, NULL, wd_main, wd) != 0)
        return DLOCK_ENOMEM;
    wd->started = true;
    return DLOCK_OK;
}

int dlock__wd_start(struct dlock__watchdog *wd)
{
    int rc;

    pthread_mutex_lock(&wd->mu);
    rc = wd_start_locked(wd);
    pthread_mutex_unlock(&wd->mu);
    return rc;
}

int dlock__wd_reserve(struct dlock__watchdog *wd, size_t n)
{
    int rc;

    pthread_mutex_lock(&wd->mu);
    rc = dlock__heap_reserve(&wd->heap, n);
    pthread_mutex_unlock(&wd->mu);
    return rc;
}

int dlock__wd_schedule(struct dlock__watchdog *wd, struct dlock__held *h,
                       bool queue)
{
    int rc;

    pthread_mutex_lock(&wd->mu);
    if ((rc = wd_start_locked(wd)) != DLOCK_OK) {
        pthread_mutex_unlock(&wd->mu);
        return rc;
    }
    h->watched = true;
    if (queue) {
        h->timer.due = dlock_now_ms() + h->interval_ms;
        /* Its connection ended between the grant and now: renew (and so
         * find it lost) at once. */
        if (atomic_load(&h->pin.watch_fd) == DLOCK__FD_GONE)
            h->timer.due = dlock_now_ms();
        if (h->timer.idx == SIZE_MAX)
            rc = dlock__heap_push(&wd->heap, &h->timer);
        /* Wake the thread only if this timer is earlier than its sleep:
         * locks of one lease are scheduled in order, and the thread keeps
         * this wake-up when the lock goes (kept_until), so this is rare. */
        if (h->timer.due < wd->sleeping_until) {
            wd->kept_until = h->timer.due;
            dlock__watch_wake(wd->watch);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return rc;
}

void dlock__wd_cancel(struct dlock__watchdog *wd, struct dlock__held *h)
{
    pthread_mutex_lock(&wd->mu);
    while (h->renewing)
        pthread_cond_wait(&wd->done, &wd->mu);
    if (h->timer.idx != SIZE_MAX)
        dlock__heap_remove(&wd->heap, &h->timer);
    h->watched = false;
    pthread_mutex_unlock(&wd->mu);
}

void dlock__wd_stop(struct dlock__watchdog *wd)
{
    bool started;

    pthread_mutex_lock(&wd->mu);
    wd->stop = true;
    started = wd->started;
    pthread_mutex_unlock(&wd->mu);
    dlock__watch_wake(wd->watch);
    if (started)
        pthread_join(wd->thread, NULL);
}

void dlock__wd_free(struct dlock__watchdog *wd)
{
    dlock__heap_free(&wd->heap);
    pthread_mutex_destroy(&wd->mu);
    pthread_cond_destroy(&wd->done);
}
