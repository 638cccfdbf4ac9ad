/*
 * scenario.h: what the parts of `dlock scenario` share. scenario_stage.c
 * puts actors on the stage (child processes holding and waiting, driven
 * through pipes, their events on one timeline) and keeps the toy storage;
 * scenario_cases.c holds the failures themselves, one function each, and
 * their table; cmd_scenario.c reads the options, runs the cases on every
 * URI and prints the tables. Like the rest of tools/, only the public API.
 */
#ifndef DLOCK_SCENARIO_H
#define DLOCK_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "bench.h"

#define MAX_ACTORS 4
#define MAX_HOSTS 8              /* proxied hosts of one URI */
#define READY_TIMEOUT_MS 30000   /* an actor to connect */
#define REPLY_TIMEOUT_MS 15000   /* a command that does not wait for a lock */
#define SETTLE_MS 300            /* let a waiter start waiting */
#define SC_NA 1                  /* a case's return: it does not apply */

/* One child process in a role, as the parent sees it. */
struct actor {
    char label[16];   /* "A", "B", "W1"... */
    const char *role; /* "holder", "waiter"... */
    pid_t pid;
    int to, from;     /* its stdin, its stdout */
    char buf[8192];
    size_t len;
    bool eof;
    /* what it told us */
    uint32_t caps, lease_ms;
    char scheme[32], mode[64];
    bool lost;
    uint64_t lost_ns;
    char lost_code[32], lost_why[512];
};

/* One case on one URI: its settings, actors, proxies and what it found. */
struct sc {
    const char *scenario;
    const char *uri;      /* as given (may be NULL: the default) */
    char red[1024];       /* with the password hidden */
    char name[128];       /* the lock name */
    uint32_t lease_ms;  /* the lock lease the actors ask for */
    uint32_t short_ms;  /* a brief cut, well inside the lease: --down,
                         * else a third of the shorter of lease_ms and
                         * eff_ms (at least 200 ms) */
    uint32_t eff_ms;    /* how long a silent holder keeps the lock: the
                         * lock lease, or the session's for session-bound
                         * modes (see set_timing) */
    uint32_t wait_ms, down_ms, pause_ms; /* 0 until set_timing, unless
                                          * given as options */
    bool down_given;      /* --down: else each scenario picks its own */
    const char *restart_cmd, *node_cmd, *failover_cmd;
    bool many;            /* one of several runs: a missing command makes
                           * a cell "n/a" rather than a usage error */
    char dir[64];         /* temporary: the toy storage */
    char storage[128];
    uint64_t t0;
    struct actor actors[MAX_ACTORS];
    size_t nactors;
    struct bn_proxy *proxy[MAX_HOSTS]; /* one per host of the URI */
    size_t nproxies;
    /* known after the first actor is ready */
    uint32_t caps;
    char scheme[32], mode[64];
    json_object *events, *results;
    char outcome[512];
    char summary[160]; /* a few words for a table cell */
    char cell[40];     /* fewer still, for a terminal's side-by-side */
};

/* The answer to an acquire. */
struct got {
    bool ok;        /* acquired */
    bool answered;  /* acquired or failed (else: no answer in time) */
    uint64_t t;
    uint64_t fence;
    char err[32];
    char msg[512];
};

/* ---- scenario_stage.c ------------------------------------------------------ */

/* `dlock scenario __actor ...`: the child's side. */
int sc_actor_main(int argc, char **argv);
/* One line of the timeline: "+ 1234.5 ms  A  text" (and in the JSON). */
void sc_say(struct sc *s, uint64_t t, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A result: printed at the end, and in the JSON. */
void sc_result(struct sc *s, const char *key, json_object *value);
/*
 * Read every actor's events for at most ms; true as soon as `who` sends a
 * line starting with one of `words` ("w1|w2", copied to line). "lost"
 * events of any actor are recorded on the way. False on timeout, or when
 * `who` has exited.
 */
bool sc_pump(struct sc *s, uint32_t ms, struct actor *who, const char *words,
             char *line, size_t cap);
/* Start an actor connected to uri (NULL: the case's); DLOCK_OK once it is
 * ready, else its failure (already reported). The first sets the timing. */
int sc_actor_start(struct sc *s, struct actor **out, const char *label,
                   const char *role, const char *uri);
/* Send "acquire MS"; returns when the actor is inside dlock_acquire(). */
uint64_t sc_acquire_start(struct sc *s, struct actor *a, uint32_t ms);
/* Wait up to ms for the answer to an acquire. */
void sc_acquire_wait(struct sc *s, struct actor *a, uint32_t ms,
                     struct got *g);
/* Acquire now, waiting at most ms. */
void sc_acquire(struct sc *s, struct actor *a, uint32_t ms, struct got *g);
/* Release; the error name ("OK", "ELOST"...) in err, "" without an answer.
 * Returns when dlock_release() returned, by the actor's clock. */
uint64_t sc_release(struct sc *s, struct actor *a, char *err, size_t cap);
/* dlock_held() in the actor: 1, 0, or -1 without an answer. */
int sc_held(struct sc *s, struct actor *a);
/* Write to the toy storage with the actor's token; the verdict in res. */
const char *sc_store(struct sc *s, struct actor *a, char *res, size_t cap);
void sc_actor_signal(struct sc *s, struct actor *a, int sig,
                     const char *what);
/* SIGKILL and reap one actor now. */
void sc_actor_kill(struct sc *s, struct actor *a);
/* Every actor: ask to exit, kill what is left, reap. False when one had
 * died on its own (a crash, or a sanitizer's report). */
bool sc_actors_finish(struct sc *s);
void sc_proxies_stop(struct sc *s);
/* "ECONNECT" -> DLOCK_ECONNECT; DLOCK_ERROR for anything else. */
int sc_err_code(const char *name);

/* ---- scenario_cases.c ------------------------------------------------------ */

/* The rows of the write-ups' failure table, in its order. A case returns
 * DLOCK_OK when it ran, SC_NA when it does not apply (its cell says why),
 * else why it could not run. */
struct sc_case {
    const char *name;
    int (*run)(struct sc *);
    const char *what;
};
#define SC_NCASES 10
/* `all` runs the first SC_NALL: the failure table's rows. */
#define SC_NALL 9
extern const struct sc_case sc_cases[SC_NCASES];

#endif
