/*
 * http.c: talking to etcd's JSON gateway with libcurl. A request is a POST
 * of the session's body buffer to one member; a member that cannot be
 * reached is left for the next (a stopped member of a cluster costs one
 * connect attempt, then the next request starts at the member that
 * answered). The watch is the gateway's streaming /v3/watch: one JSON
 * object per line, read as it comes until the watched key's DELETE event;
 * once it is set up, a range in the same multi handle checks the key was
 * not deleted before. A semaphore's waiter watches its queue's range
 * instead, for the deletion of one of the N keys just older than its own.
 * Keys and values are base64 in the gateway's JSON (nettle's base64).
 *
 * Divisions: buffers and base64; one request; the watch; JSON readers.
 */
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <nettle/base64.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "etcd.h"

/* Record why the call failed on the session (es->why, for open(), which
 * reports through its err) and through core [B-ERR-1]. */
int dlock__etcd_fail(struct etcd_session *es, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(es->why, sizeof es->why, fmt, ap);
    va_end(ap);
    return dlock_session_error(&es->base, code, "%s", es->why);
}

/* ---- buffers and base64 --------------------------------------------------- */

void dlock__etcd_buf_free(struct etcd_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int buf_reserve(struct etcd_buf *b, size_t more)
{
    size_t cap;
    char *p;

    if (b->len + more + 1 <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    if ((p = realloc(b->p, cap)) == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int dlock__etcd_buf_printf(struct etcd_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || buf_reserve(b, (size_t)n) != 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int dlock__etcd_buf_b64(struct etcd_buf *b, const void *data, size_t len)
{
    size_t n = BASE64_ENCODE_RAW_LENGTH(len);

    if (buf_reserve(b, n) != 0)
        return -1;
    base64_encode_raw(b->p + b->len, len, data);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

long dlock__etcd_unb64(const char *text, char *out, size_t cap)
{
    struct base64_decode_ctx ctx;
    size_t in = strlen(text), done = cap;

    if (BASE64_DECODE_LENGTH(in) > cap)
        return -1;
    base64_decode_init(&ctx);
    if (!base64_decode_update(&ctx, &done, (uint8_t *)out, in, text) ||
        !base64_decode_final(&ctx))
        return -1;
    return (long)done;
}

/* ---- one request ------------------------------------------------------------ */

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct etcd_buf *b = arg;

    if (buf_reserve(b, size * n) != 0)
        return 0;
    memcpy(b->p + b->len, p, size * n);
    b->len += size * n;
    b->p[b->len] = '\0';
    return size * n;
}

/* The time left for one request: the URI's timeout, cut by the deadline;
 * 0 when the deadline has passed. */
static long request_ms(const struct etcd_ctx *x, int64_t deadline_ms)
{
    int64_t left = deadline_ms - dlock_now_ms();

    if (left <= 0)
        return 0;
    return left < x->timeout_ms ? (long)left : (long)x->timeout_ms;
}

static curl_socket_t open_socket(void *arg, curlsocktype purpose,
                                 struct curl_sockaddr *a);

/* Set up handle c for one POST of body to url, bounded by ms. */
static void set_common(CURL *c, const struct etcd_ctx *x, const char *url,
                       const struct etcd_buf *body, long ms)
{
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->p != NULL ? body->p : "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body->len);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms > 0 ? ms : 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms > 0 ? ms : 1L);
    /* etcd answers on loopback or a LAN: never through a proxy from the
     * environment, and only the scheme of the URI: http for etcd://,
     * https for etcds://, so no redirect or typo falls back to plain. */
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, x->tls ? "https" : "http");
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    if (x->tls) {
        /* Verification stays on (libcurl's default, said again): the peer's
         * certificate must chain to cacert= (else the system's bundle) and
         * name the host of the URI. */
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
        if (x->cacert != NULL)
            curl_easy_setopt(c, CURLOPT_CAINFO, x->cacert);
        if (x->cert != NULL) {
            curl_easy_setopt(c, CURLOPT_SSLCERT, x->cert);
            curl_easy_setopt(c, CURLOPT_SSLKEY, x->key);
        }
    }
}

/* Descriptors curl opens are close-on-exec [B-EXEC-1]. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose,
                                 struct curl_sockaddr *a)
{
    (void)arg;
    (void)purpose;
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* The inode of each socket open now (0: none), for the first ETCD_FD_MAX
 * descriptors: a number closed and reused meanwhile by another thread
 * shows as a new inode, where a bare list of numbers would hide it. Read
 * from /proc's links, without touching the descriptors of other threads. */
#define ETCD_FD_MAX 4096
static void socket_inodes(uint64_t *ino)
{
    DIR *d = opendir("/proc/self/fd");
    char path[64], link[64];
    struct dirent *e;

    memset(ino, 0, ETCD_FD_MAX * sizeof *ino);
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        long fd = strtol(e->d_name, NULL, 10);
        ssize_t n;
        if (e->d_name[0] == '.' || fd < 0 || fd >= ETCD_FD_MAX)
            continue;
        snprintf(path, sizeof path, "/proc/self/fd/%ld", fd);
        n = readlink(path, link, sizeof link - 1);
        if (n > 8 && memcmp(link, "socket:[", 8) == 0) {
            link[n] = '\0';
            ino[fd] = strtoull(link + 8, NULL, 10) + 1;
        }
    }
    closedir(d);
}

/* One multi handle made at a time, so the sockets that appear are its. */
static pthread_mutex_t new_mu = PTHREAD_MUTEX_INITIALIZER;

static CURLM *multi_new(void)
{
    uint64_t *before = calloc(2 * ETCD_FD_MAX, sizeof *before);
    uint64_t *after = before != NULL ? before + ETCD_FD_MAX : NULL;
    CURLM *m;

    /* libcurl 7.88 opens a multi handle's wake-up socket pair without
     * SOCK_CLOEXEC; find it among the sockets curl_multi_init() added and
     * mark them [B-EXEC-1] (another thread's socket opened in that
     * instant would only be marked too). A child forked by another thread
     * between the two still gets them: the pool keeps that to the first
     * sessions of a process. */
    if (before == NULL)
        return NULL; /* the caller says: out of memory */
    pthread_mutex_lock(&new_mu);
    socket_inodes(before);
    m = curl_multi_init();
    socket_inodes(after);
    for (int fd = 0; m != NULL && fd < ETCD_FD_MAX; fd++)
        if (after[fd] != 0 && after[fd] != before[fd])
            dlock_fd_cloexec(fd);
    pthread_mutex_unlock(&new_mu);
    free(before);
    return m;
}

/* Multi handles outlive sessions: a session takes one from this pool and
 * gives it back, so the wake-up pairs are made (and marked) only while
 * the pool grows, not at every session a client opens. */
#define ETCD_POOL_MAX 64
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static CURLM *pool[ETCD_POOL_MAX];
static size_t npool;

CURLM *dlock__etcd_multi_get(void)
{
    CURLM *m = NULL;

    pthread_mutex_lock(&pool_mu);
    if (npool > 0)
        m = pool[--npool];
    pthread_mutex_unlock(&pool_mu);
    return m != NULL ? m : multi_new();
}

void dlock__etcd_multi_put(CURLM *m)
{
    pthread_mutex_lock(&pool_mu);
    if (npool < ETCD_POOL_MAX) {
        pool[npool++] = m;
        m = NULL;
    }
    pthread_mutex_unlock(&pool_mu);
    if (m != NULL)
        curl_multi_cleanup(m);
}

void dlock__etcd_multi_pool_free(void)
{
    pthread_mutex_lock(&pool_mu);
    while (npool > 0)
        curl_multi_cleanup(pool[--npool]);
    pthread_mutex_unlock(&pool_mu);
}

/* Run the session's easy handle to its end through its multi handle
 * (whose descriptors are close-on-exec, unlike curl_easy_perform()'s own
 * multi handle's). The easy handle's timeouts bound it. */
static CURLcode run(struct etcd_session *es)
{
    CURLcode res = CURLE_FAILED_INIT;
    CURLMsg *msg;
    int running = 1, left;

    if (curl_multi_add_handle(es->multi, es->curl) != CURLM_OK)
        return CURLE_FAILED_INIT;
    while (running) {
        if (curl_multi_perform(es->multi, &running) != CURLM_OK)
            break;
        if (running && curl_multi_poll(es->multi, NULL, 0, 1000, NULL) !=
                           CURLM_OK)
            break;
    }
    while ((msg = curl_multi_info_read(es->multi, &left)) != NULL)
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == es->curl)
            res = msg->data.result;
    curl_multi_remove_handle(es->multi, es->curl);
    return res;
}

/* How a transfer failed on TLS (etcds://), from libcurl's code and the
 * words OpenSSL put in its error buffer. */
enum etcd_tls_fail {
    ETCD_TLS_NONE,       /* not TLS's doing, or not known to be */
    ETCD_TLS_FILES,      /* cacert=, cert= or key= could not be used */
    ETCD_TLS_UNVERIFIED, /* the member's certificate did not verify */
    ETCD_TLS_DROPPED,    /* the connection ended before any answer, on
                            a send or receive: see dlock__etcd_post() */
    ETCD_TLS_REFUSED     /* the member refused the client certificate */
};

static enum etcd_tls_fail tls_fail(CURLcode cc, const char *why, size_t got)
{
    switch (cc) {
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CRL_BADFILE:
        return ETCD_TLS_FILES;
    case CURLE_PEER_FAILED_VERIFICATION:
        return ETCD_TLS_UNVERIFIED;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:       /* the reset met in HTTP/2's framing */
    case CURLE_GOT_NOTHING: /* closed after the request, no answer */
        /* The server's alert, e.g. "tlsv13 alert certificate required"
         * (no client certificate; with TLS 1.3 it comes after the
         * handshake, on the first read) or "alert bad certificate". */
        if (strstr(why, "alert") != NULL &&
            (strstr(why, "certificate") != NULL ||
             strstr(why, "unknown ca") != NULL))
            return ETCD_TLS_REFUSED;
        /* Or the alert lost to a write into the closed connection ("Broken
         * pipe", "Connection reset by peer"): TLS 1.3 ends the handshake
         * before the server looks at the client's certificate. */
        return got == 0 && cc != CURLE_SSL_CONNECT_ERROR ? ETCD_TLS_DROPPED
                                                         : ETCD_TLS_NONE;
    default:
        return ETCD_TLS_NONE;
    }
}

int dlock__etcd_post(struct etcd_session *es, const char *path,
                     int64_t deadline_ms, json_object **out, int *code)
{
    struct etcd_ctx *x = es->x;
    char url[320], why[CURL_ERROR_SIZE] = "", tls_why[CURL_ERROR_SIZE];
    enum etcd_tls_fail tls = ETCD_TLS_NONE;
    unsigned first = __atomic_load_n(&x->next, __ATOMIC_RELAXED);
    json_object *msg;
    long status = 0;
    int grpc, again = 0; /* again: ask this member on a new connection */

    *out = NULL;
    if (code != NULL)
        *code = 0;
    for (size_t i = 0; i < x->nmembers; i++) {
        unsigned m = (first + (unsigned)i) % (unsigned)x->nmembers;
        long ms = request_ms(x, deadline_ms);
        int fresh = again;
        CURLcode cc;

        again = 0;
        if (ms == 0)
            break;
        snprintf(url, sizeof url, "%s%s", x->members[m], path);
        set_common(es->curl, x, url, &es->body, ms);
        if (fresh)
            curl_easy_setopt(es->curl, CURLOPT_FRESH_CONNECT, 1L);
        es->resp.len = 0;
        curl_easy_setopt(es->curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(es->curl, CURLOPT_WRITEDATA, &es->resp);
        curl_easy_setopt(es->curl, CURLOPT_ERRORBUFFER, why);
        cc = run(es);
        if (cc != CURLE_OK) {
            enum etcd_tls_fail f;
            if (why[0] == '\0')
                snprintf(why, sizeof why, "%s", curl_easy_strerror(cc));
            if (!x->tls)
                continue; /* the next member */
            f = tls_fail(cc, why, es->resp.len);
            if (f == ETCD_TLS_FILES)
                return dlock__etcd_fail(es, DLOCK_EINVAL,
                                        "cacert/cert/key: libcurl cannot "
                                        "use the files: %.180s",
                                        why);
            /* A member that takes the connection and then drops it
             * unanswered refused the client certificate, or stopped in
             * that instant (a stopped one refuses the next connection):
             * ask once more on a new connection, and take it for a
             * refusal only if it does that again. (i wraps to SIZE_MAX
             * and back: the same member.) */
            if (f == ETCD_TLS_DROPPED && !fresh) {
                again = 1;
                i--;
                continue;
            }
            if (f == ETCD_TLS_DROPPED)
                f = ETCD_TLS_REFUSED;
            if (f > tls) { /* the likelier cause, kept for the message */
                tls = f;
                snprintf(tls_why, sizeof tls_why, "%s", why);
            }
            continue; /* the next member */
        }
        curl_easy_getinfo(es->curl, CURLINFO_RESPONSE_CODE, &status);
        *out = es->resp.len > 0 ? json_tokener_parse(es->resp.p) : NULL;
        if (status == 200 && *out != NULL) {
            __atomic_store_n(&x->next, m, __ATOMIC_RELAXED);
            return DLOCK_OK;
        }
        msg = dlock__etcd_get(*out, "message");
        grpc = (int)dlock__etcd_i64(*out, "code");
        snprintf(why, sizeof why, "%s: HTTP %ld: %.200s", x->members[m],
                 status,
                 msg != NULL ? json_object_get_string(msg)
                             : (es->resp.p != NULL ? es->resp.p : ""));
        json_object_put(*out);
        *out = NULL;
        /* No leader, no quorum, a member shutting down (its gateway's
         * connection to its own server closing: 408/CANCELLED): this member
         * cannot serve now, another may (a put-if-absent or a compared
         * delete is safe to send again). */
        if (grpc == ETCD_CODE_UNAVAILABLE ||
            grpc == ETCD_CODE_DEADLINE_EXCEEDED ||
            grpc == ETCD_CODE_CANCELLED || status == 503 || status == 408)
            continue;
        __atomic_store_n(&x->next, m, __ATOMIC_RELAXED);
        if (code != NULL)
            *code = grpc;
        return dlock__etcd_fail(es, DLOCK_ERROR, "%s: %s", path, why);
    }
    /* No member answered. A refused client certificate is refused
     * credentials (exit 77); a member whose certificate does not verify
     * cannot be reached safely, which is what ECONNECT says (69). */
    if (tls == ETCD_TLS_REFUSED)
        return dlock__etcd_fail(
            es, DLOCK_EAUTH,
            "%s: the member refused the client certificate (%s): %.120s",
            path,
            x->cert != NULL ? "is cert= signed by its --trusted-ca-file?"
                            : "it wants one: give cert= and key=",
            tls_why);
    if (tls == ETCD_TLS_UNVERIFIED)
        return dlock__etcd_fail(
            es, DLOCK_ECONNECT,
            "%s: certificate verification failed: the member's "
            "certificate is not signed by %s%.60s or does not name its "
            "host: %.100s",
            path, x->cacert != NULL ? "cacert=" : "the system's CAs",
            x->cacert != NULL ? x->cacert : "", tls_why);
    return dlock__etcd_fail(es, DLOCK_ECONNECT,
                            "%s: no member of %zu answered%s%s", path,
                            x->nmembers, why[0] ? ": " : "", why);
}

/* ---- the watch ----------------------------------------------------------- */

struct watch_state {
    struct etcd_buf lines;
    int created;   /* etcd set the watch up */
    int deleted;   /* the DELETE event came (or the check found none) */
    int canceled;  /* the server ended the watch (compacted, ...) */
    /* A range watch (dlock__etcd_watch_nearest): done when one of the n
     * keys created just before below, the oldest of them created at low,
     * goes: a DELETE event of a key created in [low, below), or the check
     * (at rev0, the revision the watch starts after) finding those n keys
     * no longer there. */
    int range;
    uint32_t n;
    int64_t low, below, rev0;
};

/* A range watch's DELETE event. One without its previous key cannot be
 * placed: wake, and the caller looks. */
static void on_range_delete(struct watch_state *w, json_object *ev)
{
    json_object *prev = dlock__etcd_get(ev, "prev_kv");
    int64_t created = dlock__etcd_i64(prev, "create_revision");

    if (prev == NULL || (created >= w->low && created < w->below))
        w->deleted = 1;
}

/* Each line of the stream is one JSON object; look at the complete ones.
 * Returning less than given ends the transfer (deleted). */
static size_t on_watch(char *p, size_t size, size_t n, void *arg)
{
    struct watch_state *w = arg;
    char *nl;

    if (on_data(p, size, n, &w->lines) != size * n)
        return 0;
    while ((nl = memchr(w->lines.p, '\n', w->lines.len)) != NULL) {
        json_object *o;
        *nl = '\0';
        o = json_tokener_parse(w->lines.p);
        if (o != NULL) {
            json_object *ev = dlock__etcd_get(o, "result.events");
            for (size_t i = 0; i < dlock__etcd_len(ev); i++) {
                json_object *e = json_object_array_get_idx(ev, i);
                json_object *t = dlock__etcd_get(e, "type");
                if (t == NULL ||
                    strcmp(json_object_get_string(t), "DELETE") != 0)
                    continue;
                if (w->range)
                    on_range_delete(w, e);
                else
                    w->deleted = 1;
            }
            if (dlock__etcd_get(o, "result.created") != NULL) {
                w->created = 1;
                w->rev0 = dlock__etcd_i64(o, "result.header.revision");
            }
            if (dlock__etcd_get(o, "result.canceled") != NULL ||
                dlock__etcd_get(o, "error") != NULL)
                w->canceled = 1;
            json_object_put(o);
        }
        w->lines.len -= (size_t)(nl + 1 - w->lines.p);
        memmove(w->lines.p, nl + 1, w->lines.len + 1);
    }
    return w->deleted || w->canceled ? 0 : size * n;
}

/* The check's reply: the watched key is gone, or (a range watch) the n
 * keys just older than below, the oldest created at low, are not all
 * there at rev0. (etcd's count ignores max_create_revision: the keys are
 * listed, newest first, and the n-th looked at.) */
static void check_done(struct watch_state *w, json_object *r)
{
    if (w->range) {
        json_object *kvs = dlock__etcd_get(r, "kvs");
        if (dlock__etcd_len(kvs) < w->n ||
            dlock__etcd_i64(json_object_array_get_idx(kvs, w->n - 1),
                            "create_revision") != w->low)
            w->deleted = 1;
    } else if (dlock__etcd_i64(r, "count") == 0) {
        w->deleted = 1;
    }
}

/* "key":…,"range_end":… of the keys under a prefix ending in '/'. */
static int buf_prefix_range(struct etcd_buf *b, const char *prefix,
                            size_t len)
{
    char end[ETCD_KEY_MAX + 1];

    memcpy(end, prefix, len);
    end[len - 1]++; /* "name/" -> "name0" */
    return dlock__etcd_buf_printf(b, "\"key\":\"") ||
           dlock__etcd_buf_b64(b, prefix, len) ||
           dlock__etcd_buf_printf(b, "\",\"range_end\":\"") ||
           dlock__etcd_buf_b64(b, end, len) ||
           dlock__etcd_buf_printf(b, "\"");
}

/*
 * Drive the watch on es->curl and, once etcd says it is created, one
 * range of the watched key on es->check in the same multi handle: a key
 * already gone by then is as good as its DELETE event. A range watch's
 * check counts the older keys at the watch's start revision: check_body
 * holds its first part, and the revision is added here. Returns the
 * watch's own result.
 */
static CURLcode watch_run(struct etcd_session *es, struct watch_state *w,
                          const char *check_url, struct etcd_buf *check_body,
                          long ms)
{
    CURLcode res = CURLE_OK;
    CURLMsg *msg;
    int running, left, checking = 0, done = 0;

    if (curl_multi_add_handle(es->multi, es->curl) != CURLM_OK)
        return CURLE_FAILED_INIT;
    while (!done && !w->deleted) {
        if (curl_multi_perform(es->multi, &running) != CURLM_OK)
            break;
        while ((msg = curl_multi_info_read(es->multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            if (msg->easy_handle == es->curl) {
                res = msg->data.result;
                done = 1;
            } else if (msg->easy_handle == es->check) {
                long status = 0;
                json_object *r = NULL;
                curl_easy_getinfo(es->check, CURLINFO_RESPONSE_CODE, &status);
                if (msg->data.result == CURLE_OK && status == 200 &&
                    (r = json_tokener_parse(es->check_resp.p)) != NULL &&
                    dlock__etcd_get(r, "header") != NULL)
                    check_done(w, r);
                json_object_put(r);
                curl_multi_remove_handle(es->multi, es->check);
                checking = 2;
            }
        }
        if (!done && !w->deleted && w->created && checking == 0) {
            if (w->range &&
                dlock__etcd_buf_printf(check_body, ",\"revision\":\"%lld\"}",
                                       (long long)w->rev0))
                break; /* out of memory: the caller looks again */
            set_common(es->check, es->x, check_url, check_body, ms);
            es->check_resp.len = 0;
            curl_easy_setopt(es->check, CURLOPT_WRITEFUNCTION, on_data);
            curl_easy_setopt(es->check, CURLOPT_WRITEDATA, &es->check_resp);
            checking = curl_multi_add_handle(es->multi, es->check) ==
                               CURLM_OK
                           ? 1
                           : 2;
            continue;
        }
        /* The acquire's cancel descriptors beside curl's [B-CANCEL-1]. */
        if (!done && !w->deleted) {
            struct curl_waitfd extra[2];
            int cfds[2];
            unsigned nc = (unsigned)dlock_session_cancel_fds(&es->base, cfds,
                                                             2);
            for (unsigned i = 0; i < nc; i++)
                extra[i] = (struct curl_waitfd){cfds[i], CURL_WAIT_POLLIN, 0};
            if (curl_multi_poll(es->multi, extra, nc, 1000, NULL) !=
                    CURLM_OK ||
                dlock_session_cancelled(&es->base) != 0)
                break;
        }
    }
    if (checking == 1)
        curl_multi_remove_handle(es->multi, es->check);
    curl_multi_remove_handle(es->multi, es->curl);
    return res;
}

/* Run the watch es->body creates, with the check in check (freed here),
 * until w says done or deadline_ms: 1 done, 0 look again, or an error. */
static int watch_drive(struct etcd_session *es, struct watch_state *w,
                       struct etcd_buf *check, int64_t deadline_ms)
{
    struct etcd_ctx *x = es->x;
    unsigned m = __atomic_load_n(&x->next, __ATOMIC_RELAXED);
    char url[320], check_url[320], why[CURL_ERROR_SIZE] = "";
    int64_t left = deadline_ms - dlock_now_ms();
    long ms;
    CURLcode cc;

    if (left <= 0) {
        dlock__etcd_buf_free(check);
        return 0;
    }
    ms = left > INT32_MAX ? INT32_MAX : (long)left;
    snprintf(url, sizeof url, "%s/v3/watch", x->members[m]);
    snprintf(check_url, sizeof check_url, "%s/v3/kv/range", x->members[m]);
    set_common(es->curl, x, url, &es->body, ms);
    /* Connecting is bounded by the URI's timeout, the stream by the
     * deadline alone. */
    curl_easy_setopt(es->curl, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(left < x->timeout_ms ? left : x->timeout_ms));
    curl_easy_setopt(es->curl, CURLOPT_WRITEFUNCTION, on_watch);
    curl_easy_setopt(es->curl, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(es->curl, CURLOPT_ERRORBUFFER, why);
    cc = watch_run(es, w, check_url, check,
                   (long)(left < x->timeout_ms ? left : x->timeout_ms));
    dlock__etcd_buf_free(&w->lines);
    dlock__etcd_buf_free(check);
    if (w->deleted)
        return 1;
    if (cc == CURLE_OPERATION_TIMEDOUT || w->canceled)
        return 0; /* the caller looks again */
    if (cc == CURLE_OK)
        return 0; /* the stream ended (a member stopping): look again */
    /* This member is unreachable: the next request tries the others. */
    __atomic_store_n(&x->next, (m + 1) % (unsigned)x->nmembers,
                     __ATOMIC_RELAXED);
    return dlock__etcd_fail(es, DLOCK_ECONNECT, "watch on %s: %s",
                            x->members[m],
                            why[0] ? why : curl_easy_strerror(cc));
}

int dlock__etcd_watch_delete(struct etcd_session *es, const char *key,
                             size_t key_len, int64_t deadline_ms)
{
    struct watch_state w = {.range = 0};
    struct etcd_buf check = {NULL, 0, 0};

    /* From now on (no start revision: a past one would put the watcher
     * among etcd's unsynced ones, served every 100 ms), then the check. */
    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"create_request\":{\"key\":\"") ||
        dlock__etcd_buf_b64(&es->body, key, key_len) ||
        dlock__etcd_buf_printf(&es->body, "\",\"filters\":[\"NOPUT\"]}}") ||
        dlock__etcd_buf_printf(&check, "{\"key\":\"") ||
        dlock__etcd_buf_b64(&check, key, key_len) ||
        dlock__etcd_buf_printf(&check, "\",\"count_only\":true}")) {
        dlock__etcd_buf_free(&check);
        return dlock__etcd_fail(es, DLOCK_ENOMEM, "out of memory");
    }
    return watch_drive(es, &w, &check, deadline_ms);
}

int dlock__etcd_watch_nearest(struct etcd_session *es, const char *prefix,
                              size_t prefix_len, int64_t low, int64_t below,
                              uint32_t n, int64_t deadline_ms)
{
    struct watch_state w = {.range = 1, .n = n, .low = low, .below = below};
    struct etcd_buf check = {NULL, 0, 0};

    /* Deletions under the prefix from now on, each with the key it
     * deleted (prev_kv: its create revision says whether it was one of
     * the n); the check, at the watch's start revision, ends in
     * watch_run(). */
    es->body.len = 0;
    if (dlock__etcd_buf_printf(&es->body, "{\"create_request\":{") ||
        buf_prefix_range(&es->body, prefix, prefix_len) ||
        dlock__etcd_buf_printf(&es->body, ",\"filters\":[\"NOPUT\"],"
                                          "\"prev_kv\":true}}") ||
        dlock__etcd_buf_printf(&check, "{") ||
        buf_prefix_range(&check, prefix, prefix_len) ||
        dlock__etcd_buf_printf(&check, ",\"max_create_revision\":\"%lld\","
                                       "\"sort_order\":\"DESCEND\","
                                       "\"sort_target\":\"CREATE\","
                                       "\"keys_only\":true,\"limit\":\"%u\"",
                               (long long)(below - 1), n)) {
        dlock__etcd_buf_free(&check);
        return dlock__etcd_fail(es, DLOCK_ENOMEM, "out of memory");
    }
    return watch_drive(es, &w, &check, deadline_ms);
}

/* ---- JSON readers --------------------------------------------------------- */

json_object *dlock__etcd_get(json_object *o, const char *path)
{
    char part[64];

    while (o != NULL && *path != '\0') {
        size_t n = strcspn(path, ".");
        if (n >= sizeof part)
            return NULL;
        memcpy(part, path, n);
        part[n] = '\0';
        if (json_object_is_type(o, json_type_array)) {
            char *end;
            unsigned long i = strtoul(part, &end, 10);
            if (n == 0 || *end != '\0' || i >= json_object_array_length(o))
                return NULL;
            o = json_object_array_get_idx(o, i);
        } else if (!json_object_is_type(o, json_type_object) ||
                   !json_object_object_get_ex(o, part, &o)) {
            return NULL;
        }
        path += n + (path[n] == '.');
    }
    return o;
}

size_t dlock__etcd_len(json_object *a)
{
    return json_object_is_type(a, json_type_array) ? json_object_array_length(a)
                                                   : 0;
}

int64_t dlock__etcd_i64(json_object *o, const char *member)
{
    json_object *v = dlock__etcd_get(o, member);

    /* The gateway writes 64-bit numbers as strings; json-c parses both. */
    return v != NULL ? json_object_get_int64(v) : 0;
}
