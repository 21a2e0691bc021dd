"""The Pythonic surface over libdhs: configs, backends, contexts, requests, rounds.

Host buffers (CPU backend, and host-side selections/locations on any backend)
are numpy arrays. On the CUDA backend, rows to import/write may be device
arrays, and selections/locations may be device int32 arrays: the resolver's
plan runs on the host (docs/CUDA.md), so such selections are copied to the host
on the backend's compute stream first and the locations copied back on it.
"""
import ctypes
import weakref
from dataclasses import dataclass, field, fields, make_dataclass
from enum import IntEnum

import numpy as np

from . import _lib
from . import _cuda
from .errors import DhsError, Wait, check, error_for

__all__ = ["ConsumerKind", "Policy", "Resolver", "ReclaimOrder", "FaultKind", "SourceDesc", "ConsumerDesc", "Arch", "Config",
           "Sizes", "Stats", "Mem", "config_sizes", "Backend", "CpuBackend", "CudaBackend", "cuda_available",
           "Context", "Request", "Round", "ring_rows", "ring_bytes", "ring_row", "staging_bytes", "SpecSchedule", "SpecAuto"]


# ------------------------------------------------------------------ enums
class ConsumerKind(IntEnum):
    OWN = 0
    FOLLOW = 1
    REUSE = 2
    REINDEX = 3


class Policy(IntEnum):
    LRU = 0
    CLOCK = 1
    FIFO = 2
    LFU = 3

    def __str__(self):
        return _lib.dhs_policy_str(int(self)).decode()


class Resolver(IntEnum):
    """dhs_resolver: where the per-layer resolver runs (docs/API.md, "Device resolver")."""
    HOST = 0
    DEVICE = 1

    def __str__(self):
        return _lib.dhs_resolver_str(int(self)).decode()


class ReclaimOrder(IntEnum):
    MOST_PAGES = 0
    OLDEST = 1
    NEWEST = 2

    def __str__(self):
        return _lib.dhs_reclaim_order_str(int(self)).decode()


class FaultKind(IntEnum):
    HOST_ALLOC = 0
    DEVICE_ALLOC = 1
    COPY = 2


# ------------------------------------------------------------------ configs
@dataclass
class SourceDesc:
    """dhs_source_desc: rows of row_bytes bytes (multiple of 16), each covering m positions."""
    row_bytes: int
    m: int = 1
    group: int = 0


@dataclass
class ConsumerDesc:
    """dhs_consumer_desc: a layer reading `source` with the selection of `group`."""
    kind: ConsumerKind
    source: int
    group: int


_C_ARCH = _lib.dhs_arch_default()
_C_CONFIG = _lib.dhs_config_default()


def _default_sources():
    a = _lib.dhs_arch_default()
    return [SourceDesc(s.row_bytes, s.m, s.group) for s in a.sources[:a.n_sources]]


def _default_consumers():
    a = _lib.dhs_arch_default()
    return [ConsumerDesc(ConsumerKind(c.kind), c.source, c.group) for c in a.consumers[:a.n_consumers]]


@dataclass
class Arch:
    """dhs_arch. Defaults are dhs_arch_default()'s (read from the library at import)."""
    n_groups: int = _C_ARCH.n_groups
    sources: list = field(default_factory=_default_sources)
    consumers: list = field(default_factory=_default_consumers)
    index_key_bytes: int = _C_ARCH.index_key_bytes

    def to_c(self):
        if len(self.sources) > _lib.DHS_MAX_SOURCES:
            raise ValueError(f"at most {_lib.DHS_MAX_SOURCES} sources")
        if len(self.consumers) > _lib.DHS_MAX_CONSUMERS:
            raise ValueError(f"at most {_lib.DHS_MAX_CONSUMERS} consumers")
        a = _lib.dhs_arch()
        a.n_groups = self.n_groups
        a.n_sources = len(self.sources)
        for i, s in enumerate(self.sources):
            a.sources[i] = _lib.dhs_source_desc(s.row_bytes, s.m, s.group)
        a.n_consumers = len(self.consumers)
        for i, c in enumerate(self.consumers):
            a.consumers[i] = _lib.dhs_consumer_desc(int(c.kind), c.source, c.group)
        a.index_key_bytes = self.index_key_bytes
        return a

    def validate(self):
        """Raises InvalidArgError when dhs_arch_validate refuses it."""
        a = self.to_c()
        check(_lib.dhs_arch_validate(ctypes.byref(a)), "dhs_arch_validate")

    def group_sources(self, group):
        """Indices of the sources of `group`, in arch order (the order of a resolve's location vectors)."""
        return [i for i, s in enumerate(self.sources) if s.group == group]


_ENUM_FIELDS = {"policy": Policy, "reclaim_order": ReclaimOrder, "resolver": Resolver}


# array fields of dhs_config: a Python list of at most DHS_MAX_SOURCES ints, the rest 0
# (group_hot_rows: entry g is group g's hot-cache rows, 0 = hot_rows; [] = one size for every group)
_LIST_FIELDS = ("group_hot_rows",)


def _config_fields():
    out = []
    for name, _ in _lib.dhs_config._fields_:
        v = getattr(_C_CONFIG, name)
        if name in _LIST_FIELDS:
            default = [int(x) for x in v]
            while default and default[-1] == 0:
                default.pop()
            out.append((name, list, field(default_factory=lambda d=tuple(default): list(d))))
            continue
        typ = _ENUM_FIELDS.get(name, int)
        out.append((name, typ, field(default=typ(v))))
    return out


def _config_to_c(self):
    c = _lib.dhs_config()
    for f in fields(self):
        v = getattr(self, f.name)
        if f.name in _LIST_FIELDS:
            v = list(v)
            if len(v) > _lib.DHS_MAX_SOURCES:
                raise ValueError(f"{f.name}: at most {_lib.DHS_MAX_SOURCES} entries, got {len(v)}")
            arr = getattr(c, f.name)
            for i, x in enumerate(v):
                arr[i] = int(x)
            continue
        setattr(c, f.name, int(v))
    return c


# dhs_config: every field of the C struct, defaults from dhs_config_default().
Config = make_dataclass("Config", _config_fields(), namespace={
    "to_c": _config_to_c,
    "__doc__": "dhs_config; field for field, with dhs_config_default()'s values (read from the library).",
})


