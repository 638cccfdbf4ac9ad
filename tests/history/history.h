/*
 * history.h: the fault-injection history checker shared between its roles.
 *
 * One program, `history`, in four roles:
 *   run      (run.c)     makes a run directory, starts the workers, injects
 *                        faults (the nemesis) and runs the checker at the end;
 *   worker   (worker.c)  one contender: acquire, write through the fenced
 *                        store and the unfenced counter (a reader, on a mode
 *                        with shared locks, and a permit holder of a
 *                        semaphore: read the counter), release;
 *                        logs every call with CLOCK_MONOTONIC timestamps;
 *   check    (check.c)   reads the logs of a run directory and reports;
 *   summary  (check.c)   one Markdown table from several runs' JSON.
 *
 * Files of a run directory (all text, one record per line):
 *   meta                 "key value" lines: the run's parameters and what
 *                        dlock_client_info() said about the URI
 *   run.log              the supervisor and nemesis: workers started and
 *                        reaped, faults with start and end
 *   w<slot>.<gen>.log    one worker process each (see worker.c)
 *   store, store.log     the fenced store's state and its decisions
 *   counter              the unfenced counter
 *   holder               "pid seq plan_ms": the last grant, for the nemesis
 *   long                 present: the next grant holds long (for the nemesis)
 *   stop                 present: workers finish their cycle and exit
 *
 * Only the public API of dlock is used, and the evidence is the logs, the
 * store and the counter, never dlock's own counters.
 */
#ifndef DLOCK_TEST_HISTORY_H
#define DLOCK_TEST_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HI_PATH_MAX 4096

/* ---- fault kinds ----------------------------------------------------------- */

/* The nemesis's faults, in the order of the report. The first three hit a
 * worker process, the rest need a server. */
enum hi_fault {
    HI_F_STOP_SHORT,   /* SIGSTOP the holder for a quarter lease */
    HI_F_STOP_LONG,    /* SIGSTOP the holder for 1.5 leases */
    HI_F_KILL,         /* SIGKILL the holder; a new worker takes its slot */
    HI_F_CUT_HOLDING,  /* ss -K the holder's TCP connections to the server,
                        * early in a holding that outlasts the cut */
    HI_F_CUT_RELEASE,  /* the same in a short holding: its release finds
                        * the connection gone */
    HI_F_RESTART,      /* stop (graceful) and start one server node */
    HI_F_CRASH,        /* SIGKILL one server node, then start it */
    HI_F_MAJORITY,     /* restart a majority of the nodes, one after another */
    HI_F_PAUSE_SHORT,  /* SIGSTOP one server node for a quarter lease */
    HI_F_PAUSE_LONG,   /* SIGSTOP one server node for 1.5 leases */
    HI_F_COUNT
};

const char *hi_fault_name(int f);
int hi_fault_by_name(const char *name);
/* Does fault f need a server (--server)? */
bool hi_fault_needs_server(int f);
/* Does fault f strike a holding asked to outlast it (so that the holder's
 * view of the lock after the fault is seen), rather than the next grant? */
bool hi_fault_aimed(int f);

/* ---- the run's parameters (the meta file) ----------------------------------- */

struct hi_meta {
    char uri[HI_PATH_MAX];      /* as given to workers (password and all) */
    char uri_shown[HI_PATH_MAX]; /* dlock_client_info's, password *** */
    char scheme[32], mode[32];
    char name[64];              /* the lock's name, unique per run */
    char server[16];            /* with-servers.sh kind, "" for none */
    unsigned nodes;             /* server nodes of that kind */
    uint32_t caps;              /* DLOCK_CAP_* of the mode */
    uint32_t lease_ms, timeout_ms; /* what the client says it uses */
    uint32_t acquire_timeout_ms;
    uint32_t hold_ms, long_hold_ms, long_pct, writes;
    uint32_t rmw_pause_us, think_ms;
    uint32_t readers_pct;       /* share of reader cycles (modes with
                                 * DLOCK_CAP_SHARED), 0 to 100 */
    bool elect;                 /* every cycle campaigns in an election
                                 * (dlock_elect_*): a leader is a holder,
                                 * its term the fence */
    uint32_t permits;           /* > 0: every cycle takes one permit of a
                                 * semaphore of this many (modes with
                                 * DLOCK_CAP_PERMITS); 0: a lock */
    uint32_t duration_ms;
    unsigned workers;
    uint64_t seed;
    uint32_t faults;            /* bit per enum hi_fault */
    bool no_lock, fake_fence;
};

int hi_meta_write(const char *dir, const struct hi_meta *m);
int hi_meta_read(const char *dir, struct hi_meta *m, char *err, size_t cap);

/*
 * The checker's bounds, all derived from the URI's lease= and timeout=
 * (see check.c for the reasoning).
 */
struct hi_bounds {
    uint64_t slack_ns;    /* a call may take its own timeout + this */
    uint64_t stall_ns;    /* free lock with waiters, no fault: at most this */
    uint64_t recovery_ns; /* a fault explains a stall until end + this */
};
void hi_bounds_of(const struct hi_meta *m, struct hi_bounds *b);

/* ---- small helpers ---------------------------------------------------------- */

uint64_t hi_now_ns(void);
void hi_sleep_ns(uint64_t ns);
/* splitmix64: the seeded random source of the nemesis and the workers. */
uint64_t hi_rand(uint64_t *state);
/* Uniform in [lo, hi]. */
uint64_t hi_rand_range(uint64_t *state, uint64_t lo, uint64_t hi);

/* "dir/name" into buf; exits 2 if it does not fit. */
const char *hi_path(char *buf, size_t cap, const char *dir, const char *name);
/* Open for appending (created 0644, close-on-exec); -1 and a message. */
int hi_log_open(const char *path);
/* One line, one write(2): whole lines survive a SIGKILL of the writer. */
void hi_logf(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Write a small file whole (truncating). */
int hi_write_file(const char *path, const char *text);
bool hi_exists(const char *path);

/* ---- roles ------------------------------------------------------------------ */

int hi_run_main(int argc, char **argv);
int hi_worker_main(int argc, char **argv);
int hi_check_main(int argc, char **argv);
int hi_summary_main(int argc, char **argv);

/*
 * The checker proper: analyse dir, print the report to stdout, write JSON
 * to json_path (NULL: none). *nviol gets the number of violations; expect
 * (comma-separated kinds, or NULL) turns the verdict around: 0 when every
 * kind listed was found. Returns the exit status: 0 clean, 1 violations
 * (or, with expect, a kind not found), 2 the run cannot be read.
 */
int hi_check(const char *dir, const char *json_path, const char *expect);

#endif
