/*
 * single.c: what setnx, hash and rwlock share (fair and queue too, but for
 * acquire, which waits in their queue: fair.c, queue.c), a session on one
 * server: its one connection, acquire, renew (every item pipelined in one
 * round trip) and release. The mode gives the keys, the scripts and their signatures
 * (setnx.c, hash.c, rwlock.c); this file sends them and reads what they
 * answer.
 *
 * Restarts: each connection reads the server's run_id (conn.c), and each
 * grant records in grant->word[0] the server's life (generation) it was
 * granted in. Renew and release decide by whether the key survived, never
 * by the run_id alone (only the holder's own handle ever writes its owner
 * id); the generation only says what a loss was. The connection is
 * watched by core [B-WATCH-1], so a restart puts the client's locks in
 * doubt at once. Waiting (pubsub.c) and inspect (inspect.c) are elsewhere.
 *
 * Divisions: the connection; acquire; renew; downgrade; release.
 */
#include <stdio.h>
#include <string.h>

#include "rd.h"

/* A script on the session's server (with sync_replicas=, WAIT after it:
 * replicas.c), or on its key's master (cluster=1, never with
 * sync_replicas=: conf.c). */
static redisReply *run(struct dlock__rd_session *rs, int which,
                       const char *owner, size_t owner_len,
                       const char *lease, long long *acks, int *code)
{
    if (rs->cl == NULL)
        return dlock__rd_run_sync(rs, which, owner, owner_len, lease, acks,
                                  code);
    *acks = -1;
    *code = DLOCK_OK;
    return dlock__rd_cluster_run(rs, which, owner, owner_len, lease);
}

/* run() for req, a missing reply turned into its error: NULL then, and
 * *code says why. */
static redisReply *run_req(struct dlock__rd_session *rs, int which,
                           const struct dlock_request *req,
                           const char *lease, long long *acks, int *code,
                           const char *op)
{
    redisReply *r =
        run(rs, which, req->owner, req->owner_len, lease, acks, code);

    if (r == NULL && *code == DLOCK_OK)
        *code = dlock__rd_io_error(rs, DLOCK_ECONNECT, op);
    return r;
}

/* The mode's acquire script for req: DLOCK_OK with its answer in *ok and
 * *val, or an error. */
static int run_acquire(struct dlock__rd_session *rs,
                       const struct dlock_request *req, const char *lease,
                       const char *op, long long *ok, long long *val,
                       long long *acks)
{
    int code;
    redisReply *r = run_req(rs, RD_SC_ACQUIRE, req, lease, acks, &code, op);

    if (r == NULL)
        return code;
    if (r->type == REDIS_REPLY_ERROR && req->kind != DLOCK_KIND_PERMIT &&
        rs->m->script[RD_SC_P_ACQUIRE] != NULL &&
        strncmp(r->str, "WRONGTYPE", 9) == 0)
        code = dlock_session_error(
            &rs->base, DLOCK_EINVAL,
            "the name holds another kind of data at the server (a "
            "semaphore's count? a name is a lock or a semaphore, never "
            "both): %s",
            r->str);
    else
        code = dlock__rd_reply_pair(r, ok, val) != 0
                   ? dlock__rd_reply_error(rs, r)
                   : DLOCK_OK;
    freeReplyObject(r);
    return code;
}

/* Lay out rs->keys for req, and what it asks (rwlock reads keys.kind,
 * hash lays out a semaphore's keys for a permit). */
static int req_keys(struct dlock__rd_session *rs,
                    const struct dlock_request *req)
{
    return dlock__rd_req_keys(rs, req);
}

/* ---- the connection --------------------------------------------------------------- */

