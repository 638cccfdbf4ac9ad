/*
 * backend.h: the API for backend authors (the extender tier). A backend is
 * one const struct dlock_backend: identity, the URI parameters it reads,
 * and its modes. A mode is one const struct dlock_mode: a way of making a
 * lock with that server (Redis SETNX, a Redisson hash, a PostgreSQL
 * advisory lock...), with its capabilities and its methods. Core picks the
 * mode once, when a client opens, and calls that mode's methods; a backend
 * never asks again which mode it is in (SQLite's one sqlite3_io_methods per
 * locking style).
 *
 * Stability: this header stays compatible through a minor version of
 * dlock. The tables are append-only: new slots go at the end with a new
 * DLOCK_BACKEND_VERSION, and core calls a slot of version N only when the
 * table says version >= N and the slot is not NULL. Version 2 (dlock 0.2)
 * replaced version 1's one-table-per-backend methods with mode objects;
 * core refuses version 1 tables with a message saying so. Version 3 adds
 * dlock_mode.downgrade; version 2 tables are still accepted (their modes
 * end at data). Version 4 adds dlock_mode.latch (count-down latches);
 * version 2 and 3 tables are still accepted (no latches). Version 5 adds
 * dlock_mode.fence_floor, dlock_mode.forget and dlock_mode.floor_wait (for
 * `dlock bench`); version 2 to 4 tables are still accepted (no fence
 * figure, nothing forgotten, no contended floor). Version 6 adds
 * dlock_mode.server_cpu (the bench's CPU per owner change); version 2 to
 * 5 tables are still accepted (no server share).
 *
 * Core's promises to backends (each has an id that tests name):
 *
 * [B-SERIAL-1]  Core never makes two calls on one session at the same time;
 *               a backend needs no lock around its connection. Calls on
 *               different sessions of one client run concurrently.
 * [B-ONCE-1]    A method makes one attempt. Retries, backoff, reentrancy and
 *               renewal timing are core's. acquire() may wait only where the
 *               server queues waiters itself (DLOCK_CAP_NATIVE_WAIT).
 * [B-ARGS-1]    Arguments are borrowed for the call; copy what you keep.
 * [B-CLOSE-1]   Once open() succeeds the session is core's; core calls
 *               close() exactly once, after every grant on it is released.
 * [B-RELEASE-1] For every DLOCK_OK from acquire(), core calls release()
 *               exactly once with the same request and grant, even when the
 *               lock was lost meanwhile, so grant->priv can be freed there.
 * [B-PIN-1]     If the mode has DLOCK_CAP_CONN_BOUND, renew() and release()
 *               of a grant go to the session that acquired it; no two
 *               handles of one client hold the same name on one session;
 *               and a session holding grants is never given a native wait.
 *               With DLOCK_CAP_SESSION_PER_LOCK, a session holding a grant
 *               gets no other call but that grant's renew() and release().
 * [B-RENEW-1]   Without DLOCK_CAP_CONN_BOUND, renew() and release() may come
 *               on any session of the client, including one opened after
 *               the acquire (a reconnect); the owner id identifies the lock.
 * [B-WAIT-1]    wait() is called only after acquire() returned DLOCK_EBUSY
 *               for the same request; it must return as soon as a release
 *               was announced since that attempt, so subscribe before the
 *               attempt, or re-check after subscribing.
 * [B-ERR-1]     Failures are reported with dlock_session_error() (or
 *               dlock_errorf() in open()), whose text reaches the user with a
 *               prefix naming scheme, operation and lock; write the server's
 *               own words, never a password (core masks it in any case).
 * [B-CONN-1]    A session whose call returned DLOCK_ECONNECT and that holds
 *               no grant is closed by core, and a new one opened on next use:
 *               backends need not reconnect by themselves.
 * [B-WATCH-1]   A session that registered its connection with
 *               dlock_session_watch() is watched by core for the
 *               connection's end (EOF, reset, error) at no cost to calls:
 *               when it ends, core marks the session broken; with
 *               DLOCK_CAP_CONN_BOUND every grant pinned to it is lost at
 *               once (dlock_held() 0, on_lost, release says DLOCK_ELOST);
 *               otherwise every lock of the client is in doubt until a
 *               renewal sent after the event confirms it, and core sends
 *               those renewals at once.
 * [B-BOUND-1]   With DLOCK_CAP_LEASE or DLOCK_CAP_SERVER_TIMEOUT, core
 *               counts each grant's lease from before the request that
 *               took or renewed it was sent, and dlock_held() says no once
 *               it has run out. A mode claiming DLOCK_CAP_SERVER_TIMEOUT
 *               makes the server end a session that stays silent for
 *               longer than the longest lease of its grants (plus a
 *               margin for clock rates and timer granularity), so a holder
 *               cut off from the server stops believing it holds before the
 *               server can give the lock to anyone else.
 * [B-EXEC-1]    Every descriptor a backend opens is close-on-exec, also
 *               after a reconnect: a child the application execs must not
 *               keep a connection (and so a connection-bound lock) alive.
 * [B-KIND-1]    acquire() is called only for the request kinds the mode
 *               lists in its kinds; any other is refused by core with
 *               DLOCK_EUNSUPPORTED before it reaches the backend.
 * [B-CANCEL-1]  An acquire may be cancelled (dlock_cancel_fire(),
 *               dlock_client_shutdown()) from any thread or a signal
 *               handler. A call that may block longer than one round trip
 *               (a native wait in acquire(), and wait()) watches the
 *               descriptors of dlock_session_cancel_fds() beside its own
 *               (dlock_session_poll() does both) and, once
 *               dlock_session_cancelled() is non-zero, returns that code
 *               within 100 ms, leaving nothing granted: a grant that raced
 *               the interruption is released (owner-checked) or its
 *               connection dropped (DLOCK_ECONNECT from the cleanup marks
 *               the session broken, so core closes it) before returning.
 *               A one-attempt call need not look. Core checks the flag
 *               itself around every call and releases a grant that came
 *               back after a cancel.
 * [B-QUEUED-1]  A fair mode (DLOCK_CAP_FAIR) whose acquire() queues the
 *               request at the server and then waits calls
 *               dlock_session_queued() once it is queued (node created,
 *               key put), so core can start the next asynchronous acquire
 *               only after it, and arrival order is kept.
 * [B-PERMIT-1]  A mode that lists DLOCK_KIND_PERMIT (and claims
 *               DLOCK_CAP_PERMITS) grants a permit request while fewer
 *               than req->permits permits of req->name are held, by any
 *               client: each grant is one permit, renewed, released
 *               (owner-checked) and lost on its own like a lock, with a
 *               fence that strictly increases per name across all its
 *               permits. A crashed holder's permit comes back after its
 *               lease or session. A backend that stores the count refuses
 *               a request with another count (DLOCK_EINVAL, naming
 *               permits). Two permit handles of one client are two
 *               holders, each on its own grant.
 * [B-LEASE-1]   A backend whose lock is a server session reads the
 *               parameter session_timeout= (in its params): when the URI
 *               gives it and no lease=, core sets uri->lease_ms to it, so
 *               the lease follows the session instead of the default.
 * [B-LATCH-1]   A mode with DLOCK_CAP_LATCH has a latch table: set()
 *               stores the count only where the name has none (or zero),
 *               atomically against every other set() and down(); down()
 *               takes one off a positive count, and the count reaching
 *               zero leaves the name as if never set and, where the
 *               backend notifies, announces it; a latch lives on without
 *               any session (no lease). Core calls them with a name it
 *               checked (1..DLOCK_NAME_MAX bytes of UTF-8) and never
 *               retries set() or down(). await(), if given, follows
 *               [B-CANCEL-1] and starts listening before it reads the
 *               count, so a zero reached meanwhile is not missed.
 */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLOCK_BACKEND_VERSION 6

