/*
 * check.c: the checker of a history run, and the summary of several.
 *
 *   history check --dir DIR [--json FILE] [--expect KINDS]
 *   history summary FILE.json...
 *
 * It reads DIR/meta, run.log, every w*.log, store.log and counter (formats
 * in worker.c and run.c) and counts, with timestamps from CLOCK_MONOTONIC
 * (one clock for every process of the machine):
 *
 *   overlap       two handles' held windows overlap, at least one of them
 *                 a writer's (readers' windows may overlap each other). A
 *                 window runs from the return of dlock_acquire to the start
 *                 of the last dlock_held() call that said 1; both ends are
 *                 conservative (the handle believed it held at both), so
 *                 any overlap is a moment when both believed.
 *   lost_update   two read-modify-writes of the unfenced counter by
 *                 different handles overlap in time, each bracketed by
 *                 dlock_held() == 1 before and after. (For information: the
 *                 increments made against the final counter.)
 *   over_permits  (a run with --permits N) more than N permit holders'
 *                 held windows overlap at one instant. Permit holders read
 *                 the counter as readers do, and their windows may overlap
 *                 up to N; their fences must all differ, and a grant's fence
 *                 must be above that of every grant returned before its
 *                 acquire began (fence_order).
 *   reader_saw_write
 *                 a reader's counter reads differ within one grant, both
 *                 bracketed by dlock_held() == 1 before and after (so the
 *                 reader had not been told of a loss by then): something
 *                 wrote the counter inside a shared holding (a writer
 *                 whose own held() said 1 around its write, or nothing
 *                 logged at all). (For
 *                 information: reader grants and how many pairs of reader
 *                 windows overlapped, which shows shared mode at work.)
 *   stale_write   the store accepted a write whose fence equals the highest
 *                 accepted one, which an earlier grant wrote (the store
 *                 accepts nothing lower): two grants shared a fence.
 *   fence_order   a grant that was believed held (a held sample said 1) has
 *                 a fence not greater than the fence of every grant whose
 *                 acquire returned before it (for a reader: of every
 *                 writer's grant; readers that hold together may return in
 *                 any order); or its fence changed while held. If a server
 *                 granted the earlier one first, it did so while this one
 *                 was still valid, so both were held.
 *   hang          a call took longer than its own timeout plus the slack,
 *                 not counting time its process spent SIGSTOPped; a call
 *                 still running when the supervisor had to kill the worker
 *                 counts if it had run that long.
 *   stall         the lock was held by nobody, some worker was waiting in
 *                 dlock_acquire, and no fault was in effect (a fault
 *                 explains its own time plus the recovery bound), for longer
 *                 than the stall bound.
 *   worker_error  a worker failed (its own error lines, or it died other
 *                 than by the nemesis's SIGKILL).
 *   no_progress   not a single grant in the whole run.
 *
 * stale_write and fence_order are violations only on modes that claim
 * DLOCK_CAP_FENCING (or with a fake fence); elsewhere they are reported for
 * information. The bounds come from hi_bounds_of() (util.c) and are printed.
 *
 * Sections: containers · reading the run · the analyses · the report · main.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock/dlock.h>
#include <json-c/json.h>

#include "history.h"

#define NS_PER_MS 1000000u
#define MAX_EXAMPLES 5

/* ---- containers ---------------------------------------------------------------- */

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    *cap = *cap ? *cap * 2 : 64;
    if (*cap < need)
        *cap = need;
    p = realloc(p, *cap * size);
    if (p == NULL) {
        fprintf(stderr, "history check: out of memory\n");
        exit(2);
    }
    return p;
}

/* Zeroed room for n + 1 items (never NULL: out of memory ends the run). */
static void *zalloc(size_t n, size_t size)
{
    void *p = calloc(n + 1, size);

    if (p == NULL) {
        fprintf(stderr, "history check: out of memory\n");
        exit(2);
    }
    return p;
}

#define VEC(T)                                                                 \
    struct {                                                                   \
        T *v;                                                                  \
        size_t n, cap;                                                         \
    }
#define PUSH(vec)                                                              \
    ((vec).v = grow((vec).v, &(vec).cap, (vec).n + 1, sizeof *(vec).v),        \
     memset(&(vec).v[(vec).n], 0, sizeof *(vec).v), &(vec).v[(vec).n++])

/* ---- what a run is made of ----------------------------------------------------- */

struct wlog {               /* one worker process */
    char name[32];          /* "w<slot>.<gen>" */
    unsigned slot, gen;
    long pid;
    uint64_t t_last;        /* its last whole record */
    uint64_t death;         /* when it was SIGKILLed, 0 if not */
    bool by_nemesis;        /* ... by the nemesis (else by the supervisor) */
    bool reaped, exited_ok; /* its exit as the supervisor saw it */
    int status;
    size_t first_grant, ngrants;
    unsigned errors;        /* E records */
};

struct grant {
    size_t w;
    uint32_t seq;
    uint64_t t0, t1;        /* acquire called, returned */
    uint64_t fence;
    uint64_t last_held;     /* start of the last held() == 1 sample, 0 none */
    uint64_t end;           /* release returned, or the process ended */
    bool released, fence_changed;
    bool shared;            /* a reader's or a permit holder's grant */
    bool permit;            /* a permit holder's */
};

struct read {               /* a reader's look at the counter */
    size_t g;               /* its grant */
    uint64_t t;
    unsigned long long v;
    bool bracketed;         /* held() said 1 before and after */
};

struct rmw {
    size_t w;
    uint32_t seq;
    uint64_t t0, t1;
    bool bracketed;         /* held() said 1 before and after */
};

struct call {
    size_t w;
    char type;              /* O A R C */
    uint64_t t0, t1;        /* t1 0: never returned */
    int rc;
};

struct fault {
    int kind;
    uint64_t t0, t1;
    bool ok;
    long pid;               /* process faults: the target */
    char target[96], detail[96];
};

struct srec {               /* a store decision */
    char res;
    uint64_t fence;
    size_t grant;           /* SIZE_MAX if unknown */
};

struct run {
    struct hi_meta m;
    struct hi_bounds b;
    char dir[HI_PATH_MAX];
    uint64_t t_begin, t_stop, t_end;
    VEC(struct wlog) w;
    VEC(struct grant) g;
    VEC(struct rmw) rmw;
    VEC(struct read) reads;
    VEC(struct call) calls;
    VEC(struct fault) faults;
    VEC(struct srec) store;
    unsigned long long counter;
    unsigned torn, unparsed, lost_calls;
    unsigned acq_rc[16], rel_rc[16]; /* by -code */
    uint64_t spawns;
};

/* A violation kind: a count, and a few examples in words. */
struct finding {
    const char *kind;
    uint64_t count;
    bool counts;            /* a violation here (else for information) */
    char ex[MAX_EXAMPLES][256];
    unsigned nex;
};

static void example(struct finding *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void example(struct finding *f, const char *fmt, ...)
{
    va_list ap;

    f->count++;
    if (f->nex >= MAX_EXAMPLES)
        return;
    va_start(ap, fmt);
    vsnprintf(f->ex[f->nex++], sizeof f->ex[0], fmt, ap);
    va_end(ap);
}

/* ---- reading the run ------------------------------------------------------------- */

/* The whole file, NUL-terminated; NULL if unreadable. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t cap = 0, n = 0, k;

    if (f == NULL)
        return NULL;
    do {
        buf = grow(buf, &cap, n + 65536 + 1, 1);
        k = fread(buf + n, 1, 65536, f);
        n += k;
    } while (k > 0);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Call fn on each whole line; a last line without its newline is torn (a
 * writer killed mid-write) and only counted. */
static void each_line(struct run *r, char *buf, size_t len,
                      void (*fn)(struct run *, char *, void *), void *arg)
{
    char *p = buf, *end = buf + len;

    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));

        if (nl == NULL) {
            r->torn++;
            break;
        }
        *nl = '\0';
        fn(r, p, arg);
        p = nl + 1;
    }
}

static int code_index(int rc)
{
    return rc <= 0 && rc > -16 ? -rc : 15;
}

