/*
 * semaphore.c: counting semaphores (permits, DLOCK_KIND_PERMIT) with
 * Apache Curator's InterProcessSemaphoreV2 layout, so dlock's permits and
 * a Java InterProcessSemaphoreV2 on the same path count each other's
 * leases. Checked against Curator 5.4.0 (Debian's jar).
 *
 * The layout, under the semaphore's node:
 *
 *     <name>/locks/_c_<uuid>-lock-<seq>    an InterProcessMutex
 *     <name>/leases/_c_<uuid>-lease-<seq>  one ephemeral sequential node
 *                                          per lease (protected-mode name)
 *
 * Curator's recipe, which this file follows: take the mutex of locks;
 * create our lease node; list leases; we hold a lease when the children
 * of leases, ours included and every child counted, number at most
 * maxLeases. Otherwise wait, still holding the mutex, for the children
 * to change, and list again. Then release the mutex, having got a lease
 * or having deleted our node when time ran out. So the only lease node
 * that does not hold a lease is the mutex holder's; everyone else waits
 * in the mutex's queue (recipe.c: FIFO, each watching its predecessor).
 *
 * Safety does not rest on the mutex. A lease is granted when a listing
 * made after our node was created shows at most N children. Of N + 1
 * holders, the last to be granted would have listed the N others (made
 * before their own listings, still there) and its own: N + 1 > N. So
 * Curator and dlock clients never exceed N together, whatever their
 * timing; the mutex is what keeps waiters queued and served in order.
 *
 * The watch. The issue asks that a waiter watch only what it needs, not
 * every lease node. Curator's rule is a count: ANY holder's leaving frees
 * the permit. An exists-watch on one lease node would sleep through the
 * permits the others return, holding the mutex everyone queues on;
 * watches on all of them are the "every lease node" to avoid. So the one
 * waiter on leases (the mutex holder) sets ONE children watch on leases,
 * as Curator does; it fires once per change, and nobody else is woken:
 * the waiters behind it each watch one node of locks. A Curator waiter
 * is woken by our deletes through its own children watch; a dlock waiter
 * by Curator's. Nothing needs announcing.
 *
 * Which mode. Mode mutex (the default) serves permits: the semaphore's
 * locks child IS an InterProcessMutex, which that mode runs; a handle
 * asks for a lock or a permit as the Java side picks InterProcessMutex or
 * InterProcessSemaphoreV2 per path, so one URI serves both (`dlock exec
 * --permits N` with the default URI). A mode=semaphore would have to
 * serve exclusive requests too (core's rule) and so be mode mutex again.
 * Mode rwlock does not serve permits: the layout does not depend on its
 * node names, and one mode that does is enough. A name is a lock or a
 * semaphore, never both: a lock's nodes and a semaphore's children live
 * side by side under one name without seeing each other.
 *
 * The count. Curator's maxLeases is a convention among its users (or a
 * SharedCount at a path of the user's choosing, which dlock does not
 * read): nothing in the layout stores it, so a request with another count
 * cannot be refused. Every user of a name must ask the same count; one
 * asking more takes permits the others would refuse.
 *
 * Leases are the ZooKeeper session, as for locks: a killed holder's lease
 * node goes when its session expires, and renew() proves the node there
 * (recipe.c). The fence is the lease node's czxid: zxids strictly
 * increase across the ensemble, so each permit of a name has a larger
 * one than every earlier permit. Lost answers (CURATOR-315: a create
 * whose reply was lost left a lease node that blocked a permit while the
 * session lived): our lease node is found again by the uuid in its name,
 * or noted and deleted once the session is back (orphans.c), like our
 * lock node.
 *
 * Divisions: a lease; acquire.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "zk.h"

/* ---- a lease ------------------------------------------------------------ */

/*
 * Holding the mutex: create our lease node in zs->dir (the leases) and
 * wait until the leases number at most req->permits, or until deadline
 * (0: one look). On DLOCK_OK zs->node is our lease node and t describes
 * it; otherwise it is deleted (or noted as an orphan).
 */
static int zk_sem_lease(struct zk_session *zs, struct zk_conn *c,
                        const struct dlock_request *req, int64_t deadline,
                        struct zk_taken *t)
{
    struct dlock_session *s = &zs->base;
    struct zk_ctx *x = zs->ctx;
    char guid[ZK_GUID_LEN + 1], *self = zs->node + strlen(zs->dir) + 1;
    struct zk_tries tries = {0, 0};
    struct zk_scan scan = {0};
    struct zk_waiter w;
    int rc;
    uint64_t gen;

