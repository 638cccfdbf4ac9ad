/*
 * rd.h: what the files of the redis:// backend (and its alias redlock://)
 * share, and nothing outside the backend includes: the URI's settings, the
 * per-client context, a session, a mode's private half, a Redlock node, and
 * each file's cross-file names (dlock__rd_*). The backend as a whole is
 * described at the top of redis.c and in docs/backends/redis.md.
 *
 * The files, from the top down; each calls only files further down this
 * list (no call or include cycle: tests/arch/check_arch.py checks it from
 * the objects):
 *
 *   redis.c     the backend table, its modes, pick_mode (redlock:// and
 *               redlock=1), the per-client context, sessions' open/close
 *   setnx.c     mode setnx: its keys ("dlock:{ns:name}"), its Lua, its
 *               mode object (Redlock uses its keys and two of its scripts)
 *   rwlock.c    mode rwlock: Redisson's RReadWriteLock names and Lua
 *   fair.c      mode fair: Redisson's RFairLock queue, its Lua, and the
 *               native wait that keeps a waiter's place alive
 *   queue.c     mode queue: a FIFO whose release hands the lock to the
 *               first live waiter; its Lua and its native wait
 *   hash.c      mode hash: Redisson's RLock names and Lua, and its
 *               RPermitExpirableSemaphore's for permits
 *   redlock.c   mode redlock: acquire, renew, release over N masters
 *   single.c    what setnx, hash, rwlock, fair and queue share: a session's one
 *               connection, acquire, pipelined renew, release
 *   latch.c     count-down latches of those modes: Redisson's
 *               RCountDownLatch key, scripts and channel
 *   pubsub.c    the per-client pub/sub connection, its thread, wait()
 *   inspect.c   inspect on one server and on Redlock's nodes
 *   floor.c     the raw floor of `dlock bench` (bench-only)
 *   restart.c   Redlock's delayed restart: which nodes count
 *   rounds.c    Redlock's nodes: connections and parallel rounds
 *   sentinel.c  sentinel=: the master found through the sentinels
 *   replicas.c  sync_replicas=: WAIT after each script
 *   cluster.c   cluster=1 for setnx and hash: the slot map, a connection
 *               per master, MOVED/ASK/TRYAGAIN, the connections' watcher
 *   conn.c      connections (SOCK_CLOEXEC, then hiredis), the AUTH/
 *               SELECT/SCRIPT LOAD/INFO pipeline, run_id tracking,
 *               running a script, replies and errors
 *   keys.c      key buffers, a request's keys and script, and a
 *               script's command built from the keys
 *   conf.c      the URI read into struct dlock__rd_conf (sentinel=,
 *               sync_replicas= and sync_timeout= too)
 *   nopipe.c    hiredis's calls that write, with SIGPIPE held back: the
 *               only way the backend writes (hiredis uses write(2))
 */
#ifndef DLOCK_RD_H
#define DLOCK_RD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "dlock/backend.h"

#define RD_DEFAULT_PORT 6379
#define RD_NODES_MAX 15
/* Masters of a Redis Cluster a session can route to (cluster.c). */
#define RD_CLUSTER_NODES_MAX 64
/* Escaped name segments inside the {hash tag}; longer names are hashed. */
#define RD_SEG_MAX 200

/* ---- configuration from the URI (conf.c) --------------------------------- */

struct dlock__rd_addr {
    char host[256];
    int port;
};

struct dlock__rd_conf {
    size_t nhosts;
    struct dlock__rd_addr hosts[RD_NODES_MAX];
    char *user, *password; /* owned copies; NULL when absent */
    unsigned int db;
    uint32_t timeout_ms;       /* each command and connect */
    uint32_t node_timeout_ms;  /* redlock: one round on all nodes */
    uint32_t drift_ms;         /* redlock: fixed part of the clock drift */
    uint32_t lease_ms;         /* the URI's lease= */
    uint32_t restart_delay_ms; /* redlock: 0 = no delayed restart */
    char ns[RD_SEG_MAX + 1];   /* setnx/redlock: escaped namespace */
    char *raw_ns;              /* hash: the namespace as given, or NULL */
    bool prefer_writer;        /* rwlock: prefer=writer */
    /* sentinel.c: the hosts are sentinels of this master, "" none. */
    char sentinel[128];
    /* replicas.c: WAIT for this many replicas (RD_SYNC_MAJORITY), 0 off. */
    int sync_replicas;
    uint32_t sync_timeout_ms;
    bool cluster;              /* cluster=1: hosts are a cluster's seeds */
    /* fair: wait_time= (Redisson's threadWaitTime) and clock=server */
    uint32_t wait_time_ms;
    bool server_clock;
};

