/*
 * test_file.c: what is particular to the file:// backend: the fencing
 * counter lives in the lock file and survives clients, lock files have safe
 * names and private modes, inspect reads holder and fence, a fork after
 * acquiring does not keep the lock past release, the raw floor runs, a
 * semaphore's count is stored in its file, and a release hands the lock
 * to a waiting process (wait.c) without letting a stopped one hold
 * anybody up.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlock/backend.h" /* dlock_bench_floor */

static char dir[64];
static char uri[128];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dlock-file-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(uri, sizeof uri, "file://%s/locks", dir);
    /* file:// makes lock files, not their directory. */
    return mkdir(strchr(uri + 7, '/'), 0700);
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

/* A handle with these flags, or one permit of a semaphore of permits. */
static dlock_lock *new_handle(dlock_client *c, const char *name,
                              uint32_t flags, uint32_t permits)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.flags = flags;
    o.permits = permits;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
}

static dlock_lock *new_lock_flags(dlock_client *c, const char *name,
                                  uint32_t flags)
{
    return new_handle(c, name, flags, 0);
}

static dlock_lock *new_permit(dlock_client *c, const char *name,
                              uint32_t permits)
{
    return new_handle(c, name, 0, permits);
}

static dlock_lock *new_lock(dlock_client *c, const char *name)
{
    return new_lock_flags(c, name, 0);
}

static void file__fence_survives_clients(void **state)
{
    dlock_client *c = NULL;
    dlock_lock *lk;
    uint64_t first;

    (void)state;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    lk = new_lock(c, "fence");
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    first = dlock_fence(lk);
    assert_true(first >= 1);
    dlock_lock_free(lk);
    dlock_client_close(c);

    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    lk = new_lock(c, "fence");
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_fence(lk), first + 1);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

static void file__lock_files_are_safe_and_private(void **state)
{
    static const char *const names[] = {"../escape", "/abs", "a b", ".",
                                        "..", "x\ny", ".hidden"};
    dlock_client *c = NULL;
    char path[256];
    struct dirent *e;
    DIR *d;
    int files = 0;

    (void)state;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        dlock_lock *lk = new_lock(c, names[i]);
        assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        dlock_lock_free(lk);
    }
    dlock_client_close(c);
    /* Nothing escaped the directory. */
    snprintf(path, sizeof path, "%s/escape.lock", dir);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/locks", dir);
    d = opendir(path);
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        char full[600];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        assert_true(e->d_name[0] != '.');
        assert_int_equal(strspn(e->d_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "abcdefghijklmnopqrstuvwxyz"
                                           "0123456789%._-~"),
                         strlen(e->d_name));
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        assert_int_equal(stat(full, &st), 0);
        assert_int_equal(st.st_mode & 0077, 0);
        files++;
    }
    closedir(d);
    assert_int_equal(files, sizeof names / sizeof names[0]);
}

