/*
 * bench_report.c: what `dlock bench` prints and writes from its figures:
 * the speed goals, the text table, Markdown for docs/tradeoffs.md, JSON
 * (json-c) with every figure and the machine's description, and an SVG
 * chart written by hand (it is simple XML). It also reads that JSON back,
 * so that `dlock bench --from-json` redraws all of it without measuring.
 *
 * Divisions: the machine; the goals; the text table; Markdown; JSON;
 * reading the JSON back; SVG.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <json-c/json.h>

#include "bench.h"
#include "bench_results.h"

/* ---- the machine ---------------------------------------------------------------- */

/* The first line of a small file, without its newline; "" if unreadable. */
static void read_line(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");

    out[0] = '\0';
    if (f == NULL)
        return;
    if (fgets(out, (int)cap, f) == NULL)
        out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

void bench_machine_describe(struct bench_machine *m)
{
    struct utsname u;
    char line[256];
    FILE *f;

    memset(m, 0, sizeof *m);
    if (uname(&u) == 0) {
        snprintf(m->sysname, sizeof m->sysname, "%s", u.sysname);
        snprintf(m->release, sizeof m->release, "%s", u.release);
        snprintf(m->arch, sizeof m->arch, "%s", u.machine);
    }
    m->nproc = sysconf(_SC_NPROCESSORS_ONLN);
    if ((f = fopen("/proc/cpuinfo", "r")) != NULL) {
        while (fgets(line, sizeof line, f) != NULL)
            if (strncmp(line, "model name", 10) == 0) {
                char *p = strchr(line, ':');
                if (p != NULL) {
                    p += strspn(p + 1, " \t") + 1;
                    p[strcspn(p, "\n")] = '\0';
                    snprintf(m->cpu_model, sizeof m->cpu_model, "%s", p);
                }
                break;
            }
        fclose(f);
    }
    read_line("/sys/devices/system/cpu/cpuidle/current_driver",
              m->cpuidle_driver, sizeof m->cpuidle_driver);
    read_line("/sys/devices/system/cpu/cpuidle/current_governor_ro",
              m->cpuidle_governor, sizeof m->cpuidle_governor);
    if (m->cpuidle_governor[0] == '\0')
        read_line("/sys/devices/system/cpu/cpuidle/current_governor",
                  m->cpuidle_governor, sizeof m->cpuidle_governor);
}

/* ---- the goals ------------------------------------------------------------------- */

static void goal_na(struct bench_goal *g, double value, double limit,
                    const char *note)
{
    g->status = "n/a";
    g->value = value;
    g->limit = limit;
    snprintf(g->note, sizeof g->note, "%s", note);
}

static void goal_judge(struct bench_goal *g, double value, double limit,
                       bool below_is_pass)
{
    g->value = value;
    g->limit = limit;
    g->status = (below_is_pass ? value <= limit : value >= limit) ? "pass"
                                                                  : "miss";
    g->note[0] = '\0';
}

void bench_goal_floor(const struct bench_result *r, struct bench_goal *g)
{
    if (!r->unc_st.ran)
        goal_na(g, -1, GOAL_FLOOR_RATIO, "uncontended not measured");
    else if (r->floor_st.rc == DLOCK_EUNSUPPORTED)
        goal_na(g, -1, GOAL_FLOOR_RATIO, "no floor for this backend");
    else if (!r->floor_st.ran || r->floor.p50 == 0)
        goal_na(g, -1, GOAL_FLOOR_RATIO, "floor not measured");
    else
        goal_judge(g, r->floor_ratio, GOAL_FLOOR_RATIO, true);
}

/*
 * The round trip is the floor's p50 / 2: a bare acquire+release cycle is at
 * least two requests (take, give back), so half of it is one request's
 * round trip, server work included. Floors of three requests (ZooKeeper's
 * create, children, delete; BEGIN/SELECT/COMMIT) make this RTT larger than
 * the real one, and the goal easier: the report says which RTT it used.
 * The goal is for modes whose waiters are woken by the release (notify or
 * a server-side queue); polling modes get the ratio and "n/a".
 */
void bench_goal_handoff(const struct bench_result *r, struct bench_goal *g)
{
    double rtt;

    if (!r->con_st.ran || r->handoff.n == 0) {
        goal_na(g, -1, GOAL_HANDOFF_RTTS, "no hand-off measured");
        return;
    }
    if (!r->floor_st.ran || r->floor.p50 == 0) {
        goal_na(g, -1, GOAL_HANDOFF_RTTS, "no floor, so no round trip");
        return;
    }
    rtt = (double)r->floor.p50 / 2.0;
    if (!(r->caps & (DLOCK_CAP_NOTIFY | DLOCK_CAP_NATIVE_WAIT))) {
        goal_na(g, (double)r->handoff.p50 / rtt, GOAL_HANDOFF_RTTS,
                "waiters poll, no notify or server-side wait");
        return;
    }
    goal_judge(g, (double)r->handoff.p50 / rtt, GOAL_HANDOFF_RTTS, true);
}

/* dlock's hand-offs a second against the contended floor's: the same
 * number of processes taking the bare lock with the server's own waiting
 * request (pg_advisory_lock, GET_LOCK(?, t), FOR UPDATE). */
void bench_goal_contended(const struct bench_result *r, struct bench_goal *g)
{
    if (!r->con_st.ran || r->handoff.n == 0)
        goal_na(g, -1, GOAL_CONTENDED_SHARE, "no hand-off measured");
    else if (r->fcon_st.rc == DLOCK_EUNSUPPORTED)
        goal_na(g, -1, GOAL_CONTENDED_SHARE,
                "the mode has no bare waiting request to compare with");
    else if (!r->fcon_st.ran || r->fcon_handoffs_per_s <= 0)
        goal_na(g, -1, GOAL_CONTENDED_SHARE, "contended floor not measured");
    else
        goal_judge(g, r->handoffs_per_s / r->fcon_handoffs_per_s,
                   GOAL_CONTENDED_SHARE, false);
}

/* A goal of the many-locks workload: value against limit, judged only at
 * GOAL_WATCHDOG_LOCKS held locks or more. */
static void goal_many(const struct bench_result *r, struct bench_goal *g,
                      double value, double limit)
{
    char note[160];

    if (!r->many_st.ran) {
        goal_na(g, -1, limit, "many locks not measured");
        return;
    }
    if (r->locks < GOAL_WATCHDOG_LOCKS) {
        snprintf(note, sizeof note, "set for %d locks; ran %lu",
                 GOAL_WATCHDOG_LOCKS, r->locks);
        goal_na(g, value, limit, note);
        return;
    }
    goal_judge(g, value, limit, true);
}

void bench_goal_watchdog(const struct bench_result *r, struct bench_goal *g)
{
    goal_many(r, g, r->wd_cpu_pct, GOAL_WATCHDOG_PCT);
}

void bench_goal_memory(const struct bench_result *r, struct bench_goal *g)
{
    goal_many(r, g, r->bytes_per_lock, GOAL_MEMORY_BYTES);
}

/* "pass 1.09x", "miss 3.4x", "n/a (why) 2.1x" into buf. */
static const char *goal_text(const struct bench_goal *g, const char *unit,
                             char *buf, size_t cap)
{
    if (strcmp(g->status, "n/a") != 0)
        snprintf(buf, cap, "%s %.2f%s", g->status, g->value, unit);
    else if (g->value >= 0)
        snprintf(buf, cap, "n/a: %s; measured %.2f%s", g->note, g->value,
                 unit);
    else
        snprintf(buf, cap, "n/a: %s", g->note);
    return buf;
}

/* ---- the text table ------------------------------------------------------------------ */

static const char *label_of(const struct bench_result *r, char *buf,
                            size_t cap)
{
    if (r->have_info)
        snprintf(buf, cap, "%s/%s", r->scheme, r->mode);
    else
        snprintf(buf, cap, "%s", r->uri);
    return buf;
}

/* "0.982", or "-" when there is nothing to divide. */
static const char *share_text(double v, char *buf, size_t cap)
{
    if (v < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.3f", v);
    return buf;
}

/* The contended run's history: arrival order and hand-offs, next to what
 * the mode claims. */
static void print_order_table(const struct bench_run *run)
{
    char a[16], b[16];

    printf("\narrival order, from the same run's history (each worker logs "
           "when it called\nacquire and when it returned): in order = "
           "contested grants that went to the\nearliest-arrived waiter; "
           "hand-offs = grants whose previous holder was another\nworker "
           "(the rest: a worker took the lock again after its own "
           "release)\n");
    printf("  %-3s %-11s %9s %10s %8s %8s %9s\n", "#", "claims fair",
           "grants", "contested", "waiting", "in order", "hand-offs");
    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        if (!r->con_st.ran)
            continue;
        if (!r->order_ran) {
            printf("  %-3zu %s\n", i + 1,
                   r->order_seconds < 0 ? "not measured (a JSON from before "
                                          "this figure)"
                                        : "no grant to judge");
            continue;
        }
        printf("  %-3zu %-11s %9llu %10llu %8.2f %8s %9s\n", i + 1,
               !r->have_info ? "?" : (r->caps & DLOCK_CAP_FAIR) ? "yes" : "no",
               (unsigned long long)r->order.grants,
               (unsigned long long)r->order.contested, r->order.mean_waiting,
               share_text(r->order.in_order_share, a, sizeof a),
               share_text(r->order.handoff_share, b, sizeof b));
    }
}

/* The contended floor beside dlock's contended figures. */
static void print_contended_floor(const struct bench_run *run)
{
    char a[32];
    bool any = false;

    for (size_t i = 0; i < run->n; i++)
        any = any || run->r[i].fcon_st.ran ||
              (run->r[i].con_st.ran && run->r[i].fcon_st.msg[0] != '\0');
    if (!any)
        return;
    printf("\ncontended floor: as many processes taking the bare lock with "
           "the server's own\nwaiting request (no dlock, no fence); ratio = "
           "dlock's hand-offs/s / the floor's\n(-: the server has no "
           "waiting request)\n");
    printf("  %-3s %11s %9s %9s %8s %7s\n", "#", "hand-offs/s", "acq/s",
           "h-o p50", "overlaps", "ratio");
    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        if (!r->con_st.ran)
            continue;
        if (r->fcon_st.rc == DLOCK_EUNSUPPORTED && !r->fcon_st.ran) {
            printf("  %-3zu %11s\n", i + 1, "-");
            continue;
        }
        if (!r->fcon_st.ran) {
            printf("  %-3zu %s\n", i + 1, r->fcon_st.msg);
            continue;
        }
        printf("  %-3zu %11.0f %9.0f %9s %8llu %6.2fx\n", i + 1,
               r->fcon_handoffs_per_s, r->fcon_acq_per_s,
               r->fcon_handoff.n
                   ? bn_fmt_ns(r->fcon_handoff.p50, a, sizeof a)
                   : "-",
               (unsigned long long)r->fcon_overlaps,
               r->fcon_handoffs_per_s > 0
                   ? r->handoffs_per_s / r->fcon_handoffs_per_s
                   : 0.0);
    }
}

