/*
 * conf.c: the postgres backend's configuration, parsed once per client
 * (and once per floor run): the URI turned into libpq's keyword and value
 * arrays, the table name checked, the chosen mode's SQL printed with that
 * name, and the keys and texts every file computes from a name.
 *
 * It leaves connecting to conn.c and the SQL itself to the modes' files;
 * it calls nothing of the backend.
 *
 * Divisions: keys and text; the mode's SQL; the URI.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg.h"

/* ---- keys and text ----------------------------------------------------- */

/* SHA-256(SHA-256(namespace) || SHA-256(name)): two fixed-size steps, so
 * neither a long name nor the namespace needs a buffer. */
void dlock__pg_digest(const struct pg_conf *cf, const char *name, size_t len,
                      uint8_t out[32])
{
    uint8_t both[64];

    memcpy(both, cf->ns_digest, 32);
    dlock_sha256(both + 32, name, len);
    dlock_sha256(out, both, sizeof both);
}

uint64_t dlock__pg_key64(const uint8_t d[32])
{
    uint64_t k = 0;
    for (int i = 0; i < 8; i++)
        k = (k << 8) | d[i];
    return k;
}

void dlock__pg_key_text(char out[24], uint64_t k)
{
    int64_t v = k <= (uint64_t)INT64_MAX ? (int64_t)k
                                         : -(int64_t)(~k) - 1;
    snprintf(out, 24, "%" PRId64, v);
}

void dlock__pg_hex(char out[65], const uint8_t d[32])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[64] = '\0';
}

void dlock__pg_name_key(const struct pg_conf *cf, const char *name,
                        size_t len, char out[65])
{
    uint8_t d[32];

    dlock__pg_digest(cf, name, len, d);
    dlock__pg_digest_key(cf, d, out);
}

void dlock__pg_digest_key(const struct pg_conf *cf, const uint8_t d[32],
                          char out[65])
{
    if (cf->mode->row_key)
        dlock__pg_hex(out, d);
    else
        dlock__pg_key_text(out, dlock__pg_key64(d));
}

void dlock__pg_channel_name(char out[24], uint64_t key)
{
    snprintf(out, 24, "dlock_%016" PRIx64, key);
}

void dlock__pg_oneline(char *dst, size_t cap, const char *src)
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

int64_t dlock__pg_deadline(const struct pg_conf *cf)
{
    return cf->timeout_ms ? dlock_now_ms() + cf->timeout_ms : INT64_MAX;
}

uint32_t dlock__pg_first_slot(uint32_t n)
{
    static atomic_uint_fast64_t calls;
    uint64_t h = atomic_fetch_add(&calls, 1) * 0x9e3779b97f4a7c15u ^
                 (uint64_t)dlock_now_ms() ^ ((uint64_t)getpid() << 40);

    h ^= h >> 31; /* splitmix64's finaliser */
    h *= 0x7fb5d329728ea185u;
    h ^= h >> 27;
    return (uint32_t)(h % n);
}

/* ---- the mode's SQL ---------------------------------------------------- */

/* A template with every "{t}" replaced by the quoted table name; NULL when
 * out of memory. The name was validated ([A-Za-z0-9_]), so quoting it is
 * enough: it is the one identifier we print into SQL. */
static char *pg_sql_print(const char *tmpl, const char *table)
{
    size_t n = 0, tlen = strlen(table);
    const char *p;
    char *out, *o;

    for (p = tmpl; (p = strstr(p, "{t}")) != NULL; p += 3)
        n++;
    out = o = malloc(strlen(tmpl) + n * (tlen + 2) + 1);
    if (out == NULL)
        return NULL;
    for (p = tmpl; *p != '\0';) {
        if (strncmp(p, "{t}", 3) == 0) {
            *o++ = '"';
            memcpy(o, table, tlen);
            o += tlen;
            *o++ = '"';
            p += 3;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

static void pg_sql_free(struct pg_conf *cf)
{
    for (size_t i = 0; i < PG_SQL_MAX; i++)
        free(cf->sql[i]);
    for (size_t i = 0; i < PG_DDL_MAX; i++)
        free(cf->ddl[i]);
    free(cf->inspect);
}

static int pg_sql_build(struct pg_conf *cf)
{
    const struct pg_mode *m = cf->mode;
    bool bad = false;

    for (size_t i = 0; i < PG_SQL_MAX; i++)
        if (m->sql[i] != NULL)
            bad |= (cf->sql[i] = pg_sql_print(m->sql[i], cf->table)) == NULL;
    for (size_t i = 0; i < PG_DDL_MAX && m->ddl[i] != NULL; i++)
        bad |= (cf->ddl[i] = pg_sql_print(m->ddl[i], cf->table)) == NULL;
    if (m->inspect != NULL)
        bad |= (cf->inspect = pg_sql_print(m->inspect, cf->table)) == NULL;
    return bad ? DLOCK_ENOMEM : DLOCK_OK;
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

void dlock__pg_conf_free(struct pg_conf *cf)
{
    if (cf->own != NULL)
        for (size_t i = 0; i < cf->nown; i++)
            free(cf->own[i]);
    free(cf->own);
    pg_sql_free(cf);
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

int dlock__pg_conf_init(struct pg_conf *cf, const struct dlock_uri *u,
                        const struct pg_mode *mode, char *err, size_t errlen)
{
    size_t nkw = 0;
    char num[32];
    const char *v;
    PQconninfoOption *known;
    int rc;
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

    cf->mode = mode;
    cf->timeout_ms = u->timeout_ms;
    cf->lease_ms = u->lease_ms;
    snprintf(cf->ns, sizeof cf->ns, "%s", u->ns);
    dlock_sha256(cf->ns_digest, u->ns, strlen(u->ns));

    v = dlock_uri_param(u, "table");
    if (v != NULL && mode->table == NULL) {
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "table: mode=%s keeps no table (%s)",
                          mode->pub.name, mode->no_table);
        goto fail;
    }
    if (v != NULL && !pg_ident_ok(v)) {
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "table: expected 1 to 63 characters of "
                          "[A-Za-z0-9_], not starting with a digit");
        goto fail;
    }
    snprintf(cf->table, sizeof cf->table, "%s",
             v != NULL             ? v
             : mode->table != NULL ? mode->table
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
        if (strcmp(k, "table") == 0)
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
    dlock__pg_conf_free(cf);
    return rc;
}
