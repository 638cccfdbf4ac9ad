/*
 * cmd_demo.c: `dlock demo inventory`, the stock-deduction story. Worker
 * processes sell items from one shared stock (a counter in a file): read
 * it, do a little work, write it back one lower. Without a lock they sell
 * more than there is; a mutex inside each process does not help, since the
 * workers are separate processes; a distributed lock makes the count exact.
 * The optimistic strategy takes no lock for the sale at all: it reads the
 * count and its version, works, and writes only if the version has not
 * moved meanwhile (compare-and-set), else it starts the sale again: on the
 * file, and for each redis:// URI on a stock kept in Redis, with WATCH and
 * MULTI/EXEC (Redis's own optimistic transactions): that row speaks Redis
 * itself, so the program dlock-pitfalls runs it (pitfalls_watch.c), as it
 * runs `dlock demo pitfalls`: this command links no client library.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <libgen.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAX_URIS 16
#define THREADS_PER_WORKER 2

enum guard {
    GUARD_NONE,
    GUARD_MUTEX,
    GUARD_OPTIMISTIC, /* a version compare-and-set on the file */
    GUARD_DLOCK,
    GUARD_WATCH, /* optimistic, on a stock in Redis: WATCH, MULTI/EXEC */
};

struct worker {
    int stock_fd;
    const char *path;   /* the stock file: GUARD_OPTIMISTIC opens its own */
    long conflicts;     /* GUARD_OPTIMISTIC, _WATCH: sales started again */
    enum guard guard;
    pthread_mutex_t mutex; /* GUARD_MUTEX: local to one worker process */
    dlock_client *c;       /* GUARD_DLOCK */
    const char *name;
    long sold;
    uint64_t max_fence; /* GUARD_DLOCK: the highest token seen */
    int failure;        /* a dlock error code, or 0 */
    char errmsg[256];
};

static void demo_help(void)
{
    printf(
        "usage: dlock demo inventory [--uri URI]... [--workers N] [--stock "
        "S]\n"
        "       dlock demo pitfalls [--uri URI]... [--only LIST] "
        "[--waiters N]\n"
        "\n"
        "demos: inventory, pitfalls (`dlock demo pitfalls --help` describes "
        "the\nsecond; it runs the program dlock-pitfalls, in its own "
        "package).\n"
        "\n"
        "inventory: worker processes (2 threads each) sell S items from one "
        "shared\nstock: with no lock, with a mutex in each process, with "
        "no lock but a\nversion compare-and-set that retries on conflict "
        "(optimistic), and with a\ndistributed lock on each URI (default: "
        "$DLOCK_URI, else file://); for a\nredis:// URI also optimistic on a "
        "stock kept in Redis (WATCH, MULTI/EXEC;\nrun by dlock-pitfalls).\nPrints how many were "
        "sold (more than S means oversold) and the optimistic\nrows' "
        "conflicts, retries per sale and time per sale.\n"
        "\n"
        "  --uri URI      a backend to show (repeatable)\n"
        "  --workers N    worker processes (default 4)\n"
        "  --stock S      items in stock (default 200)\n"
        "\n"
        "exit status: 0 when the optimistic rows and every distributed lock "
        "sold\nexactly S; 1 otherwise; 64 bad option; 69 a backend cannot "
        "be reached,\nor dlock-pitfalls (the row on a stock in Redis) is "
        "missing or cannot run.\n");
}

static long stock_read(int fd)
{
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);

    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

/* The stock file holds "count version": the version counts the writes,
 * for the optimistic strategy; the others read the count alone. */
static unsigned long stock_version(int fd)
{
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);

    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strtoul(buf + strcspn(buf, " "), NULL, 10);
}

static void stock_write(int fd, long v)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%-20ld %-20lu\n", v,
                     stock_version(fd) + 1);

    if (pwrite(fd, buf, (size_t)n, 0) != n)
        perror("dlock demo: pwrite");
}