#define RD_SYNC_MAJORITY (-1)

struct dlock__rd_mode;

/* Read and check everything the URI says for mode m (on one server, or on
 * Redlock's N nodes); each message names its part. */
int dlock__rd_conf_parse(struct dlock__rd_conf *cf, const struct dlock_uri *u,
                         const struct dlock__rd_mode *m, char *err,
                         size_t errlen);
void dlock__rd_conf_free(struct dlock__rd_conf *cf);

/* ---- keys and script commands (keys.c) ----------------------------------- */

/* A grow-only buffer: the keys of 64 KiB names in hash mode. */
struct dlock__rd_buf {
    char *p;
    size_t len, cap;
};

/* The keys of one name, laid out by the mode (its keys method): lock is
 * the key whose existence says "held" (setnx's lock key, Redisson's hash),
 * fence the fencing counter, channel where releases are published; fair
 * adds Redisson's wait queue and timeout set, and two values its scripts
 * take, set with the keys before each script: wait (wait_time= in ms) and
 * now (the client's wall clock in ms, or "0": the script reads TIME). */
struct dlock__rd_keys {
    struct dlock__rd_buf lock, fence, channel, queue, timeouts;
    char wait[16], now[24];
    /* What the request asks (rwlock's RD_ARG_KIND): "r" read, "w" write,
     * "W" write ahead of new readers (prefer=writer), "p" one permit of a
     * semaphore (hash: its keys and the RD_SC_P_* scripts); set per call
     * by dlock__rd_req_keys(), NULL reads as "w". */
    const char *kind;
    /* A permit request's count of permits, as text (RD_ARG_PERMITS);
     * timeouts then holds Redisson's "{name}:timeout" set. */
    char permits[12];
    /* queue: this acquire's own number (RD_ARG_NONCE), which its queue
     * entry and its grant message carry. */
    char nonce[24];
};

struct dlock__rd_session;
/* Lay out rs->keys for req with its mode's keys method: kind and
 * permits first (rwlock reads the kind, hash lays out a semaphore's
 * keys for "p"); 0, or -1 out of memory. */
int dlock__rd_req_keys(struct dlock__rd_session *rs,
                       const struct dlock_request *req);
/* The script a session runs for `which` (RD_SC_ACQUIRE, _RELEASE,
 * _RENEW) on keys k: a permit's own (RD_SC_P_*) when k is laid out for
 * one. */
int dlock__rd_script_of(const struct dlock__rd_keys *k, int which);

/* Make room for want bytes; 0, or -1 out of memory. */
int dlock__rd_buf_reserve(struct dlock__rd_buf *b, size_t want);
/* b = a || m || z, NUL-terminated; 0 or -1. */
int dlock__rd_buf_set(struct dlock__rd_buf *b, const char *a, size_t alen,
                      const char *m, size_t mlen, const char *z,
                      size_t zlen);
void dlock__rd_keys_free(struct dlock__rd_keys *k);
/* Redisson's prefixName(): b = "prefix:{name}", or "prefix:name" when the
 * name already has a '{' (then it carries its own hash tag); 0 or -1. */
int dlock__rd_prefix_name(struct dlock__rd_buf *b, const char *prefix,
                          const char *name, size_t len);

/* The scripts of a mode, loaded on each of its connections; a mode
 * without queue leaves RD_SC_QUEUE and _GIVEUP NULL, one without permits
 * the RD_SC_P_* ones. */
enum {
    RD_SC_ACQUIRE, /* one attempt */
    RD_SC_RELEASE,
    RD_SC_RENEW,
    RD_SC_QUEUE,   /* fair, queue: an attempt that queues (or stays
                      queued) */
    RD_SC_GIVEUP,  /* fair, queue: leave the queue */
    RD_SC_P_ACQUIRE, /* hash: a permit of a semaphore (Redisson's */
    RD_SC_P_RELEASE, /* RPermitExpirableSemaphore), in the order of */
    RD_SC_P_RENEW,   /* RD_SC_ACQUIRE, _RELEASE, _RENEW */
    RD_SC_COUNT
};