static struct call *begin_call(struct run *r, size_t w, char type,
                               uint64_t t0)
{
    struct call *c = PUSH(r->calls);

    c->w = w;
    c->type = type;
    c->t0 = t0;
    return c;
}

static void end_call(struct run *r, size_t w, char type, uint64_t t0,
                     uint64_t t1, int rc)
{
    struct call *c = NULL;

    /* The matching begin is the last call of this worker and type. */
    for (size_t i = r->calls.n; i-- > 0 && c == NULL;)
        if (r->calls.v[i].w == w && r->calls.v[i].type == type &&
            r->calls.v[i].t0 == t0 && r->calls.v[i].t1 == 0)
            c = &r->calls.v[i];
    if (c == NULL)
        c = begin_call(r, w, type, t0);
    c->t1 = t1;
    c->rc = rc;
}

static struct grant *current_grant(struct run *r, size_t w, uint32_t seq)
{
    struct wlog *wl = &r->w.v[w];

    if (seq == 0 || seq > wl->ngrants)
        return NULL;
    return &r->g.v[wl->first_grant + seq - 1];
}

static void worker_line(struct run *r, char *line, void *arg)
{
    size_t w = *(size_t *)arg;
    struct wlog *wl = &r->w.v[w];
    unsigned long long a = 0, b = 0, c = 0, d, e, f, g, h;
    unsigned seq = 0, k;
    int rc = 0, h1, h2, n;
    char res, tok[4], kind[2] = "", *rest = line + strcspn(line, " ");
    uint64_t t = 0;
    struct grant *gr;

    /* The record's type is its whole first word ("A0" is not "A"). */
    snprintf(tok, sizeof tok, "%.*s", (int)(rest - line), line);
    if (strcmp(tok, "W") == 0) {
        n = sscanf(rest, "%u %u %llu %d %llu %llu %c %llu %llu %llu %llu "
                         "%llu %d",
                   &seq, &k, &a, &h1, &b, &c, &res, &d, &e, &f, &g, &h, &h2);
        gr = current_grant(r, w, seq);
        if (gr == NULL || (n != 4 && n != 13)) {
            r->unparsed++;
            return;
        }
        t = a;
        if (h1 == 1 && a > gr->last_held)
            gr->last_held = a;
        if (n == 13) {
            struct rmw *m = PUSH(r->rmw);

            m->w = w;
            m->seq = seq;
            m->t0 = e;
            m->t1 = g;
            m->bracketed = h1 == 1 && h2 == 1;
            if (h2 == 1 && h > gr->last_held)
                gr->last_held = h;
            if (d != gr->fence)
                gr->fence_changed = true;
            t = h;
        }
    } else if (strcmp(tok, "V") == 0) {
        n = sscanf(rest, "%u %u %llu %d %llu %llu %llu %llu %d", &seq, &k, &a,
                   &h1, &b, &c, &d, &e, &h2);
        gr = current_grant(r, w, seq);
        if (gr == NULL || (n != 4 && n != 9)) {
            r->unparsed++;
            return;
        }
        t = a;
        if (h1 == 1 && a > gr->last_held)
            gr->last_held = a;
        if (n == 9) {
            struct read *rd = PUSH(r->reads);

            rd->g = (size_t)(gr - r->g.v);
            rd->t = c;
            rd->v = d;
            rd->bracketed = h1 == 1 && h2 == 1;
            if (h2 == 1 && e > gr->last_held)
                gr->last_held = e;
            if (b != gr->fence)
                gr->fence_changed = true;
            t = e;
        }
    } else if (strcmp(tok, "A") == 0 &&
               sscanf(rest, "%llu %llu %d %llu %u %1s", &a, &b, &rc, &c, &seq,
                      kind) >= 5) {
        end_call(r, w, 'A', a, b, rc);
        r->acq_rc[code_index(rc)]++;
        t = b;
        if (rc == DLOCK_OK) {
            gr = PUSH(r->g);
            gr->w = w;
            gr->seq = seq;
            gr->t0 = a;
            gr->t1 = b;
            gr->fence = c;
            gr->permit = strcmp(kind, "p") == 0;
            gr->shared = gr->permit || strcmp(kind, "s") == 0;
            if (wl->ngrants == 0)
                wl->first_grant = r->g.n - 1;
            wl->ngrants++;
            if (seq != wl->ngrants)
                r->unparsed++;
        }
    } else if (strcmp(tok, "R") == 0 &&
               sscanf(rest, "%llu %llu %d %u", &a, &b, &rc, &seq) == 4) {
        end_call(r, w, 'R', a, b, rc);
        r->rel_rc[code_index(rc)]++;
        t = b;
        gr = current_grant(r, w, seq);
        if (gr != NULL && !gr->released) {
            gr->released = true;
            gr->end = b;
        }
    } else if ((strcmp(tok, "O") == 0 &&
                sscanf(rest, "%llu %llu %d", &a, &b, &rc) == 3) ||
               (strcmp(tok, "C") == 0 && sscanf(rest, "%llu %llu", &a, &b) == 2)) {
        end_call(r, w, tok[0], a, b, rc);
        t = b;
    } else if ((strcmp(tok, "A0") == 0 || strcmp(tok, "R0") == 0 ||
                strcmp(tok, "O0") == 0 || strcmp(tok, "C0") == 0) &&
               sscanf(rest, "%llu", &a) == 1) {
        begin_call(r, w, tok[0], a);
        t = a;
    } else if (strcmp(tok, "L") == 0 && sscanf(rest, "%llu", &a) == 1) {
        r->lost_calls++;
        t = a;
    } else if (strcmp(tok, "E") == 0 && sscanf(rest, "%llu", &a) == 1) {
        wl->errors++;
        t = a;
    } else if ((strcmp(tok, "H") == 0 &&
                sscanf(rest, "%llu %ld", &a, &wl->pid) == 2) ||
               (strcmp(tok, "X") == 0 && sscanf(rest, "%llu", &a) == 1)) {
        t = a;
    } else {
        r->unparsed++;
    }
    if (t > wl->t_last)
        wl->t_last = t;
}

static size_t worker_by(struct run *r, unsigned slot, unsigned gen)
{
    for (size_t i = 0; i < r->w.n; i++)
        if (r->w.v[i].slot == slot && r->w.v[i].gen == gen)
            return i;
    return SIZE_MAX;
}

static size_t worker_by_pid(struct run *r, long pid)
{
    for (size_t i = 0; i < r->w.n; i++)
        if (r->w.v[i].pid == pid)
            return i;
    return SIZE_MAX;
}

static void run_line(struct run *r, char *line, void *arg)
{
    unsigned long long a, b;
    char kind[32], target[96], detail[96];
    long pid;
    int ok, st;

    (void)arg;
    if (sscanf(line, "F %31s %llu %llu %d %95s %95s", kind, &a, &b, &ok,
               target, detail) == 6) {
        struct fault *f = PUSH(r->faults);

        f->kind = hi_fault_by_name(kind);
        f->t0 = a;
        f->t1 = b;
        f->ok = ok != 0;
        snprintf(f->target, sizeof f->target, "%s", target);
        snprintf(f->detail, sizeof f->detail, "%s", detail);
        if (sscanf(target, "pid:%ld", &pid) == 1)
            f->pid = pid;
        if (f->kind == HI_F_KILL && f->ok) {
            size_t w = worker_by_pid(r, pid);

            if (w != SIZE_MAX) {
                r->w.v[w].death = a;
                r->w.v[w].by_nemesis = true;
            }
        }
    } else if (sscanf(line, "K %llu %ld", &a, &pid) == 2) {
        size_t w = worker_by_pid(r, pid);

        if (w != SIZE_MAX && r->w.v[w].death == 0)
            r->w.v[w].death = a;
    } else if (sscanf(line, "Q %llu %ld %d", &a, &pid, &st) == 3) {
        size_t w = worker_by_pid(r, pid);

        if (w != SIZE_MAX) {
            r->w.v[w].reaped = true;
            r->w.v[w].status = st;
        }
    } else if (sscanf(line, "B %llu", &a) == 1) {
        r->t_begin = a;
    } else if (sscanf(line, "S %llu", &a) == 1) {
        r->t_stop = a;
    } else if (sscanf(line, "Z %llu", &a) == 1) {
        r->t_end = a;
    } else if (line[0] == 'P') {
        r->spawns++;
    } else {
        r->unparsed++;
    }
}