/*
 * One optimistic sale on fd (this thread's own open file description):
 * read count and version with no lock, work, then compare-and-set. The
 * compare-and-set is one short atomic step, as a database's `UPDATE stock
 * SET n = n - 1, version = version + 1 WHERE version = ?` is: here an OFD
 * lock held only around "is the version still v? then write", never
 * during the work. 1 sold, 0 out of stock, -1 a conflict (retry), -2 the
 * file cannot be locked.
 */
static int sell_optimistic(int fd, const struct timespec *work)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    long stock = stock_read(fd);
    unsigned long v = stock_version(fd);
    int rc;

    if (stock <= 0)
        return 0;
    nanosleep(work, NULL);
    if (fcntl(fd, F_OFD_SETLKW, &fl) != 0)
        return -2;
    /* Both again, now that no one can write: an unlocked read may have
     * caught a write half done, which then shows here as a change. */
    rc = stock_version(fd) == v && stock_read(fd) == stock ? 1 : -1;
    if (rc == 1)
        stock_write(fd, stock - 1);
    fl.l_type = F_UNLCK;
    fcntl(fd, F_OFD_SETLK, &fl);
    return rc;
}

static void *sell(void *arg)
{
    struct worker *w = arg;
    struct timespec work = {0, 200000}; /* 0.2 ms between read and write */
    dlock_lock *lk = NULL;
    uint64_t max_fence = 0;
    long sold = 0, conflicts = 0;
    int rc;

    if (w->guard == GUARD_OPTIMISTIC) {
        /* An open file description of this thread's own: OFD locks
         * exclude threads too. */
        int fd = open(w->path, O_RDWR | O_CLOEXEC);
        char err[256] = "the compare-and-set failed";
        if (fd < 0)
            snprintf(err, sizeof err, "%s: %s", w->path, strerror(errno));
        rc = fd >= 0 ? 1 : -2;
        while (rc != 0 && rc != -2) {
            rc = sell_optimistic(fd, &work);
            sold += rc == 1;
            conflicts += rc == -1;
        }
        if (fd >= 0)
            close(fd);
        pthread_mutex_lock(&w->mutex);
        if (rc == -2 && w->failure == 0) {
            w->failure = DLOCK_ERROR;
            snprintf(w->errmsg, sizeof w->errmsg, "%s", err);
        }
        w->sold += sold;
        w->conflicts += conflicts;
        pthread_mutex_unlock(&w->mutex);
        return NULL;
    }

    if (w->guard == GUARD_DLOCK &&
        (rc = dlock_lock_new(&lk, w->c, w->name, NULL)) != DLOCK_OK) {
        w->failure = rc;
        snprintf(w->errmsg, sizeof w->errmsg, "%s",
                 dlock_client_errmsg(w->c));
        return NULL;
    }
    for (;;) {
        long stock;
        if (w->guard == GUARD_MUTEX)
            pthread_mutex_lock(&w->mutex);
        if (w->guard == GUARD_DLOCK &&
            (rc = dlock_acquire(lk, 60000)) != DLOCK_OK) {
            w->failure = rc;
            snprintf(w->errmsg, sizeof w->errmsg, "%s", dlock_lock_errmsg(lk));
            break;
        }
        if (w->guard == GUARD_DLOCK && dlock_fence(lk) > max_fence)
            max_fence = dlock_fence(lk);
        stock = stock_read(w->stock_fd);
        if (stock > 0) {
            nanosleep(&work, NULL);
            stock_write(w->stock_fd, stock - 1);
            sold++;
        }
        if (w->guard == GUARD_DLOCK)
            dlock_release(lk);
        if (w->guard == GUARD_MUTEX)
            pthread_mutex_unlock(&w->mutex);
        if (stock <= 0)
            break;
    }
    dlock_lock_free(lk);
    pthread_mutex_lock(&w->mutex);
    w->sold += sold;
    if (max_fence > w->max_fence)
        w->max_fence = max_fence;
    pthread_mutex_unlock(&w->mutex);
    return NULL;
}

