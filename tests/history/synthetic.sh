#!/usr/bin/env bash
# The checker on a hand-written history whose violations are known:
#
#   tests/history/synthetic.sh HISTORY
#
# Two workers; w0 holds grant 1 from 1.0 s to 1.5 s, w1's grant 1 returns at
# 1.2 s while w0 still samples held() == 1 (one overlap, two read-modify-
# writes overlapping inside it: one lost update); w1's grant has the same
# fence as w0's (one fence-order violation; its store write is accepted with
# that equal fence: one stale write); w1 then waits in dlock_acquire from
# 2.0 s to 11 s with nobody holding and no fault (a stall: the bound is
# lease 2 s + timeout 1 s) and that acquire returns after 9 s although its
# timeout is 3 s and the slack 2 s (a hang); w1's log ends in a torn line.
# Each figure must come out exactly, and the exit status must be 1.
set -euo pipefail
history=${1:?usage: synthetic.sh HISTORY}
dir=$(mktemp -d /tmp/dlock-history-synth-XXXXXX)
trap 'rm -rf "$dir"' EXIT

s=1000000000 # one second in ns
t() { echo $(($1 * s / 1000)); } # ms -> ns

cat >"$dir/meta" <<EOF
uri file:///nowhere
uri_shown file:///nowhere
scheme file
mode ofd
name synthetic
server -
nodes 0
caps $((1 << 6))
lease_ms 2000
timeout_ms 1000
acquire_timeout_ms 3000
hold_ms 20
long_hold_ms 2000
long_pct 0
writes 4
rmw_pause_us 200
think_ms 0
duration_ms 12000
workers 2
seed 1
faults 0
no_lock 0
fake_fence 0
EOF
cat >"$dir/run.log" <<EOF
B $(t 1000)
P $(t 1000) 0 0 100
P $(t 1000) 1 0 101
S $(t 12000)
Q $(t 12100) 100 0
Q $(t 12100) 101 0
Z $(t 12200)
EOF
# W seq k th1 h1 tw0 tw1 res fence tr v tw th2 h2
cat >"$dir/w0.0.log" <<EOF
H $(t 1000) 100 0 0
A0 $(t 1000)
A $(t 1000) $(t 1001) 0 7 1
W 1 0 $(t 1100) 1 $(t 1101) $(t 1102) A 7 $(t 1103) 0 $(t 1104) $(t 1105) 1
W 1 1 $(t 1300) 1 $(t 1301) $(t 1302) A 7 $(t 1303) 1 $(t 1306) $(t 1307) 1
W 1 2 $(t 1500) 1 $(t 1501) $(t 1502) A 7 $(t 1503) 2 $(t 1504) $(t 1505) 1
R0 $(t 1600) 1
R $(t 1600) $(t 1601) 0 1
X $(t 12000)
EOF
cat >"$dir/w1.0.log" <<EOF
H $(t 1000) 101 1 0
A0 $(t 1000)
A $(t 1000) $(t 1200) 0 7 1
W 1 0 $(t 1300) 1 $(t 1302) $(t 1303) A 7 $(t 1304) 1 $(t 1305) $(t 1308) 1
R0 $(t 1700) 1
R $(t 1700) $(t 1701) 0 1
A0 $(t 2000)
A $(t 2000) $(t 11000) -3 0 0
X $(t 12000)
EOF
# A writer killed in the middle of a line leaves it without its newline.
printf 'W 2 0 %s 1 %s' "$(t 11500)" "$(t 11501)" >>"$dir/w1.0.log"
printf '%s\n' \
    "1 $(t 1102) A 7 0 0.0 1" \
    "2 $(t 1302) A 7 7 0.0 1" \
    "3 $(t 1303) A 7 7 1.0 1" \
    "4 $(t 1502) A 7 7 0.0 1" >"$dir/store.log"
echo 3 >"$dir/counter"

rc=0
out=$("$history" check --dir "$dir" --json "$dir/report.json") || rc=$?
printf '%s\n' "$out"
fail=0
expect() { # PATTERN
    if ! grep -Eq -- "$1" <<<"$out"; then
        echo "synthetic.sh: expected a line matching: $1" >&2
        fail=1
    fi
}
expect '^  cycles \(grants\) +2$'
expect '^  overlapping held windows +1 '
expect '^  lost updates while both held +1 '
expect '^  stale fenced writes accepted +1 '
expect '^  fences not increasing per grant +1$'
expect '^  hangs +1 '
expect '^  stalls +1 '
expect '^  worker errors +0$'
expect '1 torn'
[ "$rc" = 1 ] || { echo "synthetic.sh: exit status $rc, expected 1" >&2; fail=1; }
exit $fail
