/*
 * get_lock.c: mode get_lock, the server's named locks: GET_LOCK(name,
 * timeout) and RELEASE_LOCK(name). They die with their connection, but one
 * connection can hold many (MariaDB >= 10.0.2, MySQL >= 5.7), so a client
 * holding a thousand locks needs a handful of connections. The server
 * waits for us, with fractional-second timeouts on MariaDB. The name the
 * server sees is keys.c's (the name itself when short, else a hash).
 *
 * A lock is tried first with its fence in the same statement (gl_try):
 * an uncontended acquire + release is two round trips, as for the bare
 * GET_LOCK and RELEASE_LOCK, and starts no thread (only a wait watches
 * for a cancel). A wait (or a try failed for a full table) goes through
 * gl_resolve and then bumps the fence; a name's first acquire since the
 * server started bumps it with a second statement, from the marker. An
 * acquire that may wait for a name its session last found held by
 * another goes to gl_resolve at once (gl_skip_try): a hand-off is then
 * the wait and the bump, as before the try existed. Where the server has
 * sequences (fence.c, "The sequence") the wait draws its token itself
 * (gl_resolve_seq), so a hand-off is the one waiting statement, and a
 * name's first acquire needs no second statement either.
 *
 * Counting semaphores: a semaphore of N permits is N named locks, its
 * slots, and a permit is one slot held (the design is under "permits"
 * below).
 *
 * What it shares with for_update (the silence limit, renewal by ping) is
 * bound.c's; the raw floor of this mode is floor.c's.
 *
 * Divisions: statements; names and waits; permits; acquire; release;
 * inspect; the mode.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

/* A native wait ends this long before the read timeout would. */
#define MY_WAIT_MARGIN_MS 500
/* Permit slots one statement tries (or inspect counts). */
#define GL_TRY 32

/* ---- statements ---------------------------------------------------------- */

/* No table but the fences' (and the latches'). */
static const char *const gl_ddl[] = {dlock__my_epoch_ddl,
                                     dlock__my_fence_ddl,
                                     dlock__my_frec_ddl,
                                     dlock__my_latch_ddl, NULL};

enum {
    GL_GET_LOCK = MY_SLOT_MODE,
    GL_RELEASE_LOCK,
    GL_IS_USED_LOCK,
    GL_PERMIT_TRY,
    GL_PERMIT_COUNT,
    GL_TAKE,
    GL_RESOLVE,
    GL_SLOTS
};
_Static_assert(GL_SLOTS <= MY_SLOTS, "get_lock: too many statements");

/* 1 granted, 0 timed out, NULL an error (killed, out of memory). */
static const struct dlock__my_stmt gl_get_lock = {GL_GET_LOCK,
                                                  "SELECT GET_LOCK(?, ?)"};
/* 1 ours, 0 another connection's, NULL nobody's. */
static const struct dlock__my_stmt gl_release_lock = {
    GL_RELEASE_LOCK, "SELECT RELEASE_LOCK(?)"};
/* The holder's connection id, or NULL. */
static const struct dlock__my_stmt gl_is_used_lock = {
    GL_IS_USED_LOCK, "SELECT IS_USED_LOCK(?)"};

/*
 * A lock's try and its fence in one round trip (my.h's MY_FENCE_*): the
 * row to write is selected only where GET_LOCK(?, 0) granted, and the
 * name's counter goes up. Wait 0: nothing may wait while the statement
 * holds the counters' table (MEMORY locks whole tables). GET_LOCK must
 * run once: a second run would take the name twice (reentrant) and one
 * RELEASE_LOCK would not free it. A SELECT without tables evaluates its
 * WHERE once, at execution (GET_LOCK has side effects and is never
 * folded); measured on MariaDB 10.11, and mysql/fence checks from
 * another connection that one release frees the name. No row written:
 * the name was busy.
 */
static const struct dlock__my_stmt gl_take = {
    GL_TAKE, MY_FENCE_INSERT "SELECT ?, 0, ? FROM DUAL "
                             "WHERE GET_LOCK(?, 0) = 1" MY_FENCE_NEXT};
/* The same where tokens come from the sequence (my.h's MY_SEQ_*): the
 * select list, NEXTVAL with it, is evaluated only for the row the WHERE
 * let through, after GET_LOCK granted. */
