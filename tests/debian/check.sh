#!/usr/bin/env bash
# check.sh: build the Debian packages from this tree as a user would
# (dpkg-buildpackage -us -uc, in a scratch copy under /tmp, so the tree
# gets no obj-*/ or debian/tmp and no .deb lands beside it), run lintian
# on the result, and check what each package holds and depends on: each
# server backend's module in its own package, libdlock0 and dlock free of
# every client library (dlock-pitfalls has the broken recipes that speak
# hiredis and the ZooKeeper client); then, from the packages unpacked
# under /tmp, that dlock loads all four modules and that a missing one
# names its package, that `dlock demo pitfalls` runs dlock-pitfalls (exit
# 69 naming its package without it), that python3-dlock imports and
# locks, and that programs build against
# libdlock-dev.
#
#   bash tests/debian/check.sh          prints lintian's tags, then one
#                                       line per package; exits 1 on a
#                                       lintian error or a failed check
#   DLOCK_DEBIAN_KEEP=1 bash tests/debian/check.sh    keep the scratch dir
#
# Needs debhelper, dpkg-dev, build-essential and lintian besides the
# build dependencies (scripts/setup-debian.sh installs them all; no
# fakeroot: Rules-Requires-Root is no). The package build runs the unit
# suite only: no server is started.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/dlock-deb-XXXXXX)
if [ "${DLOCK_DEBIAN_KEEP:-0}" = 1 ]; then
    echo "debian check: scratch dir $work"
else
    trap 'rm -rf "$work"' EXIT
fi
fail() { echo "debian check: $*" >&2; exit 1; }
for t in dpkg-buildpackage dh lintian; do
    command -v "$t" >/dev/null ||
        fail "$t not found; scripts/setup-debian.sh installs it"
done

version=$(sed -n '1s/^dlock (\([^)]*\)).*/\1/p' "$src/debian/changelog")
[ -n "$version" ] || fail "no version in debian/changelog"
# A native package: its version is the project's.
upstream=$(sed -n "s/^  version: '\([^']*\)',\$/\1/p" "$src/meson.build")
[ "$version" = "$upstream" ] ||
    fail "debian/changelog is at $version, meson.build at $upstream:" \
        "add an entry for $upstream at the top of debian/changelog"
tree=$work/dlock-$version
mkdir "$tree"
# The working tree as git sees it (tracked and untracked files, not
# ignored ones such as build/), so uncommitted changes are checked too;
# a copy without build directories where there is no git.
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        tar --null --files-from - --ignore-failed-read -cf - 2>/dev/null) |
        tar -xf - -C "$tree"
else
    (cd "$src" && tar --exclude='./build*' --exclude='./obj-*' -cf - .) |
        tar -xf - -C "$tree"
fi

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
changes=$work/dlock_${version}_$arch.changes
start=$(date +%s)
# Check level 2: a symbol gone from libdlock.so.0, or a new one that
# debian/libdlock0.symbols does not list, fails the build (the diff is in
# the log's tail).
if ! (cd "$tree" && DPKG_GENSYMBOLS_CHECK_LEVEL=2 \
        dpkg-buildpackage -us -uc -Jauto) >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log" >&2
    fail "dpkg-buildpackage failed (DLOCK_DEBIAN_KEEP=1 keeps its whole log)"
fi
echo "debian check: dpkg-buildpackage took $(($(date +%s) - start)) s"

# lintian: errors fail; warnings and below are printed for a reader
# (there are none today; one that cannot be fixed gets an override in
# debian/ with its reason). Its note that it runs as root is dropped.
rc=0
lintian --fail-on error --display-level '>=info' "$changes" \
    >"$work/lintian.log" 2>&1 || rc=$?
grep -v 'running with root privileges' "$work/lintian.log" |
    sed 's/^/lintian: /' || true
[ $rc = 0 ] || fail "lintian reports errors (or could not run)"

