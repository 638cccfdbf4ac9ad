/*
 * test_file.c: what is particular to the file:// backend: the fencing
 * counter lives in the lock file and survives clients, lock files have safe
 * names and private modes, inspect reads holder and fence, a fork after
 * acquiring does not keep the lock past release, and the raw floor runs.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static dlock_lock *new_lock_flags(dlock_client *c, const char *name,
                                  uint32_t flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *lk = NULL;

    o.flags = flags;
    assert_int_equal(dlock_lock_new(&lk, c, name, &o), DLOCK_OK);
    return lk;
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
        cmocka_unit_test_setup_teardown(file__release_after_fork_frees, setup, teardown),
        cmocka_unit_test_setup_teardown(file__info_and_floor, setup, teardown),
        cmocka_unit_test_setup_teardown(file__writer_mark_holds_readers_back, setup, teardown),
        cmocka_unit_test_setup_teardown(file__bad_uris, setup, teardown),
        cmocka_unit_test_setup_teardown(file__missing_directory_is_not_created, setup, teardown),
    };
    return cmocka_run_group_tests_name("file", tests, NULL, NULL);
}
