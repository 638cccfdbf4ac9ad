# cli_lose_lock.sh: how tests/cli/test_cli.sh makes `dlock exec` lose its
# lock on zk:// (sourced there; defines lose_lock NAME PID).
#
# A ZooKeeper lock lives as long as its holder's session, and the session
# lives as long as the holder's client sends heartbeats. Stop the holder
# (its client's I/O thread stops with it) and let another `dlock exec` wait
# for the lock: it gets it once the server has expired the holder's session
# and deleted its node (the conformance URIs use a 3 s session). Then let
# the holder go on: its client learns the session expired, the watchdog
# reports the lock lost, and dlock exec ends the command with SIGTERM and
# exits 75.
lose_lock() { # name dlock-pid
    kill -STOP "$2"
    "$DLOCK" exec --timeout 30s "$1" -- true >/dev/null 2>&1
    kill -CONT "$2"
}
