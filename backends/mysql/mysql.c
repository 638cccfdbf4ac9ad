/*
 * mysql.c: the mysql:// backend (alias mariadb://), three ways of making a
 * lock out of a MySQL or MariaDB server, over MariaDB Connector/C.
 *
 *   mysql://user[:password]@host[:port]/database
 *         [?mode=insert|for_update|get_lock&table=NAME&ssl=off|require|verify
 *          &ssl_ca=FILE&namespace=…&lease=…&timeout=…]
 *
 * mode=insert (the default) is the classic unique-key lock table: a row per
 * held lock, claimed by one INSERT (the primary key lets one client win),
 * released by a DELETE that names the owner, kept alive by an UPDATE of its
 * expiry that names the owner. The classic design has a known hole: a
 * holder that crashes leaves its row forever. Here every row carries
 * expires_at (server clock), and a row whose lease ran out is taken over by
 * one conditional UPDATE. Nothing is bound to a connection, so a holder
 * survives reconnects and server restarts, but a waiter can only poll.
 *
 * mode=for_update holds an open transaction that locked the name's row
 * with SELECT … FOR UPDATE (NOWAIT for a try, innodb_lock_wait_timeout for
 * a timed wait, so the server queues waiters). COMMIT releases it; a dead
 * connection rolls the transaction back and frees it. Each held lock ties
 * up a connection of its own.
 *
 * mode=get_lock uses the server's named locks, GET_LOCK(name, timeout) and
 * RELEASE_LOCK(name). They too die with their connection, but one
 * connection can hold many (MariaDB >= 10.0.2, MySQL >= 5.7), so a client
 * holding a thousand locks needs a handful of connections. The server
 * waits for us, with fractional-second timeouts on MariaDB.
 *
 * Fencing, every mode: a counter row per name in <table>_fence, bumped
 * after the lock is held by
 *     INSERT … VALUES (key, LAST_INSERT_ID(1))
 *     ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)
 * whose OK packet carries the new value (mysql_stmt_insert_id), so no
 * SELECT follows. The bump is always autocommitted: a token handed out
 * must never be handed out again, even if the lock is lost before it is
 * released. for_update therefore bumps over a second connection (one per
 * client, see fu_fence): inside the lock's transaction a rollback (a killed
 * connection, a server restart) would undo the bump and give the next
 * holder the same token.
 *
 * Names. Lock names are up to 64 KiB of UTF-8; what the server stores is
 * SHA-256(namespace || name) as a BINARY(32) primary key: fixed width, and
 * no collation can fold two names together (utf8mb4's default collations
 * equate 'a' with 'A' and many emoji with each other). The name itself is
 * kept, cut to 255 bytes, in a column for people. GET_LOCK takes
 * namespace || name as it is when that has at most 64 characters (MySQL's
 * limit; MariaDB has none) and does not start with "dlock:", else "dlock:"
 * and 58 hex digits of the key, so other programs can share short names.
 * The namespace is a plain prefix: put a separator in it (namespace=app/).
 * Names only ever travel as bound parameters of prepared statements; the
 * only text spliced into SQL is the table name, checked against
 * [A-Za-z_][A-Za-z0-9_]* and quoted.
 *
 * Tables are created on first use: a statement that fails to prepare with
 * ER_NO_SUCH_TABLE runs the mode's CREATE TABLE IF NOT EXISTS and tries
 * again, so a connection to existing tables pays nothing for it.
 *
 * Connections go over TCP always ("localhost" means the Unix socket to the
 * client library otherwise), in utf8mb4, with connect, read and write
 * timeouts from timeout= (whole seconds, rounded up: the library counts in
 * seconds), automatic reconnection off (a silent reconnect would drop a
 * GET_LOCK or a transaction while we believe we hold it), LOAD DATA LOCAL
 * off, and the attribute program_name=dlock. Core pools them; a broken one
 * is reported and replaced by core [B-CONN-1].
 *
 * Threads: mysql_library_init() runs once from global_init;
 * mysql_thread_init()/_end() run on core's watchdog thread. Connector/C
 * makes both thread hooks no-ops and initialises itself under
 * pthread_once, so application threads that call dlock need nothing;
 * Oracle's libmysqlclient wants mysql_thread_end() on every thread that
 * used it, which dlock cannot do for threads it did not start (see
 * docs/backends/mysql.md). mysql_library_end() is never called: it resets
 * state an application using the library itself may still need.
 *
 * Divisions: configuration and the per-client context; SQL text;
 * connections and statements; keys and names; fencing; mode insert; mode
 * for_update; mode get_lock; the vtable's entry points; the raw floor.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include "dlock/backend.h"

#ifdef LIBMARIADB
typedef my_bool my_flag;
#else
typedef bool my_flag; /* MySQL 8's libmysqlclient dropped my_bool */
#endif

#define MY_DEFAULT_PORT 3306
#define MY_DEFAULT_TABLE "dlock_locks"
/* MySQL identifiers have at most 64 characters; "_fence" must fit. */
#define MY_TABLE_MAX 58
#define MY_DB_MAX 64
#define MY_KEY_LEN 32
/* The name column keeps this many bytes of the name, for people. */
#define MY_NAME_COL_MAX 255
/* GET_LOCK names: MySQL refuses more than 64 characters. */
#define MY_ULOCK_CHARS 64
#define MY_ULOCK_BUF (MY_ULOCK_CHARS * 4 + 1)
#define MY_ULOCK_PREFIX "dlock:"
/* Renewals per UPDATE in mode insert. */
#define MY_BATCH 32
/* MySQL 8's error for NOWAIT (MariaDB says ER_LOCK_WAIT_TIMEOUT). */
#define MY_ER_LOCK_NOWAIT 3572
/* A native GET_LOCK wait ends this long before the read timeout would. */
#define MY_WAIT_MARGIN_MS 500

extern const struct dlock_backend dlock__backend_mysql;

/* ---- configuration and the per-client context -------------------------- */

enum my_mode { MODE_INSERT, MODE_FOR_UPDATE, MODE_GET_LOCK };
static const char *const my_mode_names[] = {"insert", "for_update",
                                            "get_lock", NULL};
enum my_ssl { SSL_OFF, SSL_REQUIRE, SSL_VERIFY };
static const char *const my_ssl_names[] = {"off", "require", "verify", NULL};

static const uint32_t my_caps[] = {
    [MODE_INSERT] = DLOCK_CAP_LEASE | DLOCK_CAP_FENCING |
                    DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW,
    [MODE_FOR_UPDATE] = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                        DLOCK_CAP_SESSION_PER_LOCK | DLOCK_CAP_NATIVE_WAIT |
                        DLOCK_CAP_FENCING,
    [MODE_GET_LOCK] = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                      DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FENCING |
                      DLOCK_CAP_BATCH_RENEW,
};

static const char *const my_params[] = {"mode", "table", "ssl", "ssl_ca",
                                        NULL};

/* The statements, prepared on each connection when first used. */
enum my_sql {
    SQL_CLAIM,        /* insert: INSERT the row */
    SQL_TAKEOVER,     /* insert: UPDATE an expired row to us */
    SQL_DELETE,       /* insert: release by owner */
    SQL_EXTEND,       /* insert: renew one by owner */
    SQL_EXTEND_BATCH, /* insert: renew MY_BATCH by owner */
    SQL_OWNERS_BATCH, /* insert: who holds MY_BATCH keys */
    SQL_ROW_STATE,    /* insert: inspect */
    SQL_ROW_NOWAIT,   /* for_update: try */
    SQL_ROW_WAIT,     /* for_update: wait innodb_lock_wait_timeout */
    SQL_ROW_CREATE,   /* for_update: first use of a name */
    SQL_GET_LOCK,     /* get_lock */
    SQL_RELEASE_LOCK, /* get_lock */
    SQL_IS_USED_LOCK, /* get_lock: inspect */
    SQL_FENCE,        /* every mode: bump the counter */
    SQL_FENCE_PEEK,   /* every mode: inspect */
    SQL_N
};

/* One connection and the statements prepared on it. */
struct my_conn {
    MYSQL *db;
    MYSQL_STMT *st[SQL_N];
    const struct my_ctx *x;
    bool broken;   /* a call failed for the connection: the rest fail fast */
    unsigned err;  /* the last error number */
    char msg[320]; /* and its text */
};

