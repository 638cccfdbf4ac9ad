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
 * File layout: bytes [0, 8) hold the fencing counter (little-endian), bytes
 * [8, 8 + OWNER_MAX) the last exclusive holder's owner id, for `dlock
 * inspect`, and the 8 bytes after that a waiting writer's mark (below).
 * Lock ranges are independent of the data: the lock itself is byte 0
 * (write lock for exclusive, read lock for shared); byte 1 is a short
 * write lock that serialises shared holders while they bump the counter.
 *
 * Writers are not starved by readers. The kernel grants a read lock
 * whenever no write lock is held, whoever waits, so a stream of
 * overlapping readers would keep a writer out for ever. A refused writer
 * therefore writes a mark, the CLOCK_MONOTONIC millisecond (one clock for
 * the machine) until which new readers must stay out, WRITER_MARK_MS
 * ahead; it renews it at every attempt (core retries a file lock every
 * few ms), clears it when granted, and a dead or departed writer's mark
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
 * inspect; the raw floor.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlock/backend.h"

#define FILE_SEGMENT_MAX 240 /* + ".lock" stays under NAME_MAX (255) */
#define OWNER_MAX 64
#define RECORD_SIZE (8 + OWNER_MAX)
#define MARK_AT RECORD_SIZE /* the waiting writer's mark */
#define WRITER_MARK_MS 1000

extern const struct dlock_backend dlock__backend_file;

struct file_session {
    struct dlock_session base;
    int dirfd;
    gid_t gid; /* group=: the lock files' group, or NO_GROUP */
};

#define NO_GROUP ((gid_t)-1)

static const char *const file_params[] = {"group", NULL};

/* ---- names and files --------------------------------------------------------- */

/* The lock file's name of a name, in fname. */
static void file_name(char fname[FILE_SEGMENT_MAX + 8], const char *name,
                      size_t len)
{
    size_t n = dlock_name_segment(fname, FILE_SEGMENT_MAX, name, len);

    memcpy(fname + n, ".lock", 6);
}

/*
 * Open (creating) the lock file of a name. With a group, a file this user
 * owns gets that group and mode 0660 whatever the umask; the creator does
 * this right after creating it (one fstat per open, only with group=).
 */
static int file_open_lock(int dirfd, const char *name, size_t len, gid_t gid)
{
    char fname[FILE_SEGMENT_MAX + 8];
    struct stat st;
    int fd, e;

    file_name(fname, name, len);
    fd = openat(dirfd, fname, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                gid == NO_GROUP ? 0600 : 0660);
    if (fd < 0 || gid == NO_GROUP || fstat(fd, &st) != 0 ||
        st.st_uid != geteuid() ||
        (st.st_gid == gid && (st.st_mode & 07777) == 0660))
        return fd;
    if (fchown(fd, (uid_t)-1, gid) == 0 && fchmod(fd, 0660) == 0)
        return fd;
    e = errno;
    close(fd);
    errno = e;
    return -1;
}

static int file_setlk(int fd, int cmd, short type, off_t start)
{
    struct flock fl;

    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = 1;
    return fcntl(fd, cmd, &fl);
}

static uint64_t le64_get(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void le64_put(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

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
    *out = &fs->base;
    return DLOCK_OK;
}

static void file_close(struct dlock_session *s)
{
    struct file_session *fs = (struct file_session *)s;

    close(fs->dirfd);
    free(fs);
}

/* ---- acquire, renew, release ----------------------------------------------------- */

/*
 * A lock file that cannot be opened: no permission (DLOCK_EACCES, exit
 * 73) names the remedy; anything else is an error of its own. With a
 * group, an empty file is one another member has just created and not
 * yet given the group's mode (file_open_lock): busy, try again.
 */
static int file_open_error(struct dlock_session *s, const char *name,
                           size_t len, int e)
{
    struct file_session *fs = (struct file_session *)s;
    char fname[FILE_SEGMENT_MAX + 8];
    struct stat st;

    if (e == EACCES && fs->gid != NO_GROUP) {
        file_name(fname, name, len);
        if (fstatat(fs->dirfd, fname, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_size == 0)
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

/* A waiting writer's mark: until when new readers stay out (0: none). */
static uint64_t mark_get(int fd)
{
    unsigned char b[8];

    return pread(fd, b, 8, MARK_AT) == 8 ? le64_get(b) : 0;
}

static void mark_put(int fd, uint64_t until_ms)
{
    unsigned char b[8];

    le64_put(b, until_ms);
    if (pwrite(fd, b, 8, MARK_AT) != 8) {
        /* A full disk: readers are not held back; nothing else breaks. */
    }
}

static int file_acquire(struct dlock_session *s,
                        const struct dlock_request *req, int64_t deadline_ms,
                        struct dlock_grant *grant, uint32_t *retry_ms)
{
    struct file_session *fs = (struct file_session *)s;
    int shared = req->kind == DLOCK_KIND_SHARED;
    uint64_t now, mark;
    int fd, e;

    (void)deadline_ms; /* no native wait: core polls */
    fd = file_open_lock(fs->dirfd, req->name, req->name_len, fs->gid);
    if (fd < 0)
        return file_open_error(s, req->name, req->name_len, errno);
    now = (uint64_t)dlock_now_ms();
    /* A mark further ahead than a writer ever sets one is from before a
     * reboot (the clock started again): no writer waits. */
    if (shared && (mark = mark_get(fd)) > now &&
        mark <= now + WRITER_MARK_MS) {
        close(fd); /* a writer waits: let it in first */
        *retry_ms = (uint32_t)(mark - now);
        return DLOCK_EBUSY;
    }
    if (file_setlk(fd, F_OFD_SETLK, shared ? F_RDLCK : F_WRLCK, 0) != 0) {
        e = errno;
        if (!shared && (e == EAGAIN || e == EACCES))
            mark_put(fd, now + WRITER_MARK_MS);
        close(fd);
        if (e == EAGAIN || e == EACCES)
            return DLOCK_EBUSY;
        return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s", strerror(e));
    }
    if (!shared && mark_get(fd) != 0)
        mark_put(fd, 0);
    /* Shared holders serialise on byte 1 while they bump the counter. */
    if (shared && file_setlk(fd, F_OFD_SETLKW, F_WRLCK, 1) != 0) {
        e = errno;
        close(fd);
        return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s", strerror(e));
    }
    grant->fence = file_bump(fd, shared ? NULL : req->owner, req->owner_len);
    e = errno;
    if (shared)
        file_setlk(fd, F_OFD_SETLK, F_UNLCK, 1);
    if (grant->fence == 0) {
        close(fd); /* drops the lock */
        return dlock_session_error(s, DLOCK_ERROR,
                                   "cannot update the fencing counter: %s",
                                   strerror(e));
    }
    grant->word[0] = (uint64_t)fd;
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

        file_name(fname, req->name, req->name_len);
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

    (void)req;
    /* Unlock before closing: if the process forked after acquiring, the
     * child shares this description and a bare close would leave the lock
     * held until the child exits. */
    file_setlk(fd, F_OFD_SETLK, F_UNLCK, 0);
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
    if (file_setlk((int)grant->word[0], F_OFD_SETLK, F_RDLCK, 0) != 0)
        return dlock_session_error(s, DLOCK_ERROR, "fcntl: %s",
                                   strerror(errno));
    return DLOCK_OK;
}

/* ---- inspect -------------------------------------------------------------------- */

static int file_inspect(struct dlock_session *s, const char *name, size_t len,
                        dlock_state *out)
{
    struct file_session *fs = (struct file_session *)s;
    unsigned char rec[RECORD_SIZE];
    struct flock fl;
    ssize_t got;
    int fd = file_open_lock(fs->dirfd, name, len, fs->gid);

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
    if (out->held && fl.l_type == F_WRLCK && got > 8) {
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

/* The same system calls as one dlock cycle, with no dlock around them. */
static int file_floor(const struct dlock_uri *uri, const char *name,
                      uint32_t n, uint64_t *ns_out, char *err, size_t errlen)
{
    static const char owner[] = "00000000-0000-4000-8000-000000000000:1";
    int dirfd, rc;

    if ((rc = file_open_dir(uri->path, &dirfd, err, errlen)) != DLOCK_OK)
        return rc;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = dlock_now_ns();
        int fd = file_open_lock(dirfd, name, strlen(name), NO_GROUP);
        if (fd < 0 || file_setlk(fd, F_OFD_SETLK, F_WRLCK, 0) != 0 ||
            file_bump(fd, owner, sizeof owner - 1) == 0) {
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: %s",
                              strerror(errno));
            if (fd >= 0)
                close(fd);
            break;
        }
        file_setlk(fd, F_OFD_SETLK, F_UNLCK, 0);
        close(fd);
        ns_out[i] = dlock_now_ns() - t0;
    }
    close(dirfd);
    return rc;
}

/* The one mode. Polling is all a file lock offers: start fast, stay fast. */
static const struct dlock_mode file_mode_ofd = {
    .name = "ofd",
    .summary = "fcntl OFD locks on files in a local directory (no server): "
               "held while the holder's process lives",
    .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SHARED | DLOCK_CAP_FENCING |
            DLOCK_CAP_DOWNGRADE,
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
             DLOCK_KIND_BIT(DLOCK_KIND_SHARED),
    .retry_min_ms = 1,
    .retry_max_ms = 64,
    .acquire = file_acquire,
    .renew = file_renew,
    .release = file_release,
    .inspect = file_inspect,
    .floor = file_floor,
    .downgrade = file_downgrade,
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
