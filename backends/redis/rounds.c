/*
 * rounds.c: Redlock's nodes, one connection per node per session, and the
 * rounds that speak to all of them at once. A round sends the same
 * commands to every live node, then reads the replies of all of them as
 * they come (poll on all sockets) until one shared deadline, node_timeout
 * after the start: so N nodes cost one round trip of the slowest, not N,
 * and a dead or paused node costs at most node_timeout. A node that did
 * not answer in time is disconnected (its replies would come later, out of
 * step) and retried with backoff on a later call.
 *
 * What such a node was sent may still land: a SET of a failed acquire
 * would then hold the name there for a whole lease. So the caller may owe
 * the node a release (the owner-checked release script: sent late it
 * deletes only our own key, never another holder's): the owed releases go
 * first, pipelined ahead of the commands, in every round the node is sent
 * until it answers them, so they cost no round trip and no deadline of
 * their own; at most RD_OWED_MAX per node (the oldest beyond that is left
 * to its lease). Closing the session pays what it can within
 * node_timeout. A node that restarted in between answers 0: paid.
 *
 * What a round's answers mean (a majority, the validity, which nodes
 * count) is redlock.c's and restart.c's; connecting is conn.c's.
 * Divisions: node state; connecting; rounds.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd.h"

/* ---- node state ------------------------------------------------------------------ */

static void node_down(struct dlock__rd_node *nd, const char *why)
{
    /* why may point into nd->rc: copy it before the free. */
    if (why != nd->err)
        snprintf(nd->err, sizeof nd->err, "%s", why);
    if (nd->rc != NULL) {
        redisFree(nd->rc);
        nd->rc = NULL;
    }
    nd->backoff = nd->backoff == 0 ? 100 : nd->backoff * 2;
    if (nd->backoff > 2000)
        nd->backoff = 2000;
    nd->retry_at = dlock_now_ms() + nd->backoff;
    nd->refused = false;
}

static void owed_free(struct dlock__rd_owed *o)
{
    dlock__rd_keys_free(&o->keys);
    free(o->owner);
}

void dlock__rd_nodes_close(struct dlock__rd_session *rs)
{
    if (rs->nodes != NULL)
        dlock__rd_pay_owed(rs);
    for (size_t i = 0; rs->nodes != NULL && i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        if (nd->rc != NULL)
            redisFree(nd->rc);
        for (size_t k = 0; k < nd->got; k++)
            freeReplyObject(nd->rep[k]);
        free(nd->rep);
        for (size_t k = 0; k < nd->nowed; k++)
            owed_free(&nd->owed[k]);
        free(nd->owed);
    }
    free(rs->nodes);
    rs->nodes = NULL;
}

const char *dlock__rd_nodes_why(const struct dlock__rd_session *rs,
                                char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; i < rs->nnodes; i++)
        if (rs->nodes[i].rc == NULL && rs->nodes[i].err[0] != '\0') {
            snprintf(buf, cap, " (%s)", rs->nodes[i].err);
            break;
        }
    return buf;
}

/* ---- connecting ------------------------------------------------------------------- */

/*
 * Reconnect the nodes that are down and due, reading who each one is.
 * With fewer than a majority connected every call would fail: then every
 * node is tried at once, backoff or not (a round that timed out on a
 * loaded machine must not make the next call fail unsent).
 */
