#!/usr/bin/env bash
# test_scenario.sh CHECK_JSON: every `dlock scenario` on file://, with a
# short lease. Each runs, prints its timeline, results and outcome, and
# writes JSON; the outcomes that file:// determines are checked (a killed
# holder's lock is freed by the kernel; a paused holder keeps it, as
# file:// has no lease; a dead waiter blocks nobody). Several URIs and
# scenarios in one run print a side-by-side table and one JSON document.
# Bad input exits 64, an unreachable service 69. No time is asserted.
#
# test_scenario.sh CHECK_JSON servers: under with-servers.sh redis redis5,
# `dlock scenario all` on file:// and Redis side by side (the server
# restarted for real), holder-reconnect on Redis, and node-loss on
# Redlock's five nodes, with the outcomes that those modes determine.
set -u
. "$(dirname "$0")/lib.sh"
if [ "${2:-}" = servers ]; then
    . "$(dirname "$0")/scenario_servers.sh"
    finish
    exit
fi

# run NAME ARGS...: the scenario on $uri; stdout in $work/NAME.out, JSON
# in $work/NAME.json; ok when it exits 0 and prints an outcome.
run() {
    local name=$1 rc
    shift
    "$DLOCK" scenario "$name" --uri "$uri" --lease 300ms \
        --json "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err"
    rc=$?
    if [ $rc = 0 ] && grep -q '^outcome: ' "$work/$name.out"; then
        ok "$name runs and prints its outcome"
    else
        not_ok "$name (exit $rc): $(cat "$work/$name.out" "$work/$name.err" | head -c 800)"
    fi
    # scheme and mode are null when nothing was started (not applicable)
    "$CHECK_JSON" "$work/$name.json" scenarios:array uris.0.label:string \
        runs.0.scenario:string runs.0.uri:string \
        runs.0.scheme runs.0.mode runs.0.caps:array runs.0.lease_ms:pos \
        runs.0.ran:bool runs.0.events:array runs.0.results:object \
        runs.0.summary:string runs.0.cell:string \
        runs.0.outcome:string >/dev/null ||
        not_ok "$name JSON lacks keys"
}
# field NAME KEY: the value of one result line.
field() { sed -n "s/^  $2  *//p" "$work/$1.out"; }
expect_field() { # NAME KEY WANT
    local got
    got=$(field "$1" "$2")
    [ "$got" = "$3" ] && ok "$1: $2 = $3" || not_ok "$1: $2 = '$got', want '$3'"
}

run holder-crash
expect_field holder-crash next_acquired true
grep -q 'A   killed (SIGKILL)' "$work/holder-crash.out" &&
    ok "holder-crash shows the kill on the timeline" || not_ok "timeline"
f1=$(field holder-crash first_fence) f2=$(field holder-crash next_fence)
[ -n "$f1" ] && [ -n "$f2" ] && [ "$f2" -gt "$f1" ] &&
    ok "the next holder's fence is larger ($f1 < $f2)" ||
    not_ok "fences $f1, $f2"

run holder-pause --pause 500ms
# file:// has no lease: a paused holder keeps its lock.
expect_field holder-pause second_holder_got_in false
expect_field holder-pause first_held_after_resume 1
expect_field holder-pause write_after_resume accepted
"$CHECK_JSON" "$work/holder-pause.json" runs.0.results.paused_ms:pos \
    runs.0.results.first_fence:pos >/dev/null && ok "holder-pause JSON results" ||
    not_ok "holder-pause JSON results"

run conn-drop
grep -q 'no connection to cut' "$work/conn-drop.out" &&
    ok "conn-drop on file:// says there is no connection" || not_ok "conn-drop text"
expect_field conn-drop applicable false

run server-restart
expect_field server-restart applicable false
# With a command it runs on any URI: here the "restart" only waits.
run server-restart --restart-cmd 'sleep 0.2'
expect_field server-restart restart_exit 0
expect_field server-restart waiter_got_lock false
expect_field server-restart holder_held_after 1

run waiter-crash
expect_field waiter-crash next_waiter_got_lock true
grep -q 'W1  killed (SIGKILL)' "$work/waiter-crash.out" &&
    ok "waiter-crash kills a waiter" || not_ok "waiter-crash timeline"

# ---- several URIs and scenarios: side by side, one JSON ---------------------
"$DLOCK" scenario holder-crash,waiter-crash --uri "$uri" \
    --uri "file://$work/locks-2" --lease 300ms --json "$work/multi.json" \
    --markdown "$work/multi.md" >"$work/multi.out" 2>"$work/multi.err"
