/*
 * cluster.c: the Redis backend on a real Redis Cluster (3 masters with a
 * replica each, tests/servers kind rcluster), `redis_cluster --uri URI
 * --test mutex|topology|crash|all`. Safety is judged from unfenced counters in
 * files (a lost increment is a second holder), never from dlock_held().
 *
 *   mutex     8 processes x 200 increments over 6 names, 2 on each master;
 *             every increment must be there.
 *   topology  4 processes increment names on every master while the test
 *             fails a master over to its replica (CLUSTER FAILOVER) and
 *             then migrates the slot of another name to another master
 *             (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE, as
 *             `redis-cli --cluster reshard` does); no increment lost and
 *             no acquire or release failing: MOVED, ASK and TRYAGAIN are
 *             followed within timeout= (15 s here: a failover pauses
 *             the old master for seconds on a loaded machine), and a
 *             session whose connection ended is replaced by core.
 *
 *   crash     the master holding a lock is SIGKILLed: the lock is in doubt
 *             at once, then held again on the promoted replica or lost.
 *
 * The seeds are $DLOCK_TEST_RCLUSTER_HOSTS; names are for mode setnx
 * ("dlock:{name}": the slot of the name).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "../conformance/harness.h"

#define NAMES 6
#define MAXM 8

static char names[NAMES][64];

/* ---- the cluster, seen with bare hiredis ------------------------------------------ */

struct master {
    char id[41], host[64];
    int port;
    char replica_host[64];
    int replica_port;
};

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("redis_cluster: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static redisContext *conn(const char *host, int port)
{
    struct timeval tv = {10, 0};
    redisContext *rc = redisConnectWithTimeout(host, port, tv);
    if (rc == NULL || rc->err) {
        fprintf(stderr, "redis_cluster: connect %s:%d failed\n", host, port);
        exit(1);
    }
    redisSetTimeout(rc, tv);
    return rc;
}

/* A connection to the first seed that answers (one may be down). */
static redisContext *seed(void)
{
    const char *h = getenv("DLOCK_TEST_RCLUSTER_HOSTS");
    struct timeval tv = {2, 0};

    for (const char *p = h; p != NULL && *p != '\0';) {
        const char *colon = strchr(p, ':'), *comma = strchr(p, ',');
        redisContext *rc;
        if (colon == NULL)
            break;
        rc = redisConnectWithTimeout("127.0.0.1", atoi(colon + 1), tv);
        if (rc != NULL && rc->err == 0) {
            redisSetTimeout(rc, tv);
            return rc;
        }
        if (rc != NULL)
            redisFree(rc);
        p = comma != NULL ? comma + 1 : NULL;
    }
    fprintf(stderr, "redis_cluster: no seed of $DLOCK_TEST_RCLUSTER_HOSTS "
                    "answers\n");
    exit(2);
}

/* The masters with slots and their replicas, from CLUSTER NODES. */
static int masters(redisContext *rc, struct master *m)
{
    redisReply *r = redisCommand(rc, "CLUSTER NODES");
    char *save = NULL, *line, *text;
    int n = 0;

    if (r == NULL || r->type != REDIS_REPLY_STRING)
        exit(fail("CLUSTER NODES failed"));
    text = strdup(r->str);
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char id[41], addr[128], flags[64], master[41];
        int nf = sscanf(line, "%40s %127s %63s %40s", id, addr, flags, master);
        char *c = strchr(addr, ':');
        if (nf < 4 || c == NULL || strstr(flags, "master") == NULL ||
            strstr(flags, "fail") != NULL)
            continue;
        /* a master with slots has a 9th field */
        int fields = 0;
        for (const char *p = line; *p; p++)
            fields += *p == ' ';
        if (fields < 8 || n == MAXM)
            continue;
        memset(&m[n], 0, sizeof m[n]);
        snprintf(m[n].id, sizeof m[n].id, "%s", id);
        *c = '\0';
        snprintf(m[n].host, sizeof m[n].host, "%s", addr);
        m[n].port = atoi(c + 1);
        n++;
    }
    free(text);
    freeReplyObject(r);
    text = NULL;
    /* replicas */
    r = redisCommand(rc, "CLUSTER NODES");
    text = strdup(r->str);
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char id[41], addr[128], flags[64], master[41];
        char *c;
        if (sscanf(line, "%40s %127s %63s %40s", id, addr, flags, master) <
                4 ||
            strstr(flags, "slave") == NULL || strstr(flags, "fail") != NULL ||
            (c = strchr(addr, ':')) == NULL)
            continue;
        *c = '\0';
        for (int i = 0; i < n; i++)
            if (strcmp(m[i].id, master) == 0) {
                snprintf(m[i].replica_host, sizeof m[i].replica_host, "%s",
                         addr);
                m[i].replica_port = atoi(c + 1);
            }
    }
    free(text);
    freeReplyObject(r);
    return n;
}

