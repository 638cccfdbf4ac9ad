/*
 * lock.c: lock handles. Reentrancy, the acquire loop (deadline, backoff with
 * full jitter, the backend's retry hint and its wait()), owner-checked
 * release, manual renewal, and the read-only accessors.
 *
 * The acquire and release paths allocate nothing and add no system call of
 * their own: the request is built once in dlock_lock_new(), the grant lives
 * in the handle, and the watchdog's heap has room reserved per handle.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* Fill the handle's message from core's own words (no backend text). */
static int lock_error(struct dlock_lock *lk, int code, const char *op,
                      const char *fmt, ...)
{
    char text[DLOCK__ERRMSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    dlock__format_error(lk->c, lk->errmsg, sizeof lk->errmsg, op, lk->name,
                        text);
    return code;
}

/* Keep the backend's message if it wrote one, else say the code's text. */
static int lock_result(struct dlock_lock *lk, int code, const char *op)
{
    if (code != DLOCK_OK && lk->errmsg[0] == '\0')
        lock_error(lk, code, op, "%s", dlock_strerror(code));
    return code;
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static bool uses_watchdog(const struct dlock_lock *lk)
{
    return !(lk->c->caps & DLOCK_CAP_NO_RENEW) &&
           !(lk->flags & DLOCK_LOCK_NO_WATCHDOG);
}

/* ---- handles --------------------------------------------------------------- */

int dlock_lock_new(dlock_lock **out, dlock_client *c, const char *name,
                   const dlock_lock_options *opts)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    struct dlock_lock *lk;
    uint8_t digest[32];
    size_t len, bad;
    uint64_t serial;

    if (out != NULL)
        *out = NULL;
    if (c == NULL || out == NULL)
        return DLOCK_EINVAL;
    if (atomic_load(&c->closed) || c->b == NULL)
        return DLOCK_ECLOSED;
    if (name == NULL)
        return dlock_errorf(c->errmsg, sizeof c->errmsg, DLOCK_EINVAL,
                            "lock_new: name: NULL");
    len = strnlen(name, DLOCK_NAME_MAX + 1);
    if (len == 0 || len > DLOCK_NAME_MAX)
        return dlock_errorf(c->errmsg, sizeof c->errmsg, DLOCK_EINVAL,
                            "lock_new: name: %s (expected 1 to %d bytes)",
                            len == 0 ? "empty" : "too long", DLOCK_NAME_MAX);
    if (!dlock__utf8_valid(name, len, &bad))
        return dlock_errorf(c->errmsg, sizeof c->errmsg, DLOCK_EINVAL,
                            "lock_new: name: invalid UTF-8 at byte %zu", bad);
    if (opts != NULL) {
        if (opts->version == 0 || opts->version > DLOCK_LOCK_OPTIONS_VERSION)
            return dlock_errorf(c->errmsg, sizeof c->errmsg, DLOCK_EINVAL,
                                "lock_new: opts: version %u not in 1..%d",
                                opts->version, DLOCK_LOCK_OPTIONS_VERSION);
        o = *opts;
    }
    if (o.flags & ~(uint32_t)(DLOCK_LOCK_SHARED | DLOCK_LOCK_NO_WATCHDOG))
        return dlock_errorf(c->errmsg, sizeof c->errmsg, DLOCK_EINVAL,
                            "lock_new: opts.flags: unknown bits 0x%x",
                            o.flags);
    if ((o.flags & DLOCK_LOCK_SHARED) && !(c->caps & DLOCK_CAP_SHARED))
        return dlock_errorf(c->errmsg, sizeof c->errmsg, DLOCK_EUNSUPPORTED,
                            "lock_new: shared mode: %s mode '%s' has none",
                            c->b->scheme, c->mode);

    lk = calloc(1, sizeof *lk);
    if (lk == NULL || (lk->name = malloc(len + 1)) == NULL) {
        free(lk);
        return DLOCK_ENOMEM;
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
    lk->flags = o.flags;
    lk->on_lost = o.on_lost;
    lk->payload = o.payload;
    lk->c = c;
    lk->timer.idx = SIZE_MAX;
    atomic_init(&lk->state, DLOCK__FREE);
    atomic_init(&lk->expires_ms, 0);
    atomic_init(&lk->confirmed_gen, 0);
    atomic_init(&lk->watch_fd, -1);
    /* Renew at a third of the lease (Redisson's rule): two renewals can
     * fail before the lease runs out. */
    lk->interval_ms = lk->req.lease_ms / 3 > 0 ? lk->req.lease_ms / 3 : 1;

    pthread_mutex_lock(&c->mu);
    size_t nhandles = ++c->nhandles;
    lk->next = c->handles;
    if (c->handles != NULL)
        c->handles->prev = lk;
    c->handles = lk;
    pthread_mutex_unlock(&c->mu);
    /* Room in the watchdog's heap for this handle, so acquire never
     * allocates. The count seen under c->mu is enough: every handle
     * reserves before it can be acquired, and the heap never shrinks. */
    pthread_mutex_lock(&c->wd.mu);
    int rc = dlock__heap_reserve(&c->wd.heap, nhandles);
    pthread_mutex_unlock(&c->wd.mu);
    atomic_fetch_add(&c->refs, 1);
    *out = lk;
    if (rc != DLOCK_OK) {
        dlock_lock_free(lk);
        *out = NULL;
        return DLOCK_ENOMEM;
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
    pthread_mutex_lock(&c->mu);
    if (lk->prev != NULL)
        lk->prev->next = lk->next;
    else
        c->handles = lk->next;
    if (lk->next != NULL)
        lk->next->prev = lk->prev;
    c->nhandles--;
    pthread_mutex_unlock(&c->mu);
    free(lk->name);
    free(lk);
    dlock__client_unref(c);
}

/* ---- acquire ---------------------------------------------------------------- */

/* The lock was granted on ss: record it, pin it, start renewing it, and
 * let the watchdog see its connection. */
static void lock_granted(struct dlock_lock *lk, struct dlock__sess *ss)
{
    struct dlock_client *c = lk->c;
    bool watched = false;

    if (c->caps & DLOCK_CAP_CONN_BOUND) {
        pthread_mutex_lock(&c->mu);
        lk->pin = ss;
        lk->pin_next = ss->pinned;
        ss->pinned = lk;
        ss->npinned++;
        /* A connection that ended right after the grant's reply was
         * already taken off the watch: then the grant is gone with it. */
        atomic_store(&lk->watch_fd, ss->watch_fd >= 0 ? ss->watch_fd
                                    : ss->broken      ? DLOCK__FD_GONE
                                                      : -1);
        watched = ss->watch_fd >= 0;
        pthread_mutex_unlock(&c->mu);
    }
    lk->depth = 1;
    atomic_store(&lk->expires_ms, lk->grant.expires_ms);
    atomic_store(&lk->confirmed_gen, lk->attempt_gen);
    atomic_store(&lk->state, DLOCK__HELD);
    if (uses_watchdog(lk) || watched)
        dlock__wd_schedule(c, lk, ss, uses_watchdog(lk));
}

static void unpin(struct dlock_lock *lk)
{
    struct dlock_client *c = lk->c;
    struct dlock__sess *ss = lk->pin;

    if (ss == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    for (struct dlock_lock **p = &ss->pinned; *p != NULL; p = &(*p)->pin_next)
        if (*p == lk) {
            *p = lk->pin_next;
            break;
        }
    ss->npinned--;
    pthread_mutex_unlock(&c->mu);
    lk->pin = NULL;
    lk->pin_next = NULL;
}

/* One attempt (or one native wait) on a checked-out session. */
static int attempt(struct dlock_lock *lk, struct dlock__sess *ss,
                   int64_t deadline, uint32_t *hint)
{
    struct dlock_client *c = lk->c;
    int64_t now = dlock_now_ms();

    memset(&lk->grant, 0, sizeof lk->grant);
    /* The lease counts from before the request is sent: the server's
     * clock starts later, so ours runs out first [B-BOUND-1]. */
    lk->grant.expires_ms = DLOCK__BOUNDED(c->caps)
                               ? now + (int64_t)lk->req.lease_ms
                               : INT64_MAX;
    lk->attempt_gen = atomic_load(&c->doubt_gen);
    *hint = 0;
    dlock__sess_begin(ss, "acquire", lk->name, lk->errmsg,
                      sizeof lk->errmsg);
    return c->b->acquire(ss->s, &lk->req, deadline, &lk->grant, hint);
}

int dlock_acquire(dlock_lock *lk, uint32_t timeout_ms)
{
    struct dlock_client *c;
    int64_t deadline, now;
    unsigned tries = 0;
    int rc;

    if (lk == NULL)
        return DLOCK_EINVAL;
    c = lk->c;
    lk->errmsg[0] = '\0';
    if (atomic_load(&c->closed))
        return lock_error(lk, DLOCK_ECLOSED, "acquire", "client closed");
    if (atomic_load(&lk->state) == DLOCK__LOST)
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

    now = dlock_now_ms();
    deadline = timeout_ms == 0                    ? 0
               : timeout_ms == DLOCK_WAIT_FOREVER ? INT64_MAX
                                                  : now + timeout_ms;
    for (;;) {
        bool native = deadline != 0 && (c->caps & DLOCK_CAP_NATIVE_WAIT);
        struct dlock__sess *ss;
        uint32_t hint = 0, pause;
        bool notified;

        ss = dlock__checkout(c, DLOCK__PICK_ANY, &lk->req, lk->errmsg,
                             sizeof lk->errmsg, &rc);
        if (ss != NULL) {
            /* A native wait must not block a session whose grants need
             * renewing and releasing [B-PIN-1]: try once there, then wait
             * on a session of its own. */
            if (native && ss->npinned > 0 &&
                (c->caps & DLOCK_CAP_CONN_BOUND)) {
                rc = attempt(lk, ss, 0, &hint);
                if (rc == DLOCK_EBUSY) {
                    dlock__checkin(ss, rc);
                    ss = dlock__checkout(c, DLOCK__PICK_UNPINNED, &lk->req,
                                         lk->errmsg, sizeof lk->errmsg, &rc);
                    if (ss != NULL)
                        rc = attempt(lk, ss, deadline, &hint);
                }
            } else {
                rc = attempt(lk, ss, native ? deadline : 0, &hint);
            }
        }
        if (rc == DLOCK_OK) {
            lock_granted(lk, ss);
            dlock__checkin(ss, rc);
            lk->errmsg[0] = '\0';
            return DLOCK_OK;
        }

        now = dlock_now_ms();
        switch ((dlock_error_code)rc) {
        case DLOCK_EBUSY:
            if (deadline == 0) {
                if (ss != NULL)
                    dlock__checkin(ss, rc);
                return lock_error(lk, DLOCK_EBUSY, "acquire",
                                  "held by another owner");
            }
            break;
        case DLOCK_ECONNECT:
        case DLOCK_ETIMEDOUT:
            /* Retry a broken connection until the deadline; a native wait
             * that ran out is the deadline. */
            if (rc == DLOCK_ETIMEDOUT && native)
                deadline = now;
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
            if (ss != NULL)
                dlock__checkin(ss, rc);
            return lock_result(lk, rc, "acquire");
        }
        if (deadline == 0 || now >= deadline) {
            if (ss != NULL)
                dlock__checkin(ss, rc);
            if (rc != DLOCK_EBUSY && lk->errmsg[0] != '\0')
                return lock_result(lk, rc, "acquire");
            lk->errmsg[0] = '\0';
            return lock_error(lk, DLOCK_ETIMEDOUT, "acquire",
                              "not granted within %u ms", timeout_ms);
        }

        /* Wait for a release announcement where the backend has one, else
         * back off with full jitter; never past the hint or the deadline. */
        notified = rc == DLOCK_EBUSY && ss != NULL && c->b->wait != NULL &&
                   (c->caps & DLOCK_CAP_NOTIFY);
        pause = notified ? c->retry_max_ms
                         : dlock__backoff_ms(c->retry_min_ms,
                                             c->retry_max_ms, tries++);
        if (rc == DLOCK_EBUSY && hint > 0 && hint < pause)
            pause = hint;
        if ((int64_t)pause > deadline - now)
            pause = (uint32_t)(deadline - now);
        if (notified) {
            dlock__sess_begin(ss, "wait", lk->name, lk->errmsg,
                              sizeof lk->errmsg);
            rc = c->b->wait(ss->s, &lk->req, pause);
            dlock__checkin(ss, rc);
        } else {
            if (ss != NULL)
                dlock__checkin(ss, rc);
            sleep_ms(pause);
        }
        lk->errmsg[0] = '\0';
    }
}

int dlock_try_acquire(dlock_lock *lk)
{
    return dlock_acquire(lk, 0);
}

/* ---- release ---------------------------------------------------------------- */

int dlock__lock_drop(struct dlock_lock *lk)
{
    struct dlock_client *c = lk->c;
    struct dlock__sess *ss;
    bool was_lost;
    int rc;

    /* [B-RELEASE-1] and core's promise to users: the renewal is cancelled
     * before the release is sent, so it cannot resurrect the lock; and no
     * loss report runs after this point. */
    dlock__wd_cancel(c, lk);
    /* The connection that held a conn-bound lock has ended: the server has
     * freed it, whatever the release below says. */
    if (atomic_load(&lk->watch_fd) == DLOCK__FD_GONE)
        dlock__lock_lose(lk);
    ss = dlock__checkout_grant(c, lk->pin, lk->errmsg, sizeof lk->errmsg,
                               &rc);
    if (ss != NULL) {
        dlock__sess_begin(ss, "release", lk->name, lk->errmsg,
                          sizeof lk->errmsg);
        rc = c->b->release(ss->s, &lk->req, &lk->grant);
        unpin(lk);
        dlock__checkin(ss, rc);
    }
    was_lost = atomic_load(&lk->state) == DLOCK__LOST;
    lk->depth = 0;
    memset(&lk->grant, 0, sizeof lk->grant);
    atomic_store(&lk->expires_ms, 0);
    atomic_store(&lk->watch_fd, -1);
    atomic_store(&lk->state, DLOCK__FREE);
    if (was_lost) {
        lk->errmsg[0] = '\0';
        return lock_error(lk, DLOCK_ELOST, "release",
                          "the lock had been lost before this release");
    }
    return lock_result(lk, rc, "release");
}

int dlock_release(dlock_lock *lk)
{
    if (lk == NULL)
        return DLOCK_EINVAL;
    lk->errmsg[0] = '\0';
    if (lk->depth == 0)
        return lock_error(lk, DLOCK_ENOTHELD, "release",
                          "not held by this handle");
    if (lk->depth > 1) {
        lk->depth--;
        return DLOCK_OK;
    }
    return dlock__lock_drop(lk);
}

/* ---- renew ------------------------------------------------------------------ */

int dlock_renew(dlock_lock *lk)
{
    struct dlock_client *c;
    struct dlock__sess *ss;
    struct dlock_renewal item;
    int64_t start;
    int rc;

    if (lk == NULL)
        return DLOCK_EINVAL;
    c = lk->c;
    lk->errmsg[0] = '\0';
    if (lk->depth == 0)
        return lock_error(lk, DLOCK_ENOTHELD, "renew",
                          "not held by this handle");
    if (atomic_load(&lk->state) == DLOCK__LOST)
        return lock_error(lk, DLOCK_ELOST, "renew", "the lock was lost");
    if (c->caps & DLOCK_CAP_NO_RENEW)
        return DLOCK_OK;
    /* Keep the watchdog off this handle while we renew it ourselves. */
    dlock__wd_cancel(c, lk);
    ss = dlock__checkout_grant(c, lk->pin, lk->errmsg, sizeof lk->errmsg,
                               &rc);
    if (ss != NULL) {
        start = dlock_now_ms();
        lk->attempt_gen = atomic_load(&c->doubt_gen);
        item.req = &lk->req;
        item.grant = &lk->grant;
        item.result = DLOCK_ERROR;
        if (DLOCK__BOUNDED(c->caps))
            lk->grant.expires_ms = start + (int64_t)lk->req.lease_ms;
        dlock__sess_begin(ss, "renew", lk->name, lk->errmsg,
                          sizeof lk->errmsg);
        rc = c->b->renew(ss->s, &item, 1);
        if (rc == DLOCK_OK)
            rc = item.result;
        dlock__checkin(ss, rc);
    }
    if (dlock__renew_result(lk, rc, dlock_now_ms())) {
        if (rc == DLOCK_OK || lk->errmsg[0] == '\0') {
            lk->errmsg[0] = '\0';
            lock_error(lk, DLOCK_ELOST, "renew",
                       rc == DLOCK_OK ? "the lease ran out before the "
                                        "renewal got through"
                                      : dlock_strerror(rc));
        }
        rc = DLOCK_ELOST;
        if (lk->on_lost != NULL)
            lk->on_lost(lk, rc, lk->errmsg, lk->payload);
    }
    if (atomic_load(&lk->state) == DLOCK__HELD &&
        (uses_watchdog(lk) || atomic_load(&lk->watch_fd) >= 0))
        dlock__wd_schedule(c, lk, lk->pin, uses_watchdog(lk));
    return lock_result(lk, rc, "renew");
}

/* ---- accessors ---------------------------------------------------------------- */

/*
 * May the connection behind fd have ended? One poll() that does not wait:
 * a hang-up or an error says so (the watchdog hears of it too, but this
 * thread may get here first), and so does unread data. A server speaks
 * unasked only to say goodbye, and says it before it lets go of the
 * session's locks (PostgreSQL sends its FATAL, then aborts the
 * transaction, then closes the socket, some milliseconds later), so a
 * holder that waited for the hang-up would believe for those
 * milliseconds while another client is granted the lock. The cost: the
 * moment between a reply to a renewal of this session arriving and the
 * watchdog reading it also says 0.
 */
static bool conn_ended(int fd)
{
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};

    return poll(&p, 1, 0) > 0;
}

int dlock_held(const dlock_lock *lk)
{
    dlock_lock *l = (dlock_lock *)lk;
    int fd;

    if (l == NULL || atomic_load(&l->state) != DLOCK__HELD)
        return 0;
    if (dlock_now_ms() >= atomic_load(&l->expires_ms))
        return 0;
    /* In doubt since a connection of the client ended [B-WATCH-1]. */
    if (atomic_load(&l->confirmed_gen) != atomic_load(&l->c->doubt_gen))
        return 0;
    fd = atomic_load(&l->watch_fd);
    return fd == -1 || (fd >= 0 && !conn_ended(fd));
}

uint64_t dlock_fence(const dlock_lock *lk)
{
    return lk != NULL && lk->depth > 0 ? lk->grant.fence : 0;
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
    exp = atomic_load(&((dlock_lock *)lk)->expires_ms);
    if (exp == INT64_MAX)
        return DLOCK_WAIT_FOREVER;
    now = dlock_now_ms();
    if (exp - now >= (int64_t)DLOCK_WAIT_FOREVER)
        return DLOCK_WAIT_FOREVER - 1;
    return exp > now ? (uint32_t)(exp - now) : 0;
}

const char *dlock_lock_errmsg(const dlock_lock *lk)
{
    return lk != NULL ? lk->errmsg : "no lock handle";
}
