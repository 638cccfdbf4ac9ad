/*
 * cmd_scenario.c: `dlock scenario NAME|all`, the failure rows of the
 * trade-offs guide run for real and measured, on one URI or side by side
 * on several. This file reads the options, runs every case
 * (scenario_cases.c) on every URI one after the other, each on the stage
 * of scenario_stage.c, and prints what they found: every run's timeline
 * and results, then a table with a column per URI and a row per case, and
 * on request the same as Markdown and everything as JSON. It exits 0 when
 * every case ran, whatever the lock did.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"

/* ---- options and the driver ---------------------------------------------------------- */

#define MAX_URIS 24

static void scenario_help(void)
{
    printf("usage: dlock scenario NAME[,NAME...]|all [--uri URI [--restart-cmd "
           "CMD]\n                      [--node-cmd CMD]]... [OPTIONS]\n"
           "\n"
           "Run failures for real with child processes as holders and "
           "waiters, and print\nwhat happened, when, and the outcome. With "
           "several scenarios or URIs (repeat\n--uri), every scenario runs on "
           "every URI, one after the other, and a table\nat the end puts the "
           "outcomes side by side: a column per backend/mode.\n\n"
           "scenarios (all: every one but failover):\n");
    for (size_t i = 0; i < SC_NCASES; i++)
        printf("  %-18s %s\n", sc_cases[i].name, sc_cases[i].what);
    printf("\n"
           "  --uri URI          backend (default: $DLOCK_URI, else file://);"
           "\n                     repeat it to compare backends and modes\n"
           "  --lease D          the holders' lease, 200ms-1m (default 2s)\n"
           "  --wait D           the longest a waiter waits, 1s-10m (default:"
           "\n                     3 leases + 2s)\n"
           "  --pause D          holder-pause: how long the holder is stopped "
           "(default:\n                     2 leases)\n"
           "  --down D           how long a connection stays cut (default: "
           "2 leases for\n                     conn-drop, a third of one "
           "for holder-reconnect and\n                     "
           "waiter-disconnect)\n"
           "  --restart-cmd CMD  server-restart: run CMD with /bin/sh -c, e.g."
           "\n                     \"$DLOCK_TEST_SERVERCTL restart redis\"\n"
           "  --node-cmd CMD     node-loss: run CMD with /bin/sh -c, with "
           "DLOCK_NODE_ACTION\n                     (kill, then start) and "
           "DLOCK_NODE (the node's place in the\n                     URI's "
           "host list, from 1) in its environment, e.g.\n"
           "                     '$DLOCK_TEST_SERVERCTL $DLOCK_NODE_ACTION "
           "zk3 $DLOCK_NODE'\n"
           "  --failover-cmd CMD failover: run CMD with /bin/sh -c, with "
           "DLOCK_FAILOVER_STEP\n                     (cut: the replicas "
           "stop receiving from the master;\n                     kill: the "
           "master dies; heal: the replicas are back;\n                     "
           "restore: the old master restarts) in its environment,\n"
           "                     e.g. 'tests/servers/rsentinel-failover.sh"
           "\n                     $DLOCK_FAILOVER_STEP'\n"
           "                     These apply to the --uri they follow; given "
           "before any\n                     --uri, to every URI\n"
           "  --json FILE        every run's timeline and results as JSON\n"
           "  --markdown FILE    the outcomes as a Markdown table: a row per "
           "URI, a column\n                     per scenario\n"
           "\nholder-reconnect, waiter-disconnect and conn-drop put TCP "
           "proxies of their own\nbetween one client and every host:port of "
           "the URI (each needs an explicit\nport). node-loss kills the node "
           "the holder is connected to (node 1 when it\ntalks to all, as "
           "Redlock does) and starts it again afterwards. A scenario that\n"
           "cannot apply (no connection to cut, one server, no command given "
           "to one of\nseveral runs) reports \"n/a\" and why. failover "
           "applies to redis://...?sentinel=\nURIs only; with "
           "sync_replicas= in the URI the holder's acquire is refused.\n"
           "\nexit status: 0 every scenario ran (its outcome is data); 64 bad "
           "option or URI;\n69 the service cannot be reached; 70 it could "
           "not be run.\n");
}

static bool duration_in(const char *opt, const char *text, uint32_t min,
                        uint32_t max, uint32_t *out)
{
    if (!tool_duration("scenario", opt, text, out))
        return false;
    if (*out < min || *out > max) {
        tool_err("scenario", "%s: '%s' is outside %" PRIu32 "ms-%" PRIu32
                 "ms", opt, text, min, max);
        return false;
    }
    return true;
}