/* What every connection of one client shares (backend ctx). */
struct my_ctx {
    enum my_mode mode;
    enum my_ssl ssl;
    char *host, *user, *password, *db, *ssl_ca; /* password, ssl_ca: NULL */
    unsigned int port;
    unsigned int io_s;   /* connect, read and write timeouts, seconds */
    int64_t io_ms;       /* the same in milliseconds */
    uint32_t lease_ms;   /* lease=: what a new session's wait_timeout covers */
    char table[MY_TABLE_MAX + 1];
    char *ns;            /* namespace=, a prefix of every name */
    size_t ns_len;
    char holder[320];    /* "host name:pid", the insert rows' host column */
    size_t holder_len;
    char *sql[SQL_N];
    char *ddl[2];        /* the mode's CREATE TABLE statements */
    size_t nddl;
    /* for_update bumps fences over this autocommitted connection, opened
     * on first use; mu serialises the client's threads on it. */
    pthread_mutex_t mu;
    struct my_conn fence;
    bool fence_open;
};

struct my_session {
    struct dlock_session base;
    struct my_ctx *x;
    struct my_conn conn;
    long lock_wait_s; /* for_update: the session's innodb_lock_wait_timeout */
    uint32_t covered_ms; /* conn-bound: the lease wait_timeout covers */
    size_t ngrants;      /* conn-bound: locks held on this connection */
};

static int my_utf8_valid(const char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3
                                 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > len || c == 0)
            return 0;
        for (size_t k = 1; k < n; k++)
            if (((unsigned char)s[i + k] & 0xc0) != 0x80)
                return 0;
        i += n;
    }
    return 1;
}

static char *my_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* malloc'ed printf, or NULL. */
static char *my_sprintf(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static char *my_sprintf(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *s;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || (s = malloc((size_t)n + 1)) == NULL)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void my_conn_close(struct my_conn *c);
static int my_ctx_sql(struct my_ctx *x);

static void my_ctx_free(struct my_ctx *x)
{
    if (x == NULL)
        return;
    if (x->fence_open)
        my_conn_close(&x->fence);
    pthread_mutex_destroy(&x->mu);
    for (size_t i = 0; i < SQL_N; i++)
        free(x->sql[i]);
    for (size_t i = 0; i < x->nddl; i++)
        free(x->ddl[i]);
    free(x->host);
    free(x->user);
    free(x->password);
    free(x->db);
    free(x->ssl_ca);
    free(x->ns);
    free(x);
}

/* table=: [A-Za-z_][A-Za-z0-9_]{0,57}, so it can be spliced into SQL. */
static int my_check_table(const char *t, char *err, size_t errlen)
{
    size_t n = strlen(t);

    if (n == 0 || n > MY_TABLE_MAX)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "table: expected 1 to %d characters, got %zu",
                            MY_TABLE_MAX, n);
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                 c == '_' || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "table: expected a letter or '_' then "
                                "letters, digits or '_' "
                                "([A-Za-z_][A-Za-z0-9_]*); byte %zu is not",
                                i);
    }
    return DLOCK_OK;
}

/* Read and check the URI; build the SQL. err names the bad parameter. */
static int my_ctx_new(struct my_ctx **out, const struct dlock_uri *uri,
                      char *err, size_t errlen)
{
    struct my_ctx *x;
    const char *table, *ssl_ca, *db;
    char hostname[256];
    int mode, ssl, rc;

    *out = NULL;
    if (uri->nhosts != 1 || uri->hosts[0].host[0] == '\0')
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: expected exactly one host "
                            "(mysql://user:password@host:port/database)");
    if (uri->user == NULL || uri->user[0] == '\0')
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "user: missing (mysql://user:password@host/"
                            "database)");
    db = uri->path[0] == '/' ? uri->path + 1 : uri->path;
    if (db[0] == '\0' || strchr(db, '/') != NULL || strlen(db) > MY_DB_MAX)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "path: expected /database (one name of 1 to %d "
                            "bytes)",
                            MY_DB_MAX);
    if ((rc = dlock_uri_choice(uri, "mode", my_mode_names, MODE_INSERT,
                               &mode, err, errlen)) != DLOCK_OK ||
        (rc = dlock_uri_choice(uri, "ssl", my_ssl_names, SSL_OFF, &ssl, err,
                               errlen)) != DLOCK_OK)
        return rc;
    table = dlock_uri_param(uri, "table");
    if (table == NULL)
        table = MY_DEFAULT_TABLE;
    if ((rc = my_check_table(table, err, errlen)) != DLOCK_OK)
        return rc;
    ssl_ca = dlock_uri_param(uri, "ssl_ca");
    if (ssl_ca != NULL && (ssl != SSL_VERIFY || ssl_ca[0] == '\0'))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "ssl_ca: expected a CA file path, with "
                            "ssl=verify");
    if (!my_utf8_valid(uri->ns, strlen(uri->ns)))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "namespace: not valid UTF-8");

    x = calloc(1, sizeof *x);
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&x->mu, NULL);
    x->mode = (enum my_mode)mode;
    x->ssl = (enum my_ssl)ssl;
    x->port = uri->hosts[0].port != 0 ? uri->hosts[0].port : MY_DEFAULT_PORT;
    /* Connector/C counts timeouts in whole seconds. */
    x->io_s = (unsigned int)(((uint64_t)uri->timeout_ms + 999) / 1000);
    if (x->io_s == 0)
        x->io_s = 1;
    x->io_ms = (int64_t)x->io_s * 1000;
    x->lease_ms = uri->lease_ms;
    snprintf(x->table, sizeof x->table, "%s", table);
    x->host = my_strdup(uri->hosts[0].host);
    x->user = my_strdup(uri->user);
    x->password = uri->password != NULL ? my_strdup(uri->password) : NULL;
    x->db = my_strdup(db);
    x->ssl_ca = ssl_ca != NULL ? my_strdup(ssl_ca) : NULL;
    x->ns = my_strdup(uri->ns);
    x->ns_len = strlen(uri->ns);
    if (gethostname(hostname, sizeof hostname) != 0)
        snprintf(hostname, sizeof hostname, "?");
    hostname[sizeof hostname - 1] = '\0';
    x->holder_len = (size_t)snprintf(x->holder, sizeof x->holder, "%.200s:%ld",
                                     hostname, (long)getpid());
    if (x->host == NULL || x->user == NULL || x->db == NULL ||
        x->ns == NULL || (uri->password != NULL && x->password == NULL) ||
        (ssl_ca != NULL && x->ssl_ca == NULL) || my_ctx_sql(x) != 0) {
        my_ctx_free(x);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    *out = x;
    return DLOCK_OK;
}

/* ---- SQL text ------------------------------------------------------------ */

/*
 * The lock table of mode insert. No fence column: the token lives in the
 * counter row, which must outlive this row's DELETE, and copying it here
 * would cost a statement per acquisition. No entry count either: core
 * counts reentrant levels in the handle, with no round trip, and the
 * server sees one acquisition. expires_at is UTC (UTC_TIMESTAMP), so a
 * daylight-saving change of the server's time zone cannot move leases.
 */
static const char my_ddl_locks[] =
    "CREATE TABLE IF NOT EXISTS `%s` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
    " COMMENT 'the name, cut to 255 bytes, for people',"
    " owner VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"
    " COMMENT 'client uuid:handle serial',"
    " host VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
    " COMMENT 'host name:pid of the holder',"
    " expires_at DATETIME(6) NOT NULL COMMENT 'UTC, server clock',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

/* The rows mode for_update locks; they are never deleted. */
static const char my_ddl_rows[] =
    "CREATE TABLE IF NOT EXISTS `%s_rows` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
    " COMMENT 'the name, cut to 255 bytes, for people',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

/* The fencing counters of every mode. */
static const char my_ddl_fence[] =
    "CREATE TABLE IF NOT EXISTS `%s_fence` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " fence BIGINT UNSIGNED NOT NULL COMMENT 'the last token handed out',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB";

/* "?, ?, …" n times, into buf. */
static void my_marks(char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        memcpy(buf + 3 * i, i + 1 < n ? "?, " : "?\0", 3);
}

