#!/usr/bin/env bash
# test_demo.sh CHECK_JSON: `dlock demo inventory` on file:// sells exactly
# the stock with the distributed lock and with the optimistic compare-and-
# set (the exit status says so too), shows the no-lock and per-process-mutex
# rows with their explanation, and refuses bad options with 64. And that
# `dlock demo pitfalls` runs its helper program, or exits 69 without it.
set -u
. "$(dirname "$0")/lib.sh"

"$DLOCK" demo inventory --uri "$uri" --workers 3 --stock 60 >"$work/out" 2>&1
rc=$?
[ $rc = 0 ] && ok "demo exits 0" || not_ok "demo (exit $rc): $(head -c 500 "$work/out")"
line=$(grep "^dlock file://" "$work/out")
read -r _ _ sold over _ verdict <<<"$line"
[ "$sold" = 60 ] && [ "$over" = 0 ] && [ "$verdict" = exact ] &&
    ok "the distributed lock sold exactly 60" || not_ok "dlock row: $line"
grep -q '^no lock' "$work/out" && grep -q '^mutex in each process' "$work/out" &&
    ok "no-lock and mutex rows are shown" || not_ok "rows"
grep -q 'items sold that were not in stock' "$work/out" &&
    ok "the no-lock row is explained" || not_ok "explanation"
# The optimistic row, no lock but a version compare-and-set: exact too.
read -r _ _ _ _ _ sold over _ verdict <<<"$(grep '^optimistic' "$work/out")"
[ "$sold" = 60 ] && [ "$over" = 0 ] && [ "$verdict" = exact ] &&
    ok "the optimistic row sold exactly 60" ||
    not_ok "optimistic row: $(grep -A2 '^optimistic' "$work/out")"
grep -q 'retries per sale' "$work/out" &&
    ok "the optimistic row counts its retries" || not_ok "retries"
grep -q '^1 of 1 distributed locks sold exactly 60' "$work/out" &&
    ok "the closing line counts the exact locks" || not_ok "closing line"

# Two URIs: both exact.
"$DLOCK" demo inventory --uri "$uri" --uri "$uri-b" --workers 2 --stock 30 \
    >"$work/out2" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(grep -c '^dlock .*exact$' "$work/out2")" = 2 ] &&
    ok "two URIs, both exact" || not_ok "two URIs (exit $rc)"

# A password never shows; the unknown scheme is a usage error.
"$DLOCK" demo inventory --uri 'nosuch://user:s3cret@127.0.0.1:1/' --stock 10 \
    >"$work/out3" 2>&1
rc=$?
[ $rc = 64 ] && ok "an unknown scheme exits 64" || not_ok "unknown scheme (exit $rc)"
grep -q s3cret "$work/out3" && not_ok "the password was printed" ||
    ok "the password is hidden"

expect_usage "--workers 0" --workers "$DLOCK" demo inventory --workers 0
expect_usage "--stock x" --stock "$DLOCK" demo inventory --stock x
expect_usage "unknown demo" "no demo" "$DLOCK" demo bakery
expect_usage "unknown option" --bogus "$DLOCK" demo inventory --bogus

# `dlock demo pitfalls` runs the program dlock-pitfalls ($DLOCK_LIBEXEC_DIR
# first) with the same arguments and its exit status; one that cannot run
# (exec fails, or the loader exits 127: a client library is missing) is
# exit 69, naming the file and the Debian package.
mkdir "$work/libexec"
printf '#!/bin/sh\necho "args: $*"\nexit 3\n' >"$work/libexec/dlock-pitfalls"
chmod +x "$work/libexec/dlock-pitfalls"
DLOCK_LIBEXEC_DIR=$work/libexec "$DLOCK" demo pitfalls --only 'a b' -x \
    >"$work/out4" 2>&1
rc=$?
[ $rc = 3 ] && grep -qx 'args: --only a b -x' "$work/out4" &&
    ok "demo pitfalls runs \$DLOCK_LIBEXEC_DIR/dlock-pitfalls with its arguments" ||
    not_ok "demo pitfalls' helper (exit $rc): $(cat "$work/out4")"
printf '#!/bin/sh\nexit 127\n' >"$work/libexec/dlock-pitfalls"
DLOCK_LIBEXEC_DIR=$work/libexec "$DLOCK" demo pitfalls --help \
    >"$work/out4" 2>&1
rc=$?
[ $rc = 69 ] && grep -q "$work/libexec/dlock-pitfalls cannot run" "$work/out4" &&
    grep -q 'Debian package dlock-pitfalls' "$work/out4" &&
    ok "a helper that cannot run: exit 69, its file and package named" ||
    not_ok "helper exit 127 (exit $rc): $(cat "$work/out4")"

finish