/* What a script takes, in order: KEYS first, then ARGV. */
enum {
    RD_ARG_LOCK,    /* keys.lock */
    RD_ARG_FENCE,   /* keys.fence */
    RD_ARG_CHANNEL, /* keys.channel */
    RD_ARG_OWNER,   /* the request's owner id */
    RD_ARG_LEASE,   /* the lease in ms, as text */
    RD_ARG_ZERO,    /* "0": Redisson's unlock message */
    RD_ARG_KIND,    /* keys.kind */
    RD_ARG_QUEUE,   /* keys.queue */
    RD_ARG_TIMEOUTS, /* keys.timeouts */
    RD_ARG_WAIT,    /* keys.wait */
    RD_ARG_NOW,     /* keys.now */
    RD_ARG_PERMITS, /* keys.permits */
    RD_ARG_NONCE    /* keys.nonce */
};
#define RD_ARGS_MAX 9

/* A Lua script and its signature, defined beside the mode that runs it. */
struct dlock__rd_script {
    const char *lua;
    int nkeys;                       /* the first nkeys of arg are KEYS */
    int nargs;                       /* KEYS and ARGV together */
    unsigned char arg[RD_ARGS_MAX];  /* RD_ARG_* */
};

typedef char dlock__rd_sha[41];

/* One command as argv (EVALSHA of a script, or a plain one). */
struct dlock__rd_cmd {
    int argc;
    const char *argv[3 + RD_ARGS_MAX];
    size_t lens[3 + RD_ARGS_MAX];
};

/* EVALSHA sha nkeys KEYS... ARGV... of sc for keys k, owner and lease
 * (text). c points into k, owner, lease and sha: they must outlive it. */
void dlock__rd_cmd_evalsha(struct dlock__rd_cmd *c,
                           const struct dlock__rd_script *sc, const char *sha,
                           const struct dlock__rd_keys *k, const char *owner,
                           size_t owner_len, const char *lease);

/* ---- the per-client context ---------------------------------------------- */

enum dlock__rd_chan_state { RD_CH_NONE, RD_CH_PENDING, RD_CH_SUBSCRIBED,
                            RD_CH_LEAVING };

/* One channel the pub/sub connection serves (pubsub.c). */
struct dlock__rd_chan {
    struct dlock__rd_chan *next;
    char *name;
    size_t len;
    int refs;                /* waiters inside wait() */
    enum dlock__rd_chan_state state;
    uint64_t gen;            /* counts releases (and connection losses) */
    uint64_t confirmed_ns;   /* when the subscription was confirmed */
    uint64_t last_msg_ns;    /* when the last release was seen */
    int64_t idle_since_ms;   /* refs fell to 0 */
    /* The last message's text, cut to fit (queue.c reads its grants
     * here: a waiter's own channel carries nothing else). */
    char msg[64];
    pthread_cond_t cv;
};

/* The pub/sub part of a client whose mode notifies (setnx, hash, rwlock,
 * fair, queue): one connection, owned by one thread, for every channel its
 * waiters wait on. Everything below on is under mu. */
struct dlock__rd_pubsub {
    bool on;                /* set up (a NOTIFY mode) */
    const struct dlock__rd_conf *cf;
    pthread_mutex_t mu;
    struct dlock__rd_chan *chans;
    pthread_t thread;
    bool started, stop;
    int wake_fd;            /* eventfd: work for the thread */
    uint64_t epoch;         /* bumped when a connect attempt fails */
    bool connected;
    /* cluster=1: one of these per master, SSUBSCRIBE on addr (sharded
     * pub/sub, Redis 7); else SUBSCRIBE on the URI's host */
    bool sharded;
    struct dlock__rd_addr addr;
};

/*
 * What a client knows of one server (a Redlock node, or the one server of
 * setnx/hash): who it is (run_id, new at every start) and since when it
 * has been up. Every new connection reads INFO server in its connect round
 * trip, so this costs no round trip of its own.
 */
struct dlock__rd_ident {
    char run_id[41];     /* the last seen; "" until the first */
    uint64_t gen;        /* how many times run_id changed: restarts seen */
    int64_t up_since_ms; /* dlock_now_ms() clock: the latest moment the
                            server can have started (INT64_MIN unknown) */
    int64_t changed_ms;  /* when a new run_id was first seen, 0 never */
};

/*
 * sentinel=: a thread subscribed to +switch-master on a sentinel, and the
 * descriptors of the client's sessions, which it shuts down when the
 * master changes (sentinel.c). Under mu.
 */
struct dlock__rd_switch {
    bool on;
    pthread_mutex_t mu;
    int *fds;
    size_t nfds, cap;
    pthread_t thread;
    bool started, stop;
    int wake_fd;       /* eventfd: stop */
    uint64_t switches; /* +switch-master messages for our master */
};