static const struct dlock__my_stmt gl_take_seq = {
    GL_TAKE, MY_SEQ_INSERT "SELECT ?, " MY_SEQ_DRAW ", ?, CONNECTION_ID() "
                           "FROM DUAL WHERE GET_LOCK(?, 0) = 1" MY_SEQ_NEXT};

/* After gl_take wrote no row, or failed, or instead of it (a name found
 * busy last time): 2 if this connection holds the name already (gl_take
 * took it before its write failed: a full table), else GET_LOCK(?, ?) (1
 * granted, 0 timed out, NULL an error), plus GL_WAS_BUSY if another
 * connection held the name when the statement began. A searched CASE
 * evaluates its conditions in order and only the branch it picks (see
 * "permits"), so GET_LOCK runs once. */
#define GL_WAS_BUSY 4
static const struct dlock__my_stmt gl_resolve = {
    GL_RESOLVE, "SELECT CASE WHEN IS_USED_LOCK(?) <=> CONNECTION_ID() THEN 2"
                " WHEN IS_USED_LOCK(?) IS NULL THEN GET_LOCK(?, ?)"
                " ELSE GET_LOCK(?, ?) + 4 END"};
_Static_assert(GL_WAS_BUSY == 4, "gl_resolve adds 4");

/*
 * gl_resolve where tokens come from the sequence (fence.c, "the
 * sequence"): the token is drawn in the waiting statement itself, once
 * the name is this connection's, so a hand-off is this one statement.
 * NEXTVAL takes no table lock that another statement waits for (the
 * counters' MEMORY table would be held for the whole wait). Each branch
 * draws only if its GET_LOCK granted (IF evaluates only the branch it
 * picks): the token t, -t - 1 where another connection held the name
 * when the statement began, 0 or -1 (the same two cases) if the wait
 * timed out, NULL on an error. Tokens are below 2^63 - 1, so -t - 1 fits.
 */
static const struct dlock__my_stmt gl_resolve_seq = {
    GL_RESOLVE,
    "SELECT CASE WHEN IS_USED_LOCK(?) <=> CONNECTION_ID() THEN"
    " NEXTVAL(`%1$s_fseq`)"
    " WHEN IS_USED_LOCK(?) IS NULL THEN"
    " IF(GET_LOCK(?, ?) = 1, NEXTVAL(`%1$s_fseq`), 0)"
    " ELSE -IF(GET_LOCK(?, ?) = 1, NEXTVAL(`%1$s_fseq`), 0) - 1 END"};

/* Permits: the first of GL_TRY slot names that GET_LOCK(slot, 0) grants,
 * by its position, or -1; why it never takes two is under "permits". */
#define GL_W(i) " WHEN GET_LOCK(?, 0) = 1 THEN " #i
#define GL_W4(a, b, c, d) GL_W(a) GL_W(b) GL_W(c) GL_W(d)
static const struct dlock__my_stmt gl_permit_try = {
    GL_PERMIT_TRY,
    "SELECT CASE" GL_W4(0, 1, 2, 3) GL_W4(4, 5, 6, 7) GL_W4(8, 9, 10, 11)
        GL_W4(12, 13, 14, 15) GL_W4(16, 17, 18, 19) GL_W4(20, 21, 22, 23)
            GL_W4(24, 25, 26, 27) GL_W4(28, 29, 30, 31) " ELSE -1 END"};
/* Inspect: how many of GL_TRY slot names are held. */
#define GL_U " + (IS_USED_LOCK(?) IS NOT NULL)"
#define GL_U8 GL_U GL_U GL_U GL_U GL_U GL_U GL_U GL_U
static const struct dlock__my_stmt gl_permit_count = {
    GL_PERMIT_COUNT, "SELECT 0" GL_U8 GL_U8 GL_U8 GL_U8};

/* Run one of them on GET_LOCK name ul; *v is its value, *null if NULL. */
static unsigned gl_call(struct dlock__my_conn *c,
                        const struct dlock__my_stmt *q, const char *ul,
                        size_t ul_len, double *timeout_s, long long *v,
                        my_flag *null)
{
    MYSQL_BIND p[2];
    bool found;

    dlock__my_bind_text(&p[0], ul, ul_len);
    if (timeout_s != NULL)
        dlock__my_bind_f64(&p[1], timeout_s);
    return dlock__my_select_i64(c, q, p, v, null, &found);
}

/* ---- names and waits ----------------------------------------------------- */

/* The key of a name (for its fence) and the GET_LOCK name of the lock, or
 * of the permit slot when req is a permit's; returns the name's length. */
