"""CUDA path of the bindings.

Without a GPU (or a CUDA build) only the host-side logic runs: parsing and
validating __cuda_array_interface__ / DLPack descriptions (dtype, rank,
contiguity), stream objects, and refusing device arrays on the CPU backend.
The end-to-end test on a device (device selections and locations, device rows,
the pool through __cuda_array_interface__) is skipped, visibly, when
dhs.cuda_available() is False."""
import ctypes
import faulthandler
import sys

import numpy as np
import pytest

import dhisparse as dhs
from dhisparse import _cuda

from harness import make_arch, row_bytes_of


faulthandler.enable(all_threads=True)


def say(msg):
    """Progress on stderr, flushed at once: if the process dies, the last line names the call it was in
    (run with `pytest -s` to see it live)."""
    print(f"[test_cuda] {msg}", file=sys.stderr, flush=True)


class FakeCAI:
    """Describes device memory it does not own (never dereferenced by these tests)."""

    def __init__(self, shape, typestr="<i4", strides=None, ptr=0x10000, stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3, "stream": stream}


def test_cai_parsing_and_validation():
    v = _cuda.device_view(FakeCAI((2, 8)), dtype=np.int32, ndim=2)
    assert v.ptr == 0x10000 and v.shape == (2, 8) and v.nbytes == 64
    with pytest.raises(TypeError, match="dtype int64, expected int32"):
        _cuda.device_view(FakeCAI((2, 8), "<i8"), dtype=np.int32)
    with pytest.raises(ValueError, match="C-contiguous"):
        _cuda.device_view(FakeCAI((2, 8), strides=(4, 8)), dtype=np.int32)
    with pytest.raises(ValueError, match="dimensions"):
        _cuda.device_view(FakeCAI((16,)), dtype=np.int32, ndim=2)
    # explicit C strides are fine, so is a size-1 dimension with any stride
    _cuda.device_view(FakeCAI((2, 8), strides=(32, 4)), dtype=np.int32)
    _cuda.device_view(FakeCAI((1, 8), strides=(999, 4)), dtype=np.int32)
    with pytest.raises(TypeError, match="CUDA device array"):
        _cuda.device_view(np.zeros((2, 8), np.int32))
    assert _cuda.is_device_array(FakeCAI((1,))) and not _cuda.is_device_array(np.zeros(1))


def test_stream_handles():
    class TorchLike:
        cuda_stream = 1234

    class Protocol:
        def __cuda_stream__(self):
            return (0, 5678)

    assert _cuda.stream_handle(None) is None
    assert _cuda.stream_handle(42) == 42
    assert _cuda.stream_handle(TorchLike()) == 1234
    assert _cuda.stream_handle(Protocol()) == 5678
    with pytest.raises(TypeError):
        _cuda.stream_handle("stream")


def test_device_arrays_refused_on_cpu_backend():
    arch = make_arch("own", 64)
    cfg = dhs.Config(max_requests=2, sel_k=8, hot_rows=16, tail_rows=16, page_rows=8, max_rows=200,
                     device_bytes=1 << 20)
    with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
        r = ctx.open(50)
        with pytest.raises(TypeError, match="device array"):
            r.import_rows(50, FakeCAI((50, 64), "|u1"))
        r.import_rows(50, row_bytes_of(1, 0, np.arange(50), np.zeros(50), 64))
        ctx.round_begin([r])
        with pytest.raises(TypeError, match="device array"):
            r.write_rows(0, 50, FakeCAI((1, 64), "|u1"))
        with pytest.raises(TypeError, match="CPU backend"):
            ctx.resolve(0, [(r, FakeCAI((1, 8)))], out=[FakeCAI((1, 1, 8))])
        with pytest.raises(ValueError, match="stream"):
            ctx.resolve(0, [(r, np.zeros((1, 8), np.int32))], stream=1)
        assert ctx.stats().resolve_calls == 0 and ctx.check_invariants() == (0, "")


def test_set_marker_refused_on_cpu_backend():
    """dhs_cuda_set_marker is bound with its callback type; a CPU backend refuses it (nothing changes)."""
    with dhs.CpuBackend() as be:
        with pytest.raises(dhs.DhsError):
            dhs.CudaBackend.set_marker(be, lambda mark: None)
        with pytest.raises(dhs.DhsError):
            dhs.CudaBackend.set_marker(be, None)


