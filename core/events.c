/*
 * events.c: a client's queue of callbacks (DLOCK_CLIENT_QUEUE_CALLBACKS).
 * dlock's threads push events (an async acquire finished, a lock was
 * lost); the application runs them from its own loop with
 * dlock_client_dispatch() when the eventfd is readable. The eventfd holds
 * a non-zero count exactly while the queue is not empty: the push that
 * makes it non-empty writes, the run that empties it reads, both under the
 * queue's mutex. Callbacks run outside the mutex, so they may queue more.
 */
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base.h"

void dlock__events_init(struct dlock__events *q)
{
    pthread_mutex_init(&q->mu, NULL);
    q->head = q->tail = NULL;
    q->fd = -1;
}

int dlock__events_enable(struct dlock__events *q)
{
    q->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return q->fd >= 0 ? DLOCK_OK : DLOCK_ENOMEM;
}

void dlock__events_free(struct dlock__events *q)
{
    if (q->fd >= 0)
        close(q->fd);
    q->fd = -1;
    pthread_mutex_destroy(&q->mu);
}

void dlock__events_push(struct dlock__events *q, struct dlock__event *ev)
{
    uint64_t one = 1;

    pthread_mutex_lock(&q->mu);
    if (!ev->queued) {
        ev->queued = true;
        ev->next = NULL;
        if (q->tail != NULL) {
            q->tail->next = ev;
        } else {
            q->head = ev;
            while (write(q->fd, &one, sizeof one) < 0 && errno == EINTR)
                ;
        }
        q->tail = ev;
    }
    pthread_mutex_unlock(&q->mu);
}

/* Unlink ev, whose predecessor is prev (NULL: the head); under q->mu. */
static void unlink_event(struct dlock__events *q, struct dlock__event *prev,
                         struct dlock__event *ev)
{
    uint64_t count;

    if (prev != NULL)
        prev->next = ev->next;
    else
        q->head = ev->next;
    if (q->tail == ev)
        q->tail = prev;
    ev->next = NULL;
    ev->queued = false;
    if (q->head == NULL)
        while (read(q->fd, &count, sizeof count) < 0 && errno == EINTR)
            ;
}

void dlock__events_remove(struct dlock__events *q, struct dlock__event *ev)
{
    struct dlock__event *prev = NULL;

    pthread_mutex_lock(&q->mu);
    for (struct dlock__event *e = q->head; e != NULL; prev = e, e = e->next)
        if (e == ev) {
            unlink_event(q, prev, ev);
            break;
        }
    pthread_mutex_unlock(&q->mu);
}

int dlock__events_run(struct dlock__events *q)
{
    size_t n = 0;
    int ran = 0;

    if (q->fd < 0)
        return 0;
    /* Only what is queued now: a callback that queues more (an acquire
     * that completes at once) does not keep this call going. */
    pthread_mutex_lock(&q->mu);
    for (struct dlock__event *e = q->head; e != NULL; e = e->next)
        n++;
    pthread_mutex_unlock(&q->mu);
    while (n-- > 0) {
        struct dlock__event *ev;

        pthread_mutex_lock(&q->mu);
        ev = q->head;
        if (ev != NULL)
            unlink_event(q, NULL, ev);
        pthread_mutex_unlock(&q->mu);
        if (ev == NULL)
            break;
        ev->run(ev);
        ran++;
    }
    return ran;
}
