/*
 * conf.c: the URI of a redis:// or redlock:// client read into struct
 * dlock__rd_conf, once per client (and once per floor run). Which mode the
 * URI asks for is decided before, by core and redis.c's pick_mode(); this
 * file reads from the mode only whether it runs on Redlock's N nodes and
 * whether it queues waiters (fair), and checks hosts, /db, user and
 * password, timeout=, Redlock's node_timeout=, drift= and restart_delay=,
 * the replicas' sentinel=, sync_replicas= and sync_timeout=, and fair's
 * wait_time= and clock=. Every message names its part.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rd.h"

/* restart_delay's upper bound: a day, far past any sane lease. */
#define RESTART_DELAY_MAX_MS (24u * 3600u * 1000u)
/* wait_time: Redisson's threadWaitTime default (5 minutes), and bounds:
 * a waiter refreshes its place every third of it, so it must be long
 * against a round trip, and a day is past any sane wait. */
#define WAIT_TIME_DEFAULT_MS (5u * 60u * 1000u)
#define WAIT_TIME_MIN_MS 100u
#define WAIT_TIME_MAX_MS (24u * 3600u * 1000u)
/* Sentinels' port when a host of a sentinel= URI has none. */
#define SENTINEL_DEFAULT_PORT 26379

void dlock__rd_conf_free(struct dlock__rd_conf *cf)
{
    free(cf->user);
    free(cf->password);
    free(cf->raw_ns);
    cf->user = cf->password = cf->raw_ns = NULL;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* /db: a database number (SELECT), not with Redlock's N nodes. */
static int conf_db(struct dlock__rd_conf *cf, const struct dlock_uri *u,
                   char *err, size_t errlen)
{
    const char *p = u->path + 1;
    unsigned long db = 0;

    if (u->path[0] == '\0' || strcmp(u->path, "/") == 0)
        return DLOCK_OK;
    if (*p == '\0' || strlen(p) > 5)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "db: expected /N with N a database number "
                            "0..65535, got '%.40s'",
                            u->path);
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "db: expected /N with N a database "
                                "number 0..65535, got '%.40s'",
                                u->path);
        db = db * 10 + (unsigned long)(*p - '0');
    }
    if (db > 65535)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "db: %lu is above 65535", db);
    cf->db = (unsigned int)db;
    return DLOCK_OK;
}

/* Redlock's own parameters: node_timeout=, drift=, restart_delay=. */
static int conf_redlock(struct dlock__rd_conf *cf, const struct dlock_uri *u,
                        bool nodes, char *err, size_t errlen)
{
    static const char *const only_redlock[] = {"node_timeout", "drift",
                                               "restart_delay"};
    uint32_t v;
    int rc;

    /*
     * node_timeout: how long one Redlock round may wait for the nodes. It
     * must be small against the lease, because the time it takes comes out
     * of the validity; but a node on another host needs a round trip plus
     * scheduling noise. 50 ms is ~100 round trips on a LAN and 1/600 of
     * the default 30 s lease.
     */
    if ((rc = dlock_uri_duration(u, "node_timeout", 50, &v, err, errlen)) !=
        DLOCK_OK)
        return rc;
    if (dlock_uri_param(u, "node_timeout") == NULL && v > cf->timeout_ms)
        v = cf->timeout_ms; /* a short timeout= bounds the default too */
    if (v == 0 || v > cf->timeout_ms)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "node_timeout: expected 1 ms up to timeout= "
                            "(%u ms), got %u ms",
                            cf->timeout_ms, v);
    cf->node_timeout_ms = v;
    /* drift: Redlock's fixed clock-drift allowance (the paper's 2 ms),
     * added to 1% of the lease. */
    if ((rc = dlock_uri_duration(u, "drift", 2, &v, err, errlen)) != DLOCK_OK)
        return rc;
    if (v > 60000)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "drift: at most 60s, got %u ms", v);
    cf->drift_ms = v;
    /* restart_delay: how long a restarted node stays out of the quorum
     * (restart.c); 0 turns the delayed restart off. */
    if ((rc = dlock_uri_duration(u, "restart_delay", u->lease_ms, &v, err,
                                 errlen)) != DLOCK_OK)
        return rc;
    if (v > RESTART_DELAY_MAX_MS)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "restart_delay: at most 24h (the longest lease "
                            "any client takes on these nodes), got %u ms",
                            v);
    cf->restart_delay_ms = v;
    for (size_t i = 0; !nodes && i < 3; i++)
        if (dlock_uri_param(u, only_redlock[i]) != NULL)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "%s: only for redlock", only_redlock[i]);
    if (nodes && cf->db != 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "db: not supported with redlock");
    /* One node is a single Redis with extra cost; two need both up for a
     * majority, so either one down stops every lock: neither survives a
     * node failure, the one thing Redlock is for. */
    if (nodes && cf->nhosts < 3)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: %zu Redlock node%s; Redlock needs at "
                            "least 3 independent nodes (a majority, N/2+1, "
                            "must answer; 5 survive 2 failures). For one "
                            "server use redis://host",
                            cf->nhosts, cf->nhosts == 1 ? "" : "s");
    return DLOCK_OK;
}

