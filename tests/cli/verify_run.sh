#!/usr/bin/env bash
# CLI test of `dhs verify` and `dhs run`: the must-show JSON keys and values,
# and exit status 2 on bad flags. Usage: bash tests/cli/verify_run.sh path/to/dhs
set -u
DHS=${1:?usage: verify_run.sh path/to/dhs}
. "$(dirname "$0")/lib/harness.bash"

# key K of a flat JSON object (numbers and booleans) read from stdin
key() { python3 -c "import json,sys; d=json.load(sys.stdin); v=d; [v := v[p] for p in '$1'.split('.')]; print(str(v).lower())"; }

out=$("$DHS" verify --backend cpu --requests 8 --steps 40 --seed 5 --json) || fail "verify exited $?"
for k in entries violations census.direct census.hot census.host distinct_misses host_rows_copied; do
    echo "$out" | key $k >/dev/null || fail "verify JSON lacks $k"
done
[ "$(echo "$out" | key violations)" = 0 ] || fail "verify violations"
[ "$(echo "$out" | key distinct_misses)" = "$(echo "$out" | key host_rows_copied)" ] || fail "copied != misses"

out=$("$DHS" verify --backend cpu --requests 8 --steps 40 --seed 5 --pressure high --async-delay 3 --faults 0.02 --json) || fail "verify pressure exited $?"
for k in admissions waits reclaims repopulated_pages faults_injected lost_rows; do
    echo "$out" | key $k >/dev/null || fail "verify pressure JSON lacks $k"
done
[ "$(echo "$out" | key lost_rows)" = 0 ] || fail "lost rows"

out=$("$DHS" verify --backend cpu --requests 8 --steps 30 --seed 5 --spec 8 --compress 4 --consumers v41 --json) || fail "verify spec exited $?"
for k in rounds accepted rejected_rows staging_rows_peak; do
    echo "$out" | key $k >/dev/null || fail "verify spec JSON lacks $k"
done

out=$("$DHS" run --sessions 4 --context 300 --tokens 8 --spec 4 --backend cpu --compare resident --seed 2 --json 2>/dev/null) || fail "run exited $?"
for k in identical logit_mismatches tokens sessions census.direct reclaims accepted; do
    echo "$out" | key $k >/dev/null || fail "run JSON lacks $k"
done
[ "$(echo "$out" | key identical)" = true ] || fail "run not identical"

"$DHS" verify --requests 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "verify --requests 0 must exit 2"
"$DHS" verify --pressure medium >/dev/null 2>&1; [ $? -eq 2 ] || fail "verify --pressure medium must exit 2"
"$DHS" run --spec 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "run --spec 0 must exit 2"
"$DHS" bench nosuch >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench nosuch must exit 2"

finish verify_run
