/*
 * latch.c: count-down latches (dlock_latch_*). A latch handle is a name
 * and a client; the count lives on the server, in whatever the mode's
 * latch table [B-LATCH-1] keeps it. Core checks the arguments, checks a
 * session out per call, turns the backend's answers into messages, and
 * waits: by the backend's await() where it has one (a notification),
 * else by polling count() with backoff. set() and down() are never
 * retried (a second count-down after a lost answer would count twice);
 * count() and the wait retry a broken connection until the deadline.
 *
 * Layer: beside lock.c (client.h, pool.h below it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

struct dlock_latch {
    struct dlock_client *c;
    const struct dlock_latch_ops *ops;
    char *name;
    size_t len;
    char errmsg[DLOCK__ERRMSG_MAX];
};

/* Polling when the mode has no await(): core's defaults. */
#define LATCH_POLL_MIN_MS 10
#define LATCH_POLL_MAX_MS 200

/* ---- messages ---------------------------------------------------------------- */

/* Fill the handle's message from core's own words; evaluates to code. */
#define latch_error(l, code, op, ...)                                        \
    (dlock__pool_formatf(&(l)->c->pool, (l)->errmsg, sizeof (l)->errmsg,   \
                         (op), (l)->name, __VA_ARGS__),                    \
     (code))

/* Keep the backend's message if it wrote one, else say the code's text. */
static int latch_result(struct dlock_latch *l, int code, const char *op)
{
    if (code == DLOCK_OK)
        l->errmsg[0] = '\0';
    else if (l->errmsg[0] == '\0')
        (void)latch_error(l, code, op, "%s", dlock_strerror(code));
    return code;
}

/* The modes of c's backend that have latches, for a refusal. */
static void latch_modes_text(const struct dlock_client *c, char *buf,
                             size_t cap)
{
    size_t n = 0;

    buf[0] = '\0';
    for (size_t i = 0; c->b->modes[i] != NULL && n < cap; i++) {
        const struct dlock_mode *m = c->b->modes[i];
        if ((m->caps & DLOCK_CAP_LATCH) && dlock__mode_latch(c->b, m) != NULL)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n > 0 ? ", " : "",
                                  m->name);
    }
}

/* ---- handles ----------------------------------------------------------------- */

#define NEW_ERROR(c, code, ...) \
    dlock__thread_error((c), (code), "latch_new: " __VA_ARGS__)

int dlock_latch_new(dlock_latch **out, dlock_client *c, const char *name)
{
    const struct dlock_latch_ops *ops;
    struct dlock_latch *l;
    size_t len;
    char modes[128];
    int rc;

    if (out != NULL)
        *out = NULL;
    if (c == NULL || out == NULL)
        return DLOCK_EINVAL;
    if ((rc = dlock__client_check_new(c, "latch_new", name, &len)) != DLOCK_OK)
        return rc;
    ops = dlock__mode_latch(c->b, c->mode);
    if (ops == NULL || !(c->caps & DLOCK_CAP_LATCH)) {
        latch_modes_text(c, modes, sizeof modes);
        if (modes[0] != '\0')
            return NEW_ERROR(c, DLOCK_EUNSUPPORTED,
                             "%s mode '%s' has no count-down latches (the "
                             "%s modes with them: %s)",
                             c->b->scheme, c->mode->name, c->b->scheme,
                             modes);
        return NEW_ERROR(c, DLOCK_EUNSUPPORTED,
                         "the %s backend has no count-down latches",
                         c->b->scheme);
    }
    if ((l = calloc(1, sizeof *l)) == NULL ||
        (l->name = malloc(len + 1)) == NULL) {
        free(l);
        return NEW_ERROR(c, DLOCK_ENOMEM, "out of memory");
    }
    memcpy(l->name, name, len + 1);
    l->len = len;
    l->c = c;
    l->ops = ops;
    dlock__client_ref(c);
    *out = l;
    return DLOCK_OK;
}

