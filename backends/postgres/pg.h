/*
 * pg.h: what the two files of the postgres backend share. postgres.c holds
 * the URI, connections, the four modes and the raw floor; listen.c holds
 * the per-client LISTEN connection that wakes lease-mode waiters.
 * Nothing here leaves the backend: only dlock__backend_postgres is exported.
 */
#ifndef DLOCK_PG_H
#define DLOCK_PG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "dlock/backend.h"

enum pg_mode { PG_ADVISORY, PG_ADVISORY_XACT, PG_FOR_UPDATE, PG_LEASE };

/* libpq keywords we may pass: ours plus every pass-through parameter. */
#define PG_KW_MAX 64

/* The SQL of one mode, built once per client with the table name in it. */
struct pg_sql {
    char *lock_try[2];  /* [shared]: one attempt */
    char *lock_wait[2]; /* [shared]: server-side wait */
    char *fence[2];     /* for_update: [0] owner at acquire, [1] fence at release */
    char *unlock[2];    /* [shared]: advisory release */
    char *insert_row;   /* for_update: create a missing lock row */
    char *renew;        /* lease: batch renewal */
    char *release;      /* lease: clear the row and NOTIFY */
    char *ddl[3];       /* CREATE ... IF NOT EXISTS, NULL-terminated */
    char *inspect;
};

/* Everything a URI says, parsed once per client; read-only afterwards. */
struct pg_conf {
    enum pg_mode mode;
    const char *mode_name;
    uint32_t caps;
    uint32_t timeout_ms; /* per call; 0: none */
    uint32_t lease_ms;
    char ns[260];          /* namespace= (at most 256 bytes) */
    uint8_t ns_digest[32]; /* SHA-256(namespace) */
    char table[64];        /* validated, unquoted */
    bool multi_host;
    const char *kw[PG_KW_MAX + 1];
    const char *val[PG_KW_MAX + 1];
    char **own;  /* the strings kw/val point into, NULL-terminated */
    size_t nown;
    /* Server-side TCP keepalive settings (seconds) for connection-bound
     * locks, so a vanished client host frees its locks. */
    char ka_idle[12], ka_interval[12], ka_count[12];
    struct pg_sql sql;
};

/* One channel the listener LISTENs on: a lock name's 64-bit key. */
struct pg_chan {
    struct pg_chan *next;
    uint64_t key;
    uint64_t seq;      /* bumped on every NOTIFY (and on reconnect) */
    int state;         /* PG_CHAN_* */
    int waiters;       /* inside pg_listen_wait() now */
    int64_t last_used; /* dlock_now_ms() */
};

enum { PG_CHAN_WANT, PG_CHAN_SENT, PG_CHAN_ACTIVE };

#define PG_CHAN_BUCKETS 64

/* Per-client state: the configuration and the lease-mode listener. */
struct pg_ctx {
    struct pg_conf cf;
    atomic_bool listening; /* the listener thread was started */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: a channel changed */
    pthread_t thread;
    bool started, stop;
    int wakefd; /* eventfd: work for the listener thread */
    struct pg_chan *chans[PG_CHAN_BUCKETS];
    /* advisory_xact and for_update: the autocommitted connection their
     * fences are committed over (postgres.c, tx_fence), opened on first
     * use; fence_mu serialises the client's threads on it. */
    pthread_mutex_t fence_mu;
    struct pg_session *fence;
};

/* ---- postgres.c, for listen.c ---- */

/* Connect with cf's parameters by the deadline (dlock_now_ms clock;
 * INT64_MAX: none). NULL with err filled on failure. */
PGconn *pg_connect_raw(const struct pg_conf *cf, int64_t deadline, char *err,
                       size_t errlen);
/* Wait until fd has one of events, or the deadline: 1, 0 (time is up) or
 * -1 (poll failed). */
int pg_poll(int fd, short events, int64_t deadline);
/* A libpq message on one line, without the trailing newline. */
void pg_oneline(char *dst, size_t cap, const char *src);
/* "dlock_<16 hex digits>": the NOTIFY channel of a key. */
void pg_channel_name(char out[24], uint64_t key);

/* ---- listen.c ---- */

/*
 * If the channel of key is being listened to, store its notification count
 * in *seq and return true. Lease acquire() calls this just before its
 * attempt, so a release announced after the attempt is seen by wait().
 */
bool pg_listen_seq(struct pg_ctx *x, uint64_t key, uint64_t *seq);
/*
 * Block until the channel of key is notified after seq (when have_seq), or
 * it has just been subscribed (when not), or max_ms have passed. Starts the
 * listener thread on first use. Always DLOCK_OK: a listener that cannot
 * connect makes waits run their full time, and core polls.
 */
int pg_listen_wait(struct pg_ctx *x, uint64_t key, bool have_seq,
                   uint64_t seq, uint32_t max_ms);
void pg_listen_init(struct pg_ctx *x);
void pg_listen_stop(struct pg_ctx *x);

#endif /* DLOCK_PG_H */
