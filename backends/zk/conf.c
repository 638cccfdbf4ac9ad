/*
 * conf.c: the zk:// URI read into a context (zk.h's struct zk_ctx): the
 * connect string, where lock nodes live (chroot + base= + namespace=), the
 * session timeout, and the rule tying lease= to it. Also a lock's node path.
 * No I/O: connecting is conn.c's, the mode is picked by core and set by
 * ctx_open() in zk.c.
 *
 * Divisions: paths the user gives; the context; names; the lease.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zk.h"

/* ---- paths the user gives ----------------------------------------------- */

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

void dlock__zk_ctx_free(struct zk_ctx *x)
{
    if (x == NULL)
        return;
    pthread_mutex_destroy(&x->mu);
    free(x->hosts);
    free(x);
}

/* ---- the context -------------------------------------------------------- */

/* Read the URI into a new context: hosts, prefix, session timeout. The mode
 * is core's (mode=, in uri->mode): ctx_open() sets x->mode. */
int dlock__zk_parse(struct zk_ctx **out, const struct dlock_uri *u, char *err,
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
     * the session (see recipe.c). */
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
        size_t sl =
            dlock_name_segment(seg, ZK_SEGMENT_MAX, u->ns, strlen(u->ns));
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
    if (rc == DLOCK_OK && (strcmp(x->prefix, "/zookeeper") == 0 ||
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
        dlock__zk_ctx_free(x);
        return rc;
    }
    *out = x;
    return DLOCK_OK;
}

/* ---- names -------------------------------------------------------------- */

/* The lock's node: prefix + "/" + the name as one safe segment
 * (dlock_name_segment: no '/', no leading '.', no control characters;
 * over-long names end in a SHA-256). Returns the length. */
size_t dlock__zk_dir(const struct zk_ctx *x, char *out, const char *name,
                     size_t len)
{
    size_t n = strlen(x->prefix);

    memcpy(out, x->prefix, n);
    out[n++] = '/';
    return n + dlock_name_segment(out + n, ZK_SEGMENT_MAX, name, len);
}

/* ---- the lease ---------------------------------------------------------- */

/* The lease (how often the watchdog proves the session alive: a third of
 * it) must leave dlock_held() covered between renewals, each of which
 * vouches for one session timeout: at most twice the session timeout. */
int dlock__zk_lease_ok(uint32_t lease_ms, int session_ms)
{
    return session_ms > 0 && lease_ms <= 2u * (uint32_t)session_ms;
}
