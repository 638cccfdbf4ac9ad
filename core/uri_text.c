/*
 * uri_text.c: the text helpers of the URI parser (see uri.c): character
 * classes, the quoting of input for messages (a password never shows),
 * durations, and percent-decoding.
 *
 * Divisions: character classes; quoting for messages; durations;
 * percent-decoding.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uri_text.h"

const char dlock__uri_empty[] = "";

/* ------------------------------------------------------------------------ */
/* Character classes                                                        */
/* ------------------------------------------------------------------------ */

/* These are ASCII-only on purpose: <ctype.h> depends on the locale. */

int dlock__uri_is_alpha(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

int dlock__uri_is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

int dlock__uri_hex_value(unsigned char ch)
{
    if (dlock__uri_is_digit(ch))
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int dlock__uri_is_scheme_char(unsigned char ch)
{
    return dlock__uri_is_alpha(ch) || dlock__uri_is_digit(ch) || ch == '+' || ch == '-' ||
           ch == '.';
}

/* Control characters, space and DEL are refused everywhere. */
static int uri_is_forbidden(unsigned char ch)
{
    return ch <= 0x20 || ch == 0x7f;
}

int dlock__uri_is_host_char(unsigned char ch)
{
    return dlock__uri_is_alpha(ch) || dlock__uri_is_digit(ch) || ch == '-' || ch == '.' ||
           ch == '_' || ch == '%';
}

unsigned char dlock__uri_lower(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') ? (unsigned char)(ch - 'A' + 'a') : ch;
}

/* ASCII case-insensitive equality of two NUL-terminated strings. */
int dlock__uri_same_nocase(const char *a, const char *b)
{
    while (*a != '\0' && dlock__uri_lower((unsigned char)*a) ==
                             dlock__uri_lower((unsigned char)*b)) {
        a++;
        b++;
    }
    return *a == '\0' && *b == '\0';
}

/* The first occurrence of ch in p[0..n), or NULL. */
const char *dlock__uri_find(const char *p, size_t n, char ch)
{
    return n > 0 ? memchr(p, ch, n) : NULL;
}

/* The last occurrence of ch in p[0..n), or NULL. */
const char *dlock__uri_find_last(const char *p, size_t n, char ch)
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
 * Write p[0..n) into buf for a message, between double quotes if quoted:
 * printable ASCII as is, '"' and '\' escaped with '\', every other byte as
 * \xNN, masked bytes as a single *** per run, and a cut after URI_QUOTE_MAX
 * characters marked with "...". Returns buf, so that it can sit in a printf
 * list.
 */
const char *dlock__uri_escape(char buf[URI_QUOTE_BUF], const char *p,
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

/* dlock__uri_escape() between double quotes: how input is shown in messages. */
const char *dlock__uri_quote(char buf[URI_QUOTE_BUF], const char *p,
                             size_t n, const struct uri_mask *m)
{
    return dlock__uri_escape(buf, p, n, m, 1);
}

/*
 * Format a message into err (when err has room) and return code. Messages
 * are built in a local buffer first, so that dlock_errorf() gets a plain
 * "%s" and a NULL err costs nothing.
 */
int dlock__uri_fail(char *err, size_t errlen, int code, const char *fmt, ...)
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


/*
 * Parse s[0..n) as digits, an optional '.' and digits, and a unit of ms, s,
 * m or h; or "0" alone. The value must be a whole number of milliseconds no
 * larger than URI_DURATION_MAX.
 */
enum uri_dur_result dlock__uri_duration(const char *s, size_t n,
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
    while (i < n && dlock__uri_is_digit((unsigned char)s[i])) {
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
        while (i < n && dlock__uri_is_digit((unsigned char)s[i]))
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
    if (dlock__uri_duration(text, strlen(text), &v) != URI_DUR_OK)
        return DLOCK_EINVAL;
    *out = v;
    return DLOCK_OK;
}

/*
 * Explain a failed duration: name is the parameter, quoted the value as
 * dlock__uri_quote() showed it.
 */
int dlock__uri_duration_error(char *err, size_t errlen, const char *name,
                              const char *quoted, enum uri_dur_result r)
{
    switch (r) {
    case URI_DUR_NO_UNIT:
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s has no unit (expected a number with ms, s, "
                        "m or h, e.g. 250ms; only 0 may stand alone)",
                        name, quoted);
    case URI_DUR_FRACTION:
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is not a whole number of milliseconds "
                        "(expected e.g. 1.5s or 250ms)",
                        name, quoted);
    case URI_DUR_RANGE:
        return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                        "%s: %s is too long (expected at most %lums, "
                        "about 49 days)",
                        name, quoted, (unsigned long)URI_DURATION_MAX);
    case URI_DUR_SYNTAX:
    case URI_DUR_OK:
        break;
    }
    return dlock__uri_fail(err, errlen, DLOCK_EINVAL,
                    "%s: %s is not a duration (expected a number with ms, "
                    "s, m or h, e.g. 250ms)",
                    name, quoted);
}

/* ------------------------------------------------------------------------ */
/* Percent-decoding                                                         */
/* ------------------------------------------------------------------------ */



/* 1 if the byte at p is one a message must not show. */
int dlock__uri_masked(const struct uri_ctx *c, const char *p)
{
    return c->mask.lo != NULL && p >= c->mask.lo && p < c->mask.hi;
}

/*
 * Check p[0..n) of component comp (no control characters or spaces, every
 * '%' followed by two hex digits, no %00) and, when out is not NULL, decode
 * it into the string area and point *out at the NUL-terminated result.
 * Messages quote the text around it, whole[0..whole_n), which holds p.
 */
int dlock__uri_decode_in(struct uri_ctx *c, const char *comp, const char *p,
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
            return dlock__uri_fail(c->err, c->errlen, DLOCK_ERROR,
                            "%s: internal error: string area too small",
                            comp);
        dst = c->next;
    }
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        int hi, lo;

        if (uri_is_forbidden(ch) && dlock__uri_masked(c, p + i))
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: the password in %s contains a control "
                            "character or space (expected printable "
                            "characters; percent-encode others)",
                            comp, URI_Q(q1, c, whole, whole_n));
        if (uri_is_forbidden(ch))
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: %s contains %s (expected printable "
                            "characters, no spaces; percent-encode others)",
                            comp, URI_Q(q1, c, whole, whole_n),
                            URI_Q(q2, c, p + i, 1));
        if (ch != '%') {
            if (dst != NULL)
                dst[k++] = (char)ch;
            continue;
        }
        hi = i + 1 < n ? dlock__uri_hex_value((unsigned char)p[i + 1]) : -1;
        lo = i + 2 < n ? dlock__uri_hex_value((unsigned char)p[i + 2]) : -1;
        if ((hi < 0 || lo < 0) && dlock__uri_masked(c, p + i))
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: bad percent-escape in the password of %s "
                            "(expected '%%' and two hex digits, e.g. %%40 "
                            "for '@')",
                            comp, URI_Q(q1, c, whole, whole_n));
        if (hi < 0 || lo < 0)
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
                            "%s: bad percent-escape %s in %s (expected '%%' "
                            "and two hex digits, e.g. %%40 for '@')",
                            comp, URI_Q(q1, c, p + i, n - i < 3 ? n - i : 3),
                            URI_Q(q2, c, whole, whole_n));
        if (hi == 0 && lo == 0)
            return dlock__uri_fail(c->err, c->errlen, DLOCK_EINVAL,
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

/* dlock__uri_decode_in() of a part that is its own context. */
int dlock__uri_decode(struct uri_ctx *c, const char *comp, const char *p,
                      size_t n, const char **out)
{
    return dlock__uri_decode_in(c, comp, p, n, p, n, out);
}

/* Copy p[0..n) into the string area as is, NUL-terminated. */
char *dlock__uri_copy(struct uri_ctx *c, const char *p, size_t n)
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