struct dlock__rd_ctx {
    const struct dlock__rd_mode *m;
    struct dlock__rd_conf conf;
    struct dlock__rd_pubsub ps;
    struct dlock__rd_switch sw;
    /* cluster=1: the mode with SPUBLISH in its scripts (x->m points
     * here), and a sharded pub/sub per master, made by wait() (pubsub.c)
     * under id_mu */
    struct dlock__rd_mode *cmode;
    struct dlock__rd_script cscript[RD_SC_COUNT];
    struct dlock__rd_pubsub *shard[RD_CLUSTER_NODES_MAX];
    /* Who the servers are, under id_mu. */
    pthread_mutex_t id_mu;
    struct dlock__rd_ident ident[RD_NODES_MAX];
    uint32_t longest_lease_ms; /* of every lease this client asked for */
};

/* ---- sessions ------------------------------------------------------------ */

/* A release a Redlock node may still need (rounds.c): the keys and owner
 * of a SET that may have landed there after its round gave up on it. */
#define RD_OWED_MAX 16
struct dlock__rd_owed {
    struct dlock__rd_keys keys; /* lock and channel */
    char *owner;
    size_t owner_len;
    bool done;                  /* answered in the current round */
};

/* One Redlock node of a session (rounds.c). */
struct dlock__rd_node {
    redisContext *rc;  /* NULL while down */
    int64_t retry_at;  /* no reconnect before this (dlock_now_ms) */
    uint32_t backoff;
    bool sent;         /* in the current round */
    size_t got;        /* replies read in the current round */
    redisReply **rep;  /* [ncmds] of the current round */
    size_t repcap;
    char err[320];     /* why it is down, for messages */
    bool refused;      /* down because it refused the credentials */
    bool missed;       /* sent to in the last round, not answered in
                          full: what it was sent may still land */
    struct dlock__rd_owed *owed; /* [nowed], sent first in every round */
    size_t nowed, npre, pre_got; /* owed sent in this round, answered */
};

struct dlock__rd_session {
    struct dlock_session base;
    const struct dlock__rd_mode *m;
    const struct dlock__rd_conf *cf;
    struct dlock__rd_ctx *x;  /* the client's (NULL in the floor) */
    redisContext *rc;         /* single node */
    uint64_t gen;             /* single node: its generation at connect */
    char note[256];           /* a restart seen at connect, to log */
    dlock__rd_sha sha[RD_SC_COUNT];
    struct dlock__rd_keys keys;
    uint64_t attempt_ns;      /* when the last acquire was sent */
    int nreplicas;            /* ROLE's replicas at connect (sentinel=,
                                 sync_replicas=majority), else 0 */
    /* cluster=1: the slot map and a connection per master (cluster.c);
     * rc is then the connection of the last command */
    struct dlock__rd_cluster *cl;
    char why[320];            /* cluster: why the last routing failed */
    /* Redlock */
    struct dlock__rd_node *nodes;
    size_t nnodes, quorum;
};

/*
 * A mode: what core sees first (the table lists &m->base, and ctx_open()
 * gets it back), then what the backend's shared code needs of it.
 */
struct dlock__rd_mode {
    struct dlock_mode base;
    /* Redlock's N masters: several hosts, node_timeout=, drift=,
     * restart_delay=; no /db. */
    bool nodes;
    /* A wait queue at the server (fair): wait_time= and clock=. */
    bool queue;
    /* A wait queue whose release hands the lock over (queue): no
     * cluster=1, no sync_replicas=. */
    bool handoff;
    /* The scripts, by RD_SC_*: loaded on each connection. */
    const struct dlock__rd_script *script[RD_SC_COUNT];
    /* Lay out the keys of a name into k (0, or -1 out of memory). */
    int (*keys)(struct dlock__rd_keys *k, const struct dlock__rd_conf *cf,
                const char *name, size_t len);
    /* One server: the release script's answer for "not ours" (every
     * answer above it released, or counted down, our hold). */
    long long release_refused;
    /* One server: the command that reads the holder, for inspect, and
     * what a holder's field may carry after the owner id (rwlock's
     * writer: ":write"), or NULL. */
    const char *inspect_read;
    const char *holder_suffix;
    /* Connect a new session (rs->m, cf, x are set), or disconnect it. */
    int (*open)(struct dlock__rd_session *rs, char *err, size_t errlen);
    void (*close)(struct dlock__rd_session *rs);
};

