/*
 * floor.c: the raw floor of `dlock bench` for every mode: blocking libpq,
 * pipeline mode, the same statements as one dlock cycle, timed: what the
 * protocol costs with no dlock in the loop. Bench-only code.
 *
 * Each mode's file says which statements make its cycle (a plan); this file
 * connects, creates the schema, and runs the plan n times.
 */
#include <stdio.h>
#include <string.h>

#include "pg.h"

/* Send nq statements and a Sync, read to the Sync; *last is the first
 * result of the last statement (the caller clears it). -1 if a statement
 * failed or the connection broke. */
static int floor_run(PGconn *c, const struct pg_q *q, int nq, PGresult **last)
{
    int qi = 0, bad = 0;

    *last = NULL;
    for (int i = 0; i < nq; i++)
        if (!PQsendQueryParams(c, q[i].sql, q[i].n, NULL, q[i].v, NULL, NULL,
                               0))
            return -1;
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
        if (qi == nq - 1 && *last == NULL)
            *last = r;
        else
            PQclear(r);
    }
    return bad ? -1 : 0;
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
    }
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        bool got;

        rc = floor_run(c, p.take, p.ntake, &r);
        got = rc == 0 && r != NULL && PQntuples(r) > 0 &&
              !PQgetisnull(r, 0, 0);
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
            rc = floor_run(c, &p.give, 1, &r);
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
