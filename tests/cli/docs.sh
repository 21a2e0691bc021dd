#!/usr/bin/env bash
# Figures in the docs stay true: every block the docs mark with
#
#   <!-- check: COMMAND [;; cols=N[,M]] [;; skip=WORD[,WORD]] [;; expect=V[,V]] -->
#
# is re-derived. COMMAND runs in a scratch directory with `dhs` meaning the
# tool under test (commands may chain with && and write files there). The
# block is what follows the marker up to the first blank line outside a code
# fence: in a table the body rows (cells of columns N, M... when cols= is
# given, 1-based), in a code fence its lines, else the paragraph. Lines holding
# a skip= word are left out (timings). Every number of the block (thousands
# separators allowed) must appear in the command's output at the same
# precision: doc 429.3 matches output 429.33, doc 433,674 matches 433674.
# expect= lists numbers to check instead of the block's. Only deterministic
# outputs are marked. Usage: bash tests/cli/docs.sh path/to/dhs
set -u
DHS=${1:?usage: docs.sh path/to/dhs}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/dhs_cli_docs.XXXXXX)
trap 'rm -rf "$T"' EXIT
DHS=$(cd "$(dirname "$DHS")" && pwd)/$(basename "$DHS")
export DHS T ROOT
python3 - <<'EOF'
import os, re, subprocess, sys

DHS, T, ROOT = os.environ["DHS"], os.environ["T"], os.environ["ROOT"]
NUM = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
docs = [os.path.join(ROOT, "README.md")] + sorted(
    os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
cache, fails, checked, blocks = {}, 0, 0, 0

def run(cmd):
    if cmd not in cache:
        script = 'dhs() { "$DHS" "$@"; }\nset -e\n' + cmd
        p = subprocess.run(["bash", "-c", script], cwd=T, capture_output=True, text=True, env=dict(os.environ, DHS=DHS))
        if p.returncode != 0:
            cache[cmd] = None
            print(f"FAIL: '{cmd}' exited {p.returncode}: {p.stderr[-400:]}")
        else:
            cache[cmd] = p.stdout
    return cache[cmd]

def numbers(text):
    return [m.group(0).replace(",", "") for m in NUM.finditer(text)]

def found(tok, out_nums):
    d = len(tok.split(".")[1]) if "." in tok else 0
    want = float(tok)
    for y in out_nums:
        try:
            if f"{float(y):.{d}f}" == f"{want:.{d}f}":
                return True
        except ValueError:
            pass
    return False

for path in docs:
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s*<!-- check: (.*?) -->\s*$", line)
        if not m:
            continue
        blocks += 1
        parts = [p.strip() for p in m.group(1).split(";;")]
        cmd, opts = parts[0], dict(p.split("=", 1) for p in parts[1:])
        cols = [int(c) for c in opts["cols"].split(",")] if "cols" in opts else None
        skip = [w for w in opts.get("skip", "").split(",") if w]
        where = f"{os.path.relpath(path, ROOT)}:{i + 1}"
        if "expect" in opts:
            toks = [t.strip().replace(",", "") for t in re.split(r"[ ,]+(?=\d)", opts["expect"]) if t.strip()]
        else:
            block, j, fence = [], i + 1, False
            while j < len(lines):
                l = lines[j]
                if l.startswith("```"):
                    if fence:
                        break
                    fence = True
                    j += 1
                    continue
                if not fence and not l.strip():
                    if block:
                        break
                    j += 1
                    continue
                block.append(l)
                j += 1
            if block and block[0].startswith("|"):
                sep = next((k for k, l in enumerate(block) if re.match(r"^\|[\s:|-]+\|$", l)), -1)
                body = block[sep + 1:]
                text = []
                for l in body:
                    if any(w in l for w in skip):
                        continue
                    cells = [c.strip() for c in l.strip().strip("|").split("|")]
                    text += [cells[c - 1] for c in cols if c - 1 < len(cells)] if cols else cells
                toks = numbers(" ".join(text))
            else:
                toks = numbers(" ".join(l for l in block if not any(w in l for w in skip)))
        out = run(cmd)
        if out is None:
            fails += 1
            continue
        on = numbers(out)
        bad = [t for t in toks if not found(t, on)]
        checked += len(toks)
        if not toks:
            print(f"FAIL: {where}: the marked block has no figures")
            fails += 1
        elif bad:
            print(f"FAIL: {where}: figures not in the output of '{cmd}': {', '.join(bad[:12])}")
            fails += 1
        else:
            print(f"ok   {where}: {len(toks)} figures")
print(f"docs: {blocks} marked blocks, {checked} figures, {fails} failed")
if blocks == 0:
    print("FAIL: no marked blocks found")
    fails += 1
sys.exit(1 if fails else 0)
EOF
