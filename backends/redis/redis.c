/*
 * redis.c: the redis:// backend (modes setnx, hash, rwlock, fair and queue) and
 * redlock:// (the same SET-NX lock on N independent masters), over hiredis
 * 0.14. This file holds the backend's table, its list of modes, the choice
 * of mode, the per-client context and the sessions' life; rd.h lists the
 * other files and what each holds.
 *
 *   redis://[[user]:password@]host[:port][/db][?mode=setnx|hash|rwlock|
 *                                               fair|queue&...]
 *   redlock://h1:p1,h2:p2,...[?node_timeout=&drift=&restart_delay=...]
 *   redis://h1,h2,...?redlock=1          (the same as redlock://)
 *   redis://h1:p1,h2:p2,...?cluster=1    (setnx or hash on a Redis
 *                                         Cluster: cluster.c)
 *
 * Four ways to lock with Redis, each a lesson:
 *
 *   setnx    (setnx.c) one key per lock holding the owner id, taken with
 *            SET key owner NX PX lease inside a Lua script that also bumps
 *            a fencing counter; released by compare-and-delete plus a
 *            PUBLISH that wakes the waiters; renewed by compare-and-PEXPIRE.
 *   hash     (hash.c) Redisson's RLock layout (a hash at the lock name,
 *            field "<uuid>:<id>" holding the hold count, channel
 *            redisson_lock__channel:{name}, unlock message 0), so a C service
 *            on dlock and a Java service on Redisson exclude each other.
 *            The fencing counter is Redisson's RFencedLock token key.
 *            Its permits (counting semaphores) are Redisson's
 *            RPermitExpirableSemaphore's: the free count at the name, a
 *            sorted set of holders scored with their lease's end, channel
 *            redisson_sc:{name}. Why hash and not a mode of its own: it is
 *            Redisson's family (the same names, namespace= and token), a
 *            user of Redisson's objects already picks mode=hash, and a
 *            semaphore mode would have to invent an exclusive lock beside
 *            it (every mode serves exclusive requests). The other modes
 *            and Redlock have no permits (core refuses them at lock_new).
 *   rwlock   (rwlock.c) Redisson's RReadWriteLock layout: shared readers
 *            and one writer on one hash ("mode" field), interoperable
 *            with Java's RReadWriteLock; prefer=writer holds new readers
 *            back while a writer waits.
 *   fair     (fair.c) Redisson's RFairLock: hash's lock plus a wait queue
 *            and a timeout set, each waiter woken on its own channel, so
 *            grants follow arrival (and Java's RFairLock queues in the same
 *            line); a waiter's place is kept while its process lives
 *            (wait_time=), and clock=server takes the queue's time from
 *            the server.
 *   queue    (queue.c) dlock's own FIFO lock: the release script hands
 *            the lock to the first live waiter and publishes the grant
 *            on that waiter's channel only; the woken waiter holds it
 *            with no further round trip.
 *   redlock  (redlock.c) setnx's lock on N independent masters: held when a
 *            majority said yes within the validity time (lease - elapsed -
 *            drift); no fencing tokens, because no single counter can be
 *            trusted to grow when the majority that granted the lock
 *            changes; a restarted node counts for nothing until it has
 *            been up longer than restart_delay (restart.c).
 *
 * Core picks the mode once per client: redlock:// or redlock=1 make it
 * Redlock (pick_mode below; mode=hash with either is refused), else mode=,
 * else setnx. Every script runs by EVALSHA (conn.c). fair and queue wait
 * inside their acquire, each waiter on a channel of its own (fair.c,
 * queue.c). setnx and hash wait
 * for a release on the client's one pub/sub connection (pubsub.c); Redlock
 * waiters poll.
 *
 * Divisions: choosing the mode; the per-client context; sessions; the
 * table.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rd.h"

/* The modes, the default first. */
static const struct dlock__rd_mode *const rd_modes_own[] = {
    &dlock__rd_mode_setnx, &dlock__rd_mode_hash, &dlock__rd_mode_rwlock,
    &dlock__rd_mode_fair, &dlock__rd_mode_queue,
    &dlock__rd_mode_redlock, NULL};

/* ---- choosing the mode --------------------------------------------------------- */

/*
 * redlock:// and redlock=1 ask for Redlock, whatever mode= says, unless it
 * says hash: a Redlock is made of setnx locks. Without either, core's rule
 * (mode=, else setnx); an unknown mode= is left to core, which names the
 * modes.
 */
