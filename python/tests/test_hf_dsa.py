"""The real-client harness (python/examples/hf_dsa_decode.py).

test_adapter_exact_on_cpu: the adapter (rows imported into dhisparse, new rows written at tail
locations, the indexer's selection resolved through dhs_resolve_device, only the gathered rows
scattered into a zero-filled dense K/V, the model's own cached K/V poisoned with NaN) drives a small
stand-in model whose structure and masking follow transformers' DeepSeek-V3.2 code (cache.update,
then the indexer's top-k, then an additive mask at the dtype's minimum over the dense KV), on the CPU
backend: tokens and logits must be bitwise identical to the model's own cache, with misses and
reclaims, and the negative control (V rows not scattered) must differ. Needs torch (CPU is enough).

test_hf_dsa_decode_on_gpu: the script itself with transformers' model on a GPU (skips without torch,
CUDA, transformers with a DSA model, or a CUDA libdhs)."""
import os
import subprocess
import sys
import types

import pytest

import dhisparse as dhs

from conftest import PY

sys.path.insert(0, os.path.join(PY, "examples"))
import hf_dsa_decode as hf  # noqa: E402

torch = pytest.importorskip("torch")
nn = torch.nn


# ---------------------------------------------------------------- a stand-in with the same structure
class _Layer:
    def __init__(self):
        self.keys = self.values = self.index_keys = None


class FakeCache:
    """DynamicCache's contract as the model uses it: update() appends and returns the whole K/V."""

    def __init__(self, n):
        self.layers = [_Layer() for _ in range(n)]

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        lay = self.layers[layer_idx]
        lay.keys = key_states if lay.keys is None else torch.cat([lay.keys, key_states], 2)
        lay.values = value_states if lay.values is None else torch.cat([lay.values, value_states], 2)
        return lay.keys, lay.values

    def update_indexer(self, k, layer_idx):
        lay = self.layers[layer_idx]
        lay.index_keys = k if lay.index_keys is None else torch.cat([lay.index_keys, k], 1)
        return lay.index_keys

    def get_seq_length(self):
        return 0 if self.layers[0].keys is None else self.layers[0].keys.shape[2]


class FakeIndexer(nn.Module):
    def __init__(self, d, topk, layer_idx, heads=2, dh=16):
        super().__init__()
        self.layer_idx, self.topk, self.heads, self.dh = layer_idx, topk, heads, dh
        self.wq = nn.Linear(d, heads * dh, bias=False)
        self.wk = nn.Linear(d, dh, bias=False)
        self.weights_proj = nn.Linear(d, heads, bias=False)

    def forward(self, hidden_states, attention_mask, past_key_values=None):
        B, S, _ = hidden_states.shape
        q = self.wq(hidden_states).view(B, S, self.heads, self.dh)
        k = self.wk(hidden_states)
        if past_key_values is not None:
            k = past_key_values.update_indexer(k, self.layer_idx)
        scores = torch.relu(torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1)))  # [B, S, H, T]
        w = self.weights_proj(hidden_states).float()
        index_scores = torch.matmul(w.unsqueeze(-2), scores).squeeze(-2) + attention_mask
        return index_scores.topk(min(self.topk, index_scores.shape[-1]), dim=-1).indices.to(torch.int32)


class FakeAttention(nn.Module):
    def __init__(self, d, heads, dk, dv, topk, layer_idx):
        super().__init__()
        self.layer_idx, self.h, self.dk, self.dv = layer_idx, heads, dk, dv
        self.q_proj = nn.Linear(d, heads * dk, bias=False)
        self.k_proj = nn.Linear(d, heads * dk, bias=False)
        self.v_proj = nn.Linear(d, heads * dv, bias=False)
        self.o_proj = nn.Linear(heads * dv, d, bias=False)
        self.indexer = FakeIndexer(d, topk, layer_idx)

    def forward(self, x, attention_mask, cache):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.h, self.dk).transpose(1, 2)
        k = self.k_proj(x).view(B, S, self.h, self.dk).transpose(1, 2)
        v = self.v_proj(x).view(B, S, self.h, self.dv).transpose(1, 2)
        k, v = cache.update(k, v, self.layer_idx)
        idx = self.indexer(x, attention_mask[:, 0], past_key_values=cache)
        index_mask = torch.ones((B, S, k.shape[2]), dtype=torch.bool).scatter(-1, idx.long(), False).unsqueeze(1)
        mask = attention_mask.masked_fill(index_mask, torch.finfo(x.dtype).min)
        w = torch.matmul(q, k.transpose(2, 3)) * self.dk ** -0.5 + mask
        w = torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).reshape(B, S, -1)
        return self.o_proj(o)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, **kwargs):
    """transformers' eager attention, as the DeepSeek-V3 fallback patches it (by this module-level name)."""
    w = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        w = w + attention_mask
    w = torch.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(w, value).transpose(1, 2).contiguous(), w


