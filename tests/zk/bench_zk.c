/*
 * bench_zk.c: measure the zk backend against its raw floor, on a real
 * server (not a test: numbers are printed, never asserted).
 *
 *   tests/servers/with-servers.sh zk -- build/tests/zk/bench_zk \
 *       --uri '$DLOCK_TEST_ZK_URI?lease=3s' [--n 2000] [--threads 8] \
 *       [--permits P]
 *
 * 1. floor: dlock_bench_floor(), the bare libzookeeper_mt cycle (create
 *    EPHEMERAL_SEQUENTIAL, get children, delete), n cycles;
 * 2. dlock: dlock_acquire(lk, 10 s) + dlock_release(lk) on one handle,
 *    uncontended, n cycles (the same three requests plus core);
 * 3. hand-off: `threads` threads, each with its own client (its own
 *    ZooKeeper session), contend for one lock; the latency of a hand-off is
 *    from the holder's dlock_release() call to the next holder's
 *    dlock_acquire() returning.
 * Floor and dlock alternate in rounds after a warm-up, so both see the
 * same machine state (see /work/shared/NOTES.md on idle vCPUs).
 * With --permits P, every dlock handle takes a permit of a semaphore of P
 * (Curator's InterProcessSemaphoreV2 layout) instead of the lock; the
 * floor stays the lock's, for comparison. With P > 1 a hand-off's
 * latency is from the latest release, whoever made it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock/backend.h" /* dlock_bench_floor */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, size_t n)
{
    double sum = 0;

    qsort(ns, n, sizeof *ns, cmp_u64);
    for (size_t i = 0; i < n; i++)
        sum += (double)ns[i];
    printf("%-26s n=%-6zu p50 %7.3f ms  p90 %7.3f ms  p99 %7.3f ms  "
           "mean %7.3f ms\n",
           what, n, ns[n / 2] / 1e6, ns[n * 9 / 10] / 1e6,
           ns[n * 99 / 100] / 1e6, sum / (double)n / 1e6);
}

static const char *uri;
static uint32_t permits; /* 0: locks */

/* A handle on name: the lock, or a permit of a semaphore of `permits`. */
static int handle_new(dlock_lock **lk, dlock_client *c, const char *name)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;

    o.permits = permits;
    return dlock_lock_new(lk, c, name, &o);
}

static int floor_run(const char *name, uint32_t n, uint64_t *ns)
{
    char err[512] = "";
    int rc = dlock_bench_floor(uri, name, n, ns, err, sizeof err);
    if (rc != DLOCK_OK)
        fprintf(stderr, "floor: %s\n", err);
    return rc;
}

static int dlock_run(dlock_lock *lk, uint32_t timeout_ms, uint32_t n,
                     uint64_t *ns)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        if (dlock_acquire(lk, timeout_ms) != DLOCK_OK ||
            dlock_release(lk) != DLOCK_OK) {
            fprintf(stderr, "dlock: %s\n", dlock_lock_errmsg(lk));
            return DLOCK_ERROR;
        }
        ns[i] = now_ns() - t0;
    }
    return DLOCK_OK;
}

/* ---- hand-off ------------------------------------------------------------ */

struct handoff {
    const char *name;
    uint32_t cycles;
    atomic_uint_fast64_t released_at; /* 0: nobody released yet */
    uint64_t *lat;
    atomic_size_t nlat;
    pthread_barrier_t start;
};

static void *handoff_thread(void *arg)
{
    struct handoff *h = arg;
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;

    if (dlock_client_open(&c, uri, NULL) != DLOCK_OK ||
        handle_new(&lk, c, h->name) != DLOCK_OK) {
        fprintf(stderr, "hand-off: %s\n", dlock_client_errmsg(c));
        exit(1);
    }
    pthread_barrier_wait(&h->start);
    for (uint32_t i = 0; i < h->cycles; i++) {
        if (dlock_acquire(lk, DLOCK_WAIT_FOREVER) != DLOCK_OK) {
            fprintf(stderr, "hand-off: %s\n", dlock_lock_errmsg(lk));
            exit(1);
        }
        uint64_t t = now_ns(), r = atomic_load(&h->released_at);
        if (r != 0)
            h->lat[atomic_fetch_add(&h->nlat, 1)] = t - r;
        atomic_store(&h->released_at, now_ns());
        dlock_release(lk);
    }
    dlock_lock_free(lk);
    dlock_client_close(c);
    return NULL;
}

