#!/usr/bin/env bash
# semaphore.sh: what is particular to etcd's permits (under
# tests/servers/with-servers.sh etcd; $DLOCK_TEST_DLOCK is the built
# command). A semaphore of 2, held by A (older) and B; waiters C, D, E:
# - each waiter has one watch open on etcd (its etcd_debugging_mvcc_
#   watcher_total gauge), not one per key;
# - inspect counts 2 of 2 permits held and 3 waiters; a request for 3
#   permits is refused, naming both counts;
# - B, the younger holder, releases while A keeps its permit: C, the first
#   waiter, is granted within 3 s (a missed release would wait for A, or
#   for the waiter's next look, a third of the 33 s etcd lease later),
#   D and E stay out, and the release cost etcd at most 5 range requests:
#   it wakes only the waiters that had B among the 2 keys just before
#   theirs, C (look, check its key) and D (look, and the check of its new
#   watch); E, whose 2 keys are C's and D's, sleeps on. A herd (every
#   waiter looking) would cost 6 or more.
# Prints "N passed, N failed".
set -u

what=semaphore
# shellcheck source=tests/etcd/lib.sh
. "$(dirname "$0")/lib.sh"
ms() { echo $(($(date +%s%N) / 1000000)); }
check() { # what command...: ok when the command succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}
metric() { # the value of one of etcd's metrics (first line matching $1)
    curl -s "http://${DLOCK_TEST_ETCD_URI#etcd://}/metrics" |
        awk -v m="$1" 'index($0, m) == 1 { print $2 + 0; exit }'
}
watchers() { metric 'etcd_debugging_mvcc_watcher_total '; }
ranges() {
    metric 'grpc_server_handled_total{grpc_code="OK",grpc_method="Range",'
}
# Wait up to 10 s until etcd has $1 watchers; then it must stay there.
watchers_become() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ "$(watchers)" = "$1" ] && break
        sleep 0.1
    done
    sleep 0.3
    [ "$(watchers)" = "$1" ]
}

uri=$DLOCK_TEST_ETCD_URI # lease 30 s: an etcd lease of 33 s
name=sem-$$
# Take a permit, say so ($work/TAG.in), hold it until $work/TAG.go.
hold() {
    "$DLOCK" exec --uri "$uri" --permits 2 "$name" -- sh -c "
        touch '$work/$1.in'
        while [ ! -e '$work/$1.go' ]; do sleep 0.05; done" 2>"$work/$1.err" &
    pids+=("$!")
}

hold a
wait_for "$work/a.in" || not_ok "A did not get a permit: $(cat "$work/a.err")"
hold b
wait_for "$work/b.in" || not_ok "B did not get a permit: $(cat "$work/b.err")"
w0=$(watchers)
n=0
for t in c d e; do
    hold "$t"
    n=$((n + 1))
    if watchers_become $((w0 + n)); then
        ok "waiter $t: one more watch ($((w0 + n)) in all)"
    else
        not_ok "waiter $t: etcd has $(watchers) watches, want $((w0 + n))"
    fi
done

out=$("$DLOCK" inspect --uri "$uri" "$name" 2>&1)
case $out in
*"owner:     (2 of 2 permits held)"*"waiters:   3"*) ok "inspect: 2 of 2 held, 3 waiters" ;;
*) not_ok "inspect says: $out" ;;
esac
"$DLOCK" exec --uri "$uri" --permits 3 -n "$name" -- true 2>"$work/x.err"
expect_status "a request for 3 permits is refused" 64 $?
check "the refusal names both counts: $(cat "$work/x.err")" \
    grep -q "permits: 3 asked, but this semaphore has 2 permits" "$work/x.err"

r0=$(ranges)
t0=$(ms)
touch "$work/b.go"
if wait_for "$work/c.in"; then
    took=$(($(ms) - t0))
    check "C granted ${took} ms after B's release (want <= 3000), A still holding" \
        [ "$took" -le 3000 ]
else
    not_ok "C was not granted: $(cat "$work/c.err")"
fi
sleep 0.5
r1=$(ranges)
check "D and E still wait" [ ! -e "$work/d.in" -a ! -e "$work/e.in" ]
check "the release cost $((r1 - r0)) range requests (want <= 5)" \
    [ $((r1 - r0)) -le 5 ]
check "$(watchers) watches left for two waiters (want $((w0 + 2)))" \
    [ "$(watchers)" = $((w0 + 2)) ]
touch "$work/a.go" "$work/c.go" "$work/d.go" "$work/e.go"
finish
