/*
 * bench_order.c: arrival order and hand-offs, judged from a history.
 *
 * The contended workload's workers each log every acquire attempt they
 * make: when they called dlock_acquire() (arrival) and when it returned
 * (the grant, or the give-up of a timed-out attempt), on CLOCK_MONOTONIC,
 * which all processes of one boot share. This file reads the merged log
 * and says, for each grant:
 *
 *   - who else was waiting at that moment: the attempts of the other
 *     workers that had arrived and had not yet ended;
 *   - whether it went in arrival order: no waiter had arrived before the
 *     one granted. A grant with nobody else waiting is in order by
 *     definition, so only contested grants (at least one other waiter)
 *     are counted;
 *   - whether it was a hand-off: the previous grant went to another
 *     worker, rather than the same worker taking the lock again straight
 *     after its own release (barging).
 *
 * Why the return of dlock_acquire() orders grants truly: the lock
 * excludes, so a holder granted first releases before the next holder is
 * granted, and its acquire returned before its release began. The check
 * relies on that and on nothing dlock counts itself.
 */
#include <stdlib.h>
#include <string.h>

#include "bench_results.h"

struct grant_ref {
    uint64_t at;      /* grant time */
    uint64_t arrive;  /* its arrival */
    unsigned worker;
};

static int by_time(const void *a, const void *b)
{
    const struct grant_ref *x = a, *y = b;

    return x->at < y->at ? -1 : x->at > y->at;
}

/* The attempt of log[0..n) in progress at time t (arrived before t, not
 * ended by t), or NULL. A worker's attempts follow one another, so the
 * log is sorted by arrival and the candidate is the last arrival before
 * t. */
static const struct bench_order_rec *waiting_at(
    const struct bench_order_rec *log, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n; /* first index with arrive >= t */

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log[mid].arrive < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || log[lo - 1].end <= t)
        return NULL;
    return &log[lo - 1];
}

int bench_order_judge(const struct bench_order_rec *const *logs,
                      const size_t *n, const bool *full, unsigned workers,
                      uint64_t from, uint64_t until,
                      struct bench_order *out)
{
    size_t total = 0, k = 0;
    struct grant_ref *g;

    memset(out, 0, sizeof *out);
    /* A worker whose log filled is missing attempts that arrived after its
     * last entry ended: judge only grants before that. */
    for (unsigned w = 0; w < workers; w++) {
        if (full[w] && n[w] > 0 && logs[w][n[w] - 1].end < until)
            until = logs[w][n[w] - 1].end;
        total += n[w];
    }
    out->from = from;
    out->until = until > from ? until : from;
    g = malloc((total > 0 ? total : 1) * sizeof *g);
    if (g == NULL)
        return -1;
    for (unsigned w = 0; w < workers; w++)
        for (size_t i = 0; i < n[w]; i++)
            if (logs[w][i].granted)
                g[k++] = (struct grant_ref){logs[w][i].end, logs[w][i].arrive,
                                            w};
    qsort(g, k, sizeof *g, by_time);

    double waiting = 0;
    for (size_t i = 0; i < k; i++) {
        if (g[i].at < from || g[i].at >= until)
            continue;
        unsigned others = 0;
        bool inverted = false;
        for (unsigned w = 0; w < workers; w++) {
            const struct bench_order_rec *r;
            if (w == g[i].worker ||
                (r = waiting_at(logs[w], n[w], g[i].at)) == NULL)
                continue;
            others++;
            if (r->arrive < g[i].arrive)
                inverted = true;
        }
        out->grants++;
        waiting += others;
        if (others > 0) {
            out->contested++;
            if (!inverted)
                out->in_order++;
        }
        /* The previous grant of the whole log, judged or not. */
        if (i > 0) {
            out->with_previous++;
            if (g[i - 1].worker != g[i].worker)
                out->handoffs++;
        }
    }
    free(g);
    out->mean_waiting = out->grants > 0 ? waiting / (double)out->grants : 0;
    out->in_order_share =
        out->contested > 0 ? (double)out->in_order / (double)out->contested
                           : -1;
    out->handoff_share = out->with_previous > 0
                             ? (double)out->handoffs / (double)out->with_previous
                             : -1;
    return 0;
}