int main(int argc, char **argv)
{
    uint32_t n = 2000, threads = 8, rounds = 3;
    char name[64];
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    uint64_t *ns, *all_floor, *all_dlock, *all_try;
    size_t nf = 0, nd = 0, nt = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--uri") == 0)
            uri = argv[i + 1];
        else if (strcmp(argv[i], "--n") == 0)
            n = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--permits") == 0)
            permits = (uint32_t)atoi(argv[i + 1]);
    }
    if (uri == NULL || n == 0 || threads < 2) {
        fprintf(stderr,
                "usage: %s --uri URI [--n N] [--threads T>=2] "
                "[--permits P]\n",
                argv[0]);
        return 2;
    }
    /* $VAR in the URI, as the tests write it. */
    if (uri[0] == '$' && getenv(uri + 1) == NULL) {
        const char *q = strchr(uri, '?');
        char var[128];
        snprintf(var, sizeof var, "%.*s",
                 (int)((q ? (size_t)(q - uri) : strlen(uri)) - 1), uri + 1);
        if (getenv(var) != NULL) {
            static char buf[1024];
            snprintf(buf, sizeof buf, "%s%s", getenv(var), q ? q : "");
            uri = buf;
        }
    }
    snprintf(name, sizeof name, "bench-%d", (int)getpid());
    ns = calloc(n, sizeof *ns);
    all_floor = calloc((size_t)n * rounds, sizeof *ns);
    all_dlock = calloc((size_t)n * rounds, sizeof *ns);
    all_try = calloc((size_t)n * rounds, sizeof *ns);
    if (dlock_client_open(&c, uri, NULL) != DLOCK_OK ||
        handle_new(&lk, c, name) != DLOCK_OK) {
        fprintf(stderr, "open: %s\n", dlock_client_errmsg(c));
        return 1;
    }
    printf("uri %s, %u cycles x %u rounds, after a warm-up%s\n", uri, n,
           rounds, permits > 0 ? ", dlock rows take permits" : "");
    /* Warm-up: the server's JIT, the client's connections. */
    if (floor_run(name, n, ns) != DLOCK_OK ||
        dlock_run(lk, 10000, n, ns) != DLOCK_OK)
        return 1;
    for (uint32_t r = 0; r < rounds; r++) {
        if (floor_run(name, n, ns) != DLOCK_OK)
            return 1;
        memcpy(all_floor + nf, ns, n * sizeof *ns);
        nf += n;
        report("floor (bare client)", ns, n);
        /* The floor's session just closed: let the server settle. */
        usleep(300000);
        if (dlock_run(lk, 10000, n, ns) != DLOCK_OK)
            return 1;
        memcpy(all_dlock + nd, ns, n * sizeof *ns);
        nd += n;
        report("dlock acquire+release", ns, n);
        if (dlock_run(lk, 0, n, ns) != DLOCK_OK)
            return 1;
        memcpy(all_try + nt, ns, n * sizeof *ns);
        nt += n;
        report("dlock try+release", ns, n);
    }
    printf("-- all rounds --\n");
    report("floor (bare client)", all_floor, nf);
    report("dlock acquire+release", all_dlock, nd);
    report("dlock try+release", all_try, nt);
    dlock_lock_free(lk);
    dlock_client_close(c);

    /* Hand-off among `threads` sessions. */
    {
        struct handoff h;
        pthread_t *t = calloc(threads, sizeof *t);
        uint32_t per = n / threads > 0 ? n / threads : 1;
        uint64_t t0, took;

        memset(&h, 0, sizeof h);
        snprintf(name, sizeof name, "bench-handoff-%d", (int)getpid());
        h.name = name;
        h.cycles = per;
        h.lat = calloc((size_t)per * threads, sizeof *h.lat);
        atomic_init(&h.released_at, 0);
        atomic_init(&h.nlat, 0);
        pthread_barrier_init(&h.start, NULL, threads + 1);
        for (uint32_t i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, handoff_thread, &h);
        pthread_barrier_wait(&h.start);
        t0 = now_ns();
        for (uint32_t i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
        took = now_ns() - t0;
        printf("-- hand-off, %u sessions contending --\n", threads);
        report("release -> next acquire", h.lat, atomic_load(&h.nlat));
        printf("%-26s %.0f grants/s (%u grants in %.2f s)\n", "throughput",
               (double)per * threads / (took / 1e9), per * threads,
               took / 1e9);
        free(h.lat);
        free(t);
        pthread_barrier_destroy(&h.start);
    }
    free(ns);
    free(all_floor);
    free(all_dlock);
    free(all_try);
    return 0;
}
