/*
 * scenario_cases.c: the failures `dlock scenario` runs, one function each,
 * on the stage of scenario_stage.c, and their table:
 *
 *   holder-crash      the holder is SIGKILLed: how long until a waiter
 *                     gets in;
 *   holder-pause      the holder is SIGSTOPped past its lease: does a
 *                     second holder get in, is the first told when it
 *                     wakes, and does the fencing token let a storage layer
 *                     reject the stale writer;
 *   holder-reconnect  the holder's connections are cut briefly (TCP proxies
 *                     in this process, in front of every host of the URI)
 *                     and restored before the lease ends: kept or lost?
 *   holder-restart    the holder is SIGKILLed and started again with the
 *                     same lock name: how long until it has it again;
 *   waiter-disconnect a waiter's connections are cut while it waits: an
 *                     error, or does it go on waiting; is the queue served?
 *   waiter-crash      a waiter is SIGKILLed while it waits: does the next
 *                     waiter still get the lock promptly?
 *   conn-drop         the holder's connections are cut for longer than the
 *                     lease, and restored;
 *   server-restart    the server is restarted by --restart-cmd;
 *   node-loss         a cluster loses the node the holder talks to
 *                     (--node-cmd kills it and starts it again).
 *
 * The outcome is data: each case fills results (the JSON), an outcome (a
 * sentence), a summary (a Markdown cell) and a shorter cell for the
 * terminal's side-by-side table, whatever the lock did.
 *
 * Divisions: building blocks; the cases; their table.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scenario.h"

extern char **environ;

/* ---- building blocks ---------------------------------------------------------------- */

static bool has(const struct sc *s, uint32_t cap)
{
    return (s->caps & cap) != 0;
}

static json_object *jms(double ms)
{
    return json_object_new_double((double)(int64_t)(ms * 10) / 10);
}

/* Was a told it lost the lock (key), and how long after t (key_ms)? */
static void result_told(struct sc *s, const struct actor *a, const char *key,
                        const char *key_ms, uint64_t t)
{
    sc_result(s, key, json_object_new_boolean(a->lost));
    sc_result(s, key_ms,
           a->lost ? jms(((double)a->lost_ns - (double)t) / 1e6) : NULL);
}

/* A lease's time (the effective one), at least 2 s: how long a watchdog
 * may take to find a lock lost, or a server to fail over. */
static uint32_t lease_window_ms(const struct sc *s)
{
    return s->eff_ms > 2000 ? s->eff_ms : 2000;
}

/* Give holder a a lease's time to be told of a loss (no wait if it has
 * been), then whether it still believes it holds. */
static int holder_settled(struct sc *s, struct actor *a)
{
    if (!a->lost)
        sc_pump(s, lease_window_ms(s), a, "lost", NULL, 0);
    return sc_held(s, a);
}

/* The actor starts waiting for the lock (at most s->wait_ms), and has
 * had the time to queue up. */
static void queue(struct sc *s, struct actor *w)
{
    sc_acquire_start(s, w, s->wait_ms);
    sc_say(s, bn_now_ns(), w->label, "waits for the lock (at most %" PRIu32
        " ms)", s->wait_ms);
    sc_pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
}

/* The first holder takes the lock, or the scenario cannot go on. */
static int first_holder_at(struct sc *s, struct actor **a, const char *label,
                           const char *uri, struct got *g)
{
    int rc = sc_actor_start(s, a, label, "holder", uri);

    if (rc != DLOCK_OK)
        return rc;
    sc_acquire(s, *a, s->wait_ms, g);
    if (!g->ok) {
        tool_err("scenario", "%s could not take the lock: %s %s", label,
                 g->answered ? g->err : "no answer", g->msg);
        return g->answered ? sc_err_code(g->err) : DLOCK_ERROR;
    }
    return DLOCK_OK;
}

static int first_holder(struct sc *s, struct actor **a, const char *label,
                        struct got *g)
{
    return first_holder_at(s, a, label, NULL, g);
}

/* The scenario does not apply here: say why, in the three lengths. */
static int not_applicable(struct sc *s, const char *why, const char *brief,
                          const char *cell)
{
    printf("  not applicable: %s\n", why);
    sc_result(s, "applicable", json_object_new_boolean(false));
    snprintf(s->outcome, sizeof s->outcome, "not applicable: %s", why);
    snprintf(s->summary, sizeof s->summary, "n/a (%s)", brief);
    snprintf(s->cell, sizeof s->cell, "n/a: %s", cell);
    return SC_NA;
}

/*
 * A scenario that needs a command (opt) it was not given: one of several
 * runs says n/a and goes on; a run of its own is a usage error.
 */
static int missing_cmd(struct sc *s, const char *opt, const char *example)
{
    char why[64], brief[64];

    if (s->many) {
        snprintf(why, sizeof why, "no %s given for this URI", opt);
        snprintf(brief, sizeof brief, "no %s given", opt);
        return not_applicable(s, why, brief, "no cmd");
    }
    tool_err("scenario", "%s: needs %s CMD (e.g. %s)", s->scenario, opt,
             example);
    return DLOCK_EINVAL;
}

/* A holds the lock; W is waiting for it (started, asked, settled). */
static int holder_and_waiter(struct sc *s, struct actor **a, struct got *ga,
                             struct actor **w)
{
    int rc;

    if ((rc = first_holder(s, a, "A", ga)) != DLOCK_OK)
        return rc;
    if ((rc = sc_actor_start(s, w, "W", "waiter", NULL)) != DLOCK_OK)
        return rc;
    queue(s, *w);
    return DLOCK_OK;
}

/*
 * Put a proxy of this process in front of every host:port of the URI and
 * write into puri the URI with each replaced by its proxy, so that an actor
 * connected through puri can be cut off from the whole service (every node
 * of an ensemble or of Redlock) at once. DLOCK_OK; or, with s->outcome set
 * to "not applicable", SC_NA when the URI names no host (a file://
 * lock lives in this machine's kernel); DLOCK_EINVAL when a host has no
 * explicit port.
 */
/* A redis:// URI with cluster=1 (or true, yes, on): its hosts are only
 * seeds, and the client connects to the masters the slot map names. */
static bool uri_is_cluster(const char *uri)
{
    static const char *const yes[] = {"1&", "true&", "yes&", "on&"};
    const char *q = strchr(uri, '?');

    for (const char *p = q; p != NULL; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, "cluster=", 8) != 0)
            continue;
        for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
            size_t n = strlen(yes[i]) - 1;
            if (strncmp(p + 9, yes[i], n) == 0 &&
                (p[9 + n] == '&' || p[9 + n] == '\0'))
                return true;
        }
    }
    return false;
}

