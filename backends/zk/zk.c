/*
 * zk.c: the zk:// backend (alias zookeeper://): ZooKeeper's lock recipe,
 * with the node names Apache Curator uses, so a C program using dlock and a
 * Java program using Curator's InterProcessMutex (or, with mode=rwlock,
 * InterProcessReadWriteLock) exclude each other on the same path.
 *
 * The recipe. Each contender creates an EPHEMERAL_SEQUENTIAL child of the
 * lock's node,
 *
 *     <chroot><base>[/<namespace>]/<name>/_c_<uuid>-lock-0000000042
 *
 * lists the children, and holds the lock when its sequence number is the
 * lowest. Otherwise it watches only its predecessor, the node just before
 * it: a release wakes one waiter, not all of them (no herd effect), and
 * waiters are served in the order the server numbered them (FIFO). A reader
 * (shared mode) waits only for writers before it.
 *
 * Sessions. Ephemeral nodes live as long as the ZooKeeper session that made
 * them, and the mt client keeps its session alive with heartbeats from its
 * own I/O thread. So the lease IS the session: a holder that dies or stops
 * frees its locks when the server expires its session, and nothing of dlock
 * needs renewing while the process runs. Each dlock client owns ONE zhandle
 * (the per-client context; the mt client is thread-safe) shared by all its
 * dlock sessions, which are thin wrappers so core can run calls of many
 * handles at once. A lost TCP connection is not a lost session: the client
 * reconnects (to any server of the ensemble) and keeps its nodes if it gets
 * back within the session timeout. Until then the lock is "in doubt":
 * renew() says DLOCK_ECONNECT and core keeps the lock until the grant's
 * expiry, which is always "the last time the server answered us + the
 * session timeout", so dlock_held() never says yes for a session the server
 * may already have expired. A session found expired marks every lock of it
 * lost (renew() says DLOCK_ELOST) and the next call opens a new session.
 *
 * Calls. Everything goes through the asynchronous API with our own deadline
 * (the URI's timeout=): the synchronous calls of the C client wait without
 * limit. A call whose deadline passes is abandoned: its completion frees it
 * later. A create whose reply never came (connection lost, or abandoned)
 * may still have made our node; we find it again by the uuid in its name
 * (Curator's "protected" mode) and keep it, or, if we must give up, we
 * leave a note so the node is deleted as soon as the session is reachable
 * again (see "orphans"), never left to block everyone.
 *
 * Divisions: constants and types; parameters and paths; connections and
 * their watcher; calls; reading the children; orphans; contexts and
 * sessions; acquire; renew and release; inspect; the raw floor; the modes
 * and the table.
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

#include <zookeeper/zookeeper.h>

#include "dlock/backend.h"

/* ---- constants and types ------------------------------------------------- */

#define ZK_DEFAULT_PORT 2181
#define ZK_PREFIX_MAX 512   /* chroot + base + namespace, validated */
#define ZK_SEGMENT_MAX 240  /* one escaped lock name */
#define ZK_PATH_MAX 1024    /* prefix + name + node name, with room */
#define ZK_NODE_MAX 256     /* a child name we keep (ours are 63 bytes) */
#define ZK_GUID_LEN 36      /* a UUID's canonical text */
#define ZK_DUPS_MAX 4       /* extra nodes of ours one listing can report */
#define ZK_SESSION_MIN_MS 100u
#define ZK_SESSION_MAX_MS 3600000u
/* Our own result code, next to ZooKeeper's (all <= 0): no answer came
 * before our deadline, and the call was abandoned. */
#define ZK_XTIMEOUT 1
/* grant->word[1]: the sequence number, and this flag when the create's
 * reply was lost on the way (release then sweeps for duplicates). */
#define ZK_W_DOUBT (1ull << 32)

/*
 * A mode of this backend: core's mode object first (core and the backend
 * table see only that), then what tells the modes apart, the names of
 * our nodes. A node is "_c_<uuid>-" + one of these + the sequence number.
 */
struct zk_mode {
    struct dlock_mode base;
    const char *node_exclusive; /* a writer's node */
    const char *node_shared;    /* a reader's node; must contain __READ__ */
};

struct zk_conn;

/* Per-client state: the parsed URI, the mode and the current session. */
struct zk_ctx {
    pthread_mutex_t mu;     /* cur and every conn's refs */
    struct zk_conn *cur;    /* the live session; replaced once expired */
    const struct zk_mode *mode; /* set by ctx_open; NULL in floor */
    char *hosts;            /* "h1:p1,h2:p2" for zookeeper_init */
    char prefix[ZK_PREFIX_MAX + 1]; /* chroot+base+/namespace, no final / */
    uint32_t session_ms;    /* asked for; the server may adjust it */
    uint32_t timeout_ms;    /* each call, and connecting */
};

/* A thread waiting for a node to go away (its predecessor). */
struct zk_waiter {
    const char *path;
    int fired;
    struct zk_waiter *next;
};

/* A node that may exist in our session although nobody wants it: a create
 * whose outcome we could not learn, or a delete that could not be sent.
 * Every node of ours in dir whose name carries guid is deleted once the
 * session is reachable. */
struct zk_orphan {
    struct zk_orphan *next;
    struct zk_conn *conn;
    int busy;    /* a sweep is under way */
    int pending; /* deletes in flight */
    int failed;  /* one of them failed: try again on the next connect */
    char guid[ZK_GUID_LEN + 1];
    char dir[];
};

struct zk_call;

/* One ZooKeeper session: a zhandle and what its watcher has told us. */
struct zk_conn {
    struct zk_ctx *ctx;
    zhandle_t *zh;
    int refs;                /* under ctx->mu: ctx, grants, calls running */
    pthread_mutex_t mu;      /* everything below */
    pthread_cond_t cv;       /* session events and watch events */
    int connected;           /* the last session event said connected */
    atomic_int expired;      /* the session is over for good */
    int closing;             /* zookeeper_close() is under way */
    uint64_t gen;            /* counts session events */
    atomic_int_fast64_t session_id;
    atomic_int timeout_ms;   /* the negotiated session timeout */
    atomic_int no_containers; /* the server refused a container node */
    atomic_int warned_lease;  /* said once that a lease is too long */
    atomic_int told_session;  /* logged the session's id and timeout */
    struct zk_waiter *waiters;
    struct zk_orphan *orphans;
    struct zk_call *abandoned; /* calls whose completion has not come */
    uint64_t seed_hi, seed_lo; /* our node ids: seed with a counter mixed in */
    atomic_uint_fast64_t next_id;
};

/* What a listing of a lock's children told us. */
struct zk_scan {
    /* For an acquire: our node, found by its uuid. */
    int found;
    int64_t self_seq;
    char self[ZK_NODE_MAX];
    int blocked;             /* nodes ahead of ours that we must wait for */
    char pred[ZK_NODE_MAX];  /* the nearest of them: the one to watch */
    int ndups;               /* more nodes of ours (a create sent twice) */
    char dups[ZK_DUPS_MAX][ZK_NODE_MAX];
    /* For inspect: the lowest node and how many hold the lock. */
    int total, holders;
    char first[ZK_NODE_MAX];
};

enum zk_op { ZK_CREATE, ZK_CHILDREN, ZK_EXISTS, ZK_DELETE, ZK_GET };

/*
 * One asynchronous call. The caller fills it, issues the request, and waits
 * on cv (with conn->mu) until the completion sets done. If the caller's
 * deadline passes first it marks the call abandoned and forgets it; the
 * completion then frees it. Results are copied in the completion, which
 * also reads the children list there, so nothing is allocated per call.
 */
struct zk_call {
    struct zk_conn *conn;
    pthread_cond_t cv;
    enum zk_op op;
    int done, abandoned;
    int rc;
    struct Stat stat;
    /* ZK_CHILDREN: what to look for, and what was found. */
    char guid[ZK_GUID_LEN + 1]; /* "" for inspect */
    int shared;
    struct zk_scan scan;
    /* ZK_CREATE: the new node's name; ZK_GET: the data. */
    char name[ZK_NODE_MAX];
    int datalen;
    struct zk_call *next; /* in conn->abandoned */
};

struct zk_session {
    struct dlock_session base;
    struct zk_ctx *ctx;
    struct zk_call *call; /* for this session's calls, one at a time */
    char dir[ZK_PATH_MAX];
    char node[ZK_PATH_MAX];
    char aux[ZK_PATH_MAX];
};

static const char *const zk_params[] = {"session_timeout", "base", NULL};
static const char *const zk_aliases[] = {"zookeeper", NULL};
static const struct dlock_mode *const zk_modes[];

