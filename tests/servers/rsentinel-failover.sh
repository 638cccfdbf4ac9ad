#!/usr/bin/env bash
# rsentinel-failover.sh STEP: the steps of `dlock scenario failover` on the
# rsentinel servers of the current with-servers.sh run (its
# --failover-cmd: 'tests/servers/rsentinel-failover.sh $DLOCK_FAILOVER_STEP').
#
#   cut      SIGSTOP the master's replicas, then drop their links on the
#            master (CLIENT KILL TYPE replica): a write from now on exists
#            on the master alone. SIGSTOP alone is not enough, since the
#            kernel still takes a write into a stopped replica's socket and
#            the replica reads it when resumed; stopped, they cannot
#            reconnect.
#   kill     SIGKILL the master
#   heal     SIGCONT the replicas (the sentinels then promote one)
#   restore  start the killed master again (the sentinels make it a replica)
#
# The master is the one the sentinels name; the nodes cut are remembered in
# $DLOCK_TEST_RUN_DIR/rsentinel-failover.state between steps.
set -euo pipefail
CTL=${DLOCK_TEST_SERVERCTL:?run under with-servers.sh rsentinel}
state=${DLOCK_TEST_RUN_DIR:?}/rsentinel-failover.state
step=${1:?usage: rsentinel-failover.sh cut|kill|heal|restore}

master_index() {
    local sport mport i
    sport=$("$CTL" port rsentinel 4)
    mport=$(redis-cli -p "$sport" SENTINEL get-master-addr-by-name dlock | sed -n 2p)
    for i in 1 2 3; do
        [[ $("$CTL" port rsentinel "$i") != "$mport" ]] || { echo "$i"; return; }
    done
    echo "rsentinel-failover.sh: no data node on the master's port $mport" >&2
    return 1
}

case $step in
cut)
    m=$(master_index)
    reps=()
    for i in 1 2 3; do
        ((i != m)) && "$CTL" pid rsentinel "$i" >/dev/null 2>&1 && reps+=("$i")
    done
    for i in "${reps[@]}"; do "$CTL" pause rsentinel "$i"; done
    redis-cli -p "$("$CTL" port rsentinel "$m")" CLIENT KILL TYPE replica >/dev/null
    echo "$m ${reps[*]}" >"$state"
    echo "master rsentinel-$m; replicas ${reps[*]/#/rsentinel-} SIGSTOPped, their links dropped (CLIENT KILL TYPE replica)"
    ;;
kill)
    read -r m _ <"$state"
    "$CTL" kill rsentinel "$m"
    echo "master rsentinel-$m SIGKILLed"
    ;;
heal)
    read -r m reps <"$state"
    for i in $reps; do "$CTL" resume rsentinel "$i"; done
    echo "replicas resumed"
    ;;
restore)
    read -r m _ <"$state"
    "$CTL" start rsentinel "$m"
    echo "rsentinel-$m started again"
    ;;
*)
    echo "rsentinel-failover.sh: unknown step '$step'" >&2
    exit 2
    ;;
esac
