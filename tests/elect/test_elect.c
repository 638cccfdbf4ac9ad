/*
 * test_elect.c: leader election (dlock_elect_*) on one backend and mode,
 * against the real server, judged from logged histories (issue 14).
 *
 * Three candidate processes campaign for one election. Each logs, with one
 * O_APPEND write per line (h_append):
 *
 *   <pid> G <t> <t> <term> 0       on_change(is_leader = 1)
 *   <pid> X <t> <t> <term> 0       on_change(is_leader = 0): lost, resigned
 *   <pid> L <t0> <t1> <term> <run> dlock_elect_is_leader() said 1 during
 *                                  [t0, t1] (CLOCK_MONOTONIC ns); run
 *                                  counts its stretches of 1s
 *
 * The driver: wait for a leader; make it resign (SIGUSR1): another is
 * elected; it joins again (SIGUSR2); then, on modes whose locks a silent
 * holder loses (a lease or a server timeout: as
 * conformance__paused_holder_stops_believing gates), SIGSTOP the leader
 * past its lease: another is elected; SIGCONT it. At the end every
 * candidate resigns.
 *
 * From the log: each stretch of a process's leadership [first t0, last t1]
 * never overlaps another process's (never two leaders at an instant); the
 * terms of successive elections strictly increase (DLOCK_CAP_FENCING);
 * on_change alternates per process (called once per change); the stopped
 * leader's listener said 0 after the stop, before it again believed it
 * led; and the leadership did change hands.
 *
 * Usage: test_elect --uri URI. About 1-2 s plus one lease per mode.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../conformance/harness.h"

#define NCAND 3
#define LEASE_MS 1000u
#define MAXEV 200000

static int failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
            failures++;                                                    \
        }                                                                  \
    } while (0)

/* ---- the candidate -------------------------------------------------------- */

/* Atomics, not sig_atomic_t: the signal may land on any of the
 * library's threads (ThreadSanitizer would see a race). */
static atomic_int stop_flag, resign_flag, rejoin_flag;
static const char *log_path;

static void on_sig(int sig)
{
    if (sig == SIGUSR1)
        atomic_store(&resign_flag, 1);
    else if (sig == SIGUSR2)
        atomic_store(&rejoin_flag, 1);
    else
        atomic_store(&stop_flag, 1);
}

static void log_line(char type, uint64_t t0, uint64_t t1, uint64_t term,
                     unsigned run)
{
    char line[128];

    snprintf(line, sizeof line, "%d %c %" PRIu64 " %" PRIu64 " %" PRIu64
             " %u\n", (int)getpid(), type, t0, t1, term, run);
    if (!h_append(log_path, line))
        _exit(3);
}

static void on_change(dlock_election *e, int is_leader, uint64_t term,
                      const char *why, void *payload)
{
    uint64_t t = h_now_ns();

    (void)e;
    (void)why;
    (void)payload;
    log_line(is_leader ? 'G' : 'X', t, t, term, 0);
}

static void on_log(int level, const char *msg, void *payload)
{
    (void)level;
    (void)payload;
    fprintf(stderr, "  [%d %.3f ms] %s\n", (int)getpid(), h_now_ns() / 1e6,
            msg);
}

static int candidate(char **args)
{
    dlock_elect_options o = DLOCK_ELECT_OPTIONS_INIT;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_election *e = NULL;
    struct sigaction sa;
    unsigned run = 0;
    int was = 0, rc;

    log_path = args[1];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    co.log = on_log;
    co.log_level = getenv("ELECT_DEBUG") != NULL ? DLOCK_LOG_DEBUG
                                                  : DLOCK_LOG_WARN;
    if (dlock_client_open(&c, getenv("DLOCK_URI"), &co) != DLOCK_OK) {
        fprintf(stderr, "candidate: %s\n", dlock_client_errmsg(c));
        return 2;
    }
    o.lease_ms = LEASE_MS;
    o.on_change = on_change;
    rc = dlock_elect_new(&e, c, args[0], &o);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "candidate: %s\n", dlock_client_errmsg(c));
        return 2;
    }
    if (dlock_elect_join(e) != DLOCK_OK) {
        fprintf(stderr, "candidate: %s\n", dlock_elect_errmsg(e));
        return 2;
    }
    while (!atomic_load(&stop_flag)) {
        uint64_t t0, t1;
        int now;

        /* Out of the election from SIGUSR1 to SIGUSR2: on modes that
         * poll, a quick rejoin could win again before a waiter retries. */
        if (atomic_exchange(&resign_flag, 0)) {
            dlock_elect_resign(e);
            was = 0;
        }
        if (atomic_exchange(&rejoin_flag, 0))
            dlock_elect_join(e);
        t0 = h_now_ns();
        now = dlock_elect_is_leader(e);
        t1 = h_now_ns();
        if (now) {
            if (!was)
                run++;
            log_line('L', t0, t1, dlock_elect_term(e), run);
        }
        was = now;
        h_sleep_ms(3);
    }
    dlock_elect_free(e);
    dlock_client_close(c);
    return 0;
}

