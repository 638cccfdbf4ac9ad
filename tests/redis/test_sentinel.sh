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
#   switch     SENTINEL FAILOVER (the old master lives on as a master
#              for seconds) under 2 holders, lease 3 s: after the lease
#              their keys live on the new master (renewed there: the
#              client followed +switch-master) and both held through.
#   scenario   `dlock scenario failover` (its --failover-cmd is
#              tests/servers/rsentinel-failover.sh): the replicas cut off
#              from the master, with sync_replicas=1 the holder's acquire
#              is refused; without it the master grants, dies, a replica
#              that never saw the SET is promoted and a second holder gets
#              the lock, the first is told it lost it. n/a on plain Redis.
#
# $DLOCK_TEST_DLOCK is the built command; redis-cli (redis-tools) reads
# the servers raw.
set -u
DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
CTL=${DLOCK_TEST_SERVERCTL:?run under with-servers.sh rsentinel}
U=${DLOCK_TEST_RSENTINEL_URI:?run under with-servers.sh rsentinel}
group=${1:?usage: test_sentinel.sh sync|failover|switch|scenario}
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
switch)
    # A failover that leaves the old master alive (SENTINEL FAILOVER): it
    # stays a master with its connections for seconds, until the sentinels
    # reconfigure it. The holders must follow +switch-master and renew on
    # the new master, or their keys there expire under them.
    for i in 1 2; do
        "$DLOCK" exec --uri "$U" --lease 3s --timeout 5s "g$i" -- sh -c \
            'touch "$0/held-$DLOCK_NAME"; sleep 7' "$work" >"$work/out-g$i" 2>&1 &
        pids+=($!)
    done
    end=$((SECONDS + 20))
    while ((SECONDS < end)) && ! [[ -e $work/held-g1 && -e $work/held-g2 ]]; do sleep 0.05; done
    check "2 holders hold" '[[ -e $work/held-g1 && -e $work/held-g2 ]]'
    sleep 0.3
    t0=$(ms)
    # Asked again (bounded) while a sentinel answers INPROG or NOGOODSLAVE.
    fend=$((SECONDS + 10))
    until [[ $(redis-cli -p "${s1#*:}" SENTINEL FAILOVER dlock) == OK ]] ||
        ((SECONDS >= fend)); do sleep 0.1; done
    check "the sentinels switch masters within 20 s" 'wait_new_master "$mport" 20'
    echo "# switched $(($(ms) - t0)) ms after SENTINEL FAILOVER"
    sleep 3.5 # past the lease: a key not renewed on the new master is gone
    read -r -a m <<<"$(master)"
    echo "# old master's role: $(redis-cli -p "$mport" ROLE | head -1); new master ${m[1]}: PTTL g1 $(redis-cli -p "${m[1]}" PTTL 'dlock:{g1}') g2 $(redis-cli -p "${m[1]}" PTTL 'dlock:{g2}')"
    for i in 1 2; do
        check "g$i renewed on the new master (its key lives past the lease)" \
            '(($(redis-cli -p "${m[1]}" PTTL "dlock:{g$i}") > 0))'
    done
    for i in 1 2; do
        wait "${pids[i - 1]}"
        rc=$?
        check "g$i held through (exit 0)" '[[ $rc == 0 ]]'
    done
    pids=()
    ;;
scenario)
    # `dlock scenario failover`: the same failover with and without
    # sync_replicas=1 (the sync run first: a second failover of one master
    # waits out 2 x failover-timeout), and n/a on a plain redis:// URI.
    F="$(cd "$(dirname "$0")/../servers" && pwd)/rsentinel-failover.sh \$DLOCK_FAILOVER_STEP"
    "$DLOCK" scenario failover --failover-cmd "$F" \
        --uri "$U&sync_replicas=1&sync_timeout=300ms" --uri "$U" \
        --uri redis://127.0.0.1:1 >"$work/out" 2>&1
    rc=$?
    sed 's/^/# /' "$work/out"
    runs=$(grep -c '^results:' "$work/out")
    check "the scenario ran on the three URIs (exit 0)" '[[ $rc == 0 && $runs == 3 ]]'
    check "with sync_replicas=1 the holder's acquire is refused (EREPLICAS)" \
        'grep -Eq "holder_error +EREPLICAS" "$work/out"'
    check "without it a second holder gets the lock from the promoted replica" \
        'grep -Eq "waiter_got_lock +true" "$work/out"'
    check "and the first holder is told it lost the lock" \
        'grep -Eq "holder_told +true" "$work/out"'
    check "n/a on a URI without sentinel=" \
        'grep -q "n/a (no sentinel=)" "$work/out"'
    ;;
*)
    echo "unknown group $group" >&2
    exit 2
    ;;
esac
echo "# $passed passed, $failed failed"
((failed == 0))
