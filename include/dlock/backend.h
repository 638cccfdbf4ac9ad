/*
 * backend.h: the API for backend authors. A backend is one const
 * struct dlock_backend: a versioned table of identity, capabilities and
 * methods. Core finds it by URI scheme and drives it; the backend speaks its
 * server's protocol and nothing else.
 *
 * Stability: this header stays compatible through a minor version. The
 * table is append-only: new slots go at the end with a new
 * DLOCK_BACKEND_VERSION, and core calls a slot of version N only when
 * b->version >= N and the slot is not NULL.
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
 * [B-PIN-1]     If the session's caps have DLOCK_CAP_CONN_BOUND, renew() and
 *               release() of a grant go to the session that acquired it; no
 *               two handles of one client hold the same name on one session;
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
 *               it has run out. A backend claiming DLOCK_CAP_SERVER_TIMEOUT
 *               makes the server end a session that stays silent for
 *               longer than the longest lease of its grants (plus a
 *               margin for clock rates and timer granularity), so a holder
 *               cut off from the server stops believing it holds before the
 *               server can give the lock to anyone else.
 * [B-EXEC-1]    Every descriptor a backend opens is close-on-exec, also
 *               after a reconnect: a child the application execs must not
 *               keep a connection (and so a connection-bound lock) alive.
 */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLOCK_BACKEND_VERSION 1

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
};

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
    uint32_t flags;        /* DLOCK_LOCK_SHARED, ... */
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

struct dlock_session;

struct dlock_backend {
    unsigned int version; /* DLOCK_BACKEND_VERSION it was built with */
    const char *scheme;   /* "redis", "zk", ...: unique, lower case */
    const char *const *aliases;  /* NULL-terminated other schemes, or NULL */
    const char *const *params;   /* NULL-terminated parameter names this
                                    backend reads; any other is an error */
    uint32_t caps;        /* DLOCK_CAP_* of the default mode, for listings */
    const char *summary;  /* one line for `dlock info` */

    /* Optional. Once per process, under the registry lock. */
    int (*global_init)(void);
    void (*global_cleanup)(void);
    /* Optional. First and last thing on threads core starts (watchdog). */
    int (*thread_init)(void);
    void (*thread_end)(void);

    /* Optional. Per-client state shared by all the client's sessions
     * (a pub/sub connection, a ZooKeeper handle). Thread-safe is the
     * backend's job: sessions call into it concurrently. */
    int (*ctx_open)(void **out, const struct dlock_uri *uri, char *err,
                    size_t errlen);
    void (*ctx_close)(void *ctx);

    /* Required. On DLOCK_OK, *out is a new connected session whose
     * ->backend is this table and whose ->caps and ->mode describe the mode
     * the URI chose. On failure write err and return the code. */
    int (*open)(struct dlock_session **out, const struct dlock_uri *uri,
                void *ctx, char *err, size_t errlen);
    /* Required. Disconnect and free the session itself; cannot fail. */
    void (*close)(struct dlock_session *s);

    /* Required. One attempt when deadline_ms is 0. Otherwise, with
     * DLOCK_CAP_NATIVE_WAIT, wait server-side until deadline_ms
     * (dlock_now_ms() clock; INT64_MAX: no limit). DLOCK_OK fills
     * grant->fence (and priv/word); DLOCK_EBUSY may set *retry_ms to when
     * the lock may be free (e.g. the remaining TTL); a native wait that ran
     * out returns DLOCK_ETIMEDOUT, leaving nothing behind on the server. */
    int (*acquire)(struct dlock_session *s, const struct dlock_request *req,
                   int64_t deadline_ms, struct dlock_grant *grant,
                   uint32_t *retry_ms);
    /* Optional. Return DLOCK_OK when a release of req->name is announced,
     * or when max_ms have passed; an error only if the session broke. */
    int (*wait)(struct dlock_session *s, const struct dlock_request *req,
                uint32_t max_ms);
    /* Required. Extend each lease to req->lease_ms (or prove the session
     * holding a connection-bound lock alive), setting items[i].result:
     * DLOCK_ELOST if the lock is gone or has another owner. Return DLOCK_OK
     * when results are set, or a code that applies to all n. */
    int (*renew)(struct dlock_session *s, struct dlock_renewal *items,
                 size_t n);
    /* Required. Owner-checked; never removes someone else's lock. Returns
     * DLOCK_OK, DLOCK_ENOTOWNER (free, expired or another owner's), or an
     * error. */
    int (*release)(struct dlock_session *s, const struct dlock_request *req,
                   struct dlock_grant *grant);
    /* Optional. Describe a name without taking it. */
    int (*inspect)(struct dlock_session *s, const char *name, size_t len,
                   dlock_state *out);
    /* Optional, for `dlock bench`: run n acquire+release cycles of this
     * mode's protocol on name with the client library alone, no dlock core
     * in the loop, and write each cycle's latency in ns to ns_out[i]. */
    int (*floor)(const struct dlock_uri *uri, const char *name, uint32_t n,
                 uint64_t *ns_out, char *err, size_t errlen);
    /* ---- version 1 ends here: append below, then bump the version ---- */
};

struct dlock_session {                    /* every backend embeds this first */
    const struct dlock_backend *backend;  /* set by open() */
    void *core;                           /* core's; backends never touch it */
    uint32_t caps;      /* set by open(): DLOCK_CAP_* of the chosen mode */
    const char *mode;   /* set by open(): static name of the mode */
    uint32_t retry_min_ms; /* set by open(), optional: backoff suited to */
    uint32_t retry_max_ms; /* this backend; the URI's retry_min/max win */
};

/* ---- helpers core gives backends ---------------------------------------- */

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
 * lost them. Threads: the thread of the current call on s (or open()).
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
 * The backend's own parameter's value, or NULL when absent. The common
 * parameters (lease, timeout, namespace, retry_min, retry_max) are consumed
 * by core: read them from the struct's fields instead.
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

/**
 * Register an out-of-tree backend: checks 0 < version <=
 * DLOCK_BACKEND_VERSION and the required slots, and refuses a scheme (or
 * alias) already taken. The table must outlive its use.
 * @return DLOCK_OK, DLOCK_EINVAL. Threads: any.
 */
DLOCK_API int dlock_backend_register(const struct dlock_backend *b);

/** The backend serving scheme (registered first, then built-in), or NULL. */
DLOCK_API const struct dlock_backend *dlock_backend_find(const char *scheme);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_BACKEND_H */
