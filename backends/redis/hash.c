/*
 * hash.c: mode hash, Redisson's RLock layout: a hash at the lock name,
 * field "<uuid>:<id>" holding the hold count, channel
 * redisson_lock__channel:{name}, unlock message 0; the fencing counter is
 * Redisson's RFencedLock token key. So a C service on dlock and a Java
 * service on Redisson exclude each other, wake each other's waiters and
 * share one growing token.
 *
 * This file holds what makes the mode: Redisson's key names, its scripts
 * (in Redisson's KEYS and ARGV orders: KEYS[1] the lock name, ARGV[1] the
 * lease, ARGV[2] the field, so the two read alike) and the mode object.
 * How a session runs them on its server is single.c's (shared with setnx);
 * waiting on the unlock channel is pubsub.c's. Divisions: keys; scripts;
 * the mode.
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
static int cluster_keys(struct dlock__rd_keys *k)
{
    unsigned slot = dlock__rd_cluster_slot(k->lock.p, k->lock.len);
    char t[4] = "";
    const char *tag = k->lock.p;
    size_t tlen = k->lock.len;

    if (dlock__rd_cluster_slot(k->channel.p, k->channel.len) == slot)
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
    return dlock__rd_buf_set(&k->channel, "redisson_lock__channel:{", 24,
                             tag, tlen, "}", 1) != 0 ||
                   dlock__rd_buf_set(&k->fence, "redisson_lock_token:{", 21,
                                     tag, tlen, "}", 1) != 0
               ? -1
               : 0;
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
 * prefixName()s of it. */
int dlock__rd_hash_keys(struct dlock__rd_keys *k,
                        const struct dlock__rd_conf *cf, const char *name,
                        size_t len)
{
    if (dlock__rd_redisson_lock_key(k, cf, name, len) != 0)
        return -1;
    if (dlock__rd_prefix_name(&k->channel, "redisson_lock__channel",
                              k->lock.p, k->lock.len) != 0 ||
        dlock__rd_prefix_name(&k->fence, "redisson_lock_token", k->lock.p,
                              k->lock.len) != 0)
        return -1;
    return cf->cluster ? cluster_keys(k) : 0;
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
                        "with Java's RLock and RFencedLock)",
             RD_SINGLE_MODE_BASE, .floor = hash_floor},
    .script = {&hash_acquire, &hash_release, &dlock__rd_hash_renew},
    .keys = dlock__rd_hash_keys,
    .release_refused = -1, /* 1: deleted; 0: counted down, still ours */
    .inspect_read = "HGETALL",
    .open = dlock__rd_single_open,
    .close = dlock__rd_single_close,
};
