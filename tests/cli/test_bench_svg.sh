#!/usr/bin/env bash
# tests/cli/test_bench_svg.sh JSON...: `dlock bench --from-json JSON --svg`
# draws a chart that rsvg-convert renders to a PNG about 1000 px wide and
# no taller than its rows need, with a row label for every result and
# log axes whose ticks increase left to right. Runs on saved figures (a
# small fixture, and docs/results/bench.json), so it needs no server.
# Also: the exit codes of --from-json for a missing file, a file that is
# not a bench's JSON, and a measuring option given with it.
set -u
[ $# -ge 1 ] || { echo "usage: test_bench_svg.sh JSON..." >&2; exit 2; }
dlock=${DLOCK_TEST_DLOCK:?DLOCK_TEST_DLOCK: the dlock program}
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

command -v rsvg-convert >/dev/null 2>&1 ||
    not_ok "no rsvg-convert: install librsvg2-bin (scripts/setup-debian.sh)"

for json in "$@"; do
    name=$(basename "$json" .json)
    svg=$tmp/$name.svg png=$tmp/$name.png
    if ! "$dlock" bench --from-json "$json" --svg "$svg" 2>"$tmp/err"; then
        not_ok "$name: dlock bench --from-json failed: $(cat "$tmp/err")"
        continue
    fi
    ok "$name: written"
    if rsvg-convert -o "$png" "$svg" 2>"$tmp/err" && [ ! -s "$tmp/err" ]; then
        ok "$name: rsvg-convert renders it"
    else
        not_ok "$name: rsvg-convert: $(cat "$tmp/err")"
        continue
    fi
    # The rest is read by Python: PNG header, JSON, and the SVG's text.
    python3 - "$json" "$svg" "$png" <<'EOF'
import html, json, re, struct, sys

fails = 0
def check(cond, what):
    global fails
    print(("  ok - " if cond else "  not ok - ") + what)
    fails += 0 if cond else 1

js, svg, png = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), \
    open(sys.argv[3], "rb").read()
rows = js["results"]

# PNG: the IHDR chunk follows the 8-byte signature and its length and type.
check(png[:8] == b"\x89PNG\r\n\x1a\n", "a PNG")
w, h = struct.unpack(">II", png[16:24])
check(900 <= w <= 1100, f"PNG width {w} is about 1000")
check(200 <= h <= 250 + 25 * len(rows), f"PNG height {h} fits {len(rows)} rows")

# Every result has its row label: scheme/mode, or the URI when dlock info
# failed (as bench_report.c's label_of()).
labels = [html.unescape(re.sub(r"<[^>]*>", "", t))
          for t in re.findall(r'<text class="label"[^>]*>(.*?)</text>', svg, re.S)]
check(len(labels) == len(rows), f"{len(labels)} row labels for {len(rows)} results")
for r in rows:
    want = f"{r['scheme']}/{r['mode']}" if r.get("scheme") and r.get("mode") else r["uri"]
    check(want in labels, f"row label {want!r}")

# Each axis: at least two ticks, x and value strictly increasing together.
axes = re.findall(r'<g class="axis"[^>]*>(.*?)</g>', svg, re.S)
check(len(axes) == 3, f"{len(axes)} log axes (uncontended, hand-off, throughput)")
for i, a in enumerate(axes):
    ticks = [(float(x), float(v)) for x, v in
             re.findall(r'<text class="tick" x="([^"]+)"[^>]*data-v="([^"]+)"', a)]
    inc = all(b[0] > a_[0] and b[1] > a_[1] for a_, b in zip(ticks, ticks[1:]))
    check(len(ticks) >= 2 and inc, f"axis {i}: ticks {[v for _, v in ticks]} increase")
sys.exit(1 if fails else 0)
EOF
    if [ $? = 0 ]; then ok "$name: size, row labels and axes"; else not_ok "$name: see above"; fi
done

# --from-json: 66 for a file it cannot read, 65 for one that is not a
# bench's JSON, 64 when a measuring option comes with it.
"$dlock" bench --from-json "$tmp/none.json" 2>/dev/null
[ $? = 66 ] && ok "--from-json of a missing file: 66" || not_ok "missing file: not 66"
echo '{"results": 3}' >"$tmp/bad.json"
"$dlock" bench --from-json "$tmp/bad.json" --svg "$tmp/bad.svg" 2>/dev/null
[ $? = 65 ] && ok "--from-json of another JSON: 65" || not_ok "another JSON: not 65"
"$dlock" bench --from-json "$1" --uri file:///tmp/x --svg "$tmp/x.svg" 2>/dev/null
[ $? = 64 ] && ok "--from-json with --uri: 64" || not_ok "--from-json with --uri: not 64"

echo "1..$n"
echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
