/*
 * multi.c: several locks taken as one (dlock_acquire_all, dlock_release_all).
 *
 * Redisson's RedissonMultiLock takes its locks in the order the caller
 * listed them, so two callers that list the same locks in different orders
 * can each hold one and wait for the other (redisson#1160, #467); Curator's
 * InterProcessMultiLock gives every lock the whole timeout, so the worst
 * case is N times the timeout. Here every caller takes the locks in one
 * order that does not depend on the list: by lock name (bytes, then
 * length), and for one name on several backends by the client's URI as
 * written (password masked). Ordered acquisition cannot deadlock, so a
 * waiter may hold the locks before it in the order while it waits: no
 * give-up-and-retry livelock. One deadline covers the whole call. Anything
 * that fails gives back, in reverse order, what this call took.
 *
 * It is built only on lock.c's public calls (reentrancy, cancellation and
 * the release rules are theirs) and reads a handle's name and client.
 */
#include <stdlib.h>
#include <string.h>

#include "lock.h"

/* The handle's lock, for ordering and for telling two handles of one lock
 * apart: its name, then its client's URI as written (password masked). */
static int lock_cmp(const struct dlock_lock *a, const struct dlock_lock *b)
{
    size_t la = a->req.name_len, lb = b->req.name_len;
    int d = memcmp(a->req.name, b->req.name, la < lb ? la : lb);

    if (d != 0)
        return d;
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a->c->uri->redacted, b->c->uri->redacted);
}

static int order_cmp(const void *x, const void *y)
{
    const struct dlock_lock *a = *(struct dlock_lock *const *)x;
    const struct dlock_lock *b = *(struct dlock_lock *const *)y;

    return lock_cmp(a, b);
}

/* Where locks[] has lk, for *failed. */
static int index_of(dlock_lock *const *locks, size_t n,
                    const struct dlock_lock *lk)
{
    for (size_t i = 0; i < n; i++)
        if (locks[i] == lk)
            return (int)i;
    return -1;
}

static int say(struct dlock_lock *lk, int code, const char *text)
{
    char msg[DLOCK__ERRMSG_MAX];

    dlock__pool_format(&lk->c->pool, msg, sizeof msg, "acquire_all",
                       lk->name, text);
    dlock__lock_say(lk, "%s", msg);
    return code;
}

/* The arguments, checked; on success order[] holds the handles sorted. */
static int check(dlock_lock *const *locks, size_t n, dlock_lock **order,
                 int *failed)
{
    for (size_t i = 0; i < n; i++) {
        if (locks[i] == NULL) {
            *failed = (int)i;
            return DLOCK_EINVAL;
        }
        order[i] = locks[i];
    }
    qsort(order, n, sizeof *order, order_cmp);
    for (size_t i = 1; i < n; i++) {
        if (lock_cmp(order[i - 1], order[i]) != 0)
            continue;
        *failed = index_of(locks, n, order[i]);
        return say(order[i], DLOCK_EINVAL,
                   order[i - 1] == order[i]
                       ? "the same handle is listed twice"
                       : "two handles of the list name the same lock "
                         "(the second would wait for the first forever)");
    }
    return DLOCK_OK;
}

int dlock_acquire_all(dlock_lock *const *locks, size_t n,
                      uint32_t timeout_ms, dlock_cancel *cx, int *failed)
{
    dlock_lock *one[8], **order = one;
    int64_t deadline = 0;
    int rc = DLOCK_OK, bad = -1;
    size_t taken = 0;

    if (failed != NULL)
        *failed = -1;
    if (locks == NULL || n == 0 || n > DLOCK_ACQUIRE_ALL_MAX)
        return DLOCK_EINVAL;
    if (n > sizeof one / sizeof one[0] &&
        (order = malloc(n * sizeof *order)) == NULL)
        return DLOCK_ENOMEM;
    if ((rc = check(locks, n, order, &bad)) != DLOCK_OK)
        goto out;
    if (timeout_ms != 0 && timeout_ms != DLOCK_WAIT_FOREVER)
        deadline = dlock_now_ms() + timeout_ms;
    for (; taken < n; taken++) {
        uint32_t t = timeout_ms;
        if (deadline != 0) {
            int64_t left = deadline - dlock_now_ms();
            t = left > 0 ? (uint32_t)left : 0; /* past it: one last try */
        }
        rc = dlock_acquire_cancellable(order[taken], t, cx);
        if (rc == DLOCK_EBUSY && timeout_ms != 0)
            rc = say(order[taken], DLOCK_ETIMEDOUT,
                     "timed out: the call's timeout covers all its locks");
        if (rc != DLOCK_OK) {
            bad = index_of(locks, n, order[taken]);
            break;
        }
    }
    if (rc != DLOCK_OK)
        while (taken > 0)
            dlock_release(order[--taken]);
out:
    if (failed != NULL)
        *failed = bad;
    if (order != one)
        free(order);
    return rc;
}

int dlock_release_all(dlock_lock *const *locks, size_t n)
{
    int rc = DLOCK_OK;

    if (locks == NULL || n > DLOCK_ACQUIRE_ALL_MAX)
        return DLOCK_EINVAL;
    for (size_t i = n; i-- > 0;) {
        int r = locks[i] != NULL ? dlock_release(locks[i]) : DLOCK_EINVAL;
        if (rc == DLOCK_OK)
            rc = r;
    }
    return rc;
}