/*
 * What setnx, hash and rwlock have in common in their mode objects
 * (inside .base): one server, a fencing counter, a release published to the
 * waiters, who sleep on the pub/sub connection (pubsub.c); the methods are
 * single.c's. retry_max bounds one wait when a release message cannot come
 * (pub/sub down).
 */
#define RD_SINGLE_CAPS                                                      \
    (DLOCK_CAP_LEASE | DLOCK_CAP_NOTIFY | DLOCK_CAP_FENCING |               \
     DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW |                 \
     DLOCK_CAP_REPLICA_WAIT | DLOCK_CAP_LATCH)
#define RD_SINGLE_MODE_METHODS                                              \
    .retry_min_ms = 5, .retry_max_ms = 1000,                                \
    .acquire = dlock__rd_single_acquire, .renew = dlock__rd_single_renew,   \
    .release = dlock__rd_single_release, .wait = dlock__rd_wait,            \
    .inspect = dlock__rd_inspect_single,                                    \
    .latch = &dlock__rd_latch, .floor_wait = dlock__rd_floor_wait,          \
    .server_cpu = dlock__rd_server_cpu
#define RD_SINGLE_MODE_BASE                                                 \
    .caps = RD_SINGLE_CAPS, .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE),  \
    RD_SINGLE_MODE_METHODS

/*
 * Every grant's token is max(counter + 1, the server's clock in
 * microseconds), and the counter is set to it. Both halves matter:
 *   - the counter alone would start again at 1 after it is lost (a restart
 *     without persistence, an eviction, a failover to a replica that had
 *     not seen it), and would go back to an old value when the server
 *     restarts from an RDB snapshot taken before the last grants;
 *   - the clock alone would repeat or go back when the server's clock is
 *     set back.
 * So tokens grow across a data loss as long as grants come slower than one
 * per microsecond (each is a round trip) and the clock did not step back,
 * and across a clock step as long as the counter was kept.
 * Lua for the acquire scripts of setnx, hash and fair, the counter being
 * KEYS[k]; leaves the token in the local `fence`.
 */
#define RD_LUA_FENCE_NEXT_AT(k)                                             \
    "local t = redis.call('time') "                                        \
    "local us = t[1] .. string.format('%06d', tonumber(t[2])) "            \
    "local fence = redis.call('incr', KEYS[" k "]) "                       \
    "if fence < tonumber(us) then "                                        \
    "  redis.call('set', KEYS[" k "], us) "                                \
    "  fence = tonumber(us) "                                              \
    "end "
#define RD_LUA_FENCE_NEXT RD_LUA_FENCE_NEXT_AT("2")

/* ---- conn.c: connections, scripts, replies ------------------------------- */

/* Who answered on a new connection, from INFO server. */
struct dlock__rd_info {
    char run_id[41];    /* "" when INFO was refused or had none */
    uint32_t uptime_s;  /* uptime_in_seconds */
    int64_t at_ms;      /* dlock_now_ms() when the reply was read */
    char why[128];      /* why run_id is "" */
};

/* Connect to one server: TCP (close-on-exec) with timeout, then AUTH,
 * SELECT, SCRIPT LOAD of m's scripts (if sha) and INFO server (if info) in
 * one round trip. NULL on failure: err says why, *code is DLOCK_ECONNECT
 * or DLOCK_ERROR (refused). */
redisContext *dlock__rd_connect(const struct dlock__rd_conf *cf,
                                const struct dlock__rd_addr *a,
                                uint32_t timeout_ms,
                                const struct dlock__rd_mode *m,
                                dlock__rd_sha *sha,
                                struct dlock__rd_info *info, char *err,
                                size_t errlen, int *code);
/* A new connection to server i answered INFO: record who it is; returns
 * its generation (restarts seen); a restart is described in note. */
uint64_t dlock__rd_ident_seen(struct dlock__rd_ctx *x, size_t i,
                              const struct dlock__rd_info *in, char *note,
                              size_t cap);
/* The server forgot its scripts (SCRIPT FLUSH). */
bool dlock__rd_noscript(const redisReply *r);
/* Run script `which` of the session's mode on rs->keys: EVALSHA, and EVAL
 * of the text if the server forgot it. NULL: the connection failed. */
redisReply *dlock__rd_run(struct dlock__rd_session *rs, int which,
                          const char *owner, size_t owner_len,
                          const char *lease);
/* A {integer, integer} reply; 0, or -1 for anything else. */
int dlock__rd_reply_pair(const redisReply *r, long long *a, long long *b);
/* Report an unexpected reply, or the connection's failure, on rs. */
int dlock__rd_reply_error(struct dlock__rd_session *rs, const redisReply *r);
int dlock__rd_io_error(struct dlock__rd_session *rs, int code,
                       const char *op);
