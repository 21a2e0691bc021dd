#!/usr/bin/env bash
# CLI test of `dhs bench serve --spec auto,1,2,4` on the CPU backend (the GPU figures come from the H200):
# --help lists --spec, --spec-max and --accept; bad widths and acceptance models exit 2 before any work; a
# small sweep at two loads runs every width at every load with throughput, TPOT p50/p99, mean K, K range,
# acceptance and host rows per token; auto's K stays within 1..spec_max and a fixed width never passes its
# K; the acceptance model sets acceptance (0: no draft accepted, 1: every draft accepted, exactly) while
# every session's tokens stay the same in every width; the summary puts the widths side by side.
# Usage: bash tests/cli/bench_serve_spec.sh path/to/dhs
set -u
DHS=${1:?usage: bench_serve_spec.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_spec.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

expect 0 "$DHS" bench serve --help
for f in --spec --spec-max --accept; do
    grep -q -- "^  $f " "$T/out" || fail "bench serve --help does not list $f"
done

for args in "--spec 0" "--spec 9" "--spec auto,auto" "--spec 2,x" "--spec ," "--spec 2 --spec-max 4" "--spec-max 9 --spec auto" \
            "--accept 1.5" "--accept 0.9:0.5" "--accept x" "--accept 0.5:" "--spec auto --spec-max 4 --tokens 4"; do
    expect 2 "$DHS" bench serve --geometry tiny $args
    [ -s "$T/out" ] && fail "bench serve $args wrote to stdout"
    [ -s "$T/err" ] || fail "bench serve $args: no message"
done

# two loads, four widths, the fixed mode (no imported history on the device: every round copies from host)
RUN=(bench serve --geometry tiny --context 1024 --modes fixed --device-budget-gib 0.05 --tokens 8 --json -q)
expect 0 "$DHS" "${RUN[@]}" --concurrency 2,4 --spec auto,1,2,4 --accept 0.6:0.9
cp "$T/out" "$T/a.json"
expect 0 "$DHS" "${RUN[@]}" --concurrency 3 --spec 2,auto --spec-max 2 --accept 0
cp "$T/out" "$T/zero.json"
expect 0 "$DHS" "${RUN[@]}" --concurrency 3 --spec 4 --accept 1
cp "$T/out" "$T/one.json"
python3 - "$T/a.json" "$T/zero.json" "$T/one.json" <<'EOF' || fail "bench serve --spec: $(head -c 600 "$T/a.json")"
import json, sys
a, zero, one = (json.load(open(p)) for p in sys.argv[1:4])
bad = []
def check(c, msg):
    if not c:
        bad.append(msg)
cf = a["config"]
check(cf["spec_list"] == "auto,1,2,4" and cf["spec_max"] == 4 and cf["spec"] == 4, f"config {cf}")
check(cf["accept"] == {"lo": 0.6, "hi": 0.9}, f"accept {cf.get('accept')}")
check(a["tokens_identical"] is True and a["token_mismatches"] == 0, "tokens differ between widths")
recs = a["records"]
seen = {(r["max_concurrency"], r["spec"]) for r in recs}
check(seen == {(c, k) for c in (2, 4) for k in ("auto", 1, 2, 4)}, f"records {sorted(map(str, seen))}")
for r in recs:
    tag = f"C={r['max_concurrency']} K={r['spec']}"
    check("skipped" not in r, f"{tag} skipped: {r.get('skipped')}")
    if "skipped" in r:
        continue
    for k in ("output_throughput", "median_tpot_ms", "p99_tpot_ms", "mean_k", "k_min", "k_max", "acceptance",
              "host_rows_per_token"):
        check(k in r, f"{tag}: no {k}")
    check(r["output_throughput"] > 0 and 0 < r["median_tpot_ms"] <= r["p99_tpot_ms"], f"{tag}: throughput/TPOT {r}")
    check(r["completed"] == 2 * r["max_concurrency"], f"{tag}: completed {r['completed']}")
    check(r["host_rows_per_token"] > 0, f"{tag}: no host rows in the fixed mode")
    kmax = 4 if r["spec"] == "auto" else r["spec"]
    check(r["spec_max"] == kmax, f"{tag}: spec_max {r['spec_max']}")
    check(1 <= r["k_min"] <= r["k_max"] <= kmax and r["k_min"] <= r["mean_k"] <= r["k_max"],
          f"{tag}: K {r['k_min']}..{r['k_max']} mean {r['mean_k']} outside 1..{kmax}")
    if r["spec"] == 1:
        check(r["mean_k"] == 1 and r["acceptance"] == 0, f"{tag}: K=1 with drafts")
    if r["spec"] == 2:  # the model's rates 0.6..0.9, a few dozen drafts
        check(0.4 <= r["acceptance"] <= 1.0, f"{tag}: acceptance {r['acceptance']} for a model of 0.6..0.9")
ss = a["spec_summary"]
check(len(ss) == 2 and all(len(s["widths"]) == 4 and "auto_vs_best_fixed" in s for s in ss), f"spec_summary {ss}")
# acceptance 0: no draft is ever accepted, and auto (at most 2) stays within 1..2
for r in zero["records"]:
    check(r["acceptance"] == 0, f"--accept 0: K={r['spec']} acceptance {r['acceptance']}")
    check(1 <= r["k_min"] <= r["k_max"] <= 2, f"--accept 0 --spec-max 2: K {r['k_min']}..{r['k_max']}")
check(zero["tokens_identical"] is True, "--accept 0: tokens differ")
# acceptance 1: every draft the target's own token, every one accepted
r4 = [r for r in one["records"] if r["spec"] == 4][0]
check(r4["acceptance"] == 1 and r4["k_max"] == 4, f"--accept 1: acceptance {r4['acceptance']}")
check(one["tokens_identical"] is True, "--accept 1: tokens differ")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF

# the table carries the widths side by side
expect 0 "$DHS" bench serve --geometry tiny --context 1024 --modes adaptive --device-budget-gib 0.05 --tokens 6 -q \
    --concurrency 2 --spec 1,auto
grep -q "^widths at adaptive L=1024 C=2: K=1 .* auto (mean K [0-9.]*) .* auto / best fixed (K=1) [0-9.]*x" "$T/out" ||
    fail "table: no widths line: $(cat "$T/out")"
grep -q "^mode .* K |  held mean K  acc " "$T/out" || fail "table: no K columns"
finish bench_serve_spec
