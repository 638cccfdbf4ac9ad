# lib.sh: what the etcd test scripts share (sourced, after they set
# "what", a word for their scratch directory): the built dlock, a scratch
# directory, background processes killed at exit, TAP-like results.
# shellcheck shell=bash

# shellcheck disable=SC2034 # used by the scripts that source this
DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
: "${DLOCK_TEST_ETCD_URI:?run under tests/servers/with-servers.sh etcd}"
work=$(mktemp -d "/tmp/dlock-etcd-${what:?}-XXXXXX")
# Processes started in the background: resumed (one may be stopped) and
# killed at exit.
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill -CONT "$p" 2>/dev/null
        kill -9 "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }
expect_status() { # what want got
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (exit $3, want $2)"; fi
}
# Wait up to 15 s until a file exists.
wait_for() {
    local i
    for ((i = 0; i < 150; i++)); do [ -e "$1" ] && return 0; sleep 0.1; done
    return 1
}
# The last line: "N passed, N failed", and the exit status.
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}
