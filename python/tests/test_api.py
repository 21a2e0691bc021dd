"""The Python surface: defaults come from the C library, context managers close
what they opened, and every bad input raises a clear exception while changing
nothing (stats, memory figures, positions, invariants and every pool byte are
compared before and after)."""
import ctypes

import numpy as np
import pytest

import dhisparse as dhs
from dhisparse import _lib

from harness import make_arch, row_bytes_of, snapshot

RB = 64


def test_version_matches_library():
    assert dhs.__version__ == dhs.library_version == _lib.dhs_version().decode()


def test_defaults_come_from_c():
    c_cfg = _lib.dhs_config_default()
    cfg = dhs.Config()
    for name, _ in _lib.dhs_config._fields_:
        if name == "group_hot_rows":  # a list: [] for the C default (every entry 0)
            assert cfg.group_hot_rows == [] and list(c_cfg.group_hot_rows) == [0] * _lib.DHS_MAX_SOURCES
            continue
        assert int(getattr(cfg, name)) == getattr(c_cfg, name), name
    c_arch = _lib.dhs_arch_default()
    a = dhs.Arch()
    assert a.n_groups == c_arch.n_groups and len(a.sources) == c_arch.n_sources
    assert a.sources[0].row_bytes == c_arch.sources[0].row_bytes and a.sources[0].m == c_arch.sources[0].m
    assert len(a.consumers) == c_arch.n_consumers and a.index_key_bytes == c_arch.index_key_bytes
    # round trip through the C struct
    back = a.to_c()
    assert ctypes.string_at(ctypes.addressof(back), ctypes.sizeof(back)) == \
        ctypes.string_at(ctypes.addressof(c_arch), ctypes.sizeof(c_arch))
    a.validate()
    assert str(dhs.Policy.LRU) == _lib.dhs_policy_str(0).decode()


def test_arch_validate_raises():
    a = dhs.Arch(sources=[dhs.SourceDesc(row_bytes=20)])
    with pytest.raises(dhs.InvalidArgError) as e:
        a.validate()
    assert e.value.status == -4 and e.value.status_str == "invalid argument" and e.value.call == "dhs_arch_validate"


def test_sizing_helpers():
    assert dhs.ring_rows(2048, 8, 64) == 2176
    assert dhs.ring_row(2176, 2, 5) == 2 * 2176 + 5
    assert dhs.staging_bytes(4, 35, 8, 2048, 576) == 4 * 35 * 8 * 2048 * 576
    s = dhs.SpecSchedule()
    assert s.width(1) == 8 and s.width(64) == 6 and s.width(200) == 4
    assert dhs.SpecSchedule("4@0,2@10").width(11) == 2
    with pytest.raises(ValueError):
        dhs.SpecSchedule("nonsense")


