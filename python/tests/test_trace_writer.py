"""dhisparse.trace: the Python writer of the selection-trace format (docs/TRACE.md).

- It writes the worked example of docs/TRACE.md section 2.4 byte for byte (308 bytes from the doc's dump).
- The dhs tool reads a larger trace it wrote (`dhs trace info --json`, `dhs trace stats`) and counts what was
  written; skipped when the tool is not beside the library.
- Every rule it checks refuses the record and writes nothing of it.
- IndexerCapture runs when PyTorch is installed (skipped otherwise: the CI machine has none)."""
import json
import os
import random
import re
import subprocess

import pytest

from dhisparse.trace import TraceWriter, sum32x2

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def doc_example_bytes():
    """The hex dump of docs/TRACE.md's worked example, parsed."""
    text = open(os.path.join(ROOT, "docs", "TRACE.md")).read()
    block = text.split("One group (`k = 4`)")[1].split("```")[1]
    out = b""
    for line in block.splitlines():
        m = re.match(r"^(?:([0-9a-f]{8}):)?\s+((?:[0-9a-f]{4} ?)+)", line)
        if m:
            out += bytes.fromhex(m.group(2).replace(" ", ""))
    return out


def test_worked_example_byte_for_byte(tmp_path):
    want = doc_example_bytes()
    assert len(want) == 308, len(want)
    p = tmp_path / "ex.dhst"
    with TraceWriter(str(p), groups=[4], sources=[(576, 1, 0)], n_requests=1, k_max=2, name="ex") as w:
        w.start(0, 5)
        w.round([(0, 2, 5, 1, [[[0, 4, 5, -1], [0, 4, 5, 6]]])])
        w.end(0)
    got = p.read_bytes()
    assert got == want, next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) if len(got) == len(want) else (len(got), len(want))


def test_checksum_changes_with_any_word():
    data = bytes(range(64))
    a = sum32x2(data)
    for i in range(0, 64, 4):
        mod = bytearray(data)
        mod[i] ^= 1
        assert sum32x2(bytes(mod)) != a
    swapped = data[4:8] + data[0:4] + data[8:]
    assert sum32x2(swapped) != a


def test_rules_refuse_and_write_nothing(tmp_path):
    p = tmp_path / "r.dhst"
    w = TraceWriter(str(p), groups=[4, 2], sources=[(64, 1, 0), (32, 2, 1)], n_requests=2, k_max=2)
    w.start(0, 10)
    size = w.f.tell()
    bad = [
        [(1, 1, 10, 0, [[[0, 1, 2, 3]], [[0, 1]]])],            # request 1 not started
        [(0, 3, 10, 0, [[[0] * 4] * 3, [[0] * 2] * 3])],         # K above k_max
        [(0, 1, 11, 0, [[[0, 1, 2, 3]], [[0, 1]]])],             # wrong n
        [(0, 1, 10, 0, [[[0, 1, 2, 11]], [[0, 1]]])],            # row 11 not visible at position 10
        [(0, 1, 10, 0, [[[0, 1, 2, 3]], [[0, 5]]])],             # m = 2: rows < 11 // 2 = 5
        [(0, 1, 10, 1, [[[0, 1, 2, 3]], [[0, 1]]])],             # A above K - 1
        [(0, 1, 10, 0, [[[0, 1, 2]], [[0, 1]]])],                # k entries missing
    ]
    for items in bad:
        with pytest.raises(ValueError):
            w.round(items)
        assert w.f.tell() == size, items
    with pytest.raises(ValueError):
        w.start(0, 3)  # twice
    w.round([(0, 2, 10, 1, [[[0, 1, 2, 10], [-1, 11, 3, 0]], [[0, 4], [5, -1]]])])  # query 1 sees row 11; m = 2: 5
    w.end(0)
    w.close()


def tool():
    lib = os.environ.get("DHS_LIBRARY", "")
    t = os.path.join(os.path.dirname(lib), "dhs") if lib else ""
    return t if t and os.access(t, os.X_OK) else None


def test_the_tool_reads_what_it_writes(tmp_path):
    dhs = tool()
    if dhs is None:
        pytest.skip("no dhs tool beside DHS_LIBRARY")
    seed = int(os.environ.get("DHS_TEST_SEED", "20261204"))
    print(f"seed {seed}")
    rng = random.Random(seed)
    L, k, B, T, prompt = 3, 16, 2, 20, 40
    p = tmp_path / "cap.dhst"
    with TraceWriter(str(p), groups=[k] * L, sources=[(656, 1, g) for g in range(L)], n_requests=B,
                     name="python writer") as w:
        for b in range(B):
            w.start(b, prompt)
        for t in range(T):
            items = []
            for b in range(B):
                n = prompt + t
                items.append((b, 1, n, 0, [[rng.sample(range(n + 1), k)] for _ in range(L)]))
            w.round(items)
        for b in range(B):
            w.end(b)
    info = json.loads(subprocess.run([dhs, "trace", "info", str(p), "--json", "-q"], check=True,
                                     capture_output=True, text=True).stdout)
    assert info["trace_version"] == 1 and info["name"] == "python writer" and info["k"] == [k] * L, info
    assert [s["row_bytes"] for s in info["sources"]] == [656] * L and info["k_max"] == 1, info
    assert info["requests"] == B and info["requests_ended"] == B and info["rounds"] == T, info
    assert info["request_rounds"] == B * T and info["queries"] == B * T and info["entries"] == B * T * L * k, info
    assert info["padding_entries"] == 0 and info["duplicate_entries"] == 0, info
    st = subprocess.run([dhs, "trace", "stats", str(p)], capture_output=True, text=True)
    assert st.returncode == 0, st.stderr


def test_indexer_capture_stand_in_model():
    torch = pytest.importorskip("torch")
    from dhisparse.trace import IndexerCapture

    class Indexer(torch.nn.Module):  # a stand-in with the transformers indexers' name and output (indices)
        def __init__(self, layer_idx, k):
            super().__init__()
            self.layer_idx, self.k = layer_idx, k

        def forward(self, x):
            T = x.shape[1]
            return torch.arange(T).flip(0)[: self.k].expand(x.shape[0], 1, -1)

    class Layer(torch.nn.Module):
        def __init__(self, i):
            super().__init__()
            self.indexer = Indexer(i, 4)

        def forward(self, x):
            self.indexer(x)
            return x

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([Layer(0), Layer(1)])

        def forward(self, x):
            for lay in self.layers:
                x = lay(x)
            return x
    import tempfile
    m = Model()
    with tempfile.TemporaryDirectory() as d:
        cap = IndexerCapture(torch, m, os.path.join(d, "t.dhst"), k=4, row_bytes=64, batch=2)
        cap.begin([6, 6])
        for t in range(3):
            with cap.step():
                m(torch.zeros(2, 7 + t))
        cap.close()
        assert type(m.layers[0].indexer).__name__ == "Indexer"  # restored
        assert cap.w.rounds == 3 and cap.w.entries == 3 * 2 * 2 * 4