/* Log a restart seen while connecting, once (open() cannot log yet). */
void dlock__rd_log_note(struct dlock__rd_session *rs);

/* ---- sentinel.c, replicas.c: Sentinel and WAIT ----------------------------- */

/* dlock__rd_connect to the one server: hosts[0], or (sentinel=) the master
 * the sentinels name, checked by ROLE. *at: where it connected;
 * *nreplicas: the replicas ROLE listed (when it was asked). */
redisContext *dlock__rd_connect_master(const struct dlock__rd_conf *cf,
                                       const struct dlock__rd_mode *m,
                                       dlock__rd_sha *sha,
                                       struct dlock__rd_info *info,
                                       struct dlock__rd_addr *at,
                                       int *nreplicas, char *err,
                                       size_t errlen, int *code);
/* sentinel=: start the +switch-master thread; stop it. */
int dlock__rd_switch_start(struct dlock__rd_ctx *x, char *err, size_t errlen);
void dlock__rd_switch_stop(struct dlock__rd_switch *sw);
/* A session's connection, shut down on a switch (fd -1: none); add after
 * the connect, remove before the close. No-ops without sentinel=. */
void dlock__rd_switch_add(struct dlock__rd_session *rs, int fd);
void dlock__rd_switch_remove(struct dlock__rd_session *rs, int fd);
/* How many replicas WAIT asks for on this session. */
int dlock__rd_sync_want(const struct dlock__rd_session *rs);
/* Append WAIT want sync_timeout; read its answer into *acks. */
int dlock__rd_wait_append(struct dlock__rd_session *rs);
int dlock__rd_wait_read(struct dlock__rd_session *rs, long long *acks,
                        const char *op);
/* dlock__rd_run, then (sync_replicas=) WAIT in the same round trip:
 * *acks its answer (-1 when off). NULL: *code, or DLOCK_OK when the
 * connection failed. */
redisReply *dlock__rd_run_sync(struct dlock__rd_session *rs, int which,
                               const char *owner, size_t owner_len,
                               const char *lease, long long *acks,
                               int *code);
/* DLOCK_EREPLICAS: "WHAT: K of N replicas confirmed within T ms". */
int dlock__rd_sync_short(struct dlock__rd_session *rs, long long acks,
                         uint64_t took_ns, const char *what);

/* ---- rounds.c: Redlock's nodes and rounds -------------------------------- */

/* Connect the session to its nodes; ECONNECT without a majority. */
int dlock__rd_nodes_open(struct dlock__rd_session *rs, char *err,
                         size_t errlen);
void dlock__rd_nodes_close(struct dlock__rd_session *rs);
/* Reconnect the nodes that are down and due (every node if force, or if
 * fewer than a majority are up), reading who each one is. */
void dlock__rd_reconnect(struct dlock__rd_session *rs, bool force);
/* Send cmds to every live node, read until each answered all or
 * deadline_ns; nd->got == ncmds for the nodes that answered in full.
 * Returns how many did, or -1 (no memory). */
int dlock__rd_round(struct dlock__rd_session *rs, struct dlock__rd_cmd *cmds,
                    size_t ncmds, uint64_t deadline_ns);
/* Free the replies of the last round. */
void dlock__rd_round_free(struct dlock__rd_session *rs);
/* Owe node i the release of keys for owner: it goes first in every round
 * the node is sent until the node answers it. -1 out of memory. */
int dlock__rd_owe(struct dlock__rd_session *rs, size_t i,
                  const struct dlock__rd_keys *keys, const char *owner,
                  size_t owner_len);
/* Try now, once, to reach the down nodes that are owed a release and send
 * it, each connect and the round bounded by node_timeout. */
void dlock__rd_pay_owed(struct dlock__rd_session *rs);
/* " (the first reason a node is down)", or "", for messages. */
const char *dlock__rd_nodes_why(const struct dlock__rd_session *rs,
                                char *buf, size_t cap);

/* ---- restart.c: Redlock's delayed restart -------------------------------- */

/* What the nodes that answered a round in full said about one item:
 * yes/no counted, and yes/no of nodes still in their restart delay. */
struct dlock__rd_tally {
    size_t yes, no, late_yes, late_no;
};

/* Remember a lease asked for: it raises the restart delay for good. */
void dlock__rd_note_lease(struct dlock__rd_session *rs, uint32_t lease_ms);
/* Which nodes count at now (bit i for node i); *wait_ms: until the first
 * one left out counts (0 if none); *delay_out: the delay in force. */
