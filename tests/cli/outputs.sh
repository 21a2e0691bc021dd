#!/usr/bin/env bash
# CLI test of what a user's files and a user's terminal can count on:
#   - no result file is emptied or truncated by a failed or interrupted run
#     (every output goes to a temporary next to it, renamed into place on
#     status 0 or 1; SIGTERM removes the temporary and leaves the old file);
#   - every output and input path is checked before any work: a folder or a
#     missing parent is exit 2 with the OS reason, nothing printed first;
#   - --backend cuda where it cannot run: the same exit 2 in every command;
#   - dhs run: a --device-mb that can never fit is exit 2 with no record, and
#     --storage with --compare resident (which ignores it) is refused;
#   - a symbolic link is written through (the link stays), a file with two
#     hard links keeps both, a device or pipe is written in place with exit 0,
#     two options naming one file are refused, standard output that cannot
#     be written is exit 3;
#   - bad configurations (--layers, --group-hot-rows) are exit 2;
#   - dhs --help lists every command and sub-command, and
#     plan --list-presets honours --json.
# Usage: bash tests/cli/outputs.sh path/to/dhs
set -u
DHS=${1:?usage: outputs.sh path/to/dhs}
DHS=$(cd "$(dirname "$DHS")" && pwd)/$(basename "$DHS")
T=$(mktemp -d /tmp/dhs_cli_outputs.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib/harness.bash"
cd "$T" || exit 1
mkdir adir
TINY=(--sessions 2 --context 64 --tokens 2 -q)

# the file FILE still holds PRECIOUS, and no temporary is left next to it
intact() {
    [ "$(cat "$1" 2>/dev/null)" = PRECIOUS ] || fail "$2: $1 was changed (now $(wc -c <"$1" 2>/dev/null) bytes)"
    ls "$(dirname "$1")"/.dhs-out.* >/dev/null 2>&1 && fail "$2: a temporary was left next to $1: $(ls "$(dirname "$1")"/.dhs-out.*)"
    echo PRECIOUS >"$1"
}
# exit 2 with the OS reason REASON, nothing on stdout
usage_reason() {
    local reason=$1; shift
    expect 2 "$DHS" "$@"
    grep -q "$reason" "$T/err" || fail "'$*': stderr names the reason '$reason': $(head -c 300 "$T/err")"
    [ -s "$T/out" ] && fail "'$*': printed before the check: $(head -c 200 "$T/out")"
}

# ---------------------------------------------------------------- inputs
"$DHS" trace gen --out t.dtr --requests 2 --rounds 20 --k 128 --context 1024 --window 64 --window-full 8 \
    --clusters 4 --cluster-radius 8 >/dev/null || fail "trace gen for the inputs"
head -c 100 t.dtr >trunc.dtr
printf '{"name": "x", "gro' >trunc.json

# ---------------------------------------------------------------- 1: a failed run leaves the old file
echo PRECIOUS >keep.json
expect 2 "$DHS" plan --arch trunc.json --output keep.json;           intact keep.json "plan --arch trunc.json"
expect 2 "$DHS" trace info trunc.dtr --output keep.json;             intact keep.json "trace info trunc.dtr"
expect 2 "$DHS" sim --trace trunc.dtr --output keep.json -q;         intact keep.json "sim --trace trunc.dtr"
expect 2 "$DHS" sim --trace trunc.dtr --csv keep.json -q;            intact keep.json "sim --csv"
expect 2 "$DHS" run --device-mb 0.001 --json --output keep.json "${TINY[@]}"
intact keep.json "run --device-mb 0.001"
expect 2 "$DHS" run --output keep.json --nosuch;                     intact keep.json "run with a bad flag"
expect 0 "$DHS" run --output keep.json --help;                       intact keep.json "run --help"
expect 2 "$DHS" trace gen --out keep.json --rounds 0;                intact keep.json "trace gen --rounds 0"
# a run that succeeds replaces the file, with the usual mode
expect 0 "$DHS" plan --context 1000 --json --output keep.json
python3 -c "import json; json.load(open('keep.json'))['version']" || fail "plan --output: the file holds the JSON"
[ "$(stat -c %a keep.json)" = 644 ] || [ "$(umask)" != 0022 ] || fail "plan --output: mode $(stat -c %a keep.json), expected 644"
ls ./.dhs-out.* >/dev/null 2>&1 && fail "temporaries left: $(ls ./.dhs-out.*)"
echo PRECIOUS >keep.json
# kill -TERM during a run: the old file stays, the temporary goes
echo PRECIOUS >r.json
"$DHS" run --output r.json --sessions 8 --context 2048 --tokens 64 -q >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do ls .dhs-out.* >/dev/null 2>&1 && break; sleep 0.1; done
ls .dhs-out.* >/dev/null 2>&1 || fail "run --output r.json: no temporary next to r.json while it runs"
sleep 0.3
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
[ "$rc" -eq 143 ] || fail "run killed with TERM exited $rc, expected 143 (died of the signal)"
intact r.json "kill -TERM during run --output r.json"

# ---------------------------------------------------------------- 6, 7: output paths checked before any work
usage_reason "Is a directory" run --output adir "${TINY[@]}"
usage_reason "Is a directory" verify --output adir --requests 2 --steps 2
usage_reason "Is a directory" plan --output adir
usage_reason "Is a directory" trace info t.dtr --output adir
usage_reason "Is a directory" sim --trace t.dtr --output adir -q
usage_reason "Is a directory" sim --trace t.dtr --plot adir
usage_reason "Is a directory" sim --trace t.dtr --csv adir
usage_reason "Is a directory" serve-sim --plot adir --requests 2
usage_reason "Is a directory" serve-sim --csv adir --requests 2
usage_reason "Is a directory" bench serve --plot adir
usage_reason "Is a directory" trace gen --out adir
usage_reason "Is a directory" run --trace adir "${TINY[@]}"
usage_reason "No such file or directory" sim --trace t.dtr --plot nodir/x.svg
usage_reason "No such file or directory" trace gen --out nodir/t.dtr
[ -e adir ] && [ -z "$(ls adir)" ] || fail "adir was written into"

# ---------------------------------------------------------------- 11: input folders: the OS reason, nothing first
usage_reason "Is a directory" plan --arch adir
usage_reason "Is a directory" serve-sim --calibrate adir
usage_reason "Is a directory" serve-sim --requests-trace adir
usage_reason "Is a directory" sim --trace adir
usage_reason "Is a directory" trace info adir

# ---------------------------------------------------------------- 8: --backend cuda where it cannot run: one status
cuda_na() {
    "$DHS" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 0 ]; then echo "note: a CUDA device is present; '$*' ran"; return; fi
    [ $rc -eq 2 ] || fail "'$*' without a GPU exited $rc, expected 2 (not available here)"
    grep -q "not available here" "$T/err" || fail "'$*': says 'not available here': $(head -c 300 "$T/err")"
}
cuda_na run --backend cuda "${TINY[@]}"
cuda_na verify --backend cuda --requests 2 --steps 2
cuda_na bench resolve --backend cuda
cuda_na bench serve --backend cuda
"$DHS" --help | grep -q "not available here" || fail "dhs --help documents the status of 'not available here'"