deb() { echo "$work/${1}_${version}_$2.deb"; }
has() { # PACKAGE ARCH PATH...: each PATH is in the package
    local p=$1 a=$2 f list
    shift 2
    list=$(dpkg-deb -c "$(deb "$p" "$a")" | awk '{print $6}')
    for f in "$@"; do
        grep -Fqx "./$f" <<<"$list" || fail "$p lacks /$f"
    done
}
lib=usr/lib/$multiarch
has libdlock0 "$arch" "$lib/libdlock.so.0" "$lib/libdlock.so.$version"
has libdlock-dev "$arch" usr/include/dlock/dlock.h usr/include/dlock/backend.h \
    "$lib/libdlock.so" "$lib/libdlock.a" "$lib/pkgconfig/dlock.pc" \
    usr/share/man/man3/dlock.3.gz
has dlock "$arch" usr/bin/dlock usr/share/man/man1/dlock.1.gz \
    usr/share/bash-completion/completions/dlock
has dlock-pitfalls "$arch" usr/libexec/dlock/dlock-pitfalls
pydir=usr/lib/python3/dist-packages/dlock
has python3-dlock "$arch" "$pydir/__init__.py" "$pydir/_client.py" \
    "$pydir/_errors.py" \
    "$pydir/_dlock.$(/usr/bin/python3 -c \
        'import sysconfig; print(sysconfig.get_config_var("SOABI"))').so"
modules="redis zk postgres mysql etcd"
for m in $modules; do
    has "libdlock0-$m" "$arch" "$lib/dlock/modules/dlock-$m.so"
    # The modules call backend.h's helpers, stable through a minor
    # version only: they must come with the very libdlock0 they were
    # built with.
    dpkg-deb -f "$(deb "libdlock0-$m" "$arch")" Depends |
        grep -Fq "libdlock0 (= $version)" ||
        fail "libdlock0-$m does not depend on libdlock0 (= $version)"
done
# The point of the modules: libdlock0 pulls in no client library, nor
# does dlock (the broken recipes of `dlock demo pitfalls`, which speak
# hiredis and the ZooKeeper client directly, are dlock-pitfalls').
for p in libdlock0 dlock; do
    libdeps=$(dpkg-deb -f "$(deb "$p" "$arch")" Depends)
    for c in libhiredis libzookeeper libpq libmariadb libmysqlclient libcurl; do
        case $libdeps in
        *"$c"*) fail "$p depends on $c: $libdeps" ;;
        esac
    done
done
pfdeps=$(dpkg-deb -f "$(deb dlock-pitfalls "$arch")" Depends)
for c in libhiredis libzookeeper "dlock (= $version)"; do
    case $pfdeps in
    *"$c"*) ;;
    *) fail "dlock-pitfalls does not depend on $c: $pfdeps" ;;
    esac
done

# The packages as installed, without installing them: unpacked into one
# root, the dlock there runs on the libdlock.so.0 there and loads the
# modules there (DLOCK_MODULE_DIR), linking their client libraries from
# this system. "backends:" lists the modules it could load.
root=$work/root
for p in libdlock0 libdlock-dev dlock dlock-pitfalls python3-dlock \
    $(printf 'libdlock0-%s ' $modules); do
    dpkg-deb -x "$(deb "$p" "$arch")" "$root"
done
mkdir "$work/locks" "$work/no-modules"
run() { # MODULE_DIR ARGS...
    local dir=$1
    shift
    LD_LIBRARY_PATH=$root/$lib DLOCK_MODULE_DIR=$dir \
        "$root/usr/bin/dlock" "$@"
}
out=$(run "$root/$lib/dlock/modules" info "file://$work/locks" 2>&1) ||
    fail "the packaged dlock info failed: $out"
grep -qx "backends: ${modules} file" <<<"$out" ||
    fail "the packaged dlock did not load every module:" \
        "$(grep '^backends' <<<"$out")"
