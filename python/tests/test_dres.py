"""The device-resolver surface of the binding (Context.resolve_device, Context.tail_locations,
config.resolver = Resolver.DEVICE) on the CPU backend, where the library runs the C
specification of the device resolver on host memory: the same calls an engine makes on the GPU
(rows written in place at tail locations by the engine, then one resolve per group over the whole
round in the [N][spec_width][k] / [nsrc][N][spec_width][k] layouts), checked byte for byte against the
pure function of (request, source, row, version) in harness.py, under pool pressure so that
misses are recovered from host and admissions reclaim. Bad input raises and changes nothing."""
import ctypes

import numpy as np
import pytest

import dhisparse as dhs

from harness import make_arch, row_bytes_of, snapshot

RB = 64
N, K_SEL, KMAX, PAGE = 4, 16, 2, 8


def dres_config(arch, *, pressure=True, resolver=dhs.Resolver.DEVICE, max_prefix=300):
    c = dhs.Config(max_requests=N, sel_k=K_SEL, spec_width=KMAX, hot_rows=32, tail_rows=32, page_rows=PAGE,
                   max_rows=1000, repop_pages=4, policy=dhs.Policy.CLOCK, resolver=resolver)
    z = dhs.config_sizes(arch, c)
    if pressure:
        # the required pages of every request and a few optional pages: most history stays on host
        c.device_bytes = z.min_device_bytes + (N - 1) * z.request_bytes + 8 * z.page_bytes
    else:
        c.device_bytes = z.min_device_bytes + N * z.request_bytes + 4 * max_prefix * len(arch.sources) * RB
    return c


def writable_pool(ctx):
    """The CPU backend's pool as a writable array: the 'engine kernel' that writes rows in place."""
    p = dhs._lib.dhs_source_pool(ctx.handle, 0)
    rows, stride = ctx.pool_rows(), ctx.row_stride
    return np.ctypeslib.as_array((ctypes.c_uint8 * (rows * stride)).from_address(p)).reshape(rows, stride)


@pytest.mark.parametrize("layout,seed,split", [("own", 1, False), ("glm", 2, False), ("glm", 3, False),
                                               ("glm", 4, True), ("own", 5, True)])
