/*
 * errors.c: the error codes' names and sentences, the capability names, the
 * one format of every message, and the per-thread messages of client-wide
 * calls. Nothing here allocates: the error path must work when memory is
 * gone.
 */
#include <stdio.h>
#include <string.h>

#include "base.h"

const char *dlock_strerror(int code)
{
    switch (code) {
    case DLOCK_OK:
        return "success";
#define XX(name, value, text) \
    case DLOCK_##name:        \
        return text;
        DLOCK_ERROR_MAP(XX)
#undef XX
    }
    return "unknown error code";
}

const char *dlock_err_name(int code)
{
    switch (code) {
    case DLOCK_OK:
        return "OK";
#define XX(name, value, text) \
    case DLOCK_##name:        \
        return #name;
        DLOCK_ERROR_MAP(XX)
#undef XX
    }
    return "UNKNOWN";
}

static const struct {
    uint32_t bit;
    const char *name;
    const char *text;
} caps[] = {
    {DLOCK_CAP_LEASE, "lease",
     "expires unless renewed: a crashed holder frees it after its lease"},
    {DLOCK_CAP_CONN_BOUND, "conn-bound",
     "lives as long as its connection or session: freed when that ends"},
    {DLOCK_CAP_NATIVE_WAIT, "native-wait",
     "the server queues waiters; a release wakes the next at once"},
    {DLOCK_CAP_NOTIFY, "notify",
     "waiters are woken by a release announcement, not by polling"},
    {DLOCK_CAP_FAIR, "fair", "granted in order of arrival"},
    {DLOCK_CAP_SHARED, "shared", "shared (reader) mode besides exclusive"},
    {DLOCK_CAP_FENCING, "fencing",
     "every grant carries a token greater than all before it"},
    {DLOCK_CAP_SURVIVES_RECONNECT, "survives-reconnect",
     "a new connection of the same client keeps the lock"},
    {DLOCK_CAP_SESSION_PER_LOCK, "session-per-lock",
     "each held lock ties up one connection"},
    {DLOCK_CAP_NO_RENEW, "no-renew",
     "nothing can take it while the holder lives; no renewal traffic"},
    {DLOCK_CAP_BATCH_RENEW, "batch-renew",
     "renewals of many locks go out in one round trip"},
    {DLOCK_CAP_SERVER_TIMEOUT, "server-timeout",
     "the server ends a session silent for longer than its lease, freeing "
     "its locks; the holder stops believing it holds a lease after its last "
     "confirmed round trip"},
    {DLOCK_CAP_REPLICA_WAIT, "replica-wait",
     "with sync_replicas= each acquire, renewal and release waits until "
     "that many replicas confirm it (best effort: a failover may still pick "
     "a replica that missed it; fencing is the real answer)"},
    {DLOCK_CAP_DOWNGRADE, "downgrade",
     "a writer can become a reader without letting another writer in "
     "(dlock_downgrade())"},
    {DLOCK_CAP_PERMITS, "permits",
     "counting semaphores: up to N holders of a name, each permit a grant "
     "of its own with its lease and fence (dlock_lock_options.permits)"},
    {DLOCK_CAP_LATCH, "latch",
     "count-down latches: set a count, count down, await zero "
     "(dlock_latch_*)"},
};

const char *dlock_cap_name(uint32_t bit)
{
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        if (caps[i].bit == bit)
            return caps[i].name;
    return NULL;
}

const char *dlock_cap_text(uint32_t bit)
{
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
        if (caps[i].bit == bit)
            return caps[i].text;
    return NULL;
}

int dlock_errorf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void dlock__redact(char *dst, size_t cap, const char *src, const char *secret)
{
    size_t n = 0, slen = secret != NULL ? strlen(secret) : 0;

    if (cap == 0)
        return;
    while (*src != '\0' && n + 1 < cap) {
        if (slen > 0 && strncmp(src, secret, slen) == 0) {
            for (const char *m = "***"; *m != '\0' && n + 1 < cap; m++)
                dst[n++] = *m;
            src += slen;
        } else {
            dst[n++] = *src++;
        }
    }
    dst[n] = '\0';
}

/* Lock names may be 64 KiB of anything: quote a short, printable prefix. */
static void quote_name(char *out, size_t cap, const char *name)
{
    size_t n = 0, i;

    for (i = 0; name[i] != '\0' && n + 4 < cap && i < 48; i++) {
        unsigned char ch = (unsigned char)name[i];
        out[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (name[i] != '\0' && n + 4 < cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

void dlock__format_error(char *buf, size_t cap, const char *scheme,
                         const char *password, const char *op,
                         const char *name, const char *text)
{
    char raw[DLOCK__ERRMSG_MAX], q[64];

    if (name != NULL) {
        quote_name(q, sizeof q, name);
        snprintf(raw, sizeof raw, "%s: %s '%s': %s", scheme, op, q, text);
    } else if (scheme != NULL) {
        snprintf(raw, sizeof raw, "%s: %s: %s", scheme, op, text);
    } else {
        snprintf(raw, sizeof raw, "%s: %s", op, text);
    }
    dlock__redact(buf, cap, raw, password);
}

/*
 * Client-wide calls (dlock_client_open, dlock_lock_new, dlock_inspect) may
 * run in many threads on one client at once, so their messages cannot live
 * in the client: each thread keeps its last one, tagged with the client.
 */
static _Thread_local struct {
    const void *client;
    char text[DLOCK__ERRMSG_MAX];
} thread_err;

char *dlock__thread_errbuf(const void *client, size_t *cap)
{
    thread_err.client = client;
    thread_err.text[0] = '\0';
    *cap = sizeof thread_err.text;
    return thread_err.text;
}

int dlock__thread_error(const void *client, int code, const char *fmt, ...)
{
    size_t cap;
    char *buf = dlock__thread_errbuf(client, &cap);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return code;
}

const char *dlock__thread_errmsg(const void *client)
{
    return thread_err.client == client ? thread_err.text : "";
}

void dlock__thread_error_clear(const void *client)
{
    if (thread_err.client == client || client == NULL) {
        thread_err.client = NULL;
        thread_err.text[0] = '\0';
    }
}

int dlock__utf8_valid(const char *s, size_t len, size_t *bad)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        unsigned char c = p[i];
        size_t need;
        uint32_t cp, min;

        if (c == 0)
            goto fail;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) {
            need = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            need = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            need = 3, cp = c & 0x07, min = 0x10000;
        } else {
            goto fail;
        }
        if (len - i <= need)
            goto fail;
        for (size_t k = 1; k <= need; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                goto fail;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        /* Overlong forms, surrogates and values past U+10FFFF. */
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            goto fail;
        i += need + 1;
    }
    return 1;
fail:
    if (bad != NULL)
        *bad = i;
    return 0;
}

int dlock__name_check(const void *client, const char *op, const char *name,
                      size_t *len)
{
    size_t bad;

    if (name == NULL)
        return dlock__thread_error(client, DLOCK_EINVAL, "%s: name: NULL",
                                   op);
    *len = strnlen(name, DLOCK_NAME_MAX + 1);
    if (*len == 0 || *len > DLOCK_NAME_MAX)
        return dlock__thread_error(client, DLOCK_EINVAL,
                                   "%s: name: %s (expected 1 to %d bytes)",
                                   op, *len == 0 ? "empty" : "too long",
                                   DLOCK_NAME_MAX);
    if (!dlock__utf8_valid(name, *len, &bad))
        return dlock__thread_error(client, DLOCK_EINVAL,
                                   "%s: name: invalid UTF-8 at byte %zu", op,
                                   bad);
    return DLOCK_OK;
}
