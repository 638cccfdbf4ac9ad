/*
 * floor.c: what `dlock bench` measures below dlock, for every mode, and
 * its clean-up: blocking libpq, pipeline mode, no dlock in the loop.
 * Bench-only code.
 *
 * The floor is the bare lock, as a user of libpq alone takes and releases
 * that kind of lock, without dlock's fence (bare_plan below), each
 * statement prepared once before the clock starts (dlock's modes prepare
 * theirs too: conn.c), so neither side parses or plans per call:
 *   advisory       SELECT pg_try_advisory_lock($1), then
 *                  SELECT pg_advisory_unlock($1): one round trip each;
 *   advisory_xact  BEGIN + SELECT pg_try_advisory_xact_lock($1) in one
 *                  round trip, then COMMIT;
 *   for_update     BEGIN + SELECT 1 FROM the row FOR UPDATE NOWAIT, then
 *                  COMMIT (the row made once, before the clock);
 *   lease          still the mode's own plan (lease.c): the lease row is
 *                  the lock itself, there is no bare library lock to
 *                  compare with, and its fence is a column of the claim.
 * The fence alone (dlock__pg_fence_floor), as dlock draws it (fence.c):
 * nextval() of the unlogged sequence, which the lock's statement draws in
 * the modes but advisory's; lease has none apart. And dlock__pg_forget,
 * the bench's clean-up: each name's owner rows and lock row. The
 * contended floor (dlock__pg_floor_wait): the same locks taken with the
 * statement that waits in the server's lock queue (pg_advisory_lock,
 * pg_advisory_xact_lock, FOR UPDATE without NOWAIT), in many processes
 * at once.
 */
#include <stdio.h>
#include <string.h>

#include "pg.h"

/* After nq statements: a Sync, and the results read up to it; *last (if
 * not NULL) is the first result of the last statement (the caller clears
 * it). -1 if a statement failed or the connection broke. */
static int floor_sync(PGconn *c, int nq, PGresult **last)
{
    int qi = 0, bad = 0;

    if (last != NULL)
        *last = NULL;
    if (!PQpipelineSync(c))
        return -1;
    for (;;) {
        PGresult *r = PQgetResult(c);
        if (r == NULL) {
            if (++qi > nq || PQstatus(c) != CONNECTION_OK)
                return -1;
            continue;
        }
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (PQresultStatus(r) == PGRES_FATAL_ERROR)
            bad = 1;
        if (last != NULL && qi == nq - 1 && *last == NULL)
            *last = r;
        else
            PQclear(r);
    }
    return bad ? -1 : 0;
}

/* Send nq statements, then floor_sync. Statement i runs as the prepared
 * statement names[i] when names is not NULL (floor_prepare). */
static int floor_send(PGconn *c, const struct pg_q *q, int nq,
                      const char *const *names, PGresult **last)
{
    *last = NULL;
    for (int i = 0; i < nq; i++)
        if (!(names != NULL
                  ? PQsendQueryPrepared(c, names[i], q[i].n, q[i].v, NULL,
                                        NULL, 0)
                  : PQsendQueryParams(c, q[i].sql, q[i].n, NULL, q[i].v,
                                      NULL, NULL, 0)))
            return -1;
    return floor_sync(c, nq, last);
}

static int floor_run(PGconn *c, const struct pg_q *q, int nq, PGresult **last)
{
    return floor_send(c, q, nq, NULL, last);
}

/* Prepare nq statements as names[0..nq) ("f<base + i>"), as dlock's
 * modes prepare theirs (conn.c) and as a careful libpq user would: the
 * floor is the bare lock at its best, without parse and plan per call.
 * -1 if one failed. */
#define FLOOR_NAME 8
static int floor_prepare(PGconn *c, const struct pg_q *q, int nq, int base,
                         char (*buf)[FLOOR_NAME], const char **names)
{
    for (int i = 0; i < nq; i++) {
        snprintf(buf[i], FLOOR_NAME, "f%d", base + i);
        names[i] = buf[i];
        if (!PQsendPrepare(c, names[i], q[i].sql, q[i].n, NULL))
            return -1;
    }
    return floor_sync(c, nq, NULL);
}

