#!/usr/bin/env bash
# test_cli.sh URI: the `dlock` command's contract on one backend. Exit
# codes (flock(1)'s habits and sysexits), the child's environment, conflicts
# and timeouts, bad input, an unreachable service, and a lock lost while the
# command runs (SIGTERM to the command, exit 75).
#
# meson passes the URI (with $VARS expanded from with-servers.sh's exports);
# $DLOCK_TEST_DLOCK is the built command.
set -u

DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
uri_arg=${1:?usage: test_cli.sh URI}
work=$(mktemp -d /tmp/dlock-cli-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# Expand "$VAR" references and the file:// placeholder.
uri=$(eval "printf '%s' \"$uri_arg\"")
uri=${uri//@TMPDIR@/$work/locks}
scheme=${uri%%://*}
export DLOCK_URI=$uri

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }
expect_status() { # name want got
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (exit $3, want $2)"; fi
}
# Wait until a file exists (a gate the child command creates).
wait_for() {
    local i
    for i in $(seq 1 300); do [ -e "$1" ] && return 0; sleep 0.1; done
    return 1
}
name() { echo "cli-$1-$$"; }

# ---- environment and exit status -------------------------------------------
out=$("$DLOCK" exec "$(name env)" -- sh -c 'echo "$DLOCK_NAME|$DLOCK_FENCE|$DLOCK_OWNER"')
expect_status "exec runs the command" 0 $?
IFS='|' read -r n f o <<<"$out"
[ "$n" = "$(name env)" ] && ok "DLOCK_NAME is the lock name" || not_ok "DLOCK_NAME ($n)"
[[ "$f" =~ ^[0-9]+$ ]] && ok "DLOCK_FENCE is a number ($f)" || not_ok "DLOCK_FENCE ($f)"
[[ "$o" == *:* ]] && ok "DLOCK_OWNER is uuid:serial" || not_ok "DLOCK_OWNER ($o)"

"$DLOCK" exec "$(name status)" -- sh -c 'exit 7'
expect_status "command's exit status passes through" 7 $?
"$DLOCK" exec "$(name sig)" -- sh -c 'kill -9 $$'
expect_status "killed command gives 128+signal" 137 $?
"$DLOCK" exec "$(name nf)" -- /nonexistent/cmd 2>/dev/null
expect_status "command not found gives 127" 127 $?
printf "#!/bin/sh\n" >"$work/noexec"
"$DLOCK" exec "$(name nx)" -- "$work/noexec" 2>/dev/null
expect_status "command not executable gives 126" 126 $?

# ---- conflicts -------------------------------------------------------------
held=$(name held)
"$DLOCK" exec "$held" -- sh -c "touch $work/gate; exec sleep 30" &
holder=$!
pids+=("$holder")
wait_for "$work/gate" || not_ok "holder did not start"
"$DLOCK" exec --timeout 0 "$held" -- true 2>"$work/err"
expect_status "busy with --timeout 0 exits 1" 1 $?
grep -q . "$work/err" && ok "conflict says why on stderr" || not_ok "conflict message"
"$DLOCK" exec -q --timeout 0 "$held" -- true 2>"$work/err"
[ ! -s "$work/err" ] && ok "--quiet silences the conflict" || not_ok "--quiet"
"$DLOCK" exec --timeout 0 --conflict-exit-code 9 "$held" -- true 2>/dev/null
expect_status "--conflict-exit-code 9" 9 $?
start=$(date +%s%N)
"$DLOCK" exec --timeout 300ms "$held" -- true 2>/dev/null
st=$?
took=$((($(date +%s%N) - start) / 1000000))
expect_status "timed out exits 1" 1 "$st"
[ "$took" -ge 280 ] && ok "waited the timeout (${took} ms)" || not_ok "returned early (${took} ms)"
kill -TERM "$holder"
wait "$holder"
expect_status "SIGTERM to dlock reaches the command" 143 $?
"$DLOCK" exec --timeout 5s "$held" -- true
expect_status "lock is free after the holder ends" 0 $?

# ---- bad input: 64, one line naming the problem ----------------------------
check_usage() { # description args...
    local d=$1
    shift
    "$DLOCK" "$@" 2>"$work/err" >/dev/null
    local st=$?
    local lines
    lines=$(wc -l <"$work/err")
    if [ "$st" = 64 ] && [ "$lines" = 1 ]; then
        ok "$d: 64 ($(head -c 80 "$work/err"))"
    else
        not_ok "$d: exit $st, $lines lines: $(head -c 200 "$work/err")"
    fi
}
check_usage "unknown option" exec --bogus x -- true
check_usage "bad duration" exec --timeout 5x x -- true
check_usage "duration without unit" exec --lease 5 x -- true
check_usage "missing command" exec x
check_usage "missing name" exec
check_usage "bad exit code" exec --conflict-exit-code 300 x -- true
check_usage "bad URI port" exec --uri "$scheme://127.0.0.1:0" x -- true
check_usage "unknown scheme" exec --uri "nosuch://h" x -- true
check_usage "unknown URI parameter" exec --uri "$uri$( [[ $uri == *\?* ]] && echo '&' || echo '?')bogus=1" x -- true
check_usage "empty name" exec "" -- true
check_usage "unknown command" nosuchcommand
"$DLOCK" exec --uri "$scheme://127.0.0.1:0" x -- true 2>&1 | grep -q port &&
    ok "bad URI message names the port" || not_ok "bad URI message"
grep -q -- "--timeout" <("$DLOCK" exec --timeout 5x x -- true 2>&1) &&
    ok "bad duration message names the option" || not_ok "duration message"
for sub in exec info inspect demo; do
    "$DLOCK" "$sub" --help >/dev/null
    expect_status "$sub --help" 0 $?
done
"$DLOCK" --help | grep -q exec && ok "dlock --help lists exec" || not_ok "dlock --help"

# ---- unreachable service: 69 -------------------------------------------------
if [ "$scheme" = file ]; then
    down="file:///proc/self/nonexistent/locks"
else
    # The same URI with the port of a closed socket on loopback.
    down=$(printf '%s' "$uri" | sed -E 's#@?127\.0\.0\.1:[0-9]+#&#; s#(127\.0\.0\.1):[0-9]+#\1:1#g')
fi
"$DLOCK" exec --uri "$down" --timeout 2s "$(name down)" -- true 2>"$work/err"
st=$?
expect_status "unreachable service exits 69" 69 "$st"
if [[ "$uri" == *:*@* ]]; then
    pw=$(printf '%s' "$uri" | sed -E 's#^[a-z]+://[^:/@]*:([^@]*)@.*#\1#')
    grep -qF -- "$pw" "$work/err" && not_ok "password leaked in error" ||
        ok "password not in the error"
fi

# ---- info ----------------------------------------------------------------------
"$DLOCK" info "$uri" >"$work/info"
expect_status "info connects" 0 $?
# An alias scheme (redlock://, postgresql://...) is served by its backend.
base_scheme=$scheme
case $scheme in postgresql) base_scheme=postgres ;; zookeeper) base_scheme=zk ;;
mariadb) base_scheme=mysql ;; redlock) base_scheme=redis ;; esac
grep -q "backend:  $base_scheme" "$work/info" && ok "info names the backend" ||
    not_ok "info backend: $(cat "$work/info")"
