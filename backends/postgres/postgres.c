/*
 * postgres.c: the postgres:// backend (alias postgresql://), over libpq:
 * its table, the client context and the sessions' life. Four modes, picked
 * by mode= (core picks; advisory is the default):
 *
 *   advisory       session advisory locks on a 64-bit key, queued by the
 *                  server, freed when the connection ends (advisory.c)
 *   advisory_xact  pg_advisory_xact_lock in a transaction held open for
 *                  the lock's life: works behind transaction-pooling
 *                  proxies (tx.c)
 *   for_update     a lock row held by an open transaction's SELECT ... FOR
 *                  UPDATE (tx.c)
 *   lease          a lease row with an expiry by the server's clock;
 *                  release NOTIFYs waiters, who LISTEN (lease.c, listen.c)
 *
 * Names never reach SQL text: each call binds them as parameters, and keys
 * are SHA-256(SHA-256(namespace) || SHA-256(name)) (the full 32 bytes for
 * rows, the first 8 for advisory keys and NOTIFY channels). The table name
 * is the one identifier we print into SQL, validated and quoted (conf.c).
 *
 * Everything a mode does is in its mode object; this file only opens and
 * closes: the client context (the parsed URI and the lease listener) and
 * sessions (one connection each, conn.c). pg.h lists every file.
 */
#include <stdlib.h>

#include "pg.h"

static const char *const pg_params[] = {
    "table",
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

static const struct dlock_mode *const pg_modes[] = {
    &dlock__pg_mode_advisory.pub,
    &dlock__pg_mode_advisory_xact.pub,
    &dlock__pg_mode_for_update.pub,
    &dlock__pg_mode_lease.pub,
    NULL,
};

static int pg_ctx_open(void **out, const struct dlock_uri *uri,
                       const struct dlock_mode *mode, char *err,
                       size_t errlen)
{
    const struct pg_mode *m = NULL;
    struct pg_ctx *x;
    int rc;

    /* Core hands back one of pg_modes; each is the first member of its
     * struct pg_mode. */
    for (size_t i = 0; pg_modes[i] != NULL; i++)
        if (pg_modes[i] == mode)
            m = (const struct pg_mode *)mode;
    if (m == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "mode: not a mode of postgres");
    x = calloc(1, sizeof *x);
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    if ((rc = dlock__pg_conf_init(&x->cf, uri, m, err, errlen)) != DLOCK_OK) {
        free(x);
        return rc;
    }
    dlock__pg_listen_init(&x->ln, &x->cf);
    *out = x;
    return DLOCK_OK;
}

static void pg_ctx_close(void *ctx)
{
    struct pg_ctx *x = ctx;

    dlock__pg_listen_stop(&x->ln);
    dlock__pg_conf_free(&x->cf);
    free(x);
}

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
    if ((rc = dlock__pg_connect(s, err, errlen)) != DLOCK_OK) {
        free(s);
        return rc;
    }
    *out = &s->base;
    return DLOCK_OK;
}

static void pg_close(struct dlock_session *ds)
{
    struct pg_session *s = (struct pg_session *)ds;

    dlock__pg_drop(s);
    free(s);
}

const struct dlock_backend dlock__backend_postgres = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "postgres",
    .aliases = pg_aliases,
    .params = pg_params,
    .summary = "PostgreSQL (libpq): advisory (default), advisory_xact, "
               "for_update and lease modes",
    .modes = pg_modes,
    .ctx_open = pg_ctx_open,
    .ctx_close = pg_ctx_close,
    .open = pg_open,
    .close = pg_close,
};
