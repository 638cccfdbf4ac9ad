/*
 * pg.h: what the files of the postgres backend share. Nothing here leaves
 * the backend: cross-file names carry the dlock__pg_ prefix, and only the
 * table dlock__backend_postgres is referenced from outside.
 *
 * The files, from the top down (each calls only files below it):
 *
 *   postgres.c   the backend table: parameters, the client context,
 *                sessions' open and close, the list of modes
 *   advisory.c   mode advisory: session advisory locks, and permits of
 *                semaphores as N slot keys
 *   tx.c         modes advisory_xact and for_update: a lock held by an
 *                open transaction
 *   lease.c      mode lease: a lease row in an unlogged table, NOTIFY on
 *                release, a grace after a crash emptied the table
 *   fence.c      the fence source of every mode: one unlogged sequence
 *                and a durable epoch
 *   bound.c      what the three connection-bound modes share: renewal by
 *                one round trip, release on a lost connection, the
 *                server-side silence limit and lock_timeout texts
 *   inspect.c    inspect's frame, the pg_locks view of both advisory
 *                modes, and the owner ids they and for_update show
 *   latch.c      count-down latches (every mode): a row, NOTIFY at zero
 *   floor.c      the raw floor of `dlock bench` (bare libpq)
 *   listen.c     the per-client LISTEN connection and its thread
 *   schema.c     creating a mode's table on first use; dlock__pg_run
 *   conn.c       connections and the pipelined statement runner
 *   conf.c       the URI and libpq parameters, a mode's SQL with the table
 *                name in it, keys and text
 */
#ifndef DLOCK_PG_H
#define DLOCK_PG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "dlock/backend.h"

struct pg_session;

/* libpq keywords we may pass: ours plus every pass-through parameter. */
#define PG_KW_MAX 64
/* Statements of one mode (its own numbering), and its DDL statements. */
#define PG_SQL_MAX 10
#define PG_DDL_MAX 6
/* Statements in one round trip at most (the DDL lock and the DDL). */
#define PG_MAXQ 7
/* Statements prepared on one connection at most (conn.c). */
#define PG_PREP_MAX 16
/* dlock__pg_exec's result when a statement failed on a healthy
 * connection. */
#define PG_SQLERR 1

/*
 * The private side of a mode: the public object core sees comes first, so
 * the dlock_mode core hands to ctx_open() is one of these (postgres.c
 * checks that it is one of the backend's own before it casts).
 *
 * SQL is written as templates in which "{t}" stands for the mode's table,
 * printed (validated, double-quoted) once per client by conf.c; the
 * results are in struct pg_conf under the same indexes.
 */
struct pg_mode {
    struct dlock_mode pub;
    /* table='s default; NULL when the mode keeps no table, and then
     * no_table says where its state lives (for table='s error). */
    const char *table;
    const char *no_table;
    /* Names map to a row's 32-byte key (as hex); else to a 64-bit
     * advisory key (as a signed bigint). */
    bool row_key;
    const char *sql[PG_SQL_MAX];     /* the mode's statements, by its own
                                        indexes; NULL where unused */
    const char *ddl[PG_DDL_MAX + 1]; /* CREATE ... IF NOT EXISTS, NULL-
                                        terminated */
    const char *inspect;             /* for dlock__pg_inspect() */
    /* Its sessions commit what a crash must not take back (lease rows):
     * synchronous_commit on (conn.c). */
    bool durable;
    /* Optional: set up a session right after every (re)connect, before
     * any other statement; on failure write err and return the code (the
     * connection is dropped). */
    int (*on_connect)(struct pg_session *s, int64_t deadline, char *err,
                      size_t errlen);
    /* Its statements are prepared once per connection, when a round trip
     * begins outside a transaction (conn.c): parse and plan cost more
     * than the lock itself. */
    bool prepare;
};

/* The pg_locks view of an advisory key, for both advisory modes' inspect:
 * holders, waiters and OWNER, the owner id recorded for the key by the
 * server process (l.pid) that holds it exclusively (the 64-bit key split
 * into classid and objid), then FENCE: the fence column, and in mode
 * advisory a fifth, the server processes holding permits of the name.
 * dlock__pg_inspect_locks() reads it. */
