#!/usr/bin/env bash
# CLI test of the locality presets of `dhs trace gen --locality` and of
# `dhs trace stats`. Usage: bash tests/cli/locality.sh path/to/dhs
set -u
DHS=${1:?usage: locality.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_locality.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"
command -v python3 >/dev/null || { echo "python3 missing: skip"; exit 77; }

expect 0 "$DHS" trace stats --help
for f in --cache --json --output; do grep -q -- "$f" "$T/out" || fail "trace stats --help lists $f"; done
expect 0 "$DHS" trace gen --help
grep -q -- "--locality" "$T/out" || fail "trace gen --help lists --locality"

# the default model (synthetic) is byte for byte the generator before the
# locality model existed: these digests were taken from that generator
gen_a() { "$DHS" trace gen --out "$1" --seed 7 --requests 3 --rounds 20 --context 3000 --k 256 --producers 3 --spec 2 "${@:2}"; }
gen_b() { "$DHS" trace gen --out "$1" --seed 11 --requests 2 --rounds 12 --context 600 --k 512 --out-len 8 "${@:2}"; }
expect 0 gen_a "$T/a.dht"
expect 0 gen_b "$T/b.dht" --locality synthetic
sha() { sha256sum "$1" | cut -d' ' -f1; }
[ "$(sha "$T/a.dht")" = c757f83c738827f9ea6bbd098c230e2d9eb73b41788f5f6f37016b4cb5326ba0 ] || fail "default trace changed"
[ "$(sha "$T/b.dht")" = 7c700cbd4fb74ce1479c425ab8a899833eadba4fa8f0196aa5a258f9d6b22e32 ] || fail "synthetic trace changed"

# bad input: clear error, exit 2, no file left
expect 2 "$DHS" trace gen --out "$T/x.dht" --locality nosuch
[ -e "$T/x.dht" ] && fail "bad preset left a file"
grep -q "nosuch" "$T/err" || fail "bad preset named: $(cat "$T/err")"
echo '{"name":"x","alpha":[0.5,1.5],"ref_context":1000}' >"$T/bad.json"
expect 2 "$DHS" trace gen --out "$T/x.dht" --locality "$T/bad.json"
grep -q "alpha\[1\]" "$T/err" || fail "bad alpha named: $(cat "$T/err")"
echo '{"name":"x","alpha":[0.5]}' >"$T/bad2.json"
expect 2 "$DHS" trace gen --out "$T/x.dht" --locality "$T/bad2.json"
expect 2 "$DHS" trace stats "$T/a.dht" --cache 0
expect 2 "$DHS" trace stats "$T/a.dht" --cache 1,2,3,4,5,6,7,8,9

# check.py MODE TOL FILE: every group's alpha against its target (MODE
# target) or against the random baseline k/V (MODE random)
cat >"$T/check.py" <<'PY'
import json, sys
mode, tol, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
d = json.load(open(path))
bad = []
for g in d["groups"]:
    ref = g["alpha_target"] if mode == "target" else g["random_alpha"]
    if g["alpha"] is None or ref is None or g["alpha_rounds"] < 20 or abs(g["alpha"] - ref) > tol:
        bad.append((g["group"], g["alpha"], ref))
for b in bad[:5]: print("group %d: alpha %s, expected %s" % b)
sys.exit(1 if bad else 0)
PY

# dsv32-swe, 61 producers (one per layer): alpha within 3 points of the
# preset in every layer; spec 2 exercises the draft queries
expect 0 "$DHS" trace gen --out "$T/d.dht" --locality dsv32-swe --seed 5 --requests 2 --rounds 40 \
    --context 6000 --k 128 --producers 61 --spec 2
expect 0 "$DHS" trace stats "$T/d.dht" --json --cache 128,512
cp "$T/out" "$T/d.json"
expect 0 python3 "$T/check.py" target 0.03 "$T/d.json"
preset() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["preset"])' "$1"; }
[ "$(preset "$T/d.json")" = dsv32-swe ] || fail "stats records the preset"
python3 - "$T/d.json" <<'PY' || fail "dsv32-swe: deep layers above layers 0-1, hit(B) nondecreasing"
import json, sys
g = json.load(open(sys.argv[1]))["groups"]
assert g[40]["alpha"] > 0.40 and g[0]["alpha"] < 0.05, (g[0]["alpha"], g[40]["alpha"])
assert all(x["hit_rate"][0] <= x["hit_rate"][1] + 1e-12 for x in g)
assert 0.6 < g[30]["cross"] < 1.0, g[30]["cross"]
PY
# per-group sizing at a budget of 128 rows per group: layers 0-1 (alpha
# 1.5 %) get none, the sized hit rate is at least the even split's (no
# speculation: draft queries would hit query 0's rows in every layer)
expect 0 "$DHS" trace gen --out "$T/n.dht" --locality dsv32-swe --seed 5 --requests 2 --rounds 30 --context 6000 --k 128 --producers 61
expect 0 "$DHS" trace stats "$T/n.dht" --json --cache 128,256 --budget $((61 * 128))
python3 -c '
import json, sys
z = json.load(open(sys.argv[1]))["sizing"]
r = z["rows_per_group"]
assert r[0] == 0 and r[1] == 0 and r[40] > 0, r[:3]
assert z["sized_rows"] <= 61 * 128 and z["sized_hit_rate"] >= z["even_hit_rate"], z' "$T/out" || fail "per-group sizing"

