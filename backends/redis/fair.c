/*
 * fair.c: mode fair, Redisson's RFairLock: the RLock hash at the name
 * (field "<uuid>:<id>", hash.c's layout and token), a wait queue list
 * redisson_lock_queue:{name}, a sorted set redisson_lock_timeout:{name}
 * scoring each waiter with the time (ms since the epoch) after which it
 * may be skipped as dead, and a channel per waiter,
 * redisson_lock__channel:{name}:<field>, on which the release that makes
 * it first wakes it ("0", Redisson's unlock message). The lock goes to the
 * first of the queue, so grants follow arrival; a Java RFairLock on the
 * same name queues in the same line.
 *
 * What dlock changes, where Redisson has two known faults:
 *
 * 1. Live waiters evicted (redisson#3004). Redisson writes a waiter's
 *    timeout once, when it queues (its predecessor's plus threadWaitTime),
 *    takes threadWaitTime off every timeout at each grant, and every
 *    script pops the first waiter whose timeout has passed: a waiter that
 *    is alive but waited longer than its estimate is thrown out, and
 *    re-queued at the back. Here:
 *    - a waiting dlock handle keeps its own entry: its wait loop runs the
 *      queue script every third of wait_time (and on every wake), which
 *      raises its timeout to at least now + (place + 1) * wait_time,
 *      Redisson's own estimate for its place, so the wait_time a Java
 *      grant takes off every timeout still leaves it ahead; dlock's
 *      grants take nothing off the others' timeouts;
 *    - "dead" needs more than a past timeout: each waiter subscribes to
 *      its own channel (on the client's pub/sub connection) before it
 *      queues and stays subscribed while it waits, as Redisson's waiters
 *      do, and dlock's scripts skip a first waiter only when its timeout
 *      has passed *and* PUBSUB NUMSUB counts nobody on its channel; a
 *      subscribed first waiter has its timeout kept at least now +
 *      wait_time instead (Java's included: its own Redisson scripts
 *      would otherwise evict it once its estimate ran out). The subscription lives as long as the
 *      process's connection: a SIGSTOPped process keeps it (the kernel
 *      keeps its socket open), so it keeps its place however long it is
 *      stopped; a killed one loses it at once (the kernel closes the
 *      socket, Redis drops the subscription), so it is skipped as soon as
 *      its timeout passes, at most wait_time after its last refresh.
 *    The limits, stated: a client whose host vanishes without closing
 *    its connection is seen alive until Redis drops the connection
 *    (tcp-keepalive, 300 s by default; or the server's timeout=); and a
 *    Java RFairLock sharing the queue still runs Redisson's own scripts,
 *    which look at the timeout only: a stopped dlock waiter is safe from
 *    those only while its timeout is ahead (about (place + 1) *
 *    wait_time after its last refresh, less a wait_time per Java grant),
 *    and a Java client's threadWaitTime should equal wait_time.
 * 2. Timeouts from client clocks (redisson#1104, #2099): every Redisson
 *    client writes its own System.currentTimeMillis() into the timeouts,
 *    so a client whose clock is ahead makes the others look dead, one
 *    behind writes timeouts hours away. clock=server makes dlock's scripts
 *    read the time with TIME on the server instead (for names no Redisson
 *    client shares); the default, clock=client, sends the client's wall
 *    clock as Redisson does, so both agree on one name.
 *
 * The give-up path (a try that found the lock taken queues nothing; a
 * deadline, a cancel or an error leaves the queue) removes the waiter's
 * list entry and timeout, and wakes the new first waiter if the lock is
 * free. A waiter whose connection broke cannot: its entry goes when its
 * timeout passes and its subscription has lapsed.
 *
 * Renew (Redisson's, hash.c's) and release (this file's script) run
 * through single.c; waiting happens inside acquire() (a native wait: the
 * server keeps the order), on pubsub.c's sub_* functions. cluster=1 and
 * sync_replicas= are refused (conf.c). Divisions: keys; scripts; acquire;
 * the mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rd.h"

/* ---- keys ------------------------------------------------------------------------- */

