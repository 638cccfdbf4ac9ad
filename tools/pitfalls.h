/*
 * pitfalls.h: what the files of dlock-pitfalls, the program behind
 * `dlock demo pitfalls`, share. The broken recipes speak each server's own
 * protocol through its bare client library (hiredis, libzookeeper_mt): they
 * are what dlock replaces, so they must not go through dlock; and so they
 * live in a program of their own, not in the `dlock` command. The fixes
 * beside them use dlock's public API or the one atomic command the
 * write-ups recommend.
 *
 * pitfalls_main.c   main(): the demo, or the hidden __inventory-watch role
 * cmd_pitfalls.c    the demo, the timeline of actors (child processes that
 *                   report what they did and when) and the four Redis recipes
 * pitfalls_zk.c     the ZooKeeper herd effect, counted by the server
 * pitfalls_watch.c  `dlock demo inventory`'s optimistic row on a stock in
 *                   Redis (WATCH, MULTI/EXEC)
 */
#ifndef DLOCK_PITFALLS_H
#define DLOCK_PITFALLS_H

#include <stdbool.h>
#include <stddef.h>

/* One recipe's outcome, as the summary prints it. */
struct pf_result {
    bool ran;           /* false: skipped or could not run (why says) */
    bool unreachable;   /* the server could not be reached */
    bool broken_failed; /* the broken recipe showed its failure */
    bool fix_held;      /* the fix held */
    char broken[160];   /* what the broken recipe did, in a few words */
    char fix[160];      /* what the fix did */
    char why[256];      /* why it did not run */
};

/* `dlock demo pitfalls ARGS` (argv[0] is the program); its help text. */
int pf_main(int argc, char **argv);
void pf_help(void);
/* `dlock-pitfalls __inventory-watch URI KEY STOCK WORKERS` (argv[0] is
 * "__inventory-watch"): see pitfalls_watch.c. */
int pf_inventory_watch(int argc, char **argv);

#ifdef DLOCK_TOOL_HIREDIS
#include <hiredis/hiredis.h>
/* A hiredis connection to what a redis:// URI names (host, port, user,
 * password, database; dlock's own query parameters are ignored), or NULL
 * with the reason in err. */
redisContext *pf_redis_connect(const char *uri, char *err, size_t cap);
#endif

/* The naive all-children watch against dlock's predecessor watch, with
 * `waiters` processes, on the ZooKeeper at uri. */
void pf_zk_herd(const char *uri, unsigned waiters, struct pf_result *out);

#endif
