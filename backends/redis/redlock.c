/*
 * redlock.c: mode redlock (redlock://h1,...,hN, or redis://...?redlock=1):
 * setnx's lock (its keys, its release and renew scripts: setnx.c) on N
 * independent masters. Held when a majority said yes within the validity
 * time (lease - elapsed - drift); no fencing tokens, because no single
 * counter can be trusted to grow when the majority that granted the lock
 * changes (docs/backends/redis.md). Waiters poll (no NOTIFY).
 *
 * This file holds what the answers of a round mean: acquire, renew,
 * release, and the mode object. Rounds and node connections are rounds.c's;
 * which nodes count after a restart is restart.c's; inspect is inspect.c's.
 * Divisions: the acquire script; acquire; renew; release; the mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd.h"

/* ---- the acquire script ---------------------------------------------------------- */

/* Per node. KEYS: lock. ARGV: owner, lease ms.
 * -> {1, 0} or {0, pttl}; no fencing counter (see the docs). */
static const struct dlock__rd_script redlock_acquire_lua = {
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "  return {1, 0} "
    "end "
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "
    "  return {1, 0} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}",
    1, 3, {RD_ARG_LOCK, RD_ARG_OWNER, RD_ARG_LEASE}};

/* ---- acquire ----------------------------------------------------------------------- */

static uint64_t round_deadline(const struct dlock__rd_session *rs,
                               uint64_t start_ns)
{
    return start_ns + (uint64_t)rs->cf->node_timeout_ms * 1000000u;
}

/*
 * After a failed acquire, or a renewal that found the lock lost: release
 * on every node that may hold our key,
 * "even the instances it believed it was not able to lock" (the paper):
 * those that said yes, and those that did not answer in time (maybe), whose
 * SET may land after their round gave up on them. A node that was only
 * slow (a loaded machine) is tried again now, once, within node_timeout;
 * what cannot be sent now is owed to the node and goes first in its next
 * round (rounds.c). The release is owner-checked: however late it lands it
 * deletes only our key.
 */
static void redlock_undo(struct dlock__rd_session *rs,
                         const struct dlock__rd_keys *keys,
                         const struct dlock_request *req, uint32_t maybe)
{
    struct dlock__rd_cmd c;

    for (size_t i = 0; i < rs->nnodes; i++)
        if ((maybe >> i) & 1u && rs->nodes[i].rc == NULL) {
            (void)dlock__rd_owe(rs, i, keys, req->owner,
                                req->owner_len); /* no memory: the lease */
            rs->nodes[i].retry_at = 0;
        }
    dlock__rd_reconnect(rs, false);
    dlock__rd_cmd_evalsha(&c, rs->m->script[RD_SC_RELEASE],
                          rs->sha[RD_SC_RELEASE], keys, req->owner,
                          req->owner_len, "");
    dlock__rd_round(rs, &c, 1, round_deadline(rs, dlock_now_ns()));
    for (size_t i = 0; i < rs->nnodes; i++)
        if ((maybe >> i) & 1u &&
            (rs->nodes[i].got != 1 ||
             rs->nodes[i].rep[0]->type != REDIS_REPLY_INTEGER))
            (void)dlock__rd_owe(rs, i, keys, req->owner, req->owner_len);
    dlock__rd_round_free(rs);
}

/* Connect what is down and due, and log a restart seen doing so. */
static void redlock_prepare(struct dlock__rd_session *rs)
{
    dlock__rd_reconnect(rs, false);
    dlock__rd_log_note(rs);
}

