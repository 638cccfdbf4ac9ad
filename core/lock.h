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
    /* The thread that holds it (the address of its mark in lock.c), 0
     * when not held or taken asynchronously: for DLOCK_EDEADLK. */
    atomic_uintptr_t held_by;
    struct dlock__held held;   /* valid while depth > 0 */
    struct dlock__call call;   /* the acquire in progress: what it watches */
    struct dlock_lock *next, *prev; /* c->handles, under c->hmu */
    /* An asynchronous acquire (async.c): set by dlock_acquire_async(),
     * the job's until done runs. */
    atomic_bool in_async;
    struct dlock_lock *job_next; /* c->async's queue, under its mutex */
    uint32_t job_timeout;
    dlock_cancel *job_cx;
    dlock_done_fn done;
    void *done_payload;
    int done_rc;
    struct dlock__event done_ev; /* queued done (QUEUE_CALLBACKS) */
    /* Messages (lock.c): the running call's buffer, on the stack of the
     * outermost call (NULL between calls); and the last call's message,
     * allocated when a call first fails (NULL until then). */
    char *msg;
    char *errmsg;
    bool errmsg_lost; /* the last call failed, and no room to say why */
};

/* dlock_acquire_cancellable(), telling queued(arg) when a fair request is
 * queued at the server [B-QUEUED-1] (NULL: nobody). */
int dlock__acquire(struct dlock_lock *lk, uint32_t timeout_ms,
                   dlock_cancel *cx, void (*queued)(void *), void *arg);

/* Set the handle's message from outside a call on it (async.c,
 * multi.c). */
void dlock__lock_say(struct dlock_lock *lk, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Release everything the handle holds; for dlock_lock_free() and
 * dlock_client_close(). */
int dlock__lock_drop(struct dlock_lock *lk);

#endif /* DLOCK_CORE_LOCK_H */
