/*
 * cmd_info.c: `dlock info [URI]` (the build and one backend's capabilities)
 * and `dlock inspect [--uri URI] NAME` (one lock's state, without taking
 * it); each as text, or as one JSON object with --json.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "tool.h"

static void info_help(void)
{
    printf("usage: dlock info [--json] [--password-file FILE] "
           "[--uri URI | URI]\n"
           "\n"
           "Print this build's version and backends, then every mode of "
           "URI's backend\n(default: $DLOCK_URI, else file://) with what "
           "it gives, which needs no\nconnection; then connect and print "
           "the chosen mode's capabilities, whether\nit is fair (grants in "
           "order of arrival) and why, and its held window: how\nlong a "
           "holder cut off from the service may believe it holds.\n"
           "--json prints one object instead: version, backends, backend, "
           "summary,\nmodes [{mode, summary, caps, chosen}], connected, "
           "then uri, mode, lease_ms,\ntimeout_ms, client, caps, fair "
           "(whether grants follow arrival order)\nand fairness (why), "
           "or error.\n"
           "\nexit status: 0, else as in `dlock --help` (the modes are "
           "listed before\na failure to connect).\n");
}

/* What info and inspect both take. */
struct args {
    const char *uri, *pwfile;
    bool json;
};

/* --uri, --password-file or --json at argv[*i]: 1 taken, 0 not one of
 * them, -1 refused (printed). */
static int common_arg(const char *sub, int argc, char **argv, int *i,
                      struct args *a)
{
    int u;

    if ((u = tool_uri_arg(sub, argc, argv, i, &a->uri)) != 0 ||
        (u = tool_pwfile_arg(sub, argc, argv, i, &a->pwfile)) != 0)
        return u;
    if (strcmp(argv[*i], "--json") == 0) {
        a->json = true;
        return 1;
    }
    return 0;
}

/* "lease, conn-bound, ..." of a capability set. */
static void caps_text(uint32_t caps, char *out, size_t cap)
{
    size_t n = 0;

    out[0] = '\0';
    for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL;
         bit <<= 1) {
        int w;
        if (!(caps & bit))
            continue;
        w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "",
                     dlock_cap_name(bit));
        if (w < 0 || (size_t)w >= cap - n)
            break;
        n += (size_t)w;
    }
}

/* ["lease", "fencing", ...] of a capability set. */
static json_object *caps_json(uint32_t caps)
{
    json_object *a = json_object_new_array();

    for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL;
         bit <<= 1)
        if (caps & bit)
            json_object_array_add(a,
                                  json_object_new_string(dlock_cap_name(bit)));
    return a;
}