/* ---- URIs ------------------------------------------------------------------ */

/* A parsed URI: every string is percent-decoded and NUL-terminated. */
struct dlock_uri_host {
    const char *host; /* "" when absent (file:///path); brackets removed */
    uint16_t port;    /* 0 when absent: the backend's default */
    unsigned int ipv6; /* 1 if the host was a bracketed IPv6 literal */
};

struct dlock_uri_param {
    const char *key;
    const char *value; /* "" for "?key" or "?key=" */
};

struct dlock_uri {
    const char *scheme;   /* lower-case, as written (an alias stays itself) */
    const char *user;     /* NULL when absent */
    const char *password; /* NULL when absent; never print it */
    const struct dlock_uri_host *hosts;
    size_t nhosts;        /* 0 only when the authority is empty */
    const char *path;     /* "" or "/..." */
    const struct dlock_uri_param *params; /* the backend's own, in order */
    size_t nparams;
    /* Parameters core understands, with defaults filled in. */
    uint32_t lease_ms;     /* lease=, default 30s */
    uint32_t timeout_ms;   /* timeout=, default 5s: connect and each call */
    uint32_t retry_min_ms; /* retry_min=, 0 when not given */
    uint32_t retry_max_ms; /* retry_max=, 0 when not given */
    const char *ns;        /* namespace=, "" when not given */
    const char *redacted;  /* the URI as written, password as *** */
    const char *mode;      /* mode=, NULL when not given (core picks) */
};

