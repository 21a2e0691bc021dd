"""Loading libdhs.so and the ctypes mirror of include/dhs.h / include/dhs_cuda.h.

Every struct here must match the C layout exactly; python/tests/test_structs.py
compiles a C program that prints sizeof/offsetof of each struct and field and
compares them with these definitions.

Where the library is looked for, first match wins:
  1. the file named by the environment variable DHS_LIBRARY (nothing else is
     tried when it is set);
  2. libdhs.so next to this package (a wheel that ships the library);
  3. build/libdhs.so of the source tree this package sits in (python/ of the
     repository);
  4. the system loader: libdhs.so.<soversion>, then libdhs.so (ldconfig paths,
     LD_LIBRARY_PATH).
"""
import ctypes
import ctypes.util
import os
from pathlib import Path

__all__ = ["lib", "lib_path", "SOVERSION"]

SOVERSION = "0.3"  # the soname this package was written against: libdhs.so.0.3

# ------------------------------------------------------------------ constants
DHS_MAX_SOURCES = 128
DHS_MAX_CONSUMERS = 256
DHS_MAX_SCHEDULE_STEPS = 8
DHS_ALIGN = 16
DHS_IMPORT_DEVICE = 1
DHS_IMPORT_HOST = 2

c_int32 = ctypes.c_int32
c_uint32 = ctypes.c_uint32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_enum = ctypes.c_int  # C enums are int-sized (gcc, clang)


# ------------------------------------------------------------------ structs
class dhs_source_desc(ctypes.Structure):
    _fields_ = [("row_bytes", c_uint32), ("m", c_uint32), ("group", c_int32)]


class dhs_consumer_desc(ctypes.Structure):
    _fields_ = [("kind", c_enum), ("source", c_int32), ("group", c_int32)]


class dhs_arch(ctypes.Structure):
    _fields_ = [
        ("n_groups", c_int32),
        ("n_sources", c_int32),
        ("sources", dhs_source_desc * DHS_MAX_SOURCES),
        ("n_consumers", c_int32),
        ("consumers", dhs_consumer_desc * DHS_MAX_CONSUMERS),
        ("index_key_bytes", c_uint32),
    ]


class dhs_config(ctypes.Structure):
    _fields_ = [
        ("max_requests", c_int32),
        ("sel_k", c_int32),
        ("spec_width", c_int32),
        ("hot_rows", c_int32),
        ("tail_rows", c_int32),
        ("page_rows", c_int32),
        ("max_rows", c_int64),
        ("device_bytes", c_uint64),
        ("reserve_bytes", c_uint64),
        ("staging_arenas", c_int32),
        ("repop_pages", c_int32),
        ("policy", c_enum),
        ("reclaim_order", c_enum),
        ("resident_first", c_int32),
        ("resolver", c_enum),
        ("host_cache_bytes", c_uint64),
        ("copy_threads", c_int32),
        ("group_hot_rows", c_int32 * DHS_MAX_SOURCES),
        ("decoded_optional", c_int32),
    ]


class dhs_sizes(ctypes.Structure):
    _fields_ = [
        ("row_stride", c_uint32),
        ("page_bytes", c_uint64),
        ("request_bytes", c_uint64),
        ("staging_bytes", c_uint64),
        ("staging_arenas", c_int32),
        ("staging_rows_per_slot", c_int64),
        ("reserve_bytes", c_uint64),
        ("min_device_bytes", c_uint64),
        ("resolver_bytes", c_uint64),
    ]


class dhs_cpu_options(ctypes.Structure):
    _fields_ = [("async_delay", c_int32), ("random_order", c_int32), ("seed", c_uint64), ("payload_free", c_int32)]


class dhs_req(ctypes.Structure):
    _fields_ = [("id", c_uint32), ("gen", c_uint32)]


class dhs_resolve_item(ctypes.Structure):
    _fields_ = [
        ("req", dhs_req),
        ("n_queries", c_int32),
        ("sel", ctypes.POINTER(c_int32)),
        ("loc", ctypes.POINTER(c_int32)),
    ]


_STATS_FIELDS = [
    "entries", "census_direct", "census_hot", "census_host", "distinct_misses", "host_rows_copied",
    "host_bytes_copied", "backup_rows", "backup_bytes", "populate_rows", "populate_bytes", "staging_rows",
    "staging_rows_peak", "admissions", "waits", "reclaims", "reclaimed_pages", "repopulated_pages",
    "retired_pages", "rounds", "accepted", "rejected_rows", "resolve_calls",
]


class dhs_stats(ctypes.Structure):
    _fields_ = [(n, c_uint64) for n in _STATS_FIELDS]


