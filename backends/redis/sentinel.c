/*
 * sentinel.c: a master found through Redis Sentinel (its URI parameter,
 * sentinel=, is read by conf.c).
 *
 *   redis://s1:p1,s2:p2,...?sentinel=MASTERNAME
 *
 * The hosts are sentinels (port 26379 when none is given). Every new
 * connection of a session or of the pub/sub thread asks them in turn,
 * within timeout=, for the master's address (SENTINEL
 * get-master-addr-by-name), connects to it with the URI's credentials and
 * checks with ROLE that it is a master: during a failover a sentinel may
 * still name a demoted master, which is now a replica, and a write there
 * would fail (READONLY). A replica is refused and the sentinels are asked
 * again, a bounded number of rounds.
 *
 * Following a failover needs nothing more. The old master's connections
 * end (it died, or the sentinels reconfigure it with CLIENT KILL when it
 * comes back), core's connection watch [B-WATCH-1] puts every lock of the
 * client in doubt and renews them at once, on new connections that this
 * file points at the new master: a lock the new master has (it had reached
 * a replica) is held again, one it lacks is reported lost. A READONLY
 * answer (a master demoted behind a live connection) breaks the session the
 * same way (single.c). This is what a restart without persistence does
 * today; docs/backends/redis.md says what it costs.
 *
 * Divisions: asking the sentinels; connecting to the master.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rd.h"

/* Rounds over all sentinels before giving up: a failover in progress can
 * leave them naming a replica for a moment. */
#define SENTINEL_ROUNDS 3

/* ---- asking the sentinels -------------------------------------------------- */

/* Ask sentinel s for the master's address: DLOCK_OK and *out, or a code
 * with why. Sentinels get no AUTH or SELECT: the URI's credentials are the
 * data nodes'. */
static int ask_sentinel(const struct dlock__rd_conf *cf,
                        const struct dlock__rd_addr *s, uint32_t timeout_ms,
                        struct dlock__rd_addr *out, char *why, size_t cap)
{
    struct dlock__rd_conf bare;
    redisContext *rc;
    redisReply *r;
    int code;

    memset(&bare, 0, sizeof bare);
    rc = dlock__rd_connect(&bare, s, timeout_ms, NULL, NULL, NULL, why, cap,
                           &code);
    if (rc == NULL)
        return code;
    r = redisCommand(rc, "SENTINEL get-master-addr-by-name %s", cf->sentinel);
    code = DLOCK_ERROR;
    if (r == NULL) {
        snprintf(why, cap, "sentinel %s:%d: %s", s->host, s->port,
                 rc->errstr[0] != '\0' ? rc->errstr : "no answer");
        code = DLOCK_ECONNECT;
    } else if (r->type == REDIS_REPLY_NIL) {
        snprintf(why, cap, "sentinel %s:%d knows no master named '%s'",
                 s->host, s->port, cf->sentinel);
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, cap, "sentinel %s:%d: %s", s->host, s->port, r->str);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               r->element[0]->type != REDIS_REPLY_STRING ||
               r->element[1]->type != REDIS_REPLY_STRING ||
               r->element[0]->len >= sizeof out->host) {
        snprintf(why, cap, "sentinel %s:%d: unexpected answer", s->host,
                 s->port);
    } else {
        snprintf(out->host, sizeof out->host, "%s", r->element[0]->str);
        out->port = atoi(r->element[1]->str);
        code = DLOCK_OK;
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(rc);
    return code;
}

/* ROLE of a new connection: 1 master (*nreplicas: the replicas it lists),
 * 0 anything else (role in why), -1 the connection failed. */
