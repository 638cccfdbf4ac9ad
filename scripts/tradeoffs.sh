#!/usr/bin/env bash
# Regenerate the measured part of docs/tradeoffs.md: speed and failure
# behaviour of every backend and mode this build has, from real runs.
#
#   scripts/tradeoffs.sh                 everything (about 20 minutes);
#                                        rewrites docs/results/ and the text
#                                        between the results and scenarios
#                                        markers of docs/tradeoffs.md
#   scripts/tradeoffs.sh --parts scenarios   only some parts (caps, bench,
#                                        watchdog, scenarios, failover; comma-
#                                        separated): the others keep their
#                                        last run's figures and stamps
#   scripts/tradeoffs.sh --no-docs       measure and print, leave the doc alone
#   scripts/tradeoffs.sh --quick         short runs (a smoke test of the script)
#   scripts/tradeoffs.sh --only redis,postgres   a subset of backends
#   scripts/tradeoffs.sh --build DIR     use DIR/tools/dlock (default: a
#                                        release build in build/tradeoffs)
#
# Steps: build; ask the built `dlock info` which backends it has; start one
# private server of each kind needed (tests/servers/with-servers.sh, on
# 127.0.0.1, stopped afterwards; PostgreSQL and MariaDB with their default
# durability), and a 3-node ZooKeeper and etcd cluster
# for the node-loss row; let them settle; then
#   0. `dlock info` on one URI per backend and mode -> docs/results/caps.md
#   1. `dlock bench` on the same URIs, all in ONE run so they are compared
#      under the same machine state (loopback latency on these VMs is
#      bimodal: see NOTES.md item 5)                -> docs/results/bench.*
#   2. the watchdog goal: 10 000 locks held with a 30 s lease on file,
#      Redis (setnx, hash), ZooKeeper, etcd, and the row leases of
#      PostgreSQL (lease) and MariaDB (insert)     -> docs/results/watchdog.*
#   3. `dlock scenario all` on every URI and the clusters' URIs in one run;
#      server-restart and node-loss drive the URI's own servers with
#      tests/servers/ctl.sh                        -> docs/results/scenarios.*
#   4. `dlock scenario failover` on a Sentinel-managed master with 2
#      replicas (tests/servers kind rsentinel), with and without
#      sync_replicas=1 (about 10 s)                -> docs/results/failover.*
# Each part run records its date, the git commit of the code that measured
# and its duration in docs/results/stamps.txt; docs/results/results.md and
# the doc print them beside each table. Bounded: every command has a
# timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0 docs=1 only='' build='' parts=caps,bench,watchdog,scenarios,failover
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --no-docs) docs=0 ;;
    --only) only=${2:?--only needs a list}; shift ;;
    --parts) parts=${2:?--parts needs a list}; shift ;;
    --build) build=${2:?--build needs a directory}; shift ;;
    --inner) break ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "tradeoffs.sh: unknown option '$1' (try --help)" >&2; exit 64 ;;
    esac
    shift
done
for p in ${parts//,/ }; do
    case $p in caps | bench | watchdog | scenarios | failover) ;;
    *) echo "tradeoffs.sh: --parts: no part '$p' (caps, bench, watchdog, scenarios, failover)" >&2; exit 64 ;;
    esac
done
part() { [[ ",$parts," == *",$1,"* ]]; }

say() { printf '== tradeoffs: %s\n' "$*" >&2; }

