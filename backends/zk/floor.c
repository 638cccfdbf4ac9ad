/*
 * floor.c: the raw floor for `dlock bench` (bench-only code): the bare
 * lock recipe (Curator's and kazoo's: create an ephemeral-sequential node,
 * list the children to see that it is the lowest, delete it) with the
 * bare synchronous libzookeeper_mt calls and none of dlock's plumbing, so
 * the bench can show what dlock adds. It is also exactly what dlock sends:
 * dlock's fence is the node's czxid, which the create returns at no cost,
 * so the mode has no fence_floor. And dlock__zk_forget, the bench's
 * clean-up: the lock's container node and what is under it. Shares only
 * the URI parsing (conf.c), the queue's sequence numbers (queue.c) and the
 * C client's log hook (conn.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "zk.h"

struct zk_floor_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;
};

static void zk_floor_watcher(zhandle_t *zh, int type, int state,
                             const char *path, void *ctx)
{
    struct zk_floor_state *f = ctx;

    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&f->mu);
    f->state = state;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/*
 * The same protocol as one uncontended dlock cycle, with the bare
 * synchronous libzookeeper_mt calls: create an EPHEMERAL_SEQUENTIAL node,
 * list the children (is ours the lowest?), delete the node. Two writes and
 * one read per cycle, as for dlock.
 */
/* A handle of the floor's own, connected; NULL with err written. */
static zhandle_t *floor_connect(struct zk_ctx *x, struct zk_floor_state *f,
                                char *err, size_t errlen, int *rc)
{
    struct timespec ts;
    zhandle_t *zh;
    int state;

    zh = zookeeper_init2(x->hosts, zk_floor_watcher, (int)x->session_ms, NULL,
                         f, 0, dlock__zk_log);
    if (zh == NULL) {
        *rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                           "floor: cannot start a ZooKeeper client: %s",
                           strerror(errno));
        return NULL;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += x->timeout_ms / 1000;
    ts.tv_nsec += (long)(x->timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&f->mu);
    while (f->state != ZOO_CONNECTED_STATE &&
           pthread_cond_timedwait(&f->cv, &f->mu, &ts) == 0)
        ;
    state = f->state;
    pthread_mutex_unlock(&f->mu);
    if (state != ZOO_CONNECTED_STATE) {
        *rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                           "floor: no ZooKeeper server of %s answered within "
                           "%u ms",
                           x->hosts, x->timeout_ms);
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

int dlock__zk_floor(const struct dlock_uri *uri, const char *name, uint32_t n,
                    uint64_t *ns_out, char *err, size_t errlen)
{
    struct zk_floor_state f = {PTHREAD_MUTEX_INITIALIZER,
                               PTHREAD_COND_INITIALIZER, 0};
    char dir[ZK_PATH_MAX], node[ZK_PATH_MAX], made[ZK_PATH_MAX];
    struct zk_ctx *x;
    zhandle_t *zh;
    int rc, zrc;

    rc = dlock__zk_parse(&x, uri, err, errlen);
    if (rc != DLOCK_OK)
        return rc;
    if ((zh = floor_connect(x, &f, err, errlen, &rc)) == NULL) {
        dlock__zk_ctx_free(x);
        return rc;
    }
    /* The lock node and its parents, once, outside the timed loop. */
    dlock__zk_dir(x, dir, name, strlen(name));
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        zrc = zoo_create(zh, dir, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER,
                         NULL, 0);
        *p = saved;
        if (zrc != ZOK && zrc != ZNODEEXISTS) {
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: create %s: %s",
                              dir, zerror(zrc));
            goto done;
        }
        if (saved == '\0')
            break;
    }
    snprintf(node, sizeof node, "%s/_c_00000000-0000-4000-8000-%012d-lock-",
             dir, 0);
    for (uint32_t i = 0; i < n; i++) {
        struct String_vector kids = {0, NULL};
        struct Stat st;
        uint64_t t0 = dlock_now_ns();
        zrc = zoo_create2(zh, node, "floor", 5, &ZOO_OPEN_ACL_UNSAFE,
                          ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made, &st);
        if (zrc == ZOK)
            zrc = zoo_get_children(zh, dir, 0, &kids);
        if (zrc == ZOK) {
            /* The check dlock makes: is ours the lowest? */
            const char *mine = strrchr(made, '/') + 1;
            int64_t ms = 0, s2;
            int lowest = dlock__zk_seq_of(mine, strlen(mine), &ms);
            for (int32_t j = 0; j < kids.count; j++)
                if (dlock__zk_seq_of(kids.data[j], strlen(kids.data[j]), &s2) &&
                    s2 < ms)
                    lowest = 0;
            deallocate_String_vector(&kids);
            zrc = zoo_delete(zh, made, -1);
            if (zrc == ZOK && !lowest)
                zrc = ZNODEEXISTS; /* someone else uses this name */
        }
        if (zrc != ZOK) {
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: cycle %u: %s",
                              i, zerror(zrc));
            break;
        }
        ns_out[i] = dlock_now_ns() - t0;
    }
done:
    zookeeper_close(zh);
    pthread_cond_destroy(&f.cv);
    pthread_mutex_destroy(&f.mu);
    dlock__zk_ctx_free(x);
    return rc;
}

/* Delete path and everything under it, children first; ZNONODE is no
 * error (gone already, or a container the server reaped). */
static int forget_tree(zhandle_t *zh, const char *path, int depth)
{
    struct String_vector kids = {0, NULL};
    char child[ZK_PATH_MAX];
    int zrc = zoo_get_children(zh, path, 0, &kids);

    if (zrc == ZNONODE)
        return ZOK;
    for (int32_t i = 0; zrc == ZOK && i < kids.count; i++) {
        if (depth >= 4) { /* the recipes nest two levels at most */
            zrc = ZNOTEMPTY;
            break;
        }
        snprintf(child, sizeof child, "%s/%s", path, kids.data[i]);
        zrc = forget_tree(zh, child, depth + 1);
    }
    deallocate_String_vector(&kids);
    if (zrc == ZOK)
        zrc = zoo_delete(zh, path, -1);
    return zrc == ZNONODE ? ZOK : zrc;
}

int dlock__zk_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen)
{
    struct zk_floor_state f = {PTHREAD_MUTEX_INITIALIZER,
                               PTHREAD_COND_INITIALIZER, 0};
    char dir[ZK_PATH_MAX];
    struct zk_ctx *x;
    zhandle_t *zh;
    int rc, zrc = ZOK;

    (void)mode;
    if ((rc = dlock__zk_parse(&x, uri, err, errlen)) != DLOCK_OK)
        return rc;
    if ((zh = floor_connect(x, &f, err, errlen, &rc)) != NULL) {
        for (size_t i = 0; i < n && zrc == ZOK; i++) {
            dlock__zk_dir(x, dir, names[i], strlen(names[i]));
            zrc = forget_tree(zh, dir, 0);
        }
        if (zrc != ZOK)
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "forget: %s: %s", dir,
                              zerror(zrc));
        zookeeper_close(zh);
    }
    pthread_cond_destroy(&f.cv);
    pthread_mutex_destroy(&f.mu);
    dlock__zk_ctx_free(x);
    return rc;
}
