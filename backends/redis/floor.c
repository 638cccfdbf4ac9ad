/*
 * floor.c: the raw floor of `dlock bench` (the floor slot of each mode;
 * bench-only): n cycles of the mode's acquire script then release script,
 * sent by EVALSHA with bare hiredis calls (scripts loaded first), no dlock
 * core: the cost of the protocol itself. Redlock's floor runs the same
 * parallel rounds over all nodes (rounds.c). The mode files hand their
 * mode object in; nothing else calls this file.
 */
#include <string.h>

#include "rd.h"

/* Owner id and lease of every floor cycle. */
static const char floor_owner[] = "00000000-0000-4000-8000-000000000000:1";
#define FLOOR_LEASE "30000"

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
    floor_cmd(&acq, &rs, RD_SC_ACQUIRE);
    floor_cmd(&rel, &rs, RD_SC_RELEASE);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        redisReply *r =
            dlock__rd_command_argv(rs.rc, acq.argc, acq.argv, acq.lens);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
            r->element[0]->integer != 1) {
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
        r = dlock__rd_command_argv(rs.rc, rel.argc, rel.argv, rel.lens);
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
    struct dlock__rd_cmd acq, rel;
    int rc;

    if ((rc = floor_begin(&rs, &cf, m, uri, name, err, errlen)) != DLOCK_OK)
        return rc;
    if ((rc = dlock__rd_nodes_open(&rs, err, errlen)) != DLOCK_OK) {
        floor_end(&rs, &cf);
        return rc;
    }
    floor_cmd(&acq, &rs, RD_SC_ACQUIRE);
    floor_cmd(&rel, &rs, RD_SC_RELEASE);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        int got = dlock__rd_round(&rs, &acq, 1,
                                  t0 + cf.node_timeout_ms * 1000000ull);
        dlock__rd_round_free(&rs);
        if (got < (int)rs.quorum) {
            rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                              "floor: %d nodes answered", got);
            break;
        }
        dlock__rd_round(&rs, &rel, 1,
                        dlock_now_ns() + cf.node_timeout_ms * 1000000ull);
        dlock__rd_round_free(&rs);
        ns_out[i] = dlock_now_ns() - t0;
    }
    dlock__rd_nodes_close(&rs);
    floor_end(&rs, &cf);
    return rc;
}