static size_t gl_name(const struct dlock__my_session *ms,
                      const struct dlock_request *req, unsigned slot,
                      uint8_t key[MY_KEY_LEN], char ul[MY_ULOCK_BUF])
{
    dlock__my_key(ms->x, req->name, req->name_len, key);
    if (req->kind == DLOCK_KIND_PERMIT)
        return dlock__my_slot_name(ms->x, req->name, req->name_len, key,
                                   slot, ul);
    return dlock__my_ulock_name(ms->x, req->name, req->name_len, key, ul);
}

/* How long one server-side wait may last, in seconds, until deadline_ms
 * and at most cap_ms: each wait must end before the read timeout gives up
 * on the connection. 0 for a single attempt. */
static double gl_wait_s(const struct dlock__my_session *ms,
                        int64_t deadline_ms, int64_t cap_ms)
{
    int64_t left;

    if (deadline_ms == 0)
        return 0;
    left = deadline_ms - dlock_now_ms();
    if (cap_ms > ms->x->io_ms - MY_WAIT_MARGIN_MS)
        cap_ms = ms->x->io_ms - MY_WAIT_MARGIN_MS;
    if (left > cap_ms)
        left = cap_ms;
    return left > 0 ? (double)left / 1000.0 : 0;
}

/* q (gl_get_lock, gl_resolve or gl_resolve_seq) on ul, waiting wait_s;
 * a wait is cancellable [B-CANCEL-1]: DLOCK_OK with *got, or the code to
 * return (reported). A statement that cannot wait starts no watcher
 * thread. *busy (gl_resolve*): another connection held the name when the
 * statement began. *token (gl_resolve_seq): the token drawn with *got. */
static int gl_wait(struct dlock__my_session *ms,
                   const struct dlock__my_stmt *q, const char *ul,
                   size_t ul_len, double wait_s, bool *got, bool *busy,
                   uint64_t *token)
{
    struct dlock__my_conn *c = &ms->conn;
    struct dlock__my_kill kill = {.armed = false};
    MYSQL_BIND p[6];
    long long v;
    my_flag null;
    bool found;
    unsigned e;
    size_t n = 0;

    *busy = false;
    if (q == &gl_resolve || q == &gl_resolve_seq) {
        dlock__my_bind_text(&p[n++], ul, ul_len);
        dlock__my_bind_text(&p[n++], ul, ul_len);
        dlock__my_bind_text(&p[n++], ul, ul_len);
        dlock__my_bind_f64(&p[n++], &wait_s);
    }
    dlock__my_bind_text(&p[n++], ul, ul_len);
    dlock__my_bind_f64(&p[n], &wait_s);
    if (wait_s > 0)
        dlock__my_kill_arm(&kill, ms);
    e = dlock__my_select_i64(c, q, p, &v, &null, &found);
    if (wait_s > 0 && dlock__my_kill_disarm(&kill)) {
        /* Cancelled: granted or not, let go of the name (RELEASE_LOCK
         * frees it only if this connection holds it). */
        gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null);
        return dlock_session_error(&ms->base,
                                   dlock_session_cancelled(&ms->base),
                                   "GET_LOCK: cancelled");
    }
    if (e != 0 || null) {
        /* Held or not (gl_take may have taken it before gl_resolve
         * failed), the name is let go of while the connection lives. */
        int rc = e != 0 ? dlock__my_fail(ms, c, "GET_LOCK")
                        : dlock_session_error(&ms->base, DLOCK_ERROR,
                                              "GET_LOCK returned NULL (the "
                                              "wait was killed, or the "
                                              "server ran out of memory)");
        if (!c->broken)
            gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null);
        return rc;
    }
    if (q == &gl_resolve_seq) {
        *busy = v < 0;
        *got = v > 0 || v < -1;
        *token = v > 0 ? (uint64_t)v : v < -1 ? (uint64_t)(-(v + 1)) : 0;
        return DLOCK_OK;
    }
    *busy = v >= GL_WAS_BUSY;
    v = v >= GL_WAS_BUSY ? v - GL_WAS_BUSY : v;
    *got = v == 1 || v == 2; /* 2: gl_resolve found it held already */
    return DLOCK_OK;
}

/* The name ul is held: take its fence, or let go of it. drawn: the
 * lock's statement drew grant->fence from the sequence, whose epoch is
 * checked (fence.c). */
