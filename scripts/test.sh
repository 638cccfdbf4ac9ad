#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: install packages,
# build three variants (plain with -Werror, ASan+UBSan, TSan), run every
# suite in each (unit, conformance and fault per backend, CLI, each
# backend's own tests; servers are started on 127.0.0.1 by the tests
# themselves and stopped afterwards; the history suite, every mode under
# injected faults, in the plain variant only; the cli suite on file://
# only under ASan, not under TSan; TSan on the modes whose threads
# differ), check that `meson install`
# gives a library programs can build against with pkg-config, then fuzz the
# URI parser for a bounded time with libFuzzer, and build the Debian
# packages and run lintian on them (tests/debian/check.sh, about 30 s).
#
#   scripts/test.sh                 everything
#   DLOCK_VARIANTS="plain" scripts/test.sh    a subset of variants
#   DLOCK_FUZZ_SECONDS=0 scripts/test.sh      skip the libFuzzer run
#   DLOCK_DEBIAN_CHECK=0 scripts/test.sh      skip the Debian packages
#   DLOCK_TEST_JOBS=3 scripts/test.sh         tests run at once (default:
#                                             5 plain, 4 under sanitizers)
#
# Several at a time on two cores: the tests mostly wait (for leases to run
# out, servers to restart, faults to end), not compute. Sampled every 10 s
# over a whole run at five, the two cores were less than half busy in most
# samples, with short peaks near 90 % (plain) and 97 % (ASan); the run took
# 1 111 s against 1 654 s at three. The sanitizers' variants run four: in
# a second run at five, one Redlock round of the ASan part took longer than
# its 50 ms node_timeout (fault/redlock, whose burst of 64 tries now
# retries), and their tests are the ones that compute.
#
# Ends with one line "N passed, N failed, N skipped (in N s)" over all
# variants.
set -euo pipefail
cd "$(dirname "$0")/.."

variants=${DLOCK_VARIANTS:-plain asan tsan}
fuzz_seconds=${DLOCK_FUZZ_SECONDS:-60}
jobs=${DLOCK_TEST_JOBS:-}
debian_check=${DLOCK_DEBIAN_CHECK:-1}

bash scripts/setup-debian.sh

say() { printf '\n== test.sh: %s (at %d s)\n' "$*" "$SECONDS"; }
total_ok=0 total_fail=0 total_skip=0 status=0

