/*
 * test_curator.c: dlock and Apache Curator exclude each other on the same
 * lock path (`curator_interop.sh test_curator --uri $DLOCK_TEST_ZK_URI`,
 * under with-servers.sh zk; the script compiles CuratorLock.java and adds
 * --java and --cp).
 *
 * One JVM runs Curator's recipes on command (see CuratorLock.java): a
 * Curator InterProcessMutex holds while dlock contends and the other way
 * round; with mode=rwlock, Curator's InterProcessReadWriteLock readers and
 * writers against dlock's shared and exclusive locks; and in the default
 * mode a dlock reader, whose node Curator's mutex sorts like its own;
 * Curator's InterProcessSemaphoreV2 against dlock's permits, each counting
 * the other's leases and waking the other's waiters; and Curator's
 * LeaderLatch with dlock's election candidates (dlock_elect_*) in one
 * election, also across a cut connection.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../conformance/harness.h"
#include "zkt.h"

static const char *base_uri;
static const char *java_bin, *java_cp;
static zhandle_t *zh;

/* ---- the JVM ------------------------------------------------------------- */

static struct {
    pid_t pid;
    int in, out; /* its stdin (we write), its stdout (we read) */
} jvm = {-1, -1, -1};

static bool jvm_line(char *buf, size_t cap, uint32_t timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    size_t n = 0;

    while (n + 1 < cap) {
        struct pollfd p = {jvm.out, POLLIN, 0};
        int64_t left = end - h_now_ms();
        char ch;
        if (left <= 0 || poll(&p, 1, (int)left) != 1 ||
            read(jvm.out, &ch, 1) != 1) {
            buf[n] = '\0';
            return false;
        }
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return true;
}

static void jvm_send(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    fprintf(stderr, "  curator <- %s\n", cmd);
    cmd[n++] = '\n';
    assert_int_equal(write(jvm.in, cmd, (size_t)n), n);
}

/* The answer to the last command. */
static void jvm_expect(const char *want, uint32_t timeout_ms)
{
    char got[512];

    if (!jvm_line(got, sizeof got, timeout_ms))
        fail_msg("Curator did not answer within %u ms (got '%s')",
                 timeout_ms, got);
    fprintf(stderr, "  curator -> %s\n", got);
    if (strcmp(got, want) != 0)
        fail_msg("Curator answered '%s', expected '%s'", got, want);
}

static int group_setup(void **state)
{
    int to[2], from[2];
    char line[512];

    (void)state;
    zh = zkt_connect(zkt_hosts(base_uri));
    if (zh == NULL || pipe(to) != 0 || pipe(from) != 0)
        return -1;
    jvm.pid = fork();
    if (jvm.pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        execl(java_bin, java_bin, "-Xshare:auto", "-XX:TieredStopAtLevel=1",
              "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true", "-cp",
              java_cp, "CuratorLock", zkt_hosts(base_uri), (char *)NULL);
        perror("exec java");
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    jvm.in = to[1];
    jvm.out = from[0];
    if (!jvm_line(line, sizeof line, 60000) || strcmp(line, "READY") != 0) {
        fprintf(stderr, "curator: the JVM did not start: '%s'\n", line);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    char line[64];

    (void)state;
    if (jvm.pid > 0) {
        if (write(jvm.in, "quit\n", 5) == 5)
            jvm_line(line, sizeof line, 10000);
        close(jvm.in);
        close(jvm.out);
        kill(jvm.pid, SIGKILL);
        h_wait(jvm.pid);
    }
    if (zh != NULL)
        zookeeper_close(zh);
    return 0;
}

/* ---- dlock side ---------------------------------------------------------- */

/* lk waits on a thread of its own until `nodes` contenders are under dir
 * (its own included); then Curator releases what it got last, and lk
 * must get it. */
static void curator_release_wakes(dlock_lock *lk, const char *dir, int nodes)
{
    struct zkt_bg_acquire bg = {lk, 20000, -100};
    pthread_t t;

    pthread_create(&t, NULL, zkt_bg_acquire, &bg);
    assert_true(zkt_wait_children(zh, dir, nodes, 10000));
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    pthread_join(t, NULL);
    assert_int_equal(bg.rc, DLOCK_OK);
}

/* ---- the cases ----------------------------------------------------------- */

/* Curator's InterProcessMutex holds; dlock fails to get it, queues, and
 * gets it when Curator releases; then Curator fails while dlock holds. */
static void curator__mutex_holds_dlock_waits(void **state)
{
    const char *name = h_name("curator-holds");
    dlock_client *c = h_client(h_uri_with("lease=3s"));
    dlock_lock *lk;
    char dir[256];

    (void)state;
    assert_non_null(c);
    lk = h_lock(c, name, 0, 0);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    jvm_send("mutex %s 5000", dir);
    jvm_expect("GOT", 20000);
    assert_int_equal(dlock_try_acquire(lk), DLOCK_EBUSY);
    assert_int_equal(dlock_acquire(lk, 300), DLOCK_ETIMEDOUT);
    curator_release_wakes(lk, dir, 2); /* Curator's node, ours */
    assert_true(dlock_fence(lk) > 0);
    /* Now dlock holds: Curator's mutex times out. */
    jvm_send("mutex %s 300", dir);
    jvm_expect("BUSY", 10000);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_true(zkt_wait_children(zh, dir, 0, 5000));
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* dlock holds; Curator times out, then waits and gets it on release. */
static void curator__dlock_holds_curator_waits(void **state)
{
    const char *name = h_name("dlock-holds");
    dlock_client *c = h_client(h_uri_with("lease=3s"));
    dlock_lock *lk;
    char dir[256];

    (void)state;
    assert_non_null(c);
    lk = h_lock(c, name, 0, 0);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    jvm_send("mutex %s 500", dir);
    jvm_expect("BUSY", 10000);
    jvm_send("mutex %s 20000", dir);
    assert_true(zkt_wait_children(zh, dir, 2, 10000)); /* ours, Curator's */
    h_sleep_ms(200);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    jvm_expect("GOT", 20000);
    assert_int_equal(dlock_try_acquire(lk), DLOCK_EBUSY);
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    assert_int_equal(dlock_try_acquire(lk), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* mode=rwlock: Curator's InterProcessReadWriteLock. */
static void curator__rwlock_readers_and_writers(void **state)
{
    const char *name = h_name("rw");
    dlock_client *c = h_client(h_uri_with("lease=3s&mode=rwlock"));
    dlock_lock *r, *w;
    char dir[256];

    (void)state;
    assert_non_null(c);
    r = h_lock(c, name, 0, DLOCK_LOCK_SHARED);
    w = h_lock(c, name, 0, 0);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    /* A dlock reader: Curator's readers share, its writer waits. */
    assert_int_equal(dlock_acquire(r, 5000), DLOCK_OK);
    jvm_send("write %s 300", dir);
    jvm_expect("BUSY", 10000);
    jvm_send("read %s 5000", dir);
    jvm_expect("GOT", 10000);
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    assert_int_equal(dlock_release(r), DLOCK_OK);
    /* A Curator writer: dlock's reader and writer wait. */
    jvm_send("write %s 5000", dir);
    jvm_expect("GOT", 10000);
    assert_int_equal(dlock_try_acquire(r), DLOCK_EBUSY);
    assert_int_equal(dlock_try_acquire(w), DLOCK_EBUSY);
    curator_release_wakes(r, dir, 2);
    /* A Curator reader joins the dlock reader. */
    jvm_send("read %s 5000", dir);
    jvm_expect("GOT", 10000);
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    assert_int_equal(dlock_release(r), DLOCK_OK);
    assert_true(zkt_wait_children(zh, dir, 0, 5000));
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_close(c);
}

/* Default mode: a dlock reader's node ("__READ__lock-") is a contender to
 * Curator's InterProcessMutex, which waits for it. */
static void curator__mutex_waits_for_dlock_reader(void **state)
{
    const char *name = h_name("reader");
    dlock_client *c = h_client(h_uri_with("lease=3s"));
    dlock_lock *r;
    char dir[256];

    (void)state;
    assert_non_null(c);
    r = h_lock(c, name, 0, DLOCK_LOCK_SHARED);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    assert_int_equal(dlock_acquire(r, 5000), DLOCK_OK);
    jvm_send("mutex %s 300", dir);
    jvm_expect("BUSY", 10000);
    assert_int_equal(dlock_release(r), DLOCK_OK);
    jvm_send("mutex %s 5000", dir);
    jvm_expect("GOT", 10000);
    /* And the reader waits for Curator's mutex. */
    assert_int_equal(dlock_try_acquire(r), DLOCK_EBUSY);
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    assert_int_equal(dlock_try_acquire(r), DLOCK_OK);
    assert_int_equal(dlock_release(r), DLOCK_OK);
    dlock_lock_free(r);
    dlock_client_close(c);
}

/* Every lease node under leases is named as Curator's protected mode
 * names them, "_c_<uuid>-lease-<seq>"; returns how many there are. */
static int lease_nodes(const char *leases)
{
    struct String_vector v;
    int n = zkt_children(zh, leases, &v);

    for (int i = 0; i < n; i++) {
        const char *e = v.data[i];
        assert_true(strncmp(e, "_c_", 3) == 0 && strlen(e) == 3 + 36 + 17);
        assert_memory_equal(e + 39, "-lease-", 7);
    }
    if (n > 0)
        deallocate_String_vector(&v);
    return n;
}

/* A semaphore of 2 permits shared by Curator's InterProcessSemaphoreV2 and
 * dlock (mode mutex): each counts the other's leases, and a release on
 * either side wakes a waiter on the other. */
static void curator__semaphore_counts_both_ways(void **state)
{
    const char *name = h_name("sem");
    dlock_client *c = h_client(h_uri_with("lease=3s"));
    dlock_lock *a, *b;
    dlock_state st = DLOCK_STATE_INIT;
    char dir[256], leases[300], locks[300];

    (void)state;
    assert_non_null(c);
    a = h_permit(c, name, 0, 2);
    b = h_permit(c, name, 0, 2);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    snprintf(leases, sizeof leases, "%s/leases", dir);
    snprintf(locks, sizeof locks, "%s/locks", dir);
    /* Curator takes both leases: dlock is refused, and leaves nothing. */
    jvm_send("sem %s 2 5000", dir);
    jvm_expect("GOT", 20000);
    jvm_send("sem %s 2 5000", dir);
    jvm_expect("GOT", 10000);
    assert_int_equal(dlock_try_acquire(a), DLOCK_EBUSY);
    assert_int_equal(dlock_acquire(a, 300), DLOCK_ETIMEDOUT);
    assert_int_equal(lease_nodes(leases), 2);
    assert_int_equal(zkt_children(zh, locks, NULL), 0);
    assert_int_equal(dlock_inspect(c, name, &st), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_string_equal(st.owner, "(2 leases of a semaphore)");
    assert_int_equal(st.waiters, 0);
    /* A dlock waiter (its lease node counted, the mutex held) gets the
     * lease Curator returns. */
    curator_release_wakes(a, leases, 3);
    /* Curator returns its other lease; dlock takes it: dlock holds both,
     * and Curator's timed acquire fails. */
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    assert_int_equal(dlock_try_acquire(b), DLOCK_OK);
    assert_true(dlock_fence(b) > dlock_fence(a));
    assert_int_equal(lease_nodes(leases), 2);
    jvm_send("sem %s 2 300", dir);
    jvm_expect("BUSY", 10000);
    assert_int_equal(lease_nodes(leases), 2);
    /* A Curator waiter gets the permit dlock returns. */
    jvm_send("sem %s 2 20000", dir);
    assert_true(zkt_wait_children(zh, leases, 3, 10000));
    assert_int_equal(dlock_release(a), DLOCK_OK);
    jvm_expect("GOT", 10000);
    assert_int_equal(dlock_try_acquire(a), DLOCK_EBUSY);
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    assert_true(zkt_wait_children(zh, leases, 0, 5000));
    assert_int_equal(zkt_children(zh, locks, NULL), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
}

/* ---- Curator's LeaderLatch and dlock's elections (issue 14) --------------- */

/* What a dlock candidate heard (on_change). */
struct heard {
    int gained, lost;
};

static void heard_change(dlock_election *e, int is_leader, uint64_t term,
                         const char *why, void *payload)
{
    struct heard *h = payload;

    (void)e;
    (void)term;
    fprintf(stderr, "  dlock elect: %s (%s)\n", is_leader ? "leader" : "not",
            why);
    if (is_leader)
        h->gained++;
    else
        h->lost++;
}

static dlock_election *candidate(dlock_client *c, const char *name,
                                 const char *id, struct heard *h)
{
    dlock_elect_options o = DLOCK_ELECT_OPTIONS_INIT;
    dlock_election *e = NULL;

    o.id = id;
    o.on_change = heard_change;
    o.payload = h;
    assert_int_equal(dlock_elect_new(&e, c, name, &o), DLOCK_OK);
    assert_int_equal(dlock_elect_join(e), DLOCK_OK);
    return e;
}

/* Exactly one node of dlock's under dir is a LeaderLatch node,
 * "_c_<uuid>-latch-<10 digits>", and its data is id. */
static void expect_latch_node(const char *dir, const char *id)
{
    struct String_vector v = {0, NULL};
    int found = 0;

    assert_true(zkt_children(zh, dir, &v) >= 0);
    for (int32_t i = 0; i < v.count; i++) {
        char path[512], data[256];
        int len = sizeof data;
        const char *n = v.data[i], *l = strstr(n, "-latch-");

        if (l == NULL || strncmp(n, "_c_", 3) != 0 || l - n != 3 + 36 ||
            strlen(l + 7) != 10)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (zoo_get(zh, path, 0, data, &len, NULL) == ZOK &&
            len == (int)strlen(id) && memcmp(data, id, (size_t)len) == 0)
            found++;
    }
    deallocate_String_vector(&v);
    assert_int_equal(found, 1);
}

/* A Java LeaderLatch and a dlock candidate in one election: one leader at
 * a time, hand-over both ways, and each sees the other's id. */
static void curator__latch_hand_over_both_ways(void **state)
{
    const char *name = h_name("latch");
    dlock_client *c = h_client(h_uri_with("lease=3s"));
    struct heard h = {0, 0};
    dlock_election *e;
    char dir[256];

    (void)state;
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    jvm_send("latch-join %s java-1", dir);
    jvm_expect("JOINED", 10000);
    jvm_send("latch-await 10000");
    jvm_expect("LEADER", 20000);
    e = candidate(c, name, "dlock-1", &h);
    assert_int_equal(dlock_elect_await(e, 500), DLOCK_ETIMEDOUT);
    assert_false(dlock_elect_is_leader(e));
    assert_true(zkt_wait_children(zh, dir, 2, 10000));
    expect_latch_node(dir, "dlock-1");
    jvm_send("latch-leader");
    jvm_expect("ID java-1", 10000);
    /* Java leaves: dlock leads. */
    jvm_send("latch-close");
    jvm_expect("CLOSED", 10000);
    assert_int_equal(dlock_elect_await(e, 10000), DLOCK_OK);
    assert_true(dlock_elect_term(e) > 0);
    /* A new Java latch follows, and names dlock's candidate as leader. */
    jvm_send("latch-join %s java-2", dir);
    jvm_expect("JOINED", 10000);
    jvm_send("latch-await 300");
    jvm_expect("FOLLOWER", 10000);
    jvm_send("latch-leader");
    jvm_expect("ID dlock-1", 10000);
    /* dlock resigns: Java leads. */
    assert_int_equal(dlock_elect_resign(e), DLOCK_OK);
    assert_false(dlock_elect_is_leader(e));
    jvm_send("latch-await 10000");
    jvm_expect("LEADER", 20000);
    jvm_send("latch-close");
    jvm_expect("CLOSED", 10000);
    assert_int_equal(h.gained, 1);
    assert_int_equal(h.lost, 1); /* "resigned" */
    dlock_elect_free(e);
    dlock_client_close(c);
}

/* The case of CURATOR-653/620: the leader's connection is cut and comes
 * back within its session. It keeps its one node and its term, a Java
 * latch never leads meanwhile, and no second node of dlock's appears. */
static void curator__latch_leader_survives_reconnect(void **state)
{
    const char *name = h_name("latch-cut");
    struct zkt_proxy *px = zkt_proxy_start(zkt_port(base_uri));
    struct heard h = {0, 0};
    dlock_client *c;
    dlock_election *e;
    char dir[256], uri[256];
    uint64_t term;

    (void)state;
    assert_non_null(px);
    snprintf(uri, sizeof uri, "zk://127.0.0.1:%d?lease=3s",
             zkt_proxy_port(px));
    c = h_client(uri);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    e = candidate(c, name, "dlock-r", &h);
    assert_int_equal(dlock_elect_await(e, 10000), DLOCK_OK);
    term = dlock_elect_term(e);
    jvm_send("latch-join %s java-r", dir);
    jvm_expect("JOINED", 10000);
    /* Cut at the next renewal (an exists), after the server answered. */
    zkt_proxy_arm(px, 3, true);
    for (int64_t end = h_now_ms() + 10000;
         zkt_proxy_cuts(px) == 0 && h_now_ms() < end;)
        h_sleep_ms(20);
    assert_true(zkt_proxy_cuts(px) > 0);
    jvm_send("latch-await 1500");
    jvm_expect("FOLLOWER", 10000);
    assert_int_equal(dlock_elect_await(e, 10000), DLOCK_OK);
    assert_int_equal(dlock_elect_term(e), term);
    assert_int_equal(h.lost, 0);
    assert_int_equal(zkt_children(zh, dir, NULL), 2);
    expect_latch_node(dir, "dlock-r");
    jvm_send("latch-leader");
    jvm_expect("ID dlock-r", 10000);
    dlock_elect_free(e);
    jvm_send("latch-await 10000");
    jvm_expect("LEADER", 20000);
    jvm_send("latch-close");
    jvm_expect("CLOSED", 10000);
    dlock_client_close(c);
    zkt_proxy_stop(px);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curator__mutex_holds_dlock_waits),
        cmocka_unit_test(curator__dlock_holds_curator_waits),
        cmocka_unit_test(curator__rwlock_readers_and_writers),
        cmocka_unit_test(curator__mutex_waits_for_dlock_reader),
        cmocka_unit_test(curator__semaphore_counts_both_ways),
        cmocka_unit_test(curator__latch_hand_over_both_ways),
        cmocka_unit_test(curator__latch_leader_survives_reconnect),
    };
    int failed;

    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--java") == 0)
            java_bin = argv[i + 1];
        else if (strcmp(argv[i], "--cp") == 0)
            java_cp = argv[i + 1];
    }
    if (java_bin == NULL || java_cp == NULL) {
        fprintf(stderr, "usage: %s --uri URI --java JAVA --cp CLASSPATH "
                        "(run it through curator_interop.sh)\n",
                argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    base_uri = h_setup(argc, argv);
    failed = cmocka_run_group_tests_name("zk-curator", tests, group_setup,
                                         group_teardown);
    h_cleanup();
    return failed;
}
