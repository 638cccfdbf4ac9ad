/*
 * uri.c: the backend URI parser, the durations it reads, and the typed
 * parameter readers that core gives backends.
 *
 * It turns text of the form
 *
 *     scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v&...]
 *
 * into one struct dlock_uri held in a single allocation, consumes the
 * parameters every backend shares (lease, timeout, retry_min, retry_max,
 * namespace) and leaves the rest to the backend, which reads them with
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
 * Divisions, in order: character classes; quoting for messages; durations;
 * percent-decoding; the parser (splitting, hosts, query, assembly); freeing
 * and checking parameters; the typed readers of backend.h.
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

#include "internal.h"

/* The longest quoted piece of input in a message, before "...". */
#define URI_QUOTE_MAX 40
/* Room for one quoted piece: quotes, escapes, "***", "..." and the NUL. */
#define URI_QUOTE_BUF (URI_QUOTE_MAX + 16)
/* The longest namespace= value, in bytes after decoding. */
#define URI_NS_MAX 256
/* The longest host name, in bytes after decoding (DNS's limit). */
#define URI_HOST_MAX 255
/* The largest duration, in milliseconds. */
#define URI_DURATION_MAX (UINT32_MAX - 1u)

/* The parameters core reads from every URI, for messages. */
#define URI_COMMON_LIST "lease, timeout, namespace, retry_min, retry_max"

static const char uri_empty[] = "";

/* ------------------------------------------------------------------------ */
/* Character classes                                                        */
/* ------------------------------------------------------------------------ */

/* These are ASCII-only on purpose: <ctype.h> depends on the locale. */

