#!/usr/bin/env bash
# CLI test of sessions on a shared prefix (dhs run / dhs bench serve --shared-prefix, CPU backend): the
# sessions decode the same tokens with the prefix held once as with private copies, and hold fewer host
# bytes; bad flags are usage errors.
set -u
DHS=${1:?usage: shared_prefix.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_share.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect RC cmd...: runs, stdout in $T/out, stderr in $T/err
    local want=$1; shift
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "$* exited $rc, want $want: $(head -c 400 "$T/err")"
}

# usage errors (2)
expect 2 "$DHS" run --compare private --sessions 2 --context 200 --tokens 2
expect 2 "$DHS" run --shared-prefix 1190 --context 1200 --sessions 2 --tokens 2
expect 2 "$DHS" bench serve --geometry tiny --context 1200 --shared-prefix 1190 --tokens 3
"$DHS" run --help | grep -q -- "--shared-prefix" || fail "dhs run --help does not list --shared-prefix"
"$DHS" bench serve --help | grep -q -- "--shared-prefix" || fail "dhs bench serve --help does not list --shared-prefix"

# shared vs private copies: the same tokens, fewer host bytes
expect 0 "$DHS" run --sessions 4 --slots 4 --arrival 0 --context 2200 --tokens 4 --shared-prefix 2048 --compare private -q --json
python3 - "$T/out" <<'PY' || fail "dhs run --compare private: $(head -c 800 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["shared_prefix"]
assert s["positions"] == 2048 and s["mode"] == "shared" and s["shared_opens"] == 4, s
assert s["identical_to_private"] is True and s["session_token_mismatches"] == 0, s
assert s["private_tokens_digest"] == d["tokens_digest"], (s, d["tokens_digest"])
assert s["host_bytes_shared_peak"] > 0, s
assert s["host_bytes_peak"] < s["private_host_bytes_peak"], s
PY
# against resident storage, with every located row checked against the session's own prefill
expect 0 "$DHS" run --sessions 3 --context 1200 --tokens 5 --shared-prefix 1024 --check -q
grep -q "^identical: yes" "$T/out" || fail "shared prefix vs resident: $(tail -3 "$T/out")"
grep -q "every located row against the model's copy: 0 differ" "$T/out" || fail "shadow check: $(tail -4 "$T/out")"

# bench serve: both prefix modes per hierarchy configuration, tokens equal, fewer host bytes shared
expect 0 "$DHS" bench serve --geometry tiny --context 2200 --shared-prefix 2048 --modes fixed --concurrency 3 \
    --device-budget-gib 0.02 --tokens 3 --json -q
python3 - "$T/out" <<'PY' || fail "bench serve --shared-prefix: $(head -c 800 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["shared_prefix"] == 2048, d["config"]
recs = {r["prefix"]: r for r in d["records"]}
assert sorted(recs) == ["private", "shared"], d["records"]
sh, pv = recs["shared"], recs["private"]
assert "skipped" not in sh and "skipped" not in pv, (sh, pv)
assert sh["host_bytes_shared_peak"] > 0 and pv["host_bytes_shared_peak"] == 0, (sh, pv)
assert sh["host_bytes_peak"] < pv["host_bytes_peak"], (sh["host_bytes_peak"], pv["host_bytes_peak"])
assert d["tokens_identical"] is True, d["token_mismatches"]
PY
echo "shared_prefix.sh: ok"
