/*
 * latch.c: count-down latches on PostgreSQL [B-LATCH-1], in every mode. A
 * latch is a row of the table dlock_latches, made on first use as the
 * lease mode's table is (schema.c): no table to create beforehand. Its
 * key is the name's digest (with the namespace), as lease rows'; count
 * is always positive: zero is "no row". set inserts the row unless it is
 * there (ON CONFLICT DO NOTHING) and, in the same round trip, reads what
 * is there. down locks the row (SELECT ... FOR UPDATE, in a transaction),
 * then decrements it, or deletes it at one and NOTIFYs the name's
 * channel, which is delivered at COMMIT. A waiter listens on that
 * channel through the client's LISTEN connection (listen.c), reads the
 * count, and sleeps until a notification (or looks again after
 * PG_LATCH_RECHECK_MS, in case the listener is down).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

#define PG_LATCH_RECHECK_MS 1000
/* set: rounds lost to a row deleted between the insert and the read. */
#define PG_LATCH_TRIES 20

static const char *const latch_ddl[] = {
    "CREATE TABLE IF NOT EXISTS dlock_latches (key bytea PRIMARY KEY,"
    " namespace text NOT NULL, name text NOT NULL,"
    " count integer NOT NULL CHECK (count > 0))",
    NULL,
};

static const char SQL_SET[] =
    "INSERT INTO dlock_latches (key, namespace, name, count)"
    " VALUES (decode($1, 'hex'), $2, $3, $4::integer)"
    " ON CONFLICT (key) DO NOTHING RETURNING 0";
static const char SQL_COUNT[] =
    "SELECT count FROM dlock_latches WHERE key = decode($1, 'hex')";
static const char SQL_LOCK[] =
    "SELECT count FROM dlock_latches WHERE key = decode($1, 'hex')"
    " FOR UPDATE";
static const char SQL_DOWN[] =
    "UPDATE dlock_latches SET count = count - 1"
    " WHERE key = decode($1, 'hex')";
static const char SQL_ZERO[] =
    "WITH d AS (DELETE FROM dlock_latches WHERE key = decode($1, 'hex')"
    " RETURNING 1) SELECT pg_notify($2, '0') FROM d";

/* The name's row key (hex) and NOTIFY key. */
static uint64_t latch_key(struct pg_session *s, const char *name, size_t len,
                          char hex[65])
{
    uint8_t d[32];

    dlock__pg_digest(s->cf, name, len, d);
    dlock__pg_hex(hex, d);
    return dlock__pg_key64(d);
}

/* Run q; DLOCK_OK with the results in res, or the failure reported. */
static int latch_run(struct pg_session *s, const struct pg_q *q, int nq,
                     struct pg_res *res, const char *what)
{
    int rc = dlock__pg_run_ddl(s, latch_ddl, "creating the latch table", q,
                               nq, dlock__pg_deadline(s->cf), res);

    if (rc == PG_SQLERR) {
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, what, res);
        dlock__pg_res_clear(res);
    }
    return rc;
}

/* The count in row 0 of r (no row: 0). */
static uint32_t row_count(const PGresult *r)
{
    return PQntuples(r) > 0 ? (uint32_t)dlock__pg_u64(r, 0, 0) : 0;
}

static int pg_latch_set(struct dlock_session *ds, const char *name,
                        size_t len, uint32_t count, uint32_t *current)
{
    struct pg_session *s = (struct pg_session *)ds;
    char hex[65], text[16];
    struct pg_res res;
    struct pg_q q[2];
    int rc;

    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    latch_key(s, name, len, hex);
    snprintf(text, sizeof text, "%u", count);
    q[0] = (struct pg_q){SQL_SET, 4, {hex, s->cf->ns, name, text}};
    q[1] = (struct pg_q){SQL_COUNT, 1, {hex}};
    for (int tries = 0; tries < PG_LATCH_TRIES; tries++) {
        if ((rc = latch_run(s, q, 2, &res, "set")) != DLOCK_OK)
            return rc;
        bool set = PQntuples(res.r[0]) > 0;
        *current = set ? 0 : row_count(res.r[1]);
        dlock__pg_res_clear(&res);
        if (set || *current > 0)
            return DLOCK_OK;
        /* Neither inserted nor there: it reached zero in between. */
    }
    return dlock_session_error(ds, DLOCK_ERROR,
                               "set: the latch kept changing");
}

