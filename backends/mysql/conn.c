/*
 * conn.c: connections to a MySQL or MariaDB server over Connector/C, the
 * statements prepared on them, parameter and result bindings, and what an
 * error number means to dlock. The modes' files hold their statements'
 * texts (struct dlock__my_stmt) and tables; this file prepares, runs and
 * reads them, and creates a mode's tables when a statement finds one
 * missing.
 *
 * Connections go over TCP always ("localhost" means the Unix socket to the
 * client library otherwise), in utf8mb4, with connect, read and write
 * timeouts from timeout= (whole seconds, rounded up: the library counts in
 * seconds), automatic reconnection off (a silent reconnect would drop a
 * GET_LOCK or a transaction while we believe we hold it), LOAD DATA LOCAL
 * off, the attribute program_name=dlock, and close-on-exec [B-EXEC-1].
 * Core pools them; a broken one is reported and replaced by core
 * [B-CONN-1].
 *
 * Divisions: errors; connecting; tables and statements; bindings;
 * reporting on a session.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

/* ---- errors -------------------------------------------------------------- */

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

int dlock__my_connect_code(unsigned e)
{
    return dlock__my_code(e) == DLOCK_EAUTH ? DLOCK_EAUTH : DLOCK_ECONNECT;
}

int dlock__my_code(unsigned e)
{
    if (my_conn_error(e))
        return DLOCK_ECONNECT;
    switch (e) {
    case CR_OUT_OF_MEMORY:
    case ER_OUTOFMEMORY:
        return DLOCK_ENOMEM;
    case ER_ACCESS_DENIED_ERROR:
    case ER_DBACCESS_DENIED_ERROR:
    case ER_ACCESS_DENIED_NO_PASSWORD_ERROR:
    case ER_ACCESS_DENIED_CHANGE_USER_ERROR:
        return DLOCK_EAUTH;
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT:
    case MY_ER_LOCK_NOWAIT:
        return DLOCK_EBUSY;
    default:
        return DLOCK_ERROR;
    }
}

unsigned dlock__my_note(struct dlock__my_conn *c, unsigned e,
                        const char *text)
{
    c->err = e;
    snprintf(c->msg, sizeof c->msg, "%s", text != NULL && text[0] ? text
                                                : "unknown error");
    if (my_conn_error(e))
        c->broken = true;
    return e;
}

unsigned dlock__my_db_note(struct dlock__my_conn *c)
{
    unsigned e = mysql_errno(c->db);
    return dlock__my_note(c, e != 0 ? e : CR_UNKNOWN_ERROR,
                          mysql_error(c->db));
}

/* A server error in a row (GET_LOCK's 1059 at mysql_stmt_fetch) is left
 * by Connector/C 3.3 on the connection, not the statement (measured). */
unsigned dlock__my_stmt_note(struct dlock__my_conn *c, MYSQL_STMT *st)
{
    unsigned e = mysql_stmt_errno(st);
    if (e == 0 && mysql_errno(c->db) != 0)
        return dlock__my_db_note(c);
    return dlock__my_note(c, e != 0 ? e : CR_UNKNOWN_ERROR,
                          mysql_stmt_error(st));
}

/* ---- connecting ---------------------------------------------------------- */

/* Close c's connection after a failed connect, noting text as its error. */
static unsigned my_connect_failed(struct dlock__my_conn *c, unsigned e,
                                  const char *text)
{
    mysql_close(c->db);
    c->db = NULL;
    dlock__my_note(c, e, text);
    c->broken = true;
    return c->err;
}

