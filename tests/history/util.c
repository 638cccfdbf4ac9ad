/*
 * util.c: what every role of `history` shares: clocks, the seeded random
 * source, line-at-a-time logs, the meta file, fault names and the checker's
 * bounds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "history.h"

/* ---- faults ------------------------------------------------------------------ */

static const char *const fault_names[HI_F_COUNT] = {
    [HI_F_STOP_SHORT] = "stop-short",   [HI_F_STOP_LONG] = "stop-long",
    [HI_F_KILL] = "kill",
    [HI_F_CUT_HOLDING] = "cut-holding", [HI_F_CUT_RELEASE] = "cut-release",
    [HI_F_RESTART] = "restart",         [HI_F_CRASH] = "crash-restart",
    [HI_F_MAJORITY] = "restart-majority",
    [HI_F_PAUSE_SHORT] = "pause-short", [HI_F_PAUSE_LONG] = "pause-long",
};

const char *hi_fault_name(int f)
{
    return f >= 0 && f < HI_F_COUNT ? fault_names[f] : "?";
}

int hi_fault_by_name(const char *name)
{
    for (int f = 0; f < HI_F_COUNT; f++)
        if (strcmp(fault_names[f], name) == 0)
            return f;
    return -1;
}

bool hi_fault_needs_server(int f)
{
    return f != HI_F_STOP_SHORT && f != HI_F_STOP_LONG && f != HI_F_KILL;
}

bool hi_fault_aimed(int f)
{
    switch (f) {
    case HI_F_STOP_LONG:
    case HI_F_CUT_HOLDING:
    case HI_F_RESTART:
    case HI_F_CRASH:
    case HI_F_MAJORITY:
    case HI_F_PAUSE_LONG:
        return true;
    default:
        return false;
    }
}

/* ---- bounds ------------------------------------------------------------------ */

/*
 * Why these, and why from lease= and timeout= only:
 *  - slack: timeout= bounds connecting and each server call. A call that
 *    is past its own deadline may still be in one attempt, which may need a
 *    reconnect and then one server call: 2 x timeout.
 *  - stall: a lock nobody holds is taken by a waiter's next attempt; the
 *    longest a healthy lock can stay unavailable without a fault is one
 *    lease (a holder that went away, or a release in doubt, is freed by its
 *    lease) plus one attempt (timeout).
 *  - recovery: after a fault ends, the lock it orphaned is freed within one
 *    lease, and a client needs a failed call and a reconnect (2 x timeout)
 *    to notice and get going again.
 */
void hi_bounds_of(const struct hi_meta *m, struct hi_bounds *b)
{
    uint64_t lease = (uint64_t)m->lease_ms * 1000000u;
    uint64_t to = (uint64_t)m->timeout_ms * 1000000u;

    b->slack_ns = 2 * to;
    b->stall_ns = lease + to;
    b->recovery_ns = lease + 2 * to;
}

/* ---- clocks and randomness -------------------------------------------------- */

uint64_t hi_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hi_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u),
                          (long)(ns % 1000000000u)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

uint64_t hi_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

uint64_t hi_rand_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + hi_rand(state) % (hi - lo + 1);
}

/* ---- files ------------------------------------------------------------------- */

const char *hi_path(char *buf, size_t cap, const char *dir, const char *name)
{
    if ((size_t)snprintf(buf, cap, "%s/%s", dir, name) >= cap) {
        fprintf(stderr, "history: path too long: %s/%s\n", dir, name);
        exit(2);
    }
    return buf;
}

int hi_log_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

    if (fd < 0)
        fprintf(stderr, "history: open %s: %s\n", path, strerror(errno));
    return fd;
}

void hi_logf(int fd, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* O_APPEND and one write: the line lands whole or not at all, also
     * when the watchdog thread (on_lost) logs at the same time. */
    if (write(fd, line, (size_t)n) != n) {
        /* Nothing better to do: the checker sees the gap. */
    }
}

