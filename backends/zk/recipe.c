/*
 * recipe.c: ZooKeeper's lock recipe, with the node names Apache Curator
 * uses, so a C program using dlock and a Java program using Curator's
 * InterProcessMutex (or, with mode=rwlock, InterProcessReadWriteLock)
 * exclude each other on the same path. Both modes run this code; they
 * differ only in their node names (mutex.c, rwlock.c). Mode mutex's
 * permits (semaphore.c) take their mutex with dlock__zk_take() and make
 * their lease node with dlock__zk_join(); renew and release here serve a
 * lease node as they serve a lock's node.
 *
 * The recipe. Each contender creates an EPHEMERAL_SEQUENTIAL child of the
 * lock's node,
 *
 *     <chroot><base>[/<namespace>]/<name>/_c_<uuid>-lock-0000000042
 *
 * lists the children, and holds the lock when its sequence number is the
 * lowest. Otherwise it watches only its predecessor, the node just before
 * it: a release wakes one waiter, not all of them (no herd effect), and
 * waiters are served in the order the server numbered them (FIFO). A reader
 * (the shared kind) waits only for writers before it.
 *
 * Sessions. Ephemeral nodes live as long as the ZooKeeper session that made
 * them, and the mt client keeps its session alive with heartbeats from its
 * own I/O thread. So the lease IS the session: a holder that dies or stops
 * frees its locks when the server expires its session, and nothing of dlock
 * needs renewing while the process runs. Each dlock client owns ONE zhandle
 * (conn.c) shared by all its dlock sessions. A lost TCP connection is not a
 * lost session: the client reconnects (to any server of the ensemble) and
 * keeps its nodes if it gets back within the session timeout. Until then
 * the lock is "in doubt": renew() says DLOCK_ECONNECT and core keeps the
 * lock until the grant's expiry, which is always "the last time the server
 * answered us + the session timeout", so dlock_held() never says yes for a
 * session the server may already have expired. A session found expired
 * marks every lock of it lost (renew() says DLOCK_ELOST) and the next call
 * opens a new session.
 *
 * Lost answers. Every request has our deadline (call.c). A create whose
 * reply never came (connection lost, or abandoned) may still have made our
 * node; we find it again by the uuid in its name (Curator's "protected"
 * mode) and keep it, or, if we must give up, note it so that it is deleted
 * as soon as the session is reachable again (orphans.c), never left to
 * block everyone.
 *
 * Divisions: our nodes; acquire; renew and release.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zk.h"

/* ---- our nodes ---------------------------------------------------------- */

static int zk_shared(const struct dlock_request *req)
{
    return req->kind == DLOCK_KIND_SHARED;
}

/*
 * Elections (DLOCK_REQ_ELECTION) are Curator's LeaderLatch in every mode:
 * "_c_<uuid>-latch-<seq>" nodes whose data is the participant id, which
 * core puts after the owner's NUL. LeaderLatch's rule is this recipe's:
 * the lowest sequence leads, each other candidate watches its predecessor.
 * So a Java LeaderLatch on the same path and dlock candidates queue in one
 * line, and LeaderLatch.getLeader() reads a dlock leader's id.
 *
 * Why the two-leader bugs of LeaderLatch (CURATOR-653, CURATOR-620) cannot
 * happen here. There, after a connection loss and reconnect, a latch acted
 * on state from before it: a leadership decided from a listing or create
 * callback issued before the reset, or a latch node of the old attempt
 * left beside the new one, so a latch believed it led while another
 * participant's node was the lowest. Here leadership is a grant, and a
 * grant is believed only while this session proves that our very node
 * exists: dlock_held() turns false once the last answer of the session is
 * a session timeout old (the server may have expired it; it cannot have
 * before), renew() checks our node by path AND by ephemeralOwner == our
 * session id, and an expired session or a missing node reports the lock
 * lost; it is never regained from a cached listing. A reconnect within
 * the session keeps the one node we have (nobody could have led meanwhile:
 * it stayed the lowest); a create whose answer was lost is found again by
 * its uuid, and twins are deleted (zk_enqueue, the dups of a listing); a
 * node we gave up on is swept as soon as the session is back (orphans.c),
 * as the mutex does. A new campaign always creates a new node and must be
 * the lowest in a fresh listing.
 */
static int zk_election(const struct dlock_request *req)
{
    return (req->flags & DLOCK_REQ_ELECTION) != 0;
}

