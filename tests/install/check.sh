#!/usr/bin/env bash
# check.sh BUILDDIR: `meson install` into a scratch prefix, then build a
# program with `pkg-config --cflags --libs dlock` (shared) and against
# libdlock.a with Libs.private, and run both on a file:// lock. Checks that
# dlock.pc gives consumers only the public header's include directory, and
# (when the build has backend modules) that the installed libdlock.so and
# dlock need no server's client library, and that the installed dlock runs
# the installed dlock-pitfalls; that the Python package, when built, runs
# from where it was installed. With DLOCK_TEST_REDIS_URI set (run it under
# tests/servers/with-servers.sh redis), the installed `dlock` reaches Redis
# through its installed module, says which package to install when the
# module is missing, and the static program reaches it with no module.
set -euo pipefail
build=${1:?usage: check.sh BUILDDIR}
here=$(cd "$(dirname "$0")" && pwd)
dest=$(mktemp -d /tmp/dlock-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions |
    sed -n 's/.*"name": "prefix", "value": "\([^"]*\)".*/\1/p')
[ -n "$prefix" ] || prefix=/usr/local
root=$dest$prefix
pcdir=$(dirname "$(find "$root" -name dlock.pc | head -n 1)")
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$dest
test -f "$root/include/dlock/dlock.h"
test -f "$root/include/dlock/backend.h"
test -f "$root/share/man/man1/dlock.1" || { echo "install check: no dlock(1)"; exit 1; }
test -f "$root/share/man/man3/dlock.3" || { echo "install check: no dlock(3)"; exit 1; }
test -f "$root/share/bash-completion/completions/dlock" ||
    { echo "install check: no bash completion"; exit 1; }
cflags=$(pkg-config --cflags dlock)
# Flag by flag, the installed include directory aside: the scratch
# prefix's random name may itself contain "-D" (dlock-install-DIWJcV
# failed a CI run) or a library's name.
for f in $cflags; do
    case $f in
    "-I$root/include") ;;
    -D*|*hiredis*|*postgresql*|*mariadb*|*mysql*)
        echo "install check: dlock.pc leaks into consumers: Cflags: $cflags"
        exit 1 ;;
    esac
done
libdir=$(pkg-config --variable=libdir dlock)
cc -std=c11 -Wall -Wextra -Werror "$here/consumer.c" -o "$dest/consumer" \
    $cflags $(pkg-config --libs dlock) -Wl,-rpath,"$libdir"
mkdir -p "$dest/locks" "$dest/locks2" # file:// makes no directory
"$dest/consumer" "file://$dest/locks"
# The archive holds every backend, so a static program needs no module;
# its client libraries (Libs.private) link as shared ones: Debian ships no
# static libpq dependencies (libpgcommon, libpgport).
own=$(sed -n 's/^Libs.private: //p' "$pcdir/dlock.pc")
cc -std=c11 "$here/consumer.c" -o "$dest/consumer-static" \
    $cflags "$libdir/libdlock.a" $own
"$dest/consumer-static" "file://$dest/locks2"
echo "install check: shared and static consumers ran"

# The Python package, when the build has one: imported from where meson
# installed it (nothing of the build tree on the path), over the installed
# libdlock.so.0, it takes a file:// lock.
pydir=$(find "$root" -type d -path '*-packages/dlock' | head -n 1)
if [ -n "$pydir" ]; then
    mkdir -p "$dest/locks3"
    (cd "$dest" && LD_LIBRARY_PATH=$libdir PYTHONPATH=${pydir%/dlock} \
        /usr/bin/python3 -c '
import sys, dlock
assert dlock.__file__.startswith(sys.argv[1]), dlock.__file__
with dlock.Client(sys.argv[2]) as c, c.lock("installed") as lk:
    assert lk.owned() and lk.fence
' "$pydir" "file://$dest/locks3") ||
        { echo "install check: the installed Python package failed"; exit 1; }
    echo "install check: the Python package ran from ${pydir#"$dest"}"
fi

moddir=$libdir/dlock/modules
if ! ls "$moddir"/dlock-*.so >/dev/null 2>&1; then
    echo "install check: no backend modules (built with -Dmodules=false)"
    exit 0
fi
needs=$(ldd "$libdir/libdlock.so.0" | awk '{print $1}' | tr '\n' ' ')
case $needs in
*hiredis*|*zookeeper*|*libpq*|*mariadb*|*mysqlclient*)
    echo "install check: libdlock.so needs a client library: $needs"; exit 1 ;;
esac
# Nor does the command: the broken recipes of `dlock demo pitfalls` are
# the program dlock-pitfalls, in <libexecdir>/dlock/ when the build has
# hiredis or the ZooKeeper client, which the installed dlock runs.
cmd_needs=$(LD_LIBRARY_PATH=$libdir ldd "$root/bin/dlock" | awk '{print $1}' | tr '\n' ' ')
case $cmd_needs in
*hiredis*|*zookeeper*|*libpq*|*mariadb*|*mysqlclient*)
    echo "install check: dlock needs a client library: $cmd_needs"; exit 1 ;;
esac
libexec=$root/$(meson introspect "$build" --buildoptions |
    sed -n 's/.*"name": "libexecdir", "value": "\([^"]*\)".*/\1/p')/dlock
if [ -x "$libexec/dlock-pitfalls" ]; then
    DLOCK_LIBEXEC_DIR=$libexec LD_LIBRARY_PATH=$libdir "$root/bin/dlock" \
        demo pitfalls --help | grep -q '^usage: dlock demo pitfalls' ||
        { echo "install check: dlock demo pitfalls did not run $libexec/dlock-pitfalls"; exit 1; }
    echo "install check: dlock needs no client library; dlock demo pitfalls runs $libexec/dlock-pitfalls"
elif [ -f "$build/tools/dlock-pitfalls" ]; then
    echo "install check: dlock-pitfalls was built but not installed in $libexec"; exit 1
fi
echo "install check: libdlock.so needs $needs; modules: $(cd "$moddir" && echo dlock-*.so)"
[ -n "${DLOCK_TEST_REDIS_URI:-}" ] || exit 0
[ -f "$moddir/dlock-redis.so" ] || { echo "install check: no dlock-redis.so"; exit 1; }
run() { LD_LIBRARY_PATH=$libdir "$root/bin/dlock" "$@"; }
DLOCK_MODULE_DIR=$moddir run info --uri "$DLOCK_TEST_REDIS_URI" >"$dest/info" 2>&1 ||
    { cat "$dest/info"; echo "install check: dlock info through the module failed"; exit 1; }
grep -q '^backend: *redis' "$dest/info" ||
    { cat "$dest/info"; echo "install check: info did not reach redis"; exit 1; }
rc=0
DLOCK_MODULE_DIR=$dest/none run info --uri "$DLOCK_TEST_REDIS_URI" >"$dest/info" 2>&1 || rc=$?
if [ $rc != 64 ] || ! grep -q 'libdlock0-redis' "$dest/info"; then
    cat "$dest/info"
    echo "install check: a missing module gave exit $rc (expected 64, naming libdlock0-redis)"
    exit 1
fi
DLOCK_MODULE_DIR=$dest/none "$dest/consumer-static" "$DLOCK_TEST_REDIS_URI" >/dev/null ||
    { echo "install check: the static program could not reach redis"; exit 1; }
echo "install check: redis:// through the installed module; a missing module names its package; the static program needs none"
