/*
 * pool.c: a client's sessions (see pool.h): opening and closing them,
 * checking them out and in, pinning connection-bound grants, routing each
 * call's errors and log lines, and registering their sockets with the
 * client's watch set.
 *
 * Divisions: errors and logs; opening and closing sessions; watching;
 * checkout and checkin; pins; ended connections.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"

/* Idle sessions with no grants kept open for reuse; more are closed. */
#define POOL_IDLE_MAX 8

/* ---- errors and logs ---------------------------------------------------- */

void dlock__pool_format(const struct dlock__pool *p, char *buf, size_t cap,
                        const char *op, const char *name, const char *text)
{
    dlock__format_error(buf, cap, p->uri->scheme, p->uri->password, op,
                        name, text);
}

void dlock__pool_formatf(const struct dlock__pool *p, char *buf, size_t cap,
                         const char *op, const char *name, const char *fmt,
                         ...)
{
    char text[DLOCK__ERRMSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    dlock__pool_format(p, buf, cap, op, name, text);
}

int dlock_session_error(struct dlock_session *s, int code, const char *fmt,
                        ...)
{
    struct dlock__sess *ss;
    char text[DLOCK__ERRMSG_MAX];
    va_list ap;

    if (s == NULL || (ss = s->core) == NULL || ss->errbuf == NULL)
        return code;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    dlock__pool_format(ss->p, ss->errbuf, ss->errcap,
                       ss->op != NULL ? ss->op : "call", ss->name, text);
    return code;
}

static void pool_vlog(const struct dlock__pool *p, int level,
                      const char *fmt, va_list ap)
{
    char text[DLOCK__ERRMSG_MAX], clean[DLOCK__ERRMSG_MAX];

    if (p->opts == NULL || p->opts->log == NULL || level > p->opts->log_level)
        return;
    vsnprintf(text, sizeof text, fmt, ap);
    dlock__redact(clean, sizeof clean, text, p->uri->password);
    p->opts->log(level, clean, p->opts->payload);
}

void dlock__pool_log(const struct dlock__pool *p, int level, const char *fmt,
                     ...)
{
    va_list ap;

    va_start(ap, fmt);
    pool_vlog(p, level, fmt, ap);
    va_end(ap);
}

void dlock_session_log(struct dlock_session *s, int level, const char *fmt,
                       ...)
{
    struct dlock__sess *ss;
    va_list ap;

    if (s == NULL || (ss = s->core) == NULL)
        return;
    va_start(ap, fmt);
    pool_vlog(ss->p, level, fmt, ap);
    va_end(ap);
}

void dlock__sess_begin(struct dlock__sess *ss, const char *op,
                       const char *name, char *buf, size_t cap)
{
    ss->op = op;
    ss->name = name;
    ss->errbuf = buf;
    ss->errcap = cap;
    if (buf != NULL && cap > 0)
        buf[0] = '\0';
}

void dlock__sess_call(struct dlock__sess *ss, const struct dlock__call *call)
{
    ss->call = call;
}

/* The acquire the current call on s serves, or NULL. */
static const struct dlock__call *sess_call(struct dlock_session *s)
{
    return s != NULL && s->core != NULL
               ? ((struct dlock__sess *)s->core)->call
               : NULL;
}

int dlock_session_cancelled(struct dlock_session *s)
{
    const struct dlock__call *call = sess_call(s);

    return call != NULL ? dlock__cancelled(&call->cx) : 0;
}

size_t dlock_session_cancel_fds(struct dlock_session *s, int *fds,
                                size_t cap)
{
    const struct dlock__call *call = sess_call(s);

    return call != NULL && fds != NULL ? dlock__cancel_fds(&call->cx, fds, cap)
                                       : 0;
}

int dlock_session_poll(struct dlock_session *s, int fd, short events,
                       int64_t deadline_ms)
{
    const struct dlock__call *call = sess_call(s);

    return dlock__cancel_poll(call != NULL ? &call->cx : NULL, fd, events,
                              deadline_ms);
}

int dlock_session_cond_wait(struct dlock_session *s, void *cond, void *mutex,
                            int64_t deadline_ms)
{
    const struct dlock__call *call = sess_call(s);
    int64_t slice = dlock_now_ms() + DLOCK_CANCEL_SLICE_MS;
    struct timespec ts;
    int code;

    if (call != NULL && (code = dlock__cancelled(&call->cx)) != 0)
        return code;
    /* Without an acquire to watch there is nothing to slice for. */
    ts = dlock_deadline_timespec(call == NULL || deadline_ms < slice
                                     ? deadline_ms
                                     : slice);
    pthread_cond_timedwait(cond, mutex, &ts);
    return call != NULL ? dlock__cancelled(&call->cx) : 0;
}

void dlock_session_queued(struct dlock_session *s)
{
    const struct dlock__call *call = sess_call(s);

    if (call != NULL && call->queued != NULL)
        call->queued(call->arg);
}

/* ---- opening and closing sessions ---------------------------------------- */

void dlock__pool_init(struct dlock__pool *p)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->idle, NULL);
    atomic_init(&p->doubt_gen, 0);
}