/* The libzookeeper log: its lines would go to the application's stderr.
 * A handle's lines come here (zookeeper_init2) and are dropped, except the
 * last error of the calling thread, which explains a failed
 * zookeeper_init() (an unknown host name). */
static _Thread_local char zk_last_log[160];

static void zk_log(const char *message)
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

/*
 * Once per process: the C client's log level is global. At its default
 * (INFO) every connect and disconnect is formatted, and the formatting
 * shares one static buffer between the I/O threads of all handles (a race
 * on log text). Lower it to ERROR unless the application chose a level
 * itself.
 */
extern ZOOAPI ZooLogLevel logLevel; /* zookeeper_log.h, which wants
                                       -I/usr/include/zookeeper */

static int zk_global_init(void)
{
    if (logLevel == ZOO_LOG_LEVEL_INFO)
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    return DLOCK_OK;
}

static int zk_gone(int rc)
{
    return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZCLOSING ||
           rc == ZAUTHFAILED;
}

static int zk_in_doubt(int rc)
{
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
           rc == ZSESSIONMOVED || rc == ZK_XTIMEOUT;
}

static const char *zk_err(int rc)
{
    return rc == ZK_XTIMEOUT ? "no answer before the deadline" : zerror(rc);
}

static void zk_abs_time(struct timespec *ts, int64_t ms)
{
    ts->tv_sec = (time_t)(ms / 1000);
    ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

/* ---- parameters and paths ------------------------------------------------ */

/*
 * A ZooKeeper path given by the user (the chroot, base=): "/" or "/a/b",
 * each name 1..255 printable ASCII characters other than '/', and neither
 * "." nor "..", which ZooKeeper refuses. Plain ASCII keeps the rule short
 * and the paths easy to type in Curator or zkCli.
 */
static int zk_check_path(const char *what, const char *p, char *err,
                         size_t errlen)
{
    size_t i = 1, start;

    if (p[0] != '/')
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "%s: '%s' is not an absolute path (expected "
                            "/name[/name...])",
                            what, p);
    if (p[1] == '\0')
        return DLOCK_OK;
    for (;;) {
        start = i;
        while (p[i] != '\0' && p[i] != '/') {
            unsigned char ch = (unsigned char)p[i];
            if (ch < 0x20 || ch > 0x7e)
                return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                    "%s: byte 0x%02x at offset %zu: names "
                                    "take printable ASCII only",
                                    what, ch, i);
            i++;
        }
        if (i == start)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "%s: empty name in '%s' (a doubled or "
                                "final '/')",
                                what, p);
        if (i - start > 255)
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "%s: a name longer than 255 bytes", what);
        if ((i - start == 1 && p[start] == '.') ||
            (i - start == 2 && p[start] == '.' && p[start + 1] == '.'))
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "%s: '.' and '..' are not node names in "
                                "ZooKeeper ('%s')",
                                what, p);
        if (p[i] == '\0')
            return DLOCK_OK;
        i++;
    }
}

/* Append a validated path ("/" adds nothing). */
static int zk_append(char *buf, size_t *len, const char *p)
{
    size_t n = strlen(p);

    if (strcmp(p, "/") == 0)
        return 1;
    if (*len + n > ZK_PREFIX_MAX)
        return 0;
    memcpy(buf + *len, p, n + 1);
    *len += n;
    return 1;
}

static void zk_ctx_free(struct zk_ctx *x)
{
    if (x == NULL)
        return;
    pthread_mutex_destroy(&x->mu);
    free(x->hosts);
    free(x);
}

/* Read the URI into a new context: hosts, prefix, session timeout. The mode
 * is core's (mode=, in uri->mode): ctx_open() sets x->mode. */
static int zk_parse(struct zk_ctx **out, const struct dlock_uri *u, char *err,
                    size_t errlen)
{
    const char *base = dlock_uri_param(u, "base");
    struct zk_ctx *x;
    size_t cap, n = 0, plen = 0;
    int rc;

    *out = NULL;
    if (u->user != NULL || u->password != NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "userinfo: zk:// takes no user or password "
                            "(ZooKeeper authentication is not supported)");
    if (u->nhosts == 0)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "host: expected zk://host[:port][,host[:port]"
                            "...][/chroot]");
    for (size_t i = 0; i < u->nhosts; i++)
        if (u->hosts[i].host[0] == '\0')
            return dlock_errorf(err, errlen, DLOCK_EINVAL,
                                "host: server %zu has no host name", i + 1);
    x = calloc(1, sizeof *x);
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    pthread_mutex_init(&x->mu, NULL);

    /* The session timeout defaults to lease=: for ZooKeeper the lease is
     * the session (see the file comment). */
    rc = dlock_uri_duration(u, "session_timeout", u->lease_ms, &x->session_ms,
                            err, errlen);
    if (rc == DLOCK_OK && (x->session_ms < ZK_SESSION_MIN_MS ||
                           x->session_ms > ZK_SESSION_MAX_MS))
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "session_timeout: %u ms%s is outside %u ms..%u ms "
                          "(the server narrows it further: by default to "
                          "2..20 times its tickTime)",
                          x->session_ms,
                          dlock_uri_param(u, "session_timeout") != NULL
                              ? ""
                              : " (from lease=)",
                          ZK_SESSION_MIN_MS, ZK_SESSION_MAX_MS);
    x->timeout_ms = u->timeout_ms;

    /* The lock nodes live under chroot + base + /namespace. The chroot is
     * joined here rather than given to the C client, so its missing parts
     * are created like the others. */
    if (rc == DLOCK_OK && u->path[0] != '\0')
        rc = zk_check_path("path (chroot)", u->path, err, errlen);
    if (rc == DLOCK_OK && base != NULL)
        rc = zk_check_path("base", base, err, errlen);
    if (rc == DLOCK_OK &&
        (!zk_append(x->prefix, &plen, u->path[0] ? u->path : "/") ||
         !zk_append(x->prefix, &plen, base != NULL ? base : "/dlock")))
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "base: chroot and base together exceed %d bytes",
                          ZK_PREFIX_MAX);
    if (rc == DLOCK_OK && u->ns[0] != '\0') {
        char seg[ZK_SEGMENT_MAX + 1];
        size_t sl = dlock_name_segment(seg, ZK_SEGMENT_MAX, u->ns,
                                       strlen(u->ns));
        if (plen + 1 + sl > ZK_PREFIX_MAX)
            rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                              "namespace: the lock prefix would exceed %d "
                              "bytes",
                              ZK_PREFIX_MAX);
        else {
            x->prefix[plen++] = '/';
            memcpy(x->prefix + plen, seg, sl + 1);
            plen += sl;
        }
    }
    if (rc == DLOCK_OK &&
        (strcmp(x->prefix, "/zookeeper") == 0 ||
         strncmp(x->prefix, "/zookeeper/", 11) == 0))
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "base: %s is inside /zookeeper, which belongs to "
                          "the server",
                          x->prefix);

    /* "h1:p1,h2:p2". The C client splits host and port at the last ':'
     * and does not take brackets, so an IPv6 literal goes in bare. */
    cap = 1;
    for (size_t i = 0; rc == DLOCK_OK && i < u->nhosts; i++)
        cap += strlen(u->hosts[i].host) + 8;
    if (rc == DLOCK_OK && (x->hosts = malloc(cap)) == NULL)
        rc = dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    for (size_t i = 0; rc == DLOCK_OK && i < u->nhosts; i++)
        n += (size_t)snprintf(x->hosts + n, cap - n, "%s%s:%u",
                              i > 0 ? "," : "", u->hosts[i].host,
                              u->hosts[i].port ? u->hosts[i].port
                                               : ZK_DEFAULT_PORT);
    if (rc != DLOCK_OK) {
        zk_ctx_free(x);
        return rc;
    }
    *out = x;
    return DLOCK_OK;
}

/* The lock's node: prefix + "/" + the name as one safe segment
 * (dlock_name_segment: no '/', no leading '.', no control characters;
 * over-long names end in a SHA-256). Returns the length. */
static size_t zk_dir(const struct zk_ctx *x, char *out, const char *name,
                     size_t len)
{
    size_t n = strlen(x->prefix);

    memcpy(out, x->prefix, n);
    out[n++] = '/';
    return n + dlock_name_segment(out + n, ZK_SEGMENT_MAX, name, len);
}

/* The part of our node's name that says what it asks for: one name per
 * kind, from the mode object (Curator's names: see the modes at the end). */
static const char *zk_kind(const struct zk_ctx *x, int shared)
{
    return shared ? x->mode->node_shared : x->mode->node_exclusive;
}

static int zk_shared(const struct dlock_request *req)
{
    return req->kind == DLOCK_KIND_SHARED;
}

