# shellcheck shell=bash
# Shared functions for with-servers.sh and ctl.sh: start, probe and stop
# private Redis / ZooKeeper / PostgreSQL / MariaDB / etcd servers for dlock's
# tests (etcdtls: one etcd member serving its clients over TLS only).
# Sourced, not executed. Every name here starts with dlt_ / DLT_.
#
# Run dir layout (DLOCK_TEST_RUN_DIR, mode 0755 so the postgres and mysql
# users can traverse it):
#
#   KIND-INDEX/        one per server process: redis-1, redis5-1..5, zk-1,
#                      zk3-1..3, pg-1, mysql-1, etcd-1, etcd3-1..3,
#                      etcdtls-1
#     port             the client port
#     ports            every port the node binds (client first, then ZK's
#                      quorum and election ports or etcd's peer port); read
#                      by the port picker of concurrent runs
#     cmd              exact command line, shell-quoted (printf %q), run with
#                      cwd = this dir; ctl.sh start replays it
#     pid              "PID STARTTIME" (starttime from /proc/PID/stat, so a
#                      recycled PID is never mistaken for the server)
#     log              stdout+stderr of every start, appended
#     data/            the server's data (pg/mysql/zk/redis/etcd)
#     tls/             etcdtls: ca.pem, server.pem/.key, client.pem/.key
#                      (made at the first start by dlt_etcdtls_certs)
#
# Why processes are identified the way they are:
#  * PID 1 on these machines reaps orphans only every ~2 s, and servers are
#    orphans (their parent subshell exits once they answer), so a killed
#    server lingers as a zombie that kill -0 reports as alive. Alive here
#    means: /proc/PID/stat exists, has the recorded starttime, and its state
#    is not Z (zombie) or X (dead).
#  * Every server runs with its cwd inside its node dir (redis --dir,
#    postgres/mariadbd chdir to their data dir, ZK is started there), so
#    "processes whose cwd is under NODE" finds a server's helper processes too
#    (postgres backends, which setsid() away from the postmaster) without
#    trusting pid files; the final sweep uses this as a safety net.
#
# etcd (Debian's etcd-server 3.4.23 gives the etcd binary, etcd-client gives
# etcdctl, v3 API by default), as found on these machines:
#  * A member needs --name, --data-dir, --listen-client-urls,
#    --advertise-client-urls, --listen-peer-urls,
#    --initial-advertise-peer-urls and --initial-cluster; we also give
#    --initial-cluster-state new and a token unique to the run and attempt,
#    so members of two runs that meet on recycled ports refuse each other.
#  * The JSON gateway (grpc-gateway) is on by default and shares the client
#    port: POST /v3/kv/range with {"key":"<base64>"} answers 200 and a JSON
#    "header". A range is linearizable by default, i.e. it needs a leader:
#    that is the readiness probe (over bash /dev/tcp, like Redis and ZK), and
#    for an etcd3 member it means "part of a cluster with quorum".
#  * Replaying a member's command line, --initial-cluster-state new included,
#    restarts it from its data dir: once data/member/wal exists etcd ignores
#    the --initial-cluster* flags and the member rejoins its cluster. A
#    restart of a lone member takes ~1.4 s (it waits out one election
#    timeout) against ~0.4 s for the first start.
#  * A member whose peer port is taken exits at once ("bind: address already
#    in use"). The listeners are opened before the WAL is written, but in a
#    cluster the other members may already have written theirs, with the
#    old ports in it: a start on fresh ports therefore begins with empty
#    data dirs.
#  * etcd takes every ETCD_* environment variable as a flag (ETCD_DATA_DIR,
#    ETCD_LISTEN_METRICS_URLS, ...): dlt_launch unsets them, so the command
#    line is the whole configuration. --logger zap --log-outputs stderr puts
#    the log (JSON lines) in NODE/log; the default capnslog ignores
#    --log-outputs.
#  * Installing etcd-server does not start a system etcd here (no systemd,
#    policy-rc.d denies invoke-rc.d); if one runs elsewhere it sits on
#    2379/2380, below DLT_PORT_MIN, so the tests never meet it. The tests
#    never use etcd's default ports.
#  * SIGTERM is a clean stop: a leader first hands leadership to the member
#    it has heard from longest (ctl.sh stop of an etcd3 leader: ~0.15 s,
#    the other two go on with a new leader). When every member stops at
#    once that goes wrong, see dlt_stop_signal.
#  * There is no fsync switch in 3.4 (--unsafe-no-fsync came in 3.5); etcd
#    makes the data dir 0700 itself.
#  * etcdtls: --cert-file/--key-file on https client URLs with
#    --client-cert-auth --trusted-ca-file: a client without a certificate
#    the CA signed is refused in the TLS handshake. In 3.4 the JSON gateway
#    reaches the member's own gRPC server through a TLS connection that
#    presents the server certificate as a client certificate, so that
#    certificate needs extendedKeyUsage clientAuth as well as serverAuth
#    (without it every gateway request fails with "bad certificate").
#    Peer URLs stay http. The readiness probe is curl with the client
#    certificate (bash /dev/tcp speaks no TLS).

# Passwords: URI-safe on purpose (no percent-encoding needed) but real, with
# password authentication on, so tests can check the library never leaks them.
DLT_PW=dlock-test-pw-7Q
DLT_ADMIN_PW=dlock-admin-pw-9Z
# Bounded waits (seconds).
DLT_READY_TIMEOUT=${DLOCK_TEST_READY_TIMEOUT:-60}
DLT_STOP_TIMEOUT=10
# Ports are picked at random from here: below Linux's ephemeral range
# (32768-60999) so outgoing connections never sit on a port we want.
DLT_PORT_MIN=${DLOCK_TEST_PORT_MIN:-20000}
DLT_PORT_MAX=${DLOCK_TEST_PORT_MAX:-32767}

DLT_ALL_KINDS="redis redis5 rsentinel zk zk3 pg mysql etcd etcd3 etcdtls rcluster"

dlt_err() { printf '%s: %s\n' "${DLT_PROG:-dlock-test}" "$*" >&2; }
dlt_log() { [[ ${DLOCK_TEST_VERBOSE:-0} == 0 ]] || dlt_err "$@"; }

# Seconds since the epoch with milliseconds, no fork (bash 5 EPOCHREALTIME).
dlt_now() { printf '%s' "${EPOCHREALTIME/[.,]/.}"; }
dlt_elapsed() { # START -> "1.234"
    local s=${1/./} n=${EPOCHREALTIME/[.,]/}
    local us=$((n - s))
    printf '%d.%03d' $((us / 1000000)) $((us % 1000000 / 1000))
}

# ---------------------------------------------------------------- kinds

dlt_is_kind() { [[ " $DLT_ALL_KINDS " == *" $1 "* ]]; }

dlt_kind_count() { # KIND -> number of server processes
    case $1 in
        redis5) echo 5 ;;
        rsentinel) echo 6 ;;
        zk3 | etcd3) echo 3 ;;
        rcluster) echo 6 ;;
        *) echo 1 ;;
    esac
}

# Is KIND one cluster whose members all name each other (so a member cannot
# be moved to other ports alone)?
dlt_kind_is_cluster() { [[ $1 == zk3 || $1 == etcd3 || $1 == rsentinel ]]; }

