#!/usr/bin/env bash
# Control one server of the current with-servers.sh run (fault tests).
#
#   $DLOCK_TEST_SERVERCTL ACTION KIND [INDEX]
#
# KIND: redis redis5 rsentinel rcluster zk zk3 pg mysql etcd etcd3 etcdtls;
# INDEX is 1-based (redis5: 1-5, zk3 and etcd3: 1-3, rsentinel: 1-3 data
# nodes, 1 the first master, 4-6 sentinels; rcluster: 1-6, which of them
# is a master changes with failovers: ask CLUSTER NODES; a node started
# again rejoins from its nodes.conf), default 1. Uses DLOCK_TEST_RUN_DIR.
#
# ACTION:
#   stop         graceful stop (SIGINT for pg, SIGTERM otherwise; an etcd
#                leader hands leadership over first), wait until dead
#                (SIGKILL after 10 s)
#   kill         SIGKILL the server and its helper processes (a crash)
#   start        start again with the same port, data and command line, and
#                wait until it answers (zk3: until it serves as leader or
#                follower; etcd/etcd3/etcdtls: until a linearizable read through it
#                succeeds; both need a quorum); no-op if already running.
#                An etcd3 member rejoins its cluster from its data dir.
#   start-nowait start, do not wait for it to answer
#   wait         wait until it answers (after start-nowait)
#   restart      stop, then start
#   pause        SIGSTOP the server and its helper processes
#   resume       SIGCONT them
#   pid          print the server's PID (exit 1 if it is not running)
#   port         print its client port
#   log          print the path of its log file
#
# Quiet on success; on failure exits non-zero with a message on stderr.
# Exit status 2 for usage errors.
set -euo pipefail

DLT_PROG=ctl.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/servers/lib.sh
. "$here/lib.sh"

usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit 2
}

(($# >= 2 && $# <= 3)) || usage
action=$1 kind=$2 index=${3:-1}
dlt_is_kind "$kind" || { dlt_err "unknown kind '$kind' (kinds: $DLT_ALL_KINDS)"; exit 2; }
if ! [[ $index =~ ^[1-9][0-9]*$ ]] || ((index > $(dlt_kind_count "$kind"))); then
    dlt_err "bad index '$index' for $kind (1..$(dlt_kind_count "$kind"))"
    exit 2
fi
[[ -n ${DLOCK_TEST_RUN_DIR:-} ]] ||
    { dlt_err "DLOCK_TEST_RUN_DIR is not set: run under tests/servers/with-servers.sh"; exit 1; }
node=$DLOCK_TEST_RUN_DIR/$kind-$index
[[ -r $node/cmd && -r $node/port ]] ||
    { dlt_err "no $kind-$index in $DLOCK_TEST_RUN_DIR (was '$kind' started by with-servers.sh?)"; exit 1; }
# Reused nodes are symlinks to the outer run's dir; work on the real path
# (process cwds are compared with it).
node=$(cd "$node" && pwd -P)
port=$(<"$node/port")

do_start() { # WAIT(0|1)
    if dlt_node_pid "$node" >/dev/null; then
        return 0
    fi
    # Leftover helpers (postgres backends of a killed postmaster) would
    # keep the data dir locked.
    dlt_stop_nodes KILL "$node" || exit 1
    dlt_wait_ports_free "$node" ||
        dlt_err "$kind-$index: its port is still taken; starting anyway"
    dlt_launch "$node"
    (($1)) || {
        # Only make sure it did not die at once (bad port etc.).
        sleep 0.05
        dlt_node_pid "$node" >/dev/null || {
            dlt_err "$kind-$index exited right after start"
            dlt_log_tail "$node"
            exit 1
        }
        return 0
    }
    do_wait
}

do_wait() {
    local rc=0
    dlt_wait_node "$node" || rc=$?
    case $rc in
        0) return 0 ;;
        2) dlt_err "$kind-$index exited during start-up (port 127.0.0.1:$port)" ;;
        *) dlt_err "$kind-$index did not answer on 127.0.0.1:$port within ${DLT_READY_TIMEOUT}s" ;;
    esac
    if dlt_bind_failed "$node"; then
        dlt_err "port $port is taken by another process"
    fi
    dlt_log_tail "$node"
    exit 1
}

signal_all() { # SIG: the server and its helpers (postgres backends)
    local p any=0
    for p in $(dlt_procs_under_any "$node"); do
        kill -s "$1" "$p" 2>/dev/null && any=1
    done
    ((any)) || { dlt_err "$kind-$index is not running"; exit 1; }
}

# kill(2) returns once SIGSTOP is sent, not once every thread of a
# multi-threaded server (ZooKeeper's JVM) has stopped: until then a thread
# on the other CPU may still answer a request (zk/backend saw a create
# answered 3 ms after "pause" returned). Wait, up to 2 s, until every
# thread of PID is stopped.
wait_stopped() { # PID
    local i t st
    for ((i = 0; i < 200; i++)); do
        st=T
        for t in /proc/"$1"/task/*/stat; do
            [ -r "$t" ] || continue
            case $(sed 's/.*) //' "$t" 2>/dev/null | cut -d' ' -f1) in
            T | t | "") ;;
            *) st=running ;;
            esac
        done
        [ "$st" = T ] && return 0
        sleep 0.01
    done
    dlt_err "$kind-$index: not stopped 2 s after SIGSTOP"
    exit 1
}

case $action in
    stop) dlt_stop_nodes "" "$node" ;;
    kill) dlt_stop_nodes KILL "$node" ;;
    start) do_start 1 ;;
    start-nowait) do_start 0 ;;
    wait) do_wait ;;
    restart)
        dlt_stop_nodes "" "$node"
        do_start 1
        ;;
    pause)
        # The main process first, so a postmaster cannot fork new backends.
        pid=$(dlt_node_pid "$node") || { dlt_err "$kind-$index is not running"; exit 1; }
        kill -STOP "$pid"
        signal_all STOP
        wait_stopped "$pid"
        ;;
    resume) signal_all CONT ;;
    pid)
        dlt_node_pid "$node" || { dlt_err "$kind-$index is not running"; exit 1; }
        ;;
    port) echo "$port" ;;
    log) echo "$node/log" ;;
    *)
        dlt_err "unknown action '$action'"
        usage
        ;;
esac
