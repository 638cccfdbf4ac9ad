/*
 * fence.c: the fencing tokens of every mode, with no disk flush per
 * acquire and never repeated, even across a server crash. Where the
 * server has sequences (MariaDB >= 10.3) the counters below give way to
 * one sequence per table ("The sequence", further down), which a waiting
 * statement can draw from; the epoch is the same.
 *
 * A token is (epoch << 40) | counter:
 *
 * - counter: a row per name in <table>_fmem, ENGINE=MEMORY, bumped after
 *   the lock is held. MEMORY writes take no InnoDB redo and no flush;
 *   the table is empty after any restart of the server (its definition
 *   stays, its rows are gone). The row also names the owner that took the
 *   token, which is the holder while an exclusive lock is held (a shared
 *   holder of for_update leaves the name empty): how `dlock inspect`
 *   shows the holder's DLOCK_OWNER on modes whose own state cannot
 *   (GET_LOCK knows a connection id; a FOR UPDATE row's owner is not
 *   committed).
 * - epoch: the one row of <table>_epoch, InnoDB, bumped only when the
 *   counters were lost (or one ran out, or the table filled up), by a
 *   transaction that commits before anyone uses the new epoch.
 * - the marker: a row of the same MEMORY table under the all-zero key
 *   (no name hashes to it) holding the epoch now in use. It vanishes with
 *   the counters at a restart, and with them when someone empties the
 *   table by hand, which a marker in a table of its own would survive.
 *
 * The bump is one statement, one round trip:
 *     INSERT INTO t_fmem (lock_key, fence, owner)
 *     SELECT ?, LAST_INSERT_ID(m.fence << 40 | 1), ? FROM t_fmem m
 *      WHERE m.lock_key = <marker>
 *     ON DUPLICATE KEY UPDATE fence = IF(<counter used up>,
 *         fence + LAST_INSERT_ID(0),
 *         LAST_INSERT_ID(GREATEST(fence + 1, VALUES(fence)))), owner = …
 * whose OK packet carries the token as its insert id (LAST_INSERT_ID(expr)
 * makes expr the insert id; mysql_stmt_insert_id), so no SELECT follows.
 * GREATEST lifts a counter left from an older epoch into the current one.
 * The insert id is 0 when there was no marker (the SELECT found no row,
 * nothing was inserted) or the counter had handed out its last value
 * (2^40 - 1): then fence_epoch() moves to a new epoch and the statement
 * runs again. So is a full table (ER_RECORD_FILE_FULL: max_heap_table_size
 * of the session that created the table, or that opened it first after a
 * restart), after which the counters of older epochs are deleted.
 *
 * The try: get_lock and for_update bump in the lock's own statement, so
 * the lock and its token take one round trip. It reads no marker, which
 * costs about half the bump's work in the server (5.5 µs over a bare
 * GET_LOCK, measured; about 3 µs without the marker):
 *     INSERT INTO t_fmem (lock_key, fence, owner)
 *     SELECT ?, 0, ? FROM <the lock> WHERE <the lock taken>
 *     ON DUPLICATE KEY UPDATE fence = IF(fence = 0 OR <counter used up>,
 *         fence + LAST_INSERT_ID(0), LAST_INSERT_ID(fence + 1)), owner = …
 * (my.h's MY_FENCE_*; <the lock taken>: GET_LOCK(?, 0) = 1, or the row
 * read FOR UPDATE NOWAIT). A counter row of this server's life goes up by
 * one: whatever epoch it is in, its next value is above all it gave, and
 * it was made from a marker, so its epoch is one committed before it (the
 * argument below holds for it as for the bump). A name without a row
 * gets a row of 0 and no token, as does a counter used up, and a 0 row
 * never gives one; the mode then runs the bump above (dlock__my_fence),
 * which takes its epoch from the marker (GREATEST lifts the 0) or moves to
 * a new one. So after a restart, when every row is gone, every token
 * comes from the marker again. A try never waits (it holds the MEMORY
 * table, which locks whole tables): waits are statements of their own,
 * followed by the bump. With the marker deleted by hand and the rows
 * kept, existing counters go on in their epoch; new names move the epoch.
 *
 * Moving to a new epoch (fence_epoch), on a connection outside any
 * transaction:
 *   1. read the marker (seen) and the durable epoch (d0);
 *   2. START TRANSACTION; SELECT epoch … FOR UPDATE (d1); read the marker
 *      again: if it is no longer seen, someone else moved, and we are done;
 *   3. if d1 > d0, someone committed a new epoch after step 1, so after
 *      the marker we acted on went missing or ran out: use d1 and write
 *      nothing. Else UPDATE epoch = d1 + 1 and COMMIT: the durable write,
 *      the only flush of the scheme;
 *   4. only then set the marker to the new epoch (never lowering it), and
 *      for a full table delete the counters below it.
 * Why no token repeats: a marker is only ever set to an epoch already
 * committed, so after a crash the durable epoch is at least every marker
 * used before, and the next one is above it; within one life of the
 * server the marker never goes down, and each counter only goes up
 * (GREATEST; the try's + 1), or is deleted (full table) only once the
 * marker is above it, so its next value starts above everything it gave.
 * A marker set before the COMMIT could outlive a rolled-back transaction
 * (MEMORY is not transactional) and hand out an epoch that the next crash
 * gives again.
 *
 * The crash semantics this relies on (MariaDB 10.11, MySQL 8): the MEMORY
 * engine keeps rows in the server's memory only and writes no redo or
 * undo; at the first open after a restart the table is empty. An InnoDB
 * COMMIT is on disk when it returns with innodb_flush_log_at_trx_commit=1
 * (the default); with 2 it survives a crash of the server but not of the
 * machine, with 0 neither, and then the durable epoch, like any commit,
 * can go back (the old durable counter had the same dependence, on every
 * acquire). With the binary log on (log_bin), MEMORY writes are logged
 * too, and sync_binlog=1 then flushes the binlog once per token: a flush
 * per acquire again, though not InnoDB's. Tokens are not kept across a
 * failover to a replica: its counters and epoch lag the primary's.
 *
 * Tokens from before this scheme (the durable counters of <table>_fence,
 * no longer used) are far below 1 << 40, so epoch >= 1 puts every new
 * token above them; an old client beside a new one on the same name would
 * hand out smaller tokens, so upgrade every client of a name together.
 *
 * The statements autocommit, but for_update bumps inside the lock's
 * transaction: MEMORY changes are not rolled back, so a token handed out
 * stays handed out even when the lock is lost before it is released. What
 * commits goes over a side connection of the client's (x->fence, under
 * x->mu), since a COMMIT on the lock's connection would release the lock:
 * the epoch's transaction, and the CREATE TABLEs of tables found missing
 * (implicit commits). The tables are created with the mode's others, on
 * first use. (So <table>_fmem must stay MEMORY: made InnoDB by hand it
 * would cost a flush again, and a rolled-back for_update transaction
 * would take its bump back.)
 *
 * The sequence (MariaDB >= 10.3; servers without sequences, MySQL among
 * them, keep the counters above). Every token of every mode is
 * NEXTVAL(<table>_fseq), one InnoDB SEQUENCE per table, so a waiter can
 * draw its token in the statement that waits, once granted (get_lock.c's
 * gl_resolve_seq): a sequence takes no table lock that another statement
 * waits for, while the MEMORY table, locked whole, may not be touched by
 * a statement that waits. The counters' table is not used then: the
 * tokens and their owners are recorded (for inspect), with the connection
 * that drew them, in <table>_frec, MEMORY too, and a table of its own so
 * that an older <table>_fmem needs no ALTER (no privilege beyond CREATE).
 *
 * The epoch is in the sequence's value: tokens are NEXTVAL as drawn, and
 * the sequence is set to epoch << 40 at the start of each life of the
 * server, before anyone draws. A sequence is not crash-safe (a SIGKILLed
 * MariaDB 10.11 gave a value again; its cache is written back without a
 * flush of its own), so after a crash it may stand below tokens already
 * given; the rule that saves it:
 *
 *   a token may be used only once its epoch (token >> 40) is committed
 *   in <table>_epoch, and a connection draws only once it has seen the
 *   sequence's marker (the row of <table>_frec under the all-0x01 key)
 *   in this life.
 *
 * - Arming (dlock__my_seq_ready, once per connection, before its first
 *   draw): read the sequence's marker; if it is missing (a new life, or
 *   the table emptied) move to a new epoch as the counters do
 *   (epoch_next: a new epoch committed, or one that another committed
 *   after our first look), SETVAL the sequence to epoch << 40 (SETVAL
 *   never lowers a sequence), and only then set the marker. The marker is
 *   MEMORY: present means an armer of this life did the SETVAL before it.
 *   A new epoch is above every epoch committed in earlier lives, and by
 *   the rule every token of those lives is below it.
 * - A connection never outlives a life of the server (a restart ends
 *   every connection; automatic reconnection is off, conn.c), so arming
 *   is kept with the connection (c->seq, cleared by dlock__my_connect)
 *   and nowhere else: a new connection arms again. No epoch is cached
 *   for the tokens' sake: c->seq_epoch is only an epoch known committed.
 * - Within a life the sequence only goes up (one object shared by every
 *   connection; SETVAL never lowers it), so on one name a holder's token,
 *   drawn after the previous holder's was drawn, is above it: one source
 *   for every draw of every mode (try, wait, bump), so no two sources mix
 *   on a name and the modes' tokens stay comparable.
 * - Past 2^40 draws in one epoch the sequence simply runs into the next
 *   epoch's values: dlock__my_seq_check sees a token above the epoch its
 *   connection knows committed and commits that epoch (GREATEST, on the
 *   side connection for for_update) before the token is used; so nothing
 *   moves the tokens back, and no cached epoch can go stale.
 * - The records: a try records its token and owner in its own statement
 *   (MY_SEQ_*), a bump likewise (seq_bump); a grant drawn in get_lock's
 *   waiting statement records nothing (a record after the grant would be
 *   the second statement this saves). So inspect trusts a record only if
 *   it names the connection that holds the name (IS_USED_LOCK), and a
 *   connection first unnames its own records (seq_forget, only if it has
 *   written one since) before it waits: otherwise an older record of the
 *   same connection would pass for its new grant. for_update's holder
 *   cannot be named by connection, so its waits still record (a bump).
 *   A full table loses its records, never a marker.
 *
 * Divisions: the tables and statements; the epoch; the sequence; bump and
 * peek.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "my.h"

/* The counter's bits; the epoch has the rest but one, so a token fits a
 * signed 64-bit column too. */
