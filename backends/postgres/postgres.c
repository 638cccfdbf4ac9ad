/*
 * postgres.c: the postgres:// backend (alias postgresql://), over libpq.
 * Four modes, picked by mode=:
 *
 *   advisory (default)  session advisory locks on a 64-bit key. The server
 *                       queues waiters (pg_advisory_lock under lock_timeout)
 *                       and frees the lock when the connection ends, so many
 *                       locks share one connection. Fencing from a counter
 *                       row upserted in the statement that takes the lock.
 *   advisory_xact       pg_advisory_xact_lock inside a transaction held open
 *                       for the lock's life: works behind transaction-pooling
 *                       proxies (PgBouncer pool_mode=transaction), where a
 *                       session lock silently breaks. One connection per
 *                       held lock; release is COMMIT.
 *   for_update          a lock row held by an open transaction's SELECT ...
 *                       FOR UPDATE (NOWAIT for a try, lock_timeout for a
 *                       timed wait). One connection and one open transaction
 *                       per held lock; release is COMMIT.
 *   lease               a lease row claimed by one upsert that wins only when
 *                       the row is free or expired by the server's clock;
 *                       renewals extend it by owner; release clears it and
 *                       NOTIFYs, and waiters LISTEN (listen.c). Survives a
 *                       reconnect: the row, not the connection, is the lock.
 *
 * Names never reach SQL text: each call binds them as parameters, and keys
 * are SHA-256(SHA-256(namespace) || SHA-256(name)) (the full 32 bytes for
 * rows, the first 8 for advisory keys and NOTIFY channels). The table name
 * is the one identifier we print into SQL, validated and quoted.
 *
 * Every call is asynchronous underneath (nonblocking socket, pipeline mode,
 * poll with a deadline), so a server that is down, paused or unreachable
 * costs at most timeout= per call and never hangs a thread; statements that
 * belong together go out in one round trip (libpq pipeline mode).
 *
 * Divisions: keys and text; the URI; connections; running statements;
 * advisory; the transactional modes; lease; the table of methods' bodies;
 * inspect; the raw floor.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg.h"

extern const struct dlock_backend dlock__backend_postgres;

/* Statements in one round trip at most. */
#define PG_MAXQ 5
/* pg_exec's result when a statement failed on a healthy connection. */
#define PG_SQLERR 1
/* The (int4, int4) advisory key that serialises CREATE ... IF NOT EXISTS
 * across clients ("dloc", "kddl"); user locks use the bigint key space,
 * which PostgreSQL keeps apart from this one. */
#define PG_DDL_KEY "1684828003, 1801741420"

#define CAPS_ADVISORY                                                       \
    (DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |                      \
     DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR | DLOCK_CAP_SHARED |            \
     DLOCK_CAP_FENCING | DLOCK_CAP_BATCH_RENEW)
#define CAPS_TX                                                             \
    (DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |                      \
     DLOCK_CAP_SESSION_PER_LOCK | DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR |  \
     DLOCK_CAP_SHARED | DLOCK_CAP_FENCING)
#define CAPS_LEASE                                                          \
    (DLOCK_CAP_LEASE | DLOCK_CAP_NOTIFY | DLOCK_CAP_FENCING |               \
     DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW)

/*
 * Statements shared by several modes.
 *
 * The connection-bound modes bound how long a holder cut off from the
 * server may believe it holds [B-BOUND-1]: the server ends a session
 * silent for longer than dlock_server_timeout_ms(lease) (idle_session_
 * timeout for advisory's idle session, idle_in_transaction_session_timeout
 * for the open transaction of the other two), and core stops believing a
 * lease after the last confirmed round trip, which is shorter. TCP
 * keepalives besides make the server notice a vanished host sooner.
 */
static const char SQL_SETUP_SESSION[] =
    "SELECT pg_backend_pid(), set_config('tcp_keepalives_idle', $1, false),"
    " set_config('tcp_keepalives_interval', $2, false),"
    " set_config('tcp_keepalives_count', $3, false),"
    " set_config('idle_session_timeout', $4, false),"
    " set_config('synchronous_commit', 'on', false)";
/*
 * A fence, or a lease, that a server crash can take back is handed out
 * twice: so every connection that commits one (advisory's fence upserts,
 * lease's rows, the transactional modes' fence connection) waits for its
 * commits to reach the WAL on disk, whatever the server's default
 * synchronous_commit says.
 */
static const char SQL_DURABLE[] =
    "SELECT set_config('synchronous_commit', 'on', false)";
/* The transactional modes' fence: nextval() alone assigns no transaction
 * id, and PostgreSQL flushes the WAL at commit only for a transaction that
 * has one; txid_current() gives it one, so the commit makes the sequence's
 * advance durable before the token is used. */
static const char SQL_FENCE_DURABLE[] =
    "SELECT nextval('dlock_fence_seq'), txid_current()";
static const char SQL_IDLE_LIMIT[] =
    "SELECT set_config('idle_session_timeout', $1, false)";
static const char SQL_SET_TX[] =
    "SELECT set_config('lock_timeout', $1, true),"
    " set_config('tcp_keepalives_idle', $2, true),"
    " set_config('tcp_keepalives_interval', $3, true),"
    " set_config('tcp_keepalives_count', $4, true),"
    " set_config('idle_in_transaction_session_timeout', $5, true)";
static const char SQL_LOCK_TIMEOUT[] =
    "SELECT set_config('lock_timeout', $1, true)";
static const char SQL_PID[] = "SELECT pg_backend_pid()";
static const char SQL_ONE[] = "SELECT 1";

struct pg_session {
    struct dlock_session base;
    struct pg_ctx *x;
    const struct pg_conf *cf;
    PGconn *conn;        /* NULL once dropped */
    uint64_t gen;        /* bumped by every (re)connect; grants keep it */
    bool fence_conn;     /* the ctx's fence connection, not core's */
    int backend_pid;     /* advisory: the server process of this session */
    uint32_t covered_ms; /* advisory: the lease idle_session_timeout covers */
    size_t ngrants;      /* connection-bound grants living on conn */
    char why[256];       /* the last connection failure, one line */
    char fatal[160];     /* a FATAL the server sent while we were idle */
    /* lease: the listener's count for the channel of the last attempt */
    uint64_t seen_key, seen_seq;
    bool seen_valid;
};

/* One statement and its parameters (text format). */
struct pg_q {
    const char *sql;
    int n;
    const char *v[5];
};

/* What one round trip brought back. */
struct pg_res {
    PGresult *r[PG_MAXQ];
    int failed;   /* index of the first statement that failed, or -1 */
    char state[6]; /* its SQLSTATE */
};

static const char *const pg_params[] = {
    "mode", "table",
    /* libpq's own, passed through as they are */
    "application_name", "options", "target_session_attrs", "sslmode",
    "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslcrl",
    "sslcrldir", "sslsni", "ssl_min_protocol_version",
    "ssl_max_protocol_version", "sslcompression", "sslcertmode",
    "sslnegotiation", "requirepeer", "require_auth", "channel_binding",
    "gssencmode", "krbsrvname", "gsslib", "gssdelegation", "passfile",
    "service", "hostaddr", "load_balance_hosts", "keepalives",
    "keepalives_idle", "keepalives_interval", "keepalives_count",
    "tcp_user_timeout",
    /* accepted only to say what to use instead */
    "connect_timeout", NULL,
};

static const char *const pg_aliases[] = {"postgresql", NULL};
static const char *const pg_modes[] = {"advisory", "advisory_xact",
                                       "for_update", "lease", NULL};

/* ---- keys and text ----------------------------------------------------- */

/* SHA-256(SHA-256(namespace) || SHA-256(name)): two fixed-size steps, so
 * neither a long name nor the namespace needs a buffer. */
static void pg_digest(const struct pg_conf *cf, const char *name, size_t len,
                      uint8_t out[32])
{
    uint8_t both[64];

    memcpy(both, cf->ns_digest, 32);
    dlock_sha256(both + 32, name, len);
    dlock_sha256(out, both, sizeof both);
}

static uint64_t pg_key64(const uint8_t d[32])
{
    uint64_t k = 0;
    for (int i = 0; i < 8; i++)
        k = (k << 8) | d[i];
    return k;
}

/* The key as PostgreSQL's signed bigint, in decimal. */
static void pg_key_text(char out[24], uint64_t k)
{
    int64_t v = k <= (uint64_t)INT64_MAX ? (int64_t)k
                                         : -(int64_t)(~k) - 1;
    snprintf(out, 24, "%" PRId64, v);
}

static void pg_hex(char out[65], const uint8_t d[32])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[64] = '\0';
}

void pg_channel_name(char out[24], uint64_t key)
{
    snprintf(out, 24, "dlock_%016" PRIx64, key);
}

void pg_oneline(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    bool space = false;

    if (src == NULL)
        src = "";
    for (; *src != '\0' && n + 1 < cap; src++) {
        if (*src == '\n' || *src == '\t' || *src == '\r' || *src == ' ') {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < cap)
            dst[n++] = ' ';
        space = false;
        dst[n++] = *src;
    }
    dst[n] = '\0';
}

static int64_t pg_deadline(const struct pg_conf *cf)
{
    return cf->timeout_ms ? dlock_now_ms() + cf->timeout_ms : INT64_MAX;
}

/* The client's own limit for a native wait: the server's lock_timeout
 * ends it at the deadline, so allow one more timeout= for the answer. */