# per-layer hot cache through the core: dhs sim --hot-per-layer plans the sizes from a trace's curves (the
# greedy above, every layer at least one page) and replays even vs per-layer at the same rows per request;
# dhs plan --hot-per-layer gives the same sizes from the same trace
expect 0 "$DHS" sim --trace "$T/n.dht" --policies lru --hot 128 --page-rows 16 --hot-per-layer "$T/n.dht" --json -q
cp "$T/out" "$T/pl.json"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
run = d["per_layer"]["runs"][0]
r = run["rows_per_group"]
assert run["policy"] == "lru" and run["hot"] == 128 and run["budget_rows"] == 61 * 128, run
assert len(r) == 61 and all(x >= 16 and x % 16 == 0 for x in r) and sum(r) == run["rows_used"] <= 61 * 128, r
assert r[0] == 16 and r[1] == 16 and max(r[20:]) > 128, r[:3]
even = [x for x in d["results"] if x["policy"] == "lru" and x["hot"] == 128][0]
assert run["even"]["host_rows"] == even["host_rows"], (run["even"], even["host_rows"])
assert run["per_layer"]["host_rows"] != even["host_rows"] and 0 < run["per_layer"]["hit_rate"] < 1, run' "$T/pl.json" \
    || fail "sim --hot-per-layer: $(head -c 600 "$T/pl.json")"
expect 0 "$DHS" sim --trace "$T/n.dht" --policies lru --hot 128 --page-rows 16 --hot-per-layer "$T/n.dht" -q
grep -q "rows per layer at B=128: 16 16 " "$T/out" || fail "sim --hot-per-layer text: $(tail -5 "$T/out")"
expect 0 "$DHS" plan --preset deepseek-v3.2 --hot 128 --page-rows 16 --hot-per-layer "$T/n.dht" --json
python3 -c '
import json, sys
h = json.load(open(sys.argv[1]))["hot_per_layer"]
s = json.load(open(sys.argv[2]))["per_layer"]["runs"][0]
assert h["rows_per_group"] == s["rows_per_group"] and h["budget_rows"] == s["budget_rows"], (h, s)
assert abs(h["per_layer_hit_rate"] - s["curve_per_layer_hit_rate"]) < 1e-4 and h["per_layer_hot_bytes"] <= h["even_hot_bytes"]' \
    "$T/out" "$T/pl.json" || fail "plan --hot-per-layer: $(head -c 600 "$T/out")"
expect 0 "$DHS" plan --preset deepseek-v3.2 --hot 128 --page-rows 16 --hot-per-layer "$T/n.dht"
grep -q "group_hot_rows: 16,16," "$T/out" || fail "plan --hot-per-layer text: $(tail -4 "$T/out")"
# a trace of other groups than the replayed one, a missing file: refused with the reason, exit 2
expect 2 "$DHS" sim --trace "$T/n.dht" --policies lru --hot 128 --page-rows 16 --hot-per-layer "$T/a.dht" -q
grep -q "groups" "$T/err" || fail "sim --hot-per-layer: group mismatch named: $(cat "$T/err")"
expect 2 "$DHS" plan --preset deepseek-v3.2 --hot-per-layer "$T/nosuch.dht"
expect 2 "$DHS" sim --trace "$T/n.dht" --hot-per-layer "$T/nosuch.dht"

# valid selections: the reader checks rows lie in the visible range; no
# duplicate within a query
expect 0 "$DHS" trace info "$T/d.dht" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["duplicate_entries"] != 0 or d["selected_entries"] == 0)' "$T/out" \
    || fail "dsv32-swe trace has duplicate rows"
expect 0 "$DHS" trace stats "$T/d.dht"
grep -q "dsv32-swe" "$T/out" || fail "text output names the preset"

