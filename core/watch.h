/*
 * watch.h: one epoll set per client over the sockets of its sessions, and
 * an eventfd in it to wake the thread that waits (watch.c). The pool adds
 * and removes sockets; the watchdog thread waits. Only hang-ups and errors
 * are reported, never data, so the calls using the sockets meanwhile are
 * not disturbed [B-WATCH-1].
 */
#ifndef DLOCK_CORE_WATCH_H
#define DLOCK_CORE_WATCH_H

#include <pthread.h>

#include "base.h"

/* The key dlock__watch_wait() reports for a wake-up. */
#define DLOCK__WATCH_WAKE 0

struct dlock__watch {
    pthread_mutex_t mu; /* creating the descriptors */
    int epfd;           /* -1 until first needed */
    int wakefd;
};

void dlock__watch_init(struct dlock__watch *w);
void dlock__watch_free(struct dlock__watch *w);
/* Report the end of fd's connection once, as key (not 0). */
int dlock__watch_add(struct dlock__watch *w, int fd, uint64_t key);
/* Stop reporting fd; call before it is closed. */
void dlock__watch_del(struct dlock__watch *w, int fd);
/* Make a dlock__watch_wait() in progress (or the next) return. */
void dlock__watch_wake(struct dlock__watch *w);
/*
 * Wait up to timeout_ms (-1: no limit) for ended connections or a wake-up;
 * write their keys (DLOCK__WATCH_WAKE for a wake-up) to keys[0..max) and
 * return how many. Before anything was added, just sleeps.
 */
int dlock__watch_wait(struct dlock__watch *w, int timeout_ms, uint64_t *keys,
                      int max);

#endif /* DLOCK_CORE_WATCH_H */