static int proxy_uri(struct sc *s, char *puri, size_t cap)
{
    size_t n = bn_uri_nhosts(s->uri), len = 0, from = 0;
    char host[256], err[160];

    if (n == 0)
        return not_applicable(s, "no connection to cut: the URI names no "
                              "host:port (a file:// lock lives in this "
                              "machine's kernel)", "no connection",
                              "no conn");
    if (uri_is_cluster(s->uri))
        return not_applicable(s, "no connection this proxy can cut: a "
                              "Redis Cluster client reaches the masters "
                              "its slot map names, not the seeds the URI "
                              "gives (node-loss kills the lock's master "
                              "instead)", "cluster: proxy bypassed",
                              "cluster");
    if (n > MAX_HOSTS) {
        tool_err("scenario", "%s: at most %d hosts can be proxied",
                 s->scenario, MAX_HOSTS);
        return DLOCK_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t start, end;
        int port;
        if (!bn_uri_hostport(s->uri, i, host, sizeof host, &port, &start,
                             &end)) {
            tool_err("scenario", "%s: the URI must give every host with an "
                     "explicit :port, for the proxy", s->scenario);
            return DLOCK_EINVAL;
        }
        if (bn_proxy_start(&s->proxy[i], host, port, err, sizeof err) != 0) {
            tool_err("scenario", "%s: %s", s->scenario, err);
            return DLOCK_ERROR;
        }
        s->nproxies = i + 1;
        int w = snprintf(puri + len, cap - len, "%.*s127.0.0.1:%d",
                         (int)(start - from), s->uri + from,
                         bn_proxy_port(s->proxy[i]));
        if (w < 0 || (size_t)w >= cap - len)
            return DLOCK_EINVAL;
        len += (size_t)w;
        from = end;
        printf("  proxy 127.0.0.1:%d -> %s:%d\n", bn_proxy_port(s->proxy[i]),
               host, port);
    }
    if (snprintf(puri + len, cap - len, "%s", s->uri + from) >=
        (int)(cap - len))
        return DLOCK_EINVAL;
    sc_result(s, "applicable", json_object_new_boolean(true));
    return DLOCK_OK;
}

/* Cut (down) or restore every proxy. Returns, summed over them, the
 * connections cut when going down, or the connection attempts refused
 * meanwhile when coming back up. */
static unsigned proxies_set(struct sc *s, bool down)
{
    unsigned total = 0, served, cut, refused;

    for (size_t i = 0; i < s->nproxies; i++) {
        if (down)
            bn_proxy_down(s->proxy[i]);
        else
            bn_proxy_up(s->proxy[i]);
        bn_proxy_counts(s->proxy[i], &served, &cut, &refused);
        total += down ? cut : refused;
    }
    return total;
}

/* Let ms pass from t0 (ns), recording events meanwhile. */
static void pump_until(struct sc *s, uint64_t t0, uint32_t ms)
{
    uint64_t until = t0 + (uint64_t)ms * 1000000u, now = bn_now_ns();

    if (now < until)
        sc_pump(s, (uint32_t)((until - now) / 1000000u), NULL, NULL, NULL, 0);
}

static void told_text(const struct sc *s, const struct actor *a, uint64_t t,
                      const char *since, char *buf, size_t cap)
{
    (void)s;
    if (a->lost)
        snprintf(buf, cap, "told %.0f ms after %s",
                 ((double)a->lost_ns - (double)t) / 1e6, since);
    else
        snprintf(buf, cap, "never told");
}