/* One worker process: its own client, its own threads; reports on fd. */
static void worker_main(int stock_fd, const char *path, enum guard guard,
                        const char *uri, const char *name, int report)
{
    struct worker w;
    pthread_t t[THREADS_PER_WORKER];
    dlock_info info = DLOCK_INFO_INIT;
    const char *mode = "-";
    char line[600];
    int n;

    memset(&w, 0, sizeof w);
    w.stock_fd = stock_fd;
    w.path = path;
    w.guard = guard;
    w.name = name;
    pthread_mutex_init(&w.mutex, NULL);
    if (guard == GUARD_DLOCK &&
        (w.failure = dlock_client_open(&w.c, uri, NULL)) != DLOCK_OK)
        snprintf(w.errmsg, sizeof w.errmsg, "%s", dlock_client_errmsg(w.c));
    if (w.failure == 0 && w.c != NULL &&
        dlock_client_info(w.c, &info) == DLOCK_OK)
        mode = info.mode;
    if (w.failure == 0) {
        for (int i = 0; i < THREADS_PER_WORKER; i++)
            pthread_create(&t[i], NULL, sell, &w);
        for (int i = 0; i < THREADS_PER_WORKER; i++)
            pthread_join(t[i], NULL);
    }
    /* "sold failure mode max_fence conflicts errmsg" */
    n = snprintf(line, sizeof line, "%ld %d %s %llu %ld %s\n", w.sold,
                 w.failure, mode, (unsigned long long)w.max_fence,
                 w.conflicts, w.errmsg);
    dlock_client_close(w.c);
    if (write(report, line, (size_t)n) != n)
        _exit(EXIT_SOFTWARE);
    _exit(0);
}

struct outcome {
    long sold;
    int failure;
    char errmsg[256];
    char mode[64];       /* the backend's mode, as a worker saw it */
    uint64_t max_fence;  /* the highest fencing token handed out */
    long conflicts;      /* optimistic: sales started again */
    double seconds;
};

/* ---- the helper program dlock-pitfalls ---------------------------------- */

#define HELPER "dlock-pitfalls"
#define HELPER_PACKAGE "dlock-pitfalls" /* the Debian package that has it */

/*
 * Where dlock-pitfalls is: in $DLOCK_LIBEXEC_DIR if that is set and has it,
 * else beside this dlock (a build tree: build/tools/), else in the
 * libexecdir this dlock was configured with. True with its path in out;
 * false, with the installed path in out, when none of them has it.
 */
static bool helper_path(char *out, size_t cap)
{
    const char *env = secure_getenv("DLOCK_LIBEXEC_DIR");
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

    if (env != NULL && env[0] != '\0') {
        snprintf(out, cap, "%s/%s", env, HELPER);
        if (access(out, X_OK) == 0)
            return true;
    }
    if (n > 0) {
        self[n] = '\0';
        snprintf(out, cap, "%s/%s", dirname(self), HELPER);
        if (access(out, X_OK) == 0)
            return true;
    }
    snprintf(out, cap, "%s/%s", DLOCK_LIBEXECDIR, HELPER);
    return access(out, X_OK) == 0;
}

/* Why the helper at path did not run, in words for a user. */
static void helper_missing(const char *path, bool found, char *msg,
                           size_t cap)
{
    snprintf(msg, cap,
             "%s %s; it is the program that speaks Redis and ZooKeeper "
             "directly, in the Debian package " HELPER_PACKAGE
             " (or set $DLOCK_LIBEXEC_DIR to its directory)",
             path, found ? "cannot run (is its client library missing?)"
                         : "is not installed");
}

/*
 * Run the helper with argv (argv[0] is replaced) on stdin, stdout (out_fd
 * if >= 0) and stderr as they are; its pid, or -1 when it is not found
 * (*found false). Its child exits 127 when exec fails, as the dynamic
 * loader does when a library it needs is missing.
 */