#define MY_COUNTER_BITS 40
#define MY_EPOCH_MAX ((UINT64_C(1) << (63 - MY_COUNTER_BITS)) - 1)
/* Epoch changes one acquire may run into before it gives up. */
#define MY_EPOCH_TRIES 4
/* The marker's key: all zero, which no SHA-256 of a name is. */
#define MY_MARKER "REPEAT(X'00', 32)"
/* The sequence's marker (the epoch it was set above in this life of the
 * server): all 0x01, which no SHA-256 of a name is either. */
#define MY_SEQ_MARKER "REPEAT(X'01', 32)"
/* MariaDB's ER_UNKNOWN_SEQUENCES: SETVAL of a sequence that is missing. */
#define MY_ER_UNKNOWN_SEQUENCE 4091

/* ---- the tables and statements ------------------------------------------- */

const char dlock__my_fence_ddl[] =
    "CREATE TABLE IF NOT EXISTS `%s_fmem` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name;"
    " all zero: the marker',"
    " fence BIGINT UNSIGNED NOT NULL COMMENT 'the last token handed out"
    " (epoch << 40 | counter); the marker: the epoch in use',"
    " owner VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"
    " DEFAULT '' COMMENT 'client uuid:handle serial that took the token',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=MEMORY";

const char dlock__my_frec_ddl[] =
    "CREATE TABLE IF NOT EXISTS `%s_frec` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name;"
    " all 0x01: the marker of the sequence',"
    " fence BIGINT UNSIGNED NOT NULL COMMENT 'the last token recorded"
    " (NEXTVAL of _fseq); the marker: the epoch it was set above',"
    " owner VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"
    " DEFAULT '' COMMENT 'client uuid:handle serial that took the token',"
    " conn BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the connection that"
    " drew it (0: unnamed)',"
    " PRIMARY KEY (lock_key), KEY conn (conn) USING BTREE"
    ") ENGINE=MEMORY";