#define DLOCK__PG_LOCKS_INSPECT(FENCE, OWNER)                               \
    "SELECT count(*) FILTER (WHERE l.granted),"                             \
    " count(*) FILTER (WHERE NOT l.granted),"                               \
    " min(CASE WHEN l.granted AND l.mode = 'ExclusiveLock'"                 \
    "   THEN coalesce(" OWNER ", '') END), " FENCE                          \
    " FROM pg_locks l"                                                      \
    " WHERE l.locktype = 'advisory' AND l.objsubid = 1"                     \
    " AND l.database = (SELECT oid FROM pg_database"                        \
    "   WHERE datname = current_database())"                                \
    " AND l.classid::bigint = (($1::bigint >> 32) & 4294967295)"            \
    " AND l.objid::bigint = ($1::bigint & 4294967295)"

/* Everything a URI says, parsed once per client; read-only afterwards. */
struct pg_conf {
    const struct pg_mode *mode;
    uint32_t timeout_ms; /* per call; 0: none */
    uint32_t lease_ms;
    char ns[260];          /* namespace= (at most 256 bytes) */
    uint8_t ns_digest[32]; /* SHA-256(namespace) */
    char table[64];        /* validated, unquoted; "" if the mode has none */
    bool multi_host;
    const char *kw[PG_KW_MAX + 1];
    const char *val[PG_KW_MAX + 1];
    char **own;  /* the strings kw/val point into */
    size_t nown;
    /* Server-side TCP keepalive settings (seconds) for connection-bound
     * locks, so a vanished client host frees its locks. */
    char ka_idle[12], ka_interval[12], ka_count[12];
    /* The mode's SQL with the table name printed in. */
    char *sql[PG_SQL_MAX];
    char *ddl[PG_DDL_MAX + 1];
    char *inspect;
};

/* Handles whose hand-offs a client remembers at once (mode lease). */
#define PG_HANDOFF_SLOTS 16

/* One channel the listener LISTENs on: a lock name's 64-bit key. */
struct pg_chan {
    struct pg_chan *next;
    uint64_t key;
    uint64_t seq;      /* bumped on every NOTIFY (and on reconnect) */
    int state;         /* PG_CHAN_* */
    int waiters;       /* inside dlock__pg_listen_wait() now */
    int64_t last_used; /* dlock_now_ms() */
};

enum { PG_CHAN_WANT, PG_CHAN_SENT, PG_CHAN_ACTIVE };

#define PG_CHAN_BUCKETS 64

/* The per-client LISTEN connection that wakes waiters of lease locks and
 * advisory permits (listen.c). */
struct pg_listener {
    const struct pg_conf *cf;
    atomic_bool listening; /* the listener thread was started */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: a channel changed */
    pthread_t thread;
    bool started, stop;
    int wakefd; /* eventfd: work for the listener thread */
    struct pg_chan *chans[PG_CHAN_BUCKETS];
};

/* Per-client state: the configuration and the lease-mode listener. */
struct pg_ctx {
    struct pg_conf cf;
    struct pg_listener ln;
    /* The durable fence epoch as last read or written by this client
     * (fence.c): 0 until known. It only grows. */
    _Atomic uint64_t epoch;
    /* mode lease: the longest lease this client saw recorded in
     * dlock_lease_max for its table (lease.c): 0 until known. It only
     * grows. */
    _Atomic uint64_t lease_max_ms;
    /* mode lease: hand-offs (lease.c), per handle (its serial picks the
     * slot; a collision only loses a hint). */
    struct pg_handoff {
        _Atomic uint64_t serial; /* the handle's serial + 1; 0: none */
        _Atomic bool waited;     /* its last attempt was refused */
        _Atomic int64_t until;   /* dlock_now_ms(): it lets waiters have
                                    the name it released until then */
        _Atomic uint64_t seq;    /* the channel's count at its release */
        _Atomic bool seq_ok;
    } handoff[PG_HANDOFF_SLOTS];
};

/* One (key, owner id) a connection wrote to its owner table: gen says on
 * which connection. */
#define PG_OWNERS_SEEN 16
struct pg_owner_seen {
    uint64_t gen;
    char key[65];
    char owner[64];
};

