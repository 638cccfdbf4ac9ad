/*
 * orphans.c: nodes of ours that may exist in our session although nobody
 * wants them, and their deletion. A create whose answer was lost (the
 * connection dropped, or our deadline passed) may have made a node; a
 * delete after giving up may not have been sent. Left alone, such a node
 * would live as long as the session and, first in the queue, block the
 * lock for everyone. So it is noted (its lock's node and the uuid in its
 * name), and a sweep lists the lock's node and deletes every node of ours
 * with that uuid as soon as the session is reachable: at once if it is,
 * else on every reconnection (conn.c's watcher starts it) until it
 * succeeds. If the session expires instead, the server deletes them.
 *
 * Everything here is asynchronous, run from the caller or from the C
 * client's completion thread; it only touches the connection's fields.
 *
 * Divisions: noting; sweeping; forgetting.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zk.h"

/* ---- noting ------------------------------------------------------------- */

/*
 * Remember that dir may hold a node of ours with guid that nobody wants,
 * and sweep now if connected. Called when a create's outcome is unknown or
 * a give-up delete could not be sent. The sweep lists dir and deletes our
 * nodes; it runs again on every reconnection until it succeeds, and the
 * question disappears with the session if that expires.
 */
void dlock__zk_orphan_add(struct zk_conn *c, const char *dir, const char *guid)
{
    size_t len = strlen(dir);
    struct zk_orphan *o;

    if (atomic_load(&c->expired))
        return; /* the session's nodes are gone already */
    o = calloc(1, sizeof *o + len + 1);
    if (o == NULL)
        return; /* the node lives until the session ends */
    o->conn = c;
    snprintf(o->guid, sizeof o->guid, "%s", guid);
    memcpy(o->dir, dir, len + 1);
    pthread_mutex_lock(&c->mu);
    o->next = c->orphans;
    c->orphans = o;
    pthread_mutex_unlock(&c->mu);
    dlock__zk_sweep(c);
}

/* ---- sweeping ----------------------------------------------------------- */

/* Unlink and free o; call with c->mu held. */
static void zk_orphan_drop(struct zk_conn *c, struct zk_orphan *o)
{
    for (struct zk_orphan **p = &c->orphans; *p != NULL; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            free(o);
            return;
        }
}

static void zk_orphan_deleted(int rc, const void *data)
{
    struct zk_orphan *o = (struct zk_orphan *)data;
    struct zk_conn *c = o->conn;

    pthread_mutex_lock(&c->mu);
    if (rc != ZOK && rc != ZNONODE && !dlock__zk_gone(rc))
        o->failed = 1;
    if (--o->pending == 0) {
        if (o->failed) {
            o->busy = o->failed = 0; /* again on the next connect */
        } else {
            zk_orphan_drop(c, o);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

static void zk_orphan_listed(int rc, const struct String_vector *v,
                             const void *data)
{
    struct zk_orphan *o = (struct zk_orphan *)data;
    struct zk_conn *c = o->conn;
    char mine[3 + ZK_GUID_LEN + 2], path[ZK_PATH_MAX];
    size_t mlen = (size_t)snprintf(mine, sizeof mine, "_c_%s-", o->guid);

    pthread_mutex_lock(&c->mu);
    if (rc == ZOK && v != NULL && !c->closing) {
        /* Completions run one at a time on this thread, so none of the
         * deletes can complete before pending is final. */
        for (int32_t i = 0; i < v->count; i++) {
            if (strncmp(v->data[i], mine, mlen) != 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", o->dir, v->data[i]);
            pthread_mutex_unlock(&c->mu);
            int sent = zoo_adelete(c->zh, path, -1, zk_orphan_deleted, o);
            pthread_mutex_lock(&c->mu);
            if (sent == ZOK)
                o->pending++;
            else
                o->failed = 1;
        }
    }
    if (o->pending > 0) {
        /* zk_orphan_deleted finishes it */
    } else if (rc == ZOK && o->failed) {
        o->busy = o->failed = 0;
    } else if (rc == ZOK || rc == ZNONODE || dlock__zk_gone(rc)) {
        zk_orphan_drop(c, o); /* nothing (left) to delete */
    } else {
        o->busy = 0; /* connection lost: again on the next connect */
    }
    pthread_mutex_unlock(&c->mu);
}

/* Start a sweep of the orphans not already being swept, if connected.
 * Never called with c->mu held: it issues requests. */
void dlock__zk_sweep(struct zk_conn *c)
{
    struct zk_orphan *todo[16];
    size_t n = 0;

    pthread_mutex_lock(&c->mu);
    if (c->connected && !c->closing && !atomic_load(&c->expired))
        for (struct zk_orphan *o = c->orphans; o != NULL && n < 16; o = o->next)
            if (!o->busy) {
                o->busy = 1;
                todo[n++] = o;
            }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++)
        if (zoo_aget_children(c->zh, todo[i]->dir, 0, zk_orphan_listed,
                              todo[i]) != ZOK) {
            pthread_mutex_lock(&c->mu);
            todo[i]->busy = 0;
            pthread_mutex_unlock(&c->mu);
        }
}

/* ---- forgetting --------------------------------------------------------- */

/* After zookeeper_close(): nothing calls back any more, and the server has
 * deleted the session's nodes (or will, when it expires the session). */
void dlock__zk_orphans_free(struct zk_conn *c)
{
    while (c->orphans != NULL) {
        struct zk_orphan *o = c->orphans;
        c->orphans = o->next;
        free(o);
    }
}
