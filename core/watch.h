/*
 * watch.h: per client, an epoll set over the sockets of its sessions,
 * nested in a second set beside an eventfd that wakes the thread that
 * waits (watch.c). The pool adds and removes sockets; the watchdog thread
 * waits and takes the reports; any thread may ask whether a report is
 * pending. Only hang-ups and errors are reported, never data, so the calls
 * using the sockets meanwhile are not disturbed [B-WATCH-1].
 */
#ifndef DLOCK_CORE_WATCH_H
#define DLOCK_CORE_WATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base.h"

/* A session's key is never this: it is the wake-up's. */
#define DLOCK__WATCH_WAKE 0

/* What dlock__watch_wait() saw (bits). */
#define DLOCK__WATCH_ENDED 1 /* a connection ended: dlock__watch_take() */
#define DLOCK__WATCH_WOKEN 2 /* dlock__watch_wake() was called */

struct dlock__watch {
    pthread_mutex_t mu; /* creating the descriptors */
    int epfd;           /* the outer set; -1 until first needed */
    int wakefd;
    atomic_int inner;   /* the sockets' set, in epfd; -1 until then */
};

void dlock__watch_init(struct dlock__watch *w);
void dlock__watch_free(struct dlock__watch *w);
/* Report the end of fd's connection once, as key (not 0). */
int dlock__watch_add(struct dlock__watch *w, int fd, uint64_t key);
/* Stop reporting fd; call before it is closed. */
void dlock__watch_del(struct dlock__watch *w, int fd);
/* Make a dlock__watch_wait() in progress (or the next) return. */
void dlock__watch_wake(struct dlock__watch *w);
/* Has a connection ended whose report no dlock__watch_take() has taken
 * yet? One poll() that does not wait; safe from any thread. */
bool dlock__watch_pending(struct dlock__watch *w);
/*
 * Wait up to timeout_ms (-1: no limit) for an ended connection or a
 * wake-up, and say which (DLOCK__WATCH_* bits; 0 for the time). It takes
 * no report out: the ended connections stay pending until
 * dlock__watch_take(). Before anything was added, just sleeps.
 */
int dlock__watch_wait(struct dlock__watch *w, int timeout_ms);
/* Take the pending reports: write the ended sessions' keys to
 * keys[0..max) and return how many. Does not wait. */
int dlock__watch_take(struct dlock__watch *w, uint64_t *keys, int max);

#endif /* DLOCK_CORE_WATCH_H */
