/*
 * run.c: `history run`, the supervisor and the nemesis of a history run.
 *
 * One single-threaded process: it writes DIR/meta, starts the workers (this
 * program in the worker role), injects faults one at a time while reaping
 * and replacing workers between its own steps, stops the workers, makes sure
 * nothing it did is left behind (every stopped worker resumed or killed and
 * reaped, every paused server node resumed, every node it took down started
 * again), and finally runs the checker over DIR.
 *
 * The nemesis picks its faults from a seeded random source: first every
 * fault that applies once, in a shuffled order, then random ones until the
 * duration is over. Every fault waits for the next grant (DIR/holder
 * changes) and strikes early in it; the faults of hi_fault_aimed() first ask
 * for a holding (DIR/long) that outlasts them by most of a lease, so that
 * the holder's view of the lock after the fault is seen. Faults go to
 * DIR/run.log:
 *   F kind t0 t1 ok target detail
 * besides the supervisor's own records:
 *   B t            the run begins        S t   DIR/stop created
 *   P t slot gen pid   a worker started  Q t pid status killed
 *   K t pid        the supervisor killed a worker that did not stop
 *   Z t            the run ends
 *
 * Sections: options · the supervisor · server control and sockets · the
 * faults · the schedule · main.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "../conformance/harness.h"
#include "history.h"

#define NS_PER_MS 1000000u
#define MAX_WORKERS 32
#define MAX_NODES 8
#define MAX_RESPAWNS 1000

/* ---- options ------------------------------------------------------------------ */

struct opts {
    struct hi_meta m;
    const char *lease, *timeout;   /* appended to the URI when it has none */
    const char *faults;
    const char *json, *expect, *dir;
    uint32_t fault_gap_ms;
    bool keep;
};

static void usage(void)
{
    fputs(
        "usage: history run --uri URI [options]\n"
        "  --server KIND        with-servers.sh kind of the URI's server\n"
        "                       (redis redis5 zk zk3 pg mysql etcd etcd3\n"
        "                       etcdtls rcluster);\n"
        "                       none: only process faults apply\n"
        "  --duration D         how long workers contend (20s); the first\n"
        "                       round of faults runs whole even if longer\n"
        "  --workers N          contending processes (3)\n"
        "  --faults LIST        all (default), none, or a comma list of\n"
        "                       stop-short stop-long kill cut-holding\n"
        "                       cut-release restart crash-restart\n"
        "                       restart-majority pause-short pause-long, and\n"
        "                       the groups stop, cut, pause\n"
        "  --seed N             the nemesis's and workers' random seed (1)\n"
        "  --lease D            lease= added to the URI unless it has one (2s)\n"
        "  --timeout D          timeout= added to the URI unless it has one\n"
        "  --acquire-timeout D  each dlock_acquire waits this long (3s)\n"
        "  --hold D             a holding lasts hold/2 to 3*hold/2 (20ms)\n"
        "  --writes K           writes per such holding (4)\n"
        "  --long-hold D        length of a long holding (the lease)\n"
        "  --long-pct P         share of long holdings in percent (2)\n"
        "  --rmw-pause-us N     pause inside the counter's read-modify-write\n"
        "                       (200)\n"
        "  --readers P          share of reader cycles in percent (0): on a\n"
        "                       mode with shared locks, a cycle takes the\n"
        "                       lock shared and reads the counter instead\n"
        "                       of writing; ignored on other modes\n"
        "  --permits N          every cycle takes one permit of a semaphore\n"
        "                       of N and reads the counter: the checker\n"
        "                       counts more than N holders at once; on a\n"
        "                       mode without permits, exits 77 (skipped)\n"
        "  --elect              every cycle campaigns in a leader election\n"
        "                       (dlock_elect_*) instead of acquiring: a\n"
        "                       leader writes as a lock holder does, with\n"
        "                       its term as the fence, and resigns\n"
        "  --think D            pause between a release and the next\n"
        "                       acquire, 0 to D (5ms)\n"
        "  --fault-gap D        quiet time before each fault, D/2 to D (600ms)\n"
        "  --no-lock            workers pretend to hold (checker self-test)\n"
        "  --fake-fence         fences from a per-process counter (same)\n"
        "  --json FILE          the checker's report as JSON\n"
        "  --expect KINDS       succeed only if each of these violation kinds\n"
        "                       is found (the checker's own tests)\n"
        "  --dir DIR            run directory (default: a temporary one,\n"
        "                       removed afterwards unless --keep or\n"
        "                       DLOCK_TEST_KEEP=1)\n",
        stderr);
}

static bool duration_arg(const char *name, const char *v, uint32_t *out)
{
    if (v == NULL || dlock_parse_duration(v, out) != DLOCK_OK) {
        fprintf(stderr, "history run: %s: expected a duration such as 250ms "
                        "or 3s, got '%s'\n",
                name, v ? v : "");
        return false;
    }
    return true;
}

