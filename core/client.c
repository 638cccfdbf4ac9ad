/*
 * client.c: the public calls on a client, the top of core: opening one
 * (URI, backend, mode, first session), closing it (every lock released,
 * the watchdog stopped, every session closed), and what it can say
 * without a lock (info, inspect, messages). Everything else is below:
 * lock handles in lock.c, sessions in pool.c, renewals in watchdog.c.
 *
 * Divisions: open; close; info and inspect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"

/* ---- open ---------------------------------------------------------------- */

/* Record why dlock_client_open() failed, in the client (read by the
 * opening thread alone) and as this thread's client-wide message. */
static int open_error(struct dlock_client *c, int code, const char *op,
                      const char *text)
{
    dlock__format_error(c->errmsg, sizeof c->errmsg,
                        c->uri != NULL ? c->uri->scheme : NULL,
                        c->uri != NULL ? c->uri->password : NULL, op, NULL,
                        text);
    dlock__thread_error(c, code, "%s", c->errmsg);
    return code;
}

static int client_setup(struct dlock_client *c, const char *uri_arg)
{
    char err[DLOCK__ERRMSG_MAX];
    const struct dlock_mode *m;
    struct dlock__sess *ss;
    int rc;

    err[0] = '\0';
    rc = dlock__uri_lookup(uri_arg, &c->uri, &c->b, &m, err, sizeof err);
    if (rc != DLOCK_OK)
        return open_error(c, rc, "open", err);
    c->mode = m;
    c->caps = m->caps;
    c->pool.b = c->b;
    c->pool.mode = m;
    c->pool.uri = c->uri;
    c->retry_min_ms = c->uri->retry_min_ms ? c->uri->retry_min_ms
                      : m->retry_min_ms    ? m->retry_min_ms
                                           : DLOCK__RETRY_MIN_MS;
    c->retry_max_ms = c->uri->retry_max_ms ? c->uri->retry_max_ms
                      : m->retry_max_ms    ? m->retry_max_ms
                                           : DLOCK__RETRY_MAX_MS;
    if (c->retry_max_ms < c->retry_min_ms)
        c->retry_max_ms = c->retry_min_ms;

    if (c->b->ctx_open != NULL) {
        err[0] = '\0';
        rc = c->b->ctx_open(&c->pool.ctx, c->uri, m, err, sizeof err);
        if (rc != DLOCK_OK)
            return open_error(c, rc, "connect",
                              err[0] ? err : dlock_strerror(rc));
    }
    /* Connect the first session now, so a bad host or password shows at
     * open time. */
    ss = dlock__checkout(&c->pool, DLOCK__PICK_ANY, NULL, c->errmsg,
                         sizeof c->errmsg, &rc);
    if (ss == NULL) {
        dlock__thread_error(c, rc, "%s", c->errmsg);
        return rc;
    }
    dlock__checkin(ss, DLOCK_OK);
    /* A backend that watches its sockets needs the thread that listens,
     * locks or not [B-WATCH-1]. */
    if (c->pool.nwatched > 0 && (rc = dlock__wd_start(&c->wd)) != DLOCK_OK)
        return open_error(c, rc, "open", "cannot start the watchdog thread");
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
    c = dlock__client_new();
    if (c == NULL)
        return DLOCK_ENOMEM;
    *out = c;
    dlock__thread_error_clear(NULL);

    if (opts != NULL) {
        if (opts->version == 0 || opts->version > DLOCK_CLIENT_OPTIONS_VERSION) {
            char text[96];
            snprintf(text, sizeof text, "opts: version %u not in 1..%d",
                     opts->version, DLOCK_CLIENT_OPTIONS_VERSION);
            return open_error(c, DLOCK_EINVAL, "open", text);
        }
        /* Field by field: a version 1 struct has no flags. */
        c->opts.version = opts->version;
        c->opts.log = opts->log;
        c->opts.log_level = opts->log_level;
        c->opts.payload = opts->payload;
        c->opts.flags = opts->version >= 2 ? opts->flags : 0;
        if (c->opts.flags & ~(uint32_t)DLOCK_CLIENT_QUEUE_CALLBACKS) {
            char text[96];
            snprintf(text, sizeof text, "opts.flags: unknown bits 0x%x",
                     c->opts.flags);
            return open_error(c, DLOCK_EINVAL, "open", text);
        }
    } else {
        c->opts = (dlock_client_options)DLOCK_CLIENT_OPTIONS_INIT;
    }
    if ((c->opts.flags & DLOCK_CLIENT_QUEUE_CALLBACKS) &&
        dlock__events_enable(&c->events) != DLOCK_OK)
        return open_error(c, DLOCK_ENOMEM, "open",
                          "cannot make the callback queue's eventfd");
    if (dlock__uuid(c->uuid) != DLOCK_OK)
        return open_error(c, DLOCK_ERROR, "open",
                          "cannot read the OS random source");
    if ((rc = dlock_global_init()) != DLOCK_OK)
        return open_error(c, rc, "open", "a backend's global_init failed");
    c->global_ref = true;
    return client_setup(c, uri);
}

