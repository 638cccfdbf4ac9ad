/*
 * zk.h: what the files of the zk:// backend share (private to
 * backends/zk/). The backend is ZooKeeper's lock recipe with the node names
 * Apache Curator uses; docs/backends/zk.md describes it for users.
 *
 * The files, top to bottom; each calls only files below it (no cycle,
 * checked by tests/arch/check_arch.py):
 *
 *   zk.c        the backend table, contexts and sessions (entry points)
 *   mutex.c     mode mutex: Curator InterProcessMutex names
 *   rwlock.c    mode rwlock: Curator InterProcessReadWriteLock names
 *   semaphore.c permits (mode mutex): Curator InterProcessSemaphoreV2
 *   inspect.c   inspect: who holds a name, how many wait
 *   latch.c     count-down latches: a node holding the count
 *   floor.c     the raw floor for `dlock bench` (bench-only)
 *   recipe.c    the lock recipe: acquire, renew, release
 *   call.c      the async-to-sync call layer: one request, our deadline
 *   conn.c      ZooKeeper sessions (zhandles), their watcher, waiters,
 *               the close-on-exec descriptor scan, the C client's log
 *   orphans.c   nodes of ours nobody wants: noted, swept on reconnect
 *   queue.c     reading a lock's children: ours, who is ahead, who holds
 *   conf.c      the URI: hosts, paths, the session timeout
 *
 * Cross-file names carry the prefix dlock__zk_; everything else is static.
 * The small classifications of ZooKeeper result codes are inline here,
 * since every file needs them.
 */
#ifndef DLOCK_BACKENDS_ZK_H
#define DLOCK_BACKENDS_ZK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <zookeeper/zookeeper.h>

#include "dlock/backend.h"

/* ---- constants ---------------------------------------------------------- */

#define ZK_DEFAULT_PORT   2181
#define ZK_PREFIX_MAX     512  /* chroot + base + namespace, validated */
#define ZK_SEGMENT_MAX    240  /* one escaped lock name */
#define ZK_PATH_MAX       1024 /* prefix + name + node name, with room */
#define ZK_NODE_MAX       256  /* a child name we keep (ours are 63 bytes) */
#define ZK_GUID_LEN       36   /* a UUID's canonical text */
#define ZK_DUPS_MAX       4    /* extra nodes of ours one listing can report */
#define ZK_SESSION_MIN_MS 100u
#define ZK_SESSION_MAX_MS 3600000u
/* Our own result code, next to ZooKeeper's (all <= 0): no answer came
 * before our deadline, and the call was abandoned. */
#define ZK_XTIMEOUT 1
/* grant->word[1]: the sequence number, and this flag when the create's
 * reply was lost on the way (release then sweeps for duplicates). */
#define ZK_W_DOUBT (1ull << 32)
/* Core's backoff between attempts: only connection errors are retried by
 * core (waiting is native), so give a reconnection a moment, not a busy
 * loop. */
#define ZK_RETRY_MIN_MS 20
#define ZK_RETRY_MAX_MS 500
/* A semaphore's children and its lease nodes' name (Curator's
 * InterProcessSemaphoreV2): <name>/locks holds an InterProcessMutex,
 * <name>/leases the permits. */
#define ZK_SEM_LOCKS "/locks"
#define ZK_SEM_LEASES "/leases"
#define ZK_SEM_LEASE "lease-"
/* What both modes really give. No DLOCK_CAP_LEASE: a lock never expires
 * while its holder's session lives, and the C client keeps the session
 * alive by itself; renewals only prove it (and feed dlock_held()). No
 * DLOCK_CAP_NOTIFY either: the watch on the predecessor wakes a native
 * wait (NATIVE_WAIT); there is no wait() for core's retry loop. */
#define ZK_CAPS \
    (DLOCK_CAP_CONN_BOUND | DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR | \
     DLOCK_CAP_SHARED | DLOCK_CAP_FENCING | DLOCK_CAP_SURVIVES_RECONNECT | \
     DLOCK_CAP_BATCH_RENEW | DLOCK_CAP_LATCH)
