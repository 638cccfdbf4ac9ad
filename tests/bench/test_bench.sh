#!/usr/bin/env bash
# test_bench.sh CHECK_JSON: `dlock bench` on file://, with short durations.
# It runs every workload on two URIs in one run, prints every section and
# the goals, writes JSON with every expected key (checked with json-c),
# Markdown and an SVG; bad options exit 64 naming the option; an
# unreachable URI exits 69. Speed is never asserted.
set -u
. "$(dirname "$0")/lib.sh"

# ---- a short run on two URIs -----------------------------------------------
"$DLOCK" bench --uri "$uri" --uri "$uri-2" --duration 300ms --warmup 100ms \
    --workers 2 --locks 40 --json "$work/b.json" --svg "$work/b.svg" \
    --markdown "$work/b.md" >"$work/table" 2>"$work/stderr"
rc=$?
[ $rc = 0 ] && ok "bench runs on two file:// URIs" ||
    not_ok "bench runs (exit $rc: $(head -c 500 "$work/stderr"))"
for section in uncontended contended "many locks" goals; do
    grep -q "^$section" "$work/table" && ok "table has '$section'" ||
        not_ok "table has '$section'"
done
grep -q "uncontended vs floor: *\(pass\|miss\)" "$work/table" &&
    ok "the floor goal is judged (file has a floor)" ||
    not_ok "the floor goal is judged"
[ ! -s "$work/stderr" ] && ok "no progress line when stderr is not a terminal" ||
    not_ok "stderr is empty ($(head -c 200 "$work/stderr"))"

keys=(dlock_version:string date:string machine.sysname:string
    machine.nproc:pos machine.cpu_model:string parameters.duration_ms:pos
    parameters.workers:pos parameters.locks:pos parameters.workloads:array
    parameters.goals.rtt_definition:string results:array
    results.1.uri:string)
for r in 0 1; do
    p=results.$r
    keys+=("$p.scheme:string" "$p.mode:string" "$p.caps:array"
        "$p.reachable:bool"
        "$p.uncontended.cycles:pos" "$p.uncontended.per_s:pos"
        "$p.uncontended.p50_ns:pos" "$p.uncontended.p99_ns:pos"
        "$p.uncontended.p999_ns:pos" "$p.uncontended.measured:bool"
        "$p.floor.available:bool" "$p.floor.cycles:pos" "$p.floor.p50_ns:pos"
        "$p.floor.dlock_p50_over_floor_p50:pos"
        "$p.fence.available:=true" "$p.fence.cycles:pos" "$p.fence.p50_ns:pos"
        "$p.cleanup.measured:=true"
        "$p.contended.workers:pos" "$p.contended.acquisitions:pos"
        "$p.contended.handoffs:int" "$p.contended.handoffs_per_s:number"
        "$p.contended.handoff_latency.p50_ns:int"
        "$p.contended.handoff_latency.p99_ns:int"
        "$p.contended.overlaps:int" "$p.contended.acquisitions_per_worker:array"
        "$p.contended.acquisitions_per_worker.1:int"
        "$p.contended.fairness.jain_index:pos" "$p.contended.fairness.stddev:number"
        "$p.contended.fairness.min:int" "$p.contended.fairness.max:pos"
        "$p.many_locks.locks:pos" "$p.many_locks.lease_ms:pos"
        "$p.many_locks.renewals_expected_per_s:pos"
        "$p.many_locks.renewals_method:string"
        "$p.many_locks.watchdog_cpu_pct_of_one_core:number"
        "$p.many_locks.rss_delta_bytes:int" "$p.many_locks.bytes_per_lock:number"
        "$p.many_locks.lost:int"
        "$p.goals.uncontended_vs_floor.status:string"
        "$p.goals.handoff_vs_rtt.status:string"
        "$p.goals.handoffs_vs_contended_floor.status:string"
        "$p.contended_floor.available:=false"
        "$p.goals.watchdog_cpu.status:string")
done
out=$("$CHECK_JSON" "$work/b.json" "${keys[@]}" 2>&1)
[ $? = 0 ] && ok "JSON parses and has every expected key" ||
    not_ok "JSON keys: $out"
# file:// is a correct lock: two holders at once never happen.
"$CHECK_JSON" "$work/b.json" results.0.contended.overlaps >/dev/null &&
    grep -q '"overlaps":0' "$work/b.json" && ok "no overlapping holders" ||
    not_ok "overlapping holders in the contended run"

head -c 4 "$work/b.svg" | grep -q '<svg' && tail -c 8 "$work/b.svg" | grep -q '</svg>' &&
    ok "SVG starts with <svg and ends with </svg>" || not_ok "SVG framing"
