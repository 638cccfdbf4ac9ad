/*
 * setnx.c: mode setnx (the default of redis://): one key per lock holding
 * the owner id, taken with SET key owner NX PX lease inside a Lua script
 * that also bumps a fencing counter; released by compare-and-delete plus a
 * PUBLISH that wakes the waiters; renewed by compare-and-PEXPIRE.
 *
 * This file holds what makes the mode: its keys, its scripts and its mode
 * object. Redlock (redlock.c) runs the same lock on N nodes: it uses these
 * keys and the release and renew scripts. How a session runs the scripts
 * on its one server is single.c's (shared with hash); waiting on the
 * release channel is pubsub.c's. Divisions: keys; scripts; the mode.
 */
#include <stdio.h>

#include "rd.h"

/* ---- keys ------------------------------------------------------------------------- */

/*
 * Everything sits under one hash tag so that lock, fence and channel share
 * a cluster slot: "dlock:{<ns>:<name>}" for the lock, "...:fence" and
 * "...:released" for the others. The name inside the tag is escaped by
 * dlock_name_segment ('{', '}' and every byte outside [A-Za-z0-9_.-]
 * become %XX, so no name can close the tag early) and names longer than
 * RD_SEG_MAX escaped bytes are cut and end in "~" and their SHA-256: keys
 * stay under ~430 bytes.
 */
int dlock__rd_setnx_keys(struct dlock__rd_keys *k,
                         const struct dlock__rd_conf *cf, const char *name,
                         size_t len)
{
    char seg[RD_SEG_MAX + 1], tag[2 * RD_SEG_MAX + 16];
    size_t n = dlock_name_segment(seg, RD_SEG_MAX, name, len);
    int t = snprintf(tag, sizeof tag, "dlock:{%s%s%.*s}", cf->ns,
                     cf->ns[0] != '\0' ? ":" : "", (int)n, seg);

    return dlock__rd_buf_set(&k->lock, tag, (size_t)t, "", 0, "", 0) != 0 ||
                   dlock__rd_buf_set(&k->fence, tag, (size_t)t, ":fence", 6,
                                     "", 0) != 0 ||
                   dlock__rd_buf_set(&k->channel, tag, (size_t)t,
                                     ":released", 9, "", 0) != 0
               ? -1
               : 0;
}

/* ---- scripts ----------------------------------------------------------------------- */

/* KEYS: lock, fence. ARGV: owner, lease ms.
 * -> {1, fence} granted, {0, pttl} busy. A key already ours is an earlier
 * grant of this handle that the server still has: the attempt before this
 * one whose reply was lost, or a release that ended in doubt and never
 * reached the server. It is granted again, with a new token: every grant
 * gets a token above every earlier one, and a lost reply only skips one. */
static const struct dlock__rd_script setnx_acquire = {
    "local ours = redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) "
    "if not ours and redis.call('get', KEYS[1]) == ARGV[1] then "
    "  ours = redis.call('pexpire', KEYS[1], ARGV[2]) "
    "end "
    "if ours then "
    RD_LUA_FENCE_NEXT
    "  return {1, fence} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}",
    2, 4, {RD_ARG_LOCK, RD_ARG_FENCE, RD_ARG_OWNER, RD_ARG_LEASE}};

/* setnx and redlock. KEYS: lock, channel. ARGV: owner.
 * -> 1 deleted (and announced), 0 not ours. */
const struct dlock__rd_script dlock__rd_setnx_release = {
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  redis.call('del', KEYS[1]) "
    "  redis.call('publish', KEYS[2], '0') "
    "  return 1 "
    "end "
    "return 0",
    2, 3, {RD_ARG_LOCK, RD_ARG_CHANNEL, RD_ARG_OWNER}};

/* setnx and redlock. KEYS: lock. ARGV: owner, lease ms.
 * -> 1 extended, 0 gone or another owner's. */
const struct dlock__rd_script dlock__rd_setnx_renew = {
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  return redis.call('pexpire', KEYS[1], ARGV[2]) "
    "end "
    "return 0",
    1, 3, {RD_ARG_LOCK, RD_ARG_OWNER, RD_ARG_LEASE}};

/* ---- the mode ------------------------------------------------------------------------ */

static int setnx_floor(const struct dlock_uri *uri, const char *name,
                       uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__rd_floor_single(&dlock__rd_mode_setnx, uri, name, n, ns_out,
                                  err, errlen);
}


const struct dlock__rd_mode dlock__rd_mode_setnx = {
    .base = {.name = "setnx",
             .summary = "SET NX PX of the owner id, a fencing counter, "
                        "release announced by pub/sub",
             RD_SINGLE_MODE_BASE, .floor = setnx_floor,
             .forget = dlock__rd_forget},
    .script = {&setnx_acquire, &dlock__rd_setnx_release,
               &dlock__rd_setnx_renew},
    .keys = dlock__rd_setnx_keys,
    .release_refused = 0, /* 1: deleted */
    .inspect_read = "GET",
    .open = dlock__rd_single_open,
    .close = dlock__rd_single_close,
};