/* CPU per owner change: "client+server" µs, or "-". */
static const char *cpu_text(const struct bench_cpu *c, uint64_t changes,
                            char *buf, size_t cap)
{
    if (!c->ran || changes == 0)
        return "-";
    if (!c->server_ok)
        snprintf(buf, cap, "%.1f+?", (double)c->client_ns / 1e3 / changes);
    else
        snprintf(buf, cap, "%.1f+%.1f=%.1f",
                 (double)c->client_ns / 1e3 / changes,
                 (double)c->server_ns / 1e3 / changes,
                 (double)(c->client_ns + c->server_ns) / 1e3 / changes);
    return buf;
}

/* The CPU each owner change cost, dlock's contended and its floor's. */
static void print_cpu_table(const struct bench_run *run)
{
    char a[48], b[48];
    bool any = false;

    for (size_t i = 0; i < run->n; i++)
        any = any || run->r[i].cpu.ran;
    if (!any)
        return;
    printf("\nCPU per owner change (contended, recorded window), in µs: "
           "client (the worker\nprocesses' CPU time, every thread) + "
           "server (its own count: Redis INFO cpu's\nused_cpu_user + "
           "used_cpu_sys; ? where the mode cannot say) = total, divided "
           "by\nthe hand-offs; ratio = dlock's total / the floor's\n");
    printf("  %-3s %26s %26s %7s\n", "#", "dlock", "floor", "ratio");
    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        double d, f;
        if (!r->con_st.ran || !r->cpu.ran)
            continue;
        d = r->handoffs ? (double)(r->cpu.client_ns + r->cpu.server_ns) /
                              r->handoffs
                        : 0;
        f = r->fcon_cpu.ran && r->fcon_handoffs
                ? (double)(r->fcon_cpu.client_ns + r->fcon_cpu.server_ns) /
                      r->fcon_handoffs
                : 0;
        printf("  %-3zu %26s %26s", i + 1,
               cpu_text(&r->cpu, r->handoffs, a, sizeof a),
               r->fcon_st.ran ? cpu_text(&r->fcon_cpu, r->fcon_handoffs, b,
                                         sizeof b)
                              : "-");
        if (d > 0 && f > 0 && r->cpu.server_ok == r->fcon_cpu.server_ok)
            printf(" %6.2fx\n", d / f);
        else
            printf(" %7s\n", "-");
    }
}

void bench_print_table(const struct bench_run *run)
{
    const struct bench_machine *m = &run->machine;
    char a[32], b[32], c[32], d[32], e[32], caps[256];
    bool any;

    printf("dlock bench %s, %s: %.1fs per workload, warm-up %.1fs per URI\n",
           run->version, run->date, run->duration_ms / 1e3,
           run->warmup_ms / 1e3);
    printf("machine: %s %s %s, %s, %ld CPUs, cpuidle %s/%s\n", m->sysname,
           m->release, m->arch, m->cpu_model[0] ? m->cpu_model : "unknown CPU",
           m->nproc, m->cpuidle_driver[0] ? m->cpuidle_driver : "none",
           m->cpuidle_governor[0] ? m->cpuidle_governor : "none");
    printf("cpu idle latency: %s\n\n", run->steady_note);
    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        printf("[%zu] %s\n", i + 1, r->uri);
        if (r->have_info) {
            bn_caps_text(r->caps, caps, sizeof caps);
            printf("    backend %s, mode %s: %s\n", r->scheme, r->mode, caps);
        }
        if (!r->open.ran)
            printf("    not measured: %s\n", r->open.msg);
    }

    any = false;
    for (size_t i = 0; i < run->n; i++)
        any = any || run->r[i].open.ran;
    if (!any) {
        fflush(stdout);
        return;
    }

    if (run->workloads & (WL_UNCONTENDED | WL_FLOOR)) {
        printf("\nuncontended: one handle, acquire+release cycles on one "
               "name; floor: the\nsame count of cycles of the bare lock "
               "protocol (client library, no fence),\ninterleaved in rounds; "
               "fence: as many draws of the mode's fence alone\n(-: it "
               "comes inside the lock's own request)\n");
        printf("  %-3s %9s %9s %9s %9s %9s %10s %10s %7s %9s\n", "#",
               "cycles", "ops/s", "p50", "p99", "p99.9", "floor p50",
               "floor p99", "ratio", "fence p50");
        for (size_t i = 0; i < run->n; i++) {
            const struct bench_result *r = &run->r[i];
            if (!r->unc_st.ran) {
                if (r->open.ran)
                    printf("  %-3zu %s\n", i + 1, r->unc_st.msg);
                continue;
            }
            printf("  %-3zu %9llu %9.0f %9s %9s %9s", i + 1,
                   (unsigned long long)r->unc.n, r->unc.per_s,
                   bn_fmt_ns(r->unc.p50, a, sizeof a),
                   bn_fmt_ns(r->unc.p99, b, sizeof b),
                   bn_fmt_ns(r->unc.p999, c, sizeof c));
            if (r->floor_st.ran)
                printf(" %10s %10s %6.2fx", bn_fmt_ns(r->floor.p50, d, sizeof d),
                       bn_fmt_ns(r->floor.p99, e, sizeof e), r->floor_ratio);
            else
                printf(" %10s %10s %7s", "n/a", "n/a", "n/a");
            printf(" %9s\n", r->fence_st.ran
                                 ? bn_fmt_ns(r->fence.p50, d, sizeof d)
                             : r->fence_st.rc == DLOCK_EUNSUPPORTED ? "-"
                                                                    : "n/a");
        }
        for (size_t i = 0; i < run->n; i++) {
            const struct bench_result *r = &run->r[i];
            if (r->unc_st.ran && !r->floor_st.ran)
                printf("  %zu: %s\n", i + 1, r->floor_st.msg);
            if (r->unc_st.ran && !r->fence_st.ran &&
                r->fence_st.rc != DLOCK_EUNSUPPORTED)
                printf("  %zu: %s\n", i + 1, r->fence_st.msg);
        }
    }

    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        if (r->open.ran && !r->forget_st.ran && r->forget_st.msg[0] != '\0')
            printf("  %zu: names left behind: %s\n", i + 1,
                   r->forget_st.msg);
    }

    if (run->workloads & WL_CONTENDED) {
        printf("\ncontended: %lu worker processes on one name; hand-off = "
               "release to the next\nholder's acquire (another worker), "
               "fairness = acquisitions per worker\n",
               run->workers);
        printf("  %-3s %11s %9s %9s %9s %15s %8s %6s %8s\n", "#",
               "hand-offs/s", "acq/s", "h-o p50", "h-o p99", "per worker",
               "stddev", "jain", "overlaps");
        for (size_t i = 0; i < run->n; i++) {
            const struct bench_result *r = &run->r[i];
            char mm[40];
            if (!r->con_st.ran) {
                if (r->open.ran)
                    printf("  %-3zu %s\n", i + 1, r->con_st.msg);
                continue;
            }
            snprintf(mm, sizeof mm, "%llu-%llu",
                     (unsigned long long)r->fair_min,
                     (unsigned long long)r->fair_max);
            printf("  %-3zu %11.0f %9.0f %9s %9s %15s %8.1f %6.3f %8llu\n",
                   i + 1, r->handoffs_per_s, r->acq_per_s,
                   r->handoff.n ? bn_fmt_ns(r->handoff.p50, a, sizeof a) : "-",
                   r->handoff.n ? bn_fmt_ns(r->handoff.p99, b, sizeof b) : "-",
                   mm, r->fair_stddev, r->fair_jain,
                   (unsigned long long)r->overlaps);
        }
        print_contended_floor(run);
        print_cpu_table(run);
        print_order_table(run);
    }

    if (run->workloads & WL_MANY) {
        printf("\nmany locks: K names held by one client; the main thread "
               "sleeps; watchdog CPU =\nprocess CPU - main thread CPU, as "
               "%% of one core; memory = RSS growth / K\n");
        printf("  %-3s %7s %7s %11s %11s %11s %10s %10s %6s\n", "#", "locks",
               "lease", "acquire all", "renew/s exp", "renew/s obs",
               "watchdog", "bytes/lock", "lost");
        any = false;
        for (size_t i = 0; i < run->n; i++) {
            const struct bench_result *r = &run->r[i];
            char obs[32];
            if (!r->many_st.ran) {
                if (r->open.ran)
                    printf("  %-3zu %s\n", i + 1, r->many_st.msg);
                continue;
            }
            any = true;
            if (r->renew_observable)
                snprintf(obs, sizeof obs, "%.0f", r->renew_observed_per_s);
            else
                snprintf(obs, sizeof obs, "n/a");
            printf("  %-3zu %7lu %7s %11s %11.0f %11s %9.2f%% %10.0f %6lu\n",
                   i + 1, r->locks,
                   bn_fmt_ns((uint64_t)r->lease_ms * 1000000u, a, sizeof a),
                   bn_fmt_ns((uint64_t)(r->acquire_all_s * 1e9), b, sizeof b),
                   r->renew_expected_per_s, obs, r->wd_cpu_pct,
                   r->bytes_per_lock, r->lost);
        }
        for (size_t i = 0; any && i < run->n; i++) {
            if (run->r[i].many_st.ran && !run->r[i].renew_observable)
                printf("  %zu: renewals %s\n", i + 1, run->r[i].renew_method);
            if (run->r[i].locks_asked > 0)
                printf("  %zu: %lu locks, not %lu: each held lock ties up a "
                       "connection of its own\n     (session-per-lock), and "
                       "servers refuse connections well before that\n",
                       i + 1, run->r[i].locks, run->r[i].locks_asked);
        }
    }

    printf("\ngoals (issues 7, 17): uncontended p50 <= %.2fx floor p50; "
           "hand-off p50 <= %.0fx RTT\n(RTT = floor p50 / 2) where waiters "
           "are woken; hand-offs/s >= %.1fx the contended\nfloor's; "
           "watchdog < %.0f%% of one core and < %d bytes per lock at %d "
           "locks\n",
           GOAL_FLOOR_RATIO, GOAL_HANDOFF_RTTS, GOAL_CONTENDED_SHARE,
           GOAL_WATCHDOG_PCT, GOAL_MEMORY_BYTES, GOAL_WATCHDOG_LOCKS);
    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        struct bench_goal g;
        char t[256];
        if (!r->open.ran)
            continue;
        printf("  [%zu] %s\n", i + 1, label_of(r, caps, sizeof caps));
        bench_goal_floor(r, &g);
        printf("      uncontended vs floor:  %s\n", goal_text(&g, "x", t, sizeof t));
        bench_goal_handoff(r, &g);
        printf("      hand-off vs RTT:       %s\n", goal_text(&g, "x", t, sizeof t));
        bench_goal_contended(r, &g);
        printf("      vs contended floor:    %s\n", goal_text(&g, "x", t, sizeof t));
        bench_goal_watchdog(r, &g);
        printf("      watchdog CPU:          %s\n", goal_text(&g, "%", t, sizeof t));
        bench_goal_memory(r, &g);
        printf("      memory per lock:       %s\n", goal_text(&g, " B", t, sizeof t));
    }
    fflush(stdout);
}