static int64_t pg_wait_deadline(const struct pg_conf *cf, int64_t deadline)
{
    if (deadline == 0)
        return pg_deadline(cf);
    if (deadline == INT64_MAX || cf->timeout_ms == 0)
        return INT64_MAX;
    return deadline + cf->timeout_ms;
}

/* lock_timeout for a wait until deadline, in ms; "0" is no limit. */
static void pg_lock_timeout(char out[16], int64_t deadline)
{
    int64_t left;

    if (deadline == 0 || deadline == INT64_MAX) {
        strcpy(out, "0");
        return;
    }
    left = deadline - dlock_now_ms();
    if (left < 1)
        left = 1;
    if (left > INT_MAX)
        left = INT_MAX;
    snprintf(out, 16, "%d", (int)left);
}

/* Lock-wait failures that mean "not now": the wait ran out (55P03
 * lock_not_available, also NOWAIT's answer), was cancelled (57014, e.g. a
 * server-side statement_timeout shorter than ours), or lost a deadlock or
 * serialization check. ETIMEDOUT once the deadline has passed, else
 * EBUSY (core tries again). 0 for any other SQLSTATE. */
static int pg_busy_code(const char *state, int64_t deadline)
{
    if (strcmp(state, "55P03") != 0 && strcmp(state, "57014") != 0 &&
        strcmp(state, "40P01") != 0 && strcmp(state, "40001") != 0)
        return 0;
    if (deadline != 0 && deadline != INT64_MAX &&
        dlock_now_ms() + 5 >= deadline)
        return DLOCK_ETIMEDOUT;
    return DLOCK_EBUSY;
}

/* ---- the URI ----------------------------------------------------------- */

/* A copy of s that the configuration owns. */
static const char *keep(struct pg_conf *cf, const char *s)
{
    char *c = strdup(s);
    if (c != NULL)
        cf->own[cf->nown++] = c;
    return c;
}

static bool pg_ident_ok(const char *t)
{
    size_t n = strlen(t);

    if (n == 0 || n > 63 || !(isalpha((unsigned char)t[0]) || t[0] == '_'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)t[i]) || t[i] == '_') ||
            (unsigned char)t[i] >= 0x80)
            return false;
    return true;
}

static bool libpq_knows(const PQconninfoOption *opts, const char *kw)
{
    for (const PQconninfoOption *o = opts; o != NULL && o->keyword != NULL;
         o++)
        if (strcmp(o->keyword, kw) == 0)
            return true;
    return false;
}

static void pg_sql_free(struct pg_sql *q)
{
    char **all = (char **)q;
    for (size_t i = 0; i < sizeof *q / sizeof(char *); i++)
        free(all[i]);
    memset(q, 0, sizeof *q);
}

/* Print the mode's SQL with the quoted table name in it. */
static int pg_sql_build(struct pg_conf *cf)
{
    struct pg_sql *q = &cf->sql;
    const char *t = cf->table;
    int bad = 0;

#define MK(field, ...) bad |= asprintf(&q->field, __VA_ARGS__) < 0
/* inspect for both advisory modes: holders, waiters and the first holder
 * from pg_locks (the 64-bit key split into classid and objid), with FENCE
 * as the last column. */
#define ADV_INSPECT(FENCE)                                                 \
    "SELECT count(*) FILTER (WHERE l.granted),"                            \
    " count(*) FILTER (WHERE NOT l.granted),"                              \
    " min(CASE WHEN l.granted THEN coalesce(a.application_name, '')"       \
    "   || ' (pid ' || l.pid || ')' END), " FENCE                          \
    " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"       \
    " WHERE l.locktype = 'advisory' AND l.objsubid = 1"                    \
    " AND l.database = (SELECT oid FROM pg_database"                       \
    "   WHERE datname = current_database())"                               \
    " AND l.classid::bigint = (($1::bigint >> 32) & 4294967295)"           \
    " AND l.objid::bigint = ($1::bigint & 4294967295)"
    switch (cf->mode) {
    case PG_ADVISORY:
        /* The CTE runs first and once (it calls a volatile function), so
         * the upsert happens only when the lock was granted, in the same
         * statement and round trip. Autocommit makes the new fence durable
         * before the caller sees it. */
        for (int sh = 0; sh < 2; sh++) {
            const char *x = sh ? "_shared" : "";
            MK(lock_try[sh],
               "WITH l AS (SELECT pg_try_advisory_lock%s($1::bigint) AS got)"
               " INSERT INTO \"%s\" AS f (key, fence)"
               " SELECT $1::bigint, 1 FROM l WHERE l.got"
               " ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1"
               " RETURNING f.fence, pg_backend_pid()",
               x, t);
            MK(lock_wait[sh],
               "WITH l AS (SELECT pg_advisory_lock%s($1::bigint))"
               " INSERT INTO \"%s\" AS f (key, fence)"
               " SELECT $1::bigint, 1 FROM l"
               " ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1"
               " RETURNING f.fence, pg_backend_pid()",
               x, t);
            MK(unlock[sh], "SELECT pg_advisory_unlock%s($1::bigint)", x);
        }
        MK(ddl[0],
           "CREATE TABLE IF NOT EXISTS \"%s\" (key bigint PRIMARY KEY,"
           " fence bigint NOT NULL)",
           t);
        MK(inspect,
           ADV_INSPECT("(SELECT fence FROM \"%s\" WHERE key = $1::bigint)"),
           t);
        break;
    case PG_ADVISORY_XACT:
        /* The fence comes from a sequence, committed over the fence
         * connection (tx_fence): nothing in the lock's own transaction is
         * durable before the release commits it. */
        for (int sh = 0; sh < 2; sh++) {
            const char *x = sh ? "_shared" : "";
            MK(lock_try[sh], "SELECT pg_try_advisory_xact_lock%s($1::bigint)",
               x);
            MK(lock_wait[sh], "SELECT pg_advisory_xact_lock%s($1::bigint)",
               x);
        }
        MK(ddl[0], "CREATE SEQUENCE IF NOT EXISTS dlock_fence_seq");
        MK(inspect, ADV_INSPECT("NULL::bigint"));
        break;
    case PG_FOR_UPDATE:
        for (int sh = 0; sh < 2; sh++) {
            const char *lk = sh ? "SHARE" : "UPDATE";
            MK(lock_try[sh],
               "SELECT 1 FROM \"%s\" WHERE key = decode($1, 'hex')"
               " FOR %s NOWAIT",
               t, lk);
            MK(lock_wait[sh],
               "SELECT 1 FROM \"%s\" WHERE key = decode($1, 'hex') FOR %s",
               t, lk);
        }
        /* Exclusive holders name themselves in the row when they take it
         * and record their fence at the release, both visible once
         * committed; the fence itself comes from the sequence for the
         * reason given under advisory_xact. */
        MK(fence[0],
           "UPDATE \"%s\" SET owner = $2, locked_at = now()"
           " WHERE key = decode($1, 'hex')",
           t);
        MK(fence[1],
           "UPDATE \"%s\" SET fence = $2::bigint WHERE key = decode($1, 'hex')",
           t);
        MK(insert_row,
           "INSERT INTO \"%s\" (key, namespace, name)"
           " VALUES (decode($1, 'hex'), $2, $3) ON CONFLICT (key) DO NOTHING",
           t);
        MK(ddl[0], "CREATE SEQUENCE IF NOT EXISTS dlock_fence_seq");
        MK(ddl[1],
           "CREATE TABLE IF NOT EXISTS \"%s\" (key bytea PRIMARY KEY,"
           " namespace text NOT NULL, name text NOT NULL,"
           " owner text NOT NULL DEFAULT '', fence bigint NOT NULL DEFAULT 0,"
           " locked_at timestamptz)",
           t);
        /* A row locked by a running transaction carries that
         * transaction's id in xmax, which pg_stat_activity shows. */
        MK(inspect,
           "SELECT t.fence, t.owner, a.application_name, a.pid"
           " FROM \"%s\" t LEFT JOIN pg_stat_activity a"
           " ON a.backend_xid = t.xmax WHERE t.key = decode($1, 'hex')",
           t);
        break;
    case PG_LEASE:
        /* One statement claims the row if it is free, expired (by the
         * server's clock) or already ours (a retry whose answer was lost),
         * and otherwise says how long the holder's lease has left. */
        MK(lock_try[0],
           "WITH up AS (INSERT INTO \"%s\" AS l"
           " (key, namespace, name, owner, fence, expires_at)"
           " VALUES (decode($1, 'hex'), $2, $3, $4, 1,"
           "   now() + $5::bigint * interval '1 millisecond')"
           " ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner,"
           "   fence = l.fence + 1, expires_at = EXCLUDED.expires_at"
           " WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner"
           " RETURNING l.fence)"
           " SELECT (SELECT fence FROM up),"
           " (SELECT GREATEST(1, ceil(extract(epoch FROM expires_at - now())"
           "   * 1000))::bigint FROM \"%s\""
           "   WHERE key = decode($1, 'hex') AND expires_at > now())",
           t, t);
        MK(renew,
           "UPDATE \"%s\" AS l"
           " SET expires_at = now() + r.ms * interval '1 millisecond'"
           " FROM unnest($1::text[], $2::text[], $3::bigint[])"
           "   WITH ORDINALITY AS r(key, owner, ms, i)"
           " WHERE l.key = decode(r.key, 'hex') AND l.owner = r.owner"
           " RETURNING r.i",
           t);
        /* Release clears the row rather than deleting it: its fence must
         * keep counting from where it was. */
        MK(release,
           "WITH u AS (UPDATE \"%s\" SET owner = '', expires_at = '-infinity'"
           " WHERE key = decode($1, 'hex') AND owner = $2 RETURNING 1)"
           " SELECT pg_notify($3, '') FROM u",
           t);
        MK(ddl[0],
           "CREATE TABLE IF NOT EXISTS \"%s\" (key bytea PRIMARY KEY,"
           " namespace text NOT NULL, name text NOT NULL,"
           " owner text NOT NULL, fence bigint NOT NULL,"
           " expires_at timestamptz NOT NULL)",
           t);
        MK(inspect,
           "SELECT owner, fence, CASE WHEN expires_at > now() THEN"
           " ceil(extract(epoch FROM expires_at - now()) * 1000)::bigint"
           " ELSE 0 END"
           " FROM \"%s\" WHERE key = decode($1, 'hex')",
           t);
        break;
    }
#undef MK
#undef ADV_INSPECT
    return bad ? DLOCK_ENOMEM : DLOCK_OK;
}

