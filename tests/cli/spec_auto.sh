#!/usr/bin/env bash
# CLI test of `dhs serve-sim --spec auto|compare` (the online speculation width, include/dhs_spec_auto.h).
# Usage: bash tests/cli/spec_auto.sh path/to/dhs
set -u
DHS=${1:?usage: spec_auto.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_spec_auto.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

expect 0 "$DHS" serve-sim --help
for f in --spec-widths --accept-spread auto compare; do
    grep -q -- "$f" "$T/out" || fail "serve-sim --help names $f"
done
expect 2 "$DHS" serve-sim --spec sometimes
expect 2 "$DHS" serve-sim --spec compare --spec-widths 2,1
expect 2 "$DHS" serve-sim --spec compare --spec-widths 2.5
expect 2 "$DHS" serve-sim --accept-spread 1.5

# two loads, requests with different acceptance: off, K = 2, K = 4 and auto side by side
common=(--concurrency 4,24 --requests 240 --context 4096 --output-len 48 --modes resident,adaptive --accept-spread 0.3 -q)
expect 0 "$DHS" serve-sim --spec compare "${common[@]}" --json
cp "$T/out" "$T/cmp.json"
/usr/bin/python3 - "$T/cmp.json" <<'PY' || fail "compare: auto against the fixed widths"
import json, sys
d = json.load(open(sys.argv[1]))
runs = d["runs"]
seen = {(r["mode"], r["spec_width"], r["concurrency"]) for r in runs}
for m in ("resident", "adaptive"):
    for w in ("off", "K=2", "K=4", "auto"):
        for c in (4, 24):
            assert (m, w, c) in seen, (m, w, c)
for m in ("resident", "adaptive"):
    for c in (4, 24):
        tp = {r["spec_width"]: r["output_throughput"] for r in runs if r["mode"] == m and r["concurrency"] == c}
        fixed = [tp["K=2"], tp["K=4"]]
        print(f"{m} C={c}: off {tp['off']:.1f}, K=2 {tp['K=2']:.1f}, K=4 {tp['K=4']:.1f}, auto {tp['auto']:.1f} tok/s")
        # auto learns each request's acceptance and the step's costs: better than no speculation, and not
        # below the worse fixed width at this load
        assert tp["auto"] > tp["off"], (m, c, tp)
        assert tp["auto"] >= min(fixed), (m, c, tp)
PY
# the same seed and flags give the same runs (the controller is deterministic)
expect 0 "$DHS" serve-sim --spec auto "${common[@]}" --json
/usr/bin/python3 - "$T/cmp.json" "$T/out" <<'PY' || fail "auto alone equals auto in compare"
import json, sys
a = [r for r in json.load(open(sys.argv[1]))["runs"] if r["spec_width"] == "auto"]
b = json.load(open(sys.argv[2]))["runs"]
assert [r["spec_width"] for r in b] == ["auto"] * len(b), [r["spec_width"] for r in b]
assert [(r["mode"], r["concurrency"], r["output_throughput"], r["median_tpot_ms"]) for r in a] == \
       [(r["mode"], r["concurrency"], r["output_throughput"], r["median_tpot_ms"]) for r in b]
PY
finish spec_auto