static int redlock_acquire(struct dlock_session *s,
                           const struct dlock_request *req,
                           int64_t deadline_ms, struct dlock_grant *grant,
                           uint32_t *retry_ms)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_cmd c;
    struct dlock__rd_tally t = {0, 0, 0, 0};
    char lease[16], late[200], why[360];
    long long min_ttl = -1;
    int64_t start, elapsed, drift, validity, wait_ms;
    uint64_t start_ns;
    uint32_t counted, delay, maybe = 0;

    (void)deadline_ms; /* no native wait: waiters poll */
    dlock__rd_log_note(rs);
    if (rs->m->keys(&rs->keys, rs->cf, req->name, req->name_len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    redlock_prepare(rs);
    /* Before the round: from now on this lease is one the delay covers. */
    dlock__rd_note_lease(rs, req->lease_ms);
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    dlock__rd_cmd_evalsha(&c, rs->m->script[RD_SC_ACQUIRE],
                          rs->sha[RD_SC_ACQUIRE], &rs->keys, req->owner,
                          req->owner_len, lease);
    start_ns = dlock_now_ns();
    start = (int64_t)(start_ns / 1000000u);
    if (dlock__rd_round(rs, &c, 1, round_deadline(rs, start_ns)) < 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    counted = dlock__rd_counting(rs, dlock_now_ms(), &wait_ms, &delay);
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        bool counts = (counted >> i) & 1u;
        long long ok, val;
        if (nd->missed)
            maybe |= 1u << i; /* its SET may land yet */
        if (nd->got != 1)
            continue;
        if (dlock__rd_reply_pair(nd->rep[0], &ok, &val) != 0)
            continue; /* an error reply counts as no answer */
        if (ok == 1) {
            maybe |= 1u << i;
            *(counts ? &t.yes : &t.late_yes) += 1;
        } else {
            *(counts ? &t.no : &t.late_no) += 1;
            if (val > 0 && (min_ttl < 0 || val < min_ttl))
                min_ttl = val;
        }
    }
    dlock__rd_round_free(rs);
    /* The paper's drift: 1% of the lease plus a fixed allowance. */
    elapsed = dlock_now_ms() - start;
    drift = (int64_t)req->lease_ms / 100 + rs->cf->drift_ms;
    validity = (int64_t)req->lease_ms - elapsed - drift;
    if (t.yes >= rs->quorum && validity > 0) {
        int64_t end = start + (int64_t)req->lease_ms - drift;
        if (end < grant->expires_ms)
            grant->expires_ms = end;
        grant->fence = 0; /* no fencing: see the docs */
        return DLOCK_OK;
    }
    /* Not held: take back what we got or may get, so others need not
     * wait a lease. */
    if (maybe != 0)
        redlock_undo(rs, &rs->keys, req, maybe);
    if (t.yes + t.no < rs->quorum)
        return dlock_session_error(
            s, DLOCK_ECONNECT,
            "%zu of %zu nodes answered within %u ms, a majority is "
            "%zu%s%s",
            t.yes + t.no + t.late_yes + t.late_no, rs->nnodes,
            rs->cf->node_timeout_ms, rs->quorum,
            dlock__rd_late_text(late, sizeof late, &t, delay, wait_ms),
            dlock__rd_nodes_why(rs, why, sizeof why));
    if (t.yes >= rs->quorum) /* a majority, but too slow to be valid */
        return DLOCK_EBUSY;
    if (min_ttl > 0)
        *retry_ms = min_ttl > UINT32_MAX ? UINT32_MAX : (uint32_t)min_ttl;
    return DLOCK_EBUSY;
}

/* ---- renew ------------------------------------------------------------------------- */

/* One item's verdict from the nodes that answered the renewal round;
 * *maybe: the nodes that may still hold its key (they said yes, or did
 * not answer). */
static int redlock_renewed(struct dlock__rd_session *rs,
                           struct dlock_renewal *it, size_t i, size_t n,
                           uint32_t counted, int64_t start, uint32_t delay,
                           int64_t wait_ms, uint32_t *maybe)
{
    struct dlock__rd_tally t = {0, 0, 0, 0};
    int64_t drift = (int64_t)it->req->lease_ms / 100 + rs->cf->drift_ms;
    char late[200], why[360];

    for (size_t k = 0; k < rs->nnodes; k++) {
        struct dlock__rd_node *nd = &rs->nodes[k];
        bool counts = (counted >> k) & 1u;
        if (nd->got != n || nd->rep[i]->type != REDIS_REPLY_INTEGER) {
            *maybe |= 1u << k;
            continue;
        }
        if (nd->rep[i]->integer == 1) {
            *maybe |= 1u << k;
            *(counts ? &t.yes : &t.late_yes) += 1;
        } else {
            *(counts ? &t.no : &t.late_no) += 1;
        }
    }
    if (t.yes >= rs->quorum &&
        (int64_t)it->req->lease_ms - (dlock_now_ms() - start) - drift > 0) {
        int64_t end = start + (int64_t)it->req->lease_ms - drift;
        if (end < it->grant->expires_ms)
            it->grant->expires_ms = end;
        return DLOCK_OK;
    }
    if (rs->nnodes - (t.no + t.late_no) < rs->quorum)
        /* A majority says "not yours": it cannot come back (a node in
         * its restart delay that says so has lost the key too). */
        return dlock_session_error(
            &rs->base, DLOCK_ELOST,
            "%zu of %zu nodes say the lock is gone or another owner's%s",
            t.no + t.late_no, rs->nnodes,
            t.late_no > 0 ? " (some of them restarted: without "
                            "persistence a restart forgets the lock)"
                          : "");
    return dlock_session_error(
        &rs->base, DLOCK_ECONNECT,
        "renewed on %zu of %zu nodes, a majority is %zu%s%s",
        t.yes + t.late_yes, rs->nnodes, rs->quorum,
        dlock__rd_late_text(late, sizeof late, &t, delay, wait_ms),
        dlock__rd_nodes_why(rs, why, sizeof why));
}

static void free_items(struct dlock__rd_cmd *cmds,
                       struct dlock__rd_keys *keys, char (*leases)[16],
                       size_t n)
{
    for (size_t k = 0; keys != NULL && k < n; k++)
        dlock__rd_keys_free(&keys[k]);
    free(cmds);
    free(keys);
    free(leases);
}

/* Every item's renewal in one round: all commands pipelined to all nodes. */
static int redlock_renew(struct dlock_session *s, struct dlock_renewal *items,
                         size_t n)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_cmd *cmds;
    struct dlock__rd_keys *keys;
    char (*leases)[16];
    uint64_t start_ns;
    int64_t start, wait_ms;
    uint32_t counted, delay, *maybe;

    dlock__rd_log_note(rs);
    redlock_prepare(rs);
    cmds = calloc(n, sizeof *cmds);
    keys = calloc(n, sizeof *keys);
    leases = calloc(n, sizeof *leases);
    maybe = calloc(n, sizeof *maybe);
    if (cmds == NULL || keys == NULL || leases == NULL || maybe == NULL) {
        free_items(cmds, NULL, leases, n);
        free(keys);
        free(maybe);
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        if (rs->m->keys(&keys[i], rs->cf, req->name, req->name_len) != 0) {
            free_items(cmds, keys, leases, n);
            free(maybe);
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
        }
        dlock__rd_note_lease(rs, req->lease_ms);
        snprintf(leases[i], sizeof leases[i], "%u", req->lease_ms);
        dlock__rd_cmd_evalsha(&cmds[i], rs->m->script[RD_SC_RENEW],
                              rs->sha[RD_SC_RENEW], &keys[i], req->owner,
                              req->owner_len, leases[i]);
    }
    start_ns = dlock_now_ns();
    start = (int64_t)(start_ns / 1000000u);
    dlock__rd_round(rs, cmds, n, round_deadline(rs, start_ns));
    counted = dlock__rd_counting(rs, dlock_now_ms(), &wait_ms, &delay);
    for (size_t i = 0; i < n; i++)
        items[i].result = redlock_renewed(rs, &items[i], i, n, counted,
                                          start, delay, wait_ms, &maybe[i]);
    dlock__rd_round_free(rs);
    /* A lock a majority no longer has is lost for good (core tells the
     * user): its key on the minority would only keep others out until
     * its lease ends, or until a release the user may never send. */
    for (size_t i = 0; i < n; i++)
        if (items[i].result == DLOCK_ELOST && maybe[i] != 0)
            redlock_undo(rs, &keys[i], items[i].req, maybe[i]);
    free_items(cmds, keys, leases, n);
    free(maybe);
    return DLOCK_OK;
}