/* A backend's open() may call dlock_session_watch() before the session is
 * core's (s->core is set after open() returns): the call is kept here, on
 * the thread running open(), and applied once it has returned. A backend
 * that wraps another (the fault shim) reports its inner session's socket
 * this way too. */
static _Thread_local struct {
    struct dlock_session *s;
    int fd;
} opening;

static void sess_watch(struct dlock__sess *ss, int fd);

/* Open a new session; called without p->mu. */
static struct dlock__sess *sess_open(struct dlock__pool *p, char *errbuf,
                                     size_t errcap, int *rc)
{
    struct dlock__sess *ss = calloc(1, sizeof *ss);
    struct dlock_session *s = NULL;
    char text[DLOCK__ERRMSG_MAX];

    if (ss == NULL) {
        *rc = DLOCK_ENOMEM;
        snprintf(errbuf, errcap, "%s", dlock_strerror(DLOCK_ENOMEM));
        return NULL;
    }
    text[0] = '\0';
    opening.s = NULL;
    opening.fd = -1;
    *rc = p->b->open(&s, p->uri, p->ctx, text, sizeof text);
    if (*rc == DLOCK_OK && s == NULL)
        *rc = dlock_errorf(text, sizeof text, DLOCK_ERROR,
                           "backend returned no session");
    if (*rc != DLOCK_OK) {
        if (text[0] == '\0')
            snprintf(text, sizeof text, "%s", dlock_strerror(*rc));
        dlock__pool_format(p, errbuf, errcap, "connect", NULL, text);
        free(ss);
        return NULL;
    }
    s->backend = p->b;
    s->core = ss;
    ss->s = s;
    ss->p = p;
    ss->watch_fd = ss->own_fd = -1;
    pthread_mutex_lock(&p->mu);
    ss->id = ++p->next_id;
    pthread_mutex_unlock(&p->mu);
    if (opening.s != NULL && opening.fd >= 0)
        sess_watch(ss, opening.fd);
    opening.s = NULL;
    return ss;
}

static void sess_close(struct dlock__sess *ss)
{
    /* Stop watching before the backend closes the descriptor, whose
     * number may be reused at once. */
    sess_watch(ss, -1);
    ss->p->b->close(ss->s);
    free(ss);
}

void dlock__pool_close_sessions(struct dlock__pool *p)
{
    struct dlock__sess *ss;

    pthread_mutex_lock(&p->mu);
    ss = p->sessions;
    p->sessions = NULL;
    p->nsessions = p->nidle = 0;
    pthread_mutex_unlock(&p->mu);
    while (ss != NULL) {
        struct dlock__sess *next = ss->next;
        sess_close(ss);
        ss = next;
    }
}

void dlock__pool_free(struct dlock__pool *p)
{
    dlock__pool_close_sessions(p);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->idle);
}

/* ---- watching ---------------------------------------------------------------- */

/* Take ss's descriptor off the watch. Call with p->mu held. */
static void sess_unwatch(struct dlock__pool *p, struct dlock__sess *ss)
{
    if (ss->own_fd >= 0) {
        dlock__watch_del(p->watch, ss->own_fd);
        close(ss->own_fd);
        p->nwatched--;
    }
    ss->watch_fd = ss->own_fd = -1;
}

/* Start or stop watching the socket of ss [B-WATCH-1]. A connection-bound
 * session whose socket goes while it holds grants has lost them: they are
 * marked at once (dlock_held() says 0) and the session is marked ended,
 * for the watchdog to tell their holders.
 *
 * Core watches its own dup() of the backend's descriptor, never the
 * backend's: a client library may close its socket by itself (MariaDB's
 * does when a write fails) on the thread of a call while the watchdog
 * thread takes the session off the watch, and the number may by then be
 * another connection's. Core's copy changes only under p->mu, so the
 * epoll set and dlock_held()'s poll always name the socket they mean. It
 * holds the socket open no longer than the session keeps it watched: a
 * backend withdraws it (-1) before closing its own, and core closes its
 * copy then, so a connection still ends when the backend closes it. */