# ---------------------------------------------------------------- 9: a budget that can never fit
echo PRECIOUS >keep.json
expect 2 "$DHS" run --device-mb 0.001 --json "${TINY[@]}"
grep -q -- "--device-mb" "$T/err" || fail "run --device-mb 0.001: the message names the flag: $(cat "$T/err")"
[ -s "$T/out" ] && fail "run --device-mb 0.001: a result record was written: $(head -c 200 "$T/out")"

# ---------------------------------------------------------------- 10: --storage that --compare resident ignores
expect 2 "$DHS" run --storage resident --compare resident "${TINY[@]}"
grep -q -- "--compare none" "$T/err" || fail "run --storage resident --compare resident: says what to use: $(cat "$T/err")"
expect 2 "$DHS" run --storage resident "${TINY[@]}"
expect 0 "$DHS" run --storage resident --compare none "${TINY[@]}"

# ---------------------------------------------------------------- 11: links, devices, pipes, one file twice
# a symbolic link is written through: the file it names gets the result, the link stays a link
echo PRECIOUS >target.txt
ln -s target.txt link.txt
expect 0 "$DHS" run --output link.txt "${TINY[@]}"
[ -L link.txt ] || fail "run --output link.txt: the link was replaced by a file"
grep -q "sessions" target.txt || fail "run --output link.txt: the link's target holds the result: $(head -c 100 target.txt)"
# ... and a failed run leaves the target as it was
echo PRECIOUS >target.txt
expect 2 "$DHS" run --output link.txt --nosuch;                        intact target.txt "run --output link.txt --nosuch"
# a dangling link: its target is created
ln -s made.txt dangling.txt
expect 0 "$DHS" run --output dangling.txt "${TINY[@]}"
[ -L dangling.txt ] && [ -s made.txt ] || fail "run --output dangling.txt: made.txt written through the link"
# a file with two names keeps them both, both with the result
echo PRECIOUS >h1.txt
ln h1.txt h2.txt
expect 0 "$DHS" run --output h2.txt "${TINY[@]}"
[ "$(stat -c %h h1.txt)" = 2 ] && cmp -s h1.txt h2.txt && grep -q sessions h1.txt ||
    fail "run --output h2.txt (a hard link): both names hold the result ($(stat -c %h h1.txt) links)"