/* ---- Markdown -------------------------------------------------------------------------- */

/* The µ sign and friends are fine in Markdown; keep units in the header. */
static double us(uint64_t ns)
{
    return (double)ns / 1e3;
}

/* Text for a Markdown table cell: | would end the cell. */
static const char *md_cell(const char *text, char *buf, size_t cap)
{
    size_t n = 0;

    for (; *text != '\0' && n + 3 < cap; text++) {
        if (*text == '|')
            buf[n++] = '\\';
        buf[n++] = *text == '\n' ? ' ' : *text;
    }
    buf[n] = '\0';
    return buf;
}

/* A goal cell, or "–" when its workload was not run at all. */
static void md_goal(FILE *f, const struct bench_goal *g, const char *unit)
{
    char t[256];

    fprintf(f, "| %s ", goal_text(g, unit, t, sizeof t));
}

/* Arrival order and hand-offs of the contended run, beside the claim. */
static void md_order(FILE *f, const struct bench_run *run)
{
    char lab[128], a[16], b[16];

    fprintf(f, "| backend/mode | claims fair | grants judged | contested | "
               "in arrival order | hand-offs |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        if (!r->con_st.ran || !r->order_ran)
            continue;
        fprintf(f, "| %s | %s | %llu | %llu | %s | %s |\n",
                label_of(r, lab, sizeof lab),
                !r->have_info ? "?" : (r->caps & DLOCK_CAP_FAIR) ? "yes" : "no",
                (unsigned long long)r->order.grants,
                (unsigned long long)r->order.contested,
                share_text(r->order.in_order_share, a, sizeof a),
                share_text(r->order.handoff_share, b, sizeof b));
    }
    fprintf(f, "\n");
}

/* Tables only for the workloads that ran: speed (uncontended, floor,
 * contended), many locks, and the goals they can judge. */
int bench_write_markdown(const struct bench_run *run, const char *path)
{
    FILE *f = fopen(path, "w");
    bool speed = run->workloads & (WL_UNCONTENDED | WL_FLOOR | WL_CONTENDED);
    bool many = run->workloads & WL_MANY;
    const struct bench_machine *m = &run->machine;
    char lab[128];

    if (f == NULL)
        return -1;
    fprintf(f, "Measured %s with dlock %s on %s %s, %s, %ld CPUs, cpuidle "
               "%s; %.1f s per workload",
            run->date, run->version, m->sysname, m->release,
            m->cpu_model[0] ? m->cpu_model : "unknown CPU", m->nproc,
            m->cpuidle_driver[0] ? m->cpuidle_driver : "none",
            run->duration_ms / 1e3);
    if (run->warmup_ms > 0)
        fprintf(f, " after a %.1f s warm-up per URI", run->warmup_ms / 1e3);
    fprintf(f, "; idle CPUs %s",
            run->steady ? "kept polling (/dev/cpu_dma_latency held at 0)"
                        : "free to halt");
    if (run->workloads & WL_CONTENDED)
        fprintf(f, ", %lu contending processes", run->workers);
    if (many)
        fprintf(f, ", %lu held locks", run->locks);
    fprintf(f, ".\n\n");
    for (size_t i = 0; i < run->n; i++)
        if (!run->r[i].open.ran) {
            char cell[600];
            fprintf(f, "- %s: not measured: %s\n\n",
                    label_of(&run->r[i], lab, sizeof lab),
                    md_cell(run->r[i].open.msg, cell, sizeof cell));
        }

    if (speed) {
        fprintf(f, "| backend/mode | uncontended ops/s | p50 µs | p99 µs | "
                   "p99.9 µs | floor p50 µs | dlock/floor | fence p50 µs | "
                   "hand-offs/s | hand-off p50 µs | p99 µs | Jain | "
                   "floor hand-offs/s |\n");
        fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for (size_t i = 0; i < run->n; i++) {
            const struct bench_result *r = &run->r[i];
            if (!r->open.ran)
                continue;
            fprintf(f, "| %s ", label_of(r, lab, sizeof lab));
            if (r->unc_st.ran)
                fprintf(f, "| %.0f | %.1f | %.1f | %.1f ", r->unc.per_s,
                        us(r->unc.p50), us(r->unc.p99), us(r->unc.p999));
            else
                fprintf(f, "| – | – | – | – ");
            if (r->floor_st.ran)
                fprintf(f, "| %.1f | %.2f× ", us(r->floor.p50), r->floor_ratio);
            else
                fprintf(f, "| n/a | n/a ");
            if (r->fence_st.ran)
                fprintf(f, "| %.1f ", us(r->fence.p50));
            else
                fprintf(f, "| %s ", r->fence_st.rc == DLOCK_EUNSUPPORTED
                                        ? "in the lock"
                                        : "n/a");
            if (r->con_st.ran && r->handoff.n > 0)
                fprintf(f, "| %.0f | %.1f | %.1f | %.3f ",
                        r->handoffs_per_s, us(r->handoff.p50),
                        us(r->handoff.p99), r->fair_jain);
            else
                fprintf(f, "| – | – | – | – ");
            if (r->fcon_st.ran)
                fprintf(f, "| %.0f |\n", r->fcon_handoffs_per_s);
            else
                fprintf(f, "| %s |\n", r->fcon_st.rc == DLOCK_EUNSUPPORTED
                                           ? "no waiting request"
                                           : "–");
        }
        fprintf(f, "\n");
    }
    if (run->workloads & WL_CONTENDED)
        md_order(f, run);

    if (many) {
        fprintf(f, "| backend/mode | held locks | lease | renewals/s expected "
                   "| renewals/s observed | watchdog CPU (one core) | "
                   "bytes/lock | lost |\n");
        fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|\n");
        for (size_t i = 0; i < run->n; i++) {
            const struct bench_result *r = &run->r[i];
            if (!r->open.ran)
                continue;
            fprintf(f, "| %s ", label_of(r, lab, sizeof lab));
            if (!r->many_st.ran) {
                char cell[600];
                fprintf(f, "| not measured: %s | | | | | | |\n",
                        md_cell(r->many_st.msg, cell, sizeof cell));
                continue;
            }
            char lease[32];
            fprintf(f, "| %lu%s | %s | %.0f | ", r->locks,
                    r->locks_asked > 0 ? " (capped: a connection each)" : "",
                    bn_fmt_ns((uint64_t)r->lease_ms * 1000000u, lease,
                              sizeof lease),
                    r->renew_expected_per_s);
            if (r->renew_observable)
                fprintf(f, "%.0f ", r->renew_observed_per_s);
            else
                fprintf(f, "n/a ");
            fprintf(f, "| %.2f%% | %.0f | %lu |\n", r->wd_cpu_pct,
                    r->bytes_per_lock, r->lost);
        }
        fprintf(f, "\n");
    }

    fprintf(f, "| backend/mode ");
    if (run->workloads & (WL_UNCONTENDED | WL_FLOOR))
        fprintf(f, "| uncontended ≤ %.2f× floor ", GOAL_FLOOR_RATIO);
    if (run->workloads & WL_CONTENDED)
        fprintf(f, "| hand-off ≤ %.0f× RTT | hand-offs/s ≥ %.1f× the "
                   "contended floor ",
                GOAL_HANDOFF_RTTS, GOAL_CONTENDED_SHARE);
    if (many)
        fprintf(f, "| watchdog < %.0f%% of a core at %d locks "
                   "| memory < %d B per lock ",
                GOAL_WATCHDOG_PCT, GOAL_WATCHDOG_LOCKS, GOAL_MEMORY_BYTES);
    fprintf(f, "|\n|---");
    if (run->workloads & (WL_UNCONTENDED | WL_FLOOR))
        fprintf(f, "|---");
    if (run->workloads & WL_CONTENDED)
        fprintf(f, "|---|---");
    if (many)
        fprintf(f, "|---|---");
    fprintf(f, "|\n");
    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        struct bench_goal g;
        if (!r->open.ran)
            continue;
        fprintf(f, "| %s ", label_of(r, lab, sizeof lab));
        if (run->workloads & (WL_UNCONTENDED | WL_FLOOR)) {
            bench_goal_floor(r, &g);
            md_goal(f, &g, "×");
        }
        if (run->workloads & WL_CONTENDED) {
            bench_goal_handoff(r, &g);
            md_goal(f, &g, "×");
            bench_goal_contended(r, &g);
            md_goal(f, &g, "×");
        }
        if (many) {
            bench_goal_watchdog(r, &g);
            md_goal(f, &g, "%");
            bench_goal_memory(r, &g);
            md_goal(f, &g, " B");
        }
        fprintf(f, "|\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- JSON ---------------------------------------------------------------------------- */

/* The JSON names of the WL_* bits, in bit order. */
#define WL_COUNT 4
static const char *const wl_names[WL_COUNT] = {"uncontended", "floor",
                                               "contended", "many"};

static json_object *jlat(const struct bench_lat *l)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "cycles", json_object_new_int64((int64_t)l->n));
    json_object_object_add(o, "seconds", json_object_new_double(l->seconds));
    json_object_object_add(o, "per_s", json_object_new_double(l->per_s));
    json_object_object_add(o, "min_ns", json_object_new_int64((int64_t)l->min));
    json_object_object_add(o, "p50_ns", json_object_new_int64((int64_t)l->p50));
    json_object_object_add(o, "p99_ns", json_object_new_int64((int64_t)l->p99));
    json_object_object_add(o, "p999_ns",
                           json_object_new_int64((int64_t)l->p999));
    json_object_object_add(o, "max_ns", json_object_new_int64((int64_t)l->max));
    json_object_object_add(o, "mean_ns", json_object_new_double(l->mean));
    return o;
}

