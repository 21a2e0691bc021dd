#!/usr/bin/env bash
# CLI test of `dhs sim` and `dhs serve-sim`. Usage: bash tests/cli/sim.sh path/to/dhs
set -u
DHS=${1:?usage: sim.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_sim.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"


# ---------------------------------------------------------------- dhs sim
expect 0 "$DHS" sim --help
for f in --trace --policies --hot --json --csv --plot --opt-fit; do
    grep -q -- "$f" "$T/out" || fail "sim --help lists $f"
done
expect 2 "$DHS" sim
grep -q -- "--trace" "$T/err" || fail "missing --trace explained"
expect 2 "$DHS" sim --trace "$T/missing.dtr"
[ -s "$T/err" ] || fail "missing trace: message on stderr"
expect 2 "$DHS" sim --trace x --bogus
grep -q "bogus" "$T/err" || fail "bad flag named on stderr: $(cat "$T/err")"
expect 2 "$DHS" sim --trace x --policies lru,belady
expect 2 "$DHS" sim --trace x --hot 2048,abc
expect 2 "$DHS" sim --trace x --hot 100
expect 2 "$DHS" sim --trace x --import nowhere
expect 2 "$DHS" sim --trace x --opt-fit -1
expect 2 "$DHS" sim --trace x extra_arg

# locality scaled to k = 256 (the generator's defaults are sized for k = 2048)
expect 0 "$DHS" trace gen --out "$T/a.dtr" --requests 4 --rounds 40 --seed 7 --k 256 --context 4096 --spec 2 \
    --window 128 --window-full 16 --clusters 16 --cluster-radius 16
expect 0 "$DHS" sim --trace "$T/a.dtr" --policies lru,clock,fifo,opt --hot 256,512,1024 --json --csv "$T/a.csv" --plot "$T/a.svg"
J="$T/out"
for key in '"results"' '"policy"' '"hot"' '"host_rows"' '"entries"' '"census"' '"direct"' '"host_rows_per_token"' \
    '"miss_ratio"' '"replay_mentries_per_s"' '"policy_vs_capacity"' '"opt_oracle"'; do
    grep -q "$key" "$J" || fail "sim --json lacks $key"
done
n=$(grep -c '"policy": ' "$J")
[ "$n" -eq 12 ] || fail "sim --json: 4 policies x 3 sizes = 12 results, got $n"
# policy_vs_capacity (dhs_sim_policy_vs_capacity) agrees with the runs it summarises
python3 - "$J" <<'PY' || fail "sim: policy_vs_capacity disagrees with the results"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {(r["policy"], r["hot"]): r["host_rows"] for r in d["results"]}
pvc = d["policy_vs_capacity"]
assert [v["hot"] for v in pvc] == [256, 512, 1024], pvc
for v in pvc:
    h, lru = v["hot"], rows[("lru", v["hot"])]
    online = {p: rows[(p, h)] for p in ("lru", "clock", "fifo")}
    best = min(online, key=lambda p: (online[p], ["lru", "clock", "fifo"].index(p)))
    assert v["lru_host_rows"] == lru and online[v["best_online"]] == online[best], v
    assert abs(v["best_online_cut_vs_lru"] - (1 - online[best] / lru)) < 1e-4, v
    assert abs(v["opt_cut_vs_lru"] - (1 - rows[("opt", h)] / lru)) < 1e-4, v
    if ("lru", 2 * h) in rows:
        assert abs(v["lru_cut_by_doubling_hot"] - (1 - rows[("lru", 2 * h)] / lru)) < 1e-4, v
    else:
        assert "lru_cut_by_doubling_hot" not in v, v
PY
# OPT never above another policy at the same size, never growing with the size
# (sizes appear in ascending order: --hot is given ascending)
awk -F'[:,]' '
    /"policy": / {
        p = $2; gsub(/[" ]/, "", p); h = $4 + 0; r = $6 + 0; rows[p, h] = r; pols[p] = 1
        if (!(h in seen)) { seen[h] = 1; order[++ns] = h }
    }
    END {
        bad = 0; prev = -1
        for (i = 1; i <= ns; i++) {
            h = order[i]
            for (p in pols) if (rows["opt", h] > rows[p, h]) { print "opt above " p " at " h; bad = 1 }
            if (prev >= 0 && rows["opt", h] > prev) { print "opt grows at " h; bad = 1 }
            prev = rows["opt", h]
        }
        exit bad
    }' "$J" || fail "OPT bound violated: $(grep '"policy"' "$J" | head -12)"
# the sweep is not degenerate: LRU misses fall as the cache grows
l256=$(grep '"policy": "lru", "hot": 256,' "$J" | sed 's/.*"host_rows": \([0-9]*\).*/\1/')
l1024=$(grep '"policy": "lru", "hot": 1024,' "$J" | sed 's/.*"host_rows": \([0-9]*\).*/\1/')
[ -n "$l256" ] && [ -n "$l1024" ] && [ "$l1024" -lt "$l256" ] || fail "LRU host rows should fall from B=256 ($l256) to 1024 ($l1024)"
[ "$(wc -l <"$T/a.csv")" -eq 13 ] || fail "sim --csv: header + 12 rows"
head -1 "$T/a.csv" | grep -q "^policy,hot,host_rows" || fail "sim --csv header"
grep -q "<svg" "$T/a.svg" && grep -q "polyline" "$T/a.svg" || fail "sim --plot writes an SVG"
expect 0 "$DHS" sim --trace "$T/a.dtr" --policies lru --hot 512 -q
grep -q "M selected entries/s" "$T/out" || fail "sim prints the replay rate"
grep -q "miss-ratio curves" "$T/out" || fail "sim prints miss-ratio curves"
expect 2 "$DHS" sim --trace "$T/a.dtr" --hot 512 --csv /nonexistent/dir/x.csv -q
# a pool too small to admit a request is a runtime error (3), not a check failure (1)
expect 3 "$DHS" sim --trace "$T/a.dtr" --hot 512 --device-mib 1 -q
[ -s "$T/err" ] || fail "too small a pool: message on stderr"

# ---------------------------------------------------------------- dhs serve-sim
expect 0 "$DHS" serve-sim --help
for f in --rates --concurrency --requests-trace --modes --spec --accept-p --kv-gib --base-us --pcie-gbps --json; do
    grep -q -- "$f" "$T/out" || fail "serve-sim --help lists $f"
done
expect 2 "$DHS" serve-sim --bogus
expect 2 "$DHS" serve-sim --rates 1,x
expect 2 "$DHS" serve-sim --modes resident,magic
expect 2 "$DHS" serve-sim --spec maybe
expect 2 "$DHS" serve-sim --spec-schedule 8@32
expect 2 "$DHS" serve-sim --accept-p 2
expect 2 "$DHS" serve-sim --concurrency 1.5
expect 2 "$DHS" serve-sim --rate-scales 2
expect 2 "$DHS" serve-sim --requests-trace "$T/missing.jsonl"
SMALL=(--k 256 --hot 512 --context 4096 --output-len 8 --requests 8 --kv-gib 2 --max-batch 16 -q)
expect 0 "$DHS" serve-sim "${SMALL[@]}" --concurrency 1,4 --json --csv "$T/s.csv" --plot "$T/s.svg"
for key in request_throughput output_throughput mean_ttft_ms median_ttft_ms p99_ttft_ms mean_tpot_ms median_tpot_ms \
    p99_tpot_ms mean_itl_ms median_itl_ms p99_itl_ms completed duration equal_batch cost_model max_running \
    peak_live_requests peak_request_bytes; do
    grep -q "\"$key\"" "$T/out" || fail "serve-sim --json lacks $key"
done
n=$(grep -c '"mode": ' "$T/out")
[ "$n" -eq 12 ] || fail "serve-sim: 3 modes x 2 spec x 2 loads = 12 runs, got $n"
grep -q '"completed": 8,' "$T/out" || fail "serve-sim: every request completes"
# equal_batch (dhs_serve_equal_batch): overhead = step / resident step - 1, batches ascending
python3 - "$T/out" <<'PY' || fail "serve-sim: equal_batch inconsistent"
import json, sys
eb = json.load(open(sys.argv[1]))["equal_batch"]
assert eb and [e["batch"] for e in eb] == sorted(e["batch"] for e in eb), eb
for e in eb:
    for m in ("fixed", "adaptive"):
        if m + "_step_ms" in e:
            assert abs(e[m + "_overhead"] - (e[m + "_step_ms"] / e["resident_step_ms"] - 1)) < 2e-3, e
PY
grep -qi "nan\|inf" "$T/out" && fail "serve-sim: a non-finite number"
[ "$(wc -l <"$T/s.csv")" -eq 13 ] || fail "serve-sim --csv: header + 12 rows"
grep -q "<svg" "$T/s.svg" || fail "serve-sim --plot writes an SVG"
expect 0 "$DHS" serve-sim "${SMALL[@]}" --rates 1,4 --modes adaptive --spec off
grep -q "equal-batch" "$T/out" || fail "serve-sim prints the equal-batch table"
printf '{"timestamp": 0, "input_length": 1200, "output_length": 6, "hash_ids": [1]}\n{"timestamp": 500, "input_length": 900, "output_length": 4, "hash_ids": [1, 2]}\n' >"$T/m.jsonl"
expect 0 "$DHS" serve-sim "${SMALL[@]}" --requests-trace "$T/m.jsonl" --rate-scales 1,2 --json
grep -q '"rate_scale": 2' "$T/out" && grep -q '"completed": 2,' "$T/out" || fail "serve-sim replays a Mooncake trace"
printf 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n0.5,ChatGPT,800,5,805,Conversation log\n1.0,GPT-4,700,0,700,API log\n' >"$T/b.csv"
expect 0 "$DHS" serve-sim "${SMALL[@]}" --requests-trace "$T/b.csv" --json --modes fixed
grep -q '"completed": 1,' "$T/out" || fail "serve-sim replays a BurstGPT trace (failure row skipped)"
printf '{"timestamp": 500, "input_length": 900, "output_length": 4}\n{"timestamp": 0, "input_length": 1200, "output_length": 6}\n' >"$T/u.jsonl"
expect 2 "$DHS" serve-sim "${SMALL[@]}" --requests-trace "$T/u.jsonl"
grep -q "u.jsonl:2:" "$T/err" || fail "serve-sim: an out-of-order trace names its line"

# data-parallel ranks (--dp-ranks, --placement)
expect 0 "$DHS" serve-sim --help
grep -q -- "--dp-ranks" "$T/out" && grep -q -- "--placement" "$T/out" || fail "serve-sim --help lists --dp-ranks and --placement"
for v in 0 65 x; do
    expect 2 "$DHS" serve-sim --dp-ranks "$v"
    grep -q "1..64" "$T/err" || fail "--dp-ranks $v: the range named: $(cat "$T/err")"
done
expect 2 "$DHS" serve-sim --placement miss-aware
grep -q "dp-ranks" "$T/err" || fail "--placement without --dp-ranks explained"
expect 2 "$DHS" serve-sim --dp-ranks 2 --placement round-robin,magic
grep -q "round-robin, least-sessions, miss-aware" "$T/err" || fail "unknown placement: the choices named"
# one rank: the same output with and without --dp-ranks 1
expect 0 "$DHS" serve-sim "${SMALL[@]}" --rates 1,4 --spec both
cp "$T/out" "$T/one_default"
expect 0 "$DHS" serve-sim "${SMALL[@]}" --rates 1,4 --spec both --dp-ranks 1
cmp -s "$T/out" "$T/one_default" || fail "--dp-ranks 1 changes the output"
grep -q "data-parallel" "$T/out" && fail "one rank prints a data-parallel table"
expect 0 "$DHS" serve-sim "${SMALL[@]}" --rates 4 --modes fixed --spec off --dp-ranks 3 --json
python3 - "$T/out" <<'PY' || fail "serve-sim --dp-ranks 3 --json inconsistent"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["dp_ranks"] == 3, d["config"]
runs = d["runs"]
assert [r["dp"]["placement"] for r in runs] == ["round-robin", "least-sessions", "miss-aware"], runs
for r in runs:
    dp = r["dp"]
    assert dp["ranks"] == 3 and len(dp["rank_sessions"]) == 3 and sum(dp["rank_sessions"]) == r["completed"] == 8, dp
    assert len(dp["rank_misses_per_step"]) == 3 and dp["p99_step_ms"] >= dp["p50_step_ms"] > 0, dp
    assert dp["miss_max_per_step"] >= dp["miss_mean_per_step"] - 0.01 and 0 <= dp["wait_share"] < 1, dp
    assert abs(sum(dp["rank_misses_per_step"]) / 3 - dp["miss_mean_per_step"]) < 0.02, dp
# round robin: arrival i on rank i mod 3
assert runs[0]["dp"]["rank_sessions"] == [3, 3, 2], runs[0]["dp"]
PY
expect 0 "$DHS" serve-sim "${SMALL[@]}" --rates 4 --modes adaptive --spec off --dp-ranks 2 --placement miss-aware,round-robin \
    --csv "$T/dp.csv" --plot "$T/dp.svg"
grep -q "data-parallel ranks" "$T/out" && grep -q "miss-aware" "$T/out" || fail "serve-sim prints the data-parallel table"
[ "$(wc -l <"$T/dp.csv")" -eq 3 ] && head -1 "$T/dp.csv" | grep -q ",placement," && grep -q ",round-robin," "$T/dp.csv" &&
    grep -q ",miss-aware," "$T/dp.csv" || fail "serve-sim --csv with --dp-ranks: a placement column, one row per placement"
grep -q "adaptive, miss-aware" "$T/dp.svg" || fail "serve-sim --plot with --dp-ranks: one line per placement"
# one rank: the CSV keeps its columns
head -1 "$T/s.csv" | grep -q "placement" && fail "one rank's CSV grew columns"

finish sim