def test_resolve_device_exact_on_cpu(layout, seed, split):
    """split: resolve_device(split=True) and source_wait before reading each later source; the CPU
    backend defers those sources' copies until the wait, so stale rows show before it"""
    print(f"layout={layout} seed={seed} split={split}")
    rng = np.random.default_rng(seed)
    arch = make_arch(layout, RB)
    cfg = dres_config(arch)
    G = arch.n_groups
    gsrc = [arch.group_sources(g) for g in range(G)]
    nsrc_all = len(arch.sources)
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        ver = {}  # (uid, row) -> version of its committed bytes
        reqs, uids = [], []
        for uid in range(1, N + 1):
            n0 = int(rng.integers(K_SEL + 1, 300))
            r = ctx.open(n0 + 200)
            r.import_rows(n0, [row_bytes_of(uid, s, np.arange(n0), np.zeros(n0), RB) for s in range(nsrc_all)])
            for row in range(n0):
                ver[(uid, row)] = 0
            reqs.append(r)
            uids.append(uid)
        pool = writable_pool(ctx)
        ctx.reset_stats()
        checked = stale_before_wait = pt_checked = 0
        for t in range(1, 25):
            order = list(rng.permutation(len(reqs)))  # round position b != request slot
            rr = [reqs[i] for i in order]
            uu = [uids[i] for i in order]
            K = [int(rng.integers(1, KMAX + 1)) for _ in rr]
            n = [r.positions for r in rr]
            ctx.round_begin(rr, K)
            assert ctx.round_may_miss()  # the pressure keeps most history on host
            # the engine writes the block's rows in place at their tail locations: the whole round's
            # in one call, and the same per request and source
            # the device-written call first (its marks alone let the round commit), then the host's
            devt = ctx.round_tail_locations_device(np.full((nsrc_all, N, KMAX), -1, np.int32))
            allt = ctx.round_tail_locations(KMAX)
            assert allt.shape == (nsrc_all, len(rr), KMAX)
            assert (devt[:, :len(rr), :] == allt).all() and (devt[:, len(rr):, :] == -1).all()
            for b, r in enumerate(rr):
                for s in range(nsrc_all):
                    loc_t = ctx.tail_locations(r, s, n[b], K[b])
                    assert (allt[s, b, :K[b]] == loc_t).all() and (allt[s, b, K[b]:] == -1).all()
                    assert loc_t.shape == (K[b],) and (loc_t >= 0).all() and (loc_t < ctx.pool_rows()).all()
                    pool[loc_t, :RB] = row_bytes_of(uu[b], s, np.arange(n[b], n[b] + K[b]), [t] * K[b], RB)
            # the round's page tables: every entry >= 0 holds the bytes of its page's visible rows, nothing past
            # a request's pages is written (m = 1 sources: rows are positions)
            PS = 1000 // PAGE + 2
            tab = ctx.round_page_tables_device(np.full((nsrc_all, N, PS), -9, np.int32))
            for b in range(N):
                for s in range(nsrc_all):
                    if b >= len(rr) or arch.sources[s].m != 1:
                        assert b < len(rr) or (tab[s, b] == -9).all()
                        continue
                    npg = (n[b] + K[b] + PAGE - 1) // PAGE
                    assert (tab[s, b, npg:] == -9).all() and (tab[s, b, :npg] >= -1).all()
                    for P in np.flatnonzero(tab[s, b, :npg] >= 0):
                        for row in range(P * PAGE, min(P * PAGE + PAGE, n[b] + K[b])):
                            v = t if row >= n[b] else ver[(uu[b], row)]
                            got = ctx.read_location(s, int(tab[s, b, P]) * PAGE + row % PAGE)
                            assert np.array_equal(got, row_bytes_of(uu[b], s, [row], [v], RB)[0]), \
                                f"round {t} b={b} source {s} row {row}: page {tab[s, b, P]}"
                            pt_checked += 1
            for g in range(G):
                sel = np.full((N, KMAX, K_SEL), 10 ** 6, np.int32)  # rows past the round: never read
                for b in range(len(rr)):
                    for j in range(KMAX):
                        if j >= K[b]:
                            continue  # queries past K_b: never read
                        vis = n[b] + j + 1  # query j sees positions < n_b + j + 1
                        s_ = rng.choice(vis, size=min(K_SEL, vis), replace=False).astype(np.int32)
                        s_[rng.random(K_SEL) < 0.1] = -1
                        sel[b, j] = s_
                loc = np.full((len(gsrc[g]), N, KMAX, K_SEL), 777, np.int32)
                assert ctx.resolve_device(g, sel, loc, split=split) is loc
                for si, s in enumerate(gsrc[g]):
                    for pass_ in ((0, 1) if split and si > 0 else (1,)):
                        if pass_ == 1 and split and si > 0:
                            ctx.source_wait(g, si)
                        for b in range(N):
                            for j in range(KMAX):
                                if b >= len(rr) or j >= K[b]:
                                    assert (loc[si, b, j] == -1).all(), f"padding b={b} j={j} not -1"
                                    continue
                                for i in range(K_SEL):
                                    row = int(sel[b, j, i])
                                    if row < 0:
                                        assert loc[si, b, j, i] == -1
                                        continue
                                    v = t if row >= n[b] else ver[(uu[b], row)]
                                    L = int(loc[si, b, j, i])
                                    assert 0 <= L < ctx.pool_rows()
                                    want = row_bytes_of(uu[b], s, [row], [v], RB)[0]
                                    same = np.array_equal(ctx.read_location(s, L), want)
                                    if pass_ == 0:  # before the wait: recovered rows not there yet
                                        stale_before_wait += not same
                                        continue
                                    assert same, f"round {t} group {g} b={b} j={j} row {row} source {s}"
                                    checked += 1
                ctx.group_done(g)
            acc = [int(rng.integers(0, k)) for k in K]
            ctx.round_end(acc)
            for b in range(len(rr)):
                for row in range(n[b], n[b] + acc[b] + 1):
                    ver[(uu[b], row)] = t
                assert rr[b].positions == n[b] + acc[b] + 1
            ctx.assert_invariants(f"round {t}")
        st = ctx.stats()
        print(f"checked={checked} misses={st.distinct_misses} calls={st.resolve_calls} entries={st.entries} "
              f"page-table rows={pt_checked}")
        assert checked > 1000 and pt_checked > 100
        if split and any(len(x) > 1 for x in gsrc):
            assert stale_before_wait > 0, "split: every later source's rows were in place before its wait"
        with pytest.raises(dhs.DhsError):
            ctx.source_wait(G, 0)  # no such group
        assert st.resolve_calls == 24 * G
        assert st.distinct_misses > 0 and st.census_host > 0  # the pressure made it recover from host
        for r in reqs:
            r.close()