/* The part of our node's name that says what it asks for: one name per
 * kind, from the mode object (Curator's names: mutex.c, rwlock.c). */
static const char *zk_kind(const struct zk_ctx *x,
                           const struct dlock_request *req)
{
    if (zk_election(req))
        return "latch-";
    return zk_shared(req) ? x->mode->node_shared : x->mode->node_exclusive;
}

/* Our node's data: the owner id, or an election's participant id. */
static const char *zk_data(const struct dlock_request *req, int *len)
{
    const char *id = req->owner + req->owner_len + 1;

    if (!zk_election(req)) {
        *len = (int)req->owner_len;
        return req->owner;
    }
    *len = (int)strlen(id);
    return id;
}

/* The node name of a request: a permit is a lease node (semaphore.c). */
static const char *zk_req_kind(const struct zk_ctx *x,
                               const struct dlock_request *req)
{
    return req->kind == DLOCK_KIND_PERMIT ? ZK_SEM_LEASE : zk_kind(x, req);
}

/* The directory of a request's node: the lock's node, or for a permit its
 * leases child. Returns the length written to out. */
static size_t zk_req_dir(const struct zk_ctx *x,
                         const struct dlock_request *req, char *out)
{
    size_t n = dlock__zk_dir(x, out, req->name, req->name_len);

    if (req->kind == DLOCK_KIND_PERMIT)
        n += (size_t)snprintf(out + n, ZK_PATH_MAX - n, "%s", ZK_SEM_LEASES);
    return n;
}

/* The id in our node names: a UUID (version 4 layout, as Curator's
 * UUID.randomUUID()) made of the connection's random seed with a counter
 * mixed in, so each create has its own without a system call. */
void dlock__zk_guid(const struct zk_conn *c, uint64_t serial,
                   char out[ZK_GUID_LEN + 1])
{
    uint64_t hi = (c->seed_hi & ~0xF000ull) | 0x4000ull;
    uint64_t lo = ((c->seed_lo ^ serial) & ~(3ull << 62)) | (2ull << 62);

    snprintf(out, ZK_GUID_LEN + 1, "%08llx-%04llx-%04llx-%04llx-%012llx",
             (unsigned long long)(hi >> 32),
             (unsigned long long)((hi >> 16) & 0xFFFF),
             (unsigned long long)(hi & 0xFFFF), (unsigned long long)(lo >> 48),
             (unsigned long long)(lo & 0xFFFFFFFFFFFFull));
}

/* The full path of a held node, rebuilt from the grant (no allocation). */
static void zk_node_path(struct zk_session *zs, const struct zk_conn *c,
                         const struct dlock_request *req,
                         const struct dlock_grant *g, char *out)
{
    char guid[ZK_GUID_LEN + 1];
    size_t n = zk_req_dir(zs->ctx, req, out);

    dlock__zk_guid(c, g->word[0], guid);
    snprintf(out + n, ZK_PATH_MAX - n, "/_c_%s-%s%010d", guid,
             zk_req_kind(zs->ctx, req), (int)(uint32_t)g->word[1]);
}

/* ---- acquire ------------------------------------------------------------ */

/* Create a missing lock node and its missing parents, top-down on demand.
 * They are containers (ZooKeeper 3.5.3+), which the server deletes once
 * empty, as Curator's creatingParentContainersIfNeeded() does; persistent
 * on older servers (then release deletes an empty lock node itself). */
int dlock__zk_mkdirs(struct zk_session *zs, struct zk_conn *c, char *path,
                     int depth)
{
    int64_t deadline = dlock_now_ms() + zs->ctx->timeout_ms;
    char *slash;
    int rc;

    for (int tries = 0; tries < 4; tries++) {
        int containers = !atomic_load(&c->no_containers);
        rc = dlock__zk_create(zs, c, path, NULL, -1,
                              containers ? ZOO_CONTAINER : ZOO_PERSISTENT,
                              deadline);
        if (rc == ZOK || rc == ZNODEEXISTS)
            return ZOK;
        if (containers && (rc == ZUNIMPLEMENTED || rc == ZBADARGUMENTS)) {
            atomic_store(&c->no_containers, 1);
            continue;
        }
        if (rc != ZNONODE || depth > 64)
            return rc;
        slash = strrchr(path, '/');
        if (slash == NULL || slash == path)
            return rc;
        *slash = '\0';
        rc = dlock__zk_mkdirs(zs, c, path, depth + 1);
        *slash = '/';
        if (rc != ZOK)
            return rc;
    }
    return rc;
}

