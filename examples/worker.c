/*
 * worker.c: a long-running worker that holds a lock while it works and
 * stops the moment the lock is lost, told by on_lost (the watchdog renews
 * the lease meanwhile).
 *
 *   worker NAME SECONDS          (the URI comes from $DLOCK_URI)
 *
 * exit: 0 done and released; 1 busy (waited 5 s); 75 the lock was lost and
 * the worker stopped; 64/69/70 as cron_guard.c.
 *
 * Build: cc worker.c $(pkg-config --cflags --libs dlock)
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <dlock/dlock.h>

static atomic_int lost; /* set on the watchdog's thread */

/* Runs on the watchdog's thread: short, and no call back into dlock but
 * the handle's own getters. */
static void on_lost(dlock_lock *lk, int code, const char *why, void *payload)
{
    (void)payload;
    fprintf(stderr, "worker: lost %s (%s): %s\n", dlock_lock_name(lk),
            dlock_err_name(code), why);
    atomic_store(&lost, 1);
}

int main(int argc, char **argv)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    struct timespec step = {0, 50 * 1000000L};
    char *end;
    long seconds, steps = 0;
    int rc, code = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: worker NAME SECONDS\n");
        return 64;
    }
    seconds = strtol(argv[2], &end, 10);
    if (*end != '\0' || seconds < 1 || seconds > 86400) {
        fprintf(stderr, "worker: SECONDS: '%s' is not 1 to 86400\n", argv[2]);
        return 64;
    }
    rc = dlock_client_open(&c, NULL, NULL);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "worker: %s\n", dlock_client_errmsg(c));
        dlock_client_close(c);
        return rc == DLOCK_ECONNECT ? 69 : rc == DLOCK_ERROR ? 70 : 64;
    }
    o.on_lost = on_lost;
    rc = dlock_lock_new(&lk, c, argv[1], &o);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "worker: NAME: %s\n", dlock_client_errmsg(c));
        dlock_client_close(c);
        return 64;
    }
    rc = dlock_acquire(lk, 5000);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "worker: %s\n", dlock_lock_errmsg(lk));
        code = rc == DLOCK_EBUSY || rc == DLOCK_ETIMEDOUT ? 1
               : rc == DLOCK_ECONNECT                     ? 69
                                                          : 70;
        goto out;
    }
    printf("worker: holding %s, fence %llu\n", argv[1],
           (unsigned long long)dlock_fence(lk));
    fflush(stdout);
    while (steps < seconds * 20 && !atomic_load(&lost)) {
        nanosleep(&step, NULL); /* a step of work */
        steps++;
    }
    if (atomic_load(&lost)) {
        fprintf(stderr, "worker: stopped after %ld ms of work\n", steps * 50);
        code = 75;
    }
    rc = dlock_release(lk); /* DLOCK_ELOST after a loss: already said */
    if (rc != DLOCK_OK && code == 0) {
        fprintf(stderr, "worker: release: %s\n", dlock_lock_errmsg(lk));
        code = rc == DLOCK_ELOST ? 75 : 70;
    }
out:
    dlock_lock_free(lk);
    dlock_client_close(c);
    return code;
}
