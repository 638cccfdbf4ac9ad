/*
 * hash.c: mode hash, Redisson's RLock layout: a hash at the lock name,
 * field "<uuid>:<id>" holding the hold count, channel
 * redisson_lock__channel:{name}, unlock message 0; the fencing counter is
 * Redisson's RFencedLock token key. So a C service on dlock and a Java
 * service on Redisson exclude each other, wake each other's waiters and
 * share one growing token.
 *
 * Permits (counting semaphores) are Redisson's RPermitExpirableSemaphore:
 * see "permits" below, and redis.c for why this mode serves them.
 *
 * This file holds what makes the mode: Redisson's key names, its scripts
 * (in Redisson's KEYS and ARGV orders: KEYS[1] the lock name, ARGV[1] the
 * lease, ARGV[2] the field, so the two read alike) and the mode object.
 * How a session runs them on its server is single.c's (shared with setnx);
 * waiting on the unlock channel is pubsub.c's. Divisions: keys; scripts;
 * permits; the mode.
 */
#include <string.h>

#include "rd.h"

/* ---- keys ------------------------------------------------------------------------- */

/*
 * On a cluster, Redisson's names of a few names are in other slots than
 * the lock (a '{' without a '}' after it, an empty tag "{}", a lone '}'):
 * Redisson cannot lock those on a cluster, and dlock gives their channel
 * and token a tag that hashes to the lock's slot: the lock itself when it
 * has no '}', else the first short printable string found with it.
 */
static int cluster_keys(struct dlock__rd_keys *k, bool permit)
{
    unsigned slot = dlock__rd_cluster_slot(k->lock.p, k->lock.len);
    char t[4] = "";
    const char *tag = k->lock.p;
    size_t tlen = k->lock.len;

    if (dlock__rd_cluster_slot(k->channel.p, k->channel.len) == slot &&
        (!permit ||
         dlock__rd_cluster_slot(k->timeouts.p, k->timeouts.len) == slot))
        return 0; /* Redisson's own names share the slot */
    if (memchr(k->lock.p, '}', k->lock.len) != NULL) {
        /* 92^3 printable strings without braces cover every slot. */
        for (size_t i = 0; i < 92 * 92 * 92; i++) {
            for (size_t j = 0, v = i; j < 3; j++, v /= 92) {
                char c = (char)(0x21 + v % 92);
                t[j] = c >= '{' ? (char)(c + 1) : c; /* skip '{' */
                if (t[j] >= '}')
                    t[j]++; /* and '}' */
            }
            if (dlock__rd_cluster_slot(t, 3) == slot)
                break;
        }
        tag = t;
        tlen = 3;
    }
    if (permit)
        return dlock__rd_buf_set(&k->channel, "redisson_sc:{", 13, tag,
                                 tlen, "}", 1) != 0 ||
                       dlock__rd_buf_set(&k->timeouts, "{", 1, tag, tlen,
                                         "}:timeout", 9) != 0 ||
                       dlock__rd_buf_set(&k->fence, "redisson_lock_token:{",
                                         21, tag, tlen, "}", 1) != 0
                   ? -1
                   : 0;
    return dlock__rd_buf_set(&k->channel, "redisson_lock__channel:{", 24,
                             tag, tlen, "}", 1) != 0 ||
                   dlock__rd_buf_set(&k->fence, "redisson_lock_token:{", 21,
                                     tag, tlen, "}", 1) != 0
               ? -1
               : 0;
}

/* Redisson's suffixName(): b = "{name}:suffix", or "name:suffix" when
 * the name already has a '{'; 0 or -1. */
static int suffix_name(struct dlock__rd_buf *b, const char *name, size_t len,
                       const char *suffix)
{
    size_t slen = strlen(suffix);

    if (memchr(name, '{', len) != NULL)
        return dlock__rd_buf_set(b, name, len, ":", 1, suffix, slen);
    if (dlock__rd_buf_set(b, "{", 1, name, len, "}:", 2) != 0 ||
        dlock__rd_buf_reserve(b, b->len + slen + 1) != 0)
        return -1;
    memcpy(b->p + b->len, suffix, slen + 1);
    b->len += slen;
    return 0;
}

int dlock__rd_redisson_lock_key(struct dlock__rd_keys *k,
                                const struct dlock__rd_conf *cf,
                                const char *name, size_t len)
{
    const char *ns = cf->raw_ns;

    if (ns != NULL)
        return dlock__rd_buf_set(&k->lock, ns, strlen(ns), ":", 1, name, len);
    return dlock__rd_buf_set(&k->lock, name, len, "", 0, "", 0);
}

/* Redisson's names, exactly: the lock is the name itself (after
 * "<namespace>:" when namespace= is given); the channel and the token are
 * prefixName()s of it. A permit (kind "p"): the name holds the count of
 * free permits, "{name}:timeout" (suffixName) the holders, and
 * "redisson_sc:{name}" is the channel, as RPermitExpirableSemaphore's;
 * the token is the lock's (a name is a lock or a semaphore). */
