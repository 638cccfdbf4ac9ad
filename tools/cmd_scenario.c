/*
 * cmd_scenario.c: `dlock scenario NAME|all`, the failure rows of the
 * trade-offs guide run for real and measured, on one URI or side by side
 * on several:
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
 * Every holder and waiter is a child process: this program again in a
 * hidden role (`dlock scenario __actor ...`), driven by one-line commands on
 * its stdin and answering with one-line events on its stdout, each stamped
 * with CLOCK_MONOTONIC so that the parent can put them on one timeline.
 * Every wait is bounded; every child is killed and reaped on every path.
 * The outcome is data: the command exits 0 when the scenarios ran,
 * whatever the lock did. Each run leaves a summary (a Markdown cell) and a
 * shorter cell for the terminal's side-by-side table.
 *
 * Divisions: the toy storage; the actor role; driving actors; the
 * scenarios; options, the driver and the tables.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "bench.h"

#define MAX_ACTORS 4
#define MAX_HOSTS 8              /* proxied hosts of one URI */
#define READY_TIMEOUT_MS 30000   /* an actor to connect */
#define REPLY_TIMEOUT_MS 15000   /* a command that does not wait for a lock */
#define SETTLE_MS 300            /* let a waiter start waiting */
#define SC_NA 1                  /* a scenario that does not apply */

extern char **environ;

/* ---- the toy storage ------------------------------------------------------------ */

/*
 * A "storage service" that checks fencing tokens, as Kleppmann proposes:
 * it remembers the highest token it has seen and rejects a write that
 * carries a lower one. A write without a token (0: the backend gives none)
 * cannot be checked and is accepted. The file holds one line:
 * "highest H accepted A rejected R unchecked U"; flock() serialises writers.
 */
enum store_result { STORE_ACCEPTED, STORE_REJECTED, STORE_UNCHECKED,
                    STORE_ERROR };

static enum store_result store_write(const char *path, uint64_t fence,
                                     uint64_t *highest)
{
    unsigned long long h = 0, acc = 0, rej = 0, unc = 0;
    enum store_result res;
    char buf[256];
    ssize_t n;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        if (fd >= 0)
            close(fd);
        return STORE_ERROR;
    }
    n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    sscanf(buf, "highest %llu accepted %llu rejected %llu unchecked %llu", &h,
           &acc, &rej, &unc);
    if (fence == 0) {
        res = STORE_UNCHECKED;
        unc++;
    } else if (fence < h) {
        res = STORE_REJECTED;
        rej++;
    } else {
        res = STORE_ACCEPTED;
        h = fence;
        acc++;
    }
    n = snprintf(buf, sizeof buf,
                 "highest %llu accepted %llu rejected %llu unchecked %llu\n",
                 h, acc, rej, unc);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n)
        res = STORE_ERROR;
    *highest = h;
    close(fd); /* drops the flock */
    return res;
}

static const char *store_name(enum store_result r)
{
    switch (r) {
    case STORE_ACCEPTED: return "accepted";
    case STORE_REJECTED: return "rejected";
    case STORE_UNCHECKED: return "unchecked";
    case STORE_ERROR: break;
    }
    return "error";
}

/* ---- the actor role -------------------------------------------------------------- */

/*
 * `dlock scenario __actor PARENT URI NAME LEASE_MS STORAGE`
 * Commands (stdin):  acquire MS | release | held | write | exit
 * Events (stdout):   ready T CAPS LEASE SCHEME MODE | fail T ERR MSG |
 *                    waiting T | acquired T FENCE | failed T ERR MSG |
 *                    released T ERR MSG | held T 0|1 REMAINING |
 *                    write T RESULT FENCE HIGHEST | lost T ERR MSG
 * T is CLOCK_MONOTONIC in ns. "lost" comes from the watchdog's thread at
 * any time, so lines are written whole under a mutex.
 */
static pthread_mutex_t emit_mu = PTHREAD_MUTEX_INITIALIZER;

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n++] = '\n';
    pthread_mutex_lock(&emit_mu);
    if (write(STDOUT_FILENO, line, (size_t)n) != n) {
        /* the parent is gone; PR_SET_PDEATHSIG ends us */
    }
    pthread_mutex_unlock(&emit_mu);
}

static void actor_on_lost(dlock_lock *lk, int code, const char *why,
                          void *payload)
{
    (void)lk;
    (void)payload;
    emit("lost %" PRIu64 " %s %s", bn_now_ns(), dlock_err_name(code), why);
}

