/*
 * lease.c: mode=lease, a lease row claimed by one upsert that wins only
 * when the row is free or expired by the server's clock; renewals extend
 * it by owner; release clears it and NOTIFYs, and waiters LISTEN
 * (listen.c). Survives a reconnect: the row, not the connection, is the
 * lock, so any session of the client may renew or release it.
 *
 * Permits of a semaphore of N are N slot rows in the same table, keyed
 * SHA-256(the name's key || "dlock permit" || slot as 4 bytes); a permit
 * is a slot row's lease, renewed, released and lost like a lock's row, so
 * a crashed holder's permit comes back when its lease runs out, and
 * permits survive reconnects and transaction-pooling proxies (what mode
 * advisory's permits cannot). One statement picks one free slot (reading
 * only: "LIMIT 1" over a plain SELECT) and claims it with the lock's
 * conditional upsert, which re-checks the row under its lock: two
 * claimers that picked the same slot cannot both win, and the loser is
 * told to retry at once. The pick prefers a slot this owner already
 * holds (a retry whose answer was lost), so a handle never holds two. The
 * name's own row is the fence counter, bumped in the same statement only
 * when a slot was claimed: fences increase across the permits of a name.
 * The count is not stored (clients that disagree are not detected).
 *
 * It leaves the LISTEN connection and its thread to listen.c, inspect's
 * frame to inspect.c, the floor's loop to floor.c.
 *
 * Divisions: SQL; rows; acquire; renew; release; inspect; the floor;
 * the mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- SQL --------------------------------------------------------------- */

/* Indexes of the mode's statements in pg_conf.sql. */
enum { LEASE_CLAIM, LEASE_RENEW, LEASE_RELEASE, LEASE_PERMIT };

/* One statement claims the row if it is free, expired (by the server's
 * clock) or already ours (a retry whose answer was lost), and otherwise
 * says how long the holder's lease has left. A row that the statement's
 * snapshot shows held by another owner is not even tried: ON CONFLICT DO
 * UPDATE locks the conflicting row whether or not its WHERE holds, and a
 * row lock takes a transaction id, whose commit waits for a WAL flush.
 * Every waiter woken by a release made that failed claim, each with its
 * own flush, and the holder's next commit queued behind them: with
 * synchronous_commit=on, 8 processes on one name handed the lock over
 * 235 times a second with a 2.9 ms hand-off, at 5 WAL syncs per grant
 * (issue 17). A row taken between the snapshot and the insert still meets
 * ON CONFLICT, whose WHERE sees the newest version. */
static const char SQL_CLAIM[] =
    "WITH cur AS (SELECT expires_at, owner FROM {t}"
    "   WHERE key = decode($1, 'hex')),"
    " up AS (INSERT INTO {t} AS l"
    " (key, namespace, name, owner, fence, expires_at)"
    " SELECT decode($1, 'hex'), $2::text, $3::text, $4::text, 1,"
    "   now() + $5::bigint * interval '1 millisecond'"
    " WHERE NOT EXISTS (SELECT 1 FROM cur"
    "   WHERE cur.expires_at > now() AND cur.owner <> $4::text)"
    " ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner,"
    "   fence = l.fence + 1, expires_at = EXCLUDED.expires_at"
    " WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner"
    " RETURNING l.fence)"
    " SELECT (SELECT fence FROM up),"
    " (SELECT GREATEST(1, ceil(extract(epoch FROM expires_at - now())"
    "   * 1000))::bigint FROM {t}"
    "   WHERE key = decode($1, 'hex') AND expires_at > now())";

/* The row key of slot I of the name whose row key is D (SQL: bytea D,
 * int I); slot_hex() computes the same in C. */
#define SLOT_ROW(D, I)                                                      \
    "sha256(" D " || 'dlock permit'::bytea || int4send(" I "))"
_Static_assert(DLOCK_PERMITS_MAX == 1024, "lease inspect's 1023");

