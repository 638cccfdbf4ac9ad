/*
 * pitfalls_zk.c: `dlock demo pitfalls`'s zk-herd recipe. N waiter
 * processes queue behind a holder and take the lock in turn, twice:
 *
 *   broken  the naive recipe, with the bare ZooKeeper C client: each waiter
 *           creates an ephemeral sequential child and watches the lock
 *           node's children (zoo_wget_children); every release wakes every
 *           waiter, and each lists the children again
 *   fix     dlock's zk:// lock: each waiter watches only its predecessor
 *
 * Counted by the server itself, from its `mntr` four-letter word before
 * and after the hand-offs: the watch notifications it fired (the sums of
 * its node_*_watch_count summaries) and the packets it sent, per hand-off;
 * and, for the naive recipe, the child events its waiters received.
 * The ZooKeeper client owns threads: no handle or dlock client is open in
 * this process while it forks the waiters, which connect on their own.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef DLOCK_TOOL_ZK
#include <zookeeper/zookeeper.h>
#endif

#include "bench.h"
#include "pitfalls.h"

#ifdef DLOCK_TOOL_ZK

#define HOLD_MS 20

struct counts {
    long long sent, notified;
    long long alive; /* zk_num_alive_connections, this mntr's included */
};

/* The server's mntr counters; false (why in err) if it will not say. */
static bool mntr(const char *host, int port, struct counts *c, char *err,
                 size_t cap)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    char portbuf[16], buf[16384];
    size_t n = 0;
    ssize_t got;
    int fd = -1;

    snprintf(portbuf, sizeof portbuf, "%d", port);
    if (getaddrinfo(host, portbuf, &hints, &ai) != 0 || ai == NULL ||
        (fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        write(fd, "mntr", 4) != 4) {
        snprintf(err, cap, "mntr: cannot ask %s:%d: %s", host, port,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        if (ai != NULL)
            freeaddrinfo(ai);
        return false;
    }
    freeaddrinfo(ai);
    while (n + 1 < sizeof buf &&
           (got = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)got;
    close(fd);
    buf[n] = '\0';
    memset(c, 0, sizeof *c);
    bool seen = false;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128];
        long long v;
        if (sscanf(line, "%127s %lld", name, &v) != 2)
            continue;
        if (strcmp(name, "zk_packets_sent") == 0) {
            c->sent = v;
            seen = true;
        } else if (strncmp(name, "zk_sum_node_", 12) == 0 &&
                   strstr(name, "_watch_count") != NULL)
            c->notified += v;
        else if (strcmp(name, "zk_num_alive_connections") == 0)
            c->alive = v;
    }
    if (!seen)
        snprintf(err, cap,
                 "mntr: %s:%d gave no counters (is mntr in its "
                 "4lw.commands.whitelist?)",
                 host, port);
    return seen;
}

/* ---- the naive recipe, one waiter process -------------------------------- */

struct zw {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int connected, changed, events;
};

static void zw_watch(zhandle_t *zh, int type, int state, const char *path,
                     void *ctx)
{
    struct zw *w = ctx;

    (void)zh;
    (void)path;
    pthread_mutex_lock(&w->m);
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE)
        w->connected = 1;
    if (type == ZOO_CHILD_EVENT) {
        w->events++;
        w->changed = 1;
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->m);
}

/* Wait until *flag or 15 s; true if set. */
static bool zw_wait(struct zw *w, int *flag)
{
    uint64_t until = bn_now_ns() + 15000000000ull;
    bool ok;

    pthread_mutex_lock(&w->m);
    while (!*flag && bn_now_ns() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&w->cv, &w->m, &ts);
    }
    ok = *flag != 0;
    pthread_mutex_unlock(&w->m);
    return ok;
}

static zhandle_t *zw_open(const char *hosts, struct zw *w)
{
    zhandle_t *zh;

    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->cv, NULL);
    zh = zookeeper_init(hosts, zw_watch, 10000, NULL, w, 0);
    if (zh != NULL && !zw_wait(w, &w->connected)) {
        zookeeper_close(zh);
        zh = NULL;
    }
    return zh;
}

static void say(int fd, const char *fmt, long long v)
{
    char line[64];
    int n = snprintf(line, sizeof line, fmt, v);

    if (write(fd, line, (size_t)n) != n)
        _exit(EXIT_SOFTWARE);
}