static void store_line(struct run *r, char *line, void *arg)
{
    unsigned long long serial, t, fence, highest;
    unsigned slot, gen, seq;
    char res;
    struct srec *s;
    size_t w;

    (void)arg;
    if (sscanf(line, "%llu %llu %c %llu %llu %u.%u %u", &serial, &t, &res,
               &fence, &highest, &slot, &gen, &seq) != 8) {
        r->unparsed++;
        return;
    }
    s = PUSH(r->store);
    s->res = res;
    s->fence = fence;
    s->grant = SIZE_MAX;
    w = worker_by(r, slot, gen);
    if (w != SIZE_MAX && seq >= 1 && seq <= r->w.v[w].ngrants)
        s->grant = r->w.v[w].first_grant + seq - 1;
}

static int cmp_names(const void *a, const void *b)
{
    const struct wlog *x = a, *y = b;

    return x->slot != y->slot ? (x->slot < y->slot ? -1 : 1)
                              : (x->gen < y->gen ? -1 : x->gen > y->gen);
}

static int read_run(struct run *r, const char *dir, char *err, size_t cap)
{
    char path[HI_PATH_MAX], *buf;
    struct dirent *e;
    size_t len;
    DIR *d;

    snprintf(r->dir, sizeof r->dir, "%s", dir);
    if (hi_meta_read(dir, &r->m, err, cap) != 0)
        return -1;
    hi_bounds_of(&r->m, &r->b);
    /* The workers first (run.log names them by pid), in slot order. */
    if ((d = opendir(dir)) == NULL) {
        snprintf(err, cap, "cannot list %s: %s", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        unsigned slot, gen;
        char tail[8];

        if (sscanf(e->d_name, "w%u.%u.%7s", &slot, &gen, tail) == 3 &&
            strcmp(tail, "log") == 0) {
            struct wlog *wl = PUSH(r->w);

            wl->slot = slot;
            wl->gen = gen;
            snprintf(wl->name, sizeof wl->name, "w%u.%u", slot, gen);
        }
    }
    closedir(d);
    if (r->w.n > 0)
        qsort(r->w.v, r->w.n, sizeof *r->w.v, cmp_names);
    for (size_t i = 0; i < r->w.n; i++) {
        char name[64];

        snprintf(name, sizeof name, "%s.log", r->w.v[i].name);
        if ((buf = slurp(hi_path(path, sizeof path, dir, name), &len)) ==
            NULL) {
            snprintf(err, cap, "cannot read %s", path);
            return -1;
        }
        each_line(r, buf, len, worker_line, &i);
        free(buf);
    }
    if ((buf = slurp(hi_path(path, sizeof path, dir, "run.log"), &len)) ==
        NULL) {
        snprintf(err, cap, "cannot read %s", path);
        return -1;
    }
    each_line(r, buf, len, run_line, NULL);
    free(buf);
    if ((buf = slurp(hi_path(path, sizeof path, dir, "store.log"), &len)) !=
        NULL) {
        each_line(r, buf, len, store_line, NULL);
        free(buf);
    }
    if ((buf = slurp(hi_path(path, sizeof path, dir, "counter"), &len)) !=
        NULL) {
        r->counter = strtoull(buf, NULL, 10);
        free(buf);
    }
    if (r->t_begin == 0 || r->t_stop == 0) {
        snprintf(err, cap, "%s/run.log has no begin or stop record", dir);
        return -1;
    }
    /* A grant never released ended with its process. */
    for (size_t i = 0; i < r->g.n; i++) {
        struct grant *g = &r->g.v[i];
        const struct wlog *wl = &r->w.v[g->w];

        if (!g->released)
            g->end = wl->death ? wl->death : wl->t_last;
        if (g->end < g->t1)
            g->end = g->t1;
    }
    return 0;
}

/* ---- the analyses ---------------------------------------------------------------- */

static double rel_s(const struct run *r, uint64_t t)
{
    return ((double)t - (double)r->t_begin) / 1e9;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

struct span {
    uint64_t a, b;
    size_t idx;
};

static int cmp_span(const void *x, const void *y)
{
    const struct span *p = x, *q = y;

    return p->a < q->a ? -1 : p->a > q->a;
}

/*
 * Pairs of spans of different workers that overlap. Sorted by start, a
 * sweep keeps those not yet ended; O(n log n + pairs).
 */
static void overlaps(struct span *s, size_t n, const size_t *owner,
                     void (*report)(struct run *, const struct span *,
                                    const struct span *, void *),
                     struct run *r, void *arg)
{
    size_t *active = zalloc(n, sizeof *active), na = 0;

    if (n > 0)
        qsort(s, n, sizeof *s, cmp_span);
    for (size_t i = 0; i < n; i++) {
        size_t keep = 0;

        for (size_t j = 0; j < na; j++) {
            const struct span *o = &s[active[j]];

            if (o->b <= s[i].a)
                continue;
            active[keep++] = active[j];
            if (owner[o->idx] != owner[s[i].idx])
                report(r, o, &s[i], arg);
        }
        na = keep;
        active[na++] = i;
    }
    free(active);
}

struct overlap_acc {
    struct finding *f;
    bool *involved;
    uint64_t longest;
    uint64_t with_reader;  /* violations where one side is a reader */
    uint64_t readers;      /* pairs of reader windows overlapping (allowed) */
    uint64_t readers_longest;
};

static const char *grant_role(const struct grant *g)
{
    return g->permit ? "permit" : g->shared ? "reader" : "writer";
}

static void report_window(struct run *r, const struct span *x,
                          const struct span *y, void *arg)
{
    struct overlap_acc *acc = arg;
    const struct grant *g = &r->g.v[x->idx], *h = &r->g.v[y->idx];
    uint64_t d = (x->b < y->b ? x->b : y->b) - y->a;

    if (g->shared && h->shared) {
        acc->readers++;
        if (d > acc->readers_longest)
            acc->readers_longest = d;
        return;
    }
    acc->with_reader += g->shared || h->shared;
    acc->involved[x->idx] = acc->involved[y->idx] = true;
    if (d > acc->longest)
        acc->longest = d;
    example(acc->f,
            "%s %s grant %u (fence %" PRIu64 ") believed held %.3f-%.3f s "
            "and %s %s grant %u (fence %" PRIu64 ") %.3f-%.3f s: both for "
            "%.1f ms",
            r->w.v[g->w].name, grant_role(g), g->seq, g->fence,
            rel_s(r, x->a), rel_s(r, x->b), r->w.v[h->w].name,
            grant_role(h), h->seq, h->fence,
            rel_s(r, y->a), rel_s(r, y->b), ms(d));
}

static void check_windows(struct run *r, struct finding *f,
                          struct overlap_acc *acc, uint64_t *grants)
{
    struct span *s = zalloc(r->g.n, sizeof *s);
    size_t *owner = zalloc(r->g.n, sizeof *owner), n = 0;
    bool *inv = zalloc(r->g.n, sizeof *inv);

    for (size_t i = 0; i < r->g.n; i++) {
        owner[i] = r->g.v[i].w;
        if (r->g.v[i].last_held > r->g.v[i].t1) {
            s[n].a = r->g.v[i].t1;
            s[n].b = r->g.v[i].last_held;
            s[n++].idx = i;
        }
    }
    memset(acc, 0, sizeof *acc);
    acc->f = f;
    acc->involved = inv;
    overlaps(s, n, owner, report_window, r, acc);
    *grants = 0;
    for (size_t i = 0; i < r->g.n; i++)
        *grants += inv[i];
    acc->involved = NULL;
    free(s);
    free(owner);
    free(inv);
}

static void report_rmw(struct run *r, const struct span *x,
                       const struct span *y, void *arg)
{
    const struct rmw *p = &r->rmw.v[x->idx], *q = &r->rmw.v[y->idx];

    example(arg,
            "%s grant %u read-modify-write %.4f-%.4f s and %s grant %u "
            "%.4f-%.4f s, both bracketed by held() == 1",
            r->w.v[p->w].name, p->seq, rel_s(r, x->a), rel_s(r, x->b),
            r->w.v[q->w].name, q->seq, rel_s(r, y->a), rel_s(r, y->b));
}

static void check_rmw(struct run *r, struct finding *f)
{
    struct span *s = zalloc(r->rmw.n, sizeof *s);
    size_t *owner = zalloc(r->rmw.n, sizeof *owner), n = 0;

    for (size_t i = 0; i < r->rmw.n; i++) {
        owner[i] = r->rmw.v[i].w;
        if (r->rmw.v[i].bracketed) {
            s[n].a = r->rmw.v[i].t0;
            s[n].b = r->rmw.v[i].t1;
            s[n++].idx = i;
        }
    }
    overlaps(s, n, owner, report_rmw, r, f);
    free(s);
    free(owner);
}

static const char *grant_name(const struct run *r, size_t g, char *buf,
                              size_t cap)
{
    if (g == SIZE_MAX)
        return "an unknown grant";
    snprintf(buf, cap, "%s %sgrant %u", r->w.v[r->g.v[g].w].name,
             r->g.v[g].permit   ? "permit "
             : r->g.v[g].shared ? "reader "
                                : "",
             r->g.v[g].seq);
    return buf;
}

/*
 * Each reader grant's bracketed counter reads (in the order logged) must
 * all show the value of its first: a change is a write inside the shared
 * holding. A read whose held samples did not both say 1 is left out, as a
 * writer's unbracketed read-modify-write is (on either side: the reader
 * may have been told of a loss by then; the writer had been by the end of
 * its write). The examples name the counter writes between the two
 * reads.
 */
static void check_reads(struct run *r, struct finding *f)
{
    size_t *first = zalloc(r->g.n, sizeof *first);
    bool *seen = zalloc(r->g.n, sizeof *seen);
    char a[64], who[96];

    for (size_t i = 0; i < r->g.n; i++)
        first[i] = SIZE_MAX;
    for (size_t i = 0; i < r->reads.n; i++) {
        const struct read *rd = &r->reads.v[i], *p;
        size_t writes = 0, zombies = 0;

        if (!rd->bracketed || seen[rd->g])
            continue;
        if (first[rd->g] == SIZE_MAX) {
            first[rd->g] = i;
            continue;
        }
        p = &r->reads.v[first[rd->g]];
        if (rd->v == p->v)
            continue;
        who[0] = '\0';
        for (size_t j = 0; j < r->rmw.n; j++) {
            const struct rmw *m = &r->rmw.v[j];

            if (m->t1 <= p->t || m->t1 >= rd->t)
                continue;
            if (!m->bracketed) {
                zombies++;
                continue;
            }
            if (writes++ == 0)
                snprintf(who, sizeof who, "; written by %s grant %u at "
                         "%.4f s", r->w.v[m->w].name, m->seq,
                         rel_s(r, m->t1));
        }
        /* Only writes of writers that had not been told of a loss, as in
         * lost_update: a writer stopped between its held() check and its
         * write, whose lease ran out meanwhile, writes an unfenced
         * resource when it resumes, and no lock can stop that (the
         * fenced store refuses it). A change with no write at all in
         * between is counted. */
        if (writes == 0 && zombies > 0)
            continue;
        seen[rd->g] = true; /* one example per grant */
        example(f,
                "%s read the counter %llu at %.4f s and %llu at %.4f s, "
                "held() == 1 around both%s%s",
                grant_name(r, rd->g, a, sizeof a), p->v, rel_s(r, p->t),
                rd->v, rel_s(r, rd->t), who,
                writes > 1 ? " and others" : "");
    }
    free(first);
    free(seen);
}

/*
 * The store in decision order: stale accepted writes (fence equal to the
 * highest, which another grant wrote first), and, for information,
 * interleaved holdings: accepted writes of a grant after another grant
 * began writing.
 */
static void check_store(struct run *r, struct finding *f, uint64_t *accepted,
                        uint64_t *rejected, uint64_t *interleaved)
{
    uint64_t hi = 0;
    size_t hi_grant = SIZE_MAX, last_first = SIZE_MAX;
    size_t *first = zalloc(r->g.n, sizeof *first);
    size_t last_first_pos = 0;
    char a[64], b[64];

    for (size_t i = 0; i < r->g.n; i++)
        first[i] = SIZE_MAX;
    *accepted = *rejected = *interleaved = 0;
    for (size_t i = 0; i < r->store.n; i++) {
        const struct srec *s = &r->store.v[i];

        if (s->res != 'A') {
            *rejected += s->res == 'R';
            continue;
        }
        ++*accepted;
        if (s->fence > hi || hi_grant == SIZE_MAX) {
            hi = s->fence;
            hi_grant = s->grant;
        } else if (s->grant != hi_grant) {
            example(f,
                    "store write %zu: %s wrote fence %" PRIu64 ", which %s "
                    "had written before; accepted",
                    i + 1, grant_name(r, s->grant, a, sizeof a), s->fence,
                    grant_name(r, hi_grant, b, sizeof b));
        }
        if (s->grant == SIZE_MAX)
            continue;
        if (first[s->grant] == SIZE_MAX) {
            first[s->grant] = i;
            last_first = s->grant;
            last_first_pos = i;
        } else if (last_first != s->grant &&
                   last_first_pos > first[s->grant]) {
            ++*interleaved;
        }
    }
    free(first);
}

/*
 * A run with --permits N: the permit holders' held windows, swept in time
 * order; each grant that makes more than N believed held at once is a
 * violation. *most gets the most seen at once.
 */
static void check_permits(struct run *r, struct finding *f, uint64_t *most)
{
    struct span *s = zalloc(r->g.n, sizeof *s);
    size_t *active = zalloc(r->g.n, sizeof *active), n = 0, na = 0;
    char a[64], b[64];

    *most = 0;
    for (size_t i = 0; i < r->g.n; i++)
        if (r->g.v[i].permit && r->g.v[i].last_held > r->g.v[i].t1) {
            s[n].a = r->g.v[i].t1;
            s[n].b = r->g.v[i].last_held;
            s[n++].idx = i;
        }
    if (n > 0)
        qsort(s, n, sizeof *s, cmp_span);
    for (size_t i = 0; i < n; i++) {
        size_t keep = 0;

        for (size_t j = 0; j < na; j++)
            if (s[active[j]].b > s[i].a)
                active[keep++] = active[j];
        na = keep;
        active[na++] = i;
        if (na > *most)
            *most = na;
        if (r->m.permits > 0 && na > r->m.permits)
            example(f,
                    "%zu permit holders of %" PRIu32 " believed held at "
                    "%.4f s, when %s was granted (also %s, held from "
                    "%.4f s)",
                    na, r->m.permits, rel_s(r, s[i].a),
                    grant_name(r, s[i].idx, a, sizeof a),
                    grant_name(r, s[active[0]].idx, b, sizeof b),
                    rel_s(r, s[active[0]].a));
    }
    free(active);
    free(s);
}

static int cmp_by_return(const void *x, const void *y, void *arg)
{
    const struct run *r = arg;
    const struct grant *p = &r->g.v[*(const size_t *)x];
    const struct grant *q = &r->g.v[*(const size_t *)y];

    return p->t1 < q->t1 ? -1 : p->t1 > q->t1;
}

static int cmp_by_call(const void *x, const void *y, void *arg)
{
    const struct run *r = arg;
    const struct grant *p = &r->g.v[*(const size_t *)x];
    const struct grant *q = &r->g.v[*(const size_t *)y];

    return p->t0 < q->t0 ? -1 : p->t0 > q->t0;
}

static int cmp_by_fence(const void *x, const void *y, void *arg)
{
    const struct run *r = arg;
    const struct grant *p = &r->g.v[*(const size_t *)x];
    const struct grant *q = &r->g.v[*(const size_t *)y];

    return p->fence < q->fence ? -1 : p->fence > q->fence;
}

/*
 * Permits: grants of one semaphore may be made together, and their replies
 * come back in any order, so a grant's fence is only compared with those
 * of grants that returned before its acquire was called; and no two held
 * grants share a fence.
 */
static void check_permit_fences(struct run *r, struct finding *f)
{
    size_t *ret = zalloc(r->g.n, sizeof *ret);
    size_t *call = zalloc(r->g.n, sizeof *call), top = SIZE_MAX, j = 0;
    uint64_t max = 0;
    char a[64], b[64];

    for (size_t i = 0; i < r->g.n; i++)
        ret[i] = call[i] = i;
    if (r->g.n > 0) {
        qsort_r(ret, r->g.n, sizeof *ret, cmp_by_return, r);
        qsort_r(call, r->g.n, sizeof *call, cmp_by_call, r);
    }
    for (size_t k = 0; k < r->g.n; k++) {
        const struct grant *g = &r->g.v[call[k]];

        for (; j < r->g.n && r->g.v[ret[j]].t1 < g->t0; j++)
            if (top == SIZE_MAX || r->g.v[ret[j]].fence > max) {
                max = r->g.v[ret[j]].fence;
                top = ret[j];
            }
        if (g->fence_changed)
            example(f, "%s: the fence changed while held",
                    grant_name(r, call[k], a, sizeof a));
        if (top != SIZE_MAX && g->last_held != 0 && g->fence <= max)
            example(f,
                    "%s (asked at %.3f s, held) has fence %" PRIu64
                    ", not above %" PRIu64 " of %s (acquired at %.3f s)",
                    grant_name(r, call[k], a, sizeof a), rel_s(r, g->t0),
                    g->fence, max, grant_name(r, top, b, sizeof b),
                    rel_s(r, r->g.v[top].t1));
    }
    qsort_r(ret, r->g.n, sizeof *ret, cmp_by_fence, r);
    for (size_t k = 1; k < r->g.n; k++) {
        const struct grant *p = &r->g.v[ret[k - 1]], *q = &r->g.v[ret[k]];

        if (p->fence == q->fence && p->last_held != 0 && q->last_held != 0)
            example(f, "%s and %s, both held, have fence %" PRIu64,
                    grant_name(r, ret[k - 1], a, sizeof a),
                    grant_name(r, ret[k], b, sizeof b), q->fence);
    }
    free(ret);
    free(call);
}

static void check_fences(struct run *r, struct finding *f)
{
    size_t *order = zalloc(r->g.n, sizeof *order), top = SIZE_MAX;
    size_t wtop = SIZE_MAX; /* the same over writers' grants only */
    uint64_t max = 0, wmax = 0;
    char a[64], b[64];

    for (size_t i = 0; i < r->g.n; i++)
        order[i] = i;
    if (r->g.n > 0)
        qsort_r(order, r->g.n, sizeof *order, cmp_by_return, r);
    for (size_t k = 0; k < r->g.n; k++) {
        const struct grant *g = &r->g.v[order[k]];
        size_t above = g->shared ? wtop : top;
        uint64_t bar = g->shared ? wmax : max;

        if (g->fence_changed)
            example(f, "%s: the fence changed while held",
                    grant_name(r, order[k], a, sizeof a));
        if (above != SIZE_MAX && g->last_held != 0 && g->fence <= bar)
            example(f,
                    "%s (acquired at %.3f s, held) has fence %" PRIu64
                    ", not above %" PRIu64 " of %s (acquired at %.3f s)",
                    grant_name(r, order[k], a, sizeof a), rel_s(r, g->t1),
                    g->fence, bar, grant_name(r, above, b, sizeof b),
                    rel_s(r, r->g.v[above].t1));
        if (top == SIZE_MAX || g->fence > max) {
            max = g->fence;
            top = order[k];
        }
        if (!g->shared && (wtop == SIZE_MAX || g->fence > wmax)) {
            wmax = g->fence;
            wtop = order[k];
        }
    }
    free(order);
}

/* Time in [a, b] during which pid was SIGSTOPped by the nemesis. */
static uint64_t stopped_within(const struct run *r, long pid, uint64_t a,
                               uint64_t b)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < r->faults.n; i++) {
        const struct fault *f = &r->faults.v[i];
        uint64_t x, y;

        if (f->pid != pid ||
            (f->kind != HI_F_STOP_SHORT && f->kind != HI_F_STOP_LONG))
            continue;
        x = f->t0 > a ? f->t0 : a;
        y = f->t1 < b ? f->t1 : b;
        if (y > x)
            sum += y - x;
    }
    return sum;
}

