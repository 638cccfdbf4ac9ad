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

# LOOPS loops of EACH `dlock exec` at once on NAME through URI, each a
# fresh client holding HOLD seconds (0: none) and bounded by LIMIT
# seconds (0: no bound): every command succeeds, none overlaps another
# (the mkdir), and the fences strictly increase. WHAT names the case.
exec_loops() { # WHAT URI NAME LOOPS EACH HOLD LIMIT
    local what=$1 u=$2 name=$3 loops=$4 each=$5 w i p n
    local -a pids=() bound=()
    export POOLER_HOLD=$6
    (($7 == 0)) || bound=(timeout "$7")
    : >"$dir/fences"
    for ((w = 1; w <= loops; w++)); do
        (
            for ((i = 1; i <= each; i++)); do
                "${bound[@]}" "$dlock" exec --uri "$u" --timeout 30s "$name" \
                    -c 'mkdir "$POOLER_DIR/held" || exit 3
                        echo "$DLOCK_FENCE" >>"$POOLER_DIR/fences"
                        [ "$POOLER_HOLD" = 0 ] || sleep "$POOLER_HOLD"
                        rmdir "$POOLER_DIR/held"' ||
                    { echo "exec failed: exit $?"; exit 1; }
            done
        ) &
        pids+=($!)
    done
    for p in "${pids[@]}"; do
        wait "$p" || fail "$what: a dlock exec through the pooler failed"
    done
    n=$(wc -l <"$dir/fences")
    ((n == loops * each)) || fail "$what: $n commands ran, not $((loops * each))"
    sort -n -C -u "$dir/fences" ||
        fail "$what: fences not strictly increasing: $(tr '\n' ' ' <"$dir/fences")"
}

for mode in advisory_xact for_update lease; do
    # Short-lived clients: 4 loops of 8 commands at once, on one name.
    exec_loops "$mode" "$puri?mode=$mode" "pooler-$mode-$$" 4 8 0 0
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
    t0=$SECONDS
    exec_loops "$mode, small pool" "$suri?mode=$mode" "pooler-small-$mode-$$" \
        6 3 0.1 25
    took=$((SECONDS - t0))
    ((took <= 15)) || fail "$mode, small pool: 18 commands took ${took}s"
    echo "ok $mode, pool of 3: 18 commands in ${took}s, fences increasing"
done
echo "PASS"