/* Delete our queue node after giving up; if that cannot be done now, the
 * sweep does it when the session is reachable. */
void dlock__zk_withdraw(struct zk_session *zs, struct zk_conn *c,
                        const char *dir, const char *self, const char *guid)
{
    int rc;

    snprintf(zs->aux, sizeof zs->aux, "%s/%s", dir, self);
    rc = dlock__zk_delete(zs, c, zs->aux, dlock_now_ms() + zs->ctx->timeout_ms);
    if (rc != ZOK && rc != ZNONODE && !dlock__zk_gone(rc))
        dlock__zk_orphan_add(c, dir, guid);
}

/*
 * Queue up: create our node, creating the lock node as needed, and leave
 * its full path in zs->node. A create whose answer was lost may have
 * happened: after reconnecting, look for our uuid among the children and
 * keep that node (and its place in the queue) if it is there, as Curator's
 * protected mode does; else create it again with the same uuid.
 */
int dlock__zk_enqueue(struct zk_session *zs, struct zk_conn *c,
                      const struct dlock_request *req, const char *guid,
                      const char *what, int shared, int64_t *czxid,
                      int *doubt)
{
    struct zk_ctx *x = zs->ctx;
    size_t dirlen = strlen(zs->dir);
    char *name = zs->node + dirlen + 1; /* after "<dir>/" */
    size_t room = sizeof zs->node - dirlen - 1;
    /* All of it, recovery included, within timeout=: a server that is
     * down or paused gives DLOCK_ECONNECT in that time. */
    int64_t limit = dlock_now_ms() + x->timeout_ms;
    int rc;

    for (int tries = 0; tries < 6; tries++) {
        int dlen;
        const char *data = zk_data(req, &dlen);

        snprintf(name, room, "_c_%s-%s", guid, what);
        rc = dlock__zk_create(zs, c, zs->node, data, dlen,
                              ZOO_EPHEMERAL_SEQUENTIAL, limit);
        if (rc == ZOK) {
            snprintf(name, room, "%s", zs->call->name);
            *czxid = zs->call->stat.czxid;
            return DLOCK_OK;
        }
        if (rc == ZNONODE) {
            rc = dlock__zk_mkdirs(zs, c, zs->dir, 0);
            if (rc != ZOK)
                return dlock__zk_fail(zs, rc,
                                      "creating the lock's parent nodes");
            continue;
        }
        if (!dlock__zk_in_doubt(rc))
            return dlock__zk_fail(zs, rc, "creating our queue node");

        /* The create may or may not have been applied. */
        *doubt = 1;
        dlock_session_log(&zs->base, DLOCK_LOG_INFO,
                          "zk: the answer to creating our node under %s was "
                          "lost (%s); looking for it by its id %s",
                          zs->dir, dlock__zk_err(rc), guid);
        if (dlock__zk_ready(zs, c, limit) != DLOCK_OK) {
            dlock__zk_orphan_add(c, zs->dir, guid);
            return DLOCK_ECONNECT;
        }
        rc = dlock__zk_children(zs, c, zs->dir, guid, shared, 0, limit);
        if (rc == ZOK && zs->call->scan.found) {
            snprintf(name, room, "%s", zs->call->scan.self);
            dlock_session_log(&zs->base, DLOCK_LOG_INFO,
                              "zk: found our node %s after the lost answer; "
                              "keeping it and its place in the queue",
                              name);
            rc = dlock__zk_exists(zs, c, zs->node, limit);
            if (rc == ZOK) {
                *czxid = zs->call->stat.czxid;
                return DLOCK_OK;
            }
        }
        if (rc != ZOK && rc != ZNONODE) {
            if (dlock__zk_in_doubt(rc))
                dlock__zk_orphan_add(c, zs->dir, guid);
            return dlock__zk_fail(zs, rc,
                                  "looking for our node after a lost answer");
        }
        /* Not there: it never happened. Create it again, same id. */
    }
    return dlock_session_error(&zs->base, DLOCK_ERROR,
                               "could not create our node under %s", zs->dir);
}

/* How long to wait for a connection: timeout=, or less if the caller's
 * deadline comes first. */
