#!/usr/bin/env bash
# The long run of the project's fault-injection history checker
# (tests/history/, docs/history.md): worker processes contend for one lock
# on each backend and mode while holders are SIGSTOPped and SIGKILLed, their
# connections cut, and servers restarted and paused; the checker reads the
# logs and reports overlapping held windows, lost updates, stale fenced
# writes, fences that do not grow, hangs and stalls.
#
#   scripts/history.sh                        every backend and mode this
#                                             build has, 10 minutes each
#   scripts/history.sh --duration 1m          shorter runs
#   scripts/history.sh --only redis,postgres  some backends (file redis zk
#                                             postgres mysql etcd)
#   scripts/history.sh --mode redis-setnx     one or more modes by name
#                                             (comma list; names as in
#                                             `meson test --list`, e.g.
#                                             postgres-advisory, redlock)
#   scripts/history.sh --seed N --faults LIST passed on to `history run`
#   scripts/history.sh --readers P            (so is --workers N): P% of
#                                             the cycles readers' on modes
#                                             with shared locks (default 0)
#   scripts/history.sh --elect                every cycle campaigns in an
#                                             election (dlock_elect_*)
#   scripts/history.sh --permits N            every cycle takes one permit
#                                             of a semaphore of N; modes
#                                             without permits are skipped
#   scripts/history.sh --no-docs              leave docs/history.md alone
#   scripts/history.sh --parallel             the backends side by side, each
#                                             with its own servers (10m runs:
#                                             about 45 minutes instead of 3
#                                             hours; the modes of one backend
#                                             still run one after another)
#   scripts/history.sh --build DIR            use DIR/tests/history/history
#                                             (default: build/history)
#
# Writes docs/results/history/<mode>.json and .txt (the report of each run),
# docs/results/history/summary.md (one table), and puts that table between
# the <!-- history:begin --> and <!-- history:end --> markers of
# docs/history.md. Servers are private (tests/servers/with-servers.sh:
# 127.0.0.1, temporary directories, stopped at the end). Exits 1 if any run
# found a violation. Every run is bounded: its duration plus the first round
# of faults and the workers' bounded wind-down.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

duration=10m only='' modes='' build='' docs=1 parallel=0
extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --duration) duration=${2:?--duration needs a value}; shift ;;
    --only) only=${2:?--only needs a list}; shift ;;
    --mode) modes=${2:?--mode needs a list}; shift ;;
    --build) build=${2:?--build needs a directory}; shift ;;
    --elect) extra+=("$1") ;;
    --seed | --faults | --workers | --readers | --permits) extra+=("$1" "${2:?$1 needs a value}"); shift ;;
    --no-docs) docs=0 ;;
    --parallel) parallel=1 ;;
    --inner) break ;;
    -h | --help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "history.sh: unknown option '$1' (try --help)" >&2; exit 64 ;;
    esac
    shift
done

say() { printf '== history: %s\n' "$*" >&2; }

# ---- the inner part: runs inside with-servers.sh, with the URIs exported ------
if [ "${1:-}" = --inner ]; then
    history=$2 out=$3
    shift 3
    status=0
    for e in "$@"; do
        IFS='|' read -r name uri server <<<"$e"
        say "$name for $duration"
        args=(run --uri "$uri" --duration "$duration" --json "$out/$name.json")
        [ -z "$server" ] || args+=(--server "$server")
        args+=("${extra[@]}")
        rc=0
        "$history" "${args[@]}" >"$out/$name.txt" 2>&1 || rc=$?
        cat "$out/$name.txt"
        case $rc in
        0) ;;
        1) status=1 ;;
        77) rm -f "$out/$name.txt" "$out/$name.json" ;; # no permits here
        *) echo "history.sh: $name: history exited $rc" >&2; status=1 ;;
        esac
    done
    exit $status
fi

# ---- the outer part: build, pick the modes, run them under the servers --------
if [ -z "$build" ]; then
    bash scripts/setup-debian.sh >&2
    build=build/history
    [ -d "$build" ] || meson setup "$build" -Dbuildtype=debugoptimized >/dev/null
    ninja -C "$build" >/dev/null
fi
history=$(cd "$build" && pwd)/tests/history/history
dlock=$(cd "$build" && pwd)/tools/dlock
[ -x "$history" ] || { echo "history.sh: no $history (build with -Dtests=true)" >&2; exit 66; }

probe=$(mktemp -d /tmp/dlock-history-XXXXXX)
trap 'rm -rf "$probe"' EXIT
built=$("$dlock" info "file://$probe" | sed -n 's/^backends: //p')

