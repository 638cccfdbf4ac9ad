/*
 * pitfalls.h: what the files of `dlock demo pitfalls` share. The broken
 * recipes speak each server's own protocol through its bare client library
 * (hiredis, libzookeeper_mt): they are what dlock replaces, so they must not
 * go through dlock. The fixes beside them use dlock's public API or the
 * one atomic command the write-ups recommend.
 *
 * cmd_pitfalls.c  the command, the timeline of actors (child processes that
 *                 report what they did and when) and the four Redis recipes
 * pitfalls_zk.c   the ZooKeeper herd effect, counted by the server
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

/* `dlock demo pitfalls ARGS` (argv[0] is "pitfalls"); its help text. */
int pf_main(int argc, char **argv);
void pf_help(void);

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
