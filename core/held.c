/*
 * held.c: a held lock's state, and every rule on losing it (see held.h).
 * The watchdog, the connection watch, a manual renewal and a release all
 * come here to decide and to tell.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "held.h"

static void run_lost(struct dlock__event *ev);

void dlock__held_init(struct dlock__held *h, struct dlock__pool *pool,
                      const struct dlock_request *req, void *handle,
                      dlock_lost_fn on_lost, void *payload)
{
    memset(h, 0, sizeof *h);
    h->pool = pool;
    h->req = req;
    h->handle = handle;
    h->on_lost = on_lost;
    h->payload = payload;
    h->pin.req = req;
    atomic_init(&h->pin.watch_fd, -1);
    atomic_init(&h->state, DLOCK__FREE);
    atomic_init(&h->expires_ms, 0);
    atomic_init(&h->confirmed_gen, 0);
    h->timer.idx = SIZE_MAX;
    h->lost_ev.run = run_lost;
    h->interval_ms = req->lease_ms / 3 > 0 ? req->lease_ms / 3 : 1;
}

/*
 * Renew at a third of the lease (Redisson's rule: two renewals can fail
 * before it runs out), and of the lease the grant is believed for where
 * the backend vouches for less than the handle asked: a handle's own
 * lease_ms above the URI's, where the lease is the client's (an etcd
 * lease, a ZooKeeper session timeout). Renewing on the handle's rhythm
 * there would let the client's lease run out between two renewals, and
 * every lock of the client with it.
 */
static void fit_interval(struct dlock__held *h)
{
    int64_t span = h->grant.expires_ms - h->sent_ms;
    uint32_t third = h->req->lease_ms / 3;

    if (h->grant.expires_ms != INT64_MAX && span / 3 < (int64_t)third)
        third = span > 0 ? (uint32_t)(span / 3) : 0;
    h->interval_ms = third > 0 ? third : 1;
}

void dlock__held_attempt(struct dlock__held *h)
{
    int64_t now = dlock_now_ms();

    memset(&h->grant, 0, sizeof h->grant);
    /* The lease counts from before the request is sent: the server's
     * clock starts later, so ours runs out first [B-BOUND-1]. */
    h->grant.expires_ms = DLOCK__BOUNDED(h->pool->mode->caps)
                              ? now + (int64_t)h->req->lease_ms
                              : INT64_MAX;
    h->attempt_gen = atomic_load(&h->pool->doubt_gen);
    h->sent_ms = now;
}

void dlock__held_granted(struct dlock__held *h, struct dlock__sess *ss)
{
    if (h->pool->mode->caps & DLOCK_CAP_CONN_BOUND)
        dlock__pin(ss, &h->pin);
    atomic_store(&h->expires_ms, h->grant.expires_ms);
    atomic_store(&h->confirmed_gen, h->attempt_gen);
    atomic_store(&h->state, DLOCK__HELD);
    fit_interval(h);
}

void dlock__held_renewing(struct dlock__held *h, int64_t start)
{
    if (DLOCK__BOUNDED(h->pool->mode->caps))
        h->grant.expires_ms = start + (int64_t)h->req->lease_ms;
    h->attempt_gen = atomic_load(&h->pool->doubt_gen);
    h->sent_ms = start;
}

bool dlock__held_released(struct dlock__held *h)
{
    bool was_lost = atomic_load(&h->state) == DLOCK__LOST;

    memset(&h->grant, 0, sizeof h->grant);
    atomic_store(&h->expires_ms, 0);
    atomic_store(&h->pin.watch_fd, -1);
    atomic_store(&h->state, DLOCK__FREE);
    return was_lost;
}

bool dlock__held_lose(struct dlock__held *h)
{
    int held = DLOCK__HELD;

    return atomic_compare_exchange_strong(&h->state, &held, DLOCK__LOST);
}

bool dlock__held_renew_result(struct dlock__held *h, int rc, int64_t now)
{
    switch ((dlock_error_code)rc) {
    case DLOCK_OK:
        /* A renewal confirmed only after our own measure of the lease had
         * run out (the server was down or paused meanwhile) does not bridge
         * the gap: for a while nobody could promise the lock was ours, and
         * another holder may have come and gone. The lock is lost; the
         * backend's renewal does not resurrect it. */
        if (now >= atomic_load(&h->expires_ms))
            return dlock__held_lose(h);
        atomic_store(&h->expires_ms, h->grant.expires_ms);
        atomic_store(&h->confirmed_gen, h->attempt_gen);
        fit_interval(h);
        return false;
    case DLOCK_ELOST:
    case DLOCK_ENOTOWNER:
    case DLOCK_ENOTHELD:
    case DLOCK_EREPLICAS:
        return dlock__held_lose(h);
    case DLOCK_ERROR:
    case DLOCK_EBUSY:
    case DLOCK_ETIMEDOUT:
    case DLOCK_ECONNECT:
    case DLOCK_ENOBACKEND:
    case DLOCK_EINVAL:
    case DLOCK_ENOMEM:
    case DLOCK_EUNSUPPORTED:
    case DLOCK_ECLOSED:
    case DLOCK_EAUTH:
    case DLOCK_ENOENT:
    case DLOCK_EACCES:
    case DLOCK_ECANCELED:
    case DLOCK_EDEADLK:
        break;
    }
    /* In doubt: the lock may still be ours. Keep the old lease end (the
     * failed call did not extend it) and give up only when it passes. */
    h->grant.expires_ms = atomic_load(&h->expires_ms);
    if (now >= h->grant.expires_ms)
        return dlock__held_lose(h);
    return false;
}

