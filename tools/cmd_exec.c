/*
 * cmd_exec.c: `dlock exec`, flock(1) across machines. Take the lock, run the
 * command, release when it exits. The watchdog keeps the lease alive; if the
 * lock is lost meanwhile the command gets SIGTERM (then SIGKILL after
 * --kill-after) and dlock exits 75, because its work is no longer protected.
 *
 * The command never runs without the lock. dlock forks a guard process
 * (exec_guard.c) that keeps a copy of dlock's descriptors, starts the
 * command and kills it and all it started when dlock dies, before those
 * descriptors (and with them file and connection-bound locks) are freed.
 * This file is dlock's side: options, the lock, and the loop that talks to
 * the guard; if the guard dies, dlock kills the command itself.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_guard.h"
#include "exec_run.h"
#include "tool.h"

/* Written by the watchdog's on_lost and by signal handlers; read by the
 * main loop. One byte says which: 'L' lost, or the signal number. */
static int events[2] = {-1, -1};

/* The signals dlock passes on to the command's processes. */
static const int caught[] = {SIGTERM, SIGINT, SIGHUP};

/* While dlock waits for the lock, one of caught[] gives up the wait: the
 * handler shuts the client down (async-signal-safe), the acquire returns
 * DLOCK_ECLOSED holding nothing, and dlock exits 128+N. */
static dlock_client *waiting_client;
static volatile sig_atomic_t wait_signal;

/* The subcommand running a command: "exec", or "elect" (exec_run.h). */
static const char *run_sub = "exec";