struct pg_session {
    struct dlock_session base;
    struct pg_ctx *x;
    const struct pg_conf *cf;
    PGconn *conn;        /* NULL once dropped */
    uint64_t gen;        /* bumped by every (re)connect; grants keep it */
    int backend_pid;     /* advisory: the server process of this session */
    uint32_t covered_ms; /* advisory: the lease idle_session_timeout covers */
    size_t ngrants;      /* connection-bound grants living on conn */
    char why[256];       /* the last connection failure, one line */
    char fatal[160];     /* a FATAL the server sent while we were idle */
    /* lease, advisory permits: the listener's count for the channel of
     * the last attempt (dlock__pg_listen_note) */
    uint64_t seen_key, seen_seq;
    bool seen_valid;
    /* Owner ids this connection wrote to its mode's owner table
     * (inspect.c), so an acquire writes one only when it changes. */
    struct pg_owner_seen owners[PG_OWNERS_SEEN];
    uint64_t owners_gen; /* the gen whose server process cleared its
                            predecessors' rows */
    /* The statements now run are a native wait: dlock__pg_exec watches
     * the acquire's cancel [B-CANCEL-1]. Set around that run alone, so
     * the other statements of a cancelled acquire (rollback, fence,
     * unlock) are never cancelled themselves. */
    bool waiting;
    /* The statements prepared on this connection (conn.c): the text
     * (owned), the name (a digest of the text), and whether the server
     * has confirmed it; prep_off once a server said it does not keep them
     * (a transaction pooler in between), for the session's life. */
    struct pg_prep {
        char *sql;
        char name[40];
        int state; /* PG_PREP_* (conn.c) */
    } prep[PG_PREP_MAX];
    int nprep;
    bool prep_off;
};

/* One statement and its parameters (text format). */
struct pg_q {
    const char *sql;
    int n;
    const char *v[7]; /* a lease permit has the most */
};

/* What one round trip brought back. */
struct pg_res {
    PGresult *r[PG_MAXQ];
    int failed;    /* index of the first statement that failed, or -1 */
    char state[6]; /* its SQLSTATE */
};

/* ---- conf.c ---- */

/* Parse uri for mode into cf. On failure err says which parameter is wrong
 * and cf holds nothing. */
int dlock__pg_conf_init(struct pg_conf *cf, const struct dlock_uri *uri,
                        const struct pg_mode *mode, char *err, size_t errlen);
void dlock__pg_conf_free(struct pg_conf *cf);
/* SHA-256(SHA-256(namespace) || SHA-256(name)). */
void dlock__pg_digest(const struct pg_conf *cf, const char *name, size_t len,
                      uint8_t out[32]);
/* The first 8 bytes of a digest: advisory keys and NOTIFY channels. */
uint64_t dlock__pg_key64(const uint8_t d[32]);
/* The key as PostgreSQL's signed bigint, in decimal. */
void dlock__pg_key_text(char out[24], uint64_t k);
/* The digest in 64 hex digits: row keys. */
void dlock__pg_hex(char out[65], const uint8_t d[32]);
/* The key text of a name in cf's mode: hex or bigint (row_key); and the
 * same from the name's digest. */
void dlock__pg_name_key(const struct pg_conf *cf, const char *name,
                        size_t len, char out[65]);
void dlock__pg_digest_key(const struct pg_conf *cf, const uint8_t d[32],
                          char out[65]);
/* "dlock_<16 hex digits>": the NOTIFY channel of a key. */
void dlock__pg_channel_name(char out[24], uint64_t key);
/* A libpq message on one line, without the trailing newline. */
void dlock__pg_oneline(char *dst, size_t cap, const char *src);
/* The deadline of one call: now + timeout=, or INT64_MAX. */
int64_t dlock__pg_deadline(const struct pg_conf *cf);
/* Where a permit's search over n slots begins: anywhere, so contenders
 * spread over the slots instead of all trying slot 0 first (the count is
 * safe whatever the start). */
uint32_t dlock__pg_first_slot(uint32_t n);

/* ---- conn.c ---- */

/* Connect with cf's parameters by the deadline (dlock_now_ms clock;
 * INT64_MAX: none). NULL with err filled on failure, and *code (if not
 * NULL) DLOCK_EAUTH when the server refused the login (SQLSTATE 28P01,
 * 28000), else DLOCK_ECONNECT or DLOCK_ENOMEM. */