# ---- the inner part: runs inside with-servers.sh, with the URIs exported --------
if [ "${1:-}" = --inner ]; then
    dlock=$2 out=$3 locks=$4
    shift 4
    if [ "$quick" = 1 ]; then
        bench_opts=(--duration 300ms --warmup 100ms --locks 100 --workers 3)
        wd_lease=3s
        wd_opts=(--duration 1s --locks 1000 --lease "$wd_lease")
        sc_lease=300ms
    else
        bench_opts=(--duration 2s --warmup 1s --locks 1000 --workers 4)
        wd_lease=30s
        wd_opts=(--duration 20s --locks 10000 --lease "$wd_lease")
        sc_lease=1s
    fi
    # label|uri|ctl.sh target for server-restart ("" = no server)|ctl.sh
    # kind for node-loss ("" = one server)|parts ("" = all, else only
    # scenarios: the clusters are there for node-loss).
    # Redlock: the nodes were started by this run a moment ago, and a
    # client cannot tell a first start from a restart, so the delayed
    # restart (restart_delay, a lease by default) would keep every node out
    # of the quorum for the first lease; the history suite shows the delay.
    entries=()
    for b in "$@"; do
        case $b in
        file) entries+=("file|file://$locks||") ;;
        redis)
            entries+=("redis setnx|$DLOCK_TEST_REDIS_URI?mode=setnx|redis|"
                "redis hash|$DLOCK_TEST_REDIS_URI?mode=hash|redis|"
                "redis rwlock|$DLOCK_TEST_REDIS_URI?mode=rwlock|redis|"
                "redis fair|$DLOCK_TEST_REDIS_URI?mode=fair|redis|"
                "redis queue|$DLOCK_TEST_REDIS_URI?mode=queue|redis|"
                "redlock|redlock://$DLOCK_TEST_REDIS5_HOSTS?restart_delay=0|redis5 1|redis5")
            if part scenarios; then
                entries+=("redis cluster setnx|$DLOCK_TEST_RCLUSTER_URI&mode=setnx|rcluster 1|rcluster|scenarios"
                    "redis cluster hash|$DLOCK_TEST_RCLUSTER_URI&mode=hash|rcluster 1|rcluster|scenarios")
            fi ;;
        zk)
            entries+=("zk|$DLOCK_TEST_ZK_URI?lease=3s|zk|"
                "zk rwlock|$DLOCK_TEST_ZK_URI?lease=3s&mode=rwlock|zk|")
            if part scenarios; then
                entries+=("zk3|$DLOCK_TEST_ZK3_URI?lease=3s|zk3 1|zk3|scenarios"
                    "zk3 rwlock|$DLOCK_TEST_ZK3_URI?lease=3s&mode=rwlock|zk3 1|zk3|scenarios")
            fi ;;
        postgres)
            for m in advisory advisory_xact for_update lease; do
                entries+=("postgres $m|$DLOCK_TEST_PG_URI?mode=$m|pg|")
            done ;;
        mysql)
            for m in insert for_update get_lock; do
                entries+=("mysql $m|$DLOCK_TEST_MYSQL_URI?mode=$m|mysql|")
            done ;;
        etcd)
            entries+=("etcd|$DLOCK_TEST_ETCD_URI?lease=3s|etcd|"
                "etcd rwlock|$DLOCK_TEST_ETCD_URI?lease=3s&mode=rwlock|etcd|")
            if part scenarios; then
                entries+=("etcd3|$DLOCK_TEST_ETCD3_URI?lease=3s|etcd3 1|etcd3|scenarios"
                    "etcd3 rwlock|$DLOCK_TEST_ETCD3_URI?lease=3s&mode=rwlock|etcd3 1|etcd3|scenarios")
            fi ;;
        esac
    done
    # The URIs of caps, bench and watchdog: one per mode, no clusters.
    plain=()
    for e in "${entries[@]}"; do
        IFS='|' read -r _ _ _ _ only_in <<<"$e"
        [ -n "$only_in" ] || plain+=("$e")
    done
    # stamp PART START: the part's duration, for the outer part's stamps.
    stamp() { echo "$1 $(($(date +%s) - $2)) ${3:-}" >>"$out/stamps.new"; }

    if [ "$quick" = 0 ] && [ "$#" -gt 1 ]; then
        say "letting the servers settle (10 s)"
        sleep 10
    fi

    # 0. what each mode promises, as the built dlock reports it
    if part caps; then
        t=$(date +%s)
        caps=(lease conn-bound native-wait notify fair shared fencing
            survives-reconnect session-per-lock no-renew batch-renew replica-wait downgrade
            permits latch)
        {
            printf '| backend/mode |'
            printf ' %s |' "${caps[@]}"
            printf '\n|---|'
            printf -- '---|%.0s' "${caps[@]}"
            printf '\n'
            for e in "${plain[@]}"; do
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
        stamp caps "$t"
    fi

    # 1. speed, all URIs in one run
    if part bench; then
        t=$(date +%s)
        uris=()
        for e in "${plain[@]}"; do
            IFS='|' read -r _ uri _ <<<"$e"
            uris+=(--uri "$uri")
        done
        say "bench: ${#plain[@]} URIs"
        timeout 900 "$dlock" bench "${uris[@]}" "${bench_opts[@]}" \
            --json "$out/bench.json" --svg "$out/bench.svg" \
            --markdown "$out/bench.md" >"$out/bench.txt" || {
            echo "tradeoffs.sh: dlock bench failed (exit $?); see $out/bench.txt" >&2
        }
        cat "$out/bench.txt"
        stamp bench "$t"
    fi

    # 2. the watchdog goal, on the modes that renew what one client holds
    # in batches; the SQL modes that hold a server lock per name are left
    # out: the servers' lock tables bound those below 10 000 (and the
    # transaction modes hold a connection per lock). The row leases
    # (postgres lease, mysql insert) are rows, renewed in one statement.
    if part watchdog; then
        t=$(date +%s)
        wd=()
        for e in "${plain[@]}"; do
            IFS='|' read -r label uri _ <<<"$e"
            # zk's and etcd's lease is the client's (the session's): the
            # URI's lease= is the one the locks are held at.
            case $label in
            file | "redis setnx" | "redis hash" | "postgres lease" | "mysql insert")
                wd+=(--uri "$uri") ;;
            zk | etcd) wd+=(--uri "${uri//lease=3s/lease=$wd_lease}") ;;
            esac
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
        stamp watchdog "$t"
    fi

    # 3. every scenario on every URI, the clusters' too, in one run; each
    # --restart-cmd and --node-cmd belongs to the --uri before it, and
    # node-loss's command gets the node from dlock in $DLOCK_NODE.
    if part scenarios; then
        t=$(date +%s)
        args=()
        for e in "${entries[@]}"; do
            IFS='|' read -r _ uri ctl node _ <<<"$e"
            args+=(--uri "$uri")
            [ -z "$ctl" ] || args+=(--restart-cmd "$DLOCK_TEST_SERVERCTL restart $ctl")
            # shellcheck disable=SC2016 # expanded by dlock's /bin/sh
            [ -z "$node" ] || args+=(--node-cmd '"$DLOCK_TEST_SERVERCTL" "$DLOCK_NODE_ACTION" '"$node"' "$DLOCK_NODE"')
        done
        rm -rf "$out/scenarios"
        say "scenario all: ${#entries[@]} URIs, lease $sc_lease"
        rc=0
        timeout 3600 "$dlock" scenario all "${args[@]}" --lease "$sc_lease" \
            --json "$out/scenarios.json" --markdown "$out/scenarios.md" \
            >"$out/scenarios.txt" 2>&1 || rc=$?
        sed -n '/^outcomes side by side:/,$p' "$out/scenarios.txt"
        [ "$rc" = 0 ] ||
            echo "tradeoffs.sh: dlock scenario all exited $rc; see $out/scenarios.txt" >&2
        stamp scenarios "$t" "lease $sc_lease"
    fi

    # 4. a failover behind Sentinel that loses a lock, and sync_replicas=
    # refusing it (the sync run first: the sentinels fail one master over
    # again only after 2 x failover-timeout).
    if part failover && [ -n "${DLOCK_TEST_RSENTINEL_URI:-}" ]; then
        t=$(date +%s)
        su=$DLOCK_TEST_RSENTINEL_URI
        say "scenario failover: Sentinel, with and without sync_replicas=1"
        rc=0
        # shellcheck disable=SC2016 # expanded by dlock's /bin/sh
        timeout 600 "$dlock" scenario failover --failover-cmd \
            "$root/tests/servers/rsentinel-failover.sh"' "$DLOCK_FAILOVER_STEP"' \
            --uri "$su&sync_replicas=1&sync_timeout=300ms" --uri "$su" \
            --lease "$sc_lease" --json "$out/failover.json" \
            --markdown "$out/failover.md" >"$out/failover.txt" 2>&1 || rc=$?
        sed -n '/^outcomes side by side:/,$p' "$out/failover.txt"
        [ "$rc" = 0 ] ||
            echo "tradeoffs.sh: dlock scenario failover exited $rc; see $out/failover.txt" >&2
        stamp failover "$t" "lease $sc_lease"
    fi
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
    redis) kinds+=(redis redis5); ! part failover || kinds+=(rsentinel)
        ! part scenarios || kinds+=(rcluster) ;;
    zk) kinds+=(zk); ! part scenarios || kinds+=(zk3) ;;
    postgres) kinds+=(pg) ;;
    mysql) kinds+=(mysql) ;;
    etcd) kinds+=(etcd); ! part scenarios || kinds+=(etcd3) ;;
    esac
