#!/usr/bin/env python3
"""modgraph.py - the module graph of dhisparse, read from the #include lines.

Every C/CUDA file of the library and of what is built above it belongs to one
module (its folder); an edge A -> B says a file of A includes a header of B.
Modules have levels, the library at the bottom:

    0  include   the public headers
    1  lib       src/ (core, cpu, cuda backend and its kernels)
  1.5  bench     bench/ timing helpers and the resolver benchmark engine (on the library)
    2  dev       dev/ experiments on the library alone
    2  sim       sim/ traces, simulators, planner, verifier
    2  xfer      xfer/ prefill-to-decode import over UCX (optional)
    3  model     model/ reference DSA model
    4  dev/overlap  overlapped attention, on the model's numerics
    5  tools     tools/ the dhs command

Rules checked (--check exits 1 on a violation):
  - no edge goes to a higher level (no arrow up), none leaves lib except to include;
  - the module graph has no cycle.

Inside the library, the files of src/core call each other without a cycle
either: an edge a.c -> b.c says a.c calls a function b.c defines (not
static); --check also fails on a cycle there, and --core prints those edges.

Usage: scripts/modgraph.py [--check] [--markdown] [--core]
  --markdown  prints the graph as the fenced block docs/ARCHITECTURE.md holds
              (tests/cli/layout.sh checks that the document's block is current)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEVEL = {"include": 0, "lib": 1, "bench": 1.5, "dev": 2, "sim": 2, "xfer": 2, "model": 3, "dev/overlap": 4, "tools": 5}
ORDER = ["tools", "dev/overlap", "model", "xfer", "sim", "dev", "bench", "lib", "include"]
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
EXT = (".c", ".h", ".cu", ".cuh")


def module_of(rel):
    if rel.startswith("include/"):
        return "include"
    if rel.startswith("src/"):
        return "lib"
    if rel.startswith("dev/overlap/"):
        return "dev/overlap"
    for m in ("dev", "sim", "model", "tools", "xfer"):
        if rel.startswith(m + "/"):
            return m
    if rel.startswith("bench/"):
        return "bench"
    return None


def resolve(src_rel, name):
    """The repository path an include names, searched as the build does."""
    here = os.path.dirname(src_rel)
    for base in (here, "include", "src", "", "bench", "tools", "xfer"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(ROOT, cand)):
            return cand
    return None


def edges():
    out = {}
    for top in ("include", "src", "dev", "sim", "model", "tools", "bench", "xfer"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith(EXT):
                    continue
                rel = os.path.relpath(os.path.join(d, f), ROOT)
                a = module_of(rel)
                with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        m = INC.match(line)
                        if not m:
                            continue
                        tgt = resolve(rel, m.group(1))
                        b = module_of(tgt) if tgt else None
                        if b is None or b == a:
                            continue
                        out.setdefault((a, b), []).append(f"{rel} -> {tgt}")
    return out


def cycle(mods, es):
    adj = {m: sorted({b for (a, b) in es if a == m}) for m in mods}
    state = {}

    def dfs(m, path):
        state[m] = 1
        for n in adj[m]:
            if state.get(n) == 1:
                return path + [m, n]
            if not state.get(n):
                c = dfs(n, path + [m])
                if c:
                    return c
        state[m] = 2
        return None

    for m in mods:
        if not state.get(m):
            c = dfs(m, [])
            if c:
                return c
    return None


FUNC_DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b([a-z_][a-z0-9_]*)\s*\([^;{]*\)\s*\{", re.M)


def strip_c(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def core_calls():
    """{(a.c, b.c): [functions of b.c that a.c calls]} over src/core/*.c."""
    d = os.path.join(ROOT, "src", "core")
    files = sorted(f for f in os.listdir(d) if f.endswith(".c"))
    text = {f: strip_c(open(os.path.join(d, f), encoding="utf-8").read()) for f in files}
    defs = {f: set(FUNC_DEF.findall(text[f])) for f in files}
    out = {}
    for a in files:
        words = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*\(", text[a]))
        for b in files:
            if a != b:
                used = sorted(words & defs[b])
                if used:
                    out[(a, b)] = used
    return files, out


def markdown(es):
    lines = ["```text", "module graph (generated by scripts/modgraph.py from the #include lines; A -> B: A includes B)", ""]
    for a in ORDER:
        tg = [b for b in ORDER if (a, b) in es]
        lines.append(f"  {a:<12} -> {', '.join(tg) if tg else '(nothing)'}")
    lines += ["", "levels, bottom up: include < lib (src/) < bench < dev, sim, xfer < model < dev/overlap < tools", "```"]
    return "\n".join(lines)


def main(argv):
    es = edges()
    bad = []
    for (a, b), why in sorted(es.items()):
        if LEVEL[b] > LEVEL[a] or (a == "lib" and b != "include") or (LEVEL[b] == LEVEL[a]):
            bad.append(f"arrow up or sideways {a} -> {b}: {why[0]}" + (f" (+{len(why) - 1} more)" if len(why) > 1 else ""))
    c = cycle(list(LEVEL), es)
    if c:
        bad.append("cycle: " + " -> ".join(c))
    cf, ce = core_calls()
    c = cycle(cf, ce)
    if c:
        bad.append("call cycle in src/core: " + " -> ".join(f"{x} ({', '.join(ce.get((x, y), []))})" for x, y in zip(c, c[1:])) + " -> " + c[-1])
    if "--core" in argv:
        for (a, b), fns in sorted(ce.items()):
            print(f"src/core/{a} -> {b}: {', '.join(fns)}")
    if "--markdown" in argv:
        print(markdown(es))
    elif "--check" not in argv and "--core" not in argv:
        for (a, b), why in sorted(es.items()):
            print(f"{a} -> {b}: {len(why)} includes, e.g. {why[0]}")
    if bad:
        for b in bad:
            print("modgraph: " + b, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
