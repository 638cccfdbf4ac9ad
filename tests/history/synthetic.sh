#!/usr/bin/env bash
# The checker on hand-written histories whose violations are known:
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
#
# Then two histories with readers (a mode with shared locks, --readers 30):
#
# readers-bad: w0 writes from 1.0 s to 1.5 s; w1's reader grant returns at
# 1.2 s (one overlap, writer and reader) and reads the counter at 1.25 s
# and 1.40 s, before and after w0's write at 1.306 s (one change under a
# reader); w2's reader grant (2.0 s) sees a change too, but held() said 0
# right after that read: told of its loss, not counted. Exit status 1.
#
# readers-ok: w0 writes, then w1 and w2 hold shared together (one pair of
# overlapping reader windows; w2 returns after w1 with a lower fence, which
# readers may), reading the same value throughout; then w0 writes again
# with a fence above both. No violation: exit status 0.
#
# readers-zombie: readers-ok with a writer stopped inside its write, which
# lands under the readers after its lock ran out: not counted (exit 0).
#
# Then two with permits (a semaphore of 2, --permits 2):
#
# permits-bad: w0 holds 1.0-1.5 s (fence 5), w1 1.1-1.6 s (fence 6), and
# w2's grant returns at 1.2 s, a third holder (one over_permits), with w1's
# fence 6 (one fence-order violation). Exit status 1.
#
# permits-ok: w0 and w1 ask together at 1.0 s; w1's reply comes first
# (1.05 s, fence 8), w0's after it with fence 7, which two grants made
# together may; both hold together; w2 asks after both returned and gets
# fence 9. No violation: exit status 0.
set -euo pipefail
history=${1:?usage: synthetic.sh HISTORY}
top=$(mktemp -d /tmp/dlock-history-synth-XXXXXX)
trap 'rm -rf "$top"' EXIT
dir=$top/writers
mkdir "$dir"

s=1000000000 # one second in ns
t() { echo $(($1 * s / 1000)); } # ms -> ns

meta() { # DIR CAPS READERS_PCT WORKERS DURATION_MS [PERMITS]
    cat >"$1/meta" <<EOF
uri file:///nowhere
uri_shown file:///nowhere
scheme file
mode ofd
name synthetic
server -
nodes 0
caps $2
lease_ms 2000
timeout_ms 1000
acquire_timeout_ms 3000
hold_ms 20
long_hold_ms 2000
long_pct 0
writes 4
rmw_pause_us 200
think_ms 0
readers_pct $3
permits ${6:-0}
duration_ms $5
workers $4
seed 1
faults 0
no_lock 0
fake_fence 0
EOF
}
meta "$dir" $((1 << 6)) 0 2 12000
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

check() { # DIR: the checker's report in $out, its status in $rc
    rc=0
    out=$("$history" check --dir "$1" --json "$1/report.json") || rc=$?
    printf '%s\n' "$out"
}
check "$dir"
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
expect '^  counter changed under a reader +0 '
expect '^  stale fenced writes accepted +1 '
expect '^  fences not increasing per grant +1$'
expect '^  hangs +1 '
expect '^  stalls +1 '
expect '^  worker errors +0$'
expect '1 torn'
[ "$rc" = 1 ] || { echo "synthetic.sh: exit status $rc, expected 1" >&2; fail=1; }

