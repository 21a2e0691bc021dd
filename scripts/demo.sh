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
#
# Backend: with a CUDA device (nvidia-smi lists one) and nvcc, the tool is
# built with the CUDA backend and runs with --backend cuda (the model computes
# on the GPU); otherwise, as in CI, the CPU backend. The first line says which
# ran and why. A --backend flag given by the caller wins.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --build
gpu=""
if command -v nvidia-smi >/dev/null 2>&1; then gpu=$(nvidia-smi -L 2>/dev/null | grep -m 1 '^GPU' || true); fi
nvcc_ok=0
{ command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; } && nvcc_ok=1
backend=cpu why="no CUDA device found"
if [ -n "$gpu" ] && [ $nvcc_ok = 1 ]; then backend=cuda why="$gpu"
elif [ -n "$gpu" ]; then why="a CUDA device but no nvcc to build the CUDA backend"; fi
for a in "$@"; do case $a in --backend|--backend=*) backend=given why="the --backend flag given";; esac; done
# the options the demo needs, whatever an earlier configure of build/ cached (e.g. -DDHS_BUILD_TOOLS=OFF);
# build output goes to stderr, so stdout holds only the run's result (--json stays pure JSON)
if [ "$backend" = cuda ]; then
  export PATH=$PATH:/usr/local/cuda/bin
  cmake -S . -B build -DDHS_CUDA=ON -DDHS_BUILD_TOOLS=ON >/dev/null
else
  cmake -S . -B build -DDHS_BUILD_TOOLS=ON >/dev/null
fi
cmake --build build -j2 --target dhs_tool >&2
extra=()
[ "$backend" = cuda ] && extra=(--backend cuda)
echo "demo: backend ${backend/given/as given} ($why)" >&2
echo "demo: dhs run ${extra[*]:+${extra[*]} }$* (the reference model through the hierarchy, compared with all-resident; docs/MODEL.md)" >&2
exec build/dhs run "${extra[@]}" "$@"