uint32_t dlock__rd_counting(struct dlock__rd_session *rs, int64_t now,
                            int64_t *wait_ms, uint32_t *delay_out);
/* "; N of them restarted ...", or "" when no answer was left out. */
const char *dlock__rd_late_text(char *buf, size_t cap,
                                const struct dlock__rd_tally *t,
                                uint32_t delay, int64_t wait_ms);

/* ---- floor.c, inspect.c, pubsub.c, single.c: shared methods -------------- */

/* The raw floors: one server (setnx, hash), Redlock's nodes. */
int dlock__rd_floor_single(const struct dlock__rd_mode *m,
                           const struct dlock_uri *uri, const char *name,
                           uint32_t n, uint64_t *ns_out, char *err,
                           size_t errlen);
int dlock__rd_floor_nodes(const struct dlock__rd_mode *m,
                          const struct dlock_uri *uri, const char *name,
                          uint32_t n, uint64_t *ns_out, char *err,
                          size_t errlen);
/* The contended floor (SET NX PX spinning) and INFO cpu's CPU time of
 * the one server: dlock_mode.floor_wait and .server_cpu of every
 * single-server mode. */
int dlock__rd_floor_wait(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen);
int dlock__rd_server_cpu(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, uint64_t *ns_out,
                         char *err, size_t errlen);
/* The bench's clean-up (dlock_mode.forget of every mode): UNLINK every
 * key of each name, on its server or on every node. */
int dlock__rd_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen);

int dlock__rd_inspect_single(struct dlock_session *s, const char *name,
                             size_t len, dlock_state *out);
int dlock__rd_inspect_nodes(struct dlock_session *s, const char *name,
                            size_t len, dlock_state *out);

int dlock__rd_pubsub_init(struct dlock__rd_pubsub *ps,
                          const struct dlock__rd_conf *cf, char *err,
                          size_t errlen);
void dlock__rd_pubsub_stop(struct dlock__rd_pubsub *ps);
int dlock__rd_wait(struct dlock_session *s, const struct dlock_request *req,
                   uint32_t max_ms);
/* fair.c's and queue.c's waiter: its own channel (name), held subscribed
 * through a native wait. hold() starts holding and waits for the
 * subscription to be confirmed, at most until deadline; NULL only when out
 * of memory. sleep() waits for a message on it (or the pub/sub
 * connection's loss) after *gen, the deadline or a cancel: 1 woken (*gen
 * moves on; msg, if cap > 0, gets the last message's text, "" if none
 * came), 0 the deadline, or the cancel's code. drop() lets it go: it is
 * unsubscribed LINGER_MS after nobody holds it, or at once if at_once
 * (queue.c: a waiter that could not leave the line must not look alive). */
struct dlock__rd_chan *dlock__rd_sub_hold(struct dlock__rd_session *rs,
                                          const struct dlock__rd_buf *name,
                                          int64_t deadline, uint64_t *gen);
int dlock__rd_sub_sleep(struct dlock__rd_session *rs,
                        struct dlock__rd_chan *c, uint64_t *gen,
                        int64_t deadline, char *msg, size_t cap);
void dlock__rd_sub_drop(struct dlock__rd_session *rs,
                        struct dlock__rd_chan *c, bool at_once);

int dlock__rd_single_open(struct dlock__rd_session *rs, char *err,
                          size_t errlen);
void dlock__rd_single_close(struct dlock__rd_session *rs);
int dlock__rd_single_acquire(struct dlock_session *s,
                             const struct dlock_request *req,
                             int64_t deadline_ms, struct dlock_grant *grant,
                             uint32_t *retry_ms);
int dlock__rd_single_renew(struct dlock_session *s,
                           struct dlock_renewal *items, size_t n);
/* rwlock's dlock_downgrade(): take the read lock with the writer's owner,
 * then release the write lock. */
int dlock__rd_single_downgrade(struct dlock_session *s,
                               const struct dlock_request *req,
                               struct dlock_grant *grant);
int dlock__rd_single_release(struct dlock_session *s,
                             const struct dlock_request *req,
                             struct dlock_grant *grant);


/* ---- cluster.c: Redis Cluster (cluster=1) --------------------------------- */

struct dlock__rd_cluster;
/* Read the slot map from the seeds, start the watcher; or a clear error
 * (a seed that is no cluster node says so). */
int dlock__rd_cluster_open(struct dlock__rd_session *rs, char *err,
                           size_t errlen);