dlt_kind_var() { # KIND -> the variable that says "this kind is running"
    case $1 in
        redis) echo DLOCK_TEST_REDIS_URI ;;
        redis5) echo DLOCK_TEST_REDIS5_HOSTS ;;
        rsentinel) echo DLOCK_TEST_RSENTINEL_URI ;;
        rcluster) echo DLOCK_TEST_RCLUSTER_URI ;;
        zk) echo DLOCK_TEST_ZK_URI ;;
        zk3) echo DLOCK_TEST_ZK3_URI ;;
        pg) echo DLOCK_TEST_PG_URI ;;
        mysql) echo DLOCK_TEST_MYSQL_URI ;;
        etcd) echo DLOCK_TEST_ETCD_URI ;;
        etcd3) echo DLOCK_TEST_ETCD3_URI ;;
        etcdtls) echo DLOCK_TEST_ETCDTLS_URI ;;
    esac
}

dlt_stop_signal() { # KIND [all] -> graceful stop signal
    # SIGTERM is "smart shutdown" for postgres (waits for every client to
    # disconnect); SIGINT is "fast shutdown".
    # "all": every node of the run stops (with-servers.sh's clean-up), the
    # data goes too. An etcd leader that gets SIGTERM first hands leadership
    # to a member that is itself stopping; the two hand it back and forth,
    # quorum goes, and the leader waits out a 7 s request timeout. Nothing
    # is worth keeping then: SIGKILL.
    case $1:${2:-} in
        pg:*) echo INT ;;
        etcd3:all) echo KILL ;;
        *) echo TERM ;;
    esac
}

# ------------------------------------------------------- binaries/paths

dlt_find_pg_bindir() {
    if [[ -n ${DLOCK_TEST_PG_BINDIR:-} ]]; then
        echo "$DLOCK_TEST_PG_BINDIR"
        return
    fi
    # Debian keeps the server binaries out of PATH; take the newest major.
    local d best=
    for d in /usr/lib/postgresql/*/bin; do
        [[ -x $d/postgres ]] && best=$d
    done
    [[ -n $best ]] && echo "$best"
}

dlt_find_bin() { # NAME -> path; also looks in sbin (mariadbd) for non-root PATHs
    command -v "$1" 2>/dev/null && return
    local d
    for d in /usr/sbin /usr/local/sbin /sbin; do
        [[ -x $d/$1 ]] && { echo "$d/$1"; return; }
    done
    return 1
}

dlt_zk_classpath() {
    local j=/usr/share/java
    [[ -r $j/zookeeper.jar ]] || return 1
    # zookeeper.jar's manifest Class-Path pulls in slf4j-api, jute, netty...;
    # only an slf4j binding is missing. log4j gives us a readable log file.
    if [[ -r $j/slf4j-log4j12.jar && -r $j/log4j-1.2.jar ]]; then
        echo "$j/zookeeper.jar:$j/slf4j-log4j12.jar:$j/log4j-1.2.jar"
    elif [[ -r $j/slf4j-simple.jar ]]; then
        echo "$j/zookeeper.jar:$j/slf4j-simple.jar"
    elif [[ -r $j/slf4j-nop.jar ]]; then
        echo "$j/zookeeper.jar:$j/slf4j-nop.jar"
    else
        echo "$j/zookeeper.jar"
    fi
}

# Are the programs KIND needs installed? Prints what is missing.
dlt_kind_missing() {
    case $1 in
        redis | redis5 | rsentinel)
            dlt_find_bin redis-server >/dev/null || echo redis-server
            ;;
        rcluster)
            dlt_find_bin redis-server >/dev/null || echo redis-server
            dlt_find_bin redis-cli >/dev/null || echo redis-cli
            ;;
        zk | zk3)
            dlt_find_bin java >/dev/null || echo java
            [[ -r /usr/share/java/zookeeper.jar ]] || echo /usr/share/java/zookeeper.jar
            ;;
        pg)
            dlt_find_pg_bindir >/dev/null || echo "postgres (/usr/lib/postgresql/*/bin)"
            dlt_find_bin pg_isready >/dev/null || echo pg_isready
            dlt_find_bin psql >/dev/null || echo psql
            if [[ $EUID -eq 0 ]]; then
                getent passwd postgres >/dev/null || echo "user postgres"
                dlt_find_bin setpriv >/dev/null || echo setpriv
            fi
            ;;
        mysql)
            local b
            for b in mariadbd mariadb-install-db mariadb mariadb-admin; do
                dlt_find_bin "$b" >/dev/null || echo "$b"
            done
            if [[ $EUID -eq 0 ]]; then
                getent passwd mysql >/dev/null || echo "user mysql"
            fi
            ;;
        etcd | etcd3)
            dlt_find_bin etcd >/dev/null || echo etcd
            ;;
        etcdtls)
            local b
            for b in etcd openssl curl; do
                dlt_find_bin "$b" >/dev/null || echo "$b"
            done
            ;;
    esac
}

