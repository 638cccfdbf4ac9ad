/*
 * floor.c: the raw floor of `dlock bench` (the floor slot of each mode;
 * bench-only): n cycles of the bare lock protocol a user of the client
 * library alone would send for that kind of lock, with bare hiredis calls
 * and no dlock core, and no fence (dlock's fence is an INCR inside its
 * acquire script: no request of its own, so no mode here has a
 * fence_floor):
 *   setnx    SET lock owner NX PX, then the compare-and-delete script
 *            (redis-py's Lock, the Redis docs' single-instance lock);
 *   hash     Redisson's RLock tryLock and unlock scripts as Redisson sends
 *            them, on the same keys (the lock hash and its channel),
 *            without dlock's token key;
 *   rwlock   Redisson's RWriteLock tryLock and unlock scripts, likewise;
 *   redlock  SET NX PX on every node at once, then the compare-and-delete
 *            script by EVAL on every node (redlock-py's rounds);
 *   fair     still dlock's own two scripts, fence included: Redisson's
 *            fair-lock scripts are not written here yet.
 * Scripts are loaded before the clock starts and sent by EVALSHA, as dlock
 * sends its own. The contended floor (floor_wait) of every single-server
 * mode is SET NX PX spinning; server_cpu reads INFO cpu. And forget: the bench's clean-up, UNLINK of every key a
 * name may have left (the lock, its fence counter, fair's queue and
 * timeouts) on the name's server, or on every node.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rd.h"

/* Owner id and lease of every floor cycle. */
static const char floor_owner[] = "00000000-0000-4000-8000-000000000000:1";
static const char floor_writer[] =
    "00000000-0000-4000-8000-000000000000:1:write";
#define FLOOR_LEASE "30000"

/* The compare-and-delete of the Redis docs and redis-py's Lock.
 * KEYS: lock. ARGV: owner. -> 1 deleted. */
static const char bare_cad[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

/* Redisson's RedissonLock.tryLockInnerAsync. KEYS: name. ARGV: lease ms,
 * field. -> nil granted, else the pttl. */
static const char bare_rlock[] =
    "if ((redis.call('exists', KEYS[1]) == 0) or "
    "(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "return redis.call('pttl', KEYS[1]);";

/* Redisson's RedissonLock.unlockInnerAsync. KEYS: name, channel. ARGV:
 * message, lease ms, field. -> 1 released. */
static const char bare_runlock[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; else redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

/* Redisson's RedissonWriteLock.tryLockInnerAsync; KEYS and ARGV as
 * bare_rlock's, the field "<id>:write". */
static const char bare_wlock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "if (mode == 'write') then "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local currentExpire = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); "
    "return nil; end; end; return redis.call('pttl', KEYS[1]);";

/* Redisson's RedissonWriteLock.unlockInnerAsync; as bare_runlock's. */
static const char bare_wunlock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; end; "
    "if (mode == 'write') then "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); "
    "if (lockExists == 0) then return nil; else "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "return 0; else redis.call('hdel', KEYS[1], ARGV[3]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then "
    "redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); "
    "else redis.call('hset', KEYS[1], 'mode', 'read'); end; "
    "return 1; end; end; end; return nil;";

/* One bare cycle's two commands for mode m on keys k (pointing into k,
 * sha and the constants above); false: m has no bare protocol here (fair),
 * and the caller sends dlock's own scripts. sha[0], sha[1]: the take's and
 * give's scripts, loaded by the caller (bare_scripts). */
struct bare {
    const char *take_lua, *give_lua; /* NULL: not a script */
    char sha[2][41];
    struct dlock__rd_cmd take, give;
};

/* By the mode's name: this file names no mode object (the modes' files
 * call it). */
static bool bare_plan(struct bare *b, const struct dlock__rd_mode *m)
{
    const char *name = m->base.name;

    memset(b, 0, sizeof *b);
    if (strcmp(name, "setnx") == 0 || strcmp(name, "redlock") == 0)
        b->give_lua = bare_cad;
    else if (strcmp(name, "hash") == 0) {
        b->take_lua = bare_rlock;
        b->give_lua = bare_runlock;
    } else if (strcmp(name, "rwlock") == 0) {
        b->take_lua = bare_wlock;
        b->give_lua = bare_wunlock;
    } else
        return false;
    return true;
}

static void cmd_set(struct dlock__rd_cmd *c, int argc, const char **argv)
{
    c->argc = argc;
    for (int i = 0; i < argc; i++) {
        c->argv[i] = argv[i];
        c->lens[i] = strlen(argv[i]);
    }
}

/* Lay out b's commands on keys k; eval: EVAL the text (Redlock's nodes)
 * instead of EVALSHA. */