static long long keyslot(redisContext *rc, const char *key)
{
    redisReply *r = redisCommand(rc, "CLUSTER KEYSLOT %s", key);
    long long s = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer
                                                               : -1;
    freeReplyObject(r);
    return s;
}

/* Which master (index into m) serves slot, by asking each. */
static int owner(struct master *m, int n, long long slot)
{
    for (int i = 0; i < n; i++) {
        redisContext *rc = conn(m[i].host, m[i].port);
        redisReply *r = redisCommand(rc, "CLUSTER COUNTKEYSINSLOT %lld", slot);
        redisReply *s = redisCommand(rc, "CLUSTER SLOTS");
        int mine = 0;
        for (size_t j = 0; s != NULL && j < s->elements; j++) {
            redisReply *e = s->element[j];
            if (e->element[0]->integer <= slot &&
                slot <= e->element[1]->integer &&
                e->element[2]->element[1]->integer == m[i].port)
                mine = 1;
        }
        freeReplyObject(r);
        freeReplyObject(s);
        redisFree(rc);
        if (mine)
            return i;
    }
    return -1;
}

/* NAMES names, two on each of the three masters. */
static int pick_names(const char *prefix, struct master *m, int nm)
{
    redisContext *rc = seed();
    int per[MAXM] = {0}, got = 0;

    for (int k = 0; got < NAMES && k < 10000; k++) {
        char cand[64];
        snprintf(cand, sizeof cand, "%s-%d-%d", prefix, (int)getpid(), k);
        int o = owner(m, nm, keyslot(rc, cand));
        if (o < 0 || per[o] == NAMES / 3)
            continue;
        per[o]++;
        snprintf(names[got++], sizeof names[0], "%s", cand);
    }
    redisFree(rc);
    return got == NAMES ? 0 : fail("cannot spread names over the masters");
}

/* ---- the workers ------------------------------------------------------------------- */

/* Child "inc INDEX ITERATIONS NAMES DIR": increments counter files in
 * DIR (the parent's scratch dir) under the lock of their name, until ITERATIONS or the file
 * "stop" appears; prints how many it did into "done-INDEX". */
static int inc_child(char **args)
{
    int me = atoi(args[0]), iters = atoi(args[1]), done = 0;
    const char *dir = args[3];
    char nl[NAMES * 64 + 8], *save = NULL, *tok;
    char stop[512], out[512];
    int n = 0;
    dlock_client *c = h_client(h_uri_with("lease=5s"));
    dlock_lock *lk[NAMES];

    snprintf(nl, sizeof nl, "%s", args[2]);
    for (tok = strtok_r(nl, ",", &save); tok && n < NAMES;
         tok = strtok_r(NULL, ",", &save))
        snprintf(names[n++], sizeof names[0], "%s", tok);
    if (c == NULL || n != NAMES)
        return 3;
    for (int i = 0; i < NAMES; i++)
        lk[i] = h_lock(c, names[i], 5000, 0);
    snprintf(stop, sizeof stop, "%s/stop", dir);
    for (int i = 0; i < iters && access(stop, F_OK) != 0; i++) {
        int k = (me + i) % NAMES, rc;
        char path[512];
        long v = 0;
        FILE *f;

        if ((rc = dlock_acquire(lk[k], 30000)) != DLOCK_OK) {
            fprintf(stderr, "inc %d: acquire %s: %s\n", me, names[k],
                    dlock_lock_errmsg(lk[k]));
            return 4;
        }
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if ((f = fopen(path, "r")) != NULL) {
            if (fscanf(f, "%ld", &v) != 1)
                v = 0;
            fclose(f);
        }
        usleep(200); /* widen the window a second holder would use */
        if ((f = fopen(path, "w")) == NULL)
            return 5;
        fprintf(f, "%ld\n", v + 1);
        fclose(f);
        done++;
        if ((rc = dlock_release(lk[k])) != DLOCK_OK) {
            fprintf(stderr, "inc %d: release %s: %s\n", me, names[k],
                    dlock_lock_errmsg(lk[k]));
            return 6;
        }
    }
    snprintf(out, sizeof out, "%s/done-%d", dir, me);
    FILE *f = fopen(out, "w");
    if (f == NULL)
        return 7;
    fprintf(f, "%d\n", done);
    fclose(f);
    for (int i = 0; i < NAMES; i++)
        dlock_lock_free(lk[i]);
    dlock_client_close(c);
    return 0;
}

