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
 * Following a failover: when the old master's connections end (it died,
 * or the sentinels reconfigure it with CLIENT KILL), core's connection
 * watch [B-WATCH-1] puts every lock of the client in doubt and renews them
 * at once, on new connections that this file points at the new master: a
 * lock the new master has (it had reached a replica) is held again, one it
 * lacks is reported lost. This is what a restart without persistence does
 * today; docs/backends/redis.md says what it costs. But after a failover
 * that did not kill it (SENTINEL FAILOVER, a partition that heals) the old
 * master stays a master, with its connections, until the sentinels get
 * round to reconfiguring it (seconds): renewals sent there would go on
 * "succeeding" while the new master lets the keys expire. So a thread per
 * client stays subscribed to +switch-master on a sentinel and, when our
 * master changes, shuts down every session connection of the client
 * (their descriptors are registered here): the same watch then fires. A
 * READONLY answer (a master demoted behind a live connection) breaks a
 * session too (conn.c, single.c).
 *
 * Divisions: asking the sentinels; connecting to the master; following
 * +switch-master.
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
    r = dlock__rd_command(rc, "SENTINEL get-master-addr-by-name %s",
                          cf->sentinel);
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
    redisReply *r = dlock__rd_command(rc, "ROLE");
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

/* ---- following +switch-master ------------------------------------------------ */

void dlock__rd_switch_add(struct dlock__rd_session *rs, int fd)
{
    struct dlock__rd_switch *sw = rs->x != NULL ? &rs->x->sw : NULL;

    if (sw == NULL || !sw->on || fd < 0)
        return;
    pthread_mutex_lock(&sw->mu);
    if (sw->nfds == sw->cap) {
        size_t cap = sw->cap != 0 ? sw->cap * 2 : 16;
        int *p = realloc(sw->fds, cap * sizeof *p);
        if (p == NULL) { /* unwatched: connection loss still covers it */
            pthread_mutex_unlock(&sw->mu);
            return;
        }
        sw->fds = p;
        sw->cap = cap;
    }
    sw->fds[sw->nfds++] = fd;
    pthread_mutex_unlock(&sw->mu);
}

void dlock__rd_switch_remove(struct dlock__rd_session *rs, int fd)
{
    struct dlock__rd_switch *sw = rs->x != NULL ? &rs->x->sw : NULL;

    if (sw == NULL || !sw->on || fd < 0)
        return;
    pthread_mutex_lock(&sw->mu);
    for (size_t i = 0; i < sw->nfds; i++)
        if (sw->fds[i] == fd) {
            sw->fds[i] = sw->fds[--sw->nfds];
            break;
        }
    pthread_mutex_unlock(&sw->mu);
}

/* Our master moved: end every session's connection. shutdown() under mu,
 * so no descriptor is closed (and reused) meanwhile; its owner sees the
 * end at its next call, the watchdog at once. */
static void switch_all(struct dlock__rd_switch *sw)
{
    pthread_mutex_lock(&sw->mu);
    sw->switches++;
    for (size_t i = 0; i < sw->nfds; i++)
        (void)shutdown(sw->fds[i], SHUT_RDWR);
    pthread_mutex_unlock(&sw->mu);
}

/* A +switch-master message: "<name> <old ip> <old port> <new ip> <new
 * port>"; true when it is about our master. */
static bool switch_ours(const struct dlock__rd_conf *cf, const redisReply *r)
{
    size_t n = strlen(cf->sentinel);

    return r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
           r->element[0]->type == REDIS_REPLY_STRING &&
           strcmp(r->element[0]->str, "message") == 0 &&
           r->element[2]->type == REDIS_REPLY_STRING &&
           r->element[2]->len > n &&
           strncmp(r->element[2]->str, cf->sentinel, n) == 0 &&
           r->element[2]->str[n] == ' ';
}

/* Wait on the stop eventfd for ms (and the connection c, if >= 0); the
 * connection's poll flags, 0 on time out or stop. */
static short switch_poll(struct dlock__rd_switch *sw, int c, int ms)
{
    struct pollfd p[2] = {{sw->wake_fd, POLLIN, 0}, {c, POLLIN, 0}};

    if (poll(p, c >= 0 ? 2 : 1, ms) <= 0)
        return 0;
    return c >= 0 ? p[1].revents : 0;
}

static bool switch_stopping(struct dlock__rd_switch *sw)
{
    bool stop;

    pthread_mutex_lock(&sw->mu);
    stop = sw->stop;
    pthread_mutex_unlock(&sw->mu);
    return stop;
}

/* The thread: subscribed on one sentinel at a time, the next on failure. */
static void *switch_main(void *arg)
{
    struct dlock__rd_ctx *x = arg;
    struct dlock__rd_switch *sw = &x->sw;
    const struct dlock__rd_conf *cf = &x->conf;
    struct dlock__rd_conf bare;
    size_t i = 0;
    int backoff = 50;

    memset(&bare, 0, sizeof bare);
    while (!switch_stopping(sw)) {
        char err[256];
        int code;
        redisContext *rc =
            dlock__rd_connect(&bare, &cf->hosts[i++ % cf->nhosts],
                              cf->timeout_ms, NULL, NULL, NULL, err,
                              sizeof err, &code);
        if (rc == NULL ||
            redisAppendCommand(rc, "SUBSCRIBE +switch-master") != REDIS_OK) {
            if (rc != NULL)
                redisFree(rc);
            switch_poll(sw, -1, backoff);
            backoff = backoff < 1000 ? backoff * 2 : 1000;
            continue;
        }
        backoff = 50;
        while (rc->err == 0 && !switch_stopping(sw)) {
            void *r = NULL;
            int wdone = 0;
            /* Flush the SUBSCRIBE, then read what arrives. */
            if (dlock__rd_buffer_write(rc, &wdone) != REDIS_OK ||
                (switch_poll(sw, rc->fd, 1000) != 0 &&
                 redisBufferRead(rc) != REDIS_OK))
                break;
            while (redisGetReplyFromReader(rc, &r) == REDIS_OK && r != NULL) {
                if (switch_ours(cf, r))
                    switch_all(sw);
                freeReplyObject(r);
                r = NULL;
            }
        }
        redisFree(rc);
    }
    return NULL;
}

int dlock__rd_switch_start(struct dlock__rd_ctx *x, char *err, size_t errlen)
{
    struct dlock__rd_switch *sw = &x->sw;

    memset(sw, 0, sizeof *sw);
    if (x->conf.sentinel[0] == '\0')
        return DLOCK_OK;
    sw->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sw->wake_fd < 0)
        return dlock_errorf(err, errlen, DLOCK_ERROR, "eventfd: %s",
                            strerror(errno));
    pthread_mutex_init(&sw->mu, NULL);
    sw->on = true;
    if (pthread_create(&sw->thread, NULL, switch_main, x) != 0) {
        dlock__rd_switch_stop(sw);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM,
                            "cannot start the +switch-master thread");
    }
    sw->started = true;
    return DLOCK_OK;
}

void dlock__rd_switch_stop(struct dlock__rd_switch *sw)
{
    uint64_t one = 1;

    if (!sw->on)
        return;
    pthread_mutex_lock(&sw->mu);
    sw->stop = true;
    pthread_mutex_unlock(&sw->mu);
    (void)!write(sw->wake_fd, &one, sizeof one);
    if (sw->started)
        pthread_join(sw->thread, NULL);
    close(sw->wake_fd);
    pthread_mutex_destroy(&sw->mu);
    free(sw->fds);
    sw->on = false;
}
