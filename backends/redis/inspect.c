/*
 * inspect.c: describing a name without taking it (`dlock inspect`), on one
 * server (setnx, hash: the holder read by the mode's command, the TTL and
 * the fencing counter in one round trip) and on Redlock's nodes (held when
 * a majority holds it, -1 when some but not a majority do; no fence);
 * fair counts its waiters with LLEN of its queue; hash describes a
 * semaphore's permits when the name holds one. The
 * keys are the mode's; rounds are rounds.c's. Core has preset every field
 * to "unknown" before the call.
 */
#include <stdlib.h>
#include <string.h>

#include "rd.h"

static void copy_owner(dlock_state *out, const char *s, size_t len)
{
    if (len >= sizeof out->owner)
        len = sizeof out->owner - 1;
    memcpy(out->owner, s, len);
    out->owner[len] = '\0';
}

/*
 * hash: a semaphore's name (a string where a lock is a hash): held when
 * no permit is free (a new one would wait), owner "K of N permits held:
 * <owner>, <owner>..." (as many as fit; "" when none is held; Redisson's
 * ids are raw bytes), remaining the first lease to
 * end (when a permit comes back unannounced). Expired holders are left
 * to the next script to reclaim and are not counted. One round trip:
 * the set, the free count and the server's clock.
 */
static int inspect_permits(struct dlock__rd_session *rs, const char *name,
                           size_t len, dlock_state *out)
{
    struct dlock__rd_keys *k = &rs->keys;
    redisReply *r[3] = {NULL, NULL, NULL};
    int code = DLOCK_OK;
    long long now, free_, live = 0, first = -1;
    size_t at;

    k->kind = "p";
    if (rs->m->keys(k, rs->cf, name, len) != 0)
        return dlock_session_error(&rs->base, DLOCK_ENOMEM, "out of memory");
    redisAppendCommand(rs->rc, "ZRANGE %b 0 -1 WITHSCORES", k->timeouts.p,
                       k->timeouts.len);
    redisAppendCommand(rs->rc, "GET %b", k->lock.p, k->lock.len);
    redisAppendCommand(rs->rc, "TIME");
    for (int i = 0; i < 3; i++)
        if (dlock__rd_get_reply(rs->rc, &r[i]) != REDIS_OK || r[i] == NULL) {
            code = dlock__rd_io_error(rs, DLOCK_ECONNECT, "inspect");
            goto done;
        }
    if (r[0]->type != REDIS_REPLY_ARRAY || r[1]->type != REDIS_REPLY_STRING ||
        r[2]->type != REDIS_REPLY_ARRAY || r[2]->elements != 2) {
        code = dlock__rd_reply_error(rs, r[0]->type == REDIS_REPLY_ERROR
                                             ? r[0]
                                             : r[1]);
        goto done;
    }
    now = atoll(r[2]->element[0]->str) * 1000 +
          atoll(r[2]->element[1]->str) / 1000;
    free_ = atoll(r[1]->str);
    for (size_t i = 0; i + 1 < r[0]->elements; i += 2) {
        long long end = atoll(r[0]->element[i + 1]->str);
        if (end <= now)
            free_++; /* a lapsed lease: its permit is free */
        else if (live++, first < 0)
            first = end - now;
    }
    at = live == 0 ? sizeof out->owner /* free: no owner */
                   : (size_t)snprintf(out->owner, sizeof out->owner,
                                      "%lld of %lld permits held", live,
                                      live + free_);
    for (size_t i = 0, n = 0; i + 1 < r[0]->elements && at + 1 <
                                  sizeof out->owner; i += 2) {
        const redisReply *m = r[0]->element[i];
        if (atoll(r[0]->element[i + 1]->str) <= now)
            continue;
        at += (size_t)snprintf(out->owner + at, sizeof out->owner - at,
                               "%s%.*s", n++ ? ", " : ": ", (int)m->len,
                               m->str);
    }
    out->held = free_ <= 0;
    out->remaining_ms = first;
done:
    for (int i = 0; i < 3; i++)
        if (r[i] != NULL)
            freeReplyObject(r[i]);
    return code;
}

