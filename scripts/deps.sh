#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and test dhisparse (C
# toolchain, CMake, pkg-config, cJSON for the tool's JSON input, UCX for the
# import transport in xfer/, Python 3 with numpy, pytest and pip for the
# bindings' tests). Does nothing when all is present.
# --fuzz: also clang, its libFuzzer/sanitizer runtimes and llvm-cov/llvm-profdata
# (scripts/fuzz.sh asks for them; the normal build needs none of it).
# --build: only what building the library and the tool needs (no Python test
# packages; scripts/demo.sh asks for this, so a GPU box without pytest runs it).
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
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
# UCX for the optional import transport (xfer/, DHS_UCX): the build turns it off without it
[ -f /usr/include/ucp/api/ucp.h ] || need+=(libucx-dev)
if [ "${1:-}" != "--build" ]; then
  # the Debian interpreter: the packages below go there, whatever python3 is first on PATH
  [ -x /usr/bin/python3 ] || need+=(python3)
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
  /usr/bin/python3 -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
  /usr/bin/python3 -c 'import pip' 2>/dev/null || need+=(python3-pip)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
