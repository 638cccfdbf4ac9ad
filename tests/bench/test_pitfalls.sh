#!/usr/bin/env bash
# test_pitfalls.sh CHECK_JSON: `dlock demo pitfalls` against the real Redis
# and ZooKeeper that with-servers.sh started: every broken recipe shows its
# failure and every fix holds (the summary says so per recipe, the exit
# status for all), the timelines show the failures themselves, a recipe
# without its server is skipped, and bad options exit 64. Also the
# inventory's optimistic row on a stock in Redis.
set -u
. "$(dirname "$0")/lib.sh"
: "${DLOCK_TEST_REDIS_URI:?run under with-servers.sh redis zk}"
: "${DLOCK_TEST_ZK_URI:?run under with-servers.sh redis zk}"

start=$(date +%s)
"$DLOCK" demo pitfalls --uri "$DLOCK_TEST_REDIS_URI" \
    --uri "$DLOCK_TEST_ZK_URI" >"$work/out" 2>&1
rc=$?
took=$(($(date +%s) - start))
[ $rc = 0 ] && ok "pitfalls exits 0 (${took} s)" ||
    not_ok "pitfalls (exit $rc): $(tail -c 1500 "$work/out")"
for r in setnx-expire getset-clock del-no-owner get-then-del zk-herd; do
    read -r _ broken fix _ <<<"$(grep "^$r " "$work/out")"
    [ "$broken" = failed ] && [ "$fix" = held ] &&
        ok "$r: the broken recipe failed, the fix held" ||
        not_ok "$r: broken=$broken fix=$fix"
done
# What the verdicts rest on, as the timelines show it.
grep -q 'TTL key -> -1 (no expiry: held forever)' "$work/out" &&
    ok "setnx-expire: the key has no TTL" || not_ok "no TTL -1 line"
grep -q 'W  timed out after' "$work/out" &&
    ok "setnx-expire: the waiter timed out" || not_ok "no waiter time-out"
[ "$(grep -c '=> B and C both held it for' "$work/out")" = 2 ] &&
    ok "del-no-owner, get-then-del: B and C held it together" ||
    not_ok "two-holder lines: $(grep '=>' "$work/out")"
grep -q '=> A and B both held it for' "$work/out" &&
    ok "getset-clock: the lock was stolen early" || not_ok "no theft"
grep -q 'dlock_release -> ENOTOWNER\|dlock_release -> ELOST' "$work/out" &&
    ok "del-no-owner: dlock refused A's late release" || not_ok "no refusal"
grep -q 'compare-and-delete -> 0: not mine' "$work/out" &&
    ok "get-then-del: the script left B's lock alone" || not_ok "no CAD 0"
grep -q 'for nothing: only' "$work/out" &&
    ok "zk-herd: the waiters' wasted wake-ups are counted" || not_ok "herd"
grep -q '^5 of 5 recipes: the broken one failed and the fix held' \
    "$work/out" && ok "closing line" || not_ok "closing line"

# One recipe; a recipe without its server is skipped and said so.
"$DLOCK" demo pitfalls --uri "$DLOCK_TEST_REDIS_URI" \
    --only setnx-expire,zk-herd >"$work/out2" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^zk-herd  *skipped' "$work/out2" &&
    grep -q '^setnx-expire  *failed  *held' "$work/out2" &&
    ok "--only, and zk-herd skipped without a zk:// URI" ||
    not_ok "--only (exit $rc): $(tail -c 600 "$work/out2")"

# The inventory's optimistic strategy on a stock in Redis (WATCH, EXEC):
# exact, no lock.
"$DLOCK" demo inventory --uri "$DLOCK_TEST_REDIS_URI" --workers 3 \
    --stock 60 >"$work/inv" 2>&1
rc=$?
read -r _ _ _ sold over _ verdict <<<"$(grep '^optimistic on redis://' "$work/inv")"
[ $rc = 0 ] && [ "$sold" = 60 ] && [ "$over" = 0 ] && [ "$verdict" = exact ] &&
    grep -q 'since its WATCH: .* retries per sale' "$work/inv" &&
    ok "inventory: optimistic on Redis (WATCH/EXEC) sold exactly 60" ||
    not_ok "inventory on Redis (exit $rc): $(cat "$work/inv")"

# No server at all: nothing to show is a usage error.
DLOCK_URI= expect_usage "no URI" "nothing ran" "$DLOCK" demo pitfalls
expect_usage "--only x" "no recipe 'x'" "$DLOCK" demo pitfalls --only x
expect_usage "file:// URI" "redis:// or zk://" \
    "$DLOCK" demo pitfalls --uri "$uri"
expect_usage "--waiters 1" --waiters "$DLOCK" demo pitfalls --waiters 1
expect_usage "two redis:// URIs" "a second redis://" "$DLOCK" demo pitfalls \
    --uri "$DLOCK_TEST_REDIS_URI" --uri "$DLOCK_TEST_REDIS_URI"
expect_usage "--only ," "--only: empty" "$DLOCK" demo pitfalls --only ,

finish