static void pg_conf_free(struct pg_conf *cf)
{
    if (cf->own != NULL)
        for (size_t i = 0; i < cf->nown; i++)
            free(cf->own[i]);
    free(cf->own);
    pg_sql_free(&cf->sql);
    memset(cf, 0, sizeof *cf);
}

/* Join the hosts, or their ports, with commas (libpq's multi-host form). */
static char *pg_join(const struct dlock_uri *u, bool ports)
{
    size_t cap = 1;
    char *out, *p;

    for (size_t i = 0; i < u->nhosts; i++)
        cap += (ports ? 6 : strlen(u->hosts[i].host)) + 1;
    out = p = malloc(cap);
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < u->nhosts; i++) {
        if (i > 0)
            *p++ = ',';
        if (!ports)
            p += sprintf(p, "%s", u->hosts[i].host);
        else if (u->hosts[i].port != 0)
            p += sprintf(p, "%u", (unsigned)u->hosts[i].port);
    }
    *p = '\0';
    return out;
}

static int pg_conf_init(struct pg_conf *cf, const struct dlock_uri *u,
                        char *err, size_t errlen)
{
    size_t nkw = 0;
    char num[32];
    const char *v;
    PQconninfoOption *known;
    int mode, rc;
    bool any_host = false, any_port = false;

    memset(cf, 0, sizeof *cf);
    cf->own = calloc(2 * PG_KW_MAX + 8, sizeof *cf->own);
    if (cf->own == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");

#define ADD(K, V)                                                           \
    do {                                                                    \
        cf->kw[nkw] = (K);                                                  \
        cf->val[nkw] = keep(cf, (V));                                       \
        if (cf->val[nkw++] == NULL)                                         \
            goto nomem;                                                     \
    } while (0)

    if ((rc = dlock_uri_choice(u, "mode", pg_modes, PG_ADVISORY, &mode, err,
                               errlen)) != DLOCK_OK)
        goto fail;
    cf->mode = (enum pg_mode)mode;
    cf->mode_name = pg_modes[mode];
    cf->caps = cf->mode == PG_ADVISORY ? CAPS_ADVISORY
               : cf->mode == PG_LEASE  ? CAPS_LEASE
                                       : CAPS_TX;
    cf->timeout_ms = u->timeout_ms;
    cf->lease_ms = u->lease_ms;
    snprintf(cf->ns, sizeof cf->ns, "%s", u->ns);
    dlock_sha256(cf->ns_digest, u->ns, strlen(u->ns));

    v = dlock_uri_param(u, "table");
    if (v != NULL && cf->mode == PG_ADVISORY_XACT) {
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "table: mode=advisory_xact keeps no table (its "
                          "fencing tokens come from the sequence "
                          "dlock_fence_seq)");
        goto fail;
    }
    if (v != NULL && !pg_ident_ok(v)) {
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "table: expected 1 to 63 characters of "
                          "[A-Za-z0-9_], not starting with a digit");
        goto fail;
    }
    snprintf(cf->table, sizeof cf->table, "%s",
             v != NULL                    ? v
             : cf->mode == PG_ADVISORY    ? "dlock_fences"
             : cf->mode == PG_FOR_UPDATE  ? "dlock_locks"
             : cf->mode == PG_LEASE       ? "dlock_leases"
                                          : "");
    if (dlock_uri_param(u, "connect_timeout") != NULL) {
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "connect_timeout: use timeout= (it bounds the "
                          "connection and every call)");
        goto fail;
    }
    if (u->path[0] != '\0' && strchr(u->path + 1, '/') != NULL) {
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "path: expected /database");
        goto fail;
    }

    /* Where and who. */
    for (size_t i = 0; i < u->nhosts; i++) {
        any_host |= u->hosts[i].host[0] != '\0';
        any_port |= u->hosts[i].port != 0;
    }
    cf->multi_host = u->nhosts > 1;
    if (any_host || u->nhosts > 1) {
        char *h = pg_join(u, false);
        if (h == NULL)
            goto nomem;
        cf->kw[nkw] = "host";
        cf->val[nkw++] = cf->own[cf->nown++] = h;
    }
    if (any_port) {
        char *p = pg_join(u, true);
        if (p == NULL)
            goto nomem;
        cf->kw[nkw] = "port";
        cf->val[nkw++] = cf->own[cf->nown++] = p;
    }
    if (u->user != NULL)
        ADD("user", u->user);
    if (u->password != NULL)
        ADD("password", u->password);
    if (u->path[0] == '/' && u->path[1] != '\0')
        ADD("dbname", u->path + 1);
    /* libpq's connect_timeout (whole seconds, at least 2) only serves the
     * multi-host path, where libpq moves on to the next host by itself. */
    {
        uint32_t secs = (cf->timeout_ms + 999) / 1000;
        snprintf(num, sizeof num, "%u", secs < 2 ? 2 : secs);
    }
    ADD("connect_timeout", num);
    ADD("client_encoding", "UTF8");

    /* The pass-through parameters, checked against the libpq we run on. */
    known = PQconndefaults();
    for (size_t i = 0; i < u->nparams; i++) {
        const char *k = u->params[i].key;
        if (strcmp(k, "mode") == 0 || strcmp(k, "table") == 0)
            continue;
        if (!libpq_knows(known, k)) {
            PQconninfoFree(known);
            rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                              "%s: not supported by this libpq (version "
                              "%d)",
                              k, PQlibVersion());
            goto fail;
        }
        if (nkw >= PG_KW_MAX - 8) {
            PQconninfoFree(known);
            rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                              "too many parameters");
            goto fail;
        }
        cf->kw[nkw] = keep(cf, k);
        if (cf->kw[nkw] == NULL) {
            PQconninfoFree(known);
            goto nomem;
        }
        ADD(cf->kw[nkw], u->params[i].value);
    }
    PQconninfoFree(known);

    /* Our defaults where the URI said nothing. The server sees who we are
     * (the CLI tests terminate a holder's connections by this name). */
    if (dlock_uri_param(u, "application_name") == NULL) {
        snprintf(num, sizeof num, "dlock:%ld", (long)getpid());
        ADD("application_name", num);
    }
    /* Client-side TCP keepalives and a user timeout, so a dead server is
     * noticed even on a connection that waits (LISTEN, a long lock wait). */
    {
        uint32_t s = cf->timeout_ms ? (cf->timeout_ms + 999) / 1000 : 60;
        if (dlock_uri_param(u, "keepalives") == NULL)
            ADD("keepalives", "1");
        if (dlock_uri_param(u, "keepalives_idle") == NULL) {
            snprintf(num, sizeof num, "%u", s);
            ADD("keepalives_idle", num);
        }
        if (dlock_uri_param(u, "keepalives_interval") == NULL) {
            snprintf(num, sizeof num, "%u", s / 3 > 0 ? s / 3 : 1);
            ADD("keepalives_interval", num);
        }
        if (dlock_uri_param(u, "keepalives_count") == NULL)
            ADD("keepalives_count", "3");
        if (dlock_uri_param(u, "tcp_user_timeout") == NULL &&
            cf->timeout_ms != 0) {
            snprintf(num, sizeof num, "%u", cf->timeout_ms);
            ADD("tcp_user_timeout", num);
        }
    }
    cf->kw[nkw] = NULL;
    cf->val[nkw] = NULL;
#undef ADD

    /* Server-side keepalives for connection-bound locks: a client host
     * that vanishes without closing its sockets frees its locks after
     * about two thirds of a lease, not after the kernel's two hours. */
    {
        uint32_t s = cf->lease_ms / 1000;
        snprintf(cf->ka_idle, sizeof cf->ka_idle, "%u", s / 3 > 0 ? s / 3 : 1);
        snprintf(cf->ka_interval, sizeof cf->ka_interval, "%u",
                 s / 9 > 0 ? s / 9 : 1);
        snprintf(cf->ka_count, sizeof cf->ka_count, "3");
    }
    if ((rc = pg_sql_build(cf)) != DLOCK_OK)
        goto nomem;
    return DLOCK_OK;

nomem:
    rc = dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
fail:
    pg_conf_free(cf);
    return rc;
}

static int pg_ctx_open(void **out, const struct dlock_uri *uri, char *err,
                       size_t errlen)
{
    struct pg_ctx *x = calloc(1, sizeof *x);
    int rc;

    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    if ((rc = pg_conf_init(&x->cf, uri, err, errlen)) != DLOCK_OK) {
        free(x);
        return rc;
    }
    pg_listen_init(x);
    pthread_mutex_init(&x->fence_mu, NULL);
    *out = x;
    return DLOCK_OK;
}

