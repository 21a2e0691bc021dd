#!/usr/bin/env bash
# CLI test of `dhs bench resolve`: --help lists the flags of both backends with their ranges; --backend cpu
# still runs (a tiny configuration, its JSON); --backend cuda either fails cleanly (no CUDA backend built or
# no device: one line on stderr, nothing on stdout, exit 2, as every command) or, on a GPU machine, prints JSON lines with the
# documented keys; bad flag combinations are usage errors (exit 2) before anything starts.
# Usage: bash tests/cli/bench.sh path/to/dhs
set -u
DHS=${1:?usage: bench.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

# ---------------------------------------------------------------- help
expect 0 "$DHS" bench resolve --help
for f in --backend --hot --hot-rows --batch --misses --queries --k --row-bytes --rounds --policy --repeat --reps \
         --graph-calls --layout --span-gib --host-pages --breakdown --carveout --copy-blocks --fresh-rounds --direct \
         --json --output; do
    grep -q -- "^  \(-., \)\?$f " "$T/out" || fail "bench resolve --help does not list $f"
done
tr -s ' \n' '  ' <"$T/out" >"$T/help1" # one line: wrapped descriptions joined
grep -q "one of cpu|cuda" "$T/help1" || fail "--help: --backend choices"
grep -q "one of default|thp|2m|1g|all" "$T/help1" || fail "--help: --host-pages choices"
grep -q "one of compact|scattered|both" "$T/help1" || fail "--help: --layout choices"
grep -q "in 1..256 \[1,8,64,256\]" "$T/help1" || fail "--help: --batch range and default"
grep -q "in 1..4 \[1,4\]" "$T/help1" || fail "--help: --queries range and default"
grep -q "cuda 0,32,300,2048" "$T/help1" || fail "--help: --misses cuda default"

# ---------------------------------------------------------------- cpu: today's behaviour
expect 0 "$DHS" bench resolve --backend cpu --hot 2048 --k 256 --misses 16 --rounds 20 --repeat 1 --json
python3 - "$T/out" <<'EOF' || fail "bench resolve --backend cpu --json: $(head -c 300 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["backend"] == "cpu" and d["k"] == 256 and d["misses_per_call"] == 16, d
r = d["results"]
assert len(r) == 1 and r[0]["hot"] == 2048 and r[0]["us_per_call"] > 0 and r[0]["host_rows_per_call"] == 16.0, r
EOF
expect 0 "$DHS" bench resolve --hot 2048 --k 256 --misses 16 --rounds 20 --repeat 1
grep -q "resolver, CPU backend, one core" "$T/out" || fail "bench resolve (cpu table): $(head -c 200 "$T/out")"

# ---------------------------------------------------------------- usage errors (2), before any work
expect 2 "$DHS" bench resolve --backend cpu --batch 4
grep -q -- "--batch applies to --backend cuda only" "$T/err" || fail "cpu + --batch: message"
expect 2 "$DHS" bench resolve --backend cpu --host-pages all
expect 2 "$DHS" bench resolve --backend cpu --misses 0
expect 2 "$DHS" bench resolve --backend cpu --misses 16,32
expect 2 "$DHS" bench resolve --backend cuda --rounds 10
grep -q -- "--rounds applies to --backend cpu only" "$T/err" || fail "cuda + --rounds: message"
expect 2 "$DHS" bench resolve --backend cuda --hot-rows 100
expect 2 "$DHS" bench resolve --backend cuda --hot-rows 131072
expect 2 "$DHS" bench resolve --backend cuda --misses 4096
expect 2 "$DHS" bench resolve --backend cuda --queries 5
expect 2 "$DHS" bench resolve --backend cuda --batch 257
expect 2 "$DHS" bench resolve --backend cuda --k 4096
expect 2 "$DHS" bench resolve --backend cuda --row-bytes 100
expect 2 "$DHS" bench resolve --backend cuda --host-pages 4k
expect 2 "$DHS" bench resolve --backend cuda --layout compact --host-pages 2m
expect 2 "$DHS" bench resolve --backend cuda --carveout 101
expect 2 "$DHS" bench resolve --backend cuda --carveout -2
expect 2 "$DHS" bench resolve --backend cpu --carveout 50
grep -q -- "--carveout applies to --backend cuda only" "$T/err" || fail "cpu + --carveout: message"
expect 2 "$DHS" bench resolve --backend cuda --copy-blocks -1
expect 2 "$DHS" bench resolve --backend cuda --copy-blocks 65537
expect 2 "$DHS" bench resolve --backend cpu --copy-blocks 8
grep -q -- "--copy-blocks applies to --backend cuda only" "$T/err" || fail "cpu + --copy-blocks: message"
expect 2 "$DHS" bench resolve --backend cpu --fresh-rounds
grep -q -- "--fresh-rounds applies to --backend cuda only" "$T/err" || fail "cpu + --fresh-rounds: message"
expect 2 "$DHS" bench resolve --backend cpu --direct
grep -q -- "--direct applies to --backend cuda only" "$T/err" || fail "cpu + --direct: message"

# ---------------------------------------------------------------- cuda: runs on a GPU, else exit 2 ("not available here") cleanly
tiny=(--batch 1 --hot-rows 2048 --misses 0,32 --queries 1 --reps 10 --graph-calls 4 --span-gib 0.5 --json)
"$DHS" bench resolve --backend cuda "${tiny[@]}" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc = 2 ]; then
    [ ! -s "$T/out" ] || fail "--backend cuda without a device: stdout not empty: $(head -c 200 "$T/out")"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "--backend cuda without a device: not one line on stderr: $(cat "$T/err")"
    grep -q "cuda" "$T/err" || fail "--backend cuda without a device: the message does not say why: $(cat "$T/err")"
    echo "no CUDA here (exit 2): $(cat "$T/err")"
    # the host-pages sweep fails the same way, and never crashes
    expect 2 "$DHS" bench resolve --backend cuda "${tiny[@]}" --host-pages all
    [ ! -s "$T/out" ] || fail "--host-pages all without a device: stdout not empty"
