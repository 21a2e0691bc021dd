#!/usr/bin/env bash
# CLI test of `dhs bench serve` on the CPU backend (the GPU figures come from bench/gpu_serve.sh): --help
# lists every flag; usage errors exit 2 before any work; a default sweep under a tiny device budget holds what
# each mode can hold (resident <= budget / resident bytes, the hierarchy more), every session completes and
# emits its tokens, the adaptive mode's device bytes are the budget, the fixed mode's fit it, the summary
# compares the modes; every session's tokens are the same in every mode and concurrency that served it; a configuration that does not fit is reported, not run; --plot writes the SVG; the
# table output carries the same summary.
# Usage: bash tests/cli/bench_serve.sh path/to/dhs
set -u
DHS=${1:?usage: bench_serve.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_serve.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

# ---------------------------------------------------------------- help
expect 0 "$DHS" bench serve --help
for f in --backend --geometry --context --concurrency --modes --device-budget-gib --host-budget-gib --tokens --spec \
         --waves --step --profile-every --topk-impl --seed --plot --quiet --json --output --and-capacity; do
    grep -q -- "^  \(-., \)\?$f " "$T/out" || fail "bench serve --help does not list $f"
done
expect 0 "$DHS" bench --help
grep -q "^  serve " "$T/out" || fail "dhs bench --help does not list serve"

# ---------------------------------------------------------------- usage errors (2), nothing on stdout
for args in "--modes resident,bogus" "--modes ," "--step graph" "--profile-every 4" "--tokens 1" "--tokens 2 --spec 4" \
            "--concurrency 4,2" "--and-capacity" "--context 100" "--device-budget-gib 0" "--geometry big" "--topk-impl radix"; do
    expect 2 "$DHS" bench serve --geometry tiny $args
    [ -s "$T/out" ] && fail "bench serve $args wrote to stdout"
    [ -s "$T/err" ] || fail "bench serve $args: no message"
done
expect 0 "$DHS" bench serve --help  # still fine after the errors

# ---------------------------------------------------------------- cpu: a default sweep under a tiny budget
B=0.004
expect 0 "$DHS" bench serve --geometry tiny --context 1024 --device-budget-gib $B --tokens 3 --json -q --plot "$T/p.svg"
cp "$T/out" "$T/sweep.json"
python3 - "$T/sweep.json" "$B" <<'EOF' || fail "bench serve sweep: $(head -c 600 "$T/sweep.json")"
import json, sys
d = json.load(open(sys.argv[1]))
budget = int(float(sys.argv[2]) * 2**30)
c = d["config"]
assert d["bench"] == "serve" and c["backend"] == "cpu" and c["geometry"] == "tiny" and c["step"] == "host", c
assert c["device_budget_bytes"] == budget and c["tokens"] == 3 and c["spec"] == 1 and c["waves"] == 2, c
for k in ("version", "commit", "date", "host", "device"):
    assert k in d, k
recs = d["records"]
modes = {}
for r in recs:
    assert "skipped" not in r, r  # the default sweep stays within each mode's capacity
    C = r["max_concurrency"]
    modes.setdefault(r["mode"], []).append(C)
    assert r["completed"] == 2 * C, r                     # closed loop: waves x slots sessions
    assert r["total_output_tokens"] == 2 * C * 2, r       # tokens - 1 decoded per session (no profiled rounds on cpu)
    assert r["sessions_held"] == C, r
    assert 0 < r["median_tpot_ms"] <= r["p99_tpot_ms"], r
    assert r["output_throughput"] > 0 and r["step_mean_ms"] > 0 and r["step_us"] is None, r
    assert r["device_bytes"] <= budget, r
    if r["mode"] == "adaptive":
        assert r["device_bytes"] == budget, r
    if r["mode"] == "fixed":
        assert r["host_rows_per_token"] > 0 and r["pcie_gbps"] >= 0, r
    if r["mode"] == "resident":
        assert r["host_rows_per_token"] == 0, r
    for k in ("duration", "mean_tpot_ms", "admission_waits", "reclaims", "decode_rounds", "mean_batch"):
        assert k in r, (k, r)
assert sorted(modes) == ["adaptive", "fixed", "resident"], modes
assert c["topk_impl"] == "split", c  # the default decode top-k
# the host's time around the target by part (rounds after a round with no import between): the host
# step has no control plane or launch, and the parts add up to the total
hp = [r["host_parts_us"] for r in recs if "host_parts_us" in r]
assert hp, "no record has host_parts_us"
for h in hp:
    parts = ("tail", "between", "head", "control", "prelaunch")
    assert h["rounds"] >= 1 and all(h[k] >= 0 for k in parts + ("meter", "verify")), h
    assert h["control"] == 0 and h["prelaunch"] == 0 and h["tail"] > 0 and h["head"] > 0, h
    assert abs(sum(h[k] for k in parts) - h["total"]) <= 1e-6 * h["total"] + 1e-9, h
    assert h["background"] >= 0, h  # dhs_background, overlapped with the step (hierarchical modes)
    # the tail by part (the host step: no logits copy, no meter snapshot, no control plane); the parts
    # are inside the tail, and the verification is timed in every round
    sub = ("tail_logits", "tail_meter", "tail_verify", "tail_end")
    assert all(h[k] >= 0 for k in sub), h
    assert h["tail_logits"] == 0 and h["tail_meter"] == 0 and h["tail_verify"] > 0, h
    assert sum(h[k] for k in sub) <= h["tail"] * (1 + 1e-9), h
    assert h["control_inputs"] == 0 and h["control_tables"] == 0 and h["control_upload"] == 0, h
# exactness across the sweep: a session's tokens depend on its prompt only, not on the batch or the storage
assert d["tokens_identical"] is True and d["token_mismatches"] == 0, d["token_mismatches"]
assert all(r["token_mismatches"] == 0 for r in recs), [r["token_mismatches"] for r in recs]
s = d["summary"]
assert len(s) == 1, s
s = s[0]
cap_r, cap_h = s["resident_capacity"], s["hier_capacity"]
# the sweep: powers of two below the capacity, then the capacity itself
want = lambda cap: [c for c in (1, 2, 4, 8, 16, 32) if c < cap] + [cap]
assert modes["resident"] == want(cap_r) and modes["adaptive"] == want(cap_h) and modes["fixed"] == want(cap_h), (modes, s)
assert cap_h > cap_r >= 1, s
assert s["resident_sessions_held"] == cap_r and s["hier_sessions_held"] == cap_h, s
assert cap_h == min(s["hier_device_capacity"], s["host_capacity"]), s
assert s["host_binds"] == (s["host_capacity"] < s["hier_device_capacity"]), s
assert abs(s["sessions_ratio"] - cap_h / cap_r) < 1e-9, s
best_r = max(r["output_throughput"] for r in recs if r["mode"] == "resident")
assert abs(s["resident_best_tok_s"] - best_r) < 1e-6 * best_r, s
assert s["equal_batch"] == cap_r and s["equal_batch_step_ratio"] > 0, s
EOF
grep -c "<polyline" "$T/p.svg" | grep -qx 3 || fail "--plot: expected 3 curves in the SVG"
grep -q "</svg>" "$T/p.svg" || fail "--plot: SVG not closed"

# ---------------------------------------------------------------- does not fit: reported, not run
expect 0 "$DHS" bench serve --geometry tiny --context 1024 --device-budget-gib $B --tokens 3 --modes resident \
    --concurrency 1,64 --json -q
python3 - "$T/out" <<'EOF' || fail "bench serve resident C=64: $(head -c 600 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["max_concurrency"]: x for x in d["records"]}
assert sorted(r) == [1, 64] and "skipped" not in r[1], r
assert r[64]["skipped"].startswith("does not fit"), r[64]
EOF

# ---------------------------------------------------------------- a synthetic geometry: histories generated together
# --and-capacity adds each mode's capacity to the list; at C = 2 the two sessions' histories are generated at
# once (histories_at_once), at C = 1 one by one: the sessions both ran must emit the same tokens. Every
# configuration's record lands in FILE.partial as it ends; a complete run removes it.
expect 0 "$DHS" bench serve --geometry glm-5.3 --context 512 --device-budget-gib 0.5 --tokens 3 --modes adaptive \
    --concurrency 1 --and-capacity --json -q --output "$T/g.json"
[ -e "$T/g.json.partial" ] && fail "bench serve --output: the partial records were left after a complete run"
# a FILE.partial already there is not the run's to overwrite: exit 2 before any work, both files untouched
echo PRECIOUS >"$T/p.json.partial"
echo PRECIOUS >"$T/p.json"
expect 2 "$DHS" bench serve --geometry glm-5.3 --context 512 --device-budget-gib 0.5 --tokens 3 --modes adaptive \
    --concurrency 1 --json -q --output "$T/p.json"
grep -q "p.json.partial exists" "$T/err" || fail "bench serve with a FILE.partial there: says so: $(cat "$T/err")"
[ "$(cat "$T/p.json.partial")" = PRECIOUS ] && [ "$(cat "$T/p.json")" = PRECIOUS ] ||
    fail "bench serve with a FILE.partial there: a file was changed"
python3 - "$T/g.json" <<'EOF' || fail "bench serve glm-5.3 --and-capacity: $(head -c 600 "$T/g.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"][0]
r = d["records"]
assert [x["max_concurrency"] for x in r] == [1, s["hier_capacity"]] and s["hier_capacity"] >= 2, (r, s)
for x in r:
    assert "skipped" not in x, x
    assert x["histories_at_once"] == min(x["max_concurrency"], 8), x
    assert x["prefill_s"] > 0 and x["start_s"] > 0 and x["decode_s"] > 0, x
    assert x["prefill_s"] + x["start_s"] + x["decode_s"] <= x["duration"], x
assert d["tokens_identical"] is True and all(x["token_mismatches"] == 0 for x in r), r
EOF

# --and-capacity below the list's largest C: resident's capacity runs in its place (its best throughput),
# the C it cannot hold is reported as not fitting
expect 0 "$DHS" bench serve --geometry glm-5.3 --context 512 --device-budget-gib 0.5 --tokens 3 --modes resident \
    --concurrency 1,200 --and-capacity --json -q --output "$T/ac.json"
python3 - "$T/ac.json" <<'EOF' || fail "bench serve --and-capacity below the list: $(head -c 600 "$T/ac.json")"
import json, sys
d = json.load(open(sys.argv[1]))
cap = d["summary"][0]["resident_capacity"]
r = d["records"]
assert 1 < cap < 200, cap
assert [x["max_concurrency"] for x in r] == [1, cap, 200], r
assert "skipped" not in r[1] and "skipped" in r[2], r
assert d["summary"][0]["resident_sessions_held"] == cap, d["summary"]
EOF

# ---------------------------------------------------------------- the table
expect 0 "$DHS" bench serve --geometry tiny --context 1024 --device-budget-gib $B --tokens 3 --modes resident,adaptive \
    --concurrency 1 -q
grep -q "^resident     1024    1    1 |" "$T/out" || fail "table: no resident row: $(head -c 400 "$T/out")"
grep -q "^context 1024: sessions held resident 1, hierarchical 1" "$T/out" || fail "table: no summary line"
grep -q "^context 1024: resident .* GiB/session -> holds 1; the hierarchy holds" "$T/out" || fail "table: no capacity line"
grep -q "^tokens: every session's tokens equal across the modes" "$T/out" || fail "table: no tokens line"

# ---------------------------------------------------------------- the host-row cache: same tokens, recorded
expect 0 "$DHS" bench serve --geometry tiny --context 1024 --device-budget-gib $B --tokens 3 --modes resident,adaptive \
    --concurrency 1 --waves 3 --host-cache-gib 0.25 --json -q
python3 - "$T/out" <<'EOF' || fail "bench serve --host-cache-gib: $(head -c 400 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["host_cache_bytes"] == 0.25 * 2**30, d["config"]
r = [x for x in d["records"] if "skipped" not in x]
assert d["tokens_identical"] is True and all(x["token_mismatches"] == 0 for x in r), r
EOF

# ---------------------------------------------------------------- host rows pinned ahead: same tokens, the time apart
expect 0 "$DHS" bench serve --geometry tiny --context 1024 --device-budget-gib $B --tokens 3 --modes resident,adaptive \
    --concurrency 2 --waves 2 --host-cache-fill --json -q
python3 - "$T/out" <<'EOF' || fail "bench serve --host-cache-fill: $(head -c 400 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["host_cache_fill"] is True, d["config"]
r = [x for x in d["records"] if "skipped" not in x]
assert d["tokens_identical"] is True and all(x["token_mismatches"] == 0 for x in r), r
h = [x for x in r if x["mode"] == "adaptive"]
assert h and all(x["host_fill_s"] > 0 for x in h), h
assert all(x["host_fill_s"] == 0 for x in r if x["mode"] == "resident"), r
EOF

# ---------------------------------------------------------------- cuda without a GPU: a clean refusal
if ! "$DHS" bench resolve --backend cuda --batch 1 --hot 2048 --misses 0 --queries 1 --reps 10 -q >/dev/null 2>&1; then
    expect 2 "$DHS" bench serve --backend cuda --geometry tiny --context 1024 --concurrency 1
    [ -s "$T/out" ] && fail "bench serve --backend cuda without a GPU wrote to stdout"
fi

# ---------------------------------------------------------------- per-layer hot-cache sizes
expect 0 "$DHS" bench serve --geometry tiny --context 1024 --device-budget-gib $B --tokens 3 --modes fixed --concurrency 2 \
    --group-hot-rows 64,64,64,256 --json -q
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d["records"]
assert d["config"]["group_hot_rows"] == [64, 64, 64, 256] and r and all(x["token_mismatches"] == 0 and x["completed"] > 0 for x in r), r' \
    "$T/out" || fail "bench serve --group-hot-rows: $(head -c 600 "$T/out")"
expect 2 "$DHS" bench serve --geometry tiny --context 1024 --device-budget-gib $B --tokens 3 --group-hot-rows 64,64 -q
grep -q "2 sizes for a model of 4 groups" "$T/err" || fail "bench serve --group-hot-rows count: $(cat "$T/err")"

# --round-end early and ahead (the next round opened under the step when it is known): the tokens of
# --round-end wait, in every record
for re in wait early ahead; do
    expect 0 "$DHS" bench serve --geometry tiny --modes adaptive --context 300 --concurrency 2 --tokens 6 --spec 1 \
        --round-end $re --json -q
    python3 -c 'import json,sys; print(" ".join(r["tokens_digest"] for r in json.load(open(sys.argv[1]))["records"]))' \
        "$T/out" > "$T/digest_$re" || fail "bench serve --round-end $re: $(head -c 300 "$T/out")"
done
[ -s "$T/digest_wait" ] && cmp -s "$T/digest_wait" "$T/digest_early" && cmp -s "$T/digest_wait" "$T/digest_ahead" ||
    fail "bench serve --round-end: tokens differ: wait $(cat "$T/digest_wait"), early $(cat "$T/digest_early"), ahead $(cat "$T/digest_ahead")"

finish bench_serve
