/*
 * pubsub.c: waiting without polling (setnx, hash). Each client has one
 * pub/sub connection, started at the first wait and owned by one thread,
 * which multiplexes the channels its waiters wait on (poll on the socket
 * and an eventfd). wait() subscribes (or finds the channel subscribed),
 * then re-checks the lock key on its own session, so a release between the
 * EBUSY attempt and the subscription is never missed [B-WAIT-1].
 *
 * Modes fair and queue wait inside their acquire() instead, each waiter
 * on a channel of its own that it keeps subscribed while it is queued:
 * the subscription is how other clients see that it is alive (fair.c,
 * queue.c); the sub_* functions at the end serve them, and each channel
 * keeps its last message (queue's grant, fence included).
 *
 * Which channel a name has is its mode's (the keys method); connecting is
 * conn.c's. Redlock has no pub/sub: its mode neither sets this up nor
 * waits. Divisions: channels; the thread; set-up and stop; wait(); a
 * waiter's own channel.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "rd.h"

/* A subscribed channel nobody waits on is kept this long: a waiter that
 * wakes, loses the race and waits again finds it still subscribed. */
#define LINGER_MS 2000

/* ---- channels ------------------------------------------------------------------------ */

static void ps_wake(struct dlock__rd_pubsub *ps)
{
    uint64_t one = 1;

    if (ps->wake_fd < 0)
        return;
    /* EAGAIN: the counter is already non-zero, the thread will wake. */
    (void)!write(ps->wake_fd, &one, sizeof one);
}

static struct dlock__rd_chan *chan_find(struct dlock__rd_pubsub *ps,
                                        const char *name, size_t len)
{
    for (struct dlock__rd_chan *c = ps->chans; c != NULL; c = c->next)
        if (c->len == len && memcmp(c->name, name, len) == 0)
            return c;
    return NULL;
}

static void chan_free(struct dlock__rd_chan *c)
{
    pthread_cond_destroy(&c->cv);
    free(c->name);
    free(c);
}

/* A new channel for name, at the head of the list; NULL out of memory.
 * Under mu. */
static struct dlock__rd_chan *chan_new(struct dlock__rd_pubsub *ps,
                                       const struct dlock__rd_buf *name)
{
    struct dlock__rd_chan *c = calloc(1, sizeof *c);
    pthread_condattr_t attr;

    if (c == NULL || (c->name = malloc(name->len + 1)) == NULL) {
        free(c);
        return NULL;
    }
    memcpy(c->name, name->p, name->len + 1);
    c->len = name->len;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &attr);
    pthread_condattr_destroy(&attr);
    c->next = ps->chans;
    ps->chans = c;
    return c;
}

/* Connection lost or never made: every subscription is gone; wake every
 * waiter so it retries (a restart may have freed its lock). Under mu. */
static void ps_all_down(struct dlock__rd_pubsub *ps, bool failed_connect)
{
    struct dlock__rd_chan **pp = &ps->chans;

    ps->connected = false;
    if (failed_connect)
        ps->epoch++;
    while (*pp != NULL) {
        struct dlock__rd_chan *c = *pp;
        if (c->refs == 0) {
            *pp = c->next;
            chan_free(c);
            continue;
        }
        if (c->state == RD_CH_SUBSCRIBED || c->state == RD_CH_PENDING ||
            c->state == RD_CH_LEAVING)
            c->gen++;
        c->state = RD_CH_NONE;
        pthread_cond_broadcast(&c->cv);
        pp = &c->next;
    }
}

/* false: the connection is of no more use (a sharded subscription refused:
 * the slot moved). */
