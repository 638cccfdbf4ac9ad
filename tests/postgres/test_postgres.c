/*
 * test_postgres.c: what the conformance suite cannot see of the postgres
 * backend, against a real server: `test_postgres --uri URI --group G`.
 *
 *   names    hostile names and namespaces are data (the tables survive
 *            injection strings), table= is validated, eight processes can
 *            create a table at once on first use, the 64-bit keys of
 *            100 000 names do not collide, URI parameters are checked;
 *            permits: in mode advisory each a slot of its own on its own
 *            connection (seen in pg_locks), hostile names as permits; in
 *            mode lease each a slot row with its handle's owner id;
 *            advisory_xact and for_update name each holder in turn when
 *            two handles take one name over one connection.
 *   many     2000 advisory locks held by one client share a few connections.
 *   faults   a SIGKILLed holder frees connection-bound locks at once and
 *            lease locks after the lease; a terminated connection loses an
 *            advisory lock but not a lease; a server restart does the same;
 *            a paused or stopped server gives DLOCK_ECONNECT within timeout=;
 *            a lease waiter and a permit waiter are woken by NOTIFY.
 *   crash    fences never repeat across a server crash: processes take
 *            locks and permits while the postmaster is SIGKILLed and
 *            restarted; every fence after recovery is above every fence
 *            before, and each name's fences strictly increase; the
 *            sequence's run into the next epoch raises the durable one,
 *            and a reset sequence is moved above a new one; in mode
 *            lease, no one is granted a lease after the crash until
 *            every lease granted before it has run out.
 *   bench    prints (never asserts) the raw floor against a dlock cycle and
 *            the hand-off latency between 8 processes, for every mode.
 *
 * The admin URI ($DLOCK_TEST_PG_ADMIN_URI) is used to look at the server
 * from outside: tables, pg_locks, pg_stat_activity, pg_terminate_backend.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "../conformance/harness.h"
#include "dlock/backend.h"

static const char *base_uri; /* $DLOCK_TEST_PG_URI, expanded */
static const char *const modes[] = {"advisory", "advisory_xact", "for_update",
                                    "lease"};
#define NMODES 4

/* ---- helpers ------------------------------------------------------------ */

static char uri_buf[4][4096];
static int uri_next;

/* base_uri with extra query parameters (rotating buffers). */
static const char *uri_of(const char *fmt, ...)
{
    char *out = uri_buf[uri_next++ % 4], q[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    snprintf(out, 4096, "%s%s%s", base_uri, q[0] ? "?" : "", q);
    return out;
}

static PGconn *admin(void)
{
    const char *a = getenv("DLOCK_TEST_PG_ADMIN_URI");
    PGconn *c;

    assert_non_null(a);
    c = PQconnectdb(a);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("admin connect: %s", PQerrorMessage(c));
    return c;
}

/* The first column of the first row of sql, as a number (-1 if none). */
static long long sql_num(PGconn *c, const char *fmt, ...)
{
    char sql[2048];
    PGresult *r;
    long long v = -1;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* The backend's key: SHA-256(SHA-256(namespace) || SHA-256(name)), whose
 * first 8 bytes (big-endian) are the advisory key. Re-derived here; the
 * names group checks it against pg_locks. */
static uint64_t key_of(const char *ns, const char *name, size_t len)
{
    uint8_t both[64], d[32];
    uint64_t k = 0;

    dlock_sha256(both, ns, strlen(ns));
    dlock_sha256(both + 32, name, len);
    dlock_sha256(d, both, sizeof both);
    for (int i = 0; i < 8; i++)
        k = (k << 8) | d[i];
    return k;
}

static int ctl(const char *action)
{
    char cmd[1024];
    const char *c = getenv("DLOCK_TEST_SERVERCTL");

    assert_non_null(c);
    snprintf(cmd, sizeof cmd, "'%s' %s pg", c, action);
    return system(cmd);
}

static atomic_int lost_calls, lost_code;

static void on_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)p;
    fprintf(stderr, "  on_lost: %s\n", why);
    atomic_store(&lost_code, code);
    atomic_fetch_add(&lost_calls, 1);
}

static dlock_lock *lost_lock(dlock_client *c, const char *name, uint32_t lease)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = lease;
    o.on_lost = on_lost;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
}

static bool wait_lost(uint32_t ms)
{
    int64_t end = h_now_ms() + ms;
    while (atomic_load(&lost_calls) == 0 && h_now_ms() < end)
        h_sleep_ms(20);
    return atomic_load(&lost_calls) > 0;
}

/* ---- names: injection, validation, keys --------------------------------- */

static const char *const hostile[] = {
    "'; DROP TABLE dlock_locks; --",
    "'); DROP TABLE dlock_leases; --",
    "\"; DROP TABLE dlock_fence_counters; --",
    "x' OR '1'='1",
    "$1",
    "E'\\x41'",
    "back\\slash\\",
    "new\nline\r\n",
    "{a,b}",
    "\"{}\"",
    "\xe9\x94\x81 \xf0\x9f\x94\x92",
    "%s%n%x",
    "dlock_fence_useq'); DELETE FROM dlock_fence_epoch; --",
};
#define NHOSTILE (sizeof hostile / sizeof hostile[0])

static void check_tables_intact(PGconn *a)
{
    static const char *const rels[] = {
        "dlock_owners", "dlock_locks", "dlock_leases_u", "dlock_fence_epoch",
        "dlock_fence_useq"};
    for (size_t i = 0; i < sizeof rels / sizeof rels[0]; i++)
        if (sql_num(a, "SELECT count(*) FROM pg_class WHERE relname = '%s'",
                    rels[i]) != 1)
            fail_msg("%s is gone", rels[i]);
    if (sql_num(a, "SELECT count(*) FROM dlock_fence_epoch") != 1)
        fail_msg("the row of dlock_fence_epoch is gone");
}

/* Every mode takes and releases each hostile name (all held at once, so
 * distinct names must not collide); the names land in the rows verbatim,
 * and the tables are still there. */
static void postgres__injection_names_leave_tables_intact(void **state)
{
    char prefix[64];
    PGconn *a = admin();

    (void)state;
    snprintf(prefix, sizeof prefix, "%s:", h_name("inject"));
    for (int m = 0; m < NMODES; m++) {
        /* The namespace is data too. */
        dlock_client *c = h_client(uri_of(
            "mode=%s&namespace=%s", modes[m],
            "%27%3B%20DROP%20TABLE%20dlock_leases%3B%20--"));
        dlock_lock *lk[NHOSTILE];
        assert_non_null(c);
        for (size_t i = 0; i < NHOSTILE; i++) {
            char name[256];
            snprintf(name, sizeof name, "%s%s", prefix, hostile[i]);
            lk[i] = h_lock(c, name, 0, 0);
            if (dlock_acquire(lk[i], 5000) != DLOCK_OK)
                fail_msg("%s: name %zu: %s", modes[m], i,
                         dlock_lock_errmsg(lk[i]));
        }
        for (size_t i = 0; i < NHOSTILE; i++) {
            assert_int_equal(dlock_release(lk[i]), DLOCK_OK);
            dlock_lock_free(lk[i]);
        }
        dlock_client_close(c);
    }
    check_tables_intact(a);
    /* The rows hold the names and the namespace as written. */
    for (size_t i = 0; i < NHOSTILE; i++) {
        char name[256];
        const char *params[2] = {name, "'; DROP TABLE dlock_leases; --"};
        snprintf(name, sizeof name, "%s%s", prefix, hostile[i]);
        for (int t = 0; t < 2; t++) {
            char sql[128];
            snprintf(sql, sizeof sql,
                     "SELECT count(*) FROM %s WHERE name = $1 AND "
                     "namespace = $2",
                     t ? "dlock_leases_u" : "dlock_locks");
            PGresult *r = PQexecParams(a, sql, 2, NULL, params, NULL, NULL, 0);
            assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
            if (atoi(PQgetvalue(r, 0, 0)) != 1)
                fail_msg("%s: name %zu not stored verbatim", sql, i);
            PQclear(r);
        }
    }
    PQfinish(a);
}

static void postgres__table_param_validated(void **state)
{
    static const char *const bad[] = {
        "x%3Bdrop", "%22quoted%22", "1starts_with_digit", "has-dash",
        "has%20space", "a.b", "",
        "a234567890123456789012345678901234567890123456789012345678901234",
    };
    dlock_client *c = NULL;
    PGconn *a = admin();
    dlock_lock *lk;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dlock_client_open(&c, uri_of("mode=lease&table=%s",
                                                      bad[i]),
                                           NULL),
                         DLOCK_EINVAL);
        assert_non_null(strstr(dlock_client_errmsg(c), "table"));
        dlock_client_close(c);
    }
    assert_int_equal(dlock_client_open(&c, uri_of("mode=advisory_xact&"
                                                  "table=x"),
                                       NULL),
                     DLOCK_EINVAL);
    dlock_client_close(c);
    /* A good one is used as written (quoted: case kept). */
    c = h_client(uri_of("mode=for_update&table=My_Locks_2"));
    assert_non_null(c);
    lk = h_lock(c, h_name("table"), 0, 0);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(sql_num(a,
                             "SELECT count(*) FROM \"My_Locks_2\" WHERE "
                             "name = '%s'",
                             dlock_lock_name(lk)),
                     1);
    dlock_lock_free(lk);
    dlock_client_close(c);
    PQfinish(a);
}