const char dlock__my_epoch_ddl[] =
    "CREATE TABLE IF NOT EXISTS `%s_epoch` ("
    " id TINYINT UNSIGNED NOT NULL COMMENT 'always 1',"
    " epoch BIGINT UNSIGNED NOT NULL COMMENT 'the last epoch of the"
    " tokens (fence.c): never lower it, never drop this table',"
    " PRIMARY KEY (id)"
    ") ENGINE=InnoDB";

static const struct dlock__my_stmt fence_bump = {
    MY_SLOT_FENCE,
    MY_FENCE_INSERT "SELECT ?, LAST_INSERT_ID(m.fence << 40 | 1), ? "
    "FROM `%1$s_fmem` m WHERE m.lock_key = " MY_MARKER " "
    "ON DUPLICATE KEY UPDATE "
    "fence = IF(`%1$s_fmem`.fence >= VALUES(fence) | 0xFFFFFFFFFF, "
    "`%1$s_fmem`.fence + LAST_INSERT_ID(0), "
    "LAST_INSERT_ID(GREATEST(`%1$s_fmem`.fence + 1, VALUES(fence)))), "
    "owner = VALUES(owner)"};

static const struct dlock__my_stmt fence_peek = {
    MY_SLOT_FENCE_PEEK,
    "SELECT fence, owner, 0 FROM `%s_fmem` WHERE lock_key = ?"};
