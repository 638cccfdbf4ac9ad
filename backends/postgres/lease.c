/*
 * lease.c: mode=lease, a lease row claimed by one UPDATE that wins only
 * when the row is free or expired by the server's clock; renewals extend
 * it by owner; release clears it and NOTIFYs, and waiters LISTEN
 * (listen.c). Survives a reconnect: the row, not the connection, is the
 * lock, so any session of the client may renew or release it.
 *
 * No disk flush per acquire. The rows live in an UNLOGGED table
 * (dlock_leases_u by default), so a claim, renewal or release writes no
 * WAL and its commit waits for no flush (RecordTransactionCommit flushes
 * only when the transaction wrote WAL); the fence is a nextval() of the
 * unlogged sequence of fence.c, drawn in the claim, with its durable
 * epoch. An unlogged table is emptied by crash recovery (and is empty on
 * a promoted standby); a clean shutdown keeps it. Emptied, it could hand
 * a name to a new holder while the holder of the vanished row still
 * believes, within its lease, that it holds it. So:
 *
 *   The marker. One row with a one-byte key (names and slots have 32)
 *   whose expires_at is "no grant before". Every claim reads it in its
 *   own snapshot and claims only if it is there and passed. A claim that
 *   finds it missing makes it (SQL_MAKE, ON CONFLICT DO NOTHING: one of
 *   concurrent makers wins, the others see its row) with "no grant
 *   before now() + the longest lease ever recorded for the table", and
 *   tries again. A table made by dlock gets its marker, passed, in the
 *   transaction that makes it (nothing can have been granted in a table
 *   that did not exist); a table that exists keeps what it has.
 *
 *   The longest lease. dlock_lease_max, a logged table, holds per lease
 *   table the longest lease asked for. A lease is claimed or renewed only
 *   once the client has seen a value at least as long recorded there:
 *   read, or written (only when longer than recorded: rare) with
 *   synchronous_commit on, so any value read is on disk (a commit becomes
 *   visible only after its flush). The client keeps the largest value it
 *   saw, so this costs nothing per acquire.
 *
 *   Why it is enough. A holder counts its lease from when it sent the
 *   claim or renewal, which the server ran later, at server time t, with
 *   t + lease <= t + L, L the longest lease recorded before it (above).
 *   Every such t is before the crash; the marker is made after recovery,
 *   at a later server time m, and L' read then is >= L (durable, and it
 *   only grows). No claim succeeds before m + L' > t + lease: every
 *   holder's own clock has run its lease out by then (the server's clock
 *   must not jump, as for any lease here). A renewal after the reset
 *   finds no row and reports the lock lost; it is an UPDATE and never
 *   makes one. A clean restart keeps rows and marker: no grace. Permits
 *   are slot rows of the same table, under the same marker check.
 *   Deleting the marker by hand starts a grace; dropping the table, or
 *   deleting rows, while leases live is unsafe, as it always was.
 *
 *   Fences. The claim's UPDATE draws in its SET list, which is computed
 *   only for a row version the claim may take, and again for the newest
 *   version when a concurrent update made it re-check (EvalPlanQual):
 *   after the previous holder's release or expiry, so after its draw. The
 *   next holder draws after this claim's commit. A crash resets the
 *   sequence: its values have epoch 0 until fence.c moves it above a new
 *   durable epoch, which every fence from before is below; a drawn value
 *   whose epoch is not the durable one goes to dlock__pg_fence() first,
 *   and if a new value had to be drawn, the row is checked to be still
 *   ours and unexpired after the draw (else the next holder could have
 *   drawn before it). A slot's fence is drawn after its row was written,
 *   in the same statement, only when a slot was claimed.
 *
 * Permits of a semaphore of N are N slot rows in the same table, keyed
 * SHA-256(the name's key || "dlock permit" || slot as 4 bytes); a permit
 * is a slot row's lease, renewed, released and lost like a lock's row, so
 * a crashed holder's permit comes back when its lease runs out, and
 * permits survive reconnects and transaction-pooling proxies (what mode
 * advisory's permits cannot). One statement picks one free slot (reading
 * only: "LIMIT 1" over a plain SELECT) and claims it with a conditional
 * upsert, which re-checks the row under its lock: two claimers that
 * picked the same slot cannot both win, and the loser is told to retry at
 * once. The pick prefers a slot this owner already holds (a retry whose
 * answer was lost), so a handle never holds two. The count is not stored
 * (clients that disagree are not detected).
 *
 * It leaves the LISTEN connection and its thread to listen.c, inspect's
 * frame to inspect.c, the floor's loop to floor.c, the fence's epoch to
 * fence.c.
 *
 * Speed: the statements are prepared once per connection (conn.c: the
 * Prepare rides in the first run's round trip; unnamed statements behind
 * a transaction pooler). A claim sent as text was parsed and planned at
 * every call, three quarters of its time, and every waiter woken by a
 * release claims.
 *
 * Divisions: SQL; rows; the longest lease; acquire; renew; release;
 * inspect; the floor; the mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- SQL --------------------------------------------------------------- */