static void exec_help(void)
{
    printf(
        "usage: dlock exec [OPTIONS] NAME [--] COMMAND [ARG...]\n"
        "       dlock exec [OPTIONS] NAME -c COMMAND-LINE\n"
        "\n"
        "Run COMMAND while holding the lock NAME; release it when COMMAND "
        "exits.\nThe options are flock(1)'s, with flock's meanings and "
        "exit codes, and more.\n"
        "\n"
        "  --uri URI                 backend URI (default: $DLOCK_URI, "
        "else file://)\n"
        "  --password-file FILE      the server's password, from FILE's "
        "first line (mode\n"
        "                            0600), kept off the command line; "
        "or set\n"
        "                            $DLOCK_PASSWORD (COMMAND does not "
        "see it)\n"
        "  -w, --wait, --timeout T   wait at most T for the lock: seconds "
        "as flock\n"
        "                            takes them (5, 0.5) or a duration "
        "(300ms, 2m);\n"
        "                            0 tries once (default: wait "
        "forever)\n"
        "  -n, --nonblock, --nb      do not wait: the same as -w 0\n"
        "  -s, --shared              take a shared (reader) lock\n"
        "  -x, -e, --exclusive       take an exclusive lock (the "
        "default)\n"
        "  --permits N               take one of N permits of a counting "
        "semaphore:\n"
        "                            at most N commands run at once under "
        "NAME (every\n"
        "                            run of NAME must give the same N; not "
        "with -s or\n"
        "                            --also)\n"
        "  --fair                    refuse to run unless the URI's mode "
        "grants in\n"
        "                            order of arrival (`dlock info` says "
        "\"fair\"); the\n"
        "                            message names the backend's fair "
        "modes\n"
        "  -E, --conflict-exit-code N\n"
        "                            exit code when busy or timed out "
        "(default 1)\n"
        "  -c, --command LINE        run LINE with $SHELL -c (/bin/sh "
        "without $SHELL)\n"
        "  -o, --close               accepted: COMMAND never inherits "
        "dlock's lock\n"
        "                            descriptors or connections anyway\n"
        "  --verbose                 say on stderr how long the lock took "
        "and what runs\n"
        "  --lease DUR               lease to hold and renew (default: the "
        "URI's\n"
        "                            lease=, else 30s)\n"
        "  --kill-after DUR          SIGKILL what has not exited DUR after "
        "its SIGTERM\n"
        "                            (lost lock, or left running by "
        "COMMAND;\n"
        "                            default 10s)\n"
        "  -q, --quiet               no message on conflict (nor, on a "
        "terminal, on\n"
        "                            waiting: otherwise a busy lock is said "
        "to be\n"
        "                            waited for, with its holder)\n"
        "  --also NAME2              hold NAME2 too (repeatable, up to 63): "
        "all the\n"
        "                            locks or none, taken in one order "
        "whatever the\n"
        "                            command line's, so runs listing them "
        "in other\n"
        "                            orders do not deadlock; -w bounds "
        "them all\n"
        "flock's -u (unlock) and -F (no fork) are refused: a lock is held "
        "only for\nCOMMAND's run, and the guard process is what keeps "
        "COMMAND from outliving it.\n"
        "\n"
        "Durations: 250ms, 5s, 1.5s, 2m, 1h, or 0.\n"
        "COMMAND sees DLOCK_NAME, DLOCK_FENCE (the fencing token: pass it to "
        "the\nstorage you write to) and DLOCK_OWNER in its environment, "
        "and the\ndescriptors dlock was started with, no other. With --also, "
        "DLOCK_FENCES\nhas every lock's token, in the order the names "
        "were given.\n"
        "\n"
        "COMMAND never runs without the lock. A guard process between "
        "dlock and\nCOMMAND holds dlock's lock descriptors and "
        "connections, and everything\nCOMMAND starts stays below it, even "
        "after its parent exits:\n"
        "  COMMAND exits        what it left running gets SIGTERM (SIGKILL "
        "after\n"
        "                       --kill-after); then the lock is released.\n"
        "  lock lost            COMMAND and all it started get SIGTERM "
        "(SIGKILL after\n"
        "                       --kill-after); exit 75.\n"
        "  SIGTERM, SIGINT or   passed on to COMMAND and all it started; "
        "dlock waits\n"
        "  SIGHUP to dlock      for COMMAND, then as when it exits.\n"
        "  dlock SIGKILLed      the guard SIGKILLs COMMAND and all it "
        "started, reaps\n"
        "  or crashes           them, then exits: only then are file and\n"
        "                       connection-bound locks freed (a lease "
        "expires after\n"
        "                       its lease).\n"
        "  guard killed         the kernel SIGKILLs COMMAND; dlock kills "
        "the rest,\n"
        "                       releases the lock and exits 70.\n"
        "  service unreachable  COMMAND and all it started have ended; "
        "dlock says so,\n"
        "  at release           and the server frees the lock when its "
        "lease or\n"
        "                       connection ends.\n"
        "A process started after its parent got that SIGTERM (a trap's "
        "clean-up) is\nspared it: --kill-after bounds its run.\n"
        "COMMAND stays in dlock's process group, as under flock(1): the "
        "terminal,\nCtrl-C and Ctrl-Z reach it as they reach dlock (while "
        "dlock is stopped it\nrenews nothing, and a lease may run out).\n"
        "\n"
        "exit status: COMMAND's own (128+N if killed by signal N); 1 (or "
        "N) busy or\ntimed out; 128+N if dlock got signal N (SIGTERM, "
        "SIGINT, SIGHUP) while\nwaiting for the lock (the wait is "
        "cancelled, nothing is held); 75 the lock\nwas lost while COMMAND "
        "ran; 126/127 COMMAND not executable / not found;\nthe others as "
        "in `dlock --help`.\n");
}

/* Long options without a short form. */
enum {
    OPT_URI = 256,
    OPT_LEASE,
    OPT_KILL_AFTER,
    OPT_VERBOSE,
    OPT_PWFILE,
    OPT_ALSO,
    OPT_FAIR,
    OPT_PERMITS
};

/* NAME and the --also names. */
#define EXEC_NAMES_MAX 64

/* -w/--wait/--timeout: flock(1)'s seconds ("5", "0.5"), or a duration
 * with its unit ("300ms"). */
