/*
 * exec_guard.c: the guard process of `dlock exec`, and the start of the
 * command under it. cmd_exec.c takes the lock, forks the guard and talks to
 * it; this file holds what runs in the guard and in the command before its
 * exec.
 *
 * Why a guard: the command must never run without the lock, however dlock
 * ends. dlock forks the guard without exec, so the guard holds a copy of
 * every descriptor dlock has: the lock file's locked descriptor and the
 * connections that hold connection-bound locks (flock(1)'s command keeps the
 * locked descriptor the same way). The guard is a child subreaper, so
 * whatever the command starts stays below it even when its parent dies (a
 * daemon's double fork, setsid): the guard can always name every process
 * the command started by walking /proc's children lists down from itself.
 * If dlock dies in any way, the guard sees EOF on dlock's pipe, SIGKILLs
 * every process below it, reaps them all and only then exits: file and
 * connection-bound locks are freed after that, and a lease expires only
 * after its lease anyway. When the command exits by itself, what it left
 * running gets SIGTERM (SIGKILL after kill_after) the same way before dlock
 * releases the lock.
 *
 * The command stays in dlock's process group, the shell's job, as under
 * flock(1): the terminal, Ctrl-C, Ctrl-Z and pipelines work as without
 * dlock. The guard leaves for a session of its own, so a SIGKILL to the
 * whole job (a supervisor, timeout -s KILL) leaves it alive to clean up.
 *
 * The guard is a forked copy of a multithreaded process: it makes system
 * calls only (no malloc, no stdio, no dlock call) and ends in _exit, so no
 * atexit handler or leak check runs in it.
 *
 * Divisions: helpers and /proc; the command's start; the guard.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdalign.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec_guard.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

const int guard_signals[GUARD_NSIGNALS] = {
    SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE,
    SIGTSTP, SIGTTIN, SIGTTOU, SIGCHLD,
};

/* ---- helpers and /proc -------------------------------------------------- */

int64_t guard_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void send_msg(int fd, int kind, int a, int b)
{
    struct guard_msg m = {kind, a, b};
    ssize_t w;

    do
        w = write(fd, &m, sizeof m);
    while (w < 0 && errno == EINTR);
    /* EPIPE: dlock is gone, which the command pipe's EOF tells too. */
}

/* Read the pids in a /proc/.../task/TID/children file into out (at most
 * cap). Returns how many, or -1 if the file cannot be opened (a kernel
 * without CONFIG_PROC_CHILDREN). */
static int read_children(const char *path, pid_t *out, int cap)
{
    char buf[512];
    long cur = -1;
    int fd, n = 0;
    ssize_t got;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (n < cap) {
        got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got && n < cap; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                cur = (cur < 0 ? 0 : cur * 10) + (buf[i] - '0');
            } else if (cur >= 0) {
                out[n++] = (pid_t)cur;
                cur = -1;
            }
        }
    }
    if (cur >= 0 && n < cap)
        out[n++] = (pid_t)cur;
    close(fd);
    return n;
}

static char *put_str(char *p, const char *s)
{
    while (*s != '\0')
        *p++ = *s++;
    return p;
}