/* Indexes of the mode's statements in pg_conf.sql. */
enum {
    LEASE_CLAIM,
    LEASE_RENEW,
    LEASE_RELEASE,
    LEASE_PERMIT,
    LEASE_MAX,
    LEASE_OWNS,
    LEASE_MAKE,
    LEASE_FLOOR_SETUP
};

/* The marker row's key: one byte, where names and slots have 32. */
#define MARK_KEY "decode('00', 'hex')"

/* The marker, as a claim reads it. */
#define MARK_CTE "m AS (SELECT expires_at FROM {t} WHERE key = " MARK_KEY ")"
/* x.ok: is a lease of MS ms (SQL) at most the longest recorded for the
 * table? Only then may the statement grant it (see the top). */
#define MAX_OK(MS)                                                          \
    " x AS (SELECT coalesce((SELECT lease_ms >= " MS "::bigint"             \
    "   FROM dlock_lease_max WHERE tbl = '{t}'), false) AS ok)"

/* The marker (its expires_at is "no grant before"), read in a claim's
 * snapshot, and made when it is missing: the grace is the longest lease
 * ever recorded for this table (dlock_lease_max, keyed by the table's
 * quoted name; the name was validated to [A-Za-z0-9_], so it may stand
 * in a string literal). */
#define MARK_CTES                                                           \
    MARK_CTE ","                                                            \
    " mk AS (INSERT INTO {t} (key, namespace, name, owner, fence,"          \
    "   expires_at) SELECT " MARK_KEY ", '', '', '', 0, now()"              \
    "   + coalesce((SELECT lease_ms FROM dlock_lease_max"                   \
    "     WHERE tbl = '{t}'), 0) * interval '1 millisecond'"                \
    "   WHERE NOT EXISTS (SELECT 1 FROM m)"                                 \
    "   ON CONFLICT (key) DO NOTHING),"
/* ms until the marker allows grants (0 or less: it does); NULL: there was
 * no marker, and the statement made one. */
#define MARK_LEFT                                                           \
    "(SELECT CASE WHEN expires_at <= now() THEN 0 ELSE"                     \
    " ceil(extract(epoch FROM expires_at - now()) * 1000)::bigint END"      \
    " FROM m)"

/* One statement claims the row if it is free, expired (by the server's
 * clock) or already ours (a retry whose answer was lost), and the marker
 * allows grants; it draws the fence in the claim's SET, which runs only
 * for a row version the claim may take (and again for the newest version,
 * when a concurrent update made it re-check: EvalPlanQual re-projects the
 * SET list), so it is drawn after every earlier holder's. Otherwise it
 * says how long the holder's lease has left. A plain UPDATE whose WHERE
 * fails on the version it sees takes no row lock, and the statement is
 * kept small: every waiter woken by a release runs it. Answers: the fence
 * (NULL if not claimed), the ms left of the holder's lease (0: none;
 * NULL: no row), MARK_LEFT. A missing row or marker is made by SQL_MAKE, and the claim
 * tried again: an INSERT that claimed would draw its fence before it met
 * a conflict, i.e. maybe before another claimer's whole hold. */