void dlock_latch_free(dlock_latch *l)
{
    if (l == NULL)
        return;
    dlock__client_unref(l->c);
    free(l->name);
    free(l);
}

const char *dlock_latch_name(const dlock_latch *l)
{
    return l != NULL ? l->name : "";
}

const char *dlock_latch_errmsg(const dlock_latch *l)
{
    return l != NULL ? l->errmsg : "";
}

/* ---- one call on a session ------------------------------------------------------ */

/* Check a session out for op, or say why not (l->errmsg). One with no
 * connection-bound grants: a wait there could hold up their renewals
 * [B-PIN-1]. */
static struct dlock__sess *latch_session(struct dlock_latch *l,
                                         const char *op, int *rc)
{
    struct dlock__sess *ss;

    l->errmsg[0] = '\0';
    if (atomic_load(&l->c->closed)) {
        *rc = latch_error(l, DLOCK_ECLOSED, op, "the client was closed");
        return NULL;
    }
    ss = dlock__checkout(&l->c->pool, DLOCK__PICK_UNPINNED, NULL, l->errmsg,
                         sizeof l->errmsg, rc);
    if (ss != NULL)
        dlock__sess_begin(ss, op, l->name, l->errmsg, sizeof l->errmsg);
    return ss;
}

/* What one call asks of the backend. */
enum latch_op { LATCH_SET, LATCH_DOWN, LATCH_COUNT, LATCH_AWAIT };

static const char *const op_names[] = {"latch set", "latch down",
                                       "latch count", "latch await"};

/* One call of the latch table on a session of its own: arg is set's
 * count or await's deadline; *out what set, down or count say. */
static int latch_call(struct dlock_latch *l, enum latch_op op,
                      const struct dlock__call *call, int64_t arg,
                      uint32_t *out)
{
    struct dlock__sess *ss;
    int rc;

    *out = 0;
    if ((ss = latch_session(l, op_names[op], &rc)) == NULL)
        return rc;
    if (call != NULL)
        dlock__sess_call(ss, call);
    switch (op) {
    case LATCH_SET:
        rc = l->ops->set(ss->s, l->name, l->len, (uint32_t)arg, out);
        break;
    case LATCH_DOWN:
        rc = l->ops->down(ss->s, l->name, l->len, out);
        break;
    case LATCH_COUNT:
        rc = l->ops->count(ss->s, l->name, l->len, out);
        break;
    case LATCH_AWAIT:
        rc = l->ops->await(ss->s, l->name, l->len, arg);
        break;
    }
    dlock__checkin(ss, rc);
    return rc;
}

int dlock_latch_set(dlock_latch *l, uint32_t count)
{
    uint32_t current;
    int rc;

    if (l == NULL)
        return DLOCK_EINVAL;
    if (count == 0 || count > DLOCK_LATCH_COUNT_MAX)
        return latch_error(l, DLOCK_EINVAL, "latch set",
                           "count: %u (expected 1 to %u)", count,
                           DLOCK_LATCH_COUNT_MAX);
    rc = latch_call(l, LATCH_SET, NULL, count, &current);
    if (rc == DLOCK_OK && current != 0)
        return latch_error(l, DLOCK_EBUSY, "latch set",
                           "the latch is counting already (count %u); "
                           "it can be set again once it reaches zero",
                           current);
    return latch_result(l, rc, "latch set");
}

int dlock_latch_down(dlock_latch *l, uint32_t *left)
{
    uint32_t n;
    int rc;

    if (l == NULL)
        return DLOCK_EINVAL;
    rc = latch_call(l, LATCH_DOWN, NULL, 0, &n);
    if (left != NULL)
        *left = n;
    latch_result(l, rc, "latch down");
    if (rc == DLOCK_ECONNECT) {
        size_t used = strlen(l->errmsg);
        snprintf(l->errmsg + used, sizeof l->errmsg - used,
                 " (the count-down may or may not have happened; it is not "
                 "retried)");
    }
    return rc;
}

