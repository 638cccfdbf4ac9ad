#!/usr/bin/env bash
# Run a command with private test servers for dlock.
#
#   tests/servers/with-servers.sh [--fresh] KIND... -- CMD [ARGS...]
#
# KIND: redis   one redis-server            -> DLOCK_TEST_REDIS_URI=redis://127.0.0.1:P
#       redis5  five independent redis      -> DLOCK_TEST_REDIS5_HOSTS=127.0.0.1:P1,...,127.0.0.1:P5
#       rsentinel  a master, 2 replicas, 3 sentinels (master "dlock", quorum 2,
#               failover in ~1-3 s) -> DLOCK_TEST_RSENTINEL_URI=redis://S1,S2,S3?sentinel=dlock
#                                      DLOCK_TEST_RSENTINEL_MASTER=127.0.0.1:P (the first master)
#                                      DLOCK_TEST_RSENTINEL_REPLICAS=127.0.0.1:P2,127.0.0.1:P3
#       zk      one ZooKeeper (standalone)  -> DLOCK_TEST_ZK_URI=zk://127.0.0.1:P
#       zk3     three-node ZK ensemble      -> DLOCK_TEST_ZK3_URI=zk://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#       pg      PostgreSQL                  -> DLOCK_TEST_PG_URI=postgres://dlock:PW@127.0.0.1:P/dlock
#                                              DLOCK_TEST_PG_ADMIN_URI (superuser postgres), DLOCK_TEST_PG_PASSWORD
#       mysql   MariaDB                     -> DLOCK_TEST_MYSQL_URI=mysql://dlock:PW@127.0.0.1:P/dlock
#                                              DLOCK_TEST_MYSQL_ADMIN_URI (root), DLOCK_TEST_MYSQL_PASSWORD
#       etcd    one etcd member (v3 API)    -> DLOCK_TEST_ETCD_URI=etcd://127.0.0.1:P
#                                              DLOCK_TEST_ETCD_ENDPOINTS=http://127.0.0.1:P (etcdctl --endpoints)
#       etcd3   three-member etcd cluster   -> DLOCK_TEST_ETCD3_URI=etcd://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#                                              DLOCK_TEST_ETCD3_ENDPOINTS=http://127.0.0.1:P1,...
#       etcdtls one etcd member over TLS    -> DLOCK_TEST_ETCDTLS_URI=etcds://127.0.0.1:P?cacert=F&cert=F&key=F
#               (client certificates        DLOCK_TEST_ETCDTLS_DIR (ca.pem, client.pem, client.key, ...)
#               required)                   DLOCK_TEST_ETCDTLS_ENDPOINTS=https://127.0.0.1:P
#       rcluster Redis Cluster: 3 masters   -> DLOCK_TEST_RCLUSTER_URI=redis://127.0.0.1:P1,...,127.0.0.1:P6?cluster=1
#               with a replica each (nodes  DLOCK_TEST_RCLUSTER_HOSTS=127.0.0.1:P1,...,127.0.0.1:P6
#               1-6, node timeout 2 s)
# Always: DLOCK_TEST_RUN_DIR (the run dir) and DLOCK_TEST_SERVERCTL (ctl.sh).
#
# Servers listen on 127.0.0.1 only, on free ports picked per run, so many
# runs (parallel meson tests) coexist. A KIND whose variable is already set
# (an outer with-servers.sh started it) is reused, unless --fresh.
# CMD's exit status is returned; every server started here is stopped and
# the run dir removed afterwards, also on SIGINT/SIGTERM/SIGHUP (etcd3
# members with SIGKILL: see dlt_stop_signal)
# (DLOCK_TEST_KEEP=1 keeps the run dir). PostgreSQL and MariaDB run without
# fsync per commit (tests, speed); DLOCK_TEST_DURABLE=1 starts them with
# their default durability (synchronous_commit=on, fsync;
# innodb_flush_log_at_trx_commit=1), for benchmarks. DLOCK_TEST_VERBOSE=1 reports ports
# and start/stop times on stderr. DLOCK_TEST_READY_TIMEOUT (default 60 s)
# bounds the wait for a server to answer; ports come from
# DLOCK_TEST_PORT_MIN..DLOCK_TEST_PORT_MAX (default 20000..32767).
# ctl.sh ($DLOCK_TEST_SERVERCTL) stops/starts/pauses single servers.
#
# Exit status when servers cannot be started: 77 (meson's "skip") when a
# server program is not installed, 99 (meson's "hard error") when a start
# fails; scripts/setup-debian.sh installs everything.
set -euo pipefail

