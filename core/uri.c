/*
 * uri.c: the backend URI parser.
 *
 * It turns text of the form
 *
 *     scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v&...]
 *
 * into one struct dlock_uri held in a single allocation, consumes the
 * parameters every backend shares (lease, timeout, retry_min, retry_max,
 * namespace, mode) and leaves the rest to the backend, which reads them with
 * dlock_uri_param() and friends and has core reject the ones it does not
 * know with dlock__uri_check_params(). Finding a backend for the scheme,
 * connecting and everything after belong to client.c and the backends.
 *
 * Two promises shape the code. First, the parser reads only text[0..len),
 * so the text need not be NUL-terminated and a NUL inside is an error.
 * Second, no error message ever holds a byte of the password: every piece of
 * input that enters a message goes through uri_quote(), which shows the
 * bytes of the password region as *** (see uri_find_secret() for how that
 * region is chosen when the URI is malformed).
 *
 * Decisions a reader may look for:
 * - Durations take a unit (ms, s, m, h) and may have decimals in any unit,
 *   but the result must be a whole number of milliseconds: "1.5s" is 1500ms,
 *   "0.0005s" is an error rather than a silent round to 0 or 1. A bare "0" is
 *   allowed; any other bare number is an error asking for a unit.
 * - lease and timeout must be at least 1ms; retry_min and retry_max may be 0,
 *   which means "the backend's or core's default".
 * - Raw bytes 0x80..0xff are accepted in the user info, path and query (so
 *   UTF-8 namespaces can be written as they are) but not in the scheme or a
 *   host name, which must be ASCII or percent-encoded.
 * - A raw '@' inside the user info is an error (write %40); the last '@'
 *   before the path still ends the user info, so that such a mistake is
 *   reported as a user info error, never with the password quoted as a host.
 * - An empty password ("user:@host") is kept as written in the redacted
 *   text; any other password becomes ***.
 * - A bare '?' means no parameters, but an empty piece ("a=1&&b=2", a
 *   trailing '&') is an error, as is an empty key. Keys are case-sensitive;
 *   values read by dlock_uri_bool() and dlock_uri_choice() are not (ASCII).
 * - A host made only of digits and dots must be a valid IPv4 address, and
 *   a host name may not exceed 255 bytes once decoded.
 *
 * The parser's text helpers (character classes, quoting, durations,
 * percent-decoding) are in uri_text.c, the parameter checks and the typed
 * readers of backend.h in uri_params.c; uri_text.h joins the three.
 *
 * Divisions, in order: splitting; hosts; the query and the common
 * parameters; assembly.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uri_text.h"


/* ------------------------------------------------------------------------ */
/* The parser                                                               */
/* ------------------------------------------------------------------------ */

/* Offsets into the text of each part, found before anything is allocated. */
struct uri_split {
    size_t scheme_end; /* text[0..scheme_end) is the scheme */
    size_t auth;       /* the authority: text[auth..auth_end) */
    size_t auth_end;
    const char *at;    /* the '@' ending the user info, or NULL */
    const char *colon; /* the ':' in the user info, or NULL */
    size_t hosts;      /* the host list: text[hosts..auth_end) */
    size_t path_end;   /* the path: text[auth_end..path_end) */
    size_t query_end;  /* the query: text[path_end + 1..query_end) */
    size_t nhosts_max; /* commas in the host list + 1 */
    size_t nparams_max; /* '&' in the query + 1 */
};

/*
 * Choose the bytes no message may show. With a user info the password is
 * text[colon + 1..at). Without one, a later '@' hints at a password holding
 * a raw '/', '?' or '#', which ended the authority early
 * ("redis://u:pa/ss@h"): then everything from the authority's first ':' to
 * the last '@' of the text is masked. That may hide harmless parts of a
 * message about such a URI, never a part of a password. (A password of
 * digits followed by a raw '/' still parses, as a port and a path: RFC 3986
 * reads it so, and nothing tells it from a real port.)
 */
