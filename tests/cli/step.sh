#!/usr/bin/env bash
# CLI test of `dhs run --step` (docs/MODEL.md "Device step"): what the CPU can
# check. The device step and its CUDA graph run only on the GPU model
# (--backend cuda; tests/cuda/test_gpu_model.c checks them on a GPU); on the CPU
# backend `--step device|graph` is bad usage: exit 2 and one line on stderr
# naming what it needs. `--step host` (the default) runs the existing path:
# the same tokens (tokens_digest) as without the flag, and the JSON says which
# step ran. The digest must change with the seed (it can fail).
# Usage: bash tests/cli/step.sh path/to/dhs
set -u
DHS=${1:?usage: step.sh path/to/dhs}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
key() { python3 -c "import json,sys; d=json.load(sys.stdin); v=d; [v := v[p] for p in '$1'.split('.')]; print(str(v).lower())"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for s in device graph; do
    "$DHS" run --backend cpu --step $s --sessions 2 --context 300 --tokens 3 --json >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || fail "--step $s --backend cpu exited $rc, not 2"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "--step $s --backend cpu: stderr is not one line: $(cat "$tmp/err")"
    grep -q -- "--step $s needs --backend cuda" "$tmp/err" || fail "--step $s --backend cpu: message: $(cat "$tmp/err")"
    [ -s "$tmp/out" ] && fail "--step $s --backend cpu printed on stdout"
done
"$DHS" run --backend cpu --step sideways >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--step sideways exited $rc, not 2"
"$DHS" run --help 2>&1 | grep -q -- '--step' || fail "dhs run --help does not list --step"

run() { "$DHS" run --backend cpu --sessions 2 --context 300 --tokens 3 --spec 2 --json -q "$@" 2>/dev/null; }
a=$(run --step host) || fail "--step host exited $?"
b=$(run) || fail "default run exited $?"
c=$(run --seed 7) || fail "--seed 7 exited $?"
[ "$(echo "$a" | key identical)" = true ] || fail "--step host not identical"
[ "$(echo "$a" | key throughput.step)" = host ] || fail "throughput.step is not host"
[ "$(echo "$b" | key config.step)" = host ] || fail "the default step is not host"
da=$(echo "$a" | key tokens_digest) db=$(echo "$b" | key tokens_digest) dc=$(echo "$c" | key tokens_digest)
echo "$da" | grep -qE '^[0-9a-f]{16}$' || fail "tokens_digest '$da' is not 16 hex digits"
[ "$da" = "$db" ] || fail "--step host tokens $da differ from the default run's $db"
[ "$da" != "$dc" ] || fail "tokens_digest did not change with the seed"
echo "$a" | grep -q step_host_us_per_round && fail "the host step reports device-step times"

# --round-end early (docs/API.md "The round end under the step"): width-1 rounds end with
# dhs_round_end_early; the same tokens as --round-end wait, every round early at --spec 1 and none
# at a width of 2 or more, with either resolver
for res in host device; do
    w=$(run --spec 1 --resolver $res --round-end wait) || fail "--round-end wait ($res) exited $?"
    e=$(run --spec 1 --resolver $res --round-end early) || fail "--round-end early ($res) exited $?"
    s2=$(run --spec 2 --resolver $res --round-end early) || fail "--round-end early --spec 2 ($res) exited $?"
    [ "$(echo "$e" | key identical)" = true ] || fail "--round-end early ($res) not identical to resident"
    [ "$(echo "$e" | key tokens_digest)" = "$(echo "$w" | key tokens_digest)" ] || fail "--round-end early ($res) changed the tokens"
    [ "$(echo "$e" | key config.round_end)" = early ] || fail "config.round_end is not early"
    ne=$(echo "$e" | key throughput.round_host_us.hier.early_ends) nr=$(echo "$e" | key throughput.round_host_us.hier.rounds)
    [ "$ne" -gt 0 ] && [ "$ne" = "${nr%.0}" ] || fail "--spec 1 ($res): $ne of $nr rounds ended early, want all"
    [ "$(echo "$w" | key throughput.round_host_us.hier.early_ends)" = 0 ] || fail "--round-end wait ($res) ended rounds early"
    [ "$(echo "$s2" | key identical)" = true ] || fail "--round-end early --spec 2 ($res) not identical"
done
# --round-end ahead: as early, and the next round, when every session continues with width 1 and nobody
# is waiting, is opened under this round's step (dhs_ref_engine_next): the same tokens, invariants
# checked after every round (--check, with that round open), some rounds opened ahead but never the
# first (admissions) nor at a width of 2
for res in host device; do
    w=$(run --spec 1 --tokens 6 --resolver $res --round-end wait) || fail "--round-end wait --tokens 6 ($res) exited $?"
    h=$(run --spec 1 --tokens 6 --resolver $res --round-end ahead --check) || fail "--round-end ahead ($res) exited $?"
    s2=$(run --spec 2 --tokens 6 --resolver $res --round-end ahead) || fail "--round-end ahead --spec 2 ($res) exited $?"
    [ "$(echo "$h" | key identical)" = true ] || fail "--round-end ahead ($res) not identical to resident"
    [ "$(echo "$h" | key tokens_digest)" = "$(echo "$w" | key tokens_digest)" ] || fail "--round-end ahead ($res) changed the tokens"
    [ "$(echo "$h" | key config.round_end)" = ahead ] || fail "config.round_end is not ahead"
    na=$(echo "$h" | key throughput.round_host_us.hier.ahead_rounds) nr=$(echo "$h" | key throughput.round_host_us.hier.rounds)
    [ "${na%.0}" -gt 0 ] && [ "${na%.0}" -lt "${nr%.0}" ] || fail "--round-end ahead ($res): $na of $nr rounds opened ahead"
    [ "$(echo "$s2" | key throughput.round_host_us.hier.ahead_rounds)" = 0 ] || fail "--spec 2 ($res): rounds opened ahead"
    [ "$(echo "$s2" | key identical)" = true ] || fail "--round-end ahead --spec 2 ($res) not identical"
done
"$DHS" run --round-end sideways >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--round-end sideways exited $rc, not 2"

if [ $fails -eq 0 ]; then echo "step: all checks passed"; else echo "step: $fails failed"; fi
[ $fails -eq 0 ]