static bool wait_time(const char *opt, const char *text, uint32_t *ms)
{
    size_t digits = strspn(text, "0123456789");
    char *end;
    double s;

    if (digits > 0 && (text[digits] == '\0' ||
                       (text[digits] == '.' &&
                        strspn(text + digits + 1, "0123456789") > 0 &&
                        text[digits + 1 + strspn(text + digits + 1,
                                                 "0123456789")] == '\0'))) {
        s = strtod(text, &end);
        if (s * 1000.0 >= (double)DLOCK_WAIT_FOREVER) {
            tool_err("exec", "%s: '%s' seconds is too long (at most %u)",
                     opt, text, (unsigned)(DLOCK_WAIT_FOREVER / 1000 - 1));
            return false;
        }
        *ms = (uint32_t)(s * 1000.0 + 0.5);
        return true;
    }
    if (dlock_parse_duration(text, ms) != DLOCK_OK) {
        tool_err("exec", "%s: '%s' is neither seconds nor a duration "
                 "(expected e.g. 5, 0.5, 300ms, 2m; or 0)", opt, text);
        return false;
    }
    return true;
}

/* Take the lock within timeout_ms. On a terminal, a lock that is busy at
 * first is said to be waited for, with its holder where the backend can
 * tell, before the wait. */
static int acquire(dlock_client *c, dlock_lock *lk, const char *name,
                   uint32_t timeout_ms, bool quiet)
{
    dlock_state st = DLOCK_STATE_INIT;
    int64_t t0, spent;
    uint32_t left;
    int rc;

    if (quiet || timeout_ms == 0 || !isatty(STDERR_FILENO))
        return dlock_acquire(lk, timeout_ms);
    t0 = guard_now_ms();
    rc = dlock_acquire(lk, 0);
    if (rc != DLOCK_EBUSY)
        return rc;
    fprintf(stderr, "dlock exec: waiting for %s", name);
    if (dlock_inspect(c, name, &st) == DLOCK_OK && st.held > 0) {
        if (st.owner[0] != '\0')
            fprintf(stderr, ", held by %s", st.owner);
        if (st.remaining_ms >= 0)
            fprintf(stderr, ", lease left %.1f s",
                    (double)st.remaining_ms / 1000.0);
    }
    if (timeout_ms == DLOCK_WAIT_FOREVER)
        fprintf(stderr, " (no time limit; Ctrl-C gives up)\n");
    else
        fprintf(stderr, " (at most %.1f s)\n", (double)timeout_ms / 1000.0);
    if (timeout_ms == DLOCK_WAIT_FOREVER)
        return dlock_acquire(lk, DLOCK_WAIT_FOREVER);
    spent = guard_now_ms() - t0;
    left = spent >= (int64_t)timeout_ms ? 0 : timeout_ms - (uint32_t)spent;
    return dlock_acquire(lk, left);
}

static void on_lost(dlock_lock *lk, int code, const char *why, void *payload)
{
    (void)lk;
    (void)code;
    (void)payload;
    fprintf(stderr, "dlock exec: lock lost: %s\n", why);
    exec_run_lost();
}

void exec_run_lost(void)
{
    char b = 'L';

    if (write(events[1], &b, 1) < 0) {
        /* The pipe is non-blocking and never full in practice; nothing
         * else can be done from here. */
    }
}

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    char b = (char)sig;
    int saved = errno;

    (void)ctx;
    /* The terminal (Ctrl-C, a hangup) signals the whole foreground group,
     * the command included: passing it on would make it twice. */
    if (si != NULL && si->si_code == SI_KERNEL)
        return;
    if (write(events[1], &b, 1) < 0) {
        /* As above. */
    }
    errno = saved;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

struct fd_list {
    int *fds;
    size_t n, cap;
};

static bool fd_list_add(struct fd_list *l, int fd)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        int *more = realloc(l->fds, cap * sizeof *more);
        if (more == NULL)
            return false;
        l->fds = more;
        l->cap = cap;
    }
    l->fds[l->n++] = fd;
    return true;
}

/* The descriptors open now, at dlock's start, ascending: what the caller
 * passes on to the command. False if out of memory. */
static bool inherited_fds(struct fd_list *l)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    bool ok = true;

    if (d == NULL) { /* no /proc: probe the first 1024 */
        for (int fd = 0; fd < 1024 && ok; fd++)
            if (fcntl(fd, F_GETFD) >= 0)
                ok = fd_list_add(l, fd);
    } else {
        while (ok && (e = readdir(d)) != NULL) {
            int fd = atoi(e->d_name);
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd != dirfd(d))
                ok = fd_list_add(l, fd);
        }
        closedir(d);
    }
    if (ok && l->n > 1)
        qsort(l->fds, l->n, sizeof *l->fds, cmp_int);
    return ok;
}