int dlock__rd_hash_keys(struct dlock__rd_keys *k,
                        const struct dlock__rd_conf *cf, const char *name,
                        size_t len)
{
    bool permit = k->kind != NULL && k->kind[0] == 'p';

    if (dlock__rd_redisson_lock_key(k, cf, name, len) != 0)
        return -1;
    if (dlock__rd_prefix_name(&k->channel,
                              permit ? "redisson_sc"
                                     : "redisson_lock__channel",
                              k->lock.p, k->lock.len) != 0 ||
        dlock__rd_prefix_name(&k->fence, "redisson_lock_token", k->lock.p,
                              k->lock.len) != 0 ||
        (permit &&
         suffix_name(&k->timeouts, k->lock.p, k->lock.len, "timeout") != 0))
        return -1;
    return cf->cluster ? cluster_keys(k, permit) : 0;
}

/* ---- scripts ----------------------------------------------------------------------- */

/* Redisson RLock + RFencedLock's token. KEYS: name, token.
 * ARGV: lease ms, field. -> {1, token} or {0, pttl}. dlock never asks
 * the server twice for one holding (core counts reentrant levels), so a
 * field already ours is an earlier grant the server still has (a lost
 * reply, a release in doubt): its count stays 1, and, as in RFencedLock,
 * the token grows with every grant. */
static const struct dlock__rd_script hash_acquire = {
    "local held = redis.call('exists', KEYS[1]) == 1 "
    "if not held or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  if not held then redis.call('hincrby', KEYS[1], ARGV[2], 1) end "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    RD_LUA_FENCE_NEXT
    "  return {1, fence} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}",
    2, 4, {RD_ARG_LOCK, RD_ARG_FENCE, RD_ARG_LEASE, RD_ARG_OWNER}};

/* KEYS: name, channel. ARGV: unlock message (0), lease ms, field.
 * Redisson's unlock: count down, delete and announce at zero.
 * -> 1 released, 0 still held (count > 0), -1 not ours. */
static const struct dlock__rd_script hash_release = {
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -1 end "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1) "
    "if counter > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "
    "  return 0 "
    "end "
    "redis.call('del', KEYS[1]) "
    "redis.call('publish', KEYS[2], ARGV[1]) "
    "return 1",
    2, 5,
    {RD_ARG_LOCK, RD_ARG_CHANNEL, RD_ARG_ZERO, RD_ARG_LEASE, RD_ARG_OWNER}};

/* KEYS: name. ARGV: lease ms, field. Redisson's renewal (RLock's and
 * RFairLock's alike). */
const struct dlock__rd_script dlock__rd_hash_renew = {
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return 1 "
    "end "
    "return 0",
    1, 3, {RD_ARG_LOCK, RD_ARG_LEASE, RD_ARG_OWNER}};

/* ---- permits ---------------------------------------------------------------------- */

/*
 * A semaphore, in Redisson's RPermitExpirableSemaphore layout and scripts
 * (Redisson 4.7.0, RedissonPermitExpirableSemaphore.java; the keys and
 * channel are the same since 3.x):
 *
 *   <name>                  string: the permits free now (trySetPermits)
 *   {<name>}:timeout        sorted set: a member per permit held, scored
 *                           with the millisecond its lease ends
 *   redisson_sc:{<name>}    channel: the free count after each release
 *   redisson_lock_token:{<name>}  the fencing counter (the lock's)
 *
 * The count of the semaphore is Redisson's getPermits(): free + held. A
 * permit's member is its handle's owner id ("<client uuid>:<serial>";
 * Redisson's are 16 random bytes; the scripts treat both as opaque). Each
 * script first gives back the permits whose score has passed (a crashed
 * holder's), as Redisson's acquire and updateLeaseTime do, and announces
 * the free count when it did. Where dlock differs:
 *   - the clock is the server's (TIME), not each client's: dlock clients
 *     on different machines agree on every lease; Redisson's compare the
 *     scores with their own clocks, so clocks that disagree shorten or
 *     lengthen a lease across the two by their difference;
 *   - an unset count is set to the request's (trySetPermits, in the same
 *     script), and a count that differs is refused (DLOCK_EINVAL): dlock
 *     never changes the count (Redisson's setPermits/addPermits do);
 *   - renewal is updateLeaseTime at lease/3 by core's watchdog, so a
 *     permit lives as long as its holder and no longer (redisson#3046);
 *     every permit has a lease, so a crashed holder's permit always comes
 *     back (Redisson's RSemaphore never does: #2045, #4462).
 * KEYS come in the order of Redisson's acquire (name, set, channel);
 * ARGV are dlock's (owner, lease, count: the times come from TIME). The
 * publish command is named once per script (a local), so that
 * cluster=1's SPUBLISH rewrite (redis.c) reaches every announcement.
 */
#define P_LUA_HEAD(zset, count, chan)                                      \
    "local pub = 'publish' "                                               \
    "local t = redis.call('time') "                                        \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "local gone = redis.call('zrangebyscore', KEYS[" zset "], 0, now, "     \
    "  'limit', 0, 1000) "                                                 \
    "if #gone > 0 then "                                                   \
    "  redis.call('zrem', KEYS[" zset "], unpack(gone)) "                  \
    "  local v = redis.call('incrby', KEYS[" count "], #gone) "            \
    "  if v > 0 then redis.call(pub, KEYS[" chan "], v) end "              \
    "end "

