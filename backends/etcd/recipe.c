/*
 * recipe.c: etcd's concurrency.Mutex, as etcd.h describes it: acquire
 * (put the contender's key in the queue, then hold or watch the one key
 * before it), release (delete the key if it is still the one the grant
 * created) and inspect.
 *
 * The key of a grant is kept in grant->priv, so renew() and release() use
 * it from any session. After every wait the contender checks that its own
 * key still exists before it says it holds (a lease that ended while it
 * waited took the key: etcd-io/etcd#9921). A contender that gives up (a
 * try that found the lock taken, a deadline, an error) deletes its key,
 * also when the deadline raced the grant: nothing stays in the queue.
 *
 * Permits (a semaphore of N) use the same queue with the keys
 * "<prefix><name>/s/<N>/<lease hex>": a permit is held while fewer than N
 * keys of the queue are older than its own. A waiter waits for one of the
 * N keys just older than its own to go (while they all stay, N are
 * older): one watch of the queue's deletions, which wakes it only for
 * those N (dlock__etcd_watch_nearest), then it looks again.
 *
 * Divisions: keys; the queue; acquire; release; inspect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd.h"

/* ---- keys ------------------------------------------------------------------- */

/* The key of a contender: "<prefix><name>/<lease hex>", readers
 * "<prefix><name>/r/<lease hex>", permits "<prefix><name>/s/<N>/<lease
 * hex>"; a second handle of the client waiting on the same lease and name
 * adds ".<serial hex>". */
static void contender_key(struct etcd_session *es,
                          const struct dlock_request *req, int64_t lease,
                          int second)
{
    size_t n = dlock__etcd_name_prefix(es->x, es->key, req->name,
                                       req->name_len);
    int w = req->kind == DLOCK_KIND_PERMIT
                ? snprintf(es->key + n, sizeof es->key - n, "s/%u/%llx",
                           req->permits, (unsigned long long)lease)
                : snprintf(es->key + n, sizeof es->key - n, "%s%llx",
                           req->kind == DLOCK_KIND_SHARED ? "r/" : "",
                           (unsigned long long)lease);
    if (second && w > 0)
        w += snprintf(es->key + n + (size_t)w, sizeof es->key - n - (size_t)w,
                      ".%llx", (unsigned long long)req->serial);
    es->key_len = n + (size_t)(w > 0 ? w : 0);
}

/* "<prefix><name>/" into es->aux, and the end of its range: the prefix
 * with its last byte ('/') plus one. */
void dlock__etcd_queue_prefix(struct etcd_session *es, const char *name,
                              size_t len)
{
    es->aux_len = dlock__etcd_name_prefix(es->x, es->aux, name, len);
}

static int add_range_key(struct etcd_session *es)
{
    char end[ETCD_KEY_MAX + 1];

    memcpy(end, es->aux, es->aux_len);
    end[es->aux_len - 1]++; /* "name/" -> "name0" */
    return dlock__etcd_buf_printf(&es->body, "\"key\":\"") ||
           dlock__etcd_buf_b64(&es->body, es->aux, es->aux_len) ||
           dlock__etcd_buf_printf(&es->body, "\",\"range_end\":\"") ||
           dlock__etcd_buf_b64(&es->body, end, es->aux_len) ||
           dlock__etcd_buf_printf(&es->body, "\"");
}

/* A request_range of the queue's first key (smallest create revision). */
static int add_first(struct etcd_session *es)
{
    return dlock__etcd_buf_printf(&es->body, "{\"request_range\":{") ||
           add_range_key(es) ||
           dlock__etcd_buf_printf(&es->body, ",\"sort_order\":\"ASCEND\","
                                             "\"sort_target\":\"CREATE\","
                                             "\"limit\":\"1\","
                                             "\"keys_only\":true}}");
}

static int nomem(struct etcd_session *es)
{
    return dlock__etcd_fail(es, DLOCK_ENOMEM, "out of memory");
}

