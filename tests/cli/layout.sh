#!/usr/bin/env bash
# The layout holds: scripts/modgraph.py finds no arrow from a lower module to a
# higher one (the library includes nothing above it), no cycle among the
# modules nor among the calls between the files of src/core, and the
# graph in docs/ARCHITECTURE.md is the one the includes give today. Also: the
# library's sources are listed in CMakeLists.txt, not globbed, and every
# source file in src/ is listed (nothing compiled by accident or left out).
# Usage: bash tests/cli/layout.sh path/to/dhs (the tool is not used)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/dhs_cli_layout.XXXXXX)
trap 'rm -rf "$T"' EXIT
T_ERR=$T/err
. "$(dirname "$0")/lib/harness.bash"
command -v python3 >/dev/null || { echo "layout: no python3" >&2; exit 77; }
python3 "$ROOT/scripts/modgraph.py" --check 2>"$T_ERR" || fail "module graph: $(cat "$T_ERR")"
want=$(python3 "$ROOT/scripts/modgraph.py" --markdown)
have=$(sed -n '/<!-- modgraph:begin -->/,/<!-- modgraph:end -->/p' "$ROOT/docs/ARCHITECTURE.md" | sed '1d;$d')
[ "$want" = "$have" ] || fail "docs/ARCHITECTURE.md's module graph is stale: run scripts/modgraph.py --markdown and paste it"
grep -qE 'GLOB.*\.(c|cu|h)[ )]' "$ROOT/CMakeLists.txt" && fail "CMakeLists.txt globs sources: $(grep -nE 'GLOB.*\.(c|cu|h)[ )]' "$ROOT/CMakeLists.txt" | head -3)"
for f in $(cd "$ROOT" && find src dev sim model tools -name '*.c' -o -name '*.cu' | sort); do
  case "$f" in dev/*_bench.cu|dev/overlap/*_bench.cu) n=${f%.cu} ;; *) n=$f ;; esac
  grep -q "$n" "$ROOT/CMakeLists.txt" || fail "$f is not listed in CMakeLists.txt"
done
finish layout