static const char *call_name(char type)
{
    switch (type) {
    case 'A':
        return "dlock_acquire";
    case 'R':
        return "dlock_release";
    case 'O':
        return "dlock_client_open";
    default:
        return "dlock_client_close";
    }
}

static void check_hangs(struct run *r, struct finding *f, uint64_t *max_acq,
                        uint64_t *max_rel)
{
    *max_acq = *max_rel = 0;
    for (size_t i = 0; i < r->calls.n; i++) {
        const struct call *c = &r->calls.v[i];
        const struct wlog *wl = &r->w.v[c->w];
        uint64_t own = c->type == 'A'
                           ? (uint64_t)r->m.acquire_timeout_ms * NS_PER_MS
                           : 0;
        uint64_t end = c->t1, took;

        if (end == 0) {
            /* Never returned: killed by the nemesis is no hang; killed by
             * the supervisor is, if it ran that long. */
            if (wl->by_nemesis || wl->death == 0)
                continue;
            end = wl->death;
        }
        took = end > c->t0 ? end - c->t0 : 0;
        took -= stopped_within(r, wl->pid, c->t0, end);
        if (c->t1 != 0 && c->type == 'A' && took > *max_acq)
            *max_acq = took;
        if (c->t1 != 0 && c->type == 'R' && took > *max_rel)
            *max_rel = took;
        if (took > own + r->b.slack_ns)
            example(f,
                    "%s: %s called at %.3f s %s after %.1f ms (bound %.0f ms)",
                    wl->name, call_name(c->type), rel_s(r, c->t0),
                    c->t1 ? "returned" : "had not returned when killed",
                    ms(took), ms(own + r->b.slack_ns));
    }
}