/* Child role "first_use URI NAME FD": connect, wait for the parent to
 * close the pipe FD (so all children start together), acquire, release. */
static int first_use_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock *lk = c ? h_lock(c, args[1], 0, 0) : NULL;
    char b;
    int rc;

    if (lk == NULL)
        return 3;
    while (read(atoi(args[2]), &b, 1) > 0)
        ;
    rc = dlock_acquire(lk, 20000);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "first use: %s\n", dlock_lock_errmsg(lk));
        return 4;
    }
    rc = dlock_release(lk) == DLOCK_OK ? 0 : 5;
    dlock_lock_free(lk);
    dlock_client_close(c);
    return rc;
}

/* Eight processes use a table that does not exist yet, at once: every one
 * gets its lock (CREATE TABLE IF NOT EXISTS alone can fail on a race). */
static void postgres__concurrent_first_use_creates_tables(void **state)
{
    static const char *const m3[] = {"advisory", "for_update", "lease"};
    char self[4096], table[64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    PGconn *a = admin();

    (void)state;
    assert_true(n > 0);
    self[n] = '\0';
    for (int m = 0; m < 3; m++) {
        pid_t pids[8];
        int gate[2];
        char fd_s[16];
        snprintf(table, sizeof table, "race_%s_%ld", m3[m], (long)getpid());
        const char *uri = uri_of("mode=%s&table=%s", m3[m], table);
        const char *name = h_name("race");
        assert_int_equal(pipe(gate), 0);
        snprintf(fd_s, sizeof fd_s, "%d", gate[0]);
        fflush(NULL);
        for (int i = 0; i < 8; i++) {
            pids[i] = fork();
            if (pids[i] == 0) {
                close(gate[1]);
                execl(self, self, "--uri", base_uri, "--child", "first_use",
                      uri, name, fd_s, (char *)NULL);
                _exit(127);
            }
        }
        close(gate[0]);
        h_sleep_ms(1500); /* all connected and waiting on the pipe */
        close(gate[1]);
        for (int i = 0; i < 8; i++)
            assert_int_equal(h_wait(pids[i]), 0);
        assert_int_equal(sql_num(a,
                                 "SELECT count(*) FROM pg_class WHERE "
                                 "relname = '%s'",
                                 table),
                         1);
    }
    PQfinish(a);
}

struct acq_job {
    dlock_lock *lk;
    int rc;
};

static void *acquire_job(void *p)
{
    struct acq_job *j = p;
    j->rc = dlock_acquire(j->lk, 20000);
    return NULL;
}

/* Someone else creates the table in the same instant as dlock's first use
 * (held here in an open transaction, so the moment is certain): dlock's
 * CREATE TABLE IF NOT EXISTS fails on pg_type's unique index when the
 * other commits, and must take that as "the table exists". */
static void postgres__first_use_while_another_creates_table(void **state)
{
    char table[64], sql[1024];
    PGconn *a = admin();
    PGresult *r;
    dlock_client *c;
    struct acq_job j;
    pthread_t t;

    (void)state;
    snprintf(table, sizeof table, "other_%ld", (long)getpid());
    snprintf(sql, sizeof sql,
             "BEGIN; CREATE TABLE \"%s\" (key bytea PRIMARY KEY, namespace "
             "text NOT NULL, name text NOT NULL, owner text NOT NULL, fence "
             "bigint NOT NULL, expires_at timestamptz NOT NULL); "
             "GRANT ALL ON \"%s\" TO dlock",
             table, table);
    r = PQexec(a, sql);
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    c = h_client(uri_of("mode=lease&table=%s", table));
    j = (struct acq_job){h_lock(c, h_name("other"), 0, 0), -100};
    pthread_create(&t, NULL, acquire_job, &j);
    h_sleep_ms(700); /* dlock's CREATE is now waiting on ours */
    r = PQexec(a, "COMMIT");
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    pthread_join(t, NULL);
    if (j.rc != DLOCK_OK)
        fail_msg("acquire: %s", dlock_lock_errmsg(j.lk));
    assert_int_equal(dlock_release(j.lk), DLOCK_OK);
    dlock_lock_free(j.lk);
    dlock_client_close(c);
    PQfinish(a);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* 64-bit keys: with n names, a collision has odds about n^2 / 2^65
 * (2.7e-10 for 100 000). Compute them all and look; and check that the
 * derivation above is the backend's, on the server's own lock table. */
static void postgres__advisory_keys_100k_no_collision(void **state)
{
    enum { N = 100000 };
    uint64_t *k = malloc(N * sizeof *k);
    const char *name = h_name("probe");
    uint64_t probe = key_of("ns-probe", name, strlen(name));
    dlock_client *c;
    dlock_lock *lk;
    PGconn *a = admin();
    char nm[64];
    size_t dups = 0;

    (void)state;
    for (int i = 0; i < N; i++) {
        int n = snprintf(nm, sizeof nm, "order/%d", i);
        k[i] = key_of("", nm, (size_t)n);
    }
    qsort(k, N, sizeof *k, cmp_u64);
    for (int i = 1; i < N; i++)
        dups += k[i] == k[i - 1];
    fprintf(stderr, "  %d names, %zu colliding 64-bit keys\n", N, dups);
    assert_int_equal(dups, 0);
    free(k);

    c = h_client(uri_of("namespace=ns-probe"));
    lk = h_lock(c, name, 0, 0);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(
        sql_num(a,
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                "AND objsubid = 1 AND granted AND classid::bigint = %llu "
                "AND objid::bigint = %llu",
                (unsigned long long)(probe >> 32),
                (unsigned long long)(probe & 0xffffffffu)),
        1);
    /* The same name in another namespace is another lock. */
    dlock_client *c2 = h_client(uri_of("namespace=other"));
    dlock_lock *lk2 = h_lock(c2, name, 0, 0);
    assert_int_equal(dlock_try_acquire(lk2), DLOCK_OK);
    assert_int_equal(dlock_release(lk2), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk2);
    dlock_lock_free(lk);
    dlock_client_close(c2);
    dlock_client_close(c);
    PQfinish(a);
}

static void expect_open(int want, const char *uri, const char *needle)
{
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, uri, NULL);
    const char *pw = getenv("DLOCK_TEST_PG_PASSWORD");

    if (rc != want || (needle && !strstr(dlock_client_errmsg(c), needle)))
        fail_msg("open %s: %s (%s), want %s with '%s'", uri,
                 dlock_err_name(rc), dlock_client_errmsg(c),
                 dlock_err_name(want), needle ? needle : "");
    if (pw != NULL && pw[0] && strstr(dlock_client_errmsg(c), pw))
        fail_msg("password in message: %s", dlock_client_errmsg(c));
    dlock_client_close(c);
}

static void postgres__uri_parameters(void **state)
{
    char u[4096], *at, *colon;
    int port;

    (void)state;
    expect_open(DLOCK_EINVAL, uri_of("mode=nosuch"), "mode");
    expect_open(DLOCK_EINVAL, uri_of("connect_timeout=3"), "timeout=");
    expect_open(DLOCK_EINVAL, uri_of("bogus=1"), "sslmode");
    expect_open(DLOCK_EINVAL, uri_of("timeout=5x"), "timeout");
    if (PQlibVersion() < 160000)
        expect_open(DLOCK_EINVAL, uri_of("load_balance_hosts=random"),
                    "not supported by this libpq");
    /* libpq's own parameters pass through: this server has no TLS. */
    expect_open(DLOCK_ECONNECT, uri_of("sslmode=require"), "SSL");
    expect_open(DLOCK_OK, uri_of("sslmode=disable&application_name=mine"),
                NULL);
    expect_open(DLOCK_ECONNECT, uri_of("options=-c%%20nosuch.x%%3D1%%20-c"
                                       "%%20bogus_guc%%3D1"),
                "bogus_guc");
    /* postgres://user:pw@host:port/db: a wrong password, a path with two
     * segments, the postgresql:// alias, two hosts of which the first is
     * closed (libpq tries the next). */
    snprintf(u, sizeof u, "%s", base_uri);
    at = strchr(u, '@');
    colon = strchr(strchr(u, ':') + 1, ':');
    assert_non_null(at);
    assert_non_null(colon);
    {
        char bad[4096];
        snprintf(bad, sizeof bad, "%.*s:wrong-pw%s", (int)(colon - u), u, at);
        expect_open(DLOCK_EAUTH, bad, "password authentication failed");
        snprintf(bad, sizeof bad, "%s/extra", u);
        expect_open(DLOCK_EINVAL, bad, "path");
        snprintf(bad, sizeof bad, "postgresql%s", strstr(u, "://"));
        expect_open(DLOCK_OK, bad, NULL);
        port = atoi(strrchr(at, ':') + 1);
        snprintf(bad, sizeof bad, "%.*s@127.0.0.1:1,127.0.0.1:%d/dlock",
                 (int)(at - u), u, port);
        expect_open(DLOCK_OK, bad, NULL);
        /* Several hosts connect without the SQLSTATE in the message: a
         * wrong password is still EAUTH (exit 77), not ECONNECT. */
        snprintf(bad, sizeof bad,
                 "%.*s:wrong-pw@127.0.0.1:1,127.0.0.1:%d/dlock",
                 (int)(colon - u), u, port);
        expect_open(DLOCK_EAUTH, bad, "password authentication failed");
    }
}

/* The four modes, in order, with the capabilities each promises: listed
 * without a server (what `dlock info` shows when none answers), and the
 * same as a connected client of each mode reports. The connection-bound
 * modes must claim a server-side silence limit [B-BOUND-1]; lease must
 * not be connection-bound. */
/* The tx modes name the holder from the application_name of the lock's
 * server process, set local to the lock's transaction: two handles of one
 * client take one name in turn over one pooled connection, and inspect
 * names each in turn. (Behind a transaction pooler the other handle would
 * be another client's; the name lives in the server process and ends with
 * the transaction, so the same holds.) */
static void postgres__tx_owner_follows_the_holder(void **state)
{
    static const char *const ms[] = {"advisory_xact", "for_update"};

    (void)state;
    for (int m = 0; m < 2; m++) {
        dlock_client *c = h_client(uri_of("mode=%s", ms[m]));
        dlock_client *other = h_client(uri_of("mode=%s", ms[m]));
        const char *name = h_name("owner");
        dlock_lock *lk[2] = {h_lock(c, name, 0, 0), h_lock(c, name, 0, 0)};

        for (int i = 0; i < 6; i++) {
            dlock_lock *h = lk[i % 2 == 0 || i == 5];
            dlock_state st = DLOCK_STATE_INIT;
            assert_int_equal(dlock_acquire(h, 5000), DLOCK_OK);
            assert_int_equal(dlock_inspect(other, name, &st), DLOCK_OK);
            assert_int_equal(st.held, 1);
            assert_string_equal(st.owner, dlock_lock_owner(h));
            assert_int_equal(dlock_release(h), DLOCK_OK);
        }
        dlock_lock_free(lk[0]);
        dlock_lock_free(lk[1]);
        dlock_client_close(other);
        dlock_client_close(c);
    }
}

/* advisory_xact's lock statement orders its steps by a CASE (tx.c): the
 * fence is drawn only once the lock is granted. A refused try draws
 * nothing; a wait draws when its wait ends, so a fence drawn by another
 * name while it waits is below its own (a draw at the start of the wait
 * would be above it). Each client has taken a lock first, so its epoch
 * is known and the value drawn with the lock is the one handed out (not
 * one drawn again after epoch work, which lets the lock go). */
static void postgres__xact_draws_after_the_grant(void **state)
{
    dlock_client *c[3];
    dlock_lock *held, *w, *x;
    const char *name = h_name("xact-order");
    PGconn *a = admin();
    struct acq_job j;
    pthread_t t;
    long long drawn, waiting = 0;
    uint64_t fx;

    (void)state;
    for (int i = 0; i < 3; i++) {
        dlock_lock *warm;
        c[i] = h_client(uri_of("mode=advisory_xact"));
        warm = h_lock(c[i], h_name("xact-warm"), 0, 0);
        assert_int_equal(dlock_acquire(warm, 5000), DLOCK_OK);
        assert_int_equal(dlock_release(warm), DLOCK_OK);
        dlock_lock_free(warm);
    }
    held = h_lock(c[0], name, 0, 0);
    w = h_lock(c[1], name, 0, 0);
    x = h_lock(c[2], h_name("xact-other"), 0, 0);
    assert_int_equal(dlock_acquire(held, 5000), DLOCK_OK);

    drawn = sql_num(a, "SELECT last_value FROM dlock_fence_useq");
    assert_int_equal(dlock_try_acquire(w), DLOCK_EBUSY);
    assert_int_equal(sql_num(a, "SELECT last_value FROM dlock_fence_useq"),
                     drawn);

    j = (struct acq_job){w, -100};
    pthread_create(&t, NULL, acquire_job, &j);
    for (int i = 0; i < 500 && waiting == 0; i++) {
        h_sleep_ms(20);
        waiting = sql_num(a, "SELECT count(*) FROM pg_locks WHERE "
                             "locktype = 'advisory' AND NOT granted");
    }
    assert_int_equal(waiting, 1);
    assert_int_equal(dlock_acquire(x, 5000), DLOCK_OK);
    fx = dlock_fence(x);
    assert_int_equal(dlock_release(x), DLOCK_OK);
    assert_int_equal(dlock_release(held), DLOCK_OK);
    pthread_join(t, NULL);
    if (j.rc != DLOCK_OK)
        fail_msg("wait: %s", dlock_lock_errmsg(w));
    fprintf(stderr, "  fence drawn while waiting %llu, the waiter's %llu\n",
            (unsigned long long)fx, (unsigned long long)dlock_fence(w));
    assert_true(dlock_fence(w) > fx);
    assert_int_equal(dlock_release(w), DLOCK_OK);
    dlock_lock_free(x);
    dlock_lock_free(w);
    dlock_lock_free(held);
    for (int i = 0; i < 3; i++)
        dlock_client_close(c[i]);
    PQfinish(a);
}

static void postgres__modes_and_caps(void **state)
{
    const uint32_t bound = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                           DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR |
                           DLOCK_CAP_SHARED | DLOCK_CAP_FENCING |
                           DLOCK_CAP_LATCH;
    const uint32_t want[NMODES] = {
        bound | DLOCK_CAP_BATCH_RENEW | DLOCK_CAP_DOWNGRADE |
            DLOCK_CAP_NOTIFY | DLOCK_CAP_PERMITS,
        bound | DLOCK_CAP_SESSION_PER_LOCK,
        bound | DLOCK_CAP_SESSION_PER_LOCK,
        DLOCK_CAP_LEASE | DLOCK_CAP_NOTIFY | DLOCK_CAP_FENCING |
            DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW |
            DLOCK_CAP_PERMITS | DLOCK_CAP_LATCH,
    };
    dlock_mode_info mi[8];
    char err[512];
    size_t n = 0;

    (void)state;
    for (size_t i = 0; i < 8; i++)
        mi[i] = (dlock_mode_info)DLOCK_MODE_INFO_INIT;
    assert_int_equal(dlock_backend_modes("postgres://u@127.0.0.1:1/db?"
                                         "mode=for_update",
                                         mi, 8, &n, err, sizeof err),
                     DLOCK_OK);
    assert_int_equal(n, NMODES);
    for (int m = 0; m < NMODES; m++) {
        dlock_client *c = h_client(uri_of("mode=%s", modes[m]));
        dlock_info info = DLOCK_INFO_INIT;

        assert_string_equal(mi[m].mode, modes[m]);
        assert_true(mi[m].summary != NULL && mi[m].summary[0] != '\0');
        assert_int_equal(mi[m].chosen, m == 2);
        if (mi[m].caps != want[m])
            fail_msg("%s: caps 0x%x, expected 0x%x", modes[m], mi[m].caps,
                     want[m]);
        assert_int_equal(dlock_client_info(c, &info), DLOCK_OK);
        assert_string_equal(info.mode, modes[m]);
        assert_int_equal(info.caps, want[m]);
        dlock_client_close(c);
    }
}

/* The advisory key of permit slot i of the name with key k, re-derived
 * from the documented rule: the first 8 bytes of SHA-256(k || "dlock
 * permit" || i), big-endian. */
static uint64_t slot_key_of(uint64_t k, uint32_t i)
{
    uint8_t in[8 + 12 + 4], d[32];
    uint64_t out = 0;

    for (int b = 0; b < 8; b++)
        in[b] = (uint8_t)(k >> (56 - 8 * b));
    memcpy(in + 8, "dlock permit", 12);
    for (int b = 0; b < 4; b++)
        in[20 + b] = (uint8_t)(i >> (24 - 8 * b));
    dlock_sha256(d, in, sizeof in);
    for (int b = 0; b < 8; b++)
        out = (out << 8) | d[b];
    return out;
}

/* Mode advisory, from pg_locks: how many of the first 16 slots of name
 * (namespace "") are held; fails unless each is held once, by a server
 * process of its own, and is below the count n. The handles are not
 * needed: pg_locks cannot name them. */
static int adv_slots_held(PGconn *a, const char *name, uint32_t n,
                          dlock_lock *const *p, int np)
{
    uint64_t k = key_of("", name, strlen(name));
    PGresult *r = PQexec(a, "SELECT classid::bigint, objid::bigint, pid "
                            "FROM pg_locks WHERE locktype = 'advisory' "
                            "AND granted AND objsubid = 1");
    int pids[16], total = 0;

    (void)p;
    (void)np;
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    for (int row = 0; row < PQntuples(r); row++) {
        uint64_t key = (strtoull(PQgetvalue(r, row, 0), NULL, 10) << 32) |
                       strtoull(PQgetvalue(r, row, 1), NULL, 10);
        for (uint32_t i = 0; i < 16; i++)
            if (key == slot_key_of(k, i)) {
                if (i >= n)
                    fail_msg("slot %u of a semaphore of %u held", i, n);
                pids[total++] = atoi(PQgetvalue(r, row, 2));
            }
    }
    PQclear(r);
    for (int x = 0; x < total; x++)
        for (int y = 0; y < x; y++)
            if (pids[x] == pids[y])
                fail_msg("server process %d holds two slots", pids[x]);
    return total;
}

/* The row key of lease-mode permit slot i of name (namespace ""), hex:
 * SHA-256(the name's 32-byte key || "dlock permit" || i), re-derived. */
static void slot_row_of(char out[65], const char *name, uint32_t i)
{
    uint8_t both[64], in[32 + 12 + 4], d[32];

    dlock_sha256(both, "", 0);
    dlock_sha256(both + 32, name, strlen(name));
    dlock_sha256(in, both, sizeof both);
    memcpy(in + 32, "dlock permit", 12);
    for (int b = 0; b < 4; b++)
        in[44 + b] = (uint8_t)(i >> (24 - 8 * b));
    dlock_sha256(d, in, sizeof in);
    for (int b = 0; b < 32; b++)
        snprintf(out + 2 * b, 3, "%02x", d[b]);
}

/* Mode lease, from the table: how many of the first 16 slot rows of name
 * hold a live lease; fails unless each of the np handles p owns one, and
 * every one is below the count n. */
static int lease_slots_held(PGconn *a, const char *name, uint32_t n,
                            dlock_lock *const *p, int np)
{
    int total = 0, owned = 0;

    for (uint32_t i = 0; i < 16; i++) {
        char hex[65];
        const char *v[1] = {hex};
        PGresult *r;
        slot_row_of(hex, name, i);
        r = PQexecParams(a,
                         "SELECT owner FROM dlock_leases_u WHERE key = "
                         "decode($1, 'hex') AND expires_at > now() AND "
                         "owner <> ''",
                         1, NULL, v, NULL, NULL, 0);
        assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
        if (PQntuples(r) > 0 && i >= n)
            fail_msg("slot %u of a semaphore of %u held", i, n);
        total += PQntuples(r);
        for (int h = 0; h < np && PQntuples(r) == 1; h++)
            owned += strcmp(PQgetvalue(r, 0, 0), dlock_lock_owner(p[h])) == 0;
        PQclear(r);
    }
    assert_int_equal(owned, np);
    return total;
}

/* A semaphore of 3 seen from the server (held: the mode's view): three
 * permits, two of one client, hold slots 0-2, one each; a fourth is
 * refused; inspect counts the holders (and, owner_ids, names them and
 * knows the last fence);
 * fences strictly increase across permits; a release serves the fourth;
 * afterwards nothing is held. The clients stay open for the caller. */
static void permits_seen(dlock_client *c1, dlock_client *c2, PGconn *a,
                         const char *name, bool owner_ids,
                         int (*held)(PGconn *a, const char *name, uint32_t n,
                                     dlock_lock *const *p, int np))
{
    dlock_lock *p[4] = {h_permit(c1, name, 0, 3), h_permit(c1, name, 0, 3),
                        h_permit(c2, name, 0, 3), h_permit(c2, name, 0, 3)};
    dlock_state st = DLOCK_STATE_INIT;
    uint64_t last = 0;

    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_acquire(p[i], 5000), DLOCK_OK);
        assert_true(dlock_fence(p[i]) > last);
        last = dlock_fence(p[i]);
        assert_int_equal(held(a, name, 3, p, i + 1), i + 1);
    }
    assert_int_equal(dlock_try_acquire(p[3]), DLOCK_EBUSY);
    assert_int_equal(dlock_inspect(c2, name, &st), DLOCK_OK);
    fprintf(stderr, "  inspect: held %d, owner %s, fence %llu\n", st.held,
            st.owner, (unsigned long long)st.fence);
    assert_int_equal(st.held, 1);
    assert_non_null(strstr(st.owner, "3 permit holders"));
    for (int i = 0; i < 3 && owner_ids; i++)
        assert_non_null(strstr(st.owner, dlock_lock_owner(p[i])));
    /* Both modes draw from one sequence for every name, which keeps
     * none per name: 0, unknown. */
    assert_int_equal(st.fence, 0);
    assert_int_equal(dlock_release(p[1]), DLOCK_OK);
    assert_int_equal(dlock_acquire(p[3], 5000), DLOCK_OK);
    assert_true(dlock_fence(p[3]) > last);
    {
        dlock_lock *released = p[1]; /* the three held in p[0..2] */
        p[1] = p[3];
        p[3] = released;
    }
    assert_int_equal(held(a, name, 3, p, 3), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_release(p[i]), DLOCK_OK);
    assert_int_equal(held(a, name, 3, p, 0), 0);
    st = (dlock_state)DLOCK_STATE_INIT;
    assert_int_equal(dlock_inspect(c1, name, &st), DLOCK_OK);
    assert_int_equal(st.held, 0);
    for (int i = 0; i < 4; i++)
        dlock_lock_free(p[i]);
}

