/*
 * test_mysql.c: what the shared suites cannot see of the mysql:// backend,
 * checked against a real MariaDB with an admin connection of its own
 * (Connector/C directly) to look at tables, threads and locks from the
 * server's side.
 *
 *   test_mysql --uri URI --group names|conn|server|fence
 *
 * names:  hostile names leave the tables intact and get keys of their own;
 *         utf8mb4 round trip; the key a DBA can compute; namespace is a
 *         prefix; GET_LOCK names shared with other programs; URI parameters
 *         checked; tables created on first use (and again if dropped);
 *         the three modes and their caps listed without a server.
 * conn:   get_lock shares connections, for_update takes one per lock; a
 *         SIGKILLed holder frees its lock (conn-bound: with the connection;
 *         insert: after the lease); a KILLed connection loses the lock of a
 *         conn-bound mode but not of insert, and the fence stays ahead;
 *         waiters wait on the server; get_lock permits hold one slot
 *         each (seen from the server), slot names near the limit, a
 *         waiter served when a permit comes back, and cancelled
 *         leaving no slot held; insert permits are rows of slot keys.
 * server: restart (conn-bound holders are told the lock is lost, insert
 *         holders keep their rows and renew), paused and stopped server
 *         give DLOCK_ECONNECT within the timeout, never a hang.
 * fence:  the tokens' epochs (fence.c): a counter that runs out and a
 *         MEMORY table that fills up move to a new epoch, and a SIGKILLed
 *         server hands out, after it restarts, only tokens above every
 *         one it handed out before.
 *
 * Time bounds are loose: they check order and occurrence, not speed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <mysql.h>

#include "../conformance/harness.h"

static const char *base_uri;
static MYSQL *adm;

static const char *const modes[] = {"insert", "for_update", "get_lock"};
#define NMODES 3

/* ---- the admin connection ------------------------------------------------ */