def test_resolve_device_bad_input_changes_nothing():
    arch = make_arch("own", RB)
    cfg = dres_config(arch, pressure=False)
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        r = ctx.open(100)
        r.import_rows(50, row_bytes_of(1, 0, np.arange(50), np.zeros(50), RB))
        sel = np.zeros((N, KMAX, K_SEL), np.int32)
        loc = np.zeros((1, N, KMAX, K_SEL), np.int32)
        with pytest.raises(dhs.NotInRoundError):
            ctx.resolve_device(0, sel, loc)
        with pytest.raises(dhs.NotInRoundError):
            ctx.tail_locations(r, 0, 50, 1)
        ctx.round_begin([r])
        before = snapshot(ctx, [r])
        bad = [
            (dict(group=1), dhs.UnknownSourceError),
            (dict(sel=sel.astype(np.int64)), TypeError),
            (dict(sel=np.zeros((N, KMAX + 1, K_SEL), np.int32)), ValueError),   # not [..][spec_width][k]
            (dict(sel=np.zeros((0, KMAX, K_SEL), np.int32)), ValueError),       # fewer rows than the round
            (dict(loc=np.zeros((1, N - 1, KMAX, K_SEL), np.int32)), ValueError),
            (dict(loc=np.zeros((2, N, KMAX, K_SEL), np.int32)), ValueError),   # one source in the group
            (dict(loc=np.zeros((1, N, KMAX, K_SEL), np.int32)[:, :, :, ::1].copy(order="F")), TypeError),
            (dict(sel=np.zeros((N, KMAX, K_SEL + 1), np.int32),
                  loc=np.zeros((1, N, KMAX, K_SEL + 1), np.int32)), dhs.KTooLargeError),
            (dict(sel=np.zeros((N, KMAX, 0), np.int32), loc=np.zeros((1, N, KMAX, 0), np.int32)), dhs.InvalidArgError),
            (dict(stream=1), ValueError),
        ]
        for kw, exc in bad:
            args = dict(group=0, sel=sel, loc=loc)
            args.update(kw)
            with pytest.raises(exc):
                ctx.resolve_device(**args)
            assert snapshot(ctx, [r]) == before, f"{kw} changed state"
        with pytest.raises(dhs.RowRangeError):
            ctx.tail_locations(r, 0, 49, 1)  # a committed row
        with pytest.raises(dhs.RowRangeError):
            ctx.tail_locations(r, 0, 50, 2)  # past the block (K = 1)
        with pytest.raises(dhs.UnknownSourceError):
            ctx.tail_locations(r, 1, 50, 1)
        with pytest.raises(ValueError):
            ctx.tail_locations(r, 0, 50, 1, out=np.zeros(2, np.int32))
        assert snapshot(ctx, [r]) == before
        with pytest.raises(dhs.StateError):
            ctx.round_end([0])
        out = np.full(1, -7, np.int32)
        assert r.tail_locations(0, 50, 1, out=out) is out and out[0] >= 0
        ctx.round_end([0])
        assert r.positions == 51