static pid_t helper_spawn(char **argv, int out_fd, char *path, size_t cap,
                          bool *found)
{
    pid_t pid;

    if (!(*found = helper_path(path, cap)))
        return -1;
    fflush(stdout);
    fflush(stderr);
    if ((pid = fork()) == 0) {
        if (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0)
            _exit(127);
        argv[0] = (char *)HELPER;
        execv(path, argv);
        _exit(127);
    }
    return pid;
}

/* `dlock demo pitfalls ARGS`: the helper, with the same ARGS; its exit
 * status, or 69 (printed) when it is missing or cannot run. */
static int run_pitfalls(int argc, char **argv)
{
    char path[PATH_MAX], msg[PATH_MAX + 200];
    char **args = calloc((size_t)argc + 1, sizeof *args);
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_quit;
    bool found;
    pid_t pid;
    int st = 0;

    if (args == NULL) {
        tool_err("demo pitfalls", "out of memory");
        return EXIT_SOFTWARE;
    }
    memcpy(args, argv, (size_t)argc * sizeof *args);
    pid = helper_spawn(args, -1, path, sizeof path, &found);
    free(args);
    if (pid < 0 && found) {
        tool_err("demo pitfalls", "fork: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }
    if (pid > 0) {
        /* As system(3) does: ^C and ^\ are the helper's to act on. */
        sigaction(SIGINT, &ign, &old_int);
        sigaction(SIGQUIT, &ign, &old_quit);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        if (WIFSIGNALED(st))
            return 128 + WTERMSIG(st);
        if (WEXITSTATUS(st) != 127)
            return WEXITSTATUS(st);
    }
    helper_missing(path, found, msg, sizeof msg);
    tool_err("demo pitfalls", "%s", msg);
    return EXIT_UNAVAILABLE;
}

static int run_round(const char *dir, enum guard guard, const char *uri,
                     long stock, unsigned long workers, struct outcome *out)
{
    char path[512], name[64], helper_file[PATH_MAX];
    int fd, pipefd[2], st, helper_st = 0;
    struct timespec t0, t1;
    pid_t helper = -1;
    bool found = false;

    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/stock", dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || pipe(pipefd) != 0) {
        tool_err("demo", "%s: %s", path, strerror(errno));
        return EXIT_SOFTWARE;
    }
    stock_write(fd, stock);
    snprintf(name, sizeof name, "dlock-demo-inventory-%ld%s", (long)getpid(),
             guard == GUARD_WATCH ? ":stock" : "");
    /* A forked child must not inherit (and maybe print again) what is
     * still buffered: TSan's _exit() flushes stdio. */
    fflush(stdout);
    fflush(stderr);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (guard == GUARD_WATCH) {
        /* The helper runs the whole round: its worker processes write
         * the lines that ours do. */
        char stock_text[24], workers_text[24];
        char *argv[] = {NULL, "__inventory-watch", (char *)uri, name,
                        stock_text, workers_text, NULL};
        snprintf(stock_text, sizeof stock_text, "%ld", stock);
        snprintf(workers_text, sizeof workers_text, "%lu", workers);
        helper = helper_spawn(argv, pipefd[1], helper_file,
                              sizeof helper_file, &found);
        if (helper < 0 && found)
            tool_err("demo", "fork: %s", strerror(errno));
    }
    for (unsigned long i = 0; guard != GUARD_WATCH && i < workers; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(pipefd[0]);
            worker_main(fd, path, guard, uri, name, pipefd[1]);
        }
        if (pid < 0)
            tool_err("demo", "fork: %s", strerror(errno));
    }
    close(pipefd[1]);
    FILE *f = fdopen(pipefd[0], "r");
    char line[600];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        long sold, conflicts = 0;
        int failure, off = 0;
        unsigned long long fence = 0;
        char mode[64] = "";
        if (sscanf(line, "%ld %d %63s %llu %ld %n", &sold, &failure, mode,
                   &fence, &conflicts, &off) >= 5) {
            out->sold += sold;
            out->conflicts += conflicts;
            if (fence > out->max_fence)
                out->max_fence = fence;
            if (mode[0] != '-' && out->mode[0] == '\0')
                snprintf(out->mode, sizeof out->mode, "%s", mode);
            if (failure != 0 && out->failure == 0) {
                out->failure = failure;
                snprintf(out->errmsg, sizeof out->errmsg, "%s", line + off);
                out->errmsg[strcspn(out->errmsg, "\n")] = '\0';
            }
        }
    }
    if (f != NULL)
        fclose(f);
    for (pid_t pid; (pid = wait(&st)) > 0 || errno == EINTR;)
        if (pid == helper && pid > 0)
            helper_st = st;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->seconds = (double)(t1.tv_sec - t0.tv_sec) +
                   (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    close(fd);
    if (guard == GUARD_WATCH && out->failure == 0 &&
        (helper < 0 || !WIFEXITED(helper_st) ||
         WEXITSTATUS(helper_st) != 0)) {
        out->failure = DLOCK_ECONNECT; /* exit 69: the row cannot run */
        helper_missing(helper_file, found, out->errmsg, sizeof out->errmsg);
    }
    return 0;
}