def test_group_hot_rows():
    """dhs_config.group_hot_rows as a list: per-group request bytes, admission, bad entries refused."""
    arch = dhs.Arch(n_groups=2, sources=[dhs.SourceDesc(RB, 1, 0), dhs.SourceDesc(RB, 1, 1)],
                    consumers=[dhs.ConsumerDesc(dhs.ConsumerKind.OWN, 0, 0), dhs.ConsumerDesc(dhs.ConsumerKind.OWN, 1, 1)])
    base = dict(max_requests=2, sel_k=16, hot_rows=32, tail_rows=32, page_rows=8, max_rows=600)
    uni = dhs.config_sizes(arch, dhs.Config(**base))
    assert dhs.config_sizes(arch, dhs.Config(**base, group_hot_rows=[32, 32])) == uni
    per = dhs.config_sizes(arch, dhs.Config(**base, group_hot_rows=[16, 64]))
    assert per.request_bytes == ((16 + 32) // 8 + (64 + 32) // 8) * per.page_bytes
    assert uni.request_bytes == 2 * (32 + 32) // 8 * uni.page_bytes
    for bad in ([12], [-8], [0, 0, 16]):  # not a multiple of page_rows, negative, a group past n_groups
        with pytest.raises(dhs.InvalidArgError):
            dhs.config_sizes(arch, dhs.Config(**base, group_hot_rows=bad))
    with pytest.raises(ValueError):
        dhs.Config(**base, group_hot_rows=[8] * (_lib.DHS_MAX_SOURCES + 1)).to_c()
    cfg = dhs.Config(**base, group_hot_rows=[16, 64])
    cfg.device_bytes = per.staging_bytes + per.request_bytes
    be = dhs.CpuBackend()
    ctx = dhs.Context(arch, cfg, be)
    r = ctx.open(100)
    assert ctx.mem().required_bytes == per.staging_bytes + per.request_bytes
    assert ctx.try_open(100) is None  # the pool holds one per-group request
    r.close()
    ctx.close()
    be.close()


def small_config(**kw):
    c = dict(max_requests=4, sel_k=16, spec_width=2, hot_rows=32, tail_rows=32, page_rows=8, max_rows=600, repop_pages=4)
    c.update(kw)
    cfg = dhs.Config(**c)
    z = dhs.config_sizes(make_arch("own", RB), cfg)
    cfg.device_bytes = z.staging_bytes + z.reserve_bytes + 4 * z.request_bytes + 40 * z.page_bytes
    return cfg


@pytest.fixture
def env():
    """A context with two requests (uid 1: 300 imported positions, uid 2: 100), one round done."""
    arch = make_arch("own", RB)
    be = dhs.CpuBackend()
    ctx = dhs.Context(arch, small_config(), be)
    reqs = []
    for uid, n in ((1, 300), (2, 100)):
        r = ctx.open(n + 50)
        r.import_rows(n, row_bytes_of(uid, 0, np.arange(n), np.zeros(n), RB), device=uid == 1)
        reqs.append(r)
    yield ctx, reqs
    ctx.close()
    be.close()


def unchanged(ctx, reqs, fn, exc):
    before = snapshot(ctx, reqs)
    with pytest.raises(exc) as e:
        fn()
    after = snapshot(ctx, reqs)
    assert before == after, f"{fn} changed state"
    assert after["invariants"] == (0, "")
    return e.value


def test_bad_inputs_outside_a_round(env):
    ctx, (r1, r2) = env
    e = unchanged(ctx, [r1, r2], lambda: ctx.open(10_000), dhs.RowRangeError)
    assert e.call == "dhs_request_open" and "row outside" in str(e)
    unchanged(ctx, [r1, r2], lambda: r1.import_rows(10, np.zeros((10, RB), np.uint8)), dhs.StateError)
    unchanged(ctx, [r1, r2], lambda: ctx.round_begin([r1], [3]), dhs.TooManyQueriesError)
    unchanged(ctx, [r1, r2], lambda: ctx.round_begin([r1, r1]), dhs.InvalidArgError)
    unchanged(ctx, [r1, r2], lambda: ctx.round_end([0]), dhs.StateError)
    unchanged(ctx, [r1, r2], lambda: ctx.group_done(0), dhs.StateError)
    unchanged(ctx, [r1, r2], lambda: ctx.resolve(0, [(r1, np.zeros((1, 4), np.int32))]), dhs.NotInRoundError)
    unchanged(ctx, [r1, r2], lambda: r1.write_rows(0, 300, np.zeros((1, RB), np.uint8)), dhs.NotInRoundError)
    unchanged(ctx, [r1, r2], lambda: ctx.read_location(0, 10**9), dhs.RowRangeError)
    unchanged(ctx, [r1, r2], lambda: ctx.read_location(5, 0), dhs.UnknownSourceError)
    forged = dhs.Request(ctx, _lib.dhs_req(999, 1))
    unchanged(ctx, [r1, r2], lambda: forged.positions, dhs.UnknownRequestError)
    # python-side validation: clear TypeError/ValueError, nothing reaches C
    r3 = ctx.open(10)
    unchanged(ctx, [r1, r2, r3], lambda: r3.import_rows(10, np.zeros((9, RB), np.uint8)), ValueError)
    unchanged(ctx, [r1, r2, r3], lambda: r3.import_rows(10, [np.zeros((10, RB), np.uint8)] * 2), ValueError)
    unchanged(ctx, [r1, r2, r3], lambda: r3.import_rows(10, "not rows"), (TypeError, ValueError))
    r3.import_rows(10, np.zeros((10, RB), np.uint8))  # and the good one still works


def test_bad_inputs_inside_a_round(env):
    ctx, (r1, r2) = env
    ctx.round_begin([r1, r2], [2, 1])
    r1.write_rows(0, 300, row_bytes_of(1, 0, [300, 301], [1, 1], RB))
    good = np.array([[0, 5, 299, -1], [1, 2, 300, 301]], np.int32)
    bad_cases = [
        (lambda: ctx.resolve(0, [(r1, np.array([[0, 5, 302, -1], [1, 2, 3, 4]], np.int32))]), dhs.NotVisibleError),
        (lambda: ctx.resolve(0, [(r1, np.array([[0, -2, 3, 4], [1, 2, 3, 4]], np.int32))]), dhs.RowRangeError),
        (lambda: ctx.resolve(0, [(r1, np.zeros((2, 17), np.int32))]), dhs.KTooLargeError),
        (lambda: ctx.resolve(0, [(r1, good[:1])]), dhs.InvalidArgError),                   # n_queries != K_r
        (lambda: ctx.resolve(0, [(r2, np.array([[0, 1, 100, 2]], np.int32))]), dhs.RowRangeError),  # not written
        (lambda: ctx.resolve(0, [(r1, good), (r1, good)]), dhs.InvalidArgError),           # duplicate item
        (lambda: ctx.resolve(3, [(r1, good)]), dhs.UnknownSourceError),
        (lambda: r1.write_rows(0, 302, np.zeros((1, RB), np.uint8)), dhs.RowRangeError),   # past the block
        (lambda: r1.write_rows(0, 10, np.zeros((1, RB), np.uint8)), dhs.RowRangeError),    # committed row
        (lambda: r1.write_rows(1, 300, np.zeros((1, RB), np.uint8)), dhs.UnknownSourceError),
        (lambda: ctx.round_begin([r1]), dhs.StateError),
        (lambda: ctx.round_end([2, 0]), dhs.AcceptedRangeError),
        (lambda: r1.close(), dhs.StateError),
        # python-side
        (lambda: ctx.resolve(0, [(r1, good.astype(np.float32))]), TypeError),
        (lambda: ctx.resolve(0, [(r1, np.zeros((2, 2, 2), np.int32))]), ValueError),
        (lambda: ctx.resolve(0, [(r1, good)], out=[np.zeros((1, 2, 4), np.int64)]), ValueError),
        (lambda: r1.write_rows(0, 300, np.zeros(RB + 1, np.uint8)), ValueError),
        (lambda: ctx.round_end([0]), ValueError),
    ]
    for fn, exc in bad_cases:
        unchanged(ctx, [r1, r2], fn, exc)
    # and the round still works after all of that
    r2.write_rows(0, 100, row_bytes_of(2, 0, [100], [1], RB))
    out = [np.empty((1, 2, 4), np.int32)]
    locs = ctx.resolve(0, [(r1, good)], out=out)
    assert locs[0] is out[0]
    pool = ctx.pool()
    for j in range(2):
        for i in range(4):
            row = good[j, i]
            if row < 0:
                assert locs[0][0, j, i] == -1
                continue
            ver = 1 if row >= 300 else 0
            want = row_bytes_of(1, 0, [row], [ver], RB)[0]
            assert np.array_equal(pool[locs[0][0, j, i], :RB], want)
            assert np.array_equal(ctx.read_location(0, locs[0][0, j, i]), want)
    ctx.round_end([1, 0])
    assert r1.positions == 302 and r2.positions == 101


def test_wait_and_try_open(env):
    ctx, (r1, r2) = env
    extra = [ctx.open(10), ctx.open(10)]  # 4 slots in use now
    before = snapshot(ctx, [r1, r2] + extra)
    assert ctx.try_open(10) is None
    with pytest.raises(dhs.Wait) as e:
        ctx.open(10)
    assert e.value.status == 1
    after = snapshot(ctx, [r1, r2] + extra)
    assert after["stats"].waits == before["stats"].waits + 2
    before["stats"] = after["stats"]
    assert before == after
    extra[0].close()
    assert ctx.try_open(10) is not None


def test_closed_request(env):
    ctx, (r1, r2) = env
    with r2:
        pass
    assert r2.closed
    r2.closed = False  # ask the library
    unchanged(ctx, [r1], lambda: r2.positions, dhs.ClosedError)
    unchanged(ctx, [r1], lambda: r2.close(), dhs.ClosedError)


def test_context_managers_free_everything():
    arch = make_arch("own", RB)
    with dhs.CpuBackend() as be:
        with dhs.Context(arch, small_config(), be) as ctx:
            with ctx.open(100) as r:
                r.import_rows(100, row_bytes_of(1, 0, np.arange(100), np.zeros(100), RB))
                with ctx.round([r]) as rnd:
                    r.write_rows(0, 100, row_bytes_of(1, 0, [100], [1], RB))
                    loc, = ctx.resolve(0, [(r, [[0, 1, 100, -1]])])  # a list works too
                    assert loc.shape == (1, 1, 4) and loc[0, 0, 3] == -1
                    rnd.accepted = [0]
                assert r.positions == 101
            assert r.closed and ctx.mem().requests_open == 0
            with pytest.raises(ValueError, match="open context"):
                be.close()
        assert ctx.closed
        with pytest.raises(ValueError, match="closed"):
            ctx.stats()
    assert be.closed


def test_payload_free_and_faults():
    arch = make_arch("own", RB)
    with dhs.CpuBackend(payload_free=True) as be, dhs.Context(arch, small_config(), be) as ctx:
        r = ctx.open(100)
        r.import_rows(100, None)
        with pytest.raises(dhs.StateError):
            ctx.read_location(0, 0)
    with dhs.CpuBackend() as be:
        be.fault_at(dhs.FaultKind.DEVICE_ALLOC, 1)
        with pytest.raises(dhs.DeviceNoMemError):
            dhs.Context(arch, small_config(), be)
        assert be.faults_injected == 1
        with dhs.Context(arch, small_config(), be) as ctx:  # retry succeeds
            assert ctx.mem().pool_bytes > 0


def test_bad_config():
    with dhs.CpuBackend() as be:
        with pytest.raises(dhs.InvalidArgError):
            dhs.Context(dhs.Arch(), dhs.Config(sel_k=0, device_bytes=1 << 20), be)
        with pytest.raises(dhs.TooLargeError):
            dhs.Context(dhs.Arch(), dhs.Config(device_bytes=4096), be)


def test_cuda_backend_absent_or_present():
    if dhs.cuda_available():
        with dhs.CudaBackend() as be:
            assert be.name
    else:
        with pytest.raises(dhs.UnsupportedError) as e:
            dhs.CudaBackend()
        assert e.value.status == -17


def test_two_phase_import_matches_import_rows():
    """import_begin + filling the arrays + import_commit leaves the context exactly as import_rows
    (device=False) of the same rows; abort leaves it as before the begin; nothing of an open import
    is visible (0 positions, a round naming it raises StateError and changes nothing)."""
    arch = make_arch("own", RB)
    n = 8 * 5 + 3
    rows = row_bytes_of(7, 0, np.arange(n), np.zeros(n), RB)
    be_a, be_b = dhs.CpuBackend(), dhs.CpuBackend()
    a, b = dhs.Context(arch, small_config(), be_a), dhs.Context(arch, small_config(), be_b)
    ra, rb = a.open(n + 20), b.open(n + 20)
    ra.import_rows(n, rows, device=False)
    fresh = snapshot(b, [rb])
    dst = rb.import_begin(n + 9)
    assert len(dst) == 1 and dst[0].shape == (n + 9, RB)
    dst[0][:] = 0xA5
    rb.import_abort()
    assert snapshot(b, [rb]) == fresh
    with pytest.raises(dhs.StateError):
        rb.import_commit()
    dst = rb.import_begin(n)
    unchanged(b, [rb], lambda: rb.import_begin(n), dhs.StateError)
    unchanged(b, [rb], lambda: b.round_begin([rb]), dhs.StateError)
    assert rb.positions == 0
    dst[0][:] = rows
    rb.import_commit()
    assert snapshot(a, [ra]) == snapshot(b, [rb])
    assert rb.positions == n
    for c, be in ((a, be_a), (b, be_b)):
        c.close()
        be.close()


def test_open_shared_reads_the_parents_rows():
    """open_shared: a child on the parent's 2,100-position prefix (two complete 1,024-row host
    chunks shared) imports only its own rows after it, reads every prefix row as the parent
    does, holds them once (host_bytes_shared), outlives a closed parent, and bad prefixes
    raise, changing nothing."""
    arch = make_arch("own", RB)
    cfg = small_config(max_rows=4096)
    z = dhs.config_sizes(arch, cfg)
    cfg.device_bytes = z.staging_bytes + z.reserve_bytes + 4 * z.request_bytes + 600 * z.page_bytes
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        n = 2100
        parent = ctx.open(n)
        parent.import_rows(n, row_bytes_of(7, 0, np.arange(n), np.zeros(n), RB), device=True)
        child = ctx.open_shared(parent, n, n + 60)
        assert child.positions == n
        # its own rows after the prefix: only those (rows n .. n + 49) in the import
        child.import_rows(n + 50, row_bytes_of(8, 0, np.arange(n, n + 50), np.zeros(50), RB))
        assert child.positions == n + 50
        m = ctx.mem()
        assert m.host_bytes_shared >= 2 * 1024 * RB and m.device_bytes_shared > 0
        assert ctx.check_invariants() == (0, "")
        unchanged(ctx, [parent, child], lambda: ctx.open_shared(parent, n + 1), dhs.DhsError)
        unchanged(ctx, [parent, child], lambda: ctx.open_shared(parent, -1), dhs.DhsError)
        parent.close()
        assert ctx.mem().host_bytes_shared == 0  # one holder left
        rows = [0, 1, 1023, 1024, 2047, 2048, 2099, 2100, 2149]
        with ctx.round([child]) as rnd:
            child.write_rows(0, n + 50, row_bytes_of(8, 0, [n + 50], [1], RB))
            loc, = ctx.resolve(0, [(child, [rows])])
            for i, row in enumerate(rows):
                uid = 7 if row < n else 8  # the parent's prefix, then the child's own rows
                assert np.array_equal(ctx.read_location(0, loc[0, 0, i]), row_bytes_of(uid, 0, [row], [0], RB)[0])
            rnd.accepted = [0]
        child.close()
        assert ctx.check_invariants() == (0, "")


def test_host_time():
    """host_time counts one begin and one end per round and resets with reset_stats; its phase names
    are the C enum's, in order, and 'unknown' past them (the count matches the header)."""
    arch = make_arch("own", RB)
    with dhs.CpuBackend(payload_free=True) as be, dhs.Context(arch, small_config(), be) as ctx:
        h = ctx.host_time()
        assert list(h) == ["begin", "housekeeping", "repopulate", "tail_room", "publish", "end", "device",
                           "backup", "resolve", "sweep", "advance", "fence", "background"]
        assert all(v == (0, 0) for v in h.values())
        r = ctx.open(64)
        for t in range(3):
            ctx.round_begin([r], [1])
            for src in range(len(arch.sources)):
                r.write_rows(src, t, np.zeros((1, RB), np.uint8))
                r.tail_locations(src, t)
            ctx.round_end([0])
        h = ctx.host_time()
        for p in ("begin", "housekeeping", "repopulate", "tail_room", "end", "backup", "sweep", "advance"):
            assert h[p][1] == 3, (p, h[p])
        assert h["publish"][1] == 0 and h["begin"][0] > 0
        assert h["housekeeping"][0] + h["tail_room"][0] <= h["begin"][0]
        assert _lib.dhs_host_phase_str(_lib.DHS_HP_COUNT) == b"unknown"
        ctx.reset_stats()
        assert all(v == (0, 0) for v in ctx.host_time().values())


def test_background():
    """Context.background: once called in a round, the round ends copy no tail backup and the calls copy
    the complete pages (page_rows 8: one page per 8 rounds of K = 1); its host time is its own phase; after
    sync every committed row is backed up either way."""
    arch = make_arch("own", RB)
    with dhs.CpuBackend() as be, dhs.Context(arch, small_config(), be) as ctx:
        r = ctx.open(128)
        by_end = by_bg = 0
        for t in range(40):
            ctx.round_begin([r], [1])
            for src in range(len(arch.sources)):
                r.write_rows(src, t, np.full((1, RB), t % 251, np.uint8))
            b0 = ctx.stats().backup_rows
            ctx.background()
            b1 = ctx.stats().backup_rows
            ctx.round_end([0])
            by_bg += b1 - b0
            by_end += ctx.stats().backup_rows - b1
            assert ctx.check_invariants() == (0, "")
        assert by_end == 0 and by_bg > 0, (by_end, by_bg)
        assert ctx.host_time()["background"][1] == 40
        ctx.sync()
        assert ctx.stats().backup_rows == 40 * len(arch.sources)
        assert ctx.check_invariants() == (0, "")


def test_host_cache_fill():
    """host_cache_fill pins spans ahead: they count as cached host bytes, an import of rows that fit
    takes them (the cache empties, the rows read back), and bad arguments raise, changing nothing."""
    arch = make_arch("own", RB)
    cfg = small_config(max_rows=4096)
    cfg.host_cache_bytes = 4096 * RB
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        m0 = ctx.mem()
        # rows 0; rows past max_rows + 1; count < 0; three spans over a two-span limit
        for rows, count in ((0, 1), (4096 + 2, 1), (2000, -1), (2000, 3)):
            with pytest.raises(dhs.DhsError):
                ctx.host_cache_fill(rows, count)
            m = ctx.mem()
            assert m.host_bytes_allocated == m0.host_bytes_allocated and m.host_bytes_cached == 0, (rows, count)
        ctx.host_cache_fill(2000, 2)  # two spans of 2 chunks of 1,024 rows
        m1 = ctx.mem()
        assert m1.host_bytes_cached == 2 * 2048 * RB
        assert m1.host_bytes_allocated == m0.host_bytes_allocated + 2 * 2048 * RB
        assert ctx.check_invariants() == (0, "")
        n = 1500
        r = ctx.open(n + 10)
        r.import_rows(n, row_bytes_of(5, 0, np.arange(n), np.zeros(n), RB), device=False)
        m2 = ctx.mem()
        assert m2.host_bytes_cached == 2048 * RB  # one source: one span taken
        assert m2.host_bytes_allocated < m1.host_bytes_allocated + 1024 * RB
        with ctx.round([r]) as rnd:
            r.write_rows(0, n, row_bytes_of(5, 0, [n], [1], RB))
            loc, = ctx.resolve(0, [(r, [[0, 1023, 1024, n - 1]])])
            for i, row in enumerate([0, 1023, 1024, n - 1]):
                assert np.array_equal(ctx.read_location(0, loc[0, 0, i]), row_bytes_of(5, 0, [row], [0], RB)[0])
            rnd.accepted = [0]
        assert ctx.check_invariants() == (0, "")
        r.close()
