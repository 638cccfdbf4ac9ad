/*
 * clientref.c: a client's memory and lifetime (see client.h). Below the
 * lock handles, which hold references, and client.c, which opens and
 * closes clients.
 */
#include <stdlib.h>

#include "client.h"

struct dlock_client *dlock__client_new(void)
{
    struct dlock_client *c = calloc(1, sizeof *c);

    if (c == NULL)
        return NULL;
    atomic_init(&c->refs, 1);
    atomic_init(&c->next_serial, 1);
    atomic_init(&c->closed, false);
    if (dlock__cancel_init(&c->shut) != DLOCK_OK) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->hmu, NULL);
    dlock__events_init(&c->events);
    /* The async threads are async.c's; their state is set up and torn
     * down here, with the client's memory. */
    pthread_mutex_init(&c->async.mu, NULL);
    pthread_cond_init(&c->async.work, NULL);
    dlock__watch_init(&c->watch);
    dlock__pool_init(&c->pool);
    c->pool.watch = &c->watch;
    c->pool.opts = &c->opts;
    c->pool.events = &c->events;
    dlock__wd_init(&c->wd, &c->pool, &c->watch);
    return c;
}

void dlock__client_ref(struct dlock_client *c)
{
    atomic_fetch_add(&c->refs, 1);
}

static void client_free(struct dlock_client *c)
{
    dlock__pool_free(&c->pool);
    if (c->pool.ctx != NULL)
        c->b->ctx_close(c->pool.ctx);
    dlock__wd_free(&c->wd);
    dlock__watch_free(&c->watch);
    pthread_mutex_destroy(&c->hmu);
    pthread_cond_destroy(&c->async.work);
    pthread_mutex_destroy(&c->async.mu);
    dlock__events_free(&c->events);
    dlock__cancel_destroy(&c->shut);
    dlock__uri_free(c->uri);
    if (c->global_ref)
        dlock_global_shutdown();
    free(c);
}

void dlock__client_unref(struct dlock_client *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        client_free(c);
}

int dlock__client_check_new(struct dlock_client *c, const char *op,
                            const char *name, size_t *len)
{
    dlock__thread_error_clear(c);
    if (atomic_load(&c->closed) || c->b == NULL)
        return dlock__thread_error(c, DLOCK_ECLOSED,
                                   "%s: the client was closed", op);
    return dlock__name_check(c, op, name, len);
}
