#!/usr/bin/env bash
# run.sh - installs dhisparse into a scratch prefix and builds and runs the
# out-of-tree consumer (consumer.c) against it, twice: through CMake
# find_package(dhisparse) (shared and static targets) and through pkg-config.
#
#   tests/consumer/run.sh BUILD_DIR   install an existing build (the CTest
#                                     consumer_install does this with its build)
#   tests/consumer/run.sh             configure and build the core alone
#                                     (DHS_BUILD_TOOLS=OFF, DHS_CUDA=OFF) with
#                                     cJSON hidden from CMake, then install it
#
# Checks besides the consumer's own byte checks: the installed file set, the
# soname, that libdhs.so exports exactly the functions the public headers
# declare, and that no project flag (-Werror, -D_POSIX_C_SOURCE, sanitizers)
# reaches a consumer. Exits non-zero on the first failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dhs-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "consumer: FAIL: $*" >&2; exit 1; }
jobs=${JOBS:-2}

if [ $# -ge 1 ]; then
  build=$(cd "$1" && pwd)
else
  build=$work/core
  # Hide cJSON: CMake finds nothing under the system include and library
  # directories. The tools' configure must then fail (negative control: the
  # hiding works), and the core's must succeed without ever asking for it.
  hide=(-DCMAKE_IGNORE_PATH="/usr/include;/usr/local/include;/usr/lib/x86_64-linux-gnu;/usr/lib;/usr/local/lib;/lib/x86_64-linux-gnu;/lib")
  if cmake -S "$root" -B "$work/control" -DDHS_CUDA=OFF "${hide[@]}" >"$work/control.log" 2>&1; then
    fail "configure with DHS_BUILD_TOOLS=ON succeeded with cJSON hidden: the hiding does not work"
  fi
  grep -qi cjson "$work/control.log" || fail "the tools' configure failed for another reason than cJSON: $(tail -5 "$work/control.log")"
  cmake -S "$root" -B "$build" -DDHS_BUILD_TOOLS=OFF -DDHS_CUDA=OFF -DDHS_WERROR=ON "${hide[@]}" \
    -DCMAKE_BUILD_TYPE=Release >"$work/core.log" 2>&1 || { cat "$work/core.log"; fail "core configure without cJSON"; }
  if grep -qiE '^cjson' "$build/CMakeCache.txt"; then fail "the core's configure looked for cJSON"; fi
  cmake --build "$build" -j"$jobs" >"$work/core-build.log" 2>&1 || { tail -30 "$work/core-build.log"; fail "core build"; }
  echo "consumer: core configured and built with cJSON hidden (the tools' configure failed on it, as it must)"
fi

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install"; }
grep -q '^DHS_CUDA:BOOL=ON' "$build/CMakeCache.txt" && cuda=1 || cuda=0

# --- installed files
for f in include/dhs.h include/dhs_plan.h include/dhs_cuda.h include/dhs_spec_auto.h lib/libdhs.a lib/libdhs.so lib/cmake/dhisparse/dhisparseConfig.cmake \
         lib/cmake/dhisparse/dhisparseConfigVersion.cmake lib/cmake/dhisparse/dhisparseTargets.cmake lib/pkgconfig/dhisparse.pc; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
version=$(sed -n 's/^project(dhisparse VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
soname=$(readelf -d "$prefix/lib/libdhs.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
major=${version%%.*}; rest=${version#*.}; minor=${rest%%.*}
if [ "$major" = 0 ]; then want_soname=libdhs.so.$major.$minor; else want_soname=libdhs.so.$major; fi
[ "$soname" = "$want_soname" ] || fail "soname '$soname', want '$want_soname'"
[ -e "$prefix/lib/$soname" ] && [ -e "$prefix/lib/libdhs.so.$version" ] || fail "missing libdhs.so.$version or $soname"

# --- exported symbols: exactly the functions of the public headers
nm -D --defined-only "$prefix/lib/libdhs.so" | awk '$2 ~ /^[TWDBRV]$/ {print $3}' | sort -u >"$work/exported"
sed -e 's:/\*.*\*/::g' "$prefix/include/dhs.h" "$prefix/include/dhs_plan.h" "$prefix/include/dhs_cuda.h" "$prefix/include/dhs_spec_auto.h" |
  grep -oE '(^|[^A-Za-z0-9_])dhs_[a-z0-9_]+[[:space:]]*\(' | grep -oE 'dhs_[a-z0-9_]+' | sort -u >"$work/declared"
if ! diff "$work/declared" "$work/exported" >"$work/symdiff"; then
  cat "$work/symdiff" >&2
  fail "libdhs.so exports differ from the public headers ('>' exported only, '<' declared only)"
fi
grep -vq '^dhs_' "$work/exported" && fail "non-dhs_ symbol exported"
grep -q '^page_alloc$\|^res_admit$' "$work/exported" && fail "internal symbols exported"
echo "consumer: $soname exports $(wc -l <"$work/exported") symbols, all declared in dhs.h/dhs_plan.h/dhs_cuda.h/dhs_spec_auto.h"

# --- nothing of the project's own flags reaches a consumer
pcflags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags dhisparse)
case "$pcflags" in *-D*|*-W*|*-f*) fail "pkg-config --cflags carries flags: $pcflags" ;; esac
if grep -E 'INTERFACE_COMPILE_(OPTIONS|DEFINITIONS)' "$prefix/lib/cmake/dhisparse/dhisparseTargets.cmake"; then
  fail "exported targets carry compile options or definitions"
fi

# --- CMake consumer: find_package(dhisparse), shared and static
cmake -S "$here" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_C_FLAGS="-std=c11 -Wall -Wextra -Werror -pedantic" >"$work/cm.log" 2>&1 || { cat "$work/cm.log"; fail "consumer configure"; }
cmake --build "$work/cm" -j"$jobs" >"$work/cm-build.log" 2>&1 || { cat "$work/cm-build.log"; fail "consumer build (CMake)"; }
if grep -E '_POSIX_C_SOURCE|fsanitize|DHS_HAVE_CUDA' "$work/cm/compile_commands.json"; then fail "project flags leaked into the consumer"; fi
readelf -d "$work/cm/consumer" | grep -q "NEEDED.*\[$soname\]" || fail "CMake consumer does not link $soname"
readelf -d "$work/cm/consumer_static" | grep -q "NEEDED.*libdhs" && fail "static consumer links libdhs.so"
"$work/cm/consumer" || fail "CMake consumer (shared) failed"
"$work/cm/consumer_static" || fail "CMake consumer (static) failed"

# --- pkg-config consumer
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion dhisparse)" = "$version" ] || fail "pkg-config version $(pkg-config --modversion dhisparse), want $version"
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror -pedantic "$here/consumer.c" -o "$work/pc_consumer" $(pkg-config --cflags --libs dhisparse) \
  || fail "consumer build (pkg-config)"
readelf -d "$work/pc_consumer" | grep -q "NEEDED.*\[$soname\]" || fail "pkg-config consumer does not link $soname"
LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/pc_consumer" || fail "pkg-config consumer (shared) failed"
# static: the archive plus Libs.private
static_libs=$(pkg-config --static --libs dhisparse | sed 's/\(^\| \)-ldhs\( \|$\)/ /')
# shellcheck disable=SC2086
$cc -std=c11 -Wall -Wextra -Werror -pedantic "$here/consumer.c" -o "$work/pc_consumer_static" $(pkg-config --cflags dhisparse) \
  "$prefix/lib/libdhs.a" $static_libs || fail "consumer build (pkg-config --static)"
readelf -d "$work/pc_consumer_static" | grep -q "NEEDED.*libdhs" && fail "static pkg-config consumer links libdhs.so"
"$work/pc_consumer_static" || fail "pkg-config consumer (static) failed"
echo "consumer: installed $version (cuda=$cuda): CMake shared+static and pkg-config shared+static consumers passed"
