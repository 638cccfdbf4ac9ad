#!/usr/bin/env bash
# test_sentinel.sh GROUP: redis://…?sentinel= and sync_replicas= on the
# rsentinel servers (a master, 2 replicas, 3 sentinels; tests/servers).
# Each group is its own meson test, on servers of its own:
#
#   sync       sync_replicas=1 with both replicas SIGSTOPped: the acquire
#              fails with DLOCK_EREPLICAS (exit 69, "0 of 1 replica")
#              within sync_timeout (+ a generous margin for a loaded
#              machine), and the master has no lock key afterwards (a raw
#              GET with redis-cli). sync_replicas=majority with the
#              replicas running is granted.
#   failover   the master is SIGKILLed while 3 `dlock exec` holders hold
#              their locks (lease 6 s, longer than a failover): dlock reaches the new master (time
#              printed, bounded by a generous 20 s) and every holder either
#              held through (exit 0, and its key was on the new master when
#              its command ended, read by redis-cli from the master the
#              sentinels name) or was told it lost the lock (exit 75).
#   split      the failover scenario's two outcomes. Replicas SIGSTOPped
#              (so a SET cannot reach them): with sync_replicas=1 A's
#              acquire is refused. Without it the master grants A's lock
#              and is SIGKILLed, the replicas resumed and one promoted: a
#              second holder B gets the same name on the new master, and
#              A is told it lost the lock (exit 75) when its renewal finds
#              the new master without it.
#
# $DLOCK_TEST_DLOCK is the built command; redis-cli (redis-tools) reads
# the servers raw.
set -u
DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
CTL=${DLOCK_TEST_SERVERCTL:?run under with-servers.sh rsentinel}
U=${DLOCK_TEST_RSENTINEL_URI:?run under with-servers.sh rsentinel}
group=${1:?usage: test_sentinel.sh sync|failover|split}
work=$(mktemp -d /tmp/dlock-sentinel-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }
check() { if eval "$2"; then ok "$1"; else not_ok "$1"; fi; }
ms() { echo $(($(date +%s%N) / 1000000)); }
s1=${U#redis://}
s1=${s1%%,*}
master() { # the master the sentinels name now, as "host port"
    redis-cli -h 127.0.0.1 -p "${s1#*:}" SENTINEL get-master-addr-by-name dlock | tr '\n' ' '
}
rget() { # KEY: GET on the master the sentinels name now
    local m
    read -r -a m <<<"$(master)"
    redis-cli -h "${m[0]}" -p "${m[1]}" GET "$1"
}
# Wait (bounded) until the sentinels name another master than $1.
wait_new_master() { # OLD_PORT MAX_S
    local end=$((SECONDS + $2)) m
    while ((SECONDS < end)); do
        read -r -a m <<<"$(master)"
        [[ ${m[1]:-} == "$1" || -z ${m[1]:-} ]] || return 0
        sleep 0.1
    done
    return 1
}
mport=${DLOCK_TEST_RSENTINEL_MASTER#*:}

case $group in
sync)
    t0=$(ms)
    $CTL pause rsentinel 2
    $CTL pause rsentinel 3
    out=$("$DLOCK" exec --uri "$U&sync_replicas=1&sync_timeout=500ms" \
        --timeout 0 s-sync -- echo RAN 2>&1)
    rc=$? took=$(($(ms) - t0))
    echo "# $out (${took} ms)"
    check "acquire refused: exit 69" '[[ $rc == 69 ]]'
    check "the command never ran" '[[ $out != *RAN* ]]'
    check "the message says 0 of 1 replica confirmed" '[[ $out == *"0 of 1 replica confirmed within"* ]]'
    check "within sync_timeout (500 ms) + 4.5 s margin" '((took < 5000))'
    key=$(redis-cli -p "$mport" GET 'dlock:{s-sync}')
    check "the master has no lock key afterwards" '[[ -z $key ]]'
    $CTL resume rsentinel 2
    $CTL resume rsentinel 3
    out=$("$DLOCK" exec --uri "$U&sync_replicas=majority" --timeout 5s \
        s-sync -- echo RAN 2>&1)
    check "sync_replicas=majority with the replicas back: granted" '[[ $out == RAN ]]'
    ;;
failover)
    for i in 1 2 3; do
        "$DLOCK" exec --uri "$U" --lease 6s --timeout 5s "f$i" -- sh -c '
            touch "$0/held-$DLOCK_NAME"; sleep 7
            redis-cli -h 127.0.0.1 -p "$1" SENTINEL get-master-addr-by-name dlock >"$0/m-$DLOCK_NAME"
            h=$(sed -n 1p "$0/m-$DLOCK_NAME"); p=$(sed -n 2p "$0/m-$DLOCK_NAME")
            redis-cli -h "$h" -p "$p" GET "dlock:{$DLOCK_NAME}" >"$0/key-$DLOCK_NAME"
            echo "$DLOCK_OWNER" >"$0/owner-$DLOCK_NAME"' "$work" "${s1#*:}" \
            >"$work/out-f$i" 2>&1 &
        pids+=($!)
    done
    end=$((SECONDS + 20))
    while ((SECONDS < end)) && ! [[ -e $work/held-f1 && -e $work/held-f2 && -e $work/held-f3 ]]; do sleep 0.05; done
    check "3 holders hold" '[[ -e $work/held-f1 && -e $work/held-f2 && -e $work/held-f3 ]]'
    sleep 0.3 # let the SETs replicate: this group is the no-loss case
    t0=$(ms)
    $CTL kill rsentinel 1
    reached=0
    while (($(ms) - t0 < 20000)); do
        if "$DLOCK" exec --uri "$U&timeout=1s" --timeout 0 f-probe -- true 2>/dev/null; then
            reached=$(($(ms) - t0))
            break
        fi
        sleep 0.05
    done
    echo "# dlock reached the new master $reached ms after the SIGKILL"
    check "dlock reaches the new master within 20 s" '((reached > 0))'
    for i in 1 2 3; do
        wait "${pids[i - 1]}"
        rc=$?
        echo "# holder f$i: exit $rc: $(tr '\n' ' ' <"$work/out-f$i")"
        if [[ $rc == 0 ]]; then
            check "f$i held through: its key is on the new master" \
                '[[ $(cat "$work/key-f$i") == $(cat "$work/owner-f$i") && -n $(cat "$work/key-f$i") ]]'
        else
            check "f$i was told it lost the lock (exit 75)" '[[ $rc == 75 ]]'
        fi
    done
    pids=()
    ;;
