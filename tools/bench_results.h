/*
 * bench_results.h: the figures `dlock bench` measures, shared by
 * cmd_bench.c (which measures them) and bench_report.c (which prints the
 * table, the goals, Markdown, JSON and the SVG chart, and reads the JSON
 * back for `dlock bench --from-json`).
 */
#ifndef DLOCK_BENCH_RESULTS_H
#define DLOCK_BENCH_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_URIS 32
#define BENCH_MAX_WORKERS 64

/* Workloads (--workloads) */
#define WL_UNCONTENDED (1u << 0)
#define WL_FLOOR (1u << 1)
#define WL_CONTENDED (1u << 2)
#define WL_MANY (1u << 3)
#define WL_ALL (WL_UNCONTENDED | WL_FLOOR | WL_CONTENDED | WL_MANY)

/* The speed goals of issue 7, checked in the bench's own output. */
#define GOAL_FLOOR_RATIO 1.15    /* uncontended p50 / floor p50 */
#define GOAL_HANDOFF_RTTS 3.0    /* hand-off p50 / round trip */
#define GOAL_CONTENDED_SHARE 0.8 /* hand-offs/s / the contended floor's */
#define GOAL_WATCHDOG_PCT 5.0    /* % of one core ... */
#define GOAL_WATCHDOG_LOCKS 10000 /* ... for this many held locks */
#define GOAL_MEMORY_BYTES 1024   /* RSS growth per held lock, same count */

/* Many locks on a session-per-lock mode: each holds a connection of its
 * own, and servers refuse connections long before 1000 (PostgreSQL's
 * max_connections is 100 by default, MySQL's 151). */
#define BENCH_SESSION_PER_LOCK_MAX 32

/* Latency distribution of one series of cycles. */
struct bench_lat {
    uint64_t n;       /* cycles measured */
    double seconds;   /* wall time they took */
    double per_s;     /* n / seconds */
    uint64_t min, p50, p99, p999, max;
    double mean;
};

/* CPU time over the recorded window of a contended workload: the worker
 * processes' (every thread: clock_getcpuclockid) and, where the mode can
 * say (dlock_bench_server_cpu), the server's by its own count. */
struct bench_cpu {
    bool ran, server_ok;
    uint64_t client_ns, server_ns;
};

/* One acquire attempt of a contended worker, on CLOCK_MONOTONIC: when it
 * called dlock_acquire() and when that returned (granted or not). */
struct bench_order_rec {
    uint64_t arrive, end;
    uint32_t granted, pad;
};

/* What bench_order_judge() finds in the merged log (bench_order.c). */
struct bench_order {
    uint64_t from, until;   /* the window judged (grants in [from, until)) */
    uint64_t grants;        /* grants judged */
    uint64_t contested;     /* ... with at least one other worker waiting */
    uint64_t in_order;      /* ... of those, to the earliest arrival */
    uint64_t with_previous; /* grants with an earlier grant in the log */
    uint64_t handoffs;      /* ... of those, the earlier one to another worker */
    double mean_waiting;    /* other workers waiting, per grant */
    double in_order_share;  /* in_order / contested; -1 if none contested */
    double handoff_share;   /* handoffs / with_previous; -1 if none */
};

/*
 * Judge the grants in [from, until) of workers' logs (logs[w][0..n[w]),
 * each in time order; full[w]: w's log filled, so the window ends where
 * it stopped). -1 if out of memory.
 */
int bench_order_judge(const struct bench_order_rec *const *logs,
                      const size_t *n, const bool *full, unsigned workers,
                      uint64_t from, uint64_t until,
                      struct bench_order *out);

/* A workload's outcome besides its figures. */
struct bench_status {
    bool ran;       /* measured (figures valid) */
    int rc;         /* DLOCK_OK, or the failure that stopped it */
    char msg[512];  /* why it failed or was skipped; "" if it ran */
};

struct bench_result {
    char uri[1024];   /* password hidden */
    char scheme[32];
    char mode[64];
    uint32_t caps;
    bool have_info;
    struct bench_status open; /* the first client could not be opened */

    /* uncontended, and the floor interleaved with it */
    struct bench_status unc_st;
    struct bench_lat unc;
    unsigned rounds;
    struct bench_status floor_st; /* rc DLOCK_EUNSUPPORTED: no floor */
    struct bench_lat floor;
    double floor_ratio;           /* unc.p50 / floor.p50, 0 if none */
    /* the fence alone, as many draws as floor cycles (dlock_bench_fence) */
    struct bench_status fence_st; /* rc DLOCK_EUNSUPPORTED: no fence apart */
    struct bench_lat fence;

