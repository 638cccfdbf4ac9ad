/*
 * worker.c: one contender of a history run, and the two shared resources
 * it writes to (the fenced store and the unfenced counter).
 *
 *   history worker --dir DIR --slot S --gen G
 *
 * The parameters come from DIR/meta. Until DIR/stop appears the worker
 * loops: acquire (timeout acquire_timeout_ms); on success publish itself in
 * DIR/holder, then hold for a planned time doing evenly spaced writes, each
 *   sample dlock_held() -> write (slot, grant, fence) to the fenced store
 *   -> read-modify-write the unfenced counter -> sample dlock_held()
 * stopping early when a sample says 0 (or DIR/stop appears); then release.
 * on_lost is logged.
 * With readers_pct > 0, on a mode with DLOCK_CAP_SHARED, each cycle is a
 * reader's with that probability: it acquires through a second handle made
 * with DLOCK_LOCK_SHARED and, instead of writing, reads the unfenced counter
 * at evenly spaced moments from the start to the end of the holding (the
 * same planned time as a writer's), each read bracketed by held samples.
 * With permits > 0 (a mode with DLOCK_CAP_PERMITS) the handle takes one
 * permit of a semaphore of that many, and every cycle is a permit holder's:
 * like a reader's (no writes: several hold at once), logged with a
 * trailing p instead of s.
 * With elect, the worker is a candidate of an election on the name
 * (dlock_elect_*): "acquire" joins and awaits leadership (leaving again
 * if the wait times out), held() is dlock_elect_is_leader(), the fence is
 * the term, and "release" resigns; a lost leadership is logged as L.
 * With no_lock the lock calls are pretended (always granted, always held):
 * the checker's own test. With fake_fence the fence written and logged is a
 * per-process counter instead of dlock_fence(): the other test.
 *
 * The log DIR/w<slot>.<gen>.log, one record per line, times are
 * CLOCK_MONOTONIC nanoseconds, written with one write(2) each so that a
 * SIGKILL leaves whole lines (the checker ignores a torn last one):
 *   H t pid slot gen                      hello
 *   O0 t0 / O t0 t1 rc                    dlock_client_open begins / returned
 *   A0 t0 [s] / A t0 t1 rc fence seq [s]  dlock_acquire begins / returned
 *                                         (seq numbers this process's grants
 *                                         of both kinds, 0 when rc is not
 *                                         OK; a trailing s: the shared handle;
 *                                         p: a permit)
 *   W seq k th1 h1 [tw0 tw1 res fence tr v tw th2 h2]
 *                                         write k of grant seq: held sample
 *                                         h1 taken at th1; if 1, the store
 *                                         call [tw0, tw1] with result A or R
 *                                         for fence, the counter read at tr
 *                                         (value v) and written at tw, and
 *                                         the held sample h2 at th2
 *   V seq k th1 h1 [f tr v th2 h2]        read k of shared grant seq: held
 *                                         sample h1 at th1; if 1, the fence
 *                                         f, the counter read at tr (value
 *                                         v) and the held sample h2 at th2
 *   R0 t0 seq / R t0 t1 rc seq            dlock_release begins / returned
 *   L t code                              on_lost ran (watchdog thread)
 *   C0 t0 / C t0 t1                       closing the client
 *   E t text                              the worker's own failure
 *   X t                                   normal exit
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "history.h"

struct worker {
    struct hi_meta m;
    const char *dir;
    unsigned slot, gen;
    int log;             /* this worker's log */
    int store, store_log;
    int counter;
    uint64_t rng;
    uint64_t fake_fence;
    dlock_client *c;
    dlock_lock *lk;         /* the writer's handle */
    dlock_lock *lk_shared;  /* the reader's, NULL without readers */
    dlock_lock *cur;        /* the one this cycle uses */
    dlock_election *e;      /* with elect: the candidate */
    bool readers;           /* readers_pct > 0 on a mode with shared */
};

#define NS_PER_MS 1000000u

/* ---- the fenced store -------------------------------------------------------- */

/*
 * An external arbiter every worker shares, the way a database would check a
 * fencing token: one file holding "highest serial", guarded by flock. A write
 * is accepted when its fence is at least the highest accepted so far (equal:
 * the same holding writing again), rejected otherwise. Every decision goes
 * to store.log under the same lock, so that file is in decision order:
 *   serial t A|R fence highest_before slot.gen seq
 */
