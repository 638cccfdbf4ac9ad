/*
 * latch.c: count-down latches on Redis [B-LATCH-1], in
 * Redisson's RCountDownLatch layout, so a Java RCountDownLatch and dlock
 * share one latch: the key is the name itself (after "<namespace>:" when
 * namespace= is given) and holds the count as an integer string; the
 * count reaching zero deletes it and publishes "0" on
 * "redisson_countdownlatch__channel__{<key>}"; setting a count publishes
 * "1" there. Redisson's own scripts return nothing or a boolean; ours
 * return the count (and take the channel as an argument, below). A waiter subscribes (on the
 * client's pub/sub connection, pubsub.c), then reads the count, then
 * sleeps until a message, as Redisson's await() does.
 *
 * The modes of one server (setnx, hash, rwlock, fair) share this table,
 * also on a Redis Cluster (cluster=1): the scripts go to the master of
 * the key's slot (their one key; the channel is an argument), and the
 * PUBLISH is the cluster-wide kind, as Redisson's, heard on the client's
 * pub/sub connection to the first node. Redlock has no latches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd.h"

/* A message may not come (the pub/sub connection down): look again at
 * least this often meanwhile. */
#define RD_LATCH_RECHECK_MS 500

/* Redisson's trySetCount, returning the count that is there when it does
 * not set. The channel is an argument, not a key as in Redisson's: on a
 * cluster a name with a '{' of its own would put it in another slot.
 * KEYS: the count. ARGV: the channel, "1" (Redisson's new-count message),
 * the count. -> 0 set, or the count that is there (nothing changed). */
static const char latch_set_lua[] =
    "if redis.call('exists', KEYS[1]) == 0 then "
    "  redis.call('set', KEYS[1], ARGV[3]) "
    "  redis.call('publish', ARGV[1], ARGV[2]) "
    "  return 0 "
    "end "
    "return tonumber(redis.call('get', KEYS[1])) or -1";

/* Redisson's countDown, returning the count left. KEYS: the count. ARGV:
 * the channel, "0" (Redisson's zero-count message). */
static const char latch_down_lua[] =
    "local v = redis.call('decr', KEYS[1]) "
    "if v <= 0 then redis.call('del', KEYS[1]) end "
    "if v == 0 then redis.call('publish', ARGV[1], ARGV[2]) end "
    "if v < 0 then return 0 end "
    "return v";

/* The key and the channel of name into rs->keys.lock and .channel. */
static int latch_keys(struct dlock__rd_session *rs, const char *name,
                      size_t len)
{
    static const char pre[] = "redisson_countdownlatch__channel__{";

    /* Redisson's raw name, as hash.c's lock key (not called: hash.c's
     * mode table names this file's). */
    const char *ns = rs->cf->raw_ns;

    if (dlock__rd_buf_set(&rs->keys.lock, ns != NULL ? ns : "",
                          ns != NULL ? strlen(ns) : 0, ns != NULL ? ":" : "",
                          ns != NULL ? 1 : 0, name, len) != 0 ||
        dlock__rd_buf_set(&rs->keys.channel, pre, sizeof pre - 1,
                          rs->keys.lock.p, rs->keys.lock.len, "}", 1) != 0)
        return dlock_session_error(&rs->base, DLOCK_ENOMEM, "out of memory");
    return DLOCK_OK;
}

/* One command on the key's server: the session's one connection, or on
 * a cluster (cluster.c) the master of the key's slot, following MOVED and
 * ASK. NULL: the connection failed. */
static redisReply *latch_cmd(struct dlock__rd_session *rs, int argc,
                             const char **argv, const size_t *lens)
{
    if (rs->cl == NULL)
        return dlock__rd_command_argv(rs->rc, argc, argv, lens);
    return dlock__rd_cluster_cmd(
        rs, dlock__rd_cluster_slot(rs->keys.lock.p, rs->keys.lock.len), argc,
        argv, lens);
}

/* A reply that should be a count: 0..DLOCK_LATCH_COUNT_MAX, or nil (0). */
static int latch_reply_count(struct dlock__rd_session *rs,
                             const redisReply *r, uint32_t *out)
{
    long long v;
    char *end;

    if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
        return DLOCK_OK;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    } else if (r->type == REDIS_REPLY_STRING) {
        v = strtoll(r->str, &end, 10);
        if (end == r->str || *end != '\0')
            v = -1;
    } else {
        return dlock__rd_reply_error(rs, r);
    }
    if (v < 0 || v > (long long)DLOCK_LATCH_COUNT_MAX)
        return dlock_session_error(&rs->base, DLOCK_ERROR,
                                   "the key '%s' does not hold a latch "
                                   "count (a lock or other data of that "
                                   "name?)",
                                   rs->keys.lock.p);
    *out = v > 0 ? (uint32_t)v : 0;
    return DLOCK_OK;
}

