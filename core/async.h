/*
 * async.h: asynchronous acquires (async.c). A first version: a small pool
 * of threads per client (at most DLOCK__ASYNC_THREADS, started as work
 * arrives) drives the blocking acquire loop of lock.c, taking jobs in the
 * order dlock_acquire_async() was called. In a fair mode with a native
 * wait, a thread takes the next job only once the previous one is queued
 * at the server [B-QUEUED-1] (or finished), so the server sees requests
 * in the order of the calls. docs/design.md says how backends will later
 * run the waits themselves, without a thread per waiter.
 */
#ifndef DLOCK_CORE_ASYNC_H
#define DLOCK_CORE_ASYNC_H

#include "lock.h"

/* Every pending job ends (the client's shutdown has fired, so they end
 * with DLOCK_ECLOSED) and every thread is joined. */
void dlock__async_stop(struct dlock__async *a);

#endif /* DLOCK_CORE_ASYNC_H */
