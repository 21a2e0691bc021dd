#!/usr/bin/env bash
# CLI test of `dhs plan`: the seed's figures through --json, the human table,
# custom --arch files, and bad input (message on stderr, empty stdout, exit 2).
# Usage: bash tests/cli/plan.sh path/to/dhs
set -u
DHS=${1:?usage: plan.sh path/to/dhs}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
checks=0

ok()   { checks=$((checks + 1)); echo "ok   $*"; }
bad()  { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $*"; }

# json_get FILE KEY -> value of a top-level key
json_get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# expect_near FILE KEY WANT RELTOL
expect_near() {
    local got
    got=$(json_get "$1" "$2" 2>/dev/null) || { bad "$2: key missing in $1"; return; }
    if python3 -c 'import sys; g,w,t=map(float,sys.argv[1:4]); sys.exit(0 if abs(g-w)<=t*abs(w) else 1)' "$got" "$3" "$4"; then
        ok "$2 = $got (want $3 within $4)"
    else
        bad "$2 = $got (want $3 within $4)"
    fi
}

expect_eq() {
    local got
    got=$(json_get "$1" "$2" 2>/dev/null) || { bad "$2: key missing in $1"; return; }
    if [ "$got" = "$3" ]; then ok "$2 = $got"; else bad "$2 = $got (want $3)"; fi
}

# run_json OUTFILE ARGS...: must exit 0 with valid JSON on stdout
run_json() {
    local out=$1; shift
    if "$DHS" plan "$@" --json >"$out" 2>"$TMP/err"; then
        if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out" 2>/dev/null; then
            ok "dhs plan $* --json: exit 0, valid JSON"
        else
            bad "dhs plan $* --json: output is not JSON"
        fi
    else
        bad "dhs plan $* --json: exit $? ($(cat "$TMP/err"))"
    fi
}

# expect_usage_error ARGS...: exit 2, empty stdout, a message on stderr
expect_usage_error() {
    "$DHS" plan "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ $rc -eq 2 ] && [ ! -s "$TMP/out" ] && [ -s "$TMP/err" ]; then
        ok "dhs plan $*: exit 2, stderr: $(head -c 150 "$TMP/err" | tr '\n' ' ')"
    else
        bad "dhs plan $*: exit $rc, stdout $(wc -c <"$TMP/out") bytes, stderr '$(cat "$TMP/err")'"
    fi
}

echo "-- required JSON keys"
run_json "$TMP/base.json" --preset glm-5.3 --context 100000
for k in resident_gib_per_session hier_gib_per_session ring_rows ring_gib_total staging_gib_total \
         sessions_resident sessions_hier host_gib_per_session hier_bytes resident_bytes; do
    if python3 -c 'import json,sys; sys.exit(0 if sys.argv[2] in json.load(open(sys.argv[1])) else 1)' "$TMP/base.json" "$k" 2>/dev/null; then
        ok "key $k present"
    else
        bad "key $k missing"
    fi
done

echo "-- seed 000: GLM-5.3 at 100K"
expect_near "$TMP/base.json" resident_gib_per_session 4.444 0.01
expect_near "$TMP/base.json" hier_gib_per_session_no_metadata 0.432 0.005
expect_near "$TMP/base.json" host_gib_per_session 4.1856 0.001
expect_eq   "$TMP/base.json" sessions_resident 20
# the hierarchical figure must be the sum of its parts
if python3 - "$TMP/base.json" 2>/dev/null <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); h = d["hier_bytes"]
parts = h["index_keys"] + h["hot"] + h["tail"] + h["window"] + h["metadata"] + h["ring"] + h["staging"]
assert parts == d["hier_bytes_per_session"], (parts, d["hier_bytes_per_session"])
assert h["metadata"] == h["reverse_index"] + h["slot_tables"] + h["page_maps"]
assert d["hier_gib_per_session"] < d["resident_gib_per_session"]
EOF
then ok "hier_bytes parts sum to hier_bytes_per_session; hier < resident"; else bad "hier_bytes parts do not add up"; fi

echo "-- draft ring: W=2048, p=64, K_max=8, 12288 B/row, 35 slots"
run_json "$TMP/ring.json" --preset glm-5.3 --slots 35 --drafter-window 2048 --kmax 8 --draft-row-bytes 12288
expect_eq   "$TMP/ring.json" ring_rows 2176
expect_near "$TMP/ring.json" ring_gib_total 0.87 0.01
expect_near "$TMP/ring.json" hier_gib_per_session_no_metadata 0.492 0.005
expect_near "$TMP/ring.json" resident_gib_per_session 4.469 0.001
run_json "$TMP/dflash2.json" --preset glm-5.3 --drafter dflash2
if [ -s "$TMP/dflash2.json" ] && cmp -s <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hier_bytes_per_session"])' "$TMP/ring.json" 2>/dev/null) \
          <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hier_bytes_per_session"])' "$TMP/dflash2.json" 2>/dev/null); then
    ok "--drafter dflash2 = W 2048, K_max 8, 12288 B/row"
else
    bad "--drafter dflash2 differs from the explicit flags"
fi

