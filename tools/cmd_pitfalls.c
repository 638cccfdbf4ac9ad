/*
 * cmd_pitfalls.c: `dlock demo pitfalls`, the classic broken lock recipes
 * run for real against a real server, each beside its fix, each measured.
 *
 * A recipe's run is a timeline of actors: child processes (A, B, C), each
 * with its own connection, that do what the recipe says at set times and
 * report each step ("acquired", "DEL -> 1") with the time since the run
 * began (CLOCK_MONOTONIC, shared by the processes of one boot) over one
 * pipe. The parent prints the timeline, and judges it from the reported
 * hold intervals, never from what a client believes: two intervals that
 * overlap are two holders. A hold on a lease ends at the lease's end even
 * when its holder never noticed.
 *
 * The Redis recipes speak the raw protocol through hiredis (the broken ones
 * are what dlock replaces); the fixes are the one atomic command the
 * write-ups give, or dlock itself. Divisions, in order: the help, the
 * timeline, dlock as the fix, Redis connections, the four Redis recipes,
 * the command (options, the recipes in turn, the summary).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "pitfalls.h"

enum recipe {
    R_SETNX_EXPIRE,
    R_GETSET_CLOCK,
    R_DEL_NO_OWNER,
    R_GET_THEN_DEL,
    R_ZK_HERD,
    R_COUNT
};

static const struct {
    const char *name, *title, *server;
} recipes[R_COUNT] = {
    {"setnx-expire",
     "SETNX, then EXPIRE as a second command, the holder "
     "killed between them",
     "redis"},
    {"getset-clock",
     "the SETNX/GETSET timestamp lock, two clients whose "
     "clocks differ",
     "redis"},
    {"del-no-owner", "DEL without an owner check, after the lease ran out",
     "redis"},
    {"get-then-del",
     "GET, compare, then DEL: the check outside the atomic "
     "step",
     "redis"},
    {"zk-herd",
     "every ZooKeeper waiter watching all the children (the "
     "herd)",
     "zk"},
};

void pf_help(void)
{
    printf(
        "usage: dlock demo pitfalls [--uri URI]... [--only LIST] "
        "[--waiters N]\n"
        "\n"
        "Runs the classic broken lock recipes for real, each beside its "
        "fix, and\nprints what happened and when, measured:\n"
        "  setnx-expire   SETNX then EXPIRE, the holder SIGKILLed between "
        "them: no\n"
        "                 TTL, a waiter times out; vs SET NX PX (freed after "
        "the lease)\n"
        "  getset-clock   the SETNX/GETSET timestamp lock, one client's clock "
        "2 s fast\n"
        "                 (an offset added to its time readings): the lock "
        "is stolen\n"
        "                 early, two holders; vs dlock's lease (server-side "
        "expiry)\n"
        "  del-no-owner   DEL after the lease ran out frees the next "
        "holder's lock and\n"
        "                 a third client gets in; vs dlock_release (owner "
        "checked)\n"
        "  get-then-del   GET, compare, DEL with the lease running out "
        "between them;\n"
        "                 vs the atomic compare-and-delete script\n"
        "  zk-herd        N waiters each watching all the children vs "
        "dlock's\n"
        "                 predecessor watch: the server's notifications and "
        "packets\n"
        "                 per hand-off (its mntr counters: the server must "
        "allow mntr\n"
        "                 in 4lw.commands.whitelist, and be quiet "
        "meanwhile)\n"
        "The Redis recipes need a redis:// URI and the last a zk:// one; a "
        "recipe\nwhose server is not given is skipped, saying so. The "
        "broken recipes use\nthe bare client libraries, never dlock.\n"
        "\n"
        "  --uri URI      a redis:// or zk:// server (repeatable; default "
        "$DLOCK_URI)\n"
        "  --only LIST    comma-separated recipe names (default: all)\n"
        "  --waiters N    zk-herd's waiting processes (default 10)\n"
        "\n"
        "Ends with a summary line per recipe: NAME, then failed|no-failure "
        "for the\nbroken recipe, then held|broke for the fix.\n"
        "exit status: 0 when every broken recipe that ran showed its failure "
        "and\nevery fix held; 1 otherwise; 64 bad option, or no recipe "
        "could run for\nwant of a server; 69 a server cannot be reached.\n");
}

/* The timeline and the actors serve the Redis recipes (the herd counts
 * otherwise, in pitfalls_zk.c). */
#ifdef DLOCK_TOOL_HIREDIS

/* ---- the timeline -------------------------------------------------------- */

#define PF_MAX_EV  64
#define PF_MAX_ACT 4

struct pf_event {
    char who, kind;     /* kind: H hold begins, E hold ends, N note, K note and
                       "kill me now", X could not run */
    long long t, lease; /* ms since the run began; H: the lease, 0: none */
    char text[200];
};

struct run {
    uint64_t t0;
    int fd[2];
    pid_t pid[PF_MAX_ACT];
    char who[PF_MAX_ACT];
    int nact;
    struct pf_event ev[PF_MAX_EV];
    int n;
    long long end; /* when the last actor was done */
    FILE *in;      /* the read end of the actors' pipe */
    bool failed;   /* an actor could not run (X) */
    char why[256];
};

