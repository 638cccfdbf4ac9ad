/*
 * dlock.h: the public API of dlock, the only header applications include.
 *
 * dlock puts many kinds of distributed lock behind one small API. An
 * application opens a client on a backend URI (file://, redis://, zk://,
 * postgres://, mysql://, ...), makes a lock handle per name, and acquires,
 * renews and releases through the handle. This header knows nothing of any
 * backend: the URI's scheme picks one at run time.
 *
 * Ownership: the owner of a lock is a lock handle, not a thread. Each handle
 * has the id "<client uuid>:<handle serial>"; a handle may be acquired in one
 * thread and released in another, and two handles on the same name exclude
 * each other even inside one process.
 *
 * Threads, the general rule: a client is shared by any number of threads; a
 * lock handle is used by one thread at a time (any thread). Exceptions are
 * stated in the "Threads:" line of each function.
 *
 * Stability: this header stays source and binary compatible through a major
 * version; option structs (the caller's input) and output structs (filled
 * by dlock into memory the caller owns) carry a version field first and
 * grow at the end: initialise them with their _INIT macro, and dlock fills
 * only the fields that version has.
 */
#ifndef DLOCK_DLOCK_H
#define DLOCK_DLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DLOCK_BUILDING) && defined(__GNUC__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif

#define DLOCK_VERSION_MAJOR 0
#define DLOCK_VERSION_MINOR 2
#define DLOCK_VERSION_PATCH 0
#define DLOCK_VERSION_STRING "0.2.0"