/* A key from the gateway's base64 into es->aux-free storage out. */
static long kv_key(json_object *kv, char *out, size_t cap)
{
    json_object *k = dlock__etcd_get(kv, "key");

    return k != NULL ? dlock__etcd_unb64(json_object_get_string(k), out, cap)
                     : -1;
}

/* Is the key (raw, of the queue prefix es->aux) a reader's? */
static int is_reader(const struct etcd_session *es, const char *key, long len)
{
    return len > (long)es->aux_len + 1 &&
           memcmp(key + es->aux_len, "r/", 2) == 0;
}

/* The N of a permit's key "<queue>s/<N>/…" (raw, of the queue prefix
 * es->aux); 0 for any other key. */
static unsigned permit_count(const struct etcd_session *es, const char *key,
                             long len)
{
    unsigned v = 0;
    long i = (long)es->aux_len + 2;

    if (len <= i || memcmp(key + es->aux_len, "s/", 2) != 0)
        return 0;
    for (; i < len && key[i] >= '0' && key[i] <= '9' && v <= DLOCK_PERMITS_MAX;
         i++)
        v = v * 10 + (unsigned)(key[i] - '0');
    return i < len && key[i] == '/' && v <= DLOCK_PERMITS_MAX ? v : 0;
}

/* ---- the queue ---------------------------------------------------------------- */

/*
 * Put the contender's key unless it exists, attached to the session's
 * lease, with the owner id as its value. *rev: its create revision; *mine
 * 0 when the key existed with another owner's value (a sibling handle on
 * this lease), so the caller picks the second key.
 */