const char *dlock_client_errmsg(const dlock_client *c)
{
    const char *m;

    if (c == NULL)
        return "no client";
    m = dlock__thread_errmsg(c);
    return m[0] != '\0' ? m : c->errmsg;
}

/* ---- close ------------------------------------------------------------------ */

void dlock_client_shutdown(dlock_client *c)
{
    if (c != NULL)
        dlock_cancel_fire(&c->shut);
}

void dlock_client_close(dlock_client *c)
{
    if (c == NULL || atomic_load(&c->closed))
        return;
    /* Asynchronous acquires end first (with DLOCK_ECLOSED, the shutdown
     * wakes them), and their queued callbacks run here, before the
     * handles' locks are released below. */
    dlock_client_shutdown(c);
    dlock__async_stop(&c->async);
    while (dlock__events_run(&c->events) > 0)
        ;
    if (atomic_exchange(&c->closed, true))
        return;
    /* Release what is still held (the handles stay valid memory), then stop
     * the watchdog and disconnect. */
    for (;;) {
        struct dlock_lock *lk = NULL;
        pthread_mutex_lock(&c->hmu);
        for (struct dlock_lock *h = c->handles; h != NULL; h = h->next)
            if (h->depth > 0) {
                lk = h;
                break;
            }
        pthread_mutex_unlock(&c->hmu);
        if (lk == NULL)
            break;
        dlock__lock_drop(lk);
    }
    dlock__wd_stop(&c->wd);
    dlock__pool_close_sessions(&c->pool);
    dlock__thread_error_clear(c);
    dlock__client_unref(c);
}

/* ---- info and inspect ------------------------------------------------------- */

int dlock_client_info(dlock_client *c, dlock_info *out)
{
    if (c == NULL || c->b == NULL)
        return DLOCK_EINVAL;
    if (out == NULL || out->version == 0 || out->version > DLOCK_INFO_VERSION)
        return dlock__thread_error(c, DLOCK_EINVAL,
                                   "info: out.version %u not in 1..%d "
                                   "(initialise it with DLOCK_INFO_INIT)",
                                   out != NULL ? out->version : 0,
                                   DLOCK_INFO_VERSION);
    out->scheme = c->b->scheme;
    out->mode = c->mode->name;
    out->caps = c->caps;
    out->uri = c->uri->redacted;
    out->owner = c->uuid;
    out->lease_ms = c->uri->lease_ms;
    out->timeout_ms = c->uri->timeout_ms;
    out->summary = c->mode->summary != NULL ? c->mode->summary : "";
    return DLOCK_OK;
}

int dlock_inspect(dlock_client *c, const char *name, dlock_state *out)
{
    struct dlock__sess *ss;
    size_t len, bad, cap;
    char *buf;
    int rc;

    if (c == NULL)
        return DLOCK_EINVAL;
    buf = dlock__thread_errbuf(c, &cap);
    if (out == NULL || name == NULL || out->version == 0 ||
        out->version > DLOCK_STATE_VERSION)
        return dlock__thread_error(c, DLOCK_EINVAL,
                                   "inspect: name and out are required, out "
                                   "initialised with DLOCK_STATE_INIT");
    if (atomic_load(&c->closed) || c->b == NULL)
        return dlock__thread_error(c, DLOCK_ECLOSED,
                                   "inspect: the client was closed");
    len = strnlen(name, DLOCK_NAME_MAX + 1);
    if (len == 0 || len > DLOCK_NAME_MAX || !dlock__utf8_valid(name, len, &bad))
        return dlock__thread_error(c, DLOCK_EINVAL,
                                   "inspect: name: expected 1 to %d bytes "
                                   "of UTF-8",
                                   DLOCK_NAME_MAX);
    if (c->mode->inspect == NULL)
        return dlock__thread_error(c, DLOCK_EUNSUPPORTED,
                                   "inspect: %s mode %s cannot inspect a "
                                   "lock",
                                   c->b->scheme, c->mode->name);
    out->held = -1;
    out->owner[0] = '\0';
    out->fence = 0;
    out->remaining_ms = -1;
    out->waiters = -1;
    ss = dlock__checkout(&c->pool, DLOCK__PICK_ANY, NULL, buf, cap, &rc);
    if (ss == NULL)
        return rc;
    dlock__sess_begin(ss, "inspect", name, buf, cap);
    rc = c->mode->inspect(ss->s, name, len, out);
    dlock__checkin(ss, rc);
    return rc;
}