static char *put_num(char *p, long v)
{
    char t[24];
    int n = 0;

    do
        t[n++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (n > 0)
        *p++ = t[--n];
    return p;
}

/* A record of getdents64(2). */
struct dirent64_raw {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Append the children of every thread of process pid to out[n..cap), and
 * pid as their parent to parents[n..] when parents is not NULL. Returns
 * the new n. */
static int add_children(pid_t pid, pid_t *out, pid_t *parents, int n,
                        int cap)
{
    alignas(struct dirent64_raw) char buf[1024];
    char path[96], *task, *end;
    int dfd;
    long got;

    task = put_str(put_num(put_str(path, "/proc/"), pid), "/task");
    *task = '\0';
    dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return n; /* gone meanwhile */
    while (n < cap &&
           (got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got && n < cap;) {
            struct dirent64_raw *d = (void *)(buf + off);
            int k;

            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9' ||
                strlen(d->d_name) > 20)
                continue;
            end = put_str(put_str(put_str(task, "/"), d->d_name), "/children");
            *end = '\0';
            k = read_children(path, out + n, cap - n);
            for (int j = 0; parents != NULL && j < k; j++)
                parents[n + j] = pid;
            if (k > 0)
                n += k;
        }
    }
    close(dfd);
    return n;
}

int guard_descendants(pid_t root, pid_t *out, pid_t *parents, int cap)
{
    int n = add_children(root, out, parents, 0, cap);

    for (int i = 0; i < n && n < cap; i++)
        n = add_children(out[i], out, parents, n, cap);
    return n;
}

/* ---- the command's start ------------------------------------------------ */

/* Mark descriptors lo..hi close-on-exec. */
static void cloexec_range(unsigned int lo, unsigned int hi)
{
    struct rlimit rl;
    unsigned int top;

#ifdef SYS_close_range
    if (syscall(SYS_close_range, lo, hi, CLOSE_RANGE_CLOEXEC) == 0)
        return;
#endif
    /* Before Linux 5.11: one fcntl per possible descriptor. */
    top = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < top)
        top = (unsigned int)rl.rlim_cur;
    for (unsigned int fd = lo; fd <= hi && fd < top; fd++) {
        int fl = fcntl((int)fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
    }
}

/* The command gets the descriptors dlock was started with and no other:
 * not the lock file, not a server connection (whatever the backend's
 * flags), not dlock's pipes. */
static void cloexec_dlocks_own(const struct guard_setup *s)
{
    unsigned int lo = 0;

    for (size_t i = 0; i < s->n_inherited; i++) {
        unsigned int fd = (unsigned int)s->inherited[i];
        if (fd > lo)
            cloexec_range(lo, fd - 1);
        lo = fd + 1;
    }
    cloexec_range(lo, ~0U);
}

/* In the child of the guard's fork: SIGKILL when the guard dies (set, then
 * checked, so a guard that died before is noticed too), dlock's signal
 * state from its start, then the command. The exec's errno goes back on
 * `report`, which exec closes on success. */
__attribute__((noreturn)) static void
command_start(const struct guard_setup *s, pid_t guard, int report)
{
    struct sigaction sa;
    int e;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != guard)
        _exit(127);
    cloexec_dlocks_own(s);
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < GUARD_NSIGNALS; i++) {
        sa.sa_handler = s->ignored[i] ? SIG_IGN : SIG_DFL;
        sigaction(guard_signals[i], &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, &s->mask, NULL);
    execvp(s->argv[0], s->argv);
    e = errno;
    if (write(report, &e, sizeof e) < 0) {
        /* The exit status says it all the same. */
    }
    _exit(e == ENOENT ? 127 : 126);
}

/* ---- the guard ---------------------------------------------------------- */

enum guard_phase {
    RUNNING,     /* the command runs */
    TERMINATING, /* SIGTERM sent; SIGKILL at kill_at */
    KILLING,     /* SIGKILL to all, until none is left */
};

#define GUARD_MAX_WALK 4096

struct guard {
    const struct guard_setup *s;
    pid_t self, cmd;
    bool cmd_done;   /* reaped; wstatus is its wait status */
    bool dlock_gone; /* EOF on the command pipe */
    bool can_list;   /* the kernel has /proc's children files */
    int wstatus;
    enum guard_phase phase;
    int64_t kill_at, killing_since;
    pid_t walk[GUARD_MAX_WALK]; /* the processes below the guard */
    pid_t parent[GUARD_MAX_WALK]; /* walk[i]'s parent */
    pid_t seen[1024];           /* those a SIGTERM pass has seen */
    int seen_pass[1024];        /* the pass that sent it SIGTERM; 0 spared */
    int n_seen, pass;
};

/* Every process below the guard gets sig. Without /proc's children files
 * the guard can name the command only. */
