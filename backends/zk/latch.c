/*
 * latch.c: count-down latches on ZooKeeper [B-LATCH-1]. Curator has no
 * counting latch, so the recipe is dlock's own: the persistent node
 * "<prefix>/<name segment>@latch" ('@' never appears in a segment, so no
 * lock's node is a latch's) holds the count as decimal text. Every change
 * is a compare-and-set on the node's version (setData/delete with the
 * version just read; a ZBADVERSION reads again), so concurrent set and
 * down never lose one another's step. The count reaching zero deletes the
 * node. A waiter leaves a watch with exists() (which fires on the node's
 * change or deletion even when the node is missing) before it reads the
 * count, then sleeps until the watch fires: woken by the server's
 * notification, one round trip after the last count-down.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zk.h"

/* A session event may be missed between a watch firing and the next
 * exists(): look again at least this often. */
#define ZK_LATCH_RECHECK_MS 1000
/* Compare-and-set rounds lost to other writers before giving up. */
#define ZK_LATCH_TRIES 100

/* The latch's node of name into zs->aux. */
static void latch_path(struct zk_session *zs, const char *name, size_t len)
{
    size_t n = dlock__zk_dir(zs->ctx, zs->aux, name, len);

    snprintf(zs->aux + n, sizeof zs->aux - n, "@latch");
}

/* Read the count and the node's version: ZOK (a missing node is count 0,
 * version -1), or a ZooKeeper code. */
static int latch_read(struct zk_session *zs, struct zk_conn *c,
                      uint32_t *count, int *version, int64_t deadline)
{
    int rc = dlock__zk_get(zs, c, zs->aux, 0, deadline);
    unsigned long v;
    char *end;

    *count = 0;
    *version = -1;
    if (rc == ZNONODE)
        return ZOK;
    if (rc != ZOK)
        return rc;
    *version = zs->call->stat.version;
    v = strtoul(zs->call->name, &end, 10);
    if (zs->call->datalen > 0 &&
        (end == zs->call->name || *end != '\0' || v > DLOCK_LATCH_COUNT_MAX))
        return ZBADARGUMENTS; /* not a count: someone else's node */
    *count = (uint32_t)v;
    return ZOK;
}

enum { LATCH_COUNT, LATCH_SET, LATCH_DOWN };

/* One latch operation: *out is the count before it. */
static int latch_op(struct dlock_session *s, const char *name, size_t len,
                    int op, uint32_t arg, uint32_t *out)
{
    struct zk_session *zs = (struct zk_session *)s;
    int64_t deadline = dlock_now_ms() + zs->ctx->timeout_ms;
    char text[16];
    const char *what = "reading the latch node";
    struct zk_conn *c;
    int rc, version;

    if ((rc = dlock__zk_conn_get(zs, &c)) != DLOCK_OK)
        return rc;
    if ((rc = dlock__zk_ready(zs, c, deadline)) != DLOCK_OK)
        goto out;
    latch_path(zs, name, len);
    for (int tries = 0; tries < ZK_LATCH_TRIES; tries++) {
        if ((rc = latch_read(zs, c, out, &version, deadline)) != ZOK)
            break;
        if (op == LATCH_COUNT || (op == LATCH_SET && *out > 0) ||
            (op == LATCH_DOWN && *out == 0))
            break;
        if (op == LATCH_SET && version < 0) {
            what = "creating the latch node";
            snprintf(text, sizeof text, "%u", arg);
            rc = dlock__zk_create(zs, c, zs->aux, text, (int)strlen(text),
                                  ZOO_PERSISTENT, deadline);
            if (rc == ZNONODE) { /* the parents first */
                char *at = strrchr(zs->aux, '/');
                *at = '\0';
                rc = dlock__zk_mkdirs(zs, c, zs->aux, 0);
                *at = '/';
                if (rc != ZOK)
                    break;
                continue;
            }
        } else if (op == LATCH_SET) { /* a node left at "0" */
            what = "setting the latch node";
            snprintf(text, sizeof text, "%u", arg);
            rc = dlock__zk_set(zs, c, zs->aux, text, (int)strlen(text),
                               version, deadline);
        } else if (*out == 1) { /* the last count-down: the node goes */
            what = "deleting the latch node at zero";
            rc = dlock__zk_delete_version(zs, c, zs->aux, version, deadline);
        } else {
            what = "counting the latch node down";
            snprintf(text, sizeof text, "%u", *out - 1);
            rc = dlock__zk_set(zs, c, zs->aux, text, (int)strlen(text),
                               version, deadline);
        }
        /* Another writer came between: read again. */
        if (rc != ZBADVERSION && rc != ZNODEEXISTS && rc != ZNONODE)
            break;
        what = "reading the latch node";
    }
    if (rc == ZBADARGUMENTS)
        rc = dlock_session_error(s, DLOCK_ERROR,
                                 "the node %s does not hold a latch count",
                                 zs->aux);
    else if (rc != ZOK)
        rc = dlock__zk_fail(zs, rc, what);
    else
        rc = DLOCK_OK;
out:
    dlock__zk_conn_unref(c);
    return rc;
}

