/*
 * lease.c: mode=lease, a lease row claimed by one upsert that wins only
 * when the row is free or expired by the server's clock; renewals extend
 * it by owner; release clears it and NOTIFYs, and waiters LISTEN
 * (listen.c). Survives a reconnect: the row, not the connection, is the
 * lock, so any session of the client may renew or release it.
 *
 * It leaves the LISTEN connection and its thread to listen.c, inspect's
 * frame to inspect.c, the floor's loop to floor.c.
 *
 * Divisions: SQL; acquire and wait; renew; release; inspect; the floor;
 * the mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- SQL --------------------------------------------------------------- */

/* Indexes of the mode's statements in pg_conf.sql. */
enum { LEASE_CLAIM, LEASE_RENEW, LEASE_RELEASE };

/* One statement claims the row if it is free, expired (by the server's
 * clock) or already ours (a retry whose answer was lost), and otherwise
 * says how long the holder's lease has left. */
static const char SQL_CLAIM[] =
    "WITH up AS (INSERT INTO {t} AS l"
    " (key, namespace, name, owner, fence, expires_at)"
    " VALUES (decode($1, 'hex'), $2, $3, $4, 1,"
    "   now() + $5::bigint * interval '1 millisecond')"
    " ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner,"
    "   fence = l.fence + 1, expires_at = EXCLUDED.expires_at"
    " WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner"
    " RETURNING l.fence)"
    " SELECT (SELECT fence FROM up),"
    " (SELECT GREATEST(1, ceil(extract(epoch FROM expires_at - now())"
    "   * 1000))::bigint FROM {t}"
    "   WHERE key = decode($1, 'hex') AND expires_at > now())";

/* Every lease of a batch in one UPDATE over unnest()ed arrays. */
static const char SQL_RENEW[] =
    "UPDATE {t} AS l"
    " SET expires_at = now() + r.ms * interval '1 millisecond'"
    " FROM unnest($1::text[], $2::text[], $3::bigint[])"
    "   WITH ORDINALITY AS r(key, owner, ms, i)"
    " WHERE l.key = decode(r.key, 'hex') AND l.owner = r.owner"
    " RETURNING r.i";

/* Release clears the row rather than deleting it: its fence must keep
 * counting from where it was. */
static const char SQL_RELEASE[] =
    "WITH u AS (UPDATE {t} SET owner = '', expires_at = '-infinity'"
    " WHERE key = decode($1, 'hex') AND owner = $2 RETURNING 1)"
    " SELECT pg_notify($3, '') FROM u";

/* ---- acquire and wait -------------------------------------------------- */

static int lease_acquire(struct dlock_session *ds,
                         const struct dlock_request *req, int64_t deadline,
                         struct dlock_grant *g, uint32_t *retry_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    char hex[65], ms[16];
    struct pg_q q;
    struct pg_res res;
    uint8_t d[32];
    const PGresult *r;
    int rc;

    (void)deadline; /* no native wait: one attempt */
    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    dlock__pg_digest(cf, req->name, req->name_len, d);
    dlock__pg_hex(hex, d);
    /* [B-WAIT-1]: note the channel's count before the attempt, so a
     * release announced after it wakes the wait() that follows. */
    s->seen_key = dlock__pg_key64(d);
    s->seen_valid = dlock__pg_listen_seq(&s->x->ln, s->seen_key,
                                         &s->seen_seq);
    snprintf(ms, sizeof ms, "%u", req->lease_ms);
    q = (struct pg_q){cf->sql[LEASE_CLAIM], 5,
                      {hex, cf->ns, req->name, req->owner, ms}};
    rc = dlock__pg_run(s, &q, 1, dlock__pg_deadline(cf), &res);
    if (rc < 0) /* ECONNECT, or creating the table failed */
        return rc;
    if (rc == PG_SQLERR) {
        rc = dlock__pg_busy_code(res.state, 0);
        if (rc == 0)
            rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "claim", &res);
        dlock__pg_res_clear(&res);
        return rc;
    }
    r = res.r[0];
    if (!PQgetisnull(r, 0, 0)) {
        g->fence = dlock__pg_u64(r, 0, 0);
        dlock__pg_res_clear(&res);
        return DLOCK_OK;
    }
    if (!PQgetisnull(r, 0, 1)) {
        uint64_t left = dlock__pg_u64(r, 0, 1);
        *retry_ms = left > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)left;
    }
    dlock__pg_res_clear(&res);
    return DLOCK_EBUSY;
}

