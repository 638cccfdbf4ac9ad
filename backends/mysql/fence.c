/*
 * fence.c: the fencing tokens of every mode. A counter row per name in
 * <table>_fence, bumped after the lock is held by
 *     INSERT … VALUES (key, LAST_INSERT_ID(1))
 *     ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)
 * whose OK packet carries the new value (mysql_stmt_insert_id), so no
 * SELECT follows. The row also names the owner that took the token, which
 * is the holder while an exclusive lock is held (a shared holder of
 * for_update leaves the name empty): how
 * `dlock inspect` shows the holder's DLOCK_OWNER on modes whose own state
 * cannot (GET_LOCK knows a connection id; a FOR UPDATE row's owner is not
 * committed). The bump is always autocommitted: a token handed out
 * must never be handed out again, even if the lock is lost before it is
 * released. (for_update.c therefore bumps over a side connection of its
 * own.) The table is created with the mode's others, on first use.
 *
 * Divisions: the table and statements; bump and peek.
 */
#include <stdio.h>
#include <string.h>

#include "my.h"

#define MY_FENCE_OWNER_COLUMN                                              \
    " owner VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"    \
    " DEFAULT '' COMMENT 'client uuid:handle serial that took the token'"

/* ---- the table and statements -------------------------------------------- */

const char dlock__my_fence_ddl[] =
    "CREATE TABLE IF NOT EXISTS `%s_fence` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " fence BIGINT UNSIGNED NOT NULL COMMENT 'the last token handed out',"
    MY_FENCE_OWNER_COLUMN ","
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB";

/* A table from before the column: run when a statement names a column the
 * table lacks (conn.c), and after the CREATE, where it fails as a
 * duplicate, which conn.c ignores (MySQL has no ADD COLUMN IF NOT
 * EXISTS). */
const char dlock__my_fence_owner_ddl[] =
    "ALTER TABLE `%s_fence` ADD COLUMN" MY_FENCE_OWNER_COLUMN;

static const struct dlock__my_stmt fence_bump = {
    MY_SLOT_FENCE,
    "INSERT INTO `%s_fence` (lock_key, fence, owner) VALUES (?, "
    "LAST_INSERT_ID(1), ?) ON DUPLICATE KEY UPDATE "
    "fence = LAST_INSERT_ID(fence + 1), owner = VALUES(owner)"};

static const struct dlock__my_stmt fence_peek = {
    MY_SLOT_FENCE_PEEK,
    "SELECT fence, owner FROM `%s_fence` WHERE lock_key = ?"};

/* ---- bump and peek ------------------------------------------------------- */

/*
 * With LAST_INSERT_ID(expr), insert_id is expr. The caller holds the lock,
 * so only a cross-mode user of the same name could contend on the row; a
 * deadlock there is retried.
 */
unsigned dlock__my_fence(struct dlock__my_conn *c,
                         const uint8_t key[MY_KEY_LEN], const char *owner,
                         size_t owner_len, uint64_t *out)
{
    MYSQL_BIND p[2];
    unsigned e = 0;

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_bind_text(&p[1], owner, owner_len);
    for (int i = 0; i < 3; i++) {
        e = dlock__my_exec(c, &fence_bump, p);
        if (e != ER_LOCK_DEADLOCK && e != ER_LOCK_WAIT_TIMEOUT)
            break;
    }
    if (e != 0)
        return e;
    *out = (uint64_t)mysql_stmt_insert_id(c->st[fence_bump.slot]);
    if (*out == 0)
        return dlock__my_note(c, CR_UNKNOWN_ERROR,
                              "the fence upsert returned no token");
    return 0;
}

unsigned dlock__my_fence_prepare(struct dlock__my_conn *c)
{
    return dlock__my_prepare(c, &fence_bump) == NULL ? c->err : 0;
}

unsigned dlock__my_fence_peek(struct dlock__my_conn *c,
                              const uint8_t key[MY_KEY_LEN], uint64_t *out,
                              char *owner, size_t owner_cap)
{
    MYSQL_BIND p[1], r[2];
    char buf[65];
    unsigned long len = 0;
    long long v = 0;
    my_flag null = 1, owner_null = 1;
    bool found = false;
    unsigned e;

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    dlock__my_res_i64(&r[0], &v, &null);
    dlock__my_res_bytes(&r[1], buf, sizeof buf - 1, &len, &owner_null);
    if ((e = dlock__my_exec(c, &fence_peek, p)) == 0)
        e = dlock__my_fetch(c, &fence_peek, r, &found);
    if (e != 0)
        return e;
    *out = found && !null ? (uint64_t)v : 0;
    if (len > sizeof buf - 1)
        len = sizeof buf - 1;
    buf[found && !owner_null ? len : 0] = '\0';
    if (owner != NULL && owner_cap > 0)
        snprintf(owner, owner_cap, "%s", buf);
    return 0;
}
