#!/usr/bin/env bash
# Self-test of the test-server scripts: starts every kind with
# with-servers.sh, talks to each with its real client, exercises ctl.sh,
# checks signals, exit status, nesting, and that nothing is left behind.
# Prints start/stop times per kind.
#
#   tests/servers/selftest.sh [KIND...]
#
# KINDs limit sections 1, 2 and the table to those kinds and skip the checks
# of with-servers.sh itself (3, 4: exit status, signals, nesting), which use
# redis and pg. Default: every kind, every check.
#
# Exit 0 on success, 1 on the first failure, 77 if a server is not installed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
W=$here/with-servers.sh
export DLOCK_TEST_VERBOSE=1
unset DLOCK_TEST_KEEP DLOCK_TEST_RUN_DIR DLOCK_TEST_REDIS_URI DLOCK_TEST_REDIS5_HOSTS \
    DLOCK_TEST_ZK_URI DLOCK_TEST_ZK3_URI DLOCK_TEST_PG_URI DLOCK_TEST_MYSQL_URI \
    DLOCK_TEST_ETCD_URI DLOCK_TEST_ETCD3_URI
# Never pick up passwords from the caller's environment or files: the URI
# must be what authenticates. etcdctl takes ETCDCTL_* variables as flags.
unset PGPASSWORD PGSERVICE MYSQL_PWD "${!ETCDCTL_@}"

all_kinds=(redis redis5 zk zk3 pg mysql etcd etcd3)
if (($# > 0)); then
    kinds=("$@")
    for k in "${kinds[@]}"; do
        [[ " ${all_kinds[*]} " == *" $k "* ]] || { echo "selftest: unknown kind $k" >&2; exit 2; }
    done
else
    kinds=("${all_kinds[@]}")
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-selftest.XXXXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { printf 'selftest: FAIL: %s\n' "$*" >&2; exit 1; }
# Seconds since START (an $EPOCHREALTIME value), 3 decimals; no bc needed.
since() {
    local s=${1/[.,]/} n=${EPOCHREALTIME/[.,]/}
    local us=$((n - s))
    printf '%d.%03d' $((us / 1000000)) $((us % 1000000 / 1000))
}
ok() { printf 'selftest: ok: %s\n' "$*"; }

# ---------------------------------------------------------- client checks
# These run as CMD under with-servers.sh (exported so bash -c sees them).

chk_tcp_redis() { # HOST:PORT -> PING answered within 2 s
    (
        exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
        printf 'PING\r\n' >&3
        IFS= read -r -t 2 line <&3 || exit 1
        [[ $line == +PONG* ]]
    ) 2>/dev/null
}

chk_zk_mode() { # PORT -> prints Mode, fails if none within 2 s
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'srvr' >&3
        while IFS= read -r -t 2 line <&3; do
            [[ $line == Mode:* ]] && { echo "${line#Mode: }"; exit 0; }
        done
        exit 1
    ) 2>/dev/null
}

chk_zk_nodecount() { # PORT
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'srvr' >&3
        while IFS= read -r -t 2 line <&3; do
            [[ $line == "Node count:"* ]] && { echo "${line#Node count: }"; exit 0; }
        done
        exit 1
    ) 2>/dev/null
}