static bool ps_on_reply(struct dlock__rd_pubsub *ps, redisReply *r)
{
    const char *kind;
    struct dlock__rd_chan *c;

    if (r->type == REDIS_REPLY_ERROR)
        return false; /* MOVED: wake the waiters, who route anew */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return true;
    kind = r->element[0]->str;
    if (ps->sharded && kind[0] == 's') /* smessage, ssubscribe, ... */
        kind++;
    c = chan_find(ps, r->element[1]->str, r->element[1]->len);
    if (c == NULL)
        return true;
    if (ps->sharded && strcmp(kind, "unsubscribe") == 0 &&
        c->state != RD_CH_LEAVING) {
        /* The server's own: the slot moved away. The waiters retry. */
        c->gen++;
        c->state = RD_CH_NONE;
        pthread_cond_broadcast(&c->cv);
        return true;
    }
    if (strcmp(kind, "message") == 0) {
        const redisReply *m = r->element[2];
        size_t n = m->type == REDIS_REPLY_STRING ? m->len : 0;
        if (n >= sizeof c->msg)
            n = 0; /* not a grant: nothing queue.c would read */
        memcpy(c->msg, n > 0 ? m->str : "", n);
        c->msg[n] = '\0';
        c->gen++;
        c->last_msg_ns = dlock_now_ns();
        pthread_cond_broadcast(&c->cv);
    } else if (strcmp(kind, "subscribe") == 0) {
        if (c->state == RD_CH_PENDING) {
            c->state = RD_CH_SUBSCRIBED;
            c->confirmed_ns = dlock_now_ns();
            pthread_cond_broadcast(&c->cv);
        }
    } else if (strcmp(kind, "unsubscribe") == 0) {
        if (c->state == RD_CH_LEAVING) {
            if (c->refs == 0) {
                for (struct dlock__rd_chan **pp = &ps->chans; *pp != NULL;
                     pp = &(*pp)->next)
                    if (*pp == c) {
                        *pp = c->next;
                        break;
                    }
                chan_free(c);
            } else {
                c->state = RD_CH_NONE; /* a waiter came back: subscribe again */
            }
        }
    }
    return true;
}

/* Send SUBSCRIBE/UNSUBSCRIBE for what changed. Under mu; the writes are a
 * few bytes on a socket with a send timeout. Returns -1 on I/O error. */
static int ps_sync_subs(struct dlock__rd_pubsub *ps, redisContext *rc)
{
    int64_t now = dlock_now_ms();
    int done = 0, any = 0;

    /* Channels nobody waits on any more that never got subscribed. */
    for (struct dlock__rd_chan **pp = &ps->chans; *pp != NULL;) {
        struct dlock__rd_chan *c = *pp;
        if (c->refs == 0 && c->state == RD_CH_NONE) {
            *pp = c->next;
            chan_free(c);
        } else {
            pp = &c->next;
        }
    }
    for (struct dlock__rd_chan *c = ps->chans; c != NULL; c = c->next) {
        if (c->refs > 0 && c->state == RD_CH_NONE) {
            redisAppendCommand(rc, ps->sharded ? "SSUBSCRIBE %b"
                                               : "SUBSCRIBE %b",
                               c->name, c->len);
            c->state = RD_CH_PENDING;
            any = 1;
        } else if (c->refs == 0 && c->state == RD_CH_SUBSCRIBED &&
                   now - c->idle_since_ms >= LINGER_MS) {
            redisAppendCommand(rc, ps->sharded ? "SUNSUBSCRIBE %b"
                                               : "UNSUBSCRIBE %b",
                               c->name, c->len);
            c->state = RD_CH_LEAVING;
            any = 1;
        }
    }
    while (any && !done)
        if (dlock__rd_buffer_write(rc, &done) != REDIS_OK)
            return -1;
    return 0;
}

static bool ps_wanted(struct dlock__rd_pubsub *ps)
{
    for (struct dlock__rd_chan *c = ps->chans; c != NULL; c = c->next)
        if (c->refs > 0)
            return true;
    return false;
}

/* ---- the thread ------------------------------------------------------------------------ */

/* Read what came on the connection; false if it broke. Under mu. */
static bool ps_read(struct dlock__rd_pubsub *ps, redisContext *rc)
{
    redisReply *r = NULL;

    if (redisBufferRead(rc) != REDIS_OK)
        return false;
    while (redisGetReplyFromReader(rc, (void **)&r) == REDIS_OK && r != NULL) {
        bool ok = ps_on_reply(ps, r);
        freeReplyObject(r);
        r = NULL;
        if (!ok)
            return false;
    }
    return rc->err == 0;
}