/* The id in our node names: a UUID (version 4 layout, as Curator's
 * UUID.randomUUID()) made of the connection's random seed with a counter
 * mixed in, so each create has its own without a system call. */
static void zk_guid(const struct zk_conn *c, uint64_t serial,
                    char out[ZK_GUID_LEN + 1])
{
    uint64_t hi = (c->seed_hi & ~0xF000ull) | 0x4000ull;
    uint64_t lo = ((c->seed_lo ^ serial) & ~(3ull << 62)) | (2ull << 62);

    snprintf(out, ZK_GUID_LEN + 1, "%08llx-%04llx-%04llx-%04llx-%012llx",
             (unsigned long long)(hi >> 32),
             (unsigned long long)((hi >> 16) & 0xFFFF),
             (unsigned long long)(hi & 0xFFFF),
             (unsigned long long)(lo >> 48),
             (unsigned long long)(lo & 0xFFFFFFFFFFFFull));
}

/* The full path of a held node, rebuilt from the grant (no allocation). */
static void zk_node_path(struct zk_session *zs, const struct zk_conn *c,
                         const struct dlock_request *req,
                         const struct dlock_grant *g, char *out)
{
    char guid[ZK_GUID_LEN + 1];
    size_t n = zk_dir(zs->ctx, out, req->name, req->name_len);

    zk_guid(c, g->word[0], guid);
    snprintf(out + n, ZK_PATH_MAX - n, "/_c_%s-%s%010d", guid,
             zk_kind(zs->ctx, zk_shared(req)),
             (int)(uint32_t)g->word[1]);
}

/* ---- connections and their watcher --------------------------------------- */

static void zk_sweep(struct zk_conn *c);

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

    if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 &&
        len == want->len && memcmp(&a, &want->addr, len) == 0)
        dlock_fd_cloexec(fd);
}

/*
 * The one watcher of a connection: session events (connected, connecting,
 * expired) and the deletion of a node someone waits for. It runs on the C
 * client's completion thread, so it only records and wakes; the orphan
 * sweep it may start is asynchronous too.
 */
static void zk_watcher(zhandle_t *zh, int type, int state, const char *path,
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
        zk_sweep(c);
}

/* Start a new session (does not wait for it). */
static struct zk_conn *zk_conn_new(struct zk_ctx *x, char *err, size_t errlen,
                                   int *rc)
{
    struct zk_conn *c = calloc(1, sizeof *c);
    pthread_condattr_t attr;
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
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &attr);
    pthread_condattr_destroy(&attr);
    zk_last_log[0] = '\0';
    {
        unsigned char before[ZK_FD_SCAN_MAX] = {0};
        zk_each_inheritable(zk_note_fd, before);
        c->zh = zookeeper_init2(x->hosts, zk_watcher, (int)x->session_ms,
                                NULL, c, 0, zk_log);
        zk_each_inheritable(zk_cloexec_new_pipes, before);
    }
    if (c->zh == NULL) {
        int e = errno;
        *rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                           "cannot start a ZooKeeper client for %s: %s",
                           x->hosts,
                           zk_last_log[0] ? zk_last_log : strerror(e));
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    return c;
}

static void zk_call_free(struct zk_call *k)
{
    if (k == NULL)
        return;
    pthread_cond_destroy(&k->cv);
    free(k);
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
        zk_call_free(k);
    }
    while (c->orphans != NULL) {
        struct zk_orphan *o = c->orphans;
        c->orphans = o->next;
        free(o);
    }
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void zk_conn_unref(struct zk_conn *c)
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
static int zk_conn_get(struct zk_session *zs, struct zk_conn **out)
{
    struct zk_ctx *x = zs->ctx;
    struct zk_conn *c, *fresh = NULL, *old = NULL;
    char err[256];
    int rc = DLOCK_OK;

    pthread_mutex_lock(&x->mu);
    c = x->cur;
    if (c == NULL || atomic_load(&c->expired)) {
        pthread_mutex_unlock(&x->mu);
        fresh = zk_conn_new(x, err, sizeof err, &rc);
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
        zk_conn_unref(old);
    if (fresh != NULL) /* another thread replaced it first */
        zk_conn_unref(fresh);
    *out = c;
    return DLOCK_OK;
}

/* Wait until the session is connected, expired, or deadline. Returns a ZK
 * code: ZOK, ZSESSIONEXPIRED, or ZK_XTIMEOUT. */
static int zk_wait_connected(struct zk_conn *c, int64_t deadline)
{
    struct timespec ts;
    int rc;

    zk_abs_time(&ts, deadline);
    pthread_mutex_lock(&c->mu);
    while (!c->connected && !atomic_load(&c->expired) &&
           dlock_now_ms() < deadline)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    rc = c->connected                  ? ZOK
         : atomic_load(&c->expired)    ? ZSESSIONEXPIRED
                                       : ZK_XTIMEOUT;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* zk_wait_connected, reported: DLOCK_OK or DLOCK_ECONNECT with why. */
static int zk_ready(struct zk_session *zs, struct zk_conn *c,
                    int64_t deadline)
{
    int64_t waited = deadline - dlock_now_ms();
    int rc = zk_wait_connected(c, deadline);

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

/* ---- calls --------------------------------------------------------------- */

static struct zk_call *zk_call_new(void)
{
    struct zk_call *k = calloc(1, sizeof *k);
    pthread_condattr_t attr;

    if (k == NULL)
        return NULL;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &attr);
    pthread_condattr_destroy(&attr);
    return k;
}

/* The session's call slot (a new one after an abandoned call). */
static struct zk_call *zk_slot(struct zk_session *zs)
{
    if (zs->call == NULL)
        zs->call = zk_call_new();
    return zs->call;
}

static void zk_call_reset(struct zk_call *k, struct zk_conn *c, enum zk_op op)
{
    k->conn = c;
    k->op = op;
    k->done = 0;
    k->abandoned = 0;
    k->rc = ZK_XTIMEOUT;
    k->guid[0] = '\0';
    k->name[0] = '\0';
    k->datalen = 0;
}

/*
 * Take a completion: nothing to do if its caller gave up (free the call;
 * after a create, sweep, since the node it made may be an orphan now).
 * Returns the call to fill, with c->mu held, or NULL.
 */
static struct zk_call *zk_complete_begin(const void *data, int rc)
{
    struct zk_call *k = (struct zk_call *)data;
    struct zk_conn *c = k->conn;
    int sweep;

    pthread_mutex_lock(&c->mu);
    if (!k->abandoned) {
        k->rc = rc;
        return k;
    }
    for (struct zk_call **p = &c->abandoned; *p != NULL; p = &(*p)->next)
        if (*p == k) {
            *p = k->next;
            break;
        }
    sweep = k->op == ZK_CREATE && !c->closing && c->orphans != NULL;
    pthread_mutex_unlock(&c->mu);
    zk_call_free(k);
    if (sweep)
        zk_sweep(c);
    return NULL;
}

static void zk_complete_end(struct zk_call *k)
{
    k->done = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->conn->mu);
}

/* Wait for the call's answer until deadline; on time-out abandon it (and
 * clear *slot, so the session gets a fresh call next time). */
static int zk_finish(struct zk_call **slot, int issued, int64_t deadline)
{
    struct zk_call *k = *slot;
    struct zk_conn *c = k->conn;
    struct timespec ts;
    int rc;

    if (issued != ZOK) /* refused before sending: no completion will come */
        return issued;
    zk_abs_time(&ts, deadline);
    pthread_mutex_lock(&c->mu);
    while (!k->done && dlock_now_ms() < deadline)
        pthread_cond_timedwait(&k->cv, &c->mu, &ts);
    if (!k->done) {
        k->abandoned = 1;
        k->next = c->abandoned;
        c->abandoned = k;
        *slot = NULL;
        rc = ZK_XTIMEOUT;
    } else {
        rc = k->rc;
    }
    pthread_mutex_unlock(&c->mu);
    if (zk_gone(rc) && rc != ZCLOSING)
        atomic_store(&c->expired, 1);
    return rc;
}

static int zk_seq_of(const char *name, size_t len, int64_t *seq);

static void zk_create_done(int rc, const char *value, const struct Stat *stat,
                           const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);
    const char *slash;

    if (k == NULL)
        return;
    if (rc == ZOK && value != NULL) {
        slash = strrchr(value, '/');
        snprintf(k->name, sizeof k->name, "%s", slash ? slash + 1 : value);
        if (stat != NULL)
            k->stat = *stat;
    }
    zk_complete_end(k);
}

static void zk_stat_done(int rc, const struct Stat *stat, const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k == NULL)
        return;
    if (rc == ZOK && stat != NULL)
        k->stat = *stat;
    zk_complete_end(k);
}

