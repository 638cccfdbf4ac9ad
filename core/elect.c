/*
 * elect.c: leader election (dlock_elect_*), over a lock handle (lock.c)
 * and the client's asynchronous acquires (async.c). A candidate is one
 * exclusive lock handle on the election's name: campaigning is an
 * asynchronous acquire that waits forever; leadership is holding the lock;
 * the term is the grant's fence; losing leadership is the lock's on_lost.
 * Nothing here talks to a server: whatever a backend gives a lock (lease,
 * session, fence, fairness) the election has, and no more.
 *
 * The request carries DLOCK_REQ_ELECTION and the participant id after its
 * owner's NUL (backend.h), so a backend with an election recipe of its own
 * (ZooKeeper: Curator's LeaderLatch) can name and fill its nodes as that
 * recipe does; the others see an ordinary lock.
 *
 * States of a candidate, under e->mu:
 *
 *   IDLE      not campaigning: new, resigned, or the campaign ended
 *   CAMPAIGN  an asynchronous acquire of the handle is under way
 *   LEADER    the acquire won; the handle is ours until lost or resigned
 *   RELEASING a resign is releasing the handle (outside the mutex)
 *
 * Rejoining after a loss. on_lost runs on the watchdog thread, which must
 * not release the handle (a release waits for the watchdog to finish with
 * it). So on_lost only starts another asynchronous acquire: the acquire
 * thread finds the handle lost (DLOCK_ELOST at once, no I/O), and the done
 * callback, which may call into dlock, releases the lost handle and starts
 * the real campaign. A grant that was lost before its done callback ran
 * (lost_early) is released and campaigned for again without announcing it.
 *
 * on_change is called with e->mu held, so calls are never concurrent and
 * come in order; is_leader and term are atomics, readable from it.
 *
 * Divisions: helpers; the callbacks; the public calls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock.h"

enum elect_phase { IDLE, CAMPAIGN, LEADER, RELEASING };

struct dlock_election {
    dlock_lock *lk;
    dlock_elect_fn on_change;
    void *payload;
    char *owner_id;          /* "<owner>\0<id>\0": the request's owner */
    const char *id;          /* inside owner_id */
    pthread_mutex_t mu;      /* all below */
    pthread_cond_t cv;       /* phase or leadership changed */
    enum elect_phase phase;
    bool resigning;          /* a resign is under way: do not rejoin */
    bool lost_early;         /* lost before the winning done ran */
    int result;              /* what ended the last campaign (IDLE) */
    dlock_cancel *cx;        /* fired by resign; a new one per campaign */
    atomic_bool leader;
    atomic_uint_fast64_t term;
    char errmsg[DLOCK__ERRMSG_MAX];
};

/* ---- helpers ---------------------------------------------------------------- */