/* Events of the stall sweep: +1/-1 on one of three counters. */
struct ev {
    uint64_t t;
    int what, delta; /* what: 0 held, 1 waiting, 2 explained */
};

static int cmp_ev(const void *x, const void *y)
{
    const struct ev *p = x, *q = y;

    return p->t < q->t ? -1 : p->t > q->t;
}

static void stall(struct run *r, struct finding *f, uint64_t from,
                  uint64_t to, uint64_t *longest)
{
    uint64_t d = to > from ? to - from : 0;

    if (d > *longest)
        *longest = d;
    if (d > r->b.stall_ns)
        example(f,
                "%s from %.3f s to %.3f s (%.0f ms) while workers "
                "waited and no fault was in effect",
                r->m.permits > 0 ? "a permit was free" : "nobody held the lock",
                rel_s(r, from), rel_s(r, to), ms(d));
}

static void check_stalls(struct run *r, struct finding *f, uint64_t *longest)
{
    size_t cap = 2 * (r->g.n + r->calls.n + r->faults.n) + 2, n = 0;
    struct ev *e = zalloc(cap, sizeof *e);
    int cnt[3] = {0, 0, 0};
    uint64_t from = 0, horizon = r->t_stop;
    /* A free permit with waiters is a stall as a free lock is. */
    int held_max = r->m.permits > 0 ? (int)r->m.permits : 1;
    bool in = false;

    for (size_t i = 0; i < r->g.n; i++) {
        e[n++] = (struct ev){r->g.v[i].t1, 0, 1};
        e[n++] = (struct ev){r->g.v[i].end, 0, -1};
    }
    for (size_t i = 0; i < r->calls.n; i++) {
        const struct call *c = &r->calls.v[i];
        const struct wlog *wl = &r->w.v[c->w];
        uint64_t end = c->t1 ? c->t1 : wl->death ? wl->death : wl->t_last;

        if (c->type != 'A' || end < c->t0)
            continue;
        e[n++] = (struct ev){c->t0, 1, 1};
        e[n++] = (struct ev){end, 1, -1};
    }
    for (size_t i = 0; i < r->faults.n; i++) {
        e[n++] = (struct ev){r->faults.v[i].t0, 2, 1};
        e[n++] = (struct ev){r->faults.v[i].t1 + r->b.recovery_ns, 2, -1};
    }
    qsort(e, n, sizeof *e, cmp_ev);
    *longest = 0;
    for (size_t i = 0; i < n;) {
        uint64_t t = e[i].t;
        bool now;

        if (t >= horizon)
            break;
        /* Every event of one instant first, then the state from t on. */
        for (; i < n && e[i].t == t; i++)
            cnt[e[i].what] += e[i].delta;
        now = cnt[0] < held_max && cnt[1] > 0 && cnt[2] == 0;
        if (now && !in)
            from = t;
        else if (!now && in)
            stall(r, f, from, t, longest);
        in = now;
    }
    if (in)
        stall(r, f, from, horizon, longest);
    free(e);
}