for v in $variants; do
    dir=build/test-$v
    case $v in
    plain) opts=(-Dwerror=true -Dbuildtype=debugoptimized) ;;
    # -Db_lundef=false: the sanitizer runtimes resolve symbols at run time.
    asan) opts=(-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
                -Dbuildtype=debug) ;;
    tsan) opts=(-Dwerror=true -Db_sanitize=thread -Db_lundef=false
                -Dbuildtype=debug) ;;
    *) echo "test.sh: unknown variant '$v'" >&2; exit 64 ;;
    esac
    say "$v: configure and build"
    if [ -d "$dir" ]; then
        meson setup --reconfigure "$dir" "${opts[@]}" >/dev/null
    else
        meson setup "$dir" "${opts[@]}" >/dev/null
    fi
    ninja -C "$dir" >/dev/null
    say "$v: test"
    # The history suite (every backend and mode under injected faults,
    # about 4 minutes) runs in the plain build only: its worth is the
    # histories, and the sanitizers already run every other suite and the
    # checker's own tests (history-self). So do two entries that repeat
    # code the sanitizers see elsewhere, to keep CI within its budget:
    # etcds-mutex (etcd over TLS; the sanitizers run etcd-mutex and the
    # etcd/tls test) and redis-cluster-hash (the cluster's routing, which
    # redis-cluster-setnx and redis/cluster run). The sanitizers run the
    # cli suite on file:// only (suite cli-modes is every other mode): the
    # dlock program's code is the same on every mode, and each backend's
    # code runs under them in its conformance, fault and backend suites.
    # TSan leaves out the cli suite whole: its process-level behaviour
    # (exit codes, signals, the guard) has no threads the conformance,
    # fault, cancel, elect and latch suites do not already run under TSan.
    # Both leave out redis/redlock_five_nodes (suite redlock-five), whose
    # minute waits out leases over code conformance/redlock runs. And
    # TSan runs one or two modes per backend, not all: races live in a
    # backend's threads and shared state (the reader, watcher and listener
    # threads, core's watchdog), which its modes share; ASan runs them all.
    skip=()
    [ "$v" = plain ] || skip=(--no-suite history --no-suite etcds-mutex
                              --no-suite redis-cluster-hash
                              --no-suite cli-modes --no-suite redlock-five)
    [ "$v" != tsan ] || skip+=(--no-suite cli --no-suite redis-setnx
                               --no-suite redis-rwlock --no-suite zk-rwlock
                               --no-suite postgres-advisory_xact
                               --no-suite postgres-for_update
                               --no-suite mysql-for_update
                               --no-suite etcd-rwlock)
    rc=0
    n=$jobs
    [ -n "$n" ] || { [ "$v" = plain ] && n=5 || n=4; }
    meson test -C "$dir" --print-errorlogs --num-processes "$n" \
        "${skip[@]}" || rc=$?
    [ $rc = 0 ] || status=1
    log=$dir/meson-logs/testlog.json
    ok=$(grep -c '"result": "OK"' "$log" || true)
    fail=$(grep -c -E '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
    skip=$(grep -c '"result": "SKIP"' "$log" || true)
    echo "test.sh: $v: $ok ok, $fail failed, $skip skipped"
    total_ok=$((total_ok + ok)) total_fail=$((total_fail + fail))
    total_skip=$((total_skip + skip))
    if [ "$v" = plain ]; then
        say "plain: meson install, then build programs against it with pkg-config, and reach redis through the installed module"
        if tests/servers/with-servers.sh redis -- \
                bash tests/install/check.sh "$dir"; then
            total_ok=$((total_ok + 1))
        else
            total_fail=$((total_fail + 1)) status=1
        fi
    fi
done

if [ "$fuzz_seconds" != 0 ]; then
    say "fuzz: the URI parser for ${fuzz_seconds}s (libFuzzer, ASan+UBSan)"
    dir=build/test-fuzz
    if [ ! -d "$dir" ]; then
        CC=clang meson setup "$dir" -Dfuzz=enabled -Dtests=true \
            -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
    fi
    corpus=$(mktemp -d)
    cp tests/fuzz/corpus/uri/* "$corpus/"
    if ! ninja -C "$dir" tests/uri_fuzzer >"$dir/build.log" 2>&1; then
        total_fail=$((total_fail + 1)) status=1
        tail -n 20 "$dir/build.log"
        echo "test.sh: fuzz: the fuzz target did not build (log: $dir/build.log)"
    elif "$dir/tests/uri_fuzzer" -max_total_time="$fuzz_seconds" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/" "$corpus" 2>"$dir/fuzz.log"; then
        total_ok=$((total_ok + 1))
        tail -n 3 "$dir/fuzz.log"
    else
        total_fail=$((total_fail + 1)) status=1
        tail -n 40 "$dir/fuzz.log"
        echo "test.sh: fuzz: a crash; the input is in $dir/crash-*;" \
             "fix it and add the input to tests/fuzz/corpus/uri/"
    fi
    rm -rf "$corpus"
fi

if [ "$debian_check" != 0 ]; then
    say "debian: dpkg-buildpackage -us -uc in a scratch copy, lintian, package contents"
    if bash tests/debian/check.sh; then
        total_ok=$((total_ok + 1))
    else
        total_fail=$((total_fail + 1)) status=1
    fi
fi

echo
echo "$total_ok passed, $total_fail failed, $total_skip skipped (in $SECONDS s)"
exit $status