int dlock__etcd_enqueue(struct etcd_session *es, const char *owner,
                        size_t owner_len, int64_t io, int64_t *rev,
                        int64_t *first, int *mine, char *head,
                        long *head_len)
{
    json_object *r, *kv;
    int rc, code;

    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"compare\":[{\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, es->key, es->key_len) ||
        dlock__etcd_buf_printf(&es->body, "\",\"target\":\"CREATE\","
                                          "\"create_revision\":\"0\"}],"
                                          "\"success\":[{\"request_put\":{"
                                          "\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, es->key, es->key_len) ||
        dlock__etcd_buf_printf(&es->body, "\",\"value\":\"") ||
        dlock__etcd_buf_b64(&es->body, owner, owner_len) ||
        dlock__etcd_buf_printf(&es->body, "\",\"lease\":\"%lld\"}},",
                               (long long)es->lease) ||
        add_first(es) ||
        dlock__etcd_buf_printf(&es->body, "],\"failure\":[{\"request_range\":"
                                          "{\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, es->key, es->key_len) ||
        dlock__etcd_buf_printf(&es->body, "\"}},") || add_first(es) ||
        dlock__etcd_buf_printf(&es->body, "]}"))
        return nomem(es);
    rc = dlock__etcd_post(es, "/v3/kv/txn", io, &r, &code);
    if (rc == DLOCK_ERROR && code == ETCD_CODE_NOT_FOUND) {
        es->lease = 0; /* it ended just now: the caller grants another */
        return DLOCK_EBUSY;
    }
    if (rc != DLOCK_OK)
        return rc;
    *mine = 1;
    *first = dlock__etcd_i64(r, "responses.1.response_range.kvs.0."
                                "create_revision");
    if (head != NULL)
        *head_len = kv_key(dlock__etcd_get(r, "responses.1.response_range."
                                              "kvs.0"),
                           head, ETCD_KEY_MAX);
    if (json_object_get_boolean(dlock__etcd_get(r, "succeeded"))) {
        *rev = dlock__etcd_i64(r, "header.revision");
    } else {
        char buf[512];
        json_object *v;
        long n = -1;
        kv = dlock__etcd_get(r, "responses.0.response_range.kvs.0");
        *rev = dlock__etcd_i64(kv, "create_revision");
        v = dlock__etcd_get(kv, "value");
        if (v != NULL)
            n = dlock__etcd_unb64(json_object_get_string(v), buf,
                                  sizeof buf);
        *mine = n == (long)owner_len && memcmp(buf, owner, owner_len) == 0
                    ? 2
                    : 0;
    }
    json_object_put(r);
    if (*rev <= 0)
        return dlock__etcd_fail(es, DLOCK_ERROR,
                                "queue: no revision in etcd's reply");
    return DLOCK_OK;
}

/*
 * The key this contender waits for: the last key created before rev
 * (for a reader, the last writer's; for a permit of N, the N-th last,
 * none when fewer than N are older) as a copy in pred, with *pred_len 0
 * when there is none; *pred_rev its create revision (permits).
 */
static int predecessor(struct etcd_session *es,
                       const struct dlock_request *req, int64_t rev,
                       int64_t io, char *pred, size_t *pred_len,
                       int64_t *pred_rev)
{
    int reader = req->kind == DLOCK_KIND_SHARED;
    uint32_t limit = req->kind == DLOCK_KIND_PERMIT ? req->permits : 1;
    json_object *r, *kvs;
    int rc;

    *pred_len = 0;
    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{") || add_range_key(es) ||
        dlock__etcd_buf_printf(&es->body,
                               ",\"max_create_revision\":\"%lld\","
                               "\"sort_order\":\"DESCEND\","
                               "\"sort_target\":\"CREATE\","
                               "\"keys_only\":true",
                               (long long)(rev - 1)) ||
        (!reader && dlock__etcd_buf_printf(&es->body, ",\"limit\":\"%u\"",
                                           limit)) ||
        dlock__etcd_buf_printf(&es->body, "}"))
        return nomem(es);
    rc = dlock__etcd_post(es, "/v3/kv/range", io, &r, NULL);
    if (rc != DLOCK_OK)
        return rc;
    kvs = dlock__etcd_get(r, "kvs");
    if (req->kind == DLOCK_KIND_PERMIT) {
        json_object *kv = dlock__etcd_len(kvs) < limit
                              ? NULL
                              : json_object_array_get_idx(kvs, limit - 1);
        long n = kv != NULL ? kv_key(kv, pred, ETCD_KEY_MAX) : -1;
        *pred_len = n > 0 ? (size_t)n : 0;
        *pred_rev = dlock__etcd_i64(kv, "create_revision");
        json_object_put(r);
        return DLOCK_OK;
    }
    for (size_t i = 0; i < dlock__etcd_len(kvs); i++) {
        long n = kv_key(json_object_array_get_idx(kvs, i), pred,
                        ETCD_KEY_MAX);
        if (n > 0 && !(reader && is_reader(es, pred, n))) {
            *pred_len = (size_t)n;
            break;
        }
    }
    json_object_put(r);
    return DLOCK_OK;
}

/* Whether the contender's own key still has revision rev. */
static int still_queued(struct etcd_session *es, int64_t rev, int64_t io,
                        int *yes)
{
    json_object *r;
    int rc;

    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, es->key, es->key_len) ||
        dlock__etcd_buf_printf(&es->body, "\",\"keys_only\":true}"))
        return nomem(es);
    rc = dlock__etcd_post(es, "/v3/kv/range", io, &r, NULL);
    if (rc != DLOCK_OK)
        return rc;
    *yes = dlock__etcd_i64(r, "kvs.0.create_revision") == rev;
    json_object_put(r);
    return DLOCK_OK;
}

int dlock__etcd_delete_if(struct etcd_session *es, const char *key,
                          size_t len, int64_t rev, int64_t io)
{
    json_object *r;
    int rc;

    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"compare\":[{\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, key, len) ||
        dlock__etcd_buf_printf(&es->body,
                               "\",\"target\":\"CREATE\","
                               "\"create_revision\":\"%lld\"}],"
                               "\"success\":[{\"request_delete_range\":{"
                               "\"key\":\"",
                               (long long)rev) ||
        dlock__etcd_buf_b64(&es->body, key, len) ||
        dlock__etcd_buf_printf(&es->body, "\"}}]}"))
        return nomem(es);
    rc = dlock__etcd_post(es, "/v3/kv/txn", io, &r, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = json_object_get_boolean(dlock__etcd_get(r, "succeeded")) ? 1 : 0;
    json_object_put(r);
    return rc;
}