static pid_t spawn(int procs, int iters, pid_t *pids)
{
    char nl[NAMES * 64 + 8] = "", a[16], b[16];
    for (int i = 0; i < NAMES; i++) {
        strcat(nl, names[i]);
        if (i + 1 < NAMES)
            strcat(nl, ",");
    }
    snprintf(b, sizeof b, "%d", iters);
    for (int i = 0; i < procs; i++) {
        snprintf(a, sizeof a, "%d", i);
        const char *args[] = {a, b, nl, h_scratch(), NULL};
        pids[i] = h_spawn_args("inc", args);
    }
    return 0;
}

/* Wait for the workers; compare the counters with what they did. */
static int judge(int procs, pid_t *pids, long expect)
{
    long sum = 0, done = 0;
    int bad = 0;

    for (int i = 0; i < procs; i++) {
        int st = h_wait(pids[i]);
        char path[512];
        FILE *f;
        long d = 0;
        if (st != 0) {
            fprintf(stderr, "redis_cluster: worker %d exited %d\n", i, st);
            bad = 1;
            continue;
        }
        snprintf(path, sizeof path, "%s/done-%d", h_scratch(), i);
        if ((f = fopen(path, "r")) != NULL) {
            if (fscanf(f, "%ld", &d) != 1)
                d = 0;
            fclose(f);
        }
        done += d;
    }
    for (int i = 0; i < NAMES; i++) {
        char path[512];
        long v = 0;
        FILE *f;
        snprintf(path, sizeof path, "%s/%s", h_scratch(), names[i]);
        if ((f = fopen(path, "r")) != NULL) {
            if (fscanf(f, "%ld", &v) != 1)
                v = 0;
            fclose(f);
        }
        sum += v;
    }
    printf("increments: %ld done, %ld counted, %ld lost\n", done, sum,
           done - sum);
    if (bad)
        return 1;
    if (sum != done || (expect >= 0 && done != expect))
        return fail("%ld increments done, %ld counted (expected %ld)", done,
                    sum, expect);
    return 0;
}

/* ---- bad input ---------------------------------------------------------------------- */

/* uri must fail (at open or at the first acquire) with code, its message
 * naming what. */
static int refused(const char *uri, int code, const char *what)
{
    dlock_client *c = NULL;
    char err[512] = "";
    int rc = dlock_client_open(&c, uri, NULL);

    if (rc == DLOCK_OK) {
        dlock_lock *lk = NULL;
        rc = dlock_lock_new(&lk, c, "bad-input", NULL);
        if (rc == DLOCK_OK) {
            rc = dlock_acquire(lk, 0);
            snprintf(err, sizeof err, "%s", dlock_lock_errmsg(lk));
            dlock_lock_free(lk);
        }
        dlock_client_close(c);
    } else {
        snprintf(err, sizeof err, "%s", dlock_strerror(rc));
        if (c != NULL) {
            snprintf(err, sizeof err, "%s", dlock_client_errmsg(c));
            dlock_client_close(c);
        }
    }
    if (rc != code || strstr(err, what) == NULL)
        return fail("%s: got %d '%s', expected %d naming '%s'", uri, rc, err,
                    code, what);
    printf("refused as expected: %s\n  %s\n", uri, err);
    return 0;
}