static void bare_cmds(struct bare *b, const struct dlock__rd_keys *k,
                      bool eval)
{
    const char *ev = eval ? "EVAL" : "EVALSHA";
    const char *owner = b->take_lua == bare_wlock ? floor_writer
                                                  : floor_owner;

    if (b->take_lua == NULL) {
        const char *take[] = {"SET", k->lock.p, owner, "NX", "PX",
                              FLOOR_LEASE};
        const char *give[] = {ev, eval ? b->give_lua : b->sha[1], "1",
                              k->lock.p, owner};
        cmd_set(&b->take, 6, take);
        cmd_set(&b->give, 5, give);
    } else {
        const char *take[] = {ev, b->sha[0], "1", k->lock.p, FLOOR_LEASE,
                              owner};
        const char *give[] = {ev,          b->sha[1], "2", k->lock.p,
                              k->channel.p, "0",      FLOOR_LEASE, owner};
        cmd_set(&b->take, 6, take);
        cmd_set(&b->give, 8, give);
    }
    /* Key lengths: a key may hold any byte but NUL, never one here. */
    b->take.lens[b->take_lua == NULL ? 1 : 3] = k->lock.len;
    b->give.lens[3] = k->lock.len;
}

/* SCRIPT LOAD b's scripts on rc, before the clock; 0 or -1. */
static int bare_scripts(struct bare *b, redisContext *rc)
{
    const char *lua[2] = {b->take_lua, b->give_lua};

    for (int i = 0; i < 2; i++) {
        if (lua[i] == NULL)
            continue;
        redisReply *r = dlock__rd_command(rc, "SCRIPT LOAD %s", lua[i]);
        if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40) {
            if (r != NULL)
                freeReplyObject(r);
            return -1;
        }
        memcpy(b->sha[i], r->str, 41);
        freeReplyObject(r);
    }
    return 0;
}

/* Did the take of b grant? SET's OK, or Redisson's nil. */
static bool bare_granted(const struct bare *b, const redisReply *r)
{
    if (r == NULL)
        return false;
    if (b->take_lua == NULL)
        return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    return r->type == REDIS_REPLY_NIL;
}

/* Parse the URI and lay out the name's keys for mode m into a session of
 * the floor's own (no context: nothing is shared with a client). */