static void tx_fence_close(struct pg_ctx *x);

static void pg_ctx_close(void *ctx)
{
    struct pg_ctx *x = ctx;

    tx_fence_close(x);
    pg_listen_stop(x);
    pg_conf_free(&x->cf);
    free(x);
}

/* ---- connections -------------------------------------------------------- */

int pg_poll(int fd, short events, int64_t deadline)
{
    struct pollfd p = {fd, events, 0};

    for (;;) {
        int ms = -1, n;
        if (deadline != INT64_MAX) {
            int64_t left = deadline - dlock_now_ms();
            if (left <= 0)
                return 0;
            ms = left > INT_MAX ? INT_MAX : (int)left;
        }
        n = poll(&p, 1, ms);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static void pg_quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* NOTICEs and WARNINGs (e.g. "relation exists, skipping") */
}

PGconn *pg_connect_raw(const struct pg_conf *cf, int64_t deadline, char *err,
                       size_t errlen)
{
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    char line[512];
    PGconn *c;

    if (cf->multi_host) {
        /* libpq's blocking connect tries the hosts in turn and gives each
         * connect_timeout; our own poll loop below cannot skip a host. */
        c = PQconnectdbParams(cf->kw, cf->val, 0);
    } else {
        c = PQconnectStartParams(cf->kw, cf->val, 0);
        while (c != NULL && PQstatus(c) != CONNECTION_BAD &&
               st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
            int w = 1;
            if (PQsocket(c) >= 0)
                w = pg_poll(PQsocket(c),
                            st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                            deadline);
            if (w == 0) {
                PQfinish(c);
                dlock_errorf(err, errlen, DLOCK_ECONNECT,
                             "connect: no answer within %u ms",
                             cf->timeout_ms);
                return NULL;
            }
            st = PQconnectPoll(c);
        }
    }
    if (c == NULL) {
        dlock_errorf(err, errlen, DLOCK_ENOMEM, "connect: out of memory");
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        pg_oneline(line, sizeof line, PQerrorMessage(c));
        dlock_errorf(err, errlen, DLOCK_ECONNECT, "connect: %s", line);
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, pg_quiet, NULL);
    return c;
}

/* A server that ends an idle connection (shutdown, pg_terminate_backend)
 * sends a FATAL first; libpq hands it to the notice processor. Keep it for
 * the message that reports the lost connection. */
static void pg_notice(void *arg, const char *msg)
{
    struct pg_session *s = arg;

    if (strncmp(msg, "FATAL:", 6) == 0)
        pg_oneline(s->fatal, sizeof s->fatal, msg + 6);
}

/* The connection's failure in one line, with the server's last words. */
static void pg_set_why(struct pg_session *s, const char *why)
{
    char line[256];

    pg_oneline(line, sizeof line, why);
    if (s->fatal[0] != '\0')
        snprintf(s->why, sizeof s->why, "%s (%s)", s->fatal, line);
    else
        snprintf(s->why, sizeof s->why, "%s", line);
}

static void pg_drop(struct pg_session *s)
{
    if (s->conn != NULL) {
        if (!s->fence_conn)
            dlock_session_watch(&s->base, -1);
        PQfinish(s->conn);
    }
    s->conn = NULL;
}

/* "N" milliseconds of server-side silence allowed for a lease. */
static void pg_idle_text(char out[16], uint32_t lease_ms)
{
    snprintf(out, 16, "%u", dlock_server_timeout_ms(lease_ms));
}

static int pg_exec(struct pg_session *s, const struct pg_q *q, int nq,
                   int64_t deadline, struct pg_res *res);
static void pg_res_clear(struct pg_res *res);

/* Connect (or reconnect) the session's connection. */
static int pg_connect(struct pg_session *s, char *err, size_t errlen)
{
    const struct pg_conf *cf = s->cf;
    int64_t deadline = pg_deadline(cf);
    struct pg_res res;
    PGconn *c;
    int rc;

    pg_drop(s);
    c = pg_connect_raw(cf, deadline, err, errlen);
    if (c == NULL)
        return DLOCK_ECONNECT;
    if (PQsetnonblocking(c, 1) != 0 || PQenterPipelineMode(c) != 1) {
        pg_oneline(s->why, sizeof s->why, PQerrorMessage(c));
        PQfinish(c);
        return dlock_errorf(err, errlen, DLOCK_ERROR, "connect: %s", s->why);
    }
    PQsetNoticeProcessor(c, pg_notice, s);
    s->conn = c;
    s->gen++;
    s->backend_pid = 0;
    s->fatal[0] = '\0';
    /* libpq marks its socket close-on-exec; make sure [B-EXEC-1]. */
    dlock_fd_cloexec(PQsocket(c));
    if (s->fence_conn || cf->mode == PG_LEASE) {
        struct pg_q q = {SQL_DURABLE, 0, {NULL}};
        rc = pg_exec(s, &q, 1, deadline, &res);
        if (rc == PG_SQLERR)
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "session set-up: %s",
                              PQresultErrorField(res.r[res.failed],
                                                 PG_DIAG_MESSAGE_PRIMARY));
        else if (rc != DLOCK_OK)
            dlock_errorf(err, errlen, rc, "session set-up: %s", s->why);
        pg_res_clear(&res);
        if (rc != DLOCK_OK) {
            pg_drop(s);
            return rc;
        }
    }
    if (s->fence_conn)
        return DLOCK_OK;
    /* Connection-bound modes: the locks end with this socket; lease: a
     * dropped connection is noticed before the next call [B-WATCH-1]. */
    dlock_session_watch(&s->base, PQsocket(c));
    if (cf->mode != PG_ADVISORY)
        return DLOCK_OK;
    if (PQserverVersion(c) < 140000) {
        pg_drop(s);
        return dlock_errorf(err, errlen, DLOCK_EUNSUPPORTED,
                            "mode=advisory needs PostgreSQL 14 or later "
                            "(idle_session_timeout bounds how long a holder "
                            "cut off from the server believes it holds); "
                            "use mode=advisory_xact or mode=lease");
    }
    /* Session advisory locks live as long as this server process: note
     * which one it is (a proxy that swaps it shows up as a change), make
     * the server end the session when it falls silent for longer than the
     * lease [B-BOUND-1], and notice a vanished client host. */
    char idle[16];
    pg_idle_text(idle, cf->lease_ms);
    struct pg_q q = {SQL_SETUP_SESSION, 4,
                     {cf->ka_idle, cf->ka_interval, cf->ka_count, idle}};
    rc = pg_exec(s, &q, 1, deadline, &res);
    if (rc == DLOCK_OK) {
        s->backend_pid = atoi(PQgetvalue(res.r[0], 0, 0));
        s->covered_ms = cf->lease_ms;
    }
    else if (rc == PG_SQLERR)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "session set-up: %s",
                          PQresultErrorField(res.r[res.failed],
                                             PG_DIAG_MESSAGE_PRIMARY));
    else
        dlock_errorf(err, errlen, rc, "session set-up: %s", s->why);
    pg_res_clear(&res);
    if (rc != DLOCK_OK)
        pg_drop(s);
    return rc;
}

/*
 * Is the connection still there? One poll() without waiting: a server that
 * restarted, or a pg_terminate_backend(), has left a FATAL message and an
 * end of file on the socket, which libpq reads here. Then a session without
 * grants can reconnect before sending, instead of failing the call.
 */
static bool pg_alive(struct pg_session *s)
{
    PGconn *c = s->conn;
    PGnotify *n;
    bool ok = c != NULL && PQstatus(c) == CONNECTION_OK;

    for (int i = 0; ok && i < 4; i++) {
        struct pollfd p = {PQsocket(c), POLLIN, 0};
        if (poll(&p, 1, 0) <= 0)
            break;
        ok = PQconsumeInput(c) == 1 && PQstatus(c) == CONNECTION_OK;
        if (ok)
            (void)PQisBusy(c); /* parse it: a FATAL goes to pg_notice */
    }
    if (!ok) {
        if (c != NULL)
            pg_set_why(s, PQerrorMessage(c));
        if (s->why[0] == '\0')
            snprintf(s->why, sizeof s->why, "not connected");
        pg_drop(s);
        return false;
    }
    while ((n = PQnotifies(c)) != NULL)
        PQfreemem(n);
    return true;
}

/* Make the session usable for a new request: a dead connection is
 * replaced, unless connection-bound locks lived on it (those are lost, and
 * core must learn that the session is broken). */
static int pg_ready(struct pg_session *s)
{
    char err[512];
    int rc;

    if (pg_alive(s))
        return DLOCK_OK;
    if (s->ngrants > 0)
        return dlock_session_error(&s->base, DLOCK_ECONNECT,
                                   "connection lost: %s", s->why);
    err[0] = '\0';
    rc = pg_connect(s, err, sizeof err);
    if (rc != DLOCK_OK)
        return dlock_session_error(&s->base, rc, "%s", err);
    return DLOCK_OK;
}

/* ---- running statements ------------------------------------------------- */

static void pg_res_clear(struct pg_res *res)
{
    for (int i = 0; i < PG_MAXQ; i++) {
        PQclear(res->r[i]);
        res->r[i] = NULL;
    }
}