static const char SQL_CLAIM[] =
    "WITH " MARK_CTE "," MAX_OK("$3") ","
    " up AS (UPDATE {t} AS l SET owner = $2::text,"
    "   fence = " DLOCK__PG_FENCE_DRAW ","
    "   expires_at = now() + $3::bigint * interval '1 millisecond'"
    "   WHERE l.key = decode($1, 'hex')"
    "   AND (l.expires_at <= now() OR l.owner = $2::text)"
    "   AND (SELECT expires_at FROM m) <= now() AND (SELECT ok FROM x)"
    "   RETURNING l.fence)"
    " SELECT (SELECT fence FROM up),"
    " (SELECT CASE WHEN expires_at <= now() THEN 0 ELSE GREATEST(1,"
    "   ceil(extract(epoch FROM expires_at - now()) * 1000))::bigint END"
    "   FROM {t} WHERE key = decode($1, 'hex')),"
    " " MARK_LEFT ", (SELECT ok FROM x)";

/* The marker if missing (with the grace), and the name's row if missing
 * (free, fence 0). */
#define MAKE_CTES                                                           \
    MARK_CTES                                                               \
    " ins AS (INSERT INTO {t} (key, namespace, name, owner, fence,"         \
    "   expires_at) VALUES (decode($1, 'hex'), $2::text, $3::text, '', 0,"  \
    "   '-infinity') ON CONFLICT (key) DO NOTHING)"
static const char SQL_MAKE[] = "WITH " MAKE_CTES " SELECT 1";
/* The floor's set-up, before its clock: the same, and its lease ($4 ms)
 * recorded (the marker's grace is read in the statement's snapshot,
 * before it). */
static const char SQL_FLOOR_SETUP[] =
    "WITH " MAKE_CTES ","
    " mx AS (INSERT INTO dlock_lease_max AS x (tbl, lease_ms)"
    "   VALUES ('{t}', $4::bigint) ON CONFLICT (tbl) DO UPDATE"
    "   SET lease_ms = greatest(x.lease_ms, EXCLUDED.lease_ms))"
    " SELECT 1";

/* The row key of slot I of the name whose row key is D (SQL: bytea D,
 * int I); slot_hex() computes the same in C. */
#define SLOT_ROW(D, I)                                                      \
    "sha256(" D " || 'dlock permit'::bytea || int4send(" I "))"
_Static_assert(DLOCK_PERMITS_MAX == 1024, "lease inspect's 1023");

/* One of $6 permits of the name with key $1 (hex), for owner $4 with a
 * lease of $5 ms: the slots in turn from slot $7, a slot this owner holds
 * first, the first free one claimed if the marker allows grants, and then
 * (only if it was) the fence drawn, after the slot row was written and
 * locked. Answers as SQL_CLAIM does (the fence or NULL, the ms left of
 * the soonest-ending lease of a held slot or NULL), then the slot picked
 * (NULL if none was free), then MARK_LEFT. */
static const char SQL_PERMIT[] =
    "WITH " MARK_CTE "," MAX_OK("$5") ","
    " s AS (SELECT i, " SLOT_ROW("decode($1, 'hex')", "i") " AS key"
    "   FROM generate_series(0, $6::int - 1) AS i),"
    " c AS (SELECT s.i, s.key FROM s LEFT JOIN {t} l ON l.key = s.key"
    "   WHERE (l.key IS NULL OR l.expires_at <= now() OR l.owner = $4)"
    "   AND (SELECT expires_at FROM m) <= now() AND (SELECT ok FROM x)"
    "   ORDER BY l.owner IS NOT DISTINCT FROM $4 DESC,"
    "   (s.i + $6::int - $7::int) % $6::int LIMIT 1),"
    " up AS (INSERT INTO {t} AS l"
    "   (key, namespace, name, owner, fence, expires_at)"
    "   SELECT c.key, $2, $3, $4, 0,"
    "     now() + $5::bigint * interval '1 millisecond' FROM c"
    "   ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner,"
    "     expires_at = EXCLUDED.expires_at"
    "   WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner"
    "   RETURNING 1)"
    " SELECT (SELECT " DLOCK__PG_FENCE_DRAW " FROM up),"
    " (SELECT GREATEST(1, ceil(extract(epoch FROM min(l.expires_at) - now())"
    "   * 1000))::bigint FROM s JOIN {t} l ON l.key = s.key"
    "   WHERE l.expires_at > now()),"
    " (SELECT i FROM c), " MARK_LEFT ", (SELECT ok FROM x)";

/* Every lease of a batch in one UPDATE over unnest()ed arrays. An UPDATE
 * only: a renewal never makes a row that a crash took away. */