static void adm_connect(void)
{
    const char *u = getenv("DLOCK_TEST_MYSQL_ADMIN_URI");
    char user[64], pw[128], host[64];
    unsigned port = 0;

    assert_non_null(u);
    assert_int_equal(sscanf(u, "mysql://%63[^:]:%127[^@]@%63[^:]:%u/", user,
                            pw, host, &port),
                     4);
    adm = mysql_init(NULL);
    assert_non_null(adm);
    mysql_options(adm, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (mysql_real_connect(adm, host, user, pw, "dlock", port, NULL, 0) ==
        NULL)
        fail_msg("admin connect: %s", mysql_error(adm));
}

static void adm_exec(const char *fmt, ...)
{
    char q[8192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    if (mysql_query(adm, q) != 0)
        fail_msg("admin: %s: %s", q, mysql_error(adm));
    MYSQL_RES *r = mysql_store_result(adm);
    mysql_free_result(r);
}

/* The first column of the first row as a number; -1 for no row or NULL. */
static long long adm_int(const char *fmt, ...)
{
    char q[8192];
    va_list ap;
    long long v = -1;

    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    if (mysql_query(adm, q) != 0)
        fail_msg("admin: %s: %s", q, mysql_error(adm));
    MYSQL_RES *r = mysql_store_result(adm);
    MYSQL_ROW row = r != NULL ? mysql_fetch_row(r) : NULL;
    if (row != NULL && row[0] != NULL)
        v = strtoll(row[0], NULL, 10);
    mysql_free_result(r);
    return v;
}

/* Run sql (its first column, a number) until it is positive or within_ms
 * passed; its last value. INNODB_TRX is a cache that InnoDB refreshes
 * only when it has not been read for 100 ms, so a faster poll of it can
 * see the same stale rows until the time is up: every poll sleeps
 * longer than that first. */
#define ADM_POLL_MS 150
static long long adm_poll(const char *sql, int64_t within_ms)
{
    int64_t end = h_now_ms() + within_ms;
    long long v;

    do
        h_sleep_ms(ADM_POLL_MS);
    while ((v = adm_int("%s", sql)) <= 0 && h_now_ms() < end);
    return v;
}

/* The first column of the first row as text into out ("" if none). */
static void adm_text(char *out, size_t cap, const char *fmt, ...)
{
    char q[8192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    if (mysql_query(adm, q) != 0)
        fail_msg("admin: %s: %s", q, mysql_error(adm));
    MYSQL_RES *r = mysql_store_result(adm);
    MYSQL_ROW row = r != NULL ? mysql_fetch_row(r) : NULL;
    snprintf(out, cap, "%s", row != NULL && row[0] != NULL ? row[0] : "");
    mysql_free_result(r);
}

/* X'…' literal of bytes, for SQL the admin writes itself. */
static void hexlit(char *out, size_t cap, const char *s, size_t len)
{
    size_t n = (size_t)snprintf(out, cap, "X'");
    for (size_t i = 0; i < len && n + 4 < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%02X", (unsigned char)s[i]);
    snprintf(out + n, cap - n, "'");
}

/* Connections of the dlock user (every test client logs in as dlock). */
static long long dlock_connections(void)
{
    return adm_int("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                   "WHERE USER = 'dlock'");
}

/* KILL every connection of the dlock user. */
static int kill_dlock_connections(void)
{
    MYSQL_RES *r;
    MYSQL_ROW row;
    char ids[64][24];
    int n = 0;

    if (mysql_query(adm, "SELECT ID FROM information_schema.PROCESSLIST "
                         "WHERE USER = 'dlock'") != 0)
        fail_msg("admin: %s", mysql_error(adm));
    r = mysql_store_result(adm);
    while (r != NULL && (row = mysql_fetch_row(r)) != NULL && n < 64)
        snprintf(ids[n++], sizeof ids[0], "%s", row[0]);
    mysql_free_result(r);
    for (int i = 0; i < n; i++) {
        char q[64];
        snprintf(q, sizeof q, "KILL CONNECTION %s", ids[i]);
        /* One may have ended meanwhile (ER_NO_SUCH_THREAD). */
        if (mysql_query(adm, q) != 0 && mysql_errno(adm) != 1094)
            fail_msg("admin: %s: %s", q, mysql_error(adm));
    }
    return n;
}

static int serverctl(const char *action)
{
    char cmd[512];
    const char *ctl = getenv("DLOCK_TEST_SERVERCTL");

    assert_non_null(ctl);
    snprintf(cmd, sizeof cmd, "'%s' %s mysql", ctl, action);
    return system(cmd);
}

/* ---- small helpers ------------------------------------------------------- */

static char uri_buf[3][4096];

/* The base URI with mode= and more parameters (slot: up to 3 at once). */
static const char *uri_for(int slot, const char *mode, const char *extra)
{
    snprintf(uri_buf[slot], sizeof uri_buf[slot], "%s?mode=%s%s%s", base_uri,
             mode, extra != NULL ? "&" : "", extra != NULL ? extra : "");
    return uri_buf[slot];
}

static dlock_client *client_for(const char *mode, const char *extra)
{
    dlock_client *c = h_client(uri_for(0, mode, extra));
    assert_non_null(c);
    return c;
}

static atomic_int lost_calls;
static atomic_int lost_code;

static void on_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)p;
    atomic_store(&lost_code, code);
    atomic_fetch_add(&lost_calls, 1);
    fprintf(stderr, "  on_lost: %s\n", why);
}

static dlock_lock *lost_lock(dlock_client *c, const char *name,
                             uint32_t lease_ms)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.lease_ms = lease_ms;
    o.on_lost = on_lost;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
}

static bool eventually_lost(int want, uint32_t timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    while (atomic_load(&lost_calls) < want && h_now_ms() < end)
        h_sleep_ms(20);
    return atomic_load(&lost_calls) >= want;
}

/* ---- names and tables ---------------------------------------------------- */

#define LOCK1 "\xf0\x9f\x94\x92" /* U+1F512, 4 bytes */
#define LOCK7 LOCK1 LOCK1 LOCK1 LOCK1 LOCK1 LOCK1 LOCK1
static const char *const hostile[] = {
    "x'; DROP TABLE dlock_inj; --",
    "`; DROP TABLE `dlock_inj_fmem`; --",
    "\"); DELETE FROM dlock_inj; --",
    "' OR '1'='1",
    "\\' OR 1=1 #",
    "a\\",
    "%",
    "_",
    "new\nline\r\ttab",
    "{braces}",
    "\xf0\x9f\x94\x92 lock \xf0\x9f\x97\x9d\xef\xb8\x8f", /* emoji */
    "\xc3\xa4\xc3\xb6\xc3\xbc",                          /* äöü */
    "A",
    "a", /* differs from "A" only in case */
    "a ", /* differs from "a" only by a trailing space */
    "dlock:0123456789abcdef0123456789abcdef0123456789abcdef0123",
    /* 49 characters but 196 bytes: past MariaDB's 192 for GET_LOCK */
    LOCK7 LOCK7 LOCK7 LOCK7 LOCK7 LOCK7 LOCK7,
    "",   /* filled in: 64 characters */
    "",   /* filled in: 65 characters */
    "",   /* filled in: 10 000 bytes */
};
#define NHOSTILE (sizeof hostile / sizeof hostile[0])

static char name64[65], name65[66], name10k[10001];

static const char *hostile_name(size_t i)
{
    if (i == NHOSTILE - 3)
        return name64;
    if (i == NHOSTILE - 2)
        return name65;
    if (i == NHOSTILE - 1)
        return name10k;
    return hostile[i];
}

/* Every hostile name held at once, in every mode, on one table: each is
 * exclusive, none collides with another, and the tables are intact
 * afterwards with one fence counter per name. */
static void mysql__injection_names_leave_tables_intact(void **state)
{
    (void)state;
    memset(name64, 'q', 64);
    memset(name65, 'q', 65);
    memset(name10k, 'n', 10000);
    adm_exec("DROP TABLE IF EXISTS dlock_inj, dlock_inj_fmem, "
             "dlock_inj_epoch, dlock_inj_rows, dlock_inj_fseq, "
             "dlock_inj_frec");
    for (int m = 0; m < NMODES; m++) {
        dlock_client *a = client_for(modes[m], "table=dlock_inj");
        dlock_client *b = client_for(modes[m], "table=dlock_inj");
        dlock_lock *held[NHOSTILE], *other[NHOSTILE];

        for (size_t i = 0; i < NHOSTILE; i++) {
            held[i] = h_lock(a, hostile_name(i), 0, 0);
            other[i] = h_lock(b, hostile_name(i), 0, 0);
            if (dlock_try_acquire(held[i]) != DLOCK_OK)
                fail_msg("%s: name %zu: %s", modes[m], i,
                         dlock_lock_errmsg(held[i]));
        }
        for (size_t i = 0; i < NHOSTILE; i++)
            if (dlock_try_acquire(other[i]) != DLOCK_EBUSY)
                fail_msg("%s: name %zu not exclusive", modes[m], i);
        if (m == 0) {
            /* The key a DBA can compute, and the utf8mb4 round trip. */
            const char *emoji = hostile[10];
            char lit[256], got[256], want[256];
            hexlit(lit, sizeof lit, emoji, strlen(emoji));
            adm_text(got, sizeof got,
                     "SELECT HEX(name) FROM dlock_inj WHERE lock_key = "
                     "UNHEX(SHA2(%s, 256))",
                     lit);
            hexlit(want, sizeof want, emoji, strlen(emoji));
            assert_int_equal(strlen(got) + 3, strlen(want));
            assert_memory_equal(got, want + 2, strlen(got));
            assert_int_equal(adm_int("SELECT COUNT(*) FROM dlock_inj"),
                             NHOSTILE);
            /* The 10 000-byte name is kept for people as 255 bytes. */
            assert_int_equal(adm_int("SELECT MAX(LENGTH(name)) FROM "
                                     "dlock_inj"),
                             255);
        }
        if (m == 2) {
            /* Short names are GET_LOCK names as they are; 65 characters
             * and a "dlock:" prefix are hashed. */
            assert_true(adm_int("SELECT IS_USED_LOCK('%s')", name64) > 0);
            assert_int_equal(adm_int("SELECT IS_USED_LOCK('%s')", name65),
                             -1);
            assert_true(adm_int("SELECT IS_USED_LOCK(CONCAT('dlock:', "
                                "LEFT(SHA2('%s', 256), 58)))",
                                name65) > 0);
            assert_int_equal(adm_int("SELECT IS_USED_LOCK('%s')",
                                     hostile[15]),
                             -1);
        }
        for (size_t i = 0; i < NHOSTILE; i++) {
            assert_int_equal(dlock_release(held[i]), DLOCK_OK);
            dlock_lock_free(held[i]);
            dlock_lock_free(other[i]);
        }
        dlock_client_close(a);
        dlock_client_close(b);
    }
    assert_int_equal(adm_int("SELECT COUNT(*) FROM information_schema.TABLES "
                             "WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME "
                             "IN ('dlock_inj', 'dlock_inj_fmem', "
                             "'dlock_inj_epoch', 'dlock_inj_rows')"),
                     4);
    assert_int_equal(adm_int("SELECT COUNT(*) FROM dlock_inj"), 0);
    assert_int_equal(adm_int("SELECT COUNT(*) FROM dlock_inj_rows"),
                     NHOSTILE);
    /* One record per name (and the sequence's marker), each with a
     * token of its own, all in the first epoch. */
    assert_int_equal(adm_int("SELECT COUNT(*) FROM dlock_inj_frec"),
                     NHOSTILE + 1);
    assert_int_equal(adm_int("SELECT COUNT(DISTINCT fence) FROM "
                             "dlock_inj_frec WHERE fence >> 40 = 1"),
                     NHOSTILE);
}

/* namespace= is a plain prefix of the name, in every mode. */
static void mysql__namespace_is_a_prefix(void **state)
{
    (void)state;
    for (int m = 0; m < NMODES; m++) {
        dlock_client *app = client_for(modes[m], "namespace=app%2F");
        dlock_client *bare = client_for(modes[m], NULL);
        dlock_client *other = client_for(modes[m], "namespace=other%2F");
        char full[128];
        const char *name = h_name("ns");
        dlock_lock *a, *b, *o;

        snprintf(full, sizeof full, "app/%s", name);
        a = h_lock(app, name, 0, 0);
        b = h_lock(bare, full, 0, 0);
        o = h_lock(other, name, 0, 0);
        assert_int_equal(dlock_try_acquire(a), DLOCK_OK);
        assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
        assert_int_equal(dlock_try_acquire(o), DLOCK_OK);
        assert_int_equal(dlock_release(a), DLOCK_OK);
        assert_int_equal(dlock_release(o), DLOCK_OK);
        dlock_lock_free(a);
        dlock_lock_free(b);
        dlock_lock_free(o);
        dlock_client_close(app);
        dlock_client_close(bare);
        dlock_client_close(other);
    }
}

/* A program using GET_LOCK itself and dlock's get_lock mode share short
 * names. */
static void mysql__get_lock_names_shared_with_other_programs(void **state)
{
    dlock_client *c = client_for("get_lock", NULL);
    const char *name = h_name("shared");
    char n2[128];
    dlock_lock *lk = h_lock(c, name, 0, 0), *lk2;

    (void)state;
    snprintf(n2, sizeof n2, "%s-2", name);
    lk2 = h_lock(c, n2, 0, 0);
    assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
    assert_true(adm_int("SELECT IS_USED_LOCK('%s')", name) > 0);
    assert_int_equal(adm_int("SELECT GET_LOCK('%s', 0)", name), 0);
    assert_int_equal(adm_int("SELECT GET_LOCK('%s', 0)", n2), 1);
    assert_int_equal(dlock_try_acquire(lk2), DLOCK_EBUSY);
    assert_int_equal(adm_int("SELECT RELEASE_LOCK('%s')", n2), 1);
    assert_int_equal(dlock_try_acquire(lk2), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(dlock_release(lk2), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_lock_free(lk2);
    dlock_client_close(c);
}

static void expect_open_error(const char *uri, int code, const char *word)
{
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, uri, NULL);
    const char *msg = dlock_client_errmsg(c);

    if (rc != code || strstr(msg, word) == NULL)
        fail_msg("open %s: got %d '%s', want %d and '%s'", uri, rc, msg, code,
                 word);
    /* Passwords never reach a message. */
    assert_null(strstr(msg, "dlock-test-pw-7Q"));
    assert_null(strstr(msg, "s3cr3t-pw"));
    dlock_client_close(c);
}

/* Every parameter is checked, with a message naming it. */
static void mysql__uri_parameters_checked(void **state)
{
    char u[4096], port[16];
    const char *p;

    (void)state;
    p = strrchr(base_uri, ':');
    assert_non_null(p);
    snprintf(port, sizeof port, "%d", atoi(p + 1));
#define BAD(params, word) \
    expect_open_error(uri_for(1, "insert", params), DLOCK_EINVAL, word)
    expect_open_error(uri_for(1, "bogus", NULL), DLOCK_EINVAL, "mode");
    BAD("table=x%3B%20DROP%20TABLE%20y", "table");
    BAD("table=1abc", "table");
    BAD("table=a-b", "table");
    BAD("table=abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghi",
        "table"); /* 59 characters */
    BAD("table=", "table");
    BAD("ssl=maybe", "ssl");
    BAD("ssl_ca=/etc/ssl/certs/ca-certificates.crt", "ssl_ca");
    BAD("namespace=%FF", "namespace");
    BAD("bogus=1", "bogus");
#undef BAD
    snprintf(u, sizeof u, "mysql://dlock:s3cr3t-pw@127.0.0.1:%s", port);
    expect_open_error(u, DLOCK_EINVAL, "path");
    snprintf(u, sizeof u, "mysql://dlock:s3cr3t-pw@127.0.0.1:%s/a/b", port);
    expect_open_error(u, DLOCK_EINVAL, "path");
    snprintf(u, sizeof u, "mysql://127.0.0.1:%s/dlock", port);
    expect_open_error(u, DLOCK_EINVAL, "user");
    snprintf(u, sizeof u, "mysql://dlock:s3cr3t-pw@127.0.0.1:%s,h2/dlock",
             port);
    expect_open_error(u, DLOCK_EINVAL, "host");
    /* The server's own words for a wrong password, without it: EAUTH. */
    snprintf(u, sizeof u, "mariadb://dlock:s3cr3t-pw@127.0.0.1:%s/dlock",
             port);
    expect_open_error(u, DLOCK_EAUTH, "Access denied");
    /* TLS demanded of a server without it: a clear refusal, whether the
     * client library refuses (verify) or dlock does (require). */
    expect_open_error(uri_for(1, "insert", "ssl=require&timeout=2s"),
                      DLOCK_ECONNECT, "TLS");
    expect_open_error(uri_for(1, "get_lock", "ssl=verify&timeout=2s"),
                      DLOCK_ECONNECT, "SSL");
}

/* Tables appear on first use, named after table=, and again if dropped
 * while clients are connected. */
static void mysql__tables_created_on_first_use(void **state)
{
    char t[64], extra[96];

    (void)state;
    snprintf(t, sizeof t, "dlock_fresh_%ld", (long)getpid());
    snprintf(extra, sizeof extra, "table=%s", t);
    adm_exec("DROP TABLE IF EXISTS %s, %s_fmem, %s_epoch, %s_rows", t, t, t,
             t);
    for (int m = 0; m < NMODES; m++) {
        dlock_client *c = client_for(modes[m], extra);
        dlock_client *o = client_for(modes[m], extra);
        const char *name = h_name("fresh");
        dlock_lock *lk = h_lock(c, name, 0, 0), *other = h_lock(o, name, 0, 0);

        assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        /* Dropped behind the client's back: made again on next use (the
         * counters, like a restart, under a new epoch), and for_update's
         * CREATE did not commit the lock away. */
        adm_exec("DROP TABLE IF EXISTS %s_fmem, %s_frec", t, t);
        assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
        assert_true(dlock_fence(lk) > 0);
        assert_int_equal(dlock_try_acquire(other), DLOCK_EBUSY);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        dlock_lock_free(lk);
        dlock_lock_free(other);
        dlock_client_close(c);
        dlock_client_close(o);
    }
    assert_int_equal(adm_int("SELECT COUNT(*) FROM information_schema.TABLES "
                             "WHERE TABLE_SCHEMA = 'dlock' AND TABLE_NAME "
                             "IN ('%s', '%s_fmem', '%s_epoch', '%s_rows')",
                             t, t, t, t),
                     4);
}

/* dlock inspect in every mode: held or not, by whom where the server can
 * say, the last fence, the lease left; the look takes nothing. */
static void mysql__inspect_each_mode(void **state)
{
    (void)state;
    for (int m = 0; m < NMODES; m++) {
        dlock_client *a = client_for(modes[m], NULL);
        dlock_client *b = client_for(modes[m], NULL);
        const char *name = h_name("inspect");
        dlock_lock *lk = h_lock(a, name, 0, 0), *other = h_lock(b, name, 0, 0);
        dlock_state st = DLOCK_STATE_INIT;
        uint64_t fence;

        assert_int_equal(dlock_inspect(b, name, &st), DLOCK_OK);
        assert_int_equal(st.held, 0);
        assert_int_equal(st.fence, 0);
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        fence = dlock_fence(lk);
        assert_int_equal(dlock_inspect(b, name, &st), DLOCK_OK);
        if (st.held != 1)
            fail_msg("%s: held %d: %s", modes[m], st.held,
                     dlock_client_errmsg(b));
        assert_int_equal(st.fence, fence);
        /* Every mode names the holder as its owner id. */
        assert_string_equal(st.owner, dlock_lock_owner(lk));
        if (m == 0)
            assert_true(st.remaining_ms > 0 && st.remaining_ms <= 30000);
        /* Looking took nothing: still held, still exclusive. */
        assert_int_equal(dlock_try_acquire(other), DLOCK_EBUSY);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        assert_int_equal(dlock_inspect(b, name, &st), DLOCK_OK);
        assert_int_equal(st.held, 0);
        assert_int_equal(st.fence, fence);
        /* ...and the free lock is not left taken by the look either. */
        assert_int_equal(dlock_try_acquire(other), DLOCK_OK);
        assert_int_equal(dlock_release(other), DLOCK_OK);
        dlock_lock_free(lk);
        dlock_lock_free(other);
        dlock_client_close(a);
        dlock_client_close(b);
    }
}

/* The three modes are objects of the backend's table (backend.h v2):
 * listed in order with the caps docs/backends/mysql.md gives, without a
 * server (port 1 answers nothing), under both schemes; mode= picks one,
 * and a client of each mode reports the same caps once connected. */
static void mysql__modes_listed_without_a_server(void **state)
{
    static const uint32_t want[NMODES] = {
        DLOCK_CAP_LEASE | DLOCK_CAP_FENCING | DLOCK_CAP_SURVIVES_RECONNECT |
            DLOCK_CAP_BATCH_RENEW | DLOCK_CAP_PERMITS | DLOCK_CAP_LATCH,
        DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
            DLOCK_CAP_SESSION_PER_LOCK | DLOCK_CAP_NATIVE_WAIT |
            DLOCK_CAP_SHARED | DLOCK_CAP_FENCING | DLOCK_CAP_LATCH,
        DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
            DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FENCING | DLOCK_CAP_BATCH_RENEW |
            DLOCK_CAP_PERMITS | DLOCK_CAP_LATCH,
    };
    static const char *const down[] = {
        "mysql://dlock@127.0.0.1:1/dlock", "mariadb://dlock@127.0.0.1:1/dlock"};
    char u[128], err[256];

    (void)state;
    for (int s = 0; s < 2; s++)
        for (int pick = -1; pick < NMODES; pick++) {
            dlock_mode_info mi[4] = {DLOCK_MODE_INFO_INIT, DLOCK_MODE_INFO_INIT,
                                     DLOCK_MODE_INFO_INIT,
                                     DLOCK_MODE_INFO_INIT};
            size_t n = 0;

            snprintf(u, sizeof u, "%s%s%s", down[s], pick < 0 ? "" : "?mode=",
                     pick < 0 ? "" : modes[pick]);
            if (dlock_backend_modes(u, mi, 4, &n, err, sizeof err) != DLOCK_OK)
                fail_msg("%s: %s", u, err);
            assert_int_equal(n, NMODES);
            for (int m = 0; m < NMODES; m++) {
                assert_string_equal(mi[m].mode, modes[m]);
                assert_non_null(mi[m].summary);
                if (mi[m].caps != want[m])
                    fail_msg("%s: caps 0x%x, want 0x%x", modes[m],
                             (unsigned)mi[m].caps, (unsigned)want[m]);
                /* No mode=: the first, insert. */
                assert_int_equal(mi[m].chosen, m == (pick < 0 ? 0 : pick));
            }
        }
    snprintf(u, sizeof u, "%s?mode=bogus", down[0]);
    {
        dlock_mode_info mi[1] = {DLOCK_MODE_INFO_INIT};
        size_t n = 0;
        assert_int_equal(dlock_backend_modes(u, mi, 1, &n, err, sizeof err),
                         DLOCK_EINVAL);
        assert_non_null(strstr(err, "mode"));
    }
    for (int m = 0; m < NMODES; m++) {
        dlock_client *c = client_for(modes[m], NULL);
        assert_int_equal(h_caps(c), want[m]);
        dlock_client_close(c);
    }
}

/* ---- connections --------------------------------------------------------- */

/* A thousand GET_LOCK locks of one client on a handful of connections;
 * FOR UPDATE needs a connection per held lock, as its caps say. */
static void mysql__get_lock_shares_connections(void **state)
{
    enum { N = 1000, M = 20 };
    static dlock_lock *lks[N];
    dlock_client *c = client_for("get_lock", "lease=3s");
    dlock_client *o = client_for("get_lock", NULL);
    char name[64];
    long long before, during;

    (void)state;
    assert_true(h_caps(c) & DLOCK_CAP_CONN_BOUND);
    assert_false(h_caps(c) & DLOCK_CAP_SESSION_PER_LOCK);
    before = dlock_connections();
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "%s-%d", h_name("many"), i);
        lks[i] = h_lock(c, name, 0, 0);
        assert_int_equal(dlock_try_acquire(lks[i]), DLOCK_OK);
    }
    during = dlock_connections();
    fprintf(stderr, "  get_lock: %d locks held, dlock connections %lld -> "
                    "%lld\n",
            N, before, during);
    assert_true(during - before <= 3);
    /* They are really held, and renewed (one ping per connection). */
    h_sleep_ms(1200);
    for (int i = 0; i < N; i += 97) {
        dlock_lock *x = h_lock(o, dlock_lock_name(lks[i]), 0, 0);
        assert_int_equal(dlock_try_acquire(x), DLOCK_EBUSY);
        dlock_lock_free(x);
        assert_true(dlock_held(lks[i]));
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(dlock_release(lks[i]), DLOCK_OK);
        dlock_lock_free(lks[i]);
    }
    dlock_client_close(c);
    dlock_client_close(o);

    c = client_for("for_update", NULL);
    assert_true(h_caps(c) & DLOCK_CAP_SESSION_PER_LOCK);
    before = dlock_connections();
    for (int i = 0; i < M; i++) {
        snprintf(name, sizeof name, "%s-%d", h_name("rows"), i);
        lks[i] = h_lock(c, name, 0, 0);
        assert_int_equal(dlock_try_acquire(lks[i]), DLOCK_OK);
    }
    during = dlock_connections();
    fprintf(stderr, "  for_update: %d locks held, dlock connections %lld -> "
                    "%lld\n",
            M, before, during);
    assert_true(during - before >= M - 1);
    for (int i = 0; i < M; i++) {
        assert_int_equal(dlock_release(lks[i]), DLOCK_OK);
        dlock_lock_free(lks[i]);
    }
    dlock_client_close(c);
}

/* Child role "hold URI NAME GATE_FD": take the lock, say so, wait. */
static int hold_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock *lk = c != NULL ? h_lock(c, args[1], 0, 0) : NULL;
    char b = 1;

    if (lk == NULL || dlock_acquire(lk, 10000) != DLOCK_OK)
        return 3;
    if (write(atoi(args[2]), &b, 1) != 1)
        return 4;
    for (;;)
        pause();
}

