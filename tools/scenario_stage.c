/*
 * scenario_stage.c: the stage of `dlock scenario`. Every holder and waiter
 * is a child process: this program again in a hidden role (`dlock scenario
 * __actor ...`), driven by one-line commands on its stdin and answering
 * with one-line events on its stdout, each stamped with CLOCK_MONOTONIC so
 * that the parent can put them on one timeline. Every wait is bounded;
 * every child is killed and reaped on every path. The cases themselves are
 * in scenario_cases.c.
 *
 * Divisions: the toy storage; the actor role; driving actors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scenario.h"

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

int sc_actor_main(int argc, char **argv)
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

static double rel_ms(const struct sc *s, uint64_t t)
{
    return ((double)t - (double)s->t0) / 1e6;
}

void sc_say(struct sc *s, uint64_t t, const char *who, const char *fmt,
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
void sc_result(struct sc *s, const char *key, json_object *value)
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
    sc_say(s, t, a->label, "told: lock lost (%s): %s", a->lost_code, a->lost_why);
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
bool sc_pump(struct sc *s, uint32_t ms, struct actor *who,
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
        /* a dead actor: its answer will not come, and sc_pump() says so */
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
    /* A brief cut ends well inside what the holder believes: its own
     * lease, which on etcd is shorter than the session's. */
    uint32_t believed = s->lease_ms < s->eff_ms ? s->lease_ms : s->eff_ms;
    s->short_ms = s->down_given ? s->down_ms
                  : believed / 3 > 200 ? believed / 3 : 200;
    printf("  lock lease %" PRIu32 " ms", s->lease_ms);
    if (s->eff_ms != s->lease_ms)
        printf(", session timeout %" PRIu32 " ms (the URI's lease=)",
               s->eff_ms);
    printf("; waiters wait at most %" PRIu32 " ms\n", s->wait_ms);
    fflush(stdout);
}

/* Start an actor with this URI (NULL: the scenario's); DLOCK_OK once it is
 * ready, else its failure (already reported). */
