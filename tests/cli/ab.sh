#!/usr/bin/env bash
# CLI test of the A/B helpers (no GPU needed for what is checked here): scripts/ab_trees.sh archives a
# commit's tree where it is told and prints the TREES line, refuses an unknown commit or flag (exit 2,
# nothing written); bench/gpu_ab.sh prints its usage, and refuses a bad tree or a missing command (exit 2)
# before building anything; scripts/carry_cjson.sh refuses bad usage.
# Usage: bash tests/cli/ab.sh path/to/dhs (the tool is not used)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/dhs_cli_ab.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"

if ! git -C "$ROOT" rev-parse --verify --quiet HEAD >/dev/null; then
    echo "SKIP: not a git checkout"
    exit 77
fi
h=$(git -C "$ROOT" rev-parse --short=7 HEAD)
expect 0 bash "$ROOT/scripts/ab_trees.sh" --dir "$T/ab" HEAD
grep -qx "TREES=\"$h=$T/ab/$h\"" "$T/out" || fail "ab_trees.sh: TREES line: $(cat "$T/out")"
[ -f "$T/ab/$h/CMakeLists.txt" ] || fail "ab_trees.sh: no tree in $T/ab/$h"
cmp -s "$T/ab/$h/CMakeLists.txt" <(git -C "$ROOT" show HEAD:CMakeLists.txt) || fail "ab_trees.sh: CMakeLists.txt differs from HEAD's"
[ ! -e "$T/ab/$h/.git" ] || fail "ab_trees.sh: the archive holds .git"
expect 2 bash "$ROOT/scripts/ab_trees.sh" --dir "$T/ab2" no-such-commit-xyz
[ ! -e "$T/ab2" ] || fail "ab_trees.sh: wrote for an unknown commit"
expect 2 bash "$ROOT/scripts/ab_trees.sh" --bogus HEAD
expect 2 bash "$ROOT/scripts/ab_trees.sh"

expect 0 bash "$ROOT/bench/gpu_ab.sh" --help
grep -q "TREES=" "$T/out" || fail "gpu_ab.sh --help: usage"
expect 2 bash "$ROOT/bench/gpu_ab.sh" -- dhs --version # no TREES
TREES="x=$T/nowhere" expect 2 bash "$ROOT/bench/gpu_ab.sh" -- dhs --version
grep -q "bad tree" "$T/err" || fail "gpu_ab.sh: bad tree message: $(cat "$T/err")"
TREES="x=$T/ab/$h" expect 2 bash "$ROOT/bench/gpu_ab.sh" --rounds 0 -- dhs --version
TREES="x=$T/ab/$h" expect 2 bash "$ROOT/bench/gpu_ab.sh"
TREES="x=$T/ab/$h" expect 2 bash "$ROOT/bench/gpu_ab.sh" -- ls # the command must be the dhs tool

expect 0 bash "$ROOT/scripts/carry_cjson.sh" --help
expect 2 bash "$ROOT/scripts/carry_cjson.sh" a b
expect 2 bash "$ROOT/scripts/carry_cjson.sh" --bogus
finish ab