/* ---- reading the log ------------------------------------------------------ */

struct ev {
    int pid;
    char type;
    uint64_t t0, t1, term;
    unsigned run;
};

static struct ev *evs;
static size_t nev;

static void read_log(const char *path)
{
    FILE *f = fopen(path, "r");
    struct ev v;

    nev = 0;
    if (f == NULL)
        return;
    while (nev < MAXEV &&
           fscanf(f, "%d %c %" SCNu64 " %" SCNu64 " %" SCNu64 " %u",
                  &v.pid, &v.type, &v.t0, &v.t1, &v.term, &v.run) == 6)
        evs[nev++] = v;
    fclose(f);
}

/* The pid of the first line of this type after `after` (ns) from pid
 * `only` (0: any) other than `not`, waiting up to timeout_ms; 0 if none. */
static int wait_event(const char *path, char type, uint64_t after, int only,
                      int not, uint32_t timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;

    do {
        read_log(path);
        for (size_t i = 0; i < nev; i++)
            if (evs[i].type == type && evs[i].t0 > after &&
                evs[i].pid != not && (only == 0 || evs[i].pid == only))
                return evs[i].pid;
        h_sleep_ms(20);
    } while (h_now_ms() < end);
    return 0;
}

/* A new leader: the first G line after `after` of a pid other than not. */
static int wait_gain(const char *path, uint64_t after, int not,
                     uint32_t timeout_ms)
{
    return wait_event(path, 'G', after, 0, not, timeout_ms);
}

/* Wait for an L line of pid (it acted as leader); prints how long after
 * its last G line. */
static bool wait_lead(const char *path, int pid, uint32_t timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;

    do {
        uint64_t gained = 0;
        read_log(path);
        for (size_t i = 0; i < nev; i++) {
            if (evs[i].pid != pid)
                continue;
            if (evs[i].type == 'G')
                gained = evs[i].t0;
            else if (evs[i].type == 'L' && gained != 0 &&
                     evs[i].t0 >= gained) {
                printf("  %d first acted as leader %.1f ms after it was "
                       "elected\n", pid, (double)(evs[i].t0 - gained) / 1e6);
                return true;
            }
        }
        h_sleep_ms(20);
    } while (h_now_ms() < end);
    return false;
}

/* ---- the judge ------------------------------------------------------------- */

/* A process's stretch of leadership: its L samples of one run. A sample
 * says that is_leader() returned 1 at some instant of [t0, t1], not
 * which: the process may be preempted or SIGSTOPped between the call and
 * either clock reading. [from, to] is the stretch at its widest (first
 * t0, last t1); [from_hi, to_lo] (first t1, last t0) is where it surely
 * believed, empty when the stretch is one sample. */
struct stretch {
    int pid;
    unsigned run;
    uint64_t from, to, term;
    uint64_t from_hi, to_lo;
};