static int elect_error(struct dlock_election *e, int code, const char *fmt,
                       ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int elect_error(struct dlock_election *e, int code, const char *fmt,
                       ...)
{
    va_list ap;
    int n;

    n = snprintf(e->errmsg, sizeof e->errmsg, "elect '%s': ",
                 e->lk->name);
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof e->errmsg)
        vsnprintf(e->errmsg + n, sizeof e->errmsg - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

/* Call the listener (with e->mu held). */
static void tell(struct dlock_election *e, int is_leader, const char *why)
{
    if (e->on_change != NULL)
        e->on_change(e, is_leader, atomic_load(&e->term), why, e->payload);
}

static void elect_done(dlock_lock *lk, int rc, void *payload);

/* Start (or restart) the campaign's acquire, with e->mu held; IDLE and
 * the code on failure. */
static int campaign(struct dlock_election *e)
{
    int rc;

    e->phase = CAMPAIGN;
    rc = dlock_acquire_async(e->lk, DLOCK_WAIT_FOREVER, e->cx, elect_done, e);
    if (rc != DLOCK_OK) {
        e->phase = IDLE;
        e->result = rc;
        elect_error(e, rc, "cannot campaign: %s", dlock_lock_errmsg(e->lk));
        pthread_cond_broadcast(&e->cv);
    }
    return rc;
}

/* ---- the callbacks ------------------------------------------------------------ */

/* The lock's message for rc, or the code's text if it left none. */
static const char *lock_why(const dlock_lock *lk, int rc)
{
    const char *m = dlock_lock_errmsg(lk);

    return m[0] != '\0' ? m : dlock_strerror(rc);
}

/* The campaign's acquire ended (an acquire thread, or dispatch). */
static void elect_done(dlock_lock *lk, int rc, void *payload)
{
    struct dlock_election *e = payload;
    char why[96];

    pthread_mutex_lock(&e->mu);
    /* A grant that cannot be believed even now is not announced: a native
     * wait longer than the lease ends with the lease (measured from when
     * the request was sent) already run out, and the first renewal
     * reports the lock lost. Give it back and queue again, behind the
     * others: the next one's wait was short. */
    if (rc == DLOCK_OK && !dlock_held(lk)) {
        dlock__pool_log(&lk->c->pool, DLOCK_LOG_INFO,
                        "elect '%s': granted, but not believable now (the "
                        "wait outlasted the lease, or the lock is in "
                        "doubt): giving it back and queuing again",
                        lk->name);
        e->lost_early = true;
    }
    if (rc == DLOCK_OK && !e->lost_early && !e->resigning) {
        atomic_store(&e->term, dlock_fence(lk));
        e->phase = LEADER;
        atomic_store(&e->leader, true);
        snprintf(why, sizeof why, "elected: term %llu",
                 (unsigned long long)atomic_load(&e->term));
        tell(e, 1, why);
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        return;
    }
    if (rc == DLOCK_OK || rc == DLOCK_ELOST) {
        /* Won but lost before we could announce it, won as a resign came,
         * or the rejoin's first step: the handle holds a grant to give
         * back (owner-checked; no on_lost runs after it). */
        e->lost_early = false;
        pthread_mutex_unlock(&e->mu);
        dlock_release(lk);
        pthread_mutex_lock(&e->mu);
        if (!e->resigning) {
            campaign(e);
            pthread_mutex_unlock(&e->mu);
            return;
        }
        rc = DLOCK_ECANCELED;
    }
    /* Cancelled by a resign, the client shut down or closed, or a failure
     * that waiting cannot cure (credentials, permissions...). */
    e->phase = IDLE;
    e->result = rc;
    if (rc != DLOCK_ECANCELED)
        elect_error(e, rc, "the campaign ended: %s", lock_why(lk, rc));
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* The lock was found lost (the watchdog thread, or dispatch). */
static void elect_lost(dlock_lock *lk, int code, const char *why,
                       void *payload)
{
    struct dlock_election *e = payload;

    (void)lk;
    (void)code;
    pthread_mutex_lock(&e->mu);
    if (e->phase == LEADER) {
        atomic_store(&e->leader, false);
        tell(e, 0, why);
        /* Rejoin, unless a resign is on its way (it releases). */
        if (!e->resigning)
            campaign(e);
    } else if (e->phase == CAMPAIGN) {
        e->lost_early = true; /* granted, not yet announced */
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* ---- the public calls ------------------------------------------------------------ */

#define NEW_ERROR(c, code, ...) \
    dlock__thread_error((c), (code), "elect_new: " __VA_ARGS__)

int dlock_elect_new(dlock_election **out, dlock_client *c, const char *name,
                    const dlock_elect_options *opts)
{
    dlock_elect_options o = DLOCK_ELECT_OPTIONS_INIT;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    struct dlock_election *e;
    pthread_condattr_t ca;
    size_t idlen = 0, olen, bad;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (c == NULL || out == NULL)
        return DLOCK_EINVAL;
    if (opts != NULL) {
        if (opts->version == 0 || opts->version > DLOCK_ELECT_OPTIONS_VERSION)
            return NEW_ERROR(c, DLOCK_EINVAL, "opts: version %u not in 1..%d",
                             opts->version, DLOCK_ELECT_OPTIONS_VERSION);
        o = *opts;
    }
    if (o.id != NULL) {
        idlen = strnlen(o.id, DLOCK_ELECT_ID_MAX + 1);
        if (idlen == 0 || idlen > DLOCK_ELECT_ID_MAX)
            return NEW_ERROR(c, DLOCK_EINVAL,
                             "opts.id: %s (expected 1 to %d bytes, or NULL "
                             "for the owner id)",
                             idlen == 0 ? "empty" : "too long",
                             DLOCK_ELECT_ID_MAX);
        if (!dlock__utf8_valid(o.id, idlen, &bad))
            return NEW_ERROR(c, DLOCK_EINVAL,
                             "opts.id: invalid UTF-8 at byte %zu", bad);
    }
    e = calloc(1, sizeof *e);
    if (e == NULL)
        return NEW_ERROR(c, DLOCK_ENOMEM, "out of memory");
    lo.lease_ms = o.lease_ms;
    lo.on_lost = elect_lost;
    lo.payload = e;
    rc = dlock_lock_new(&e->lk, c, name, &lo);
    if (rc != DLOCK_OK) {
        /* Its message names the argument; say whose call it was. */
        char why[DLOCK__ERRMSG_MAX];
        const char *m = dlock__thread_errmsg(c);

        snprintf(why, sizeof why, "%s",
                 strncmp(m, "lock_new: ", 10) == 0 ? m + 10 : m);
        free(e);
        return NEW_ERROR(c, rc, "%s", why);
    }
    olen = e->lk->req.owner_len;
    if (o.id == NULL)
        idlen = olen;
    e->owner_id = malloc(olen + 1 + idlen + 1);
    if (e->owner_id == NULL || dlock_cancel_new(&e->cx) != DLOCK_OK) {
        dlock_lock_free(e->lk);
        free(e->owner_id);
        free(e);
        return NEW_ERROR(c, DLOCK_ENOMEM, "out of memory");
    }
    memcpy(e->owner_id, e->lk->owner, olen + 1);
    memcpy(e->owner_id + olen + 1, o.id != NULL ? o.id : e->lk->owner, idlen);
    e->owner_id[olen + 1 + idlen] = '\0';
    e->id = e->owner_id + olen + 1;
    /* [DLOCK_REQ_ELECTION]: the same owner text, the id after its NUL. */
    e->lk->req.owner = e->owner_id;
    e->lk->req.flags |= DLOCK_REQ_ELECTION;
    e->on_change = o.on_change;
    e->payload = o.payload;
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&e->leader, false);
    atomic_init(&e->term, 0);
    *out = e;
    return DLOCK_OK;
}

int dlock_elect_join(dlock_election *e)
{
    int rc;

    if (e == NULL)
        return DLOCK_EINVAL;
    pthread_mutex_lock(&e->mu);
    e->errmsg[0] = '\0';
    if (e->phase != IDLE) {
        rc = elect_error(e, DLOCK_EINVAL, "join: already %s",
                         e->phase == CAMPAIGN ? "campaigning" : "leading");
    } else if (dlock_cancel_fired(e->cx)) {
        /* The resign could not make a fresh source (no memory then). */
        rc = elect_error(e, DLOCK_ENOMEM, "join: out of memory");
    } else {
        e->result = 0;
        e->lost_early = false;
        rc = campaign(e);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int dlock_elect_is_leader(const dlock_election *e)
{
    return e != NULL && atomic_load(&((dlock_election *)e)->leader) &&
           dlock_held(e->lk);
}

uint64_t dlock_elect_term(const dlock_election *e)
{
    return e != NULL ? atomic_load(&((dlock_election *)e)->term) : 0;
}

const char *dlock_elect_id(const dlock_election *e)
{
    return e != NULL ? e->id : "";
}

const char *dlock_elect_errmsg(const dlock_election *e)
{
    return e != NULL ? e->errmsg : "no election";
}

int dlock_elect_await(dlock_election *e, uint32_t timeout_ms)
{
    int64_t deadline, now;
    int rc;

    if (e == NULL)
        return DLOCK_EINVAL;
    now = dlock_now_ms();
    deadline = timeout_ms == DLOCK_WAIT_FOREVER ? INT64_MAX
                                                : now + timeout_ms;
    pthread_mutex_lock(&e->mu);
    e->errmsg[0] = '\0';
    for (;;) {
        struct timespec ts;
        int64_t until;

        if (dlock_elect_is_leader(e)) {
            rc = DLOCK_OK;
            break;
        }
        if (e->phase == IDLE) {
            rc = e->result != 0 && e->result != DLOCK_ECANCELED
                     ? e->result
                     : elect_error(e, DLOCK_ENOTHELD,
                                   "await: not campaigning (join first)");
            if (rc == e->result)
                elect_error(e, rc, "the campaign ended: %s",
                            lock_why(e->lk, rc));
            break;
        }
        now = dlock_now_ms();
        if (now >= deadline) {
            rc = elect_error(e, DLOCK_ETIMEDOUT,
                             "await: not leader within %u ms", timeout_ms);
            break;
        }
        /* Changes are signalled; the slice covers a lock in doubt that a
         * renewal confirms again, which nothing here hears of. */
        until = deadline - now < 50 ? deadline : now + 50;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (until - now) / 1000;
        ts.tv_nsec += ((until - now) % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&e->cv, &e->mu, &ts);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int dlock_elect_resign(dlock_election *e)
{
    dlock_cancel *fresh = NULL;
    int rc = DLOCK_OK;

    if (e == NULL)
        return DLOCK_EINVAL;
    pthread_mutex_lock(&e->mu);
    e->errmsg[0] = '\0';
    e->resigning = true;
    if (e->phase == LEADER) {
        e->phase = RELEASING;
        if (atomic_exchange(&e->leader, false))
            tell(e, 0, "resigned");
        pthread_mutex_unlock(&e->mu);
        /* Waits for an on_lost in progress, which sees RELEASING. */
        rc = dlock_release(e->lk);
        pthread_mutex_lock(&e->mu);
        if (rc != DLOCK_OK)
            elect_error(e, rc, "resign: %s", dlock_lock_errmsg(e->lk));
        e->phase = IDLE;
        e->result = 0;
    } else if (e->phase == CAMPAIGN) {
        dlock_cancel_fire(e->cx);
        while (e->phase != IDLE)
            pthread_cond_wait(&e->cv, &e->mu);
    }
    /* A cancel stays fired: the next campaign watches a new one. */
    if (dlock_cancel_fired(e->cx) && dlock_cancel_new(&fresh) == DLOCK_OK) {
        dlock_cancel_free(e->cx);
        e->cx = fresh;
    }
    e->resigning = false;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void dlock_elect_free(dlock_election *e)
{
    if (e == NULL)
        return;
    dlock_elect_resign(e);
    dlock_lock_free(e->lk);
    dlock_cancel_free(e->cx);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->owner_id);
    free(e);
}