/* SIGKILL of the holder: a connection-bound lock is free as soon as the
 * server sees the connection close, whatever the lease; an insert row
 * stays until its lease runs out. */
static void mysql__holder_killed_frees_lock(void **state)
{
    (void)state;
    for (int m = 0; m < NMODES; m++) {
        bool lease = m == 0;
        const char *uri = uri_for(1, modes[m], lease ? "lease=2s"
                                                     : "lease=60s");
        dlock_client *c = client_for(modes[m], NULL);
        const char *name = h_name("killed");
        dlock_lock *b = h_lock(c, name, 0, 0);
        struct h_gate gate;
        char fd[16];
        int64_t t0;
        pid_t pid;

        h_gate_init(&gate);
        snprintf(fd, sizeof fd, "%d", gate.fd[1]);
        pid = h_spawn("hold", uri, name, fd);
        assert_true(h_gate_wait(&gate, 30000));
        assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
        kill(pid, SIGKILL);
        assert_int_equal(h_wait(pid), 128 + SIGKILL);
        t0 = h_now_ms();
        if (lease) /* the row outlives its process */
            assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
        assert_int_equal(dlock_acquire(b, 20000), DLOCK_OK);
        fprintf(stderr, "  %s: free %lld ms after the SIGKILL\n", modes[m],
                (long long)(h_now_ms() - t0));
        if (!lease)
            assert_true(h_now_ms() - t0 < 20000); /* not the 60 s lease */
        assert_int_equal(dlock_release(b), DLOCK_OK);
        dlock_lock_free(b);
        dlock_client_close(c);
        h_gate_close(&gate);
    }
}

/*
 * A DBA kills the holder's connections. Connection-bound modes lose the
 * lock (the watchdog says so); insert reconnects and keeps it. Either way
 * the next holder's fence is above the old one: for_update must not hand
 * out again a token its rolled-back transaction had bumped.
 */
static void mysql__killed_connection_and_fence(void **state)
{
    (void)state;
    for (int m = 0; m < NMODES; m++) {
        bool lease = m == 0;
        dlock_client *a = client_for(modes[m], NULL), *b;
        const char *name = h_name("kill");
        dlock_lock *la = lost_lock(a, name, 900), *lb;
        uint64_t f1;
        int rc;

        atomic_store(&lost_calls, 0);
        assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
        f1 = dlock_fence(la);
        assert_true(kill_dlock_connections() >= 1);
        if (lease) {
            /* Renewals go on over a new connection. */
            h_sleep_ms(1500);
            assert_int_equal(atomic_load(&lost_calls), 0);
            assert_true(dlock_held(la));
            assert_int_equal(dlock_renew(la), DLOCK_OK);
        } else {
            assert_true(eventually_lost(1, 10000));
            assert_int_equal(atomic_load(&lost_code), DLOCK_ELOST);
            assert_false(dlock_held(la));
        }
        b = client_for(modes[m], NULL);
        lb = h_lock(b, name, 0, 0);
        if (lease) {
            assert_int_equal(dlock_try_acquire(lb), DLOCK_EBUSY);
            assert_int_equal(dlock_release(la), DLOCK_OK);
        } else {
            rc = dlock_release(la);
            assert_true(rc == DLOCK_ELOST);
        }
        assert_int_equal(dlock_acquire(lb, 10000), DLOCK_OK);
        fprintf(stderr, "  %s: fence %llu before the kill, %llu after\n",
                modes[m], (unsigned long long)f1,
                (unsigned long long)dlock_fence(lb));
        assert_true(dlock_fence(lb) > f1);
        assert_int_equal(dlock_release(lb), DLOCK_OK);
        dlock_lock_free(la);
        dlock_lock_free(lb);
        dlock_client_close(a);
        dlock_client_close(b);
    }
}

struct waiter {
    dlock_lock *lk;
    int rc;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->rc = dlock_acquire(w->lk, 20000);
    return NULL;
}

static void *wait_thread_ms(void *arg)
{
    struct waiter *w = arg;
    w->rc = dlock_acquire(w->lk, 800);
    return NULL;
}

/* The connection waiting for a name: a GET_LOCK, or a row lock. */
#define WAITING_GET_LOCK                                                   \
    "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'dlock' "  \
    "AND STATE = 'User lock'"
#define WAITING_ROW                                                        \
    "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX "       \
    "WHERE trx_state = 'LOCK WAIT'"
/* How many connections wait so (poll them with adm_poll). */
#define WAITING_GET_LOCKS                                                  \
    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = "    \
    "'dlock' AND STATE = 'User lock'"
#define WAITING_ROWS                                                       \
    "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state " \
    "= 'LOCK WAIT'"

/* for_update and get_lock waiters wait inside the server, where the admin
 * can see them, and get the lock when it is released. */
static void mysql__waiters_wait_on_the_server(void **state)
{
    (void)state;
    for (int m = 1; m < NMODES; m++) {
        dlock_client *a = client_for(modes[m], NULL);
        dlock_client *b = client_for(modes[m], NULL);
        const char *name = h_name("native");
        dlock_lock *la = h_lock(a, name, 0, 0);
        struct waiter w = {h_lock(b, name, 0, 0), -100};
        pthread_t t;

        assert_true(h_caps(b) & DLOCK_CAP_NATIVE_WAIT);
        assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
        pthread_create(&t, NULL, wait_thread, &w);
        assert_true(adm_poll(m == 1 ? WAITING_ROWS : WAITING_GET_LOCKS,
                             10000) > 0);
        assert_int_equal(dlock_release(la), DLOCK_OK);
        pthread_join(t, NULL);
        assert_int_equal(w.rc, DLOCK_OK);
        assert_int_equal(dlock_release(w.lk), DLOCK_OK);
        dlock_lock_free(la);
        dlock_lock_free(w.lk);
        dlock_client_close(a);
        dlock_client_close(b);
    }
}