int64_t dlock__zk_limit(const struct zk_ctx *x, int64_t deadline)
{
    int64_t t = dlock_now_ms() + x->timeout_ms;
    return deadline != 0 && deadline < t ? deadline : t;
}

/* The start of every acquire: the session with a reference (*out, to
 * unref), connected, told once to the log. */
int dlock__zk_begin(struct zk_session *zs, const struct dlock_request *req,
                    int64_t deadline, struct zk_conn **out)
{
    struct dlock_session *s = &zs->base;
    struct zk_ctx *x = zs->ctx;
    struct zk_conn *c;
    int rc, timeout;

    rc = dlock__zk_conn_get(zs, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__zk_ready(zs, c, dlock__zk_limit(x, deadline));
    if (rc != DLOCK_OK) {
        dlock__zk_conn_unref(c);
        return rc;
    }
    timeout = atomic_load(&c->timeout_ms);
    if (!atomic_exchange(&c->told_session, 1))
        dlock_session_log(s, DLOCK_LOG_INFO,
                          "zk: session 0x%llx, timeout %d ms (asked for %u "
                          "ms; the server decides)",
                          (unsigned long long)atomic_load(&c->session_id),
                          timeout, x->session_ms);
    if (!(req->flags & DLOCK_LOCK_NO_WATCHDOG) &&
        !dlock__zk_lease_ok(req->lease_ms, timeout) &&
        !atomic_exchange(&c->warned_lease, 1))
        /* Each renewal vouches for one session timeout: core renews at a
         * third of what a grant holds, so the lease asked for costs more
         * renewals than it says. */
        dlock_session_log(s, DLOCK_LOG_INFO,
                          "zk: lease %u ms is more than twice the session "
                          "timeout (%d ms): each renewal vouches for the "
                          "session for %d ms only, so the watchdog renews "
                          "every %d ms, not every %u ms",
                          req->lease_ms, timeout, timeout, timeout / 3,
                          req->lease_ms / 3);
    *out = c;
    return DLOCK_OK;
}

/* Make our node in zs->dir, named `what` after a fresh uuid (in guid and
 * t->id); zs->node is its path. t->czxid and t->doubt as in
 * dlock__zk_enqueue(). */
int dlock__zk_join(struct zk_session *zs, struct zk_conn *c,
                   const struct dlock_request *req, const char *what,
                   int shared, struct zk_taken *t, char *guid)
{
    size_t dirlen = strlen(zs->dir);

    memcpy(zs->node, zs->dir, dirlen);
    zs->node[dirlen] = '/';
    t->id = atomic_fetch_add(&c->next_id, 1);
    dlock__zk_guid(c, t->id, guid);
    return dlock__zk_enqueue(zs, c, req, guid, what, shared, &t->czxid,
                             &t->doubt);
}

/*
 * Before each listing of a waiting acquire: DLOCK_OK to go on. Cancelled
 * [B-CANCEL-1]: our node is deleted (if it had just been granted, that
 * is the release). Disconnected for longer than timeout=: the attempt
 * ends (core retries until the deadline) and our node goes when it can.
 */
int dlock__zk_going(struct zk_session *zs, struct zk_conn *c,
                    int64_t deadline, const char *self, const char *guid)
{
    int rc = dlock_session_cancelled(&zs->base);

    if (rc != 0) {
        dlock__zk_withdraw(zs, c, zs->dir, self, guid);
        return rc;
    }
    if (dlock__zk_ready(zs, c, dlock__zk_limit(zs->ctx, deadline)) !=
        DLOCK_OK) {
        dlock__zk_orphan_add(c, zs->dir, guid);
        return DLOCK_ECONNECT;
    }
    return DLOCK_OK;
}

/*
 * After listing zs->dir, where our node `self` (with guid) should be:
 * DLOCK_OK when the listing (zs->call->scan) has our node; ZK_RELIST to
 * list again (a short disconnection, ridden out for timeout=, but not a
 * server connected and silent for longer); ZK_RECREATE when our node has
 * vanished (deleted by someone; a few times, then given up); else the
 * code to give up with, our node deleted or noted as an orphan. `what`
 * names the directory in messages ("queue", "leases").
 */
int dlock__zk_listed(struct zk_session *zs, struct zk_conn *c, int rc,
                     const char *self, const char *guid, const char *what,
                     struct zk_tries *tries)
{
    int64_t now = dlock_now_ms();
    char listing[32];

    snprintf(listing, sizeof listing, "listing the %s", what);
    if (dlock__zk_in_doubt(rc)) {
        if (tries->doubt_since == 0)
            tries->doubt_since = now;
        if (now - tries->doubt_since < (int64_t)zs->ctx->timeout_ms)
            return ZK_RELIST;
        dlock__zk_orphan_add(c, zs->dir, guid);
        return dlock__zk_fail(zs, rc, listing);
    }
    tries->doubt_since = 0;
    if (rc != ZOK) {
        if (!dlock__zk_gone(rc))
            dlock__zk_withdraw(zs, c, zs->dir, self, guid);
        return dlock__zk_fail(zs, rc, listing);
    }
    if (zs->call->scan.found)
        return DLOCK_OK;
    /* Our node is gone: the session ended, or someone deleted it. */
    if (atomic_load(&c->expired) || tries->requeued++ >= 3)
        return dlock_session_error(&zs->base, DLOCK_ECONNECT,
                                   "our node under %s vanished (session "
                                   "expired or node deleted)",
                                   zs->dir);
    return ZK_RECREATE;
}

/*
 * Queue in zs->dir under node name `what` and wait until our node needs
 * nobody ahead to go (the lowest; a reader: no writer ahead), or until
 * deadline (0: one look). On DLOCK_OK zs->node is our node's path and t
 * says what the grant needs; on failure nothing of ours stays queued (or
 * it is noted as an orphan).
 */
int dlock__zk_take(struct zk_session *zs, struct zk_conn *c,
                   const struct dlock_request *req, const char *what,
                   int shared, int64_t deadline, struct zk_taken *t)
{
    struct dlock_session *s = &zs->base;
    struct zk_ctx *x = zs->ctx;
    char guid[ZK_GUID_LEN + 1];
    struct zk_scan scan;
    struct zk_waiter w;
    struct zk_tries tries = {0, 0};
    uint64_t gen;
    int rc;
    char *self = zs->node + strlen(zs->dir) + 1;

    t->doubt = 0;
requeue:
    rc = dlock__zk_join(zs, c, req, what, shared, t, guid);
    if (rc != DLOCK_OK)
        return rc;
    if (deadline != 0)
        dlock_session_queued(s); /* [B-QUEUED-1] */

    for (;;) {
        if ((rc = dlock__zk_going(zs, c, deadline, self, guid)) != DLOCK_OK)
            return rc;
        t->alive = dlock_now_ms();
        rc = dlock__zk_children(zs, c, zs->dir, guid, shared, 0,
                                t->alive + x->timeout_ms);
        rc = dlock__zk_listed(zs, c, rc, self, guid, "queue", &tries);
        if (rc == ZK_RELIST)
            continue;
        if (rc == ZK_RECREATE)
            goto requeue;
        if (rc != DLOCK_OK)
            return rc;
        /* Later calls reuse (or replace) the call: keep what we need. */
        scan = zs->call->scan;
        dlock__zk_drop_dups(zs, c, &scan, guid);
        if (scan.blocked == 0)
            break; /* ours is the lowest: held */
        if (deadline == 0 || dlock_now_ms() >= deadline) {
            dlock__zk_withdraw(zs, c, zs->dir, self, guid);
            return deadline == 0 ? DLOCK_EBUSY : DLOCK_ETIMEDOUT;
        }

        /* Watch only the node just ahead of ours (no herd), then sleep
         * until it goes, the session changes state, or the deadline. A
         * watched getData, not exists: see dlock__zk_get. */
        snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir, scan.pred);
        dlock__zk_waiter_add(c, &w, zs->aux, &gen);
        rc = dlock__zk_get(zs, c, zs->aux, 1, dlock_now_ms() + x->timeout_ms);
        if (rc == ZOK)
            dlock__zk_sleep(s, c, &w, gen, deadline);
        dlock__zk_waiter_remove(c, &w);
        if (rc != ZOK && rc != ZNONODE && !dlock__zk_in_doubt(rc)) {
            if (!dlock__zk_gone(rc))
                dlock__zk_withdraw(zs, c, zs->dir, self, guid);
            return dlock__zk_fail(zs, rc, "watching the node ahead of ours");
        }
        /* Look again: the node ahead went (another may still be ahead),
         * the connection changed, or time is up. */
    }
    t->seq = scan.self_seq;
    return DLOCK_OK;
}

