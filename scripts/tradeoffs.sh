#!/usr/bin/env bash
# Regenerate the measured part of docs/tradeoffs.md: speed and failure
# behaviour of every backend and mode this build has, from real runs.
#
#   scripts/tradeoffs.sh                 everything; rewrites the text between
#                                        <!-- results:begin --> and
#                                        <!-- results:end --> in docs/tradeoffs.md
#   scripts/tradeoffs.sh --no-docs       measure and print, leave the doc alone
#   scripts/tradeoffs.sh --quick         short runs (a smoke test of the script)
#   scripts/tradeoffs.sh --only redis,postgres   a subset of backends
#   scripts/tradeoffs.sh --build DIR     use DIR/tools/dlock (default: a
#                                        release build in build/tradeoffs)
#
# Steps: build; ask the built `dlock info` which backends it has; start one
# private server of each kind needed (tests/servers/with-servers.sh, on
# 127.0.0.1, stopped afterwards); let them settle; then
#   1. `dlock bench` on one URI per backend and mode, all in ONE run so they
#      are compared under the same machine state (loopback latency on these
#      VMs is bimodal: see NOTES.md item 5)      -> docs/results/bench.*
#   2. the watchdog goal: 10 000 locks held with a 30 s lease on each lease
#      mode that renews in batches (Redis)        -> docs/results/watchdog.*
#   3. every `dlock scenario` on every URI; server-restart restarts the
#      URI's own server with tests/servers/ctl.sh -> docs/results/scenarios/
# and writes the Markdown of all three to docs/results/results.md.
# Bounded: every command has a timeout; all backends take about 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0 docs=1 only='' build=''
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --no-docs) docs=0 ;;
    --only) only=${2:?--only needs a list}; shift ;;
    --build) build=${2:?--build needs a directory}; shift ;;
    --inner) break ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "tradeoffs.sh: unknown option '$1' (try --help)" >&2; exit 64 ;;
    esac
    shift
done

say() { printf '== tradeoffs: %s\n' "$*" >&2; }

