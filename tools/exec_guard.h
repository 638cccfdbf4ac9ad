/*
 * exec_guard.h: between `dlock exec` (cmd_exec.c) and its guard process
 * (exec_guard.c): the messages on their two pipes, and what dlock prepares
 * before it forks the guard. See exec_guard.c for why the guard exists.
 */
#ifndef DLOCK_EXEC_GUARD_H
#define DLOCK_EXEC_GUARD_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One message is one write() of a struct guard_msg: below PIPE_BUF, so it
 * arrives whole, and a read of several whole messages returns whole ones. */
enum guard_msg_kind {
    /* dlock -> guard */
    GUARD_SIGNAL = 1, /* a: a signal to pass on to the command's processes */
    GUARD_TERMINATE,  /* the lock is lost: SIGTERM, SIGKILL after kill_after */
    /* guard -> dlock */
    GUARD_FORK_FAILED = 16, /* a: errno; the guard exits, no command ran */
    GUARD_EXEC_FAILED, /* a: execvp()'s errno (the command exits 126/127) */
    GUARD_DONE,        /* a: the command's wait status; it and all it
                          started are dead and reaped */
};

struct guard_msg {
    int32_t kind, a, b;
};

/* The signals dlock or the guard change; the command gets each back as
 * dlock found it at its start (ignored or default). */
#define GUARD_NSIGNALS 9
extern const int guard_signals[GUARD_NSIGNALS];

/* Filled by dlock before the fork; the guard and the command only read it
 * (their copy of it). */
struct guard_setup {
    char **argv;            /* the command */
    int cmd_in;             /* read end of dlock -> guard */
    int report_out;         /* write end of guard -> dlock */
    int dlock_ends[2];      /* dlock's ends of both pipes: the guard closes
                               them first thing */
    uint32_t kill_after_ms; /* SIGTERM, then SIGKILL this much later */
    sigset_t mask;          /* dlock's signal mask at its start */
    bool ignored[GUARD_NSIGNALS]; /* guard_signals[i] ignored at start */
    const int *inherited;   /* descriptors open at dlock's start, ascending:
                               the command keeps these and no other */
    size_t n_inherited;
};

/* The guard: call in the child of fork(); never returns. Async-signal-safe
 * throughout, since dlock is multithreaded. */
void guard_main(const struct guard_setup *s) __attribute__((noreturn));

/* Every process below process root (children of any of its threads, their
 * children, ...), parents first, into out (at most cap), and each one's
 * parent into parents[] unless it is NULL. Returns how many.
 * Async-signal-safe. */
int guard_descendants(pid_t root, pid_t *out, pid_t *parents, int cap);

/* CLOCK_MONOTONIC in milliseconds (the guard's timers, and dlock exec's). */
int64_t guard_now_ms(void);

#endif
