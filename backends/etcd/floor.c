/*
 * floor.c: `dlock bench`'s floor for etcd: n cycles of the bare mutex
 * protocol (the enqueue transaction that puts the key and reads the
 * queue's first key, then the delete), on one lease granted beforehand,
 * through libcurl with no dlock core in the loop. etcd's own concurrency
 * Mutex sends the same. dlock's fence is the key's create revision, which
 * the enqueue returns: no fence_floor. And the bench's clean-up, which
 * has nothing to do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

int dlock__etcd_floor(const struct dlock_uri *uri, const char *name,
                      uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    const struct dlock_backend *b = dlock_backend_find("etcd");
    struct etcd_session *es = NULL;
    struct dlock_session *s = NULL;
    void *ctx = NULL;
    int rc;

    if (b == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOBACKEND, "no etcd backend");
    if ((rc = b->ctx_open(&ctx, uri, b->modes[0], err, errlen)) != DLOCK_OK)
        return rc;
    if ((rc = b->open(&s, uri, ctx, err, errlen)) != DLOCK_OK)
        goto out;
    es = (struct etcd_session *)s;
    dlock__etcd_queue_prefix(es, name, strlen(name));
    es->key_len = (size_t)snprintf(es->key, sizeof es->key, "%s%llx",
                                   es->aux, (unsigned long long)es->lease);
    for (uint32_t i = 0; i < n && rc == DLOCK_OK; i++) {
        uint64_t t = dlock_now_ns();
        int64_t io = dlock_now_ms() + es->x->timeout_ms, rev, first;
        int mine;
        rc = dlock__etcd_enqueue(es, "floor", 5, io, &rev, &first, &mine,
                                 NULL, NULL);
        if (rc == DLOCK_OK && first != rev)
            rc = dlock_errorf(err, errlen, DLOCK_EBUSY,
                              "floor: '%s' is held by someone else", name);
        else if (rc == DLOCK_OK &&
                 dlock__etcd_delete_if(es, es->key, es->key_len, rev, io) != 1)
            rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                              "floor: the delete failed: %s", es->why);
        else if (rc != DLOCK_OK)
            dlock_errorf(err, errlen, rc, "floor: %s", es->why);
        ns_out[i] = dlock_now_ns() - t;
    }
out:
    if (s != NULL)
        b->close(s);
    b->ctx_close(ctx);
    return rc;
}

/* Nothing to remove: every key a lock of either mode makes is put on the
 * session's lease and deleted at the release, and the lease is revoked
 * when the session closes (or runs out), so a name leaves no key behind.
 * The bench's test counts the keys before and after a run to prove it. */
int dlock__etcd_forget(const struct dlock_mode *mode,
                       const struct dlock_uri *uri, const char *const *names,
                       size_t n, char *err, size_t errlen)
{
    (void)mode;
    (void)uri;
    (void)names;
    (void)n;
    (void)err;
    (void)errlen;
    return DLOCK_OK;
}