def test_resolve_device_bad_entry_reported_at_round_end():
    """A bad entry gives -1 in its location, the rest resolve; round_end raises that status with nothing
    committed and the round still open; a second round_end commits."""
    arch = make_arch("own", RB)
    cfg = dres_config(arch, pressure=False)
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        r = ctx.open(100)
        r.import_rows(50, row_bytes_of(1, 0, np.arange(50), np.zeros(50), RB))
        ctx.round_begin([r])
        pool = writable_pool(ctx)
        pool[r.tail_locations(0, 50, 1), :RB] = row_bytes_of(1, 0, [50], [1], RB)
        sel = np.full((N, KMAX, K_SEL), -1, np.int32)
        sel[0, 0, :4] = [3, -5, 50, 49]
        loc = np.zeros((1, N, KMAX, K_SEL), np.int32)
        ctx.resolve_device(0, sel, loc)
        assert loc[0, 0, 0, 1] == -1
        assert np.array_equal(ctx.read_location(0, int(loc[0, 0, 0, 0])), row_bytes_of(1, 0, [3], [0], RB)[0])
        assert np.array_equal(ctx.read_location(0, int(loc[0, 0, 0, 2])), row_bytes_of(1, 0, [50], [1], RB)[0])
        with pytest.raises(dhs.RowRangeError):
            ctx.round_end([0])
        assert r.positions == 50  # nothing committed, the round is still open
        ctx.round_end([0])
        assert r.positions == 51
        ctx.assert_invariants()


def test_round_end_early_reports_at_next_round_begin():
    """round_end(early=True) commits a round with a bad entry; the next round_begin raises the entry's
    status with no round opened and nothing changed, and its retry opens the round; sync reports it too."""
    arch = make_arch("own", RB)
    cfg = dres_config(arch, pressure=False)
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        r = ctx.open(100)
        r.import_rows(50, row_bytes_of(1, 0, np.arange(50), np.zeros(50), RB))
        pool = writable_pool(ctx)
        for t, report in enumerate(["round_begin", "sync", None]):
            n = r.positions
            ctx.round_begin([r])
            pool[r.tail_locations(0, n, 1), :RB] = row_bytes_of(1, 0, [n], [1], RB)
            sel = np.full((N, KMAX, K_SEL), -1, np.int32)
            sel[0, 0, :2] = [3, n + 7 if report else n]  # row n + 7 is not visible to the query at n
            loc = np.zeros((1, N, KMAX, K_SEL), np.int32)
            ctx.resolve_device(0, sel, loc)
            assert (loc[0, 0, 0, 1] == -1) == (report is not None)
            ctx.round_end([0], early=True)
            assert r.positions == n + 1  # committed, whatever the word
            ctx.assert_invariants()
            if report == "round_begin":
                with pytest.raises(dhs.NotVisibleError):
                    ctx.round_begin([r])
                assert r.positions == n + 1
                ctx.assert_invariants()
            elif report == "sync":
                with pytest.raises(dhs.NotVisibleError):
                    ctx.sync()
                ctx.sync()  # the word was cleared
        ctx.round_begin([r])  # the last round had no bad entry
        pool[r.tail_locations(0, 53, 1), :RB] = row_bytes_of(1, 0, [53], [1], RB)
        ctx.round_end([0])
        assert r.positions == 54


def test_resolve_device_refused_in_host_mode():
    arch = make_arch("own", RB)
    cfg = dres_config(arch, pressure=False, resolver=dhs.Resolver.HOST)
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        r = ctx.open(100)
        r.import_rows(50, row_bytes_of(1, 0, np.arange(50), np.zeros(50), RB))
        ctx.round_begin([r])
        with pytest.raises(dhs.StateError):
            ctx.resolve_device(0, np.zeros((N, KMAX, K_SEL), np.int32), np.zeros((1, N, KMAX, K_SEL), np.int32))
        loc = np.full((1, 1, KMAX), 5, np.int32)
        with pytest.raises(dhs.StateError):
            ctx.round_tail_locations_device(loc)
        assert (loc == 5).all()
        # tail_locations works in both modes
        assert r.tail_locations(0, 50)[0] >= 0


def test_resolver_parse_binding():
    v = ctypes.c_int(-1)
    assert dhs._lib.dhs_resolver_parse(b"device", ctypes.byref(v)) == 0 and v.value == int(dhs.Resolver.DEVICE)
    assert dhs._lib.dhs_resolver_parse(b"nonsense", ctypes.byref(v)) != 0