static void zk_void_done(int rc, const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k != NULL)
        zk_complete_end(k);
}

static void zk_data_done(int rc, const char *value, int len,
                         const struct Stat *stat, const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k == NULL)
        return;
    if (rc == ZOK) {
        if (stat != NULL)
            k->stat = *stat;
        k->datalen = 0;
        if (value != NULL && len > 0) {
            k->datalen = len < (int)sizeof k->name - 1
                             ? len
                             : (int)sizeof k->name - 1;
            memcpy(k->name, value, (size_t)k->datalen);
        }
        k->name[k->datalen] = '\0';
    }
    zk_complete_end(k);
}

static void zk_scan_children(struct zk_call *k, const struct String_vector *v);

static void zk_children_done(int rc, const struct String_vector *v,
                             const void *data)
{
    struct zk_call *k = zk_complete_begin(data, rc);

    if (k == NULL)
        return;
    memset(&k->scan, 0, sizeof k->scan);
    if (rc == ZOK && v != NULL)
        zk_scan_children(k, v);
    zk_complete_end(k);
}

/* The requests dlock makes, each waited for until deadline. */
static int zk_create(struct zk_session *zs, struct zk_conn *c,
                     const char *path, const char *data, int len, int mode,
                     int64_t deadline)
{
    struct zk_call *k = zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    zk_call_reset(k, c, ZK_CREATE);
    return zk_finish(&zs->call,
                     zoo_acreate2(c->zh, path, data, len, &ZOO_OPEN_ACL_UNSAFE,
                                  mode, zk_create_done, k),
                     deadline);
}

static int zk_children(struct zk_session *zs, struct zk_conn *c,
                       const char *dir, const char *guid, int shared,
                       int64_t deadline)
{
    struct zk_call *k = zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    zk_call_reset(k, c, ZK_CHILDREN);
    snprintf(k->guid, sizeof k->guid, "%s", guid);
    k->shared = shared;
    return zk_finish(&zs->call,
                     zoo_aget_children(c->zh, dir, 0, zk_children_done, k),
                     deadline);
}

static int zk_exists(struct zk_session *zs, struct zk_conn *c,
                     const char *path, int64_t deadline)
{
    struct zk_call *k = zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    zk_call_reset(k, c, ZK_EXISTS);
    return zk_finish(&zs->call,
                     zoo_aexists(c->zh, path, 0, zk_stat_done, k), deadline);
}

static int zk_delete(struct zk_session *zs, struct zk_conn *c,
                     const char *path, int64_t deadline)
{
    struct zk_call *k = zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    zk_call_reset(k, c, ZK_DELETE);
    return zk_finish(&zs->call, zoo_adelete(c->zh, path, -1, zk_void_done, k),
                     deadline);
}

/* getData, with our watcher if watch: unlike exists(), it sets no watch
 * when the node is already gone, so a waiter whose predecessor left in the
 * meantime leaves nothing registered behind (Curator does the same). */
static int zk_get(struct zk_session *zs, struct zk_conn *c, const char *path,
                  int watch, int64_t deadline)
{
    struct zk_call *k = zk_slot(zs);

    if (k == NULL)
        return ZSYSTEMERROR;
    zk_call_reset(k, c, ZK_GET);
    return zk_finish(&zs->call,
                     zoo_awget(c->zh, path, watch ? zk_watcher : NULL,
                               watch ? c : NULL, zk_data_done, k),
                     deadline);
}

/* ---- reading the children ------------------------------------------------ */

/* The sequence number: the last 10 characters, all digits (ZooKeeper
 * appends %010d). Nodes without one are not contenders and are ignored. */
static int zk_seq_of(const char *name, size_t len, int64_t *seq)
{
    int64_t v = 0;

    if (len <= 10)
        return 0;
    for (size_t i = len - 10; i < len; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        v = v * 10 + (name[i] - '0');
    }
    *seq = v;
    return 1;
}

static int zk_is_reader(const char *name)
{
    return strstr(name, "__READ__") != NULL;
}

static void zk_keep(char *dst, const char *src)
{
    snprintf(dst, ZK_NODE_MAX, "%s", src);
}

/*
 * Runs in the completion (under conn->mu), on the C client's own copy of
 * the list, so the list is neither copied nor sorted: one pass finds our
 * node (by the uuid, the lowest if a lost create was sent twice), one more
 * finds who is ahead of it. For inspect (no uuid), the lowest node and how
 * many hold the lock. O(children).
 */
static void zk_scan_children(struct zk_call *k, const struct String_vector *v)
{
    struct zk_scan *sc = &k->scan;
    char mine[3 + ZK_GUID_LEN + 2] = "";
    size_t mlen = 0;
    int64_t seq, pred_seq = -1, first_seq = -1, first_writer = -1;

    if (k->guid[0] != '\0')
        mlen = (size_t)snprintf(mine, sizeof mine, "_c_%s-", k->guid);
    for (int32_t i = 0; i < v->count; i++) {
        const char *n = v->data[i];
        if (!zk_seq_of(n, strlen(n), &seq))
            continue;
        sc->total++;
        if (first_seq < 0 || seq < first_seq) {
            first_seq = seq;
            zk_keep(sc->first, n);
        }
        if (!zk_is_reader(n) && (first_writer < 0 || seq < first_writer))
            first_writer = seq;
        if (mlen == 0 || strncmp(n, mine, mlen) != 0)
            continue;
        if (sc->found && seq > sc->self_seq) {
            if (sc->ndups < ZK_DUPS_MAX)
                zk_keep(sc->dups[sc->ndups++], n);
            continue;
        }
        if (sc->found && sc->ndups < ZK_DUPS_MAX)
            zk_keep(sc->dups[sc->ndups++], sc->self);
        sc->found = 1;
        sc->self_seq = seq;
        zk_keep(sc->self, n);
    }
    /* Inspect: a writer first holds alone; readers before the first writer
     * hold together. */
    if (sc->total > 0) {
        if (!zk_is_reader(sc->first))
            sc->holders = 1;
        else
            for (int32_t i = 0; i < v->count; i++) {
                const char *n = v->data[i];
                if (zk_seq_of(n, strlen(n), &seq) && zk_is_reader(n) &&
                    (first_writer < 0 || seq < first_writer))
                    sc->holders++;
            }
    }
    if (!sc->found)
        return;
    for (int32_t i = 0; i < v->count; i++) {
        const char *n = v->data[i];
        if (!zk_seq_of(n, strlen(n), &seq) || seq >= sc->self_seq ||
            strncmp(n, mine, mlen) == 0)
            continue;
        /* A reader waits only for writers; a writer for everyone. */
        if (k->shared && zk_is_reader(n))
            continue;
        sc->blocked++;
        if (seq > pred_seq) {
            pred_seq = seq;
            zk_keep(sc->pred, n);
        }
    }
}

/* ---- orphans ------------------------------------------------------------- */

/*
 * Remember that dir may hold a node of ours with guid that nobody wants,
 * and sweep now if connected. Called when a create's outcome is unknown or
 * a give-up delete could not be sent. The sweep lists dir and deletes our
 * nodes; it runs again on every reconnection until it succeeds, and the
 * question disappears with the session if that expires.
 */
static void zk_orphan_add(struct zk_conn *c, const char *dir,
                          const char *guid)
{
    size_t len = strlen(dir);
    struct zk_orphan *o;

    if (atomic_load(&c->expired))
        return; /* the session's nodes are gone already */
    o = calloc(1, sizeof *o + len + 1);
    if (o == NULL)
        return; /* the node lives until the session ends */
    o->conn = c;
    snprintf(o->guid, sizeof o->guid, "%s", guid);
    memcpy(o->dir, dir, len + 1);
    pthread_mutex_lock(&c->mu);
    o->next = c->orphans;
    c->orphans = o;
    pthread_mutex_unlock(&c->mu);
    zk_sweep(c);
}

/* Unlink and free o; call with c->mu held. */
static void zk_orphan_drop(struct zk_conn *c, struct zk_orphan *o)
{
    for (struct zk_orphan **p = &c->orphans; *p != NULL; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            free(o);
            return;
        }
}

