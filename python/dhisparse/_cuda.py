"""Device arrays and streams for the CUDA backend, without a hard dependency on
torch or cupy.

A device array is any object exposing ``__cuda_array_interface__`` (torch CUDA
tensors, cupy, numba) or DLPack (``__dlpack__`` / ``__dlpack_device__``).
``device_view`` turns one into a DeviceView (pointer, shape, dtype, device) and
validates what the caller asks for: dtype, C-contiguity, device ordinal.

Streams: an int (a cudaStream_t value), None, an object with ``.cuda_stream``
(torch.cuda.Stream, cupy Stream) or with ``__cuda_stream__`` (the CUDA stream
protocol: returns (version, handle)).

The CUDA runtime is reached through ctypes (libcudart.so.*, the one libdhs.so
was linked against is already loaded by then); only cudaMemcpyAsync,
cudaStreamSynchronize, cudaPointerGetAttributes and cudaGetErrorString are
used.
"""
import ctypes
from dataclasses import dataclass

import numpy as np

__all__ = ["DeviceView", "is_device_array", "device_view", "stream_handle", "cudart", "DevicePool"]

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_DL_INT, _DL_UINT, _DL_FLOAT = 0, 1, 2


@dataclass
class DeviceView:
    ptr: int
    shape: tuple
    dtype: np.dtype
    device: int  # CUDA ordinal, -1 when unknown (resolved by cudaPointerGetAttributes)
    keepalive: object = None  # the producer object / DLPack capsule, kept while the view lives

    @property
    def nbytes(self):
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n


def is_device_array(obj):
    if _is_torch_cuda(obj) or hasattr(obj, "__cuda_array_interface__"):
        return True
    if hasattr(obj, "__dlpack_device__") and not isinstance(obj, np.ndarray):
        try:
            return obj.__dlpack_device__()[0] in (KDL_CUDA, KDL_CUDA_MANAGED)
        except Exception:
            return False
    return False


def _c_contiguous(shape, strides_bytes, itemsize):
    expect = itemsize
    for dim, st in zip(reversed(shape), reversed(strides_bytes)):
        if dim != 1 and st != expect:
            return False
        expect *= dim
    return True


# ---------------------------------------------------------------- DLPack
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dl_dtype(t):
    if t.lanes != 1:
        return None
    kind = {_DL_INT: "i", _DL_UINT: "u", _DL_FLOAT: "f"}.get(t.code)
    if kind is None or t.bits % 8:
        return None
    return np.dtype(f"<{kind}{t.bits // 8}")


def _from_dlpack(obj, stream):
    dev_type, dev_id = obj.__dlpack_device__()
    if dev_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        raise ValueError(f"DLPack tensor is on device type {dev_type}, not CUDA")
    # stream: the consumer's stream; the producer orders its pending work before it.
    # 0 is not allowed by the protocol; 1 names the legacy default stream.
    capsule = obj.__dlpack__(stream=stream if stream else 1)
    p = _capsule_get(capsule, b"dltensor")
    t = _DLManagedTensor.from_address(p).dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    dtype = _dl_dtype(t.dtype)
    if dtype is None:
        raise TypeError(f"unsupported DLPack dtype code={t.dtype.code} bits={t.dtype.bits} lanes={t.dtype.lanes}")
    if t.strides:
        strides = tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
        if not _c_contiguous(shape, strides, dtype.itemsize):
            raise ValueError("device array must be C-contiguous")
    return DeviceView(int(t.data or 0) + int(t.byte_offset), shape, dtype, int(dev_id), (obj, capsule))


def _from_cai(obj):
    cai = obj.__cuda_array_interface__
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None and not _c_contiguous(shape, tuple(strides), dtype.itemsize):
        raise ValueError("device array must be C-contiguous")
    if cai.get("mask") is not None:
        raise ValueError("masked device arrays are not supported")
    ptr = int(cai["data"][0] or 0)
    s = cai.get("stream")  # v3: the producer's stream with work pending on the data
    if s is not None and cudart.available():
        cudart.sync(int(s))
    return DeviceView(ptr, shape, dtype, -1, obj)


def _is_torch_cuda(obj):
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr") and getattr(obj, "is_cuda", False)


def _from_torch(obj):
    """A torch CUDA tensor read directly (no CUDA call: safe inside stream capture; bfloat16 and other
    dtypes numpy lacks become a void dtype of the element size, since rows count only bytes)."""
    if not obj.is_contiguous():
        raise ValueError("device array must be C-contiguous")
    name = str(obj.dtype).replace("torch.", "")
    try:
        dtype = np.dtype(name)
    except TypeError:
        dtype = np.dtype(f"V{obj.element_size()}")
    return DeviceView(int(obj.data_ptr()), tuple(int(x) for x in obj.shape), dtype, int(obj.device.index or 0), obj)


