/*
 * cmd_exec.c: `dlock exec`, flock(1) across machines. Take the lock, run the
 * command, release when it exits. The watchdog keeps the lease alive; if the
 * lock is lost meanwhile the command gets SIGTERM (then SIGKILL after
 * --kill-after) and dlock exits 75, because its work is no longer protected.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

/* Written by the watchdog's on_lost and by signal handlers; read by the
 * main loop. One byte says which: 'L' lost, or the signal number. */
static int events[2] = {-1, -1};

static void exec_help(void)
{
    printf(
        "usage: dlock exec [OPTIONS] NAME [--] COMMAND [ARG...]\n"
        "\n"
        "Run COMMAND while holding the lock NAME; release it when COMMAND "
        "exits.\n"
        "\n"
        "  --uri URI                 backend URI (default: $DLOCK_URI, "
        "else file://)\n"
        "  --timeout DUR             wait at most DUR for the lock; 0 tries "
        "once\n"
        "                            (default: wait forever)\n"
        "  --lease DUR               lease to hold and renew (default: the "
        "URI's\n"
        "                            lease=, else 30s)\n"
        "  --shared                  take a shared (reader) lock\n"
        "  --conflict-exit-code N    exit code when busy or timed out "
        "(default 1)\n"
        "  --kill-after DUR          after a lost lock, SIGKILL the command "
        "if it\n"
        "                            has not exited DUR after SIGTERM "
        "(default 10s)\n"
        "  -q, --quiet               no message on conflict\n"
        "\n"
        "Durations: 250ms, 5s, 1.5s, 2m, 1h, or 0.\n"
        "COMMAND sees DLOCK_NAME, DLOCK_FENCE (the fencing token: pass it to "
        "the\nstorage you write to) and DLOCK_OWNER in its environment.\n"
        "\n"
        "exit status: COMMAND's own (128+N if killed by signal N); 1 (or "
        "N) busy or\ntimed out; 64 bad option or URI; 69 the lock service "
        "cannot be reached;\n70 other failure; 75 the lock was lost while "
        "COMMAND ran; 126/127\nCOMMAND not executable / not found.\n");
}

static void on_lost(dlock_lock *lk, int code, const char *why, void *payload)
{
    char b = 'L';

    (void)lk;
    (void)code;
    (void)payload;
    fprintf(stderr, "dlock exec: lock lost: %s\n", why);
    if (write(events[1], &b, 1) < 0) {
        /* The pipe is non-blocking and never full in practice; nothing
         * else can be done from here. */
    }
}

static void on_signal(int sig)
{
    char b = (char)sig;
    int saved = errno;

    if (write(events[1], &b, 1) < 0) {
        /* As above. */
    }
    errno = saved;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int child_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_SOFTWARE;
}