static int ask_role(redisContext *rc, int *nreplicas, char *why, size_t cap)
{
    redisReply *r = redisCommand(rc, "ROLE");
    int res = 0;

    if (r == NULL) {
        snprintf(why, cap, "ROLE: %s",
                 rc->errstr[0] != '\0' ? rc->errstr : "no answer");
        return -1;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        if (strcmp(r->element[0]->str, "master") == 0) {
            res = 1;
            *nreplicas = r->elements >= 3 &&
                                 r->element[2]->type == REDIS_REPLY_ARRAY
                             ? (int)r->element[2]->elements
                             : 0;
        } else {
            snprintf(why, cap, "it is a %s", r->element[0]->str);
        }
    } else {
        snprintf(why, cap, "ROLE: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    freeReplyObject(r);
    return res;
}

/* ---- connecting to the master ---------------------------------------------- */

redisContext *dlock__rd_connect_master(const struct dlock__rd_conf *cf,
                                       const struct dlock__rd_mode *m,
                                       dlock__rd_sha *sha,
                                       struct dlock__rd_info *info,
                                       struct dlock__rd_addr *at,
                                       int *nreplicas, char *err,
                                       size_t errlen, int *code)
{
    int64_t start = dlock_now_ms(), deadline = start + cf->timeout_ms;
    bool majority = cf->sync_replicas == RD_SYNC_MAJORITY;
    char why[320] = "";
    int last = DLOCK_ECONNECT;

    *nreplicas = 0;
    if (cf->sentinel[0] == '\0') {
        redisContext *rc;
        *at = cf->hosts[0];
        rc = dlock__rd_connect(cf, &cf->hosts[0], cf->timeout_ms, m, sha,
                               info, err, errlen, code);
        /* A plain URI is taken at its word; ROLE only counts replicas. */
        if (rc != NULL && majority &&
            ask_role(rc, nreplicas, why, sizeof why) < 0) {
            redisFree(rc);
            *code = DLOCK_ECONNECT;
            dlock_errorf(err, errlen, DLOCK_ECONNECT, "%s:%d: %s",
                         at->host, at->port, why);
            return NULL;
        }
        return rc;
    }
    for (int round = 0; round < SENTINEL_ROUNDS; round++) {
        bool all_unknown = true;
        for (size_t i = 0; i < cf->nhosts; i++) {
            int64_t left = deadline - dlock_now_ms();
            redisContext *rc;
            int c, role;
            if (left <= 0)
                goto out;
            c = ask_sentinel(cf, &cf->hosts[i], (uint32_t)left, at, why,
                             sizeof why);
            if (c != DLOCK_ERROR || strstr(why, "knows no master") == NULL)
                all_unknown = false;
            if (c != DLOCK_OK) {
                last = DLOCK_ECONNECT;
                continue;
            }
            left = deadline - dlock_now_ms();
            if (left <= 0)
                goto out;
            rc = dlock__rd_connect(cf, at, (uint32_t)left, m, sha, info, err,
                                   errlen, &c);
            if (rc == NULL) {
                if (c != DLOCK_ECONNECT) {
                    *code = c; /* refused credentials: no other answer */
                    return NULL;
                }
                snprintf(why, sizeof why, "the master the sentinels name: %s",
                         err);
                last = c;
                continue;
            }
            role = ask_role(rc, nreplicas, why,
                            sizeof why);
            if (role == 1)
                return rc;
            redisFree(rc);
            if (role == 0) {
                char tmp[96];
                snprintf(tmp, sizeof tmp, "%s", why);
                snprintf(why, sizeof why,
                         "sentinel %s:%d names %s:%d, but %s (a failover "
                         "is under way)",
                         cf->hosts[i].host, cf->hosts[i].port, at->host,
                         at->port, tmp);
            }
            last = DLOCK_ECONNECT;
        }
        if (all_unknown) {
            *code = DLOCK_EINVAL;
            dlock_errorf(err, errlen, DLOCK_EINVAL,
                         "sentinel: no sentinel knows a master named '%s' "
                         "(%s)",
                         cf->sentinel, why);
            return NULL;
        }
        if (deadline - dlock_now_ms() > 100) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
out:
    *code = last;
    dlock_errorf(err, errlen, last,
                 "sentinel=%s: no master reached through %zu sentinel%s "
                 "in %lld ms: %s",
                 cf->sentinel, cf->nhosts, cf->nhosts == 1 ? "" : "s",
                 (long long)(dlock_now_ms() - start),
                 why[0] != '\0' ? why : "no time left");
    return NULL;
}