static int my_ctx_sql(struct my_ctx *x)
{
    const char *t = x->table;
    char marks[3 * MY_BATCH + 1];
    const char *ddl[2];
    size_t nddl = 0;

    my_marks(marks, MY_BATCH);
    /* The claim and the takeover: see ins_acquire(). */
    x->sql[SQL_CLAIM] = my_sprintf(
        "INSERT INTO `%s` (lock_key, name, owner, host, expires_at) "
        "VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)",
        t);
    x->sql[SQL_TAKEOVER] = my_sprintf(
        "UPDATE `%s` SET owner = ?, host = ?, "
        "expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "
        "WHERE lock_key = ? AND (expires_at < UTC_TIMESTAMP(6) OR owner = ?)",
        t);
    x->sql[SQL_DELETE] = my_sprintf(
        "DELETE FROM `%s` WHERE lock_key = ? AND owner = ?", t);
    x->sql[SQL_EXTEND] = my_sprintf(
        "UPDATE `%s` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? "
        "MICROSECOND WHERE lock_key = ? AND owner = ?",
        t);
    x->sql[SQL_EXTEND_BATCH] = my_sprintf(
        "UPDATE `%s` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? "
        "MICROSECOND WHERE lock_key IN (%s) AND owner IN (%s)",
        t, marks, marks);
    x->sql[SQL_OWNERS_BATCH] = my_sprintf(
        "SELECT lock_key, owner FROM `%s` WHERE lock_key IN (%s)", t, marks);
    x->sql[SQL_ROW_STATE] = my_sprintf(
        "SELECT owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), "
        "expires_at) DIV 1000 FROM `%s` WHERE lock_key = ?",
        t);
    x->sql[SQL_ROW_NOWAIT] = my_sprintf(
        "SELECT 1 FROM `%s_rows` WHERE lock_key = ? FOR UPDATE NOWAIT", t);
    x->sql[SQL_ROW_WAIT] = my_sprintf(
        "SELECT 1 FROM `%s_rows` WHERE lock_key = ? FOR UPDATE", t);
    x->sql[SQL_ROW_CREATE] = my_sprintf(
        "INSERT IGNORE INTO `%s_rows` (lock_key, name) VALUES (?, ?)", t);
    x->sql[SQL_GET_LOCK] = my_strdup("SELECT GET_LOCK(?, ?)");
    x->sql[SQL_RELEASE_LOCK] = my_strdup("SELECT RELEASE_LOCK(?)");
    x->sql[SQL_IS_USED_LOCK] = my_strdup("SELECT IS_USED_LOCK(?)");
    x->sql[SQL_FENCE] = my_sprintf(
        "INSERT INTO `%s_fence` (lock_key, fence) VALUES (?, "
        "LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE "
        "fence = LAST_INSERT_ID(fence + 1)",
        t);
    x->sql[SQL_FENCE_PEEK] = my_sprintf(
        "SELECT fence FROM `%s_fence` WHERE lock_key = ?", t);

    if (x->mode == MODE_INSERT)
        ddl[nddl++] = my_ddl_locks;
    if (x->mode == MODE_FOR_UPDATE)
        ddl[nddl++] = my_ddl_rows;
    ddl[nddl++] = my_ddl_fence;
    for (size_t i = 0; i < nddl; i++) {
        /* The templates have one %s: the table name, checked above. */
        x->ddl[i] = my_sprintf(ddl[i], t);
        x->nddl = i + 1;
        if (x->ddl[i] == NULL)
            return -1;
    }
    for (size_t i = 0; i < SQL_N; i++)
        if (x->sql[i] == NULL)
            return -1;
    return 0;
}

/* ---- connections and statements ------------------------------------------ */

/* Errors that mean the connection is gone (or never came). */
static bool my_conn_error(unsigned e)
{
    switch (e) {
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_UNKNOWN_HOST:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_SERVER_LOST_EXTENDED:
    case CR_SERVER_HANDSHAKE_ERR:
    case CR_SSL_CONNECTION_ERROR:
    case CR_COMMANDS_OUT_OF_SYNC:
    case ER_CONNECTION_KILLED:
    case ER_SERVER_SHUTDOWN:
    case ER_CON_COUNT_ERROR:
    case ER_NET_READ_INTERRUPTED:
    case ER_NET_WRITE_INTERRUPTED:
    case ER_NET_ERROR_ON_WRITE:
    case ER_NET_READ_ERROR:
        return true;
    default:
        return false;
    }
}

/* The dlock code for a MySQL error number. */
static int my_code(unsigned e)
{
    if (my_conn_error(e))
        return DLOCK_ECONNECT;
    switch (e) {
    case CR_OUT_OF_MEMORY:
    case ER_OUTOFMEMORY:
        return DLOCK_ENOMEM;
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT:
    case MY_ER_LOCK_NOWAIT:
        return DLOCK_EBUSY;
    default:
        return DLOCK_ERROR;
    }
}

/* Record an error on c; returns e. */
static unsigned my_note(struct my_conn *c, unsigned e, const char *text)
{
    c->err = e;
    snprintf(c->msg, sizeof c->msg, "%s", text != NULL && text[0] ? text
                                                : "unknown error");
    if (my_conn_error(e))
        c->broken = true;
    return e;
}

static unsigned my_db_note(struct my_conn *c)
{
    unsigned e = mysql_errno(c->db);
    return my_note(c, e != 0 ? e : CR_UNKNOWN_ERROR, mysql_error(c->db));
}

static unsigned my_stmt_note(struct my_conn *c, MYSQL_STMT *st)
{
    unsigned e = mysql_stmt_errno(st);
    return my_note(c, e != 0 ? e : CR_UNKNOWN_ERROR, mysql_stmt_error(st));
}

/*
 * Connect with the context's options. txn: a for_update connection, whose
 * statements all run in transactions (autocommit off) at READ COMMITTED
 * (no gap locks, no stale snapshot between statements), and whose lock
 * waits are NOWAIT unless a timed acquire says otherwise. Returns 0, or an
 * error number with c->msg set and c->db NULL.
 */
