/*
 * inspect.c: describing a name without taking it (`dlock inspect`), for
 * both modes. A lock: its node is listed as an acquire lists it (queue.c
 * counts the holders), and the first node's data names the holder. A
 * semaphore (its node has a leases child, semaphore.c): the leases are
 * the holders, the nodes queued in locks the waiters, and the newest
 * lease node gives the fence.
 *
 * Divisions: one node; a semaphore; a name.
 */
#include <stdio.h>
#include <string.h>

#include "zk.h"

/* ---- one node ----------------------------------------------------------- */

/* Read node (in zs->aux) into out: its czxid is the fence, its data the
 * holder's owner id, unless holders > 1: then `many` with the count. */
static int zk_describe(struct zk_session *zs, struct zk_conn *c, int holders,
                       const char *many, dlock_state *out)
{
    int rc = dlock__zk_get(zs, c, zs->aux, 0,
                           dlock_now_ms() + zs->ctx->timeout_ms);

    if (rc == ZNONODE)
        return DLOCK_OK; /* released meanwhile; the counts stand */
    if (rc != ZOK)
        return dlock__zk_fail(zs, rc, "reading the holder's node");
    struct zk_call *k = zs->call;
    out->fence = (uint64_t)k->stat.czxid;
    if (holders > 1)
        snprintf(out->owner, sizeof out->owner, "(%d %s)", holders, many);
    else
        snprintf(out->owner, sizeof out->owner, "%s",
                 k->datalen > 0 ? k->name : strrchr(zs->aux, '/') + 1);
    /* The data is dlock's owner id, or whatever another client wrote
     * (Curator: the host's address): show it printable. */
    for (char *p = out->owner; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';
    return DLOCK_OK;
}

/* ---- a semaphore -------------------------------------------------------- */

/* zs->dir is the semaphore's node. The lease nodes count as holders (one
 * may be the mutex holder's, still counting); the count of permits is
 * not stored anywhere, so it cannot be shown. */
static int zk_inspect_semaphore(struct zk_session *zs, struct zk_conn *c,
                                dlock_state *out)
{
    int64_t limit = dlock_now_ms() + zs->ctx->timeout_ms;
    size_t n = strlen(zs->dir);
    int rc, leases;

    snprintf(zs->dir + n, sizeof zs->dir - n, "%s", ZK_SEM_LOCKS);
    rc = dlock__zk_children(zs, c, zs->dir, "", 0, 0, limit);
    if (rc != ZOK && rc != ZNONODE)
        return dlock__zk_fail(zs, rc, "listing the semaphore's locks");
    out->waiters = rc == ZOK ? zs->call->scan.total : 0;
    snprintf(zs->dir + n, sizeof zs->dir - n, "%s", ZK_SEM_LEASES);
    rc = dlock__zk_children(zs, c, zs->dir, "", 0, 0, limit);
    if (rc != ZOK && rc != ZNONODE)
        return dlock__zk_fail(zs, rc, "listing the semaphore's leases");
    leases = rc == ZOK ? zs->call->scan.children : 0;
    out->held = leases > 0;
    if (rc != ZOK || zs->call->scan.total == 0)
        return DLOCK_OK;
    snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir, zs->call->scan.last);
    return zk_describe(zs, c, leases, "leases of a semaphore", out);
}

/* ---- a name ------------------------------------------------------------- */

/*
 * Who holds name and how many wait, from one listing of its queue and, if
 * someone holds, one read of the first node (its data is the holder's
 * owner id; its czxid the fence). Shared holders are counted, not named.
 */
int dlock__zk_inspect(struct dlock_session *s, const char *name, size_t len,
                      dlock_state *out)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    struct zk_conn *c;
    int rc, total, holders;

    rc = dlock__zk_conn_get(zs, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__zk_ready(zs, c, dlock_now_ms() + x->timeout_ms);
    if (rc != DLOCK_OK)
        goto out;
    dlock__zk_dir(x, zs->dir, name, len);
    rc = dlock__zk_children(zs, c, zs->dir, "", 0, 0,
                            dlock_now_ms() + x->timeout_ms);
    out->remaining_ms = -1; /* the holder's session decides */
    if (rc == ZNONODE) {
        out->held = 0;
        out->waiters = 0;
        rc = DLOCK_OK;
        goto out;
    }
    if (rc != ZOK) {
        rc = dlock__zk_fail(zs, rc, "listing the queue");
        goto out;
    }
    total = zs->call->scan.total;
    holders = zs->call->scan.holders;
    if (total == 0 && zs->call->scan.semaphore) {
        rc = zk_inspect_semaphore(zs, c, out);
        goto out;
    }
    out->held = total > 0;
    out->waiters = total - holders;
    rc = DLOCK_OK;
    if (total > 0) {
        snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir,
                 zs->call->scan.first);
        rc = zk_describe(zs, c, holders, "shared holders", out);
    }
out:
    dlock__zk_conn_unref(c);
    return rc;
}
