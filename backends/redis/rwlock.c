/*
 * rwlock.c: mode rwlock, Redisson's RReadWriteLock layout: readers and
 * writers on one hash at the lock name, so dlock and Java's
 * RReadWriteLock share a lock both ways.
 *
 *   hash <name>            mode        "read" | "write"
 *                          <owner>     a reader's hold count
 *                          <owner>:write  the writer's hold count
 *   {<name>}:<owner>:rwlock_timeout:<i>   one key per read hold, with the
 *                          reader's lease: when the last live reader goes,
 *                          the hash lives only as long as the longest of
 *                          these, so a crashed reader blocks writers for
 *                          no longer than its lease
 *   redisson_rwlock:{<name>}   the channel: "0" after the last reader,
 *                          "1" after a writer
 *   redisson_lock_token:{<name>}  the fencing counter (hash mode's)
 *
 * Why a mode of its own and not hash's shared kind: Redisson's RLock
 * (hash) has no "mode" field, and a Redisson reader takes a hash without
 * one for free. RLock and RReadWriteLock on one name do not see each other
 * in Redisson either; naming the layout in the URI keeps a dlock service
 * and a Java one on the same layout.
 *
 * Where dlock differs from Redisson's scripts, and why:
 *   - a renewal extends the reader's own timeout keys only (Redisson's
 *     extends every reader's, so one live reader keeps a crashed reader's
 *     keys, and with them the hash, alive for ever);
 *   - a writer's release that leaves readers (a downgrade by a Redisson
 *     thread) announces it, so waiting readers come in at once;
 *   - prefer=writer: a refused writer leaves a marker,
 *     {<name>}:dlock_writer_waiting (its owner, RD_WRITER_MARK_MS), which
 *     keeps new dlock readers out until it is granted, gives up (the
 *     marker lapses) or dies, so a stream of overlapping readers cannot
 *     starve it (redisson#5379). A waiting writer refreshes it at every
 *     attempt, at least every RD_WRITER_RETRY_MS. Redisson's readers do
 *     not read the marker;
 *   - core never asks the server twice for one holding (it counts
 *     reentrant levels), so a field already ours is an earlier grant whose
 *     reply was lost: it is granted again, its count unchanged.
 *
 * Downgrade (dlock_downgrade()): the writer takes the read lock with its
 * own owner id, which the acquire script lets in beside its write field
 * (as Redisson lets a writing thread read), then drops the write field.
 * Upgrades (a read holder asking to write) cannot happen here: a handle's
 * kind is fixed when it is made, and core refuses a thread's conflicting
 * wait on a name it holds through another handle (DLOCK_EDEADLK).
 * cluster=1 is refused for now: Redisson's timeout keys are built inside
 * the scripts, and a name with odd braces puts them in another slot.
 *
 * Divisions: keys; scripts; the mode.
 */
#include <string.h>

#include "rd.h"

/* ---- keys ------------------------------------------------------------------------- */

static int rwlock_keys(struct dlock__rd_keys *k,
                       const struct dlock__rd_conf *cf, const char *name,
                       size_t len)
{
    if (dlock__rd_redisson_lock_key(k, cf, name, len) != 0 ||
        dlock__rd_prefix_name(&k->channel, "redisson_rwlock", k->lock.p,
                              k->lock.len) != 0 ||
        dlock__rd_prefix_name(&k->fence, "redisson_lock_token", k->lock.p,
                              k->lock.len) != 0)
        return -1;
    return 0;
}

/* ---- scripts ----------------------------------------------------------------------- */

#define RD_STR_(x) #x
#define RD_STR(x) RD_STR_(x)

/* Redisson's suffixName() prefix of the name (its hash tag) in `kp`, and a
 * reader's timeout key. */
#define RW_LUA_PREFIX                                                        \
    "local kp = KEYS[1] "                                                   \
    "if not string.find(kp, '{', 1, true) then kp = '{' .. kp .. '}' end "  \
    "local function tkey(f, i) "                                            \
    "  return kp .. ':' .. f .. ':rwlock_timeout:' .. i "                   \
    "end "                                                                  \
    "local mark = kp .. ':dlock_writer_waiting' "                           \
    "local mode = redis.call('hget', KEYS[1], 'mode') "

/* KEYS: name, token. ARGV: lease ms, owner, kind (r, w, W).
 * -> {1, token} or {0, ms until it may be free}. */
static const struct dlock__rd_script rwlock_acquire = {
    RW_LUA_PREFIX
    "if ARGV[3] == 'r' then "
    "  local mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1 "
    "  local free = redis.call('exists', mark) == 0 and "
    "    (mode == false or mode == 'read') "
    "  if not (mine or free or (mode == 'write' and "
    "      redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 1)) then "
    "    if mode == 'write' then return {0, redis.call('pttl', KEYS[1])} end "
    "    return {0, redis.call('pttl', mark)} "
    "  end "
    "  if mode == false then redis.call('hset', KEYS[1], 'mode', 'read') end "
    "  local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0') "
    "  if n == 0 then n = redis.call('hincrby', KEYS[1], ARGV[2], 1) end "
    "  redis.call('set', tkey(ARGV[2], n), 1, 'px', ARGV[1]) "
    "  redis.call('pexpire', KEYS[1], "
    "    math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1]))) "
    "else "
    "  local wf = ARGV[2] .. ':write' "
    "  if not (mode == false or (mode == 'write' and "
    "      redis.call('hexists', KEYS[1], wf) == 1)) then "
    "    if ARGV[3] == 'W' then "
    "      redis.call('set', mark, ARGV[2], 'px', " RD_STR(RD_WRITER_MARK_MS)
    "      ) "
    "    end "
    "    return {0, redis.call('pttl', KEYS[1])} "
    "  end "
    "  redis.call('hset', KEYS[1], 'mode', 'write') "
    "  if redis.call('hexists', KEYS[1], wf) == 0 then "
    "    redis.call('hset', KEYS[1], wf, 1) "
    "  end "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  if redis.call('get', mark) == ARGV[2] then redis.call('del', mark) end "
    "end "
    RD_LUA_FENCE_NEXT
    "return {1, fence}",
    2, 5, {RD_ARG_LOCK, RD_ARG_FENCE, RD_ARG_LEASE, RD_ARG_OWNER,
           RD_ARG_KIND}};