/* ---- requests and grants ------------------------------------------------------ */

/* dlock_request.kind: what is asked. A mode lists those it serves. */
#define DLOCK_KIND_EXCLUSIVE 0u /* one holder */
#define DLOCK_KIND_SHARED 1u    /* any number of shared holders, no writer */
#define DLOCK_KIND_PERMIT 2u    /* one of at most req->permits holders */
#define DLOCK_KIND_BIT(k) (1u << (k))

/* dlock_request.flags beyond dlock_lock_options.flags: how it is asked. */
#define DLOCK_REQ_FAIR (1u << 16) /* in order of arrival, if the mode can */
/* A candidate of a leader election (dlock_elect_new()): an exclusive lock
 * like any other, which a backend may name or fill as its ecosystem's
 * election recipe does (zk: Curator LeaderLatch's "latch-" nodes). The
 * participant id to publish follows req->owner's terminating NUL, as a
 * NUL-terminated string of 1..DLOCK_ELECT_ID_MAX bytes. Backends without
 * an election recipe ignore the flag. */
#define DLOCK_REQ_ELECTION (1u << 17)

/* What is being asked for; lives as long as the lock handle. */
struct dlock_request {
    const char *name;   /* 1..DLOCK_NAME_MAX bytes of UTF-8, NUL-terminated */
    size_t name_len;
    const char *owner;  /* "<client uuid>:<serial>", unique per handle */
    size_t owner_len;
    const char *client_id; /* "<client uuid>" alone */
    uint64_t serial;       /* the handle's serial within the client */
    uint64_t name_hash;    /* 64 bits of SHA-256(name), for quick compares */
    uint32_t lease_ms;     /* the lease to take or extend */
    uint32_t flags;        /* DLOCK_LOCK_* as given to dlock_lock_new(), and
                              DLOCK_REQ_*; what is asked is in kind */
    uint32_t kind;         /* DLOCK_KIND_*: read this, not the flags */
    uint32_t permits;      /* DLOCK_KIND_PERMIT: the most holders; else 1 */
};

/* What a successful acquire() produced; core keeps it in the handle. */
struct dlock_grant {
    uint64_t fence;     /* strictly increasing per name, 0 without FENCING */
    int64_t expires_ms; /* dlock_now_ms() deadline of the lease. Core sets
                           it before acquire()/renew() from the time the
                           request started (INT64_MAX without a lease); a
                           backend may lower it (e.g. Redlock's drift). */
    void *priv;         /* the backend's; free it in release() */
    uint64_t word[2];   /* backend state that needs no allocation */
};

/* One renewal in a batch. */
struct dlock_renewal {
    const struct dlock_request *req;
    struct dlock_grant *grant;
    int result; /* set by renew(): DLOCK_OK, DLOCK_ELOST, DLOCK_ECONNECT... */
};

/* ---- the tables ---------------------------------------------------------------- */

/* Every backend's session embeds this first; core sets both fields. */
struct dlock_session {
    const struct dlock_backend *backend;
    void *core; /* core's; backends never touch it */
};

/*
 * A mode's count-down latches [B-LATCH-1] (dlock_mode.latch). Counts are
 * 0..DLOCK_LATCH_COUNT_MAX; 0 is also "no latch of that name".
 */
