/*
 * keys.c: the buffers a name's keys are made in, and a script's EVALSHA
 * command built from those keys. How a mode lays out its keys is the
 * mode's (setnx.c, hash.c); which script runs and what it answers is the
 * caller's. Divisions: buffers; a request's keys; script commands.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd.h"

/* ---- buffers ----------------------------------------------------------------- */

int dlock__rd_buf_reserve(struct dlock__rd_buf *b, size_t want)
{
    if (want <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 512;
    while (cap < want)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int dlock__rd_buf_set(struct dlock__rd_buf *b, const char *a, size_t alen,
                      const char *m, size_t mlen, const char *z, size_t zlen)
{
    if (dlock__rd_buf_reserve(b, alen + mlen + zlen + 1) != 0)
        return -1;
    memcpy(b->p, a, alen);
    memcpy(b->p + alen, m, mlen);
    memcpy(b->p + alen + mlen, z, zlen);
    b->len = alen + mlen + zlen;
    b->p[b->len] = '\0';
    return 0;
}

int dlock__rd_prefix_name(struct dlock__rd_buf *b, const char *prefix,
                          const char *name, size_t len)
{
    size_t plen = strlen(prefix);
    if (memchr(name, '{', len) != NULL) /* the name has its own tag */
        return dlock__rd_buf_set(b, prefix, plen, ":", 1, name, len);
    if (dlock__rd_buf_set(b, prefix, plen, ":{", 2, name, len) != 0 ||
        dlock__rd_buf_reserve(b, b->len + 2) != 0)
        return -1;
    b->p[b->len++] = '}';
    b->p[b->len] = '\0';
    return 0;
}

void dlock__rd_keys_free(struct dlock__rd_keys *k)
{
    free(k->lock.p);
    free(k->fence.p);
    free(k->channel.p);
    free(k->queue.p);
    free(k->timeouts.p);
    k->lock.p = k->fence.p = k->channel.p = k->queue.p = k->timeouts.p =
        NULL;
    k->lock.cap = k->fence.cap = k->channel.cap = k->queue.cap =
        k->timeouts.cap = 0;
}

/* ---- a request's keys ----------------------------------------------------------- */

int dlock__rd_req_keys(struct dlock__rd_session *rs,
                       const struct dlock_request *req)
{
    struct dlock__rd_keys *k = &rs->keys;

    k->kind = req->kind == DLOCK_KIND_PERMIT   ? "p"
              : req->kind == DLOCK_KIND_SHARED ? "r"
              : rs->cf->prefer_writer          ? "W"
                                               : "w";
    snprintf(k->permits, sizeof k->permits, "%u",
             req->kind == DLOCK_KIND_PERMIT ? req->permits : 1u);
    return rs->m->keys(k, rs->cf, req->name, req->name_len);
}

int dlock__rd_script_of(const struct dlock__rd_keys *k, int which)
{
    if (k->kind == NULL || k->kind[0] != 'p')
        return which;
    switch (which) { /* a permit's own already stays */
    case RD_SC_ACQUIRE:
        return RD_SC_P_ACQUIRE;
    case RD_SC_RELEASE:
        return RD_SC_P_RELEASE;
    case RD_SC_RENEW:
        return RD_SC_P_RENEW;
    default:
        return which;
    }
}

/* ---- script commands ------------------------------------------------------------ */

void dlock__rd_cmd_evalsha(struct dlock__rd_cmd *c,
                           const struct dlock__rd_script *sc, const char *sha,
                           const struct dlock__rd_keys *k, const char *owner,
                           size_t owner_len, const char *lease)
{
    static const char *const digits[] = {"0", "1", "2", "3", "4", "5"};

    c->argv[0] = "EVALSHA", c->lens[0] = 7;
    c->argv[1] = sha, c->lens[1] = 40;
    c->argv[2] = digits[sc->nkeys], c->lens[2] = 1;
    for (int i = 0; i < sc->nargs; i++) {
        const char **a = &c->argv[3 + i];
        size_t *l = &c->lens[3 + i];
        switch (sc->arg[i]) {
        case RD_ARG_LOCK:
            *a = k->lock.p, *l = k->lock.len;
            break;
        case RD_ARG_FENCE:
            *a = k->fence.p, *l = k->fence.len;
            break;
        case RD_ARG_CHANNEL:
            *a = k->channel.p, *l = k->channel.len;
            break;
        case RD_ARG_OWNER:
            *a = owner, *l = owner_len;
            break;
        case RD_ARG_LEASE:
            *a = lease, *l = strlen(lease);
            break;
        case RD_ARG_KIND:
            *a = k->kind != NULL ? k->kind : "w", *l = 1;
            break;
        case RD_ARG_QUEUE:
            *a = k->queue.p, *l = k->queue.len;
            break;
        case RD_ARG_TIMEOUTS:
            *a = k->timeouts.p, *l = k->timeouts.len;
            break;
        case RD_ARG_WAIT:
            *a = k->wait, *l = strlen(k->wait);
            break;
        case RD_ARG_NOW:
            *a = k->now, *l = strlen(k->now);
            break;
        case RD_ARG_PERMITS:
            *a = k->permits, *l = strlen(k->permits);
            break;
        case RD_ARG_NONCE:
            *a = k->nonce, *l = strlen(k->nonce);
            break;
        default: /* RD_ARG_ZERO */
            *a = "0", *l = 1;
            break;
        }
    }
    c->argc = 3 + sc->nargs;
}
