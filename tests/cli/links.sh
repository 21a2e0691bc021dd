#!/usr/bin/env bash
# Every relative markdown link in README.md and docs/*.md resolves to a file or folder of the repository
# (anchors after '#' are not checked; http(s) and mailto links are left alone). Usage: bash tests/cli/links.sh [dhs]
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
python3 - "$ROOT" <<'PY'
import os, re, sys
root = sys.argv[1]
files = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
bad = checked = 0
for f in files:
    fence = False
    for no, line in enumerate(open(f), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            continue
        for m in link.finditer(line):
            t = m.group(1).split("#", 1)[0]
            if not t or re.match(r"^[a-z]+:", t):
                continue
            checked += 1
            p = os.path.normpath(os.path.join(os.path.dirname(f), t))
            if not p.startswith(root + os.sep) and p != root:
                print(f"FAIL: {os.path.relpath(f, root)}:{no}: link leaves the repository: {t}"); bad += 1
            elif not os.path.exists(p):
                print(f"FAIL: {os.path.relpath(f, root)}:{no}: broken link {t}"); bad += 1
print(f"links: {checked} relative links in {len(files)} files, {bad} broken")
sys.exit(1 if bad or checked < 50 else 0)
PY
