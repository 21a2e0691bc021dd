#!/usr/bin/env bash
# The README's embedding, pkg-config and Python commands, run as written in a scratch prefix (the install
# prefix /opt/dhisparse replaced by a scratch folder): the core alone configured, built and installed in
# build-core/, a program compiled with the pkg-config lines and run without LD_LIBRARY_PATH, the Python
# example with the Debian interpreter and through a --system-site-packages venv. scripts/test.sh runs it.
# Usage: bash tests/readme_commands.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
T=$(mktemp -d /tmp/dhs_readme.XXXXXX)
trap 'rm -rf "$T"' EXIT
blocks() { # the fenced sh blocks of the README's "## Embedding" section, one file each
  python3 - "$T" <<'PY'
import re, sys
t = sys.argv[1]
s = open("README.md").read()
sec = s.split("## Embedding", 1)[1].split("\n## ", 1)[0]
for i, b in enumerate(re.findall(r"```sh\n(.*?)```", sec, re.S)):
    b = "\n".join(l[2:] if l.startswith("  ") else l for l in b.splitlines())
    open(f"{t}/block{i}.sh", "w").write(b.replace("/opt/dhisparse", t + "/prefix") + "\n")
    print(f"{t}/block{i}.sh")
PY
}
mapfile -t B < <(blocks)
[ "${#B[@]}" -ge 2 ] || { echo "readme: expected the build block and the pkg-config block, found ${#B[@]}" >&2; exit 1; }
echo "readme: the embedding block"; cat "${B[0]}"
bash -e "${B[0]}" >"$T/build.log" 2>&1 || { tail -20 "$T/build.log"; echo "readme: FAIL: the embedding block" >&2; exit 1; }
echo "readme: the pkg-config block (app.c = tests/consumer/consumer.c)"; cat "${B[1]}"
cp tests/consumer/consumer.c "$T/app.c"
(cd "$T" && env -u LD_LIBRARY_PATH bash -e "${B[1]}" && env -u LD_LIBRARY_PATH ./app) || { echo "readme: FAIL: the pkg-config block" >&2; exit 1; }
echo "readme: the Python example with the Debian interpreter, then through a venv"
/usr/bin/python3 python/examples/quickstart.py
/usr/bin/python3 -m venv --system-site-packages "$T/.venv" && "$T/.venv/bin/python" python/examples/quickstart.py
echo "readme: all commands worked as written"
