/*
 * watchdog.h: one thread per client that renews held locks and hears of
 * their connections' end (watchdog.c). It sees a lock only as the
 * dlock__held it renews.
 */
#ifndef DLOCK_CORE_WATCHDOG_H
#define DLOCK_CORE_WATCHDOG_H

#include "held.h"

/* A min-heap of timers by due time. */
struct dlock__heap {
    struct dlock__timer **v;
    size_t n, cap;
};

/* Make room for `want` timers in all, so later pushes never allocate. */
int dlock__heap_reserve(struct dlock__heap *h, size_t want);
int dlock__heap_push(struct dlock__heap *h, struct dlock__timer *t);
struct dlock__timer *dlock__heap_top(const struct dlock__heap *h);
void dlock__heap_remove(struct dlock__heap *h, struct dlock__timer *t);
void dlock__heap_free(struct dlock__heap *h);

struct dlock__watchdog {
    struct dlock__pool *pool;   /* renewals go through its sessions */
    struct dlock__watch *watch; /* the thread sleeps in it */
    pthread_mutex_t mu;
    pthread_cond_t done; /* a renewal or loss report finished */
    struct dlock__heap heap;
    pthread_t thread;
    bool started, stop;
    int64_t sleeping_until; /* the thread's wake-up, INT64_MAX if none */
    int64_t kept_until; /* a wake-up asked for, kept when its timer goes */
    char errmsg[DLOCK__ERRMSG_MAX];
};

void dlock__wd_init(struct dlock__watchdog *wd, struct dlock__pool *pool,
                    struct dlock__watch *watch);
/* Start the thread if it does not run: for the connection watch alone
 * (the pool watches sockets), or for the first lock. */
int dlock__wd_start(struct dlock__watchdog *wd);
/* Room for n locks in the heap (a handle reserves before it can acquire,
 * so acquire never allocates). */
int dlock__wd_reserve(struct dlock__watchdog *wd, size_t n);
/* A lock was granted: let the thread see it (its connection's end, and,
 * when queue is true, its renewals), starting the thread if needed. */
int dlock__wd_schedule(struct dlock__watchdog *wd, struct dlock__held *h,
                       bool queue);
/* Take the lock off the queue, waiting for a renewal or a loss report in
 * flight. After this the thread does not touch h. */
void dlock__wd_cancel(struct dlock__watchdog *wd, struct dlock__held *h);
/* Stop and join the thread; no timers may be queued. */
void dlock__wd_stop(struct dlock__watchdog *wd);
/* Free what dlock__wd_init() made (after dlock__wd_stop). */
void dlock__wd_free(struct dlock__watchdog *wd);

#endif /* DLOCK_CORE_WATCHDOG_H */