/* la holds the name while lb waits for it on the server, then lets go:
 * lb's connection id (the one waiting in 'User lock'). */
static long long handed_over_as(dlock_lock *la, dlock_lock *lb,
                                const char *waiting)
{
    struct waiter w = {lb, -100};
    pthread_t t;
    long long id;

    assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
    pthread_create(&t, NULL, wait_thread, &w);
    id = adm_poll(waiting, 10000);
    assert_true(id > 0);
    assert_int_equal(dlock_release(la), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(dlock_fence(lb) > 0);
    assert_int_equal(dlock_release(lb), DLOCK_OK);
    return id;
}

/* Statements connection id executed whose text has pattern (LIKE). */
static long long executed(long long id, const char *pattern)
{
    return adm_int("SELECT COUNT(*) FROM mysql.general_log WHERE "
                   "thread_id = %lld AND command_type = 'Execute' AND "
                   "argument LIKE '%s'",
                   id, pattern);
}

/*
 * get_lock skips its one-statement try when the session found the name
 * held by another at its last acquire: counted by the server (its general
 * log), a waiter's second contended acquire runs the wait and no try; an
 * uncontended acquire still hinted runs the wait (which finds the name
 * free and clears the hint), and the next one the try again.
 */
#define TRY_SQL "%GET_LOCK(%, 0) = 1%"
#define WAIT_SQL "%CASE WHEN IS_USED_LOCK(%"
/* The test of a mode's skipped try: waiting finds the connection that
 * waits; try_sql and wait_sql (LIKE) its statements. */
static void busy_name_skips_the_try(const char *mode, const char *waiting,
                                    const char *try_sql,
                                    const char *wait_sql, long long writes)
{
    dlock_client *a = client_for(mode, NULL);
    dlock_client *b = client_for(mode, NULL);
    const char *name = h_name("hint");
    dlock_lock *la = h_lock(a, name, 0, 0), *lb = h_lock(b, name, 0, 0);
    char out[64];
    long long id;

    adm_text(out, sizeof out, "SELECT @@GLOBAL.log_output");
    handed_over_as(la, lb, waiting); /* the try finds it held: hinted */
    adm_exec("SET GLOBAL log_output = 'TABLE'");
    adm_exec("TRUNCATE mysql.general_log");
    adm_exec("SET GLOBAL general_log = 1");
    id = handed_over_as(la, lb, waiting); /* hinted: no try */
    assert_int_equal(dlock_acquire(lb, 5000), DLOCK_OK); /* hinted, free */
    assert_int_equal(dlock_release(lb), DLOCK_OK);
    assert_int_equal(dlock_acquire(lb, 5000), DLOCK_OK); /* the try */
    assert_int_equal(dlock_release(lb), DLOCK_OK);
    adm_exec("SET GLOBAL general_log = 0");
    adm_exec("SET GLOBAL log_output = '%s'", out);
    printf("  %s waiter %lld: %lld tries, %lld waits, %lld writes\n", mode,
           id, executed(id, try_sql), executed(id, wait_sql),
           executed(id, "INSERT INTO%"));
    assert_int_equal(executed(id, try_sql), 1);
    assert_int_equal(executed(id, wait_sql), 2);
    /* The fence's statements: the try's, and a bump after each wait
     * that does not draw its token itself. */
    assert_int_equal(executed(id, "INSERT INTO%"), writes);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

static void mysql__get_lock_busy_name_skips_the_try(void **state)
{
    (void)state;
    /* A wait draws its token in its own statement (fence.c's sequence):
     * the try's is the only write. */
    busy_name_skips_the_try("get_lock", WAITING_GET_LOCK, TRY_SQL, WAIT_SQL,
                            1);
}

/*
 * for_update skips its NOWAIT try as get_lock does; its waiting FOR
 * UPDATE cannot say whether the row was busy, so the token does: one
 * above the session's last on the name means nobody held it in between,
 * and the next acquire tries again. Counted in the general log as above.
 */
#define FU_TRY_SQL "INSERT INTO %FOR UPDATE NOWAIT%"
#define FU_WAIT_SQL "SELECT 1 FROM %FOR UPDATE"
static void mysql__for_update_busy_name_skips_the_try(void **state)
{
    (void)state;
    busy_name_skips_the_try("for_update", WAITING_ROW, FU_TRY_SQL,
                            FU_WAIT_SQL, 3);
}

/*
 * for_update waits natively when less than a second is left (MariaDB: the
 * statement's max_statement_time ends it at the deadline): a 400 ms
 * acquire on a held name times out after about 400 ms, having sent one
 * waiting statement and no NOWAIT retries (counted in the general log),
 * and a waiter with 800 ms gets the lock released during its wait.
 */
#define FU_SUB_SQL "SET STATEMENT max_statement_time = %FOR UPDATE"
static void mysql__for_update_waits_under_a_second(void **state)
{
    dlock_client *a = client_for("for_update", NULL);
    dlock_client *b = client_for("for_update", NULL);
    const char *name = h_name("fu-sub");
    dlock_lock *la = h_lock(a, name, 0, 0), *lb = h_lock(b, name, 0, 0);
    struct waiter w = {lb, -100};
    char out[64];
    long long id, nowaits;
    pthread_t t;
    int64_t t0, took;

    (void)state;
    assert_int_equal(dlock_acquire(lb, 0), DLOCK_OK); /* the row exists */
    assert_int_equal(dlock_release(lb), DLOCK_OK);
    assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
    adm_text(out, sizeof out, "SELECT @@GLOBAL.log_output");
    adm_exec("SET GLOBAL log_output = 'TABLE'");
    adm_exec("TRUNCATE mysql.general_log");
    adm_exec("SET GLOBAL general_log = 1");
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(lb, 400), DLOCK_ETIMEDOUT);
    took = h_now_ms() - t0;
    adm_exec("SET GLOBAL general_log = 0");
    id = adm_int("SELECT thread_id FROM mysql.general_log WHERE argument "
                 "LIKE '%s' LIMIT 1", FU_SUB_SQL);
    nowaits = adm_int("SELECT COUNT(*) FROM mysql.general_log WHERE "
                      "thread_id = %lld AND command_type = 'Execute' AND "
                      "argument LIKE '%%NOWAIT%%'", id);
    printf("  400 ms wait: %lld ms, %lld waits, %lld NOWAIT\n", (long long)took,
           executed(id, FU_SUB_SQL), nowaits);
    assert_true(took >= 390 && took < 1000);
    assert_true(executed(id, FU_SUB_SQL) >= 1);
    assert_true(nowaits <= 4); /* tries; polling sent one per 1-32 ms */
    /* Granted inside such a wait. */
    pthread_create(&t, NULL, wait_thread_ms, &w);
    adm_poll(WAITING_ROW, 5000);
    assert_int_equal(dlock_release(la), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(dlock_fence(lb) > 0);
    assert_int_equal(dlock_release(lb), DLOCK_OK);
    adm_exec("SET GLOBAL log_output = '%s'", out);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* for_update's shared locks (LOCK IN SHARE MODE): a reader that comes
 * after a writer queued waits behind it, so a stream of readers cannot
 * starve the writer; the writer gets the lock when the readers before it
 * are done; a reader's fence is a fence like any other. */
static void mysql__for_update_readers_queue_behind_writer(void **state)
{
    dlock_client *a = client_for("for_update", NULL);
    dlock_client *b = client_for("for_update", NULL);
    const char *name = h_name("rw");
    dlock_lock *r1 = h_lock(a, name, 0, DLOCK_LOCK_SHARED);
    dlock_lock *r2 = h_lock(a, name, 0, DLOCK_LOCK_SHARED);
    struct waiter w = {h_lock(b, name, 0, 0), -100};
    pthread_t t;
    uint64_t f1, fw;

    (void)state;
    assert_int_equal(dlock_acquire(r1, 0), DLOCK_OK);
    f1 = dlock_fence(r1);
    assert_true(f1 > 0);
    pthread_create(&t, NULL, wait_thread, &w);
    assert_true(adm_poll(WAITING_ROWS, 10000) > 0);
    /* The writer is queued: a new reader does not get past it. */
    assert_int_equal(dlock_try_acquire(r2), DLOCK_EBUSY);
    assert_int_equal(dlock_release(r1), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    fw = dlock_fence(w.lk);
    assert_true(fw > f1);
    assert_int_equal(dlock_try_acquire(r2), DLOCK_EBUSY);
    assert_int_equal(dlock_release(w.lk), DLOCK_OK);
    assert_int_equal(dlock_acquire(r2, 5000), DLOCK_OK);
    assert_true(dlock_fence(r2) > fw);
    assert_int_equal(dlock_release(r2), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w.lk);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* ---- the server goes away ------------------------------------------------ */

/*
 * A restart ends every connection: get_lock and for_update holders are
 * told their lock is lost (the server freed it), insert holders keep their
 * rows and renew over new connections.
 */
static void mysql__server_restart(void **state)
{
    dlock_client *c[NMODES], *o;
    dlock_lock *lk[NMODES];
    const char *name[NMODES];
    char names[NMODES][64];
    int rc;

    (void)state;
    atomic_store(&lost_calls, 0);
    for (int m = 0; m < NMODES; m++) {
        snprintf(names[m], sizeof names[m], "%s", h_name("restart"));
        name[m] = names[m];
        c[m] = client_for(modes[m], NULL);
        lk[m] = lost_lock(c[m], name[m], m == 0 ? 20000 : 900);
        assert_int_equal(dlock_acquire(lk[m], 0), DLOCK_OK);
    }
    assert_int_equal(serverctl("restart"), 0);
    /* The two connection-bound holders hear of it. */
    assert_true(eventually_lost(2, 15000));
    assert_int_equal(atomic_load(&lost_code), DLOCK_ELOST);
    assert_false(dlock_held(lk[1]));
    assert_false(dlock_held(lk[2]));
    /* The insert holder was in doubt from the moment its connection
     * ended [B-WATCH-1] until the watchdog's renewal over a new connection
     * found its row, which survived the restart. */
    for (int64_t end = h_now_ms() + 10000;
         !dlock_held(lk[0]) && h_now_ms() < end;)
        h_sleep_ms(10);
    assert_true(dlock_held(lk[0]));
    rc = dlock_renew(lk[0]);
    if (rc == DLOCK_ECONNECT)
        rc = dlock_renew(lk[0]);
    assert_int_equal(rc, DLOCK_OK);
    assert_true(dlock_held(lk[0]));
    for (int m = 0; m < NMODES; m++) {
        dlock_lock *x;
        o = client_for(modes[m], NULL);
        x = h_lock(o, name[m], 0, 0);
        assert_int_equal(dlock_try_acquire(x), m == 0 ? DLOCK_EBUSY
                                                      : DLOCK_OK);
        if (m != 0)
            assert_int_equal(dlock_release(x), DLOCK_OK);
        assert_int_equal(dlock_release(lk[m]), m == 0 ? DLOCK_OK
                                                      : DLOCK_ELOST);
        dlock_lock_free(x);
        dlock_client_close(o);
        dlock_lock_free(lk[m]);
        dlock_client_close(c[m]);
    }
    assert_int_equal(atomic_load(&lost_calls), 2);
}

/* A paused server (SIGSTOP: connections accepted by the kernel, never
 * answered) and a stopped one give DLOCK_ECONNECT within the timeout. */
static void mysql__paused_or_stopped_server_gives_econnect(void **state)
{
    dlock_client *c[NMODES], *x = NULL;
    dlock_lock *lk[NMODES];
    int64_t t0, took;
    int rc;

    (void)state;
    for (int m = 0; m < NMODES; m++) {
        c[m] = h_client(uri_for(0, modes[m], "timeout=1s"));
        assert_non_null(c[m]);
        lk[m] = h_lock(c[m], h_name("down"), 0, 0);
    }
    assert_int_equal(serverctl("pause"), 0);
    for (int m = 0; m < NMODES; m++) {
        t0 = h_now_ms();
        rc = dlock_try_acquire(lk[m]);
        took = h_now_ms() - t0;
        fprintf(stderr, "  paused, %s: %s in %lld ms: %s\n", modes[m],
                dlock_err_name(rc), (long long)took,
                dlock_lock_errmsg(lk[m]));
        assert_int_equal(rc, DLOCK_ECONNECT);
        assert_true(took < 1000 + 4000);
    }
    t0 = h_now_ms();
    rc = dlock_client_open(&x, uri_for(0, "insert", "timeout=1s"), NULL);
    took = h_now_ms() - t0;
    fprintf(stderr, "  paused, open: %s in %lld ms: %s\n", dlock_err_name(rc),
            (long long)took, dlock_client_errmsg(x));
    dlock_client_close(x);
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(took < 1000 + 4000);
    assert_int_equal(serverctl("resume"), 0);
    /* Usable again: the broken sessions were replaced. */
    for (int m = 0; m < NMODES; m++) {
        assert_int_equal(dlock_acquire(lk[m], 10000), DLOCK_OK);
        assert_int_equal(dlock_release(lk[m]), DLOCK_OK);
    }

    assert_int_equal(serverctl("stop"), 0);
    for (int m = 0; m < NMODES; m++) {
        t0 = h_now_ms();
        rc = dlock_try_acquire(lk[m]);
        took = h_now_ms() - t0;
        assert_int_equal(rc, DLOCK_ECONNECT);
        assert_true(took < 1000 + 4000);
    }
    x = NULL;
    t0 = h_now_ms();
    rc = dlock_client_open(&x, uri_for(0, "get_lock", "timeout=1s"), NULL);
    took = h_now_ms() - t0;
    dlock_client_close(x);
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(took < 1000 + 4000);
    assert_int_equal(serverctl("start"), 0);
    for (int m = 0; m < NMODES; m++) {
        assert_int_equal(dlock_acquire(lk[m], 10000), DLOCK_OK);
        assert_int_equal(dlock_release(lk[m]), DLOCK_OK);
        dlock_lock_free(lk[m]);
        dlock_client_close(c[m]);
    }
}

/* ---- permits ------------------------------------------------------------- */

/* SQL for GET_LOCK's name of permit slot i of name (no namespace), as
 * docs/backends/mysql.md gives it: "dlock:<i>#<name>" up to 53
 * characters and 181 bytes, else "dlock:<i>!" and 53 hex digits of
 * SHA-256(name). */
static void slot_sql(char *out, size_t cap, const char *name, unsigned i)
{
    char lit[1024];
    size_t chars = 0;

    for (const char *p = name; *p != '\0'; p++)
        chars += ((unsigned char)*p & 0xc0) != 0x80;
    hexlit(lit, sizeof lit, name, strlen(name));
    if (chars <= 53 && strlen(name) <= 181)
        snprintf(out, cap, "CONCAT('dlock:', %u, '#', CONVERT(%s USING "
                 "utf8mb4))", i, lit);
    else
        snprintf(out, cap, "CONCAT('dlock:', %u, '!', LEFT(SHA2(%s, 256), "
                 "53))", i, lit);
}

/* The connection id holding slot i of name, or -1. */
static long long slot_holder(const char *name, unsigned i)
{
    char q[1200];

    slot_sql(q, sizeof q, name, i);
    return adm_int("SELECT IS_USED_LOCK(%s)", q);
}

/* The admin takes (1) or gives back (0) slot i of name. */
static void adm_slot(const char *name, unsigned i, bool take)
{
    char q[1200];

    slot_sql(q, sizeof q, name, i);
    assert_int_equal(adm_int(take ? "SELECT GET_LOCK(%s, 0)"
                                  : "SELECT RELEASE_LOCK(%s)",
                             q),
                     1);
}

static dlock_lock *permit(dlock_client *c, const char *name, uint32_t n)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.permits = n;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
}

/* Slots 0..n-1 of name held by others than the admin: how many, and how
 * many different connections hold them. */
static unsigned slots_held(const char *name, unsigned n, unsigned *conns)
{
    long long ids[64];
    unsigned held = 0;
    long long me = (long long)mysql_thread_id(adm);

    assert_true(n <= 64);
    *conns = 0;
    for (unsigned i = 0; i < n; i++) {
        long long id = slot_holder(name, i);
        if (id < 0 || id == me)
            continue;
        bool seen = false;
        for (unsigned j = 0; j < held; j++)
            seen = seen || ids[j] == id;
        *conns += !seen;
        ids[held++] = id;
    }
    return held;
}

/* dlock inspect of name says held (1) or free (0); returns its fence. */
static uint64_t inspect_held(dlock_client *c, const char *name, int want)
{
    dlock_state st = DLOCK_STATE_INIT;

    assert_int_equal(dlock_inspect(c, name, &st), DLOCK_OK);
    assert_int_equal(st.held, want);
    return st.fence;
}

/* get_lock permits: one statement tries many slots (CASE stops at the
 * first GET_LOCK granted), and the server, seen from the admin's
 * connection, shows each permit holding exactly one slot: with the admin
 * holding all slots but one, of 3 and of 40 (two statements' worth); and
 * five handles of one client hold five slots on five connections, which
 * inspect sees as held. */
static void mysql__permit_takes_one_slot(void **state)
{
    dlock_client *c = client_for("get_lock", NULL);
    const char *name = h_name("sem1");
    const long long me = (long long)mysql_thread_id(adm);
    dlock_lock *lk[6];
    unsigned conns;

    (void)state;
    adm_slot(name, 0, true);
    adm_slot(name, 2, true);
    lk[0] = permit(c, name, 3);
    lk[1] = permit(c, name, 3);
    assert_int_equal(dlock_try_acquire(lk[0]), DLOCK_OK);
    assert_int_equal(slot_holder(name, 0), me);
    assert_int_equal(slot_holder(name, 2), me);
    assert_true(slot_holder(name, 1) > 0 && slot_holder(name, 1) != me);
    assert_int_equal(dlock_try_acquire(lk[1]), DLOCK_EBUSY);
    assert_int_equal(slots_held(name, 3, &conns), 1);
    assert_int_equal(dlock_release(lk[0]), DLOCK_OK);
    assert_int_equal(slot_holder(name, 1), -1);
    adm_slot(name, 0, false);
    adm_slot(name, 2, false);
    for (int i = 0; i < 2; i++)
        dlock_lock_free(lk[i]);

    /* 40 slots: two statements of 32 tries; only slot 37 is free. */
    name = h_name("sem40");
    for (unsigned i = 0; i < 40; i++)
        if (i != 37)
            adm_slot(name, i, true);
    lk[0] = permit(c, name, 40);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(dlock_try_acquire(lk[0]), DLOCK_OK);
        assert_int_equal(slots_held(name, 40, &conns), 1);
        assert_true(slot_holder(name, 37) != me);
        assert_int_equal(dlock_release(lk[0]), DLOCK_OK);
    }
    dlock_lock_free(lk[0]);
    for (unsigned i = 0; i < 40; i++)
        if (i != 37)
            adm_slot(name, i, false);

    /* Five handles of one client: five slots, five connections. */
    name = h_name("sem5");
    for (int i = 0; i < 6; i++)
        lk[i] = permit(c, name, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(dlock_try_acquire(lk[i]), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(lk[5]), DLOCK_EBUSY);
    assert_int_equal(slots_held(name, 5, &conns), 5);
    assert_int_equal(conns, 5);
    /* inspect: held while any permit is, the fence the last one's. */
    assert_int_equal(inspect_held(c, name, 1), dlock_fence(lk[4]));
    for (int i = 0; i < 5; i++)
        assert_int_equal(dlock_release(lk[i]), DLOCK_OK);
    assert_int_equal(slots_held(name, 5, &conns), 0);
    inspect_held(c, name, 0);
    for (int i = 0; i < 6; i++)
        dlock_lock_free(lk[i]);
    dlock_client_close(c);
}

/* Permit slot names at and past 53 characters and 181 bytes (readable,
 * then hashed), multibyte and quoting characters; a lock named like a
 * slot, and the semaphore's own name as a lock, do not alias its slots. */
static void mysql__permit_names_near_the_limit(void **state)
{
    dlock_client *c = client_for("get_lock", NULL);
    char a53[54], a54[55], e45[45 * 4 + 1] = "", e46[46 * 4 + 1],
        alias[300];
    const char *names[6] = {a53, a54, e45, e46,
                            "it's a %_\\ \"semaphore\"#1!", h_name("plain")};
    dlock_lock *lk[3], *other;
    unsigned conns;

    (void)state;
    memset(a53, 's', 53);
    a53[53] = '\0';
    memset(a54, 's', 54);
    a54[54] = '\0';
    for (int i = 0; i < 45; i++)
        strcat(e45, LOCK1);
    snprintf(e46, sizeof e46, "%s" LOCK1, e45);
    for (int k = 0; k < 6; k++) {
        for (int i = 0; i < 3; i++)
            lk[i] = permit(c, names[k], 2);
        if (dlock_try_acquire(lk[0]) != DLOCK_OK)
            fail_msg("name %d: %s", k, dlock_lock_errmsg(lk[0]));
        assert_int_equal(dlock_try_acquire(lk[1]), DLOCK_OK);
        assert_int_equal(dlock_try_acquire(lk[2]), DLOCK_EBUSY);
        if (slots_held(names[k], 2, &conns) != 2 || conns != 2)
            fail_msg("name %d: slots not held as documented", k);
        /* Neither the name as a lock nor "dlock:0#name" is a slot. */
        snprintf(alias, sizeof alias, "dlock:0#%s", names[k]);
        for (int j = 0; j < 2; j++) {
            assert_int_equal(dlock_lock_new(&other, c,
                                            j == 0 ? alias : names[k], NULL),
                             DLOCK_OK);
            assert_int_equal(dlock_try_acquire(other), DLOCK_OK);
            assert_int_equal(dlock_release(other), DLOCK_OK);
            dlock_lock_free(other);
        }
        for (int i = 0; i < 3; i++) {
            dlock_release(lk[i]);
            dlock_lock_free(lk[i]);
        }
        assert_int_equal(slots_held(names[k], 2, &conns), 0);
    }
    dlock_client_close(c);
}

/* SQL for mode insert's key of permit slot i of name (no namespace):
 * SHA-256(0xff "dlock-permit", i as two bytes, name). */
static void slot_key_sql(char *out, size_t cap, const char *name, unsigned i)
{
    char lit[1024];

    hexlit(lit, sizeof lit, name, strlen(name));
    snprintf(out, cap, "UNHEX(SHA2(CONCAT(X'ff', 'dlock-permit', "
             "X'%02x%02x', %s), 256))", i >> 8, i & 255, lit);
}

/* Mode insert: a permit is a row of its slot's key (as a DBA computes it)
 * in the lock table, with the handle's owner. With every slot of 40 but
 * two held by live rows of someone else, and one of those two expired, two
 * permits take those two (one by takeover) and a third is refused; their
 * rows are renewed past a short lease; inspect sees the semaphore held;
 * a release deletes its own row only. */
static void mysql__insert_permits_are_rows(void **state)
{
    dlock_client *c = client_for("insert", "table=dlock_perm");
    const char *name = h_name("semrows");
    dlock_lock *lk[3];
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    char k[1200], got[80];

    (void)state;
    adm_exec("DROP TABLE IF EXISTS dlock_perm, dlock_perm_fmem, "
             "dlock_perm_epoch, dlock_perm_frec");
    /* First use creates the tables. */
    lk[0] = permit(c, name, 40);
    assert_int_equal(dlock_try_acquire(lk[0]), DLOCK_OK);
    assert_int_equal(dlock_release(lk[0]), DLOCK_OK);
    dlock_lock_free(lk[0]);
    for (unsigned i = 0; i < 40; i++) {
        if (i == 37)
            continue;
        slot_key_sql(k, sizeof k, name, i);
        adm_exec("INSERT INTO dlock_perm (lock_key, name, owner, host, "
                 "expires_at) VALUES (%s, 'x', 'admin:%u', 'adm', "
                 "UTC_TIMESTAMP(6) + INTERVAL %d SECOND)",
                 k, i, i == 5 ? -10 : 600);
    }
    o.permits = 40;
    o.lease_ms = 400;
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_new(&lk[i], c, name, &o), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(lk[0]), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(lk[1]), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(lk[2]), DLOCK_EBUSY);
    h_sleep_ms(900); /* past two leases: renewed, one row at a time */
    for (unsigned i = 5; i <= 37; i += 32) {
        slot_key_sql(k, sizeof k, name, i);
        adm_text(got, sizeof got,
                 "SELECT owner FROM dlock_perm WHERE lock_key = %s AND "
                 "expires_at > UTC_TIMESTAMP(6)",
                 k);
        if (strcmp(got, dlock_lock_owner(lk[0])) != 0 &&
            strcmp(got, dlock_lock_owner(lk[1])) != 0)
            fail_msg("slot %u: owner '%s', not a permit's", i, got);
    }
    assert_true(dlock_held(lk[0]) && dlock_held(lk[1]));
    assert_true(dlock_fence(lk[0]) != dlock_fence(lk[1]));
    inspect_held(c, name, 1);
    assert_int_equal(adm_int("SELECT COUNT(*) FROM dlock_perm"), 40);
    assert_int_equal(dlock_release(lk[0]), DLOCK_OK);
    assert_int_equal(adm_int("SELECT COUNT(*) FROM dlock_perm"), 39);
    assert_int_equal(dlock_try_acquire(lk[2]), DLOCK_OK);
    for (int i = 1; i < 3; i++)
        assert_int_equal(dlock_release(lk[i]), DLOCK_OK);
    adm_exec("DELETE FROM dlock_perm WHERE owner LIKE 'admin:%%'");
    assert_int_equal(adm_int("SELECT COUNT(*) FROM dlock_perm"), 0);
    inspect_held(c, name, 0);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(lk[i]);
    dlock_client_close(c);
}

struct handoff {
    dlock_lock *lk;
    _Atomic int64_t got_ms;
    int rc;
};

static void *handoff_wait(void *arg)
{
    struct handoff *h = arg;

    h->rc = dlock_acquire(h->lk, 10000);
    atomic_store(&h->got_ms, h_now_ms());
    return NULL;
}

/* A waiter for a permit of a full semaphore gets it when a holder gives
 * one back: printed, from the release's return to the waiter's acquire
 * (a permit given back on the slot the waiter waits on is handed over at
 * once, one on another slot after its wait slice); bounded loosely. */
static void mysql__permit_waiter_served(void **state)
{
    dlock_client *c = client_for("get_lock", NULL);
    const char *name = h_name("semwait");
    dlock_lock *held[3];
    int64_t took[6];

    (void)state;
    for (int i = 0; i < 3; i++) {
        held[i] = permit(c, name, 3);
        assert_int_equal(dlock_try_acquire(held[i]), DLOCK_OK);
    }
    printf("  permit hand-off (N=3, release to waiter's grant), ms:");
    for (int r = 0; r < 6; r++) {
        struct handoff h = {.lk = permit(c, name, 3)};
        pthread_t th;
        int64_t t0;

        atomic_init(&h.got_ms, 0);
        assert_int_equal(pthread_create(&th, NULL, handoff_wait, &h), 0);
        /* Released at varied points of the waiter's wait slices. */
        h_sleep_ms(120 + 17 * (uint32_t)r);
        assert_int_equal(atomic_load(&h.got_ms), 0);
        assert_int_equal(dlock_release(held[r % 3]), DLOCK_OK);
        t0 = h_now_ms();
        pthread_join(th, NULL);
        assert_int_equal(h.rc, DLOCK_OK);
        took[r] = atomic_load(&h.got_ms) - t0;
        printf(" %lld", (long long)took[r]);
        assert_true(took[r] < 2000);
        dlock_lock_free(held[r % 3]);
        held[r % 3] = h.lk;
    }
    printf("\n");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_release(held[i]), DLOCK_OK);
        dlock_lock_free(held[i]);
    }
    dlock_client_close(c);
}

struct cancelled_wait {
    dlock_lock *lk;
    dlock_cancel *cx;
    int rc;
    _Atomic int64_t done_ms;
};

static void *cancelled_wait_run(void *arg)
{
    struct cancelled_wait *w = arg;

    w->rc = dlock_acquire_cancellable(w->lk, 10000, w->cx);
    atomic_store(&w->done_ms, h_now_ms());
    return NULL;
}

/* A permit waiter (waiting inside the server on one slot) is cancelled at
 * varied points, racing a holder's release: it returns DLOCK_ECANCELED
 * soon, or DLOCK_OK if the grant came first, and a cancelled one leaves
 * no slot held behind (seen from the server). */
static void mysql__permit_wait_cancelled(void **state)
{
    dlock_client *hc = client_for("get_lock", NULL);
    dlock_client *wc = client_for("get_lock", NULL);
    const char *name = h_name("semcx");
    dlock_lock *held[2];
    unsigned conns;
    int64_t worst = 0;

    (void)state;
    for (int r = 0; r < 8; r++) {
        struct cancelled_wait w = {.lk = permit(wc, name, 2)};
        pthread_t th;
        int64_t t0;

        for (int i = 0; i < 2; i++) {
            held[i] = permit(hc, name, 2);
            assert_int_equal(dlock_try_acquire(held[i]), DLOCK_OK);
        }
        assert_int_equal(dlock_cancel_new(&w.cx), DLOCK_OK);
        atomic_init(&w.done_ms, 0);
        assert_int_equal(pthread_create(&th, NULL, cancelled_wait_run, &w),
                         0);
        h_sleep_ms(40 + 9 * (uint32_t)r);
        if (r % 2 == 1) /* race a release against the cancel */
            assert_int_equal(dlock_release(held[0]), DLOCK_OK);
        t0 = h_now_ms();
        dlock_cancel_fire(w.cx);
        pthread_join(th, NULL);
        if (atomic_load(&w.done_ms) - t0 > worst)
            worst = atomic_load(&w.done_ms) - t0;
        assert_true(w.rc == DLOCK_ECANCELED ||
                    (r % 2 == 1 && w.rc == DLOCK_OK));
        if (w.rc == DLOCK_OK)
            assert_int_equal(dlock_release(w.lk), DLOCK_OK);
        if (r % 2 == 0)
            assert_int_equal(dlock_release(held[0]), DLOCK_OK);
        assert_int_equal(dlock_release(held[1]), DLOCK_OK);
        if (slots_held(name, 2, &conns) != 0)
            fail_msg("round %d: a slot is left held", r);
        for (int i = 0; i < 2; i++)
            dlock_lock_free(held[i]);
        dlock_lock_free(w.lk);
        dlock_cancel_free(w.cx);
    }
    printf("  permit wait cancelled: returned within %lld ms at worst\n",
           (long long)worst);
    assert_true(worst < 1000);
    dlock_client_close(hc);
    dlock_client_close(wc);
}

/* ---- fences ------------------------------------------------------------- */

/* Acquire and release name on c: the grant's fence. */
static uint64_t fence_of(dlock_client *c, const char *name)
{
    dlock_lock *lk = h_lock(c, name, 0, 0);
    uint64_t f;

    if (dlock_acquire(lk, 5000) != DLOCK_OK)
        fail_msg("%s: %s", name, dlock_lock_errmsg(lk));
    f = dlock_fence(lk);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    return f;
}

#define EPOCH(f) ((f) >> 40)
#define COUNTER(f) ((f) & 0xFFFFFFFFFFull)

/* A counter that handed out its last value (2^40 - 1) moves the tokens
 * to the next epoch, in every mode. */
static void mysql__fence_counter_runs_out(void **state)
{
    (void)state;
    adm_exec("DROP TABLE IF EXISTS dlock_sat_fmem, dlock_sat_epoch");
    for (int m = 0; m < NMODES; m++) {
        dlock_client *c = client_for(modes[m], "table=dlock_sat");
        const char *name = h_name("sat");
        uint64_t f1 = fence_of(c, name), f2, f3;

        assert_int_equal(COUNTER(f1), 1);
        adm_exec("UPDATE dlock_sat_fmem SET fence = fence >> 40 << 40 | "
                 "0xFFFFFFFFFE WHERE lock_key = UNHEX(SHA2('%s', 256))",
                 name);
        f2 = fence_of(c, name);
        f3 = fence_of(c, name);
        fprintf(stderr, "  %s: %llx, %llx, %llx\n", modes[m],
                (unsigned long long)f1, (unsigned long long)f2,
                (unsigned long long)f3);
        assert_int_equal(f2, f1 | 0xFFFFFFFFFFull);
        assert_int_equal(f3, ((EPOCH(f1) + 1) << 40) | 1);
        assert_int_equal(adm_int("SELECT epoch FROM dlock_sat_epoch"),
                         EPOCH(f3));
        dlock_client_close(c);
    }
}

/* The modes whose lock statement draws the fence too (fence.c's
 * MY_FENCE_*), and a table of each's own. */
static const char *const drawing[][2] = {{"get_lock", "dlock_full"},
                                         {"for_update", "dlock_fullfu"}};

/* A full MEMORY table (the smallest max_heap_table_size: a hundred rows
 * or so): every name still gets tokens, each name's still increase. On
 * the counters' path (counters) it moves to a new epoch and drops the
 * older counters; on the sequence's it drops the records. In the modes
 * that draw in the lock's statement, the failed draw may follow the lock
 * taken. */
static void table_full(bool counters)
{
    enum { NAMES = 400, AGAIN = 50 };
    static char names[NAMES][64];
    static uint64_t first[NAMES];
    const char *rows = counters ? "fmem" : "frec"; /* the path's table */

    for (int m = 0; m < 2; m++) {
        const char *t = drawing[m][1];
        char extra[64];
        dlock_client *c;
        long long epoch0;

        snprintf(extra, sizeof extra, "table=%s", t);
        adm_exec("DROP TABLE IF EXISTS %s_fmem, %s_epoch, %s_fseq, %s_frec",
                 t, t, t, t);
        c = client_for(drawing[m][0], extra);
        fence_of(c, h_name("full"));
        epoch0 = adm_int("SELECT epoch FROM %s_epoch", t);
        /* ALTER builds the table again, with this session's size limit. */
        adm_exec("SET SESSION max_heap_table_size = 16384");
        adm_exec("ALTER TABLE %s_%s ENGINE=MEMORY", t, rows);
        for (int i = 0; i < NAMES; i++) {
            snprintf(names[i], sizeof names[i], "%s", h_name("full"));
            first[i] = fence_of(c, names[i]);
        }
        for (int i = 0; i < AGAIN; i++)
            assert_true(fence_of(c, names[i]) > first[i]);
        fprintf(stderr, "  %s, %d names: epoch %lld to %lld, %lld rows "
                        "kept\n",
                drawing[m][0], NAMES, epoch0,
                adm_int("SELECT epoch FROM %s_epoch", t),
                adm_int("SELECT COUNT(*) FROM %s_%s", t, rows));
        assert_true(adm_int("SELECT COUNT(*) FROM %s_%s", t, rows) < NAMES);
        if (counters)
            assert_true(adm_int("SELECT epoch FROM %s_epoch", t) > epoch0);
        else { /* room made: a new name's grant is recorded */
            const char *late = h_name("full");

            fence_of(c, late);
            assert_int_equal(adm_int("SELECT COUNT(*) FROM %s_frec WHERE "
                                     "lock_key = UNHEX(SHA2('%s', 256))",
                                     t, late),
                             1);
        }
        dlock_client_close(c);
    }
}

static void mysql__fence_table_full(void **state)
{
    (void)state;
    table_full(true);
}

static void mysql__fence_table_full_records(void **state)
{
    (void)state;
    table_full(false);
}

/* A get_lock name is free on the server (IS_FREE_LOCK); for_update's
 * row is checked by the next try of the test. */
static void expect_free(int m, const char *name)
{
    if (strcmp(drawing[m][0], "get_lock") == 0)
        assert_int_equal(adm_int("SELECT IS_FREE_LOCK('%s')", name), 1);
}

/*
 * The try that bumps the counter in the lock's statement, against its
 * other outcomes: a name without a counter row (its first use) and a
 * counter with the marker gone draw from the marker, in a new epoch when
 * it is missing; a counter row goes on by one without it; a busy name is
 * EBUSY and leaves nothing held; one release frees a get_lock name
 * (GET_LOCK ran once: a second run would have counted the name twice).
 */
static void mysql__fence_drawn_with_the_lock(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        const char *t = drawing[m][1];
        char extra[64], fresh[64];
        dlock_client *c, *o;
        dlock_lock *lk, *x;
        const char *name = h_name("drawn");
        uint64_t f1, f2, f3, fx;

        snprintf(extra, sizeof extra, "table=%s", t);
        c = client_for(drawing[m][0], extra);
        o = h_client(uri_for(1, drawing[m][0], extra));
        assert_non_null(o);
        lk = h_lock(c, name, 0, 0);
        x = h_lock(o, name, 0, 0);
        assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
        f1 = dlock_fence(lk);
        assert_int_equal(dlock_try_acquire(x), DLOCK_EBUSY);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        expect_free(m, name);

        adm_exec("DELETE FROM %s_fmem WHERE lock_key = REPEAT(X'00', 32)",
                 t);
        assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
        f2 = dlock_fence(lk);
        assert_int_equal(f2, f1 + 1);
        assert_int_equal(dlock_try_acquire(x), DLOCK_EBUSY);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        expect_free(m, name);
        snprintf(fresh, sizeof fresh, "%s", h_name("drawn"));
        f3 = fence_of(c, fresh);
        assert_true(EPOCH(f3) > EPOCH(f1));
        expect_free(m, fresh);

        assert_int_equal(dlock_try_acquire(x), DLOCK_OK);
        fx = dlock_fence(x);
        assert_true(fx > f2);
        assert_int_equal(dlock_try_acquire(lk), DLOCK_EBUSY);
        assert_int_equal(dlock_release(x), DLOCK_OK);
        expect_free(m, name);
        assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
        assert_true(dlock_fence(lk) > fx);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        expect_free(m, name);
        fprintf(stderr, "  %s: %llx, %llx without the marker; a new name "
                        "%llx\n",
                drawing[m][0], (unsigned long long)f1,
                (unsigned long long)f2, (unsigned long long)f3);
        dlock_lock_free(lk);
        dlock_lock_free(x);
        dlock_client_close(c);
        dlock_client_close(o);
    }
}

