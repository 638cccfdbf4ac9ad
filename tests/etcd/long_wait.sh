#!/usr/bin/env bash
# long_wait.sh: a waiter that waits longer than its lease still holds
# what it is granted (under tests/servers/with-servers.sh etcd;
# $DLOCK_TEST_DLOCK is the built command), in mode mutex (rwlock's
# writers and readers are granted by the same code). A holds the
# name for 3 s with lease=1s; B, with lease=1s too, waits for it (its wait
# keeps its own etcd lease alive) and then runs a command for 1.5 s, past
# its lease counted from when it asked: B must run it to the end, not be
# told at its first renewal that the lease ran out. Prints "N passed, N
# failed".
set -u

what=longwait
# shellcheck source=tests/etcd/lib.sh
. "$(dirname "$0")/lib.sh"

mode=mutex
uri="$DLOCK_TEST_ETCD_URI?lease=1s&mode=$mode"
name=longwait-$$
f=$work/$mode
"$DLOCK" exec --uri "$uri" "$name" -- sh -c "touch '$f.a'; sleep 3" \
    2>"$f.a-err" &
pids+=("$!")
if wait_for "$f.a"; then
    "$DLOCK" exec --uri "$uri" --timeout 15s "$name" -- \
        sh -c "sleep 1.5; touch '$f.b'" 2>"$f.b-err"
    expect_status "$mode: B waited ~3 s, then held for 1.5 s" 0 $?
    if [ -e "$f.b" ]; then
        ok "$mode: B's command ran to the end"
    else
        not_ok "$mode: B's command was stopped: $(cat "$f.b-err")"
    fi
else
    not_ok "$mode: holder A did not start: $(cat "$f.a-err")"
fi
finish
