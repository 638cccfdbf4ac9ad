/*
 * watch.c: the epoll sets over a client's session sockets (see watch.h).
 * EPOLLRDHUP with EPOLLONESHOT: a socket reports once that its peer shut
 * down or that it failed (EPOLLHUP and EPOLLERR are always reported), and
 * is silent after that until it is removed.
 *
 * Two sets, one inside the other: the sockets are in the inner set, and
 * the outer set, where the watchdog thread sleeps, holds the inner set and
 * the wake-up eventfd. The inner set is readable from the moment a socket
 * reports until the watchdog takes the report out, so any thread can ask,
 * with one poll() that does not wait, whether a connection ended that the
 * watchdog has not yet handled (dlock__watch_pending()). A starved
 * watchdog thread then delays only the renewals, never the news.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "watch.h"

/* The outer set's key for the inner set (sessions' keys are not 0, and
 * the wake-up's is 0). */
#define WATCH_INNER UINT64_MAX

void dlock__watch_init(struct dlock__watch *w)
{
    pthread_mutex_init(&w->mu, NULL);
    w->epfd = w->wakefd = -1;
    atomic_init(&w->inner, -1);
}

void dlock__watch_free(struct dlock__watch *w)
{
    int inner = atomic_load(&w->inner);

    if (w->epfd >= 0)
        close(w->epfd);
    if (w->wakefd >= 0)
        close(w->wakefd);
    if (inner >= 0)
        close(inner);
    w->epfd = w->wakefd = -1;
    atomic_store(&w->inner, -1);
    pthread_mutex_destroy(&w->mu);
}

/* Make the descriptors on first need. Returns the outer epoll descriptor. */
static int watch_fds(struct dlock__watch *w)
{
    struct epoll_event wake = {.events = EPOLLIN,
                               .data.u64 = DLOCK__WATCH_WAKE};
    struct epoll_event in = {.events = EPOLLIN, .data.u64 = WATCH_INNER};
    int epfd;

    pthread_mutex_lock(&w->mu);
    if (w->epfd < 0) {
        int e = epoll_create1(EPOLL_CLOEXEC);
        int i = epoll_create1(EPOLL_CLOEXEC);
        int k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (e >= 0 && i >= 0 && k >= 0 &&
            epoll_ctl(e, EPOLL_CTL_ADD, k, &wake) == 0 &&
            epoll_ctl(e, EPOLL_CTL_ADD, i, &in) == 0) {
            w->wakefd = k;
            atomic_store(&w->inner, i);
            w->epfd = e;
        } else {
            if (e >= 0)
                close(e);
            if (i >= 0)
                close(i);
            if (k >= 0)
                close(k);
        }
    }
    epfd = w->epfd;
    pthread_mutex_unlock(&w->mu);
    return epfd;
}

int dlock__watch_add(struct dlock__watch *w, int fd, uint64_t key)
{
    struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT,
                             .data.u64 = key};
    int inner;

    if (watch_fds(w) < 0)
        return DLOCK_ENOMEM;
    inner = atomic_load(&w->inner);
    if (epoll_ctl(inner, EPOLL_CTL_ADD, fd, &ev) == 0 ||
        (errno == EEXIST && epoll_ctl(inner, EPOLL_CTL_MOD, fd, &ev) == 0))
        return DLOCK_OK;
    return DLOCK_ERROR;
}

void dlock__watch_del(struct dlock__watch *w, int fd)
{
    if (watch_fds(w) >= 0)
        (void)epoll_ctl(atomic_load(&w->inner), EPOLL_CTL_DEL, fd, NULL);
}

bool dlock__watch_pending(struct dlock__watch *w)
{
    int inner = atomic_load(&w->inner);
    struct pollfd p = {inner, POLLIN, 0};

    return inner >= 0 && poll(&p, 1, 0) > 0;
}

void dlock__watch_wake(struct dlock__watch *w)
{
    uint64_t one = 1;
    int fd = watch_fds(w) >= 0 ? w->wakefd : -1;

    if (fd >= 0 && write(fd, &one, sizeof one) < 0) {
        /* Full (it never is: the waiter drains it); nothing to do. */
    }
}

int dlock__watch_wait(struct dlock__watch *w, int timeout_ms)
{
    struct epoll_event ev[2];
    int epfd = watch_fds(w), n, seen = 0;

    if (epfd < 0) {
        if (timeout_ms < 0)
            timeout_ms = 100; /* out of descriptors: poll for a stop */
        struct timespec ts = {timeout_ms / 1000,
                              (long)(timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL); /* no descriptors: a plain sleep */
        return 0;
    }
    n = epoll_wait(epfd, ev, 2, timeout_ms);
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == WATCH_INNER) {
            seen |= DLOCK__WATCH_ENDED;
        } else {
            seen |= DLOCK__WATCH_WOKEN;
            uint64_t drained;
            if (read(w->wakefd, &drained, sizeof drained) < 0) {
                /* EAGAIN: another wake-up took it. */
            }
        }
    }
    return seen;
}

int dlock__watch_take(struct dlock__watch *w, uint64_t *keys, int max)
{
    struct epoll_event ev[16];
    int inner = atomic_load(&w->inner), n;

    if (inner < 0)
        return 0;
    if (max > 16)
        max = 16;
    n = epoll_wait(inner, ev, max, 0);
    for (int i = 0; i < n; i++)
        keys[i] = ev[i].data.u64;
    return n > 0 ? n : 0;
}
