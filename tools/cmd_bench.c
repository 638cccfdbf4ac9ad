/*
 * cmd_bench.c: `dlock bench`, the same workloads on every URI given, in one
 * run, so that backends are compared under the same machine state.
 *
 * Per URI, in order:
 *   warm-up      acquire+release cycles and a few floor cycles, not
 *                recorded: loopback latency on these VMs depends on whether
 *                the other vCPU is idle (NOTES.md item 5), and a cold server
 *                (JIT, caches, first connection) is slower still;
 *   uncontended  one handle, acquire+release cycles on one name, timed one
 *                by one; interleaved in rounds with
 *   floor        dlock_bench_floor(): the same number of cycles of the bare
 *                lock protocol (no dlock, no fence) sent with the client
 *                library, so that the two see the same machine state;
 *                dlock's p50 / the floor's p50; and, after each, as many
 *   fence        draws of the mode's fencing token alone
 *                (dlock_bench_fence()): what dlock adds to the bare lock
 *                for a fence, where that is a request of its own;
 *   contended    N worker processes (this program again, in a hidden role:
 *                no fork of a process that already has client threads) on
 *                one name; each writes CLOCK_MONOTONIC into shared memory
 *                right before dlock_release() and the next holder computes
 *                now - that right after its dlock_acquire() returns: the
 *                hand-off latency; acquisitions per worker give fairness;
 *                and each logs every attempt (when it called acquire, when
 *                that returned), so that bench_order.c can judge from the
 *                merged history whether grants went in arrival order and
 *                how many were hand-offs to another process;
 *   contended    with the floor asked for, the contended floor after it:
 *   floor        as many processes (the hidden role __floor_worker) taking
 *                the bare lock with the server's own waiting request
 *                (dlock_bench_floor_wait()), with the same bookkeeping;
 *                dlock's hand-offs/s are judged against theirs;
 *                for both, the CPU per owner change: the workers' CPU
 *                time (every thread) plus the server's by its own count
 *                (dlock_bench_server_cpu(): Redis's INFO cpu), read
 *                around the recorded window, divided by its hand-offs;
 *   many locks   K names held at once by one client while the main thread
 *                only sleeps and looks: the CPU of every other thread (the
 *                watchdog, and any client-library thread) as % of one core,
 *                resident memory per held lock, and renewals per second;
 *   clean-up     once every worker has exited, dlock_bench_forget() of
 *                every name the run used (all dlock-bench-PID-...): their
 *                fence counters, rows, keys and lock files, which the
 *                library itself leaves (a fence must never repeat; a lock
 *                file is never unlinked under a live process).
 *
 * With --from-json it measures nothing: it reads a run's --json back and
 * prints or writes the reports from those figures.
 *
 * Divisions: options; the worker role; the workloads; the driver.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* dlock_bench_floor(), _fence() and _forget() are of the extender tier: the bench, like a backend,
 * reaches below the public API for the bare protocol. */
#include <dlock/backend.h>

#include "bench.h"
#include "bench_results.h"

/* The run's part of every name it locks: the process id and 32 random
 * bits. The clean-up deletes the names' fence counters, and a counter
 * deleted starts the name's tokens again, so a later run must never use
 * a name of an earlier one (a process id alone comes back). */
static const char *run_id(void)
{
    static char id[32];
    uint32_t r = 0;

    if (id[0] == '\0') {
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (uint32_t)bn_now_ns();
        snprintf(id, sizeof id, "%ld-%08" PRIx32, (long)getpid(), r);
    }
    return id;
}

/* Bounds: every workload stops at its duration or at these counts. */
#define SAMPLE_CAP (1u << 21)     /* uncontended cycles kept per URI (16 MiB) */
#define WORKER_SAMPLES (1u << 18) /* hand-offs kept per worker (2 MiB) */
#define ORDER_LOG (1u << 17)      /* attempts logged per worker (3 MiB) */
#define ACQUIRE_TIMEOUT_MS 5000   /* uncontended and many locks: nobody waits */
#define WORKER_TIMEOUT_MS 1000    /* contended: re-check the phase this often */
#define START_TIMEOUT_MS 30000    /* workers to connect and get ready */

/* ---- options ---------------------------------------------------------------- */

static void bench_help(void)
{
    printf(
        "usage: dlock bench [--uri URI]... [OPTIONS]\n"
        "\n"
        "Run every workload on every URI (default: $DLOCK_URI, else file://) "
        "in one\nrun, after a warm-up per URI that is not recorded:\n"
        "  uncontended  one worker, acquire+release on one name: ops/s, p50, "
        "p99, p99.9\n"
        "  floor        the same cycles of the bare lock protocol with the "
        "client\n"
        "               library (no dlock core, no fence), interleaved with "
        "the above;\n"
        "               dlock p50 / floor p50; then as many draws of the "
        "mode's fence\n"
        "               alone (fence p50; none where the lock's own request "
        "makes it)\n"
        "  contended    N worker processes on one name: hand-offs/s, "
        "hand-off latency\n"
        "               (release to the next holder's acquire), fairness "
        "per worker;\n"
        "               and from the workers' logged history: the share "
        "of contested\n"
        "               grants that went in arrival order and the share "
        "of hand-offs\n"
        "               to another process, beside the mode's claim "
        "(`dlock info`); with floor too, the contended floor: as many "
        "processes\n"
        "               taking the bare lock with the server's own waiting "
        "request\n"
        "               (pg_advisory_lock, GET_LOCK(name, t), FOR UPDATE; "
        "Redis: SET NX\n"
        "               spinning; none elsewhere); for both, the CPU per "
        "owner change\n"
        "               (the workers' + the server's own count, where it "
        "says)\n"
        "  many         K names held by one client: watchdog CPU, memory "
        "per lock,\n"
        "               renewals per second\n"
        "Then a table, the speed goals (pass/miss), and optionally JSON, "
        "Markdown\nand an SVG chart. Every key, row and lock file of the "
        "run's names\n(dlock-bench-PID-...) is removed at the end of each "
        "URI.\n"
        "\n"
        "  --uri URI          a backend to measure (repeatable, up to %d)\n"
        "  --workers N        contended worker processes, 2-%d (default 4)\n"
        "  --duration D       per workload, 100ms-10m (default 2s)\n"
        "  --warmup D         per URI, 0-1m (default 1s)\n"
        "  --locks K          many-locks count, 1-100000 (default 1000; at "
        "most %d\n                     on modes that tie a connection to "
        "each lock)\n"
        "  --lease D          many-locks lease, 100ms-1h (default: duration/2,"
        "\n                     so renewals happen while measuring)\n"
        "  --workloads LIST   comma-separated subset of uncontended,floor,"
        "contended,many\n"
        "  --json FILE        every figure and the machine's description\n"
        "  --svg FILE         a chart: a row per URI; uncontended and "
        "hand-off latency\n                     (p50 bar, p99 whisker), "
        "contended throughput, on log\n                     axes; fairness; "
        "the mode's capabilities\n"
        "  --markdown FILE    the tables in Markdown (docs/tradeoffs.md)\n"
        "  --from-json FILE   measure nothing: read the figures a run wrote "
        "with --json\n                     and print the table and goals, "
        "or write --svg and\n                     --markdown from them "
        "(no other option goes with it)\n"
        "  --idle-ok          let idle CPUs halt (by default, where allowed, "
        "the run\n                     holds /dev/cpu_dma_latency at 0 so "
        "round trips are not\n                     fast or slow depending "
        "on what else runs)\n"
        "\n"
        "Progress is shown on stderr when it is a terminal.\n"
        "exit status: 0 every URI measured (goals missed are results, not "
        "failures);\n64 bad option or URI; 65 --from-json FILE is not a "
        "bench's JSON; 66 it\ncannot be read; 69 a service could not be "
        "reached; 70 another failure.\n",
        BENCH_MAX_URIS, BENCH_MAX_WORKERS, BENCH_SESSION_PER_LOCK_MAX);
}

