/*
 * file.c: the file:// backend, dlock's embedded default. No server: one
 * file per lock name in a directory, locked with Linux open-file-description
 * (OFD) locks.
 *
 * Why OFD locks: classic POSIX fcntl locks belong to the process, so two
 * threads (or two handles) of one process would not exclude each other, and
 * closing any descriptor of the file drops them all; flock() locks are per
 * description too but cannot lock byte ranges. OFD locks (F_OFD_SETLK,
 * Linux 3.15) belong to the open file description: each acquisition opens
 * its own, so threads and processes exclude each other alike, and the
 * kernel drops the lock when the holder dies.
 *
 * File layout (file.h has the offsets): bytes [0, 8) hold the fencing
 * counter (little-endian), bytes [8, 8 + OWNER_MAX) the last exclusive
 * holder's owner id, for `dlock inspect`, and the 8 bytes after that a
 * waiting writer's mark (below). Lock ranges are independent of the data:
 * the lock itself is byte 0 (write lock for exclusive, read lock for
 * shared); byte 1 is a short write lock that serialises shared holders
 * while they bump the counter.
 *
 * Waiting: a refused attempt sleeps until a release is announced (wait.c,
 * inotify), and a releaser hands the lock to a waiter instead of taking
 * it straight back; core looks again every retry_max_ms in any case (a
 * dead holder's lock is dropped by the kernel, unannounced).
 *
 * Semaphores (permits=N): a permit is a write lock on one slot byte of
 * [SLOT_AT, SLOT_AT + N), far past the data, so that no lock range of a
 * lock falls among them. A contender takes byte 1 for the whole attempt
 * (waiting for it at most ~10 ms, never blocked in the kernel): under
 * it, it reads the count the file stores (the 8 bytes at COUNT_AT,
 * after the mark), refuses another count while any slot is held (and
 * stores its own when none is), tries the N slots once each, starting at
 * one that depends on its owner id so that contenders spread, and bumps
 * the shared fencing counter for the slot it got. So every holder of a
 * slot agreed with the stored count when it took it, and the kernel
 * drops a dead holder's slot with its descriptor, at once.
 *
 * Writers are not starved by readers. The kernel grants a read lock
 * whenever no write lock is held, whoever waits, so a stream of
 * overlapping readers would keep a writer out for ever. A refused writer
 * therefore writes a mark, the CLOCK_MONOTONIC millisecond (one clock for
 * the machine) until which new readers must stay out, WRITER_MARK_MS
 * ahead; it renews it at every attempt (at least every retry_max_ms),
 * clears it when granted, and a dead or departed writer's mark
 * lapses by itself (one from before a reboot, further ahead than any
 * writer sets it, is ignored). A reader that finds a live mark is refused, so the
 * readers inside finish and the writer gets in within one reader hold.
 *
 * Sharing between users (group=NAME): lock files are created 0660 and
 * given the group (the creator must be a member), in a directory the
 * group may write to (chgrp NAME DIR; chmod 2770 DIR), as with flock(1)
 * files that several users open. Without group= files are 0600.
 *
 * Files are never deleted: unlinking a lock file while another process has
 * it open and is about to lock it lets two holders in (the classic unlink
 * race). The directory keeps one small file per name ever used. If someone
 * else deletes one, the holder's renewal notices (see file_renew) and
 * reports the lock lost; the URI's lease= sets how often it looks.
 *
 * Divisions: names and files; open and close; acquire, renew, release;
 * inspect; count-down latches; the raw floor.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"

static const char *const file_params[] = {"group", NULL};

/* ---- the fencing counter ------------------------------------------------------ */

/*
 * Bump the fencing counter and record the owner. The caller holds byte 0;
 * shared holders also hold byte 1 around this, so increments never
 * interleave. Returns the new token, or 0 with errno set.
 */
static uint64_t file_bump(int fd, const char *owner, size_t owner_len)
{
    unsigned char rec[RECORD_SIZE];
    ssize_t got = pread(fd, rec, 8, 0);
    uint64_t fence;
    size_t n = 8;

    if (got < 0)
        return 0;
    fence = got == 8 ? le64_get(rec) + 1 : 1;
    le64_put(rec, fence);
    if (owner != NULL) {
        memset(rec + 8, 0, OWNER_MAX);
        memcpy(rec + 8, owner, owner_len < OWNER_MAX ? owner_len : OWNER_MAX);
        n = RECORD_SIZE;
    }
    if (pwrite(fd, rec, n, 0) != (ssize_t)n)
        return 0;
    return fence;
}