def _struct_dataclass(name, cstruct, doc):
    cls = make_dataclass(name, [(n, int) for n, _ in cstruct._fields_], frozen=True)
    cls.__doc__ = doc
    cls.from_c = classmethod(lambda k, s: k(**{n: getattr(s, n) for n, _ in cstruct._fields_}))
    return cls


Sizes = _struct_dataclass("Sizes", _lib.dhs_sizes, "dhs_sizes: what a context reserves besides optional history.")
Stats = _struct_dataclass("Stats", _lib.dhs_stats, "dhs_stats: counters since creation or the last reset.")
Mem = _struct_dataclass("Mem", _lib.dhs_mem, "dhs_mem: pool and memory figures, bytes.")


def config_sizes(arch=None, config=None):
    """dhs_config_sizes: the reservations of a context with this arch and config."""
    a = (arch or Arch()).to_c()
    c = (config or Config()).to_c()
    z = _lib.dhs_sizes()
    check(_lib.dhs_config_sizes(ctypes.byref(a), ctypes.byref(c), ctypes.byref(z)), "dhs_config_sizes")
    return Sizes.from_c(z)


def ring_rows(window, spec_width, page_rows):
    return _lib.dhs_ring_rows(window, spec_width, page_rows)


def ring_bytes(window, spec_width, page_rows, slots, bytes_per_draft_row):
    return _lib.dhs_ring_bytes(window, spec_width, page_rows, slots, bytes_per_draft_row)


def ring_row(ring_rows_, slot, t):
    return _lib.dhs_ring_row(ring_rows_, slot, t)


def staging_bytes(live_sources, slots, spec_width, k, row_bytes):
    return _lib.dhs_staging_bytes(live_sources, slots, spec_width, k, row_bytes)


class SpecSchedule:
    """dhs_spec_schedule: block width K by load. SpecSchedule() is the default; SpecSchedule("8@0,6@33")."""

    def __init__(self, text=None):
        self._s = _lib.dhs_spec_schedule_default()
        if text is not None:
            s = _lib.dhs_spec_schedule()
            if _lib.dhs_spec_schedule_parse(text.encode(), ctypes.byref(s)) != 0:
                raise ValueError(f"bad schedule {text!r} (want width@min_sessions,... ascending)")
            self._s = s

    def width(self, sessions):
        return _lib.dhs_spec_width(ctypes.byref(self._s), sessions)

    @property
    def steps(self):
        return [(self._s.width[i], self._s.min_sessions[i]) for i in range(self._s.n_steps)]


class SpecAuto:
    """dhs_spec_auto: the speculation width chosen online (include/dhs_spec_auto.h).

    sa = SpecAuto(max_slots, spec_max=8, prior_accept=0.6, prior_weight=4, decay=0.95)
    sa.reset(slot); sa.observe(slot, K, accepted); sa.estimate(slot)
    K, tokens_per_us = sa.choose(slots, query_us, fixed_us, draft_us, cap=None)
    the miss cost: sa.observe_round(requests, queries, host_rows, copy_us=-1); sa.set_row_us(us);
    first_rows, extra_rows, row_us = sa.miss_model()
    K, tokens_per_us = sa.choose_round(slots, query_us, fixed_us, draft_us, room_rows=-1, cap=None)
    """

    def __init__(self, max_slots, spec_max=None, prior_accept=None, prior_weight=None, decay=None):
        cfg = _lib.dhs_spec_auto_cfg_default(max_slots)
        for name, v in (("spec_max", spec_max), ("prior_accept", prior_accept), ("prior_weight", prior_weight),
                        ("decay", decay)):
            if v is not None:
                setattr(cfg, name, v)
        h = ctypes.c_void_p()
        check(_lib.dhs_spec_auto_create(ctypes.byref(cfg), ctypes.byref(h)), "dhs_spec_auto_create")
        self._h = h
        self.max_slots = cfg.max_slots
        self.spec_max = cfg.spec_max

    def close(self):
        if self._h:
            _lib.dhs_spec_auto_destroy(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        self.close()

    def reset(self, slot):
        check(_lib.dhs_spec_auto_reset(self._h, slot), "dhs_spec_auto_reset")

    def observe(self, slot, K, accepted):
        check(_lib.dhs_spec_auto_observe(self._h, slot, K, accepted), "dhs_spec_auto_observe")

    def estimate(self, slot):
        a = ctypes.c_double()
        check(_lib.dhs_spec_auto_estimate(self._h, slot, ctypes.byref(a)), "dhs_spec_auto_estimate")
        return a.value

    def _choose(self, fn, name, slots, query_us, fixed_us, draft_us, cap, room=()):
        """the two choose calls: their arguments checked alike, room_rows (choose_round) before K"""
        sl = _host_i32(slots, "slots")
        n = sl.shape[0]
        q = np.ascontiguousarray(np.asarray(query_us, dtype=np.float64))
        if q.shape != (n,):
            raise ValueError(f"query_us: shape {q.shape}, expected ({n},)")
        cp = None if cap is None else _host_i32(cap, "cap", (n,))
        K = np.empty(n, dtype=np.int32)
        tpu = ctypes.c_double()
        i32 = ctypes.POINTER(ctypes.c_int32)
        check(fn(self._h, n, sl.ctypes.data_as(i32), None if cp is None else cp.ctypes.data_as(i32),
                 q.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), fixed_us, draft_us, *room,
                 K.ctypes.data_as(i32), ctypes.byref(tpu)), name)
        return K, tpu.value

    def choose(self, slots, query_us, fixed_us, draft_us, cap=None):
        return self._choose(_lib.dhs_spec_auto_choose, "dhs_spec_auto_choose", slots, query_us, fixed_us, draft_us, cap)

    def observe_round(self, requests, queries, host_rows, copy_us=-1.0):
        check(_lib.dhs_spec_auto_observe_round(self._h, requests, queries, host_rows, copy_us),
              "dhs_spec_auto_observe_round")

    def set_row_us(self, row_us):
        check(_lib.dhs_spec_auto_set_row_us(self._h, row_us), "dhs_spec_auto_set_row_us")

    def miss_model(self):
        f, e, r = ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
        check(_lib.dhs_spec_auto_miss_model(self._h, ctypes.byref(f), ctypes.byref(e), ctypes.byref(r)),
              "dhs_spec_auto_miss_model")
        return f.value, e.value, r.value

    def choose_round(self, slots, query_us, fixed_us, draft_us, room_rows=-1.0, cap=None):
        return self._choose(_lib.dhs_spec_auto_choose_round, "dhs_spec_auto_choose_round", slots, query_us, fixed_us,
                            draft_us, cap, (room_rows,))


