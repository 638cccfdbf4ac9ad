/*
 * queue.c: mode queue, dlock's own FIFO lock with a server-side hand-off.
 * The release script does not free the lock for the waiters to race for:
 * it passes it to the first live waiter in line (sets the lock to that
 * waiter's owner id with that waiter's lease, draws its fence) and
 * publishes the grant on that waiter's own channel only. The woken waiter
 * holds the lock when the message arrives: no herd, no acquire round trip
 * after the wake, and waiters sleep on pub/sub (no polling, no spinning).
 *
 * Keys, all under setnx's hash tag "dlock:{<ns>:<name>}" (T):
 *   T:q        the lock: the holder's owner id, PX its lease
 *   T:q:fence  the fencing counter (RD_LUA_FENCE_NEXT: counter and clock)
 *   T:q:line   the wait queue, a list of "<nonce>:<lease ms>:<owner id>"
 *   T:q:grant:<owner id>   each waiter's channel (not a key); a grant's
 *              message is "<nonce>:<fence>:<server time in µs>".
 *
 * The scripts (one call each, atomic at the server):
 *   try     the lock is ours already (a lost reply: taken again with a new
 *           fence), or free with no live waiter ahead: take it; else busy.
 *   queue   as try, but a refused caller puts its entry at the back (or
 *           finds it there: a refresh) and gets the lock's PTTL and the
 *           server's time.
 *   release owner-checked: delete, then pass the lock on (below).
 *   give-up remove my entry; if the lock is mine (a grant raced the give-
 *           up) say so with a fence; a free lock is passed on.
 * "Pass on" pops entries from the head until one is live (PUBSUB NUMSUB
 * of its channel > 0: its process is alive and still waiting), sets the
 * lock to it and publishes the grant there. An entry of the caller's own
 * owner id is no waiter (a leftover of an earlier attempt of the same
 * handle) and is dropped.
 *
 * Why it is safe (never two holders): every change of the lock's value
 * happens inside a script, and each script sets it only when it is free
 * (absent: released, or its PX ran out) or already the caller's; a grant
 * by hand-off sets it to the waiter while it is free (the release just
 * deleted it), so at any moment the key names at most one owner, as
 * setnx's does. A holder believes it only as long as its own measure of
 * the lease says (core's expires_ms), which must never end after the
 * server's PX:
 *   - granted by its own try/queue script: counted from when that script
 *     was sent (the server starts PX later);
 *   - granted by hand-off: the grant ran at some server moment after the
 *     waiter's last queue script, whose send time t0 (ours) and server
 *     time s0 we keep; the message carries the grant's server time s1. The
 *     lease is counted from t0 + (s1 - s0), less 0.1 % of (s1 - s0) for
 *     the clocks' rates and never later than the message's arrival: that
 *     is no later than the grant in our clock as long as the two clocks
 *     run at the same rate within 0.1 % (the assumption every lease
 *     makes, here over the wait as well) and the server's clock does not
 *     step forward (which would expire every Redis lease early anyway). A
 *     step back only makes it more conservative. If less than half the
 *     lease is left, the waiter renews (owner-checked) before it returns.
 * A stale message (an earlier attempt's grant, delivered late) carries
 * another nonce and is ignored; any wake that is not this attempt's grant
 * runs the queue script again, which finds the lock ours if a grant's
 * message was lost with the pub/sub connection.
 *
 * Liveness: a waiter subscribes to its channel before it queues and stays
 * subscribed while it waits, on the client's pub/sub connection
 * (pubsub.c's sub_* functions, as fair.c's waiters do), so a killed
 * process's entries are skipped at once (the kernel closes its socket,
 * Redis drops the subscription). A deadline, a cancel or an error runs
 * give-up: if the lock was handed to us meanwhile, a deadline returns it
 * as granted, a cancel releases it (which passes it on); a give-up that
 * cannot reach the server leaves the entry, and the waiter's channel is
 * then unsubscribed at once (not after pubsub.c's linger), so that
 * releases skip the entry. An expired lock
 * (its holder died) is announced by nobody: each waiter sleeps at most
 * the lock's PTTL, then runs the queue script, which passes a free lock
 * to the head (it may be another waiter: woken by its message). Limits:
 * a hand-off to a waiter whose connection broke, in the moment before its
 * process unsubscribes, is lost for a lease (or until the same handle
 * asks again: the lock is then found ours). A SIGSTOPped waiter keeps its subscription and so its
 * place, and a lock handed to it waits for it for a lease. A waiter whose
 * pub/sub connection drops is skipped while it is down and re-queued at
 * the back when it wakes.
 *
 * Not with cluster=1 or sync_replicas= (conf.c): NUMSUB counts one node's
 * subscribers, and no WAIT can come between a grant and its message.
 * Renew is setnx's compare-and-PEXPIRE, release this file's script, both
 * through single.c. Divisions: keys; scripts; acquire; the mode.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd.h"

/* ---- keys ------------------------------------------------------------------------- */