void dlock__rd_reconnect(struct dlock__rd_session *rs, bool force)
{
    const struct dlock__rd_conf *cf = rs->cf;
    struct pollfd pf[RD_NODES_MAX];
    int64_t now = dlock_now_ms();
    char err[400], note[256];
    size_t up = 0;
    int code;

    /* A connection between rounds has nothing to say: anything to read
     * is its end (a node that restarted closed it). Find those now, in
     * one poll that does not wait, rather than lose the node for the
     * coming round. */
    for (size_t i = 0; i < rs->nnodes; i++) {
        pf[i].fd = rs->nodes[i].rc != NULL ? rs->nodes[i].rc->fd : -1;
        pf[i].events = POLLIN | POLLRDHUP;
        pf[i].revents = 0;
    }
    if (poll(pf, (nfds_t)rs->nnodes, 0) > 0)
        for (size_t i = 0; i < rs->nnodes; i++)
            if (pf[i].revents != 0) {
                node_down(&rs->nodes[i], "the node closed the connection");
                rs->nodes[i].retry_at = 0; /* at once */
            }
    for (size_t i = 0; i < rs->nnodes; i++)
        up += rs->nodes[i].rc != NULL;
    if (up < rs->quorum)
        force = true;
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        struct dlock__rd_info info;
        if (nd->rc != NULL || (!force && now < nd->retry_at))
            continue;
        nd->rc = dlock__rd_connect(cf, &cf->hosts[i], cf->node_timeout_ms,
                                   rs->m, rs->sha, &info, err, sizeof err,
                                   &code);
        if (nd->rc == NULL) {
            node_down(nd, err);
            nd->refused = code == DLOCK_EAUTH;
            continue;
        }
        if (info.run_id[0] == '\0' && cf->restart_delay_ms != 0) {
            snprintf(err, sizeof err,
                     "%s:%d: %s; the delayed restart needs run_id and "
                     "uptime (allow INFO, or restart_delay=0 where every "
                     "write is persisted)",
                     cf->hosts[i].host, cf->hosts[i].port, info.why);
            node_down(nd, err);
            continue;
        }
        dlock__rd_ident_seen(rs->x, i, &info, note, sizeof note);
        if (note[0] != '\0')
            snprintf(rs->note, sizeof rs->note, "%s", note);
        nd->backoff = 0;
    }
}

int dlock__rd_nodes_open(struct dlock__rd_session *rs, char *err,
                         size_t errlen)
{
    size_t up = 0;

    rs->nnodes = rs->cf->nhosts;
    rs->quorum = rs->nnodes / 2 + 1;
    rs->nodes = calloc(rs->nnodes, sizeof *rs->nodes);
    if (rs->nodes == NULL)
        return dlock_errorf(err, errlen, DLOCK_ENOMEM, "out of memory");
    dlock__rd_reconnect(rs, true);
    for (size_t i = 0; i < rs->nnodes; i++)
        up += rs->nodes[i].rc != NULL;
    if (up < rs->quorum) {
        const char *why = "";
        int code = DLOCK_ECONNECT;
        /* A node that refused the credentials says the most: the URI's
         * password is wrong, and waiting will not mend it. */
        for (size_t i = 0; i < rs->nnodes; i++)
            if (rs->nodes[i].rc == NULL &&
                (why[0] == '\0' || rs->nodes[i].refused)) {
                why = rs->nodes[i].err;
                if (rs->nodes[i].refused) {
                    code = DLOCK_EAUTH;
                    break;
                }
            }
        dlock_errorf(err, errlen, code,
                     "%zu of %zu Redlock nodes reachable, a majority is "
                     "%zu (%s)",
                     up, rs->nnodes, rs->quorum, why);
        dlock__rd_nodes_close(rs);
        return code;
    }
    return DLOCK_OK;
}

/* ---- rounds ------------------------------------------------------------------------ */

void dlock__rd_round_free(struct dlock__rd_session *rs)
{
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        for (size_t k = 0; k < nd->got; k++)
            freeReplyObject(nd->rep[k]);
        nd->got = 0;
        nd->sent = false;
    }
}

