/*
 * client.c: clients and their pool of backend sessions.
 *
 * A client is one parsed URI, one backend (and its per-client context), and
 * a pool of sessions. Core promises backends never to make two calls on one
 * session at once [B-SERIAL-1], so each call checks a session out and back
 * in. Sessions holding connection-bound grants stay in the pool (other calls
 * may use them between renewals) but are never handed a native wait, which
 * could block their holder's release for as long as the wait [B-PIN-1].
 *
 * Divisions: error and log plumbing; the pool; open/close; info, inspect
 * and the bench floor.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Idle sessions with no grants kept open for reuse; more are closed. */
#define POOL_IDLE_MAX 8
/* Default backoff when neither URI nor backend says. */
#define DEFAULT_RETRY_MIN_MS 5
#define DEFAULT_RETRY_MAX_MS 500

/* ---- error and log plumbing --------------------------------------------- */

/* Lock names may be 64 KiB of anything: quote a short, printable prefix. */
static void quote_name(char *out, size_t cap, const char *name)
{
    size_t n = 0, i;

    for (i = 0; name[i] != '\0' && n + 4 < cap && i < 48; i++) {
        unsigned char ch = (unsigned char)name[i];
        out[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (name[i] != '\0' && n + 4 < cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

void dlock__format_error(struct dlock_client *c, char *buf, size_t cap,
                         const char *op, const char *name, const char *text)
{
    char raw[DLOCK__ERRMSG_MAX], q[64];

    if (name != NULL) {
        quote_name(q, sizeof q, name);
        snprintf(raw, sizeof raw, "%s: %s '%s': %s", c->uri->scheme, op, q,
                 text);
    } else {
        snprintf(raw, sizeof raw, "%s: %s: %s", c->uri->scheme, op, text);
    }
    dlock__redact(buf, cap, raw, c->uri->password);
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
    dlock__format_error(ss->c, ss->errbuf, ss->errcap,
                        ss->op != NULL ? ss->op : "call", ss->name, text);
    return code;
}

static void client_vlog(struct dlock_client *c, int level, const char *fmt,
                        va_list ap)
{
    char text[DLOCK__ERRMSG_MAX], clean[DLOCK__ERRMSG_MAX];

    if (c->opts.log == NULL || level > c->opts.log_level)
        return;
    vsnprintf(text, sizeof text, fmt, ap);
    dlock__redact(clean, sizeof clean, text, c->uri->password);
    c->opts.log(level, clean, c->opts.payload);
}

void dlock_session_log(struct dlock_session *s, int level, const char *fmt,
                       ...)
{
    struct dlock__sess *ss;
    va_list ap;

    if (s == NULL || (ss = s->core) == NULL)
        return;
    va_start(ap, fmt);
    client_vlog(ss->c, level, fmt, ap);
    va_end(ap);
}

static int client_error(struct dlock_client *c, int code, const char *op,
                        const char *fmt, ...)
{
    char text[DLOCK__ERRMSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (c->uri != NULL)
        dlock__format_error(c, c->errmsg, sizeof c->errmsg, op, NULL, text);
    else
        snprintf(c->errmsg, sizeof c->errmsg, "%s: %s", op, text);
    return code;
}

/* ---- the pool ------------------------------------------------------------ */

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

/* A backend's open() may call dlock_session_watch() before the session
 * is core's (s->core is set after open() returns): the call is kept here,
 * on the thread running open(), and applied once it has returned. */
static _Thread_local struct {
    struct dlock_session *s;
    int fd;
} opening;

/* Open a new session; called without c->mu. */
static struct dlock__sess *sess_open(struct dlock_client *c, char *errbuf,
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
    *rc = c->b->open(&s, c->uri, c->ctx, text, sizeof text);
    if (*rc == DLOCK_OK && (s == NULL || s->backend != c->b))
        *rc = dlock_errorf(text, sizeof text, DLOCK_ERROR,
                           "backend returned no valid session");
    if (*rc != DLOCK_OK) {
        if (text[0] == '\0')
            snprintf(text, sizeof text, "%s", dlock_strerror(*rc));
        dlock__format_error(c, errbuf, errcap, "connect", NULL, text);
        free(ss);
        return NULL;
    }
    s->core = ss;
    ss->s = s;
    ss->c = c;
    ss->watch_fd = -1;
    pthread_mutex_lock(&c->mu);
    ss->id = ++c->next_sess_id;
    pthread_mutex_unlock(&c->mu);
    if (opening.s != NULL && opening.fd >= 0) /* s, or a wrapped one */
        dlock__wd_watch(c, ss, opening.fd);
    opening.s = NULL;
    return ss;
}

static void sess_close(struct dlock__sess *ss)
{
    /* Stop watching before the backend closes the descriptor, whose
     * number may be reused at once. */
    dlock__wd_watch(ss->c, ss, -1);
    ss->c->b->close(ss->s);
    free(ss);
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
    dlock__wd_watch(ss->c, ss, fd);
}

int dlock_fd_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFD);

    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
        return DLOCK_ERROR;
    return DLOCK_OK;
}

/* Unlink ss from the pool; call with c->mu held. */
static void pool_unlink(struct dlock_client *c, struct dlock__sess *ss)
{
    for (struct dlock__sess **p = &c->sessions; *p != NULL; p = &(*p)->next) {
        if (*p == ss) {
            *p = ss->next;
            c->nsessions--;
            return;
        }
    }
}

/* Does a session already hold this name for another handle? */
static bool holds_name(const struct dlock__sess *ss,
                       const struct dlock_request *req)
{
    for (const struct dlock_lock *lk = ss->pinned; lk != NULL;
         lk = lk->pin_next)
        if (lk->req.name_hash == req->name_hash &&
            lk->req.name_len == req->name_len &&
            memcmp(lk->req.name, req->name, req->name_len) == 0)
            return true;
    return false;
}

static bool fits(const struct dlock_client *c, const struct dlock__sess *ss,
                 enum dlock__pick pick, const struct dlock_request *req)
{
    if (ss->busy || ss->broken)
        return false;
    if (ss->npinned == 0)
        return true;
    if (pick == DLOCK__PICK_UNPINNED ||
        (c->caps & DLOCK_CAP_SESSION_PER_LOCK))
        return false;
    return req == NULL || !(c->caps & DLOCK_CAP_CONN_BOUND) ||
           !holds_name(ss, req);
}

struct dlock__sess *dlock__checkout(struct dlock_client *c,
                                    enum dlock__pick pick,
                                    const struct dlock_request *req,
                                    char *errbuf, size_t errcap, int *rc)
{
    struct dlock__sess *ss, *best = NULL, *dead = NULL, **p;

    pthread_mutex_lock(&c->mu);
    /* Idle sessions the watchdog found broken (their connection ended
     * while they sat in the pool) are closed, below, without the mutex. */
    for (p = &c->sessions; (ss = *p) != NULL;) {
        if (ss->broken && !ss->busy && ss->npinned == 0) {
            *p = ss->next;
            c->nsessions--;
            c->nidle--;
            ss->next = dead;
            dead = ss;
        } else {
            p = &ss->next;
        }
    }
    /* Prefer a session without grants: it keeps pinned ones free for
     * their holders' renewals and releases. */
    for (ss = c->sessions; ss != NULL; ss = ss->next) {
        if (!fits(c, ss, pick, req))
            continue;
        if (best == NULL || ss->npinned < best->npinned)
            best = ss;
        if (ss->npinned == 0)
            break;
    }
    if (best != NULL) {
        best->busy = true;
        if (best->npinned == 0)
            c->nidle--;
    }
    pthread_mutex_unlock(&c->mu);
    while ((ss = dead) != NULL) {
        dead = ss->next;
        sess_close(ss);
    }
    if (best != NULL) {
        *rc = DLOCK_OK;
        return best;
    }

    ss = sess_open(c, errbuf, errcap, rc);
    if (ss == NULL)
        return NULL;
    ss->busy = true;
    pthread_mutex_lock(&c->mu);
    ss->next = c->sessions;
    c->sessions = ss;
    c->nsessions++;
    pthread_mutex_unlock(&c->mu);
    return ss;
}

struct dlock__sess *dlock__checkout_grant(struct dlock_client *c,
                                          struct dlock__sess *pin,
                                          char *errbuf, size_t errcap,
                                          int *rc)
{
    if (pin == NULL)
        return dlock__checkout(c, DLOCK__PICK_ANY, NULL, errbuf, errcap, rc);
    pthread_mutex_lock(&c->mu);
    while (pin->busy)
        pthread_cond_wait(&c->idle, &c->mu);
    pin->busy = true;
    if (pin->npinned == 0)
        c->nidle--;
    pthread_mutex_unlock(&c->mu);
    *rc = DLOCK_OK;
    return pin;
}

void dlock__checkin(struct dlock__sess *ss, int rc)
{
    struct dlock_client *c = ss->c;
    bool drop = false;

    dlock__sess_begin(ss, NULL, NULL, NULL, 0);
    pthread_mutex_lock(&c->mu);
    ss->busy = false;
    if (rc == DLOCK_ECONNECT)
        ss->broken = true;
    if (ss->npinned == 0) {
        /* [B-CONN-1]: a broken session without grants is replaced. */
        if (ss->broken || c->nidle >= POOL_IDLE_MAX) {
            pool_unlink(c, ss);
            drop = true;
        } else {
            c->nidle++;
        }
    }
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
    if (drop)
        sess_close(ss);
}

/* ---- open and close ----------------------------------------------------- */

/* $XDG_RUNTIME_DIR/dlock, else /tmp/dlock-<uid>, made 0700 and checked to
 * be ours, so another user cannot pre-create it and read or block locks. */
static int default_dir(char *out, size_t cap, char *err, size_t errlen)
{
    const char *run = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    int n;

    if (run != NULL && run[0] == '/')
        n = snprintf(out, cap, "%s/dlock", run);
    else
        n = snprintf(out, cap, "/tmp/dlock-%lu", (unsigned long)getuid());
    if (n < 0 || (size_t)n >= cap)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "default directory: path too long");
    if (mkdir(out, 0700) != 0 && errno != EEXIST)
        return dlock_errorf(err, errlen, DLOCK_ERROR,
                            "default directory %s: %s", out, strerror(errno));
    if (lstat(out, &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != getuid() || (st.st_mode & 0077) != 0)
        return dlock_errorf(err, errlen, DLOCK_ERROR,
                            "default directory %s: not a private directory "
                            "owned by this user",
                            out);
    return DLOCK_OK;
}

/* The URI text to use: the argument, $DLOCK_URI, or the build's default
 * (where a bare "file://" names the per-user runtime directory). */
static int resolve_uri(const char *uri, char *buf, size_t cap, char *err,
                       size_t errlen)
{
    char dir[512];
    const char *def = dlock__default_uri;
    int rc;

    if (uri != NULL && uri[0] != '\0')
        return snprintf(buf, cap, "%s", uri) < (int)cap
                   ? DLOCK_OK
                   : dlock_errorf(err, errlen, DLOCK_EINVAL,
                                  "uri: longer than %d bytes",
                                  DLOCK__URI_MAX);
    uri = getenv("DLOCK_URI");
    if (uri != NULL && uri[0] != '\0')
        return snprintf(buf, cap, "%s", uri) < (int)cap
                   ? DLOCK_OK
                   : dlock_errorf(err, errlen, DLOCK_EINVAL,
                                  "DLOCK_URI: longer than %d bytes",
                                  DLOCK__URI_MAX);
    if (strcmp(def, "file://") != 0) {
        snprintf(buf, cap, "%s", def);
        return DLOCK_OK;
    }
    if ((rc = default_dir(dir, sizeof dir, err, errlen)) != DLOCK_OK)
        return rc;
    snprintf(buf, cap, "file://%s", dir);
    return DLOCK_OK;
}

static int client_setup(struct dlock_client *c, const char *uri_arg)
{
    char text[DLOCK__URI_MAX + 1], err[DLOCK__ERRMSG_MAX], list[256];
    struct dlock__sess *ss;
    int rc;

    err[0] = '\0';
    rc = resolve_uri(uri_arg, text, sizeof text, err, sizeof err);
    if (rc == DLOCK_OK)
        rc = dlock__uri_parse(&c->uri, text, strlen(text), err, sizeof err);
    if (rc != DLOCK_OK)
        return client_error(c, rc, "open", "%s", err);

    c->b = dlock_backend_find(c->uri->scheme);
    if (c->b == NULL) {
        dlock__schemes_text(list, sizeof list);
        return client_error(c, DLOCK_ENOBACKEND, "open",
                            "no backend for scheme '%s' in this build "
                            "(built: %s)",
                            c->uri->scheme, list);
    }
    rc = dlock__uri_check_params(c->uri, c->b->params, err, sizeof err);
    if (rc != DLOCK_OK)
        return client_error(c, rc, "open", "%s", err);

    if (c->b->ctx_open != NULL) {
        err[0] = '\0';
        rc = c->b->ctx_open(&c->ctx, c->uri, err, sizeof err);
        if (rc != DLOCK_OK)
            return client_error(c, rc, "connect", "%s",
                                err[0] ? err : dlock_strerror(rc));
    }

    /* Connect the first session now, so a bad host or password shows at
     * open time, and learn the mode's capabilities from it. */
    ss = dlock__checkout(c, DLOCK__PICK_ANY, NULL, c->errmsg,
                         sizeof c->errmsg, &rc);
    if (ss == NULL)
        return rc;
    c->caps = ss->s->caps;
    c->mode = ss->s->mode != NULL ? ss->s->mode : "default";
    c->retry_min_ms = c->uri->retry_min_ms ? c->uri->retry_min_ms
                      : ss->s->retry_min_ms ? ss->s->retry_min_ms
                                            : DEFAULT_RETRY_MIN_MS;
    c->retry_max_ms = c->uri->retry_max_ms ? c->uri->retry_max_ms
                      : ss->s->retry_max_ms ? ss->s->retry_max_ms
                                            : DEFAULT_RETRY_MAX_MS;
    if (c->retry_max_ms < c->retry_min_ms)
        c->retry_max_ms = c->retry_min_ms;
    dlock__checkin(ss, DLOCK_OK);
    return DLOCK_OK;
}

int dlock_client_open(dlock_client **out, const char *uri,
                      const dlock_client_options *opts)
{
    struct dlock_client *c;
    int rc;

    if (out == NULL)
        return DLOCK_EINVAL;
    *out = NULL;
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return DLOCK_ENOMEM;
    atomic_init(&c->refs, 1);
    atomic_init(&c->next_serial, 1);
    atomic_init(&c->doubt_gen, 0);
    atomic_init(&c->closed, false);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->idle, NULL);
    dlock__wd_init(&c->wd);
    *out = c;

    if (opts != NULL) {
        if (opts->version == 0 || opts->version > DLOCK_CLIENT_OPTIONS_VERSION)
            return client_error(c, DLOCK_EINVAL, "open",
                                "opts: version %u not in 1..%d",
                                opts->version, DLOCK_CLIENT_OPTIONS_VERSION);
        c->opts = *opts;
    } else {
        c->opts = (dlock_client_options)DLOCK_CLIENT_OPTIONS_INIT;
    }
    if (dlock__uuid(c->uuid) != DLOCK_OK)
        return client_error(c, DLOCK_ERROR, "open",
                            "cannot read the OS random source");
    if ((rc = dlock_global_init()) != DLOCK_OK)
        return client_error(c, rc, "open", "a backend's global_init failed");
    c->global_ref = true;
    return client_setup(c, uri);
}

static void client_free(struct dlock_client *c)
{
    struct dlock__sess *ss;

    while ((ss = c->sessions) != NULL) {
        c->sessions = ss->next;
        sess_close(ss);
    }
    if (c->ctx != NULL)
        c->b->ctx_close(c->ctx);
    dlock__wd_free(&c->wd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->idle);
    dlock__uri_free(c->uri);
    if (c->global_ref)
        dlock_global_shutdown();
    free(c);
}

void dlock__client_unref(struct dlock_client *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        client_free(c);
}

void dlock_client_close(dlock_client *c)
{
    struct dlock__sess *ss;

    if (c == NULL || atomic_exchange(&c->closed, true))
        return;
    /* Release what is still held (the handles stay valid memory), then stop
     * the watchdog and disconnect. */
    for (;;) {
        struct dlock_lock *lk = NULL;
        pthread_mutex_lock(&c->mu);
        for (struct dlock_lock *h = c->handles; h != NULL; h = h->next)
            if (h->depth > 0) {
                lk = h;
                break;
            }
        pthread_mutex_unlock(&c->mu);
        if (lk == NULL)
            break;
        dlock__lock_drop(lk);
    }
    dlock__wd_stop(c);
    pthread_mutex_lock(&c->mu);
    ss = c->sessions;
    c->sessions = NULL;
    c->nsessions = c->nidle = 0;
    pthread_mutex_unlock(&c->mu);
    while (ss != NULL) {
        struct dlock__sess *next = ss->next;
        sess_close(ss);
        ss = next;
    }
    dlock__client_unref(c);
}

const char *dlock_client_errmsg(const dlock_client *c)
{
    return c != NULL ? c->errmsg : "no client";
}

/* ---- info, inspect, floor ----------------------------------------------- */

int dlock_client_info(dlock_client *c, dlock_info *out)
{
    if (c == NULL || out == NULL || c->b == NULL)
        return DLOCK_EINVAL;
    out->scheme = c->b->scheme;
    out->mode = c->mode;
    out->caps = c->caps;
    out->uri = c->uri->redacted;
    out->owner = c->uuid;
    out->lease_ms = c->uri->lease_ms;
    out->timeout_ms = c->uri->timeout_ms;
    return DLOCK_OK;
}

int dlock_inspect(dlock_client *c, const char *name, dlock_state *out)
{
    struct dlock__sess *ss;
    size_t len, bad;
    int rc;

    if (c == NULL || out == NULL || name == NULL)
        return DLOCK_EINVAL;
    if (atomic_load(&c->closed) || c->b == NULL)
        return client_error(c, DLOCK_ECLOSED, "inspect", "client closed");
    len = strnlen(name, DLOCK_NAME_MAX + 1);
    if (len == 0 || len > DLOCK_NAME_MAX || !dlock__utf8_valid(name, len, &bad))
        return client_error(c, DLOCK_EINVAL, "inspect",
                            "name: expected 1 to %d bytes of UTF-8",
                            DLOCK_NAME_MAX);
    if (c->b->inspect == NULL)
        return client_error(c, DLOCK_EUNSUPPORTED, "inspect",
                            "this backend cannot inspect a lock");
    memset(out, 0, sizeof *out);
    out->held = -1;
    out->remaining_ms = -1;
    out->waiters = -1;
    ss = dlock__checkout(c, DLOCK__PICK_ANY, NULL, c->errmsg, sizeof c->errmsg,
                         &rc);
    if (ss == NULL)
        return rc;
    dlock__sess_begin(ss, "inspect", name, c->errmsg, sizeof c->errmsg);
    rc = c->b->inspect(ss->s, name, len, out);
    dlock__checkin(ss, rc);
    return rc;
}

int dlock_bench_floor(const char *uri, const char *name, uint32_t n,
                      uint64_t *ns_out, char *err, size_t errlen)
{
    struct dlock_uri *u = NULL;
    const struct dlock_backend *b;
    char text[DLOCK__URI_MAX + 1];
    int rc;

    if (name == NULL || name[0] == '\0' || ns_out == NULL || n == 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "floor: name, n and ns_out are required");
    rc = resolve_uri(uri, text, sizeof text, err, errlen);
    if (rc == DLOCK_OK)
        rc = dlock__uri_parse(&u, text, strlen(text), err, errlen);
    if (rc != DLOCK_OK)
        return rc;
    b = dlock_backend_find(u->scheme);
    if (b == NULL)
        rc = dlock_errorf(err, errlen, DLOCK_ENOBACKEND,
                          "floor: no backend for scheme '%s'", u->scheme);
    else if ((rc = dlock__uri_check_params(u, b->params, err, errlen)) != 0)
        ;
    else if (b->floor == NULL)
        rc = dlock_errorf(err, errlen, DLOCK_EUNSUPPORTED,
                          "floor: backend '%s' has no raw floor", b->scheme);
    else if ((rc = dlock_global_init()) == DLOCK_OK) {
        char raw[DLOCK__ERRMSG_MAX] = "";
        rc = b->floor(u, name, n, ns_out, raw, sizeof raw);
        if (rc != DLOCK_OK)
            dlock__redact(err, errlen, raw, u->password);
        dlock_global_shutdown();
    }
    dlock__uri_free(u);
    return rc;
}