struct actor {
    char who;
    int fd;
    uint64_t t0;
    const char *uri; /* the server's URI */
    const char *key; /* the lock's key (raw) or name (dlock) */
    int variant;     /* the recipe's own switch */
    long offset_ms;  /* getset-clock: how far this client's clock is off */
    long long base;  /* a_at() counts from here (ms since the run began) */
    redisContext *rc;
    dlock_client *dc;
    dlock_lock *lk;
};

static long long a_now(const struct actor *a)
{
    return (long long)((bn_now_ns() - a->t0) / 1000000u);
}

/* Sleep until ms after a->base. */
static void a_at(const struct actor *a, long long ms)
{
    long long now = a_now(a) - a->base;

    if (ms > now)
        bn_sleep_ms((uint32_t)(ms - now));
}

/* An event of actor a at t ms (a_now). */
static void vev_at(const struct actor *a, char kind, long long t,
                   long long lease, const char *fmt, va_list ap)
{
    char text[200], line[300];
    int n;

    vsnprintf(text, sizeof text, fmt, ap);
    text[strcspn(text, "\n")] = '\0';
    /* One write of less than PIPE_BUF: lines of actors never mix. */
    n = snprintf(line, sizeof line, "%c %c %lld %lld %s\n", a->who, kind, t,
                 lease, text);
    if (write(a->fd, line, (size_t)n) != n)
        _exit(EXIT_SOFTWARE);
}

