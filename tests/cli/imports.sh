#!/usr/bin/env bash
# CLI test of the imports' flag (`--import device|host`, `--repop-pages`) of `dhs run` and `dhs bench serve`
# on the CPU backend: --help lists both; a bad value is refused (exit 2, a message, nothing on stdout);
# `dhs run --import host --compare resident` gives the resident engine's logits and tokens byte for byte
# (own and compressed layouts, invariants checked after every round), the same tokens as --import device,
# the same history bytes, and its device pages come only from repopulation (none with --import device when
# the budget holds the histories); --repop-pages reaches the library; `dhs bench serve --import host`
# records the imports (count, bytes, seconds per session and GB/s of the library call, keys apart),
# the repopulated pages and the rounds the optional pages took, and the table has an import column.
# Usage: bash tests/cli/imports.sh path/to/dhs
set -u
DHS=${1:?usage: imports.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_imports.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

# ---------------------------------------------------------------- help
for cmd in "run" "bench serve"; do
    expect 0 "$DHS" $cmd --help
    for f in --import --repop-pages; do
        grep -q -- "^  $f " "$T/out" || fail "dhs $cmd --help does not list $f"
    done
    grep -q "host memory" "$T/out" || fail "dhs $cmd --help does not say where the history lives"
done

# ---------------------------------------------------------------- bad values: exit 2, a message, no output
for cmd in "run" "bench serve --geometry tiny"; do
    for args in "--import bogus" "--import" "--import HOST" "--repop-pages -1" "--repop-pages x"; do
        expect 2 "$DHS" $cmd $args
        [ -s "$T/out" ] && fail "dhs $cmd $args wrote to stdout"
        opt=${args%% *}
        grep -q -- "$opt" "$T/err" || fail "dhs $cmd $args: the message does not name $opt: $(head -c 300 "$T/err")"
    done
done
expect 2 "$DHS" run --import bogus
grep -q "device" "$T/err" && grep -q "host" "$T/err" || fail "--import bogus: the message does not list the choices: $(cat "$T/err")"

# ---------------------------------------------------------------- dhs run: exact with either flag
RUN="--sessions 4 --context 600 --tokens 8 --compare resident --check --json -q"
for layout in own compressed; do
    for m in host device; do
        expect 0 "$DHS" run $RUN --layout $layout --import $m
        cp "$T/out" "$T/run_${layout}_$m.json"
    done
    python3 - "$T/run_${layout}_host.json" "$T/run_${layout}_device.json" <<'EOF' || fail "dhs run --import ($layout): $(head -c 400 "$T/run_${layout}_host.json")"
import json, sys
h, d = (json.load(open(p)) for p in sys.argv[1:3])
for x, mode in ((h, "host"), (d, "device")):
    assert x["identical"] is True and x["logit_mismatches"] == 0 and x["token_mismatches"] == 0, x
    assert x["invariant_violations"] == 0 and x["shadow_mismatches"] == 0, x
    assert x["sessions"] == 4 and x["config"]["import"] == mode and x["config"]["repop_pages"] == 64, x["config"]
    i = x["imports"]
    assert i["mode"] == mode and i["imports"] == 4, i
    assert i["bytes"] > 0 and i["bytes"] % 656 == 0, i
    assert i["import_s"] > 0 and i["import_gbps"] > 0, i
    assert abs(i["import_s_per_session"] * 4 - i["import_s"]) <= 1e-9 * i["import_s"] + 1e-12, i
    assert abs(i["import_gbps"] - i["bytes"] / i["import_s"] / 1e9) <= 1e-9 * i["import_gbps"], i
    assert i["keys_s"] == 0, i  # the CPU model: no GPU session setup
    assert i["optional_bytes_peak"] > 0 and 0 <= i["optional_fill_rounds"] <= x["rounds"], i
# the same sessions, the same rows, the same tokens
assert h["tokens_digest"] == d["tokens_digest"], (h["tokens_digest"], d["tokens_digest"])
assert h["imports"]["bytes"] == d["imports"]["bytes"], (h["imports"], d["imports"])
# host: every device page of the history came through repopulation, a round at a time; device: the
# budget (2 sessions' history) took the imported pages at once, nothing to repopulate from host (the
# decoded pages that join the optional history come from the tail ring: repopulated pages, no host bytes)
assert h["repopulated_pages"] > 0 and h["imports"]["optional_fill_rounds"] >= 1, h["imports"]
assert d["imports"]["optional_filling_at_end"] is False, d["imports"]
assert h["bytes"]["refill_host_to_device"] > 0, h["bytes"]
assert d["bytes"]["refill_host_to_device"] == 0, (d["repopulated_pages"], d["bytes"])
EOF
done

# the device resolver (its tables published at the import, the repopulated pages at round begin)
expect 0 "$DHS" run $RUN --import host --resolver device
cp "$T/out" "$T/run_dres.json"
python3 - "$T/run_dres.json" "$T/run_own_host.json" <<'EOF' || fail "dhs run --import host --resolver device: $(head -c 400 "$T/run_dres.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["identical"] is True and a["invariant_violations"] == 0 and a["imports"]["imports"] == 4, a
assert a["repopulated_pages"] > 0 and a["tokens_digest"] == b["tokens_digest"], (a["repopulated_pages"], a["tokens_digest"])
EOF

# --repop-pages reaches the library: one page per round fills more slowly than 64
expect 0 "$DHS" run $RUN --import host --repop-pages 1
cp "$T/out" "$T/run_r1.json"
python3 - "$T/run_r1.json" "$T/run_own_host.json" <<'EOF' || fail "dhs run --repop-pages 1: $(head -c 400 "$T/run_r1.json")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["identical"] is True and a["config"]["repop_pages"] == 1 and a["imports"]["repop_pages_per_round"] == 1, a["config"]
assert a["tokens_digest"] == b["tokens_digest"], (a["tokens_digest"], b["tokens_digest"])
# at most one page a round (round_begin repopulates once)
assert 0 < a["repopulated_pages"] <= a["rounds"], (a["repopulated_pages"], a["rounds"])
assert a["repopulated_pages"] < b["repopulated_pages"], (a["repopulated_pages"], b["repopulated_pages"])
EOF

# the text output names the imports
expect 0 "$DHS" run --sessions 2 --context 300 --tokens 4 --import host -q
grep -q "^  imports      host: 2 histories, .* s of dhs_request_import" "$T/out" || fail "dhs run: no imports line: $(cat "$T/out")"

# ---------------------------------------------------------------- dhs bench serve --import host
SV="--geometry glm-5.3 --context 1024 --concurrency 2 --modes resident,adaptive --waves 1 --tokens 4 --device-budget-gib 0.5 -q"
expect 0 "$DHS" bench serve $SV --import host --json
cp "$T/out" "$T/sv_host.json"
expect 0 "$DHS" bench serve $SV --import device --json
cp "$T/out" "$T/sv_dev.json"
python3 - "$T/sv_host.json" "$T/sv_dev.json" <<'EOF' || fail "bench serve --import: $(head -c 600 "$T/sv_host.json")"
import json, sys
h, d = (json.load(open(p)) for p in sys.argv[1:3])
for x, mode in ((h, "host"), (d, "device")):
    assert x["config"]["import"] == mode and x["config"]["repop_pages"] == 64, x["config"]
    assert x["tokens_identical"] is True, x["token_mismatches"]
    recs = {r["mode"]: r for r in x["records"]}
    assert sorted(recs) == ["adaptive", "resident"] and all("skipped" not in r for r in recs.values()), recs
    res, ad = recs["resident"], recs["adaptive"]
    assert res["imports"] == 0 and res["import_s"] == 0 and res["import_gbps"] == 0, res   # resident imports nothing
    assert ad["imports"] == 2 and ad["import_bytes"] > 0 and ad["import_bytes"] % 656 == 0, ad
    assert ad["import_s"] > 0 and ad["import_s_per_session"] > 0 and ad["import_gbps"] > 0, ad
    assert abs(ad["import_s_per_session"] * 2 - ad["import_s"]) <= 1e-9 * ad["import_s"], ad
    assert abs(ad["import_gbps"] - ad["import_bytes"] / ad["import_s"] / 1e9) <= 1e-9 * ad["import_gbps"], ad
    # only the library call: within the sessions' start time, which also holds the engine's own setup
    assert ad["import_s"] <= ad["start_s"], ad
    assert ad["keys_s"] == 0, ad
    for k in ("repopulated_pages", "optional_bytes_peak", "optional_fill_rounds"):
        assert k in ad and ad[k] >= 0, (k, ad)
    assert ad["optional_fill_rounds"] <= ad["decode_rounds"], ad
hr = {r["mode"]: r for r in h["records"]}["adaptive"]
dr = {r["mode"]: r for r in d["records"]}["adaptive"]
assert hr["import_bytes"] == dr["import_bytes"], (hr["import_bytes"], dr["import_bytes"])
# host: the device pages come a round at a time; device: at the imports
assert hr["repopulated_pages"] > 0 and hr["optional_fill_rounds"] >= 1 and hr["optional_bytes_peak"] > 0, hr
assert dr["repopulated_pages"] == 0 and dr["optional_fill_rounds"] == 0 and dr["optional_bytes_peak"] > 0, dr
# 2 sessions x 78 sources x 16 pages at 64 a round: still filling after the 3 decode rounds
assert hr["optional_filling_at_end"] is True and dr["optional_filling_at_end"] is False, (hr, dr)
assert hr["pcie_gbps"] > 0, hr
EOF
# the table has the imports' column: "-" for resident, seconds per session for the hierarchy
expect 0 "$DHS" bench serve $SV --import host
grep -q "^mode .* PCIe *import |" "$T/out" || fail "bench serve table: no import column: $(head -c 600 "$T/out")"
grep -qE "^resident +1024 +2 +1 \|.* - \| -$" "$T/out" || fail "bench serve table: resident's import is not '-': $(cat "$T/out")"
grep -qE "^adaptive +1024 +2 +1 \|.* [0-9]+\.[0-9]{3}s \| -$" "$T/out" || fail "bench serve table: no import seconds: $(cat "$T/out")"

finish imports
