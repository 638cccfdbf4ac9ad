/*
 * restart.c: Redlock's delayed restart, done by the client: which nodes
 * count, at a given moment, for an acquire or a renewal.
 *
 * The Redlock paper's answer to nodes without persistence. A node that
 * restarts comes back empty: a lock that had exactly a majority, this node
 * included, would be free on a majority at once, while its holder still
 * believes it holds. So a node counts for nothing, neither for an acquire
 * nor for a renewal, until it has been up for longer than any lease taken
 * on it: restart_delay, raised to the longest lease this client has asked
 * for. Every holder's belief rests on a grant or renewal sent before the
 * restart, and ends within one lease of it, before the node counts again.
 * The client reads each node's run_id and uptime (INFO server, in the
 * connect round trip: conn.c keeps them per client in struct
 * dlock__rd_ident); a run_id unlike the one seen before is a restart too,
 * whatever its uptime (a server replaced behind the address), counted from
 * when it was seen. An excluded node still gets every command (it learns
 * new locks, and releases), and its "not yours" counts: it has lost the
 * key for good (redlock.c).
 */
#include <stdio.h>

#include "rd.h"

/* The restart delay in force: restart_delay=, raised to the URI's lease
 * and the longest lease this client has asked for (longest_lease_ms starts
 * at the URI's); 0 when turned off. Under id_mu. */
static uint32_t delay_locked(const struct dlock__rd_ctx *x)
{
    if (x->conf.restart_delay_ms == 0)
        return 0;
    return x->conf.restart_delay_ms > x->longest_lease_ms
               ? x->conf.restart_delay_ms
               : x->longest_lease_ms;
}

void dlock__rd_note_lease(struct dlock__rd_session *rs, uint32_t lease_ms)
{
    struct dlock__rd_ctx *x = rs->x;

    if (x == NULL)
        return;
    pthread_mutex_lock(&x->id_mu);
    if (lease_ms > x->longest_lease_ms)
        x->longest_lease_ms = lease_ms;
    pthread_mutex_unlock(&x->id_mu);
}

/*
 * Which nodes count at now (bit i for node i), and, in *wait_ms, how long
 * until the first one left out counts (0 if none). Clocks: up_since is a
 * bound on the server's clock brought to ours; the drift allowance of a
 * lease (1 % + drift=) is added for the rates of the two.
 */
uint32_t dlock__rd_counting(struct dlock__rd_session *rs, int64_t now,
                            int64_t *wait_ms, uint32_t *delay_out)
{
    struct dlock__rd_ctx *x = rs->x;
    uint32_t mask = 0, delay;
    int64_t wait = 0;

    *wait_ms = 0;
    *delay_out = 0;
    if (x == NULL)
        return (uint32_t)((1u << rs->nnodes) - 1);
    pthread_mutex_lock(&x->id_mu);
    delay = delay_locked(x);
    for (size_t i = 0; i < rs->nnodes; i++) {
        const struct dlock__rd_ident *id = &x->ident[i];
        int64_t since, from;
        if (delay == 0) {
            mask |= 1u << i;
            continue;
        }
        if (id->run_id[0] == '\0')
            continue; /* never reached: it cannot have answered */
        since = id->up_since_ms > id->changed_ms ? id->up_since_ms
                                                 : id->changed_ms;
        from = since + (int64_t)delay + delay / 100 + rs->cf->drift_ms;
        if (now >= from)
            mask |= 1u << i;
        else if (wait == 0 || from - now < wait)
            wait = from - now;
    }
    pthread_mutex_unlock(&x->id_mu);
    *wait_ms = wait;
    *delay_out = delay;
    return mask;
}

/* "…; N of them restarted less than D ms ago (restart_delay) and count
 * again in W ms", or "" when no answer was left out. */
const char *dlock__rd_late_text(char *buf, size_t cap,
                                const struct dlock__rd_tally *t,
                                uint32_t delay, int64_t wait_ms)
{
    if (t->late_yes + t->late_no == 0)
        return "";
    snprintf(buf, cap,
             "; %zu of them restarted less than %u ms ago and count "
             "again in %lld ms (restart_delay: a restarted node has "
             "forgotten its locks)",
             t->late_yes + t->late_no, delay, (long long)wait_ms);
    return buf;
}