def device_view(obj, *, dtype=None, ndim=None, device=None, stream=None, what="array"):
    """Validated DeviceView of a device array.

    dtype: required numpy dtype (None: any); ndim: required rank; device:
    required CUDA ordinal (checked through the pointer's attributes when the
    interface does not say); stream: the consumer stream handed to DLPack."""
    if _is_torch_cuda(obj):
        v = _from_torch(obj)
    elif hasattr(obj, "__cuda_array_interface__"):
        v = _from_cai(obj)
    elif is_device_array(obj):
        v = _from_dlpack(obj, stream)
    else:
        raise TypeError(f"{what}: expected a CUDA device array (__cuda_array_interface__ or DLPack), got {type(obj).__name__}")
    if dtype is not None and v.dtype != np.dtype(dtype):
        raise TypeError(f"{what}: dtype {v.dtype}, expected {np.dtype(dtype)}")
    if ndim is not None and len(v.shape) != ndim:
        raise ValueError(f"{what}: {len(v.shape)} dimensions, expected {ndim}")
    if device is not None and v.nbytes:
        d = v.device if v.device >= 0 else cudart.pointer_device(v.ptr)
        if d is not None and d != device:
            raise ValueError(f"{what}: on CUDA device {d}, the backend is on device {device}")
    return v


def stream_handle(stream):
    """cudaStream_t value (int) of a stream-like object; None for None."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    if hasattr(stream, "cuda_stream"):
        return int(stream.cuda_stream)
    if hasattr(stream, "ptr"):  # cupy
        return int(stream.ptr)
    raise TypeError(f"not a CUDA stream: {type(stream).__name__}")


# ---------------------------------------------------------------- runtime
class _PointerAttributes(ctypes.Structure):
    """struct cudaPointerAttributes (driver_types.h, CUDA 11.x to 13.x). The runtime writes the whole
    struct, `reserved` included: a mirror without it (24 bytes instead of 88) let
    cudaPointerGetAttributes write 64 bytes past a Python object (the crash of bench/RESULTS.md
    run 14). python/tests/test_structs.py checks this layout against the CUDA headers when present."""
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int), ("devicePointer", ctypes.c_void_p),
                ("hostPointer", ctypes.c_void_p), ("reserved", ctypes.c_long * 8)]


# 256 spare bytes after the struct: a future runtime that grows it again overwrites padding, not the heap
class _PointerAttributesBuf(ctypes.Structure):
    _fields_ = [("a", _PointerAttributes), ("spare", ctypes.c_uint8 * 256)]


class _Cudart:
    MEMCPY_DEFAULT = 4

    def __init__(self):
        self._lib = None
        self._tried = False

    def _load(self):
        if self._tried:
            return self._lib
        self._tried = True
        for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                continue
            lib.cudaMemcpyAsync.restype = ctypes.c_int
            lib.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                            ctypes.c_void_p]
            lib.cudaStreamSynchronize.restype = ctypes.c_int
            lib.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
            lib.cudaPointerGetAttributes.restype = ctypes.c_int
            lib.cudaPointerGetAttributes.argtypes = [ctypes.POINTER(_PointerAttributes), ctypes.c_void_p]
            lib.cudaGetErrorString.restype = ctypes.c_char_p
            lib.cudaGetErrorString.argtypes = [ctypes.c_int]
            lib.cudaGetLastError.restype = ctypes.c_int
            lib.cudaGetLastError.argtypes = []
            self._lib = lib
            break
        return self._lib

    def available(self):
        return self._load() is not None

    def _check(self, err, what):
        if err:
            msg = self._lib.cudaGetErrorString(err).decode()
            raise RuntimeError(f"{what}: CUDA error {err} ({msg})")

    def memcpy(self, dst, src, nbytes, stream):
        """cudaMemcpyAsync(kind=Default) on `stream`; pageable host memory makes it
        return only once the host side has been read/written (so callers may reuse
        a pageable host buffer right after an H2D, and must sync after a D2H)."""
        lib = self._load()
        if lib is None:
            raise RuntimeError("CUDA runtime library not found")
        if nbytes:
            self._check(lib.cudaMemcpyAsync(dst, src, nbytes, self.MEMCPY_DEFAULT, stream), "cudaMemcpyAsync")

    def sync(self, stream):
        lib = self._load()
        if lib is None:
            raise RuntimeError("CUDA runtime library not found")
        self._check(lib.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def pointer_device(self, ptr):
        lib = self._load()
        if lib is None:
            return None
        buf = _PointerAttributesBuf()
        if lib.cudaPointerGetAttributes(ctypes.byref(buf.a), ptr):
            lib.cudaGetLastError()  # an unknown pointer sets the sticky-free last error; clear it
            return None
        return buf.a.device if buf.a.type in (2, 3) else None  # cudaMemoryTypeDevice / Managed


cudart = _Cudart()


class DevicePool:
    """The device pool of a CUDA context as a [rows, row_stride] uint8 device
    array (``__cuda_array_interface__`` v3): ``torch.as_tensor(pool, device="cuda")``
    views it without a copy. Valid until the context is destroyed."""

    def __init__(self, ptr, rows, stride, stream, owner):
        self._owner = owner
        self.__cuda_array_interface__ = {
            "shape": (int(rows), int(stride)),
            "typestr": "|u1",
            "data": (int(ptr), False),  # the engine only reads it; "read-only" trips some consumers
            "strides": None,
            "version": 3,
            "stream": stream if stream else None,
        }
        self.shape = (int(rows), int(stride))
        self.ptr = int(ptr)
