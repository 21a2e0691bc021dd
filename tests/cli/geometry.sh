#!/usr/bin/env bash
# CLI test of `dhs run --geometry`: the real KV geometries (GLM-5.3: 78 payload
# sources, 21 producers with 132-byte keys; DeepSeek-V3.2: 61/61; k = 2048) on
# the CPU backend at small contexts, resident vs hierarchical byte for byte:
# the plain command a new user runs first, then speculation under a device budget that
# forces reclaims (with invariant and located-row checks), sampling
# verification, the output's keys and lines, and exit 2 on a bad geometry.
# Usage: bash tests/cli/geometry.sh path/to/dhs
set -u
DHS=${1:?usage: geometry.sh path/to/dhs}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
key() { python3 -c "import json,sys; d=json.load(sys.stdin); v=d; [v := v[p] for p in '$1'.split('.')]; print(str(v).lower())"; }

# a sanitizer build (CI runs this script with it too) is several times slower: smaller runs there
san=0
ldd "$DHS" 2>/dev/null | grep -q 'libasan\|libubsan' && san=1
ctx=2600 tok=6 geoms="glm-5.3 deepseek-v3.2"
[ $san = 1 ] && { ctx=1100; tok=4; geoms=glm-5.3
    echo "sanitizer build: only glm-5.3 under reclaim at 1100 positions (test_geometry covers deepseek-v3.2 there)"; }

# the plain command a new user runs first
[ $san = 0 ] && { out=$("$DHS" run --backend cpu --geometry glm-5.3 --sessions 2 --context 4096 --tokens 4 --json 2>/dev/null) || fail "glm-5.3 exited $?"
[ "$(echo "$out" | key identical)" = true ] || fail "glm-5.3 not identical"
[ "$(echo "$out" | key logit_mismatches)" = 0 ] || fail "glm-5.3 logit mismatches"
[ "$(echo "$out" | key config.topk)" = 2048 ] || fail "glm-5.3 k is not 2048"
[ "$(echo "$out" | key config.geometry)" = glm-5.3 ] || fail "glm-5.3 geometry key"
echo "$out" | key hidden | grep -q 'd_model' || fail "glm-5.3 JSON lacks the hidden size"
[ "$(echo "$out" | key synthetic_history_positions)" -gt 8000 ] || fail "glm-5.3 synthetic history not reported"
[ "$(echo "$out" | key sessions)" = 2 ] || fail "glm-5.3 sessions"
echo "glm-5.3 plain: identical, $(echo "$out" | key logit_rows_compared) logit rows, $(echo "$out" | key throughput.total_s) s"; }

# speculation under a budget that forces reclaims (history of half a session), checks after every round
for g in $geoms; do
    out=$("$DHS" run --backend cpu --geometry $g --sessions 3 --context $ctx --tokens $tok --spec 3 --slots 2 --history 0.5 \
        --arrival 1 --async-delay 2 --check --json 2>/dev/null) || fail "$g spec exited $?"
    [ "$(echo "$out" | key identical)" = true ] || fail "$g spec not identical"
    [ "$(echo "$out" | key reclaims)" -gt 0 ] || fail "$g spec: no reclaim"
    [ "$(echo "$out" | key census.host)" -gt 0 ] || fail "$g spec: no row recovered from host"
    [ "$(echo "$out" | key invariant_violations)" = 0 ] || fail "$g invariants"
    [ "$(echo "$out" | key shadow_mismatches)" = 0 ] || fail "$g located rows"
    [ "$(echo "$out" | key proposals)" -gt 0 ] || fail "$g: no speculation"
    echo "$g K=3 under reclaim: identical, $(echo "$out" | key reclaims) reclaims, $(echo "$out" | key throughput.total_s) s"
done

# sampling verification, and the text output
[ $san = 0 ] && { txt=$("$DHS" run --backend cpu --geometry deepseek-v3.2 --sessions 2 --context 2200 --tokens 5 --spec 4 --verify sample \
    --slots 1 --history 0.3 2>/dev/null) || fail "deepseek-v3.2 sample exited $?"
echo "$txt" | grep -q '^identical: yes' || fail "deepseek-v3.2 sample not identical"
echo "$txt" | grep -q '61 payload sources of 656-byte rows, 61 index producers with 132-byte keys, k=2048' || fail "v3.2 geometry line"
echo "$txt" | grep -q 'hidden size kept small' || fail "hidden size line"
echo "$txt" | grep -q 'history      synthetic' || fail "synthetic history line"; }

"$DHS" run --geometry glm-5 >/dev/null 2>&1; [ $? -eq 2 ] || fail "run --geometry glm-5 must exit 2"

if [ $fails -eq 0 ]; then echo "geometry: all checks passed"; else echo "geometry: $fails failed"; fi
[ $fails -eq 0 ]