#define ZK_KINDS \
    (DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) | DLOCK_KIND_BIT(DLOCK_KIND_SHARED))
/* The fields of a mode object both modes share: they run one recipe
 * (recipe.c), so only their names, summaries, node names and (mutex.c)
 * permits differ. Each mode sets caps, kinds and acquire. */
#define ZK_MODE_COMMON \
    .retry_min_ms = ZK_RETRY_MIN_MS, .retry_max_ms = ZK_RETRY_MAX_MS, \
    .renew = dlock__zk_renew, .release = dlock__zk_release, \
    .inspect = dlock__zk_inspect, .floor = dlock__zk_floor, \
    .forget = dlock__zk_forget, \
    .latch = &dlock__zk_latch

/* ---- types -------------------------------------------------------------- */

/*
 * A mode of this backend: core's mode object first (core and the backend
 * table see only that), then what tells the modes apart, the names of
 * our nodes. A node is "_c_<uuid>-" + one of these + the sequence number.
 */
struct zk_mode {
    struct dlock_mode base;
    const char *node_exclusive; /* a writer's node */
    const char *node_shared;    /* a reader's node; must contain __READ__ */
};

struct zk_conn;

/* Per-client state: the parsed URI, the mode and the current session. */
struct zk_ctx {
    pthread_mutex_t mu;         /* cur and every conn's refs */
    struct zk_conn *cur;        /* the live session; replaced once expired */
    const struct zk_mode *mode; /* set by ctx_open; NULL in floor */
    char *hosts;                /* "h1:p1,h2:p2" for zookeeper_init */
    char prefix[ZK_PREFIX_MAX + 1]; /* chroot+base+/namespace, no final / */
    uint32_t session_ms;            /* asked for; the server may adjust it */
    uint32_t timeout_ms;            /* each call, and connecting */
};

/* A thread waiting for a node to go away (its predecessor). */
struct zk_waiter {
    const char *path;
    int fired;
    struct zk_waiter *next;
};

/* A node that may exist in our session although nobody wants it: a create
 * whose outcome we could not learn, or a delete that could not be sent.
 * Every node of ours in dir whose name carries guid is deleted once the
 * session is reachable. */
struct zk_orphan {
    struct zk_orphan *next;
    struct zk_conn *conn;
    int busy;    /* a sweep is under way */
    int pending; /* deletes in flight */
    int failed;  /* one of them failed: try again on the next connect */
    char guid[ZK_GUID_LEN + 1];
    char dir[];
};

struct zk_call;

/* One ZooKeeper session: a zhandle and what its watcher has told us. */
struct zk_conn {
    struct zk_ctx *ctx;
    zhandle_t *zh;
    int refs;           /* under ctx->mu: ctx, grants, calls running */
    pthread_mutex_t mu; /* everything below */
    pthread_cond_t cv;  /* session events and watch events */
    int connected;      /* the last session event said connected */
    atomic_int expired; /* the session is over for good */
    int closing;        /* zookeeper_close() is under way */
    uint64_t gen;       /* counts session events */
    atomic_int_fast64_t session_id;
    atomic_int timeout_ms;    /* the negotiated session timeout */
    atomic_int no_containers; /* the server refused a container node */
    atomic_int warned_lease;  /* said once that a lease is too long */
    atomic_int told_session;  /* logged the session's id and timeout */
    struct zk_waiter *waiters;
    struct zk_orphan *orphans;
    struct zk_call *abandoned; /* calls whose completion has not come */
    uint64_t seed_hi, seed_lo; /* our node ids: seed with a counter mixed in */
    atomic_uint_fast64_t next_id;
};