/* An event of actor a now. */
static void ev(const struct actor *a, char kind, long long lease,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void ev(const struct actor *a, char kind, long long lease,
               const char *fmt, ...)
{
    long long t = a_now(a);
    va_list ap;

    va_start(ap, fmt);
    vev_at(a, kind, t, lease, fmt, ap);
    va_end(ap);
}

/* A hold's end, at t: when the release was sent, not when its answer
 * came. The next holder's H is read after its grant, which follows the
 * release's arrival, so a holder slowed down after its release (a busy
 * machine, a sanitizer) cannot look like two holders at once. */
static void ev_end(const struct actor *a, long long t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ev_end(const struct actor *a, long long t, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vev_at(a, 'E', t, 0, fmt, ap);
    va_end(ap);
}

static void run_begin(struct run *r)
{
    memset(r, 0, sizeof *r);
    if (pipe(r->fd) != 0) {
        r->failed = true;
        snprintf(r->why, sizeof r->why, "pipe: %s", strerror(errno));
    }
    r->t0 = bn_now_ns();
}

static long long run_now(const struct run *r)
{
    return (long long)((bn_now_ns() - r->t0) / 1000000u);
}

/* The parent's own step, on the same timeline. */
static void run_note(struct run *r, char who, char kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void run_note(struct run *r, char who, char kind, const char *fmt, ...)
{
    va_list ap;
    struct pf_event *e;

    if (r->n == PF_MAX_EV)
        return;
    e = &r->ev[r->n++];
    e->who = who;
    e->kind = kind;
    e->t = run_now(r);
    e->lease = 0;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    va_end(ap);
}

/* Start fn(a) in a child process as actor `who`. */
static void run_spawn(struct run *r, struct actor *a,
                      void (*fn)(struct actor *))
{
    pid_t pid;

    if (r->failed || r->nact == PF_MAX_ACT)
        return;
    a->fd = r->fd[1];
    a->t0 = r->t0;
    fflush(NULL); /* a child must not print what the parent buffered */
    pid = fork();
    if (pid == 0) {
        close(r->fd[0]);
        bn_child_init(getppid());
        fn(a);
        _exit(0);
    }
    if (pid < 0) {
        r->failed = true;
        snprintf(r->why, sizeof r->why, "fork: %s", strerror(errno));
        return;
    }
    r->pid[r->nact] = pid;
    r->who[r->nact++] = a->who;
}

/* Read the actors' reports until actor who reports an event of kind
 * (true), or until all are done (who 0, or EOF: false); SIGKILL an actor
 * the moment it asks (K). */
static bool run_read(struct run *r, char who, char kind)
{
    char line[300];

    if (r->in == NULL && (r->in = fdopen(r->fd[0], "r")) == NULL)
        return false;
    while (fgets(line, sizeof line, r->in) != NULL) {
        struct pf_event e;
        pid_t victim = -1;
        int off = 0;

        memset(&e, 0, sizeof e);
        if (sscanf(line, "%c %c %lld %lld %n", &e.who, &e.kind, &e.t, &e.lease,
                   &off) < 4)
            continue;
        snprintf(e.text, sizeof e.text, "%s", line + off);
        e.text[strcspn(e.text, "\n")] = '\0';
        if (e.kind == 'K')
            for (int i = 0; i < r->nact; i++)
                if (r->who[i] == e.who)
                    kill(victim = r->pid[i], SIGKILL);
        if (e.kind == 'X' && !r->failed) {
            r->failed = true;
            snprintf(r->why, sizeof r->why, "%c: %s", e.who, e.text);
        }
        if (r->n < PF_MAX_EV)
            r->ev[r->n++] = e;
        if (e.kind == 'K')
            run_note(r, 'P', 'N', "SIGKILL %c (pid %ld)", e.who, (long)victim);
        if (e.who == who && e.kind == kind)
            return true;
        if (e.kind == 'X' && who != 0)
            return false;
    }
    return false;
}

/* Wait for every actor; the run ends. */
static void run_collect(struct run *r)
{
    close(r->fd[1]);
    run_read(r, 0, 0);
    if (r->in != NULL)
        fclose(r->in);
    else
        close(r->fd[0]);
    for (int i = 0; i < r->nact; i++)
        bn_reap(r->pid[i], 10000);
    r->end = run_now(r);
}

/* Start actor a (A), and the others once A has the lock, with their
 * schedules counted from that moment (so a slow start of A cannot reorder
 * the story). False if A never got it. */
static bool run_after_a(struct run *r, struct actor *a, struct actor *others,
                        int n, void (*fn)(struct actor *))
{
    run_spawn(r, a, fn);
    if (!run_read(r, 'A', 'H'))
        return false;
    for (int i = 0; i < n; i++) {
        others[i].base = r->ev[r->n - 1].t;
        run_spawn(r, &others[i], fn);
    }
    return true;
}

static int ev_cmp(const void *x, const void *y)
{
    const struct pf_event *a = x, *b = y;

    return a->t < b->t ? -1 : a->t > b->t;
}

static void run_print(struct run *r)
{
    /* Stable enough: reports of one actor arrive in order. */
    for (int i = 1; i < r->n; i++)
        for (int j = i; j > 0 && ev_cmp(&r->ev[j - 1], &r->ev[j]) > 0; j--) {
            struct pf_event t = r->ev[j];
            r->ev[j] = r->ev[j - 1];
            r->ev[j - 1] = t;
        }
    for (int i = 0; i < r->n; i++)
        printf("    %5lld ms  %c  %s\n", r->ev[i].t, r->ev[i].who,
               r->ev[i].text);
}

/*
 * The longest overlap of two different actors' holds, in ms (0: one
 * holder at a time), and who. A hold runs from H (read after the grant)
 * to its actor's next E (read before the release was sent: ev_end), or
 * to the end of the run, and no longer than its lease.
 */
static long long run_overlap(const struct run *r, char *x, char *y)
{
    long long s[PF_MAX_EV], e[PF_MAX_EV], best = 0;
    char w[PF_MAX_EV];
    int n = 0;

    for (int i = 0; i < r->n; i++) {
        if (r->ev[i].kind != 'H')
            continue;
        s[n] = r->ev[i].t;
        e[n] = r->end;
        w[n] = r->ev[i].who;
        for (int j = i + 1; j < r->n; j++)
            if (r->ev[j].who == w[n] &&
                (r->ev[j].kind == 'E' || r->ev[j].kind == 'H')) {
                e[n] = r->ev[j].t;
                break;
            }
        if (r->ev[i].lease > 0 && s[n] + r->ev[i].lease < e[n])
            e[n] = s[n] + r->ev[i].lease;
        n++;
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            long long lo = s[i] > s[j] ? s[i] : s[j];
            long long hi = e[i] < e[j] ? e[i] : e[j];
            if (w[i] != w[j] && hi - lo > best) {
                best = hi - lo;
                *x = w[i] < w[j] ? w[i] : w[j];
                *y = w[i] < w[j] ? w[j] : w[i];
            }
        }
    return best;
}

/* Wait for the actors, print the timeline and who held it together;
 * false (res says why) if an actor could not run. */
static bool run_judge(struct run *r, struct pf_result *res, long long *ov,
                      char *x, char *y)
{
    run_collect(r);
    run_print(r);
    if (r->failed) {
        res->unreachable = true;
        snprintf(res->why, sizeof res->why, "%s", r->why);
        return false;
    }
    *x = *y = '?';
    *ov = run_overlap(r, x, y);
    if (*ov > 0)
        printf("    => %c and %c both held it for %lld ms\n", *x, *y, *ov);
    else
        printf("    => one holder at a time\n");
    return true;
}

/* The time of actor who's first event of kind whose text starts with
 * prefix (NULL: any), or -1. */
static long long run_find(const struct run *r, char who, char kind,
                          const char *prefix)
{
    for (int i = 0; i < r->n; i++)
        if (r->ev[i].who == who && r->ev[i].kind == kind &&
            (prefix == NULL ||
             strncmp(r->ev[i].text, prefix, strlen(prefix)) == 0))
            return r->ev[i].t;
    return -1;
}

/* ---- dlock as the fix ---------------------------------------------------- */

/* Open a client and a lock handle for actor a with this lease; X on
 * failure. */
static bool a_dlock(struct actor *a, uint32_t lease_ms, uint32_t flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    int rc;

    o.lease_ms = lease_ms;
    o.flags = flags;
    if ((rc = dlock_client_open(&a->dc, a->uri, NULL)) != DLOCK_OK) {
        ev(a, 'X', 0, "%s", dlock_client_errmsg(a->dc));
        return false;
    }
    if ((rc = dlock_lock_new(&a->lk, a->dc, a->key, &o)) != DLOCK_OK) {
        ev(a, 'X', 0, "%s", dlock_client_errmsg(a->dc));
        return false;
    }
    return true;
}

/* Poll dlock_try_acquire every 10 ms until ms after the run began. */
static bool a_dlock_poll(struct actor *a, long long until, uint32_t lease)
{
    int rc;

    while ((rc = dlock_try_acquire(a->lk)) == DLOCK_EBUSY && a_now(a) < until)
        bn_sleep_ms(10);
    if (rc == DLOCK_OK) {
        ev(a, 'H', lease, "dlock_acquire -> OK, lease %u ms (fence %llu)",
           lease, (unsigned long long)dlock_fence(a->lk));
        return true;
    }
    ev(a, 'N', 0, "gave up: %s",
       rc == DLOCK_EBUSY ? "still held" : dlock_lock_errmsg(a->lk));
    return false;
}

static void a_dlock_release(struct actor *a)
{
    long long t = a_now(a);
    int rc = dlock_release(a->lk);

    ev_end(a, t, "dlock_release -> %s",
           rc == DLOCK_OK ? "OK" : dlock_err_name(rc));
}

static void a_dlock_close(struct actor *a)
{
    dlock_lock_free(a->lk);
    dlock_client_close(a->dc);
}

/* ---- Redis, raw ---------------------------------------------------------- */

/* Percent-decode [s, s+n) into out. */
static void pct_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        unsigned v;
        if (s[i] == '%' && i + 2 < n && sscanf(s + i + 1, "%2x", &v) == 1) {
            out[o++] = (char)v;
            i += 2;
        } else
            out[o++] = s[i];
    }
    out[o] = '\0';
}

/* Connect to the redis:// URI as it names host, port, user, password and
 * database (its query parameters are dlock's, not the server's). */
redisContext *pf_redis_connect(const char *uri, char *err, size_t cap)
{
    struct tool_uri_spans s;
    char host[256], user[128] = "", pass[256] = "";
    int port = 6379, db = 0;
    size_t h;
    redisContext *c;
    redisReply *rep;

    if (strncmp(uri, "redis://", 8) != 0 || !tool_uri_spans(uri, &s)) {
        snprintf(err, cap, "not a redis:// URI");
        return NULL;
    }
    h = s.auth;
    if (s.at != SIZE_MAX) {
        size_t ue = s.colon != SIZE_MAX ? s.colon : s.at;
        pct_decode(uri + s.auth, ue - s.auth, user, sizeof user);
        if (s.colon != SIZE_MAX)
            pct_decode(uri + s.colon + 1, s.at - s.colon - 1, pass,
                       sizeof pass);
        h = s.at + 1;
    }
    if (uri[h] == '[') {
        const char *rb = memchr(uri + h, ']', s.end - h);
        size_t n = rb != NULL ? (size_t)(rb - uri) - h - 1 : 0;
        snprintf(host, sizeof host, "%.*s", (int)n, uri + h + 1);
        if (rb != NULL && rb[1] == ':')
            port = atoi(rb + 2);
    } else {
        size_t n = strcspn(uri + h, ":/?#,");
        snprintf(host, sizeof host, "%.*s", (int)n, uri + h);
        if (uri[h + n] == ':')
            port = atoi(uri + h + n + 1);
    }
    if (uri[s.end] == '/')
        db = atoi(uri + s.end + 1);
    c = redisConnectWithTimeout(host, port, (struct timeval){2, 0});
    if (c == NULL || c->err) {
        snprintf(err, cap, "redis: connect to %s:%d: %s", host, port,
                 c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, (struct timeval){5, 0});
    rep = pass[0] == '\0' ? NULL
          : user[0]       ? redisCommand(c, "AUTH %s %s", user, pass)
                          : redisCommand(c, "AUTH %s", pass);
    if (pass[0] != '\0' && (rep == NULL || rep->type == REDIS_REPLY_ERROR)) {
        snprintf(err, cap, "redis: AUTH: %s", rep ? rep->str : c->errstr);
        freeReplyObject(rep);
        redisFree(c);
        return NULL;
    }
    freeReplyObject(rep);
    if (db != 0) {
        rep = redisCommand(c, "SELECT %d", db);
        freeReplyObject(rep);
    }
    return c;
}

static bool a_redis(struct actor *a)
{
    char err[256];

    if ((a->rc = pf_redis_connect(a->uri, err, sizeof err)) == NULL) {
        ev(a, 'X', 0, "%s", err);
        return false;
    }
    return true;
}

/* A command's reply as short text: "OK", "1", "(nil)", "ERR ...". */
static const char *rtext(redisReply *r, char *buf, size_t cap)
{
    if (r == NULL)
        snprintf(buf, cap, "(no reply)");
    else if (r->type == REDIS_REPLY_INTEGER)
        snprintf(buf, cap, "%lld", r->integer);
    else if (r->type == REDIS_REPLY_NIL)
        snprintf(buf, cap, "(nil)");
    else
        snprintf(buf, cap, "%s", r->str != NULL ? r->str : "?");
    return buf;
}

/* One command; its reply as text into buf, its integer (or -2) back. */
static long long rcmd(struct actor *a, char *buf, size_t cap, const char *fmt,
                      ...)
{
    va_list ap;
    redisReply *r;
    long long v;

    va_start(ap, fmt);
    r = redisvCommand(a->rc, fmt, ap);
    va_end(ap);
    rtext(r, buf, cap);
    v = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -2;
    if (r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
        v = 1;
    freeReplyObject(r);
    return v;
}

/* Poll SET key who NX PX lease every 10 ms until ms after the start. */
static bool a_set_poll(struct actor *a, long long until, long long lease)
{
    char who[2] = {a->who, '\0'}, t[64];

    for (;;) {
        if (rcmd(a, t, sizeof t, "SET %s %s NX PX %lld", a->key, who, lease) ==
            1) {
            ev(a, 'H', lease, "SET %s NX PX %lld -> OK: acquired", who, lease);
            return true;
        }
        if (a_now(a) >= until) {
            ev(a, 'N', 0, "gave up: the key is still there");
            return false;
        }
        bn_sleep_ms(10);
    }
}

static const char cad_script[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

/* ---- setnx-expire -------------------------------------------------------- */

#define R1_LEASE 500

static void r1_holder(struct actor *a)
{
    char t[64];

    if (!a_redis(a))
        return;
    if (a->variant == 0) {
        rcmd(a, t, sizeof t, "SETNX %s A", a->key);
        ev(a, 'H', 0, "SETNX key A -> %s: acquired", t);
        ev(a, 'K', 0, "next: EXPIRE key 1; killed before it");
    } else {
        rcmd(a, t, sizeof t, "SET %s A NX PX %d", a->key, R1_LEASE);
        ev(a, 'H', R1_LEASE, "SET key A NX PX %d -> %s: acquired, with its "
           "expiry", R1_LEASE, t);
        ev(a, 'K', 0, "killed while holding");
    }
    for (;;)
        pause();
}

static void recipe_setnx_expire(const char *uri, const char *key,
                                struct pf_result *res)
{
    long long ttl[2] = {0, 0}, got[2] = {-1, -1};
    for (int v = 0; v < 2; v++) {
        struct run r;
        struct actor a = {.who = 'A', .uri = uri, .key = key, .variant = v};
        char t[64];

        printf(v == 0 ? "  broken: SETNX key A; (SIGKILL); EXPIRE key 1 "
                        "never runs. W waits %d ms:\n"
                      : "  fix: SET key A NX PX %d, one command; the same "
                        "SIGKILL; W waits again:\n",
               v == 0 ? 3 * R1_LEASE : R1_LEASE);
        run_begin(&r);
        run_spawn(&r, &a, r1_holder);
        run_collect(&r);
        if (r.failed) {
            res->unreachable = true;
            snprintf(res->why, sizeof res->why, "%s", r.why);
            return;
        }
        /* The waiter W is this process, on a connection of its own. */
        struct actor w = {.who = 'W', .uri = uri, .key = key};
        char err[256];
        if ((w.rc = pf_redis_connect(uri, err, sizeof err)) == NULL) {
            res->unreachable = true;
            snprintf(res->why, sizeof res->why, "%s", err);
            return;
        }
        ttl[v] = rcmd(&w, t, sizeof t, v == 0 ? "TTL %s" : "PTTL %s", key);
        run_note(&r, 'W', 'N', "%s key -> %s%s", v == 0 ? "TTL" : "PTTL", t,
                 ttl[v] == -1 ? " (no expiry: held forever)" : " ms left");
        long long start = run_now(&r), tries = 0;
        while (run_now(&r) < start + 3 * R1_LEASE) {
            tries++;
            if (rcmd(&w, t, sizeof t, "SET %s W NX PX %d", key, R1_LEASE) ==
                1) {
                got[v] = run_now(&r) - start;
                run_note(&r, 'W', 'N',
                         "SET key W NX PX %d -> OK after %lld "
                         "ms (%lld tries)",
                         R1_LEASE, got[v], tries);
                break;
            }
            bn_sleep_ms(10);
        }
        if (got[v] < 0)
            run_note(&r, 'W', 'N',
                     "timed out after %lld ms (%lld tries): "
                     "the key is still there",
                     run_now(&r) - start, tries);
        rcmd(&w, t, sizeof t, "DEL %s", key);
        redisFree(w.rc);
        run_print(&r);
    }
    res->ran = true;
    res->broken_failed = ttl[0] == -1 && got[0] < 0;
    res->fix_held = ttl[1] > 0 && got[1] >= 0;
    snprintf(res->broken, sizeof res->broken, "TTL %lld, waiter %s", ttl[0],
             got[0] < 0 ? "timed out: stuck forever" : "got in");
    snprintf(res->fix, sizeof res->fix,
             "waiter in after %lld ms, the lease being %d ms", got[1],
             R1_LEASE);
}

/* ---- getset-clock -------------------------------------------------------- */

#define R2_TIMEOUT 1000 /* the recipe's lock timeout, and dlock's lease */
#define R2_SKEW    2000 /* B's clock is this far ahead */

static long long wall_ms(const struct actor *a)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + a->offset_ms;
}

/* The old redis.io recipe: SETNX lock <expiry>; else GET it and, if that
 * time has passed by this client's clock, GETSET a new expiry and win if
 * the old value had passed too. Poll until `until`. */
static bool gs_acquire(struct actor *a, long long until, long long *mine)
{
    char t[64];

    for (;;) {
        long long now = wall_ms(a), exp = now + R2_TIMEOUT + 1;
        redisReply *r;
        if (rcmd(a, t, sizeof t, "SETNX %s %lld", a->key, exp) == 1) {
            *mine = exp;
            ev(a, 'H', 0, "SETNX key <now+%d> -> 1: acquired", R2_TIMEOUT);
            return true;
        }
        r = redisCommand(a->rc, "GET %s", a->key);
        long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        freeReplyObject(r);
        if (v != 0 && v < now) {
            r = redisCommand(a->rc, "GETSET %s %lld", a->key, exp);
            long long old =
                r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
            freeReplyObject(r);
            if (old < now) {
                *mine = exp;
                ev(a, 'H', 0,
                   "GET -> an expiry %lld ms ago by my clock: "
                   "GETSET -> it again: acquired",
                   now - v);
                return true;
            }
        }
        if (a_now(a) >= until) {
            ev(a, 'N', 0, "gave up");
            return false;
        }
        bn_sleep_ms(10);
    }
}

/* A holds 600 ms from its grant; B tries from 150 ms after that grant and
 * holds 200 ms. */
static void r2_actor(struct actor *a)
{
    long long start = a->who == 'A' ? 0 : 150, hold = a->who == 'A' ? 600 : 200;
    char t[64];

    if (a->variant == 0 ? !a_redis(a) : !a_dlock(a, R2_TIMEOUT, 0))
        return;
    a_at(a, start);
    ev(a, 'N', 0, "my clock reads %+ld ms off; trying", a->offset_ms);
    if (a->variant == 0) {
        long long mine;
        if (gs_acquire(a, start + 3000, &mine)) {
            bn_sleep_ms((uint32_t)hold);
            if (wall_ms(a) < mine) {
                long long at = a_now(a);
                rcmd(a, t, sizeof t, "DEL %s", a->key);
                ev_end(a, at,
                       "DEL key -> %s (my expiry not reached by my "
                       "clock)",
                       t);
            } else
                ev(a, 'E', 0, "done; past my expiry, so no DEL");
        }
        redisFree(a->rc);
        return;
    }
    if (a_dlock_poll(a, start + 3000, R2_TIMEOUT)) {
        bn_sleep_ms((uint32_t)hold);
        a_dlock_release(a);
    }
    a_dlock_close(a);
}

static void recipe_getset_clock(const char *uri, const char *key,
                                struct pf_result *res)
{
    long long ov[2];
    char x[2], y[2];

    for (int v = 0; v < 2; v++) {
        struct run r;
        struct actor a = {.who = 'A', .uri = uri, .key = key, .variant = v};
        struct actor b = a;
        char name[160];

        b.who = 'B';
        b.offset_ms = R2_SKEW;
        if (v == 1) {
            snprintf(name, sizeof name, "%s-dlock", key);
            a.key = b.key = name;
        }
        printf(v == 0 ? "  broken: the lock's value is <now + %d ms> by the "
                        "client's clock; B's clock\n  is %d ms fast (an "
                        "offset added to its readings). A holds 600 ms, B "
                        "tries\n  150 ms after A's grant:\n"
                      : "  fix: dlock's lease lock, lease %d ms, counted by "
                        "the server (PX); B's clock\n  is %d ms fast as "
                        "before, and nothing reads it:\n",
               R2_TIMEOUT, R2_SKEW);
        run_begin(&r);
        run_after_a(&r, &a, &b, 1, r2_actor);
        if (!run_judge(&r, res, &ov[v], &x[v], &y[v]))
            return;
        if (v == 0) {
            struct actor w = {.who = 'W', .uri = uri, .key = key};
            char err[256], t[64];
            if ((w.rc = pf_redis_connect(uri, err, sizeof err)) != NULL) {
                rcmd(&w, t, sizeof t, "DEL %s", key);
                redisFree(w.rc);
            }
        }
    }
    res->ran = true;
    res->broken_failed = ov[0] > 0;
    res->fix_held = ov[1] == 0;
    snprintf(res->broken, sizeof res->broken,
             "stolen early: two holders for %lld ms", ov[0]);
    snprintf(res->fix, sizeof res->fix, "one holder at a time");
}

/* ---- del-no-owner and get-then-del --------------------------------------- */

/*
 * A takes the lock with a 500 ms lease and stalls to 700 ms; B polls from
 * 50 ms and, once in (about 500 ms), holds 800 ms on a 3 s lease; C polls
 * from 750 ms. A's late release is what differs:
 *   REL_DEL     DEL key                         (del-no-owner, broken)
 *   REL_GETDEL  GET at 300 ms, compare; DEL at 700 ms (get-then-del, broken)
 *   REL_CAD     the compare-and-delete script at 700 ms (get-then-del, fix)
 *   REL_DLOCK   everyone through dlock, A's lock without renewal
 *               (del-no-owner, fix)
 */
enum rel { REL_DEL, REL_GETDEL, REL_CAD, REL_DLOCK };
#define R3_LEASE 500
#define R3_LONG  3000

static void r3_release(struct actor *a)
{
    char who[2] = {a->who, '\0'}, t[64];
    long long v;

    long long at = a_now(a);

    switch ((enum rel)a->variant) {
    case REL_DEL:
        v = rcmd(a, t, sizeof t, "DEL %s", a->key);
        ev_end(a, at, "DEL key -> %s%s", t,
               v == 1 && a->who == 'A' ? ": deleted a lock, not A's" : "");
        break;
    case REL_GETDEL:
        rcmd(a, t, sizeof t, "GET %s", a->key);
        if (strcmp(t, who) != 0) {
            ev(a, 'E', 0, "GET key -> %s: not mine, no DEL", t);
            break;
        }
        ev(a, 'N', 0, "GET key -> %s: mine, so DEL it next%s", t,
           a->who == 'A' ? "; stalls before the DEL (a GC pause, a slow "
                           "network) past its lease"
                         : "");
        if (a->who == 'A')
            a_at(a, 700);
        at = a_now(a);
        v = rcmd(a, t, sizeof t, "DEL %s", a->key);
        ev_end(a, at, "DEL key -> %s%s", t,
               v == 1 && a->who == 'A' ? ": deleted a lock, not A's" : "");
        break;
    case REL_CAD:
        v = rcmd(a, t, sizeof t, "EVAL %s 1 %s %s", cad_script, a->key, who);
        ev_end(a, at, "EVAL compare-and-delete -> %s%s", t,
               v == 0 ? ": not mine, left alone" : "");
        break;
    case REL_DLOCK:
        a_dlock_release(a);
        break;
    }
}

static void r3_actor(struct actor *a)
{
    long long start = a->who == 'A' ? 0 : a->who == 'B' ? 50 : 750;
    long long lease = a->who == 'A' ? R3_LEASE : R3_LONG;
    long long hold = a->who == 'B' ? 800 : 200;
    bool dl = a->variant == REL_DLOCK;

    if (dl ? !a_dlock(a, (uint32_t)lease,
                      a->who == 'A' ? DLOCK_LOCK_NO_WATCHDOG : 0)
           : !a_redis(a))
        return;
    a_at(a, start);
    if (dl ? a_dlock_poll(a, start + 3000, (uint32_t)lease)
           : a_set_poll(a, start + 3000, lease)) {
        if (a->who == 'A') {
            a->base = a_now(a); /* A's times count from its grant */
            a_at(a, 300);
            if (a->variant != REL_GETDEL) {
                ev(a, 'N', 0,
                   "stalls (a GC pause, a slow disk) past its "
                   "lease");
                a_at(a, 700);
            }
        } else
            bn_sleep_ms((uint32_t)hold);
        r3_release(a);
    }
    if (dl)
        a_dlock_close(a);
    else
        redisFree(a->rc);
}

static void recipe_owner(const char *uri, const char *key, enum rel broken,
                         enum rel fix, struct pf_result *res)
{
    long long ov[2];
    char x[2], y[2], arel[2][64] = {"", ""};

    for (int v = 0; v < 2; v++) {
        enum rel rel = v == 0 ? broken : fix;
        struct run r;
        struct actor a = {
            .who = 'A', .uri = uri, .key = key, .variant = (int)rel};
        struct actor b = a, c = a;
        char name[160];

        b.who = 'B';
        c.who = 'C';
        if (rel == REL_DLOCK) {
            snprintf(name, sizeof name, "%s-dlock", key);
            a.key = b.key = c.key = name;
        }
        static const char *const how[] = {
            "DEL key, no owner check", "GET key, compare, DEL key",
            "EVAL compare-and-delete (one atomic step)",
            "dlock_release (owner checked, atomically)"};
        printf("  %s: A's lease is %d ms and it stalls to 700 ms; then %s.\n"
               "  B waits from 50 ms, C from 750 ms%s\n  (times after "
               "A's grant):\n",
               v == 0 ? "broken" : "fix", R3_LEASE, how[rel],
               rel == REL_DLOCK ? " (dlock_try_acquire every 10 ms)"
                                : " (SET NX PX every 10 ms)");
        run_begin(&r);
        struct actor bc[2] = {b, c};
        run_after_a(&r, &a, bc, 2, r3_actor);
        if (!run_judge(&r, res, &ov[v], &x[v], &y[v]))
            return;
        for (int i = 0; i < r.n; i++)
            if (r.ev[i].who == 'A' && r.ev[i].kind == 'E')
                snprintf(arel[v], sizeof arel[v], "%.63s", r.ev[i].text);
        /* C must have got in: otherwise nothing was shown. */
        if (run_find(&r, 'C', 'H', NULL) < 0)
            ov[v] = -1;
    }
    res->ran = true;
    res->broken_failed = ov[0] > 0;
    /* The fix refused A's late release, and C waited for B. */
    res->fix_held = ov[1] == 0 && (strstr(arel[1], "-> 0") != NULL ||
                                   strstr(arel[1], "ENOTOWNER") != NULL ||
                                   strstr(arel[1], "ELOST") != NULL);
    snprintf(res->broken, sizeof res->broken,
             "%c and %c held it together for %lld ms", x[0], y[0], ov[0]);
    snprintf(res->fix, sizeof res->fix, "A's release: %s", arel[1]);
}
#endif /* DLOCK_TOOL_HIREDIS */

/* ---- the command --------------------------------------------------------- */

static bool scheme_is(const char *uri, const char *scheme)
{
    size_t n = strlen(scheme);

    return uri != NULL && strncmp(uri, scheme, n) == 0 &&
           strncmp(uri + n, "://", 3) == 0;
}

int pf_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"uri", required_argument, NULL, 'u'},
        {"only", required_argument, NULL, 'o'},
        {"waiters", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *redis = NULL, *zk = NULL;
    bool want[R_COUNT];
    unsigned long waiters = 10;
    struct pf_result res[R_COUNT];
    int opt, ran = 0, good = 0, status = 0;
    uint64_t t0 = bn_now_ns();

    for (int i = 0; i < R_COUNT; i++)
        want[i] = true;
    memset(res, 0, sizeof res);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 'u': {
            bool r = scheme_is(optarg, "redis");
            const char **slot =
                r ? &redis
                : scheme_is(optarg, "zk") || scheme_is(optarg, "zookeeper")
                    ? &zk
                    : NULL;
            if (slot == NULL || *slot != NULL) {
                /* Not quoted: a URI may carry a password. */
                tool_err("demo pitfalls", "--uri: %s",
                         slot == NULL ? "expected a redis:// or zk:// URI"
                         : r          ? "a second redis:// URI (give one)"
                                      : "a second zk:// URI (give one)");
                return EXIT_USAGE;
            }
            *slot = optarg;
            break;
        }
        case 'o': {
            char buf[256], *save = NULL;
            snprintf(buf, sizeof buf, "%s", optarg);
            for (int i = 0; i < R_COUNT; i++)
                want[i] = false;
            for (char *w = strtok_r(buf, ",", &save); w != NULL;
                 w = strtok_r(NULL, ",", &save)) {
                int i = 0;
                while (i < R_COUNT && strcmp(recipes[i].name, w) != 0)
                    i++;
                if (i == R_COUNT) {
                    tool_err("demo pitfalls",
                             "--only: no recipe '%s' "
                             "(there are: setnx-expire, getset-clock, "
                             "del-no-owner, get-then-del, zk-herd)",
                             w);
                    return EXIT_USAGE;
                }
                want[i] = true;
            }
            if (buf[strspn(buf, ",")] == '\0') {
                tool_err("demo pitfalls", "--only: empty (expected recipe "
                                          "names, comma-separated)");
                return EXIT_USAGE;
            }
            break;
        }
        case 'w':
            if (!tool_uint("demo pitfalls", "--waiters", optarg, 2, 50,
                           &waiters))
                return EXIT_USAGE;
            break;
        case 'h':
            pf_help();
            return 0;
        case ':':
            tool_err("demo pitfalls", "%s: needs a value", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            tool_err("demo pitfalls", "unknown option '%s'", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        tool_err("demo pitfalls", "unexpected argument '%s'", argv[optind]);
        return EXIT_USAGE;
    }
    if (redis == NULL && zk == NULL) {
        const char *env = getenv("DLOCK_URI");
        if (scheme_is(env, "redis"))
            redis = env;
        else if (scheme_is(env, "zk") || scheme_is(env, "zookeeper"))
            zk = env;
    }

    char key[128];
    snprintf(key, sizeof key, "dlock-pitfalls:%ld", (long)getpid());
    for (int i = 0; i < R_COUNT; i++) {
        const char *uri = strcmp(recipes[i].server, "redis") == 0 ? redis : zk;
        char red[200], k[160];
        if (!want[i])
            continue;
        printf("== %s: %s\n", recipes[i].name, recipes[i].title);
        if (uri == NULL) {
            snprintf(res[i].why, sizeof res[i].why, "no %s:// URI given",
                     recipes[i].server);
            printf("  skipped: %s (--uri %s://HOST:PORT)\n\n", res[i].why,
                   recipes[i].server);
            continue;
        }
        bn_redact(uri, red, sizeof red);
        printf("  on %s\n", red);
        snprintf(k, sizeof k, "%s:%s", key, recipes[i].name);
        switch ((enum recipe)i) {
#ifdef DLOCK_TOOL_HIREDIS
        case R_SETNX_EXPIRE:
            recipe_setnx_expire(uri, k, &res[i]);
            break;
        case R_GETSET_CLOCK:
            recipe_getset_clock(uri, k, &res[i]);
            break;
        case R_DEL_NO_OWNER:
            recipe_owner(uri, k, REL_DEL, REL_DLOCK, &res[i]);
            break;
        case R_GET_THEN_DEL:
            recipe_owner(uri, k, REL_GETDEL, REL_CAD, &res[i]);
            break;
#else
        case R_SETNX_EXPIRE:
        case R_GETSET_CLOCK:
        case R_DEL_NO_OWNER:
        case R_GET_THEN_DEL:
            snprintf(res[i].why, sizeof res[i].why,
                     "this dlock was built without hiredis");
            break;
#endif
        case R_ZK_HERD:
            pf_zk_herd(uri, (unsigned)waiters, &res[i]);
            break;
        case R_COUNT:
            break;
        }
        if (res[i].ran)
            printf("  verdict: broken recipe %s (%s); fix %s (%s)\n\n",
                   res[i].broken_failed ? "FAILED as expected" : "did NOT fail",
                   res[i].broken, res[i].fix_held ? "HELD" : "BROKE",
                   res[i].fix);
        else
            printf("  could not run: %s\n\n", res[i].why);
    }

    printf("%-14s %-11s %-6s %s\n", "summary", "broken", "fix", "measured");
    for (int i = 0; i < R_COUNT; i++) {
        if (!want[i])
            continue;
        if (!res[i].ran) {
            printf("%-14s %-11s %-6s %s\n", recipes[i].name,
                   res[i].unreachable ? "not-run" : "skipped", "-", res[i].why);
            if (res[i].unreachable)
                status = EXIT_UNAVAILABLE;
            continue;
        }
        ran++;
        good += res[i].broken_failed && res[i].fix_held;
        printf("%-14s %-11s %-6s %s | %s\n", recipes[i].name,
               res[i].broken_failed ? "failed" : "no-failure",
               res[i].fix_held ? "held" : "broke", res[i].broken, res[i].fix);
    }
    printf("\n%d of %d recipes: the broken one failed and the fix held "
           "(%.1f s).\n",
           good, ran, (double)(bn_now_ns() - t0) / 1e9);
    if (status != 0)
        return status;
    if (ran == 0) {
        tool_err("demo pitfalls", "nothing ran (the summary says why): give "
                                  "--uri redis://HOST:PORT and/or --uri "
                                  "zk://HOST:PORT");
        return EXIT_USAGE;
    }
    return good == ran ? 0 : 1;
}
