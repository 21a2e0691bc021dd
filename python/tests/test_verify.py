"""The randomised exactness check of `dhs verify`, driven from Python through the
bindings (CPU backend): random sessions arrive and leave, import prefixes
(device or host), run rounds of K speculative queries with random selections
(locality, duplicates, -1 padding), accept random prefixes; every returned
location is read back (through the pool view, and through dhs_read_location)
and compared with the bytes written; dhs_check_invariants is 0 after every
call. Seeds are fixed and printed; a failure names its seed and step."""
import numpy as np
import pytest

import dhisparse as dhs

from harness import make_arch, make_config, row_bytes_of


class Session:
    def __init__(self, req, uid, life, prefix, arch, max_rows, rng):
        self.req, self.uid, self.life = req, uid, life
        self.ver = [np.zeros(max_rows // arch.sources[g[0]].m + 2, dtype=np.uint32)
                    for g in (arch.group_sources(i) for i in range(arch.n_groups))]
        self.topic = rng.integers(0, prefix + 1, size=4)


class Verify:
    def __init__(self, seed, layout, *, requests=8, steps=60, k=32, spec=3, hot_rows=64, page_rows=16,
                 row_bytes=64, max_prefix=700, pressure=True, async_delay=0):
        print(f"verify: seed={seed} layout={layout} requests={requests} steps={steps} k={k} spec={spec} "
              f"pressure={pressure} async_delay={async_delay}")
        self.seed, self.steps, self.k, self.spec, self.rb = seed, steps, k, spec, row_bytes
        self.max_prefix = max_prefix
        self.rng = np.random.default_rng(seed)
        self.arch = make_arch(layout, row_bytes)
        self.cfg = make_config(self.arch, requests=requests, k=k, spec=spec, hot_rows=hot_rows, page_rows=page_rows,
                               max_prefix=max_prefix, steps=steps, pressure=pressure)
        self.be = dhs.CpuBackend(async_delay=async_delay, random_order=async_delay > 0, seed=seed)
        self.ctx = dhs.Context(self.arch, self.cfg, self.be)
        self.slots = [None] * requests
        self.next_uid = 0
        self.checked = 0
        self.read_back = 0
        self.step = -1
        self.m = [s.m for s in self.arch.sources]
        self.gm = [self.arch.sources[self.arch.group_sources(g)[0]].m for g in range(self.arch.n_groups)]

    # ---------------------------------------------------------------- checks
    def inv(self, after):
        n, msg = self.ctx.check_invariants()
        assert n == 0, f"seed {self.seed} step {self.step}: invariants after {after}: {msg}"

    def fail(self, what):
        raise AssertionError(f"seed {self.seed} step {self.step}: {what}")

    def check_locations(self, g, sess_list, sels, locs, when):
        pool = self.ctx.pool()
        srcs = self.arch.group_sources(g)
        for s, sel, loc in zip(sess_list, sels, locs):
            flat = sel.reshape(-1)
            # padding maps to -1 in every vector
            for si in range(len(srcs)):
                l = loc[si].reshape(-1)
                if not (l[flat < 0] == -1).all():
                    self.fail(f"{when}: padding -1 did not map to -1")
            valid = flat >= 0
            rows, l0 = flat[valid], loc[0].reshape(-1)[valid]
            # one row, one location (within a request's round); different rows, different locations
            order = np.argsort(rows, kind="stable")
            r_s, l_s = rows[order], l0[order]
            same = r_s[1:] == r_s[:-1]
            if (l_s[1:][same] != l_s[:-1][same]).any():
                self.fail(f"{when}: one row got two locations within a request's round")
            ur, first = np.unique(r_s, return_index=True)
            if len(np.unique(l_s[first])) != len(ur):
                self.fail(f"{when}: two rows share a location")
            for si, src in enumerate(srcs):
                l = loc[si].reshape(-1)[valid]
                want = row_bytes_of(s.uid, src, rows, s.ver[g][rows], self.rb)
                got = pool[l, :self.rb]
                bad = np.nonzero((got != want).any(axis=1))[0]
                if len(bad):
                    i = bad[0]
                    self.fail(f"{when}: I2: request uid {s.uid} source {src} row {rows[i]} at location {l[i]} "
                              f"holds wrong bytes ({len(bad)} wrong)")
                self.checked += len(rows)
                # and through dhs_read_location, for a sample
                for i in self.rng.choice(len(rows), size=min(8, len(rows)), replace=False) if len(rows) else []:
                    b = self.ctx.read_location(src, int(l[i]))
                    if not np.array_equal(b, want[i]):
                        self.fail(f"{when}: dhs_read_location(source {src}, {l[i]}) differs from row {rows[i]}")
                    self.read_back += 1

    # ---------------------------------------------------------------- actions
    def open(self, i):
        prefix = int(self.rng.integers(0, self.max_prefix + 1))
        req = self.ctx.try_open(prefix)
        self.inv("open")
        if req is None:
            return
        self.next_uid += 1
        s = Session(req, self.next_uid, 10 + int(self.rng.integers(0, self.steps // 2 + 10)), prefix, self.arch,
                    self.cfg.max_rows, self.rng)
        rows = []
        for src, sd in enumerate(self.arch.sources):
            nr = -(-prefix // sd.m)
            rows.append(row_bytes_of(s.uid, src, np.arange(nr), np.zeros(nr), self.rb))
        device = bool(self.rng.random() < 0.7)
        req.import_rows(prefix, rows, device=device)
        self.inv("import")
        self.slots[i] = s

    def write_block(self, s, K):
        n = s.req.positions
        for g in range(self.arch.n_groups):
            m = self.gm[g]
            lo, hi = n // m, -(-(n + K) // m)
            s.ver[g][lo:hi] += 1
            for src in self.arch.group_sources(g):
                data = row_bytes_of(s.uid, src, np.arange(lo, hi), s.ver[g][lo:hi], self.rb)
                s.req.write_rows(src, lo, data)
                self.inv("write_rows")

    def gen_selection(self, s, g, n, K):
        k, m = self.k, self.gm[g]
        sel = np.empty((K, k), dtype=np.int32)
        for j in range(K):
            vis = (n + j + 1) // m
            if vis <= 0:
                sel[j] = -1
                continue
            x = self.rng.integers(0, 100, size=k)
            r = np.empty(k, dtype=np.int64)
            r[:] = self.rng.integers(0, vis, size=k)                                   # random tail
            sinks = x < 9
            r[sinks] = self.rng.integers(0, min(vis, 4), size=sinks.sum())             # attention sinks
            local = (x >= 9) & (x < 40)
            r[local] = vis - 1 - self.rng.integers(0, min(vis, 48), size=local.sum())  # local window
            top = (x >= 40) & (x < 80)
            t = s.topic[self.rng.integers(0, 4, size=top.sum())]
            r[top] = (t // m + self.rng.integers(0, 40, size=top.sum())) % vis         # topical sets
            r[x < 4] = -1                                                              # padding
            dup = np.nonzero(x >= 95)[0]
            for i in dup:                                                              # duplicates
                r[i] = r[self.rng.integers(0, i)] if i > 0 else -1
            sel[j] = r
        if self.rng.integers(0, 20) == 0:
            s.topic[self.rng.integers(0, 4)] = self.rng.integers(0, n + 1)             # drift
        return sel

    def resolve(self, g, sess, K):
        sels = [self.gen_selection(s, g, s.req.positions, k) for s, k in zip(sess, K)]
        locs = self.ctx.resolve(g, [(s.req, sel) for s, sel in zip(sess, sels)])
        self.inv("resolve")
        self.check_locations(g, sess, sels, locs, "after resolve")
        return sels, locs

    def round(self, sess):
        K = [int(self.rng.integers(1, self.spec + 1)) for _ in sess]
        self.ctx.round_begin([s.req for s in sess], K)
        self.inv("round_begin")
        for s, k in zip(sess, K):
            self.write_block(s, k)
        last = None
        for c in self.arch.consumers:
            if c.kind == dhs.ConsumerKind.FOLLOW:
                continue
            if c.kind == dhs.ConsumerKind.REUSE:
                continue
            if last is not None and last[0] != c.group:
                self.check_locations(last[0], sess, last[1], last[2], "group end")
                self.ctx.group_done(last[0])
                self.inv("group_done")
            if c.kind == dhs.ConsumerKind.REINDEX and last is not None and last[0] == c.group:
                sels, locs = self.resolve(c.group, sess, K)
                # the earlier consumer's locations stay valid after the reindex
                self.check_locations(c.group, sess, last[1], last[2], "earlier consumer after reindex")
            else:
                sels, locs = self.resolve(c.group, sess, K)
            last = (c.group, sels, locs)
        acc = [int(self.rng.integers(0, k)) for k in K]
        self.ctx.round_end(acc)
        self.inv("round_end")

    def sweep(self, s):
        """Before closing: every committed row is still recoverable, byte for byte."""
        for g in range(self.arch.n_groups):
            rows = s.req.positions // self.gm[g]
            for base in range(0, rows, self.k):
                self.ctx.round_begin([s.req], [1])
                self.write_block(s, 1)
                sel = np.arange(base, base + self.k, dtype=np.int32)
                sel[sel >= rows] = -1
                loc = self.ctx.resolve(g, [(s.req, sel.reshape(1, -1))])
                self.check_locations(g, [s], [sel.reshape(1, -1)], loc, "sweep")
                self.ctx.round_end([0])
                self.inv("sweep")

    def close(self, i):
        s = self.slots[i]
        s.req.close()
        self.inv("close")
        with pytest.raises(dhs.ClosedError):
            s.req.closed = False  # ask the library, not the wrapper
            s.req.positions
        s.req.closed = True
        self.slots[i] = None

    def run(self):
        try:
            for self.step in range(self.steps):
                for i in range(len(self.slots)):
                    if self.slots[i] is None and self.rng.integers(0, 3) == 0:
                        self.open(i)
                sess = [s for s in self.slots if s is not None and self.rng.integers(0, 10) != 0]
                self.round(sess)
                for i, s in enumerate(self.slots):
                    if s is None:
                        continue
                    s.life -= 1
                    if s.life <= 0:
                        self.sweep(s)
                        self.close(i)
            for i, s in enumerate(self.slots):
                if s is not None:
                    self.sweep(s)
                    self.close(i)
            self.ctx.sync()
            self.inv("sync")
            st, mem = self.ctx.stats(), self.ctx.mem()
            assert st.host_rows_copied == st.distinct_misses
            assert st.census_direct + st.census_hot + st.census_host == st.entries
            assert mem.requests_open == 0 and mem.optional_bytes == 0, "memory still held after every request closed"
            print(f"verify: seed={self.seed}: {self.checked} locations checked ({self.read_back} through "
                  f"dhs_read_location), entries {st.entries}, misses {st.distinct_misses}, reclaims {st.reclaims}, "
                  f"waits {st.waits}, staging rows {st.staging_rows}, rounds {st.rounds}")
            return st
        finally:
            self.ctx.close()
            self.be.close()


SEEDS = [1, 7, 20260301]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("layout", ["own", "glm", "compress"])
def test_verify_pressure(seed, layout):
    st = Verify(seed, layout, pressure=True).run()
    assert st.entries > 0
    assert st.reclaims > 0, "the high-pressure budget must reclaim (else this test does not test reclaim)"
    assert st.census_host > 0 and st.census_hot > 0


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_verify_async_low_pressure(seed):
    st = Verify(seed, "own", pressure=False, async_delay=3).run()
    assert st.entries > 0 and st.repopulated_pages + st.census_direct > 0


def test_verify_catches_corruption(monkeypatch):
    """The check can fail: flip one byte of a location after resolve and the harness must notice."""
    v = Verify(5, "own", steps=20)
    real = v.ctx.resolve

    def corrupting(g, items, **kw):
        locs = real(g, items, **kw)
        if v.step == 10:
            for loc in locs:
                ll = loc.reshape(-1)
                ll = ll[ll >= 0]
                if len(ll):
                    import ctypes
                    from dhisparse import _lib
                    base = _lib.dhs_source_pool(v.ctx.handle, 0)
                    p = ctypes.cast(base + int(ll[0]) * v.ctx.row_stride, ctypes.POINTER(ctypes.c_uint8))
                    p[0] ^= 0x40
                    break
        return locs

    monkeypatch.setattr(v.ctx, "resolve", corrupting)
    with pytest.raises(AssertionError, match="wrong bytes"):
        v.run()
