/*
 * etcd.h: the etcd:// backend's private header. etcd's v3 API is reached
 * as JSON over HTTP through the gateway every etcd 3.4 member serves on
 * its client port, with libcurl and json-c, so no gRPC is needed.
 *
 * etcds:// is the same backend over TLS: https:// members, verified
 * against cacert= (or the system's CA bundle), with an optional client
 * certificate (cert=, key=) for etcd's --client-cert-auth.
 *
 * The lock is etcd's own concurrency.Mutex recipe, so dlock, `etcdctl
 * lock NAME` and Go's concurrency.Mutex exclude each other: each contender
 * puts "<prefix><name>/<lease id in hex>" attached to its session's lease,
 * in one transaction that also reads the key with the smallest create
 * revision under "<prefix><name>/"; the contender whose key has that
 * revision holds the lock, every other one watches only the deletion of
 * the key just before its own (the largest create revision below its
 * own). The fence is the key's create revision, which etcd's revision
 * counter makes strictly increasing across grants, also across restarts
 * and leader changes. A reader (mode rwlock) puts "<name>/r/<lease>" and
 * waits only for the writers before it; to etcdctl and Go it is one more
 * contender. One of N permits (mode mutex) puts "<name>/s/<N>/<lease>"
 * and holds while fewer than N keys are older; it waits for one of the N
 * keys just before its own to go (recipe.c).
 *
 * Files:
 *   etcd.c    the table, the URI read into a context, sessions
 *   keys.c    lock names in keys; how many grants each lease carries;
 *             abandoned leases
 *   http.c    POST of a JSON body to one of the members, failover, the
 *             watch stream, base64 of keys (nettle)
 *   lease.c   the session's lease: grant, keepalive, renewals of grants
 *   recipe.c  acquire, release, inspect: the mutex recipe
 *   latch.c   count-down latches: a key holding the count
 *   floor.c   the bench's bare protocol: the same requests, no dlock core
 */
#ifndef DLOCK_BACKEND_ETCD_H
#define DLOCK_BACKEND_ETCD_H

#include <curl/curl.h>
#include <pthread.h>
#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/backend.h"

/* Members in one URI, and the longest key prefix the URI may set. */
#define ETCD_MAX_MEMBERS 16
#define ETCD_PREFIX_MAX 512
/* A name in a key: '/', '%' and '~' written %XX, the rest as is; a name
 * whose encoding is longer than this is cut and ends with '~' and the
 * SHA-256 of the whole name in hex, so every key stays short. */
#define ETCD_NAME_ENC_MAX 512
/* A key: prefix, the encoded name, '/', "r/" or "s/<N>/", 16 hex digits
 * of the lease, '.' and 16 of a handle's serial. */
#define ETCD_KEY_MAX (ETCD_PREFIX_MAX + ETCD_NAME_ENC_MAX + 64 + 48)

/* etcd's gRPC codes: "requested lease not found" (and other absences);
 * a request that ran out of time in the cluster; no leader or quorum; a
 * member's gateway whose connection to its own server is closing. */
#define ETCD_CODE_NOT_FOUND 5
#define ETCD_CODE_CANCELLED 1
#define ETCD_CODE_DEADLINE_EXCEEDED 4
#define ETCD_CODE_UNAVAILABLE 14

/* Waiting is native (a watch), so core's backoff only paces reconnects. */
#define ETCD_RETRY_MIN_MS 20
#define ETCD_RETRY_MAX_MS 500

/* What every mode gives. The lock is a key on the session's lease: it
 * expires unless renewed (LEASE), and etcd ends a lease that is not kept
 * alive for its TTL, which is dlock_server_timeout_ms(lease) rounded up to
 * whole seconds (SERVER_TIMEOUT). Waiters are queued by create revision
 * on the server and woken by a watch on their predecessor (NATIVE_WAIT,
 * FAIR). Leases outlive HTTP connections (SURVIVES_RECONNECT); one
 * keepalive serves every lock of a lease (BATCH_RENEW). No CONN_BOUND:
 * a lock outlives its connection, and its session is shared with other
 * handles; so a contender about to wait on a lease that carries grants
 * moves to a lease of its own first (recipe.c), and no waiter's keepalive
 * ever prolongs a lock whose holder stopped renewing. */
#define ETCD_CAPS \
    (DLOCK_CAP_LEASE | DLOCK_CAP_SERVER_TIMEOUT | DLOCK_CAP_NATIVE_WAIT | \
     DLOCK_CAP_FAIR | DLOCK_CAP_FENCING | DLOCK_CAP_SURVIVES_RECONNECT | \
     DLOCK_CAP_BATCH_RENEW | DLOCK_CAP_LATCH)

/* Per client: the URI, read once. Read-only after ctx_open() except next,
 * the member to try first (any thread may move it on). */