/* ---- open and close ------------------------------------------------------------- */

/*
 * group=NAME (or a number): the group the lock files are shared with. The
 * user must be in it (root may name any), and the directory must let the
 * group create files, or the other members would fail later, one by one.
 */
static int file_group(const struct dlock_uri *uri, int dirfd, gid_t *out,
                      char *err, size_t errlen)
{
    const char *name = dlock_uri_param(uri, "group");
    struct group gr, *g = NULL;
    char buf[4096], *end;
    gid_t *groups;
    struct stat st;
    int n, member;

    *out = NO_GROUP;
    if (name == NULL)
        return DLOCK_OK;
    if (name[0] >= '0' && name[0] <= '9') {
        unsigned long v = strtoul(name, &end, 10);
        if (*end == '\0' && v < NO_GROUP)
            *out = (gid_t)v;
    } else if (getgrnam_r(name, &gr, buf, sizeof buf, &g) == 0 && g != NULL) {
        *out = g->gr_gid;
    }
    if (*out == NO_GROUP)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "group: no group '%.64s' on this machine", name);
    member = geteuid() == 0 || getegid() == *out;
    n = member ? 0 : getgroups(0, NULL);
    groups = n > 0 ? calloc((size_t)n, sizeof *groups) : NULL;
    if (groups != NULL)
        n = getgroups(n, groups);
    for (int i = 0; groups != NULL && i < n && !member; i++)
        member = groups[i] == *out;
    free(groups);
    if (!member)
        return dlock_errorf(err, errlen, DLOCK_EACCES,
                            "group: this user is not a member of group "
                            "'%.64s', so cannot share lock files with it",
                            name);
    if (fstat(dirfd, &st) != 0 ||
        !((st.st_gid == *out && (st.st_mode & 0030) == 0030) ||
          (st.st_mode & 0003) == 0003))
        return dlock_errorf(err, errlen, DLOCK_EACCES,
                            "group: the lock directory %s does not let group "
                            "'%.64s' create files in it (chgrp %.64s DIR; "
                            "chmod 2770 DIR)",
                            uri->path, name, name);
    return DLOCK_OK;
}

/*
 * Open the URI's directory, which must exist: dlock creates lock files,
 * never directories (flock(1) creates its file, not the path to it). A
 * directory made on demand turns a typo in one program's URI into a lock
 * space of its own, where it and the correctly spelled program each get
 * "the" lock; made by root, it has modes nobody chose. The default
 * per-user directory is the exception: core makes that one, private.
 */
static int file_open_dir(const char *path, int *out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), e = errno;

    *out = fd;
    if (fd >= 0)
        return DLOCK_OK;
    if (e == ENOENT || e == ENOTDIR)
        return dlock_errorf(
            err, errlen, DLOCK_ENOENT,
            "lock directory %s %s (dlock makes lock files, "
            "not directories: create it first, e.g. "
            "install -d -m 0700 %s)",
            path, e == ENOENT ? "does not exist" : "is not a directory", path);
    return dlock_errorf(
        err, errlen, e == EACCES || e == EPERM ? DLOCK_EACCES : DLOCK_ECONNECT,
        "cannot open lock directory %s: %s", path, strerror(e));
}

static int file_open(struct dlock_session **out, const struct dlock_uri *uri,
                     void *ctx, char *err, size_t errlen)
{
    struct file_session *fs;
    int rc;

    (void)ctx;
    if (uri->nhosts > 1 ||
        (uri->nhosts == 1 && uri->hosts[0].host[0] != '\0' &&
         strcmp(uri->hosts[0].host, "localhost") != 0))
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: file:// locks are local; expected "
                            "file:///absolute/directory");
    if (uri->nhosts == 1 && uri->hosts[0].port != 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "port: file:// takes no port");
    if (uri->user != NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "userinfo: file:// takes no user or password");
    if (uri->path[0] != '/')
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "path: expected file:///absolute/directory");
    fs = calloc(1, sizeof *fs);
    if (fs == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    if ((rc = file_open_dir(uri->path, &fs->dirfd, err, errlen)) != DLOCK_OK) {
        free(fs);
        return rc;
    }
    if ((rc = file_group(uri, fs->dirfd, &fs->gid, err, errlen)) != DLOCK_OK) {
        close(fs->dirfd);
        free(fs);
        return rc;
    }
    fs->ifd = -1;
    *out = &fs->base;
    return DLOCK_OK;
}