split)
    # With sync_replicas=1, A's acquire on a master whose replicas cannot
    # confirm (SIGSTOPped) is refused: nothing for a failover to lose.
    $CTL pause rsentinel 2
    $CTL pause rsentinel 3
    out=$("$DLOCK" exec --uri "$U&sync_replicas=1&sync_timeout=300ms" \
        --timeout 0 split -- echo A-RAN 2>&1)
    rc=$?
    echo "# with sync_replicas=1: $out"
    check "with sync_replicas=1 A's acquire is refused (exit 69)" '[[ $rc == 69 && $out != *A-RAN* ]]'
    # Without it: A holds on the master, whose SET never reaches the
    # replicas; the master dies, a replica is promoted. SIGSTOP alone is
    # not enough: the kernel still takes the SET into a stopped replica's
    # socket and it reads it when resumed. So the master first drops its
    # replicas' links (CLIENT KILL TYPE replica) while they are stopped and
    # cannot reconnect: A's SET exists on the master alone.
    redis-cli -p "$mport" CLIENT KILL TYPE replica >/dev/null
    "$DLOCK" exec --uri "$U" --lease 20s --timeout 5s split -- sh -c \
        'touch "$0/A-held"; sleep 15' "$work" >"$work/A" 2>&1 &
    pids+=($!)
    end=$((SECONDS + 20))
    while ((SECONDS < end)) && ! [[ -e $work/A-held ]]; do sleep 0.05; done
    check "A holds (no sync_replicas; replicas stopped)" '[[ -e $work/A-held ]]'
    echo "# replicas SIGSTOPped and their links dropped (CLIENT KILL TYPE replica) before A's SET; master SIGKILLed; replicas resumed"
    $CTL kill rsentinel 1
    $CTL resume rsentinel 2
    $CTL resume rsentinel 3
    check "the sentinels promote a replica within 20 s" 'wait_new_master "$mport" 20'
    out=$("$DLOCK" exec --uri "$U" --timeout 10s split -- echo B-RAN 2>&1)
    alive=$(kill -0 "${pids[0]}" 2>/dev/null && echo "still running" || echo "already ended")
    echo "# B: $out; A's command was $alive when B ran"
    check "without sync_replicas a second holder B gets the lock" '[[ $out == B-RAN ]]'
    wait "${pids[0]}"
    rc=$?
    echo "# A: exit $rc: $(tr '\n' ' ' <"$work/A")"
    check "A is told it lost the lock (exit 75)" '[[ $rc == 75 ]]'
    pids=()
    ;;
*)
    echo "unknown group $group" >&2
    exit 2
    ;;
esac
echo "# $passed passed, $failed failed"
((failed == 0))