# ---- the inner part: runs inside with-servers.sh, with the URIs exported --------
if [ "${1:-}" = --inner ]; then
    dlock=$2 out=$3 locks=$4
    shift 4
    if [ "$quick" = 1 ]; then
        bench_opts=(--duration 300ms --warmup 100ms --locks 100 --workers 3)
        wd_opts=(--duration 1s --locks 1000 --lease 3s)
        sc_lease=300ms
    else
        bench_opts=(--duration 2s --warmup 1s --locks 1000 --workers 4)
        wd_opts=(--duration 20s --locks 10000 --lease 30s)
        sc_lease=1s
    fi
    # label|uri|ctl.sh target for server-restart ("" = no server).
    # Redlock: the nodes were started by this run a moment ago, and a
    # client cannot tell a first start from a restart, so the delayed
    # restart (restart_delay, a lease by default) would keep every node out
    # of the quorum for the first lease; the history suite shows the delay.
    entries=()
    for b in "$@"; do
        case $b in
        file) entries+=("file|file://$locks|") ;;
        redis)
            entries+=("redis setnx|$DLOCK_TEST_REDIS_URI?mode=setnx|redis"
                "redis hash|$DLOCK_TEST_REDIS_URI?mode=hash|redis"
                "redlock|redlock://$DLOCK_TEST_REDIS5_HOSTS?restart_delay=0|redis5 1") ;;
        zk)
            entries+=("zk|$DLOCK_TEST_ZK_URI?lease=3s|zk"
                "zk rwlock|$DLOCK_TEST_ZK_URI?lease=3s&mode=rwlock|zk") ;;
        postgres)
            for m in advisory advisory_xact for_update lease; do
                entries+=("postgres $m|$DLOCK_TEST_PG_URI?mode=$m|pg")
            done ;;
        mysql)
            for m in insert for_update get_lock; do
                entries+=("mysql $m|$DLOCK_TEST_MYSQL_URI?mode=$m|mysql")
            done ;;
        etcd)
            entries+=("etcd|$DLOCK_TEST_ETCD_URI?lease=3s|etcd"
                "etcd rwlock|$DLOCK_TEST_ETCD_URI?lease=3s&mode=rwlock|etcd") ;;
        esac
    done

    if [ "$quick" = 0 ] && [ "$#" -gt 1 ]; then
        say "letting the servers settle (10 s)"
        sleep 10
    fi

    # 0. what each mode promises, as the built dlock reports it
    caps=(lease conn-bound native-wait notify fair shared fencing
        survives-reconnect session-per-lock no-renew batch-renew)
    {
        printf '| backend/mode |'
        printf ' %s |' "${caps[@]}"
        printf '\n|---|'
        printf -- '---|%.0s' "${caps[@]}"
        printf '\n'
        for e in "${entries[@]}"; do
            IFS='|' read -r label uri _ <<<"$e"
            info=$(timeout 60 "$dlock" info "$uri" 2>&1) || true
            bm=$(printf '%s\n' "$info" | sed -n 's/^backend: *//p')/$(printf '%s\n' "$info" | sed -n 's/^mode: *//p')
            [ "$bm" != / ] || bm="$label (info failed)"
            printf '| %s |' "$bm"
            for c in "${caps[@]}"; do
                if printf '%s\n' "$info" | grep -q "^  yes $c "; then
                    printf ' yes |'
                else
                    printf ' – |'
                fi
            done
            printf '\n'
        done
    } >"$out/caps.md"

    # 1. speed, all URIs in one run
    uris=()
    for e in "${entries[@]}"; do
        IFS='|' read -r _ uri _ <<<"$e"
        uris+=(--uri "$uri")
    done
    say "bench: ${#entries[@]} URIs"
    timeout 900 "$dlock" bench "${uris[@]}" "${bench_opts[@]}" \
        --json "$out/bench.json" --svg "$out/bench.svg" \
        --markdown "$out/bench.md" >"$out/bench.txt" || {
        echo "tradeoffs.sh: dlock bench failed (exit $?); see $out/bench.txt" >&2
    }
    cat "$out/bench.txt"

    # 2. the watchdog goal, on the Redis lease modes
    wd=()
    for e in "${entries[@]}"; do
        IFS='|' read -r label uri _ <<<"$e"
        case $label in "redis setnx" | "redis hash") wd+=(--uri "$uri") ;; esac
    done
    rm -f "$out/watchdog.md"
    if [ ${#wd[@]} -gt 0 ]; then
        say "bench: watchdog with ${wd_opts[*]}"
        timeout 600 "$dlock" bench "${wd[@]}" --workloads many "${wd_opts[@]}" \
            --warmup 0 --json "$out/watchdog.json" \
            --markdown "$out/watchdog.md" >"$out/watchdog.txt" || {
            echo "tradeoffs.sh: watchdog bench failed; see $out/watchdog.txt" >&2
        }
        cat "$out/watchdog.txt"
    fi

    # 3. every scenario on every URI
    rm -rf "$out/scenarios"
    mkdir -p "$out/scenarios"
    scen=(holder-crash holder-pause conn-drop server-restart waiter-crash)
    {
        printf '| backend/mode |'
        printf ' %s |' "${scen[@]}"
        printf '\n|---|---|---|---|---|---|\n'
    } >"$out/scenarios.md"
    for e in "${entries[@]}"; do
        IFS='|' read -r label uri ctl <<<"$e"
        slug=${label// /-}
        row='' shown=''
        for sc in "${scen[@]}"; do
            args=(--uri "$uri" --lease "$sc_lease" --json "$out/scenarios/$slug-$sc.json")
            if [ "$sc" = server-restart ] && [ -n "$ctl" ]; then
                # shellcheck disable=SC2206
                args+=(--restart-cmd "$DLOCK_TEST_SERVERCTL restart $ctl")
            fi
            say "scenario $sc on $label"
            rc=0
            timeout 180 "$dlock" scenario "$sc" "${args[@]}" \
                >"$out/scenarios/$slug-$sc.txt" 2>&1 || rc=$?
            cat "$out/scenarios/$slug-$sc.txt"
            # "backend redis, mode setnx: ..." names the row as bench does
            [ -n "$shown" ] || shown=$(sed -n \
                's/^backend \([^,]*\), mode \([^:]*\):.*/\1\/\2/p' \
                "$out/scenarios/$slug-$sc.txt")
            cell=$(sed -n 's/^summary: //p' "$out/scenarios/$slug-$sc.txt")
            [ -n "$cell" ] || cell="not run (exit $rc)"
            row+=" ${cell//|/\\|} |"
        done
        echo "| ${shown:-$label} |$row" >>"$out/scenarios.md"
    done
    exit 0
fi

# ---- the outer part: build, pick the servers, run the inner part under them -----
if [ -z "$build" ]; then
    bash scripts/setup-debian.sh >&2
    build=build/tradeoffs
    [ -d "$build" ] || meson setup "$build" -Dbuildtype=release -Dtests=false >/dev/null
    ninja -C "$build" >/dev/null
fi
dlock=$(cd "$build" && pwd)/tools/dlock
[ -x "$dlock" ] || { echo "tradeoffs.sh: no $dlock (build it first)" >&2; exit 66; }

locks=$(mktemp -d /tmp/dlock-tradeoffs-XXXXXX)
trap 'rm -rf "$locks"' EXIT
built=$("$dlock" info "file://$locks" | sed -n 's/^backends: //p')
backends=() kinds=()
for b in $built; do
    case $b in file | redis | zk | postgres | mysql | etcd) ;; *) continue ;; esac
    if [ -n "$only" ] && [[ ",$only," != *",$b,"* ]]; then continue; fi
    backends+=("$b")
    case $b in
    redis) kinds+=(redis redis5) ;;
    zk) kinds+=(zk) ;;
    postgres) kinds+=(pg) ;;
    mysql) kinds+=(mysql) ;;
    etcd) kinds+=(etcd) ;;
    esac