static int by_from(const void *a, const void *b)
{
    const struct stretch *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

static size_t stretches(struct stretch *out, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < nev; i++) {
        size_t k;
        if (evs[i].type != 'L')
            continue;
        for (k = 0; k < n; k++)
            if (out[k].pid == evs[i].pid && out[k].run == evs[i].run)
                break;
        if (k == n) {
            if (n == cap)
                continue;
            out[n++] = (struct stretch){evs[i].pid, evs[i].run, evs[i].t0,
                                        evs[i].t1, evs[i].term, evs[i].t1,
                                        evs[i].t0};
        }
        if (evs[i].t1 > out[k].to)
            out[k].to = evs[i].t1;
        if (evs[i].t0 > out[k].to_lo)
            out[k].to_lo = evs[i].t0;
        CHECK(evs[i].term == out[k].term,
              "pid %d changed term within one stretch of leadership "
              "(%" PRIu64 " then %" PRIu64 ")", evs[i].pid, out[k].term,
              evs[i].term);
    }
    qsort(out, n, sizeof *out, by_from);
    return n;
}

static void judge(uint32_t caps, int stopped, uint64_t t_stop,
                  uint64_t t_cont, const int *pids)
{
    static struct stretch s[4096];
    size_t n = stretches(s, 4096), gains = 0;
    uint64_t last_term = 0;

    /* Never two leaders at an instant: a later stretch that surely began
     * (its first sample's t1) before an earlier one surely ended (its
     * last sample's t0) is two leaders at once. One that only may have
     * (the widest bounds touch) is a clock reading taken late, as when a
     * SIGSTOP lands between is_leader() and h_now_ns(): counted apart. */
    size_t maybe = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n && s[j].from <= s[i].to; j++) {
            if (s[j].pid == s[i].pid)
                continue;
            if (s[j].from_hi >= s[i].to_lo) {
                maybe++;
                continue;
            }
            CHECK(false,
                  "two leaders: pid %d [%.3f, %.3f] ms and pid %d [%.3f, "
                  "%.3f] ms overlap", s[i].pid, s[i].from / 1e6,
                  s[i].to_lo / 1e6, s[j].pid, s[j].from_hi / 1e6,
                  s[j].to / 1e6);
        }
    if (maybe > 0)
        printf("  %zu pair(s) of stretches touch only within a sample's "
               "clock readings (not two leaders)\n", maybe);
    CHECK(n >= (stopped ? 3u : 2u), "only %zu stretches of leadership", n);
    /* Terms strictly increase, election after election. */
    for (size_t i = 0; i < nev; i++) {
        if (evs[i].type != 'G')
            continue;
        gains++;
        if (caps & DLOCK_CAP_FENCING)
            CHECK(evs[i].term > last_term,
                  "term %" PRIu64 " (pid %d) after term %" PRIu64,
                  evs[i].term, evs[i].pid, last_term);
        last_term = evs[i].term;
    }
    /* on_change once per change: G and X alternate in each process. */
    for (int p = 0; p < NCAND; p++) {
        char prev = 'X';
        for (size_t i = 0; i < nev; i++) {
            if (evs[i].pid != pids[p] || evs[i].type == 'L')
                continue;
            CHECK(evs[i].type != prev, "pid %d: on_change said %c twice "
                  "in a row", pids[p], prev);
            prev = evs[i].type;
        }
    }
    /* The stopped leader heard of its loss before it led again. */
    if (stopped != 0) {
        bool told = false;
        for (size_t i = 0; i < nev; i++) {
            if (evs[i].pid != stopped)
                continue;
            if (evs[i].type == 'X' && evs[i].t0 > t_stop)
                told = true;
            if (evs[i].type == 'L' && evs[i].t0 >= t_cont)
                CHECK(told, "pid %d believed it led at %.3f ms after the "
                      "resume before on_change told it the loss",
                      stopped, evs[i].t0 / 1e6);
            if (told)
                break;
        }
        CHECK(told, "the stopped leader %d never heard it lost", stopped);
    }
    printf("  %zu stretches of leadership, %zu elections, last term %" PRIu64
           "\n", n, gains, last_term);
    if (failures == 0)
        return;
    /* The history without the L lines of a stretch, for the reader. */
    for (size_t i = 0; i < nev; i++)
        if (evs[i].type != 'L' || i == 0 || evs[i - 1].type != 'L' ||
            evs[i - 1].pid != evs[i].pid)
            fprintf(stderr, "  %d %c %.3f ms term %" PRIu64 " run %u\n",
                    evs[i].pid, evs[i].type, evs[i].t0 / 1e6, evs[i].term,
                    evs[i].run);
}

