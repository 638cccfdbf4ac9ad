#!/usr/bin/env bash
# curator_interop.sh TEST_BINARY [ARGS...]: compile CuratorLock.java against
# Debian's Apache Curator jars into a temporary directory, then run
#   TEST_BINARY ARGS... --java JAVA --cp CLASSPATH
# (tests/zk/test_curator.c). Missing Java or jars are a FAILURE, not a skip:
# the interop promise is part of the zk backend, and scripts/setup-debian.sh
# installs what it needs (libcurator-recipes-java, libslf4j-java,
# default-jdk-headless).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
jars=/usr/share/java
missing=()
command -v javac >/dev/null 2>&1 || missing+=("javac (default-jdk-headless)")
command -v java >/dev/null 2>&1 || missing+=("java")
# curator-recipes.jar's manifest Class-Path names the rest (framework,
# client, zookeeper, jute, guava, slf4j-api); check them all the same.
for j in curator-recipes curator-framework curator-client zookeeper \
    zookeeper-jute guava slf4j-api; do
    [[ -r $jars/$j.jar ]] || missing+=("$jars/$j.jar")
done
# An slf4j binding that keeps Curator quiet.
binding=
for b in slf4j-nop slf4j-simple; do
    if [[ -r $jars/$b.jar ]]; then binding=$jars/$b.jar; break; fi
done
[[ -n $binding ]] || missing+=("$jars/slf4j-nop.jar (libslf4j-java)")
if ((${#missing[@]} > 0)); then
    echo "curator_interop: cannot run the Curator interop test; missing:" >&2
    printf '  %s\n' "${missing[@]}" >&2
    echo "curator_interop: scripts/setup-debian.sh installs them" >&2
    exit 1
fi

work=$(mktemp -d /tmp/dlock-curator-XXXXXX)
trap 'rm -rf "$work"' EXIT
cp="$jars/curator-recipes.jar:$binding"
javac -nowarn -d "$work" -cp "$cp" "$here/CuratorLock.java"
"$@" --java "$(command -v java)" --cp "$cp:$work"