/* ---- acquire ------------------------------------------------------------------ */

/* A permit request whose queue starts with a key of another count, or a
 * lock's key: refused, naming both counts [B-PERMIT-1]. */
static int permit_mismatch(struct etcd_session *es,
                           const struct dlock_request *req, const char *head,
                           long head_len)
{
    unsigned n = permit_count(es, head, head_len);

    if (n == 0)
        return dlock__etcd_fail(
            es, DLOCK_EINVAL,
            "permits: %u asked, but the name is a lock here: the first key "
            "of its queue, %.*s, is a lock's (a name is a lock or a "
            "semaphore, never both)",
            req->permits, (int)(head_len > 200 ? 200 : head_len), head);
    return dlock__etcd_fail(es, DLOCK_EINVAL,
                            "permits: %u asked, but this semaphore has %u "
                            "permits (its first holder's key %.*s)",
                            req->permits, n,
                            (int)(head_len > 200 ? 200 : head_len), head);
}

/* Give up: take the contender's key out of the queue, whatever the
 * deadline says, and return rc. */
static int give_up(struct etcd_session *es, int64_t rev, int rc)
{
    int d = dlock__etcd_delete_if(es, es->key, es->key_len, rev,
                      dlock_now_ms() + es->x->timeout_ms);

    if (d < 0 && rc != DLOCK_ECONNECT)
        dlock_session_log(&es->base, DLOCK_LOG_WARN,
                          "could not take the key out of the queue; it ends "
                          "with the session's lease");
    return rc;
}

/* Move the contender's key (es->key at *rev) to a new lease of the
 * session's own: put the new key, then take the old one out. */
static int requeue(struct etcd_session *es, const struct dlock_request *req,
                   int64_t io, int64_t *rev)
{
    char old[ETCD_KEY_MAX + 1];
    size_t old_len = es->key_len;
    int64_t old_rev = *rev, first;
    int rc, mine;

    memcpy(old, es->key, old_len + 1);
    es->lease = 0;
    if ((rc = dlock__etcd_lease_ensure(es, io)) != DLOCK_OK) {
        memcpy(es->key, old, old_len + 1);
        es->key_len = old_len;
        return give_up(es, old_rev, rc);
    }
    contender_key(es, req, es->lease, 0);
    rc = dlock__etcd_enqueue(es, req->owner, req->owner_len, io, rev, &first,
                             &mine, NULL, NULL);
    if (rc == DLOCK_OK && mine != 1)
        rc = dlock__etcd_fail(es, DLOCK_ERROR, "queue: a new lease's key "
                                               "had an owner");
    if (rc == DLOCK_OK)
        dlock__etcd_delete_if(es, old, old_len, old_rev, io);
    else
        dlock__etcd_delete_if(es, old, old_len, old_rev,
                              dlock_now_ms() + es->x->timeout_ms);
    return rc;
}

/* Fill the grant of the contender's key (es->key, created at rev on
 * lease): the fence is its create revision. waited: 0, or the request's
 * lease_ms when the contender waited for the key; then the lease is
 * believed from its last keepalive for that long, not from when the
 * request started: a wait longer than the lease would otherwise end in a
 * grant that has already run out (the wait kept the lease alive, and the
 * key was found after the last keepalive). */
