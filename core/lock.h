/*
 * lock.h: lock handles (lock.c): the public calls on a lock, reentrancy,
 * the acquire loop (deadline, backoff with full jitter, the mode's retry
 * hint and wait()), owner-checked release, and manual renewal. A handle's
 * held state is a dlock__held (held.h), which the watchdog renews.
 */
#ifndef DLOCK_CORE_LOCK_H
#define DLOCK_CORE_LOCK_H

#include "client.h"

struct dlock_lock {
    struct dlock_client *c;
    struct dlock_request req;
    char *name;
    char owner[64];
    uint32_t flags;            /* DLOCK_LOCK_* */
    unsigned int depth;        /* reentrant levels; 0 = not held */
    struct dlock__held held;   /* valid while depth > 0 */
    struct dlock_lock *next, *prev; /* c->handles, under c->hmu */
    char errmsg[DLOCK__ERRMSG_MAX];
};

/* Release everything the handle holds; for dlock_lock_free() and
 * dlock_client_close(). */
int dlock__lock_drop(struct dlock_lock *lk);

#endif /* DLOCK_CORE_LOCK_H */