class dhs_mem(ctypes.Structure):
    _fields_ = [
        ("pool_bytes", c_uint64),
        ("required_bytes", c_uint64),
        ("optional_bytes", c_uint64),
        ("reserve_bytes", c_uint64),
        ("device_bytes_allocated", c_uint64),
        ("host_bytes_allocated", c_uint64),
        ("pages_total", c_int64),
        ("pages_free", c_int64),
        ("requests_open", c_int32),
        ("host_bytes_cached", c_uint64),
        ("host_bytes_shared", c_uint64),
        ("device_bytes_shared", c_uint64),
    ]


class dhs_spec_schedule(ctypes.Structure):
    _fields_ = [
        ("n_steps", c_int32),
        ("min_sessions", c_int32 * DHS_MAX_SCHEDULE_STEPS),
        ("width", c_int32 * DHS_MAX_SCHEDULE_STEPS),
    ]


class dhs_spec_auto_cfg(ctypes.Structure):
    _fields_ = [
        ("max_slots", c_int32),
        ("spec_max", c_int32),
        ("prior_accept", ctypes.c_double),
        ("prior_weight", ctypes.c_double),
        ("decay", ctypes.c_double),
    ]


STRUCTS = {
    c.__name__: c
    for c in (dhs_source_desc, dhs_consumer_desc, dhs_arch, dhs_config, dhs_sizes, dhs_cpu_options, dhs_req,
              dhs_resolve_item, dhs_stats, dhs_mem, dhs_spec_schedule, dhs_spec_auto_cfg)
}


# ------------------------------------------------------------------ loading
def _candidates():
    env = os.environ.get("DHS_LIBRARY")
    if env:
        return [env], True
    here = Path(__file__).resolve().parent
    c = [str(here / "libdhs.so"), str(here / ("libdhs.so." + SOVERSION))]
    c.append(str(here.parent.parent / "build" / "libdhs.so"))
    c.append("libdhs.so." + SOVERSION)
    found = ctypes.util.find_library("dhs")
    if found:
        c.append(found)
    c.append("libdhs.so")
    return c, False


def _loaded_path(name):
    """The file the loader mapped for `name`: a bare soname found through the loader's search path (no
    directory in `name`) becomes its absolute path, read from /proc/self/maps (Linux); otherwise `name`."""
    if os.sep in name:
        return os.path.abspath(name)
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split(None, 5)[-1].strip()
                if p.startswith("/") and os.path.basename(p).startswith("libdhs.so"):
                    return p
    except OSError:
        pass
    return name


