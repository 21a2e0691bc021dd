#!/usr/bin/env bash
# CLI test of `dhs run --topk-impl model|fused|split` (docs/MODEL.md "Top-k"): what
# the CPU can check. A bad value or a missing one is bad usage (exit 2, nothing
# on stdout); --help lists the flag and its default (split). On the CPU backend fused and split run the CPU
# model with the library's fused top-k reference (dhs_topk_fused_ref): every
# layout gives the same tokens (tokens_digest) as the model's top-k, identical
# to resident, and the JSON says which top-k ran (config.topk_impl); a run
# without the flag runs split with the same digest. The
# digest changes with the seed, so equal digests are not vacuous. The GPU
# model's fused path (dhs_cuda_topk_fused_n) is checked by test_gpu_model and
# bench/gpu_step.sh on a GPU.
# Usage: bash tests/cli/topk_impl.sh path/to/dhs
set -u
DHS=${1:?usage: topk_impl.sh path/to/dhs}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# "identical topk_impl tokens_digest" of a --json output (one python start per run: CI has 2 cores)
keys() { python3 -c "import json,sys; d=json.load(sys.stdin); print(str(d['identical']).lower(), d['config']['topk_impl'], d['tokens_digest'])"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for bad in sideways "" 2048; do
    "$DHS" run --backend cpu --topk-impl "$bad" --sessions 2 --context 300 --tokens 3 --json >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || fail "--topk-impl '$bad' exited $rc, not 2"
    [ -s "$tmp/out" ] && fail "--topk-impl '$bad' printed on stdout"
    [ -s "$tmp/err" ] || fail "--topk-impl '$bad': nothing on stderr"
done
"$DHS" run --backend cpu --topk-impl >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--topk-impl without a value exited $rc, not 2"
"$DHS" run --help 2>&1 | grep -q -- '--topk-impl' || fail "dhs run --help does not list --topk-impl"

run() { "$DHS" run --backend cpu --sessions 3 --context 150 --tokens 5 --spec 3 --page-rows 16 --history 0.5 --threads 1 --json -q "$@" 2>"$tmp/err"; }
for layout in own follow compressed; do
    m=$(run --layout $layout --topk-impl model | keys) || fail "$layout model exited $?: $(cat "$tmp/err")"
    f=$(run --layout $layout --topk-impl fused | keys) || fail "$layout fused exited $?: $(cat "$tmp/err")"
    read -r im tm dm <<<"$m"
    read -r if_ tf df <<<"$f"
    [ "$if_" = true ] || fail "$layout --topk-impl fused: not identical to resident"
    [ "$im" = true ] || fail "$layout --topk-impl model: not identical to resident"
    [ "$tf" = fused ] || fail "$layout: config.topk_impl is not fused"
    [ "$tm" = model ] || fail "$layout: config.topk_impl is not model"
    echo "$df" | grep -qE '^[0-9a-f]{16}$' || fail "$layout: tokens_digest '$df' is not 16 hex digits"
    [ "$dm" = "$df" ] || fail "$layout: --topk-impl fused tokens $df differ from the model top-k's $dm"
    s=$(run --layout $layout --topk-impl split | keys) || fail "$layout split exited $?: $(cat "$tmp/err")"
    read -r is ts ds <<<"$s"
    [ "$is" = true ] || fail "$layout --topk-impl split: not identical to resident"
    [ "$ts" = split ] || fail "$layout: config.topk_impl is not split"
    [ "$ds" = "$dm" ] || fail "$layout: --topk-impl split tokens $ds differ from the model top-k's $dm"
    echo "topk_impl: $layout: model $dm, fused $df, split $ds"
done
read -r _ _ d <<<"$(run --topk-impl model | keys)"
read -r _ _ s <<<"$(run --topk-impl fused --seed 7 | keys)"
[ -n "$d" ] && [ "$d" != "$s" ] || fail "tokens_digest did not change with the seed ('$d', '$s')"
read -r ib tb db <<<"$(run | keys)"
[ "$tb" = split ] || fail "the default top-k is not split ('$tb')"
[ "$ib" = true ] || fail "the default top-k's run is not identical to resident"
[ "$db" = "$d" ] || fail "the default top-k's tokens $db differ from the model top-k's $d"
"$DHS" run --help 2>&1 | grep -A8 -- '--topk-impl' | grep -q 'split (default)' || fail "dhs run --help does not say split is the default"
"$DHS" bench serve --help 2>&1 | grep -A6 -- '--topk-impl' | grep -q 'split (default)' ||
    fail "dhs bench serve --help does not say split is the default"
"$DHS" run --backend cpu --sessions 2 --context 200 --tokens 3 --topk-impl fused -q 2>/dev/null | grep -q "top-k        fused" ||
    fail "the human output does not say the fused top-k ran"
"$DHS" run --backend cpu --sessions 2 --context 200 --tokens 3 -q 2>/dev/null | grep -q "top-k        split" ||
    fail "the human output does not say the split top-k ran by default"
"$DHS" run --backend cpu --sessions 2 --context 200 --tokens 3 --topk-impl model -q 2>/dev/null | grep -q "top-k        model" ||
    fail "the human output does not say the model's top-k ran"

if [ $fails -eq 0 ]; then echo "topk_impl: all checks passed"; else echo "topk_impl: $fails failed"; fi
[ $fails -eq 0 ]
