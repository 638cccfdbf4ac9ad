/*
 * exec_run.h: running a command under the guard process while something
 * is held, as `dlock exec` does (cmd_exec.c), for the commands that hold
 * something else: `dlock elect` runs its command while leader. What a
 * run guarantees is exec's: the command never outlives what is held, and
 * a loss stops it (SIGTERM, SIGKILL after kill_after) and all it started.
 *
 * Order: exec_run_begin() before opening the client (it notes the
 * descriptors the command may inherit), exec_run_wait_signals() while
 * waiting (SIGTERM, SIGINT, SIGHUP shut the client down and the wait
 * returns DLOCK_ECLOSED), exec_run_command(), exec_run_end().
 */
#ifndef DLOCK_EXEC_RUN_H
#define DLOCK_EXEC_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/dlock.h"

/* Note dlock's start state; messages say "dlock SUB:". False if printed. */
bool exec_run_begin(const char *sub);
/* While waiting: the caught signals shut c down. */
void exec_run_wait_signals(dlock_client *c);
/* The signal that ended the wait, or 0. */
int exec_run_wait_signal(void);
/* Tell the run the held thing was lost (any thread; a write to a pipe):
 * the command and all it started are stopped. */
void exec_run_lost(void);
/* Run argv under the guard until it ends; its exit code as exec reports
 * it; *lost says whether exec_run_lost() stopped it. */
int exec_run_command(char **argv, uint32_t kill_after_ms, bool *lost);
void exec_run_end(void);

#endif
