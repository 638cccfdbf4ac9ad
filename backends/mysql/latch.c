/*
 * latch.c: count-down latches on MySQL and MariaDB [B-LATCH-1], in every
 * mode. A latch is a row of `<table>_latch` (made on first use with the
 * mode's tables: each mode's ddl lists dlock__my_latch_ddl), keyed by the
 * name's key; count is always positive, zero is "no row". set is INSERT
 * IGNORE (one row per key) and, when a row was there, a read of it. down
 * is "count - 1 where count > 1" (InnoDB's row lock orders concurrent
 * ones; the new count comes back through LAST_INSERT_ID()), else "delete
 * where count = 1", else a read (no row: it was open; a row: another
 * step came between, so go again). Each step commits (mode for_update's
 * connections do not autocommit).
 *
 * Neither server can notify a client, so there is no await(): core polls
 * count() with backoff from MY_LATCH_POLL_MIN_MS to MY_LATCH_POLL_MAX_MS,
 * and an awaiting process returns up to that long after the count-down.
 * The ceiling keeps that within the 50 ms a latch promises (issue 14):
 * one primary-key read per awaiting process every 25 ms once it has
 * waited a while (40 a second, a fraction of a millisecond of server time
 * each).
 */
#include <stdio.h>
#include <stdlib.h>

#include "my.h"

#define MY_LATCH_POLL_MIN_MS 5
#define MY_LATCH_POLL_MAX_MS 25
/* Rounds lost to other steps before giving up. */
#define MY_LATCH_TRIES 200

const char dlock__my_latch_ddl[] =
    "CREATE TABLE IF NOT EXISTS `%s_latch` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
    " COMMENT 'the name, cut to 255 bytes, for people',"
    " count INT UNSIGNED NOT NULL COMMENT 'a count-down latch, above 0',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

static const struct dlock__my_stmt latch_insert = {
    MY_SLOT_LATCH_SET,
    "INSERT IGNORE INTO `%s_latch` (lock_key, name, count) VALUES (?, ?, ?)"};
static const struct dlock__my_stmt latch_count = {
    MY_SLOT_LATCH_COUNT, "SELECT count FROM `%s_latch` WHERE lock_key = ?"};
static const struct dlock__my_stmt latch_down = {
    MY_SLOT_LATCH_DOWN,
    "UPDATE `%s_latch` SET count = LAST_INSERT_ID(count - 1)"
    " WHERE lock_key = ? AND count > 1"};
static const struct dlock__my_stmt latch_zero = {
    MY_SLOT_LATCH_ZERO,
    "DELETE FROM `%s_latch` WHERE lock_key = ? AND count = 1"};

enum { LATCH_COUNT, LATCH_SET, LATCH_DOWN };

/* Read the count of key (no row: 0). */
static unsigned read_count(struct dlock__my_conn *c, MYSQL_BIND *key,
                           uint32_t *count)
{
    long long v = 0;
    my_flag null = 0;
    bool found;
    unsigned e = dlock__my_select_i64(c, &latch_count, key, &v, &null,
                                      &found);

    *count = e == 0 && found && !null && v > 0 ? (uint32_t)v : 0;
    return e;
}