# name|uri|server kind: the modes of the conformance list (backends/*/meson.build).
entries=() kinds=()
for b in $built; do
    if [ -n "$only" ] && [[ ",$only," != *",$b,"* ]]; then continue; fi
    case $b in
    file) entries+=("file|file://@TMPDIR@|") ;;
    redis)
        entries+=("redis-setnx|\$DLOCK_TEST_REDIS_URI?mode=setnx|redis"
            "redis-hash|\$DLOCK_TEST_REDIS_URI?mode=hash|redis"
            "redis-rwlock|\$DLOCK_TEST_REDIS_URI?mode=rwlock&prefer=writer|redis"
            "redis-fair|\$DLOCK_TEST_REDIS_URI?mode=fair|redis"
            "redis-queue|\$DLOCK_TEST_REDIS_URI?mode=queue|redis"
            "redlock|redlock://\$DLOCK_TEST_REDIS5_HOSTS|redis5"
            "redis-cluster-setnx|\$DLOCK_TEST_RCLUSTER_URI&mode=setnx|rcluster")
        kinds+=(redis redis5 rcluster) ;;
    zk)
        entries+=("zk|\$DLOCK_TEST_ZK_URI?lease=3s|zk"
            "zk-rwlock|\$DLOCK_TEST_ZK_URI?lease=3s&mode=rwlock|zk")
        kinds+=(zk) ;;
    postgres)
        for m in advisory advisory_xact for_update lease; do
            entries+=("postgres-$m|\$DLOCK_TEST_PG_URI?mode=$m|pg")
        done
        kinds+=(pg) ;;
    mysql)
        for m in insert for_update get_lock; do
            entries+=("mysql-$m|\$DLOCK_TEST_MYSQL_URI?mode=$m|mysql")
        done
        kinds+=(mysql) ;;
    etcd)
        entries+=("etcd-mutex|\$DLOCK_TEST_ETCD_URI?lease=3s|etcd"
            "etcd-rwlock|\$DLOCK_TEST_ETCD_URI?lease=3s&mode=rwlock|etcd")
        kinds+=(etcd) ;;
    esac
done
if [ -n "$modes" ]; then
    picked=() kinds=()
    for e in "${entries[@]}"; do
        IFS='|' read -r name _ server <<<"$e"
        if [[ ",$modes," == *",$name,"* ]]; then
            picked+=("$e")
            [ -z "$server" ] || [[ " ${kinds[*]} " == *" $server "* ]] || kinds+=("$server")
        fi
    done
    entries=("${picked[@]}")
fi
[ ${#entries[@]} -gt 0 ] || { echo "history.sh: nothing to run (built: $built)" >&2; exit 64; }
say "${#entries[@]} modes, $duration each; servers: ${kinds[*]:-none}"

out=$root/docs/results/history
mkdir -p "$out"
for e in "${entries[@]}"; do rm -f "$out/${e%%|*}.json" "$out/${e%%|*}.txt"; done
start=$(date +%s)
status=0
if [ "$parallel" = 1 ]; then
    # One run of with-servers.sh per kind of server, side by side: each
    # starts its own servers on free ports; the modes of one kind run one
    # after another, as without --parallel.
    groups=()
    for e in "${entries[@]}"; do
        IFS='|' read -r _ _ server <<<"$e"
        [[ " ${groups[*]} " == *" ${server:-none} "* ]] || groups+=("${server:-none}")
    done
    pids=()
    for g in "${groups[@]}"; do
        mine=()
        for e in "${entries[@]}"; do
            IFS='|' read -r _ _ server <<<"$e"
            [ "${server:-none}" = "$g" ] && mine+=("$e")
        done
        ks=()
        [ "$g" = none ] || ks=("$g")
        bash tests/servers/with-servers.sh "${ks[@]}" -- \
            bash "$root/scripts/history.sh" "${extra[@]}" --duration "$duration" \
            --inner "$history" "$out" "${mine[@]}" >"$out/.$g.log" 2>&1 &
        pids+=($!)
        say "started the ${#mine[@]} mode(s) of ${g/none/no server} (log: docs/results/history/.$g.log)"
    done
    for p in "${pids[@]}"; do wait "$p" || status=1; done
    cat "$out"/.*.log && rm -f "$out"/.*.log
else
    bash tests/servers/with-servers.sh "${kinds[@]}" -- \
        bash "$root/scripts/history.sh" "${extra[@]}" --duration "$duration" \
        --inner "$history" "$out" "${entries[@]}" || status=$?
fi
took=$(($(date +%s) - start))

jsons=()
for e in "${entries[@]}"; do
    [ ! -f "$out/${e%%|*}.json" ] || jsons+=("$out/${e%%|*}.json")
done
# The library's version: the last commit that changed it.
rev=$(git log -1 --format=%h -- core backends include 2>/dev/null || echo unknown)
git diff --quiet HEAD -- core backends include 2>/dev/null || rev="$rev+changes"
{
    echo "_\`scripts/history.sh --duration $duration\` on $(date -u +%Y-%m-%d)" \
        "(library at $rev), ${took} s in all; reports:" \
        "\`docs/results/history/*.txt\`, JSON next to them._"
    echo
    "$history" summary "${jsons[@]}"
} >"$out/summary.md"

if [ "$docs" = 1 ]; then
    doc=docs/history.md
    awk -v f="$out/summary.md" '
        /<!-- history:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
        /<!-- history:end -->/ { skip = 0 }
        !skip' "$doc" >"$doc.new" && mv "$doc.new" "$doc"
    say "updated $doc between the history markers"
fi
echo
cat "$out/summary.md"
say "done in ${took} s"
exit $status
