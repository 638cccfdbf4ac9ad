/*
 * inspect.c: describing a name without taking it. The frame every mode's
 * inspect shares (run the mode's inspect statement for the name's key), and
 * the whole inspect of both advisory modes, which look at pg_locks
 * (DLOCK__PG_LOCKS_INSPECT in pg.h), permit holders included. The row
 * modes read their own rows in their files (tx.c, lease.c).
 *
 * And where the owner id inspect shows comes from in the connection-bound
 * modes: pg_locks (and pg_stat_activity) know only the server process
 * that holds a lock, which holds the locks of many handles. So each
 * connection records, in its mode's unlogged owner table, one row per
 * (server process, key): the owner id of the handle it last locked the key
 * for ("" when shared). inspect joins it to the process holding the lock.
 * A row is written only when it changes, which a handle that takes its
 * lock again over the same connection never does: the acquire then writes
 * nothing but the lock and its fence (fence.c). Mode advisory's
 * connections remember the rows they wrote (struct pg_session's owners,
 * dlock__pg_owner_q below: its session locks cannot pass a transaction
 * pooler, so only this connection writes its process's rows) and clear,
 * before their first, the rows a process that ended left under the same
 * pid. The tx modes keep no rows: their lock's transaction names its
 * holder in its server process's application_name (tx.c).
 * A row is only ever read beside a lock held by its process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

int dlock__pg_inspect(struct dlock_session *ds, const char *name,
                      size_t len, dlock_state *out,
                      void (*read)(const PGresult *r, dlock_state *out))
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    char key[65];
    struct pg_q q;
    struct pg_res res;
    int rc;

    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    dlock__pg_name_key(cf, name, len, key);
    q = (struct pg_q){cf->inspect, 1, {key}};
    rc = dlock__pg_run(s, &q, 1, dlock__pg_deadline(cf), &res);
    if (rc == PG_SQLERR)
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "inspect", &res);
    if (rc == DLOCK_OK)
        read(res.r[0], out);
    dlock__pg_res_clear(&res);
    return rc;
}

void dlock__pg_permits_read(const char *list, const char *what,
                            dlock_state *out)
{
    int n = 1;

    for (const char *p = list; *p != '\0'; p++)
        n += *p == ' ';
    out->held = 1;
    out->waiters = -1; /* permit waiters LISTEN: the server cannot count
                          them */
    snprintf(out->owner, sizeof out->owner, "(%d permit holder%s%s: %s)", n,
             n > 1 ? "s" : "", what, list);
}

/* Holders, waiters, the exclusive holder's owner id, the fence
 * (DLOCK__PG_LOCKS_INSPECT), and in mode advisory the permit holders. */
static void locks_read(const PGresult *r, dlock_state *out)
{
    long granted = atol(PQgetvalue(r, 0, 0));

    if (!PQgetisnull(r, 0, 3))
        out->fence = dlock__pg_u64(r, 0, 3);
    if (PQnfields(r) > 4 && !PQgetisnull(r, 0, 4)) {
        /* pg_locks knows server processes, not dlock's owner ids */
        dlock__pg_permits_read(PQgetvalue(r, 0, 4), ", server pids", out);
        return;
    }
    out->held = granted > 0;
    out->waiters = atoi(PQgetvalue(r, 0, 1));
    if (granted > 0 && PQgetisnull(r, 0, 2))
        snprintf(out->owner, sizeof out->owner, "(%ld shared holder%s)",
                 granted, granted > 1 ? "s" : "");
    else if (granted == 1)
        snprintf(out->owner, sizeof out->owner, "%s", PQgetvalue(r, 0, 2));
}

int dlock__pg_inspect_locks(struct dlock_session *ds, const char *name,
                            size_t len, dlock_state *out)
{
    return dlock__pg_inspect(ds, name, len, out, locks_read);
}

/* ---- owner ids ----------------------------------------------------------- */

/* The slot of key in the connection's memory of its rows. */
static struct pg_owner_seen *owner_slot(struct pg_session *s,
                                        const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (const char *p = key; *p != '\0'; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return &s->owners[h % PG_OWNERS_SEEN];
}

int dlock__pg_owner_q(struct pg_session *s, const char *const sql[2],
                      const char *key, const char *owner, struct pg_q *q)
{
    const struct pg_owner_seen *o = owner_slot(s, key);
    int nq = 0;

    if (o->gen == s->gen && strcmp(o->key, key) == 0 &&
        strcmp(o->owner, owner) == 0)
        return 0;
    if (s->owners_gen != s->gen)
        q[nq++] = (struct pg_q){sql[0], 0, {NULL}};
    q[nq++] = (struct pg_q){sql[1], 2, {key, owner}};
    return nq;
}

void dlock__pg_owner_noted(struct pg_session *s, const char *key,
                           const char *owner)
{
    struct pg_owner_seen *o = owner_slot(s, key);

    s->owners_gen = s->gen;
    /* Too long to remember (owner ids are shorter): written every time. */
    if (strlen(key) >= sizeof o->key || strlen(owner) >= sizeof o->owner) {
        o->gen = 0;
        return;
    }
    o->gen = s->gen;
    strcpy(o->key, key);
    strcpy(o->owner, owner);
}