/* The connection failed or timed out: drop it, say why, ECONNECT. */
static int pg_broken(struct pg_session *s, struct pg_res *res,
                     const char *why)
{
    if (why != NULL)
        snprintf(s->why, sizeof s->why, "%s", why);
    else if (s->conn != NULL)
        pg_set_why(s, PQerrorMessage(s->conn));
    if (s->why[0] == '\0')
        snprintf(s->why, sizeof s->why, "connection lost");
    pg_res_clear(res);
    pg_drop(s);
    return dlock_session_error(&s->base, DLOCK_ECONNECT, "%s", s->why);
}

static int pg_io_fail(struct pg_session *s, struct pg_res *res, int w)
{
    char why[96];

    if (w < 0)
        snprintf(why, sizeof why, "poll: %s", strerror(errno));
    else
        snprintf(why, sizeof why,
                 "no answer from the server within %u ms; connection closed",
                 s->cf->timeout_ms);
    return pg_broken(s, res, why);
}

/*
 * Send nq statements and a Sync in one round trip, and read their results
 * by the deadline. DLOCK_OK: every statement ran, res->r[i] holds each
 * result (the caller clears them). PG_SQLERR: statement res->failed
 * failed with res->state (the rest were skipped; an explicit transaction
 * is left in its failed state). DLOCK_ECONNECT: the connection broke or
 * the deadline passed; it has been dropped.
 */
static int pg_exec(struct pg_session *s, const struct pg_q *q, int nq,
                   int64_t deadline, struct pg_res *res)
{
    PGconn *c = s->conn;
    int qi = 0, w;

    memset(res, 0, sizeof *res);
    res->failed = -1;
    if (c == NULL)
        return pg_broken(s, res, "not connected");
    for (int i = 0; i < nq; i++)
        if (!PQsendQueryParams(c, q[i].sql, q[i].n, NULL, q[i].v, NULL, NULL,
                               0))
            return pg_broken(s, res, NULL);
    if (!PQpipelineSync(c))
        return pg_broken(s, res, NULL);
    while ((w = PQflush(c)) != 0) {
        if (w < 0)
            return pg_broken(s, res, NULL);
        if ((w = pg_poll(PQsocket(c), POLLIN | POLLOUT, deadline)) <= 0)
            return pg_io_fail(s, res, w);
        if (!PQconsumeInput(c))
            return pg_broken(s, res, NULL);
    }
    for (;;) {
        PGresult *r;
        while (PQisBusy(c)) {
            if ((w = pg_poll(PQsocket(c), POLLIN, deadline)) <= 0)
                return pg_io_fail(s, res, w);
            if (!PQconsumeInput(c))
                return pg_broken(s, res, NULL);
        }
        r = PQgetResult(c);
        if (r == NULL) {
            /* The end of one statement's results. */
            if (PQstatus(c) != CONNECTION_OK || ++qi > nq)
                return pg_broken(s, res, NULL);
            continue;
        }
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (PQresultStatus(r) == PGRES_FATAL_ERROR && res->failed < 0 &&
            qi < nq) {
            const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            res->failed = qi;
            snprintf(res->state, sizeof res->state, "%s", st ? st : "XX000");
        }
        if (qi < nq && res->r[qi] == NULL)
            res->r[qi] = r;
        else
            PQclear(r);
    }
    if (PQstatus(c) != CONNECTION_OK || qi != nq)
        return pg_broken(s, res, NULL);
    return res->failed >= 0 ? PG_SQLERR : DLOCK_OK;
}

/* Report a failed statement in the server's words. */
static int pg_sqlfail(struct pg_session *s, int code, const char *what,
                      const struct pg_res *res)
{
    const PGresult *r = res->failed >= 0 ? res->r[res->failed] : NULL;
    const char *msg =
        r != NULL ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    return dlock_session_error(&s->base, code, "%s: %s (SQLSTATE %s)", what,
                               msg != NULL ? msg : "failed", res->state);
}

/* End a transaction left open or failed by an attempt that did not get
 * the lock; a broken connection is dropped by pg_exec. */
static void pg_rollback(struct pg_session *s)
{
    struct pg_q q = {"ROLLBACK", 0, {NULL}};
    struct pg_res res;

    if (s->conn == NULL || PQtransactionStatus(s->conn) == PQTRANS_IDLE)
        return;
    pg_exec(s, &q, 1, pg_deadline(s->cf), &res);
    pg_res_clear(&res);
}

/*
 * Create the mode's table (and sequence) if missing. Concurrent first uses
 * must not fail, but two CREATE TABLE IF NOT EXISTS running at once can:
 * both see no table, and the second fails on pg_type's unique index (23505)
 * when the first commits. An advisory transaction lock serialises dlock's
 * own clients; anyone else creating the table at the same moment shows up
 * as that error (or 42P07), which means the table now exists: go again, and
 * IF NOT EXISTS skips what is there.
 */
static int pg_ensure_schema(struct pg_session *s, int64_t deadline)
{
    const struct pg_conf *cf = s->cf;
    struct pg_q q[4];
    struct pg_res res;
    int nq = 0, rc = DLOCK_OK;

    q[nq++] = (struct pg_q){"SELECT pg_advisory_xact_lock(" PG_DDL_KEY ")",
                            0, {NULL}};
    for (int i = 0; i < 3 && cf->sql.ddl[i] != NULL; i++)
        q[nq++] = (struct pg_q){cf->sql.ddl[i], 0, {NULL}};
    for (int attempt = 0; attempt < 3; attempt++) {
        rc = pg_exec(s, q, nq, deadline, &res);
        if (rc == PG_SQLERR && (strcmp(res.state, "23505") == 0 ||
                                strcmp(res.state, "42P07") == 0)) {
            pg_res_clear(&res);
            continue; /* created by someone else just now */
        }
        if (rc == PG_SQLERR)
            rc = pg_sqlfail(s, DLOCK_ERROR, "creating the lock table", &res);
        pg_res_clear(&res);
        return rc;
    }
    return dlock_session_error(&s->base, DLOCK_ERROR,
                               "creating the lock table: it kept being "
                               "created concurrently");
}

/* pg_exec, and if the table is missing (42P01, first use), create it and
 * try once more. Besides pg_exec's results, a failure to create the table
 * comes back as its DLOCK_ code: callers return any negative result. */
static int pg_run(struct pg_session *s, const struct pg_q *q, int nq,
                  int64_t deadline, struct pg_res *res)
{
    int rc = pg_exec(s, q, nq, deadline, res);

    if (rc != PG_SQLERR || strcmp(res->state, "42P01") != 0)
        return rc;
    pg_res_clear(res);
    pg_rollback(s);
    if ((rc = pg_ensure_schema(s, deadline)) != DLOCK_OK)
        return rc;
    return pg_exec(s, q, nq, deadline, res);
}

static uint64_t pg_u64(const PGresult *r, int row, int col)
{
    return strtoull(PQgetvalue(r, row, col), NULL, 10);
}

/* ---- advisory ----------------------------------------------------------- */

/* After a failed statement that may have taken a session lock: session
 * advisory locks ignore transaction rollback, so unlock explicitly (a
 * WARNING and false if it was not taken, which is harmless). */
static void adv_unlock_quietly(struct pg_session *s, const char *key, int sh)
{
    struct pg_q q = {s->cf->sql.unlock[sh], 1, {key}};
    struct pg_res res;

    if (s->conn == NULL)
        return;
    pg_exec(s, &q, 1, pg_deadline(s->cf), &res);
    pg_res_clear(&res);
}

/* One try (deadline 0), or one wait in the server's queue until deadline. */
static int adv_attempt(struct pg_session *s, const struct dlock_request *req,
                       int64_t deadline, struct dlock_grant *g)
{
    const struct pg_conf *cf = s->cf;
    int sh = (req->flags & DLOCK_LOCK_SHARED) != 0;
    char key[24], lt[16], idle[16];
    struct pg_q q[3];
    struct pg_res res;
    uint8_t d[32];
    uint64_t k, fence;
    int nq = 0, rc, pid;
    /* The session's silence limit must cover the longest lease of its
     * locks; with none held yet it follows this one exactly (so a short
     * lease is also freed soon after its holder fell silent). */
    bool raise = req->lease_ms > s->covered_ms ||
                 (s->ngrants == 0 && req->lease_ms != s->covered_ms);

    pg_digest(cf, req->name, req->name_len, d);
    k = pg_key64(d);
    pg_key_text(key, k);
    if (raise) {
        /* In the same round trip (and only when it changes), so the
         * watchdog's renewals, a third of a lease apart, keep the session
         * and every lock on it alive [B-BOUND-1]. */
        pg_idle_text(idle, req->lease_ms);
        q[nq++] = (struct pg_q){SQL_IDLE_LIMIT, 1, {idle}};
    }
    if (deadline != 0) {
        /* A wait in the server's lock queue, bounded by a lock_timeout
         * local to this implicit transaction (set_config(..., true)). */
        pg_lock_timeout(lt, deadline);
        q[nq++] = (struct pg_q){SQL_LOCK_TIMEOUT, 1, {lt}};
        q[nq++] = (struct pg_q){cf->sql.lock_wait[sh], 1, {key}};
    } else {
        q[nq++] = (struct pg_q){cf->sql.lock_try[sh], 1, {key}};
    }
    rc = pg_run(s, q, nq, pg_wait_deadline(cf, deadline), &res);
    if (rc < 0) /* ECONNECT, or creating the table failed */
        return rc;
    if (rc == PG_SQLERR) {
        rc = pg_busy_code(res.state, deadline);
        if (rc == 0)
            rc = pg_sqlfail(s, DLOCK_ERROR, "lock", &res);
        pg_res_clear(&res);
        adv_unlock_quietly(s, key, sh);
        return rc;
    }
    if (PQntuples(res.r[nq - 1]) == 0) {
        pg_res_clear(&res);
        return DLOCK_EBUSY;
    }
    fence = pg_u64(res.r[nq - 1], 0, 0);
    pid = atoi(PQgetvalue(res.r[nq - 1], 0, 1));
    pg_res_clear(&res);
    if (pid != s->backend_pid) {
        adv_unlock_quietly(s, key, sh);
        return dlock_session_error(
            &s->base, DLOCK_ERROR,
            "the lock was taken by server process %d, but this connection "
            "began on process %d: a transaction-pooling proxy (e.g. "
            "PgBouncer pool_mode=transaction) stands between dlock and "
            "PostgreSQL, and session advisory locks do not hold through "
            "it; use mode=advisory_xact",
            pid, s->backend_pid);
    }
    g->fence = fence;
    g->word[0] = k;
    g->word[1] = s->gen;
    s->ngrants++;
    if (raise)
        s->covered_ms = req->lease_ms;
    return DLOCK_OK;
}