static int zk_latch_set(struct dlock_session *s, const char *name, size_t len,
                        uint32_t count, uint32_t *current)
{
    return latch_op(s, name, len, LATCH_SET, count, current);
}

static int zk_latch_down(struct dlock_session *s, const char *name,
                         size_t len, uint32_t *left)
{
    int rc = latch_op(s, name, len, LATCH_DOWN, 0, left);

    if (rc == DLOCK_OK && *left > 0)
        (*left)--;
    return rc;
}

static int zk_latch_count(struct dlock_session *s, const char *name,
                          size_t len, uint32_t *count)
{
    return latch_op(s, name, len, LATCH_COUNT, 0, count);
}

/* Watch, then look; sleep until the watch fires (or a session event). */
static int zk_latch_await(struct dlock_session *s, const char *name,
                          size_t len, int64_t deadline_ms)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_waiter w;
    struct zk_conn *c;
    uint32_t count = 0;
    uint64_t gen;
    int64_t now, limit;
    int rc, version;

    if ((rc = dlock__zk_conn_get(zs, &c)) != DLOCK_OK)
        return rc;
    latch_path(zs, name, len);
    dlock__zk_waiter_add(c, &w, zs->aux, &gen);
    for (;;) {
        now = dlock_now_ms();
        limit = now + zs->ctx->timeout_ms;
        if ((rc = dlock__zk_ready(zs, c, limit)) != DLOCK_OK)
            break;
        pthread_mutex_lock(&c->mu);
        w.fired = 0;
        gen = c->gen;
        pthread_mutex_unlock(&c->mu);
        rc = dlock__zk_exists_watch(zs, c, zs->aux, limit);
        if (rc == ZOK)
            rc = latch_read(zs, c, &count, &version, limit);
        else if (rc == ZNONODE)
            count = 0, rc = ZOK; /* open: no node */
        if (rc != ZOK) {
            rc = rc == ZBADARGUMENTS
                     ? dlock_session_error(s, DLOCK_ERROR,
                                           "the node %s does not hold a "
                                           "latch count",
                                           zs->aux)
                     : dlock__zk_fail(zs, rc, "watching the latch node");
            break;
        }
        if (count == 0)
            break;
        if (now >= deadline_ms) {
            rc = DLOCK_ETIMEDOUT; /* core says so */
            break;
        }
        dlock__zk_sleep(s, c, &w, gen,
                        now + ZK_LATCH_RECHECK_MS < deadline_ms
                            ? now + ZK_LATCH_RECHECK_MS
                            : deadline_ms);
        if ((rc = dlock_session_cancelled(s)) != 0)
            break;
    }
    dlock__zk_waiter_remove(c, &w);
    dlock__zk_conn_unref(c);
    return rc;
}

const struct dlock_latch_ops dlock__zk_latch = {
    .set = zk_latch_set,
    .down = zk_latch_down,
    .count = zk_latch_count,
    .await = zk_latch_await,
};