# ---- readers-bad -------------------------------------------------------------
shared=$((1 << 5 | 1 << 6)) # DLOCK_CAP_SHARED | DLOCK_CAP_FENCING
runlog() { # DIR END_MS: three workers, pids 100-102
    cat >"$1/run.log" <<EOF
B $(t 1000)
P $(t 1000) 0 0 100
P $(t 1000) 1 0 101
P $(t 1000) 2 0 102
S $(t $2)
Q $(t $2) 100 0
Q $(t $2) 101 0
Q $(t $2) 102 0
Z $(t $2)
EOF
}
# A reader's log: hello, acquire, two counter reads, release.
reader() { # FILE PID SLOT ASKED GRANTED FENCE T1 V1 T2 V2 H2 RELEASED RC
    cat >"$1" <<EOF
H $(t 1000) $2 $3 0
A0 $(t $4) ${kind:-s}
A $(t $4) $(t $5) 0 $6 1 ${kind:-s}
V 1 0 $(t $7) 1 $6 $(t $(($7 + 1))) $8 $(t $(($7 + 2))) 1
V 1 1 $(t $9) 1 $6 $(t $(($9 + 1))) ${10} $(t $(($9 + 2))) ${11}
R0 $(t ${12}) 1
R $(t ${12}) $(t $((${12} + 1))) ${13} 1
X $(t 3000)
EOF
}
dir=$top/readers-bad
mkdir "$dir"
meta "$dir" $shared 30 3 3000
runlog "$dir" 3000
# w0 as in the first history: writes at 1.1, 1.3 and 1.5 s.
cp "$top/writers/w0.0.log" "$dir/"
# V seq k th1 h1 fence tr v th2 h2
reader "$dir/w1.0.log" 101 1 1000 1200 8 1250 1 1400 2 1 1450 0
reader "$dir/w2.0.log" 102 2 1900 2000 9 2050 3 2200 4 0 2250 -4
echo "L $(t 2203) -4" >>"$dir/w2.0.log"
grep -v ' 1\.0 1$' "$top/writers/store.log" >"$dir/store.log"
echo 3 >"$dir/counter"
check "$dir"
expect '^  reader grants +2  \(--readers 30%; overlapping reader pairs 0,'
expect '^  overlapping held windows +1  \(grants involved 2, .*with a reader 1\)$'
expect 'w0\.0 writer grant 1 .* and w1\.0 reader grant 1 '
expect '^  counter changed under a reader +1  \(4 reads\)$'
expect 'w1\.0 reader grant 1 read the counter 1 at 0\.2510 s and 2 at 0\.4010 s, held\(\) == 1 around both; written by w0\.0 grant 1 at 0\.3060 s$'
expect '^  lost updates while both held +0 '
expect '^  fences not increasing per grant +0$'
expect '^  stalls +0 '
[ "$rc" = 1 ] || { echo "synthetic.sh: readers-bad: exit status $rc, expected 1" >&2; fail=1; }

# ---- readers-ok --------------------------------------------------------------
dir=$top/readers-ok
mkdir "$dir"
meta "$dir" $shared 30 3 3000
runlog "$dir" 3000
cat >"$dir/w0.0.log" <<EOF
H $(t 1000) 100 0 0
A0 $(t 1000)
A $(t 1000) $(t 1001) 0 7 1
W 1 0 $(t 1050) 1 $(t 1051) $(t 1052) A 7 $(t 1053) 0 $(t 1054) $(t 1055) 1
R0 $(t 1100) 1
R $(t 1100) $(t 1101) 0 1
A0 $(t 1550)
A $(t 1550) $(t 1600) 0 10 2
W 2 0 $(t 1650) 1 $(t 1651) $(t 1652) A 10 $(t 1653) 1 $(t 1654) $(t 1655) 1
R0 $(t 1700) 2
R $(t 1700) $(t 1701) 0 2
X $(t 3000)
EOF
reader "$dir/w1.0.log" 101 1 1150 1200 9 1210 1 1400 1 1 1410 0
reader "$dir/w2.0.log" 102 2 1150 1300 8 1310 1 1500 1 1 1510 0
printf '%s\n' \
    "1 $(t 1052) A 7 0 0.0 1" \
    "2 $(t 1652) A 10 7 0.0 2" >"$dir/store.log"
echo 2 >"$dir/counter"
check "$dir"
expect '^  reader grants +2  \(--readers 30%; overlapping reader pairs 1, longest 102\.0 ms\)$'
expect '^  overlapping held windows +0  '
expect '^  counter changed under a reader +0  \(4 reads\)$'
expect '^  fences not increasing per grant +0$'
expect '^  verdict: OK$'
[ "$rc" = 0 ] || { echo "synthetic.sh: readers-ok: exit status $rc, expected 0" >&2; fail=1; }