/* hash's names, Redisson's queue and timeout set, and the values the
 * scripts take: wait_time and the time (0: TIME on the server). */
static int fair_keys(struct dlock__rd_keys *k, const struct dlock__rd_conf *cf,
                     const char *name, size_t len)
{
    struct timespec ts;

    if (dlock__rd_hash_keys(k, cf, name, len) != 0 ||
        dlock__rd_prefix_name(&k->queue, "redisson_lock_queue", k->lock.p,
                              k->lock.len) != 0 ||
        dlock__rd_prefix_name(&k->timeouts, "redisson_lock_timeout",
                              k->lock.p, k->lock.len) != 0)
        return -1;
    snprintf(k->wait, sizeof k->wait, "%u", cf->wait_time_ms);
    if (cf->server_clock) {
        snprintf(k->now, sizeof k->now, "0");
    } else {
        clock_gettime(CLOCK_REALTIME, &ts); /* System.currentTimeMillis() */
        snprintf(k->now, sizeof k->now, "%lld",
                 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    }
    return 0;
}

/* ---- scripts ----------------------------------------------------------------------- */

/*
 * Every script starts as Redisson's do, dropping dead waiters from the
 * head of the queue, with dlock's liveness test (see the top): a first
 * waiter subscribed to its channel is alive, and its timeout is kept at
 * least wait ahead (which also keeps a Java waiter's own Redisson scripts
 * from evicting it while dlock clients run theirs); one that is not is
 * dropped once its timeout has passed. KEYS[2] is the queue and KEYS[3]
 * the timeouts in each; the channel prefix, wait and now are at the
 * positions given. Leaves the time in `now`.
 */
#define FAIR_LUA_HEAD(chan, wait, now)                                      \
    "local now = tonumber(ARGV[" now "]) "                                 \
    "if now == 0 then "                                                    \
    "  local t = redis.call('time') "                                      \
    "  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "   \
    "end "                                                                 \
    "while true do "                                                       \
    "  local first = redis.call('lindex', KEYS[2], 0) "                    \
    "  if first == false then break end "                                  \
    "  local timeout = redis.call('zscore', KEYS[3], first) "              \
    "  if timeout == false then break end "                                \
    "  if redis.call('pubsub', 'numsub', KEYS[" chan "] .. ':' .. first)[2]" \
    "     > 0 then "                                                       \
    "    local keep = now + tonumber(ARGV[" wait "]) "                     \
    "    if tonumber(timeout) < keep then "                                \
    "      redis.call('zadd', KEYS[3], keep, first) "                      \
    "    end "                                                             \
    "    break "                                                           \
    "  end "                                                               \
    "  if tonumber(timeout) > now then break end "                         \
    "  redis.call('zrem', KEYS[3], first) "                                \
    "  redis.call('lpop', KEYS[2]) "                                       \
    "end "

/* The grant, as Redisson's: free and nobody queued, or we are first. A
 * field already ours is an earlier grant the server still has (a lost
 * reply): its count stays 1 and, as in hash, the token grows. KEYS: lock,
 * queue, timeouts, token, channel. ARGV: lease, field, wait, now. */
#define FAIR_LUA_GRANT                                                      \
    FAIR_LUA_HEAD("5", "3", "4")                                           \
    "if redis.call('exists', KEYS[1]) == 0 and "                           \
    "   (redis.call('exists', KEYS[2]) == 0 or "                           \
    "    redis.call('lindex', KEYS[2], 0) == ARGV[2]) then "               \
    "  redis.call('lpop', KEYS[2]) "                                       \
    "  redis.call('zrem', KEYS[3], ARGV[2]) "                              \
    "  redis.call('hset', KEYS[1], ARGV[2], 1) "                           \
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "                           \
    RD_LUA_FENCE_NEXT_AT("4")                                              \
    "  return {1, fence} "                                                 \
    "end "                                                                 \
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "                \
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "                           \
    RD_LUA_FENCE_NEXT_AT("4")                                              \
    "  return {1, fence} "                                                 \
    "end "

#define FAIR_GRANT_ARGS                                                     \
    5, 9,                                                                  \
    {RD_ARG_LOCK, RD_ARG_QUEUE, RD_ARG_TIMEOUTS, RD_ARG_FENCE,             \
     RD_ARG_CHANNEL, RD_ARG_LEASE, RD_ARG_OWNER, RD_ARG_WAIT, RD_ARG_NOW}

/* One attempt that queues nothing (Redisson's tryLock()).
 * -> {1, token} or {0, pttl}. */
static const struct dlock__rd_script fair_acquire = {
    FAIR_LUA_GRANT "return {0, redis.call('pttl', KEYS[1])}",
    FAIR_GRANT_ARGS};

/* An attempt that queues at the back (Redisson's timeout: the last
 * waiter's, or the lock's pttl, plus wait), or, already queued, keeps the
 * entry alive: its timeout is raised to now + (place + 1) * wait at
 * least, Redisson's estimate for its place in line, so that the wait a
 * Java client takes off every timeout at each of its grants leaves it
 * ahead of now. -> {1, token}, or {0, the lock's pttl} when first,
 * {0, -1} behind. */
static const struct dlock__rd_script fair_queue = {
    FAIR_LUA_GRANT
    "local mine = redis.call('zscore', KEYS[3], ARGV[2]) "
    "local place = 0 "
    "if mine ~= false then "
    "  local q = redis.call('lrange', KEYS[2], 0, -1) "
    "  while place < #q and q[place + 1] ~= ARGV[2] do "
    "    place = place + 1 "
    "  end "
    "end "
    "local want = now + (place + 1) * tonumber(ARGV[3]) "
    "if mine == false then "
    "  local last = redis.call('lindex', KEYS[2], -1) "
    "  local ttl = false "
    "  if last ~= false and last ~= ARGV[2] then "
    "    local s = redis.call('zscore', KEYS[3], last) "
    "    if s ~= false then ttl = tonumber(s) - now end "
    "  end "
    "  if ttl == false then ttl = redis.call('pttl', KEYS[1]) end "
    "  if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + now, "
    "                ARGV[2]) == 1 then "
    "    redis.call('rpush', KEYS[2], ARGV[2]) "
    "  end "
    "elseif tonumber(mine) < want then "
    "  redis.call('zadd', KEYS[3], want, ARGV[2]) "
    "end "
    "if redis.call('lindex', KEYS[2], 0) == ARGV[2] then "
    "  return {0, redis.call('pttl', KEYS[1])} "
    "end "
    "return {0, -1}",
    FAIR_GRANT_ARGS};

/* Wake the first waiter (the lock just became free). KEYS[2] the queue,
 * KEYS[4] the channel prefix, ARGV[1] the message. */
#define FAIR_LUA_WAKE_NEXT                                                  \
    "local nxt = redis.call('lindex', KEYS[2], 0) "                        \
    "if nxt ~= false then "                                                \
    "  redis.call('publish', KEYS[4] .. ':' .. nxt, ARGV[1]) "             \
    "end "

/* Redisson's unlock. KEYS: lock, queue, timeouts, channel. ARGV: unlock
 * message (0), lease, field, wait, now. -> 1 released (the first waiter
 * woken), 0 counted down, -1 not ours (a free lock wakes the first
 * waiter all the same, as Redisson's does). */
static const struct dlock__rd_script fair_release = {
    FAIR_LUA_HEAD("4", "4", "5")
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then "
    "  if redis.call('exists', KEYS[1]) == 0 then "
    FAIR_LUA_WAKE_NEXT
    "  end "
    "  return -1 "
    "end "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1) "
    "if counter > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "
    "  return 0 "
    "end "
    "redis.call('del', KEYS[1]) "
    FAIR_LUA_WAKE_NEXT
    "return 1",
    4, 9,
    {RD_ARG_LOCK, RD_ARG_QUEUE, RD_ARG_TIMEOUTS, RD_ARG_CHANNEL, RD_ARG_ZERO,
     RD_ARG_LEASE, RD_ARG_OWNER, RD_ARG_WAIT, RD_ARG_NOW}};