static const struct dlock__my_stmt seq_peek = {
    MY_SLOT_FENCE_PEEK,
    "SELECT fence, owner, conn FROM `%s_frec` WHERE lock_key = ?"};

/* The sequence's bump: the token drawn and recorded, in one statement. */
static const struct dlock__my_stmt seq_bump = {
    MY_SLOT_FENCE,
    MY_SEQ_INSERT "VALUES (?, " MY_SEQ_DRAW ", ?, CONNECTION_ID())"
    MY_SEQ_NEXT};

static const struct dlock__my_stmt seq_forget = {
    MY_SLOT_FENCE_FORGET,
    "UPDATE `%s_frec` SET conn = 0 WHERE conn = CONNECTION_ID()"};

/* ---- the epoch ----------------------------------------------------------- */

/* Run one statement of the epoch's (printf-style: the table, then
 * numbers; nothing from a user). With v, read its one row's first column:
 * *v, 0 if there is no row or it is NULL. 0 or an error number. */
static unsigned epoch_sql(struct dlock__my_conn *c, uint64_t *v,
                          const char *fmt, ...)
{
    char q[512];
    va_list ap;
    MYSQL_RES *res;
    MYSQL_ROW row;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(q, sizeof q, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof q)
        return dlock__my_note(c, CR_UNKNOWN_ERROR,
                              "an epoch statement is too long");
    if (mysql_real_query(c->db, q, (unsigned long)n) != 0)
        return dlock__my_db_note(c);
    res = mysql_store_result(c->db);
    if (v == NULL) {
        mysql_free_result(res);
        return 0;
    }
    if (res == NULL)
        return dlock__my_db_note(c);
    row = mysql_fetch_row(res);
    *v = row != NULL && row[0] != NULL ? strtoull(row[0], NULL, 10) : 0;
    mysql_free_result(res);
    return 0;
}

/* Steps 1-3 of the header: the epoch to use now, in *out (committed), or
 * 0 when the marker moved meanwhile: the row of key mk in <table>_<mt>
 * (MY_MARKER in fmem, or MY_SEQ_MARKER in frec). */
