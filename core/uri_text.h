/*
 * uri_text.h: what the three files of the URI parser share, and nothing
 * else includes. uri_text.c holds the character classes, the quoting of
 * input for messages (never a byte of a password), durations and
 * percent-decoding; uri.c the parser itself; uri_params.c the parameter
 * checks and the typed readers of backend.h.
 */
#ifndef DLOCK_CORE_URI_TEXT_H
#define DLOCK_CORE_URI_TEXT_H

#include "uri.h"

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
#define URI_COMMON_LIST "lease, timeout, namespace, retry_min, retry_max, mode"

extern const char dlock__uri_empty[];

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
#define URI_Q(buf, c, p, n) dlock__uri_quote((buf), (p), (n), &(c)->mask)

enum uri_dur_result {
    URI_DUR_OK,
    URI_DUR_SYNTAX,   /* not a number followed by a unit */
    URI_DUR_NO_UNIT,  /* a number other than "0" without a unit */
    URI_DUR_FRACTION, /* not a whole number of milliseconds */
    URI_DUR_RANGE     /* above URI_DURATION_MAX */
};

/* ---- character classes (ASCII only: <ctype.h> depends on the locale) ---- */
int dlock__uri_is_alpha(unsigned char ch);
int dlock__uri_is_digit(unsigned char ch);
int dlock__uri_is_scheme_char(unsigned char ch);
int dlock__uri_hex_value(unsigned char ch); /* -1 if not a hex digit */
int dlock__uri_is_host_char(unsigned char ch);
unsigned char dlock__uri_lower(unsigned char ch);
int dlock__uri_same_nocase(const char *a, const char *b);
const char *dlock__uri_find(const char *p, size_t n, char ch);
const char *dlock__uri_find_last(const char *p, size_t n, char ch);

/* ---- quoting for messages ---- */
const char *dlock__uri_escape(char buf[URI_QUOTE_BUF], const char *p,
                              size_t n, const struct uri_mask *m, int quoted);
const char *dlock__uri_quote(char buf[URI_QUOTE_BUF], const char *p,
                             size_t n, const struct uri_mask *m);
int dlock__uri_fail(char *err, size_t errlen, int code, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* ---- durations ---- */
enum uri_dur_result dlock__uri_duration(const char *s, size_t n,
                                        uint32_t *out);
int dlock__uri_duration_error(char *err, size_t errlen, const char *name,
                              const char *quoted, enum uri_dur_result r);

/* ---- percent-decoding ---- */
int dlock__uri_masked(const struct uri_ctx *c, const char *p);
int dlock__uri_decode_in(struct uri_ctx *c, const char *comp, const char *p,
                         size_t n, const char *whole, size_t whole_n,
                         const char **out);
int dlock__uri_decode(struct uri_ctx *c, const char *comp, const char *p,
                      size_t n, const char **out);
char *dlock__uri_copy(struct uri_ctx *c, const char *p, size_t n);

#endif /* DLOCK_CORE_URI_TEXT_H */