/* Run CMD through /bin/sh, waiting at most ms; its exit status or -1. */
static int run_shell(const char *cmd, uint32_t ms)
{
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    posix_spawnattr_t attr;
    sigset_t def;
    pid_t pid;
    int st, rc;

    posix_spawnattr_init(&attr);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    rc = posix_spawn(&pid, "/bin/sh", NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        return -1;
    st = bn_reap(pid, ms);
    if (st < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Wait up to ms for the first of two actors' acquire answers; which one
 * answered first in *first (NULL: neither). */
static void first_of(struct sc *s, struct actor *x, struct got *gx,
                     struct actor *y, struct got *gy, uint32_t ms,
                     struct actor **first)
{
    uint64_t until = bn_now_ns() + (uint64_t)ms * 1000000u;

    *first = NULL;
    memset(gx, 0, sizeof *gx);
    memset(gy, 0, sizeof *gy);
    while (bn_now_ns() < until) {
        sc_acquire_wait(s, x, 20, gx);
        if (gx->answered) {
            *first = x;
            return;
        }
        sc_acquire_wait(s, y, 20, gy);
        if (gy->answered) {
            *first = y;
            return;
        }
    }
}

/*
 * Which host of the URI (0-based) has the actor a TCP connection to: its
 * sockets' inodes (/proc/PID/fd) looked up in /proc/PID/net/tcp{,6} by
 * remote port. -1 when none, or several (Redlock talks to every node).
 */
static int actor_node(const struct sc *s, const struct actor *a)
{
    int ports[MAX_HOSTS], found = -1;
    size_t n = bn_uri_nhosts(s->uri);
    char path[64], link[64], host[256], line[512];
    unsigned long inodes[256];
    size_t ninodes = 0;

    for (size_t i = 0; i < n && i < MAX_HOSTS; i++) {
        size_t st, en;
        if (!bn_uri_hostport(s->uri, i, host, sizeof host, &ports[i], &st,
                             &en))
            ports[i] = -1;
    }
    for (int fd = 0; fd < 1024 && ninodes < 256; fd++) {
        snprintf(path, sizeof path, "/proc/%ld/fd/%d", (long)a->pid, fd);
        ssize_t r = readlink(path, link, sizeof link - 1);
        if (r <= 0)
            continue;
        link[r] = '\0';
        unsigned long ino;
        if (sscanf(link, "socket:[%lu]", &ino) == 1)
            inodes[ninodes++] = ino;
    }
    for (int v6 = 0; v6 < 2; v6++) {
        snprintf(path, sizeof path, "/proc/%ld/net/tcp%s", (long)a->pid,
                 v6 ? "6" : "");
        FILE *f = fopen(path, "re");
        if (f == NULL)
            continue;
        while (fgets(line, sizeof line, f) != NULL) {
            char rem[64];
            unsigned st, rport;
            unsigned long ino;
            /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
            if (sscanf(line, " %*s %*s %63s %x %*s %*s %*s %*u %*u %lu", rem,
                       &st, &ino) != 3)
                continue;
            char *colon = strrchr(rem, ':');
            if (colon == NULL || sscanf(colon + 1, "%x", &rport) != 1 ||
                st != 1 /* ESTABLISHED */)
                continue;
            bool mine = false;
            for (size_t i = 0; i < ninodes; i++)
                mine = mine || inodes[i] == ino;
            for (size_t i = 0; mine && i < n && i < MAX_HOSTS; i++) {
                if (ports[i] != (int)rport)
                    continue;
                if (found >= 0 && found != (int)i) {
                    fclose(f);
                    return -1;
                }
                found = (int)i;
            }
        }
        fclose(f);
    }
    return found;
}

/* Run cmd with var=value (and var2=value2 unless var2 is NULL) in its
 * environment, for at most 2 minutes; its exit status. */
static int run_with(const char *cmd, const char *var, const char *value,
                    const char *var2, const char *value2)
{
    setenv(var, value, 1);
    if (var2 != NULL)
        setenv(var2, value2, 1);
    int st = run_shell(cmd, 120000);
    unsetenv(var);
    if (var2 != NULL)
        unsetenv(var2);
    return st;
}

/* Run the --node-cmd with DLOCK_NODE_ACTION and DLOCK_NODE (1-based). */
static int node_cmd(struct sc *s, const char *action, int node)
{
    char num[16];

    snprintf(num, sizeof num, "%d", node);
    return run_with(s->node_cmd, "DLOCK_NODE_ACTION", action, "DLOCK_NODE",
                    num);
}

/* ---- the cases ------------------------------------------------------------------------ */

static int case_holder_crash(struct sc *s)
{
    struct actor *a, *b;
    struct got ga, g;
    int rc;

    if ((rc = first_holder(s, &a, "A", &ga)) != DLOCK_OK)
        return rc;
    if ((rc = sc_actor_start(s, &b, "B", "waiter", NULL)) != DLOCK_OK)
        return rc;
    queue(s, b);
    uint64_t t_kill = bn_now_ns();
    sc_actor_kill(s, a);
    sc_acquire_wait(s, b, s->wait_ms + REPLY_TIMEOUT_MS, &g);

    sc_result(s, "next_acquired", json_object_new_boolean(g.ok));
    sc_result(s, "first_fence", json_object_new_int64((int64_t)ga.fence));
    sc_result(s, "next_fence", g.ok ? json_object_new_int64((int64_t)g.fence) : NULL);
    if (g.ok) {
        double ms = ((double)g.t - (double)t_kill) / 1e6;
        sc_result(s, "kill_to_next_acquire_ms", jms(ms));
        snprintf(s->summary, sizeof s->summary, "free after %.0f ms", ms);
        snprintf(s->cell, sizeof s->cell, "free in %.0fms", ms);
        snprintf(s->outcome, sizeof s->outcome,
                 "the next holder got the lock %.0f ms after the holder was "
                 "killed (%s)",
                 ms,
                 has(s, DLOCK_CAP_LEASE) && !has(s, DLOCK_CAP_CONN_BOUND)
                     ? "the lease ran out"
                     : "freed with the holder's connection/session");
    } else {
        sc_result(s, "kill_to_next_acquire_ms", NULL);
        snprintf(s->summary, sizeof s->summary, "NOT free after %.0f ms",
                 ((double)g.t - (double)t_kill) / 1e6);
        snprintf(s->cell, sizeof s->cell, "NOT free %.0fms",
                 ((double)g.t - (double)t_kill) / 1e6);
        snprintf(s->outcome, sizeof s->outcome,
                 "the lock was NOT free %.0f ms after the holder was killed",
                 ((double)g.t - (double)t_kill) / 1e6);
    }
    return DLOCK_OK;
}

static int case_holder_pause(struct sc *s)
{
    struct actor *a, *b;
    struct got ga, gb;
    char res[64], stale[64], err[32];
    int rc;

    if ((rc = sc_actor_start(s, &a, "A", "holder", NULL)) != DLOCK_OK)
        return rc;
    sc_acquire(s, a, s->wait_ms, &ga);
    if (!ga.ok) {
        tool_err("scenario", "A could not take the lock: %s", ga.msg);
        return ga.answered ? sc_err_code(ga.err) : DLOCK_ERROR;
    }
    sc_store(s, a, res, sizeof res);
    if ((rc = sc_actor_start(s, &b, "B", "second holder", NULL)) != DLOCK_OK)
        return rc;

    sc_actor_signal(s, a, SIGSTOP, "paused (SIGSTOP): a long GC pause, a "
                 "swapped-out VM");
    uint64_t t_stop = bn_now_ns();
    sc_pump(s, s->pause_ms, NULL, NULL, NULL, 0);

    /* B tries for one more lease: a lease mode lets it in at once. */
    uint32_t try_ms = s->eff_ms;
    sc_say(s, bn_now_ns(), "B", "tries to take the lock (at most %" PRIu32
        " ms)", try_ms);
    sc_acquire(s, b, try_ms, &gb);
    if (gb.ok)
        sc_store(s, b, res, sizeof res);

    uint64_t t_cont = bn_now_ns();
    sc_actor_signal(s, a, SIGCONT, "resumed (SIGCONT); it still believes it "
                 "holds the lock and writes at once");
    /* The stale writer acts before anyone tells it anything. */
    sc_store(s, a, stale, sizeof stale);
    int a_held = sc_held(s, a);
    /* Then give the watchdog time to find out (if there is anything to
     * find out: without a second holder the lock is still A's). */
    if (!a->lost)
        sc_pump(s, !gb.ok ? SETTLE_MS : lease_window_ms(s), a, "lost", NULL,
                0);
    if (gb.ok)
        sc_release(s, b, err, sizeof err);
    sc_release(s, a, err, sizeof err);

    sc_result(s, "paused_ms", jms(((double)t_cont - (double)t_stop) / 1e6));
    sc_result(s, "second_holder_got_in", json_object_new_boolean(gb.ok));
    sc_result(s, "first_fence", json_object_new_int64((int64_t)ga.fence));
    sc_result(s, "second_fence",
           gb.ok ? json_object_new_int64((int64_t)gb.fence) : NULL);
    result_told(s, a, "first_told", "first_told_after_resume_ms", t_cont);
    sc_result(s, "first_held_after_resume", json_object_new_int(a_held));
    sc_result(s, gb.ok ? "stale_write" : "write_after_resume",
           json_object_new_string(stale));
    sc_result(s, "a_release", json_object_new_string(err));

    char told[64] = "never told";
    if (a->lost)
        snprintf(told, sizeof told, "told %.0f ms after resuming",
                 ((double)a->lost_ns - (double)t_cont) / 1e6);
    if (!gb.ok)
        snprintf(s->cell, sizeof s->cell, "kept; no 2nd");
    else
        snprintf(s->cell, sizeof s->cell, "2nd in; stale %s",
                 strcmp(stale, "rejected") == 0    ? "rejected"
                 : strcmp(stale, "unchecked") == 0 ? "ACCEPTED"
                                                   : stale);
    if (!gb.ok)
        snprintf(s->summary, sizeof s->summary, "no second holder (%s)",
                 has(s, DLOCK_CAP_LEASE) ? "lease still valid" : "no lease");
    else if (strcmp(stale, "rejected") == 0)
        snprintf(s->summary, sizeof s->summary,
                 "second holder got in; stale write rejected by fence; %s",
                 told);
    else
        snprintf(s->summary, sizeof s->summary,
                 "second holder got in; stale write %s%s; %s",
                 strcmp(stale, "unchecked") == 0 ? "ACCEPTED" : stale,
                 ga.fence == 0 ? " (no fencing)" : "", told);
    if (!gb.ok)
        snprintf(s->outcome, sizeof s->outcome,
                 "no second holder: the lock did not expire while its holder "
                 "was paused %.0f ms (%s)",
                 ((double)t_cont - (double)t_stop) / 1e6,
                 has(s, DLOCK_CAP_LEASE) ? "its lease had not run out"
                                         : "no lease: it lives as long as "
                                           "the holder's connection");
    else if (strcmp(stale, "rejected") == 0)
        snprintf(s->outcome, sizeof s->outcome,
                 "a second holder got in; the paused holder's stale write "
                 "(fence %" PRIu64 " < %" PRIu64 ") was rejected by the "
                 "storage; it was %s",
                 ga.fence, gb.fence,
                 a->lost ? "told it lost the lock" : "never told");
    else
        snprintf(s->outcome, sizeof s->outcome,
                 "a second holder got in and the paused holder's stale write "
                 "was %s (%s); it was %s",
                 stale,
                 ga.fence == 0 ? "no fencing token to check"
                               : "its token was not lower",
                 a->lost ? "told it lost the lock" : "never told");
    return DLOCK_OK;
}

static int case_conn_drop(struct sc *s)
{
    char puri[2048], code[32], told[128];
    int rc;
    struct actor *a, *b;
    struct got ga, gb;

    rc = proxy_uri(s, puri, sizeof puri);
    if (rc != DLOCK_OK)
        return rc == SC_NA ? DLOCK_OK : rc;
    printf("  A connects through the proxies; B connects directly\n");
    if ((rc = first_holder_at(s, &a, "A", puri, &ga)) != DLOCK_OK)
        return rc;
    if ((rc = sc_actor_start(s, &b, "B", "other client", NULL)) != DLOCK_OK)
        return rc;

    uint64_t t_drop = bn_now_ns();
    unsigned cut = proxies_set(s, true);
    sc_say(s, t_drop, "net", "A's connections cut (%u reset); new ones refused "
        "for %" PRIu32 " ms", cut, s->down_ms);
    sc_say(s, bn_now_ns(), "B", "tries to take the lock during the outage");
    sc_acquire(s, b, s->down_ms, &gb);
    pump_until(s, t_drop, s->down_ms);
    unsigned refused = proxies_set(s, false);
    uint64_t t_up = bn_now_ns();
    sc_say(s, t_up, "net", "restored (%u connection attempts refused meanwhile)",
        refused);
    /* A's watchdog gets a lease's time to reconnect or to give up. */
    int a_held = holder_settled(s, a);
    if (gb.ok)
        sc_release(s, b, code, sizeof code);
    sc_release(s, a, code, sizeof code);

    sc_result(s, "down_ms", jms(((double)t_up - (double)t_drop) / 1e6));
    result_told(s, a, "holder_told", "holder_told_after_drop_ms", t_drop);
    sc_result(s, "other_got_lock", json_object_new_boolean(gb.ok));
    sc_result(s, "other_got_lock_after_drop_ms",
           gb.ok ? jms(((double)gb.t - (double)t_drop) / 1e6) : NULL);
    sc_result(s, "holder_held_after_restore", json_object_new_int(a_held));
    sc_result(s, "holder_release", json_object_new_string(code));

    told_text(s, a, t_drop, "the cut", told, sizeof told);
    snprintf(s->summary, sizeof s->summary, "holder %s; other %s; %s after",
             told, gb.ok ? "got it" : "did not get it",
             a_held == 1 ? "still held" : "not held");
    if (a->lost)
        snprintf(s->cell, sizeof s->cell, "told %.0fms;%s",
                 ((double)a->lost_ns - (double)t_drop) / 1e6,
                 gb.ok ? " B in" : " B out");
    else
        snprintf(s->cell, sizeof s->cell, "%s; %s",
                 a_held == 1 ? "kept" : "NOT told",
                 gb.ok ? "B in" : "B out");
    snprintf(s->outcome, sizeof s->outcome,
             "holder %s; another client %s; after restore the holder %s",
             told,
             gb.ok ? "got the lock during the outage"
                   : "did not get the lock during the outage",
             a_held == 1 ? "still holds it" : "no longer holds it");
    return DLOCK_OK;
}

static int case_server_restart(struct sc *s)
{
    struct actor *a, *w;
    struct got ga, gw;
    char code[32];
    int rc;

    if (s->restart_cmd == NULL) {
        if (bn_uri_nhosts(s->uri) == 0)
            return not_applicable(s, "no server to restart: the URI names "
                                  "no host (give --restart-cmd to run a "
                                  "command anyway)", "no server",
                                  "no server");
        return missing_cmd(s, "--restart-cmd",
                           "\"$DLOCK_TEST_SERVERCTL restart KIND\"");
    }
    sc_result(s, "applicable", json_object_new_boolean(true));
    if ((rc = holder_and_waiter(s, &a, &ga, &w)) != DLOCK_OK)
        return rc;

    uint64_t t_r0 = bn_now_ns();
    sc_say(s, t_r0, "srv", "restart: %s", s->restart_cmd);
    int st = run_shell(s->restart_cmd, 120000);
    uint64_t t_r1 = bn_now_ns();
    sc_say(s, t_r1, "srv", "restart command done (exit %d)", st);

    /* Watch for a while: the waiter's answer, the holder's loss. */
    sc_acquire_wait(s, w, s->wait_ms + REPLY_TIMEOUT_MS, &gw);
    int a_held = holder_settled(s, a);
    if (gw.ok)
        sc_release(s, w, code, sizeof code);
    sc_release(s, a, code, sizeof code);

    sc_result(s, "restart_exit", json_object_new_int(st));
    sc_result(s, "restart_ms", jms(((double)t_r1 - (double)t_r0) / 1e6));
    result_told(s, a, "holder_told", "holder_told_after_restart_start_ms",
                t_r0);
    sc_result(s, "holder_held_after", json_object_new_int(a_held));
    sc_result(s, "waiter_got_lock", json_object_new_boolean(gw.ok));
    sc_result(s, "waiter_got_lock_after_restart_start_ms",
           gw.ok ? jms(((double)gw.t - (double)t_r0) / 1e6) : NULL);
    sc_result(s, "waiter_error", gw.ok || !gw.answered
                                  ? NULL
                                  : json_object_new_string(gw.err));

    snprintf(s->cell, sizeof s->cell, "A %s; W %s%s",
             a->lost ? "told" : a_held == 1 ? "kept" : "NOT told",
             gw.ok ? "in" : "out", gw.ok && a_held == 1 ? " TWO" : "");
    char atext[64], wtext[64];
    if (a->lost)
        snprintf(atext, sizeof atext, "told %.0f ms after the restart began",
                 ((double)a->lost_ns - (double)t_r0) / 1e6);
    else
        snprintf(atext, sizeof atext, "%s",
                 a_held == 1 ? "still holds" : "not told");
    if (gw.ok)
        snprintf(wtext, sizeof wtext, "got it after %.0f ms",
                 ((double)gw.t - (double)t_r0) / 1e6);
    else
        snprintf(wtext, sizeof wtext, "did not get it");
    snprintf(s->summary, sizeof s->summary,
             "restart %.0f ms; holder %s; waiter %s%s",
             ((double)t_r1 - (double)t_r0) / 1e6, atext, wtext,
             gw.ok && a_held == 1 ? " (TWO HOLDERS)" : "");
    snprintf(s->outcome, sizeof s->outcome,
             "restart took %.0f ms (exit %d); holder %s; waiter %s%s",
             ((double)t_r1 - (double)t_r0) / 1e6, st,
             a->lost ? "told it lost the lock"
                     : a_held == 1 ? "still holds it" : "not told, not holding",
             gw.ok ? "got the lock" : "did not get the lock",
             gw.ok && a_held == 1 ? " (TWO HOLDERS)" : "");
    return DLOCK_OK;
}

static int case_waiter_crash(struct sc *s)
{
    struct actor *a, *w1, *w2;
    struct got g;
    char code[32];
    int rc;

    if ((rc = first_holder(s, &a, "A", &g)) != DLOCK_OK)
        return rc;
    if ((rc = sc_actor_start(s, &w2, "W2", "waiter", NULL)) != DLOCK_OK)
        return rc;

    /* Baseline: a plain hand-off from A to W2, nobody crashed. */
    printf("  baseline: A releases while W2 waits\n");
    sc_acquire_start(s, w2, s->wait_ms);
    sc_pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
    uint64_t t_rel0 = sc_release(s, a, code, sizeof code);
    sc_acquire_wait(s, w2, s->wait_ms + REPLY_TIMEOUT_MS, &g);
    double base = g.ok ? ((double)g.t - (double)t_rel0) / 1e6 : -1;
    if (!g.ok) {
        tool_err("scenario", "baseline hand-off failed: %s", g.msg);
        return DLOCK_ERROR;
    }
    sc_release(s, w2, code, sizeof code);

    printf("  crash: W1 queues first, then W2; W1 is killed while "
           "waiting; A releases\n");
    sc_acquire(s, a, s->wait_ms, &g);
    if (!g.ok)
        return DLOCK_ERROR;
    if ((rc = sc_actor_start(s, &w1, "W1", "waiter", NULL)) != DLOCK_OK)
        return rc;
    queue(s, w1);
    queue(s, w2);
    sc_actor_kill(s, w1);
    sc_pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
    uint64_t t_rel = sc_release(s, a, code, sizeof code);
    sc_acquire_wait(s, w2, s->wait_ms + REPLY_TIMEOUT_MS, &g);
    if (g.ok)
        sc_release(s, w2, code, sizeof code);

    double after = g.ok ? ((double)g.t - (double)t_rel) / 1e6 : -1;
    /* A server that grants inside the release (a queue) may answer W2
     * before A's release has returned: that is no wait at all. */
    if (g.ok && after < 0)
        after = 0;
    sc_result(s, "baseline_handoff_ms", jms(base));
    sc_result(s, "next_waiter_got_lock", json_object_new_boolean(g.ok));
    sc_result(s, "release_to_next_acquire_ms", g.ok ? jms(after) : NULL);
    if (g.ok)
        snprintf(s->cell, sizeof s->cell, "next in %.1fms", after);
    else
        snprintf(s->cell, sizeof s->cell, "BLOCKED");
    if (g.ok)
        snprintf(s->summary, sizeof s->summary,
                 "next waiter in %.1f ms (baseline %.1f ms)", after, base);
    else
        snprintf(s->summary, sizeof s->summary,
                 "next waiter BLOCKED for %" PRIu32 " ms", s->wait_ms);
    if (g.ok)
        snprintf(s->outcome, sizeof s->outcome,
                 "the next waiter got the lock %.1f ms after the release "
                 "(baseline without a crash: %.1f ms): no orphaned waiter "
                 "blocked it",
                 after, base);
    else
        snprintf(s->outcome, sizeof s->outcome,
                 "the next waiter did NOT get the lock within %" PRIu32
                 " ms of the release: the dead waiter blocks the queue",
                 s->wait_ms);
    return DLOCK_OK;
}

static int case_holder_reconnect(struct sc *s)
{
    char puri[2048], code[32], told[128], res[64], stale[64] = "";
    struct actor *a, *b;
    struct got ga, gb;
    int rc;

    rc = proxy_uri(s, puri, sizeof puri);
    if (rc != DLOCK_OK)
        return rc;
    printf("  A connects through the proxies; B connects directly and "
           "waits\n");
    if ((rc = first_holder_at(s, &a, "A", puri, &ga)) != DLOCK_OK)
        return rc;
    sc_store(s, a, res, sizeof res);
    if ((rc = sc_actor_start(s, &b, "B", "waiter", NULL)) != DLOCK_OK)
        return rc;

    /* B waits through the cut and one lease more: long enough to get
     * the lock if A lost it, whether at once or when its lease ran out. */
    uint32_t b_wait = s->short_ms + s->eff_ms + 500;
    uint64_t t_cut = bn_now_ns();
    unsigned cut = proxies_set(s, true);
    sc_say(s, t_cut, "net", "A's connections cut (%u reset) for %" PRIu32
        " ms: less than the lease", cut, s->short_ms);
    sc_acquire_start(s, b, b_wait);
    sc_say(s, bn_now_ns(), "B", "waits for the lock (at most %" PRIu32 " ms)",
        b_wait);
    pump_until(s, t_cut, s->short_ms);
    unsigned refused = proxies_set(s, false);
    uint64_t t_up = bn_now_ns();
    sc_say(s, t_up, "net", "restored (%u connection attempts refused meanwhile)",
        refused);
    sc_acquire_wait(s, b, b_wait + REPLY_TIMEOUT_MS, &gb);
    if (gb.ok)
        sc_store(s, b, res, sizeof res);
    int a_held = sc_held(s, a);
    /* A writes with its token, as a program that was not told would. */
    sc_store(s, a, stale, sizeof stale);
    if (gb.ok && !a->lost)
        sc_pump(s, SETTLE_MS, a, "lost", NULL, 0);
    if (gb.ok)
        sc_release(s, b, code, sizeof code);
    sc_release(s, a, code, sizeof code);

    bool kept = a_held == 1 && !a->lost && !gb.ok;
    sc_result(s, "down_ms", jms(((double)t_up - (double)t_cut) / 1e6));
    sc_result(s, "holder_kept_lock", json_object_new_boolean(kept));
    result_told(s, a, "holder_told", "holder_told_after_cut_ms", t_cut);
    sc_result(s, "holder_held_after_restore", json_object_new_int(a_held));
    sc_result(s, "other_got_lock", json_object_new_boolean(gb.ok));
    sc_result(s, "other_got_lock_after_cut_ms",
           gb.ok ? jms(((double)gb.t - (double)t_cut) / 1e6) : NULL);
    sc_result(s, "holder_write_after", json_object_new_string(stale));

    told_text(s, a, t_cut, "the cut", told, sizeof told);
    if (kept) {
        snprintf(s->cell, sizeof s->cell, "kept");
        snprintf(s->summary, sizeof s->summary,
                 "kept it through a %.0f ms cut; B stayed out",
                 ((double)t_up - (double)t_cut) / 1e6);
        snprintf(s->outcome, sizeof s->outcome,
                 "the holder kept the lock through a %.0f ms cut (its "
                 "lease or session outlived it); the waiter did not get in "
                 "within %" PRIu32 " ms",
                 ((double)t_up - (double)t_cut) / 1e6, b_wait);
        return DLOCK_OK;
    }
    snprintf(s->cell, sizeof s->cell, "lost;%s%s%s",
             a->lost ? " told;" : " NOT told;", gb.ok ? " B in" : " B out",
             gb.ok && a_held == 1 ? " TWO" : "");
    snprintf(s->summary, sizeof s->summary,
             "lost it; %s; B %s%s; stale write %s", told,
             gb.ok ? "got it" : "did not get it",
             gb.ok && a_held == 1 ? " (TWO HOLDERS)" : "",
             strcmp(stale, "unchecked") == 0 ? "ACCEPTED (no fencing)"
                                              : stale);
    snprintf(s->outcome, sizeof s->outcome,
             "the holder lost the lock to a %.0f ms cut and was %s; the "
             "waiter %s; the old holder's write afterwards was %s",
             ((double)t_up - (double)t_cut) / 1e6, told,
             gb.ok ? "got the lock" : "did not get the lock", stale);
    return DLOCK_OK;
}

static int case_holder_restart(struct sc *s)
{
    struct actor *a, *a2;
    struct got ga, g;
    char code[32];
    int rc;

    if ((rc = first_holder(s, &a, "A", &ga)) != DLOCK_OK)
        return rc;
    uint64_t t_kill = bn_now_ns();
    sc_actor_kill(s, a);
    printf("  A is started again at once: the same program and lock name "
           "(a new client,\n  so a new owner id: dlock's ids are random per "
           "client)\n");
    if ((rc = sc_actor_start(s, &a2, "A'", "restarted holder", NULL)) != DLOCK_OK)
        return rc;
    uint64_t t_ready = bn_now_ns();
    sc_say(s, t_ready, "A'", "ready; asks for the lock (at most %" PRIu32 " ms)",
        s->wait_ms);
    sc_acquire(s, a2, s->wait_ms, &g);
    if (g.ok)
        sc_release(s, a2, code, sizeof code);

    double ms = ((double)g.t - (double)t_kill) / 1e6;
    double up = ((double)t_ready - (double)t_kill) / 1e6;
    sc_result(s, "restarted_ready_after_kill_ms", jms(up));
    sc_result(s, "restarted_got_lock", json_object_new_boolean(g.ok));
    sc_result(s, "kill_to_restarted_acquire_ms", g.ok ? jms(ms) : NULL);
    sc_result(s, "first_fence", json_object_new_int64((int64_t)ga.fence));
    sc_result(s, "restarted_fence",
           g.ok ? json_object_new_int64((int64_t)g.fence) : NULL);
    if (g.ok) {
        snprintf(s->cell, sizeof s->cell, "back in %.0fms", ms);
        snprintf(s->summary, sizeof s->summary,
                 "the restarted holder got it %.0f ms after the kill", ms);
        snprintf(s->outcome, sizeof s->outcome,
                 "the restarted process was up %.0f ms after the kill and "
                 "got the lock %.0f ms after it (%s); fence %" PRIu64
                 " -> %" PRIu64,
                 up, ms,
                 has(s, DLOCK_CAP_LEASE) && !has(s, DLOCK_CAP_CONN_BOUND)
                     ? "it waited for the old lease to run out"
                     : "the old connection or session had to end first",
                 ga.fence, g.fence);
    } else {
        snprintf(s->cell, sizeof s->cell, "NOT back %.0fms", ms);
        snprintf(s->summary, sizeof s->summary,
                 "the restarted holder did NOT get it within %.0f ms", ms);
        snprintf(s->outcome, sizeof s->outcome,
                 "the restarted process did NOT get the lock within %.0f ms "
                 "of the kill (%s)", ms, g.answered ? g.err : "no answer");
    }
    return DLOCK_OK;
}

static int case_waiter_disconnect(struct sc *s)
{
    char puri[2048], code[32];
    struct actor *a, *w1, *w2, *first, *second;
    struct got ga, g1, g2, gnext;
    int rc;

    rc = proxy_uri(s, puri, sizeof puri);
    if (rc != DLOCK_OK)
        return rc;
    printf("  A holds; W1 waits through the proxies, then W2 directly\n");
    if ((rc = first_holder(s, &a, "A", &ga)) != DLOCK_OK)
        return rc;
    if ((rc = sc_actor_start(s, &w1, "W1", "waiter", puri)) != DLOCK_OK)
        return rc;
    if ((rc = sc_actor_start(s, &w2, "W2", "waiter", NULL)) != DLOCK_OK)
        return rc;
    queue(s, w1);
    queue(s, w2);

    uint64_t t_cut = bn_now_ns();
    unsigned cut = proxies_set(s, true);
    sc_say(s, t_cut, "net", "W1's connections cut (%u reset) for %" PRIu32
        " ms", cut, s->short_ms);
    /* Does W1's acquire return during the cut (an error), or go on? */
    sc_acquire_wait(s, w1, s->short_ms, &g1);
    pump_until(s, t_cut, s->short_ms);
    unsigned refused = proxies_set(s, false);
    sc_say(s, bn_now_ns(), "net", "restored (%u connection attempts refused "
        "meanwhile)", refused);
    bool w1_error = g1.answered && !g1.ok;
    char w1_err[32];
    snprintf(w1_err, sizeof w1_err, "%s", g1.err);
    sc_pump(s, SETTLE_MS, NULL, NULL, NULL, 0);

    uint64_t t_rel = sc_release(s, a, code, sizeof code);
    if (w1_error) {
        sc_acquire_wait(s, w2, s->wait_ms + REPLY_TIMEOUT_MS, &gnext);
        first = gnext.answered ? w2 : NULL;
        g2 = gnext;
    } else {
        first_of(s, w1, &g1, w2, &g2, s->wait_ms + REPLY_TIMEOUT_MS, &first);
        gnext = first == w1 ? g1 : g2;
    }
    bool next_ok = first != NULL && gnext.ok;
    double next_ms = next_ok ? ((double)gnext.t - (double)t_rel) / 1e6 : -1;
    if (next_ok && next_ms < 0) /* granted inside the release */
        next_ms = 0;
    /* The other one is served after the first releases. */
    bool both = false;
    if (next_ok) {
        sc_release(s, first, code, sizeof code);
        if (!w1_error) {
            second = first == w1 ? w2 : w1;
            struct got gs;
            sc_acquire_wait(s, second, s->wait_ms + REPLY_TIMEOUT_MS, &gs);
            both = gs.ok;
            if (gs.ok)
                sc_release(s, second, code, sizeof code);
        }
    }

    sc_result(s, "down_ms", jms((double)s->short_ms));
    sc_result(s, "cut_waiter_error", w1_error ? json_object_new_string(w1_err)
                                           : NULL);
    sc_result(s, "cut_waiter_kept_waiting", json_object_new_boolean(!w1_error));
    sc_result(s, "next_holder", next_ok ? json_object_new_string(first->label)
                                     : NULL);
    sc_result(s, "release_to_next_acquire_ms", next_ok ? jms(next_ms) : NULL);
    sc_result(s, "both_waiters_served", json_object_new_boolean(
                                         w1_error ? next_ok : both));

    char w1_text[64];
    if (w1_error)
        snprintf(w1_text, sizeof w1_text, "W1 got an error (%s)", w1_err);
    else
        snprintf(w1_text, sizeof w1_text, "W1 kept waiting");
    if (next_ok) {
        snprintf(s->cell, sizeof s->cell, "%s; %s in %.1fms",
                 w1_error ? "W1 error" : "W1 waits", first->label, next_ms);
        snprintf(s->summary, sizeof s->summary,
                 "%s; %s got it %.1f ms after the release%s", w1_text,
                 first->label, next_ms,
                 !w1_error && !both ? "; the other was NOT served" : "");
    } else {
        snprintf(s->cell, sizeof s->cell, "%s; queue STUCK",
                 w1_error ? "W1 error" : "W1 waits");
        snprintf(s->summary, sizeof s->summary,
                 "%s; nobody got the lock after the release", w1_text);
    }
    snprintf(s->outcome, sizeof s->outcome,
             "a waiter whose connection was cut for %" PRIu32 " ms %s; "
             "after the holder released, %s",
             s->short_ms,
             w1_error ? "got an error from its acquire"
                      : "kept waiting (dlock reconnected behind it)",
             next_ok ? (first == w1 ? "the cut waiter got the lock first"
                                    : "the other waiter got the lock first")
                     : "NOBODY got the lock: the queue is stuck");
    return DLOCK_OK;
}

static int case_node_loss(struct sc *s)
{
    struct actor *a, *w;
    struct got ga, gw;
    char code[32], stale[64];
    size_t n = bn_uri_nhosts(s->uri);
    int rc;

    if (n < 2)
        return not_applicable(s, n == 0 ? "no server, so no node to lose"
                                        : "one server: no cluster, no node "
                                          "to lose",
                              n == 0 ? "no server" : "one server",
                              n == 0 ? "no server" : "one node");
    if (s->node_cmd == NULL) {
        return missing_cmd(s, "--node-cmd",
                           "'\"$DLOCK_TEST_SERVERCTL\" $DLOCK_NODE_ACTION "
                           "zk3 $DLOCK_NODE'");
    }
    sc_result(s, "applicable", json_object_new_boolean(true));
    if ((rc = holder_and_waiter(s, &a, &ga, &w)) != DLOCK_OK)
        return rc;

    int idx = actor_node(s, a);
    bool holders = idx >= 0;
    int node = holders ? idx + 1 : 1;
    uint64_t t_kill = bn_now_ns();
    sc_say(s, t_kill, "srv", "kill node %d of %zu%s", node, n,
        holders ? ", the one A is connected to"
                : " (A talks to several nodes)");
    int st = node_cmd(s, "kill", node);
    sc_say(s, bn_now_ns(), "srv", "node %d killed (exit %d)", node, st);
    /* A lease (or session timeout) for a fail-over to happen or not. */
    sc_pump(s, lease_window_ms(s), NULL, NULL, NULL, 0);
    int a_held = sc_held(s, a);
    sc_store(s, a, stale, sizeof stale);
    struct got early;
    sc_acquire_wait(s, w, 1, &early); /* did W get in meanwhile? */
    bool two = early.ok && a_held == 1;
    uint64_t t_rel = sc_release(s, a, code, sizeof code);
    if (early.answered)
        gw = early;
    else
        sc_acquire_wait(s, w, s->wait_ms + REPLY_TIMEOUT_MS, &gw);
    if (gw.ok)
        sc_release(s, w, code, sizeof code);
    uint64_t t_start = bn_now_ns();
    int st2 = node_cmd(s, "start", node);
    sc_say(s, bn_now_ns(), "srv", "node %d started again (exit %d, %.0f ms)",
        node, st2, ((double)bn_now_ns() - (double)t_start) / 1e6);

    bool kept = a_held == 1 && !a->lost;
    double w_ms = gw.ok ? ((double)gw.t - (double)(early.ok ? t_kill : t_rel)) /
                              1e6
                        : -1;
    if (gw.ok && w_ms < 0) /* granted inside the release */
        w_ms = 0;
    sc_result(s, "nodes", json_object_new_int((int)n));
    sc_result(s, "killed_node", json_object_new_int(node));
    sc_result(s, "killed_holders_node", json_object_new_boolean(holders));
    sc_result(s, "kill_exit", json_object_new_int(st));
    sc_result(s, "holder_kept_lock", json_object_new_boolean(kept));
    result_told(s, a, "holder_told", "holder_told_after_kill_ms", t_kill);
    sc_result(s, "holder_write_after", json_object_new_string(stale));
    sc_result(s, "waiter_got_lock", json_object_new_boolean(gw.ok));
    sc_result(s, "waiter_got_lock_before_release",
           json_object_new_boolean(early.ok));
    sc_result(s, early.ok ? "kill_to_waiter_acquire_ms"
                       : "release_to_waiter_acquire_ms",
           gw.ok ? jms(w_ms) : NULL);
    sc_result(s, "start_exit", json_object_new_int(st2));

    char told[64];
    told_text(s, a, t_kill, "the kill", told, sizeof told);
    if (kept && !early.ok)
        snprintf(s->cell, sizeof s->cell, "kept; W %s",
                 gw.ok ? "in after rel" : "STUCK");
    else
        snprintf(s->cell, sizeof s->cell, "lost;%s W %s%s",
                 a->lost ? " told;" : " NOT told;", gw.ok ? "in" : "out",
                 two ? " TWO" : "");
    char wtext[96];
    if (!gw.ok)
        snprintf(wtext, sizeof wtext, "did NOT get it");
    else
        snprintf(wtext, sizeof wtext, "got it %.1f ms after the %s", w_ms,
                 early.ok ? "kill, before the release" : "release");
    snprintf(s->summary, sizeof s->summary,
             "node %d%s killed: holder %s (%s); waiter %s%s",
             node, holders ? " (the holder's)" : "",
             kept ? "kept it" : "lost it", told, wtext,
             two ? " (TWO HOLDERS)" : "");
    snprintf(s->outcome, sizeof s->outcome,
             "node %d of %zu killed%s; the holder %s the lock and was %s; "
             "the waiter %s%s",
             node, n, holders ? " (the one the holder was connected to)" : "",
             kept ? "kept" : "lost", told,
             !gw.ok     ? "did NOT get the lock"
             : early.ok ? "got the lock while the holder had not released"
                        : "got the lock after the holder released",
             two ? ": TWO HOLDERS" : "");
    return DLOCK_OK;
}

/* Run the --failover-cmd with DLOCK_FAILOVER_STEP=step; its exit status. */
static int failover_step(struct sc *s, const char *step, const char *what)
{
    int st = run_with(s->failover_cmd, "DLOCK_FAILOVER_STEP", step, NULL,
                      NULL);
    sc_say(s, bn_now_ns(), "srv", "%s: %s (exit %d)", step, what, st);
    return st;
}

/*
 * A master with replicas behind Sentinel: the replicas are cut off from
 * the master (the command's "cut": the rsentinel script stops them and
 * drops their links, so a write cannot reach them even in a socket
 * buffer), A takes the lock, the master is killed, the replicas come back
 * ("heal") and the sentinels promote one that never saw A's SET. W then
 * asks for the same name. With sync_replicas= in the URI, A's acquire is
 * refused instead (DLOCK_EREPLICAS): nothing unconfirmed to lose.
 */
static int case_failover(struct sc *s)
{
    struct actor *a, *w;
    struct got ga, gw;
    char code[32];
    int rc;

    if (s->uri == NULL || strstr(s->uri, "sentinel=") == NULL)
        return not_applicable(s, "not a Sentinel URI "
                              "(redis://S1,S2,...?sentinel=NAME): no "
                              "replica for a failover to promote",
                              "no sentinel=", "no sentinel");
    if (s->failover_cmd == NULL)
        return missing_cmd(s, "--failover-cmd",
                           "'tests/servers/rsentinel-failover.sh "
                           "$DLOCK_FAILOVER_STEP'");
    sc_result(s, "applicable", json_object_new_boolean(true));
    bool sync = strstr(s->uri, "sync_replicas=") != NULL;
    sc_result(s, "sync_replicas", json_object_new_boolean(sync));
    if ((rc = sc_actor_start(s, &a, "A", "holder", NULL)) != DLOCK_OK ||
        (rc = sc_actor_start(s, &w, "W", "waiter", NULL)) != DLOCK_OK)
        return rc;
    uint64_t t_cut = bn_now_ns();
    int st = failover_step(s, "cut", "the replicas are cut off from the "
                                     "master");
    sc_acquire(s, a, s->wait_ms, &ga);
    if (!ga.ok) {
        bool refused = ga.answered && strcmp(ga.err, "EREPLICAS") == 0;
        failover_step(s, "heal", "the replicas are back");
        sc_result(s, "cut_exit", json_object_new_int(st));
        sc_result(s, "holder_refused", json_object_new_boolean(refused));
        sc_result(s, "holder_error",
                  json_object_new_string(ga.answered ? ga.err : "no answer"));
        snprintf(s->cell, sizeof s->cell, "A %s",
                 refused ? "refused (EREPLICAS)" : "failed");
        snprintf(s->summary, sizeof s->summary,
                 "A's acquire %s %.0f ms after the cut: no unconfirmed "
                 "lock to lose",
                 refused ? "refused (EREPLICAS)" : "failed",
                 ((double)ga.t - (double)t_cut) / 1e6);
        snprintf(s->outcome, sizeof s->outcome,
                 "with the replicas cut off, A's acquire %s: %s",
                 refused ? "was refused" : "failed", ga.msg);
        return DLOCK_OK;
    }
    sc_say(s, bn_now_ns(), "A", "holds the lock; no replica has it");
    uint64_t t_kill = bn_now_ns();
    failover_step(s, "kill", "the master is killed");
    failover_step(s, "heal", "the replicas are back: the sentinels "
                             "promote one");
    queue(s, w);
    sc_acquire_wait(s, w, s->wait_ms + REPLY_TIMEOUT_MS, &gw);
    bool two = gw.ok && (!a->lost || a->lost_ns > gw.t);
    int a_held = holder_settled(s, a);
    if (gw.ok)
        sc_release(s, w, code, sizeof code);
    sc_release(s, a, code, sizeof code);
    failover_step(s, "restore", "the old master is started again");

    sc_result(s, "holder_refused", json_object_new_boolean(false));
    result_told(s, a, "holder_told", "holder_told_after_kill_ms", t_kill);
    sc_result(s, "holder_held_after", json_object_new_int(a_held));
    sc_result(s, "waiter_got_lock", json_object_new_boolean(gw.ok));
    sc_result(s, "waiter_got_lock_after_kill_ms",
              gw.ok ? jms(((double)gw.t - (double)t_kill) / 1e6) : NULL);
    sc_result(s, "two_holders", json_object_new_boolean(two));

    char told[64];
    told_text(s, a, t_kill, "the kill", told, sizeof told);
    snprintf(s->cell, sizeof s->cell, "W %s; A %s%s", gw.ok ? "in" : "out",
             a->lost ? "told" : "NOT told", two ? " TWO" : "");
    snprintf(s->summary, sizeof s->summary,
             "W %s%s; A %s%s",
             gw.ok ? "got the lock from the new master" : "did not get it",
             gw.ok ? "" : "", told, two ? " (TWO HOLDERS)" : "");
    snprintf(s->outcome, sizeof s->outcome,
             "the promoted replica never had A's SET: W %s %.0f ms after "
             "the kill; A was %s%s",
             gw.ok ? "got the lock" : "did not get the lock",
             gw.ok ? ((double)gw.t - (double)t_kill) / 1e6 : 0.0, told,
             two ? " (W got in before A was told: TWO HOLDERS)" : "");
    return DLOCK_OK;
}

/* ---- their table ---------------------------------------------------------------------- */

/* In the order of the write-ups' failure table. */
const struct sc_case sc_cases[SC_NCASES] = {
    {"holder-crash", case_holder_crash,
     "holder SIGKILLed: how long until a waiter gets in"},
    {"holder-pause", case_holder_pause,
     "holder SIGSTOPped past its lease: 2nd holder? told? fenced?"},
    {"holder-reconnect", case_holder_reconnect,
     "holder's connection cut briefly (--down): kept? told?"},
    {"holder-restart", case_holder_restart,
     "holder SIGKILLed and started again: how long until it holds"},
    {"waiter-disconnect", case_waiter_disconnect,
     "a waiter's connection cut: error or waits on? queue served?"},
    {"waiter-crash", case_waiter_crash,
     "a waiter SIGKILLed while waiting: is the next one served?"},
    {"conn-drop", case_conn_drop,
     "holder's connection cut for --down (2 leases), restored"},
    {"server-restart", case_server_restart,
     "--restart-cmd restarts the server under holder and waiter"},
    {"node-loss", case_node_loss,
     "a cluster loses the holder's node (--node-cmd)"},
    /* Not in `all`: one kind of deployment (Sentinel) and a command of
     * its own (SC_NALL). */
    {"failover", case_failover,
     "a replica without the SET promoted (--failover-cmd)"},
};
