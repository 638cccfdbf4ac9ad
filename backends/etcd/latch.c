/*
 * latch.c: count-down latches on etcd [B-LATCH-1]. etcd has no latch
 * recipe; dlock's: the key "<prefix><name>@latch" (the encoded name has
 * no '/', so the key is under no lock's "<prefix><name>/" queue, and no
 * two names share it) holds the count as decimal text, on no lease: a
 * latch outlives every session. set is one transaction "create the key if
 * its create revision is 0, else read it"; down reads the key and writes
 * count - 1 (or deletes the key at zero) in a transaction comparing its
 * mod revision, and reads again when another writer came between. A
 * waiter watches the key's deletion (http.c's watch, which checks the key
 * once the watch is set up), so it wakes when the last count-down deletes
 * it; a latch set again meanwhile is read after each wake.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* A watch ends with its member or the deadline: look at least this
 * often. */
#define ETCD_LATCH_RECHECK_MS 2000
/* Compare-and-set rounds lost to other writers before giving up. */
#define ETCD_LATCH_TRIES 100

/* The latch's key into es->aux. */
static void latch_key(struct etcd_session *es, const char *name, size_t len)
{
    size_t n = dlock__etcd_name_prefix(es->x, es->aux, name, len);

    /* "<prefix><name>/" -> "<prefix><name>@latch" */
    memcpy(es->aux + n - 1, "@latch", 7);
    es->aux_len = n - 1 + 6;
}

static int nomem(struct etcd_session *es)
{
    return dlock__etcd_fail(es, DLOCK_ENOMEM, "out of memory");
}

/* The count in a kv (NULL: none, 0), or -1 when it holds no count. */
static int64_t kv_count(json_object *kv)
{
    json_object *v = dlock__etcd_get(kv, "value");
    char text[24], *end;
    long n;
    unsigned long c;

    if (kv == NULL || v == NULL)
        return 0;
    n = dlock__etcd_unb64(json_object_get_string(v), text, sizeof text - 1);
    if (n < 0)
        return -1;
    text[n] = '\0';
    c = strtoul(text, &end, 10);
    return end == text || *end != '\0' || c > DLOCK_LATCH_COUNT_MAX
               ? -1
               : (int64_t)c;
}

/* Read the count and the key's mod revision (0: no key). */
static int latch_read(struct etcd_session *es, uint32_t *count, int64_t *mod,
                      int64_t io)
{
    json_object *r, *kv;
    int64_t c;
    int rc;

    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, es->aux, es->aux_len) ||
        dlock__etcd_buf_printf(&es->body, "\"}"))
        return nomem(es);
    if ((rc = dlock__etcd_post(es, "/v3/kv/range", io, &r, NULL)) != DLOCK_OK)
        return rc;
    kv = dlock__etcd_get(r, "kvs.0");
    c = kv_count(kv);
    *mod = dlock__etcd_i64(kv, "mod_revision");
    json_object_put(r);
    if (c < 0)
        return dlock__etcd_fail(es, DLOCK_ERROR,
                                "the key %s does not hold a latch count",
                                es->aux);
    *count = (uint32_t)c;
    return DLOCK_OK;
}

/* One transaction: if the key's target (CREATE or MOD) revision is rev,
 * put value (NULL: delete the key); *done whether it applied. */
static int latch_txn(struct etcd_session *es, const char *target, int64_t rev,
                     const char *value, int *done, int64_t io)
{
    json_object *r;
    int rc;

    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"compare\":[{\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, es->aux, es->aux_len) ||
        dlock__etcd_buf_printf(&es->body,
                               "\",\"target\":\"%s\",\"%s_revision\":"
                               "\"%lld\"}],\"success\":[{\"%s\":{\"key\":\"",
                               target, strcmp(target, "MOD") == 0 ? "mod"
                                                                  : "create",
                               (long long)rev,
                               value != NULL ? "request_put"
                                             : "request_delete_range") ||
        dlock__etcd_buf_b64(&es->body, es->aux, es->aux_len) ||
        (value != NULL &&
         (dlock__etcd_buf_printf(&es->body, "\",\"value\":\"") ||
          dlock__etcd_buf_b64(&es->body, value, strlen(value)))) ||
        dlock__etcd_buf_printf(&es->body, "\"}}]}"))
        return nomem(es);
    if ((rc = dlock__etcd_post(es, "/v3/kv/txn", io, &r, NULL)) != DLOCK_OK)
        return rc;
    *done = json_object_get_boolean(dlock__etcd_get(r, "succeeded"));
    json_object_put(r);
    return DLOCK_OK;
}

