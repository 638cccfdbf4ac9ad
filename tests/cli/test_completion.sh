#!/usr/bin/env bash
# tests/cli/test_completion.sh: the bash completion completes this dlock's
# own commands, options and URI schemes (it reads them from --help).
set -u
DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
here=$(cd "$(dirname "$0")" && pwd)
n=0 fails=0
complete_words() { # words...: what completing the last word offers
    bash -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
        _dlock; printf "%s\n" "${COMPREPLY[@]}"' _ \
        "$here/../../tools/completion/dlock.bash" "$DLOCK" "$@" | sort | tr '\n' ' '
}
check() { # description want-word words...
    local d=$1 want=$2 got
    shift 2
    got=$(complete_words "$@")
    n=$((n + 1))
    if [[ " $got " == *" $want "* ]]; then
        echo "ok $n - $d"
    else
        fails=$((fails + 1))
        echo "not ok $n - $d: offered '$got'"
    fi
}
check "commands" exec ex
check "commands: all of them" scenario ""
check "exec's options" --timeout exec --ti
check "exec's flock options" --nonblock exec --non
check "exec's short options" -w exec -w
check "elect is a command" elect el
check "elect's options" --kill-after elect --ki
check "elect: a command after --" sleep elect n -- slee
check "info's options" --json info --j
check "bench's --from-json" --from-json bench --fro
check "demo's demos" pitfalls demo pi
check "demo pitfalls' own options" --only demo pitfalls --on
check "demo pitfalls --only: the recipes" zk-herd demo pitfalls --only zk
check "scenario names" holder-reconnect scenario holder-re
check "scenario all" all scenario a
check "scenario's --node-cmd" --node-cmd scenario all --no
check "latch's actions" await latch aw
check "latch's options" --timeout latch await --ti
check "URI schemes of this build" redis:// exec --uri re
check "URI schemes: redlock" redlock:// exec --uri redl
if "$DLOCK" info 2>/dev/null | grep -q '^backends:.* etcd'; then
    check "URI schemes: etcds, etcd over TLS" etcds:// exec --uri etcds
fi
check "after exec NAME --: a command" bash exec job -- bas
got=$(complete_words exec --zzz)
n=$((n + 1))
[ -z "${got// /}" ] && echo "ok $n - nothing for an option that does not exist" ||
    { fails=$((fails + 1)); echo "not ok $n - offered '$got' for --zzz"; }
echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
