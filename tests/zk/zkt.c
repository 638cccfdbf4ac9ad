/*
 * zkt.c: helpers of the zk tests (see zkt.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "zkt.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

const char *zkt_hosts(const char *uri)
{
    static char buf[1024];
    const char *p = strstr(uri, "://");
    size_t n;

    p = p != NULL ? p + 3 : uri;
    n = strcspn(p, "/?");
    snprintf(buf, sizeof buf, "%.*s", (int)n, p);
    return buf;
}

int zkt_port(const char *uri)
{
    const char *h = zkt_hosts(uri), *colon = strchr(h, ':');
    return colon != NULL ? atoi(colon + 1) : 2181;
}

static void quiet(const char *msg)
{
    (void)msg;
}

static void connected_watcher(zhandle_t *zh, int type, int state,
                              const char *path, void *ctx)
{
    (void)zh;
    (void)type;
    (void)path;
    (void)ctx;
    (void)state;
}

zhandle_t *zkt_connect(const char *hosts)
{
    zhandle_t *zh = zookeeper_init2(hosts, connected_watcher, 10000, NULL,
                                    NULL, 0, quiet);
    int64_t end = now_ms() + 10000;

    if (zh == NULL)
        return NULL;
    while (zoo_state(zh) != ZOO_CONNECTED_STATE && now_ms() < end)
        nap(10);
    if (zoo_state(zh) != ZOO_CONNECTED_STATE) {
        zookeeper_close(zh);
        return NULL;
    }
    return zh;
}

int zkt_children(zhandle_t *zh, const char *path, struct String_vector *out)
{
    struct String_vector v = {0, NULL};
    int rc = zoo_get_children(zh, path, 0, &v), n;

    if (out != NULL) {
        out->count = 0;
        out->data = NULL;
    }
    if (rc == ZNONODE)
        return 0;
    if (rc != ZOK) {
        fprintf(stderr, "zkt: get_children %s: %s\n", path, zerror(rc));
        return -1;
    }
    n = v.count;
    if (out != NULL)
        *out = v;
    else
        deallocate_String_vector(&v);
    return n;
}

bool zkt_wait_children(zhandle_t *zh, const char *path, int want,
                       uint32_t timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    int n;

    while ((n = zkt_children(zh, path, NULL)) != want && now_ms() < end)
        nap(20);
    if (n != want)
        fprintf(stderr, "zkt: %s has %d children, want %d\n", path, n, want);
    return n == want;
}

long zkt_mntr(int port, const char *key)
{
    struct sockaddr_in a;
    char buf[8192], *line;
    size_t len = 0, klen = strlen(key);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    long v = -1;

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        write(fd, "mntr", 4) != 4) {
        close(fd);
        return -1;
    }
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t got;
        if (poll(&p, 1, 3000) != 1)
            break;
        got = read(fd, buf + len, sizeof buf - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    for (line = buf; line != NULL && *line != '\0';) {
        if (strncmp(line, key, klen) == 0 &&
            (line[klen] == '\t' || line[klen] == ' '))
            return strtol(line + klen + 1, NULL, 10);
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return v;
}

int zkt_ctl(const char *action, const char *kind, int index)
{
    const char *ctl = getenv("DLOCK_TEST_SERVERCTL");
    char cmd[1024];
    int rc;

    if (ctl == NULL) {
        fprintf(stderr, "zkt: DLOCK_TEST_SERVERCTL is not set (run under "
                        "tests/servers/with-servers.sh)\n");
        return -1;
    }
    snprintf(cmd, sizeof cmd, "'%s' %s %s %d", ctl, action, kind, index);
    rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "zkt: %s: exit %d\n", cmd, rc);
    return rc;
}

/* ---- the log hook -------------------------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[16384];
static size_t log_len;

void zkt_log(int level, const char *msg, void *payload)
{
    size_t n = strlen(msg);

    (void)level;
    (void)payload;
    fprintf(stderr, "  log: %s\n", msg);
    pthread_mutex_lock(&log_mu);
    if (log_len + n + 2 < sizeof log_buf) {
        memcpy(log_buf + log_len, msg, n);
        log_len += n;
        log_buf[log_len++] = '\n';
        log_buf[log_len] = '\0';
    }
    pthread_mutex_unlock(&log_mu);
}

bool zkt_logged(const char *needle)
{
    bool found;

    pthread_mutex_lock(&log_mu);
    found = strstr(log_buf, needle) != NULL;
    pthread_mutex_unlock(&log_mu);
    return found;
}

void zkt_log_reset(void)
{
    pthread_mutex_lock(&log_mu);
    log_len = 0;
    log_buf[0] = '\0';
    pthread_mutex_unlock(&log_mu);
}

/* ---- the cutting proxy --------------------------------------------------- */

struct zkt_pipe {
    struct zkt_proxy *px;
    int cfd, sfd;
    atomic_int refs;
    atomic_bool mute; /* drop what the server says from now on */
};

struct zkt_proxy {
    int lfd, port, server_port;
    pthread_t acceptor;
    pthread_mutex_t mu;
    int armed_op;     /* 0: not armed */
    int skip;         /* requests of armed_op to let through first */
    bool forward;
    int cuts;
    atomic_int live;  /* connections still open */
};

static bool full_read(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got <= 0)
            return false;
        p += got;
        n -= (size_t)got;
    }
    return true;
}

static bool full_write(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t put = write(fd, p, n);
        if (put <= 0)
            return false;
        p += put;
        n -= (size_t)put;
    }
    return true;
}

static void pipe_unref(struct zkt_pipe *pp)
{
    if (atomic_fetch_sub(&pp->refs, 1) == 1) {
        struct zkt_proxy *px = pp->px;
        close(pp->cfd);
        close(pp->sfd);
        free(pp);
        atomic_fetch_sub(&px->live, 1);
    }
}