grep -c '<rect ' "$work/b.svg" | grep -qv '^[01]$' && ok "SVG has bars" ||
    not_ok "SVG has bars"
# Every tag the chart opens is closed (rect/text/style/svg), by count.
opened=$(grep -o '<text' "$work/b.svg" | wc -l)
closed=$(grep -o '</text>' "$work/b.svg" | wc -l)
[ "$opened" = "$closed" ] && ok "SVG text elements are closed" ||
    not_ok "SVG <text> $opened vs </text> $closed"
grep -q '^| file/ofd |' "$work/b.md" && ok "Markdown has a row per backend" ||
    not_ok "Markdown rows"
grep -q '| fence p50 µs |' "$work/b.md" && ok "Markdown has the fence column" ||
    not_ok "Markdown has no fence column"
# The fence figure comes back from the JSON as it was printed; the bench
# left no lock file (its clean-up).
"$DLOCK" bench --from-json "$work/b.json" >"$work/again" 2>&1
fence_of() { sed -n '/^uncontended:/,/^$/p' "$1" | awk '$1 == 1 { print $NF }'; }
[ -n "$(fence_of "$work/table")" ] &&
    [ "$(fence_of "$work/table")" = "$(fence_of "$work/again")" ] &&
    ok "--from-json reads the fence figure back" ||
    not_ok "fence figure: '$(fence_of "$work/table")' then '$(fence_of "$work/again")'"
[ -z "$(find "$work/locks" "$work/locks-2" -type f)" ] && ok "no lock file left" ||
    not_ok "lock files left: $(find "$work/locks" "$work/locks-2" -type f | head -5)"

# ---- one workload only ------------------------------------------------------
"$DLOCK" bench --uri "$uri" --duration 200ms --warmup 0 --workloads many \
    --locks 10 --lease 150ms --json "$work/m.json" >/dev/null 2>"$work/m.err"
rc=$?
[ $rc = 0 ] && ok "--workloads many runs alone" || not_ok "--workloads many (exit $rc)"
"$CHECK_JSON" "$work/m.json" results.0.many_locks.lease_ms:pos \
    results.0.uncontended.measured >/dev/null && grep -q '"lease_ms":150' "$work/m.json" &&
    ok "--lease is used" || not_ok "--lease is used"

# ---- bad input ---------------------------------------------------------------
expect_usage "--workers 1 is refused" --workers "$DLOCK" bench --workers 1
expect_usage "--workers 65 is refused" --workers "$DLOCK" bench --workers 65
expect_usage "--duration without unit" --duration "$DLOCK" bench --duration 5
expect_usage "--duration above 10m" --duration "$DLOCK" bench --duration 11m
expect_usage "--duration below 100ms" --duration "$DLOCK" bench --duration 50ms
expect_usage "--warmup above 1m" --warmup "$DLOCK" bench --warmup 2m
expect_usage "--locks 0" --locks "$DLOCK" bench --locks 0
expect_usage "--locks too many" --locks "$DLOCK" bench --locks 100001
expect_usage "--lease too short" --lease "$DLOCK" bench --lease 10ms
expect_usage "--workloads unknown" --workloads "$DLOCK" bench --workloads fast
expect_usage "--json in a missing directory" --json "$DLOCK" bench --json /nonexistent/dir/x.json
expect_usage "--svg in a missing directory" --svg "$DLOCK" bench --svg /nonexistent/dir/x.svg
expect_usage "unknown option" --bogus "$DLOCK" bench --bogus
expect_usage "option without value" --duration "$DLOCK" bench --duration
expect_usage "stray argument" stray "$DLOCK" bench stray
expect_usage "empty --uri" --uri "$DLOCK" bench --uri ''
"$DLOCK" bench --uri 'file://relative' --duration 100ms --warmup 0 >/dev/null 2>"$work/rel.err"
rc=$?
[ $rc = 64 ] && ok "a bad URI exits 64" || not_ok "a bad URI exits 64 (got $rc)"
"$DLOCK" bench --uri 'file:///proc/dlock-no/such' --duration 100ms --warmup 0 \
    >/dev/null 2>"$work/err"
rc=$?
[ $rc = 66 ] && grep -q 'proc/dlock-no' "$work/err" &&
    ok "a lock directory that does not exist exits 66 and says which" ||
    not_ok "missing lock directory (exit $rc)"
"$DLOCK" bench --help | grep -q -- '--workloads' && ok "--help lists the options" ||
    not_ok "--help"

finish