struct etcd_ctx {
    char *members[ETCD_MAX_MEMBERS]; /* "http://host:port" (https: etcds) */
    size_t nmembers;
    int tls; /* etcds://: https only, the peer verified */
    /* etcds:// files, NULL when not given (cacert: the system's bundle). */
    char *cacert, *cert, *key;
    unsigned next; /* atomic: index of the member that answered last */
    char prefix[ETCD_PREFIX_MAX + 1];
    size_t prefix_len;
    uint32_t ttl_s;      /* the etcd lease's TTL */
    uint32_t timeout_ms; /* each request */
    /* How many grants each lease carries, for leases that carry any
     * (granted in recipe.c, released in release()). */
    pthread_mutex_t mu;
    struct etcd_lease_count {
        int64_t lease;
        uint32_t grants;
    } *counts;
    size_t ncounts, capcounts;
    /* Leases a release could not clean (a key may be left on them): no
     * session puts keys on them or keeps them alive any more, so what is
     * left ends with their TTL. The last ETCD_ABANDONED, under mu. */
    int64_t abandoned[16];
    unsigned nabandoned;
};
#define ETCD_ABANDONED 16

/* A growable buffer for request and response bodies. */
struct etcd_buf {
    char *p;
    size_t len, cap;
};

struct etcd_session {
    struct dlock_session base;
    struct etcd_ctx *x;
    CURL *curl;              /* one connection kept alive to a member */
    CURLM *multi;            /* drives curl (dlock__etcd_multi_new) */
    CURL *check;             /* a range beside a watch (http.c) */
    struct etcd_buf check_resp;
    struct etcd_buf body;    /* the request being built */
    struct etcd_buf resp;    /* the last response */
    int64_t lease;           /* 0: none yet, or it expired */
    int64_t lease_sent_ms;   /* dlock_now_ms() when the last grant or
                                keepalive of it that succeeded was sent */
    char key[ETCD_KEY_MAX + 1];
    size_t key_len;
    char aux[ETCD_KEY_MAX + 1];
    size_t aux_len;
    char why[256]; /* the last failure, as dlock_session_error() got it */
};

/* ---- keys.c ------------------------------------------------------------- */

/* "<prefix><name>/" into out (ETCD_KEY_MAX + 1), the name encoded as
 * ETCD_NAME_ENC_MAX says, so that no name's keys fall under another's
 * prefix. Returns the length. */
size_t dlock__etcd_name_prefix(const struct etcd_ctx *x, char *out,
                               const char *name, size_t len);

/* Count a grant on lease (+1) or its end (-1); the number it carries now
 * (-1 when out of memory: counted as carrying grants). */
int dlock__etcd_lease_grants(struct etcd_ctx *x, int64_t lease, int delta);
/* Mark lease abandoned; whether it is. */
void dlock__etcd_lease_abandon(struct etcd_ctx *x, int64_t lease);
int dlock__etcd_lease_abandoned(struct etcd_ctx *x, int64_t lease);

/* ---- http.c ------------------------------------------------------------- */