done
[ ${#backends[@]} -gt 0 ] || { echo "tradeoffs.sh: no backend to measure (built: $built)" >&2; exit 64; }
say "backends: ${backends[*]}; servers: ${kinds[*]:-none}; parts: $parts"

out=$root/docs/results
mkdir -p "$out"
rm -f "$out/stamps.new"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Uncommitted changes to the code that measures make the commit a lie.
if [ "$commit" != unknown ] &&
    [ -n "$(git status --porcelain -- core backends include tools scripts meson.build 2>/dev/null)" ]; then
    commit="$commit+uncommitted"
fi
start=$(date +%s)
inner=(bash "$root/scripts/tradeoffs.sh" --parts "$parts")
[ "$quick" = 1 ] && inner+=(--quick)
# file:// makes lock files, not directories.
mkdir -p "$locks/locks"
inner+=(--inner "$dlock" "$out" "$locks/locks" "${backends[@]}")
# The servers keep their default durability (synchronous_commit=on,
# innodb_flush_log_at_trx_commit=1): the figures are what a user's server
# gives, fsync included (DLOCK_TEST_DURABLE=0 for the test suite's faster
# settings).
export DLOCK_TEST_DURABLE=${DLOCK_TEST_DURABLE:-1}
bash tests/servers/with-servers.sh "${kinds[@]}" -- "${inner[@]}"
took=$(($(date +%s) - start))

# stamps.txt: PART DATE COMMIT SECONDS [NOTE...], one line per part, the
# last run of each.
today=$(date -u +%Y-%m-%dT%H:%MZ)
touch "$out/stamps.txt"
while read -r p secs note; do
    grep -v "^$p " "$out/stamps.txt" >"$out/stamps.tmp" || true
    echo "$p $today $commit $secs${note:+ $note}" >>"$out/stamps.tmp"
    mv "$out/stamps.tmp" "$out/stamps.txt"
done <"$out/stamps.new"
rm -f "$out/stamps.new"
sort -o "$out/stamps.txt" "$out/stamps.txt"

# stamp_of PART: "_Measured by `scripts/tradeoffs.sh` on DATE at commit C
# in N s (NOTE)._", or that the part was never run.
stamp_of() {
    local p date c secs note
    if read -r p date c secs note < <(grep "^$1 " "$out/stamps.txt"); then
        echo "_Measured by \`scripts/tradeoffs.sh --parts $p\` on $date at commit $c in $secs s${note:+ ($note)}._"
    else
        echo "_Not measured by \`scripts/tradeoffs.sh\` yet._"
    fi
}

# The Markdown for the doc, in two blocks: what the modes promise and how
# fast they are (between the results markers), and how they fail (between
# the scenarios markers).
{
    echo "_Written by \`scripts/tradeoffs.sh\` (backends: ${backends[*]}); each"
    echo "part says when it was measured and at which commit. Raw figures:"
    echo "\`docs/results/bench.json\`, \`docs/results/scenarios.json\`; chart:"
    echo "\`docs/results/bench.svg\`._"
    echo
    echo "#### What each mode promises: \`dlock info\`"
    echo
    stamp_of caps
    echo
    cat "$out/caps.md"
    echo
    echo "#### Speed: \`dlock bench\`"
    echo
    stamp_of bench
    echo
    [ -f "$out/bench.md" ] && cat "$out/bench.md" || echo "(bench did not run)"
    if [ -f "$out/watchdog.md" ]; then
        echo
        echo "#### The watchdog holding 10 000 locks"
        echo
        stamp_of watchdog
        echo
        cat "$out/watchdog.md"
    fi
} >"$out/speed.part.md"
{
    echo "#### Failures: \`dlock scenario all\`"
    echo
    stamp_of scenarios
    echo
    echo "Every URI in one run, one row per backend/mode (the 3-node ensembles"
    echo "below their single-server rows); each cell is what that run measured."
    echo "Timelines: \`docs/results/scenarios.txt\`; every figure:"
    echo "\`docs/results/scenarios.json\`."
    echo
    [ -f "$out/scenarios.md" ] && cat "$out/scenarios.md" || echo "(the scenarios did not run)"
    if [ -f "$out/failover.md" ]; then
        echo
        echo "#### A failover behind Sentinel: \`dlock scenario failover\`"
        echo
        stamp_of failover
        echo
        echo "A master with 2 replicas and 3 sentinels; the replicas cut off from"
        echo "the master (stopped, their links dropped), the holder acquires, the"
        echo "master is killed, a replica that never had the SET is promoted."
        echo "Timelines: \`docs/results/failover.txt\`."
        echo
        cat "$out/failover.md"
    fi
} >"$out/failures.part.md"
cat "$out/speed.part.md" <(echo) "$out/failures.part.md" >"$out/results.md"

# Replace the text between <!-- NAME:begin --> and <!-- NAME:end --> of
# the doc with a file.
splice() { # DOC NAME FILE
    local doc=$1 name=$2 file=$3
    if grep -q "<!-- $name:begin -->" "$doc" && grep -q "<!-- $name:end -->" "$doc"; then
        awk -v f="$file" -v b="<!-- $name:begin -->" -v e="<!-- $name:end -->" '
            index($0, b) == 1 { print; while ((getline l < f) > 0) print l; skip = 1; next }
            index($0, e) == 1 { skip = 0 }
            !skip' "$doc" >"$doc.new" && mv "$doc.new" "$doc"
        say "updated $doc between the $name markers"
    else
        echo "tradeoffs.sh: $doc has no $name markers; Markdown is in $out/results.md" >&2
    fi
}
if [ "$docs" = 1 ]; then
    splice docs/tradeoffs.md results "$out/speed.part.md"
    splice docs/tradeoffs.md scenarios "$out/failures.part.md"
fi
rm -f "$out/speed.part.md" "$out/failures.part.md"
echo
cat "$out/results.md"
say "done in ${took} s"