int dlock_latch_count(dlock_latch *l, uint32_t *count)
{
    if (l == NULL)
        return DLOCK_EINVAL;
    if (count == NULL)
        return latch_error(l, DLOCK_EINVAL, "latch count",
                           "count: NULL (expected where to write it)");
    return latch_result(l, latch_call(l, LATCH_COUNT, NULL, 0, count),
                        "latch count");
}

/* ---- await -------------------------------------------------------------------- */

int dlock_latch_await_cancellable(dlock_latch *l, uint32_t timeout_ms,
                                  dlock_cancel *cx)
{
    struct dlock__call call = {{NULL, NULL}, NULL, NULL};
    const struct dlock_latch_ops *ops;
    uint32_t pmin, pmax, count = 0, wait;
    int64_t start, deadline, now;
    unsigned attempt = 0;
    bool notify;
    int rc;

    if (l == NULL)
        return DLOCK_EINVAL;
    ops = l->ops;
    call.cx.own = cx;
    call.cx.shut = &l->c->shut;
    pmin = ops->poll_min_ms > 0 ? ops->poll_min_ms : LATCH_POLL_MIN_MS;
    pmax = ops->poll_max_ms > 0 ? ops->poll_max_ms : LATCH_POLL_MAX_MS;
    start = dlock_now_ms();
    deadline = timeout_ms == DLOCK_WAIT_FOREVER ? INT64_MAX
                                                : start + timeout_ms;
    /* A single look (timeout 0) needs no listening. */
    notify = ops->await != NULL && timeout_ms > 0;
    for (;;) {
        if ((rc = dlock__cancelled(&call.cx)) != 0)
            break;
        rc = latch_call(l, notify ? LATCH_AWAIT : LATCH_COUNT, &call,
                        deadline, &count);
        now = dlock_now_ms();
        if (rc == DLOCK_ECANCELED || rc == DLOCK_ECLOSED)
            break; /* a cancel seen by the backend's wait */
        if (rc == DLOCK_OK && (notify || count == 0))
            return latch_result(l, rc, "latch await");
        if (rc != DLOCK_OK && rc != DLOCK_ECONNECT &&
            !(rc == DLOCK_ETIMEDOUT && notify))
            return latch_result(l, rc, "latch await");
        if (now >= deadline) {
            if (rc == DLOCK_ECONNECT)
                return latch_result(l, rc, "latch await");
            /* The backend waited until the deadline: say the count (one
             * more round trip, on the way out). */
            if (notify && latch_call(l, LATCH_COUNT, NULL, 0, &count) ==
                              DLOCK_OK &&
                count == 0)
                return latch_result(l, DLOCK_OK, "latch await");
            if (count > 0)
                return latch_error(l, DLOCK_ETIMEDOUT, "latch await",
                                   "the count was still %u after %lld ms",
                                   count, (long long)(now - start));
            return latch_error(l, DLOCK_ETIMEDOUT, "latch await",
                               "the count did not reach zero within "
                               "%lld ms",
                               (long long)(now - start));
        }
        /* Poll again (or reconnect) after a backoff. */
        wait = dlock__backoff_ms(pmin, pmax, attempt++);
        if (now + wait > deadline)
            wait = (uint32_t)(deadline - now);
        rc = dlock__cancel_poll(&call.cx, -1, 0, now + wait);
        if (rc < 0)
            break;
    }
    l->errmsg[0] = '\0';
    return latch_error(l, rc, "latch await", "%s",
                       rc == DLOCK_ECLOSED
                           ? "the client was shut down before the latch "
                             "opened"
                           : rc == DLOCK_ECANCELED
                                 ? "cancelled before the latch opened"
                                 : dlock_strerror(rc));
}

int dlock_latch_await(dlock_latch *l, uint32_t timeout_ms)
{
    return dlock_latch_await_cancellable(l, timeout_ms, NULL);
}
