/*
 * lock.c: lock handles (see lock.h). Reentrancy, the acquire loop
 * (deadline, backoff with full jitter, the mode's retry hint and its
 * wait()), owner-checked release, manual renewal, and the read-only
 * accessors. When a lock is lost is held.c's to say.
 *
 * The acquire and release paths allocate nothing and add no system call of
 * their own: the request is built once in dlock_lock_new(), the grant lives
 * in the handle, and the watchdog's heap has room reserved per handle. The
 * one exception is a handle's first failed call, which allocates the room
 * for its message (kept for the handle's life).
 *
 * Divisions: messages; handles; acquire; release; renew; accessors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

/* ---- messages --------------------------------------------------------------- */

/*
 * A call's message builds in a buffer on the stack of the outermost call
 * on the handle (lk->msg, which backends fill through the session); at its
 * end it is kept in lk->errmsg, allocated when a call first fails and
 * reused after. A handle that never fails carries no message buffer: 10 000
 * held locks cost 5 MB less.
 */
struct lock_call {
    char buf[DLOCK__ERRMSG_MAX];
    bool outer; /* this call set lk->msg, and keeps its message */
};

static void call_begin(struct dlock_lock *lk, struct lock_call *lc)
{
    lc->outer = lk->msg == NULL;
    if (lc->outer) {
        lc->buf[0] = '\0';
        lk->msg = lc->buf;
    }
}

/* Keep text as the handle's message ("" clears it). */
static void keep_msg(struct dlock_lock *lk, const char *text)
{
    if (text[0] == '\0') {
        if (lk->errmsg != NULL)
            lk->errmsg[0] = '\0';
        lk->errmsg_lost = false;
        return;
    }
    if (lk->errmsg == NULL)
        lk->errmsg = malloc(DLOCK__ERRMSG_MAX);
    lk->errmsg_lost = lk->errmsg == NULL;
    if (lk->errmsg != NULL)
        snprintf(lk->errmsg, DLOCK__ERRMSG_MAX, "%s", text);
}

static int call_end(struct dlock_lock *lk, struct lock_call *lc, int rc)
{
    if (lc->outer) {
        keep_msg(lk, lc->buf);
        lk->msg = NULL;
    }
    return rc;
}