/* One --uri and the commands that go with it. */
struct target {
    const char *uri; /* NULL: the default */
    const char *restart_cmd, *node_cmd, *failover_cmd;
    char label[64];  /* "redis/setnx", "zk/mutex (3 nodes)" */
};

/* What one run leaves for the tables. */
struct cellrec {
    bool ran;
    char cell[40], summary[160];
};

static struct sc s_run;                  /* big: one at a time */
static struct cellrec cells[SC_NCASES][MAX_URIS];

/* "scheme/mode" from the backend's tables, without connecting. */
static void target_label(struct target *t, const struct target *all,
                         size_t i)
{
    dlock_mode_info mi[16];
    char err[256], red[1024];
    size_t n = 0;

    for (size_t k = 0; k < 16; k++)
        mi[k] = (dlock_mode_info)DLOCK_MODE_INFO_INIT;
    t->label[0] = '\0';
    if (dlock_backend_modes(t->uri, mi, 16, &n, err, sizeof err) == DLOCK_OK)
        for (size_t k = 0; k < n && k < 16; k++)
            if (mi[k].chosen)
                snprintf(t->label, sizeof t->label, "%s/%s", mi[k].scheme,
                         mi[k].mode);
    if (t->label[0] == '\0') {
        bn_redact(t->uri, red, sizeof red);
        snprintf(t->label, sizeof t->label, "%.40s", red);
    }
    /* Redis behind Sentinel, waiting for replicas or not: say so. */
    if (t->uri != NULL && strstr(t->uri, "sentinel=") != NULL) {
        size_t len = strlen(t->label);
        snprintf(t->label + len, sizeof t->label - len, " sentinel%s",
                 strstr(t->uri, "sync_replicas=") != NULL ? " sync_replicas"
                                                          : "");
    }
    /* Two URIs of one mode (one server, an ensemble): say which. */
    for (size_t k = 0; k < i; k++) {
        if (strcmp(all[k].label, t->label) != 0)
            continue;
        size_t hosts = bn_uri_nhosts(t->uri);
        size_t len = strlen(t->label);
        if (hosts > 1)
            snprintf(t->label + len, sizeof t->label - len, " (%zu nodes)",
                     hosts);
        else
            snprintf(t->label + len, sizeof t->label - len, " #%zu", i + 1);
        break;
    }
}

/* One scenario on one URI: its timeline and results on stdout, its JSON
 * object in *out (the caller's). DLOCK_OK when it ran. */
static int run_one(struct sc *s, size_t which, json_object **out)
{
    int rc;

    json_c_set_serialization_double_format("%.6g", JSON_C_OPTION_THREAD);
    snprintf(s->dir, sizeof s->dir, "/tmp/dlock-scenario-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        tool_err("scenario", "mkdtemp: %s", strerror(errno));
        return DLOCK_ERROR;
    }
    snprintf(s->storage, sizeof s->storage, "%s/storage", s->dir);
    bn_redact(s->uri, s->red, sizeof s->red);
    s->events = json_object_new_array();
    s->results = json_object_new_object();
    s->t0 = bn_now_ns();

    printf("scenario %s on %s\n", s->scenario, s->red);
    fflush(stdout);
    rc = sc_cases[which].run(s);
    if (rc == SC_NA)
        rc = DLOCK_OK;
    if (!sc_actors_finish(s) && rc == DLOCK_OK)
        rc = DLOCK_ERROR;
    sc_proxies_stop(s);

    char caps[256];
    bn_caps_text(s->caps, caps, sizeof caps);
    if (s->scheme[0] != '\0')
        printf("backend %s, mode %s: %s\n", s->scheme, s->mode, caps);
    if (rc == DLOCK_OK) {
        printf("results:\n");
        json_object_object_foreach(s->results, key, val) {
            printf("  %-40s %s\n", key,
                   val == NULL ? "n/a" : json_object_get_string(val));
        }
        printf("outcome: %s\nsummary: %s\n\n", s->outcome, s->summary);
    } else {
        printf("outcome: not run (%s)\n\n", dlock_strerror(rc));
    }
    fflush(stdout);

    json_object *root = json_object_new_object();
    json_object_object_add(root, "scenario",
                           json_object_new_string(s->scenario));
    json_object_object_add(root, "uri", json_object_new_string(s->red));
    json_object_object_add(root, "scheme", s->scheme[0]
                                               ? json_object_new_string(s->scheme)
                                               : NULL);
    json_object_object_add(root, "mode", s->mode[0]
                                             ? json_object_new_string(s->mode)
                                             : NULL);
    json_object *ca = json_object_new_array();
    for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL; bit <<= 1)
        if (s->caps & bit)
            json_object_array_add(ca, json_object_new_string(dlock_cap_name(bit)));
    json_object_object_add(root, "caps", ca);
    json_object_object_add(root, "lease_ms", json_object_new_int64(s->lease_ms));
    json_object_object_add(root, "ran", json_object_new_boolean(rc == DLOCK_OK));
    json_object_object_add(root, "events", s->events);
    json_object_object_add(root, "results", s->results);
    json_object_object_add(root, "summary",
                           rc == DLOCK_OK ? json_object_new_string(s->summary)
                                          : NULL);
    json_object_object_add(root, "cell",
                           rc == DLOCK_OK ? json_object_new_string(s->cell)
                                          : NULL);
    json_object_object_add(root, "outcome",
                           json_object_new_string(rc == DLOCK_OK ? s->outcome
                                                                 : dlock_strerror(rc)));
    *out = root;
    unlink(s->storage);
    rmdir(s->dir);
    return rc;
}

