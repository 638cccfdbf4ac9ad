/*
 * wait.c: waiting for a file lock by notification, and hand-offs to the
 * processes that wait.
 *
 * A blocked fcntl (F_OFD_SETLKW) would sleep in the kernel's own queue,
 * but it can be bounded only by a signal, which a library must not send
 * itself, and it cannot watch for a cancel [B-CANCEL-1]. So a waiter
 * sleeps in poll() on inotify instead, and a release wakes it:
 *
 * - A waiter holds a read lock on WAIT_BYTE of the lock file while it
 *   waits (so the kernel drops it if the waiter dies), watches the file
 *   for IN_ATTRIB, then looks whether it could take the lock now, and only
 *   then sleeps [B-WAIT-1]: a release between its failed attempt and its
 *   watch is seen by that look.
 * - A release that finds a read lock on WAIT_BYTE (one F_OFD_GETLK, about
 *   0.3 us; nothing more when nobody waits) sets the file's times
 *   (futimens(fd, NULL): IN_ATTRIB, allowed to anyone who may write the
 *   file). Writes to the file (every acquire bumps the fence) raise
 *   IN_MODIFY, not IN_ATTRIB, so waiters wake for releases only.
 * - A holder that dies is not announced (the kernel drops its lock
 *   silently): its waiters look again after core's retry_max_ms.
 *
 * Hand-offs. The kernel grants an OFD lock to whoever asks first, and the
 * releasing process, still on its CPU, would take the lock again before
 * the waiter it woke has run: one process would keep the lock for
 * hundreds of cycles. So a session that releases an exclusive lock while
 * others wait remembers the handle's owner id (which names the lock too),
 * its fence and the time, and for HANDOFF_GRACE_MS, unless someone took the lock since
 * (the file's fence moved on), that handle does not take that name again:
 * it waits itself (a try fails, as on a fair lock). Other handles are not
 * held back: a woken waiter that gave up must not make a free lock look
 * busy to anyone else. A
 * session that was handed the lock after a wait does the same at its
 * release even when nobody is registered yet: with two processes, the
 * one it took the lock from is still on its way into wait() then. After the grace anyone may take it, so a waiter that
 * stopped or went away holds up the releaser by at most that long. Only
 * the session's memory is read for this, so an acquire nobody waits for
 * makes no extra system call. This is about fairness only; the OFD lock
 * alone decides who holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

#define HANDOFF_GRACE_MS 5

/* Does a lock of another description conflict with a lock of type on
 * [at, at + 1)? 1 yes, 0 no, -1 on error. */
static int file_conflicts(int fd, short type, off_t at)
{
    off_t got = dlock__file_locked(fd, type, at, 1);

    return got == -2 ? -1 : got >= 0;
}

/* FNV-1a of the owner id (client uuid and handle serial). */
static uint64_t owner_hash(const struct dlock_request *req)
{
    uint64_t h = 14695981039346656037u;

    for (size_t i = 0; i < req->owner_len; i++)
        h = (h ^ (unsigned char)req->owner[i]) * 1099511628211u;
    return h;
}

void dlock__file_announce(struct dlock_session *s, int fd,
                          const struct dlock_request *req, uint64_t fence)
{
    struct file_session *fs = (struct file_session *)s;
    int waiters = file_conflicts(fd, F_WRLCK, WAIT_BYTE) == 1;
    int handed = fs->handed;

    fs->handed = 0;
    if (req->kind == DLOCK_KIND_EXCLUSIVE && (waiters || handed)) {
        fs->handoff_owner = owner_hash(req);
        fs->handoff_fence = fence;
        fs->handoff_ms = dlock_now_ms();
    }
    /* Fails only without write permission, which the holder has. */
    if (waiters)
        (void)futimens(fd, NULL);
}

void dlock__file_taken(struct dlock_session *s,
                       const struct dlock_request *req)
{
    struct file_session *fs = (struct file_session *)s;

    fs->handed = fs->woken && fs->woken_name == req->name_hash &&
                 req->kind == DLOCK_KIND_EXCLUSIVE;
    fs->woken = 0;
}

