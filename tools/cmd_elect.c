/*
 * cmd_elect.c: `dlock elect NAME -- CMD`: campaign in the election NAME and
 * run CMD while leader. The run is `dlock exec`'s (exec_run.h): a guard
 * process keeps CMD from outliving the leadership, and when leadership is
 * lost CMD and all it started get SIGTERM (SIGKILL after --kill-after),
 * exactly as exec stops its command when its lock is lost; dlock then exits
 * 75. When CMD exits by itself, dlock resigns and exits with CMD's code.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_run.h"
#include "tool.h"

static void elect_help(void)
{
    printf(
        "usage: dlock elect [OPTIONS] NAME [--] COMMAND [ARG...]\n"
        "\n"
        "Campaign in the leader election NAME and run COMMAND while this "
        "process is\nleader. Leadership is holding NAME's lock; the term "
        "is its fencing token.\n"
        "\n"
        "  --uri URI                 backend URI (default: $DLOCK_URI, "
        "else file://)\n"
        "  --password-file FILE      the server's password, from FILE's "
        "first line\n"
        "                            (or set $DLOCK_PASSWORD)\n"
        "  --id ID                   the participant id others see (on "
        "zk://, the data of\n"
        "                            the Curator LeaderLatch node, "
        "getLeader()'s id);\n"
        "                            default: the lock handle's owner id\n"
        "  -w, --wait, --timeout T   campaign at most T (a duration: 300ms, "
        "5s, 2m);\n"
        "                            default: forever\n"
        "  --lease DUR               lease to hold and renew (default: the "
        "URI's\n"
        "                            lease=, else 30s)\n"
        "  --kill-after DUR          SIGKILL what has not exited DUR after "
        "its SIGTERM\n"
        "                            (leadership lost, or left running by "
        "COMMAND;\n"
        "                            default 10s)\n"
        "  -q, --quiet               no message when the wait runs out\n"
        "\n"
        "COMMAND sees DLOCK_NAME, DLOCK_TERM and DLOCK_FENCE (both the "
        "term: pass it to\nthe storage you write to), DLOCK_ELECT_ID, and "
        "the descriptors dlock was\nstarted with, no other.\n"
        "\n"
        "COMMAND runs under the guard process of `dlock exec` (see `dlock "
        "exec --help`):\n"
        "  COMMAND exits        dlock resigns and exits with COMMAND's "
        "code.\n"
        "  leadership lost      COMMAND and all it started get SIGTERM "
        "(SIGKILL after\n"
        "                       --kill-after); exit 75. Another candidate "
        "can only be\n"
        "                       elected once the lock is free, as for "
        "`dlock exec`.\n"
        "  SIGTERM, SIGINT or   while campaigning: give up, exit 128+N; "
        "while COMMAND\n"
        "  SIGHUP to dlock      runs: passed on to it, then as when it "
        "exits.\n"
        "\n"
        "exit status: COMMAND's own (128+N if killed by signal N); 1 the "
        "wait ran out;\n128+N if dlock got signal N while campaigning; 75 "
        "leadership was lost while\nCOMMAND ran; 126/127 COMMAND not "
        "executable / not found; the others as in\n`dlock --help`.\n");
}

enum { OPT_URI = 256, OPT_PWFILE, OPT_ID, OPT_LEASE, OPT_KILL_AFTER };

static const char *elect_name;

/* The listener: a loss stops the command (a write to exec's pipe). */
static void on_change(dlock_election *e, int is_leader, uint64_t term,
                      const char *why, void *payload)
{
    (void)e;
    (void)payload;
    if (is_leader || strcmp(why, "resigned") == 0)
        return;
    fprintf(stderr, "dlock elect: leadership of %s (term %" PRIu64
            ") lost: %s\n", elect_name, term, why);
    exec_run_lost();
}