int dlock__rd_owe(struct dlock__rd_session *rs, size_t i,
                  const struct dlock__rd_keys *keys, const char *owner,
                  size_t owner_len)
{
    struct dlock__rd_node *nd = &rs->nodes[i];
    struct dlock__rd_owed o;

    for (size_t k = 0; k < nd->nowed; k++)
        if (nd->owed[k].owner_len == owner_len &&
            memcmp(nd->owed[k].owner, owner, owner_len) == 0 &&
            nd->owed[k].keys.lock.len == keys->lock.len &&
            memcmp(nd->owed[k].keys.lock.p, keys->lock.p, keys->lock.len) ==
                0)
            return 0;
    memset(&o, 0, sizeof o);
    o.owner = malloc(owner_len + 1);
    if (o.owner == NULL ||
        dlock__rd_buf_set(&o.keys.lock, keys->lock.p, keys->lock.len, "", 0,
                          "", 0) != 0 ||
        dlock__rd_buf_set(&o.keys.channel, keys->channel.p,
                          keys->channel.len, "", 0, "", 0) != 0) {
        owed_free(&o);
        return -1;
    }
    memcpy(o.owner, owner, owner_len);
    o.owner[owner_len] = '\0';
    o.owner_len = owner_len;
    if (nd->owed == NULL) {
        nd->owed = calloc(RD_OWED_MAX, sizeof *nd->owed);
        if (nd->owed == NULL) {
            owed_free(&o);
            return -1;
        }
    }
    if (nd->nowed == RD_OWED_MAX) { /* the oldest is left to its lease */
        owed_free(&nd->owed[0]);
        memmove(&nd->owed[0], &nd->owed[1],
                (RD_OWED_MAX - 1) * sizeof *nd->owed);
        nd->nowed--;
    }
    nd->owed[nd->nowed++] = o;
    return 0;
}

/* Drop the owed releases the node answered in the last round. */
static void owed_settle(struct dlock__rd_node *nd)
{
    size_t kept = 0;

    for (size_t k = 0; k < nd->nowed; k++) {
        if (nd->owed[k].done)
            owed_free(&nd->owed[k]);
        else
            nd->owed[kept++] = nd->owed[k];
    }
    nd->nowed = kept;
    nd->npre = nd->pre_got = 0;
}

/* Write the owed releases, then cmds, to every live node; a node that
 * cannot take them is down. */
static int round_send(struct dlock__rd_session *rs, struct dlock__rd_cmd *cmds,
                      size_t ncmds)
{
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        int done = 0;
        nd->got = 0;
        nd->sent = false;
        nd->missed = false;
        nd->npre = nd->pre_got = 0;
        if (nd->rc == NULL)
            continue;
        if (nd->repcap < ncmds) {
            redisReply **p = realloc(nd->rep, ncmds * sizeof *p);
            if (p == NULL)
                return -1;
            nd->rep = p;
            nd->repcap = ncmds;
        }
        for (size_t k = 0; k < nd->nowed; k++) {
            struct dlock__rd_cmd c;
            dlock__rd_cmd_evalsha(&c, rs->m->script[RD_SC_RELEASE],
                                  rs->sha[RD_SC_RELEASE], &nd->owed[k].keys,
                                  nd->owed[k].owner, nd->owed[k].owner_len,
                                  "");
            redisAppendCommandArgv(nd->rc, c.argc, c.argv, c.lens);
            nd->owed[k].done = false;
        }
        nd->npre = nd->nowed;
        for (size_t k = 0; k < ncmds; k++)
            redisAppendCommandArgv(nd->rc, cmds[k].argc, cmds[k].argv,
                                   cmds[k].lens);
        while (!done)
            if (dlock__rd_buffer_write(nd->rc, &done) != REDIS_OK)
                break;
        if (!done) {
            node_down(nd, nd->rc->errstr);
            nd->missed = true; /* a part may have gone out */
            nd->npre = 0;
            continue;
        }
        nd->sent = true;
    }
    return 0;
}

/* Read the answers of the nodes sent to, as they come, until each has
 * answered all ncmds or deadline_ns has passed. */
