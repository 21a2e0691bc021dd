#!/usr/bin/env bash
# CLI test of `dhs pd-bench` (xfer/, docs/XFER.md): --help lists every flag; a small two-process import
# over loopback (2 sources x 3,000 rows x 656 B, 3 imports, every byte checked by the tool) prints one
# JSON object with positive GB/s for the gets, the whole import and memcpy, and the sizes asked for;
# bad flags are usage errors (exit 2). Skips (77) when the tool was built without UCX. UCX_TLS picks the
# transports (CTest sets tcp: loopback only).
# Usage: bash xfer/pd_bench.sh path/to/dhs
set -u
DHS=${1:?usage: pd_bench.sh path/to/dhs}
T=$(mktemp -d /tmp/dhs_cli_pd.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/../tests/cli/lib/harness.bash"

expect 0 "$DHS" pd-bench --help
for f in --positions --sources --row-bytes --iters --chunk-kib --inflight --timeout --no-peer-errors --backend \
         --json --output; do
    grep -q -- "^  $f " "$T/out" || fail "pd-bench --help does not list $f"
done
expect 2 "$DHS" pd-bench --row-bytes 20
expect 2 "$DHS" pd-bench --positions 0
expect 2 "$DHS" pd-bench --sources 65

"$DHS" pd-bench --positions 3000 --sources 2 --iters 3 --chunk-kib 256 --json >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "no UCX transport" "$T/err"; then
    echo "cli pd_bench: this dhs has no UCX transport: skipped"
    exit 77
fi
[ "$rc" -eq 0 ] || fail "pd-bench exited $rc: $(head -c 400 "$T/err")"
python3 - "$T/out" <<'PY' || fail "pd-bench --json: $(head -c 400 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bench"] == "pd" and d["sources"] == 2 and d["positions"] == 3000 and d["row_bytes"] == 656, d
assert d["bytes"] == 2 * 3000 * 656 and d["imports"] == 3 and d["bad_rows"] == 0, d
assert d["chunk_bytes"] == 256 * 1024 and d["gets"] == 2 * -(-3000 * 656 // (256 * 1024)), d
for k in ("data_gbps_best", "data_gbps_median", "import_gbps_best", "import_gbps_median", "memcpy_gbps_best"):
    assert d[k] > 0, k
assert d["data_gbps_best"] >= d["data_gbps_median"] and d["import_gbps_best"] <= d["data_gbps_best"], d
for k in ("version", "commit", "date", "host", "device", "ucx", "ucx_tls"):
    assert k in d, k
print(f"pd-bench: gets {d['data_gbps_best']:.3f} GB/s, import {d['import_gbps_best']:.3f} GB/s, "
      f"memcpy {d['memcpy_gbps_best']:.3f} GB/s (UCX {d['ucx']}, UCX_TLS={d['ucx_tls']})")
assert d["host_cache"] is False, d
PY
# the same with the host-row cache: later imports land in the rows the closed ones left, every byte checked
expect 0 "$DHS" pd-bench --positions 3000 --sources 2 --iters 3 --chunk-kib 256 --json --host-cache
python3 - "$T/out" <<'PY' || fail "pd-bench --host-cache --json: $(head -c 400 "$T/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["host_cache"] is True and d["imports"] == 3 and d["bad_rows"] == 0, d
PY
finish pd_bench