# Without its module a scheme is refused at once (no connection is tried),
# exit 64, naming the package to install.
for u in redis://127.0.0.1:1 zk://127.0.0.1:1 postgres://u@127.0.0.1:1/d \
         mysql://u@127.0.0.1:1/d etcd://127.0.0.1:1; do
    m=${u%%:*}
    rc=0
    out=$(run "$work/no-modules" info "$u" 2>&1) || rc=$?
    [ $rc = 64 ] && grep -q "libdlock0-$m" <<<"$out" ||
        fail "$u without its module: exit $rc" \
            "(expected 64, naming libdlock0-$m): $out"
done
echo "debian check: the unpacked dlock loads $modules;" \
    "a missing module names its package"
# python3-dlock, unpacked, over the unpacked libdlock.so.0.
(cd "$work" && LD_LIBRARY_PATH=$root/$lib PYTHONPATH=$root/${pydir%/dlock} \
    /usr/bin/python3 -c '
import sys, dlock
assert dlock.__file__.startswith(sys.argv[1]), dlock.__file__
with dlock.Client(sys.argv[2]) as c, c.lock("py") as lk:
    assert lk.owned()
' "$root" "file://$work/locks") || fail "python3-dlock does not run"
echo "debian check: python3-dlock imports and locks"
# `dlock demo pitfalls` runs the unpacked dlock-pitfalls ($DLOCK_LIBEXEC_DIR:
# the configured /usr/libexec/dlock is not where it was unpacked); without
# it, exit 69 naming the package.
out=$(DLOCK_LIBEXEC_DIR=$root/usr/libexec/dlock run "$work/no-modules" \
    demo pitfalls --help 2>&1) ||
    fail "the packaged dlock demo pitfalls --help failed: $out"
grep -q '^usage: dlock demo pitfalls' <<<"$out" ||
    fail "dlock demo pitfalls --help printed no usage: $out"
rc=0
out=$(DLOCK_LIBEXEC_DIR=$work/no-modules run "$work/no-modules" \
    demo pitfalls --help 2>&1) || rc=$?
[ $rc = 69 ] && grep -q 'Debian package dlock-pitfalls' <<<"$out" ||
    fail "dlock demo pitfalls without dlock-pitfalls: exit $rc" \
        "(expected 69, naming the package): $out"
echo "debian check: dlock demo pitfalls runs the unpacked dlock-pitfalls;" \
    "without it, exit 69 naming its package"

# libdlock-dev is enough to build a program with pkg-config, shared and
# static (the archive's client libraries come from the -dev packages it
# depends on, installed here as build dependencies).
consumer=$src/tests/install/consumer.c
pc() { PKG_CONFIG_PATH=$root/$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root \
    pkg-config "$@" dlock; }
cc -std=c11 -Wall -Wextra -Werror "$consumer" -o "$work/consumer" \
    $(pc --cflags) $(pc --libs) || fail "no shared build against libdlock-dev"
LD_LIBRARY_PATH=$root/$lib "$work/consumer" "file://$work/locks" >/dev/null ||
    fail "the program built against libdlock-dev did not run"
cc -std=c11 "$consumer" -o "$work/consumer-static" $(pc --cflags) \
    "$root/$lib/libdlock.a" $(pc --static --libs-only-l | sed 's/-ldlock//') ||
    fail "no static build against libdlock-dev"
"$work/consumer-static" "file://$work/locks" >/dev/null ||
    fail "the static program built against libdlock-dev did not run"
echo "debian check: programs build with pkg-config against libdlock-dev" \
    "(shared, static) and run"

for p in libdlock0 libdlock-dev dlock dlock-pitfalls python3-dlock \
    $(printf 'libdlock0-%s ' $modules); do
    printf 'debian check: %-18s Depends: %s\n' "$p" \
        "$(dpkg-deb -f "$(deb "$p" "$arch")" Depends)"
done
echo "debian check: packages built, lintian clean of errors," \
    "contents as expected"
