/*
 * shim.h: the fault-injecting backend, registered only in tests. It wraps a
 * real backend ("fault://shim?inner=<percent-encoded URI>") and passes every
 * call through, except where the knobs below say to fail, stall or drop
 * one. The server or directory under it stays real.
 */
#ifndef DLOCK_TEST_SHIM_H
#define DLOCK_TEST_SHIM_H

#include <stdatomic.h>

struct shim_knobs {
    atomic_int fail_acquire;   /* fail this many acquires ... */
    atomic_int acquire_code;   /* ... with this code (DLOCK_ECONNECT...) */
    atomic_int busy_acquire;   /* answer EBUSY this many times ... */
    atomic_int busy_hint_ms;   /* ... with this retry hint */
    atomic_int renew_code;     /* non-zero: renewals fail with it, unsent */
    atomic_int stall_renew_ms; /* sleep inside renew() */
    /* Counters. */
    atomic_int acquires, renews, renewed_items, releases, opens;
    atomic_int in_renew;        /* a renew() is running now */
    atomic_long seq;            /* event clock for ordering checks */
    atomic_long last_renew_end; /* seq when the last renew() returned */
    atomic_long last_release;   /* seq when the last release() started */
};

extern struct shim_knobs shim;

/* Register the "fault" scheme (once per process). */
void shim_register(void);
/* Build "fault://shim?inner=<inner, percent-encoded>[&...]" into buf. */
const char *shim_uri(char *buf, size_t cap, const char *inner);
/* Reset all knobs and counters. */
void shim_reset(void);

#endif