void dlock__held_tell_lost(struct dlock__held *h, int rc, const char *detail,
                           char *why, size_t cap)
{
    struct dlock__pool *p = h->pool;
    const char *name = h->req->name;
    char text[DLOCK__ERRMSG_MAX];

    if (rc == DLOCK_OK) {
        /* dlock__held_renew_result: confirmed too late to bridge the gap. */
        dlock__pool_format(p, why, cap, "renew", name,
                           "the lease ran out before a renewal got through "
                           "(the service was slow or unreachable)");
        rc = DLOCK_ELOST;
    } else if (rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER ||
               rc == DLOCK_ENOTHELD) {
        if (detail[0] != '\0')
            snprintf(why, cap, "%s", detail);
        else
            dlock__pool_format(p, why, cap, "renew", name,
                               dlock_strerror(rc));
    } else {
        if (detail[0] != '\0') {
            snprintf(why, cap,
                     "%s (the lease ran out while renewals kept failing)",
                     detail);
        } else {
            snprintf(text, sizeof text,
                     "the lease ran out while renewals kept failing (%s)",
                     dlock_strerror(rc));
            dlock__pool_format(p, why, cap, "renew", name, text);
        }
        rc = DLOCK_ELOST;
    }
    dlock__pool_log(p, DLOCK_LOG_WARN, "%s", why);
    if (h->on_lost == NULL)
        return;
    if (p->events != NULL && p->events->fd >= 0) {
        h->lost_code = rc;
        /* The run takes the text (an exchange: neither frees the one the
         * other uses); a failed copy runs with core's fixed words. */
        free(atomic_exchange(&h->lost_why, strdup(why)));
        dlock__events_push(p->events, &h->lost_ev);
        return;
    }
    h->on_lost((dlock_lock *)h->handle, rc, why, h->payload);
}

/* The queued on_lost, run by dlock_client_dispatch(). */
static void run_lost(struct dlock__event *ev)
{
    struct dlock__held *h = (struct dlock__held *)(void *)((char *)ev -
                            offsetof(struct dlock__held, lost_ev));
    char *why = atomic_exchange(&h->lost_why, NULL);

    /* on_lost may free the handle: h is not touched after it. */
    h->on_lost((dlock_lock *)h->handle, h->lost_code,
               why != NULL ? why : "the lock was lost (out of memory for "
                                   "the reason)",
               h->payload);
    free(why);
}

bool dlock__held_in_doubt(const struct dlock__held *h)
{
    return atomic_load(&((struct dlock__held *)h)->confirmed_gen) !=
           atomic_load(&h->pool->doubt_gen);
}

/*
 * May the connection behind fd have ended? One poll() that does not wait:
 * a hang-up or an error says so (the watchdog hears of it too, but the
 * caller's thread may get here first), and so does unread data. A server
 * speaks unasked only to say goodbye, and says it before it lets go of the
 * session's locks (PostgreSQL sends its FATAL, then aborts the
 * transaction, then closes the socket, some milliseconds later), so a
 * holder that waited for the hang-up would believe for those milliseconds
 * while another client is granted the lock. The cost: the moment between
 * a reply to a renewal of this session arriving and the watchdog reading
 * it also says 0.
 */
static bool conn_ended(int fd)
{
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};

    return poll(&p, 1, 0) > 0;
}

int dlock__held_now(const struct dlock__held *h)
{
    struct dlock__held *m = (struct dlock__held *)h;
    int fd;

    if (atomic_load(&m->state) != DLOCK__HELD)
        return 0;
    if (dlock_now_ms() >= atomic_load(&m->expires_ms))
        return 0;
    if (dlock__held_in_doubt(h))
        return 0;
    fd = atomic_load(&m->pin.watch_fd);
    if (fd >= 0)
        return !conn_ended(fd);
    if (fd != -1)
        return 0; /* DLOCK__FD_GONE: its connection ended */
    /* Not tied to a watched connection. In a mode whose locks outlive
     * their connections, did one of them end that the watchdog has not
     * taken yet? Then the lock is in doubt already [B-WATCH-1]. */
    return (h->pool->mode->caps & DLOCK_CAP_CONN_BOUND) ||
           !dlock__watch_pending(h->pool->watch);
}