# Split mysql://user:pw@host:port/db
mysql_args() { # URI -> sets M_USER M_PW M_HOST M_PORT M_DB
    [[ $1 =~ ^mysql://([^:]+):([^@]+)@([^:/]+):([0-9]+)/(.+)$ ]] || return 1
    M_USER=${BASH_REMATCH[1]} M_PW=${BASH_REMATCH[2]} M_HOST=${BASH_REMATCH[3]}
    M_PORT=${BASH_REMATCH[4]} M_DB=${BASH_REMATCH[5]}
}

check_redis() {
    [[ $DLOCK_TEST_REDIS_URI =~ ^redis://127\.0\.0\.1:[0-9]+$ ]] || fail "redis uri $DLOCK_TEST_REDIS_URI"
    [[ $(redis-cli -u "$DLOCK_TEST_REDIS_URI" PING) == PONG ]] || fail "redis PING"
    [[ $(redis-cli -u "$DLOCK_TEST_REDIS_URI" SET k v) == OK ]] || fail "redis SET"
    [[ $(redis-cli -u "$DLOCK_TEST_REDIS_URI" GET k) == v ]] || fail "redis GET"
}

check_redis5() {
    local -a hosts
    IFS=, read -r -a hosts <<<"$DLOCK_TEST_REDIS5_HOSTS"
    ((${#hosts[@]} == 5)) || fail "redis5 hosts: $DLOCK_TEST_REDIS5_HOSTS"
    local h
    for h in "${hosts[@]}"; do
        [[ $h =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "redis5 host $h"
        [[ $(redis-cli -h "${h%:*}" -p "${h##*:}" SET k v) == OK ]] || fail "redis5 SET on $h"
    done
}

check_zk() {
    [[ $DLOCK_TEST_ZK_URI =~ ^zk://127\.0\.0\.1:([0-9]+)$ ]] || fail "zk uri $DLOCK_TEST_ZK_URI"
    [[ $(chk_zk_mode "${BASH_REMATCH[1]}") == standalone ]] || fail "zk srvr"
}

check_zk3() {
    [[ $DLOCK_TEST_ZK3_URI =~ ^zk://(127\.0\.0\.1:[0-9]+,){2}127\.0\.0\.1:[0-9]+$ ]] || fail "zk3 uri $DLOCK_TEST_ZK3_URI"
    local -a hosts
    IFS=, read -r -a hosts <<<"${DLOCK_TEST_ZK3_URI#zk://}"
    local h m leaders=0
    for h in "${hosts[@]}"; do
        m=$(chk_zk_mode "${h##*:}") || fail "zk3 srvr on $h"
        case $m in
            leader) leaders=$((leaders + 1)) ;;
            follower) ;;
            *) fail "zk3 $h mode $m" ;;
        esac
    done
    ((leaders == 1)) || fail "zk3: $leaders leaders"
}

check_pg() {
    [[ $DLOCK_TEST_PG_URI == postgres://dlock:*@127.0.0.1:*/dlock ]] || fail "pg uri $DLOCK_TEST_PG_URI"
    [[ $(psql -X -Atc 'SELECT 1' "$DLOCK_TEST_PG_URI") == 1 ]] || fail "pg SELECT 1"
    [[ $(psql -X -Atc 'SELECT current_user' "$DLOCK_TEST_PG_URI") == dlock ]] || fail "pg current_user"
    # Password auth is really on over TCP (scram), not trust.
    if psql -X -w -Atc 'SELECT 1' "${DLOCK_TEST_PG_URI/:$DLOCK_TEST_PG_PASSWORD@/:wrong@}" >/dev/null 2>&1; then
        fail "pg accepted a wrong password"
    fi
    [[ $(psql -X -Atc 'SHOW password_encryption' "$DLOCK_TEST_PG_URI") == scram-sha-256 ]] || fail "pg not scram"
    [[ $(psql -X -Atc 'SELECT rolsuper FROM pg_roles WHERE rolname = current_user' "$DLOCK_TEST_PG_ADMIN_URI") == t ]] ||
        fail "pg admin uri is not superuser"
    # The dlock user can create its tables.
    psql -X -q -v ON_ERROR_STOP=1 -c 'CREATE TABLE t (k text PRIMARY KEY); DROP TABLE t' "$DLOCK_TEST_PG_URI" ||
        fail "pg CREATE TABLE as dlock"
}

check_mysql() {
    mysql_args "$DLOCK_TEST_MYSQL_URI" || fail "mysql uri $DLOCK_TEST_MYSQL_URI"
    [[ $M_USER == dlock && $M_HOST == 127.0.0.1 && $M_DB == dlock ]] || fail "mysql uri $DLOCK_TEST_MYSQL_URI"
    local -a c=(mariadb --no-defaults --protocol=tcp -h "$M_HOST" -P "$M_PORT" -u "$M_USER" "-p$M_PW" -N -B "$M_DB")
    [[ $("${c[@]}" -e 'SELECT 1') == 1 ]] || fail "mysql SELECT 1"
    [[ $("${c[@]}" -e 'SELECT current_user()') == dlock@127.0.0.1 ]] || fail "mysql current_user"
    "${c[@]}" -e 'CREATE TABLE t (k VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB; DROP TABLE t' || fail "mysql CREATE TABLE"
    # Fault-test privileges.
    "${c[@]}" -e 'SET GLOBAL max_connections = 500' || fail "mysql SET GLOBAL as dlock"
    if mariadb --no-defaults --protocol=tcp -h "$M_HOST" -P "$M_PORT" -u dlock -pwrong -e 'SELECT 1' >/dev/null 2>&1; then
        fail "mysql accepted a wrong password"
    fi
    mysql_args "$DLOCK_TEST_MYSQL_ADMIN_URI" || fail "mysql admin uri"
    mariadb --no-defaults --protocol=tcp -h "$M_HOST" -P "$M_PORT" -u "$M_USER" "-p$M_PW" -N -B \
        -e 'SELECT 1' >/dev/null || fail "mysql admin uri login"
}

# etcdctl, bounded: 2 s to connect, 3 s per command. (gRPC retries a
# refused connection until the dial timeout: a member that is down costs
# the whole dial timeout, hence the shorter ones below.)
ectl() { ETCDCTL_API=3 etcdctl --dial-timeout=2s --command-timeout=3s "$@"; }

chk_etcd_health() { # HOST:PORT -> a linearizable read through that member
    ETCDCTL_API=3 etcdctl --dial-timeout=1s --command-timeout=2s \
        --endpoints "http://$1" endpoint health >/dev/null 2>&1
}

# Members of an etcd cluster (ENDPOINTS) that say they lead; a member that
# does not answer counts as no leader.
chk_etcd_leaders() { # ENDPOINTS -> prints the 1-based indexes
    local -a eps
    IFS=, read -r -a eps <<<"$1"
    local i line
    for i in "${!eps[@]}"; do
        line=$(ETCDCTL_API=3 etcdctl --dial-timeout=500ms --command-timeout=1s \
            --endpoints "${eps[i]}" endpoint status -w simple 2>/dev/null) || continue
        # ENDPOINT, ID, VERSION, DB SIZE, IS LEADER, ...
        [[ $(cut -d, -f5 <<<"$line") == " true" ]] && echo $((i + 1))
    done
    return 0
}

check_etcd() {
    [[ $DLOCK_TEST_ETCD_URI =~ ^etcd://127\.0\.0\.1:([0-9]+)$ ]] || fail "etcd uri $DLOCK_TEST_ETCD_URI"
    [[ $DLOCK_TEST_ETCD_ENDPOINTS == "http://127.0.0.1:${BASH_REMATCH[1]}" ]] ||
        fail "etcd endpoints $DLOCK_TEST_ETCD_ENDPOINTS"
    [[ $(ectl --endpoints "$DLOCK_TEST_ETCD_ENDPOINTS" put k v) == OK ]] || fail "etcd put"
    [[ $(ectl --endpoints "$DLOCK_TEST_ETCD_ENDPOINTS" get --print-value-only k) == v ]] || fail "etcd get"
    # The JSON gateway the backend talks to: "k" is "aw==", "v" is "dg==".
    if command -v curl >/dev/null; then
        [[ $(curl -sf -m 3 -X POST "$DLOCK_TEST_ETCD_ENDPOINTS/v3/kv/range" -d '{"key":"aw=="}') == *'"value":"dg=="'* ]] ||
            fail "etcd JSON gateway range"
    fi
}

check_etcd3() {
    [[ $DLOCK_TEST_ETCD3_URI =~ ^etcd://(127\.0\.0\.1:[0-9]+,){2}127\.0\.0\.1:[0-9]+$ ]] ||
        fail "etcd3 uri $DLOCK_TEST_ETCD3_URI"
    local h=${DLOCK_TEST_ETCD3_URI#etcd://}
    [[ $DLOCK_TEST_ETCD3_ENDPOINTS == "http://${h//,/,http://}" ]] ||
        fail "etcd3 endpoints $DLOCK_TEST_ETCD3_ENDPOINTS"
    local -a eps
    IFS=, read -r -a eps <<<"$DLOCK_TEST_ETCD3_ENDPOINTS"
    local leaders
    leaders=$(chk_etcd_leaders "$DLOCK_TEST_ETCD3_ENDPOINTS" | wc -l)
    ((leaders == 1)) || fail "etcd3: $leaders leaders"
    # One cluster: written through one member, read through each.
    [[ $(ectl --endpoints "${eps[0]}" put k3 v3) == OK ]] || fail "etcd3 put"
    local e
    for e in "${eps[@]}"; do
        [[ $(ectl --endpoints "$e" get --print-value-only k3) == v3 ]] || fail "etcd3 get through $e"
    done
}

export -f fail since chk_tcp_redis chk_zk_mode chk_zk_nodecount mysql_args \
    check_redis check_redis5 check_zk check_zk3 check_pg check_mysql \
    ectl chk_etcd_health chk_etcd_leaders check_etcd check_etcd3

# Record the server PIDs of the current run (from inside CMD) to check later
# that they are gone.
record_pids() { # FILE
    local f
    for f in "$DLOCK_TEST_RUN_DIR"/*/pid; do
        cut -d' ' -f1 "$f"
    done >"$1"
    # Plus every process (postgres backends) running from the run dir.
    # (find fails on processes that vanish while it looks: ignore that.)
    { find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$DLOCK_TEST_RUN_DIR/*" -printf '%h\n' 2>/dev/null || true; } |
        sed 's|^/proc/||' >>"$1"
    # Every port the servers bind (client, quorum, election, peer).
    cat "$DLOCK_TEST_RUN_DIR"/*/ports >"$1.ports"
    echo "$DLOCK_TEST_RUN_DIR" >"$1.dir"
}
export -f record_pids

# Ports some socket LISTENs on, any address (decimal, one a line).
listening_ports() {
    local f laddr st
    for f in /proc/net/tcp /proc/net/tcp6; do
        [[ -r $f ]] || continue
        while read -r _ laddr _ st _; do
            [[ $st == 0A ]] && echo $((16#${laddr##*:}))
        done <"$f"
    done
    return 0
}

# Live (not zombie) processes among PIDs in FILE; no LISTEN socket left on
# the ports in FILE.ports; and the run dir must be gone.
check_left() { # FILE
    local p st left=()
    while read -r p; do
        [[ -r /proc/$p/stat ]] || continue
        st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1) || continue
        [[ $st == [ZX] || -z $st ]] || left+=("$p($st)")
    done <"$1"
    ((${#left[@]} == 0)) || fail "processes left behind: ${left[*]}"
    if [[ -r $1.ports ]]; then
        local busy
        busy=$(grep -xFf "$1.ports" <(listening_ports) | tr '\n' ' ') || true
        [[ -z $busy ]] || fail "ports still listened on: $busy"
    fi
    local d
    d=$(<"$1.dir")
    [[ ! -e $d ]] || fail "run dir $d left behind"
}

# ------------------------------------------------- 1. each kind, timed
declare -A start_t stop_t
for kind in "${kinds[@]}"; do
    t0=$EPOCHREALTIME
    "$W" "$kind" -- bash -c "check_$kind && record_pids '$work/pids.$kind'" 2>"$work/err.$kind" ||
        { cat "$work/err.$kind" >&2; fail "$kind run"; }
    check_left "$work/pids.$kind"
    start_t[$kind]=$(sed -n "s/^with-servers: $kind ready in \([0-9.]*\)s$/\1/p" "$work/err.$kind")
    stop_t[$kind]=$(sed -n "s/^with-servers: stopped $kind in \([0-9.]*\)s$/\1/p" "$work/err.$kind")
    ok "$kind: clients answered, nothing left behind (wall $(since "$t0")s)"
done

# ------------------------------------------------- 2. all at once + ctl.sh
# ctl.sh on a kind, inside the run that started them all (CMD of section 2).
tm() { local t=$EPOCHREALTIME; "$@"; printf '  %-22s %ss\n' "${*:2}" "$(since "$t")"; }

ctl_redis5() { # node 2
    local C=$DLOCK_TEST_SERVERCTL h2 p2
    p2=$("$C" port redis5 2)
    h2=127.0.0.1:$p2
    [[ $DLOCK_TEST_REDIS5_HOSTS == *"$h2"* ]] || fail "ctl port redis5 2 = $p2 not in hosts"
    local pid1
    pid1=$("$C" pid redis5 2)
    tm "$C" stop redis5 2
    chk_tcp_redis "$h2" && fail "redis5-2 answers after stop"
    "$C" pid redis5 2 2>/dev/null && fail "ctl pid succeeded on a stopped node"
    tm "$C" start redis5 2
    chk_tcp_redis "$h2" || fail "redis5-2 does not answer after start"
    [[ $("$C" pid redis5 2) != "$pid1" ]] || fail "redis5-2 same pid after restart"
    [[ $("$C" port redis5 2) == "$p2" ]] || fail "redis5-2 port changed"
    tm "$C" pause redis5 2
    chk_tcp_redis "$h2" && fail "redis5-2 answers while paused"
    tm "$C" resume redis5 2
    chk_tcp_redis "$h2" || fail "redis5-2 does not answer after resume"
    tm "$C" kill redis5 2
    chk_tcp_redis "$h2" && fail "redis5-2 answers after kill"
    tm "$C" restart redis5 2
    chk_tcp_redis "$h2" || fail "redis5-2 does not answer after restart"
}

ctl_zk3() { # node 3 (keeps its data: the node count must match the others')
    local C=$DLOCK_TEST_SERVERCTL p3 m
    p3=$("$C" port zk3 3)
    [[ $DLOCK_TEST_ZK3_URI == *"127.0.0.1:$p3"* ]] || fail "ctl port zk3 3 = $p3 not in uri"
    tm "$C" stop zk3 3
    chk_zk_mode "$p3" >/dev/null && fail "zk3-3 answers after stop"
    # The other two still form a quorum (after a re-election if node 3 led).
    local i p1
    p1=$("$C" port zk3 1)
    for ((i = 0; i < 200; i++)); do
        chk_zk_mode "$p1" >/dev/null && break
        sleep 0.05
    done
    chk_zk_mode "$p1" >/dev/null || fail "zk3-1 not serving 10 s after node 3 stopped"
    tm "$C" start zk3 3
    m=$(chk_zk_mode "$p3") || fail "zk3-3 no mode after start"
    [[ $m == leader || $m == follower ]] || fail "zk3-3 mode $m"
    [[ $(chk_zk_nodecount "$p3") == $(chk_zk_nodecount "$("$C" port zk3 1)") ]] || fail "zk3-3 node count differs"
    tm "$C" pause zk3 3
    chk_zk_mode "$p3" >/dev/null && fail "zk3-3 answers while paused"
    tm "$C" resume zk3 3
    chk_zk_mode "$p3" >/dev/null || fail "zk3-3 does not answer after resume"
    # Pause then stop (stop must wake it up to act on SIGTERM).
    "$C" pause zk3 3
    tm "$C" stop zk3 3
    tm "$C" start zk3 3
}

# pg and mysql: crash and come back with the same data
ctl_pg() {
    tm "$DLOCK_TEST_SERVERCTL" kill pg
    tm "$DLOCK_TEST_SERVERCTL" start pg
    check_pg
}

ctl_mysql() {
    tm "$DLOCK_TEST_SERVERCTL" restart mysql
    check_mysql
}

ctl_etcd() { # the data outlives a stop and a crash
    local C=$DLOCK_TEST_SERVERCTL h
    h=127.0.0.1:$("$C" port etcd)
    [[ $DLOCK_TEST_ETCD_URI == "etcd://$h" ]] || fail "ctl port etcd = $h, uri $DLOCK_TEST_ETCD_URI"
    ectl --endpoints "http://$h" put kept yes >/dev/null
    tm "$C" stop etcd
    chk_etcd_health "$h" && fail "etcd answers after stop"
    "$C" pid etcd 2>/dev/null && fail "ctl pid succeeded on a stopped etcd"
    tm "$C" start etcd
    [[ $(ectl --endpoints "http://$h" get --print-value-only kept) == yes ]] || fail "etcd lost its data on stop/start"
    tm "$C" pause etcd
    chk_etcd_health "$h" && fail "etcd answers while paused"
    tm "$C" resume etcd
    chk_etcd_health "$h" || fail "etcd does not answer after resume"
    tm "$C" kill etcd
    chk_etcd_health "$h" && fail "etcd answers after kill"
    tm "$C" start etcd
    [[ $(ectl --endpoints "http://$h" get --print-value-only kept) == yes ]] || fail "etcd lost its data on kill/start"
    tm "$C" restart etcd
    check_etcd
}

# Wait (10 s at most) until etcd3 has one leader among the running members.
etcd3_leader() { # -> its index
    local i l
    for ((i = 0; i < 100; i++)); do
        l=$(chk_etcd_leaders "$DLOCK_TEST_ETCD3_ENDPOINTS")
        [[ -z $l || $l == *$'\n'* ]] || { echo "$l"; return 0; }
        sleep 0.1
    done
    fail "etcd3: no single leader within 10 s (leaders: ${l:-none})"
}

ctl_etcd3() {
    local C=$DLOCK_TEST_SERVERCTL h3 l f1
    h3=127.0.0.1:$("$C" port etcd3 3)
    [[ $DLOCK_TEST_ETCD3_URI == *"$h3"* ]] || fail "ctl port etcd3 3 = $h3 not in uri"
    # Node 3 misses a write while stopped and has it once it is back: it
    # rejoined its cluster from its data dir.
    tm "$C" stop etcd3 3
    chk_etcd_health "$h3" && fail "etcd3-3 answers after stop"
    etcd3_leader >/dev/null
    ectl --endpoints "$DLOCK_TEST_ETCD3_ENDPOINTS" put missed-by-3 yes >/dev/null || fail "etcd3 put without node 3"
    tm "$C" start etcd3 3
    [[ $(ectl --endpoints "http://$h3" get --print-value-only missed-by-3) == yes ]] ||
        fail "etcd3-3 did not catch up after start"
    tm "$C" pause etcd3 3
    chk_etcd_health "$h3" && fail "etcd3-3 answers while paused"
    tm "$C" resume etcd3 3
    chk_etcd_health "$h3" || fail "etcd3-3 does not answer after resume"
    tm "$C" kill etcd3 3
    chk_etcd_health "$h3" && fail "etcd3-3 answers after kill"
    tm "$C" start etcd3 3
    "$C" pause etcd3 3
    tm "$C" stop etcd3 3
    tm "$C" start etcd3 3
    # The leader stops: it hands leadership over, the other two go on.
    l=$(etcd3_leader)
    tm "$C" stop etcd3 "$l"
    [[ $(etcd3_leader) != "$l" ]] || fail "etcd3: no new leader after leader $l stopped"
    # Then a second member: no quorum left. Starting it again alone
    # cannot succeed (no quorum), so: start-nowait, start the other, wait.
    f1=$(( l % 3 + 1 ))
    tm "$C" stop etcd3 "$f1"
    tm "$C" start-nowait etcd3 "$l"
    tm "$C" start etcd3 "$f1"
    tm "$C" wait etcd3 "$l"
    check_etcd3
}

ctl_checks() { # KIND...
    set -euo pipefail
    local k C=$DLOCK_TEST_SERVERCTL
    for k in "$@"; do "check_$k"; done
    for k in "$@"; do
        if declare -F "ctl_$k" >/dev/null; then
            echo "  -- $k"
            "ctl_$k"
        fi
    done
    # Usage errors and messages
    "$C" stop "$1" 9 2>/dev/null && fail "ctl accepted index 9 for $1"
    "$C" frob "$1" 2>/dev/null && fail "ctl accepted action frob"
    [[ -z $("$C" start "$1" 2>&1) ]] || fail "ctl start is not quiet"
    record_pids "$WORK/pids.all"
}
export -f tm ctl_redis5 ctl_zk3 ctl_pg ctl_mysql ctl_etcd etcd3_leader ctl_etcd3 ctl_checks
export WORK=$work

t0=$EPOCHREALTIME
"$W" "${kinds[@]}" -- bash -c 'ctl_checks "$@"' ctl_checks "${kinds[@]}" 2>"$work/err.all" ||
    { cat "$work/err.all" >&2; fail "all-kinds run"; }
check_left "$work/pids.all"
all_start=$(sed -n 's/^with-servers: all of .* ready in \([0-9.]*\)s .*/\1/p' "$work/err.all")
all_stop=$(sed -n 's/^with-servers: stopped .* in \([0-9.]*\)s$/\1/p' "$work/err.all")
ok "${kinds[*]} together + ctl.sh stop/start/pause/resume/kill/restart (wall $(since "$t0")s)"

# ------------------------------------------------- 3. exit status, signals
if ((${#kinds[@]} < ${#all_kinds[@]})); then
    ok "with-servers.sh's own checks (exit status, signals, nesting) skipped: kinds were chosen"
else
    rc=0
    "$W" redis -- sh -c 'exit 7' 2>/dev/null || rc=$?
    ((rc == 7)) || fail "exit status not passed through ($rc)"
    ok "CMD exit status passed through"

    for sig in TERM INT; do
        rm -f "$work/pids.sig"
        # "( exec ... ) &": a plain "cmd &" would start it with SIGINT ignored,
        # which a shell cannot trap.
        (exec "$W" redis pg -- bash -c "record_pids '$work/pids.sig'; exec sleep 60" 2>/dev/null) &
        wpid=$!
        for _ in $(seq 200); do [[ -s $work/pids.sig.dir ]] && break; sleep 0.05; done
        [[ -s $work/pids.sig.dir ]] || fail "signal test: servers did not start"
        sleep 0.2
        t0=$EPOCHREALTIME
        kill -s "$sig" "$wpid"
        rc=0
        wait "$wpid" || rc=$?
        expect=$((128 + $(kill -l "$sig")))
        ((rc == expect)) || fail "SIG$sig: exit status $rc, expected $expect"
        check_left "$work/pids.sig"
        mv "$work/pids.sig.dir" "$work/pids.sig$sig.dir"
        ok "SIG$sig to with-servers.sh: cleaned up in $(since "$t0")s, status $rc"
    done

    # ------------------------------------------------- 4. nesting and --fresh
    nested() {
        set -euo pipefail
        local outer_redis=$1 outer_run=$2
        [[ $DLOCK_TEST_REDIS_URI == "$outer_redis" ]] || fail "inner run did not reuse redis"
        [[ $DLOCK_TEST_RUN_DIR != "$outer_run" ]] || fail "inner run has no own run dir"
        # ctl.sh reaches both the reused (outer) and the own server.
        [[ $("$DLOCK_TEST_SERVERCTL" port redis) == "${outer_redis##*:}" ]] || fail "ctl on reused redis"
        "$DLOCK_TEST_SERVERCTL" pid pg >/dev/null || fail "ctl on inner pg"
        check_pg
    }
    export -f nested
    # shellcheck disable=SC2016 # expanded by the inner bash
    "$W" redis -- bash -c '
        "$0" redis pg -- bash -c "nested \"$DLOCK_TEST_REDIS_URI\" \"$DLOCK_TEST_RUN_DIR\"" 2>/dev/null || exit 1
        # The outer redis survived the inner run.
        check_redis
        # --fresh starts another one.
        "$0" --fresh redis -- bash -c "[[ \$DLOCK_TEST_REDIS_URI != \"$DLOCK_TEST_REDIS_URI\" ]] && check_redis" 2>/dev/null || exit 2
    ' "$W" 2>/dev/null || fail "nesting ($?)"
    ok "nested run reuses the outer server; --fresh starts a new one"
fi

# ------------------------------------------------- 5. nothing left at all
# No process may still mention one of this test's run dirs (other runs on
# the machine may legitimately be going on, so look only for ours).
for f in "$work"/pids.*.dir; do
    d=$(<"$f")
    # Server command lines name their run dir (redis rewrites its title, but
    # its PID was checked above). pgrep is procps, absent from minimal images.
    command -v pgrep >/dev/null || break
    if pgrep -f -- "$d" >/dev/null; then
        fail "processes from $d still running: $(pgrep -af -- "$d")"
    fi
done
ok "no process from any of this test's run dirs is left"

echo
echo "kind     start(s)  stop(s)   (as reported by with-servers.sh, each kind alone)"
for kind in "${kinds[@]}"; do
    printf '%-8s %-9s %-9s\n' "$kind" "${start_t[$kind]}" "${stop_t[$kind]}"
done
printf '%-8s %-9s %-9s\n' "all" "$all_start" "$all_stop"
echo "selftest: PASS"
