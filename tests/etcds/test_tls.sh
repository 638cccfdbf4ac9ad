#!/usr/bin/env bash
# tests/etcds/test_tls.sh: etcds://'s refusals, against the etcdtls test
# server (one etcd member that wants a client certificate its CA signed).
# Each case is one `dlock exec`; the exit code and the message are checked:
#   no client certificate             77 (refused credentials), says so
#   a CA that did not sign the member 69, "certificate verification"
#   cert= without key=                64, names key
#   a cacert= file that is missing    66, names cacert
#   cacert= on plain etcd://          64, names cacert and says etcds://
# and the whole URI, with its certificate, takes the lock (0).
set -u
DLOCK=${DLOCK_TEST_DLOCK:?set by meson}
dir=${DLOCK_TEST_ETCDTLS_DIR:?run under with-servers.sh etcdtls}
uri=${DLOCK_TEST_ETCDTLS_URI:?run under with-servers.sh etcdtls}
base=${uri%%\?*}
work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-etcds.XXXXXXXX")
trap 'rm -rf "$work"' EXIT
export DLOCK_URI=
n=0 fails=0

# check DESCRIPTION STATUS REGEX URI: dlock exec on URI exits STATUS and its
# one line on stderr matches REGEX (grep -E, any case); REGEX "": silent.
check() {
    local d=$1 want=$2 re=$3 u=$4 st said=1
    "$DLOCK" exec --uri "$u" --timeout 3s etcds-tls -- true 2>"$work/err"
    st=$?
    n=$((n + 1))
    if [ -z "$re" ]; then
        [ -s "$work/err" ] || said=0
    elif [ "$(wc -l <"$work/err")" = 1 ] && grep -qiE -- "$re" "$work/err"; then
        said=0
    fi
    if [ "$said" = 0 ] && [ "$st" = "$want" ]; then
        echo "ok $n - $d: $want ($(head -c 160 "$work/err"))"
    else
        fails=$((fails + 1))
        echo "not ok $n - $d: exit $st (want $want): $(cat "$work/err")"
    fi
}

# Another CA, which signed neither the member nor the client.
if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$work/other.key" -out "$work/other.pem" -days 1 \
    -subj /CN=dlock-other-ca >/dev/null 2>&1; then
    echo "Bail out! openssl could not make a CA"
    exit 99
fi
ca=$dir/ca.pem cert=$dir/client.pem key=$dir/client.key

check "the whole URI takes the lock" 0 "" "$uri"
check "no client certificate: refused credentials" 77 \
    "refused the client certificate.*cert= and key=" "$base?cacert=$ca"
check "a certificate another CA signed: refused credentials" 77 \
    "refused the client certificate" \
    "$base?cacert=$ca&cert=$work/other.pem&key=$work/other.key"
check "the wrong CA: the member's certificate does not verify" 69 \
    "certificate verification failed" \
    "$base?cacert=$work/other.pem&cert=$cert&key=$key"
check "cert= without key=" 64 "^dlock exec: .*: key: missing; cert= is given" \
    "$base?cacert=$ca&cert=$cert"
check "key= without cert=" 64 ": cert: missing; key= is given" \
    "$base?cacert=$ca&key=$key"
check "a missing cacert= file" 66 "cacert: cannot read '$work/nope.pem'" \
    "$base?cacert=$work/nope.pem&cert=$cert&key=$key"
check "an empty key=" 64 "key: expected a file path" \
    "$base?cacert=$ca&cert=$cert&key="
check "cacert= on etcd://" 64 "cacert: .*use etcds://" \
    "etcd://${base#etcds://}?cacert=$ca"
check "cert= on etcd://" 64 "cert: .*use etcds://" \
    "etcd://${base#etcds://}?cert=$cert&key=$key"
check "a file that is no certificate: names the parameters" 64 \
    "cacert/cert/key: libcurl cannot use" \
    "$base?cacert=$ca&cert=$key&key=$key"
check "plain http to the TLS port: unreachable" 69 "no member" \
    "etcd://${base#etcds://}"

echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
