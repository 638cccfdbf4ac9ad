/*
 * inspect.c: describing a name without taking it. The frame every mode's
 * inspect shares (run the mode's inspect statement for the name's key), and
 * the whole inspect of both advisory modes, which look at pg_locks
 * (DLOCK__PG_LOCKS_INSPECT in pg.h). The row modes read their own rows in
 * their files (tx.c, lease.c).
 */
#include <stdio.h>
#include <stdlib.h>

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

/* Holders, waiters, the exclusive holder's owner id, the fence
 * (DLOCK__PG_LOCKS_INSPECT). */
static void locks_read(const PGresult *r, dlock_state *out)
{
    long granted = atol(PQgetvalue(r, 0, 0));

    out->held = granted > 0;
    out->waiters = atoi(PQgetvalue(r, 0, 1));
    if (granted > 0 && PQgetisnull(r, 0, 2))
        snprintf(out->owner, sizeof out->owner, "(%ld shared holder%s)",
                 granted, granted > 1 ? "s" : "");
    else if (granted == 1)
        snprintf(out->owner, sizeof out->owner, "%s", PQgetvalue(r, 0, 2));
    if (!PQgetisnull(r, 0, 3))
        out->fence = dlock__pg_u64(r, 0, 3);
}

int dlock__pg_inspect_locks(struct dlock_session *ds, const char *name,
                            size_t len, dlock_state *out)
{
    return dlock__pg_inspect(ds, name, len, out, locks_read);
}
