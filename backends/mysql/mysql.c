/*
 * mysql.c: the mysql:// backend (alias mariadb://), three ways of making a
 * lock out of a MySQL or MariaDB server, over MariaDB Connector/C. This
 * file holds the backend's table, its list of modes, and the entry points
 * every mode shares; each mode's methods, statements and tables are in its
 * own file, and my.h lists the files and what each holds.
 *
 *   mysql://user[:password]@host[:port]/database
 *         [?mode=insert|for_update|get_lock&table=NAME&ssl=off|require|verify
 *          &ssl_ca=FILE&namespace=…&lease=…&timeout=…]
 *
 * The modes (core picks one per client from mode=, insert by default):
 *   insert      (insert.c) a unique-key row per held lock, with a lease on
 *               the server's clock; survives reconnects; waiters poll;
 *               a permit is a row of a slot's key.
 *   for_update  (for_update.c) an open transaction holding SELECT … FOR
 *               UPDATE on the name's row; a connection per held lock.
 *   get_lock    (get_lock.c) GET_LOCK/RELEASE_LOCK; many per connection;
 *               a semaphore's permits as N of them (slots).
 * Every mode fences, through a counter row per name (fence.c). Names reach
 * the server as SHA-256 keys, or as GET_LOCK names (keys.c), and only ever
 * as bound parameters; the only text spliced into SQL is the table name,
 * checked against [A-Za-z_][A-Za-z0-9_]* (conf.c) and quoted. Tables are
 * created on first use: a statement that fails to prepare with
 * ER_NO_SUCH_TABLE runs the mode's CREATE TABLE IF NOT EXISTS and tries
 * again (conn.c), so a connection to existing tables pays nothing for it.
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
 * Divisions: library and threads; the per-client context; sessions; the
 * table.
 */
#include <stdlib.h>

#include "my.h"

/* The modes, the default first. */
static const struct dlock__my_mode *const my_modes_own[] = {
    &dlock__my_mode_insert, &dlock__my_mode_for_update,
    &dlock__my_mode_get_lock, NULL};

/* ---- library and threads ------------------------------------------------- */

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

/* ---- the per-client context ---------------------------------------------- */

static int my_ctx_open(void **out, const struct dlock_uri *uri,
                       const struct dlock_mode *mode, char *err,
                       size_t errlen)
{
    struct dlock__my_ctx *x = NULL;
    int rc;

    *out = NULL;
    for (size_t i = 0; my_modes_own[i] != NULL; i++)
        if (&my_modes_own[i]->base == mode) {
            rc = dlock__my_ctx_new(&x, uri, my_modes_own[i], err, errlen);
            *out = x;
            return rc;
        }
    return dlock_errorf(err, errlen, DLOCK_EINVAL,
                        "mode: %s is not a mode of this backend's table",
                        mode != NULL && mode->name != NULL ? mode->name
                                                           : "(none)");
}

static void my_ctx_close(void *ctx)
{
    dlock__my_ctx_free(ctx);
}

/* ---- sessions ------------------------------------------------------------ */

static int my_open(struct dlock_session **out, const struct dlock_uri *uri,
                   void *ctx, char *err, size_t errlen)
{
    struct dlock__my_ctx *x = ctx;
    struct dlock__my_session *ms;
    unsigned e;

    (void)uri; /* read once, by dlock__my_ctx_new() */
    ms = calloc(1, sizeof *ms);
    if (ms == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    if ((e = dlock__my_connect(&ms->conn, x, true)) != 0) {
        int rc = dlock_errorf(err, errlen, dlock__my_connect_code(e),
                              "%s (%u)%s", ms->conn.msg, e,
                              dlock__my_connect_code(e) == DLOCK_EAUTH
                                  ? " (check the URI's user and password)"
                                  : "");
        free(ms);
        return rc;
    }
    ms->x = x;
    ms->lock_wait_s = 0;
    /* Connection-bound modes: the server ends a silent session before
     * core stops believing its locks [B-BOUND-1]. */
    if ((x->mode->base.caps & DLOCK_CAP_SERVER_TIMEOUT) &&
        (e = dlock__my_cover_lease(ms, x->lease_ms, false)) != 0) {
        int rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                              "set wait_timeout: %s (%u)", ms->conn.msg, e);
        dlock__my_conn_close(&ms->conn);
        free(ms);
        return rc;
    }
    /* Connection-bound modes: the locks end with this socket; insert: a
     * dropped connection is noticed before the next call [B-WATCH-1]. */
    dlock_session_watch(&ms->base, (int)mysql_get_socket(ms->conn.db));
    *out = &ms->base;
    return DLOCK_OK;
}

static void my_close(struct dlock_session *s)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;

    dlock_session_watch(s, -1);
    dlock__my_watch_free(ms->watch, true);
    dlock__my_conn_close(&ms->conn);
    free(ms);
}

/* ---- the table ----------------------------------------------------------- */

static const struct dlock_mode *const my_modes[] = {
    &dlock__my_mode_insert.base, &dlock__my_mode_for_update.base,
    &dlock__my_mode_get_lock.base, NULL};

static const char *const my_aliases[] = {"mariadb", NULL};

static const char *const my_params[] = {"table", "ssl", "ssl_ca", NULL};

const struct dlock_backend dlock__backend_mysql = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "mysql",
    .aliases = my_aliases,
    .params = my_params,
    .summary = "MySQL/MariaDB: unique-key rows with a lease (insert), "
               "SELECT … FOR UPDATE (for_update), GET_LOCK (get_lock)",
    .modes = my_modes,
    .global_init = my_global_init,
    .thread_init = my_thread_init,
    .thread_end = my_thread_end,
    .ctx_open = my_ctx_open,
    .ctx_close = my_ctx_close,
    .open = my_open,
    .close = my_close,
};