# ---- readers-zombie -----------------------------------------------------------
# As readers-ok, but w0 is stopped inside its second read-modify-write of
# grant 1: held() said 1 at 1.06 s, it read the counter (1), and its write
# (2) lands at 1.35 s, after its lock ran out and while w1 and w2 hold
# shared; held() says 0 right after. Both readers see the counter change,
# and that is not counted: no lock stops a stopped writer's unfenced write
# (the store takes it here: same grant, same fence), as lost_update does
# not count it either. Exit status 0.
dir=$top/readers-zombie
mkdir "$dir"
meta "$dir" $shared 30 3 3000
runlog "$dir" 3000
# w0's log of readers-ok, with the stopped write after its first one, its
# loss, its release at 1.36 s failing, and grant 2 reading 2.
sed -e "/^W 1 0 /a W 1 1 $(t 1060) 1 $(t 1061) $(t 1062) A 7 $(t 1063) 1 $(t 1350) $(t 1351) 0\\nL $(t 1352) -4" \
    -e "s/^R0 $(t 1100) 1\$/R0 $(t 1360) 1/" \
    -e "s/^R $(t 1100) $(t 1101) 0 1\$/R $(t 1360) $(t 1361) -4 1/" \
    -e "s/ A 10 $(t 1653) 1 / A 10 $(t 1653) 2 /" \
    "$top/readers-ok/w0.0.log" >"$dir/w0.0.log"
reader "$dir/w1.0.log" 101 1 1150 1200 9 1210 1 1400 2 1 1410 0
reader "$dir/w2.0.log" 102 2 1150 1300 8 1310 1 1500 2 1 1510 0
printf '%s\n' \
    "1 $(t 1052) A 7 0 0.0 1" \
    "2 $(t 1062) A 7 7 0.0 1" \
    "3 $(t 1652) A 10 7 0.0 2" >"$dir/store.log"
echo 3 >"$dir/counter"
check "$dir"
expect '^  overlapping held windows +0  '
expect '^  counter changed under a reader +0  \(4 reads\)$'
expect '^  verdict: OK$'
[ "$rc" = 0 ] || { echo "synthetic.sh: readers-zombie: exit status $rc, expected 0" >&2; fail=1; }

# ---- permits -----------------------------------------------------------------
permits=$((1 << 14 | 1 << 6)) # DLOCK_CAP_PERMITS | DLOCK_CAP_FENCING
kind=p
dir=$top/permits-bad
mkdir "$dir"
meta "$dir" $permits 0 3 3000 2
runlog "$dir" 3000
reader "$dir/w0.0.log" 100 0 1000 1000 5 1010 0 1490 0 1 1500 0
reader "$dir/w1.0.log" 101 1 1000 1100 6 1110 0 1590 0 1 1600 0
reader "$dir/w2.0.log" 102 2 1000 1200 6 1210 0 1390 0 1 1400 0
: >"$dir/store.log"
echo 0 >"$dir/counter"
check "$dir"
expect '^  permit grants +3  \(--permits 2; overlapping permit pairs 3\)$'
expect '^  more holders than permits +1  \(--permits 2; most at once 3\)$'
expect '3 permit holders of 2 believed held at 0\.2000 s, when w2\.0 permit grant 1 was granted'
expect '^  overlapping held windows +0  '
expect '^  fences not increasing per grant +1$'
expect 'w2\.0 permit grant 1 \(asked at 0\.000 s, held\) has fence 6, not above|have fence 6'
[ "$rc" = 1 ] || { echo "synthetic.sh: permits-bad: exit status $rc, expected 1" >&2; fail=1; }

dir=$top/permits-ok
mkdir "$dir"
meta "$dir" $permits 0 3 3000 2
runlog "$dir" 3000
reader "$dir/w0.0.log" 100 0 1000 1060 7 1070 0 1390 0 1 1400 0
reader "$dir/w1.0.log" 101 1 1000 1050 8 1060 0 1490 0 1 1500 0
reader "$dir/w2.0.log" 102 2 1420 1450 9 1460 0 1590 0 1 1600 0
: >"$dir/store.log"
echo 0 >"$dir/counter"
check "$dir"
expect '^  more holders than permits +0  \(--permits 2; most at once 2\)$'
expect '^  fences not increasing per grant +0$'
expect '^  verdict: OK$'
[ "$rc" = 0 ] || { echo "synthetic.sh: permits-ok: exit status $rc, expected 0" >&2; fail=1; }
exit $fail