static int floor_begin(struct dlock__rd_session *rs,
                       struct dlock__rd_conf *cf,
                       const struct dlock__rd_mode *m,
                       const struct dlock_uri *uri, const char *name,
                       char *err, size_t errlen)
{
    int rc;

    memset(rs, 0, sizeof *rs);
    if ((rc = dlock__rd_conf_parse(cf, uri, m, err, errlen)) !=
        DLOCK_OK)
        return rc;
    rs->m = m;
    rs->cf = cf;
    if (m->keys(&rs->keys, cf, name, strlen(name)) != 0) {
        dlock__rd_conf_free(cf);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

static void floor_end(struct dlock__rd_session *rs, struct dlock__rd_conf *cf)
{
    dlock__rd_keys_free(&rs->keys);
    dlock__rd_conf_free(cf);
}

/* EVALSHA of script `which` of the floor session's mode. */
static void floor_cmd(struct dlock__rd_cmd *c, struct dlock__rd_session *rs,
                      int which)
{
    dlock__rd_cmd_evalsha(c, rs->m->script[which], rs->sha[which], &rs->keys,
                          floor_owner, sizeof floor_owner - 1, FLOOR_LEASE);
}

int dlock__rd_floor_single(const struct dlock__rd_mode *m,
                           const struct dlock_uri *uri, const char *name,
                           uint32_t n, uint64_t *ns_out, char *err,
                           size_t errlen)
{
    struct dlock__rd_session rs;
    struct dlock__rd_conf cf;
    struct dlock__rd_cmd acq, rel;
    struct dlock__rd_addr at;
    struct bare b;
    bool bare;
    int rc, code;

    if ((rc = floor_begin(&rs, &cf, m, uri, name, err, errlen)) != DLOCK_OK)
        return rc;
    /* cluster=1: the one server is the master of the name's slot. */
    if (cf.cluster) {
        if ((rc = dlock__rd_cluster_master(&cf, rs.keys.lock.p,
                                           rs.keys.lock.len, &cf.hosts[0],
                                           err, errlen)) != DLOCK_OK) {
            floor_end(&rs, &cf);
            return rc;
        }
        rs.rc = dlock__rd_connect(&cf, &cf.hosts[0], cf.timeout_ms, m,
                                  rs.sha, NULL, err, errlen, &code);
    } else {
        rs.rc = dlock__rd_connect_master(&cf, m, rs.sha, NULL, &at,
                                         &rs.nreplicas, err, errlen, &code);
    }
    if (rs.rc == NULL) {
        floor_end(&rs, &cf);
        return code;
    }
    bare = bare_plan(&b, m);
    if (bare && bare_scripts(&b, rs.rc) != 0) {
        rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                          "floor: SCRIPT LOAD failed: %s",
                          rs.rc->errstr[0] ? rs.rc->errstr : "refused");
        n = 0;
    }
    bare_cmds(&b, &rs.keys, false);
    floor_cmd(&acq, &rs, RD_SC_ACQUIRE);
    floor_cmd(&rel, &rs, RD_SC_RELEASE);
    for (uint32_t i = 0; i < n; i++) {
        struct dlock__rd_cmd *t = bare ? &b.take : &acq;
        struct dlock__rd_cmd *g = bare ? &b.give : &rel;
        uint64_t t0 = dlock_now_ns();
        redisReply *r =
            dlock__rd_command_argv(rs.rc, t->argc, t->argv, t->lens);
        if (bare ? !bare_granted(&b, r)
                 : (r == NULL || r->type != REDIS_REPLY_ARRAY ||
                    r->element[0]->integer != 1)) {
            rc = dlock_errorf(err, errlen, r == NULL ? DLOCK_ECONNECT
                                                     : DLOCK_ERROR,
                              "floor: acquire failed: %s",
                              r == NULL ? rs.rc->errstr
                              : r->type == REDIS_REPLY_ERROR
                                  ? r->str
                                  : "lock busy");
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        freeReplyObject(r);
        r = dlock__rd_command_argv(rs.rc, g->argc, g->argv, g->lens);
        if (r == NULL) {
            rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                              "floor: release: %s", rs.rc->errstr);
            break;
        }
        freeReplyObject(r);
        ns_out[i] = dlock_now_ns() - t0;
    }
    redisFree(rs.rc);
    floor_end(&rs, &cf);
    return rc;
}

int dlock__rd_floor_nodes(const struct dlock__rd_mode *m,
                          const struct dlock_uri *uri, const char *name,
                          uint32_t n, uint64_t *ns_out, char *err,
                          size_t errlen)
{
    struct dlock__rd_session rs;
    struct dlock__rd_conf cf;
    struct bare b;
    int rc;

    if ((rc = floor_begin(&rs, &cf, m, uri, name, err, errlen)) != DLOCK_OK)
        return rc;
    if ((rc = dlock__rd_nodes_open(&rs, err, errlen)) != DLOCK_OK) {
        floor_end(&rs, &cf);
        return rc;
    }
    /* Redlock: SET NX PX on every node, then EVAL of compare-and-delete. */
    bare_plan(&b, m);
    bare_cmds(&b, &rs.keys, true);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        int got = dlock__rd_round(&rs, &b.take, 1,
                                  t0 + cf.node_timeout_ms * 1000000ull);
        size_t granted = 0;
        for (size_t j = 0; got > 0 && j < rs.nnodes; j++)
            if (rs.nodes[j].got == 1 &&
                bare_granted(&b, rs.nodes[j].rep[0]))
                granted++;
        dlock__rd_round_free(&rs);
        if (granted < rs.quorum) {
            rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                              "floor: %zu nodes granted, %zu needed",
                              granted, rs.quorum);
            break;
        }
        dlock__rd_round(&rs, &b.give, 1,
                        dlock_now_ns() + cf.node_timeout_ms * 1000000ull);
        dlock__rd_round_free(&rs);
        ns_out[i] = dlock_now_ns() - t0;
    }
    dlock__rd_nodes_close(&rs);
    floor_end(&rs, &cf);
    return rc;
}

/* ---- the contended floor and the server's CPU ------------------------------------- */

/*
 * Redis has no request that waits for a lock, so the bare contended lock
 * is the one every Redis client library without pub/sub runs: SET NX PX in
 * a loop with no pause between refusals (spinning), released by the
 * compare-and-delete script. Each process has its own owner id. The same
 * for every single-server mode, on the mode's lock key of the name: it is
 * the floor dlock's hand-offs are judged against (queue's aim is its owner
 * changes per second with its waiters idle).
 */