/* KEYS: name, channel. ARGV: owner, kind. -> 1 released, -1 not ours.
 * A reader's release counts down and drops its timeout key; the hash goes
 * (and "0" is announced) when no other holder is left, or when the other
 * readers' timeout keys have all run out (they crashed); else it lives as
 * long as the longest of them. */
static const struct dlock__rd_script rwlock_release = {
    RW_LUA_PREFIX
    "if ARGV[2] == 'r' then "
    "  if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return -1 end "
    "  local n = redis.call('hincrby', KEYS[1], ARGV[1], -1) "
    "  if n <= 0 then redis.call('hdel', KEYS[1], ARGV[1]) end "
    "  redis.call('del', tkey(ARGV[1], n + 1)) "
    "  if redis.call('hlen', KEYS[1]) > 1 then "
    "    local most = -3 "
    "    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do "
    "      local c = tonumber(redis.call('hget', KEYS[1], f)) "
    "      if c then "
    "        for i = c, 1, -1 do "
    "          most = math.max(most, redis.call('pttl', tkey(f, i))) "
    "        end "
    "      end "
    "    end "
    "    if most > 0 then "
    "      redis.call('pexpire', KEYS[1], most) "
    "      return 1 "
    "    end "
    "    if mode == 'write' then return 1 end "
    "  end "
    "  redis.call('del', KEYS[1]) "
    "  redis.call('publish', KEYS[2], '0') "
    "  return 1 "
    "end "
    "local wf = ARGV[1] .. ':write' "
    "if mode ~= 'write' or redis.call('hexists', KEYS[1], wf) == 0 then "
    "  return -1 "
    "end "
    "redis.call('hdel', KEYS[1], wf) "
    "if redis.call('hlen', KEYS[1]) == 1 then "
    "  redis.call('del', KEYS[1]) "
    "else "
    "  redis.call('hset', KEYS[1], 'mode', 'read') "
    "end "
    "redis.call('publish', KEYS[2], '1') "
    "return 1",
    2, 4, {RD_ARG_LOCK, RD_ARG_CHANNEL, RD_ARG_OWNER, RD_ARG_KIND}};

/* KEYS: name. ARGV: lease ms, owner, kind. -> 1 extended, 0 gone. The
 * hash's TTL only grows: another holder may need longer. */
static const struct dlock__rd_script rwlock_renew = {
    RW_LUA_PREFIX
    "if ARGV[3] == 'r' then "
    "  local c = tonumber(redis.call('hget', KEYS[1], ARGV[2])) "
    "  if not c then return 0 end "
    "  for i = c, 1, -1 do "
    "    redis.call('set', tkey(ARGV[2], i), 1, 'px', ARGV[1]) "
    "  end "
    "elseif mode ~= 'write' or "
    "    redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then "
    "  return 0 "
    "end "
    "redis.call('pexpire', KEYS[1], "
    "  math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1]))) "
    "return 1",
    1, 4, {RD_ARG_LOCK, RD_ARG_LEASE, RD_ARG_OWNER, RD_ARG_KIND}};

/* ---- the mode ------------------------------------------------------------------------ */

static int rwlock_floor(const struct dlock_uri *uri, const char *name,
                        uint32_t n, uint64_t *ns_out, char *err,
                        size_t errlen)
{
    return dlock__rd_floor_single(&dlock__rd_mode_rwlock, uri, name, n,
                                  ns_out, err, errlen);
}


const struct dlock__rd_mode dlock__rd_mode_rwlock = {
    .base = {.name = "rwlock",
             .summary = "Redisson's RReadWriteLock layout and scripts: "
                        "shared readers, one writer (interoperates with "
                        "Java's RReadWriteLock); prefer=writer keeps new "
                        "readers out while a writer waits",
             .caps = RD_SINGLE_CAPS | DLOCK_CAP_SHARED |
                     DLOCK_CAP_DOWNGRADE,
             .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                      DLOCK_KIND_BIT(DLOCK_KIND_SHARED),
             RD_SINGLE_MODE_METHODS, .floor = rwlock_floor,
             .forget = dlock__rd_forget,
             .downgrade = dlock__rd_single_downgrade},
    .script = {&rwlock_acquire, &rwlock_release, &rwlock_renew},
    .keys = rwlock_keys,
    .release_refused = 0, /* 1: released */
    .inspect_read = "HGETALL",
    .holder_suffix = ":write",
    .open = dlock__rd_single_open,
    .close = dlock__rd_single_close,
};