/* One of $6 permits of the name with key $1 (hex), for owner $4 with a
 * lease of $5 ms: the slots in turn from slot $7, a slot this owner holds
 * first, the first free one claimed, the name's row bumped for the fence
 * only if it was. Answers as SQL_CLAIM does (the fence or NULL, the ms
 * left of the soonest-ending lease of a held slot or NULL), then the slot
 * picked (NULL if none was free). */
static const char SQL_PERMIT[] =
    "WITH s AS (SELECT i, " SLOT_ROW("decode($1, 'hex')", "i") " AS key"
    "   FROM generate_series(0, $6::int - 1) AS i),"
    " c AS (SELECT s.i, s.key FROM s LEFT JOIN {t} l ON l.key = s.key"
    "   WHERE l.key IS NULL OR l.expires_at <= now() OR l.owner = $4"
    "   ORDER BY l.owner IS NOT DISTINCT FROM $4 DESC,"
    "   (s.i + $6::int - $7::int) % $6::int LIMIT 1),"
    " up AS (INSERT INTO {t} AS l"
    "   (key, namespace, name, owner, fence, expires_at)"
    "   SELECT c.key, $2, $3, $4, 0,"
    "     now() + $5::bigint * interval '1 millisecond' FROM c"
    "   ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner,"
    "     expires_at = EXCLUDED.expires_at"
    "   WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner"
    "   RETURNING 1),"
    " f AS (INSERT INTO {t} AS l"
    "   (key, namespace, name, owner, fence, expires_at)"
    "   SELECT decode($1, 'hex'), $2, $3, '', 1, '-infinity' FROM up"
    "   ON CONFLICT (key) DO UPDATE SET fence = l.fence + 1"
    "   RETURNING l.fence)"
    " SELECT (SELECT fence FROM f),"
    " (SELECT GREATEST(1, ceil(extract(epoch FROM min(l.expires_at) - now())"
    "   * 1000))::bigint FROM s JOIN {t} l ON l.key = s.key"
    "   WHERE l.expires_at > now()),"
    " (SELECT i FROM c)";

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

/* ---- rows --------------------------------------------------------------- */

/* Row key of slot i of the name with digest d, as SLOT_ROW: 64 hex. */
static void slot_hex(char out[65], const uint8_t d[32], uint32_t i)
{
    uint8_t in[32 + 12 + 4], k[32];

    memcpy(in, d, 32);
    memcpy(in + 32, "dlock permit", 12);
    for (int b = 0; b < 4; b++)
        in[44 + b] = (uint8_t)(i >> (24 - 8 * b));
    dlock_sha256(k, in, sizeof in);
    dlock__pg_hex(out, k);
}

/* The row a grant lives in: the name's, or a permit's slot (its index in
 * word[0]); and the name's NOTIFY channel (chan may be NULL). */
static void grant_row(const struct pg_conf *cf,
                      const struct dlock_request *req,
                      const struct dlock_grant *g, char hex[65],
                      char *chan)
{
    uint8_t d[32];

    dlock__pg_digest(cf, req->name, req->name_len, d);
    if (req->kind == DLOCK_KIND_PERMIT)
        slot_hex(hex, d, (uint32_t)g->word[0]);
    else
        dlock__pg_hex(hex, d);
    if (chan != NULL)
        dlock__pg_channel_name(chan, dlock__pg_key64(d));
}

/* ---- acquire ----------------------------------------------------------- */

