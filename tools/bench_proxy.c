/*
 * bench_proxy.c: a TCP proxy for `dlock scenario conn-drop`. It listens on
 * 127.0.0.1 at a free port and forwards each connection to one host:port
 * (the URI's first). On demand it cuts every proxied connection with a TCP
 * reset (SO_LINGER 0: both ends see ECONNRESET at once, as after a NAT or
 * firewall drop) and resets new ones until it is told to forward again.
 * It knows nothing of the protocol it carries.
 *
 * One thread polls the listening socket, every connection pair and a wake
 * pipe; the caller's down/up requests are handed over under a mutex and
 * acknowledged, so that when bn_proxy_down() returns every connection is
 * already cut.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

#define MAX_PAIRS 128

struct pair {
    int a; /* the client's side */
    int b; /* the server's side */
};

struct bn_proxy {
    int lfd, port;
    struct sockaddr_storage target;
    socklen_t tlen;
    int wake[2];
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    bool want_down, down, stop;
    unsigned served, cut, refused;
    /* the thread's own */
    struct pair pairs[MAX_PAIRS];
    size_t npairs;
};

/* Close with a reset, not a FIN: the peer learns at once. */
static void close_reset(int fd)
{
    struct linger lg = {1, 0};

    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void drop_pair(struct bn_proxy *p, size_t i)
{
    close_reset(p->pairs[i].a);
    close_reset(p->pairs[i].b);
    p->pairs[i] = p->pairs[--p->npairs];
}

static void on_accept(struct bn_proxy *p, bool down)
{
    int a = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC), b, one = 1;

    if (a < 0)
        return;
    if (down || p->npairs == MAX_PAIRS) {
        close_reset(a);
        pthread_mutex_lock(&p->mu);
        p->refused++;
        pthread_mutex_unlock(&p->mu);
        return;
    }
    b = socket(p->target.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b < 0 || connect(b, (struct sockaddr *)&p->target, p->tlen) != 0) {
        if (b >= 0)
            close(b);
        close_reset(a);
        return;
    }
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    p->pairs[p->npairs].a = a;
    p->pairs[p->npairs].b = b;
    p->npairs++;
    pthread_mutex_lock(&p->mu);
    p->served++;
    pthread_mutex_unlock(&p->mu);
}

/* Copy what is readable on from to to; false when the pair is done. */
static bool forward(int from, int to)
{
    char buf[65536];
    ssize_t n = recv(from, buf, sizeof buf, 0);

    if (n <= 0)
        return false;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        off += w;
    }
    return true;
}

static void *proxy_main(void *arg)
{
    struct bn_proxy *p = arg;
    struct pollfd pf[2 + 2 * MAX_PAIRS];

    for (;;) {
        bool down, stop;
        size_t n = 0;

        pthread_mutex_lock(&p->mu);
        if (p->want_down && !p->down) {
            while (p->npairs > 0) {
                drop_pair(p, 0);
                p->cut++;
            }
        }
        p->down = p->want_down;
        down = p->down;
        stop = p->stop;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;

        pf[n++] = (struct pollfd){p->wake[0], POLLIN, 0};
        pf[n++] = (struct pollfd){p->lfd, POLLIN, 0};
        for (size_t i = 0; i < p->npairs; i++) {
            pf[n++] = (struct pollfd){p->pairs[i].a, POLLIN, 0};
            pf[n++] = (struct pollfd){p->pairs[i].b, POLLIN, 0};
        }
        if (poll(pf, n, 1000) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[0].revents) {
            char b[64];
            while (read(p->wake[0], b, sizeof b) > 0)
                ;
        }
        if (pf[1].revents & POLLIN)
            on_accept(p, down);
        /* Backwards, so that removing pair i leaves 0..i-1 in place. */
        size_t np = (n - 2) / 2;
        for (size_t i = np; i-- > 0;) {
            short ra = pf[2 + 2 * i].revents, rb = pf[3 + 2 * i].revents;
            bool ok = true;
            if (i >= p->npairs)
                continue;
            if (ra)
                ok = forward(p->pairs[i].a, p->pairs[i].b);
            if (ok && rb)
                ok = forward(p->pairs[i].b, p->pairs[i].a);
            if (!ok) {
                /* One side closed: pass the close on, as a reset. */
                drop_pair(p, i);
            }
        }
    }
    while (p->npairs > 0)
        drop_pair(p, 0);
    return NULL;
}

int bn_proxy_start(struct bn_proxy **out, const char *host, int port,
                   char *err, size_t errlen)
{
    struct addrinfo hints, *ai = NULL;
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    struct bn_proxy *p;
    char portstr[16];
    int rc, one = 1;

    *out = NULL;
    if ((p = calloc(1, sizeof *p)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->lfd = p->wake[0] = p->wake[1] = -1;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    snprintf(portstr, sizeof portstr, "%d", port);
    if ((rc = getaddrinfo(host, portstr, &hints, &ai)) != 0) {
        snprintf(err, errlen, "proxy: cannot resolve '%s': %s", host,
                 gai_strerror(rc));
        goto fail;
    }
    memcpy(&p->target, ai->ai_addr, ai->ai_addrlen);
    p->tlen = ai->ai_addrlen;
    freeaddrinfo(ai);

    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(p->lfd, 64) != 0 ||
        getsockname(p->lfd, (struct sockaddr *)&sa, &len) != 0 ||
        pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "proxy: cannot listen on 127.0.0.1: %s",
                 strerror(errno));
        goto fail;
    }
    p->port = ntohs(sa.sin_port);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->th, NULL, proxy_main, p) != 0) {
        snprintf(err, errlen, "proxy: cannot start its thread");
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        goto fail;
    }
    *out = p;
    return 0;
fail:
    if (p->lfd >= 0)
        close(p->lfd);
    if (p->wake[0] >= 0) {
        close(p->wake[0]);
        close(p->wake[1]);
    }
    free(p);
    return -1;
}

int bn_proxy_port(const struct bn_proxy *p)
{
    return p->port;
}

/* Ask the thread for a state and wait until it has it. */
static void set_down(struct bn_proxy *p, bool down)
{
    char b = 1;

    pthread_mutex_lock(&p->mu);
    p->want_down = down;
    if (write(p->wake[1], &b, 1) < 0) {
        /* full pipe: the thread is awake anyway */
    }
    while (p->down != down && !p->stop)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void bn_proxy_down(struct bn_proxy *p)
{
    set_down(p, true);
}

void bn_proxy_up(struct bn_proxy *p)
{
    set_down(p, false);
}

void bn_proxy_counts(struct bn_proxy *p, unsigned *served, unsigned *cut,
                     unsigned *refused)
{
    pthread_mutex_lock(&p->mu);
    *served = p->served;
    *cut = p->cut;
    *refused = p->refused;
    pthread_mutex_unlock(&p->mu);
}

void bn_proxy_stop(struct bn_proxy *p)
{
    char b = 1;

    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    if (write(p->wake[1], &b, 1) < 0) {
        /* as above */
    }
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
