/*
 * watch.c: the epoll set over a client's session sockets (see watch.h).
 * EPOLLRDHUP with EPOLLONESHOT: a socket reports once that its peer shut
 * down or that it failed (EPOLLHUP and EPOLLERR are always reported), and
 * is silent after that until it is removed.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "watch.h"

void dlock__watch_init(struct dlock__watch *w)
{
    pthread_mutex_init(&w->mu, NULL);
    w->epfd = w->wakefd = -1;
}

void dlock__watch_free(struct dlock__watch *w)
{
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->wakefd >= 0)
        close(w->wakefd);
    w->epfd = w->wakefd = -1;
    pthread_mutex_destroy(&w->mu);
}

/* Make the descriptors on first need. Returns the epoll descriptor. */
static int watch_fds(struct dlock__watch *w)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = DLOCK__WATCH_WAKE};
    int epfd;

    pthread_mutex_lock(&w->mu);
    if (w->epfd < 0) {
        int e = epoll_create1(EPOLL_CLOEXEC);
        int k = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (e >= 0 && k >= 0 && epoll_ctl(e, EPOLL_CTL_ADD, k, &ev) == 0) {
            w->wakefd = k;
            w->epfd = e;
        } else {
            if (e >= 0)
                close(e);
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
    int epfd = watch_fds(w);

    if (epfd < 0)
        return DLOCK_ENOMEM;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ||
        (errno == EEXIST && epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0))
        return DLOCK_OK;
    return DLOCK_ERROR;
}

void dlock__watch_del(struct dlock__watch *w, int fd)
{
    int epfd = watch_fds(w);

    if (epfd >= 0)
        (void)epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

void dlock__watch_wake(struct dlock__watch *w)
{
    uint64_t one = 1;
    int fd = watch_fds(w) >= 0 ? w->wakefd : -1;

    if (fd >= 0 && write(fd, &one, sizeof one) < 0) {
        /* Full (it never is: the waiter drains it); nothing to do. */
    }
}

int dlock__watch_wait(struct dlock__watch *w, int timeout_ms, uint64_t *keys,
                      int max)
{
    struct epoll_event ev[16];
    int epfd = watch_fds(w), n;

    if (epfd < 0) {
        if (timeout_ms < 0)
            timeout_ms = 100; /* out of descriptors: poll for a stop */
        struct timespec ts = {timeout_ms / 1000,
                              (long)(timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL); /* no descriptors: a plain sleep */
        return 0;
    }
    if (max > 16)
        max = 16;
    n = epoll_wait(epfd, ev, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        keys[i] = ev[i].data.u64;
        if (keys[i] == DLOCK__WATCH_WAKE) {
            uint64_t drained;
            if (read(w->wakefd, &drained, sizeof drained) < 0) {
                /* EAGAIN: another wake-up took it. */
            }
        }
    }
    return n > 0 ? n : 0;
}