    t->doubt = 0;
create:
    rc = dlock__zk_join(zs, c, req, ZK_SEM_LEASE, 0, t, guid);
    if (rc != DLOCK_OK)
        return rc;
    for (int watch = 0;;) {
        int full;

        if ((rc = dlock__zk_going(zs, c, deadline, self, guid)) != DLOCK_OK)
            return rc;
        /* Once we must wait, the listing sets the watch: a lease
         * returned after it wakes us, one returned before it is in it.
         * (No watch before: a lease got at once leaves none behind; one
         * got after waiting leaves it until leases next change, at the
         * latest our own release.) */
        dlock__zk_waiter_add(c, &w, zs->dir, &gen);
        t->alive = dlock_now_ms();
        rc = dlock__zk_children(zs, c, zs->dir, guid, 0, watch,
                                t->alive + x->timeout_ms);
        if (rc == ZOK)
            scan = zs->call->scan;
        /* Curator's rule: held when at most maxLeases children. */
        full = rc == ZOK && scan.found && scan.ndups == 0 &&
               scan.children > (int)req->permits;
        if (full && deadline != 0 && dlock_now_ms() < deadline) {
            if (watch)
                dlock__zk_sleep(s, c, &w, gen, deadline);
            watch = 1;
            dlock__zk_waiter_remove(c, &w);
            continue; /* a change, a session event, or time is up */
        }
        dlock__zk_waiter_remove(c, &w);
        rc = dlock__zk_listed(zs, c, rc, self, guid, "leases", &tries);
        if (rc == ZK_RELIST)
            continue;
        if (rc == ZK_RECREATE)
            goto create;
        if (rc != DLOCK_OK)
            return rc;
        if (scan.ndups > 0) { /* twins of a create sent twice: count again */
            dlock__zk_drop_dups(zs, c, &scan, guid);
            continue;
        }
        if (!full)
            break;
        dlock__zk_withdraw(zs, c, zs->dir, self, guid);
        return deadline == 0 ? DLOCK_EBUSY : DLOCK_ETIMEDOUT;
    }
    t->seq = scan.self_seq;
    return DLOCK_OK;
}

/* ---- acquire ------------------------------------------------------------ */

/* A try: are the leases full already? Then no node is made at all. */
static int zk_sem_full(struct zk_session *zs, struct zk_conn *c,
                       const struct dlock_request *req)
{
    int rc = dlock__zk_children(zs, c, zs->dir, "", 0, 0,
                                dlock_now_ms() + zs->ctx->timeout_ms);

    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK)
        return dlock__zk_fail(zs, rc, "listing the leases");
    return zs->call->scan.children >= (int)req->permits;
}

int dlock__zk_sem_acquire(struct dlock_session *s,
                          const struct dlock_request *req, int64_t deadline,
                          struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    char locks[ZK_PATH_MAX], lock[ZK_NODE_MAX], guid[ZK_GUID_LEN + 1];
    struct zk_taken mutex, t;
    struct zk_conn *c;
    int64_t mutex_deadline = deadline;
    size_t n;
    int rc;

    if (req->kind != DLOCK_KIND_PERMIT)
        return dlock__zk_acquire(s, req, deadline, grant, retry_ms);
    (void)retry_ms; /* waiting is native: no hint to give */
    rc = dlock__zk_begin(zs, req, deadline, &c);
    if (rc != DLOCK_OK)
        return rc;
    n = dlock__zk_dir(x, zs->dir, req->name, req->name_len);
    if (deadline == 0) {
        /* A try looks at the leases first, and refuses a full semaphore
         * without a write. Otherwise the mutex is held only while its
         * holder creates and counts its lease: wait for that (at most
         * timeout=) rather than refuse a semaphore with room. */
        snprintf(zs->dir + n, sizeof zs->dir - n, "%s", ZK_SEM_LEASES);
        rc = zk_sem_full(zs, c, req);
        if (rc != 0) {
            rc = rc > 0 ? DLOCK_EBUSY : rc;
            goto out;
        }
        mutex_deadline = dlock_now_ms() + x->timeout_ms;
    }
    /* Curator's InterProcessMutex on <name>/locks: mode mutex's names. */
    snprintf(zs->dir + n, sizeof zs->dir - n, "%s", ZK_SEM_LOCKS);
    rc = dlock__zk_take(zs, c, req, x->mode->node_exclusive, 0,
                        mutex_deadline, &mutex);
    if (rc == DLOCK_ETIMEDOUT && deadline == 0)
        rc = DLOCK_EBUSY;
    if (rc != DLOCK_OK)
        goto out;
    snprintf(locks, sizeof locks, "%s", zs->dir);
    snprintf(lock, sizeof lock, "%s", strrchr(zs->node, '/') + 1);
    dlock__zk_guid(c, mutex.id, guid);

    snprintf(zs->dir + n, sizeof zs->dir - n, "%s", ZK_SEM_LEASES);
    rc = zk_sem_lease(zs, c, req, deadline, &t);
    /* Got a lease or gave up: either way the mutex goes (or is noted). */
    dlock__zk_withdraw(zs, c, locks, lock, guid);
    if (rc != DLOCK_OK)
        goto out;
    dlock__zk_grant(c, &t, grant);
    return DLOCK_OK;
out:
    dlock__zk_conn_unref(c);
    return rc;
}