static void file__inspect_reports_holder(void **state)
{
    dlock_client *c = NULL;
    dlock_lock *lk;
    dlock_state st = DLOCK_STATE_INIT;

    (void)state;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    lk = new_lock(c, "inspect");
    assert_int_equal(dlock_inspect(c, "inspect", &st), DLOCK_OK);
    assert_int_equal(st.held, 0);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_inspect(c, "inspect", &st), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_string_equal(st.owner, dlock_lock_owner(lk));
    assert_int_equal(st.fence, dlock_fence(lk));
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(dlock_inspect(c, "", &st), DLOCK_EINVAL);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* The file stores a semaphore's count: another count is refused while a
 * permit is held, and replaces the stored one once none is; inspect counts
 * the holders. */
static void file__semaphore_count_is_stored(void **state)
{
    dlock_client *c = NULL;
    dlock_lock *a, *b, *third, *other;
    dlock_state st = DLOCK_STATE_INIT;

    (void)state;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    a = new_permit(c, "sem", 2);
    b = new_permit(c, "sem", 2);
    third = new_permit(c, "sem", 2);
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(b, 0), DLOCK_OK);
    assert_true(dlock_fence(b) > dlock_fence(a));
    assert_int_equal(dlock_acquire(third, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_inspect(c, "sem", &st), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_string_equal(st.owner, "(2 of 2 permits held)");
    assert_int_equal(st.fence, dlock_fence(b));
    other = new_permit(c, "sem", 3);
    assert_int_equal(dlock_acquire(other, 0), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(other), "permits: 3 asked"));
    assert_non_null(strstr(dlock_lock_errmsg(other), "has 2 permits"));
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_acquire(third, 0), DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    assert_int_equal(dlock_release(third), DLOCK_OK);
    assert_int_equal(dlock_inspect(c, "sem", &st), DLOCK_OK);
    assert_int_equal(st.held, 0);
    assert_string_equal(st.owner, "");
    /* None held: the new count replaces the old. */
    assert_int_equal(dlock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_inspect(c, "sem", &st), DLOCK_OK);
    assert_string_equal(st.owner, "(1 of 3 permits held)");
    assert_int_equal(dlock_release(other), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(third);
    dlock_lock_free(other);
    dlock_client_close(c);
}

/* A contender stopped while it holds byte 1 (the few system calls of a
 * permit attempt, or of a reader's fence) makes the others busy; it does
 * not hang them past their deadline. Readers waited for it in the kernel
 * (F_OFD_SETLKW) before, and hung for as long as it stayed stopped. */
static void file__semaphore_gate_never_hangs(void **state)
{
    dlock_client *c = NULL;
    dlock_lock *lk;
    struct flock fl;
    char path[160];
    int fd;

    (void)state;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    lk = new_permit(c, "gate", 2);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    snprintf(path, sizeof path, "%s/gate.lock", strchr(uri + 7, '/'));
    fd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 1;
    fl.l_len = 1;
    assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_acquire(lk, 200), DLOCK_ETIMEDOUT);
    close(fd);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);

    /* A reader, on a lock whose byte 1 is held. */
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_LOCK_SHARED;
    assert_int_equal(dlock_lock_new(&lk, c, "gate2", &o), DLOCK_OK);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    snprintf(path, sizeof path, "%s/gate2.lock", strchr(uri + 7, '/'));
    fd = open(path, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fcntl(fd, F_OFD_SETLK, &fl), 0);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_EBUSY);
    assert_int_equal(dlock_acquire(lk, 200), DLOCK_ETIMEDOUT);
    close(fd);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

/* A child forked while the lock is held shares the lock's open file
 * description; release must still free the lock at once. */
static void file__release_after_fork_frees(void **state)
{
    dlock_client *c = NULL;
    dlock_lock *a, *b;
    pid_t pid;

    (void)state;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    a = new_lock(c, "fork");
    b = new_lock(c, "fork");
    assert_int_equal(dlock_acquire(a, 0), DLOCK_OK);
    pid = fork();
    if (pid == 0) {
        sleep(3);
        _exit(0);
    }
    assert_int_equal(dlock_release(a), DLOCK_OK);
    assert_int_equal(dlock_try_acquire(b), DLOCK_OK);
    assert_int_equal(dlock_release(b), DLOCK_OK);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c);
}

/* One grant of the hand-off test, as its worker logged it. */
struct grant_log {
    uint64_t fence;
    int64_t called, got, released; /* dlock_now_ns(): acquire called,
                                      returned, release called */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A child that takes "handoff" cycles times, at once after each release,
 * writing each grant's log to fd; it starts when go is readable. (Forked
 * before the parent has a client: TSan allows no threads to start after
 * a fork of a process that has threads.) */
static void handoff_child(int go, int fd, int cycles)
{
    dlock_client *c = NULL;
    dlock_lock *lk;
    char b;

    if (dlock_client_open(&c, uri, NULL) != DLOCK_OK ||
        read(go, &b, 1) != 1)
        _exit(2);
    lk = new_lock(c, "handoff");
    for (int i = 0; i < cycles; i++) {
        struct grant_log g;
        g.called = now_ns();
        if (dlock_acquire(lk, 5000) != DLOCK_OK)
            _exit(3);
        g.got = now_ns();
        g.fence = dlock_fence(lk);
        usleep(200); /* a short holding: a preempted worker misses less */
        g.released = now_ns();
        if (dlock_release(lk) != DLOCK_OK ||
            write(fd, &g, sizeof g) != sizeof g)
            _exit(4);
    }
    dlock_lock_free(lk);
    dlock_client_close(c);
    _exit(0);
}

