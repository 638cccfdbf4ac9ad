/*
 * cmd_scenario.c: `dlock scenario NAME`, the failure rows of the trade-offs
 * guide run for real and measured:
 *
 *   holder-crash    the holder is SIGKILLed: how long until a waiter gets in;
 *   holder-pause    the holder is SIGSTOPped past its lease: does a second
 *                   holder get in, is the first told when it wakes, and does
 *                   the fencing token let a storage layer reject the stale
 *                   writer;
 *   conn-drop       the holder's connection is cut (a TCP proxy in this
 *                   process, between it and the URI's first host:port) and
 *                   restored;
 *   server-restart  the server is restarted by --restart-cmd;
 *   waiter-crash    a waiter is SIGKILLed while it waits: does the next
 *                   waiter still get the lock promptly?
 *
 * Every holder and waiter is a child process: this program again in a
 * hidden role (`dlock scenario __actor ...`), driven by one-line commands on
 * its stdin and answering with one-line events on its stdout, each stamped
 * with CLOCK_MONOTONIC so that the parent can put them on one timeline.
 * Every wait is bounded; every child is killed and reaped on every path.
 * The outcome is data: the command exits 0 when the scenario ran, whatever
 * the lock did.
 *
 * Divisions: the toy storage; the actor role; driving actors; the
 * scenarios; options and the driver.
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
#define READY_TIMEOUT_MS 30000   /* an actor to connect */
#define REPLY_TIMEOUT_MS 15000   /* a command that does not wait for a lock */
#define SETTLE_MS 300            /* let a waiter start waiting */

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
    uint32_t eff_ms;    /* how long a silent holder keeps the lock: the
                         * lock lease, or the session's for session-bound
                         * modes (see set_timing) */
    uint32_t wait_ms, down_ms, pause_ms; /* 0 until set_timing, unless
                                          * given as options */
    const char *restart_cmd;
    char dir[64];         /* temporary: the toy storage */
    char storage[128];
    uint64_t t0;
    struct actor actors[MAX_ACTORS];
    size_t nactors;
    struct bn_proxy *proxy;
    /* known after the first actor is ready */
    uint32_t caps;
    char scheme[32], mode[64];
    json_object *events, *results;
    char outcome[512];
    char summary[160]; /* a few words for a table cell */
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
 * A lock that lives as long as a session which survives reconnects
 * (conn-bound + survives-reconnect: a ZooKeeper session) is kept by a
 * silent holder until that session times out, which the URI's lease=
 * sets; any other lock until its lock lease runs out (or never, for a
 * lock bound to an open connection). Waits, pauses and outages are
 * counted in that time.
 */