/* A Markdown table cell: '|' escaped. */
static void md_cell(FILE *f, const char *text)
{
    fputc(' ', f);
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '|')
            fputc('\\', f);
        fputc(*p, f);
    }
    fputs(" |", f);
}

static bool write_markdown(const char *path, const struct target *t,
                           size_t nt, const size_t *which, size_t nw)
{
    FILE *f = fopen(path, "we");

    if (f == NULL)
        return false;
    fprintf(f, "| backend/mode |");
    for (size_t j = 0; j < nw; j++)
        fprintf(f, " %s |", sc_cases[which[j]].name);
    fprintf(f, "\n|---|");
    for (size_t j = 0; j < nw; j++)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (size_t i = 0; i < nt; i++) {
        fprintf(f, "|");
        md_cell(f, t[i].label);
        for (size_t j = 0; j < nw; j++) {
            const struct cellrec *c = &cells[j][i];
            md_cell(f, c->ran ? c->summary : c->cell);
        }
        fprintf(f, "\n");
    }
    return fclose(f) == 0;
}

/* The side-by-side table: a row per scenario, a column per URI, in blocks
 * of columns that fit 100 characters; then the longer summaries. */
static void print_matrix(const struct target *t, size_t nt,
                         const size_t *which, size_t nw)
{
    enum { ROWHEAD = 18, WIDTH = 100 };
    size_t w[MAX_URIS];

    for (size_t i = 0; i < nt; i++) {
        w[i] = strlen(t[i].label);
        for (size_t j = 0; j < nw; j++)
            if (strlen(cells[j][i].cell) > w[i])
                w[i] = strlen(cells[j][i].cell);
    }
    printf("outcomes side by side:\n");
    for (size_t from = 0; from < nt;) {
        size_t to = from, used = ROWHEAD;
        while (to < nt && (to == from || used + w[to] + 2 <= WIDTH))
            used += w[to++] + 2;
        printf("\n%-*s", ROWHEAD, "");
        for (size_t i = from; i < to; i++)
            printf("  %-*s", i + 1 < to ? (int)w[i] : 0, t[i].label);
        printf("\n");
        for (size_t j = 0; j < nw; j++) {
            printf("%-*s", ROWHEAD, sc_cases[which[j]].name);
            for (size_t i = from; i < to; i++)
                printf("  %-*s", i + 1 < to ? (int)w[i] : 0,
                       cells[j][i].cell);
            printf("\n");
        }
        from = to;
    }
    printf("\nin words:\n");
    for (size_t j = 0; j < nw; j++) {
        printf("  %s\n", sc_cases[which[j]].name);
        for (size_t i = 0; i < nt; i++)
            printf("    %-22s %s\n", t[i].label, cells[j][i].ran
                                                    ? cells[j][i].summary
                                                    : cells[j][i].cell);
    }
    fflush(stdout);
}