/* One step; *out is the count before it. */
static unsigned latch_try(struct dlock__my_conn *c, MYSQL_BIND *p, int op,
                          uint32_t *out, bool *done)
{
    long long left;
    unsigned e;

    *done = true;
    if (op == LATCH_SET) {
        if ((e = dlock__my_exec(c, &latch_insert, p)) != 0)
            return e;
        if (dlock__my_affected(c, &latch_insert) == 1) {
            *out = 0;
            return 0;
        }
    } else if (op == LATCH_DOWN) {
        if ((e = dlock__my_exec(c, &latch_down, p)) != 0)
            return e;
        if (dlock__my_affected(c, &latch_down) == 1) {
            /* LAST_INSERT_ID(expr) is this connection's: count - 1. */
            MYSQL_RES *r;
            if (mysql_query(c->db, "SELECT LAST_INSERT_ID()") != 0 ||
                (r = mysql_store_result(c->db)) == NULL)
                return dlock__my_db_note(c);
            MYSQL_ROW row = mysql_fetch_row(r);
            left = row != NULL && row[0] != NULL ? atoll(row[0]) : 0;
            mysql_free_result(r);
            *out = (uint32_t)left + 1;
            return 0;
        }
        if ((e = dlock__my_exec(c, &latch_zero, p)) != 0)
            return e;
        if (dlock__my_affected(c, &latch_zero) == 1) {
            *out = 1;
            return 0;
        }
    }
    if ((e = read_count(c, p, out)) != 0)
        return e;
    /* set: a row was there (or went meanwhile: again); down: none was
     * there (open), or one came between (again). */
    *done = op == LATCH_COUNT || (op == LATCH_SET ? *out > 0 : *out == 0);
    return 0;
}

static int latch_op(struct dlock_session *s, const char *name, size_t len,
                    int op, uint32_t count, uint32_t *out)
{
    struct dlock__my_session *ms = (struct dlock__my_session *)s;
    struct dlock__my_conn *c = &ms->conn;
    uint8_t key[MY_KEY_LEN];
    long long n = count;
    MYSQL_BIND p[3];
    bool done = false;
    unsigned e = 0;

    if (c->broken)
        return dlock__my_broken(ms);
    dlock__my_key(ms->x, name, len, key);
    for (int tries = 0; tries < MY_LATCH_TRIES && !done; tries++) {
        /* The binding of the statement run: key first, then set's. */
        dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
        dlock__my_bind_text(&p[1], name, dlock__my_display_len(name, len));
        dlock__my_bind_i64(&p[2], &n);
        e = latch_try(c, p, op, out, &done);
        if (e == 0 && mysql_commit(c->db) != 0)
            e = dlock__my_db_note(c);
        if (e == ER_LOCK_WAIT_TIMEOUT || e == ER_LOCK_DEADLOCK ||
            e == MY_ER_LOCK_NOWAIT) {
            /* for_update's connections wait for no row lock (their
             * innodb_lock_wait_timeout is a lock's): step back, again. */
            mysql_rollback(c->db);
            done = false;
            e = 0;
            dlock_session_poll(s, -1, 0, dlock_now_ms() + 1 + tries % 8);
            continue;
        }
        if (e != 0)
            break;
    }
    if (e != 0) {
        mysql_rollback(c->db);
        return dlock__my_fail(ms, c, op == LATCH_SET    ? "latch set"
                                     : op == LATCH_DOWN ? "latch down"
                                                        : "latch count");
    }
    if (!done)
        return dlock_session_error(s, DLOCK_ERROR,
                                   "the latch kept changing under %d "
                                   "attempts",
                                   MY_LATCH_TRIES);
    return DLOCK_OK;
}

static int my_latch_set(struct dlock_session *s, const char *name,
                        size_t len, uint32_t count, uint32_t *current)
{
    return latch_op(s, name, len, LATCH_SET, count, current);
}

static int my_latch_down(struct dlock_session *s, const char *name,
                         size_t len, uint32_t *left)
{
    int rc = latch_op(s, name, len, LATCH_DOWN, 0, left);

    if (rc == DLOCK_OK && *left > 0)
        (*left)--;
    return rc;
}

static int my_latch_count(struct dlock_session *s, const char *name,
                          size_t len, uint32_t *count)
{
    return latch_op(s, name, len, LATCH_COUNT, 0, count);
}

const struct dlock_latch_ops dlock__my_latch = {
    .set = my_latch_set,
    .down = my_latch_down,
    .count = my_latch_count,
    .poll_min_ms = MY_LATCH_POLL_MIN_MS,
    .poll_max_ms = MY_LATCH_POLL_MAX_MS,
};
