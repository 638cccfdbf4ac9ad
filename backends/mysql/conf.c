/*
 * conf.c: the mysql:// URI read into the per-client context (struct
 * dlock__my_ctx, my.h) once, when a client opens, and freed when it
 * closes. Every parameter is checked here, with a message naming it; the
 * password is kept for connecting and never written anywhere.
 *
 *   mysql://user[:password]@host[:port]/database
 *         [?table=NAME&ssl=off|require|verify&ssl_ca=FILE
 *          &mode=…&namespace=…&lease=…&timeout=…]
 *
 * (mode=, namespace=, lease= and timeout= are core's: core picks the mode
 * and hands it over; the others come as fields of struct dlock_uri.)
 * Connecting is conn.c's; what each mode needs of the context beyond this
 * (its tables, its first statements) is in its struct dlock__my_mode.
 *
 * Divisions: checks; the context.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "my.h"

#define MY_DEFAULT_PORT 3306
#define MY_DEFAULT_TABLE "dlock_locks"
#define MY_DB_MAX 64

const char *const dlock__my_ssl_names[] = {"off", "require", "verify", NULL};

/* ---- checks -------------------------------------------------------------- */

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

/* ---- the context --------------------------------------------------------- */

static char *my_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void dlock__my_ctx_free(struct dlock__my_ctx *x)
{
    if (x == NULL)
        return;
    if (x->mode->ctx_close != NULL)
        x->mode->ctx_close(x);
    pthread_mutex_destroy(&x->mu);
    free(x->host);
    free(x->user);
    free(x->password);
    free(x->db);
    free(x->ssl_ca);
    free(x->ns);
    free(x);
}

int dlock__my_ctx_new(struct dlock__my_ctx **out, const struct dlock_uri *uri,
                      const struct dlock__my_mode *m, char *err,
                      size_t errlen)
{
    struct dlock__my_ctx *x;
    const char *table, *ssl_ca, *db;
    char hostname[256];
    int ssl, rc;

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
    if ((rc = dlock_uri_choice(uri, "ssl", dlock__my_ssl_names, MY_SSL_OFF,
                               &ssl, err, errlen)) != DLOCK_OK)
        return rc;
    table = dlock_uri_param(uri, "table");
    if (table == NULL)
        table = MY_DEFAULT_TABLE;
    if ((rc = my_check_table(table, err, errlen)) != DLOCK_OK)
        return rc;
    ssl_ca = dlock_uri_param(uri, "ssl_ca");
    if (ssl_ca != NULL && (ssl != MY_SSL_VERIFY || ssl_ca[0] == '\0'))
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
    x->mode = m;
    x->ssl = (enum my_ssl)ssl;
    x->port = uri->hosts[0].port != 0 ? uri->hosts[0].port : MY_DEFAULT_PORT;
    /* Connector/C counts timeouts in whole seconds. */
    x->io_s = (unsigned int)(((uint64_t)uri->timeout_ms + 999) / 1000);
    if (x->io_s == 0)
        x->io_s = 1;
    x->io_ms = (int64_t)x->io_s * 1000;
    x->lease_ms = uri->lease_ms;
    /* get_lock.c: a permit waiter's wait on one slot. */
    x->slice_ms = uri->retry_max_ms != 0 ? uri->retry_max_ms : MY_SLICE_MS;
    /* Tests only: the counters' path of servers without sequences. */
    {
        const char *f = getenv("DLOCK_MYSQL_FENCE");
        x->fence_counters = f != NULL && strcmp(f, "counter") == 0;
    }
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
        (ssl_ca != NULL && x->ssl_ca == NULL)) {
        dlock__my_ctx_free(x);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    *out = x;
    return DLOCK_OK;
}