static int granted(struct etcd_session *es, struct dlock_grant *grant,
                   int64_t lease, int64_t rev, int64_t t0, uint32_t waited)
{
    grant->fence = (uint64_t)rev;
    grant->word[0] = (uint64_t)lease;
    grant->word[1] = (uint64_t)rev;
    if ((grant->priv = malloc(es->key_len + 1)) == NULL)
        return give_up(es, rev, nomem(es));
    memcpy(grant->priv, es->key, es->key_len + 1);
    dlock__etcd_lease_grants(es->x, lease, +1);
    if (waited > 0) {
        t0 = es->lease_sent_ms;
        grant->expires_ms = t0 + waited;
    }
    /* Believed from when the request started, and no longer than the
     * lease was last kept alive for (etcd ends it a TTL after that). */
    if (grant->expires_ms > t0 + dlock__etcd_believed_ms(es->x->ttl_s))
        grant->expires_ms = t0 + dlock__etcd_believed_ms(es->x->ttl_s);
    if (grant->expires_ms >
        es->lease_sent_ms + dlock__etcd_believed_ms(es->x->ttl_s))
        grant->expires_ms =
            es->lease_sent_ms + dlock__etcd_believed_ms(es->x->ttl_s);
    return DLOCK_OK;
}

int dlock__etcd_acquire(struct dlock_session *s,
                        const struct dlock_request *req, int64_t deadline_ms,
                        struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct etcd_session *es = (struct etcd_session *)s;
    struct etcd_ctx *x = es->x;
    int64_t t0 = dlock_now_ms(), rev = 0, first = 0, lease, pred_rev = 0;
    char pred[ETCD_KEY_MAX + 1];
    size_t pred_len;
    long head_len = -1;
    int rc, mine, queued = 0, second = 0, own = 0, told = 0;

    (void)retry_ms;
    dlock__etcd_queue_prefix(es, req->name, req->name_len);
    for (int tries = 0;; tries++) {
        int64_t io = dlock_now_ms() + x->timeout_ms;
        if ((rc = dlock__etcd_lease_ensure(es, io)) != DLOCK_OK)
            return rc;
        contender_key(es, req, es->lease, second);
        rc = dlock__etcd_enqueue(es, req->owner, req->owner_len, io, &rev,
                                 &first, &mine, pred, &head_len);
        if (rc == DLOCK_EBUSY && tries < 2)
            continue; /* the lease had ended: enqueue on a new one */
        if (rc != DLOCK_OK)
            return rc == DLOCK_EBUSY
                       ? dlock__etcd_fail(es, DLOCK_ECONNECT,
                                             "queue: etcd lost each new "
                                             "lease at once")
                       : rc;
        if (mine == 1)
            break;
        if (mine == 2) {
            /* A key this owner left (a release etcd refused, an attempt
             * cut short): never take it over, its revision was a fence
             * already. Delete it and queue afresh. */
            if (tries < 2 &&
                dlock__etcd_delete_if(es, es->key, es->key_len, rev, io) >= 0)
                continue;
            return dlock__etcd_fail(es, DLOCK_ECONNECT,
                                    "queue: a key of this owner's is left "
                                    "and cannot be deleted");
        }
        if (second++)
            return dlock__etcd_fail(es, DLOCK_ERROR,
                                    "queue: the key %.*s has another owner",
                                    (int)es->key_len, es->key);
    }
    lease = es->lease;
    /* The transaction read the queue with the key in it: a writer whose
     * key is first holds, with no second round trip. */
    if (first == rev && req->kind != DLOCK_KIND_SHARED)
        return granted(es, grant, lease, rev, t0, 0);
    if (req->kind == DLOCK_KIND_PERMIT &&
        permit_count(es, pred, head_len) != req->permits)
        return give_up(es, rev, permit_mismatch(es, req, pred, head_len));
    for (;;) {
        int64_t io = dlock_now_ms() + x->timeout_ms, slice;
        /* Cancelled [B-CANCEL-1]: take the key out of the queue, which is
         * also the release if it had just come first. */
        if ((rc = dlock_session_cancelled(s)) != 0)
            break;
        rc = predecessor(es, req, rev, io, pred, &pred_len, &pred_rev);
        if (rc != DLOCK_OK)
            break;
        if (pred_len == 0) {
            /* First in line: is the key still ours (#9921)? */
            if ((rc = still_queued(es, rev, io, &queued)) != DLOCK_OK)
                break;
            if (!queued)
                return dlock__etcd_fail(es, DLOCK_ECONNECT,
                                        "the session's lease ended while "
                                        "it waited; its key is gone");
            return granted(es, grant, lease, rev, t0,
                           told ? req->lease_ms : 0);
        }
        if (deadline_ms == 0)
            return give_up(es, rev, DLOCK_EBUSY);
        if (dlock_now_ms() >= deadline_ms)
            return give_up(es, rev, DLOCK_ETIMEDOUT);
        if (!own) {
            /* About to wait: this wait will keep its lease alive, so the
             * lease must carry no other handle's lock (etcd.h). */
            own = 1;
            if (dlock__etcd_lease_grants(x, lease, 0) != 0) {
                if ((rc = requeue(es, req, io, &rev)) != DLOCK_OK)
                    return rc;
                lease = es->lease;
                continue;
            }
        }
        /* In line for good (a requeue above moves the key to the back):
         * the next acquire may queue now [B-QUEUED-1]. */
        if (!told++)
            dlock_session_queued(s);
        /* Watch the predecessor, waking at a third of the TTL to keep this
         * session's lease (and so its place in the queue) alive. */
        slice = dlock_now_ms() + (int64_t)x->ttl_s * 1000 / 3;
        if (slice > deadline_ms)
            slice = deadline_ms;
        rc = req->kind == DLOCK_KIND_PERMIT
                 ? dlock__etcd_watch_nearest(es, es->aux, es->aux_len,
                                             pred_rev, rev, req->permits,
                                             slice)
                 : dlock__etcd_watch_delete(es, pred, pred_len, slice);
        if (rc < 0 && rc != DLOCK_ECONNECT)
            break;
        if (rc == DLOCK_ECONNECT) /* the next member, in a moment */
            nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
        /* The session holds no grant while it waits [B-PIN-1]: keeping
         * its lease alive keeps only this contender's key. */
        if (dlock_now_ms() - es->lease_sent_ms >=
                (int64_t)x->ttl_s * 1000 / 3 &&
            (rc = dlock__etcd_keepalive(es, lease, dlock_now_ms() +
                                                       x->timeout_ms)) !=
                DLOCK_OK) {
            if (rc == DLOCK_ELOST) {
                es->lease = 0;
                rc = dlock__etcd_fail(es, DLOCK_ECONNECT,
                                      "the session's lease ended while it "
                                      "waited");
            }
            break;
        }
    }
    return give_up(es, rev, rc);
}