int dlock__rd_single_open(struct dlock__rd_session *rs, char *err,
                          size_t errlen)
{
    struct dlock__rd_info info;
    struct dlock__rd_addr at;
    int code;

    /* hosts[0], or the master the sentinels name (sentinel.c). */
    rs->rc = dlock__rd_connect_master(rs->cf, rs->m, rs->sha, &info, &at,
                                      &rs->nreplicas, err, errlen, &code);
    if (rs->rc == NULL)
        return code;
    rs->gen = dlock__rd_ident_seen(rs->x, 0, &info, rs->note,
                                   sizeof rs->note);
    /* Behind sentinels a new run_id is a failover (or the master's
     * restart): name the master, not the first sentinel. */
    if (rs->cf->sentinel[0] != '\0' && rs->note[0] != '\0')
        snprintf(rs->note, sizeof rs->note,
                 "redis: the master of '%s' is now %s:%d (run_id %.8s...): "
                 "a failover or restart; locks that had not reached it are "
                 "lost",
                 rs->cf->sentinel, at.host, at.port, info.run_id);
    /* [B-WATCH-1]: the moment this connection ends (a restart closes it),
     * core puts the client's locks in doubt and renews them at once; the
     * renewal, on a new connection, finds whether the server still has
     * them. */
    dlock_session_watch(&rs->base, rs->rc->fd);
    /* sentinel=: shut down when the sentinels switch masters. */
    dlock__rd_switch_add(rs, rs->rc->fd);
    return DLOCK_OK;
}

void dlock__rd_single_close(struct dlock__rd_session *rs)
{
    if (rs->rc != NULL) {
        dlock_session_watch(&rs->base, -1);
        dlock__rd_switch_remove(rs, rs->rc->fd);
        redisFree(rs->rc);
        rs->rc = NULL;
    }
}

/* ---- acquire ------------------------------------------------------------------------ */

/* Granted on the master, but fewer replicas than sync_replicas= confirmed
 * it within sync_timeout: take it back (owner-checked) and say so. A
 * release that fails leaves the key to its lease; the message says which. */
static int sync_refused(struct dlock__rd_session *rs,
                        const struct dlock_request *req, const char *lease,
                        long long acks)
{
    uint64_t took = dlock_now_ns() - rs->attempt_ns;
    redisReply *r =
        dlock__rd_run(rs, RD_SC_RELEASE, req->owner, req->owner_len, lease);
    bool gone = r != NULL && r->type == REDIS_REPLY_INTEGER &&
                r->integer > rs->m->release_refused;

    if (r != NULL)
        freeReplyObject(r);
    return dlock__rd_sync_short(rs, acks, took,
                                gone ? "acquire refused and released"
                                     : "acquire refused (the release failed: "
                                       "the key stays until its lease ends)");
}

int dlock__rd_single_acquire(struct dlock_session *s,
                             const struct dlock_request *req,
                             int64_t deadline_ms, struct dlock_grant *grant,
                             uint32_t *retry_ms)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    char lease[16];
    long long ok, val, acks;
    int code;

    (void)deadline_ms; /* no native wait: core waits through wait() */
    dlock__rd_log_note(rs);
    if (req_keys(rs, req) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    /* [B-WAIT-1]: wait() compares release times with this. */
    rs->attempt_ns = dlock_now_ns();
    code = run_acquire(rs, req, lease, "acquire", &ok, &val, &acks);
    if (code != DLOCK_OK)
        return code;
    if (ok == 1 && acks >= 0 && acks < dlock__rd_sync_want(rs))
        return sync_refused(rs, req, lease, acks);
    if (ok == 1) {
        grant->fence = (uint64_t)val;
        grant->word[0] = rs->gen; /* the server's life it was granted in */
        return DLOCK_OK;
    }
    if (ok == -1) /* a permit: the semaphore has another count */
        return dlock_session_error(
            s, DLOCK_EINVAL,
            "permits: the semaphore has %lld permits at the server, this "
            "handle asks for %u (a name keeps the count it was made with; "
            "Redisson's setPermits/addPermits change it)",
            val, req->permits);
    if (ok == -2)
        return dlock_session_error(
            s, DLOCK_EINVAL,
            "permits: the name holds something other than a semaphore's "
            "count at the server (a lock of this name?): a name is a lock "
            "or a semaphore, never both");
    /* PTTL 0 or -2: the key expires (or expired) right now, and an expiry
     * publishes nothing, so retry at once rather than wait for a release
     * message. -1 (a key without TTL, not ours): no hint, wait for one. */
    if (val > 0)
        *retry_ms = val > UINT32_MAX ? UINT32_MAX : (uint32_t)val;
    else if (val == 0 || val == -2)
        *retry_ms = 1;
    /* rwlock, prefer=writer: the refused writer's marker keeps new readers
     * out for RD_WRITER_MARK_MS; come back before it lapses. */
    if (rs->keys.kind[0] == 'W' &&
        (*retry_ms == 0 || *retry_ms > RD_WRITER_RETRY_MS))
        *retry_ms = RD_WRITER_RETRY_MS;
    return DLOCK_EBUSY;
}