static int gl_fenced(struct dlock__my_session *ms,
                     const struct dlock_request *req,
                     const uint8_t key[MY_KEY_LEN], const char *ul,
                     size_t ul_len, struct dlock_grant *grant, bool drawn)
{
    struct dlock__my_conn *c = &ms->conn;
    long long v;
    my_flag null;
    unsigned e;
    int rc;

    e = drawn ? dlock__my_seq_check(c, NULL, grant->fence)
              : dlock__my_fence(c, NULL, key, req->owner, req->owner_len,
                                &grant->fence);
    if (e != 0) {
        rc = dlock__my_fail(ms, c, drawn ? "fence epoch" : "fence");
        if (!c->broken)
            gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null);
        return rc;
    }
    ms->ngrants++;
    return DLOCK_OK;
}

/* ---- permits ------------------------------------------------------------- */

/*
 * A semaphore of N permits is N named locks, its slots 0..N-1 (keys.c's
 * dlock__my_slot_name: "dlock:<i>#<name>", or a hash for long names), and
 * a permit is one slot held by the connection that took it. So a permit
 * is exactly a lock of this mode: it dies with its connection (a SIGKILLed
 * holder's permit is back when the server sees the socket close, or after
 * wait_timeout for a silent one), one ping renews it, RELEASE_LOCK gives
 * it back, and grant->word[0] remembers the slot. At most N holders,
 * because each slot has at most one holding connection and each grant
 * holds exactly one slot:
 *
 * - Acquire tries GL_TRY slots in one statement,
 *       SELECT CASE WHEN GET_LOCK(s0, 0) = 1 THEN 0
 *                   WHEN GET_LOCK(s1, 0) = 1 THEN 1 ... ELSE -1 END
 *   A searched CASE evaluates its conditions in order and stops at the
 *   first true one (MariaDB's Item_func_case_searched::find_item and
 *   MySQL's Item_func_case::find_item are that loop; GET_LOCK is never
 *   constant-folded), so once a GET_LOCK grants, no later one runs: one
 *   statement takes one slot at most (mysql/permits checks it from another
 *   connection with IS_USED_LOCK). Positions beyond N repeat slots refused
 *   earlier in the statement, which can take at most that one again. An
 *   error of the statement comes before any grant (a name is never too
 *   long or empty, a wait of 0 never deadlocks) or breaks the connection;
 *   on a live one the slots tried are released anyway.
 * - The connection holds no slot of the name already: a second GET_LOCK
 *   of a held name would succeed and count it twice, but core never asks
 *   for a name on a connection that holds it for another handle, so two
 *   permit handles of one client take two connections [B-PIN-1].
 *
 * The tries start at a random slot, so contenders spread over the slots
 * instead of all hitting slot 0 first; N > GL_TRY takes N/GL_TRY round
 * trips when all are held.
 *
 * Waiting: the server waits on one name per statement. A waiter that
 * found every slot held waits GET_LOCK(slot, t) on the random start slot
 * for at most the slice (MY_SLICE_MS, or the URI's retry_max=;
 * cancellable like a lock's wait), then tries all slots again: a permit given back on its slot is handed over at once, one
 * given back on another after the slice at most (docs/backends/mysql.md,
 * "Semaphores", has what was measured). Core's backoff would poll; this
 * costs two short statements per slice per waiter and no more.
 *
 * The count is not stored: N is each request's own, so clients using
 * different counts for one name are not detected (the one with the
 * larger count may take slots the other does not know of).
 */

/* Try slots first, first+1, ... (mod n), GL_TRY of them, in one
 * statement: *slot is the one taken, or n. 0 or an error number. */
static unsigned gl_permit_round(struct dlock__my_session *ms,
                              const struct dlock_request *req,
                              const uint8_t key[MY_KEY_LEN], unsigned first,
                              unsigned *slot)
{
    struct dlock__my_conn *c = &ms->conn;
    const unsigned n = req->permits;
    char ul[GL_TRY][MY_ULOCK_BUF];
    size_t len[GL_TRY];
    unsigned order[GL_TRY];
    MYSQL_BIND p[GL_TRY];
    long long v;
    my_flag null;
    bool found;
    unsigned e;

    for (unsigned j = 0; j < GL_TRY; j++) {
        order[j] = (first + j) % n;
        len[j] = dlock__my_slot_name(ms->x, req->name, req->name_len, key,
                                     order[j], ul[j]);
        dlock__my_bind_text(&p[j], ul[j], len[j]);
    }
    *slot = n;
    e = dlock__my_select_i64(c, &gl_permit_try, p, &v, &null, &found);
    if (e != 0) {
        for (unsigned j = 0; j < GL_TRY && !c->broken; j++)
            gl_call(c, &gl_release_lock, ul[j], len[j], NULL, &v, &null);
        return e;
    }
    if (found && !null && v >= 0 && v < GL_TRY)
        *slot = order[v];
    return 0;
}

