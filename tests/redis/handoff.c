/*
 * handoff.c: how long a released Redis lock takes to reach the next
 * waiter, with 8 processes contending (`redis_handoff --uri URI`). Each
 * process takes the lock, holds it ~1 ms, notes the times (CLOCK_MONOTONIC
 * is one clock for every process of the machine), and releases it. The
 * hand-off is the time from one holder's release call to the next holder's
 * acquire returning: a release round trip, the PUBLISH, the waiter's wake-up
 * and its acquire round trip, not a backoff sleep.
 *
 * It prints the median and the 90th percentile, for modes setnx and hash,
 * and the uncontended acquire+release cycle through dlock next to the raw
 * floor (the same two scripts sent with bare hiredis, dlock_bench_floor),
 * interleaved in batches so both see the same machine state.
 * It asserts mutual exclusion (no holding starts before the previous one
 * ended) and that every cycle completed, never a speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../conformance/harness.h"
#include "dlock/backend.h" /* dlock_bench_floor */

#define PROCS 8
#define CYCLES 60

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Child "cycle NAME FILE MODE": CYCLES holdings, times written to FILE. */
static int cycle_child(char **args)
{
    static uint64_t acq[CYCLES], rel[CYCLES];
    dlock_client *c = h_client(h_uri_with(args[2]));
    dlock_lock *lk = c != NULL ? h_lock(c, args[0], 10000, 0) : NULL;
    FILE *f;

    if (lk == NULL)
        return 3;
    for (int i = 0; i < CYCLES; i++) {
        if (dlock_acquire(lk, 60000) != DLOCK_OK) {
            fprintf(stderr, "handoff: %s\n", dlock_lock_errmsg(lk));
            return 4;
        }
        acq[i] = now_ns();
        h_sleep_ms(1);
        rel[i] = now_ns();
        if (dlock_release(lk) != DLOCK_OK)
            return 5;
    }
    f = fopen(args[1], "w");
    if (f == NULL)
        return 6;
    for (int i = 0; i < CYCLES; i++)
        fprintf(f, "%llu %llu\n", (unsigned long long)acq[i],
                (unsigned long long)rel[i]);
    fclose(f);
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

struct rec {
    uint64_t acq, rel;
};

static int by_acq(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    return x->acq < y->acq ? -1 : x->acq > y->acq;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int run(const char *mode)
{
    struct rec all[PROCS * CYCLES];
    uint64_t gaps[PROCS * CYCLES];
    char name[64], path[PROCS][300];
    pid_t pids[PROCS];
    size_t n = 0, ng = 0;

    snprintf(name, sizeof name, "handoff-%s-%d", mode, (int)getpid());
    for (int i = 0; i < PROCS; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s-%d", h_scratch(), mode, i);
        pids[i] = h_spawn("cycle", name, path[i], mode);
    }
    for (int i = 0; i < PROCS; i++) {
        int st = h_wait(pids[i]);
        FILE *f;
        if (st != 0) {
            fprintf(stderr, "handoff: child %d exited %d\n", i, st);
            return 1;
        }
        f = fopen(path[i], "r");
        if (f == NULL)
            return 1;
        unsigned long long a, r;
        while (n < PROCS * CYCLES && fscanf(f, "%llu %llu", &a, &r) == 2) {
            all[n].acq = a;
            all[n].rel = r;
            n++;
        }
        fclose(f);
    }
    if (n != PROCS * CYCLES) {
        fprintf(stderr, "handoff: %zu holdings, expected %d\n", n,
                PROCS * CYCLES);
        return 1;
    }
    qsort(all, n, sizeof all[0], by_acq);
    for (size_t i = 0; i + 1 < n; i++) {
        if (all[i + 1].acq < all[i].rel) {
            fprintf(stderr, "handoff: two holders at once\n");
            return 1;
        }
        gaps[ng++] = all[i + 1].acq - all[i].rel;
    }
    qsort(gaps, ng, sizeof gaps[0], by_u64);
    printf("handoff %s: %d processes, %zu hand-offs: median %.0f us, "
           "p90 %.0f us, max %.0f us\n",
           mode, PROCS, ng, gaps[ng / 2] / 1e3, gaps[ng * 9 / 10] / 1e3,
           gaps[ng - 1] / 1e3);
    return 0;
}

#define BATCH 200
#define BATCHES 10

/* Uncontended cycles: dlock against the floor, batch by batch. */
static int cycles(const char *mode)
{
    static uint64_t fl[BATCH * BATCHES], dl[BATCH * BATCHES];
    const char *u = h_uri_with(mode);
    char name[64], err[256];
    dlock_client *c = h_client(u);
    dlock_lock *lk;

    if (c == NULL)
        return 1;
    snprintf(name, sizeof name, "cycle-%s-%d", mode, (int)getpid());
    lk = h_lock(c, name, 30000, DLOCK_LOCK_NO_WATCHDOG);
    for (int b = 0; b < BATCHES; b++) {
        if (dlock_bench_floor(u, name, BATCH, fl + b * BATCH, err,
                              sizeof err) != DLOCK_OK) {
            fprintf(stderr, "floor: %s\n", err);
            return 1;
        }
        for (int i = 0; i < BATCH; i++) {
            uint64_t t0 = now_ns();
            if (dlock_acquire(lk, 0) != DLOCK_OK ||
                dlock_release(lk) != DLOCK_OK) {
                fprintf(stderr, "cycle: %s\n", dlock_lock_errmsg(lk));
                return 1;
            }
            dl[b * BATCH + i] = now_ns() - t0;
        }
    }
    qsort(fl, BATCH * BATCHES, sizeof fl[0], by_u64);
    qsort(dl, BATCH * BATCHES, sizeof dl[0], by_u64);
    printf("cycle %s: %d acquire+release each: floor median %.1f us, "
           "dlock median %.1f us (ratio %.2f)\n",
           mode, BATCH * BATCHES, fl[BATCH * BATCHES / 2] / 1e3,
           dl[BATCH * BATCHES / 2] / 1e3,
           (double)dl[BATCH * BATCHES / 2] / (double)fl[BATCH * BATCHES / 2]);
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {{"cycle", cycle_child},
                                          {NULL, NULL}};
    int rc;

    h_child_dispatch(argc, argv, roles);
    h_setup(argc, argv);
    rc = run("mode=setnx") || run("mode=hash") || cycles("mode=setnx") ||
         cycles("mode=hash");
    h_cleanup();
    if (rc == 0)
        printf("4 passed, 0 failed\n");
    return rc;
}