/* CPU per owner change of a contended workload: the totals over the
 * recorded window (ns) and the per-change figures (µs); server's null
 * where the mode cannot say. */
static json_object *jcpu(const struct bench_cpu *c, uint64_t changes)
{
    json_object *o = json_object_new_object();
    double n = changes > 0 ? (double)changes : 0;

    json_object_object_add(o, "measured", json_object_new_boolean(c->ran));
    if (!c->ran)
        return o;
    json_object_object_add(o, "owner_changes",
                           json_object_new_int64((int64_t)changes));
    json_object_object_add(o, "client_cpu_ns",
                           json_object_new_int64((int64_t)c->client_ns));
    json_object_object_add(o, "server_cpu_ns",
                           c->server_ok ? json_object_new_int64(
                                              (int64_t)c->server_ns)
                                        : NULL);
    json_object_object_add(o, "client_us",
                           json_object_new_double(n > 0 ? c->client_ns / 1e3 / n
                                                        : 0));
    json_object_object_add(o, "server_us",
                           c->server_ok
                               ? json_object_new_double(
                                     n > 0 ? c->server_ns / 1e3 / n : 0)
                               : NULL);
    json_object_object_add(o, "total_us",
                           c->server_ok
                               ? json_object_new_double(
                                     n > 0 ? (c->client_ns + c->server_ns) /
                                                 1e3 / n
                                           : 0)
                               : NULL);
    return o;
}

/* Adds "measured", and "error" when it did not run. */
static void jstatus(json_object *o, const struct bench_status *st)
{
    json_object_object_add(o, "measured", json_object_new_boolean(st->ran));
    if (!st->ran) {
        json_object_object_add(o, "error", json_object_new_string(
                                               st->msg[0] ? st->msg : "not run"));
        json_object_object_add(o, "error_code",
                               json_object_new_string(dlock_err_name(st->rc)));
    }
}

static json_object *jgoal(const struct bench_goal *g)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "status", json_object_new_string(g->status));
    json_object_object_add(o, "value", g->value >= 0
                                           ? json_object_new_double(g->value)
                                           : NULL);
    json_object_object_add(o, "limit", json_object_new_double(g->limit));
    if (g->note[0] != '\0')
        json_object_object_add(o, "note", json_object_new_string(g->note));
    return o;
}

/* A share, or null when there was nothing to divide. */
static json_object *jshare(double v)
{
    return v < 0 ? NULL : json_object_new_double(v);
}

/* The contended run's arrival order and hand-offs, from its history. */
static json_object *jorder(const struct bench_result *r)
{
    json_object *o = json_object_new_object();
    const struct bench_order *d = &r->order;

    json_object_object_add(
        o, "claims_fair",
        r->have_info ? json_object_new_boolean((r->caps & DLOCK_CAP_FAIR) != 0)
                     : NULL);
    json_object_object_add(o, "judged", json_object_new_boolean(r->order_ran));
    json_object_object_add(o, "seconds", json_object_new_double(r->order_seconds));
    json_object_object_add(o, "grants", json_object_new_int64((int64_t)d->grants));
    json_object_object_add(o, "contested",
                           json_object_new_int64((int64_t)d->contested));
    json_object_object_add(o, "in_order",
                           json_object_new_int64((int64_t)d->in_order));
    json_object_object_add(o, "in_order_share", jshare(d->in_order_share));
    json_object_object_add(o, "handoffs",
                           json_object_new_int64((int64_t)d->handoffs));
    json_object_object_add(o, "handoff_share", jshare(d->handoff_share));
    json_object_object_add(o, "mean_waiting",
                           json_object_new_double(d->mean_waiting));
    return o;
}

static json_object *jresult(const struct bench_result *r)
{
    json_object *o = json_object_new_object(), *w, *caps, *arr, *goals;
    struct bench_goal g;

    json_object_object_add(o, "uri", json_object_new_string(r->uri));
    json_object_object_add(o, "scheme", r->have_info
                                            ? json_object_new_string(r->scheme)
                                            : NULL);
    json_object_object_add(o, "mode", r->have_info
                                          ? json_object_new_string(r->mode)
                                          : NULL);
    caps = json_object_new_array();
    for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL; bit <<= 1)
        if (r->caps & bit)
            json_object_array_add(caps,
                                  json_object_new_string(dlock_cap_name(bit)));
    json_object_object_add(o, "caps", caps);
    json_object_object_add(o, "reachable", json_object_new_boolean(r->open.ran));
    if (!r->open.ran) {
        json_object_object_add(o, "error", json_object_new_string(r->open.msg));
        json_object_object_add(o, "error_code",
                               json_object_new_string(dlock_err_name(r->open.rc)));
        return o;
    }

    w = r->unc_st.ran ? jlat(&r->unc) : json_object_new_object();
    jstatus(w, &r->unc_st);
    json_object_object_add(w, "rounds", json_object_new_int((int)r->rounds));
    json_object_object_add(o, "uncontended", w);

    w = r->floor_st.ran ? jlat(&r->floor) : json_object_new_object();
    jstatus(w, &r->floor_st);
    json_object_object_add(w, "available", json_object_new_boolean(
                                               r->floor_st.rc != DLOCK_EUNSUPPORTED));
    json_object_object_add(w, "dlock_p50_over_floor_p50",
                           r->floor_st.ran ? json_object_new_double(r->floor_ratio)
                                           : NULL);
    json_object_object_add(o, "floor", w);

    /* The fence alone: "available" false where it comes inside the lock's
     * own request (nothing to time apart). */
    w = r->fence_st.ran ? jlat(&r->fence) : json_object_new_object();
    jstatus(w, &r->fence_st);
    json_object_object_add(w, "available", json_object_new_boolean(
                                               r->fence_st.rc != DLOCK_EUNSUPPORTED));
    json_object_object_add(o, "fence", w);

    w = json_object_new_object();
    jstatus(w, &r->forget_st);
    json_object_object_add(w, "available", json_object_new_boolean(
                                               r->forget_st.rc != DLOCK_EUNSUPPORTED));
    json_object_object_add(o, "cleanup", w);

    w = json_object_new_object();
    jstatus(w, &r->con_st);
    if (r->con_st.ran) {
        json_object_object_add(w, "workers", json_object_new_int((int)r->workers));
        json_object_object_add(w, "seconds", json_object_new_double(r->con_seconds));
        json_object_object_add(w, "acquisitions",
                               json_object_new_int64((int64_t)r->acquisitions));
        json_object_object_add(w, "acquisitions_per_s",
                               json_object_new_double(r->acq_per_s));
        json_object_object_add(w, "handoffs",
                               json_object_new_int64((int64_t)r->handoffs));
        json_object_object_add(w, "handoffs_per_s",
                               json_object_new_double(r->handoffs_per_s));
        json_object_object_add(w, "handoff_latency", jlat(&r->handoff));
        json_object_object_add(w, "acquire_timeouts",
                               json_object_new_int64((int64_t)r->timeouts));
        json_object_object_add(w, "overlaps",
                               json_object_new_int64((int64_t)r->overlaps));
        arr = json_object_new_array();
        for (unsigned i = 0; i < r->workers; i++)
            json_object_array_add(arr, json_object_new_int64(
                                           (int64_t)r->per_worker[i]));
        json_object_object_add(w, "acquisitions_per_worker", arr);
        json_object *fair = json_object_new_object();
        json_object_object_add(fair, "min", json_object_new_int64((int64_t)r->fair_min));
        json_object_object_add(fair, "max", json_object_new_int64((int64_t)r->fair_max));
        json_object_object_add(fair, "mean", json_object_new_double(r->fair_mean));
        json_object_object_add(fair, "stddev", json_object_new_double(r->fair_stddev));
        json_object_object_add(fair, "jain_index", json_object_new_double(r->fair_jain));
        json_object_object_add(w, "fairness", fair);
        json_object_object_add(w, "cpu_per_owner_change",
                               jcpu(&r->cpu, r->handoffs));
        json_object_object_add(w, "arrival_order", jorder(r));
    }
    json_object_object_add(o, "contended", w);

    /* The contended floor: "available" false where the server has no
     * waiting request. */
    w = json_object_new_object();
    jstatus(w, &r->fcon_st);
    json_object_object_add(w, "available", json_object_new_boolean(
                                               r->fcon_st.rc != DLOCK_EUNSUPPORTED));
    if (r->fcon_st.ran) {
        json_object_object_add(w, "acquisitions_per_s",
                               json_object_new_double(r->fcon_acq_per_s));
        json_object_object_add(w, "handoffs_per_s",
                               json_object_new_double(r->fcon_handoffs_per_s));
        json_object_object_add(w, "handoff_latency", jlat(&r->fcon_handoff));
        json_object_object_add(w, "overlaps",
                               json_object_new_int64((int64_t)r->fcon_overlaps));
        json_object_object_add(w, "handoffs",
                               json_object_new_int64((int64_t)r->fcon_handoffs));
        json_object_object_add(w, "cpu_per_owner_change",
                               jcpu(&r->fcon_cpu, r->fcon_handoffs));
    }
    json_object_object_add(o, "contended_floor", w);

    w = json_object_new_object();
    jstatus(w, &r->many_st);
    if (r->many_st.ran) {
        json_object_object_add(w, "locks", json_object_new_int64((int64_t)r->locks));
        json_object_object_add(w, "locks_asked",
                               json_object_new_int64((int64_t)(r->locks_asked > 0
                                                                   ? r->locks_asked
                                                                   : r->locks)));
        if (r->locks_asked > 0)
            json_object_object_add(w, "capped_because",
                                   json_object_new_string(
                                       "session-per-lock: each held lock ties "
                                       "up a connection of its own"));
        json_object_object_add(w, "lease_ms", json_object_new_int64(r->lease_ms));
        json_object_object_add(w, "seconds", json_object_new_double(r->many_seconds));
        json_object_object_add(w, "acquire_all_s",
                               json_object_new_double(r->acquire_all_s));
        json_object_object_add(w, "release_all_s",
                               json_object_new_double(r->release_all_s));
        json_object_object_add(w, "renewals_expected_per_s",
                               json_object_new_double(r->renew_expected_per_s));
        json_object_object_add(w, "renewals_observed",
                               r->renew_observable
                                   ? json_object_new_int64((int64_t)r->renewals_observed)
                                   : NULL);
        json_object_object_add(w, "renewals_observed_per_s",
                               r->renew_observable
                                   ? json_object_new_double(r->renew_observed_per_s)
                                   : NULL);
        json_object_object_add(w, "renewals_method",
                               json_object_new_string(r->renew_method));
        json_object_object_add(w, "watchdog_cpu_s", json_object_new_double(r->wd_cpu_s));
        json_object_object_add(w, "watchdog_cpu_pct_of_one_core",
                               json_object_new_double(r->wd_cpu_pct));
        json_object_object_add(w, "main_thread_cpu_s",
                               json_object_new_double(r->main_cpu_s));
        json_object_object_add(w, "rss_delta_bytes", json_object_new_int64(r->rss_delta));
        json_object_object_add(w, "bytes_per_lock",
                               json_object_new_double(r->bytes_per_lock));
        json_object_object_add(w, "lost", json_object_new_int64((int64_t)r->lost));
    }
    json_object_object_add(o, "many_locks", w);

    goals = json_object_new_object();
    bench_goal_floor(r, &g);
    json_object_object_add(goals, "uncontended_vs_floor", jgoal(&g));
    bench_goal_handoff(r, &g);
    json_object_object_add(goals, "handoff_vs_rtt", jgoal(&g));
    bench_goal_contended(r, &g);
    json_object_object_add(goals, "handoffs_vs_contended_floor", jgoal(&g));
    bench_goal_watchdog(r, &g);
    json_object_object_add(goals, "watchdog_cpu", jgoal(&g));
    bench_goal_memory(r, &g);
    json_object_object_add(goals, "memory_per_lock", jgoal(&g));
    json_object_object_add(o, "goals", goals);
    return o;
}

