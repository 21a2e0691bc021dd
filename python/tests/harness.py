"""Shared pieces of the Python test suite: row bytes as a pure function of
(request uid, source, row, version), layouts, context construction, snapshots.

Same idea as sim/verify.c: the harness never stores payload; it recomputes
what every location must hold, and a row's version changes each time it is
rewritten (rejected speculative positions, incomplete compressed rows), so a
stale copy shows."""
import numpy as np

import dhisparse as dhs

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix(z):
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def row_bytes_of(uid, src, rows, vers, nbytes):
    """uint8 [len(rows), nbytes]: the bytes of rows `rows` (versions `vers`) of source `src`."""
    rows = np.asarray(rows, dtype=np.uint64).reshape(-1)
    vers = np.asarray(vers, dtype=np.uint64).reshape(-1)
    with np.errstate(over="ignore"):
        h = mix(np.uint64(uid) * np.uint64(0x100000001B3) ^ mix((np.uint64(src) << np.uint64(40)) ^ rows)
                ^ (vers << np.uint64(20)))
        words = mix(h[:, None] + np.arange(0, nbytes, 8, dtype=np.uint64)[None, :])
    return np.ascontiguousarray(words).view(np.uint8).reshape(len(rows), nbytes)


LAYOUTS = {
    # one group, one source
    "own": dict(sources=[(1, 0)], consumers=[(dhs.ConsumerKind.OWN, 0, 0)], n_groups=1),
    # GLM IndexShare: group 0 with a producer and two followers, group 1 with one follower
    "glm": dict(sources=[(1, 0), (1, 0), (1, 0), (1, 1), (1, 1)],
                consumers=[(dhs.ConsumerKind.OWN, 0, 0), (dhs.ConsumerKind.FOLLOW, 1, 0), (dhs.ConsumerKind.FOLLOW, 2, 0),
                           (dhs.ConsumerKind.OWN, 3, 1), (dhs.ConsumerKind.FOLLOW, 4, 1)], n_groups=2),
    # an uncompressed group and a compressed one (m = 4) with a REINDEX consumer
    "compress": dict(sources=[(1, 0), (4, 1)],
                     consumers=[(dhs.ConsumerKind.OWN, 0, 0), (dhs.ConsumerKind.OWN, 1, 1),
                                (dhs.ConsumerKind.REINDEX, 1, 1)], n_groups=2),
}


def make_arch(layout, row_bytes):
    d = LAYOUTS[layout]
    return dhs.Arch(n_groups=d["n_groups"],
                    sources=[dhs.SourceDesc(row_bytes, m, g) for m, g in d["sources"]],
                    consumers=[dhs.ConsumerDesc(k, s, g) for k, s, g in d["consumers"]])


def make_config(arch, *, requests, k, spec, hot_rows, page_rows, max_prefix, steps, pressure):
    """A config sized like verify.c's: at high pressure the pool holds about half the
    requests' required pages plus their history, so admissions reclaim."""
    c = dhs.Config(max_requests=requests, sel_k=k, spec_width=spec, hot_rows=hot_rows, page_rows=page_rows,
                   tail_rows=page_rows * ((4 * spec + 2 * k // 4 + page_rows - 1) // page_rows + 1),
                   max_rows=max_prefix + (steps + 4 * (steps // 4 + 10) + 64) * spec + 64, repop_pages=8,
                   reserve_bytes=page_rows * arch.sources[0].row_bytes * 4 if pressure else 0)
    z = dhs.config_sizes(arch, c)
    opt_pages = 0
    for g in range(arch.n_groups):
        srcs = arch.group_sources(g)
        m = arch.sources[srcs[0]].m
        opt_pages += len(srcs) * (max_prefix // m) // page_rows
    opt_bytes = opt_pages * z.page_bytes
    fixed = z.staging_bytes + z.reserve_bytes
    if pressure:
        c.device_bytes = fixed + z.request_bytes * max(requests // 2, 2) + opt_bytes
    else:
        c.device_bytes = fixed + (z.request_bytes + opt_bytes) * requests + 64 * z.page_bytes
    return c


def snapshot(ctx, reqs=()):
    """Everything a refused call must leave unchanged: stats, memory figures,
    positions of the given requests, the invariant census and every pool byte."""
    pos = []
    for r in reqs:
        try:
            pos.append(r.positions)
        except dhs.DhsError as e:
            pos.append(type(e).__name__)
    pool = ctx.pool().tobytes() if not ctx.backend.payload_free else b""
    return dict(stats=ctx.stats(), mem=ctx.mem(), positions=pos, invariants=ctx.check_invariants(),
                pool=hash(pool))