PGconn *dlock__pg_connect_raw(const struct pg_conf *cf, int64_t deadline,
                              char *err, size_t errlen, int *code);
/* Connect (or reconnect) the session's connection, then run the mode's
 * on_connect. */
int dlock__pg_connect(struct pg_session *s, char *err, size_t errlen);
/* Run one statement that sets a new connection up (on_connect); a
 * failure is written into err as the session set-up's. */
int dlock__pg_setup(struct pg_session *s, const struct pg_q *q,
                    int64_t deadline, char *err, size_t errlen);
/* Close the session's connection (if any) and stop watching it. */
void dlock__pg_drop(struct pg_session *s);
/* Is the connection still there? Drops it and says why if not. */
bool dlock__pg_alive(struct pg_session *s);
/* Make the session usable for a new request: reconnect a dead connection
 * unless connection-bound grants lived on it. */
int dlock__pg_ready(struct pg_session *s);
/* Send nq statements and a Sync in one round trip and read their results
 * by the deadline: DLOCK_OK, PG_SQLERR (res->failed, res->state), or
 * DLOCK_ECONNECT (the connection was dropped). */
int dlock__pg_exec(struct pg_session *s, const struct pg_q *q, int nq,
                   int64_t deadline, struct pg_res *res);
void dlock__pg_res_clear(struct pg_res *res);
/* Report a failed statement in the server's words; returns code. */
int dlock__pg_sqlfail(struct pg_session *s, int code, const char *what,
                      const struct pg_res *res);
/* End a transaction left open or failed by an attempt. */
void dlock__pg_rollback(struct pg_session *s);
/* DLOCK_EBUSY or DLOCK_ETIMEDOUT for SQLSTATEs that mean "not now", else
 * 0. */
int dlock__pg_busy_code(const char *state, int64_t deadline);
/* A numeric column as uint64_t. */
uint64_t dlock__pg_u64(const PGresult *r, int row, int col);

/* ---- schema.c ---- */

/* The statements that create cf's schema under the DDL lock, into q (room
 * for PG_DDL_MAX + 1); returns how many. */
int dlock__pg_schema_q(const struct pg_conf *cf, struct pg_q *q);
/* dlock__pg_exec, and if the table is missing (first use), create it and
 * try once more. A failure to create it comes back as its DLOCK_ code. */
int dlock__pg_run(struct pg_session *s, const struct pg_q *q, int nq,
                  int64_t deadline, struct pg_res *res);
/* The same with other CREATE statements than the mode's (NULL-terminated;
 * what names them in a failure). */
int dlock__pg_run_ddl(struct pg_session *s, const char *const *ddl,
                      const char *what, const struct pg_q *q, int nq,
                      int64_t deadline, struct pg_res *res);

/* ---- listen.c ---- */

void dlock__pg_listen_init(struct pg_listener *ln, const struct pg_conf *cf);
void dlock__pg_listen_stop(struct pg_listener *ln);
/* Before an attempt on the name whose channel is key's: note the
 * channel's notification count in s, so the wait() after a busy attempt
 * returns at a release announced since [B-WAIT-1]. */
void dlock__pg_listen_note(struct pg_session *s, uint64_t key);
/* The wait() of a mode whose releases NOTIFY the channel of the name's key
 * (lease, advisory permits): dlock__pg_listen_wait with what
 * dlock__pg_listen_note saw. */
int dlock__pg_wait(struct dlock_session *ds, const struct dlock_request *req,
                   uint32_t max_ms);
/*
 * If the channel of key is being listened to, store its notification count
 * in *seq and return true. Lease acquire() calls this just before its
 * attempt, so a release announced after the attempt is seen by wait().
 */
bool dlock__pg_listen_seq(struct pg_listener *ln, uint64_t key,
                          uint64_t *seq);
/*
 * Block until the channel of key is notified after seq (when have_seq), or
 * it has just been subscribed (when not), or max_ms have passed. Starts the
 * listener thread on first use. DLOCK_OK (or DLOCK_ENOMEM): a listener
 * that cannot connect makes waits run their full time, and core polls.
 */
int dlock__pg_listen_wait(struct dlock_session *s, struct pg_listener *ln,
                          uint64_t key, bool have_seq, uint64_t seq,
                          uint32_t max_ms);

/* ---- fence.c ---- */

