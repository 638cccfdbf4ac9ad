/*
 * conn.c: the postgres backend's connections and the statement runner.
 *
 * Every call is asynchronous underneath (nonblocking socket, pipeline mode,
 * poll with a deadline), so a server that is down, paused or unreachable
 * costs at most timeout= per call and never hangs a thread; statements that
 * belong together go out in one round trip (libpq pipeline mode). The
 * statements of the modes that ask for it are prepared once per connection
 * (see "prepared statements").
 *
 * It leaves what a mode sets up on a new connection to that mode (its
 * on_connect, called through the mode object), creating tables to
 * schema.c, and the LISTEN connection to listen.c, which connects with
 * dlock__pg_connect_raw(). Below it is only conf.c.
 *
 * Divisions: connecting; a session's connection; prepared statements;
 * running statements.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- connecting -------------------------------------------------------- */

/* Wait until fd has one of events, or the deadline: 1, 0 (time is up) or
 * -1 (poll failed). */
static int pg_poll(int fd, short events, int64_t deadline)
{
    struct pollfd p = {fd, events, 0};

    for (;;) {
        int ms = -1, n;
        if (deadline != INT64_MAX) {
            int64_t left = deadline - dlock_now_ms();
            if (left <= 0)
                return 0;
            ms = left > INT_MAX ? INT_MAX : (int)left;
        }
        n = poll(&p, 1, ms);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static void pg_quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* NOTICEs and WARNINGs (e.g. "relation exists, skipping") */
}

/*
 * A failed connection's code from its message, which libpq writes with the
 * SQLSTATE when the verbosity is PQERRORS_VERBOSE ("FATAL:  28P01: password
 * authentication failed ..." then "LOCATION: ..."): the only place libpq
 * gives a connection's SQLSTATE. Takes the SQLSTATE and the location out
 * of msg, so the message reads as at the default verbosity.
 */
static int pg_connect_code(char *msg)
{
    char *f = strstr(msg, "FATAL:  "), *loc = strstr(msg, "\nLOCATION:");
    int code = DLOCK_ECONNECT;

    if (loc != NULL)
        *loc = '\0';
    if (f != NULL &&
        strspn(f + 8, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") == 5 &&
        strncmp(f + 13, ": ", 2) == 0) {
        /* Class 28: invalid authorization specification. */
        if (strncmp(f + 8, "28P01", 5) == 0 || strncmp(f + 8, "28000", 5) == 0)
            code = DLOCK_EAUTH;
        memmove(f + 8, f + 15, strlen(f + 15) + 1);
    } else if (strstr(msg, "password authentication failed") != NULL ||
               strstr(msg, "no pg_hba.conf entry") != NULL) {
        /* Several hosts: libpq's blocking connect cannot be made verbose
         * first, so the message has no SQLSTATE; these are libpq's and the
         * server's words for 28P01 and 28000 (in English, the server's
         * default lc_messages). */
        code = DLOCK_EAUTH;
    }
    return code;
}

PGconn *dlock__pg_connect_raw(const struct pg_conf *cf, int64_t deadline,
                              char *err, size_t errlen, int *code)
{
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    char line[512], msg[1024];
    PGconn *c;
    int rc;

    if (code != NULL)
        *code = DLOCK_ECONNECT;
    if (cf->multi_host) {
        /* libpq's blocking connect tries the hosts in turn and gives each
         * connect_timeout; our own poll loop below cannot skip a host. It
         * cannot be made verbose first: pg_connect_code() knows a refused
         * login by its words. */
        c = PQconnectdbParams(cf->kw, cf->val, 0);
    } else {
        c = PQconnectStartParams(cf->kw, cf->val, 0);
        if (c != NULL)
            PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
        while (c != NULL && PQstatus(c) != CONNECTION_BAD &&
               st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
            int w = 1;
            if (PQsocket(c) >= 0)
                w = pg_poll(PQsocket(c),
                            st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                            deadline);
            if (w == 0) {
                PQfinish(c);
                dlock_errorf(err, errlen, DLOCK_ECONNECT,
                             "connect: no answer within %u ms",
                             cf->timeout_ms);
                return NULL;
            }
            st = PQconnectPoll(c);
        }
    }
    if (c == NULL) {
        dlock_errorf(err, errlen, DLOCK_ENOMEM, "connect: out of memory");
        if (code != NULL)
            *code = DLOCK_ENOMEM;
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(c));
        rc = pg_connect_code(msg);
        dlock__pg_oneline(line, sizeof line, msg);
        dlock_errorf(err, errlen, rc, "connect: %s%s", line,
                     rc == DLOCK_EAUTH ? " (check the URI's user and password)"
                                       : "");
        if (code != NULL)
            *code = rc;
        PQfinish(c);
        return NULL;
    }
    PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
    PQsetNoticeProcessor(c, pg_quiet, NULL);
    return c;
}

/* ---- a session's connection -------------------------------------------- */

/* A server that ends an idle connection (shutdown, pg_terminate_backend)
 * sends a FATAL first; libpq hands it to the notice processor. Keep it for
 * the message that reports the lost connection. */
static void pg_notice(void *arg, const char *msg)
{
    struct pg_session *s = arg;

    if (strncmp(msg, "FATAL:", 6) == 0)
        dlock__pg_oneline(s->fatal, sizeof s->fatal, msg + 6);
}

/* The connection's failure in one line, with the server's last words. */
static void pg_set_why(struct pg_session *s, const char *why)
{
    char line[256];

    dlock__pg_oneline(line, sizeof line, why);
    if (s->fatal[0] != '\0')
        snprintf(s->why, sizeof s->why, "%s (%s)", s->fatal, line);
    else
        snprintf(s->why, sizeof s->why, "%s", line);
}

static void pg_prep_clear(struct pg_session *s);

void dlock__pg_drop(struct pg_session *s)
{
    pg_prep_clear(s); /* prepared statements end with the connection */
    if (s->conn != NULL) {
        dlock_session_watch(&s->base, -1);
        PQfinish(s->conn);
    }
    s->conn = NULL;
}

int dlock__pg_setup(struct pg_session *s, const struct pg_q *q,
                    int64_t deadline, char *err, size_t errlen)
{
    struct pg_res res;
    int rc = dlock__pg_exec(s, q, 1, deadline, &res);

    if (rc == PG_SQLERR)
        rc = dlock_errorf(err, errlen, DLOCK_ERROR, "session set-up: %s",
                          PQresultErrorField(res.r[res.failed],
                                             PG_DIAG_MESSAGE_PRIMARY));
    else if (rc != DLOCK_OK)
        dlock_errorf(err, errlen, rc, "session set-up: %s", s->why);
    dlock__pg_res_clear(&res);
    return rc;
}

int dlock__pg_connect(struct pg_session *s, char *err, size_t errlen)
{
    const struct pg_conf *cf = s->cf;
    int64_t deadline = dlock__pg_deadline(cf);
    PGconn *c;
    int rc;

    dlock__pg_drop(s);
    c = dlock__pg_connect_raw(cf, deadline, err, errlen, &rc);
    if (c == NULL)
        return rc;
    if (PQsetnonblocking(c, 1) != 0 || PQenterPipelineMode(c) != 1) {
        dlock__pg_oneline(s->why, sizeof s->why, PQerrorMessage(c));
        PQfinish(c);
        return dlock_errorf(err, errlen, DLOCK_ERROR, "connect: %s", s->why);
    }
    PQsetNoticeProcessor(c, pg_notice, s);
    s->conn = c;
    s->gen++;
    s->backend_pid = 0;
    s->fatal[0] = '\0';
    /* libpq marks its socket close-on-exec; make sure [B-EXEC-1]. */
    dlock_fd_cloexec(PQsocket(c));
    /* A lease that a server crash can take back is handed out twice: a
     * connection that commits one waits for its commits to reach the
     * disk, whatever the server's default synchronous_commit says. (The
     * fences of the other modes need no flush, and their epoch's bump
     * sets it for its own transaction: fence.c.) */
    if (cf->mode->durable) {
        struct pg_q q = {"SELECT set_config('synchronous_commit', 'on', "
                         "false)", 0, {NULL}};
        rc = dlock__pg_setup(s, &q, deadline, err, errlen);
        if (rc != DLOCK_OK) {
            dlock__pg_drop(s);
            return rc;
        }
    }
    /* Connection-bound modes: the locks end with this socket; lease: a
     * dropped connection is noticed before the next call [B-WATCH-1]. */
    dlock_session_watch(&s->base, PQsocket(c));
    if (cf->mode->on_connect == NULL)
        return DLOCK_OK;
    rc = cf->mode->on_connect(s, deadline, err, errlen);
    if (rc != DLOCK_OK)
        dlock__pg_drop(s);
    return rc;
}

/*
 * One poll() without waiting: a server that restarted, or a
 * pg_terminate_backend(), has left a FATAL message and an end of file on
 * the socket, which libpq reads here. Then a session without grants can
 * reconnect before sending, instead of failing the call.
 */
bool dlock__pg_alive(struct pg_session *s)
{
    PGconn *c = s->conn;
    PGnotify *n;
    bool ok = c != NULL && PQstatus(c) == CONNECTION_OK;

    for (int i = 0; ok && i < 4; i++) {
        struct pollfd p = {PQsocket(c), POLLIN, 0};
        if (poll(&p, 1, 0) <= 0)
            break;
        ok = PQconsumeInput(c) == 1 && PQstatus(c) == CONNECTION_OK;
        if (ok)
            (void)PQisBusy(c); /* parse it: a FATAL goes to pg_notice */
    }
    if (!ok) {
        if (c != NULL)
            pg_set_why(s, PQerrorMessage(c));
        if (s->why[0] == '\0')
            snprintf(s->why, sizeof s->why, "not connected");
        dlock__pg_drop(s);
        return false;
    }
    while ((n = PQnotifies(c)) != NULL)
        PQfreemem(n);
    return true;
}

/* A dead connection is replaced, unless connection-bound locks lived on it
 * (those are lost, and core must learn that the session is broken). */
int dlock__pg_ready(struct pg_session *s)
{
    char err[512];
    int rc;

    if (dlock__pg_alive(s))
        return DLOCK_OK;
    if (s->ngrants > 0)
        return dlock_session_error(&s->base, DLOCK_ECONNECT,
                                   "connection lost: %s", s->why);
    err[0] = '\0';
    rc = dlock__pg_connect(s, err, sizeof err);
    if (rc != DLOCK_OK)
        return dlock_session_error(&s->base, rc, "%s", err);
    return DLOCK_OK;
}

/* ---- prepared statements ------------------------------------------------ */

/*
 * A mode's statements are parsed and planned once per connection, not on
 * every call: PostgreSQL spends longer on the parse and plan of the lock's
 * CTE, or of the transaction's limits, than on the lock (measured with
 * bare libpq on a durable server: an advisory cycle 48 -> 32 us, an
 * advisory_xact cycle 74 -> 48 us, the bare lock's unnamed statements 36
 * and 43 us). The Prepare goes in the same round trip as the statement's
 * first run, so it costs no round trip either.
 *
 * Only a round trip that begins outside a transaction names its
 * statements: the lock's own transaction (a renewal, the COMMIT) is never
 * at the mercy of a statement that might be missing. Behind a transaction
 * pooler (PgBouncer pool_mode=transaction without its own prepared
 * statement support) the next transaction may run on a server connection
 * that lacks the statement (26000) or has it already (42P05, from another
 * client: the name is a digest of the text, so it is the same statement);
 * then that round trip is rolled back and run again unnamed, and the
 * session prepares nothing more (dlock__pg_exec).
 */
enum { PG_PREP_READY, PG_PREP_NEW, PG_PREP_SENT };

static void pg_prep_remove(struct pg_session *s, int i)
{
    free(s->prep[i].sql);
    s->prep[i] = s->prep[--s->nprep];
}

static void pg_prep_clear(struct pg_session *s)
{
    while (s->nprep > 0)
        pg_prep_remove(s, s->nprep - 1);
}

/* The entry for sql: known, or new (its Prepare to be sent) while there is
 * room; NULL: run it unnamed. */
static struct pg_prep *pg_prep_find(struct pg_session *s, const char *sql)
{
    static const char hex[] = "0123456789abcdef";
    struct pg_prep *p;
    uint8_t d[32];

    for (int i = 0; i < s->nprep; i++)
        if (strcmp(s->prep[i].sql, sql) == 0)
            return &s->prep[i];
    if (s->nprep == PG_PREP_MAX)
        return NULL;
    p = &s->prep[s->nprep];
    if ((p->sql = strdup(sql)) == NULL)
        return NULL;
    dlock_sha256(d, sql, strlen(sql));
    memcpy(p->name, "dlock_", 6);
    for (int i = 0; i < 16; i++) {
        p->name[6 + 2 * i] = hex[d[i] >> 4];
        p->name[7 + 2 * i] = hex[d[i] & 15];
    }
    p->name[38] = '\0';
    p->state = PG_PREP_NEW;
    s->nprep++;
    return p;
}

/* The server's answer to the Prepare of sql. */
static void pg_prep_answer(struct pg_session *s, const char *sql, bool ok)
{
    for (int i = 0; i < s->nprep; i++)
        if (s->prep[i].state == PG_PREP_SENT &&
            strcmp(s->prep[i].sql, sql) == 0) {
            if (ok)
                s->prep[i].state = PG_PREP_READY;
            else
                pg_prep_remove(s, i);
            return;
        }
}

/* A Prepare whose answer never came (the round trip failed before it) is
 * not known to exist: forget it. */
static void pg_prep_forget_pending(struct pg_session *s)
{
    for (int i = s->nprep - 1; i >= 0; i--)
        if (s->prep[i].state != PG_PREP_READY)
            pg_prep_remove(s, i);
}

/* ---- running statements ------------------------------------------------ */

void dlock__pg_res_clear(struct pg_res *res)
{
    for (int i = 0; i < PG_MAXQ; i++) {
        PQclear(res->r[i]);
        res->r[i] = NULL;
    }
}

/* The connection failed or timed out: drop it, say why, ECONNECT. */
static int pg_broken(struct pg_session *s, struct pg_res *res,
                     const char *why)
{
    if (why != NULL)
        snprintf(s->why, sizeof s->why, "%s", why);
    else if (s->conn != NULL)
        pg_set_why(s, PQerrorMessage(s->conn));
    if (s->why[0] == '\0')
        snprintf(s->why, sizeof s->why, "connection lost");
    dlock__pg_res_clear(res);
    dlock__pg_drop(s);
    return dlock_session_error(&s->base, DLOCK_ECONNECT, "%s", s->why);
}

static int pg_io_fail(struct pg_session *s, struct pg_res *res, int w)
{
    char why[96];

    if (w < 0)
        snprintf(why, sizeof why, "poll: %s", strerror(errno));
    else
        snprintf(why, sizeof why,
                 "no answer from the server within %u ms; connection closed",
                 s->cf->timeout_ms);
    return pg_broken(s, res, why);
}

/*
 * The acquire this statement serves was cancelled [B-CANCEL-1]: ask the
 * server to cancel it (PQcancel opens a connection of its own and sends
 * the cancel key; the lock wait then ends with SQLSTATE 57014). The
 * statement may have been granted just before: its results are read all
 * the same, and core releases a grant that came back after a cancel.
 * Returns the new deadline for those results: the I/O timeout, since the
 * caller's may be "never".
 */
#define PG_CANCEL_RESEND_MS 50

static int64_t pg_interrupt(struct pg_session *s)
{
    PGcancel *pc = PQgetCancel(s->conn);
    char err[256];

    if (pc != NULL) {
        if (!PQcancel(pc, err, (int)sizeof err))
            dlock_session_log(&s->base, DLOCK_LOG_INFO,
                              "postgres: cancel request failed: %s", err);
        PQfreeCancel(pc);
    }
    return dlock__pg_deadline(s->cf);
}

/*
 * DLOCK_OK: every statement ran, res->r[i] holds each result (the caller
 * clears them). PG_SQLERR: statement res->failed failed with res->state
 * (the rest were skipped; an explicit transaction is left in its failed
 * state). DLOCK_ECONNECT: the connection broke or the deadline passed; it
 * has been dropped.
 */
static int pg_exec(struct pg_session *s, const struct pg_q *q, int nq,
                   int64_t deadline, struct pg_res *res, bool *interrupted,
                   bool *named);

/*
 * A cancel request that reached the server after the statement ended is
 * not always ignored: if the backend finds our next statement already in
 * its socket, it runs it with the cancel pending and cancels that one
 * instead (a release, an unlock). PQcancel returns once the server has
 * signalled the backend, so the next statement it runs consumes a pending
 * cancel: run SELECT 1, and the statements after it are safe.
 */
static void pg_absorb_cancel(struct pg_session *s)
{
    struct pg_q one = {"SELECT 1", 0, {NULL}};
    struct pg_q rollback = {"ROLLBACK", 0, {NULL}};
    struct pg_res r;
    int rc;

    rc = pg_exec(s, &one, 1, dlock__pg_deadline(s->cf), &r, NULL, NULL);
    dlock__pg_res_clear(&r);
    /* It took the cancel. Inside a transaction (advisory_xact,
     * for_update) that aborted the transaction: end it, so the session
     * is clean. Whatever it held goes with it, and that is right: the
     * acquire was cancelled, so core releases anything it reports. */
    if (rc == PG_SQLERR && s->conn != NULL &&
        PQtransactionStatus(s->conn) == PQTRANS_INERROR) {
        pg_exec(s, &rollback, 1, dlock__pg_deadline(s->cf), &r, NULL, NULL);
        dlock__pg_res_clear(&r);
    }
}

int dlock__pg_exec(struct pg_session *s, const struct pg_q *q, int nq,
                   int64_t deadline, struct pg_res *res)
{
    bool interrupted = false, named = false;
    /* Named statements only where the mode wants them, and from outside
     * a transaction (see "prepared statements"). */
    bool may = s->cf->mode->prepare && !s->prep_off && s->conn != NULL &&
               PQtransactionStatus(s->conn) == PQTRANS_IDLE;
    int rc = pg_exec(s, q, nq, deadline, res,
                     s->waiting ? &interrupted : NULL, may ? &named : NULL);

    if (rc == PG_SQLERR && named && !interrupted &&
        (strcmp(res->state, "26000") == 0 ||
         strcmp(res->state, "42P05") == 0)) {
        /* The server connection is not the one the statements were
         * prepared on: a transaction pooler. From now on, unnamed. */
        dlock_session_log(&s->base, DLOCK_LOG_INFO,
                          "postgres: SQLSTATE %s on a prepared statement: "
                          "a transaction pooler? statements are no longer "
                          "prepared on this session",
                          res->state);
        s->prep_off = true;
        pg_prep_clear(s);
        /* The round trip began outside a transaction: if it opened one
         * (BEGIN first), rolling it back undoes all of it; if its first
         * statement failed, nothing ran. Then run it again. (Otherwise
         * statements before the failed one ran in its implicit
         * transaction, rolled back, but a session advisory lock is not
         * undone by that: the caller sees the failure.) */
        if (res->failed != 0 && (s->conn == NULL ||
                                 PQtransactionStatus(s->conn) !=
                                     PQTRANS_INERROR))
            return rc;
        dlock__pg_res_clear(res);
        dlock__pg_rollback(s);
        if (s->conn == NULL)
            return pg_broken(s, res, NULL);
        rc = pg_exec(s, q, nq, deadline, res,
                     s->waiting ? &interrupted : NULL, NULL);
    }
    /* Our cancel ended the statement (57014): it is consumed. */
    if (interrupted && !(rc == PG_SQLERR && strcmp(res->state, "57014") == 0))
        pg_absorb_cancel(s);
    return rc;
}

/* dlock__pg_exec's work; watching the acquire's cancel only when
 * interrupted is not NULL (set once a cancel was sent). */
static int pg_exec(struct pg_session *s, const struct pg_q *q, int nq,
                   int64_t deadline, struct pg_res *res, bool *interrupted,
                   bool *named)
{
    PGconn *c = s->conn;
    int qi = 0, j = 0, w;
    bool sent = false;

    /* What was sent, in order: statement j's index and whether it is
     * a Prepare (answered before the statement's own results). */
    int of[2 * PG_MAXQ], nsent = 0;
    bool parse[2 * PG_MAXQ];

    memset(res, 0, sizeof *res);
    res->failed = -1;
    if (named != NULL)
        *named = false;
    if (c == NULL)
        return pg_broken(s, res, "not connected");
    pg_prep_forget_pending(s);
    for (int i = 0; i < nq; i++) {
        struct pg_prep *p = named != NULL ? pg_prep_find(s, q[i].sql) : NULL;
        int ok;
        if (p != NULL && p->state == PG_PREP_NEW) {
            if (!PQsendPrepare(c, p->name, p->sql, q[i].n, NULL))
                return pg_broken(s, res, NULL);
            p->state = PG_PREP_SENT;
            of[nsent] = i;
            parse[nsent++] = true;
        }
        if (p != NULL)
            *named = true;
        ok = p != NULL ? PQsendQueryPrepared(c, p->name, q[i].n, q[i].v, NULL,
                                             NULL, 0)
                       : PQsendQueryParams(c, q[i].sql, q[i].n, NULL, q[i].v,
                                           NULL, NULL, 0);
        if (!ok)
            return pg_broken(s, res, NULL);
        of[nsent] = i;
        parse[nsent++] = false;
    }
    if (!PQpipelineSync(c))
        return pg_broken(s, res, NULL);
    while ((w = PQflush(c)) != 0) {
        if (w < 0)
            return pg_broken(s, res, NULL);
        if ((w = pg_poll(PQsocket(c), POLLIN | POLLOUT, deadline)) <= 0)
            return pg_io_fail(s, res, w);
        if (!PQconsumeInput(c))
            return pg_broken(s, res, NULL);
    }
    for (;;) {
        PGresult *r;
        while (PQisBusy(c)) {
            /* A wait of the acquire watches its cancel; once it is sent,
             * the statement's end, and the cancel again every
             * PG_CANCEL_RESEND_MS: a cancel that reaches the backend
             * before it starts the statement (still reading it) is
             * ignored, and the statement would wait on regardless. */
            int64_t until = sent && deadline - dlock_now_ms() >
                                        PG_CANCEL_RESEND_MS
                                ? dlock_now_ms() + PG_CANCEL_RESEND_MS
                                : deadline;
            w = interrupted == NULL || sent
                    ? pg_poll(PQsocket(c), POLLIN, until)
                    : dlock_session_poll(&s->base, PQsocket(c), POLLIN,
                                         deadline);
            if (w == DLOCK_ECANCELED || w == DLOCK_ECLOSED) {
                sent = *interrupted = true;
                deadline = pg_interrupt(s);
                continue;
            }
            if (w == 0 && sent && until < deadline) {
                (void)pg_interrupt(s);
                continue;
            }
            if (w <= 0)
                return pg_io_fail(s, res, w == DLOCK_ERROR ? -1 : w);
            if (!PQconsumeInput(c))
                return pg_broken(s, res, NULL);
        }
        r = PQgetResult(c);
        if (r == NULL) {
            /* The end of one statement's (or Prepare's) results. */
            if (PQstatus(c) != CONNECTION_OK || ++j > nsent)
                return pg_broken(s, res, NULL);
            continue;
        }
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        qi = j < nsent ? of[j] : nq;
        if (j < nsent && parse[j]) {
            /* Kept only once the server said so; its failure is the
             * statement's. */
            pg_prep_answer(s, q[qi].sql,
                           PQresultStatus(r) == PGRES_COMMAND_OK);
            if (PQresultStatus(r) != PGRES_FATAL_ERROR) {
                PQclear(r);
                continue;
            }
        }
        if (PQresultStatus(r) == PGRES_FATAL_ERROR && res->failed < 0 &&
            qi < nq) {
            const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            res->failed = qi;
            snprintf(res->state, sizeof res->state, "%s", st ? st : "XX000");
        }
        if (qi < nq && res->r[qi] == NULL)
            res->r[qi] = r;
        else
            PQclear(r);
    }
    pg_prep_forget_pending(s);
    if (PQstatus(c) != CONNECTION_OK || j != nsent)
        return pg_broken(s, res, NULL);
    return res->failed >= 0 ? PG_SQLERR : DLOCK_OK;
}

int dlock__pg_sqlfail(struct pg_session *s, int code, const char *what,
                      const struct pg_res *res)
{
    const PGresult *r = res->failed >= 0 ? res->r[res->failed] : NULL;
    const char *msg =
        r != NULL ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    return dlock_session_error(&s->base, code, "%s: %s (SQLSTATE %s)", what,
                               msg != NULL ? msg : "failed", res->state);
}

/* A broken connection is dropped by dlock__pg_exec. */
void dlock__pg_rollback(struct pg_session *s)
{
    struct pg_q q = {"ROLLBACK", 0, {NULL}};
    struct pg_res res;

    if (s->conn == NULL || PQtransactionStatus(s->conn) == PQTRANS_IDLE)
        return;
    dlock__pg_exec(s, &q, 1, dlock__pg_deadline(s->cf), &res);
    dlock__pg_res_clear(&res);
}

/* Lock-wait failures that mean "not now": the wait ran out (55P03
 * lock_not_available, also NOWAIT's answer), was cancelled (57014, e.g. a
 * server-side statement_timeout shorter than ours), or lost a deadlock or
 * serialization check. ETIMEDOUT once the deadline has passed, else
 * EBUSY (core tries again). 0 for any other SQLSTATE. */
int dlock__pg_busy_code(const char *state, int64_t deadline)
{
    if (strcmp(state, "55P03") != 0 && strcmp(state, "57014") != 0 &&
        strcmp(state, "40P01") != 0 && strcmp(state, "40001") != 0)
        return 0;
    if (deadline != 0 && deadline != INT64_MAX &&
        dlock_now_ms() + 5 >= deadline)
        return DLOCK_ETIMEDOUT;
    return DLOCK_EBUSY;
}

uint64_t dlock__pg_u64(const PGresult *r, int row, int col)
{
    return strtoull(PQgetvalue(r, row, col), NULL, 10);
}