static void check_workers(struct run *r, struct finding *f)
{
    for (size_t i = 0; i < r->w.n; i++) {
        const struct wlog *wl = &r->w.v[i];
        bool clean = wl->reaped && (wl->status & 0x7f) == 0 &&
                     ((wl->status >> 8) & 0xff) == 0;

        if (wl->errors > 0)
            example(f, "%s logged %u error(s) of its own (E records)",
                    wl->name, wl->errors);
        if (wl->death != 0 || clean)
            continue;
        if (!wl->reaped)
            example(f, "%s (pid %ld) was never reaped", wl->name, wl->pid);
        else if ((wl->status & 0x7f) != 0)
            example(f, "%s (pid %ld) died of signal %d", wl->name, wl->pid,
                    wl->status & 0x7f);
        else
            example(f, "%s (pid %ld) exited with status %d", wl->name,
                    wl->pid, (wl->status >> 8) & 0xff);
    }
}

/* ---- the report -------------------------------------------------------------------- */

enum { K_OVERLAP, K_PERMITS, K_LOST, K_READ, K_STALE, K_FENCE, K_HANG,
       K_STALL, K_WORKER, K_NOPROGRESS, K_COUNT };

struct report {
    struct finding f[K_COUNT];
    uint64_t cycles, overlap_grants;
    struct overlap_acc ov;
    uint64_t reader_grants, reads;
    uint64_t most_permits;  /* permit holders at once, at most */
    uint64_t accepted, rejected, interleaved, increments;
    uint64_t max_acq, max_rel, stall_longest;
    unsigned faults[HI_F_COUNT], faults_failed[HI_F_COUNT];
    bool fencing;
};

static const char *const kind_names[K_COUNT] = {
    "overlap", "over_permits", "lost_update", "reader_saw_write",
    "stale_write",
    "fence_order", "hang", "stall", "worker_error", "no_progress",
};

static const char *const kind_text[K_COUNT] = {
    "overlapping held windows",
    "more holders than permits",
    "lost updates while both held",
    "counter changed under a reader",
    "stale fenced writes accepted",
    "fences not increasing per grant",
    "hangs",
    "stalls",
    "worker errors",
    "no grant at all",
};

static void analyse(struct run *r, struct report *p)
{
    memset(p, 0, sizeof *p);
    for (int k = 0; k < K_COUNT; k++) {
        p->f[k].kind = kind_names[k];
        p->f[k].counts = true;
    }
    p->fencing = (r->m.caps & DLOCK_CAP_FENCING) != 0 || r->m.fake_fence;
    p->f[K_STALE].counts = p->fencing;
    p->f[K_FENCE].counts = p->fencing;
    p->cycles = r->g.n;
    p->increments = r->rmw.n;
    p->reads = r->reads.n;
    for (size_t i = 0; i < r->g.n; i++)
        p->reader_grants += r->g.v[i].shared;
    check_windows(r, &p->f[K_OVERLAP], &p->ov, &p->overlap_grants);
    check_rmw(r, &p->f[K_LOST]);
    check_reads(r, &p->f[K_READ]);
    check_store(r, &p->f[K_STALE], &p->accepted, &p->rejected,
                &p->interleaved);
    check_permits(r, &p->f[K_PERMITS], &p->most_permits);
    if (r->m.permits > 0)
        check_permit_fences(r, &p->f[K_FENCE]);
    else
        check_fences(r, &p->f[K_FENCE]);
    check_hangs(r, &p->f[K_HANG], &p->max_acq, &p->max_rel);
    check_stalls(r, &p->f[K_STALL], &p->stall_longest);
    check_workers(r, &p->f[K_WORKER]);
    if (r->g.n == 0)
        example(&p->f[K_NOPROGRESS], "no dlock_acquire succeeded");
    for (size_t i = 0; i < r->faults.n; i++) {
        int k = r->faults.v[i].kind;

        if (k < 0)
            continue;
        p->faults[k]++;
        p->faults_failed[k] += !r->faults.v[i].ok;
    }
}

static void caps_text(uint32_t caps, char *buf, size_t cap)
{
    size_t n = 0;

    buf[0] = '\0';
    for (uint32_t bit = 1; bit != 0; bit <<= 1) {
        const char *name = (caps & bit) ? dlock_cap_name(bit) : NULL;

        if (name != NULL)
            n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s",
                                  n ? "," : "", name);
    }
}