/* ---- release ----------------------------------------------------------------------- */

static int redlock_release(struct dlock_session *s,
                           const struct dlock_request *req,
                           struct dlock_grant *grant)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_cmd c;
    size_t deleted = 0, answered = 0;
    char why[360];

    (void)grant;
    dlock__rd_log_note(rs);
    if (rs->m->keys(&rs->keys, rs->cf, req->name, req->name_len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    redlock_prepare(rs);
    dlock__rd_cmd_evalsha(&c, rs->m->script[RD_SC_RELEASE],
                          rs->sha[RD_SC_RELEASE], &rs->keys, req->owner,
                          req->owner_len, "");
    /* No validity to protect here, unlike acquire: wait for the nodes up
     * to timeout=, not node_timeout=, so that a loaded machine does not
     * turn a release into "no answer" (a node found down was skipped by
     * the acquire's round already, and costs no wait). */
    dlock__rd_round(rs, &c, 1,
                    dlock_now_ns() + (uint64_t)rs->cf->timeout_ms * 1000000u);
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        if (nd->got != 1 || nd->rep[0]->type != REDIS_REPLY_INTEGER) {
            /* Down, or no answer: it may have our key (or get it from a
             * SET that lands late). Owed: sent when it is back. */
            (void)dlock__rd_owe(rs, i, &rs->keys, req->owner,
                                req->owner_len); /* no memory: the lease */
            continue;
        }
        answered++;
        deleted += nd->rep[0]->integer == 1;
    }
    dlock__rd_round_free(rs);
    if (deleted > 0)
        return DLOCK_OK;
    /* Only the nodes that did not answer may have had our key: not
     * "another owner's" unless every node said so. */
    if (answered < rs->nnodes)
        return dlock_session_error(s, DLOCK_ECONNECT,
                                   "%zu of %zu nodes answered, none had our "
                                   "key%s; the lock ends with its lease on "
                                   "the others",
                                   answered, rs->nnodes,
                                   dlock__rd_nodes_why(rs, why, sizeof why));
    return dlock_session_error(s, DLOCK_ENOTOWNER,
                               "on no node: the lock is free or "
                               "another owner's (our lease ran out)");
}

