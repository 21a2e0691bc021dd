#!/usr/bin/env bash
# CLI test of `dhs trace gen|info`. Usage: bash tests/cli/trace.sh path/to/dhs
set -u
DHS=${1:?usage: trace.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_trace.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"


# help and usage errors
expect 0 "$DHS" trace --help
grep -q "gen" "$T/out" && grep -q "info" "$T/out" || fail "trace --help lists gen and info"
expect 0 "$DHS" trace gen --help
grep -q -- "--out" "$T/out" && grep -q -- "--spec" "$T/out" || fail "gen --help lists --out and --spec"
expect 0 "$DHS" trace info --help
grep -q -- "--json" "$T/out" || fail "info --help lists --json"
expect 2 "$DHS" trace
expect 2 "$DHS" trace nosuch
[ -s "$T/err" ] || fail "unknown subcommand: message on stderr"
expect 2 "$DHS" trace gen --bogus 1 --out "$T/x.dtr"
grep -q "bogus" "$T/err" || fail "bad flag named on stderr: $(cat "$T/err")"
expect 2 "$DHS" trace gen --requests 4
grep -q -- "--out" "$T/err" || fail "missing --out explained"
expect 2 "$DHS" trace gen --out "$T/x.dtr" --k abc
expect 2 "$DHS" trace gen --out "$T/x.dtr" --accept 1.5
expect 2 "$DHS" trace gen --out "$T/x.dtr" --order random
expect 2 "$DHS" trace gen --out /nonexistent/dir/x.dtr --rounds 1 --k 16 --context 64
expect 2 "$DHS" trace info
expect 2 "$DHS" trace info "$T/missing.dtr"
[ -s "$T/err" ] || fail "missing file: message on stderr"
expect 2 "$DHS" trace info --frobnicate "$T/missing.dtr"

# gen then info
expect 0 "$DHS" trace gen --out "$T/a.dtr" --requests 4 --rounds 50 --seed 42 --k 256 --context 4096 \
    --spec 3 --producers 2
grep -q "^seed 42" "$T/out" || fail "gen prints the seed: $(cat "$T/out")"
cat "$T/out"
expect 0 "$DHS" trace info "$T/a.dtr"
cat "$T/out"
for key in trace_version name groups sources requests rounds request_rounds queries entries selected_entries \
    padding_share duplicate_entries distinct_rows mean_union_rows prev_round_overlap mean_reuse_distance \
    spec_overlap producer_overlap mean_accepted bytes read_s; do
    grep -q "^$key " "$T/out" || fail "info output lacks key '$key'"
done
grep -q "^requests  *4 " "$T/out" || fail "info: 4 requests"
grep -q "^rounds  *50$" "$T/out" || fail "info: 50 rounds"
grep -q "^duplicate_entries  *0$" "$T/out" || fail "info: no duplicates"
grep -q "^entries  *307200$" "$T/out" || fail "info: 4 x 50 x 3 x 2 x 256 = 307200 entries"

expect 0 "$DHS" trace info --json "$T/a.dtr"
for key in requests rounds entries padding_share distinct_rows mean_reuse_distance prev_round_overlap \
    spec_overlap producer_overlap read_mentries_per_s; do
    grep -q "\"$key\":" "$T/out" || fail "info --json lacks key '$key'"
done
if command -v python3 >/dev/null; then
    python3 - "$T/out" <<'EOF' || fail "info --json values"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["requests"] == 4 and d["rounds"] == 50, d
assert d["entries"] == 4 * 50 * 3 * 2 * 256, d["entries"]
assert d["k_max"] == 3 and d["groups"] == 2 and d["k"] == [256, 256]
assert 0.7 <= d["producer_overlap"] <= 1.0, d["producer_overlap"]
assert 0.8 <= d["spec_overlap"] <= 1.0, d["spec_overlap"]
assert 0.0 < d["prev_round_overlap"] <= 1.0
assert d["duplicate_entries"] == 0
assert json.loads(d["meta"])["seed"] == 42
EOF
fi

# determinism: same seed identical bytes, other seed different
expect 0 "$DHS" trace gen --out "$T/b.dtr" --requests 4 --rounds 50 --seed 42 --k 256 --context 4096 \
    --spec 3 --producers 2
cmp -s "$T/a.dtr" "$T/b.dtr" || fail "same seed gives different files"
expect 0 "$DHS" trace gen --out "$T/c.dtr" --requests 4 --rounds 50 --seed 43 --k 256 --context 4096 \
    --spec 3 --producers 2
cmp -s "$T/a.dtr" "$T/c.dtr" && fail "different seeds give identical files"

# short histories: padding
expect 0 "$DHS" trace gen --out "$T/p.dtr" --requests 2 --rounds 20 --k 512 --context 300 --context-min 10
expect 0 "$DHS" trace info --json "$T/p.dtr"
grep -q '"padding_share":[[:space:]]*0\.[0-9]*[1-9]' "$T/out" || fail "short histories give padding"

# damaged files: exit 2 with a message
size=$(stat -c %s "$T/a.dtr")
head -c $((size / 2)) "$T/a.dtr" >"$T/trunc.dtr"
expect 2 "$DHS" trace info "$T/trunc.dtr"
grep -qi "truncated" "$T/err" || fail "truncated file reported as truncated: $(cat "$T/err")"
cp "$T/a.dtr" "$T/flip.dtr"
printf '\x7f' | dd of="$T/flip.dtr" bs=1 seek=$((size / 3)) conv=notrunc status=none
expect 2 "$DHS" trace info "$T/flip.dtr"
grep -qi "corrupt\|checksum" "$T/err" || fail "flipped byte reported as corruption: $(cat "$T/err")"
printf 'hello world, not a trace at all....................................' >"$T/text.dtr"
expect 2 "$DHS" trace info "$T/text.dtr"
grep -qi "magic" "$T/err" || fail "text file reported as bad magic: $(cat "$T/err")"

finish trace