void dlock__lock_say(struct dlock_lock *lk, const char *fmt, ...)
{
    char text[DLOCK__ERRMSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    keep_msg(lk, text);
}

/* Fill the handle's message from core's own words (no backend text). */
static int lock_error(struct dlock_lock *lk, int code, const char *op,
                      const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int lock_error(struct dlock_lock *lk, int code, const char *op,
                      const char *fmt, ...)
{
    char text[DLOCK__ERRMSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    dlock__pool_format(&lk->c->pool, lk->msg, DLOCK__ERRMSG_MAX, op,
                       lk->name, text);
    return code;
}

/* Keep the backend's message if it wrote one, else say the code's text. */
static int lock_result(struct dlock_lock *lk, int code, const char *op)
{
    if (code != DLOCK_OK && lk->msg[0] == '\0')
        lock_error(lk, code, op, "%s", dlock_strerror(code));
    return code;
}

static bool uses_watchdog(const struct dlock_lock *lk)
{
    return !(lk->c->caps & DLOCK_CAP_NO_RENEW) &&
           !(lk->flags & DLOCK_LOCK_NO_WATCHDOG);
}

/* ---- handles --------------------------------------------------------------- */

/* A client-wide argument error: the calling thread's message. */
#define NEW_ERROR(c, code, ...) \
    dlock__thread_error((c), (code), "lock_new: " __VA_ARGS__)

int dlock_lock_new(dlock_lock **out, dlock_client *c, const char *name,
                   const dlock_lock_options *opts)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    struct dlock_lock *lk;
    uint8_t digest[32];
    size_t len, nhandles;
    uint64_t serial;
    uint32_t kind;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (c == NULL || out == NULL)
        return DLOCK_EINVAL;
    if ((rc = dlock__client_check_new(c, "lock_new", name, &len)) != DLOCK_OK)
        return rc;
    if (opts != NULL) {
        if (opts->version == 0 || opts->version > DLOCK_LOCK_OPTIONS_VERSION)
            return NEW_ERROR(c, DLOCK_EINVAL,
                             "opts: version %u not in 1..%d",
                             opts->version, DLOCK_LOCK_OPTIONS_VERSION);
        /* A version 1 caller's struct ends before permits: read no
         * further than it. */
        memcpy(&o, opts, opts->version >= 2
                             ? sizeof o
                             : offsetof(dlock_lock_options, permits));
    }
    if (o.flags & ~(uint32_t)(DLOCK_LOCK_SHARED | DLOCK_LOCK_NO_WATCHDOG))
        return NEW_ERROR(c, DLOCK_EINVAL, "opts.flags: unknown bits 0x%x",
                         o.flags);
    if (o.permits > DLOCK_PERMITS_MAX)
        return NEW_ERROR(c, DLOCK_EINVAL,
                         "opts.permits: %u (expected 0 for a lock, or 1 to "
                         "%d)", o.permits, DLOCK_PERMITS_MAX);
    if (o.permits > 0 && (o.flags & DLOCK_LOCK_SHARED))
        return NEW_ERROR(c, DLOCK_EINVAL,
                         "opts.permits: a permit is not shared (give "
                         "DLOCK_LOCK_SHARED or permits, not both)");
    kind = o.permits > 0                   ? DLOCK_KIND_PERMIT
           : (o.flags & DLOCK_LOCK_SHARED) ? DLOCK_KIND_SHARED
                                           : DLOCK_KIND_EXCLUSIVE;
    /* [B-KIND-1] */
    if (!(c->mode->kinds & DLOCK_KIND_BIT(kind)))
        return NEW_ERROR(c, DLOCK_EUNSUPPORTED,
                         "%s: %s mode '%s' has none (dlock info lists the "
                         "modes that do)",
                         kind == DLOCK_KIND_PERMIT ? "permits (a semaphore)"
                                                   : "shared mode",
                         c->b->scheme, c->mode->name);

    lk = calloc(1, sizeof *lk);
    if (lk == NULL || (lk->name = malloc(len + 1)) == NULL) {
        free(lk);
        return NEW_ERROR(c, DLOCK_ENOMEM, "out of memory");
    }
    memcpy(lk->name, name, len + 1);
    serial = atomic_fetch_add(&c->next_serial, 1);
    snprintf(lk->owner, sizeof lk->owner, "%s:%llu", c->uuid,
             (unsigned long long)serial);
    dlock_sha256(digest, name, len);
    memcpy(&lk->req.name_hash, digest, sizeof lk->req.name_hash);
    lk->req.name = lk->name;
    lk->req.name_len = len;
    lk->req.owner = lk->owner;
    lk->req.owner_len = strlen(lk->owner);
    lk->req.client_id = c->uuid;
    lk->req.serial = serial;
    lk->req.lease_ms = o.lease_ms != 0 ? o.lease_ms : c->uri->lease_ms;
    lk->req.flags = o.flags;
    lk->req.kind = kind;
    lk->req.permits = o.permits > 0 ? o.permits : 1;
    lk->flags = o.flags;
    lk->c = c;
    dlock__held_init(&lk->held, &c->pool, &lk->req, lk, o.on_lost,
                     o.payload);

    if (kind == DLOCK_KIND_SHARED)
        atomic_fetch_add(&c->nshared, 1);
    pthread_mutex_lock(&c->hmu);
    nhandles = ++c->nhandles;
    lk->next = c->handles;
    if (c->handles != NULL)
        c->handles->prev = lk;
    c->handles = lk;
    pthread_mutex_unlock(&c->hmu);
    dlock__client_ref(c);
    *out = lk;
    /* Room in the watchdog's heap for this handle, so acquire never
     * allocates. The count seen under hmu is enough: every handle reserves
     * before it can be acquired, and the heap never shrinks. */
    if (dlock__wd_reserve(&c->wd, nhandles) != DLOCK_OK) {
        dlock_lock_free(lk);
        *out = NULL;
        return NEW_ERROR(c, DLOCK_ENOMEM, "out of memory");
    }
    return DLOCK_OK;
}

void dlock_lock_free(dlock_lock *lk)
{
    struct dlock_client *c;

    if (lk == NULL)
        return;
    c = lk->c;
    if (lk->depth > 0)
        dlock__lock_drop(lk);
    /* Its callbacks must not run after this. */
    dlock__events_remove(&c->events, &lk->held.lost_ev);
    dlock__events_remove(&c->events, &lk->done_ev);
    free(atomic_exchange(&lk->held.lost_why, NULL));
    pthread_mutex_lock(&c->hmu);
    if (lk->prev != NULL)
        lk->prev->next = lk->next;
    else
        c->handles = lk->next;
    if (lk->next != NULL)
        lk->next->prev = lk->prev;
    c->nhandles--;
    pthread_mutex_unlock(&c->hmu);
    if (lk->req.kind == DLOCK_KIND_SHARED)
        atomic_fetch_sub(&c->nshared, 1);
    free(lk->name);
    free(lk->errmsg);
    free(lk);
    dlock__client_unref(c);
}

/* ---- acquire ---------------------------------------------------------------- */

/* Each thread's own address: who holds a handle (held_by). */
static _Thread_local char thread_mark;

/* The lock was granted on ss: believe it, pin it, start renewing it, and
 * let the watchdog see its connection. */
static void lock_granted(struct dlock_lock *lk, struct dlock__sess *ss)
{
    dlock__held_granted(&lk->held, ss);
    lk->depth = 1;
    atomic_store(&lk->held_by, atomic_load(&lk->in_async)
                                   ? 0
                                   : (uintptr_t)&thread_mark);
    if (uses_watchdog(lk) || atomic_load(&lk->held.pin.watch_fd) >= 0)
        dlock__wd_schedule(&lk->c->wd, &lk->held, uses_watchdog(lk));
}

/* One attempt (or one native wait) on a checked-out session. */
static int attempt(struct dlock_lock *lk, struct dlock__sess *ss,
                   int64_t deadline, uint32_t *hint)
{
    dlock__held_attempt(&lk->held);
    *hint = 0;
    dlock__sess_begin(ss, "acquire", lk->name, lk->msg,
                      DLOCK__ERRMSG_MAX);
    dlock__sess_call(ss, &lk->call);
    return lk->c->mode->acquire(ss->s, &lk->req, deadline, &lk->held.grant,
                                hint);
}

/* Check a session out and make one attempt on it: a native wait when
 * native, but never on a session whose grants need renewing and
 * releasing [B-PIN-1] (there: try once, then wait on a session of its
 * own). *ss is the session used, or NULL. */
static int attempt_somewhere(struct dlock_lock *lk, bool native,
                             int64_t deadline, struct dlock__sess **ss,
                             uint32_t *hint)
{
    struct dlock__pool *p = &lk->c->pool;
    int rc;

    *ss = dlock__checkout(p, DLOCK__PICK_ANY, &lk->req, lk->msg,
                          DLOCK__ERRMSG_MAX, &rc);
    if (*ss == NULL)
        return rc;
    if (!native || (*ss)->npinned == 0 ||
        !(lk->c->caps & DLOCK_CAP_CONN_BOUND))
        return attempt(lk, *ss, native ? deadline : 0, hint);
    rc = attempt(lk, *ss, 0, hint);
    if (rc != DLOCK_EBUSY)
        return rc;
    dlock__checkin(*ss, rc);
    *ss = dlock__checkout(p, DLOCK__PICK_UNPINNED, &lk->req, lk->msg,
                          DLOCK__ERRMSG_MAX, &rc);
    return *ss != NULL ? attempt(lk, *ss, deadline, hint) : rc;
}

/* After an attempt that was not granted: true to go on waiting, false to
 * return *rc (which this may change). */
static bool keep_trying(struct dlock_lock *lk, int *rc, bool native,
                        int64_t *deadline, int64_t now)
{
    switch ((dlock_error_code)*rc) {
    case DLOCK_EBUSY:
        if (*deadline == 0) {
            lk->msg[0] = '\0';
            if (lk->req.kind == DLOCK_KIND_PERMIT)
                *rc = lock_error(lk, DLOCK_EBUSY, "acquire",
                                 "no permit free (all %u held)",
                                 lk->req.permits);
            else
                *rc = lock_error(lk, DLOCK_EBUSY, "acquire",
                                 "held by another owner");
            return false;
        }
        break;
    case DLOCK_ECONNECT:
    case DLOCK_ETIMEDOUT:
        /* Retry a broken connection until the deadline; a native wait
         * that ran out is the deadline. */
        if (*rc == DLOCK_ETIMEDOUT && native)
            *deadline = now;
        break;
    case DLOCK_OK:
    case DLOCK_ERROR:
    case DLOCK_ELOST:
    case DLOCK_ENOBACKEND:
    case DLOCK_EINVAL:
    case DLOCK_ENOTOWNER:
    case DLOCK_ENOTHELD:
    case DLOCK_ENOMEM:
    case DLOCK_EUNSUPPORTED:
    case DLOCK_ECLOSED:
    case DLOCK_EAUTH:
    case DLOCK_ENOENT:
    case DLOCK_EACCES:
    case DLOCK_ECANCELED:
    case DLOCK_EREPLICAS:
    case DLOCK_EDEADLK:
        *rc = lock_result(lk, *rc, "acquire");
        return false;
    }
    return *deadline != 0 && now < *deadline;
}

/* The acquire was cancelled (code: DLOCK_ECANCELED or DLOCK_ECLOSED). */
static int cancelled(struct dlock_lock *lk, int code)
{
    lk->msg[0] = '\0';
    return lock_error(lk, code, "acquire", "%s",
                      code == DLOCK_ECLOSED
                          ? "the client was shut down before the lock was "
                            "granted"
                          : "cancelled before the lock was granted");
}

/*
 * A grant after a long wait at the server (a native wait, a queue) counts
 * its lease from the request, sent before the wait [B-BOUND-1]; a wait of
 * more than a third of the lease leaves too little of it, and one longer
 * than the lease a grant already run out, although the server granted it
 * just now. Renew once on the same session: the lease then counts from
 * that renewal. If it does not get through, the grant keeps the old end
 * (in doubt, as any grant whose renewal failed).
 */
static void refresh_after_wait(struct dlock_lock *lk, struct dlock__sess *ss)
{
    struct dlock__held *h = &lk->held;
    struct dlock_renewal r = {&lk->req, &h->grant, DLOCK_ERROR};
    int64_t start = dlock_now_ms(), old = h->grant.expires_ms;
    int64_t old_sent = h->sent_ms;
    uint64_t old_gen = h->attempt_gen;

    if (old == INT64_MAX || !DLOCK__BOUNDED(lk->c->mode->caps) ||
        old - start >= (int64_t)lk->req.lease_ms * 2 / 3)
        return;
    dlock__held_renewing(h, start);
    dlock__sess_begin(ss, "renew", lk->name, lk->msg, DLOCK__ERRMSG_MAX);
    if (lk->c->mode->renew(ss->s, &r, 1) != DLOCK_OK ||
        r.result != DLOCK_OK) {
        h->grant.expires_ms = old;
        h->attempt_gen = old_gen;
        h->sent_ms = old_sent;
    }
}

/* The attempt on ss granted the lock. If a cancel fired meanwhile, the
 * grant raced it: give it back at once [B-CANCEL-1]. */
static int granted(struct dlock_lock *lk, struct dlock__sess *ss)
{
    int code;

    refresh_after_wait(lk, ss);
    lock_granted(lk, ss);
    dlock__checkin(ss, DLOCK_OK);
    lk->msg[0] = '\0';
    if ((code = dlock__cancelled(&lk->call.cx)) == 0)
        return DLOCK_OK;
    dlock__lock_drop(lk);
    return cancelled(lk, code);
}

/* The loop of dlock_acquire_cancellable(), once the handle is known free. */
static int acquire_loop(struct dlock_lock *lk, uint32_t timeout_ms)
{
    struct dlock_client *c = lk->c;
    int64_t deadline, now;
    unsigned tries = 0;
    int rc, code;

    now = dlock_now_ms();
    deadline = timeout_ms == 0                    ? 0
               : timeout_ms == DLOCK_WAIT_FOREVER ? INT64_MAX
                                                  : now + timeout_ms;
    for (;;) {
        bool native = deadline != 0 && (c->caps & DLOCK_CAP_NATIVE_WAIT);
        struct dlock__sess *ss;
        uint32_t hint = 0, pause;
        bool notified;

        if ((code = dlock__cancelled(&lk->call.cx)) != 0)
            return cancelled(lk, code);
        rc = attempt_somewhere(lk, native, deadline, &ss, &hint);
        if (rc == DLOCK_OK)
            return granted(lk, ss);
        /* Whatever the backend made of the interruption, a cancel wins. */
        if ((code = dlock__cancelled(&lk->call.cx)) != 0) {
            if (ss != NULL)
                dlock__checkin(ss, rc);
            return cancelled(lk, code);
        }
        now = dlock_now_ms();
        if (!keep_trying(lk, &rc, native, &deadline, now)) {
            if (ss != NULL)
                dlock__checkin(ss, rc);
            if (rc != DLOCK_EBUSY && rc != DLOCK_ECONNECT &&
                rc != DLOCK_ETIMEDOUT)
                return rc;
            if (rc == DLOCK_EBUSY && deadline == 0)
                return rc;
            /* The deadline passed while busy or unreachable. */
            if (rc != DLOCK_EBUSY && lk->msg[0] != '\0')
                return lock_result(lk, rc, "acquire");
            lk->msg[0] = '\0';
            return lock_error(lk, DLOCK_ETIMEDOUT, "acquire",
                              "not granted within %u ms", timeout_ms);
        }

        /* Wait for a release announcement where the mode has one, else
         * back off with full jitter; never past the hint or the deadline.
         * Both watch the cancellation sources. */
        notified = rc == DLOCK_EBUSY && ss != NULL &&
                   c->mode->wait != NULL && (c->caps & DLOCK_CAP_NOTIFY);
        pause = notified ? c->retry_max_ms
                         : dlock__backoff_ms(c->retry_min_ms,
                                             c->retry_max_ms, tries++);
        if (rc == DLOCK_EBUSY && hint > 0 && hint < pause)
            pause = hint;
        if ((int64_t)pause > deadline - now)
            pause = (uint32_t)(deadline - now);
        if (notified) {
            dlock__sess_begin(ss, "wait", lk->name, lk->msg,
                              DLOCK__ERRMSG_MAX);
            dlock__sess_call(ss, &lk->call);
            rc = c->mode->wait(ss->s, &lk->req, pause);
            dlock__checkin(ss, rc);
        } else {
            if (ss != NULL)
                dlock__checkin(ss, rc);
            code = dlock__cancel_poll(&lk->call.cx, -1, 0, now + pause);
            if (code == DLOCK_ECANCELED || code == DLOCK_ECLOSED)
                return cancelled(lk, code);
        }
        lk->msg[0] = '\0';
    }
}

/* Does the calling thread hold lk's name through another handle of the
 * client, one of the two shared? Then a wait would wait for itself (the
 * upgrade deadlock of redisson#4796). Free for a client without shared
 * handles. */
static bool waits_for_itself(const struct dlock_lock *lk)
{
    struct dlock_client *c = lk->c;
    const uintptr_t me = (uintptr_t)&thread_mark;
    bool found = false;

    if (atomic_load(&c->nshared) == 0)
        return false;
    pthread_mutex_lock(&c->hmu);
    for (struct dlock_lock *h = c->handles; h != NULL && !found; h = h->next)
        found = h != lk && atomic_load(&h->held_by) == me &&
                (h->req.kind == DLOCK_KIND_SHARED ||
                 lk->req.kind == DLOCK_KIND_SHARED) &&
                h->req.name_hash == lk->req.name_hash &&
                h->req.name_len == lk->req.name_len &&
                memcmp(h->req.name, lk->req.name, lk->req.name_len) == 0;
    pthread_mutex_unlock(&c->hmu);
    return found;
}

static int acquire_call(struct dlock_lock *lk, uint32_t timeout_ms,
                        dlock_cancel *cx, void (*queued)(void *), void *arg)
{
    struct dlock_client *c = lk->c;

    lk->msg[0] = '\0';
    if (atomic_load(&c->closed))
        return lock_error(lk, DLOCK_ECLOSED, "acquire", "client closed");
    if (atomic_load(&lk->held.state) == DLOCK__LOST)
        return lock_error(lk, DLOCK_ELOST, "acquire",
                          "this handle's lock was lost; dlock_release() it "
                          "before acquiring again");
    if (lk->depth > 0) {
        /* Reentrant: count a level, no round trip. */
        if (lk->depth == UINT32_MAX)
            return lock_error(lk, DLOCK_EINVAL, "acquire",
                              "reentrant depth overflow");
        lk->depth++;
        return DLOCK_OK;
    }
    if (timeout_ms != 0 && !atomic_load(&lk->in_async) &&
        waits_for_itself(lk))
        return lock_error(lk, DLOCK_EDEADLK, "acquire",
                          "this thread holds it %s through another "
                          "handle of this client; release that one first "
                          "(an upgrade or downgrade between two handles "
                          "would wait for itself)",
                          lk->req.kind == DLOCK_KIND_SHARED ? "exclusive"
                                                            : "shared");
    lk->call.cx.own = cx;
    lk->call.cx.shut = &c->shut;
    lk->call.queued = queued;
    lk->call.arg = arg;
    return acquire_loop(lk, timeout_ms);
}

int dlock__acquire(struct dlock_lock *lk, uint32_t timeout_ms,
                   dlock_cancel *cx, void (*queued)(void *), void *arg)
{
    struct lock_call lc;

    if (lk == NULL)
        return DLOCK_EINVAL;
    call_begin(lk, &lc);
    return call_end(lk, &lc,
                    acquire_call(lk, timeout_ms, cx, queued, arg));
}

int dlock_acquire_cancellable(dlock_lock *lk, uint32_t timeout_ms,
                              dlock_cancel *cx)
{
    return dlock__acquire(lk, timeout_ms, cx, NULL, NULL);
}

int dlock_acquire(dlock_lock *lk, uint32_t timeout_ms)
{
    return dlock_acquire_cancellable(lk, timeout_ms, NULL);
}

int dlock_try_acquire(dlock_lock *lk)
{
    return dlock_acquire(lk, 0);
}

/* ---- release ---------------------------------------------------------------- */

static int drop_call(struct dlock_lock *lk)
{
    struct dlock_client *c = lk->c;
    struct dlock__sess *ss;
    char first[DLOCK__ERRMSG_MAX] = "";
    int rc;

    /* [B-RELEASE-1] and core's promise to users: the renewal is cancelled
     * before the release is sent, so it cannot resurrect the lock; and no
     * loss report runs after this point. */
    dlock__wd_cancel(&c->wd, &lk->held);
    /* The connection that held a conn-bound lock has ended: the server
     * freed it, whatever the release below says. */
    if (atomic_load(&lk->held.pin.watch_fd) == DLOCK__FD_GONE)
        dlock__held_lose(&lk->held);
    ss = dlock__checkout_grant(&c->pool, lk->held.pin.sess, lk->msg,
                               DLOCK__ERRMSG_MAX, &rc);
    /* [B-CONN-2]: a lock that outlives its connection is released again
     * over a new session when the first one turns out to have ended (a
     * cut the watch had not reported yet; the idle sessions may have ended
     * with it, so not one of those). The release is owner-checked, so
     * sending it twice cannot free another owner's lock. */
    for (int tries = 0; ss != NULL; tries++) {
        dlock__sess_begin(ss, "release", lk->name, lk->msg,
                          DLOCK__ERRMSG_MAX);
        rc = c->mode->release(ss->s, &lk->req, &lk->held.grant);
        dlock__unpin(&lk->held.pin);
        dlock__checkin(ss, rc);
        if (rc != DLOCK_ECONNECT || (c->caps & DLOCK_CAP_CONN_BOUND) ||
            tries > 0)
            break;
        memcpy(first, lk->msg, sizeof first);
        lk->msg[0] = '\0';
        ss = dlock__checkout(&c->pool, DLOCK__PICK_NEW, NULL, lk->msg,
                             DLOCK__ERRMSG_MAX, &rc);
    }
    lk->depth = 0;
    atomic_store(&lk->held_by, 0);
    if (dlock__held_released(&lk->held)) {
        lk->msg[0] = '\0';
        return lock_error(lk, DLOCK_ELOST, "release",
                          "the lock had been lost before this release");
    }
    /* Sent twice and not confirmed: both answers, and ECONNECT. If the
     * second found the lock no longer ours, the first went through or the
     * lease ran out; which, the lost answer would have said. */
    if (first[0] != '\0' && rc != DLOCK_OK) {
        size_t used = strlen(first);
        snprintf(first + used, sizeof first - used,
                 "; sent again over a new connection: %s",
                 rc == DLOCK_ENOTOWNER ? "no longer ours (the first went "
                                         "through, or the lease ran out)"
                 : lk->msg[0]       ? lk->msg
                                       : dlock_strerror(rc));
        memcpy(lk->msg, first, sizeof first);
        return DLOCK_ECONNECT;
    }
    return lock_result(lk, rc, "release");
}

int dlock__lock_drop(struct dlock_lock *lk)
{
    struct lock_call lc;

    call_begin(lk, &lc);
    return call_end(lk, &lc, drop_call(lk));
}

static int release_call(struct dlock_lock *lk)
{
    lk->msg[0] = '\0';
    if (lk->depth == 0)
        return lock_error(lk, DLOCK_ENOTHELD, "release",
                          "not held by this handle");
    if (lk->depth > 1) {
        lk->depth--;
        return DLOCK_OK;
    }
    return dlock__lock_drop(lk);
}

int dlock_release(dlock_lock *lk)
{
    struct lock_call lc;

    if (lk == NULL)
        return DLOCK_EINVAL;
    call_begin(lk, &lc);
    return call_end(lk, &lc, release_call(lk));
}

/* ---- renew ------------------------------------------------------------------ */

/* What a call on a held handle checks first: DLOCK_OK, or the error. */
static int check_held(struct dlock_lock *lk, const char *op)
{
    lk->msg[0] = '\0';
    if (lk->depth == 0)
        return lock_error(lk, DLOCK_ENOTHELD, op, "not held by this handle");
    if (atomic_load(&lk->held.state) == DLOCK__LOST)
        return lock_error(lk, DLOCK_ELOST, op, "the lock was lost");
    return DLOCK_OK;
}

static int renew_call(struct dlock_lock *lk)
{
    struct dlock_client *c = lk->c;
    struct dlock__sess *ss;
    struct dlock_renewal item;
    int rc;

    if ((rc = check_held(lk, "renew")) != DLOCK_OK)
        return rc;
    if (c->caps & DLOCK_CAP_NO_RENEW)
        return DLOCK_OK;
    /* Keep the watchdog off this handle while we renew it ourselves. */
    dlock__wd_cancel(&c->wd, &lk->held);
    ss = dlock__checkout_grant(&c->pool, lk->held.pin.sess, lk->msg,
                               DLOCK__ERRMSG_MAX, &rc);
    if (ss != NULL) {
        dlock__held_renewing(&lk->held, dlock_now_ms());
        item.req = &lk->req;
        item.grant = &lk->held.grant;
        item.result = DLOCK_ERROR;
        dlock__sess_begin(ss, "renew", lk->name, lk->msg,
                          DLOCK__ERRMSG_MAX);
        rc = c->mode->renew(ss->s, &item, 1);
        if (rc == DLOCK_OK)
            rc = item.result;
        dlock__checkin(ss, rc);
    }
    if (dlock__held_renew_result(&lk->held, rc, dlock_now_ms())) {
        char why[DLOCK__ERRMSG_MAX];
        if (rc == DLOCK_OK || lk->msg[0] == '\0') {
            lk->msg[0] = '\0';
            lock_error(lk, DLOCK_ELOST, "renew", "%s",
                       rc == DLOCK_OK ? "the lease ran out before the "
                                        "renewal got through"
                                      : dlock_strerror(rc));
        }
        dlock__held_tell_lost(&lk->held, DLOCK_ELOST, lk->msg, why,
                              sizeof why);
        rc = DLOCK_ELOST;
    }
    if (atomic_load(&lk->held.state) == DLOCK__HELD &&
        (uses_watchdog(lk) || atomic_load(&lk->held.pin.watch_fd) >= 0))
        dlock__wd_schedule(&c->wd, &lk->held, uses_watchdog(lk));
    return lock_result(lk, rc, "renew");
}

int dlock_renew(dlock_lock *lk)
{
    struct lock_call lc;

    if (lk == NULL)
        return DLOCK_EINVAL;
    call_begin(lk, &lc);
    return call_end(lk, &lc, renew_call(lk));
}

/* ---- downgrade ---------------------------------------------------------------- */

static int downgrade_call(struct dlock_lock *lk)
{
    struct dlock_client *c = lk->c;
    struct dlock__sess *ss;
    int rc;

    if ((rc = check_held(lk, "downgrade")) != DLOCK_OK)
        return rc;
    if (lk->req.kind != DLOCK_KIND_EXCLUSIVE)
        return lock_error(lk, DLOCK_EINVAL, "downgrade",
                          "the handle is not exclusive");
    if (lk->depth > 1)
        return lock_error(lk, DLOCK_EINVAL, "downgrade",
                          "held at %u reentrant levels: the outer ones "
                          "asked for it exclusive; release to one first",
                          lk->depth);
    if (!(c->caps & DLOCK_CAP_DOWNGRADE))
        return lock_error(lk, DLOCK_EUNSUPPORTED, "downgrade",
                          "%s mode '%s' cannot turn a writer into a reader "
                          "atomically; release it and acquire shared",
                          c->b->scheme, c->mode->name);
    /* The watchdog reads the request: keep it off while the kind changes. */
    dlock__wd_cancel(&c->wd, &lk->held);
    ss = dlock__checkout_grant(&c->pool, lk->held.pin.sess, lk->msg,
                               DLOCK__ERRMSG_MAX, &rc);
    if (ss != NULL) {
        lk->req.kind = DLOCK_KIND_SHARED;
        dlock__sess_begin(ss, "downgrade", lk->name, lk->msg,
                          DLOCK__ERRMSG_MAX);
        rc = c->mode->downgrade(ss->s, &lk->req, &lk->held.grant);
        dlock__checkin(ss, rc);
        if (rc != DLOCK_OK)
            lk->req.kind = DLOCK_KIND_EXCLUSIVE;
    }
    if (rc == DLOCK_OK) {
        lk->flags |= DLOCK_LOCK_SHARED;
        lk->req.flags |= DLOCK_LOCK_SHARED;
        atomic_fetch_add(&c->nshared, 1);
    } else if (rc == DLOCK_ELOST) {
        dlock__held_lose(&lk->held);
    }
    if (atomic_load(&lk->held.state) == DLOCK__HELD &&
        (uses_watchdog(lk) || atomic_load(&lk->held.pin.watch_fd) >= 0))
        dlock__wd_schedule(&c->wd, &lk->held, uses_watchdog(lk));
    return lock_result(lk, rc, "downgrade");
}

int dlock_downgrade(dlock_lock *lk)
{
    struct lock_call lc;

    if (lk == NULL)
        return DLOCK_EINVAL;
    call_begin(lk, &lc);
    return call_end(lk, &lc, downgrade_call(lk));
}

/* ---- accessors ---------------------------------------------------------------- */

int dlock_held(const dlock_lock *lk)
{
    return lk != NULL && dlock__held_now(&lk->held);
}

uint64_t dlock_fence(const dlock_lock *lk)
{
    return lk != NULL && lk->depth > 0 ? lk->held.grant.fence : 0;
}

unsigned int dlock_lock_depth(const dlock_lock *lk)
{
    return lk != NULL ? lk->depth : 0;
}

const char *dlock_lock_name(const dlock_lock *lk)
{
    return lk != NULL ? lk->name : "";
}

const char *dlock_lock_owner(const dlock_lock *lk)
{
    return lk != NULL ? lk->owner : "";
}

uint32_t dlock_lock_remaining(const dlock_lock *lk)
{
    int64_t exp, now;

    if (!dlock_held(lk))
        return 0;
    exp = atomic_load(&((dlock_lock *)lk)->held.expires_ms);
    if (exp == INT64_MAX)
        return DLOCK_WAIT_FOREVER;
    now = dlock_now_ms();
    if (exp - now >= (int64_t)DLOCK_WAIT_FOREVER)
        return DLOCK_WAIT_FOREVER - 1;
    return exp > now ? (uint32_t)(exp - now) : 0;
}

const char *dlock_lock_errmsg(const dlock_lock *lk)
{
    if (lk == NULL)
        return "no lock handle";
    if (lk->errmsg_lost)
        return "out of memory (no room for the last call's message)";
    return lk->errmsg != NULL ? lk->errmsg : "";
}
