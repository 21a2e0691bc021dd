"""dhisparse: Python bindings (ctypes) of libdhs, the load-adaptive KV hierarchy
for natively sparse-attention LLMs. See docs/INTEGRATION.md.

    import numpy as np, dhisparse as dhs
    cfg = dhs.Config(max_requests=4, sel_k=64, hot_rows=128, tail_rows=64, page_rows=16, max_rows=4096,
                     device_bytes=16 << 20)
    with dhs.CpuBackend() as be, dhs.Context(dhs.Arch(), cfg, be) as ctx:
        with ctx.open(1000) as req:
            req.import_rows(1000, prefill_rows)              # uint8 [1000, 576]
            with ctx.round([req]):
                req.write_rows(0, 1000, new_row)             # the row of position 1000
                loc, = ctx.resolve(0, [(req, sel)])          # sel int32 [1, k] -> loc int32 [1, 1, k]
                rows = ctx.pool()[loc[0, 0]]                 # what attention reads
"""
from ._version import __version__
from ._lib import lib_path, library_version, DHS_ALIGN, DHS_MAX_SOURCES, DHS_MAX_CONSUMERS
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .core import *  # noqa: F401,F403
from .core import __all__ as _core_all

__all__ = ["__version__", "lib_path", "library_version", "DHS_ALIGN", "DHS_MAX_SOURCES",
           "DHS_MAX_CONSUMERS"] + list(_errors_all) + list(_core_all)
