/*
 * conn.c: ZooKeeper sessions, one zhandle each, and what the C client tells
 * us about them. Each dlock client owns ONE ZooKeeper session at a time
 * (the context's cur; the mt client is thread-safe), shared by all its
 * dlock sessions; an expired one is replaced on next use, since the C
 * client never revives it. Its one watcher records session events
 * (connected, connecting, expired) and the deletion of watched nodes, and
 * wakes the threads waiting for them. Also here: making the C client's
 * descriptors close-on-exec, which it does not do itself, and its log.
 *
 * Requests are call.c's; the noted orphan nodes are orphans.c's (the
 * watcher starts their sweep when a session connects).
 *
 * Divisions: the C client's log; close-on-exec; the watcher; sessions;
 * waiting.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zk.h"

/* ---- the C client's log ------------------------------------------------- */

/* The libzookeeper log: its lines would go to the application's stderr.
 * A handle's lines come here (zookeeper_init2) and are dropped, except the
 * last error of the calling thread, which explains a failed
 * zookeeper_init() (an unknown host name). */
static _Thread_local char zk_last_log[160];

void dlock__zk_log(const char *message)
{
    const char *e = strstr(message, "ZOO_ERROR@");
    size_t n;

    if (e == NULL)
        return;
    e = strstr(e, ": ");
    if (e == NULL)
        return;
    snprintf(zk_last_log, sizeof zk_last_log, "%s", e + 2);
    n = strlen(zk_last_log);
    while (n > 0 && (zk_last_log[n - 1] == '\n' || zk_last_log[n - 1] == ' '))
        zk_last_log[--n] = '\0';
}

/* ---- close-on-exec ------------------------------------------------------ */

/*
 * [B-EXEC-1] The ZooKeeper C client opens its wake-up pipe and, on every
 * (re)connect in its own I/O thread, its socket without close-on-exec, and
 * has no hook to change that. So dlock finds them: the pipe as the
 * descriptors that appeared during zookeeper_init2(), the socket when the
 * session connects, as the descriptor connected to the server the client
 * reports. Between the socket's creation and that event a child exec'd by
 * another thread could inherit it; it cannot keep the session (and so a
 * lock) alive, which takes heartbeats, not an open socket.
 */
#define ZK_FD_SCAN_MAX 4096

/* Call fn(fd, arg) for every open descriptor below ZK_FD_SCAN_MAX that is
 * not close-on-exec. */
static void zk_each_inheritable(void (*fn)(int, void *), void *arg)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        int fl;
        if (*end != '\0' || e->d_name[0] == '.' || fd < 0 ||
            fd >= ZK_FD_SCAN_MAX || fd == dirfd(d))
            continue;
        fl = fcntl((int)fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            fn((int)fd, arg);
    }
    closedir(d);
}

static void zk_note_fd(int fd, void *arg)
{
    ((unsigned char *)arg)[fd] = 1;
}

/* After zookeeper_init2(): the new pipes are the client's. */
static void zk_cloexec_new_pipes(int fd, void *arg)
{
    const unsigned char *before = arg;
    struct stat st;

    if (!before[fd] && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
        dlock_fd_cloexec(fd);
}

struct zk_peer {
    struct sockaddr_storage addr;
    socklen_t len;
};

static void zk_cloexec_socket(int fd, void *arg)
{
    const struct zk_peer *want = arg;
    struct sockaddr_storage a;
    socklen_t len = sizeof a;

    if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 && len == want->len &&
        memcmp(&a, &want->addr, len) == 0)
        dlock_fd_cloexec(fd);
}

/* ---- the watcher -------------------------------------------------------- */

/*
 * The one watcher of a connection: session events (connected, connecting,
 * expired) and the deletion of a node someone waits for. It runs on the C
 * client's completion thread, so it only records and wakes; the orphan
 * sweep it may start is asynchronous too.
 */