/* ---- the mode ------------------------------------------------------------------------ */

static int redlock_floor(const struct dlock_uri *uri, const char *name,
                         uint32_t n, uint64_t *ns_out, char *err,
                         size_t errlen)
{
    return dlock__rd_floor_nodes(&dlock__rd_mode_redlock, uri, name, n,
                                 ns_out, err, errlen);
}


const struct dlock__rd_mode dlock__rd_mode_redlock = {
    .base = {
        .name = "redlock",
        .summary = "Redlock: setnx's lock on N independent masters, held "
                   "by a majority; no fencing; restarted nodes sit out "
                   "restart_delay",
        .caps = DLOCK_CAP_LEASE | DLOCK_CAP_SURVIVES_RECONNECT |
                DLOCK_CAP_BATCH_RENEW,
        .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
        /* Waiters poll the majority; the hint is the smallest TTL seen. */
        .retry_min_ms = 5,
        .retry_max_ms = 200,
        .acquire = redlock_acquire,
        .renew = redlock_renew,
        .release = redlock_release,
        .inspect = dlock__rd_inspect_nodes,
        .floor = redlock_floor, .forget = dlock__rd_forget,
    },
    .nodes = true,
    .script = {&redlock_acquire_lua, &dlock__rd_setnx_release,
               &dlock__rd_setnx_renew},
    .keys = dlock__rd_setnx_keys,
    .open = dlock__rd_nodes_open,
    .close = dlock__rd_nodes_close,
};