static bool parse_workloads(const char *text, unsigned *out)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"uncontended", WL_UNCONTENDED},
                 {"floor", WL_FLOOR},
                 {"contended", WL_CONTENDED},
                 {"many", WL_MANY},
                 {"all", WL_ALL}};
    char buf[256], *save = NULL;
    unsigned set = 0;

    if (text == NULL || strlen(text) >= sizeof buf || text[0] == '\0')
        goto bad;
    snprintf(buf, sizeof buf, "%s", text);
    for (char *w = strtok_r(buf, ",", &save); w != NULL;
         w = strtok_r(NULL, ",", &save)) {
        size_t i;
        for (i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strcmp(w, names[i].name) == 0)
                break;
        if (i == sizeof names / sizeof names[0]) {
            tool_err("bench", "--workloads: no workload '%s' (there are: "
                     "uncontended, floor, contended, many, all)", w);
            return false;
        }
        set |= names[i].bit;
    }
    if (set == 0)
        goto bad;
    *out = set;
    return true;
bad:
    tool_err("bench", "--workloads: expected a comma-separated list of "
             "uncontended, floor, contended, many");
    return false;
}

/* Can we create FILE? Checked before measuring, not after. */
static bool writable_path(const char *opt, const char *path)
{
    char copy[4096];
    const char *dir;

    if (path == NULL || path[0] == '\0') {
        tool_err("bench", "%s: needs a file name", opt);
        return false;
    }
    snprintf(copy, sizeof copy, "%s", path);
    dir = dirname(copy);
    if (access(dir, W_OK | X_OK) != 0) {
        tool_err("bench", "%s: cannot write in directory '%s': %s", opt, dir,
                 strerror(errno));
        return false;
    }
    return true;
}

/* ---- shared memory of the contended workload --------------------------------- */

enum { PHASE_SETUP, PHASE_WARM, PHASE_RECORD, PHASE_STOP };

struct shm_worker {
    _Atomic uint64_t acquisitions; /* while recording */
    _Atomic uint64_t handoffs;     /* ... whose previous holder was another */
    _Atomic uint64_t timeouts;
    _Atomic uint64_t nsamples;     /* hand-off latencies kept (capped) */
    _Atomic uint64_t norder;       /* attempts logged (capped) */
    char pad[24];                  /* one cache line each */
};

/* What each worker keeps: hand-off latencies, and its attempts. */
struct worker_log {
    uint64_t samples[WORKER_SAMPLES];
    struct bench_order_rec order[ORDER_LOG];
};

struct bench_shm {
    _Atomic int phase;
    _Atomic int ready;
    _Atomic int failed; /* 0, or the first worker failure's dlock code */
    _Atomic int inside; /* 1 + index of the worker inside, or 0 */
    _Atomic int last_holder;            /* 1 + index, or 0 */
    _Atomic uint64_t last_release_ns;   /* CLOCK_MONOTONIC */
    _Atomic uint64_t overlaps;          /* two holders at once: must be 0 */
    /* Attempts that end at or after this are logged (0: none yet). */
    _Atomic uint64_t log_from_ns;
    char errmsg[512];
    struct shm_worker w[BENCH_MAX_WORKERS];
    struct worker_log logs[]; /* one per worker */
};

static size_t shm_size(unsigned workers)
{
    return sizeof(struct bench_shm) +
           (size_t)workers * sizeof(struct worker_log);
}

static void shm_fail(struct bench_shm *shm, int rc, const char *msg)
{
    int zero = 0;

    if (atomic_compare_exchange_strong(&shm->failed, &zero, rc))
        snprintf(shm->errmsg, sizeof shm->errmsg, "%s", msg);
}

/* ---- the worker roles: `dlock bench __worker|__floor_worker FD INDEX PARENT URI NAME` -- */

/* A worker's part of the shared memory (argv: FD INDEX PARENT), NULL if
 * the arguments are wrong or it cannot be mapped; *size to unmap. */
static struct bench_shm *worker_attach(char **argv, unsigned *me,
                                       size_t *size)
{
    struct bench_shm *shm;
    int fd = atoi(argv[2]);

    *me = (unsigned)atoi(argv[3]);
    bn_child_init((pid_t)atol(argv[4]));
    if (*me >= BENCH_MAX_WORKERS)
        return NULL;
    *size = shm_size(*me + 1); /* our own samples are within this much */
    shm = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return shm == MAP_FAILED ? NULL : shm;
}

/* Worker me got the lock at t (and holds it; the caller releases right
 * after): count two holders at once, and while recording the acquisition
 * and a hand-off from another worker with its latency; then say who held
 * last and when it let go. */
static void note_grant(struct bench_shm *shm, unsigned me, uint64_t t)
{
    struct shm_worker *w = &shm->w[me];

    /* Two holders at once would be a broken lock: count it. */
    if (atomic_exchange(&shm->inside, (int)me + 1) != 0)
        atomic_fetch_add(&shm->overlaps, 1);
    int prev = atomic_load(&shm->last_holder);
    uint64_t released = atomic_load(&shm->last_release_ns);
    if (atomic_load(&shm->phase) == PHASE_RECORD) {
        atomic_fetch_add(&w->acquisitions, 1);
        if (prev != 0 && prev != (int)me + 1 && released != 0 &&
            t >= released) {
            uint64_t n = atomic_load(&w->nsamples);
            atomic_fetch_add(&w->handoffs, 1);
            if (n < WORKER_SAMPLES) {
                shm->logs[me].samples[n] = t - released;
                atomic_store(&w->nsamples, n + 1);
            }
        }
    }
    atomic_store(&shm->last_holder, (int)me + 1);
    atomic_store(&shm->inside, 0);
    atomic_store(&shm->last_release_ns, bn_now_ns());
}

