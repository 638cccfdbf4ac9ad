#!/usr/bin/env bash
# Install everything dlock needs to build and to run its server-backed tests
# on a fresh Debian 12 (bookworm) machine.
#
#   scripts/setup-debian.sh
#
# Idempotent: when every package is already installed it does not touch apt
# at all (dpkg-query only), so it is cheap to call before every build.
# Runs as root; when not root it re-runs the apt steps through sudo.
#
# apt only installs the servers; it does not start them (no systemd, and
# policy-rc.d blocks invoke-rc.d on these machines). tests/servers/with-servers.sh
# starts private instances per test run.
set -euo pipefail

say() { printf 'setup-debian: %s\n' "$*"; }
die() { printf 'setup-debian: error: %s\n' "$*" >&2; exit 1; }

# Build tools. clang + libclang-rt-14-dev give libFuzzer and the sanitizer
# runtimes; llvm gives llvm-symbolizer / llvm-profdata / llvm-cov;
# libjson-c-dev is for the JSON that `dlock bench` and `dlock scenario` write;
# iproute2 gives ss(8), with which the fault tests and the history checker
# cut TCP connections; groff-base renders dlock(1) in its test;
# librsvg2-bin's rsvg-convert renders the bench chart to PNG in its test;
# debhelper, dpkg-dev, build-essential, lintian and dh-python build and
# check the Debian packages (tests/debian/check.sh); python3-cffi and python3-dev
# build the Python package (python/, -Dpython=auto), python3-pytest runs
# its tests (suite python).
build_pkgs=(
    meson ninja-build pkg-config gcc clang llvm libclang-rt-14-dev iproute2
    groff-base librsvg2-bin python3-cffi python3-dev python3-pytest
    libcmocka-dev nettle-dev libjson-c-dev
    debhelper dpkg-dev build-essential lintian dh-python
)
# Client libraries the backends link against. libmariadb-dev-compat provides
# the "mysqlclient" pkg-config name; the etcd backend speaks HTTP/JSON to
# etcd's gateway through libcurl.
client_pkgs=(
    libhiredis-dev libzookeeper-mt-dev libpq-dev libmariadb-dev
    libmariadb-dev-compat libcurl4-openssl-dev
)
# Servers for the tests (started by hand by tests/servers/with-servers.sh).
# etcd-client's etcdctl is the other side of the etcd interop test
# (etcdctl lock); openssl makes the certificates of the etcdtls test server
# (etcds://) and curl, with its client certificate, is its readiness probe.
# pgbouncer: postgres/pooler puts it in front of the test server.
server_pkgs=(
    redis-server redis-tools zookeeper postgresql mariadb-server
    etcd-server etcd-client openssl curl pgbouncer
)
# ZooKeeper/Curator interop test: a small Java program using Curator's
# InterProcessMutex against the same lock path as dlock. Curator logs through
# slf4j, so it needs a binding (slf4j-log4j12 from libslf4j-java + log4j 1.2,
# or slf4j-nop/slf4j-simple, all in libslf4j-java); javac comes from the JDK.
# These are optional: if the archive lacks one, we say so and go on.
interop_pkgs=(
    libcurator-recipes-java libslf4j-java liblog4j1.2-java default-jdk-headless
)

# Run a command as root: directly when we are root, else through sudo.
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "must run as root (or have sudo) to install packages"
    fi
}

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script is for Debian"
if [[ -r /etc/os-release ]]; then
    # shellcheck disable=SC1091
    . /etc/os-release
    if [[ ${ID:-} != debian || ${VERSION_ID:-} != 12 ]]; then
        say "warning: written for Debian 12, this is ${PRETTY_NAME:-unknown}; trying anyway"
    fi
fi

# Is package $1 fully installed? ("install ok installed"; half-configured or
# removed-but-config-files states count as missing so apt fixes them.)
installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

missing_required=()
for p in "${build_pkgs[@]}" "${client_pkgs[@]}" "${server_pkgs[@]}"; do
    installed "$p" || missing_required+=("$p")
done
missing_optional=()
for p in "${interop_pkgs[@]}"; do
    installed "$p" || missing_optional+=("$p")
done

if ((${#missing_required[@]} == 0 && ${#missing_optional[@]} == 0)); then
    say "all packages already installed; nothing to do"
    exit 0
fi

say "missing: ${missing_required[*]}${missing_required[*]:+ }${missing_optional[*]}"

# apt's own output goes to a log, shown only if a step fails, so the
# script prints one line per step.
log=$(mktemp "${TMPDIR:-/tmp}/setup-debian.XXXXXX.log")
trap 'rm -f "$log"' EXIT
run_logged() { # DESCRIPTION CMD...
    local what=$1
    shift
    say "$what"
    if ! "$@" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "$what failed"
    fi
}

# A fresh machine may have empty package lists; update once (fast when the
# lists are current).
run_logged "apt-get update" as_root env DEBIAN_FRONTEND=noninteractive apt-get update

# Optional packages: install only what the archive actually has (checked after
# the update, since before it apt-cache knows nothing on a fresh machine).
to_install=("${missing_required[@]}")
for p in "${missing_optional[@]}"; do
    # apt-cache show exits 0 with no output for purely virtual packages, so
    # look for a real "Package:" stanza.
    if apt-cache show --no-all-versions "$p" 2>/dev/null | grep -q '^Package:'; then
        to_install+=("$p")
    else
        say "note: $p is not available in the configured archive; the Curator interop test will be skipped"
    fi
done

if ((${#to_install[@]} == 0)); then
    say "nothing installable is missing"
    exit 0
fi
run_logged "apt-get install ${to_install[*]}" \
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "${to_install[@]}"

# etcd-server's postinst starts a system etcd (2379/2380, data in
# /var/lib/etcd) wherever services may start: under systemd, or under
# sysvinit without a policy-rc.d that forbids it (these machines have one).
# The tests start their own members on other ports and need none: stop and
# disable one that this install started. One that was there before this
# run is left alone.
if [[ " ${to_install[*]} " == *" etcd-server "* ]]; then
    if [[ -d /run/systemd/system ]]; then
        if systemctl is-active --quiet etcd 2>/dev/null; then
            run_logged "stopping the system etcd the package started" \
                as_root systemctl disable --now etcd
        fi
    elif [[ -x /etc/init.d/etcd ]] && /etc/init.d/etcd status >/dev/null 2>&1; then
        run_logged "stopping the system etcd the package started" as_root /etc/init.d/etcd stop
        run_logged "disabling its start at boot" as_root update-rc.d etcd disable
    fi
fi

# The server packages create these system users; with-servers.sh runs
# postgres and mariadbd as them (both refuse to run as root). Check rather
# than assume, so a broken install fails here and not in the middle of a test.
for u in postgres mysql; do
    getent passwd "$u" >/dev/null || die "system user '$u' missing after install"
done
say "done"
