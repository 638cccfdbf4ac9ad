#!/usr/bin/env bash
# test_latch_cli.sh URI: `dlock latch set|down|count|await` on one backend
# that has latches: output, exit codes (0 done; 1 counting already or
# timed out; 64 bad usage; 69 unreachable; 128+N a signal while awaiting),
# and an await in another process released by the last count-down. ~2 s.
#
# meson passes the URI (with $VARS expanded from with-servers.sh's
# exports); $DLOCK_TEST_DLOCK is the built command.
set -u

DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
uri_arg=${1:?usage: test_latch_cli.sh URI}
work=$(mktemp -d /tmp/dlock-latch-cli-XXXXXX)
# Background awaits are this shell's jobs: none outlives the test.
trap 'kill -9 $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
uri=$(eval "printf '%s' \"$uri_arg\"")
uri=${uri//@TMPDIR@/$work/locks}
mkdir "$work/locks"
export DLOCK_URI=$uri

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }
expect() { # description want-status want-stdout command...
    local d=$1 want=$2 out=$3 got st
    shift 3
    got=$("$@" 2>"$work/err")
    st=$?
    if [ "$st" = "$want" ] && { [ -z "$out" ] || [ "$got" = "$out" ]; }; then
        ok "$d"
    else
        not_ok "$d (exit $st, want $want; out '$got', want '$out'; $(cat "$work/err"))"
    fi
}
n=latch-cli-$$

# ---- usage --------------------------------------------------------------------
expect "--help" 0 "" "$DLOCK" latch --help
"$DLOCK" latch --help | grep -q "^actions: set, down, count, await" &&
    ok "--help lists the actions" || not_ok "--help lists the actions"
expect "no action" 64 "" "$DLOCK" latch
expect "unknown action" 64 "" "$DLOCK" latch open "$n"
expect "set without COUNT" 64 "" "$DLOCK" latch set "$n"
expect "set COUNT 0" 64 "" "$DLOCK" latch set "$n" 0
expect "set COUNT not a number" 64 "" "$DLOCK" latch set "$n" 3x
expect "down with two names" 64 "" "$DLOCK" latch down "$n" other
expect "-w on down" 64 "" "$DLOCK" latch down -w 1s "$n"
expect "bad -w" 64 "" "$DLOCK" latch await -w soon "$n"
expect "unknown option" 64 "" "$DLOCK" latch count --zzz "$n"
grep -q "COUNT" <("$DLOCK" latch set "$n" 0 2>&1) &&
    ok "a bad COUNT is named" || not_ok "a bad COUNT is named"

# ---- set, count, down, await ------------------------------------------------------
expect "count of a latch never set" 0 0 "$DLOCK" latch count "$n"
expect "await of an open latch" 0 "" "$DLOCK" latch await -w 0 "$n"
expect "set 2" 0 "" "$DLOCK" latch set "$n" 2
expect "set again: counting already" 1 "" "$DLOCK" latch set "$n" 5
grep -q "count 2" <("$DLOCK" latch set "$n" 5 2>&1) &&
    ok "the refusal says the count" || not_ok "the refusal says the count"
expect "count" 0 2 "$DLOCK" latch count --uri "$uri" "$n"
expect "await -w 0 while counting" 1 "" "$DLOCK" latch await -w 0 "$n"
expect "await -w 200ms times out" 1 "" "$DLOCK" latch await -w 200ms "$n"
# An await in another process, released by the last count-down.
("$DLOCK" latch await "$n"; echo $? >"$work/await.rc"; date +%s%N >"$work/await.t") &
sleep 0.5
expect "down prints the count left" 0 1 "$DLOCK" latch down "$n"
sleep 0.3
[ ! -e "$work/await.rc" ] && ok "await still waits at 1" || not_ok "await returned at 1"
t0=$(date +%s%N)
expect "the last down" 0 0 "$DLOCK" latch down "$n"
for _ in $(seq 1 100); do [ -e "$work/await.t" ] && break; sleep 0.05; done
if [ "$(cat "$work/await.rc" 2>/dev/null)" = 0 ]; then
    ms=$((($(cat "$work/await.t") - t0) / 1000000))
    echo "# the await exited ${ms} ms after the last \`dlock latch down\` started"
    ok "await exits 0 once the count is zero"
else
    not_ok "await exits 0 once the count is zero"
fi
expect "down at zero" 0 0 "$DLOCK" latch down "$n"
expect "set again once open" 0 "" "$DLOCK" latch set "$n" 1

# ---- signals, unreachable ------------------------------------------------------------
"$DLOCK" latch await "$n" &
p=$!
sleep 0.5
kill -TERM "$p"
wait "$p"
st=$?
[ "$st" = 143 ] && ok "SIGTERM ends an await (143)" || not_ok "SIGTERM: exit $st, want 143"
expect "the latch stays" 0 1 "$DLOCK" latch count "$n"
expect "down to open" 0 0 "$DLOCK" latch down "$n"
case $uri in
redis://*) bad="redis://127.0.0.1:1/?timeout=500ms" ;;
*) bad="" ;;
esac
if [ -n "$bad" ]; then
    expect "unreachable service (69)" 69 "" "$DLOCK" latch count --uri "$bad" "$n"
fi

echo "# $passed passed, $failed failed"
[ "$failed" = 0 ]
