/*
 * schema.c: creating a mode's table (and sequence) on first use, and
 * dlock__pg_run, the statement runner the modes call, which does it when a
 * statement finds its table missing.
 *
 * The CREATE statements are the mode's (struct pg_mode's ddl, printed by
 * conf.c), or the latches' table (latch.c); running them is conn.c's.
 */
#include <string.h>

#include "pg.h"

/* The (int4, int4) advisory key that serialises CREATE ... IF NOT EXISTS
 * across clients ("dloc", "kddl"); user locks use the bigint key space,
 * which PostgreSQL keeps apart from this one. */
#define PG_DDL_KEY "1684828003, 1801741420"

/* The DDL lock, then the NULL-terminated statements of ddl, into q. */
static int ddl_q(const char *const *ddl, struct pg_q *q)
{
    int nq = 0;

    q[nq++] = (struct pg_q){"SELECT pg_advisory_xact_lock(" PG_DDL_KEY ")",
                            0, {NULL}};
    for (int i = 0; i < PG_DDL_MAX && ddl[i] != NULL; i++)
        q[nq++] = (struct pg_q){ddl[i], 0, {NULL}};
    return nq;
}

int dlock__pg_schema_q(const struct pg_conf *cf, struct pg_q *q)
{
    return ddl_q((const char *const *)cf->ddl, q);
}

/*
 * Concurrent first uses must not fail, but two CREATE TABLE IF NOT EXISTS
 * running at once can: both see no table, and the second fails on
 * pg_type's unique index (23505) when the first commits. An advisory
 * transaction lock serialises dlock's own clients; anyone else creating the
 * table at the same moment shows up as that error (or 42P07), which means
 * the table now exists: go again, and IF NOT EXISTS skips what is there.
 */
static int pg_ensure_schema(struct pg_session *s, const char *const *ddl,
                            const char *what, int64_t deadline)
{
    struct pg_q q[PG_DDL_MAX + 1];
    struct pg_res res;
    int nq = ddl_q(ddl, q), rc = DLOCK_OK;

    for (int attempt = 0; attempt < 3; attempt++) {
        rc = dlock__pg_exec(s, q, nq, deadline, &res);
        if (rc == PG_SQLERR && (strcmp(res.state, "23505") == 0 ||
                                strcmp(res.state, "42P07") == 0)) {
            dlock__pg_res_clear(&res);
            continue; /* created by someone else just now */
        }
        if (rc == PG_SQLERR)
            rc = dlock__pg_sqlfail(s, DLOCK_ERROR, what, &res);
        dlock__pg_res_clear(&res);
        return rc;
    }
    return dlock_session_error(&s->base, DLOCK_ERROR,
                               "%s: it kept being created concurrently",
                               what);
}

/* Besides dlock__pg_exec's results, a failure to create the table comes
 * back as its DLOCK_ code: callers return any negative result. */
int dlock__pg_run(struct pg_session *s, const struct pg_q *q, int nq,
                  int64_t deadline, struct pg_res *res)
{
    return dlock__pg_run_ddl(s, (const char *const *)s->cf->ddl,
                             "creating the lock table", q, nq, deadline, res);
}

int dlock__pg_run_ddl(struct pg_session *s, const char *const *ddl,
                      const char *what, const struct pg_q *q, int nq,
                      int64_t deadline, struct pg_res *res)
{
    int rc = dlock__pg_exec(s, q, nq, deadline, res);

    /* 42P01: no table; 42703: a column added since it was made. */
    if (rc != PG_SQLERR ||
        (strcmp(res->state, "42P01") != 0 && strcmp(res->state, "42703") != 0))
        return rc;
    dlock__pg_res_clear(res);
    dlock__pg_rollback(s);
    if ((rc = pg_ensure_schema(s, ddl, what, deadline)) != DLOCK_OK)
        return rc;
    return dlock__pg_exec(s, q, nq, deadline, res);
}