struct dlock_latch_ops {
    /* Required. If the name's count is 0, make it count and say
     * *current = 0; else change nothing and say *current = the count. */
    int (*set)(struct dlock_session *s, const char *name, size_t len,
               uint32_t count, uint32_t *current);
    /* Required. One off a positive count; *left = the count after (0 when
     * it was 0 already). Reaching zero wakes the waiters. */
    int (*down)(struct dlock_session *s, const char *name, size_t len,
                uint32_t *left);
    /* Required. The current count. */
    int (*count)(struct dlock_session *s, const char *name, size_t len,
                 uint32_t *count);
    /* Optional. Wait until the count is 0 (DLOCK_OK), deadline_ms passes
     * (DLOCK_ETIMEDOUT) or the call is cancelled (its code), listening
     * before looking. NULL: core polls count() with backoff between
     * poll_min_ms and poll_max_ms. */
    int (*await)(struct dlock_session *s, const char *name, size_t len,
                 int64_t deadline_ms);
    /* Polling when await is NULL (0: core's 10 ms and 200 ms). */
    uint32_t poll_min_ms, poll_max_ms;
};

/*
 * A mode: one way of locking with this backend's server. Methods marked
 * required must be set; core checks when the backend is registered.
 */
struct dlock_mode {
    const char *name;    /* the value of mode=, lower case: "setnx" */
    const char *summary; /* one line for `dlock info` */
    uint32_t caps;       /* DLOCK_CAP_* this mode really gives */
    uint32_t kinds;      /* DLOCK_KIND_BIT() of each kind it serves */
    /* Backoff suited to this mode (0: core's); the URI's retry_min/max win. */
    uint32_t retry_min_ms, retry_max_ms;