static int gl_permit_acquire(struct dlock__my_session *ms,
                             const struct dlock_request *req,
                             int64_t deadline_ms, struct dlock_grant *grant,
                             uint32_t *retry_ms)
{
    const unsigned n = req->permits;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    unsigned start, slot = n;
    double wait_s;
    bool got = false, busy;
    int rc;

    start = dlock__my_first_slot(req);
    dlock__my_key(ms->x, req->name, req->name_len, key);
    for (unsigned base = 0; base < n && slot == n; base += GL_TRY)
        if (gl_permit_round(ms, req, key, (start + base) % n, &slot) != 0)
            return dlock__my_fail(ms, &ms->conn, "GET_LOCK of a permit");
    if (slot == n) {
        if (deadline_ms == 0)
            return DLOCK_EBUSY;
        slot = start;
        ul_len = gl_name(ms, req, slot, key, ul);
        wait_s = gl_wait_s(ms, deadline_ms, ms->x->slice_ms);
        if ((rc = gl_wait(ms, &gl_get_lock, ul, ul_len, wait_s, &got,
                          &busy, NULL)) != DLOCK_OK)
            return rc;
        if (!got)
            return dlock__my_busy(deadline_ms, true, retry_ms);
    }
    ul_len = gl_name(ms, req, slot, key, ul);
    grant->word[0] = slot;
    return gl_fenced(ms, req, key, ul, ul_len, grant, false);
}

/* ---- acquire ------------------------------------------------------------- */

/*
 * The uncontended path, one round trip: gl_take tries the name and bumps
 * its counter. DLOCK_OK or a failure with *done; a name taken whose token
 * is not drawn yet (its first use since the server started, a counter
 * run out) gets it from gl_fenced, which falls back on the marker and
 * moves the epoch. With !*done (busy, or a full table, after which the
 * name may be held) the caller goes on with gl_resolve. Any other failure
 * is reported with the name let go of.
 */
static int gl_try(struct dlock__my_session *ms,
                  const struct dlock_request *req,
                  const uint8_t key[MY_KEY_LEN], const char *ul,
                  size_t ul_len, struct dlock_grant *grant, bool *done)
{
    struct dlock__my_conn *c = &ms->conn;
    MYSQL_BIND p[3];
    my_ulonglong rows;
    long long v;
    my_flag null;
    unsigned e;
    int rc;

    *done = true;
    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], req->owner, req->owner_len);
    dlock__my_bind_text(&p[2], ul, ul_len);
    e = dlock__my_fence_with(c, c->seq == MY_SEQ_ON ? &gl_take_seq : &gl_take,
                             p, &rows, &grant->fence);
    if (e == 0 && rows > 0 && c->seq == MY_SEQ_ON) {
        c->recorded = true;
        return gl_fenced(ms, req, key, ul, ul_len, grant, true);
    }
    if (e == 0 && rows > 0 && grant->fence != 0) {
        ms->ngrants++;
        return DLOCK_OK;
    }
    if (e == 0 && rows > 0)
        return gl_fenced(ms, req, key, ul, ul_len, grant, false);
    if (e == ER_RECORD_FILE_FULL && c->seq == MY_SEQ_ON &&
        dlock__my_seq_room(c) != 0)
        e = c->err; /* reported below, the name let go of */
    else if (e == 0 || e == ER_RECORD_FILE_FULL) {
        *done = false;
        return DLOCK_OK;
    }
    rc = dlock__my_fail(ms, c, "GET_LOCK with its fence");
    if (!c->broken)
        gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null);
    return rc;
}

/*
 * The try is skipped by an acquire that may wait for a name this session
 * found held by another connection when it last came to take it (gl_resolve
 * says, ms->busy keeps it): there the try is likely to fail, and costs a
 * round trip plus a hold of the counters' table just when the holder's
 * successor draws its token (docs/backends/mysql.md has what it saves).
 * A wrong guess costs one round trip: the wait path's fence is a second
 * statement.
 */