def _load():
    cands, explicit = _candidates()
    errors = []
    for path in cands:
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            return ctypes.CDLL(path), _loaded_path(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            if explicit:
                break
    raise ImportError("dhisparse: cannot load libdhs.so (set DHS_LIBRARY to its path, or build the "
                      "repository with `cmake -S . -B build && cmake --build build`): " + "; ".join(errors))


lib, lib_path = _load()

_P = ctypes.c_void_p
_CP = ctypes.c_char_p
_S = c_enum  # dhs_status
_BE = ctypes.c_void_p  # dhs_backend *
_CTX = ctypes.c_void_p  # dhs_ctx *
_I32P = ctypes.POINTER(c_int32)


def _fn(name, restype, *argtypes, optional=False):
    f = getattr(lib, name, None)
    if f is None:
        if optional:
            return None
        raise ImportError(f"dhisparse: {lib_path} lacks {name}")
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


dhs_status_str = _fn("dhs_status_str", _CP, _S)
dhs_version = _fn("dhs_version", _CP)
dhs_arch_default = _fn("dhs_arch_default", dhs_arch)
dhs_arch_validate = _fn("dhs_arch_validate", _S, ctypes.POINTER(dhs_arch))
dhs_consumer_kind_str = _fn("dhs_consumer_kind_str", _CP, c_enum)
dhs_policy_str = _fn("dhs_policy_str", _CP, c_enum)
dhs_resolver_str = _fn("dhs_resolver_str", _CP, c_enum)
dhs_policy_parse = _fn("dhs_policy_parse", _S, _CP, ctypes.POINTER(c_enum))
dhs_resolver_parse = _fn("dhs_resolver_parse", _S, _CP, ctypes.POINTER(c_enum))
dhs_reclaim_order_str = _fn("dhs_reclaim_order_str", _CP, c_enum)
dhs_config_default = _fn("dhs_config_default", dhs_config)
dhs_config_sizes = _fn("dhs_config_sizes", _S, ctypes.POINTER(dhs_arch), ctypes.POINTER(dhs_config),
                       ctypes.POINTER(dhs_sizes))
dhs_backend_cpu_create = _fn("dhs_backend_cpu_create", _S, ctypes.POINTER(dhs_cpu_options), ctypes.POINTER(_BE))
dhs_backend_cuda_create = _fn("dhs_backend_cuda_create", _S, ctypes.c_int, ctypes.POINTER(_BE))
dhs_backend_destroy = _fn("dhs_backend_destroy", None, _BE)
dhs_backend_name = _fn("dhs_backend_name", _CP, _BE)
dhs_backend_fault_at = _fn("dhs_backend_fault_at", None, _BE, c_enum, c_uint64)
dhs_backend_faults_injected = _fn("dhs_backend_faults_injected", c_uint64, _BE)
dhs_ctx_create = _fn("dhs_ctx_create", _S, ctypes.POINTER(dhs_arch), ctypes.POINTER(dhs_config), _BE,
                     ctypes.POINTER(_CTX))
dhs_ctx_destroy = _fn("dhs_ctx_destroy", None, _CTX)
dhs_source_pool = _fn("dhs_source_pool", _P, _CTX, c_int32)
dhs_source_pool_rows = _fn("dhs_source_pool_rows", c_int64, _CTX, c_int32)
dhs_pool_row_stride = _fn("dhs_pool_row_stride", c_uint32, _CTX)
dhs_request_open = _fn("dhs_request_open", _S, _CTX, c_int64, ctypes.POINTER(dhs_req))
dhs_request_open_shared = _fn("dhs_request_open_shared", _S, _CTX, dhs_req, c_int64, c_int64, ctypes.POINTER(dhs_req))
dhs_request_import = _fn("dhs_request_import", _S, _CTX, dhs_req, c_int64, ctypes.POINTER(_P), ctypes.c_uint)
dhs_request_import_begin = _fn("dhs_request_import_begin", _S, _CTX, dhs_req, c_int64, ctypes.c_uint,
                               ctypes.POINTER(_P))
dhs_request_import_commit = _fn("dhs_request_import_commit", _S, _CTX, dhs_req)
dhs_request_import_abort = _fn("dhs_request_import_abort", _S, _CTX, dhs_req)
dhs_request_close = _fn("dhs_request_close", _S, _CTX, dhs_req)
dhs_request_positions = _fn("dhs_request_positions", _S, _CTX, dhs_req, ctypes.POINTER(c_int64))
dhs_round_begin = _fn("dhs_round_begin", _S, _CTX, c_int32, ctypes.POINTER(dhs_req), _I32P)
dhs_write_rows = _fn("dhs_write_rows", _S, _CTX, dhs_req, c_int32, c_int64, c_int32, _P)
dhs_resolve = _fn("dhs_resolve", _S, _CTX, c_int32, c_int32, c_int32, ctypes.POINTER(dhs_resolve_item))
dhs_resolve_device = _fn("dhs_resolve_device", _S, _CTX, c_int32, c_int32, _I32P, _I32P, ctypes.c_uint)
DHS_RESOLVE_SPLIT = 1
dhs_source_wait = _fn("dhs_source_wait", _S, _CTX, c_int32, c_int32)
dhs_round_may_miss = _fn("dhs_round_may_miss", _S, _CTX, c_int32, ctypes.POINTER(ctypes.c_int))
dhs_tail_locations = _fn("dhs_tail_locations", _S, _CTX, dhs_req, c_int32, c_int64, c_int32, _I32P)
dhs_round_tail_locations = _fn("dhs_round_tail_locations", _S, _CTX, c_int32, c_int64, _I32P)
dhs_round_tail_locations_device = _fn("dhs_round_tail_locations_device", _S, _CTX, c_int32, c_int64, _I32P)
dhs_round_page_tables_device = _fn("dhs_round_page_tables_device", _S, _CTX, c_int32, c_int64, _I32P)
dhs_group_done = _fn("dhs_group_done", _S, _CTX, c_int32)
dhs_round_end = _fn("dhs_round_end", _S, _CTX, _I32P)
dhs_round_end_early = _fn("dhs_round_end_early", _S, _CTX, _I32P)
dhs_sync = _fn("dhs_sync", _S, _CTX)
dhs_background = _fn("dhs_background", _S, _CTX)
dhs_get_stats = _fn("dhs_get_stats", _S, _CTX, ctypes.POINTER(dhs_stats))
dhs_reset_stats = _fn("dhs_reset_stats", _S, _CTX)
dhs_get_mem = _fn("dhs_get_mem", _S, _CTX, ctypes.POINTER(dhs_mem))
dhs_host_cache_fill = _fn("dhs_host_cache_fill", _S, _CTX, c_int64, ctypes.c_int32)
DHS_HP_COUNT = 13  # dhs_host_phase's DHS_HP_COUNT_
dhs_get_host_time = _fn("dhs_get_host_time", _S, _CTX, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64))
dhs_host_phase_str = _fn("dhs_host_phase_str", ctypes.c_char_p, ctypes.c_int)
dhs_ring_rows = _fn("dhs_ring_rows", c_int64, c_int64, c_int32, c_int32)
dhs_ring_bytes = _fn("dhs_ring_bytes", c_uint64, c_int64, c_int32, c_int32, c_int32, c_uint64)
dhs_ring_row = _fn("dhs_ring_row", c_int64, c_int64, c_int32, c_int64)
dhs_staging_bytes = _fn("dhs_staging_bytes", c_uint64, c_int32, c_int32, c_int32, c_int32, c_uint64)
dhs_spec_schedule_default = _fn("dhs_spec_schedule_default", dhs_spec_schedule)
dhs_spec_schedule_parse = _fn("dhs_spec_schedule_parse", _S, _CP, ctypes.POINTER(dhs_spec_schedule))
dhs_spec_width = _fn("dhs_spec_width", c_int32, ctypes.POINTER(dhs_spec_schedule), c_int32)
# dhs_spec_auto.h
_SA = ctypes.c_void_p  # dhs_spec_auto *
_DP = ctypes.POINTER(ctypes.c_double)
dhs_spec_auto_cfg_default = _fn("dhs_spec_auto_cfg_default", dhs_spec_auto_cfg, c_int32)
dhs_spec_auto_create = _fn("dhs_spec_auto_create", _S, ctypes.POINTER(dhs_spec_auto_cfg), ctypes.POINTER(_SA))
dhs_spec_auto_destroy = _fn("dhs_spec_auto_destroy", None, _SA)
dhs_spec_auto_reset = _fn("dhs_spec_auto_reset", _S, _SA, c_int32)
dhs_spec_auto_observe = _fn("dhs_spec_auto_observe", _S, _SA, c_int32, c_int32, c_int32)
dhs_spec_auto_estimate = _fn("dhs_spec_auto_estimate", _S, _SA, c_int32, _DP)
dhs_spec_auto_choose = _fn("dhs_spec_auto_choose", _S, _SA, c_int32, _I32P, _I32P, _DP, ctypes.c_double,
                           ctypes.c_double, _I32P, _DP)