static unsigned epoch_next(struct dlock__my_conn *c, const char *mt,
                           const char *mk, uint64_t *out)
{
    const char *t = c->x->table;
    uint64_t seen, d0, d1, m;
    unsigned e;

    *out = 0;
    if ((e = epoch_sql(c, &seen,
                       "SELECT fence FROM `%s_%s` WHERE lock_key = %s",
                       t, mt, mk)) != 0 ||
        (e = epoch_sql(c, NULL,
                       "INSERT IGNORE INTO `%s_epoch` (id, epoch) "
                       "VALUES (1, 0)", t)) != 0 ||
        (e = epoch_sql(c, &d0, "SELECT epoch FROM `%s_epoch` WHERE id = 1",
                       t)) != 0 ||
        (e = epoch_sql(c, NULL, "START TRANSACTION")) != 0)
        return e;
    if ((e = epoch_sql(c, &d1,
                       "SELECT epoch FROM `%s_epoch` WHERE id = 1 FOR UPDATE",
                       t)) != 0 ||
        (e = epoch_sql(c, &m,
                       "SELECT fence FROM `%s_%s` WHERE lock_key = %s",
                       t, mt, mk)) != 0)
        goto rollback;
    if (m != seen || d1 > d0) {
        /* Moved by someone else: their marker, or their epoch. */
        *out = m != seen ? 0 : d1;
        goto rollback;
    }
    if (d1 >= MY_EPOCH_MAX) {
        e = dlock__my_note(c, CR_UNKNOWN_ERROR,
                           "the fence epoch is used up (table _epoch)");
        goto rollback;
    }
    if ((e = epoch_sql(c, NULL,
                       "UPDATE `%s_epoch` SET epoch = %" PRIu64
                       " WHERE id = 1", t, d1 + 1)) != 0)
        goto rollback;
    if (mysql_commit(c->db) != 0)
        return dlock__my_db_note(c);
    *out = d1 + 1;
    return 0;
rollback:
    mysql_rollback(c->db);
    return e;
}

/* The marker up to epoch (never down): 0 or an error number. An UPDATE
 * needs no room in a full table; an INSERT (no marker yet) may not find
 * any, and then says ER_RECORD_FILE_FULL. */
static unsigned marker_set(struct dlock__my_conn *c, const char *mt,
                           const char *mk, uint64_t epoch)
{
    const char *t = c->x->table;
    unsigned e;

    if ((e = epoch_sql(c, NULL,
                       "UPDATE `%s_%s` SET fence = GREATEST(fence, %" PRIu64
                       ") WHERE lock_key = %s", t, mt, epoch, mk)) != 0 ||
        mysql_affected_rows(c->db) > 0)
        return e;
    return epoch_sql(c, NULL,
                     "INSERT INTO `%s_%s` (lock_key, fence) VALUES ("
                     "%s, %" PRIu64 ") ON DUPLICATE KEY UPDATE "
                     "fence = GREATEST(fence, VALUES(fence))", t, mt, mk,
                     epoch);
}

/*
 * Move the counters to a new epoch (the header's steps), on c, which is
 * in no transaction. full: the table is full, so the counters below the
 * marker's epoch go, in one statement that reads the marker itself (a
 * counter below it starts above its old value at its next bump, whatever
 * happens meanwhile). Afterwards the bump is tried again, also when
 * someone else did the moving.
 */
static unsigned fence_epoch(struct dlock__my_conn *c, bool full)
{
    uint64_t epoch;
    unsigned e;

    if ((e = epoch_next(c, "fmem", MY_MARKER, &epoch)) != 0 || epoch == 0)
        return e;
    if ((e = marker_set(c, "fmem", MY_MARKER, epoch)) != 0 || !full)
        return e;
    return epoch_sql(c, NULL,
                     "DELETE FROM `%1$s_fmem` WHERE lock_key <> " MY_MARKER
                     " AND fence < (SELECT f FROM (SELECT fence << 40 AS f"
                     " FROM `%1$s_fmem` WHERE lock_key = " MY_MARKER ") m)",
                     c->x->table);
}

/* ---- the sequence -------------------------------------------------------- */

/* The sequence, made where it is missing (DDL: c autocommits). */
static unsigned seq_create(struct dlock__my_conn *c)
{
    return epoch_sql(c, NULL,
                     "CREATE SEQUENCE IF NOT EXISTS `%s_fseq` START WITH 1"
                     " MINVALUE 1 MAXVALUE 9223372036854775806"
                     " INCREMENT BY 1 CACHE 1000 NOCYCLE",
                     c->x->table);
}

/* The sequence up to epoch << 40, never down (SETVAL ignores a value
 * below the sequence's). */
static unsigned seq_setval(struct dlock__my_conn *c, uint64_t epoch)
{
    return epoch_sql(c, NULL, "SELECT SETVAL(`%s_fseq`, %" PRIu64 ")",
                     c->x->table, epoch << MY_COUNTER_BITS);
}

/*
 * On c, which autocommits: the epoch the sequence was set above in this
 * life of the server (its marker), setting it first if nobody has: a new
 * epoch committed (epoch_next, as for the counters), the sequence moved
 * to epoch << 40 (SETVAL never lowers it), and only then the marker.
 */
