/*
 * my.h: what the files of the mysql:// backend share, and nothing outside
 * the backend includes: the per-client context, a connection and its
 * prepared statements, the session, a mode's private half, and each
 * file's cross-file names (dlock__my_*), listed bottom file first. The
 * backend as a whole (the URI, the three modes, threads) is described at
 * the top of mysql.c and in docs/backends/mysql.md.
 *
 * The files, each calling only files further down this list (no call or
 * include cycle; tests/arch/check_arch.py checks it from the objects):
 *
 *   mysql.c       the backend table, its list of modes, and the entry
 *                 points every mode shares: library and thread set-up,
 *                 ctx_open/ctx_close, open/close
 *   insert.c      mode insert: its table, SQL, methods and mode object
 *   for_update.c  mode for_update
 *   get_lock.c    mode get_lock
 *   floor.c       the raw floor of each mode, for `dlock bench` only
 *   latch.c       count-down latches (every mode): a row per latch
 *   bound.c       what the connection-bound modes share: the server's
 *                 silence limit, renewal by ping, the end of a lock wait
 *   fence.c       the fencing tokens of every mode: MEMORY counters, a
 *                 durable epoch
 *   keys.c        a name's key, its column text, its GET_LOCK name and
 *                 its permit slots' names
 *   conn.c        connections, prepared statements, bindings, errors
 *   conf.c        the URI read into the per-client context
 */
#ifndef DLOCK_MY_H
#define DLOCK_MY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include "dlock/backend.h"

#ifdef LIBMARIADB
typedef my_bool my_flag;
#else
typedef bool my_flag; /* MySQL 8's libmysqlclient dropped my_bool */
#endif

/* MySQL identifiers have at most 64 characters; "_epoch" must fit. */
#define MY_TABLE_MAX 58
/* A key: SHA-256(namespace || name). */
#define MY_KEY_LEN 32
/* GET_LOCK names: MySQL refuses more than 64 characters, MariaDB more
 * than 192 bytes. */
#define MY_ULOCK_CHARS 64
#define MY_ULOCK_BYTES 192
#define MY_ULOCK_BUF (MY_ULOCK_CHARS * 4 + 1)
/* A permit waiter of mode get_lock waits on one slot this long (unless
 * retry_max= says), then tries all slots again. */
#define MY_SLICE_MS 50
/* MySQL 8's error for NOWAIT (MariaDB says ER_LOCK_WAIT_TIMEOUT). */
#define MY_ER_LOCK_NOWAIT 3572

/* ssl=: the index into dlock__my_ssl_names. */
enum my_ssl { MY_SSL_OFF, MY_SSL_REQUIRE, MY_SSL_VERIFY };

/*
 * A statement, prepared on a connection when first used and kept there in
 * its slot. Each mode's file defines its statements beside the code that
 * runs them; slots are unique within a mode (a connection serves one).
 */
struct dlock__my_stmt {
    unsigned slot;   /* MY_SLOT_FENCE..., or a mode's from MY_SLOT_MODE */
    const char *sql; /* %s, at most once: the table's base name */
};

enum {
    MY_SLOT_FENCE,      /* fence.c: bump the counter */
    MY_SLOT_FENCE_PEEK, /* fence.c: read it, for inspect */
    MY_SLOT_FENCE_FORGET, /* fence.c: this connection's records unnamed */
    MY_SLOT_LATCH_SET,  /* latch.c: its four statements */
    MY_SLOT_LATCH_COUNT,
    MY_SLOT_LATCH_DOWN,
    MY_SLOT_LATCH_ZERO,
    MY_SLOT_MODE        /* a mode's own statements from here */
};
#define MY_SLOTS 16     /* slots per connection */

/*
 * A mode: what core sees (base, first, so the table can list &m->base),
 * and what the backend's shared code needs to know of it.
 */