/* ---- renew -------------------------------------------------------------------------- */

/* A renewal's verdict on one item from the script's answer (1: extended).
 * A lock granted in an earlier life of the server (it restarted since:
 * its run_id changed) was kept only if the server persisted it; then it
 * carries on in this life. */
static int renew_verdict(struct dlock__rd_session *rs, struct dlock_grant *g,
                         bool extended)
{
    if (extended) {
        g->word[0] = rs->gen;
        return DLOCK_OK;
    }
    if (g->word[0] != rs->gen)
        return dlock_session_error(
            &rs->base, DLOCK_ELOST,
            "the server restarted or failed over since the lock was taken "
            "(its run_id changed) and has forgotten it (no persistence, "
            "or the write had not reached the new master)");
    return dlock_session_error(&rs->base, DLOCK_ELOST,
                               "the lock is gone or held by another owner "
                               "(its lease ran out, or the server lost it)");
}

/* Renewed on the master, but fewer replicas than asked confirmed it: each
 * lock renewed is released (owner-checked) and reported lost with
 * DLOCK_EREPLICAS, as an acquire would have been refused. */
static void renew_sync_refused(struct dlock__rd_session *rs,
                               struct dlock_renewal *items, size_t n,
                               long long acks, uint64_t took)
{
    char lease[16];

    for (size_t i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        redisReply *r;
        if (items[i].result != DLOCK_OK)
            continue;
        items[i].result = dlock__rd_sync_short(
            rs, acks, took, "renewal refused, lock released");
        if (req_keys(rs, req) != 0)
            continue;
        snprintf(lease, sizeof lease, "%u", req->lease_ms);
        r = dlock__rd_run(rs, RD_SC_RELEASE, req->owner, req->owner_len,
                          lease);
        if (r != NULL)
            freeReplyObject(r);
    }
}

/* Renew n leases in one round trip: every script appended, then n replies
 * read [5: watchdog batching]. */
int dlock__rd_single_renew(struct dlock_session *s,
                           struct dlock_renewal *items, size_t n)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    char lease[16];
    int redo = 0, code;
    bool readonly = false;
    long long acks = -1;
    uint64_t t0 = dlock_now_ns();

    dlock__rd_log_note(rs);
    if (rs->cl != NULL) { /* one pipeline per master (cluster.c) */
        int code = dlock__rd_cluster_renew(rs, items, n);
        for (size_t i = 0; code == DLOCK_OK && i < n; i++)
            if (items[i].result == DLOCK_OK ||
                items[i].result == RD_RENEW_NO)
                items[i].result = renew_verdict(
                    rs, items[i].grant, items[i].result == DLOCK_OK);
        return code;
    }
    for (size_t i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        struct dlock__rd_cmd c;
        int w; /* the lock's renewal, or a permit's */
        if (req_keys(rs, req) != 0)
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
        w = dlock__rd_script_of(&rs->keys, RD_SC_RENEW);
        snprintf(lease, sizeof lease, "%u", req->lease_ms);
        dlock__rd_cmd_evalsha(&c, rs->m->script[w], rs->sha[w], &rs->keys,
                              req->owner, req->owner_len, lease);
        /* hiredis copies the command out: keys and lease may change. */
        if (redisAppendCommandArgv(rs->rc, c.argc, c.argv, c.lens) !=
            REDIS_OK)
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    }
    if (rs->cf->sync_replicas != 0 &&
        (code = dlock__rd_wait_append(rs)) != DLOCK_OK)
        return code;
    for (size_t i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (dlock__rd_get_reply(rs->rc, &r) != REDIS_OK || r == NULL)
            return dlock__rd_io_error(rs, DLOCK_ECONNECT, "renew");
        if (dlock__rd_noscript(r)) {
            items[i].result = DLOCK_EBUSY; /* marker: run again below */
            redo = 1;
        } else if (r->type == REDIS_REPLY_INTEGER) {
            items[i].result =
                renew_verdict(rs, items[i].grant, r->integer == 1);
        } else {
            items[i].result = dlock__rd_reply_error(rs, r);
            readonly = readonly || items[i].result == DLOCK_ECONNECT;
        }
        freeReplyObject(r);
    }
    if (rs->cf->sync_replicas != 0 &&
        (code = dlock__rd_wait_read(rs, &acks, "renew")) != DLOCK_OK)
        return code;
    /* A master demoted behind this connection: a new one finds the new
     * master (sentinel.c); the locks stay in doubt until then. */
    if (readonly)
        return DLOCK_ECONNECT;
    /* The server lost its script cache (SCRIPT FLUSH): one by one by EVAL. */
    for (size_t i = 0; redo && i < n; i++) {
        const struct dlock_request *req = items[i].req;
        redisReply *r;
        if (items[i].result != DLOCK_EBUSY)
            continue;
        if (req_keys(rs, req) != 0)
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
        snprintf(lease, sizeof lease, "%u", req->lease_ms);
        r = dlock__rd_run(rs, RD_SC_RENEW, req->owner, req->owner_len, lease);
        if (r == NULL)
            return dlock__rd_io_error(rs, DLOCK_ECONNECT, "renew");
        items[i].result = renew_verdict(
            rs, items[i].grant,
            r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        freeReplyObject(r);
    }
    if (redo && rs->cf->sync_replicas != 0 &&
        ((code = dlock__rd_wait_append(rs)) != DLOCK_OK ||
         (code = dlock__rd_wait_read(rs, &acks, "renew")) != DLOCK_OK))
        return code;
    if (acks >= 0 && acks < dlock__rd_sync_want(rs))
        renew_sync_refused(rs, items, n, acks, dlock_now_ns() - t0);
    return DLOCK_OK;
}