/* Fork and exec argv; 126/127 come back through a CLOEXEC pipe. */
static pid_t spawn(char **argv, int *exec_errno)
{
    int p[2];
    pid_t pid;
    ssize_t got;

    *exec_errno = 0;
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int e;
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        close(p[0]);
        execvp(argv[0], argv);
        e = errno;
        if (write(p[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(e == ENOENT ? 127 : 126);
    }
    close(p[1]);
    if (pid > 0) {
        while ((got = read(p[0], exec_errno, sizeof *exec_errno)) < 0 &&
               errno == EINTR)
            ;
        if (got != sizeof *exec_errno)
            *exec_errno = 0;
    }
    close(p[0]);
    return pid;
}

/* Wait for the child, forwarding signals, reacting to a lost lock. */
static int supervise(pid_t pid, uint32_t kill_after_ms, bool *lost)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int64_t kill_at = -1;
    int status;

    for (;;) {
        struct pollfd fds[2] = {{events[0], POLLIN, 0}, {pidfd, POLLIN, 0}};
        int timeout = pidfd >= 0 ? -1 : 50; /* old kernels: poll waitpid */
        char b;
        pid_t w;

        if (kill_at >= 0) {
            int64_t left = kill_at - now_ms();
            if (left <= 0) {
                kill(pid, SIGKILL);
                kill_at = -1;
            } else if (timeout < 0 || left < timeout) {
                timeout = (int)left;
            }
        }
        if (poll(fds, pidfd >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & POLLIN) {
            while (read(events[0], &b, 1) == 1) {
                if (b == 'L') {
                    if (!*lost) {
                        *lost = true;
                        kill(pid, SIGTERM);
                        kill_at = now_ms() + kill_after_ms;
                    }
                } else {
                    kill(pid, (int)b); /* pass SIGTERM, SIGINT, SIGHUP on */
                }
            }
        }
        w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            status = EXIT_SOFTWARE << 8;
            break;
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    return status;
}

static int exec_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, 'u'},
        {"timeout", required_argument, NULL, 't'},
        {"lease", required_argument, NULL, 'l'},
        {"shared", no_argument, NULL, 's'},
        {"conflict-exit-code", required_argument, NULL, 'E'},
        {"kill-after", required_argument, NULL, 'k'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *uri = NULL, *name;
    uint32_t timeout = DLOCK_WAIT_FOREVER, lease = 0, kill_after = 10000;
    unsigned long conflict = EXIT_CONFLICT;
    bool quiet = false, lost = false;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    char fence[32];
    int opt, rc, exec_errno, status, code;
    pid_t pid;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
        switch (opt) {
        case 'u':
            uri = optarg;
            break;
        case 't':
            if (!tool_duration("exec", "--timeout", optarg, &timeout))
                return EXIT_USAGE;
            break;
        case 'l':
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
        case 'k':
            if (!tool_duration("exec", "--kill-after", optarg, &kill_after))
                return EXIT_USAGE;
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            exec_help();
            return 0;
        default:
            tool_err("exec", "unknown option '%s' (try `dlock exec --help`)",
                     argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        tool_err("exec", "missing NAME and COMMAND (try `dlock exec --help`)");
        return EXIT_USAGE;
    }
    name = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        tool_err("exec", "missing COMMAND after NAME");
        return EXIT_USAGE;
    }

    if (pipe2(events, O_CLOEXEC | O_NONBLOCK) != 0) {
        tool_err("exec", "pipe: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }
    rc = dlock_client_open(&c, uri, NULL);
    if (rc != DLOCK_OK) {
        tool_err("exec", "%s", dlock_client_errmsg(c));
        dlock_client_close(c);
        return tool_exit_for(rc);
    }
    lo.lease_ms = lease;
    lo.on_lost = on_lost;
    rc = dlock_lock_new(&lk, c, name, &lo);
    if (rc != DLOCK_OK) {
        tool_err("exec", "NAME: %s", dlock_client_errmsg(c));
        dlock_client_close(c);
        return tool_exit_for(rc);
    }
    rc = dlock_acquire(lk, timeout);
    if (rc != DLOCK_OK) {
        code = rc == DLOCK_EBUSY || rc == DLOCK_ETIMEDOUT ? (int)conflict
                                                          : tool_exit_for(rc);
        if (!quiet || code != (int)conflict)
            tool_err("exec", "%s", dlock_lock_errmsg(lk));
        dlock_lock_free(lk);
        dlock_client_close(c);
        return code;
    }

    snprintf(fence, sizeof fence, "%" PRIu64, dlock_fence(lk));
    setenv("DLOCK_NAME", name, 1);
    setenv("DLOCK_FENCE", fence, 1);
    setenv("DLOCK_OWNER", dlock_lock_owner(lk), 1);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGHUP, on_signal);

    pid = spawn(argv + optind, &exec_errno);
    if (pid < 0 || exec_errno != 0) {
        int e = pid < 0 ? errno : exec_errno;
        tool_err("exec", "%s: %s", argv[optind], strerror(e));
        if (pid > 0)
            waitpid(pid, NULL, 0);
        code = pid < 0 ? EXIT_SOFTWARE : e == ENOENT ? 127 : 126;
    } else {
        status = supervise(pid, kill_after, &lost);
        code = child_status(status);
    }

    rc = dlock_release(lk);
    if (lost || rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER) {
        if (!lost)
            tool_err("exec", "%s", dlock_lock_errmsg(lk));
        code = EXIT_LOST;
    } else if (rc != DLOCK_OK) {
        /* The command ran protected; the release itself failed, and the
         * server frees the lock when its lease or connection ends. */
        tool_err("exec", "%s", dlock_lock_errmsg(lk));
    }
    dlock_lock_free(lk);
    dlock_client_close(c);
    return code;
}

const struct tool_cmd tool_exec = {
    "exec", "run a command while holding a lock (flock(1) across machines)",
    exec_run, exec_help,
};