static void zk_orphan_deleted(int rc, const void *data)
{
    struct zk_orphan *o = (struct zk_orphan *)data;
    struct zk_conn *c = o->conn;

    pthread_mutex_lock(&c->mu);
    if (rc != ZOK && rc != ZNONODE && !zk_gone(rc))
        o->failed = 1;
    if (--o->pending == 0) {
        if (o->failed) {
            o->busy = o->failed = 0; /* again on the next connect */
        } else {
            zk_orphan_drop(c, o);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

static void zk_orphan_listed(int rc, const struct String_vector *v,
                             const void *data)
{
    struct zk_orphan *o = (struct zk_orphan *)data;
    struct zk_conn *c = o->conn;
    char mine[3 + ZK_GUID_LEN + 2], path[ZK_PATH_MAX];
    size_t mlen = (size_t)snprintf(mine, sizeof mine, "_c_%s-", o->guid);

    pthread_mutex_lock(&c->mu);
    if (rc == ZOK && v != NULL && !c->closing) {
        /* Completions run one at a time on this thread, so none of the
         * deletes can complete before pending is final. */
        for (int32_t i = 0; i < v->count; i++) {
            if (strncmp(v->data[i], mine, mlen) != 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", o->dir, v->data[i]);
            pthread_mutex_unlock(&c->mu);
            int sent = zoo_adelete(c->zh, path, -1, zk_orphan_deleted, o);
            pthread_mutex_lock(&c->mu);
            if (sent == ZOK)
                o->pending++;
            else
                o->failed = 1;
        }
    }
    if (o->pending > 0) {
        /* zk_orphan_deleted finishes it */
    } else if (rc == ZOK && o->failed) {
        o->busy = o->failed = 0;
    } else if (rc == ZOK || rc == ZNONODE || zk_gone(rc)) {
        zk_orphan_drop(c, o); /* nothing (left) to delete */
    } else {
        o->busy = 0; /* connection lost: again on the next connect */
    }
    pthread_mutex_unlock(&c->mu);
}

/* Start a sweep of the orphans not already being swept, if connected.
 * Never called with c->mu held: it issues requests. */
static void zk_sweep(struct zk_conn *c)
{
    struct zk_orphan *todo[16];
    size_t n = 0;

    pthread_mutex_lock(&c->mu);
    if (c->connected && !c->closing && !atomic_load(&c->expired))
        for (struct zk_orphan *o = c->orphans; o != NULL && n < 16;
             o = o->next)
            if (!o->busy) {
                o->busy = 1;
                todo[n++] = o;
            }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++)
        if (zoo_aget_children(c->zh, todo[i]->dir, 0, zk_orphan_listed,
                              todo[i]) != ZOK) {
            pthread_mutex_lock(&c->mu);
            todo[i]->busy = 0;
            pthread_mutex_unlock(&c->mu);
        }
}

/* ---- contexts and sessions ----------------------------------------------- */

/* The lease (how often the watchdog proves the session alive: a third of
 * it) must leave dlock_held() covered between renewals, each of which
 * vouches for one session timeout: at most twice the session timeout. */
static int zk_lease_ok(uint32_t lease_ms, int session_ms)
{
    return session_ms > 0 && lease_ms <= 2u * (uint32_t)session_ms;
}

/* Our mode object around core's, or NULL if mode is not ours. */
static const struct zk_mode *zk_mode_of(const struct dlock_mode *mode)
{
    for (size_t i = 0; zk_modes[i] != NULL; i++)
        if (zk_modes[i] == mode)
            return (const struct zk_mode *)mode;
    return NULL;
}

static int zk_ctx_open(void **out, const struct dlock_uri *uri,
                       const struct dlock_mode *mode, char *err,
                       size_t errlen)
{
    const struct zk_mode *m = zk_mode_of(mode);
    struct zk_ctx *x;
    struct zk_conn *c;
    int rc;

    if (m == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL,
                            "mode: '%s' is not a mode of zk://",
                            mode != NULL && mode->name != NULL ? mode->name
                                                               : "(none)");
    rc = zk_parse(&x, uri, err, errlen);
    if (rc != DLOCK_OK)
        return rc;
    x->mode = m;
    c = zk_conn_new(x, err, errlen, &rc);
    if (c == NULL) {
        zk_ctx_free(x);
        return rc;
    }
    x->cur = c;
    /* Connect now, so a bad host shows at open time. */
    rc = zk_wait_connected(c, dlock_now_ms() + x->timeout_ms);
    if (rc != ZOK)
        rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                          "no ZooKeeper server of %s answered within %u ms",
                          x->hosts, x->timeout_ms);
    else if (!zk_lease_ok(uri->lease_ms, c->timeout_ms))
        rc = dlock_errorf(err, errlen, DLOCK_EINVAL,
                          "lease: %u ms is more than twice the ZooKeeper "
                          "session timeout (%d ms, as the server granted "
                          "it); set lease= to at most %d ms (or leave out "
                          "session_timeout=, which follows lease=)",
                          uri->lease_ms, c->timeout_ms, 2 * c->timeout_ms);
    if (rc != DLOCK_OK) {
        zk_conn_unref(c);
        zk_ctx_free(x);
        return rc;
    }
    *out = x;
    return DLOCK_OK;
}

static void zk_ctx_close(void *ctx)
{
    struct zk_ctx *x = ctx;
    struct zk_conn *c;

    pthread_mutex_lock(&x->mu);
    c = x->cur;
    x->cur = NULL;
    pthread_mutex_unlock(&x->mu);
    zk_conn_unref(c);
    zk_ctx_free(x);
}

static int zk_open(struct dlock_session **out, const struct dlock_uri *uri,
                   void *ctx, char *err, size_t errlen)
{
    struct zk_session *zs;
    struct zk_ctx *x = ctx;

    (void)uri;
    if (x == NULL)
        return dlock_errorf(err, errlen, DLOCK_EINVAL, "no context");
    zs = calloc(1, sizeof *zs);
    if (zs == NULL || (zs->call = zk_call_new()) == NULL) {
        free(zs);
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    }
    zs->ctx = x;
    *out = &zs->base;
    return DLOCK_OK;
}

static void zk_close(struct dlock_session *s)
{
    struct zk_session *zs = (struct zk_session *)s;

    zk_call_free(zs->call);
    free(zs);
}

/* ---- acquire ------------------------------------------------------------- */

/* Create a missing lock node and its missing parents, top-down on demand.
 * They are containers (ZooKeeper 3.5.3+), which the server deletes once
 * empty, as Curator's creatingParentContainersIfNeeded() does; persistent
 * on older servers (then release deletes an empty lock node itself). */
static int zk_mkdirs(struct zk_session *zs, struct zk_conn *c, char *path,
                     int depth)
{
    int64_t deadline = dlock_now_ms() + zs->ctx->timeout_ms;
    char *slash;
    int rc;

    for (int tries = 0; tries < 4; tries++) {
        int containers = !atomic_load(&c->no_containers);
        rc = zk_create(zs, c, path, NULL, -1,
                       containers ? ZOO_CONTAINER : ZOO_PERSISTENT, deadline);
        if (rc == ZOK || rc == ZNODEEXISTS)
            return ZOK;
        if (containers && (rc == ZUNIMPLEMENTED || rc == ZBADARGUMENTS)) {
            atomic_store(&c->no_containers, 1);
            continue;
        }
        if (rc != ZNONODE || depth > 64)
            return rc;
        slash = strrchr(path, '/');
        if (slash == NULL || slash == path)
            return rc;
        *slash = '\0';
        rc = zk_mkdirs(zs, c, path, depth + 1);
        *slash = '/';
        if (rc != ZOK)
            return rc;
    }
    return rc;
}

/* Report a ZooKeeper failure on s with the dlock code it maps to. */
static int zk_fail(struct zk_session *zs, int rc, const char *what)
{
    int code = zk_in_doubt(rc) || zk_gone(rc) ? DLOCK_ECONNECT
               : rc == ZSYSTEMERROR          ? DLOCK_ENOMEM
                                             : DLOCK_ERROR;

    if (zk_gone(rc))
        return dlock_session_error(&zs->base, code,
                                   "%s: %s (the ZooKeeper session is over; a "
                                   "new one is opened on the next try)",
                                   what, zk_err(rc));
    return dlock_session_error(&zs->base, code, "%s: %s", what, zk_err(rc));
}

/* Delete our queue node after giving up; if that cannot be done now, the
 * sweep does it when the session is reachable. */
static void zk_withdraw(struct zk_session *zs, struct zk_conn *c,
                        const char *dir, const char *self, const char *guid)
{
    int rc;

    snprintf(zs->aux, sizeof zs->aux, "%s/%s", dir, self);
    rc = zk_delete(zs, c, zs->aux, dlock_now_ms() + zs->ctx->timeout_ms);
    if (rc != ZOK && rc != ZNONODE && !zk_gone(rc))
        zk_orphan_add(c, dir, guid);
}

/*
 * Queue up: create our node, creating the lock node as needed, and leave
 * its full path in zs->node. A create whose answer was lost may have
 * happened: after reconnecting, look for our uuid among the children and
 * keep that node (and its place in the queue) if it is there, as Curator's
 * protected mode does; else create it again with the same uuid.
 */
static int zk_enqueue(struct zk_session *zs, struct zk_conn *c,
                      const struct dlock_request *req, const char *guid,
                      int shared, int64_t *czxid, int *doubt)
{
    struct zk_ctx *x = zs->ctx;
    size_t dirlen = strlen(zs->dir);
    char *name = zs->node + dirlen + 1; /* after "<dir>/" */
    size_t room = sizeof zs->node - dirlen - 1;
    /* All of it, recovery included, within timeout=: a server that is
     * down or paused gives DLOCK_ECONNECT in that time. */
    int64_t limit = dlock_now_ms() + x->timeout_ms;
    int rc;

    for (int tries = 0; tries < 6; tries++) {
        snprintf(name, room, "_c_%s-%s", guid, zk_kind(x, shared));
        rc = zk_create(zs, c, zs->node, req->owner, (int)req->owner_len,
                       ZOO_EPHEMERAL_SEQUENTIAL, limit);
        if (rc == ZOK) {
            snprintf(name, room, "%s", zs->call->name);
            *czxid = zs->call->stat.czxid;
            return DLOCK_OK;
        }
        if (rc == ZNONODE) {
            rc = zk_mkdirs(zs, c, zs->dir, 0);
            if (rc != ZOK)
                return zk_fail(zs, rc, "creating the lock's parent nodes");
            continue;
        }
        if (!zk_in_doubt(rc))
            return zk_fail(zs, rc, "creating our queue node");

        /* The create may or may not have been applied. */
        *doubt = 1;
        dlock_session_log(&zs->base, DLOCK_LOG_INFO,
                          "zk: the answer to creating our node under %s was "
                          "lost (%s); looking for it by its id %s",
                          zs->dir, zk_err(rc), guid);
        if (zk_ready(zs, c, limit) != DLOCK_OK) {
            zk_orphan_add(c, zs->dir, guid);
            return DLOCK_ECONNECT;
        }
        rc = zk_children(zs, c, zs->dir, guid, shared, limit);
        if (rc == ZOK && zs->call->scan.found) {
            snprintf(name, room, "%s", zs->call->scan.self);
            dlock_session_log(&zs->base, DLOCK_LOG_INFO,
                              "zk: found our node %s after the lost answer; "
                              "keeping it and its place in the queue",
                              name);
            rc = zk_exists(zs, c, zs->node, limit);
            if (rc == ZOK) {
                *czxid = zs->call->stat.czxid;
                return DLOCK_OK;
            }
        }
        if (rc != ZOK && rc != ZNONODE) {
            if (zk_in_doubt(rc))
                zk_orphan_add(c, zs->dir, guid);
            return zk_fail(zs, rc, "looking for our node after a lost answer");
        }
        /* Not there: it never happened. Create it again, same id. */
    }
    return dlock_session_error(&zs->base, DLOCK_ERROR,
                               "could not create our node under %s", zs->dir);
}

/* Wait until the watched node goes, the session changes state, or the
 * deadline; w is on c->waiters meanwhile. */
static void zk_sleep(struct zk_conn *c, struct zk_waiter *w, uint64_t gen,
                     int64_t deadline)
{
    struct timespec ts;

    zk_abs_time(&ts, deadline);
    pthread_mutex_lock(&c->mu);
    while (!w->fired && c->gen == gen && dlock_now_ms() < deadline)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    pthread_mutex_unlock(&c->mu);
}

static void zk_waiter_add(struct zk_conn *c, struct zk_waiter *w,
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

static void zk_waiter_remove(struct zk_conn *c, struct zk_waiter *w)
{
    pthread_mutex_lock(&c->mu);
    for (struct zk_waiter **p = &c->waiters; *p != NULL; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&c->mu);
}

/* How long to wait for a connection: timeout=, or less if the caller's
 * deadline comes first. */
static int64_t zk_limit(const struct zk_ctx *x, int64_t deadline)
{
    int64_t t = dlock_now_ms() + x->timeout_ms;
    return deadline != 0 && deadline < t ? deadline : t;
}

static int zk_acquire(struct dlock_session *s, const struct dlock_request *req,
                      int64_t deadline, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    int shared = zk_shared(req);
    char guid[ZK_GUID_LEN + 1];
    struct zk_scan scan;
    struct zk_conn *c;
    struct zk_waiter w;
    int64_t czxid = 0, alive = 0, doubt_since = 0;
    uint64_t id, gen;
    int doubt = 0, rc, requeued = 0, timeout;
    size_t dirlen;
    char *self;

    (void)retry_ms; /* waiting is native: no hint to give */
    rc = zk_conn_get(zs, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = zk_ready(zs, c, zk_limit(x, deadline));
    if (rc != DLOCK_OK)
        goto out;
    timeout = atomic_load(&c->timeout_ms);
    if (!atomic_exchange(&c->told_session, 1))
        dlock_session_log(s, DLOCK_LOG_INFO,
                          "zk: session 0x%llx, timeout %d ms (asked for %u "
                          "ms; the server decides)",
                          (unsigned long long)atomic_load(&c->session_id),
                          timeout, x->session_ms);
    if (!(req->flags & DLOCK_LOCK_NO_WATCHDOG) &&
        !zk_lease_ok(req->lease_ms, timeout) &&
        !atomic_exchange(&c->warned_lease, 1))
        /* Safe, but dlock_held() reads false between renewals, and one
         * failed renewal is enough to report the lock lost. */
        dlock_session_log(s, DLOCK_LOG_WARN,
                          "zk: lease %u ms is more than twice the session "
                          "timeout (%d ms): each renewal vouches for the "
                          "session for %d ms only, so dlock_held() turns "
                          "false between renewals; use a lease of at most "
                          "%d ms",
                          req->lease_ms, timeout, timeout, 2 * timeout);

    dirlen = zk_dir(x, zs->dir, req->name, req->name_len);
    zs->node[0] = '\0';
    memcpy(zs->node, zs->dir, dirlen);
    zs->node[dirlen] = '/';
    self = zs->node + dirlen + 1;
requeue:
    id = atomic_fetch_add(&c->next_id, 1);
    zk_guid(c, id, guid);
    rc = zk_enqueue(zs, c, req, guid, shared, &czxid, &doubt);
    if (rc != DLOCK_OK)
        goto out;

    for (;;) {
        if (zk_ready(zs, c, zk_limit(x, deadline)) != DLOCK_OK) {
            /* A disconnection longer than timeout= ends the attempt (core
             * retries until the deadline); our node goes when it can. */
            zk_orphan_add(c, zs->dir, guid);
            rc = DLOCK_ECONNECT;
            goto out;
        }
        alive = dlock_now_ms();
        rc = zk_children(zs, c, zs->dir, guid, shared, alive + x->timeout_ms);
        if (zk_in_doubt(rc)) {
            /* Ride out a short disconnection (zk_ready above), but not a
             * server that is connected and silent for longer than
             * timeout=. */
            if (doubt_since == 0)
                doubt_since = alive;
            if (dlock_now_ms() - doubt_since < (int64_t)x->timeout_ms)
                continue;
            zk_orphan_add(c, zs->dir, guid);
            rc = zk_fail(zs, rc, "listing the queue");
            goto out;
        }
        doubt_since = 0;
        if (rc != ZOK) {
            if (!zk_gone(rc))
                zk_withdraw(zs, c, zs->dir, self, guid);
            rc = zk_fail(zs, rc, "listing the queue");
            goto out;
        }
        /* Later calls reuse (or replace) the call: keep what we need. */
        scan = zs->call->scan;
        if (!scan.found) {
            /* Our node is gone: the session ended, or someone deleted it.
             * Queue again (a few times), at the back. */
            if (atomic_load(&c->expired) || requeued++ >= 3) {
                rc = dlock_session_error(s, DLOCK_ECONNECT,
                                         "our queue node under %s vanished "
                                         "(session expired or node deleted)",
                                         zs->dir);
                goto out;
            }
            goto requeue;
        }
        for (int i = 0; i < scan.ndups; i++) {
            /* A create that was sent twice: keep the first. */
            snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir, scan.dups[i]);
            if (zk_delete(zs, c, zs->aux, dlock_now_ms() + x->timeout_ms) !=
                ZOK)
                zk_orphan_add(c, zs->dir, guid);
        }
        if (scan.blocked == 0)
            break; /* ours is the lowest: held */
        if (deadline == 0 || dlock_now_ms() >= deadline) {
            zk_withdraw(zs, c, zs->dir, self, guid);
            rc = deadline == 0 ? DLOCK_EBUSY : DLOCK_ETIMEDOUT;
            goto out;
        }

        /* Watch only the node just ahead of ours (no herd), then sleep
         * until it goes, the session changes state, or the deadline. A
         * watched getData, not exists: see zk_get. */
        snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir, scan.pred);
        zk_waiter_add(c, &w, zs->aux, &gen);
        rc = zk_get(zs, c, zs->aux, 1, dlock_now_ms() + x->timeout_ms);
        if (rc == ZOK)
            zk_sleep(c, &w, gen, deadline);
        zk_waiter_remove(c, &w);
        if (rc != ZOK && rc != ZNONODE && !zk_in_doubt(rc)) {
            if (!zk_gone(rc))
                zk_withdraw(zs, c, zs->dir, self, guid);
            rc = zk_fail(zs, rc, "watching the node ahead of ours");
            goto out;
        }
        /* Look again: the node ahead went (another may still be ahead),
         * the connection changed, or time is up. */
    }

    grant->fence = (uint64_t)czxid;
    /* The server answered a request sent at `alive`, so the session lives
     * at least until alive + its timeout. */
    grant->expires_ms = alive + atomic_load(&c->timeout_ms);
    grant->priv = c; /* our reference moves to the grant */
    grant->word[0] = id;
    grant->word[1] = (uint64_t)(uint32_t)scan.self_seq |
                     (doubt ? ZK_W_DOUBT : 0);
    return DLOCK_OK;
out:
    zk_conn_unref(c);
    return rc;
}

/* ---- renew and release --------------------------------------------------- */

/*
 * The session keeps itself alive; renewing means proving it still is and
 * that our node is still there, which one exists() per lock does (sent all
 * at once, answered in one round trip). Each answer vouches for the
 * session until the time it was asked + the session timeout: that is the
 * grant's new expiry. No answer: in doubt (DLOCK_ECONNECT), and core gives
 * up when that expiry passes. Expired session or node gone: DLOCK_ELOST.
 */
static int zk_renew(struct dlock_session *s, struct dlock_renewal *items,
                    size_t n)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    struct zk_call *one[1], **calls = one;
    int *sent;
    int64_t t0 = dlock_now_ms(), deadline;
    uint32_t wait_ms = x->timeout_ms;
    int one_sent[1];

    sent = one_sent;
    if (n > 1) {
        calls = calloc(n, sizeof *calls);
        sent = calloc(n, sizeof *sent);
        if (calls == NULL || sent == NULL) {
            free(calls);
            free(sent);
            return dlock_session_error(s, DLOCK_ENOMEM, "out of memory");
        }
    } else {
        calls[0] = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct zk_conn *c = items[i].grant->priv;
        struct zk_call *k;
        char path[ZK_PATH_MAX];

        sent[i] = ZINVALIDSTATE;
        if (atomic_load(&c->expired)) {
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST,
                "the ZooKeeper session expired: the server deleted our node");
            continue;
        }
        pthread_mutex_lock(&c->mu);
        int up = c->connected;
        /* No answer should take long: half a session timeout at most, so
         * a loss is reported close to when it happens. */
        if (c->timeout_ms > 0 && (uint32_t)c->timeout_ms / 2 < wait_ms)
            wait_ms = (uint32_t)c->timeout_ms / 2;
        pthread_mutex_unlock(&c->mu);
        if (!up) {
            items[i].result = dlock_session_error(
                s, DLOCK_ECONNECT,
                "disconnected from ZooKeeper: the session (and the lock) is "
                "in doubt until it reconnects or times out");
            continue;
        }
        k = n == 1 ? zk_slot(zs) : zk_call_new();
        if (k == NULL) {
            items[i].result = dlock_session_error(s, DLOCK_ENOMEM,
                                                  "out of memory");
            continue;
        }
        calls[i] = k;
        zk_call_reset(k, c, ZK_EXISTS);
        zk_node_path(zs, c, items[i].req, items[i].grant, path);
        sent[i] = zoo_aexists(c->zh, path, 0, zk_stat_done, k);
    }
    deadline = t0 + wait_ms;
    for (size_t i = 0; i < n; i++) {
        struct zk_conn *c = items[i].grant->priv;
        int rc;

        if (calls[i] == NULL)
            continue;
        rc = zk_finish(&calls[i], sent[i], deadline);
        if (rc == ZOK) {
            pthread_mutex_lock(&c->mu);
            int64_t sid = c->session_id;
            pthread_mutex_unlock(&c->mu);
            if (calls[i]->stat.ephemeralOwner != sid)
                items[i].result = dlock_session_error(
                    s, DLOCK_ELOST,
                    "our node now belongs to another session");
            else {
                items[i].grant->expires_ms = t0 + c->timeout_ms;
                items[i].result = DLOCK_OK;
            }
        } else if (rc == ZNONODE) {
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST,
                atomic_load(&c->expired)
                    ? "the ZooKeeper session expired: the server deleted "
                      "our node"
                    : "our node was deleted (by someone else, or with an "
                      "expired session)");
        } else if (zk_gone(rc)) {
            items[i].result = dlock_session_error(
                s, DLOCK_ELOST, "the ZooKeeper session is over: %s",
                zk_err(rc));
        } else {
            items[i].result = dlock_session_error(
                s, zk_in_doubt(rc) ? DLOCK_ECONNECT : DLOCK_ERROR,
                "checking our node: %s (in doubt until the session "
                "answers or times out)",
                zk_err(rc));
        }
        if (n > 1)
            zk_call_free(calls[i]); /* NULL if it was abandoned */
        else
            zs->call = calls[0];
    }
    if (n > 1) {
        free(calls);
        free(sent);
    }
    return DLOCK_OK;
}