/* Two processes that each take the lock again at once after releasing it.
 * Judged from what they logged (fences and times), not from dlock's
 * counters: of the releases made while the other process was inside an
 * acquire call, fewer than half may be followed by the releaser taking
 * the lock straight back. Without the hand-off (wait.c) that is nearly
 * all of them; with it, a few in a hundred on an idle machine (more
 * when the waiter is preempted before it registers: then not waiting is
 * the truth). */
static void file__release_hands_off_to_the_waiter(void **state)
{
    enum { CYCLES = 300 };
    struct grant_log logs[2][CYCLES];
    int out[2][2], go[2], status;
    pid_t pid[2];
    size_t at[2] = {0, 0}, contested = 0, retaken = 0;
    dlock_client *c = NULL;
    dlock_lock *lk;
    int prev = -1;

    (void)state;
    assert_int_equal(pipe(go), 0);
    for (int w = 0; w < 2; w++) {
        assert_int_equal(pipe(out[w]), 0);
        if ((pid[w] = fork()) == 0) {
            close(out[w][0]);
            handoff_child(go[0], out[w][1], CYCLES);
        }
        close(out[w][1]);
    }
    /* Both start waiting behind this holder, so neither runs alone. */
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    lk = new_lock(c, "handoff");
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(write(go[1], "gg", 2), 2);
    close(go[0]);
    close(go[1]);
    usleep(300 * 1000);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_client_close(c);
    for (int w = 0; w < 2; w++) {
        ssize_t got = 0, r;
        while ((r = read(out[w][0], (char *)logs[w] + got,
                         sizeof logs[w] - (size_t)got)) > 0)
            got += r;
        assert_int_equal(got, (ssize_t)sizeof logs[w]);
        assert_int_equal(waitpid(pid[w], &status, 0), pid[w]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        close(out[w][0]);
    }
    /* Walk the grants in fence order (each worker's are in order). */
    while (at[0] < CYCLES || at[1] < CYCLES) {
        int w = at[1] == CYCLES                                   ? 0
                : at[0] == CYCLES                                 ? 1
                : logs[0][at[0]].fence < logs[1][at[1]].fence ? 0
                                                                  : 1;
        const struct grant_log *g = &logs[w][at[w]], *o;
        if (prev >= 0 && at[prev] > 0) {
            /* The previous grant's release: was the other worker (not
             * its releaser) inside an acquire call then? */
            const struct grant_log *p = &logs[prev][at[prev] - 1];
            int other = !prev;
            size_t j = at[other];
            o = j < CYCLES ? &logs[other][j] : NULL;
            if (o != NULL && o->called < p->released) {
                contested++;
                retaken += w == prev;
            }
        }
        if (prev >= 0)
            assert_true(g->fence > logs[prev][at[prev] - 1].fence);
        at[w]++;
        prev = w;
    }
    print_message("contested releases: %zu, taken straight back: %zu\n",
                  contested, retaken);
    assert_true(contested >= 100);
    assert_true(retaken * 2 < contested);
}

/* A waiter that is stopped (SIGSTOP) while it waits cannot take the lock
 * it was handed: the releaser waits for it a short grace only, then takes
 * the lock again itself, every time; and another handle is not held back
 * at all. */
static void file__stopped_waiter_holds_up_no_one(void **state)
{
    dlock_client *c = NULL;
    dlock_lock *lk, *other;
    int ready[2], go[2], status;
    char b;
    pid_t pid;

    (void)state;
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    /* Forked first: see handoff_child(). */
    if ((pid = fork()) == 0) {
        dlock_client *cc = NULL;
        dlock_lock *w;
        if (dlock_client_open(&cc, uri, NULL) != DLOCK_OK ||
            read(go[0], &b, 1) != 1)
            _exit(2);
        w = new_lock(cc, "stopped");
        if (write(ready[1], "r", 1) != 1)
            _exit(3);
        _exit(dlock_acquire(w, 60000) == DLOCK_OK ? 0 : 4);
    }
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    lk = new_lock(c, "stopped");
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[0]);
    close(go[1]);
    assert_int_equal(read(ready[0], &b, 1), 1);
    usleep(200 * 1000); /* the child is waiting now */
    assert_int_equal(kill(pid, SIGSTOP), 0);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(dlock_release(lk), DLOCK_OK);
        assert_int_equal(dlock_acquire(lk, 2000), DLOCK_OK);
    }
    /* Released to a waiter that does not come: another handle finds the
     * lock free at once (only the releasing handle stands back). */
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    other = new_lock(c, "stopped");
    assert_int_equal(dlock_try_acquire(other), DLOCK_OK);
    assert_int_equal(dlock_release(other), DLOCK_OK);
    dlock_lock_free(other);
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ready[0]);
    close(ready[1]);
    dlock_lock_free(lk);
    dlock_client_close(c);
}