static bool number_arg(const char *name, const char *v, uint64_t min,
                       uint64_t max, uint64_t *out)
{
    char *end;

    errno = 0;
    *out = v != NULL ? strtoull(v, &end, 10) : 0;
    if (v == NULL || *v == '\0' || *end != '\0' || errno != 0 || *out < min ||
        *out > max) {
        fprintf(stderr, "history run: %s: expected a number from %" PRIu64
                        " to %" PRIu64 ", got '%s'\n",
                name, min, max, v ? v : "");
        return false;
    }
    return true;
}

static unsigned kind_nodes(const char *kind)
{
    if (strcmp(kind, "redis5") == 0)
        return 5;
    if (strcmp(kind, "zk3") == 0 || strcmp(kind, "etcd3") == 0)
        return 3;
    if (strcmp(kind, "rcluster") == 0)
        return 6; /* 3 masters, 3 replicas: a master's crash is a failover */
    return 1;
}

/* Faults named in list (kinds and groups), restricted to what applies. */
static bool parse_faults(const char *list, const struct hi_meta *m,
                         uint32_t *out)
{
    char buf[512], *save = NULL;
    uint32_t applies = 0;

    for (int f = 0; f < HI_F_COUNT; f++)
        if ((!hi_fault_needs_server(f) || m->server[0] != '\0') &&
            (f != HI_F_MAJORITY || m->nodes >= 3))
            applies |= 1u << f;
    *out = 0;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        uint32_t bits = 0;
        int f;

        if (strcmp(t, "all") == 0)
            bits = applies;
        else if (strcmp(t, "none") == 0)
            bits = 0;
        else if (strcmp(t, "stop") == 0)
            bits = 1u << HI_F_STOP_SHORT | 1u << HI_F_STOP_LONG;
        else if (strcmp(t, "pause") == 0)
            bits = 1u << HI_F_PAUSE_SHORT | 1u << HI_F_PAUSE_LONG;
        else if (strcmp(t, "cut") == 0)
            bits = 1u << HI_F_CUT_HOLDING | 1u << HI_F_CUT_RELEASE;
        else if ((f = hi_fault_by_name(t)) >= 0)
            bits = 1u << f;
        else {
            fprintf(stderr, "history run: --faults: unknown fault '%s' "
                            "(try --help)\n", t);
            return false;
        }
        if ((bits & ~applies) != 0) {
            fprintf(stderr, "history run: --faults: '%s' does not apply "
                            "here (server faults need --server; "
                            "restart-majority needs 3 nodes or more)\n", t);
            return false;
        }
        *out |= bits;
    }
    return true;
}

static bool has_param(const char *uri, const char *key)
{
    const char *q = strchr(uri, '?');
    size_t n = strlen(key);

    for (const char *p = q; p != NULL; p = strchr(p + 1, '&'))
        if (strncmp(p + 1, key, n) == 0 && p[1 + n] == '=')
            return true;
    return false;
}