/* dlock's side of a running command. */
struct run {
    struct guard_setup gs;
    pid_t guard;
    int to_guard, from_guard;
    bool lost, done;
    int exec_errno, fork_errno;
    int status; /* the command's wait status (GUARD_DONE), else the guard's */
    struct fd_list inherited; /* gs.inherited points into it */
};

static void tell_guard(struct run *r, int kind, int a)
{
    struct guard_msg m = {kind, a, 0};
    ssize_t w;

    do
        w = write(r->to_guard, &m, sizeof m);
    while (w < 0 && errno == EINTR);
    /* EPIPE (SIGPIPE is ignored): the guard is gone; the main loop finds
     * out from its pipe's EOF. */
}

static bool ignored_at_start(const struct run *r, int sig)
{
    for (int i = 0; i < GUARD_NSIGNALS; i++)
        if (guard_signals[i] == sig)
            return r->gs.ignored[i];
    return false;
}

/* Fork the guard, which starts the command. Returns 0, or an errno. */
static int start_guard(struct run *r)
{
    int to[2], from[2], e;
    sigset_t fwd, old;

    if (pipe2(to, O_CLOEXEC) != 0)
        return errno;
    if (pipe2(from, O_CLOEXEC) != 0) {
        e = errno;
        close(to[0]);
        close(to[1]);
        return e;
    }
    r->gs.cmd_in = to[0];
    r->gs.report_out = from[1];
    r->gs.dlock_ends[0] = to[1];
    r->gs.dlock_ends[1] = from[0];
    /* If the guard dies, what it started is reparented to dlock, which
     * then kills it. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* No handler of dlock's may run in the guard before it ignores the
     * signals: block them across the fork (the guard unblocks them). */
    sigemptyset(&fwd);
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
        sigaddset(&fwd, caught[i]);
    pthread_sigmask(SIG_BLOCK, &fwd, &old);
    r->guard = fork();
    if (r->guard == 0)
        guard_main(&r->gs);
    e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(to[0]);
    close(from[1]);
    r->to_guard = to[1];
    r->from_guard = from[0];
    return r->guard < 0 ? e : 0;
}

static void read_reports(struct run *r, bool *eof)
{
    struct guard_msg m[16];
    ssize_t got;

    got = read(r->from_guard, m, sizeof m);
    if (got < 0 && errno == EINTR)
        return;
    if (got <= 0) {
        *eof = true;
        return;
    }
    for (size_t i = 0; i < (size_t)got / sizeof m[0]; i++) {
        switch (m[i].kind) {
        case GUARD_FORK_FAILED:
            r->fork_errno = m[i].a;
            break;
        case GUARD_EXEC_FAILED:
            r->exec_errno = m[i].a;
            break;
        case GUARD_DONE:
            r->done = true;
            r->status = m[i].a;
            break;
        default:
            break;
        }
    }
}

/* Until the guard exits: pass signals on, report a lost lock. */
static void supervise(struct run *r)
{
    bool eof = false;
    int st = 0;

    while (!eof) {
        struct pollfd fds[2] = {{events[0], POLLIN, 0},
                                {r->from_guard, POLLIN, 0}};
        char b;

        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & POLLIN) {
            while (read(events[0], &b, 1) == 1) {
                if (b != 'L') {
                    tell_guard(r, GUARD_SIGNAL, b);
                } else if (!r->lost) {
                    r->lost = true;
                    tell_guard(r, GUARD_TERMINATE, 0);
                }
            }
        }
        if (fds[1].revents != 0)
            read_reports(r, &eof);
    }
    while (waitpid(r->guard, &st, 0) < 0 && errno == EINTR)
        ;
    if (!r->done)
        r->status = st; /* the guard's, for the message */
}

/* The guard died before the command's end: the command got SIGKILL from
 * the kernel (its parent-death signal), and it and all it started are now
 * below dlock (a subreaper) or on their way. SIGKILL and reap them all. */