static int zk_release(struct dlock_session *s, const struct dlock_request *req,
                      struct dlock_grant *grant)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    struct zk_conn *c = grant->priv;
    char guid[ZK_GUID_LEN + 1];
    size_t dirlen;
    int rc;

    if (c == NULL)
        return DLOCK_OK;
    grant->priv = NULL;
    dirlen = zk_dir(x, zs->dir, req->name, req->name_len);
    zk_guid(c, grant->word[0], guid);
    zk_node_path(zs, c, req, grant, zs->node);
    if (atomic_load(&c->expired)) {
        rc = dlock_session_error(s, DLOCK_ENOTOWNER,
                                 "the ZooKeeper session had expired: the "
                                 "lock was lost before this release");
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    int up = c->connected;
    pthread_mutex_unlock(&c->mu);
    if (!up) {
        /* Do not wait for the connection (closing a client that holds many
         * locks would take that long per lock): the sweep deletes the node
         * when the session is back, or the server when it ends. */
        zk_orphan_add(c, zs->dir, guid);
        rc = dlock_session_error(s, DLOCK_ECONNECT,
                                 "disconnected from ZooKeeper: our node is "
                                 "deleted when the session is back, or by "
                                 "the server when it ends");
        goto out;
    }
    rc = zk_delete(zs, c, zs->node, dlock_now_ms() + x->timeout_ms);
    if (rc == ZOK) {
        rc = DLOCK_OK;
        if (grant->word[1] & ZK_W_DOUBT) /* a twin of our node may exist */
            zk_orphan_add(c, zs->dir, guid);
        if (atomic_load(&c->no_containers)) { /* old server: remove an
                                                * empty lock node */
            zs->dir[dirlen] = '\0';
            zk_delete(zs, c, zs->dir, dlock_now_ms() + x->timeout_ms);
        }
    } else if (rc == ZNONODE) {
        rc = dlock_session_error(s, DLOCK_ENOTOWNER,
                                 "our node was already gone (session "
                                 "expired or node deleted)");
    } else if (zk_gone(rc)) {
        rc = dlock_session_error(s, DLOCK_ENOTOWNER,
                                 "the ZooKeeper session is over (%s): the "
                                 "lock was lost before this release",
                                 zk_err(rc));
    } else {
        /* Not deleted, maybe not reachable: the sweep deletes it when the
         * session is back, or the server when the session ends. */
        zk_orphan_add(c, zs->dir, guid);
        rc = zk_fail(zs, rc, "deleting our node (it goes when the session "
                             "answers again, or ends)");
    }
out:
    zk_conn_unref(c);
    return rc;
}