/* set (down 0) or down (set 0): *before is the count before it. */
static int latch_step(struct dlock_session *s, const char *name, size_t len,
                      uint32_t set, uint32_t *before)
{
    struct etcd_session *es = (struct etcd_session *)s;
    int64_t io = dlock_now_ms() + es->x->timeout_ms, mod;
    char text[16];
    int rc, done = 0;

    latch_key(es, name, len);
    for (int tries = 0; tries < ETCD_LATCH_TRIES; tries++) {
        if ((rc = latch_read(es, before, &mod, io)) != DLOCK_OK)
            return rc;
        if ((set > 0 && *before > 0) || (set == 0 && *before == 0))
            return DLOCK_OK;
        snprintf(text, sizeof text, "%u", set > 0 ? set : *before - 1);
        if (set > 0)
            rc = latch_txn(es, mod == 0 ? "CREATE" : "MOD", mod == 0 ? 0 : mod,
                           text, &done, io);
        else
            rc = latch_txn(es, "MOD", mod, *before == 1 ? NULL : text, &done,
                           io);
        if (rc != DLOCK_OK || done)
            return rc;
    }
    return dlock__etcd_fail(es, DLOCK_ERROR,
                            "the latch changed under %d attempts in a row",
                            ETCD_LATCH_TRIES);
}

static int etcd_latch_set(struct dlock_session *s, const char *name,
                          size_t len, uint32_t count, uint32_t *current)
{
    return latch_step(s, name, len, count, current);
}

static int etcd_latch_down(struct dlock_session *s, const char *name,
                           size_t len, uint32_t *left)
{
    int rc = latch_step(s, name, len, 0, left);

    if (rc == DLOCK_OK && *left > 0)
        (*left)--;
    return rc;
}

static int etcd_latch_count(struct dlock_session *s, const char *name,
                            size_t len, uint32_t *count)
{
    struct etcd_session *es = (struct etcd_session *)s;
    int64_t mod;

    latch_key(es, name, len);
    return latch_read(es, count, &mod, dlock_now_ms() + es->x->timeout_ms);
}

/* Look; while counting, watch the key's deletion (the watch checks the
 * key once it is set up, so a deletion in between is not missed). */
static int etcd_latch_await(struct dlock_session *s, const char *name,
                            size_t len, int64_t deadline_ms)
{
    struct etcd_session *es = (struct etcd_session *)s;
    uint32_t count;
    int64_t now, mod, wake;
    int rc;

    latch_key(es, name, len);
    for (;;) {
        now = dlock_now_ms();
        rc = latch_read(es, &count, &mod, now + es->x->timeout_ms);
        if (rc != DLOCK_OK || count == 0)
            return rc;
        if (now >= deadline_ms)
            return DLOCK_ETIMEDOUT; /* core says so */
        wake = now + ETCD_LATCH_RECHECK_MS;
        rc = dlock__etcd_watch_delete(es, es->aux, es->aux_len,
                                      wake < deadline_ms ? wake : deadline_ms);
        if (rc < 0)
            return rc;
        if ((rc = dlock_session_cancelled(s)) != 0)
            return rc;
    }
}

const struct dlock_latch_ops dlock__etcd_latch = {
    .set = etcd_latch_set,
    .down = etcd_latch_down,
    .count = etcd_latch_count,
    .await = etcd_latch_await,
};
