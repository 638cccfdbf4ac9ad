# Sourced by tests/cli/test_cli.sh: make the lock NAME held by `dlock exec`
# (pid PID) be lost on postgres://.
#
# Connection-bound modes (advisory, advisory_xact, for_update): the lock
# lives as long as the holder's server connection, so end that connection
# the way an administrator or a failover would, with pg_terminate_backend()
# on every connection whose application_name is the holder's (the backend
# names its connections "dlock:<pid>", and appends " owner:<id>" in the
# transaction that holds a lock of advisory_xact or for_update). The
# server frees the lock at once; the holder's next renewal finds the
# connection gone.
#
# mode=lease: the lock is a row that outlives connections (a terminated
# connection is just reopened), so lose it as for any lease: stop the
# holder past its lease, let another client take the lock, resume.
lose_lock() { # NAME PID
    case "$uri" in
    *mode=lease*)
        kill -STOP "$2"
        sleep 2
        "$DLOCK" exec --timeout 10s "$1" -- true >/dev/null 2>&1
        kill -CONT "$2"
        ;;
    *)
        psql -X -q -At "${DLOCK_TEST_PG_ADMIN_URI:?run under with-servers.sh pg}" \
            -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE split_part(application_name, ' ', 1) = 'dlock:$2'" >/dev/null
        ;;
    esac
}
