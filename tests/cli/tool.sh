#!/usr/bin/env bash
# CLI test of what every `dhs` command shares: --version, --help/-h on every
# command and sub-command, --flag=value, ranges in errors, unknown commands,
# exit statuses (2 usage, 3 runtime), files checked before any work, the
# provenance keys of every JSON, --output. Usage: bash tests/cli/tool.sh path/to/dhs
set -u
DHS=${1:?usage: tool.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_tool.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

# the JSON object in $T/out has key K
has_key() { python3 -c "import json,sys; d=json.load(open('$T/out')); sys.exit(0 if '$1' in d else 1)"; }
# every provenance key, and version = the library's
prov() {
    for k in version commit date host device; do has_key $k || fail "$1: JSON lacks '$k'"; done
    python3 -c "import json,sys; d=json.load(open('$T/out')); sys.exit(0 if d['version'] == '$VERSION' else 1)" ||
        fail "$1: JSON version is not $VERSION"
}

# ---------------------------------------------------------------- version
expect 0 "$DHS" --version
grep -Eq "^dhs [0-9]+\.[0-9]+\.[0-9]+ .*commit [0-9a-z-]+" "$T/out" || fail "--version prints version and commit: $(cat "$T/out")"
VERSION=$(sed -n 's/^dhs \([0-9.]*\) .*/\1/p' "$T/out")
echo "dhs --version: $(cat "$T/out")"

# ---------------------------------------------------------------- help everywhere
for c in "" run verify bench "bench resolve" plan trace "trace gen" "trace info" sim serve-sim; do
    for h in --help -h; do
        # shellcheck disable=SC2086
        expect 0 "$DHS" $c $h
        [ -s "$T/out" ] || fail "'dhs $c $h' prints help on stdout"
    done
done
# every numeric flag of every command names its range in --help
for c in run verify "bench resolve" plan "trace gen" sim serve-sim; do
    # shellcheck disable=SC2086
    "$DHS" $c --help >"$T/help" 2>&1
    python3 - "$T/help" "$c" <<'EOF' || fail "dhs $c --help: a numeric flag without its range"
import re, sys
text = open(sys.argv[1]).read()
# flag entries: "  --name N ..." up to the next entry; N / X are numeric placeholders
entries = re.split(r"\n  (?=-)", text)
bad = [e.split()[0] for e in entries if re.match(r"(-\w, )?--[\w-]+ (N|X)\b", e) and not re.search(r"\bin\s+-?[\d.e+-]+\.\.", e)]
if bad:
    print("no range:", bad)
sys.exit(1 if bad else 0)
EOF
done

# ---------------------------------------------------------------- unknown commands, exit 2
expect 2 "$DHS"
expect 2 "$DHS" nosuch
grep -q "unknown command 'nosuch'" "$T/err" || fail "dhs nosuch: message"
expect 2 "$DHS" bench nosuch
expect 2 "$DHS" bench resolv
expect 2 "$DHS" trace nosuch
expect 2 "$DHS" run --nosuch
grep -q -- "--nosuch" "$T/err" || fail "unknown flag named"

# ---------------------------------------------------------------- ranges in errors
expect 2 "$DHS" verify --requests 5000
grep -q "1..1024" "$T/err" || fail "verify --requests 5000 names the range: $(cat "$T/err")"
expect 2 "$DHS" run --sessions=0
grep -q "1..4096" "$T/err" || fail "run --sessions=0 names the range: $(cat "$T/err")"
expect 2 "$DHS" run --sessions
grep -q "needs a value" "$T/err" || fail "run --sessions without a value"
expect 2 "$DHS" bench resolve --k=abc
expect 2 "$DHS" verify --policy=belady
grep -q "lru|clock|fifo|lfu" "$T/err" || fail "an enum names its choices"
expect 2 "$DHS" verify --json=1
# empty work is refused
expect 2 "$DHS" verify --steps 0
expect 2 "$DHS" trace gen --out "$T/x.dtr" --rounds 0

# ---------------------------------------------------------------- checked before any work
# a GPU that is not there: exit 2 at once, before any prefill
expect_cuda() {
    "$DHS" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 0 ]; then echo "note: a CUDA device is present; '$*' ran"; return; fi
    [ $rc -eq 2 ] || fail "'$*' without a GPU exited $rc, expected 2"
    grep -q "prefill" "$T/err" && fail "'$*' without a GPU started a prefill"
    grep -q "cuda" "$T/err" || fail "'$*': message names the backend"
}
expect_cuda run --backend cuda --sessions 2 --context 64 --tokens 2
expect_cuda verify --backend cuda --requests 2 --steps 2
expect 2 "$DHS" run --trace /nonexistent/dir/t.dtr --sessions 2 --context 64 --tokens 2
grep -q "prefill" "$T/err" && fail "run: an unwritable --trace is found before the prefill"
expect 2 "$DHS" run --output /nonexistent/dir/r.json --sessions 2 --context 64 --tokens 2
expect 2 "$DHS" sim --trace "$T/missing.dtr"
expect 2 "$DHS" serve-sim --requests-trace "$T/missing.jsonl"
expect 2 "$DHS" serve-sim --csv /nonexistent/dir/x.csv --requests 2