static const char SQL_RENEW[] =
    "UPDATE {t} AS l"
    " SET expires_at = now() + r.ms * interval '1 millisecond'"
    " FROM unnest($1::text[], $2::text[], $3::bigint[])"
    "   WITH ORDINALITY AS r(key, owner, ms, i)"
    " WHERE l.key = decode(r.key, 'hex') AND l.owner = r.owner"
    " RETURNING r.i";

/* Release clears the row rather than deleting it (a deleted row would be
 * made again, fence 0, by the next claim: harmless now that fences come
 * from the sequence, but the row is reused). */
static const char SQL_RELEASE[] =
    "WITH u AS (UPDATE {t} SET owner = '', expires_at = '-infinity'"
    "   WHERE key = decode($1, 'hex') AND owner = $2::text RETURNING 1)"
    " SELECT 1 FROM (SELECT pg_notify($3::text, '') FROM u) AS n";

/* Record a lease of $1 ms as the table's longest, unless one at least as
 * long is recorded already (then nothing is written): a logged row,
 * committed synchronously (the mode's sessions are durable: conn.c), so
 * what a later read finds survives a crash. Answers the recorded
 * longest. */
static const char SQL_MAX[] =
    "WITH cur AS (SELECT lease_ms FROM dlock_lease_max WHERE tbl = '{t}'),"
    " up AS (INSERT INTO dlock_lease_max AS x (tbl, lease_ms)"
    "   SELECT '{t}', $1::bigint"
    "   WHERE NOT EXISTS (SELECT 1 FROM cur WHERE lease_ms >= $1::bigint)"
    "   ON CONFLICT (tbl) DO UPDATE"
    "   SET lease_ms = greatest(x.lease_ms, EXCLUDED.lease_ms)"
    "   RETURNING lease_ms)"
    " SELECT greatest((SELECT lease_ms FROM cur), (SELECT lease_ms FROM up))";

/* After a fence was drawn again (fence.c: a new epoch), the row must still
 * be ours and unexpired, or its next holder may have drawn before us; the
 * fence is written into it for inspect. */
static const char SQL_OWNS[] =
    "UPDATE {t} SET fence = CASE WHEN fence = 0 THEN 0 ELSE $3::bigint END"
    " WHERE key = decode($1, 'hex') AND owner = $2 AND expires_at > now()"
    " RETURNING 1";

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

/* ---- the longest lease ------------------------------------------------ */

/* No lease longer than the table's recorded longest may be granted or
 * renewed: a reset table's grace is that long. The client remembers what
 * it saw recorded (it only grows), so this is a round trip only for a
 * lease longer than any this client saw, and a write only for one longer
 * than any recorded. */
static int lease_max_ensure(struct pg_session *s, uint32_t lease_ms,
                            bool force)
{
    char ms[16];
    struct pg_q q;
    struct pg_res res;
    uint64_t got, old;
    int rc;

    if (!force && atomic_load(&s->x->lease_max_ms) >= lease_ms)
        return DLOCK_OK;
    snprintf(ms, sizeof ms, "%u", lease_ms);
    q = (struct pg_q){s->cf->sql[LEASE_MAX], 1, {ms}};
    rc = dlock__pg_run(s, &q, 1, dlock__pg_deadline(s->cf), &res);
    if (rc == PG_SQLERR)
        rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "record the longest lease",
                               &res);
    if (rc != DLOCK_OK) {
        dlock__pg_res_clear(&res);
        return rc;
    }
    got = PQgetisnull(res.r[0], 0, 0) ? 0 : dlock__pg_u64(res.r[0], 0, 0);
    dlock__pg_res_clear(&res);
    if (got < lease_ms) /* cannot be, but then no grant */
        return dlock_session_error(&s->base, DLOCK_ERROR,
                                   "dlock_lease_max records %llu ms, below "
                                   "the lease of %u ms",
                                   (unsigned long long)got, lease_ms);
    old = atomic_load(&s->x->lease_max_ms);
    while (old < got &&
           !atomic_compare_exchange_weak(&s->x->lease_max_ms, &old, got))
        ;
    return DLOCK_OK;
}

/* ---- hand-offs ---------------------------------------------------------- */

