/*
 * bench_util.c: helpers of bench.h shared by `dlock bench`, `dlock
 * scenario` and `dlock demo`: clocks and CPU time, percentiles, URI text,
 * spawning this program in a hidden role, and the progress line.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

/* ---- clocks ---------------------------------------------------------------- */

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bn_now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

void bn_sleep_ms(uint32_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

uint64_t bn_cpu_process_ns(void)
{
    return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

uint64_t bn_cpu_thread_ns(void)
{
    return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t bn_rss_bytes(void)
{
    unsigned long size, resident;
    FILE *f = fopen("/proc/self/statm", "r");
    int n;

    if (f == NULL)
        return 0;
    n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    if (n != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* ---- samples ---------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

void bn_sort(uint64_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_u64);
}

uint64_t bn_pct(const uint64_t *sorted, size_t n, double q)
{
    size_t rank;

    if (n == 0)
        return 0;
    /* Nearest rank: the smallest value with at least q of the samples at
     * or below it. The epsilon keeps 0.99 * 100 from rounding to 100.0001. */
    rank = (size_t)((double)n * q - 1e-9);
    if ((double)rank < (double)n * q - 1e-9)
        rank++;
    if (rank == 0)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

const char *bn_fmt_ns(uint64_t ns, char *buf, size_t cap)
{
    if (ns < 1000)
        snprintf(buf, cap, "%lluns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(buf, cap, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, cap, "%.2fms", (double)ns / 1e6);
    else
        snprintf(buf, cap, "%.2fs", (double)ns / 1e9);
    return buf;
}

/* ---- text ------------------------------------------------------------------ */

void bn_redact(const char *uri, char *out, size_t cap)
{
    struct tool_uri_spans s;

    if (uri == NULL)
        snprintf(out, cap, "(default URI)");
    else if (!tool_uri_spans(uri, &s) || s.colon == SIZE_MAX)
        snprintf(out, cap, "%s", uri);
    else
        snprintf(out, cap, "%.*s***%s", (int)(s.colon + 1), uri, uri + s.at);
}

/* Where the index-th host of the authority [h, b) begins, or SIZE_MAX. */
static size_t nth_host(const char *uri, size_t h, size_t b, size_t index)
{
    while (index > 0) {
        size_t i = h;
        while (i < b && uri[i] != ',') {
            if (uri[i] == '[') { /* an IPv6 literal may hold no comma, */
                const char *close = memchr(uri + i, ']', b - i);
                if (close == NULL) /* but skip it whole all the same */
                    return SIZE_MAX;
                i = (size_t)(close - uri);
            }
            i++;
        }
        if (i >= b)
            return SIZE_MAX;
        h = i + 1;
        index--;
    }
    return h < b ? h : SIZE_MAX;
}

bool bn_uri_hostport(const char *uri, size_t index, char *host,
                     size_t hostcap, int *port, size_t *start, size_t *end)
{
    struct tool_uri_spans s;
    size_t b, h, he;
    char *endp;
    long p;

    if (uri == NULL || !tool_uri_spans(uri, &s))
        return false;
    b = s.end;
    h = nth_host(uri, s.at == SIZE_MAX ? s.auth : s.at + 1, b, index);
    if (h == SIZE_MAX)
        return false;
    if (uri[h] == '[') {
        const char *close = memchr(uri + h, ']', b - h);
        if (close == NULL)
            return false;
        he = (size_t)(close - uri) + 1;
        if (he - h - 2 + 1 > hostcap)
            return false;
        snprintf(host, hostcap, "%.*s", (int)(he - h - 2), uri + h + 1);
    } else {
        he = h + strcspn(uri + h, ":,/?#");
        if (he > b)
            he = b;
        if (he == h || he - h + 1 > hostcap)
            return false;
        snprintf(host, hostcap, "%.*s", (int)(he - h), uri + h);
    }
    if (he >= b || uri[he] != ':')
        return false; /* no explicit port */
    errno = 0;
    p = strtol(uri + he + 1, &endp, 10);
    if (endp == uri + he + 1 || errno != 0 || p <= 0 || p > 65535 ||
        (size_t)(endp - uri) > b || (*endp != ',' && (size_t)(endp - uri) != b))
        return false;
    *port = (int)p;
    *start = h;
    *end = (size_t)(endp - uri);
    return true;
}

bool bn_uri_first_hostport(const char *uri, char *host, size_t hostcap,
                           int *port, size_t *start, size_t *end)
{
    return bn_uri_hostport(uri, 0, host, hostcap, port, start, end);
}

size_t bn_uri_nhosts(const char *uri)
{
    struct tool_uri_spans s;
    size_t n = 0, h;

    if (uri == NULL || !tool_uri_spans(uri, &s))
        return 0;
    h = s.at == SIZE_MAX ? s.auth : s.at + 1;
    while (nth_host(uri, h, s.end, n) != SIZE_MAX)
        n++;
    return n;
}

void bn_caps_text(uint32_t caps, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL;
         bit <<= 1) {
        if (!(caps & bit))
            continue;
        int n = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
                         dlock_cap_name(bit));
        if (n < 0 || (size_t)n >= cap - len)
            break;
        len += (size_t)n;
    }
    if (len == 0)
        snprintf(buf, cap, "none");
}

/* ---- child processes --------------------------------------------------------- */

pid_t bn_spawn_self(char *const argv[], int in_fd, int out_fd)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t def;
    pid_t pid;
    int rc;

    posix_spawn_file_actions_init(&fa);
    if (in_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawnattr_init(&attr);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    rc = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

void bn_child_init(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(EXIT_SOFTWARE);
}

int bn_reap(pid_t pid, uint32_t ms)
{
    uint64_t until = bn_now_ns() + (uint64_t)ms * 1000000u;
    int status;

    if (pid <= 0)
        return -1;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        if (bn_now_ns() >= until)
            break;
        bn_sleep_ms(5);
    }
    kill(pid, SIGKILL);
    kill(pid, SIGCONT); /* a stopped child dies only once continued */
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

/* ---- progress ------------------------------------------------------------------ */

static int progress_tty = -1;
static bool progress_shown;

void bn_progress(const char *fmt, ...)
{
    char line[200];
    va_list ap;

    if (progress_tty < 0)
        progress_tty = isatty(STDERR_FILENO);
    if (!progress_tty)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* \r and "erase to end of line": the next report overwrites this. */
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    progress_shown = true;
}

void bn_progress_done(void)
{
    if (progress_shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        progress_shown = false;
    }
}
