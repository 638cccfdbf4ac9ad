/*
 * cluster.c: setnx and hash on a Redis Cluster (redis://h1:p1,h2:p2,...
 * ?cluster=1): the seed nodes give the slot map (CLUSTER SLOTS), and every
 * script runs on the master owning its first key's slot. dlock's keys keep
 * lock, fence and channel in one slot (setnx: all under "dlock:{ns:name}";
 * hash: Redisson's "name", "prefix:{name}"), so each script is one
 * single-slot command.
 *
 * A session owns one connection per master it used, made lazily (with the
 * mode's scripts loaded, as on one server). A command follows MOVED
 * (remember the new owner, re-read the map, send again) and ASK (ASKING
 * then the command, on the target, once), and retries TRYAGAIN,
 * CLUSTERDOWN and an unreachable owner (the map is re-read first) every
 * 50 ms until timeout= has passed since it was first sent. A connection
 * that failed on a command is never used again: core replaces the session
 * [B-CONN-1].
 *
 * Watching [B-WATCH-1]: core watches one descriptor per session, and a
 * cluster session has several connections. So core watches one end of a
 * socketpair, and the session's watcher thread waits (poll, POLLRDHUP
 * only: never data) on every connection of the session; when one ends it
 * shuts the pair down, and core sees exactly what it sees on one server:
 * the session broken, every lock of the client in doubt until a renewal on
 * a new session confirms it.
 *
 * Divisions: slots; the map; connections and the watcher; commands;
 * renew; the session.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rd.h"

#define CL_SLOTS 16384
#define CL_NONE 0xffff
#define CL_RETRY_MS 50
/* renew: an item's state before its verdict (above every DLOCK_ code) */
#define CL_UNSENT 1
#define CL_SENT 2

struct cl_node {
    struct dlock__rd_addr addr;
    redisContext *rc; /* NULL until used */
    bool dead;        /* its connection failed: never again */
};

struct dlock__rd_cluster {
    size_t nnodes;
    struct cl_node node[RD_CLUSTER_NODES_MAX];
    uint16_t slot[CL_SLOTS]; /* node index, CL_NONE unknown */
    /* the watcher; wfd (under mu) is its copy of the connections'
     * descriptors, so it never reads node[], which the session changes */
    pthread_mutex_t mu;
    int wfd[RD_CLUSTER_NODES_MAX];
    size_t nwfd;
    pthread_t thread;
    bool started, stop;
    int pair[2];   /* core watches pair[0]; shut down on a loss */
    int wake_fd;   /* eventfd: the set of connections changed, or stop */
    char err[320]; /* why the last routing failed */
};

/* ---- slots ------------------------------------------------------------------------ */

/* CRC16-CCITT (XModem), Redis Cluster's key hash. */
static uint16_t crc16(const unsigned char *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

/* The key's slot: the hash of its {tag} (the first '{' and the first '}'
 * after it, if not empty), else of the whole key. */
unsigned dlock__rd_cluster_slot(const char *key, size_t len)
{
    const char *o = memchr(key, '{', len);
    if (o != NULL) {
        size_t rest = len - (size_t)(o + 1 - key);
        const char *c = memchr(o + 1, '}', rest);
        if (c != NULL && c > o + 1)
            return crc16((const unsigned char *)o + 1,
                         (size_t)(c - o - 1)) % CL_SLOTS;
    }
    return crc16((const unsigned char *)key, len) % CL_SLOTS;
}

/* ---- the map ---------------------------------------------------------------------- */

static int node_index(struct dlock__rd_cluster *cl, const char *host,
                      size_t hlen, int port)
{
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->node[i].addr.port == port &&
            strlen(cl->node[i].addr.host) == hlen &&
            memcmp(cl->node[i].addr.host, host, hlen) == 0)
            return (int)i;
    if (cl->nnodes == RD_CLUSTER_NODES_MAX ||
        hlen >= sizeof cl->node[0].addr.host)
        return -1;
    memcpy(cl->node[cl->nnodes].addr.host, host, hlen);
    cl->node[cl->nnodes].addr.host[hlen] = '\0';
    cl->node[cl->nnodes].addr.port = port;
    return (int)cl->nnodes++;
}