static void file_close(struct dlock_session *s)
{
    struct file_session *fs = (struct file_session *)s;

    if (fs->ifd >= 0)
        close(fs->ifd);
    close(fs->dirfd);
    free(fs);
}

/* ---- acquire, renew, release ----------------------------------------------------- */

/*
 * A lock file that cannot be opened: no permission (DLOCK_EACCES, exit
 * 73) names the remedy; anything else is an error of its own. With a
 * group, a file another member has just created may have refused us
 * before its creator gave it the group's mode (dlock__file_open_at): if
 * it is still empty (not given it yet), or has the group's mode now
 * (given it since; it may already be locked and written), it is busy:
 * try again. Either look, whenever it comes, settles the race.
 */
static int file_open_error(struct dlock_session *s, const char *name,
                           size_t len, int e)
{
    struct file_session *fs = (struct file_session *)s;
    char fname[FILE_SEGMENT_MAX + 8];
    struct stat st;

    if (e == EACCES && fs->gid != NO_GROUP) {
        dlock__file_name(fname, name, len);
        if (fstatat(fs->dirfd, fname, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            (st.st_size == 0 ||
             (st.st_gid == fs->gid && (st.st_mode & 07777) == 0660)))
            return DLOCK_EBUSY;
    }
    if (e == EACCES || e == EPERM || e == EROFS)
        return dlock_session_error(
            s, DLOCK_EACCES,
            "cannot create or open the lock file: %s (the lock directory "
            "must let this user create and write files; group= shares "
            "one between users)",
            strerror(e));
    return dlock_session_error(s, e == ENOMEM ? DLOCK_ENOMEM : DLOCK_ERROR,
                               "cannot open the lock file: %s", strerror(e));
}

static void mark_put(int fd, uint64_t until_ms)
{
    unsigned char b[8];

    le64_put(b, until_ms);
    if (pwrite(fd, b, 8, MARK_AT) != 8) {
        /* A full disk: readers are not held back; nothing else breaks. */
    }
}

/*
 * Under byte 1: check the stored count against req->permits (storing it
 * when no slot is held), then take a free slot. DLOCK_OK with *slot set,
 * DLOCK_EBUSY when all N are held, or an error.
 */
static int permit_take(struct dlock_session *s, int fd,
                       const struct dlock_request *req, uint32_t *slot)
{
    unsigned char b[8];
    uint64_t count = pread(fd, b, 8, COUNT_AT) == 8 ? le64_get(b) : 0;
    uint32_t start = 2166136261u; /* FNV-1a of the owner id: a start of
                                     its own for each handle */
    off_t busy;

    if (count != req->permits) {
        busy = dlock__file_locked(fd, F_WRLCK, SLOT_AT, DLOCK_PERMITS_MAX);
        if (busy == -2)
            return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s",
                                       strerror(errno));
        if (busy >= 0)
            return dlock_session_error(
                s, DLOCK_EINVAL,
                "permits: %u asked, but this semaphore has %llu permits "
                "and some are held (one name, one count)",
                req->permits, (unsigned long long)count);
        le64_put(b, req->permits);
        if (pwrite(fd, b, 8, COUNT_AT) != 8)
            return dlock_session_error(s, DLOCK_ERROR,
                                       "cannot store the permit count: %s",
                                       strerror(errno));
    }
    for (size_t i = 0; i < req->owner_len; i++)
        start = (start ^ (unsigned char)req->owner[i]) * 16777619u;
    for (uint32_t i = 0; i < req->permits; i++) {
        *slot = (start + i) % req->permits;
        if (dlock__file_setlk(fd, F_OFD_SETLK, F_WRLCK, SLOT_AT + *slot) == 0)
            return DLOCK_OK;
        if (errno != EAGAIN && errno != EACCES)
            return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s",
                                       strerror(errno));
    }
    return DLOCK_EBUSY;
}

/*
 * Byte 1, for a permit attempt or a reader's fence. Its holders keep it
 * for a few system calls, so wait for it a little (up to ~10 ms), but not
 * blocked in the kernel: a contender stopped (SIGSTOP) inside that window
 * must make others busy, not hang them past their deadline or a cancel.
 */
