/*
 * latch.c: count-down latches on file://, one file per latch beside the
 * lock files.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "file.h"

/*
 * A latch is the file "<segment>.latch" beside the lock files [B-LATCH-1]:
 * bytes [0, 8) hold its count (little-endian; a missing or empty file is
 * 0), read and written under an OFD lock on byte 0 held for the few
 * system calls of one step (F_OFD_SETLKW: no step waits for anything but
 * another step), so every process's set and down are atomic. At zero the
 * file stays (deleting it would race with an opener, as for lock files).
 * await() watches the file with inotify (Linux; IN_MODIFY: a count
 * written, never a mere read) before it reads the count, so a write in
 * between is seen; it also looks every FILE_LATCH_RECHECK_MS, which bounds
 * the wait where inotify misses writes (another machine's, on NFS).
 */
#define FILE_LATCH_RECHECK_MS 1000

enum { LATCH_READ, LATCH_SET, LATCH_DOWN };

static int latch_open(struct dlock_session *s, const char *name, size_t len,
                      int *fd)
{
    struct file_session *fs = (struct file_session *)s;
    char fname[FILE_SEGMENT_MAX + 8];
    size_t n = dlock_name_segment(fname, FILE_SEGMENT_MAX, name, len);

    memcpy(fname + n, ".latch", 7);
    if ((*fd = dlock__file_open_at(fs->dirfd, fname, fs->gid)) >= 0)
        return DLOCK_OK;
    return dlock_session_error(s, errno == EACCES || errno == EPERM ||
                                          errno == EROFS
                                      ? DLOCK_EACCES
                                      : DLOCK_ERROR,
                               "cannot create or open the latch file: %s",
                               strerror(errno));
}

/* One step on an open latch file: *out is the count before it. */
static int latch_step(struct dlock_session *s, int fd, int op, uint32_t arg,
                      uint32_t *out)
{
    unsigned char buf[8] = {0};
    uint64_t count;
    ssize_t got;

    while (dlock__file_setlk(fd, F_OFD_SETLKW, op == LATCH_READ ? F_RDLCK : F_WRLCK,
                      0) != 0)
        if (errno != EINTR)
            return dlock_session_error(s, DLOCK_ERROR,
                                       "cannot lock the latch file: %s",
                                       strerror(errno));
    got = pread(fd, buf, 8, 0);
    count = got == 8 ? le64_get(buf) : 0;
    *out = count <= DLOCK_LATCH_COUNT_MAX ? (uint32_t)count : 0;
    if (got < 0)
        return dlock_session_error(s, DLOCK_ERROR,
                                   "cannot read the latch file: %s",
                                   strerror(errno));
    if ((op == LATCH_SET && *out == 0) || (op == LATCH_DOWN && *out > 0)) {
        le64_put(buf, op == LATCH_SET ? arg : *out - 1);
        if (pwrite(fd, buf, 8, 0) != 8)
            return dlock_session_error(s, DLOCK_ERROR,
                                       "cannot write the latch file: %s",
                                       strerror(errno));
    }
    return DLOCK_OK; /* closing the file drops the lock */
}

static int latch_call(struct dlock_session *s, const char *name, size_t len,
                      int op, uint32_t arg, uint32_t *out)
{
    int fd, rc;

    if ((rc = latch_open(s, name, len, &fd)) != DLOCK_OK)
        return rc;
    rc = latch_step(s, fd, op, arg, out);
    close(fd);
    return rc;
}

static int file_latch_set(struct dlock_session *s, const char *name,
                          size_t len, uint32_t count, uint32_t *current)
{
    return latch_call(s, name, len, LATCH_SET, count, current);
}

static int file_latch_down(struct dlock_session *s, const char *name,
                           size_t len, uint32_t *left)
{
    int rc = latch_call(s, name, len, LATCH_DOWN, 0, left);

    if (rc == DLOCK_OK && *left > 0)
        (*left)--;
    return rc;
}

static int file_latch_count(struct dlock_session *s, const char *name,
                            size_t len, uint32_t *count)
{
    return latch_call(s, name, len, LATCH_READ, 0, count);
}

static int file_latch_await(struct dlock_session *s, const char *name,
                            size_t len, int64_t deadline_ms)
{
    char path[64], drain[4096];
    uint32_t count;
    int64_t now, wake;
    int fd, ifd, rc;

    if ((rc = latch_open(s, name, len, &fd)) != DLOCK_OK)
        return rc;
    /* Watch first, then look. Without inotify (no instance left), poll. */
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ifd >= 0 && inotify_add_watch(ifd, path, IN_MODIFY) < 0) {
        close(ifd);
        ifd = -1;
    }
    for (;;) {
        if ((rc = latch_step(s, fd, LATCH_READ, 0, &count)) != DLOCK_OK ||
            count == 0)
            break;
        /* Unlock before sleeping: a step holds byte 0 only in it. */
        dlock__file_setlk(fd, F_OFD_SETLK, F_UNLCK, 0);
        now = dlock_now_ms();
        if (now >= deadline_ms) {
            rc = DLOCK_ETIMEDOUT; /* core says so */
            break;
        }
        wake = now + FILE_LATCH_RECHECK_MS;
        rc = dlock_session_poll(s, ifd, POLLIN,
                                wake < deadline_ms ? wake : deadline_ms);
        if (rc < 0)
            break;
        while (ifd >= 0 && read(ifd, drain, sizeof drain) > 0)
            ;
    }
    if (ifd >= 0)
        close(ifd);
    close(fd);
    return rc;
}

const struct dlock_latch_ops dlock__file_latch = {
    .set = file_latch_set,
    .down = file_latch_down,
    .count = file_latch_count,
    .await = file_latch_await,
};