static int lease_wait(struct dlock_session *ds,
                      const struct dlock_request *req, uint32_t max_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    uint8_t d[32];
    uint64_t k;

    dlock__pg_digest(s->cf, req->name, req->name_len, d);
    k = dlock__pg_key64(d);
    return dlock__pg_listen_wait(&s->base, &s->x->ln, k,
                                 s->seen_valid && s->seen_key == k,
                                 s->seen_seq, max_ms);
}

/* ---- renew ------------------------------------------------------------- */

/* Append s to a text[] literal, quoted (owners are "uuid:serial", but the
 * literal must be right whatever they hold). */
static char *arr_put(char *p, const char *s)
{
    *p++ = '"';
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\')
            *p++ = '\\';
        *p++ = *s;
    }
    *p++ = '"';
    return p;
}

/* All n leases in one statement: one round trip for the watchdog's whole
 * batch. */
static int lease_renew(struct dlock_session *ds, struct dlock_renewal *items,
                       size_t n)
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    size_t ocap = 3, i;
    char *keys, *owners, *leases, *kp, *op, *lp;
    struct pg_q q;
    struct pg_res res;
    int rc;

    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    for (i = 0; i < n; i++)
        ocap += 2 * items[i].req->owner_len + 3;
    keys = malloc(n * 65 + 3);
    owners = malloc(ocap);
    leases = malloc(n * 12 + 3);
    if (keys == NULL || owners == NULL || leases == NULL) {
        free(keys);
        free(owners);
        free(leases);
        return DLOCK_ENOMEM;
    }
    kp = keys;
    op = owners;
    lp = leases;
    *kp++ = *op++ = *lp++ = '{';
    for (i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        uint8_t d[32];
        if (i > 0)
            *kp++ = *op++ = *lp++ = ',';
        dlock__pg_digest(cf, req->name, req->name_len, d);
        dlock__pg_hex(kp, d);
        kp += 64;
        op = arr_put(op, req->owner);
        lp += sprintf(lp, "%u", req->lease_ms);
        items[i].result = DLOCK_ELOST;
    }
    strcpy(kp, "}");
    strcpy(op, "}");
    strcpy(lp, "}");
    q = (struct pg_q){cf->sql[LEASE_RENEW], 3, {keys, owners, leases}};
    rc = dlock__pg_run(s, &q, 1, dlock__pg_deadline(cf), &res);
    free(keys);
    free(owners);
    free(leases);
    if (rc == PG_SQLERR) {
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "renew", &res);
        dlock__pg_res_clear(&res);
        return rc;
    }
    if (rc != DLOCK_OK)
        return rc; /* in doubt: core retries, and gives up at lease end */
    for (int row = 0; row < PQntuples(res.r[0]); row++) {
        uint64_t at = dlock__pg_u64(res.r[0], row, 0);
        if (at >= 1 && at <= n)
            items[at - 1].result = DLOCK_OK;
    }
    dlock__pg_res_clear(&res);
    for (i = 0; i < n; i++)
        if (items[i].result != DLOCK_OK)
            items[i].result = dlock_session_error(
                &s->base, DLOCK_ELOST,
                "the lease row has another owner or was cleared (the lease "
                "ran out and the lock was taken)");
    return DLOCK_OK;
}

/* ---- release ----------------------------------------------------------- */