# ------------------------------------------------------------------ buffers
def _host_i32(a, what, shape=None):
    """A C-contiguous int32 numpy array of `a` (a copy only when needed)."""
    arr = np.asarray(a)
    if arr.dtype != np.int32:
        if arr.dtype.kind not in "iu" and arr.size:
            raise TypeError(f"{what}: dtype {arr.dtype}, expected int32")
        if arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            raise ValueError(f"{what}: values outside int32")
        arr = arr.astype(np.int32)
    arr = np.ascontiguousarray(arr)
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{what}: shape {arr.shape}, expected {shape}")
    return arr


def _host_rows(rows, n_rows, row_bytes, what):
    """A C-contiguous, DHS_ALIGN-aligned byte view of n_rows rows of row_bytes."""
    arr = np.asarray(rows)
    if not isinstance(rows, np.ndarray) and arr.dtype == object:
        raise TypeError(f"{what}: expected an array of row bytes, got {type(rows).__name__}")
    nbytes = arr.size * arr.dtype.itemsize
    if nbytes != n_rows * row_bytes:
        raise ValueError(f"{what}: {nbytes} bytes, expected {n_rows} rows x {row_bytes} bytes = {n_rows * row_bytes}")
    if not arr.flags.c_contiguous or arr.ctypes.data % _lib.DHS_ALIGN:
        buf = _aligned_empty(nbytes)
        buf[:] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        arr = buf
    return arr