static void add_param(char *uri, size_t cap, const char *key, const char *v)
{
    size_t n = strlen(uri);

    if (v == NULL || has_param(uri, key))
        return;
    snprintf(uri + n, cap - n, "%c%s=%s", strchr(uri, '?') ? '&' : '?', key,
             v);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    uint32_t d;
    uint64_t n;

    memset(o, 0, sizeof *o);
    o->lease = "2s";
    o->faults = "all";
    o->m.duration_ms = 20000;
    o->m.workers = 3;
    o->m.seed = 1;
    o->m.acquire_timeout_ms = 3000;
    o->m.hold_ms = 20;
    o->m.writes = 4;
    o->m.long_pct = 2;
    o->m.rmw_pause_us = 200;
    o->m.think_ms = 5;
    o->fault_gap_ms = 600;
    o->keep = getenv("DLOCK_TEST_KEEP") != NULL &&
              strcmp(getenv("DLOCK_TEST_KEEP"), "1") == 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;

        if (strcmp(a, "--uri") == 0)
            ; /* h_setup() reads it */
        else if (strcmp(a, "--server") == 0 && v != NULL)
            snprintf(o->m.server, sizeof o->m.server, "%s", v);
        else if (strcmp(a, "--duration") == 0)
            ok = duration_arg(a, v, &o->m.duration_ms);
        else if (strcmp(a, "--workers") == 0)
            ok = number_arg(a, v, 1, MAX_WORKERS, &n) &&
                 (o->m.workers = (unsigned)n) > 0;
        else if (strcmp(a, "--faults") == 0 && v != NULL)
            o->faults = v;
        else if (strcmp(a, "--seed") == 0)
            ok = number_arg(a, v, 0, UINT64_MAX, &o->m.seed);
        else if (strcmp(a, "--lease") == 0 && v != NULL)
            ok = duration_arg(a, v, &d) && (o->lease = v) != NULL;
        else if (strcmp(a, "--timeout") == 0 && v != NULL)
            ok = duration_arg(a, v, &d) && (o->timeout = v) != NULL;
        else if (strcmp(a, "--acquire-timeout") == 0)
            ok = duration_arg(a, v, &o->m.acquire_timeout_ms);
        else if (strcmp(a, "--hold") == 0)
            ok = duration_arg(a, v, &o->m.hold_ms);
        else if (strcmp(a, "--writes") == 0)
            ok = number_arg(a, v, 1, 1000, &n) &&
                 (o->m.writes = (uint32_t)n) > 0;
        else if (strcmp(a, "--long-hold") == 0)
            ok = duration_arg(a, v, &o->m.long_hold_ms);
        else if (strcmp(a, "--long-pct") == 0)
            ok = number_arg(a, v, 0, 100, &n) &&
                 (o->m.long_pct = (uint32_t)n, true);
        else if (strcmp(a, "--rmw-pause-us") == 0)
            ok = number_arg(a, v, 0, 1000000, &n) &&
                 (o->m.rmw_pause_us = (uint32_t)n, true);
        else if (strcmp(a, "--readers") == 0)
            ok = number_arg(a, v, 0, 100, &n) &&
                 (o->m.readers_pct = (uint32_t)n, true);
        else if (strcmp(a, "--permits") == 0)
            ok = number_arg(a, v, 1, DLOCK_PERMITS_MAX, &n) &&
                 (o->m.permits = (uint32_t)n, true);
        else if (strcmp(a, "--think") == 0)
            ok = duration_arg(a, v, &o->m.think_ms);
        else if (strcmp(a, "--fault-gap") == 0)
            ok = duration_arg(a, v, &o->fault_gap_ms);
        else if (strcmp(a, "--json") == 0 && v != NULL)
            o->json = v;
        else if (strcmp(a, "--expect") == 0 && v != NULL)
            o->expect = v;
        else if (strcmp(a, "--dir") == 0 && v != NULL)
            o->dir = v;
        else if ((takes = false, strcmp(a, "--no-lock") == 0))
            o->m.no_lock = true;
        else if (strcmp(a, "--elect") == 0)
            o->m.elect = true;
        else if (strcmp(a, "--fake-fence") == 0)
            o->m.fake_fence = true;
        else if (strcmp(a, "--keep") == 0)
            o->keep = true;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage();
            exit(0);
        } else {
            fprintf(stderr, "history run: unknown option or missing value: "
                            "'%s' (try --help)\n", a);
            return -1;
        }
        if (!ok)
            return -1;
        if (takes)
            i++;
    }
    if (o->m.server[0] != '\0') {
        static const char *const kinds[] = {"redis", "redis5", "zk",
                                            "zk3",   "pg",     "mysql",
                                            "etcd",  "etcd3",  "etcdtls",
                                            "rcluster"};
        bool known = false;

        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            known = known || strcmp(kinds[k], o->m.server) == 0;
        if (!known) {
            fprintf(stderr, "history run: --server: unknown kind '%s' "
                            "(redis redis5 zk zk3 pg mysql etcd "
                            "etcd3 etcdtls rcluster)\n", o->m.server);
            return -1;
        }
        o->m.nodes = kind_nodes(o->m.server);
    }
    return 0;
}

/* ---- the supervisor ---------------------------------------------------------------- */

struct slot {
    pid_t pid;       /* 0: not running */
    unsigned gen;
};

static struct {
    const struct opts *o;
    const char *dir;
    char self[HI_PATH_MAX];
    int log;
    struct slot slots[MAX_WORKERS];
    unsigned respawns;
    bool stopping;
    pid_t stopped;   /* a worker the nemesis has SIGSTOPped */
    pid_t ctl_pid;   /* a running ctl.sh, reaped by supervise() */
    int ctl_status;
    int paused_node; /* 1-based, 0: none */
    bool node_down[MAX_NODES + 1];
    uint16_t ports[MAX_NODES];
    uint64_t rng;
    uint64_t max_want_ms; /* the longest holding asked for so far */
    uint64_t restart_ms;  /* a node restart takes about this long */
    bool ctl_failed;      /* a ctl.sh command failed: show ctl.log */
} S;

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

static void spawn_worker(unsigned slot)
{
    char s[16], g[16];
    pid_t pid;

    snprintf(s, sizeof s, "%u", slot);
    snprintf(g, sizeof g, "%u", S.slots[slot].gen);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        execl(S.self, S.self, "worker", "--dir", S.dir, "--slot", s, "--gen", g,
              (char *)NULL);
        _exit(127);
    }
    if (pid < 0) {
        fprintf(stderr, "history run: fork: %s\n", strerror(errno));
        return;
    }
    S.slots[slot].pid = pid;
    hi_logf(S.log, "P %" PRIu64 " %u %u %ld", hi_now_ns(), slot,
            S.slots[slot].gen, (long)pid);
}

static struct slot *slot_of(pid_t pid)
{
    for (unsigned i = 0; i < S.o->m.workers; i++)
        if (S.slots[i].pid == pid && pid > 0)
            return &S.slots[i];
    return NULL;
}

/* Reap whatever has ended; replace a worker that ended during the run. */
static void supervise(void)
{
    int st;
    pid_t pid;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        struct slot *sl;

        if (pid == S.ctl_pid) {
            S.ctl_pid = 0;
            S.ctl_status = st;
            continue;
        }
        if ((sl = slot_of(pid)) == NULL)
            continue;
        hi_logf(S.log, "Q %" PRIu64 " %ld %d", hi_now_ns(), (long)pid, st);
        if (S.stopped == pid)
            S.stopped = 0;
        sl->pid = 0;
        if (!S.stopping && S.respawns < MAX_RESPAWNS) {
            S.respawns++;
            sl->gen++;
            spawn_worker((unsigned)(sl - S.slots));
        }
    }
}

