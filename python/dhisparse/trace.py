"""Selection traces from Python: a writer of the `dhs trace` format (docs/TRACE.md, version 1) and a
capture of a transformers DSA model's indexer selections into it.

    from dhisparse.trace import TraceWriter
    with TraceWriter("run.dhst", groups=[2048] * L, sources=[(656, 1, g) for g in range(L)],
                     n_requests=B, k_max=1, name="my run") as w:
        w.start(req, prefix)                     # a request arrives with `prefix` positions
        w.round([(req, K, n, A, sels), ...])     # sels: per group a K x k int array (-1 = padding)
        w.end(req)

`dhs trace info FILE`, `dhs trace stats FILE`, `dhs sim --trace FILE` read it. The writer checks the
format's rules (request lifecycle, round order, positions, visibility of every entry) before it writes a
record, and raises ValueError on a violation, writing nothing of that record.

`IndexerCapture` (below) records the decode selections of transformers' DeepseekV32ForCausalLM /
GlmMoeDsaForCausalLM (any model whose indexer modules' class names end in "Indexer").
"""

import struct

MAGIC = b"DHSTRACE"
VERSION = 1
START, ROUND, END, TRAILER = 1, 2, 3, 4
_M32 = 0xFFFFFFFF


def sum32x2(data):
    """The format's checksum over little-endian u32 words: (sum, sum of running sums), both mod 2^32."""
    if len(data) % 4:
        raise ValueError("checksum over a length that is not a multiple of 4")
    a = b = 0
    for (w,) in struct.iter_unpack("<I", data):
        a = (a + w) & _M32
        b = (b + a) & _M32
    return struct.pack("<II", a, b)


def _pad4(b):
    return b + b"\0" * (-len(b) % 4)