/* Is mine the lowest sequence number among the children? */
static bool lowest(const struct String_vector *sv, const char *mine)
{
    for (int i = 0; i < sv->count; i++)
        if (strcmp(sv->data[i], mine) < 0)
            return false;
    return true;
}

static void naive_waiter(const char *hosts, const char *base, int go,
                         int report)
{
    struct zw w = {.connected = 0};
    char path[512], mine[512];
    zhandle_t *zh;
    bool queued = false;
    char c;

    if (read(go, &c, 1) != 1)
        _exit(EXIT_SOFTWARE);
    if ((zh = zw_open(hosts, &w)) == NULL) {
        say(report, "X %lld\n", 0);
        _exit(EXIT_UNAVAILABLE);
    }
    snprintf(path, sizeof path, "%s/lock-", base);
    if (zoo_create(zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE,
                   ZOO_EPHEMERAL | ZOO_SEQUENCE, mine, sizeof mine) != ZOK) {
        say(report, "X %lld\n", 1);
        _exit(EXIT_SOFTWARE);
    }
    const char *leaf = strrchr(mine, '/') + 1;
    for (;;) {
        struct String_vector sv = {0, NULL};
        pthread_mutex_lock(&w.m);
        w.changed = 0;
        pthread_mutex_unlock(&w.m);
        /* The herd: a watch on all the children, set by every waiter. */
        if (zoo_wget_children(zh, base, zw_watch, &w, &sv) != ZOK) {
            say(report, "X %lld\n", 2);
            _exit(EXIT_SOFTWARE);
        }
        bool won = lowest(&sv, leaf);
        deallocate_String_vector(&sv);
        if (won)
            break;
        if (!queued) {
            say(report, "Q %lld\n", 0);
            queued = true;
        }
        if (!zw_wait(&w, &w.changed)) {
            say(report, "X %lld\n", 3);
            _exit(EXIT_SOFTWARE);
        }
    }
    if (!queued)
        say(report, "Q %lld\n", 0);
    bn_sleep_ms(HOLD_MS);
    zoo_delete(zh, mine, -1);
    pthread_mutex_lock(&w.m);
    long long events = w.events;
    pthread_mutex_unlock(&w.m);
    say(report, "E %lld\n", events);
    zookeeper_close(zh);
    _exit(0);
}

/* ---- dlock, one waiter process ------------------------------------------- */

static void dlock_waiter(const char *uri, const char *name, int go, int report)
{
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    char ch;

    if (read(go, &ch, 1) != 1)
        _exit(EXIT_SOFTWARE);
    if (dlock_client_open(&c, uri, NULL) != DLOCK_OK ||
        dlock_lock_new(&lk, c, name, NULL) != DLOCK_OK) {
        say(report, "X %lld\n", 0);
        _exit(EXIT_UNAVAILABLE);
    }
    say(report, "Q %lld\n", 0);
    if (dlock_acquire(lk, 30000) != DLOCK_OK) {
        say(report, "X %lld\n", 1);
        _exit(EXIT_SOFTWARE);
    }
    bn_sleep_ms(HOLD_MS);
    dlock_release(lk);
    say(report, "E %lld\n", 0);
    dlock_lock_free(lk);
    dlock_client_close(c);
    _exit(0);
}

/* ---- the parent ---------------------------------------------------------- */

struct herd {
    unsigned n;
    pid_t pid[64];
    int go[2], rep[2];
    FILE *in;
    long long events; /* child events the waiters received (naive) */
    bool failed;
};

static void herd_fork(struct herd *h, const char *hosts, const char *base,
                      const char *uri, const char *name)
{
    if (pipe(h->go) != 0 || pipe(h->rep) != 0) {
        h->failed = true;
        return;
    }
    fflush(NULL);
    for (unsigned i = 0; i < h->n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(h->go[1]);
            close(h->rep[0]);
            bn_child_init(getppid());
            if (hosts != NULL)
                naive_waiter(hosts, base, h->go[0], h->rep[1]);
            dlock_waiter(uri, name, h->go[0], h->rep[1]);
        }
        h->pid[i] = pid;
        if (pid < 0)
            h->failed = true;
    }
    close(h->go[0]);
    close(h->rep[1]);
    h->in = fdopen(h->rep[0], "r");
}

