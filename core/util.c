/*
 * util.c: small services core and backends share: clocks, SHA-256 (from
 * nettle), safe path segments for lock names, uuids and a per-thread random
 * generator, and UTF-8 validation.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <nettle/sha2.h>

#include "base.h"

int64_t dlock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t dlock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint32_t dlock_server_timeout_ms(uint32_t lease_ms)
{
    uint64_t margin = lease_ms / 10 > 500 ? lease_ms / 10 : 500;
    uint64_t t = (uint64_t)lease_ms + margin;

    return t > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)t;
}

void dlock_sha256(uint8_t out[32], const void *data, size_t len)
{
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

void dlock_sha256v(uint8_t out[32], const void *const *parts,
                   const size_t *lens, size_t n)
{
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    for (size_t i = 0; i < n; i++)
        sha256_update(&ctx, lens[i], parts[i]);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

static int segment_plain(unsigned char ch, size_t pos)
{
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
        (ch >= '0' && ch <= '9') || ch == '_' || ch == '-')
        return 1;
    return ch == '.' && pos > 0;
}

size_t dlock_name_segment(char *out, size_t max_out, const char *name,
                          size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0, i;

    /* Escape as long as the result fits; fall back to the hashed form. */
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (segment_plain(ch, i)) {
            if (n + 1 > max_out)
                break;
            out[n++] = (char)ch;
        } else {
            if (n + 3 > max_out)
                break;
            out[n++] = '%';
            out[n++] = hex[ch >> 4];
            out[n++] = hex[ch & 15];
        }
    }
    if (i < len) {
        /* Too long: keep a readable prefix, then '~' and the full hash.
         * Cut the prefix before any escape it would split. */
        uint8_t digest[32];
        size_t keep = max_out - 65;
        if (n > keep)
            n = keep;
        while (n > 0 && (out[n - 1] == '%' ||
                         (n >= 2 && out[n - 2] == '%')))
            n--;
        dlock_sha256(digest, name, len);
        out[n++] = '~';
        for (int k = 0; k < 32; k++) {
            out[n++] = hex[digest[k] >> 4];
            out[n++] = hex[digest[k] & 15];
        }
    }
    out[n] = '\0';
    return n;
}

int dlock__uuid(char out[37])
{
    uint8_t b[16];
    size_t got = 0;

    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return DLOCK_ERROR;
        }
        got += (size_t)r;
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
             b[10], b[11], b[12], b[13], b[14], b[15]);
    return DLOCK_OK;
}

uint64_t dlock__rand64(void)
{
    /* xorshift64*: jitter needs speed and spread, not secrecy. Seeded once
     * per thread from the OS, so the acquire path makes no system call. */
    static _Thread_local uint64_t state;

    if (state == 0) {
        if (getrandom(&state, sizeof state, GRND_NONBLOCK) != sizeof state)
            state = dlock_now_ns() ^ (uint64_t)(uintptr_t)&state;
        if (state == 0)
            state = 0x9e3779b97f4a7c15u;
    }
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1du;
}

struct timespec dlock_deadline_timespec(int64_t deadline_ms)
{
    /* Far enough for any wait, small enough for any time_t. */
    const int64_t far = (int64_t)1 << 40;
    struct timespec ts;

    if (deadline_ms > far)
        deadline_ms = far;
    if (deadline_ms < 0)
        deadline_ms = 0;
    ts.tv_sec = (time_t)(deadline_ms / 1000);
    ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
    return ts;
}

int dlock_cond_init_monotonic(void *cond)
{
    pthread_condattr_t attr;
    int rc;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init((pthread_cond_t *)cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int dlock_fd_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFD);

    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
        return DLOCK_ERROR;
    return DLOCK_OK;
}
