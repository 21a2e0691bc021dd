#!/usr/bin/env bash
# CLI test of `dhs serve-sim --calibrate FILE` on a small CPU `dhs bench serve --json`
# output (tiny geometry, context 1024, concurrency 1,2, 6 tokens, one session per slot: a few seconds;
# about 1.5 min under ASan).
# Checks: one side-by-side row per measured configuration with measured and
# simulated figures; the measured ones are the file's; base_us/token_us are the
# least-squares fit (computed here) of the resident step times and reproduce
# them within the reported residual; the simulator runs the calibrated model
# (a resident step = base_us + token_us x batch); an explicit flag wins; bad
# files are refused with exit 2 and nothing simulated.
# Then the real H200 files in tests/data (runs 26, 27 and 41 of bench/RESULTS.md,
# glm-5.3 at 100K, 12 GiB; docs/SIM.md, Calibration): attention is mostly per
# layer (attn_layer_us > 0, the per-query slope under 5% of it) and the fit
# reproduces each record's attention (5%), the indexer fit each record's indexer
# + top-k (15%); every simulated step within 15% of the
# measured one; each hierarchy record simulated under bench serve's device split
# (C resident sessions fit the budget -> adaptive holds every prompt on the
# device); host rows per token: none simulated where every prompt fits (the
# tail ring holds each prompt's partial page; these runs decode fewer tokens
# than the ring holds), the measured ones (before that change) at most the
# partial-page rows the output names; within 1.5x of measured where the history
# lives on the host (adaptive C=20, fixed).
# Usage: bash tests/cli/serve_cal.sh path/to/dhs
set -u
DHS=${1:?usage: serve_cal.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_serve_cal.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

expect 0 "$DHS" serve-sim --help
grep -q -- "--calibrate" "$T/out" || fail "serve-sim --help lists --calibrate"
grep -q "override" "$T/out" || fail "serve-sim --help says flags override the calibration"

expect 0 "$DHS" bench serve --backend cpu --geometry tiny --context 1024 --device-budget-gib 0.02 --tokens 6 \
    --concurrency 1,2 --waves 1 --json -q --output "$T/sv.json"
[ -s "$T/sv.json" ] || { fail "bench serve wrote no JSON"; finish serve_cal; }

# ---------------------------------------------------------------- calibrate, JSON
expect 0 "$DHS" serve-sim --calibrate "$T/sv.json" --json -q
cp "$T/out" "$T/cal.json"
python3 - "$T/sv.json" "$T/cal.json" <<'PY' || fail "serve-sim --calibrate: JSON side by side or fit wrong"
import json, math, sys
sv = json.load(open(sys.argv[1]))
cal = json.load(open(sys.argv[2]))
cfg = sv["config"]
ran = [r for r in sv["records"] if "skipped" not in r]
assert len(ran) >= 4, "bench serve ran too few configurations: %d" % len(ran)
cmp = cal["comparison"]
key = lambda r, c: (r["mode"], r["context"], c)
got = {key(r, r["concurrency"]): r for r in cmp}
assert len(cmp) == len(ran) == len(got), (len(cmp), len(ran))
for r in ran:
    row = got[key(r, r["max_concurrency"])]
    me, si, ra = row["measured"], row["simulated"], row["ratio"]
    for k in ("output_throughput", "median_tpot_ms", "sessions_held", "step_mean_ms", "mean_batch"):
        assert abs(me[k] - r[k]) <= 1e-9 * max(1, abs(r[k])), (k, me[k], r[k])
    for k in ("output_throughput", "median_tpot_ms", "sessions_held", "step_mean_ms"):
        assert si[k] > 0 and math.isfinite(si[k]), (k, si)
        assert abs(ra[k] - si[k] / me[k]) <= 1e-6 * ra[k], (k, ra[k], si[k], me[k])
    # the simulated configuration is the measured one: C slots, C x waves sessions
    assert si["completed"] == r["max_concurrency"] * cfg["waves"], si
    assert si["sessions_held"] <= r["max_concurrency"], si
c = cal["calibration"]
for k in ("base_us", "token_us", "attn_us", "attn_layer_us", "idx_us_per_ktok", "idx_layer_us", "resolver_us", "resolver_ns_per_entry", "pcie_gbps",
          "gather_us", "draft_us", "prefill_us_per_token", "layers", "row_bytes", "idx_bytes", "accept_p"):
    assert k in c and "value" in c[k] and c[k]["from"].split(":")[0] in ("measured", "fit", "default"), (k, c.get(k))
assert c["layers"]["value"] == cfg["layers"] and c["row_bytes"]["value"] == cfg["row_bytes"]
# a CPU file: no breakdown, attention and indexer folded into token_us
assert c["attn_us"]["value"] == 0 and c["idx_us_per_ktok"]["value"] == 0, c
assert c["attn_layer_us"]["value"] == 0 and c["idx_layer_us"]["value"] == 0, c
assert cal["config"]["k"] == cfg["topk"] and abs(cal["config"]["kv_gib"] * 2**30 - cfg["device_budget_bytes"]) < 1
# base_us + token_us x (mean batch x spec): least squares over the resident step times, clamped to >= 0
res = [r for r in ran if r["mode"] == "resident"]
x = [r["mean_batch"] * cfg["spec"] for r in res]
y = [r["step_mean_ms"] * 1000 for r in res]
n = len(x)
sx, sy, sxx, sxy = sum(x), sum(y), sum(v * v for v in x), sum(a * b for a, b in zip(x, y))
det = n * sxx - sx * sx
if det > 1e-9 * sxx:
    b = (n * sxy - sx * sy) / det
    a = (sy - b * sx) / n
    if b < 0:
        a, b = sy / n, 0.0
    elif a < 0:
        a, b = 0.0, sxy / sxx
else:
    a, b = sy / n, 0.0
base, tok = c["base_us"]["value"], c["token_us"]["value"]
assert abs(base - a) <= 1e-6 * max(1, abs(a)) and abs(tok - b) <= 1e-6 * max(1, abs(b)), (base, tok, a, b)
fit = cal["fit"]
assert fit["over"] == "resident" and fit["points"] == n, fit
resid = [base + tok * xi - yi for xi, yi in zip(x, y)]
rms = math.sqrt(sum(r * r for r in resid) / n)
assert abs(fit["rms_residual_us"] - rms) <= 1e-6 * max(1, rms), (fit, rms)
for ri in resid:
    assert abs(ri) <= fit["max_residual_us"] * (1 + 1e-9) + 1e-9, (ri, fit)
# the simulator ran the calibrated model: a resident step of batch C is base + token x C
for r in res:
    si = got[key(r, r["max_concurrency"])]["simulated"]
    want = (base + tok * r["max_concurrency"] * cfg["spec"]) / 1000
    assert abs(si["step_mean_ms"] - want) <= 1e-9 * want, (si["step_mean_ms"], want)
PY

# ---------------------------------------------------------------- the table
expect 0 "$DHS" serve-sim --calibrate "$T/sv.json" -q
grep -q "simulated vs measured" "$T/out" || fail "serve-sim --calibrate prints the side-by-side table"
grep -q "calibrated cost model" "$T/out" || fail "serve-sim --calibrate prints the constants"
nrows=$(grep -cE '^(resident|fixed|adaptive) +1024 +[12] \|' "$T/out")
nran=$(python3 -c 'import json,sys; print(sum("skipped" not in r for r in json.load(open(sys.argv[1]))["records"]))' "$T/sv.json")
[ "$nrows" -eq "$nran" ] || fail "table: $nrows rows, $nran configurations measured"

# ---------------------------------------------------------------- an explicit flag wins
expect 0 "$DHS" serve-sim --calibrate "$T/sv.json" --json -q --base-us 1234.5
python3 - "$T/cal.json" "$T/out" <<'PY' || fail "serve-sim --calibrate: --base-us does not override"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
cb = b["calibration"]
assert cb["base_us"]["value"] == 1234.5 and cb["base_us"]["from"].startswith("flag"), cb["base_us"]
assert cb["token_us"]["value"] == a["calibration"]["token_us"]["value"]
for r in b["comparison"]:
    if r["mode"] == "resident":
        want = (1234.5 + cb["token_us"]["value"] * r["concurrency"]) / 1000
        assert abs(r["simulated"]["step_mean_ms"] - want) <= 1e-9 * want, (r, want)
PY

# ---------------------------------------------------------------- a file with the per-step breakdown
# (what a GPU run writes): the same records with step_us phases and step times made from a known cost
# model; the tool reads the phases and recovers every constant
python3 - "$T/sv.json" "$T/gpu.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["config"]
L, S, K, RB = c["layers"], c["spec"], c["topk"], c["row_bytes"]
for r in d["records"]:
    if "skipped" in r:
        continue
    q = r["mean_batch"] * S
    ctx = r["context"] + c["tokens"] / 2
    at, ix = L * q * 0.9, L * q * 0.05 * ctx / 1000
    rs = mc = 0.0
    if r["mode"] != "resident":
        rs = L * (6 + 0.7 * q * K / 1000)
        rows = r["host_rows_per_token"] * r["total_output_tokens"] / r["decode_rounds"]
        if rows > 0:
            mc = L * 3 + rows * RB / (30 * 1000)
    step = 900 + 40 * q + at + ix + rs + mc
    r["step_mean_ms"] = step / 1000
    r["step_us"] = {"other": step - at - ix - rs - mc, "indexer": 0.75 * ix, "topk": 0.25 * ix, "resolve": rs,
                    "miss_copy": mc, "attention": at, "total": step, "profiled_rounds": 2}
json.dump(d, open(sys.argv[2], "w"))
PY
expect 0 "$DHS" serve-sim --calibrate "$T/gpu.json" --json -q
python3 - "$T/out" <<'PY' || fail "serve-sim --calibrate: the breakdown's constants not recovered"
import json, sys
d = json.load(open(sys.argv[1]))
c, f = d["calibration"], d["fit"]
want = {"base_us": 900, "token_us": 40, "attn_us": 0.9, "idx_us_per_ktok": 0.05, "resolver_us": 6,
        "resolver_ns_per_entry": 0.7, "pcie_gbps": 30, "gather_us": 3}
for k, v in want.items():
    assert abs(c[k]["value"] - v) <= 1e-6 * v, (k, c[k], v)
    assert c[k]["from"].startswith(("measured", "fit")), (k, c[k])
# the model made of it has no batch-independent attention or indexer: the intercepts come out 0
for k in ("attn_layer_us", "idx_layer_us"):
    assert abs(c[k]["value"]) < 1e-6 and c[k]["from"].startswith("fit:"), (k, c[k])
assert f["max_residual_us"] < 1e-6, f
assert d["measured_on"]["records_with_step_breakdown"] == d["measured_on"]["records_ran"]
assert all(r["simulated"] for r in d["comparison"])
PY

# ---------------------------------------------------------------- the real H200 files
DATA="$(cd "$(dirname "$0")/../data" && pwd)"
for f in gpu_serve_100k_adaptive_splitattn.json gpu_serve_100k_adaptive_rowattn.json gpu_serve_100k_fixed_rowattn.json gpu_serve_100k_resident_adaptive_c20.json; do
    [ -s "$DATA/$f" ] || { fail "fixture $DATA/$f missing"; continue; }
    expect 0 "$DHS" serve-sim --calibrate "$DATA/$f" --json -q
    cp "$T/out" "$T/real_$f"
    python3 - "$DATA/$f" "$T/real_$f" <<'PY' || fail "serve-sim --calibrate $f: the H200 file is not matched as docs/SIM.md states"
import json, sys
sv, cal = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
cfg, c = sv["config"], cal["calibration"]
L, budget, tokens = cfg["layers"], cfg["device_budget_bytes"], cfg["tokens"]
ran = [r for r in sv["records"] if "skipped" not in r]
al, aq = c["attn_layer_us"]["value"], c["attn_us"]["value"]
# latency-bound attention: the batch-independent part dominates; the fit reproduces each record
assert al > 0 and c["attn_layer_us"]["from"].startswith("fit:"), c["attn_layer_us"]
assert 0 <= aq < 0.05 * al, (aq, al)
# the indexer and top-k: a batch-independent part (top-k) and one growing with queries x context
il, ik = c["idx_layer_us"]["value"], c["idx_us_per_ktok"]["value"]
assert il > 0 and ik > 0, (il, ik)
for r in ran:
    meas = (r["step_us"]["indexer"] + r["step_us"]["topk"]) / L
    model = il + ik * r["mean_batch"] * cfg["spec"] * (r["context"] + tokens / 2) / 1000
    assert abs(model - meas) <= 0.15 * meas, (r["mode"], r["max_concurrency"], model, meas)
for r in ran:
    meas = r["step_us"]["attention"] / L
    model = al + aq * r["mean_batch"] * cfg["spec"]
    assert abs(model - meas) <= 0.05 * meas, (r["mode"], r["max_concurrency"], model, meas)
got = {(x["mode"], x["concurrency"]): x for x in cal["comparison"]}
assert len(got) == len(ran)
res_session = {r["max_concurrency"]: r["device_bytes"] / r["max_concurrency"] for r in ran if r["mode"] == "resident"}
hot, tail = cal["config"]["hot"], cal["config"]["tail_rows"]
for r in ran:
    x = got[(r["mode"], r["max_concurrency"])]
    C, me, si = r["max_concurrency"], x["measured"], x["simulated"]
    # the records the cost model was fitted on: every step within 15 %
    ratio = si["step_mean_ms"] / me["step_mean_ms"]
    assert 0.85 <= ratio <= 1.15, (r["mode"], C, si["step_mean_ms"], me["step_mean_ms"])
    if r["mode"] == "resident":
        continue
    sp = x["device_split"]
    assert sp["as_measured"] and sp["policy"] == "clock", sp
    assert sp["library_bytes"] <= budget and sp["layer_pool_bytes"] * cfg["payload_sources"] <= sp["library_bytes"], sp
    room = sp["layer_pool_rows"] - C * (hot + tail)
    assert room >= 0, sp
    if r["mode"] == "fixed":
        assert room < 64 * C, sp  # fixed: hot caches and tails only, no history
    rs = min(res_session.values()) if res_session else None  # one resident session's bytes (any C that ran)
    fits = r["mode"] == "adaptive" and rs is not None and C * rs <= budget
    if fits:
        assert room >= C * r["context"], ("C resident sessions fit the budget: the split holds every prompt", sp)
        # every prompt row is on the device, the last partial page in the tail ring: only decode rows that
        # left the ring can be host rows, and with fewer tokens than ring rows none has
        assert tokens < tail and si["host_rows_per_token"] == 0, (si, tokens, tail)
        # the rowattn/splitattn fixtures were measured before the ring kept the partial page: their host rows
        # are those rows at most; resident_adaptive_c20 after it: none
        floor = sp["prompt_partial_page_rows"] * L / (tokens - 1)
        if "resident_adaptive_c20" in sys.argv[1]:
            assert me["host_rows_per_token"] == 0, me
        else:
            assert 0 < me["host_rows_per_token"] <= floor + 1e-9, (me, floor)
    else:
        q = si["host_rows_per_token"] / me["host_rows_per_token"]
        assert 1 / 1.5 <= q <= 1.5, (r["mode"], C, si["host_rows_per_token"], me["host_rows_per_token"])
PY
done
# the text output names the split and the partial-page rows
expect 0 "$DHS" serve-sim --calibrate "$DATA/gpu_serve_100k_adaptive_splitattn.json" -q
grep -q "device split per hierarchy record" "$T/out" || fail "--calibrate text: no device split"
grep -q "attn_layer_us" "$T/out" || fail "--calibrate text: no attn_layer_us"
grep -q "partial page of each prompt (context mod 64 rows) in the tail ring" "$T/out" || fail "--calibrate text: the partial-page rows are not named"

# ---------------------------------------------------------------- bad files: exit 2, nothing simulated
refused() { # $1: what; the rest: the command
    local what=$1; shift
    expect 2 "$@"
    [ ! -s "$T/out" ] || fail "$what: something printed on stdout"
    [ -s "$T/err" ] || fail "$what: no message on stderr"
}
echo "not json {" >"$T/bad.json"
refused "not JSON" "$DHS" serve-sim --calibrate "$T/bad.json" -q
grep -q "not JSON" "$T/err" || fail "not JSON: says so ($(cat "$T/err"))"
expect 0 "$DHS" serve-sim --k 256 --hot 512 --context 4096 --output-len 8 --requests 4 --kv-gib 2 --max-batch 16 -q \
    --concurrency 1 --modes resident --spec off --json
cp "$T/out" "$T/ss.json"
refused "a serve-sim output" "$DHS" serve-sim --calibrate "$T/ss.json" -q
grep -q "bench serve" "$T/err" || fail "not a bench serve output: says so ($(cat "$T/err"))"
python3 - "$T/sv.json" "$T/skip.json" "$T/nolayers.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = json.loads(json.dumps(d))
s["records"] = [{"mode": r["mode"], "context": r["context"], "max_concurrency": r["max_concurrency"], "skipped": "does not fit"}
                for r in d["records"]]
json.dump(s, open(sys.argv[2], "w"))
del d["config"]["layers"]
json.dump(d, open(sys.argv[3], "w"))
PY
refused "no record ran" "$DHS" serve-sim --calibrate "$T/skip.json" -q
grep -q "no record that ran" "$T/err" || fail "no record ran: says so ($(cat "$T/err"))"
refused "config without layers" "$DHS" serve-sim --calibrate "$T/nolayers.json" -q
grep -q "layers" "$T/err" || fail "config without layers: names the key ($(cat "$T/err"))"
refused "missing file" "$DHS" serve-sim --calibrate "$T/missing.json" -q
refused "a load flag with --calibrate" "$DHS" serve-sim --calibrate "$T/sv.json" --concurrency 4 -q
grep -q -- "--concurrency" "$T/err" || fail "--calibrate with --concurrency: names the flag"

finish serve_cal