int bench_write_json(const struct bench_run *run, const char *path)
{
    json_object *root = json_object_new_object(), *mo, *po, *arr;
    const struct bench_machine *m = &run->machine;
    int rc;

    json_c_set_serialization_double_format("%.6g", JSON_C_OPTION_THREAD);
    json_object_object_add(root, "dlock_version",
                           json_object_new_string(run->version));
    json_object_object_add(root, "date", json_object_new_string(run->date));
    mo = json_object_new_object();
    json_object_object_add(mo, "sysname", json_object_new_string(m->sysname));
    json_object_object_add(mo, "release", json_object_new_string(m->release));
    json_object_object_add(mo, "arch", json_object_new_string(m->arch));
    json_object_object_add(mo, "cpu_model", json_object_new_string(m->cpu_model));
    json_object_object_add(mo, "nproc", json_object_new_int64(m->nproc));
    json_object_object_add(mo, "cpuidle_driver",
                           m->cpuidle_driver[0] ? json_object_new_string(m->cpuidle_driver)
                                               : NULL);
    json_object_object_add(mo, "cpuidle_governor",
                           m->cpuidle_governor[0]
                               ? json_object_new_string(m->cpuidle_governor)
                               : NULL);
    json_object_object_add(mo, "cpu_dma_latency_held",
                           json_object_new_boolean(run->steady));
    json_object_object_add(root, "machine", mo);
    po = json_object_new_object();
    json_object_object_add(po, "duration_ms", json_object_new_int64(run->duration_ms));
    json_object_object_add(po, "warmup_ms", json_object_new_int64(run->warmup_ms));
    json_object_object_add(po, "workers", json_object_new_int64((int64_t)run->workers));
    json_object_object_add(po, "locks", json_object_new_int64((int64_t)run->locks));
    json_object_object_add(po, "lease_ms", run->lease_ms
                                               ? json_object_new_int64(run->lease_ms)
                                               : NULL);
    arr = json_object_new_array();
    for (unsigned i = 0; i < WL_COUNT; i++)
        if (run->workloads & (1u << i))
            json_object_array_add(arr, json_object_new_string(wl_names[i]));
    json_object_object_add(po, "workloads", arr);
    json_object *gl = json_object_new_object();
    json_object_object_add(gl, "uncontended_vs_floor_max",
                           json_object_new_double(GOAL_FLOOR_RATIO));
    json_object_object_add(gl, "handoff_vs_rtt_max",
                           json_object_new_double(GOAL_HANDOFF_RTTS));
    json_object_object_add(gl, "rtt_definition",
                           json_object_new_string("floor p50 / 2"));
    json_object_object_add(gl, "watchdog_cpu_pct_max",
                           json_object_new_double(GOAL_WATCHDOG_PCT));
    json_object_object_add(gl, "watchdog_locks",
                           json_object_new_int(GOAL_WATCHDOG_LOCKS));
    json_object_object_add(gl, "memory_bytes_per_lock_max",
                           json_object_new_int(GOAL_MEMORY_BYTES));
    json_object_object_add(po, "goals", gl);
    json_object_object_add(root, "parameters", po);
    arr = json_object_new_array();
    for (size_t i = 0; i < run->n; i++)
        json_object_array_add(arr, jresult(&run->r[i]));
    json_object_object_add(root, "results", arr);
    rc = json_object_to_file_ext(path, root,
                                 JSON_C_TO_STRING_PRETTY |
                                     JSON_C_TO_STRING_NOSLASHESCAPE);
    json_object_put(root);
    return rc == 0 ? 0 : -1;
}

/* ---- reading the JSON back ------------------------------------------------------------ */