/* What a listing of a lock's children told us. */
struct zk_scan {
    /* For an acquire: our node, found by its uuid. */
    int found;
    int64_t self_seq;
    char self[ZK_NODE_MAX];
    int blocked;            /* nodes ahead of ours that we must wait for */
    char pred[ZK_NODE_MAX]; /* the nearest of them: the one to watch */
    int ndups;              /* more nodes of ours (a create sent twice) */
    int children;           /* all children, named as ours or not */
    int semaphore;          /* one is "leases": a semaphore's node */
    char dups[ZK_DUPS_MAX][ZK_NODE_MAX];
    /* For inspect: the lowest and highest nodes, how many hold the lock. */
    int total, holders;
    char first[ZK_NODE_MAX];
    char last[ZK_NODE_MAX];
};

enum zk_op { ZK_CREATE, ZK_CHILDREN, ZK_EXISTS, ZK_DELETE, ZK_GET };

/*
 * One asynchronous call (call.c). The caller fills it, issues the request,
 * and waits on cv (with conn->mu) until the completion sets done. If the
 * caller's deadline passes first it marks the call abandoned and forgets
 * it; the completion then frees it. Results are copied in the completion,
 * which also reads the children list there, so nothing is allocated per
 * call.
 */
struct zk_call {
    struct zk_conn *conn;
    pthread_cond_t cv;
    enum zk_op op;
    int done, abandoned;
    int rc;
    struct Stat stat;
    /* ZK_CHILDREN: what to look for, and what was found. */
    char guid[ZK_GUID_LEN + 1]; /* "" for inspect */
    int shared;
    struct zk_scan scan;
    /* ZK_CREATE: the new node's name; ZK_GET: the data. */
    char name[ZK_NODE_MAX];
    int datalen;
    struct zk_call *next; /* in conn->abandoned */
};

/* A dlock session: a thin wrapper over the client's one ZooKeeper session,
 * so core can run calls of many handles at once. */
struct zk_session {
    struct dlock_session base;
    struct zk_ctx *ctx;
    struct zk_call *call; /* for this session's calls, one at a time */
    char dir[ZK_PATH_MAX];
    char node[ZK_PATH_MAX];
    char aux[ZK_PATH_MAX];
};

/* What dlock__zk_take() got: our node and what its grant needs. */
struct zk_taken {
    uint64_t id;   /* the serial in our node's uuid */
    int64_t seq;   /* its sequence number */
    int64_t czxid; /* its creation, the fence */
    int64_t alive; /* when the server last answered us */
    int doubt;     /* its create's answer was lost */
};

/* What dlock__zk_listed() keeps between the listings of one acquire. */
struct zk_tries {
    int64_t doubt_since; /* listings in doubt since then; 0: none */
    int requeued;        /* times our node vanished and was made again */
};
/* dlock__zk_listed(): list again; make our node again. */
#define ZK_RELIST 1
#define ZK_RECREATE 2

/* ---- result codes (inline: every file needs them) ----------------------- */

/* The session is over: its nodes are gone or going. */
static inline int dlock__zk_gone(int rc)
{
    return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZCLOSING ||
           rc == ZAUTHFAILED;
}

/* No answer: the request may or may not have been applied. */
static inline int dlock__zk_in_doubt(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
           rc == ZSESSIONMOVED || rc == ZK_XTIMEOUT;
}

static inline const char *dlock__zk_err(int rc)
{
    return rc == ZK_XTIMEOUT ? "no answer before the deadline" : zerror(rc);
}

/* Free a call (NULL is fine). Inline because conn.c frees the abandoned
 * calls of a closing session and call.c, which makes them, is above it. */
static inline void dlock__zk_call_free(struct zk_call *k)
{
    if (k == NULL)
        return;
    pthread_cond_destroy(&k->cv);
    free(k);
}

/* ---- conf.c ------------------------------------------------------------- */

/* Read the URI into a new context: hosts, prefix, session timeout. */
int dlock__zk_parse(struct zk_ctx **out, const struct dlock_uri *u, char *err,
                    size_t errlen);
void dlock__zk_ctx_free(struct zk_ctx *x);
/* The lock's node, prefix + "/" + the name as one segment; its length. */
size_t dlock__zk_dir(const struct zk_ctx *x, char *out, const char *name,
                     size_t len);
/* Whether a lease leaves dlock_held() covered between renewals. */
int dlock__zk_lease_ok(uint32_t lease_ms, int session_ms);

