#!/usr/bin/env python3
"""Writes the seed corpus of the API fuzzer (tests/fuzz/corpus/seed-NN).

Each seed is a setup header in the byte layout decode_setup() in fuzz_harness.c
reads (architecture, configuration, backend options) followed by API calls:
opens and imports first, then a mix of whole well-formed rounds (opcode 17..19),
single calls with random argument bytes, and fault arming. The seeds only give
libFuzzer valid starting points across the configuration space; mutation does
the rest. Deterministic (fixed random seed): rerun to regenerate.
Usage: tests/fuzz/make_seeds.py [outdir]
"""
import os
import random
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = random.Random(20261201)

OPEN, IMPORT, CLOSE, BEGIN, WRITE, WRITE_ALL, RESOLVE, DONE, END, SYNC, QUERY, FAULT, BAD, AUTO = (
    0, 2, 4, 5, 6, 8, 9, 11, 12, 13, 14, 15, 16, 17)


def op(kind, nargs):
    return [kind + 20 * rng.randrange(12)] + [rng.randrange(256) for _ in range(nargs)]


def setup(ng, ns, m, p, k_max, max_k, nreq, twin, delay, rnd, fault, extra=None, hot=None):
    b = [ng - 1, ns - ng]
    b += [{1: 0, 2: 1, 4: 2}[m[g]] for g in range(ng)]
    b += [rng.randrange(256) for _ in range(ns)]           # groups of extra sources, row bytes
    b += [rng.randrange(256)]                               # REINDEX / REUSE consumers
    b += [nreq - 1, max_k - 1, k_max - 1, {1: 0, 2: 1, 4: 2}[p], rng.randrange(4) if hot is None else hot,
          rng.randrange(3), rng.randrange(128)]  # hot: bits 0-1 hot_rows, bits 2-3 = 2 per-group sizes
    b += [rng.randrange(256)]                               # policy, reclaim order, repop, resident
    b += [rng.randrange(256)]                               # staging arenas, reserve
    b += [rng.randrange(40) if extra is None else extra, 1 + rng.randrange(3)]  # extra pages; no half page
    b += [1 + rng.randrange(23)]                            # a valid config
    sel = 0 if twin else (1 if fault == "host" else 3 if fault == "device" else 2)
    b += [delay | (rnd << 2) | (sel << 3), rng.randrange(256)]
    if sel == 1:
        b += [rng.randrange(24)]
    return b


def body(n_ops, faults):
    ops = []
    for _ in range(3):
        ops += op(OPEN, 2) + op(IMPORT, 4 + 2)
    for _ in range(n_ops):
        x = rng.random()
        if x < 0.35:
            ops += op(AUTO, 24)
        elif x < 0.45:
            ops += op(rng.choice([OPEN, IMPORT]), 6)
        elif x < 0.5:
            ops += op(CLOSE, 1)
        elif x < 0.55 and faults:
            ops += op(FAULT, 1)
        else:
            ops += op(rng.choice([BEGIN, WRITE, WRITE_ALL, RESOLVE, DONE, END, SYNC, QUERY, BAD]), 8)
    return ops


def share_op():
    """An open whose first byte says shared (b % 16 == 4): a parent handle byte, the prefix kind (d: bit 0
    all of the parent, bit 1 unaligned allowed, bits 2-4 a defect below 4), the prefix and expected bytes."""
    d = rng.randrange(256)
    if rng.random() < 0.8:
        d = (d & ~0x1E) | (rng.randrange(4, 8) << 2)  # valid most of the time: no defect, rows aligned
    return [OPEN + 20 * rng.randrange(12), 4 + 16 * rng.randrange(16), rng.randrange(14), d,
            rng.randrange(256), rng.randrange(256)]


def clean_open_import():
    """An open (b % 16 >= 5: no defect, not shared) and a full-length import without a defect (the exact
    bytes each reads, so the calls after them decode as written)."""
    return ([OPEN + 20 * rng.randrange(12), 5 + rng.randrange(11) + 16 * rng.randrange(16), rng.randrange(256)] +
            [IMPORT + 20 * rng.randrange(12), 0, rng.choice([0, 2]), 8 + rng.randrange(16), 100 + rng.randrange(156)])


def body_share(n_ops, faults):
    """Sessions on shared prefixes: parents imported, children opened on them (and on children), rounds
    of all of them, closes of parents before children and after."""
    ops = clean_open_import() + share_op() + share_op() + op(AUTO, 24) + share_op()
    for _ in range(n_ops):
        x = rng.random()
        if x < 0.3:
            ops += share_op()
        elif x < 0.6:
            ops += op(AUTO, 24)
        elif x < 0.7:
            ops += op(CLOSE, 1)
        elif x < 0.75:
            ops += op(rng.choice([OPEN, IMPORT]), 6)
        elif x < 0.8 and faults:
            ops += op(FAULT, 1)
        else:
            ops += op(rng.choice([BEGIN, WRITE_ALL, RESOLVE, END, SYNC, QUERY]), 8)
    return ops


def main():
    os.makedirs(OUT, exist_ok=True)
    n = 0
    for ng in (1, 2, 3):
        for variant in range(12):
            ns = min(4, ng + variant % (5 - ng))
            m = [rng.choice([1, 2, 4]) for _ in range(ng)]
            p = rng.choice([1, 2, 4])
            twin = variant % 4 == 0
            delay = 0 if twin else variant % 4
            fault = ["none", "host", "device"][variant % 3] if not twin else "none"
            data = setup(ng, ns, m, p, 1 + variant % 4, 1 + rng.randrange(8), 1 + rng.randrange(4), twin, delay,
                         variant // 6 % 2, fault)
            data += body(20 + rng.randrange(30), not twin)
            with open(os.path.join(OUT, "seed-%02d" % n), "wb") as f:
                f.write(bytes(x & 255 for x in data))
            n += 1
    # shared prefixes, after the others so that their bytes stay as they were
    for variant in range(8):
        ng = 1 + variant % 3
        ns = min(4, ng + variant % 2)
        m = [rng.choice([1, 2, 4]) for _ in range(ng)]
        twin = variant % 4 == 1
        fault = ["none", "host", "device", "none"][variant % 4] if not twin else "none"
        data = setup(ng, ns, m, rng.choice([1, 2, 4]), 1 + variant % 3, 1 + rng.randrange(8), 3 + variant % 2, twin,
                     0 if twin else variant % 3, variant % 2, fault, extra=39)
        data += body_share(30 + rng.randrange(30), not twin)
        with open(os.path.join(OUT, "share-%02d" % variant), "wb") as f:
            f.write(bytes(x & 255 for x in data))
        n += 1
    # per-group hot-cache sizes (bits 4-7 of the hot byte: two bits per group), after the others
    for variant in range(6):
        ng = 2 + variant % 2
        ns = min(4, ng + variant % 2)
        m = [rng.choice([1, 2, 4]) for _ in range(ng)]
        twin = variant % 3 == 0
        fault = "none" if twin else ["host", "device"][variant % 2]
        hot = rng.randrange(4) | (2 << 2) | (rng.randrange(1, 16) << 4)
        data = setup(ng, ns, m, rng.choice([1, 2, 4]), 1 + variant % 4, 1 + rng.randrange(8), 2 + variant % 3, twin,
                     0 if twin else variant % 3, variant % 2, fault, hot=hot)
        data += body(30 + rng.randrange(30), not twin)
        with open(os.path.join(OUT, "grouphot-%02d" % variant), "wb") as f:
            f.write(bytes(x & 255 for x in data))
        n += 1
    print("%d seeds in %s" % (n, OUT))


if __name__ == "__main__":
    main()
