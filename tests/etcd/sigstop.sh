#!/usr/bin/env bash
# sigstop.sh: a holder SIGSTOPped past its lease on one etcd (under
# tests/servers/with-servers.sh etcd; $DLOCK_TEST_DLOCK is the built
# command), in both modes. Holder A is `dlock exec` with lease=2s (an etcd
# lease of 3 s); it is stopped, and B, a `dlock exec` waiting for the same
# name, gets the lock once A's etcd lease has run out: not before A's
# lease (counted from A's last renewal) could have ended, and within a
# bound. When A resumes it is told: its command gets SIGTERM and dlock
# exits 75 saying the lock was lost. The fences the two commands saw in
# DLOCK_FENCE strictly increase, A's below B's. Prints "N passed, N failed".
# A's trap writes its mark with the shell's own redirection, so the mark
# depends on no process the trap starts (cli/file checks those).
set -u

what=sigstop
# shellcheck source=tests/etcd/lib.sh
. "$(dirname "$0")/lib.sh"
ms() { echo $(($(date +%s%N) / 1000000)); }
# Is PID a live process (a zombie is not)?
alive() {
    local s
    s=$(cat /proc/"$1"/stat 2>/dev/null) || return 1
    s=${s##*) }
    [ -n "$s" ] && [ "${s%% *}" != Z ]
}

for mode in mutex rwlock; do
    uri="$DLOCK_TEST_ETCD_URI?lease=2s&mode=$mode"
    name=sigstop-$mode-$$
    f=$work/$mode
    "$DLOCK" exec --uri "$uri" --kill-after 5s "$name" -- sh -c "
        echo \$DLOCK_FENCE >'$f.a-fence'
        trap ': >\"$f.a-term\"; exit 0' TERM
        touch '$f.a-gate'
        i=0; while [ \$i -lt 600 ]; do sleep 0.05; i=\$((i + 1)); done" \
        2>"$f.a-err" &
    a=$!
    pids+=("$a")
    if ! wait_for "$f.a-gate"; then
        not_ok "$mode: holder A did not start: $(cat "$f.a-err")"
        continue
    fi
    # Let A renew at least once, then stop it (its watchdog with it).
    sleep 1
    kill -STOP "$a"
    stopped=$(ms)

    "$DLOCK" exec --uri "$uri" --timeout 15s "$name" -- \
        sh -c "echo \$DLOCK_FENCE >'$f.b-fence'" 2>"$f.b-err"
    expect_status "$mode: B gets the lock while A is stopped" 0 $?
    took=$(($(ms) - stopped))
    # A renews every third of its lease, so its etcd lease (3 s) was
    # renewed at most ~0.7 s before the stop: B cannot get in before
    # ~2.3 s; and it must not wait much past 3 s (the lease, then etcd's
    # expiry check, every 0.5 s).
    if [ "$took" -ge 2000 ] && [ "$took" -le 6000 ]; then
        ok "$mode: B got the lock ${took} ms after A was stopped"
    else
        not_ok "$mode: B got the lock ${took} ms after A was stopped (want 2000-6000)"
    fi
    alive "$a" && ok "$mode: A was stopped all along" ||
        not_ok "$mode: A ended while stopped: $(cat "$f.a-err")"

    resumed=$(ms)
    kill -CONT "$a"
    wait "$a"
    expect_status "$mode: A exits 75 once resumed" 75 $?
    took=$(($(ms) - resumed))
    [ "$took" -le 3000 ] && ok "$mode: A was told ${took} ms after it resumed" ||
        not_ok "$mode: A took ${took} ms to report the lost lock"
    [ -e "$f.a-term" ] && ok "$mode: A's command got SIGTERM" ||
        not_ok "$mode: A's command was not told"
    grep -q lost "$f.a-err" && ok "$mode: A says the lock was lost" ||
        not_ok "$mode: A's message: $(cat "$f.a-err")"
    fa=$(cat "$f.a-fence" 2>/dev/null) fb=$(cat "$f.b-fence" 2>/dev/null)
    if [ -n "$fa" ] && [ -n "$fb" ] && [ "$fa" -gt 0 ] && [ "$fb" -gt "$fa" ]; then
        ok "$mode: fences increase: A $fa < B $fb"
    else
        not_ok "$mode: fences A '$fa', B '$fb'"
    fi
done

finish
