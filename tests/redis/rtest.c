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

int rt_wait_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;
    char line[96];
    uint64_t t0;
    bool ok;

    o.lease_ms = (uint32_t)atoi(args[4]);
    if (c == NULL || dlock_lock_new(&lk, c, args[1], &o) != DLOCK_OK)
        return 3;
    if (dlock_acquire(lk, 20000) != DLOCK_OK)
        return 4;
    t0 = h_now_ns();
    h_sleep_ms((uint32_t)atoi(args[5]));
    snprintf(line, sizeof line, "%s %llu %llu\n", args[3],
             (unsigned long long)t0, (unsigned long long)h_now_ns());
    ok = h_append(args[2], line) && dlock_release(lk) == DLOCK_OK;
    dlock_lock_free(lk);
    dlock_client_close(c);
    return ok ? 0 : 5;
}

pid_t rt_spawn_waiter(const char *uri, const char *name, const char *log,
                      int index, uint32_t lease_ms, uint32_t hold_ms)
{
    char idx[16], lease[16], hold[16];
    const char *args[] = {uri, name, log, idx, lease, hold, NULL};

    snprintf(idx, sizeof idx, "%d", index);
    snprintf(lease, sizeof lease, "%u", (unsigned)lease_ms);
    snprintf(hold, sizeof hold, "%u", (unsigned)hold_ms);
    return h_spawn_args("wait", args);
}

void rt_check_arrival_order(const char *log, size_t n)
{
    int idx[64];
    uint64_t from[64], to[64];
    size_t got;

    assert_true(n < 64);
    got = rt_read_log(log, idx, from, to, n + 1);
    assert_int_equal(got, n);
    for (size_t i = 0; i < got; i++) {
        assert_int_equal(idx[i], (int)i); /* granted in arrival order */
        if (i > 0)
            assert_true(from[i] >= to[i - 1]); /* one holder at a time */
    }
}

void rt_expect_refused(const char *u, const char *part)
{
    dlock_client *c = NULL;
    char msg[512];
    int rc = dlock_client_open(&c, u, NULL);

    snprintf(msg, sizeof msg, "%s",
             c != NULL ? dlock_client_errmsg(c) : "(no client)");
    dlock_client_close(c);
    if (rc != DLOCK_EINVAL)
        fail_msg("%s: %s (%s), expected EINVAL", u, dlock_err_name(rc), msg);
    if (strstr(msg, part) == NULL)
        fail_msg("%s: message '%s' does not name '%s'", u, msg, part);
}