static int uri_is_alpha(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static int uri_is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

static int uri_hex_value(unsigned char ch)
{
    if (uri_is_digit(ch))
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int uri_is_scheme_char(unsigned char ch)
{
    return uri_is_alpha(ch) || uri_is_digit(ch) || ch == '+' || ch == '-' ||
           ch == '.';
}

/* Control characters, space and DEL are refused everywhere. */
static int uri_is_forbidden(unsigned char ch)
{
    return ch <= 0x20 || ch == 0x7f;
}

static int uri_is_host_char(unsigned char ch)
{
    return uri_is_alpha(ch) || uri_is_digit(ch) || ch == '-' || ch == '.' ||
           ch == '_' || ch == '%';
}

static unsigned char uri_lower(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') ? (unsigned char)(ch - 'A' + 'a') : ch;
}

/* ASCII case-insensitive equality of two NUL-terminated strings. */
static int uri_same_nocase(const char *a, const char *b)
{
    while (*a != '\0' && uri_lower((unsigned char)*a) ==
                             uri_lower((unsigned char)*b)) {
        a++;
        b++;
    }
    return *a == '\0' && *b == '\0';
}

/* The first occurrence of ch in p[0..n), or NULL. */
static const char *uri_find(const char *p, size_t n, char ch)
{
    return n > 0 ? memchr(p, ch, n) : NULL;
}

/* The last occurrence of ch in p[0..n), or NULL. */
static const char *uri_find_last(const char *p, size_t n, char ch)
{
    while (n > 0) {
        n--;
        if (p[n] == ch)
            return p + n;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Quoting for messages                                                     */
/* ------------------------------------------------------------------------ */

/*
 * What a message must not show: the raw bytes in [lo, hi) of the text being
 * parsed, and any occurrence of the string secret (the password, when a
 * reader of backend.h quotes a decoded value and no raw region is known).
 */
struct uri_mask {
    const char *lo;
    const char *hi;
    const char *secret;
    size_t secret_len;
};

/*
 * Write p[0..n) into buf for a message, between double quotes if quoted:
 * printable ASCII as is, '"' and '\' escaped with '\', every other byte as
 * \xNN, masked bytes as a single *** per run, and a cut after URI_QUOTE_MAX
 * characters marked with "...". Returns buf, so that it can sit in a printf
 * list.
 */
static const char *uri_escape(char buf[URI_QUOTE_BUF], const char *p,
                              size_t n, const struct uri_mask *m, int quoted)
{
    static const char hex[] = "0123456789abcdef";
    size_t out = 0, i = 0;
    int masking = 0;

    if (quoted)
        buf[out++] = '"';
    while (i < n) {
        char unit[5];
        size_t ulen = 0, step = 1;
        unsigned char ch = (unsigned char)p[i];
        int hidden = 0;

        if (m != NULL && m->lo != NULL && p + i >= m->lo && p + i < m->hi)
            hidden = 1;
        if (m != NULL && m->secret_len > 0 && n - i >= m->secret_len &&
            memcmp(p + i, m->secret, m->secret_len) == 0) {
            hidden = 1;
            step = m->secret_len;
        }
        if (hidden) {
            if (!masking)
                memcpy(unit, "***", ulen = 3);
            masking = 1;
        } else if (ch == '"' || ch == '\\') {
            unit[ulen++] = '\\';
            unit[ulen++] = (char)ch;
            masking = 0;
        } else if (ch >= 0x20 && ch < 0x7f) {
            unit[ulen++] = (char)ch;
            masking = 0;
        } else {
            unit[ulen++] = '\\';
            unit[ulen++] = 'x';
            unit[ulen++] = hex[ch >> 4];
            unit[ulen++] = hex[ch & 15];
            masking = 0;
        }
        if (out - (size_t)quoted + ulen > URI_QUOTE_MAX) {
            memcpy(buf + out, "...", 3);
            out += 3;
            break;
        }
        memcpy(buf + out, unit, ulen);
        out += ulen;
        i += step;
    }
    if (quoted)
        buf[out++] = '"';
    buf[out] = '\0';
    return buf;
}

/* uri_escape() between double quotes: how input is shown in messages. */
static const char *uri_quote(char buf[URI_QUOTE_BUF], const char *p,
                             size_t n, const struct uri_mask *m)
{
    return uri_escape(buf, p, n, m, 1);
}

/*
 * Format a message into err (when err has room) and return code. Messages
 * are built in a local buffer first, so that dlock_errorf() gets a plain
 * "%s" and a NULL err costs nothing.
 */
#ifdef __GNUC__
__attribute__((format(printf, 4, 5)))
#endif
static int uri_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    char msg[DLOCK__ERRMSG_MAX];
    va_list ap;

    if (err == NULL || errlen == 0)
        return code;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dlock_errorf(err, errlen, code, "%s", msg);
}

/* ------------------------------------------------------------------------ */
/* Durations                                                                */
/* ------------------------------------------------------------------------ */

enum uri_dur_result {
    URI_DUR_OK,
    URI_DUR_SYNTAX,   /* not a number followed by a unit */
    URI_DUR_NO_UNIT,  /* a number other than "0" without a unit */
    URI_DUR_FRACTION, /* not a whole number of milliseconds */
    URI_DUR_RANGE     /* above URI_DURATION_MAX */
};

/*
 * Parse s[0..n) as digits, an optional '.' and digits, and a unit of ms, s,
 * m or h; or "0" alone. The value must be a whole number of milliseconds no
 * larger than URI_DURATION_MAX.
 */
static enum uri_dur_result uri_duration(const char *s, size_t n,
                                        uint32_t *out)
{
    uint64_t whole = 0, frac = 0, unit, pow10 = 1, ms;
    size_t i = 0, int_start, frac_start = 0, frac_len = 0;
    int too_big = 0;

    if (n == 1 && s[0] == '0') {
        *out = 0;
        return URI_DUR_OK;
    }
    int_start = i;
    while (i < n && uri_is_digit((unsigned char)s[i])) {
        whole = whole * 10 + (uint64_t)(s[i] - '0');
        if (whole > UINT32_MAX) {
            too_big = 1;
            whole = UINT32_MAX;
        }
        i++;
    }
    if (i == int_start)
        return URI_DUR_SYNTAX;
    if (i < n && s[i] == '.') {
        frac_start = ++i;
        while (i < n && uri_is_digit((unsigned char)s[i]))
            i++;
        frac_len = i - frac_start;
        if (frac_len == 0)
            return URI_DUR_SYNTAX;
    }
    if (i == n)
        return URI_DUR_NO_UNIT;
    if (n - i == 2 && s[i] == 'm' && s[i + 1] == 's')
        unit = 1;
    else if (n - i == 1 && s[i] == 's')
        unit = 1000;
    else if (n - i == 1 && s[i] == 'm')
        unit = 60000;
    else if (n - i == 1 && s[i] == 'h')
        unit = 3600000;
    else
        return URI_DUR_SYNTAX;
    if (too_big)
        return URI_DUR_RANGE;

    /*
     * Trailing zeros of the fraction change nothing. After them are gone,
     * more than 7 digits can never give whole milliseconds (an hour is
     * 2^7 * 3^2 * 5^5 ms), so 9 digits bound the arithmetic safely:
     * frac * unit < 10^9 * 3.6 * 10^6 fits in 64 bits.
     */
    while (frac_len > 0 && s[frac_start + frac_len - 1] == '0')
        frac_len--;
    if (frac_len > 9)
        return URI_DUR_FRACTION;
    for (size_t k = 0; k < frac_len; k++) {
        frac = frac * 10 + (uint64_t)(s[frac_start + k] - '0');
        pow10 *= 10;
    }
    if ((frac * unit) % pow10 != 0)
        return URI_DUR_FRACTION;
    ms = whole * unit + frac * unit / pow10;
    if (ms > URI_DURATION_MAX)
        return URI_DUR_RANGE;
    *out = (uint32_t)ms;
    return URI_DUR_OK;
}

int dlock_parse_duration(const char *text, uint32_t *out)
{
    uint32_t v;

    if (text == NULL || out == NULL)
        return DLOCK_EINVAL;
    if (uri_duration(text, strlen(text), &v) != URI_DUR_OK)
        return DLOCK_EINVAL;
    *out = v;
    return DLOCK_OK;
}

/*
 * Explain a failed duration: name is the parameter, quoted the value as
 * uri_quote() showed it.
 */
static int uri_duration_error(char *err, size_t errlen, const char *name,
                              const char *quoted, enum uri_dur_result r)
{
    switch (r) {
    case URI_DUR_NO_UNIT:
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s has no unit (expected a number with ms, s, "
                        "m or h, e.g. 250ms; only 0 may stand alone)",
                        name, quoted);
    case URI_DUR_FRACTION:
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is not a whole number of milliseconds "
                        "(expected e.g. 1.5s or 250ms)",
                        name, quoted);
    case URI_DUR_RANGE:
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is too long (expected at most %lums, "
                        "about 49 days)",
                        name, quoted, (unsigned long)URI_DURATION_MAX);
    case URI_DUR_SYNTAX:
    case URI_DUR_OK:
        break;
    }
    return uri_fail(err, errlen, DLOCK_EINVAL,
                    "%s: %s is not a duration (expected a number with ms, "
                    "s, m or h, e.g. 250ms)",
                    name, quoted);
}

/* ------------------------------------------------------------------------ */
/* Percent-decoding                                                         */
/* ------------------------------------------------------------------------ */

/* The state of one parse: the text, what to mask, where errors go. */
struct uri_ctx {
    const char *text;
    size_t len;
    struct uri_mask mask;
    char *err;
    size_t errlen;
    char *next; /* the unused part of the string area */
    char *end;
};

/* A quote of text p[0..n) for a message, masked as the parse requires. */
#define URI_Q(buf, c, p, n) uri_quote((buf), (p), (n), &(c)->mask)

/* 1 if the byte at p is one a message must not show. */
static int uri_masked(const struct uri_ctx *c, const char *p)
{
    return c->mask.lo != NULL && p >= c->mask.lo && p < c->mask.hi;
}

/*
 * Check p[0..n) of component comp (no control characters or spaces, every
 * '%' followed by two hex digits, no %00) and, when out is not NULL, decode
 * it into the string area and point *out at the NUL-terminated result.
 * Messages quote the text around it, whole[0..whole_n), which holds p.
 */
static int uri_decode_in(struct uri_ctx *c, const char *comp, const char *p,
                         size_t n, const char *whole, size_t whole_n,
                         const char **out)
{
    char q1[URI_QUOTE_BUF], q2[URI_QUOTE_BUF];
    char *dst = NULL;
    size_t i, k = 0;

    if (out != NULL) {
        /* The area was sized for every component's raw bytes plus a NUL
         * each; running out would be a bug in the sizing done by
         * dlock__uri_parse(). */
        if ((size_t)(c->end - c->next) < n + 1)
            return uri_fail(c->err, c->errlen, DLOCK_ERROR,
                            "%s: internal error: string area too small",
                            comp);
        dst = c->next;
    }
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        int hi, lo;

        if (uri_is_forbidden(ch) && uri_masked(c, p + i))
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: the password in %s contains a control "
                            "character or space (expected printable "
                            "characters; percent-encode others)",
                            comp, URI_Q(q1, c, whole, whole_n));
        if (uri_is_forbidden(ch))
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: %s contains %s (expected printable "
                            "characters, no spaces; percent-encode others)",
                            comp, URI_Q(q1, c, whole, whole_n),
                            URI_Q(q2, c, p + i, 1));
        if (ch != '%') {
            if (dst != NULL)
                dst[k++] = (char)ch;
            continue;
        }
        hi = i + 1 < n ? uri_hex_value((unsigned char)p[i + 1]) : -1;
        lo = i + 2 < n ? uri_hex_value((unsigned char)p[i + 2]) : -1;
        if ((hi < 0 || lo < 0) && uri_masked(c, p + i))
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: bad percent-escape in the password of %s "
                            "(expected '%%' and two hex digits, e.g. %%40 "
                            "for '@')",
                            comp, URI_Q(q1, c, whole, whole_n));
        if (hi < 0 || lo < 0)
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: bad percent-escape %s in %s (expected '%%' "
                            "and two hex digits, e.g. %%40 for '@')",
                            comp, URI_Q(q1, c, p + i, n - i < 3 ? n - i : 3),
                            URI_Q(q2, c, whole, whole_n));
        if (hi == 0 && lo == 0)
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: %s decodes to a NUL byte (expected no %%00)",
                            comp, URI_Q(q1, c, whole, whole_n));
        if (dst != NULL)
            dst[k++] = (char)(hi * 16 + lo);
        i += 2;
    }
    if (dst != NULL) {
        dst[k++] = '\0';
        c->next += k;
        *out = dst;
    }
    return DLOCK_OK;
}