struct dlock__my_ctx;
struct dlock__my_watch;
struct dlock__my_mode {
    struct dlock_mode base;
    /* CREATE TABLE IF NOT EXISTS statements (%s: the table's base name),
     * run when a statement meets ER_NO_SUCH_TABLE; NULL-terminated. */
    const char *const *ddl;
    /* Statements each lock connection runs first (MYSQL_INIT_COMMAND);
     * NULL-terminated, or NULL for none. */
    const char *const *init;
    /* Optional: release what the mode keeps in the context. */
    void (*ctx_close)(struct dlock__my_ctx *x);
};

/* One connection and the statements prepared on it. */
struct dlock__my_conn {
    MYSQL *db;
    MYSQL_STMT *st[MY_SLOTS];
    const char *sql[MY_SLOTS]; /* the text prepared in each slot */
    const struct dlock__my_ctx *x;
    bool broken;   /* a call failed for the connection: the rest fail fast */
    bool no_ddl;   /* a lock is held in an open transaction: a missing
                    * table is an error, not created (CREATE commits) */
    unsigned err;  /* the last error number */
    char msg[320]; /* and its text */
    /* fence.c's source of tokens on this connection, found at its first
     * draw: never carried to another connection (a new one may be in a
     * new life of the server; dlock__my_connect clears it). */
    enum my_seq { MY_SEQ_UNKNOWN, MY_SEQ_OFF, MY_SEQ_ON } seq;
    uint64_t seq_epoch; /* MY_SEQ_ON: an epoch known committed */
    bool recorded;      /* MY_SEQ_ON: may have left a record naming it */
};

/* What every connection of one client shares (the backend's ctx). */
struct dlock__my_ctx {
    const struct dlock__my_mode *mode;
    enum my_ssl ssl;
    char *host, *user, *password, *db, *ssl_ca; /* password, ssl_ca: NULL */
    unsigned int port;
    unsigned int io_s;   /* connect, read and write timeouts, seconds */
    int64_t io_ms;       /* the same in milliseconds */
    uint32_t lease_ms;   /* lease=: what a new session's wait_timeout covers */
    uint32_t slice_ms;   /* retry_max=, else MY_SLICE_MS: get_lock.c */
    char table[MY_TABLE_MAX + 1];
    char *ns;            /* namespace=, a prefix of every name */
    size_t ns_len;
    char holder[320];    /* "host name:pid", the insert rows' host column */
    size_t holder_len;
    /* Fences move to a new epoch over this autocommitted connection when
     * the lock's is in a transaction (for_update), opened on first use;
     * mu serialises the client's threads on it (fence.c). */
    pthread_mutex_t mu;
    struct dlock__my_conn fence;
    bool fence_open;
    /* DLOCK_MYSQL_FENCE=counter in the environment: the MEMORY counters
     * even where the server has sequences (tests only: fence.c). */
    bool fence_counters;
};

struct dlock__my_session {
    struct dlock_session base;
    struct dlock__my_ctx *x;
    struct dlock__my_conn conn;
    long lock_wait_s; /* for_update: the session's innodb_lock_wait_timeout */
    /* for_update on MariaDB: the text of the wait shorter than a second
     * prepared now (sub_ms of it, shared or not), or sub_ms 0 (none). */
    char sub_sql[224];
    unsigned sub_ms;
    bool sub_sh;
    uint32_t covered_ms; /* conn-bound: the lease wait_timeout covers */
    size_t ngrants;      /* conn-bound: locks held on this connection */
    /* get_lock, for_update: the name this session last found held by
     * another connection when it came to take it; its next acquire with a
     * wait skips the try (get_lock.c, "acquire"; for_update.c's
     * fu_skip_try, which keeps the token it drew: busy_fence). A hint
     * only. */
    uint8_t busy_key[MY_KEY_LEN];
    uint64_t busy_fence;
    bool busy;
    /* conn-bound: the cancel watcher, from the first wait (bound.c). */
    struct dlock__my_watch *watch;
};

/* ---- conf.c: the URI read into the per-client context -------------------- */

extern const char *const dlock__my_ssl_names[];