# Can other users reach DIR (o+x on it and every ancestor)?
dlt_world_traversable() { # DIR
    local d
    d=$(cd "$1" 2>/dev/null && pwd -P) || return 1
    while [[ -n $d ]]; do
        [[ -n $(find "$d" -maxdepth 0 -perm -o+x 2>/dev/null) ]] || return 1
        d=${d%/*}
    done
}

# ------------------------------------------------------------ processes

# Set DLT_STATE and DLT_START from /proc/PID/stat; fails if PID is gone.
# Builtins only (no fork): this runs in tight wait loops.
dlt_proc_stat() {
    local s
    { read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
    s=${s##*) } # comm may contain spaces and ')': cut at the last ") "
    local -a f
    read -r -a f <<<"$s"
    # f[0] is field 3 (state); starttime is field 22.
    DLT_STATE=${f[0]}
    DLT_START=${f[19]}
}

dlt_proc_alive() { # PID [STARTTIME]
    dlt_proc_stat "$1" || return 1
    [[ $DLT_STATE != [ZX] ]] || return 1
    [[ -z ${2:-} || $DLT_START == "$2" ]]
}

# Echo the main PID of the server in NODE if it is alive.
dlt_node_pid() {
    local pid start
    [[ -r $1/pid ]] || return 1
    read -r pid start <"$1/pid" || return 1
    [[ -n $pid ]] || return 1
    dlt_proc_alive "$pid" "$start" || return 1
    echo "$pid"
}

# ---------------------------------------------------------------- ports

# Ports in use by any socket on this machine (any address; in any state,
# or only in STATE as the kernel writes it, 0A for LISTEN), as the kernel
# writes them: 4 upper-case hex digits. awk (mawk or gawk), not a bash read
# loop: thousands of TIME_WAIT sockets left by earlier tests made the loop
# slow under load.
dlt_ports_in_use() { # [STATE]
    awk -v st="${1:-}" 'FNR > 1 && (st == "" || $4 == st) {
            n = split($2, a, ":"); print a[n]
        }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Wait (5 s at most) until no socket listens on NODE's ports. A process
# SIGKILLed a moment ago can look dead (its main thread a zombie) while
# its other threads still exit and hold its files, the listening socket
# among them: a restart on the same port then fails to bind (seen with
# redis-server's background threads). 1 if one still listens.
dlt_wait_ports_free() { # NODE
    local p want=() end=$((SECONDS + 5))
    [[ -r $1/ports ]] || return 0
    while read -r p; do
        printf -v p '%04X' "$p"
        want+=("$p")
    done <"$1/ports"
    ((${#want[@]} > 0)) || return 0
    while ((SECONDS < end)); do
        # grep reads to the end (no -q): under pipefail an early exit
        # could fail awk with SIGPIPE and pass for "none listens".
        dlt_ports_in_use 0A | grep -xF "${want[@]/#/-e}" >/dev/null ||
            return 0
        sleep 0.02
    done
    return 1
}

# Pick N free ports for NODE and record them in NODE/ports. Serialised with
# flock across every concurrent run (meson runs tests in parallel, each with
# its own with-servers.sh), and ports recorded by other live or stopped runs
# under the same parent dir are avoided, so a node stopped by ctl.sh keeps its
# port. Collisions with unrelated processes are still possible and are
# handled by retrying the start on fresh ports.
dlt_pick_ports() { # NODE N
    local node=$1 n=$2 parent lock fd
    parent=$(dirname "$DLOCK_TEST_RUN_DIR")
    lock=$parent/dlock-test-ports.lock
    exec {fd}>>"$lock"
    flock "$fd"
    local -A used=()
    local p f hex
    while read -r p; do used[$p]=1; done < <(
        dlt_ports_in_use
        for f in "$parent"/dlock-test.*/*/ports; do
            [[ -r $f ]] && while read -r p; do printf '%04X\n' "$p"; done <"$f"
        done
    )
    local -a picked=()
    local tries=0
    while ((${#picked[@]} < n)); do
        p=$((DLT_PORT_MIN + (RANDOM * 32768 + RANDOM) % (DLT_PORT_MAX - DLT_PORT_MIN + 1)))
        printf -v hex '%04X' "$p"
        if [[ -z ${used[$hex]:-} ]]; then
            used[$hex]=1
            picked+=("$p")
        fi
        ((++tries < 100000)) || { exec {fd}>&-; dlt_err "no free port"; return 1; }
    done
    printf '%s\n' "${picked[@]}" >"$node/ports"
    exec {fd}>&-
}

# Does PID own the LISTEN socket on 127.0.0.1:PORT? Guards against taking a
# concurrent run's server on the same port for ours.
dlt_owns_port() { # PID PORT
    local pid=$1 hex inode
    printf -v hex '%04X' "$2"
    # Fields: sl local_address rem_address st tx:rx tr:when retrnsmt uid
    # timeout inode; st 0A is LISTEN.
    inode=$(awk -v a4="0100007F:$hex" \
        -v a6="0000000000000000FFFF00000100007F:$hex" \
        '$4 == "0A" && ($2 == a4 || $2 == a6) { print $10; exit }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null)
    [[ -n $inode ]] || return 1
    [[ -n $(find "/proc/$pid/fd" -lname "socket:\[$inode\]" -print -quit 2>/dev/null) ]]
}

# --------------------------------------------------------------- probes

# Redis: PING over bash /dev/tcp (no client needed, no fork of redis-cli).
dlt_probe_redis() { # PORT
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'PING\r\n' >&3
        IFS= read -r -t 2 line <&3 || exit 1
        [[ $line == +PONG* ]]
    ) 2>/dev/null
}

# ZooKeeper: the srvr four-letter word; echoes the Mode (standalone, leader,
# follower) when the node is serving. bash /dev/tcp rather than nc: nc -q 1
# adds a second to every probe.
dlt_zk_mode() { # PORT
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'srvr' >&3
        while IFS= read -r -t 2 line <&3; do
            if [[ $line == Mode:* ]]; then
                echo "${line#Mode: }"
                exit 0
            fi
        done
        exit 1
    ) 2>/dev/null
}

dlt_probe_zk() { # PORT -> ok when serving as standalone/leader/follower
    local m
    m=$(dlt_zk_mode "$1") || return 1
    [[ $m == standalone || $m == leader || $m == follower ]]
}

dlt_probe_pg() { # PORT
    pg_isready -q -h 127.0.0.1 -p "$1" -t 2 >/dev/null 2>&1
}

dlt_probe_mysql() { # PORT
    # mariadb-admin ping exits 0 once the server answers, even when the
    # (nonexistent) user is refused, so no credentials are needed.
    mariadb-admin --no-defaults --protocol=tcp -h 127.0.0.1 -P "$1" \
        -u dlock-probe --connect-timeout=2 ping >/dev/null 2>&1
}

# etcd: a linearizable range through the JSON gateway, over bash /dev/tcp
# (no curl, no etcdctl). It answers 200 only when the member has a leader.
dlt_probe_etcd() { # PORT
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        body='{"key":"ZGxvY2stcHJvYmU="}' # "dlock-probe"
        printf 'POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
            "$1" "${#body}" "$body" >&3
        IFS= read -r -t 2 line <&3 || exit 1
        [[ $line == "HTTP/1."[01]" 200 "* ]] || exit 1
        # Headers, then the body (no newline at its end: read fails on it).
        while :; do
            rc=0
            IFS= read -r -t 2 line <&3 || rc=$?
            [[ $line != *'"header":'* ]] || exit 0
            ((rc == 0)) || exit 1
        done
    ) 2>/dev/null
}

# etcdtls: the same range over https with the client certificate of NODE's
# tls/, through the curl program, bounded (2 s).
dlt_probe_etcdtls() { # PORT NODE
    local t=$2/tls out
    out=$(curl -sS --noproxy '*' --connect-timeout 2 -m 2 \
        --cacert "$t/ca.pem" --cert "$t/client.pem" --key "$t/client.key" \
        -X POST -d '{"key":"ZGxvY2stcHJvYmU="}' \
        "https://127.0.0.1:$1/v3/kv/range" 2>/dev/null) || return 1
    [[ $out == *'"header":'* ]]
}

# A line of Redis's answer to an inline COMMAND that starts with one of
# the words given (bash /dev/tcp, 2 s).
dlt_redis_line() { # PORT COMMAND WORD...
    local port=$1 cmd=$2
    shift 2
    (
        exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
        printf '%s\r\n' "$cmd" >&3
        while IFS= read -r -t 2 line <&3; do
            line=${line%$'\r'}
            for w in "$@"; do
                [[ $line != "$w"* ]] || { echo "$line"; exit 0; }
            done
        done
        exit 1
    ) 2>/dev/null
}

# rsentinel: nodes 1-3 are data nodes (1 starts as master, 2 and 3 as its
# replicas), 4-6 sentinels. A data node is ready as a master or as a
# replica whose link is up (so a test's first write reaches it); a
# sentinel once it sees the master and enough sentinels to fail over
# (SENTINEL ckquorum: the other two found through hello messages) and
# both replicas, healthy (flags exactly "slave"): a sentinel learns the
# replicas from the master's INFO (every 10 s), and a failover asked
# before that finds no replica to promote and is retried seconds later.
dlt_probe_rsentinel() { # PORT NODE
    local i=${2##*-} l
    if ((i <= 3)); then
        l=$(dlt_redis_line "$1" "INFO replication" role:master master_link_status:) || return 1
        [[ $l == role:master || $l == master_link_status:up ]]
    else
        l=$(dlt_redis_line "$1" "SENTINEL ckquorum dlock" +OK -) || return 1
        [[ $l == "+OK 3 usable"* ]] || return 1
        (($(redis-cli -p "$1" SENTINEL replicas dlock 2>/dev/null | awk '
            prev == "flags" && $0 == "slave" { n++ }
            { prev = $0 }
            END { print n + 0 }') >= 2))
    fi
}

dlt_probe() { # KIND PORT [NODE]
    case $1 in
        redis | redis5 | rcluster) dlt_probe_redis "$2" ;;
        rsentinel) dlt_probe_rsentinel "$2" "$3" ;;
        zk | zk3) dlt_probe_zk "$2" ;;
        pg) dlt_probe_pg "$2" ;;
        mysql) dlt_probe_mysql "$2" ;;
        etcd | etcd3) dlt_probe_etcd "$2" ;;
        etcdtls) dlt_probe_etcdtls "$2" "$3" ;;
    esac
}

