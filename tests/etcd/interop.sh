#!/usr/bin/env bash
# interop.sh: dlock and `etcdctl lock` exclude each other on one etcd
# (under tests/servers/with-servers.sh etcd; $DLOCK_TEST_DLOCK is the built
# command). etcdctl runs etcd's concurrency.Mutex, the recipe the etcd://
# backend follows, so in both of its modes:
#   - etcdctl holding: `dlock exec --timeout 0` exits 1 without running its
#     command, a timed wait gives up (exit 1) and leaves no key in the
#     queue, `dlock inspect` says held (exit 1) and names etcdctl's key, and
#     a waiting `dlock exec` runs its command only after etcdctl released;
#   - dlock holding: `etcdctl lock NAME CMD` runs CMD only after dlock's
#     command ended and dlock released.
# Every wait is bounded; prints "N passed, N failed".
set -u

what=interop
# shellcheck source=tests/etcd/lib.sh
. "$(dirname "$0")/lib.sh"
export ETCDCTL_API=3
ep=$DLOCK_TEST_ETCD_ENDPOINTS
now() { date +%s.%N; }
# Is A (seconds.nanoseconds) at most B?
not_after() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
# etcdctl's keys under NAME/ (the mutex's queue).
queue_len() { # NAME
    timeout 10 etcdctl --endpoints "$ep" get --prefix --keys-only "$1/" |
        grep -c .
}

# A command etcdctl runs while it holds: says so (gate), waits until it is
# let go (at most 20 s), stamps the time it ended.
cat >"$work/hold.sh" <<'EOF'
#!/bin/sh
touch "$1.gate"
i=0
while [ ! -e "$1.go" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
date +%s.%N >"$1.end"
EOF
# A command that stamps the time it started.
cat >"$work/stamp.sh" <<'EOF'
#!/bin/sh
date +%s.%N >"$1"
EOF
chmod +x "$work/hold.sh" "$work/stamp.sh"

for mode in mutex rwlock; do
    uri="$DLOCK_TEST_ETCD_URI?lease=3s&mode=$mode"
    flags=()
    # A reader of the rwlock is one more contender to etcdctl: it must be
    # excluded just as a writer is.
    [ "$mode" = rwlock ] && flags=(--shared)

    # ---- etcdctl holds ------------------------------------------------------
    name=interop-$mode-$$
    f=$work/$name
    timeout 30 etcdctl --endpoints "$ep" lock "$name" "$work/hold.sh" "$f" \
        >/dev/null 2>"$f.etcdctl-err" &
    etcdctl_pid=$!
    pids+=("$etcdctl_pid")
    if ! wait_for "$f.gate"; then
        not_ok "$mode: etcdctl lock did not start: $(cat "$f.etcdctl-err")"
        continue
    fi
    "$DLOCK" exec --uri "$uri" "${flags[@]}" --timeout 0 "$name" -- \
        touch "$f.ran" 2>"$f.err"
    expect_status "$mode: etcdctl holds, dlock exec ${flags[*]} --timeout 0" \
        1 $?
    [ -e "$f.ran" ] && not_ok "$mode: dlock ran its command under etcdctl's lock" ||
        ok "$mode: dlock did not run its command"
    grep -q "held by another owner" "$f.err" && ok "$mode: says held" ||
        not_ok "$mode: message: $(cat "$f.err")"

    "$DLOCK" exec --uri "$uri" "${flags[@]}" --timeout 300ms "$name" -- \
        touch "$f.ran" 2>/dev/null
    expect_status "$mode: etcdctl holds, dlock exec ${flags[*]} --timeout 300ms" \
        1 $?
    n=$(queue_len "$name")
    [ "$n" = 1 ] && ok "$mode: the timed-out waiter left no key" ||
        not_ok "$mode: $n keys under $name/ after the timed-out wait, want 1"

    "$DLOCK" inspect --uri "$uri" "$name" >"$f.inspect" 2>&1
    expect_status "$mode: inspect of etcdctl's lock" 1 $?
    grep -q "^held: *yes" "$f.inspect" && grep -q "^owner: *$name/" "$f.inspect" &&
        ok "$mode: inspect says held, by etcdctl's key" ||
        not_ok "$mode: inspect: $(cat "$f.inspect")"

    # A waiting dlock gets the lock only once etcdctl has let it go.
    "$DLOCK" exec --uri "$uri" "${flags[@]}" --timeout 20s "$name" -- \
        "$work/stamp.sh" "$f.dlock-start" 2>"$f.err" &
    waiter=$!
    pids+=("$waiter")
    sleep 1
    [ -e "$f.dlock-start" ] && not_ok "$mode: the waiting dlock ran while etcdctl held" ||
        ok "$mode: the waiting dlock waits"
    touch "$f.go"
    wait "$etcdctl_pid"
    expect_status "$mode: etcdctl lock" 0 $?
    wait "$waiter"
    expect_status "$mode: the waiting dlock exec" 0 $?
    if [ -e "$f.end" ] && [ -e "$f.dlock-start" ] &&
        not_after "$(cat "$f.end")" "$(cat "$f.dlock-start")"; then
        ok "$mode: dlock's command started after etcdctl's ended"
    else
        not_ok "$mode: etcdctl's command ended at $(cat "$f.end" 2>&1),\
 dlock's started at $(cat "$f.dlock-start" 2>&1): $(cat "$f.err")"
    fi
    "$DLOCK" inspect --uri "$uri" "$name" >/dev/null 2>&1
    expect_status "$mode: inspect once both released" 0 $?

    # ---- dlock holds --------------------------------------------------------
    name=interop-$mode-dlock-$$
    f=$work/$name
    "$DLOCK" exec --uri "$uri" "${flags[@]}" "$name" -- \
        sh -c "touch '$f.gate'; sleep 1.5; date +%s.%N >'$f.end'" \
        2>"$f.err" &
    holder=$!
    pids+=("$holder")
    if ! wait_for "$f.gate"; then
        not_ok "$mode: dlock exec did not start: $(cat "$f.err")"
        continue
    fi
    t0=$(now)
    timeout 30 etcdctl --endpoints "$ep" lock "$name" "$work/stamp.sh" \
        "$f.etcdctl-start" >/dev/null 2>"$f.etcdctl-err"
    expect_status "$mode: etcdctl lock while dlock holds" 0 $?
    t1=$(now)
    wait "$holder"
    expect_status "$mode: dlock exec holding" 0 $?
    if [ -e "$f.end" ] && [ -e "$f.etcdctl-start" ] &&
        not_after "$(cat "$f.end")" "$(cat "$f.etcdctl-start")"; then
        ok "$mode: etcdctl waited for dlock's release ($(awk -v a="$t0" \
            -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s)"
    else
        not_ok "$mode: dlock's command ended at $(cat "$f.end" 2>&1),\
 etcdctl's command started at $(cat "$f.etcdctl-start" 2>&1)"
    fi
done

finish
