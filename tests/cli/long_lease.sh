#!/usr/bin/env bash
# long_lease.sh URI: a handle's own lease far above the URI's, on a backend
# whose lease belongs to the client (an etcd lease, a ZooKeeper session).
# The URI says lease=1s; `dlock exec --lease 10s` runs `sleep 4`, past
# several of the client's leases. The watchdog must renew at a third of
# what each grant holds, not of the handle's 10 s: then the command runs to
# its end and dlock exits 0; a second client is refused the name meanwhile
# (the server still has it); and a release follows. Renewing every 3.3 s
# let the client's lease run out first: exit 75, the lock lost (etcd
# deleted the key; ZooKeeper's grant went unconfirmed). Prints
# "N passed, N failed"; $DLOCK_TEST_DLOCK is the built command.
set -u
uri=$(eval "printf '%s' \"${1:?usage: long_lease.sh URI}\"")
DLOCK=${DLOCK_TEST_DLOCK:?DLOCK_TEST_DLOCK: the dlock command}
work=$(mktemp -d)
holder=
cleanup() {
    [ -n "$holder" ] && kill "$holder" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
not_ok() { echo "not ok - $*"; fail=$((fail + 1)); }

name=long-lease-$$-$RANDOM
"$DLOCK" exec --uri "$uri" --lease 10s "$name" -- \
    sh -c ": >'$work/started'; sleep 4" 2>"$work/err" &
holder=$!
for _ in $(seq 100); do
    [ -e "$work/started" ] && break
    sleep 0.05
done
[ -e "$work/started" ] && ok "the holder runs its command" ||
    not_ok "the holder did not start: $(cat "$work/err")"
sleep 3 # about three of the client's leases
"$DLOCK" exec --uri "$uri" -n "$name" -- true 2>"$work/err2"
rc=$?
[ "$rc" = 1 ] && ok "3 s in, another client is refused the name" ||
    not_ok "3 s in, another client got exit $rc: $(cat "$work/err2")"
wait "$holder"
rc=$?
holder=
[ "$rc" = 0 ] && ok "the command ran to its end under the lock (exit 0)" ||
    not_ok "exit $rc (75: the lock was lost): $(cat "$work/err")"
"$DLOCK" exec --uri "$uri" -n "$name" -- true 2>"$work/err3"
rc=$?
[ "$rc" = 0 ] && ok "released: the name is free again" ||
    not_ok "after the holder: exit $rc: $(cat "$work/err3")"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
