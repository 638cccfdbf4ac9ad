/*
 * pool.h: a client's sessions (pool.c). Core promises backends never to
 * make two calls on one session at once [B-SERIAL-1], so each call checks
 * a session out and back in. Sessions holding connection-bound grants stay
 * in the pool (other calls may use them between renewals) but are never
 * handed a native wait, which could block their holders' release for as
 * long as the wait [B-PIN-1]. The pool also routes a call's errors to the
 * caller's buffer, and registers the sessions' sockets with the watch set.
 */
#ifndef DLOCK_CORE_POOL_H
#define DLOCK_CORE_POOL_H

#include <pthread.h>
#include <stdatomic.h>

#include "watch.h"

/* A conn-bound grant pinned to a session [B-PIN-1]: a node of the
 * session's list, embedded in the held lock. */
struct dlock__pin {
    struct dlock__pin *next;
    const struct dlock_request *req;
    struct dlock__sess *sess; /* NULL when not pinned */
    /* The socket of that session (dlock_held() polls it), -1 when not
     * watched, DLOCK__FD_GONE once its connection ended. */
    atomic_int watch_fd;
};

#define DLOCK__FD_GONE (-2)

/* What an acquire in progress tells the backend calls it makes: the
 * cancellation sources to watch [B-CANCEL-1], and whom to tell when a fair
 * request is queued at the server [B-QUEUED-1] (NULL: nobody). */
struct dlock__call {
    struct dlock__cancels cx;
    void (*queued)(void *arg);
    void *arg;
};

/* Core's wrapper of one backend session (session->core points here). */
struct dlock__sess {
    struct dlock_session *s;
    struct dlock__pool *p;
    struct dlock__sess *next;
    uint64_t id;        /* unique in the pool: the watch key */
    int watch_fd;       /* dlock_session_watch()'s, -1 if none */
    int own_fd;         /* core's dup() of it, in the epoll set; -1 if
                           none (see sess_watch()) */
    bool busy;          /* checked out by one caller */
    bool broken;        /* a call said DLOCK_ECONNECT, or its connection
                           ended */
    bool ended;         /* its connection ended: the watchdog must see */
    size_t npinned;     /* conn-bound grants living on it */
    struct dlock__pin *pinned;
    /* Where dlock_session_error() writes during the current call. */
    char *errbuf;
    size_t errcap;
    const char *op;
    const char *name;
    /* The acquire the current call serves, or NULL. */
    const struct dlock__call *call;
};

struct dlock__pool {
    const struct dlock_backend *b;
    const struct dlock_mode *mode;
    const struct dlock_uri *uri; /* the client's */
    void *ctx;                   /* the backend's per-client state */
    const dlock_client_options *opts; /* the client's log hook */
    struct dlock__events *events; /* the client's callback queue */
    struct dlock__watch *watch;

    pthread_mutex_t mu; /* everything below */
    pthread_cond_t idle; /* a session was checked in */
    struct dlock__sess *sessions;
    size_t nsessions, nidle;
    uint64_t next_id;
    size_t nwatched;     /* sessions with a watched socket */
    /* Bumped when a watched connection of a mode without
     * DLOCK_CAP_CONN_BOUND ends: a lock whose last confirmation saw an
     * older value is in doubt [B-WATCH-1]. */
    atomic_uint_fast64_t doubt_gen;
};

/* What a caller wants of a session it checks out. */
enum dlock__pick {
    DLOCK__PICK_ANY,      /* any idle session, or a new one */
    DLOCK__PICK_UNPINNED, /* one with no grants (a native wait may block) */
    DLOCK__PICK_NEW,      /* a new one: the idle ones may have ended unseen */
};

void dlock__pool_init(struct dlock__pool *p);
/* Close every session; none may be checked out (the client is closing). */
void dlock__pool_close_sessions(struct dlock__pool *p);
/* The same, then free the pool's own. */
void dlock__pool_free(struct dlock__pool *p);

/*
 * Check a session out for one call: an idle one fitting `pick` and, for a
 * conn-bound mode, not holding `req`'s name already; else a new one.
 * Errors go to errbuf. Returns NULL on failure with *rc set.
 */
struct dlock__sess *dlock__checkout(struct dlock__pool *p,
                                    enum dlock__pick pick,
                                    const struct dlock_request *req,
                                    char *errbuf, size_t errcap, int *rc);
/* Check out the session a held grant's renewal and release go to: its
 * pinned session (waiting while busy) when pin is not NULL [B-PIN-1], else
 * any session [B-RENEW-1]. Returns NULL on failure with *rc set. */
struct dlock__sess *dlock__checkout_grant(struct dlock__pool *p,
                                          struct dlock__sess *pin,
                                          char *errbuf, size_t errcap,
                                          int *rc);
/* Give it back; `rc` is the last call's result (DLOCK_ECONNECT marks it
 * broken, and a broken session with no pins is closed). */
void dlock__checkin(struct dlock__sess *ss, int rc);
/* Point the session's error reports at buf for the call that follows. */
void dlock__sess_begin(struct dlock__sess *ss, const char *op,
                       const char *name, char *buf, size_t cap);

/* Tell the backend's next calls on ss which acquire they serve (NULL:
 * none); checkin forgets it. */
void dlock__sess_call(struct dlock__sess *ss, const struct dlock__call *call);

/* Pin a conn-bound grant to ss, or take it off. */
void dlock__pin(struct dlock__sess *ss, struct dlock__pin *pin);
void dlock__unpin(struct dlock__pin *pin);

/* A watched connection ended and is about to be handled: for a mode whose
 * locks outlive their connection, put every lock in doubt (bump doubt_gen)
 * and say true; false for a conn-bound mode, whose pins say it. */
bool dlock__pool_doubt(struct dlock__pool *p);

/*
 * The connection of session `id` ended (a watch event), or some session
 * was marked ended by its backend (id 0). Marks them broken and, for a
 * conn-bound mode, calls lost(pin, arg) for every pin on them, under the
 * pool's mutex (lost must not call back into the pool); for other modes
 * bumps doubt_gen. Returns the number of sessions found ended.
 */
size_t dlock__pool_ended(struct dlock__pool *p, uint64_t id,
                         void (*lost)(struct dlock__pin *pin, void *arg),
                         void *arg);

/* The message prefix and formatting every report of this pool shares. */
void dlock__pool_format(const struct dlock__pool *p, char *buf, size_t cap,
                        const char *op, const char *name, const char *text);
/* The same from a format. */
void dlock__pool_formatf(const struct dlock__pool *p, char *buf, size_t cap,
                         const char *op, const char *name, const char *fmt,
                         ...)
#ifdef __GNUC__
    __attribute__((format(printf, 6, 7)))
#endif
    ;
/* Log a line through the client's hook, password masked. */
void dlock__pool_log(const struct dlock__pool *p, int level, const char *fmt,
                     ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif /* DLOCK_CORE_POOL_H */
