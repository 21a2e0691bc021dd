#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build dhisparse (C toolchain,
# CMake, cJSON for the tool's JSON input). Does nothing when all is present.
# --fuzz: also clang, its libFuzzer/sanitizer runtimes and llvm-cov/llvm-profdata
# (scripts/fuzz.sh asks for them; the normal build needs none of it).
set -euo pipefail
need=()
if [ "${1:-}" = "--fuzz" ]; then
  command -v clang >/dev/null || command -v clang-14 >/dev/null || need+=(clang)
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
    ls /usr/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || need+=(libclang-rt-dev)
  ls /usr/lib/llvm-*/bin/llvm-profdata >/dev/null 2>&1 || command -v llvm-profdata >/dev/null || need+=(llvm)
fi
command -v cmake >/dev/null || need+=(cmake)
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