static void signal_all(struct guard *g, int sig)
{
    int n = guard_descendants(g->self, g->walk, NULL, GUARD_MAX_WALK);

    for (int i = 0; i < n; i++)
        kill(g->walk[i], sig);
    if (!g->can_list && !g->cmd_done)
        kill(g->cmd, sig);
}

/* Where c is in g->seen, or -1. */
static int seen_at(const struct guard *g, pid_t c)
{
    for (int i = 0; i < g->n_seen; i++)
        if (g->seen[i] == c)
            return i;
    return -1;
}

/*
 * SIGTERM (and SIGCONT, or a stopped process would not see it) to each
 * process below the guard, in passes until the command and all it started
 * are gone. The first pass signals every process. A later pass signals a
 * process it has not seen only if its parent is the guard (an orphan
 * reparented to the guard, which a pass can miss while its parent forks it
 * and exits) or was signalled by this same pass (a process forked before
 * its parent got SIGTERM): a new child of a process signalled in an earlier
 * pass is that process's answer to SIGTERM (a shell trap's `rm`, a
 * server's shutdown helper), spared as systemd spares it, with all below
 * it; SIGKILL after kill_after ends whatever is left.
 */
static void term_new(struct guard *g)
{
    int n = guard_descendants(g->self, g->walk, g->parent, GUARD_MAX_WALK);

    g->pass++;
    for (int i = 0; i < n; i++) {
        int at, p;
        bool term;

        if (seen_at(g, g->walk[i]) >= 0)
            continue;
        p = seen_at(g, g->parent[i]);
        /* A parent the full list could not hold: signal, as before it. */
        term = g->pass == 1 || g->parent[i] == g->self || p < 0 ||
               g->seen_pass[p] == g->pass;
        at = g->n_seen;
        if (at < (int)(sizeof g->seen / sizeof g->seen[0])) {
            g->seen[at] = g->walk[i];
            g->seen_pass[at] = term ? g->pass : 0;
            g->n_seen++;
        }
        if (term) {
            kill(g->walk[i], SIGTERM);
            kill(g->walk[i], SIGCONT);
        }
    }
    if (!g->can_list && !g->cmd_done) { /* no /proc: the command at least */
        kill(g->cmd, SIGTERM);
        kill(g->cmd, SIGCONT);
    }
}

/* Move on to TERMINATING or KILLING (never back). */
static void escalate(struct guard *g, enum guard_phase to)
{
    if (to <= g->phase)
        return;
    g->phase = to;
    if (to == TERMINATING) {
        g->kill_at = guard_now_ms() + g->s->kill_after_ms;
        term_new(g);
    } else {
        g->killing_since = guard_now_ms();
        signal_all(g, SIGKILL);
    }
}

/* Reap what died; the command's end starts the clean-up of what it left. */
static void reap(struct guard *g)
{
    pid_t r;
    int st;

    while ((r = waitpid(-1, &st, WNOHANG)) > 0 ||
           (r < 0 && errno == EINTR)) {
        if (r == g->cmd) {
            g->cmd_done = true;
            g->wstatus = st;
            escalate(g, TERMINATING);
        }
    }
}

/* Are the command and everything below it dead and reaped? No child at
 * all means nothing is left anywhere below: orphans come to us. */
static bool finished(struct guard *g)
{
    if (!g->cmd_done)
        return false;
    if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
        return true;
    /* Without /proc's children files the guard cannot name what is left;
     * give up a second after SIGKILL rather than wait for it forever. */
    return !g->can_list && g->phase == KILLING &&
           guard_now_ms() - g->killing_since > 1000;
}

static void read_commands(struct guard *g)
{
    struct guard_msg m[16];
    ssize_t got;

    got = read(g->s->cmd_in, m, sizeof m);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (got <= 0) { /* dlock is gone: nothing may run on without the lock */
        g->dlock_gone = true;
        escalate(g, KILLING);
        return;
    }
    for (size_t i = 0; i < (size_t)got / sizeof m[0]; i++) {
        switch (m[i].kind) {
        case GUARD_SIGNAL:
            signal_all(g, m[i].a);
            signal_all(g, SIGCONT);
            break;
        case GUARD_TERMINATE:
            escalate(g, TERMINATING);
            break;
        default:
            break;
        }
    }
}

