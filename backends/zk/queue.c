/*
 * queue.c: reading a lock's queue, the children of its node. A contender's
 * place is the sequence number ZooKeeper appended to its node's name; a
 * reader is a node whose name says __READ__ (both modes' reader names do,
 * as Curator's do). From one listing: our own node (by the uuid in its
 * name), the nodes ahead of it that we must wait for, the nearest of them
 * (the one to watch), and for inspect who holds. Pure functions over the
 * list; the listing itself is call.c's, which runs dlock__zk_scan() in the
 * completion.
 *
 * Divisions: node names; a listing.
 */
#include <stdio.h>
#include <string.h>

#include "zk.h"

/* ---- node names --------------------------------------------------------- */

/* The sequence number: the last 10 characters, all digits (ZooKeeper
 * appends %010d). Nodes without one are not contenders and are ignored. */
int dlock__zk_seq_of(const char *name, size_t len, int64_t *seq)
{
    int64_t v = 0;

    if (len <= 10)
        return 0;
    for (size_t i = len - 10; i < len; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        v = v * 10 + (name[i] - '0');
    }
    *seq = v;
    return 1;
}

static int zk_is_reader(const char *name)
{
    return strstr(name, "__READ__") != NULL;
}

static void zk_keep(char *dst, const char *src)
{
    snprintf(dst, ZK_NODE_MAX, "%s", src);
}

/* ---- a listing ---------------------------------------------------------- */

/*
 * Runs in the completion (under conn->mu), on the C client's own copy of
 * the list, so the list is neither copied nor sorted: one pass finds our
 * node (by the uuid, the lowest if a lost create was sent twice), one more
 * finds who is ahead of it. For inspect (no uuid), the lowest node and how
 * many hold the lock. O(children).
 */
void dlock__zk_scan(struct zk_scan *sc, const char *guid, int shared,
                    const struct String_vector *v)
{
    char mine[3 + ZK_GUID_LEN + 2] = "";
    size_t mlen = 0;
    int64_t seq, pred_seq = -1, first_seq = -1, last_seq = -1,
                 first_writer = -1;

    if (guid[0] != '\0')
        mlen = (size_t)snprintf(mine, sizeof mine, "_c_%s-", guid);
    sc->children = v->count; /* what Curator's semaphore counts */
    for (int32_t i = 0; i < v->count; i++) {
        const char *n = v->data[i];
        if (strcmp(n, ZK_SEM_LEASES + 1) == 0)
            sc->semaphore = 1; /* a semaphore's node (semaphore.c) */
        if (!dlock__zk_seq_of(n, strlen(n), &seq))
            continue;
        sc->total++;
        if (first_seq < 0 || seq < first_seq) {
            first_seq = seq;
            zk_keep(sc->first, n);
        }
        if (seq > last_seq) {
            last_seq = seq;
            zk_keep(sc->last, n);
        }
        if (!zk_is_reader(n) && (first_writer < 0 || seq < first_writer))
            first_writer = seq;
        if (mlen == 0 || strncmp(n, mine, mlen) != 0)
            continue;
        if (sc->found && seq > sc->self_seq) {
            if (sc->ndups < ZK_DUPS_MAX)
                zk_keep(sc->dups[sc->ndups++], n);
            continue;
        }
        if (sc->found && sc->ndups < ZK_DUPS_MAX)
            zk_keep(sc->dups[sc->ndups++], sc->self);
        sc->found = 1;
        sc->self_seq = seq;
        zk_keep(sc->self, n);
    }
    /* Inspect: a writer first holds alone; readers before the first writer
     * hold together. */
    if (sc->total > 0) {
        if (!zk_is_reader(sc->first))
            sc->holders = 1;
        else
            for (int32_t i = 0; i < v->count; i++) {
                const char *n = v->data[i];
                if (dlock__zk_seq_of(n, strlen(n), &seq) && zk_is_reader(n) &&
                    (first_writer < 0 || seq < first_writer))
                    sc->holders++;
            }
    }
    if (!sc->found)
        return;
    for (int32_t i = 0; i < v->count; i++) {
        const char *n = v->data[i];
        if (!dlock__zk_seq_of(n, strlen(n), &seq) || seq >= sc->self_seq ||
            strncmp(n, mine, mlen) == 0)
            continue;
        /* A reader waits only for writers; a writer for everyone. */
        if (shared && zk_is_reader(n))
            continue;
        sc->blocked++;
        if (seq > pred_seq) {
            pred_seq = seq;
            zk_keep(sc->pred, n);
        }
    }
}