/* A create that was sent twice left twins of our node: keep the first. */
void dlock__zk_drop_dups(struct zk_session *zs, struct zk_conn *c,
                         const struct zk_scan *scan, const char *guid)
{
    for (int i = 0; i < scan->ndups; i++) {
        snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir, scan->dups[i]);
        if (dlock__zk_delete(zs, c, zs->aux,
                             dlock_now_ms() + zs->ctx->timeout_ms) != ZOK)
            dlock__zk_orphan_add(c, zs->dir, guid);
    }
}

/* Fill a grant from what dlock__zk_take() (or the semaphore) got; the
 * reference to c moves to the grant. */
void dlock__zk_grant(struct zk_conn *c, const struct zk_taken *t,
                     struct dlock_grant *grant)
{
    grant->fence = (uint64_t)t->czxid;
    /* The server answered a request sent at `alive`, so the session lives
     * at least until alive + its timeout. */
    grant->expires_ms = t->alive + atomic_load(&c->timeout_ms);
    grant->priv = c;
    grant->word[0] = t->id;
    grant->word[1] = (uint64_t)(uint32_t)t->seq | (t->doubt ? ZK_W_DOUBT : 0);
}

int dlock__zk_acquire(struct dlock_session *s, const struct dlock_request *req,
                      int64_t deadline, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct zk_session *zs = (struct zk_session *)s;
    int shared = zk_shared(req);
    struct zk_taken t;
    struct zk_conn *c;
    int rc;

    (void)retry_ms; /* waiting is native: no hint to give */
    rc = dlock__zk_begin(zs, req, deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    dlock__zk_dir(zs->ctx, zs->dir, req->name, req->name_len);
    rc = dlock__zk_take(zs, c, req, zk_kind(zs->ctx, req), shared,
                        deadline, &t);
    if (rc != DLOCK_OK) {
        dlock__zk_conn_unref(c);
        return rc;
    }
    dlock__zk_grant(c, &t, grant);
    return DLOCK_OK;
}

/* ---- renew and release -------------------------------------------------- */

/*
 * The session keeps itself alive; renewing means proving it still is and
 * that our node is still there, which one exists() per lock does (sent all
 * at once, answered in one round trip). Each answer vouches for the
 * session until the time it was asked + the session timeout: that is the
 * grant's new expiry. No answer: in doubt (DLOCK_ECONNECT), and core gives
 * up when that expiry passes. Expired session or node gone: DLOCK_ELOST.
 */
int dlock__zk_renew(struct dlock_session *s, struct dlock_renewal *items,
                    size_t n)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    struct zk_call *one[1], **calls = one;
    int *sent;
    int64_t t0 = dlock_now_ms(), deadline;
    uint32_t wait_ms = x->timeout_ms;
    int one_sent[1];

    sent = one_sent;
    if (n > 1) {
        calls = calloc(n, sizeof *calls);
        sent = calloc(n, sizeof *sent);
        if (calls == NULL || sent == NULL) {
            free(calls);
            free(sent);
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
        }
    } else {
        calls[0] = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct zk_conn *c = items[i].grant->priv;
        struct zk_call *k;
        char path[ZK_PATH_MAX];

        sent[i] = ZINVALIDSTATE;
        if (atomic_load(&c->expired)) {
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST,
                "the ZooKeeper session expired: the server deleted our node");
            continue;
        }
        pthread_mutex_lock(&c->mu);
        int up = c->connected;
        /* No answer should take long: half a session timeout at most, so
         * a loss is reported close to when it happens. */
        if (c->timeout_ms > 0 && (uint32_t)c->timeout_ms / 2 < wait_ms)
            wait_ms = (uint32_t)c->timeout_ms / 2;
        pthread_mutex_unlock(&c->mu);
        if (!up) {
            items[i].result = dlock_session_error(
                s, DLOCK_ECONNECT,
                "disconnected from ZooKeeper: the session (and the lock) is "
                "in doubt until it reconnects or times out");
            continue;
        }
        k = n == 1 ? dlock__zk_slot(zs) : dlock__zk_call_new();
        if (k == NULL) {
            items[i].result =
                dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
            continue;
        }
        calls[i] = k;
        dlock__zk_call_reset(k, c, ZK_EXISTS);
        zk_node_path(zs, c, items[i].req, items[i].grant, path);
        sent[i] = zoo_aexists(c->zh, path, 0, dlock__zk_stat_done, k);
    }
    deadline = t0 + wait_ms;
    for (size_t i = 0; i < n; i++) {
        struct zk_conn *c = items[i].grant->priv;
        int rc;

        if (calls[i] == NULL)
            continue;
        rc = dlock__zk_finish(&calls[i], sent[i], deadline);
        if (rc == ZOK) {
            pthread_mutex_lock(&c->mu);
            int64_t sid = c->session_id;
            pthread_mutex_unlock(&c->mu);
            if (calls[i]->stat.ephemeralOwner != sid)
                items[i].result = dlock_session_error(
                    s, DLOCK_ELOST, "our node now belongs to another session");
            else {
                items[i].grant->expires_ms = t0 + c->timeout_ms;
                items[i].result = DLOCK_OK;
            }
        } else if (rc == ZNONODE) {
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST,
                atomic_load(&c->expired)
                    ? "the ZooKeeper session expired: the server deleted "
                      "our node"
                    : "our node was deleted (by someone else, or with an "
                      "expired session)");
        } else if (dlock__zk_gone(rc)) {
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST, "the ZooKeeper session is over: %s",
                dlock__zk_err(rc));
        } else {
            items[i].result = dlock_session_error(
                s, dlock__zk_in_doubt(rc) ? DLOCK_ECONNECT : DLOCK_ERROR,
                "checking our node: %s (in doubt until the session "
                "answers or times out)",
                dlock__zk_err(rc));
        }
        if (n > 1)
            dlock__zk_call_free(calls[i]); /* NULL if it was abandoned */
        else
            zs->call = calls[0];
    }
    if (n > 1) {
        free(calls);
        free(sent);
    }
    return DLOCK_OK;
}