/* Redisson's acquireFailed, without its cut of the later waiters'
 * timeouts: leave the queue; if we were first and the lock is free, wake
 * the next (Redisson leaves it to its timeout). KEYS: lock, queue,
 * timeouts, channel. ARGV: message (0), field. -> 1. */
static const struct dlock__rd_script fair_giveup = {
    "local first = redis.call('lindex', KEYS[2], 0) == ARGV[2] "
    "redis.call('zrem', KEYS[3], ARGV[2]) "
    "redis.call('lrem', KEYS[2], 0, ARGV[2]) "
    "if first and redis.call('exists', KEYS[1]) == 0 then "
    FAIR_LUA_WAKE_NEXT
    "end "
    "return 1",
    4, 6,
    {RD_ARG_LOCK, RD_ARG_QUEUE, RD_ARG_TIMEOUTS, RD_ARG_CHANNEL, RD_ARG_ZERO,
     RD_ARG_OWNER}};

/* ---- acquire ------------------------------------------------------------------------ */

/* Run script which (RD_SC_ACQUIRE or RD_SC_QUEUE) once. DLOCK_OK fills
 * the grant; DLOCK_EBUSY sets *hint to the lock's pttl (when it can be
 * ours as soon as it expires) or 0. */
static int fair_attempt(struct dlock__rd_session *rs,
                        const struct dlock_request *req, int which,
                        struct dlock_grant *grant, uint32_t *hint)
{
    char lease[16];
    long long ok, val;
    redisReply *r;
    int code;