void dlock__rd_cluster_close(struct dlock__rd_session *rs);
/* The slot of a key (its {hash tag}, as Redis Cluster hashes it). */
unsigned dlock__rd_cluster_slot(const char *key, size_t len);
/* Send one command for slot on its master, following MOVED and ASK and
 * retrying TRYAGAIN/CLUSTERDOWN/unreachable within timeout=; NULL: failed
 * (rs->why says why). Sets rs->rc to the connection used. */
redisReply *dlock__rd_cluster_cmd(struct dlock__rd_session *rs, unsigned slot,
                                  int argc, const char **argv,
                                  const size_t *lens);
/* The address of the master of key's slot in the session's map. */
int dlock__rd_cluster_addr(struct dlock__rd_session *rs, const char *key,
                           size_t len, struct dlock__rd_addr *out);
/* Point rs->rc at the master of key's slot (inspect, wait's PTTL). */
int dlock__rd_cluster_route(struct dlock__rd_session *rs, const char *key,
                            size_t len);
/* The master of key's slot, from cf's seeds, without a session. */
int dlock__rd_cluster_master(const struct dlock__rd_conf *cf, const char *key,
                             size_t len, struct dlock__rd_addr *out,
                             char *err, size_t errlen);
/* dlock__rd_run's twin: script `which` on rs->keys' master. */
redisReply *dlock__rd_cluster_run(struct dlock__rd_session *rs, int which,
                                  const char *owner, size_t owner_len,
                                  const char *lease);
/* Renew with one pipeline per master. Each item's result: DLOCK_OK
 * extended, RD_RENEW_NO gone or another owner's, or an error; the caller
 * (single.c) turns the first two into its verdict. */
#define RD_RENEW_NO 3
int dlock__rd_cluster_renew(struct dlock__rd_session *rs,
                            struct dlock_renewal *items, size_t n);

/* ---- the modes: setnx.c, hash.c, rwlock.c, fair.c, redlock.c ------------- */

/* setnx's key layout and the scripts Redlock runs too. */
int dlock__rd_setnx_keys(struct dlock__rd_keys *k,
                         const struct dlock__rd_conf *cf, const char *name,
                         size_t len);
extern const struct dlock__rd_script dlock__rd_setnx_release;
extern const struct dlock__rd_script dlock__rd_setnx_renew;
/* hash's key layout (Redisson's names) and renewal, which fair shares. */
int dlock__rd_hash_keys(struct dlock__rd_keys *k,
                        const struct dlock__rd_conf *cf, const char *name,
                        size_t len);
extern const struct dlock__rd_script dlock__rd_hash_renew;

extern const struct dlock__rd_mode dlock__rd_mode_setnx;
extern const struct dlock__rd_mode dlock__rd_mode_hash;
extern const struct dlock__rd_mode dlock__rd_mode_rwlock;

/* Redisson's lock key of a name: the name, after "<namespace>:" when
 * namespace= is given (hash.c); 0 or -1 out of memory. */
int dlock__rd_redisson_lock_key(struct dlock__rd_keys *k,
                                const struct dlock__rd_conf *cf,
                                const char *name, size_t len);

/* rwlock, prefer=writer: how long a refused writer's marker keeps new
 * readers out, and how often the waiting writer tries again (and so
 * refreshes it). */
#define RD_WRITER_MARK_MS 2000
#define RD_WRITER_RETRY_MS 500
extern const struct dlock__rd_mode dlock__rd_mode_fair;
extern const struct dlock__rd_mode dlock__rd_mode_queue;
extern const struct dlock__rd_mode dlock__rd_mode_redlock;

/* ---- latch.c: count-down latches (Redisson's RCountDownLatch) ------------ */

extern const struct dlock_latch_ops dlock__rd_latch;

/* ---- nopipe.c: hiredis's calls that write, with no SIGPIPE --------------- */

/* redisCommand(), redisCommandArgv(), redisGetReply(), redisBufferWrite()
 * with SIGPIPE blocked on the calling thread for their length, and one
 * they raised taken back. Nothing in the backend calls those four but
 * through these. */
redisReply *dlock__rd_command(redisContext *rc, const char *fmt, ...);
redisReply *dlock__rd_command_argv(redisContext *rc, int argc,
                                   const char **argv, const size_t *lens);
int dlock__rd_get_reply(redisContext *rc, redisReply **reply);
int dlock__rd_buffer_write(redisContext *rc, int *done);

#endif /* DLOCK_RD_H */