int dlock__rd_inspect_single(struct dlock_session *s, const char *name,
                             size_t len, dlock_state *out)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    const struct dlock__rd_buf *lk = &rs->keys.lock;
    redisReply *r[4] = {NULL, NULL, NULL, NULL};
    int code = DLOCK_OK, n = 3;

    dlock__rd_log_note(rs);
    rs->keys.kind = NULL; /* a lock's keys (a permit's share lock, fence) */
    if (rs->m->keys(&rs->keys, rs->cf, name, len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    if (rs->cl != NULL &&
        (code = dlock__rd_cluster_route(rs, lk->p, lk->len)) != DLOCK_OK)
        return code;
    redisAppendCommand(rs->rc, "%s %b", rs->m->inspect_read, lk->p, lk->len);
    redisAppendCommand(rs->rc, "PTTL %b", lk->p, lk->len);
    redisAppendCommand(rs->rc, "GET %b", rs->keys.fence.p,
                       rs->keys.fence.len);
    if (rs->m->queue || rs->m->handoff) { /* the queue's length */
        redisAppendCommand(rs->rc, "LLEN %b", rs->keys.queue.p,
                           rs->keys.queue.len);
        n = 4;
    }
    for (int i = 0; i < n; i++)
        if (dlock__rd_get_reply(rs->rc, &r[i]) != REDIS_OK ||
            r[i] == NULL) {
            code = dlock__rd_io_error(rs, DLOCK_ECONNECT, "inspect");
            goto done;
        }
    out->held = 0;
    if (r[0]->type == REDIS_REPLY_STRING) {
        out->held = 1;
        copy_owner(out, r[0]->str, r[0]->len);
    } else if (r[0]->type == REDIS_REPLY_ARRAY && r[0]->elements >= 2) {
        /* A hash's first holder field. rwlock's "mode" field is not one,
         * and its writer's field is "<owner>:write". */
        for (size_t i = 0; i + 1 < r[0]->elements; i += 2) {
            const redisReply *f = r[0]->element[i];
            const char *sfx = rs->m->holder_suffix;
            size_t flen = f->len, sn = sfx != NULL ? strlen(sfx) : 0;
            if (f->type != REDIS_REPLY_STRING ||
                (flen == 4 && memcmp(f->str, "mode", 4) == 0))
                continue;
            if (sn > 0 && flen > sn &&
                memcmp(f->str + flen - sn, sfx, sn) == 0)
                flen -= sn;
            out->held = 1;
            copy_owner(out, f->str, flen);
            break;
        }
    } else if (r[0]->type == REDIS_REPLY_ERROR &&
               rs->m->script[RD_SC_P_ACQUIRE] != NULL &&
               strncmp(r[0]->str, "WRONGTYPE", 9) == 0) {
        /* hash: not a lock but a semaphore's count */
        code = inspect_permits(rs, name, len, out);
        if (code != DLOCK_OK)
            goto done;
    } else if (r[0]->type == REDIS_REPLY_ERROR) {
        code = dlock__rd_reply_error(rs, r[0]);
        goto done;
    }
    if (r[1]->type == REDIS_REPLY_INTEGER && r[1]->integer >= 0 &&
        out->remaining_ms < 0)
        out->remaining_ms = r[1]->integer;
    if (r[2]->type == REDIS_REPLY_STRING)
        out->fence = strtoull(r[2]->str, NULL, 10);
    /* setnx, hash: PUBSUB NUMSUB would count clients, not waiters */
    out->waiters = n == 4 && r[3]->type == REDIS_REPLY_INTEGER
                       ? (int)r[3]->integer
                       : -1;
done:
    for (int i = 0; i < n; i++)
        if (r[i] != NULL)
            freeReplyObject(r[i]);
    return code;
}

int dlock__rd_inspect_nodes(struct dlock_session *s, const char *name,
                            size_t len, dlock_state *out)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_cmd c[2];
    size_t held = 0, answered = 0;
    long long min_ttl = -1;
    char why[360];

    dlock__rd_log_note(rs);
    if (rs->m->keys(&rs->keys, rs->cf, name, len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    dlock__rd_reconnect(rs, false);
    c[0].argc = 2, c[0].argv[0] = "GET", c[0].lens[0] = 3;
    c[0].argv[1] = rs->keys.lock.p, c[0].lens[1] = rs->keys.lock.len;
    c[1] = c[0];
    c[1].argv[0] = "PTTL", c[1].lens[0] = 4;
    dlock__rd_round(rs, c, 2,
                    dlock_now_ns() +
                        (uint64_t)rs->cf->node_timeout_ms * 1000000u);
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        if (nd->got != 2)
            continue;
        answered++;
        if (nd->rep[0]->type == REDIS_REPLY_STRING) {
            held++;
            if (out->owner[0] == '\0')
                copy_owner(out, nd->rep[0]->str, nd->rep[0]->len);
            if (nd->rep[1]->type == REDIS_REPLY_INTEGER &&
                nd->rep[1]->integer >= 0 &&
                (min_ttl < 0 || nd->rep[1]->integer < min_ttl))
                min_ttl = nd->rep[1]->integer;
        }
    }
    dlock__rd_round_free(rs);
    if (answered < rs->quorum)
        return dlock_session_error(s, DLOCK_ECONNECT,
                                   "%zu of %zu nodes answered%s", answered,
                                   rs->nnodes,
                                   dlock__rd_nodes_why(rs, why, sizeof why));
    out->held = held >= rs->quorum ? 1 : held == 0 ? 0 : -1;
    if (out->held != 1)
        out->owner[0] = '\0';
    out->remaining_ms = out->held == 1 ? min_ttl : -1;
    out->fence = 0;
    return DLOCK_OK;
}