/* Read CLUSTER SLOTS on one connection into the map; 0, or -1 with
 * why set. `from` answers for an empty host in the reply. */
static int map_read(struct dlock__rd_cluster *cl, char *why, size_t cap,
                    redisContext *rc, const struct dlock__rd_addr *from)
{
    redisReply *r = dlock__rd_command(rc, "CLUSTER SLOTS");
    int ok = 0;

    if (r == NULL) {
        snprintf(why, cap, "%s:%d: CLUSTER SLOTS: %.200s",
                 from->host, from->port,
                 rc->errstr[0] ? rc->errstr : "no answer");
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, cap,
                 "%s:%d is not a Redis Cluster node (CLUSTER SLOTS: %.160s); "
                 "drop cluster=1 for a single server",
                 from->host, from->port, r->str);
        freeReplyObject(r);
        return -1;
    }
    if (r->type != REDIS_REPLY_ARRAY)
        goto bad;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i], *m;
        const char *host;
        size_t hlen;
        int idx;

        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY ||
            e->element[2]->elements < 2)
            goto bad;
        m = e->element[2];
        if (m->element[0]->type != REDIS_REPLY_STRING ||
            m->element[1]->type != REDIS_REPLY_INTEGER)
            goto bad;
        host = m->element[0]->str;
        hlen = m->element[0]->len;
        if (hlen == 0 || (hlen == 1 && host[0] == '?')) {
            host = from->host;
            hlen = strlen(from->host);
        }
        idx = node_index(cl, host, hlen, (int)m->element[1]->integer);
        if (idx < 0) {
            snprintf(why, cap,
                     "the cluster has more than %d masters",
                     RD_CLUSTER_NODES_MAX);
            freeReplyObject(r);
            return -1;
        }
        for (long long s = e->element[0]->integer;
             s <= e->element[1]->integer && s < CL_SLOTS; s++)
            if (s >= 0)
                cl->slot[s] = (uint16_t)idx;
        ok++;
    }
    freeReplyObject(r);
    if (ok == 0) {
        snprintf(why, cap,
                 "%s:%d: the cluster has no slots assigned", from->host,
                 from->port);
        return -1;
    }
    return 0;
bad:
    snprintf(why, cap, "%s:%d: CLUSTER SLOTS: unexpected reply",
             from->host, from->port);
    freeReplyObject(r);
    return -1;
}

/* Re-read the map from a live connection, else from the seeds in turn.
 * 0, or -1 with rs->why (the last reason). *code: DLOCK_ECONNECT when no
 * node answered, DLOCK_EINVAL when one answered that it is no cluster. */
static int map_refresh(struct dlock__rd_session *rs, int *code)
{
    struct dlock__rd_cluster *cl = rs->cl;
    char err[320];

    *code = DLOCK_ECONNECT;
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->node[i].rc != NULL && !cl->node[i].dead &&
            map_read(cl, rs->why, sizeof rs->why, cl->node[i].rc, &cl->node[i].addr) == 0)
            return 0;
    for (size_t i = 0; i < rs->cf->nhosts; i++) {
        int c;
        redisContext *rc =
            dlock__rd_connect(rs->cf, &rs->cf->hosts[i], rs->cf->timeout_ms,
                              NULL, NULL, NULL, err, sizeof err, &c);
        if (rc == NULL) {
            snprintf(rs->why, sizeof rs->why, "%s", err);
            if (c != DLOCK_ECONNECT)
                *code = c;
            continue;
        }
        int got = map_read(cl, rs->why, sizeof rs->why, rc, &rs->cf->hosts[i]);
        if (got != 0 && strstr(rs->why, "not a Redis Cluster") != NULL)
            *code = DLOCK_EINVAL;
        redisFree(rc);
        if (got == 0)
            return 0;
    }
    return -1;
}

/* The address of the master of key's slot, read from the seeds of cf
 * (the raw floor of `dlock bench`, which has no session). */