static char store_write(struct worker *w, uint64_t fence, uint32_t seq)
{
    char buf[64] = {0};
    unsigned long long highest = 0, serial = 0;
    char res;

    while (flock(w->store, LOCK_EX) != 0)
        if (errno != EINTR)
            return 'E';
    if (pread(w->store, buf, sizeof buf - 1, 0) > 0)
        sscanf(buf, "%llu %llu", &highest, &serial);
    res = fence >= highest ? 'A' : 'R';
    serial++;
    snprintf(buf, sizeof buf, "%020llu %020llu\n",
             res == 'A' ? (unsigned long long)fence : highest, serial);
    if (pwrite(w->store, buf, strlen(buf), 0) != (ssize_t)strlen(buf))
        res = 'E';
    hi_logf(w->store_log, "%llu %" PRIu64 " %c %" PRIu64 " %llu %u.%u %" PRIu32,
            serial, hi_now_ns(), res, fence, highest, w->slot, w->gen, seq);
    flock(w->store, LOCK_UN);
    return res;
}

/* ---- the unfenced counter ------------------------------------------------------ */

/* The counter's value (a reader's look at it, and a writer's first step). */
static unsigned long long counter_read(struct worker *w, uint64_t *t_read)
{
    char buf[32] = {0};

    *t_read = hi_now_ns();
    if (pread(w->counter, buf, sizeof buf - 1, 0) < 0)
        hi_logf(w->log, "E %" PRIu64 " counter read: %s", hi_now_ns(),
                strerror(errno));
    return strtoull(buf, NULL, 10);
}

/* Read, pause, write + 1, with no arbitration at all: two writers that
 * overlap lose an update. Returns the value read. */
static unsigned long long counter_rmw(struct worker *w, uint64_t *t_read,
                                      uint64_t *t_write)
{
    char buf[32];
    unsigned long long v = counter_read(w, t_read);

    if (w->m.rmw_pause_us > 0)
        hi_sleep_ns((uint64_t)w->m.rmw_pause_us * 1000u);
    snprintf(buf, sizeof buf, "%020llu\n", v + 1);
    if (pwrite(w->counter, buf, strlen(buf), 0) != (ssize_t)strlen(buf))
        hi_logf(w->log, "E %" PRIu64 " counter write: %s", hi_now_ns(),
                strerror(errno));
    *t_write = hi_now_ns();
    return v;
}

/* ---- the lock, or its pretence -------------------------------------------------- */

static void on_lost(dlock_lock *lk, int code, const char *why, void *payload)
{
    const struct worker *w = payload;

    (void)lk;
    (void)why;
    hi_logf(w->log, "L %" PRIu64 " %d", hi_now_ns(), code);
}

/* A candidate's change of leadership: a loss (not a resignation) is
 * logged as a lock's on_lost is. */
static void on_change(dlock_election *e, int is_leader, uint64_t term,
                      const char *why, void *payload)
{
    const struct worker *w = payload;

    (void)e;
    (void)term;
    if (!is_leader && strcmp(why, "resigned") != 0)
        hi_logf(w->log, "L %" PRIu64 " %d", hi_now_ns(), DLOCK_ELOST);
}

static int open_client(struct worker *w)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    char stop[HI_PATH_MAX];

    hi_path(stop, sizeof stop, w->dir, "stop");
    /* The server may be down (a restart) when a replacement starts. */
    while (!hi_exists(stop)) {
        uint64_t t0 = hi_now_ns();
        int rc;

        hi_logf(w->log, "O0 %" PRIu64, t0);
        rc = dlock_client_open(&w->c, w->m.uri, NULL);
        hi_logf(w->log, "O %" PRIu64 " %" PRIu64 " %d", t0, hi_now_ns(), rc);
        if (rc == DLOCK_OK)
            break;
        dlock_client_close(w->c);
        w->c = NULL;
        hi_sleep_ns(100 * NS_PER_MS);
    }
    if (w->c == NULL)
        return -1;
    if (w->m.elect) {
        dlock_elect_options eo = DLOCK_ELECT_OPTIONS_INIT;

        eo.on_change = on_change;
        eo.payload = w;
        if (dlock_elect_new(&w->e, w->c, w->m.name, &eo) != DLOCK_OK) {
            hi_logf(w->log, "E %" PRIu64 " elect_new: %s", hi_now_ns(),
                    dlock_client_errmsg(w->c));
            return -1;
        }
        return 0;
    }
    o.on_lost = on_lost;
    o.payload = w;
    o.permits = w->m.permits;
    if (dlock_lock_new(&w->lk, w->c, w->m.name, &o) != DLOCK_OK) {
        hi_logf(w->log, "E %" PRIu64 " lock_new: %s", hi_now_ns(),
                dlock_client_errmsg(w->c));
        return -1;
    }
    o.flags = DLOCK_LOCK_SHARED;
    o.permits = 0;
    if (w->readers &&
        dlock_lock_new(&w->lk_shared, w->c, w->m.name, &o) != DLOCK_OK) {
        hi_logf(w->log, "E %" PRIu64 " lock_new shared: %s", hi_now_ns(),
                dlock_client_errmsg(w->c));
        return -1;
    }
    return 0;
}

