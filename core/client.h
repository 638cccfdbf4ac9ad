/*
 * client.h: a client's state, and its lifetime (clientref.c): a client is
 * freed when it is closed and its last lock handle is freed. client.c (the
 * top of core) opens and closes it; lock.c holds a reference per handle.
 */
#ifndef DLOCK_CORE_CLIENT_H
#define DLOCK_CORE_CLIENT_H

#include "registry.h"
#include "watchdog.h"

struct dlock_lock;

#define DLOCK__ASYNC_THREADS 8

/* The client's asynchronous acquires (async.c). */
struct dlock__async {
    pthread_mutex_t mu;   /* everything below */
    pthread_cond_t work;  /* a job arrived, the turn is free, or stop */
    struct dlock_lock *head, *tail; /* jobs not yet started, FIFO */
    pthread_t threads[DLOCK__ASYNC_THREADS];
    size_t nthreads, nidle;
    /* The fair job on its way to the server queue, or NULL: the next
     * one starts when it is queued or finished. */
    struct dlock_lock *turn;
    bool stopping;
};

struct dlock_client {
    atomic_uint refs;          /* the client itself + one per handle */
    const struct dlock_backend *b;
    const struct dlock_mode *mode;
    struct dlock_uri *uri;
    char uuid[37];
    atomic_uint_fast64_t next_serial;
    uint32_t caps;             /* the mode's */
    uint32_t retry_min_ms, retry_max_ms;
    dlock_client_options opts;
    bool global_ref;           /* holds a dlock_global_init() reference */
    atomic_bool closed;
    struct dlock_cancel shut;  /* dlock_client_shutdown(): every acquire
                                  watches it */

    struct dlock__watch watch; /* the sessions' sockets */
    struct dlock__pool pool;   /* the sessions */
    struct dlock__watchdog wd; /* renewals and the watch's thread */

    struct dlock__events events; /* queued callbacks (QUEUE_CALLBACKS) */
    struct dlock__async async; /* dlock_acquire_async()'s threads */

    pthread_mutex_t hmu;       /* the handle list */
    size_t nhandles;
    struct dlock_lock *handles;
    atomic_size_t nshared;     /* shared handles among them */

    char errmsg[DLOCK__ERRMSG_MAX]; /* why dlock_client_open() failed */
};

/* A zeroed client with its parts set up, one reference. NULL: no memory. */
struct dlock_client *dlock__client_new(void);
void dlock__client_ref(struct dlock_client *c);
/* Drop a reference; the last frees the client (every session closed). */
void dlock__client_unref(struct dlock_client *c);
/* The checks of a call that makes a handle (op: "lock_new"...): the
 * client is open and name is 1..DLOCK_NAME_MAX bytes of UTF-8 (*len).
 * Else the code, with the thread's message saying why. */
int dlock__client_check_new(struct dlock_client *c, const char *op,
                            const char *name, size_t *len);

#endif /* DLOCK_CORE_CLIENT_H */