/* Sleep while supervising; returns early on a signal. */
static void nap(uint64_t ns)
{
    uint64_t end = hi_now_ns() + ns;

    for (;;) {
        uint64_t now;

        supervise();
        now = hi_now_ns();
        if (got_signal || now >= end)
            return;
        hi_sleep_ns(end - now < 2 * NS_PER_MS ? end - now : 2 * NS_PER_MS);
    }
}

/* ---- server control and sockets ----------------------------------------------------- */

/*
 * Run a command (stdout and stderr to DIR/ctl.log) and wait for it at most
 * limit_ms, supervising meanwhile. Returns its exit status, -1 when it could
 * not run or was killed at the limit.
 */
static int run_cmd(char *const argv[], uint32_t limit_ms)
{
    char path[HI_PATH_MAX], line[512];
    uint64_t t0 = hi_now_ns(), end = t0 + (uint64_t)limit_ms * NS_PER_MS;
    int out = hi_log_open(hi_path(path, sizeof path, S.dir, "ctl.log"));
    size_t n = 0;
    pid_t pid;
    int rc = -1;

    if (out < 0)
        return -1;
    for (int i = 0; argv[i] != NULL && n < sizeof line; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", i ? " " : "",
                              argv[i]);
    hi_logf(out, "== %" PRIu64 " %s", t0, line);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(out, 1);
        dup2(out, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (pid > 0) {
        S.ctl_pid = pid;
        S.ctl_status = -1;
        while (S.ctl_pid != 0 && hi_now_ns() < end)
            nap(2 * NS_PER_MS);
        if (S.ctl_pid != 0) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            S.ctl_pid = 0;
        } else if (WIFEXITED(S.ctl_status)) {
            rc = WEXITSTATUS(S.ctl_status);
        }
    }
    hi_logf(out, "== exit %d after %" PRIu64 " ms", rc,
            (hi_now_ns() - t0) / NS_PER_MS);
    close(out);
    return rc;
}

/* $DLOCK_TEST_SERVERCTL ACTION KIND INDEX; 0 on success. */
static int ctl(const char *action, int node)
{
    const char *ctl_sh = getenv("DLOCK_TEST_SERVERCTL");
    char idx[16];
    char *argv[] = {(char *)ctl_sh, (char *)action, (char *)S.o->m.server, idx,
                    NULL};

    if (ctl_sh == NULL)
        return -1;
    snprintf(idx, sizeof idx, "%d", node);
    /* ctl.sh bounds its own waits (60 s to answer, 10 s to stop). */
    return run_cmd(argv, 90000);
}

/* The client port of each node, for finding a holder's connections. */
static int read_ports(void)
{
    const char *ctl_sh = getenv("DLOCK_TEST_SERVERCTL");

    if (ctl_sh == NULL) {
        fprintf(stderr, "history run: --server needs DLOCK_TEST_SERVERCTL "
                        "(run under tests/servers/with-servers.sh)\n");
        return -1;
    }
    for (unsigned i = 1; i <= S.o->m.nodes; i++) {
        char cmd[HI_PATH_MAX + 64], line[32] = {0};
        FILE *p;

        snprintf(cmd, sizeof cmd, "'%s' port %s %u", ctl_sh, S.o->m.server, i);
        p = popen(cmd, "r");
        if (p == NULL || fgets(line, sizeof line, p) == NULL) {
            if (p != NULL)
                pclose(p);
            fprintf(stderr, "history run: cannot read the port of %s-%u\n",
                    S.o->m.server, i);
            return -1;
        }
        pclose(p);
        S.ports[i - 1] = (uint16_t)strtoul(line, NULL, 10);
    }
    return 0;
}

struct conn {
    unsigned lport, rport;
};

/* The established TCP connections of pid to any server node. */
static size_t server_conns(pid_t pid, struct conn *out, size_t cap)
{
    static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    unsigned long inodes[512];
    size_t ni = 0, n = 0;
    char path[64], link[64], line[512];
    struct dirent *e;
    DIR *d;

    snprintf(path, sizeof path, "/proc/%ld/fd", (long)pid);
    if ((d = opendir(path)) == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && ni < sizeof inodes / sizeof inodes[0]) {
        char fd[HI_PATH_MAX];
        ssize_t k;

        snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
        k = readlink(fd, link, sizeof link - 1);
        if (k <= 0)
            continue;
        link[k] = '\0';
        if (sscanf(link, "socket:[%lu]", &inodes[ni]) == 1)
            ni++;
    }
    closedir(d);
    for (size_t t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "re");

        if (f == NULL)
            continue;
        while (fgets(line, sizeof line, f) != NULL && n < cap) {
            char local[64], remote[64];
            unsigned st;
            unsigned long ino;
            char *lp, *rp;

            if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %*s %*s %lu",
                       local, remote, &st, &ino) != 4 ||
                st != 1 /* ESTABLISHED */)
                continue;
            lp = strrchr(local, ':');
            rp = strrchr(remote, ':');
            if (lp == NULL || rp == NULL)
                continue;
            for (size_t i = 0; i < ni; i++) {
                unsigned rport = (unsigned)strtoul(rp + 1, NULL, 16);

                if (inodes[i] != ino)
                    continue;
                for (unsigned k = 0; k < S.o->m.nodes; k++)
                    if (S.ports[k] == rport) {
                        out[n].lport = (unsigned)strtoul(lp + 1, NULL, 16);
                        out[n++].rport = rport;
                        break;
                    }
            }
        }
        fclose(f);
    }
    return n;
}