/* Read reports until `want` lines of kind k were seen (0: until EOF). */
static void herd_read(struct herd *h, char k, unsigned want)
{
    char line[64];
    unsigned seen = 0;

    while ((want == 0 || seen < want) && h->in != NULL &&
           fgets(line, sizeof line, h->in) != NULL) {
        long long v = 0;
        char kind = line[0];
        sscanf(line + 1, "%lld", &v);
        if (kind == 'X')
            h->failed = true;
        if (kind == 'E')
            h->events += v;
        if (kind == k)
            seen++;
        if (kind == 'X' && want != 0)
            break;
    }
}

static void herd_end(struct herd *h)
{
    close(h->go[1]); /* any waiter still waiting for go ends */
    herd_read(h, 0, 0);
    if (h->in != NULL)
        fclose(h->in);
    for (unsigned i = 0; i < h->n; i++)
        bn_reap(h->pid[i], 20000);
}

static void herd_go(struct herd *h)
{
    for (unsigned i = 0; i < h->n; i++)
        if (write(h->go[1], "g", 1) != 1)
            h->failed = true;
}

/* The ZooKeeper connect string (hosts and chroot) of a zk:// URI. */
static void zk_hosts(const char *uri, char *out, size_t cap)
{
    const char *p = strstr(uri, "://") + 3, *at = strchr(p, '@');
    size_t auth = strcspn(p, "/?#");

    if (at != NULL && (size_t)(at - p) < auth) {
        auth -= (size_t)(at - p) + 1;
        p = at + 1;
    }
    size_t path = strcspn(p, "?#");
    snprintf(out, cap, "%.*s", (int)(path > auth ? path : auth), p);
}

/*
 * The server's counters are the whole server's: another client's traffic
 * during the hand-offs counts too. c0.alive says how many connections it
 * had, ours (the waiters, this process's and mntr's own) included.
 */
static long long report(const char *what, unsigned n, double secs,
                        const struct counts *d, const struct counts *c0)
{
    long long others = c0->alive - (long long)n - 2;

    if (others > 0)
        printf("    (the server had %lld other connections: their traffic "
               "counts too)\n", others);
    printf("    %s: %u hand-offs in %.2f s; the server fired %lld watch "
           "notifications\n    (%.1f per hand-off) and sent %lld packets "
           "(%.1f per hand-off)\n",
           what, n, secs, d->notified, (double)d->notified / n, d->sent,
           (double)d->sent / n);
    return others > 0 ? others : 0;
}