static int demo_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, 'u'},
        {"workers", required_argument, NULL, 'w'},
        {"stock", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *uris[MAX_URIS];
    size_t nuris = 0;
    unsigned long workers = 4, stock = 200;
    char dir[] = "/tmp/dlock-demo-XXXXXX";
    int opt, status = 0;

    if (argc < 2 || tool_is_help(argv[1])) {
        demo_help();
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "pitfalls") == 0)
        return run_pitfalls(argc - 1, argv + 1);
    if (strcmp(argv[1], "inventory") != 0) {
        tool_err("demo", "no demo '%s' (there are: inventory, pitfalls)",
                 argv[1]);
        return EXIT_USAGE;
    }
    optind = 2;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 'u':
            if (nuris == MAX_URIS) {
                tool_err("demo", "--uri: at most %d", MAX_URIS);
                return EXIT_USAGE;
            }
            if (optarg[0] == '\0') {
                tool_err("demo", "--uri: empty URI");
                return EXIT_USAGE;
            }
            uris[nuris++] = optarg;
            break;
        case 'w':
            if (!tool_uint("demo", "--workers", optarg, 1, 64, &workers))
                return EXIT_USAGE;
            break;
        case 's':
            if (!tool_uint("demo", "--stock", optarg, 1, 1000000, &stock))
                return EXIT_USAGE;
            break;
        case 'h':
            demo_help();
            return 0;
        case ':':
            tool_err("demo", "%s: needs a value", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            tool_err("demo", "unknown option '%s'", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        tool_err("demo", "unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    if (nuris == 0)
        uris[nuris++] = NULL; /* $DLOCK_URI or the default */
    if (mkdtemp(dir) == NULL) {
        tool_err("demo", "mkdtemp: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }

    printf("inventory: %lu worker processes x %d threads sell from one stock "
           "of %lu items.\nA sale reads the count from a shared file, works "
           "0.2 ms, and writes\nthe count back one lower; a worker stops when "
           "the count reads 0.\n\n",
           workers, THREADS_PER_WORKER, stock);
    printf("%-44s %8s %9s %8s\n", "guard", "sold", "oversold", "seconds");
    /* The rows: three without a distributed lock, then one per URI, and
     * after a redis:// one the optimistic strategy on a stock in Redis. */
    struct {
        enum guard g;
        const char *uri;
    } rows[3 + 2 * MAX_URIS] = {{GUARD_NONE, NULL}, {GUARD_MUTEX, NULL},
                                {GUARD_OPTIMISTIC, NULL}};
    size_t nrows = 3;
    for (size_t i = 0; i < nuris; i++) {
        rows[nrows].g = GUARD_DLOCK;
        rows[nrows++].uri = uris[i];
#ifdef DLOCK_PITFALLS_REDIS
        if (uris[i] != NULL && strncmp(uris[i], "redis://", 8) == 0) {
            rows[nrows].g = GUARD_WATCH;
            rows[nrows++].uri = uris[i];
        }
#endif
    }
    int exact = 0, ran = 0;
    for (size_t i = 0; i < nrows; i++) {
        enum guard g = rows[i].g;
        const char *uri = rows[i].uri;
        char label[256], red[200];
        struct outcome o;

        if (g == GUARD_NONE)
            snprintf(label, sizeof label, "no lock");
        else if (g == GUARD_MUTEX)
            snprintf(label, sizeof label, "mutex in each process");
        else if (g == GUARD_OPTIMISTIC)
            snprintf(label, sizeof label, "optimistic: version CAS, no lock");
        else {
            bn_redact(uri, red, sizeof red); /* never print a password */
            snprintf(label, sizeof label,
                     g == GUARD_WATCH ? "optimistic on %s"
                                      : "dlock %s",
                     red);
        }
        if (run_round(dir, g, uri, (long)stock, workers, &o) != 0) {
            status = EXIT_SOFTWARE;
            break;
        }
        if (o.failure != 0) {
            printf("%-44.44s %8s %9s %8s\n    could not run: %s\n", label,
                   "-", "-", "-", o.errmsg);
            int code = tool_exit_for(o.failure);
            if (status == 0 || code == EXIT_UNAVAILABLE)
                status = code;
            continue;
        }
        long over = o.sold - (long)stock;
        printf("%-44.44s %8ld %9ld %8.2f%s\n", label, o.sold, over, o.seconds,
               g >= GUARD_OPTIMISTIC ? (over == 0 ? "  exact" : "  WRONG")
                                     : "");
        /* One line that says why the row came out as it did. */
        if (g == GUARD_NONE)
            printf("    sales overlap: two sales read the same count and "
                   "both write it back,\n    so one of them is lost: %ld "
                   "items sold that were not in stock\n", over);
        else if (g == GUARD_MUTEX)
            printf("    the mutex orders the %d threads of one process, not "
                   "the %lu processes:\n    still %ld oversold\n",
                   THREADS_PER_WORKER, workers, over);
        else if (g == GUARD_WATCH || g == GUARD_OPTIMISTIC)
            printf("    %s: %ld conflicts, %.2f retries per sale, %.0f us "
                   "per sale\n",
                   g == GUARD_WATCH
                       ? "the stock in Redis, no lock: EXEC refuses a sale "
                         "whose key was written\n    since its WATCH"
                       : "no lock during the work; a sale whose version "
                         "moved meanwhile starts\n    again",
                   o.conflicts, o.sold > 0 ? (double)o.conflicts / o.sold : 0,
                   o.sold > 0 ? o.seconds * 1e6 / (double)o.sold : 0);
        else if (over == 0 && o.max_fence > 0)
            printf("    one sale at a time across all %lu processes (mode %s; "
                   "last fencing\n    token %llu)\n",
                   workers, o.mode[0] ? o.mode : "?",
                   (unsigned long long)o.max_fence);
        else if (over == 0)
            printf("    one sale at a time across all %lu processes (mode "
                   "%s; no fencing tokens)\n",
                   workers, o.mode[0] ? o.mode : "?");
        else
            printf("    the lock let two sales overlap: %ld oversold. This "
                   "is a bug: please report it\n", over);
        if (g == GUARD_DLOCK) {
            ran++;
            exact += over == 0;
        }
        if (g >= GUARD_OPTIMISTIC && over != 0 && status == 0)
            status = 1;
    }
    if (ran > 0)
        printf("\n%d of %d distributed locks sold exactly %lu.\n", exact, ran,
               stock);
    char path[600];
    snprintf(path, sizeof path, "%s/stock", dir);
    unlink(path);
    rmdir(dir);
    return status;
}

const struct tool_cmd tool_demo = {
    "demo", "show why distributed locks exist (inventory, pitfalls)",
    demo_run, demo_help,
};