/* ---- the faults ---------------------------------------------------------------------- */

struct holder {
    pid_t pid;
    unsigned long seq;
    unsigned long plan_ms;
};

static bool read_holder(struct holder *h)
{
    char path[HI_PATH_MAX], buf[96] = {0};
    int fd = open(hi_path(path, sizeof path, S.dir, "holder"),
                  O_RDONLY | O_CLOEXEC);
    long pid = 0;
    ssize_t n;

    if (fd < 0)
        return false;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0 || sscanf(buf, "%ld %lu %lu", &pid, &h->seq, &h->plan_ms) != 3)
        return false;
    h->pid = (pid_t)pid;
    return true;
}

static pid_t random_worker(void)
{
    unsigned start = (unsigned)(hi_rand(&S.rng) % S.o->m.workers);

    for (unsigned i = 0; i < S.o->m.workers; i++) {
        unsigned k = (start + i) % S.o->m.workers;

        if (S.slots[k].pid > 0)
            return S.slots[k].pid;
    }
    return 0;
}

/*
 * Wait for the next grant and return its holder, after a random delay
 * into the holding (up to a quarter of it, at most 50 ms, or a quarter
 * lease into a holding asked for). want_ms > 0 asks for a holding that
 * long (DIR/long) and waits for it. If no grant comes within a bound, a
 * random worker: a waiter is a fair target too.
 */
static pid_t next_holder(uint64_t want_ms)
{
    const struct hi_meta *m = &S.o->m;
    uint64_t lease = (uint64_t)m->lease_ms * NS_PER_MS;
    char path[HI_PATH_MAX], text[32];
    uint64_t end;
    struct holder first = {0, 0, 0}, h;

    /* Whoever holds now may be in a long holding asked for before. */
    if (want_ms > S.max_want_ms)
        S.max_want_ms = want_ms;
    end = hi_now_ns() + ((uint64_t)m->acquire_timeout_ms + m->lease_ms +
                         (S.max_want_ms > m->long_hold_ms ? S.max_want_ms
                                                          : m->long_hold_ms)) *
                            NS_PER_MS;
    hi_path(path, sizeof path, S.dir, "long");
    if (want_ms > 0) {
        snprintf(text, sizeof text, "%" PRIu64 "\n", want_ms);
        hi_write_file(path, text);
    }
    read_holder(&first);
    while (!got_signal && hi_now_ns() < end) {
        if (read_holder(&h) && (h.pid != first.pid || h.seq != first.seq) &&
            slot_of(h.pid) != NULL && h.plan_ms >= want_ms) {
            uint64_t plan = (uint64_t)h.plan_ms * NS_PER_MS;
            uint64_t most = want_ms > 0 ? lease / 4 : 50 * NS_PER_MS;

            /* Early in the holding: the rest of it shows the holder's view
             * of the lock after the fault. */
            nap(hi_rand_range(&S.rng, 0, plan / 4 < most ? plan / 4 : most));
            if (slot_of(h.pid) != NULL)
                return h.pid;
            break;
        }
        nap(NS_PER_MS);
    }
    unlink(path);
    return random_worker();
}

static int random_node(void)
{
    return 1 + (int)(hi_rand(&S.rng) % S.o->m.nodes);
}

static void log_fault(int f, uint64_t t0, uint64_t t1, bool ok,
                      const char *target, const char *detail)
{
    hi_logf(S.log, "F %s %" PRIu64 " %" PRIu64 " %d %s %s", hi_fault_name(f),
            t0, t1, ok, target, detail[0] ? detail : "-");
}

static void fault_stop(int f, pid_t pid)
{
    uint64_t lease = (uint64_t)S.o->m.lease_ms * NS_PER_MS;
    uint64_t d = f == HI_F_STOP_SHORT ? lease / 4 : lease + lease / 2;
    uint64_t t0 = hi_now_ns();
    char target[32];
    bool ok = kill(pid, SIGSTOP) == 0;

    if (ok)
        S.stopped = pid;
    nap(d);
    if (S.stopped == pid) {
        kill(pid, SIGCONT);
        S.stopped = 0;
    }
    snprintf(target, sizeof target, "pid:%ld", (long)pid);
    log_fault(f, t0, hi_now_ns(), ok, target, "");
}

static void fault_kill(pid_t pid)
{
    uint64_t t0 = hi_now_ns();
    char target[32];
    bool ok = kill(pid, SIGKILL) == 0;

    snprintf(target, sizeof target, "pid:%ld", (long)pid);
    log_fault(HI_F_KILL, t0, hi_now_ns(), ok, target, "");
}