static void sess_watch(struct dlock__sess *ss, int fd)
{
    struct dlock__pool *p = ss->p;
    bool wake = false;

    pthread_mutex_lock(&p->mu);
    if (ss->watch_fd == fd) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    if (ss->npinned > 0 && (p->mode->caps & DLOCK_CAP_CONN_BOUND)) {
        for (struct dlock__pin *pin = ss->pinned; pin != NULL;
             pin = pin->next)
            atomic_store(&pin->watch_fd, DLOCK__FD_GONE);
        ss->ended = wake = true;
    }
    sess_unwatch(p, ss);
    if (fd >= 0) {
        int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (own >= 0 && dlock__watch_add(p->watch, own, ss->id) == DLOCK_OK) {
            ss->watch_fd = fd;
            ss->own_fd = own;
            p->nwatched++;
        } else if (own >= 0) {
            close(own);
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (wake)
        dlock__watch_wake(p->watch);
}

void dlock_session_watch(struct dlock_session *s, int fd)
{
    struct dlock__sess *ss;

    if (s == NULL)
        return;
    if ((ss = s->core) == NULL) {
        opening.s = s; /* inside open(): sess_open() applies it */
        opening.fd = fd;
        return;
    }
    sess_watch(ss, fd);
}

/* ---- checkout and checkin -------------------------------------------------- */

/* Does a session already hold this name for another handle? */
static bool holds_name(const struct dlock__sess *ss,
                       const struct dlock_request *req)
{
    for (const struct dlock__pin *pin = ss->pinned; pin != NULL;
         pin = pin->next)
        if (pin->req->name_hash == req->name_hash &&
            pin->req->name_len == req->name_len &&
            memcmp(pin->req->name, req->name, req->name_len) == 0)
            return true;
    return false;
}

static bool fits(const struct dlock__pool *p, const struct dlock__sess *ss,
                 enum dlock__pick pick, const struct dlock_request *req)
{
    uint32_t caps = p->mode->caps;

    if (ss->busy || ss->broken)
        return false;
    if (ss->npinned == 0)
        return true;
    if (pick == DLOCK__PICK_UNPINNED || (caps & DLOCK_CAP_SESSION_PER_LOCK))
        return false;
    return req == NULL || !(caps & DLOCK_CAP_CONN_BOUND) ||
           !holds_name(ss, req);
}

/* Unlink ss from the pool; call with p->mu held. */
static void pool_unlink(struct dlock__pool *p, struct dlock__sess *ss)
{
    for (struct dlock__sess **q = &p->sessions; *q != NULL; q = &(*q)->next) {
        if (*q == ss) {
            *q = ss->next;
            p->nsessions--;
            return;
        }
    }
}

struct dlock__sess *dlock__checkout(struct dlock__pool *p,
                                    enum dlock__pick pick,
                                    const struct dlock_request *req,
                                    char *errbuf, size_t errcap, int *rc)
{
    struct dlock__sess *ss, *best = NULL, *dead = NULL, **q;

    pthread_mutex_lock(&p->mu);
    /* Idle sessions whose connection ended while they sat in the pool are
     * closed, below, without the mutex. */
    for (q = &p->sessions; (ss = *q) != NULL;) {
        if (ss->broken && !ss->busy && ss->npinned == 0) {
            *q = ss->next;
            p->nsessions--;
            p->nidle--;
            ss->next = dead;
            dead = ss;
        } else {
            q = &ss->next;
        }
    }
    /* Prefer a session without grants: it keeps pinned ones free for
     * their holders' renewals and releases. */
    for (ss = pick == DLOCK__PICK_NEW ? NULL : p->sessions; ss != NULL;
         ss = ss->next) {
        if (!fits(p, ss, pick, req))
            continue;
        if (best == NULL || ss->npinned < best->npinned)
            best = ss;
        if (ss->npinned == 0)
            break;
    }
    if (best != NULL) {
        best->busy = true;
        if (best->npinned == 0)
            p->nidle--;
    }
    pthread_mutex_unlock(&p->mu);
    while ((ss = dead) != NULL) {
        dead = ss->next;
        sess_close(ss);
    }
    if (best != NULL) {
        *rc = DLOCK_OK;
        return best;
    }

    ss = sess_open(p, errbuf, errcap, rc);
    if (ss == NULL)
        return NULL;
    ss->busy = true;
    pthread_mutex_lock(&p->mu);
    ss->next = p->sessions;
    p->sessions = ss;
    p->nsessions++;
    pthread_mutex_unlock(&p->mu);
    return ss;
}

struct dlock__sess *dlock__checkout_grant(struct dlock__pool *p,
                                          struct dlock__sess *pin,
                                          char *errbuf, size_t errcap,
                                          int *rc)
{
    if (pin == NULL)
        return dlock__checkout(p, DLOCK__PICK_ANY, NULL, errbuf, errcap, rc);
    pthread_mutex_lock(&p->mu);
    while (pin->busy)
        pthread_cond_wait(&p->idle, &p->mu);
    pin->busy = true;
    if (pin->npinned == 0)
        p->nidle--;
    pthread_mutex_unlock(&p->mu);
    *rc = DLOCK_OK;
    return pin;
}

void dlock__checkin(struct dlock__sess *ss, int rc)
{
    struct dlock__pool *p = ss->p;
    bool drop = false;

    dlock__sess_begin(ss, NULL, NULL, NULL, 0);
    ss->call = NULL;
    pthread_mutex_lock(&p->mu);
    ss->busy = false;
    if (rc == DLOCK_ECONNECT)
        ss->broken = true;
    if (ss->npinned == 0) {
        /* [B-CONN-1]: a broken session without grants is replaced. */
        if (ss->broken || p->nidle >= POOL_IDLE_MAX) {
            pool_unlink(p, ss);
            drop = true;
        } else {
            p->nidle++;
        }
    }
    pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->mu);
    if (drop)
        sess_close(ss);
}

/* ---- pins ------------------------------------------------------------------- */

void dlock__pin(struct dlock__sess *ss, struct dlock__pin *pin)
{
    struct dlock__pool *p = ss->p;

    pthread_mutex_lock(&p->mu);
    pin->sess = ss;
    pin->next = ss->pinned;
    ss->pinned = pin;
    ss->npinned++;
    /* A connection that ended right after the grant's reply was already
     * taken off the watch: then the grant is gone with it. */
    atomic_store(&pin->watch_fd, ss->own_fd >= 0 ? ss->own_fd
                                 : ss->broken    ? DLOCK__FD_GONE
                                                 : -1);
    pthread_mutex_unlock(&p->mu);
}

void dlock__unpin(struct dlock__pin *pin)
{
    struct dlock__sess *ss = pin->sess;
    struct dlock__pool *p;

    if (ss == NULL)
        return;
    p = ss->p;
    pthread_mutex_lock(&p->mu);
    for (struct dlock__pin **q = &ss->pinned; *q != NULL; q = &(*q)->next)
        if (*q == pin) {
            *q = pin->next;
            break;
        }
    ss->npinned--;
    pthread_mutex_unlock(&p->mu);
    pin->sess = NULL;
    pin->next = NULL;
    atomic_store(&pin->watch_fd, -1);
}

/* ---- ended connections -------------------------------------------------------- */

/* Call with p->mu held. */
static void sess_ended(struct dlock__pool *p, struct dlock__sess *ss,
                       void (*lost)(struct dlock__pin *, void *), void *arg)
{
    ss->broken = true;
    ss->ended = false;
    if (p->mode->caps & DLOCK_CAP_CONN_BOUND) {
        for (struct dlock__pin *pin = ss->pinned; pin != NULL;
             pin = pin->next) {
            atomic_store(&pin->watch_fd, DLOCK__FD_GONE);
            lost(pin, arg);
        }
    } else {
        atomic_fetch_add(&p->doubt_gen, 1);
    }
    /* After the pins stop naming core's descriptor: it is closed here. */
    sess_unwatch(p, ss);
}

bool dlock__pool_doubt(struct dlock__pool *p)
{
    if (p->mode->caps & DLOCK_CAP_CONN_BOUND)
        return false;
    atomic_fetch_add(&p->doubt_gen, 1);
    return true;
}

size_t dlock__pool_ended(struct dlock__pool *p, uint64_t id,
                         void (*lost)(struct dlock__pin *pin, void *arg),
                         void *arg)
{
    size_t n = 0;

    pthread_mutex_lock(&p->mu);
    for (struct dlock__sess *ss = p->sessions; ss != NULL; ss = ss->next) {
        if ((id != 0 && ss->id == id && ss->own_fd >= 0) ||
            (id == 0 && ss->ended)) {
            sess_ended(p, ss, lost, arg);
            n++;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}
