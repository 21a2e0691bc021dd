#!/usr/bin/env bash
# The main job: build the `dhs` tool, then serve a tiny reference DSA model
# through the KV hierarchy and prove it bit-identical to keeping every row
# resident on the device.
#
# Usage: scripts/demo.sh [dhs run flags]   (e.g. --layout follow --verify sample --json)
#
# Without flags: 16 sessions x ~4096-token prompts, 64 tokens each, speculative
# rounds of 4 (about 35 s of CPU time; the first run also builds the tool).
# The output says what was compared (the same schedule with every row
# resident), where the selected rows were found (census: direct / hot / host),
# how often admission waited and history was reclaimed, and ends with
# "identical: yes". The throughput line is a CPU figure of a tiny model, not
# a GPU serving rate. docs/MODEL.md explains every line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j2 --target dhs_tool
echo "demo: dhs run $* (the reference model through the hierarchy, compared with all-resident; docs/MODEL.md)" >&2
exec build/dhs run "$@"