DLT_PROG=with-servers
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/servers/lib.sh
. "$here/lib.sh"

# Stop every server RUN started (not the outer run's nodes, which are
# symlinks), kill anything else still running from inside RUN, remove RUN
# (unless DLOCK_TEST_KEEP=1).
stop_run() { # RUN
    local run=$1 d left
    local -a nodes=()
    for d in "$run"/*/; do
        d=${d%/}
        [[ -L $d || ! -e $d/cmd ]] || nodes+=("$d")
    done
    dlt_stop_nodes all "${nodes[@]}" || true
    # Safety net: initdb/mariadb-install-db interrupted by a signal, or a
    # server launched in the instant its start-up subshell was killed.
    left=$(dlt_procs_under_any "$run")
    if [[ -n $left ]]; then
        if [[ ${DLOCK_TEST_VERBOSE:-0} != 0 ]]; then
            local p names=''
            for p in $left; do names+=" $p:$(cat "/proc/$p/comm" 2>/dev/null || true)"; done
            dlt_log "killing leftover processes:$names"
        fi
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null || true
    fi
    if [[ ${DLOCK_TEST_KEEP:-0} == 1 ]]; then
        dlt_err "kept run dir $run"
    else
        rm -rf "$run"
    fi
}

# Internal: "--watchdog PID STARTTIME RUN". Started in its own session
# with stdio on /dev/null (so it holds no test runner pipe open), it waits
# for with-servers.sh PID to die and cleans RUN up if that did not happen:
# e.g. meson on timeout SIGTERMs the process group and SIGKILLs it 0.5 s
# later, in the middle of our cleanup. A normal exit kills the watchdog.
if [[ ${1:-} == --watchdog ]]; then
    dlt_close_fds
    while dlt_proc_alive "$2" "$3"; do sleep 1; done
    [[ -d $4 ]] || exit 0
    stop_run "$4"
    exit 0
fi

usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
    exit 2
}

fresh=0
kinds=()
while (($# > 0)); do
    case $1 in
        --fresh) fresh=1 ;;
        -h | --help) usage ;;
        --) shift; break ;;
        -*) dlt_err "unknown option $1"; usage ;;
        *)
            dlt_is_kind "$1" || { dlt_err "unknown kind '$1' (kinds: $DLT_ALL_KINDS)"; exit 2; }
            [[ " ${kinds[*]} " == *" $1 "* ]] || kinds+=("$1")
            ;;
    esac
    shift
done
(($# > 0)) || { dlt_err "no command given after --"; usage; }

export DLOCK_TEST_SERVERCTL=$here/ctl.sh

# Which kinds do we start, which are the outer run's?
to_start=()
reused=()
for k in "${kinds[@]}"; do
    var=$(dlt_kind_var "$k")
    if ((fresh == 0)) && [[ -n ${!var:-} ]]; then
        reused+=("$k")
    else
        to_start+=("$k")
    fi
done

missing=()
for k in "${to_start[@]}"; do
    while IFS= read -r m; do missing+=("$m"); done < <(dlt_kind_missing "$k")
done
if ((${#missing[@]} > 0)); then
    dlt_err "SKIP: not installed: ${missing[*]} (run scripts/setup-debian.sh)"
    exit 77
fi

run=
cmd_pid=
watchdog_pid=
start_pids=()

# The two trap handlers below are only reached through trap.
# shellcheck disable=SC2317
# Stop what this run started, sweep, remove the run dir. Idempotent.
cleanup() {
    local rc=$? t
    trap - EXIT INT TERM HUP
    # Start-up subshells first, so none launches a server behind our back.
    local p
    for p in "${start_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${start_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    [[ -z $watchdog_pid ]] || kill "$watchdog_pid" 2>/dev/null || true
    if [[ -n $run && -d $run ]]; then
        t=$(dlt_now)
        stop_run "$run"
        dlt_log "stopped ${to_start[*]} in $(dlt_elapsed "$t")s"
    fi
    exit "$rc"
}

# shellcheck disable=SC2317
on_signal() { # SIGNAME
    local sig=$1 num
    num=$(kill -l "$sig")
    trap - INT TERM HUP
    if [[ -n $cmd_pid ]]; then
        # Pass it on to CMD and give it a moment to clean up itself.
        kill -s "$sig" "$cmd_pid" 2>/dev/null || true
        local i
        for ((i = 0; i < 100; i++)); do
            dlt_proc_alive "$cmd_pid" || break
            sleep 0.05
        done
        kill -KILL "$cmd_pid" 2>/dev/null || true
    fi
    exit $((128 + num))
}

trap cleanup EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

if ((${#to_start[@]} > 0)); then
    parent=${TMPDIR:-/tmp}
    # postgres and mariadbd run as their own users and must reach the run
    # dir: every ancestor needs o+x. A private TMPDIR (mode 0700) fails
    # that, so fall back to /tmp.
    if ((EUID == 0)) && ! dlt_world_traversable "$parent"; then
        dlt_log "$parent is not traversable by other users; using /tmp"
        parent=/tmp
    fi
    run=$(mktemp -d "$parent/dlock-test.XXXXXXXX")
    # Physical path: it is compared with /proc/PID/cwd, which has no symlinks.
    run=$(cd "$run" && pwd -P)
    # mktemp makes it 0700; postgres and mysql must traverse it.
    chmod 755 "$run"
    outer_run=${DLOCK_TEST_RUN_DIR:-}
    export DLOCK_TEST_RUN_DIR=$run
    dlt_proc_stat $$
    setsid "$here/with-servers.sh" --watchdog $$ "$DLT_START" "$run" </dev/null >/dev/null 2>&1 &
    watchdog_pid=$!
    disown "$watchdog_pid"
    # Make the outer run's reused nodes reachable by ctl.sh through ours.
    if [[ -n $outer_run && -d $outer_run ]]; then
        for k in "${reused[@]}"; do
            for d in "$outer_run/$k"-*; do
                [[ -e $d ]] && ln -s "$d" "$run/$(basename "$d")"
            done
        done
    fi

    # Start every kind in parallel (initdb, mariadb-install-db and the JVMs
    # overlap); each subshell starts, waits and retries its own kind.
    t0=$(dlt_now)
    for k in "${to_start[@]}"; do
        (
            t=$(dlt_now)
            dlt_start_kind "$k" || exit 1
            dlt_log "$k ready in $(dlt_elapsed "$t")s"
        ) &
        start_pids+=($!)
    done
    # Stop at the first failure (the cleanup kills the other starts)
    # rather than wait for every kind.
    failed=0
    while ((${#start_pids[@]} > 0)); do
        done_pid=
        wait -n -p done_pid "${start_pids[@]}" || failed=1
        remaining=()
        for p in "${start_pids[@]}"; do
            [[ $p == "$done_pid" ]] || remaining+=("$p")
        done
        start_pids=("${remaining[@]}")
        ((failed == 0)) || break
    done
    if ((failed)); then
        dlt_err "could not start: see messages above"
        exit 99
    fi
    for k in "${to_start[@]}"; do dlt_export_kind "$k" "$run"; done
    dlt_log "all of ${to_start[*]} ready in $(dlt_elapsed "$t0")s (run dir $run)"
    if [[ ${DLOCK_TEST_VERBOSE:-0} != 0 ]]; then
        env | grep '^DLOCK_TEST_' | sort | sed 's/^/    /' >&2
    fi
fi

# Run CMD in the background and wait for it, rather than in the foreground:
# bash runs traps only between foreground commands, so a SIGTERM sent to us
# alone would otherwise wait for CMD to finish. "( exec ... ) &" keeps
# SIGINT/SIGQUIT at their defaults (plain "cmd &" would ignore them) and
# <&0 keeps our stdin (an async command would get /dev/null).
(
    trap - INT QUIT
    exec "$@"
) <&0 &
cmd_pid=$!
status=0
wait "$cmd_pid" || status=$?
cmd_pid=
exit "$status"
