/* Built against an installed dlock with pkg-config: the public header and
 * the shared library are enough to take and release a lock. */
#include <dlock/dlock.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    dlock_client *c = NULL;
    dlock_lock *lk = NULL;
    int rc;

    if (argc < 2)
        return 2;
    rc = dlock_client_open(&c, argv[1], NULL);
    if (rc == DLOCK_OK)
        rc = dlock_lock_new(&lk, c, "installed", NULL);
    if (rc == DLOCK_OK)
        rc = dlock_acquire(lk, 1000);
    if (rc == DLOCK_OK)
        rc = dlock_release(lk);
    printf("dlock %s: %s\n", dlock_version(), dlock_strerror(rc));
    dlock_lock_free(lk);
    dlock_client_close(c);
    return rc == DLOCK_OK ? 0 : 1;
}
