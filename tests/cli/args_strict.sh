#!/usr/bin/env bash
# CLI test of strict input checking in the `dhs` tool: comma lists without
# empty elements, numbers without leading white space or (unsigned) a sign,
# 64-bit seeds exact in JSON, request-trace numbers checked whole, and a
# configuration that cannot be held refused as usage (2), not as a runtime
# failure (3). Usage: bash tests/cli/args_strict.sh path/to/dhs
set -u
DHS=${1:?usage: args_strict.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_strict.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"
DATA="$(cd "$(dirname "$0")/../data" && pwd)"

# exit 2 with a one-line message on stderr that names the flag
expect_bad() {
    local flag=$1; shift
    expect 2 "$DHS" "$@"
    grep -q -- "$flag" "$T/err" || fail "'$*': stderr does not name $flag: $(head -c 300 "$T/err")"
    [ "$(wc -l <"$T/err")" -eq 1 ] || fail "'$*': not one line on stderr: $(head -c 300 "$T/err")"
}

expect 0 "$DHS" trace gen --out "$T/t.dtr" --requests 2 --rounds 20 --k 128 --context 1024 --window 64 --window-full 8 \
    --clusters 4 --cluster-radius 8

# ---------------------------------------------------------------- comma lists: no empty element anywhere
expect_bad --concurrency bench serve --concurrency 2,3,
expect_bad --concurrency bench serve --concurrency ,2
expect_bad --modes bench serve --modes adaptive,adaptive
expect_bad --hot bench resolve --hot 2048,
expect_bad --hot sim --trace "$T/t.dtr" --hot 64,
expect_bad --concurrency serve-sim --concurrency 2,3,
expect_bad --spec-widths serve-sim --spec compare --spec-widths 2,
expect_bad --rates serve-sim --rates 1,,2
expect_bad --cache trace stats "$T/t.dtr" --cache 64,
expect_bad --cache trace stats "$T/t.dtr" --cache 64,,128
expect_bad --group-hot-rows run --group-hot-rows 64,
expect_bad --group-hot-rows bench serve --group-hot-rows 64,
expect_bad --modes bench serve --modes fixed,,resident
expect_bad --modes bench serve --modes fixed,
expect_bad --spec bench serve --spec ,1
expect_bad --spec bench serve --spec 1,
expect_bad --policies sim --trace "$T/t.dtr" --policies lru,,fifo
expect_bad --policies sim --trace "$T/t.dtr" --policies lru,
expect_bad --modes serve-sim --modes fixed,,adaptive
expect_bad --placement serve-sim --dp-ranks 2 --placement round-robin,
expect_bad --spec-schedule serve-sim --spec-schedule 8@32,4,
# white space inside a list is no element either
expect_bad --cache trace stats "$T/t.dtr" --cache "64, 128"
expect_bad --hot sim --trace "$T/t.dtr" --hot "64, 128"
# well-formed lists still work
expect 0 "$DHS" sim --trace "$T/t.dtr" --hot 64,128 --policies lru,fifo -q
expect 0 "$DHS" trace stats "$T/t.dtr" --cache 64,128
expect 0 "$DHS" serve-sim --requests 4 --concurrency 1,2 --context 4096 --output-len 8 --modes resident,fixed --spec off -q

# ---------------------------------------------------------------- numbers: no leading white space, no sign on unsigned
expect_bad --seed verify --requests 2 --steps 5 -q --seed $'\t-1'
expect_bad --seed verify --requests 2 --steps 5 -q --seed $'\n-5'
expect_bad --seed verify --requests 2 --steps 5 -q --seed ' 5'
expect_bad --seed verify --requests 2 --steps 5 -q --seed +5
expect_bad --seed verify --requests 2 --steps 5 -q --seed -1
expect_bad --k verify --requests 2 --steps 5 -q --k $'\t5'
expect_bad --faults verify --requests 2 --steps 5 -q --faults $'\n0.1'
expect_bad --hot sim --trace "$T/t.dtr" --hot $'\v64'
expect 0 "$DHS" verify --requests 2 --steps 5 -q --seed 18446744073709551615

# ---------------------------------------------------------------- 64-bit seeds exact in JSON
expect 0 "$DHS" verify --requests 2 --steps 5 -q --seed 123456789012345678 --json
python3 -c "import json; s=json.load(open('$T/out'))['seed']; assert type(s) is int and s == 123456789012345678, s" ||
    fail "verify --json: seed not exact: $(grep -o '"seed":[^,]*' "$T/out")"
expect 0 "$DHS" verify --requests 2 --steps 5 -q --seed 18446744073709551615 --json
python3 -c "import json; assert json.load(open('$T/out'))['seed'] == 18446744073709551615" || fail "verify --json: seed 2^64-1 not exact"
expect 0 "$DHS" serve-sim --calibrate "$DATA/gpu_serve_100k_fixed_rowattn.json" --seed 123456789012345678 --json -q
python3 -c "import json; s=json.load(open('$T/out'))['config']['seed']; assert type(s) is int and s == 123456789012345678, s" ||
    fail "serve-sim --calibrate --json: seed not exact"

# ---------------------------------------------------------------- request traces: every number whole and in range
printf 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n0,x,1000abc,4,1004,x\n' >"$T/bad.csv"
expect 2 "$DHS" serve-sim --requests-trace "$T/bad.csv" --modes resident --spec off -q
grep -q "bad.csv:2: Request tokens '1000abc'" "$T/err" || fail "BurstGPT 1000abc: file, line and field named: $(cat "$T/err")"
printf 'Timestamp,Model,Request tokens,Response tokens\n0,x,1000,4\n1.5x,x,1000,4\n' >"$T/badt.csv"
expect 2 "$DHS" serve-sim --requests-trace "$T/badt.csv" --modes resident --spec off -q
grep -q "badt.csv:3: Timestamp" "$T/err" || fail "BurstGPT timestamp 1.5x: named: $(cat "$T/err")"
printf '{"timestamp": 0, "input_length": 1000, "output_length": 8}\n{"timestamp": 1, "input_length": 1e300, "output_length": 8}\n' >"$T/big.jsonl"
expect 2 "$DHS" serve-sim --requests-trace "$T/big.jsonl" --modes resident --spec off -q
grep -q "big.jsonl:2: input_length" "$T/err" || fail "Mooncake 1e300: file, line and field named: $(cat "$T/err")"
grep -q "negative" "$T/err" && fail "Mooncake 1e300 called negative: $(cat "$T/err")"
printf '{"timestamp": 0, "input_length": 100.5, "output_length": 8}\n' >"$T/frac.jsonl"
expect 2 "$DHS" serve-sim --requests-trace "$T/frac.jsonl" --modes resident --spec off -q
grep -q "frac.jsonl:1: input_length 100.5" "$T/err" || fail "Mooncake 100.5: named: $(cat "$T/err")"

# ---------------------------------------------------------------- configurations that cannot be held: 2, not 3
expect_bad --device-mib sim --trace "$T/t.dtr" --hot 64 --device-mib 16777216 -q
expect_bad --kv-gib serve-sim --kv-gib 1e-6 --requests 2 --concurrency 1 -q
expect 2 "$DHS" serve-sim --kv-gib 1e-6 --requests 2 --concurrency 1 --modes fixed --spec off -q
grep -q "kv-gib" "$T/err" || fail "serve-sim fixed at 1e-6 GiB: --kv-gib named: $(cat "$T/err")"
expect_bad --requests serve-sim --concurrency 1 --requests 0 -q
python3 - "$DATA/gpu_serve_100k_fixed_rowattn.json" "$T/huge.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["config"]["device_budget_bytes"] = 1e300
json.dump(d, open(sys.argv[2], "w"))
EOF
expect 2 "$DHS" serve-sim --calibrate "$T/huge.json" -q
grep -q "budget" "$T/err" || fail "calibrate 1e300 budget: named: $(cat "$T/err")"
[ -s "$T/out" ] && fail "calibrate 1e300 budget: printed $(wc -c <"$T/out") bytes before refusing"
# the core addresses at most 2^31-1 pool rows; the CPU pool must fit the machine's memory
expect 2 "$DHS" verify --requests 1024 --steps 1 --k 4096 --hot 1048576 --page-rows 4096 --compress 2 -q
grep -q "2^31-1" "$T/err" || fail "verify above 2^31-1 pool rows: the limit named: $(cat "$T/err")"
expect 2 "$DHS" verify --requests 1024 --steps 1 --hot 1048576 --page-rows 4096 --row-bytes 65536 -q
grep -q "memory" "$T/err" || fail "verify with a 64 TiB pool: memory named: $(cat "$T/err")"

# ---------------------------------------------------------------- the device resolver runs CLOCK only
expect_bad --policy verify --resolver device --policy lru --requests 2 --steps 5 -q
expect_bad --policy verify --resolver device --policy fifo --requests 2 --steps 5 -q
expect 0 "$DHS" verify --resolver device --policy clock --requests 2 --steps 5 -q
expect 0 "$DHS" verify --resolver device --requests 2 --steps 5 -q --json
python3 -c "import json; assert json.load(open('$T/out'))['policy'] == 'clock'" || fail "verify --resolver device: policy clock"

finish args_strict