static void uri_find_secret(struct uri_ctx *c, const struct uri_split *sp)
{
    const char *t = c->text, *colon, *last_at;

    if (sp->at != NULL) {
        if (sp->colon != NULL) {
            c->mask.lo = sp->colon + 1;
            c->mask.hi = sp->at;
        }
        return;
    }
    last_at = dlock__uri_find_last(t + sp->auth_end, c->len - sp->auth_end, '@');
    if (last_at == NULL || sp->auth == sp->auth_end || t[sp->auth] == '[')
        return;
    colon = dlock__uri_find(t + sp->auth, sp->auth_end - sp->auth, ':');
    if (colon != NULL) {
        c->mask.lo = colon + 1;
        c->mask.hi = last_at;
    }
}

/* Find the scheme and split the rest into authority, path and query. */
static int uri_split(struct uri_ctx *c, struct uri_split *sp)
{
    const char *t = c->text;
    size_t len = c->len, i = 0, j;
    char q[URI_QUOTE_BUF];

    /* The scheme is quoted without masking: no password comes before
     * "://", and only scheme characters are ever shown. */
    while (i < len && dlock__uri_is_scheme_char((unsigned char)t[i]))
        i++;
    if (len == 0)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: the URI is empty (expected e.g. "
                        "redis://host or file:///path)");
    if (i == 0 && t[0] == ':')
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: missing before ':' (expected a name such "
                        "as redis, e.g. redis://host)");
    if (i == 0)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: %s cannot start a scheme (expected a "
                        "letter, e.g. redis://host)",
                        dlock__uri_quote(q, t, 1, NULL));
    if (!dlock__uri_is_alpha((unsigned char)t[0]))
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: %s does not start with a letter (expected "
                        "e.g. redis://host)",
                        dlock__uri_quote(q, t, i, NULL));
    if (len - i < 3 || memcmp(t + i, "://", 3) != 0)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: %s is not followed by \"://\" (expected "
                        "scheme://host, e.g. redis://localhost)",
                        dlock__uri_quote(q, t, i, NULL));
    sp->scheme_end = i;
    sp->auth = i + 3;

    /* The authority ends at the first '/', '?' or '#'. */
    for (j = sp->auth; j < len; j++)
        if (t[j] == '/' || t[j] == '?' || t[j] == '#')
            break;
    sp->auth_end = j;
    sp->at = dlock__uri_find_last(t + sp->auth, j - sp->auth, '@');
    sp->colon = NULL;
    if (sp->at != NULL)
        sp->colon = dlock__uri_find(t + sp->auth, (size_t)(sp->at - t) - sp->auth,
                             ':');
    sp->hosts = sp->at != NULL ? (size_t)(sp->at - t) + 1 : sp->auth;

    /* The path runs to '?' or '#', the query to '#'. */
    while (j < len && t[j] != '?' && t[j] != '#')
        j++;
    sp->path_end = j;
    if (j < len && t[j] == '?') {
        j++;
        while (j < len && t[j] != '#')
            j++;
    }
    sp->query_end = j;

    sp->nhosts_max = 1;
    for (j = sp->hosts; j < sp->auth_end; j++)
        sp->nhosts_max += t[j] == ',';
    sp->nparams_max = 1;
    for (j = sp->path_end; j < sp->query_end; j++)
        sp->nparams_max += t[j] == '&';
    uri_find_secret(c, sp);
    return DLOCK_OK;
}

