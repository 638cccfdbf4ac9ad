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

void bench_goal_watchdog(const struct bench_result *r, struct bench_goal *g)
{
    char note[160];

    if (!r->many_st.ran) {
        goal_na(g, -1, GOAL_WATCHDOG_PCT, "many locks not measured");
        return;
    }
    if (r->locks < GOAL_WATCHDOG_LOCKS) {
        snprintf(note, sizeof note, "set for %d locks; ran %lu",
                 GOAL_WATCHDOG_LOCKS, r->locks);
        goal_na(g, r->wd_cpu_pct, GOAL_WATCHDOG_PCT, note);
        return;
    }
    goal_judge(g, r->wd_cpu_pct, GOAL_WATCHDOG_PCT, true);
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
               "name; floor: the\nsame count of cycles with the bare client "
               "library, interleaved in rounds\n");
        printf("  %-3s %9s %9s %9s %9s %9s %10s %10s %7s\n", "#", "cycles",
               "ops/s", "p50", "p99", "p99.9", "floor p50", "floor p99",
               "ratio");
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
                printf(" %10s %10s %6.2fx\n", bn_fmt_ns(r->floor.p50, d, sizeof d),
                       bn_fmt_ns(r->floor.p99, e, sizeof e), r->floor_ratio);
            else
                printf(" %10s %10s %7s\n", "n/a", "n/a", "n/a");
        }
        for (size_t i = 0; i < run->n; i++)
            if (run->r[i].unc_st.ran && !run->r[i].floor_st.ran)
                printf("  %zu: %s\n", i + 1, run->r[i].floor_st.msg);
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

    printf("\ngoals (issue 7): uncontended p50 <= %.2fx floor p50; "
           "hand-off p50 <= %.0fx RTT\n(RTT = floor p50 / 2) where waiters "
           "are woken; watchdog < %.0f%% of one core at %d locks\n",
           GOAL_FLOOR_RATIO, GOAL_HANDOFF_RTTS, GOAL_WATCHDOG_PCT,
           GOAL_WATCHDOG_LOCKS);
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
        bench_goal_watchdog(r, &g);
        printf("      watchdog CPU:          %s\n", goal_text(&g, "%", t, sizeof t));
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
                   "p99.9 µs | floor p50 µs | dlock/floor | hand-offs/s | "
                   "hand-off p50 µs | p99 µs | Jain |\n");
        fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
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
            if (r->con_st.ran && r->handoff.n > 0)
                fprintf(f, "| %.0f | %.1f | %.1f | %.3f |\n",
                        r->handoffs_per_s, us(r->handoff.p50),
                        us(r->handoff.p99), r->fair_jain);
            else
                fprintf(f, "| – | – | – | – |\n");
        }
        fprintf(f, "\n");
    }

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
        fprintf(f, "| hand-off ≤ %.0f× RTT ", GOAL_HANDOFF_RTTS);
    if (many)
        fprintf(f, "| watchdog < %.0f%% of a core at %d locks ",
                GOAL_WATCHDOG_PCT, GOAL_WATCHDOG_LOCKS);
    fprintf(f, "|\n|---");
    if (run->workloads & (WL_UNCONTENDED | WL_FLOOR))
        fprintf(f, "|---");
    if (run->workloads & WL_CONTENDED)
        fprintf(f, "|---");
    if (many)
        fprintf(f, "|---");
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
        }
        if (many) {
            bench_goal_watchdog(r, &g);
            md_goal(f, &g, "%");
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
    }
    json_object_object_add(o, "contended", w);

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
    bench_goal_watchdog(r, &g);
    json_object_object_add(goals, "watchdog_cpu", jgoal(&g));
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

/* ---- SVG ----------------------------------------------------------------------------- */