# devices and pipes are written in place, and a good run exits 0
expect 0 "$DHS" run --output /dev/null "${TINY[@]}"
"$DHS" run --output /dev/stdout "${TINY[@]}" | cat >piped.txt
[ "${PIPESTATUS[0]}" = 0 ] || fail "run --output /dev/stdout into a pipe exited ${PIPESTATUS[0]}"
grep -q sessions piped.txt || fail "run --output /dev/stdout into a pipe: the result came through"
expect 0 "$DHS" sim --trace t.dtr --output /dev/null --csv /dev/null -q
# standard output that cannot be written is a runtime error, not a silent 0
if [ -w /dev/full ]; then
    "$DHS" run "${TINY[@]}" >/dev/full 2>"$T/err"; rc=$?
    [ "$rc" = 3 ] || fail "run >/dev/full exited $rc, expected 3"
    grep -q "standard output" "$T/err" || fail "run >/dev/full: says why: $(cat "$T/err")"
    "$DHS" --help >/dev/full 2>/dev/null; rc=$?
    [ "$rc" = 3 ] || fail "dhs --help >/dev/full exited $rc, expected 3"
fi
# two options of one command naming one file, under any name: exit 2, the file untouched
echo PRECIOUS >same.txt
ln -s same.txt same_link.txt
usage_reason "also the file of" sim --trace t.dtr --output same.txt --csv same.txt -q;    intact same.txt "sim, one file twice"
usage_reason "also the file of" sim --trace t.dtr --output same.txt --plot ./same.txt -q; intact same.txt "sim, ./ and plain"
usage_reason "also the file of" sim --trace t.dtr --output same_link.txt --csv same.txt -q; intact same.txt "sim, a link and its target"
usage_reason "also the file of" sim --trace t.dtr --output fresh.txt --csv ./fresh.txt -q
[ -e fresh.txt ] && fail "sim, one new file twice: fresh.txt was created"
# a name as long as the file system allows: the temporary's name does not add to it
long=$(printf 'n%.0s' $(seq 250))
expect 0 "$DHS" run --output "$long" "${TINY[@]}"
[ -s "$long" ] || fail "run --output <250-character name>: written"

# ---------------------------------------------------------------- 11b: bad configurations are usage errors
expect 2 "$DHS" run --geometry glm-5.3 --layers 2 --compare none "${TINY[@]}"
grep -q "needs at least 3 layers" "$T/err" || fail "run --geometry glm-5.3 --layers 2: names the minimum: $(cat "$T/err")"
expect 2 "$DHS" bench serve --geometry glm-5.3 --layers 1 --context 256 --tokens 2 --concurrency 1 --waves 1 -q
grep -q "needs at least 3 layers" "$T/err" || fail "bench serve --layers 1: names the minimum: $(cat "$T/err")"
expect 2 "$DHS" run --group-hot-rows 64 "${TINY[@]}"
grep -q "sizes for a model of" "$T/err" || fail "run --group-hot-rows 64: says how many: $(cat "$T/err")"
expect 2 "$DHS" run --group-hot-rows 64,64,64,64, "${TINY[@]}"
# flags that would be ignored are refused
expect 2 "$DHS" run --prefix private "${TINY[@]}"
grep -q -- "--shared-prefix" "$T/err" || fail "run --prefix without --shared-prefix: says what it needs: $(cat "$T/err")"
expect 2 "$DHS" bench serve --context 256 --tokens 2 --concurrency 1 --waves 1 -q --copy-queue-blocks 5
expect 2 "$DHS" bench serve --context 256 --tokens 2 --concurrency 1 --waves 1 -q --tail-locations host
# a seed above 2^53 is written exactly (a JSON number with every digit)
expect 0 "$DHS" run --seed 123456789012345678 --json "${TINY[@]}"
grep -q '"seed": *123456789012345678[,}]' "$T/out" || fail "run --json: the seed exactly: $(grep -o '"seed"[^,]*' "$T/out")"

# ---------------------------------------------------------------- 12: help complete, --json honoured
expect 0 "$DHS" --help
for c in run verify bench plan trace sim serve-sim; do
    grep -Eq "^  $c " "$T/out" || fail "dhs --help lists $c"
done
bench_line=$(grep -E "^  bench " "$T/out")
for s in resolve serve; do
    echo "$bench_line" | grep -q "$s" || fail "dhs --help: bench names its sub-command $s: $bench_line"
    "$DHS" bench --help | grep -Eq "^  $s " || fail "dhs bench --help lists $s"
done
expect 0 "$DHS" plan --list-presets --json
python3 -c "import json; d=json.load(open('$T/out')); assert 'glm-5.3' in d['presets'] and d['version']" ||
    fail "plan --list-presets --json: JSON with the presets: $(head -c 200 "$T/out")"
expect 0 "$DHS" plan --list-presets
grep -qx "glm-5.3" "$T/out" || fail "plan --list-presets: one name a line"

finish outputs
