# scenario_servers.sh: the server half of test_scenario.sh, sourced by it
# under `with-servers.sh redis redis5`. Outcomes asserted are the ones the
# modes determine, never a time: Redis (a lease mode) keeps a lock through
# a cut shorter than its lease, lets a restarted holder in once the lease
# ran out, keeps a cut waiter waiting and serves both waiters; Redlock
# keeps its lock when one node of five dies.
: "${DLOCK_TEST_REDIS_URI:?run under with-servers.sh redis redis5}"
: "${DLOCK_TEST_REDIS5_HOSTS:?run under with-servers.sh redis redis5}"
ctl=$DLOCK_TEST_SERVERCTL
redis="$DLOCK_TEST_REDIS_URI?mode=setnx"

# json_ok NAME FILE CHECK...: ok when every check holds, else the misses.
json_ok() {
    local name=$1 file=$2 miss
    shift 2
    if miss=$("$CHECK_JSON" "$file" "$@"); then
        ok "$name"
    else
        not_ok "$name: $miss"
    fi
}

# ---- every scenario on file:// and Redis, side by side -------------------------
t=$SECONDS
"$DLOCK" scenario all --uri "$uri" --uri "$redis" \
    --restart-cmd "$ctl restart redis" --lease 300ms \
    --json "$work/all.json" --markdown "$work/all.md" \
    >"$work/all.out" 2>"$work/all.err"
rc=$?
echo "# scenario all on file:// and redis: $((SECONDS - t)) s"
[ $rc = 0 ] && grep -q '^ *file/ofd  *redis/setnx$' "$work/all.out" &&
    ok "all: file:// and redis side by side" ||
    not_ok "all (exit $rc): $(tail -c 800 "$work/all.out") $(head -c 400 "$work/all.err")"
checks=(runs:len=18)
for i in $(seq 0 17); do checks+=("runs.$i.ran:=true" "runs.$i.cell:string"); done
json_ok "all: 18 runs, every one ran and has a cell" "$work/all.json" "${checks[@]}"
# runs 9-17 are Redis's, in the order of `dlock scenario --help`
json_ok "redis: a restarted holder gets its lock back" "$work/all.json" \
    runs.12.scenario:=holder-restart runs.12.results.restarted_got_lock:=true
json_ok "redis: a cut waiter keeps waiting; both waiters are served" \
    "$work/all.json" runs.13.scenario:=waiter-disconnect \
    runs.13.results.cut_waiter_kept_waiting:=true \
    runs.13.results.both_waiters_served:=true
json_ok "redis: the server was restarted for real" "$work/all.json" \
    runs.16.scenario:=server-restart runs.16.results.applicable:=true \
    runs.16.results.restart_exit:=0
json_ok "redis: node-loss is n/a on one server" "$work/all.json" \
    runs.17.scenario:=node-loss 'runs.17.summary:=n/a (one server)'
# No empty cell in the table the guide shows.
if [ "$(grep -c '^| ' "$work/all.md")" = 3 ] && ! grep -q '|  |' "$work/all.md"; then
    ok "all: the Markdown table has a row per URI and no empty cell"
else
    not_ok "all: Markdown: $(cat "$work/all.md")"
fi

# ---- holder-reconnect: a cut well inside the lease -----------------------------
t=$SECONDS
"$DLOCK" scenario holder-reconnect --uri "$redis" --lease 1s --down 200ms \
    --json "$work/reconnect.json" >"$work/reconnect.out" 2>&1
rc=$?
echo "# holder-reconnect on redis: $((SECONDS - t)) s"
[ $rc = 0 ] && ok "holder-reconnect runs on redis" ||
    not_ok "holder-reconnect (exit $rc): $(tail -c 600 "$work/reconnect.out")"
json_ok "redis: the holder keeps its lock through a 200 ms cut" \
    "$work/reconnect.json" runs.0.results.applicable:=true \
    runs.0.results.holder_kept_lock:=true runs.0.results.other_got_lock:=false

# ---- node-loss: one of Redlock's five nodes is killed ------------------------------
t=$SECONDS
# shellcheck disable=SC2016 # for dlock's /bin/sh
"$DLOCK" scenario node-loss --uri "redlock://$DLOCK_TEST_REDIS5_HOSTS?restart_delay=0" \
    --node-cmd '"$DLOCK_TEST_SERVERCTL" "$DLOCK_NODE_ACTION" redis5 "$DLOCK_NODE"' \
    --lease 1s --json "$work/node.json" >"$work/node.out" 2>&1
rc=$?
echo "# node-loss on redlock: $((SECONDS - t)) s"
[ $rc = 0 ] && grep -q 'srv kill node 1 of 5' "$work/node.out" &&
    ok "node-loss kills a Redlock node" ||
    not_ok "node-loss (exit $rc): $(tail -c 600 "$work/node.out")"
json_ok "redlock: four nodes of five keep the lock; the waiter gets it after" \
    "$work/node.json" runs.0.results.applicable:=true runs.0.results.nodes:=5 \
    runs.0.results.holder_kept_lock:=true runs.0.results.waiter_got_lock:=true \
    runs.0.results.start_exit:=0
"$ctl" pid redis5 1 >/dev/null && ok "the killed node was started again" ||
    not_ok "redis5 node 1 is not running"