static int queue_keys(struct dlock__rd_keys *k, const struct dlock__rd_conf *cf,
                      const char *name, size_t len)
{
    size_t t;

    /* setnx's tag into lock, then ours beside it (queue first: lock is
     * rewritten from it). */
    if (dlock__rd_setnx_keys(k, cf, name, len) != 0 ||
        dlock__rd_buf_set(&k->queue, k->lock.p, k->lock.len, ":q:line", 7,
                          "", 0) != 0)
        return -1;
    t = k->lock.len;
    if (dlock__rd_buf_set(&k->lock, k->queue.p, t, ":q", 2, "", 0) != 0 ||
        dlock__rd_buf_set(&k->fence, k->queue.p, t, ":q:fence", 8, "", 0) !=
            0 ||
        dlock__rd_buf_set(&k->channel, k->queue.p, t, ":q:grant", 8, "",
                          0) != 0)
        return -1;
    if (k->nonce[0] == '\0')
        snprintf(k->nonce, sizeof k->nonce, "0");
    return 0;
}

/* ---- scripts ----------------------------------------------------------------------- */

/*
 * Every script has KEYS lock, fence, queue and ARGV owner, lease, nonce,
 * channel prefix. pass(me) pops the queue's head until it grants the lock
 * to a live waiter (true), meets an entry of me ('me') or empties it
 * (false). The fence and the message's time come from
 * RD_LUA_FENCE_NEXT_AT (its us: the server's TIME in µs).
 */
#define Q_LUA_PASS                                                          \
    "local function pass(me) "                                             \
    "  while true do "                                                     \
    "    local e = redis.call('lpop', KEYS[3]) "                           \
    "    if not e then return false end "                                  \
    "    local a = string.find(e, ':', 1, true) "                          \
    "    local b = a and string.find(e, ':', a + 1, true) "                \
    "    if b then "                                                       \
    "      local who = string.sub(e, b + 1) "                              \
    "      if who == me then return 'me' end "                             \
    "      local ch = ARGV[4] .. ':' .. who "                              \
    "      if redis.call('pubsub', 'numsub', ch)[2] > 0 then "             \
    "        redis.call('set', KEYS[1], who, 'PX', "                       \
    "                   string.sub(e, a + 1, b - 1)) "                     \
    RD_LUA_FENCE_NEXT_AT("2")                                              \
    "        redis.call('publish', ch, string.sub(e, 1, a - 1) .. ':' .. " \
    "                   string.format('%.0f', fence) .. ':' .. us) "       \
    "        return true "                                                 \
    "      end "                                                           \
    "    end "                                                             \
    "  end "                                                               \
    "end "                                                                 \
    "local function pass_other(me) "                                       \
    "  local p = pass(me) "                                                \
    "  while p == 'me' do p = pass(me) end "                               \
    "  return p "                                                          \
    "end "

/* Ours already: a new fence, the lease again. */
#define Q_LUA_OURS                                                          \
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "                           \
    RD_LUA_FENCE_NEXT_AT("2")                                              \
    "  return {1, fence} "

/* Free and nobody live ahead: take it. */
#define Q_LUA_TAKE                                                          \
    "  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) "                \
    RD_LUA_FENCE_NEXT_AT("2")                                              \
    "  return {1, fence} "

#define Q_ARGS                                                              \
    3, 7,                                                                  \
    {RD_ARG_LOCK, RD_ARG_FENCE, RD_ARG_QUEUE, RD_ARG_OWNER, RD_ARG_LEASE,  \
     RD_ARG_NONCE, RD_ARG_CHANNEL}

