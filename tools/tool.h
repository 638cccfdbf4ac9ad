/*
 * tool.h: what the `dlock` command's subcommand files share. The command
 * uses only the public API (dlock.h).
 */
#ifndef DLOCK_TOOL_H
#define DLOCK_TOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/dlock.h"

/* Exit codes, after flock(1) and sysexits.h; `dlock --help` prints them
 * all (dlock.c's exit_table), and dlock(1) takes them from there. */
#define EXIT_CONFLICT 1     /* busy or timed out (flock's -E default) */
#define EXIT_USAGE 64       /* EX_USAGE: bad option, duration or URI */
#define EXIT_DATAERR 65     /* EX_DATAERR: an input file makes no sense */
#define EXIT_NOINPUT 66     /* EX_NOINPUT: the lock directory, or an input
                               file, is missing or unreadable */
#define EXIT_UNAVAILABLE 69 /* EX_UNAVAILABLE: the lock service is down */
#define EXIT_SOFTWARE 70    /* EX_SOFTWARE: anything else went wrong */
#define EXIT_CANTCREAT 73   /* EX_CANTCREAT: no permission for a lock file */
#define EXIT_LOST 75        /* EX_TEMPFAIL: the lock was lost */
#define EXIT_NOPERM 77      /* EX_NOPERM: the server refused the login */

struct tool_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand */
    void (*help)(void);
};

extern const struct tool_cmd tool_exec, tool_info, tool_inspect, tool_demo,
    tool_bench, tool_scenario, tool_elect, tool_latch;

/* The exit code for a failed dlock call outside a conflict. */
int tool_exit_for(int rc);
/* Print "dlock SUB: message" to stderr. */
void tool_err(const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Parse a duration option; on error prints and returns false. */
bool tool_duration(const char *sub, const char *opt, const char *text,
                   uint32_t *out);
/* Parse a non-negative integer option within [min, max]. */
bool tool_uint(const char *sub, const char *opt, const char *text,
               unsigned long min, unsigned long max, unsigned long *out);
/* Take --uri's value into *uri: refuses an empty one, and a second --uri
 * (which one would win is not obvious). On error prints, returns false. */
bool tool_uri(const char *sub, const char **uri, const char *text);
/* For commands that read argv by hand: if argv[*i] is "--uri" (its value
 * next, *i moves past it) or "--uri=VALUE", take it with tool_uri() and
 * return 1; -1 if that failed (printed); 0 if argv[*i] is no --uri. */
int tool_uri_arg(const char *sub, int argc, char **argv, int *i,
                 const char **uri);
/* The same for --password-file FILE (refused empty or twice). */
int tool_pwfile_arg(const char *sub, int argc, char **argv, int *i,
                    const char **file);
/* The password of --password-file FILE (when file is not NULL), else of
 * $DLOCK_PASSWORD (then unset), put into *uri (else $DLOCK_URI): *uri then
 * points to *owned, which the caller frees. Nothing given: true, *uri
 * unchanged. On error prints, returns false. */
bool tool_password(const char *sub, const char *file, const char **uri,
                   char **owned);
/* Where the parts of a URI's authority are, as offsets into it: the
 * authority [auth, end) after "scheme://" (up to / ? or #), its last '@'
 * and the first ':' before that '@' (SIZE_MAX when there is none): the
 * password, if any, is (colon, at). False if the text has no "://". */
struct tool_uri_spans {
    size_t auth, end, at, colon;
};
bool tool_uri_spans(const char *uri, struct tool_uri_spans *s);
/* Is argv[i] "--help" or "-h"? */
bool tool_is_help(const char *arg);

#endif