static void kill_orphans(void)
{
    static pid_t walk[4096];

    for (;;) {
        int n = guard_descendants(getpid(), walk, NULL, 4096);
        pid_t r;

        for (int i = 0; i < n; i++)
            kill(walk[i], SIGKILL);
        while ((r = waitpid(-1, NULL, WNOHANG)) > 0)
            ;
        if (r < 0 && errno == ECHILD)
            return;
        poll(NULL, 0, 10);
    }
}

/* Run the command under a guard; its exit code as dlock reports it. */
static int run_command(struct run *r, const char *what)
{
    int e;

    e = start_guard(r);
    if (e != 0) {
        tool_err(run_sub, "fork: %s", strerror(e));
        return EXIT_SOFTWARE;
    }
    supervise(r);
    close(r->to_guard);
    close(r->from_guard);
    if (!r->done && r->fork_errno != 0) {
        tool_err(run_sub, "cannot start the command: %s",
                 strerror(r->fork_errno));
        return EXIT_SOFTWARE;
    }
    if (!r->done) {
        kill_orphans();
        if (WIFSIGNALED(r->status))
            tool_err(run_sub,
                     "the guard process %d was killed by signal %d; "
                     "the command and all it started were killed",
                     (int)r->guard, WTERMSIG(r->status));
        else
            tool_err(run_sub,
                     "the guard process %d exited early (status %d); "
                     "the command and all it started were killed",
                     (int)r->guard, WEXITSTATUS(r->status));
        return EXIT_SOFTWARE;
    }
    if (r->exec_errno != 0) {
        tool_err(run_sub, "%s: %s", what, strerror(r->exec_errno));
        return r->exec_errno == ENOENT ? 127 : 126;
    }
    if (WIFEXITED(r->status))
        return WEXITSTATUS(r->status);
    if (WIFSIGNALED(r->status))
        return 128 + WTERMSIG(r->status);
    return EXIT_SOFTWARE;
}

/* What the command gets back from dlock's start: the descriptors, the
 * signal mask and which of guard_signals were ignored. */
static bool start_state(struct run *r)
{
    struct sigaction sa;

    memset(r, 0, sizeof *r);
    if (!inherited_fds(&r->inherited)) {
        tool_err(run_sub, "out of memory");
        free(r->inherited.fds);
        return false;
    }
    r->gs.inherited = r->inherited.fds;
    r->gs.n_inherited = r->inherited.n;
    pthread_sigmask(SIG_BLOCK, NULL, &r->gs.mask);
    for (int i = 0; i < GUARD_NSIGNALS; i++)
        r->gs.ignored[i] = sigaction(guard_signals[i], NULL, &sa) == 0 &&
                           sa.sa_handler == SIG_IGN;
    return true;
}

static void on_wait_signal(int sig)
{
    wait_signal = sig;
    dlock_client_shutdown(waiting_client);
}

/* Give up the wait on caught[] signals (those not ignored at start). */
static void catch_wait_signals(struct run *r, dlock_client *c)
{
    struct sigaction sa;

    waiting_client = c;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_wait_signal;
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
        if (!ignored_at_start(r, caught[i]))
            sigaction(caught[i], &sa, NULL);
}

/* Catch the signals to pass on, unless ignored when dlock started (nohup,
 * or a background job of a shell without job control): the command then
 * ignores them too, as it would without dlock. SIGPIPE is ignored so that a
 * write to a dead guard fails instead of killing dlock. */
static void catch_signals(struct run *r)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sa.sa_sigaction = on_signal;
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
        if (!ignored_at_start(r, caught[i]))
            sigaction(caught[i], &sa, NULL);
    sa.sa_flags = 0;
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

/* --fair: does the URI's mode grant in order of arrival? If not, say so
 * and name the backend's modes that do. */
