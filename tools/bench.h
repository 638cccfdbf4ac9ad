/*
 * bench.h: what `dlock bench`, `dlock scenario` and `dlock demo` share
 * besides tool.h: clocks, sorted samples and percentiles, child processes
 * that are this same program in a hidden role, a progress line, and URI
 * text handling (hiding passwords, finding the first host:port). Like the
 * rest of tools/, it uses only the public API and knows no backend.
 */
#ifndef DLOCK_BENCH_H
#define DLOCK_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tool.h"

/* ---- clocks ---------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds: comparable across processes of one boot. */
uint64_t bn_now_ns(void);
/* Sleep ms milliseconds (restarted after signals). */
void bn_sleep_ms(uint32_t ms);
/* CPU time of the whole process / of the calling thread, in nanoseconds. */
uint64_t bn_cpu_process_ns(void);
uint64_t bn_cpu_thread_ns(void);
/* Resident set size of this process in bytes (/proc/self/statm), or 0. */
uint64_t bn_rss_bytes(void);

/* ---- samples ---------------------------------------------------------------- */

void bn_sort(uint64_t *v, size_t n);
/* Nearest-rank percentile of sorted v[0..n): q in (0, 1]. 0 when n == 0. */
uint64_t bn_pct(const uint64_t *sorted, size_t n, double q);
/* "850ns", "21.4us", "1.25ms", "2.50s". */
const char *bn_fmt_ns(uint64_t ns, char *buf, size_t cap);

/* ---- text ------------------------------------------------------------------ */

/* The URI with the password of its userinfo replaced by ***. */
void bn_redact(const char *uri, char *out, size_t cap);
/*
 * The first host:port of the URI's authority. Sets host (without IPv6
 * brackets), *port, and the byte range [*start, *end) of "host:port" in
 * uri, so that a caller can splice in another address. False when the URI
 * names no host or no explicit port.
 */
bool bn_uri_first_hostport(const char *uri, char *host, size_t hostcap,
                           int *port, size_t *start, size_t *end);
/* The same for the index-th (0-based) host of a list "h1:p1,h2:p2". */
bool bn_uri_hostport(const char *uri, size_t index, char *host,
                     size_t hostcap, int *port, size_t *start, size_t *end);
/* How many hosts the URI's authority lists (0: none, as in file://). */
size_t bn_uri_nhosts(const char *uri);
/* Append the capability names of caps to buf, comma-separated. */
void bn_caps_text(uint32_t caps, char *buf, size_t cap);

/* ---- child processes --------------------------------------------------------- */

/*
 * Start this program again with argv (argv[0] is ignored and replaced),
 * stdin/stdout on the given fds (-1: inherit), every other descriptor that
 * is not close-on-exec inherited. SIGPIPE is reset to its default in the
 * child. Returns the pid, or -1 with errno set.
 */
pid_t bn_spawn_self(char *const argv[], int in_fd, int out_fd);
/*
 * Child side of bn_spawn_self: die with the parent (PR_SET_PDEATHSIG), and
 * exit now if the parent is already gone.
 */
void bn_child_init(pid_t parent);
/* Wait up to ms for pid to exit; SIGKILL it after that. Returns the wait
 * status, or -1 if it could not be reaped. */
int bn_reap(pid_t pid, uint32_t ms);

/* ---- a TCP proxy (bench_proxy.c) ---------------------------------------------- */

struct bn_proxy;
/* Listen on 127.0.0.1 at a free port and forward to host:port. */
int bn_proxy_start(struct bn_proxy **out, const char *host, int port,
                   char *err, size_t errlen);
int bn_proxy_port(const struct bn_proxy *p);
/* Reset every proxied connection and refuse (reset) new ones; returns
 * when it is done. */
void bn_proxy_down(struct bn_proxy *p);
/* Forward new connections again. */
void bn_proxy_up(struct bn_proxy *p);
/* Connections forwarded, cut by bn_proxy_down(), refused while down. */
void bn_proxy_counts(struct bn_proxy *p, unsigned *served, unsigned *cut,
                     unsigned *refused);
void bn_proxy_stop(struct bn_proxy *p);

/* ---- progress ------------------------------------------------------------------ */

/* A one-line progress report on stderr, only when stderr is a terminal;
 * each call replaces the line. bn_progress_done() clears it. */
void bn_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bn_progress_done(void);

#endif
