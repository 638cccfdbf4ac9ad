/*
 * async.c: dlock_acquire_async() (see async.h), and the client's callback
 * queue seen from outside (dlock_client_event_fd(), _dispatch()).
 *
 * A job is the lock handle itself (its job_* fields), so starting one
 * allocates nothing. Threads start as jobs arrive, up to
 * DLOCK__ASYNC_THREADS, and live until the client closes: a thread blocks
 * for as long as its acquire waits, which is what the later design (each
 * backend running its waits on its own event loop, docs/design.md) removes.
 *
 * Divisions: finishing a job; the threads; the public calls; stopping.
 */
#include <stdio.h>
#include <string.h>

#include "async.h"

/* ---- finishing a job ------------------------------------------------------ */

static void run_done(struct dlock__event *ev)
{
    struct dlock_lock *lk = (struct dlock_lock *)(void *)((char *)ev -
                            offsetof(struct dlock_lock, done_ev));
    dlock_done_fn done = lk->done;
    void *payload = lk->done_payload;
    int rc = lk->done_rc;

    /* The handle is the caller's again from here: done may start another
     * acquire on it. */
    atomic_store(&lk->in_async, false);
    done(lk, rc, payload);
}

/* The job on lk ended with rc: run its done now, or queue it. */
static void finish(struct dlock_lock *lk, int rc)
{
    struct dlock__events *q = &lk->c->events;

    lk->done_rc = rc;
    lk->done_ev.run = run_done;
    if (q->fd >= 0)
        dlock__events_push(q, &lk->done_ev);
    else
        run_done(&lk->done_ev);
}

/* ---- the threads ------------------------------------------------------------ */

/* Is this client's mode one whose server queues waiters in order? Then the
 * jobs reach the server one at a time [B-QUEUED-1]. */
static bool fair(const struct dlock_client *c)
{
    return (c->caps & (DLOCK_CAP_FAIR | DLOCK_CAP_NATIVE_WAIT)) ==
           (DLOCK_CAP_FAIR | DLOCK_CAP_NATIVE_WAIT);
}

/* The job on lk is queued at the server (or finished): if it holds the
 * turn, pass it on. Only the holder may: a job finishing late must not
 * free the turn of the one after it. */
static void turn_done(void *arg)
{
    struct dlock_lock *lk = arg;
    struct dlock__async *a = &lk->c->async;

    pthread_mutex_lock(&a->mu);
    if (a->turn == lk) {
        a->turn = NULL;
        pthread_cond_broadcast(&a->work);
    }
    pthread_mutex_unlock(&a->mu);
}

static void *worker(void *arg)
{
    struct dlock_client *c = arg;
    struct dlock__async *a = &c->async;
    bool ordered = fair(c);

    if (c->b->thread_init != NULL)
        c->b->thread_init();
    pthread_mutex_lock(&a->mu);
    for (;;) {
        struct dlock_lock *lk;
        int rc;

        while (a->head == NULL ? !a->stopping : ordered && a->turn != NULL) {
            a->nidle++;
            pthread_cond_wait(&a->work, &a->mu);
            a->nidle--;
        }
        if (a->head == NULL)
            break;
        lk = a->head;
        a->head = lk->job_next;
        if (a->head == NULL)
            a->tail = NULL;
        if (ordered)
            a->turn = lk;
        pthread_mutex_unlock(&a->mu);

        rc = dlock__acquire(lk, lk->job_timeout, lk->job_cx,
                            ordered ? turn_done : NULL, lk);
        if (ordered)
            turn_done(lk);
        finish(lk, rc);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    if (c->b->thread_end != NULL)
        c->b->thread_end();
    return NULL;
}

/* ---- the public calls -------------------------------------------------------- */

int dlock_acquire_async(dlock_lock *lk, uint32_t timeout_ms, dlock_cancel *cx,
                        dlock_done_fn done, void *payload)
{
    struct dlock_client *c;
    struct dlock__async *a;
    int e = 0;

    if (lk == NULL)
        return DLOCK_EINVAL;
    c = lk->c;
    a = &c->async;
    /* The handle's message belongs to the acquire in progress: refuse
     * without touching it. */
    if (atomic_exchange(&lk->in_async, true))
        return DLOCK_EINVAL;
    if (done == NULL) {
        atomic_store(&lk->in_async, false);
        dlock__lock_say(lk, "acquire_async: done: NULL (a callback is "
                            "required)");
        return DLOCK_EINVAL;
    }
    if (atomic_load(&c->closed) || dlock_cancel_fired(&c->shut)) {
        atomic_store(&lk->in_async, false);
        dlock__lock_say(lk, "acquire_async: the client was closed or shut "
                            "down");
        return DLOCK_ECLOSED;
    }
    lk->job_timeout = timeout_ms;
    lk->job_cx = cx;
    lk->done = done;
    lk->done_payload = payload;
    lk->job_next = NULL;

    pthread_mutex_lock(&a->mu);
    if (a->stopping) {
        pthread_mutex_unlock(&a->mu);
        atomic_store(&lk->in_async, false);
        dlock__lock_say(lk, "acquire_async: the client is closing");
        return DLOCK_ECLOSED;
    }
    if (a->nidle == 0 && a->nthreads < DLOCK__ASYNC_THREADS) {
        e = pthread_create(&a->threads[a->nthreads], NULL, worker, c);
        if (e == 0)
            a->nthreads++;
    }
    if (a->nthreads == 0) {
        pthread_mutex_unlock(&a->mu);
        atomic_store(&lk->in_async, false);
        dlock__lock_say(lk, "acquire_async: cannot start a thread: %s",
                        strerror(e));
        return DLOCK_ENOMEM;
    }
    if (a->tail != NULL)
        a->tail->job_next = lk;
    else
        a->head = lk;
    a->tail = lk;
    pthread_cond_signal(&a->work);
    pthread_mutex_unlock(&a->mu);
    return DLOCK_OK;
}

int dlock_client_event_fd(dlock_client *c)
{
    return c != NULL ? c->events.fd : -1;
}

int dlock_client_dispatch(dlock_client *c)
{
    return c != NULL ? dlock__events_run(&c->events) : 0;
}

/* ---- stopping ------------------------------------------------------------------ */

void dlock__async_stop(struct dlock__async *a)
{
    size_t n;

    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_cond_broadcast(&a->work);
    n = a->nthreads;
    pthread_mutex_unlock(&a->mu);
    /* No thread starts once stopping is set, so n is final. */
    for (size_t i = 0; i < n; i++)
        pthread_join(a->threads[i], NULL);
}