class TraceWriter:
    """Writes one trace file. groups: per group its selection length k; sources: per source
    (row_bytes, m, group); n_requests: request ids are 0..n_requests-1; k_max: the largest K_r."""

    def __init__(self, path, groups, sources, n_requests, k_max=1, name="", meta="", sorted_queries=False):
        G, S = len(groups), len(sources)
        if not 1 <= G <= 128 or not G <= S <= 128:
            raise ValueError(f"{G} groups and {S} sources: need 1 <= groups <= sources <= 128")
        if not 1 <= n_requests <= 1 << 20 or not 1 <= k_max <= 256:
            raise ValueError(f"n_requests {n_requests} (1..2^20), k_max {k_max} (1..256)")
        if any(not 1 <= int(k) <= 65536 for k in groups):
            raise ValueError(f"selection lengths {list(groups)}: each 1..65536")
        m_of = {}
        for rb, m, g in sources:
            if rb <= 0 or not 1 <= m <= 65536 or not 0 <= g < G:
                raise ValueError(f"source ({rb}, {m}, {g}): row_bytes > 0, m 1..65536, group < {G}")
            if m_of.setdefault(g, m) != m:
                raise ValueError(f"group {g}: sources with different m")
        if len(m_of) != G:
            raise ValueError("every group needs at least one source")
        nb, mb = name.encode(), meta.encode()
        if len(nb) > 255 or len(mb) > 4095:
            raise ValueError("name up to 255 bytes, meta up to 4095")
        self.k = [int(k) for k in groups]
        self.m = [m_of[g] for g in range(G)]
        self.n_requests, self.k_max = int(n_requests), int(k_max)
        hb = 48 + 4 * G + 12 * S + len(_pad4(nb)) + len(_pad4(mb)) + 8
        head = MAGIC + struct.pack("<IIIIIIIIII", VERSION, hb, G, S, n_requests, k_max, 1 if sorted_queries else 0,
                                   len(nb), len(mb), 0)
        head += b"".join(struct.pack("<I", k) for k in self.k)
        head += b"".join(struct.pack("<III", rb, m, g) for rb, m, g in sources)
        head += _pad4(nb) + _pad4(mb)
        self.f = open(path, "wb")
        self.f.write(head + sum32x2(head))
        self.state = {}     # req -> [started, ended, next n or None, in this round]
        self.rounds = self.items = self.queries = self.entries = self.starts = self.ends = 0

    def _record(self, rtype, count, body):
        rec = struct.pack("<IIQ", rtype, count, len(body)) + body
        self.f.write(rec + sum32x2(rec))

    def _req(self, req):
        if not 0 <= req < self.n_requests:
            raise ValueError(f"request {req} outside 0..{self.n_requests - 1}")
        return self.state.setdefault(req, {"started": False, "ended": False, "n": None})

    def start(self, req, prefix):
        st = self._req(req)
        if st["started"]:
            raise ValueError(f"request {req} started twice")
        if not 0 <= prefix < 1 << 40:
            raise ValueError(f"prefix {prefix} outside 0..2^40-1")
        self._record(START, 0, struct.pack("<IIq", req, 0, prefix))
        st.update(started=True, n=int(prefix))
        self.starts += 1

    def round(self, items):
        """items: [(req, K, n, A, sels)], sels a list over groups of K x k entries (nested lists or arrays)."""
        body = [struct.pack("<Q", self.rounds)]
        sel_parts, seen, nxt = [], set(), {}
        for req, K, n, A, sels in items:
            st = self._req(req)
            if not st["started"] or st["ended"] or req in seen:
                raise ValueError(f"round {self.rounds}: request {req} not started, ended, or named twice")
            if not 1 <= K <= self.k_max or not 0 <= A <= K - 1:
                raise ValueError(f"round {self.rounds}: request {req} has K {K} (1..{self.k_max}), A {A} (0..K-1)")
            if n != st["n"]:
                raise ValueError(f"round {self.rounds}: request {req} at n {n}, expected {st['n']}")
            if len(sels) != len(self.k):
                raise ValueError(f"round {self.rounds}: {len(sels)} groups of selections, the trace has {len(self.k)}")
            seen.add(req)
            body.append(struct.pack("<IIqII", req, K, n, A, 0))
            for g, q in enumerate(sels):
                rows = [[int(x) for x in row] for row in q]
                if len(rows) != K or any(len(r) != self.k[g] for r in rows):
                    raise ValueError(f"round {self.rounds}: request {req} group {g}: selections not {K} x {self.k[g]}")
                for j, r in enumerate(rows):
                    lim = (n + j + 1) // self.m[g]  # rows complete and visible to query j
                    bad = [x for x in r if x != -1 and not 0 <= x < lim]
                    if bad:
                        raise ValueError(f"round {self.rounds}: request {req} group {g} query {j}: rows {bad[:4]} not "
                                         f"visible (0 <= row < {lim}, or -1)")
                    sel_parts.append(struct.pack(f"<{len(r)}i", *r))
                self.entries += K * self.k[g]
            nxt[req] = n + A + 1
            self.queries += K
        for req, n2 in nxt.items():
            self.state[req]["n"] = n2
        body.extend(sel_parts)
        self._record(ROUND, len(items), b"".join(body))
        self.rounds += 1
        self.items += len(items)

    def end(self, req):
        st = self._req(req)
        if not st["started"] or st["ended"]:
            raise ValueError(f"request {req} ended before its start or twice")
        self._record(END, 0, struct.pack("<II", req, 0))
        st["ended"] = True
        self.ends += 1

    def close(self):
        if self.f is None:
            return
        self._record(TRAILER, 0, struct.pack("<QQQQQQ", self.rounds, self.items, self.queries, self.entries,
                                             self.starts, self.ends))
        self.f.close()
        self.f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def find_indexers(model):
    """[(layer index, parent module, attribute name, indexer module)], by layer, for every DSA indexer of a
    transformers model: a child module whose class name ends in "Indexer", its layer from `layer_idx` or
    else the first number in its module path."""
    out = []
    for name, mod in model.named_modules():
        for child_name, child in mod.named_children():
            if type(child).__name__.endswith("Indexer"):
                li = getattr(child, "layer_idx", None)
                if li is None:
                    li = next((int(p) for p in (name + "." + child_name).split(".") if p.isdigit()), None)
                out.append((int(li), mod, child_name, child))
    out.sort(key=lambda t: t[0])
    return out


def selection_tensor(torch, out):
    """The tensor that holds an indexer's selection in its output: the output itself, or in a tuple the
    first integer tensor (top-k indices), else the first tensor (an additive mask); None when there is none."""
    if not isinstance(out, (tuple, list)):
        return out if torch.is_tensor(out) else None
    t = next((x for x in out if torch.is_tensor(x) and not x.is_floating_point()), None)
    return t if t is not None else next((x for x in out if torch.is_tensor(x)), None)