/* ---- fences from the sequence (MariaDB) ---------------------------------- */

/* The counters' path (servers without sequences) for one test: its
 * clients read DLOCK_MYSQL_FENCE when they open. */
static int counters_on(void **state)
{
    (void)state;
    return setenv("DLOCK_MYSQL_FENCE", "counter", 1);
}

static int counters_off(void **state)
{
    (void)state;
    return unsetenv("DLOCK_MYSQL_FENCE");
}

/* waiter waits on the server (modes[m]: for_update or get_lock) for the
 * name holder holds, and gets it when holder lets go: waiter's fence
 * (waiter still holds). */
static uint64_t hand_over(int m, dlock_lock *holder, dlock_lock *waiter)
{
    struct waiter w = {waiter, -100};
    pthread_t t;

    pthread_create(&t, NULL, wait_thread, &w);
    assert_true(adm_poll(m == 1 ? WAITING_ROWS : WAITING_GET_LOCKS, 10000) >
                0);
    assert_int_equal(dlock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    return dlock_fence(waiter);
}

/* la takes the name with a try, and lb gets it after a wait: lb's
 * fence (lb still holds). */
static uint64_t waited_fence(int m, dlock_lock *la, dlock_lock *lb)
{
    assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
    return hand_over(m, la, lb);
}

/* Acquire lk (which may first find its connection killed: core then
 * gives it a new one), within a few attempts. */
static void acquire_again(dlock_lock *lk)
{
    int rc = DLOCK_ECONNECT;

    for (int i = 0; i < 5 && rc == DLOCK_ECONNECT; i++)
        rc = dlock_acquire(lk, 5000);
    if (rc != DLOCK_OK)
        fail_msg("acquire: %s", dlock_lock_errmsg(lk));
}

/*
 * Where tokens come from the sequence, a connection draws only once it
 * has seen the sequence set above every earlier life of the server, and
 * it looks again on every new connection: a restart played on the
 * server (every dlock connection killed, the MEMORY table emptied, the
 * sequence sent back, as a SIGKILL may leave it), and the tokens after
 * it, a try and (get_lock, for_update) a waited grant, stay above every
 * one before. Kept from one connection to the next, the sequence's
 * arming would let NEXTVAL hand out 1 again.
 */
static void mysql__fence_sequence_armed_per_connection(void **state)
{
    const char *t = "dlock_arm";

    (void)state;
    adm_exec("DROP TABLE IF EXISTS %s_fmem, %s_epoch, %s_rows, %s_fseq, "
             "%s_frec", t, t, t, t, t);
    for (int m = 0; m < NMODES; m++) {
        dlock_client *a = client_for(modes[m], "table=dlock_arm");
        dlock_client *b = client_for(modes[m], "table=dlock_arm");
        const char *name = h_name("arm");
        dlock_lock *la = h_lock(a, name, 0, 0), *lb = h_lock(b, name, 0, 0);
        uint64_t before, f2, f3 = 0;

        assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
        before = dlock_fence(la);
        assert_int_equal(dlock_release(la), DLOCK_OK);
        if (m > 0) {
            before = waited_fence(m, la, lb);
            assert_int_equal(dlock_release(lb), DLOCK_OK);
        }
        assert_true(kill_dlock_connections() >= 1);
        adm_exec("DELETE FROM %s_frec", t);
        adm_exec("DELETE FROM %s_fmem", t);
        adm_int("SELECT SETVAL(%s_fseq, 0)", t); /* ignored: never lower */
        adm_exec("ALTER SEQUENCE %s_fseq RESTART WITH 1", t);
        acquire_again(la);
        f2 = dlock_fence(la);
        assert_int_equal(dlock_release(la), DLOCK_OK);
        if (m > 0) {
            /* lb's connection was killed too: its wait draws on a new one. */
            acquire_again(lb);
            assert_int_equal(dlock_release(lb), DLOCK_OK);
            f3 = waited_fence(m, la, lb);
            assert_int_equal(dlock_release(lb), DLOCK_OK);
        }
        fprintf(stderr, "  %s: %llx before; %llx, %llx after\n", modes[m],
                (unsigned long long)before, (unsigned long long)f2,
                (unsigned long long)f3);
        assert_true(f2 > before);
        assert_true(m == 0 || f3 > f2);
        dlock_lock_free(la);
        dlock_lock_free(lb);
        dlock_client_close(a);
        dlock_client_close(b);
    }
}

/*
 * The sequence runs on past the epoch it was set in (2^40 tokens in one
 * life of the server): a token of a higher epoch is used only once that
 * epoch is committed, so the next life starts above it. Played with
 * SETVAL just below the next epoch, for a try and a waited grant.
 */
static void mysql__fence_sequence_runs_past_its_epoch(void **state)
{
    (void)state;
    for (int m = 0; m < NMODES; m++) {
        char t[32], extra[64];
        dlock_client *a, *b;
        const char *name = h_name("past");
        dlock_lock *la, *lb;
        uint64_t f1, f2, f3;

        snprintf(t, sizeof t, "dlock_past%d", m);
        snprintf(extra, sizeof extra, "table=%s", t);
        adm_exec("DROP TABLE IF EXISTS %s_fmem, %s_epoch, %s_rows, %s_fseq, "
                 "%s_frec", t, t, t, t, t);
        a = client_for(modes[m], extra);
        b = client_for(modes[m], extra);
        la = h_lock(a, name, 0, 0);
        lb = h_lock(b, name, 0, 0);
        f1 = fence_of(a, name);
        adm_int("SELECT SETVAL(%s_fseq, %llu)", t,
                (unsigned long long)(((EPOCH(f1) + 1) << 40) - 1));
        f2 = fence_of(a, name);
        assert_int_equal(f2, (EPOCH(f1) + 1) << 40);
        assert_int_equal(adm_int("SELECT epoch FROM %s_epoch", t),
                         EPOCH(f2));
        f3 = f2;
        if (m > 0) {
            /* The sequence moved while la holds: lb's wait draws past. */
            assert_int_equal(dlock_acquire(la, 0), DLOCK_OK);
            adm_int("SELECT SETVAL(%s_fseq, %llu)", t,
                    (unsigned long long)(((EPOCH(f2) + 1) << 40) - 1));
            f3 = hand_over(m, la, lb);
            assert_int_equal(dlock_release(lb), DLOCK_OK);
            assert_int_equal(f3, (EPOCH(f2) + 1) << 40);
            assert_int_equal(adm_int("SELECT epoch FROM %s_epoch", t),
                             EPOCH(f3));
        }
        fprintf(stderr, "  %s: %llx, %llx, %llx\n", modes[m],
                (unsigned long long)f1, (unsigned long long)f2,
                (unsigned long long)f3);
        dlock_lock_free(la);
        dlock_lock_free(lb);
        dlock_client_close(a);
        dlock_client_close(b);
    }
}

/*
 * get_lock's grant after a wait draws in the waiting statement and
 * records nothing, so inspect must not take an older record for the
 * holder's: a connection forgets its records before it waits. Here a's
 * connection recorded a try, then gets the name after a wait: inspect
 * shows its fence and owner or none, never the older record's.
 */
static void mysql__inspect_after_a_wait_names_no_one_else(void **state)
{
    dlock_client *a = client_for("get_lock", NULL);
    dlock_client *b = client_for("get_lock", NULL);
    dlock_client *o = client_for("get_lock", NULL);
    const char *name = h_name("recorded");
    dlock_lock *la = h_lock(a, name, 0, 0), *lb = h_lock(b, name, 0, 0);
    dlock_state st = DLOCK_STATE_INIT;
    uint64_t waited;

    (void)state;
    waited_fence(2, la, lb); /* la's try recorded; lb waited */
    waited = hand_over(2, lb, la); /* and la waits */
    assert_int_equal(dlock_inspect(o, name, &st), DLOCK_OK);
    fprintf(stderr, "  waited %llx; inspect: fence %llx, owner '%s'\n",
            (unsigned long long)waited,
            (unsigned long long)st.fence, st.owner);
    assert_int_equal(st.held, 1);
    if (st.fence != 0 || st.owner[0] != '\0') {
        assert_int_equal(st.fence, waited);
        assert_string_equal(st.owner, dlock_lock_owner(la));
    }
    assert_int_equal(dlock_release(la), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_close(a);
    dlock_client_close(b);
    dlock_client_close(o);
}

/* One grant a fencer logged: mode, when its acquire began and returned,
 * its fence. */
struct grant_log {
    int mode;
    uint64_t t0, t1, fence;
};

/*
 * A fencer: acquire and release one name per mode, round after round,
 * until the stop file appears (at most 30 s or 20 000 grants), logging
 * each grant as "mode t0 t1 fence". Errors while the server is down are
 * expected: it waits a little and goes on.
 * args: log, stop file, then a URI and a name per mode.
 */
static int fencer_child(char **args)
{
    FILE *log = fopen(args[0], "w");
    dlock_client *c[NMODES];
    dlock_lock *lk[NMODES];
    int64_t end = h_now_ms() + 30000;

    if (log == NULL)
        return 3;
    for (int m = 0; m < NMODES; m++) {
        c[m] = h_client(args[2 + 2 * m]);
        lk[m] = c[m] != NULL ? h_lock(c[m], args[3 + 2 * m], 0, 0) : NULL;
        if (lk[m] == NULL)
            return 4;
    }
    for (int n = 0; n < 20000 && h_now_ms() < end &&
                    access(args[1], F_OK) != 0;) {
        for (int m = 0; m < NMODES; m++) {
            uint64_t t0 = h_now_ns();
            if (dlock_acquire(lk[m], 2000) != DLOCK_OK) {
                h_sleep_ms(20);
                continue;
            }
            fprintf(log, "%d %llu %llu %llu\n", m, (unsigned long long)t0,
                    (unsigned long long)h_now_ns(),
                    (unsigned long long)dlock_fence(lk[m]));
            fflush(log);
            n++;
            dlock_release(lk[m]); /* fails across the crash: no matter */
        }
    }
    fclose(log);
    for (int m = 0; m < NMODES; m++) {
        dlock_lock_free(lk[m]);
        dlock_client_close(c[m]);
    }
    return 0;
}

static int by_return(const void *x, const void *y)
{
    const struct grant_log *a = x, *b = y;
    if (a->mode != b->mode)
        return a->mode < b->mode ? -1 : 1;
    return a->t1 < b->t1 ? -1 : a->t1 > b->t1;
}

/*
 * The crash test of fence.c: three processes take a name per mode, round
 * after round; mariadbd is SIGKILLed among them and started again, and
 * they go on. Every token granted after the restart is above every token
 * granted before the kill, and each name's tokens increase in the order
 * of the grants. (With the counters in MEMORY and no epoch, the counters
 * start again at 1 after the restart: this fails.)
 */
static void mysql__fences_above_all_after_a_crash(void **state)
{
    enum { PROCS = 3, MAXLOG = 60000 };
    char logs[PROCS][512], stop[512], names[NMODES][64];
    char uris[NMODES][4096];
    static struct grant_log g[MAXLOG];
    uint64_t t_kill, t_up, max_before[NMODES] = {0},
                       min_after[NMODES], nbefore[NMODES] = {0},
                       nafter[NMODES] = {0};
    pid_t pid[PROCS];
    size_t n = 0;

    (void)state;
    snprintf(stop, sizeof stop, "%s/fencers-stop", h_scratch());
    for (int m = 0; m < NMODES; m++) {
        snprintf(names[m], sizeof names[m], "%s", h_name("crash"));
        snprintf(uris[m], sizeof uris[m], "%s",
                 uri_for(0, modes[m], "lease=2s&timeout=2s"));
        min_after[m] = UINT64_MAX;
    }
    for (int i = 0; i < PROCS; i++) {
        const char *args[] = {logs[i], stop, uris[0], names[0], uris[1],
                              names[1], uris[2], names[2], NULL};
        snprintf(logs[i], sizeof logs[i], "%s/fencer-%d.log", h_scratch(),
                 i);
        pid[i] = h_spawn_args("fencer", args);
    }
    h_sleep_ms(1500);
    t_kill = h_now_ns();
    assert_int_equal(serverctl("kill"), 0);
    assert_int_equal(serverctl("start"), 0);
    t_up = h_now_ns();
    fprintf(stderr, "  SIGKILLed and started again in %llu ms\n",
            (unsigned long long)((t_up - t_kill) / 1000000));
    h_sleep_ms(1500);
    fclose(fopen(stop, "w"));
    for (int i = 0; i < PROCS; i++)
        assert_int_equal(h_wait(pid[i]), 0);
    for (int i = 0; i < PROCS; i++) {
        FILE *f = fopen(logs[i], "r");
        unsigned long long t0, t1, fence;
        int m;

        assert_non_null(f);
        while (n < MAXLOG &&
               fscanf(f, "%d %llu %llu %llu", &m, &t0, &t1, &fence) == 4) {
            assert_true(m >= 0 && m < NMODES);
            g[n++] = (struct grant_log){m, t0, t1, fence};
        }
        fclose(f);
    }
    qsort(g, n, sizeof g[0], by_return);
    for (size_t i = 0; i < n; i++) {
        int m = g[i].mode;
        if (i > 0 && g[i - 1].mode == m && g[i].fence <= g[i - 1].fence)
            fail_msg("%s: fence %llx granted after %llx", modes[m],
                     (unsigned long long)g[i].fence,
                     (unsigned long long)g[i - 1].fence);
        if (g[i].t1 < t_kill) {
            nbefore[m]++;
            if (g[i].fence > max_before[m])
                max_before[m] = g[i].fence;
        } else if (g[i].t0 > t_up) {
            nafter[m]++;
            if (g[i].fence < min_after[m])
                min_after[m] = g[i].fence;
        }
    }
    for (int m = 0; m < NMODES; m++) {
        fprintf(stderr,
                "  %s: %llu grants before the kill, up to %llx; %llu after "
                "the restart, from %llx\n",
                modes[m], (unsigned long long)nbefore[m],
                (unsigned long long)max_before[m],
                (unsigned long long)nafter[m],
                (unsigned long long)min_after[m]);
        assert_true(nbefore[m] >= 10 && nafter[m] >= 10);
        assert_true(min_after[m] > max_before[m]);
    }
}

/* ---- main ---------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    adm_connect();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mysql_close(adm);
    adm = NULL;
    return 0;
}

/* The admin connection is reopened around server restarts. */
static int reconnect(void **state)
{
    teardown(state);
    return setup(state);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest names[] = {
        cmocka_unit_test(mysql__injection_names_leave_tables_intact),
        cmocka_unit_test(mysql__namespace_is_a_prefix),
        cmocka_unit_test(mysql__get_lock_names_shared_with_other_programs),
        cmocka_unit_test(mysql__uri_parameters_checked),
        cmocka_unit_test(mysql__tables_created_on_first_use),
        cmocka_unit_test(mysql__inspect_each_mode),
        cmocka_unit_test(mysql__modes_listed_without_a_server),
    };
    const struct CMUnitTest conn[] = {
        cmocka_unit_test(mysql__get_lock_shares_connections),
        cmocka_unit_test(mysql__holder_killed_frees_lock),
        cmocka_unit_test(mysql__killed_connection_and_fence),
        cmocka_unit_test(mysql__waiters_wait_on_the_server),
        cmocka_unit_test(mysql__get_lock_busy_name_skips_the_try),
        cmocka_unit_test(mysql__for_update_busy_name_skips_the_try),
        cmocka_unit_test(mysql__for_update_waits_under_a_second),
        cmocka_unit_test(mysql__for_update_readers_queue_behind_writer),
        cmocka_unit_test(mysql__permit_takes_one_slot),
        cmocka_unit_test(mysql__permit_names_near_the_limit),
        cmocka_unit_test(mysql__permit_waiter_served),
        cmocka_unit_test(mysql__permit_wait_cancelled),
        cmocka_unit_test(mysql__insert_permits_are_rows),
    };
    const struct CMUnitTest fence[] = {
        cmocka_unit_test_setup_teardown(mysql__fence_counter_runs_out,
                                        counters_on, counters_off),
        cmocka_unit_test_setup_teardown(mysql__fence_table_full,
                                        counters_on, counters_off),
        cmocka_unit_test_setup_teardown(mysql__fence_drawn_with_the_lock,
                                        counters_on, counters_off),
        cmocka_unit_test(mysql__fence_table_full_records),
        cmocka_unit_test(mysql__fence_sequence_runs_past_its_epoch),
        cmocka_unit_test(mysql__inspect_after_a_wait_names_no_one_else),
        cmocka_unit_test_setup_teardown(
            mysql__fence_sequence_armed_per_connection, NULL, reconnect),
        cmocka_unit_test_setup_teardown(mysql__fences_above_all_after_a_crash,
                                        NULL, reconnect),
    };
    const struct CMUnitTest server[] = {
        cmocka_unit_test_setup_teardown(mysql__server_restart, NULL,
                                        reconnect),
        cmocka_unit_test_setup_teardown(
            mysql__paused_or_stopped_server_gives_econnect, NULL, reconnect),
    };
    static const struct h_role roles[] = {
        {"hold", hold_child},
        {"fencer", fencer_child},
        {NULL, NULL},
    };
    const char *group = "";
    int failed;

    h_child_dispatch(argc, argv, roles);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--group") == 0)
            group = argv[i + 1];
    base_uri = h_setup(argc, argv);
    if (strcmp(group, "names") == 0)
        failed = cmocka_run_group_tests_name("mysql/names", names, setup,
                                             teardown);
    else if (strcmp(group, "conn") == 0)
        failed = cmocka_run_group_tests_name("mysql/conn", conn, setup,
                                             teardown);
    else if (strcmp(group, "server") == 0)
        failed = cmocka_run_group_tests_name("mysql/server", server, setup,
                                             teardown);
    else if (strcmp(group, "fence") == 0)
        failed = cmocka_run_group_tests_name("mysql/fence", fence, setup,
                                             teardown);
    else {
        fprintf(stderr,
                "usage: %s --uri URI --group names|conn|server|fence\n",
                argv[0]);
        failed = 2;
    }
    h_cleanup();
    return failed;
}