/* uri_decode_in() of a part that is its own context. */
static int uri_decode(struct uri_ctx *c, const char *comp, const char *p,
                      size_t n, const char **out)
{
    return uri_decode_in(c, comp, p, n, p, n, out);
}

/* Copy p[0..n) into the string area as is, NUL-terminated. */
static char *uri_copy(struct uri_ctx *c, const char *p, size_t n)
{
    char *dst = c->next;

    if ((size_t)(c->end - c->next) < n + 1)
        return NULL;
    if (n > 0)
        memcpy(dst, p, n);
    dst[n] = '\0';
    c->next += n + 1;
    return dst;
}

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
    last_at = uri_find_last(t + sp->auth_end, c->len - sp->auth_end, '@');
    if (last_at == NULL || sp->auth == sp->auth_end || t[sp->auth] == '[')
        return;
    colon = uri_find(t + sp->auth, sp->auth_end - sp->auth, ':');
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
    while (i < len && uri_is_scheme_char((unsigned char)t[i]))
        i++;
    if (len == 0)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: the URI is empty (expected e.g. "
                        "redis://host or file:///path)");
    if (i == 0 && t[0] == ':')
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: missing before ':' (expected a name such "
                        "as redis, e.g. redis://host)");
    if (i == 0)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: %s cannot start a scheme (expected a "
                        "letter, e.g. redis://host)",
                        uri_quote(q, t, 1, NULL));
    if (!uri_is_alpha((unsigned char)t[0]))
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: %s does not start with a letter (expected "
                        "e.g. redis://host)",
                        uri_quote(q, t, i, NULL));
    if (len - i < 3 || memcmp(t + i, "://", 3) != 0)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "scheme: %s is not followed by \"://\" (expected "
                        "scheme://host, e.g. redis://localhost)",
                        uri_quote(q, t, i, NULL));
    sp->scheme_end = i;
    sp->auth = i + 3;

    /* The authority ends at the first '/', '?' or '#'. */
    for (j = sp->auth; j < len; j++)
        if (t[j] == '/' || t[j] == '?' || t[j] == '#')
            break;
    sp->auth_end = j;
    sp->at = uri_find_last(t + sp->auth, j - sp->auth, '@');
    sp->colon = NULL;
    if (sp->at != NULL)
        sp->colon = uri_find(t + sp->auth, (size_t)(sp->at - t) - sp->auth,
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
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "port: empty after ':' in %s (expected a number "
                        "from 1 to 65535)",
                        URI_Q(q, c, item, item_n));
    for (size_t i = 0; i < n; i++) {
        if (!uri_is_digit((unsigned char)p[i]) && uri_masked(c, p))
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "port: %s is not a number (expected 1 to 65535; "
                            "if this is a password, percent-encode its "
                            "'/', '?' and '#')",
                            URI_Q(q, c, p, n));
        if (!uri_is_digit((unsigned char)p[i]))
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "port: %s is not a number (expected 1 to 65535)",
                            URI_Q(q, c, p, n));
        if (v <= 65535)
            v = v * 10 + (unsigned long)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
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
    const char *rb = uri_find(p, n, ']');
    size_t alen;
    int ok;
    struct in6_addr bin;

    if (rb == NULL)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s has no closing ']' (expected an IPv6 "
                        "address in brackets, e.g. [::1]:6379)",
                        URI_Q(q, c, p, n));
    /* Only hex digits, ':' and '.' may reach inet_pton(); anything else,
     * or too long a text, cannot be an address. */
    alen = (size_t)(rb - p) - 1;
    ok = alen < sizeof addr;
    for (size_t i = 1; ok && i <= alen; i++) {
        unsigned char ch = (unsigned char)p[i];
        ok = uri_hex_value(ch) >= 0 || ch == ':' || ch == '.';
    }
    if (ok) {
        memcpy(addr, p + 1, alen);
        addr[alen] = '\0';
        ok = inet_pton(AF_INET6, addr, &bin) == 1;
    }
    if (!ok)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s is not an IPv6 address (expected e.g. "
                        "[::1] or [2001:db8::7]; zone ids are not supported)",
                        URI_Q(q, c, p, (size_t)(rb - p) + 1));
    h->ipv6 = 1;
    h->host = uri_copy(c, p + 1, alen);
    if (h->host == NULL)
        return uri_fail(c->err, c->errlen, DLOCK_ERROR,
                        "host: internal error: string area too small");
    if (rb + 1 == p + n)
        return DLOCK_OK;
    if (rb[1] != ':')
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
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

    h->host = uri_empty;
    h->port = 0;
    h->ipv6 = 0;
    if (p[0] == '[')
        return uri_host_ipv6(c, p, n, h);
    colon = uri_find(p, n, ':');
    nlen = colon != NULL ? (size_t)(colon - p) : n;
    if (colon != NULL && uri_find(colon + 1, n - nlen - 1, ':') != NULL)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s has more than one ':' (expected host:port; "
                        "an IPv6 address goes in brackets, e.g. [::1]:6379)",
                        URI_Q(q, c, p, n));
    if (nlen == 0)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s has no name before ':' (expected "
                        "host:port, e.g. localhost:6379)",
                        URI_Q(q, c, p, n));
    for (i = 0; i < nlen; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!uri_is_host_char(ch))
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "host: %s contains %s (expected letters, digits, "
                            "'-', '.', '_' or %%XX escapes)",
                            URI_Q(q, c, p, nlen), URI_Q(q2, c, p + i, 1));
        if (!uri_is_digit(ch) && ch != '.')
            dotted = 0;
    }
    rc = uri_decode(c, "host", p, nlen, &name);
    if (rc != DLOCK_OK)
        return rc;
    if (strlen(name) > URI_HOST_MAX)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "host: %s is longer than %d bytes (expected a DNS "
                        "name or an address)",
                        URI_Q(q, c, p, nlen), URI_HOST_MAX);
    /* A name of digits and dots can only be meant as an IPv4 address. */
    if (dotted && inet_pton(AF_INET, name, &bin) != 1)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
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
        const char *comma = uri_find(p, (size_t)(end - p), ',');
        const char *stop = comma != NULL ? comma : end;
        int rc;

        if (stop == p)
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
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
struct uri_common {
    const char *raw[5]; /* the raw value, for messages; NULL if not given */
    size_t raw_len[5];
    const char *value[5];
};