void pf_zk_herd(const char *uri, unsigned waiters, struct pf_result *res)
{
    char hosts[512], host[256], base[128], name[128], err[256] = "";
    int port;
    size_t s, e;
    struct counts c0, c1, naive, fix;
    double per[2] = {0, 0};

    zk_hosts(uri, hosts, sizeof hosts);
    if (!bn_uri_first_hostport(uri, host, sizeof host, &port, &s, &e)) {
        snprintf(res->why, sizeof res->why,
                 "the zk:// URI names no "
                 "host:port to ask mntr");
        return;
    }
    if (!mntr(host, port, &c0, err, sizeof err)) {
        res->unreachable = strstr(err, "cannot ask") != NULL;
        snprintf(res->why, sizeof res->why, "%s", err);
        return;
    }
    snprintf(base, sizeof base, "/dlock-pitfalls-%ld", (long)getpid());
    snprintf(name, sizeof name, "dlock-pitfalls-herd-%ld", (long)getpid());
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);

    /* broken */
    printf("  broken: %u waiters, each watching all the children of %s "
           "(zoo_wget_children),\n  queue behind a holder; each holds %d ms "
           "and deletes its node:\n",
           waiters, base, HOLD_MS);
    struct herd h = {.n = waiters};
    herd_fork(&h, hosts, base, NULL, NULL);
    struct zw w = {.connected = 0};
    zhandle_t *zh = zw_open(hosts, &w);
    char mine[512], path[600];
    snprintf(path, sizeof path, "%s/lock-", base);
    if (zh == NULL ||
        zoo_create(zh, base, "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0) != ZOK ||
        zoo_create(zh, path, "", 0, &ZOO_OPEN_ACL_UNSAFE,
                   ZOO_EPHEMERAL | ZOO_SEQUENCE, mine, sizeof mine) != ZOK) {
        res->unreachable = zh == NULL;
        snprintf(res->why, sizeof res->why, "zk: cannot %s on %s",
                 zh == NULL ? "connect" : "create the lock nodes", hosts);
        if (zh != NULL)
            zookeeper_close(zh);
        herd_end(&h);
        return;
    }
    herd_go(&h);
    herd_read(&h, 'Q', waiters);
    uint64_t t0 = bn_now_ns();
    mntr(host, port, &c0, err, sizeof err);
    zoo_delete(zh, mine, -1);
    herd_end(&h);
    double secs = (double)(bn_now_ns() - t0) / 1e9;
    mntr(host, port, &c1, err, sizeof err);
    zoo_delete(zh, base, -1);
    zookeeper_close(zh);
    naive.sent = c1.sent - c0.sent;
    naive.notified = c1.notified - c0.notified;
    long long busy = report("measured", waiters, secs, &naive, &c0);
    /* Counted by the waiters from their queueing on (each create wakes
     * the waiters already there, too); one wake-up each, its turn, is
     * the one that mattered. */
    printf("    the waiters were woken %lld times in all (queueing "
           "included), %lld of them\n    for nothing: only each one's own "
           "turn mattered\n",
           h.events, h.events - waiters);
    per[0] = (double)naive.notified / waiters;
    bool bad = h.failed;

    /* fix */
    printf("  fix: the same %u waiters through dlock's zk:// lock, each "
           "watching only its\n  predecessor:\n",
           waiters);
    struct herd f = {.n = waiters};
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    herd_fork(&f, NULL, NULL, uri, name);
    if (dlock_client_open(&c, uri, NULL) != DLOCK_OK ||
        dlock_lock_new(&lk, c, name, NULL) != DLOCK_OK ||
        dlock_acquire(lk, 5000) != DLOCK_OK) {
        res->unreachable = true;
        snprintf(res->why, sizeof res->why, "%s",
                 lk ? dlock_lock_errmsg(lk) : dlock_client_errmsg(c));
        dlock_lock_free(lk);
        dlock_client_close(c);
        herd_end(&f);
        return;
    }
    herd_go(&f);
    herd_read(&f, 'Q', waiters);
    /* Queued means waiting on the server: ask it, up to 10 s. */
    for (int i = 0; i < 200; i++) {
        dlock_state st = DLOCK_STATE_INIT;
        if (dlock_inspect(c, name, &st) != DLOCK_OK || st.waiters < 0) {
            bn_sleep_ms(1000);
            break;
        }
        if (st.waiters >= (int)waiters)
            break;
        bn_sleep_ms(50);
    }
    t0 = bn_now_ns();
    mntr(host, port, &c0, err, sizeof err);
    dlock_release(lk);
    herd_end(&f);
    secs = (double)(bn_now_ns() - t0) / 1e9;
    mntr(host, port, &c1, err, sizeof err);
    dlock_lock_free(lk);
    dlock_client_close(c);
    fix.sent = c1.sent - c0.sent;
    fix.notified = c1.notified - c0.notified;
    busy += report("measured", waiters, secs, &fix, &c0);
    per[1] = (double)fix.notified / waiters;

    res->ran = !bad && !f.failed;
    if (!res->ran) {
        snprintf(res->why, sizeof res->why, "a waiter failed (zk://)");
        return;
    }
    /* The herd: about half the waiters woken per hand-off, against one. */
    res->broken_failed = per[0] >= (double)waiters / 3 && per[0] > 2 * per[1];
    res->fix_held = per[1] <= 1.5;
    snprintf(res->broken, sizeof res->broken,
             "%.1f notifications, %.1f packets per hand-off", per[0],
             (double)naive.sent / waiters);
    snprintf(res->fix, sizeof res->fix,
             "%.1f notifications, %.1f packets per hand-off%s", per[1],
             (double)fix.sent / waiters,
             busy > 0 ? " (a busy server: other clients counted)" : "");
}

#else

void pf_zk_herd(const char *uri, unsigned waiters, struct pf_result *res)
{
    (void)uri;
    (void)waiters;
    snprintf(res->why, sizeof res->why,
             "this dlock was built without the ZooKeeper C client");
}

#endif