    /* Required. One attempt when deadline_ms is 0. Otherwise, with
     * DLOCK_CAP_NATIVE_WAIT, wait server-side until deadline_ms
     * (dlock_now_ms() clock; INT64_MAX: no limit). DLOCK_OK fills
     * grant->fence (and priv/word); DLOCK_EBUSY may set *retry_ms to when
     * the lock may be free (e.g. the remaining TTL); a native wait that ran
     * out returns DLOCK_ETIMEDOUT, leaving nothing behind on the server. */
    int (*acquire)(struct dlock_session *s, const struct dlock_request *req,
                   int64_t deadline_ms, struct dlock_grant *grant,
                   uint32_t *retry_ms);
    /* Required. Extend each lease to req->lease_ms (or prove the session
     * holding a connection-bound lock alive), setting items[i].result:
     * DLOCK_ELOST if the lock is gone or has another owner. Return DLOCK_OK
     * when results are set, or a code that applies to all n. */
    int (*renew)(struct dlock_session *s, struct dlock_renewal *items,
                 size_t n);
    /* Required. Owner-checked; never removes someone else's lock. Returns
     * DLOCK_OK, DLOCK_ENOTOWNER (free, expired or another owner's), or an
     * error. In a mode without DLOCK_CAP_CONN_BOUND, a release that said
     * DLOCK_ECONNECT is called once more for the same grant over a fresh
     * session [B-CONN-2]: it must leave the grant usable for that, or
     * answer the second call DLOCK_ECONNECT again. */
    int (*release)(struct dlock_session *s, const struct dlock_request *req,
                   struct dlock_grant *grant);
    /* Optional. Return DLOCK_OK when a release of req->name is announced,
     * or when max_ms have passed; an error only if the session broke. */
    int (*wait)(struct dlock_session *s, const struct dlock_request *req,
                uint32_t max_ms);
    /* Optional. Describe a name without taking it; out has its version set
     * and the unknown fields preset by core. */
    int (*inspect)(struct dlock_session *s, const char *name, size_t len,
                   dlock_state *out);
    /* Optional, for `dlock bench`: run n acquire+release cycles of this
     * mode's bare lock protocol on name with the client library alone, no
     * dlock core in the loop and no fence (what a user of the bare client
     * library sends to take and release that kind of lock, owner-checked
     * where the protocol is), and write each cycle's latency in ns to
     * ns_out[i]. */
    int (*floor)(const struct dlock_uri *uri, const char *name, uint32_t n,
                 uint64_t *ns_out, char *err, size_t errlen);
    /* Optional. The backend's own constants for this mode (its SQL, its
     * node names...), for methods shared by several modes. */
    const void *data;
    /* ---- version 2 ends here ---- */
    /* Optional (dlock_downgrade()). Turn an exclusive grant into a shared
     * one of the same owner without a moment when neither is held, so no
     * writer can come in between; req->kind is already
     * DLOCK_KIND_SHARED. On any error the grant must still be held
     * exclusive, or be reported lost (DLOCK_ELOST). Called on the session
     * that holds a connection-bound grant [B-PIN-1]. NULL: the mode cannot
     * do it atomically, and core says DLOCK_EUNSUPPORTED. */
    int (*downgrade)(struct dlock_session *s,
                     const struct dlock_request *req,
                     struct dlock_grant *grant);
    /* ---- version 3 ends here ---- */
    /* Optional: count-down latches on this mode's server, or NULL. Set
     * exactly when caps has DLOCK_CAP_LATCH. */
    const struct dlock_latch_ops *latch;
    /* ---- version 4 ends here ---- */
    /* Optional, for `dlock bench`: n draws of this mode's fencing token on
     * name alone, with the client library alone (what dlock adds to the
     * bare lock of floor() to get a fence), each timed into ns_out[i].
     * NULL where the fence comes inside the lock's own request and costs
     * nothing apart (a node's czxid, a key's revision, an INCR in the lock
     * script). mode is this very mode (the pointer in modes[]), so that
     * one function can serve several modes. */
    int (*fence_floor)(const struct dlock_mode *mode,
                       const struct dlock_uri *uri, const char *name,
                       uint32_t n, uint64_t *ns_out, char *err,
                       size_t errlen);
    /* Optional, for `dlock bench`: remove what each of names[0..n) left on
     * the server or in the directory (fence counters, lock rows, lock
     * files, keys) once nobody holds, waits for or uses them; core never
     * calls it otherwise. DLOCK_OK also when there was nothing to remove.
     * mode: as for fence_floor. */
    int (*forget)(const struct dlock_mode *mode, const struct dlock_uri *uri,
                  const char *const *names, size_t n, char *err,
                  size_t errlen);
    /* Optional, for `dlock bench`: the bare lock's waiting acquire, with
     * the client library alone, no dlock core and no fence: take name with
     * the request that waits in the server's own queue (pg_advisory_lock,
     * GET_LOCK(name, timeout), SELECT ... FOR UPDATE, a blocking OFD lock),
     * call go_on(arg, 1) while holding it, release it, and again; after a
     * wait that gave up at wait_ms, go_on(arg, 0) instead. Returns
     * DLOCK_OK once go_on() said 0, or the failure that stopped it.
     * The bench runs it in many processes on one name: the owner changes
     * a second of the server's own queue, which dlock's contended figure
     * is judged against. NULL where the server has no waiting request.
     * mode: as for fence_floor. */
    int (*floor_wait)(const struct dlock_mode *mode,
                      const struct dlock_uri *uri, const char *name,
                      uint32_t wait_ms, int (*go_on)(void *arg, int held),
                      void *arg, char *err, size_t errlen);
    /* ---- version 5 ends here ---- */
    /* Optional, for `dlock bench`: the CPU time (user + system, ns) the
     * URI's server process has used since it started, by its own count
     * (Redis: INFO cpu), so that the bench can add the server's share to
     * a workload's cost. NULL where the server does not say.
     * mode: as for fence_floor. */
    int (*server_cpu)(const struct dlock_mode *mode,
                      const struct dlock_uri *uri, uint64_t *ns_out,
                      char *err, size_t errlen);
    /* ---- version 6 ends here: append below, then bump the version ---- */
};

struct dlock_backend {
    unsigned int version; /* DLOCK_BACKEND_VERSION it was built with */
    const char *scheme;   /* "redis", "zk", ...: unique, lower case */
    const char *const *aliases;  /* NULL-terminated other schemes, or NULL */
    const char *const *params;   /* NULL-terminated parameter names this
                                    backend reads besides core's; any other
                                    is an error */
    const char *summary;  /* one line on the backend for `dlock info` */
    /* Required. NULL-terminated; modes[0] is the default. */
    const struct dlock_mode *const *modes;

    /* Optional. The mode a URI asks for when mode= alone does not say it
     * (a scheme alias, a flag parameter): set *out, or leave it NULL for
     * core's rule (mode=, else modes[0]). A bad combination is an error
     * written to err. */
    int (*pick_mode)(const struct dlock_uri *uri,
                     const struct dlock_mode **out, char *err,
                     size_t errlen);

    /* Optional. Once per process, under the registry lock. */
    int (*global_init)(void);
    void (*global_cleanup)(void);
    /* Optional. First and last thing on threads core starts (watchdog). */
    int (*thread_init)(void);
    void (*thread_end)(void);