static void *ps_main(void *arg)
{
    struct dlock__rd_pubsub *ps = arg;
    const struct dlock__rd_conf *cf = ps->cf;
    redisContext *rc = NULL;
    int64_t next_connect = 0;
    uint32_t backoff = 50;
    char err[256];

    pthread_mutex_lock(&ps->mu);
    while (!ps->stop) {
        int64_t now = dlock_now_ms();
        struct pollfd pf[2];
        int n = 1, timeout = 500, code;

        if (rc == NULL && ps_wanted(ps) && now >= next_connect) {
            pthread_mutex_unlock(&ps->mu);
            struct dlock__rd_addr at;
            int nrep;
            /* cluster=1: this master's sharded connection */
            rc = ps->sharded
                     ? dlock__rd_connect(cf, &ps->addr, cf->timeout_ms, NULL,
                                         NULL, NULL, err, sizeof err, &code)
                     : dlock__rd_connect_master(cf, NULL, NULL, NULL, &at,
                                                &nrep, err, sizeof err,
                                                &code);
            pthread_mutex_lock(&ps->mu);
            if (rc == NULL) {
                ps_all_down(ps, true);
                next_connect = dlock_now_ms() + backoff;
                backoff = backoff < 1000 ? backoff * 2 : 1000;
                continue;
            }
            backoff = 50;
            ps->connected = true;
        }
        if (rc != NULL && ps_sync_subs(ps, rc) != 0) {
            redisFree(rc);
            rc = NULL;
            ps_all_down(ps, false);
            continue;
        }
        pf[0].fd = ps->wake_fd;
        pf[0].events = POLLIN;
        if (rc != NULL) {
            pf[1].fd = rc->fd;
            pf[1].events = POLLIN;
            n = 2;
        } else if (ps_wanted(ps)) {
            timeout = (int)(next_connect > now ? next_connect - now : 0);
        }
        pthread_mutex_unlock(&ps->mu);
        poll(pf, (nfds_t)n, timeout);
        if (pf[0].revents & POLLIN) {
            uint64_t v;
            if (read(ps->wake_fd, &v, sizeof v) < 0)
                v = 0;
        }
        pthread_mutex_lock(&ps->mu);
        if (n == 2 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
            !ps_read(ps, rc)) {
            redisFree(rc);
            rc = NULL;
            ps_all_down(ps, false);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    if (rc != NULL)
        redisFree(rc);
    return NULL;
}

/* ---- set-up and stop -------------------------------------------------------------------- */

int dlock__rd_pubsub_init(struct dlock__rd_pubsub *ps,
                          const struct dlock__rd_conf *cf, char *err,
                          size_t errlen)
{
    memset(ps, 0, sizeof *ps);
    ps->cf = cf;
    ps->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ps->wake_fd < 0)
        return dlock_errorf(err, errlen, DLOCK_ERROR, "eventfd: %s",
                            strerror(errno));
    pthread_mutex_init(&ps->mu, NULL);
    ps->on = true;
    return DLOCK_OK;
}

void dlock__rd_pubsub_stop(struct dlock__rd_pubsub *ps)
{
    bool started;

    if (!ps->on)
        return;
    pthread_mutex_lock(&ps->mu);
    ps->stop = true;
    started = ps->started;
    pthread_mutex_unlock(&ps->mu);
    ps_wake(ps);
    if (started)
        pthread_join(ps->thread, NULL);
    while (ps->chans != NULL) {
        struct dlock__rd_chan *c = ps->chans;
        ps->chans = c->next;
        chan_free(c);
    }
    close(ps->wake_fd);
    pthread_mutex_destroy(&ps->mu);
    ps->on = false;
}

/* cluster=1: the sharded pub/sub of the master of rs->keys' slot, made
 * on first need; NULL if none is known (or no memory). */
static struct dlock__rd_pubsub *shard_for(struct dlock__rd_session *rs)
{
    struct dlock__rd_ctx *x = rs->x;
    struct dlock__rd_pubsub *ps = NULL;
    struct dlock__rd_addr a;
    char err[128];
    size_t i;

    if (dlock__rd_cluster_addr(rs, rs->keys.lock.p, rs->keys.lock.len, &a) !=
        DLOCK_OK)
        return NULL;
    pthread_mutex_lock(&x->id_mu);
    for (i = 0; i < RD_CLUSTER_NODES_MAX && x->shard[i] != NULL; i++)
        if (x->shard[i]->addr.port == a.port &&
            strcmp(x->shard[i]->addr.host, a.host) == 0)
            break;
    if (i < RD_CLUSTER_NODES_MAX && x->shard[i] == NULL &&
        (ps = malloc(sizeof *ps)) != NULL) {
        if (dlock__rd_pubsub_init(ps, &x->conf, err, sizeof err) == DLOCK_OK) {
            ps->sharded = true;
            ps->addr = a;
            x->shard[i] = ps;
        } else {
            free(ps);
        }
    }
    ps = i < RD_CLUSTER_NODES_MAX ? x->shard[i] : NULL;
    pthread_mutex_unlock(&x->id_mu);
    return ps;
}

/* ---- wait() ------------------------------------------------------------------------------- */

/* Count a waiter on the channel name (made on first need), starting the
 * thread if it is not running. NULL: out of memory, or the thread could
 * not start (ps->started false). Under mu. */
static struct dlock__rd_chan *chan_take(struct dlock__rd_pubsub *ps,
                                        const struct dlock__rd_buf *name)
{
    struct dlock__rd_chan *c;

    if (!ps->started && !ps->stop) {
        if (pthread_create(&ps->thread, NULL, ps_main, ps) != 0)
            return NULL;
        ps->started = true;
    }
    c = chan_find(ps, name->p, name->len);
    if (c == NULL && (c = chan_new(ps, name)) == NULL)
        return NULL;
    c->refs++;
    return c;
}

/* The waiter is done with c; the thread unsubscribes it LINGER_MS after
 * the last one left. Under mu. */
static void chan_put(struct dlock__rd_pubsub *ps, struct dlock__rd_chan *c)
{
    if (--c->refs == 0) {
        c->idle_since_ms = dlock_now_ms();
        if (c->state != RD_CH_SUBSCRIBED)
            ps_wake(ps); /* let the thread tidy up */
    }
}

/* Sleep on c until its generation moves past gen0, deadline, stop, or a
 * cancel of the acquire on s [B-CANCEL-1]. Under mu. */
static void chan_sleep(struct dlock_session *s, struct dlock__rd_pubsub *ps,
                       struct dlock__rd_chan *c, uint64_t gen0,
                       int64_t deadline)
{
    while (c->gen == gen0 && !ps->stop && dlock_now_ms() < deadline)
        if (dlock_session_cond_wait(s, &c->cv, &ps->mu, deadline) != 0)
            break;
}

/*
 * Block until a release of req->name is announced or max_ms pass
 * [B-WAIT-1]. If the channel was subscribed before the last attempt was
 * sent, a release after that attempt shows as a newer message. Otherwise
 * subscribe, wait for the confirmation, then look at the lock key on this
 * session: gone means a release slipped in before the subscription.
 */
int dlock__rd_wait(struct dlock_session *s, const struct dlock_request *req,
                   uint32_t max_ms)
{
    struct dlock__rd_session *rs = (struct dlock__rd_session *)s;
    struct dlock__rd_pubsub *ps;
    int64_t deadline = dlock_now_ms() + max_ms;
    struct dlock__rd_chan *c;
    bool recheck;
    uint64_t gen0, epoch0;
    int rc = DLOCK_OK;

    dlock__rd_log_note(rs);
    if (rs->x == NULL || !rs->x->ps.on || max_ms == 0)
        return DLOCK_OK;
    ps = &rs->x->ps;
    if (dlock__rd_req_keys(rs, req) != 0)
        return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
    if (rs->cl != NULL && (ps = shard_for(rs)) == NULL)
        return DLOCK_OK; /* no master known or no memory: core retries */

    pthread_mutex_lock(&ps->mu);
    if ((c = chan_take(ps, &rs->keys.channel)) == NULL) {
        pthread_mutex_unlock(&ps->mu);
        return dlock_session_error(s, DLOCK_ENOMEM, "%s",
                                   ps->started ? "out of memory"
                                               : "cannot start the pub/sub "
                                                 "thread");
    }
    if (c->state == RD_CH_SUBSCRIBED && c->confirmed_ns < rs->attempt_ns) {
        recheck = false;
        if (c->last_msg_ns > rs->attempt_ns)
            goto out; /* released since the attempt */
    } else {
        recheck = true;
        epoch0 = ps->epoch;
        if (c->state == RD_CH_NONE)
            ps_wake(ps);
        while (c->state != RD_CH_SUBSCRIBED && ps->epoch == epoch0 &&
               !ps->stop && dlock_now_ms() < deadline)
            if (dlock_session_cond_wait(s, &c->cv, &ps->mu, deadline) != 0)
                break;
        if (c->state != RD_CH_SUBSCRIBED)
            goto out; /* pub/sub unreachable: core retries the lock */
    }
    gen0 = c->gen;
    pthread_mutex_unlock(&ps->mu);

    if (recheck) {
        /* The release may have come before we were subscribed. A
         * semaphore's name holds its free permits (no TTL: core's pause
         * already ends when the first lease does). */
        const struct dlock__rd_buf *lk = &rs->keys.lock;
        bool permit = req->kind == DLOCK_KIND_PERMIT;
        redisReply *r = NULL;
        if (rs->cl == NULL ||
            dlock__rd_cluster_route(rs, lk->p, lk->len) == DLOCK_OK)
            r = dlock__rd_command(rs->rc, permit ? "GET %b" : "PTTL %b",
                                  lk->p, lk->len);
        if (r == NULL) {
            rc = dlock__rd_io_error(rs, DLOCK_ECONNECT, "wait");
            pthread_mutex_lock(&ps->mu);
            goto out;
        }
        long long pttl = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (permit) /* free permits: "free now" as an absent lock is */
            pttl = r->type == REDIS_REPLY_STRING && atoll(r->str) > 0 ? -2
                                                                      : -1;
        freeReplyObject(r);
        pthread_mutex_lock(&ps->mu);
        if (pttl == -2)
            goto out; /* free now */
        if (pttl > 0 && dlock_now_ms() + pttl < deadline)
            deadline = dlock_now_ms() + pttl; /* expires unannounced */
    } else {
        pthread_mutex_lock(&ps->mu);
    }
    chan_sleep(s, ps, c, gen0, deadline);
out:
    chan_put(ps, c);
    pthread_mutex_unlock(&ps->mu);
    return rc;
}

/* ---- a waiter's own channel (fair.c, queue.c) ---------------------------------------------- */

struct dlock__rd_chan *dlock__rd_sub_hold(struct dlock__rd_session *rs,
                                          const struct dlock__rd_buf *name,
                                          int64_t deadline, uint64_t *gen)
{
    struct dlock__rd_pubsub *ps = &rs->x->ps;
    struct dlock__rd_chan *c;
    uint64_t epoch0;

    pthread_mutex_lock(&ps->mu);
    if ((c = chan_take(ps, name)) == NULL) {
        pthread_mutex_unlock(&ps->mu);
        return NULL;
    }
    epoch0 = ps->epoch;
    if (c->state == RD_CH_NONE)
        ps_wake(ps);
    /* Until confirmed, or the pub/sub cannot connect: the caller queues
     * anyway (its refreshed timeout keeps it alive while it runs) and the
     * thread subscribes as soon as it can. */
    while (c->state != RD_CH_SUBSCRIBED && ps->epoch == epoch0 &&
           !ps->stop && dlock_now_ms() < deadline)
        if (dlock_session_cond_wait(&rs->base, &c->cv, &ps->mu, deadline) !=
            0)
            break;
    *gen = c->gen;
    pthread_mutex_unlock(&ps->mu);
    return c;
}

int dlock__rd_sub_sleep(struct dlock__rd_session *rs,
                        struct dlock__rd_chan *c, uint64_t *gen,
                        int64_t deadline, char *msg, size_t cap)
{
    struct dlock__rd_pubsub *ps = &rs->x->ps;
    int rc;

    if (c == NULL) { /* no channel: only time and cancel */
        rc = dlock_session_poll(&rs->base, -1, 0, deadline);
        return rc < 0 ? rc : 0;
    }
    pthread_mutex_lock(&ps->mu);
    chan_sleep(&rs->base, ps, c, *gen, deadline);
    rc = c->gen != *gen ? 1 : 0;
    *gen = c->gen;
    if (rc == 1 && cap > 0)
        snprintf(msg, cap, "%s", c->msg);
    pthread_mutex_unlock(&ps->mu);
    if (rc == 0 && (rc = dlock_session_cancelled(&rs->base)) == 0)
        return 0;
    return rc;
}

void dlock__rd_sub_drop(struct dlock__rd_session *rs,
                        struct dlock__rd_chan *c, bool at_once)
{
    struct dlock__rd_pubsub *ps = &rs->x->ps;

    if (c == NULL)
        return;
    pthread_mutex_lock(&ps->mu);
    chan_put(ps, c);
    if (at_once && c->refs == 0) {
        /* Its linger is over: the thread unsubscribes it now. */
        c->idle_since_ms = dlock_now_ms() - LINGER_MS;
        ps_wake(ps);
    }
    pthread_mutex_unlock(&ps->mu);
}