/* Read and check the URI for mode m; err names a bad parameter. */
int dlock__my_ctx_new(struct dlock__my_ctx **out, const struct dlock_uri *uri,
                      const struct dlock__my_mode *m, char *err,
                      size_t errlen);
/* Free x. What the mode keeps in it (m->ctx_close) is closed first. */
void dlock__my_ctx_free(struct dlock__my_ctx *x);

/* ---- conn.c: connections, statements, bindings, errors ------------------- */

/* Connect with x's options; mode_init: run the mode's init statements (a
 * lock connection; false for a side connection that autocommits).
 * Returns 0, or an error number with c->msg set and c->db NULL. */
unsigned dlock__my_connect(struct dlock__my_conn *c,
                           const struct dlock__my_ctx *x, bool mode_init);
void dlock__my_conn_close(struct dlock__my_conn *c);
/* The dlock code for a MySQL error number. */
int dlock__my_code(unsigned e);
/* A failed connect's code: DLOCK_EAUTH if the server refused the login
 * (1044, 1045...), else DLOCK_ECONNECT. */
int dlock__my_connect_code(unsigned e);
/* Record an error on c (broken if it ends the connection); returns e. */
unsigned dlock__my_note(struct dlock__my_conn *c, unsigned e,
                        const char *text);
unsigned dlock__my_db_note(struct dlock__my_conn *c);
unsigned dlock__my_stmt_note(struct dlock__my_conn *c, MYSQL_STMT *st);
/* Run the mode's CREATE TABLE IF NOT EXISTS statements (and the ALTERs
 * that bring older tables up to date): 0 or an error number. */
unsigned dlock__my_create_tables(struct dlock__my_conn *c);
/* A table, or a column added since it was made, is missing: the mode's
 * ddl makes it. */
bool dlock__my_missing(unsigned e);
/* Close the statement in slot; the next use prepares it again (a slot
 * whose text changes: for_update.c's short wait). */
void dlock__my_unprepare(struct dlock__my_conn *c, unsigned slot);
/* The prepared statement, preparing it on first use (a missing table is
 * created, once); NULL with c's error set. */
MYSQL_STMT *dlock__my_prepare(struct dlock__my_conn *c,
                              const struct dlock__my_stmt *q);
/* Execute q with params: 0, or the error number with c->msg set. */
unsigned dlock__my_exec(struct dlock__my_conn *c,
                        const struct dlock__my_stmt *q, MYSQL_BIND *params);
/* Rows the last execution of q matched (CLIENT_FOUND_ROWS). */
my_ulonglong dlock__my_affected(struct dlock__my_conn *c,
                                const struct dlock__my_stmt *q);
/* Read the rows of q just executed into res (the last row wins); *found
 * says whether there was one. 0 or an error number. */
unsigned dlock__my_fetch(struct dlock__my_conn *c,
                         const struct dlock__my_stmt *q, MYSQL_BIND *res,
                         bool *found);
/* Execute q, a SELECT of one BIGINT column, and read its row: *v, *null
 * (also when there is no row) and *found. 0 or an error number. */
unsigned dlock__my_select_i64(struct dlock__my_conn *c,
                              const struct dlock__my_stmt *q,
                              MYSQL_BIND *params, long long *v, my_flag *null,
                              bool *found);
/* Parameters: bytes compared as bytes (a key); text in utf8mb4. */
void dlock__my_bind_blob(MYSQL_BIND *b, const void *p, size_t len);
void dlock__my_bind_text(MYSQL_BIND *b, const char *p, size_t len);
void dlock__my_bind_i64(MYSQL_BIND *b, long long *v);
void dlock__my_bind_f64(MYSQL_BIND *b, double *v);
/* Results: a nullable BIGINT; nullable bytes into buf. */
void dlock__my_res_i64(MYSQL_BIND *b, long long *v, my_flag *is_null);
void dlock__my_res_bytes(MYSQL_BIND *b, void *buf, size_t cap,
                         unsigned long *len, my_flag *is_null);