static int lease_release(struct dlock_session *ds,
                         const struct dlock_request *req,
                         struct dlock_grant *g)
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    char hex[65], chan[24];
    struct pg_q q;
    struct pg_res res;
    uint8_t d[32];
    int rc;

    (void)g;
    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    dlock__pg_digest(cf, req->name, req->name_len, d);
    dlock__pg_hex(hex, d);
    dlock__pg_channel_name(chan, dlock__pg_key64(d));
    q = (struct pg_q){cf->sql[LEASE_RELEASE], 3, {hex, req->owner, chan}};
    rc = dlock__pg_run(s, &q, 1, dlock__pg_deadline(cf), &res);
    if (rc == DLOCK_OK && PQntuples(res.r[0]) == 0)
        rc = dlock_session_error(&s->base, DLOCK_ENOTOWNER,
                                 "the lease row has another owner or was "
                                 "already cleared (the lease ran out)");
    else if (rc == PG_SQLERR)
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "release", &res);
    dlock__pg_res_clear(&res);
    return rc;
}

/* ---- inspect ----------------------------------------------------------- */

/* Owner, fence and time left of a row whose lease has not run out. */
static void lease_read(const PGresult *r, dlock_state *out)
{
    out->held = 0;
    if (PQntuples(r) > 0) {
        out->fence = dlock__pg_u64(r, 0, 1);
        out->remaining_ms = (int64_t)dlock__pg_u64(r, 0, 2);
        out->held = PQgetvalue(r, 0, 0)[0] != '\0' && out->remaining_ms > 0;
        if (out->held)
            snprintf(out->owner, sizeof out->owner, "%s",
                     PQgetvalue(r, 0, 0));
        else
            out->remaining_ms = -1;
    }
}

static int lease_inspect(struct dlock_session *ds, const char *name,
                         size_t len, dlock_state *out)
{
    return dlock__pg_inspect(ds, name, len, out, lease_read);
}

/* ---- the floor --------------------------------------------------------- */

static void lease_floor_plan(const struct pg_conf *cf,
                             const struct pg_floor_keys *k,
                             struct pg_floor_plan *p)
{
    p->take[p->ntake++] = (struct pg_q){
        cf->sql[LEASE_CLAIM], 5, {k->hex, cf->ns, k->name, k->owner, k->ms}};
    p->give = (struct pg_q){cf->sql[LEASE_RELEASE], 3,
                            {k->hex, k->owner, k->chan}};
}

static int lease_floor(const struct dlock_uri *uri, const char *name,
                       uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    return dlock__pg_floor(uri, &dlock__pg_mode_lease, lease_floor_plan,
                           name, n, ns_out, err, errlen);
}

/* ---- the mode ---------------------------------------------------------- */

const struct pg_mode dlock__pg_mode_lease = {
    .pub = {
        .name = "lease",
        .summary = "a lease row expiring by the server's clock; releases "
                   "NOTIFY waiters; survives reconnects",
        .caps = DLOCK_CAP_LEASE | DLOCK_CAP_NOTIFY | DLOCK_CAP_FENCING |
                DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW,
        .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),
        /* Releases are announced, and a crashed holder's lease end comes
         * as the retry hint: the backoff only covers a lost
         * notification. */
        .retry_min_ms = 5,
        .retry_max_ms = 5000,
        .acquire = lease_acquire,
        .renew = lease_renew,
        .release = lease_release,
        .wait = lease_wait,
        .inspect = lease_inspect,
        .floor = lease_floor,
    },
    .table = "dlock_leases",
    .row_key = true,
    .durable = true,
    .sql = {
        [LEASE_CLAIM] = SQL_CLAIM,
        [LEASE_RENEW] = SQL_RENEW,
        [LEASE_RELEASE] = SQL_RELEASE,
    },
    .ddl = {"CREATE TABLE IF NOT EXISTS {t} (key bytea PRIMARY KEY,"
            " namespace text NOT NULL, name text NOT NULL,"
            " owner text NOT NULL, fence bigint NOT NULL,"
            " expires_at timestamptz NOT NULL)",
            NULL},
    .inspect = "SELECT owner, fence, CASE WHEN expires_at > now() THEN"
               " ceil(extract(epoch FROM expires_at - now()) * 1000)::bigint"
               " ELSE 0 END"
               " FROM {t} WHERE key = decode($1, 'hex')",
};
