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
 * mode a dlock reader, whose node Curator's mutex sorts like its own.
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

/* ---- the cases ----------------------------------------------------------- */

/* Curator's InterProcessMutex holds; dlock fails to get it, queues, and
 * gets it when Curator releases; then Curator fails while dlock holds. */
static void curator__mutex_holds_dlock_waits(void **state)
{
    const char *name = h_name("curator-holds");
    dlock_client *c = h_client(h_uri_with("lease=3s"));
    dlock_lock *lk;
    struct zkt_bg_acquire bg;
    pthread_t t;
    char dir[256];

    (void)state;
    assert_non_null(c);
    lk = h_lock(c, name, 0, 0);
    snprintf(dir, sizeof dir, "/dlock/%s", name);
    jvm_send("mutex %s 5000", dir);
    jvm_expect("GOT", 20000);
    assert_int_equal(dlock_try_acquire(lk), DLOCK_EBUSY);
    assert_int_equal(dlock_acquire(lk, 300), DLOCK_ETIMEDOUT);
    bg = (struct zkt_bg_acquire){lk, 20000, -100};
    pthread_create(&t, NULL, zkt_bg_acquire, &bg);
    assert_true(zkt_wait_children(zh, dir, 2, 10000)); /* Curator's, ours */
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    pthread_join(t, NULL);
    assert_int_equal(bg.rc, DLOCK_OK);
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
    struct zkt_bg_acquire bg;
    pthread_t t;
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
    bg = (struct zkt_bg_acquire){r, 20000, -100};
    pthread_create(&t, NULL, zkt_bg_acquire, &bg);
    assert_true(zkt_wait_children(zh, dir, 2, 10000));
    jvm_send("release");
    jvm_expect("RELEASED", 10000);
    pthread_join(t, NULL);
    assert_int_equal(bg.rc, DLOCK_OK);
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

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curator__mutex_holds_dlock_waits),
        cmocka_unit_test(curator__dlock_holds_curator_waits),
        cmocka_unit_test(curator__rwlock_readers_and_writers),
        cmocka_unit_test(curator__mutex_waits_for_dlock_reader),
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
