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
cc -std=c11 -Wall -Wextra -Werror "$here/consumer.c" -o "$dest/consumer" \
    $(pkg-config --cflags --libs dlock) -Wl,-rpath,"$(pkg-config --variable=libdir dlock)"
"$dest/consumer" "file://$dest/locks"
cc -std=c11 "$here/consumer.c" -o "$dest/consumer-static" \
    $(pkg-config --cflags dlock) "$(pkg-config --variable=libdir dlock)/libdlock.a" \
    $(pkg-config --libs-only-l --static dlock | sed 's/-ldlock//')
"$dest/consumer-static" "file://$dest/locks2"
echo "install check: shared and static consumers ran"