class FakeMlaAttention(nn.Module):
    """DeepSeek-V3-like: no indexer of its own; keys and values come from a compressed latent
    (kv_a_proj_with_mqa), the cache holds the expanded K/V, eager attention by module-level name."""

    def __init__(self, d, heads, dk, dv, topk, layer_idx):
        super().__init__()
        self.layer_idx, self.h, self.dk, self.dv = layer_idx, heads, dk, dv
        self.q_proj = nn.Linear(d, heads * dk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d, 32, bias=False)
        self.kv_b_proj = nn.Linear(32, heads * (dk + dv), bias=False)
        self.o_proj = nn.Linear(heads * dv, d, bias=False)

    def forward(self, x, attention_mask, cache):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, self.h, self.dk).transpose(1, 2)
        kv = self.kv_b_proj(self.kv_a_proj_with_mqa(x)).view(B, S, self.h, self.dk + self.dv).transpose(1, 2)
        k, v = torch.split(kv, [self.dk, self.dv], dim=-1)
        k, v = cache.update(k.contiguous(), v, self.layer_idx)
        o, _ = eager_attention_forward(self, q, k, v, attention_mask, self.dk ** -0.5)
        return self.o_proj(o.reshape(B, S, -1))


class FakeDsaModel(nn.Module):
    def __init__(self, vocab=256, d=64, layers=2, heads=2, dk=16, dv=16, topk=32, attn=FakeAttention):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.attn = nn.ModuleList(attn(d, heads, dk, dv, topk, i) for i in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d)) for _ in range(layers))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.config = types.SimpleNamespace(num_hidden_layers=layers)

    def forward(self, input_ids, past_key_values=None, use_cache=True):
        cache = past_key_values if past_key_values is not None else FakeCache(len(self.attn))
        B, S = input_ids.shape
        past = cache.get_seq_length()
        T = past + S
        pos_q = torch.arange(past, T)[:, None]
        causal = torch.arange(T)[None, :] > pos_q
        mask = torch.zeros(B, 1, S, T).masked_fill(causal, torch.finfo(torch.float32).min)
        h = self.embed(input_ids)
        for a, m in zip(self.attn, self.mlp):
            h = h + a(h, mask, cache)
            h = h + m(h)
        return types.SimpleNamespace(logits=self.lm_head(h), past_key_values=cache)


def _run_cpu(extra=(), attn=FakeAttention):
    a = hf.parse_args(["--sessions", "8", "--prompt", "160", "--steps", "48", "--topk", "32", "--page-rows", "8",
                       "--hot-rows", "64", "--tail-rows", "32", "--spare-pages", "8", "--control", "3"] + list(extra))
    torch.manual_seed(5)
    model = FakeDsaModel(topk=a.topk, attn=attn).eval()
    g = torch.Generator().manual_seed(6)
    prompts = torch.randint(0, 256, (a.sessions, a.prompt), generator=g)
    v3 = hf.V3Indexer(torch, model, a.topk) if attn is FakeMlaAttention else None
    try:
        return hf.compare(a, torch, dhs, model, prompts, None, model.config.num_hidden_layers, v3)
    finally:
        if v3 is not None:
            v3.close()


def test_adapter_exact_on_cpu():
    ok, res = _run_cpu()
    st = res["stats"]
    assert res["prefill_equal"]
    assert res["tokens_equal"], "tokens differ"
    assert res["logits_equal"], f"logits differ (max {res['max_diff']})"
    assert res["control_differs"] is True, "the negative control did not differ: the check could not fail"
    assert st.distinct_misses > 0 and st.reclaims > 0, (st.distinct_misses, st.reclaims)
    assert st.resolve_calls == 48 * 2  # read before the control steps
    assert res["invariants"][0] == 0
    assert ok


def test_adapter_exact_on_cpu_with_added_indexer():
    """The DeepSeek-V3 fallback (an MLA model without an indexer; the script adds one)."""
    ok, res = _run_cpu(attn=FakeMlaAttention)
    st = res["stats"]
    assert res["prefill_equal"] and res["tokens_equal"] and res["logits_equal"], res["max_diff"]
    assert res["control_differs"] is True
    assert st.distinct_misses > 0 and st.reclaims > 0 and st.resolve_calls == 48 * 2
    assert ok
    assert eager_attention_forward is globals()["eager_attention_forward"]  # restored by close()


def test_adapter_without_poison_is_exact_too():
    ok, res = _run_cpu(["--no-poison", "--control", "0", "--steps", "8"])
    assert res["tokens_equal"] and res["logits_equal"]


# ---------------------------------------------------------------- the real model on a GPU
def _gpu_skip_reason():
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "transformers is not installed"
    try:
        hf.find_model(torch, "auto")
    except hf.NoDsaModel as e:
        return str(e)
    if not dhs.cuda_available():
        return "libdhs has no CUDA backend or no device"
    return None


def test_hf_dsa_decode_on_gpu():
    reason = _gpu_skip_reason()
    if reason:
        pytest.skip(reason)
    script = os.path.join(PY, "examples", "hf_dsa_decode.py")
    p = subprocess.run([sys.executable, script, "--sessions", "8", "--steps", "256"], capture_output=True, text=True,
                       timeout=900)
    print(p.stdout[-20000:])
    print(p.stderr[-10000:], file=sys.stderr)
    assert p.returncode == 0, f"hf_dsa_decode.py exited {p.returncode}"
    assert "RESULT: PASS" in p.stdout