def _aligned_empty(nbytes, align=64):
    raw = np.empty(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


def _ptr(arr):
    return ctypes.c_void_p(arr.ctypes.data) if arr.size else ctypes.c_void_p(arr.ctypes.data or 0)


# ------------------------------------------------------------------ backends
class Backend:
    """A dhs_backend. Use as a context manager, or call close(). Contexts built on
    it keep it alive; close() refuses while any is open."""

    payload_free = False  # a CpuBackend(payload_free=True) moves no bytes: placement simulation only

    def __init__(self, handle):
        self._h = handle
        self._contexts = weakref.WeakSet()

    @property
    def handle(self):
        if not self._h:
            raise ValueError("backend is closed")
        return self._h

    @property
    def name(self):
        return _lib.dhs_backend_name(self.handle).decode()

    def fault_at(self, kind, nth):
        """Makes the nth (1-based) call of `kind` (FaultKind) from now fail; 0 disarms."""
        _lib.dhs_backend_fault_at(self.handle, int(kind), int(nth))

    def disarm_faults(self):
        for k in FaultKind:
            self.fault_at(k, 0)

    @property
    def faults_injected(self):
        return _lib.dhs_backend_faults_injected(self.handle)

    def close(self):
        if self._h:
            open_ctx = [c for c in self._contexts if c._h]
            if open_ctx:
                raise ValueError(f"backend still used by {len(open_ctx)} open context(s): close them first")
            _lib.dhs_backend_destroy(self._h)
            self._h = None

    @property
    def closed(self):
        return not self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self._h and not any(c._h for c in self._contexts):
                _lib.dhs_backend_destroy(self._h)
                self._h = None
        except Exception:
            pass

    is_cuda = False


class CpuBackend(Backend):
    """The CPU reference backend ("device" memory is host memory emulating it).
    payload_free=True: a backend that moves no bytes; contexts on it simulate placement only
    (every decision, status, location and statistic as with a payload)."""

    def __init__(self, async_delay=0, random_order=False, seed=0, payload_free=False):
        opt = _lib.dhs_cpu_options(int(async_delay), int(bool(random_order)), int(seed), int(bool(payload_free)))
        self.payload_free = bool(payload_free)
        h = ctypes.c_void_p()
        check(_lib.dhs_backend_cpu_create(ctypes.byref(opt), ctypes.byref(h)), "dhs_backend_cpu_create")
        super().__init__(h.value)


class CudaBackend(Backend):
    """The CUDA backend on `device`. Raises UnsupportedError without a CUDA build or device."""
    is_cuda = True

    def __init__(self, device=0):
        h = ctypes.c_void_p()
        check(_lib.dhs_backend_cuda_create(int(device), ctypes.byref(h)), "dhs_backend_cuda_create")
        super().__init__(h.value)
        self.device = int(device)
        self._stream_ref = None

    @property
    def stream(self):
        """The compute stream (cudaStream_t as int): gathers run here; launch attention here."""
        return _lib.dhs_cuda_stream(self.handle) or 0

    @property
    def side_stream(self):
        return _lib.dhs_cuda_side_stream(self.handle) or 0

    def set_stream(self, stream):
        """Makes the engine's stream (int handle, torch.cuda.Stream, __cuda_stream__ object) the compute
        stream; None restores the backend's own. The object is referenced until replaced."""
        h = _cuda.stream_handle(stream)
        check(_lib.dhs_cuda_set_stream(self.handle, h), "dhs_cuda_set_stream")
        self._stream_ref = stream

    def set_gather_blocks(self, max_blocks):
        check(_lib.dhs_cuda_set_gather_blocks(self.handle, int(max_blocks)), "dhs_cuda_set_gather_blocks")

    def set_copy_queue_blocks(self, blocks):
        """Thread blocks of each copy on the split resolve's queue (0: the default, a quarter of the SMs)."""
        check(_lib.dhs_cuda_set_copy_queue_blocks(self.handle, int(blocks)), "dhs_cuda_set_copy_queue_blocks")

    def set_marker(self, fn):
        """Profiling hook (docs/CUDA.md): fn(mark) is called on the host while the device resolver issues
        its kernels (mark 1: before the plan kernel, 2: between plan and copy, 3: after); record a CUDA
        event on the compute stream there. None turns it off. The callback is referenced until replaced."""
        cb = _lib.dhs_cuda_mark_fn() if fn is None else _lib.dhs_cuda_mark_fn(lambda _user, mark: fn(int(mark)))  # () = NULL
        check(_lib.dhs_cuda_set_marker(self.handle, cb, None), "dhs_cuda_set_marker")
        self._marker_ref = cb

    @property
    def last_error(self):
        """The cudaError_t behind the last BackendError / DeviceNoMemError, 0 if none."""
        return _lib.dhs_cuda_last_error(self.handle)


def cuda_available(device=0):
    """True when this libdhs has the CUDA backend and `device` exists."""
    h = ctypes.c_void_p()
    if _lib.dhs_backend_cuda_create(int(device), ctypes.byref(h)) != 0:
        return False
    _lib.dhs_backend_destroy(h)
    return True


# ------------------------------------------------------------------ context
class Request:
    """An admitted request (dhs_req). A context manager: leaving the block closes it."""

    def __init__(self, ctx, handle):
        self._ctx = ctx
        self._h = handle
        self.closed = False

    @property
    def handle(self):
        return self._h

    def __repr__(self):
        return f"Request(id={self._h.id}, gen={self._h.gen}{', closed' if self.closed else ''})"

    @property
    def positions(self):
        """Committed positions n_r."""
        n = ctypes.c_int64()
        check(_lib.dhs_request_positions(self._ctx.handle, self._h, ctypes.byref(n)), "dhs_request_positions")
        return n.value

    def import_rows(self, n_positions, rows, device=None):
        """dhs_request_import: `rows` is one array per source (a single array for a
        one-source arch) of ceil(n_positions / m) rows of row_bytes. device=True: the
        rows are device-tier buffers (prefill output; DHS_IMPORT_DEVICE), False: host
        (DHS_IMPORT_HOST); None: True for CUDA device arrays, else False."""
        self._ctx._import(self, n_positions, rows, device)

    def import_begin(self, n_positions):
        """dhs_request_import_begin (DHS_IMPORT_HOST): the host rows a transport fills, one
        writable numpy uint8 array per source of shape (ceil(n_positions / m), row_bytes)
        (rows dhs_pool_row_stride apart in the library's pinned memory), or None for a
        source with no row (and on a payload-free backend). Valid until import_commit,
        import_abort or close; then import_commit() or import_abort()."""
        return self._ctx._import_begin(self, n_positions)

    def import_commit(self):
        """dhs_request_import_commit: completes the open import as import_rows(device=False)."""
        check(_lib.dhs_request_import_commit(self._ctx.handle, self._h), "dhs_request_import_commit")

    def import_abort(self):
        """dhs_request_import_abort: the request is again as before import_begin."""
        check(_lib.dhs_request_import_abort(self._ctx.handle, self._h), "dhs_request_import_abort")

    def write_rows(self, source, first_row, rows):
        self._ctx.write_rows(self, source, first_row, rows)

    def tail_locations(self, source, first_row, n_rows=1, out=None):
        """Context.tail_locations for this request."""
        return self._ctx.tail_locations(self, source, first_row, n_rows, out)

    def close(self):
        if not self.closed:
            check(_lib.dhs_request_close(self._ctx.handle, self._h), "dhs_request_close")
            self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.closed and self._ctx._h:
            self.close()


class Round:
    """An open round (from Context.round). Leaving the block without an exception
    ends the round with `accepted` (set it, or call end(); default: 0 for every request)."""

    def __init__(self, ctx, reqs, K):
        self.ctx = ctx
        self.reqs = list(reqs)
        self.K = list(K)
        self.accepted = None
        self.ended = False

    def end(self, accepted=None):
        self.ctx.round_end(accepted if accepted is not None else [0] * len(self.reqs))
        self.ended = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None and not self.ended and self.ctx._round is not None:
            self.end(self.accepted)
        # on an exception the round stays open: the C API has no abort; the caller decides


class Context:
    """A dhs_ctx on a backend. Context manager: leaving the block destroys it (every
    byte on both tiers freed). Not thread-safe: one thread drives it."""

    def __init__(self, arch=None, config=None, backend=None):
        self.arch = arch if arch is not None else Arch()
        self.config = config if config is not None else Config()
        if backend is None:
            raise ValueError("a backend is required (CpuBackend() or CudaBackend())")
        self.backend = backend
        a = self.arch.to_c()
        c = self.config.to_c()
        h = ctypes.c_void_p()
        check(_lib.dhs_ctx_create(ctypes.byref(a), ctypes.byref(c), backend.handle, ctypes.byref(h)), "dhs_ctx_create")
        self._h = h.value
        backend._contexts.add(self)
        self._row_bytes = [s.row_bytes for s in self.arch.sources]
        self._m = [s.m for s in self.arch.sources]
        self._gsrc = [self.arch.group_sources(g) for g in range(self.arch.n_groups)]
        self._round = None  # (reqs ids, K) of the open round as this wrapper saw it

    # ---- lifecycle
    @property
    def handle(self):
        if not self._h:
            raise ValueError("context is closed")
        return self._h

    def close(self):
        if self._h:
            _lib.dhs_ctx_destroy(self._h)
            self._h = None

    @property
    def closed(self):
        return not self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- pool
    @property
    def row_stride(self):
        return _lib.dhs_pool_row_stride(self.handle)

    def pool_rows(self, source=0):
        return _lib.dhs_source_pool_rows(self.handle, source)

    def pool(self, source=0):
        """The pool every location indexes, as [pool_rows, row_stride] uint8: a read-only
        numpy view on the CPU backend, a DevicePool (__cuda_array_interface__) on CUDA.
        Source s uses the first row_bytes of each row. Invalid after close()."""
        p = _lib.dhs_source_pool(self.handle, source)
        rows = self.pool_rows(source)
        if not p or rows <= 0:
            raise error_for(-7 if not (0 <= source < len(self.arch.sources)) else -12, "dhs_source_pool",
                            "no pool (unknown source, or a payload-free backend)")
        stride = self.row_stride
        if self.backend.is_cuda:
            return _cuda.DevicePool(p, rows, stride, self.backend.stream, self)
        buf = (ctypes.c_uint8 * (rows * stride)).from_address(p)
        arr = np.ctypeslib.as_array(buf).reshape(rows, stride)
        arr.flags.writeable = False
        return arr

    def read_location(self, source, loc):
        """The row_bytes bytes at location `loc` of `source` (dhs_read_location), as uint8[row_bytes]."""
        if not 0 <= source < len(self._row_bytes):
            raise error_for(-7, "dhs_read_location", f"source {source}")
        out = _aligned_empty(self._row_bytes[source])
        check(_lib.dhs_read_location(self.handle, source, int(loc), _ptr(out)), "dhs_read_location",
              f"source {source} location {loc}")
        return out

    # ---- requests
    def try_open(self, expected_positions):
        """Admits a request; None when the answer is DHS_WAIT (nothing changed)."""
        r = _lib.dhs_req()
        s = _lib.dhs_request_open(self.handle, int(expected_positions), ctypes.byref(r))
        if s == 1:
            return None
        check(s, "dhs_request_open")
        return Request(self, r)

    def open(self, expected_positions):
        """Admits a request; raises Wait when capacity is short (nothing changed)."""
        r = self.try_open(expected_positions)
        if r is None:
            raise Wait(1, "dhs_request_open", "retry after a close or a round")
        return r

    def try_open_shared(self, parent, prefix_positions, expected_positions=0):
        """dhs_request_open_shared: a request whose first prefix_positions positions are
        the committed positions of `parent` (a Request), sharing its pinned host rows and
        device pages (docs/API.md "Shared prefixes"); None when the answer is DHS_WAIT."""
        r = _lib.dhs_req()
        s = _lib.dhs_request_open_shared(self.handle, parent.handle, int(prefix_positions), int(expected_positions),
                                         ctypes.byref(r))
        if s == 1:
            return None
        check(s, "dhs_request_open_shared", f"prefix {prefix_positions}")
        req = Request(self, r)
        req._shared = int(prefix_positions)  # its first import holds only the rows after the prefix
        return req

    def open_shared(self, parent, prefix_positions, expected_positions=0):
        """As try_open_shared; raises Wait when capacity is short (nothing changed)."""
        r = self.try_open_shared(parent, prefix_positions, expected_positions)
        if r is None:
            raise Wait(1, "dhs_request_open_shared", "retry after a close or a round")
        return r

    def _import(self, req, n_positions, rows, device):
        ns = len(self.arch.sources)
        if ns == 1 and not isinstance(rows, (list, tuple)):
            rows = [rows]
        if len(rows) != ns:
            raise ValueError(f"rows: {len(rows)} arrays, expected one per source ({ns})")
        n_positions = int(n_positions)
        if n_positions < 0:
            raise error_for(-8, "dhs_request_import", f"n_positions {n_positions}")
        keep, ptrs = [], (ctypes.c_void_p * max(ns, 1))()
        any_dev = False
        # a request opened on a shared prefix, before its first round: the rows from floor(prefix / m) on
        shared = getattr(req, "_shared", 0)
        if shared and req.positions != shared:
            shared = 0
        for s, r in enumerate(rows):
            nr = -(-n_positions // self._m[s]) - (shared // self._m[s] if n_positions >= shared else 0)
            if r is None and self.backend.payload_free:
                ptrs[s] = None
                continue
            if _cuda.is_device_array(r):
                if not self.backend.is_cuda:
                    raise TypeError(f"rows[{s}]: a CUDA device array given to a {self.backend.name} backend")
                v = _cuda.device_view(r, device=self.backend.device, stream=self.backend.stream, what=f"rows[{s}]")
                if v.nbytes != nr * self._row_bytes[s]:
                    raise ValueError(f"rows[{s}]: {v.nbytes} bytes, expected {nr} rows x {self._row_bytes[s]}")
                keep.append(v)
                ptrs[s] = v.ptr
                any_dev = True
            else:
                a = _host_rows(r, nr, self._row_bytes[s], f"rows[{s}]")
                keep.append(a)
                ptrs[s] = a.ctypes.data if a.size else None
        if device is None:
            device = any_dev
        flags = _lib.DHS_IMPORT_DEVICE if device else _lib.DHS_IMPORT_HOST
        check(_lib.dhs_request_import(self.handle, req.handle, n_positions, ptrs, flags), "dhs_request_import")

    def _import_begin(self, req, n_positions):
        ns = len(self.arch.sources)
        n_positions = int(n_positions)
        if n_positions < 0:
            raise error_for(-8, "dhs_request_import_begin", f"n_positions {n_positions}")
        ptrs = (ctypes.c_void_p * max(ns, 1))()
        check(_lib.dhs_request_import_begin(self.handle, req.handle, n_positions, _lib.DHS_IMPORT_HOST, ptrs),
              "dhs_request_import_begin")
        stride = _lib.dhs_pool_row_stride(self.handle)
        out = []
        for s in range(ns):
            nr = -(-n_positions // self._m[s])
            if not ptrs[s]:
                out.append(None)
                continue
            buf = (ctypes.c_uint8 * (nr * stride)).from_address(ptrs[s])
            a = np.frombuffer(buf, np.uint8).reshape(nr, stride)[:, :self._row_bytes[s]]
            out.append(a)
        return out

    # ---- rounds
    def round_begin(self, reqs, K=None):
        """Opens a round for `reqs` with K[i] queries each (default 1)."""
        reqs = list(reqs)
        n = len(reqs)
        K = [1] * n if K is None else [int(x) for x in K]
        if len(K) != n:
            raise ValueError(f"K: {len(K)} values for {n} requests")
        ha = (_lib.dhs_req * max(n, 1))(*[r.handle for r in reqs])
        ka = (ctypes.c_int32 * max(n, 1))(*K)
        check(_lib.dhs_round_begin(self.handle, n, ha, ka), "dhs_round_begin")
        self._round = ([(r.handle.id, r.handle.gen) for r in reqs], K)

    def round(self, reqs, K=None):
        """round_begin, as a context manager ending the round on a normal exit."""
        self.round_begin(reqs, K)
        return Round(self, reqs, K if K is not None else [1] * len(list(reqs)))

    def round_end(self, accepted=None, early=False):
        """dhs_round_end; early=True: dhs_round_end_early, the same commit without waiting for the device
        (device resolver: a bad entry of the round is raised by the next round_begin, or, when the device
        still runs the round's step, by the round_begin after the next early end, round_end or sync;
        docs/API.md, "The round end under the step")."""
        n = len(self._round[0]) if self._round else 0
        acc = [0] * n if accepted is None else [int(a) for a in accepted]
        if self._round is not None and len(acc) != n:
            raise ValueError(f"accepted: {len(acc)} values for the round's {n} requests")
        aa = (ctypes.c_int32 * max(len(acc), 1))(*acc)
        if early:
            check(_lib.dhs_round_end_early(self.handle, aa), "dhs_round_end_early")
        else:
            check(_lib.dhs_round_end(self.handle, aa), "dhs_round_end")
        self._round = None

    def group_done(self, group):
        check(_lib.dhs_group_done(self.handle, int(group)), "dhs_group_done")

    def write_rows(self, req, source, first_row, rows):
        """dhs_write_rows: rows [n_rows, row_bytes] (any dtype; bytes count) of `source`
        from first_row; a numpy array, or on CUDA also a device array."""
        if not 0 <= source < len(self._row_bytes):
            raise error_for(-7, "dhs_write_rows", f"source {source}")
        rb = self._row_bytes[source]
        if rows is None:
            raise TypeError("rows: None")
        if _cuda.is_device_array(rows):
            if not self.backend.is_cuda:
                raise TypeError(f"rows: a CUDA device array given to a {self.backend.name} backend")
            v = _cuda.device_view(rows, device=self.backend.device, stream=self.backend.stream, what="rows")
            if v.nbytes % rb:
                raise ValueError(f"rows: {v.nbytes} bytes, not a whole number of {rb}-byte rows")
            n_rows, ptr, keep = v.nbytes // rb, v.ptr, v
        else:
            arr = np.asarray(rows)
            nbytes = arr.size * arr.dtype.itemsize
            if nbytes % rb:
                raise ValueError(f"rows: {nbytes} bytes, not a whole number of {rb}-byte rows")
            n_rows = nbytes // rb
            keep = _host_rows(arr, n_rows, rb, "rows")
            ptr = keep.ctypes.data if keep.size else None
        check(_lib.dhs_write_rows(self.handle, req.handle, int(source), int(first_row), int(n_rows), ptr),
              "dhs_write_rows", f"source {source} rows {first_row}..{first_row + n_rows - 1}")
        del keep

    def resolve(self, group, items, k=None, out=None, stream=None):
        """dhs_resolve for a batch: items is a list of (request, sel) with sel int32
        [K_r][k] (-1 = padding). Returns one location array per item, int32
        [n_sources_of_group][K_r][k] (pool rows, -1 for -1), in the form of the
        selections: numpy for host selections, a device array (the one passed in
        `out`) for device selections.

        out: optional list of preallocated location arrays (required for device
        selections: device int32 arrays of that shape). stream (CUDA only): make it
        the compute stream first (see CudaBackend.set_stream)."""
        items = list(items)
        n = len(items)
        if n == 0:
            raise ValueError("items: empty")
        if not 0 <= group < len(self._gsrc):
            raise error_for(-7, "dhs_resolve", f"group {group}")
        nsrc = len(self._gsrc[group])
        if stream is not None:
            if not self.backend.is_cuda:
                raise ValueError("stream: only the CUDA backend has streams")
            if _cuda.stream_handle(stream) != self.backend.stream:
                self.backend.set_stream(stream)
        if out is not None and len(out) != n:
            raise ValueError(f"out: {len(out)} arrays for {n} items")
        dev = [_cuda.is_device_array(sel) for _, sel in items]
        if any(dev) and not self.backend.is_cuda:
            raise TypeError("sel: CUDA device arrays given to a CPU backend")
        if any(dev) and not all(dev):
            raise TypeError("sel: mix of host and device selections in one call")
        host_sel, host_loc, dev_loc = [], [], []
        if dev[0]:
            if out is None:
                raise ValueError("out: device selections need preallocated device location arrays")
            st = self.backend.stream
            for i, (_, sel) in enumerate(items):
                v = _cuda.device_view(sel, dtype=np.int32, ndim=2, device=self.backend.device, stream=st,
                                      what=f"items[{i}].sel")
                lv = _cuda.device_view(out[i], dtype=np.int32, ndim=3, device=self.backend.device, stream=st,
                                       what=f"out[{i}]")
                if lv.shape != (nsrc,) + v.shape:
                    raise ValueError(f"out[{i}]: shape {lv.shape}, expected {(nsrc,) + v.shape}")
                h = np.empty(v.shape, dtype=np.int32)
                _cuda.cudart.memcpy(h.ctypes.data, v.ptr, v.nbytes, st)
                host_sel.append(h)
                host_loc.append(np.empty(lv.shape, dtype=np.int32))
                dev_loc.append(lv)
            _cuda.cudart.sync(st)  # the host plan needs the selections now
        else:
            for i, (_, sel) in enumerate(items):
                s = _host_i32(sel, f"items[{i}].sel")
                if s.ndim == 1:
                    s = s.reshape(1, -1)
                if s.ndim != 2:
                    raise ValueError(f"items[{i}].sel: {s.ndim} dimensions, expected [K][k]")
                host_sel.append(s)
                if out is not None:
                    o = out[i]
                    if not (isinstance(o, np.ndarray) and o.dtype == np.int32 and o.flags.c_contiguous
                            and o.shape == (nsrc,) + s.shape and o.flags.writeable):
                        raise ValueError(f"out[{i}]: expected a writable C-contiguous int32 array of shape "
                                         f"{(nsrc,) + s.shape}")
                    host_loc.append(o)
                else:
                    host_loc.append(np.empty((nsrc,) + s.shape, dtype=np.int32))
        kk = host_sel[0].shape[1] if k is None else int(k)
        for i, s in enumerate(host_sel):
            if s.shape[1] != kk:
                raise ValueError(f"items[{i}].sel: k = {s.shape[1]}, the call's k is {kk}")
        arr = (_lib.dhs_resolve_item * n)()
        for i, (req, _) in enumerate(items):
            arr[i].req = req.handle
            arr[i].n_queries = host_sel[i].shape[0]
            arr[i].sel = host_sel[i].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
            arr[i].loc = host_loc[i].ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        check(_lib.dhs_resolve(self.handle, int(group), kk, n, arr), "dhs_resolve", f"group {group}, {n} items, k {kk}")
        if dev_loc:
            st = self.backend.stream
            for h, lv in zip(host_loc, dev_loc):
                _cuda.cudart.memcpy(lv.ptr, h.ctypes.data, lv.nbytes, st)  # pageable: h is read before return
            return [o for o in out]
        return host_loc

    # ---- device resolver (config.resolver = Resolver.DEVICE)
    @property
    def round_size(self):
        """Requests of the open round (0 when none is open, as this wrapper saw it)."""
        return len(self._round[0]) if self._round else 0

    def tail_locations(self, req, source, first_row, n_rows, out=None):
        """dhs_tail_locations: int32 [n_rows], the pool rows (locations) where rows first_row ..
        first_row + n_rows - 1 of `source` of `req` (rows of the open round's block) go, so the
        engine's own kernel writes them in place (e.g. pool[loc] = rows). Host call, no
        synchronisation; the rows count as written for the round's commit. out: an optional
        writable C-contiguous int32 numpy array of n_rows entries."""
        if not 0 <= source < len(self._row_bytes):
            raise error_for(-7, "dhs_tail_locations", f"source {source}")
        n_rows = int(n_rows)
        if n_rows < 0:
            raise error_for(-4, "dhs_tail_locations", f"n_rows {n_rows}")
        if out is None:
            out = np.empty(max(n_rows, 0), dtype=np.int32)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.flags.c_contiguous
                  and out.flags.writeable and out.size == n_rows):
            raise ValueError(f"out: expected a writable C-contiguous int32 numpy array of {n_rows} entries")
        p = out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)) if n_rows else None
        check(_lib.dhs_tail_locations(self.handle, req.handle, int(source), int(first_row), n_rows, p),
              "dhs_tail_locations", f"source {source} rows {first_row}..{first_row + n_rows - 1}")
        return out

    def round_tail_locations(self, req_stride, out=None):
        """dhs_round_tail_locations: every request of the open round and every source in one call.
        Returns int32 [n_sources, round_size, req_stride]: out[s, i, j] is the pool row of row c + j of
        source s of the round's request i (round_begin's order), c its group's committed rows, for the
        block's rows (j < K_i where every position is a row); entries past a block are left as they
        were (-1 in a new array). The rows count as written. out: an optional writable C-contiguous
        int32 numpy array of that shape."""
        n = self.round_size
        shape = (len(self._row_bytes), n, int(req_stride))
        if out is None:
            out = np.full(shape, -1, dtype=np.int32)
        elif not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.flags.c_contiguous
                  and out.flags.writeable and out.shape == shape):
            raise ValueError(f"out: expected a writable C-contiguous int32 numpy array of shape {shape}")
        p = out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)) if out.size else None
        check(_lib.dhs_round_tail_locations(self.handle, int(req_stride), n * int(req_stride), p),
              "dhs_round_tail_locations", f"req_stride {req_stride}")
        return out

    def _round_array(self, arr, what, last, stream):
        """The [n_sources][m >= round_size][last] int32 array of a per-round device call: a device array on
        the CUDA backend, a numpy array on the CPU backend; the stream as in resolve_device. Returns its
        shape and address."""
        if stream is not None:
            if not self.backend.is_cuda:
                raise ValueError("stream: only the CUDA backend has streams")
            if _cuda.stream_handle(stream) != self.backend.stream:
                self.backend.set_stream(stream)
        if self.backend.is_cuda:
            if not _cuda.is_device_array(arr):
                raise TypeError(f"{what}: expected a CUDA device array on the CUDA backend, got {type(arr).__name__}")
            v = _cuda.device_view(arr, dtype=np.int32, ndim=3, device=self.backend.device, what=what)
            shape, ptr = v.shape, v.ptr
        else:
            if _cuda.is_device_array(arr):
                raise TypeError(f"{what}: a CUDA device array given to a {self.backend.name} backend")
            if not (isinstance(arr, np.ndarray) and arr.dtype == np.int32 and arr.flags.c_contiguous
                    and arr.ndim == 3 and arr.flags.writeable):
                raise TypeError(f"{what}: expected a writable C-contiguous 3-dimensional int32 numpy array")
            shape, ptr = arr.shape, arr.ctypes.data
        if shape[0] != len(self._row_bytes) or shape[1] < self.round_size:
            raise ValueError(f"{what}: shape {shape}, expected [{len(self._row_bytes)} (sources)]"
                             f"[m >= {self.round_size} (round size)][{last}]")
        return shape, ptr

    def round_tail_locations_device(self, loc, stream=None):
        """dhs_round_tail_locations_device: round_tail_locations written by the device into loc, int32
        [n_sources][m >= round_size][req_stride] (src_stride m * req_stride), on the compute stream
        (config.resolver = Resolver.DEVICE). On the CUDA backend loc is a device array (torch CUDA
        tensor, __cuda_array_interface__ / DLPack producer); on the CPU backend a numpy array. The
        rows count as written. stream: as in resolve_device. Returns loc."""
        lshape, lp = self._round_array(loc, "loc", "req_stride", stream)
        rs = int(lshape[2])
        check(_lib.dhs_round_tail_locations_device(self.handle, rs, int(lshape[1]) * rs,
                                                   ctypes.cast(lp, ctypes.POINTER(ctypes.c_int32)) if lp else None),
              "dhs_round_tail_locations_device", f"req_stride {rs}")
        return loc

    def round_page_tables_device(self, tab, stream=None):
        """dhs_round_page_tables_device: the open round's page tables written by the device into tab, int32
        [n_sources][m >= round_size][page_stride] (src_stride m * page_stride): entry [s][i][P] is the pool
        page holding logical page P of request i's rows of source s wherever the round serves them directly,
        -1 elsewhere; a group for which round_may_miss is False has every page. Device or numpy array as in
        round_tail_locations_device. Returns tab."""
        tshape, tp = self._round_array(tab, "tab", "page_stride", stream)
        ps = int(tshape[2])
        check(_lib.dhs_round_page_tables_device(self.handle, ps, int(tshape[1]) * ps,
                                                ctypes.cast(tp, ctypes.POINTER(ctypes.c_int32)) if tp else None),
              "dhs_round_page_tables_device", f"page_stride {ps}")
        return tab

    def resolve_device(self, group, sel, loc, stream=None, split=False):
        """dhs_resolve_device: the graph-capturable per-layer resolve of the whole open round
        (config.resolver = Resolver.DEVICE). No host synchronisation, nothing read back; bad
        entries and staging exhaustion surface at round_end (docs/API.md, "Device resolver").

        sel: int32 [n >= round_size][spec_width][k], row b = the request at position b of round_begin's
             list (-1 = padding; rows past the round are never read);
        loc: int32 [n_sources_of_group][max_requests][spec_width][k], written on the compute stream
             (rows past the round get -1).
        On the CUDA backend both are device arrays (torch CUDA tensors as they are, or any
        __cuda_array_interface__ / DLPack producer); on the CPU backend, numpy arrays (its
        "device" tier is host memory). stream (CUDA only): make it the compute stream first (see
        CudaBackend.set_stream; do that before a graph capture, not inside it).
        split=True: the DHS_RESOLVE_SPLIT flag (overlapped recovery): the rows of the group's sources
        si >= 1 land only for work issued after source_wait(group, si). Returns loc."""
        if not 0 <= group < len(self._gsrc):
            raise error_for(-7, "dhs_resolve_device", f"group {group}")
        if stream is not None:
            if not self.backend.is_cuda:
                raise ValueError("stream: only the CUDA backend has streams")
            if _cuda.stream_handle(stream) != self.backend.stream:
                self.backend.set_stream(stream)
        c = self.config
        nsrc = len(self._gsrc[group])
        if self.backend.is_cuda:
            for name, a in (("sel", sel), ("loc", loc)):
                if not _cuda.is_device_array(a):
                    raise TypeError(f"{name}: expected a CUDA device array on the CUDA backend, got {type(a).__name__}")
            sv = _cuda.device_view(sel, dtype=np.int32, ndim=3, device=self.backend.device, what="sel")
            lv = _cuda.device_view(loc, dtype=np.int32, ndim=4, device=self.backend.device, what="loc")
            sshape, lshape, sp, lp = sv.shape, lv.shape, sv.ptr, lv.ptr
        else:
            for name, a in (("sel", sel), ("loc", loc)):
                if _cuda.is_device_array(a):
                    raise TypeError(f"{name}: a CUDA device array given to a {self.backend.name} backend")
                if not (isinstance(a, np.ndarray) and a.dtype == np.int32 and a.flags.c_contiguous):
                    raise TypeError(f"{name}: expected a C-contiguous int32 numpy array on the CPU backend")
            if sel.ndim != 3 or loc.ndim != 4:
                raise ValueError(f"sel/loc: {sel.ndim}/{loc.ndim} dimensions, expected 3 ([n][spec_width][k]) and 4")
            if not loc.flags.writeable:
                raise ValueError("loc: read-only")
            sshape, lshape = sel.shape, loc.shape
            sp, lp = sel.ctypes.data, loc.ctypes.data
        k = sshape[2]
        if sshape[1] != c.spec_width or sshape[0] < self.round_size:
            raise ValueError(f"sel: shape {sshape}, expected [n >= {self.round_size} (round size)][{c.spec_width} (spec_width)][k]")
        if lshape != (nsrc, c.max_requests, c.spec_width, k):
            raise ValueError(f"loc: shape {lshape}, expected {(nsrc, c.max_requests, c.spec_width, k)} "
                             "([sources of the group][max_requests][spec_width][k])")
        I32P = ctypes.POINTER(ctypes.c_int32)
        flags = _lib.DHS_RESOLVE_SPLIT if split else 0
        check(_lib.dhs_resolve_device(self.handle, int(group), int(k), ctypes.cast(sp, I32P), ctypes.cast(lp, I32P), flags),
              "dhs_resolve_device", f"group {group}, k {k}" + (", DHS_RESOLVE_SPLIT" if split else ""))
        return loc

    def round_may_miss(self, group=-1):
        """dhs_round_may_miss: True when a selection of the open round may recover a row from host in
        `group` (-1: any group); False when every selectable row is direct (nothing will be copied)."""
        v = ctypes.c_int(0)
        check(_lib.dhs_round_may_miss(self.handle, int(group), ctypes.byref(v)), "dhs_round_may_miss", f"group {group}")
        return bool(v.value)

    def source_wait(self, group, si):
        """dhs_source_wait: work issued on the compute stream after this call sees the rows of source
        si (index within the group, as loc[si]) of the group's last split resolve; si = the last
        source joins the copy queue (docs/API.md, "Device resolver")."""
        check(_lib.dhs_source_wait(self.handle, int(group), int(si)), "dhs_source_wait", f"group {group}, source {si}")

    def sync(self):
        check(_lib.dhs_sync(self.handle), "dhs_sync")

    def background(self):
        """dhs_background: host work for the device's step (the tail backups that fell due), called after
        launching the step and before waiting for it, inside a round or outside one; once called, round
        ends leave those backups to it (docs/API.md, "Background work")."""
        check(_lib.dhs_background(self.handle), "dhs_background")

    # ---- figures and checks
    def stats(self):
        s = _lib.dhs_stats()
        check(_lib.dhs_get_stats(self.handle, ctypes.byref(s)), "dhs_get_stats")
        return Stats.from_c(s)

    def reset_stats(self):
        check(_lib.dhs_reset_stats(self.handle), "dhs_reset_stats")

    def host_time(self):
        """dhs_get_host_time: {phase name: (ns, calls)}, the library's own host time by phase
        since creation or reset_stats (docs/API.md section 11)."""
        n = _lib.DHS_HP_COUNT
        ns, calls = (ctypes.c_uint64 * n)(), (ctypes.c_uint64 * n)()
        check(_lib.dhs_get_host_time(self.handle, ns, calls), "dhs_get_host_time")
        return {_lib.dhs_host_phase_str(p).decode(): (int(ns[p]), int(calls[p])) for p in range(n)}

    def host_cache_fill(self, rows, count):
        """dhs_host_cache_fill: pin `count` host-row spans of `rows` rows each into the
        host-row cache ahead of imports (needs Config.host_cache_bytes)."""
        check(_lib.dhs_host_cache_fill(self.handle, rows, count), "dhs_host_cache_fill")

    def mem(self):
        m = _lib.dhs_mem()
        check(_lib.dhs_get_mem(self.handle, ctypes.byref(m)), "dhs_get_mem")
        return Mem.from_c(m)

    def check_invariants(self):
        """(violations, first message): dhs_check_invariants."""
        buf = ctypes.create_string_buffer(512)
        n = _lib.dhs_check_invariants(self.handle, buf, len(buf))
        return n, buf.value.decode(errors="replace")

    def assert_invariants(self, after=""):
        n, msg = self.check_invariants()
        if n:
            raise AssertionError(f"{n} invariant violation(s){' after ' + after if after else ''}: {msg}")