    /* Optional. Per-client state shared by all the client's sessions
     * (a pub/sub connection, a ZooKeeper handle, the parsed URI). Thread-
     * safety is the backend's job: sessions call into it concurrently.
     * mode is the very pointer from modes[] that core picked, so a backend
     * may embed its struct dlock_mode first in a larger struct of its own
     * and get back to it. A backend with several modes keeps the mode in
     * its ctx: open() is not told it again. */
    int (*ctx_open)(void **out, const struct dlock_uri *uri,
                    const struct dlock_mode *mode, char *err, size_t errlen);
    void (*ctx_close)(void *ctx);

    /* Required. On DLOCK_OK, *out is a new connected session of the mode
     * ctx_open() was given. On failure write err and return the code. */
    int (*open)(struct dlock_session **out, const struct dlock_uri *uri,
                void *ctx, char *err, size_t errlen);
    /* Required. Disconnect and free the session itself; cannot fail. */
    void (*close)(struct dlock_session *s);
    /* ---- versions 2 to 5 end here: append below, then bump ---- */
};

/* ---- helpers core gives backends ------------------------------------------- */

/**
 * Record a failure of the current call on s (the text goes to the calling
 * handle's message, prefixed by core) and return code, so a backend can
 * write `return dlock_session_error(s, DLOCK_ECONNECT, "...: %s", why);`.
 */