/* ---- inspect ------------------------------------------------------------- */

static int zk_inspect(struct dlock_session *s, const char *name, size_t len,
                      dlock_state *out)
{
    struct zk_session *zs = (struct zk_session *)s;
    struct zk_ctx *x = zs->ctx;
    struct zk_conn *c;
    int rc, total, holders;

    rc = zk_conn_get(zs, &c);
    if (rc != DLOCK_OK)
        return rc;
    rc = zk_ready(zs, c, dlock_now_ms() + x->timeout_ms);
    if (rc != DLOCK_OK)
        goto out;
    zk_dir(x, zs->dir, name, len);
    rc = zk_children(zs, c, zs->dir, "", 0, dlock_now_ms() + x->timeout_ms);
    out->remaining_ms = -1; /* the holder's session decides */
    if (rc == ZNONODE) {
        out->held = 0;
        out->waiters = 0;
        rc = DLOCK_OK;
        goto out;
    }
    if (rc != ZOK) {
        rc = zk_fail(zs, rc, "listing the queue");
        goto out;
    }
    total = zs->call->scan.total;
    holders = zs->call->scan.holders;
    out->held = total > 0;
    out->waiters = total - holders;
    if (total == 0) {
        rc = DLOCK_OK;
        goto out;
    }
    snprintf(zs->aux, sizeof zs->aux, "%s/%s", zs->dir,
             zs->call->scan.first);
    rc = zk_get(zs, c, zs->aux, 0, dlock_now_ms() + x->timeout_ms);
    if (rc == ZOK) {
        struct zk_call *k = zs->call;
        out->fence = (uint64_t)k->stat.czxid;
        if (holders > 1)
            snprintf(out->owner, sizeof out->owner, "(%d shared holders)",
                     holders);
        else
            snprintf(out->owner, sizeof out->owner, "%s",
                     k->datalen > 0 ? k->name
                                    : strrchr(zs->aux, '/') + 1);
        /* The data is dlock's owner id, or whatever another client wrote
         * (Curator: the host's address): show it printable. */
        for (char *p = out->owner; *p != '\0'; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                *p = '?';
        rc = DLOCK_OK;
    } else if (rc == ZNONODE) {
        rc = DLOCK_OK; /* released meanwhile; the counts stand */
    } else {
        rc = zk_fail(zs, rc, "reading the holder's node");
    }
out:
    zk_conn_unref(c);
    return rc;
}

/* ---- the raw floor ------------------------------------------------------- */

struct zk_floor_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;
};

