#!/usr/bin/env bash
# test_cleanup.sh CHECK_JSON: `dlock bench` removes every key, row, node
# and lock file it created. Under with-servers.sh redis zk pg mysql etcd:
# the keys (redis, etcd), nodes (zk), rows of every table (pg, mysql) and
# files (file://) are counted before and after one short bench run over
# every mode, with every workload; the counts must be equal, the table
# must say nothing was left behind and the JSON's cleanup must be
# "measured" for each URI. The same run shows the fence figure: a number
# where the fence is a request of its own, "-" where the lock's own
# request makes it, and the contended floor where the server has a
# waiting request (Redis: SET NX spinning), and the CPU per owner change
# (the server's share where it says). Speed is never asserted.
set -u
. "$(dirname "$0")/lib.sh"

: "${DLOCK_TEST_REDIS_URI:?run under with-servers.sh redis zk pg mysql etcd}"
pg_uri=$DLOCK_TEST_PG_URI my_uri=$DLOCK_TEST_MYSQL_URI
zk_hp=${DLOCK_TEST_ZK_URI#zk://}

redis_keys() { redis-cli -u "$DLOCK_TEST_REDIS_URI" dbsize; }
etcd_keys() {
    etcdctl --endpoints="$DLOCK_TEST_ETCD_ENDPOINTS" get "" --prefix \
        --keys-only | grep -c .
}
# Every node under /dlock, the root that every name of every client
# shares (a container node: the server reaps it once empty).
zk_nodes() {
    java -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-nop.jar \
        org.apache.zookeeper.ZooKeeperMain -server "$zk_hp" ls -R / 2>/dev/null |
        grep -c '^/dlock/'
}
# Rows of every table of the public schema, each counted exactly, but the
# fence source's epoch (one row for the whole server, never to be
# removed: fence.c; dlock_fence_marker is an earlier version's), the
# longest lease of each lease table and each lease table's marker row
# (one-byte key; removing it starts a grace: lease.c), as zk's shared
# root.
pg_rows() {
    psql -X -q -At "$DLOCK_TEST_PG_ADMIN_URI" -c "SELECT coalesce(sum((xpath('/row/c/text()',
        query_to_xml('SELECT count(*) AS c FROM public.' || quote_ident(tablename)
        || CASE WHEN tablename = 'dlock_leases_u' THEN ' WHERE length(key) = 32'
        ELSE '' END,
        false, true, '')))[1]::text::bigint), 0) FROM pg_tables WHERE schemaname = 'public'
        AND tablename NOT IN ('dlock_fence_epoch', 'dlock_fence_marker', 'dlock_lease_max')"
}
mysql_sql() {
    local a=${DLOCK_TEST_MYSQL_ADMIN_URI#*://} user pw hp
    user=${a%%:*} a=${a#*:}
    pw=${a%%@*} hp=${a#*@}
    hp=${hp%%/*}
    mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "${hp##*:}" \
        -u "$user" "-p$pw" -N -B dlock -e "$1"
}
# The same, but the epoch table, the fences' sequence (MariaDB: a
# SEQUENCE lists as a table of one row) and the marker rows of
# <table>_fmem (the all-zero key) and <table>_frec (all 0x01).
mysql_rows() {
    local n=0 t w
    for t in $(mysql_sql "SHOW TABLES"); do
        w=''
        case $t in
        *_epoch | *_fseq) continue ;;
        *_fmem) w=" WHERE lock_key <> UNHEX(REPEAT('00', 32))" ;;
        *_frec) w=" WHERE lock_key <> UNHEX(REPEAT('01', 32))" ;;
        esac
        n=$((n + $(mysql_sql "SELECT count(*) FROM \`$t\`$w")))
    done
    echo $n
}
file_files() { find "$work/locks" -type f | wc -l; }
counts() {
    echo "file $(file_files) redis $(redis_keys) etcd $(etcd_keys)" \
        "zk $(zk_nodes) pg $(pg_rows) mysql $(mysql_rows)"
}

uris=("$uri")
for m in setnx hash rwlock fair; do uris+=("$DLOCK_TEST_REDIS_URI?mode=$m"); done
for m in mutex rwlock; do uris+=("$DLOCK_TEST_ZK_URI?mode=$m"); done
for m in advisory advisory_xact for_update lease; do uris+=("$pg_uri?mode=$m"); done
for m in get_lock for_update insert; do uris+=("$my_uri?mode=$m"); done
uris+=("$DLOCK_TEST_ETCD_URI" "$DLOCK_TEST_REDIS_URI?mode=queue")
args=()
for u in "${uris[@]}"; do args+=(--uri "$u"); done

before=$(counts)
"$DLOCK" bench "${args[@]}" --duration 100ms --warmup 0 --workers 2 \
    --locks 10 --json "$work/c.json" >"$work/table" 2>"$work/stderr"
rc=$?
[ $rc = 0 ] && ok "bench runs over every mode" ||
    not_ok "bench runs (exit $rc: $(head -c 800 "$work/stderr"))"
after=$(counts)
[ "$before" = "$after" ] && ok "nothing left behind ($after)" ||
    not_ok "left behind: before: $before; after: $after"
! grep -q "names left behind" "$work/table" &&
    ok "the table reports no clean-up failure" ||
    not_ok "clean-up failed: $(grep "names left behind" "$work/table")"

n=${#uris[@]}
keys=()
for ((i = 0; i < n; i++)); do keys+=("results.$i.cleanup.measured:=true"); done
check "every URI's cleanup is measured in the JSON" \
    "$CHECK_JSON" "$work/c.json" "${keys[@]}"
# The fence figure: a number for file, pg and mysql insert (a request of
# its own), "-" for redis, zk, etcd, pg lease and mysql get_lock and
# for_update (inside the lock's request).
fence_col() { # ROW: the last column of the uncontended table's row
    sed -n '/^uncontended:/,/^$/p' "$work/table" |
        awk -v r="$1" '$1 == r { print $NF }'
}
check "file's fence is timed" test "$(fence_col 1)" != "-"
check "redis setnx's fence is inside its script" test "$(fence_col 2)" = "-"
check "zk's fence is the czxid" test "$(fence_col 6)" = "-"
check "pg advisory's fence is timed" test "$(fence_col 8)" != "-"
check "pg lease's fence is in its claim" test "$(fence_col 11)" = "-"
check "mysql get_lock's fence is in its try" test "$(fence_col 12)" = "-"
check "mysql for_update's fence is in its try" test "$(fence_col 13)" = "-"
check "mysql insert's fence is timed" test "$(fence_col 14)" != "-"
check "etcd's fence is the revision" test "$(fence_col 15)" = "-"
# The contended floor: the server's own waiting request where the mode has
# one (pg advisory, advisory_xact, for_update; mysql get_lock, for_update),
# SET NX spinning on every single-server Redis mode (1-4, 15), with no two
# holders at once, and "not available" elsewhere.
keys=()
for i in 1 2 3 4 7 8 9 11 12 15; do
    keys+=("results.$i.contended_floor.available:=true"
        "results.$i.contended_floor.measured:=true"
        "results.$i.contended_floor.handoffs_per_s:pos"
        "results.$i.contended_floor.overlaps:=0"
        "results.$i.goals.handoffs_vs_contended_floor.status:string")
done
for i in 0 5 6 10 13 14; do
    keys+=("results.$i.contended_floor.available:=false")
done
check "the contended floor is measured where the server queues waiters" \
    "$CHECK_JSON" "$work/c.json" "${keys[@]}"
# CPU per owner change: the workers' everywhere, the server's where it
# says (Redis: INFO cpu), for dlock and for the floor; null elsewhere.
keys=()
for ((i = 0; i < n; i++)); do
    keys+=("results.$i.contended.cpu_per_owner_change.measured:=true"
        "results.$i.contended.cpu_per_owner_change.client_us:number")
done
for i in 1 2 3 4 15; do
    keys+=("results.$i.contended.cpu_per_owner_change.server_us:number"
        "results.$i.contended_floor.cpu_per_owner_change.server_us:number")
done
for i in 0 6 8 13 14; do
    keys+=("results.$i.contended.cpu_per_owner_change.server_us:null")
done
check "CPU per owner change: the server's share where it says" \
    "$CHECK_JSON" "$work/c.json" "${keys[@]}"
finish