void dlock__zk_watcher(zhandle_t *zh, int type, int state, const char *path,
                       void *ctx)
{
    struct zk_conn *c = ctx;
    int sweep = 0;

    pthread_mutex_lock(&c->mu);
    if (type == ZOO_SESSION_EVENT) {
        c->gen++;
        if (state == ZOO_CONNECTED_STATE) {
            const clientid_t *id = zoo_client_id(zh);
            struct zk_peer peer;
            peer.len = sizeof peer.addr;
            if (zookeeper_get_connected_host(zh, (struct sockaddr *)&peer.addr,
                                             &peer.len) != NULL)
                zk_each_inheritable(zk_cloexec_socket, &peer);
            c->connected = 1;
            atomic_store(&c->timeout_ms, zoo_recv_timeout(zh));
            atomic_store(&c->session_id, id != NULL ? id->client_id : 0);
            sweep = c->orphans != NULL;
        } else {
            c->connected = 0;
            if (state == ZOO_EXPIRED_SESSION_STATE ||
                state == ZOO_AUTH_FAILED_STATE)
                atomic_store(&c->expired, 1);
        }
    } else if (path != NULL) {
        for (struct zk_waiter *w = c->waiters; w != NULL; w = w->next)
            if (strcmp(w->path, path) == 0)
                w->fired = 1;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (sweep)
        dlock__zk_sweep(c);
}

/* ---- sessions ----------------------------------------------------------- */

/* Start a new session (does not wait for it). */
struct zk_conn *dlock__zk_conn_new(struct zk_ctx *x, char *err, size_t errlen,
                                   int *rc)
{
    struct zk_conn *c = calloc(1, sizeof *c);
    uint64_t seed[2];

    if (c == NULL) {
        *rc = dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed) {
        free(c);
        *rc = dlock_errorf(err, errlen, DLOCK_ERROR,
                           "cannot read the OS random source: %s",
                           strerror(errno));
        return NULL;
    }
    c->seed_hi = seed[0];
    c->seed_lo = seed[1];
    c->ctx = x;
    c->refs = 1;
    atomic_init(&c->expired, 0);
    atomic_init(&c->next_id, 1);
    atomic_init(&c->session_id, 0);
    atomic_init(&c->timeout_ms, 0);
    atomic_init(&c->no_containers, 0);
    atomic_init(&c->warned_lease, 0);
    atomic_init(&c->told_session, 0);
    pthread_mutex_init(&c->mu, NULL);
    dlock_cond_init_monotonic(&c->cv);
    zk_last_log[0] = '\0';
    {
        unsigned char before[ZK_FD_SCAN_MAX] = {0};
        zk_each_inheritable(zk_note_fd, before);
        c->zh = zookeeper_init2(x->hosts, dlock__zk_watcher, (int)x->session_ms,
                                NULL, c, 0, dlock__zk_log);
        zk_each_inheritable(zk_cloexec_new_pipes, before);
    }
    if (c->zh == NULL) {
        int e = errno;
        *rc =
            dlock_errorf(err, errlen, DLOCK_ECONNECT,
                         "cannot start a ZooKeeper client for %s: %s", x->hosts,
                         zk_last_log[0] ? zk_last_log : strerror(e));
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    return c;
}

/* Close the session: the server deletes its ephemeral nodes at once. */
static void zk_conn_free(struct zk_conn *c)
{
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    pthread_mutex_unlock(&c->mu);
    /* Runs the completions still pending (with ZCLOSING) and joins the
     * client's threads; after it nothing calls back into c. */
    zookeeper_close(c->zh);
    while (c->abandoned != NULL) {
        struct zk_call *k = c->abandoned;
        c->abandoned = k->next;
        dlock__zk_call_free(k);
    }
    dlock__zk_orphans_free(c);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void dlock__zk_conn_unref(struct zk_conn *c)
{
    struct zk_ctx *x;
    int last;

    if (c == NULL)
        return;
    x = c->ctx;
    pthread_mutex_lock(&x->mu);
    last = --c->refs == 0;
    pthread_mutex_unlock(&x->mu);
    if (last)
        zk_conn_free(c);
}

/*
 * The current session with a reference, or a new one if it expired (the
 * C client never revives an expired handle). Failure is reported on s.
 */
int dlock__zk_conn_get(struct zk_session *zs, struct zk_conn **out)
{
    struct zk_ctx *x = zs->ctx;
    struct zk_conn *c, *fresh = NULL, *old = NULL;
    char err[256];
    int rc = DLOCK_OK;

    pthread_mutex_lock(&x->mu);
    c = x->cur;
    if (c == NULL || atomic_load(&c->expired)) {
        pthread_mutex_unlock(&x->mu);
        fresh = dlock__zk_conn_new(x, err, sizeof err, &rc);
        if (fresh == NULL)
            return dlock_session_error(&zs->base, rc, "%s", err);
        pthread_mutex_lock(&x->mu);
        if (x->cur == c) {
            old = c; /* the context's reference moves to the new one */
            x->cur = fresh;
            fresh = NULL;
        }
        c = x->cur;
    }
    c->refs++;
    pthread_mutex_unlock(&x->mu);
    if (old != NULL)
        dlock__zk_conn_unref(old);
    if (fresh != NULL) /* another thread replaced it first */
        dlock__zk_conn_unref(fresh);
    *out = c;
    return DLOCK_OK;
}

/* ---- waiting ------------------------------------------------------------ */

/* Wait until the session is connected, expired, or deadline. Returns a ZK
 * code: ZOK, ZSESSIONEXPIRED, or ZK_XTIMEOUT. */
int dlock__zk_wait_connected(struct zk_conn *c, int64_t deadline)
{
    struct timespec ts = dlock_deadline_timespec(deadline);
    int rc;

    pthread_mutex_lock(&c->mu);
    while (!c->connected && !atomic_load(&c->expired) &&
           dlock_now_ms() < deadline)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    rc = c->connected               ? ZOK
         : atomic_load(&c->expired) ? ZSESSIONEXPIRED
                                    : ZK_XTIMEOUT;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* dlock__zk_wait_connected, reported: DLOCK_OK or DLOCK_ECONNECT with why. */
int dlock__zk_ready(struct zk_session *zs, struct zk_conn *c, int64_t deadline)
{
    int64_t waited = deadline - dlock_now_ms();
    int rc = dlock__zk_wait_connected(c, deadline);

    if (rc == ZOK)
        return DLOCK_OK;
    if (rc == ZSESSIONEXPIRED)
        return dlock_session_error(&zs->base, DLOCK_ECONNECT,
                                   "the ZooKeeper session expired; a new "
                                   "one is opened on the next try");
    return dlock_session_error(&zs->base, DLOCK_ECONNECT,
                               "no ZooKeeper server of %s served us within "
                               "%lld ms (down, unreachable, or without a "
                               "quorum)",
                               zs->ctx->hosts,
                               (long long)(waited > 0 ? waited : 0));
}

/* Wait until the watched node goes, the session changes state, the
 * deadline, or the acquire on s is cancelled [B-CANCEL-1] (the condition
 * is waited on in slices: no server traffic); w is on c->waiters
 * meanwhile. */
void dlock__zk_sleep(struct dlock_session *s, struct zk_conn *c,
                     struct zk_waiter *w, uint64_t gen, int64_t deadline)
{
    pthread_mutex_lock(&c->mu);
    while (!w->fired && c->gen == gen && dlock_now_ms() < deadline)
        if (dlock_session_cond_wait(s, &c->cv, &c->mu, deadline) != 0)
            break;
    pthread_mutex_unlock(&c->mu);
}

void dlock__zk_waiter_add(struct zk_conn *c, struct zk_waiter *w,
                          const char *path, uint64_t *gen)
{
    w->path = path;
    w->fired = 0;
    pthread_mutex_lock(&c->mu);
    *gen = c->gen;
    w->next = c->waiters;
    c->waiters = w;
    pthread_mutex_unlock(&c->mu);
}

void dlock__zk_waiter_remove(struct zk_conn *c, struct zk_waiter *w)
{
    pthread_mutex_lock(&c->mu);
    for (struct zk_waiter **p = &c->waiters; *p != NULL; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&c->mu);
}