/* ---- downgrade ---------------------------------------------------------------------- */

/* A writer becomes a reader (rwlock): the read lock is taken with the
 * writer's own owner id, which the acquire script lets in beside its own
 * write field, then the write field goes; between the two the lock has
 * both, so no writer comes in. If the second step fails the handle is
 * still a writer to core, and a read field of its owner stays until its
 * lease runs out. */
int dlock__rd_single_downgrade(struct dlock_session *s,
                               const struct dlock_request *req,
                               struct dlock_grant *grant)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    char lease[16];
    long long ok, val, acks;
    redisReply *r;
    int code;

    (void)grant;
    dlock__rd_log_note(rs);
    if (req_keys(rs, req) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    code = run_acquire(rs, req, lease, "downgrade", &ok, &val, &acks);
    if (code != DLOCK_OK)
        return code;
    if (ok != 1)
        return dlock_session_error(s, DLOCK_ELOST,
                                   "the write lock is no longer ours (its "
                                   "lease ran out, or the server lost it)");
    rs->keys.kind = "w";
    r = run_req(rs, RD_SC_RELEASE, req, lease, &acks, &code, "downgrade");
    if (r == NULL)
        return code;
    code = r->type != REDIS_REPLY_INTEGER ? dlock__rd_reply_error(rs, r)
           : r->integer > rs->m->release_refused
               ? DLOCK_OK
               : dlock_session_error(s, DLOCK_ELOST,
                                     "the write lock was gone when its "
                                     "reader was taken");
    freeReplyObject(r);
    return code;
}

/* ---- release ------------------------------------------------------------------------ */

int dlock__rd_single_release(struct dlock_session *s,
                             const struct dlock_request *req,
                             struct dlock_grant *grant)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    char lease[16];
    redisReply *r;
    long long acks;
    uint64_t t0 = dlock_now_ns();
    int code;

    dlock__rd_log_note(rs);
    if (req_keys(rs, req) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    r = run_req(rs, RD_SC_RELEASE, req, lease, &acks, &code, "release");
    if (r == NULL)
        return code;
    if (r->type != REDIS_REPLY_INTEGER)
        code = dlock__rd_reply_error(rs, r);
    else if (r->integer > rs->m->release_refused && acks >= 0 &&
             acks < dlock__rd_sync_want(rs))
        code = dlock__rd_sync_short(rs, acks, dlock_now_ns() - t0,
                                    "released on the master, but a "
                                    "failover within the lease may bring "
                                    "the lock back");
    else if (r->integer > rs->m->release_refused)
        code = DLOCK_OK; /* released, or (hash) counted down */
    else if (grant->word[0] != rs->gen)
        code = dlock_session_error(s, DLOCK_ELOST,
                                   "not released: the server restarted "
                                   "since the lock was taken (its run_id "
                                   "changed) and had forgotten it");
    else
        code = dlock_session_error(s, DLOCK_ENOTOWNER,
                                   "not released: the lock is free or "
                                   "another owner's (our lease ran out)");
    freeReplyObject(r);
    return code;
}