/* Mode advisory: permits_seen() from pg_locks, then every hostile name
 * serves two permits. */
static void postgres__permits_one_slot_each(void **state)
{
    const char *uri = uri_of("mode=advisory");
    const char *name = h_name("permits");
    dlock_client *c1 = h_client(uri), *c2 = h_client(uri);
    PGconn *a = admin();

    (void)state;
    permits_seen(c1, c2, a, name, false, adv_slots_held);
    /* Names are only hashed, but hostile ones must serve permits too. */
    for (size_t i = 0; i < NHOSTILE; i++) {
        char hn[256];
        snprintf(hn, sizeof hn, "%s:%s", name, hostile[i]);
        dlock_lock *x = h_permit(c1, hn, 0, 2), *y = h_permit(c2, hn, 0, 2);
        if (dlock_acquire(x, 5000) != DLOCK_OK ||
            dlock_acquire(y, 5000) != DLOCK_OK)
            fail_msg("name %zu: %s %s", i, dlock_lock_errmsg(x),
                     dlock_lock_errmsg(y));
        assert_int_equal(adv_slots_held(a, hn, 2, NULL, 0), 2);
        assert_int_equal(dlock_release(x), DLOCK_OK);
        assert_int_equal(dlock_release(y), DLOCK_OK);
        dlock_lock_free(x);
        dlock_lock_free(y);
    }
    check_tables_intact(a);
    dlock_client_close(c1);
    dlock_client_close(c2);
    PQfinish(a);
}