rc=$?
[ $rc = 0 ] && grep -q '^outcomes side by side:' "$work/multi.out" &&
    grep -q '^ *file/ofd  *file/ofd #2$' "$work/multi.out" &&
    ok "two URIs: a column each, the second told apart" ||
    not_ok "two URIs (exit $rc): $(sed -n '/side by side/,$p' "$work/multi.out" | head -c 600)"
"$CHECK_JSON" "$work/multi.json" scenarios:len=2 uris:len=2 runs:len=4 \
    'uris.1.label:=file/ofd #2' runs.0.scenario:=holder-crash \
    runs.1.scenario:=waiter-crash runs.3.results.next_waiter_got_lock:=true \
    runs.2.cell:string >/dev/null &&
    ok "two URIs: every run in the JSON" || not_ok "two URIs JSON: $("$CHECK_JSON" "$work/multi.json" runs:len=4 runs.2.cell:string)"
[ "$(grep -c '^| file/ofd' "$work/multi.md")" = 2 ] &&
    grep -q '^| backend/mode | holder-crash | waiter-crash |$' "$work/multi.md" &&
    ok "--markdown: a row per URI, a column per scenario" ||
    not_ok "--markdown: $(cat "$work/multi.md")"
"$DLOCK" scenario all --uri "$uri" --lease 300ms --json "$work/all.json" \
    >"$work/all.out" 2>&1
rc=$?
"$CHECK_JSON" "$work/all.json" scenarios:len=9 runs:len=9 \
    runs.2.scenario:=holder-reconnect runs.2.results.applicable:=false \
    runs.3.results.restarted_got_lock:=true 'runs.4.cell:=n/a: no conn' \
    runs.8.scenario:=node-loss 'runs.8.summary:=n/a (no server)' >/dev/null
jrc=$?
[ $rc = 0 ] && [ $jrc = 0 ] && ! grep -q '^outcome: not run' "$work/all.out" &&
    ok "all on file://: nine scenarios, n/a where nothing applies" ||
    not_ok "all on file:// (exit $rc): $("$CHECK_JSON" "$work/all.json" runs:len=9 runs.8.summary:='n/a (no server)')"

# Nothing is left behind: every actor was reaped.
left=$(pgrep -f "scenario __actor [0-9]+ $uri" || true)
[ -z "$left" ] && ok "no actor process left" || not_ok "actors left: $left"

# ---- bad input ---------------------------------------------------------------
expect_usage "no scenario name" "missing NAME" "$DLOCK" scenario
expect_usage "unknown scenario" "no scenario 'nap'" "$DLOCK" scenario nap
expect_usage "unknown scenario in a list" "no scenario 'nap'" \
    "$DLOCK" scenario holder-crash,nap
expect_usage "options before NAME" "missing NAME" "$DLOCK" scenario --uri "$uri"
expect_usage "empty --node-cmd" --node-cmd "$DLOCK" scenario node-loss --node-cmd ''
expect_usage "node-loss on a cluster URI needs --node-cmd" --node-cmd \
    "$DLOCK" scenario node-loss --uri 'redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3'
expect_usage "holder-reconnect needs explicit ports" port \
    "$DLOCK" scenario holder-reconnect --uri 'redis://127.0.0.1'

expect_usage "--lease too short" --lease "$DLOCK" scenario holder-crash --lease 5ms
expect_usage "--wait without unit" --wait "$DLOCK" scenario holder-crash --wait 3
expect_usage "unknown option" --bogus "$DLOCK" scenario waiter-crash --bogus
expect_usage "empty --restart-cmd" --restart-cmd "$DLOCK" scenario server-restart --restart-cmd ''
expect_usage "conn-drop needs an explicit port" port \
    "$DLOCK" scenario conn-drop --uri 'redis://127.0.0.1'
expect_usage "server-restart on a server URI needs --restart-cmd" --restart-cmd \
    "$DLOCK" scenario server-restart --uri 'redis://127.0.0.1:6379'
# The proxy starts and points at port 1; the actor then reports the
# unknown scheme: a usage error, and nothing left running.
"$DLOCK" scenario conn-drop --uri 'nosuch://127.0.0.1:1' >/dev/null 2>"$work/nosuch.err"
rc=$?
[ $rc = 64 ] && ok "conn-drop on an unknown scheme exits 64" ||
    not_ok "conn-drop unknown scheme (exit $rc)"
"$DLOCK" scenario holder-crash --uri 'file:///proc/dlock-no/such' >/dev/null 2>"$work/unreach.err"
rc=$?
[ $rc = 66 ] && ok "a lock directory that does not exist exits 66" ||
    not_ok "missing lock directory (exit $rc)"

finish
