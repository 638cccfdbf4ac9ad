/*
 * files.c: the file:// backend's names and files: a lock name's file in
 * the directory, opening (creating) it with the group's mode, and the
 * one-byte OFD lock calls every part of the backend makes.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

/* The lock file's name of a name, in fname. */
void dlock__file_name(char fname[FILE_SEGMENT_MAX + 8], const char *name,
                      size_t len)
{
    size_t n = dlock_name_segment(fname, FILE_SEGMENT_MAX, name, len);

    memcpy(fname + n, ".lock", 6);
}

/*
 * Open (creating) a file of the directory (the lock file of a name, or a
 * latch's). With a group, a file this user
 * owns gets that group and mode 0660 whatever the umask; the creator does
 * this right after creating it (one fstat per open, only with group=).
 * So another member's open can fail (EACCES) in the moment between the
 * two: if the file has the group's mode by the time we look, open it
 * again. (If it has not yet, file.c's file_open_error looks once more
 * and says busy.)
 */
int dlock__file_open_at(int dirfd, const char *fname, gid_t gid)
{
    struct stat st;
    int fd, e;

    fd = openat(dirfd, fname, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                gid == NO_GROUP ? 0600 : 0660);
    if (fd < 0 && errno == EACCES && gid != NO_GROUP) {
        if (fstatat(dirfd, fname, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_gid == gid && (st.st_mode & 07777) == 0660)
            fd = openat(dirfd, fname, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        else
            errno = EACCES;
    }
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

int dlock__file_open_lock(int dirfd, const char *name, size_t len, gid_t gid)
{
    char fname[FILE_SEGMENT_MAX + 8];

    dlock__file_name(fname, name, len);
    return dlock__file_open_at(dirfd, fname, gid);
}

/* fcntl(cmd) with a lock of type on [start, start + len), in *fl. */
static int file_fcntl(int fd, int cmd, short type, off_t start, off_t len,
                      struct flock *fl)
{
    memset(fl, 0, sizeof *fl);
    fl->l_type = type;
    fl->l_whence = SEEK_SET;
    fl->l_start = start;
    fl->l_len = len;
    return fcntl(fd, cmd, fl);
}

int dlock__file_setlk(int fd, int cmd, short type, off_t start)
{
    struct flock fl;

    return file_fcntl(fd, cmd, type, start, 1, &fl);
}

/* The start of a lock another description holds in [start, start + len)
 * that a lock of this type would conflict with (any lock, for F_WRLCK;
 * the kernel reports one of them, not necessarily the first), or -1 when
 * none; -2 on error. */
off_t dlock__file_locked(int fd, short type, off_t start, off_t len)
{
    struct flock fl;

    if (file_fcntl(fd, F_OFD_GETLK, type, start, len, &fl) != 0)
        return -2;
    return fl.l_type == F_UNLCK ? -1 : fl.l_start;
}

/* A waiting writer's mark (file.c): until when new readers stay out (0:
 * none). */
uint64_t dlock__file_mark_get(int fd)
{
    unsigned char b[8];

    return pread(fd, b, 8, MARK_AT) == 8 ? le64_get(b) : 0;
}

/* The mark if it keeps readers out at now, else 0. A mark further ahead
 * than a writer ever sets one is from before a reboot (the clock started
 * again): no writer waits. */
uint64_t dlock__file_mark_live(int fd, uint64_t now)
{
    uint64_t mark = dlock__file_mark_get(fd);

    return mark > now && mark <= now + WRITER_MARK_MS ? mark : 0;
}
