/*
 * file.h: what the file:// backend's files share: the lock file's layout,
 * the session, and the helpers of files.c that the others use.
 *
 * A lock file (file.c says why each part is there):
 *   bytes [0, 8)            the fencing counter (little-endian)
 *   bytes [8, 72)           the last exclusive holder's owner id
 *   bytes [72, 80)          a waiting writer's mark (MARK_AT)
 *   bytes [80, 88)          a semaphore's number of permits (COUNT_AT)
 * Lock ranges, independent of the data: byte 0 the lock itself, byte 1 a
 * short gate, byte 2 the waiters' read locks (WAIT_BYTE, wait.c), and the
 * permit slots from SLOT_AT.
 */
#ifndef DLOCK_BACKEND_FILE_H
#define DLOCK_BACKEND_FILE_H

#include <stdint.h>
#include <sys/types.h>

#include "dlock/backend.h"

#define FILE_SEGMENT_MAX 240 /* + ".lock" stays under NAME_MAX (255) */
#define OWNER_MAX 64
#define RECORD_SIZE (8 + OWNER_MAX)
#define MARK_AT RECORD_SIZE      /* the waiting writer's mark */
#define COUNT_AT (MARK_AT + 8)   /* a semaphore's number of permits */
#define WAIT_BYTE 2              /* waiters' read locks (wait.c) */
#define SLOT_AT 4096             /* permit slot bytes (locks, no data) */
#define WRITER_MARK_MS 1000

extern const struct dlock_backend dlock__backend_file;
extern const struct dlock_latch_ops dlock__file_latch;

struct file_session {
    struct dlock_session base;
    int dirfd;
    gid_t gid; /* group=: the lock files' group, or NO_GROUP */
    int ifd;   /* inotify, for wait(); -1 until the first wait */
    /* The last exclusive release here that others waited for (wait.c). */
    uint64_t handoff_owner; /* its owner id, hashed (a handle's: one name) */
    uint64_t handoff_fence; /* the fence it was taken with */
    int64_t handoff_ms;    /* when; 0: none */
    uint64_t woken_name;   /* the name a wait() here last ended free for */
    int woken;             /* ... and whether it did (for ..._taken()) */
    int handed;            /* the lock held here came after such a wait */
};

#define NO_GROUP ((gid_t)-1)

static inline uint64_t le64_get(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline void le64_put(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

/* files.c */
void dlock__file_name(char fname[FILE_SEGMENT_MAX + 8], const char *name,
                      size_t len);
int dlock__file_open_at(int dirfd, const char *fname, gid_t gid);
int dlock__file_open_lock(int dirfd, const char *name, size_t len, gid_t gid);
int dlock__file_setlk(int fd, int cmd, short type, off_t start);
off_t dlock__file_locked(int fd, short type, off_t start, off_t len);
uint64_t dlock__file_mark_get(int fd);
uint64_t dlock__file_mark_live(int fd, uint64_t now);

/* wait.c */
int dlock__file_wait(struct dlock_session *s, const struct dlock_request *req,
                     uint32_t max_ms);
void dlock__file_announce(struct dlock_session *s, int fd,
                          const struct dlock_request *req, uint64_t fence);
void dlock__file_taken(struct dlock_session *s,
                       const struct dlock_request *req);
int dlock__file_defer(struct dlock_session *s, int fd,
                      const struct dlock_request *req, int64_t now,
                      uint32_t *retry_ms);

#endif