/* Mode lease: permits_seen() from the slot rows and their owners. */
static void postgres__lease_permits_one_row_each(void **state)
{
    const char *uri = uri_of("mode=lease");
    dlock_client *c1 = h_client(uri), *c2 = h_client(uri);
    PGconn *a = admin();

    (void)state;
    permits_seen(c1, c2, a, h_name("leasepermits"), true, lease_slots_held);
    dlock_client_close(c1);
    dlock_client_close(c2);
    PQfinish(a);
}

/* ---- many: advisory locks share connections ----------------------------- */

static void postgres__2000_advisory_locks_few_connections(void **state)
{
    enum { N = 2000 };
    dlock_client *c = h_client(uri_of("mode=advisory"));
    dlock_lock **lk = calloc(N, sizeof *lk);
    PGconn *a = admin();
    char name[64];
    long long conns, held;

    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "%s-%d", h_name("many"), i);
        lk[i] = h_lock(c, name, 0, 0);
        assert_int_equal(dlock_acquire(lk[i], 0), DLOCK_OK);
    }
    conns = sql_num(a,
                    "SELECT count(*) FROM pg_stat_activity WHERE "
                    "application_name = 'dlock:%ld'",
                    (long)getpid());
    held = sql_num(a,
                   "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s "
                   "ON s.pid = l.pid WHERE l.locktype = 'advisory' AND "
                   "l.granted AND s.application_name = 'dlock:%ld'",
                   (long)getpid());
    fprintf(stderr, "  %d advisory locks held on %lld connection(s)\n",
            (int)held, conns);
    assert_int_equal(held, N);
    assert_true(conns >= 1 && conns < 10);
    for (int i = 0; i < N; i++) {
        assert_int_equal(dlock_release(lk[i]), DLOCK_OK);
        dlock_lock_free(lk[i]);
    }
    assert_int_equal(sql_num(a,
                             "SELECT count(*) FROM pg_locks l JOIN "
                             "pg_stat_activity s ON s.pid = l.pid WHERE "
                             "l.locktype = 'advisory' AND "
                             "s.application_name = 'dlock:%ld'",
                             (long)getpid()),
                     0);
    free(lk);
    dlock_client_close(c);
    PQfinish(a);
}

/* ---- faults ------------------------------------------------------------- */

/* Child role "hold URI NAME LEASE": take the lock, say so on stdout's
 * gate file, and wait to be killed. */
static int hold_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock *lk = c ? h_lock(c, args[1], (uint32_t)atoi(args[2]), 0)
                       : NULL;
    int fd;

    if (lk == NULL || dlock_acquire(lk, 10000) != DLOCK_OK)
        return 3;
    fd = open(args[3], O_CREAT | O_WRONLY, 0600);
    if (fd < 0)
        return 4;
    close(fd);
    for (;;)
        pause();
}