int sc_actor_start(struct sc *s, struct actor **out, const char *label,
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
        sc_say(s, bn_now_ns(), label, "could not start: %s", strerror(errno));
        return DLOCK_ERROR;
    }
    *out = a;
    if (!sc_pump(s, READY_TIMEOUT_MS, a, "ready|fail", line, sizeof line)) {
        sc_say(s, bn_now_ns(), label, "did not start (no answer in %d s)",
            READY_TIMEOUT_MS / 1000);
        return DLOCK_ERROR;
    }
    if (strncmp(line, "fail", 4) == 0) {
        char code[32] = "";
        unsigned long long t = 0;
        int off = 0;
        sscanf(line, "fail %llu %31s %n", &t, code, &off);
        tool_err("scenario", "%s: %s", a->label, off ? line + off : line);
        return sc_err_code(code);
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
uint64_t sc_acquire_start(struct sc *s, struct actor *a, uint32_t ms)
{
    char cmd[64], line[256];
    unsigned long long t = bn_now_ns();

    snprintf(cmd, sizeof cmd, "acquire %" PRIu32 "\n", ms);
    send_cmd(a, cmd);
    if (sc_pump(s, REPLY_TIMEOUT_MS, a, "waiting", line, sizeof line))
        sscanf(line, "waiting %llu", &t);
    return t;
}

/* Wait up to ms for the answer to an acquire. */
void sc_acquire_wait(struct sc *s, struct actor *a, uint32_t ms,
                     struct got *g)
{
    char line[1024];
    unsigned long long t = 0, fence = 0;
    int off = 0;

    memset(g, 0, sizeof *g);
    if (!sc_pump(s, ms, a, "acquired|failed", line, sizeof line)) {
        g->t = bn_now_ns();
        return;
    }
    g->answered = true;
    if (sscanf(line, "acquired %llu %llu", &t, &fence) == 2) {
        g->ok = true;
        g->t = t;
        g->fence = fence;
        sc_say(s, t, a->label, "acquired, fence %llu", fence);
    } else {
        sscanf(line, "failed %llu %31s %n", &t, g->err, &off);
        g->t = t;
        snprintf(g->msg, sizeof g->msg, "%s", off ? line + off : "");
        sc_say(s, t, a->label, "acquire failed: %s (%s)", g->err, g->msg);
    }
}

/* Acquire now, waiting at most ms; the answer in g. */
void sc_acquire(struct sc *s, struct actor *a, uint32_t ms, struct got *g)
{
    sc_acquire_start(s, a, ms);
    sc_acquire_wait(s, a, ms + REPLY_TIMEOUT_MS, g);
}

/* Release; the error name ("OK", "ELOST"...) in err, "" if no answer.
 * Returns when dlock_release() returned, by the actor's clock. */
uint64_t sc_release(struct sc *s, struct actor *a, char *err, size_t cap)
{
    char line[1024];
    unsigned long long t = bn_now_ns();
    int off = 0;

    err[0] = '\0';
    send_cmd(a, "release\n");
    if (!sc_pump(s, REPLY_TIMEOUT_MS, a, "released", line, sizeof line))
        return t;
    char code[32] = "";
    sscanf(line, "released %llu %31s %n", &t, code, &off);
    snprintf(err, cap, "%s", code);
    if (strcmp(code, "OK") == 0)
        sc_say(s, t, a->label, "released");
    else
        sc_say(s, t, a->label, "release: %s (%s)", code, off ? line + off : "");
    return t;
}

/* dlock_held() in the actor: 1, 0, or -1 without an answer. */
int sc_held(struct sc *s, struct actor *a)
{
    char line[256];
    unsigned long long t = 0;
    int h = -1;
    unsigned rem = 0;

    send_cmd(a, "held\n");
    if (!sc_pump(s, REPLY_TIMEOUT_MS, a, "held", line, sizeof line))
        return -1;
    sscanf(line, "held %llu %d %u", &t, &h, &rem);
    if (h == 1 && rem != DLOCK_WAIT_FOREVER)
        sc_say(s, t, a->label, "dlock_held() = 1 (%u ms of lease left)", rem);
    else
        sc_say(s, t, a->label, "dlock_held() = %d", h);
    return h;
}

/* Write to the toy storage with the actor's token. */
const char *sc_store(struct sc *s, struct actor *a, char *res, size_t cap)
{
    char line[256];
    unsigned long long t = 0, fence = 0, highest = 0;

    snprintf(res, cap, "no answer");
    send_cmd(a, "write\n");
    if (!sc_pump(s, REPLY_TIMEOUT_MS, a, "write", line, sizeof line))
        return res;
    char r[32] = "";
    sscanf(line, "write %llu %31s %llu %llu", &t, r, &fence, &highest);
    snprintf(res, cap, "%s", r);
    if (strcmp(r, "unchecked") == 0)
        sc_say(s, t, a->label, "writes to storage with no token (0): "
            "unchecked, accepted");
    else
        sc_say(s, t, a->label, "writes to storage with fence %llu: %s "
            "(highest seen %llu)", fence, r, highest);
    return res;
}

void sc_actor_signal(struct sc *s, struct actor *a, int sig,
                     const char *what)
{
    uint64_t t = bn_now_ns();

    kill(a->pid, sig);
    sc_say(s, t, a->label, "%s", what);
}

/* SIGKILL and reap one actor now. */
void sc_actor_kill(struct sc *s, struct actor *a)
{
    sc_actor_signal(s, a, SIGKILL, "killed (SIGKILL)");
    bn_reap(a->pid, 5000);
    a->pid = 0;
    a->eof = true;
}

/* Every actor: ask to exit, then kill what is left, and reap. False when
 * one had died on its own (a crash, or a sanitizer's report), which makes
 * the run suspect. */
bool sc_actors_finish(struct sc *s)
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

/* "ECONNECT" -> DLOCK_ECONNECT; DLOCK_ERROR for anything else. */
int sc_err_code(const char *name)
{
    for (int rc = -1; rc >= -64; rc--)
        if (strcmp(dlock_err_name(rc), name) == 0)
            return rc;
    return DLOCK_ERROR;
}

void sc_proxies_stop(struct sc *s)
{
    for (size_t i = 0; i < s->nproxies; i++) {
        bn_proxy_stop(s->proxy[i]);
        s->proxy[i] = NULL;
    }
    s->nproxies = 0;
}