# ------------------------------------------------------- start and wait

dlt_node_kind() { local b=${1%/}; b=${b##*/}; echo "${b%-*}"; }

# Start the command recorded in NODE/cmd in the background with cwd NODE,
# output appended to NODE/log; record "PID STARTTIME" in NODE/pid.
dlt_launch() { # NODE
    local node=$1 cmd pid
    cmd=$(<"$node/cmd")
    local -a argv
    eval "argv=($cmd)"
    [[ $(dlt_node_kind "$node") != pg ]] || dlt_pg_clear_stale_pid "$node"
    printf '=== %s start: %s\n' "$(date '+%F %T')" "$cmd" >>"$node/log"
    # ( exec ... ) & makes $! the server itself (setpriv and java exec in
    # place too); the server stays in our process group, so a test runner
    # that signals the whole group (meson on timeout) reaches it as well.
    # Close inherited fds above 2: a server that held, say, the pipe of a
    # test doing popen("ctl.sh start ...") would keep that pipe from ever
    # reaching EOF.
    # etcd reads ETCD_* variables as flags: only the command line counts.
    (
        trap - INT QUIT
        dlt_close_fds
        for v in "${!ETCD_@}"; do unset "$v"; done
        cd "$node" && exec "${argv[@]}"
    ) </dev/null >>"$node/log" 2>&1 &
    pid=$!
    # No "Killed" job notices from this shell when a retry kills it.
    disown "$pid" 2>/dev/null || true
    DLT_START=
    dlt_proc_stat "$pid" || true
    echo "$pid $DLT_START" >"$node/pid"
}

# Close every fd above 2 in the current (sub)shell.
dlt_close_fds() {
    local f n
    for f in /proc/"$BASHPID"/fd/*; do
        n=${f##*/}
        if [[ $n =~ ^[0-9]+$ ]] && ((n > 2)); then
            eval "exec $n>&-" 2>/dev/null || true
        fi
    done
}

# A SIGKILLed postmaster stays a zombie until PID 1 reaps it (up to ~2 s
# here), and postgres refuses to start while the PID in its lock files
# (data/postmaster.pid, and sock/.s.PGSQL.PORT.lock for the socket)
# "exists": kill(pid, 0) succeeds on a zombie. Remove the lock files whose
# process is dead by our definition; postgres checks the rest (shared memory
# still attached) itself.
dlt_pg_clear_stale_pid() { # NODE
    local f old
    for f in "$1/data/postmaster.pid" "$1"/sock/.s.PGSQL.*.lock; do
        [[ -e $f ]] || continue
        { read -r old <"$f"; } 2>/dev/null || continue
        if [[ $old =~ ^[0-9]+$ ]] && ! dlt_proc_alive "$old"; then
            rm -f "$f"
        fi
    done
}

dlt_log_tail() { # NODE [LINES]
    local node=$1 n=${2:-40}
    dlt_err "---- last $n lines of $node/log ----"
    tail -n "$n" "$node/log" 2>/dev/null | sed 's/^/    /' >&2 || true
    dlt_err "----"
}

# Wait until NODE's server answers on its port and it is our process that
# owns the port. Returns 0 ready, 2 the process died (NODE/log says why),
# 1 timeout.
dlt_wait_node() { # NODE [TIMEOUT]
    local node=$1 timeout=${2:-$DLT_READY_TIMEOUT} kind port pid start
    kind=$(dlt_node_kind "$node")
    port=$(<"$node/port")
    read -r pid start <"$node/pid"
    local deadline=$((SECONDS + timeout)) delay=20 t
    while :; do
        if ! dlt_proc_alive "$pid" "$start"; then
            return 2
        fi
        # Probe only once our process listens on the port: whatever else
        # answers there (a concurrent run that got the port first) is not
        # ours, and may keep a probe waiting.
        if dlt_owns_port "$pid" "$port" && dlt_probe "$kind" "$port" "$node"; then
            return 0
        fi
        ((SECONDS < deadline)) || return 1
        # Back off from 20 ms to 200 ms: probes fork (pg_isready,
        # mariadb-admin) and compete for the 2 vCPUs with the starting server.
        printf -v t '0.%03d' "$delay"
        sleep "$t"
        ((delay = delay * 3 / 2, delay > 200 && (delay = 200), 1))
    done
}

# Did the last start of NODE fail because a port was taken?
dlt_bind_failed() { # NODE
    local node=$1
    # Only look at the log since the last "=== ... start" marker.
    awk '/^=== .* start: /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' "$node/log" 2>/dev/null |
        grep -qiE 'address already in use|bind.*(errno|error).*98|BindException|could not bind|Could not create server TCP listening socket'
}

# PIDs of live processes whose cwd is under any of NODES (one find).
dlt_procs_under_any() { # NODE...
    local d
    local -a expr=()
    for d in "$@"; do
        d=${d%/}
        expr+=(${expr[0]+-o} -lname "$d" -o -lname "$d/*")
    done
    find /proc -mindepth 2 -maxdepth 2 -name cwd \( "${expr[@]}" \) \
        -printf '%h\n' 2>/dev/null | sed 's|^/proc/||' | grep -vxE "$$|${BASHPID:-$$}" || true
}

dlt_nodes_dead() { # NODE...
    local node
    for node in "$@"; do
        if dlt_node_pid "$node" >/dev/null; then return 1; fi
    done
    [[ -z $(dlt_procs_under_any "$@") ]]
}

# Signal every live server in NODES (graceful by default: SIGINT for
# postgres, SIGTERM for the rest; "all": as graceful as is worth it when the
# whole run stops, see dlt_stop_signal; or SIG), then wait for all of them,
# SIGKILLing whatever is left after DLT_STOP_TIMEOUT. Signal everything
# first: waiting per server would serialise the shutdowns. With SIG=KILL
# helper processes (postgres backends) are SIGKILLed too, like a crash.
dlt_stop_nodes() { # SIG|""|all NODE...
    local sig=$1 node pid p s
    shift
    (($# > 0)) || return 0
    local -a nodes=("$@")
    for node in "${nodes[@]}"; do
        case $sig in
            '' | all) s=$(dlt_stop_signal "$(dlt_node_kind "$node")" "$sig") ;;
            *) s=$sig ;;
        esac
        if pid=$(dlt_node_pid "$node"); then
            kill -s "$s" "$pid" 2>/dev/null || true
        fi
    done
    # A paused (ctl.sh pause) server never acts on the signal until woken;
    # wake it and its helpers.
    for p in $(dlt_procs_under_any "${nodes[@]}"); do
        if [[ $sig == KILL ]]; then kill -KILL "$p" 2>/dev/null || true; fi
        kill -CONT "$p" 2>/dev/null || true
    done
    local deadline=$((SECONDS + DLT_STOP_TIMEOUT)) killed=0
    while ! dlt_nodes_dead "${nodes[@]}"; do
        if ((SECONDS >= deadline)); then
            if ((killed)); then
                dlt_err "processes still alive after SIGKILL: $(dlt_procs_under_any "${nodes[@]}" | tr '\n' ' ')"
                return 1
            fi
            for node in "${nodes[@]}"; do
                if pid=$(dlt_node_pid "$node"); then
                    dlt_err "$(basename "$node"): pid $pid still alive after ${DLT_STOP_TIMEOUT}s, sending SIGKILL"
                    kill -KILL "$pid" 2>/dev/null || true
                fi
            done
            for p in $(dlt_procs_under_any "${nodes[@]}"); do
                kill -KILL "$p" 2>/dev/null || true
            done
            killed=1
            deadline=$((SECONDS + 5))
        fi
        sleep 0.02
    done
}

# --------------------------------------------- per-kind set-up (first start)

# Root runs postgres/mariadbd as their own users; anyone else runs them as
# themselves (both refuse only root).
dlt_as_user() { # USER -> prefix words for a command line
    if [[ $EUID -eq 0 ]]; then
        printf '%s\n' setpriv "--reuid=$1" "--regid=$1" --init-groups --
    fi
}

dlt_write_cmd() { # NODE ARGV...
    local node=$1
    shift
    printf '%q ' "$@" >"$node/cmd"
    echo >>"$node/cmd"
}

dlt_prepare_redis() { # NODE PORT
    local node=$1 port=$2
    mkdir -p "$node/data"
    echo "$port" >"$node/port"
    # No persistence, no Unix socket, loopback only; --dir so nothing is
    # written to the caller's cwd. DEBUG is allowed from loopback so fault
    # tests can use DEBUG SLEEP.
    dlt_write_cmd "$node" "$(dlt_find_bin redis-server)" \
        --bind 127.0.0.1 --port "$port" --protected-mode yes \
        --save '' --appendonly no --daemonize no --unixsocket '' \
        --dir "$node/data" --logfile '' --enable-debug-command local
}

# Redis Cluster (rcluster): a redis node with cluster mode on; nodes.conf
# in its data dir, so a node stopped and started again (ctl.sh) rejoins.
dlt_prepare_rcluster() { # NODE PORT BUSPORT
    dlt_prepare_redis "$1" "$2"
    printf '%q ' --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-port "$3" --cluster-node-timeout 2000 >>"$1/cmd"
    sed -i ':a;N;$!ba;s/\n//g' "$1/cmd"
    echo >>"$1/cmd"
}

# Make the 6 started nodes one cluster: 3 masters with a replica each, and
# wait until every node says cluster_state:ok.
dlt_rcluster_create() { # NODE...
    local node cli addrs=() t
    cli=$(dlt_find_bin redis-cli) || return 1
    for node in "$@"; do addrs+=("127.0.0.1:$(<"$node/port")"); done
    "$cli" --cluster create "${addrs[@]}" --cluster-replicas 1 \
        --cluster-yes >"$1/create.log" 2>&1 || {
        dlt_err "rcluster: redis-cli --cluster create failed"
        tail -5 "$1/create.log" >&2
        return 1
    }
    for ((t = 0; t < 600; t++)); do
        local ok=1
        for node in "$@"; do
            "$cli" -p "$(<"$node/port")" cluster info 2>/dev/null |
                grep -q '^cluster_state:ok' || { ok=0; break; }
        done
        # ... and each master has its replica (failover tests need one).
        ((ok)) && [[ $("$cli" -p "$(<"$1/port")" cluster nodes 2>/dev/null |
            grep -c ' slave ') == 3 ]] && return 0
        sleep 0.1
    done
    dlt_err "rcluster: no cluster_state:ok with 3 replicas within 60 s"
    return 1
}

# rsentinel: node I of 6 (see dlt_probe_rsentinel); PORTS are all six
# client ports. The sentinels watch master "dlock" with quorum 2, call it
# down after 1 s of silence and may fail over again after 3 s, so a
# failover takes ~1-3 s. Sentinel rewrites its config file: it lives in
# the node dir, and a restart (ctl.sh start) replays the rewritten one.
# The sentinel is redis-server --sentinel (the redis-sentinel package only
# adds a symlink to the same program).
dlt_prepare_rsentinel() { # NODE I PORT1..PORT6
    local node=$1 i=$2
    shift 2
    local -a p=("$@")
    local port=${p[i - 1]}
    mkdir -p "$node/data"
    echo "$port" >"$node/port"
    if ((i <= 3)); then
        local -a rep=()
        ((i == 1)) || rep=(--replicaof 127.0.0.1 "${p[0]}")
        dlt_write_cmd "$node" "$(dlt_find_bin redis-server)" \
            --bind 127.0.0.1 --port "$port" --protected-mode yes \
            --save '' --appendonly no --daemonize no --unixsocket '' \
            --dir "$node/data" --logfile '' --enable-debug-command local \
            --repl-diskless-sync yes --repl-diskless-sync-delay 0 \
            "${rep[@]}"
    else
        cat >"$node/sentinel.conf" <<EOF2
port $port
bind 127.0.0.1
daemonize no
logfile ""
dir $node/data
sentinel monitor dlock 127.0.0.1 ${p[0]} 2
sentinel down-after-milliseconds dlock 1000
sentinel failover-timeout dlock 3000
sentinel parallel-syncs dlock 2
EOF2
        dlt_write_cmd "$node" "$(dlt_find_bin redis-server)" \
            "$node/sentinel.conf" --sentinel
    fi
}

# ZK: config for NODE. Ensemble members are given as "ID:CLIENT:QUORUM:ELECTION".
dlt_prepare_zk() { # NODE MYID PORT [MEMBER...]
    local node=$1 myid=$2 port=$3 m
    shift 3
    mkdir -p "$node/data"
    echo "$port" >"$node/port"
    # tickTime 500 ms: minSessionTimeout = 2 ticks = 1 s, so tests can use
    # ~2 s sessions and see expiry quickly. forceSync=no: tests, speed (the
    # data survives a process kill, only not a machine crash).
    {
        echo "tickTime=500"
        echo "minSessionTimeout=1000"
        echo "maxSessionTimeout=60000"
        echo "initLimit=20"
        echo "syncLimit=10"
        echo "dataDir=$node/data"
        echo "clientPort=$port"
        echo "clientPortAddress=127.0.0.1"
        echo "maxClientCnxns=0"
        echo "admin.enableServer=false"
        echo "4lw.commands.whitelist=srvr,ruok,stat,mntr,conf,cons,dump"
        echo "forceSync=no"
        echo "autopurge.purgeInterval=0"
        # Ensemble: give up on a silent (paused) peer after 2 s, not 5.
        echo "cnxTimeout=2000"
        for m in "$@"; do
            local id qp ep
            IFS=: read -r id _ qp ep <<<"$m"
            echo "server.$id=127.0.0.1:$qp:$ep"
        done
    } >"$node/zoo.cfg"
    if (($# > 0)); then echo "$myid" >"$node/data/myid"; fi
    cat >"$node/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] %-5p [%t:%C{1}@%L] - %m%n
EOF
    # Small, fast-starting JVM: serial GC, C1 only, no perf-data mmap file.
    # IPv4 stack so the sockets are plain 127.0.0.1 ones.
    dlt_write_cmd "$node" "$(dlt_find_bin java)" \
        -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
        -Djava.awt.headless=true -Djava.net.preferIPv4Stack=true \
        "-Dlog4j.configuration=file:$node/log4j.properties" \
        -Dzookeeper.jmx.log4j.disable=true \
        -cp "$(dlt_zk_classpath)" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$node/zoo.cfg"
}

dlt_pg_initdb() { # NODE
    local node=$1 bindir
    bindir=$(dlt_find_pg_bindir)
    mkdir -p "$node/data" "$node/sock"
    chmod 700 "$node/data"
    printf '%s\n' "$DLT_ADMIN_PW" >"$node/pwfile"
    chmod 600 "$node/pwfile"
    if [[ $EUID -eq 0 ]]; then chown postgres: "$node/data" "$node/sock" "$node/pwfile"; fi
    local -a pre
    mapfile -t pre < <(dlt_as_user postgres)
    # Local (socket) connections trust: the set-up path. TCP: scram-sha-256
    # password auth, the path the library is tested on. --no-sync: tests.
    if ! (cd "$node" && "${pre[@]}" "$bindir/initdb" -D "$node/data" -U postgres \
        "--pwfile=$node/pwfile" -E UTF8 --locale=C \
        --auth-local=trust --auth-host=scram-sha-256 --no-sync) >>"$node/log" 2>&1; then
        dlt_err "initdb failed"
        dlt_log_tail "$node"
        return 1
    fi
    rm -f "$node/pwfile"
}

dlt_prepare_pg() { # NODE PORT
    local node=$1 port=$2 bindir
    bindir=$(dlt_find_pg_bindir)
    echo "$port" >"$node/port"
    local -a pre
    mapfile -t pre < <(dlt_as_user postgres)
    # The socket goes in the run dir: the default /var/run/postgresql belongs
    # to the packaged cluster. fsync off: tests, speed (a SIGKILLed server
    # still leaves what it wrote in the page cache); DLOCK_TEST_DURABLE=1
    # keeps the server's defaults, for benchmarks (dlock bench).
    local -a fast=(-c fsync=off -c synchronous_commit=off -c full_page_writes=off)
    [[ ${DLOCK_TEST_DURABLE:-0} != 1 ]] || fast=()
    dlt_write_cmd "$node" "${pre[@]}" "$bindir/postgres" -D "$node/data" \
        -c listen_addresses=127.0.0.1 -c "port=$port" \
        -c "unix_socket_directories=$node/sock" "${fast[@]}" \
        -c max_connections=300 -c logging_collector=off
}

dlt_pg_setup() { # NODE -- create role and database dlock
    local node=$1 port
    port=$(<"$node/port")
    if ! psql -X -q -h "$node/sock" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        >>"$node/log" 2>&1 <<EOF; then
CREATE ROLE dlock LOGIN PASSWORD '$DLT_PW';
CREATE DATABASE dlock OWNER dlock;
-- fault tests: let dlock terminate other sessions (pg_terminate_backend)
GRANT pg_signal_backend TO dlock;
EOF
        dlt_err "pg: creating role/database dlock failed"
        dlt_log_tail "$node"
        return 1
    fi
}

# InnoDB sizing for both mariadb-install-db and mariadbd: the default 96 MB
# redo log makes every data dir 114 MB; parallel test runs add up.
DLT_MYSQL_INNODB_OPTS=(--innodb-log-file-size=16M --innodb-buffer-pool-size=64M)

dlt_mysql_install_db() { # NODE
    local node=$1
    # Own tmpdir: at start-up mariadbd deletes every "#sql*" file in its
    # tmpdir, i.e. the temporary tables of every other server sharing /tmp
    # (parallel mariadb-install-db runs crashed or failed on this).
    mkdir -p "$node/data" "$node/sock" "$node/tmp"
    local -a user=()
    if [[ $EUID -eq 0 ]]; then
        chown mysql: "$node/data" "$node/sock" "$node/tmp"
        user=(--user=mysql)
    fi
    # --no-defaults: Debian's /etc/mysql/*.cnf points at /var/lib/mysql and
    # /run/mysqld. normal root auth: root without password over the socket.
    if ! (cd "$node" && mariadb-install-db --no-defaults "${user[@]}" \
        "--datadir=$node/data" --auth-root-authentication-method=normal \
        --skip-test-db --skip-name-resolve "--tmpdir=$node/tmp" \
        "${DLT_MYSQL_INNODB_OPTS[@]}") >>"$node/log" 2>&1; then
        dlt_err "mariadb-install-db failed"
        dlt_log_tail "$node"
        return 1
    fi
}

dlt_prepare_mysql() { # NODE PORT
    local node=$1 port=$2
    echo "$port" >"$node/port"
    local -a user=()
    [[ $EUID -eq 0 ]] && user=(--user=mysql)
    # flush-log-at-trx-commit=2: tests, speed (no fsync per commit; a
    # SIGKILLed server's log writes are in the page cache);
    # DLOCK_TEST_DURABLE=1 keeps the default 1, for benchmarks.
    local flush=2
    [[ ${DLOCK_TEST_DURABLE:-0} != 1 ]] || flush=1
    dlt_write_cmd "$node" "$(dlt_find_bin mariadbd)" --no-defaults "${user[@]}" \
        "--datadir=$node/data" --bind-address=127.0.0.1 "--port=$port" \
        "--socket=$node/sock/mysqld.sock" "--pid-file=$node/sock/mysqld.pid" \
        "--tmpdir=$node/tmp" \
        --skip-name-resolve "--innodb-flush-log-at-trx-commit=$flush" \
        --max-connections=500 --skip-log-bin "${DLT_MYSQL_INNODB_OPTS[@]}"
}

dlt_mysql_setup() { # NODE
    local node=$1 u
    local sql="CREATE DATABASE IF NOT EXISTS dlock;"
    # With --skip-name-resolve a TCP client from 127.0.0.1 matches
    # 'dlock'@'127.0.0.1' or 'dlock'@'%', never 'dlock'@'localhost' (that
    # one is for the socket).
    for u in "'dlock'@'127.0.0.1'" "'dlock'@'%'" "'dlock'@'localhost'"; do
        sql+="CREATE USER IF NOT EXISTS $u IDENTIFIED BY '$DLT_PW';"
        sql+="GRANT ALL PRIVILEGES ON dlock.* TO $u;"
        # Fault tests: SET GLOBAL, KILL other sessions, see the processlist.
        sql+="GRANT SUPER, CONNECTION ADMIN, PROCESS ON *.* TO $u;"
    done
    # Superuser over TCP for set-up from tests.
    sql+="CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '$DLT_ADMIN_PW';"
    sql+="ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '$DLT_ADMIN_PW';"
    sql+="GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
    if ! mariadb --no-defaults -u root "--socket=$node/sock/mysqld.sock" \
        -e "$sql" >>"$node/log" 2>&1; then
        dlt_err "mysql: creating user/database dlock failed"
        dlt_log_tail "$node"
        return 1
    fi
}

# etcd: one member of a cluster whose members are given as
# "ID:CLIENT:PEER" (a lone member lists itself). Member names are KIND-ID,
# the node dir names.
dlt_prepare_etcd() { # NODE MYID TOKEN MEMBER...
    local node=$1 myid=$2 token=$3 kind m id cp pp port='' peer='' cluster=''
    local client=http
    local -a tls=()
    shift 3
    kind=$(dlt_node_kind "$node")
    if [[ $kind == etcdtls ]]; then
        client=https
        tls=(--cert-file "$node/tls/server.pem" --key-file "$node/tls/server.key"
            --trusted-ca-file "$node/tls/ca.pem" --client-cert-auth)
    fi
    for m in "$@"; do
        IFS=: read -r id cp pp <<<"$m"
        cluster+="${cluster:+,}$kind-$id=http://127.0.0.1:$pp"
        [[ $id != "$myid" ]] || { port=$cp peer=$pp; }
    done
    # New ports, new member: no WAL from an attempt on other ports (etcd
    # creates the dir itself, 0700).
    rm -rf "$node/data"
    echo "$port" >"$node/port"
    # heartbeat 100 ms / election 1 s: etcd's defaults, written out so that
    # the fault tests' timing (a lost leader replaced in ~1-2 s) does not
    # hang on a default.
    dlt_write_cmd "$node" "$(dlt_find_bin etcd)" \
        --name "$kind-$myid" --data-dir "$node/data" \
        --listen-client-urls "$client://127.0.0.1:$port" \
        --advertise-client-urls "$client://127.0.0.1:$port" "${tls[@]}" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        --initial-cluster-token "$token" \
        --heartbeat-interval 100 --election-timeout 1000 \
        --logger zap --log-outputs stderr
}

# etcdtls: a CA, a server certificate for 127.0.0.1 (IP SAN; serverAuth and
# clientAuth, see the notes on etcd above) and a client certificate, in
# NODE/tls, made once (EC P-256: fast to make, and what etcd's Go TLS
# likes). Valid a week: longer than any test run.
dlt_etcdtls_certs() { # NODE
    local t=$1/tls name ext
    mkdir -p "$t"
    (
        set -e
        cd "$t"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
            -nodes -keyout ca.key -out ca.pem -days 7 \
            -subj /CN=dlock-test-ca
        for name in server client; do
            if [[ $name == server ]]; then
                ext='subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth'
            else
                ext='extendedKeyUsage=clientAuth'
            fi
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                -keyout "$name.key" -out "$name.csr" -subj "/CN=dlock-$name"
            printf '%s\n' "$ext" >"$name.ext"
            openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key \
                -CAcreateserial -days 7 -extfile "$name.ext" -out "$name.pem"
        done
    ) >>"$1/log" 2>&1 || {
        dlt_err "etcdtls: making the certificates with openssl failed"
        dlt_log_tail "$1"
        return 1
    }
}

# PATH percent-encoded for a URI's query (mktemp's names need none; a
# TMPDIR may).
dlt_uri_encode() { # PATH
    local LC_ALL=C s=$1 out='' c i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
            [A-Za-z0-9._~/-]) out+=$c ;;
            *) printf -v c '%%%02X' "'$c"; out+=$c ;;
        esac
    done
    printf '%s' "$out"
}

# ------------------------------------------------- start a kind (all nodes)

# Pick NPORTS ports for each of NODES, the members of one cluster (or a lone
# server); DLT_MEMBERS gets "ID:PORT1:PORT2..." for each, ID from 1.
dlt_pick_members() { # NPORTS NODE...
    local nports=$1 node i=0
    shift
    local -a pp
    DLT_MEMBERS=()
    for node in "$@"; do
        i=$((i + 1))
        dlt_pick_ports "$node" "$nports" || return 1
        mapfile -t pp <"$node/ports"
        DLT_MEMBERS+=("$i$(printf ':%s' "${pp[@]}")")
    done
}

# Pick ports for NODES of KIND and write their command lines.
dlt_configure() { # KIND NODE...
    local kind=$1 node i
    shift
    case $kind in
        redis | redis5)
            for node in "$@"; do
                dlt_pick_ports "$node" 1 || return 1
                dlt_prepare_redis "$node" "$(<"$node/ports")"
            done
            ;;
        rcluster)
            # Two ports each: clients, and the cluster bus (cluster-port).
            local pp
            for node in "$@"; do
                dlt_pick_ports "$node" 2 || return 1
                mapfile -t pp <"$node/ports"
                dlt_prepare_rcluster "$node" "${pp[0]}" "${pp[1]}"
            done
            ;;
        rsentinel)
            local -a ports=()
            for node in "$@"; do
                dlt_pick_ports "$node" 1 || return 1
                ports+=("$(<"$node/ports")")
            done
            i=0
            for node in "$@"; do
                i=$((i + 1))
                dlt_prepare_rsentinel "$node" "$i" "${ports[@]}"
            done
            ;;
        zk)
            dlt_pick_ports "$1" 1 || return 1
            dlt_prepare_zk "$1" 1 "$(<"$1/ports")"
            ;;
        zk3)
            # Every member's config lists every member: all three together.
            local cp
            dlt_pick_members 3 "$@" || return 1
            i=0
            for node in "$@"; do
                i=$((i + 1))
                IFS=: read -r _ cp _ <<<"${DLT_MEMBERS[i - 1]}"
                dlt_prepare_zk "$node" "$i" "$cp" "${DLT_MEMBERS[@]}"
            done
            ;;
        etcd | etcd3 | etcdtls)
            # Client and peer port each. A token per attempt: members left
            # from an earlier attempt cannot join this one.
            local token
            token=$(basename "$DLOCK_TEST_RUN_DIR")-$kind-$RANDOM$RANDOM
            dlt_pick_members 2 "$@" || return 1
            i=0
            for node in "$@"; do
                i=$((i + 1))
                dlt_prepare_etcd "$node" "$i" "$token" "${DLT_MEMBERS[@]}"
            done
            ;;
        pg)
            dlt_pick_ports "$1" 1 || return 1
            dlt_prepare_pg "$1" "$(<"$1/ports")"
            ;;
        mysql)
            dlt_pick_ports "$1" 1 || return 1
            dlt_prepare_mysql "$1" "$(<"$1/ports")"
            ;;
    esac
}