static bool gl_skip_try(const struct dlock__my_session *ms,
                        const uint8_t key[MY_KEY_LEN], int64_t deadline_ms)
{
    return deadline_ms != 0 && ms->busy &&
           memcmp(ms->busy_key, key, MY_KEY_LEN) == 0;
}

static void gl_note_busy(struct dlock__my_session *ms,
                         const uint8_t key[MY_KEY_LEN], bool busy)
{
    ms->busy = busy;
    if (busy)
        memcpy(ms->busy_key, key, MY_KEY_LEN);
}

static int gl_acquire(struct dlock_session *s, const struct dlock_request *req,
                      int64_t deadline_ms, struct dlock_grant *grant,
                      uint32_t *retry_ms)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    double wait_s;
    bool got = false, busy, seq;
    int rc;

    if ((rc = dlock__my_bound_begin(ms, req)) != DLOCK_OK)
        return rc;
    if (req->kind == DLOCK_KIND_PERMIT)
        return gl_permit_acquire(ms, req, deadline_ms, grant, retry_ms);
    /* The source of tokens, before the first statement that draws one. */
    if (dlock__my_seq_ready(c, NULL) != 0)
        return dlock__my_fail(ms, c, "fence sequence");
    seq = c->seq == MY_SEQ_ON;
    ul_len = gl_name(ms, req, 0, key, ul);
    if (!gl_skip_try(ms, key, deadline_ms)) {
        rc = gl_try(ms, req, key, ul, ul_len, grant, &got);
        if (rc == DLOCK_OK && got)
            gl_note_busy(ms, key, false);
        if (rc != DLOCK_OK || got)
            return rc;
    }
    /* The server waits for us, in fractions of a second. With the
     * sequence, the wait draws the token and records nothing: no older
     * record may name this connection then (fence.c). */
    if (seq && dlock__my_seq_forget(c) != 0)
        return dlock__my_fail(ms, c, "fence record");
    wait_s = gl_wait_s(ms, deadline_ms, INT64_MAX);
    if ((rc = gl_wait(ms, seq ? &gl_resolve_seq : &gl_resolve, ul, ul_len,
                      wait_s, &got, &busy, &grant->fence)) != DLOCK_OK)
        return rc;
    gl_note_busy(ms, key, busy);
    if (!got)
        return dlock__my_busy(deadline_ms, wait_s > 0, retry_ms);
    return gl_fenced(ms, req, key, ul, ul_len, grant, seq);
}

/* ---- release ------------------------------------------------------------- */

static int gl_release(struct dlock_session *s, const struct dlock_request *req,
                      struct dlock_grant *grant)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    long long v;
    my_flag null;

    if (ms->ngrants > 0)
        ms->ngrants--;
    if (c->broken)
        return dlock_session_error(&ms->base, DLOCK_ECONNECT,
                                   "the connection holding the lock is "
                                   "gone: %s",
                                   c->msg);
    ul_len = gl_name(ms, req, (unsigned)grant->word[0], key, ul);
    if (gl_call(c, &gl_release_lock, ul, ul_len, NULL, &v, &null) != 0)
        return dlock__my_fail(ms, c, "RELEASE_LOCK");
    if (null || v != 1)
        return dlock_session_error(&ms->base, DLOCK_ENOTOWNER,
                                   "RELEASE_LOCK returned %s",
                                   null ? "NULL: no such lock is held"
                                        : "0: another connection holds it");
    return DLOCK_OK;
}

/* ---- inspect ------------------------------------------------------------- */

/* How many permit slots of the name are held, any count: all
 * DLOCK_PERMITS_MAX slots, GL_TRY per round trip. */
static unsigned gl_permits_held(struct dlock__my_session *ms,
                                const char *name, size_t len,
                                const uint8_t key[MY_KEY_LEN],
                                long long *held)
{
    char ul[GL_TRY][MY_ULOCK_BUF];
    MYSQL_BIND p[GL_TRY];
    long long v;
    my_flag null;
    bool found;
    unsigned e;

    *held = 0;
    for (unsigned base = 0; base < DLOCK_PERMITS_MAX; base += GL_TRY) {
        for (unsigned j = 0; j < GL_TRY; j++)
            dlock__my_bind_text(&p[j], ul[j],
                                dlock__my_slot_name(ms->x, name, len, key,
                                                    base + j, ul[j]));
        e = dlock__my_select_i64(&ms->conn, &gl_permit_count, p, &v, &null,
                                 &found);
        if (e != 0)
            return e;
        *held += found && !null ? v : 0;
    }
    return 0;
}