# random: alpha = k/V within a point; the check must also reject a model
# whose alpha is not the target (the dsv32-swe trace against k/V)
expect 0 "$DHS" trace gen --out "$T/r.dht" --locality random --seed 5 --requests 2 --rounds 40 --context 6000 --k 128 --producers 2
expect 0 "$DHS" trace stats "$T/r.dht" --json
cp "$T/out" "$T/r.json"
expect 0 python3 "$T/check.py" random 0.01 "$T/r.json"
expect 0 python3 "$T/check.py" target 0.01 "$T/r.json"
expect 1 python3 "$T/check.py" random 0.03 "$T/d.json"

# a custom model: alpha 0.3 everywhere
echo '{"name":"flat","alpha":[0.3],"ref_context":6000,"cross":0.5,"draft":0.5}' >"$T/flat.json"
expect 0 "$DHS" trace gen --out "$T/f.dht" --locality "$T/flat.json" --seed 5 --requests 2 --rounds 40 --context 6000 --k 128 --producers 3
expect 0 "$DHS" trace stats "$T/f.dht" --json
cp "$T/out" "$T/f.json"
expect 0 python3 "$T/check.py" target 0.03 "$T/f.json"
[ "$(preset "$T/f.json")" = custom:flat ] || fail "custom preset recorded"
# the synthetic trace records no preset
expect 0 "$DHS" trace stats "$T/a.dht" --json
[ -z "$(preset "$T/out")" ] || fail "synthetic: no preset"

# --locality-layer: one producer as layer 30 of dsv32-swe (alpha 0.44)
expect 0 "$DHS" trace gen --out "$T/l.dht" --locality dsv32-swe --locality-layer 30 --seed 5 --requests 2 --rounds 40 --context 6000 --k 128
expect 0 "$DHS" trace stats "$T/l.dht" --json
cp "$T/out" "$T/l.json"
expect 0 python3 "$T/check.py" target 0.03 "$T/l.json"
python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["groups"][0]; sys.exit(abs(g["alpha_target"]-0.44)>1e-9)' "$T/l.json" \
    || fail "--locality-layer 30: target 0.44"

# serve-sim takes the same models
expect 2 "$DHS" serve-sim --locality nosuch
grep -q nosuch "$T/err" || fail "serve-sim: bad preset named"
expect 0 "$DHS" serve-sim --help
grep -q -- "--locality-layer" "$T/out" || fail "serve-sim --help lists --locality-layer"

# dhs run and bench serve: the model's own indexer under a preset (tests/model/test_locality.c checks the
# figures); bad input is refused before any work, with the reason
for c in run "bench serve"; do
  expect 0 "$DHS" $c --help
  grep -q -- "--locality" "$T/out" || fail "$c --help lists --locality"
  expect 2 "$DHS" $c --locality nosuch
  grep -q nosuch "$T/err" || fail "$c: bad preset named: $(cat "$T/err")"
  expect 2 "$DHS" $c --locality synthetic
  grep -q "default" "$T/err" || fail "$c: --locality synthetic explained: $(cat "$T/err")"
done
expect 2 "$DHS" run --locality "$T/bad.json"
grep -q "alpha\[1\]" "$T/err" || fail "run: bad alpha named: $(cat "$T/err")"
# a small run: identical, and the table printed (tiny model, its own prompt keys)
expect 0 "$DHS" run --sessions 2 --context 512 --tokens 8 --spec 2 -q --locality random --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); L=d["locality"]["layers"]
assert d["identical"] and d["locality"]["preset"]=="random" and len(L)==4, d.get("locality")
assert all(abs(x["target"]-64/512)<0.01 and x["draft"]>=0 and 0<=x["lru_hit"]<=1 for x in L), L' "$T/out" \
    || fail "run --locality random: $(head -c 600 "$T/out")"

# dhs run --group-hot-rows: the hierarchy with a hot-cache size per layer stays identical to all-resident
expect 0 "$DHS" run --sessions 2 --context 512 --tokens 8 -q --json --group-hot-rows 64,64,64,256
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["identical"] and d["config"]["group_hot_rows"] == [64, 64, 64, 256], d["config"]' "$T/out" \
    || fail "run --group-hot-rows: $(head -c 400 "$T/out")"
expect 2 "$DHS" run --sessions 2 --context 512 --tokens 8 -q --group-hot-rows 64,64,64
grep -q "3 sizes for a model of 4 groups" "$T/err" || fail "run --group-hot-rows count: $(cat "$T/err")"
expect 2 "$DHS" run --sessions 2 --context 512 --tokens 8 -q --group-hot-rows 64,32,64,64
grep -q "not a multiple" "$T/err" || fail "run --group-hot-rows multiple: $(cat "$T/err")"

finish locality