int dlock__rd_cluster_master(const struct dlock__rd_conf *cf, const char *key,
                             size_t len, struct dlock__rd_addr *out,
                             char *err, size_t errlen)
{
    struct dlock__rd_cluster *cl = calloc(1, sizeof *cl);
    unsigned slot = dlock__rd_cluster_slot(key, len);
    int code = DLOCK_ECONNECT;

    if (cl == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    memset(cl->slot, 0xff, sizeof cl->slot);
    for (size_t i = 0; i < cf->nhosts && cl->slot[slot] == CL_NONE; i++) {
        redisContext *rc = dlock__rd_connect(cf, &cf->hosts[i], cf->timeout_ms,
                                             NULL, NULL, NULL, err, errlen,
                                             &code);
        if (rc == NULL)
            continue;
        if (map_read(cl, err, errlen, rc, &cf->hosts[i]) != 0)
            code = DLOCK_ERROR;
        redisFree(rc);
    }
    if (cl->slot[slot] != CL_NONE) {
        *out = cl->node[cl->slot[slot]].addr;
        code = DLOCK_OK;
    }
    free(cl);
    return code;
}

/* ---- connections and the watcher -------------------------------------------------- */

static void *watcher(void *arg)
{
    struct dlock__rd_cluster *cl = arg;
    struct pollfd p[1 + RD_CLUSTER_NODES_MAX];

    for (;;) {
        nfds_t n = 1;
        p[0].fd = cl->wake_fd;
        p[0].events = POLLIN;
        pthread_mutex_lock(&cl->mu);
        if (cl->stop) {
            pthread_mutex_unlock(&cl->mu);
            return NULL;
        }
        for (size_t i = 0; i < cl->nwfd; i++) {
            p[n].fd = cl->wfd[i];
            p[n++].events = POLLRDHUP;
        }
        pthread_mutex_unlock(&cl->mu);
        if (poll(p, n, -1) < 0 && errno != EINTR)
            return NULL;
        if (p[0].revents & POLLIN) {
            uint64_t v;
            if (read(cl->wake_fd, &v, sizeof v) < 0) {
                /* EAGAIN: nothing to drain */
            }
        }
        for (nfds_t i = 1; i < n; i++)
            if (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
                /* One connection of the session ended: core sees the
                 * pair end, as it would see one server's connection. */
                shutdown(cl->pair[1], SHUT_RDWR);
                return NULL;
            }
    }
}

static void watcher_wake(struct dlock__rd_cluster *cl)
{
    uint64_t one = 1;
    if (write(cl->wake_fd, &one, sizeof one) < 0) {
        /* never full: the watcher drains it */
    }
}

/* The connection to node i, made if needed; NULL with rs->why and *code. */
static redisContext *node_conn(struct dlock__rd_session *rs, size_t i,
                               int *code)
{
    struct dlock__rd_cluster *cl = rs->cl;
    struct cl_node *nd = &cl->node[i];
    dlock__rd_sha sha[RD_SC_COUNT];
    redisContext *rc;

    if (nd->dead) {
        *code = DLOCK_ECONNECT;
        snprintf(rs->why, sizeof rs->why,
                 "%s:%d: the connection failed earlier", nd->addr.host,
                 nd->addr.port);
        return NULL;
    }
    if (nd->rc != NULL)
        return nd->rc;
    rc = dlock__rd_connect(rs->cf, &nd->addr, rs->cf->timeout_ms, rs->m, sha,
                           NULL, rs->why, sizeof rs->why, code);
    if (rc == NULL)
        return NULL;
    /* Scripts have the same digest everywhere: the session keeps one. */
    memcpy(rs->sha, sha, sizeof sha);
    nd->rc = rc;
    pthread_mutex_lock(&cl->mu);
    cl->wfd[cl->nwfd++] = rc->fd; /* one per node: never more than fit */
    pthread_mutex_unlock(&cl->mu);
    watcher_wake(cl);
    return rc;
}

/* ---- commands --------------------------------------------------------------------- */

static bool starts(const redisReply *r, const char *w)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           strncmp(r->str, w, strlen(w)) == 0;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the target's node index. */
static int redirect_target(struct dlock__rd_cluster *cl, const redisReply *r)
{
    const char *sp = strchr(r->str, ' '), *a, *colon;
    if (sp == NULL || (a = strchr(sp + 1, ' ')) == NULL)
        return -1;
    a++;
    if ((colon = strrchr(a, ':')) == NULL || colon == a)
        return -1;
    return node_index(cl, a, (size_t)(colon - a), atoi(colon + 1));
}

static void nap_ms(unsigned ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

redisReply *dlock__rd_cluster_cmd(struct dlock__rd_session *rs, unsigned slot,
                                  int argc, const char **argv,
                                  const size_t *lens)
{
    struct dlock__rd_cluster *cl = rs->cl;
    int64_t deadline = dlock_now_ms() + rs->cf->timeout_ms;
    int ask = -1, code;

    for (;;) {
        size_t i = cl->slot[slot];
        redisContext *rc;
        redisReply *r = NULL;

        if (ask >= 0)
            i = (size_t)ask;
        if (i == CL_NONE && map_refresh(rs, &code) != 0)
            goto retry;
        if ((i = ask >= 0 ? (size_t)ask : cl->slot[slot]) == CL_NONE) {
            snprintf(rs->why, sizeof rs->why, "slot %u has no master", slot);
            goto retry;
        }
        if ((rc = node_conn(rs, i, &code)) == NULL) {
            if (code != DLOCK_ECONNECT)
                return NULL;
            (void)map_refresh(rs, &code); /* a failover moves the slot */
            goto retry;
        }
        rs->rc = rc;
        if (ask >= 0) {
            redisAppendCommand(rc, "ASKING");
            redisAppendCommandArgv(rc, argc, argv, lens);
            if (dlock__rd_get_reply(rc, &r) == REDIS_OK && r != NULL) {
                freeReplyObject(r);
                r = NULL;
                if (dlock__rd_get_reply(rc, &r) != REDIS_OK)
                    r = NULL;
            }
            ask = -1;
        } else {
            r = dlock__rd_command_argv(rc, argc, argv, lens);
        }
        if (r == NULL) {
            cl->node[i].dead = true; /* core replaces the session */
            snprintf(rs->why, sizeof rs->why, "%s:%d: %s",
                     cl->node[i].addr.host, cl->node[i].addr.port,
                     rc->errstr[0] ? rc->errstr : "connection failed");
            return NULL;
        }
        if (starts(r, "MOVED ")) {
            int t = redirect_target(cl, r);
            if (t >= 0)
                cl->slot[slot] = (uint16_t)t;
            freeReplyObject(r);
            (void)map_refresh(rs, &code);
            if (t >= 0)
                cl->slot[slot] = (uint16_t)t; /* the reply is newer */
            if (dlock_now_ms() >= deadline)
                return NULL;
            continue;
        }
        if (starts(r, "ASK ")) {
            ask = redirect_target(cl, r);
            freeReplyObject(r);
            if (ask < 0 || dlock_now_ms() >= deadline)
                return NULL;
            continue;
        }
        if (starts(r, "TRYAGAIN") || starts(r, "CLUSTERDOWN")) {
            snprintf(rs->why, sizeof rs->why, "%.300s", r->str);
            if (dlock_now_ms() + CL_RETRY_MS >= deadline)
                return r; /* the server's own words */
            freeReplyObject(r);
            nap_ms(CL_RETRY_MS);
            (void)map_refresh(rs, &code);
            continue;
        }
        return r;
    retry:
        if (dlock_now_ms() + CL_RETRY_MS >= deadline)
            return NULL;
        nap_ms(CL_RETRY_MS);
    }
}

int dlock__rd_cluster_route(struct dlock__rd_session *rs, const char *key,
                            size_t len)
{
    struct dlock__rd_cluster *cl = rs->cl;
    unsigned slot = dlock__rd_cluster_slot(key, len);
    int code = DLOCK_ECONNECT;

    if (cl->slot[slot] == CL_NONE && map_refresh(rs, &code) != 0)
        return dlock_session_error(&rs->base, code, "%s", rs->why);
    if (cl->slot[slot] == CL_NONE)
        return dlock_session_error(&rs->base, DLOCK_ECONNECT,
                                   "slot %u has no master", slot);
    if ((rs->rc = node_conn(rs, cl->slot[slot], &code)) == NULL)
        return dlock_session_error(&rs->base, code, "%s", rs->why);
    return DLOCK_OK;
}

redisReply *dlock__rd_cluster_run(struct dlock__rd_session *rs, int which,
                                  const char *owner, size_t owner_len,
                                  const char *lease)
{
    /* a permit's script when rs->keys are laid out for one */
    const struct dlock__rd_script *sc =
        rs->m->script[which = dlock__rd_script_of(&rs->keys, which)];
    unsigned slot = dlock__rd_cluster_slot(rs->keys.lock.p, rs->keys.lock.len);
    struct dlock__rd_cmd c;
    redisReply *r;

    dlock__rd_cmd_evalsha(&c, sc, rs->sha[which], &rs->keys, owner,
                          owner_len, lease);
    r = dlock__rd_cluster_cmd(rs, slot, c.argc, c.argv, c.lens);
    if (dlock__rd_noscript(r)) { /* SCRIPT FLUSH on that master */
        freeReplyObject(r);
        c.argv[0] = "EVAL";
        c.lens[0] = 4;
        c.argv[1] = sc->lua;
        c.lens[1] = strlen(sc->lua);
        r = dlock__rd_cluster_cmd(rs, slot, c.argc, c.argv, c.lens);
    }
    return r;
}

int dlock__rd_cluster_addr(struct dlock__rd_session *rs, const char *key,
                           size_t len, struct dlock__rd_addr *out)
{
    struct dlock__rd_cluster *cl = rs->cl;
    unsigned slot = dlock__rd_cluster_slot(key, len);
    int code;

    if (cl->slot[slot] == CL_NONE && map_refresh(rs, &code) != 0)
        return code;
    if (cl->slot[slot] == CL_NONE)
        return DLOCK_ECONNECT;
    *out = cl->node[cl->slot[slot]].addr;
    return DLOCK_OK;
}

/* ---- renew ------------------------------------------------------------------------ */

/* Renew n leases, one pipelined round trip per master. A reply that is a
 * redirection or a retry is sent again alone, routed. */
int dlock__rd_cluster_renew(struct dlock__rd_session *rs,
                            struct dlock_renewal *items, size_t n)
{
    struct dlock__rd_cluster *cl = rs->cl;
    char lease[16];
    int code;

    for (size_t i = 0; i < n; i++)
        items[i].result = CL_UNSENT; /* not yet sent */
    for (size_t nd = 0; nd < cl->nnodes; nd++) {
        redisContext *rc = NULL;
        size_t sent = 0;

        for (size_t i = 0; i < n; i++) {
            const struct dlock_request *req = items[i].req;
            struct dlock__rd_cmd c;
            int w; /* the lock's renewal, or a permit's */
            if (dlock__rd_req_keys(rs, req) != 0)
                return dlock_session_error(&rs->base, DLOCK_ENOMEM,
                                           "out of memory");
            w = dlock__rd_script_of(&rs->keys, RD_SC_RENEW);
            if (cl->slot[dlock__rd_cluster_slot(rs->keys.lock.p,
                                                rs->keys.lock.len)] != nd)
                continue;
            if (rc == NULL && (rc = node_conn(rs, nd, &code)) == NULL)
                break; /* left to the routed path below */
            snprintf(lease, sizeof lease, "%u", req->lease_ms);
            dlock__rd_cmd_evalsha(&c, rs->m->script[w], rs->sha[w],
                                  &rs->keys, req->owner, req->owner_len,
                                  lease);
            if (redisAppendCommandArgv(rc, c.argc, c.argv, c.lens) !=
                REDIS_OK)
                return dlock_session_error(&rs->base, DLOCK_ENOMEM,
                                           "out of memory");
            items[i].result = CL_SENT; /* sent to nd */
            sent++;
        }
        for (size_t i = 0; sent > 0 && i < n; i++) {
            redisReply *r = NULL;
            if (items[i].result != CL_SENT)
                continue;
            sent--;
            if (dlock__rd_get_reply(rc, &r) != REDIS_OK || r == NULL) {
                cl->node[nd].dead = true;
                rs->rc = rc;
                return dlock__rd_io_error(rs, DLOCK_ECONNECT, "renew");
            }
            if (r->type == REDIS_REPLY_INTEGER)
                items[i].result = r->integer == 1 ? DLOCK_OK : RD_RENEW_NO;
            else if (r->type == REDIS_REPLY_ERROR &&
                     !dlock__rd_noscript(r) && !starts(r, "MOVED ") &&
                     !starts(r, "ASK ") && !starts(r, "TRYAGAIN") &&
                     !starts(r, "CLUSTERDOWN"))
                items[i].result = dlock__rd_reply_error(rs, r);
            else
                items[i].result = CL_UNSENT; /* routed, below */
            freeReplyObject(r);
        }
    }
    /* What was not answered in a batch: one by one, routed. */
    for (size_t i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        redisReply *r;
        if (items[i].result != CL_UNSENT)
            continue;
        if (dlock__rd_req_keys(rs, req) != 0)
            return dlock_session_error(&rs->base, DLOCK_ENOMEM,
                                       "out of memory");
        snprintf(lease, sizeof lease, "%u", req->lease_ms);
        r = dlock__rd_cluster_run(rs, RD_SC_RENEW, req->owner,
                                  req->owner_len, lease);
        if (r == NULL)
            return dlock__rd_io_error(rs, DLOCK_ECONNECT, "renew");
        if (r->type == REDIS_REPLY_INTEGER)
            items[i].result = r->integer == 1 ? DLOCK_OK : RD_RENEW_NO;
        else
            items[i].result = dlock__rd_reply_error(rs, r);
        freeReplyObject(r);
    }
    return DLOCK_OK;
}

/* ---- the session ------------------------------------------------------------------ */

void dlock__rd_cluster_close(struct dlock__rd_session *rs)
{
    struct dlock__rd_cluster *cl = rs->cl;

    if (cl == NULL)
        return;
    dlock_session_watch(&rs->base, -1);
    if (cl->started) {
        pthread_mutex_lock(&cl->mu);
        cl->stop = true;
        pthread_mutex_unlock(&cl->mu);
        watcher_wake(cl);
        pthread_join(cl->thread, NULL);
    }
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->node[i].rc != NULL)
            redisFree(cl->node[i].rc);
    if (cl->wake_fd >= 0)
        close(cl->wake_fd);
    if (cl->pair[0] >= 0)
        close(cl->pair[0]);
    if (cl->pair[1] >= 0)
        close(cl->pair[1]);
    pthread_mutex_destroy(&cl->mu);
    free(cl);
    rs->cl = NULL;
    rs->rc = NULL;
}

int dlock__rd_cluster_open(struct dlock__rd_session *rs, char *err,
                           size_t errlen)
{
    struct dlock__rd_cluster *cl = calloc(1, sizeof *cl);
    int code;

    if (cl == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    memset(cl->slot, 0xff, sizeof cl->slot);
    pthread_mutex_init(&cl->mu, NULL);
    cl->pair[0] = cl->pair[1] = cl->wake_fd = -1;
    rs->cl = cl;
    if (map_refresh(rs, &code) != 0) {
        dlock_errorf(err, errlen, code, "cluster: %s", rs->why);
        dlock__rd_cluster_close(rs);
        return code;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cl->pair) != 0 ||
        (cl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
        pthread_create(&cl->thread, NULL, watcher, cl) != 0) {
        dlock_errorf(err, errlen, DLOCK_ENOMEM,
                     "cluster: cannot start the connection watcher: %s",
                     strerror(errno));
        dlock__rd_cluster_close(rs);
        return DLOCK_ENOMEM;
    }
    cl->started = true;
    dlock_session_watch(&rs->base, cl->pair[0]);
    return DLOCK_OK;
}
