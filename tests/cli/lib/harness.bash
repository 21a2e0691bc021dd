# harness.bash - the one harness of the CLI tests (tests/cli/*.sh source it;
# it is not a test itself: CTest runs only tests/cli/*.sh).
#   fail MSG            count a failure and print it on stderr
#   expect STATUS CMD   run CMD (stdout -> $T/out, stderr -> $T/err), fail unless it exits STATUS
#   finish NAME         print the summary; exit 1 when anything failed
# The caller sets T (a scratch directory) before using expect.
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
expect() {
    local want=$1; shift
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want (stderr: $(head -c 300 "$T/err"))"
}
finish() {
    if [ "$fails" -eq 0 ]; then echo "cli $1: all checks passed"; exit 0; fi
    echo "cli $1: $fails failure(s)"
    exit 1
}