enum { URI_LEASE, URI_TIMEOUT, URI_RETRY_MIN, URI_RETRY_MAX, URI_NS };

static const char *const uri_common_names[5] = {
    "lease", "timeout", "retry_min", "retry_max", "namespace",
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
        const char *amp = uri_find(p, (size_t)(end - p), '&');
        const char *stop = amp != NULL ? amp : end;
        const char *eq = uri_find(p, (size_t)(stop - p), '=');
        const char *kend = eq != NULL ? eq : stop;
        const char *key, *value = uri_empty;
        int rc, dup = 0, common = -1;

        if (stop == p)
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "query: empty parameter in %s (expected "
                            "key=value pairs joined by '&')",
                            URI_Q(q, c, c->text + from, to - from));
        if (kend == p)
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "query: %s has an empty key (expected key=value)",
                            URI_Q(q, c, p, (size_t)(stop - p)));
        rc = uri_decode_in(c, "query", p, (size_t)(kend - p), p,
                           (size_t)(stop - p), &key);
        if (rc == DLOCK_OK && eq != NULL)
            rc = uri_decode_in(c, "query", eq + 1, (size_t)(stop - eq) - 1,
                               p, (size_t)(stop - p), &value);
        if (rc != DLOCK_OK)
            return rc;
        for (int k = 0; k < 5; k++)
            if (strcmp(key, uri_common_names[k]) == 0)
                common = k;
        if (common >= 0) {
            dup = com->value[common] != NULL;
        } else {
            for (size_t k = 0; k < *nparams && !dup; k++)
                dup = strcmp(params[k].key, key) == 0;
        }
        if (dup)
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
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
    r = uri_duration(v, strlen(v), out);
    if (r != URI_DUR_OK)
        return uri_duration_error(c->err, c->errlen, name, q, r);
    if (*out < min)
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
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
        return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                        "retry_min: %s is more than retry_max %s (expected "
                        "retry_min <= retry_max)",
                        URI_Q(q, c, com->raw[URI_RETRY_MIN],
                              com->raw_len[URI_RETRY_MIN]),
                        URI_Q(q2, c, com->raw[URI_RETRY_MAX],
                              com->raw_len[URI_RETRY_MAX]));
    u->ns = uri_empty;
    if (com->value[URI_NS] != NULL) {
        size_t n = strlen(com->value[URI_NS]);
        if (n > URI_NS_MAX)
            return uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "namespace: %s is %zu bytes long (expected at "
                            "most %d)",
                            URI_Q(q, c, com->raw[URI_NS],
                                  com->raw_len[URI_NS]),
                            n, URI_NS_MAX);
        u->ns = com->value[URI_NS];
    }
    return DLOCK_OK;
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
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "uri: no place to put the result (out is NULL)");
    *out = NULL;
    if (text == NULL && len > 0)
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "uri: the text is NULL (expected a URI)");
    if (len > DLOCK__URI_MAX)
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "uri: %zu bytes is too long (expected at most %d "
                        "bytes)",
                        len, DLOCK__URI_MAX);
    memset(&c, 0, sizeof c);
    memset(&sp, 0, sizeof sp);
    memset(&com, 0, sizeof com);
    c.text = text != NULL ? text : uri_empty;
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
    off_hosts = uri_align(sizeof *u, alignof(struct dlock_uri_host));
    off_params = uri_align(off_hosts + sp.nhosts_max * sizeof *hosts,
                           alignof(struct dlock_uri_param));
    off_chars = off_params + sp.nparams_max * sizeof *params;
    nchars = len + 4 + sp.nhosts_max + 2 * sp.nparams_max + (len + 3 + 1);
    block = malloc(off_chars + nchars);
    if (block == NULL)
        return uri_fail(err, errlen, DLOCK_ENOMEM, "uri: out of memory");
    memset(block, 0, off_chars);
    u = (struct dlock_uri *)(void *)block;
    hosts = (struct dlock_uri_host *)(void *)(block + off_hosts);
    params = (struct dlock_uri_param *)(void *)(block + off_params);
    c.next = block + off_chars;
    c.end = c.next + nchars;

    /* The scheme, lower-cased; an alias stays the alias. */
    s = uri_copy(&c, text, sp.scheme_end);
    for (i = 0; i < sp.scheme_end; i++)
        s[i] = (char)uri_lower((unsigned char)s[i]);
    u->scheme = s;

    /* The user info, if any. */
    if (sp.at != NULL) {
        const char *ui = text + sp.auth;
        size_t uilen = (size_t)(sp.at - ui);
        const char *ulim = sp.colon != NULL ? sp.colon : sp.at;
        char q[URI_QUOTE_BUF];

        if (uri_find(ui, uilen, '@') != NULL) {
            rc = uri_fail(err, errlen, DLOCK_EINVAL,
                          "userinfo: %s contains a raw '@' (expected it "
                          "percent-encoded as %%40 in the user and password)",
                          URI_Q(q, &c, ui, uilen));
            goto fail;
        }
        rc = uri_decode_in(&c, "userinfo", ui, (size_t)(ulim - ui), ui,
                           uilen, &u->user);
        if (rc == DLOCK_OK && sp.colon != NULL)
            rc = uri_decode_in(&c, "userinfo", sp.colon + 1,
                               (size_t)(sp.at - sp.colon) - 1, ui, uilen,
                               &u->password);
        if (rc != DLOCK_OK)
            goto fail;
        if (sp.hosts == sp.auth_end) {
            rc = uri_fail(err, errlen, DLOCK_EINVAL,
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
    u->path = uri_empty;
    if (sp.auth_end < sp.path_end) {
        rc = uri_decode(&c, "path", text + sp.auth_end,
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
        rc = uri_fail(err, errlen, DLOCK_EINVAL,
                      "fragment: %s is not allowed (expected no '#'; write "
                      "%%23 for a '#' in a value)",
                      URI_Q(q, &c, text + sp.query_end, len - sp.query_end));
        goto fail;
    }
    rc = uri_commons(&c, &com, u);
    if (rc != DLOCK_OK)
        goto fail;

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
        u->redacted = uri_copy(&c, text, len);
    }
    *out = u;
    return DLOCK_OK;

fail:
    free(block);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Freeing and checking parameters                                          */
/* ------------------------------------------------------------------------ */

void dlock__uri_free(struct dlock_uri *u)
{
    /* The struct heads the one block that holds everything. */
    free(u);
}

/* Append text to buf (of size cap, holding *n bytes), cutting with "...". */
static void uri_append(char *buf, size_t cap, size_t *n, const char *text)
{
    size_t tlen = strlen(text);

    if (*n + 1 >= cap)
        return;
    if (*n + tlen + 1 > cap) {
        tlen = cap - *n - 1;
        memcpy(buf + *n, text, tlen);
        *n += tlen;
        if (cap >= 4)
            memcpy(buf + cap - 4, "...", 3);
    } else {
        memcpy(buf + *n, text, tlen);
        *n += tlen;
    }
    buf[*n] = '\0';
}

int dlock__uri_check_params(const struct dlock_uri *u,
                            const char *const *allowed, char *err,
                            size_t errlen)
{
    struct uri_mask m = {NULL, NULL, NULL, 0};

    if (u == NULL)
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "query: no URI to check (u is NULL)");
    if (u->password != NULL) {
        m.secret = u->password;
        m.secret_len = strlen(u->password);
    }
    for (size_t i = 0; i < u->nparams; i++) {
        const char *key = u->params[i].key;
        char q[URI_QUOTE_BUF], list[256];
        size_t n = 0, k;
        int ok = 0;

        for (k = 0; allowed != NULL && allowed[k] != NULL && !ok; k++)
            ok = strcmp(allowed[k], key) == 0;
        if (ok)
            continue;
        list[0] = '\0';
        for (k = 0; allowed != NULL && allowed[k] != NULL; k++) {
            if (k > 0)
                uri_append(list, sizeof list, &n, ", ");
            uri_append(list, sizeof list, &n, allowed[k]);
        }
        if (k == 0)
            uri_append(list, sizeof list, &n, "none of its own");
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "query: unknown parameter %s (%s takes %s; every "
                        "scheme takes " URI_COMMON_LIST ")",
                        uri_quote(q, key, strlen(key), &m),
                        u->scheme != NULL ? u->scheme : "this scheme", list);
    }
    return DLOCK_OK;
}

/* ------------------------------------------------------------------------ */
/* Typed parameter readers (backend.h)                                      */
/* ------------------------------------------------------------------------ */

const char *dlock_uri_param(const struct dlock_uri *u, const char *key)
{
    if (u == NULL || key == NULL)
        return NULL;
    for (size_t i = 0; i < u->nparams; i++)
        if (strcmp(u->params[i].key, key) == 0)
            return u->params[i].value;
    return NULL;
}

/*
 * The common start of every reader: check the arguments and find the value.
 * Returns DLOCK_OK with *value NULL when the parameter is absent, and fills
 * q with the quoted value otherwise (the password masked). name gets the
 * key as messages show it, escaped like a value but without quotes.
 */
static int uri_reader(const struct dlock_uri *u, const char *key,
                      const void *out, const char **value,
                      char q[URI_QUOTE_BUF], char name[URI_QUOTE_BUF],
                      char *err, size_t errlen)
{
    struct uri_mask m = {NULL, NULL, NULL, 0};

    *value = NULL;
    if (u != NULL && u->password != NULL) {
        m.secret = u->password;
        m.secret_len = strlen(u->password);
    }
    if (key != NULL)
        uri_escape(name, key, strlen(key), &m, 0);
    else
        strcpy(name, "parameter");
    if (u == NULL || key == NULL || out == NULL)
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: reader called with a NULL %s", name,
                        u == NULL ? "URI" : key == NULL ? "key" : "out");
    *value = dlock_uri_param(u, key);
    if (*value != NULL)
        uri_quote(q, *value, strlen(*value), &m);
    return DLOCK_OK;
}