static int lease_acquire(struct dlock_session *ds,
                         const struct dlock_request *req, int64_t deadline,
                         struct dlock_grant *g, uint32_t *retry_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    bool permit = req->kind == DLOCK_KIND_PERMIT;
    char hex[65], ms[16], n[12], first[12];
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
    dlock__pg_listen_note(s, dlock__pg_key64(d));
    snprintf(ms, sizeof ms, "%u", req->lease_ms);
    if (permit) {
        snprintf(n, sizeof n, "%u", req->permits);
        snprintf(first, sizeof first, "%u",
                 dlock__pg_first_slot(req->permits));
        q = (struct pg_q){cf->sql[LEASE_PERMIT], 7,
                          {hex, cf->ns, req->name, req->owner, ms, n, first}};
    } else {
        q = (struct pg_q){cf->sql[LEASE_CLAIM], 5,
                          {hex, cf->ns, req->name, req->owner, ms}};
    }
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
        if (permit) /* the slot's index */
            g->word[0] = dlock__pg_u64(r, 0, 2);
        dlock__pg_res_clear(&res);
        return DLOCK_OK;
    }
    if (permit && !PQgetisnull(r, 0, 2))
        *retry_ms = 1; /* the free slot it picked went to another claimer */
    else if (!PQgetisnull(r, 0, 1)) {
        uint64_t left = dlock__pg_u64(r, 0, 1);
        *retry_ms = left > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)left;
    }
    dlock__pg_res_clear(&res);
    return DLOCK_EBUSY;
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
        if (i > 0)
            *kp++ = *op++ = *lp++ = ',';
        grant_row(cf, req, items[i].grant, kp, NULL);
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
    int rc;

    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    grant_row(cf, req, g, hex, chan);
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

/* Owner, fence and time left of a row whose lease has not run out; or the
 * owners of the held slots of a semaphore. */
static void lease_read(const PGresult *r, dlock_state *out)
{
    out->held = 0;
    if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 3)) {
        out->fence = dlock__pg_u64(r, 0, 1);
        dlock__pg_permits_read(PQgetvalue(r, 0, 3), "", out);
    } else if (PQntuples(r) > 0) {
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
                   "NOTIFY waiters; survives reconnects; permits as N rows",
        .caps = DLOCK_CAP_LEASE | DLOCK_CAP_NOTIFY | DLOCK_CAP_FENCING |
                DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW |
                DLOCK_CAP_PERMITS | DLOCK_CAP_LATCH,
        .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                 DLOCK_KIND_BIT(DLOCK_KIND_PERMIT),
        /* Releases are announced, and a crashed holder's lease end comes
         * as the retry hint: the backoff only covers a lost
         * notification. */
        .retry_min_ms = 5,
        .retry_max_ms = 5000,
        .acquire = lease_acquire,
        .renew = lease_renew,
        .release = lease_release,
        .wait = dlock__pg_wait,
        .inspect = lease_inspect,
        .floor = lease_floor,
        .latch = &dlock__pg_latch,
        .forget = dlock__pg_forget,
    },
    .table = "dlock_leases",
    .row_key = true,
    .durable = true,
    .sql = {
        [LEASE_CLAIM] = SQL_CLAIM,
        [LEASE_RENEW] = SQL_RENEW,
        [LEASE_RELEASE] = SQL_RELEASE,
        [LEASE_PERMIT] = SQL_PERMIT,
    },
    .ddl = {"CREATE TABLE IF NOT EXISTS {t} (key bytea PRIMARY KEY,"
            " namespace text NOT NULL, name text NOT NULL,"
            " owner text NOT NULL, fence bigint NOT NULL,"
            " expires_at timestamptz NOT NULL)",
            NULL},
    /* The owners of held slots, at any of the DLOCK_PERMITS_MAX a count
     * may have: 1024 index lookups. */
    .inspect = "SELECT owner, fence, CASE WHEN expires_at > now() THEN"
               " ceil(extract(epoch FROM expires_at - now()) * 1000)::bigint"
               " ELSE 0 END,"
               " (SELECT string_agg(p.owner, ' ' ORDER BY p.owner) FROM {t} p"
               "   WHERE p.key IN (SELECT "
               SLOT_ROW("decode($1, 'hex')", "i")
               "     FROM generate_series(0, 1023) AS i)"
               "   AND p.expires_at > now() AND p.owner <> '')"
               " FROM {t} WHERE key = decode($1, 'hex')",
};
