#!/usr/bin/env bash
# The main job: build, then serve the reference DSA model through the KV
# hierarchy and prove it bit-identical to keeping every row resident.
# Usage: scripts/demo.sh [dhs run flags]   (e.g. --layout follow --verify sample --json)
# Without flags: 16 sessions x ~4096-token prompts, 64 tokens each, speculative
# rounds of 4; about half a minute on 2 cores. docs/MODEL.md explains the output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j2
exec build/dhs run "$@"
