/*
 * call.c: the async-to-sync call layer. Every request goes through the C
 * client's asynchronous API and is waited for with our own deadline (the
 * URI's timeout=, or less): the synchronous calls of the C client wait
 * without limit. A call whose deadline passes is abandoned, kept on its
 * connection's list, and freed by its completion when that comes (or by
 * conn.c when the session closes). Completions run on the C client's
 * completion thread and copy what the caller needs into the call (for a
 * listing, queue.c reads it there), so nothing is allocated per call.
 *
 * Each dlock session has one call slot, reused for its calls one at a
 * time ([B-SERIAL-1]); an abandoned call leaves the slot empty and the
 * next call makes a new one.
 *
 * Divisions: a call; completions; waiting for the answer; the requests;
 * failures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zk.h"

/* ---- a call ------------------------------------------------------------- */

struct zk_call *dlock__zk_call_new(void)
{
    struct zk_call *k = calloc(1, sizeof *k);

    if (k == NULL)
        return NULL;
    dlock_cond_init_monotonic(&k->cv);
    return k;
}

/* The session's call slot (a new one after an abandoned call). */
struct zk_call *dlock__zk_slot(struct zk_session *zs)
{
    if (zs->call == NULL)
        zs->call = dlock__zk_call_new();
    return zs->call;
}

void dlock__zk_call_reset(struct zk_call *k, struct zk_conn *c, enum zk_op op)
{
    k->conn = c;
    k->op = op;
    k->done = 0;
    k->abandoned = 0;
    k->rc = ZK_XTIMEOUT;
    k->guid[0] = '\0';
    k->name[0] = '\0';
    k->datalen = 0;
}

/* ---- completions (on the C client's completion thread) ------------------ */

/*
 * Take a completion: nothing to do if its caller gave up (free the call;
 * after a create, sweep, since the node it made may be an orphan now).
 * Returns the call to fill, with c->mu held, or NULL.
 */
static struct zk_call *zk_complete_begin(const void *data, int rc)
{
    struct zk_call *k = (struct zk_call *)data;
    struct zk_conn *c = k->conn;
    int sweep;

    pthread_mutex_lock(&c->mu);
    if (!k->abandoned) {
        k->rc = rc;
        return k;
    }
    for (struct zk_call **p = &c->abandoned; *p != NULL; p = &(*p)->next)
        if (*p == k) {
            *p = k->next;
            break;
        }
    sweep = k->op == ZK_CREATE && !c->closing && c->orphans != NULL;
    pthread_mutex_unlock(&c->mu);
    dlock__zk_call_free(k);
    if (sweep)
        dlock__zk_sweep(c);
    return NULL;
}

static void zk_complete_end(struct zk_call *k)
{
    k->done = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->conn->mu);
}

static void zk_create_done(int rc, const char *value, const struct Stat *stat,
                           const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);
    const char *slash;

    if (k == NULL)
        return;
    if (rc == ZOK && value != NULL) {
        slash = strrchr(value, '/');
        snprintf(k->name, sizeof k->name, "%s", slash ? slash + 1 : value);
        if (stat != NULL)
            k->stat = *stat;
    }
    zk_complete_end(k);
}

void dlock__zk_stat_done(int rc, const struct Stat *stat, const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k == NULL)
        return;
    if (rc == ZOK && stat != NULL)
        k->stat = *stat;
    zk_complete_end(k);
}

static void zk_void_done(int rc, const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k != NULL)
        zk_complete_end(k);
}

static void zk_data_done(int rc, const char *value, int len,
                         const struct Stat *stat, const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k == NULL)
        return;
    if (rc == ZOK) {
        if (stat != NULL)
            k->stat = *stat;
        k->datalen = 0;
        if (value != NULL && len > 0) {
            k->datalen =
                len < (int)sizeof k->name - 1 ? len : (int)sizeof k->name - 1;
            memcpy(k->name, value, (size_t)k->datalen);
        }
        k->name[k->datalen] = '\0';
    }
    zk_complete_end(k);
}

static void zk_children_done(int rc, const struct String_vector *v,
                             const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k == NULL)
        return;
    memset(&k->scan, 0, sizeof k->scan);
    if (rc == ZOK && v != NULL)
        dlock__zk_scan(&k->scan, k->guid, k->shared, v);
    zk_complete_end(k);
}

/* ---- waiting for the answer --------------------------------------------- */

/* Wait for the call's answer until deadline; on time-out abandon it (and
 * clear *slot, so the session gets a fresh call next time). */
int dlock__zk_finish(struct zk_call **slot, int issued, int64_t deadline)
{
    struct zk_call *k = *slot;
    struct zk_conn *c = k->conn;
    struct timespec ts = dlock_deadline_timespec(deadline);
    int rc;

    if (issued != ZOK) /* refused before sending: no completion will come */
        return issued;
    pthread_mutex_lock(&c->mu);
    while (!k->done && dlock_now_ms() < deadline)
        pthread_cond_timedwait(&k->cv, &c->mu, &ts);
    if (!k->done) {
        k->abandoned = 1;
        k->next = c->abandoned;
        c->abandoned = k;
        *slot = NULL;
        rc = ZK_XTIMEOUT;
    } else {
        rc = k->rc;
    }
    pthread_mutex_unlock(&c->mu);
    if (dlock__zk_gone(rc) && rc != ZCLOSING)
        atomic_store(&c->expired, 1);
    return rc;
}