/*
 * Any claimer may take a free row, and the releasing handle, still on its
 * CPU, usually claims again before a waiter woken by its NOTIFY has even
 * run: in 8 processes on one name a third of the grants went back to the
 * handle that had just released. So a handle that was granted the name
 * after a wait (someone else held it, so others likely wait too) and
 * releases it does not claim that name again for HANDOFF_GRACE_MS, unless
 * a release was announced since (someone else took it): it waits as
 * everyone else (a try fails, as on a fair lock: core makes every attempt
 * of a mode without a native wait as a try, so the two look alike here).
 * Other handles are not held back. A waiter that went away holds up the
 * releaser by the grace at most. This is about fairness only: the claim
 * alone decides who holds. (backends/file does the same.) With the
 * statements prepared it still pays: 3 600 hand-offs/s against 2 430
 * without it, hand-offs 0.96 of the grants against 0.74 (dlock bench,
 * 8 workers, medians of 3).
 */
#define HANDOFF_GRACE_MS 5

static struct pg_handoff *handoff_of(struct pg_session *s,
                                     const struct dlock_request *req)
{
    struct pg_handoff *h = &s->x->handoff[req->serial % PG_HANDOFF_SLOTS];

    if (atomic_load(&h->serial) != req->serial + 1) {
        atomic_store(&h->serial, req->serial + 1);
        atomic_store(&h->waited, false);
        atomic_store(&h->until, 0);
    }
    return h;
}

/* Should this attempt let the waiters have the name? Then *retry_ms is
 * the rest of the grace. s has noted the channel's count. */
static bool handoff_defer(struct pg_session *s, struct pg_handoff *h,
                          uint32_t *retry_ms)
{
    int64_t left = atomic_load(&h->until) - dlock_now_ms();

    if (left <= 0)
        return false;
    /* A release announced since, besides its own: someone else had
     * it. */
    if (!s->seen_valid || !atomic_load(&h->seq_ok) ||
        s->seen_seq - atomic_load(&h->seq) > 1) {
        atomic_store(&h->until, 0);
        return false;
    }
    *retry_ms = (uint32_t)left;
    /* it waits for another holder: a grant after this is one after a
     * wait, and lets the waiters have the name again at its release */
    atomic_store(&h->waited, true);
    return true;
}

/* ---- acquire ----------------------------------------------------------- */

/* A claim won with fence v drawn: hand v out if its epoch is the durable
 * one (fence.c), else confirm or draw again, and after a new draw make
 * sure the row is still ours and unexpired (the draw came after the
 * claim's commit: had the lease run out meanwhile, the next holder could
 * have drawn before us). The row is cleared if no fence can be had. */
static int lease_won(struct pg_session *s, const struct dlock_request *req,
                     const uint8_t d[32], const char *hex, uint64_t v,
                     uint64_t *out)
{
    const struct pg_conf *cf = s->cf;
    char err[256], fs[24], chan[24];
    struct pg_q q;
    struct pg_res res;
    uint64_t f = v;
    int rc;

    if (dlock__pg_fence_ok(s->x, v)) {
        *out = v;
        return DLOCK_OK;
    }
    rc = dlock__pg_fence(s, v, &f, err, sizeof err);
    if (rc == DLOCK_OK && f != v) {
        snprintf(fs, sizeof fs, "%llu", (unsigned long long)f);
        q = (struct pg_q){cf->sql[LEASE_OWNS], 3, {hex, req->owner, fs}};
        rc = dlock__pg_run(s, &q, 1, dlock__pg_deadline(cf), &res);
        if (rc == PG_SQLERR)
            rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "claim", &res);
        else if (rc == DLOCK_OK && PQntuples(res.r[0]) == 0)
            rc = DLOCK_EBUSY; /* the lease ran out while fencing */
        dlock__pg_res_clear(&res);
        if (rc == DLOCK_OK) {
            *out = f;
            return DLOCK_OK;
        }
        if (rc == DLOCK_EBUSY)
            return rc;
    } else if (rc == DLOCK_OK) {
        *out = v;
        return DLOCK_OK;
    } else {
        rc = dlock_session_error(&s->base, rc, "%s", err);
    }
    /* Not granted: clear the row (quietly: the error is the news). */
    dlock__pg_channel_name(chan, dlock__pg_key64(d));
    q = (struct pg_q){cf->sql[LEASE_RELEASE], 3, {hex, req->owner, chan}};
    if (dlock__pg_run(s, &q, 1, dlock__pg_deadline(cf), &res) >= 0)
        dlock__pg_res_clear(&res);
    return rc;
}