int dlock_uri_duration(const struct dlock_uri *u, const char *key,
                       uint32_t dflt, uint32_t *out, char *err, size_t errlen)
{
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF];
    const char *v;
    enum uri_dur_result r;
    uint32_t ms;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    r = uri_duration(v, strlen(v), &ms);
    if (r != URI_DUR_OK)
        return uri_duration_error(err, errlen, name, q, r);
    *out = ms;
    return DLOCK_OK;
}

int dlock_uri_uint(const struct dlock_uri *u, const char *key, uint32_t dflt,
                   uint32_t min, uint32_t max, uint32_t *out, char *err,
                   size_t errlen)
{
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF];
    const char *v;
    uint64_t n = 0;
    size_t i;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (min > max)
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: the backend asked for the empty range %lu to "
                        "%lu",
                        name, (unsigned long)min, (unsigned long)max);
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    for (i = 0; uri_is_digit((unsigned char)v[i]); i++)
        if (n <= UINT32_MAX)
            n = n * 10 + (uint64_t)(v[i] - '0');
    if (i == 0 || v[i] != '\0')
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is not a whole number (expected %lu to %lu)",
                        name, q, (unsigned long)min, (unsigned long)max);
    if (n < min || n > max)
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is out of range (expected %lu to %lu)", name,
                        q, (unsigned long)min, (unsigned long)max);
    *out = (uint32_t)n;
    return DLOCK_OK;
}