unsigned dlock__my_connect(struct dlock__my_conn *c,
                           const struct dlock__my_ctx *x, bool mode_init)
{
    unsigned int proto = MYSQL_PROTOCOL_TCP, timeout = x->io_s, infile = 0;
    my_flag off = 0, on = 1;
    char text[sizeof c->msg];
    unsigned e;

    memset(c, 0, sizeof *c);
    c->x = x;
    c->db = mysql_init(NULL);
    if (c->db == NULL)
        return dlock__my_note(c, CR_OUT_OF_MEMORY,
                              "mysql_init: out of memory");
    mysql_options(c->db, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(c->db, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(c->db, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(c->db, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    mysql_options(c->db, MYSQL_OPT_RECONNECT, &off);
    mysql_options(c->db, MYSQL_OPT_LOCAL_INFILE, &infile);
    mysql_options(c->db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options4(c->db, MYSQL_OPT_CONNECT_ATTR_ADD, "program_name",
                   "dlock");
    if (x->ssl != MY_SSL_OFF) {
#ifdef LIBMARIADB
        mysql_options(c->db, MYSQL_OPT_SSL_ENFORCE, &on);
        if (x->ssl == MY_SSL_VERIFY)
            mysql_options(c->db, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
        else
            mysql_options(c->db, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &off);
#else
        unsigned int mode = x->ssl == MY_SSL_VERIFY ? SSL_MODE_VERIFY_IDENTITY
                                                    : SSL_MODE_REQUIRED;
        (void)on;
        mysql_options(c->db, MYSQL_OPT_SSL_MODE, &mode);
#endif
        if (x->ssl_ca != NULL)
            mysql_options(c->db, MYSQL_OPT_SSL_CA, x->ssl_ca);
    }
    for (const char *const *q = x->mode->init; mode_init && q != NULL && *q;
         q++)
        mysql_options(c->db, MYSQL_INIT_COMMAND, *q);
    /* CLIENT_FOUND_ROWS: UPDATE reports rows matched, not rows changed. */
    if (mysql_real_connect(c->db, x->host, x->user, x->password, x->db,
                           x->port, NULL, CLIENT_FOUND_ROWS) == NULL) {
        e = mysql_errno(c->db);
        snprintf(text, sizeof text, "cannot connect to %s:%u as %s: %s",
                 x->host, x->port, x->user, mysql_error(c->db));
        return my_connect_failed(c, e != 0 ? e : CR_CONNECTION_ERROR, text);
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
    if (x->ssl != MY_SSL_OFF && mysql_get_ssl_cipher(c->db) == NULL) {
        snprintf(text, sizeof text,
                 "ssl=%s: %s:%u did not negotiate TLS (the server has none?); "
                 "connection refused",
                 dlock__my_ssl_names[x->ssl], x->host, x->port);
        return my_connect_failed(c, CR_SSL_CONNECTION_ERROR, text);
    }
    return 0;
}

void dlock__my_conn_close(struct dlock__my_conn *c)
{
    for (size_t i = 0; i < MY_SLOTS; i++)
        if (c->st[i] != NULL)
            mysql_stmt_close(c->st[i]);
    if (c->db != NULL)
        mysql_close(c->db);
    memset(c->st, 0, sizeof c->st);
    memset(c->sql, 0, sizeof c->sql);
    c->db = NULL;
}

/* ---- tables and statements ----------------------------------------------- */

/* Run the mode's CREATE TABLE IF NOT EXISTS statements, and the ALTER
 * TABLE ADD COLUMNs that bring an older table up to date: a column that
 * is already there is no failure. */
unsigned dlock__my_create_tables(struct dlock__my_conn *c)
{
    for (const char *const *t = c->x->mode->ddl; *t != NULL; t++) {
        char q[1024];
        /* The templates have one %s: the table name, checked by conf.c. */
        int n = snprintf(q, sizeof q, *t, c->x->table);

        if (n < 0 || (size_t)n >= sizeof q)
            return dlock__my_note(c, CR_UNKNOWN_ERROR,
                                  "a CREATE TABLE statement is too long");
        if (mysql_real_query(c->db, q, (unsigned long)n) != 0 &&
            mysql_errno(c->db) != ER_DUP_FIELDNAME) {
            char text[sizeof c->msg];
            unsigned e = mysql_errno(c->db);
            snprintf(text, sizeof text,
                     "creating the lock tables of table=%s: %s",
                     c->x->table, mysql_error(c->db));
            return dlock__my_note(c, e != 0 ? e : CR_UNKNOWN_ERROR, text);
        }
    }
    return 0;
}

bool dlock__my_missing(unsigned e)
{
    return e == ER_NO_SUCH_TABLE || e == ER_BAD_FIELD_ERROR;
}

/* Forget the statement in slot (closing it): it is prepared again (also
 * for a mode whose text in a slot changes: for_update.c's short wait). */
void dlock__my_unprepare(struct dlock__my_conn *c, unsigned slot)
{
    if (c->st[slot] != NULL)
        mysql_stmt_close(c->st[slot]);
    c->st[slot] = NULL;
    c->sql[slot] = NULL;
}

MYSQL_STMT *dlock__my_prepare(struct dlock__my_conn *c,
                              const struct dlock__my_stmt *q)
{
    /* A slot serves one statement of the mode; another text there would
     * be a mistake of the modes' numbering, so it is prepared anew. */
    if (c->st[q->slot] != NULL && c->sql[q->slot] != q->sql)
        dlock__my_unprepare(c, q->slot);
    for (int tries = 0;; tries++) {
        char text[2048]; /* the longest: get_lock.c's permit tries */
        MYSQL_STMT *st;
        unsigned e;
        int n;

        if (c->st[q->slot] != NULL)
            return c->st[q->slot];
        n = snprintf(text, sizeof text, q->sql, c->x->table);
        if (n < 0 || (size_t)n >= sizeof text) {
            dlock__my_note(c, CR_UNKNOWN_ERROR, "a statement is too long");
            return NULL;
        }
        if ((st = mysql_stmt_init(c->db)) == NULL) {
            dlock__my_db_note(c);
            return NULL;
        }
        if (mysql_stmt_prepare(st, text, (unsigned long)n) == 0) {
            c->st[q->slot] = st;
            c->sql[q->slot] = q->sql;
            continue;
        }
        e = dlock__my_stmt_note(c, st);
        mysql_stmt_close(st);
        if (!dlock__my_missing(e) || tries > 0 || c->no_ddl ||
            dlock__my_create_tables(c) != 0)
            return NULL;
    }
}

/* A table dropped since the statement was prepared is created again,
 * once (unless c->no_ddl). */
unsigned dlock__my_exec(struct dlock__my_conn *c,
                        const struct dlock__my_stmt *q, MYSQL_BIND *params)
{
    for (int tries = 0;; tries++) {
        MYSQL_STMT *st;
        unsigned e;

        if (c->broken)
            return c->err != 0 ? c->err : CR_SERVER_GONE_ERROR;
        if ((st = dlock__my_prepare(c, q)) == NULL)
            return c->err;
        if (params != NULL && mysql_stmt_bind_param(st, params) != 0)
            return dlock__my_stmt_note(c, st);
        if (mysql_stmt_execute(st) == 0)
            return 0;
        e = dlock__my_stmt_note(c, st);
        if (!dlock__my_missing(e) || tries > 0 || c->no_ddl)
            return e;
        dlock__my_unprepare(c, q->slot);
        if (dlock__my_create_tables(c) != 0)
            return c->err;
    }
}

my_ulonglong dlock__my_affected(struct dlock__my_conn *c,
                                const struct dlock__my_stmt *q)
{
    return mysql_stmt_affected_rows(c->st[q->slot]);
}

unsigned dlock__my_fetch(struct dlock__my_conn *c,
                         const struct dlock__my_stmt *q, MYSQL_BIND *res,
                         bool *found)
{
    MYSQL_STMT *st = c->st[q->slot];
    unsigned e = 0;
    int r = 0;

    *found = false;
    if (mysql_stmt_bind_result(st, res) != 0)
        e = dlock__my_stmt_note(c, st);
    while (e == 0 && ((r = mysql_stmt_fetch(st)) == 0 ||
                      r == MYSQL_DATA_TRUNCATED))
        *found = true;
    if (e == 0 && r == 1)
        e = dlock__my_stmt_note(c, st);
    mysql_stmt_free_result(st);
    return e;
}

unsigned dlock__my_select_i64(struct dlock__my_conn *c,
                              const struct dlock__my_stmt *q,
                              MYSQL_BIND *params, long long *v, my_flag *null,
                              bool *found)
{
    MYSQL_BIND r[1];
    unsigned e;

    dlock__my_res_i64(&r[0], v, null);
    *found = false;
    if ((e = dlock__my_exec(c, q, params)) == 0)
        e = dlock__my_fetch(c, q, r, found);
    return e;
}

/* ---- bindings ------------------------------------------------------------ */

static void my_bind_bytes(MYSQL_BIND *b, enum enum_field_types type,
                          const void *p, size_t len)
{
    memset(b, 0, sizeof *b);
    b->buffer_type = type;
    b->buffer = (void *)(uintptr_t)p;
    b->buffer_length = (unsigned long)len;
}

void dlock__my_bind_blob(MYSQL_BIND *b, const void *p, size_t len)
{
    my_bind_bytes(b, MYSQL_TYPE_BLOB, p, len);
}

void dlock__my_bind_text(MYSQL_BIND *b, const char *p, size_t len)
{
    my_bind_bytes(b, MYSQL_TYPE_STRING, p, len);
}

void dlock__my_bind_i64(MYSQL_BIND *b, long long *v)
{
    my_bind_bytes(b, MYSQL_TYPE_LONGLONG, v, sizeof *v);
}

void dlock__my_bind_f64(MYSQL_BIND *b, double *v)
{
    my_bind_bytes(b, MYSQL_TYPE_DOUBLE, v, sizeof *v);
}

void dlock__my_res_i64(MYSQL_BIND *b, long long *v, my_flag *is_null)
{
    my_bind_bytes(b, MYSQL_TYPE_LONGLONG, v, sizeof *v);
    b->is_null = is_null;
    *v = 0;
    *is_null = 1;
}

void dlock__my_res_bytes(MYSQL_BIND *b, void *buf, size_t cap,
                         unsigned long *len, my_flag *is_null)
{
    my_bind_bytes(b, MYSQL_TYPE_STRING, buf, cap);
    b->length = len;
    b->is_null = is_null;
    *len = 0;
    *is_null = 1;
}

/* ---- reporting on a session ---------------------------------------------- */

int dlock__my_fail(struct dlock__my_session *ms, struct dlock__my_conn *c,
                   const char *what)
{
    return dlock_session_error(&ms->base, dlock__my_code(c->err),
                               "%s: %s (%u)", what, c->msg, c->err);
}

int dlock__my_broken(struct dlock__my_session *ms)
{
    return dlock_session_error(&ms->base, DLOCK_ECONNECT,
                               "connection broken: %s", ms->conn.msg);
}