# Start KIND's nodes in $DLOCK_TEST_RUN_DIR and wait until all answer.
# A node that finds its port taken (a race with another process between
# picking and binding) is started again on fresh ports; for a cluster (zk3,
# etcd3) that means every member, as every member's config names every port.
dlt_start_kind() { # KIND
    local kind=$1 n i attempt rc node owner
    local run=$DLOCK_TEST_RUN_DIR
    n=$(dlt_kind_count "$kind")
    local -a nodes=() pending=() again=()
    for ((i = 1; i <= n; i++)); do
        nodes+=("$run/$kind-$i")
        mkdir -p "$run/$kind-$i"
    done

    # One-time data directory initialisation.
    case $kind in
        pg) dlt_pg_initdb "${nodes[0]}" || return 1 ;;
        mysql) dlt_mysql_install_db "${nodes[0]}" || return 1 ;;
        etcdtls) dlt_etcdtls_certs "${nodes[0]}" || return 1 ;;
    esac

    pending=("${nodes[@]}")
    for attempt in 1 2 3 4 5; do
        dlt_configure "$kind" "${pending[@]}" || return 1
        for node in "${pending[@]}"; do dlt_launch "$node"; done
        again=()
        for node in "${pending[@]}"; do
            rc=0
            dlt_wait_node "$node" || rc=$?
            ((rc != 0)) || continue
            # rc 2: it died. A zk3 member whose election port is taken may
            # also just never join (rc 1 after the timeout).
            if dlt_bind_failed "$node"; then
                dlt_log "$kind: port taken on $(basename "$node") (attempt $attempt), retrying on other ports"
                again+=("$node")
                ! dlt_kind_is_cluster "$kind" || break
                continue
            fi
            # A node that runs but never answered its probe (seen once in
            # a TSan run: postgres logged "ready" and pg_isready never got
            # an answer on its port) gets one more start on other ports,
            # with its log kept, before the run gives up.
            if ((rc == 1 && attempt == 1)) && ! dlt_kind_is_cluster "$kind"; then
                read -r owner _ <"$node/pid"
                dlt_err "$kind: $(basename "$node") did not answer on 127.0.0.1:$(<"$node/port") within ${DLT_READY_TIMEOUT}s (pid $owner $(dlt_owns_port "$owner" "$(<"$node/port")" && echo owns || echo does not own) the port); restarting it on other ports"
                dlt_log_tail "$node"
                again+=("$node")
                continue
            fi
            if ((rc == 1)); then
                dlt_err "$kind: $(basename "$node") did not answer on 127.0.0.1:$(<"$node/port") within ${DLT_READY_TIMEOUT}s"
            else
                dlt_err "$kind: $(basename "$node") exited during start-up"
            fi
            dlt_log_tail "$node"
            return 1
        done
        ((${#again[@]} > 0)) || break
        if ((attempt == 5)); then
            dlt_err "$kind: giving up after $attempt attempts (ports kept being taken)"
            return 1
        fi
        ! dlt_kind_is_cluster "$kind" || again=("${nodes[@]}")
        dlt_stop_nodes KILL "${again[@]}"
        pending=("${again[@]}")
    done

    # One-time users/databases.
    case $kind in
        pg) dlt_pg_setup "${nodes[0]}" || return 1 ;;
        mysql) dlt_mysql_setup "${nodes[0]}" || return 1 ;;
        rcluster) dlt_rcluster_create "${nodes[@]}" || return 1 ;;
    esac
    return 0
}