int dlock__rd_floor_wait(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen)
{
    const struct dlock__rd_mode *m = (const struct dlock__rd_mode *)mode;
    struct dlock__rd_session rs;
    struct dlock__rd_conf cf;
    struct dlock__rd_addr at;
    char owner[64];
    const char *take[6], *give[5];
    size_t tl[6], gl[5];
    struct bare b;
    int64_t since;
    int rc, code;

    if ((rc = floor_begin(&rs, &cf, m, uri, name, err, errlen)) != DLOCK_OK)
        return rc;
    if (cf.cluster &&
        (rc = dlock__rd_cluster_master(&cf, rs.keys.lock.p, rs.keys.lock.len,
                                       &cf.hosts[0], err, errlen)) !=
            DLOCK_OK) {
        floor_end(&rs, &cf);
        return rc;
    }
    rs.rc = cf.cluster ? dlock__rd_connect(&cf, &cf.hosts[0], cf.timeout_ms,
                                           NULL, NULL, NULL, err, errlen,
                                           &code)
                       : dlock__rd_connect_master(&cf, NULL, NULL, NULL, &at,
                                                  &rs.nreplicas, err, errlen,
                                                  &code);
    if (rs.rc == NULL) {
        floor_end(&rs, &cf);
        return code;
    }
    memset(&b, 0, sizeof b);
    b.give_lua = bare_cad;
    if (bare_scripts(&b, rs.rc) != 0) {
        rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                          "floor_wait: SCRIPT LOAD failed: %s",
                          rs.rc->errstr[0] ? rs.rc->errstr : "refused");
        goto out;
    }
    snprintf(owner, sizeof owner, "floor-%ld", (long)getpid());
    take[0] = "SET", take[1] = rs.keys.lock.p, take[2] = owner;
    take[3] = "NX", take[4] = "PX", take[5] = FLOOR_LEASE;
    give[0] = "EVALSHA", give[1] = b.sha[1], give[2] = "1";
    give[3] = rs.keys.lock.p, give[4] = owner;
    for (int i = 0; i < 6; i++)
        tl[i] = strlen(take[i]);
    for (int i = 0; i < 5; i++)
        gl[i] = strlen(give[i]);
    tl[1] = gl[3] = rs.keys.lock.len;
    since = dlock_now_ms();
    for (;;) {
        redisReply *r = dlock__rd_command_argv(rs.rc, 6, take, tl);
        bool held = r != NULL && r->type == REDIS_REPLY_STATUS &&
                    strcmp(r->str, "OK") == 0;
        bool more;

        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            rc = dlock_errorf(err, errlen,
                              r == NULL ? DLOCK_ECONNECT : DLOCK_ERROR,
                              "floor_wait: SET: %s",
                              r == NULL ? rs.rc->errstr : r->str);
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        freeReplyObject(r);
        if (!held && dlock_now_ms() - since < (int64_t)wait_ms)
            continue; /* spin */
        more = go_on(arg, held) != 0;
        since = dlock_now_ms();
        if (held) {
            if ((r = dlock__rd_command_argv(rs.rc, 5, give, gl)) == NULL) {
                rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                                  "floor_wait: release: %s", rs.rc->errstr);
                break;
            }
            freeReplyObject(r);
        }
        if (!more)
            break;
    }
out:
    redisFree(rs.rc);
    floor_end(&rs, &cf);
    return rc;
}

/* INFO cpu's used_cpu_sys and used_cpu_user (seconds, to the µs) of the
 * one server; not with cluster=1 (many servers). */
int dlock__rd_server_cpu(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, uint64_t *ns_out,
                         char *err, size_t errlen)
{
    const struct dlock__rd_mode *m = (const struct dlock__rd_mode *)mode;
    static const char *const field[] = {"used_cpu_sys:", "used_cpu_user:"};
    struct dlock__rd_session rs;
    struct dlock__rd_conf cf;
    struct dlock__rd_addr at;
    redisReply *r;
    double s = 0;
    int rc, code;

    if ((rc = floor_begin(&rs, &cf, m, uri, "-", err, errlen)) != DLOCK_OK)
        return rc;
    if (cf.cluster) {
        floor_end(&rs, &cf);
        return dlock_errorf(err, errlen, DLOCK_EUNSUPPORTED,
                            "server_cpu: cluster=1 has many servers");
    }
    rs.rc = dlock__rd_connect_master(&cf, NULL, NULL, NULL, &at,
                                     &rs.nreplicas, err, errlen, &code);
    if (rs.rc == NULL) {
        floor_end(&rs, &cf);
        return code;
    }
    r = dlock__rd_command(rs.rc, "INFO cpu");
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        rc = dlock_errorf(err, errlen, r == NULL ? DLOCK_ECONNECT : DLOCK_ERROR,
                          "server_cpu: INFO cpu: %s",
                          r == NULL ? rs.rc->errstr
                          : r->type == REDIS_REPLY_ERROR ? r->str
                                                          : "no text");
    for (int i = 0; rc == DLOCK_OK && i < 2; i++) {
        const char *at_f = strstr(r->str, field[i]);
        if (at_f == NULL)
            rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                              "server_cpu: INFO cpu has no %s", field[i]);
        else
            s += strtod(at_f + strlen(field[i]), NULL);
    }
    if (r != NULL)
        freeReplyObject(r);
    if (rc == DLOCK_OK)
        *ns_out = (uint64_t)(s * 1e9 + 0.5);
    redisFree(rs.rc);
    floor_end(&rs, &cf);
    return rc;
}