int dlock__zk_release(struct dlock_session *s, const struct dlock_request *req,
                      struct dlock_grant *grant)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    struct zk_conn *c = grant->priv;
    char guid[ZK_GUID_LEN + 1];
    size_t dirlen;
    int rc;

    if (c == NULL)
        return DLOCK_OK;
    grant->priv = NULL;
    dirlen = zk_req_dir(x, req, zs->dir);
    dlock__zk_guid(c, grant->word[0], guid);
    zk_node_path(zs, c, req, grant, zs->node);
    if (atomic_load(&c->expired)) {
        rc = dlock_session_error(s, DLOCK_ENOTOWNER,
                                 "the ZooKeeper session had expired: the "
                                 "lock was lost before this release");
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    int up = c->connected;
    pthread_mutex_unlock(&c->mu);
    if (!up) {
        /* Do not wait for the connection (closing a client that holds many
         * locks would take that long per lock): the sweep deletes the node
         * when the session is back, or the server when it ends. */
        dlock__zk_orphan_add(c, zs->dir, guid);
        rc = dlock_session_error(s, DLOCK_ECONNECT,
                                 "disconnected from ZooKeeper: our node is "
                                 "deleted when the session is back, or by "
                                 "the server when it ends");
        goto out;
    }
    rc = dlock__zk_delete(zs, c, zs->node, dlock_now_ms() + x->timeout_ms);
    if (rc == ZOK) {
        rc = DLOCK_OK;
        if (grant->word[1] & ZK_W_DOUBT) /* a twin of our node may exist */
            dlock__zk_orphan_add(c, zs->dir, guid);
        if (atomic_load(&c->no_containers) &&
            req->kind != DLOCK_KIND_PERMIT) { /* old server: remove an
                                               * empty lock node */
            zs->dir[dirlen] = '\0';
            dlock__zk_delete(zs, c, zs->dir, dlock_now_ms() + x->timeout_ms);
        }
    } else if (rc == ZNONODE) {
        rc = dlock_session_error(s, DLOCK_ENOTOWNER,
                                 "our node was already gone (session "
                                 "expired or node deleted)");
    } else if (dlock__zk_gone(rc)) {
        rc = dlock_session_error(s, DLOCK_ENOTOWNER,
                                 "the ZooKeeper session is over (%s): the "
                                 "lock was lost before this release",
                                 dlock__zk_err(rc));
    } else {
        /* Not deleted, maybe not reachable: the sweep deletes it when the
         * session is back, or the server when the session ends. */
        dlock__zk_orphan_add(c, zs->dir, guid);
        rc = dlock__zk_fail(zs, rc,
                            "deleting our node (it goes when the session "
                            "answers again, or ends)");
    }
out:
    dlock__zk_conn_unref(c);
    return rc;
}