static void xml_text(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* control characters are not allowed in XML 1.0 */
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

#define SVG_W 960
#define SVG_LABEL 250 /* left column: series names */
#define SVG_BARS 560  /* bar area width */
#define SVG_BAR_H 16
#define SVG_GAP 4

struct series {
    const char *name;
    const char *color;
    double v[BENCH_MAX_URIS]; /* < 0: not measured */
};

/* One horizontal bar panel: a group per URI, a bar per series. */
static int svg_panel(FILE *f, int y, const char *title, const char *unit,
                     const struct bench_run *run, const struct series *s,
                     size_t ns)
{
    double max = 0;
    char lab[128];

    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < run->n; i++)
            if (s[k].v[i] > max)
                max = s[k].v[i];
    if (max <= 0)
        max = 1;
    fprintf(f, "<text x=\"10\" y=\"%d\" class=\"title\">", y + 16);
    xml_text(f, title);
    fprintf(f, "</text>\n");
    y += 30;
    for (size_t i = 0; i < run->n; i++) {
        fprintf(f, "<text x=\"10\" y=\"%d\" class=\"uri\">", y + 12);
        xml_text(f, label_of(&run->r[i], lab, sizeof lab));
        fprintf(f, "</text>\n");
        y += 18;
        for (size_t k = 0; k < ns; k++) {
            double v = s[k].v[i];
            int w = v > 0 ? (int)(SVG_BARS * v / max + 0.5) : 0;
            fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"series\">", SVG_LABEL - 6,
                    y + 12);
            xml_text(f, s[k].name);
            fprintf(f, "</text>\n");
            if (v >= 0) {
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                           "fill=\"%s\"/>\n",
                        SVG_LABEL, y, w > 0 ? w : 1, SVG_BAR_H, s[k].color);
                fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"value\">%.*f %s</text>\n",
                        SVG_LABEL + w + 4, y + 12, v < 10 ? 2 : v < 100 ? 1 : 0,
                        v, unit);
            } else {
                fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"value\">not "
                           "measured</text>\n", SVG_LABEL + 4, y + 12);
            }
            y += SVG_BAR_H + SVG_GAP;
        }
        y += 8;
    }
    return y + 10;
}

int bench_write_svg(const struct bench_run *run, const char *path)
{
    struct series lat[3] = {{"dlock uncontended p50", "#3b6ea5", {0}},
                            {"floor p50 (bare client)", "#9bb8d9", {0}},
                            {"contended hand-off p50", "#d08a2e", {0}}};
    struct series thr[3] = {{"dlock uncontended ops/s", "#3b6ea5", {0}},
                            {"floor ops/s", "#9bb8d9", {0}},
                            {"contended hand-offs/s", "#d08a2e", {0}}};
    const struct bench_machine *m = &run->machine;
    FILE *f;
    int h, y;

    for (size_t i = 0; i < run->n; i++) {
        const struct bench_result *r = &run->r[i];
        lat[0].v[i] = r->unc_st.ran ? us(r->unc.p50) : -1;
        lat[1].v[i] = r->floor_st.ran ? us(r->floor.p50) : -1;
        lat[2].v[i] = r->con_st.ran && r->handoff.n ? us(r->handoff.p50) : -1;
        thr[0].v[i] = r->unc_st.ran ? r->unc.per_s : -1;
        thr[1].v[i] = r->floor_st.ran ? r->floor.per_s : -1;
        thr[2].v[i] = r->con_st.ran ? r->handoffs_per_s : -1;
    }
    /* Height: two panels of (title + per URI (label + 3 bars + gap)). */
    h = 60 + 2 * (40 + (int)run->n * (18 + 3 * (SVG_BAR_H + SVG_GAP) + 8)) + 20;
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
            SVG_W, h, SVG_W, h);
    fprintf(f, "<style>.title{font-size:15px;font-weight:bold}"
               ".uri{font-size:13px;font-weight:bold}"
               ".series{font-size:11px;text-anchor:end;fill:#333}"
               ".value{font-size:11px;fill:#222}"
               ".note{font-size:11px;fill:#555}</style>\n");
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"10\" y=\"20\" class=\"title\">dlock bench %s, ",
            run->version);
    xml_text(f, run->date);
    fprintf(f, "</text>\n<text x=\"10\" y=\"38\" class=\"note\">");
    fprintf(f, "%s %s, ", m->sysname, m->release);
    xml_text(f, m->cpu_model);
    fprintf(f, ", %ld CPUs, cpuidle ", m->nproc);
    xml_text(f, m->cpuidle_driver[0] ? m->cpuidle_driver : "none");
    fprintf(f, "; %.1f s per workload, %lu contending processes</text>\n",
            run->duration_ms / 1e3, run->workers);
    y = svg_panel(f, 50, "p50 latency (µs, shorter is faster)", "µs", run,
                  lat, 3);
    svg_panel(f, y, "throughput (per second, longer is more)", "/s", run, thr,
              3);
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}