/* ---- forget: the bench's clean-up ------------------------------------------------ */

/* UNLINK lock, fence, queue, timeouts of keys k (those laid out). */
static void forget_cmd(struct dlock__rd_cmd *c, const struct dlock__rd_keys *k)
{
    const struct dlock__rd_buf *b[] = {&k->lock, &k->fence, &k->queue,
                                       &k->timeouts};

    c->argc = 0;
    c->argv[c->argc] = "UNLINK";
    c->lens[c->argc++] = 6;
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        if (b[i]->p != NULL && b[i]->len > 0) {
            c->argv[c->argc] = b[i]->p;
            c->lens[c->argc++] = b[i]->len;
        }
}

/* Send c to the one server of rs (rc) or to every node; 0 when every
 * one answered. */
static int forget_send(struct dlock__rd_session *rs, redisContext *rc,
                       struct dlock__rd_cmd *c, char *err, size_t errlen)
{
    redisReply *r;
    int code;

    if (rc == NULL) {
        int got = dlock__rd_round(rs, c, 1,
                                  dlock_now_ns() +
                                      rs->cf->node_timeout_ms * 1000000ull);
        dlock__rd_round_free(rs);
        return got == (int)rs->nnodes
                   ? DLOCK_OK
                   : dlock_errorf(err, errlen, DLOCK_ECONNECT,
                                  "forget: a node did not answer");
    }
    r = dlock__rd_command_argv(rc, c->argc, c->argv, c->lens);
    code = r != NULL && r->type == REDIS_REPLY_INTEGER
               ? DLOCK_OK
               : dlock_errorf(err, errlen,
                              r == NULL ? DLOCK_ECONNECT : DLOCK_ERROR,
                              "forget: UNLINK: %s",
                              r == NULL ? rc->errstr : r->str);
    if (r != NULL)
        freeReplyObject(r);
    return code;
}

/* One connection (Redlock: the nodes), then each name's keys in turn;
 * with cluster=1 a connection to each name's slot master. */
int dlock__rd_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen)
{
    /* Every mode of this backend is the base of a struct dlock__rd_mode. */
    const struct dlock__rd_mode *m = (const struct dlock__rd_mode *)mode;
    struct dlock__rd_session rs;
    struct dlock__rd_conf cf;
    struct dlock__rd_cmd c;
    struct dlock__rd_addr at;
    redisContext *rc = NULL;
    int code = DLOCK_OK, nreplicas;

    if ((code = floor_begin(&rs, &cf, m, uri, names[0], err, errlen)) !=
        DLOCK_OK)
        return code;
    if (m->nodes)
        code = dlock__rd_nodes_open(&rs, err, errlen);
    else if (!cf.cluster)
        rc = dlock__rd_connect_master(&cf, m, NULL, NULL, &at, &nreplicas,
                                      err, errlen, &code);
    /* The connect's code is its failure's only (set before it tries). */
    if (!m->nodes && !cf.cluster && rc != NULL)
        code = DLOCK_OK;
    for (size_t i = 0; i < n && code == DLOCK_OK; i++) {
        if (i > 0 && m->keys(&rs.keys, &cf, names[i], strlen(names[i])) != 0) {
            code = dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
            break;
        }
        forget_cmd(&c, &rs.keys);
        if (cf.cluster) {
            if ((code = dlock__rd_cluster_master(&cf, rs.keys.lock.p,
                                                 rs.keys.lock.len,
                                                 &cf.hosts[0], err,
                                                 errlen)) != DLOCK_OK ||
                (rc = dlock__rd_connect(&cf, &cf.hosts[0], cf.timeout_ms, m,
                                        NULL, NULL, err, errlen, &code)) ==
                    NULL)
                break;
            code = DLOCK_OK;
            code = forget_send(&rs, rc, &c, err, errlen);
            redisFree(rc);
            rc = NULL;
        } else {
            code = forget_send(&rs, rc, &c, err, errlen);
        }
    }
    if (m->nodes)
        dlock__rd_nodes_close(&rs);
    if (rc != NULL)
        redisFree(rc);
    floor_end(&rs, &cf);
    return code;
}