int hi_write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t n = strlen(text);

    if (fd < 0)
        return -1;
    if (write(fd, text, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    return close(fd);
}

bool hi_exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* ---- meta --------------------------------------------------------------------- */

int hi_meta_write(const char *dir, const struct hi_meta *m)
{
    char path[HI_PATH_MAX];
    FILE *f = fopen(hi_path(path, sizeof path, dir, "meta"), "we");

    if (f == NULL)
        return -1;
    fprintf(f, "uri %s\n", m->uri);
    fprintf(f, "uri_shown %s\n", m->uri_shown);
    fprintf(f, "scheme %s\nmode %s\nname %s\n", m->scheme, m->mode, m->name);
    fprintf(f, "server %s\nnodes %u\n", m->server[0] ? m->server : "-",
            m->nodes);
    fprintf(f, "caps %" PRIu32 "\n", m->caps);
    fprintf(f, "lease_ms %" PRIu32 "\ntimeout_ms %" PRIu32 "\n", m->lease_ms,
            m->timeout_ms);
    fprintf(f, "acquire_timeout_ms %" PRIu32 "\n", m->acquire_timeout_ms);
    fprintf(f, "hold_ms %" PRIu32 "\nlong_hold_ms %" PRIu32 "\n", m->hold_ms,
            m->long_hold_ms);
    fprintf(f, "long_pct %" PRIu32 "\nwrites %" PRIu32 "\n", m->long_pct,
            m->writes);
    fprintf(f, "rmw_pause_us %" PRIu32 "\nthink_ms %" PRIu32 "\n",
            m->rmw_pause_us, m->think_ms);
    fprintf(f, "readers_pct %" PRIu32 "\n", m->readers_pct);
    fprintf(f, "permits %" PRIu32 "\n", m->permits);
    fprintf(f, "elect %d\n", m->elect);
    fprintf(f, "duration_ms %" PRIu32 "\nworkers %u\n", m->duration_ms,
            m->workers);
    fprintf(f, "seed %" PRIu64 "\nfaults %" PRIu32 "\n", m->seed, m->faults);
    fprintf(f, "no_lock %d\nfake_fence %d\n", m->no_lock, m->fake_fence);
    return fclose(f) == 0 ? 0 : -1;
}

static void copy_value(char *dst, size_t cap, const char *v)
{
    snprintf(dst, cap, "%s", v);
}

int hi_meta_read(const char *dir, struct hi_meta *m, char *err, size_t cap)
{
    char path[HI_PATH_MAX], line[HI_PATH_MAX + 64];
    FILE *f = fopen(hi_path(path, sizeof path, dir, "meta"), "re");
    unsigned seen = 0;

    memset(m, 0, sizeof *m);
    if (f == NULL) {
        snprintf(err, cap, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        char *v = strchr(line, ' ');
        unsigned long long n;

        if (v == NULL)
            continue;
        *v++ = '\0';
        v[strcspn(v, "\n")] = '\0';
        n = strtoull(v, NULL, 10);
        seen++;
        if (strcmp(line, "uri") == 0)
            copy_value(m->uri, sizeof m->uri, v);
        else if (strcmp(line, "uri_shown") == 0)
            copy_value(m->uri_shown, sizeof m->uri_shown, v);
        else if (strcmp(line, "scheme") == 0)
            copy_value(m->scheme, sizeof m->scheme, v);
        else if (strcmp(line, "mode") == 0)
            copy_value(m->mode, sizeof m->mode, v);
        else if (strcmp(line, "name") == 0)
            copy_value(m->name, sizeof m->name, v);
        else if (strcmp(line, "server") == 0)
            copy_value(m->server, sizeof m->server,
                       strcmp(v, "-") == 0 ? "" : v);
        else if (strcmp(line, "nodes") == 0)
            m->nodes = (unsigned)n;
        else if (strcmp(line, "caps") == 0)
            m->caps = (uint32_t)n;
        else if (strcmp(line, "lease_ms") == 0)
            m->lease_ms = (uint32_t)n;
        else if (strcmp(line, "timeout_ms") == 0)
            m->timeout_ms = (uint32_t)n;
        else if (strcmp(line, "acquire_timeout_ms") == 0)
            m->acquire_timeout_ms = (uint32_t)n;
        else if (strcmp(line, "hold_ms") == 0)
            m->hold_ms = (uint32_t)n;
        else if (strcmp(line, "long_hold_ms") == 0)
            m->long_hold_ms = (uint32_t)n;
        else if (strcmp(line, "long_pct") == 0)
            m->long_pct = (uint32_t)n;
        else if (strcmp(line, "writes") == 0)
            m->writes = (uint32_t)n;
        else if (strcmp(line, "rmw_pause_us") == 0)
            m->rmw_pause_us = (uint32_t)n;
        else if (strcmp(line, "think_ms") == 0)
            m->think_ms = (uint32_t)n;
        else if (strcmp(line, "readers_pct") == 0)
            m->readers_pct = (uint32_t)n;
        else if (strcmp(line, "permits") == 0)
            m->permits = (uint32_t)n;
        else if (strcmp(line, "elect") == 0)
            m->elect = n != 0;
        else if (strcmp(line, "duration_ms") == 0)
            m->duration_ms = (uint32_t)n;
        else if (strcmp(line, "workers") == 0)
            m->workers = (unsigned)n;
        else if (strcmp(line, "seed") == 0)
            m->seed = n;
        else if (strcmp(line, "faults") == 0)
            m->faults = (uint32_t)n;
        else if (strcmp(line, "no_lock") == 0)
            m->no_lock = n != 0;
        else if (strcmp(line, "fake_fence") == 0)
            m->fake_fence = n != 0;
        else
            seen--;
    }
    fclose(f);
    if (m->uri[0] == '\0' || m->name[0] == '\0' || m->timeout_ms == 0 ||
        m->writes == 0) {
        snprintf(err, cap, "%s is incomplete (%u keys)", path, seen);
        return -1;
    }
    return 0;
}