static int byte1_gate(struct dlock_session *s, int fd)
{
    for (int i = 0; i < 100; i++) {
        if (dlock__file_setlk(fd, F_OFD_SETLK, F_WRLCK, 1) == 0)
            return DLOCK_OK;
        if (errno != EAGAIN && errno != EACCES)
            return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s",
                                       strerror(errno));
        nanosleep(&(struct timespec){0, 100 * 1000}, NULL);
    }
    return DLOCK_EBUSY;
}

/* A permit: a slot taken and the fence bumped, all under byte 1. */
static int file_acquire_permit(struct dlock_session *s, int fd,
                               const struct dlock_request *req,
                               struct dlock_grant *grant)
{
    uint32_t slot = 0;
    int rc;

    if ((rc = byte1_gate(s, fd)) != DLOCK_OK) {
        close(fd);
        return rc;
    }
    rc = permit_take(s, fd, req, &slot);
    if (rc == DLOCK_OK && (grant->fence = file_bump(fd, NULL, 0)) == 0)
        rc = dlock_session_error(s, DLOCK_ERROR,
                                 "cannot update the fencing counter: %s",
                                 strerror(errno));
    dlock__file_setlk(fd, F_OFD_SETLK, F_UNLCK, 1);
    if (rc != DLOCK_OK) {
        close(fd); /* drops the slot, if one was taken */
        return rc;
    }
    grant->word[0] = (uint64_t)fd;
    grant->word[1] = slot;
    return DLOCK_OK;
}

static int file_acquire(struct dlock_session *s,
                        const struct dlock_request *req, int64_t deadline_ms,
                        struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct file_session *fs = (struct file_session *)s;
    int shared = req->kind == DLOCK_KIND_SHARED;
    uint64_t now, mark;
    int fd, e;

    (void)deadline_ms; /* no native wait: core waits in wait.c */
    fd = dlock__file_open_lock(fs->dirfd, req->name, req->name_len, fs->gid);
    if (fd < 0)
        return file_open_error(s, req->name, req->name_len, errno);
    if (req->kind == DLOCK_KIND_PERMIT)
        return file_acquire_permit(s, fd, req, grant);
    now = (uint64_t)dlock_now_ms();
    if (shared && (mark = dlock__file_mark_live(fd, now)) != 0) {
        close(fd); /* a writer waits: let it in first */
        *retry_ms = (uint32_t)(mark - now);
        return DLOCK_EBUSY;
    }
    /* Just released it while others wait: let one of them in (wait.c). */
    if (!shared && dlock__file_defer(s, fd, req, (int64_t)now, retry_ms)) {
        close(fd);
        return DLOCK_EBUSY;
    }
    if (dlock__file_setlk(fd, F_OFD_SETLK, shared ? F_RDLCK : F_WRLCK, 0) != 0) {
        e = errno;
        if (!shared && (e == EAGAIN || e == EACCES))
            mark_put(fd, now + WRITER_MARK_MS);
        close(fd);
        if (e == EAGAIN || e == EACCES)
            return DLOCK_EBUSY;
        return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s", strerror(e));
    }
    if (!shared && dlock__file_mark_get(fd) != 0)
        mark_put(fd, 0);
    /* Shared holders serialise on byte 1 while they bump the counter. */
    if (shared && (e = byte1_gate(s, fd)) != DLOCK_OK) {
        close(fd); /* drops the read lock: busy, try again */
        return e;
    }
    grant->fence = file_bump(fd, shared ? NULL : req->owner, req->owner_len);
    e = errno;
    if (shared)
        dlock__file_setlk(fd, F_OFD_SETLK, F_UNLCK, 1);
    if (grant->fence == 0) {
        close(fd); /* drops the lock */
        return dlock_session_error(s, DLOCK_ERROR,
                                   "cannot update the fencing counter: %s",
                                   strerror(e));
    }
    grant->word[0] = (uint64_t)fd;
    dlock__file_taken(s, req);
    return DLOCK_OK;
}

/*
 * Nothing can take an OFD lock from a living holder, but the file can be
 * taken from the lock: if the lock file is deleted or replaced (a tmp
 * cleaner, an admin), the next acquirer creates a new file and locks that,
 * and two holders run at once. So renewal checks that the name still leads
 * to the inode we hold locked; if not, the lock is lost.
 */
