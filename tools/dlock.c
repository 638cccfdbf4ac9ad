/*
 * dlock.c: the `dlock` command's entry point: global options and the
 * dispatch to subcommands (exec, info, inspect, demo, ...), each in a file
 * of its own.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const struct tool_cmd *const commands[] = {
    &tool_exec, &tool_elect, &tool_info, &tool_inspect, &tool_demo,
    &tool_bench, &tool_scenario, &tool_latch, NULL,
};

/* Every exit status of every command, for `dlock --help` and so for
 * dlock(1)'s EXIT STATUS. A command's own help names only its own uses. */
static const struct {
    const char *code, *name, *text;
} exit_table[] = {
    {"0", "", "success; for exec, COMMAND's own status (128+N: signal N)"},
    {"1", "", "busy or timed out (exec -E N: N); inspect: held; latch "
              "set: counting already"},
    {"64", "EX_USAGE", "bad option, duration or URI"},
    {"65", "EX_DATAERR", "bench --from-json: the file is no bench JSON"},
    {"66", "EX_NOINPUT", "the lock directory (file://) or a certificate "
                         "file (etcds://) does not exist; bench "
                         "--from-json: the file cannot be read"},
    {"69", "EX_UNAVAILABLE", "the lock service cannot be reached; demo "
                             "pitfalls: the program dlock-pitfalls is "
                             "missing or cannot run; fewer replicas "
                             "than sync_replicas= confirmed the lock "
                             "(redis)"},
    {"70", "EX_SOFTWARE", "another failure (exec: the guard died)"},
    {"73", "EX_CANTCREAT", "no permission to create or open the lock"},
    {"75", "EX_TEMPFAIL", "the lock was lost while COMMAND ran"},
    {"77", "EX_NOPERM", "the server refused the user or password, or the "
                        "client certificate (etcds://)"},
    {"126", "", "exec: COMMAND cannot be run"},
    {"127", "", "exec: COMMAND not found"},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dlock COMMAND [OPTIONS]\n"
            "\n"
            "Distributed locks behind one interface: file://, redis://, "
            "zk://,\npostgres://, mysql:// (see `dlock info`).\n\n"
            "commands:\n");
    for (size_t i = 0; commands[i] != NULL; i++)
        fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f,
            "\n`dlock COMMAND --help` describes one command.\n"
            "The URI comes from --uri, else $DLOCK_URI, else a file:// "
            "directory\nin the user's runtime directory.\n"
            "Server backends are modules the library loads when a URI "
            "names one;\n$DLOCK_MODULE_DIR, if set, is where they are "
            "looked for;\n$DLOCK_LIBEXEC_DIR, where `dlock demo pitfalls` "
            "looks first for\nits program, dlock-pitfalls.\n"
            "\nexit status (after flock(1) and sysexits(3)), every command:"
            "\n");
    for (size_t i = 0; i < sizeof exit_table / sizeof exit_table[0]; i++)
        fprintf(f, "  %-4s %-15s %s\n", exit_table[i].code,
                exit_table[i].name, exit_table[i].text);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (tool_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        if (argc > 2 && strcmp(argv[1], "help") == 0) {
            for (size_t i = 0; commands[i] != NULL; i++)
                if (strcmp(commands[i]->name, argv[2]) == 0) {
                    commands[i]->help();
                    return 0;
                }
            tool_err(NULL, "help: no command '%s'", argv[2]);
            return EXIT_USAGE;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("dlock %s\n", dlock_version());
        return 0;
    }
    for (size_t i = 0; commands[i] != NULL; i++)
        if (strcmp(commands[i]->name, argv[1]) == 0)
            return commands[i]->run(argc - 1, argv + 1);
    tool_err(NULL, "no command '%s' (try `dlock --help`)", argv[1]);
    return EXIT_USAGE;
}
