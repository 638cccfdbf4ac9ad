/*
 * redis.c: the redis:// backend (modes setnx and hash) and redlock:// (the
 * same SET-NX lock on N independent masters), over hiredis 0.14.
 *
 * Three ways to lock with Redis, each a lesson:
 *
 *   setnx    one key per lock holding the owner id, taken with
 *            SET key owner NX PX lease inside a Lua script that also bumps
 *            a fencing counter; released by compare-and-delete plus a
 *            PUBLISH that wakes the waiters; renewed by compare-and-PEXPIRE.
 *   hash     Redisson's RLock layout (a hash at the lock name, field
 *            "<uuid>:<id>" holding the hold count, channel
 *            redisson_lock__channel:{name}, unlock message 0), so a C service
 *            on dlock and a Java service on Redisson exclude each other.
 *            The fencing counter is Redisson's RFencedLock token key.
 *   redlock  setnx's lock on N independent masters: held when a majority
 *            said yes within the validity time (lease - elapsed - drift);
 *            no fencing tokens, because no single counter can be trusted to
 *            grow when the majority that granted the lock changes.
 *
 * Every script runs by EVALSHA; the scripts are loaded on each new
 * connection (SCRIPT LOAD, pipelined with AUTH and SELECT) and a NOSCRIPT
 * answer (SCRIPT FLUSH on a live server) falls back to EVAL of the text.
 * Each command has the URI's timeout= (SO_RCVTIMEO/SO_SNDTIMEO through
 * redisSetTimeout); a connection that failed once is never used again:
 * core replaces the session [B-CONN-1].
 *
 * Waiting without polling (setnx, hash): each client has one pub/sub
 * connection, owned by one thread, that multiplexes the channels its
 * waiters wait on. wait() subscribes (or finds the channel subscribed),
 * then re-checks the lock key on its own session, so a release between the
 * EBUSY attempt and the subscription is never missed [B-WAIT-1].
 *
 * Divisions: configuration from the URI; scripts; connections; keys; the
 * pub/sub context; single-node sessions (acquire, wait, renew, release,
 * inspect); Redlock; the raw floor; the table.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock/backend.h"

extern const struct dlock_backend dlock__backend_redis;

#define REDIS_DEFAULT_PORT 6379
#define REDLOCK_NODES_MAX 15
/* Escaped name segments inside the {hash tag}; longer names are hashed. */
#define SEG_MAX 200
/* A subscribed channel nobody waits on is kept this long: a waiter that
 * wakes, loses the race and waits again finds it still subscribed. */
#define LINGER_MS 2000
/* restart_delay's upper bound: a day, far past any sane lease. */
#define RESTART_DELAY_MAX_MS (24u * 3600u * 1000u)

enum redis_mode { MODE_SETNX = 0, MODE_HASH = 1, MODE_REDLOCK = 2 };
static const char *const mode_names[] = {"setnx", "hash", "redlock", NULL};

static const char *const redis_params[] = {"mode",         "redlock",
                                           "drift",        "node_timeout",
                                           "restart_delay", NULL};
static const char *const redis_aliases[] = {"redlock", NULL};

/* ---- configuration from the URI ----------------------------------------- */

struct redis_node_addr {
    char host[256];
    int port;
};

struct redis_conf {
    enum redis_mode mode;
    size_t nhosts;
    struct redis_node_addr hosts[REDLOCK_NODES_MAX];
    char *user, *password; /* owned copies; NULL when absent */
    unsigned int db;
    uint32_t timeout_ms;      /* each command and connect */
    uint32_t node_timeout_ms; /* redlock: one round on all nodes */
    uint32_t drift_ms;        /* redlock: fixed part of the clock drift */
    uint32_t lease_ms;        /* the URI's lease= */
    uint32_t restart_delay_ms; /* redlock: 0 = no delayed restart */
    char ns[SEG_MAX + 1];     /* setnx/redlock: escaped namespace */
    char *raw_ns;             /* hash: the namespace as given, or NULL */
};

static void conf_free(struct redis_conf *cf)
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