int dlock_uri_bool(const struct dlock_uri *u, const char *key, int dflt,
                   int *out, char *err, size_t errlen)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF];
    const char *v;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    for (size_t i = 0; i < 4; i++) {
        if (uri_same_nocase(v, yes[i])) {
            *out = 1;
            return DLOCK_OK;
        }
        if (uri_same_nocase(v, no[i])) {
            *out = 0;
            return DLOCK_OK;
        }
    }
    return uri_fail(err, errlen, DLOCK_EINVAL,
                    "%s: %s is not a boolean (expected 1, 0, true, false, "
                    "yes, no, on or off)",
                    name, q);
}

int dlock_uri_choice(const struct dlock_uri *u, const char *key,
                     const char *const *choices, int dflt, int *out,
                     char *err, size_t errlen)
{
    char q[URI_QUOTE_BUF], name[URI_QUOTE_BUF], list[256];
    const char *v;
    size_t n = 0, k;
    int rc = uri_reader(u, key, out, &v, q, name, err, errlen);

    if (rc != DLOCK_OK)
        return rc;
    if (choices == NULL || choices[0] == NULL)
        return uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: the backend gave no choices", name);
    if (v == NULL) {
        *out = dflt;
        return DLOCK_OK;
    }
    for (k = 0; choices[k] != NULL; k++) {
        if (uri_same_nocase(v, choices[k])) {
            *out = (int)k;
            return DLOCK_OK;
        }
    }
    list[0] = '\0';
    for (k = 0; choices[k] != NULL; k++) {
        if (k > 0)
            uri_append(list, sizeof list, &n,
                       choices[k + 1] == NULL ? " or " : ", ");
        uri_append(list, sizeof list, &n, choices[k]);
    }
    return uri_fail(err, errlen, DLOCK_EINVAL,
                    "%s: %s is not a choice (expected %s)", name, q,
                    list);
}