static int worker_main(int argc, char **argv)
{
    struct bench_shm *shm;
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    unsigned me;
    size_t size;
    int rc;

    if (argc != 7)
        return EXIT_USAGE;
    if ((shm = worker_attach(argv, &me, &size)) == NULL)
        return EXIT_SOFTWARE;
    struct bench_order_rec *order = shm->logs[me].order;
    struct shm_worker *w = &shm->w[me];

    rc = dlock_client_open(&c, argv[5], NULL);
    if (rc == DLOCK_OK)
        rc = dlock_lock_new(&lk, c, argv[6], NULL);
    if (rc != DLOCK_OK) {
        shm_fail(shm, rc, dlock_client_errmsg(c));
        dlock_client_close(c);
        return tool_exit_for(rc);
    }
    atomic_fetch_add(&shm->ready, 1);
    while (atomic_load(&shm->phase) == PHASE_SETUP)
        bn_sleep_ms(1);

    while (atomic_load(&shm->phase) != PHASE_STOP) {
        uint64_t arrive = bn_now_ns();
        rc = dlock_acquire(lk, WORKER_TIMEOUT_MS);
        uint64_t t = bn_now_ns();
        /* The history: every attempt that ends once logging started
         * (read after t, so no attempt ending later is missed). */
        uint64_t from = atomic_load(&shm->log_from_ns), no;
        if (from != 0 && t >= from &&
            (rc == DLOCK_OK || rc == DLOCK_ETIMEDOUT) &&
            (no = atomic_load(&w->norder)) < ORDER_LOG) {
            order[no] = (struct bench_order_rec){arrive, t,
                                                 rc == DLOCK_OK, 0};
            atomic_store(&w->norder, no + 1);
        }
        if (rc == DLOCK_ETIMEDOUT) {
            atomic_fetch_add(&w->timeouts, 1);
            continue;
        }
        if (rc != DLOCK_OK) {
            shm_fail(shm, rc, dlock_lock_errmsg(lk));
            break;
        }
        note_grant(shm, me, t);
        rc = dlock_release(lk);
        if (rc != DLOCK_OK) {
            shm_fail(shm, rc, dlock_lock_errmsg(lk));
            break;
        }
    }
    dlock_lock_free(lk);
    dlock_client_close(c);
    munmap(shm, size);
    return rc == DLOCK_OK || rc == DLOCK_ETIMEDOUT ? 0 : tool_exit_for(rc);
}

/* The contended floor's worker: the backend's bare waiting request in a
 * loop (dlock_bench_floor_wait), with the same bookkeeping while it holds.
 * It cycles from the start (it must not hold the lock while the others
 * get ready), and counts only while recording; no arrival log. */
struct floor_worker {
    struct bench_shm *shm;
    unsigned me;
    bool ready;
};

static int floor_go_on(void *arg, int held)
{
    struct floor_worker *fw = arg;
    struct bench_shm *shm = fw->shm;

    if (!fw->ready) {
        fw->ready = true;
        atomic_fetch_add(&shm->ready, 1);
    }
    if (held)
        note_grant(shm, fw->me, bn_now_ns());
    else if (atomic_load(&shm->phase) == PHASE_RECORD)
        atomic_fetch_add(&shm->w[fw->me].timeouts, 1);
    return atomic_load(&shm->phase) != PHASE_STOP &&
           atomic_load(&shm->failed) == 0;
}

static int floor_worker_main(int argc, char **argv)
{
    struct floor_worker fw = {NULL, 0, false};
    char err[512] = "";
    size_t size;
    int rc;

    if (argc != 7)
        return EXIT_USAGE;
    if ((fw.shm = worker_attach(argv, &fw.me, &size)) == NULL)
        return EXIT_SOFTWARE;
    rc = dlock_bench_floor_wait(argv[5], argv[6], WORKER_TIMEOUT_MS,
                                floor_go_on, &fw, err, sizeof err);
    if (rc != DLOCK_OK)
        shm_fail(fw.shm, rc, err);
    munmap(fw.shm, size);
    return rc == DLOCK_OK ? 0 : tool_exit_for(rc);
}

/* ---- the workloads -------------------------------------------------------------- */

static const char *g_label; /* "[1/2] file:///..." for the progress line */

static void lat_from(struct bench_lat *l, uint64_t *v, size_t n,
                     double seconds)
{
    long double sum = 0;

    memset(l, 0, sizeof *l);
    if (n == 0)
        return;
    bn_sort(v, n);
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    l->n = n;
    l->seconds = seconds;
    l->per_s = seconds > 0 ? (double)n / seconds : 0;
    l->min = v[0];
    l->max = v[n - 1];
    l->p50 = bn_pct(v, n, 0.50);
    l->p99 = bn_pct(v, n, 0.99);
    l->p999 = bn_pct(v, n, 0.999);
    l->mean = (double)(sum / n);
}

static void status_fail(struct bench_status *st, int rc, const char *what,
                        const char *msg)
{
    st->ran = false;
    st->rc = rc;
    snprintf(st->msg, sizeof st->msg, "%s%s%s", what, msg[0] ? ": " : "",
             msg);
}

/* Cycles until `until` or the cap; returns the count, or -1 with *rc set. */
static long cycles(dlock_lock *lk, uint64_t until, uint64_t *out, size_t cap,
                   int *rc)
{
    size_t n = 0;

    while (n < cap) {
        uint64_t t0 = bn_now_ns();
        if (t0 >= until)
            break;
        if ((*rc = dlock_acquire(lk, ACQUIRE_TIMEOUT_MS)) != DLOCK_OK)
            return -1;
        if ((*rc = dlock_release(lk)) != DLOCK_OK)
            return -1;
        uint64_t t1 = bn_now_ns();
        if (out != NULL)
            out[n] = t1 - t0;
        n++;
    }
    return (long)n;
}

/*
 * n cycles of the floor (fence false: dlock_bench_floor) or n draws of the
 * fence alone, after the *have samples in out; round UINT_MAX is the
 * warm-up (nothing kept). Nothing once an earlier call failed.
 */
static void bare_round(bool fence, const char *uri, const char *name,
                       unsigned round, struct bench_result *r, uint32_t n,
                       uint64_t *out, size_t *have)
{
    struct bench_status *st = fence ? &r->fence_st : &r->floor_st;
    const char *what = fence ? "fence" : "floor";
    char err[512] = "";
    int rc;

    if (st->rc != DLOCK_OK)
        return;
    if (round != UINT_MAX)
        bn_progress("%s: %s, round %u/%u", g_label, what, round + 1,
                    r->rounds);
    rc = fence ? dlock_bench_fence(uri, name, n, out + *have, err, sizeof err)
               : dlock_bench_floor(uri, name, n, out + *have, err,
                                   sizeof err);
    if (rc != DLOCK_OK)
        status_fail(st, rc, what, err);
    else if (round != UINT_MAX)
        *have += n;
}

