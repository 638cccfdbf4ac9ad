/*
 * cmd_latch.c: `dlock latch set|down|count|await NAME`: count-down
 * latches (dlock_latch_*) from the shell. One process sets a count,
 * others count it down, any number wait for zero.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static void latch_help(void)
{
    printf("usage: dlock latch set [OPTIONS] NAME COUNT\n"
           "       dlock latch down [OPTIONS] NAME\n"
           "       dlock latch count [OPTIONS] NAME\n"
           "       dlock latch await [-w TIMEOUT] [OPTIONS] NAME\n"
           "\n"
           "actions: set, down, count, await\n"
           "\n"
           "A count-down latch under NAME: set gives it COUNT (1 to %u),\n"
           "only when it is at zero (Redisson's trySetCount); down takes "
           "one off and\nprints the count left; count prints the count (0: "
           "open or never set);\nawait waits until the count is zero, "
           "woken by the backend's notification\nwhere it has one (else "
           "by polling: see docs/backends/). On redis:// the\nlatch is "
           "Redisson's RCountDownLatch, shared with Java programs.\n"
           "\n"
           "options:\n"
           "  --uri URI              the lock service (default $DLOCK_URI)\n"
           "  --password-file FILE   the server's password, from a file\n"
           "  -w, --timeout T        await: give up after T (250ms, 5s, "
           "2m; 0: look once);\n"
           "                         default: wait as long as it takes\n"
           "\nexit status: 0 done (await: the count is zero); 1 set: the "
           "latch is counting\nalready, await: timed out; 130/143 await "
           "ended by SIGINT/SIGTERM; else as\nin `dlock --help`.\n",
           DLOCK_LATCH_COUNT_MAX);
}

static const char *const actions[] = {"set", "down", "count", "await", NULL};

/* SIGINT/SIGTERM during await: wake it (async-signal-safe). */
static dlock_client *volatile shut_client;
static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
    if (shut_client != NULL)
        dlock_client_shutdown(shut_client);
}

/* Run action on the opened latch; the exit status. */
static int latch_do(const char *action, dlock_latch *l, unsigned long count,
                    uint32_t timeout_ms)
{
    uint32_t n = 0;
    int rc;

    if (strcmp(action, "set") == 0)
        rc = dlock_latch_set(l, (uint32_t)count);
    else if (strcmp(action, "down") == 0)
        rc = dlock_latch_down(l, &n);
    else if (strcmp(action, "count") == 0)
        rc = dlock_latch_count(l, &n);
    else
        rc = dlock_latch_await(l, timeout_ms);
    if (rc == DLOCK_ECLOSED && got_signal != 0)
        return 128 + got_signal; /* as a shell reports the signal */
    if (rc != DLOCK_OK) {
        tool_err("latch", "%s", dlock_latch_errmsg(l));
        return tool_exit_for(rc);
    }
    if (strcmp(action, "down") == 0 || strcmp(action, "count") == 0)
        printf("%u\n", n);
    return 0;
}

static int latch_run(int argc, char **argv)
{
    const char *uri = NULL, *pwfile = NULL, *action = NULL, *pos[2];
    uint32_t timeout_ms = DLOCK_WAIT_FOREVER;
    unsigned long count = 0;
    char *uri_pw = NULL;
    dlock_client *c = NULL;
    dlock_latch *l = NULL;
    size_t npos = 0, want;
    int rc, u;

    for (int i = 1; i < argc; i++) {
        if (tool_is_help(argv[i])) {
            latch_help();
            return 0;
        } else if ((u = tool_uri_arg("latch", argc, argv, &i, &uri)) != 0 ||
                   (u = tool_pwfile_arg("latch", argc, argv, &i, &pwfile)) !=
                       0) {
            if (u < 0)
                return EXIT_USAGE;
        } else if (strcmp(argv[i], "-w") == 0 ||
                   strcmp(argv[i], "--timeout") == 0) {
            if (i + 1 >= argc) {
                tool_err("latch", "%s needs a duration", argv[i]);
                return EXIT_USAGE;
            }
            if (!tool_duration("latch", argv[i], argv[i + 1], &timeout_ms))
                return EXIT_USAGE;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            tool_err("latch", "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        } else if (action == NULL) {
            action = argv[i];
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            tool_err("latch", "too many arguments at '%s'", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (action == NULL) {
        tool_err("latch", "missing ACTION: set, down, count or await (try "
                          "`dlock latch --help`)");
        return EXIT_USAGE;
    }
    for (want = 0; actions[want] != NULL; want++)
        if (strcmp(actions[want], action) == 0)
            break;
    if (actions[want] == NULL) {
        tool_err("latch", "no action '%s' (expected set, down, count or "
                          "await)",
                 action);
        return EXIT_USAGE;
    }
    want = strcmp(action, "set") == 0 ? 2 : 1;
    if (npos != want) {
        tool_err("latch", "%s expects %s", action,
                 want == 2 ? "NAME COUNT" : "one NAME");
        return EXIT_USAGE;
    }
    if (want == 2 && !tool_uint("latch", "COUNT", pos[1], 1,
                                DLOCK_LATCH_COUNT_MAX, &count))
        return EXIT_USAGE;
    if (timeout_ms != DLOCK_WAIT_FOREVER && strcmp(action, "await") != 0) {
        tool_err("latch", "-w/--timeout is for await only");
        return EXIT_USAGE;
    }
    if (!tool_password("latch", pwfile, &uri, &uri_pw))
        return EXIT_USAGE;
    rc = dlock_client_open(&c, uri, NULL);
    if (rc == DLOCK_OK)
        rc = dlock_latch_new(&l, c, pos[0]);
    if (rc != DLOCK_OK) {
        tool_err("latch", "%s", dlock_client_errmsg(c));
        dlock_client_close(c);
        free(uri_pw);
        return tool_exit_for(rc);
    }
    shut_client = c;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    rc = latch_do(action, l, count, timeout_ms);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    shut_client = NULL;
    dlock_latch_free(l);
    dlock_client_close(c);
    free(uri_pw);
    return rc;
}

const struct tool_cmd tool_latch = {
    "latch", "count-down latches: set a count, count down, await zero",
    latch_run, latch_help,
};