# ---------------------------------------------------------------- JSON provenance, --flag=value, --output
expect 0 "$DHS" run --sessions=2 --context=200 --tokens=4 --json -q
prov "run"
python3 -c "import json; d=json.load(open('$T/out')); assert d['identical'] is True and d['sessions'] == 2" ||
    fail "run --sessions=2: 2 sessions, identical"
expect 0 "$DHS" verify --requests=4 --steps=10 --json
prov "verify"
expect 0 "$DHS" bench resolve --hot=2048 --k=256 --misses=16 --rounds=20 --repeat=1 --json
prov "bench resolve"
expect 0 "$DHS" plan --context=1000 --json
prov "plan"
expect 0 "$DHS" trace gen --out="$T/a.dtr" --requests=2 --rounds=20 --k=128 --context=1024 --window=64 --window-full=8 \
    --clusters=4 --cluster-radius=8
expect 0 "$DHS" trace info "$T/a.dtr" --json
prov "trace info"
expect 0 "$DHS" sim --trace="$T/a.dtr" --policies=lru --hot=128 --json -q
prov "sim"
expect 0 "$DHS" serve-sim --requests=4 --concurrency=2 --context=4096 --output-len=8 --modes=resident --spec=off --json -q
prov "serve-sim"
# --output: the results go to the file, nothing to stdout
expect 0 "$DHS" plan --context 1000 --json --output "$T/plan.json"
[ -s "$T/out" ] && fail "plan --output: stdout not empty"
python3 -c "import json; json.load(open('$T/plan.json'))['version']" || fail "plan --output: the file holds the JSON"
expect 0 "$DHS" verify --requests 4 --steps 10 --output "$T/verify.txt"
grep -q "violations: 0" "$T/verify.txt" || fail "verify --output writes the text"

# ---------------------------------------------------------------- bad values refused
printf '{"timestamp": 0, "input_length": 100, "output_length": 10}\n{"timestamp": 5, "input_length": 100, "output_length": 10}\n{"timestamp": -3, "input_length": 100, "output_length": 10}\n' >"$T/neg.jsonl"
expect 2 "$DHS" serve-sim --requests-trace "$T/neg.jsonl" -q
grep -q "neg.jsonl:3: negative timestamp" "$T/err" || fail "negative timestamp named with its line: $(cat "$T/err")"
printf 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,m,100,10,110,x\n2,m,-5,10,5,x\n' >"$T/neg.csv"
expect 2 "$DHS" serve-sim --requests-trace "$T/neg.csv" -q
grep -q "neg.csv:3: negative input length" "$T/err" || fail "negative length named with its line: $(cat "$T/err")"
printf '{"timestamp": 0, "input_length": 1000, "output_length": 8}\n{"timestamp": 500, "input_length": 2000, "output_length": 8}\n' >"$T/ok.jsonl"
expect 0 "$DHS" serve-sim --requests-trace "$T/ok.jsonl" --modes resident --spec off -q
grep -q "requests trace ok.jsonl (2 requests" "$T/out" || fail "serve-sim header names the trace: $(head -1 "$T/out")"
grep -q "prompts 16384" "$T/out" && fail "serve-sim header shows the unused synthetic ranges"
expect 0 "$DHS" serve-sim --requests-trace "$T/ok.jsonl" --modes resident --spec off --json -q
python3 -c "import json; c=json.load(open('$T/out'))['config']; assert c['requests_trace'].endswith('ok.jsonl') and 'context' not in c" ||
    fail "serve-sim JSON names the trace instead of the synthetic ranges"
expect 2 "$DHS" serve-sim --rates 1 --concurrency 2
expect 2 "$DHS" plan --hbm-gib 10
grep -q "weights" "$T/err" || fail "plan: negative free HBM explained"
expect 2 "$DHS" plan --hot 32 --page-rows 64
printf '{"name": "a", "groups": [], "name": "b"}\n' >"$T/dup.json"
expect 2 "$DHS" plan --arch "$T/dup.json"
grep -q 'duplicate key "name"' "$T/err" || fail "plan: duplicate key named: $(cat "$T/err")"
# "Nx less" says "more" when the hierarchy takes more memory
expect 0 "$DHS" plan --context 1000
grep -q "x more" "$T/out" || fail "plan at a short context says 'more'"
grep -q "x less" "$T/out" && fail "plan at a short context says 'less'"

finish tool