int dlock__pg_floor(const struct dlock_uri *uri, const struct pg_mode *mode,
                    void (*plan)(const struct pg_conf *cf,
                                 const struct pg_floor_keys *k,
                                 struct pg_floor_plan *p),
                    const char *name, uint32_t n, uint64_t *ns_out,
                    char *err, size_t errlen)
{
    struct pg_conf conf;
    const struct pg_conf *cf = &conf;
    char key[24], hex[65], chan[24], ms[16], line[512];
    struct pg_floor_keys k = {name, "00000000-0000-4000-8000-000000000000:1",
                              key, hex, chan, ms};
    struct pg_floor_plan p = {.nsetup = 0};
    char nbuf[sizeof p.take / sizeof p.take[0] + 1][FLOOR_NAME];
    const char *take_names[sizeof p.take / sizeof p.take[0]], *give_name[1];
    uint8_t d[32];
    PGconn *c;
    PGresult *r = NULL;
    int rc;

    if ((rc = dlock__pg_conf_init(&conf, uri, mode, err, errlen)) !=
        DLOCK_OK)
        return rc;
    c = dlock__pg_connect_raw(cf, dlock__pg_deadline(cf), err, errlen, &rc);
    if (c == NULL) {
        dlock__pg_conf_free(&conf);
        return rc;
    }
    PQenterPipelineMode(c);
    dlock__pg_digest(cf, name, strlen(name), d);
    dlock__pg_hex(hex, d);
    dlock__pg_key_text(key, dlock__pg_key64(d));
    dlock__pg_channel_name(chan, dlock__pg_key64(d));
    snprintf(ms, sizeof ms, "%u", cf->lease_ms);
    plan(cf, &k, &p);

    /* Set-up outside the timing: the schema, then the plan's (a lock row).
     * floor_run's -1 (a failed statement) is turned into a message at the
     * end. */
    {
        struct pg_q q[PG_DDL_MAX + 1];
        rc = floor_run(c, q, dlock__pg_schema_q(cf, q), &r);
        PQclear(r);
        if (rc == 0 && p.nsetup > 0) {
            rc = floor_run(c, p.setup, p.nsetup, &r);
            PQclear(r);
        }
        if (rc == 0)
            rc = floor_prepare(c, p.take, p.ntake, 0, nbuf, take_names);
        if (rc == 0)
            rc = floor_prepare(c, &p.give, 1, p.ntake, nbuf + p.ntake,
                               give_name);
    }
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        bool got;

        rc = floor_send(c, p.take, p.ntake, take_names, &r);
        /* a row, not NULL, and not pg_try_advisory_lock's false */
        got = rc == 0 && r != NULL && PQntuples(r) > 0 &&
              !PQgetisnull(r, 0, 0) && strcmp(PQgetvalue(r, 0, 0), "f") != 0;
        PQclear(r);
        if (rc == 0 && !got) {
            dlock__pg_oneline(line, sizeof line, name);
            PQfinish(c);
            dlock__pg_conf_free(&conf);
            return dlock_errorf(err, errlen, DLOCK_EBUSY,
                                "floor: '%s' is held by someone else", line);
        }
        r = NULL;
        if (rc == 0)
            rc = floor_send(c, &p.give, 1, give_name, &r);
        PQclear(r);
        ns_out[i] = dlock_now_ns() - t0;
    }
    if (rc == -1) {
        dlock__pg_oneline(line, sizeof line, PQerrorMessage(c));
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: %s",
                          line[0] ? line : "a statement failed");
    }
    PQfinish(c);
    dlock__pg_conf_free(&conf);
    return rc;
}

/* ---- the bare lock ------------------------------------------------------ */

/* for_update's row statements, with the table's name printed in (it was
 * validated, [A-Za-z0-9_], so quoting it is enough). */
struct fu_sql {
    char make[256], take[160];
};

static struct fu_sql fu_sql_of(const struct pg_conf *cf)
{
    struct fu_sql q;

    snprintf(q.make, sizeof q.make,
             "INSERT INTO \"%s\" (key, namespace, name)"
             " VALUES (decode($1, 'hex'), $2, $3) ON CONFLICT (key) DO NOTHING",
             cf->table);
    snprintf(q.take, sizeof q.take,
             "SELECT 1 FROM \"%s\" WHERE key = decode($1, 'hex')"
             " FOR UPDATE NOWAIT",
             cf->table);
    return q;
}

/* The statements a libpq user sends for the mode's kind of lock; the
 * file's header says which and why. */
static void bare_plan(const struct pg_conf *cf, const struct pg_floor_keys *k,
                      struct pg_floor_plan *p)
{
    /* The plan points into it while the floor runs: one per thread. */
    static _Thread_local struct fu_sql fu;
    const char *mode = cf->mode->pub.name;

    if (strcmp(mode, "advisory") == 0) {
        p->take[p->ntake++] = (struct pg_q){
            "SELECT pg_try_advisory_lock($1::bigint)", 1, {k->key}};
        p->give = (struct pg_q){"SELECT pg_advisory_unlock($1::bigint)", 1,
                                {k->key}};
        return;
    }
    p->take[p->ntake++] = (struct pg_q){"BEGIN", 0, {NULL}};
    if (cf->mode->row_key) {
        fu = fu_sql_of(cf);
        p->setup[p->nsetup++] =
            (struct pg_q){fu.make, 3, {k->hex, cf->ns, k->name}};
        p->take[p->ntake++] = (struct pg_q){fu.take, 1, {k->hex}};
    } else {
        p->take[p->ntake++] = (struct pg_q){
            "SELECT pg_try_advisory_xact_lock($1::bigint)", 1, {k->key}};
    }
    p->give = (struct pg_q){"COMMIT", 0, {NULL}};
}