static void zk_floor_watcher(zhandle_t *zh, int type, int state,
                             const char *path, void *ctx)
{
    struct zk_floor_state *f = ctx;

    (void)zh;
    (void)path;
    if (type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&f->mu);
    f->state = state;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/*
 * The same protocol as one uncontended dlock cycle, with the bare
 * synchronous libzookeeper_mt calls: create an EPHEMERAL_SEQUENTIAL node,
 * list the children (is ours the lowest?), delete the node. Two writes and
 * one read per cycle, as for dlock.
 */
static int zk_floor(const struct dlock_uri *uri, const char *name, uint32_t n,
                    uint64_t *ns_out, char *err, size_t errlen)
{
    struct zk_floor_state f = {PTHREAD_MUTEX_INITIALIZER,
                               PTHREAD_COND_INITIALIZER, 0};
    char dir[ZK_PATH_MAX], node[ZK_PATH_MAX], made[ZK_PATH_MAX];
    struct zk_ctx *x;
    zhandle_t *zh;
    struct timespec ts;
    int rc, zrc;

    rc = zk_parse(&x, uri, err, errlen);
    if (rc != DLOCK_OK)
        return rc;
    zh = zookeeper_init2(x->hosts, zk_floor_watcher, (int)x->session_ms,
                         NULL, &f, 0, zk_log);
    if (zh == NULL) {
        zk_ctx_free(x);
        return dlock_errorf(err, errlen, DLOCK_ECONNECT,
                            "floor: cannot start a ZooKeeper client: %s",
                            strerror(errno));
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += x->timeout_ms / 1000;
    ts.tv_nsec += (long)(x->timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&f.mu);
    while (f.state != ZOO_CONNECTED_STATE &&
           pthread_cond_timedwait(&f.cv, &f.mu, &ts) == 0)
        ;
    zrc = f.state;
    pthread_mutex_unlock(&f.mu);
    if (zrc != ZOO_CONNECTED_STATE) {
        rc = dlock_errorf(err, errlen, DLOCK_ECONNECT,
                          "floor: no ZooKeeper server of %s answered within "
                          "%u ms",
                          x->hosts, x->timeout_ms);
        goto done;
    }
    /* The lock node and its parents, once, outside the timed loop. */
    zk_dir(x, dir, name, strlen(name));
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        zrc = zoo_create(zh, dir, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_CONTAINER, NULL, 0);
        *p = saved;
        if (zrc != ZOK && zrc != ZNODEEXISTS) {
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: create %s: %s",
                              dir, zerror(zrc));
            goto done;
        }
        if (saved == '\0')
            break;
    }
    snprintf(node, sizeof node, "%s/_c_00000000-0000-4000-8000-%012d-lock-",
             dir, 0);
    for (uint32_t i = 0; i < n; i++) {
        struct String_vector kids = {0, NULL};
        struct Stat st;
        uint64_t t0 = dlock_now_ns();
        zrc = zoo_create2(zh, node, "floor", 5, &ZOO_OPEN_ACL_UNSAFE,
                          ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made, &st);
        if (zrc == ZOK)
            zrc = zoo_get_children(zh, dir, 0, &kids);
        if (zrc == ZOK) {
            /* The check dlock makes: is ours the lowest? */
            const char *mine = strrchr(made, '/') + 1;
            int64_t ms = 0, s2;
            int lowest = zk_seq_of(mine, strlen(mine), &ms);
            for (int32_t j = 0; j < kids.count; j++)
                if (zk_seq_of(kids.data[j], strlen(kids.data[j]), &s2) &&
                    s2 < ms)
                    lowest = 0;
            deallocate_String_vector(&kids);
            zrc = zoo_delete(zh, made, -1);
            if (zrc == ZOK && !lowest)
                zrc = ZNODEEXISTS; /* someone else uses this name */
        }
        if (zrc != ZOK) {
            rc = dlock_errorf(err, errlen, DLOCK_ERROR, "floor: cycle %u: %s",
                              i, zerror(zrc));
            break;
        }
        ns_out[i] = dlock_now_ns() - t0;
    }
done:
    zookeeper_close(zh);
    pthread_cond_destroy(&f.cv);
    pthread_mutex_destroy(&f.mu);
    zk_ctx_free(x);
    return rc;
}

/* ---- the modes and the table ---------------------------------------------- */

/* What both modes really give. No DLOCK_CAP_LEASE: a lock never expires
 * while its holder's session lives, and the C client keeps the session
 * alive by itself; renewals only prove it (and feed dlock_held()). No
 * DLOCK_CAP_NOTIFY either: the watch on the predecessor wakes a native
 * wait (NATIVE_WAIT); there is no wait() for core's retry loop. Only
 * connection errors are retried by core (waiting is native): give a
 * reconnection a moment, not a busy loop. */
#define ZK_MODE_COMMON                                                      \
    .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FAIR |  \
            DLOCK_CAP_SHARED | DLOCK_CAP_FENCING |                           \
            DLOCK_CAP_SURVIVES_RECONNECT | DLOCK_CAP_BATCH_RENEW,            \
    .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |                          \
             DLOCK_KIND_BIT(DLOCK_KIND_SHARED),                              \
    .retry_min_ms = 20, .retry_max_ms = 500, .acquire = zk_acquire,          \
    .renew = zk_renew, .release = zk_release, .inspect = zk_inspect,         \
    .floor = zk_floor

/* Curator's InterProcessMutex: "lock-". A reader writes "__READ__lock-":
 * Curator's mutex sorts it by its number and waits for it like any
 * contender, and dlock sees a reader. */
static const struct zk_mode zk_mutex = {
    .base = {.name = "mutex",
             .summary = "Curator InterProcessMutex node names (lock-); "
                        "readers queue as __READ__lock-",
             ZK_MODE_COMMON},
    .node_exclusive = "lock-",
    .node_shared = "__READ__lock-",
};

/* Curator's InterProcessReadWriteLock: "__WRIT__" and "__READ__". */
static const struct zk_mode zk_rwlock = {
    .base = {.name = "rwlock",
             .summary = "Curator InterProcessReadWriteLock node names "
                        "(__WRIT__, __READ__)",
             ZK_MODE_COMMON},
    .node_exclusive = "__WRIT__",
    .node_shared = "__READ__",
};

static const struct dlock_mode *const zk_modes[] = {&zk_mutex.base,
                                                    &zk_rwlock.base, NULL};

const struct dlock_backend dlock__backend_zk = {
    .version = DLOCK_BACKEND_VERSION,
    .scheme = "zk",
    .aliases = zk_aliases,
    .params = zk_params,
    .summary = "Apache ZooKeeper: ephemeral sequential nodes, "
               "Curator-compatible names",
    .modes = zk_modes,
    .global_init = zk_global_init,
    .ctx_open = zk_ctx_open,
    .ctx_close = zk_ctx_close,
    .open = zk_open,
    .close = zk_close,
};
