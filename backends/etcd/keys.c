/*
 * keys.c: the bottom of the etcd backend: lock names in keys, how many
 * grants each lease carries (which tells a contender about to wait whether
 * its session's lease is its own, recipe.c), and the leases abandoned
 * after a release failed (lease.c takes no more keys on them).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

size_t dlock__etcd_name_prefix(const struct etcd_ctx *x, char *out,
                               const char *name, size_t len)
{
    size_t n = x->prefix_len, start;

    memcpy(out, x->prefix, n);
    start = n;
    for (size_t i = 0; i < len; i++) {
        if (n - start > ETCD_NAME_ENC_MAX - 3) {
            /* Long: the first bytes, then the hash of the whole name
             * ('~' is escaped in every name, so this form is its own). */
            uint8_t h[32];
            dlock_sha256(h, name, len);
            out[n++] = '~';
            for (size_t j = 0; j < sizeof h; j++)
                n += (size_t)sprintf(out + n, "%02x", h[j]);
            break;
        }
        if (name[i] == '/' || name[i] == '%' || name[i] == '~')
            n += (size_t)sprintf(out + n, "%%%02X", (unsigned char)name[i]);
        else
            out[n++] = name[i];
    }
    out[n++] = '/';
    out[n] = '\0';
    return n;
}

int dlock__etcd_lease_grants(struct etcd_ctx *x, int64_t lease, int delta)
{
    size_t i;
    int n = -1;

    pthread_mutex_lock(&x->mu);
    for (i = 0; i < x->ncounts && x->counts[i].lease != lease; i++)
        ;
    if (i == x->ncounts && delta > 0) {
        if (x->ncounts == x->capcounts) {
            size_t cap = x->capcounts ? 2 * x->capcounts : 8;
            void *p = realloc(x->counts, cap * sizeof *x->counts);
            if (p == NULL)
                goto out;
            x->counts = p;
            x->capcounts = cap;
        }
        x->counts[x->ncounts++] = (struct etcd_lease_count){lease, 0};
    }
    if (i == x->ncounts) {
        n = 0;
        goto out;
    }
    if (delta > 0 || x->counts[i].grants > 0)
        x->counts[i].grants += (uint32_t)delta;
    n = (int)x->counts[i].grants;
    if (n == 0)
        x->counts[i] = x->counts[--x->ncounts];
out:
    pthread_mutex_unlock(&x->mu);
    return n;
}

void dlock__etcd_lease_abandon(struct etcd_ctx *x, int64_t lease)
{
    pthread_mutex_lock(&x->mu);
    x->abandoned[x->nabandoned++ % ETCD_ABANDONED] = lease;
    pthread_mutex_unlock(&x->mu);
}

int dlock__etcd_lease_abandoned(struct etcd_ctx *x, int64_t lease)
{
    int found = 0;

    pthread_mutex_lock(&x->mu);
    for (unsigned i = 0; i < ETCD_ABANDONED && i < x->nabandoned; i++)
        found = found || x->abandoned[i] == lease;
    pthread_mutex_unlock(&x->mu);
    return found;
}