static bool is_fair(dlock_client *c, const char *uri)
{
    dlock_info info = DLOCK_INFO_INIT;
    dlock_mode_info mi[16];
    char err[256], fair[256] = "";
    size_t n = 0, used = 0;

    if (dlock_client_info(c, &info) == DLOCK_OK &&
        (info.caps & DLOCK_CAP_FAIR))
        return true;
    for (size_t i = 0; i < 16; i++)
        mi[i] = (dlock_mode_info)DLOCK_MODE_INFO_INIT;
    if (dlock_backend_modes(uri, mi, 16, &n, err, sizeof err) == DLOCK_OK)
        for (size_t i = 0; i < n && i < 16; i++)
            if (mi[i].caps & DLOCK_CAP_FAIR)
                used += (size_t)snprintf(fair + used, sizeof fair - used,
                                         "%smode=%s", used ? ", " : "",
                                         mi[i].mode);
    tool_err("exec", "--fair: %s mode '%s' does not grant in order of "
             "arrival; %s%s",
             info.scheme != NULL ? info.scheme : "the",
             info.mode != NULL ? info.mode : "?",
             used ? "fair modes of this backend: " : "this backend has no "
                                                     "fair mode",
             fair);
    return false;
}

static int exec_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, OPT_URI},
        {"password-file", required_argument, NULL, OPT_PWFILE},
        {"timeout", required_argument, NULL, 'w'},
        {"wait", required_argument, NULL, 'w'},
        {"nonblock", no_argument, NULL, 'n'},
        {"nb", no_argument, NULL, 'n'},
        {"lease", required_argument, NULL, OPT_LEASE},
        {"shared", no_argument, NULL, 's'},
        {"exclusive", no_argument, NULL, 'x'},
        {"conflict-exit-code", required_argument, NULL, 'E'},
        {"command", required_argument, NULL, 'c'},
        {"close", no_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
        {"unlock", no_argument, NULL, 'u'},
        {"no-fork", no_argument, NULL, 'F'},
        {"quiet", no_argument, NULL, 'q'},
        {"also", required_argument, NULL, OPT_ALSO},
        {"fair", no_argument, NULL, OPT_FAIR},
        {"permits", required_argument, NULL, OPT_PERMITS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *uri = NULL, *name, *names[EXEC_NAMES_MAX];
    size_t nnames = 1;
    uint32_t timeout = DLOCK_WAIT_FOREVER, lease = 0, kill_after = 10000;
    unsigned long conflict = EXIT_CONFLICT, permits = 0;
    bool quiet = false, verbose = false, fair = false;
    const char *line = NULL; /* -c */
    const char *pwfile = NULL;
    char *uri_pw = NULL; /* the URI with the password put in */
    char *shell_argv[4];
    int64_t t0;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *lks[EXEC_NAMES_MAX] = {NULL}, *lk = NULL;
    char fence[32], fences[EXEC_NAMES_MAX * 21];
    struct run r;
    int opt, rc, code;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:w:nsxeE:c:ouFqh", opts, NULL)) != -1) {
        switch (opt) {
        case OPT_URI:
            if (!tool_uri("exec", &uri, optarg))
                return EXIT_USAGE;
            break;
        case OPT_PWFILE:
            pwfile = optarg;
            break;
        case 'w':
            /* "-w 5": the option is the word before its value */
            if (!wait_time(optarg == argv[optind - 1] ? argv[optind - 2]
                                                      : argv[optind - 1],
                           optarg, &timeout))
                return EXIT_USAGE;
            break;
        case 'n':
            timeout = 0;
            break;
        case 'x':
        case 'e':
            lo.flags &= ~DLOCK_LOCK_SHARED;
            break;
        case 'c':
            line = optarg;
            break;
        case 'o':
            break; /* what -o asks is always so: see the help */
        case OPT_VERBOSE:
            verbose = true;
            break;
        case 'u':
        case 'F':
            tool_err("exec", "%s: not supported (a lock is held only while "
                     "COMMAND runs, under a guard process)",
                     argv[optind - 1]);
            return EXIT_USAGE;
        case OPT_LEASE:
            if (!tool_duration("exec", "--lease", optarg, &lease))
                return EXIT_USAGE;
            if (lease == 0) {
                tool_err("exec", "--lease: must be more than 0");
                return EXIT_USAGE;
            }
            break;
        case 's':
            lo.flags |= DLOCK_LOCK_SHARED;
            break;
        case 'E':
            if (!tool_uint("exec", "--conflict-exit-code", optarg, 0, 255,
                           &conflict))
                return EXIT_USAGE;
            break;
        case OPT_KILL_AFTER:
            if (!tool_duration("exec", "--kill-after", optarg, &kill_after))
                return EXIT_USAGE;
            break;
        case 'q':
            quiet = true;
            break;
        case OPT_FAIR:
            fair = true;
            break;
        case OPT_PERMITS:
            if (!tool_uint("exec", "--permits", optarg, 1, DLOCK_PERMITS_MAX,
                           &permits))
                return EXIT_USAGE;
            break;
        case OPT_ALSO:
            if (nnames == EXEC_NAMES_MAX) {
                tool_err("exec", "--also: at most %d names in all",
                         EXEC_NAMES_MAX);
                return EXIT_USAGE;
            }
            names[nnames++] = optarg;
            break;
        case 'h':
            exec_help();
            return 0;
        case ':':
            tool_err("exec", "%s: needs a value", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            tool_err("exec", "unknown option '%s' (try `dlock exec --help`)",
                     argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (permits > 0 && fair) {
        tool_err("exec", "--fair: with --permits: no mode promises an order "
                 "of permits (dlock info's fair is the lock's)");
        return EXIT_USAGE;
    }
    if (permits > 0 && (nnames > 1 || (lo.flags & DLOCK_LOCK_SHARED))) {
        tool_err("exec", "--permits: not with %s (a permit is one of N "
                 "holders of one name)", nnames > 1 ? "--also" : "--shared");
        return EXIT_USAGE;
    }
    if (optind >= argc) {
        tool_err("exec", "missing NAME and COMMAND (try `dlock exec --help`)");
        return EXIT_USAGE;
    }
    name = names[0] = argv[optind++];
    /* flock's own order: NAME -c LINE */
    if (line == NULL && optind < argc &&
        (strcmp(argv[optind], "-c") == 0 ||
         strcmp(argv[optind], "--command") == 0)) {
        if (optind + 1 >= argc) {
            tool_err("exec", "%s: needs a value", argv[optind]);
            return EXIT_USAGE;
        }
        line = argv[optind + 1];
        optind += 2;
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (line != NULL && optind < argc) {
        tool_err("exec", "-c LINE and a COMMAND after it: give one");
        return EXIT_USAGE;
    }
    if (line == NULL && optind >= argc) {
        tool_err("exec", "missing COMMAND after NAME");
        return EXIT_USAGE;
    }
    if (line != NULL) {
        const char *sh = getenv("SHELL");

        shell_argv[0] = (char *)(sh != NULL && sh[0] != '\0' ? sh : "/bin/sh");
        shell_argv[1] = (char *)"-c";
        shell_argv[2] = (char *)line;
        shell_argv[3] = NULL;
        argv = shell_argv;
        optind = 0;
    }

    if (!tool_password("exec", pwfile, &uri, &uri_pw))
        return EXIT_USAGE;
    if (!start_state(&r)) {
        free(uri_pw);
        return EXIT_SOFTWARE;
    }
    code = EXIT_SOFTWARE;
    if (pipe2(events, O_CLOEXEC | O_NONBLOCK) != 0) {
        tool_err("exec", "pipe: %s", strerror(errno));
        goto out;
    }
    rc = dlock_client_open(&c, uri, NULL);
    if (rc != DLOCK_OK) {
        tool_err("exec", "%s", dlock_client_errmsg(c));
        code = tool_exit_for(rc);
        goto out;
    }
    if (fair && !is_fair(c, uri)) {
        code = EXIT_USAGE;
        goto out;
    }
    lo.lease_ms = lease;
    lo.on_lost = on_lost;
    lo.permits = (uint32_t)permits;
    for (size_t i = 0; i < nnames; i++) {
        rc = dlock_lock_new(&lks[i], c, names[i], &lo);
        if (rc != DLOCK_OK) {
            tool_err("exec", "%s: %s", i == 0 ? "NAME" : "--also",
                     dlock_client_errmsg(c));
            code = tool_exit_for(rc);
            goto out;
        }
    }
    lk = lks[0];
    t0 = guard_now_ms();
    catch_wait_signals(&r, c);
    if (nnames == 1) {
        rc = acquire(c, lk, name, timeout, quiet);
    } else {
        int failed = -1;
        rc = dlock_acquire_all(lks, nnames, timeout, NULL, &failed);
        if (failed >= 0)
            lk = lks[failed]; /* whose message says why */
    }
    if (rc == DLOCK_ECLOSED && wait_signal != 0) {
        tool_err("exec", "%s while waiting for %s: gave up, nothing held",
                 strsignal(wait_signal), name);
        code = 128 + wait_signal;
        goto out;
    }
    if (rc != DLOCK_OK) {
        code = rc == DLOCK_EBUSY || rc == DLOCK_ETIMEDOUT ? (int)conflict
                                                          : tool_exit_for(rc);
        if (!quiet || code != (int)conflict)
            tool_err("exec", "%s", dlock_lock_errmsg(lk));
        goto out;
    }

    snprintf(fence, sizeof fence, "%" PRIu64, dlock_fence(lk));
    setenv("DLOCK_NAME", name, 1);
    setenv("DLOCK_FENCE", fence, 1);
    setenv("DLOCK_OWNER", dlock_lock_owner(lk), 1);
    if (nnames > 1) {
        size_t used = 0;
        for (size_t i = 0; i < nnames; i++)
            used += (size_t)snprintf(fences + used, sizeof fences - used,
                                     "%s%" PRIu64, i ? " " : "",
                                     dlock_fence(lks[i]));
        setenv("DLOCK_FENCES", fences, 1);
    }
    if (verbose)
        fprintf(stderr,
                "dlock exec: getting lock took %.3f seconds\n"
                "dlock exec: executing %s\n",
                (double)(guard_now_ms() - t0) / 1000.0, argv[optind]);
    catch_signals(&r);
    if (wait_signal != 0) {
        /* It came between the grant and the handlers of the run. */
        dlock_release_all(lks, nnames);
        tool_err("exec", "%s before %s could start: lock released",
                 strsignal(wait_signal), argv[optind]);
        code = 128 + wait_signal;
        goto out;
    }
    r.gs.argv = argv + optind;
    r.gs.kill_after_ms = kill_after;
    code = run_command(&r, argv[optind]);

    for (size_t i = nnames; i-- > 0;) {
        rc = dlock_release(lks[i]);
        if (r.lost || rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER) {
            if (rc != DLOCK_OK && !r.lost)
                tool_err("exec", "%s", dlock_lock_errmsg(lks[i]));
            code = EXIT_LOST;
        } else if (rc != DLOCK_OK) {
            /* The command and all it started have ended; the release
             * itself failed, and the server frees the lock when its lease
             * or connection ends. */
            tool_err("exec", "%s", dlock_lock_errmsg(lks[i]));
        }
    }
out:
    for (size_t i = 0; i < nnames; i++)
        dlock_lock_free(lks[i]);
    dlock_client_close(c);
    free(r.inherited.fds);
    free(uri_pw);
    return code;
}

const struct tool_cmd tool_exec = {
    "exec", "run a command while holding a lock (flock(1) across machines)",
    exec_run, exec_help,
};

/* ---- the same run for `dlock elect` (exec_run.h) ---------------------------- */

static struct run shared_run;

bool exec_run_begin(const char *sub)
{
    run_sub = sub;
    if (!start_state(&shared_run))
        return false;
    if (pipe2(events, O_CLOEXEC | O_NONBLOCK) != 0) {
        tool_err(sub, "pipe: %s", strerror(errno));
        free(shared_run.inherited.fds);
        shared_run.inherited.fds = NULL;
        return false;
    }
    return true;
}

void exec_run_wait_signals(dlock_client *c)
{
    catch_wait_signals(&shared_run, c);
}

int exec_run_wait_signal(void)
{
    return wait_signal;
}

int exec_run_command(char **argv, uint32_t kill_after_ms, bool *lost)
{
    int code;

    catch_signals(&shared_run);
    if (wait_signal != 0) /* between the win and the handlers of the run */
        return 128 + wait_signal;
    shared_run.gs.argv = argv;
    shared_run.gs.kill_after_ms = kill_after_ms;
    code = run_command(&shared_run, argv[0]);
    *lost = shared_run.lost;
    return code;
}

void exec_run_end(void)
{
    free(shared_run.inherited.fds);
    shared_run.inherited.fds = NULL;
}