static pid_t spawn_holder(const char *uri, const char *name, uint32_t lease,
                          const char *gate)
{
    char self[4096], lease_s[16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    pid_t pid;

    assert_true(n > 0);
    self[n] = '\0';
    snprintf(lease_s, sizeof lease_s, "%u", lease);
    unlink(gate);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        execl(self, self, "--uri", base_uri, "--child", "hold", uri, name,
              lease_s, gate, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300 && access(gate, F_OK) != 0; i++)
        h_sleep_ms(50);
    assert_int_equal(access(gate, F_OK), 0);
    return pid;
}

/* A killed holder: connection-bound modes free the lock as soon as the
 * server sees the connection close, long before its (60 s) lease; a lease
 * stays taken until its lease runs out. */
static void postgres__holder_sigkill(void **state)
{
    char gate[512];

    (void)state;
    snprintf(gate, sizeof gate, "%s/gate", h_scratch());
    for (int m = 0; m < NMODES; m++) {
        bool lease = strcmp(modes[m], "lease") == 0;
        const char *uri = uri_of("mode=%s", modes[m]);
        const char *name = h_name("killed");
        dlock_client *c = h_client(uri);
        dlock_lock *lk = h_lock(c, name, 0, 0);
        pid_t pid = spawn_holder(uri, name, lease ? 1500 : 60000, gate);
        int64_t t0;

        assert_int_equal(dlock_try_acquire(lk), DLOCK_EBUSY);
        kill(pid, SIGKILL);
        assert_int_equal(h_wait(pid), 128 + SIGKILL);
        t0 = h_now_ms();
        if (lease)
            assert_int_equal(dlock_try_acquire(lk), DLOCK_EBUSY);
        assert_int_equal(dlock_acquire(lk, 20000), DLOCK_OK);
        fprintf(stderr, "  %s: freed %lld ms after the holder died\n",
                modes[m], (long long)(h_now_ms() - t0));
        if (!lease)
            assert_true(h_now_ms() - t0 < 20000);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        dlock_lock_free(lk);
        dlock_client_close(c);
    }
}

static void terminate_ours(PGconn *a)
{
    long long n = sql_num(a,
                          "SELECT count(pg_terminate_backend(pid)) FROM "
                          "pg_stat_activity WHERE split_part("
                          "application_name, ' ', 1) = 'dlock:%ld'",
                          (long)getpid());
    assert_true(n >= 1);
}

/* An administrator (or a failover) ends the holder's connections: an
 * advisory lock is lost with them and reported; a lease is not, and its
 * renewals go on over a new connection. */
static void postgres__terminated_connection(void **state)
{
    PGconn *a = admin();
    dlock_client *adv = h_client(uri_of("mode=advisory"));
    dlock_client *ls = h_client(uri_of("mode=lease"));
    dlock_client *other = h_client(uri_of("mode=lease"));
    const char *an = h_name("term-adv"), *ln;
    dlock_lock *la = lost_lock(adv, an, 900), *ll, *probe;

    (void)state;
    ln = h_name("term-lease");
    ll = lost_lock(ls, ln, 3000);
    probe = h_lock(other, ln, 0, 0);
    atomic_store(&lost_calls, 0);
    assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(ll, 0), DLOCK_OK);
    terminate_ours(a);
    assert_true(wait_lost(5000));
    assert_false(dlock_held(la));
    assert_int_equal(atomic_load(&lost_code), DLOCK_ELOST);
    assert_int_equal(dlock_release(la), DLOCK_ELOST);
    /* Only the advisory lock was lost. */
    h_sleep_ms(1500);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_true(dlock_held(ll));
    assert_int_equal(dlock_renew(ll), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(probe), DLOCK_EBUSY);
    assert_int_equal(dlock_release(ll), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(probe), DLOCK_OK);
    assert_int_equal(dlock_release(probe), DLOCK_OK);
    /* The advisory client works again on a fresh connection. */
    assert_int_equal(dlock_acquire(la, 1000), DLOCK_OK);
    assert_int_equal(dlock_release(la), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(ll);
    dlock_lock_free(probe);
    dlock_client_close(adv);
    dlock_client_close(ls);
    dlock_client_close(other);
    PQfinish(a);
}

/* A server restart: advisory holders are told their lock is lost; lease
 * holders keep theirs (the row is on disk) and their renewals resume. */
static void postgres__server_restart(void **state)
{
    dlock_client *adv = h_client(uri_of("mode=advisory"));
    dlock_client *ls = h_client(uri_of("mode=lease"));
    dlock_lock *la = lost_lock(adv, h_name("restart-adv"), 900);
    const char *ln = h_name("restart-lease");
    dlock_lock *ll = lost_lock(ls, ln, 9000), *probe;
    dlock_client *other;

    (void)state;
    atomic_store(&lost_calls, 0);
    assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(ll, 0), DLOCK_OK);
    assert_int_equal(ctl("restart"), 0);
    assert_true(wait_lost(10000));
    assert_false(dlock_held(la));
    h_sleep_ms(3500); /* more than one renewal interval (3 s) */
    assert_int_equal(atomic_load(&lost_calls), 1);
    /* In doubt from the moment its connection ended [B-WATCH-1], until
     * the watchdog's renewal over a new connection found the row. */
    for (int64_t end = h_now_ms() + 10000;
         !dlock_held(ll) && h_now_ms() < end;)
        h_sleep_ms(10);
    assert_true(dlock_held(ll));
    assert_int_equal(dlock_renew(ll), DLOCK_OK);
    other = h_client(uri_of("mode=lease"));
    probe = h_lock(other, ln, 0, 0);
    assert_int_equal(dlock_try_acquire(probe), DLOCK_EBUSY);
    assert_int_equal(dlock_release(ll), DLOCK_OK);
    assert_int_equal(dlock_release(la), DLOCK_ELOST);
    assert_int_equal(dlock_acquire(la, 5000), DLOCK_OK);
    assert_int_equal(dlock_release(la), DLOCK_OK);
    dlock_lock_free(probe);
    dlock_lock_free(la);
    dlock_lock_free(ll);
    dlock_client_close(other);
    dlock_client_close(adv);
    dlock_client_close(ls);
}

/* A paused server (SIGSTOP: the kernel still accepts connections and
 * acknowledges data, nothing answers) and a stopped one: every call ends
 * with DLOCK_ECONNECT within timeout=, none hangs. */
static void postgres__paused_or_stopped_server(void **state)
{
    (void)state;
    for (int m = 0; m < NMODES; m++) {
        const char *uri = uri_of("mode=%s&timeout=1s", modes[m]);
        dlock_client *c = h_client(uri), *c2 = NULL;
        dlock_lock *lk = h_lock(c, h_name("paused"), 0, 0);
        int64_t t0;
        int rc;

        assert_int_equal(ctl("pause"), 0);
        t0 = h_now_ms();
        rc = dlock_try_acquire(lk);
        fprintf(stderr, "  %s paused: try %s in %lld ms", modes[m],
                dlock_err_name(rc), (long long)(h_now_ms() - t0));
        assert_int_equal(rc, DLOCK_ECONNECT);
        assert_true(h_now_ms() - t0 < 1000 + 2500);
        t0 = h_now_ms();
        rc = dlock_client_open(&c2, uri, NULL);
        fprintf(stderr, ", open %s in %lld ms\n", dlock_err_name(rc),
                (long long)(h_now_ms() - t0));
        assert_int_equal(rc, DLOCK_ECONNECT);
        assert_true(h_now_ms() - t0 < 1000 + 2500);
        dlock_client_close(c2);
        assert_int_equal(ctl("resume"), 0);
        assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        dlock_lock_free(lk);
        dlock_client_close(c);
    }
    /* Stopped: refused at once. */
    {
        dlock_client *c = h_client(uri_of("timeout=1s"));
        dlock_lock *lk = h_lock(c, h_name("stopped"), 0, 0);
        int64_t t0;
        assert_int_equal(ctl("stop"), 0);
        t0 = h_now_ms();
        assert_int_equal(dlock_try_acquire(lk), DLOCK_ECONNECT);
        assert_true(h_now_ms() - t0 < 1000 + 2500);
        assert_int_equal(ctl("start"), 0);
        assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        dlock_lock_free(lk);
        dlock_client_close(c);
    }
}

struct rel_job {
    dlock_lock *lk;
    uint32_t after_ms;
    int64_t at;
    int rc;
};

static void *release_after(void *p)
{
    struct rel_job *j = p;
    h_sleep_ms(j->after_ms);
    j->at = h_now_ms();
    j->rc = dlock_release(j->lk);
    return NULL;
}

/* A waiter on c2 (lk b) for what a on c1 holds is woken by the release's
 * NOTIFY, twice: the first wait subscribes, the second reuses the
 * channel. Each mode's test makes a fallback poll come seconds late, so a
 * grant within 2.5 s of the release was the notification's doing. */
static void woken_by_notify(const char *what, dlock_client *c1,
                            dlock_client *c2, dlock_lock *a, dlock_lock *b)
{
    for (int round = 0; round < 2; round++) {
        struct rel_job j = {a, 700, 0, -100};
        pthread_t t;
        int64_t got;

        assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
        pthread_create(&t, NULL, release_after, &j);
        assert_int_equal(dlock_acquire(b, 30000), DLOCK_OK);
        got = h_now_ms();
        pthread_join(t, NULL);
        assert_int_equal(j.rc, DLOCK_OK);
        fprintf(stderr, "  round %d: %s had it %lld ms after the release\n",
                round, what, (long long)(got - j.at));
        assert_true(got - j.at < 2500);
        assert_int_equal(dlock_release(b), DLOCK_OK);
    }
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c1);
    dlock_client_close(c2);
}