int dlock__file_defer(struct dlock_session *s, int fd,
                      const struct dlock_request *req, int64_t now,
                      uint32_t *retry_ms)
{
    struct file_session *fs = (struct file_session *)s;
    unsigned char b[8];

    if (req->kind != DLOCK_KIND_EXCLUSIVE || fs->handoff_ms == 0 ||
        fs->handoff_owner != owner_hash(req) || now < fs->handoff_ms ||
        now - fs->handoff_ms >= HANDOFF_GRACE_MS)
        return 0;
    /* Handed off already: the fence moved on. (Whether anyone still
     * waits is not asked: the waiter that was woken stops waiting before
     * it takes the lock.) */
    if (pread(fd, b, 8, 0) != 8 || le64_get(b) != fs->handoff_fence) {
        fs->handoff_ms = 0;
        return 0;
    }
    *retry_ms = (uint32_t)(fs->handoff_ms + HANDOFF_GRACE_MS - now);
    return 1;
}

/* Could req be granted now? 1 yes; 0 no, with *until_ms set when it may
 * be (a hand-off grace) or left alone; -1 on error. */
static int file_could_take(struct dlock_session *s, int fd,
                           const struct dlock_request *req, int64_t now,
                           int64_t *until_ms)
{
    uint32_t retry = 0;
    uint64_t mark;
    int c;

    switch (req->kind) {
    case DLOCK_KIND_PERMIT:
        for (uint32_t i = 0; i < req->permits; i++)
            if ((c = file_conflicts(fd, F_WRLCK, SLOT_AT + (off_t)i)) != 1)
                return c < 0 ? -1 : 1;
        return 0;
    case DLOCK_KIND_SHARED:
        /* A writer's live mark keeps readers out until it lapses (file.c):
         * sleep until then, or until a release. */
        if ((mark = dlock__file_mark_live(fd, (uint64_t)now)) != 0) {
            *until_ms = (int64_t)mark;
            return 0;
        }
        c = file_conflicts(fd, F_RDLCK, 0);
        return c < 0 ? -1 : !c;
    default:
        if ((c = file_conflicts(fd, F_WRLCK, 0)) != 0)
            return c < 0 ? -1 : 0;
        if (!dlock__file_defer(s, fd, req, now, &retry))
            return 1;
        *until_ms = now + retry;
        return 0;
    }
}

int dlock__file_wait(struct dlock_session *s, const struct dlock_request *req,
                     uint32_t max_ms)
{
    struct file_session *fs = (struct file_session *)s;
    int64_t now = dlock_now_ms(), deadline = now + max_ms, until;
    char path[64], drain[4096];
    int fd, wd = -1, rc = DLOCK_OK, could = 0;

    fd = dlock__file_open_lock(fs->dirfd, req->name, req->name_len, fs->gid);
    if (fd < 0)
        return DLOCK_OK; /* the next attempt reports it */
    /* Registered first, watching second, looking third. Without a read
     * lock (an error) or inotify (no instance left), the wait is a sleep
     * of max_ms, as core's backoff would be. */
    (void)dlock__file_setlk(fd, F_OFD_SETLK, F_RDLCK, WAIT_BYTE);
    if (fs->ifd < 0)
        fs->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (fs->ifd >= 0)
        wd = inotify_add_watch(fs->ifd, path, IN_ATTRIB);
    for (;;) {
        until = deadline;
        if ((could = file_could_take(s, fd, req, now, &until)) != 0 ||
            now >= deadline)
            break;
        rc = dlock_session_poll(s, wd >= 0 ? fs->ifd : -1, POLLIN,
                                until < deadline ? until : deadline);
        if (rc == DLOCK_ECANCELED || rc == DLOCK_ECLOSED)
            break;
        rc = DLOCK_OK; /* a failed poll() is a wait cut short */
        while (wd >= 0 && read(fs->ifd, drain, sizeof drain) > 0)
            ;
        now = dlock_now_ms();
    }
    if (wd >= 0) {
        inotify_rm_watch(fs->ifd, wd);
        while (read(fs->ifd, drain, sizeof drain) > 0)
            ;
    }
    close(fd); /* and the read lock on WAIT_BYTE with it */
    fs->woken = could == 1;
    fs->woken_name = req->name_hash;
    return rc;
}