/* ---- queue.c ------------------------------------------------------------ */

/* The sequence number at the end of a node name; 0 if it has none. */
int dlock__zk_seq_of(const char *name, size_t len, int64_t *seq);
/* Read a listing into sc (zeroed first by the caller): our node by guid
 * ("" for inspect), who is ahead of it, who holds. */
void dlock__zk_scan(struct zk_scan *sc, const char *guid, int shared,
                    const struct String_vector *v);

/* ---- orphans.c ---------------------------------------------------------- */

/* Note that dir may hold a node of ours with guid that nobody wants. */
void dlock__zk_orphan_add(struct zk_conn *c, const char *dir, const char *guid);
/* Start a sweep of the noted nodes, if connected. Never with c->mu held. */
void dlock__zk_sweep(struct zk_conn *c);
/* Forget every note (the session is closed). */
void dlock__zk_orphans_free(struct zk_conn *c);

/* ---- conn.c ------------------------------------------------------------- */

/* The C client's log hook: keeps the calling thread's last error. */
void dlock__zk_log(const char *message);
/* The one watcher of a connection (session and watch events). */
void dlock__zk_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx);
/* Start a new session (does not wait for it); NULL with *rc and err. */
struct zk_conn *dlock__zk_conn_new(struct zk_ctx *x, char *err, size_t errlen,
                                   int *rc);
void dlock__zk_conn_unref(struct zk_conn *c);
/* The current session with a reference, or a new one if it expired. */
int dlock__zk_conn_get(struct zk_session *zs, struct zk_conn **out);
/* ZOK, ZSESSIONEXPIRED or ZK_XTIMEOUT. */
int dlock__zk_wait_connected(struct zk_conn *c, int64_t deadline);
/* The same, reported on zs: DLOCK_OK or DLOCK_ECONNECT. */
int dlock__zk_ready(struct zk_session *zs, struct zk_conn *c, int64_t deadline);
/* Waiting for a watched node to go. */
void dlock__zk_waiter_add(struct zk_conn *c, struct zk_waiter *w,
                          const char *path, uint64_t *gen);
void dlock__zk_waiter_remove(struct zk_conn *c, struct zk_waiter *w);
void dlock__zk_sleep(struct dlock_session *s, struct zk_conn *c,
                     struct zk_waiter *w, uint64_t gen, int64_t deadline);

/* ---- call.c ------------------------------------------------------------- */

struct zk_call *dlock__zk_call_new(void);
/* The session's call slot (a new one after an abandoned call). */
struct zk_call *dlock__zk_slot(struct zk_session *zs);
void dlock__zk_call_reset(struct zk_call *k, struct zk_conn *c, enum zk_op op);
/* Wait for an issued call until deadline; ZK code or ZK_XTIMEOUT. */
int dlock__zk_finish(struct zk_call **slot, int issued, int64_t deadline);
/* The exists() completion, for renew's pipelined calls. */
void dlock__zk_stat_done(int rc, const struct Stat *stat, const void *data);
/* The requests dlock makes, each waited for until deadline; results in
 * zs->call. */
int dlock__zk_create(struct zk_session *zs, struct zk_conn *c, const char *path,
                     const char *data, int len, int mode, int64_t deadline);
int dlock__zk_children(struct zk_session *zs, struct zk_conn *c,
                       const char *dir, const char *guid, int shared,
                       int watch, int64_t deadline);
int dlock__zk_exists(struct zk_session *zs, struct zk_conn *c, const char *path,
                     int64_t deadline);
int dlock__zk_delete(struct zk_session *zs, struct zk_conn *c, const char *path,
                     int64_t deadline);
int dlock__zk_get(struct zk_session *zs, struct zk_conn *c, const char *path,
                  int watch, int64_t deadline);
/* Versioned set and delete (version -1: any), and exists() leaving our
 * watcher on path (fires on its creation, change or deletion). */
int dlock__zk_set(struct zk_session *zs, struct zk_conn *c, const char *path,
                  const char *data, int len, int version, int64_t deadline);
