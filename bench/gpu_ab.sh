#!/usr/bin/env bash
# gpu_ab.sh - one command timed on several source trees in one call on one GPU machine, A B A B, so that a
# change (or a bisection of a slowdown) is judged on the same card:
#
#   TREES="new=. base=build-ab/89db38b ..." bash bench/gpu_ab.sh [--rounds N] -- dhs ARGS...
#
# Each tree NAME=DIR (a checkout or a scripts/ab_trees.sh archive) is configured and its dhs tool built
# (Release, CUDA, the carried cJSON of bench/gpu_lib.sh) into build-ab-b/NAME (not under $OUT, whose files a
# device call returns), all in parallel.
# Then for round 1..N (default 2) every tree runs the command with its own build's `dhs` (the command's
# first word, `dhs`, is replaced by it), the order reversed in even rounds. Each run's output goes to
# $OUT/ab_NAME_ROUND.txt; the lines it prints that match $AB_GREP (an extended regex, default: the
# resolver table's rows) are echoed with the tree's name. Exit 1 when a build or a run fails, 2 on bad usage.
# Expected: under a minute of builds for three trees on a 16-core host.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rounds) [ $# -ge 2 ] && [ "$2" -ge 1 ] 2>/dev/null || { usage >&2; exit 2; }; rounds=$2; shift 2 ;;
    --) shift; break ;;
    *) usage >&2; exit 2 ;;
  esac
done
[ "${1:-}" = dhs ] && [ -n "${TREES:-}" ] || { usage >&2; exit 2; }
shift
. "$root/bench/gpu_lib.sh"
export PATH=$PATH:/usr/local/cuda/bin
out=${OUT:-$root/build-ab-out}
bd=$root/build-ab-b
mkdir -p "$out" "$bd"
names=()
declare -A src
for t in $TREES; do
  n=${t%%=*} d=${t#*=}
  [ -n "$n" ] && [ "$n" != "$t" ] && [ -f "$d/CMakeLists.txt" ] || { echo "gpu_ab.sh: bad tree '$t' (NAME=DIR with a CMakeLists.txt)" >&2; exit 2; }
  names+=("$n")
  src[$n]=$(cd "$d" && pwd)
done
jobs=$(( $(nproc) / ${#names[@]} )); [ $jobs -ge 1 ] || jobs=1
t0=$(date +%s)
for n in "${names[@]}"; do
  rm -f "$bd/$n.failed"
  ( cmake -S "${src[$n]}" -B "$bd/$n" -DDHS_CUDA=ON -DDHS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release "${cj[@]}" \
      > "$bd/$n.log" 2>&1 && cmake --build "$bd/$n" -j"$jobs" --target dhs_tool >> "$bd/$n.log" 2>&1 ) || echo fail > "$bd/$n.failed" &
done
wait
rc=0
for n in "${names[@]}"; do
  if [ -f "$bd/$n.failed" ]; then tail -15 "$bd/$n.log"; echo "BUILD FAILED: $n"; rc=1; fi
done
[ $rc = 0 ] || exit 1
declare -A bin
for n in "${names[@]}"; do bin[$n]=$(find "$bd/$n" -maxdepth 2 -name dhs -type f -perm -u+x | head -1); done
echo "builds: $(( $(date +%s) - t0 )) s (${names[*]})"
grep_re=${AB_GREP:-'^(comp|scat) '}
for k in $(seq 1 "$rounds"); do
  order=("${names[@]}")
  if [ $((k % 2)) = 0 ]; then
    order=(); for ((i = ${#names[@]} - 1; i >= 0; i--)); do order+=("${names[$i]}"); done
  fi
  for n in "${order[@]}"; do
    f="$out/ab_${n}_$k.txt"
    timeout "${AB_TIMEOUT:-300}" "${bin[$n]}" "$@" > "$f" 2>&1
    r=$?
    [ $r = 0 ] || { echo "## $n #$k rc=$r"; tail -3 "$f"; rc=1; }
    grep -E "$grep_re" "$f" | sed "s/^/$n #$k: /"
  done
done
exit $rc
