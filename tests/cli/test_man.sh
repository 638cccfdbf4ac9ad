#!/usr/bin/env bash
# tests/cli/test_man.sh PAGE: dlock(1) renders without a single groff
# warning, and documents every command and the password options.
set -u
page=${1:?usage: test_man.sh PAGE}
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
out=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
[ $? = 0 ] && [ -z "$out" ] && ok "renders without a warning" || not_ok "groff: $out"
for c in $("$DLOCK_TEST_DLOCK" --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p'); do
    grep -q "^\.SS $c\$" "$page" && ok "documents $c" || not_ok "no section for $c"
done
groff -man -Tascii "$page" 2>/dev/null | grep -q -- "--password-file" && ok "the rendered page has --password-file" ||
    not_ok "no --password-file in the rendered page"
echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