DLOCK_API int dlock_session_error(struct dlock_session *s, int code,
                                  const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/**
 * Watch fd, the connection of session s, for its end [B-WATCH-1]. Call
 * after every (re)connect with the new descriptor, and with -1 before
 * closing it (or before replacing it by a new connection). Watching costs
 * nothing on the call path: core's watchdog thread waits on the descriptor
 * in epoll for a hang-up or error only, never for data. A connection-bound
 * session whose watched descriptor is withdrawn while it holds grants has
 * lost them. Core watches a copy (dup()) of fd that it closes when fd is
 * withdrawn, so a library that closes fd by itself on an error does not
 * race with the watch. Threads: the thread of the current call on s (or
 * open()).
 */
DLOCK_API void dlock_session_watch(struct dlock_session *s, int fd);

/**
 * How long the server of a DLOCK_CAP_SERVER_TIMEOUT mode must let a
 * session stay silent before it ends it, for grants of lease_ms
 * [B-BOUND-1]: the lease plus a margin (a tenth of it, at least 500 ms)
 * for clock rates and timer granularity. The margin is the longest a lock
 * stays unusable after its holder went silent without closing.
 */
DLOCK_API uint32_t dlock_server_timeout_ms(uint32_t lease_ms);

/**
 * Has the acquire that the current call on s serves been cancelled
 * [B-CANCEL-1]? 0 when not (or outside an acquire), DLOCK_ECANCELED when
 * its own dlock_cancel fired, DLOCK_ECLOSED when the client was shut down.
 * An atomic load: cheap enough for every turn of a wait loop.
 * Threads: the thread of the current call on s.
 */
DLOCK_API int dlock_session_cancelled(struct dlock_session *s);

/**
 * The descriptors that become readable (POLLIN, and stay so) once the
 * current call on s is cancelled: at most 2, written to fds (cap >= 2);
 * returns how many. Add them to the call's own poll set; never read them.
 * Threads: the thread of the current call on s.
 */
DLOCK_API size_t dlock_session_cancel_fds(struct dlock_session *s, int *fds,
                                          size_t cap);

/**
 * Wait until fd (-1: none, only time and cancel) is ready for events, the
 * deadline (dlock_now_ms() clock; INT64_MAX: none) passes, or the current
 * call is cancelled. Retries EINTR.
 * @return the fd's revents (> 0), 0 when the deadline passed, or
 *         DLOCK_ECANCELED / DLOCK_ECLOSED (dlock_session_cancelled()), or
 *         DLOCK_ERROR when poll() fails.
 * Threads: the thread of the current call on s.
 */
DLOCK_API int dlock_session_poll(struct dlock_session *s, int fd,
                                 short events, int64_t deadline_ms);

/**
 * pthread_cond_timedwait() on cond (a pthread_cond_t * made with
 * dlock_cond_init_monotonic()) and its locked mutex (a pthread_mutex_t *)
 * until deadline_ms, in slices of at most DLOCK_CANCEL_SLICE_MS so that a
 * cancel of the current call is seen in time [B-CANCEL-1]: for waits on a
 * condition another thread signals (a watcher, a pub/sub reader), where no
 * descriptor can be polled. Returns 0 when woken, at the deadline, or
 * spuriously (re-check the predicate and the clock, as with
 * pthread_cond_timedwait), or DLOCK_ECANCELED / DLOCK_ECLOSED.
 * Threads: the thread of the current call on s, holding mutex.
 */
#define DLOCK_CANCEL_SLICE_MS 20
DLOCK_API int dlock_session_cond_wait(struct dlock_session *s, void *cond,
                                      void *mutex, int64_t deadline_ms);

/**
 * The current acquire() on s has queued its request at the server (a fair
 * mode's node or key exists) and is about to wait [B-QUEUED-1]. Cheap;
 * does nothing outside an asynchronous acquire.
 * Threads: the thread of the current call on s.
 */
DLOCK_API void dlock_session_queued(struct dlock_session *s);

/** Set FD_CLOEXEC on fd [B-EXEC-1]; DLOCK_OK or DLOCK_ERROR (errno). */
DLOCK_API int dlock_fd_cloexec(int fd);

/** Log through the client's log hook. */
DLOCK_API void dlock_session_log(struct dlock_session *s, int level,
                                 const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/** Format into err (as open() and floor() report) and return code. */
DLOCK_API int dlock_errorf(char *err, size_t errlen, int code,
                           const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/** CLOCK_MONOTONIC in milliseconds and nanoseconds. */
DLOCK_API int64_t dlock_now_ms(void);
DLOCK_API uint64_t dlock_now_ns(void);

/**
 * A dlock_now_ms() deadline as an absolute CLOCK_MONOTONIC timespec, for
 * pthread_cond_timedwait() on a condition variable made with
 * dlock_cond_init_monotonic(). INT64_MAX gives a time far in the future.
 */
DLOCK_API struct timespec dlock_deadline_timespec(int64_t deadline_ms);

/**
 * pthread_cond_init() on CLOCK_MONOTONIC, so timed waits are not moved by
 * changes of the wall clock. cond is a pthread_cond_t *; returns what
 * pthread_cond_init() returns.
 */
DLOCK_API int dlock_cond_init_monotonic(void *cond);

/**
 * The backend's own parameter's value, or NULL when absent. The common
 * parameters (lease, timeout, namespace, retry_min, retry_max, mode) are
 * consumed by core: read them from the struct's fields instead.
 */
DLOCK_API const char *dlock_uri_param(const struct dlock_uri *u,
                                      const char *key);

/**
 * Typed parameter readers: *out = dflt when absent; a bad value writes a
 * message naming the parameter and what was expected into err and returns
 * DLOCK_EINVAL. Booleans take 1/0, true/false, yes/no, on/off (any case; an
 * empty value is an error); choices compare without regard to case.
 */
DLOCK_API int dlock_uri_duration(const struct dlock_uri *u, const char *key,
                                 uint32_t dflt, uint32_t *out, char *err,
                                 size_t errlen);
DLOCK_API int dlock_uri_uint(const struct dlock_uri *u, const char *key,
                             uint32_t dflt, uint32_t min, uint32_t max,
                             uint32_t *out, char *err, size_t errlen);
DLOCK_API int dlock_uri_bool(const struct dlock_uri *u, const char *key,
                             int dflt, int *out, char *err, size_t errlen);
/** choices is NULL-terminated; *out is the index of the one given. */
DLOCK_API int dlock_uri_choice(const struct dlock_uri *u, const char *key,
                               const char *const *choices, int dflt, int *out,
                               char *err, size_t errlen);

/**
 * Parse a URI as core does (for backends that wrap another, like the test
 * suite's fault shim). On DLOCK_OK *out is the caller's, freed with
 * dlock_uri_free(); on failure err says which part is wrong and what was
 * expected, never showing a password.
 */
DLOCK_API int dlock_uri_parse(struct dlock_uri **out, const char *text,
                              char *err, size_t errlen);
DLOCK_API void dlock_uri_free(struct dlock_uri *u);

/** SHA-256 of data. */
DLOCK_API void dlock_sha256(uint8_t out[32], const void *data, size_t len);

/** SHA-256 of parts[0] || parts[1] || ... (n parts), with no copy. */
DLOCK_API void dlock_sha256v(uint8_t out[32], const void *const *parts,
                             const size_t *lens, size_t n);

/**
 * Map a lock name to one safe path segment of at most max_out bytes
 * (max_out >= 72; out must hold max_out + 1): bytes outside [A-Za-z0-9_.-]
 * and a leading '.' become %XX; a result longer than max_out is cut and ends
 * with "~" and 64 hex digits of SHA-256(name). Distinct names give distinct
 * segments ('~' never appears otherwise). Returns the length written.
 */
DLOCK_API size_t dlock_name_segment(char *out, size_t max_out,
                                    const char *name, size_t len);

/* ---- registering, and what core does with the tables ------------------------- */

/**
 * Register an out-of-tree backend: checks version == DLOCK_BACKEND_VERSION
 * (a version 1 table is refused: rebuild it against this header), the
 * required slots of the table and of each mode, and refuses a scheme (or
 * alias) already taken. The table must outlive its use.
 * @return DLOCK_OK, DLOCK_EINVAL. Threads: any.
 */
DLOCK_API int dlock_backend_register(const struct dlock_backend *b);

/** The backend serving scheme (registered first, then built-in), or NULL. */
DLOCK_API const struct dlock_backend *dlock_backend_find(const char *scheme);

/**
 * For `dlock bench`: run n bare acquire+release cycles of the URI's backend
 * and mode with its client library alone, no dlock core in the loop, and
 * write each cycle's latency in nanoseconds to ns_out[i].
 * @return DLOCK_OK, DLOCK_EUNSUPPORTED (no floor for this mode),
 *         DLOCK_EINVAL, DLOCK_ENOBACKEND, DLOCK_ECONNECT; err explains.
 * Threads: any.
 */
DLOCK_API int dlock_bench_floor(const char *uri, const char *name, uint32_t n,
                                uint64_t *ns_out, char *err, size_t errlen);

/**
 * For `dlock bench`: n draws of the URI's mode's fencing token on name
 * alone, with its client library alone, each timed into ns_out[i]: the
 * fence's own cost, which the floor leaves out.
 * @return as dlock_bench_floor(); DLOCK_EUNSUPPORTED also where the fence
 *         comes inside the lock's own request (nothing to time apart).
 * Threads: any.
 */
DLOCK_API int dlock_bench_fence(const char *uri, const char *name, uint32_t n,
                                uint64_t *ns_out, char *err, size_t errlen);

/**
 * For `dlock bench`: remove every trace of names[0..n) (fence counters,
 * rows, lock files, keys) on the URI's server, once no process holds,
 * waits for or uses them. Only for names that are the caller's own.
 * @return DLOCK_OK, DLOCK_EUNSUPPORTED (the mode cannot), DLOCK_EINVAL,
 *         DLOCK_ENOBACKEND, DLOCK_ECONNECT; err explains. Threads: any.
 */
DLOCK_API int dlock_bench_forget(const char *uri, const char *const *names,
                                 size_t n, char *err, size_t errlen);

/**
 * For `dlock bench`: the bare lock's waiting acquire on name, in a loop,
 * with the URI's client library alone (dlock_mode.floor_wait says what it
 * sends): go_on(arg, 1) is called while the lock is held, go_on(arg, 0)
 * after a wait that gave up at wait_ms; the loop ends when go_on()
 * returns 0.
 * @return DLOCK_OK, DLOCK_EUNSUPPORTED (the mode has no waiting request),
 *         DLOCK_EINVAL, DLOCK_ENOBACKEND, DLOCK_ECONNECT, DLOCK_ERROR; err
 *         explains. Threads: any.
 */
DLOCK_API int dlock_bench_floor_wait(const char *uri, const char *name,
                                     uint32_t wait_ms,
                                     int (*go_on)(void *arg, int held),
                                     void *arg, char *err, size_t errlen);

/**
 * For `dlock bench`: the CPU time (user + system, in nanoseconds) the
 * URI's server has used since it started, by its own count
 * (dlock_mode.server_cpu says how): two readings around a workload give
 * the server's share of it.
 * @return DLOCK_OK, DLOCK_EUNSUPPORTED (the mode cannot say),
 *         DLOCK_EINVAL, DLOCK_ENOBACKEND, DLOCK_ECONNECT; err explains.
 * Threads: any.
 */
DLOCK_API int dlock_bench_server_cpu(const char *uri, uint64_t *ns_out,
                                     char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_BACKEND_H */