static unsigned seq_arm(struct dlock__my_conn *c, uint64_t *epoch)
{
    const char *t = c->x->table;
    bool made = false;
    unsigned e;

    for (int i = 0; i < MY_EPOCH_TRIES; i++) {
        uint64_t m, next;

        e = epoch_sql(c, &m,
                      "SELECT fence FROM `%s_frec` WHERE lock_key = "
                      MY_SEQ_MARKER, t);
        if (e != 0 && dlock__my_missing(e) && !made) {
            made = true;
            if ((e = dlock__my_create_tables(c)) != 0)
                return e;
            continue;
        }
        if (e != 0)
            return e;
        if (m != 0) {
            *epoch = m;
            return 0;
        }
        if ((e = epoch_next(c, "frec", MY_SEQ_MARKER, &next)) != 0)
            return e;
        if (next == 0)
            continue; /* armed by someone else meanwhile */
        /* CREATE SEQUENCE only where it is missing: it waits for the
         * metadata locks of every open transaction that used it. */
        e = seq_setval(c, next);
        if (e != 0 && (dlock__my_missing(e) || e == MY_ER_UNKNOWN_SEQUENCE) &&
            (e = seq_create(c)) == 0)
            e = seq_setval(c, next);
        if (e != 0 || (e = marker_set(c, "frec", MY_SEQ_MARKER, next)) != 0)
            return e;
        *epoch = next;
        return 0;
    }
    return dlock__my_note(c, CR_UNKNOWN_ERROR,
                          "the fence sequence's marker keeps vanishing "
                          "(table _frec cleared?)");
}

/* On c, which autocommits: the durable epoch up to epoch (never down), and
 * the sequence's marker with it. */
static unsigned seq_raise(struct dlock__my_conn *c, uint64_t epoch)
{
    const char *t = c->x->table;
    uint64_t d;
    unsigned e;

    if (epoch > MY_EPOCH_MAX)
        return dlock__my_note(c, CR_UNKNOWN_ERROR,
                              "the fence epoch is used up (sequence _fseq)");
    if ((e = epoch_sql(c, NULL,
                       "INSERT IGNORE INTO `%s_epoch` (id, epoch) "
                       "VALUES (1, 0)", t)) != 0 ||
        (e = epoch_sql(c, NULL, "START TRANSACTION")) != 0)
        return e;
    if ((e = epoch_sql(c, &d,
                       "SELECT epoch FROM `%s_epoch` WHERE id = 1 FOR UPDATE",
                       t)) != 0 ||
        (d < epoch &&
         (e = epoch_sql(c, NULL,
                        "UPDATE `%s_epoch` SET epoch = %" PRIu64
                        " WHERE id = 1", t, epoch)) != 0)) {
        mysql_rollback(c->db);
        return e;
    }
    if (mysql_commit(c->db) != 0)
        return dlock__my_db_note(c);
    return marker_set(c, "frec", MY_SEQ_MARKER, epoch);
}

/* What goes over the side connection: what commits. */
enum fence_side_job {
    SIDE_EPOCH,
    SIDE_EPOCH_FULL,
    SIDE_TABLES,
    SIDE_SEQ_ARM,  /* seq_arm into *epoch */
    SIDE_SEQ_RAISE /* seq_raise to *epoch */
};

/* job over x's side connection, for c in a transaction; an error is
 * reported on c, which stays as it was. */
static unsigned fence_side(struct dlock__my_conn *c, struct dlock__my_ctx *x,
                           enum fence_side_job job, uint64_t *epoch)
{
    struct dlock__my_conn *s = &x->fence;
    unsigned e = 0;

    pthread_mutex_lock(&x->mu);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (x->fence_open && s->broken) {
            dlock__my_conn_close(s);
            x->fence_open = false;
        }
        if (!x->fence_open) {
            if ((e = dlock__my_connect(s, x, false)) != 0)
                break;
            x->fence_open = true;
        }
        switch (job) {
        case SIDE_TABLES:
            e = dlock__my_create_tables(s);
            break;
        case SIDE_SEQ_ARM:
            e = seq_arm(s, epoch);
            break;
        case SIDE_SEQ_RAISE:
            e = seq_raise(s, *epoch);
            break;
        case SIDE_EPOCH:
        case SIDE_EPOCH_FULL:
            e = fence_epoch(s, job == SIDE_EPOCH_FULL);
            break;
        }
        if (e == 0 || !s->broken)
            break;
    }
    if (e != 0) {
        bool broken = c->broken;
        dlock__my_note(c, e, s->msg);
        c->broken = broken;
    }
    pthread_mutex_unlock(&x->mu);
    return e;
}

