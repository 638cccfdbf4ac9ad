#!/usr/bin/env bash
# check.sh BUILDDIR: `meson install` into a scratch prefix, then build a
# program with `pkg-config --cflags --libs dlock` (shared) and
# `--static` against it, and run both on a file:// lock.
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
cc -std=c11 -Wall -Wextra -Werror "$here/consumer.c" -o "$dest/consumer" \
    $(pkg-config --cflags --libs dlock) -Wl,-rpath,"$(pkg-config --variable=libdir dlock)"
"$dest/consumer" "file://$dest/locks"
# The archive, with its dependencies (Requires.private) linked as shared
# libraries: Debian ships no static libpq dependencies (libpgcommon,
# libpgport), so a fully static link is not what users here can do.
deps=$(pkg-config --print-requires-private dlock | awk '{print $1}')
own=$(sed -n 's/^Libs.private: //p' "$pcdir/dlock.pc")
cc -std=c11 "$here/consumer.c" -o "$dest/consumer-static" \
    $(pkg-config --cflags dlock) "$(pkg-config --variable=libdir dlock)/libdlock.a" \
    $(pkg-config --libs $deps) $own
"$dest/consumer-static" "file://$dest/locks2"
echo "install check: shared and static consumers ran"