grep -q fencing "$work/info" && ok "info lists capabilities" || not_ok "info caps"

# ---- a lost lock: SIGTERM to the command, exit 75 ------------------------------
# Each backend loses a lock its own way. A backend may define its own
# lose_lock in tests/<scheme>/cli_lose_lock.sh (sourced below); this default
# knows file:// and lease backends.
lose_lock() { # name dlock-pid
    case "$scheme" in
    file)
        # Someone removes the lock file: the next holder would lock a new
        # file, so the holder's renewal must report the lock lost.
        rm -f "$work/locks/$1.lock"
        ;;
    *)
        # Lease backends: stop the holder past its lease, let another take
        # the lock, then let the holder's watchdog find out.
        kill -STOP "$2"
        sleep 2
        "$DLOCK" exec --timeout 10s "$1" -- true >/dev/null 2>&1
        kill -CONT "$2"
        ;;
    esac
}
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/../$base_scheme/cli_lose_lock.sh" ]; then
    # shellcheck disable=SC1090
    . "$here/../$base_scheme/cli_lose_lock.sh"
fi
lost=$(name lost)
"$DLOCK" exec --lease 600ms --kill-after 5s "$lost" -- \
    sh -c "trap 'echo term >$work/term; exit 0' TERM; touch $work/gate2; while :; do sleep 0.05; done" \
    2>"$work/lost-err" &
holder=$!
pids+=("$holder")
if wait_for "$work/gate2"; then
    lose_lock "$lost" "$holder"
    wait "$holder"
    expect_status "lost lock exits 75" 75 $?
    [ -e "$work/term" ] && ok "command got SIGTERM" || not_ok "command not told"
    grep -q "lost" "$work/lost-err" && ok "says the lock was lost" ||
        not_ok "lost message: $(cat "$work/lost-err")"
else
    not_ok "lost-lock holder did not start"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
