#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build dhisparse (C toolchain,
# CMake, cJSON for the tool's JSON input). Does nothing when all is present.
set -euo pipefail
need=()
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