/* One attempt that queues nothing. -> {1, fence} or {0, pttl}. */
static const struct dlock__rd_script queue_try = {
    Q_LUA_PASS
    "local cur = redis.call('get', KEYS[1]) "
    "if cur == ARGV[1] then " Q_LUA_OURS "end "
    "if cur == false and pass_other(ARGV[1]) == false then " Q_LUA_TAKE
    "end "
    "return {0, redis.call('pttl', KEYS[1])}",
    Q_ARGS};

/* An attempt that queues (or finds its entry queued: then it keeps its
 * place). -> {1, fence}, or {0, the lock's pttl, the server's time µs}. */
static const struct dlock__rd_script queue_queue = {
    Q_LUA_PASS
    "local mine = ARGV[3] .. ':' .. ARGV[2] .. ':' .. ARGV[1] "
    "local cur = redis.call('get', KEYS[1]) "
    "if cur == ARGV[1] then "
    "  redis.call('lrem', KEYS[3], 0, mine) " Q_LUA_OURS
    "end "
    "if cur == false and pass(ARGV[1]) ~= true then "
    "  redis.call('lrem', KEYS[3], 0, mine) " Q_LUA_TAKE
    "end "
    "if redis.call('lpos', KEYS[3], mine) == false then "
    "  redis.call('rpush', KEYS[3], mine) "
    "end "
    "local t = redis.call('time') "
    "return {0, redis.call('pttl', KEYS[1]), "
    "        tonumber(t[1]) * 1000000 + tonumber(t[2])}",
    Q_ARGS};

/* Owner-checked release that hands the lock to the first live waiter.
 * -> 1 released (and passed on), 0 not ours. */
static const struct dlock__rd_script queue_release = {
    Q_LUA_PASS
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end "
    "redis.call('del', KEYS[1]) "
    "pass_other(ARGV[1]) "
    "return 1",
    Q_ARGS};

/* Leave the line. -> {1, fence}: the lock was handed to us before we
 * left (it stays ours, with a new fence and the lease again); {0, 0}. */
static const struct dlock__rd_script queue_giveup = {
    Q_LUA_PASS
    "redis.call('lrem', KEYS[3], 0, "
    "           ARGV[3] .. ':' .. ARGV[2] .. ':' .. ARGV[1]) "
    "local cur = redis.call('get', KEYS[1]) "
    "if cur == ARGV[1] then " Q_LUA_OURS "end "
    "if cur == false then pass_other(ARGV[1]) end "
    "return {0, 0}",
    Q_ARGS};

/* ---- acquire ------------------------------------------------------------------------ */

/* One script's answer: {1, fence}, {0, pttl} or {0, pttl, server µs}. */
struct q_answer {
    long long ok, val, us;
};

static int q_run(struct dlock__rd_session *rs, const struct dlock_request *req,
                 int which, struct q_answer *a)
{
    char lease[16];
    redisReply *r;
    int code = DLOCK_OK;

    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    r = dlock__rd_run(rs, which, req->owner, req->owner_len, lease);
    if (r == NULL)
        return dlock__rd_io_error(rs, DLOCK_ECONNECT, "acquire");
    a->us = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->elements > 3)
        code = dlock__rd_reply_error(rs, r);
    for (size_t i = 0; code == DLOCK_OK && i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            code = dlock__rd_reply_error(rs, r);
    if (code == DLOCK_OK) {
        a->ok = r->element[0]->integer;
        a->val = r->element[1]->integer;
        if (r->elements == 3)
            a->us = r->element[2]->integer;
    }
    freeReplyObject(r);
    return code;
}

static void q_granted(struct dlock__rd_session *rs, struct dlock_grant *g,
                      long long fence, int64_t sent_ms, uint32_t lease_ms)
{
    g->fence = (uint64_t)fence;
    g->word[0] = rs->gen; /* the server's life (single.c) */
    g->expires_ms = sent_ms + (int64_t)lease_ms;
}

/* This attempt's grant in msg ("<nonce>:<fence>:<µs>")? 1 and its fence
 * and server time, else 0. */
static int q_parse_grant(const char *msg, const char *nonce,
                         long long *fence, long long *us)
{
    size_t n = strlen(nonce);
    char *end;

    if (strncmp(msg, nonce, n) != 0 || msg[n] != ':')
        return 0;
    *fence = strtoll(msg + n + 1, &end, 10);
    if (*end != ':' || *fence <= 0)
        return 0;
    *us = strtoll(end + 1, &end, 10);
    return *end == '\0' ? 1 : 0;
}