void dlock__my_fence_side_close(struct dlock__my_ctx *x)
{
    if (x->fence_open)
        dlock__my_conn_close(&x->fence);
    x->fence_open = false;
}

/* ---- bump and peek ------------------------------------------------------- */

bool dlock__my_seq_capable(const struct dlock__my_conn *c)
{
    const char *v;

    if (c->x->fence_counters || c->db == NULL)
        return false;
    v = mysql_get_server_info(c->db);
    return v != NULL && strstr(v, "MariaDB") != NULL &&
           mysql_get_server_version(c->db) >= 100300;
}

unsigned dlock__my_seq_ready(struct dlock__my_conn *c,
                             struct dlock__my_ctx *side)
{
    uint64_t m = 0;
    unsigned e;

    if (c->seq != MY_SEQ_UNKNOWN)
        return 0;
    if (!dlock__my_seq_capable(c)) {
        c->seq = MY_SEQ_OFF;
        return 0;
    }
    /* The marker read on c itself (a MEMORY table: no transaction
     * matters); arming commits, so for_update's goes over the side. */
    e = epoch_sql(c, &m,
                  "SELECT fence FROM `%s_frec` WHERE lock_key = "
                  MY_SEQ_MARKER, c->x->table);
    if (e != 0 && !dlock__my_missing(e))
        return e;
    if (e != 0 || m == 0) {
        e = side != NULL ? fence_side(c, side, SIDE_SEQ_ARM, &m)
                         : seq_arm(c, &m);
        if (e != 0)
            return e;
    }
    c->seq = MY_SEQ_ON;
    c->seq_epoch = m;
    return 0;
}

unsigned dlock__my_seq_check(struct dlock__my_conn *c,
                             struct dlock__my_ctx *side, uint64_t token)
{
    uint64_t epoch = token >> MY_COUNTER_BITS;
    unsigned e;

    if (epoch <= c->seq_epoch)
        return 0;
    e = side != NULL ? fence_side(c, side, SIDE_SEQ_RAISE, &epoch)
                     : seq_raise(c, epoch);
    if (e == 0)
        c->seq_epoch = epoch;
    return e;
}

unsigned dlock__my_seq_forget(struct dlock__my_conn *c)
{
    unsigned e;

    if (!c->recorded)
        return 0;
    if ((e = dlock__my_exec(c, &seq_forget, NULL)) == 0)
        c->recorded = false;
    return e;
}

unsigned dlock__my_seq_room(struct dlock__my_conn *c)
{
    return epoch_sql(c, NULL,
                     "DELETE FROM `%s_frec` WHERE lock_key <> "
                     MY_SEQ_MARKER,
                     c->x->table);
}

/* dlock__my_fence where the tokens come from the sequence: the bump
 * draws and records in one statement. A full table loses its records
 * (they only inform inspect), never a marker. */
static unsigned seq_fence(struct dlock__my_conn *c, struct dlock__my_ctx *side,
                          MYSQL_BIND *p, uint64_t *out)
{
    unsigned e;

    for (int i = 0; i < MY_EPOCH_TRIES; i++) {
        c->no_ddl = side != NULL;
        e = dlock__my_exec(c, &seq_bump, p);
        c->no_ddl = false;
        if (e == 0) {
            *out = (uint64_t)mysql_stmt_insert_id(c->st[seq_bump.slot]);
            c->recorded = true;
            return dlock__my_seq_check(c, side, *out);
        }
        if (side != NULL && dlock__my_missing(e)) {
            if ((e = fence_side(c, side, SIDE_TABLES, NULL)) != 0)
                return e;
            continue;
        }
        if (e != ER_RECORD_FILE_FULL || (e = dlock__my_seq_room(c)) != 0)
            return e;
    }
    return dlock__my_note(c, CR_UNKNOWN_ERROR,
                          "no room for a fence's record (table _frec)");
}