    if (rs->m->keys(&rs->keys, rs->cf, req->name, req->name_len) != 0)
        return dlock_session_error(&rs->base, DLOCK_ENOMEM, "out of memory");
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    r = dlock__rd_run(rs, which, req->owner, req->owner_len, lease);
    if (r == NULL)
        return dlock__rd_io_error(rs, DLOCK_ECONNECT, "acquire");
    if (dlock__rd_reply_pair(r, &ok, &val) != 0) {
        code = dlock__rd_reply_error(rs, r);
        freeReplyObject(r);
        return code;
    }
    freeReplyObject(r);
    if (ok == 1) {
        grant->fence = (uint64_t)val;
        grant->word[0] = rs->gen; /* the server's life (single.c) */
        return DLOCK_OK;
    }
    *hint = val > 0 ? (val > UINT32_MAX ? UINT32_MAX : (uint32_t)val)
            : val == 0 || val == -2 ? 1 /* expiring or free: at once */
                                    : 0;
    return DLOCK_EBUSY;
}

/* Leave the queue (best effort: a broken connection leaves the entry to
 * its timeout) and return code. */
static int give_up(struct dlock__rd_session *rs,
                   const struct dlock_request *req, int code)
{
    redisReply *r;

    if (code == DLOCK_ECONNECT || code == DLOCK_ENOMEM)
        return code;
    r = dlock__rd_run(rs, RD_SC_GIVEUP, req->owner, req->owner_len, "0");
    if (r == NULL)
        dlock_session_log(&rs->base, DLOCK_LOG_WARN,
                          "redis: could not leave the wait queue of '%.*s' "
                          "(its entry goes after wait_time): %s",
                          (int)req->name_len, req->name, rs->rc->errstr);
    else
        freeReplyObject(r);
    return code;
}

/*
 * A try is one attempt that queues nothing. A wait subscribes to the
 * handle's own channel, then loops: the queue script (joins the queue, or
 * keeps the place alive, or grants), then sleep until a message on the
 * channel, a third of wait_time (the next refresh), the lock's pttl when
 * first (an expiry is announced by nobody), or the deadline.
 */