static void print_report(const struct run *r, const struct report *p,
                         uint64_t violations)
{
    char caps[256];

    caps_text(r->m.caps, caps, sizeof caps);
    printf("history: %s/%s  %s%s%s%s\n", r->m.scheme, r->m.mode,
           r->m.uri_shown, r->m.no_lock ? "  [--no-lock]" : "",
           r->m.fake_fence ? "  [--fake-fence]" : "",
           r->m.elect ? "  [--elect: leaders are the holders]" : "");
    printf("  caps %s\n", caps);
    printf("  %.1f s, %u workers (%" PRIu64 " processes), seed %" PRIu64
           ", acquire timeout %u ms\n",
           ((double)r->t_stop - (double)r->t_begin) / 1e9, r->m.workers,
           r->spawns, r->m.seed, r->m.acquire_timeout_ms);
    printf("  bounds from lease=%u ms, timeout=%u ms: hang = own timeout + "
           "%.0f ms (2 x timeout); stall %.0f ms (lease + timeout); a fault "
           "explains stalls until %.0f ms after it (lease + 2 x timeout)\n",
           r->m.lease_ms, r->m.timeout_ms, ms(r->b.slack_ns),
           ms(r->b.stall_ns), ms(r->b.recovery_ns));
    printf("  %-34s %" PRIu64 "\n", "cycles (grants)", p->cycles);
    printf("  %-34s %" PRIu64, r->m.permits > 0 ? "permit grants"
                                                  : "reader grants",
           p->reader_grants);
    if (r->m.permits > 0)
        printf("  (--permits %" PRIu32 "; overlapping permit pairs %" PRIu64
               ")\n", r->m.permits, p->ov.readers);
    else if (r->m.readers_pct == 0)
        printf("  (--readers 0)\n");
    else if ((r->m.caps & DLOCK_CAP_SHARED) == 0)
        printf("  (--readers %" PRIu32 ": the mode has no shared locks)\n",
               r->m.readers_pct);
    else
        printf("  (--readers %" PRIu32 "%%; overlapping reader pairs %" PRIu64
               ", longest %.1f ms)\n",
               r->m.readers_pct, p->ov.readers, ms(p->ov.readers_longest));
    printf("  %-34s", "faults");
    {
        bool any = false;

        for (int k = 0; k < HI_F_COUNT; k++)
            if (p->faults[k] > 0) {
                printf("%s %s %u", any ? "," : "", hi_fault_name(k),
                       p->faults[k]);
                if (p->faults_failed[k])
                    printf(" (%u failed)", p->faults_failed[k]);
                any = true;
            }
        printf("%s\n", any ? "" : " none");
    }
    /* The timeline, to read the examples below against. */
    for (size_t i = 0; i < r->faults.n && i < 40; i++) {
        const struct fault *f = &r->faults.v[i];

        printf("      %7.3f-%7.3f s  %-16s %s%s%s%s\n", rel_s(r, f->t0),
               rel_s(r, f->t1), hi_fault_name(f->kind), f->target,
               strcmp(f->detail, "-") ? " " : "",
               strcmp(f->detail, "-") ? f->detail : "",
               f->ok ? "" : " (failed)");
    }
    if (r->faults.n > 40)
        printf("      ... %zu more in the JSON\n", r->faults.n - 40);
    for (int k = 0; k < K_COUNT; k++) {
        const struct finding *f = &p->f[k];

        if (k == K_NOPROGRESS && f->count == 0)
            continue;
        printf("  %-34s %" PRIu64, kind_text[k], f->count);
        switch (k) {
        case K_OVERLAP:
            printf("  (grants involved %" PRIu64 ", longest %.1f ms; with "
                   "a reader %" PRIu64 ")",
                   p->overlap_grants, ms(p->ov.longest), p->ov.with_reader);
            break;
        case K_PERMITS:
            if (r->m.permits > 0)
                printf("  (--permits %" PRIu32 "; most at once %" PRIu64 ")",
                       r->m.permits, p->most_permits);
            else
                printf("  (a lock run)");
            break;
        case K_READ:
            printf("  (%" PRIu64 " reads)", p->reads);
            break;
        case K_LOST:
            printf("  (counter: %" PRIu64 " increments, final %llu)",
                   p->increments, r->counter);
            break;
        case K_STALE:
            printf("  (store: %" PRIu64 " accepted, %" PRIu64
                   " rejected; %" PRIu64 " interleaved)",
                   p->accepted, p->rejected, p->interleaved);
            break;
        case K_HANG:
            printf("  (longest acquire %.0f ms, release %.0f ms)",
                   ms(p->max_acq), ms(p->max_rel));
            break;
        case K_STALL:
            printf("  (longest unexplained %.0f ms)", ms(p->stall_longest));
            break;
        default:
            break;
        }
        if (!f->counts)
            printf("  [no fencing claimed: information]");
        printf("\n");
        for (unsigned i = 0; f->counts && i < f->nex; i++)
            printf("      %s\n", f->ex[i]);
    }
    printf("  on_lost calls %u; acquire:", r->lost_calls);
    for (int i = 0; i < 16; i++)
        if (r->acq_rc[i])
            printf(" %s %u", i == 0 ? "OK" : dlock_err_name(-i), r->acq_rc[i]);
    printf("; release:");
    for (int i = 0; i < 16; i++)
        if (r->rel_rc[i])
            printf(" %s %u", i == 0 ? "OK" : dlock_err_name(-i), r->rel_rc[i]);
    printf("\n");
    if (r->torn || r->unparsed)
        printf("  log lines: %u torn (a killed writer), %u unparsed\n",
               r->torn, r->unparsed);
    printf("  verdict: %s\n", violations == 0 ? "OK" : "VIOLATIONS");
}

static json_object *codes_json(const unsigned *rc)
{
    json_object *o = json_object_new_object();

    for (int i = 0; i < 16; i++)
        if (rc[i])
            json_object_object_add(o, i == 0 ? "OK" : dlock_err_name(-i),
                                   json_object_new_int64(rc[i]));
    return o;
}

static int write_json(const struct run *r, const struct report *p,
                      uint64_t violations, const char *path)
{
    json_object *root = json_object_new_object(), *o, *v;
    char caps[256];
    int rc;

    caps_text(r->m.caps, caps, sizeof caps);
    json_object_object_add(root, "uri", json_object_new_string(r->m.uri_shown));
    json_object_object_add(root, "backend", json_object_new_string(r->m.scheme));
    json_object_object_add(root, "mode", json_object_new_string(r->m.mode));
    json_object_object_add(root, "caps", json_object_new_string(caps));
    json_object_object_add(root, "fencing", json_object_new_boolean(p->fencing));
    json_object_object_add(root, "no_lock", json_object_new_boolean(r->m.no_lock));
    json_object_object_add(root, "fake_fence",
                           json_object_new_boolean(r->m.fake_fence));
    json_object_object_add(root, "seconds",
                           json_object_new_double(
                               ((double)r->t_stop - (double)r->t_begin) / 1e9));
    json_object_object_add(root, "workers", json_object_new_int64(r->m.workers));
    json_object_object_add(root, "processes", json_object_new_int64((int64_t)r->spawns));
    json_object_object_add(root, "seed", json_object_new_int64((int64_t)r->m.seed));
    o = json_object_new_object();
    json_object_object_add(o, "lease_ms", json_object_new_int64(r->m.lease_ms));
    json_object_object_add(o, "timeout_ms", json_object_new_int64(r->m.timeout_ms));
    json_object_object_add(o, "acquire_timeout_ms",
                           json_object_new_int64(r->m.acquire_timeout_ms));
    json_object_object_add(o, "hang_slack_ms",
                           json_object_new_int64((int64_t)(r->b.slack_ns / NS_PER_MS)));
    json_object_object_add(o, "stall_ms",
                           json_object_new_int64((int64_t)(r->b.stall_ns / NS_PER_MS)));
    json_object_object_add(o, "recovery_ms",
                           json_object_new_int64((int64_t)(r->b.recovery_ns / NS_PER_MS)));
    json_object_object_add(root, "bounds", o);
    json_object_object_add(root, "cycles", json_object_new_int64((int64_t)p->cycles));
    json_object_object_add(root, "readers_pct", json_object_new_int64(r->m.readers_pct));
    json_object_object_add(root, "permits", json_object_new_int64(r->m.permits));
    json_object_object_add(root, "most_permit_holders",
                           json_object_new_int64((int64_t)p->most_permits));
    json_object_object_add(root, "reader_grants",
                           json_object_new_int64((int64_t)p->reader_grants));
    o = json_object_new_object();
    for (int k = 0; k < HI_F_COUNT; k++)
        if (p->faults[k] > 0) {
            v = json_object_new_object();
            json_object_object_add(v, "count", json_object_new_int64(p->faults[k]));
            json_object_object_add(v, "failed",
                                   json_object_new_int64(p->faults_failed[k]));
            json_object_object_add(o, hi_fault_name(k), v);
        }
    json_object_object_add(root, "faults", o);
    o = json_object_new_array();
    for (size_t i = 0; i < r->faults.n; i++) {
        const struct fault *f = &r->faults.v[i];

        v = json_object_new_object();
        json_object_object_add(v, "kind",
                               json_object_new_string(hi_fault_name(f->kind)));
        json_object_object_add(v, "start_s", json_object_new_double(rel_s(r, f->t0)));
        json_object_object_add(v, "end_s", json_object_new_double(rel_s(r, f->t1)));
        json_object_object_add(v, "target", json_object_new_string(f->target));
        json_object_object_add(v, "detail", json_object_new_string(f->detail));
        json_object_object_add(v, "ok", json_object_new_boolean(f->ok));
        json_object_array_add(o, v);
    }
    json_object_object_add(root, "fault_log", o);
    o = json_object_new_object();
    for (int k = 0; k < K_COUNT; k++) {
        const struct finding *f = &p->f[k];
        json_object *ex = json_object_new_array();

        v = json_object_new_object();
        json_object_object_add(v, "count", json_object_new_int64((int64_t)f->count));
        json_object_object_add(v, "violation", json_object_new_boolean(f->counts));
        for (unsigned i = 0; i < f->nex; i++)
            json_object_array_add(ex, json_object_new_string(f->ex[i]));
        json_object_object_add(v, "examples", ex);
        json_object_object_add(o, kind_names[k], v);
    }
    json_object_object_add(root, "violations", o);
    o = json_object_new_object();
    json_object_object_add(o, "overlap_grants",
                           json_object_new_int64((int64_t)p->overlap_grants));
    json_object_object_add(o, "overlap_longest_ms",
                           json_object_new_double(ms(p->ov.longest)));
    json_object_object_add(o, "overlap_with_reader",
                           json_object_new_int64((int64_t)p->ov.with_reader));
    json_object_object_add(o, "reader_overlaps",
                           json_object_new_int64((int64_t)p->ov.readers));
    json_object_object_add(o, "reader_overlap_longest_ms",
                           json_object_new_double(ms(p->ov.readers_longest)));
    json_object_object_add(o, "reader_reads",
                           json_object_new_int64((int64_t)p->reads));
    json_object_object_add(o, "counter_increments",
                           json_object_new_int64((int64_t)p->increments));
    json_object_object_add(o, "counter_final",
                           json_object_new_int64((int64_t)r->counter));
    json_object_object_add(o, "store_accepted",
                           json_object_new_int64((int64_t)p->accepted));
    json_object_object_add(o, "store_rejected",
                           json_object_new_int64((int64_t)p->rejected));
    json_object_object_add(o, "store_interleaved",
                           json_object_new_int64((int64_t)p->interleaved));
    json_object_object_add(o, "longest_acquire_ms",
                           json_object_new_double(ms(p->max_acq)));
    json_object_object_add(o, "longest_release_ms",
                           json_object_new_double(ms(p->max_rel)));
    json_object_object_add(o, "longest_unexplained_free_ms",
                           json_object_new_double(ms(p->stall_longest)));
    json_object_object_add(o, "on_lost_calls", json_object_new_int64(r->lost_calls));
    json_object_object_add(o, "acquire_results", codes_json(r->acq_rc));
    json_object_object_add(o, "release_results", codes_json(r->rel_rc));
    json_object_object_add(o, "torn_lines", json_object_new_int64(r->torn));
    json_object_object_add(o, "unparsed_lines", json_object_new_int64(r->unparsed));
    json_object_object_add(root, "info", o);
    json_object_object_add(root, "verdict",
                           json_object_new_string(violations ? "violations" : "ok"));
    rc = json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY);
    json_object_put(root);
    if (rc != 0)
        fprintf(stderr, "history check: cannot write %s\n", path);
    return rc;
}

