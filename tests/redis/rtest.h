/*
 * rtest.h: what the Redis tests share besides the conformance harness: a
 * raw hiredis connection to the test server, to look at and act on keys
 * as another client (Redisson's scripts, SCRIPT FLUSH...) would.
 */
#ifndef DLOCK_TESTS_RTEST_H
#define DLOCK_TESTS_RTEST_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "dlock/dlock.h"

/* A connection to $DLOCK_TEST_REDIS_URI's server (5 s timeouts); fails the
 * test when there is none. */
redisContext *raw(void);
/* A command on it; fails the test when no reply came (an error reply is
 * returned as such). */
redisReply *rcmd(redisContext *rc, const char *fmt, ...);
/* A command's integer reply; fails the test on any other. */
long long rint_(redisContext *rc, const char *fmt, ...);

/* A Java client's Redisson field: the client's uuid ":" its thread id. */
#define JAVA_FIELD "6a0e3c2f-1d4b-4f8e-9a55-0d6a3b1e7c11:57"

/* Redisson's prefixName(): "prefix:{name}", or "prefix:name" when the
 * name has a '{'. */
void rname(char *out, size_t cap, const char *prefix, const char *n);
/* Redisson's suffixName(): "{name}:suffix", or "name:suffix" when the
 * name has a '{'. */
void rsuffix(char *out, size_t cap, const char *n, const char *suffix);

/* A thread blocked in dlock_acquire(lk, timeout): its result and when it
 * came (h_now_ms()). */
struct waiter {
    dlock_lock *lk;
    uint32_t timeout;
    atomic_int rc;
    atomic_llong done_ms;
};
void *waiter_main(void *arg);

/* Opening a client on URI u must fail with DLOCK_EINVAL and a message
 * that names part; fails the test otherwise. */
void rt_expect_refused(const char *u, const char *part);

/* A lock handle with lease_ms (0: the URI's); fails the test on error. */
dlock_lock *rt_lock(dlock_client *c, const char *name, uint32_t lease_ms);
/* Read a log of holdings, lines "index grant_ns release_ns" (the waiting
 * children of fair.c and queue.c write them): indexes in grant order and
 * the holds, at most cap; how many. */
size_t rt_read_log(const char *path, int *idx, uint64_t *from, uint64_t *to,
                   size_t cap);

/*
 * The child role "wait" (register it as {"wait", rt_wait_child}): args
 * uri, name, log path, index, lease ms (0: the URI's), hold ms. Waits up
 * to 20 s; once granted, holds, then appends "index grant_ns release_ns"
 * to the log (one write, O_APPEND) and releases. Exits 0, or 3 to 5.
 */
int rt_wait_child(char **args);
/* Start one ("wait" above). */
pid_t rt_spawn_waiter(const char *uri, const char *name, const char *log,
                      int index, uint32_t lease_ms, uint32_t hold_ms);
/* The log of n waiters started in index order 0..n-1: all were granted,
 * in that order, one holder at a time. */
void rt_check_arrival_order(const char *log, size_t n);

#endif