/* Report c's last error on the session: "what: the server's words". */
int dlock__my_fail(struct dlock__my_session *ms, struct dlock__my_conn *c,
                   const char *what);
/* DLOCK_ECONNECT for a call on a session whose connection broke. */
int dlock__my_broken(struct dlock__my_session *ms);

/* ---- keys.c: keys and names ---------------------------------------------- */

/* The server's identity of a lock: SHA-256(namespace || name). */
void dlock__my_key(const struct dlock__my_ctx *x, const char *name,
                   size_t len, uint8_t key[MY_KEY_LEN]);
/* Mode insert's key of permit slot (< DLOCK_PERMITS_MAX) of a name. */
void dlock__my_slot_key(const struct dlock__my_ctx *x, const char *name,
                        size_t len, unsigned slot, uint8_t key[MY_KEY_LEN]);
/* How much of the name the name column keeps (255 bytes, whole
 * characters). */
size_t dlock__my_display_len(const char *name, size_t len);
/* GET_LOCK's name for a name and its key; returns its length. */
size_t dlock__my_ulock_name(const struct dlock__my_ctx *x, const char *name,
                            size_t len, const uint8_t key[MY_KEY_LEN],
                            char out[MY_ULOCK_BUF]);
/* The slot a permit request tries first, at random. */
unsigned dlock__my_first_slot(const struct dlock_request *req);
/* GET_LOCK's name for slot (< DLOCK_PERMITS_MAX) of the semaphore of a
 * name and its key; returns its length. */
size_t dlock__my_slot_name(const struct dlock__my_ctx *x, const char *name,
                           size_t len, const uint8_t key[MY_KEY_LEN],
                           unsigned slot, char out[MY_ULOCK_BUF]);

/* ---- fence.c: the fencing tokens ----------------------------------------- */

/* The counters' MEMORY table and the durable epoch's table: part of
 * every mode's ddl, the epoch's first. The epoch's statements create no
 * table, so a client that finds <table>_fmem made by another (its bump
 * prepares) must find <table>_epoch made already too. */
extern const char dlock__my_fence_ddl[], dlock__my_epoch_ddl[];
/* The records of the tokens where they come from the sequence (fence.c):
 * part of every mode's ddl. */
extern const char dlock__my_frec_ddl[];

/*
 * A mode's try that draws the token in its own statement (fence.c's
 * header, "the try"):
 *     MY_FENCE_INSERT "SELECT <key>, 0, <owner> FROM <the lock>
 *     WHERE <the lock taken>" MY_FENCE_NEXT
 * The SELECT yields a row only where the lock was taken. A name's counter
 * row goes up by one; a name without one gets a row of 0, which draws
 * nothing (dlock__my_fence() then draws from the marker); nor does a
 * counter that ran out. Run it with dlock__my_fence_with(). %1$s is the
 * table's base name.
 */
#define MY_FENCE_INSERT "INSERT INTO `%1$s_fmem` (lock_key, fence, owner) "
#define MY_FENCE_NEXT                                                      \
    " ON DUPLICATE KEY UPDATE fence = IF(`%1$s_fmem`.fence = 0 OR "        \
    "`%1$s_fmem`.fence & 0xFFFFFFFFFF = 0xFFFFFFFFFF, "                    \
    "`%1$s_fmem`.fence + LAST_INSERT_ID(0), "                              \
    "LAST_INSERT_ID(`%1$s_fmem`.fence + 1)), owner = VALUES(owner)"

/*
 * The same try where the tokens come from the sequence (fence.c, "the
 * sequence"; c->seq == MY_SEQ_ON):
 *     MY_SEQ_INSERT "SELECT <key>, " MY_SEQ_DRAW ", <owner>,
 *     CONNECTION_ID() FROM <the lock> WHERE <the lock taken>" MY_SEQ_NEXT
 * Where the lock was taken the row records the token drawn and who took
 * it; the token is the insert id, never 0.
 */
#define MY_SEQ_INSERT                                                      \
    "INSERT INTO `%1$s_frec` (lock_key, fence, owner, conn) "