/* Lease: the holder's 30 s lease makes the retry hint long, so without
 * the notification the waiter would sleep the 5 s safety poll. */
static void postgres__lease_waiter_woken_by_notify(void **state)
{
    const char *uri = uri_of("mode=lease");
    const char *name = h_name("notify");
    dlock_client *c1 = h_client(uri), *c2 = h_client(uri);

    (void)state;
    woken_by_notify("lease waiter", c1, c2, h_lock(c1, name, 30000, 0),
                    h_lock(c2, name, 0, 0));
}

/* A permit of mode advisory, which cannot wait in the server's queue:
 * with retry_max=20s the fallback retry comes 20 s after the wait began. */
static void postgres__permit_waiter_woken_by_notify(void **state)
{
    const char *uri = uri_of("mode=advisory&retry_max=20s");
    const char *name = h_name("permitnotify");
    dlock_client *c1 = h_client(uri), *c2 = h_client(uri);

    (void)state;
    woken_by_notify("permit waiter", c1, c2, h_permit(c1, name, 0, 1),
                    h_permit(c2, name, 0, 1));
}

/* ---- bench: printed, not asserted --------------------------------------- */

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

static void stats(const char *what, int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
    fprintf(stderr,
            "  %-34s p50 %7.1f us  p90 %7.1f us  p99 %7.1f us  (n=%zu)\n",
            what, v[n / 2] / 1000.0, v[n * 9 / 10] / 1000.0,
            v[n * 99 / 100] / 1000.0, n);
}

/* Shared page of the hand-off measurement: the last release's time. */
struct handoff_page {
    _Atomic int64_t released_ns; /* 0: no release yet */
};

/* Child role "handoff URI NAME CYCLES PAGE OUT": contend; after each grant,
 * record how long after the previous holder's release it came. */
static int handoff_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock *lk = c ? h_lock(c, args[1], 0, 0) : NULL;
    int cycles = atoi(args[2]);
    int fd = open(args[3], O_RDWR);
    struct handoff_page *pg;
    int64_t *out = calloc((size_t)cycles, sizeof *out);
    int n = 0;
    FILE *f;

    if (lk == NULL || fd < 0 || out == NULL)
        return 3;
    pg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pg == MAP_FAILED)
        return 4;
    for (int i = 0; i < cycles; i++) {
        if (dlock_acquire(lk, 60000) != DLOCK_OK)
            return 5;
        int64_t now = (int64_t)dlock_now_ns(),
                rel = atomic_load(&pg->released_ns);
        if (rel != 0)
            out[n++] = now - rel;
        atomic_store(&pg->released_ns, (int64_t)dlock_now_ns());
        if (dlock_release(lk) != DLOCK_OK)
            return 6;
    }
    f = fopen(args[4], "w");
    if (f == NULL)
        return 7;
    for (int i = 0; i < n; i++)
        fprintf(f, "%lld\n", (long long)out[i]);
    fclose(f);
    free(out);
    munmap(pg, 4096);
    close(fd);
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

static void bench_handoff(const char *mode)
{
    enum { PROCS = 8, CYCLES = 60 };
    const char *uri = uri_of("mode=%s", mode);
    const char *name = h_name("handoff");
    char page[512], out[PROCS][512], cyc[16], self[4096], line[64];
    pid_t pids[PROCS];
    int64_t *all = calloc(PROCS * CYCLES, sizeof *all);
    size_t n = 0;
    int fd;
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);

    assert_true(len > 0);
    self[len] = '\0';
    snprintf(page, sizeof page, "%s/page-%s", h_scratch(), mode);
    fd = open(page, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && ftruncate(fd, 4096) == 0);
    close(fd);
    snprintf(cyc, sizeof cyc, "%d", CYCLES);
    fflush(NULL);
    for (int i = 0; i < PROCS; i++) {
        snprintf(out[i], sizeof out[i], "%s/out-%s-%d", h_scratch(), mode, i);
        pids[i] = fork();
        if (pids[i] == 0) {
            execl(self, self, "--uri", base_uri, "--child", "handoff", uri,
                  name, cyc, page, out[i], (char *)NULL);
            _exit(127);
        }
    }
    for (int i = 0; i < PROCS; i++)
        assert_int_equal(h_wait(pids[i]), 0);
    for (int i = 0; i < PROCS; i++) {
        FILE *f = fopen(out[i], "r");
        assert_non_null(f);
        while (n < PROCS * CYCLES && fgets(line, sizeof line, f) != NULL)
            all[n++] = atoll(line);
        fclose(f);
    }
    snprintf(line, sizeof line, "%s hand-off, 8 processes", mode);
    stats(line, all, n);
    free(all);
}

static void bench_cycle(const char *mode)
{
    enum { N = 400 };
    const char *uri = uri_of("mode=%s", mode);
    int64_t floor_v[N], cyc[N];
    uint64_t raw[N];
    char err[512], what[64];
    dlock_client *c = h_client(uri);
    dlock_lock *lk = h_lock(c, h_name("cycle"), 0, 0);

    /* Warm up both, then measure them interleaved in blocks, so a busy
     * neighbour on this shared machine hits both alike. */
    assert_int_equal(dlock_bench_floor(uri, "bench-floor", 50, raw, err,
                                       sizeof err),
                     DLOCK_OK);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
    }
    for (int blk = 0; blk < N; blk += 100) {
        if (dlock_bench_floor(uri, "bench-floor", 100, raw + blk, err,
                              sizeof err) != DLOCK_OK)
            fail_msg("floor: %s", err);
        for (int i = blk; i < blk + 100; i++) {
            uint64_t t0 = dlock_now_ns();
            assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
            assert_int_equal(dlock_release(lk), DLOCK_OK);
            cyc[i] = (int64_t)(dlock_now_ns() - t0);
        }
    }
    for (int i = 0; i < N; i++)
        floor_v[i] = (int64_t)raw[i];
    snprintf(what, sizeof what, "%s floor (bare libpq)", mode);
    stats(what, floor_v, N);
    snprintf(what, sizeof what, "%s dlock acquire+release", mode);
    stats(what, cyc, N);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

static void postgres__bench_prints_numbers(void **state)
{
    (void)state;
    for (int m = 0; m < NMODES; m++)
        bench_cycle(modes[m]);
    for (int m = 0; m < NMODES; m++)
        bench_handoff(modes[m]);
}

/* ---- crash: fences across a server crash ------------------------------ */

/*
 * The fence source (backends/postgres/fence.c) draws from an unlogged
 * sequence, which crash recovery resets; the durable epoch it must be
 * above is bumped when that happened. CRASH_PROCS processes take and
 * release locks on CRASH_NAMES names (permits of 2, in permit runs) and
 * log every fence in shared memory with the phase of the run it was taken
 * in (a grant's phase at its start and at its end) and, for locks, a
 * number drawn while holding it (hold order) and whether its release
 * succeeded. Between the phases the postmaster and its processes are
 * SIGKILLed and the server restarted. Judged: every fence of an acquire
 * begun after the restart is above every fence of one ended before the
 * kill; each name's fences strictly increase in hold order (locks) or are
 * all distinct (permits).
 *
 * Hold order is judged over holds whose release succeeded: only those
 * were held until their holder let go. A server process that finds its
 * postmaster gone exits, and frees its locks, at once (an idle one) or
 * after its statement (one waiting for a lock): a holder can be granted a
 * lock, with its fence drawn in the same statement, whose server process
 * then exits before the holder reads the answer, so the next holder gets
 * it, and a larger fence, before the first even knows it held. That is
 * the case fences are for (the store refuses the first holder's smaller
 * fence), and its release fails.
 *
 * With the epoch left out (not bumped after the crash), the sequence
 * restarts below the fences before it and this fails.
 */
#define CRASH_PROCS 3
#define CRASH_NAMES 2
#define CRASH_RECS 60000
#define CRASH_AFTER 150 /* grants per process after the restart */

struct crash_rec {
    uint64_t fence, order;
    int name, start_phase, end_phase;
    bool released; /* dlock_release() succeeded */
};

struct crash_log {
    atomic_int phase; /* 0 before, 1 killing/restarting, 2 after */
    atomic_int stop;
    atomic_int ready; /* children whose client and handles are open */
    atomic_uint_fast64_t order;
    atomic_int n;
    struct crash_rec rec[CRASH_RECS];
};