/* ---- release ------------------------------------------------------------------ */

int dlock__etcd_release(struct dlock_session *s,
                        const struct dlock_request *req,
                        struct dlock_grant *grant)
{
    struct etcd_session *es = (struct etcd_session *)s;
    const char *key = grant->priv;
    int rc;

    (void)req;
    if (key == NULL) /* core's second call after a failed one [B-CONN-2] */
        return dlock__etcd_fail(es, DLOCK_ECONNECT,
                                "not released: etcd could not be reached; "
                                "the key ends with its lease");
    rc = dlock__etcd_delete_if(es, key, strlen(key), (int64_t)grant->word[1],
                               dlock_now_ms() + es->x->timeout_ms);
    /* Called once per grant [B-RELEASE-1]: whatever the answer, the grant
     * ends here (a key not deleted ends with its lease). */
    dlock__etcd_lease_grants(es->x, (int64_t)grant->word[0], -1);
    free(grant->priv);
    grant->priv = NULL;
    if (rc < 0) {
        /* The key may be left: stop using and keeping alive its lease, so
         * it ends with the lease's TTL at the latest. */
        dlock__etcd_lease_abandon(es->x, (int64_t)grant->word[0]);
        return rc;
    }
    return rc == 1 ? DLOCK_OK : DLOCK_ENOTOWNER;
}

/* ---- inspect ------------------------------------------------------------------ */

/* A semaphore of n (its first key a permit's): the holders are the n
 * oldest keys of count; the last fence handed out is the youngest
 * holder's create revision. */