#define MY_SEQ_DRAW "LAST_INSERT_ID(NEXTVAL(`%1$s_fseq`))"
#define MY_SEQ_NEXT                                                        \
    " ON DUPLICATE KEY UPDATE fence = VALUES(fence), owner = VALUES(owner),"\
    " conn = VALUES(conn)"

/* Run q, a try built as above, with params: 0 and *rows, the rows it
 * wrote (0: the lock was not taken), and *out, the token (0: none; with
 * *rows > 0 the lock is held, and dlock__my_fence() draws the token: from
 * the marker for a new row, in a new epoch for a counter run out). Or an
 * error number, after which the lock may be held. */
unsigned dlock__my_fence_with(struct dlock__my_conn *c,
                              const struct dlock__my_stmt *q,
                              MYSQL_BIND *params, my_ulonglong *rows,
                              uint64_t *out);
/* Find c's source of tokens (c->seq), before its first draw: on a server
 * with sequences, make sure the sequence was moved above every token of
 * the server's earlier lives (what commits goes over side's connection
 * if side is not NULL, as for dlock__my_fence). 0 or an error number. */
unsigned dlock__my_seq_ready(struct dlock__my_conn *c,
                             struct dlock__my_ctx *side);
/* Whether the server behind c gives tokens from the sequence (without
 * arming c): for inspect. */
bool dlock__my_seq_capable(const struct dlock__my_conn *c);
/* After token was drawn from the sequence on c and before it is used:
 * its epoch must be committed (the sequence may have run past the epoch
 * it was set in). 0 or an error number. */
unsigned dlock__my_seq_check(struct dlock__my_conn *c,
                             struct dlock__my_ctx *side, uint64_t token);
/* Before c waits to draw in the waiting statement (which records
 * nothing): no record may name c any more (c->recorded), so that inspect
 * does not take an older record of c's for its holder. 0 or an error
 * number. */
unsigned dlock__my_seq_forget(struct dlock__my_conn *c);
/* The counters' table is full where tokens come from the sequence: its
 * records go (they only inform inspect), never a marker. 0 or an error
 * number. */
unsigned dlock__my_seq_room(struct dlock__my_conn *c);
/* Bump key's counter on c, record owner as the one who took it and read
 * the new token. What commits (the move to a new epoch, a missing table's
 * CREATE) runs on c if side is NULL (c autocommits), else over side's own
 * connection (c is in a transaction that a COMMIT would end). */
unsigned dlock__my_fence(struct dlock__my_conn *c, struct dlock__my_ctx *side,
                         const uint8_t key[MY_KEY_LEN], const char *owner,
                         size_t owner_len, uint64_t *out);
/* The last token recorded for key (0 if none, or none since the server
 * started), who took it ("" if unknown, owner_cap bytes at most) and the
 * connection id it was drawn on where the tokens come from the sequence
 * (else 0; conn may be NULL), for inspect. */
unsigned dlock__my_fence_peek(struct dlock__my_conn *c,
                              const uint8_t key[MY_KEY_LEN], uint64_t *out,
                              char *owner, size_t owner_cap,
                              uint64_t *conn);
/* Prepare the bump on c before a clock starts (the floor). */
unsigned dlock__my_fence_prepare(struct dlock__my_conn *c);
/* A mode's ctx_close: the side connection goes with the client. */
void dlock__my_fence_side_close(struct dlock__my_ctx *x);

/* ---- bound.c: what the connection-bound modes share ---------------------- */

/* Make the server end the session after a silence longer than lease_ms
 * and its margin [B-BOUND-1]; holds: the session holds locks. 0 or an
 * error number. */
unsigned dlock__my_cover_lease(struct dlock__my_session *ms,
                               uint32_t lease_ms, bool holds);
/* acquire()'s first steps: a live connection, the lease covered. */
int dlock__my_bound_begin(struct dlock__my_session *ms,
                          const struct dlock_request *req);