/* ---- main -------------------------------------------------------------------------- */

static void free_run(struct run *r)
{
    free(r->w.v);
    free(r->g.v);
    free(r->rmw.v);
    free(r->reads.v);
    free(r->calls.v);
    free(r->faults.v);
    free(r->store.v);
}

/* 0 when every kind in list was found, else 1 (and says which). */
static int expected(const struct report *p, const char *list)
{
    char buf[256], *save = NULL;
    int status = 0;

    snprintf(buf, sizeof buf, "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        int k = 0;

        while (k < K_COUNT && strcmp(kind_names[k], t) != 0)
            k++;
        if (k == K_COUNT) {
            fprintf(stderr, "history check: --expect: unknown kind '%s'\n", t);
            return 2;
        }
        if (p->f[k].count == 0) {
            printf("  expected %s, found none: the checker missed it\n", t);
            status = 1;
        } else {
            printf("  expected %s: found %" PRIu64 "\n", t, p->f[k].count);
        }
    }
    return status;
}

int hi_check(const char *dir, const char *json_path, const char *expect)
{
    static struct report p;
    struct run r;
    char err[512];
    uint64_t violations = 0;
    int status;

    memset(&r, 0, sizeof r);
    if (read_run(&r, dir, err, sizeof err) != 0) {
        fprintf(stderr, "history check: %s\n", err);
        free_run(&r);
        return 2;
    }
    analyse(&r, &p);
    for (int k = 0; k < K_COUNT; k++)
        if (p.f[k].counts)
            violations += p.f[k].count;
    print_report(&r, &p, violations);
    status = violations ? 1 : 0;
    if (json_path != NULL && write_json(&r, &p, violations, json_path) != 0)
        status = 2;
    if (expect != NULL && status != 2)
        status = expected(&p, expect);
    fflush(stdout);
    free_run(&r);
    return status;
}

int hi_check_main(int argc, char **argv)
{
    const char *dir = NULL, *json = NULL, *expect = NULL;

    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(argv[i], "--dir") == 0 && v != NULL)
            dir = argv[++i];
        else if (strcmp(argv[i], "--json") == 0 && v != NULL)
            json = argv[++i];
        else if (strcmp(argv[i], "--expect") == 0 && v != NULL)
            expect = argv[++i];
        else {
            fprintf(stderr, "usage: history check --dir DIR [--json FILE] "
                            "[--expect KINDS]\n");
            return 2;
        }
    }
    if (dir == NULL) {
        fprintf(stderr, "history check: --dir DIR is required\n");
        return 2;
    }
    return hi_check(dir, json, expect);
}

/* ---- summary: a Markdown table of several runs ------------------------------------ */

static int64_t jint(json_object *o, const char *a, const char *b)
{
    json_object *v = NULL;

    if (!json_object_object_get_ex(o, a, &v))
        return -1;
    if (b != NULL && !json_object_object_get_ex(v, b, &v))
        return -1;
    return json_object_get_int64(v);
}

static void cell(json_object *root, const char *kind)
{
    json_object *v = NULL, *c = NULL, *viol = NULL;

    if (!json_object_object_get_ex(root, "violations", &v) ||
        !json_object_object_get_ex(v, kind, &v) ||
        !json_object_object_get_ex(v, "count", &c)) {
        printf(" ? |");
        return;
    }
    json_object_object_get_ex(v, "violation", &viol);
    if (viol != NULL && !json_object_get_boolean(viol))
        printf(" (%" PRId64 ") |", json_object_get_int64(c));
    else if (json_object_get_int64(c) > 0)
        printf(" **%" PRId64 "** |", json_object_get_int64(c));
    else
        printf(" 0 |");
}

int hi_summary_main(int argc, char **argv)
{
    static const char *const kinds[] = {"overlap", "over_permits",
                                        "lost_update",
                                        "reader_saw_write", "stale_write",
                                        "fence_order", "hang", "stall",
                                        "worker_error"};
    int status = 0;

    printf("| backend/mode | seconds | cycles | reader grants (overlapping "
           "pairs) | faults | overlapping held windows | more holders than "
           "permits | lost updates while both held | counter changed under "
           "a reader | stale fenced writes accepted | fences not increasing "
           "| hangs | stalls | worker errors |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 2; i < argc; i++) {
        json_object *root = json_object_from_file(argv[i]), *f = NULL,
                    *s = NULL, *b = NULL, *m = NULL;
        int64_t nf = 0;

        if (root == NULL) {
            fprintf(stderr, "history summary: cannot read %s\n", argv[i]);
            status = 1;
            continue;
        }
        json_object_object_get_ex(root, "backend", &b);
        json_object_object_get_ex(root, "mode", &m);
        json_object_object_get_ex(root, "seconds", &s);
        printf("| %s/%s | %.0f | %" PRId64 " |", json_object_get_string(b),
               json_object_get_string(m), json_object_get_double(s),
               jint(root, "cycles", NULL));
        if (jint(root, "reader_grants", NULL) > 0)
            printf(" %" PRId64 " (%" PRId64 ") |",
                   jint(root, "reader_grants", NULL),
                   jint(root, "info", "reader_overlaps"));
        else
            printf(" - |");
        if (json_object_object_get_ex(root, "faults", &f)) {
            json_object_object_foreach(f, key, val)
            {
                json_object *c = NULL;

                json_object_object_get_ex(val, "count", &c);
                printf("%s %s %" PRId64, nf++ ? "," : "", key,
                       json_object_get_int64(c));
            }
        }
        printf("%s |", nf ? "" : " none");
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
            cell(root, kinds[k]);
        printf("\n");
        json_object_put(root);
    }
    printf("\nCounts in parentheses are for information: the mode does not "
           "claim fencing (under reader grants: the pairs of reader windows "
           "that overlapped; - no readers). Bold: violations.\n");
    return status;
}