/* A claim may find the marker missing (a new or reset table: SQL_MAKE
 * makes it, with the grace), the name's row missing (made free), or its
 * lease longer than the table's recorded longest (recorded first); then
 * it is tried again at once, a few times at most. Permits' slot claims
 * make their own rows; their marker is made the same way. The marker is
 * made before this client's own lease is recorded: its grace must cover
 * the leases granted before, not this one. */
#define CLAIM_TRIES 4

static int lease_acquire(struct dlock_session *ds,
                         const struct dlock_request *req, int64_t deadline,
                         struct dlock_grant *g, uint32_t *retry_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    bool permit = req->kind == DLOCK_KIND_PERMIT;
    char hex[65], ms[16], n[12], first[12];
    int mark = permit ? 3 : 2, ok = mark + 1;
    struct pg_q q, make;
    struct pg_res res;
    struct pg_handoff *h;
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
    h = permit ? NULL : handoff_of(s, req);
    if (h != NULL && handoff_defer(s, h, retry_ms))
        return DLOCK_EBUSY;
    snprintf(ms, sizeof ms, "%u", req->lease_ms);
    if (permit) {
        snprintf(n, sizeof n, "%u", req->permits);
        snprintf(first, sizeof first, "%u",
                 dlock__pg_first_slot(req->permits));
        q = (struct pg_q){cf->sql[LEASE_PERMIT], 7,
                          {hex, cf->ns, req->name, req->owner, ms, n, first}};
    } else {
        q = (struct pg_q){cf->sql[LEASE_CLAIM], 3, {hex, req->owner, ms}};
    }
    /* (permits: the name's row is made too, never claimed: harmless) */
    make = (struct pg_q){cf->sql[LEASE_MAKE], 3, {hex, cf->ns, req->name}};
    for (int attempt = 1;; attempt++) {
        int64_t grace;
        bool made;

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
            uint64_t v = dlock__pg_u64(r, 0, 0);
            char shex[65];
            if (permit) { /* the slot's index */
                g->word[0] = dlock__pg_u64(r, 0, 2);
                slot_hex(shex, d, (uint32_t)g->word[0]);
            }
            dlock__pg_res_clear(&res);
            rc = lease_won(s, req, d, permit ? shex : hex, v, &g->fence);
            if (rc == DLOCK_EBUSY)
                *retry_ms = 1;
            if (rc == DLOCK_OK && h != NULL) { /* granted after a wait? */
                g->word[1] = atomic_exchange(&h->waited, false);
                atomic_store(&h->until, 0);
            }
            return rc;
        }
        /* no marker, or (a lock) no row */
        made = PQgetisnull(r, 0, mark) || (!permit && PQgetisnull(r, 0, 1));
        grace = PQgetisnull(r, 0, mark)
                    ? 0
                    : strtoll(PQgetvalue(r, 0, mark), NULL, 10);
        if (made && attempt < CLAIM_TRIES) {
            dlock__pg_res_clear(&res);
            rc = dlock__pg_run(s, &make, 1, dlock__pg_deadline(cf), &res);
            if (rc == PG_SQLERR)
                rc = dlock__pg_sqlfail(s, DLOCK_ERROR, "claim", &res);
            dlock__pg_res_clear(&res);
            if (rc != DLOCK_OK)
                return rc;
            continue;
        }
        if (PQgetvalue(r, 0, ok)[0] != 't' && attempt < CLAIM_TRIES) {
            dlock__pg_res_clear(&res);
            if ((rc = lease_max_ensure(s, req->lease_ms, true)) != DLOCK_OK)
                return rc;
            continue;
        }
        if (grace > 0) /* a reset table: no grant before its grace ends */
            *retry_ms = grace > UINT32_MAX - 1 ? UINT32_MAX - 1
                                               : (uint32_t)grace;
        else if (made || (permit && !PQgetisnull(r, 0, 2)))
            *retry_ms = 1; /* still missing, or the free slot it picked
                              went to another claimer */
        else if (!PQgetisnull(r, 0, 1) && dlock__pg_u64(r, 0, 1) > 0) {
            uint64_t left = dlock__pg_u64(r, 0, 1);
            *retry_ms =
                left > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)left;
        }
        dlock__pg_res_clear(&res);
        if (h != NULL)
            atomic_store(&h->waited, true);
        return DLOCK_EBUSY;
    }
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

    uint32_t longest = 0;

    if ((rc = dlock__pg_ready(s)) != DLOCK_OK)
        return rc;
    for (i = 0; i < n; i++) {
        ocap += 2 * items[i].req->owner_len + 3;
        if (items[i].req->lease_ms > longest)
            longest = items[i].req->lease_ms;
    }
    /* in doubt if it fails: core retries, and gives up at lease end */
    if ((rc = lease_max_ensure(s, longest, false)) != DLOCK_OK)
        return rc;
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
    if (req->kind != DLOCK_KIND_PERMIT && g->word[1]) {
        /* Granted after a wait: let a waiter have it (hand-offs). The
         * channel's count before this release announces itself. */
        struct pg_handoff *h = handoff_of(s, req);
        uint8_t d[32];
        uint64_t seq = 0;
        bool ok;
        dlock__pg_digest(cf, req->name, req->name_len, d);
        ok = dlock__pg_listen_seq(&s->x->ln, dlock__pg_key64(d), &seq);
        atomic_store(&h->seq, seq);
        atomic_store(&h->seq_ok, ok);
        atomic_store(&h->until, dlock_now_ms() + HANDOFF_GRACE_MS);
    }
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
    p->setup[p->nsetup++] = (struct pg_q){
        cf->sql[LEASE_FLOOR_SETUP], 4, {k->hex, cf->ns, k->name, k->ms}};
    p->take[p->ntake++] = (struct pg_q){cf->sql[LEASE_CLAIM], 3,
                                        {k->hex, k->owner, k->ms}};
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

