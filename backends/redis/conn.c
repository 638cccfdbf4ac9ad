/*
 * conn.c: connections to a Redis server, and what runs on them for every
 * mode. A connection is made here, close-on-exec from its birth, and given
 * to hiredis; its first round trip pipelines AUTH, SELECT, SCRIPT LOAD of
 * the mode's scripts and INFO server, whose run_id and uptime tell the
 * client who answered (a new run_id is a restart). Scripts run by EVALSHA,
 * and by EVAL of their text when a server answers NOSCRIPT (SCRIPT FLUSH
 * on a live server). Each command has the URI's timeout= (SO_RCVTIMEO/
 * SO_SNDTIMEO through redisSetTimeout); a connection that failed once is
 * never used again: core replaces the session [B-CONN-1].
 *
 * What a session does with its connections is its mode's (single.c,
 * rounds.c, pubsub.c). Divisions: making a connection; who answered;
 * scripts and replies.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rd.h"

/* ---- making a connection --------------------------------------------------- */

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
static int tcp_connect(const struct dlock__rd_addr *a, uint32_t timeout_ms,
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

/* Fill in from INFO server's "key:value\r\n" lines. */
static void info_parse(struct dlock__rd_info *in, const char *text)
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
 * of m's scripts and INFO server in one pipelined round trip. sha (if not
 * NULL) gets the scripts' digests, info (if not NULL) who the server is.
 * On failure returns NULL, err says why and *code is DLOCK_ECONNECT
 * (unreachable, no answer), DLOCK_EAUTH (AUTH refused, or NOAUTH: the
 * server wants a password the URI lacks) or DLOCK_ERROR (the server
 * refused otherwise: bad database). A refused INFO (an ACL without it) is
 * no failure here: info->run_id stays "" and the caller decides.
 */
redisContext *dlock__rd_connect(const struct dlock__rd_conf *cf,
                                const struct dlock__rd_addr *a,
                                uint32_t timeout_ms,
                                const struct dlock__rd_mode *m,
                                dlock__rd_sha *sha,
                                struct dlock__rd_info *info, char *err,
                                size_t errlen, int *code)
{
    struct timeval tv = tv_ms(timeout_ms);
    const char *what[4 + RD_SC_COUNT];
    int slot[RD_SC_COUNT]; /* the RD_SC_* of each SCRIPT LOAD, in order */
    redisContext *rc;
    int nreplies = 0, nscripts = 0, fd;
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
        for (int i = 0; i < RD_SC_COUNT; i++) {
            if (m->script[i] == NULL) { /* a gap (hash: no queue) */
                sha[i][0] = '\0';
                continue;
            }
            redisAppendCommand(rc, "SCRIPT LOAD %s", m->script[i]->lua);
            what[nreplies++] = "SCRIPT LOAD";
            slot[nscripts++] = i;
        }
    if (info != NULL) {
        redisAppendCommand(rc, "INFO server");
        what[nreplies++] = "INFO";
    }
    for (int i = 0, script = 0; i < nreplies; i++) {
        redisReply *r = NULL;

        if (dlock__rd_get_reply(rc, &r) != REDIS_OK || r == NULL) {
            dlock_errorf(err, errlen, DLOCK_ECONNECT, "%s:%d: %s", a->host,
                         a->port, io_text(rc, tbuf, sizeof tbuf, timeout_ms));
            redisFree(rc);
            return NULL;
        }
        if (r->type == REDIS_REPLY_ERROR &&
            (strcmp(what[i], "AUTH") == 0 ||
             strncmp(r->str, "NOAUTH", 6) == 0)) {
            /* WRONGPASS, NOAUTH, "ERR AUTH ... without any password
             * configured": the server's own words, never the password. */
            dlock_errorf(err, errlen, DLOCK_EAUTH,
                         "%s:%d: %s: %s (check the URI's user and password)",
                         a->host, a->port, what[i], r->str);
            *code = DLOCK_EAUTH;
            freeReplyObject(r);
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
            memcpy(sha[slot[script]], r->str, 40);
            sha[slot[script++]][40] = '\0';
        }
        freeReplyObject(r);
    }
    return rc;
}

/* ---- who answered --------------------------------------------------------------- */

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
uint64_t dlock__rd_ident_seen(struct dlock__rd_ctx *x, size_t i,
                              const struct dlock__rd_info *in, char *note,
                              size_t cap)
{
    struct dlock__rd_ident *id;
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

void dlock__rd_log_note(struct dlock__rd_session *rs)
{
    if (rs->note[0] != '\0') {
        dlock_session_log(&rs->base, DLOCK_LOG_WARN, "%s", rs->note);
        rs->note[0] = '\0';
    }
}

/* ---- scripts and replies --------------------------------------------------------- */

bool dlock__rd_noscript(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           strncmp(r->str, "NOSCRIPT", 8) == 0;
}

redisReply *dlock__rd_run(struct dlock__rd_session *rs, int which,
                          const char *owner, size_t owner_len,
                          const char *lease)
{
    /* a permit's script when rs->keys are laid out for one */
    const struct dlock__rd_script *sc =
        rs->m->script[which = dlock__rd_script_of(&rs->keys, which)];
    struct dlock__rd_cmd c;
    redisReply *r;

    dlock__rd_cmd_evalsha(&c, sc, rs->sha[which], &rs->keys, owner,
                          owner_len, lease);
    r = dlock__rd_command_argv(rs->rc, c.argc, c.argv, c.lens);
    if (dlock__rd_noscript(r)) {
        freeReplyObject(r);
        c.argv[0] = "EVAL";
        c.lens[0] = 4;
        c.argv[1] = sc->lua;
        c.lens[1] = strlen(sc->lua);
        r = dlock__rd_command_argv(rs->rc, c.argc, c.argv, c.lens);
    }
    return r;
}

int dlock__rd_reply_pair(const redisReply *r, long long *a, long long *b)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    *a = r->element[0]->integer;
    *b = r->element[1]->integer;
    return 0;
}

int dlock__rd_reply_error(struct dlock__rd_session *rs, const redisReply *r)
{
    /* A master demoted to a replica behind a live connection (a failover):
     * give the connection up, so the next one finds the new master. */
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0)
        return dlock_session_error(&rs->base, DLOCK_ECONNECT,
                                   "the server is a replica now (a "
                                   "failover?): %s",
                                   r->str);
    if (r->type == REDIS_REPLY_ERROR && rs->cl == NULL &&
        (strncmp(r->str, "MOVED ", 6) == 0 ||
         strncmp(r->str, "ASK ", 4) == 0))
        return dlock_session_error(&rs->base, DLOCK_ERROR,
                                   "server: %s (the server is a Redis "
                                   "Cluster node: add cluster=1 to the URI)",
                                   r->str);
    if (r->type == REDIS_REPLY_ERROR)
        return dlock_session_error(&rs->base, DLOCK_ERROR, "server: %s",
                                   r->str);
    return dlock_session_error(&rs->base, DLOCK_ERROR,
                               "unexpected reply type %d", r->type);
}

int dlock__rd_io_error(struct dlock__rd_session *rs, int code, const char *op)
{
    char tbuf[64];
    if (rs->cl != NULL) /* cluster.c: several connections, its own why */
        return dlock_session_error(&rs->base, code, "%s: %s", op,
                                   rs->why[0] ? rs->why : "no node answered");
    return dlock_session_error(&rs->base, code, "%s: %s", op,
                               io_text(rs->rc, tbuf, sizeof tbuf,
                                       rs->cf->timeout_ms));
}