static void file__info_and_floor(void **state)
{
    dlock_client *c = NULL;
    dlock_info info = DLOCK_INFO_INIT;
    uint64_t ns[50];
    char err[256];

    (void)state;
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    assert_int_equal(dlock_client_info(c, &info), DLOCK_OK);
    assert_string_equal(info.scheme, "file");
    assert_true(info.caps & DLOCK_CAP_FENCING);
    assert_true(info.caps & DLOCK_CAP_SHARED);
    assert_false(info.caps & DLOCK_CAP_LEASE);
    dlock_client_close(c);
    assert_int_equal(dlock_bench_floor(uri, "floor", 50, ns, err, sizeof err),
                     DLOCK_OK);
    for (int i = 0; i < 50; i++)
        assert_true(ns[i] > 0);
    assert_int_equal(dlock_bench_floor("nosuch://x", "floor", 1, ns, err,
                                       sizeof err),
                     DLOCK_ENOBACKEND);
}

/* The bench's fence figure (the counter write alone) and clean-up: the
 * counter goes on from where the draws left it, and forget removes the
 * lock files of the names it is given, no other, and is no error for a
 * name that left nothing. */
static void file__bench_fence_and_forget(void **state)
{
    const char *names[] = {"fenced", "never-used"};
    char path[200], err[256];
    dlock_client *c = NULL;
    dlock_lock *lk = NULL, *keep = NULL;
    uint64_t ns[20];
    struct stat st;

    (void)state;
    assert_int_equal(dlock_bench_fence(uri, "fenced", 20, ns, err,
                                       sizeof err),
                     DLOCK_OK);
    for (int i = 0; i < 20; i++)
        assert_true(ns[i] > 0);
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&lk, c, "fenced", NULL), DLOCK_OK);
    assert_int_equal(dlock_acquire(lk, 0), DLOCK_OK);
    assert_int_equal(dlock_fence(lk), 21);
    assert_int_equal(dlock_release(lk), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&keep, c, "kept", NULL), DLOCK_OK);
    assert_int_equal(dlock_acquire(keep, 0), DLOCK_OK);
    assert_int_equal(dlock_release(keep), DLOCK_OK);
    dlock_lock_free(lk);
    dlock_lock_free(keep);
    dlock_client_close(c);

    assert_int_equal(dlock_bench_forget(uri, names, 2, err, sizeof err),
                     DLOCK_OK);
    snprintf(path, sizeof path, "%s/fenced.lock", strchr(uri + 7, '/'));
    assert_int_equal(stat(path, &st), -1);
    snprintf(path, sizeof path, "%s/kept.lock", strchr(uri + 7, '/'));
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(dlock_bench_forget(uri, names, 0, err, sizeof err),
                     DLOCK_EINVAL);
    assert_non_null(strstr(err, "names"));
}

/* A refused writer marks the file so that new readers wait for it; the
 * mark lapses a second after the writer stops asking, and a mark from
 * before a reboot (further ahead than any writer sets one) is ignored. */