/* Parse a port: 1 to 65535 in decimal digits. item is for messages. */
static int uri_port(struct uri_ctx *c, const char *p, size_t n,
                    const char *item, size_t item_n, uint16_t *out)
{
    char q[URI_QUOTE_BUF];
    unsigned long v = 0;

    if (n == 0)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "port: empty after ':' in %s (expected a number "
                        "from 1 to 65535)",
                        URI_Q(q, c, item, item_n));
    for (size_t i = 0; i < n; i++) {
        if (!dlock__uri_is_digit((unsigned char)p[i]) && dlock__uri_masked(c, p))
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "port: %s is not a number (expected 1 to 65535; "
                            "if this is a password, percent-encode its "
                            "'/', '?' and '#')",
                            URI_Q(q, c, p, n));
        if (!dlock__uri_is_digit((unsigned char)p[i]))
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "port: %s is not a number (expected 1 to 65535)",
                            URI_Q(q, c, p, n));
        if (v <= 65535)
            v = v * 10 + (unsigned long)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "port: %s is out of range (expected 1 to 65535)",
                        URI_Q(q, c, p, n));
    *out = (uint16_t)v;
    return DLOCK_OK;
}

/* Parse one bracketed IPv6 entry p[0..n), p[0] being '['. */
static int uri_host_ipv6(struct uri_ctx *c, const char *p, size_t n,
                         struct dlock_uri_host *h)
{
    char q[URI_QUOTE_BUF], q2[URI_QUOTE_BUF], addr[INET6_ADDRSTRLEN];
    const char *rb = dlock__uri_find(p, n, ']');
    size_t alen;
    int ok;
    struct in6_addr bin;

    if (rb == NULL)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s has no closing ']' (expected an IPv6 "
                        "address in brackets, e.g. [::1]:6379)",
                        URI_Q(q, c, p, n));
    /* Only hex digits, ':' and '.' may reach inet_pton(); anything else,
     * or too long a text, cannot be an address. */
    alen = (size_t)(rb - p) - 1;
    ok = alen < sizeof addr;
    for (size_t i = 1; ok && i <= alen; i++) {
        unsigned char ch = (unsigned char)p[i];
        ok = dlock__uri_hex_value(ch) >= 0 || ch == ':' || ch == '.';
    }
    if (ok) {
        memcpy(addr, p + 1, alen);
        addr[alen] = '\0';
        ok = inet_pton(AF_INET6, addr, &bin) == 1;
    }
    if (!ok)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s is not an IPv6 address (expected e.g. "
                        "[::1] or [2001:db8::7]; zone ids are not supported)",
                        URI_Q(q, c, p, (size_t)(rb - p) + 1));
    h->ipv6 = 1;
    h->host = dlock__uri_copy(c, p + 1, alen);
    if (h->host == NULL)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_ERROR,
                        "host: internal error: string area too small");
    if (rb + 1 == p + n)
        return DLOCK_OK;
    if (rb[1] != ':')
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s after %s (expected ':' and a port, ',' or "
                        "the end of the host list)",
                        URI_Q(q, c, rb + 1, (size_t)(p + n - rb) - 1),
                        URI_Q(q2, c, p, (size_t)(rb - p) + 1));
    return uri_port(c, rb + 2, (size_t)(p + n - rb) - 2, p, n, &h->port);
}

/* Parse one entry p[0..n) of the host list: name or address, then port. */
static int uri_host(struct uri_ctx *c, const char *p, size_t n,
                    struct dlock_uri_host *h)
{
    char q[URI_QUOTE_BUF], q2[URI_QUOTE_BUF];
    const char *colon, *name;
    size_t nlen, i;
    int dotted = 1, rc;
    struct in_addr bin;