static int pg_latch_down(struct dlock_session *ds, const char *name,
                         size_t len, uint32_t *left)
{
    struct pg_session *s = (struct pg_session *)ds;
    char hex[65], chan[24];
    struct pg_res res;
    struct pg_q q[3];
    int rc;

    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    dlock__pg_channel_name(chan, latch_key(s, name, len, hex));
    q[0] = (struct pg_q){"BEGIN", 0, {NULL}};
    q[1] = (struct pg_q){SQL_LOCK, 1, {hex}};
    if ((rc = latch_run(s, q, 2, &res, "down")) != DLOCK_OK) {
        dlock__pg_rollback(s);
        return rc;
    }
    *left = row_count(res.r[1]);
    dlock__pg_res_clear(&res);
    /* The row is ours until COMMIT: nobody steps in between. */
    if (*left == 1)
        q[0] = (struct pg_q){SQL_ZERO, 2, {hex, chan}};
    else if (*left > 1)
        q[0] = (struct pg_q){SQL_DOWN, 1, {hex}};
    q[*left > 0 ? 1 : 0] = (struct pg_q){"COMMIT", 0, {NULL}};
    rc = dlock__pg_exec(s, q, *left > 0 ? 2 : 1, dlock__pg_deadline(s->cf),
                        &res);
    if (rc == PG_SQLERR) {
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "down", &res);
        dlock__pg_rollback(s);
    }
    dlock__pg_res_clear(&res);
    if (rc == DLOCK_OK && *left > 0)
        (*left)--;
    return rc;
}

/* Read the count of hex. */
static int latch_count(struct pg_session *s, const char *hex,
                       uint32_t *count)
{
    struct pg_q q = {SQL_COUNT, 1, {hex}};
    struct pg_res res;
    int rc;

    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    if ((rc = latch_run(s, &q, 1, &res, "count")) != DLOCK_OK)
        return rc;
    *count = row_count(res.r[0]);
    dlock__pg_res_clear(&res);
    return DLOCK_OK;
}

static int pg_latch_count(struct dlock_session *ds, const char *name,
                          size_t len, uint32_t *count)
{
    struct pg_session *s = (struct pg_session *)ds;
    char hex[65];

    latch_key(s, name, len, hex);
    return latch_count(s, hex, count);
}

/* Note the channel's count, read, sleep until a notification after it;
 * the first sleep only subscribes the channel (then we read again). */
static int pg_latch_await(struct dlock_session *ds, const char *name,
                          size_t len, int64_t deadline_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    uint64_t key, seq = 0;
    uint32_t count;
    int64_t now, wake;
    bool have;
    char hex[65];
    int rc;

    key = latch_key(s, name, len, hex);
    for (;;) {
        have = dlock__pg_listen_seq(&s->x->ln, key, &seq);
        if ((rc = latch_count(s, hex, &count)) != DLOCK_OK || count == 0)
            return rc;
        now = dlock_now_ms();
        if (now >= deadline_ms)
            return DLOCK_ETIMEDOUT; /* core says so */
        wake = now + PG_LATCH_RECHECK_MS < deadline_ms
                   ? now + PG_LATCH_RECHECK_MS
                   : deadline_ms;
        rc = dlock__pg_listen_wait(ds, &s->x->ln, key, have, seq,
                                   (uint32_t)(wake - now));
        if (rc != DLOCK_OK)
            return rc;
        if ((rc = dlock_session_cancelled(ds)) != 0)
            return rc;
    }
}

const struct dlock_latch_ops dlock__pg_latch = {
    .set = pg_latch_set,
    .down = pg_latch_down,
    .count = pg_latch_count,
    .await = pg_latch_await,
};