# ---------------------------------------------------------------- on a device
cuda = pytest.mark.skipif(not dhs.cuda_available(), reason="no CUDA backend: built without CUDA or no device")


class DeviceBuffer:
    """cudaMalloc'd memory exposing __cuda_array_interface__ (no torch needed)."""

    def __init__(self, shape, dtype):
        rt = _cuda.cudart._load()
        rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        rt.cudaFree.argtypes = [ctypes.c_void_p]
        self.rt, self.dtype, self.shape = rt, np.dtype(dtype), tuple(shape)
        self.nbytes = int(np.prod(shape)) * self.dtype.itemsize
        p = ctypes.c_void_p()
        assert rt.cudaMalloc(ctypes.byref(p), max(self.nbytes, 1)) == 0
        self.ptr = p.value
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                                         "strides": None, "version": 3, "stream": None}

    def upload(self, a):
        _cuda.cudart.memcpy(self.ptr, np.ascontiguousarray(a, self.dtype).ctypes.data, self.nbytes, None)
        _cuda.cudart.sync(None)

    def download(self):
        out = np.empty(self.shape, self.dtype)
        _cuda.cudart.memcpy(out.ctypes.data, self.ptr, self.nbytes, None)
        _cuda.cudart.sync(None)
        return out

    def __del__(self):
        self.rt.cudaFree(self.ptr)


@cuda
def test_cuda_round_trip_with_device_arrays():
    seed = 11
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    rb, n, k = 576, 700, 32
    arch = dhs.Arch()
    cfg = dhs.Config(max_requests=2, sel_k=k, spec_width=2, hot_rows=64, tail_rows=64, page_rows=16, max_rows=2000,
                     device_bytes=8 << 20)
    say("CudaBackend(0)")
    with dhs.CudaBackend(0) as be:
      say(f"backend {be.name}, stream {be.stream:#x}; Context")
      with dhs.Context(arch, cfg, be) as ctx:
        say("DeviceBuffer prefill (cudaMalloc + upload)")
        prefill = DeviceBuffer((n, rb), np.uint8)
        prefill.upload(row_bytes_of(1, 0, np.arange(n), np.zeros(n), rb))
        say("open")
        with ctx.open(n + 10) as r:
            say("import_rows (device array: device_view -> cudaPointerGetAttributes -> DHS_IMPORT_DEVICE)")
            r.import_rows(n, prefill)  # device rows: DHS_IMPORT_DEVICE
            for step in range(4):
                pos = r.positions
                say(f"step {step}: round_begin")
                with ctx.round([r], [2]) as rnd:
                    say(f"step {step}: write_rows (device array)")
                    new = DeviceBuffer((2, rb), np.uint8)
                    new.upload(row_bytes_of(1, 0, [pos, pos + 1], [step + 1] * 2, rb))
                    r.write_rows(0, pos, new)
                    sel = rng.integers(-1, pos + 1, size=(2, k)).astype(np.int32)
                    sel[1, 0] = pos + 1
                    dsel, dloc = DeviceBuffer(sel.shape, np.int32), DeviceBuffer((1,) + sel.shape, np.int32)
                    dsel.upload(sel)
                    say(f"step {step}: resolve (device sel/loc, host plan)")
                    ctx.resolve(0, [(r, dsel)], out=[dloc], stream=be.stream)
                    _cuda.cudart.sync(be.stream)
                    loc = dloc.download()
                    say(f"step {step}: read_location checks")
                    for j in range(2):
                        for i in range(k):
                            if sel[j, i] < 0:
                                assert loc[0, j, i] == -1
                                continue
                            row = sel[j, i]
                            ver = 0 if row < n else (step + 1 if row >= pos else None)
                            got = ctx.read_location(0, int(loc[0, j, i]))
                            if ver is not None:
                                assert np.array_equal(got, row_bytes_of(1, 0, [row], [ver], rb)[0])
                    say(f"step {step}: pool (CUDA array interface)")
                    pool = ctx.pool()
                    assert pool.__cuda_array_interface__["shape"] == (ctx.pool_rows(), ctx.row_stride)
                    rnd.accepted = [1]
                    say(f"step {step}: round_end")
                say(f"step {step}: check_invariants")
                assert ctx.check_invariants() == (0, "")
        say("close")