/* The fence source's relations (fence.c), for a mode's ddl: the durable
 * epoch (one row, created at 0: the first bump makes it 1 or more) and the
 * unlogged sequence every fence is drawn from ("u": dlock 0.1 made a
 * logged dlock_fence_seq). CACHE 1: values cached per server process would
 * come out of order across processes. */
#define DLOCK__PG_FENCE_DDL_EPOCH                                           \
    "CREATE TABLE IF NOT EXISTS dlock_fence_epoch (id int PRIMARY KEY"      \
    " CHECK (id = 1), epoch bigint NOT NULL)"
#define DLOCK__PG_FENCE_DDL_EPOCH_ROW                                       \
    "INSERT INTO dlock_fence_epoch VALUES (1, 0) ON CONFLICT DO NOTHING"
#define DLOCK__PG_FENCE_DDL_SEQ                                             \
    "CREATE UNLOGGED SEQUENCE IF NOT EXISTS dlock_fence_useq AS bigint"      \
    " MINVALUE 1 NO CYCLE CACHE 1"
/* A draw, as SQL: run it only once the lock is held. */
#define DLOCK__PG_FENCE_DRAW "nextval('dlock_fence_useq')"

/* May v, drawn from the sequence, be handed out as it is: is its epoch
 * (v >> 40) the durable epoch this client knows? If not, ask
 * dlock__pg_fence(). */
bool dlock__pg_fence_ok(struct pg_ctx *x, uint64_t v);
/* The client's epoch, while it knows none: read from the committed row
 * (a confirm without a value), on autocommitted s. So a client's first
 * lock usually needs no epoch work (tx.c). */
int dlock__pg_fence_learn(struct pg_session *s, char *err, size_t errlen);
/*
 * Make a fence of v, drawn over s (0: draw first), or of a new draw: the
 * epoch confirmed (and raised when the sequence ran past it), or the
 * sequence moved above a new durable epoch when it was reset (a crash), a
 * few times at most. s is an autocommitted connection; every statement
 * about v runs on it, so in the server's life v was drawn in. DLOCK_OK
 * with *out, or the failure's code with err filled.
 */
int dlock__pg_fence(struct pg_session *s, uint64_t v, uint64_t *out,
                    char *err, size_t errlen);
/* Can s's server give fences (version 15 or later, for the unlogged
 * sequence)? DLOCK_OK, or DLOCK_EUNSUPPORTED with err saying so. A mode's
 * on_connect calls it. */
int dlock__pg_fence_server(struct pg_session *s, char *err, size_t errlen);

/* ---- bound.c ---- */

/* "N" milliseconds of server-side silence allowed for a lease. */
void dlock__pg_idle_text(char out[16], uint32_t lease_ms);
/* lock_timeout for a wait until deadline, in ms; "0" is no limit. */
void dlock__pg_lock_timeout(char out[16], int64_t deadline);
/* The client's own limit for a native wait until deadline (0: a try). */
int64_t dlock__pg_wait_deadline(const struct pg_conf *cf, int64_t deadline);
/*
 * Renew connection-bound grants: one round trip of probe proves the
 * connection, and so every lock on it, alive; judge (optional) looks at
 * probe's result and writes into why what makes the locks lost, if
 * anything.
 */
int dlock__pg_bound_renew(struct pg_session *s, struct dlock_renewal *items,
                          size_t n, const char *probe,
                          void (*judge)(struct pg_session *s,
                                        const PGresult *r, char *why,
                                        size_t cap));
/* Release a connection-bound grant with the nq statements q (one round
 * trip): DLOCK_ELOST if its connection is gone; else a statement's failure
 * (reported as what's), or what check (reporting its own failure) says of
 * the last one's result. */
int dlock__pg_bound_release(struct pg_session *s,
                            const struct dlock_grant *grant,
                            const struct pg_q *q, int nq, const char *what,
                            int (*check)(struct pg_session *s,
                                         PGresult *r));

/* ---- latch.c ---- */

/* Count-down latches: a row in dlock_latches, NOTIFY at zero. */
extern const struct dlock_latch_ops dlock__pg_latch;

/* ---- inspect.c ---- */

/* Run the mode's inspect statement for name's key, and let read fill out
 * from its result; DLOCK_OK, or the failure, reported. */