/* KEYS: name, timeouts, channel, token. ARGV: owner, lease ms, permits.
 * -> {1, token}; {0, ms until the first lease ends, or -1 (none ends:
 * Redisson's permits without a lease)}; {-1, the stored count} another
 * count; {-2, 0} the name holds something else. A member already ours is
 * an earlier grant whose reply was lost: granted again, its score
 * renewed. */
static const struct dlock__rd_script permit_acquire = {
    "local ty = redis.call('type', KEYS[1]).ok "
    "if ty ~= 'string' and ty ~= 'none' then return {-2, 0} end "
    P_LUA_HEAD("2", "1", "3")
    "local want = tonumber(ARGV[3]) "
    "local held = redis.call('zcard', KEYS[2]) "
    "local free = redis.call('get', KEYS[1]) "
    "if free == false then "
    "  free = want - held "
    "  redis.call('set', KEYS[1], free) "
    "  if free > 0 then redis.call(pub, KEYS[3], free) end "
    "else "
    "  free = tonumber(free) "
    "  if free == nil then return {-2, 0} end "
    "  if free + held ~= want then return {-1, free + held} end "
    "end "
    "if redis.call('zscore', KEYS[2], ARGV[1]) == false then "
    "  if free < 1 then "
    "    local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores') "
    "    if first[2] ~= nil and tonumber(first[2]) < 922337203685477 then "
    "      return {0, tonumber(first[2]) - now} "
    "    end "
    "    return {0, -1} "
    "  end "
    "  redis.call('decrby', KEYS[1], 1) "
    "end "
    "redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1]) "
    "local ttl = redis.call('pttl', KEYS[1]) "
    "if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end "
    RD_LUA_FENCE_NEXT_AT("4")
    "return {1, fence}",
    4, 7,
    {RD_ARG_LOCK, RD_ARG_TIMEOUTS, RD_ARG_CHANNEL, RD_ARG_FENCE,
     RD_ARG_OWNER, RD_ARG_LEASE, RD_ARG_PERMITS}};

/* KEYS: name, timeouts, channel. ARGV: owner. Redisson's tryRelease:
 * only this permit, given back and announced. -> 1 released; -1 not held
 * (or its lease had ended: given back all the same, as Redisson does). */
static const struct dlock__rd_script permit_release = {
    P_LUA_HEAD("2", "1", "3")
    "if redis.call('zrem', KEYS[2], ARGV[1]) ~= 1 then return -1 end "
    "redis.call(pub, KEYS[3], redis.call('incrby', KEYS[1], 1)) "
    "return 1",
    3, 4, {RD_ARG_LOCK, RD_ARG_TIMEOUTS, RD_ARG_CHANNEL, RD_ARG_OWNER}};

/* KEYS: name, timeouts, channel. ARGV: owner, lease ms. Redisson's
 * updateLeaseTime. -> 1 extended, 0 gone (its lease had ended). */
static const struct dlock__rd_script permit_renew = {
    P_LUA_HEAD("2", "1", "3")
    "if redis.call('zscore', KEYS[2], ARGV[1]) == false then return 0 end "
    "redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1]) "
    "return 1",
    3, 5,
    {RD_ARG_LOCK, RD_ARG_TIMEOUTS, RD_ARG_CHANNEL, RD_ARG_OWNER,
     RD_ARG_LEASE}};

/* ---- the mode ------------------------------------------------------------------------ */

static int hash_floor(const struct dlock_uri *uri, const char *name,
                      uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__rd_floor_single(&dlock__rd_mode_hash, uri, name, n, ns_out,
                                  err, errlen);
}


const struct dlock__rd_mode dlock__rd_mode_hash = {
    .base = {.name = "hash",
             .summary = "Redisson's RLock layout and scripts (interoperates "
                        "with Java's RLock and RFencedLock); permits in "
                        "RPermitExpirableSemaphore's",
             RD_SINGLE_MODE_METHODS, .floor = hash_floor,
             .forget = dlock__rd_forget,
             .caps = RD_SINGLE_CAPS | DLOCK_CAP_PERMITS,
             .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                      DLOCK_KIND_BIT(DLOCK_KIND_PERMIT)},
    .script = {[RD_SC_ACQUIRE] = &hash_acquire,
               [RD_SC_RELEASE] = &hash_release,
               [RD_SC_RENEW] = &dlock__rd_hash_renew,
               [RD_SC_P_ACQUIRE] = &permit_acquire,
               [RD_SC_P_RELEASE] = &permit_release,
               [RD_SC_P_RENEW] = &permit_renew},
    .keys = dlock__rd_hash_keys,
    .release_refused = -1, /* 1: deleted; 0: counted down, still ours */
    .inspect_read = "HGETALL",
    .open = dlock__rd_single_open,
    .close = dlock__rd_single_close,
};
