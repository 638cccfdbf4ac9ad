#!/usr/bin/env bash
# tests/cli/test_man.sh PAGE1 PAGE3 HEADER: dlock(1) and dlock(3) render
# without a single groff warning; dlock(1) documents every command and the
# password options, dlock(3) every function of the public header.
set -u
page=${1:?usage: test_man.sh PAGE1 PAGE3 HEADER}
page3=${2:?usage: test_man.sh PAGE1 PAGE3 HEADER}
header=${3:?usage: test_man.sh PAGE1 PAGE3 HEADER}
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
# The one exit-code table: every status `dlock --help` lists is in the
# page's EXIT STATUS, with its sysexits name.
exits=$(groff -man -Tascii "$page" 2>/dev/null | col -bx | sed -n '/^EXIT STATUS/,/^SEE ALSO/p')
for c in $("$DLOCK_TEST_DLOCK" --help | sed -n '/^exit status/,$s/^  \([0-9][0-9]*\) .*/\1/p'); do
    name=$("$DLOCK_TEST_DLOCK" --help | sed -n "/^exit status/,\$s/^  $c  *\(EX_[A-Z]*\).*/\1/p")
    grep -qE "^ +$c( \($name\))?\b" <<<"$exits" || not_ok "EXIT STATUS lacks $c $name"
done
grep -q "77 (EX_NOPERM)" <<<"$exits" && grep -q "66 (EX_NOINPUT)" <<<"$exits" &&
    grep -q "73 (EX_CANTCREAT)" <<<"$exits" &&
    ok "EXIT STATUS has the table of \`dlock --help\` (77, 66, 73...)" ||
    not_ok "EXIT STATUS: $exits"
out=$(groff -man -Tutf8 -ww -z "$page3" 2>&1)
[ $? = 0 ] && [ -z "$out" ] && ok "dlock(3) renders without a warning" || not_ok "groff: $out"
for f in $(grep -oE 'DLOCK_API[^;(]*\b(dlock_[a-z_0-9]+) *\(' "$header" | grep -oE 'dlock_[a-z_0-9]+ *\(' | tr -d ' ('); do
    grep -q "^\.SS $f\$" "$page3" || not_ok "dlock(3) has no $f"
done
nf=$(grep -c '^\.SS dlock_' "$page3")
[ "$nf" -ge 20 ] && ok "dlock(3) documents the header's $nf functions" || not_ok "dlock(3): $nf functions"
echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