static void pipe_cut(struct zkt_pipe *pp)
{
    shutdown(pp->cfd, SHUT_RDWR);
    shutdown(pp->sfd, SHUT_RDWR);
}

/* Server to client: bytes as they come. */
static void *pipe_down(void *arg)
{
    struct zkt_pipe *pp = arg;
    char buf[65536];
    ssize_t got;

    while ((got = read(pp->sfd, buf, sizeof buf)) > 0)
        if (!atomic_load(&pp->mute) &&
            !full_write(pp->cfd, buf, (size_t)got))
            break;
    pipe_cut(pp);
    pipe_unref(pp);
    return NULL;
}

/* Client to server: frame by frame (4-byte length, then the request; the
 * first frame is the ConnectRequest, the others start with xid and type). */
static void *pipe_up(void *arg)
{
    struct zkt_pipe *pp = arg;
    struct zkt_proxy *px = pp->px;
    bool first = true;

    for (;;) {
        uint32_t nlen, len;
        char *frame;
        int op = -1;
        bool cut = false, forward = true;

        if (!full_read(pp->cfd, &nlen, 4))
            break;
        len = ntohl(nlen);
        if (len > (1u << 24) || (frame = malloc(len + 4)) == NULL)
            break;
        memcpy(frame, &nlen, 4);
        if (!full_read(pp->cfd, frame + 4, len)) {
            free(frame);
            break;
        }
        if (!first && len >= 8) {
            uint32_t t;
            memcpy(&t, frame + 8, 4);
            op = (int)ntohl(t);
        }
        first = false;
        pthread_mutex_lock(&px->mu);
        if (px->armed_op != 0 && op == px->armed_op && px->skip > 0) {
            px->skip--;
        } else if (px->armed_op != 0 && op == px->armed_op) {
            cut = true;
            forward = px->forward;
            px->armed_op = 0;
            px->cuts++;
        }
        pthread_mutex_unlock(&px->mu);
        if (cut)
            atomic_store(&pp->mute, true); /* the answer must not get back */
        if (forward && !full_write(pp->sfd, frame, len + 4)) {
            free(frame);
            break;
        }
        free(frame);
        if (cut) {
            /* Let the server apply it, then drop the connection before the
             * answer can get back. */
            if (forward)
                nap(300);
            break;
        }
    }
    pipe_cut(pp);
    pipe_unref(pp);
    return NULL;
}

static void *proxy_accept(void *arg)
{
    struct zkt_proxy *px = arg;

    for (;;) {
        struct sockaddr_in a;
        struct zkt_pipe *pp;
        pthread_t t;
        int cfd = accept(px->lfd, NULL, NULL), sfd;

        if (cfd < 0)
            return NULL; /* stopped */
        sfd = socket(AF_INET, SOCK_STREAM, 0);
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)px->server_port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof a) != 0 ||
            (pp = calloc(1, sizeof *pp)) == NULL) {
            close(cfd);
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        pp->px = px;
        pp->cfd = cfd;
        pp->sfd = sfd;
        atomic_init(&pp->refs, 2);
        atomic_init(&pp->mute, false);
        atomic_fetch_add(&px->live, 1);
        pthread_create(&t, NULL, pipe_up, pp);
        pthread_detach(t);
        pthread_create(&t, NULL, pipe_down, pp);
        pthread_detach(t);
    }
}

struct zkt_proxy *zkt_proxy_start(int server_port)
{
    struct zkt_proxy *px = calloc(1, sizeof *px);
    struct sockaddr_in a;
    socklen_t alen = sizeof a;

    if (px == NULL)
        return NULL;
    px->server_port = server_port;
    pthread_mutex_init(&px->mu, NULL);
    px->lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (px->lfd < 0 || bind(px->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(px->lfd, 16) != 0 ||
        getsockname(px->lfd, (struct sockaddr *)&a, &alen) != 0) {
        if (px->lfd >= 0)
            close(px->lfd);
        free(px);
        return NULL;
    }
    px->port = ntohs(a.sin_port);
    pthread_create(&px->acceptor, NULL, proxy_accept, px);
    return px;
}

int zkt_proxy_port(const struct zkt_proxy *px)
{
    return px->port;
}

void zkt_proxy_arm(struct zkt_proxy *px, int opcode, bool forward)
{
    zkt_proxy_arm_after(px, opcode, forward, 0);
}

void zkt_proxy_arm_after(struct zkt_proxy *px, int opcode, bool forward,
                         int skip)
{
    pthread_mutex_lock(&px->mu);
    px->armed_op = opcode;
    px->skip = skip;
    px->forward = forward;
    pthread_mutex_unlock(&px->mu);
}

int zkt_proxy_cuts(struct zkt_proxy *px)
{
    int n;
    pthread_mutex_lock(&px->mu);
    n = px->cuts;
    pthread_mutex_unlock(&px->mu);
    return n;
}

/* Stop accepting, and wait (5 s at most) for the connections to end with
 * their clients: close those first. */
void zkt_proxy_stop(struct zkt_proxy *px)
{
    shutdown(px->lfd, SHUT_RDWR);
    pthread_join(px->acceptor, NULL);
    for (int i = 0; i < 500 && atomic_load(&px->live) > 0; i++)
        nap(10);
    close(px->lfd);
    pthread_mutex_destroy(&px->mu);
    free(px);
}

void *zkt_bg_acquire(void *arg)
{
    struct zkt_bg_acquire *b = arg;
    b->rc = dlock_acquire(b->lk, b->timeout_ms);
    return NULL;
}
