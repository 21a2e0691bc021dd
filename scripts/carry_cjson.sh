#!/usr/bin/env bash
# carry_cjson.sh - a copy of this machine's cJSON (libcjson-dev) in build-cjson/ ({include/cjson/cJSON.h,
# lib/libcjson.so*}), for a GPU machine that lacks it: carry build-cjson with the run, and bench/gpu_lib.sh
# builds against it and puts its lib on LD_LIBRARY_PATH.
#
#   scripts/carry_cjson.sh [DIR]     (default DIR: build-cjson in the repository root; git ignores it)
#
# Installs libcjson-dev first when it is missing (scripts/deps.sh --build). Exit 2 on bad usage.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; -*) echo "carry_cjson.sh: unknown flag $1" >&2; exit 2 ;; esac
[ $# -le 1 ] || { echo "carry_cjson.sh: at most one directory" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build-cjson}
[ -f /usr/include/cjson/cJSON.h ] || bash "$root/scripts/deps.sh" --build
lib=$(ls /usr/lib/*/libcjson.so.1.* /usr/lib/libcjson.so.1.* 2>/dev/null | head -1 || true)
[ -n "$lib" ] || { echo "carry_cjson.sh: libcjson.so.1.* not found" >&2; exit 1; }
mkdir -p "$dir/include/cjson" "$dir/lib"
cp /usr/include/cjson/cJSON.h "$dir/include/cjson/"
cp "$lib" "$dir/lib/"
base=$(basename "$lib")
ln -sf "$base" "$dir/lib/libcjson.so.1"
ln -sf libcjson.so.1 "$dir/lib/libcjson.so"
echo "$dir: $(ls "$dir/lib" | tr '\n' ' ')"