static int test_bad_input(void)
{
    const char *one = getenv("DLOCK_TEST_REDIS_URI");
    const char *hosts = getenv("DLOCK_TEST_RCLUSTER_HOSTS");
    char u[1024];
    int bad = 0;

    if (one == NULL || hosts == NULL)
        return fail("needs kinds redis and rcluster");
    bad |= refused("redis://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?cluster=1&"
                   "redlock=1", DLOCK_EINVAL, "cluster");
    bad |= refused("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?cluster=1",
                   DLOCK_EINVAL, "cluster");
    bad |= refused("redis://127.0.0.1:1?cluster=maybe", DLOCK_EINVAL,
                   "cluster");
    snprintf(u, sizeof u, "redis://%s/3?cluster=1", hosts);
    bad |= refused(u, DLOCK_EINVAL, "db");
    snprintf(u, sizeof u, "%s?cluster=1", one);
    bad |= refused(u, DLOCK_EINVAL, "not a Redis Cluster node");
    /* a cluster node without cluster=1: a name on another master */
    for (int i = 0; i < 20; i++) {
        char one_node[300], name[32];
        dlock_client *c = NULL;
        dlock_lock *lk = NULL;
        int r;
        snprintf(one_node, sizeof one_node, "redis://%.*s",
                 (int)strcspn(hosts, ","), hosts);
        snprintf(name, sizeof name, "plain-%d", i);
        if (dlock_client_open(&c, one_node, NULL) != DLOCK_OK ||
            dlock_lock_new(&lk, c, name, NULL) != DLOCK_OK)
            return fail("open %s", one_node);
        r = dlock_acquire(lk, 0);
        if (r != DLOCK_OK && strstr(dlock_lock_errmsg(lk), "add cluster=1") ==
                                 NULL)
            bad |= fail("%s: %s", one_node, dlock_lock_errmsg(lk));
        if (r != DLOCK_OK)
            printf("refused as expected: %s\n  %s\n", one_node,
                   dlock_lock_errmsg(lk));
        dlock_lock_free(lk);
        dlock_client_close(c);
        if (r != DLOCK_OK)
            break;
    }
    bad |= refused("redis://127.0.0.1:1?cluster=1&timeout=300ms",
                   DLOCK_ECONNECT, "127.0.0.1:1");
    return bad;
}

/* ---- the tests ---------------------------------------------------------------------- */

static int test_mutex(void)
{
    struct master m[MAXM];
    redisContext *rc = seed();
    int nm = masters(rc, m);
    pid_t pids[8];
    int64_t t0 = h_now_ms();

    redisFree(rc);
    if (nm != 3)
        return fail("%d masters with slots, expected 3", nm);
    if (pick_names("mx", m, nm) != 0)
        return 1;
    spawn(8, 200, pids);
    int r = judge(8, pids, 8 * 200);
    printf("mutex: 8 processes x 200 increments over %d names on 3 masters "
           "in %lld ms\n",
           NAMES, (long long)(h_now_ms() - t0));
    return r;
}

static int wait_role_master(const char *host, int port)
{
    for (int i = 0; i < 200; i++) {
        redisContext *rc = conn(host, port);
        redisReply *r = redisCommand(rc, "ROLE");
        int ok = r != NULL && r->type == REDIS_REPLY_ARRAY &&
                 strcmp(r->element[0]->str, "master") == 0;
        freeReplyObject(r);
        redisFree(rc);
        if (ok)
            return 0;
        h_sleep_ms(50);
    }
    return fail("%s:%d did not become master within 10 s", host, port);
}

/* Move slot from m[src] to m[dst] as redis-cli --cluster reshard does. */
static int migrate_slot(struct master *m, int nm, int src, int dst,
                        long long slot)
{
    redisContext *s = conn(m[src].host, m[src].port);
    redisContext *d = conn(m[dst].host, m[dst].port);
    redisReply *r;

    freeReplyObject(redisCommand(d, "CLUSTER SETSLOT %lld IMPORTING %s", slot,
                                 m[src].id));
    freeReplyObject(redisCommand(s, "CLUSTER SETSLOT %lld MIGRATING %s", slot,
                                 m[dst].id));
    h_sleep_ms(300); /* let the workers meet ASK and TRYAGAIN */
    for (;;) {
        r = redisCommand(s, "CLUSTER GETKEYSINSLOT %lld 100", slot);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY)
            return fail("GETKEYSINSLOT failed");
        if (r->elements == 0) {
            freeReplyObject(r);
            break;
        }
        for (size_t i = 0; i < r->elements; i++) {
            redisReply *x =
                redisCommand(s, "MIGRATE %s %d %b 0 5000 REPLACE",
                             m[dst].host, m[dst].port, r->element[i]->str,
                             r->element[i]->len);
            if (x == NULL || x->type == REDIS_REPLY_ERROR)
                fprintf(stderr, "redis_cluster: MIGRATE: %s\n",
                        x ? x->str : "no reply");
            freeReplyObject(x);
        }
        freeReplyObject(r);
    }
    freeReplyObject(redisCommand(d, "CLUSTER SETSLOT %lld NODE %s", slot,
                                 m[dst].id));
    freeReplyObject(redisCommand(s, "CLUSTER SETSLOT %lld NODE %s", slot,
                                 m[dst].id));
    for (int i = 0; i < nm; i++)
        if (i != src && i != dst) {
            redisContext *o = conn(m[i].host, m[i].port);
            freeReplyObject(redisCommand(o, "CLUSTER SETSLOT %lld NODE %s",
                                         slot, m[dst].id));
            redisFree(o);
        }
    redisFree(s);
    redisFree(d);
    return 0;
}

