#!/usr/bin/env bash
# CLI test of long contexts (docs/SERVE.md "Long contexts"): 1,048,576-position prompts (2^20, row indices
# and positions past 2^20, a 1M GLM-5.3 session's history past 2^32 bytes) on the CPU backend with a real
# geometry cut to one layer (--layers), so that it runs in seconds:
#   - --layers, --resident-budget-gib, --history-copies and --import are listed and checked (exit 2, nothing on stdout);
#   - bench serve refuses, before any work, a context whose one session's history exceeds the host budget,
#     and its message carries the 1M GLM-5.3 history's bytes (78 x positions x 656, past 2^32);
#   - dhs run --compare resident at 1M positions: every round's logits byte for byte;
#   - bench serve at 1M: resident under a device budget of its own (2 GiB) and the hierarchy under 0.25 GiB,
#     which resident cannot hold, give the same tokens; the capacity line prints how many
#     sessions host memory allows;
#   - the hierarchy's history generated straight into its host rows (--history-copies once, the default) and through
#     the prefill's buffers (--history-copies twice): the same tokens, and once's peak RSS is lower by about the
#     history's bytes (the bytes held once, not twice).
# Usage: bash tests/cli/long_context.sh path/to/dhs
set -u
DHS=${1:?usage: long_context.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_long.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

# a sanitizer build is several times slower and its shadow memory doubles the footprint: 256K there
L=1048576
ldd "$DHS" 2>/dev/null | grep -q 'libasan\|libubsan' && { L=262144; echo "sanitizer build: context $L"; }
G=(--backend cpu --geometry deepseek-v3.2 --layers 1)

# ---------------------------------------------------------------- flags and usage errors
expect 0 "$DHS" bench serve --help
for f in --layers --resident-budget-gib --history-copies --import --host-budget-gib; do
    grep -q -- "^  $f " "$T/out" || fail "bench serve --help does not list $f"
done
expect 0 "$DHS" run --help
grep -q -- "^  --layers " "$T/out" || fail "run --help does not list --layers"
for args in "run --geometry glm-5.3 --layers 0" "run --geometry glm-5.3 --layers 79" \
            "bench serve --geometry glm-5.3 --layers 79" "bench serve --geometry deepseek-v3.2 --layers 62" \
            "bench serve --history-copies thrice" "bench serve --resident-budget-gib 0"; do
    expect 2 "$DHS" $args
    [ -s "$T/out" ] && fail "$args wrote to stdout"
    [ -s "$T/err" ] || fail "$args: no message"
done

# ---------------------------------------------------------------- the host budget holds no session: refused
expect 2 "$DHS" bench serve --geometry glm-5.3 --context 1048576 --modes adaptive --host-budget-gib 40 --tokens 16
[ -s "$T/out" ] && fail "the refusal wrote to stdout"
want=$(python3 -c "print('%.2f' % (78 * (1048576 + 16) * 656 / 2**30))") # 49.97: 53.7e9 bytes, past 2^32
grep -q "context 1048576: host memory holds no session: one session's history is $want GiB, the host budget 40.0 GiB" \
    "$T/err" || fail "host refusal: $(cat "$T/err")"
expect 2 "$DHS" bench serve --geometry glm-5.3 --context 262144,1048576 --modes resident,adaptive --host-budget-gib 40
grep -q "context 1048576: host memory holds no session" "$T/err" || fail "two contexts: the 1M one not refused"

# ---------------------------------------------------------------- dhs run at 1M: logits byte for byte
expect 0 "$DHS" run "${G[@]}" --sessions 1 --context $L --tokens 3 --spec 2 --json -q
python3 - "$T/out" "$L" <<'EOF' || fail "run at $L: $(head -c 600 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1])); L = int(sys.argv[2])
assert d["identical"] is True and d["logit_mismatches"] == 0, d
assert d["synthetic_history_positions"] == L - 1, d["synthetic_history_positions"]
assert d["config"]["payload_sources"] == 1, d["config"]
EOF

# ---------------------------------------------------------------- bench serve at 1M: resident (2 GiB) vs adaptive (0.25 GiB)
# the hierarchy's budget below one resident session (0.74 GiB at 1M, a quarter at 256K) and above its own need
B=$(python3 -c "print(0.25 * $L / 1048576)")
SV=(bench serve "${G[@]}" --context $L --concurrency 1 --waves 1 --tokens 3 --device-budget-gib $B --host-budget-gib 4)
expect 0 "$DHS" "${SV[@]}" --modes resident,adaptive --resident-budget-gib 2 --json
cp "$T/out" "$T/both.json"
cp "$T/err" "$T/both.err"
expect 0 "$DHS" "${SV[@]}" --modes adaptive --json -q
cp "$T/out" "$T/once.json"
expect 0 "$DHS" "${SV[@]}" --modes adaptive --history-copies twice --json -q
cp "$T/out" "$T/twice.json"
python3 - "$T" "$L" "$B" <<'EOF' || fail "bench serve at $L: $(head -c 900 "$T/both.json")"
import json, sys
t, L, B = sys.argv[1], int(sys.argv[2]), int(float(sys.argv[3]) * 2**30)
both, once, twice = (json.load(open("%s/%s.json" % (t, n))) for n in ("both", "once", "twice"))
c = both["config"]
assert c["device_budget_bytes"] == B and c["resident_budget_bytes"] == 2 * 2**30 and c["history_copies"] == "once", c
assert c["layers"] == 1 and c["payload_sources"] == 1, c
rec = {r["mode"]: r for r in both["records"]}
for m in ("resident", "adaptive"):
    assert "skipped" not in rec[m] and rec[m]["completed"] == 1 and rec[m]["context"] == L, rec[m]
    assert rec[m]["total_output_tokens"] == 2, rec[m]
assert rec["resident"]["device_bytes"] > B, rec["resident"]  # resident cannot hold it under the hierarchy's budget
assert rec["adaptive"]["device_bytes"] == B, rec["adaptive"]
assert rec["adaptive"]["host_bytes_peak"] >= L * 656, rec["adaptive"]
assert both["tokens_identical"] is True and both["token_mismatches"] == 0, both
s = both["summary"][0]
host_session = (L + 3) * 656
assert s["host_capacity"] == int(4 * 2**30 // host_session), (s, host_session)
assert s["resident_capacity"] == 2**31 // rec["resident"]["device_bytes"] >= 1, s  # under its own 2 GiB
open(t + "/rescap", "w").write("%d" % s["resident_capacity"])
# every path gives the same tokens (digests across processes)
dg = {rec["resident"]["tokens_digest"], rec["adaptive"]["tokens_digest"], once["records"][0]["tokens_digest"],
      twice["records"][0]["tokens_digest"]}
assert len(dg) == 1, dg
assert once["config"]["history_copies"] == "once" and twice["config"]["history_copies"] == "twice"
# the history's rows once, not twice: once's peak RSS is lower by most of the rows' bytes
ro, rt = once["records"][0]["peak_rss_bytes"], twice["records"][0]["peak_rss_bytes"]
assert ro > 0 and ro + 0.6 * L * 656 < rt, ("peak RSS once %d, twice %d, rows %d" % (ro, rt, L * 656))
print("context %d: tokens %s in every path; peak RSS once %.2f GiB, twice %.2f GiB (rows %.2f GiB)"
      % (L, dg.pop(), ro / 2**30, rt / 2**30, L * 656 / 2**30))
EOF
# the capacity line (stderr without -q): resident under its own budget, the cap host memory sets
cap=$(python3 -c "print(int(4 * 2**30 // (($L + 3) * 656)))")
grep -q "context $L: resident .* -> holds $(cat "$T/rescap" 2>/dev/null) under its 2.00 GiB (0 under the hierarchy's .* GiB); the hierarchy holds [0-9]* on the device, host memory (4.0 GiB, .* GiB of history per session) caps it at $cap" \
    "$T/both.err" || fail "capacity line: $(grep "context $L:" "$T/both.err" | head -2)"

finish long_context