static int adv_acquire(struct pg_session *s, const struct dlock_request *req,
                       int64_t deadline, struct dlock_grant *g)
{
    int rc;

    /* Most acquisitions find the lock free: the one-statement try (lock and
     * fence in one round trip) answers them, and only a taken lock joins
     * the server's queue. This does not jump the queue: PostgreSQL makes a
     * new request that conflicts with waiting ones wait too, so the try
     * fails while others are queued. */
    if (deadline != 0 && (rc = adv_attempt(s, req, 0, g)) != DLOCK_EBUSY)
        return rc;
    return adv_attempt(s, req, deadline, g);
}

static int adv_release(struct pg_session *s, const struct dlock_request *req,
                       struct dlock_grant *g)
{
    int sh = (req->flags & DLOCK_LOCK_SHARED) != 0;
    char key[24];
    struct pg_q q;
    struct pg_res res;
    int rc;

    pg_key_text(key, g->word[0]);
    q = (struct pg_q){s->cf->sql.unlock[sh], 1, {key}};
    rc = pg_exec(s, &q, 1, pg_deadline(s->cf), &res);
    if (rc == DLOCK_OK && strcmp(PQgetvalue(res.r[0], 0, 0), "t") != 0)
        rc = dlock_session_error(
            &s->base, DLOCK_ENOTOWNER,
            "the server says this session did not hold the lock (was "
            "pg_advisory_unlock_all() run on it, or is a pooling proxy "
            "in between?)");
    else if (rc == PG_SQLERR)
        rc = pg_sqlfail(s, DLOCK_ERROR, "unlock", &res);
    pg_res_clear(&res);
    return rc;
}

/* ---- the transactional modes: advisory_xact and for_update -------------- */

/*
 * A fence for a lock held by an open transaction. It cannot be taken in
 * that transaction: nothing in it is durable until it commits, which is at
 * the release, so a server crash would give the next holder the same
 * token (the history checker found exactly that). So it is committed over
 * the client's own autocommitted connection, after the lock is held, in
 * one more round trip; synchronous_commit is on there (SQL_DURABLE).
 */
static int tx_fence(struct pg_session *s, uint64_t *out)
{
    struct pg_ctx *x = s->x;
    struct pg_res res;
    char err[512] = "";
    int rc = DLOCK_ECONNECT;

    pthread_mutex_lock(&x->fence_mu);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct pg_q q = {SQL_FENCE_DURABLE, 0, {NULL}};
        struct pg_session *fs = x->fence;
        if (fs == NULL) {
            fs = calloc(1, sizeof *fs);
            if (fs == NULL) {
                rc = dlock_errorf(err, sizeof err, DLOCK_ENOMEM,
                                  "out of memory");
                break;
            }
            fs->x = x;
            fs->cf = &x->cf;
            fs->fence_conn = true;
            if ((rc = pg_connect(fs, err, sizeof err)) != DLOCK_OK) {
                free(fs);
                break;
            }
            x->fence = fs;
        }
        rc = pg_run(fs, &q, 1, pg_deadline(&x->cf), &res);
        if (rc == DLOCK_OK)
            *out = pg_u64(res.r[0], 0, 0);
        else if (rc == PG_SQLERR)
            rc = dlock_errorf(err, sizeof err, DLOCK_ERROR, "%s (SQLSTATE %s)",
                              PQresultErrorField(res.r[res.failed],
                                                 PG_DIAG_MESSAGE_PRIMARY),
                              res.state);
        else
            snprintf(err, sizeof err, "%s", fs->why);
        pg_res_clear(&res);
        if (rc != DLOCK_ECONNECT)
            break;
        /* A reply lost with the connection may have taken a value: once
         * more skips one, which fencing allows. */
        pg_drop(fs);
        free(fs);
        x->fence = NULL;
    }
    pthread_mutex_unlock(&x->fence_mu);
    if (rc != DLOCK_OK)
        return dlock_session_error(&s->base, rc, "fence connection: %s", err);
    return DLOCK_OK;
}

static void tx_fence_close(struct pg_ctx *x)
{
    if (x->fence != NULL) {
        pg_drop(x->fence);
        free(x->fence);
        x->fence = NULL;
    }
    pthread_mutex_destroy(&x->fence_mu);
}

static int tx_acquire(struct pg_session *s, const struct dlock_request *req,
                      int64_t deadline, struct dlock_grant *g)
{
    const struct pg_conf *cf = s->cf;
    int sh = (req->flags & DLOCK_LOCK_SHARED) != 0;
    bool rows = cf->mode == PG_FOR_UPDATE;
    char key[65], lt[16], idle[16];
    struct pg_q q[PG_MAXQ];
    struct pg_res res;
    uint8_t d[32];
    int rc;

    pg_digest(cf, req->name, req->name_len, d);
    if (rows)
        pg_hex(key, d);
    else
        pg_key_text(key, pg_key64(d));
    pg_lock_timeout(lt, deadline);
    pg_idle_text(idle, req->lease_ms);

    /* Two tries at most: the second after creating a missing lock row. */
    for (int attempt = 0; attempt < 2; attempt++) {
        int nq = 0, lockq;
        const PGresult *last;

        /* BEGIN, the wait's limits, the lock, the fence: one round trip.
         * The keepalives and the silence limit [B-BOUND-1] are local to
         * the transaction, which is exactly the lock's life. */
        q[nq++] = (struct pg_q){"BEGIN", 0, {NULL}};
        q[nq++] = (struct pg_q){SQL_SET_TX, 5,
                                {lt, cf->ka_idle, cf->ka_interval,
                                 cf->ka_count, idle}};
        lockq = nq;
        q[nq++] = (struct pg_q){deadline ? cf->sql.lock_wait[sh]
                                         : cf->sql.lock_try[sh],
                                1, {key}};
        /* for_update's exclusive holder names itself in the row (for
         * inspect); the fence follows over the fence connection. */
        if (rows && !sh)
            q[nq++] = (struct pg_q){cf->sql.fence[0], 2, {key, req->owner}};

        rc = pg_run(s, q, nq, pg_wait_deadline(cf, deadline), &res);
        if (rc < 0) /* ECONNECT, or creating the table failed */
            return rc;
        if (rc == PG_SQLERR) {
            rc = pg_busy_code(res.state, deadline);
            if (rc == 0)
                rc = pg_sqlfail(s, DLOCK_ERROR, "lock", &res);
            pg_res_clear(&res);
            pg_rollback(s);
            return rc;
        }
        if (rows && PQntuples(res.r[lockq]) == 0) {
            /* No lock row yet: make it, committed on its own so no other
             * client waits on our insert, then lock it. */
            struct pg_q ins = {cf->sql.insert_row, 3,
                               {key, "", req->name}};
            pg_res_clear(&res);
            pg_rollback(s);
            if (attempt > 0)
                break;
            ins.v[1] = cf->ns;
            rc = pg_run(s, &ins, 1, pg_deadline(cf), &res);
            if (rc == PG_SQLERR)
                rc = pg_sqlfail(s, DLOCK_ERROR, "insert the lock row", &res);
            pg_res_clear(&res);
            if (rc != DLOCK_OK)
                return rc;
            continue;
        }
        last = res.r[lockq];
        if (PQntuples(last) == 0 ||
            (!rows && deadline == 0 &&
             strcmp(PQgetvalue(last, 0, 0), "t") != 0)) {
            pg_res_clear(&res);
            pg_rollback(s);
            return DLOCK_EBUSY; /* pg_try_advisory_xact_lock said no */
        }
        pg_res_clear(&res);
        if ((rc = tx_fence(s, &g->fence)) != DLOCK_OK) {
            pg_rollback(s);
            return rc;
        }
        g->word[1] = s->gen;
        s->ngrants++;
        return DLOCK_OK;
    }
    return dlock_session_error(&s->base, DLOCK_ERROR,
                               "the lock row vanished right after it was "
                               "inserted (is something deleting rows of "
                               "table %s?)",
                               cf->table);
}

