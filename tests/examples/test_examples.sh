#!/usr/bin/env bash
# tests/examples/test_examples.sh file|postgres: run the programs of
# examples/ as a user would, and check what they promise in their comments:
# exit statuses, a job skipped while another runs, a worker that stops when
# its lock is lost, a fenced write the storage refuses to a stale fence.
# Runs under tests/servers/with-servers.sh (postgres: $DLOCK_TEST_PG_URI).
set -u
ex=${DLOCK_TEST_EXAMPLES:?set by meson}
kind=${1:?usage: test_examples.sh file|postgres}
work=$(mktemp -d /tmp/dlock-examples-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
expect() { # description want got
    [ "$2" = "$3" ] && ok "$1" || not_ok "$1: exit $3, expected $2"
}
wait_for_text() { # file text: at most 10 s
    local i
    for i in $(seq 1 100); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
wait_exit() { # pid: its status, at most 10 s (then 124)
    local i
    for i in $(seq 1 100); do
        kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }
        sleep 0.1
    done
    return 124
}

case $kind in
file)
    mkdir -p "$work/locks" # file:// makes lock files, not their directory
    export DLOCK_URI="file://$work/locks?lease=300ms"
    "$ex/cron_guard" nightly 0 >"$work/out" 2>"$work/err"
    expect "cron_guard: runs when free" 0 $?
    grep -q "running nightly with fence" "$work/out" && ok "cron_guard: says its fence" ||
        not_ok "cron_guard output: $(cat "$work/out" "$work/err")"
    "$ex/cron_guard" nightly 3 >"$work/first" 2>&1 &
    pids+=($!)
    first=$!
    wait_for_text "$work/first" running || not_ok "cron_guard: the first run did not start"
    "$ex/cron_guard" nightly 0 >/dev/null 2>"$work/err"
    expect "cron_guard: skipped while another run holds the lock" 1 $?
    grep -q . "$work/err" && ok "cron_guard: says why it skipped" || not_ok "cron_guard: silent skip"
    kill "$first" 2>/dev/null
    DLOCK_URI=bogus "$ex/cron_guard" nightly 0 2>"$work/err"
    expect "cron_guard: DLOCK_URI=bogus is an error, not a silent success" 64 $?
    grep -q . "$work/err" && ok "cron_guard: names the bad URI" || not_ok "cron_guard: bogus URI silent"
    DLOCK_URI=file:///proc/self/nonexistent/locks "$ex/cron_guard" nightly 0 2>/dev/null
    expect "cron_guard: a lock directory that does not exist exits 66" 66 $?
    "$ex/cron_guard" nightly x 2>/dev/null
    expect "cron_guard: bad SECONDS exits 64" 64 $?

    "$ex/worker" short 1 >/dev/null 2>"$work/err"
    expect "worker: works, releases, exits 0" 0 $?
    # The lock file deleted behind the holder's back: the next renewal
    # finds the lock lost, on_lost stops the worker.
    "$ex/worker" long 60 >"$work/w.out" 2>"$work/w.err" &
    w=$!
    pids+=("$w")
    wait_for_text "$work/w.out" holding || not_ok "worker: did not start"
    rm -f "$work"/locks/*
    wait_exit "$w"
    expect "worker: stops when its lock is lost (on_lost)" 75 $?
    grep -q "lost long" "$work/w.err" && grep -q "stopped after" "$work/w.err" &&
        ok "worker: says it lost the lock and stopped" || not_ok "worker: $(cat "$work/w.err")"
    ;;
postgres)
    : "${DLOCK_TEST_PG_URI:?run under with-servers.sh pg}"
    export DATABASE_URL=$DLOCK_TEST_PG_URI
    export DLOCK_URI="$DLOCK_TEST_PG_URI?mode=advisory"
    psql=$(command -v psql || echo /usr/bin/psql)
    balance() { "$psql" -X -q -t -A "$DATABASE_URL" -c "SELECT balance FROM fenced_accounts WHERE id = 'acct'"; }
    "$ex/fenced_pg" acct-lock acct 5 >"$work/out" 2>"$work/err"
    expect "fenced_pg: a fenced write" 0 $?
    "$ex/fenced_pg" acct-lock acct 7 >>"$work/out" 2>>"$work/err"
    expect "fenced_pg: a second one, with a newer fence" 0 $?
    [ "$(balance)" = 12 ] && ok "fenced_pg: both applied (12)" ||
        not_ok "fenced_pg: balance $(balance); $(cat "$work/out" "$work/err")"
    # A newer holder's fence in the row: this holder's write is refused by
    # the storage, and the balance does not move.
    "$psql" -X -q "$DATABASE_URL" -c "UPDATE fenced_accounts SET fence = 9000000000000000000 WHERE id = 'acct'" ||
        not_ok "psql: could not set the fence"
    "$ex/fenced_pg" acct-lock acct 100 >/dev/null 2>"$work/err"
    expect "fenced_pg: a stale fence is refused by the storage" 75 $?
    [ "$(balance)" = 12 ] && ok "fenced_pg: the refused write changed nothing" ||
        not_ok "fenced_pg: balance $(balance) after a refused write"
    grep -q "refused" "$work/err" && ok "fenced_pg: says why" || not_ok "fenced_pg: $(cat "$work/err")"
    "$ex/fenced_pg" "acct-lock" "x'; DROP TABLE fenced_accounts; --" 1 >/dev/null 2>&1
    expect "fenced_pg: a hostile account name is a bound parameter" 0 $?
    [ "$(balance)" = 12 ] && ok "fenced_pg: the table is still there" || not_ok "fenced_pg: table gone"
    DATABASE_URL=postgres://127.0.0.1:1/none "$ex/fenced_pg" acct-lock acct 1 2>/dev/null
    expect "fenced_pg: data store down exits 69" 69 $?
    "$ex/fenced_pg" acct-lock acct 1.5 2>/dev/null
    expect "fenced_pg: bad AMOUNT exits 64" 64 $?
    ;;
*) echo "test_examples.sh: unknown kind '$kind'" >&2; exit 64 ;;
esac
echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