static void set_timing(struct sc *s, const struct actor *a)
{
    bool session = (a->caps & DLOCK_CAP_CONN_BOUND) &&
                   (a->caps & DLOCK_CAP_SURVIVES_RECONNECT);

    s->eff_ms = s->lease_ms;
    if (session && a->lease_ms > s->eff_ms && a->lease_ms < 600000)
        s->eff_ms = a->lease_ms;
    if (s->wait_ms == 0)
        s->wait_ms = 3 * s->eff_ms + 2000;
    if (s->pause_ms == 0)
        s->pause_ms = 2 * s->eff_ms;
    if (s->down_ms == 0)
        s->down_ms = 2 * s->eff_ms;
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

/* "ECONNECT" -> DLOCK_ECONNECT; DLOCK_ERROR for anything else. */
static int err_code(const char *name)
{
    for (int rc = -1; rc >= -64; rc--)
        if (strcmp(dlock_err_name(rc), name) == 0)
            return rc;
    return DLOCK_ERROR;
}

/* The first holder takes the lock, or the scenario cannot go on. */
static int first_holder(struct sc *s, struct actor **a, const char *label,
                        struct got *g)
{
    int rc = actor_start(s, a, label, "holder", NULL);

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

static int sc_holder_crash(struct sc *s)
{
    struct actor *a, *b;
    struct got ga, g;
    int rc;

    if ((rc = first_holder(s, &a, "A", &ga)) != DLOCK_OK)
        return rc;
    if ((rc = actor_start(s, &b, "B", "waiter", NULL)) != DLOCK_OK)
        return rc;
    acquire_start(s, b, s->wait_ms);
    say(s, bn_now_ns(), "B", "waits for the lock (at most %" PRIu32 " ms)",
        s->wait_ms);
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
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
    result(s, "first_told", json_object_new_boolean(a->lost));
    result(s, "first_told_after_resume_ms",
           a->lost ? jms(((double)a->lost_ns - (double)t_cont) / 1e6) : NULL);
    result(s, "first_held_after_resume", json_object_new_int(a_held));
    result(s, gb.ok ? "stale_write" : "write_after_resume",
           json_object_new_string(stale));
    result(s, "a_release", json_object_new_string(err));

    char told[64] = "never told";
    if (a->lost)
        snprintf(told, sizeof told, "told %.0f ms after resuming",
                 ((double)a->lost_ns - (double)t_cont) / 1e6);
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

static int sc_conn_drop(struct sc *s)
{
    char host[256], puri[2048], err[160], code[32];
    size_t start, end;
    int port, rc;
    struct actor *a, *b;
    struct got ga, gb;

    if (s->uri == NULL ||
        !bn_uri_first_hostport(s->uri, host, sizeof host, &port, &start,
                               &end)) {
        /* Nothing to cut, or no explicit port to point a proxy at. */
        if (s->uri != NULL && strstr(s->uri, "://") != NULL &&
            strcspn(strstr(s->uri, "://") + 3, "/?#") > 0) {
            tool_err("scenario", "conn-drop: the URI must give its first "
                     "host with an explicit :port, for the proxy");
            return DLOCK_EINVAL;
        }
        printf("  no connection to drop: the URI names no host:port (a "
               "file:// lock lives\n  in this machine's kernel)\n");
        result(s, "applicable", json_object_new_boolean(false));
        snprintf(s->outcome, sizeof s->outcome,
                 "not applicable: no connection to drop");
        snprintf(s->summary, sizeof s->summary, "n/a (no connection)");
        return DLOCK_OK;
    }
    if (bn_proxy_start(&s->proxy, host, port, err, sizeof err) != 0) {
        tool_err("scenario", "conn-drop: %s", err);
        return DLOCK_ERROR;
    }
    snprintf(puri, sizeof puri, "%.*s127.0.0.1:%d%s", (int)start, s->uri,
             bn_proxy_port(s->proxy), s->uri + end);
    printf("  A connects through a proxy at 127.0.0.1:%d to %s:%d; B "
           "connects directly\n", bn_proxy_port(s->proxy), host, port);
    result(s, "applicable", json_object_new_boolean(true));

    if ((rc = actor_start(s, &a, "A", "holder", puri)) != DLOCK_OK)
        return rc;
    acquire(s, a, s->wait_ms, &ga);
    if (!ga.ok) {
        tool_err("scenario", "A could not take the lock: %s", ga.msg);
        return ga.answered ? err_code(ga.err) : DLOCK_ERROR;
    }
    if ((rc = actor_start(s, &b, "B", "other client", NULL)) != DLOCK_OK)
        return rc;

    uint64_t t_drop = bn_now_ns();
    bn_proxy_down(s->proxy);
    unsigned served, cut, refused;
    bn_proxy_counts(s->proxy, &served, &cut, &refused);
    say(s, t_drop, "net", "A's connections cut (%u reset); new ones refused "
        "for %" PRIu32 " ms", cut, s->down_ms);
    say(s, bn_now_ns(), "B", "tries to take the lock during the outage");
    acquire(s, b, s->down_ms, &gb);
    uint64_t now = bn_now_ns();
    if (now < t_drop + (uint64_t)s->down_ms * 1000000u)
        pump(s, (uint32_t)((t_drop + (uint64_t)s->down_ms * 1000000u - now) /
                           1000000u),
             NULL, NULL, NULL, 0);
    bn_proxy_up(s->proxy);
    uint64_t t_up = bn_now_ns();
    bn_proxy_counts(s->proxy, &served, &cut, &refused);
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
    result(s, "holder_told", json_object_new_boolean(a->lost));
    result(s, "holder_told_after_drop_ms",
           a->lost ? jms(((double)a->lost_ns - (double)t_drop) / 1e6) : NULL);
    result(s, "other_got_lock", json_object_new_boolean(gb.ok));
    result(s, "other_got_lock_after_drop_ms",
           gb.ok ? jms(((double)gb.t - (double)t_drop) / 1e6) : NULL);
    result(s, "holder_held_after_restore", json_object_new_int(a_held));
    result(s, "holder_release", json_object_new_string(code));

    char told[128];
    if (a->lost)
        snprintf(told, sizeof told, "told %.0f ms after the cut",
                 ((double)a->lost_ns - (double)t_drop) / 1e6);
    else
        snprintf(told, sizeof told, "never told");
    snprintf(s->summary, sizeof s->summary, "holder %s; other %s; %s after",
             told, gb.ok ? "got it" : "did not get it",
             a_held == 1 ? "still held" : "not held");
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
    char code[32], host[256];
    size_t start, end;
    int port, rc;

    if (s->restart_cmd == NULL) {
        if (s->uri == NULL ||
            !bn_uri_first_hostport(s->uri, host, sizeof host, &port, &start,
                                   &end)) {
            printf("  no server to restart: the URI names no host:port "
                   "(give --restart-cmd to\n  run a command anyway)\n");
            result(s, "applicable", json_object_new_boolean(false));
            snprintf(s->outcome, sizeof s->outcome,
                     "not applicable: no server to restart");
            snprintf(s->summary, sizeof s->summary, "n/a (no server)");
            return DLOCK_OK;
        }
        tool_err("scenario", "server-restart: needs --restart-cmd CMD (e.g. "
                 "\"$DLOCK_TEST_SERVERCTL restart KIND\")");
        return DLOCK_EINVAL;
    }
    result(s, "applicable", json_object_new_boolean(true));
    if ((rc = first_holder(s, &a, "A", &ga)) != DLOCK_OK)
        return rc;
    if ((rc = actor_start(s, &w, "W", "waiter", NULL)) != DLOCK_OK)
        return rc;
    acquire_start(s, w, s->wait_ms);
    say(s, bn_now_ns(), "W", "waits for the lock (at most %" PRIu32 " ms)",
        s->wait_ms);
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);

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
    result(s, "holder_told", json_object_new_boolean(a->lost));
    result(s, "holder_told_after_restart_start_ms",
           a->lost ? jms(((double)a->lost_ns - (double)t_r0) / 1e6) : NULL);
    result(s, "holder_held_after", json_object_new_int(a_held));
    result(s, "waiter_got_lock", json_object_new_boolean(gw.ok));
    result(s, "waiter_got_lock_after_restart_start_ms",
           gw.ok ? jms(((double)gw.t - (double)t_r0) / 1e6) : NULL);
    result(s, "waiter_error", gw.ok || !gw.answered
                                  ? NULL
                                  : json_object_new_string(gw.err));

    snprintf(s->summary, sizeof s->summary, "holder %s; waiter %s%s",
             a->lost ? "told" : a_held == 1 ? "still holds" : "not told",
             gw.ok ? "got it" : "did not get it",
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
    acquire_start(s, w1, s->wait_ms);
    say(s, bn_now_ns(), "W1", "waits for the lock");
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
    acquire_start(s, w2, s->wait_ms);
    say(s, bn_now_ns(), "W2", "waits for the lock");
    pump(s, SETTLE_MS, NULL, NULL, NULL, 0);
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

/* ---- options and the driver ---------------------------------------------------------- */

static const struct {
    const char *name;
    int (*run)(struct sc *);
    const char *what;
} scenarios[] = {
    {"holder-crash", sc_holder_crash,
     "the holder is SIGKILLed; time until a waiter gets the lock"},
    {"holder-pause", sc_holder_pause,
     "the holder is SIGSTOPped past its lease; second holder? told? "
     "fencing?"},
    {"conn-drop", sc_conn_drop,
     "the holder's connection is cut for --down, then restored"},
    {"server-restart", sc_server_restart,
     "--restart-cmd restarts the server under a holder and a waiter"},
    {"waiter-crash", sc_waiter_crash,
     "a waiter is SIGKILLed while waiting; does the next one get in?"},
};
#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])

static void scenario_help(void)
{
    printf("usage: dlock scenario NAME [--uri URI] [OPTIONS]\n"
           "\n"
           "Run one failure for real with child processes as holders and "
           "waiters,\nand print what happened, when, and the outcome.\n\n"
           "scenarios:\n");
    for (size_t i = 0; i < NSCENARIOS; i++)
        printf("  %-15s %s\n", scenarios[i].name, scenarios[i].what);
    printf("\n"
           "  --uri URI          backend (default: $DLOCK_URI, else file://)\n"
           "  --lease D          the holders' lease, 200ms-1m (default 2s)\n"
           "  --wait D           the longest a waiter waits, 1s-10m (default:"
           "\n                     3 leases + 2s)\n"
           "  --pause D          holder-pause: how long the holder is stopped "
           "(default:\n                     2 leases)\n"
           "  --down D           conn-drop: how long the connection stays "
           "cut (default:\n                     2 leases)\n"
           "  --restart-cmd CMD  server-restart: run CMD with /bin/sh -c, e.g."
           "\n                     \"$DLOCK_TEST_SERVERCTL restart redis\"\n"
           "  --json FILE        the timeline and the results as JSON\n"
           "\nconn-drop puts a TCP proxy of its own between the holder and "
           "the URI's first\nhost:port (which must have an explicit port).\n"
           "\nexit status: 0 the scenario ran (its outcome is data); 64 bad "
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

static int scenario_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, 'u'},
        {"lease", required_argument, NULL, 'l'},
        {"wait", required_argument, NULL, 'w'},
        {"pause", required_argument, NULL, 'p'},
        {"down", required_argument, NULL, 'd'},
        {"restart-cmd", required_argument, NULL, 'r'},
        {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct sc s;
    const char *json = NULL;
    size_t which = NSCENARIOS;
    int opt, rc;

    if (argc > 1 && strcmp(argv[1], "__actor") == 0)
        return actor_main(argc, argv);
    if (argc < 2) {
        tool_err("scenario", "missing NAME: one of holder-crash, "
                 "holder-pause, conn-drop, server-restart, waiter-crash "
                 "(usage: see `dlock scenario --help`)");
        return EXIT_USAGE;
    }
    if (tool_is_help(argv[1])) {
        scenario_help();
        return 0;
    }
    for (size_t i = 0; i < NSCENARIOS; i++)
        if (strcmp(argv[1], scenarios[i].name) == 0)
            which = i;
    if (which == NSCENARIOS) {
        tool_err("scenario", "no scenario '%s' (there are: holder-crash, "
                 "holder-pause, conn-drop, server-restart, waiter-crash)",
                 argv[1]);
        return EXIT_USAGE;
    }

    memset(&s, 0, sizeof s);
    s.scenario = scenarios[which].name;
    s.lease_ms = 2000;
    optind = 2;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 'u':
            if (optarg[0] == '\0') {
                tool_err("scenario", "--uri: empty URI");
                return EXIT_USAGE;
            }
            s.uri = optarg;
            break;
        case 'l':
            if (!duration_in("--lease", optarg, 200, 60000, &s.lease_ms))
                return EXIT_USAGE;
            break;
        case 'w':
            if (!duration_in("--wait", optarg, 1000, 600000, &s.wait_ms))
                return EXIT_USAGE;
            break;
        case 'p':
            if (!duration_in("--pause", optarg, 100, 600000, &s.pause_ms))
                return EXIT_USAGE;
            break;
        case 'd':
            if (!duration_in("--down", optarg, 100, 600000, &s.down_ms))
                return EXIT_USAGE;
            break;
        case 'r':
            if (optarg[0] == '\0') {
                tool_err("scenario", "--restart-cmd: empty command");
                return EXIT_USAGE;
            }
            s.restart_cmd = optarg;
            break;
        case 'j':
            json = optarg;
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
    if (s.uri == NULL) {
        const char *env = getenv("DLOCK_URI");
        if (env != NULL && env[0] != '\0')
            s.uri = env;
    }

    signal(SIGPIPE, SIG_IGN);
    json_c_set_serialization_double_format("%.6g", JSON_C_OPTION_THREAD);
    snprintf(s.dir, sizeof s.dir, "/tmp/dlock-scenario-XXXXXX");
    if (mkdtemp(s.dir) == NULL) {
        tool_err("scenario", "mkdtemp: %s", strerror(errno));
        return EXIT_SOFTWARE;
    }
    snprintf(s.storage, sizeof s.storage, "%s/storage", s.dir);
    snprintf(s.name, sizeof s.name, "dlock-scenario-%s-%ld", s.scenario,
             (long)getpid());
    bn_redact(s.uri, s.red, sizeof s.red);
    s.events = json_object_new_array();
    s.results = json_object_new_object();
    s.t0 = bn_now_ns();

    printf("scenario %s on %s\n", s.scenario, s.red);
    fflush(stdout);
    rc = scenarios[which].run(&s);
    if (!actors_finish(&s) && rc == DLOCK_OK)
        rc = DLOCK_ERROR;
    bn_proxy_stop(s.proxy);
    s.proxy = NULL;

    char caps[256];
    bn_caps_text(s.caps, caps, sizeof caps);
    if (s.scheme[0] != '\0')
        printf("backend %s, mode %s: %s\n", s.scheme, s.mode, caps);
    if (rc == DLOCK_OK) {
        printf("results:\n");
        json_object_object_foreach(s.results, key, val) {
            printf("  %-40s %s\n", key,
                   val == NULL ? "n/a" : json_object_get_string(val));
        }
        printf("outcome: %s\nsummary: %s\n", s.outcome, s.summary);
    } else {
        printf("outcome: not run (%s)\n", dlock_strerror(rc));
    }

    if (json != NULL) {
        json_object *root = json_object_new_object();
        json_object_object_add(root, "scenario",
                               json_object_new_string(s.scenario));
        json_object_object_add(root, "uri", json_object_new_string(s.red));
        json_object_object_add(root, "scheme", s.scheme[0]
                                                   ? json_object_new_string(s.scheme)
                                                   : NULL);
        json_object_object_add(root, "mode", s.mode[0]
                                                 ? json_object_new_string(s.mode)
                                                 : NULL);
        json_object *ca = json_object_new_array();
        for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL;
             bit <<= 1)
            if (s.caps & bit)
                json_object_array_add(ca, json_object_new_string(dlock_cap_name(bit)));
        json_object_object_add(root, "caps", ca);
        json_object_object_add(root, "lease_ms", json_object_new_int64(s.lease_ms));
        json_object_object_add(root, "ran", json_object_new_boolean(rc == DLOCK_OK));
        json_object_object_add(root, "events", s.events);
        json_object_object_add(root, "results", s.results);
        json_object_object_add(root, "summary",
                               rc == DLOCK_OK ? json_object_new_string(s.summary)
                                              : NULL);
        json_object_object_add(root, "outcome",
                               json_object_new_string(rc == DLOCK_OK ? s.outcome
                                                                     : dlock_strerror(rc)));
        if (json_object_to_file_ext(json, root, JSON_C_TO_STRING_PRETTY |
                                                    JSON_C_TO_STRING_NOSLASHESCAPE) != 0) {
            tool_err("scenario", "--json: cannot write '%s'", json);
            if (rc == DLOCK_OK)
                rc = DLOCK_ERROR;
        }
        json_object_put(root);
    } else {
        json_object_put(s.events);
        json_object_put(s.results);
    }
    unlink(s.storage);
    rmdir(s.dir);
    if (rc == DLOCK_OK)
        return 0;
    rc = tool_exit_for(rc);
    return rc == EXIT_CONFLICT || rc == EXIT_LOST ? EXIT_SOFTWARE : rc;
}

const struct tool_cmd tool_scenario = {
    "scenario", "run a failure for real: holder crash/pause, conn drop...",
    scenario_run, scenario_help,
};