    /* contended */
    struct bench_status con_st;
    unsigned workers;
    double con_seconds;
    uint64_t acquisitions, handoffs, timeouts, overlaps;
    double acq_per_s, handoffs_per_s;
    struct bench_lat handoff;       /* release-to-next-acquire */
    uint64_t per_worker[BENCH_MAX_WORKERS];
    uint64_t fair_min, fair_max;
    double fair_mean, fair_stddev, fair_jain;
    struct bench_cpu cpu;           /* divided by handoffs: per owner change */
    /* the contended floor: as many processes taking the bare lock with
     * the server's waiting request (dlock_bench_floor_wait) on a name of
     * their own; rc DLOCK_EUNSUPPORTED: the mode has none */
    struct bench_status fcon_st;
    double fcon_acq_per_s, fcon_handoffs_per_s;
    struct bench_lat fcon_handoff;
    uint64_t fcon_overlaps, fcon_handoffs;
    struct bench_cpu fcon_cpu;
    /* arrival order and hand-offs, from the workers' logged history */
    bool order_ran;
    struct bench_order order;
    double order_seconds; /* the window judged; -1: not in a JSON read */

    /* many locks */
    struct bench_status many_st;
    unsigned long locks;
    unsigned long locks_asked; /* --locks, when capped (session-per-lock) */
    uint32_t lease_ms;
    double many_seconds, acquire_all_s, release_all_s;
    double renew_expected_per_s;
    bool renew_observable;
    uint64_t renewals_observed;
    double renew_observed_per_s;
    char renew_method[256]; /* how the figures were obtained */
    unsigned long lost;
    double wd_cpu_s, wd_cpu_pct, main_cpu_s;
    int64_t rss_delta;
    double bytes_per_lock;

    /* clean-up: dlock_bench_forget() of every name of the run */
    struct bench_status forget_st; /* rc DLOCK_EUNSUPPORTED: cannot */
};

/* The machine a run was measured on: described when the run starts, or
 * read back with the figures, so that a chart redrawn later names the
 * machine that measured it. */
struct bench_machine {
    char sysname[65], release[65], arch[65];
    char cpu_model[128];
    long nproc;
    char cpuidle_driver[64], cpuidle_governor[64];
};

struct bench_run {
    /* parameters */
    uint32_t duration_ms, warmup_ms, lease_ms; /* lease_ms 0: duration/2 */
    /* Idle vCPUs kept polling by holding /dev/cpu_dma_latency at 0 for the
     * run (NOTES.md: an idle vCPU that halts costs ~20 us per wake-up and
     * makes loopback latency bimodal); steady_note says why not if not. */
    bool idle_ok, steady;
    char steady_note[96];
    unsigned long workers, locks;
    unsigned workloads;
    /* when, with what, where */
    char date[40];
    char version[32]; /* dlock_version() of the run */
    struct bench_machine machine;
    /* results */
    size_t n;
    struct bench_result r[BENCH_MAX_URIS];
};

/* Goal verdicts: "pass", "miss", or "n/a" with a reason. */
struct bench_goal {
    const char *status;
    double value;  /* the measured ratio or percentage; < 0 if none */
    double limit;
    char note[160];
};
void bench_goal_floor(const struct bench_result *r, struct bench_goal *g);
void bench_goal_handoff(const struct bench_result *r, struct bench_goal *g);
void bench_goal_contended(const struct bench_result *r, struct bench_goal *g);
void bench_goal_watchdog(const struct bench_result *r, struct bench_goal *g);
void bench_goal_memory(const struct bench_result *r, struct bench_goal *g);

/* bench_report.c */
void bench_machine_describe(struct bench_machine *m);
void bench_print_table(const struct bench_run *run);
int bench_write_markdown(const struct bench_run *run, const char *path);
int bench_write_json(const struct bench_run *run, const char *path);
int bench_write_svg(const struct bench_run *run, const char *path);
/* Fill *run from the JSON bench_write_json() wrote. -1 with a message in
 * err when the file cannot be read or is not a bench's JSON. */
int bench_read_json(struct bench_run *run, const char *path, char *err,
                    size_t errlen);

#endif
