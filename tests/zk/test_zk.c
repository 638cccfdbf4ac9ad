/*
 * test_zk.c: what the zk:// backend promises beyond the conformance suite,
 * against one real ZooKeeper server (`test_zk --uri $DLOCK_TEST_ZK_URI`,
 * run under tests/servers/with-servers.sh zk). The nodes dlock leaves are
 * checked with the bare C client; faults come from ctl.sh (stop, pause)
 * and from signals to holder processes.
 *
 * Timing bounds are generous: they check that things happen, in which
 * order, and that nothing happens too EARLY (a lock freed before the
 * session timeout would be a bug); never how fast.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../conformance/harness.h"
#include "dlock/backend.h" /* dlock_bench_floor */
#include "zkt.h"

#define SLACK_MS 2000

static const char *base_uri;
static zhandle_t *zh; /* the bare client, to look at the server */

static int group_setup(void **state)
{
    (void)state;
    zh = zkt_connect(zkt_hosts(base_uri));
    return zh != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (zh != NULL)
        zookeeper_close(zh);
    return 0;
}

/* A client on base_uri plus params, logging into zkt's buffer. */
static dlock_client *client(const char *params)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;
    char uri[4096];

    snprintf(uri, sizeof uri, "%s", h_uri_with(params));
    o.log = zkt_log;
    o.log_level = DLOCK_LOG_INFO;
    if (dlock_client_open(&c, uri, &o) != DLOCK_OK) {
        fprintf(stderr, "open %s: %s\n", uri, dlock_client_errmsg(c));
        dlock_client_close(c);
        return NULL;
    }
    return c;
}