/*
 * A lock: its holder. A name free as a lock that has handed out fences
 * may be a semaphore's: held when any of its permit slots is (the count
 * is not stored, so all DLOCK_PERMITS_MAX are looked at); the owner is
 * then unknown, the fence the last of any permit.
 */
static int gl_inspect(struct dlock_session *s, const char *name, size_t len,
                      dlock_state *out)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    char ul[MY_ULOCK_BUF];
    size_t ul_len;
    long long id, permits = 0;
    uint64_t rec = 0;
    my_flag null;

    if (c->broken)
        return dlock__my_broken(ms);
    dlock__my_key(ms->x, name, len, key);
    ul_len = dlock__my_ulock_name(ms->x, name, len, key, ul);
    if (gl_call(c, &gl_is_used_lock, ul, ul_len, NULL, &id, &null) != 0)
        return dlock__my_fail(ms, c, "inspect");
    out->held = !null;
    /* The holder's owner id is in the counter row it bumped (fence.c);
     * IS_USED_LOCK knows only the connection. Where tokens come from the
     * sequence, a grant after a wait records nothing: the row is the
     * holder's only if it names the holder's connection (which forgot
     * its older rows before it waited), else holder and fence are not
     * known. */
    if (dlock__my_fence_peek(c, key, &out->fence, out->owner,
                             out->held ? sizeof out->owner : 0, &rec) != 0)
        return dlock__my_fail(ms, c, "inspect fence");
    if (out->held && dlock__my_seq_capable(c) && rec != (uint64_t)id) {
        out->owner[0] = '\0';
        out->fence = 0;
    }
    if (out->held || out->fence == 0)
        return DLOCK_OK;
    if (gl_permits_held(ms, name, len, key, &permits) != 0)
        return dlock__my_fail(ms, c, "inspect permits");
    out->held = permits > 0;
    return DLOCK_OK;
}

/* ---- the mode ------------------------------------------------------------ */

static int gl_floor(const struct dlock_uri *uri, const char *name, uint32_t n,
                    uint64_t *ns_out, char *err, size_t errlen)
{
    static const struct dlock__my_floor_sql q = {
        &dlock__my_mode_get_lock, &gl_get_lock, &gl_release_lock, NULL, NULL};

    return dlock__my_floor_get_lock(&q, uri, name, n, ns_out, err, errlen);
}

static int gl_floor_wait(const struct dlock_mode *mode,
                         const struct dlock_uri *uri, const char *name,
                         uint32_t wait_ms, int (*go_on)(void *arg, int held),
                         void *arg, char *err, size_t errlen)
{
    static const struct dlock__my_floor_sql q = {
        &dlock__my_mode_get_lock, NULL, &gl_release_lock, NULL, &gl_get_lock};

    (void)mode;
    return dlock__my_floor_wait(&q, uri, name, wait_ms, go_on, arg, err,
                                errlen);
}

/* The server waits for us; back off only between waits. */
const struct dlock__my_mode dlock__my_mode_get_lock = {
    .base =
        {
            .name = "get_lock",
            .summary = "the server's named locks, GET_LOCK and "
                       "RELEASE_LOCK: many per connection",
            .caps = DLOCK_CAP_CONN_BOUND | DLOCK_CAP_SERVER_TIMEOUT |
                    DLOCK_CAP_NATIVE_WAIT | DLOCK_CAP_FENCING |
                    DLOCK_CAP_BATCH_RENEW | DLOCK_CAP_PERMITS |
                    DLOCK_CAP_LATCH,
            .kinds = DLOCK_KIND_BIT(DLOCK_KIND_EXCLUSIVE) |
                     DLOCK_KIND_BIT(DLOCK_KIND_PERMIT),
            .retry_min_ms = 1,
            .retry_max_ms = 32,
            .acquire = gl_acquire,
            .renew = dlock__my_bound_renew,
            .release = gl_release,
            .inspect = gl_inspect,
            .floor = gl_floor,
            /* No fence_floor: the lock's own request draws it. */
            .forget = dlock__my_forget,
            .latch = &dlock__my_latch,
            .floor_wait = gl_floor_wait,
        },
    .ddl = gl_ddl,
};