/* Redis with replicas: sentinel= (the hosts are sentinels, sentinel.c),
 * sync_replicas= and sync_timeout= (replicas.c). */
static int conf_replicas(struct dlock__rd_conf *cf, const struct dlock_uri *u,
                         bool nodes, char *err, size_t errlen)
{
    const char *name = dlock_uri_param(u, "sentinel");
    const char *sync = dlock_uri_param(u, "sync_replicas");
    uint32_t v;
    int rc;

    if (name != NULL) {
        if (nodes)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "sentinel: not with redlock (Redlock's "
                                "nodes are independent masters)");
        if (name[0] == '\0' || strlen(name) >= sizeof cf->sentinel)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "sentinel: expected the master's name as "
                                "the sentinels know it (1 to %zu bytes)",
                                sizeof cf->sentinel - 1);
        snprintf(cf->sentinel, sizeof cf->sentinel, "%s", name);
        for (size_t i = 0; i < u->nhosts; i++)
            if (u->hosts[i].port == 0)
                cf->hosts[i].port = SENTINEL_DEFAULT_PORT;
    }
    if (sync != NULL) {
        if (nodes)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "sync_replicas: not with redlock");
        if (strcasecmp(sync, "majority") == 0) {
            cf->sync_replicas = RD_SYNC_MAJORITY;
        } else if ((rc = dlock_uri_uint(u, "sync_replicas", 0, 1, 64, &v,
                                        err, errlen)) != DLOCK_OK) {
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "sync_replicas: expected a number of "
                                "replicas 1..64 or 'majority', got "
                                "'%.40s'",
                                sync);
        } else {
            cf->sync_replicas = (int)v;
        }
    }
    /* WAIT's own timeout must end before the command's (timeout=), or the
     * connection would be given up as silent. Default: a second, or half
     * of timeout= when that is shorter. */
    v = cf->timeout_ms / 2 < 1000 ? cf->timeout_ms / 2 : 1000;
    if ((rc = dlock_uri_duration(u, "sync_timeout", v, &v, err, errlen)) !=
        DLOCK_OK)
        return rc;
    if (dlock_uri_param(u, "sync_timeout") != NULL) {
        if (sync == NULL)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "sync_timeout: only with sync_replicas=");
        if (v == 0 || v >= cf->timeout_ms)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "sync_timeout: expected 1 ms up to below "
                                "timeout= (%u ms), got %u ms",
                                cf->timeout_ms, v);
    }
    cf->sync_timeout_ms = v == 0 ? 1 : v;
    return DLOCK_OK;
}

/* prefer=writer|none (rwlock: a waiting writer holds new readers back). */
static int conf_prefer(struct dlock__rd_conf *cf, const struct dlock_uri *u,
                       char *err, size_t errlen)
{
    const char *v = dlock_uri_param(u, "prefer");

    if (v == NULL || strcmp(v, "none") == 0)
        return DLOCK_OK;
    if (strcmp(v, "writer") != 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "prefer: expected writer or none, got '%.40s'",
                            v);
    cf->prefer_writer = true;
    return DLOCK_OK;
}

/* fair's wait_time= and clock=; refused by the other modes. */
static int conf_fair(struct dlock__rd_conf *cf, const struct dlock_uri *u,
                     bool queue, char *err, size_t errlen)
{
    static const char *const clocks[] = {"client", "server", NULL};
    static const char *const only_fair[] = {"wait_time", "clock"};
    const char *w = dlock_uri_param(u, "wait_time");
    int rc, clock = 0;
    uint32_t v;

    for (size_t i = 0; !queue && i < 2; i++)
        if (dlock_uri_param(u, only_fair[i]) != NULL)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "%s: only for mode=fair", only_fair[i]);
    if ((rc = dlock_uri_duration(u, "wait_time", WAIT_TIME_DEFAULT_MS, &v,
                                 err, errlen)) != DLOCK_OK)
        return rc;
    if (v < WAIT_TIME_MIN_MS || v > WAIT_TIME_MAX_MS)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "wait_time: expected a duration from 100ms to "
                            "24h (how long a waiter may stay silent before "
                            "others may skip it; Redisson's threadWaitTime), "
                            "got '%.40s'",
                            w);
    cf->wait_time_ms = v;
    if ((rc = dlock_uri_choice(u, "clock", clocks, 0, &clock, err,
                               errlen)) != DLOCK_OK)
        return rc;
    cf->server_clock = clock == 1;
    if (queue && cf->cluster)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "cluster: mode=fair is not supported with "
                            "cluster=1 yet (a waiter's liveness is read "
                            "with PUBSUB NUMSUB, which counts one node's "
                            "subscribers)");
    if (queue && cf->sync_replicas != 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "sync_replicas: not supported with mode=fair "
                            "yet");
    return DLOCK_OK;
}