static int elect_acquire(struct worker *w)
{
    int rc = dlock_elect_join(w->e);

    if (rc != DLOCK_OK)
        return rc;
    rc = dlock_elect_await(w->e, w->m.acquire_timeout_ms);
    if (rc != DLOCK_OK && rc != DLOCK_ETIMEDOUT)
        hi_logf(w->log, "E %" PRIu64 " elect_await: %s", hi_now_ns(),
                dlock_elect_errmsg(w->e));
    if (rc != DLOCK_OK)
        dlock_elect_resign(w->e); /* leave, as a timed-out acquire does */
    return rc;
}

static int lock_acquire(struct worker *w)
{
    if (w->m.no_lock)
        return DLOCK_OK;
    if (w->e != NULL)
        return elect_acquire(w);
    return dlock_acquire(w->cur, w->m.acquire_timeout_ms);
}

static int lock_held(struct worker *w)
{
    if (w->m.no_lock)
        return 1;
    return w->e != NULL ? dlock_elect_is_leader(w->e) : dlock_held(w->cur);
}

static uint64_t lock_fence(struct worker *w)
{
    if (w->m.no_lock)
        return 0;
    return w->e != NULL ? dlock_elect_term(w->e) : dlock_fence(w->cur);
}

static int lock_release(struct worker *w)
{
    if (w->m.no_lock)
        return DLOCK_OK;
    return w->e != NULL ? dlock_elect_resign(w->e) : dlock_release(w->cur);
}

/* ---- one holding ------------------------------------------------------------------ */

static uint64_t plan_hold_ns(struct worker *w)
{
    char path[HI_PATH_MAX], mine[HI_PATH_MAX], name[64], buf[32] = {0};
    uint64_t hold = (uint64_t)w->m.hold_ms * NS_PER_MS;
    int fd;

    /* The nemesis asks for a holding of N ms by writing N to DIR/long; the
     * first worker to rename it away takes it. */
    snprintf(name, sizeof name, "long.%ld", (long)getpid());
    hi_path(mine, sizeof mine, w->dir, name);
    if (rename(hi_path(path, sizeof path, w->dir, "long"), mine) == 0 &&
        (fd = open(mine, O_RDONLY | O_CLOEXEC)) >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        unsigned long long want = n > 0 ? strtoull(buf, NULL, 10) : 0;

        close(fd);
        unlink(mine);
        if (want > 0)
            return (uint64_t)want * NS_PER_MS;
    }
    if (hi_rand(&w->rng) % 100 < w->m.long_pct)
        return (uint64_t)w->m.long_hold_ms * NS_PER_MS;
    return hi_rand_range(&w->rng, hold / 2, hold + hold / 2);
}

static void publish_holder(struct worker *w, uint32_t seq, uint64_t plan)
{
    char tmp[HI_PATH_MAX], path[HI_PATH_MAX], text[96], name[64];

    snprintf(name, sizeof name, "holder.%ld", (long)getpid());
    snprintf(text, sizeof text, "%ld %" PRIu32 " %" PRIu64 "\n",
             (long)getpid(), seq, plan / NS_PER_MS);
    if (hi_write_file(hi_path(tmp, sizeof tmp, w->dir, name), text) != 0 ||
        rename(tmp, hi_path(path, sizeof path, w->dir, "holder")) != 0)
        hi_logf(w->log, "E %" PRIu64 " holder file: %s", hi_now_ns(),
                strerror(errno));
}

/* The held sample that opens step k of a holding (a write, or a reader's
 * read): when it says 0, logs "<tag> seq k t 0" and returns 0. */