static void file__writer_mark_holds_readers_back(void **state)
{
    dlock_client *a = NULL, *b = NULL, *c = NULL;
    dlock_lock *r1, *w, *r2;
    unsigned char mark[8];
    uint64_t far;
    char path[256];
    int fd;

    (void)state;
    assert_int_equal(dlock_client_open(&a, uri, NULL), DLOCK_OK);
    assert_int_equal(dlock_client_open(&b, uri, NULL), DLOCK_OK);
    assert_int_equal(dlock_client_open(&c, uri, NULL), DLOCK_OK);
    r1 = new_lock_flags(a, "marked", DLOCK_LOCK_SHARED);
    w = new_lock_flags(b, "marked", 0);
    r2 = new_lock_flags(c, "marked", DLOCK_LOCK_SHARED);
    assert_int_equal(dlock_acquire(r1, 0), DLOCK_OK);
    assert_int_equal(dlock_acquire(w, 0), DLOCK_EBUSY); /* marks */
    assert_int_equal(dlock_acquire(r2, 0), DLOCK_EBUSY); /* held back */
    usleep(1100 * 1000);                                 /* the mark lapses */
    assert_int_equal(dlock_acquire(r2, 0), DLOCK_OK);
    assert_int_equal(dlock_release(r2), DLOCK_OK);
    /* A mark an hour ahead: written before a reboot. */
    far = (uint64_t)dlock_now_ms() + 3600000;
    for (int i = 0; i < 8; i++)
        mark[i] = (unsigned char)(far >> (8 * i));
    snprintf(path, sizeof path, "%s/locks/marked.lock", dir);
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, mark, 8, 72), 8);
    close(fd);
    assert_int_equal(dlock_acquire(r2, 0), DLOCK_OK);
    assert_int_equal(dlock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_release(r1), DLOCK_OK);
    /* Granted, the writer clears the mark. */
    assert_int_equal(dlock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_release(w), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_close(a);
    dlock_client_close(b);
    dlock_client_close(c);
}

static void file__bad_uris(void **state)
{
    dlock_client *c = NULL;

    (void)state;
    assert_int_equal(dlock_client_open(&c, "file://h:1/tmp", NULL),
                     DLOCK_EINVAL);
    dlock_client_close(c);
    assert_int_equal(dlock_client_open(&c, "file://u:p@/tmp", NULL),
                     DLOCK_EINVAL);
    dlock_client_close(c);
    assert_int_equal(dlock_client_open(&c, "file:///proc/nope/x", NULL),
                     DLOCK_ENOENT);
    dlock_client_close(c);
}

/* The URI's directory must exist: a typo must not make a lock space of
 * its own. Nothing of the path is created, and the message names it. */
static void file__missing_directory_is_not_created(void **state)
{
    dlock_client *c = NULL;
    char missing[128], path[128];

    (void)state;
    snprintf(missing, sizeof missing, "file://%s/no/such", dir);
    assert_int_equal(dlock_client_open(&c, missing, NULL), DLOCK_ENOENT);
    assert_non_null(strstr(dlock_client_errmsg(c), "does not exist"));
    assert_non_null(strstr(dlock_client_errmsg(c), missing + 7));
    dlock_client_close(c);
    snprintf(path, sizeof path, "%s/no", dir);
    assert_int_not_equal(access(path, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(file__fence_survives_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(file__lock_files_are_safe_and_private, setup, teardown),
        cmocka_unit_test_setup_teardown(file__inspect_reports_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(file__semaphore_count_is_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(file__semaphore_gate_never_hangs, setup, teardown),
        cmocka_unit_test_setup_teardown(file__release_after_fork_frees, setup, teardown),
        cmocka_unit_test_setup_teardown(file__release_hands_off_to_the_waiter, setup, teardown),
        cmocka_unit_test_setup_teardown(file__stopped_waiter_holds_up_no_one, setup, teardown),
        cmocka_unit_test_setup_teardown(file__bench_fence_and_forget, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(file__info_and_floor, setup, teardown),
        cmocka_unit_test_setup_teardown(file__writer_mark_holds_readers_back, setup, teardown),
        cmocka_unit_test_setup_teardown(file__bad_uris, setup, teardown),
        cmocka_unit_test_setup_teardown(file__missing_directory_is_not_created, setup, teardown),
    };
    return cmocka_run_group_tests_name("file", tests, NULL, NULL);
}
