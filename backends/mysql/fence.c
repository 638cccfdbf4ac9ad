/*
 * fence.c: the fencing tokens of every mode. A counter row per name in
 * <table>_fence, bumped after the lock is held by
 *     INSERT … VALUES (key, LAST_INSERT_ID(1))
 *     ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)
 * whose OK packet carries the new value (mysql_stmt_insert_id), so no
 * SELECT follows. The bump is always autocommitted: a token handed out
 * must never be handed out again, even if the lock is lost before it is
 * released. (for_update.c therefore bumps over a side connection of its
 * own.) The table is created with the mode's others, on first use.
 *
 * Divisions: the table and statements; bump and peek.
 */
#include "my.h"

/* ---- the table and statements -------------------------------------------- */

const char dlock__my_fence_ddl[] =
    "CREATE TABLE IF NOT EXISTS `%s_fence` ("
    " lock_key BINARY(32) NOT NULL COMMENT 'SHA-256 of namespace || name',"
    " fence BIGINT UNSIGNED NOT NULL COMMENT 'the last token handed out',"
    " PRIMARY KEY (lock_key)"
    ") ENGINE=InnoDB";

static const struct dlock__my_stmt fence_bump = {
    MY_SLOT_FENCE,
    "INSERT INTO `%s_fence` (lock_key, fence) VALUES (?, "
    "LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE "
    "fence = LAST_INSERT_ID(fence + 1)"};

static const struct dlock__my_stmt fence_peek = {
    MY_SLOT_FENCE_PEEK, "SELECT fence FROM `%s_fence` WHERE lock_key = ?"};

/* ---- bump and peek ------------------------------------------------------- */

/*
 * With LAST_INSERT_ID(expr), insert_id is expr. The caller holds the lock,
 * so only a cross-mode user of the same name could contend on the row; a
 * deadlock there is retried.
 */
unsigned dlock__my_fence(struct dlock__my_conn *c,
                         const uint8_t key[MY_KEY_LEN], uint64_t *out)
{
    MYSQL_BIND p[1];
    unsigned e = 0;

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
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
                              const uint8_t key[MY_KEY_LEN], uint64_t *out)
{
    MYSQL_BIND p[1];
    long long v;
    my_flag null;
    bool found;
    unsigned e;

    dlock__my_bind_blob(&p[0], key, MY_KEY_LEN);
    if ((e = dlock__my_select_i64(c, &fence_peek, p, &v, &null, &found)) != 0)
        return e;
    *out = found && !null ? (uint64_t)v : 0;
    return 0;
}