static int test_topology(void)
{
    struct master m[MAXM];
    redisContext *rc = seed();
    int nm = masters(rc, m), victim, src, dst;
    pid_t pids[4];
    char stop[512];
    long long slot;
    int64_t t0;

    if (nm != 3)
        return fail("%d masters with slots, expected 3", nm);
    if (pick_names("topo", m, nm) != 0)
        return 1;
    spawn(4, 100000, pids);
    h_sleep_ms(500);
    /* 1. the master of names[0] fails over to its replica */
    victim = owner(m, nm, keyslot(rc, names[0]));
    if (victim < 0 || m[victim].replica_port == 0)
        return fail("no replica for the master of %s", names[0]);
    t0 = h_now_ms();
    {
        redisContext *r = conn(m[victim].replica_host, m[victim].replica_port);
        redisReply *x = redisCommand(r, "CLUSTER FAILOVER");
        if (x == NULL || x->type == REDIS_REPLY_ERROR)
            return fail("CLUSTER FAILOVER: %s", x ? x->str : "no reply");
        freeReplyObject(x);
        redisFree(r);
    }
    if (wait_role_master(m[victim].replica_host, m[victim].replica_port) != 0)
        return 1;
    printf("failover of %s:%d to %s:%d: %lld ms\n", m[victim].host,
           m[victim].port, m[victim].replica_host, m[victim].replica_port,
           (long long)(h_now_ms() - t0));
    h_sleep_ms(1000);
    /* 2. the slot of names[2] moves to another master */
    nm = masters(rc, m);
    slot = keyslot(rc, names[2]);
    src = owner(m, nm, slot);
    dst = (src + 1) % nm;
    if (src < 0)
        return fail("no owner for slot %lld", slot);
    t0 = h_now_ms();
    if (migrate_slot(m, nm, src, dst, slot) != 0)
        return 1;
    printf("slot %lld moved from %s:%d to %s:%d: %lld ms\n", slot,
           m[src].host, m[src].port, m[dst].host, m[dst].port,
           (long long)(h_now_ms() - t0));
    h_sleep_ms(1000);
    redisFree(rc);
    snprintf(stop, sizeof stop, "%s/stop", h_scratch());
    FILE *f = fopen(stop, "w");
    if (f != NULL)
        fclose(f);
    return judge(4, pids, -1);
}

/* ---- a master crashes under a held lock ------------------------------------------- */

static atomic_int lost_code;

static void on_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)p;
    fprintf(stderr, "  on_lost: %s\n", why);
    atomic_store(&lost_code, code);
}

/* ctl.sh's index of the rcluster node listening on port; 0 if none. */
static int node_of_port(int port)
{
    const char *ctl = getenv("DLOCK_TEST_SERVERCTL");
    for (int i = 1; ctl != NULL && i <= 6; i++) {
        char cmd[600], line[32] = "";
        snprintf(cmd, sizeof cmd, "'%s' port rcluster %d", ctl, i);
        FILE *p = popen(cmd, "r");
        if (p == NULL)
            continue;
        if (fgets(line, sizeof line, p) == NULL)
            line[0] = '\0';
        pclose(p);
        if (atoi(line) == port)
            return i;
    }
    return 0;
}

static int ctl_node(const char *action, int node)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' %s rcluster %d >/dev/null",
             getenv("DLOCK_TEST_SERVERCTL"), action, node);
    return system(cmd);
}