elif [ $rc = 0 ]; then
    python3 - "$T/out" <<'EOF' || fail "bench resolve --backend cuda --json: $(head -c 400 "$T/out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]  # every stdout line is one JSON object
run = recs[0]
assert run["record"] == "run" and run["backend"] == "cuda", run
for key in ("version", "commit", "device", "gpu", "carveout", "copy_blocks", "fresh_rounds", "empty_kernel_p50_us", "empty_kernel_p90_us", "graph_calls",
            "hugepages_total", "thp_enabled"):
    assert key in run, key
cfg = [r for r in recs if r["record"] == "config"]
comp = {(r["layout"], r["misses"]): r for r in cfg}
assert set(comp) == {("compact", 0), ("compact", 32), ("scattered", 32)}, sorted(comp)
for r in cfg:
    for key in ("ours_p50_us", "ours_p90_us", "graph_p50_us", "scan_p50_us", "scan_p90_us", "ours_over_scan"):
        assert r[key] > 0, (key, r)
m0, m32 = comp[("compact", 0)], comp[("compact", 32)]
assert m0["graph_calls"] == 4 and m0["graph_per_call_p50_us"] > 0 and "ceiling_p50_us" not in m0, m0
assert m32["ceiling_p50_us"] > 0 and m32["ceiling_gbs"] > 0 and m32["miss_gbs"] > 0 and "graph_per_call_p50_us" not in m32
assert comp[("scattered", 32)]["host_pages"] == "default"
EOF
    expect 0 "$DHS" bench resolve --backend cuda "${tiny[@]}" --misses 32 --host-pages all
    python3 - "$T/out" <<'EOF' || fail "bench resolve --backend cuda --host-pages all: $(head -c 400 "$T/out")"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
hp = {r["kind"]: r for r in recs if r["record"] == "host_pages"}
assert sorted(hp) == ["1g", "2m", "default", "thp"], sorted(hp)
for k, r in hp.items():
    assert r["available"] or r["reason"], r
kinds = sorted(r["host_pages"] for r in recs if r["record"] == "config")
assert kinds == sorted(k for k, r in hp.items() if r["available"]), kinds
EOF
else
    fail "bench resolve --backend cuda exited $rc (0 on a GPU, 2 without): $(head -c 300 "$T/err")"
fi

finish bench