static int lease_on_connect(struct pg_session *s, int64_t deadline,
                            char *err, size_t errlen)
{
    (void)deadline;
    return dlock__pg_fence_server(s, err, errlen);
}

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
    .table = "dlock_leases_u",
    .on_connect = lease_on_connect,
    .row_key = true,
    .durable = true,
    /* every woken waiter claims: parse and plan cost more than the
     * claim (see SQL_CLAIM) */
    .prepare = true,
    .sql = {
        [LEASE_CLAIM] = SQL_CLAIM,
        [LEASE_RENEW] = SQL_RENEW,
        [LEASE_RELEASE] = SQL_RELEASE,
        [LEASE_PERMIT] = SQL_PERMIT,
        [LEASE_MAX] = SQL_MAX,
        [LEASE_OWNS] = SQL_OWNS,
        [LEASE_MAKE] = SQL_MAKE,
        [LEASE_FLOOR_SETUP] = SQL_FLOOR_SETUP,
    },
    .ddl = {DLOCK__PG_FENCE_DDL_EPOCH, DLOCK__PG_FENCE_DDL_EPOCH_ROW,
            DLOCK__PG_FENCE_DDL_SEQ,
            "CREATE TABLE IF NOT EXISTS dlock_lease_max (tbl text PRIMARY KEY,"
            " lease_ms bigint NOT NULL)",
            /* A table made now has held no lease: its marker allows
             * grants at once. (One that exists keeps what it has.) */
            "DO $d$ BEGIN IF to_regclass('{t}') IS NULL THEN"
            " CREATE UNLOGGED TABLE {t} (key bytea PRIMARY KEY,"
            " namespace text NOT NULL, name text NOT NULL,"
            " owner text NOT NULL, fence bigint NOT NULL,"
            " expires_at timestamptz NOT NULL);"
            " INSERT INTO {t} VALUES (" MARK_KEY ", '', '', '', 0,"
            " '-infinity'); END IF; END $d$",
            NULL},
    /* The owners of held slots, at any of the DLOCK_PERMITS_MAX a count
     * may have: 1024 index lookups. */
    .inspect = "SELECT coalesce(owner, ''), coalesce(fence, 0), CASE WHEN expires_at > now() THEN"
               " ceil(extract(epoch FROM expires_at - now()) * 1000)::bigint"
               " ELSE 0 END,"
               " (SELECT string_agg(p.owner, ' ' ORDER BY p.owner) FROM {t} p"
               "   WHERE p.key IN (SELECT "
               SLOT_ROW("decode($1, 'hex')", "i")
               "     FROM generate_series(0, 1023) AS i)"
               "   AND p.expires_at > now() AND p.owner <> '')"
               " FROM (VALUES (1)) AS one(x)"
               " LEFT JOIN {t} ON key = decode($1, 'hex')",
};