/** The version of the library actually linked, e.g. "0.2.0". */
DLOCK_API const char *dlock_version(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * One list feeds the enum, dlock_strerror() and dlock_err_name(). Zero is
 * success, failures are negative. Numbers never move; new codes are added at
 * the end.
 */
#define DLOCK_ERROR_MAP(XX)                                                  \
    XX(ERROR, -1, "failed; see the handle's message")                       \
    XX(EBUSY, -2, "held by another owner")                                  \
    XX(ETIMEDOUT, -3, "deadline passed before the lock was granted")        \
    XX(ELOST, -4, "lock lost: lease expired or session ended")              \
    XX(ECONNECT, -5, "cannot reach the lock service")                       \
    XX(ENOBACKEND, -6, "no backend for this URI scheme in this build")      \
    XX(EINVAL, -7, "invalid argument")                                      \
    XX(ENOTOWNER, -8, "not this owner's: free, expired or another owner's") \
    XX(ENOTHELD, -9, "the lock is not held by this handle")                 \
    XX(ENOMEM, -10, "out of memory")                                        \
    XX(EUNSUPPORTED, -11, "not supported by this backend or mode")          \
    XX(ECLOSED, -12, "the client was closed")                               \
    XX(EAUTH, -13, "the server refused the credentials: user or password")  \
    XX(ENOENT, -14, "what the URI names does not exist (a directory...)")   \
    XX(EACCES, -15, "no permission to create or open the lock (a file...)") \
    XX(ECANCELED, -16, "cancelled before the lock was granted")            \
    XX(EREPLICAS, -17, "too few replicas confirmed the write in time")     \
    XX(EDEADLK, -18, "this thread holds the name through another handle "  \
                     "in a mode that excludes the one asked: it would "    \
                     "wait for itself")

typedef enum {
    DLOCK_OK = 0,
#define DLOCK_XX_(name, value, text) DLOCK_##name = (value),
    DLOCK_ERROR_MAP(DLOCK_XX_)
#undef DLOCK_XX_
} dlock_error_code;

/**
 * A static English sentence for any code, known or not; never NULL, never
 * allocates. Threads: any.
 */
DLOCK_API const char *dlock_strerror(int code);

/** The code's name without prefix ("EBUSY"), or "UNKNOWN". Threads: any. */
DLOCK_API const char *dlock_err_name(int code);

/* ------------------------------------------------------------------------ */
/* Capabilities: what a backend, in the mode the URI chose, really gives    */
/* ------------------------------------------------------------------------ */

#define DLOCK_CAP_LEASE (1u << 0)        /* expires unless renewed */
#define DLOCK_CAP_CONN_BOUND (1u << 1)   /* dies with its connection/session */
#define DLOCK_CAP_NATIVE_WAIT (1u << 2)  /* the server queues waiters */
#define DLOCK_CAP_NOTIFY (1u << 3)       /* waiters are woken by a release */
#define DLOCK_CAP_FAIR (1u << 4)         /* granted in order of arrival */
#define DLOCK_CAP_SHARED (1u << 5)       /* shared (reader) mode */
#define DLOCK_CAP_FENCING (1u << 6)      /* fence strictly increases */
#define DLOCK_CAP_SURVIVES_RECONNECT (1u << 7) /* a new connection keeps it */
#define DLOCK_CAP_SESSION_PER_LOCK (1u << 8)   /* a held lock ties a session */
#define DLOCK_CAP_NO_RENEW (1u << 9)     /* nothing to renew while alive */
#define DLOCK_CAP_BATCH_RENEW (1u << 10) /* renewals pipelined per session */
#define DLOCK_CAP_SERVER_TIMEOUT (1u << 11) /* the server ends a silent
                                               session after its lease */
#define DLOCK_CAP_REPLICA_WAIT (1u << 12) /* can wait for replicas to
                                             confirm each write (WAIT) */
#define DLOCK_CAP_DOWNGRADE (1u << 13)    /* dlock_downgrade(): a writer
                                             becomes a reader atomically */
#define DLOCK_CAP_PERMITS (1u << 14)      /* counting semaphores
                                             (dlock_lock_options.permits) */
#define DLOCK_CAP_LATCH (1u << 15)        /* count-down latches
                                             (dlock_latch_*) */

/** "lease", "conn-bound", ... for one bit; NULL for an unknown bit. */
DLOCK_API const char *dlock_cap_name(uint32_t bit);

/** A sentence explaining one bit; NULL for an unknown bit. */
DLOCK_API const char *dlock_cap_text(uint32_t bit);

/* ------------------------------------------------------------------------ */
/* Process-wide set-up                                                      */
/* ------------------------------------------------------------------------ */

/**
 * Initialise every built-in backend's client library once (MySQL's
 * mysql_library_init is not thread-safe). Reference counted; optional, as
 * dlock_client_open() calls it too, but call it before starting threads if
 * several threads may open the first client at once.
 *
 * @return DLOCK_OK or the first backend's failure.
 * Threads: call before other threads use dlock.
 */
DLOCK_API int dlock_global_init(void);

/** Undo one dlock_global_init(). Threads: after every client is closed. */
DLOCK_API void dlock_global_shutdown(void);

/**
 * The schemes this build knows, built-in and registered, in lookup order.
 * Writes at most cap pointers (static strings) and returns how many exist.
 * Threads: any.
 */
DLOCK_API size_t dlock_backend_schemes(const char **out, size_t cap);

/* ------------------------------------------------------------------------ */
/* Clients                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct dlock_client dlock_client;
typedef struct dlock_lock dlock_lock;

#define DLOCK_LOG_ERROR 0
#define DLOCK_LOG_WARN 1
#define DLOCK_LOG_INFO 2
#define DLOCK_LOG_DEBUG 3

/**
 * Called for log lines at or below the client's level. Runs on the thread
 * that logged (possibly the watchdog's): thread-safe, short, and never
 * calling back into the same client. msg never contains a URI password.
 */
typedef void (*dlock_log_fn)(int level, const char *msg, void *payload);

/* dlock_client_options.flags */
/* Queue every callback (dlock_acquire_async()'s done, on_lost) instead of
 * running it on dlock's threads; the application runs them with
 * dlock_client_dispatch() when dlock_client_event_fd() is readable. */
#define DLOCK_CLIENT_QUEUE_CALLBACKS (1u << 0)

typedef struct {
    unsigned int version; /* DLOCK_CLIENT_OPTIONS_VERSION */
    dlock_log_fn log;     /* NULL: no logging */
    int log_level;        /* DLOCK_LOG_*: the most verbose level passed */
    void *payload;        /* passed to log */
    /* ---- version 2 ---- */
    uint32_t flags;       /* DLOCK_CLIENT_* */
} dlock_client_options;

/* Version 1 structs (without flags) are still accepted. */
#define DLOCK_CLIENT_OPTIONS_VERSION 2
#define DLOCK_CLIENT_OPTIONS_INIT \
    { DLOCK_CLIENT_OPTIONS_VERSION, NULL, DLOCK_LOG_WARN, NULL, 0 }

/**
 * Open a client on a backend URI and connect its first session.
 *
 * URI grammar: scheme://[user[:password]@]host[:port][,host[:port]...]
 * [/path][?key=value&...], percent-encoded, IPv6 hosts in brackets.
 * Parameters every backend knows: lease (default 30s), timeout (I/O timeout
 * for connecting and each server call, default 5s), namespace, retry_min,
 * retry_max. Durations take a unit: 250ms, 5s, 2m, 1h (0 alone is allowed).
 * Unknown or repeated parameters are errors.
 *
 * @param out   set to the new client, even on most failures, so that
 *              dlock_client_errmsg() can explain; close it either way.
 *              Left NULL only on DLOCK_ENOMEM or a NULL out.
 * @param uri   NULL or "": $DLOCK_URI, else the build's default
 *              (a file:// directory in the user's runtime directory).
 * @param opts  NULL for defaults.
 * @return DLOCK_OK, DLOCK_EINVAL (bad URI), DLOCK_ENOBACKEND,
 *         DLOCK_ECONNECT, DLOCK_ENOMEM, ...
 * Threads: any.
 */
DLOCK_API int dlock_client_open(dlock_client **out, const char *uri,
                                const dlock_client_options *opts);

/**
 * Release every lock still held through this client, stop its watchdog,
 * disconnect, and free it. Handles made from it stay valid memory until
 * dlock_lock_free(); their calls return DLOCK_ECLOSED. Asynchronous
 * acquires still pending end first: their done callbacks run (on the
 * acquire threads, or here, before close returns, with
 * DLOCK_CLIENT_QUEUE_CALLBACKS) with DLOCK_ECLOSED or the result they
 * already had. Accepts NULL.
 *
 * Threads: when no other thread is inside a call on this client or its
 * handles (dlock's own acquire threads excepted), and never from a
 * callback of this client (done, on_lost), which would wait for itself;
 * to stop threads blocked in acquires first, call dlock_client_shutdown()
 * and let them return.
 */
DLOCK_API void dlock_client_close(dlock_client *c);

/**
 * Wake every acquire in progress on c, synchronous or asynchronous: they,
 * and every acquire started later, return DLOCK_ECLOSED holding nothing
 * (a grant that raced the shutdown is released first). Locks already held
 * stay held until dlock_release() or dlock_client_close(). Sticky: there
 * is no way back. Makes no call into a backend, so a server that does not
 * answer cannot delay it.
 *
 * Threads: any, and async-signal-safe (an atomic store and one write() to
 * an eventfd), so a SIGINT or SIGTERM handler may call it.
 */
DLOCK_API void dlock_client_shutdown(dlock_client *c);

/**
 * Why the last client-wide call (dlock_client_open(), dlock_lock_new(),
 * dlock_inspect()) on c failed in this thread; "" if none did. Each thread
 * has its own message, so threads sharing a client never see each other's.
 * Lives until this thread's next client-wide call. Threads: any.
 */
DLOCK_API const char *dlock_client_errmsg(const dlock_client *c);

typedef struct {
    unsigned int version; /* DLOCK_INFO_VERSION: initialise with _INIT */
    const char *scheme;   /* the backend's scheme, e.g. "file" */
    const char *mode;     /* the mode, e.g. "setnx"; never NULL */
    uint32_t caps;        /* DLOCK_CAP_* of that mode */
    const char *uri;      /* the URI with any password replaced by *** */
    const char *owner;    /* the client's uuid */
    uint32_t lease_ms;    /* the default lease */
    uint32_t timeout_ms;  /* the I/O timeout */
    const char *summary;  /* one line on the mode */
} dlock_info;

#define DLOCK_INFO_VERSION 1
#define DLOCK_INFO_INIT { DLOCK_INFO_VERSION, NULL, NULL, 0, NULL, NULL, 0, 0, NULL }

/**
 * Describe the client's backend and mode. The strings live as long as the
 * client.
 * @param out  initialised with DLOCK_INFO_INIT (its version says which
 *             fields the caller knows; dlock fills those)
 * @return DLOCK_OK or DLOCK_EINVAL (NULL, or an unknown version).
 * Threads: any.
 */
DLOCK_API int dlock_client_info(dlock_client *c, dlock_info *out);

typedef struct {
    unsigned int version; /* DLOCK_MODE_INFO_VERSION: initialise with _INIT */
    const char *scheme;   /* the backend's scheme */
    const char *mode;     /* the mode's name (the value of mode=) */
    const char *summary;  /* one line on the mode */
    uint32_t caps;        /* DLOCK_CAP_* */
    int chosen;           /* 1 for the mode the URI asks for */
    const char *backend_summary; /* one line on the backend */
} dlock_mode_info;

#define DLOCK_MODE_INFO_VERSION 1
#define DLOCK_MODE_INFO_INIT \
    { DLOCK_MODE_INFO_VERSION, NULL, NULL, NULL, 0, 0, NULL }

/**
 * The modes of the backend a URI names, without connecting to anything:
 * what `dlock info` shows when the server does not answer. Writes at most
 * cap entries (each initialised by the caller with DLOCK_MODE_INFO_INIT;
 * the strings are static) and sets *n to how many modes there are.
 * @param uri  as for dlock_client_open() (NULL: $DLOCK_URI, else default)
 * @return DLOCK_OK, DLOCK_EINVAL (bad URI or mode; err says which part),
 *         DLOCK_ENOBACKEND.
 * Threads: any.
 */
DLOCK_API int dlock_backend_modes(const char *uri, dlock_mode_info *out,
                                  size_t cap, size_t *n, char *err,
                                  size_t errlen);

/* ------------------------------------------------------------------------ */
/* Locks                                                                    */
/* ------------------------------------------------------------------------ */

#define DLOCK_WAIT_FOREVER UINT32_MAX

/* dlock_lock_options.flags */
#define DLOCK_LOCK_SHARED (1u << 0)     /* shared (reader) mode */
#define DLOCK_LOCK_NO_WATCHDOG (1u << 1) /* renew only by dlock_renew() */

/**
 * Called once when a held lock is found lost (a renewal failed or the lease
 * ran out). Runs on the watchdog thread (or inside dlock_renew(), when that
 * is what finds it): thread-safe, short, and never calling back into the
 * same client; dlock_held(lk) is already false. With
 * DLOCK_CLIENT_QUEUE_CALLBACKS it is queued instead and runs in
 * dlock_client_dispatch(), where it may call into dlock; why is copied.
 */
typedef void (*dlock_lost_fn)(dlock_lock *lk, int code, const char *why,
                              void *payload);

typedef struct {
    unsigned int version; /* DLOCK_LOCK_OPTIONS_VERSION */
    uint32_t lease_ms;    /* 0: the URI's lease= or the default */
    uint32_t flags;       /* DLOCK_LOCK_* */
    dlock_lost_fn on_lost;
    void *payload; /* passed to on_lost */
    /* Since version 2. 0: a lock. 1..DLOCK_PERMITS_MAX: the handle takes
     * one permit of a counting semaphore of that many permits under the
     * name (at most `permits` holders at once; each permit is a grant of
     * its own, with its lease, fence and loss notice). Every handle of a
     * name must give the same count; a name is a lock or a semaphore,
     * never both. Not with DLOCK_LOCK_SHARED. */
    uint32_t permits;
} dlock_lock_options;

#define DLOCK_LOCK_OPTIONS_VERSION 2
/* List every field: a shorter list trips -Wextra's missing-field check. */
#define DLOCK_LOCK_OPTIONS_INIT \
    { DLOCK_LOCK_OPTIONS_VERSION, 0, 0, NULL, NULL, 0 }

/* The most permits a semaphore may have. */
#define DLOCK_PERMITS_MAX 1024

/* The longest lock name in bytes; backends hash what they cannot store. */
#define DLOCK_NAME_MAX 65536

/**
 * Make a lock handle for a name. Does no I/O.
 *
 * @param out   the new handle, or NULL on failure
 * @param c     an open client
 * @param name  1 to DLOCK_NAME_MAX bytes of UTF-8; copied
 * @param opts  NULL for defaults
 * @return DLOCK_OK, DLOCK_EINVAL (the client's message says which argument),
 *         DLOCK_EUNSUPPORTED (shared mode on a backend without it),
 *         DLOCK_ENOMEM, DLOCK_ECLOSED.
 * Threads: any.
 */
DLOCK_API int dlock_lock_new(dlock_lock **out, dlock_client *c,
                             const char *name, const dlock_lock_options *opts);

/**
 * Release the lock if held (all reentrant levels) and free the handle.
 * Accepts NULL. Threads: the handle's one user.
 */
DLOCK_API void dlock_lock_free(dlock_lock *lk);

/**
 * Take the lock, waiting at most timeout_ms.
 *
 * Acquiring through a handle that already holds the lock only counts one
 * more level (no I/O); release it as many times.
 *
 * @param lk          from dlock_lock_new()
 * @param timeout_ms  0 (one attempt), milliseconds, or DLOCK_WAIT_FOREVER
 * A thread that holds the name through another handle of the same client,
 * one of the two shared (a reader asking to write: an upgrade; a writer
 * asking to read), would wait for itself: such a wait (timeout_ms > 0) is
 * refused at once with DLOCK_EDEADLK. Release the other handle first. A
 * single attempt (timeout_ms 0) says DLOCK_EBUSY as for any owner; two
 * exclusive handles of one thread contend as any two owners do; an
 * asynchronous acquire belongs to no thread.
 *
 * @return DLOCK_OK, DLOCK_EBUSY (timeout_ms was 0), DLOCK_ETIMEDOUT,
 *         DLOCK_ECONNECT, DLOCK_ELOST (the handle's lock was lost: release
 *         it first), DLOCK_EDEADLK, ...; dlock_lock_errmsg(lk) has the
 *         details.
 * Threads: one thread at a time per lock handle; other threads may use
 * other handles of the same client meanwhile.
 */
DLOCK_API int dlock_acquire(dlock_lock *lk, uint32_t timeout_ms);

/** dlock_acquire(lk, 0). */
DLOCK_API int dlock_try_acquire(dlock_lock *lk);

/**
 * Turn lk's exclusive hold into a shared one (write -> read) without a
 * moment when the lock is free, so no writer waiting meanwhile can come
 * in; readers can join at once. From then on lk is a shared handle (its
 * next acquires ask for shared). The fence stays. Upgrading the other way
 * is not offered: two readers upgrading would wait for each other; release
 * and acquire exclusive instead.
 *
 * @return DLOCK_OK, DLOCK_ENOTHELD, DLOCK_EINVAL (lk is shared, or held at
 *         more than one reentrant level), DLOCK_EUNSUPPORTED (the mode
 *         cannot do it atomically: without DLOCK_CAP_DOWNGRADE; lk is
 *         still held exclusive), DLOCK_ELOST, DLOCK_ECONNECT (lk is still
 *         held exclusive, if it is held at all: dlock_held() says).
 * Threads: the handle's one user.
 */
DLOCK_API int dlock_downgrade(dlock_lock *lk);

/* ------------------------------------------------------------------------ */
/* Cancelling an acquire                                                    */
/* ------------------------------------------------------------------------ */

/* A cancellation source: one flag that, once fired, stays fired. */
typedef struct dlock_cancel dlock_cancel;

/**
 * Make a cancellation source (an atomic flag and an eventfd, both
 * close-on-exec). One source may be watched by any number of acquires, in
 * any number of clients, at once.
 * @param out  the new source, or NULL on failure
 * @return DLOCK_OK, DLOCK_EINVAL (out NULL), DLOCK_ENOMEM (no memory or
 *         no descriptor left).
 * Threads: any.
 */
DLOCK_API int dlock_cancel_new(dlock_cancel **out);

/**
 * Fire the source: every acquire watching it returns DLOCK_ECANCELED
 * within 100 ms, holding nothing, and every later acquire watching it
 * returns DLOCK_ECANCELED at once. Sticky; firing twice is harmless.
 * Accepts NULL.
 *
 * Threads: any, and async-signal-safe (an atomic store and one write()),
 * so a SIGINT handler may call it.
 */
DLOCK_API void dlock_cancel_fire(dlock_cancel *cx);

/** 1 once the source was fired, else 0 (also for NULL). Threads: any;
 * async-signal-safe. */
DLOCK_API int dlock_cancel_fired(const dlock_cancel *cx);

/**
 * Free the source. Accepts NULL. Threads: once no acquire watches it any
 * more (an async acquire watches it until its done callback has run).
 */
DLOCK_API void dlock_cancel_free(dlock_cancel *cx);

/**
 * dlock_acquire() watching cx (NULL: no source of its own; the client's
 * shutdown is watched in any case). If cx was fired before the call or is
 * fired during the wait, the call returns DLOCK_ECANCELED within 100 ms
 * holding nothing: a grant that raced the cancel (the server granted the
 * lock as the wait was interrupted) is released before returning, and a
 * cancel seen after a grant but before the call returns also gives up that
 * grant. A reentrant acquire (the handle already holds the lock) does no
 * waiting and is not cancelled. dlock_client_shutdown() gives
 * DLOCK_ECLOSED the same way, and wins when both fired.
 *
 * @return as dlock_acquire(), plus DLOCK_ECANCELED.
 * Threads: as dlock_acquire(); cx may be fired from any thread or a
 * signal handler.
 */
DLOCK_API int dlock_acquire_cancellable(dlock_lock *lk, uint32_t timeout_ms,
                                        dlock_cancel *cx);

/* ------------------------------------------------------------------------ */
/* Asynchronous acquire, and callbacks run from the caller's event loop     */
/* ------------------------------------------------------------------------ */

/**
 * Called once when an asynchronous acquire ends, with its result (what
 * dlock_acquire_cancellable() would have returned: DLOCK_OK, DLOCK_ETIMEDOUT,
 * DLOCK_ECANCELED, DLOCK_ECLOSED, ...). Runs on one of the client's acquire
 * threads, or, with DLOCK_CLIENT_QUEUE_CALLBACKS, in dlock_client_dispatch().
 * The handle is the caller's again when it runs: it may release, free, or
 * acquire again (dlock_lock_errmsg(lk) explains a failure).
 */
typedef void (*dlock_done_fn)(dlock_lock *lk, int rc, void *payload);

/**
 * Start an acquire and return at once; done(lk, rc, payload) runs exactly
 * once when it ends, also on DLOCK_ECANCELED, DLOCK_ECLOSED and
 * DLOCK_ETIMEDOUT. The handle belongs to the acquire until done runs: make
 * no other call on it meanwhile. A first version: a small pool of threads
 * per client (at most 8, started as needed) drives the blocking acquire;
 * acquires start in the order of the calls, and in a fair mode
 * (DLOCK_CAP_FAIR) each is queued at the server before the next starts.
 * dlock_client_close() completes every pending one with DLOCK_ECLOSED
 * before it returns.
 *
 * @param cx  watched as by dlock_acquire_cancellable(); NULL for none.
 *            It must outlive the acquire.
 * @return DLOCK_OK if started; else an immediate error (DLOCK_EINVAL,
 *         DLOCK_ECLOSED, DLOCK_ENOMEM...), and then done is not called.
 *         DLOCK_EINVAL while an acquire of lk is in progress leaves the
 *         handle's message alone (it is that acquire's).
 * Threads: any; one acquire at a time per handle.
 */
DLOCK_API int dlock_acquire_async(dlock_lock *lk, uint32_t timeout_ms,
                                  dlock_cancel *cx, dlock_done_fn done,
                                  void *payload);

/**
 * With DLOCK_CLIENT_QUEUE_CALLBACKS: a descriptor that is readable while
 * callbacks wait in the client's queue (poll it for POLLIN, or add it to
 * epoll, libuv, libevent, GLib or asyncio), then call
 * dlock_client_dispatch(). Owned by the client: do not close or read it.
 * @return the descriptor, or -1 without the flag (or c NULL).
 * Threads: any.
 */
DLOCK_API int dlock_client_event_fd(dlock_client *c);

/**
 * Run the queued callbacks (async done, on_lost) in the order they were
 * queued, on the calling thread; the event descriptor stops being
 * readable once the queue is empty. Callbacks run here may call back into
 * dlock (release, acquire again, start another async acquire).
 * @return how many ran (0 without the flag).
 * Threads: any, one thread at a time per client.
 */
DLOCK_API int dlock_client_dispatch(dlock_client *c);


/**
 * Drop one level; the last level cancels the renewal (synchronously, so a
 * renewal can never resurrect the lock) and then releases it on the server,
 * checking the owner.
 *
 * @return DLOCK_OK, DLOCK_ENOTHELD, DLOCK_ELOST (it had been lost; the
 *         handle is now free to acquire again), DLOCK_ENOTOWNER (another
 *         owner holds it: ours had expired), DLOCK_ECONNECT (the handle is
 *         released locally all the same; the server frees the lock when its
 *         lease or connection ends). A lock that outlives connections is
 *         released over a new connection when the first turns out to have
 *         ended; DLOCK_ECONNECT then means neither release was answered, or
 *         the second found the lock no longer ours (the message says).
 * Threads: one thread at a time per lock handle.
 */
DLOCK_API int dlock_release(dlock_lock *lk);

/* ------------------------------------------------------------------------ */
/* Several locks as one                                                     */
/* ------------------------------------------------------------------------ */

/* The most handles one dlock_acquire_all() takes. */
#define DLOCK_ACQUIRE_ALL_MAX 1024

/**
 * Take all n locks, or none. The handles may belong to different clients
 * and backends. They are taken in one order that does not depend on the
 * list (by lock name, then by the client's URI as written), so two callers
 * listing the same locks in different orders cannot deadlock; spell a
 * URI alike in every process when one name is locked on several backends.
 * timeout_ms bounds the whole call, not each lock. If one acquire fails,
 * the locks this call took are released, in reverse order, and that
 * failure is returned; *failed (if failed is not NULL) is then the index
 * in locks[] of the handle that failed, whose dlock_lock_errmsg() says
 * why, and -1 otherwise. A handle that already holds its lock counts one
 * level more, as with dlock_acquire().
 *
 * @param locks       n handles from dlock_lock_new()
 * @param timeout_ms  0 (one attempt at each), milliseconds for the whole
 *                    call, or DLOCK_WAIT_FOREVER
 * @param cx          a cancellation source watched by every acquire, or
 *                    NULL
 * @return as dlock_acquire_cancellable(), with DLOCK_ETIMEDOUT when the
 *         timeout ran out; DLOCK_EINVAL for n 0 or over
 *         DLOCK_ACQUIRE_ALL_MAX, a NULL handle, or two handles of one lock
 *         (the second would wait for the first forever).
 * Threads: one thread at a time per lock handle.
 */
DLOCK_API int dlock_acquire_all(dlock_lock *const *locks, size_t n,
                                uint32_t timeout_ms, dlock_cancel *cx,
                                int *failed);

/**
 * dlock_release() of each of n handles, last first; every handle is
 * released whatever the others say.
 * @return DLOCK_OK, or the first failure in that order; DLOCK_EINVAL
 *         for a NULL handle (the others are still released).
 */
DLOCK_API int dlock_release_all(dlock_lock *const *locks, size_t n);

/**
 * Renew now, with the handle's lease: extend a lease, or prove the session
 * that holds a connection-bound lock alive. The watchdog does this by itself
 * unless the lock was made with DLOCK_LOCK_NO_WATCHDOG.
 *
 * @return DLOCK_OK, DLOCK_ENOTHELD, DLOCK_ELOST, DLOCK_ECONNECT, ...
 * Threads: one thread at a time per lock handle.
 */
DLOCK_API int dlock_renew(dlock_lock *lk);

/**
 * 1 if the handle holds its lock now, as far as dlock can vouch that no
 * other owner does: acquired, not released, not found lost, the lease (as
 * the client measured it, from before the last confirmed request was sent)
 * not run out, the connection of a connection-bound lock not ended, and
 * the lock not in doubt. A lock is in doubt from the moment a connection
 * of its lease-based client ends (the server may have restarted and
 * forgotten it) until a renewal sent after that confirms it: held turns 0
 * meanwhile, and 1 again if the renewal says the lock is still ours (the
 * watchdog renews at once), or the lock is reported lost. 0 otherwise or
 * for NULL. No network I/O: at most one poll() of the connection's socket.
 * Threads: any (it may race with a release in progress).
 */
DLOCK_API int dlock_held(const dlock_lock *lk);

/**
 * The fencing token of the current holding: strictly greater than every
 * token given before for this name on this backend, or 0 when the backend
 * cannot promise that (see DLOCK_CAP_FENCING) or the lock is not held.
 * Threads: the handle's one user.
 */
DLOCK_API uint64_t dlock_fence(const dlock_lock *lk);

/** Reentrant depth: 0 when not held. Threads: the handle's one user. */
DLOCK_API unsigned int dlock_lock_depth(const dlock_lock *lk);

/** The lock's name as given. Threads: any. */
DLOCK_API const char *dlock_lock_name(const dlock_lock *lk);

/** The handle's owner id "<client uuid>:<serial>". Threads: any. */
DLOCK_API const char *dlock_lock_owner(const dlock_lock *lk);

/**
 * Milliseconds left of the current lease as the client measured it;
 * DLOCK_WAIT_FOREVER for locks without lease, 0 when not held.
 */
DLOCK_API uint32_t dlock_lock_remaining(const dlock_lock *lk);

/**
 * The handle's last failure: backend scheme, operation, lock name and the
 * server's own words, never a password; "" after a success. Lives until the
 * next call on the handle. Threads: the handle's one user.
 */
DLOCK_API const char *dlock_lock_errmsg(const dlock_lock *lk);

/* ------------------------------------------------------------------------ */
/* Looking without taking                                                   */
/* ------------------------------------------------------------------------ */

/* What a backend can tell of a name; unknown fields say so. */
typedef struct {
    unsigned int version; /* DLOCK_STATE_VERSION: initialise with _INIT */
    int held;             /* 1, 0, or -1 when unknown */
    char owner[256];      /* "" when unknown or free */
    uint64_t fence;       /* the last fence handed out, 0 when unknown */
    int64_t remaining_ms; /* -1 when unknown or no lease */
    int waiters;          /* -1 when unknown */
} dlock_state;

#define DLOCK_STATE_VERSION 1
#define DLOCK_STATE_INIT { DLOCK_STATE_VERSION, -1, {0}, 0, -1, -1 }

/**
 * Describe a name without taking it (`dlock inspect`).
 * @param out  initialised with DLOCK_STATE_INIT
 * @return DLOCK_OK, DLOCK_EUNSUPPORTED (the mode cannot look),
 *         DLOCK_EINVAL, DLOCK_ECONNECT; dlock_client_errmsg() explains.
 * Threads: any.
 */
DLOCK_API int dlock_inspect(dlock_client *c, const char *name,
                            dlock_state *out);

/* ------------------------------------------------------------------------ */
/* Durations                                                                */
/* ------------------------------------------------------------------------ */

/**
 * Parse "250ms", "5s", "1.5s", "2m", "1h" or "0" into milliseconds.
 * @return DLOCK_OK, or DLOCK_EINVAL for no unit, a bad number or a value
 *         above UINT32_MAX - 1 ms. Threads: any.
 */
DLOCK_API int dlock_parse_duration(const char *text, uint32_t *out);

/* ------------------------------------------------------------------------ */
/* Leader election                                                          */
/* ------------------------------------------------------------------------ */

/*
 * A leader election on every backend, built on a lock handle: a candidate
 * campaigns by acquiring the election's name (an exclusive lock) and is
 * leader while it holds it; the term of a leadership is the grant's fence,
 * so terms strictly increase on modes with DLOCK_CAP_FENCING (0 without:
 * Redlock). Leadership is never believed longer than the lock is:
 * dlock_elect_is_leader() is exactly as strict as dlock_held(), so a
 * leader stops believing before another can be elected. After a loss the
 * candidate joins again by itself (as Curator's LeaderLatch does) unless
 * it resigned. On ZooKeeper the nodes are Curator LeaderLatch's
 * ("_c_<uuid>-latch-<seq>", data = the participant id), so a Java
 * LeaderLatch on the same path and dlock candidates compete in one
 * election.
 *
 * Each campaigning candidate occupies one of the client's asynchronous
 * acquire threads (at most 8 per client) while it waits.
 */
typedef struct dlock_election dlock_election;

/**
 * Called once per change of leadership: is_leader 1 when this candidate
 * became leader (term is the new term, why says so), 0 when it lost
 * leadership (the lock was found lost: why is on_lost's text) or resigned
 * (why "resigned"). dlock_elect_is_leader() already says the new value.
 * Runs on one of the client's threads (the acquire thread that won, the
 * watchdog's, or the resigning thread), or with
 * DLOCK_CLIENT_QUEUE_CALLBACKS in dlock_client_dispatch(): thread-safe,
 * short; it may call dlock_elect_is_leader(), _term(), _id() and
 * anything of another client, but no other dlock_elect_* of this
 * election (join, await, resign, free wait for it: a deadlock).
 */
typedef void (*dlock_elect_fn)(dlock_election *e, int is_leader,
                               uint64_t term, const char *why,
                               void *payload);

typedef struct {
    unsigned int version;    /* DLOCK_ELECT_OPTIONS_VERSION */
    uint32_t lease_ms;       /* 0: the URI's lease= or the default */
    /* The participant id others see (Curator's LeaderLatch id: the data
     * of the ZooKeeper node). 1 to DLOCK_ELECT_ID_MAX bytes of UTF-8;
     * copied. NULL: the lock handle's owner id "<client uuid>:<serial>". */
    const char *id;
    dlock_elect_fn on_change; /* NULL: none */
    void *payload;            /* passed to on_change */
} dlock_elect_options;

#define DLOCK_ELECT_OPTIONS_VERSION 1
#define DLOCK_ELECT_OPTIONS_INIT \
    { DLOCK_ELECT_OPTIONS_VERSION, 0, NULL, NULL, NULL }

/* The longest participant id in bytes. */
#define DLOCK_ELECT_ID_MAX 1024

/**
 * Make a candidate of the election `name` (a lock name; an election and a
 * lock of one name are one lock, so do not use it as both). Does no I/O.
 *
 * @param out   the new candidate, or NULL on failure
 * @param c     an open client
 * @param name  as for dlock_lock_new()
 * @param opts  NULL for defaults
 * @return DLOCK_OK, DLOCK_EINVAL (dlock_client_errmsg() says which
 *         argument), DLOCK_ENOMEM, DLOCK_ECLOSED.
 * Threads: any.
 */
DLOCK_API int dlock_elect_new(dlock_election **out, dlock_client *c,
                              const char *name,
                              const dlock_elect_options *opts);

/**
 * Campaign: start waiting, in the background, to become leader (an
 * asynchronous acquire that waits forever, in order of arrival on fair
 * modes). Returns at once; on_change says when it wins.
 * @return DLOCK_OK, DLOCK_EINVAL (NULL, or already campaigning or
 *         leading), DLOCK_ECLOSED, DLOCK_ENOMEM; dlock_elect_errmsg().
 * Threads: any, not from on_change.
 */
DLOCK_API int dlock_elect_join(dlock_election *e);

/**
 * Wait until this candidate is leader (as dlock_elect_is_leader() says).
 * @param timeout_ms  0 (just look), milliseconds, or DLOCK_WAIT_FOREVER
 * @return DLOCK_OK (leader), DLOCK_ETIMEDOUT, DLOCK_ENOTHELD (not
 *         campaigning: never joined, or resigned), or what ended the
 *         campaign (DLOCK_ECLOSED, DLOCK_EAUTH, ...; dlock_elect_errmsg()).
 * Threads: any, not from on_change.
 */
DLOCK_API int dlock_elect_await(dlock_election *e, uint32_t timeout_ms);

/**
 * 1 if this candidate is leader now: it won and dlock_held() of its lock
 * is 1 (acquired, not found lost, lease not run out by the client's
 * clock, connection alive, not in doubt). 0 otherwise or for NULL. No
 * network I/O. Threads: any.
 */
DLOCK_API int dlock_elect_is_leader(const dlock_election *e);

/**
 * The term of the current (or, after a loss, the last) leadership of this
 * candidate: its grant's fence, strictly greater than every term before it
 * in this election on modes with DLOCK_CAP_FENCING; 0 before the first
 * win and on modes without fencing. Threads: any.
 */
DLOCK_API uint64_t dlock_elect_term(const dlock_election *e);

/** The participant id ("" for NULL). Threads: any. */
DLOCK_API const char *dlock_elect_id(const dlock_election *e);

/**
 * Leave the election: stop campaigning (a wait in progress ends within
 * 100 ms) or give up leadership (on_change is called with 0, "resigned",
 * then the lock is released). The candidate may join again later.
 * @return DLOCK_OK, or the release's failure (DLOCK_ECONNECT: the server
 *         frees the lock when its lease or session ends; DLOCK_ELOST: it
 *         had been lost already); dlock_elect_errmsg() says more.
 * Threads: any, not from on_change.
 */
DLOCK_API int dlock_elect_resign(dlock_election *e);

/**
 * Resign and free the candidate. Accepts NULL. Threads: any, once no
 * other call on e is in progress; not from on_change.
 */
DLOCK_API void dlock_elect_free(dlock_election *e);

/**
 * The candidate's last failure (join, await, resign, or what ended the
 * campaign); "" if none. Lives until the next call on e. Threads: any.
 */
DLOCK_API const char *dlock_elect_errmsg(const dlock_election *e);

/* ------------------------------------------------------------------------ */
/* Count-down latches                                                       */
/* ------------------------------------------------------------------------ */

/*
 * A count-down latch under a name: one party sets a count, any number count
 * it down, and any number wait until it reaches zero (Java's
 * CountDownLatch across processes; on Redis, Redisson's RCountDownLatch
 * with its keys and messages). A latch at zero is gone: it can be set
 * again. A name used for a latch is not used for a lock (the backend may
 * keep both in one place). Available where the client's mode has
 * DLOCK_CAP_LATCH; elsewhere dlock_latch_new() says DLOCK_EUNSUPPORTED.
 */
typedef struct dlock_latch dlock_latch;

/* The largest count dlock_latch_set() takes. */
#define DLOCK_LATCH_COUNT_MAX 2147483647u

/**
 * Make a latch handle for name (1 to DLOCK_NAME_MAX bytes of UTF-8) on c.
 * No I/O. The handle keeps the client's memory alive; its calls return
 * DLOCK_ECLOSED once the client is closed.
 * @return DLOCK_OK, DLOCK_EINVAL (name; dlock_client_errmsg() says),
 *         DLOCK_EUNSUPPORTED (the mode has no latches), DLOCK_ECLOSED,
 *         DLOCK_ENOMEM.
 * Threads: any.
 */
DLOCK_API int dlock_latch_new(dlock_latch **out, dlock_client *c,
                              const char *name);

/** Free the handle (the latch itself stays). Accepts NULL.
 * Threads: the handle's one user. */
DLOCK_API void dlock_latch_free(dlock_latch *l);

/**
 * Set the count, only if the latch is at zero (absent): Redisson's
 * trySetCount.
 * @param count  1 to DLOCK_LATCH_COUNT_MAX
 * @return DLOCK_OK (set), DLOCK_EBUSY (the latch is counting already:
 *         nothing changed; the message says its count), DLOCK_EINVAL,
 *         DLOCK_ECONNECT, ...
 * Threads: the handle's one user.
 */
DLOCK_API int dlock_latch_set(dlock_latch *l, uint32_t count);

/**
 * Count down by one; the count reaching zero wakes every waiter. At zero
 * already, nothing happens (DLOCK_OK). Not retried: after DLOCK_ECONNECT
 * the count-down may or may not have happened.
 * @param left  if not NULL, the count after this call (0: open)
 * @return DLOCK_OK, DLOCK_ECONNECT, ...
 * Threads: the handle's one user.
 */
DLOCK_API int dlock_latch_down(dlock_latch *l, uint32_t *left);

/**
 * The current count (0: open or never set).
 * @return DLOCK_OK, DLOCK_EINVAL (count NULL), DLOCK_ECONNECT, ...
 * Threads: the handle's one user.
 */
DLOCK_API int dlock_latch_count(dlock_latch *l, uint32_t *count);

/**
 * Wait until the count is zero, at most timeout_ms (0: look once;
 * DLOCK_WAIT_FOREVER). Woken by the backend's notification where it has
 * one, else by polling (docs/backends/ say how fast).
 * @return DLOCK_OK (at zero), DLOCK_ETIMEDOUT (timeout_ms 0 included),
 *         DLOCK_ECONNECT (the server stayed unreachable until the
 *         deadline), ...
 * Threads: the handle's one user.
 */
DLOCK_API int dlock_latch_await(dlock_latch *l, uint32_t timeout_ms);

/**
 * dlock_latch_await() watching cx as dlock_acquire_cancellable() does
 * (NULL: the client's shutdown alone): DLOCK_ECANCELED within 100 ms of
 * dlock_cancel_fire(cx), DLOCK_ECLOSED of dlock_client_shutdown().
 * Threads: the handle's one user; cx may be fired from any thread or a
 * signal handler.
 */
DLOCK_API int dlock_latch_await_cancellable(dlock_latch *l,
                                            uint32_t timeout_ms,
                                            dlock_cancel *cx);

/** The latch's name as given. Threads: any. */
DLOCK_API const char *dlock_latch_name(const dlock_latch *l);

/**
 * The handle's last failure, as dlock_lock_errmsg(); "" after a success.
 * Threads: the handle's one user.
 */
DLOCK_API const char *dlock_latch_errmsg(const dlock_latch *l);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_DLOCK_H */