int dlock__pg_floor_bare(const struct dlock_uri *uri,
                         const struct pg_mode *mode, const char *name,
                         uint32_t n, uint64_t *ns_out, char *err,
                         size_t errlen)
{
    return dlock__pg_floor(uri, mode, bare_plan, name, n, ns_out, err,
                           errlen);
}

/* ---- the fence alone, and forget ----------------------------------------- */

static int side_fail(PGconn *c, struct pg_conf *cf, const char *what,
                     char *err, size_t errlen);

/* A connection in pipeline mode with the mode's schema made, for mode
 * (the base of a struct pg_mode). NULL with err written. */
static PGconn *side_open(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, struct pg_conf *cf,
                         char *err, size_t errlen, int *rc)
{
    const struct pg_mode *m = (const struct pg_mode *)mode;
    struct pg_q q[PG_DDL_MAX + 1];
    PGresult *r = NULL;
    PGconn *c;

    if ((*rc = dlock__pg_conf_init(cf, uri, m, err, errlen)) != DLOCK_OK)
        return NULL;
    c = dlock__pg_connect_raw(cf, dlock__pg_deadline(cf), err, errlen, rc);
    if (c == NULL) {
        dlock__pg_conf_free(cf);
        return NULL;
    }
    PQenterPipelineMode(c);
    if (floor_run(c, q, dlock__pg_schema_q(cf, q), &r) != 0) {
        *rc = side_fail(c, cf, "schema", err, errlen);
        PQclear(r);
        return NULL;
    }
    PQclear(r);
    return c;
}

/* Report the connection's error as what failed, and close. */
static int side_fail(PGconn *c, struct pg_conf *cf, const char *what,
                     char *err, size_t errlen)
{
    char line[512];
    int rc;

    dlock__pg_oneline(line, sizeof line, PQerrorMessage(c));
    rc = dlock_errorf(err, errlen, DLOCK_ERROR, "%s: %s", what,
                      line[0] ? line : "a statement failed");
    PQfinish(c);
    dlock__pg_conf_free(cf);
    return rc;
}

int dlock__pg_fence_floor(const struct dlock_mode *mode,
                          const struct dlock_uri *uri, const char *name,
                          uint32_t n, uint64_t *ns_out, char *err,
                          size_t errlen)
{
    struct pg_conf cf;
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    (void)name; /* one sequence for every name */
    if (strcmp(mode->name, "lease") == 0)
        return dlock_errorf(err, errlen, DLOCK_EUNSUPPORTED,
                            "fence: mode %s takes its fence in its claim",
                            mode->name);
    if ((c = side_open(mode, uri, &cf, err, errlen, &rc)) == NULL)
        return rc;
    for (uint32_t i = 0; i < n; i++) {
        struct pg_q q = {"SELECT " DLOCK__PG_FENCE_DRAW, 0, {NULL}};
        uint64_t t0 = dlock_now_ns();
        if (floor_run(c, &q, 1, &r) != 0) {
            PQclear(r);
            return side_fail(c, &cf, "fence", err, errlen);
        }
        PQclear(r);
        ns_out[i] = dlock_now_ns() - t0;
    }
    PQfinish(c);
    dlock__pg_conf_free(&cf);
    return DLOCK_OK;
}

/* The names at a time of one forget round trip. */
#define FORGET_BATCH 64

int dlock__pg_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen)
{
    struct pg_conf cf;
    char del[FORGET_BATCH][2][300], key[FORGET_BATCH][65];
    struct pg_q q[FORGET_BATCH * 2];
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    if ((c = side_open(mode, uri, &cf, err, errlen, &rc)) == NULL)
        return rc;
    for (size_t at = 0; at < n; at += FORGET_BATCH) {
        int nq = 0;
        for (size_t i = at; i < n && i < at + FORGET_BATCH; i++) {
            size_t j = i - at;
            uint8_t d[32];
            bool rows = cf.mode->row_key;
            bool adv = strcmp(mode->name, "advisory") == 0;
            bool lease = strcmp(mode->name, "lease") == 0;

            dlock__pg_digest(&cf, names[i], strlen(names[i]), d);
            dlock__pg_digest_key(&cf, d, key[j]);
            /* The lock's own row, or advisory's owner rows. A lease row
             * only when free: the bench's names are its own, but a lease
             * outlives its holder's exit. */
            if (rows || adv || lease) {
                snprintf(del[j][0], sizeof del[j][0],
                         "DELETE FROM \"%s\" WHERE key = %s%s", cf.table,
                         rows ? "decode($1, 'hex')" : "$1",
                         lease ? " AND (owner = '' OR expires_at <= now())"
                               : "");
                q[nq++] = (struct pg_q){del[j][0], 1, {key[j]}};
            }
            /* The tx modes' owner rows, which earlier versions wrote
             * (tx.c). */
            if (!adv && !lease)
                q[nq++] = (struct pg_q){
                    "DELETE FROM dlock_owners WHERE key = $1", 1, {key[j]}};
        }
        if (nq > 0 && floor_run(c, q, nq, &r) != 0) {
            PQclear(r);
            return side_fail(c, &cf, "forget", err, errlen);
        }
        PQclear(r);
        r = NULL;
    }
    PQfinish(c);
    dlock__pg_conf_free(&cf);
    return DLOCK_OK;
}