/*
 * The master holding a lock is SIGKILLed: the holder's connection to it
 * ends, so the lock is in doubt at once (dlock_held() 0, as on one
 * server), and once the replica took over, the renewal on the new master
 * either finds the key (held again) or reports the lock lost.
 */
static int test_master_crash(void)
{
    struct master m[MAXM];
    redisContext *rc = seed();
    int nm = masters(rc, m), victim, node;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = h_client(h_uri_with("lease=10s"));
    dlock_lock *lk = NULL;
    char name[64];
    int64_t t0, doubt = -1, back = -1;

    snprintf(name, sizeof name, "crash-%d", (int)getpid());
    victim = owner(m, nm, keyslot(rc, name));
    redisFree(rc);
    if (victim < 0 || c == NULL)
        return fail("no master for %s", name);
    node = node_of_port(m[victim].port);
    if (node == 0)
        return fail("no ctl.sh node for port %d", m[victim].port);
    o.lease_ms = 10000;
    o.on_lost = on_lost;
    if (dlock_lock_new(&lk, c, name, &o) != DLOCK_OK ||
        dlock_acquire(lk, 5000) != DLOCK_OK)
        return fail("acquire %s", name);
    h_sleep_ms(200); /* the replica has the key */
    t0 = h_now_ms();
    if (ctl_node("kill", node) != 0)
        return fail("ctl.sh kill rcluster %d", node);
    while (h_now_ms() - t0 < 20000) {
        int held = dlock_held(lk);
        if (!held && doubt < 0)
            doubt = h_now_ms() - t0;
        if (held && doubt >= 0 && back < 0)
            back = h_now_ms() - t0;
        if (back >= 0 || atomic_load(&lost_code) != 0)
            break;
        h_sleep_ms(5);
    }
    printf("master %s:%d killed: in doubt after %lld ms; %s after %lld ms\n",
           m[victim].host, m[victim].port, (long long)doubt,
           back >= 0 ? "held again (the new master had it)" : "lost",
           (long long)(back >= 0 ? back : h_now_ms() - t0));
    int bad = 0;
    if (doubt < 0 || doubt > 2000)
        bad = fail("the lock was not in doubt within 2 s of the crash");
    else if (back < 0 && atomic_load(&lost_code) == 0)
        bad = fail("neither held again nor reported lost within 20 s");
    if (back >= 0) {
        /* held again: the new master must have the key and be ours */
        redisContext *s2 = seed();
        struct master m2[MAXM];
        int n2 = masters(s2, m2), o2;
        char key[128];
        snprintf(key, sizeof key, "dlock:{%s}", name);
        o2 = owner(m2, n2, keyslot(s2, name));
        redisFree(s2);
        if (o2 < 0)
            bad = fail("no owner for %s after the failover", name);
        else {
            redisContext *nm2 = conn(m2[o2].host, m2[o2].port);
            redisReply *r = redisCommand(nm2, "EXISTS %s", key);
            if (r == NULL || r->integer != 1)
                bad = fail("held again but %s is not on %s:%d", key,
                           m2[o2].host, m2[o2].port);
            freeReplyObject(r);
            redisFree(nm2);
        }
    }
    dlock_lock_free(lk);
    dlock_client_close(c);
    if (ctl_node("start", node) != 0) /* it rejoins as a replica */
        bad |= fail("ctl.sh start rcluster %d", node);
    return bad;
}

int main(int argc, char **argv)
{
    static const struct h_role roles[] = {{"inc", inc_child}, {NULL, NULL}};
    const char *test = NULL;
    int rc;

    h_child_dispatch(argc, argv, roles);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--test") == 0)
            test = argv[i + 1];
    h_setup(argc, argv);
    if (test != NULL && strcmp(test, "all") == 0)
        rc = test_bad_input() || test_mutex() || test_topology() ||
             test_master_crash(); /* one cluster for all */
    else if (test != NULL && strcmp(test, "mutex") == 0)
        rc = test_mutex();
    else if (test != NULL && strcmp(test, "topology") == 0)
        rc = test_topology();
    else if (test != NULL && strcmp(test, "crash") == 0)
        rc = test_master_crash();
    else
        rc = fail("--test mutex|topology|crash|all");
    h_cleanup();
    if (rc == 0)
        printf("1 passed, 0 failed\n");
    return rc;
}