/* Member key of o; NULL when o is not an object, lacks key, or it is null. */
static json_object *jat(json_object *o, const char *key)
{
    json_object *v = NULL;

    if (!json_object_is_type(o, json_type_object) ||
        !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static double jdbl(json_object *o, const char *key)
{
    return json_object_get_double(jat(o, key));
}

static uint64_t ju64(json_object *o, const char *key)
{
    int64_t v = json_object_get_int64(jat(o, key));

    return v > 0 ? (uint64_t)v : 0;
}

/* A string member into out; "" when it is absent or not a string. */
static void jstr(json_object *o, const char *key, char *out, size_t cap)
{
    json_object *v = jat(o, key);

    snprintf(out, cap, "%s", json_object_is_type(v, json_type_string)
                                 ? json_object_get_string(v)
                                 : "");
}

/* An array member, with its length in *n; NULL and 0 if none. */
static json_object *jarr(json_object *o, const char *key, size_t *n)
{
    json_object *v = jat(o, key);

    if (!json_object_is_type(v, json_type_array)) {
        *n = 0;
        return NULL;
    }
    *n = json_object_array_length(v);
    return v;
}

static void jlat_read(json_object *o, struct bench_lat *l)
{
    l->n = ju64(o, "cycles");
    l->seconds = jdbl(o, "seconds");
    l->per_s = jdbl(o, "per_s");
    l->min = ju64(o, "min_ns");
    l->p50 = ju64(o, "p50_ns");
    l->p99 = ju64(o, "p99_ns");
    l->p999 = ju64(o, "p999_ns");
    l->max = ju64(o, "max_ns");
    l->mean = jdbl(o, "mean_ns");
}

/* The inverse of jcpu(): the totals. */
static void jcpu_read(json_object *o, struct bench_cpu *c)
{
    memset(c, 0, sizeof *c);
    c->ran = json_object_get_boolean(jat(o, "measured"));
    c->client_ns = ju64(o, "client_cpu_ns");
    c->server_ok = jat(o, "server_cpu_ns") != NULL;
    c->server_ns = ju64(o, "server_cpu_ns");
}

/* The inverse of jstatus(): "measured", "error" and "error_code". */
static void jstatus_read(json_object *o, struct bench_status *st)
{
    json_object *code = jat(o, "error_code");

    st->ran = json_object_get_boolean(jat(o, "measured"));
    st->rc = DLOCK_OK;
    jstr(o, "error", st->msg, sizeof st->msg);
    if (st->ran || code == NULL)
        return;
    /* The JSON keeps dlock_err_name(rc); codes are small negatives. */
    st->rc = DLOCK_ERROR;
    for (int c = -1; c > -100; c--)
        if (strcmp(dlock_err_name(c), json_object_get_string(code)) == 0)
            st->rc = c;
}

/* A share written by jshare(): -1 when null or absent. */
static double jshare_read(json_object *o, const char *key)
{
    json_object *v = jat(o, key);

    return v == NULL ? -1 : json_object_get_double(v);
}

/* What jorder() wrote; absent in a JSON from before it (not judged,
 * seconds -1). */
static void jorder_read(json_object *o, struct bench_result *r)
{
    struct bench_order *d = &r->order;

    memset(d, 0, sizeof *d);
    r->order_ran = json_object_get_boolean(jat(o, "judged"));
    r->order_seconds = o != NULL ? jdbl(o, "seconds") : -1;
    d->grants = ju64(o, "grants");
    d->contested = ju64(o, "contested");
    d->in_order = ju64(o, "in_order");
    d->in_order_share = jshare_read(o, "in_order_share");
    d->handoffs = ju64(o, "handoffs");
    d->handoff_share = jshare_read(o, "handoff_share");
    d->mean_waiting = jdbl(o, "mean_waiting");
}

static void jresult_read(json_object *o, struct bench_result *r)
{
    json_object *w, *arr;
    size_t n;

    jstr(o, "uri", r->uri, sizeof r->uri);
    jstr(o, "scheme", r->scheme, sizeof r->scheme);
    jstr(o, "mode", r->mode, sizeof r->mode);
    r->have_info = r->scheme[0] != '\0' && r->mode[0] != '\0';
    arr = jarr(o, "caps", &n);
    for (size_t i = 0; i < n; i++) {
        const char *name = json_object_get_string(
            json_object_array_get_idx(arr, i));
        for (uint32_t bit = 1; bit != 0 && dlock_cap_name(bit) != NULL;
             bit <<= 1)
            if (name != NULL && strcmp(dlock_cap_name(bit), name) == 0)
                r->caps |= bit;
    }
    r->open.ran = json_object_get_boolean(jat(o, "reachable"));
    if (!r->open.ran) {
        jstatus_read(o, &r->open);
        return;
    }

    w = jat(o, "uncontended");
    jstatus_read(w, &r->unc_st);
    jlat_read(w, &r->unc);
    r->rounds = (unsigned)ju64(w, "rounds");

    w = jat(o, "floor");
    jstatus_read(w, &r->floor_st);
    jlat_read(w, &r->floor);
    if (jat(w, "available") != NULL &&
        !json_object_get_boolean(jat(w, "available")))
        r->floor_st.rc = DLOCK_EUNSUPPORTED;
    r->floor_ratio = jdbl(w, "dlock_p50_over_floor_p50");

    /* Absent in a JSON from before the fence figure: not measured. */
    w = jat(o, "fence");
    jstatus_read(w, &r->fence_st);
    jlat_read(w, &r->fence);
    if (w == NULL || (jat(w, "available") != NULL &&
                      !json_object_get_boolean(jat(w, "available"))))
        r->fence_st.rc = DLOCK_EUNSUPPORTED;
    w = jat(o, "cleanup");
    jstatus_read(w, &r->forget_st);
    if (w == NULL || (jat(w, "available") != NULL &&
                      !json_object_get_boolean(jat(w, "available"))))
        r->forget_st.rc = DLOCK_EUNSUPPORTED;

    w = jat(o, "contended");
    jstatus_read(w, &r->con_st);
    r->workers = (unsigned)ju64(w, "workers");
    r->con_seconds = jdbl(w, "seconds");
    r->acquisitions = ju64(w, "acquisitions");
    r->acq_per_s = jdbl(w, "acquisitions_per_s");
    r->handoffs = ju64(w, "handoffs");
    r->handoffs_per_s = jdbl(w, "handoffs_per_s");
    jlat_read(jat(w, "handoff_latency"), &r->handoff);
    r->timeouts = ju64(w, "acquire_timeouts");
    r->overlaps = ju64(w, "overlaps");
    arr = jarr(w, "acquisitions_per_worker", &n);
    if (r->workers > n)
        r->workers = (unsigned)n; /* never more than the figures given */
    if (r->workers > BENCH_MAX_WORKERS)
        r->workers = BENCH_MAX_WORKERS;
    for (unsigned i = 0; i < r->workers; i++)
        r->per_worker[i] = (uint64_t)json_object_get_int64(
            json_object_array_get_idx(arr, i));
    r->fair_min = ju64(jat(w, "fairness"), "min");
    r->fair_max = ju64(jat(w, "fairness"), "max");
    r->fair_mean = jdbl(jat(w, "fairness"), "mean");
    r->fair_stddev = jdbl(jat(w, "fairness"), "stddev");
    r->fair_jain = jdbl(jat(w, "fairness"), "jain_index");
    jcpu_read(jat(w, "cpu_per_owner_change"), &r->cpu);
    jorder_read(jat(w, "arrival_order"), r);

    w = jat(o, "contended_floor");
    jstatus_read(w, &r->fcon_st);
    if (w == NULL && r->con_st.ran)
        snprintf(r->fcon_st.msg, sizeof r->fcon_st.msg,
                 "not measured (a JSON from before this figure)");
    else if (w != NULL && jat(w, "available") != NULL &&
             !json_object_get_boolean(jat(w, "available")))
        r->fcon_st.rc = DLOCK_EUNSUPPORTED;
    r->fcon_acq_per_s = jdbl(w, "acquisitions_per_s");
    r->fcon_handoffs_per_s = jdbl(w, "handoffs_per_s");
    jlat_read(jat(w, "handoff_latency"), &r->fcon_handoff);
    r->fcon_overlaps = ju64(w, "overlaps");
    r->fcon_handoffs = ju64(w, "handoffs");
    jcpu_read(jat(w, "cpu_per_owner_change"), &r->fcon_cpu);

    w = jat(o, "many_locks");
    jstatus_read(w, &r->many_st);
    r->locks = (unsigned long)ju64(w, "locks");
    if (ju64(w, "locks_asked") > r->locks)
        r->locks_asked = (unsigned long)ju64(w, "locks_asked");
    r->lease_ms = (uint32_t)ju64(w, "lease_ms");
    r->many_seconds = jdbl(w, "seconds");
    r->acquire_all_s = jdbl(w, "acquire_all_s");
    r->release_all_s = jdbl(w, "release_all_s");
    r->renew_expected_per_s = jdbl(w, "renewals_expected_per_s");
    r->renew_observable = jat(w, "renewals_observed") != NULL;
    r->renewals_observed = ju64(w, "renewals_observed");
    r->renew_observed_per_s = r->renew_observable
                                  ? jdbl(w, "renewals_observed_per_s")
                                  : -1;
    jstr(w, "renewals_method", r->renew_method, sizeof r->renew_method);
    r->wd_cpu_s = jdbl(w, "watchdog_cpu_s");
    r->wd_cpu_pct = jdbl(w, "watchdog_cpu_pct_of_one_core");
    r->main_cpu_s = jdbl(w, "main_thread_cpu_s");
    r->rss_delta = json_object_get_int64(jat(w, "rss_delta_bytes"));
    r->bytes_per_lock = jdbl(w, "bytes_per_lock");
    r->lost = (unsigned long)ju64(w, "lost");
}

int bench_read_json(struct bench_run *run, const char *path, char *err,
                    size_t errlen)
{
    json_object *root, *mo, *po, *arr, *arr2;
    size_t n, nw;

    memset(run, 0, sizeof *run);
    if ((root = json_object_from_file(path)) == NULL) {
        const char *why = json_util_get_last_err();
        snprintf(err, errlen, "%s", why != NULL ? why : "unreadable");
        err[strcspn(err, "\n")] = '\0';
        return -1;
    }
    arr = jarr(root, "results", &n);
    po = jat(root, "parameters");
    if (arr == NULL || po == NULL) {
        snprintf(err, errlen, "not the JSON of `dlock bench --json` (no "
                              "\"results\" or \"parameters\")");
        json_object_put(root);
        return -1;
    }
    if (n > BENCH_MAX_URIS) {
        snprintf(err, errlen, "%zu results; at most %d", n, BENCH_MAX_URIS);
        json_object_put(root);
        return -1;
    }
    jstr(root, "dlock_version", run->version, sizeof run->version);
    jstr(root, "date", run->date, sizeof run->date);
    mo = jat(root, "machine");
    jstr(mo, "sysname", run->machine.sysname, sizeof run->machine.sysname);
    jstr(mo, "release", run->machine.release, sizeof run->machine.release);
    jstr(mo, "arch", run->machine.arch, sizeof run->machine.arch);
    jstr(mo, "cpu_model", run->machine.cpu_model,
         sizeof run->machine.cpu_model);
    run->machine.nproc = (long)ju64(mo, "nproc");
    jstr(mo, "cpuidle_driver", run->machine.cpuidle_driver,
         sizeof run->machine.cpuidle_driver);
    jstr(mo, "cpuidle_governor", run->machine.cpuidle_governor,
         sizeof run->machine.cpuidle_governor);
    run->steady = json_object_get_boolean(jat(mo, "cpu_dma_latency_held"));
    snprintf(run->steady_note, sizeof run->steady_note, "%s (from %s)",
             run->steady ? "held at 0 us" : "not held", path);
    run->duration_ms = (uint32_t)ju64(po, "duration_ms");
    run->warmup_ms = (uint32_t)ju64(po, "warmup_ms");
    run->workers = (unsigned long)ju64(po, "workers");
    run->locks = (unsigned long)ju64(po, "locks");
    run->lease_ms = (uint32_t)ju64(po, "lease_ms");
    arr2 = jarr(po, "workloads", &nw);
    for (size_t i = 0; i < nw; i++) {
        const char *name = json_object_get_string(
            json_object_array_get_idx(arr2, i));
        for (unsigned k = 0; k < WL_COUNT; k++)
            if (name != NULL && strcmp(name, wl_names[k]) == 0)
                run->workloads |= 1u << k;
    }
    run->n = n;
    for (size_t i = 0; i < n; i++)
        jresult_read(json_object_array_get_idx(arr, i), &run->r[i]);
    json_object_put(root);
    return 0;
}

/* ---- SVG ------------------------------------------------------------------------------- */

/*
 * One row per URI and one column per figure, every column sharing the row
 * labels:
 *
 *   mode | uncontended | hand-off | contended acq/s | fairness | caps
 *
 * The three figure columns have log axes with labelled decades: file:// is
 * some 100 times faster than any server, and on a linear axis nothing else
 * showed. Bars are p50 and whiskers p99; a black tick is the bare client's
 * p50 (uncontended) or the hand-offs per second (throughput), and a dashed
 * one the bare p50 plus the fence's own p50 where the fence is a request
 * of its own (what fencing by hand would cost); in the contended columns
 * the dashed tick is the contended floor (the bare waiting request's
 * hand-off p50 and hand-offs per second). The colour
 * is the backend family. Fairness is Jain's index of the acquisitions per
 * worker and the most/fewest ratio; the capability strip has a dot per
 * DLOCK_CAP_* the mode reports. Hovering shows the figures in <title>s.
 *
 * Every text from the run (URIs, modes, messages, the CPU's name) goes
 * through xml_text(), which escapes it and drops what is not UTF-8.
 */
#define SVG_W 1000
#define SVG_LABEL_CHARS 24 /* longer row labels are cut, with "…" */
#define SVG_PANEL_X 158    /* the first figure column */
#define SVG_PANEL_W 197    /* a figure column: plot, then its value */
#define SVG_PLOT_W 145
#define SVG_FAIR_X 752     /* fairness: a bar from 1/N to 1, then text */
#define SVG_FAIR_W 30
#define SVG_CAPS_X 852     /* the capability strip, a column per cap */
#define SVG_CAP_W 12
#define SVG_TOP 172        /* the first row: above are titles and legend */
#define SVG_ROW_H 20
#define SVG_OTHER "#999999"

enum { P_UNC, P_HANDOFF, P_THR, P_COUNT };

static const struct {
    const char *title, *sub;
    bool ns; /* a latency in nanoseconds, else a rate per second */
} svg_panels[P_COUNT] = {
    {"uncontended", "acquire+release, one handle", true},
    {"contended hand-off", "release to the next holder", true},
    {"contended throughput", "acquisitions/s; tick: hand-offs/s", false},
};

/* Okabe-Ito colours: told apart with the common colour blindnesses. */
static const struct {
    const char *scheme, *color;
} svg_families[] = {
    {"file", "#E69F00"},     {"redis", "#D55E00"}, {"zk", "#009E73"},
    {"postgres", "#0072B2"}, {"mysql", "#CC79A7"}, {"etcd", "#56B4E9"},
};

/* The length of the valid UTF-8 sequence at s (1-4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    /* No overlong forms, no surrogates, nothing above U+10FFFF. */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/*
 * s as XML character data or attribute text, at most max characters of it
 * (then "…"). Bytes that are not UTF-8 become '?' and control characters
 * are dropped: XML 1.0 allows neither, and one would make the file
 * unreadable to every viewer.
 */
static void xml_text_max(FILE *f, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;

    for (size_t chars = 0; *p != '\0'; chars++) {
        size_t n = utf8_len(p);
        if (chars == max) {
            fputs("…", f);
            return;
        }
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (n == 0)
                fputc('?', f);
            else if (*p >= 0x20 || *p == '\t')
                fwrite(p, 1, n, f);
        }
        p += n > 0 ? n : 1;
    }
}

static void xml_text(FILE *f, const char *s)
{
    xml_text_max(f, s, SIZE_MAX);
}

/* The family colour of r: by scheme, or by the URI's when dlock info
 * failed. */
static const char *svg_color(const struct bench_result *r)
{
    for (size_t k = 0; k < sizeof svg_families / sizeof svg_families[0]; k++) {
        const char *s = svg_families[k].scheme;
        size_t len = strlen(s);
        if (r->have_info ? strcmp(r->scheme, s) == 0
                         : strncmp(r->uri, s, len) == 0 && r->uri[len] == ':')
            return svg_families[k].color;
    }
    return SVG_OTHER;
}

/* "3.68µs", "612µs", "2.06ms" (ns) or "251k", "6.66k", "907" (rates);
 * decade ticks come out as "1µs", "10k", "0.1". */
static const char *svg_num(double v, bool ns, bool tick, char *buf,
                           size_t cap)
{
    static const char *const ns_units[] = {"ns", "µs", "ms", "s"};
    static const char *const rate_units[] = {"", "k", "M", "G"};
    const char *const *u = ns ? ns_units : rate_units;
    size_t k = 0;

    while (v >= 999.5 && k < 3) {
        v /= 1000;
        k++;
    }
    if (tick)
        snprintf(buf, cap, "%g%s", v, u[k]);
    else
        snprintf(buf, cap, "%.*f%s", v < 9.995 ? 2 : v < 99.95 ? 1 : 0, v,
                 u[k]);
    return buf;
}

/* What one row shows in one figure column; 0: nothing. */
struct svg_fig {
    double bar, whisker, tick;
    /* uncontended: the bare p50 plus the fence's own p50; contended: the
     * contended floor's hand-off p50 or hand-offs/s */
    double dashed;
};

static struct svg_fig svg_fig_of(const struct bench_result *r, int panel)
{
    struct svg_fig g = {0, 0, 0, 0};

    if (!r->open.ran)
        return g;
    switch (panel) {
    case P_UNC:
        if (r->unc_st.ran) {
            g.bar = (double)r->unc.p50;
            g.whisker = (double)r->unc.p99;
        }
        if (r->floor_st.ran)
            g.tick = (double)r->floor.p50;
        if (r->floor_st.ran && r->fence_st.ran && r->fence.p50 > 0)
            g.dashed = (double)(r->floor.p50 + r->fence.p50);
        break;
    case P_HANDOFF:
        if (r->con_st.ran && r->handoff.n > 0) {
            g.bar = (double)r->handoff.p50;
            g.whisker = (double)r->handoff.p99;
        }
        if (r->fcon_st.ran && r->fcon_handoff.n > 0)
            g.dashed = (double)r->fcon_handoff.p50;
        break;
    case P_THR:
        if (r->con_st.ran) {
            g.bar = r->acq_per_s;
            g.tick = r->handoffs_per_s;
        }
        if (r->fcon_st.ran)
            g.dashed = r->fcon_handoffs_per_s;
        break;
    }
    return g;
}

/* A log axis from decade lo to decade hi, drawn from x0. */
struct svg_axis {
    double lo, hi;
    int x0;
};

/* Whole decades around every figure of the column, at least two of them,
 * at most nine (a figure below that sits at the left edge). */
static void svg_axis_fit(const struct bench_run *run, int panel,
                         struct svg_axis *ax)
{
    double lo = 0, hi = 0;

    for (size_t i = 0; i < run->n; i++) {
        struct svg_fig g = svg_fig_of(&run->r[i], panel);
        double v[4] = {g.bar, g.whisker, g.tick, g.dashed};
        for (int k = 0; k < 4; k++)
            if (v[k] > 0) {
                lo = lo == 0 || v[k] < lo ? v[k] : lo;
                hi = v[k] > hi ? v[k] : hi;
            }
    }
    if (hi <= 0)
        lo = hi = svg_panels[panel].ns ? 1e3 : 1;
    ax->lo = pow(10, floor(log10(lo)));
    ax->hi = pow(10, ceil(log10(hi)));
    if (ax->hi < ax->lo * 100)
        ax->hi = ax->lo * 100;
    if (ax->hi > ax->lo * 1e9)
        ax->lo = ax->hi / 1e9;
    ax->x0 = SVG_PANEL_X + panel * SVG_PANEL_W + 4;
}

static double svg_x(const struct svg_axis *ax, double v)
{
    double t = (log10(v) - log10(ax->lo)) / (log10(ax->hi) - log10(ax->lo));

    return ax->x0 + (t < 0 ? 0 : t > 1 ? 1 : t) * SVG_PLOT_W;
}

/* Decade gridlines across the rows, tick labels under them: every
 * decade, or every other one when "100ms" would touch its neighbours. The
 * test reads class="tick" and data-v to check that the axis increases. */
static void svg_axis_draw(FILE *f, const struct svg_axis *ax, int panel,
                          int y0, int y1)
{
    double decades = log10(ax->hi / ax->lo);
    int step = SVG_PLOT_W / decades >= 34 ? 1 : 2, k = 0;
    char t[32];

    fprintf(f, "<g class=\"axis\" data-panel=\"%d\">\n", panel);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
               "stroke=\"#888\"/>\n",
            ax->x0, y1, ax->x0 + SVG_PLOT_W, y1);
    for (double v = ax->lo; v <= ax->hi * 1.001; v *= 10, k++) {
        double x = svg_x(ax, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                   "stroke=\"#d8d8d8\"/>\n",
                x, y0, x, y1 + 3);
        if (k % step == 0)
            fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%d\" "
                       "data-v=\"%g\">%s</text>\n",
                    x, y1 + 14, v,
                    svg_num(v, svg_panels[panel].ns, true, t, sizeof t));
    }
    fprintf(f, "</g>\n");
}