int dlock__rd_conf_parse(struct dlock__rd_conf *cf, const struct dlock_uri *u,
                         const struct dlock__rd_mode *m, char *err,
                         size_t errlen)
{
    bool nodes = m->nodes;
    int rc, cluster = 0;

    memset(cf, 0, sizeof *cf);
    if (u->nhosts == 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: expected redis://host[:port]");
    /* cluster=1: the hosts are seeds of one Redis Cluster (cluster.c). */
    if ((rc = dlock_uri_bool(u, "cluster", 0, &cluster, err, errlen)) !=
        DLOCK_OK)
        return rc;
    if (cluster && nodes)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "cluster: cannot be combined with redlock (a "
                            "Redlock needs independent masters; a cluster "
                            "is one store): use redis://h1,h2,...?cluster=1");
    if (cluster && dlock_uri_param(u, "sentinel") != NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "cluster: cannot be combined with sentinel= (a "
                            "cluster fails its masters over by itself)");
    if (cluster && dlock_uri_param(u, "sync_replicas") != NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "sync_replicas: not supported with cluster=1 "
                            "yet");
    if (cluster && u->path[0] != '\0' && strcmp(u->path, "/") != 0 &&
        strcmp(u->path, "/0") != 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "db: a Redis Cluster has only database 0, got "
                            "'%.40s' with cluster=1",
                            u->path);
    cf->cluster = cluster != 0;
    if (u->nhosts > 1 && !nodes && !cluster &&
        dlock_uri_param(u, "sentinel") == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: %zu hosts given; several hosts are a "
                            "Redlock (redlock://h1,h2,... or redlock=1), "
                            "sentinels (sentinel=MASTERNAME) or a "
                            "cluster's seeds (cluster=1)",
                            u->nhosts);
    if (u->nhosts > RD_NODES_MAX)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: at most %d hosts, %zu given",
                            RD_NODES_MAX, u->nhosts);
    for (size_t i = 0; i < u->nhosts; i++) {
        const char *h = u->hosts[i].host;
        if (h[0] == '\0')
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "host: host %zu is empty", i + 1);
        if (strlen(h) >= sizeof cf->hosts[i].host)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "host: longer than 255 bytes");
        snprintf(cf->hosts[i].host, sizeof cf->hosts[i].host, "%s", h);
        cf->hosts[i].port =
            u->hosts[i].port != 0 ? u->hosts[i].port : RD_DEFAULT_PORT;
    }
    cf->nhosts = u->nhosts;
    if ((rc = conf_db(cf, u, err, errlen)) != DLOCK_OK)
        return rc;

    if (u->user != NULL && u->user[0] != '\0' && u->password == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "userinfo: user '%.64s' needs a password "
                            "(redis://user:password@host)",
                            u->user);
    cf->timeout_ms = u->timeout_ms;
    if (cf->timeout_ms == 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "timeout: must be above 0 for redis");
    cf->lease_ms = u->lease_ms;
    if ((rc = conf_replicas(cf, u, nodes, err, errlen)) != DLOCK_OK ||
        (rc = conf_redlock(cf, u, nodes, err, errlen)) != DLOCK_OK ||
        (rc = conf_fair(cf, u, m->queue, err, errlen)) != DLOCK_OK)
        return rc;
    /* queue.c's release grants inside its script: no WAIT can come
     * between the grant and its message, and a waiter's liveness is one
     * node's PUBSUB NUMSUB. */
    if (m->handoff && cf->cluster)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "cluster: mode=queue is not supported with "
                            "cluster=1 (a waiter's liveness is read with "
                            "PUBSUB NUMSUB, which counts one node's "
                            "subscribers)");
    if (m->handoff && cf->sync_replicas != 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "sync_replicas: not supported with mode=queue "
                            "(its release grants the lock to the next "
                            "waiter inside the script, before any WAIT)");

    if ((rc = conf_prefer(cf, u, err, errlen)) != DLOCK_OK)
        return rc;
    if (u->ns[0] != '\0')
        dlock_name_segment(cf->ns, RD_SEG_MAX, u->ns, strlen(u->ns));
    cf->raw_ns = u->ns[0] != '\0' ? strdup(u->ns) : NULL;
    cf->user = u->user != NULL && u->user[0] != '\0' ? strdup(u->user) : NULL;
    cf->password = dup_or_null(u->password);
    if ((u->ns[0] != '\0' && cf->raw_ns == NULL) ||
        (u->password != NULL && cf->password == NULL)) {
        dlock__rd_conf_free(cf);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}