int dlock__pg_inspect(struct dlock_session *ds, const char *name,
                      size_t len, dlock_state *out,
                      void (*read)(const PGresult *r, dlock_state *out));
/* A name whose permits are held: list has one word per holder (what says
 * what they are, e.g. ", server pids", or ""); held, waiters unknown. */
void dlock__pg_permits_read(const char *list, const char *what,
                            dlock_state *out);
/* inspect of both advisory modes (DLOCK__PG_LOCKS_INSPECT). */
int dlock__pg_inspect_locks(struct dlock_session *ds, const char *name,
                            size_t len, dlock_state *out);
/* The owner table of a mode (T: its name, as SQL), one row per server
 * process and key it locked, written only when the owner id changes. */
#define DLOCK__PG_OWNERS_DDL(T)                                             \
    "CREATE UNLOGGED TABLE IF NOT EXISTS " T " (pid int NOT NULL, key"      \
    " text NOT NULL, owner text NOT NULL, PRIMARY KEY (pid, key))"
#define DLOCK__PG_OWNERS_CLEAR(T)                                           \
    "DELETE FROM " T " WHERE pid = pg_backend_pid()"
#define DLOCK__PG_OWNERS_SET(T)                                             \
    "INSERT INTO " T " (pid, key, owner) VALUES (pg_backend_pid(), $1, $2)" \
    " ON CONFLICT (pid, key) DO UPDATE SET owner = EXCLUDED.owner"
/* The statements (DLOCK__PG_OWNERS_CLEAR, then _SET) that record owner
 * ("" for a shared holder) as the holder of key for this connection's
 * server process, into q: none when it already is (the usual case), the
 * clearing of rows a previous process with the same pid left on the
 * connection's first. Once they ran, dlock__pg_owner_noted(). */
int dlock__pg_owner_q(struct pg_session *s, const char *const sql[2],
                      const char *key, const char *owner, struct pg_q *q);
void dlock__pg_owner_noted(struct pg_session *s, const char *key,
                           const char *owner);

/* ---- floor.c ---- */

/* What a mode's floor runs: setup statements once (after the schema),
 * then take and give in turn, timed. take's last statement answers a row
 * whose first column is not NULL when the lock was taken. */
struct pg_floor_plan {
    struct pg_q setup[1];
    int nsetup;
    struct pg_q take[4];
    int ntake;
    struct pg_q give;
};

/* The values a plan binds, for the name being measured. */
struct pg_floor_keys {
    const char *name, *owner;
    const char *key;  /* the advisory key, as a bigint */
    const char *hex;  /* the row key */
    const char *chan; /* the NOTIFY channel */
    const char *ms;   /* the lease */
};

/* Run a mode's floor: n cycles of plan's statements in blocking libpq. */
int dlock__pg_floor(const struct dlock_uri *uri, const struct pg_mode *mode,
                    void (*plan)(const struct pg_conf *cf,
                                 const struct pg_floor_keys *k,
                                 struct pg_floor_plan *p),
                    const char *name, uint32_t n, uint64_t *ns_out,
                    char *err, size_t errlen);
/* The floor of advisory, advisory_xact and for_update: the bare lock
 * (floor.c's header says which statements), no fence. */
int dlock__pg_floor_bare(const struct dlock_uri *uri,
                         const struct pg_mode *mode, const char *name,
                         uint32_t n, uint64_t *ns_out, char *err,
                         size_t errlen);
/* dlock_mode.fence_floor and .forget of the modes (mode is the base of a
 * struct pg_mode). */
int dlock__pg_fence_floor(const struct dlock_mode *mode,
                          const struct dlock_uri *uri, const char *name,
                          uint32_t n, uint64_t *ns_out, char *err,
                          size_t errlen);
int dlock__pg_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen);
/* dlock_mode.floor_wait of advisory, advisory_xact and for_update: the
 * bare lock's waiting statement (floor.c). */
int dlock__pg_floor_wait(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen);

/* ---- the modes ---- */

extern const struct pg_mode dlock__pg_mode_advisory;
extern const struct pg_mode dlock__pg_mode_advisory_xact;
extern const struct pg_mode dlock__pg_mode_for_update;
extern const struct pg_mode dlock__pg_mode_lease;

#endif /* DLOCK_PG_H */