/* Read and check everything the URI says; each message names its part. */
static int conf_parse(struct redis_conf *cf, const struct dlock_uri *u,
                      char *err, size_t errlen)
{
    int rc, mode = MODE_SETNX, redlock = 0;
    uint32_t v;

    memset(cf, 0, sizeof *cf);
    if ((rc = dlock_uri_choice(u, "mode", mode_names, MODE_SETNX, &mode, err,
                               errlen)) != DLOCK_OK)
        return rc;
    if ((rc = dlock_uri_bool(u, "redlock", 0, &redlock, err, errlen)) !=
        DLOCK_OK)
        return rc;
    if (strcmp(u->scheme, "redlock") == 0)
        redlock = 1;
    if (mode == MODE_HASH && redlock)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "mode: hash cannot be combined with redlock (a "
                            "Redlock is made of setnx locks)");
    if (redlock)
        mode = MODE_REDLOCK;
    cf->mode = (enum redis_mode)mode;

    if (u->nhosts == 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: expected redis://host[:port]");
    if (u->nhosts > 1 && !redlock)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: %zu hosts given; several hosts are a "
                            "Redlock: use redlock://h1,h2,... or redlock=1",
                            u->nhosts);
    if (u->nhosts > REDLOCK_NODES_MAX)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: at most %d Redlock nodes, %zu given",
                            REDLOCK_NODES_MAX, u->nhosts);
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
            u->hosts[i].port != 0 ? u->hosts[i].port : REDIS_DEFAULT_PORT;
    }
    cf->nhosts = u->nhosts;

    /* /db: a database number (SELECT), not with Redlock's N nodes. */
    if (u->path[0] != '\0' && strcmp(u->path, "/") != 0) {
        const char *p = u->path + 1;
        unsigned long db = 0;
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
    }

    if (u->user != NULL && u->user[0] != '\0' && u->password == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "userinfo: user '%.64s' needs a password "
                            "(redis://user:password@host)",
                            u->user);
    cf->timeout_ms = u->timeout_ms;
    if (cf->timeout_ms == 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "timeout: must be above 0 for redis");

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
     * (see "Redlock" below); 0 turns the delayed restart off. */
    cf->lease_ms = u->lease_ms;
    if ((rc = dlock_uri_duration(u, "restart_delay", u->lease_ms, &v, err,
                                 errlen)) != DLOCK_OK)
        return rc;
    if (v > RESTART_DELAY_MAX_MS)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "restart_delay: at most 24h (the longest lease "
                            "any client takes on these nodes), got %u ms",
                            v);
    cf->restart_delay_ms = v;
    {
        static const char *const only_redlock[] = {"node_timeout", "drift",
                                                   "restart_delay"};
        for (size_t i = 0; !redlock && i < 3; i++)
            if (dlock_uri_param(u, only_redlock[i]) != NULL)
                return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                    "%s: only for redlock", only_redlock[i]);
    }
    if (redlock && cf->db != 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "db: not supported with redlock");

    if (u->ns[0] != '\0')
        dlock_name_segment(cf->ns, SEG_MAX, u->ns, strlen(u->ns));
    cf->raw_ns = u->ns[0] != '\0' ? strdup(u->ns) : NULL;
    cf->user = u->user != NULL && u->user[0] != '\0' ? strdup(u->user) : NULL;
    cf->password = dup_or_null(u->password);
    if ((u->ns[0] != '\0' && cf->raw_ns == NULL) ||
        (u->password != NULL && cf->password == NULL)) {
        conf_free(cf);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

/* ---- scripts -------------------------------------------------------------- */

/*
 * Every script returns what the C side needs in one round trip. KEYS and
 * ARGV orders of the hash scripts follow Redisson's (KEYS[1] the lock name,
 * ARGV[1] the lease, ARGV[2] the field), so the two read alike.
 */
enum { SC_ACQUIRE = 0, SC_RELEASE = 1, SC_RENEW = 2, SC_COUNT = 3 };

/*
 * Every grant's token is max(counter + 1, the server's clock in
 * microseconds), and the counter is set to it. Both halves matter:
 *   - the counter alone would start again at 1 after it is lost (a restart
 *     without persistence, an eviction, a failover to a replica that had
 *     not seen it), and would go back to an old value when the server
 *     restarts from an RDB snapshot taken before the last grants;
 *   - the clock alone would repeat or go back when the server's clock is
 *     set back.
 * So tokens grow across a data loss as long as grants come slower than one
 * per microsecond (each is a round trip) and the clock did not step back,
 * and across a clock step as long as the counter was kept.
 * Leaves the token in the local `fence`.
 */
#define FENCE_NEXT                                                          \
    "local t = redis.call('time') "                                        \
    "local now = t[1] .. string.format('%06d', tonumber(t[2])) "           \
    "local fence = redis.call('incr', KEYS[2]) "                           \
    "if fence < tonumber(now) then "                                       \
    "  redis.call('set', KEYS[2], now) "                                   \
    "  fence = tonumber(now) "                                             \
    "end "

/* setnx. KEYS: lock, fence. ARGV: owner, lease ms.
 * -> {1, fence} granted, {0, pttl} busy. A key already ours is an earlier
 * grant of this handle that the server still has: the attempt before this
 * one whose reply was lost, or a release that ended in doubt and never
 * reached the server. It is granted again, with a new token: every grant
 * gets a token above every earlier one, and a lost reply only skips one. */
static const char sc_setnx_acquire[] =
    "local ours = redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) "
    "if not ours and redis.call('get', KEYS[1]) == ARGV[1] then "
    "  ours = redis.call('pexpire', KEYS[1], ARGV[2]) "
    "end "
    "if ours then "
    FENCE_NEXT
    "  return {1, fence} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}";

/* setnx and redlock. KEYS: lock, channel. ARGV: owner.
 * -> 1 deleted (and announced), 0 not ours. */
static const char sc_setnx_release[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  redis.call('del', KEYS[1]) "
    "  redis.call('publish', KEYS[2], '0') "
    "  return 1 "
    "end "
    "return 0";

/* setnx and redlock. KEYS: lock. ARGV: owner, lease ms.
 * -> 1 extended, 0 gone or another owner's. */
static const char sc_setnx_renew[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  return redis.call('pexpire', KEYS[1], ARGV[2]) "
    "end "
    "return 0";

/* hash (Redisson RLock + RFencedLock's token). KEYS: name, token.
 * ARGV: lease ms, field. -> {1, token} or {0, pttl}. dlock never asks
 * the server twice for one holding (core counts reentrant levels), so a
 * field already ours is an earlier grant the server still has (a lost
 * reply, a release in doubt): its count stays 1, and, as in RFencedLock,
 * the token grows with every grant. */
static const char sc_hash_acquire[] =
    "local held = redis.call('exists', KEYS[1]) == 1 "
    "if not held or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  if not held then redis.call('hincrby', KEYS[1], ARGV[2], 1) end "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    FENCE_NEXT
    "  return {1, fence} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}";

/* hash. KEYS: name, channel. ARGV: unlock message (0), lease ms, field.
 * Redisson's unlock: count down, delete and announce at zero.
 * -> 1 released, 0 still held (count > 0), -1 not ours. */
static const char sc_hash_release[] =
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -1 end "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1) "
    "if counter > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "
    "  return 0 "
    "end "
    "redis.call('del', KEYS[1]) "
    "redis.call('publish', KEYS[2], ARGV[1]) "
    "return 1";

/* hash. KEYS: name. ARGV: lease ms, field. Redisson's renewal. */
static const char sc_hash_renew[] =
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return 1 "
    "end "
    "return 0";

/* redlock, per node. KEYS: lock. ARGV: owner, lease ms.
 * -> {1, 0} or {0, pttl}; no fencing counter (see the docs). */
static const char sc_redlock_acquire[] =
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
    "  return {1, 0} "
    "end "
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "
    "  return {1, 0} "
    "end "
    "return {0, redis.call('pttl', KEYS[1])}";

static const char *const mode_scripts[3][SC_COUNT] = {
    {sc_setnx_acquire, sc_setnx_release, sc_setnx_renew},
    {sc_hash_acquire, sc_hash_release, sc_hash_renew},
    {sc_redlock_acquire, sc_setnx_release, sc_setnx_renew},
};

typedef char redis_sha[41];

/* ---- connections ---------------------------------------------------------- */

static struct timeval tv_ms(uint32_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

/* hiredis reports a read or write timeout as strerror(EAGAIN). */
static const char *io_text(const redisContext *rc, char *buf, size_t cap,
                           uint32_t timeout_ms)
{
    if (rc->err == REDIS_ERR_IO &&
        strstr(rc->errstr, "temporarily unavailable") != NULL) {
        snprintf(buf, cap, "no answer within %u ms", timeout_ms);
        return buf;
    }
    if (rc->err == REDIS_ERR_EOF)
        return "the server closed the connection";
    return rc->errstr[0] != '\0' ? rc->errstr : "I/O error";
}

/* Wait for a non-blocking connect to finish; 0 or an errno value. */
static int connect_wait(int fd, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - dlock_now_ms();
        struct pollfd p = {fd, POLLOUT, 0};
        int n, e = 0;
        socklen_t len = sizeof e;

        if (left <= 0)
            return ETIMEDOUT;
        n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return ETIMEDOUT;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
            return errno;
        return e;
    }
}

/*
 * A TCP connection to a, made here rather than by hiredis so that the
 * descriptor is close-on-exec from its birth [B-EXEC-1]: hiredis 0.14
 * creates its sockets without SOCK_CLOEXEC, and setting the flag after
 * the connect would leave a window in which another thread's fork+exec
 * inherits the connection. Tries each address getaddrinfo gives until
 * timeout_ms; returns a blocking descriptor with TCP_NODELAY (as hiredis
 * sets), or -1 with why filled.
 */
static int tcp_connect(const struct redis_node_addr *a, uint32_t timeout_ms,
                       char *why, size_t cap)
{
    struct addrinfo hints, *res = NULL, *ai;
    int64_t deadline = dlock_now_ms() + timeout_ms;
    char port[8];
    int fd = -1, e = ECONNREFUSED, gai, one = 1;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(port, sizeof port, "%d", a->port);
    if ((gai = getaddrinfo(a->host, port, &hints, &res)) != 0) {
        snprintf(why, cap, "%s", gai_strerror(gai));
        return -1;
    }
    for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            e = 0;
        else
            e = errno == EINPROGRESS ? connect_wait(fd, deadline) : errno;
        if (e != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(why, cap, "%s", strerror(e));
        return -1;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        snprintf(why, cap, "fcntl: %s", strerror(errno));
        close(fd);
        return -1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Who answered on a new connection, from INFO server. */
struct server_info {
    char run_id[41];    /* "" when INFO was refused or had none */
    uint32_t uptime_s;  /* uptime_in_seconds */
    int64_t at_ms;      /* dlock_now_ms() when the reply was read */
    char why[128];      /* why run_id is "" */
};

/* Fill in from INFO server's "key:value\r\n" lines. */
static void info_parse(struct server_info *in, const char *text)
{
    const char *p = strstr(text, "\nrun_id:");
    const char *u = strstr(text, "\nuptime_in_seconds:");
    size_t n = 0;

    if (p != NULL) {
        p += 8;
        while (n < 40 && ((p[n] >= '0' && p[n] <= '9') ||
                          (p[n] >= 'a' && p[n] <= 'f')))
            n++;
    }
    if (n != 40 || u == NULL) {
        snprintf(in->why, sizeof in->why,
                 "INFO server has no run_id or uptime_in_seconds");
        return;
    }
    memcpy(in->run_id, p, 40);
    in->run_id[40] = '\0';
    in->uptime_s = (uint32_t)strtoul(u + 19, NULL, 10);
}

/*
 * Connect to one server: TCP with timeout, then AUTH, SELECT, SCRIPT LOAD
 * of the mode's scripts and INFO server in one pipelined round trip. sha
 * (if not NULL) gets the scripts' digests, info (if not NULL) who the
 * server is. On failure returns NULL, err says why and *code is
 * DLOCK_ECONNECT (unreachable, no answer) or DLOCK_ERROR (the server
 * refused: bad password, bad database). A refused INFO (an ACL without
 * it) is no failure here: info->run_id stays "" and the caller decides.
 */
static redisContext *redis_connect(const struct redis_conf *cf,
                                   const struct redis_node_addr *a,
                                   uint32_t timeout_ms, redis_sha *sha,
                                   struct server_info *info, char *err,
                                   size_t errlen, int *code)
{
    struct timeval tv = tv_ms(timeout_ms);
    const char *const *scripts = mode_scripts[cf->mode];
    const char *what[4 + SC_COUNT];
    redisContext *rc;
    int nreplies = 0, fd;
    char dbs[16], tbuf[64], why[128];

    *code = DLOCK_ECONNECT;
    if (info != NULL)
        memset(info, 0, sizeof *info);
    fd = tcp_connect(a, timeout_ms, why, sizeof why);
    if (fd < 0) {
        dlock_errorf(err, errlen, DLOCK_ECONNECT, "connect to %s:%d: %s",
                     a->host, a->port, why);
        return NULL;
    }
    rc = redisConnectFd(fd);
    if (rc == NULL || rc->err != 0) {
        dlock_errorf(err, errlen, DLOCK_ENOMEM,
                     "cannot allocate a redis context");
        *code = DLOCK_ENOMEM;
        if (rc != NULL)
            redisFree(rc);
        else
            close(fd);
        return NULL;
    }
    redisSetTimeout(rc, tv);
    if (cf->password != NULL) {
        if (cf->user != NULL)
            redisAppendCommand(rc, "AUTH %s %s", cf->user, cf->password);
        else
            redisAppendCommand(rc, "AUTH %s", cf->password);
        what[nreplies++] = "AUTH";
    }
    if (cf->db != 0) {
        snprintf(dbs, sizeof dbs, "%u", cf->db);
        redisAppendCommand(rc, "SELECT %s", dbs);
        what[nreplies++] = "SELECT";
    }
    if (sha != NULL)
        for (int i = 0; i < SC_COUNT; i++) {
            redisAppendCommand(rc, "SCRIPT LOAD %s", scripts[i]);
            what[nreplies++] = "SCRIPT LOAD";
        }
    if (info != NULL) {
        redisAppendCommand(rc, "INFO server");
        what[nreplies++] = "INFO";
    }
    for (int i = 0, script = 0; i < nreplies; i++) {
        redisReply *r = NULL;

        if (redisGetReply(rc, (void **)&r) != REDIS_OK || r == NULL) {
            dlock_errorf(err, errlen, DLOCK_ECONNECT, "%s:%d: %s", a->host,
                         a->port, io_text(rc, tbuf, sizeof tbuf, timeout_ms));
            redisFree(rc);
            return NULL;
        }
        if (strcmp(what[i], "INFO") == 0) {
            info->at_ms = dlock_now_ms();
            if (r->type == REDIS_REPLY_STRING)
                info_parse(info, r->str);
            else
                snprintf(info->why, sizeof info->why, "INFO server: %s",
                         r->type == REDIS_REPLY_ERROR ? r->str
                                                      : "unexpected reply");
            freeReplyObject(r);
            continue;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            /* The server's own words; they never repeat the password. */
            dlock_errorf(err, errlen, DLOCK_ERROR, "%s:%d: %s: %s", a->host,
                         a->port, what[i], r->str);
            *code = DLOCK_ERROR;
            freeReplyObject(r);
            redisFree(rc);
            return NULL;
        }
        if (strcmp(what[i], "SCRIPT LOAD") == 0) {
            if (r->type != REDIS_REPLY_STRING || r->len != 40) {
                dlock_errorf(err, errlen, DLOCK_ERROR,
                             "%s:%d: SCRIPT LOAD: unexpected reply",
                             a->host, a->port);
                *code = DLOCK_ERROR;
                freeReplyObject(r);
                redisFree(rc);
                return NULL;
            }
            memcpy(sha[script], r->str, 40);
            sha[script++][40] = '\0';
        }
        freeReplyObject(r);
    }
    return rc;
}

static int is_noscript(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* ---- keys ------------------------------------------------------------------ */

/* A grow-only buffer: the keys of 64 KiB names in hash mode. */
struct buf {
    char *p;
    size_t len, cap;
};

static int buf_reserve(struct buf *b, size_t want)
{
    if (want <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 512;
    while (cap < want)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_set(struct buf *b, const char *a, size_t alen, const char *m,
                   size_t mlen, const char *z, size_t zlen)
{
    if (buf_reserve(b, alen + mlen + zlen + 1) != 0)
        return -1;
    memcpy(b->p, a, alen);
    memcpy(b->p + alen, m, mlen);
    memcpy(b->p + alen + mlen, z, zlen);
    b->len = alen + mlen + zlen;
    b->p[b->len] = '\0';
    return 0;
}

/*
 * The keys of one name.
 *
 * setnx/redlock: everything sits under one hash tag so that lock, fence and
 * channel share a cluster slot: "dlock:{<ns>:<name>}" for the lock,
 * "...:fence" and "...:released" for the others. The name inside the tag is
 * escaped by dlock_name_segment ('{', '}' and every byte outside
 * [A-Za-z0-9_.-] become %XX, so no name can close the tag early) and names
 * longer than SEG_MAX escaped bytes are cut and end in "~" and their
 * SHA-256: keys stay under ~430 bytes.
 *
 * hash: Redisson's names, exactly: the lock is the name itself (after
 * "<namespace>:" when namespace= is given), the channel and the token are
 * Redisson's prefixName(): "prefix:{name}", or "prefix:name" when the name
 * already has a '{' (then it carries its own hash tag).
 */
struct redis_keys {
    struct buf lock, fence, channel, rname;
};

static void keys_free(struct redis_keys *k)
{
    free(k->lock.p);
    free(k->fence.p);
    free(k->channel.p);
    free(k->rname.p);
}

static int prefix_name(struct buf *b, const char *prefix, const char *name,
                       size_t len)
{
    size_t plen = strlen(prefix);
    if (memchr(name, '{', len) != NULL) /* the name has its own tag */
        return buf_set(b, prefix, plen, ":", 1, name, len);
    if (buf_set(b, prefix, plen, ":{", 2, name, len) != 0 ||
        buf_reserve(b, b->len + 2) != 0)
        return -1;
    b->p[b->len++] = '}';
    b->p[b->len] = '\0';
    return 0;
}

static int keys_make(struct redis_keys *k, const struct redis_conf *cf,
                     const char *name, size_t len)
{
    if (cf->mode == MODE_HASH) {
        const char *ns = cf->raw_ns;
        if (ns != NULL) {
            if (buf_set(&k->rname, ns, strlen(ns), ":", 1, name, len) != 0)
                return -1;
        } else if (buf_set(&k->rname, name, len, "", 0, "", 0) != 0) {
            return -1;
        }
        return prefix_name(&k->channel, "redisson_lock__channel", k->rname.p,
                           k->rname.len) != 0 ||
               prefix_name(&k->fence, "redisson_lock_token", k->rname.p,
                           k->rname.len) != 0
                   ? -1
                   : 0;
    }
    char seg[SEG_MAX + 1], tag[2 * SEG_MAX + 16];
    size_t n = dlock_name_segment(seg, SEG_MAX, name, len);
    int t = snprintf(tag, sizeof tag, "dlock:{%s%s%.*s}", cf->ns,
                     cf->ns[0] != '\0' ? ":" : "", (int)n, seg);
    return buf_set(&k->lock, tag, (size_t)t, "", 0, "", 0) != 0 ||
                   buf_set(&k->fence, tag, (size_t)t, ":fence", 6, "", 0) !=
                       0 ||
                   buf_set(&k->channel, tag, (size_t)t, ":released", 9, "",
                           0) != 0
               ? -1
               : 0;
}

/* The key whose existence says "held": the lock key or Redisson's hash. */
static const struct buf *keys_lock(const struct redis_keys *k,
                                   const struct redis_conf *cf)
{
    return cf->mode == MODE_HASH ? &k->rname : &k->lock;
}

/* ---- the pub/sub context: one connection per client, one thread -------- */

enum chan_state { CH_NONE, CH_PENDING, CH_SUBSCRIBED, CH_LEAVING };

struct chan {
    struct chan *next;
    char *name;
    size_t len;
    int refs;                /* waiters inside wait() */
    enum chan_state state;
    uint64_t gen;            /* counts releases (and connection losses) */
    uint64_t confirmed_ns;   /* when the subscription was confirmed */
    uint64_t last_msg_ns;    /* when the last release was seen */
    int64_t idle_since_ms;   /* refs fell to 0 */
    pthread_cond_t cv;
};

/*
 * What a client knows of one server (a Redlock node, or the one server of
 * setnx/hash): who it is (run_id, new at every start) and since when it
 * has been up. Every new connection reads INFO server in its connect round
 * trip, so this costs no round trip of its own.
 */
struct server_ident {
    char run_id[41];     /* the last seen; "" until the first */
    uint64_t gen;        /* how many times run_id changed: restarts seen */
    int64_t up_since_ms; /* dlock_now_ms() clock: the latest moment the
                            server can have started (INT64_MIN unknown) */
    int64_t changed_ms;  /* when a new run_id was first seen, 0 never */
};

struct redis_ctx {
    struct redis_conf conf;
    /* The pub/sub part (setnx, hash), under mu. */
    pthread_mutex_t mu;
    struct chan *chans;
    pthread_t thread;
    bool started, stop;
    int wake_fd;            /* eventfd: work for the thread; -1 redlock */
    uint64_t epoch;         /* bumped when a connect attempt fails */
    bool connected;
    /* Who the servers are, under id_mu. */
    pthread_mutex_t id_mu;
    struct server_ident ident[REDLOCK_NODES_MAX];
    uint32_t longest_lease_ms; /* of every lease this client asked for */
};

static int ctx_open(void **out, const struct dlock_uri *uri, char *err,
                    size_t errlen)
{
    struct redis_ctx *x;
    int rc;

    *out = NULL;
    x = calloc(1, sizeof *x);
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    if ((rc = conf_parse(&x->conf, uri, err, errlen)) != DLOCK_OK) {
        free(x);
        return rc;
    }
    x->wake_fd = -1;
    /* Redlock waiters poll: no pub/sub thread, only the identities. */
    if (x->conf.mode != MODE_REDLOCK &&
        (x->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        conf_free(&x->conf);
        free(x);
        return dlock_errorf(err, errlen, DLOCK_ERROR, "eventfd: %s",
                            strerror(errno));
    }
    for (size_t i = 0; i < REDLOCK_NODES_MAX; i++)
        x->ident[i].up_since_ms = INT64_MIN;
    x->longest_lease_ms = x->conf.lease_ms;
    pthread_mutex_init(&x->mu, NULL);
    pthread_mutex_init(&x->id_mu, NULL);
    *out = x;
    return DLOCK_OK;
}

/*
 * A new connection to server i answered INFO: record who it is. Returns
 * the server's generation (restarts seen by this client); a restart is
 * described in note (if not NULL; "" otherwise), for the session's log.
 * in->run_id "" (INFO refused) changes nothing.
 *
 * uptime_in_seconds is whole seconds of the server's clock, both ends
 * rounded down, so the server started at most (uptime - 1) s before it
 * answered, and it answered before in->at_ms: in->at_ms - (uptime - 1) s
 * is the latest moment it can have started. Each reading gives such a
 * bound; the smallest is kept.
 */
static uint64_t ident_seen(struct redis_ctx *x, size_t i,
                           const struct server_info *in, char *note,
                           size_t cap)
{
    struct server_ident *id;
    int64_t up;
    uint64_t gen;

    if (note != NULL)
        note[0] = '\0';
    if (x == NULL)
        return 0;
    id = &x->ident[i];
    pthread_mutex_lock(&x->id_mu);
    if (in->run_id[0] != '\0') {
        up = in->at_ms - ((int64_t)in->uptime_s - 1) * 1000;
        if (id->run_id[0] != '\0' && strcmp(id->run_id, in->run_id) != 0) {
            if (note != NULL)
                snprintf(note, cap,
                         "redis: %s:%d restarted (run_id %.8s... is now "
                         "%.8s..., up %u s): it has forgotten every lock "
                         "it did not persist",
                         x->conf.hosts[i].host, x->conf.hosts[i].port,
                         id->run_id, in->run_id, in->uptime_s);
            id->gen++;
            id->changed_ms = in->at_ms;
            id->up_since_ms = up;
        } else if (id->run_id[0] == '\0' || up < id->up_since_ms) {
            id->up_since_ms = up;
        }
        memcpy(id->run_id, in->run_id, sizeof id->run_id);
    }
    gen = id->gen;
    pthread_mutex_unlock(&x->id_mu);
    return gen;
}

static void ctx_wake(struct redis_ctx *x)
{
    uint64_t one = 1;

    if (x->wake_fd < 0)
        return;
    /* EAGAIN: the counter is already non-zero, the thread will wake. */
    (void)!write(x->wake_fd, &one, sizeof one);
}

static struct chan *chan_find(struct redis_ctx *x, const char *name,
                              size_t len)
{
    for (struct chan *c = x->chans; c != NULL; c = c->next)
        if (c->len == len && memcmp(c->name, name, len) == 0)
            return c;
    return NULL;
}

static void chan_free(struct chan *c)
{
    pthread_cond_destroy(&c->cv);
    free(c->name);
    free(c);
}

/* Connection lost or never made: every subscription is gone; wake every
 * waiter so it retries (a restart may have freed its lock). Under mu. */
static void ctx_all_down(struct redis_ctx *x, bool failed_connect)
{
    struct chan **pp = &x->chans;

    x->connected = false;
    if (failed_connect)
        x->epoch++;
    while (*pp != NULL) {
        struct chan *c = *pp;
        if (c->refs == 0) {
            *pp = c->next;
            chan_free(c);
            continue;
        }
        if (c->state == CH_SUBSCRIBED || c->state == CH_PENDING ||
            c->state == CH_LEAVING)
            c->gen++;
        c->state = CH_NONE;
        pthread_cond_broadcast(&c->cv);
        pp = &c->next;
    }
}

static void ctx_on_reply(struct redis_ctx *x, redisReply *r)
{
    const char *kind;
    struct chan *c;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    kind = r->element[0]->str;
    c = chan_find(x, r->element[1]->str, r->element[1]->len);
    if (c == NULL)
        return;
    if (strcmp(kind, "message") == 0) {
        c->gen++;
        c->last_msg_ns = dlock_now_ns();
        pthread_cond_broadcast(&c->cv);
    } else if (strcmp(kind, "subscribe") == 0) {
        if (c->state == CH_PENDING) {
            c->state = CH_SUBSCRIBED;
            c->confirmed_ns = dlock_now_ns();
            pthread_cond_broadcast(&c->cv);
        }
    } else if (strcmp(kind, "unsubscribe") == 0) {
        if (c->state == CH_LEAVING) {
            if (c->refs == 0) {
                for (struct chan **pp = &x->chans; *pp != NULL;
                     pp = &(*pp)->next)
                    if (*pp == c) {
                        *pp = c->next;
                        break;
                    }
                chan_free(c);
            } else {
                c->state = CH_NONE; /* a waiter came back: subscribe again */
            }
        }
    }
}

/* Send SUBSCRIBE/UNSUBSCRIBE for what changed. Under mu; the writes are a
 * few bytes on a socket with a send timeout. Returns -1 on I/O error. */
static int ctx_sync_subs(struct redis_ctx *x, redisContext *rc)
{
    int64_t now = dlock_now_ms();
    int done = 0, any = 0;

    /* Channels nobody waits on any more that never got subscribed. */
    for (struct chan **pp = &x->chans; *pp != NULL;) {
        struct chan *c = *pp;
        if (c->refs == 0 && c->state == CH_NONE) {
            *pp = c->next;
            chan_free(c);
        } else {
            pp = &c->next;
        }
    }
    for (struct chan *c = x->chans; c != NULL; c = c->next) {
        if (c->refs > 0 && c->state == CH_NONE) {
            redisAppendCommand(rc, "SUBSCRIBE %b", c->name, c->len);
            c->state = CH_PENDING;
            any = 1;
        } else if (c->refs == 0 && c->state == CH_SUBSCRIBED &&
                   now - c->idle_since_ms >= LINGER_MS) {
            redisAppendCommand(rc, "UNSUBSCRIBE %b", c->name, c->len);
            c->state = CH_LEAVING;
            any = 1;
        }
    }
    while (any && !done)
        if (redisBufferWrite(rc, &done) != REDIS_OK)
            return -1;
    return 0;
}

static bool ctx_wanted(struct redis_ctx *x)
{
    for (struct chan *c = x->chans; c != NULL; c = c->next)
        if (c->refs > 0)
            return true;
    return false;
}

static void *ctx_main(void *arg)
{
    struct redis_ctx *x = arg;
    redisContext *rc = NULL;
    int64_t next_connect = 0;
    uint32_t backoff = 50;
    char err[256];

    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        int64_t now = dlock_now_ms();
        struct pollfd pf[2];
        int n = 1, timeout = 500, code;

        if (rc == NULL && ctx_wanted(x) && now >= next_connect) {
            pthread_mutex_unlock(&x->mu);
            rc = redis_connect(&x->conf, &x->conf.hosts[0],
                               x->conf.timeout_ms, NULL, NULL, err,
                               sizeof err, &code);
            pthread_mutex_lock(&x->mu);
            if (rc == NULL) {
                ctx_all_down(x, true);
                next_connect = dlock_now_ms() + backoff;
                backoff = backoff < 1000 ? backoff * 2 : 1000;
                continue;
            }
            backoff = 50;
            x->connected = true;
        }
        if (rc != NULL && ctx_sync_subs(x, rc) != 0) {
            redisFree(rc);
            rc = NULL;
            ctx_all_down(x, false);
            continue;
        }
        pf[0].fd = x->wake_fd;
        pf[0].events = POLLIN;
        if (rc != NULL) {
            pf[1].fd = rc->fd;
            pf[1].events = POLLIN;
            n = 2;
        } else if (ctx_wanted(x)) {
            timeout = (int)(next_connect > now ? next_connect - now : 0);
        }
        pthread_mutex_unlock(&x->mu);
        poll(pf, (nfds_t)n, timeout);
        if (pf[0].revents & POLLIN) {
            uint64_t v;
            if (read(x->wake_fd, &v, sizeof v) < 0)
                v = 0;
        }
        pthread_mutex_lock(&x->mu);
        if (n == 2 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            redisReply *r = NULL;
            if (redisBufferRead(rc) != REDIS_OK) {
                redisFree(rc);
                rc = NULL;
                ctx_all_down(x, false);
                continue;
            }
            while (redisGetReplyFromReader(rc, (void **)&r) == REDIS_OK &&
                   r != NULL) {
                ctx_on_reply(x, r);
                freeReplyObject(r);
                r = NULL;
            }
            if (rc->err != 0) {
                redisFree(rc);
                rc = NULL;
                ctx_all_down(x, false);
            }
        }
    }
    pthread_mutex_unlock(&x->mu);
    if (rc != NULL)
        redisFree(rc);
    return NULL;
}

static void ctx_close(void *ctx)
{
    struct redis_ctx *x = ctx;
    bool started;

    if (x == NULL)
        return;
    pthread_mutex_lock(&x->mu);
    x->stop = true;
    started = x->started;
    pthread_mutex_unlock(&x->mu);
    ctx_wake(x);
    if (started)
        pthread_join(x->thread, NULL);
    while (x->chans != NULL) {
        struct chan *c = x->chans;
        x->chans = c->next;
        chan_free(c);
    }
    if (x->wake_fd >= 0)
        close(x->wake_fd);
    pthread_mutex_destroy(&x->mu);
    pthread_mutex_destroy(&x->id_mu);
    conf_free(&x->conf);
    free(x);
}

/* ---- single-node sessions ------------------------------------------------ */

struct rl_node;

struct redis_session {
    struct dlock_session base;
    struct redis_conf conf;
    struct redis_ctx *ctx;  /* the client's (NULL in the floor) */
    redisContext *rc;       /* single node */
    uint64_t gen;           /* single node: its generation at connect */
    char note[256];         /* a restart seen at connect, to log */
    redis_sha sha[SC_COUNT];
    struct redis_keys keys;
    uint64_t attempt_ns;    /* when the last acquire was sent */
    /* Redlock */
    struct rl_node *nodes;
    size_t nnodes, quorum;
};

/* Log a restart seen while connecting, once (open() cannot log yet). */
static void rs_log_note(struct redis_session *rs)
{
    if (rs->note[0] != '\0') {
        dlock_session_log(&rs->base, DLOCK_LOG_WARN, "%s", rs->note);
        rs->note[0] = '\0';
    }
}

static int rs_io_error(struct redis_session *rs, int code, const char *op)
{
    char tbuf[64];
    return dlock_session_error(&rs->base, code, "%s: %s", op,
                               io_text(rs->rc, tbuf, sizeof tbuf,
                                       rs->conf.timeout_ms));
}

/* Run one of the mode's scripts: EVALSHA, and EVAL of the text if the
 * server forgot it. args are KEYS then ARGV. */
static redisReply *rs_script(struct redis_session *rs, int which, int nkeys,
                             int nargs, const char **args, const size_t *lens)
{
    const char *argv[8];
    size_t argvlen[8];
    char nk[4];
    redisReply *r;

    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = rs->sha[which];
    argvlen[1] = 40;
    argv[2] = nk;
    argvlen[2] = strlen(nk);
    for (int i = 0; i < nargs; i++) {
        argv[3 + i] = args[i];
        argvlen[3 + i] = lens[i];
    }
    r = redisCommandArgv(rs->rc, 3 + nargs, argv, argvlen);
    if (is_noscript(r)) {
        freeReplyObject(r);
        argv[0] = "EVAL";
        argvlen[0] = 4;
        argv[1] = mode_scripts[rs->conf.mode][which];
        argvlen[1] = strlen(argv[1]);
        r = redisCommandArgv(rs->rc, 3 + nargs, argv, argvlen);
    }
    return r;
}

static int reply_pair(const redisReply *r, long long *a, long long *b)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    *a = r->element[0]->integer;
    *b = r->element[1]->integer;
    return 0;
}

static int rs_reply_error(struct redis_session *rs, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR)
        return dlock_session_error(&rs->base, DLOCK_ERROR, "server: %s",
                                   r->str);
    return dlock_session_error(&rs->base, DLOCK_ERROR,
                               "unexpected reply type %d", r->type);
}

static void rl_close_nodes(struct redis_session *rs);
static int rl_open(struct redis_session *rs, char *err, size_t errlen);

static int redis_open(struct dlock_session **out, const struct dlock_uri *uri,
                      void *ctx, char *err, size_t errlen)
{
    struct redis_session *rs = calloc(1, sizeof *rs);
    int rc, code;

    if (rs == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    if ((rc = conf_parse(&rs->conf, uri, err, errlen)) != DLOCK_OK) {
        free(rs);
        return rc;
    }
    rs->ctx = ctx;
    rs->base.backend = &dlock__backend_redis;
    rs->base.mode = mode_names[rs->conf.mode];
    rs->base.caps = DLOCK_CAP_LEASE | DLOCK_CAP_SURVIVES_RECONNECT |
                    DLOCK_CAP_BATCH_RENEW;
    if (rs->conf.mode == MODE_REDLOCK) {
        /* Waiters poll the majority; the hint is the smallest TTL seen. */
        rs->base.retry_min_ms = 5;
        rs->base.retry_max_ms = 200;
        if ((rc = rl_open(rs, err, errlen)) != DLOCK_OK) {
            conf_free(&rs->conf);
            free(rs);
            return rc;
        }
    } else {
        rs->base.caps |= DLOCK_CAP_NOTIFY | DLOCK_CAP_FENCING;
        /* The wait is woken by the release; retry_max bounds one wait when
         * a release message cannot come (pub/sub down). */
        rs->base.retry_min_ms = 5;
        rs->base.retry_max_ms = 1000;
        struct server_info info;
        rs->rc = redis_connect(&rs->conf, &rs->conf.hosts[0],
                               rs->conf.timeout_ms, rs->sha, &info, err,
                               errlen, &code);
        if (rs->rc == NULL) {
            conf_free(&rs->conf);
            free(rs);
            return code;
        }
        rs->gen = ident_seen(rs->ctx, 0, &info, rs->note, sizeof rs->note);
        /* [B-WATCH-1]: the moment this connection ends (a restart closes
         * it), core puts the client's locks in doubt and renews them at
         * once; the renewal, on a new connection, finds whether the
         * server still has them. */
        dlock_session_watch(&rs->base, rs->rc->fd);
    }
    *out = &rs->base;
    return DLOCK_OK;
}

static void redis_close(struct dlock_session *s)
{
    struct redis_session *rs = (struct redis_session *)s;

    if (rs->rc != NULL) {
        dlock_session_watch(s, -1);
        redisFree(rs->rc);
    }
    rl_close_nodes(rs);
    keys_free(&rs->keys);
    conf_free(&rs->conf);
    free(rs);
}

static int rl_acquire(struct redis_session *rs,
                      const struct dlock_request *req,
                      struct dlock_grant *grant, uint32_t *retry_ms);
static int rl_renew(struct redis_session *rs, struct dlock_renewal *items,
                    size_t n);
static int rl_release(struct redis_session *rs,
                      const struct dlock_request *req);
static int rl_inspect(struct redis_session *rs, const char *name, size_t len,
                      dlock_state *out);

static int redis_acquire(struct dlock_session *s,
                         const struct dlock_request *req, int64_t deadline_ms,
                         struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct redis_session *rs = (struct redis_session *)s;
    const char *args[4];
    size_t lens[4];
    char lease[16];
    long long ok, val;
    redisReply *r;

    (void)deadline_ms; /* no native wait: core waits through wait() */
    rs_log_note(rs);
    if (keys_make(&rs->keys, &rs->conf, req->name, req->name_len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    if (rs->conf.mode == MODE_REDLOCK)
        return rl_acquire(rs, req, grant, retry_ms);
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    if (rs->conf.mode == MODE_HASH) {
        args[0] = rs->keys.rname.p, lens[0] = rs->keys.rname.len;
        args[1] = rs->keys.fence.p, lens[1] = rs->keys.fence.len;
        args[2] = lease, lens[2] = strlen(lease);
        args[3] = req->owner, lens[3] = req->owner_len;
    } else {
        args[0] = rs->keys.lock.p, lens[0] = rs->keys.lock.len;
        args[1] = rs->keys.fence.p, lens[1] = rs->keys.fence.len;
        args[2] = req->owner, lens[2] = req->owner_len;
        args[3] = lease, lens[3] = strlen(lease);
    }
    /* [B-WAIT-1]: wait() compares release times with this. */
    rs->attempt_ns = dlock_now_ns();
    r = rs_script(rs, SC_ACQUIRE, 2, 4, args, lens);
    if (r == NULL)
        return rs_io_error(rs, DLOCK_ECONNECT, "acquire");
    if (reply_pair(r, &ok, &val) != 0) {
        int code = rs_reply_error(rs, r);
        freeReplyObject(r);
        return code;
    }
    freeReplyObject(r);
    if (ok == 1) {
        grant->fence = (uint64_t)val;
        grant->word[0] = rs->gen; /* the server's life it was granted in */
        return DLOCK_OK;
    }
    /* PTTL 0 or -2: the key expires (or expired) right now, and an expiry
     * publishes nothing, so retry at once rather than wait for a release
     * message. -1 (a key without TTL, not ours): no hint, wait for one. */
    if (val > 0)
        *retry_ms = val > UINT32_MAX ? UINT32_MAX : (uint32_t)val;
    else if (val == 0 || val == -2)
        *retry_ms = 1;
    return DLOCK_EBUSY;
}

/*
 * Block until a release of req->name is announced or max_ms pass
 * [B-WAIT-1]. If the channel was subscribed before the last attempt was
 * sent, a release after that attempt shows as a newer message. Otherwise
 * subscribe, wait for the confirmation, then look at the lock key on this
 * session: gone means a release slipped in before the subscription.
 */
static int redis_wait(struct dlock_session *s,
                      const struct dlock_request *req, uint32_t max_ms)
{
    struct redis_session *rs = (struct redis_session *)s;
    struct redis_ctx *x = rs->ctx;
    int64_t deadline = dlock_now_ms() + max_ms;
    const struct buf *ck;
    struct chan *c;
    bool recheck;
    uint64_t gen0, epoch0;
    int rc = DLOCK_OK;

    rs_log_note(rs);
    if (x == NULL || rs->conf.mode == MODE_REDLOCK || max_ms == 0)
        return DLOCK_OK; /* Redlock has no NOTIFY: core never asks */
    if (keys_make(&rs->keys, &rs->conf, req->name, req->name_len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    ck = &rs->keys.channel;

    pthread_mutex_lock(&x->mu);
    if (!x->started && !x->stop) {
        if (pthread_create(&x->thread, NULL, ctx_main, x) != 0) {
            pthread_mutex_unlock(&x->mu);
            return dlock_session_error(s, DLOCK_ENOMEM,
                                       "cannot start the pub/sub thread");
        }
        x->started = true;
    }
    c = chan_find(x, ck->p, ck->len);
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL || (c->name = malloc(ck->len + 1)) == NULL) {
            free(c);
            pthread_mutex_unlock(&x->mu);
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
        }
        memcpy(c->name, ck->p, ck->len + 1);
        c->len = ck->len;
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&c->cv, &attr);
        pthread_condattr_destroy(&attr);
        c->next = x->chans;
        x->chans = c;
    }
    c->refs++;
    if (c->state == CH_SUBSCRIBED && c->confirmed_ns < rs->attempt_ns) {
        recheck = false;
        if (c->last_msg_ns > rs->attempt_ns)
            goto out; /* released since the attempt */
    } else {
        recheck = true;
        epoch0 = x->epoch;
        if (c->state == CH_NONE)
            ctx_wake(x);
        while (c->state != CH_SUBSCRIBED && x->epoch == epoch0 && !x->stop) {
            struct timespec ts = {(time_t)(deadline / 1000),
                                  (long)(deadline % 1000) * 1000000L};
            if (dlock_now_ms() >= deadline ||
                pthread_cond_timedwait(&c->cv, &x->mu, &ts) == ETIMEDOUT)
                break;
        }
        if (c->state != CH_SUBSCRIBED)
            goto out; /* pub/sub unreachable: core retries the lock */
    }
    gen0 = c->gen;
    pthread_mutex_unlock(&x->mu);

    if (recheck) {
        /* The release may have come before we were subscribed. */
        const struct buf *lk = keys_lock(&rs->keys, &rs->conf);
        redisReply *r = redisCommand(rs->rc, "PTTL %b", lk->p, lk->len);
        if (r == NULL) {
            rc = rs_io_error(rs, DLOCK_ECONNECT, "wait");
            pthread_mutex_lock(&x->mu);
            goto out;
        }
        long long pttl = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        freeReplyObject(r);
        pthread_mutex_lock(&x->mu);
        if (pttl == -2)
            goto out; /* free now */
        if (pttl > 0 && dlock_now_ms() + pttl < deadline)
            deadline = dlock_now_ms() + pttl; /* expires unannounced */
    } else {
        pthread_mutex_lock(&x->mu);
    }
    while (c->gen == gen0 && !x->stop) {
        struct timespec ts = {(time_t)(deadline / 1000),
                              (long)(deadline % 1000) * 1000000L};
        if (dlock_now_ms() >= deadline ||
            pthread_cond_timedwait(&c->cv, &x->mu, &ts) == ETIMEDOUT)
            break;
    }
out:
    if (--c->refs == 0) {
        c->idle_since_ms = dlock_now_ms();
        if (c->state != CH_SUBSCRIBED)
            ctx_wake(x); /* let the thread tidy up */
    }
    pthread_mutex_unlock(&x->mu);
    return rc;
}

/* A renewal's verdict on one item from the script's answer (1: extended).
 * A lock granted in an earlier life of the server (it restarted since:
 * its run_id changed) was kept only if the server persisted it; then it
 * carries on in this life. */
static int renew_verdict(struct redis_session *rs, struct dlock_grant *g,
                         bool extended)
{
    if (extended) {
        g->word[0] = rs->gen;
        return DLOCK_OK;
    }
    if (g->word[0] != rs->gen)
        return dlock_session_error(
            &rs->base, DLOCK_ELOST,
            "the server restarted since the lock was taken (its run_id "
            "changed) and has forgotten it (no persistence)");
    return dlock_session_error(&rs->base, DLOCK_ELOST,
                               "the lock is gone or held by another owner "
                               "(its lease ran out, or the server lost it)");
}

/* Renew n leases in one round trip: every script appended, then n replies
 * read [5: watchdog batching]. */
static int redis_renew(struct dlock_session *s, struct dlock_renewal *items,
                       size_t n)
{
    struct redis_session *rs = (struct redis_session *)s;
    char lease[16];
    int redo = 0;

    rs_log_note(rs);
    if (rs->conf.mode == MODE_REDLOCK)
        return rl_renew(rs, items, n);
    for (size_t i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        const char *argv[6];
        size_t lens[6];
        if (keys_make(&rs->keys, &rs->conf, req->name, req->name_len) != 0)
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
        snprintf(lease, sizeof lease, "%u", req->lease_ms);
        argv[0] = "EVALSHA", lens[0] = 7;
        argv[1] = rs->sha[SC_RENEW], lens[1] = 40;
        argv[2] = "1", lens[2] = 1;
        if (rs->conf.mode == MODE_HASH) {
            argv[3] = rs->keys.rname.p, lens[3] = rs->keys.rname.len;
            argv[4] = lease, lens[4] = strlen(lease);
            argv[5] = req->owner, lens[5] = req->owner_len;
        } else {
            argv[3] = rs->keys.lock.p, lens[3] = rs->keys.lock.len;
            argv[4] = req->owner, lens[4] = req->owner_len;
            argv[5] = lease, lens[5] = strlen(lease);
        }
        if (redisAppendCommandArgv(rs->rc, 6, argv, lens) != REDIS_OK)
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(rs->rc, (void **)&r) != REDIS_OK || r == NULL)
            return rs_io_error(rs, DLOCK_ECONNECT, "renew");
        if (is_noscript(r)) {
            items[i].result = DLOCK_EBUSY; /* marker: run again below */
            redo = 1;
        } else if (r->type == REDIS_REPLY_INTEGER) {
            items[i].result =
                renew_verdict(rs, items[i].grant, r->integer == 1);
        } else {
            items[i].result = rs_reply_error(rs, r);
        }
        freeReplyObject(r);
    }
    /* The server lost its script cache (SCRIPT FLUSH): one by one by EVAL. */
    for (size_t i = 0; redo && i < n; i++) {
        const struct dlock_request *req = items[i].req;
        const char *args[3];
        size_t lens[3];
        redisReply *r;
        if (items[i].result != DLOCK_EBUSY)
            continue;
        keys_make(&rs->keys, &rs->conf, req->name, req->name_len);
        snprintf(lease, sizeof lease, "%u", req->lease_ms);
        args[0] = keys_lock(&rs->keys, &rs->conf)->p;
        lens[0] = keys_lock(&rs->keys, &rs->conf)->len;
        args[1] = rs->conf.mode == MODE_HASH ? lease : req->owner;
        lens[1] = strlen(args[1]);
        args[2] = rs->conf.mode == MODE_HASH ? req->owner : lease;
        lens[2] = strlen(args[2]);
        r = rs_script(rs, SC_RENEW, 1, 3, args, lens);
        if (r == NULL)
            return rs_io_error(rs, DLOCK_ECONNECT, "renew");
        items[i].result = renew_verdict(
            rs, items[i].grant,
            r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        freeReplyObject(r);
    }
    return DLOCK_OK;
}

static int redis_release(struct dlock_session *s,
                         const struct dlock_request *req,
                         struct dlock_grant *grant)
{
    struct redis_session *rs = (struct redis_session *)s;
    const char *args[5];
    size_t lens[5];
    char lease[16];
    redisReply *r;
    int code;

    rs_log_note(rs);
    if (keys_make(&rs->keys, &rs->conf, req->name, req->name_len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    if (rs->conf.mode == MODE_REDLOCK)
        return rl_release(rs, req);
    if (rs->conf.mode == MODE_HASH) {
        snprintf(lease, sizeof lease, "%u", req->lease_ms);
        args[0] = rs->keys.rname.p, lens[0] = rs->keys.rname.len;
        args[1] = rs->keys.channel.p, lens[1] = rs->keys.channel.len;
        args[2] = "0", lens[2] = 1; /* Redisson's UNLOCK_MESSAGE */
        args[3] = lease, lens[3] = strlen(lease);
        args[4] = req->owner, lens[4] = req->owner_len;
        r = rs_script(rs, SC_RELEASE, 2, 5, args, lens);
    } else {
        args[0] = rs->keys.lock.p, lens[0] = rs->keys.lock.len;
        args[1] = rs->keys.channel.p, lens[1] = rs->keys.channel.len;
        args[2] = req->owner, lens[2] = req->owner_len;
        r = rs_script(rs, SC_RELEASE, 2, 3, args, lens);
    }
    if (r == NULL)
        return rs_io_error(rs, DLOCK_ECONNECT, "release");
    if (r->type != REDIS_REPLY_INTEGER)
        code = rs_reply_error(rs, r);
    else if (r->integer >= 0 && (r->integer == 1 || rs->conf.mode == MODE_HASH))
        code = DLOCK_OK;
    else if (grant->word[0] != rs->gen)
        code = dlock_session_error(s, DLOCK_ELOST,
                                   "not released: the server restarted "
                                   "since the lock was taken (its run_id "
                                   "changed) and had forgotten it");
    else
        code = dlock_session_error(s, DLOCK_ENOTOWNER,
                                   "not released: the lock is free or "
                                   "another owner's (our lease ran out)");
    freeReplyObject(r);
    return code;
}

static void copy_owner(dlock_state *out, const char *s, size_t len)
{
    if (len >= sizeof out->owner)
        len = sizeof out->owner - 1;
    memcpy(out->owner, s, len);
    out->owner[len] = '\0';
}

static int redis_inspect(struct dlock_session *s, const char *name,
                         size_t len, dlock_state *out)
{
    struct redis_session *rs = (struct redis_session *)s;
    const struct buf *lk;
    redisReply *r[3] = {NULL, NULL, NULL};
    int code = DLOCK_OK;

    rs_log_note(rs);
    if (keys_make(&rs->keys, &rs->conf, name, len) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    if (rs->conf.mode == MODE_REDLOCK)
        return rl_inspect(rs, name, len, out);
    lk = keys_lock(&rs->keys, &rs->conf);
    if (rs->conf.mode == MODE_HASH)
        redisAppendCommand(rs->rc, "HGETALL %b", lk->p, lk->len);
    else
        redisAppendCommand(rs->rc, "GET %b", lk->p, lk->len);
    redisAppendCommand(rs->rc, "PTTL %b", lk->p, lk->len);
    redisAppendCommand(rs->rc, "GET %b", rs->keys.fence.p,
                       rs->keys.fence.len);
    for (int i = 0; i < 3; i++)
        if (redisGetReply(rs->rc, (void **)&r[i]) != REDIS_OK ||
            r[i] == NULL) {
            code = rs_io_error(rs, DLOCK_ECONNECT, "inspect");
            goto done;
        }
    out->held = 0;
    if (r[0]->type == REDIS_REPLY_STRING) {
        out->held = 1;
        copy_owner(out, r[0]->str, r[0]->len);
    } else if (r[0]->type == REDIS_REPLY_ARRAY && r[0]->elements >= 2) {
        out->held = 1;
        copy_owner(out, r[0]->element[0]->str, r[0]->element[0]->len);
    } else if (r[0]->type == REDIS_REPLY_ERROR) {
        code = rs_reply_error(rs, r[0]);
        goto done;
    }
    if (r[1]->type == REDIS_REPLY_INTEGER && r[1]->integer >= 0)
        out->remaining_ms = r[1]->integer;
    if (r[2]->type == REDIS_REPLY_STRING)
        out->fence = strtoull(r[2]->str, NULL, 10);
    out->waiters = -1; /* PUBSUB NUMSUB counts clients, not waiters */
done:
    for (int i = 0; i < 3; i++)
        if (r[i] != NULL)
            freeReplyObject(r[i]);
    return code;
}

/* ---- Redlock --------------------------------------------------------------- */

/*
 * One connection per node. A round sends the same commands to every live
 * node, then reads the replies of all of them as they come (poll on all
 * sockets) until one shared deadline, node_timeout after the start: so N
 * nodes cost one round trip of the slowest, not N, and a dead or paused
 * node costs at most node_timeout. A node that did not answer in time is
 * disconnected (its replies would come later, out of step) and retried
 * with backoff on a later call.
 *
 * Delayed restarts (the Redlock paper's answer to nodes without
 * persistence). A node that restarts comes back empty: a lock that had
 * exactly a majority, this node included, would be free on a majority at
 * once, while its holder still believes it holds. So a node counts for
 * nothing, neither for an acquire nor for a renewal, until it has been up
 * for longer than any lease taken on it: restart_delay, raised to the
 * longest lease this client has asked for. Every holder's belief rests on
 * a grant or renewal sent before the restart, and ends within one lease
 * of it, before the node counts again. The client reads each node's
 * run_id and uptime (INFO server, in the connect round trip); a run_id
 * unlike the one seen before is a restart too, whatever its uptime (a
 * server replaced behind the address), counted from when it was seen. An
 * excluded node still gets every command (it learns new locks, and
 * releases), and its "not yours" counts: it has lost the key for good.
 */
struct rl_node {
    redisContext *rc;  /* NULL while down */
    int64_t retry_at;  /* no reconnect before this (dlock_now_ms) */
    uint32_t backoff;
    bool sent;         /* in the current round */
    size_t got;        /* replies read in the current round */
    redisReply **rep;  /* [ncmds] of the current round */
    size_t repcap;
    char err[320];     /* why it is down, for messages */
};

static void rl_node_down(struct rl_node *nd, const char *why)
{
    /* why may point into nd->rc: copy it before the free. */
    if (why != nd->err)
        snprintf(nd->err, sizeof nd->err, "%s", why);
    if (nd->rc != NULL) {
        redisFree(nd->rc);
        nd->rc = NULL;
    }
    nd->backoff = nd->backoff == 0 ? 100 : nd->backoff * 2;
    if (nd->backoff > 2000)
        nd->backoff = 2000;
    nd->retry_at = dlock_now_ms() + nd->backoff;
}

static void rl_close_nodes(struct redis_session *rs)
{
    for (size_t i = 0; rs->nodes != NULL && i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
        if (nd->rc != NULL)
            redisFree(nd->rc);
        for (size_t k = 0; k < nd->got; k++)
            freeReplyObject(nd->rep[k]);
        free(nd->rep);
    }
    free(rs->nodes);
    rs->nodes = NULL;
}

/* The restart delay in force: restart_delay=, raised to the URI's lease
 * and the longest lease this client has asked for (longest_lease_ms starts
 * at the URI's); 0 when turned off. Under id_mu. */
static uint32_t rl_delay_locked(const struct redis_ctx *x)
{
    if (x->conf.restart_delay_ms == 0)
        return 0;
    return x->conf.restart_delay_ms > x->longest_lease_ms
               ? x->conf.restart_delay_ms
               : x->longest_lease_ms;
}

/* Remember a lease asked for: it raises the restart delay for good. */
static void rl_note_lease(struct redis_session *rs, uint32_t lease_ms)
{
    struct redis_ctx *x = rs->ctx;

    if (x == NULL)
        return;
    pthread_mutex_lock(&x->id_mu);
    if (lease_ms > x->longest_lease_ms)
        x->longest_lease_ms = lease_ms;
    pthread_mutex_unlock(&x->id_mu);
}

/*
 * Which nodes count at now (bit i for node i), and, in *wait_ms, how long
 * until the first one left out counts (0 if none). Clocks: up_since is a
 * bound on the server's clock brought to ours; the drift allowance of a
 * lease (1 % + drift=) is added for the rates of the two.
 */
static uint32_t rl_counting(struct redis_session *rs, int64_t now,
                            int64_t *wait_ms, uint32_t *delay_out)
{
    struct redis_ctx *x = rs->ctx;
    uint32_t mask = 0, delay;
    int64_t wait = 0;

    *wait_ms = 0;
    *delay_out = 0;
    if (x == NULL)
        return (uint32_t)((1u << rs->nnodes) - 1);
    pthread_mutex_lock(&x->id_mu);
    delay = rl_delay_locked(x);
    for (size_t i = 0; i < rs->nnodes; i++) {
        const struct server_ident *id = &x->ident[i];
        int64_t since, from;
        if (delay == 0) {
            mask |= 1u << i;
            continue;
        }
        if (id->run_id[0] == '\0')
            continue; /* never reached: it cannot have answered */
        since = id->up_since_ms > id->changed_ms ? id->up_since_ms
                                                 : id->changed_ms;
        from = since + (int64_t)delay + delay / 100 + rs->conf.drift_ms;
        if (now >= from)
            mask |= 1u << i;
        else if (wait == 0 || from - now < wait)
            wait = from - now;
    }
    pthread_mutex_unlock(&x->id_mu);
    *wait_ms = wait;
    *delay_out = delay;
    return mask;
}

/*
 * Reconnect the nodes that are down and due, reading who each one is.
 * With fewer than a majority connected every call would fail: then every
 * node is tried at once, backoff or not (a round that timed out on a
 * loaded machine must not make the next call fail unsent).
 */
static void rl_reconnect(struct redis_session *rs, bool force)
{
    struct pollfd pf[REDLOCK_NODES_MAX];
    int64_t now = dlock_now_ms();
    char err[400], note[256];
    size_t up = 0;
    int code;

    /* A connection between rounds has nothing to say: anything to read
     * is its end (a node that restarted closed it). Find those now, in
     * one poll that does not wait, rather than lose the node for the
     * coming round. */
    for (size_t i = 0; i < rs->nnodes; i++) {
        pf[i].fd = rs->nodes[i].rc != NULL ? rs->nodes[i].rc->fd : -1;
        pf[i].events = POLLIN | POLLRDHUP;
        pf[i].revents = 0;
    }
    if (poll(pf, (nfds_t)rs->nnodes, 0) > 0)
        for (size_t i = 0; i < rs->nnodes; i++)
            if (pf[i].revents != 0) {
                rl_node_down(&rs->nodes[i], "the node closed the "
                                            "connection");
                rs->nodes[i].retry_at = 0; /* at once */
            }
    for (size_t i = 0; i < rs->nnodes; i++)
        up += rs->nodes[i].rc != NULL;
    if (up < rs->quorum)
        force = true;
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
        struct server_info info;
        if (nd->rc != NULL || (!force && now < nd->retry_at))
            continue;
        nd->rc = redis_connect(&rs->conf, &rs->conf.hosts[i],
                               rs->conf.node_timeout_ms, rs->sha, &info, err,
                               sizeof err, &code);
        if (nd->rc == NULL) {
            rl_node_down(nd, err);
            continue;
        }
        if (info.run_id[0] == '\0' && rs->conf.restart_delay_ms != 0) {
            snprintf(err, sizeof err,
                     "%s:%d: %s; the delayed restart needs run_id and "
                     "uptime (allow INFO, or restart_delay=0 where every "
                     "write is persisted)",
                     rs->conf.hosts[i].host, rs->conf.hosts[i].port,
                     info.why);
            rl_node_down(nd, err);
            continue;
        }
        ident_seen(rs->ctx, i, &info, note, sizeof note);
        if (note[0] != '\0')
            snprintf(rs->note, sizeof rs->note, "%s", note);
        nd->backoff = 0;
    }
}

static int rl_open(struct redis_session *rs, char *err, size_t errlen)
{
    size_t up = 0;

    rs->nnodes = rs->conf.nhosts;
    rs->quorum = rs->nnodes / 2 + 1;
    rs->nodes = calloc(rs->nnodes, sizeof *rs->nodes);
    if (rs->nodes == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    rl_reconnect(rs, true);
    for (size_t i = 0; i < rs->nnodes; i++)
        up += rs->nodes[i].rc != NULL;
    if (up < rs->quorum) {
        const char *why = "";
        for (size_t i = 0; i < rs->nnodes && why[0] == '\0'; i++)
            if (rs->nodes[i].rc == NULL)
                why = rs->nodes[i].err;
        dlock_errorf(err, errlen, DLOCK_ECONNECT,
                     "%zu of %zu Redlock nodes reachable, a majority is "
                     "%zu (%s)",
                     up, rs->nnodes, rs->quorum, why);
        rl_close_nodes(rs);
        return DLOCK_ECONNECT;
    }
    return DLOCK_OK;
}

static void rl_free_replies(struct redis_session *rs)
{
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
        for (size_t k = 0; k < nd->got; k++)
            freeReplyObject(nd->rep[k]);
        nd->got = 0;
        nd->sent = false;
    }
}

/* One command of a round: the same argv goes to every node. */
struct rl_cmd {
    int argc;
    const char *argv[8];
    size_t lens[8];
};

/*
 * Send cmds[0..ncmds) to every live node, read until each answered all or
 * deadline_ns passed. Afterwards nd->got == ncmds for the nodes that
 * answered in full (their replies in nd->rep); the others are down.
 * Returns the number of nodes that answered in full, or -1 (no memory).
 */
static int rl_round(struct redis_session *rs, struct rl_cmd *cmds,
                    size_t ncmds, uint64_t deadline_ns)
{
    struct pollfd pf[REDLOCK_NODES_MAX];
    size_t map[REDLOCK_NODES_MAX];
    int full = 0;

    for (size_t i = 0; i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
        int done = 0;
        nd->got = 0;
        nd->sent = false;
        if (nd->rc == NULL)
            continue;
        if (nd->repcap < ncmds) {
            redisReply **p = realloc(nd->rep, ncmds * sizeof *p);
            if (p == NULL)
                return -1;
            nd->rep = p;
            nd->repcap = ncmds;
        }
        for (size_t k = 0; k < ncmds; k++)
            redisAppendCommandArgv(nd->rc, cmds[k].argc, cmds[k].argv,
                                   cmds[k].lens);
        while (!done)
            if (redisBufferWrite(nd->rc, &done) != REDIS_OK)
                break;
        if (!done) {
            rl_node_down(nd, nd->rc->errstr);
            continue;
        }
        nd->sent = true;
    }
    for (bool last = false; !last;) {
        size_t k = 0;
        uint64_t now = dlock_now_ns();
        int ms = 0;
        for (size_t i = 0; i < rs->nnodes; i++) {
            struct rl_node *nd = &rs->nodes[i];
            if (!nd->sent || nd->got == ncmds)
                continue;
            pf[k].fd = nd->rc->fd;
            pf[k].events = POLLIN;
            pf[k].revents = 0;
            map[k++] = i;
        }
        if (k == 0)
            break;
        /* Past the deadline, one more look without waiting: on a loaded
         * machine this thread can be off the CPU past the deadline while
         * the answers sit in the sockets, and a node is down only if it
         * did not answer. (Late answers are safe: the validity counts the
         * time the round took.) */
        if (now >= deadline_ns)
            last = true;
        else
            ms = (int)((deadline_ns - now + 999999) / 1000000);
        if (poll(pf, (nfds_t)k, ms) < 0 && errno != EINTR)
            break;
        for (size_t j = 0; j < k; j++) {
            struct rl_node *nd = &rs->nodes[map[j]];
            redisReply *r = NULL;
            if (pf[j].revents == 0)
                continue;
            if (redisBufferRead(nd->rc) != REDIS_OK) {
                rl_node_down(nd, nd->rc->errstr[0] ? nd->rc->errstr
                                                   : "connection lost");
                nd->sent = false;
                continue;
            }
            while (nd->got < ncmds &&
                   redisGetReplyFromReader(nd->rc, (void **)&r) ==
                       REDIS_OK &&
                   r != NULL) {
                nd->rep[nd->got++] = r;
                r = NULL;
            }
        }
    }
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
        if (!nd->sent)
            continue;
        if (nd->got == ncmds) {
            full++;
            for (size_t k = 0; k < ncmds; k++)
                if (is_noscript(nd->rep[k])) {
                    /* Forgotten scripts: reconnect reloads them. */
                    rl_node_down(nd, "NOSCRIPT");
                    nd->retry_at = 0;
                    break;
                }
        } else {
            char why[64];
            snprintf(why, sizeof why, "no answer within %u ms",
                     rs->conf.node_timeout_ms);
            for (size_t k = 0; k < nd->got; k++)
                freeReplyObject(nd->rep[k]);
            nd->got = 0;
            nd->sent = false;
            rl_node_down(nd, why);
        }
    }
    return full;
}

static void rl_cmd_script(struct rl_cmd *c, struct redis_session *rs,
                          int which, int nkeys, int nargs, const char **args,
                          const size_t *lens)
{
    c->argv[0] = "EVALSHA", c->lens[0] = 7;
    c->argv[1] = rs->sha[which], c->lens[1] = 40;
    c->argv[2] = nkeys == 1 ? "1" : "2", c->lens[2] = 1;
    for (int i = 0; i < nargs; i++)
        c->argv[3 + i] = args[i], c->lens[3 + i] = lens[i];
    c->argc = 3 + nargs;
}

/* " (the first reason a node is down)", or "", for messages. */
static const char *rl_why(struct redis_session *rs, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; i < rs->nnodes; i++)
        if (rs->nodes[i].rc == NULL && rs->nodes[i].err[0] != '\0') {
            snprintf(buf, cap, " (%s)", rs->nodes[i].err);
            break;
        }
    return buf;
}

/* Release on every node, answers ignored: after a failed acquire. */
static void rl_undo(struct redis_session *rs, const struct dlock_request *req)
{
    struct rl_cmd c;
    const char *args[3] = {rs->keys.lock.p, rs->keys.channel.p, req->owner};
    size_t lens[3] = {rs->keys.lock.len, rs->keys.channel.len,
                      req->owner_len};

    rl_cmd_script(&c, rs, SC_RELEASE, 2, 3, args, lens);
    rl_round(rs, &c, 1,
             dlock_now_ns() + (uint64_t)rs->conf.node_timeout_ms * 1000000u);
    rl_free_replies(rs);
}

/* Connect what is down and due, and log a restart seen doing so. */
static void rl_prepare(struct redis_session *rs)
{
    rl_reconnect(rs, false);
    rs_log_note(rs);
}

/* What the nodes that answered a round in full said about one item:
 * yes/no counted, and yes/no of nodes still in their restart delay. */
struct rl_tally {
    size_t yes, no, late_yes, late_no;
};

/* "…; N of them restarted less than D ms ago (restart_delay) and count
 * again in W ms", or "" when no answer was left out. */
static const char *rl_late_text(char *buf, size_t cap,
                                const struct rl_tally *t, uint32_t delay,
                                int64_t wait_ms)
{
    if (t->late_yes + t->late_no == 0)
        return "";
    snprintf(buf, cap,
             "; %zu of them restarted less than %u ms ago and count "
             "again in %lld ms (restart_delay: a restarted node has "
             "forgotten its locks)",
             t->late_yes + t->late_no, delay, (long long)wait_ms);
    return buf;
}

static int rl_acquire(struct redis_session *rs,
                      const struct dlock_request *req,
                      struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct rl_cmd c;
    struct rl_tally t = {0, 0, 0, 0};
    char lease[16], late[200], why[360];
    const char *args[3];
    size_t lens[3];
    long long min_ttl = -1;
    int64_t start, elapsed, drift, validity, wait_ms;
    uint64_t start_ns;
    uint32_t counted, delay;

    rl_prepare(rs);
    /* Before the round: from now on this lease is one the delay covers. */
    rl_note_lease(rs, req->lease_ms);
    snprintf(lease, sizeof lease, "%u", req->lease_ms);
    args[0] = rs->keys.lock.p, lens[0] = rs->keys.lock.len;
    args[1] = req->owner, lens[1] = req->owner_len;
    args[2] = lease, lens[2] = strlen(lease);
    rl_cmd_script(&c, rs, SC_ACQUIRE, 1, 3, args, lens);
    start_ns = dlock_now_ns();
    start = (int64_t)(start_ns / 1000000u);
    if (rl_round(rs, &c, 1,
                 start_ns + (uint64_t)rs->conf.node_timeout_ms * 1000000u) <
        0)
        return dlock_session_error(&rs->base, DLOCK_ENOMEM, "out of memory");
    counted = rl_counting(rs, dlock_now_ms(), &wait_ms, &delay);
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
        bool counts = (counted >> i) & 1u;
        long long ok, val;
        if (nd->got != 1)
            continue;
        if (reply_pair(nd->rep[0], &ok, &val) != 0)
            continue; /* an error reply counts as no answer */
        if (ok == 1) {
            *(counts ? &t.yes : &t.late_yes) += 1;
        } else {
            *(counts ? &t.no : &t.late_no) += 1;
            if (val > 0 && (min_ttl < 0 || val < min_ttl))
                min_ttl = val;
        }
    }
    rl_free_replies(rs);
    /* The paper's drift: 1% of the lease plus a fixed allowance. */
    elapsed = dlock_now_ms() - start;
    drift = (int64_t)req->lease_ms / 100 + rs->conf.drift_ms;
    validity = (int64_t)req->lease_ms - elapsed - drift;
    if (t.yes >= rs->quorum && validity > 0) {
        int64_t end = start + (int64_t)req->lease_ms - drift;
        if (end < grant->expires_ms)
            grant->expires_ms = end;
        grant->fence = 0; /* no fencing: see the docs */
        return DLOCK_OK;
    }
    /* Not held: take back what we got, so others need not wait a lease. */
    if (t.yes + t.late_yes > 0)
        rl_undo(rs, req);
    if (t.yes + t.no < rs->quorum)
        return dlock_session_error(
            &rs->base, DLOCK_ECONNECT,
            "%zu of %zu nodes answered within %u ms, a majority is "
            "%zu%s%s",
            t.yes + t.no + t.late_yes + t.late_no, rs->nnodes,
            rs->conf.node_timeout_ms, rs->quorum,
            rl_late_text(late, sizeof late, &t, delay, wait_ms),
            rl_why(rs, why, sizeof why));
    if (t.yes >= rs->quorum) /* a majority, but too slow to be valid */
        return DLOCK_EBUSY;
    if (min_ttl > 0)
        *retry_ms = min_ttl > UINT32_MAX ? UINT32_MAX : (uint32_t)min_ttl;
    return DLOCK_EBUSY;
}

static int rl_renew(struct redis_session *rs, struct dlock_renewal *items,
                    size_t n)
{
    struct rl_cmd *cmds;
    struct buf *keys;
    char (*leases)[16];
    char late[200], why[360];
    uint64_t start_ns;
    int64_t start, wait_ms;
    uint32_t counted, delay;

    rl_prepare(rs);
    cmds = calloc(n, sizeof *cmds);
    keys = calloc(n, sizeof *keys);
    leases = calloc(n, sizeof *leases);
    if (cmds == NULL || keys == NULL || leases == NULL) {
        free(cmds);
        free(keys);
        free(leases);
        return dlock_session_error(&rs->base, DLOCK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        const char *args[3];
        size_t lens[3];
        if (keys_make(&rs->keys, &rs->conf, req->name, req->name_len) != 0 ||
            buf_set(&keys[i], rs->keys.lock.p, rs->keys.lock.len, "", 0, "",
                    0) != 0) {
            n = i;
            for (size_t k = 0; k < n; k++)
                free(keys[k].p);
            free(cmds);
            free(keys);
            free(leases);
            return dlock_session_error(&rs->base, DLOCK_ENOMEM,
                                       "out of memory");
        }
        rl_note_lease(rs, req->lease_ms);
        snprintf(leases[i], sizeof leases[i], "%u", req->lease_ms);
        args[0] = keys[i].p, lens[0] = keys[i].len;
        args[1] = req->owner, lens[1] = req->owner_len;
        args[2] = leases[i], lens[2] = strlen(leases[i]);
        rl_cmd_script(&cmds[i], rs, SC_RENEW, 1, 3, args, lens);
    }
    start_ns = dlock_now_ns();
    start = (int64_t)(start_ns / 1000000u);
    rl_round(rs, cmds, n,
             start_ns + (uint64_t)rs->conf.node_timeout_ms * 1000000u);
    counted = rl_counting(rs, dlock_now_ms(), &wait_ms, &delay);
    for (size_t i = 0; i < n; i++) {
        struct rl_tally t = {0, 0, 0, 0};
        int64_t drift = (int64_t)items[i].req->lease_ms / 100 +
                        rs->conf.drift_ms;
        for (size_t k = 0; k < rs->nnodes; k++) {
            struct rl_node *nd = &rs->nodes[k];
            bool counts = (counted >> k) & 1u;
            if (nd->got != n)
                continue;
            if (nd->rep[i]->type != REDIS_REPLY_INTEGER)
                continue;
            if (nd->rep[i]->integer == 1)
                *(counts ? &t.yes : &t.late_yes) += 1;
            else
                *(counts ? &t.no : &t.late_no) += 1;
        }
        if (t.yes >= rs->quorum &&
            (int64_t)items[i].req->lease_ms - (dlock_now_ms() - start) -
                    drift > 0) {
            int64_t end = start + (int64_t)items[i].req->lease_ms - drift;
            if (end < items[i].grant->expires_ms)
                items[i].grant->expires_ms = end;
            items[i].result = DLOCK_OK;
        } else if (rs->nnodes - (t.no + t.late_no) < rs->quorum) {
            /* A majority says "not yours": it cannot come back (a node in
             * its restart delay that says so has lost the key too). */
            items[i].result = dlock_session_error(
                &rs->base, DLOCK_ELOST,
                "%zu of %zu nodes say the lock is gone or another "
                "owner's%s",
                t.no + t.late_no, rs->nnodes,
                t.late_no > 0 ? " (some of them restarted: without "
                                "persistence a restart forgets the lock)"
                              : "");
        } else {
            items[i].result = dlock_session_error(
                &rs->base, DLOCK_ECONNECT,
                "renewed on %zu of %zu nodes, a majority is %zu%s%s",
                t.yes + t.late_yes, rs->nnodes, rs->quorum,
                rl_late_text(late, sizeof late, &t, delay, wait_ms),
                rl_why(rs, why, sizeof why));
        }
    }
    rl_free_replies(rs);
    for (size_t i = 0; i < n; i++)
        free(keys[i].p);
    free(cmds);
    free(keys);
    free(leases);
    return DLOCK_OK;
}

static int rl_release(struct redis_session *rs,
                      const struct dlock_request *req)
{
    struct rl_cmd c;
    const char *args[3] = {rs->keys.lock.p, rs->keys.channel.p, req->owner};
    size_t lens[3] = {rs->keys.lock.len, rs->keys.channel.len,
                      req->owner_len};
    size_t deleted = 0, answered = 0;
    char why[360];

    rl_prepare(rs);
    rl_cmd_script(&c, rs, SC_RELEASE, 2, 3, args, lens);
    rl_round(rs, &c, 1,
             dlock_now_ns() + (uint64_t)rs->conf.node_timeout_ms * 1000000u);
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
        if (nd->got != 1 || nd->rep[0]->type != REDIS_REPLY_INTEGER)
            continue;
        answered++;
        deleted += nd->rep[0]->integer == 1;
    }
    rl_free_replies(rs);
    if (deleted > 0)
        return DLOCK_OK;
    if (answered == 0)
        return dlock_session_error(&rs->base, DLOCK_ECONNECT,
                                   "no node answered%s; the "
                                   "lock ends with its lease",
                                   rl_why(rs, why, sizeof why));
    return dlock_session_error(&rs->base, DLOCK_ENOTOWNER,
                               "on no node: the lock is free or "
                               "another owner's (our lease ran out)");
}

static int rl_inspect(struct redis_session *rs, const char *name, size_t len,
                      dlock_state *out)
{
    struct rl_cmd c[2];
    size_t held = 0, answered = 0;
    long long min_ttl = -1;
    char why[360];

    (void)name;
    (void)len;
    rl_reconnect(rs, false);
    c[0].argc = 2, c[0].argv[0] = "GET", c[0].lens[0] = 3;
    c[0].argv[1] = rs->keys.lock.p, c[0].lens[1] = rs->keys.lock.len;
    c[1] = c[0];
    c[1].argv[0] = "PTTL", c[1].lens[0] = 4;
    rl_round(rs, c, 2,
             dlock_now_ns() + (uint64_t)rs->conf.node_timeout_ms * 1000000u);
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct rl_node *nd = &rs->nodes[i];
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
    rl_free_replies(rs);
    if (answered < rs->quorum)
        return dlock_session_error(&rs->base, DLOCK_ECONNECT,
                                   "%zu of %zu nodes answered%s",
                                   answered, rs->nnodes,
                                   rl_why(rs, why, sizeof why));
    out->held = held >= rs->quorum ? 1 : held == 0 ? 0 : -1;
    if (out->held != 1)
        out->owner[0] = '\0';
    out->remaining_ms = out->held == 1 ? min_ttl : -1;
    out->fence = 0;
    return DLOCK_OK;
}

/* ---- the raw floor ------------------------------------------------------------ */

/*
 * n cycles of this mode's acquire script then release script, sent with
 * bare hiredis calls (EVALSHA, scripts loaded first), no dlock core: the
 * cost of the protocol itself. Redlock's floor runs the same parallel
 * rounds over all nodes.
 */
static int redis_floor(const struct dlock_uri *uri, const char *name,
                       uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    static const char owner[] = "00000000-0000-4000-8000-000000000000:1";
    struct redis_session rs;
    const char *a[5];
    size_t l[5];
    int rc = DLOCK_OK, code;

    memset(&rs, 0, sizeof rs);
    if ((rc = conf_parse(&rs.conf, uri, err, errlen)) != DLOCK_OK)
        return rc;
    if (keys_make(&rs.keys, &rs.conf, name, strlen(name)) != 0) {
        rc = dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
        goto out;
    }
    if (rs.conf.mode == MODE_REDLOCK) {
        if ((rc = rl_open(&rs, err, errlen)) != DLOCK_OK)
            goto out;
        struct rl_cmd acq, rel;
        a[0] = rs.keys.lock.p, l[0] = rs.keys.lock.len;
        a[1] = owner, l[1] = sizeof owner - 1;
        a[2] = "30000", l[2] = 5;
        rl_cmd_script(&acq, &rs, SC_ACQUIRE, 1, 3, a, l);
        a[1] = rs.keys.channel.p, l[1] = rs.keys.channel.len;
        a[2] = owner, l[2] = sizeof owner - 1;
        rl_cmd_script(&rel, &rs, SC_RELEASE, 2, 3, a, l);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t t0 = dlock_now_ns();
            int got = rl_round(&rs, &acq, 1,
                               t0 + rs.conf.node_timeout_ms * 1000000ull);
            rl_free_replies(&rs);
            if (got < (int)rs.quorum) {
                rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                                  "floor: %d nodes answered", got);
                break;
            }
            rl_round(&rs, &rel, 1,
                     dlock_now_ns() + rs.conf.node_timeout_ms * 1000000ull);
            rl_free_replies(&rs);
            ns_out[i] = dlock_now_ns() - t0;
        }
        goto out;
    }
    rs.rc = redis_connect(&rs.conf, &rs.conf.hosts[0], rs.conf.timeout_ms,
                          rs.sha, NULL, err, errlen, &code);
    if (rs.rc == NULL) {
        rc = code;
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        redisReply *r;
        if (rs.conf.mode == MODE_HASH)
            r = redisCommand(rs.rc, "EVALSHA %s 2 %b %b 30000 %s",
                             rs.sha[SC_ACQUIRE], rs.keys.rname.p,
                             rs.keys.rname.len, rs.keys.fence.p,
                             rs.keys.fence.len, owner);
        else
            r = redisCommand(rs.rc, "EVALSHA %s 2 %b %b %s 30000",
                             rs.sha[SC_ACQUIRE], rs.keys.lock.p,
                             rs.keys.lock.len, rs.keys.fence.p,
                             rs.keys.fence.len, owner);
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
        if (rs.conf.mode == MODE_HASH)
            r = redisCommand(rs.rc, "EVALSHA %s 2 %b %b 0 30000 %s",
                             rs.sha[SC_RELEASE], rs.keys.rname.p,
                             rs.keys.rname.len, rs.keys.channel.p,
                             rs.keys.channel.len, owner);
        else
            r = redisCommand(rs.rc, "EVALSHA %s 2 %b %b %s",
                             rs.sha[SC_RELEASE], rs.keys.lock.p,
                             rs.keys.lock.len, rs.keys.channel.p,
                             rs.keys.channel.len, owner);
        if (r == NULL) {
            rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                              "floor: release: %s", rs.rc->errstr);
            break;
        }
        freeReplyObject(r);
        ns_out[i] = dlock_now_ns() - t0;
    }
out:
    if (rs.rc != NULL)
        redisFree(rs.rc);
    rl_close_nodes(&rs);
    keys_free(&rs.keys);
    conf_free(&rs.conf);
    return rc;
}

const struct dlock_backend dlock__backend_redis = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "redis",
    .aliases = redis_aliases,
    .params = redis_params,
    .caps = DLOCK_CAP_LEASE | DLOCK_CAP_NOTIFY | DLOCK_CAP_FENCING |
            DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW,
    .summary = "Redis: SET NX PX (setnx), Redisson's RLock (hash), Redlock "
               "over N masters (redlock://)",
    .ctx_open = ctx_open,
    .ctx_close = ctx_close,
    .open = redis_open,
    .close = redis_close,
    .acquire = redis_acquire,
    .wait = redis_wait,
    .renew = redis_renew,
    .release = redis_release,
    .inspect = redis_inspect,
    .floor = redis_floor,
};