/* One row's cell in a figure column: bar, whisker, tick, value. */
static void svg_cell(FILE *f, const struct bench_result *r, int panel,
                     const struct svg_axis *ax, int y)
{
    struct svg_fig g = svg_fig_of(r, panel);
    bool ns = svg_panels[panel].ns;
    double bx = ax->x0;
    char t[32];

    if (g.bar > 0) {
        bx = svg_x(ax, g.bar);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"12\" "
                   "fill=\"%s\"/>\n",
                ax->x0, y + 4, bx - ax->x0 > 1 ? bx - ax->x0 : 1,
                svg_color(r));
    }
    if (g.bar > 0 && g.whisker > g.bar) {
        double wx = svg_x(ax, g.whisker);
        fprintf(f, "<path d=\"M%.1f %dH%.1fM%.1f %dV%d\" stroke=\"#333\" "
                   "fill=\"none\"/>\n",
                bx, y + 10, wx, wx, y + 6, y + 14);
    }
    if (g.tick > 0)
        fprintf(f, "<path d=\"M%.1f %dV%d\" stroke=\"#000\" "
                   "stroke-width=\"2\"/>\n",
                svg_x(ax, g.tick), y + 2, y + 18);
    if (g.dashed > 0)
        fprintf(f, "<path d=\"M%.1f %dV%d\" stroke=\"#000\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"2 2\"/>\n",
                svg_x(ax, g.dashed), y + 2, y + 18);
    fprintf(f, "<text class=\"value\" x=\"%d\" y=\"%d\">%s</text>\n",
            ax->x0 + SVG_PLOT_W + 4, y + 14,
            g.bar > 0 ? svg_num(g.bar, ns, false, t, sizeof t) : "–");
}

/* Jain's index as a bar from 1/N (one worker took all) to 1 (equal
 * shares), the index, and most/fewest acquisitions of one worker. */
static void svg_fairness(FILE *f, const struct bench_result *r, int y)
{
    double lo, frac;

    if (!r->con_st.ran || r->workers < 2 || r->acquisitions == 0) {
        fprintf(f, "<text class=\"value\" x=\"%d\" y=\"%d\">–</text>\n",
                SVG_FAIR_X, y + 14);
        return;
    }
    lo = 1.0 / r->workers;
    frac = (r->fair_jain - lo) / (1 - lo);
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"10\" "
               "fill=\"#e4e4e4\"/>\n",
            SVG_FAIR_X, y + 5, SVG_FAIR_W);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"10\" "
               "fill=\"%s\"/>\n",
            SVG_FAIR_X, y + 5, frac * SVG_FAIR_W, svg_color(r));
    fprintf(f, "<text class=\"value\" x=\"%d\" y=\"%d\">%.3f", SVG_FAIR_X +
            SVG_FAIR_W + 4, y + 14, r->fair_jain);
    if (r->fair_min > 0)
        fprintf(f, " ×%.1f", (double)r->fair_max / (double)r->fair_min);
    else
        fprintf(f, " min 0");
    fprintf(f, "</text>\n");
}