static int fair_acquire_m(struct dlock_session *s,
                          const struct dlock_request *req,
                          int64_t deadline_ms, struct dlock_grant *grant,
                          uint32_t *retry_ms)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_buf mine = {NULL, 0, 0};
    struct dlock__rd_chan *c;
    uint32_t hint = 0, refresh = rs->cf->wait_time_ms / 3;
    uint64_t gen = 0;
    int64_t now, wake;
    bool told = false;
    int rc;

    dlock__rd_log_note(rs);
    if (deadline_ms == 0) {
        rc = fair_attempt(rs, req, RD_SC_ACQUIRE, grant, &hint);
        if (rc == DLOCK_EBUSY && hint > 0)
            *retry_ms = hint;
        return rc;
    }
    if (rs->m->keys(&rs->keys, rs->cf, req->name, req->name_len) != 0 ||
        dlock__rd_buf_set(&mine, rs->keys.channel.p, rs->keys.channel.len,
                          ":", 1, req->owner, req->owner_len) != 0) {
        free(mine.p);
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    }
    /* Subscribed before queued: a release that makes us first is heard,
     * and others see us alive from the moment we are in line. */
    now = dlock_now_ms();
    c = dlock__rd_sub_hold(rs, &mine, now + rs->cf->timeout_ms < deadline_ms
                                          ? now + rs->cf->timeout_ms
                                          : deadline_ms,
                           &gen);
    free(mine.p);
    for (;;) {
        rc = fair_attempt(rs, req, RD_SC_QUEUE, grant, &hint);
        if (rc != DLOCK_EBUSY)
            break;
        if (!told) { /* in line: the next async acquire may queue */
            dlock_session_queued(s);
            told = true;
        }
        if ((rc = dlock_session_cancelled(s)) != 0)
            break;
        now = dlock_now_ms();
        if (now >= deadline_ms) {
            rc = dlock_session_error(s, DLOCK_ETIMEDOUT,
                                     "not granted in time; left the wait "
                                     "queue");
            break;
        }
        wake = now + refresh;
        if (hint > 0 && now + hint < wake)
            wake = now + hint;
        if (wake > deadline_ms)
            wake = deadline_ms;
        if ((rc = dlock__rd_sub_sleep(rs, c, &gen, wake, NULL, 0)) < 0)
            break;
    }
    dlock__rd_sub_drop(rs, c, false);
    return rc == DLOCK_OK ? rc : give_up(rs, req, rc);
}

/* ---- the mode ------------------------------------------------------------------------ */

static int fair_floor(const struct dlock_uri *uri, const char *name,
                      uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__rd_floor_single(&dlock__rd_mode_fair, uri, name, n, ns_out,
                                  err, errlen);
}


const struct dlock__rd_mode dlock__rd_mode_fair = {
    .base = {.name = "fair",
             .summary = "Redisson's RFairLock queue (interoperates with "
                        "Java's RFairLock): granted in order of arrival; a "
                        "live waiter keeps its place (wait_time=, "
                        "clock=server)",
             .caps = DLOCK_CAP_LEASE | DLOCK_CAP_NATIVE_WAIT |
                     DLOCK_CAP_NOTIFY | DLOCK_CAP_FAIR | DLOCK_CAP_FENCING |
                     DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW |
                     DLOCK_CAP_LATCH,
             .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
             .retry_min_ms = 5,
             .retry_max_ms = 1000,
             .acquire = fair_acquire_m,
             .renew = dlock__rd_single_renew,
             .release = dlock__rd_single_release,
             .inspect = dlock__rd_inspect_single,
             .floor = fair_floor, .forget = dlock__rd_forget,
             .floor_wait = dlock__rd_floor_wait,
             .server_cpu = dlock__rd_server_cpu,
             .latch = &dlock__rd_latch},
    .script = {&fair_acquire, &fair_release, &dlock__rd_hash_renew,
               &fair_queue, &fair_giveup},
    .keys = fair_keys,
    .queue = true,
    .release_refused = -1, /* 1: deleted; 0: counted down, still ours */
    .inspect_read = "HGETALL",
    .open = dlock__rd_single_open,
    .close = dlock__rd_single_close,
};