static int tx_release(struct pg_session *s, const struct dlock_request *req,
                      const struct dlock_grant *g)
{
    const struct pg_conf *cf = s->cf;
    char key[65], fence[24];
    struct pg_q q[2];
    struct pg_res res;
    uint8_t d[32];
    int nq = 0, rc;

    if (cf->mode == PG_FOR_UPDATE && !(req->flags & DLOCK_LOCK_SHARED)) {
        /* The row shows this holding's fence to inspect from now on. */
        pg_digest(cf, req->name, req->name_len, d);
        pg_hex(key, d);
        snprintf(fence, sizeof fence, "%llu", (unsigned long long)g->fence);
        q[nq++] = (struct pg_q){cf->sql.fence[1], 2, {key, fence}};
    }
    q[nq++] = (struct pg_q){"COMMIT", 0, {NULL}};
    rc = pg_exec(s, q, nq, pg_deadline(cf), &res);
    if (rc == DLOCK_OK && strcmp(PQcmdStatus(res.r[nq - 1]), "COMMIT") != 0)
        rc = dlock_session_error(&s->base, DLOCK_ELOST,
                                 "the transaction holding the lock had "
                                 "failed; it was rolled back");
    else if (rc == PG_SQLERR)
        rc = pg_sqlfail(s, DLOCK_ERROR, "commit", &res);
    pg_res_clear(&res);
    return rc;
}

/* ---- connection-bound renewal (advisory and the transactional modes) ---- */

/* One round trip proves the connection, and so every lock on it, alive. */
static int cb_renew(struct pg_session *s, struct dlock_renewal *items,
                    size_t n)
{
    const struct pg_conf *cf = s->cf;
    char why[512] = "";
    struct pg_res res;
    bool any = false;
    int rc;

    for (size_t i = 0; i < n; i++)
        any |= items[i].grant->word[1] == s->gen;
    if (!any)
        snprintf(why, sizeof why, "the connection that held it was lost");
    else if (!pg_alive(s))
        snprintf(why, sizeof why, "connection lost: %s", s->why);
    else {
        struct pg_q q = {cf->mode == PG_ADVISORY ? SQL_PID : SQL_ONE, 0,
                         {NULL}};
        rc = pg_exec(s, &q, 1, pg_deadline(cf), &res);
        if (rc == DLOCK_ECONNECT)
            snprintf(why, sizeof why, "connection lost: %s", s->why);
        else if (rc == PG_SQLERR)
            snprintf(why, sizeof why, "%s (SQLSTATE %s)",
                     PQresultErrorField(res.r[0], PG_DIAG_MESSAGE_PRIMARY),
                     res.state);
        else if (cf->mode == PG_ADVISORY &&
                 atoi(PQgetvalue(res.r[0], 0, 0)) != s->backend_pid)
            snprintf(why, sizeof why,
                     "the connection now reaches server process %s, not %d "
                     "that holds the lock (a transaction-pooling proxy?)",
                     PQgetvalue(res.r[0], 0, 0), s->backend_pid);
        else if (cf->mode != PG_ADVISORY &&
                 PQtransactionStatus(s->conn) != PQTRANS_INTRANS)
            snprintf(why, sizeof why,
                     "the transaction holding the lock has ended");
        pg_res_clear(&res);
    }
    for (size_t i = 0; i < n; i++) {
        if (why[0] == '\0' && items[i].grant->word[1] == s->gen)
            items[i].result = DLOCK_OK;
        else
            items[i].result = dlock_session_error(
                &s->base, DLOCK_ELOST, "%s; the lock went with it",
                why[0] ? why : "the connection that held it was lost");
    }
    return DLOCK_OK;
}

/* ---- lease -------------------------------------------------------------- */

static int lease_acquire(struct pg_session *s, const struct dlock_request *req,
                         struct dlock_grant *g, uint32_t *retry_ms)
{
    const struct pg_conf *cf = s->cf;
    char hex[65], ms[16];
    struct pg_q q;
    struct pg_res res;
    uint8_t d[32];
    const PGresult *r;
    int rc;

    pg_digest(cf, req->name, req->name_len, d);
    pg_hex(hex, d);
    /* [B-WAIT-1]: note the channel's count before the attempt, so a
     * release announced after it wakes the wait() that follows. */
    s->seen_key = pg_key64(d);
    s->seen_valid = pg_listen_seq(s->x, s->seen_key, &s->seen_seq);
    snprintf(ms, sizeof ms, "%u", req->lease_ms);
    q = (struct pg_q){cf->sql.lock_try[0], 5,
                      {hex, cf->ns, req->name, req->owner, ms}};
    rc = pg_run(s, &q, 1, pg_deadline(cf), &res);
    if (rc < 0) /* ECONNECT, or creating the table failed */
        return rc;
    if (rc == PG_SQLERR) {
        rc = pg_busy_code(res.state, 0);
        if (rc == 0)
            rc = pg_sqlfail(s, DLOCK_ERROR, "claim", &res);
        pg_res_clear(&res);
        return rc;
    }
    r = res.r[0];
    if (!PQgetisnull(r, 0, 0)) {
        g->fence = pg_u64(r, 0, 0);
        pg_res_clear(&res);
        return DLOCK_OK;
    }
    if (!PQgetisnull(r, 0, 1)) {
        uint64_t left = pg_u64(r, 0, 1);
        *retry_ms = left > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)left;
    }
    pg_res_clear(&res);
    return DLOCK_EBUSY;
}

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

/* All n leases in one UPDATE over unnest()ed arrays: one round trip for
 * the watchdog's whole batch. */
static int lease_renew(struct pg_session *s, struct dlock_renewal *items,
                       size_t n)
{
    const struct pg_conf *cf = s->cf;
    size_t ocap = 3, i;
    char *keys, *owners, *leases, *kp, *op, *lp;
    struct pg_q q;
    struct pg_res res;
    int rc;

    if ((rc = pg_ready(s)) != DLOCK_OK)
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
        pg_digest(cf, req->name, req->name_len, d);
        pg_hex(kp, d);
        kp += 64;
        op = arr_put(op, req->owner);
        lp += sprintf(lp, "%u", req->lease_ms);
        items[i].result = DLOCK_ELOST;
    }
    strcpy(kp, "}");
    strcpy(op, "}");
    strcpy(lp, "}");
    q = (struct pg_q){cf->sql.renew, 3, {keys, owners, leases}};
    rc = pg_run(s, &q, 1, pg_deadline(cf), &res);
    free(keys);
    free(owners);
    free(leases);
    if (rc == PG_SQLERR) {
        rc = pg_sqlfail(s, DLOCK_ERROR, "renew", &res);
        pg_res_clear(&res);
        return rc;
    }
    if (rc != DLOCK_OK)
        return rc; /* in doubt: core retries, and gives up at lease end */
    for (int row = 0; row < PQntuples(res.r[0]); row++) {
        uint64_t at = pg_u64(res.r[0], row, 0);
        if (at >= 1 && at <= n)
            items[at - 1].result = DLOCK_OK;
    }
    pg_res_clear(&res);
    for (i = 0; i < n; i++)
        if (items[i].result != DLOCK_OK)
            items[i].result = dlock_session_error(
                &s->base, DLOCK_ELOST,
                "the lease row has another owner or was cleared (the lease "
                "ran out and the lock was taken)");
    return DLOCK_OK;
}

static int lease_release(struct pg_session *s, const struct dlock_request *req)
{
    const struct pg_conf *cf = s->cf;
    char hex[65], chan[24];
    struct pg_q q;
    struct pg_res res;
    uint8_t d[32];
    int rc;

    if ((rc = pg_ready(s)) != DLOCK_OK)
        return rc;
    pg_digest(cf, req->name, req->name_len, d);
    pg_hex(hex, d);
    pg_channel_name(chan, pg_key64(d));
    q = (struct pg_q){cf->sql.release, 3, {hex, req->owner, chan}};
    rc = pg_run(s, &q, 1, pg_deadline(cf), &res);
    if (rc == DLOCK_OK && PQntuples(res.r[0]) == 0)
        rc = dlock_session_error(&s->base, DLOCK_ENOTOWNER,
                                 "the lease row has another owner or was "
                                 "already cleared (the lease ran out)");
    else if (rc == PG_SQLERR)
        rc = pg_sqlfail(s, DLOCK_ERROR, "release", &res);
    pg_res_clear(&res);
    return rc;
}

/* ---- the methods -------------------------------------------------------- */

static int pg_open(struct dlock_session **out, const struct dlock_uri *uri,
                   void *ctx, char *err, size_t errlen)
{
    struct pg_ctx *x = ctx;
    struct pg_session *s;
    int rc;

    (void)uri; /* parsed once, in ctx_open */
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    s->x = x;
    s->cf = &x->cf;
    if ((rc = pg_connect(s, err, errlen)) != DLOCK_OK) {
        free(s);
        return rc;
    }
    s->base.backend = &dlock__backend_postgres;
    s->base.caps = x->cf.caps;
    s->base.mode = x->cf.mode_name;
    if (x->cf.mode == PG_LEASE) {
        /* Releases are announced, and a crashed holder's lease end comes
         * as the retry hint: the backoff only covers a lost notification. */
        s->base.retry_min_ms = 5;
        s->base.retry_max_ms = 5000;
    }
    *out = &s->base;
    return DLOCK_OK;
}

static void pg_close(struct dlock_session *ds)
{
    struct pg_session *s = (struct pg_session *)ds;

    pg_drop(s);
    free(s);
}

static int pg_acquire(struct dlock_session *ds, const struct dlock_request *req,
                      int64_t deadline_ms, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    int rc = pg_ready(s);

    if (rc != DLOCK_OK)
        return rc;
    switch (s->cf->mode) {
    case PG_ADVISORY:
        return adv_acquire(s, req, deadline_ms, grant);
    case PG_ADVISORY_XACT:
    case PG_FOR_UPDATE:
        return tx_acquire(s, req, deadline_ms, grant);
    case PG_LEASE:
        return lease_acquire(s, req, grant, retry_ms);
    }
    return DLOCK_EINVAL;
}