int dlock__zk_delete_version(struct zk_session *zs, struct zk_conn *c,
                             const char *path, int version, int64_t deadline);
int dlock__zk_exists_watch(struct zk_session *zs, struct zk_conn *c,
                           const char *path, int64_t deadline);
/* Report a ZooKeeper failure on zs with the dlock code it maps to. */
int dlock__zk_fail(struct zk_session *zs, int rc, const char *what);

/* ---- recipe.c: the methods both modes share ----------------------------- */

/* Pieces of the recipe that semaphore.c runs too (on zs->dir, zs->node). */
void dlock__zk_guid(const struct zk_conn *c, uint64_t serial,
                    char out[ZK_GUID_LEN + 1]);
int64_t dlock__zk_limit(const struct zk_ctx *x, int64_t deadline);
int dlock__zk_mkdirs(struct zk_session *zs, struct zk_conn *c, char *path,
                     int depth);
void dlock__zk_withdraw(struct zk_session *zs, struct zk_conn *c,
                        const char *dir, const char *self, const char *guid);
int dlock__zk_enqueue(struct zk_session *zs, struct zk_conn *c,
                      const struct dlock_request *req, const char *guid,
                      const char *what, int shared, int64_t *czxid,
                      int *doubt);
int dlock__zk_join(struct zk_session *zs, struct zk_conn *c,
                   const struct dlock_request *req, const char *what,
                   int shared, struct zk_taken *t, char *guid);
int dlock__zk_going(struct zk_session *zs, struct zk_conn *c,
                    int64_t deadline, const char *self, const char *guid);
int dlock__zk_listed(struct zk_session *zs, struct zk_conn *c, int rc,
                     const char *self, const char *guid, const char *what,
                     struct zk_tries *tries);
void dlock__zk_drop_dups(struct zk_session *zs, struct zk_conn *c,
                         const struct zk_scan *scan, const char *guid);
int dlock__zk_begin(struct zk_session *zs, const struct dlock_request *req,
                    int64_t deadline, struct zk_conn **out);
int dlock__zk_take(struct zk_session *zs, struct zk_conn *c,
                   const struct dlock_request *req, const char *what,
                   int shared, int64_t deadline, struct zk_taken *t);
void dlock__zk_grant(struct zk_conn *c, const struct zk_taken *t,
                     struct dlock_grant *grant);

int dlock__zk_acquire(struct dlock_session *s, const struct dlock_request *req,
                      int64_t deadline, struct dlock_grant *grant,
                      uint32_t *retry_ms);
int dlock__zk_renew(struct dlock_session *s, struct dlock_renewal *items,
                    size_t n);
int dlock__zk_release(struct dlock_session *s, const struct dlock_request *req,
                      struct dlock_grant *grant);

/* ---- latch.c: count-down latches ---------------------------------------- */

extern const struct dlock_latch_ops dlock__zk_latch;

/* ---- inspect.c, floor.c ------------------------------------------------- */

int dlock__zk_inspect(struct dlock_session *s, const char *name, size_t len,
                      dlock_state *out);
int dlock__zk_floor(const struct dlock_uri *uri, const char *name, uint32_t n,
                    uint64_t *ns_out, char *err, size_t errlen);
/* dlock_mode.forget of every mode: each name's node and what is under it
 * (the bench's clean-up). */
int dlock__zk_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen);

/* ---- semaphore.c -------------------------------------------------------- */

/* Mode mutex's acquire: permits by Curator's semaphore, the rest by
 * dlock__zk_acquire(). */
int dlock__zk_sem_acquire(struct dlock_session *s,
                          const struct dlock_request *req, int64_t deadline,
                          struct dlock_grant *grant, uint32_t *retry_ms);

/* ---- mutex.c, rwlock.c -------------------------------------------------- */

extern const struct zk_mode dlock__zk_mutex;
extern const struct zk_mode dlock__zk_rwlock;

#endif /* DLOCK_BACKENDS_ZK_H */