/* If the exec failed, say why (once the command is dead, the pipe has its
 * errno or EOF, so this does not block). */
static void report_exec(struct guard *g, int *execfd)
{
    ssize_t got;
    int e;

    do
        got = read(*execfd, &e, sizeof e);
    while (got < 0 && errno == EINTR);
    if (got == (ssize_t)sizeof e && !g->dlock_gone)
        send_msg(g->s->report_out, GUARD_EXEC_FAILED, e, 0);
    close(*execfd);
    *execfd = -1;
}

static void guard_loop(struct guard *g, int sigfd, int execfd)
{
    for (;;) {
        struct pollfd p[3];
        struct signalfd_siginfo ssi;
        int n = 0, ci = -1, ei = -1, timeout = -1;

        p[n++] = (struct pollfd){sigfd, POLLIN, 0};
        if (!g->dlock_gone) {
            ci = n;
            p[n++] = (struct pollfd){g->s->cmd_in, POLLIN, 0};
        }
        if (execfd >= 0) {
            ei = n;
            p[n++] = (struct pollfd){execfd, POLLIN, 0};
        }
        /* Orphans come to us without a SIGCHLD: look again every 50 ms. */
        if (g->phase != RUNNING)
            timeout = 50;
        if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR)
            timeout = 50; /* cannot happen with these arguments; go on */
        if (ei >= 0 && p[ei].revents != 0)
            report_exec(g, &execfd);
        if (ci >= 0 && p[ci].revents != 0)
            read_commands(g);
        while (read(sigfd, &ssi, sizeof ssi) > 0)
            ;
        reap(g);
        if (g->phase == TERMINATING && guard_now_ms() >= g->kill_at)
            escalate(g, KILLING);
        else if (g->phase == TERMINATING)
            term_new(g);
        else if (g->phase == KILLING)
            signal_all(g, SIGKILL);
        if (finished(g))
            break;
    }
    if (execfd >= 0)
        report_exec(g, &execfd);
    if (!g->dlock_gone)
        send_msg(g->s->report_out, GUARD_DONE, g->wstatus, 0);
}

/* The guard's state: static, so its walk buffers are not on the stack (the
 * guard is a process of its own; dlock never touches this). */
static struct guard guard;

void guard_main(const struct guard_setup *s)
{
    struct guard *g = &guard;
    struct sigaction ign;
    sigset_t chld;
    int execp[2], sigfd, probe;

    close(s->dlock_ends[0]); /* so EOF on cmd_in means dlock is gone */
    close(s->dlock_ends[1]);
    memset(g, 0, sizeof *g);
    g->s = s;
    g->self = getpid();
    prctl(PR_SET_NAME, "exec-guard");
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    for (int i = 0; i < GUARD_NSIGNALS; i++)
        if (guard_signals[i] != SIGCHLD)
            sigaction(guard_signals[i], &ign, NULL);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_SETMASK, &chld, NULL);
    sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 ||
        pipe2(execp, O_CLOEXEC) != 0) {
        send_msg(s->report_out, GUARD_FORK_FAILED, errno, 0);
        _exit(1);
    }
    probe = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
    g->can_list = probe >= 0;
    if (probe >= 0)
        close(probe);
    g->cmd = fork();
    if (g->cmd == 0) {
        close(execp[0]);
        command_start(s, g->self, execp[1]);
    }
    if (g->cmd < 0) {
        send_msg(s->report_out, GUARD_FORK_FAILED, errno, 0);
        _exit(1);
    }
    close(execp[1]);
    /* Now that the command has dlock's process group, leave it for a
     * session of our own: a signal to dlock's whole job reaches dlock,
     * which decides, and a SIGKILL to it leaves the guard alive to clean
     * up. In another session, the guard is no parent that would keep the
     * job's group from being orphaned, so the kernel treats the job's stop
     * signals as it would without dlock. */
    setsid();
    guard_loop(g, sigfd, execp[0]);
    _exit(0);
}
