"""quickstart.py - the smallest complete use of the dhisparse Python bindings
(CPU backend): admit a request, import its prefill KV, run decode rounds
(write the new row, resolve a top-k selection, read what attention would
read), close. It checks every row it reads and exits non-zero on a difference.
Run: python3 python/examples/quickstart.py   (docs/INTEGRATION.md includes it)"""
import sys
import os

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # python/ of the repo
import dhisparse as dhs  # noqa: E402

ROW_BYTES, PREFILL, K = 576, 1000, 64
rng = np.random.default_rng(0)
history = rng.integers(0, 256, size=(PREFILL + 8, ROW_BYTES), dtype=np.uint8)  # the KV rows a model would make

arch = dhs.Arch()  # dhs_arch_default(): one group, one 576-byte source, m = 1
cfg = dhs.Config(max_requests=4, sel_k=K, hot_rows=128, tail_rows=64, page_rows=16, max_rows=4096)
z = dhs.config_sizes(arch, cfg)
cfg.device_bytes = z.staging_bytes + z.reserve_bytes + 4 * z.request_bytes + (2 << 20)

with dhs.CpuBackend() as be, dhs.Context(arch, cfg, be) as ctx:
    with ctx.open(PREFILL + 8) as req:                  # raises dhs.Wait when capacity is short
        req.import_rows(PREFILL, history[:PREFILL])     # prefill output (host rows here)
        pool = ctx.pool()                               # [pool_rows, row_stride] uint8
        for step in range(4):
            n = req.positions
            with ctx.round([req], K=[1]):               # round_end(accepted=[0]) on leaving
                req.write_rows(0, n, history[n:n + 1])  # the KV row of the new position n
                sel = rng.integers(0, n + 1, size=(1, K)).astype(np.int32)  # the indexer's top-k
                sel[0, :3] = [0, n, -1]                 # a sink, the newest row, padding
                loc, = ctx.resolve(0, [(req, sel)])     # int32 [n_sources][K_r][k]: pool rows
                ok = sel[0] >= 0
                assert (loc[0, 0][~ok] == -1).all()
                assert np.array_equal(pool[loc[0, 0][ok]], history[sel[0][ok]]), "wrong bytes"
                ctx.group_done(0)
            assert ctx.check_invariants() == (0, "")
        st = ctx.stats()
print(f"quickstart: dhisparse {dhs.__version__}: {st.entries} entries resolved, "
      f"{st.census_host} from host, all rows exact")