/* Handed over at server time s1 (µs); the waiter's last queue script was
 * sent at t0 (ms, ours) and ran at s0 (µs, the server's). See the top. */
static int q_handed(struct dlock__rd_session *rs,
                    const struct dlock_request *req, struct dlock_grant *g,
                    long long fence, int64_t t0, long long s0, long long s1)
{
    /* No server time from the queue script (s0 0): count from t0. */
    int64_t now = dlock_now_ms(),
            gap = s0 > 0 && s1 > s0 ? (s1 - s0) / 1000 : 0;
    int64_t at = t0 + gap - gap / 1000;
    char lease[16];
    redisReply *r;
    bool ours;

    if (at > now)
        at = now;
    q_granted(rs, g, fence, at, req->lease_ms);
    if (g->expires_ms - now >= (int64_t)req->lease_ms / 2)
        return DLOCK_OK;
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    r = dlock__rd_run(rs, RD_SC_RENEW, req->owner, req->owner_len, lease);
    if (r == NULL)
        return dlock__rd_io_error(rs, DLOCK_ECONNECT, "acquire: renew");
    ours = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (!ours)
        return DLOCK_EBUSY; /* lost already: queue again */
    g->expires_ms = now + (int64_t)req->lease_ms;
    return DLOCK_OK;
}

/* Leave the line after code (a deadline, a cancel, an error). A lock
 * handed to us meanwhile is granted at a deadline, and released (passed
 * on) otherwise. A broken connection leaves the entry (see the top). */
static int give_up(struct dlock__rd_session *rs,
                   const struct dlock_request *req, struct dlock_grant *g,
                   int code)
{
    struct q_answer a;
    int64_t sent = dlock_now_ms();
    int rc;

    if (code == DLOCK_ECONNECT || code == DLOCK_ENOMEM)
        return code;
    if ((rc = q_run(rs, req, RD_SC_GIVEUP, &a)) != DLOCK_OK) {
        dlock_session_log(&rs->base, DLOCK_LOG_WARN,
                          "redis: could not leave the wait queue of '%.*s' "
                          "(a lock handed to it waits out its lease)",
                          (int)req->name_len, req->name);
        return rc == DLOCK_ECONNECT ? rc : code;
    }
    if (a.ok != 1)
        return code;
    q_granted(rs, g, a.val, sent, req->lease_ms);
    if (code == DLOCK_ETIMEDOUT)
        return DLOCK_OK; /* handed over before the deadline */
    rc = dlock__rd_single_release(&rs->base, req, g);
    return rc == DLOCK_ECONNECT ? rc : code;
}

/* Unique per acquire within the process; the owner id makes it unique. */
static atomic_uint_fast64_t q_nonces;

/*
 * A try is one attempt that queues nothing. A wait subscribes to the
 * handle's own channel, then: the queue script (granted, or queued), then
 * sleep until a message on the channel, the lock's PTTL (an expiry is
 * announced by nobody) or the deadline; this attempt's grant ends it,
 * anything else runs the queue script again.
 */