/* ---- bad input: clear errors, no crash ----------------------------------- */

static void expect_msg(dlock_client *c, const char *want)
{
    CHECK(strstr(dlock_client_errmsg(c), want) != NULL,
          "message '%s' does not say '%s'", dlock_client_errmsg(c), want);
}

static void arguments(const char *uri)
{
    dlock_elect_options o = DLOCK_ELECT_OPTIONS_INIT;
    dlock_client *c = h_client(uri);
    dlock_election *e = (dlock_election *)&o;
    char longid[DLOCK_ELECT_ID_MAX + 2];

    CHECK(dlock_elect_new(NULL, c, "x", NULL) == DLOCK_EINVAL, "out NULL");
    CHECK(dlock_elect_new(&e, NULL, "x", NULL) == DLOCK_EINVAL && e == NULL,
          "client NULL");
    CHECK(dlock_elect_new(&e, c, NULL, NULL) == DLOCK_EINVAL, "name NULL");
    expect_msg(c, "elect_new: name: NULL");
    CHECK(dlock_elect_new(&e, c, "", NULL) == DLOCK_EINVAL, "name empty");
    o.version = 99;
    CHECK(dlock_elect_new(&e, c, "x", &o) == DLOCK_EINVAL, "version 99");
    expect_msg(c, "opts: version 99");
    o.version = DLOCK_ELECT_OPTIONS_VERSION;
    o.id = "";
    CHECK(dlock_elect_new(&e, c, "x", &o) == DLOCK_EINVAL, "id empty");
    expect_msg(c, "opts.id: empty");
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    o.id = longid;
    CHECK(dlock_elect_new(&e, c, "x", &o) == DLOCK_EINVAL, "id too long");
    expect_msg(c, "opts.id: too long");
    o.id = "bad\xff";
    CHECK(dlock_elect_new(&e, c, "x", &o) == DLOCK_EINVAL, "id not UTF-8");
    expect_msg(c, "invalid UTF-8");
    /* NULL handles: errors or nothing, never a crash. */
    CHECK(dlock_elect_join(NULL) == DLOCK_EINVAL, "join(NULL)");
    CHECK(dlock_elect_await(NULL, 0) == DLOCK_EINVAL, "await(NULL)");
    CHECK(dlock_elect_resign(NULL) == DLOCK_EINVAL, "resign(NULL)");
    CHECK(!dlock_elect_is_leader(NULL) && dlock_elect_term(NULL) == 0 &&
          strcmp(dlock_elect_id(NULL), "") == 0, "accessors of NULL");
    dlock_elect_free(NULL);
    /* Calls out of order. */
    o.id = "me";
    CHECK(dlock_elect_new(&e, c, h_name("args"), &o) == DLOCK_OK, "new");
    CHECK(strcmp(dlock_elect_id(e), "me") == 0, "id kept");
    CHECK(dlock_elect_await(e, 0) == DLOCK_ENOTHELD, "await before join");
    CHECK(strstr(dlock_elect_errmsg(e), "join first") != NULL,
          "await's message: %s", dlock_elect_errmsg(e));
    CHECK(dlock_elect_resign(e) == DLOCK_OK, "resign before join");
    CHECK(dlock_elect_join(e) == DLOCK_OK, "join");
    CHECK(dlock_elect_join(e) == DLOCK_EINVAL, "join twice");
    CHECK(dlock_elect_await(e, 20000) == DLOCK_OK, "alone: leader");
    CHECK(dlock_elect_join(e) == DLOCK_EINVAL, "join while leading");
    CHECK(dlock_elect_resign(e) == DLOCK_OK && !dlock_elect_is_leader(e),
          "resign");
    CHECK(dlock_elect_join(e) == DLOCK_OK, "join after resigning");
    CHECK(dlock_elect_await(e, 20000) == DLOCK_OK, "leader again");
    dlock_elect_free(e); /* resigns */
    /* The client closed under a leader and a candidate: free them after. */
    {
        dlock_election *l = NULL, *w = NULL;
        const char *n = h_name("args-close");

        CHECK(dlock_elect_new(&l, c, n, NULL) == DLOCK_OK &&
              dlock_elect_new(&w, c, n, NULL) == DLOCK_OK, "two of one");
        CHECK(dlock_elect_join(l) == DLOCK_OK &&
              dlock_elect_await(l, 20000) == DLOCK_OK, "the first leads");
        CHECK(dlock_elect_join(w) == DLOCK_OK, "the second joins");
        CHECK(dlock_elect_await(w, 200) == DLOCK_ETIMEDOUT, "and waits");
        dlock_client_close(c);
        CHECK(!dlock_elect_is_leader(l), "no leader after close");
        CHECK(dlock_elect_await(w, 1000) == DLOCK_ECLOSED,
              "the wait ends with the client: %s", dlock_elect_errmsg(w));
        dlock_elect_free(l);
        dlock_elect_free(w);
    }
}