static int elect_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, OPT_URI},
        {"password-file", required_argument, NULL, OPT_PWFILE},
        {"id", required_argument, NULL, OPT_ID},
        {"timeout", required_argument, NULL, 'w'},
        {"wait", required_argument, NULL, 'w'},
        {"lease", required_argument, NULL, OPT_LEASE},
        {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    dlock_elect_options eo = DLOCK_ELECT_OPTIONS_INIT;
    const char *uri = NULL, *pwfile = NULL;
    char *uri_pw = NULL, term[32];
    uint32_t timeout = DLOCK_WAIT_FOREVER, lease = 0, kill_after = 10000;
    dlock_client *c = NULL;
    dlock_election *e = NULL;
    bool quiet = false, lost = false;
    int opt, rc, code = EXIT_SOFTWARE;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:w:qh", opts, NULL)) != -1) {
        switch (opt) {
        case OPT_URI:
            if (!tool_uri("elect", &uri, optarg))
                return EXIT_USAGE;
            break;
        case OPT_PWFILE:
            pwfile = optarg;
            break;
        case OPT_ID:
            if (optarg[0] == '\0') {
                tool_err("elect", "--id: empty (give an id, or leave the "
                         "option out)");
                return EXIT_USAGE;
            }
            eo.id = optarg;
            break;
        case 'w':
            if (!tool_duration("elect", "--timeout", optarg, &timeout))
                return EXIT_USAGE;
            break;
        case OPT_LEASE:
            if (!tool_duration("elect", "--lease", optarg, &lease))
                return EXIT_USAGE;
            if (lease == 0) {
                tool_err("elect", "--lease: must be more than 0");
                return EXIT_USAGE;
            }
            break;
        case OPT_KILL_AFTER:
            if (!tool_duration("elect", "--kill-after", optarg, &kill_after))
                return EXIT_USAGE;
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            elect_help();
            return 0;
        case ':':
            tool_err("elect", "%s: needs a value", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            tool_err("elect", "unknown option '%s' (try `dlock elect "
                     "--help`)", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        tool_err("elect", "missing NAME and COMMAND (try `dlock elect "
                 "--help`)");
        return EXIT_USAGE;
    }
    elect_name = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        tool_err("elect", "missing COMMAND after NAME");
        return EXIT_USAGE;
    }
    if (!tool_password("elect", pwfile, &uri, &uri_pw))
        return EXIT_USAGE;
    if (!exec_run_begin("elect")) {
        free(uri_pw);
        return EXIT_SOFTWARE;
    }
    rc = dlock_client_open(&c, uri, NULL);
    if (rc != DLOCK_OK) {
        tool_err("elect", "%s", dlock_client_errmsg(c));
        code = tool_exit_for(rc);
        goto out;
    }
    eo.lease_ms = lease;
    eo.on_change = on_change;
    rc = dlock_elect_new(&e, c, elect_name, &eo);
    if (rc != DLOCK_OK) {
        tool_err("elect", "%s", dlock_client_errmsg(c));
        code = tool_exit_for(rc);
        goto out;
    }
    exec_run_wait_signals(c);
    rc = dlock_elect_join(e);
    if (rc == DLOCK_OK)
        rc = dlock_elect_await(e, timeout);
    if (rc != DLOCK_OK && exec_run_wait_signal() != 0) {
        tool_err("elect", "%s while campaigning for %s: gave up",
                 strsignal(exec_run_wait_signal()), elect_name);
        code = 128 + exec_run_wait_signal();
        goto out;
    }
    if (rc != DLOCK_OK) {
        code = rc == DLOCK_ETIMEDOUT ? EXIT_CONFLICT : tool_exit_for(rc);
        if (!quiet || code != EXIT_CONFLICT)
            tool_err("elect", "%s", dlock_elect_errmsg(e));
        goto out;
    }
    snprintf(term, sizeof term, "%" PRIu64, dlock_elect_term(e));
    setenv("DLOCK_NAME", elect_name, 1);
    setenv("DLOCK_TERM", term, 1);
    setenv("DLOCK_FENCE", term, 1);
    setenv("DLOCK_ELECT_ID", dlock_elect_id(e), 1);
    code = exec_run_command(argv + optind, kill_after, &lost);
    if (lost)
        code = EXIT_LOST;
out:
    dlock_elect_free(e);
    dlock_client_close(c);
    exec_run_end();
    free(uri_pw);
    return code;
}

const struct tool_cmd tool_elect = {
    "elect", "run a command while leader of an election (leadership = a lock)",
    elect_run, elect_help,
};