    h->host = dlock__uri_empty;
    h->port = 0;
    h->ipv6 = 0;
    if (p[0] == '[')
        return uri_host_ipv6(c, p, n, h);
    colon = dlock__uri_find(p, n, ':');
    nlen = colon != NULL ? (size_t)(colon - p) : n;
    if (colon != NULL && dlock__uri_find(colon + 1, n - nlen - 1, ':') != NULL)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s has more than one ':' (expected host:port; "
                        "an IPv6 address goes in brackets, e.g. [::1]:6379)",
                        URI_Q(q, c, p, n));
    if (nlen == 0)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s has no name before ':' (expected "
                        "host:port, e.g. localhost:6379)",
                        URI_Q(q, c, p, n));
    for (i = 0; i < nlen; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!dlock__uri_is_host_char(ch))
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "host: %s contains %s (expected letters, digits, "
                            "'-', '.', '_' or %%XX escapes)",
                            URI_Q(q, c, p, nlen), URI_Q(q2, c, p + i, 1));
        if (!dlock__uri_is_digit(ch) && ch != '.')
            dotted = 0;
    }
    rc = dlock__uri_decode(c, "host", p, nlen, &name);
    if (rc != DLOCK_OK)
        return rc;
    if (strlen(name) > URI_HOST_MAX)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s is longer than %d bytes (expected a DNS "
                        "name or an address)",
                        URI_Q(q, c, p, nlen), URI_HOST_MAX);
    /* A name of digits and dots can only be meant as an IPv4 address. */
    if (dotted && inet_pton(AF_INET, name, &bin) != 1)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s is not an IPv4 address (expected four "
                        "numbers from 0 to 255, e.g. 127.0.0.1)",
                        URI_Q(q, c, p, nlen));
    h->host = name;
    if (colon == NULL)
        return DLOCK_OK;
    return uri_port(c, colon + 1, n - nlen - 1, p, n, &h->port);
}

/* Parse the comma-separated host list text[from..to). */
static int uri_hosts(struct uri_ctx *c, size_t from, size_t to,
                     struct dlock_uri_host *hosts, size_t *nhosts)
{
    char q[URI_QUOTE_BUF];
    const char *p = c->text + from, *end = c->text + to;

    *nhosts = 0;
    for (;;) {
        const char *comma = dlock__uri_find(p, (size_t)(end - p), ',');
        const char *stop = comma != NULL ? comma : end;
        int rc;

        if (stop == p)
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "host: empty entry in the host list %s "
                            "(expected host[:port] before and after each "
                            "',')",
                            URI_Q(q, c, c->text + from, to - from));
        rc = uri_host(c, p, (size_t)(stop - p), &hosts[*nhosts]);
        if (rc != DLOCK_OK)
            return rc;
        (*nhosts)++;
        if (comma == NULL)
            return DLOCK_OK;
        p = comma + 1;
    }
}

/* The common parameters, as the query holds them, until they are checked. */
enum {
    URI_LEASE,
    URI_TIMEOUT,
    URI_RETRY_MIN,
    URI_RETRY_MAX,
    URI_NS,
    URI_MODE,
    URI_NCOMMON
};

struct uri_common {
    const char *raw[URI_NCOMMON]; /* the raw value, for messages; NULL if
                                     not given */
    size_t raw_len[URI_NCOMMON];
    const char *value[URI_NCOMMON];
};

static const char *const uri_common_names[URI_NCOMMON] = {
    "lease", "timeout", "retry_min", "retry_max", "namespace", "mode",
};

/*
 * Parse the query text[from..to) into params (the backend's own) and com
 * (the common ones). Each key may appear once.
 */
static int uri_query(struct uri_ctx *c, size_t from, size_t to,
                     struct dlock_uri_param *params, size_t *nparams,
                     struct uri_common *com)
{
    char q[URI_QUOTE_BUF], q2[URI_QUOTE_BUF];
    const char *p = c->text + from, *end = c->text + to;