/* ---- the driver -------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {{"candidate", candidate},
                                          {NULL, NULL}};
    const char *uri, *name;
    char log[512];
    dlock_client *c;
    uint32_t caps;
    int pids[NCAND], leader, next, last = 0, stopped = 0;
    uint64_t t, t_stop = 0, t_cont = 0;
    int64_t t_begin;
    bool bounded;

    h_child_dispatch(argc, argv, roles);
    uri = h_setup(argc, argv);
    evs = calloc(MAXEV, sizeof *evs);
    if (evs == NULL)
        return 2;
    t_begin = h_now_ms();
    c = h_client(uri);
    caps = h_caps(c);
    dlock_client_close(c);
    /* As conformance__paused_holder_stops_believing: a paused holder of a
     * process-bound lock (file://) still holds it. */
    bounded = (caps & (DLOCK_CAP_LEASE | DLOCK_CAP_SERVER_TIMEOUT |
                       DLOCK_CAP_SURVIVES_RECONNECT)) != 0;
    arguments(uri);
    name = h_name("elect");
    snprintf(log, sizeof log, "%s/elect.log", h_scratch());
    for (int i = 0; i < NCAND; i++)
        pids[i] = h_spawn_args("candidate", (const char *[]){name, log, NULL});

    leader = wait_gain(log, 0, 0, 30000);
    CHECK(leader != 0, "nobody was elected within 30 s");
    if (leader != 0) {
        h_sleep_ms(200);
        t = h_now_ns();
        kill(leader, SIGUSR1); /* resign */
        next = wait_gain(log, t, leader, 30000);
        CHECK(next != 0, "nobody else was elected after %d resigned",
              leader);
        kill(leader, SIGUSR2); /* join again */
        last = next;
        if (next != 0 && bounded) {
            h_sleep_ms(200);
            t_stop = h_now_ns();
            kill(next, SIGSTOP);
            leader = wait_gain(log, t_stop, next, 30000);
            t_cont = h_now_ns();
            kill(next, SIGCONT); /* before any check can end the test */
            stopped = next;
            last = leader;
            CHECK(leader != 0, "nobody was elected while the leader %d "
                  "was stopped", next);
            CHECK(wait_event(log, 'X', t_stop, next, 0, 30000) != 0,
                  "the stopped leader %d was not told of its loss", next);
            printf("  stopped %d for %.0f ms until %d was elected\n", next,
                   (double)(t_cont - t_stop) / 1e6, leader);
        }
        /* The last one elected acts as leader before the end. It may
         * take up to a renewal: a server-timeout mode closes its idle
         * sessions meanwhile, which puts its locks in doubt until the
         * next renewal confirms them (core/held.c). */
        CHECK(last == 0 || wait_lead(log, last, 10000),
              "the last one elected, %d, never believed it led", last);
        h_sleep_ms(100);
    }
    for (int i = 0; i < NCAND; i++)
        kill(pids[i], SIGTERM);
    for (int i = 0; i < NCAND; i++)
        CHECK(h_wait(pids[i]) == 0, "candidate %d did not end cleanly",
              pids[i]);
    read_log(log);
    judge(caps, stopped, t_stop, t_cont, pids);
    printf("%s: %s in %.1f s\n", uri, failures ? "FAILED" : "ok",
           (double)(h_now_ms() - t_begin) / 1000.0);
    free(evs);
    h_cleanup();
    return failures ? 1 : 0;
}
