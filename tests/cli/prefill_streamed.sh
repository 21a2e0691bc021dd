#!/usr/bin/env bash
# CLI test of `dhs run --prefill-buffers R --prefill-chunk N` (docs/FLASHOFFLOAD.md section 2): the
# layer-streamed prefill feeding the hierarchy. On the CPU backend it runs the CPU reference
# (dhs_ref_prefill_streamed) through R buffers; the histories it imports must give the same tokens
# (tokens_digest) as the model's full-residency prefill, for any R and chunk, identical to resident.
# A real geometry with --prefill-buffers computes its prompts with the model (no synthetic history):
# R = 2, 4 and L + 1 (every layer resident in the executor) must agree. Bad values are bad usage
# (exit 2, nothing on stdout). The GPU model's streamed prefill (dhs_ref_prefill_streamed_gpu, picked
# by --backend cuda) is compared byte for byte by test_lsprefill_cuda on a GPU.
# Usage: bash tests/cli/prefill_streamed.sh path/to/dhs
set -u
DHS=${1:?usage: prefill_streamed.sh path/to/dhs}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# "identical prefill_buffers tokens_digest error layer_loads buffer_bytes resident_bytes" of a --json output
keys() { python3 -c "import json,sys; d=json.load(sys.stdin); c=d['config']; p=d.get('prefill', {}); print(str(d['identical']).lower(), c['prefill_buffers'], d['tokens_digest'], d.get('error', '-').replace(' ', '_'), p.get('layer_loads', '-'), p.get('buffer_bytes', '-'), p.get('resident_bytes', '-'))"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for bad in 1 -1 x ""; do
    "$DHS" run --backend cpu --prefill-buffers "$bad" --sessions 2 --context 300 --tokens 3 --json >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || fail "--prefill-buffers '$bad' exited $rc, not 2"
    [ -s "$tmp/out" ] && fail "--prefill-buffers '$bad' printed on stdout"
    [ -s "$tmp/err" ] || fail "--prefill-buffers '$bad': nothing on stderr"
done
"$DHS" run --backend cpu --prefill-chunk 0 --sessions 2 --context 300 --tokens 3 >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--prefill-chunk 0 exited $rc, not 2"
"$DHS" run --help 2>&1 | grep -q -- '--prefill-buffers' || fail "dhs run --help does not list --prefill-buffers"

run() { "$DHS" run --backend cpu --sessions 3 --context 420 --tokens 5 --spec 3 --page-rows 16 --history 0.5 --threads 2 --json -q "$@" 2>"$tmp/err"; }
read -r i0 b0 d0 e0 l0 _ <<<"$(run | keys)"
[ "$l0" = - ] || fail "full-residency prefill reports streamed loads ($l0)"
[ "$i0" = true ] || fail "full-residency prefill: not identical to resident ($e0)"
[ "$b0" = 0 ] || fail "the default prefill_buffers is $b0, not 0"
echo "$d0" | grep -qE '^[0-9a-f]{16}$' || fail "tokens_digest '$d0' is not 16 hex digits"
for rc in "2 64" "3 37" "3 2048" "4 100" "9 100"; do
    set -- $rc
    read -r i b d e l bb rb <<<"$(run --prefill-buffers $1 --prefill-chunk $2 | keys)"
    [ "$i" = true ] || fail "R $1 chunk $2: not identical to resident ($e)"
    [ "$b" = "$1" ] || fail "R $1 chunk $2: config.prefill_buffers is $b"
    [ "$d" = "$d0" ] || fail "R $1 chunk $2: tokens $d differ from the full-residency prefill's $d0"
    # the tiny model has 4 layers: R < 4 streams (every layer of every prompt loaded, buffers below full
    # residency); R >= 4 gives every layer its own buffer
    if [ "$1" -lt 4 ]; then
        python3 -c "import sys; l, b, r = map(float, sys.argv[1:]); sys.exit(not (l >= 3 * 4 and 0 < b < r))" "$l" "$bb" "$rb" ||
            fail "R $1 chunk $2: not streamed (layer_loads $l, buffer_bytes $bb, resident_bytes $rb)"
    fi
    echo "prefill_streamed: tiny R $1 chunk $2: tokens $d (full residency $d0); $l layer loads, buffers $bb of $rb bytes"
done
read -r _ _ s _ <<<"$(run --prefill-buffers 4 --prefill-chunk 64 --seed 7 | keys)"
[ -n "$s" ] && [ "$s" != "$d0" ] || fail "tokens_digest did not change with the seed ('$d0', '$s')"

# a real geometry: the model prefills (GLM-5.3: 78 layers, so R = 79 keeps every layer resident)
grun() { "$DHS" run --backend cpu --geometry glm-5.3 --sessions 2 --context 260 --tokens 3 --spec 1 --threads 2 --json -q "$@" 2>"$tmp/err"; }
read -r gi _ gd ge <<<"$(grun --prefill-buffers 79 --prefill-chunk 260 | keys)"
[ "$gi" = true ] || fail "glm-5.3 R 79: not identical to resident ($ge)"
for R in 2 4; do
    read -r i _ d e l bb rb <<<"$(grun --prefill-buffers $R --prefill-chunk 64 | keys)"
    python3 -c "import sys; l, b, r = map(float, sys.argv[1:]); sys.exit(not (l > 2 * 78 and 0 < b < r))" "$l" "$bb" "$rb" ||
        fail "glm-5.3 R $R: not streamed (layer_loads $l, buffer_bytes $bb, resident_bytes $rb)"
    [ "$i" = true ] || fail "glm-5.3 R $R: not identical to resident ($e)"
    [ "$d" = "$gd" ] || fail "glm-5.3 R $R chunk 64: tokens $d differ from R 79's $gd"
    echo "prefill_streamed: glm-5.3 R $R chunk 64: tokens $d (R 79, one chunk: $gd)"
done
[ $fails -eq 0 ] && echo "prefill_streamed: all passed" || { echo "prefill_streamed: $fails failed"; exit 1; }