/* ---- the requests ------------------------------------------------------- */

/* The requests dlock makes, each waited for until deadline. */
int dlock__zk_create(struct zk_session *zs, struct zk_conn *c, const char *path,
                     const char *data, int len, int mode, int64_t deadline)
{
    struct zk_call *k = dlock__zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    dlock__zk_call_reset(k, c, ZK_CREATE);
    return dlock__zk_finish(&zs->call,
                            zoo_acreate2(c->zh, path, data, len,
                                         &ZOO_OPEN_ACL_UNSAFE, mode,
                                         zk_create_done, k),
                            deadline);
}

/* getChildren, with our watcher if watch (a semaphore's waiter). */
int dlock__zk_children(struct zk_session *zs, struct zk_conn *c,
                       const char *dir, const char *guid, int shared,
                       int watch, int64_t deadline)
{
    struct zk_call *k = dlock__zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    dlock__zk_call_reset(k, c, ZK_CHILDREN);
    snprintf(k->guid, sizeof k->guid, "%s", guid);
    k->shared = shared;
    return dlock__zk_finish(&zs->call,
                            zoo_awget_children(c->zh, dir,
                                               watch ? dlock__zk_watcher : NULL,
                                               watch ? c : NULL,
                                               zk_children_done, k),
                            deadline);
}

int dlock__zk_exists(struct zk_session *zs, struct zk_conn *c, const char *path,
                     int64_t deadline)
{
    struct zk_call *k = dlock__zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    dlock__zk_call_reset(k, c, ZK_EXISTS);
    return dlock__zk_finish(&zs->call,
                            zoo_aexists(c->zh, path, 0, dlock__zk_stat_done, k),
                            deadline);
}

int dlock__zk_delete(struct zk_session *zs, struct zk_conn *c, const char *path,
                     int64_t deadline)
{
    return dlock__zk_delete_version(zs, c, path, -1, deadline);
}

/* getData, with our watcher if watch: unlike exists(), it sets no watch
 * when the node is already gone, so a waiter whose predecessor left in the
 * meantime leaves nothing registered behind (Curator does the same). */
int dlock__zk_get(struct zk_session *zs, struct zk_conn *c, const char *path,
                  int watch, int64_t deadline)
{
    struct zk_call *k = dlock__zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    dlock__zk_call_reset(k, c, ZK_GET);
    return dlock__zk_finish(&zs->call,
                            zoo_awget(c->zh, path,
                                      watch ? dlock__zk_watcher : NULL,
                                      watch ? c : NULL, zk_data_done, k),
                            deadline);
}

/* The versioned requests of the latches (latch.c): compare-and-set on a
 * node's version; an exists() that leaves a watch even on a missing node. */
int dlock__zk_set(struct zk_session *zs, struct zk_conn *c, const char *path,
                  const char *data, int len, int version, int64_t deadline)
{
    struct zk_call *k = dlock__zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    dlock__zk_call_reset(k, c, ZK_EXISTS);
    return dlock__zk_finish(&zs->call,
                            zoo_aset(c->zh, path, data, len, version,
                                     dlock__zk_stat_done, k),
                            deadline);
}

int dlock__zk_delete_version(struct zk_session *zs, struct zk_conn *c,
                             const char *path, int version, int64_t deadline)
{
    struct zk_call *k = dlock__zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    dlock__zk_call_reset(k, c, ZK_DELETE);
    return dlock__zk_finish(&zs->call,
                            zoo_adelete(c->zh, path, version, zk_void_done, k),
                            deadline);
}

int dlock__zk_exists_watch(struct zk_session *zs, struct zk_conn *c,
                           const char *path, int64_t deadline)
{
    struct zk_call *k = dlock__zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    dlock__zk_call_reset(k, c, ZK_EXISTS);
    return dlock__zk_finish(&zs->call,
                            zoo_awexists(c->zh, path, dlock__zk_watcher, c,
                                         dlock__zk_stat_done, k),
                            deadline);
}

/* ---- failures ----------------------------------------------------------- */

/* Report a ZooKeeper failure on s with the dlock code it maps to. */
int dlock__zk_fail(struct zk_session *zs, int rc, const char *what)
{
    int code = dlock__zk_in_doubt(rc) || dlock__zk_gone(rc) ? DLOCK_ECONNECT
               : rc == ZSYSTEMERROR                         ? DLOCK_ENOMEM
                                                            : DLOCK_ERROR;

    if (dlock__zk_gone(rc))
        return dlock_session_error(&zs->base, code,
                                   "%s: %s (the ZooKeeper session is over; a "
                                   "new one is opened on the next try)",
                                   what, dlock__zk_err(rc));
    return dlock_session_error(&zs->base, code, "%s: %s", what,
                               dlock__zk_err(rc));
}