/* Read one line from fd (a pipe from a child), waiting at most timeout_ms. */
static void read_line(int fd, char *buf, size_t cap, uint32_t timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    size_t n = 0;

    while (n + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = end - h_now_ms();
        char ch;
        if (left <= 0 || poll(&p, 1, (int)left) != 1 || read(fd, &ch, 1) != 1 ||
            ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
}

/* ---- URI parameters ------------------------------------------------------ */

static void expect_bad(const char *uri, const char *needle)
{
    dlock_client *c = NULL;
    int rc = dlock_client_open(&c, uri, NULL);

    if (rc != DLOCK_EINVAL || strstr(dlock_client_errmsg(c), needle) == NULL)
        fail_msg("%s: got %s \"%s\", want EINVAL naming '%s'", uri,
                 dlock_err_name(rc), dlock_client_errmsg(c), needle);
    fprintf(stderr, "  %s -> %s\n", uri, dlock_client_errmsg(c));
    dlock_client_close(c);
}

static void zk__uri_parameters_validated(void **state)
{
    char uri[4096];
    const char *hosts = zkt_hosts(base_uri);
    dlock_client *c = NULL;

    (void)state;
    expect_bad(h_uri_with("session_timeout=abc"), "session_timeout");
    expect_bad(h_uri_with("session_timeout=10ms"), "session_timeout");
    expect_bad(h_uri_with("session_timeout=2h"), "session_timeout");
    /* The session timeout follows lease=; an explicit lease more than
     * twice an explicit session would leave dlock_held() uncovered. */
    expect_bad(h_uri_with("session_timeout=3s&lease=30s"), "lease");
    expect_bad(h_uri_with("base=relative"), "base");
    expect_bad(h_uri_with("base=/a/../b"), "base");
    expect_bad(h_uri_with("base=/a//b"), "base");
    expect_bad(h_uri_with("base=/a/"), "base");
    expect_bad(h_uri_with("base=/tab%09here"), "base");
    expect_bad(h_uri_with("base=/zookeeper/quota"), "/zookeeper");
    expect_bad(h_uri_with("mode=fifo"), "mode");
    expect_bad(h_uri_with("bogus=1"), "bogus");
    snprintf(uri, sizeof uri, "zk://%s/app/./x", hosts);
    expect_bad(uri, "chroot");
    snprintf(uri, sizeof uri, "zk://admin:s3cret@%s", hosts);
    expect_bad(uri, "userinfo");
    dlock_client_open(&c, uri, NULL);
    assert_null(strstr(dlock_client_errmsg(c), "s3cret"));
    dlock_client_close(c);
    /* The alias, and a session timeout the server narrows (its minimum is
     * 1 s here): accepted. */
    snprintf(uri, sizeof uri, "zookeeper://%s?session_timeout=300ms&lease=1s",
             hosts);
    c = h_client(uri);
    assert_non_null(c);
    dlock_client_close(c);
    /* [B-LEASE-1] session_timeout= alone: the lease follows it, rather
     * than the default 30 s being refused as too long. */
    snprintf(uri, sizeof uri, "zk://%s?session_timeout=3s", hosts);
    c = h_client(uri);
    assert_non_null(c);
    dlock_info info = DLOCK_INFO_INIT;
    dlock_client_info(c, &info);
    assert_int_equal(info.lease_ms, 3000);
    dlock_client_close(c);
}

/* chroot + base + namespace + escaped name: where the nodes go. */
static void zk__chroot_base_namespace_layout(void **state)
{
    char uri[4096], dir[512];
    const char *hosts = zkt_hosts(base_uri);
    struct String_vector kids;
    dlock_client *c;
    dlock_lock *lk;

    (void)state;
    snprintf(uri, sizeof uri,
             "zk://%s/app-%d/x?base=/locks&namespace=team%%20a&lease=3s",
             hosts, (int)getpid());
    c = h_client(uri);
    assert_non_null(c);
    lk = h_lock(c, "job/1", 0, 0);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    snprintf(dir, sizeof dir, "/app-%d/x/locks/team%%20a/job%%2F1",
             (int)getpid());
    assert_int_equal(zkt_children(zh, dir, &kids), 1);
    fprintf(stderr, "  %s/%s\n", dir, kids.data[0]);
    deallocate_String_vector(&kids);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(zkt_children(zh, dir, NULL), 0);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* ---- Curator's names, the fence, the data -------------------------------- */

static void check_node(const char *mode, uint32_t flags, const char *pattern)
{
    char params[64], dir[512], path[1024], data[128];
    const char *name = h_name("names");
    struct String_vector kids;
    struct Stat st;
    regex_t re;
    int len = sizeof data - 1;
    dlock_client *c;
    dlock_lock *lk;

    snprintf(params, sizeof params, "lease=3s&mode=%s", mode);
    c = client(params);
    assert_non_null(c);
    lk = h_lock(c, name, 0, flags);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    assert_int_equal(zkt_children(zh, dir, &kids), 1);
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    if (regexec(&re, kids.data[0], 0, NULL, 0) != 0)
        fail_msg("mode %s: node %s does not match %s", mode, kids.data[0],
                 pattern);
    regfree(&re);
    fprintf(stderr, "  mode %s%s: %s\n", mode,
            flags & DLOCK_LOCK_SHARED ? " (shared)" : "", kids.data[0]);
    /* The fence is the node's czxid; the data is the owner id. */
    snprintf(path, sizeof path, "%s/%s", dir, kids.data[0]);
    assert_int_equal(zoo_get(zh, path, 0, data, &len, &st), ZOK);
    data[len] = '\0';
    assert_string_equal(data, dlock_lock_owner(lk));
    assert_true(dlock_fence(lk) == (uint64_t)st.czxid);
    deallocate_String_vector(&kids);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(zkt_children(zh, dir, NULL), 0);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

#define UUID                                                               \
    "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"

static void zk__curator_node_names_and_fence(void **state)
{
    (void)state;
    /* InterProcessMutex: _c_<uuid>-lock-<seq>. */
    check_node("mutex", 0, "^_c_" UUID "-lock-[0-9]{10}$");
    /* A reader in mutex mode: a contender Curator's mutex sorts and waits
     * for, that dlock knows is a reader. */
    check_node("mutex", DLOCK_LOCK_SHARED,
               "^_c_" UUID "-__READ__lock-[0-9]{10}$");
    /* InterProcessReadWriteLock: __WRIT__ and __READ__. */
    check_node("rwlock", 0, "^_c_" UUID "-__WRIT__[0-9]{10}$");
    check_node("rwlock", DLOCK_LOCK_SHARED, "^_c_" UUID "-__READ__[0-9]{10}$");
}

/* ---- names --------------------------------------------------------------- */

/* Every name, however hostile, is ONE node under the base: no '/', no '.'
 * or '..', no control characters, and long names hashed to a bounded
 * length. */
static void zk__hostile_names_one_segment(void **state)
{
    static const char *const names[] = {
        "/", "..", ".", "../../zookeeper", "a/../b", "/abs/path", "new\nline",
        ("nul\x01" "ctrl"), "\x7f", "quote'\"", "{braces}", "%2F", "~tilde",
        "\xe9\x94\x81", "sp ace",
        "_c_00000000-0000-4000-8000-000000000000-lock-",
    };
    size_t n = sizeof names / sizeof names[0];
    char ns[64], params[128], dir[128];
    struct String_vector kids;
    dlock_lock *lk[sizeof names / sizeof names[0] + 1];
    char *big = malloc(10001);
    dlock_client *c;

    (void)state;
    snprintf(ns, sizeof ns, "hostile-%d", (int)getpid());
    snprintf(params, sizeof params, "lease=3s&namespace=%s", ns);
    snprintf(dir, sizeof dir, "/dlock/%s", ns);
    c = client(params);
    assert_non_null(c);
    memset(big, 'z', 10000);
    big[10000] = '\0';
    for (size_t i = 0; i <= n; i++) {
        lk[i] = h_lock(c, i < n ? names[i] : big, 0, 0);
        assert_non_null(lk[i]);
        assert_int_equal(dlock_acquire(lk[i], 5000), DLOCK_OK);
    }
    /* One lock node per name, each a single segment holding one node. */
    assert_int_equal(zkt_children(zh, dir, &kids), (int)n + 1);
    for (int32_t i = 0; i < kids.count; i++) {
        const char *seg = kids.data[i];
        char sub[1024];
        assert_null(strchr(seg, '/'));
        assert_true(strcmp(seg, ".") != 0 && strcmp(seg, "..") != 0);
        assert_true(seg[0] != '.');
        for (const char *p = seg; *p; p++)
            assert_true((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f);
        assert_true(strlen(seg) <= 240);
        snprintf(sub, sizeof sub, "%s/%s", dir, seg);
        assert_int_equal(zkt_children(zh, sub, NULL), 1);
    }
    deallocate_String_vector(&kids);
    for (size_t i = 0; i <= n; i++) {
        assert_int_equal(dlock_release(lk[i]), DLOCK_OK);
        dlock_lock_free(lk[i]);
    }
    /* Nothing escaped the base: the root holds only what it held. */
    assert_int_equal(zoo_exists(zh, "/abs", 0, NULL), ZNONODE);
    assert_int_equal(zoo_exists(zh, "/b", 0, NULL), ZNONODE);
    free(big);
    dlock_client_close(c);
}

/* ---- giving up, and readers behind a writer ------------------------------ */

static void zk__give_up_leaves_no_node(void **state)
{
    const char *name = h_name("giveup");
    dlock_client *a = client("lease=3s"), *b = client("lease=3s");
    dlock_lock *h, *t, *r1, *r2, *w;
    struct zkt_bg_acquire bw;
    pthread_t th;
    char dir[256];
    int64_t t0;

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    h = h_lock(a, name, 0, 0);
    t = h_lock(b, name, 0, 0);
    assert_int_equal(dlock_acquire(h, 0), DLOCK_OK);
    /* A try creates its node, sees it is not first, deletes it. */
    assert_int_equal(dlock_try_acquire(t), DLOCK_EBUSY);
    assert_int_equal(zkt_children(zh, dir, NULL), 1);
    /* A timed acquire waits its time, then deletes its node. */
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(t, 300), DLOCK_ETIMEDOUT);
    assert_true(h_now_ms() - t0 >= 290);
    assert_int_equal(zkt_children(zh, dir, NULL), 1);
    assert_int_equal(dlock_release(h), DLOCK_OK);
    assert_int_equal(zkt_children(zh, dir, NULL), 0);

    /* Fair readers: a reader arriving after a waiting writer queues behind
     * it instead of joining the readers ahead (no writer starvation). */
    r1 = h_lock(a, name, 0, DLOCK_LOCK_SHARED);
    r2 = h_lock(b, name, 0, DLOCK_LOCK_SHARED);
    w = h_lock(b, name, 0, 0);
    assert_int_equal(dlock_acquire(r1, 0), DLOCK_OK);
    bw = (struct zkt_bg_acquire){w, 10000, -100};
    pthread_create(&th, NULL, zkt_bg_acquire, &bw);
    assert_true(zkt_wait_children(zh, dir, 2, 5000)); /* the writer waits */
    assert_int_equal(dlock_try_acquire(r2), DLOCK_EBUSY);
    assert_int_equal(dlock_release(r1), DLOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(bw.rc, DLOCK_OK);
    assert_int_equal(dlock_try_acquire(r2), DLOCK_EBUSY);
    assert_int_equal(dlock_release(w), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(r2), DLOCK_OK);
    assert_int_equal(dlock_release(r2), DLOCK_OK);
    assert_int_equal(zkt_children(zh, dir, NULL), 0);
    dlock_lock_free(h);
    dlock_lock_free(t);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* ---- fairness: 8 processes served in order of arrival -------------------- */

#define FIFO_PROCS 8

/* Child role "fifo NAME INDEX PATH": wait for the lock, append INDEX to
 * PATH while holding it. */
static int fifo_child(char **args)
{
    dlock_client *c = h_client(getenv("DLOCK_URI"));
    dlock_lock *lk = c != NULL ? h_lock(c, args[0], 0, 0) : NULL;
    char line[32];

    if (lk == NULL)
        return 3;
    if (dlock_acquire(lk, 60000) != DLOCK_OK) {
        fprintf(stderr, "fifo child: %s\n", dlock_lock_errmsg(lk));
        return 4;
    }
    snprintf(line, sizeof line, "%s\n", args[1]);
    if (!h_append(args[2], line))
        return 5;
    if (dlock_release(lk) != DLOCK_OK)
        return 6;
    dlock_lock_free(lk);
    dlock_client_close(c);
    return 0;
}

static void zk__fifo_handoff_8_processes(void **state)
{
    const char *name = h_name("fifo");
    dlock_client *c = client("lease=3s");
    dlock_lock *lk;
    pid_t pids[FIFO_PROCS];
    char path[512], idx[16], got[256] = "", want[256] = "";
    dlock_state st = DLOCK_STATE_INIT;
    long before, after;
    int fd, port = zkt_port(base_uri);

    (void)state;
    assert_non_null(c);
    snprintf(path, sizeof path, "%s/order", h_scratch());
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    lk = h_lock(c, name, 0, 0);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    /* Start them one at a time, each once the previous one is queued: the
     * order of arrival is the order of start. */
    for (int i = 0; i < FIFO_PROCS; i++) {
        snprintf(idx, sizeof idx, "%d", i);
        pids[i] = h_spawn("fifo", name, idx, path);
        assert_true(pids[i] > 0);
        int64_t end = h_now_ms() + 20000;
        do {
            assert_int_equal(dlock_inspect(c, name, &st), DLOCK_OK);
            if (st.waiters == i + 1)
                break;
            h_sleep_ms(20);
        } while (h_now_ms() < end);
        assert_int_equal(st.waiters, i + 1);
        snprintf(want + strlen(want), sizeof want - strlen(want), "%d\n", i);
    }
    assert_int_equal(st.held, 1);
    assert_string_equal(st.owner, dlock_lock_owner(lk));
    assert_true(st.fence == dlock_fence(lk));
    before = zkt_mntr(port, "zk_packets_received");
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    for (int i = 0; i < FIFO_PROCS; i++)
        assert_int_equal(h_wait(pids[i]), 0);
    after = zkt_mntr(port, "zk_packets_received");
    assert_true(pread(fd, got, sizeof got - 1, 0) > 0);
    close(fd);
    assert_string_equal(got, want);
    /* No herd: each release wakes the one waiter behind it, which lists the
     * children once. Per hand-off: a delete, a listing, and the closing
     * of the child's session (and its pings); a herd would add a listing
     * and a new watch per remaining waiter (8+7+...+1 more). */
    fprintf(stderr, "  packets received during the 8 hand-offs: %ld\n",
            after - before);
    if (before >= 0 && after >= 0)
        assert_true(after - before < 6 * FIFO_PROCS);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* Waiters watch the node ahead with a watched getData, which sets no watch
 * when that node is already gone (exists() would leave one behind for
 * every such race, for the life of the session). After heavy contention
 * among two long-lived clients, the server holds no watch. */
struct churn {
    dlock_client *c;
    const char *name;
    int failures;
};

static void *churn_thread(void *arg)
{
    struct churn *ch = arg;
    dlock_lock *lk = h_lock(ch->c, ch->name, 0, 0);

    for (int i = 0; i < 150 && lk != NULL; i++) {
        if (dlock_acquire(lk, 30000) != DLOCK_OK ||
            dlock_release(lk) != DLOCK_OK)
            ch->failures++;
    }
    dlock_lock_free(lk);
    return NULL;
}

static void zk__no_watch_left_behind(void **state)
{
    const char *name = h_name("watches");
    dlock_client *a = client("lease=3s"), *b = client("lease=3s");
    struct churn ch[4];
    pthread_t t[4];
    int port = zkt_port(base_uri);
    long watches = -1;

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    for (int i = 0; i < 4; i++) {
        ch[i] = (struct churn){i % 2 ? a : b, name, 0};
        pthread_create(&t[i], NULL, churn_thread, &ch[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(ch[i].failures, 0);
    }
    for (int64_t end = h_now_ms() + 3000; h_now_ms() < end;) {
        watches = zkt_mntr(port, "zk_watch_count");
        if (watches == 0)
            break;
        h_sleep_ms(50);
    }
    fprintf(stderr, "  watches left on the server: %ld\n", watches);
    assert_int_equal(watches, 0);
    dlock_client_close(a);
    dlock_client_close(b);
}

/* ---- a killed holder ----------------------------------------------------- */

/* Child role "hold URI NAME FD": take the lock, write its fence to FD, and
 * wait to be killed. */
static int hold_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock *lk = c != NULL ? h_lock(c, args[1], 0, 0) : NULL;
    char line[32];
    int n;

    if (lk == NULL || dlock_acquire(lk, 10000) != DLOCK_OK)
        return 3;
    n = snprintf(line, sizeof line, "%llu\n",
                 (unsigned long long)dlock_fence(lk));
    if (write(atoi(args[2]), line, (size_t)n) != n)
        return 4;
    for (;;)
        pause();
}

static void zk__sigkill_holder_freed_after_session_timeout(void **state)
{
    const char *name = h_name("killed");
    char uri[4096], line[64];
    struct h_gate gate;
    dlock_client *c;
    dlock_lock *b;
    pid_t pid;
    int64_t t0, took;
    char fd_s[16];

    (void)state;
    snprintf(uri, sizeof uri, "%s", h_uri_with("lease=2s"));
    c = h_client(uri);
    assert_non_null(c);
    b = h_lock(c, name, 0, 0);
    h_gate_init(&gate);
    snprintf(fd_s, sizeof fd_s, "%d", gate.fd[1]);
    pid = h_spawn("hold", uri, name, fd_s);
    read_line(gate.fd[0], line, sizeof line, 30000);
    assert_true(line[0] != '\0');
    assert_int_equal(dlock_try_acquire(b), DLOCK_EBUSY);
    kill(pid, SIGKILL);
    assert_int_equal(h_wait(pid), 128 + SIGKILL);
    t0 = h_now_ms();
    assert_int_equal(dlock_acquire(b, 30000), DLOCK_OK);
    took = h_now_ms() - t0;
    fprintf(stderr, "  freed %lld ms after the kill (session timeout 2 s)\n",
            (long long)took);
    /* Not at once: the server waits for the session to time out (at least
     * 2/3 of it passed since the holder's last heartbeat). */
    assert_true(took >= 1000);
    assert_true(dlock_fence(b) > strtoull(line, NULL, 10));
    assert_int_equal(dlock_release(b), DLOCK_OK);
    dlock_lock_free(b);
    h_gate_close(&gate);
    dlock_client_close(c);
}

/* ---- a paused holder: session expiry loses every lock -------------------- */

static atomic_int child_lost;
static int child_fd;

static void child_on_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    char b = code == DLOCK_ELOST ? 'L' : 'X';
    (void)lk;
    (void)p;
    fprintf(stderr, "  child on_lost: %s\n", why);
    atomic_fetch_add(&child_lost, 1);
    if (write(child_fd, &b, 1) != 1)
        _exit(9);
}

/* Child role "stopped URI NAME FD": hold NAME-a, NAME-b (exclusive) and
 * NAME-c (shared), write NAME-a's fence to FD, then wait until all three
 * are reported lost; exit 0 if dlock_held() is false for each and their
 * release says ELOST. */
static int stopped_child(char **args)
{
    dlock_client *c = h_client(args[0]);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk[3];
    char name[256], line[32];
    int n, bad = 0;

    if (c == NULL)
        return 3;
    child_fd = atoi(args[2]);
    o.on_lost = child_on_lost;
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s-%c", args[1], 'a' + i);
        o.flags = i == 2 ? DLOCK_LOCK_SHARED : 0;
        if (dlock_lock_new(&lk[i], c, name, &o) != DLOCK_OK ||
            dlock_acquire(lk[i], 10000) != DLOCK_OK)
            return 4;
    }
    n = snprintf(line, sizeof line, "%llu\n",
                 (unsigned long long)dlock_fence(lk[0]));
    if (write(child_fd, line, (size_t)n) != n)
        return 5;
    for (int64_t end = h_now_ms() + 60000;
         atomic_load(&child_lost) < 3 && h_now_ms() < end;)
        h_sleep_ms(20);
    if (atomic_load(&child_lost) != 3)
        return 6;
    for (int i = 0; i < 3; i++) {
        if (dlock_held(lk[i]))
            bad = 7;
        if (dlock_release(lk[i]) != DLOCK_ELOST)
            bad = 8;
        dlock_lock_free(lk[i]);
    }
    dlock_client_close(c);
    return bad;
}

static void zk__sigstop_session_expiry_loses_every_lock(void **state)
{
    const char *name = h_name("stopped");
    char uri[4096], line[64], lost[3], full[256];
    struct h_gate gate;
    dlock_client *c;
    dlock_lock *a, *shared_w;
    pid_t pid;
    char fd_s[16];
    size_t n = 0;

    (void)state;
    snprintf(uri, sizeof uri, "%s", h_uri_with("lease=2s"));
    c = h_client(uri);
    assert_non_null(c);
    snprintf(full, sizeof full, "%s-a", name);
    a = h_lock(c, full, 0, 0);
    snprintf(full, sizeof full, "%s-c", name);
    shared_w = h_lock(c, full, 0, 0);
    h_gate_init(&gate);
    snprintf(fd_s, sizeof fd_s, "%d", gate.fd[1]);
    pid = h_spawn("stopped", uri, name, fd_s);
    read_line(gate.fd[0], line, sizeof line, 30000);
    assert_true(line[0] != '\0');
    assert_int_equal(dlock_try_acquire(a), DLOCK_EBUSY);

    /* Stop the holder past its session timeout: its heartbeats stop, the
     * server expires the session and deletes its nodes. */
    kill(pid, SIGSTOP);
    assert_int_equal(dlock_acquire(a, 30000), DLOCK_OK);
    assert_true(dlock_fence(a) > strtoull(line, NULL, 10));
    assert_int_equal(dlock_acquire(shared_w, 30000), DLOCK_OK);
    /* Woken, the holder learns it: every lock of the session is lost. */
    kill(pid, SIGCONT);
    for (int64_t end = h_now_ms() + 20000; n < 3 && h_now_ms() < end;) {
        ssize_t got = read(gate.fd[0], lost + n, 3 - n);
        if (got > 0)
            n += (size_t)got;
        else
            h_sleep_ms(20);
    }
    assert_int_equal(n, 3);
    assert_memory_equal(lost, "LLL", 3);
    assert_int_equal(h_wait(pid), 0);
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_release(shared_w), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(shared_w);
    h_gate_close(&gate);
    dlock_client_close(c);
}

/* ---- a silent server: in doubt, then lost -------------------------------- */

static atomic_int lost_calls;

static void count_lost(dlock_lock *lk, int code, const char *why, void *p)
{
    (void)lk;
    (void)p;
    fprintf(stderr, "  on_lost (%s): %s\n", dlock_err_name(code), why);
    if (code == DLOCK_ELOST)
        atomic_fetch_add(&lost_calls, 1);
}

static void zk__disconnect_in_doubt_then_lost(void **state)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    const char *name = h_name("doubt");
    dlock_client *c = client("lease=3s&timeout=1s");
    dlock_lock *lk = NULL, *again;
    int64_t t0, lost_at = 0;

    (void)state;
    assert_non_null(c);
    o.on_lost = count_lost;
    atomic_store(&lost_calls, 0);
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    assert_int_equal(dlock_acquire(lk, 5000), DLOCK_OK);

    /* A short silence is ridden out: the lock stays held. */
    assert_int_equal(zkt_ctl("pause", "zk", 1), 0);
    h_sleep_ms(1000);
    assert_int_equal(zkt_ctl("resume", "zk", 1), 0);
    h_sleep_ms(1500);
    assert_true(dlock_held(lk));
    assert_int_equal(atomic_load(&lost_calls), 0);

    /* A long one: by the session timeout after the last answer (before
     * the pause) dlock_held() is false, whatever the server has decided
     * meanwhile, and the lock is reported lost. */
    assert_int_equal(zkt_ctl("pause", "zk", 1), 0);
    t0 = h_now_ms();
    h_sleep_ms(3000 + 50);
    assert_false(dlock_held(lk));
    for (int64_t end = t0 + 10000; h_now_ms() < end;) {
        if (atomic_load(&lost_calls) > 0) {
            lost_at = h_now_ms() - t0;
            break;
        }
        h_sleep_ms(20);
    }
    fprintf(stderr, "  reported lost %lld ms into the silence\n",
            (long long)lost_at);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(zkt_ctl("resume", "zk", 1), 0);
    assert_int_equal(dlock_release(lk), DLOCK_ELOST);
    /* The client goes on with a new session. */
    again = h_lock(c, name, 0, 0);
    assert_int_equal(dlock_acquire(again, 15000), DLOCK_OK);
    assert_int_equal(dlock_release(again), DLOCK_OK);
    dlock_lock_free(again);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* ---- a create whose answer is lost --------------------------------------- */

struct resume_later {
    uint32_t after_ms;
};

static void *resume_later(void *arg)
{
    struct resume_later *r = arg;
    h_sleep_ms(r->after_ms);
    zkt_ctl("resume", "zk", 1);
    return NULL;
}

#define ZOO_CREATE2 15 /* the request type of zoo_acreate2 */

/* A client of the same server through the proxy, logging to zkt_log. */
static dlock_client *proxy_client(struct zkt_proxy *px)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;
    char uri[512];

    o.log = zkt_log;
    o.log_level = DLOCK_LOG_INFO;
    snprintf(uri, sizeof uri, "zk://127.0.0.1:%d?lease=3s&timeout=5s",
             zkt_proxy_port(px));
    assert_int_equal(dlock_client_open(&c, uri, &o), DLOCK_OK);
    return c;
}

/*
 * The connection drops right after our create reaches the server (a proxy
 * cuts it): the server made the node, the answer never came. The acquire
 * must find the node again by the uuid in its name and keep it, with its
 * place in the queue: an orphan would block everyone while our session
 * lives. Then the same with the create cut before the server saw it: not
 * found, so made again, once.
 */
static void lost_create(bool applied)
{
    const char *name = h_name(applied ? "lostreply" : "lostcreate");
    struct zkt_proxy *px = zkt_proxy_start(zkt_port(base_uri));
    dlock_client *c, *direct = client("lease=3s");
    dlock_lock *holder, *lk, *late, *probe;
    struct zkt_bg_acquire mine, after;
    pthread_t t1, t2;
    char dir[256];

    assert_non_null(px);
    assert_non_null(direct);
    c = proxy_client(px);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    holder = h_lock(direct, name, 0, 0);
    late = h_lock(direct, name, 0, 0);
    probe = h_lock(direct, name, 0, 0);
    lk = h_lock(c, name, 0, 0);
    zkt_log_reset();

    /* Someone holds it; our create is cut; someone else queues later. */
    assert_int_equal(dlock_acquire(holder, 0), DLOCK_OK);
    zkt_proxy_arm(px, ZOO_CREATE2, applied);
    mine = (struct zkt_bg_acquire){lk, 20000, -100};
    pthread_create(&t1, NULL, zkt_bg_acquire, &mine);
    for (int64_t end = h_now_ms() + 10000;
         zkt_proxy_cuts(px) == 0 && h_now_ms() < end;)
        h_sleep_ms(10);
    assert_int_equal(zkt_proxy_cuts(px), 1);
    assert_true(zkt_wait_children(zh, dir, 2, 10000)); /* holder + ours */
    for (int64_t end = h_now_ms() + 10000;
         !zkt_logged(applied ? "found our node" : "was lost") &&
         h_now_ms() < end;)
        h_sleep_ms(10);
    after = (struct zkt_bg_acquire){late, 20000, -100};
    pthread_create(&t2, NULL, zkt_bg_acquire, &after);
    assert_true(zkt_wait_children(zh, dir, 3, 10000));

    /* Hand-off: ours first (it kept its place), then the late one. */
    assert_int_equal(dlock_release(holder), DLOCK_OK);
    pthread_join(t1, NULL);
    assert_int_equal(mine.rc, DLOCK_OK);
    assert_true(zkt_logged("was lost"));
    if (applied)
        assert_true(zkt_logged("found our node"));
    else
        assert_false(zkt_logged("found our node"));
    assert_int_equal(zkt_children(zh, dir, NULL), 2); /* ours + late */
    assert_int_equal(dlock_try_acquire(probe), DLOCK_EBUSY);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    pthread_join(t2, NULL);
    assert_int_equal(after.rc, DLOCK_OK);
    assert_int_equal(dlock_release(late), DLOCK_OK);
    /* Nothing of ours stays behind. */
    assert_true(zkt_wait_children(zh, dir, 0, 10000));
    dlock_lock_free(holder);
    dlock_lock_free(late);
    dlock_lock_free(probe);
    dlock_lock_free(lk);
    dlock_client_close(c);
    dlock_client_close(direct);
    zkt_proxy_stop(px);
}

static void zk__lost_create_reply_found_again(void **state)
{
    (void)state;
    lost_create(true);
}

static void zk__lost_create_not_applied_made_once(void **state)
{
    (void)state;
    lost_create(false);
}

/*
 * CURATOR-315 on dlock's side: the answer to creating a semaphore's lease
 * node is lost (the proxy lets the mutex node's create through and cuts
 * the connection after the lease node's). The acquire finds its lease
 * node again by the uuid in its name and holds with it: no second node,
 * no orphan counted against the permits.
 */
static void zk__lost_lease_create_no_orphan(void **state)
{
    const char *name = h_name("lostlease");
    struct zkt_proxy *px = zkt_proxy_start(zkt_port(base_uri));
    dlock_client *c, *direct = client("lease=3s");
    dlock_lock *holder, *lk, *probe;
    char leases[300], locks[300];

    (void)state;
    assert_non_null(px);
    assert_non_null(direct);
    c = proxy_client(px);
    snprintf(leases, sizeof leases, "/dlock/%s/leases", name);
    snprintf(locks, sizeof locks, "/dlock/%s/locks", name);
    holder = h_permit(direct, name, 0, 2);
    probe = h_permit(direct, name, 0, 2);
    lk = h_permit(c, name, 0, 2);
    zkt_log_reset();

    assert_int_equal(dlock_acquire(holder, 5000), DLOCK_OK);
    zkt_proxy_arm_after(px, ZOO_CREATE2, true, 1);
    assert_int_equal(dlock_acquire(lk, 20000), DLOCK_OK);
    assert_int_equal(zkt_proxy_cuts(px), 1);
    assert_true(zkt_logged("found our node"));
    assert_int_equal(zkt_children(zh, leases, NULL), 2); /* holder + ours */
    assert_int_equal(dlock_try_acquire(probe), DLOCK_EBUSY);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_true(zkt_wait_children(zh, leases, 1, 10000));
    assert_int_equal(dlock_try_acquire(probe), DLOCK_OK);
    assert_int_equal(dlock_release(probe), DLOCK_OK);
    assert_int_equal(dlock_release(holder), DLOCK_OK);
    assert_true(zkt_wait_children(zh, leases, 0, 10000));
    assert_int_equal(zkt_children(zh, locks, NULL), 0);
    dlock_lock_free(holder);
    dlock_lock_free(probe);
    dlock_lock_free(lk);
    dlock_client_close(c);
    dlock_client_close(direct);
    zkt_proxy_stop(px);
}

/* A permit waiter on a thread of its own, cancellable. */
struct permit_waiter {
    dlock_lock *lk;
    dlock_cancel *cx;
    int rc;
    int64_t done_ms;
};

static void *permit_wait_thread(void *arg)
{
    struct permit_waiter *w = arg;

    w->rc = dlock_acquire_cancellable(w->lk, 30000, w->cx);
    w->done_ms = h_now_ms();
    return NULL;
}

/* Cancel a permit waiter and see it return DLOCK_ECANCELED promptly. */
static void permit_cancel(struct permit_waiter *w, pthread_t t)
{
    int64_t fired = h_now_ms();

    dlock_cancel_fire(w->cx);
    pthread_join(t, NULL);
    assert_int_equal(w->rc, DLOCK_ECANCELED);
    fprintf(stderr, "  cancelled in %lld ms\n",
            (long long)(w->done_ms - fired));
    assert_true(w->done_ms - fired < 1000);
}

/*
 * [B-CANCEL-1] on a semaphore of 1: the waiter holding the semaphore's
 * mutex (its lease node counted, watching leases) and the one queued
 * behind it in locks are cancelled in turn. Each returns at once and
 * takes its nodes along; the second moves up to the mutex in between. No
 * node and no watch stays on the server.
 */
static void zk__permit_waiters_cancelled(void **state)
{
    const char *name = h_name("semcancel");
    dlock_client *c = client("lease=3s");
    struct permit_waiter w[2];
    pthread_t t[2];
    dlock_lock *holder;
    char leases[300], locks[300];
    long watches = -1;

    (void)state;
    assert_non_null(c);
    snprintf(leases, sizeof leases, "/dlock/%s/leases", name);
    snprintf(locks, sizeof locks, "/dlock/%s/locks", name);
    holder = h_permit(c, name, 0, 1);
    assert_int_equal(dlock_acquire(holder, 5000), DLOCK_OK);
    for (int i = 0; i < 2; i++) {
        w[i] = (struct permit_waiter){h_permit(c, name, 0, 1), NULL, -100, 0};
        assert_int_equal(dlock_cancel_new(&w[i].cx), DLOCK_OK);
    }
    pthread_create(&t[0], NULL, permit_wait_thread, &w[0]);
    assert_true(zkt_wait_children(zh, leases, 2, 10000));
    pthread_create(&t[1], NULL, permit_wait_thread, &w[1]);
    assert_true(zkt_wait_children(zh, locks, 2, 10000));
    permit_cancel(&w[0], t[0]);
    assert_true(zkt_wait_children(zh, locks, 1, 10000));
    assert_true(zkt_wait_children(zh, leases, 2, 10000)); /* w[1]'s now */
    permit_cancel(&w[1], t[1]);
    assert_true(zkt_wait_children(zh, locks, 0, 10000));
    assert_int_equal(zkt_children(zh, leases, NULL), 1);
    assert_int_equal(dlock_release(holder), DLOCK_OK);
    assert_true(zkt_wait_children(zh, leases, 0, 10000));
    for (int64_t end = h_now_ms() + 3000; h_now_ms() < end;) {
        watches = zkt_mntr(zkt_port(base_uri), "zk_watch_count");
        if (watches == 0)
            break;
        h_sleep_ms(50);
    }
    assert_int_equal(watches, 0);
    for (int i = 0; i < 2; i++) {
        dlock_lock_free(w[i].lk);
        dlock_cancel_free(w[i].cx);
    }
    dlock_lock_free(holder);
    dlock_client_close(c);
}

/* ---- a server that is down or paused: ECONNECT within timeout= ----------- */

static void zk__server_down_econnect_within_timeout(void **state)
{
    const char *name = h_name("down");
    char uri[4096], dir[256], held_name[128], held_dir[256];
    dlock_lock *held;
    dlock_client *c = client("lease=3s&timeout=1s"), *late = NULL;
    dlock_lock *lk;
    struct resume_later r = {1500};
    pthread_t th;
    int64_t t0;
    int rc;

    (void)state;
    assert_non_null(c);
    snprintf(uri, sizeof uri, "%s", h_uri_with("lease=3s&timeout=1s"));
    lk = h_lock(c, name, 0, 0);
    snprintf(held_name, sizeof held_name, "%s-held", name);
    snprintf(held_dir, sizeof held_dir, "/dlock/%s", held_name);
    held = h_lock(c, held_name, 0, DLOCK_LOCK_NO_WATCHDOG);
    assert_int_equal(dlock_acquire(held, 5000), DLOCK_OK);
    assert_int_equal(zkt_ctl("stop", "zk", 1), 0);

    /* A release while disconnected does not wait: the node goes when the
     * session is back (or with the session). */
    t0 = h_now_ms();
    assert_int_equal(dlock_release(held), DLOCK_ECONNECT);
    fprintf(stderr, "  down, release: %lld ms: %s\n",
            (long long)(h_now_ms() - t0), dlock_lock_errmsg(held));
    assert_true(h_now_ms() - t0 < SLACK_MS);

    t0 = h_now_ms();
    rc = dlock_try_acquire(lk);
    fprintf(stderr, "  down, try: %s (%lld ms): %s\n", dlock_err_name(rc),
            (long long)(h_now_ms() - t0), dlock_lock_errmsg(lk));
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 < 1000 + SLACK_MS);
    assert_non_null(strstr(dlock_lock_errmsg(lk), "ZooKeeper"));
    t0 = h_now_ms();
    rc = dlock_acquire(lk, 1500);
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 >= 1400);
    assert_true(h_now_ms() - t0 < 1500 + 1000 + SLACK_MS);
    t0 = h_now_ms();
    assert_int_equal(dlock_client_open(&late, uri, NULL), DLOCK_ECONNECT);
    fprintf(stderr, "  down, open: %s\n", dlock_client_errmsg(late));
    assert_true(h_now_ms() - t0 < 1000 + SLACK_MS);
    dlock_client_close(late);

    assert_int_equal(zkt_ctl("start", "zk", 1), 0);
    assert_int_equal(dlock_acquire(lk, 20000), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_true(zkt_wait_children(zh, held_dir, 0, 10000));
    dlock_lock_free(held);

    /* Paused: the client still thinks it is connected; the create gets no
     * answer within timeout=, and the node it may have made is deleted
     * once the server answers again. */
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    assert_int_equal(zkt_ctl("pause", "zk", 1), 0);
    pthread_create(&th, NULL, resume_later, &r);
    t0 = h_now_ms();
    rc = dlock_try_acquire(lk);
    fprintf(stderr, "  paused, try: %s (%lld ms): %s\n", dlock_err_name(rc),
            (long long)(h_now_ms() - t0), dlock_lock_errmsg(lk));
    assert_int_equal(rc, DLOCK_ECONNECT);
    assert_true(h_now_ms() - t0 < 1000 + SLACK_MS);
    pthread_join(th, NULL);
    assert_true(zkt_wait_children(zh, dir, 0, 10000));
    assert_int_equal(dlock_acquire(lk, 10000), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* ---- the raw floor ------------------------------------------------------- */

static void zk__floor_runs(void **state)
{
    uint64_t ns[20];
    char err[512] = "";
    const char *name = h_name("floor");
    char dir[256];

    (void)state;
    assert_int_equal(dlock_bench_floor(h_uri_with("lease=3s"), name, 20, ns,
                                       err, sizeof err),
                     DLOCK_OK);
    for (int i = 0; i < 20; i++)
        assert_true(ns[i] > 0);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    assert_int_equal(zkt_children(zh, dir, NULL), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zk__uri_parameters_validated),
        cmocka_unit_test(zk__chroot_base_namespace_layout),
        cmocka_unit_test(zk__curator_node_names_and_fence),
        cmocka_unit_test(zk__hostile_names_one_segment),
        cmocka_unit_test(zk__give_up_leaves_no_node),
        cmocka_unit_test(zk__fifo_handoff_8_processes),
        cmocka_unit_test(zk__no_watch_left_behind),
        cmocka_unit_test(zk__sigkill_holder_freed_after_session_timeout),
        cmocka_unit_test(zk__sigstop_session_expiry_loses_every_lock),
        cmocka_unit_test(zk__floor_runs),
        cmocka_unit_test(zk__lost_create_reply_found_again),
        cmocka_unit_test(zk__lost_create_not_applied_made_once),
        cmocka_unit_test(zk__lost_lease_create_no_orphan),
        cmocka_unit_test(zk__permit_waiters_cancelled),
        /* These stop or pause the server: last. */
        cmocka_unit_test(zk__disconnect_in_doubt_then_lost),
        cmocka_unit_test(zk__server_down_econnect_within_timeout),
    };
    static const struct h_role roles[] = {
        {"fifo", fifo_child},
        {"hold", hold_child},
        {"stopped", stopped_child},
        {NULL, NULL},
    };
    int failed;

    h_child_dispatch(argc, argv, roles);
    base_uri = h_setup(argc, argv);
    failed = cmocka_run_group_tests_name("zk", tests, group_setup,
                                         group_teardown);
    h_cleanup();
    return failed;
}