/* NAME[,NAME...] or "all" into which[]; false (reported) on a bad name. */
static bool parse_names(const char *arg, size_t *which, size_t *nw)
{
    char buf[512];

    *nw = 0;
    if (strcmp(arg, "all") == 0) {
        for (size_t i = 0; i < SC_NALL; i++)
            which[(*nw)++] = i;
        return true;
    }
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *n = strtok_r(buf, ",", &save); n != NULL;
         n = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < SC_NCASES && strcmp(n, sc_cases[i].name) != 0)
            i++;
        if (i == SC_NCASES) {
            tool_err("scenario", "no scenario '%s' (there are: holder-crash, "
                     "holder-pause, holder-reconnect, holder-restart, "
                     "waiter-disconnect, waiter-crash, conn-drop, "
                     "server-restart, node-loss, failover; or all)", n);
            return false;
        }
        for (size_t k = 0; k < *nw; k++)
            if (which[k] == i)
                i = SC_NCASES; /* already listed */
        if (i < SC_NCASES)
            which[(*nw)++] = i;
    }
    if (*nw == 0) {
        tool_err("scenario", "no scenario named in '%s'", arg);
        return false;
    }
    return true;
}

static int scenario_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, 'u'},
        {"lease", required_argument, NULL, 'l'},
        {"wait", required_argument, NULL, 'w'},
        {"pause", required_argument, NULL, 'p'},
        {"down", required_argument, NULL, 'd'},
        {"restart-cmd", required_argument, NULL, 'r'},
        {"node-cmd", required_argument, NULL, 'n'},
        {"failover-cmd", required_argument, NULL, 'f'},
        {"json", required_argument, NULL, 'j'},
        {"markdown", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct target t[MAX_URIS];
    const char *json = NULL, *markdown = NULL;
    const char *def_restart = NULL, *def_node = NULL, *def_failover = NULL;
    uint32_t lease_ms = 2000, wait_ms = 0, pause_ms = 0, down_ms = 0;
    size_t which[SC_NCASES], nw = 0, nt = 0;
    int opt, first_rc = DLOCK_OK;

    if (argc > 1 && strcmp(argv[1], "__actor") == 0)
        return sc_actor_main(argc, argv);
    if (argc < 2) {
        tool_err("scenario", "missing NAME: a scenario, a comma-separated "
                 "list, or all (see `dlock scenario --help`)");
        return EXIT_USAGE;
    }
    if (tool_is_help(argv[1])) {
        scenario_help();
        return 0;
    }
    if (argv[1][0] == '-') {
        tool_err("scenario", "missing NAME before '%s': a scenario, a "
                 "comma-separated list, or all", argv[1]);
        return EXIT_USAGE;
    }
    if (!parse_names(argv[1], which, &nw))
        return EXIT_USAGE;

    optind = 2;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 'u':
            if (optarg[0] == '\0') {
                tool_err("scenario", "--uri: empty URI");
                return EXIT_USAGE;
            }
            if (nt == MAX_URIS) {
                tool_err("scenario", "--uri: at most %d URIs", MAX_URIS);
                return EXIT_USAGE;
            }
            t[nt++] = (struct target){optarg, NULL, NULL, NULL, ""};
            break;
        case 'l':
            if (!duration_in("--lease", optarg, 200, 60000, &lease_ms))
                return EXIT_USAGE;
            break;
        case 'w':
            if (!duration_in("--wait", optarg, 1000, 600000, &wait_ms))
                return EXIT_USAGE;
            break;
        case 'p':
            if (!duration_in("--pause", optarg, 100, 600000, &pause_ms))
                return EXIT_USAGE;
            break;
        case 'd':
            if (!duration_in("--down", optarg, 100, 600000, &down_ms))
                return EXIT_USAGE;
            break;
        case 'r':
        case 'n':
        case 'f': {
            const char **tcmd = opt == 'r'   ? &t[nt > 0 ? nt - 1 : 0].restart_cmd
                                : opt == 'n' ? &t[nt > 0 ? nt - 1 : 0].node_cmd
                                             : &t[nt > 0 ? nt - 1 : 0].failover_cmd;
            const char **dcmd = opt == 'r'   ? &def_restart
                                : opt == 'n' ? &def_node
                                             : &def_failover;
            if (optarg[0] == '\0') {
                tool_err("scenario", "%s: empty command",
                         opt == 'r'   ? "--restart-cmd"
                         : opt == 'n' ? "--node-cmd"
                                      : "--failover-cmd");
                return EXIT_USAGE;
            }
            *(nt > 0 ? tcmd : dcmd) = optarg;
            break;
        }
        case 'j':
            json = optarg;
            break;
        case 'm':
            markdown = optarg;
            break;
        case 'h':
            scenario_help();
            return 0;
        case ':':
            tool_err("scenario", "%s: needs a value", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            tool_err("scenario", "unknown option '%s' (try `dlock scenario "
                     "--help`)", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        tool_err("scenario", "unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    if (nt == 0) {
        const char *env = getenv("DLOCK_URI");
        t[nt++] = (struct target){env != NULL && env[0] != '\0' ? env : NULL,
                                  NULL, NULL, NULL, ""};
    }
    for (size_t i = 0; i < nt; i++) {
        if (t[i].restart_cmd == NULL)
            t[i].restart_cmd = def_restart;
        if (t[i].node_cmd == NULL)
            t[i].node_cmd = def_node;
        if (t[i].failover_cmd == NULL)
            t[i].failover_cmd = def_failover;
        target_label(&t[i], t, i);
    }

    signal(SIGPIPE, SIG_IGN);
    json_object *runs = json_object_new_array();
    bool many = nt * nw > 1;
    memset(cells, 0, sizeof cells);
    for (size_t i = 0; i < nt; i++) {
        for (size_t j = 0; j < nw; j++) {
            struct sc *s = &s_run;
            json_object *o = NULL;
            memset(s, 0, sizeof *s);
            s->scenario = sc_cases[which[j]].name;
            s->uri = t[i].uri;
            s->lease_ms = lease_ms;
            s->wait_ms = wait_ms;
            s->pause_ms = pause_ms;
            s->down_ms = down_ms;
            s->down_given = down_ms != 0;
            s->restart_cmd = t[i].restart_cmd;
            s->node_cmd = t[i].node_cmd;
            s->failover_cmd = t[i].failover_cmd;
            s->many = many;
            snprintf(s->name, sizeof s->name, "dlock-scenario-%s-%ld-%zu",
                     s->scenario, (long)getpid(), i);
            if (many)
                bn_progress("scenario %zu/%zu: %s on %s",
                            i * nw + j + 1, nt * nw, s->scenario, t[i].label);
            int rc = run_one(s, which[j], &o);
            json_object_array_add(runs, o);
            struct cellrec *c = &cells[j][i];
            c->ran = rc == DLOCK_OK;
            if (rc == DLOCK_OK) {
                snprintf(c->cell, sizeof c->cell, "%s", s->cell);
                snprintf(c->summary, sizeof c->summary, "%s", s->summary);
            } else {
                snprintf(c->cell, sizeof c->cell, "not run: %s",
                         dlock_err_name(rc));
                if (first_rc == DLOCK_OK)
                    first_rc = rc;
            }
        }
    }
    bn_progress_done();
    if (many)
        print_matrix(t, nt, which, nw);

    int rc = first_rc;
    if (markdown != NULL && !write_markdown(markdown, t, nt, which, nw)) {
        tool_err("scenario", "--markdown: cannot write '%s': %s", markdown,
                 strerror(errno));
        if (rc == DLOCK_OK)
            rc = DLOCK_ERROR;
    }
    json_object *root = json_object_new_object();
    json_object *names = json_object_new_array(), *uris = json_object_new_array();
    for (size_t j = 0; j < nw; j++)
        json_object_array_add(names, json_object_new_string(sc_cases[which[j]].name));
    for (size_t i = 0; i < nt; i++) {
        json_object *u = json_object_new_object();
        char red[1024];
        bn_redact(t[i].uri, red, sizeof red);
        json_object_object_add(u, "uri", json_object_new_string(red));
        json_object_object_add(u, "label", json_object_new_string(t[i].label));
        json_object_array_add(uris, u);
    }
    json_object_object_add(root, "scenarios", names);
    json_object_object_add(root, "uris", uris);
    json_object_object_add(root, "lease_ms", json_object_new_int64(lease_ms));
    json_object_object_add(root, "runs", runs);
    if (json != NULL &&
        json_object_to_file_ext(json, root, JSON_C_TO_STRING_PRETTY |
                                                JSON_C_TO_STRING_NOSLASHESCAPE) != 0) {
        tool_err("scenario", "--json: cannot write '%s'", json);
        if (rc == DLOCK_OK)
            rc = DLOCK_ERROR;
    }
    json_object_put(root);
    if (rc == DLOCK_OK)
        return 0;
    rc = tool_exit_for(rc);
    return rc == EXIT_CONFLICT || rc == EXIT_LOST ? EXIT_SOFTWARE : rc;
}

const struct tool_cmd tool_scenario = {
    "scenario", "run failures for real on one or more URIs, side by side",
    scenario_run, scenario_help,
};
