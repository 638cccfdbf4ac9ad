#!/usr/bin/env bash
# test_cli.sh URI: the `dlock` command's contract on one backend. Exit
# codes (flock(1)'s habits and sysexits), the child's environment, conflicts
# and timeouts, bad input, an unreachable service, and a lock lost while the
# command runs (SIGTERM to the command, exit 75). `dlock exec`'s command
# never outlives it: checked from what the processes themselves show in
# /proc (alive or not, descriptors, terminal) when dlock, its whole job or
# its guard is SIGKILLed, when dlock gets SIGTERM, when the lock is lost,
# and when the command exits leaving children behind; a signal while
# waiting gives up the wait (128+N, nothing held).
#
# meson passes the URI (with $VARS expanded from with-servers.sh's exports);
# $DLOCK_TEST_DLOCK is the built command.
set -u

DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
uri_arg=${1:?usage: test_cli.sh URI}
work=$(mktemp -d /tmp/dlock-cli-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# Expand "$VAR" references and the file:// placeholder.
uri=$(eval "printf '%s' \"$uri_arg\"")
uri=${uri//@TMPDIR@/$work/locks}
mkdir "$work/locks" # file:// makes lock files, not their directory
scheme=${uri%%://*}
export DLOCK_URI=$uri

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; }
expect_status() { # name want got
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (exit $3, want $2)"; fi
}
# Wait until a file exists (a gate the child command creates).
wait_for() {
    local i
    for i in $(seq 1 300); do [ -e "$1" ] && return 0; sleep 0.1; done
    return 1
}
name() { echo "cli-$1-$$"; }
# Is PID a live process? A zombie is dead: it runs nothing.
alive() {
    local s
    s=$(cat /proc/"$1"/stat 2>/dev/null) || return 1
    s=${s##*) }
    [ -n "$s" ] && [ "${s%% *}" != Z ] && [ "${s%% *}" != X ]
}
# Wait up to 10 s until none of the PIDs is alive.
all_gone() {
    local i p live
    for i in $(seq 1 100); do
        live=0
        for p in "$@"; do alive "$p" && live=1; done
        [ "$live" = 0 ] && return 0
        sleep 0.1
    done
    return 1
}
# The processes among PIDs that are alive, for messages.
which_alive() {
    local p out=""
    for p in "$@"; do alive "$p" && out+="$p "; done
    echo "${out:-none}"
}
children_of() { cat /proc/"$1"/task/"$1"/children 2>/dev/null; }
# Wait until PID has N children; print them.
wait_children() { # pid n
    local i c
    for i in $(seq 1 100); do
        c=$(children_of "$1")
        # shellcheck disable=SC2086
        [ "$(wc -w <<<"$c")" -ge "$2" ] && { echo $c; return 0; }
        sleep 0.05
    done
    return 1
}
# Run inside a command: print those of the PIDs (arguments) that are alive.
cat >"$work/alive.sh" <<'SH'
for p; do
    s=$(cat /proc/$p/stat 2>/dev/null) || continue
    s=${s##*") "}
    case ${s%% *} in Z | X | '') ;; *) echo "$p" ;; esac
done
SH

# ---- environment and exit status -------------------------------------------
out=$("$DLOCK" exec "$(name env)" -- sh -c 'echo "$DLOCK_NAME|$DLOCK_FENCE|$DLOCK_OWNER"')
expect_status "exec runs the command" 0 $?
IFS='|' read -r n f o <<<"$out"
[ "$n" = "$(name env)" ] && ok "DLOCK_NAME is the lock name" || not_ok "DLOCK_NAME ($n)"
[[ "$f" =~ ^[0-9]+$ ]] && ok "DLOCK_FENCE is a number ($f)" || not_ok "DLOCK_FENCE ($f)"
[[ "$o" == *:* ]] && ok "DLOCK_OWNER is uuid:serial" || not_ok "DLOCK_OWNER ($o)"

"$DLOCK" exec "$(name status)" -- sh -c 'exit 7'
expect_status "command's exit status passes through" 7 $?
"$DLOCK" exec "$(name sig)" -- sh -c 'kill -9 $$'
expect_status "killed command gives 128+signal" 137 $?
"$DLOCK" exec "$(name nf)" -- /nonexistent/cmd 2>/dev/null
expect_status "command not found gives 127" 127 $?
printf "#!/bin/sh\n" >"$work/noexec"
"$DLOCK" exec "$(name nx)" -- "$work/noexec" 2>/dev/null
expect_status "command not executable gives 126" 126 $?

# ---- the command never outlives dlock --------------------------------------
# It has no descriptor of dlock's (lock files, server connections, pipes):
# the same ones as a command started without dlock, including one the
# caller passes on purpose.
: >"$work/passed"
want=$(sh -c 'cd /proc/$$/fd && echo *' 7<"$work/passed")
got=$("$DLOCK" exec "$(name fds)" -- sh -c 'cd /proc/$$/fd && echo *' 7<"$work/passed")
[ "$got" = "$want" ] && ok "command has only the caller's descriptors ($got)" ||
    not_ok "command's descriptors: $got, want $want"

# dlock SIGKILLed: its command, a background child and one in a session of
# its own are all gone in a bounded time, and the next holder's command,
# which records which of them it sees alive, sees none: the lock is not
# free before they are dead.
k9=$(name kill9)
"$DLOCK" exec --lease 2s "$k9" -- sh -c "echo \$\$ >$work/k9.pids; \
    sleep 30 & echo \$! >>$work/k9.pids; \
    setsid sleep 30 & echo \$! >>$work/k9.pids; \
    touch $work/k9.gate; sleep 30; wait" &
holder=$!
pids+=("$holder")
if wait_for "$work/k9.gate" && k9sh=$(head -1 "$work/k9.pids") &&
    wait_children "$k9sh" 3 >/dev/null; then
    # The command's shell and its three sleeps, on one line.
    # shellcheck disable=SC2046
    k9all=$(echo "$k9sh" $(children_of "$k9sh"))
    killed=$(date +%s%N)
    kill -9 "$holder"
    wait "$holder" 2>/dev/null
    "$DLOCK" exec --timeout 30s "$k9" -- sh -c \
        "date +%s%N >$work/k9.start; sh $work/alive.sh $k9all >$work/k9.seen" &
    second=$!
    pids+=("$second")
    # shellcheck disable=SC2086
    all_gone $k9all && ok "SIGKILL of dlock: its command's processes die" ||
        not_ok "SIGKILL of dlock: still alive: $(which_alive $k9all)"
    wait "$second"
    expect_status "the next holder runs after a SIGKILLed one" 0 $?
    if [ -s "$work/k9.start" ] && [ ! -s "$work/k9.seen" ]; then
        ms=$((($(cat "$work/k9.start") - killed) / 1000000))
        ok "the next holder's command, $ms ms after the SIGKILL, saw none of the first's"
    else
        not_ok "the next holder's command saw alive: $(echo $(cat "$work/k9.seen" 2>/dev/null))"
    fi
else
    not_ok "SIGKILL test: the command did not start"
fi

# The command exits, leaving children behind (one in its group, one that
# ignores SIGTERM, one in a session of its own): dlock returns only after
# they are dead, with the command's exit status.
"$DLOCK" exec --kill-after 500ms "$(name left)" -- sh -c "\
    sleep 30 & echo \$! >$work/left.pids; \
    (trap '' TERM; exec sleep 30) & echo \$! >>$work/left.pids; \
    setsid sleep 30 & echo \$! >>$work/left.pids; \
    sleep 0.2; exit 3"
expect_status "command's status with children left behind" 3 $?
# shellcheck disable=SC2046
left=$(which_alive $(cat "$work/left.pids"))
[ "$left" = none ] && ok "what the command left running is gone when dlock returns" ||
    not_ok "left running after dlock returned: $left"

# The guard process between dlock and the command is SIGKILLed: the command
# and its children die, and dlock exits 70.
"$DLOCK" exec "$(name guard)" -- sh -c "echo \$\$ >$work/g.pids; \
    sleep 30 & echo \$! >>$work/g.pids; touch $work/g.gate; sleep 30; wait" \
    2>"$work/g.err" &
holder=$!
pids+=("$holder")
if wait_for "$work/g.gate" && guard=$(wait_children "$holder" 1); then
    gsh=$(head -1 "$work/g.pids")
    [ "$guard" != "$gsh" ] && ok "dlock's child is a guard, not the command" ||
        not_ok "dlock's child is the command itself"
    kill -9 "$guard"
    wait "$holder"
    expect_status "guard killed: dlock exits 70" 70 $?
    # shellcheck disable=SC2046
    all_gone $(cat "$work/g.pids") && ok "guard killed: the command's processes die" ||
        not_ok "guard killed: still alive: $(which_alive $(cat "$work/g.pids"))"
    grep -q guard "$work/g.err" && ok "guard killed: says so" ||
        not_ok "guard message: $(cat "$work/g.err")"
else
    not_ok "guard test: the command did not start"
fi

# SIGKILL to dlock's whole job (a supervisor, timeout -s KILL): the guard
# is not in it, and kills what the command started in a session of its own.
setsid "$DLOCK" exec --lease 2s "$(name job9)" -- sh -c "\
    setsid sleep 30 & echo \$! >$work/j9.pids; touch $work/j9.gate; sleep 30" &
holder=$!
pids+=("$holder")
if wait_for "$work/j9.gate"; then
    j9=$(cat "$work/j9.pids")
    kill -9 -- "-$holder"
    wait "$holder" 2>/dev/null
    "$DLOCK" exec --timeout 30s "$(name job9)" -- sh -c \
        "sh $work/alive.sh $j9 >$work/j9.seen"
    expect_status "the next holder runs after a SIGKILLed job" 0 $?
    [ -e "$work/j9.seen" ] && [ ! -s "$work/j9.seen" ] &&
        ok "SIGKILL of dlock's job: what the command started died first" ||
        not_ok "SIGKILL of dlock's job: the next holder saw: $(cat "$work/j9.seen" 2>/dev/null)"
else
    not_ok "job SIGKILL test: the command did not start"
fi

# ---- on a terminal (script(1) gives one) ------------------------------------
# The command stays in dlock's process group, as under flock(1): it and
# dlock's pipeline neighbours share the terminal, Ctrl-C reaches it, and
# where no shell could resume a stopped job (no job control here) Ctrl-Z is
# dropped, as without dlock.
cat >"$work/fg.sh" <<'SH'
set -- $(sed 's/.*) //' /proc/$$/stat)
[ "$3" = "$6" ] && echo fg || echo bg
SH
type_when() { # gate text: once the gate exists, type text on the terminal,
    # then keep the terminal's input open until gate.done exists (script(1)
    # may end the session when its input ends)
    local i
    for i in $(seq 1 100); do [ -e "$1" ] && break; sleep 0.1; done
    printf '%b' "$2"
    for i in $(seq 1 200); do [ -e "$1.done" ] && break; sleep 0.1; done
}
on_tty() { # shell command line: run it on a terminal, print its output
    # script(1) runs the line with $SHELL: pin it, so that the test does not
    # depend on the login shell of whoever runs it (bash and dash differ below)
    SHELL=/bin/sh timeout 30 script -qec "$1" /dev/null | tr -d '\r'
}
if command -v script >/dev/null; then
    fg="sh $work/fg.sh"
    out=$(on_tty "$DLOCK exec $(name tty) -- sh -c '$fg >$work/tty.k; sleep 0.5' |
        sh -c 'sleep 0.2; $fg'; $fg" </dev/null)
    out="$(cat "$work/tty.k" 2>/dev/null) $(echo $out)"
    [ "$out" = "fg fg fg" ] &&
        ok "terminal: command, its pipeline neighbour, the shell after: foreground" ||
        not_ok "terminal: foreground of command, neighbour, shell after: $out"
    t0=$SECONDS
    # Without job control the shell that runs dlock shares its process group
    # and gets the SIGINT too; a non-interactive dash dies of it before it can
    # report dlock's status (bash waits and looks). The trap keeps the shell
    # alive; exec resets a caught signal, so dlock and the command see the
    # default SIGINT, as under an interactive shell.
    out=$(type_when "$work/tty.gate1" '\003' | on_tty "trap : INT; $DLOCK exec $(name tty) -- sh -c \
        'setsid sleep 30 & echo \$! >$work/tty.pids; touch $work/tty.gate1; sleep 30'
        echo dlock=\$?; touch $work/tty.gate1.done")
    [[ $out == *dlock=130* ]] && ok "terminal: Ctrl-C ends the command (130)" ||
        not_ok "terminal: Ctrl-C: after $((SECONDS - t0)) s: $out"
    alive "$(cat "$work/tty.pids")" &&
        not_ok "terminal: Ctrl-C: what the command started lives on" ||
        ok "terminal: Ctrl-C: what the command started is gone"
    out=$(type_when "$work/tty.gate2" '\032' | on_tty "$DLOCK exec $(name tty) -- sh -c \
        'touch $work/tty.gate2; sleep 1; echo finished'; echo dlock=\$?
        touch $work/tty.gate2.done")
    [[ $out == *finished*dlock=0* ]] && ok "terminal: Ctrl-Z without job control is dropped" ||
        not_ok "terminal: Ctrl-Z without job control: $out"
    # a busy lock is said to be waited for, on a terminal only
    "$DLOCK" exec "$(name ttyw)" -- sh -c "touch $work/ttyw.gate; sleep 1" &
    tw=$!
    pids+=("$tw")
    wait_for "$work/ttyw.gate" || not_ok "terminal wait: holder did not start"
    out=$(on_tty "$DLOCK exec --timeout 20s $(name ttyw) -- echo got" </dev/null)
    [[ $out == *"waiting for $(name ttyw)"*got* ]] &&
        ok "terminal: a busy lock is said to be waited for, then taken" ||
        not_ok "terminal: waiting message: $out"
    wait "$tw"
    "$DLOCK" exec "$(name ttyw)" -- sh -c "touch $work/ttyw.gate2; sleep 1" &
    tw=$!
    pids+=("$tw")
    wait_for "$work/ttyw.gate2" || not_ok "terminal wait: holder did not start"
    "$DLOCK" exec --timeout 20s "$(name ttyw)" -- true 2>"$work/err"
    [ ! -s "$work/err" ] && ok "not on a terminal: the wait is silent" ||
        not_ok "not on a terminal: $(cat "$work/err")"
    wait "$tw"
else
    not_ok "script(1) not found (bsdutils)"
fi

# ---- a signal while waiting: the wait is cancelled, nothing is held ------
# (issue 19). A background job of this script starts with SIGINT ignored,
# which dlock respects: env --default-signal gives the waiter a default one.
wq=$(name waitsig)
"$DLOCK" exec "$wq" -- sh -c "touch $work/wq.gate; while [ ! -e $work/wq.go ]; do sleep 0.05; done" &
wqh=$!
pids+=("$wqh")
if wait_for "$work/wq.gate"; then
    for sig in INT TERM; do
        env --default-signal=INT "$DLOCK" exec "$wq" -- true 2>"$work/wq.err" &
        w=$!
        pids+=("$w")
        sleep 0.5
        t0=$(date +%s%N)
        kill -"$sig" "$w"
        wait "$w"
        st=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        want=$((128 + $(kill -l "$sig")))
        [ "$st" = "$want" ] && [ "$ms" -lt 1000 ] &&
            grep -q "nothing held" "$work/wq.err" &&
            ok "SIG$sig while waiting: exit $want after $ms ms, nothing held" ||
            not_ok "SIG$sig while waiting: exit $st after $ms ms: $(cat "$work/wq.err")"
    done
    touch "$work/wq.go"
    wait "$wqh"
    "$DLOCK" exec --timeout 0 "$wq" -- true
    expect_status "after the cancelled waits the lock is free at once" 0 $?
else
    not_ok "wait-signal holder did not start"
fi

# ---- conflicts -------------------------------------------------------------
held=$(name held)
"$DLOCK" exec "$held" -- \
    sh -c "sleep 30 & echo \$! >$work/held.bg; touch $work/gate; exec sleep 30" &
holder=$!
pids+=("$holder")
wait_for "$work/gate" || not_ok "holder did not start"
"$DLOCK" exec --timeout 0 "$held" -- true 2>"$work/err"
expect_status "busy with --timeout 0 exits 1" 1 $?
grep -q . "$work/err" && ok "conflict says why on stderr" || not_ok "conflict message"
"$DLOCK" exec -q --timeout 0 "$held" -- true 2>"$work/err"
[ ! -s "$work/err" ] && ok "--quiet silences the conflict" || not_ok "--quiet"
"$DLOCK" exec --timeout 0 --conflict-exit-code 9 "$held" -- true 2>/dev/null
expect_status "--conflict-exit-code 9" 9 $?
start=$(date +%s%N)
"$DLOCK" exec --timeout 300ms "$held" -- true 2>/dev/null
st=$?
took=$((($(date +%s%N) - start) / 1000000))
expect_status "timed out exits 1" 1 "$st"
[ "$took" -ge 280 ] && ok "waited the timeout (${took} ms)" || not_ok "returned early (${took} ms)"
# inspect --json on a held lock: an object, held true (or null where the
# backend cannot tell), and the exit status says held as the text form does
"$DLOCK" inspect --json "$held" >"$work/insp.json" 2>"$work/err"
st=$?
out=$(python3 - "$work/insp.json" "$held" "$st" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["name"] == sys.argv[2], d
assert set(d) == {"name", "held", "owner", "fence", "remaining_ms", "waiters"}, d
assert d["held"] in (True, None), d
assert (sys.argv[3] == "1") == (d["held"] is True), (sys.argv[3], d)
print("ok")
PY
)
[ "$out" = ok ] && ok "inspect --json of a held lock" ||
    not_ok "inspect --json: $out $(cat "$work/insp.json" "$work/err")"
# inspect names the holder by the DLOCK_OWNER its command sees, in text and
# JSON, on every backend and mode that can inspect: one owner format.
ow=$(name owner)
"$DLOCK" exec "$ow" -- sh -c "echo \$DLOCK_OWNER >$work/owner.tmp; mv $work/owner.tmp $work/owner; sleep 3" &
pids+=($!)
if wait_for "$work/owner"; then
    want=$(cat "$work/owner")
    "$DLOCK" inspect "$ow" >"$work/insp.txt" 2>"$work/err"
    st=$?
    got=$(sed -n 's/^owner: *//p' "$work/insp.txt")
    jgot=$("$DLOCK" inspect --json "$ow" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["owner"])')
    if [ "$st" = 64 ] && grep -q "not supported" "$work/err"; then
        ok "inspect: # SKIP this mode cannot inspect ($(head -c 80 "$work/err"))"
    elif [ "$got" = "$want" ] && [ "$jgot" = "$want" ]; then
        ok "inspect: the owner is the holder's DLOCK_OWNER ($want), text and JSON"
    else
        not_ok "inspect owner: '$got' (JSON '$jgot'), the holder's DLOCK_OWNER is '$want'"
    fi
else
    not_ok "inspect owner: the holder did not start"
fi
# flock(1)'s options, with flock's meanings and exit codes
"$DLOCK" exec -n "$held" -- true 2>/dev/null
expect_status "flock -n: busy exits 1" 1 $?
"$DLOCK" exec --nb -E 9 "$held" -- true 2>/dev/null
expect_status "flock --nb -E 9: busy exits 9" 9 $?
start=$(date +%s%N)
"$DLOCK" exec -w 0.3 "$held" -- true 2>/dev/null
st=$?
took=$((($(date +%s%N) - start) / 1000000))
expect_status "flock -w 0.3 (seconds): timed out exits 1" 1 "$st"
[ "$took" -ge 280 ] && ok "flock -w 0.3 waited (${took} ms)" ||
    not_ok "flock -w 0.3 returned early (${took} ms)"
"$DLOCK" exec -q --wait 0 "$held" -c 'echo ran' >"$work/out" 2>"$work/err"
expect_status "flock --wait 0 -c: busy exits 1" 1 $?
[ ! -s "$work/out" ] && [ ! -s "$work/err" ] &&
    ok "flock -q -c: the line did not run, nothing said" || not_ok "-q -c: $(cat "$work/out" "$work/err")"
# --fair: runs only on a mode that grants in order of arrival, as dlock
# info says; elsewhere a usage error that names the fair modes, if any.
"$DLOCK" exec --fair "$(name fair)" -- true 2>"$work/err"
st=$?
if "$DLOCK" info | grep -q '^ *\*.*' && "$DLOCK" info | grep -A1 '^ *\*' | grep -q '\bfair\b'; then
    expect_status "--fair on a fair mode runs the command" 0 "$st"
else
    expect_status "--fair on a mode that is not fair: usage, exit 64" 64 "$st"
    grep -q "does not grant in order of arrival" "$work/err" &&
        ok "--fair: the message says why" || not_ok "--fair message: $(cat "$work/err")"
fi
# --permits N: one of N; two at once on a mode with permits (dlock info
# says yes to them), the third busy; elsewhere refused, naming permits.
sem=$(name sem)
if "$DLOCK" info | grep -q '^ *yes *permits '; then
    "$DLOCK" exec --permits 2 "$sem" -- sleep 3 &
    p1=$!
    "$DLOCK" exec --permits 2 "$sem" -- sleep 3 &
    p2=$!
    sleep 1
    "$DLOCK" exec -n --permits 2 "$sem" -- true 2>"$work/err"
    expect_status "--permits 2 with two holders: the third is busy" 1 $?
    grep -q "no permit free" "$work/err" && ok "--permits: busy says no permit free" ||
        not_ok "--permits busy message: $(cat "$work/err")"
    wait "$p1"
    expect_status "--permits 2: the first holder ran" 0 $?
    wait "$p2"
    expect_status "--permits 2: the second holder ran beside it" 0 $?
else
    "$DLOCK" exec --permits 2 "$sem" -- true 2>"$work/err"
    st=$?
    [ "$st" -ne 0 ] && grep -q "permits" "$work/err" &&
        ok "--permits on a mode without permits: refused ($st), naming permits" ||
        not_ok "--permits without permits: exit $st, $(cat "$work/err")"
fi
"$DLOCK" exec --fair --permits 2 "$sem" -- true 2>/dev/null
expect_status "--fair --permits: usage, exit 64" 64 $?
# --also: all the locks or none, in one order whatever the command line's
"$DLOCK" exec -n --also "$held" "$(name also1)" -- true 2>"$work/err"
expect_status "--also with one busy: conflict, exit 1" 1 $?
grep -q "$held" "$work/err" && ok "--also: the message names the busy lock" ||
    not_ok "--also message: $(cat "$work/err")"
"$DLOCK" exec -n "$(name also1)" -- true
expect_status "--also: the free lock was not kept" 0 $?
"$DLOCK" exec --also "$(name also1)" "$(name also1)" -- true 2>"$work/err"
expect_status "--also with NAME twice: usage, exit 64" 64 $?
out=$("$DLOCK" exec --also "$(name also2)" "$(name also1)" -- sh -c 'echo "$DLOCK_FENCES"')
set -- $out
[ "$#" = 2 ] && ok "--also: DLOCK_FENCES has both tokens ($out)" ||
    not_ok "--also: DLOCK_FENCES '$out'"
also_run() { # first second: five runs holding both, each a moment
    local i
    for i in 1 2 3 4 5; do
        "$DLOCK" exec --timeout 20s --also "$2" "$1" -- sleep 0.05 || return 1
    done
}
also_run "$(name also1)" "$(name also2)" &
a1=$!
also_run "$(name also2)" "$(name also1)" &
a2=$!
pids+=("$a1" "$a2")
wait "$a1" && wait "$a2" && ok "--also in opposite orders: no deadlock" ||
    not_ok "--also in opposite orders: a run failed (deadlocked until -w?)"
kill -TERM "$holder"
wait "$holder"
expect_status "SIGTERM to dlock reaches the command" 143 $?
all_gone "$(cat "$work/held.bg")" && ok "SIGTERM reaches what the command started" ||
    not_ok "SIGTERM: the command's background child lives on"
"$DLOCK" exec --timeout 5s "$held" -- true
expect_status "lock is free after the holder ends" 0 $?

# ---- flock(1)'s command line --------------------------------------------------
out=$("$DLOCK" exec "$(name flk)" -c 'echo "line $DLOCK_NAME" | tr a-z A-Z')
[ "$out" = "LINE $(name flk | tr a-z A-Z)" ] && ok "flock NAME -c LINE runs LINE in a shell" ||
    not_ok "NAME -c LINE: $out"
out=$("$DLOCK" exec --command 'exit 7' "$(name flk)"; echo "st=$?")
[ "$out" = "st=7" ] && ok "flock --command LINE before NAME; its status passes through" ||
    not_ok "--command: $out"
"$DLOCK" exec -x -o "$(name flk)" -- true
expect_status "flock -x -o accepted" 0 $?
"$DLOCK" exec -e --timeout 5 "$(name flk)" -- true
expect_status "flock -e, --timeout 5 (seconds) accepted" 0 $?
"$DLOCK" exec --verbose "$(name flk)" -- true 2>"$work/err"
grep -q "getting lock took" "$work/err" && grep -q "executing true" "$work/err" &&
    ok "flock --verbose says what it took and what runs" || not_ok "--verbose: $(cat "$work/err")"

# ---- bad input: 64, one line naming the problem ----------------------------
check_usage() { # description args...
    local d=$1
    shift
    "$DLOCK" "$@" 2>"$work/err" >/dev/null
    local st=$?
    local lines
    lines=$(wc -l <"$work/err")
    if [ "$st" = 64 ] && [ "$lines" = 1 ]; then
        ok "$d: 64 ($(head -c 80 "$work/err"))"
    else
        not_ok "$d: exit $st, $lines lines: $(head -c 200 "$work/err")"
    fi
}
check_usage "unknown option" exec --bogus x -- true
check_usage "bad duration" exec --timeout 5x x -- true
check_usage "duration without unit" exec --lease 5 x -- true
check_usage "missing command" exec x
check_usage "missing name" exec
check_usage "bad exit code" exec --conflict-exit-code 300 x -- true
check_usage "bad URI port" exec --uri "$scheme://127.0.0.1:0" x -- true
check_usage "unknown scheme" exec --uri "nosuch://h" x -- true
check_usage "unknown URI parameter" exec --uri "$uri$( [[ $uri == *\?* ]] && echo '&' || echo '?')bogus=1" x -- true
check_usage "empty name" exec "" -- true
check_usage "unknown command" nosuchcommand
check_usage "exec: --timeout without a value" exec --timeout
check_usage "exec: -w neither seconds nor a duration" exec -w 1e9 x -- true
check_usage "exec: -w too long" exec -w 99999999 x -- true
check_usage "exec: flock's -u refused" exec -u x -- true
check_usage "exec: flock's -F refused" exec -F x -- true
check_usage "exec: -c and a COMMAND" exec x -c 'true' false
check_usage "exec: -c without a value" exec x -c
check_usage "exec: empty --uri" exec --uri "" x -- true
check_usage "exec: --uri twice" exec --uri "$uri" --uri "$uri" x -- true
check_usage "demo: --uri without a value" demo inventory --uri
check_usage "info: --uri without a value" info --uri
check_usage "info: two URIs" info --uri "$uri" "$uri"
check_usage "info: unknown option" info --bogus
check_usage "inspect: --uri without a value" inspect x --uri
check_usage "inspect: empty --uri" inspect --uri= x
# Redlock needs a majority of at least three nodes: one or two is refused,
# before any connection, saying why (in every build with redis://).
if "$DLOCK" info --json | grep -q '"redis"'; then
    check_usage "one-node redlock:// refused" exec --uri "redlock://127.0.0.1:1" x -- true
    grep -q "at least 3" "$work/err" && ok "one-node Redlock: says it needs 3 nodes" ||
        not_ok "one-node Redlock message: $(cat "$work/err")"
    check_usage "two-node Redlock refused" exec --uri "redis://127.0.0.1:1,127.0.0.1:2?redlock=1" x -- true
fi
grep -q "needs a value" <("$DLOCK" exec --timeout 2>&1) &&
    ok "a missing value is named as such" || not_ok "missing value message"
"$DLOCK" info --uri "$uri" >"$work/info.opt" 2>/dev/null
expect_status "info takes --uri, as every command does" 0 $?
"$DLOCK" exec --uri "$scheme://127.0.0.1:0" x -- true 2>&1 | grep -q port &&
    ok "bad URI message names the port" || not_ok "bad URI message"
grep -q -- "--timeout" <("$DLOCK" exec --timeout 5x x -- true 2>&1) &&
    ok "bad duration message names the option" || not_ok "duration message"
for sub in exec info inspect demo; do
    "$DLOCK" "$sub" --help >/dev/null
    expect_status "$sub --help" 0 $?
done
"$DLOCK" --help | grep -q exec && ok "dlock --help lists exec" || not_ok "dlock --help"

"$DLOCK" info --json >"$work/info.json" 2>"$work/err"
st=$?
out=$(python3 - "$work/info.json" "$scheme" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["connected"] is True and d["backend"] in d["backends"], d
assert sum(m["chosen"] for m in d["modes"]) == 1, d["modes"]
chosen = [m for m in d["modes"] if m["chosen"]][0]
assert chosen["mode"] == d["mode"] and chosen["caps"] == d["caps"], d
print("ok")
PY
)
[ "$st" = 0 ] && [ "$out" = ok ] && ok "info --json: the modes, the chosen one, connected" ||
    not_ok "info --json: exit $st: $out $(cat "$work/err")"

# ---- unreachable service: 69 (file://: a missing directory, 66) -------------
if [ "$scheme" = file ]; then
    down="file:///proc/self/nonexistent/locks" down_st=66
else
    # The same URI with the port of a closed socket on loopback.
    down=$(printf '%s' "$uri" | sed -E 's#@?127\.0\.0\.1:[0-9]+#&#; s#(127\.0\.0\.1):[0-9]+#\1:1#g')
    down_st=69
fi
"$DLOCK" exec --uri "$down" --timeout 2s "$(name down)" -- true 2>"$work/err"
st=$?
expect_status "unreachable service exits $down_st" "$down_st" "$st"
"$DLOCK" info --json --uri "$down" >"$work/down.json" 2>/dev/null
st=$?
out=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["connected"] is False and d["error"] and d["modes"], d; print("ok")' "$work/down.json" 2>&1)
[ "$st" = "$down_st" ] && [ "$out" = ok ] && ok "info --json of a service that is down: modes, not connected, $down_st" ||
    not_ok "info --json down: exit $st: $out"

# ---- file://: the directory must exist (66); no permission for a lock (73) ---
if [ "$scheme" = file ]; then
    "$DLOCK" exec --uri "file://$work/no/such/dir" "$(name nodir)" -- true 2>"$work/err"
    expect_status "file:// directory that does not exist: 66" 66 $?
    grep -q "$work/no/such/dir" "$work/err" && grep -q "does not exist" "$work/err" &&
        ok "missing directory: the message names it" || not_ok "missing directory message: $(cat "$work/err")"
    [ ! -e "$work/no" ] && ok "missing directory: nothing was created" ||
        not_ok "missing directory: dlock created $(find "$work/no" | head -3)"
    # A directory this user cannot create files in: root is not held back
    # by modes, so as root the attempt runs as nobody (setpriv).
    mkdir "$work/ro"
    if [ "$(id -u)" = 0 ]; then
        chmod 0711 "$work"
        as_other=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
    else
        chmod 0555 "$work/ro"
        as_other=()
    fi
    "${as_other[@]}" "$DLOCK" exec --uri "file://$work/ro" "$(name ro)" -- true 2>"$work/err"
    expect_status "file:// lock file not creatable (permission): 73" 73 $?
    grep -q "Permission denied" "$work/err" && ok "no permission: says so ($(head -c 90 "$work/err"))" ||
        not_ok "no permission message: $(cat "$work/err")"
    chmod 0700 "$work"
fi

# ---- file://?group=NAME: users of one group share a lock directory ----------
# As with flock(1) files several users open: two users of a fresh group take
# the same lock by turns, each logging start and end; the log (history, not
# dlock_held()) must show no two holders at once. Needs root for groupadd,
# useradd and setpriv; the group and users are removed afterwards.
group_users=()
group_cleanup() {
    local u
    for u in "${group_users[@]}"; do userdel "$u" 2>/dev/null; done
    [ -n "${grp:-}" ] && groupdel "$grp" 2>/dev/null
}
if [ "$scheme" != file ]; then
    :
elif [ "$(id -u)" != 0 ] || ! command -v groupadd >/dev/null || ! command -v setpriv >/dev/null; then
    echo "ok - # SKIP file:// group=: needs root, groupadd, useradd and setpriv to make a group and two users"
else
    grp="dlkg$$" u1="dlku1$$" u2="dlku2$$"
    trap 'group_cleanup; cleanup' EXIT
    if groupadd "$grp" && useradd -M -N -g "$grp" -s /usr/sbin/nologin "$u1" &&
        group_users+=("$u1") && useradd -M -N -g "$grp" -s /usr/sbin/nologin "$u2" &&
        group_users+=("$u2"); then
        shared="$work/shared"
        mkdir "$shared" && chgrp "$grp" "$shared" && chmod 2770 "$shared"
        chmod 0711 "$work"
        : >"$shared/history" && chmod 0660 "$shared/history"
        guri="file://$shared?group=$grp"
        as() { setpriv --reuid="$1" --regid="$grp" --init-groups -- "${@:2}"; }
        for u in "$u1" "$u2"; do
            (
                for i in 1 2 3 4 5; do
                    as "$u" env DLOCK_URI= "$DLOCK" exec --uri "$guri" --timeout 20s shared-lock -- \
                        sh -c "echo start $u \$DLOCK_FENCE >>$shared/history; sleep 0.1; \
                               echo end $u \$DLOCK_FENCE >>$shared/history" ||
                        echo "fail $u $?" >>"$shared/history"
                done
            ) &
            pids+=($!)
        done
        wait "${pids[@]: -2}"
        out=$(awk '$1 == "fail" { print "failed:", $0; exit }
                   $1 == "start" { if (h != "") { print "overlap at line", NR; exit } h = $2 }
                   $1 == "end" { if (h != $2) { print "bad end at line", NR; exit } h = "" }' \
            "$shared/history" 2>&1)
        starts=$(grep -c '^start' "$shared/history")
        users=$(awk '$1 == "start" { print $2 }' "$shared/history" | sort -u | wc -l)
        [ -z "$out" ] && [ "$starts" = 10 ] && [ "$users" = 2 ] &&
            ok "group=: two users of the group took the lock by turns ($starts grants, none overlapping)" ||
            not_ok "group=: history: $out, $starts grants by $users users: $(head -c 400 "$shared/history")"
        st=$(stat -c '%a %G' "$shared/shared-lock.lock")
        [ "$st" = "660 $grp" ] && ok "group=: the lock file is 0660, group $grp" ||
            not_ok "group=: lock file mode and group: $st"
        chmod o+rx "$shared" # a non-member may look, not join
        setpriv --reuid=nobody --regid=nogroup --clear-groups -- env DLOCK_URI= \
            "$DLOCK" exec --uri "$guri" shared-lock -- true 2>"$work/err"
        expect_status "group=: a user outside the group is refused with 73" 73 $?
        grep -q "not a member" "$work/err" && ok "group=: says the user is not a member" ||
            not_ok "group= non-member message: $(cat "$work/err")"
        chmod 0700 "$shared"
        "$DLOCK" exec --uri "$guri" x -- true 2>"$work/err"
        expect_status "group=: a directory the group cannot write is refused with 73" 73 $?
        chmod 0700 "$work"
    else
        not_ok "group=: could not create group $grp and users"
    fi
    group_cleanup
fi
if [[ "$uri" == *:*@* ]]; then
    pw=$(printf '%s' "$uri" | sed -E 's#^[a-z]+://[^:/@]*:([^@]*)@.*#\1#')
    grep -qF -- "$pw" "$work/err" && not_ok "password leaked in error" ||
        ok "password not in the error"
fi

# ---- refused credentials: 77 (EX_NOPERM) on every backend with a login -------
# The URI with a wrong password (or, where it has none, a user and password
# the server does not know): the server's refusal, named, and exit 77.
case $scheme in
file | zk | zookeeper | etcd | etcds) badpw= ;; # no login to refuse (zk://, etcd:// and etcds:// take no userinfo)
*)
    if [[ "$uri" == *://*:*@* ]]; then
        badpw=$(printf '%s' "$uri" | sed -E 's#^([a-z]+://[^:/@]*):[^@]*@#\1:wrong-pw@#')
    else
        badpw=$(printf '%s' "$uri" | sed -E 's#^([a-z]+://)#\1dlock-nouser:wrong-pw@#')
    fi
    ;;
esac
if [ -n "$badpw" ]; then
    DLOCK_URI= "$DLOCK" exec --uri "$badpw" --timeout 5s "$(name badpw)" -- true 2>"$work/err"
    expect_status "wrong password: exec exits 77" 77 $?
    grep -qiE "password|access denied|WRONGPASS" "$work/err" &&
        ok "wrong password: the message names the refusal ($(head -c 100 "$work/err"))" ||
        not_ok "wrong password message: $(cat "$work/err")"
    DLOCK_URI= "$DLOCK" inspect --uri "$badpw" "$(name badpw)" >/dev/null 2>&1
    expect_status "wrong password: inspect exits 77" 77 $?
fi

# ---- a password kept off the command line --------------------------------------
if [[ "$uri" == *://*:*@* ]]; then
    pw=$(printf '%s' "$uri" | sed -E 's#^[a-z]+://[^:/@]*:([^@]*)@.*#\1#')
    nopw=$(printf '%s' "$uri" | sed -E 's#^([a-z]+://[^:/@]*):[^@]*@#\1@#')
    printf '%s\n' "$pw" >"$work/pw"
    chmod 600 "$work/pw"
    # the command's parent is the guard, the guard's is dlock
    DLOCK_URI= "$DLOCK" exec --uri "$nopw" --password-file "$work/pw" "$(name pw)" -- \
        sh -c 'd=$(sed "s/.*) //" /proc/$PPID/stat | cut -d" " -f2); tr "\0" " " </proc/$d/cmdline' \
        >"$work/pw.out" 2>"$work/err"
    expect_status "--password-file: the lock is taken with it" 0 $?
    grep -q -- "--password-file" "$work/pw.out" && ! grep -qF -- "$pw" "$work/pw.out" &&
        ok "--password-file: not in dlock's /proc/PID/cmdline" ||
        not_ok "--password-file: $(head -c 300 "$work/pw.out") $(cat "$work/err")"
    DLOCK_URI= DLOCK_PASSWORD=$pw "$DLOCK" exec --uri "$nopw" "$(name pw)" -- \
        sh -c 'env' >"$work/pw.out" 2>"$work/err"
    expect_status "DLOCK_PASSWORD: the lock is taken with it" 0 $?
    grep -q DLOCK_PASSWORD "$work/pw.out" && not_ok "DLOCK_PASSWORD reached COMMAND" ||
        ok "DLOCK_PASSWORD: COMMAND does not inherit it"
    DLOCK_URI= "$DLOCK" info --uri "$nopw" --password-file "$work/pw" >/dev/null 2>"$work/err"
    expect_status "info --password-file connects" 0 $?
    DLOCK_URI=$nopw "$DLOCK" inspect --password-file "$work/pw" "$(name pw)" >/dev/null 2>"$work/err"
    expect_status "inspect --password-file with \$DLOCK_URI" 0 $?
    chmod 644 "$work/pw"
    check_usage "--password-file readable by others" exec --uri "$nopw" --password-file "$work/pw" x -- true
    chmod 600 "$work/pw"
    check_usage "--password-file and a password in the URI" exec --uri "$uri" --password-file "$work/pw" x -- true
    check_usage "--password-file that does not exist" exec --uri "$nopw" --password-file "$work/nope" x -- true
fi
printf 'secret\n' >"$work/pw0"
chmod 600 "$work/pw0"
check_usage "--password-file for file://" exec --uri "file://$work/locks" --password-file "$work/pw0" x -- true

# ---- zk://: the lease follows session_timeout= when lease= is not given --------
# [B-LEASE-1], against the real ZooKeeper: session_timeout=4s alone is a
# 4 s lease (not the default 30 s, more than twice the session, refused);
# an explicit lease= too long for the session is still refused, saying so.
if [ "$scheme" = zk ]; then
    zk_base=${uri%%\?*}
    out=$(DLOCK_URI= "$DLOCK" exec --uri "$zk_base?session_timeout=4s" "$(name zks)" -- \
        sh -c 'echo taken' 2>"$work/err")
    expect_status "zk session_timeout=4s alone: exec runs" 0 $?
    [ "$out" = taken ] || not_ok "zk session_timeout=4s: $out $(cat "$work/err")"
    DLOCK_URI= "$DLOCK" info --json --uri "$zk_base?session_timeout=4s" >"$work/zks.json" 2>"$work/err"
    grep -q '"lease_ms":4000' "$work/zks.json" && ok "zk session_timeout=4s: the lease is 4000 ms" ||
        not_ok "zk session_timeout=4s lease: $(grep lease "$work/zks.json") $(cat "$work/err")"
    check_usage "zk lease=30s with session_timeout=4s refused" \
        exec --uri "$zk_base?session_timeout=4s&lease=30s" x -- true
    grep -q "lease" "$work/err" && grep -q "session" "$work/err" &&
        ok "zk lease longer than the session: the message names both" ||
        not_ok "zk lease message: $(cat "$work/err")"
fi

# ---- info ----------------------------------------------------------------------
"$DLOCK" info "$uri" >"$work/info"
expect_status "info connects" 0 $?
# An alias scheme (redlock://, postgresql://...) is served by its backend.
base_scheme=$scheme
case $scheme in postgresql) base_scheme=postgres ;; zookeeper) base_scheme=zk ;;
mariadb) base_scheme=mysql ;; redlock) base_scheme=redis ;;
etcds) base_scheme=etcd ;; esac
grep -q "backend:  $base_scheme" "$work/info" && ok "info names the backend" ||
    not_ok "info backend: $(cat "$work/info")"
grep -q fencing "$work/info" && ok "info lists capabilities" || not_ok "info caps"

# ---- a lost lock: SIGTERM to the command, exit 75 ------------------------------
# Each backend loses a lock its own way. A backend may define its own
# lose_lock in tests/<scheme>/cli_lose_lock.sh (sourced below); this default
# knows file:// and lease backends.
lose_lock() { # name dlock-pid
    case "$scheme" in
    file)
        # Someone removes the lock file: the next holder would lock a new
        # file, so the holder's renewal must report the lock lost.
        rm -f "$work/locks/$1.lock"
        ;;
    *)
        # Lease backends: stop the holder past its lease, let another take
        # the lock, then let the holder's watchdog find out.
        kill -STOP "$2"
        sleep 2
        "$DLOCK" exec --timeout 10s "$1" -- true >/dev/null 2>&1
        kill -CONT "$2"
        ;;
    esac
}
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/../$base_scheme/cli_lose_lock.sh" ]; then
    # shellcheck disable=SC1090
    . "$here/../$base_scheme/cli_lose_lock.sh"
fi
lost=$(name lost)
"$DLOCK" exec --lease 600ms --kill-after 5s "$lost" -- \
    sh -c "trap 'sleep 0.3 && echo term >$work/term; exit 0' TERM; sleep 60 & echo \$! >$work/lost.bg;
        touch $work/gate2; while :; do sleep 0.05; done" \
    2>"$work/lost-err" &
holder=$!
pids+=("$holder")
if wait_for "$work/gate2"; then
    lose_lock "$lost" "$holder"
    wait "$holder"
    expect_status "lost lock exits 75" 75 $?
    # The trap's sleep starts after its shell got SIGTERM: it is spared
    # (the guard's later passes would have killed it within 50 ms).
    [ -e "$work/term" ] && ok "command got SIGTERM, and its trap's clean-up ran" ||
        not_ok "command not told, or its trap's clean-up was killed"
    alive "$(cat "$work/lost.bg")" && not_ok "lost lock: the command's child lives on" ||
        ok "lost lock: the command's child is gone"
    grep -q "lost" "$work/lost-err" && ok "says the lock was lost" ||
        not_ok "lost message: $(cat "$work/lost-err")"
else
    not_ok "lost-lock holder did not start"
fi

# ---- dlock elect: COMMAND runs while leader; lost leadership stops it ------
el=$(name elect)
out=$("$DLOCK" elect --id "cand-A" "$el" -- sh -c 'echo "$DLOCK_TERM $DLOCK_ELECT_ID $DLOCK_NAME"; exit 3')
expect_status "elect: COMMAND's exit code" 3 $?
case "$out" in
*" cand-A $el") ok "elect: DLOCK_TERM, DLOCK_ELECT_ID, DLOCK_NAME" ;;
*) not_ok "elect: environment: '$out'" ;;
esac
"$DLOCK" elect 2>/dev/null
expect_status "elect: no NAME is a usage error" 64 $?
"$DLOCK" elect --id '' "$el" -- true 2>/dev/null
expect_status "elect: an empty --id is a usage error" 64 $?
# Two candidates: the second's COMMAND starts after the first's ended.
"$DLOCK" elect "$el" -- sh -c "touch $work/el-a; sleep 0.5; touch $work/el-a-end" &
first=$!
pids+=("$first")
wait_for "$work/el-a"
"$DLOCK" elect "$el" -- sh -c "test -e $work/el-a-end"
expect_status "elect: the second leads after the first" 0 $?
wait "$first"
# Lost leadership: as exec's lost lock (lose_lock takes the same name).
ell=$(name elect-lost)
"$DLOCK" elect --lease 600ms --kill-after 5s "$ell" -- \
    sh -c "trap 'echo term >$work/el-term; exit 0' TERM; touch $work/el-gate;
        while :; do sleep 0.05; done" 2>"$work/el-err" &
holder=$!
pids+=("$holder")
if wait_for "$work/el-gate"; then
    lose_lock "$ell" "$holder"
    wait "$holder"
    expect_status "elect: lost leadership exits 75" 75 $?
    [ -e "$work/el-term" ] && ok "elect: command got SIGTERM" ||
        not_ok "elect: command not told"
    grep -q "lost" "$work/el-err" && ok "elect: says leadership was lost" ||
        not_ok "elect: lost message: $(cat "$work/el-err")"
else
    not_ok "elect: the leader did not start"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
