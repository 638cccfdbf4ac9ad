/*
 * shim.h: the fault-injecting backend, registered only in tests. It wraps a
 * real backend ("fault://shim?inner=<percent-encoded URI>") and passes every
 * call through, except where the knobs below say to fail, stall or answer
 * busy. The server or directory under it stays real. It uses backend.h
 * alone, as an out-of-tree backend would, and checks core's promise that
 * no two calls ever run on one session at once [B-SERIAL-1].
 */
#ifndef DLOCK_TEST_SHIM_H
#define DLOCK_TEST_SHIM_H

#include <stdatomic.h>

enum shim_op { SHIM_OPEN, SHIM_ACQUIRE, SHIM_WAIT, SHIM_RENEW, SHIM_RELEASE,
               SHIM_NOPS };

/* A fault on one operation: let `skip` calls through, then fail `times`
 * calls (-1: every call from then on) with `code`, unsent. */
struct shim_fault {
    atomic_int code;
    atomic_int skip;
    atomic_int times;
};

struct shim_knobs {
    struct shim_fault fault[SHIM_NOPS];
    atomic_int busy_acquire;   /* answer EBUSY this many times ... */
    atomic_int busy_hint_ms;   /* ... with this retry hint */
    atomic_int stall_renew_ms; /* sleep inside renew() */
    /* Counters, per operation and a few of their details. */
    atomic_int calls[SHIM_NOPS];
    atomic_int renewed_items;
    atomic_int in_renew;        /* a renew() is running now */
    atomic_long seq;            /* event clock for ordering checks */
    atomic_long last_renew_end; /* seq when the last renew() returned */
    atomic_long last_release;   /* seq when the last release() started */
    atomic_int thread_inits;    /* forwarded thread_init()s */
    atomic_int opens, closes;   /* sessions opened (successfully), closed */
    /* Core's promises, checked on every call; each must stay 0. */
    atomic_int serial_violations; /* [B-SERIAL-1] two calls at once */
    atomic_int close_violations;  /* [B-CLOSE-1] closed twice or with grants */
    atomic_int pin_violations;    /* [B-PIN-1] a conn-bound grant renewed or
                                     released on another session */
    atomic_int kind_violations;   /* [B-KIND-1] a kind the mode lacks */
};

extern struct shim_knobs shim;

/* Register the "fault" scheme (once per process). */
void shim_register(void);
/* Build "fault://shim?inner=<inner, percent-encoded>[&...]" into buf. */
const char *shim_uri(char *buf, size_t cap, const char *inner);
/* Reset all knobs and counters. */
void shim_reset(void);
/* Fail the nth call of op from now (1: the next) and, with times > 1, the
 * calls after it; times -1: every call from the nth on. code 0: stop. */
void shim_fail(enum shim_op op, int code, int nth, int times);

#endif
