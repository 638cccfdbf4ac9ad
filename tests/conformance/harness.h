/*
 * harness.h: helpers the conformance and fault suites share: the URI under
 * test, unique lock names, child processes, and clocks.
 */
#ifndef DLOCK_TEST_HARNESS_H
#define DLOCK_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlock/dlock.h"

/*
 * Parse "--uri URI" from argv (or $DLOCK_TEST_URI). "file://@TMPDIR@" makes
 * a fresh directory, removed by h_cleanup(). "$NAME" in the URI is replaced
 * by the environment variable NAME (with-servers.sh exports the servers'
 * URIs). Exits 2 with a message when no URI is given.
 */
const char *h_setup(int argc, char **argv);
void h_cleanup(void);
/* The URI with extra query parameters appended ("lease=2s&x=y"). */
const char *h_uri_with(const char *params);
/* A scratch directory for counters and flags (made by h_setup). */
const char *h_scratch(void);
/* A lock name unique to this run and test: "<prefix>-<pid>-<n>". */
const char *h_name(const char *prefix);

dlock_client *h_client(const char *uri);
dlock_lock *h_lock(dlock_client *c, const char *name, uint32_t lease_ms,
                   uint32_t flags);
/* A handle on one permit of a semaphore of `permits` (see h_lock). */
dlock_lock *h_permit(dlock_client *c, const char *name, uint32_t lease_ms,
                     uint32_t permits);
uint32_t h_caps(dlock_client *c);

int64_t h_now_ms(void);
/* CLOCK_MONOTONIC in ns: one clock for every process of the machine. */
uint64_t h_now_ns(void);
void h_sleep_ms(uint32_t ms);

/*
 * Start a child process running this test binary in a role:
 * `<self> --uri URI --child ROLE ARG...` (at most 4 args). Children exec
 * rather than run on in a forked copy of a threaded process, which is what
 * real programs do and what ThreadSanitizer requires.
 */
pid_t h_spawn(const char *role, const char *a1, const char *a2,
              const char *a3);
/* The same with any number of args (NULL-terminated). */
pid_t h_spawn_args(const char *role, const char *const *args);
/*
 * In main(): if argv asks for a child role, run the matching entry of roles
 * (NULL-terminated by name) with the role's args and exit with its status.
 */
struct h_role {
    const char *name;
    int (*run)(char **args);
};
void h_child_dispatch(int argc, char **argv, const struct h_role *roles);
/* Wait for a child; its exit status, or 128+signal. */
int h_wait(pid_t pid);

/*
 * The port of the URI's first host, or 0 when it has none (file://) or
 * several hosts (those tests skip).
 */
uint16_t h_uri_port(const char *uri);
/*
 * Cut every established TCP connection of process pid to port, as a
 * network fault would (`ss -K`: both ends see a reset; needs root and a
 * kernel with socket destroy). Returns how many were cut, -1 on failure.
 */
int h_cut_connections(pid_t pid, uint16_t port);
/*
 * End this process's own TCP connections to port at once (shutdown(2)):
 * the next call on one fails at once, before any thread of the library
 * has had time to react. Returns how many.
 */
int h_shutdown_connections(uint16_t port);
/*
 * The descriptors of process pid other than 0, 1, 2 and those in keep
 * (n of them), as "fd -> target" lines in out; returns how many.
 */
int h_foreign_fds(pid_t pid, const int *keep, size_t n, char *out,
                  size_t cap);

/* Append text to the file at path (made if missing) with one write(2)
 * in O_APPEND mode, so lines from several processes never mix; false on
 * failure. */
bool h_append(const char *path, const char *text);

/* A pipe-based one-byte signal between processes. */
struct h_gate {
    int fd[2];
};
void h_gate_init(struct h_gate *g);
void h_gate_open(struct h_gate *g);  /* write a byte */
bool h_gate_wait(struct h_gate *g, uint32_t timeout_ms);
void h_gate_close(struct h_gate *g);

#endif