static int rd_pick_mode(const struct dlock_uri *uri,
                        const struct dlock_mode **out, char *err,
                        size_t errlen)
{
    int redlock = 0, rc;

    if ((rc = dlock_uri_bool(uri, "redlock", 0, &redlock, err, errlen)) !=
        DLOCK_OK)
        return rc;
    if (strcmp(uri->scheme, "redlock") == 0)
        redlock = 1;
    if (!redlock)
        return DLOCK_OK;
    if (uri->mode == NULL ||
        strcasecmp(uri->mode, dlock__rd_mode_setnx.base.name) == 0 ||
        strcasecmp(uri->mode, dlock__rd_mode_redlock.base.name) == 0) {
        *out = &dlock__rd_mode_redlock.base;
        return DLOCK_OK;
    }
    for (size_t i = 0; rd_modes_own[i] != NULL; i++)
        if (strcasecmp(uri->mode, rd_modes_own[i]->base.name) == 0)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "mode: %s cannot be combined with redlock (a "
                                "Redlock is made of setnx locks)",
                                rd_modes_own[i]->base.name);
    return DLOCK_OK; /* an unknown mode= is core's to name */
}

/* ---- the per-client context ---------------------------------------------------- */

/*
 * cluster=1: the mode's scripts announce a release with SPUBLISH (sharded
 * pub/sub, Redis 7: only the master owning the slot and its replicas
 * carry it, where PUBLISH goes to every node of the cluster); x->m is a
 * copy of the mode with those scripts.
 */
static int cluster_mode(struct dlock__rd_ctx *x, char *err, size_t errlen)
{
    if ((x->cmode = malloc(sizeof *x->cmode)) == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    *x->cmode = *x->m;
    for (size_t i = 0; i < RD_SC_COUNT; i++) {
        if (x->m->script[i] == NULL)
            continue; /* not in this mode */
        const char *lua = x->m->script[i]->lua, *p = strstr(lua, "'publish'");
        size_t n = strlen(lua);
        char *t = malloc(n + 2);

        if (t == NULL) {
            while (i-- > 0)
                free((char *)x->cscript[i].lua); /* NULL for gaps */
            free(x->cmode);
            x->cmode = NULL;
            return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
        }
        x->cscript[i] = *x->m->script[i];
        if (p != NULL) /* 'publish' -> 'spublish' */
            snprintf(t, n + 2, "%.*s's%s", (int)(p - lua), lua, p + 1);
        else
            memcpy(t, lua, n + 1);
        x->cscript[i].lua = t;
        x->cmode->script[i] = &x->cscript[i];
    }
    x->m = x->cmode;
    return DLOCK_OK;
}

/* What the URI says that only some modes can do. */
static int mode_conf(const struct dlock__rd_mode *m,
                     const struct dlock__rd_conf *cf, char *err,
                     size_t errlen)
{
    if (m != &dlock__rd_mode_rwlock && cf->prefer_writer)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "prefer: only mode=rwlock has readers to hold "
                            "back (mode is %s)",
                            m->base.name);
    if (m == &dlock__rd_mode_rwlock && cf->cluster)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "cluster: mode=rwlock does not run on a Redis "
                            "Cluster yet (its readers' timeout keys are "
                            "named inside the scripts)");
    return DLOCK_OK;
}