static int queue_acquire(struct dlock_session *s,
                         const struct dlock_request *req, int64_t deadline_ms,
                         struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_buf mine = {NULL, 0, 0};
    struct dlock__rd_chan *c;
    struct q_answer a;
    char msg[64];
    uint64_t gen = 0;
    int64_t now, wake, t0;
    long long fence, s1;
    bool told = false;
    int rc, woke;

    dlock__rd_log_note(rs);
    rs->keys.nonce[0] = '\0';
    if (rs->m->keys(&rs->keys, rs->cf, req->name, req->name_len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    snprintf(rs->keys.nonce, sizeof rs->keys.nonce, "%" PRIu64,
             (uint64_t)atomic_fetch_add(&q_nonces, 1) + 1);
    if (deadline_ms == 0) {
        t0 = dlock_now_ms();
        if ((rc = q_run(rs, req, RD_SC_ACQUIRE, &a)) != DLOCK_OK)
            return rc;
        if (a.ok == 1) {
            q_granted(rs, grant, a.val, t0, req->lease_ms);
            return DLOCK_OK;
        }
        if (a.val > 0)
            *retry_ms = a.val > UINT32_MAX ? UINT32_MAX : (uint32_t)a.val;
        else if (a.val == 0 || a.val == -2)
            *retry_ms = 1;
        return DLOCK_EBUSY;
    }
    if (dlock__rd_buf_set(&mine, rs->keys.channel.p, rs->keys.channel.len,
                          ":", 1, req->owner, req->owner_len) != 0) {
        free(mine.p);
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    }
    /* Subscribed before queued: a release that hands us the lock finds us
     * alive, and its message is heard. */
    now = dlock_now_ms();
    c = dlock__rd_sub_hold(rs, &mine,
                           now + rs->cf->timeout_ms < deadline_ms
                               ? now + rs->cf->timeout_ms
                               : deadline_ms,
                           &gen);
    free(mine.p);
    if (c == NULL)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    for (;;) {
        t0 = dlock_now_ms();
        if ((rc = q_run(rs, req, RD_SC_QUEUE, &a)) != DLOCK_OK)
            break;
        if (a.ok == 1) {
            q_granted(rs, grant, a.val, t0, req->lease_ms);
            break;
        }
        if (!told) { /* in line: the next async acquire may queue */
            dlock_session_queued(s);
            told = true;
        }
        for (woke = 0; woke == 0;) {
            if ((rc = dlock_session_cancelled(s)) != 0)
                goto out;
            now = dlock_now_ms();
            if (now >= deadline_ms) {
                rc = dlock_session_error(s, DLOCK_ETIMEDOUT,
                                         "not granted in time; left the "
                                         "wait queue");
                goto out;
            }
            wake = a.val > 0 ? now + a.val + 1 : now + 1;
            if (wake > deadline_ms)
                wake = deadline_ms;
            msg[0] = '\0';
            if ((woke = dlock__rd_sub_sleep(rs, c, &gen, wake, msg,
                                            sizeof msg)) < 0) {
                rc = woke;
                goto out;
            }
            if (woke == 0 && dlock_now_ms() < wake)
                woke = 1; /* cancelled? the loop's top says */
            if (woke == 0 && wake < deadline_ms)
                woke = 1; /* the lock's PTTL: look again */
        }
        if (q_parse_grant(msg, rs->keys.nonce, &fence, &s1)) {
            rc = q_handed(rs, req, grant, fence, t0, a.us, s1);
            if (rc != DLOCK_EBUSY)
                break;
        }
    }
out:
    if (rc == DLOCK_OK) {
        dlock__rd_sub_drop(rs, c, false); /* kept a while for the next */
        return rc;
    }
    rc = give_up(rs, req, grant, rc);
    /* Could not leave the line (the connection broke): our entry stays,
     * so our channel must not: a release skips an entry nobody hears. */
    dlock__rd_sub_drop(rs, c, rc == DLOCK_ECONNECT);
    return rc;
}

/* ---- the mode ------------------------------------------------------------------------ */

static int queue_floor(const struct dlock_uri *uri, const char *name,
                       uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__rd_floor_single(&dlock__rd_mode_queue, uri, name, n, ns_out,
                                  err, errlen);
}

const struct dlock__rd_mode dlock__rd_mode_queue = {
    .base = {.name = "queue",
             .summary = "FIFO with a server-side hand-off: the release "
                        "script grants the lock to the first live waiter "
                        "and wakes only it; fencing",
             .caps = DLOCK_CAP_LEASE | DLOCK_CAP_NATIVE_WAIT |
                     DLOCK_CAP_NOTIFY | DLOCK_CAP_FAIR | DLOCK_CAP_FENCING |
                     DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW |
                     DLOCK_CAP_LATCH,
             .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
             .retry_min_ms = 5,
             .retry_max_ms = 1000,
             .acquire = queue_acquire,
             .renew = dlock__rd_single_renew,
             .release = dlock__rd_single_release,
             .inspect = dlock__rd_inspect_single,
             .floor = queue_floor, .forget = dlock__rd_forget,
             .floor_wait = dlock__rd_floor_wait,
             .server_cpu = dlock__rd_server_cpu,
             .latch = &dlock__rd_latch},
    .script = {&queue_try, &queue_release, &dlock__rd_setnx_renew,
               &queue_queue, &queue_giveup},
    .keys = queue_keys,
    .handoff = true,
    .release_refused = 0, /* 1: released and passed on */
    .inspect_read = "GET",
    .open = dlock__rd_single_open,
    .close = dlock__rd_single_close,
};
