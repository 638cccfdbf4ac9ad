# lib.sh: what the bench/scenario/demo tests share: a work directory that
# is removed on exit, TAP-like ok/not ok lines, and checks of exit status
# and messages. Sourced; $1 of the test is the check_json program.
DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
CHECK_JSON=${1:?usage: $0 CHECK_JSON}
work=$(mktemp -d /tmp/dlock-benchtest-XXXXXX)
trap 'rm -rf "$work"' EXIT
uri="file://$work/locks"
mkdir "$work/locks" "$work/locks-2" "$work/locks-b" # file:// makes no directory

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }
# check NAME CMD...: ok when CMD succeeds.
check() {
    local name=$1
    shift
    if "$@"; then ok "$name"; else not_ok "$name"; fi
}
# expect_usage NAME WORD CMD...: CMD exits 64 and its stderr names WORD.
expect_usage() {
    local name=$1 word=$2 rc
    shift 2
    "$@" >"$work/out" 2>"$work/err"
    rc=$?
    if [ $rc = 64 ] && grep -q -- "$word" "$work/err" &&
        ! grep -q -E 'Sanitizer|runtime error:' "$work/err"; then
        ok "$name"
    else
        not_ok "$name (exit $rc, stderr: $(head -c 300 "$work/err"))"
    fi
}
finish() {
    # A sanitizer report in any child (worker, actor) fails the test.
    if grep -l -E 'Sanitizer|runtime error:' "$work"/* 2>/dev/null; then
        not_ok "a sanitizer reported (files above)"
        grep -h -A5 -E 'Sanitizer|runtime error:' "$work"/* | head -40
    else
        ok "no sanitizer report"
    fi
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
}
