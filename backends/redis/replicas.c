/*
 * replicas.c: replicated acquisition (sync_replicas=N|majority,
 * sync_timeout=), for setnx and hash on one master. Each acquire, renewal
 * and release script is followed on the same connection, in the same
 * round trip, by WAIT n sync_timeout: the master answers how many replicas
 * have confirmed every write of this connection so far. Fewer than asked
 * and single.c releases the lock (owner-checked) and the call fails with
 * DLOCK_EREPLICAS, saying how many confirmed in how long.
 *
 * "majority" is floor(k/2) + 1 of the k replicas the master's ROLE listed
 * when the connection was made (at least 1): counted per connection, so a
 * replica that joins later raises it only for new connections, one that
 * leaves makes it harder to reach (the safe side).
 *
 * WAIT is best effort: the replicas that confirmed need not be the one a
 * failover promotes, and a confirmed write can still be lost to a replica
 * restarted without persistence. Fencing tokens are the real answer
 * (docs/tradeoffs.md).
 */
#include <stdio.h>
#include <string.h>

#include "rd.h"

int dlock__rd_sync_want(const struct dlock__rd_session *rs)
{
    int k = rs->nreplicas;

    if (rs->cf->sync_replicas != RD_SYNC_MAJORITY)
        return rs->cf->sync_replicas;
    return k / 2 + 1;
}

int dlock__rd_wait_append(struct dlock__rd_session *rs)
{
    char n[16], t[16];

    snprintf(n, sizeof n, "%d", dlock__rd_sync_want(rs));
    snprintf(t, sizeof t, "%u", rs->cf->sync_timeout_ms);
    return redisAppendCommand(rs->rc, "WAIT %s %s", n, t) == REDIS_OK
               ? DLOCK_OK
               : dlock_session_error(&rs->base, DLOCK_ENOMEM,
                                     "out of memory");
}

int dlock__rd_wait_read(struct dlock__rd_session *rs, long long *acks,
                        const char *op)
{
    redisReply *r = NULL;
    int code = DLOCK_OK;

    if (dlock__rd_get_reply(rs->rc, &r) != REDIS_OK || r == NULL)
        return dlock__rd_io_error(rs, DLOCK_ECONNECT, op);
    if (r->type == REDIS_REPLY_INTEGER)
        *acks = r->integer;
    else
        code = dlock__rd_reply_error(rs, r);
    freeReplyObject(r);
    return code;
}

redisReply *dlock__rd_run_sync(struct dlock__rd_session *rs, int which,
                               const char *owner, size_t owner_len,
                               const char *lease, long long *acks,
                               int *code)
{
    /* a permit's script when rs->keys are laid out for one */
    const struct dlock__rd_script *sc =
        rs->m->script[which = dlock__rd_script_of(&rs->keys, which)];
    struct dlock__rd_cmd c;
    redisReply *r = NULL;

    *code = DLOCK_OK;
    *acks = -1;
    if (rs->cf->sync_replicas == 0)
        return dlock__rd_run(rs, which, owner, owner_len, lease);
    dlock__rd_cmd_evalsha(&c, sc, rs->sha[which], &rs->keys, owner,
                          owner_len, lease);
    for (int pass = 0; pass < 2; pass++) {
        if (redisAppendCommandArgv(rs->rc, c.argc, c.argv, c.lens) !=
                REDIS_OK ||
            (*code = dlock__rd_wait_append(rs)) != DLOCK_OK) {
            *code = DLOCK_ENOMEM;
            return NULL;
        }
        if (dlock__rd_get_reply(rs->rc, &r) != REDIS_OK || r == NULL)
            return NULL;
        if ((*code = dlock__rd_wait_read(rs, acks, "WAIT")) != DLOCK_OK) {
            freeReplyObject(r);
            return NULL;
        }
        if (!dlock__rd_noscript(r))
            return r;
        /* The server forgot the script: once more by EVAL of its text. */
        freeReplyObject(r);
        r = NULL;
        c.argv[0] = "EVAL";
        c.lens[0] = 4;
        c.argv[1] = sc->lua;
        c.lens[1] = strlen(sc->lua);
    }
    return NULL;
}

int dlock__rd_sync_short(struct dlock__rd_session *rs, long long acks,
                         uint64_t took_ns, const char *what)
{
    int want = dlock__rd_sync_want(rs);
    char asked[48];

    if (rs->cf->sync_replicas == RD_SYNC_MAJORITY)
        snprintf(asked, sizeof asked, "majority of %d", rs->nreplicas);
    else
        snprintf(asked, sizeof asked, "%d", want);
    return dlock_session_error(
        &rs->base, DLOCK_EREPLICAS,
        "%s: %lld of %d replica%s confirmed within %llu ms "
        "(sync_replicas=%s, sync_timeout %u ms)",
        what, acks < 0 ? 0 : acks, want, want == 1 ? "" : "s",
        (unsigned long long)(took_ns / 1000000u), asked,
        rs->cf->sync_timeout_ms);
}