/* EVAL lua with the key, the channel and one or two arguments (arg2 may
 * be NULL). */
static int latch_eval(struct dlock__rd_session *rs, const char *op,
                      const char *lua, const char *arg1, const char *arg2,
                      uint32_t *out)
{
    const char *argv[7] = {"EVAL", lua, "1", rs->keys.lock.p,
                           rs->keys.channel.p, arg1, arg2};
    size_t lens[7] = {4, strlen(lua), 1, rs->keys.lock.len,
                      rs->keys.channel.len, strlen(arg1),
                      arg2 != NULL ? strlen(arg2) : 0};
    redisReply *r;
    int rc;

    r = latch_cmd(rs, arg2 != NULL ? 7 : 6, argv, lens);
    if (r == NULL)
        return dlock__rd_io_error(rs, DLOCK_ECONNECT, op);
    rc = latch_reply_count(rs, r, out);
    freeReplyObject(r);
    return rc;
}

static int rd_latch_set(struct dlock_session *s, const char *name, size_t len,
                        uint32_t count, uint32_t *current)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    char text[16];
    int rc;

    dlock__rd_log_note(rs);
    if ((rc = latch_keys(rs, name, len)) != DLOCK_OK)
        return rc;
    snprintf(text, sizeof text, "%u", count);
    return latch_eval(rs, "latch set", latch_set_lua, "1", text, current);
}

static int rd_latch_down(struct dlock_session *s, const char *name,
                         size_t len, uint32_t *left)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    int rc;

    dlock__rd_log_note(rs);
    if ((rc = latch_keys(rs, name, len)) != DLOCK_OK)
        return rc;
    return latch_eval(rs, "latch down", latch_down_lua, "0", NULL, left);
}

/* GET the count of rs->keys.lock. */
static int latch_get(struct dlock__rd_session *rs, const char *op,
                     uint32_t *count)
{
    const char *argv[2] = {"GET", rs->keys.lock.p};
    size_t lens[2] = {3, rs->keys.lock.len};
    redisReply *r;
    int rc;

    r = latch_cmd(rs, 2, argv, lens);
    if (r == NULL)
        return dlock__rd_io_error(rs, DLOCK_ECONNECT, op);
    rc = latch_reply_count(rs, r, count);
    freeReplyObject(r);
    return rc;
}

static int rd_latch_count(struct dlock_session *s, const char *name,
                          size_t len, uint32_t *count)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    int rc;

    dlock__rd_log_note(rs);
    if ((rc = latch_keys(rs, name, len)) != DLOCK_OK)
        return rc;
    return latch_get(rs, "latch count", count);
}

/* Subscribe, then look, then sleep until a message and look again. */
static int rd_latch_await(struct dlock_session *s, const char *name,
                          size_t len, int64_t deadline_ms)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_chan *c;
    uint32_t count = 0;
    uint64_t gen = 0;
    int64_t now, wake;
    int rc;

    dlock__rd_log_note(rs);
    if ((rc = latch_keys(rs, name, len)) != DLOCK_OK)
        return rc;
    if (rs->x == NULL || !rs->x->ps.on)
        return dlock_session_error(s, DLOCK_EUNSUPPORTED,
                                   "no pub/sub in this mode");
    now = dlock_now_ms();
    /* Until confirmed, or timeout=: then we look and poll meanwhile. */
    c = dlock__rd_sub_hold(rs, &rs->keys.channel,
                           now + rs->cf->timeout_ms < deadline_ms
                               ? now + rs->cf->timeout_ms
                               : deadline_ms,
                           &gen);
    if (c == NULL)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    for (;;) {
        if ((rc = latch_get(rs, "latch await", &count)) != DLOCK_OK ||
            count == 0)
            break;
        now = dlock_now_ms();
        if (now >= deadline_ms) {
            rc = DLOCK_ETIMEDOUT; /* core says so */
            break;
        }
        wake = now + RD_LATCH_RECHECK_MS < deadline_ms
                   ? now + RD_LATCH_RECHECK_MS
                   : deadline_ms;
        if ((rc = dlock__rd_sub_sleep(rs, c, &gen, wake, NULL, 0)) < 0)
            break;
    }
    dlock__rd_sub_drop(rs, c, false);
    return rc;
}

const struct dlock_latch_ops dlock__rd_latch = {
    .set = rd_latch_set,
    .down = rd_latch_down,
    .count = rd_latch_count,
    .await = rd_latch_await,
};