static int file_renew(struct dlock_session *s, struct dlock_renewal *items,
                      size_t n)
{
    struct file_session *fs = (struct file_session *)s;
    char fname[FILE_SEGMENT_MAX + 8];

    for (size_t i = 0; i < n; i++) {
        const struct dlock_request *req = items[i].req;
        struct stat held, named;

        dlock__file_name(fname, req->name, req->name_len);
        if (fstat((int)items[i].grant->word[0], &held) != 0)
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST, "lock descriptor: %s", strerror(errno));
        else if (fstatat(fs->dirfd, fname, &named, AT_SYMLINK_NOFOLLOW) != 0 ||
                 named.st_ino != held.st_ino || named.st_dev != held.st_dev)
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST,
                "lock file %s was removed or replaced; another process may "
                "hold a lock on the new one",
                fname);
        else
            items[i].result = DLOCK_OK;
    }
    return DLOCK_OK;
}

static int file_release(struct dlock_session *s,
                        const struct dlock_request *req,
                        struct dlock_grant *grant)
{
    int fd = (int)grant->word[0];

    /* Unlock before closing: if the process forked after acquiring, the
     * child shares this description and a bare close would leave the lock
     * held until the child exits. */
    dlock__file_setlk(fd, F_OFD_SETLK, F_UNLCK,
                      req->kind == DLOCK_KIND_PERMIT
                          ? SLOT_AT + (off_t)grant->word[1]
                          : 0);
    dlock__file_announce(s, fd, req, grant->fence);
    if (close(fd) != 0 && errno != EINTR)
        return dlock_session_error(s, DLOCK_ERROR, "close: %s",
                                   strerror(errno));
    return DLOCK_OK;
}

/* A writer becomes a reader: fcntl() converts the description's write
 * lock into a read lock in place, never unlocking the range, so no writer
 * comes in between. */
static int file_downgrade(struct dlock_session *s,
                          const struct dlock_request *req,
                          struct dlock_grant *grant)
{
    (void)req;
    if (dlock__file_setlk((int)grant->word[0], F_OFD_SETLK, F_RDLCK, 0) != 0)
        return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s",
                                   strerror(errno));
    dlock__file_announce(s, (int)grant->word[0], req, grant->fence); /* readers may enter */
    return DLOCK_OK;
}

/* ---- inspect -------------------------------------------------------------------- */

/* A semaphore's holders (the file stores a count): "K of N permits
 * held" as the owner; whether the file is a semaphore's. Each slot is
 * asked on its own (F_OFD_GETLK over a range reports some lock in it,
 * not the first); the owners of slots are not recorded. */
static int permit_holders(int fd, dlock_state *out)
{
    unsigned char b[8];
    uint64_t count = pread(fd, b, 8, COUNT_AT) == 8 ? le64_get(b) : 0;
    unsigned k = 0;

    if (count == 0 || count > DLOCK_PERMITS_MAX)
        return 0;
    for (off_t at = SLOT_AT; at < SLOT_AT + (off_t)count; at++)
        k += dlock__file_locked(fd, F_WRLCK, at, 1) == at;
    out->held = k > 0;
    if (k > 0)
        snprintf(out->owner, sizeof out->owner, "(%u of %llu permits held)",
                 k, (unsigned long long)count);
    return 1;
}

static int file_inspect(struct dlock_session *s, const char *name, size_t len,
                        dlock_state *out)
{
    struct file_session *fs = (struct file_session *)s;
    unsigned char rec[RECORD_SIZE];
    struct flock fl;
    ssize_t got;
    int fd = dlock__file_open_lock(fs->dirfd, name, len, fs->gid);

    if (fd < 0)
        return file_open_error(s, name, len, errno);
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_len = 1;
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0) {
        int e = errno;
        close(fd);
        return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s", strerror(e));
    }
    out->held = fl.l_type != F_UNLCK;
    got = pread(fd, rec, sizeof rec, 0);
    if (got >= 8)
        out->fence = le64_get(rec);
    if (!out->held && permit_holders(fd, out)) {
        /* a semaphore: out says how many permits are held */
    } else if (out->held && fl.l_type == F_WRLCK && got > 8) {
        size_t n = (size_t)got - 8;
        memcpy(out->owner, rec + 8, n);
        out->owner[n] = '\0';
    } else if (out->held) {
        snprintf(out->owner, sizeof out->owner, "(shared holders)");
    }
    out->remaining_ms = -1;
    out->waiters = -1;
    close(fd);
    return DLOCK_OK;
}