done
[ ${#backends[@]} -gt 0 ] || { echo "tradeoffs.sh: no backend to measure (built: $built)" >&2; exit 64; }
say "backends: ${backends[*]}; servers: ${kinds[*]:-none}"

out=$root/docs/results
mkdir -p "$out"
start=$(date +%s)
inner=(bash "$root/scripts/tradeoffs.sh")
[ "$quick" = 1 ] && inner+=(--quick)
# file:// makes lock files, not directories.
mkdir -p "$locks/locks"
inner+=(--inner "$dlock" "$out" "$locks/locks" "${backends[@]}")
bash tests/servers/with-servers.sh "${kinds[@]}" -- "${inner[@]}"
took=$(($(date +%s) - start))

# The Markdown for the doc: three tables and how they were made.
{
    echo "_Regenerated by \`scripts/tradeoffs.sh\` on $(date -u +%Y-%m-%d) in ${took} s"
    echo "(backends: ${backends[*]}). Raw figures: \`docs/results/bench.json\`,"
    echo "\`docs/results/scenarios/*.json\`; chart: \`docs/results/bench.svg\`._"
    echo
    echo "#### What each mode promises: \`dlock info\`"
    echo
    cat "$out/caps.md"
    echo
    echo "#### Speed: \`dlock bench\`"
    echo
    [ -f "$out/bench.md" ] && cat "$out/bench.md" || echo "(bench did not run)"
    if [ -f "$out/watchdog.md" ]; then
        echo
        echo "#### The watchdog holding 10 000 locks"
        echo
        cat "$out/watchdog.md"
    fi
    echo
    echo "#### Failures: \`dlock scenario\` (lease $([ "$quick" = 1 ] && echo 300ms || echo 1s))"
    echo
    cat "$out/scenarios.md"
} >"$out/results.md"

if [ "$docs" = 1 ]; then
    doc=docs/tradeoffs.md
    if grep -q '<!-- results:begin -->' "$doc" && grep -q '<!-- results:end -->' "$doc"; then
        awk -v f="$out/results.md" '
            /<!-- results:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
            /<!-- results:end -->/ { skip = 0 }
            !skip' "$doc" >"$doc.new" && mv "$doc.new" "$doc"
        say "updated $doc between the results markers"
    else
        echo "tradeoffs.sh: $doc has no results markers; Markdown is in $out/results.md" >&2
    fi
fi
echo
cat "$out/results.md"
say "done in ${took} s"
