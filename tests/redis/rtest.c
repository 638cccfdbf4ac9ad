/*
 * rtest.c: see rtest.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../conformance/harness.h"
#include "rtest.h"

/* A raw hiredis connection to the single test server. */
redisContext *raw(void)
{
    const char *u = getenv("DLOCK_TEST_REDIS_URI");
    const char *colon;
    redisContext *rc;
    struct timeval tv = {5, 0};

    assert_non_null(u);
    colon = strrchr(u, ':');
    assert_non_null(colon);
    rc = redisConnectWithTimeout("127.0.0.1", atoi(colon + 1), tv);
    assert_non_null(rc);
    if (rc->err)
        fail_msg("raw connect: %s", rc->errstr);
    redisSetTimeout(rc, tv);
    return rc;
}

redisReply *rcmd(redisContext *rc, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fail_msg("raw command: %s", rc->errstr);
    return r;
}


void rname(char *out, size_t cap, const char *prefix, const char *n)
{
    if (strchr(n, '{') != NULL)
        snprintf(out, cap, "%s:%s", prefix, n);
    else
        snprintf(out, cap, "%s:{%s}", prefix, n);
}

void rsuffix(char *out, size_t cap, const char *n, const char *suffix)
{
    if (strchr(n, '{') != NULL)
        snprintf(out, cap, "%s:%s", n, suffix);
    else
        snprintf(out, cap, "{%s}:%s", n, suffix);
}

void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    int rc = dlock_acquire(w->lk, w->timeout);
    atomic_store(&w->done_ms, h_now_ms());
    atomic_store(&w->rc, rc);
    return NULL;
}

long long rint_(redisContext *rc, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    long long v;

    va_start(ap, fmt);
    r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    if (r == NULL)
        fail_msg("raw command: %s", rc->errstr);
    if (r->type != REDIS_REPLY_INTEGER)
        fail_msg("expected an integer, got type %d (%s)", r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    v = r->integer;
    freeReplyObject(r);
    return v;
}

dlock_lock *rt_lock(dlock_client *c, const char *name, uint32_t lease_ms)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = lease_ms;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
}

size_t rt_read_log(const char *path, int *idx, uint64_t *from,
                   uint64_t *to, size_t cap)
{
    FILE *f = fopen(path, "r");
    unsigned long long a, b;
    size_t n = 0;
    int i;

    if (f == NULL)
        return 0;
    while (n < cap && fscanf(f, "%d %llu %llu", &i, &a, &b) == 3) {
        idx[n] = i;
        from[n] = a;
        to[n++] = b;
    }
    fclose(f);
    return n;
}