static int inspect_permits(struct etcd_session *es, unsigned n, int64_t count,
                           int64_t io, dlock_state *out)
{
    json_object *r;
    int64_t k = count < (int64_t)n ? count : (int64_t)n;
    int rc;

    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{") || add_range_key(es) ||
        dlock__etcd_buf_printf(&es->body, ",\"sort_order\":\"ASCEND\","
                                          "\"sort_target\":\"CREATE\","
                                          "\"keys_only\":true,"
                                          "\"limit\":\"%lld\"}",
                               (long long)k))
        return nomem(es);
    if ((rc = dlock__etcd_post(es, "/v3/kv/range", io, &r, NULL)) != DLOCK_OK)
        return rc;
    k = (int64_t)dlock__etcd_len(dlock__etcd_get(r, "kvs"));
    if (k > 0)
        out->fence = (uint64_t)dlock__etcd_i64(
            json_object_array_get_idx(dlock__etcd_get(r, "kvs"),
                                      (size_t)k - 1),
            "create_revision");
    json_object_put(r);
    snprintf(out->owner, sizeof out->owner, "(%lld of %u permits held)",
             (long long)k, n);
    out->waiters = count > k ? (int)(count - k) : 0;
    return DLOCK_OK;
}

int dlock__etcd_inspect(struct dlock_session *s, const char *name, size_t len,
                        dlock_state *out)
{
    struct etcd_session *es = (struct etcd_session *)s;
    int64_t io = dlock_now_ms() + es->x->timeout_ms, lease, count;
    json_object *r, *kv, *v;
    char key[ETCD_KEY_MAX + 1];
    unsigned permits;
    long n;
    int rc;

    dlock__etcd_queue_prefix(es, name, len);
    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{") || add_range_key(es) ||
        dlock__etcd_buf_printf(&es->body, ",\"sort_order\":\"ASCEND\","
                                          "\"sort_target\":\"CREATE\","
                                          "\"limit\":\"1\"}"))
        return nomem(es);
    if ((rc = dlock__etcd_post(es, "/v3/kv/range", io, &r, NULL)) != DLOCK_OK)
        return rc;
    count = dlock__etcd_i64(r, "count");
    kv = dlock__etcd_get(r, "kvs.0");
    out->held = kv != NULL;
    out->waiters = count > 0 ? (int)(count - 1) : 0;
    out->remaining_ms = -1;
    if (kv == NULL) {
        json_object_put(r);
        return DLOCK_OK;
    }
    out->fence = (uint64_t)dlock__etcd_i64(kv, "create_revision");
    n = kv_key(kv, key, ETCD_KEY_MAX);
    permits = permit_count(es, key, n);
    v = dlock__etcd_get(kv, "value");
    n = v != NULL ? dlock__etcd_unb64(json_object_get_string(v), out->owner,
                                      sizeof out->owner - 1)
                  : -1;
    if (n <= 0) /* etcdctl and Go write no value: name the key instead */
        n = kv_key(kv, out->owner, sizeof out->owner - 1);
    out->owner[n > 0 ? n : 0] = '\0';
    for (char *p = out->owner; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';
    lease = dlock__etcd_i64(kv, "lease");
    json_object_put(r);
    if (permits > 0 &&
        (rc = inspect_permits(es, permits, count, io, out)) != DLOCK_OK)
        return rc;
    if (lease != 0) {
        es->body.len = 0;
        if (dlock__etcd_buf_printf(&es->body, "{\"ID\":\"%lld\"}",
                                   (long long)lease))
            return nomem(es);
        if (dlock__etcd_post(es, "/v3/kv/lease/timetolive", io, &r, NULL) ==
            DLOCK_OK) {
            int64_t ttl = dlock__etcd_i64(r, "TTL");
            out->remaining_ms = ttl >= 0 ? ttl * 1000 : -1;
            json_object_put(r);
        }
    }
    return DLOCK_OK;
}