static int step_held(struct worker *w, char tag, uint32_t seq, uint64_t k,
                     uint64_t *t)
{
    int h;

    *t = hi_now_ns();
    h = lock_held(w);
    if (!h)
        hi_logf(w->log, "%c %" PRIu32 " %" PRIu64 " %" PRIu64 " 0", tag, seq,
                k, *t);
    return h;
}

/* Plan a holding and publish it: its length in *plan, the number of
 * steps (writes, or a reader's reads after the first) returned. */
static uint64_t begin_holding(struct worker *w, uint32_t seq, uint64_t *plan)
{
    uint64_t spacing = (uint64_t)w->m.hold_ms * NS_PER_MS / w->m.writes;
    uint64_t n;

    *plan = plan_hold_ns(w);
    n = spacing > 0 ? *plan / spacing : w->m.writes;
    publish_holder(w, seq, *plan);
    return n > 0 ? n : 1;
}

static void hold(struct worker *w, uint32_t seq, uint64_t t_granted,
                 uint64_t fence, const char *stop)
{
    uint64_t plan, n = begin_holding(w, seq, &plan);

    for (uint64_t k = 0; k < n; k++) {
        uint64_t th1, tw0, tw1, tr, tw, th2, target, now;
        unsigned long long v;
        int h2;
        char res;

        if (!step_held(w, 'W', seq, k, &th1))
            return;
        /* The fence of this grant, asked again at every write: it must not
         * change while the lock is held. */
        if (!w->m.fake_fence)
            fence = lock_fence(w);
        tw0 = hi_now_ns();
        res = store_write(w, fence, seq);
        tw1 = hi_now_ns();
        v = counter_rmw(w, &tr, &tw);
        th2 = hi_now_ns();
        h2 = lock_held(w);
        hi_logf(w->log,
                "W %" PRIu32 " %" PRIu64 " %" PRIu64 " 1 %" PRIu64 " %" PRIu64
                " %c %" PRIu64 " %" PRIu64 " %llu %" PRIu64 " %" PRIu64 " %d",
                seq, k, th1, tw0, tw1, res, fence, tr, v, tw, th2, h2);
        if (!h2)
            return;
        /* At the end of the run a long holding is cut short. */
        if (hi_exists(stop))
            return;
        target = t_granted + plan * (k + 1) / n;
        now = hi_now_ns();
        if (target > now)
            hi_sleep_ns(target - now);
    }
}

/*
 * A reader's holding: no writes; the counter read at evenly spaced moments
 * from the grant to the end of the planned time, so that the first read is
 * at the start and the last at the end. A writer inside the holding would
 * show as a change between two reads.
 */
static void hold_shared(struct worker *w, uint32_t seq, uint64_t t_granted,
                        const char *stop)
{
    uint64_t plan, n = begin_holding(w, seq, &plan);

    for (uint64_t k = 0; k <= n; k++) {
        uint64_t th1, tr, th2, target, now, fence;
        unsigned long long v;
        int h2;

        target = t_granted + plan * k / n;
        now = hi_now_ns();
        if (target > now)
            hi_sleep_ns(target - now);
        if (!step_held(w, 'V', seq, k, &th1))
            return;
        fence = lock_fence(w);
        v = counter_read(w, &tr);
        th2 = hi_now_ns();
        h2 = lock_held(w);
        hi_logf(w->log,
                "V %" PRIu32 " %" PRIu64 " %" PRIu64 " 1 %" PRIu64 " %" PRIu64
                " %llu %" PRIu64 " %d",
                seq, k, th1, fence, tr, v, th2, h2);
        if (!h2 || hi_exists(stop))
            return;
    }
}

/* ---- the loop ------------------------------------------------------------------------ */

static int open_files(struct worker *w)
{
    char path[HI_PATH_MAX], name[64];

    snprintf(name, sizeof name, "w%u.%u.log", w->slot, w->gen);
    w->log = hi_log_open(hi_path(path, sizeof path, w->dir, name));
    w->store_log = hi_log_open(hi_path(path, sizeof path, w->dir, "store.log"));
    w->store = open(hi_path(path, sizeof path, w->dir, "store"),
                    O_RDWR | O_CLOEXEC);
    w->counter = open(hi_path(path, sizeof path, w->dir, "counter"),
                      O_RDWR | O_CLOEXEC);
    if (w->log < 0 || w->store_log < 0 || w->store < 0 || w->counter < 0) {
        fprintf(stderr, "history worker: cannot open the files of %s\n",
                w->dir);
        return -1;
    }
    return 0;
}

