/*
 * inspect.c: describing a lock without taking it (`dlock inspect`), for
 * both modes: the lock's node is listed as an acquire lists it (queue.c
 * counts the holders), and the first node's data names the holder.
 */
#include <stdio.h>
#include <string.h>

#include "zk.h"

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
    rc = dlock__zk_children(zs, c, zs->dir, "", 0,
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
    out->held = total > 0;
    out->waiters = total - holders;
    if (total == 0) {
        rc = DLOCK_OK;
        goto out;
    }
    snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir, zs->call->scan.first);
    rc = dlock__zk_get(zs, c, zs->aux, 0, dlock_now_ms() + x->timeout_ms);
    if (rc == ZOK) {
        struct zk_call *k = zs->call;
        out->fence = (uint64_t)k->stat.czxid;
        if (holders > 1)
            snprintf(out->owner, sizeof out->owner, "(%d shared holders)",
                     holders);
        else
            snprintf(out->owner, sizeof out->owner, "%s",
                     k->datalen > 0 ? k->name : strrchr(zs->aux, '/') + 1);
        /* The data is dlock's owner id, or whatever another client wrote
         * (Curator: the host's address): show it printable. */
        for (char *p = out->owner; *p != '\0'; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                *p = '?';
        rc = DLOCK_OK;
    } else if (rc == ZNONODE) {
        rc = DLOCK_OK; /* released meanwhile; the counts stand */
    } else {
        rc = dlock__zk_fail(zs, rc, "reading the holder's node");
    }
out:
    dlock__zk_conn_unref(c);
    return rc;
}
