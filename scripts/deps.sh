#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and test dhisparse (C
# toolchain, CMake, pkg-config, cJSON for the tool's JSON input, Python 3 with
# numpy, pytest and pip for the bindings' tests). Does nothing when all is present.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
# the Debian interpreter: the packages below go there, whatever python3 is first on PATH
[ -x /usr/bin/python3 ] || need+=(python3)
/usr/bin/python3 -c 'import numpy' 2>/dev/null || need+=(python3-numpy)
/usr/bin/python3 -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
/usr/bin/python3 -c 'import pip' 2>/dev/null || need+=(python3-pip)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
