#!/usr/bin/env bash
# The Python binding's GPU checks in one run (repository root, a machine with a CUDA GPU, nvcc, python3
# with numpy + pytest; torch and transformers for the real-client part). No cJSON needed: builds the core
# library only. Prints each part's output, then a summary; exit status 0 only when every part passed.
#   bash python/tests/gpu_check.sh [build dir, default build-gpu]
set -u
B=${1:-build-gpu}
J=$(nproc 2>/dev/null || echo 8)
declare -A RC
say() { printf '\n==== %s ====\n' "$*"; }

say "build $B (DHS_CUDA=ON, core only)"
mkdir -p "$B" && cmake -S . -B "$B" -DDHS_CUDA=ON -DDHS_BUILD_TOOLS=OFF -DDHS_BUILD_TESTS=OFF -DDHS_WERROR=ON >"$B/cmake.log" 2>&1 &&
    cmake --build "$B" -j"$J" --target dhs_shared >"$B/build.log" 2>&1
RC[build]=$?
if [ "${RC[build]}" != 0 ]; then tail -40 "$B/cmake.log" "$B/build.log"; echo "BUILD FAILED"; exit 1; fi
export DHS_LIBRARY=$PWD/$B/libdhs.so
export PYTHONFAULTHANDLER=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
python3 -c 'import sys; print("python", sys.version.split()[0])'
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' 2>&1 | tail -1

say "pytest: layouts and signatures, device resolver on the CPU backend, CUDA path (progress on stderr)"
timeout 150 python3 -m pytest -p no:cacheprovider -v -s -rs python/tests/test_structs.py python/tests/test_dres.py \
    python/tests/test_cuda.py 2>&1 | tail -80
RC[pytest_cuda]=${PIPESTATUS[0]}

say "pytest: the HF adapter on the CPU backend (stand-in models)"
timeout 90 python3 -m pytest -p no:cacheprovider -q -rs python/tests/test_hf_dsa.py -k "not on_gpu" 2>&1 | tail -15
RC[pytest_adapter]=${PIPESTATUS[0]}

say "the real client: transformers' DSA model decoding through dhisparse (CUDA graphs)"
timeout 200 python3 python/examples/hf_dsa_decode.py --sessions 8 --steps 256 2>&1 | tail -60
RC[hf_client]=${PIPESTATUS[0]}
if [ "${RC[hf_client]}" != 0 ] && [ "${RC[hf_client]}" != 124 ]; then
    say "again without CUDA graphs (diagnosis: does the eager path pass?)"
    timeout 120 python3 python/examples/hf_dsa_decode.py --sessions 8 --steps 256 --no-graph 2>&1 | tail -25
    RC[hf_client_nograph]=${PIPESTATUS[0]}
fi

say "summary (exit status per part; 0 = passed)"
fail=0
for k in build pytest_cuda pytest_adapter hf_client hf_client_nograph; do
    [ -n "${RC[$k]+x}" ] || continue
    printf '%-20s %s\n' "$k" "${RC[$k]}"
    [ "$k" = hf_client_nograph ] || [ "${RC[$k]}" = 0 ] || fail=1
done
exit $fail