/* What hovering over a row says: every figure the row draws. */
static void svg_row_title(FILE *f, const struct bench_result *r)
{
    char a[32], b[32], c[32], caps[256];

    fprintf(f, "<title>");
    xml_text(f, r->uri);
    if (!r->open.ran) {
        fprintf(f, "\nnot measured: ");
        xml_text(f, r->open.msg);
        fprintf(f, "</title>\n");
        return;
    }
    if (r->unc_st.ran)
        fprintf(f, "\nuncontended p50 %s, p99 %s, p99.9 %s",
                svg_num((double)r->unc.p50, true, false, a, sizeof a),
                svg_num((double)r->unc.p99, true, false, b, sizeof b),
                svg_num((double)r->unc.p999, true, false, c, sizeof c));
    if (r->floor_st.ran)
        fprintf(f, "; bare client p50 %s",
                svg_num((double)r->floor.p50, true, false, a, sizeof a));
    if (r->con_st.ran && r->handoff.n > 0)
        fprintf(f, "\nhand-off p50 %s, p99 %s",
                svg_num((double)r->handoff.p50, true, false, a, sizeof a),
                svg_num((double)r->handoff.p99, true, false, b, sizeof b));
    if (r->con_st.ran)
        fprintf(f, "\n%u workers: %.0f acquisitions/s, %.0f hand-offs/s; "
                   "per worker %llu to %llu, Jain's index %.3f",
                r->workers, r->acq_per_s, r->handoffs_per_s,
                (unsigned long long)r->fair_min,
                (unsigned long long)r->fair_max, r->fair_jain);
    if (r->con_st.ran && r->order_ran)
        fprintf(f, "\nin arrival order %s of contested grants; hand-offs %s "
                   "of grants",
                share_text(r->order.in_order_share, a, sizeof a),
                share_text(r->order.handoff_share, b, sizeof b));
    bn_caps_text(r->caps, caps, sizeof caps);
    fprintf(f, "\n");
    xml_text(f, caps);
    fprintf(f, "</title>\n");
}

static void svg_row(FILE *f, const struct bench_result *r,
                    const struct svg_axis ax[P_COUNT], int y)
{
    char lab[sizeof r->uri];

    fprintf(f, "<g class=\"row\">\n");
    svg_row_title(f, r);
    fprintf(f, "<rect x=\"0\" y=\"%d\" width=\"5\" height=\"%d\" "
               "fill=\"%s\"/>\n",
            y + 1, SVG_ROW_H - 2, svg_color(r));
    fprintf(f, "<text class=\"label\" x=\"10\" y=\"%d\" "
               "clip-path=\"url(#labels)\">",
            y + 14);
    xml_text_max(f, label_of(r, lab, sizeof lab), SVG_LABEL_CHARS);
    fprintf(f, "</text>\n");
    if (!r->open.ran) {
        fprintf(f, "<text class=\"note\" x=\"%d\" y=\"%d\">not measured: ",
                SVG_PANEL_X + 4, y + 14);
        xml_text_max(f, r->open.msg, 100);
        fprintf(f, "</text>\n");
    } else {
        for (int p = 0; p < P_COUNT; p++)
            svg_cell(f, r, p, &ax[p], y);
        svg_fairness(f, r, y);
    }
    for (uint32_t bit = 1, k = 0; r->have_info && bit != 0 &&
                                  dlock_cap_name(bit) != NULL;
         bit <<= 1, k++)
        fprintf(f, "<circle cx=\"%u\" cy=\"%d\" r=\"%s\" fill=\"%s\"/>\n",
                SVG_CAPS_X + k * SVG_CAP_W + SVG_CAP_W / 2, y + 10,
                r->caps & bit ? "4" : "1.5", r->caps & bit ? "#333" : "#bbb");
    fprintf(f, "</g>\n");
}

/* Title, machine, how to read it, the family colours. */
static void svg_header(FILE *f, const struct bench_run *run)
{
    const struct bench_machine *m = &run->machine;
    int x = 10;

    fprintf(f, "<text class=\"title\" x=\"10\" y=\"22\">dlock bench ");
    xml_text(f, run->version);
    fprintf(f, ", ");
    xml_text(f, run->date);
    fprintf(f, "</text>\n<text class=\"note\" x=\"10\" y=\"40\">");
    xml_text(f, m->sysname);
    fprintf(f, " ");
    xml_text(f, m->release);
    fprintf(f, ", ");
    xml_text(f, m->cpu_model[0] ? m->cpu_model : "unknown CPU");
    fprintf(f, ", %ld CPUs, cpuidle ", m->nproc);
    xml_text(f, m->cpuidle_driver[0] ? m->cpuidle_driver : "none");
    fprintf(f, "; %.1f s per workload, %lu contending processes</text>\n",
            run->duration_ms / 1e3, run->workers);
    fprintf(f, "<text class=\"note\" x=\"10\" y=\"62\">Log axes. Bar: p50; "
               "whisker: p99; black tick: bare client p50 (uncontended), "
               "hand-offs/s (throughput); dashed: bare p50 + fence p50, or "
               "the bare waiting request's figure.</text>\n");
    for (size_t k = 0; k < sizeof svg_families / sizeof svg_families[0]; k++) {
        fprintf(f, "<rect x=\"%d\" y=\"74\" width=\"12\" height=\"12\" "
                   "fill=\"%s\"/><text class=\"note\" x=\"%d\" y=\"84\">%s"
                   "</text>\n",
                x, svg_families[k].color, x + 16, svg_families[k].scheme);
        x += 26 + 7 * (int)strlen(svg_families[k].scheme);
    }
    for (size_t i = 0; i < run->n; i++)
        if (strcmp(svg_color(&run->r[i]), SVG_OTHER) == 0) {
            fprintf(f, "<rect x=\"%d\" y=\"74\" width=\"12\" height=\"12\" "
                       "fill=\"%s\"/><text class=\"note\" x=\"%d\" y=\"84\">"
                       "other</text>\n",
                    x, SVG_OTHER, x + 16);
            break;
        }
}

/* Column titles, and the capability names standing upright. */
static void svg_column_heads(FILE *f)
{
    for (int p = 0; p < P_COUNT; p++)
        fprintf(f, "<text class=\"head\" x=\"%d\" y=\"%d\">%s</text>\n"
                   "<text class=\"note\" x=\"%d\" y=\"%d\">%s</text>\n",
                SVG_PANEL_X + p * SVG_PANEL_W + 4, SVG_TOP - 22,
                svg_panels[p].title, SVG_PANEL_X + p * SVG_PANEL_W + 4,
                SVG_TOP - 8, svg_panels[p].sub);
    fprintf(f, "<text class=\"head\" x=\"%d\" y=\"%d\">fairness</text>\n"
               "<text class=\"note\" x=\"%d\" y=\"%d\">Jain, most/fewest"
               "</text>\n",
            SVG_FAIR_X, SVG_TOP - 22, SVG_FAIR_X, SVG_TOP - 8);
    for (uint32_t bit = 1, k = 0; bit != 0 && dlock_cap_name(bit) != NULL;
         bit <<= 1, k++) {
        unsigned x = SVG_CAPS_X + k * SVG_CAP_W + SVG_CAP_W / 2 + 3;
        fprintf(f, "<text class=\"cap\" x=\"%u\" y=\"%d\" transform=\"rotate("
                   "-90 %u %d)\"><title>",
                x, SVG_TOP - 4, x, SVG_TOP - 4);
        xml_text(f, dlock_cap_text(bit));
        fprintf(f, "</title>%s</text>\n", dlock_cap_name(bit));
    }
}

int bench_write_svg(const struct bench_run *run, const char *path)
{
    struct svg_axis ax[P_COUNT];
    int y1 = SVG_TOP + (int)run->n * SVG_ROW_H, h = y1 + 62;
    FILE *f;

    if ((f = fopen(path, "w")) == NULL)
        return -1;
    for (int p = 0; p < P_COUNT; p++)
        svg_axis_fit(run, p, &ax[p]);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            SVG_W, h, SVG_W, h);
    fprintf(f, "<style>.title{font-size:15px;font-weight:bold}"
               ".head{font-size:12px;font-weight:bold}"
               ".label{font-size:11.5px}"
               ".cap{font-size:10px;fill:#333}"
               ".value{font-size:10.5px;fill:#222}"
               ".tick{font-size:9.5px;fill:#444;text-anchor:middle}"
               ".note{font-size:10.5px;fill:#555}</style>\n");
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    /* Wide letters could still run a cut label into the first column. */
    fprintf(f, "<clipPath id=\"labels\"><rect width=\"%d\" height=\"%d\"/>"
               "</clipPath>\n",
            SVG_PANEL_X - 4, h);
    svg_header(f, run);
    svg_column_heads(f);
    for (size_t i = 1; i < run->n; i += 2)
        fprintf(f, "<rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" "
                   "fill=\"#f4f4f4\"/>\n",
                SVG_TOP + (int)i * SVG_ROW_H, SVG_W, SVG_ROW_H);
    for (int p = 0; p < P_COUNT; p++)
        svg_axis_draw(f, &ax[p], p, SVG_TOP, y1);
    for (size_t i = 0; i < run->n; i++)
        svg_row(f, &run->r[i], ax, SVG_TOP + (int)i * SVG_ROW_H);
    fprintf(f, "<text class=\"note\" x=\"10\" y=\"%d\">Fairness: Jain's "
               "index of the acquisitions per worker, its bar from 1/N (one "
               "worker took all) to 1 (equal shares); ×: most / fewest "
               "acquisitions of one worker.</text>\n",
            y1 + 36);
    fprintf(f, "<text class=\"note\" x=\"10\" y=\"%d\">Dots: what the mode "
               "promises (dlock info). All figures, with p99.9 and the "
               "many-locks workload: bench.json and bench.md.</text>\n",
            y1 + 52);
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}