static void round_read(struct dlock__rd_session *rs, size_t ncmds,
                       uint64_t deadline_ns)
{
    struct pollfd pf[RD_NODES_MAX];
    size_t map[RD_NODES_MAX];

    for (bool last = false; !last;) {
        size_t k = 0;
        uint64_t now = dlock_now_ns();
        int ms = 0;
        for (size_t i = 0; i < rs->nnodes; i++) {
            struct dlock__rd_node *nd = &rs->nodes[i];
            if (!nd->sent || (nd->pre_got == nd->npre && nd->got == ncmds))
                continue;
            pf[k].fd = nd->rc->fd;
            pf[k].events = POLLIN;
            pf[k].revents = 0;
            map[k++] = i;
        }
        if (k == 0)
            break;
        /* Past the deadline, one more look without waiting: on a loaded
         * machine this thread can be off the CPU past the deadline while
         * the answers sit in the sockets, and a node is down only if it
         * did not answer. (Late answers are safe: the validity counts the
         * time the round took.) */
        if (now >= deadline_ns)
            last = true;
        else
            ms = (int)((deadline_ns - now + 999999) / 1000000);
        if (poll(pf, (nfds_t)k, ms) < 0 && errno != EINTR)
            break;
        for (size_t j = 0; j < k; j++) {
            struct dlock__rd_node *nd = &rs->nodes[map[j]];
            redisReply *r = NULL;
            if (pf[j].revents == 0)
                continue;
            if (redisBufferRead(nd->rc) != REDIS_OK) {
                node_down(nd, nd->rc->errstr[0] ? nd->rc->errstr
                                                : "connection lost");
                nd->sent = false;
                nd->missed = true;
                continue;
            }
            while ((nd->pre_got < nd->npre || nd->got < ncmds) &&
                   redisGetReplyFromReader(nd->rc, (void **)&r) ==
                       REDIS_OK &&
                   r != NULL) {
                if (nd->pre_got < nd->npre) {
                    /* An owed release: an integer is its answer (a
                     * NOSCRIPT error leaves it owed: see below). */
                    nd->owed[nd->pre_got++].done =
                        r->type == REDIS_REPLY_INTEGER;
                    freeReplyObject(r);
                } else {
                    nd->rep[nd->got++] = r;
                }
                r = NULL;
            }
        }
    }
}

int dlock__rd_round(struct dlock__rd_session *rs, struct dlock__rd_cmd *cmds,
                    size_t ncmds, uint64_t deadline_ns)
{
    uint64_t start = dlock_now_ns();
    int full = 0;

    if (round_send(rs, cmds, ncmds) != 0)
        return -1;
    round_read(rs, ncmds, deadline_ns);
    for (size_t i = 0; i < rs->nnodes; i++) {
        struct dlock__rd_node *nd = &rs->nodes[i];
        if (!nd->sent) {
            owed_settle(nd);
            continue;
        }
        if (nd->pre_got == nd->npre && nd->got == ncmds) {
            owed_settle(nd);
            full++;
            for (size_t k = 0; k < ncmds; k++)
                if (dlock__rd_noscript(nd->rep[k])) {
                    /* Forgotten scripts: reconnect reloads them. */
                    node_down(nd, "NOSCRIPT");
                    nd->retry_at = 0;
                    break;
                }
        } else {
            char why[64];
            snprintf(why, sizeof why, "no answer within %llu ms",
                     (unsigned long long)(deadline_ns > start
                                              ? (deadline_ns - start) / 1000000
                                              : 0));
            for (size_t k = 0; k < nd->got; k++)
                freeReplyObject(nd->rep[k]);
            nd->got = 0;
            nd->sent = false;
            nd->missed = true;
            owed_settle(nd);
            node_down(nd, why);
        }
    }
    return full;
}

void dlock__rd_pay_owed(struct dlock__rd_session *rs)
{
    bool owed = false;

    for (size_t i = 0; i < rs->nnodes; i++)
        if (rs->nodes[i].nowed > 0) {
            owed = true;
            if (rs->nodes[i].rc == NULL)
                rs->nodes[i].retry_at = 0; /* once, now */
        }
    if (!owed)
        return;
    dlock__rd_reconnect(rs, false);
    /* No commands: the round carries only what is owed. */
    dlock__rd_round(rs, NULL, 0,
                    dlock_now_ns() +
                        (uint64_t)rs->cf->node_timeout_ms * 1000000u);
    dlock__rd_round_free(rs);
}
