/*
 * watchdog.c: one thread per client that keeps held locks alive.
 *
 * Each held lock (unless its backend says DLOCK_CAP_NO_RENEW or its handle
 * opted out) sits in a min-heap of timers due at a third of its lease. When
 * the earliest is due, the thread takes every lock due now or within a
 * quarter interval more (so locks taken close together share round trips),
 * groups them by session (a connection-bound lock must be renewed on its
 * own session), and sends each group as one renew() call, which backends
 * pipeline. A lock whose renewal says it is gone, or whose lease runs out
 * while renewals keep failing, is marked lost and its on_lost callback runs.
 *
 * Release cancels a lock's timer under the watchdog's mutex and waits for a
 * renewal in flight to finish, so a renewal never follows a release.
 *
 * Costs: O(log n) per schedule and cancel; one wake-up per batch. Locks of
 * equal leases taken together stay together, so 10 000 locks renew in about
 * 10 000 / BATCH_MAX round trips per interval.
 *
 * Divisions: the heap; the thread; scheduling and cancelling.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* Renewals sent in one renew() call at most. */
#define BATCH_MAX 512
/* After a failed renewal, retry this often (bounded by the interval). */
#define RETRY_FLOOR_MS 50

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

bool dlock__renew_result(struct dlock_lock *lk, int rc, int64_t now)
{
    switch ((dlock_error_code)rc) {
    case DLOCK_OK:
        /* A renewal confirmed only after our own measure of the lease had
         * run out (the server was down or paused meanwhile) does not bridge
         * the gap: for a while nobody could promise the lock was ours, and
         * another holder may have come and gone. The lock is lost; the
         * backend's renewal does not resurrect it. */
        if (now >= atomic_load(&lk->expires_ms)) {
            atomic_store(&lk->state, DLOCK__LOST);
            return true;
        }
        atomic_store(&lk->expires_ms, lk->grant.expires_ms);
        return false;
    case DLOCK_ELOST:
    case DLOCK_ENOTOWNER:
    case DLOCK_ENOTHELD:
        atomic_store(&lk->state, DLOCK__LOST);
        return true;
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
    if (now >= lk->grant.expires_ms) {
        atomic_store(&lk->state, DLOCK__LOST);
        return true;
    }
    return false;
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
    int64_t start;
    int rc;

    ss = dlock__checkout_grant(c, locks[0]->pin, wd->errmsg,
                               sizeof wd->errmsg, &rc);
    if (ss == NULL) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = rc;
        return;
    }
    start = dlock_now_ms();
    for (size_t i = 0; i < n; i++) {
        struct dlock_lock *lk = locks[i];
        if (c->caps & DLOCK_CAP_LEASE)
            lk->grant.expires_ms = start + (int64_t)lk->req.lease_ms;
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
        if (atomic_load(&lk->state) == DLOCK__LOST)
            continue; /* lost locks are not renewed again */
        if (rcs[i] == DLOCK_OK) {
            lk->timer.due = now + lk->interval_ms;
        } else {
            uint32_t retry = lk->interval_ms / 4;
            if (retry < RETRY_FLOOR_MS)
                retry = RETRY_FLOOR_MS;
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

        if (t == NULL) {
            wd->sleeping_until = INT64_MAX;
            pthread_cond_wait(&wd->cv, &wd->mu);
        } else if (t->due > now) {
            struct timespec ts = {(time_t)(t->due / 1000),
                                  (long)(t->due % 1000) * 1000000L};
            wd->sleeping_until = t->due;
            pthread_cond_timedwait(&wd->cv, &wd->mu, &ts);
        } else if (locks == NULL || items == NULL || rcs == NULL) {
            /* No memory for a batch: try again shortly. */
            struct timespec ts = {(time_t)((now + 100) / 1000),
                                  (long)((now + 100) % 1000) * 1000000L};
            pthread_cond_timedwait(&wd->cv, &wd->mu, &ts);
        } else {
            wd->sleeping_until = now;
            run_batch(c, now, locks, items, rcs);
        }
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
    pthread_condattr_t attr;

    memset(wd, 0, sizeof *wd);
    pthread_mutex_init(&wd->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_cond_init(&wd->done, NULL);
    wd->sleeping_until = INT64_MAX;
}

int dlock__wd_schedule(struct dlock_client *c, struct dlock_lock *lk)
{
    struct dlock__watchdog *wd = &c->wd;
    int rc = DLOCK_OK;

    pthread_mutex_lock(&wd->mu);
    if (!wd->started && !wd->stop) {
        if (pthread_create(&wd->thread, NULL, wd_main, c) != 0) {
            pthread_mutex_unlock(&wd->mu);
            return DLOCK_ENOMEM;
        }
        wd->started = true;
    }
    lk->timer.due = dlock_now_ms() + lk->interval_ms;
    if (lk->timer.idx == SIZE_MAX)
        rc = dlock__heap_push(&wd->heap, &lk->timer);
    /* Wake the thread only if this timer is earlier than its sleep: locks
     * of one lease are scheduled in order, so this is rare. */
    if (lk->timer.due < wd->sleeping_until)
        pthread_cond_signal(&wd->cv);
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
    pthread_mutex_unlock(&wd->mu);
}

void dlock__wd_stop(struct dlock_client *c)
{
    struct dlock__watchdog *wd = &c->wd;
    bool started;

    pthread_mutex_lock(&wd->mu);
    wd->stop = true;
    started = wd->started;
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
    if (started)
        pthread_join(wd->thread, NULL);
}