dhs_spec_auto_observe_round = _fn("dhs_spec_auto_observe_round", _S, _SA, c_int32, c_int32, ctypes.c_double,
                                  ctypes.c_double)
dhs_spec_auto_set_row_us = _fn("dhs_spec_auto_set_row_us", _S, _SA, ctypes.c_double)
dhs_spec_auto_miss_model = _fn("dhs_spec_auto_miss_model", _S, _SA, _DP, _DP, _DP)
dhs_spec_auto_choose_round = _fn("dhs_spec_auto_choose_round", _S, _SA, c_int32, _I32P, _I32P, _DP, ctypes.c_double,
                                 ctypes.c_double, ctypes.c_double, _I32P, _DP)
dhs_check_invariants = _fn("dhs_check_invariants", ctypes.c_int, _CTX, ctypes.c_char_p, ctypes.c_size_t)
dhs_read_location = _fn("dhs_read_location", _S, _CTX, c_int32, c_int32, _P)
# dhs_cuda.h (present in every build; without CUDA they answer NULL / UNSUPPORTED)
dhs_cuda_stream = _fn("dhs_cuda_stream", _P, _BE)
dhs_cuda_side_stream = _fn("dhs_cuda_side_stream", _P, _BE)
dhs_cuda_set_stream = _fn("dhs_cuda_set_stream", _S, _BE, _P)
dhs_cuda_set_gather_blocks = _fn("dhs_cuda_set_gather_blocks", _S, _BE, c_int32)
dhs_cuda_set_copy_queue_blocks = _fn("dhs_cuda_set_copy_queue_blocks", _S, _BE, c_int32)
dhs_cuda_last_error = _fn("dhs_cuda_last_error", ctypes.c_int, _BE)
# typedef void (*dhs_cuda_mark_fn)(void *user, int mark): the profiling hook's callback type
dhs_cuda_mark_fn = ctypes.CFUNCTYPE(None, _P, ctypes.c_int)
DHS_CUDA_MARK_PLAN, DHS_CUDA_MARK_COPY, DHS_CUDA_MARK_END = 1, 2, 3
dhs_cuda_set_marker = _fn("dhs_cuda_set_marker", _S, _BE, dhs_cuda_mark_fn, _P)

library_version = dhs_version().decode()
if library_version.split(".")[:2] != SOVERSION.split("."):
    raise ImportError(f"dhisparse: {lib_path} is version {library_version}; this package mirrors the "
                      f"{SOVERSION}.x structs (soname libdhs.so.{SOVERSION})")