static void fault_cut(int f, pid_t pid)
{
    struct conn c[64];
    size_t n = server_conns(pid, c, 64), left;
    uint64_t t0 = hi_now_ns();
    char target[32], detail[64];
    unsigned cut = 0;

    for (size_t i = 0; i < n; i++) {
        char sport[16], dport[16];
        char *argv[] = {"ss", "-K", "-tn", "sport", "=", sport, "and",
                        "dport", "=", dport, NULL};

        snprintf(sport, sizeof sport, ":%u", c[i].lport);
        snprintf(dport, sizeof dport, ":%u", c[i].rport);
        if (run_cmd(argv, 10000) == 0)
            cut++;
    }
    /* What is still established on those ports says what ss really did. */
    left = server_conns(pid, c, 64);
    snprintf(target, sizeof target, "pid:%ld", (long)pid);
    snprintf(detail, sizeof detail, "conns=%zu,left=%zu", n, left);
    log_fault(f, t0, hi_now_ns(), n > 0 && cut == n, target, detail);
}

/* rcluster: the node the holder pid is connected to (the master of the
 * lock's slot), so that server faults strike that master and fail it
 * over; else (or none found) a random node. */
static int holder_node(pid_t pid)
{
    struct conn c[64];
    size_t n;

    if (pid <= 0 || strcmp(S.o->m.server, "rcluster") != 0)
        return random_node();
    n = server_conns(pid, c, 64);
    for (size_t i = 0; i < n; i++)
        for (unsigned k = 0; k < S.o->m.nodes; k++)
            if (S.ports[k] == c[i].rport)
                return (int)k + 1;
    return random_node();
}

static void fault_server(int f, pid_t pid)
{
    uint64_t lease = (uint64_t)S.o->m.lease_ms * NS_PER_MS;
    uint64_t t0 = hi_now_ns();
    char target[64] = "node:", detail[64] = "";
    int nodes[MAX_NODES], count = 1, rc = 0;
    uint64_t t;
    size_t n;

    nodes[0] = holder_node(pid);
    if (f == HI_F_MAJORITY) {
        /* A majority of distinct nodes, one after another. */
        bool used[MAX_NODES + 1] = {false};

        count = (int)S.o->m.nodes / 2 + 1;
        used[nodes[0]] = true;
        for (int i = 1; i < count; i++) {
            do
                nodes[i] = random_node();
            while (used[nodes[i]]);
            used[nodes[i]] = true;
        }
    }
    for (int i = 0; i < count; i++) {
        n = strlen(target);
        snprintf(target + n, sizeof target - n, "%s%s-%d", i ? "," : "",
                 S.o->m.server, nodes[i]);
    }
    for (int i = 0; i < count && rc == 0; i++) {
        int node = nodes[i];

        switch (f) {
        case HI_F_RESTART:
        case HI_F_MAJORITY:
        case HI_F_CRASH:
            t = hi_now_ns();
            S.node_down[node] = true;
            if (f == HI_F_CRASH) {
                rc = ctl("kill", node);
                /* A cluster promotes the replica of a master silent for
                 * its node timeout (2 s, tests/servers/lib.sh): stay down
                 * past it, so that a crash of a master is a failover. */
                if (rc == 0 && strcmp(S.o->m.server, "rcluster") == 0)
                    nap(3000 * NS_PER_MS);
                if (rc == 0)
                    rc = ctl("start", node);
            } else {
                rc = ctl("restart", node);
            }
            t = (hi_now_ns() - t) / NS_PER_MS;
            S.restart_ms = (S.restart_ms + t) / 2;
            n = strlen(detail);
            snprintf(detail + n, sizeof detail - n, "%s%" PRIu64 "ms",
                     n ? "," : "", t);
            break;
        default: /* pauses */
            rc = ctl("pause", node);
            S.paused_node = node;
            nap(f == HI_F_PAUSE_SHORT ? lease / 4 : lease + lease / 2);
            if (ctl("resume", node) == 0)
                S.paused_node = 0;
            else
                rc = -1;
            break;
        }
        if (rc == 0)
            S.node_down[node] = false;
    }
    if (rc != 0) {
        S.ctl_failed = true;
        n = strlen(detail);
        snprintf(detail + n, sizeof detail - n, "%sctl.sh_failed",
                 n ? "," : "");
    }
    log_fault(f, t0, hi_now_ns(), rc == 0, target, detail);
}

/* How long fault f is expected to last, in ms (restarts as measured). */
static uint64_t expected_ms(int f)
{
    uint64_t lease = S.o->m.lease_ms;

    switch (f) {
    case HI_F_STOP_SHORT:
    case HI_F_PAUSE_SHORT:
        return lease / 4;
    case HI_F_STOP_LONG:
    case HI_F_PAUSE_LONG:
        return lease + lease / 2;
    case HI_F_RESTART:
    case HI_F_CRASH:
        return S.restart_ms;
    case HI_F_MAJORITY:
        return (S.o->m.nodes / 2 + 1) * S.restart_ms;
    default:
        return 0;
    }
}

