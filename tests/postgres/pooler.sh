#!/usr/bin/env bash
# pooler.sh: advisory_xact, for_update and lease behind a transaction
# pooler.
#
# Run by meson under with-servers.sh pg. PgBouncer (pool_mode=transaction,
# no prepared statement support of its own: 1.18) stands between dlock and
# the server, so a client's transactions land on whichever server
# connection is free. The backend
# prepares its statements once per connection (conn.c): behind this pooler
# a statement it prepared is missing on the next server connection
# (26000), or its name is there already from another client (42P05), and
# the session must fall back to unnamed statements with no failure seen by
# the caller. Checked: many short-lived clients (`dlock exec`, one session
# each) and long-lived ones (`dlock bench`) take the same names; every
# command and every run succeeds, no two holders overlap, and the fences
# of a name strictly increase. And a pool smaller than the contenders
# (database "small", pool_size=3): each waiter blocked in its lock
# transaction keeps a server connection, so a holder that needed a second
# one (earlier versions: its fence's epoch, its owner row) waited behind
# the waiters it blocks, for their lock_timeout; now every command must
# succeed, in bounded time. Skipped (77) without pgbouncer.
set -u

dlock=${DLOCK_TEST_DLOCK:?set by meson: the dlock command}
uri=${DLOCK_TEST_PG_URI:?run under tests/servers/with-servers.sh pg}
command -v pgbouncer >/dev/null 2>&1 || {
    echo "SKIP: pgbouncer is not installed"
    exit 77
}

re='^postgres://([^:@/]+):([^@/]+)@([0-9.]+):([0-9]+)/([^?/]+)$'
[[ $uri =~ $re ]] || {
    echo "FAIL: cannot read user, password, host, port from $uri"
    exit 1
}
user=${BASH_REMATCH[1]} pw=${BASH_REMATCH[2]} host=${BASH_REMATCH[3]}
port=${BASH_REMATCH[4]} db=${BASH_REMATCH[5]}

dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-pooler.XXXXXX")
chmod 0777 "$dir"
bouncer_pid=
cleanup() {
    [[ -n $bouncer_pid ]] && kill "$bouncer_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    [[ -f $dir/pgbouncer.log ]] && tail -20 "$dir/pgbouncer.log"
    exit 1
}

# PgBouncer refuses to run as root.
as=()
if [[ $(id -u) == 0 ]]; then
    as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi

# A free port: a few tries, each bounded.
for try in 1 2 3 4 5; do
    pport=$((20000 + RANDOM % 20000))
    printf '"%s" "%s"\n' "$user" "$pw" >"$dir/users.txt"
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
$db = host=$host port=$port dbname=$db
small = host=$host port=$port dbname=$db pool_size=3
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $pport
unix_socket_dir =
auth_type = plain
auth_file = $dir/users.txt
pool_mode = transaction
default_pool_size = 20
max_client_conn = 200
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
    chmod 0644 "$dir/users.txt" "$dir/pgbouncer.ini"
    "${as[@]}" pgbouncer -d "$dir/pgbouncer.ini" >/dev/null 2>&1
    for i in $(seq 50); do
        [[ -s $dir/pgbouncer.pid ]] && grep -q "listening on" \
            "$dir/pgbouncer.log" 2>/dev/null && break
        sleep 0.1
    done
    if [[ -s $dir/pgbouncer.pid ]]; then
        bouncer_pid=$(cat "$dir/pgbouncer.pid")
        break
    fi
    rm -f "$dir/pgbouncer.log"
done
[[ -n $bouncer_pid ]] || fail "pgbouncer did not start"
puri="postgres://$user:$pw@127.0.0.1:$pport/$db"
echo "pgbouncer $(pgbouncer --version | head -1) on port $pport, pid $bouncer_pid"

export POOLER_DIR=$dir
for mode in advisory_xact for_update lease; do
    name="pooler-$mode-$$"
    : >"$dir/fences"
    # Short-lived clients: 4 loops of 8 commands at once, on one name.
    pids=()
    for w in 1 2 3 4; do
        (
            for i in 1 2 3 4 5 6 7 8; do
                "$dlock" exec --uri "$puri?mode=$mode" --timeout 30s "$name" \
                    -c 'mkdir "$POOLER_DIR/held" || exit 3
                        echo "$DLOCK_FENCE" >>"$POOLER_DIR/fences"
                        rmdir "$POOLER_DIR/held"' ||
                    { echo "exec failed: exit $?"; exit 1; }
            done
        ) &
        pids+=($!)
    done
    for p in "${pids[@]}"; do
        wait "$p" || fail "$mode: a dlock exec through the pooler failed"
    done
    n=$(wc -l <"$dir/fences")
    [[ $n == 32 ]] || fail "$mode: $n commands ran, not 32"
    sort -n -C -u "$dir/fences" ||
        fail "$mode: fences not strictly increasing: $(tr '\n' ' ' <"$dir/fences")"
    # Long-lived clients: many acquisitions per session, contended.
    "$dlock" bench --uri "$puri?mode=$mode" --workers 4 --duration 500ms \
        --warmup 0 --workloads uncontended,contended \
        --json "$dir/bench.json" >"$dir/bench.txt" 2>&1 ||
        { cat "$dir/bench.txt"; fail "$mode: dlock bench through the pooler failed"; }
    grep -q '"overlaps":0' "$dir/bench.json" ||
        fail "$mode: two holders at once through the pooler"
    grep -q '"acquisitions":[1-9]' "$dir/bench.json" ||
        fail "$mode: no contended acquisition through the pooler"
    echo "ok $mode: 32 commands, fences increasing; bench: no overlap"
done
# A pool of 3 server connections, 6 contenders, fresh clients: no
# command may wait for a second server connection while it holds.
suri="postgres://$user:$pw@127.0.0.1:$pport/small"
for mode in advisory_xact for_update; do
    name="pooler-small-$mode-$$"
    : >"$dir/fences"
    t0=$SECONDS
    pids=()
    for w in 1 2 3 4 5 6; do
        (
            for i in 1 2 3; do
                timeout 25 "$dlock" exec --uri "$suri?mode=$mode" \
                    --timeout 30s "$name" \
                    -c 'mkdir "$POOLER_DIR/held" || exit 3
                        echo "$DLOCK_FENCE" >>"$POOLER_DIR/fences"
                        sleep 0.1
                        rmdir "$POOLER_DIR/held"' ||
                    { echo "exec failed: exit $?"; exit 1; }
            done
        ) &
        pids+=($!)
    done
    for p in "${pids[@]}"; do
        wait "$p" || fail "$mode: a dlock exec through the small pool failed"
    done
    took=$((SECONDS - t0))
    n=$(wc -l <"$dir/fences")
    [[ $n == 18 ]] || fail "$mode, small pool: $n commands ran, not 18"
    sort -n -C -u "$dir/fences" ||
        fail "$mode, small pool: fences not strictly increasing"
    ((took <= 15)) || fail "$mode, small pool: 18 commands took ${took}s"
    echo "ok $mode, pool of 3: 18 commands in ${took}s, fences increasing"
done
echo "PASS"