/* ---- the raw floor ------------------------------------------------------------------ */

/*
 * The bare lock, as a user of the system calls alone would take and
 * release an OFD lock on a file: open (creating it), F_OFD_SETLK a write
 * lock on byte 0, unlock, close. No counter write: that is dlock's fence
 * (file_fence_floor times it apart).
 */
static int file_floor(const struct dlock_uri *uri, const char *name,
                      uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    int dirfd, rc;

    if ((rc = file_open_dir(uri->path, &dirfd, err, errlen)) != DLOCK_OK)
        return rc;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        int fd = dlock__file_open_lock(dirfd, name, strlen(name), NO_GROUP);
        if (fd < 0 || dlock__file_setlk(fd, F_OFD_SETLK, F_WRLCK, 0) != 0) {
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: %s",
                              strerror(errno));
            if (fd >= 0)
                close(fd);
            break;
        }
        dlock__file_setlk(fd, F_OFD_SETLK, F_UNLCK, 0);
        close(fd);
        ns_out[i] = dlock_now_ns() - t0;
    }
    close(dirfd);
    return rc;
}

/* The fence alone: the counter's read and write (with the owner id, as an
 * exclusive acquire writes it) on the name's open lock file. */
static int file_fence_floor(const struct dlock_mode *mode,
                            const struct dlock_uri *uri, const char *name,
                            uint32_t n, uint64_t *ns_out, char *err,
                            size_t errlen)
{
    static const char owner[] = "00000000-0000-4000-8000-000000000000:1";
    uint32_t i = 0;
    int dirfd, fd, rc;

    (void)mode;
    if ((rc = file_open_dir(uri->path, &dirfd, err, errlen)) != DLOCK_OK)
        return rc;
    fd = dlock__file_open_lock(dirfd, name, strlen(name), NO_GROUP);
    for (; fd >= 0 && i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        if (file_bump(fd, owner, sizeof owner - 1) == 0)
            break;
        ns_out[i] = dlock_now_ns() - t0;
    }
    if (i < n)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "fence: %s",
                          strerror(errno));
    if (fd >= 0)
        close(fd);
    close(dirfd);
    return rc;
}

/* The bench's clean-up: unlink each name's lock file. Safe only because
 * the caller (dlock bench, its workers gone) is the names' one user: in
 * use, this is the unlink race of the header. */
static int file_forget(const struct dlock_mode *mode,
                       const struct dlock_uri *uri, const char *const *names,
                       size_t n, char *err, size_t errlen)
{
    char fname[FILE_SEGMENT_MAX + 8];
    int dirfd, rc;

    (void)mode;
    if ((rc = file_open_dir(uri->path, &dirfd, err, errlen)) != DLOCK_OK)
        return rc;
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        dlock__file_name(fname, names[i], strlen(names[i]));
        if (unlinkat(dirfd, fname, 0) != 0 && errno != ENOENT)
            rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                              "forget: cannot remove %s: %s", fname,
                              strerror(errno));
    }
    close(dirfd);
    return rc;
}

/* The one mode. Waits by notification (wait.c); without one, core looks
 * again every retry_max_ms. */
static const struct dlock_mode file_mode_ofd = {
    .name = "ofd",
    .summary = "fcntl OFD locks on files in a local directory (no server): "
               "held while the holder's process lives",
    .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SHARED | DLOCK_CAP_FENCING |
            DLOCK_CAP_DOWNGRADE | DLOCK_CAP_PERMITS | DLOCK_CAP_LATCH |
            DLOCK_CAP_NOTIFY,
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
             DLOCK_KIND_BIT(DLOCK_KIND_SHARED) |
             DLOCK_KIND_BIT(DLOCK_KIND_PERMIT),
    .retry_min_ms = 1,
    .retry_max_ms = 64,
    .acquire = file_acquire,
    .renew = file_renew,
    .release = file_release,
    .wait = dlock__file_wait,
    .inspect = file_inspect,
    .floor = file_floor,
    .downgrade = file_downgrade,
    .latch = &dlock__file_latch,
    .fence_floor = file_fence_floor,
    .forget = file_forget,
};

static const struct dlock_mode *const file_modes[] = {&file_mode_ofd, NULL};

const struct dlock_backend dlock__backend_file = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "file",
    .params = file_params,
    .summary = "fcntl OFD locks on files in a local directory (no server)",
    .modes = file_modes,
    .open = file_open,
    .close = file_close,
};