/* ---- the contended floor --------------------------------------------------- */

/* The bare lock's waiting statements, one round trip each (simple query
 * protocol; the key is dlock's own hash, the table a checked name, so
 * printing them in is safe): the server queues the waiters itself. */
struct wait_sql {
    char take[256], give[64];
    bool tx; /* take opens a transaction, which give commits */
};

static bool wait_sql_of(const struct pg_conf *cf, const char *key,
                        const char *hex, struct wait_sql *w)
{
    const char *mode = cf->mode->pub.name;

    if (strcmp(mode, "advisory") == 0) {
        snprintf(w->take, sizeof w->take,
                 "SELECT pg_advisory_lock(%s::bigint)", key);
        snprintf(w->give, sizeof w->give,
                 "SELECT pg_advisory_unlock(%s::bigint)", key);
        w->tx = false;
    } else if (strcmp(mode, "advisory_xact") == 0) {
        snprintf(w->take, sizeof w->take,
                 "BEGIN; SELECT pg_advisory_xact_lock(%s::bigint)", key);
        snprintf(w->give, sizeof w->give, "COMMIT");
        w->tx = true;
    } else if (cf->mode->row_key) {
        snprintf(w->take, sizeof w->take,
                 "BEGIN; SELECT 1 FROM \"%s\" WHERE key = decode('%s', 'hex')"
                 " FOR UPDATE",
                 cf->table, hex);
        snprintf(w->give, sizeof w->give, "COMMIT");
        w->tx = true;
    } else
        return false;
    return true;
}

/* One statement; 0 if it ran, 1 if the wait gave up (lock_timeout), -1
 * if it failed otherwise. */
static int wait_exec(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    int rc = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK ? 0
             : state != NULL && strcmp(state, "55P03") == 0 ? 1
                                                             : -1;

    PQclear(r);
    return rc;
}

int dlock__pg_floor_wait(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen)
{
    struct pg_conf cf;
    struct wait_sql w;
    char key[24], hex[65], ms[24];
    uint8_t d[32];
    PGresult *r = NULL;
    PGconn *c;
    int rc, st = 0;

    if ((c = side_open(mode, uri, &cf, err, errlen, &rc)) == NULL)
        return rc;
    dlock__pg_digest(&cf, name, strlen(name), d);
    dlock__pg_hex(hex, d);
    dlock__pg_key_text(key, dlock__pg_key64(d));
    if (!wait_sql_of(&cf, key, hex, &w)) {
        PQfinish(c);
        dlock__pg_conf_free(&cf);
        return dlock_errorf(err, errlen, DLOCK_EUNSUPPORTED,
                            "floor_wait: mode %s has no waiting statement",
                            mode->name);
    }
    /* Outside the loop: the row to lock (for_update), then the wait's
     * bound for the whole session. */
    if (cf.mode->row_key) {
        struct fu_sql fu = fu_sql_of(&cf);
        struct pg_q q = {fu.make, 3, {hex, cf.ns, name}};
        st = floor_run(c, &q, 1, &r);
        PQclear(r);
    }
    if (st == 0 && PQexitPipelineMode(c) != 1)
        st = -1;
    snprintf(ms, sizeof ms, "SET lock_timeout = %u", wait_ms);
    if (st == 0)
        st = wait_exec(c, ms);
    while (st >= 0) {
        if ((st = wait_exec(c, w.take)) == 1) {
            /* gave up: end the failed transaction, if any */
            if (w.tx && wait_exec(c, "ROLLBACK"))
                st = -1;
            else if (!go_on(arg, 0))
                break;
            continue;
        }
        if (st == 0) {
            int more = go_on(arg, 1);
            st = wait_exec(c, w.give);
            if (!more)
                break;
        }
    }
    rc = st < 0 ? side_fail(c, &cf, "floor_wait", err, errlen) : DLOCK_OK;
    if (st >= 0) {
        PQfinish(c);
        dlock__pg_conf_free(&cf);
    }
    return rc;
}
