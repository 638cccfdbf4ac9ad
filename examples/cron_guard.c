/*
 * cron_guard.c: run a nightly job at most once at a time, on any number of
 * machines. Every call's result is checked; the exit status says what
 * happened, as sysexits(3) and flock(1) do.
 *
 *   cron_guard NAME SECONDS      (the URI comes from $DLOCK_URI)
 *
 * exit: 0 the job ran; 1 another run holds the lock; 64 bad arguments or
 * URI; 69 the lock service cannot be reached; 75 the lock was lost while
 * the job ran (its work may be incomplete); 70 anything else.
 *
 * Build: cc cron_guard.c $(pkg-config --cflags --libs dlock)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <dlock/dlock.h>

/* One step of the job. A real job writes somewhere; see fenced_pg.c for
 * writes that a stale holder cannot make. */
static void work_step(void)
{
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
}

static int exit_code(int rc)
{
    switch (rc) {
    case DLOCK_EBUSY:
    case DLOCK_ETIMEDOUT:
        return 1;
    case DLOCK_EINVAL:
    case DLOCK_ENOBACKEND:
    case DLOCK_EUNSUPPORTED:
        return 64;
    case DLOCK_ENOENT: /* the lock directory does not exist */
        return 66;
    case DLOCK_ECONNECT:
        return 69;
    case DLOCK_EACCES: /* no permission for the lock file */
        return 73;
    case DLOCK_EAUTH: /* the server refused the password */
        return 77;
    case DLOCK_ELOST:
    case DLOCK_ENOTOWNER:
        return 75;
    default:
        return 70;
    }
}

int main(int argc, char **argv)
{
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    char *end;
    long seconds;
    int rc, code = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: cron_guard NAME SECONDS\n");
        return 64;
    }
    seconds = strtol(argv[2], &end, 10);
    if (*end != '\0' || seconds < 0 || seconds > 86400) {
        fprintf(stderr, "cron_guard: SECONDS: '%s' is not 0 to 86400\n",
                argv[2]);
        return 64;
    }
    /* NULL: $DLOCK_URI, else the default file:// directory. */
    rc = dlock_client_open(&c, NULL, NULL);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "cron_guard: %s\n", dlock_client_errmsg(c));
        dlock_client_close(c); /* accepts a failed client */
        return exit_code(rc);
    }
    rc = dlock_lock_new(&lk, c, argv[1], NULL);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "cron_guard: NAME: %s\n", dlock_client_errmsg(c));
        dlock_client_close(c);
        return exit_code(rc);
    }
    rc = dlock_try_acquire(lk); /* one attempt: a busy job is skipped */
    if (rc != DLOCK_OK) {
        fprintf(stderr, "cron_guard: %s\n", dlock_lock_errmsg(lk));
        code = exit_code(rc);
        goto out;
    }
    printf("cron_guard: running %s with fence %llu\n", argv[1],
           (unsigned long long)dlock_fence(lk));
    fflush(stdout);
    for (long i = 0; i < seconds * 10; i++) {
        /* dlock_held() is a local check, free to call between steps. */
        if (!dlock_held(lk)) {
            fprintf(stderr, "cron_guard: the lock was lost after %ld ms; "
                    "stopping\n", i * 100);
            code = 75;
            break;
        }
        work_step();
    }
    rc = dlock_release(lk);
    if (rc != DLOCK_OK && code == 0) {
        /* ELOST: it ran out before the release; the work may overlap
         * another run's. Anything else: the server frees it later. */
        fprintf(stderr, "cron_guard: release: %s\n", dlock_lock_errmsg(lk));
        code = exit_code(rc);
    }
out:
    dlock_lock_free(lk);
    dlock_client_close(c);
    return code;
}
