/*
 * errors.c: the error codes' names and sentences, the capability names, and
 * the formatting helpers backends report through. Nothing here allocates:
 * the error path must work when memory is gone.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

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