static void crash_child(struct crash_log *lg, const char *uri,
                        const char *const *names, uint32_t permits)
{
    dlock_client *c = NULL;
    dlock_lock *lk[CRASH_NAMES] = {NULL};
    int after = 0;
    int64_t end = h_now_ms() + 30000;

    if (dlock_client_open(&c, uri, NULL) != DLOCK_OK)
        _exit(3);
    for (int i = 0; i < CRASH_NAMES; i++) {
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.permits = permits;
        if (dlock_lock_new(&lk[i], c, names[i], &o) != DLOCK_OK)
            _exit(4);
    }
    atomic_fetch_add(&lg->ready, 1);
    for (unsigned i = 0; after < CRASH_AFTER && !atomic_load(&lg->stop) &&
                         h_now_ms() < end;
         i++) {
        int ni = (int)(i % CRASH_NAMES);
        int ps = atomic_load(&lg->phase), r;
        if ((r = dlock_acquire(lk[ni], 2000)) == DLOCK_OK) {
            int k = atomic_fetch_add(&lg->n, 1);
            uint64_t order = atomic_fetch_add(&lg->order, 1);
            struct crash_rec cr = {dlock_fence(lk[ni]), order, ni, ps,
                                   atomic_load(&lg->phase), false};
            after += ps == 2;
            /* may fail: the server is gone */
            cr.released = dlock_release(lk[ni]) == DLOCK_OK;
            if (k < CRASH_RECS)
                lg->rec[k] = cr;
        } else if (r != DLOCK_ETIMEDOUT && r != DLOCK_EBUSY) {
            if (getenv("DLOCK_TEST_VERBOSE") != NULL)
                fprintf(stderr, "  acquire: %s\n", dlock_lock_errmsg(lk[ni]));
            h_sleep_ms(20); /* the server is down or restarting */
        }
    }
    for (int i = 0; i < CRASH_NAMES; i++)
        dlock_lock_free(lk[i]);
    dlock_client_close(c);
    _exit(after >= CRASH_AFTER ? 0 : 5);
}

