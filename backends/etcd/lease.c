/*
 * lease.c: the etcd lease behind a session's locks. Each session grants
 * one lease, always explicitly and with the TTL the URI's lease asks for
 * (ctx->ttl_s), and puts every key it creates on it. Core's watchdog keeps
 * it alive through renew(): one keepalive per lease however many locks it
 * carries, then one transaction that checks every renewed lock's key is
 * still the one its grant created (a key deleted behind the holder's back,
 * `etcdctl del`, is a lost lock even while the lease lives).
 *
 * A grant remembers its lease (word[0]) and its key's create revision
 * (word[1], also the fence), so renewals and releases work from any
 * session of the client [B-RENEW-1]. Closing a session does not revoke
 * its lease: a lease with no keys ends by itself after its TTL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

int dlock__etcd_keepalive(struct etcd_session *es, int64_t id,
                          int64_t deadline_ms)
{
    json_object *r;
    int rc;

    int64_t sent = dlock_now_ms();

    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"ID\":\"%lld\"}", (long long)id))
        return dlock_session_error(&es->base, DLOCK_ENOMEM, "out of memory");
    rc = dlock__etcd_post(es, "/v3/lease/keepalive", deadline_ms, &r, NULL);
    if (rc != DLOCK_OK)
        return rc;
    /* A lease that has ended answers with no TTL (or 0). */
    rc = dlock__etcd_i64(r, "result.TTL") > 0 ? DLOCK_OK : DLOCK_ELOST;
    json_object_put(r);
    if (rc == DLOCK_OK && id == es->lease)
        es->lease_sent_ms = sent;
    return rc;
}

int64_t dlock__etcd_believed_ms(uint32_t ttl_s)
{
    int64_t ttl = (int64_t)ttl_s * 1000, margin = ttl / 11;

    return ttl - (margin < 500 ? 500 : margin);
}

int dlock__etcd_lease_ensure(struct etcd_session *es, int64_t deadline_ms)
{
    int64_t sent = dlock_now_ms();
    json_object *r;
    int rc;

    if (es->lease != 0 &&
        sent - es->lease_sent_ms <= (int64_t)es->x->ttl_s * 1000 / 3 &&
        !dlock__etcd_lease_abandoned(es->x, es->lease))
        return DLOCK_OK;
    /* The old lease is left to its grants' renewals, or to its TTL. */
    es->lease = 0;
    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"TTL\":\"%u\"}", es->x->ttl_s))
        return dlock_session_error(&es->base, DLOCK_ENOMEM, "out of memory");
    rc = dlock__etcd_post(es, "/v3/lease/grant", deadline_ms, &r, NULL);
    if (rc != DLOCK_OK)
        return rc;
    es->lease = dlock__etcd_i64(r, "ID");
    json_object_put(r);
    if (es->lease == 0)
        return dlock_session_error(&es->base, DLOCK_ERROR,
                                   "lease grant: no lease ID in the reply");
    es->lease_sent_ms = sent;
    return DLOCK_OK;
}

/* One transaction comparing each grant's key with the create revision it
 * had; whether all still match. Keys are checked in chunks of 64 (etcd
 * takes 128 operations per transaction by default). */
static int keys_match(struct etcd_session *es, struct dlock_renewal *items,
                      size_t n, int64_t deadline_ms, int *all)
{
    json_object *r;
    int rc;

    *all = 1;
    for (size_t at = 0; at < n && *all; at += 64) {
        size_t end = n - at > 64 ? at + 64 : n;
        es->body.len = 0;
        if (dlock__etcd_buf_printf(&es->body, "{\"compare\":["))
            return dlock_session_error(&es->base, DLOCK_ENOMEM, "no memory");
        for (size_t i = at; i < end; i++) {
            const char *key = items[i].grant->priv;
            if (dlock__etcd_buf_printf(&es->body, "%s{\"key\":\"",
                                       i > at ? "," : "") ||
                dlock__etcd_buf_b64(&es->body, key, strlen(key)) ||
                dlock__etcd_buf_printf(
                    &es->body,
                    "\",\"target\":\"CREATE\",\"create_revision\":\"%llu\"}",
                    (unsigned long long)items[i].grant->word[1]))
                return dlock_session_error(&es->base, DLOCK_ENOMEM,
                                           "no memory");
        }
        if (dlock__etcd_buf_printf(&es->body, "]}"))
            return dlock_session_error(&es->base, DLOCK_ENOMEM, "no memory");
        rc = dlock__etcd_post(es, "/v3/kv/txn", deadline_ms, &r, NULL);
        if (rc != DLOCK_OK)
            return rc;
        *all = json_object_get_boolean(dlock__etcd_get(r, "succeeded"));
        json_object_put(r);
    }
    return DLOCK_OK;
}

int dlock__etcd_renew(struct dlock_session *s, struct dlock_renewal *items,
                      size_t n)
{
    struct etcd_session *es = (struct etcd_session *)s;
    int64_t t0 = dlock_now_ms(), deadline = t0 + es->x->timeout_ms;
    int64_t believed = dlock__etcd_believed_ms(es->x->ttl_s);
    int rc, all;

    /* One keepalive per distinct lease (almost always one): a grant whose
     * lease an earlier item already kept alive takes that item's result. */
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && items[j].grant->word[0] != items[i].grant->word[0])
            j++;
        if (j < i) {
            items[i].result = items[j].result;
            continue;
        }
        rc = dlock__etcd_keepalive(es, (int64_t)items[i].grant->word[0],
                                   deadline);
        if (rc != DLOCK_OK && rc != DLOCK_ELOST)
            return rc;
        items[i].result = rc;
    }
    /* The keys themselves: all at once, then one by one if one is gone. */
    if ((rc = keys_match(es, items, n, deadline, &all)) != DLOCK_OK)
        return rc;
    for (size_t i = 0; !all && i < n; i++) {
        int one;
        if (items[i].result != DLOCK_OK)
            continue;
        if ((rc = keys_match(es, &items[i], 1, deadline, &one)) != DLOCK_OK)
            return rc;
        if (!one)
            items[i].result = DLOCK_ELOST;
    }
    /* A lease longer than the URI's (a handle's own lease_ms) is believed
     * no longer than the etcd lease allows [B-BOUND-1]. */
    for (size_t i = 0; i < n; i++)
        if (items[i].result == DLOCK_OK &&
            items[i].grant->expires_ms > t0 + believed)
            items[i].grant->expires_ms = t0 + believed;
    return DLOCK_OK;
}