static void inject(int f)
{
    /* An aimed fault strikes a holding asked to outlast it by a lease (a
     * quarter of it is spent before the strike), the others whatever grant
     * comes next. */
    uint64_t want = hi_fault_aimed(f)
                        ? expected_ms(f) + (uint64_t)S.o->m.lease_ms
                        : 0;
    pid_t pid = next_holder(want);

    if (got_signal)
        return;
    switch (f) {
    case HI_F_STOP_SHORT:
    case HI_F_STOP_LONG:
        if (pid > 0)
            fault_stop(f, pid);
        break;
    case HI_F_KILL:
        if (pid > 0)
            fault_kill(pid);
        break;
    case HI_F_CUT_HOLDING:
    case HI_F_CUT_RELEASE:
        if (pid > 0)
            fault_cut(f, pid);
        break;
    default:
        fault_server(f, pid);
        break;
    }
}

/* ---- the schedule ---------------------------------------------------------------------- */

static void shuffle(int *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(hi_rand(&S.rng) % (uint64_t)(i + 1)), t = v[i];

        v[i] = v[j];
        v[j] = t;
    }
}

static void nemesis(uint64_t t_start)
{
    const struct hi_meta *m = &S.o->m;
    uint64_t end = t_start + (uint64_t)m->duration_ms * NS_PER_MS;
    uint64_t tail = (uint64_t)m->lease_ms * NS_PER_MS;
    uint64_t gap = (uint64_t)S.o->fault_gap_ms * NS_PER_MS;
    struct holder h;
    int kinds[HI_F_COUNT], n = 0;
    bool first_round = true;

    for (int f = 0; f < HI_F_COUNT; f++)
        if (m->faults & (1u << f))
            kinds[n++] = f;
    /* Let the workers connect and the lock change hands first. */
    while (!got_signal && !read_holder(&h) &&
           hi_now_ns() < t_start + (uint64_t)m->acquire_timeout_ms * NS_PER_MS)
        nap(5 * NS_PER_MS);
    while (!got_signal) {
        if (n == 0 || (!first_round && hi_now_ns() + tail >= end)) {
            if (hi_now_ns() >= end)
                break;
            nap(end - hi_now_ns());
            continue;
        }
        shuffle(kinds, n);
        for (int i = 0; i < n && !got_signal; i++) {
            nap(hi_rand_range(&S.rng, gap / 2, gap));
            if (!first_round && hi_now_ns() + tail >= end)
                break;
            inject(kinds[i]);
        }
        first_round = false;
    }
}

/* ---- main ------------------------------------------------------------------------------- */

/* Stop the workers: DIR/stop, then wait as long as a cycle may take; kill
 * (and log) whoever is still running then, or at once on a signal. */
static void stop_workers(void)
{
    const struct hi_meta *m = &S.o->m;
    struct hi_bounds b;
    char path[HI_PATH_MAX];
    uint64_t end, hard;
    bool killed = false;

    hi_bounds_of(m, &b);
    S.stopping = true;
    hi_write_file(hi_path(path, sizeof path, S.dir, "stop"), "");
    hi_logf(S.log, "S %" PRIu64, hi_now_ns());
    if (S.stopped > 0) {
        kill(S.stopped, SIGCONT);
        S.stopped = 0;
    }
    /* A long holding, a release, an acquire and a close, each bounded. */
    end = hi_now_ns() + (uint64_t)(m->long_hold_ms + m->acquire_timeout_ms) *
                            NS_PER_MS + 3 * b.slack_ns + 2000 * NS_PER_MS;
    hard = end + 10000 * NS_PER_MS;
    for (;;) {
        bool any = false;

        supervise();
        for (unsigned i = 0; i < m->workers; i++)
            any = any || S.slots[i].pid > 0;
        if (!any || hi_now_ns() >= hard)
            break;
        if (!killed && (hi_now_ns() >= end || got_signal)) {
            for (unsigned i = 0; i < m->workers; i++)
                if (S.slots[i].pid > 0) {
                    hi_logf(S.log, "K %" PRIu64 " %ld", hi_now_ns(),
                            (long)S.slots[i].pid);
                    kill(S.slots[i].pid, SIGKILL);
                }
            killed = true;
        }
        hi_sleep_ns(2 * NS_PER_MS);
    }
}

/* ctl.sh's messages (with the server's log tail) where the test log shows
 * them: a failed restart is the harness's trouble, not the lock's, and
 * must be explained. */
static void show_ctl_log(void)
{
    char path[HI_PATH_MAX], line[1024];
    FILE *f = fopen(hi_path(path, sizeof path, S.dir, "ctl.log"), "re");

    if (f == NULL)
        return;
    fprintf(stderr, "history run: a server control command failed; %s:\n",
            path);
    while (fgets(line, sizeof line, f) != NULL)
        fprintf(stderr, "    %s", line);
    fclose(f);
}

/* Leave the servers as we found them: nothing paused, every node up. */
static void restore_servers(void)
{
    if (S.o->m.server[0] == '\0')
        return;
    if (S.paused_node > 0 && ctl("resume", S.paused_node) == 0)
        S.paused_node = 0;
    for (unsigned i = 1; i <= S.o->m.nodes; i++)
        if (S.node_down[i] && ctl("start", (int)i) == 0)
            S.node_down[i] = false;
}

