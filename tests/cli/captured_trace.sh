#!/usr/bin/env bash
# A trace captured from transformers' DeepseekV32ForCausalLM (a tiny model with random weights, on the
# H200, by python/examples/capture_trace.py with dhisparse.trace.IndexerCapture) is read and replayed by
# the tools as any trace: `dhs trace info` sees the capture's shape, `dhs trace stats` measures it (random
# weights: its consecutive-step overlap is the random one, k/V, within a few points - no real locality),
# and `dhs sim` replays it with OPT no worse than LRU.
# Usage: bash tests/cli/captured_trace.sh path/to/dhs
set -u
DHS=${1:?usage: captured_trace.sh path/to/dhs}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TR=$ROOT/tests/data/tiny_dsv32_random.dhst
T=$(mktemp -d /tmp/dhs_cli_captured.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"
command -v python3 >/dev/null || { echo "captured_trace: no python3" >&2; exit 77; }

expect 0 "$DHS" trace info "$TR" --json -q
python3 - "$T/out" <<'PY' || fail "trace info of the captured trace: $(head -c 400 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert "no real locality" in d["name"] and json.loads(d["meta"])["model"] == "DeepseekV32ForCausalLM", d
assert d["groups"] == 2 and d["k"] == [64, 64] and d["requests"] == 2 and d["requests_ended"] == 2, d
assert d["rounds"] == 32 and d["request_rounds"] == 64 and d["entries"] == 64 * 2 * 64, d
assert d["padding_entries"] == 0 and d["duplicate_entries"] == 0, d
PY
expect 0 "$DHS" trace stats "$TR" --json
python3 - "$T/out" <<'PY' || fail "trace stats of the captured trace: $(head -c 400 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["request_rounds"] == 64 and len(d["groups"]) == 2, d
for g in d["groups"]:
    # random weights: the overlap of consecutive steps is the random k/V, within 0.05
    assert abs(g["alpha"] - g["random_alpha"]) < 0.05, g
h = d["hit_rate_all"]
assert all(0 <= x <= 1 for x in h) and h == sorted(h), h
PY
expect 0 "$DHS" sim --trace "$TR" --policies lru,opt --hot 64,128 --page-rows 16 --json -q
python3 - "$T/out" <<'PY' || fail "sim on the captured trace: $(head -c 400 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"] if "runs" in d else d["results"]
by = {(r["policy"], r["hot"]): r["miss_ratio"] for r in runs}
for hot in (64, 128):
    assert by[("opt", hot)] <= by[("lru", hot)] + 1e-12, by
PY
finish captured_trace