class IndexerCapture:
    """Records the decode selections of a transformers DSA model into a trace, one group and one source per
    indexer layer (m = 1). Usage, after prefill of a batch of B prompts of n positions each:

        cap = IndexerCapture(torch, model, "run.dhst", k=config.index_topk, row_bytes=656, batch=B)
        cap.begin([n] * B)                   # START of every batch row with its prompt length
        for step in range(T):
            with cap.step():                 # the indexers' selections of this forward pass: one ROUND
                out = model(input_ids=tok, past_key_values=cache, use_cache=True)
            ...
        cap.close()                          # END of every row, the trailer, the indexers restored

    Each indexer module is wrapped; its output (top-k indices, or an additive mask with 0 at the selected
    positions, as transformers versions differ) gives the last query's selection per batch row. Entries past
    the query's own position become -1 (padding), as the format requires."""

    def __init__(self, torch, model, path, k, row_bytes, batch, name="", meta=""):
        self.torch, self.k, self.B = torch, int(k), int(batch)
        self.found = find_indexers(model)
        if not self.found:
            raise ValueError(f"{type(model).__name__} has no indexer module (a class name ending in 'Indexer')")
        self.L = len(self.found)
        self.layer_of = {li: i for i, (li, _, _, _) in enumerate(self.found)}
        self.w = TraceWriter(path, [self.k] * self.L, [(int(row_bytes), 1, g) for g in range(self.L)], self.B,
                             k_max=1, name=name, meta=meta)
        self.cur = None
        self.n = None
        cap = self

        class Tap(torch.nn.Module):
            def __init__(self, inner, layer):
                super().__init__()
                self.inner, self.layer = inner, layer

            def forward(self, *a, **kw):
                out = self.inner(*a, **kw)
                if cap.cur is not None:
                    cap.cur[cap.layer_of[self.layer]] = cap._selection(out)
                return out

        self.undo = []
        for li, parent, attr, mod in self.found:
            setattr(parent, attr, Tap(mod, li))
            self.undo.append((parent, attr, mod))

    def _selection(self, out):
        torch = self.torch
        t = selection_tensor(torch, out)
        if t is None:
            raise RuntimeError(f"an indexer returned {type(out).__name__}: no selection found in it")
        if t.is_floating_point():  # an additive mask [B, ..., T]: 0 at the selected positions
            m = t.reshape(t.shape[0], -1, t.shape[-1])[:, -1]
            chosen = m == 0
            idx = torch.sort(chosen.int(), dim=-1, descending=True, stable=True).indices[:, :self.k]
            idx = torch.where(torch.gather(chosen, 1, idx), idx, torch.full_like(idx, -1))
        else:
            idx = t.reshape(t.shape[0], -1, t.shape[-1])[:, -1]
        return idx.to(torch.int64).cpu().tolist()

    def begin(self, prompt_lens):
        if len(prompt_lens) != self.B:
            raise ValueError(f"{len(prompt_lens)} prompt lengths for a batch of {self.B}")
        self.n = [int(x) for x in prompt_lens]
        for b, n in enumerate(self.n):
            self.w.start(b, n)

    def step(self):
        cap = self

        class _Step:
            def __enter__(self):
                cap.cur = [None] * cap.L

            def __exit__(self, exc_type, *exc):
                sels, cap.cur = cap.cur, None
                if exc_type is not None:
                    return False
                if any(s is None for s in sels):
                    missing = [cap.found[i][0] for i, s in enumerate(sels) if s is None]
                    raise RuntimeError(f"the forward pass ran no indexer of layers {missing}")
                items = []
                for b in range(cap.B):
                    n = cap.n[b]
                    per_group = []
                    for g in range(cap.L):
                        row = [x if 0 <= x <= n else -1 for x in sels[g][b]][:cap.k]
                        row += [-1] * (cap.k - len(row))
                        per_group.append([row])
                    items.append((b, 1, n, 0, per_group))
                cap.w.round(items)
                cap.n = [n + 1 for n in cap.n]
                return False

        return _Step()

    def close(self):
        for parent, attr, mod in self.undo:
            setattr(parent, attr, mod)
        self.undo = []
        if self.w.f is not None:
            for b in range(self.B):
                if self.n is not None:
                    self.w.end(b)
            self.w.close()
