/*
 * base.h: the bottom layer of core, shared by every other file of it: error
 * text and redaction (errors.c), clocks, hashing, uuids, randomness and
 * UTF-8 (util.c), the backoff rule (retry.c), and the messages of
 * client-wide calls, kept per thread (errors.c). Nothing here calls up.
 *
 * core's layers, bottom to top (each file calls only files below it):
 *
 *   base.h      errors.c util.c retry.c cancel.c events.c
 *   uri.h       uri.c uri_params.c
 *   module.h    module.c              server backends' modules: dlopen
 *   registry.h  registry.c            backends by scheme, modes by name
 *   watch.h     watch.c               epoll over the sessions' sockets
 *   pool.h      pool.c                sessions: checkout, pins, errors
 *   held.h      held.c                a held lock's state: lost, in doubt
 *   watchdog.h  watchdog.c            renewals and the connection watch
 *   client.h    clientref.c           the client's state and lifetime
 *   lock.h      lock.c                lock handles: the public lock calls
 *               multi.c               several locks as one, over lock.c
 *               latch.c               count-down latches, over pool.c and
 *                                     the mode's latch table
 *   async.h     async.c               acquires in the background
 *               elect.c               leader elections, over lock.c and
 *                                     async.c
 *               client.c              the public client calls (the top)
 *
 * Names shared between files carry the dlock__ prefix; nothing of them is
 * exported from the shared library.
 */
#ifndef DLOCK_CORE_BASE_H
#define DLOCK_CORE_BASE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/backend.h"

/* Every message buffer of core: the error path never allocates. */
#define DLOCK__ERRMSG_MAX 512

/* ---- errors.c ------------------------------------------------------------ */

/* Copy src into dst, replacing every occurrence of secret (if non-empty)
 * with "***". Always NUL-terminates. */
void dlock__redact(char *dst, size_t cap, const char *src, const char *secret);

/* "<scheme>: <op> '<name>': <text>" (or without the name) into buf, with
 * the password masked: the one format of every message dlock reports. */
void dlock__format_error(char *buf, size_t cap, const char *scheme,
                         const char *password, const char *op,
                         const char *name, const char *text);

/*
 * The calling thread's message for the last client-wide call (open,
 * lock_new, inspect), tagged with the client it concerns so that
 * dlock_client_errmsg() of another client reads "". Returns code.
 */
int dlock__thread_error(const void *client, int code, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* A name given to a handle (1..DLOCK_NAME_MAX bytes of UTF-8): DLOCK_OK
 * with *len, or DLOCK_EINVAL with the thread's message "<op>: name: ..."
 * saying what is wrong. */
int dlock__name_check(const void *client, const char *op, const char *name,
                      size_t *len);
/* The buffer of that message, to be filled by a formatter; tags it. */
char *dlock__thread_errbuf(const void *client, size_t *cap);
/* The message, or "" when the thread's last failure was another client's. */
const char *dlock__thread_errmsg(const void *client);
/* Forget the thread's message (a client-wide call starts, or one is freed). */
void dlock__thread_error_clear(const void *client);

/* ---- util.c -------------------------------------------------------------- */

/* 36-character RFC 4122 version-4 uuid from the OS random source. */
int dlock__uuid(char out[37]);
/* A fast per-thread random number (xorshift seeded from the OS). */
uint64_t dlock__rand64(void);
/* 1 if s[0..len) is valid UTF-8 with no NUL; else 0 and *bad = offset. */
int dlock__utf8_valid(const char *s, size_t len, size_t *bad);

/* ---- cancel.c ------------------------------------------------------------ */

/* A cancellation source: a sticky flag and an eventfd written once when it
 * is fired, never read, so it stays readable [B-CANCEL-1]. */
struct dlock_cancel {
    atomic_int fired;
    int fd;
};

/* What one acquire watches: its own source (or NULL) and its client's
 * shutdown source. */
struct dlock__cancels {
    const struct dlock_cancel *own;
    const struct dlock_cancel *shut;
};

/* Set up or tear down a source embedded in something else. */
int dlock__cancel_init(struct dlock_cancel *cx);
void dlock__cancel_destroy(struct dlock_cancel *cx);
/* 0, DLOCK_ECLOSED (the shutdown fired) or DLOCK_ECANCELED; w may be
 * NULL. */
int dlock__cancelled(const struct dlock__cancels *w);
/* The descriptors of w's sources, at most 2; returns how many. */
size_t dlock__cancel_fds(const struct dlock__cancels *w, int *fds,
                         size_t cap);
/* dlock_session_poll()'s rule on w: fd's revents, 0 at the deadline, or
 * the cancel code; DLOCK_ERROR when poll fails. */
int dlock__cancel_poll(const struct dlock__cancels *w, int fd, short events,
                       int64_t deadline_ms);

/* ---- events.c ------------------------------------------------------------ */

/* A callback waiting in a client's queue (DLOCK_CLIENT_QUEUE_CALLBACKS):
 * a node embedded in what it concerns, so queueing never allocates. */
struct dlock__event {
    struct dlock__event *next;
    void (*run)(struct dlock__event *ev);
    bool queued;
};

/* The queue and the eventfd that is readable while it is not empty; fd is
 * -1 when the client runs callbacks on its own threads. */
struct dlock__events {
    pthread_mutex_t mu;
    struct dlock__event *head, *tail;
    int fd;
};

/* Set up (no eventfd: callbacks run on dlock's threads), turn queueing on
 * (DLOCK_ENOMEM when no eventfd can be made), or tear down. */
void dlock__events_init(struct dlock__events *q);
int dlock__events_enable(struct dlock__events *q);
void dlock__events_free(struct dlock__events *q);
/* Queue ev (once: an event already queued stays where it is). */
void dlock__events_push(struct dlock__events *q, struct dlock__event *ev);
/* Take ev out of the queue if it is there (its handle is being freed). */
void dlock__events_remove(struct dlock__events *q, struct dlock__event *ev);
/* Run the events queued now, in order; returns how many ran. */
int dlock__events_run(struct dlock__events *q);

/* ---- retry.c ------------------------------------------------------------- */

/*
 * Full-jitter exponential backoff: a random delay in [min_ms, cap] where
 * cap = min(max_ms, min_ms * 2^attempt). attempt counts from 0.
 */
uint32_t dlock__backoff_ms(uint32_t min_ms, uint32_t max_ms, unsigned attempt);

/* Backoff bounds when neither the URI nor the mode says. */
#define DLOCK__RETRY_MIN_MS 5
#define DLOCK__RETRY_MAX_MS 500

#endif /* DLOCK_CORE_BASE_H */