static unsigned my_connect(struct my_conn *c, const struct my_ctx *x,
                           bool txn)
{
    unsigned int proto = MYSQL_PROTOCOL_TCP, timeout = x->io_s, infile = 0;
    my_flag off = 0, on = 1;
    unsigned e;

    memset(c, 0, sizeof *c);
    c->x = x;
    c->db = mysql_init(NULL);
    if (c->db == NULL)
        return my_note(c, CR_OUT_OF_MEMORY, "mysql_init: out of memory");
    mysql_options(c->db, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(c->db, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(c->db, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(c->db, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    mysql_options(c->db, MYSQL_OPT_RECONNECT, &off);
    mysql_options(c->db, MYSQL_OPT_LOCAL_INFILE, &infile);
    mysql_options(c->db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options4(c->db, MYSQL_OPT_CONNECT_ATTR_ADD, "program_name",
                   "dlock");
    if (x->ssl != SSL_OFF) {
#ifdef LIBMARIADB
        mysql_options(c->db, MYSQL_OPT_SSL_ENFORCE, &on);
        if (x->ssl == SSL_VERIFY)
            mysql_options(c->db, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
        else
            mysql_options(c->db, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &off);
#else
        unsigned int mode = x->ssl == SSL_VERIFY ? SSL_MODE_VERIFY_IDENTITY
                                                 : SSL_MODE_REQUIRED;
        (void)on;
        mysql_options(c->db, MYSQL_OPT_SSL_MODE, &mode);
#endif
        if (x->ssl_ca != NULL)
            mysql_options(c->db, MYSQL_OPT_SSL_CA, x->ssl_ca);
    }
    if (txn) {
        mysql_options(c->db, MYSQL_INIT_COMMAND,
                      "SET SESSION TRANSACTION ISOLATION LEVEL READ "
                      "COMMITTED");
        /* 0 is NOWAIT on MariaDB; MySQL raises it to its minimum, 1 s. */
        mysql_options(c->db, MYSQL_INIT_COMMAND,
                      "SET SESSION autocommit = 0, "
                      "SESSION innodb_lock_wait_timeout = 0");
    }
    /* CLIENT_FOUND_ROWS: UPDATE reports rows matched, not rows changed. */
    if (mysql_real_connect(c->db, x->host, x->user, x->password, x->db,
                           x->port, NULL, CLIENT_FOUND_ROWS) == NULL) {
        char text[sizeof c->msg];
        e = mysql_errno(c->db);
        snprintf(text, sizeof text, "cannot connect to %s:%u as %s: %s",
                 x->host, x->port, x->user, mysql_error(c->db));
        mysql_close(c->db);
        c->db = NULL;
        my_note(c, e != 0 ? e : CR_CONNECTION_ERROR, text);
        c->broken = true;
        return c->err;
    }
    /* Connector/C opens its socket without close-on-exec [B-EXEC-1]. */
    if (mysql_get_socket(c->db) >= 0)
        dlock_fd_cloexec((int)mysql_get_socket(c->db));
    /*
     * Connector/C 3.3 refuses a server without TLS only when it is to
     * verify the certificate; with ssl=require alone it goes on in the
     * clear. Refuse here, late: the login exchange has already been sent
     * unencrypted, which is why ssl=verify is the one to use.
     */
    if (x->ssl != SSL_OFF && mysql_get_ssl_cipher(c->db) == NULL) {
        char text[sizeof c->msg];
        snprintf(text, sizeof text,
                 "ssl=%s: %s:%u did not negotiate TLS (the server has none?); "
                 "connection refused",
                 my_ssl_names[x->ssl], x->host, x->port);
        mysql_close(c->db);
        c->db = NULL;
        my_note(c, CR_SSL_CONNECTION_ERROR, text);
        c->broken = true;
        return c->err;
    }
    return 0;
}

static void my_conn_close(struct my_conn *c)
{
    for (size_t i = 0; i < SQL_N; i++)
        if (c->st[i] != NULL)
            mysql_stmt_close(c->st[i]);
    if (c->db != NULL)
        mysql_close(c->db);
    memset(c->st, 0, sizeof c->st);
    c->db = NULL;
}

/* Run the mode's CREATE TABLE IF NOT EXISTS statements. */
static unsigned my_create_tables(struct my_conn *c)
{
    for (size_t i = 0; i < c->x->nddl; i++) {
        const char *q = c->x->ddl[i];
        if (mysql_real_query(c->db, q, (unsigned long)strlen(q)) != 0) {
            char text[sizeof c->msg];
            unsigned e = mysql_errno(c->db);
            snprintf(text, sizeof text,
                     "creating the lock tables of table=%s: %s",
                     c->x->table, mysql_error(c->db));
            return my_note(c, e != 0 ? e : CR_UNKNOWN_ERROR, text);
        }
    }
    return 0;
}

/* The prepared statement id, preparing it on first use. A missing table
 * is created, once, and the statement prepared again. */
static MYSQL_STMT *my_prepare(struct my_conn *c, enum my_sql id)
{
    for (int tries = 0;; tries++) {
        const char *q = c->x->sql[id];
        MYSQL_STMT *st;
        unsigned e;

        if (c->st[id] != NULL)
            return c->st[id];
        if ((st = mysql_stmt_init(c->db)) == NULL) {
            my_db_note(c);
            return NULL;
        }
        if (mysql_stmt_prepare(st, q, (unsigned long)strlen(q)) == 0) {
            c->st[id] = st;
            continue;
        }
        e = my_stmt_note(c, st);
        mysql_stmt_close(st);
        if (e != ER_NO_SUCH_TABLE || tries > 0 || my_create_tables(c) != 0)
            return NULL;
    }
}

/*
 * Execute statement id with these parameters. Returns 0, or the error
 * number with c->msg set. A table dropped since the statement was prepared
 * is created again, once.
 */
static unsigned my_exec(struct my_conn *c, enum my_sql id, MYSQL_BIND *params)
{
    for (int tries = 0;; tries++) {
        MYSQL_STMT *st;
        unsigned e;

        if (c->broken)
            return c->err != 0 ? c->err : CR_SERVER_GONE_ERROR;
        if ((st = my_prepare(c, id)) == NULL)
            return c->err;
        if (params != NULL && mysql_stmt_bind_param(st, params) != 0)
            return my_stmt_note(c, st);
        if (mysql_stmt_execute(st) == 0)
            return 0;
        e = my_stmt_note(c, st);
        if (e != ER_NO_SUCH_TABLE || tries > 0)
            return e;
        mysql_stmt_close(st);
        c->st[id] = NULL;
        if (my_create_tables(c) != 0)
            return c->err;
    }
}

static my_ulonglong my_affected(struct my_conn *c, enum my_sql id)
{
    return mysql_stmt_affected_rows(c->st[id]);
}

/*
 * Read the rows of the SELECT just executed into res (the last row wins;
 * the statements used with it return at most one). *found says whether
 * there was a row. Returns 0 or an error number.
 */
static unsigned my_fetch(struct my_conn *c, enum my_sql id, MYSQL_BIND *res,
                         bool *found)
{
    MYSQL_STMT *st = c->st[id];
    unsigned e = 0;
    int r = 0;

    *found = false;
    if (mysql_stmt_bind_result(st, res) != 0)
        e = my_stmt_note(c, st);
    while (e == 0 && ((r = mysql_stmt_fetch(st)) == 0 ||
                      r == MYSQL_DATA_TRUNCATED))
        *found = true;
    if (e == 0 && r == 1)
        e = my_stmt_note(c, st);
    mysql_stmt_free_result(st);
    return e;
}

/* Parameter and result bindings. */
static void bind_bytes(MYSQL_BIND *b, enum enum_field_types type,
                       const void *p, size_t len)
{
    memset(b, 0, sizeof *b);
    b->buffer_type = type;
    b->buffer = (void *)(uintptr_t)p;
    b->buffer_length = (unsigned long)len;
}

/* Bytes compared as bytes (the key). */
static void bind_blob(MYSQL_BIND *b, const void *p, size_t len)
{
    bind_bytes(b, MYSQL_TYPE_BLOB, p, len);
}

/* Text in the connection's character set, utf8mb4. */
static void bind_text(MYSQL_BIND *b, const char *p, size_t len)
{
    bind_bytes(b, MYSQL_TYPE_STRING, p, len);
}

static void bind_i64(MYSQL_BIND *b, long long *v)
{
    bind_bytes(b, MYSQL_TYPE_LONGLONG, v, sizeof *v);
}

static void bind_f64(MYSQL_BIND *b, double *v)
{
    bind_bytes(b, MYSQL_TYPE_DOUBLE, v, sizeof *v);
}

/* A nullable BIGINT result. */
static void res_i64(MYSQL_BIND *b, long long *v, my_flag *is_null)
{
    bind_bytes(b, MYSQL_TYPE_LONGLONG, v, sizeof *v);
    b->is_null = is_null;
    *v = 0;
    *is_null = 1;
}

static void res_bytes(MYSQL_BIND *b, void *buf, size_t cap,
                      unsigned long *len, my_flag *is_null)
{
    bind_bytes(b, MYSQL_TYPE_STRING, buf, cap);
    b->length = len;
    b->is_null = is_null;
    *len = 0;
    *is_null = 1;
}

/* ---- keys and names ------------------------------------------------------ */

/* The server's identity of a lock: SHA-256(namespace || name). */
static void my_key(const struct my_ctx *x, const char *name, size_t len,
                   uint8_t key[MY_KEY_LEN])
{
    const void *parts[2] = {x->ns, name};
    size_t lens[2] = {x->ns_len, len};

    dlock_sha256v(key, parts, lens, 2);
}

/* How much of the name the name column keeps: at most 255 bytes, cut
 * between characters. */
static size_t my_display_len(const char *name, size_t len)
{
    if (len <= MY_NAME_COL_MAX)
        return len;
    len = MY_NAME_COL_MAX;
    while (len > 0 && ((unsigned char)name[len] & 0xc0) == 0x80)
        len--;
    return len;
}

static size_t my_chars(const char *s, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xc0) != 0x80;
    return n;
}

/*
 * GET_LOCK's name: namespace || name as it is when that has at most 64
 * characters and does not start with "dlock:", else "dlock:" and the first
 * 58 hex digits (232 bits) of the key. The two forms never meet, so no raw
 * name can alias a hashed one. Returns the length written to out.
 */
static size_t my_ulock_name(const struct my_ctx *x, const char *name,
                            size_t len, const uint8_t key[MY_KEY_LEN],
                            char out[MY_ULOCK_BUF])
{
    static const char hex[] = "0123456789abcdef";
    const size_t plen = sizeof MY_ULOCK_PREFIX - 1;
    size_t n = 0;

    if (my_chars(x->ns, x->ns_len) + my_chars(name, len) <= MY_ULOCK_CHARS) {
        memcpy(out, x->ns, x->ns_len);
        memcpy(out + x->ns_len, name, len);
        n = x->ns_len + len;
        if (n < plen || memcmp(out, MY_ULOCK_PREFIX, plen) != 0) {
            out[n] = '\0';
            return n;
        }
    }
    memcpy(out, MY_ULOCK_PREFIX, plen);
    for (n = plen; n < MY_ULOCK_CHARS; n++) {
        size_t i = (n - plen) / 2;
        out[n] = hex[(n - plen) % 2 == 0 ? key[i] >> 4 : key[i] & 15];
    }
    out[n] = '\0';
    return n;
}

/* ---- fencing ------------------------------------------------------------- */

/*
 * Bump the name's counter and read the new value from the OK packet (with
 * LAST_INSERT_ID(expr), insert_id is expr). The caller holds the lock, so
 * only a cross-mode user of the same name could contend on the row; a
 * deadlock there is retried.
 */
static unsigned my_fence(struct my_conn *c, const uint8_t key[MY_KEY_LEN],
                         uint64_t *out)
{
    MYSQL_BIND p[1];
    unsigned e = 0;

    bind_blob(&p[0], key, MY_KEY_LEN);
    for (int i = 0; i < 3; i++) {
        e = my_exec(c, SQL_FENCE, p);
        if (e != ER_LOCK_DEADLOCK && e != ER_LOCK_WAIT_TIMEOUT)
            break;
    }
    if (e != 0)
        return e;
    *out = (uint64_t)mysql_stmt_insert_id(c->st[SQL_FENCE]);
    if (*out == 0)
        return my_note(c, CR_UNKNOWN_ERROR,
                       "the fence upsert returned no token");
    return 0;
}

/* The last token handed out for key, for inspect (0 if none). */
static unsigned my_fence_peek(struct my_conn *c,
                              const uint8_t key[MY_KEY_LEN], uint64_t *out)
{
    MYSQL_BIND p[1], r[1];
    long long v;
    my_flag null;
    bool found;
    unsigned e;

    bind_blob(&p[0], key, MY_KEY_LEN);
    res_i64(&r[0], &v, &null);
    if ((e = my_exec(c, SQL_FENCE_PEEK, p)) != 0 ||
        (e = my_fetch(c, SQL_FENCE_PEEK, r, &found)) != 0)
        return e;
    *out = found && !null ? (uint64_t)v : 0;
    return 0;
}

/* Report c's last error on the session: "what: the server's words". */
static int my_fail(struct my_session *ms, struct my_conn *c, const char *what)
{
    return dlock_session_error(&ms->base, my_code(c->err), "%s: %s (%u)",
                               what, c->msg, c->err);
}

/* EBUSY or ETIMEDOUT after a lock wait that did not get the lock. A
 * native wait cut short by the read timeout's margin is retried at once. */
static int my_busy(int64_t deadline_ms, bool waited, uint32_t *retry_ms)
{
    if (deadline_ms == 0)
        return DLOCK_EBUSY;
    if (dlock_now_ms() >= deadline_ms)
        return DLOCK_ETIMEDOUT;
    if (waited)
        *retry_ms = 1;
    return DLOCK_EBUSY;
}

/* ---- mode insert --------------------------------------------------------- */

static int ins_acquire(struct my_session *ms, const struct dlock_request *req,
                       struct dlock_grant *grant)
{
    struct my_conn *c = &ms->conn;
    struct my_ctx *x = ms->x;
    long long lease_us = (long long)req->lease_ms * 1000;
    uint8_t key[MY_KEY_LEN];
    MYSQL_BIND p[5];
    unsigned e;

    my_key(x, req->name, req->name_len, key);
    /* One INSERT: the primary key lets exactly one client in. */
    bind_blob(&p[0], key, MY_KEY_LEN);
    bind_text(&p[1], req->name, my_display_len(req->name, req->name_len));
    bind_text(&p[2], req->owner, req->owner_len);
    bind_text(&p[3], x->holder, x->holder_len);
    bind_i64(&p[4], &lease_us);
    e = my_exec(c, SQL_CLAIM, p);
    if (e == ER_DUP_ENTRY) {
        /* Held, unless the lease ran out (a crashed holder): then one
         * conditional UPDATE takes the row over. Of two clients racing
         * for it, the first to update makes the row unexpired, so the
         * other's WHERE no longer matches. A row that is still this
         * handle's (its release was lost with a connection) is simply
         * ours again: nobody else can have held it meanwhile. */
        bind_text(&p[0], req->owner, req->owner_len);
        bind_text(&p[1], x->holder, x->holder_len);
        bind_i64(&p[2], &lease_us);
        bind_blob(&p[3], key, MY_KEY_LEN);
        bind_text(&p[4], req->owner, req->owner_len);
        e = my_exec(c, SQL_TAKEOVER, p);
        if (e == 0 && my_affected(c, SQL_TAKEOVER) != 1)
            return DLOCK_EBUSY;
    }
    /* Concurrent INSERTs of one key deadlock in InnoDB now and then: the
     * loser simply found the lock busy. */
    if (e == ER_LOCK_DEADLOCK || e == ER_LOCK_WAIT_TIMEOUT)
        return DLOCK_EBUSY;
    if (e != 0)
        return my_fail(ms, c, "claim");
    if ((e = my_fence(c, key, &grant->fence)) != 0) {
        int rc = my_fail(ms, c, "fence");
        /* Give the row back if we still can; else its lease frees it. */
        bind_blob(&p[0], key, MY_KEY_LEN);
        bind_text(&p[1], req->owner, req->owner_len);
        if (!c->broken)
            my_exec(c, SQL_DELETE, p);
        return rc;
    }
    return DLOCK_OK;
}

static int ins_renew_one(struct my_session *ms, struct dlock_renewal *it)
{
    struct my_conn *c = &ms->conn;
    long long lease_us = (long long)it->req->lease_ms * 1000;
    uint8_t key[MY_KEY_LEN];
    MYSQL_BIND p[3];
    unsigned e;

    my_key(ms->x, it->req->name, it->req->name_len, key);
    bind_i64(&p[0], &lease_us);
    bind_blob(&p[1], key, MY_KEY_LEN);
    bind_text(&p[2], it->req->owner, it->req->owner_len);
    if ((e = my_exec(c, SQL_EXTEND, p)) != 0)
        return my_fail(ms, c, "renew");
    it->result = my_affected(c, SQL_EXTEND) == 1
                     ? DLOCK_OK
                     : dlock_session_error(&ms->base, DLOCK_ELOST,
                                           "the row is gone or has another "
                                           "owner (the lease ran out and "
                                           "another client took it)");
    return DLOCK_OK;
}

/*
 * Renew n <= MY_BATCH locks of one lease in one UPDATE. Unused slots
 * repeat the first item (IN ignores repeats). The WHERE is keys IN (…) AND
 * owners IN (…): a row can match a key and another item's owner only if
 * that handle holds the same name, i.e. two items share a key; so when
 * the rows matched equal n, every item is ours. Otherwise one SELECT says
 * which ones still are.
 */
static int ins_renew_batch(struct my_session *ms, struct dlock_renewal *it,
                           size_t n)
{
    struct my_conn *c = &ms->conn;
    long long lease_us = (long long)it[0].req->lease_ms * 1000;
    uint8_t keys[MY_BATCH][MY_KEY_LEN];
    MYSQL_BIND p[1 + 2 * MY_BATCH], r[2];
    uint8_t rkey[MY_KEY_LEN];
    char rowner[65];
    unsigned long rkey_len, rowner_len;
    my_flag rkey_null, rowner_null;
    MYSQL_STMT *st;
    unsigned e;
    int f;

    bind_i64(&p[0], &lease_us);
    for (size_t k = 0; k < MY_BATCH; k++) {
        size_t src = k < n ? k : 0;
        if (k < n)
            my_key(ms->x, it[k].req->name, it[k].req->name_len, keys[k]);
        bind_blob(&p[1 + k], keys[src], MY_KEY_LEN);
        bind_text(&p[1 + MY_BATCH + k], it[src].req->owner,
                  it[src].req->owner_len);
    }
    if ((e = my_exec(c, SQL_EXTEND_BATCH, p)) != 0)
        return my_fail(ms, c, "renew");
    for (size_t k = 0; k < n; k++)
        it[k].result = DLOCK_ELOST;
    if (my_affected(c, SQL_EXTEND_BATCH) == n) {
        for (size_t k = 0; k < n; k++)
            it[k].result = DLOCK_OK;
        return DLOCK_OK;
    }
    if ((e = my_exec(c, SQL_OWNERS_BATCH, p + 1)) != 0)
        return my_fail(ms, c, "renew");
    st = c->st[SQL_OWNERS_BATCH];
    res_bytes(&r[0], rkey, sizeof rkey, &rkey_len, &rkey_null);
    res_bytes(&r[1], rowner, sizeof rowner - 1, &rowner_len, &rowner_null);
    if (mysql_stmt_bind_result(st, r) != 0) {
        my_stmt_note(c, st);
        mysql_stmt_free_result(st);
        return my_fail(ms, c, "renew");
    }
    while ((f = mysql_stmt_fetch(st)) == 0) {
        for (size_t k = 0; k < n; k++)
            if (rkey_len == MY_KEY_LEN &&
                memcmp(rkey, keys[k], MY_KEY_LEN) == 0 &&
                rowner_len == it[k].req->owner_len &&
                memcmp(rowner, it[k].req->owner, rowner_len) == 0)
                it[k].result = DLOCK_OK;
    }
    if (f == 1) {
        my_stmt_note(c, st);
        mysql_stmt_free_result(st);
        return my_fail(ms, c, "renew");
    }
    mysql_stmt_free_result(st);
    for (size_t k = 0; k < n; k++)
        if (it[k].result != DLOCK_OK)
            it[k].result = dlock_session_error(
                &ms->base, DLOCK_ELOST,
                "the row is gone or has another owner (the lease ran out "
                "and another client took it)");
    return DLOCK_OK;
}

/* Runs of one lease go by batch; a run of one by the plain UPDATE. */
static int ins_renew(struct my_session *ms, struct dlock_renewal *items,
                     size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        int rc;

        while (j < n && j - i < MY_BATCH &&
               items[j].req->lease_ms == items[i].req->lease_ms)
            j++;
        rc = j - i == 1 ? ins_renew_one(ms, &items[i])
                        : ins_renew_batch(ms, items + i, j - i);
        if (rc != DLOCK_OK)
            return rc;
        i = j;
    }
    return DLOCK_OK;
}

static int ins_release(struct my_session *ms, const struct dlock_request *req)
{
    struct my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    MYSQL_BIND p[2];

    my_key(ms->x, req->name, req->name_len, key);
    bind_blob(&p[0], key, MY_KEY_LEN);
    bind_text(&p[1], req->owner, req->owner_len);
    if (my_exec(c, SQL_DELETE, p) != 0)
        return my_fail(ms, c, "release");
    if (my_affected(c, SQL_DELETE) != 1)
        return dlock_session_error(&ms->base, DLOCK_ENOTOWNER,
                                   "no row of this owner: the lease ran "
                                   "out, and the lock is free or taken");
    return DLOCK_OK;
}

static int ins_inspect(struct my_session *ms, const uint8_t key[MY_KEY_LEN],
                       dlock_state *out)
{
    struct my_conn *c = &ms->conn;
    MYSQL_BIND p[1], r[2];
    char owner[65];
    unsigned long owner_len;
    long long left;
    my_flag owner_null, left_null;
    bool found;

    bind_blob(&p[0], key, MY_KEY_LEN);
    res_bytes(&r[0], owner, sizeof owner - 1, &owner_len, &owner_null);
    res_i64(&r[1], &left, &left_null);
    if (my_exec(c, SQL_ROW_STATE, p) != 0 ||
        my_fetch(c, SQL_ROW_STATE, r, &found) != 0)
        return my_fail(ms, c, "inspect");
    out->held = found && !left_null && left > 0;
    if (out->held) {
        owner[owner_len < sizeof owner ? owner_len : sizeof owner - 1] = '\0';
        snprintf(out->owner, sizeof out->owner, "%s", owner);
        out->remaining_ms = left;
    }
    return DLOCK_OK;
}

/* ---- the connection-bound modes' silence limit ---------------------------- */

/*
 * [B-BOUND-1] The server ends a connection-bound session (and frees its
 * GET_LOCKs, rolls back its FOR UPDATE) once it has been silent for
 * wait_timeout seconds, which must exceed the longest lease of its locks
 * plus a margin: core stops believing a lease after the last confirmed
 * round trip, and renews (pings) every third of it. Raised when a longer
 * lease comes; with no lock held it follows the new one exactly. One round
 * trip, only when it changes.
 */
static unsigned my_cover_lease(struct my_session *ms, uint32_t lease_ms,
                               bool holds)
{
    uint32_t limit = dlock_server_timeout_ms(lease_ms);
    char q[80];
    int n;

    if (ms->x->mode == MODE_INSERT || lease_ms == ms->covered_ms ||
        (holds && lease_ms < ms->covered_ms))
        return 0;
    n = snprintf(q, sizeof q, "SET SESSION wait_timeout = %u",
                 (limit + 999) / 1000);
    if (mysql_real_query(ms->conn.db, q, (unsigned long)n) != 0)
        return my_db_note(&ms->conn);
    ms->covered_ms = lease_ms;
    return 0;
}

/* ---- mode for_update ----------------------------------------------------- */

/*
 * The for_update lock's fence goes over the client's own autocommitted
 * connection: on the lock's connection it would be part of the lock's
 * transaction, and a rollback (connection killed, server restarted) would
 * hand the same token to the next holder.
 */
static unsigned fu_fence(struct my_session *ms, const uint8_t key[MY_KEY_LEN],
                         uint64_t *out)
{
    struct my_ctx *x = ms->x;
    unsigned e = 0;

    pthread_mutex_lock(&x->mu);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (x->fence_open && x->fence.broken) {
            my_conn_close(&x->fence);
            x->fence_open = false;
        }
        if (!x->fence_open) {
            if ((e = my_connect(&x->fence, x, false)) != 0)
                break;
            x->fence_open = true;
        }
        /* A reply lost with the connection may have bumped it already:
         * once more skips a token, which fencing allows. */
        if ((e = my_fence(&x->fence, key, out)) == 0 || !x->fence.broken)
            break;
    }
    if (e != 0) {
        /* Report it through the session; the lock's own connection is
         * fine, so it is not marked broken. */
        bool broken = ms->conn.broken;
        my_note(&ms->conn, e, x->fence.msg);
        ms->conn.broken = broken;
    }
    pthread_mutex_unlock(&x->mu);
    return e;
}

/* Set the session's lock wait (seconds) if it differs. */
static unsigned fu_set_wait(struct my_session *ms, long s)
{
    char q[80];
    int n;

    if (ms->lock_wait_s == s)
        return 0;
    n = snprintf(q, sizeof q, "SET SESSION innodb_lock_wait_timeout = %ld",
                 s);
    if (mysql_real_query(ms->conn.db, q, (unsigned long)n) != 0)
        return my_db_note(&ms->conn);
    ms->lock_wait_s = s;
    return 0;
}

/* Lock the row with statement id: 0 and *locked, or an error number. */
static unsigned fu_lock_row(struct my_session *ms, enum my_sql id,
                            const uint8_t key[MY_KEY_LEN], bool *locked)
{
    struct my_conn *c = &ms->conn;
    MYSQL_BIND p[1], r[1];
    long long one;
    my_flag null;
    unsigned e;

    bind_blob(&p[0], key, MY_KEY_LEN);
    res_i64(&r[0], &one, &null);
    if ((e = my_exec(c, id, p)) == 0)
        e = my_fetch(c, id, r, locked);
    return e;
}

/*
 * First use of a name: create its row and commit at once, so it is there
 * for everyone. INSERT IGNORE checks the key under a shared lock, so if
 * someone already created and locked the row this fails (lock wait 0) and
 * the lock is busy.
 */
static unsigned fu_create_row(struct my_session *ms,
                              const struct dlock_request *req,
                              const uint8_t key[MY_KEY_LEN])
{
    struct my_conn *c = &ms->conn;
    MYSQL_BIND p[2];
    unsigned e;

    if ((e = fu_set_wait(ms, 0)) != 0)
        return e;
    bind_blob(&p[0], key, MY_KEY_LEN);
    bind_text(&p[1], req->name, my_display_len(req->name, req->name_len));
    if ((e = my_exec(c, SQL_ROW_CREATE, p)) != 0)
        return e;
    if (mysql_commit(c->db) != 0)
        return my_db_note(c);
    return 0;
}

static int fu_acquire(struct my_session *ms, const struct dlock_request *req,
                      int64_t deadline_ms, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    bool locked = false;
    long wait_s = 0;
    unsigned e;

    my_key(ms->x, req->name, req->name_len, key);
    /*
     * innodb_lock_wait_timeout counts whole seconds: wait natively for the
     * whole seconds left (never past the deadline, and ending before the
     * read timeout would), then try with NOWAIT while core backs off for
     * the rest.
     */
    if (deadline_ms != 0) {
        int64_t left = deadline_ms - dlock_now_ms();
        long cap = (long)ms->x->io_s - 1;
        wait_s = left >= 1000 ? (long)(left / 1000) : 0;
        if (wait_s > cap)
            wait_s = cap;
    }
    for (int round = 0; round < 2 && !locked; round++) {
        enum my_sql id = wait_s > 0 ? SQL_ROW_WAIT : SQL_ROW_NOWAIT;

        if (wait_s > 0 && (e = fu_set_wait(ms, wait_s)) != 0)
            return my_fail(ms, c, "set lock wait");
        e = fu_lock_row(ms, id, key, &locked);
        if (my_code(e) == DLOCK_EBUSY)
            return my_busy(deadline_ms, wait_s > 0, retry_ms);
        if (e != 0)
            return my_fail(ms, c, "SELECT … FOR UPDATE");
        if (locked)
            break;
        if (round > 0)
            return dlock_session_error(&ms->base, DLOCK_ERROR,
                                       "the lock row vanished right after "
                                       "it was created (table `%s_rows` "
                                       "cleared?)",
                                       ms->x->table);
        e = fu_create_row(ms, req, key);
        if (my_code(e) == DLOCK_EBUSY)
            return my_busy(deadline_ms, false, retry_ms);
        if (e != 0)
            return my_fail(ms, c, "create the lock row");
    }
    /* Held until COMMIT, or until this connection ends. */
    if ((e = fu_fence(ms, key, &grant->fence)) != 0) {
        int rc = my_fail(ms, c, "fence");
        mysql_rollback(c->db);
        return rc;
    }
    return DLOCK_OK;
}

static int fu_release(struct my_session *ms)
{
    struct my_conn *c = &ms->conn;

    if (c->broken)
        return dlock_session_error(&ms->base, DLOCK_ECONNECT,
                                   "the connection holding the lock is "
                                   "gone: %s",
                                   c->msg);
    if (mysql_commit(c->db) != 0) {
        my_db_note(c);
        return my_fail(ms, c, "COMMIT");
    }
    return DLOCK_OK;
}

/*
 * Held or not, by a NOWAIT probe: busy means held; a row we could lock
 * was free (the ROLLBACK gives it back at once). Who holds it, InnoDB
 * tells only with the PROCESS privilege, so the owner stays unknown.
 * (SKIP LOCKED would read better, but over a locked row MariaDB 10.11 and
 * Connector/C 3.3 end the empty result with a fetch error of errno 0.)
 */
static int fu_inspect(struct my_session *ms, const uint8_t key[MY_KEY_LEN],
                      dlock_state *out)
{
    struct my_conn *c = &ms->conn;
    bool locked = false;
    unsigned e;

    e = fu_lock_row(ms, SQL_ROW_NOWAIT, key, &locked);
    mysql_rollback(c->db);
    if (my_code(e) == DLOCK_EBUSY) {
        out->held = 1;
        return DLOCK_OK;
    }
    if (e != 0)
        return my_fail(ms, c, "inspect");
    out->held = 0;
    return DLOCK_OK;
}

/* ---- mode get_lock ------------------------------------------------------- */

/* Run GET_LOCK/RELEASE_LOCK/IS_USED_LOCK; *v is their value, *null if
 * NULL. */
static unsigned gl_call(struct my_conn *c, enum my_sql id, const char *ul,
                        size_t ul_len, double *timeout_s, long long *v,
                        my_flag *null)
{
    MYSQL_BIND p[2], r[1];
    bool found;
    unsigned e;

    bind_text(&p[0], ul, ul_len);
    if (timeout_s != NULL)
        bind_f64(&p[1], timeout_s);
    res_i64(&r[0], v, null);
    if ((e = my_exec(c, id, p)) == 0)
        e = my_fetch(c, id, r, &found);
    return e;
}

static int gl_acquire(struct my_session *ms, const struct dlock_request *req,
                      int64_t deadline_ms, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    double wait_s = 0;
    long long v;
    my_flag null;
    unsigned e;

    my_key(ms->x, req->name, req->name_len, key);
    ul_len = my_ulock_name(ms->x, req->name, req->name_len, key, ul);
    /* The server waits for us, in fractions of a second, but each wait
     * must end before the read timeout gives up on the connection. */
    if (deadline_ms != 0) {
        int64_t left = deadline_ms - dlock_now_ms();
        int64_t cap = ms->x->io_ms - MY_WAIT_MARGIN_MS;
        if (left > cap)
            left = cap;
        wait_s = left > 0 ? (double)left / 1000.0 : 0;
    }
    if ((e = gl_call(c, SQL_GET_LOCK, ul, ul_len, &wait_s, &v, &null)) != 0)
        return my_fail(ms, c, "GET_LOCK");
    if (null)
        return dlock_session_error(&ms->base, DLOCK_ERROR,
                                   "GET_LOCK returned NULL (the wait was "
                                   "killed, or the server ran out of "
                                   "memory)");
    if (v != 1)
        return my_busy(deadline_ms, wait_s > 0, retry_ms);
    if ((e = my_fence(c, key, &grant->fence)) != 0) {
        int rc = my_fail(ms, c, "fence");
        if (!c->broken)
            gl_call(c, SQL_RELEASE_LOCK, ul, ul_len, NULL, &v, &null);
        return rc;
    }
    return DLOCK_OK;
}

static int gl_release(struct my_session *ms, const struct dlock_request *req)
{
    struct my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    long long v;
    my_flag null;

    my_key(ms->x, req->name, req->name_len, key);
    ul_len = my_ulock_name(ms->x, req->name, req->name_len, key, ul);
    if (gl_call(c, SQL_RELEASE_LOCK, ul, ul_len, NULL, &v, &null) != 0)
        return my_fail(ms, c, "RELEASE_LOCK");
    /* 1: ours, released; 0: another connection's; NULL: nobody's. */
    if (null || v != 1)
        return dlock_session_error(&ms->base, DLOCK_ENOTOWNER,
                                   "RELEASE_LOCK returned %s",
                                   null ? "NULL: no such lock is held"
                                        : "0: another connection holds it");
    return DLOCK_OK;
}

static int gl_inspect(struct my_session *ms, const struct dlock_request *req,
                      const uint8_t key[MY_KEY_LEN], dlock_state *out)
{
    struct my_conn *c = &ms->conn;
    char ul[MY_ULOCK_BUF];
    size_t ul_len = my_ulock_name(ms->x, req->name, req->name_len, key, ul);
    long long id;
    my_flag null;

    if (gl_call(c, SQL_IS_USED_LOCK, ul, ul_len, NULL, &id, &null) != 0)
        return my_fail(ms, c, "inspect");
    out->held = !null;
    if (!null)
        snprintf(out->owner, sizeof out->owner, "mysql connection %lld", id);
    return DLOCK_OK;
}

/* ---- the vtable's entry points ------------------------------------------- */

static int my_global_init(void)
{
    return mysql_library_init(0, NULL, NULL) == 0 ? DLOCK_OK : DLOCK_ERROR;
}

static int my_thread_init(void)
{
    return mysql_thread_init() == 0 ? DLOCK_OK : DLOCK_ERROR;
}

static void my_thread_end(void)
{
    mysql_thread_end();
}

static int my_ctx_open(void **out, const struct dlock_uri *uri, char *err,
                       size_t errlen)
{
    struct my_ctx *x;
    int rc = my_ctx_new(&x, uri, err, errlen);

    *out = x;
    return rc;
}

static void my_ctx_close(void *ctx)
{
    my_ctx_free(ctx);
}

static int my_open(struct dlock_session **out, const struct dlock_uri *uri,
                   void *ctx, char *err, size_t errlen)
{
    struct my_ctx *x = ctx;
    struct my_session *ms;
    unsigned e;

    (void)uri; /* read once, by my_ctx_new() */
    ms = calloc(1, sizeof *ms);
    if (ms == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    if ((e = my_connect(&ms->conn, x, x->mode == MODE_FOR_UPDATE)) != 0) {
        int rc = dlock_errorf(err, errlen, DLOCK_ECONNECT, "%s (%u)",
                              ms->conn.msg, e);
        free(ms);
        return rc;
    }
    ms->x = x;
    ms->lock_wait_s = 0;
    if ((e = my_cover_lease(ms, x->lease_ms, false)) != 0) {
        int rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                              "set wait_timeout: %s (%u)", ms->conn.msg, e);
        my_conn_close(&ms->conn);
        free(ms);
        return rc;
    }
    /* Connection-bound modes: the locks end with this socket; insert: a
     * dropped connection is noticed before the next call [B-WATCH-1]. */
    dlock_session_watch(&ms->base, (int)mysql_get_socket(ms->conn.db));
    ms->base.backend = &dlock__backend_mysql;
    ms->base.caps = my_caps[x->mode];
    ms->base.mode = my_mode_names[x->mode];
    /* insert polls: start fast, stay fast. The others wait on the server
     * and back off only between waits. */
    ms->base.retry_min_ms = x->mode == MODE_INSERT ? 2 : 1;
    ms->base.retry_max_ms = x->mode == MODE_INSERT ? 64 : 32;
    *out = &ms->base;
    return DLOCK_OK;
}

static void my_close(struct dlock_session *s)
{
    struct my_session *ms = (struct my_session *)s;

    dlock_session_watch(s, -1);
    my_conn_close(&ms->conn);
    free(ms);
}

static int my_acquire(struct dlock_session *s, const struct dlock_request *req,
                      int64_t deadline_ms, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct my_session *ms = (struct my_session *)s;
    int rc = DLOCK_ERROR;

    if (ms->conn.broken)
        return dlock_session_error(s, DLOCK_ECONNECT, "connection broken: %s",
                                   ms->conn.msg);
    if (my_cover_lease(ms, req->lease_ms, ms->ngrants > 0) != 0)
        return my_fail(ms, &ms->conn, "set wait_timeout");
    switch (ms->x->mode) {
    case MODE_INSERT:
        return ins_acquire(ms, req, grant);
    case MODE_FOR_UPDATE:
        rc = fu_acquire(ms, req, deadline_ms, grant, retry_ms);
        break;
    case MODE_GET_LOCK:
        rc = gl_acquire(ms, req, deadline_ms, grant, retry_ms);
        break;
    }
    if (rc == DLOCK_OK)
        ms->ngrants++;
    return rc;
}

/* A connection-bound lock lives as long as its connection: one ping
 * proves every lock the session holds. */
static int my_ping_renew(struct my_session *ms, struct dlock_renewal *items,
                         size_t n)
{
    struct my_conn *c = &ms->conn;

    if (!c->broken && mysql_ping(c->db) != 0)
        my_db_note(c);
    if (c->broken)
        return dlock_session_error(&ms->base, DLOCK_ELOST,
                                   "the connection holding the lock is "
                                   "gone: %s (%u)",
                                   c->msg, c->err);
    for (size_t i = 0; i < n; i++)
        items[i].result = DLOCK_OK;
    return DLOCK_OK;
}

static int my_renew(struct dlock_session *s, struct dlock_renewal *items,
                    size_t n)
{
    struct my_session *ms = (struct my_session *)s;

    if (ms->x->mode == MODE_INSERT) {
        if (ms->conn.broken)
            return dlock_session_error(s, DLOCK_ECONNECT,
                                       "connection broken: %s", ms->conn.msg);
        return ins_renew(ms, items, n);
    }
    return my_ping_renew(ms, items, n);
}

static int my_release(struct dlock_session *s, const struct dlock_request *req,
                      struct dlock_grant *grant)
{
    struct my_session *ms = (struct my_session *)s;

    (void)grant;
    if (ms->x->mode != MODE_INSERT && ms->ngrants > 0)
        ms->ngrants--;
    switch (ms->x->mode) {
    case MODE_INSERT:
        if (ms->conn.broken)
            return dlock_session_error(s, DLOCK_ECONNECT,
                                       "connection broken: %s", ms->conn.msg);
        return ins_release(ms, req);
    case MODE_FOR_UPDATE:
        return fu_release(ms);
    case MODE_GET_LOCK:
        if (ms->conn.broken)
            return dlock_session_error(s, DLOCK_ECONNECT,
                                       "the connection holding the lock is "
                                       "gone: %s",
                                       ms->conn.msg);
        return gl_release(ms, req);
    }
    return DLOCK_ERROR;
}

static int my_inspect(struct dlock_session *s, const char *name, size_t len,
                      dlock_state *out)
{
    struct my_session *ms = (struct my_session *)s;
    struct dlock_request req;
    uint8_t key[MY_KEY_LEN];
    int rc = DLOCK_ERROR;

    if (ms->conn.broken)
        return dlock_session_error(s, DLOCK_ECONNECT, "connection broken: %s",
                                   ms->conn.msg);
    memset(&req, 0, sizeof req);
    req.name = name;
    req.name_len = len;
    my_key(ms->x, name, len, key);
    switch (ms->x->mode) {
    case MODE_INSERT:
        rc = ins_inspect(ms, key, out);
        break;
    case MODE_FOR_UPDATE:
        rc = fu_inspect(ms, key, out);
        break;
    case MODE_GET_LOCK:
        rc = gl_inspect(ms, &req, key, out);
        break;
    }
    if (rc == DLOCK_OK && my_fence_peek(&ms->conn, key, &out->fence) != 0)
        rc = my_fail(ms, &ms->conn, "inspect fence");
    if (ms->x->mode == MODE_FOR_UPDATE)
        mysql_rollback(ms->conn.db);
    return rc;
}

/* ---- the raw floor ------------------------------------------------------- */

/*
 * n acquire+release cycles of the URI's mode with Connector/C alone: the
 * same statements dlock sends, prepared before the clock starts, on one
 * connection (two for for_update), with no core, pool or watchdog.
 */
static int my_floor(const struct dlock_uri *uri, const char *name,
                    uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    static const char owner[] = "00000000-0000-4000-8000-000000000000:1";
    struct my_ctx *x;
    struct my_conn c, f;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t len = strlen(name), ul_len;
    long long lease_us = 30000000, v;
    double zero = 0;
    my_flag null;
    MYSQL_BIND p[5];
    uint64_t fence;
    int rc;
    unsigned e = 0;
    bool locked;

    if ((rc = my_ctx_new(&x, uri, err, errlen)) != DLOCK_OK)
        return rc;
    memset(&f, 0, sizeof f);
    if ((e = my_connect(&c, x, x->mode == MODE_FOR_UPDATE)) != 0 ||
        (x->mode == MODE_FOR_UPDATE && (e = my_connect(&f, x, false)) != 0)) {
        rc = dlock_errorf(err, errlen, DLOCK_ECONNECT, "floor: %s",
                          c.db == NULL ? c.msg : f.msg);
        my_conn_close(&c);
        my_ctx_free(x);
        return rc;
    }
    my_key(x, name, len, key);
    ul_len = my_ulock_name(x, name, len, key, ul);
    /* Set-up outside the clock: prepare, create tables and the row, clear
     * what an interrupted run may have left. */
    bind_blob(&p[0], key, MY_KEY_LEN);
    bind_text(&p[1], owner, sizeof owner - 1);
    switch (x->mode) {
    case MODE_INSERT:
        e = my_exec(&c, SQL_DELETE, p);
        if (e == 0 && my_prepare(&c, SQL_CLAIM) == NULL)
            e = c.err;
        break;
    case MODE_FOR_UPDATE:
        bind_text(&p[1], name, my_display_len(name, len));
        e = my_exec(&c, SQL_ROW_CREATE, p);
        if (e == 0 && mysql_commit(c.db) != 0)
            e = my_db_note(&c);
        if (e == 0 && my_prepare(&c, SQL_ROW_NOWAIT) == NULL)
            e = c.err;
        break;
    case MODE_GET_LOCK:
        if (my_prepare(&c, SQL_GET_LOCK) == NULL ||
            my_prepare(&c, SQL_RELEASE_LOCK) == NULL)
            e = c.err;
        break;
    }
    if (e == 0 && my_prepare(x->mode == MODE_FOR_UPDATE ? &f : &c,
                             SQL_FENCE) == NULL)
        e = x->mode == MODE_FOR_UPDATE ? f.err : c.err;

    for (uint32_t i = 0; i < n && e == 0; i++) {
        uint64_t t0 = dlock_now_ns();
        switch (x->mode) {
        case MODE_INSERT:
            bind_blob(&p[0], key, MY_KEY_LEN);
            bind_text(&p[1], name, my_display_len(name, len));
            bind_text(&p[2], owner, sizeof owner - 1);
            bind_text(&p[3], x->holder, x->holder_len);
            bind_i64(&p[4], &lease_us);
            if ((e = my_exec(&c, SQL_CLAIM, p)) != 0 ||
                (e = my_fence(&c, key, &fence)) != 0)
                break;
            bind_text(&p[1], owner, sizeof owner - 1);
            e = my_exec(&c, SQL_DELETE, p);
            break;
        case MODE_FOR_UPDATE:
            bind_blob(&p[0], key, MY_KEY_LEN);
            res_i64(&p[1], &v, &null);
            if ((e = my_exec(&c, SQL_ROW_NOWAIT, p)) != 0 ||
                (e = my_fetch(&c, SQL_ROW_NOWAIT, &p[1], &locked)) != 0)
                break;
            if (!locked) {
                e = my_note(&c, CR_UNKNOWN_ERROR, "the lock row is missing");
                break;
            }
            if ((e = my_fence(&f, key, &fence)) != 0) {
                my_note(&c, e, f.msg);
                break;
            }
            if (mysql_commit(c.db) != 0)
                e = my_db_note(&c);
            break;
        case MODE_GET_LOCK:
            if ((e = gl_call(&c, SQL_GET_LOCK, ul, ul_len, &zero, &v,
                             &null)) != 0)
                break;
            if (null || v != 1) {
                e = my_note(&c, CR_UNKNOWN_ERROR,
                            "the lock is held by someone else");
                break;
            }
            if ((e = my_fence(&c, key, &fence)) != 0 ||
                (e = gl_call(&c, SQL_RELEASE_LOCK, ul, ul_len, NULL, &v,
                             &null)) != 0)
                break;
            break;
        }
        ns_out[i] = dlock_now_ns() - t0;
    }
    if (e != 0)
        rc = dlock_errorf(err, errlen, my_code(e) == DLOCK_EBUSY
                                           ? DLOCK_EBUSY
                                           : my_code(e),
                          "floor: %s (%u)", c.err ? c.msg : f.msg, e);
    my_conn_close(&c);
    if (f.db != NULL)
        my_conn_close(&f);
    my_ctx_free(x);
    return rc;
}

static const char *const my_aliases[] = {"mariadb", NULL};

const struct dlock_backend dlock__backend_mysql = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "mysql",
    .aliases = my_aliases,
    .params = my_params,
    .caps = DLOCK_CAP_LEASE | DLOCK_CAP_FENCING |
            DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW,
    .summary = "MySQL/MariaDB: unique-key rows with a lease (insert), "
               "SELECT … FOR UPDATE (for_update), GET_LOCK (get_lock)",
    .global_init = my_global_init,
    .thread_init = my_thread_init,
    .thread_end = my_thread_end,
    .ctx_open = my_ctx_open,
    .ctx_close = my_ctx_close,
    .open = my_open,
    .close = my_close,
    .acquire = my_acquire,
    .renew = my_renew,
    .release = my_release,
    .inspect = my_inspect,
    .floor = my_floor,
};