/* The renew method: one ping proves every lock of the connection. */
int dlock__my_bound_renew(struct dlock_session *s,
                          struct dlock_renewal *items, size_t n);
/* EBUSY or ETIMEDOUT after a lock wait that did not get the lock. */
int dlock__my_busy(int64_t deadline_ms, bool waited, uint32_t *retry_ms);

/* A lock wait that a cancel interrupts [B-CANCEL-1]: while it runs, the
 * session's watcher thread (started by its first wait, kept until it
 * closes) waits for the acquire's cancel and then sends KILL QUERY for the
 * waiting connection over a connection of its own. */
struct dlock__my_kill {
    struct dlock__my_session *ms;
    bool armed;         /* the watcher watches this wait */
};
/* Before the wait's statement. */
void dlock__my_kill_arm(struct dlock__my_kill *k,
                        struct dlock__my_session *ms);
/* After it returned. True when a kill was sent: the statement may have been
 * interrupted or have got the lock anyway, so the caller undoes whatever it
 * got (RELEASE_LOCK, ROLLBACK) and returns dlock_session_cancelled(). A
 * kill that came after the statement ended has been absorbed (DO 0), so
 * it cannot hit that undo. */
bool dlock__my_kill_disarm(struct dlock__my_kill *k);
/* Stop the session's watcher (started: its thread runs) and free it; for
 * session close. NULL is fine. */
void dlock__my_watch_free(struct dlock__my_watch *w, bool started);

/* ---- floor.c: the raw floors --------------------------------------------- */

/* What a mode's file hands its floor: the mode and its statements. */
struct dlock__my_floor_sql {
    const struct dlock__my_mode *mode;
    const struct dlock__my_stmt *take; /* claim / row NOWAIT / GET_LOCK */
    const struct dlock__my_stmt *give; /* DELETE / -(COMMIT) / RELEASE_LOCK */
    const struct dlock__my_stmt *make; /* - / the row's INSERT IGNORE / - */
    const struct dlock__my_stmt *wait; /* - / row FOR UPDATE / GET_LOCK */
};

int dlock__my_floor_insert(const struct dlock__my_floor_sql *q,
                           const struct dlock_uri *uri, const char *name,
                           uint32_t n, uint64_t *ns_out, char *err,
                           size_t errlen);
int dlock__my_floor_for_update(const struct dlock__my_floor_sql *q,
                               const struct dlock_uri *uri, const char *name,
                               uint32_t n, uint64_t *ns_out, char *err,
                               size_t errlen);
int dlock__my_floor_get_lock(const struct dlock__my_floor_sql *q,
                             const struct dlock_uri *uri, const char *name,
                             uint32_t n, uint64_t *ns_out, char *err,
                             size_t errlen);
/* The contended floor of get_lock and for_update (dlock_mode.floor_wait):
 * q->wait in a loop, waiting in the server's queue. */
int dlock__my_floor_wait(const struct dlock__my_floor_sql *q,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen);
/* dlock_mode.fence_floor and .forget of every mode (mode: the base of a
 * struct dlock__my_mode). */
int dlock__my_fence_floor(const struct dlock_mode *mode,
                          const struct dlock_uri *uri, const char *name,
                          uint32_t n, uint64_t *ns_out, char *err,
                          size_t errlen);
int dlock__my_forget(const struct dlock_mode *mode,
                     const struct dlock_uri *uri, const char *const *names,
                     size_t n, char *err, size_t errlen);

/* ---- latch.c: count-down latches (every mode) ----------------------------- */

/* The latches' table: part of every mode's ddl. */
extern const char dlock__my_latch_ddl[];
extern const struct dlock_latch_ops dlock__my_latch;

/* ---- the modes: insert.c, for_update.c, get_lock.c ----------------------- */

extern const struct dlock__my_mode dlock__my_mode_insert;
extern const struct dlock__my_mode dlock__my_mode_for_update;
extern const struct dlock__my_mode dlock__my_mode_get_lock;

#endif /* DLOCK_MY_H */