static int describe_uri(struct opts *o)
{
    dlock_client *c = NULL;
    dlock_info info = DLOCK_INFO_INIT;
    int rc = dlock_client_open(&c, o->m.uri, NULL);

    if (rc != DLOCK_OK || dlock_client_info(c, &info) != DLOCK_OK) {
        fprintf(stderr, "history run: cannot open %s: %s\n", o->m.uri,
                dlock_client_errmsg(c));
        dlock_client_close(c);
        return -1;
    }
    snprintf(o->m.uri_shown, sizeof o->m.uri_shown, "%s", info.uri);
    snprintf(o->m.scheme, sizeof o->m.scheme, "%s", info.scheme);
    snprintf(o->m.mode, sizeof o->m.mode, "%s", info.mode);
    o->m.caps = info.caps;
    o->m.lease_ms = info.lease_ms;
    o->m.timeout_ms = info.timeout_ms;
    dlock_client_close(c);
    return 0;
}

static int make_dir(struct opts *o, char *dir, size_t cap)
{
    char path[HI_PATH_MAX];

    if (o->dir != NULL)
        snprintf(dir, cap, "%s", o->dir);
    else
        hi_path(dir, cap, h_scratch(), "run");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "history run: mkdir %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (hi_meta_write(dir, &o->m) != 0 ||
        hi_write_file(hi_path(path, sizeof path, dir, "store"), "0 0\n") != 0 ||
        hi_write_file(hi_path(path, sizeof path, dir, "counter"), "0\n") != 0) {
        fprintf(stderr, "history run: cannot write the files of %s\n", dir);
        return -1;
    }
    return 0;
}

int hi_run_main(int argc, char **argv)
{
    static struct opts o;
    static char dir[HI_PATH_MAX];
    char path[HI_PATH_MAX];
    struct sigaction sa;
    uint64_t t_start;
    ssize_t n;
    int status;

    if (parse_opts(argc - 2, argv + 2, &o) != 0)
        return 2;
    /* $VARS and file://@TMPDIR@ as in the conformance suite. */
    snprintf(o.m.uri, sizeof o.m.uri, "%s", h_setup(argc, argv));
    add_param(o.m.uri, sizeof o.m.uri, "lease", o.lease);
    add_param(o.m.uri, sizeof o.m.uri, "timeout", o.timeout);
    if (describe_uri(&o) != 0 || !parse_faults(o.faults, &o.m, &o.m.faults)) {
        h_cleanup();
        return 2;
    }
    /* A semaphore run of a mode without semaphores would be a lock run
     * under another name: skipped (77, as meson counts it). */
    if (o.m.elect && o.m.permits > 0) {
        fprintf(stderr, "history run: --elect and --permits: give one\n");
        h_cleanup();
        return 2;
    }
    if (o.m.permits > 0 && !o.m.no_lock && !(o.m.caps & DLOCK_CAP_PERMITS)) {
        printf("history: %s/%s has no permits: --permits run skipped\n",
               o.m.scheme, o.m.mode);
        h_cleanup();
        return 77;
    }
    if (o.m.long_hold_ms == 0)
        o.m.long_hold_ms = o.m.lease_ms;
    /* A name of its own: nothing a previous run left on the server (a
     * lease still running, a row) is in the way. */
    snprintf(o.m.name, sizeof o.m.name, "history-%ld-%" PRIu64,
             (long)getpid(), hi_now_ns() / NS_PER_MS);
    if (make_dir(&o, dir, sizeof dir) != 0) {
        h_cleanup();
        return 2;
    }
    S.o = &o;
    S.dir = dir;
    S.rng = o.m.seed;
    S.restart_ms = 1000;
    n = readlink("/proc/self/exe", S.self, sizeof S.self - 1);
    S.self[n > 0 ? n : 0] = '\0';
    S.log = hi_log_open(hi_path(path, sizeof path, dir, "run.log"));
    if (S.log < 0 || (o.m.server[0] != '\0' && read_ports() != 0)) {
        h_cleanup();
        return 2;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    t_start = hi_now_ns();
    hi_logf(S.log, "B %" PRIu64, t_start);
    for (unsigned i = 0; i < o.m.workers; i++)
        spawn_worker(i);
    nemesis(t_start);
    stop_workers();
    restore_servers();
    hi_logf(S.log, "Z %" PRIu64, hi_now_ns());
    close(S.log);
    if (S.ctl_failed)
        show_ctl_log();
    if (got_signal) {
        fprintf(stderr, "history run: interrupted by signal %d\n",
                (int)got_signal);
        if (!o.keep)
            h_cleanup();
        return 128 + (int)got_signal;
    }
    status = hi_check(dir, o.json, o.expect);
    if (o.keep || status != 0)
        fprintf(stderr, "history run: run directory %s%s\n", dir,
                o.keep ? " kept" : " (removed; --keep keeps it)");
    if (!o.keep)
        h_cleanup();
    return status;
}