/* The figures of n floor cycles or fence draws; false if none. */
static bool bare_done(struct bench_status *st, struct bench_lat *lat,
                      uint64_t *v, size_t n, const char *what)
{
    double sec = 0;

    if (n == 0) {
        if (st->rc == DLOCK_OK)
            status_fail(st, DLOCK_ERROR, what, "nothing measured");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        sec += (double)v[i] / 1e9;
    lat_from(lat, v, n, sec);
    st->ran = true;
    return true;
}

/*
 * Uncontended cycles and the floor, interleaved: rounds of dlock cycles
 * for duration/rounds, each followed by the same number of floor cycles.
 */
static void run_uncontended(const struct bench_run *run, const char *uri,
                            dlock_client *c, struct bench_result *r)
{
    bool want_unc = run->workloads & (WL_UNCONTENDED | WL_FLOOR);
    bool want_floor = run->workloads & WL_FLOOR;
    uint64_t *dl = NULL, *fl = NULL, *fe = NULL;
    size_t dn = 0, fn = 0, en = 0;
    double dsec = 0;
    dlock_lock *lk = NULL;
    char name[96];
    long got;
    int rc;

    if (!want_unc)
        return;
    snprintf(name, sizeof name, "dlock-bench-%s-uncontended", run_id());
    dl = malloc(SAMPLE_CAP * sizeof *dl);
    fl = want_floor ? malloc(SAMPLE_CAP * sizeof *fl) : NULL;
    fe = want_floor ? malloc(SAMPLE_CAP * sizeof *fe) : NULL;
    if (dl == NULL || (want_floor && (fl == NULL || fe == NULL))) {
        status_fail(&r->unc_st, DLOCK_ENOMEM, "uncontended", "out of memory");
        goto out;
    }
    if ((rc = dlock_lock_new(&lk, c, name, NULL)) != DLOCK_OK) {
        status_fail(&r->unc_st, rc, "uncontended", dlock_client_errmsg(c));
        goto out;
    }

    /* Warm-up, not recorded: dlock cycles, then as many floor cycles. */
    if (run->warmup_ms > 0) {
        bn_progress("%s: warm-up", g_label);
        got = cycles(lk, bn_now_ns() + (uint64_t)run->warmup_ms * 500000u,
                     dl, SAMPLE_CAP, &rc);
        if (got < 0) {
            status_fail(&r->unc_st, rc, "warm-up", dlock_lock_errmsg(lk));
            goto out;
        }
        if (want_floor && got > 0) {
            size_t none = 0;
            bare_round(false, uri, name, UINT_MAX, r, (uint32_t)got, fl,
                       &none);
            bare_round(true, uri, name, UINT_MAX, r, (uint32_t)got, fe,
                       &none);
        }
    }

    r->rounds = run->duration_ms / 250;
    if (r->rounds < 1)
        r->rounds = 1;
    if (r->rounds > 8)
        r->rounds = 8;
    for (unsigned i = 0; i < r->rounds && dn < SAMPLE_CAP; i++) {
        bn_progress("%s: uncontended, round %u/%u", g_label, i + 1,
                    r->rounds);
        uint64_t t0 = bn_now_ns();
        got = cycles(lk, t0 + (uint64_t)run->duration_ms * 1000000u / r->rounds,
                     dl + dn, SAMPLE_CAP - dn, &rc);
        if (got < 0) {
            status_fail(&r->unc_st, rc, "uncontended", dlock_lock_errmsg(lk));
            goto out;
        }
        dsec += (double)(bn_now_ns() - t0) / 1e9;
        dn += (size_t)got;
        if (want_floor && got > 0) {
            bare_round(false, uri, name, i, r, (uint32_t)got, fl, &fn);
            bare_round(true, uri, name, i, r, (uint32_t)got, fe, &en);
        }
    }
    lat_from(&r->unc, dl, dn, dsec);
    r->unc_st.ran = dn > 0;
    if (want_floor && bare_done(&r->floor_st, &r->floor, fl, fn, "floor") &&
        r->floor.p50 > 0)
        r->floor_ratio = (double)r->unc.p50 / (double)r->floor.p50;
    if (want_floor)
        bare_done(&r->fence_st, &r->fence, fe, en, "fence");
out:
    if (!want_floor && r->floor_st.msg[0] == '\0')
        status_fail(&r->floor_st, DLOCK_OK, "floor", "not requested");
    if (!want_floor && r->fence_st.msg[0] == '\0')
        status_fail(&r->fence_st, DLOCK_OK, "fence", "not requested");
    dlock_lock_free(lk);
    free(dl);
    free(fl);
    free(fe);
}

/* Wait for a phase-long interval, showing progress. */
static void wait_phase(const char *what, uint32_t ms)
{
    uint64_t t0 = bn_now_ns(), end = t0 + (uint64_t)ms * 1000000u;

    for (;;) {
        uint64_t now = bn_now_ns();
        if (now >= end)
            break;
        bn_progress("%s: %s %.1fs/%.1fs", g_label, what,
                    (double)(now - t0) / 1e9, ms / 1e3);
        uint64_t left = (end - now) / 1000000u;
        bn_sleep_ms(left > 200 ? 200 : (uint32_t)left + 1);
    }
}

/* Arrival order and hand-offs, from the workers' logs (bench_order.c). */
static void judge_order(struct bench_shm *shm, unsigned n, uint64_t from,
                        uint64_t until, struct bench_result *r)
{
    const struct bench_order_rec *logs[BENCH_MAX_WORKERS];
    size_t counts[BENCH_MAX_WORKERS];
    bool full[BENCH_MAX_WORKERS];

    for (unsigned i = 0; i < n; i++) {
        logs[i] = shm->logs[i].order;
        counts[i] = atomic_load(&shm->w[i].norder);
        full[i] = counts[i] == ORDER_LOG;
    }
    if (bench_order_judge(logs, counts, full, n, from, until, &r->order) != 0)
        return;
    r->order_seconds = (double)(r->order.until - r->order.from) / 1e9;
    r->order_ran = r->order.grants > 0;
}

/* The CPU time every worker has used so far (all its threads), into *ns;
 * false if one cannot be read (it exited). */
static bool workers_cpu(const pid_t *pids, unsigned n, uint64_t *ns)
{
    *ns = 0;
    for (unsigned i = 0; i < n; i++) {
        clockid_t clk;
        struct timespec ts;
        if (pids[i] <= 0 || clock_getcpuclockid(pids[i], &clk) != 0 ||
            clock_gettime(clk, &ts) != 0)
            return false;
        *ns += (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    return true;
}

/* Readings of the workers' and the server's CPU at one moment. */
struct cpu_mark {
    bool client, server;
    uint64_t client_ns, server_ns;
};

static void cpu_mark(struct cpu_mark *k, const char *uri, const pid_t *pids,
                     unsigned n)
{
    char err[256];

    k->client = workers_cpu(pids, n, &k->client_ns);
    k->server = uri != NULL && uri[0] != '\0' &&
                dlock_bench_server_cpu(uri, &k->server_ns, err,
                                       sizeof err) == DLOCK_OK;
}

/* run->workers processes in role (__worker: dlock; __floor_worker: the
 * bare waiting request) on name; what names the workload in messages.
 * Fills r's contended figures. */
static void run_workers(const struct bench_run *run, const char *uri,
                        const char *role, const char *what, char *name,
                        struct bench_result *r)
{
    unsigned n = (unsigned)run->workers;
    pid_t pids[BENCH_MAX_WORKERS];
    struct bench_shm *shm = MAP_FAILED;
    size_t size = shm_size(n);
    char fdtext[16], idx[16], parent[24], warm[64];
    uint64_t order_from = 0, order_until = 0;
    struct cpu_mark c0, c1;
    int fd;

    memset(pids, 0, sizeof pids);
    r->workers = n;
    snprintf(warm, sizeof warm, "%s warm-up", what);
    fd = memfd_create("dlock-bench", 0); /* inherited by the workers */
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0 ||
        (shm = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
            MAP_FAILED) {
        status_fail(&r->con_st, DLOCK_ERROR, what, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    snprintf(fdtext, sizeof fdtext, "%d", fd);
    snprintf(parent, sizeof parent, "%ld", (long)getpid());
    bn_progress("%s: %s, starting %u workers", g_label, what, n);
    for (unsigned i = 0; i < n; i++) {
        snprintf(idx, sizeof idx, "%u", i);
        char *argv[] = {"dlock", "bench", (char *)role, fdtext, idx, parent,
                        (char *)(uri != NULL ? uri : ""), name, NULL};
        pids[i] = bn_spawn_self(argv, -1, -1);
        if (pids[i] < 0) {
            shm_fail(shm, DLOCK_ERROR, strerror(errno));
            break;
        }
    }
    close(fd);

    /* Every worker connected and ready, or one failed, or too long. */
    uint64_t until = bn_now_ns() + (uint64_t)START_TIMEOUT_MS * 1000000u;
    while (atomic_load(&shm->ready) < (int)n && atomic_load(&shm->failed) == 0) {
        bool exited = false;
        for (unsigned i = 0; i < n; i++) {
            int st;
            if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                pids[i] = 0;
                exited = true;
            }
        }
        if (exited && atomic_load(&shm->failed) == 0)
            shm_fail(shm, DLOCK_ERROR, "a worker exited before it was ready");
        if (bn_now_ns() >= until)
            shm_fail(shm, DLOCK_ETIMEDOUT, "workers not ready after 30s");
        bn_sleep_ms(5);
    }
    if (atomic_load(&shm->failed) == 0) {
        atomic_store(&shm->phase, PHASE_WARM);
        if (run->warmup_ms > 0)
            wait_phase(warm, run->warmup_ms / 2);
        cpu_mark(&c0, uri, pids, n);
        uint64_t t0 = bn_now_ns();
        /* Every attempt ending after log_from is logged; grants are
         * judged from a clock reading taken after that store, so none
         * of the attempts they are judged against can be missing. */
        atomic_store(&shm->log_from_ns, t0);
        order_from = bn_now_ns();
        atomic_store(&shm->phase, PHASE_RECORD);
        wait_phase(what, run->duration_ms);
        order_until = bn_now_ns();
        atomic_store(&shm->phase, PHASE_STOP);
        r->con_seconds = (double)(bn_now_ns() - t0) / 1e9;
        cpu_mark(&c1, uri, pids, n);
        r->cpu.ran = c0.client && c1.client;
        r->cpu.client_ns = r->cpu.ran ? c1.client_ns - c0.client_ns : 0;
        r->cpu.server_ok = c0.server && c1.server &&
                           c1.server_ns >= c0.server_ns;
        r->cpu.server_ns = r->cpu.server_ok ? c1.server_ns - c0.server_ns
                                            : 0;
    }
    atomic_store(&shm->phase, PHASE_STOP);
    bn_progress("%s: %s, stopping workers", g_label, what);
    for (unsigned i = 0; i < n; i++) {
        if (pids[i] <= 0)
            continue;
        int st = bn_reap(pids[i], WORKER_TIMEOUT_MS + ACQUIRE_TIMEOUT_MS + 5000);
        /* A worker that crashed (or a sanitizer that stopped it) makes
         * the figures suspect: say so rather than print them. */
        if (st != 0 && atomic_load(&shm->failed) == 0) {
            char why[96];
            if (st > 0 && WIFSIGNALED(st))
                snprintf(why, sizeof why, "worker %u died of signal %d", i,
                         WTERMSIG(st));
            else
                snprintf(why, sizeof why, "worker %u exited with status %d", i,
                         st > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            shm_fail(shm, DLOCK_ERROR, why);
        }
    }

    if (atomic_load(&shm->failed) != 0) {
        status_fail(&r->con_st, atomic_load(&shm->failed), what,
                    shm->errmsg);
        munmap(shm, size);
        return;
    }
    /* Gather: every kept hand-off latency, and acquisitions per worker. */
    size_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += atomic_load(&shm->w[i].nsamples);
    uint64_t *all = malloc((total > 0 ? total : 1) * sizeof *all);
    size_t k = 0;
    double sum = 0, sumsq = 0;
    r->fair_min = UINT64_MAX;
    for (unsigned i = 0; i < n; i++) {
        struct shm_worker *w = &shm->w[i];
        uint64_t ns = atomic_load(&w->nsamples), a = atomic_load(&w->acquisitions);
        if (all != NULL)
            memcpy(all + k, shm->logs[i].samples, ns * sizeof *all);
        k += ns;
        r->per_worker[i] = a;
        r->acquisitions += a;
        r->handoffs += atomic_load(&w->handoffs);
        r->timeouts += atomic_load(&w->timeouts);
        if (a < r->fair_min)
            r->fair_min = a;
        if (a > r->fair_max)
            r->fair_max = a;
        sum += (double)a;
        sumsq += (double)a * (double)a;
    }
    r->overlaps = atomic_load(&shm->overlaps);
    r->fair_mean = sum / n;
    r->fair_stddev = sqrt(fmax(0, sumsq / n - r->fair_mean * r->fair_mean));
    /* Jain's index: 1 when all equal, 1/n when one worker gets everything. */
    r->fair_jain = sumsq > 0 ? sum * sum / (n * sumsq) : 0;
    r->acq_per_s = r->con_seconds > 0 ? r->acquisitions / r->con_seconds : 0;
    r->handoffs_per_s = r->con_seconds > 0 ? r->handoffs / r->con_seconds : 0;
    if (all != NULL) {
        lat_from(&r->handoff, all, k, r->con_seconds);
        r->handoff.per_s = r->handoffs_per_s;
        r->handoff.n = r->handoffs;
    }
    free(all);
    judge_order(shm, n, order_from, order_until, r);
    munmap(shm, size);
    r->con_st.ran = true;
}

static int stop_at_once(void *arg, int held)
{
    (void)arg;
    (void)held;
    return 0;
}

/* dlock's contended workload; with the floor asked for, the contended
 * floor after it: as many processes taking the bare lock with the
 * server's own waiting request on a name of their own (one cycle first,
 * here, to learn whether the mode has one), whose hand-offs a second
 * dlock's are judged against. */
static void run_contended(const struct bench_run *run, const char *uri,
                          struct bench_result *r)
{
    struct bench_result *f;
    char name[96], err[512] = "";
    int rc;

    snprintf(name, sizeof name, "dlock-bench-%s-contended", run_id());
    run_workers(run, uri, "__worker", "contended", name, r);
    if (!(run->workloads & WL_FLOOR))
        return;
    snprintf(name, sizeof name, "dlock-bench-%s-floor-wait", run_id());
    rc = dlock_bench_floor_wait(uri, name, WORKER_TIMEOUT_MS, stop_at_once,
                                NULL, err, sizeof err);
    if (rc != DLOCK_OK) {
        status_fail(&r->fcon_st, rc, "contended floor", err);
        return;
    }
    if ((f = calloc(1, sizeof *f)) == NULL) {
        status_fail(&r->fcon_st, DLOCK_ENOMEM, "contended floor",
                    "out of memory");
        return;
    }
    run_workers(run, uri, "__floor_worker", "contended floor", name, f);
    r->fcon_st = f->con_st;
    r->fcon_acq_per_s = f->acq_per_s;
    r->fcon_handoffs_per_s = f->handoffs_per_s;
    r->fcon_handoff = f->handoff;
    r->fcon_overlaps = f->overlaps;
    r->fcon_handoffs = f->handoffs;
    r->fcon_cpu = f->cpu;
    free(f);
}

static atomic_ulong g_lost; /* on_lost calls in the many-locks workload */

static void many_on_lost(dlock_lock *lk, int code, const char *why,
                         void *payload)
{
    (void)lk;
    (void)code;
    (void)why;
    (void)payload;
    atomic_fetch_add(&g_lost, 1);
}

static void run_many(const struct bench_run *run, const char *uri,
                     struct bench_result *r)
{
    unsigned long k = run->locks;
    uint32_t lease = run->lease_ms;
    dlock_lock **lks = calloc(k, sizeof *lks);
    uint32_t *prev = calloc(k, sizeof *prev);
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_info info = DLOCK_INFO_INIT;
    unsigned long held = 0;
    char name[128];
    int rc;

    if (lease == 0)
        lease = run->duration_ms / 2 > 100 ? run->duration_ms / 2 : 100;
    r->locks = k;
    r->lease_ms = lease;
    atomic_store(&g_lost, 0);
    if (lks == NULL || prev == NULL) {
        status_fail(&r->many_st, DLOCK_ENOMEM, "many", "out of memory");
        goto out;
    }
    if ((rc = dlock_client_open(&c, uri, NULL)) != DLOCK_OK) {
        status_fail(&r->many_st, rc, "many", dlock_client_errmsg(c));
        goto out;
    }
    dlock_client_info(c, &info);
    lo.lease_ms = lease;
    lo.on_lost = many_on_lost;
    if ((info.caps & DLOCK_CAP_SESSION_PER_LOCK) &&
        k > BENCH_SESSION_PER_LOCK_MAX) {
        r->locks_asked = k;
        k = r->locks = BENCH_SESSION_PER_LOCK_MAX;
    }

    /* Resident memory before the handles exist and after all are held.
     * malloc_trim() first: glibc keeps freed memory (the sample arrays of
     * the workloads before) resident, and new handles would fill it
     * without growing the RSS. */
    malloc_trim(0);
    uint64_t rss0 = bn_rss_bytes();
    uint64_t t0 = bn_now_ns();
    for (unsigned long i = 0; i < k; i++) {
        snprintf(name, sizeof name, "dlock-bench-%s-many-%lu", run_id(), i);
        if ((rc = dlock_lock_new(&lks[i], c, name, &lo)) != DLOCK_OK) {
            status_fail(&r->many_st, rc, "many", dlock_client_errmsg(c));
            goto out;
        }
        if ((rc = dlock_acquire(lks[i], ACQUIRE_TIMEOUT_MS)) != DLOCK_OK) {
            status_fail(&r->many_st, rc, "many", dlock_lock_errmsg(lks[i]));
            goto out;
        }
        held++;
        if (i % 500 == 0)
            bn_progress("%s: many locks, acquired %lu/%lu", g_label, i, k);
    }
    r->acquire_all_s = (double)(bn_now_ns() - t0) / 1e9;
    uint64_t rss1 = bn_rss_bytes();
    r->rss_delta = (int64_t)rss1 - (int64_t)rss0;
    r->bytes_per_lock = (double)r->rss_delta / (double)k;

    /*
     * The measurement: the main thread sleeps, waking every lease/6 to read
     * each lock's remaining lease (no I/O: an atomic and the clock). A lease
     * renewal makes it jump up; a renewal comes at most once per
     * 3/4 x lease/3 (the watchdog's batching takes locks a quarter interval
     * early), so sampling at lease/6 sees each one once. Every CPU cycle
     * outside the main thread is the watchdog's (or a client library's
     * thread's): process CPU minus this thread's CPU.
     */
    r->renew_observable = (info.caps & DLOCK_CAP_LEASE) &&
                          !(info.caps & DLOCK_CAP_NO_RENEW);
    for (unsigned long i = 0; i < k; i++)
        prev[i] = dlock_lock_remaining(lks[i]);
    uint32_t step = lease / 6 > 0 ? lease / 6 : 1;
    uint64_t cpu_p0 = bn_cpu_process_ns(), cpu_m0 = bn_cpu_thread_ns();
    uint64_t w0 = bn_now_ns(), end = w0 + (uint64_t)run->duration_ms * 1000000u;
    uint64_t renewals = 0;
    for (;;) {
        uint64_t now = bn_now_ns();
        if (now >= end)
            break;
        bn_progress("%s: many locks (%lu held) %.1fs/%.1fs", g_label, k,
                    (double)(now - w0) / 1e9, run->duration_ms / 1e3);
        uint64_t left = (end - now) / 1000000u;
        bn_sleep_ms(left > step ? step : (uint32_t)left + 1);
        for (unsigned long i = 0; i < k; i++) {
            uint32_t rem = dlock_lock_remaining(lks[i]);
            if (rem != DLOCK_WAIT_FOREVER && rem > prev[i])
                renewals++;
            prev[i] = rem;
        }
    }
    uint64_t w1 = bn_now_ns();
    uint64_t cpu_p1 = bn_cpu_process_ns(), cpu_m1 = bn_cpu_thread_ns();
    r->many_seconds = (double)(w1 - w0) / 1e9;
    r->main_cpu_s = (double)(cpu_m1 - cpu_m0) / 1e9;
    /* The two clocks are read a few hundred ns apart: clamp at 0. */
    r->wd_cpu_s = ((double)(cpu_p1 - cpu_p0) - (double)(cpu_m1 - cpu_m0)) / 1e9;
    if (r->wd_cpu_s < 0)
        r->wd_cpu_s = 0;
    r->wd_cpu_pct = r->many_seconds > 0 ? 100.0 * r->wd_cpu_s / r->many_seconds
                                        : 0;
    /* The schedule: one renewal per lock every lease/3 (core's rule). */
    r->renew_expected_per_s = (info.caps & DLOCK_CAP_NO_RENEW)
                                  ? 0
                                  : (double)k * 3000.0 / lease;
    r->renewals_observed = renewals;
    r->renew_observed_per_s =
        r->renew_observable && r->many_seconds > 0
            ? (double)renewals / r->many_seconds
            : -1;
    snprintf(
        r->renew_method, sizeof r->renew_method, "%s",
        (info.caps & DLOCK_CAP_NO_RENEW)
            ? "none: this mode has nothing to renew"
        : r->renew_observable
            ? "observed: increases of dlock_lock_remaining() sampled every "
              "lease/6; expected: locks x 3 / lease (one renewal per lease/3)"
            : "expected only: locks x 3 / lease (one renewal per lease/3); a "
              "connection-bound lock's renewal leaves no trace in the public "
              "API");
    for (unsigned long i = 0; i < k; i++)
        if (!dlock_held(lks[i]))
            r->lost++;
    r->many_st.ran = true;

out:
    bn_progress("%s: many locks, releasing", g_label);
    t0 = bn_now_ns();
    for (unsigned long i = 0; lks != NULL && i < k; i++)
        if (lks[i] != NULL && dlock_lock_depth(lks[i]) > 0)
            dlock_release(lks[i]);
    r->release_all_s = held > 0 ? (double)(bn_now_ns() - t0) / 1e9 : 0;
    for (unsigned long i = 0; lks != NULL && i < k; i++)
        dlock_lock_free(lks[i]);
    dlock_client_close(c);
    free(lks);
    free(prev);
}

/* ---- the driver ---------------------------------------------------------------- */

/* Each held lock needs a descriptor on some backends (file: one open file
 * description per lock): raise the soft limit to the hard one. */
static void raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/*
 * Remove what the run's names left (fence counters, rows, keys, lock
 * files): every name is this process's own (dlock-bench-PID-...) and no
 * worker or handle of it is left, so nobody holds, waits for or uses one.
 * The names of workloads that did not run are forgotten too: forgetting a
 * name that left nothing is no error. Through the backend (forget, in the
 * mode's table) because only it knows where a name's traces are: hashed
 * keys, a fence table, a lock file's segment.
 */
static void forget_names(const struct bench_run *run, const char *uri,
                         struct bench_result *r)
{
    static const char *const fixed[] = {"uncontended", "contended",
                                        "floor-wait"};
    unsigned long nf = sizeof fixed / sizeof fixed[0];
    unsigned long k = nf + ((run->workloads & WL_MANY) ? r->locks : 0);
    char **names = calloc(k, sizeof *names);
    char err[512] = "";
    unsigned long made = 0;
    int rc;

    bn_progress("%s: removing the run's names", g_label);
    for (; names != NULL && made < k; made++) {
        names[made] = malloc(96);
        if (names[made] == NULL)
            break;
        if (made < nf)
            snprintf(names[made], 96, "dlock-bench-%s-%s", run_id(),
                     fixed[made]);
        else
            snprintf(names[made], 96, "dlock-bench-%s-many-%lu", run_id(),
                     made - nf);
    }
    if (names == NULL || made < k)
        status_fail(&r->forget_st, DLOCK_ENOMEM, "clean-up", "out of memory");
    else if ((rc = dlock_bench_forget(uri, (const char *const *)names, k, err,
                                      sizeof err)) != DLOCK_OK)
        status_fail(&r->forget_st, rc, "clean-up", err);
    else
        r->forget_st.ran = true;
    for (unsigned long i = 0; names != NULL && i < made; i++)
        free(names[i]);
    free(names);
}

static void run_uri(struct bench_run *run, const char *uri,
                    struct bench_result *r)
{
    dlock_client *c = NULL;
    dlock_info info = DLOCK_INFO_INIT;
    int rc;

    bn_redact(uri, r->uri, sizeof r->uri);
    bn_progress("%s: connecting", g_label);
    rc = dlock_client_open(&c, uri, NULL);
    if (rc != DLOCK_OK) {
        status_fail(&r->open, rc, "open", dlock_client_errmsg(c));
        dlock_client_close(c);
        return;
    }
    r->open.ran = true;
    if (dlock_client_info(c, &info) == DLOCK_OK) {
        /* the redacted URI as the library prints it */
        snprintf(r->uri, sizeof r->uri, "%s", info.uri);
        snprintf(r->scheme, sizeof r->scheme, "%s", info.scheme);
        snprintf(r->mode, sizeof r->mode, "%s", info.mode);
        r->caps = info.caps;
        r->have_info = true;
    }
    run_uncontended(run, uri, c, r);
    dlock_client_close(c);
    if (run->workloads & WL_CONTENDED)
        run_contended(run, uri, r);
    if (run->workloads & WL_MANY)
        run_many(run, uri, r);
    forget_names(run, uri, r);
}

/* The exit status for one failed workload: unreachable wins. */
static int worst(int status, const struct bench_status *st)
{
    int code;

    if (st->ran || st->rc == DLOCK_OK || st->rc == DLOCK_EUNSUPPORTED)
        return status;
    code = tool_exit_for(st->rc);
    if (code == EXIT_CONFLICT || code == EXIT_LOST)
        code = EXIT_SOFTWARE;
    if (status == 0 || code == EXIT_UNAVAILABLE ||
        (code == EXIT_USAGE && status != EXIT_UNAVAILABLE))
        return code;
    return status;
}

/*
 * Keep idle CPUs polling for the run: a PM QoS request of 0 us exit latency
 * through /dev/cpu_dma_latency, held while the descriptor stays open. On
 * VMs whose idle vCPUs halt, each wake-up costs ~20 us and loopback round
 * trips come out fast or slow depending on what else runs, so dlock and
 * the floor could be measured in different modes. Needs root; without it
 * the run goes on and says so.
 */
static int hold_steady(struct bench_run *run)
{
    int32_t zero = 0;
    int fd;

    run->steady = false;
    if (run->idle_ok) {
        snprintf(run->steady_note, sizeof run->steady_note,
                 "not held (--idle-ok)");
        return -1;
    }
    fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, &zero, sizeof zero) != sizeof zero) {
        snprintf(run->steady_note, sizeof run->steady_note,
                 "not held (/dev/cpu_dma_latency: %s)", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    run->steady = true;
    snprintf(run->steady_note, sizeof run->steady_note,
             "held at 0 us via /dev/cpu_dma_latency");
    return fd;
}

/* Write the files asked for; the first failure sets the status if the
 * run had none. */
static int write_outputs(const struct bench_run *run, const char *json,
                         const char *svg, const char *md, int status)
{
    if (json != NULL && bench_write_json(run, json) != 0) {
        tool_err("bench", "--json: cannot write '%s'", json);
        status = status ? status : EXIT_SOFTWARE;
    }
    if (svg != NULL && bench_write_svg(run, svg) != 0) {
        tool_err("bench", "--svg: cannot write '%s': %s", svg, strerror(errno));
        status = status ? status : EXIT_SOFTWARE;
    }
    if (md != NULL && bench_write_markdown(run, md) != 0) {
        tool_err("bench", "--markdown: cannot write '%s': %s", md,
                 strerror(errno));
        status = status ? status : EXIT_SOFTWARE;
    }
    return status;
}

/*
 * --from-json: the table and the goals, or the chart and the Markdown,
 * from the figures of an earlier run, measuring nothing: so that a change
 * to the chart can redraw docs/results/bench.svg from the committed
 * bench.json without servers and without new, different figures.
 */
static int bench_from_json(struct bench_run *run, const char *path,
                           const char *svg, const char *md)
{
    char err[512];

    if (access(path, R_OK) != 0) {
        tool_err("bench", "--from-json: cannot read '%s': %s", path,
                 strerror(errno));
        return EXIT_NOINPUT;
    }
    if (bench_read_json(run, path, err, sizeof err) != 0) {
        tool_err("bench", "--from-json: '%s': %s", path, err);
        return EXIT_DATAERR;
    }
    if (svg == NULL && md == NULL) {
        bench_print_table(run);
        return 0;
    }
    return write_outputs(run, NULL, svg, md, 0);
}

static int bench_run_cmd(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, 'u'},
        {"workers", required_argument, NULL, 'w'},
        {"duration", required_argument, NULL, 'd'},
        {"warmup", required_argument, NULL, 'W'},
        {"locks", required_argument, NULL, 'k'},
        {"lease", required_argument, NULL, 'l'},
        {"workloads", required_argument, NULL, 'L'},
        {"json", required_argument, NULL, 'j'},
        {"svg", required_argument, NULL, 's'},
        {"markdown", required_argument, NULL, 'm'},
        {"from-json", required_argument, NULL, 'F'},
        {"idle-ok", no_argument, NULL, 'I'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct bench_run run; /* large: keep it off the stack */
    const char *uris[BENCH_MAX_URIS];
    const char *json = NULL, *svg = NULL, *md = NULL, *from_json = NULL;
    bool measuring = false; /* an option that only a measurement takes */
    size_t nuris = 0;
    int opt, status = 0;

    if (argc > 1 && strcmp(argv[1], "__worker") == 0)
        return worker_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "__floor_worker") == 0)
        return floor_worker_main(argc, argv);

    memset(&run, 0, sizeof run);
    run.duration_ms = 2000;
    run.warmup_ms = 1000;
    run.workers = 4;
    run.locks = 1000;
    run.workloads = WL_ALL;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        measuring = measuring || strchr("uwdWklLI", opt) != NULL;
        switch (opt) {
        case 'u':
            if (nuris == BENCH_MAX_URIS) {
                tool_err("bench", "--uri: at most %d", BENCH_MAX_URIS);
                return EXIT_USAGE;
            }
            if (optarg[0] == '\0') {
                tool_err("bench", "--uri: empty URI");
                return EXIT_USAGE;
            }
            uris[nuris++] = optarg;
            break;
        case 'w':
            if (!tool_uint("bench", "--workers", optarg, 2, BENCH_MAX_WORKERS,
                           &run.workers))
                return EXIT_USAGE;
            break;
        case 'd':
            if (!tool_duration("bench", "--duration", optarg,
                               &run.duration_ms))
                return EXIT_USAGE;
            if (run.duration_ms < 100 || run.duration_ms > 600000) {
                tool_err("bench", "--duration: '%s' is outside 100ms-10m",
                         optarg);
                return EXIT_USAGE;
            }
            break;
        case 'W':
            if (!tool_duration("bench", "--warmup", optarg, &run.warmup_ms))
                return EXIT_USAGE;
            if (run.warmup_ms > 60000) {
                tool_err("bench", "--warmup: '%s' is more than 1m", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'k':
            if (!tool_uint("bench", "--locks", optarg, 1, 100000, &run.locks))
                return EXIT_USAGE;
            break;
        case 'l':
            if (!tool_duration("bench", "--lease", optarg, &run.lease_ms))
                return EXIT_USAGE;
            if (run.lease_ms < 100 || run.lease_ms > 3600000) {
                tool_err("bench", "--lease: '%s' is outside 100ms-1h", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'L':
            if (!parse_workloads(optarg, &run.workloads))
                return EXIT_USAGE;
            break;
        case 'j':
            json = optarg;
            if (!writable_path("--json", json))
                return EXIT_USAGE;
            break;
        case 's':
            svg = optarg;
            if (!writable_path("--svg", svg))
                return EXIT_USAGE;
            break;
        case 'm':
            md = optarg;
            if (!writable_path("--markdown", md))
                return EXIT_USAGE;
            break;
        case 'F':
            from_json = optarg;
            break;
        case 'I':
            run.idle_ok = true;
            break;
        case 'h':
            bench_help();
            return 0;
        case ':':
            tool_err("bench", "%s: needs a value", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            tool_err("bench", "unknown option '%s' (try `dlock bench --help`)",
                     argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        tool_err("bench", "unexpected argument '%s' (URIs go after --uri)",
                 argv[optind]);
        return EXIT_USAGE;
    }
    if (from_json != NULL) {
        if (measuring || json != NULL) {
            tool_err("bench", "--from-json measures nothing: only --svg and "
                              "--markdown go with it");
            return EXIT_USAGE;
        }
        return bench_from_json(&run, from_json, svg, md);
    }
    if (nuris == 0)
        uris[nuris++] = NULL; /* $DLOCK_URI or the build's default */

    signal(SIGPIPE, SIG_IGN);
    raise_nofile();
    int qos_fd = hold_steady(&run);
    time_t now = time(NULL);
    struct tm tm;
    strftime(run.date, sizeof run.date, "%Y-%m-%dT%H:%M:%SZ",
             gmtime_r(&now, &tm));
    snprintf(run.version, sizeof run.version, "%s", dlock_version());
    bench_machine_describe(&run.machine);
    run.n = nuris;
    for (size_t i = 0; i < nuris; i++) {
        char label[200], red[160];
        bn_redact(uris[i], red, sizeof red);
        snprintf(label, sizeof label, "[%zu/%zu] %s", i + 1, nuris, red);
        g_label = label;
        run_uri(&run, uris[i], &run.r[i]);
        g_label = NULL;
    }
    bn_progress_done();

    if (qos_fd >= 0)
        close(qos_fd); /* ends the request */
    bench_print_table(&run);
    for (size_t i = 0; i < run.n; i++) {
        struct bench_result *r = &run.r[i];
        const struct bench_status *sts[] = {&r->open,   &r->unc_st,
                                            &r->floor_st, &r->fence_st,
                                            &r->con_st, &r->many_st,
                                            &r->forget_st};
        for (size_t k = 0; k < sizeof sts / sizeof sts[0]; k++)
            if (!sts[k]->ran && sts[k]->rc != DLOCK_OK &&
                sts[k]->rc != DLOCK_EUNSUPPORTED)
                tool_err("bench", "[%zu] %s: %s", i + 1, r->uri, sts[k]->msg);
        status = worst(status, &r->open);
        status = worst(status, &r->unc_st);
        status = worst(status, &r->con_st);
        status = worst(status, &r->many_st);
        if (r->floor_st.rc != DLOCK_EUNSUPPORTED)
            status = worst(status, &r->floor_st);
        if (r->fence_st.rc != DLOCK_EUNSUPPORTED)
            status = worst(status, &r->fence_st);
        if (r->forget_st.rc != DLOCK_EUNSUPPORTED)
            status = worst(status, &r->forget_st);
    }
    return write_outputs(&run, json, svg, md, status);
}

const struct tool_cmd tool_bench = {
    "bench", "compare backends: latency, floor, hand-off, many locks",
    bench_run_cmd, bench_help,
};
