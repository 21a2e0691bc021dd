#!/usr/bin/env bash
# ab_trees.sh - source trees of earlier commits for an A B comparison on a GPU machine (bench/gpu_ab.sh).
# The device machine gets a copy of the working tree without .git, so the trees are archived here:
#
#   scripts/ab_trees.sh [--dir DIR] COMMIT...
#
# writes each commit's tree (git archive) into DIR/<short hash> (default build-ab/, which git ignores; carry
# it to the device machine) and prints the TREES line that bench/gpu_ab.sh takes. An existing directory is
# replaced. Exit 2 on bad usage or an unknown commit (nothing written for it).
set -euo pipefail
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
dir=build-ab
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dir) [ $# -ge 2 ] || { echo "ab_trees.sh: --dir needs a value" >&2; exit 2; }; dir=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "ab_trees.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
cd "$root"
trees=()
for c in "$@"; do
  h=$(git rev-parse --short=7 --verify --quiet "$c^{commit}") || { echo "ab_trees.sh: unknown commit $c" >&2; exit 2; }
  rm -rf "${dir:?}/$h"
  mkdir -p "$dir/$h"
  git archive "$h" | tar -x -C "$dir/$h"
  trees+=("$h=$dir/$h")
done
echo "TREES=\"${trees[*]}\""