int dlock__etcd_fail(struct etcd_session *es, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A multi handle whose own descriptors are close-on-exec, from the
 * process's pool (made when it is empty); give it back with _put(). The
 * pool is freed by the backend's global_cleanup. */
CURLM *dlock__etcd_multi_get(void);
void dlock__etcd_multi_put(CURLM *m);
void dlock__etcd_multi_pool_free(void);

void dlock__etcd_buf_free(struct etcd_buf *b);
/* Append text; 0, or -1 when out of memory (the buffer is kept). */
int dlock__etcd_buf_printf(struct etcd_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Append the base64 of data inside the JSON string being written. */
int dlock__etcd_buf_b64(struct etcd_buf *b, const void *data, size_t len);
/* Decode base64 text into out (cap bytes); the length, or -1. */
long dlock__etcd_unb64(const char *text, char *out, size_t cap);

/*
 * POST es->body to path ("/v3/kv/txn") on a member, by the deadline
 * (dlock_now_ms() clock) and the URI's timeout, whichever is first. A
 * member that cannot be reached is left for the next one. DLOCK_OK with
 * *out the parsed reply (the caller's, json_object_put()); DLOCK_ECONNECT
 * when no member answered, or one said the cluster cannot serve (no
 * leader, no quorum: gRPC codes 14 and 4); DLOCK_ERROR with the server's
 * message when it refused (*code then etcd's gRPC code, e.g. 5 for a
 * lease not found). etcds:// adds DLOCK_EAUTH when the members refused
 * the client certificate, and DLOCK_EINVAL when libcurl cannot use
 * cacert=, cert= or key=; a member whose certificate does not verify is
 * one that cannot be reached.
 */
int dlock__etcd_post(struct etcd_session *es, const char *path,
                     int64_t deadline_ms, json_object **out, int *code);

/*
 * Wait until key (raw bytes) is gone: a watch from now on, and once it is
 * set up a check that the key still exists. 1 when it is gone, 0 when
 * deadline_ms came first (or the watch ended: look again), or a DLOCK_E*
 * error (the session's message says why).
 */
int dlock__etcd_watch_delete(struct etcd_session *es, const char *key,
                             size_t key_len, int64_t deadline_ms);
/*
 * A permit's wait: until one of the n keys under prefix (raw, ending in
 * '/') created just before `below` is gone, the oldest of them created
 * at low: one watch of the prefix's deletions (with each deleted key's
 * create revision), and once it is set up a check that those n keys are
 * all still there. Only they matter: while all n stay, n keys are older
 * than the waiter's. Returns as dlock__etcd_watch_delete() does.
 */
int dlock__etcd_watch_nearest(struct etcd_session *es, const char *prefix,
                              size_t prefix_len, int64_t low, int64_t below,
                              uint32_t n, int64_t deadline_ms);

/* JSON readers. A path is members and array indexes joined by dots,
 * "responses.1.response_range.kvs.0"; anything missing (or of another
 * type) reads as NULL, 0, or an empty array. */
json_object *dlock__etcd_get(json_object *o, const char *path);
int64_t dlock__etcd_i64(json_object *o, const char *path);
size_t dlock__etcd_len(json_object *a);

/* ---- lease.c ------------------------------------------------------------ */

/* Give the session a fresh lease when it has none, when its lease was
 * last kept alive more than a third of the TTL ago (a key put on it now
 * would live only what is left of it), or when it was abandoned. An
 * existing lease is never kept alive here: only renewals of its grants
 * and the session's own waits do that, so no acquire prolongs another
 * handle's lock. */
int dlock__etcd_lease_ensure(struct etcd_session *es, int64_t deadline_ms);
/* The longest a holder may believe in a lock on a lease of ttl_s, from
 * the last keepalive sent: the L whose dlock_server_timeout_ms(L) fits in
 * the TTL [B-BOUND-1]. */
int64_t dlock__etcd_believed_ms(uint32_t ttl_s);
/* Keep lease id alive once: DLOCK_OK, DLOCK_ELOST when it is gone. */
int dlock__etcd_keepalive(struct etcd_session *es, int64_t id,
                          int64_t deadline_ms);
int dlock__etcd_renew(struct dlock_session *s, struct dlock_renewal *items,
                      size_t n);

/* ---- recipe.c ----------------------------------------------------------- */

int dlock__etcd_acquire(struct dlock_session *s,
                        const struct dlock_request *req, int64_t deadline_ms,
                        struct dlock_grant *grant, uint32_t *retry_ms);
int dlock__etcd_release(struct dlock_session *s,
                        const struct dlock_request *req,
                        struct dlock_grant *grant);
int dlock__etcd_inspect(struct dlock_session *s, const char *name,
                        size_t len, dlock_state *out);

/*
 * The queue's two writes, shared with the bench's floor: put the key in
 * es->key unless it exists, on the session's lease, in one transaction
 * that also reads the first key of the name's queue (prefix in es->aux).
 * *rev: the key's create revision; *first: the queue's first create
 * revision; *mine 1 when the key was put now, 0 when it existed with
 * another owner's value, 2 when it existed with this owner's (a key an
 * earlier grant or attempt left); head (ETCD_KEY_MAX + 1 bytes, or NULL)
 * the queue's first key, *head_len its length (-1: none).
 * DLOCK_EBUSY when the session's lease had ended (es->lease is then 0).
 */
int dlock__etcd_enqueue(struct etcd_session *es, const char *owner,
                        size_t owner_len, int64_t io, int64_t *rev,
                        int64_t *first, int *mine, char *head,
                        long *head_len);
/* Delete key if it still has create revision rev: 1, 0 (it had not), or
 * an error. */
int dlock__etcd_delete_if(struct etcd_session *es, const char *key,
                          size_t len, int64_t rev, int64_t io);
/* "<prefix><name>/" into es->aux: a long name is cut and hashed to fit
 * (dlock__etcd_name_prefix), so it cannot fail. */
void dlock__etcd_queue_prefix(struct etcd_session *es, const char *name,
                              size_t len);

/* ---- latch.c: count-down latches (a key holding the count) ---------------- */

extern const struct dlock_latch_ops dlock__etcd_latch;

/* ---- floor.c ------------------------------------------------------------ */

int dlock__etcd_floor(const struct dlock_uri *uri, const char *name,
                      uint32_t n, uint64_t *ns_out, char *err,
                      size_t errlen);
/* dlock_mode.forget of both modes: nothing is left to remove (floor.c). */
int dlock__etcd_forget(const struct dlock_mode *mode,
                       const struct dlock_uri *uri, const char *const *names,
                       size_t n, char *err, size_t errlen);

/* What both modes share: they run one recipe with different kinds. */
#define ETCD_MODE_COMMON \
    .retry_min_ms = ETCD_RETRY_MIN_MS, \
    .retry_max_ms = ETCD_RETRY_MAX_MS, .acquire = dlock__etcd_acquire, \
    .renew = dlock__etcd_renew, .release = dlock__etcd_release, \
    .inspect = dlock__etcd_inspect, .floor = dlock__etcd_floor, \
    .forget = dlock__etcd_forget, .latch = &dlock__etcd_latch

#endif /* DLOCK_BACKEND_ETCD_H */