    *nparams = 0;
    if (p == end)
        return DLOCK_OK;
    for (;;) {
        const char *amp = dlock__uri_find(p, (size_t)(end - p), '&');
        const char *stop = amp != NULL ? amp : end;
        const char *eq = dlock__uri_find(p, (size_t)(stop - p), '=');
        const char *kend = eq != NULL ? eq : stop;
        const char *key, *value = dlock__uri_empty;
        int rc, dup = 0, common = -1;

        if (stop == p)
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "query: empty parameter in %s (expected "
                            "key=value pairs joined by '&')",
                            URI_Q(q, c, c->text + from, to - from));
        if (kend == p)
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "query: %s has an empty key (expected key=value)",
                            URI_Q(q, c, p, (size_t)(stop - p)));
        rc = dlock__uri_decode_in(c, "query", p, (size_t)(kend - p), p,
                           (size_t)(stop - p), &key);
        if (rc == DLOCK_OK && eq != NULL)
            rc = dlock__uri_decode_in(c, "query", eq + 1, (size_t)(stop - eq) - 1,
                               p, (size_t)(stop - p), &value);
        if (rc != DLOCK_OK)
            return rc;
        for (int k = 0; k < URI_NCOMMON; k++)
            if (strcmp(key, uri_common_names[k]) == 0)
                common = k;
        if (common >= 0) {
            dup = com->value[common] != NULL;
        } else {
            for (size_t k = 0; k < *nparams && !dup; k++)
                dup = strcmp(params[k].key, key) == 0;
        }
        if (dup)
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "query: parameter %s is repeated (expected each "
                            "parameter once), at %s",
                            URI_Q(q, c, p, (size_t)(kend - p)),
                            URI_Q(q2, c, p, (size_t)(stop - p)));
        if (common >= 0) {
            com->value[common] = value;
            com->raw[common] = eq != NULL ? eq + 1 : stop;
            com->raw_len[common] = eq != NULL ? (size_t)(stop - eq) - 1 : 0;
        } else {
            params[*nparams].key = key;
            params[*nparams].value = value;
            (*nparams)++;
        }
        if (amp == NULL)
            return DLOCK_OK;
        p = amp + 1;
    }
}

/* Read one common duration: dflt when absent, at least min when given. */
static int uri_common_duration(struct uri_ctx *c, const struct uri_common *com,
                               int which, uint32_t dflt, uint32_t min,
                               uint32_t *out)
{
    char q[URI_QUOTE_BUF];
    const char *name = uri_common_names[which];
    const char *v = com->value[which];
    enum uri_dur_result r;

    *out = dflt;
    if (v == NULL)
        return DLOCK_OK;
    URI_Q(q, c, com->raw[which], com->raw_len[which]);
    r = dlock__uri_duration(v, strlen(v), out);
    if (r != URI_DUR_OK)
        return dlock__uri_duration_error(c->err, c->errlen, name, q, r);
    if (*out < min)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "%s: %s is too short (expected at least %lums)", name,
                        q, (unsigned long)min);
    return DLOCK_OK;
}

/* Check the common parameters and store them in u. */
static int uri_commons(struct uri_ctx *c, const struct uri_common *com,
                       struct dlock_uri *u)
{
    char q[URI_QUOTE_BUF], q2[URI_QUOTE_BUF];
    int rc;

    rc = uri_common_duration(c, com, URI_LEASE, DLOCK__DEFAULT_LEASE_MS, 1,
                             &u->lease_ms);
    if (rc == DLOCK_OK)
        rc = uri_common_duration(c, com, URI_TIMEOUT,
                                 DLOCK__DEFAULT_TIMEOUT_MS, 1,
                                 &u->timeout_ms);
    if (rc == DLOCK_OK)
        rc = uri_common_duration(c, com, URI_RETRY_MIN, 0, 0,
                                 &u->retry_min_ms);
    if (rc == DLOCK_OK)
        rc = uri_common_duration(c, com, URI_RETRY_MAX, 0, 0,
                                 &u->retry_max_ms);
    if (rc != DLOCK_OK)
        return rc;
    if (com->value[URI_RETRY_MIN] != NULL &&
        com->value[URI_RETRY_MAX] != NULL &&
        u->retry_min_ms > u->retry_max_ms)
        return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "retry_min: %s is more than retry_max %s (expected "
                        "retry_min <= retry_max)",
                        URI_Q(q, c, com->raw[URI_RETRY_MIN],
                              com->raw_len[URI_RETRY_MIN]),
                        URI_Q(q2, c, com->raw[URI_RETRY_MAX],
                              com->raw_len[URI_RETRY_MAX]));
    u->ns = dlock__uri_empty;
    if (com->value[URI_NS] != NULL) {
        size_t n = strlen(com->value[URI_NS]);
        if (n > URI_NS_MAX)
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "namespace: %s is %zu bytes long (expected at "
                            "most %d)",
                            URI_Q(q, c, com->raw[URI_NS],
                                  com->raw_len[URI_NS]),
                            n, URI_NS_MAX);
        u->ns = com->value[URI_NS];
    }
    /* mode=: which of the backend's modes (registry.c checks the name). */
    u->mode = NULL;
    if (com->value[URI_MODE] != NULL) {
        if (com->value[URI_MODE][0] == '\0')
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                                   "mode: empty (expected the name of one of "
                                   "the backend's modes)");
        u->mode = com->value[URI_MODE];
    }
    return DLOCK_OK;
}

