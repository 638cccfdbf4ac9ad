/*
 * cancel.c: cancellation sources (dlock_cancel_*) and the one wait that
 * watches them: an atomic flag for a cheap look, and an eventfd that poll()
 * sees, written once when the source fires and never read, so it stays
 * readable for every waiter at once and for later ones too. Firing is an
 * atomic store and one write(): async-signal-safe. What a wait does once it
 * sees the flag (release a grant that raced it) is lock.c's and the
 * backends' [B-CANCEL-1].
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base.h"

int dlock__cancel_init(struct dlock_cancel *cx)
{
    atomic_init(&cx->fired, 0);
    cx->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return cx->fd >= 0 ? DLOCK_OK : DLOCK_ENOMEM;
}

void dlock__cancel_destroy(struct dlock_cancel *cx)
{
    if (cx->fd >= 0)
        close(cx->fd);
    cx->fd = -1;
}

int dlock_cancel_new(dlock_cancel **out)
{
    struct dlock_cancel *cx;

    if (out == NULL)
        return DLOCK_EINVAL;
    *out = NULL;
    cx = malloc(sizeof *cx);
    if (cx == NULL)
        return DLOCK_ENOMEM;
    if (dlock__cancel_init(cx) != DLOCK_OK) {
        free(cx);
        return DLOCK_ENOMEM;
    }
    *out = cx;
    return DLOCK_OK;
}

void dlock_cancel_fire(dlock_cancel *cx)
{
    uint64_t one = 1;
    int saved;
    ssize_t n;

    if (cx == NULL || atomic_exchange(&cx->fired, 1))
        return;
    /* A signal handler must leave errno as it found it. */
    saved = errno;
    do
        n = write(cx->fd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
    errno = saved;
}

int dlock_cancel_fired(const dlock_cancel *cx)
{
    return cx != NULL && atomic_load(&((dlock_cancel *)cx)->fired);
}

void dlock_cancel_free(dlock_cancel *cx)
{
    if (cx == NULL)
        return;
    dlock__cancel_destroy(cx);
    free(cx);
}

int dlock__cancelled(const struct dlock__cancels *w)
{
    if (w == NULL)
        return 0;
    if (dlock_cancel_fired(w->shut))
        return DLOCK_ECLOSED;
    if (dlock_cancel_fired(w->own))
        return DLOCK_ECANCELED;
    return 0;
}

size_t dlock__cancel_fds(const struct dlock__cancels *w, int *fds, size_t cap)
{
    size_t n = 0;

    if (w == NULL)
        return 0;
    if (w->own != NULL && n < cap)
        fds[n++] = w->own->fd;
    if (w->shut != NULL && n < cap)
        fds[n++] = w->shut->fd;
    return n;
}

int dlock__cancel_poll(const struct dlock__cancels *w, int fd, short events,
                       int64_t deadline_ms)
{
    struct pollfd pf[3];
    int cfds[2], rc;
    size_t n = 0, nc;

    if (fd >= 0)
        pf[n++] = (struct pollfd){.fd = fd, .events = events};
    nc = dlock__cancel_fds(w, cfds, 2);
    for (size_t i = 0; i < nc; i++)
        pf[n++] = (struct pollfd){.fd = cfds[i], .events = POLLIN};
    for (;;) {
        int64_t now = dlock_now_ms(), left;
        int ms;

        if ((rc = dlock__cancelled(w)) != 0)
            return rc;
        left = deadline_ms - now;
        if (left <= 0)
            return 0;
        ms = left > 60000 ? 60000 : (int)left;
        rc = poll(pf, (nfds_t)n, ms);
        if (rc < 0 && errno != EINTR)
            return DLOCK_ERROR;
        if ((rc = dlock__cancelled(w)) != 0)
            return rc;
        if (fd >= 0 && pf[0].revents != 0)
            return pf[0].revents;
    }
}