echo "-- staging: 78 vs 4 live sources, 35 slots, k=2048, K_max=8, 576-B rows"
run_json "$TMP/s78.json" --preset glm-5.3 --slots 35 --k 2048 --kmax 8 --live-sources 78
run_json "$TMP/s4.json"  --preset glm-5.3 --slots 35 --k 2048 --kmax 8 --live-sources 4
expect_near "$TMP/s78.json" staging_gib_total 24.0 0.01
expect_near "$TMP/s4.json"  staging_gib_total 1.23 0.01

echo "-- sessions monotone in HBM"
prev=-1; mono=1
for hbm in 60 80 100 120 140 160; do
    "$DHS" plan --preset glm-5.3 --hbm-gib $hbm --weights-gib 50 --json >"$TMP/h.json" 2>/dev/null || mono=0
    s=$(json_get "$TMP/h.json" sessions_hier 2>/dev/null) || s=-1
    [ "$s" -ge "$prev" ] 2>/dev/null || mono=0
    prev=$s
done
if [ $mono -eq 1 ] && [ "$prev" -gt 0 ] 2>/dev/null; then ok "sessions_hier non-decreasing in --hbm-gib (last $prev)"; else bad "sessions_hier not monotone in HBM"; fi

echo "-- every preset, human table"
for p in deepseek-v3.2 glm-5.2 glm-5.3 deepseek-v4.1-flash; do
    if "$DHS" plan --preset $p --context 100000 >"$TMP/t.txt" 2>"$TMP/err" &&
       grep -q "sessions per GPU: resident" "$TMP/t.txt" && grep -q "hierarchical" "$TMP/t.txt" &&
       [ ! -s "$TMP/err" ]; then
        ok "$p: table printed ($(grep 'sessions per GPU' "$TMP/t.txt" | sed 's/^ *//'))"
    else
        bad "$p: table missing or stderr not empty"
    fi
done
if "$DHS" plan --help | grep -q -- "--draft-row-bytes"; then ok "--help lists the flags, exit 0"; else bad "--help"; fi

echo "-- custom --arch"
"$DHS" plan --preset glm-5.3 --show-arch >"$TMP/glm.json"
run_json "$TMP/custom.json" --arch "$TMP/glm.json" --context 100000
if [ "$(json_get "$TMP/custom.json" resident_bytes_per_session 2>/dev/null)" = "$(json_get "$TMP/base.json" resident_bytes_per_session 2>/dev/null)" ] &&
   [ -s "$TMP/custom.json" ] &&
   [ "$(json_get "$TMP/custom.json" hier_bytes_per_session 2>/dev/null)" = "$(json_get "$TMP/base.json" hier_bytes_per_session 2>/dev/null)" ]; then
    ok "--show-arch output fed back through --arch gives the preset's figures"
else
    bad "--arch of the shown preset differs from the preset"
fi
cat >"$TMP/tiny.json" <<'EOF'
{ "name": "tiny", "k": 64, "comment": "one group, two sources of different widths",
  "groups": [ { "sources": 2, "row_bytes": [32, 64], "index_key_bytes": 16 } ] }
EOF
run_json "$TMP/tiny_out.json" --arch "$TMP/tiny.json" --context 1000 --page-rows 1 --hot 128
# resident = 1000 * (32 + 64 + 16) = 112000 B
expect_eq "$TMP/tiny_out.json" resident_bytes_per_session 112000
expect_eq "$TMP/tiny_out.json" live_sources 2

echo "-- bad input: exit 2, stderr, nothing on stdout"
expect_usage_error --preset nope
expect_usage_error --context abc
expect_usage_error --context -5
expect_usage_error --context 0
expect_usage_error --context 12x
expect_usage_error --context ""
expect_usage_error --hot -1
expect_usage_error --kmax 0
expect_usage_error --slots -35
expect_usage_error --hbm-gib -3
expect_usage_error --hbm-gib xyz
expect_usage_error --weights-gib nan
expect_usage_error --live-sources 79
expect_usage_error --tail-rows 4 --kmax 8 --page-rows 1
expect_usage_error --drafter nope
expect_usage_error --frobnicate 3
expect_usage_error --context
expect_usage_error --preset glm-5.3 --arch "$TMP/glm.json"
expect_usage_error --arch "$TMP/does-not-exist.json"
printf '{"k": 2048, "groups": [ {"row_bytes": 576 }' >"$TMP/malformed.json"
expect_usage_error --arch "$TMP/malformed.json"
printf '{"k": 2048, "groups": [ {"row_bytes": -576 } ] }' >"$TMP/negative.json"
expect_usage_error --arch "$TMP/negative.json"
printf '{"k": 2048, "groups": [ {"row_bytes": 576, "sorces": 4 } ] }' >"$TMP/typo.json"
expect_usage_error --arch "$TMP/typo.json"
printf '{"groups": [ {"row_bytes": 576 } ] }' >"$TMP/nok.json"
expect_usage_error --arch "$TMP/nok.json"
expect_usage_error --arch "$TMP"

echo "cli_plan: $checks checks, $fails failed"
[ $fails -eq 0 ]