/* What core keeps of a parsed URI besides the public struct, which comes
 * first: every struct dlock_uri core hands out is one of these. */
struct uri_block {
    struct dlock_uri u;
    bool lease_given; /* lease= was written; else lease_ms is the default */
};

bool dlock__uri_lease_given(const struct dlock_uri *u)
{
    return ((const struct uri_block *)(const void *)u)->lease_given;
}

/* Round n up to a multiple of a (a power of two). */
static size_t uri_align(size_t n, size_t a)
{
    return (n + a - 1) & ~(a - 1);
}

int dlock__uri_parse(struct dlock_uri **out, const char *text, size_t len,
                     char *err, size_t errlen)
{
    struct uri_ctx c;
    struct uri_split sp;
    struct uri_common com;
    struct dlock_uri *u = NULL;
    struct dlock_uri_host *hosts;
    struct dlock_uri_param *params;
    size_t off_hosts, off_params, off_chars, nchars, i;
    char *block, *s;
    int rc;

    if (out == NULL)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "uri: no place to put the result (out is NULL)");
    *out = NULL;
    if (text == NULL && len > 0)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "uri: the text is NULL (expected a URI)");
    if (len > DLOCK__URI_MAX)
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "uri: %zu bytes is too long (expected at most %d "
                        "bytes)",
                        len, DLOCK__URI_MAX);
    memset(&c, 0, sizeof c);
    memset(&sp, 0, sizeof sp);
    memset(&com, 0, sizeof com);
    c.text = text != NULL ? text : dlock__uri_empty;
    c.len = len;
    c.err = err;
    c.errlen = errlen;
    rc = uri_split(&c, &sp);
    if (rc != DLOCK_OK)
        return rc;

    /*
     * One block holds the struct, the host and parameter arrays and every
     * string, so that dlock__uri_free() is one free(). Decoded strings are
     * never longer than their raw text and the raw parts do not overlap, so
     * len bytes plus a NUL per string (scheme, user, password, path, one per
     * host, two per parameter) bound them all; the redacted copy needs at
     * most len + 3 bytes and its NUL. The worst case, a list of one-letter
     * hosts or keys, takes about 10 bytes per byte of text: under 100 KB
     * for the longest text accepted.
     */
    off_hosts = uri_align(sizeof(struct uri_block),
                          alignof(struct dlock_uri_host));
    off_params = uri_align(off_hosts + sp.nhosts_max * sizeof *hosts,
                           alignof(struct dlock_uri_param));
    off_chars = off_params + sp.nparams_max * sizeof *params;
    nchars = len + 4 + sp.nhosts_max + 2 * sp.nparams_max + (len + 3 + 1);
    block = malloc(off_chars + nchars);
    if (block == NULL)
        return dlock__uri_fail(err, errlen, DLOCK_ENOMEM, "uri: out of memory");
    memset(block, 0, off_chars);
    u = (struct dlock_uri *)(void *)block;
    hosts = (struct dlock_uri_host *)(void *)(block + off_hosts);
    params = (struct dlock_uri_param *)(void *)(block + off_params);
    c.next = block + off_chars;
    c.end = c.next + nchars;

    /* The scheme, lower-cased; an alias stays the alias. */
    s = dlock__uri_copy(&c, text, sp.scheme_end);
    for (i = 0; i < sp.scheme_end; i++)
        s[i] = (char)dlock__uri_lower((unsigned char)s[i]);
    u->scheme = s;

    /* The user info, if any. */
    if (sp.at != NULL) {
        const char *ui = text + sp.auth;
        size_t uilen = (size_t)(sp.at - ui);
        const char *ulim = sp.colon != NULL ? sp.colon : sp.at;
        char q[URI_QUOTE_BUF];

        if (dlock__uri_find(ui, uilen, '@') != NULL) {
            rc = dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                          "userinfo: %s contains a raw '@' (expected it "
                          "percent-encoded as %%40 in the user and password)",
                          URI_Q(q, &c, ui, uilen));
            goto fail;
        }
        rc = dlock__uri_decode_in(&c, "userinfo", ui, (size_t)(ulim - ui), ui,
                           uilen, &u->user);
        if (rc == DLOCK_OK && sp.colon != NULL)
            rc = dlock__uri_decode_in(&c, "userinfo", sp.colon + 1,
                               (size_t)(sp.at - sp.colon) - 1, ui, uilen,
                               &u->password);
        if (rc != DLOCK_OK)
            goto fail;
        if (sp.hosts == sp.auth_end) {
            rc = dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                          "host: missing after the user info (expected "
                          "user@host)");
            goto fail;
        }
        /* From here on the decoded password is masked too, should it be
         * written again elsewhere in the URI. */
        c.mask.secret = u->password;
        c.mask.secret_len = u->password != NULL ? strlen(u->password) : 0;
    }

    /* The hosts; an empty authority leaves none. */
    if (sp.hosts < sp.auth_end) {
        rc = uri_hosts(&c, sp.hosts, sp.auth_end, hosts, &u->nhosts);
        if (rc != DLOCK_OK)
            goto fail;
        u->hosts = hosts;
    }

    /* The path: "" or "/...". */
    u->path = dlock__uri_empty;
    if (sp.auth_end < sp.path_end) {
        rc = dlock__uri_decode(&c, "path", text + sp.auth_end,
                        sp.path_end - sp.auth_end, &u->path);
        if (rc != DLOCK_OK)
            goto fail;
    }

    /* The query, then the fragment, which is refused. */
    if (sp.path_end < sp.query_end) {
        rc = uri_query(&c, sp.path_end + 1, sp.query_end, params, &u->nparams,
                       &com);
        if (rc != DLOCK_OK)
            goto fail;
        if (u->nparams > 0)
            u->params = params;
    }
    if (sp.query_end < len) {
        char q[URI_QUOTE_BUF];
        rc = dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                      "fragment: %s is not allowed (expected no '#'; write "
                      "%%23 for a '#' in a value)",
                      URI_Q(q, &c, text + sp.query_end, len - sp.query_end));
        goto fail;
    }
    rc = uri_commons(&c, &com, u);
    if (rc != DLOCK_OK)
        goto fail;
    ((struct uri_block *)(void *)block)->lease_given =
        com.value[URI_LEASE] != NULL;

    /* The text as written, with a non-empty password as ***. */
    if (u->password != NULL && u->password[0] != '\0') {
        size_t head = (size_t)(sp.colon + 1 - text);
        size_t tail = len - (size_t)(sp.at - text);
        s = c.next;
        memcpy(s, text, head);
        memcpy(s + head, "***", 3);
        memcpy(s + head + 3, sp.at, tail);
        s[head + 3 + tail] = '\0';
        c.next += head + 3 + tail + 1;
        u->redacted = s;
    } else {
        u->redacted = dlock__uri_copy(&c, text, len);
    }
    *out = u;
    return DLOCK_OK;

fail:
    free(block);
    return rc;
}