static int actor_main(int argc, char **argv)
{
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    dlock_info info = DLOCK_INFO_INIT;
    uint64_t fence = 0;
    char line[256];
    int rc;

    if (argc != 7)
        return EXIT_USAGE;
    bn_child_init((pid_t)atol(argv[2]));
    rc = dlock_client_open(&c, argv[3], NULL);
    if (rc == DLOCK_OK) {
        lo.lease_ms = (uint32_t)strtoul(argv[5], NULL, 10);
        lo.on_lost = actor_on_lost;
        rc = dlock_lock_new(&lk, c, argv[4], &lo);
    }
    if (rc != DLOCK_OK) {
        emit("fail %" PRIu64 " %s %s", bn_now_ns(), dlock_err_name(rc),
             dlock_client_errmsg(c));
        dlock_client_close(c);
        return tool_exit_for(rc);
    }
    dlock_client_info(c, &info);
    emit("ready %" PRIu64 " %" PRIu32 " %" PRIu32 " %s %s", bn_now_ns(),
         info.caps, info.lease_ms, info.scheme, info.mode);

    while (fgets(line, sizeof line, stdin) != NULL) {
        unsigned long ms;
        if (sscanf(line, "acquire %lu", &ms) == 1) {
            emit("waiting %" PRIu64, bn_now_ns());
            rc = dlock_acquire(lk, (uint32_t)ms);
            if (rc == DLOCK_OK) {
                fence = dlock_fence(lk);
                emit("acquired %" PRIu64 " %" PRIu64, bn_now_ns(), fence);
            } else {
                emit("failed %" PRIu64 " %s %s", bn_now_ns(),
                     dlock_err_name(rc), dlock_lock_errmsg(lk));
            }
        } else if (strncmp(line, "release", 7) == 0) {
            rc = dlock_release(lk);
            emit("released %" PRIu64 " %s %s", bn_now_ns(),
                 rc == DLOCK_OK ? "OK" : dlock_err_name(rc),
                 rc == DLOCK_OK ? "" : dlock_lock_errmsg(lk));
        } else if (strncmp(line, "held", 4) == 0) {
            emit("held %" PRIu64 " %d %" PRIu32, bn_now_ns(), dlock_held(lk),
                 dlock_lock_remaining(lk));
        } else if (strncmp(line, "write", 5) == 0) {
            /* The writer uses the token it was given at acquire time, as a
             * real client would: it does not know it has been paused. */
            uint64_t highest = 0;
            enum store_result r = store_write(argv[6], fence, &highest);
            emit("write %" PRIu64 " %s %" PRIu64 " %" PRIu64, bn_now_ns(),
                 store_name(r), fence, highest);
        } else if (strncmp(line, "exit", 4) == 0) {
            break;
        }
    }
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

/* ---- driving actors ---------------------------------------------------------------- */

static int err_code(const char *name);

struct actor {
    char label[16];   /* "A", "B", "W1"... */
    const char *role; /* "holder", "waiter"... */
    pid_t pid;
    int to, from;     /* its stdin, its stdout */
    char buf[8192];
    size_t len;
    bool eof;
    /* what it told us */
    uint32_t caps, lease_ms;
    char scheme[32], mode[64];
    bool lost;
    uint64_t lost_ns;
    char lost_code[32], lost_why[512];
};

struct sc {
    const char *scenario;
    const char *uri;      /* as given (may be NULL: the default) */
    char red[1024];       /* with the password hidden */
    char name[128];       /* the lock name */
    uint32_t lease_ms;  /* the lock lease the actors ask for */
    uint32_t short_ms;  /* a brief cut, well inside the lease: --down,
                         * else a third of eff_ms (at least 200 ms) */
    uint32_t eff_ms;    /* how long a silent holder keeps the lock: the
                         * lock lease, or the session's for session-bound
                         * modes (see set_timing) */
    uint32_t wait_ms, down_ms, pause_ms; /* 0 until set_timing, unless
                                          * given as options */
    bool down_given;      /* --down: else each scenario picks its own */
    const char *restart_cmd, *node_cmd;
    bool many;            /* one of several runs: a missing command makes
                           * a cell "n/a" rather than a usage error */
    char dir[64];         /* temporary: the toy storage */
    char storage[128];
    uint64_t t0;
    struct actor actors[MAX_ACTORS];
    size_t nactors;
    struct bn_proxy *proxy[MAX_HOSTS]; /* one per host of the URI */
    size_t nproxies;
    /* known after the first actor is ready */
    uint32_t caps;
    char scheme[32], mode[64];
    json_object *events, *results;
    char outcome[512];
    char summary[160]; /* a few words for a table cell */
    char cell[40];     /* fewer still, for a terminal's side-by-side */
};

static double rel_ms(const struct sc *s, uint64_t t)
{
    return ((double)t - (double)s->t0) / 1e6;
}

/* One line of the timeline: "+ 1234.5 ms  A  text". */
static void say(struct sc *s, uint64_t t, const char *who, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));
static void say(struct sc *s, uint64_t t, const char *who, const char *fmt,
                ...)
{
    char text[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    printf("  +%9.1f ms  %-3s %s\n", rel_ms(s, t), who, text);
    fflush(stdout);
    json_object *e = json_object_new_object();
    json_object_object_add(e, "t_ms", json_object_new_double(rel_ms(s, t)));
    json_object_object_add(e, "who", json_object_new_string(who));
    json_object_object_add(e, "what", json_object_new_string(text));
    json_object_array_add(s->events, e);
}

/* A result: printed at the end, and in the JSON. */
static void result(struct sc *s, const char *key, json_object *value)
{
    json_object_object_add(s->results, key, value);
}

/* Does line start with one of the words in "w1|w2"? */
static bool starts_with_any(const char *line, const char *words)
{
    const char *w = words;

    while (w != NULL && *w != '\0') {
        size_t n = strcspn(w, "|");
        if (strncmp(line, w, n) == 0 && (line[n] == ' ' || line[n] == '\0'))
            return true;
        w += n;
        if (*w == '|')
            w++;
    }
    return false;
}

/* A "lost" event: record it and put it on the timeline. */
static void on_lost_line(struct sc *s, struct actor *a, const char *line)
{
    unsigned long long t = 0;
    int off = 0;

    sscanf(line, "lost %llu %31s %n", &t, a->lost_code, &off);
    a->lost = true;
    a->lost_ns = t;
    snprintf(a->lost_why, sizeof a->lost_why, "%s", off ? line + off : "");
    say(s, t, a->label, "told: lock lost (%s): %s", a->lost_code, a->lost_why);
}

/*
 * Go through the complete lines buffered from one actor: "lost" events
 * are handled wherever they are; if the actor is the one waited for, its
 * lines are consumed up to the first that starts with one of `words`
 * (copied to out, returns true); other actors' lines stay queued for the
 * call that waits for them.
 */
static bool scan(struct sc *s, struct actor *a, bool mine, const char *words,
                 char *out, size_t cap)
{
    size_t off = 0, keep = 0;
    bool found = false;
    char line[1024];

    while (!found) {
        char *nl = memchr(a->buf + off, '\n', a->len - off);
        bool consume;
        size_t n;

        if (nl == NULL)
            break;
        n = (size_t)(nl - (a->buf + off));
        snprintf(line, sizeof line, "%.*s", (int)n, a->buf + off);
        if (strncmp(line, "lost ", 5) == 0) {
            on_lost_line(s, a, line);
            consume = true;
        } else if (mine) {
            consume = true; /* an answer nobody waits for any more */
            if (words != NULL && starts_with_any(line, words)) {
                if (out != NULL)
                    snprintf(out, cap, "%s", line);
                found = true;
            }
        } else {
            consume = false;
        }
        if (!consume) {
            memmove(a->buf + keep, a->buf + off, n + 1);
            keep += n + 1;
        }
        off += n + 1;
    }
    memmove(a->buf + keep, a->buf + off, a->len - off);
    a->len = keep + (a->len - off);
    return found;
}

/*
 * Read every actor's events for at most ms; return true as soon as `who`
 * sends a line starting with one of `words` (copied to line). "lost" events
 * of any actor are recorded on the way. False on timeout, or when `who`
 * has exited.
 */
static bool pump(struct sc *s, uint32_t ms, struct actor *who,
                 const char *words, char *line, size_t cap)
{
    uint64_t until = bn_now_ns() + (uint64_t)ms * 1000000u;

    for (;;) {
        struct pollfd pf[MAX_ACTORS];
        struct actor *pa[MAX_ACTORS];
        size_t n = 0;

        for (size_t i = 0; i < s->nactors; i++) {
            struct actor *a = &s->actors[i];
            if (scan(s, a, a == who, words, line, cap))
                return true;
            if (!a->eof && a->from >= 0) {
                pf[n] = (struct pollfd){a->from, POLLIN, 0};
                pa[n++] = a;
            }
        }
        if (who != NULL && who->eof)
            return false;
        uint64_t now = bn_now_ns();
        if (now >= until)
            return false;
        if (n == 0) {
            bn_sleep_ms((uint32_t)((until - now) / 1000000u) + 1);
            continue;
        }
        int left = (int)((until - now) / 1000000u) + 1;
        if (poll(pf, n, left) < 0 && errno != EINTR)
            return false;
        for (size_t i = 0; i < n; i++) {
            struct actor *a = pa[i];
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = read(a->from, a->buf + a->len,
                             sizeof a->buf - 1 - a->len);
            if (r > 0)
                a->len += (size_t)r;
            else if (r == 0 || (errno != EINTR && errno != EAGAIN))
                a->eof = true;
            if (a->len == sizeof a->buf - 1) /* full of unread lines */
                a->len = 0;
        }
    }
}

static void send_cmd(struct actor *a, const char *cmd)
{
    size_t n = strlen(cmd);

    if (a->pid <= 0 || write(a->to, cmd, n) != (ssize_t)n) {
        /* a dead actor: its answer will not come, and pump() says so */
    }
}

/*
 * Once the first actor has said what the backend is: the timing defaults.
 * A lock that lives as long as a session which outlives a connection (a
 * ZooKeeper session: conn-bound + survives-reconnect; an etcd lease that
 * the server ends on its own: server-timeout + survives-reconnect) is kept
 * by a silent holder until that session times out, which the URI's lease=
 * sets; any other lock until its lock lease runs out (or never, for a lock
 * bound to an open connection). Waits, pauses and outages are counted in
 * that time.
 */
static void set_timing(struct sc *s, const struct actor *a)
{
    bool session = (a->caps & DLOCK_CAP_SURVIVES_RECONNECT) &&
                   (a->caps & (DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT));

    s->eff_ms = s->lease_ms;
    if (session && a->lease_ms > s->eff_ms && a->lease_ms < 600000)
        s->eff_ms = a->lease_ms;
    if (s->wait_ms == 0)
        s->wait_ms = 3 * s->eff_ms + 2000;
    if (s->pause_ms == 0)
        s->pause_ms = 2 * s->eff_ms;
    if (s->down_ms == 0)
        s->down_ms = 2 * s->eff_ms;
    s->short_ms = s->down_given ? s->down_ms
                  : s->eff_ms / 3 > 200 ? s->eff_ms / 3 : 200;
    printf("  lock lease %" PRIu32 " ms", s->lease_ms);
    if (s->eff_ms != s->lease_ms)
        printf(", session timeout %" PRIu32 " ms (the URI's lease=)",
               s->eff_ms);
    printf("; waiters wait at most %" PRIu32 " ms\n", s->wait_ms);
    fflush(stdout);
}

/* Start an actor with this URI (NULL: the scenario's); DLOCK_OK once it is
 * ready, else its failure (already reported). */
static int actor_start(struct sc *s, struct actor **out, const char *label,
                       const char *role, const char *uri)
{
    struct actor *a = &s->actors[s->nactors];
    int in[2], outp[2];
    char parent[24], lease[24], line[1024];

    *out = NULL;
    memset(a, 0, sizeof *a);
    a->to = a->from = -1;
    snprintf(a->label, sizeof a->label, "%s", label);
    a->role = role;
    if (pipe2(in, O_CLOEXEC) != 0)
        return DLOCK_ERROR;
    if (pipe2(outp, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return DLOCK_ERROR;
    }
    snprintf(parent, sizeof parent, "%ld", (long)getpid());
    snprintf(lease, sizeof lease, "%" PRIu32, s->lease_ms);
    const char *u = uri != NULL ? uri : s->uri != NULL ? s->uri : "";
    char *argv[] = {"dlock", "scenario", "__actor", parent, (char *)u,
                    s->name, lease, s->storage, NULL};
    a->pid = bn_spawn_self(argv, in[0], outp[1]);
    close(in[0]);
    close(outp[1]);
    a->to = in[1];
    a->from = outp[0];
    s->nactors++;
    if (a->pid < 0) {
        a->eof = true;
        say(s, bn_now_ns(), label, "could not start: %s", strerror(errno));
        return DLOCK_ERROR;
    }
    *out = a;
    if (!pump(s, READY_TIMEOUT_MS, a, "ready|fail", line, sizeof line)) {
        say(s, bn_now_ns(), label, "did not start (no answer in %d s)",
            READY_TIMEOUT_MS / 1000);
        return DLOCK_ERROR;
    }
    if (strncmp(line, "fail", 4) == 0) {
        char code[32] = "";
        unsigned long long t = 0;
        int off = 0;
        sscanf(line, "fail %llu %31s %n", &t, code, &off);
        tool_err("scenario", "%s: %s", a->label, off ? line + off : line);
        return err_code(code);
    }
    unsigned long long t;
    unsigned caps, lease_ms;
    sscanf(line, "ready %llu %u %u %31s %63s", &t, &caps, &lease_ms,
           a->scheme, a->mode);
    a->caps = caps;
    a->lease_ms = lease_ms;
    if (s->scheme[0] == '\0') {
        s->caps = caps;
        snprintf(s->scheme, sizeof s->scheme, "%s", a->scheme);
        snprintf(s->mode, sizeof s->mode, "%s", a->mode);
        set_timing(s, a);
    }
    return DLOCK_OK;
}

/* Send "acquire MS" and wait until the actor is inside dlock_acquire(). */
static uint64_t acquire_start(struct sc *s, struct actor *a, uint32_t ms)
{
    char cmd[64], line[256];
    unsigned long long t = bn_now_ns();

    snprintf(cmd, sizeof cmd, "acquire %" PRIu32 "\n", ms);
    send_cmd(a, cmd);
    if (pump(s, REPLY_TIMEOUT_MS, a, "waiting", line, sizeof line))
        sscanf(line, "waiting %llu", &t);
    return t;
}

struct got {
    bool ok;        /* acquired */
    bool answered;  /* acquired or failed (else: no answer in time) */
    uint64_t t;
    uint64_t fence;
    char err[32];
    char msg[512];
};

/* Wait up to ms for the answer to an acquire. */
static void acquire_wait(struct sc *s, struct actor *a, uint32_t ms,
                         struct got *g)
{
    char line[1024];
    unsigned long long t = 0, fence = 0;
    int off = 0;

    memset(g, 0, sizeof *g);
    if (!pump(s, ms, a, "acquired|failed", line, sizeof line)) {
        g->t = bn_now_ns();
        return;
    }
    g->answered = true;
    if (sscanf(line, "acquired %llu %llu", &t, &fence) == 2) {
        g->ok = true;
        g->t = t;
        g->fence = fence;
        say(s, t, a->label, "acquired, fence %llu", fence);
    } else {
        sscanf(line, "failed %llu %31s %n", &t, g->err, &off);
        g->t = t;
        snprintf(g->msg, sizeof g->msg, "%s", off ? line + off : "");
        say(s, t, a->label, "acquire failed: %s (%s)", g->err, g->msg);
    }
}

/* Acquire now, waiting at most ms; the answer in g. */
static void acquire(struct sc *s, struct actor *a, uint32_t ms, struct got *g)
{
    acquire_start(s, a, ms);
    acquire_wait(s, a, ms + REPLY_TIMEOUT_MS, g);
}

/* Release; the error name ("OK", "ELOST"...) in err, "" if no answer.
 * Returns when dlock_release() returned, by the actor's clock. */
static uint64_t release(struct sc *s, struct actor *a, char *err, size_t cap)
{
    char line[1024];
    unsigned long long t = bn_now_ns();
    int off = 0;

    err[0] = '\0';
    send_cmd(a, "release\n");
    if (!pump(s, REPLY_TIMEOUT_MS, a, "released", line, sizeof line))
        return t;
    char code[32] = "";
    sscanf(line, "released %llu %31s %n", &t, code, &off);
    snprintf(err, cap, "%s", code);
    if (strcmp(code, "OK") == 0)
        say(s, t, a->label, "released");
    else
        say(s, t, a->label, "release: %s (%s)", code, off ? line + off : "");
    return t;
}

/* dlock_held() in the actor: 1, 0, or -1 without an answer. */
static int held(struct sc *s, struct actor *a)
{
    char line[256];
    unsigned long long t = 0;
    int h = -1;
    unsigned rem = 0;

    send_cmd(a, "held\n");
    if (!pump(s, REPLY_TIMEOUT_MS, a, "held", line, sizeof line))
        return -1;
    sscanf(line, "held %llu %d %u", &t, &h, &rem);
    if (h == 1 && rem != DLOCK_WAIT_FOREVER)
        say(s, t, a->label, "dlock_held() = 1 (%u ms of lease left)", rem);
    else
        say(s, t, a->label, "dlock_held() = %d", h);
    return h;
}

/* Write to the toy storage with the actor's token. */
static const char *store(struct sc *s, struct actor *a, char *res, size_t cap)
{
    char line[256];
    unsigned long long t = 0, fence = 0, highest = 0;

    snprintf(res, cap, "no answer");
    send_cmd(a, "write\n");
    if (!pump(s, REPLY_TIMEOUT_MS, a, "write", line, sizeof line))
        return res;
    char r[32] = "";
    sscanf(line, "write %llu %31s %llu %llu", &t, r, &fence, &highest);
    snprintf(res, cap, "%s", r);
    if (strcmp(r, "unchecked") == 0)
        say(s, t, a->label, "writes to storage with no token (0): "
            "unchecked, accepted");
    else
        say(s, t, a->label, "writes to storage with fence %llu: %s "
            "(highest seen %llu)", fence, r, highest);
    return res;
}

static void actor_signal(struct sc *s, struct actor *a, int sig,
                         const char *what)
{
    uint64_t t = bn_now_ns();

    kill(a->pid, sig);
    say(s, t, a->label, "%s", what);
}

/* SIGKILL and reap one actor now. */
static void actor_kill(struct sc *s, struct actor *a)
{
    actor_signal(s, a, SIGKILL, "killed (SIGKILL)");
    bn_reap(a->pid, 5000);
    a->pid = 0;
    a->eof = true;
}

/* Every actor: ask to exit, then kill what is left, and reap. False when
 * one had died on its own (a crash, or a sanitizer's report), which makes
 * the run suspect. */
static bool actors_finish(struct sc *s)
{
    bool clean = true;

    for (size_t i = 0; i < s->nactors; i++) {
        struct actor *a = &s->actors[i];
        if (a->pid > 0) {
            kill(a->pid, SIGCONT);
            send_cmd(a, "exit\n");
        }
    }
    for (size_t i = 0; i < s->nactors; i++) {
        struct actor *a = &s->actors[i];
        if (a->pid > 0) {
            int st = bn_reap(a->pid, REPLY_TIMEOUT_MS);
            /* exit 0 after "exit"; an actor that failed to open reports
             * that itself (EX_USAGE, EX_UNAVAILABLE...) */
            if (st != 0 && !(st > 0 && WIFEXITED(st) &&
                             (WEXITSTATUS(st) == EXIT_USAGE ||
                              WEXITSTATUS(st) == EXIT_UNAVAILABLE))) {
                tool_err("scenario", "%s (%s) ended abnormally (status %d)",
                         a->label, a->role, st);
                clean = false;
            }
        }
        a->pid = 0;
        if (a->to >= 0)
            close(a->to);
        if (a->from >= 0)
            close(a->from);
        a->to = a->from = -1;
    }
    s->nactors = 0;
    return clean;
}

/* ---- the scenarios ------------------------------------------------------------------- */

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
    result(s, key, json_object_new_boolean(a->lost));
    result(s, key_ms,
           a->lost ? jms(((double)a->lost_ns - (double)t) / 1e6) : NULL);
}

/* "ECONNECT" -> DLOCK_ECONNECT; DLOCK_ERROR for anything else. */
static int err_code(const char *name)
{
    for (int rc = -1; rc >= -64; rc--)
        if (strcmp(dlock_err_name(rc), name) == 0)
            return rc;
    return DLOCK_ERROR;
}

/* The actor starts waiting for the lock (at most s->wait_ms), and has
 * had the time to queue up. */
static void queue(struct sc *s, struct actor *w)
{
    acquire_start(s, w, s->wait_ms);
    say(s, bn_now_ns(), w->label, "waits for the lock (at most %" PRIu32
        " ms)", s->wait_ms);
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
}

/* The first holder takes the lock, or the scenario cannot go on. */
static int first_holder_at(struct sc *s, struct actor **a, const char *label,
                           const char *uri, struct got *g)
{
    int rc = actor_start(s, a, label, "holder", uri);

    if (rc != DLOCK_OK)
        return rc;
    acquire(s, *a, s->wait_ms, g);
    if (!g->ok) {
        tool_err("scenario", "%s could not take the lock: %s %s", label,
                 g->answered ? g->err : "no answer", g->msg);
        return g->answered ? err_code(g->err) : DLOCK_ERROR;
    }
    return DLOCK_OK;
}

static int first_holder(struct sc *s, struct actor **a, const char *label,
                        struct got *g)
{
    return first_holder_at(s, a, label, NULL, g);
}

static int sc_holder_crash(struct sc *s)
{
    struct actor *a, *b;
    struct got ga, g;
    int rc;

    if ((rc = first_holder(s, &a, "A", &ga)) != DLOCK_OK)
        return rc;
    if ((rc = actor_start(s, &b, "B", "waiter", NULL)) != DLOCK_OK)
        return rc;
    queue(s, b);
    uint64_t t_kill = bn_now_ns();
    actor_kill(s, a);
    acquire_wait(s, b, s->wait_ms + REPLY_TIMEOUT_MS, &g);

    result(s, "next_acquired", json_object_new_boolean(g.ok));
    result(s, "first_fence", json_object_new_int64((int64_t)ga.fence));
    result(s, "next_fence", g.ok ? json_object_new_int64((int64_t)g.fence) : NULL);
    if (g.ok) {
        double ms = ((double)g.t - (double)t_kill) / 1e6;
        result(s, "kill_to_next_acquire_ms", jms(ms));
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
        result(s, "kill_to_next_acquire_ms", NULL);
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

static int sc_holder_pause(struct sc *s)
{
    struct actor *a, *b;
    struct got ga, gb;
    char res[64], stale[64], err[32];
    int rc;

    if ((rc = actor_start(s, &a, "A", "holder", NULL)) != DLOCK_OK)
        return rc;
    acquire(s, a, s->wait_ms, &ga);
    if (!ga.ok) {
        tool_err("scenario", "A could not take the lock: %s", ga.msg);
        return ga.answered ? err_code(ga.err) : DLOCK_ERROR;
    }
    store(s, a, res, sizeof res);
    if ((rc = actor_start(s, &b, "B", "second holder", NULL)) != DLOCK_OK)
        return rc;

    actor_signal(s, a, SIGSTOP, "paused (SIGSTOP): a long GC pause, a "
                 "swapped-out VM");
    uint64_t t_stop = bn_now_ns();
    pump(s, s->pause_ms, NULL, NULL, NULL, 0);

    /* B tries for one more lease: a lease mode lets it in at once. */
    uint32_t try_ms = s->eff_ms;
    say(s, bn_now_ns(), "B", "tries to take the lock (at most %" PRIu32
        " ms)", try_ms);
    acquire(s, b, try_ms, &gb);
    if (gb.ok)
        store(s, b, res, sizeof res);

    uint64_t t_cont = bn_now_ns();
    actor_signal(s, a, SIGCONT, "resumed (SIGCONT); it still believes it "
                 "holds the lock and writes at once");
    /* The stale writer acts before anyone tells it anything. */
    store(s, a, stale, sizeof stale);
    int a_held = held(s, a);
    /* Then give the watchdog time to find out (if there is anything to
     * find out: without a second holder the lock is still A's). */
    if (!a->lost)
        pump(s, !gb.ok ? SETTLE_MS : s->eff_ms > 2000 ? s->eff_ms : 2000,
             a, "lost", NULL, 0);
    if (gb.ok)
        release(s, b, err, sizeof err);
    release(s, a, err, sizeof err);

    result(s, "paused_ms", jms(((double)t_cont - (double)t_stop) / 1e6));
    result(s, "second_holder_got_in", json_object_new_boolean(gb.ok));
    result(s, "first_fence", json_object_new_int64((int64_t)ga.fence));
    result(s, "second_fence",
           gb.ok ? json_object_new_int64((int64_t)gb.fence) : NULL);
    result_told(s, a, "first_told", "first_told_after_resume_ms", t_cont);
    result(s, "first_held_after_resume", json_object_new_int(a_held));
    result(s, gb.ok ? "stale_write" : "write_after_resume",
           json_object_new_string(stale));
    result(s, "a_release", json_object_new_string(err));

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

/* The scenario does not apply here: say why, in the three lengths. */
static int not_applicable(struct sc *s, const char *why, const char *brief,
                          const char *cell)
{
    printf("  not applicable: %s\n", why);
    result(s, "applicable", json_object_new_boolean(false));
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
    if ((rc = actor_start(s, w, "W", "waiter", NULL)) != DLOCK_OK)
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
static int proxy_uri(struct sc *s, char *puri, size_t cap)
{
    size_t n = bn_uri_nhosts(s->uri), len = 0, from = 0;
    char host[256], err[160];

    if (n == 0)
        return not_applicable(s, "no connection to cut: the URI names no "
                              "host:port (a file:// lock lives in this "
                              "machine's kernel)", "no connection",
                              "no conn");
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
    result(s, "applicable", json_object_new_boolean(true));
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

static void proxies_stop(struct sc *s)
{
    for (size_t i = 0; i < s->nproxies; i++) {
        bn_proxy_stop(s->proxy[i]);
        s->proxy[i] = NULL;
    }
    s->nproxies = 0;
}

/* Let ms pass from t0 (ns), recording events meanwhile. */
static void pump_until(struct sc *s, uint64_t t0, uint32_t ms)
{
    uint64_t until = t0 + (uint64_t)ms * 1000000u, now = bn_now_ns();

    if (now < until)
        pump(s, (uint32_t)((until - now) / 1000000u), NULL, NULL, NULL, 0);
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

static int sc_conn_drop(struct sc *s)
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
    if ((rc = actor_start(s, &b, "B", "other client", NULL)) != DLOCK_OK)
        return rc;

    uint64_t t_drop = bn_now_ns();
    unsigned cut = proxies_set(s, true);
    say(s, t_drop, "net", "A's connections cut (%u reset); new ones refused "
        "for %" PRIu32 " ms", cut, s->down_ms);
    say(s, bn_now_ns(), "B", "tries to take the lock during the outage");
    acquire(s, b, s->down_ms, &gb);
    pump_until(s, t_drop, s->down_ms);
    unsigned refused = proxies_set(s, false);
    uint64_t t_up = bn_now_ns();
    say(s, t_up, "net", "restored (%u connection attempts refused meanwhile)",
        refused);
    /* A's watchdog gets a lease's time to reconnect or to give up. */
    if (!a->lost)
        pump(s, s->eff_ms > 2000 ? s->eff_ms : 2000, a, "lost", NULL, 0);
    int a_held = held(s, a);
    if (gb.ok)
        release(s, b, code, sizeof code);
    release(s, a, code, sizeof code);

    result(s, "down_ms", jms(((double)t_up - (double)t_drop) / 1e6));
    result_told(s, a, "holder_told", "holder_told_after_drop_ms", t_drop);
    result(s, "other_got_lock", json_object_new_boolean(gb.ok));
    result(s, "other_got_lock_after_drop_ms",
           gb.ok ? jms(((double)gb.t - (double)t_drop) / 1e6) : NULL);
    result(s, "holder_held_after_restore", json_object_new_int(a_held));
    result(s, "holder_release", json_object_new_string(code));

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

static int sc_server_restart(struct sc *s)
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
    result(s, "applicable", json_object_new_boolean(true));
    if ((rc = holder_and_waiter(s, &a, &ga, &w)) != DLOCK_OK)
        return rc;

    uint64_t t_r0 = bn_now_ns();
    say(s, t_r0, "srv", "restart: %s", s->restart_cmd);
    int st = run_shell(s->restart_cmd, 120000);
    uint64_t t_r1 = bn_now_ns();
    say(s, t_r1, "srv", "restart command done (exit %d)", st);

    /* Watch for a while: the waiter's answer, the holder's loss. */
    acquire_wait(s, w, s->wait_ms + REPLY_TIMEOUT_MS, &gw);
    if (!a->lost)
        pump(s, s->eff_ms > 2000 ? s->eff_ms : 2000, a, "lost", NULL, 0);
    int a_held = held(s, a);
    if (gw.ok)
        release(s, w, code, sizeof code);
    release(s, a, code, sizeof code);

    result(s, "restart_exit", json_object_new_int(st));
    result(s, "restart_ms", jms(((double)t_r1 - (double)t_r0) / 1e6));
    result_told(s, a, "holder_told", "holder_told_after_restart_start_ms",
                t_r0);
    result(s, "holder_held_after", json_object_new_int(a_held));
    result(s, "waiter_got_lock", json_object_new_boolean(gw.ok));
    result(s, "waiter_got_lock_after_restart_start_ms",
           gw.ok ? jms(((double)gw.t - (double)t_r0) / 1e6) : NULL);
    result(s, "waiter_error", gw.ok || !gw.answered
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

static int sc_waiter_crash(struct sc *s)
{
    struct actor *a, *w1, *w2;
    struct got g;
    char code[32];
    int rc;

    if ((rc = first_holder(s, &a, "A", &g)) != DLOCK_OK)
        return rc;
    if ((rc = actor_start(s, &w2, "W2", "waiter", NULL)) != DLOCK_OK)
        return rc;

    /* Baseline: a plain hand-off from A to W2, nobody crashed. */
    printf("  baseline: A releases while W2 waits\n");
    acquire_start(s, w2, s->wait_ms);
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
    uint64_t t_rel0 = release(s, a, code, sizeof code);
    acquire_wait(s, w2, s->wait_ms + REPLY_TIMEOUT_MS, &g);
    double base = g.ok ? ((double)g.t - (double)t_rel0) / 1e6 : -1;
    if (!g.ok) {
        tool_err("scenario", "baseline hand-off failed: %s", g.msg);
        return DLOCK_ERROR;
    }
    release(s, w2, code, sizeof code);

    printf("  crash: W1 queues first, then W2; W1 is killed while "
           "waiting; A releases\n");
    acquire(s, a, s->wait_ms, &g);
    if (!g.ok)
        return DLOCK_ERROR;
    if ((rc = actor_start(s, &w1, "W1", "waiter", NULL)) != DLOCK_OK)
        return rc;
    queue(s, w1);
    queue(s, w2);
    actor_kill(s, w1);
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
    uint64_t t_rel = release(s, a, code, sizeof code);
    acquire_wait(s, w2, s->wait_ms + REPLY_TIMEOUT_MS, &g);
    if (g.ok)
        release(s, w2, code, sizeof code);

    double after = g.ok ? ((double)g.t - (double)t_rel) / 1e6 : -1;
    result(s, "baseline_handoff_ms", jms(base));
    result(s, "next_waiter_got_lock", json_object_new_boolean(g.ok));
    result(s, "release_to_next_acquire_ms", g.ok ? jms(after) : NULL);
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

static int sc_holder_reconnect(struct sc *s)
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
    store(s, a, res, sizeof res);
    if ((rc = actor_start(s, &b, "B", "waiter", NULL)) != DLOCK_OK)
        return rc;

    /* B waits through the cut and one lease more: long enough to get
     * the lock if A lost it, whether at once or when its lease ran out. */
    uint32_t b_wait = s->short_ms + s->eff_ms + 500;
    uint64_t t_cut = bn_now_ns();
    unsigned cut = proxies_set(s, true);
    say(s, t_cut, "net", "A's connections cut (%u reset) for %" PRIu32
        " ms: less than the lease", cut, s->short_ms);
    acquire_start(s, b, b_wait);
    say(s, bn_now_ns(), "B", "waits for the lock (at most %" PRIu32 " ms)",
        b_wait);
    pump_until(s, t_cut, s->short_ms);
    unsigned refused = proxies_set(s, false);
    uint64_t t_up = bn_now_ns();
    say(s, t_up, "net", "restored (%u connection attempts refused meanwhile)",
        refused);
    acquire_wait(s, b, b_wait + REPLY_TIMEOUT_MS, &gb);
    if (gb.ok)
        store(s, b, res, sizeof res);
    int a_held = held(s, a);
    /* A writes with its token, as a program that was not told would. */
    store(s, a, stale, sizeof stale);
    if (gb.ok && !a->lost)
        pump(s, SETTLE_MS, a, "lost", NULL, 0);
    if (gb.ok)
        release(s, b, code, sizeof code);
    release(s, a, code, sizeof code);

    bool kept = a_held == 1 && !a->lost && !gb.ok;
    result(s, "down_ms", jms(((double)t_up - (double)t_cut) / 1e6));
    result(s, "holder_kept_lock", json_object_new_boolean(kept));
    result_told(s, a, "holder_told", "holder_told_after_cut_ms", t_cut);
    result(s, "holder_held_after_restore", json_object_new_int(a_held));
    result(s, "other_got_lock", json_object_new_boolean(gb.ok));
    result(s, "other_got_lock_after_cut_ms",
           gb.ok ? jms(((double)gb.t - (double)t_cut) / 1e6) : NULL);
    result(s, "holder_write_after", json_object_new_string(stale));

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

static int sc_holder_restart(struct sc *s)
{
    struct actor *a, *a2;
    struct got ga, g;
    char code[32];
    int rc;

    if ((rc = first_holder(s, &a, "A", &ga)) != DLOCK_OK)
        return rc;
    uint64_t t_kill = bn_now_ns();
    actor_kill(s, a);
    printf("  A is started again at once: the same program and lock name "
           "(a new client,\n  so a new owner id: dlock's ids are random per "
           "client)\n");
    if ((rc = actor_start(s, &a2, "A'", "restarted holder", NULL)) != DLOCK_OK)
        return rc;
    uint64_t t_ready = bn_now_ns();
    say(s, t_ready, "A'", "ready; asks for the lock (at most %" PRIu32 " ms)",
        s->wait_ms);
    acquire(s, a2, s->wait_ms, &g);
    if (g.ok)
        release(s, a2, code, sizeof code);

    double ms = ((double)g.t - (double)t_kill) / 1e6;
    double up = ((double)t_ready - (double)t_kill) / 1e6;
    result(s, "restarted_ready_after_kill_ms", jms(up));
    result(s, "restarted_got_lock", json_object_new_boolean(g.ok));
    result(s, "kill_to_restarted_acquire_ms", g.ok ? jms(ms) : NULL);
    result(s, "first_fence", json_object_new_int64((int64_t)ga.fence));
    result(s, "restarted_fence",
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
        acquire_wait(s, x, 20, gx);
        if (gx->answered) {
            *first = x;
            return;
        }
        acquire_wait(s, y, 20, gy);
        if (gy->answered) {
            *first = y;
            return;
        }
    }
}

static int sc_waiter_disconnect(struct sc *s)
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
    if ((rc = actor_start(s, &w1, "W1", "waiter", puri)) != DLOCK_OK)
        return rc;
    if ((rc = actor_start(s, &w2, "W2", "waiter", NULL)) != DLOCK_OK)
        return rc;
    queue(s, w1);
    queue(s, w2);

    uint64_t t_cut = bn_now_ns();
    unsigned cut = proxies_set(s, true);
    say(s, t_cut, "net", "W1's connections cut (%u reset) for %" PRIu32
        " ms", cut, s->short_ms);
    /* Does W1's acquire return during the cut (an error), or go on? */
    acquire_wait(s, w1, s->short_ms, &g1);
    pump_until(s, t_cut, s->short_ms);
    unsigned refused = proxies_set(s, false);
    say(s, bn_now_ns(), "net", "restored (%u connection attempts refused "
        "meanwhile)", refused);
    bool w1_error = g1.answered && !g1.ok;
    char w1_err[32];
    snprintf(w1_err, sizeof w1_err, "%s", g1.err);
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);

    uint64_t t_rel = release(s, a, code, sizeof code);
    if (w1_error) {
        acquire_wait(s, w2, s->wait_ms + REPLY_TIMEOUT_MS, &gnext);
        first = gnext.answered ? w2 : NULL;
        g2 = gnext;
    } else {
        first_of(s, w1, &g1, w2, &g2, s->wait_ms + REPLY_TIMEOUT_MS, &first);
        gnext = first == w1 ? g1 : g2;
    }
    bool next_ok = first != NULL && gnext.ok;
    double next_ms = next_ok ? ((double)gnext.t - (double)t_rel) / 1e6 : -1;
    /* The other one is served after the first releases. */
    bool both = false;
    if (next_ok) {
        release(s, first, code, sizeof code);
        if (!w1_error) {
            second = first == w1 ? w2 : w1;
            struct got gs;
            acquire_wait(s, second, s->wait_ms + REPLY_TIMEOUT_MS, &gs);
            both = gs.ok;
            if (gs.ok)
                release(s, second, code, sizeof code);
        }
    }

    result(s, "down_ms", jms((double)s->short_ms));
    result(s, "cut_waiter_error", w1_error ? json_object_new_string(w1_err)
                                           : NULL);
    result(s, "cut_waiter_kept_waiting", json_object_new_boolean(!w1_error));
    result(s, "next_holder", next_ok ? json_object_new_string(first->label)
                                     : NULL);
    result(s, "release_to_next_acquire_ms", next_ok ? jms(next_ms) : NULL);
    result(s, "both_waiters_served", json_object_new_boolean(
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

/* Run the --node-cmd with DLOCK_NODE_ACTION and DLOCK_NODE (1-based). */
static int node_cmd(struct sc *s, const char *action, int node)
{
    char num[16];

    snprintf(num, sizeof num, "%d", node);
    setenv("DLOCK_NODE_ACTION", action, 1);
    setenv("DLOCK_NODE", num, 1);
    int st = run_shell(s->node_cmd, 120000);
    unsetenv("DLOCK_NODE_ACTION");
    unsetenv("DLOCK_NODE");
    return st;
}

static int sc_node_loss(struct sc *s)
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
    result(s, "applicable", json_object_new_boolean(true));
    if ((rc = holder_and_waiter(s, &a, &ga, &w)) != DLOCK_OK)
        return rc;

    int idx = actor_node(s, a);
    bool holders = idx >= 0;
    int node = holders ? idx + 1 : 1;
    uint64_t t_kill = bn_now_ns();
    say(s, t_kill, "srv", "kill node %d of %zu%s", node, n,
        holders ? ", the one A is connected to"
                : " (A talks to several nodes)");
    int st = node_cmd(s, "kill", node);
    say(s, bn_now_ns(), "srv", "node %d killed (exit %d)", node, st);
    /* A lease (or session timeout) for a fail-over to happen or not. */
    pump(s, s->eff_ms > 2000 ? s->eff_ms : 2000, NULL, NULL, NULL, 0);
    int a_held = held(s, a);
    store(s, a, stale, sizeof stale);
    struct got early;
    acquire_wait(s, w, 1, &early); /* did W get in meanwhile? */
    bool two = early.ok && a_held == 1;
    uint64_t t_rel = release(s, a, code, sizeof code);
    if (early.answered)
        gw = early;
    else
        acquire_wait(s, w, s->wait_ms + REPLY_TIMEOUT_MS, &gw);
    if (gw.ok)
        release(s, w, code, sizeof code);
    uint64_t t_start = bn_now_ns();
    int st2 = node_cmd(s, "start", node);
    say(s, bn_now_ns(), "srv", "node %d started again (exit %d, %.0f ms)",
        node, st2, ((double)bn_now_ns() - (double)t_start) / 1e6);

    bool kept = a_held == 1 && !a->lost;
    double w_ms = gw.ok ? ((double)gw.t - (double)(early.ok ? t_kill : t_rel)) /
                              1e6
                        : -1;
    result(s, "nodes", json_object_new_int((int)n));
    result(s, "killed_node", json_object_new_int(node));
    result(s, "killed_holders_node", json_object_new_boolean(holders));
    result(s, "kill_exit", json_object_new_int(st));
    result(s, "holder_kept_lock", json_object_new_boolean(kept));
    result_told(s, a, "holder_told", "holder_told_after_kill_ms", t_kill);
    result(s, "holder_write_after", json_object_new_string(stale));
    result(s, "waiter_got_lock", json_object_new_boolean(gw.ok));
    result(s, "waiter_got_lock_before_release",
           json_object_new_boolean(early.ok));
    result(s, early.ok ? "kill_to_waiter_acquire_ms"
                       : "release_to_waiter_acquire_ms",
           gw.ok ? jms(w_ms) : NULL);
    result(s, "start_exit", json_object_new_int(st2));

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

/* ---- options and the driver ---------------------------------------------------------- */

/* The rows of the write-ups' failure table, in its order. */
static const struct {
    const char *name;
    int (*run)(struct sc *);
    const char *what;
} scenarios[] = {
    {"holder-crash", sc_holder_crash,
     "holder SIGKILLed: how long until a waiter gets in"},
    {"holder-pause", sc_holder_pause,
     "holder SIGSTOPped past its lease: 2nd holder? told? fenced?"},
    {"holder-reconnect", sc_holder_reconnect,
     "holder's connection cut briefly (--down): kept? told?"},
    {"holder-restart", sc_holder_restart,
     "holder SIGKILLed and started again: how long until it holds"},
    {"waiter-disconnect", sc_waiter_disconnect,
     "a waiter's connection cut: error or waits on? queue served?"},
    {"waiter-crash", sc_waiter_crash,
     "a waiter SIGKILLed while waiting: is the next one served?"},
    {"conn-drop", sc_conn_drop,
     "holder's connection cut for --down (2 leases), restored"},
    {"server-restart", sc_server_restart,
     "--restart-cmd restarts the server under holder and waiter"},
    {"node-loss", sc_node_loss,
     "a cluster loses the holder's node (--node-cmd)"},
};
#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])
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
           "scenarios (all: every one):\n");
    for (size_t i = 0; i < NSCENARIOS; i++)
        printf("  %-18s %s\n", scenarios[i].name, scenarios[i].what);
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
           "                     Both apply to the --uri they follow; given "
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
           "to one of\nseveral runs) reports \"n/a\" and why.\n"
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
    const char *restart_cmd, *node_cmd;
    char label[64];  /* "redis/setnx", "zk/mutex (3 nodes)" */
};

/* What one run leaves for the tables. */
struct cellrec {
    bool ran;
    char cell[40], summary[160];
};

static struct sc s_run;                  /* big: one at a time */
static struct cellrec cells[NSCENARIOS][MAX_URIS];

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
    rc = scenarios[which].run(s);
    if (rc == SC_NA)
        rc = DLOCK_OK;
    if (!actors_finish(s) && rc == DLOCK_OK)
        rc = DLOCK_ERROR;
    proxies_stop(s);

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
        fprintf(f, " %s |", scenarios[which[j]].name);
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
            printf("%-*s", ROWHEAD, scenarios[which[j]].name);
            for (size_t i = from; i < to; i++)
                printf("  %-*s", i + 1 < to ? (int)w[i] : 0,
                       cells[j][i].cell);
            printf("\n");
        }
        from = to;
    }
    printf("\nin words:\n");
    for (size_t j = 0; j < nw; j++) {
        printf("  %s\n", scenarios[which[j]].name);
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
        for (size_t i = 0; i < NSCENARIOS; i++)
            which[(*nw)++] = i;
        return true;
    }
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *n = strtok_r(buf, ",", &save); n != NULL;
         n = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < NSCENARIOS && strcmp(n, scenarios[i].name) != 0)
            i++;
        if (i == NSCENARIOS) {
            tool_err("scenario", "no scenario '%s' (there are: holder-crash, "
                     "holder-pause, holder-reconnect, holder-restart, "
                     "waiter-disconnect, waiter-crash, conn-drop, "
                     "server-restart, node-loss; or all)", n);
            return false;
        }
        for (size_t k = 0; k < *nw; k++)
            if (which[k] == i)
                i = NSCENARIOS; /* already listed */
        if (i < NSCENARIOS)
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
        {"json", required_argument, NULL, 'j'},
        {"markdown", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct target t[MAX_URIS];
    const char *json = NULL, *markdown = NULL;
    const char *def_restart = NULL, *def_node = NULL;
    uint32_t lease_ms = 2000, wait_ms = 0, pause_ms = 0, down_ms = 0;
    size_t which[NSCENARIOS], nw = 0, nt = 0;
    int opt, first_rc = DLOCK_OK;

    if (argc > 1 && strcmp(argv[1], "__actor") == 0)
        return actor_main(argc, argv);
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
            t[nt++] = (struct target){optarg, NULL, NULL, ""};
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
            if (optarg[0] == '\0') {
                tool_err("scenario", "%s: empty command",
                         opt == 'r' ? "--restart-cmd" : "--node-cmd");
                return EXIT_USAGE;
            }
            if (nt > 0 && opt == 'r')
                t[nt - 1].restart_cmd = optarg;
            else if (nt > 0)
                t[nt - 1].node_cmd = optarg;
            else if (opt == 'r')
                def_restart = optarg;
            else
                def_node = optarg;
            break;
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
                                  NULL, NULL, ""};
    }
    for (size_t i = 0; i < nt; i++) {
        if (t[i].restart_cmd == NULL)
            t[i].restart_cmd = def_restart;
        if (t[i].node_cmd == NULL)
            t[i].node_cmd = def_node;
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
            s->scenario = scenarios[which[j]].name;
            s->uri = t[i].uri;
            s->lease_ms = lease_ms;
            s->wait_ms = wait_ms;
            s->pause_ms = pause_ms;
            s->down_ms = down_ms;
            s->down_given = down_ms != 0;
            s->restart_cmd = t[i].restart_cmd;
            s->node_cmd = t[i].node_cmd;
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
        json_object_array_add(names, json_object_new_string(scenarios[which[j]].name));
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