static void cycle(struct worker *w, uint32_t *seq, const char *stop)
{
    uint64_t t0, t1, fence;
    bool permit = w->m.permits > 0;
    bool shared = permit || (w->readers &&
                             hi_rand(&w->rng) % 100 < w->m.readers_pct);
    const char *kind = permit ? " p" : shared ? " s" : "";
    int rc;

    w->cur = shared && !permit ? w->lk_shared : w->lk;
    t0 = hi_now_ns();
    hi_logf(w->log, "A0 %" PRIu64 "%s", t0, kind);
    rc = lock_acquire(w);
    t1 = hi_now_ns();
    if (rc == DLOCK_OK) {
        ++*seq;
        fence = w->m.fake_fence ? ++w->fake_fence : lock_fence(w);
    } else {
        fence = 0;
    }
    hi_logf(w->log, "A %" PRIu64 " %" PRIu64 " %d %" PRIu64 " %" PRIu32 "%s",
            t0, t1, rc, fence, rc == DLOCK_OK ? *seq : 0, kind);
    if (rc == DLOCK_OK && shared)
        hold_shared(w, *seq, t1, stop);
    else if (rc == DLOCK_OK)
        hold(w, *seq, t1, fence, stop);
    else if (rc != DLOCK_ELOST)
        return;
    /* Held, or lost before this acquire (the handle wants a release). */
    t0 = hi_now_ns();
    hi_logf(w->log, "R0 %" PRIu64 " %" PRIu32, t0, *seq);
    rc = lock_release(w);
    hi_logf(w->log, "R %" PRIu64 " %" PRIu64 " %d %" PRIu32, t0, hi_now_ns(), rc,
            *seq);
}

int hi_worker_main(int argc, char **argv)
{
    struct worker w;
    char err[256], stop[HI_PATH_MAX];
    pid_t parent = getppid();
    uint32_t seq = 0;

    memset(&w, 0, sizeof w);
    w.slot = w.gen = UINT32_MAX;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            w.dir = argv[i + 1];
        else if (strcmp(argv[i], "--slot") == 0)
            w.slot = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--gen") == 0)
            w.gen = (unsigned)strtoul(argv[i + 1], NULL, 10);
    }
    if (w.dir == NULL || w.slot == UINT32_MAX || w.gen == UINT32_MAX) {
        fprintf(stderr, "usage: history worker --dir DIR --slot S --gen G\n");
        return 2;
    }
    /* Never outlive the supervisor (it resumes and reaps us). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        return 2;
    if (hi_meta_read(w.dir, &w.m, err, sizeof err) != 0) {
        fprintf(stderr, "history worker: %s\n", err);
        return 2;
    }
    if (open_files(&w) != 0)
        return 2;
    w.readers = w.m.readers_pct > 0 && (w.m.caps & DLOCK_CAP_SHARED) != 0 &&
                !w.m.elect;
    w.rng = w.m.seed ^ ((uint64_t)w.slot << 32) ^ ((uint64_t)w.gen << 48) ^
            0x5eed;
    hi_logf(w.log, "H %" PRIu64 " %ld %u %u", hi_now_ns(), (long)getpid(),
            w.slot, w.gen);
    if (!w.m.no_lock && open_client(&w) != 0) {
        dlock_client_close(w.c);
        hi_logf(w.log, "X %" PRIu64, hi_now_ns());
        return hi_exists(hi_path(stop, sizeof stop, w.dir, "stop")) ? 0 : 1;
    }
    hi_path(stop, sizeof stop, w.dir, "stop");
    while (!hi_exists(stop)) {
        cycle(&w, &seq, stop);
        if (w.m.think_ms > 0)
            hi_sleep_ns(hi_rand_range(&w.rng, 0,
                                      (uint64_t)w.m.think_ms * NS_PER_MS));
    }
    if (!w.m.no_lock) {
        uint64_t t0 = hi_now_ns();

        hi_logf(w.log, "C0 %" PRIu64, t0);
        dlock_elect_free(w.e);
        dlock_lock_free(w.lk_shared);
        dlock_lock_free(w.lk);
        dlock_client_close(w.c);
        hi_logf(w.log, "C %" PRIu64 " %" PRIu64, t0, hi_now_ns());
    }
    hi_logf(w.log, "X %" PRIu64, hi_now_ns());
    return 0;
}
