/*
 * zkt.h: what the zk tests share: a direct ZooKeeper connection (the bare
 * C client, to look at the nodes dlock leaves on the server), the servers'
 * four-letter-word statistics, the server control script, and a log hook
 * that keeps dlock's log lines for assertions.
 */
#ifndef DLOCK_TEST_ZKT_H
#define DLOCK_TEST_ZKT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

#include "dlock/dlock.h"

/* "h1:p1,h2:p2" of a zk:// URI (scheme, path and query removed). */
const char *zkt_hosts(const char *uri);
/* A connected bare client, or NULL after 10 s. Close with zookeeper_close. */
zhandle_t *zkt_connect(const char *hosts);
/* Children of path: their number (0 when path does not exist), or -1. The
 * names go to out (if not NULL), to free with deallocate_String_vector. */
int zkt_children(zhandle_t *zh, const char *path, struct String_vector *out);
/* Poll until path has `want` children, at most timeout_ms. */
bool zkt_wait_children(zhandle_t *zh, const char *path, int want,
                       uint32_t timeout_ms);
/* A number from the `mntr` four-letter word of the server at port, or -1. */
long zkt_mntr(int port, const char *key);
/* The client port of the first server of a URI. */
int zkt_port(const char *uri);
/* $DLOCK_TEST_SERVERCTL ACTION KIND [INDEX]: 0 on success. */
int zkt_ctl(const char *action, const char *kind, int index);

/*
 * A TCP proxy between a client and one ZooKeeper server that reads the
 * client's requests frame by frame and, when armed, cuts the connection at
 * the next request of one type (opcode: 15 create2, 2 delete, 8 get
 * children...): after forwarding it (the server applies it, the answer is
 * lost) or instead of forwarding it. The client reconnects through the
 * proxy, which forwards normally again.
 */
struct zkt_proxy;
struct zkt_proxy *zkt_proxy_start(int server_port);
int zkt_proxy_port(const struct zkt_proxy *p);
void zkt_proxy_arm(struct zkt_proxy *p, int opcode, bool forward);
/* The same, letting `skip` requests of that type through first. */
void zkt_proxy_arm_after(struct zkt_proxy *p, int opcode, bool forward,
                         int skip);
int zkt_proxy_cuts(struct zkt_proxy *p);
void zkt_proxy_stop(struct zkt_proxy *p);

/* A dlock_acquire() on a thread of its own: pthread_create(&t, NULL,
 * zkt_bg_acquire, &b) with b = {lk, timeout_ms, sentinel}; b.rc is the
 * result once joined. */
struct zkt_bg_acquire {
    dlock_lock *lk;
    uint32_t timeout_ms;
    int rc;
};
void *zkt_bg_acquire(void *arg);

/* A log hook that keeps the last lines (thread-safe). */
void zkt_log(int level, const char *msg, void *payload);
bool zkt_logged(const char *needle);
void zkt_log_reset(void);

#endif