/* Print the JSON object (and free it); returns code. */
static int json_out(json_object *o, int code)
{
    printf("%s\n", json_object_to_json_string_ext(
                        o, JSON_C_TO_STRING_PRETTY |
                               JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return code;
}

/* Every mode of the URI's backend, from its tables alone: printed, or
 * added to root as "backend", "summary" and "modes". */
static int print_modes(const char *uri, json_object *root)
{
    dlock_mode_info m[16];
    char err[512] = "", caps[512];
    size_t n = 0;
    int rc;

    for (size_t i = 0; i < 16; i++)
        m[i] = (dlock_mode_info)DLOCK_MODE_INFO_INIT;
    rc = dlock_backend_modes(uri, m, 16, &n, err, sizeof err);
    if (rc != DLOCK_OK) {
        tool_err("info", "%s", err);
        if (root != NULL)
            json_object_object_add(root, "error", json_object_new_string(err));
        return rc;
    }
    if (root != NULL) {
        json_object *a = json_object_new_array();

        json_object_object_add(root, "backend",
                               json_object_new_string(m[0].scheme));
        json_object_object_add(root, "summary",
                               json_object_new_string(m[0].backend_summary));
        for (size_t i = 0; i < n && i < 16; i++) {
            json_object *o = json_object_new_object();

            json_object_object_add(o, "mode", json_object_new_string(m[i].mode));
            json_object_object_add(o, "summary",
                                   json_object_new_string(m[i].summary));
            json_object_object_add(o, "caps", caps_json(m[i].caps));
            json_object_object_add(o, "chosen",
                                   json_object_new_boolean(m[i].chosen));
            json_object_array_add(a, o);
        }
        json_object_object_add(root, "modes", a);
        return DLOCK_OK;
    }
    printf("%s: %s\nmodes (* the URI's):\n", m[0].scheme,
           m[0].backend_summary);
    for (size_t i = 0; i < n && i < 16; i++) {
        caps_text(m[i].caps, caps, sizeof caps);
        printf("  %s %-14s %s %-16s [%s]\n", m[i].chosen ? "*" : " ",
               m[i].mode, m[i].summary, "", caps);
    }
    return DLOCK_OK;
}

static void print_window(const dlock_info *info)
{
    uint32_t caps = info->caps;

    printf("held window:\n");
    if ((caps & DLOCK_CAP_CONN_BOUND) && (caps & DLOCK_CAP_SERVER_TIMEOUT)) {
        printf("  the lock lives in one connection. The holder stops "
               "believing it holds the moment that connection ends "
               "(its socket is watched), and in any case %" PRIu32 " ms\n"
               "  (the lease) after its last confirmed round trip; the "
               "server frees the locks of a connection that closes at "
               "once, and of one silent for longer than the lease plus "
               "a margin (a tenth, at least 500 ms) by ending it.\n",
               info->lease_ms);
    } else if ((caps & DLOCK_CAP_CONN_BOUND) &&
               (caps & DLOCK_CAP_SURVIVES_RECONNECT)) {
        printf("  the lock lives in a session that survives reconnects. "
               "The server expires the session after its timeout "
               "without heartbeats; the holder believes it holds only\n"
               "  until that timeout after the server last answered.\n");
    } else if (caps & DLOCK_CAP_CONN_BOUND) {
        printf("  the lock lives as long as the holder's process: nobody "
               "else can take it while that process lives, however "
               "long it pauses; it is freed the moment the process "
               "dies.\n");
    } else if (caps & DLOCK_CAP_LEASE) {
        printf("  a lease of %" PRIu32 " ms: the server frees it when it "
               "runs out unrenewed; the holder believes it holds only "
               "until the lease after its last confirmed request, and,\n"
               "  where the mode watches its connections, not while one has "
               "just dropped, until a renewal confirms it.\n",
               info->lease_ms);
    } else {
        printf("  no bound: the lock is held until it is released.\n");
    }
}

/*
 * Whether grants follow arrival order, and why, from the mode's
 * capabilities alone (tools/ knows no backend): the claim DLOCK_CAP_FAIR
 * makes, and the waiting mechanism that makes it true or not. `dlock
 * bench` measures it (the contended workload's arrival order).
 */
static const char *fair_text(uint32_t caps)
{
    /* The claim is the lock's: no mode promises an order of permits. */
    if ((caps & DLOCK_CAP_FAIR) && (caps & DLOCK_CAP_PERMITS))
        return (caps & DLOCK_CAP_NATIVE_WAIT)
                   ? "yes: the server queues the waiters and grants the "
                     "lock in their order of arrival; a releaser that asks "
                     "again queues behind them. That is the lock's: a "
                     "semaphore's permits are promised in no order"
                   : "yes: grants follow the order of arrival. That is the "
                     "lock's: a semaphore's permits are promised in no "
                     "order";
    if ((caps & DLOCK_CAP_FAIR) && (caps & DLOCK_CAP_NATIVE_WAIT))
        return "yes: the server queues the waiters and grants the lock in "
               "their order of arrival; a releaser that asks again "
               "queues behind them";
    if (caps & DLOCK_CAP_FAIR)
        return "yes: grants follow the order of arrival";
    if (caps & DLOCK_CAP_NATIVE_WAIT)
        return "no: the server queues the waiters but promises no order; "
               "a releaser that asks again may be served before them";
    if (caps & DLOCK_CAP_NOTIFY)
        return "no: a release wakes the waiters, which race for the lock; "
               "a releaser that asks again at once races with them "
               "(barging)";
    return "no: waiters retry with backoff and jitter; whoever asks first "
           "after a release wins, the releaser included (barging)";
}

/* text, indented by two and wrapped at 78 columns, and a full stop. */
static void print_wrapped(const char *text)
{
    const char *p = text;

    while (*p != '\0') {
        size_t n = strlen(p), cut = n;
        if (n > 76) {
            cut = 76;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = 76;
        }
        printf("  %.*s%s\n", (int)cut, p, p[cut] == '\0' ? "." : "");
        p += cut;
        while (*p == ' ')
            p++;
    }
}

static int info_show(const char *uri, bool json)
{
    const char *schemes[32];
    size_t n = dlock_backend_schemes(schemes, 32);
    dlock_client *c = NULL;
    dlock_info info = DLOCK_INFO_INIT;
    json_object *root = NULL, *a;
    int rc;

    if (json) {
        root = json_object_new_object();
        a = json_object_new_array();
        json_object_object_add(root, "version",
                               json_object_new_string(dlock_version()));
        for (size_t i = 0; i < n && i < 32; i++)
            json_object_array_add(a, json_object_new_string(schemes[i]));
        json_object_object_add(root, "backends", a);
    } else {
        printf("dlock %s\nbackends:", dlock_version());
        for (size_t i = 0; i < n && i < 32; i++)
            printf(" %s", schemes[i]);
        printf("\n");
    }
    if ((rc = print_modes(uri, root)) != DLOCK_OK)
        return root ? json_out(root, tool_exit_for(rc)) : tool_exit_for(rc);

    rc = dlock_client_open(&c, uri, NULL);
    if (rc != DLOCK_OK) {
        tool_err("info", "%s: %s",
                 rc == DLOCK_EINVAL ? "the URI is not usable"
                                    : "could not connect",
                 dlock_client_errmsg(c));
        if (root != NULL) {
            json_object_object_add(root, "connected",
                                    json_object_new_boolean(0));
            json_object_object_add(
                root, "error", json_object_new_string(dlock_client_errmsg(c)));
        }
        dlock_client_close(c);
        return root ? json_out(root, tool_exit_for(rc)) : tool_exit_for(rc);
    }
    dlock_client_info(c, &info);
    if (root != NULL) {
        json_object_object_add(root, "connected", json_object_new_boolean(1));
        json_object_object_add(root, "uri", json_object_new_string(info.uri));
        json_object_object_add(root, "mode", json_object_new_string(info.mode));
        json_object_object_add(root, "lease_ms",
                               json_object_new_int64(info.lease_ms));
        json_object_object_add(root, "timeout_ms",
                               json_object_new_int64(info.timeout_ms));
        json_object_object_add(root, "client",
                               json_object_new_string(info.owner));
        json_object_object_add(root, "caps", caps_json(info.caps));
        json_object_object_add(
            root, "fair",
            json_object_new_boolean((info.caps & DLOCK_CAP_FAIR) != 0));
        json_object_object_add(root, "fairness",
                               json_object_new_string(fair_text(info.caps)));
        dlock_client_close(c);
        return json_out(root, 0);
    }
    printf("uri:      %s\nbackend:  %s\nmode:     %s\n"
           "lease:    %" PRIu32 " ms\ntimeout:  %" PRIu32 " ms\n"
           "client:   %s\ncapabilities:\n",
           info.uri, info.scheme, info.mode, info.lease_ms, info.timeout_ms,
           info.owner);
    for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL;
         bit <<= 1)
        printf("  %-3s %-19s %s\n", (info.caps & bit) ? "yes" : "no",
               dlock_cap_name(bit), dlock_cap_text(bit));
    printf("fair:\n");
    print_wrapped(fair_text(info.caps));
    print_window(&info);
    dlock_client_close(c);
    return 0;
}

static int info_run(int argc, char **argv)
{
    struct args a = {NULL, NULL, false};
    char *uri_pw = NULL;
    int rc, u;

    for (int i = 1; i < argc; i++) {
        if (tool_is_help(argv[i])) {
            info_help();
            return 0;
        } else if ((u = common_arg("info", argc, argv, &i, &a)) != 0) {
            if (u < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            tool_err("info", "unknown option '%s' (try `dlock info --help`)",
                     argv[i]);
            return EXIT_USAGE;
        } else if (!tool_uri("info", &a.uri, argv[i])) {
            return EXIT_USAGE;
        }
    }
    if (!tool_password("info", a.pwfile, &a.uri, &uri_pw))
        return EXIT_USAGE;
    rc = info_show(a.uri, a.json);
    free(uri_pw);
    return rc;
}

const struct tool_cmd tool_info = {
    "info", "show the build's backends and a URI's capabilities", info_run,
    info_help,
};

static void inspect_help(void)
{
    printf("usage: dlock inspect [--json] [--password-file FILE] "
           "[--uri URI] NAME\n"
           "\n"
           "Show whether NAME is held, by whom, its last fencing token, the "
           "lease left\nand the waiters, as far as the backend can tell. "
           "Takes nothing.\n"
           "--json prints one object: name, held, owner, fence, "
           "remaining_ms, waiters\n(null where the backend cannot tell).\n"
           "\nexit status: 0 free, 1 held, else as in `dlock --help`.\n");
}

static int inspect_show(const char *uri, const char *name, bool json)
{
    dlock_client *c = NULL;
    dlock_state st = DLOCK_STATE_INIT;
    int rc;

    rc = dlock_client_open(&c, uri, NULL);
    if (rc == DLOCK_OK)
        rc = dlock_inspect(c, name, &st);
    if (rc != DLOCK_OK) {
        tool_err("inspect", "%s", dlock_client_errmsg(c));
        dlock_client_close(c);
        return tool_exit_for(rc);
    }
    if (json) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "name", json_object_new_string(name));
        json_object_object_add(o, "held", st.held < 0 ? NULL
                                          : json_object_new_boolean(st.held));
        json_object_object_add(o, "owner", st.owner[0] == '\0' ? NULL
                                           : json_object_new_string(st.owner));
        json_object_object_add(o, "fence", st.fence == 0 ? NULL
                                           : json_object_new_uint64(st.fence));
        json_object_object_add(o, "remaining_ms",
                               st.remaining_ms < 0
                                   ? NULL
                                   : json_object_new_int64(st.remaining_ms));
        json_object_object_add(o, "waiters", st.waiters < 0
                                             ? NULL
                                             : json_object_new_int(st.waiters));
        dlock_client_close(c);
        return json_out(o, st.held > 0 ? 1 : 0);
    }
    printf("name:      %s\nheld:      %s\n", name,
           st.held < 0 ? "unknown" : st.held ? "yes" : "no");
    if (st.owner[0] != '\0')
        printf("owner:     %s\n", st.owner);
    if (st.fence != 0)
        printf("fence:     %" PRIu64 "\n", st.fence);
    if (st.remaining_ms >= 0)
        printf("remaining: %" PRId64 " ms\n", st.remaining_ms);
    if (st.waiters >= 0)
        printf("waiters:   %d\n", st.waiters);
    dlock_client_close(c);
    return st.held > 0 ? 1 : 0;
}

static int inspect_run(int argc, char **argv)
{
    struct args a = {NULL, NULL, false};
    const char *name = NULL;
    char *uri_pw = NULL;
    int rc, u;

    for (int i = 1; i < argc; i++) {
        if (tool_is_help(argv[i])) {
            inspect_help();
            return 0;
        } else if ((u = common_arg("inspect", argc, argv, &i, &a)) != 0) {
            if (u < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            tool_err("inspect", "unknown option '%s'", argv[i]);
            return EXIT_USAGE;
        } else if (name == NULL) {
            name = argv[i];
        } else {
            tool_err("inspect", "expected one NAME");
            return EXIT_USAGE;
        }
    }
    if (name == NULL) {
        tool_err("inspect", "missing NAME (try `dlock inspect --help`)");
        return EXIT_USAGE;
    }
    if (!tool_password("inspect", a.pwfile, &a.uri, &uri_pw))
        return EXIT_USAGE;
    rc = inspect_show(a.uri, name, a.json);
    free(uri_pw);
    return rc;
}

const struct tool_cmd tool_inspect = {
    "inspect", "show a lock's holder, fence and lease without taking it",
    inspect_run, inspect_help,
};