# "127.0.0.1:PORT,..." for every node of KIND in RUN; with PREFIX before
# each (etcdctl's --endpoints wants http://).
dlt_kind_hosts() { # KIND RUN [PREFIX]
    local i hosts=
    for ((i = 1; i <= $(dlt_kind_count "$1"); i++)); do
        hosts+="${hosts:+,}${3:-}127.0.0.1:$(<"$2/$1-$i/port")"
    done
    echo "$hosts"
}

# Export the variables for KIND started in RUN.
dlt_export_kind() { # KIND RUN
    local kind=$1 run=$2 hosts
    hosts=$(dlt_kind_hosts "$kind" "$run")
    case $kind in
        redis) export DLOCK_TEST_REDIS_URI="redis://$hosts" ;;
        redis5) export DLOCK_TEST_REDIS5_HOSTS=$hosts ;;
        rcluster)
            # Seeds: every node; the test picks its master by CLUSTER SLOTS.
            export DLOCK_TEST_RCLUSTER_HOSTS=$hosts
            export DLOCK_TEST_RCLUSTER_URI="redis://$hosts?cluster=1"
            ;;
        rsentinel)
            # The sentinels in the URI; the data nodes as they started
            # (node 1 the master) for tests that stop or inspect them.
            local -a h
            IFS=, read -r -a h <<<"$hosts"
            export DLOCK_TEST_RSENTINEL_URI="redis://${h[3]},${h[4]},${h[5]}?sentinel=dlock"
            export DLOCK_TEST_RSENTINEL_MASTER=${h[0]}
            export DLOCK_TEST_RSENTINEL_REPLICAS=${h[1]},${h[2]}
            ;;
        zk) export DLOCK_TEST_ZK_URI="zk://$hosts" ;;
        zk3) export DLOCK_TEST_ZK3_URI="zk://$hosts" ;;
        etcd | etcd3)
            # The URI for dlock; the same members as etcdctl --endpoints.
            local up=${kind^^}
            export "DLOCK_TEST_${up}_URI=etcd://$hosts"
            export "DLOCK_TEST_${up}_ENDPOINTS=$(dlt_kind_hosts "$kind" "$run" http://)"
            ;;
        etcdtls)
            # etcds:// with the files the member trusts; the dir for tests
            # that need the pieces (another CA, no client certificate).
            local t
            t=$(cd "$run/etcdtls-1/tls" && pwd -P)
            export DLOCK_TEST_ETCDTLS_DIR=$t
            t=$(dlt_uri_encode "$t")
            export DLOCK_TEST_ETCDTLS_URI="etcds://$hosts?cacert=$t/ca.pem&cert=$t/client.pem&key=$t/client.key"
            export DLOCK_TEST_ETCDTLS_ENDPOINTS="https://$hosts"
            ;;
        pg)
            local p
            p=$(<"$run/pg-1/port")
            export DLOCK_TEST_PG_URI="postgres://dlock:$DLT_PW@127.0.0.1:$p/dlock"
            export DLOCK_TEST_PG_ADMIN_URI="postgres://postgres:$DLT_ADMIN_PW@127.0.0.1:$p/dlock"
            export DLOCK_TEST_PG_PASSWORD=$DLT_PW
            ;;
        mysql)
            local p
            p=$(<"$run/mysql-1/port")
            export DLOCK_TEST_MYSQL_URI="mysql://dlock:$DLT_PW@127.0.0.1:$p/dlock"
            export DLOCK_TEST_MYSQL_ADMIN_URI="mysql://root:$DLT_ADMIN_PW@127.0.0.1:$p/dlock"
            export DLOCK_TEST_MYSQL_PASSWORD=$DLT_PW
            ;;
    esac
}