static int crash_by_order(const void *a, const void *b)
{
    const struct crash_rec *x = a, *y = b;
    if (x->name != y->name)
        return x->name - y->name;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int crash_by_fence(const void *a, const void *b)
{
    const struct crash_rec *x = a, *y = b;
    if (x->name != y->name)
        return x->name - y->name;
    return x->fence < y->fence ? -1 : x->fence > y->fence;
}

/* mode lease runs on a table of its own with a short lease: after the
 * crash no lease is granted for the longest lease ever recorded for the
 * table (lease.c), and a test lease of the default length would make
 * that longer than the children's 30 s. */
static void crash_run(const char *mode, uint32_t permits)
{
    struct crash_log *lg = mmap(NULL, sizeof *lg, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    bool lease = strcmp(mode, "lease") == 0;
    const char *uri = uri_of("mode=%s&timeout=2s%s", mode,
                             lease ? "&lease=1s&table=dlock_crash_leases"
                                   : "");
    const char *names[CRASH_NAMES];
    char nbuf[CRASH_NAMES][128];
    pid_t pid[CRASH_PROCS];
    uint64_t max_before = 0, min_after = UINT64_MAX;
    int n, before = 0, after = 0, failed = 0;
    int64_t t0 = h_now_ms();

    assert_true(lg != MAP_FAILED);
    memset(lg, 0, sizeof *lg);
    for (int i = 0; i < CRASH_NAMES; i++) {
        snprintf(nbuf[i], sizeof nbuf[i], "%s", h_name("crash"));
        names[i] = nbuf[i];
    }
    for (int p = 0; p < CRASH_PROCS; p++) {
        pid[p] = fork();
        assert_true(pid[p] >= 0);
        if (pid[p] == 0)
            crash_child(lg, uri, names, permits);
    }
    /* Every child's client open (opening is not what this tests, and
     * under TSan it can take longer than the 5 s below: a kill during it
     * failed the child), then some grants before: at least 50, or 5 s. */
    for (int64_t end = h_now_ms() + 30000;
         atomic_load(&lg->ready) < CRASH_PROCS && h_now_ms() < end;)
        h_sleep_ms(10);
    for (int64_t end = h_now_ms() + 5000;
         atomic_load(&lg->n) < 50 && h_now_ms() < end;)
        h_sleep_ms(10);
    h_sleep_ms(100);
    atomic_store(&lg->phase, 1);
    assert_int_equal(ctl("kill"), 0);
    assert_int_equal(ctl("start"), 0);
    atomic_store(&lg->phase, 2);
    for (int p = 0; p < CRASH_PROCS; p++) {
        int st = h_wait(pid[p]);
        if (st != 0)
            fprintf(stderr, "  %s: process %d ended with status %d\n", mode,
                    p, st);
        failed += st != 0;
    }
    atomic_store(&lg->stop, 1);
    n = atomic_load(&lg->n);
    assert_true(n <= CRASH_RECS);
    for (int i = 0; i < n; i++) {
        const struct crash_rec *r = &lg->rec[i];
        if (r->end_phase == 0) {
            before++;
            if (r->fence > max_before)
                max_before = r->fence;
        } else if (r->start_phase == 2) {
            after++;
            if (r->fence < min_after)
                min_after = r->fence;
        }
    }
    fprintf(stderr,
            "  %s%s: %d grants (%d before the kill, %d after the restart), "
            "largest fence before %llu = (%llu << 40) + %llu, smallest "
            "after %llu = (%llu << 40) + %llu, %lld ms\n",
            mode, permits ? " permits" : "", n, before, after,
            (unsigned long long)max_before,
            (unsigned long long)(max_before >> 40),
            (unsigned long long)(max_before & ((1ull << 40) - 1)),
            (unsigned long long)min_after,
            (unsigned long long)(min_after >> 40),
            (unsigned long long)(min_after & ((1ull << 40) - 1)),
            (long long)(h_now_ms() - t0));
    assert_int_equal(failed, 0);
    assert_true(before > 0);
    assert_true(after >= CRASH_PROCS * CRASH_AFTER);
    if (min_after <= max_before)
        fail_msg("%s: a fence after the crash (%llu) is not above one "
                 "handed out before it (%llu)",
                 mode, (unsigned long long)min_after,
                 (unsigned long long)max_before);
    /* Per name: locks strictly increase in hold order (holds released;
     * see the top); permits (held side by side) are at least all
     * distinct. */
    qsort(lg->rec, (size_t)n, sizeof lg->rec[0],
          permits ? crash_by_fence : crash_by_order);
    for (int i = 1, last = 0; i < n; i++) {
        const struct crash_rec *a = &lg->rec[last], *b = &lg->rec[i];
        if (!permits && !b->released)
            continue;
        last = i;
        if (!permits && !a->released)
            continue;
        if (a->name == b->name && b->fence <= a->fence)
            fail_msg("%s: name %d's fence %llu (hold %llu) follows %llu "
                     "(hold %llu)",
                     mode, a->name, (unsigned long long)b->fence,
                     (unsigned long long)b->order,
                     (unsigned long long)a->fence,
                     (unsigned long long)a->order);
    }
    munmap(lg, sizeof *lg);
}

/* The epoch's two ways up, by hand on the sequence (the admin plays the
 * 2^40th draw, and the crash's reset, which the crash test does for
 * real): a fence that runs into the next epoch is handed out only once
 * the durable epoch is raised to it; a sequence found below the durable
 * epoch (RESTART: what crash recovery does to an unlogged sequence) is
 * moved above a new one before any fence is handed out. advisory draws in
 * the lock's statement, advisory_xact in its transaction. */
static void postgres__fence_epoch_raised_and_bumped(void **state)
{
    static const char *const ms[] = {"advisory", "advisory_xact"};
    PGconn *a = admin();

    (void)state;
    for (int m = 0; m < 2; m++) {
        dlock_client *c = h_client(uri_of("mode=%s", ms[m]));
        dlock_lock *lk = h_lock(c, h_name("epoch"), 0, 0);
        uint64_t f1, f2, f3, f4;
        long long e;

        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        f1 = dlock_fence(lk);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        e = sql_num(a, "SELECT epoch FROM dlock_fence_epoch");
        assert_int_equal((long long)(f1 >> 40), e);
        /* The next draw is the epoch's last value, then the next epoch. */
        assert_int_equal(sql_num(a,
                                 "SELECT setval('dlock_fence_useq', "
                                 "((%lld::bigint + 1) << 40) - 2) * 0",
                                 e),
                         0);
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        f2 = dlock_fence(lk);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        f3 = dlock_fence(lk);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        assert_int_equal(sql_num(a, "SELECT epoch FROM dlock_fence_epoch"),
                         e + 1);
        /* A reset sequence: its values (epoch 0) are never handed out. */
        assert_int_equal(sql_num(a, "SELECT setval('dlock_fence_useq', 1, "
                                    "false) * 0"),
                         0);
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        f4 = dlock_fence(lk);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        fprintf(stderr, "  %s: fences %llx, %llx, %llx (next epoch), %llx "
                "(after a reset)\n", ms[m], (unsigned long long)f1,
                (unsigned long long)f2, (unsigned long long)f3,
                (unsigned long long)f4);
        assert_true(f2 > f1);
        assert_int_equal(f2, ((uint64_t)(e + 1) << 40) - 1);
        /* The tx modes let the lock go, move the epoch on the same
         * connection, and lock and draw again. */
        assert_true(f3 > f2);
        assert_int_equal(f3 >> 40, (uint64_t)e + 1);
        assert_true(f4 > f3);
        assert_int_equal(f4 >> 40, (uint64_t)e + 2);
        assert_int_equal(sql_num(a, "SELECT epoch FROM dlock_fence_epoch"),
                         e + 2);
        dlock_lock_free(lk);
        dlock_client_close(c);
    }
    PQfinish(a);
}

static void postgres__fences_above_all_after_server_crash(void **state)
{
    (void)state;
    crash_run("advisory", 0);
    crash_run("advisory", 2);
    crash_run("advisory_xact", 0);
    crash_run("for_update", 0);
    crash_run("lease", 0);
    crash_run("lease", 2);
}

/*
 * Mode lease keeps its rows in an unlogged table, which crash recovery
 * empties: a holder whose row vanished still believes, until its lease
 * runs out, that it holds the lock. So after a crash nothing is granted
 * until every lease that could have been live has run out (lease.c: the
 * grace). A holder takes the name with a lease of GRACE_LEASE_MS and
 * keeps it through a SIGKILL of the postmaster and the restart, logging
 * when it asked for the lock; GRACE_PROCS contenders take and release the
 * name meanwhile, logging when each grant came back. Judged from those
 * times (one monotonic clock): no grant returned after the kill came back
 * before the holder's lease ran out, as counted from its request (what
 * its own clock promises it); some were granted after; and their fences
 * are above the holder's. With the grace left out, the contenders get the
 * name within a second of the restart and this fails.
 */
#define GRACE_LEASE_MS 4000
#define GRACE_PROCS 2
#define GRACE_RECS 4096

struct grace_log {
    atomic_int phase; /* 0 holder taking, 1 held, 2 killed, 3 stop */
    int64_t held_asked; /* h_now_ms() before the holder's acquire */
    uint64_t held_fence;
    int64_t kill_at;
    atomic_int n;
    struct {
        int64_t asked, back;
        uint64_t fence;
    } rec[GRACE_RECS];
};

static void grace_holder(struct grace_log *lg, const char *uri,
                         const char *name)
{
    dlock_client *c = h_client(uri);
    dlock_lock *lk = h_lock(c, name, GRACE_LEASE_MS, 0);
    int64_t asked = h_now_ms();

    if (dlock_acquire(lk, 10000) != DLOCK_OK)
        _exit(3);
    lg->held_asked = asked;
    lg->held_fence = dlock_fence(lk);
    atomic_store(&lg->phase, 1);
    while (atomic_load(&lg->phase) < 3)
        h_sleep_ms(10);
    (void)dlock_release(lk); /* lost by now: the row is gone */
    dlock_lock_free(lk);
    dlock_client_close(c);
    _exit(0);
}

static void grace_contender(struct grace_log *lg, const char *uri,
                            const char *name)
{
    dlock_client *c = h_client(uri);
    dlock_lock *lk = h_lock(c, name, GRACE_LEASE_MS, 0);

    while (atomic_load(&lg->phase) < 3) {
        int64_t asked = h_now_ms();
        int r = dlock_acquire(lk, 500);
        if (r == DLOCK_OK) {
            int k = atomic_fetch_add(&lg->n, 1);
            if (k < GRACE_RECS) {
                lg->rec[k].asked = asked;
                lg->rec[k].back = h_now_ms();
                lg->rec[k].fence = dlock_fence(lk);
            }
            (void)dlock_release(lk);
        } else if (r != DLOCK_ETIMEDOUT && r != DLOCK_EBUSY) {
            h_sleep_ms(20); /* the server is down or restarting */
        }
    }
    dlock_lock_free(lk);
    dlock_client_close(c);
    _exit(0);
}

static void postgres__lease_grace_after_server_crash(void **state)
{
    struct grace_log *lg = mmap(NULL, sizeof *lg, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    const char *uri =
        uri_of("mode=lease&timeout=2s&table=dlock_grace_leases");
    char name[128];
    pid_t holder, pid[GRACE_PROCS];
    int64_t end, belief, first_after = INT64_MAX;
    int after = 0;

    (void)state;
    assert_true(lg != MAP_FAILED);
    memset(lg, 0, sizeof *lg);
    snprintf(name, sizeof name, "%s", h_name("grace"));
    holder = fork();
    assert_true(holder >= 0);
    if (holder == 0)
        grace_holder(lg, uri, name);
    for (end = h_now_ms() + 10000;
         atomic_load(&lg->phase) < 1 && h_now_ms() < end;)
        h_sleep_ms(5);
    assert_int_equal(atomic_load(&lg->phase), 1);
    for (int p = 0; p < GRACE_PROCS; p++) {
        pid[p] = fork();
        assert_true(pid[p] >= 0);
        if (pid[p] == 0)
            grace_contender(lg, uri, name);
    }
    h_sleep_ms(200); /* the contenders wait on the holder */
    lg->kill_at = h_now_ms();
    assert_int_equal(ctl("kill"), 0);
    assert_int_equal(ctl("start"), 0);
    atomic_store(&lg->phase, 2);
    /* Until some grants came after the grace, or 20 s. */
    belief = lg->held_asked + GRACE_LEASE_MS;
    for (end = h_now_ms() + 20000; h_now_ms() < end;) {
        int n = atomic_load(&lg->n), late = 0;
        for (int i = 0; i < n && i < GRACE_RECS; i++)
            late += lg->rec[i].back >= belief;
        if (late >= 20)
            break;
        h_sleep_ms(50);
    }
    atomic_store(&lg->phase, 3);
    assert_int_equal(h_wait(holder), 0);
    for (int p = 0; p < GRACE_PROCS; p++)
        assert_int_equal(h_wait(pid[p]), 0);
    for (int i = 0; i < atomic_load(&lg->n) && i < GRACE_RECS; i++) {
        if (lg->rec[i].back < lg->kill_at)
            fail_msg("a contender was granted the name at %lld ms, while "
                     "the holder held it (before the kill)",
                     (long long)(lg->rec[i].back - lg->held_asked));
        if (lg->rec[i].back < belief)
            fail_msg("a contender was granted the name %lld ms after the "
                     "holder asked for its lease of %d ms, which it may "
                     "still believe it holds (the table was reset by the "
                     "crash at %lld ms)",
                     (long long)(lg->rec[i].back - lg->held_asked),
                     GRACE_LEASE_MS,
                     (long long)(lg->kill_at - lg->held_asked));
        if (lg->rec[i].fence <= lg->held_fence)
            fail_msg("fence %llu after the crash is not above the "
                     "holder's %llu",
                     (unsigned long long)lg->rec[i].fence,
                     (unsigned long long)lg->held_fence);
        after++;
        if (lg->rec[i].back < first_after)
            first_after = lg->rec[i].back;
    }
    fprintf(stderr,
            "  lease grace: holder asked at 0 ms for %d ms, kill at %lld "
            "ms, %d grants after, the first back at %lld ms\n",
            GRACE_LEASE_MS, (long long)(lg->kill_at - lg->held_asked),
            after, (long long)(first_after - lg->held_asked));
    assert_true(after > 0);
    munmap(lg, sizeof *lg);
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {
        {"hold", hold_child},
        {"handoff", handoff_child},
        {"first_use", first_use_child},
        {NULL, NULL}};
    const struct CMUnitTest names[] = {
        cmocka_unit_test(postgres__injection_names_leave_tables_intact),
        cmocka_unit_test(postgres__table_param_validated),
        cmocka_unit_test(postgres__concurrent_first_use_creates_tables),
        cmocka_unit_test(postgres__first_use_while_another_creates_table),
        cmocka_unit_test(postgres__advisory_keys_100k_no_collision),
        cmocka_unit_test(postgres__uri_parameters),
        cmocka_unit_test(postgres__modes_and_caps),
        cmocka_unit_test(postgres__tx_owner_follows_the_holder),
        cmocka_unit_test(postgres__xact_draws_after_the_grant),
        cmocka_unit_test(postgres__permits_one_slot_each),
        cmocka_unit_test(postgres__lease_permits_one_row_each),
    };
    const struct CMUnitTest many[] = {
        cmocka_unit_test(postgres__2000_advisory_locks_few_connections),
    };
    const struct CMUnitTest faults[] = {
        cmocka_unit_test(postgres__holder_sigkill),
        cmocka_unit_test(postgres__terminated_connection),
        cmocka_unit_test(postgres__lease_waiter_woken_by_notify),
        cmocka_unit_test(postgres__permit_waiter_woken_by_notify),
        cmocka_unit_test(postgres__server_restart),
        cmocka_unit_test(postgres__paused_or_stopped_server),
    };
    const struct CMUnitTest crash[] = {
        cmocka_unit_test(postgres__fence_epoch_raised_and_bumped),
        cmocka_unit_test(postgres__fences_above_all_after_server_crash),
        cmocka_unit_test(postgres__lease_grace_after_server_crash),
    };
    const struct CMUnitTest bench[] = {
        cmocka_unit_test(postgres__bench_prints_numbers),
    };
    const char *group = "";
    int rc;

    h_child_dispatch(argc, argv, roles);
    base_uri = h_setup(argc, argv);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--group") == 0)
            group = argv[i + 1];
    if (strcmp(group, "names") == 0)
        rc = cmocka_run_group_tests_name("postgres/names", names, NULL, NULL);
    else if (strcmp(group, "many") == 0)
        rc = cmocka_run_group_tests_name("postgres/many", many, NULL, NULL);
    else if (strcmp(group, "faults") == 0)
        rc = cmocka_run_group_tests_name("postgres/faults", faults, NULL,
                                         NULL);
    else if (strcmp(group, "crash") == 0)
        rc = cmocka_run_group_tests_name("postgres/crash", crash, NULL, NULL);
    else if (strcmp(group, "bench") == 0)
        rc = cmocka_run_group_tests_name("postgres/bench", bench, NULL, NULL);
    else {
        fprintf(stderr, "usage: %s --uri URI --group "
                        "names|many|faults|crash|bench\n",
                argv[0]);
        rc = 2;
    }
    h_cleanup();
    return rc;
}