unsigned dlock__my_fence(struct dlock__my_conn *c, struct dlock__my_ctx *side,
                         const uint8_t key[MY_KEY_LEN], const char *owner,
                         size_t owner_len, uint64_t *out)
{
    MYSQL_BIND p[2];
    unsigned e = 0;

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], owner, owner_len);
    if ((e = dlock__my_seq_ready(c, side)) != 0)
        return e;
    if (c->seq == MY_SEQ_ON)
        return seq_fence(c, side, p, out);
    for (int i = 0; i < MY_EPOCH_TRIES; i++) {
        bool full;

        c->no_ddl = side != NULL;
        e = dlock__my_exec(c, &fence_bump, p);
        c->no_ddl = false;
        if (e == 0 &&
            (*out = (uint64_t)mysql_stmt_insert_id(c->st[fence_bump.slot])) !=
                0)
            return 0;
        /* A table missing where c may not make it: a CREATE TABLE would
         * commit c's transaction, and the lock with it. */
        if (side != NULL && dlock__my_missing(e)) {
            if ((e = fence_side(c, side, SIDE_TABLES, NULL)) != 0)
                return e;
            continue;
        }
        if (e != 0 && e != ER_RECORD_FILE_FULL)
            return e;
        /* No marker, the counter used up, or the table full. */
        full = e != 0;
        e = side != NULL ? fence_side(c, side,
                                      full ? SIDE_EPOCH_FULL : SIDE_EPOCH,
                                      NULL)
                         : fence_epoch(c, full);
        if (e != 0)
            return e;
    }
    return dlock__my_note(c, CR_UNKNOWN_ERROR,
                          "no fence after moving to a new epoch "
                          "repeatedly (table _fmem full or cleared?)");
}

unsigned dlock__my_fence_with(struct dlock__my_conn *c,
                              const struct dlock__my_stmt *q,
                              MYSQL_BIND *params, my_ulonglong *rows,
                              uint64_t *out)
{
    unsigned e;

    *rows = 0;
    *out = 0;
    if ((e = dlock__my_exec(c, q, params)) != 0)
        return e;
    /* CLIENT_FOUND_ROWS: a row written, or matched by the upsert and left
     * as it was (the counter ran out), counts. */
    *rows = dlock__my_affected(c, q);
    *out = (uint64_t)mysql_stmt_insert_id(c->st[q->slot]);
    return 0;
}

unsigned dlock__my_fence_prepare(struct dlock__my_conn *c)
{
    unsigned e;

    if ((e = dlock__my_seq_ready(c, NULL)) != 0)
        return e;
    return dlock__my_prepare(c, c->seq == MY_SEQ_ON ? &seq_bump
                                                    : &fence_bump) == NULL
               ? c->err
               : 0;
}

unsigned dlock__my_fence_peek(struct dlock__my_conn *c,
                              const uint8_t key[MY_KEY_LEN], uint64_t *out,
                              char *owner, size_t owner_cap, uint64_t *conn)
{
    MYSQL_BIND p[1], r[3];
    char buf[65];
    unsigned long len = 0;
    long long v = 0, id = 0;
    my_flag null = 1, owner_null = 1, id_null = 1;
    const struct dlock__my_stmt *q;
    bool found = false;
    unsigned e;

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_res_i64(&r[0], &v, &null);
    dlock__my_res_bytes(&r[1], buf, sizeof buf - 1, &len, &owner_null);
    dlock__my_res_i64(&r[2], &id, &id_null);
    q = dlock__my_seq_capable(c) ? &seq_peek : &fence_peek;
    if ((e = dlock__my_exec(c, q, p)) == 0)
        e = dlock__my_fetch(c, q, r, &found);
    if (e != 0)
        return e;
    *out = found && !null ? (uint64_t)v : 0;
    if (conn != NULL)
        *conn = found && !id_null ? (uint64_t)id : 0;
    if (len > sizeof buf - 1)
        len = sizeof buf - 1;
    buf[found && !owner_null ? len : 0] = '\0';
    if (owner != NULL && owner_cap > 0)
        snprintf(owner, owner_cap, "%s", buf);
    return 0;
}