static int rd_ctx_open(void **out, const struct dlock_uri *uri,
                       const struct dlock_mode *mode, char *err,
                       size_t errlen)
{
    const struct dlock__rd_mode *m = NULL;
    struct dlock__rd_ctx *x;
    int rc;

    *out = NULL;
    /* Core hands back one of our modes; each is the first member of its
     * struct dlock__rd_mode. */
    for (size_t i = 0; rd_modes_own[i] != NULL; i++)
        if (&rd_modes_own[i]->base == mode)
            m = rd_modes_own[i];
    if (m == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "mode: not a mode of redis");
    x = calloc(1, sizeof *x);
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    x->m = m;
    if ((rc = dlock__rd_conf_parse(&x->conf, uri, m, err, errlen)) !=
        DLOCK_OK) {
        free(x);
        return rc;
    }
    if ((rc = mode_conf(m, &x->conf, err, errlen)) != DLOCK_OK) {
        dlock__rd_conf_free(&x->conf);
        free(x);
        return rc;
    }
    /* Modes that notify get the pub/sub part; Redlock waiters poll. */
    if ((m->base.caps & DLOCK_CAP_NOTIFY) &&
        (rc = dlock__rd_pubsub_init(&x->ps, &x->conf, err, errlen)) !=
            DLOCK_OK) {
        dlock__rd_conf_free(&x->conf);
        free(x);
        return rc;
    }
    /* sentinel=: follow +switch-master (sentinel.c); cluster=1: the
     * scripts announce with SPUBLISH. */
    if ((rc = dlock__rd_switch_start(x, err, errlen)) != DLOCK_OK ||
        (x->conf.cluster && (rc = cluster_mode(x, err, errlen)) != DLOCK_OK)) {
        dlock__rd_switch_stop(&x->sw);
        dlock__rd_pubsub_stop(&x->ps);
        dlock__rd_conf_free(&x->conf);
        free(x);
        return rc;
    }
    for (size_t i = 0; i < RD_NODES_MAX; i++)
        x->ident[i].up_since_ms = INT64_MIN;
    x->longest_lease_ms = x->conf.lease_ms;
    pthread_mutex_init(&x->id_mu, NULL);
    *out = x;
    return DLOCK_OK;
}

static void rd_ctx_close(void *ctx)
{
    struct dlock__rd_ctx *x = ctx;

    if (x == NULL)
        return;
    dlock__rd_switch_stop(&x->sw);
    dlock__rd_pubsub_stop(&x->ps);
    for (size_t i = 0; i < RD_CLUSTER_NODES_MAX && x->shard[i] != NULL; i++) {
        dlock__rd_pubsub_stop(x->shard[i]);
        free(x->shard[i]);
    }
    for (size_t i = 0; x->cmode != NULL && i < RD_SC_COUNT; i++)
        free((char *)x->cscript[i].lua);
    free(x->cmode);
    pthread_mutex_destroy(&x->id_mu);
    dlock__rd_conf_free(&x->conf);
    free(x);
}

/* ---- sessions ------------------------------------------------------------------- */

static int rd_open(struct dlock_session **out, const struct dlock_uri *uri,
                   void *ctx, char *err, size_t errlen)
{
    struct dlock__rd_ctx *x = ctx;
    struct dlock__rd_session *rs;
    int rc;

    (void)uri; /* read once, in ctx_open */
    rs = calloc(1, sizeof *rs);
    if (rs == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    rs->x = x;
    rs->m = x->m;
    rs->cf = &x->conf;
    /* One server (single.c), or Redlock's nodes (rounds.c). */
    rc = rs->cf->cluster ? dlock__rd_cluster_open(rs, err, errlen)
                         : rs->m->open(rs, err, errlen);
    if (rc != DLOCK_OK) {
        free(rs);
        return rc;
    }
    *out = &rs->base;
    return DLOCK_OK;
}

static void rd_close(struct dlock_session *s)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;

    if (rs->cl != NULL)
        dlock__rd_cluster_close(rs);
    else
        rs->m->close(rs);
    dlock__rd_keys_free(&rs->keys);
    free(rs);
}

/* ---- the table ------------------------------------------------------------------- */

static const struct dlock_mode *const rd_modes[] = {
    &dlock__rd_mode_setnx.base, &dlock__rd_mode_hash.base,
    &dlock__rd_mode_rwlock.base, &dlock__rd_mode_fair.base,
    &dlock__rd_mode_queue.base, &dlock__rd_mode_redlock.base, NULL};

static const char *const rd_params[] = {
    "redlock",  "drift",         "node_timeout", "restart_delay",
    "sentinel", "sync_replicas", "sync_timeout", "cluster",
    "prefer",   "wait_time",     "clock",        NULL};
static const char *const rd_aliases[] = {"redlock", NULL};

const struct dlock_backend dlock__backend_redis = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "redis",
    .aliases = rd_aliases,
    .params = rd_params,
    .summary = "Redis: SET NX PX (setnx), Redisson's RLock and "
               "RPermitExpirableSemaphore (hash), either "
               "on a Redis Cluster (cluster=1), Redisson's RReadWriteLock "
               "(rwlock) and RFairLock (fair), a FIFO hand-off (queue), "
               "Redlock over N masters "
               "(redlock://)",
    .modes = rd_modes,
    .pick_mode = rd_pick_mode,
    .ctx_open = rd_ctx_open,
    .ctx_close = rd_ctx_close,
    .open = rd_open,
    .close = rd_close,
};
