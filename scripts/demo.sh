#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install packages, build,
# and run `dlock demo inventory`: worker processes sell from one stock with
# no lock, with a mutex per process, and with a distributed lock.
#
#   scripts/demo.sh              on file:// (no server needed)
#   scripts/demo.sh --servers    also on every server backend this build has,
#                                with private servers started on 127.0.0.1
#                                for the run and stopped afterwards
#   scripts/demo.sh --pitfalls   instead, `dlock demo pitfalls`: the classic
#                                broken lock recipes beside their fixes, on a
#                                private Redis and ZooKeeper started on
#                                127.0.0.1 for the run (about 10 s)
#   scripts/demo.sh -- ARGS...   extra arguments for the demo
set -euo pipefail
cd "$(dirname "$0")/.."

servers=0 pitfalls=0
extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --servers) servers=1 ;;
    --pitfalls) pitfalls=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown option '$1' (try --help)" >&2; exit 64 ;;
    esac
    shift
done

bash scripts/setup-debian.sh
dir=build/demo
[ -d "$dir" ] || meson setup "$dir" -Dbuildtype=release -Dtests=false >/dev/null
ninja -C "$dir" >/dev/null
dlock=$PWD/$dir/tools/dlock
locks=$(mktemp -d /tmp/dlock-demo-locks-XXXXXX)
trap 'rm -rf "$locks"' EXIT

if [ $pitfalls = 1 ]; then
    # The recipes need Redis and ZooKeeper; a build without one of their
    # client libraries skips its recipes, saying so.
    kinds=() uris=()
    for b in $("$dlock" info "file://$locks" | sed -n 's/^backends: //p'); do
        case $b in
        redis) kinds+=(redis); uris+=(--uri '$DLOCK_TEST_REDIS_URI') ;;
        zk) kinds+=(zk); uris+=(--uri '$DLOCK_TEST_ZK_URI') ;;
        esac
    done
    rm -rf "$locks" # exec ends this shell: its EXIT trap would not run
    exec bash tests/servers/with-servers.sh "${kinds[@]}" -- bash -c \
        "exec \"$dlock\" demo pitfalls $(printf '%s ' "${uris[@]}") \"\$@\"" \
        demo "${extra[@]}"
fi
if [ $servers = 0 ]; then
    exec "$dlock" demo inventory --uri "file://$locks" "${extra[@]}"
fi

# The server kinds and URIs of the backends this build has.
built=$("$dlock" info "file://$locks" | sed -n 's/^backends: //p')
kinds=() uris=(--uri "file://$locks")
for b in $built; do
    case $b in
    redis) kinds+=(redis); uris+=(--uri '$DLOCK_TEST_REDIS_URI') ;;
    zk) kinds+=(zk); uris+=(--uri '$DLOCK_TEST_ZK_URI') ;;
    postgres) kinds+=(pg); uris+=(--uri '$DLOCK_TEST_PG_URI') ;;
    mysql) kinds+=(mysql); uris+=(--uri '$DLOCK_TEST_MYSQL_URI') ;;
    etcd) kinds+=(etcd); uris+=(--uri '$DLOCK_TEST_ETCD_URI') ;;
    esac
done
# The URIs are expanded inside with-servers.sh, once the servers are up.
exec bash tests/servers/with-servers.sh "${kinds[@]}" -- bash -c \
    "exec \"$dlock\" demo inventory $(printf '%s ' "${uris[@]}") \"\$@\"" \
    demo "${extra[@]}"
