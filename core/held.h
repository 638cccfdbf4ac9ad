/*
 * held.h: the state of one held lock, and the one place that decides when
 * it is lost (held.c). A lock handle embeds a dlock__held; the watchdog
 * sees only this part of it, which is all it renews.
 *
 *   FREE --acquire--> HELD --release--> FREE
 *                      |
 *                      +--a renewal says gone, the lease ran out while
 *                      |  renewals failed, a late renewal, its connection
 *                      |  ended--> LOST --release--> FREE
 *
 * HELD -> LOST is one compare-and-swap, so whichever path finds the loss
 * first runs on_lost, and no other. Besides the state, dlock_held() asks:
 * has the lease (counted from before the last confirmed request) run out
 * [B-BOUND-1]; is the lock in doubt, i.e. did a watched connection of the
 * client end since it was last confirmed [B-WATCH-1]; and, for a
 * connection-bound lock, has its connection ended.
 */
#ifndef DLOCK_CORE_HELD_H
#define DLOCK_CORE_HELD_H

#include "pool.h"

enum dlock__state { DLOCK__FREE = 0, DLOCK__HELD, DLOCK__LOST };

/* Do grants of a mode count a lease from each confirmed request
 * [B-BOUND-1]? */
#define DLOCK__BOUNDED(caps) \
    (((caps) & (DLOCK_CAP_LEASE | DLOCK_CAP_SERVER_TIMEOUT)) != 0)

/* A timer of the watchdog's heap; each knows its slot. */
struct dlock__timer {
    int64_t due; /* dlock_now_ms() */
    size_t idx;  /* slot in the heap; SIZE_MAX when not queued */
};

struct dlock__held {
    /* Fixed for the handle's life. */
    struct dlock__pool *pool;
    const struct dlock_request *req;
    void *handle;           /* the dlock_lock, for on_lost */
    dlock_lost_fn on_lost;
    void *payload;

    /* The holding (the handle's one user writes these). */
    struct dlock_grant grant;
    struct dlock__pin pin;  /* conn-bound: the session holding it */
    atomic_int state;       /* enum dlock__state */
    atomic_int_fast64_t expires_ms; /* the lease end, for dlock_held() */
    /* pool->doubt_gen when the last confirmed request was sent. */
    atomic_uint_fast64_t confirmed_gen;
    uint64_t attempt_gen;   /* pool->doubt_gen when this one was sent */
    int64_t sent_ms;        /* when this one was sent (dlock_now_ms()) */

    /* The watchdog's, under its mutex. */
    struct dlock__timer timer;
    /* Renew this often (held.c's fit_interval()): set by whoever grants
     * or renews the lock while it is off the heap, read under the mutex
     * once it is queued. */
    uint32_t interval_ms;
    bool renewing;          /* the thread is using this lock */
    bool watched;           /* granted and not cancelled: the thread may
                               touch it */
    struct dlock__held *lost_next; /* the thread's list of locks to tell */

    /* on_lost queued for dlock_client_dispatch() (QUEUE_CALLBACKS). */
    struct dlock__event lost_ev;
    int lost_code;
    _Atomic(char *) lost_why; /* malloc'd by the loss, freed by the run */
};

/* Set up h for a handle (no I/O). */
void dlock__held_init(struct dlock__held *h, struct dlock__pool *pool,
                      const struct dlock_request *req, void *handle,
                      dlock_lost_fn on_lost, void *payload);
/* Before each acquire attempt: clear the grant, preset its lease end, note
 * the doubt generation. */
void dlock__held_attempt(struct dlock__held *h);
/* The attempt on ss succeeded: pin a conn-bound grant, start believing. */
void dlock__held_granted(struct dlock__held *h, struct dlock__sess *ss);
/* Before a renewal of h is sent at start (dlock_now_ms()). */
void dlock__held_renewing(struct dlock__held *h, int64_t start);
/* After the release: FREE again. Returns whether it had been lost. */
bool dlock__held_released(struct dlock__held *h);

/* HELD -> LOST, once: true for the caller that made the change. */
bool dlock__held_lose(struct dlock__held *h);
/* Apply a renewal's result. True when this call found the lock lost (then
 * tell it with dlock__held_tell_lost). */
bool dlock__held_renew_result(struct dlock__held *h, int rc, int64_t now);
/* Log the loss and run on_lost: rc is the renewal's code (DLOCK_OK for a
 * late confirmation), detail the backend's words (already prefixed) or
 * "". why (of size cap) receives the message given to on_lost. */
void dlock__held_tell_lost(struct dlock__held *h, int rc, const char *detail,
                           char *why, size_t cap);
/* dlock_held(): 1 if the handle may believe it holds the lock now. */
int dlock__held_now(const struct dlock__held *h);
/* Is h in doubt (a watched connection ended since its confirmation)? */
bool dlock__held_in_doubt(const struct dlock__held *h);

#endif /* DLOCK_CORE_HELD_H */