def _dres_on_device(make, upload, download, stream_obj, label):
    """Device resolver on the GPU: rows written in place at tail locations (cudaMemcpy into the pool, as the
    engine's KV-write kernel would), selections and locations in device memory in the [N][spec_width][k] /
    [1][N][spec_width][k] layouts, one dhs_resolve_device per round; every location checked byte for byte."""
    seed = 21
    say(f"{label}: seed={seed}")
    rng = np.random.default_rng(seed)
    rb, k, N, KMAX = 576, 32, 4, 1
    arch = dhs.Arch()
    cfg = dhs.Config(max_requests=N, sel_k=k, spec_width=KMAX, hot_rows=64, tail_rows=64, page_rows=16, max_rows=3000,
                     policy=dhs.Policy.CLOCK, resolver=dhs.Resolver.DEVICE)
    z = dhs.config_sizes(arch, cfg)
    cfg.device_bytes = z.min_device_bytes + (N - 1) * z.request_bytes + 16 * z.page_bytes  # history mostly on host
    say(f"{label}: CudaBackend(0)")
    with dhs.CudaBackend(0) as be:
        if stream_obj is not None:
            say(f"{label}: set_stream({stream_obj})")
            be.set_stream(stream_obj)
        say(f"{label}: Context (resolver=device, resolver_bytes={z.resolver_bytes})")
        with dhs.Context(arch, cfg, be) as ctx:
            reqs, n0 = [], []
            for uid in range(1, N + 1):
                n = int(rng.integers(200, 1500))
                say(f"{label}: open+import request {uid} ({n} rows, host rows)")
                r = ctx.open(n + 100)
                r.import_rows(n, row_bytes_of(uid, 0, np.arange(n), np.zeros(n), rb))
                reqs.append(r)
                n0.append(n)
            pool_ptr, stride = ctx.pool().ptr, ctx.row_stride
            dsel, dloc = make((N, KMAX, k)), make((1, N, KMAX, k))
            ctx.reset_stats()
            for t in range(1, 9):
                n = [r.positions for r in reqs]
                say(f"{label}: round {t}: round_begin")
                ctx.round_begin(reqs)
                for b, r in enumerate(reqs):
                    L = int(r.tail_locations(0, n[b])[0])
                    row = row_bytes_of(b + 1, 0, [n[b]], [t], rb)
                    _cuda.cudart.memcpy(pool_ptr + L * stride, row.ctypes.data, rb, be.stream)
                sel = np.full((N, KMAX, k), -1, np.int32)
                for b in range(N):
                    sel[b, 0] = rng.choice(n[b] + 1, size=k, replace=False)
                upload(dsel, sel)
                say(f"{label}: round {t}: resolve_device")
                ctx.resolve_device(0, dsel, dloc)
                say(f"{label}: round {t}: round_end")
                ctx.round_end([0] * N)
                loc = download(dloc)
                say(f"{label}: round {t}: checking {N * k} locations")
                for b in range(N):
                    for i in range(k):
                        row = int(sel[b, 0, i])
                        v = 0 if row < n0[b] else (t if row == n[b] else t - (n[b] - row))
                        got = ctx.read_location(0, int(loc[0, b, 0, i]))
                        assert np.array_equal(got, row_bytes_of(b + 1, 0, [row], [v], rb)[0]), (t, b, i, row)
                say(f"{label}: round {t}: check_invariants")
                assert ctx.check_invariants() == (0, "")
            st = ctx.stats()
            say(f"{label}: resolve_calls={st.resolve_calls} misses={st.distinct_misses} census_host={st.census_host}")
            assert st.resolve_calls == 8 and st.distinct_misses > 0
            for r in reqs:
                r.close()


@cuda
def test_cuda_resolve_device_raw_buffers():
    def upload(buf, a):
        buf.upload(a)

    _dres_on_device(lambda shape: DeviceBuffer(shape, np.int32), upload, lambda buf: buf.download(), None, "raw")


@cuda
def test_cuda_resolve_device_torch_tensors():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    s = torch.cuda.Stream()

    def upload(t, a):
        with torch.cuda.stream(s):
            t.copy_(torch.from_numpy(a).to("cuda", non_blocking=False))
        s.synchronize()

    def download(t):
        s.synchronize()
        return t.cpu().numpy()

    with torch.cuda.stream(s):
        _dres_on_device(lambda shape: torch.zeros(shape, dtype=torch.int32, device="cuda"), upload, download, s,
                        "torch")
