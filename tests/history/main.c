/*
 * main.c: `history ROLE ...`, the fault-injection history checker of
 * dlock (see history.h for the roles and the files of a run).
 */
#include <stdio.h>
#include <string.h>

#include "history.h"

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*main)(int argc, char **argv);
    } roles[] = {
        {"run", hi_run_main},
        {"worker", hi_worker_main},
        {"check", hi_check_main},
        {"summary", hi_summary_main},
    };

    for (size_t i = 0; argc > 1 && i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(argv[1], roles[i].name) == 0)
            return roles[i].main(argc, argv);
    fprintf(stderr,
            "usage: history run --uri URI [options]   (history run --help)\n"
            "       history check --dir DIR [--json FILE] [--expect KINDS]\n"
            "       history summary FILE.json...\n");
    return 2;
}
