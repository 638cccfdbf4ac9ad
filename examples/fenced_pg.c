/*
 * fenced_pg.c: a write that a stale lock holder cannot make. The lock's
 * fencing token goes into the row with the write, and the write is applied
 * only if no newer holder has written: a holder that paused past its lease
 * (and so lost the lock without knowing it yet) is refused by the storage
 * itself, not by dlock.
 *
 *   fenced_pg NAME ACCOUNT AMOUNT
 *
 * The lock's URI comes from $DLOCK_URI (any backend and mode with fencing
 * tokens); the data's from $DATABASE_URL (a libpq connection string, e.g.
 * postgres://user:pw@host/db). Adds AMOUNT to ACCOUNT's balance in the
 * table fenced_accounts (created if missing). Every value goes to the
 * server as a bound parameter.
 *
 * exit: 0 written; 1 busy (waited 5 s); 75 refused: a newer holder's fence
 * is in the row, or the lock was lost; 64 bad arguments, or a mode without
 * fencing tokens; 69 a service cannot be reached; 70 anything else.
 *
 * Build: cc fenced_pg.c $(pkg-config --cflags --libs dlock libpq)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock/dlock.h>
#include <libpq-fe.h>

/* Run one statement with text parameters; returns its result, or NULL
 * after printing the error. */
static PGresult *run(PGconn *db, const char *sql, int n,
                     const char *const *params, ExecStatusType want)
{
    PGresult *r = PQexecParams(db, sql, n, NULL, params, NULL, NULL, 0);

    if (PQresultStatus(r) != want) {
        fprintf(stderr, "fenced_pg: %s", PQerrorMessage(db));
        PQclear(r);
        return NULL;
    }
    return r;
}

int main(int argc, char **argv)
{
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    PGconn *db = NULL;
    PGresult *r;
    char fence[24], *end;
    int rc, code = 70;

    if (argc != 4) {
        fprintf(stderr, "usage: fenced_pg NAME ACCOUNT AMOUNT\n");
        return 64;
    }
    (void)strtoll(argv[3], &end, 10);
    if (argv[3][0] == '\0' || *end != '\0') {
        fprintf(stderr, "fenced_pg: AMOUNT: '%s' is not a whole number\n",
                argv[3]);
        return 64;
    }
    db = PQconnectdb(getenv("DATABASE_URL") ? getenv("DATABASE_URL") : "");
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "fenced_pg: DATABASE_URL: %s", PQerrorMessage(db));
        PQfinish(db);
        return 69;
    }
    /* numeric(20): every 64-bit fence, exactly. */
    r = run(db,
            "CREATE TABLE IF NOT EXISTS fenced_accounts (id text PRIMARY KEY,"
            " balance bigint NOT NULL DEFAULT 0,"
            " fence numeric(20) NOT NULL DEFAULT 0)",
            0, NULL, PGRES_COMMAND_OK);
    if (r == NULL)
        goto out;
    PQclear(r);

    rc = dlock_client_open(&c, NULL, NULL);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "fenced_pg: %s\n", dlock_client_errmsg(c));
        code = rc == DLOCK_ECONNECT ? 69 : 64;
        goto out;
    }
    rc = dlock_lock_new(&lk, c, argv[1], NULL);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "fenced_pg: NAME: %s\n", dlock_client_errmsg(c));
        code = 64;
        goto out;
    }
    rc = dlock_acquire(lk, 5000);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "fenced_pg: %s\n", dlock_lock_errmsg(lk));
        code = rc == DLOCK_EBUSY || rc == DLOCK_ETIMEDOUT ? 1
               : rc == DLOCK_ECONNECT                     ? 69
                                                          : 70;
        goto out;
    }
    if (dlock_fence(lk) == 0) {
        fprintf(stderr, "fenced_pg: this lock's mode gives no fencing "
                "tokens (see `dlock info`): pick one that does\n");
        code = 64;
        goto out;
    }
    snprintf(fence, sizeof fence, "%" PRIu64, dlock_fence(lk));
    {
        const char *ins[] = {argv[2]};
        const char *upd[] = {argv[2], argv[3], fence};

        r = run(db, "INSERT INTO fenced_accounts (id) VALUES ($1)"
                    " ON CONFLICT (id) DO NOTHING",
                1, ins, PGRES_COMMAND_OK);
        if (r == NULL)
            goto out;
        PQclear(r);
        /* The fence check and the write are one statement: no newer
         * holder can slip between them. */
        r = run(db,
                "UPDATE fenced_accounts SET balance = balance + $2::bigint,"
                " fence = $3::numeric WHERE id = $1 AND fence < $3::numeric",
                3, upd, PGRES_COMMAND_OK);
        if (r == NULL)
            goto out;
        if (strcmp(PQcmdTuples(r), "1") == 0) {
            printf("fenced_pg: %s += %s with fence %s\n", argv[2], argv[3],
                   fence);
            code = 0;
        } else {
            fprintf(stderr, "fenced_pg: refused: %s carries a fence newer "
                    "than %s (another holder wrote after this lock was "
                    "lost)\n", argv[2], fence);
            code = 75;
        }
        PQclear(r);
    }
    rc = dlock_release(lk);
    if (rc != DLOCK_OK) {
        /* The write is fenced, so a loss cannot have let a stale write
         * in; say it anyway. */
        fprintf(stderr, "fenced_pg: release: %s\n", dlock_lock_errmsg(lk));
        if (code == 0 && rc == DLOCK_ELOST)
            code = 75;
    }
out:
    dlock_lock_free(lk);
    dlock_client_close(c);
    PQfinish(db);
    return code;
}