static int pg_wait(struct dlock_session *ds, const struct dlock_request *req,
                   uint32_t max_ms)
{
    struct pg_session *s = (struct pg_session *)ds;
    uint8_t d[32];
    uint64_t k;

    pg_digest(s->cf, req->name, req->name_len, d);
    k = pg_key64(d);
    return pg_listen_wait(s->x, k, s->seen_valid && s->seen_key == k,
                          s->seen_seq, max_ms);
}

static int pg_renew(struct dlock_session *ds, struct dlock_renewal *items,
                    size_t n)
{
    struct pg_session *s = (struct pg_session *)ds;

    if (s->cf->mode == PG_LEASE)
        return lease_renew(s, items, n);
    return cb_renew(s, items, n);
}

static int pg_release(struct dlock_session *ds, const struct dlock_request *req,
                      struct dlock_grant *grant)
{
    struct pg_session *s = (struct pg_session *)ds;

    if (s->cf->mode == PG_LEASE)
        return lease_release(s, req);
    if (s->ngrants > 0)
        s->ngrants--;
    if (grant->word[1] != s->gen || !pg_alive(s))
        return dlock_session_error(&s->base, DLOCK_ELOST,
                                   "the connection that held the lock was "
                                   "lost, and the server freed the lock "
                                   "with it");
    if (s->cf->mode == PG_ADVISORY)
        return adv_release(s, req, grant);
    return tx_release(s, req, grant);
}

/* ---- inspect ------------------------------------------------------------ */

static int pg_inspect(struct dlock_session *ds, const char *name, size_t len,
                      dlock_state *out)
{
    struct pg_session *s = (struct pg_session *)ds;
    const struct pg_conf *cf = s->cf;
    char key[65];
    struct pg_q q;
    struct pg_res res;
    const PGresult *r;
    uint8_t d[32];
    int rc;

    if ((rc = pg_ready(s)) != DLOCK_OK)
        return rc;
    pg_digest(cf, name, len, d);
    if (cf->mode == PG_ADVISORY || cf->mode == PG_ADVISORY_XACT)
        pg_key_text(key, pg_key64(d));
    else
        pg_hex(key, d);
    q = (struct pg_q){cf->sql.inspect, 1, {key}};
    rc = pg_run(s, &q, 1, pg_deadline(cf), &res);
    if (rc == PG_SQLERR)
        rc = pg_sqlfail(s, DLOCK_ERROR, "inspect", &res);
    if (rc != DLOCK_OK) {
        pg_res_clear(&res);
        return rc;
    }
    r = res.r[0];
    switch (cf->mode) {
    case PG_ADVISORY:
    case PG_ADVISORY_XACT: {
        long granted = atol(PQgetvalue(r, 0, 0));
        out->held = granted > 0;
        out->waiters = atoi(PQgetvalue(r, 0, 1));
        if (granted > 1)
            snprintf(out->owner, sizeof out->owner, "(%ld shared holders)",
                     granted);
        else if (granted == 1)
            snprintf(out->owner, sizeof out->owner, "%s",
                     PQgetvalue(r, 0, 2));
        if (!PQgetisnull(r, 0, 3))
            out->fence = pg_u64(r, 0, 3);
        break;
    }
    case PG_FOR_UPDATE:
        out->held = 0;
        if (PQntuples(r) > 0) {
            out->fence = pg_u64(r, 0, 0);
            if (!PQgetisnull(r, 0, 3)) {
                out->held = 1;
                snprintf(out->owner, sizeof out->owner, "%s (pid %s)",
                         PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3));
            }
        }
        break;
    case PG_LEASE:
        out->held = 0;
        if (PQntuples(r) > 0) {
            out->fence = pg_u64(r, 0, 1);
            out->remaining_ms = (int64_t)pg_u64(r, 0, 2);
            out->held = PQgetvalue(r, 0, 0)[0] != '\0' && out->remaining_ms > 0;
            if (out->held)
                snprintf(out->owner, sizeof out->owner, "%s",
                         PQgetvalue(r, 0, 0));
            else
                out->remaining_ms = -1;
        }
        break;
    }
    pg_res_clear(&res);
    return DLOCK_OK;
}

/* ---- the raw floor ------------------------------------------------------ */

/* Blocking libpq, pipeline mode, the same statements as one dlock cycle:
 * what the protocol costs with no dlock in the loop. */
static int floor_run(PGconn *c, const struct pg_q *q, int nq, PGresult **last)
{
    int qi = 0, bad = 0;

    for (int i = 0; i < nq; i++)
        if (!PQsendQueryParams(c, q[i].sql, q[i].n, NULL, q[i].v, NULL, NULL,
                               0))
            return -1;
    if (!PQpipelineSync(c))
        return -1;
    *last = NULL;
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

static int pg_floor(const struct dlock_uri *uri, const char *name, uint32_t n,
                    uint64_t *ns_out, char *err, size_t errlen)
{
    struct pg_conf conf;
    const struct pg_conf *cf = &conf;
    const char *owner = "00000000-0000-4000-8000-000000000000:1";
    char key[65], hex[65], chan[24], ms[16], line[512];
    uint8_t d[32];
    PGconn *c;
    PGresult *r = NULL;
    int rc;

    if ((rc = pg_conf_init(&conf, uri, err, errlen)) != DLOCK_OK)
        return rc;
    c = pg_connect_raw(cf, pg_deadline(cf), err, errlen);
    if (c == NULL) {
        pg_conf_free(&conf);
        return DLOCK_ECONNECT;
    }
    PQenterPipelineMode(c);
    pg_digest(cf, name, strlen(name), d);
    pg_hex(hex, d);
    pg_key_text(key, pg_key64(d));
    pg_channel_name(chan, pg_key64(d));
    snprintf(ms, sizeof ms, "%u", cf->lease_ms);

    /* Set-up outside the timing: the schema, the lock row. floor_run's
     * -1 (a failed statement) is turned into a message at the end. */
    {
        struct pg_q q[4] = {{"SELECT pg_advisory_xact_lock(" PG_DDL_KEY ")",
                             0, {NULL}}};
        int nq = 1;
        for (int i = 0; i < 3 && cf->sql.ddl[i] != NULL; i++)
            q[nq++] = (struct pg_q){cf->sql.ddl[i], 0, {NULL}};
        rc = floor_run(c, q, nq, &r);
        PQclear(r);
        if (rc == 0 && cf->mode == PG_FOR_UPDATE) {
            q[0] = (struct pg_q){cf->sql.insert_row, 3, {hex, uri->ns, name}};
            rc = floor_run(c, q, 1, &r);
            PQclear(r);
        }
    }
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        struct pg_q a[4], b[1];
        int na = 0, nb = 1;
        bool got = false;

        switch (cf->mode) {
        case PG_ADVISORY:
            a[na++] = (struct pg_q){cf->sql.lock_try[0], 1, {key}};
            b[0] = (struct pg_q){cf->sql.unlock[0], 1, {key}};
            break;
        case PG_ADVISORY_XACT:
        case PG_FOR_UPDATE:
            a[na++] = (struct pg_q){"BEGIN", 0, {NULL}};
            a[na++] = (struct pg_q){SQL_SET_TX, 5,
                                    {"0", cf->ka_idle, cf->ka_interval,
                                     cf->ka_count, "0"}};
            a[na++] = (struct pg_q){cf->sql.lock_try[0], 1,
                                    {cf->mode == PG_FOR_UPDATE ? hex : key}};
            b[0] = (struct pg_q){"COMMIT", 0, {NULL}};
            break;
        case PG_LEASE:
            a[na++] = (struct pg_q){cf->sql.lock_try[0], 5,
                                    {hex, uri->ns, name, owner, ms}};
            b[0] = (struct pg_q){cf->sql.release, 3, {hex, owner, chan}};
            break;
        }
        rc = floor_run(c, a, na, &r);
        got = rc == 0 && r != NULL && PQntuples(r) > 0 &&
              !PQgetisnull(r, 0, 0) &&
              strcmp(PQgetvalue(r, 0, 0), "f") != 0;
        PQclear(r);
        if (rc == 0 && !got) {
            pg_oneline(line, sizeof line, name);
            PQfinish(c);
            pg_conf_free(&conf);
            return dlock_errorf(err, errlen, DLOCK_EBUSY,
                                "floor: '%s' is held by someone else", line);
        }
        if (rc == 0)
            rc = floor_run(c, b, nb, &r);
        PQclear(r);
        ns_out[i] = dlock_now_ns() - t0;
    }
    if (rc == -1) {
        pg_oneline(line, sizeof line, PQerrorMessage(c));
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: %s",
                          line[0] ? line : "a statement failed");
    }
    PQfinish(c);
    pg_conf_free(&conf);
    return rc;
}

const struct dlock_backend dlock__backend_postgres = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "postgres",
    .aliases = pg_aliases,
    .params = pg_params,
    .caps = CAPS_ADVISORY,
    .summary = "PostgreSQL (libpq): advisory (default), advisory_xact, "
               "for_update and lease modes",
    .ctx_open = pg_ctx_open,
    .ctx_close = pg_ctx_close,
    .open = pg_open,
    .close = pg_close,
    .acquire = pg_acquire,
    .wait = pg_wait,
    .renew = pg_renew,
    .release = pg_release,
    .inspect = pg_inspect,
    .floor = pg_floor,
};
