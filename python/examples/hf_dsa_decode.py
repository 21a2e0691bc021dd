#!/usr/bin/env python3
"""A real client on the GPU: transformers' own DeepSeek-V3.2 model code (DSA indexer + MLA) decoding
with its KV rows stored in dhisparse and the rows its indexer selects read through dhisparse
locations (device resolver), compared token for token and logit for logit with the same model using
its own cache.

What runs (all on one CUDA stream, the backend's compute stream):
  * the model: transformers' DeepseekV32ForCausalLM (or GLM-MoE-DSA) built from a small random config
    (no download; fixed torch seed), eager attention, bf16 by default. A transformers without either gets
    DeepSeek-V3 (MLA) with a top-k indexer ADDED BY THIS SCRIPT (class V3Indexer; it says so when used);
  * reference: prefill the prompts of all sessions (one batch), then greedy decode with the model's own
    cache (DynamicCache);
  * dhisparse: the same prefill; the prefill K/V rows of every layer are imported into a dhisparse
    context (one source and one OWN group per layer; device budget small, so admissions reclaim and most
    history lives in pinned host memory). Each decode step is a dhisparse round: the new row of every
    layer is written in place at its tail location (dhs_tail_locations + index_copy_ into the pool), the
    indexer's top-k selection goes to dhs_resolve_device, the selected rows are gathered from the pool at
    the returned locations; per layer these three run as one captured CUDA graph (torch.cuda.graph),
    replayed every step (--no-graph: eagerly). The model's attention then reads a zero-filled dense K/V
    buffer into which ONLY the gathered rows were scattered.

Why that is bitwise exact (the correctness harness, not a production integration): the model's sparse
attention masks every unselected position with the dtype's most negative value over the dense KV, so an
unselected score is that value whatever K holds (|q.k| is far below its rounding step), its softmax
weight is exactly 0, and 0 x (a finite V) adds nothing; the selected rows are byte-identical (dhisparse
is exact). To show that nothing of the model's own cache is read, the K/V tensors the model's cache
holds are overwritten with NaN after every update (--no-poison turns it off): a single read of them
would turn the logits into NaN. A negative control (--control N) runs N steps with the gathered V rows
NOT scattered and must differ.

A production engine does not build dense buffers: it passes the locations as FlashMLA's sparse
`indices` (page*page_rows + offset into the pool) to the sparse decode kernel, which reads the pool
rows directly (docs/INTEGRATION.md).

Exit status: 0 when tokens are identical, logits bitwise identical, the control differs and (unless
--no-graph) the graphs were captured; 1 on a mismatch; 2 on a setup problem (message says what);
3 when this transformers has neither a DSA model nor DeepSeek-V3 (nothing compared).
"""
import argparse
import contextlib
import faulthandler
import inspect
import math
import os
import sys
import time
import traceback

faulthandler.enable(all_threads=True)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/ of the repository: the dhisparse package


def say(*a):
    print("[hf_dsa]", *a, flush=True)


class SetupError(Exception):
    pass


class NoDsaModel(Exception):
    pass


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Example: python3 python/examples/hf_dsa_decode.py --sessions 8 --steps 256")
    p.add_argument("--model", default="auto",
                   help="deepseek_v32 | glm_moe_dsa | deepseek_v3 (MLA + a top-k indexer added by this script) | "
                        "auto (the first DSA model found, else deepseek_v3)")
    p.add_argument("--sessions", type=int, default=8, help="concurrent sessions (batch), >= 8 for the issue")
    p.add_argument("--prompt", type=int, default=1024, help="prompt tokens per session (>= --topk)")
    p.add_argument("--steps", type=int, default=256, help="greedy decode steps compared")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--topk", type=int, default=64, help="index_topk (the selection length k)")
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--page-rows", type=int, default=16)
    p.add_argument("--hot-rows", type=int, default=128)
    p.add_argument("--tail-rows", type=int, default=64)
    p.add_argument("--spare-pages", type=int, default=32,
                   help="device pool = the minimum for all sessions + this many pages of history (small: misses)")
    p.add_argument("--no-graph", action="store_true", help="run the per-layer dhisparse step eagerly")
    p.add_argument("--no-poison", action="store_true", help="do not overwrite the model cache's K/V with NaN")
    p.add_argument("--control", type=int, default=4, help="steps of the negative control (0: skip)")
    p.add_argument("--device", type=int, default=0)
    a = p.parse_args(argv)
    if a.sessions < 1 or a.steps < 1 or a.prompt < a.topk:
        p.error("need sessions >= 1, steps >= 1 and prompt >= topk")
    return a


# ------------------------------------------------------------------ model
def find_model(torch, name):
    import transformers
    say(f"torch {torch.__version__} (CUDA {torch.version.cuda}), transformers {transformers.__version__}")
    from transformers import AutoConfig  # noqa: F401
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except Exception as e:  # pragma: no cover - very old transformers
        raise NoDsaModel(f"transformers {transformers.__version__}: no CONFIG_MAPPING ({e})")
    wanted = ["deepseek_v32", "glm_moe_dsa", "deepseek_v3"] if name == "auto" else [name]
    for mt in wanted:
        if mt in CONFIG_MAPPING:
            if mt == "deepseek_v3":
                say(f"transformers {transformers.__version__} has no DSA model (deepseek_v32, glm_moe_dsa)"
                    if name == "auto" else "deepseek_v3 asked for")
                say("using DeepSeek-V3 (MLA) with a top-k indexer ADDED BY THIS SCRIPT (not transformers' code): "
                    "it scores positions from its own index-key cache and masks the unselected ones")
            return mt, CONFIG_MAPPING[mt]
    raise NoDsaModel(f"transformers {transformers.__version__} has none of {wanted}")


def known_fields(cfg_cls):
    names = set()
    for k in cfg_cls.__mro__:
        names |= set(getattr(k, "__annotations__", {}))
    try:
        names |= {n for n, p in inspect.signature(cfg_cls.__init__).parameters.items()
                  if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    except (TypeError, ValueError):
        pass
    return names


def small_config(cfg_cls, a):
    L, H = a.layers, a.heads
    want = dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=2 * a.hidden, moe_intermediate_size=64,
                num_hidden_layers=L, num_attention_heads=H, num_key_value_heads=H, n_shared_experts=1,
                n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, kv_lora_rank=64, q_lora_rank=128,
                qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, head_dim=16, index_topk=a.topk,
                index_head_dim=32, index_n_heads=4, first_k_dense_replace=L, mlp_layer_types=["dense"] * L,
                max_position_embeddings=max(4096, 2 * (a.prompt + a.steps)), tie_word_embeddings=False,
                use_cache=True, attention_dropout=0.0, bos_token_id=0, eos_token_id=1, pad_token_id=None)
    known = known_fields(cfg_cls)
    kw = {k: v for k, v in want.items() if k in known}
    dropped = sorted(set(want) - set(kw))
    if dropped:
        say(f"config fields this transformers does not know (left at defaults): {dropped}")
    cfg = cfg_cls(**kw)
    if getattr(cfg, "model_type", "") == "deepseek_v3":
        return cfg
    for k in ("index_topk", "index_n_heads", "index_head_dim"):
        if not hasattr(cfg, k):
            raise SetupError(f"{cfg_cls.__name__} has no {k}: not the DSA config this script expects")
    if int(cfg.index_topk) != a.topk:
        raise SetupError(f"config.index_topk = {cfg.index_topk}, asked {a.topk}")
    return cfg


def build_model(torch, a, mt, cfg_cls):
    from transformers import AutoModelForCausalLM
    cfg = small_config(cfg_cls, a)
    try:
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    torch.manual_seed(a.seed)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    except TypeError:
        model = AutoModelForCausalLM.from_config(cfg)
    # every matrix random (some inits are zero, e.g. projections the checkpoint always fills), norms at 1
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 / math.sqrt(p.shape[-1])))
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.fill_(1.0)  # norm weights
    dt = getattr(torch, a.dtype)
    model = model.to(device=f"cuda:{a.device}", dtype=dt).eval()
    impl = getattr(model.config, "_attn_implementation", "?")
    say(f"model {type(model).__name__} ({mt}), attention implementation {impl}, dtype {a.dtype}, "
        f"{sum(p.numel() for p in model.parameters())} parameters")
    say("config: " + ", ".join(f"{k}={getattr(cfg, k, None)}" for k in (
        "num_hidden_layers", "hidden_size", "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim",
        "qk_rope_head_dim", "v_head_dim", "index_topk", "index_n_heads", "index_head_dim", "mlp_layer_types")))
    if impl not in ("eager", "?"):
        say(f"WARNING: attention implementation {impl}, not eager: the exactness argument assumes the masked dense path")
    return model


def indexers_of(model):
    """[(layer index, parent module, attribute name, indexer module)] for every DSA indexer."""
    from dhisparse.trace import find_indexers  # the one search, shared with the trace capture
    return find_indexers(model)


def cache_kv(cache, layer):
    """The (keys, values) a cache holds for a layer, across transformers versions."""
    if hasattr(cache, "layers"):
        lay = cache.layers[layer]
        return lay.keys, lay.values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[layer], cache.value_cache[layer]
    raise SetupError(f"cannot read K/V of layer {layer} from a {type(cache).__name__}")


# ------------------------------------------------------------------ DeepSeek-V3 fallback: an added indexer
class V3Indexer:
    """For transformers without a DSA model: DeepSeek-V3's MLA with a top-k selection added here. Index keys are
    the first `dim` values of each position's compressed KV (kv_a_proj_with_mqa output, recorded by a forward
    hook: a per-run index-key cache that holds every position, as DSA's indexer keeps its own); a query scores
    positions by its head-mean query's first `dim` values against them and keeps the top k. The selection is
    applied as DSA does it: the unselected positions get the dtype's minimum added to the attention mask over
    the dense KV, in the model's eager attention function (patched in the model's module)."""

    def __init__(self, torch, model, k, dim=16):
        import importlib
        self.torch, self.k, self.dim = torch, k, dim
        self.stores = {}
        self.current = None
        self.on_topk = None  # set by the adapter: (layer, indices) -> None
        self.mod = importlib.import_module(type(model).__module__)
        self.orig = getattr(self.mod, "eager_attention_forward", None)
        if self.orig is None:
            raise SetupError(f"{self.mod.__name__} has no eager_attention_forward to add the indexer to")
        self.mod.eager_attention_forward = self.attention
        self.hooks = []
        n = 0
        for name, mod in model.named_modules():
            if hasattr(mod, "kv_a_proj_with_mqa") and hasattr(mod, "layer_idx"):
                self.hooks.append(mod.kv_a_proj_with_mqa.register_forward_hook(self._hook(int(mod.layer_idx))))
                n += 1
        if n == 0:
            raise SetupError("no attention module with kv_a_proj_with_mqa and layer_idx: not an MLA model")
        say(f"added indexer: {n} layers, top-{k} over {dim}-value index keys (compressed-KV prefix)")

    def use(self, run):
        self.current = self.stores.setdefault(run, {})

    def _hook(self, layer):
        def hook(module, inputs, out):
            ik = out[..., :self.dim].detach()
            st = self.current
            if ik.shape[1] > 1 or layer not in st:
                st[layer] = ik.clone()
            else:
                st[layer] = self.torch.cat([st[layer], ik], 1)
        return hook

    def attention(self, module, query, key, value, attention_mask, *args, **kwargs):
        torch = self.torch
        layer = int(module.layer_idx)
        ik = self.current[layer]  # [B, T, dim]
        T = key.shape[2]
        q = query[..., :self.dim].float().mean(1)  # [B, S, dim]
        scores = torch.matmul(q, ik[:, :T].float().transpose(1, 2))  # [B, S, T]
        if attention_mask is not None:
            scores = scores + attention_mask[:, 0, :, :T].float()
        idx = scores.topk(min(self.k, T), dim=-1).indices.to(torch.int32)
        if self.on_topk is not None:
            self.on_topk(layer, idx)
        index_mask = torch.ones(scores.shape, dtype=torch.bool, device=scores.device).scatter(-1, idx.long(), False)
        index_mask = index_mask.unsqueeze(1)
        if attention_mask is None:
            attention_mask = torch.zeros(index_mask.shape, dtype=query.dtype, device=query.device)
        attention_mask = attention_mask[..., :T].masked_fill(index_mask, torch.finfo(query.dtype).min)
        return self.orig(module, query, key, value, attention_mask, *args, **kwargs)

    def close(self):
        self.mod.eager_attention_forward = self.orig
        for h in self.hooks:
            h.remove()


# ------------------------------------------------------------------ decode loops
def prefill(torch, model, prompts):
    out = model(input_ids=prompts, use_cache=True)
    return out.logits[:, -1].float(), out.past_key_values


def decode(torch, model, cache, tok, steps, on_step=None, after_step=None):
    toks, logits = [], []
    for t in range(steps):
        if on_step:
            on_step(t)
        out = model(input_ids=tok[:, None], past_key_values=cache, use_cache=True)
        lg = out.logits[:, -1].float()
        if after_step:
            after_step(t)
        tok = lg.argmax(-1)
        toks.append(tok)
        logits.append(lg)
    return torch.stack(toks, 1), torch.stack(logits, 1)


class DhsAdapter:
    """The model's KV rows in dhisparse; see the module docstring."""

    def __init__(self, torch, dhs, a, stream, cache, n_layers, B):
        self.torch, self.dhs, self.a, self.s, self.B, self.L = torch, dhs, a, stream, B, n_layers
        self.k = a.topk
        self.graph = not a.no_graph
        self.graph_error = None
        self.graphs = {}
        self.poison = not a.no_poison
        self.corrupt = False
        self.active = False
        self.step_rounds = 0
        # row layout of a token: K bytes of every head, then V bytes, padded to 16
        k0, v0 = cache_kv(cache, 0)
        self.kshape, self.vshape = tuple(k0.shape), tuple(v0.shape)  # [B, H, T, d]
        self.dtype = k0.dtype
        self.kb = k0.shape[1] * k0.shape[3] * k0.element_size()
        self.vb = v0.shape[1] * v0.shape[3] * v0.element_size()
        self.rb = (self.kb + self.vb + 15) // 16 * 16
        say(f"cache {type(cache).__name__}: K {self.kshape} V {self.vshape} {self.dtype}; row = {self.kb} + {self.vb} "
            f"bytes -> {self.rb} (padded to 16)")
        T0 = k0.shape[2]
        self.T0 = T0
        arch = dhs.Arch(n_groups=n_layers, sources=[dhs.SourceDesc(self.rb, 1, l) for l in range(n_layers)],
                        consumers=[dhs.ConsumerDesc(dhs.ConsumerKind.OWN, l, l) for l in range(n_layers)])
        cfg = dhs.Config(max_requests=B, sel_k=self.k, spec_width=1, hot_rows=a.hot_rows, tail_rows=a.tail_rows,
                         page_rows=a.page_rows, max_rows=T0 + a.steps + a.control + 64, repop_pages=8,
                         policy=dhs.Policy.CLOCK, resolver=dhs.Resolver.DEVICE)
        z = dhs.config_sizes(arch, cfg)
        cfg.device_bytes = z.min_device_bytes + (B - 1) * z.request_bytes + a.spare_pages * z.page_bytes
        hist = B * n_layers * T0 * z.row_stride
        say(f"dhisparse {dhs.library_version} ({dhs.lib_path}): {n_layers} groups/sources, N={B}, k={self.k}, "
            f"hot_rows={cfg.hot_rows}, tail_rows={cfg.tail_rows}, page_rows={cfg.page_rows}")
        say(f"device pool {cfg.device_bytes} B (min {z.min_device_bytes} + {B - 1} x request {z.request_bytes} + "
            f"{a.spare_pages} spare pages) vs {hist} B of imported history: {100.0 * cfg.device_bytes / hist:.1f}%; "
            f"resolver state {z.resolver_bytes} B")
        dev = cache_kv(cache, 0)[0].device
        self.cuda = dev.type == "cuda"
        if self.cuda:
            self.be = dhs.CudaBackend(dev.index or 0)
            self.be.set_stream(stream)  # the caller's stream is the compute stream: one stream for everything
        else:
            self.be = dhs.CpuBackend()  # the C specification of the device resolver, on host memory
            self.graph = False
        self.ctx = dhs.Context(arch, cfg, self.be)
        self.cfg = cfg
        if self.cuda:
            self.pool = torch.as_tensor(self.ctx.pool(), device=dev)  # [rows, stride] uint8, no copy
            assert self.pool.data_ptr() == self.ctx.pool().ptr, "torch.as_tensor copied the pool"
            say(f"pool tensor {tuple(self.pool.shape)} uint8 at {self.pool.data_ptr():#x}, compute stream "
                f"{self.be.stream:#x} (torch stream {stream.cuda_stream:#x})")
        else:
            import ctypes
            import numpy as np
            p, rows, stride = dhs._lib.dhs_source_pool(self.ctx.handle, 0), self.ctx.pool_rows(), self.ctx.row_stride
            buf = (ctypes.c_uint8 * (rows * stride)).from_address(p)
            self.pool = torch.from_numpy(np.ctypeslib.as_array(buf).reshape(rows, stride))
            say(f"pool tensor {tuple(self.pool.shape)} uint8 (CPU backend, host memory)")
        self.stride = self.pool.shape[1]
        # static buffers of the captured per-layer step
        self.rows_new = torch.zeros(n_layers, B, self.stride, dtype=torch.uint8, device=dev)
        self.tl = torch.zeros(n_layers, B, dtype=torch.int64, device=dev)
        self.tl_host = torch.zeros(n_layers, B, dtype=torch.int64)
        if self.cuda:
            self.tl_host = self.tl_host.pin_memory()
        self.sel = torch.full((n_layers, B, 1, self.k), -1, dtype=torch.int32, device=dev)
        self.loc = torch.full((n_layers, 1, B, 1, self.k), -1, dtype=torch.int32, device=dev)
        self.gathered = torch.zeros(n_layers, B, self.k, self.stride, dtype=torch.uint8, device=dev)
        self.reqs = []
        self.keep = []
        self.pending = {}
        self.dense = {}

    # -- rows <-> bytes
    def pack(self, k, v):
        """k [B, H, T, dk], v [B, H, T, dv] -> uint8 [B, T, stride]."""
        torch = self.torch
        B, T = k.shape[0], k.shape[2]
        kb = k.transpose(1, 2).contiguous().view(B, T, -1).view(torch.uint8)
        vb = v.transpose(1, 2).contiguous().view(B, T, -1).view(torch.uint8)
        pad = self.stride - kb.shape[-1] - vb.shape[-1]
        parts = [kb, vb] + ([torch.zeros(B, T, pad, dtype=torch.uint8, device=k.device)] if pad else [])
        return torch.cat(parts, -1)

    def unpack(self, rows):
        """uint8 [B, k, stride] -> K [B, H, k, dk], V [B, H, k, dv]."""
        B, k = rows.shape[:2]
        H, dk, dv = self.kshape[1], self.kshape[3], self.vshape[3]
        kk = rows[..., :self.kb].contiguous().view(self.dtype).view(B, k, H, dk).transpose(1, 2)
        vv = rows[..., self.kb:self.kb + self.vb].contiguous().view(self.dtype).view(B, k, H, dv).transpose(1, 2)
        return kk, vv

    # -- import
    def import_history(self, cache):
        """Opens and imports each session in turn (device rows: DHS_IMPORT_DEVICE): later admissions
        reclaim earlier sessions' optional pages when the pool is short."""
        rows = []
        for l in range(self.L):
            k, v = cache_kv(cache, l)
            rows.append(self.pack(k, v))  # [B, T0, stride]
        self.keep.append(rows)
        for b in range(self.B):
            r = self.ctx.open(self.T0 + self.a.steps + self.a.control + 1)
            # DHS_IMPORT_DEVICE (prefill output; on the CPU backend host memory is the device tier): complete
            # pages stay resident while capacity allows, so the next admissions reclaim them
            r.import_rows(self.T0, [rows[l][b] for l in range(self.L)], device=True)
            self.reqs.append(r)
        st, m = self.ctx.stats(), self.ctx.mem()
        say(f"imported {self.B} x {self.T0} positions x {self.L} layers: admissions {st.admissions}, reclaims "
            f"{st.reclaims} ({st.reclaimed_pages} pages); pages free {m.pages_free}/{m.pages_total}")

    # -- per step (host, between rounds)
    def begin_step(self, t):
        n = [r.positions for r in self.reqs]
        self.ctx.round_begin(self.reqs)
        for l in range(self.L):
            for b, r in enumerate(self.reqs):
                self.tl_host[l, b] = int(r.tail_locations(l, n[b], 1)[0])
        self.tl.copy_(self.tl_host, non_blocking=self.cuda)
        self.pending.clear()
        self.dense.clear()

    def end_step(self, t):
        try:
            self.ctx.round_end([0] * self.B)  # the round's one host synchronisation
        except self.dhs.DhsError as e:
            raise RuntimeError(f"decode step {t}: dhs_round_end: {e}") from e
        self.step_rounds += 1

    # -- inside the model's forward
    def body(self, l):
        """The per-layer dhisparse step (captured): new rows in place, device resolve, gather."""
        torch = self.torch
        self.pool.index_copy_(0, self.tl[l], self.rows_new[l])
        if self.cuda:
            self.ctx.resolve_device(l, self.sel[l], self.loc[l])  # torch tensors as they are
        else:
            self.ctx.resolve_device(l, self.sel[l].numpy(), self.loc[l].numpy())  # host memory views
        idx = self.loc[l, 0, :, 0, :].reshape(-1).clamp_min(0)
        torch.index_select(self.pool, 0, idx, out=self.gathered[l].view(-1, self.stride))

    def run_layer(self, l):
        torch = self.torch
        if self.graph and l not in self.graphs and self.graph_error is None:
            try:
                g = torch.cuda.CUDAGraph()
                say(f"capturing the layer-{l} step (index_copy_, dhs_resolve_device, index_select) into a CUDA graph")
                with torch.cuda.graph(g, stream=self.s):
                    self.body(l)
                self.graphs[l] = g
            except Exception as e:
                self.graph_error = f"layer {l}: {type(e).__name__}: {e}"
                say(f"GRAPH CAPTURE FAILED ({self.graph_error}); continuing eagerly")
                traceback.print_exc()
                torch.cuda.synchronize()
        if l in self.graphs:
            self.graphs[l].replay()
        else:
            self.body(l)
        self.ctx.group_done(l)

    def fill(self, l):
        torch = self.torch
        sel = self.pending.pop(l)
        kd, vd = self.dense.pop(l)
        self.run_layer(l)
        kk, vv = self.unpack(self.gathered[l])
        idx = sel.long()[:, None, :, None]  # [B, 1, k, 1]
        kd.scatter_(2, idx.expand(-1, kd.shape[1], -1, kd.shape[3]), kk)
        if not self.corrupt:
            vd.scatter_(2, idx.expand(-1, vd.shape[1], -1, vd.shape[3]), vv)

    def on_update(self, l, k, v, kf, vf):
        """Cache.update of layer l: k/v the new rows [B, H, 1, d], kf/vf what the model's cache returned."""
        torch = self.torch
        if k.shape[2] != 1:
            raise RuntimeError(f"decode update of layer {l} with {k.shape[2]} rows (expected 1)")
        self.rows_new[l].copy_(self.pack(k, v)[:, 0])
        kd = torch.zeros(kf.shape, dtype=kf.dtype, device=kf.device)
        vd = torch.zeros(vf.shape, dtype=vf.dtype, device=vf.device)
        if self.poison:
            kf.fill_(float("nan"))
            vf.fill_(float("nan"))
        self.dense[l] = (kd, vd)
        if l in self.pending:  # the indexer ran first in this version
            self.fill(l)
        return kd, vd

    def on_topk(self, l, out):
        torch = self.torch
        from dhisparse.trace import selection_tensor
        t = selection_tensor(torch, out)
        if t is None:
            raise RuntimeError(f"indexer of layer {l} returned {type(out).__name__}; cannot find the selection")
        if t.is_floating_point():
            # an additive mask [B, S, T] (0 = selected): the selected positions, ascending
            m = t.reshape(t.shape[0], -1, t.shape[-1])[:, -1]
            chosen = (m == 0)
            cnt = int(chosen.sum(-1).min())
            idx = torch.sort(chosen.int(), dim=-1, descending=True, stable=True).indices[:, :cnt]
        else:
            idx = t.reshape(t.shape[0], -1, t.shape[-1])[:, -1]  # the decode query
        if idx.shape != (self.B, self.k):
            raise RuntimeError(f"layer {l}: selection of shape {tuple(idx.shape)}, expected {(self.B, self.k)}")
        self.sel[l, :, 0].copy_(idx.to(torch.int32))
        self.pending[l] = self.sel[l, :, 0].clone()
        if l in self.dense:
            self.fill(l)
        return out

    def close(self):
        for r in self.reqs:
            r.close()
        self.ctx.close()
        self.be.close()


def install(torch, model, cache, adapter, v3=None):
    """Makes the model's own cache object call the adapter on update, and wraps every indexer.
    Returns an undo function."""
    base = type(cache)

    class DhsTappedCache(base):
        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            kf, vf = base.update(self, key_states, value_states, layer_idx, *args, **kwargs)
            if not adapter.active:
                return kf, vf
            return adapter.on_update(layer_idx, key_states, value_states, kf, vf)

    DhsTappedCache.__name__ = "DhsTapped" + base.__name__
    cache.__class__ = DhsTappedCache

    class IndexerTap(torch.nn.Module):
        def __init__(self, inner, layer):
            super().__init__()
            self.inner = inner
            self.layer = layer

        def forward(self, *a, **kw):
            out = self.inner(*a, **kw)
            return adapter.on_topk(self.layer, out) if adapter.active else out

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._modules["inner"], name)

    if v3 is not None:  # the DeepSeek-V3 fallback: the added indexer reports its selection
        v3.on_topk = lambda layer, idx: adapter.on_topk(layer, idx) if adapter.active else None

        def undo_v3():
            cache.__class__ = base
            v3.on_topk = None
        return undo_v3
    found = indexers_of(model)
    if len(found) != adapter.L or [f[0] for f in found] != list(range(adapter.L)):
        raise SetupError(f"found indexers for layers {[f[0] for f in found]}, expected 0..{adapter.L - 1}")
    say(f"indexers: {len(found)} x {type(found[0][3]).__name__}, tapped")
    for li, parent, attr, mod in found:
        setattr(parent, attr, IndexerTap(mod, li))

    def undo():
        cache.__class__ = base
        for li, parent, attr, mod in found:
            setattr(parent, attr, mod)
    return undo


# ------------------------------------------------------------------ main
def compare(a, torch, dhs, model, prompts, stream, n_layers, v3=None):
    """Reference decode, dhisparse decode, negative control; prints the summary, returns (ok, results)."""
    B = prompts.shape[0]
    res = {}
    sctx = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()

    def synchronize():
        if stream is not None:
            stream.synchronize()

    def use(run):  # the DeepSeek-V3 fallback keeps one index-key cache per run
        if v3 is not None:
            v3.use(run)

    with torch.no_grad(), sctx:
        # ---------------- reference: the model's own cache
        t0 = time.time()
        use("ref")
        lg0, cache = prefill(torch, model, prompts)
        say(f"reference prefill: {B} x {prompts.shape[1]} tokens, cache {type(cache).__name__}")
        ref_cache = cache
        ref_toks, ref_logits = decode(torch, model, ref_cache, lg0.argmax(-1), a.steps)
        synchronize()
        say(f"reference decode: {a.steps} steps in {time.time() - t0:.1f} s")
        # ---------------- dhisparse
        t0 = time.time()
        use("dhs")
        lg1, cache = prefill(torch, model, prompts)
        pre_equal = torch.equal(lg0, lg1)
        say(f"dhisparse run prefill: logits equal to the reference prefill: {pre_equal}")
        adapter = DhsAdapter(torch, dhs, a, stream, cache, n_layers, B)
        undo = install(torch, model, cache, adapter, v3)
        adapter.import_history(cache)  # admissions and reclaims count from here; stats are never reset
        adapter.active = True
        try:
            dhs_toks, dhs_logits = decode(torch, model, cache, lg1.argmax(-1), a.steps, adapter.begin_step,
                                          adapter.end_step)
        finally:
            adapter.active = False
        synchronize()
        elapsed = time.time() - t0
        st, m = adapter.ctx.stats(), adapter.ctx.mem()
        inv = adapter.ctx.check_invariants()
        res.update(steps=a.steps, rounds=adapter.step_rounds, stats=st, mem=m, invariants=inv,
                   graphs=len(adapter.graphs), graph_error=adapter.graph_error, elapsed=elapsed,
                   graph_wanted=adapter.graph)
        # ---------------- negative control: the same continuation with the selected V rows NOT scattered
        # must differ from the reference continuing from the same tokens (so the comparison can fail)
        ctrl_differs = None
        if a.control and torch.equal(ref_toks[:, -1], dhs_toks[:, -1]):
            use("ref")
            _, r_logits = decode(torch, model, ref_cache, ref_toks[:, -1], a.control)
            use("dhs")
            adapter.corrupt = True
            adapter.active = True
            try:
                _, c_logits = decode(torch, model, cache, dhs_toks[:, -1], a.control, adapter.begin_step,
                                     adapter.end_step)
            finally:
                adapter.active = False
                adapter.corrupt = False
            ctrl_differs = not torch.equal(c_logits[:, 0], r_logits[:, 0])
            say(f"negative control ({a.control} steps, V rows of the selection not scattered): first-step logits "
                f"differ from the reference: {ctrl_differs} (max |diff| "
                f"{(c_logits[:, 0] - r_logits[:, 0]).abs().max().item():.3g})")
        elif a.control:
            say("negative control skipped: the last tokens already differ")
        del ref_cache
        undo()
        adapter.close()
    # ---------------- verdict
    tok_equal = torch.equal(ref_toks, dhs_toks)
    logit_equal = torch.equal(ref_logits, dhs_logits)
    maxdiff = float((ref_logits - dhs_logits).abs().nan_to_num(float("inf")).max().item())
    nan = bool(torch.isnan(dhs_logits).any().item())
    first_bad = None
    if not tok_equal:
        bad = (ref_toks != dhs_toks).any(0).nonzero()
        first_bad = int(bad[0].item()) if len(bad) else None
    st = res["stats"]
    say("=" * 72)
    say(f"sessions {B}, prompt {prompts.shape[1]}, steps compared {a.steps} (x {B} sessions = {a.steps * B} "
        f"tokens), rounds {res['rounds']}, {res['elapsed']:.1f} s")
    say(f"tokens identical: {tok_equal}" + ("" if tok_equal else f" (first differing step {first_bad})"))
    say(f"logits bitwise identical: {logit_equal}; max |diff| {maxdiff:.3g}; NaN in dhisparse logits: {nan}")
    if res["graph_wanted"]:
        say(f"CUDA graphs: {res['graphs']} captured (one per layer), each replayed {res['rounds']} times"
            + (f"; capture failed: {res['graph_error']}" if res["graph_error"] else ""))
    else:
        say("CUDA graphs: not used (--no-graph or CPU backend)")
    say(f"dhisparse stats: resolve_calls {st.resolve_calls}, entries {st.entries}, census direct/hot/host "
        f"{st.census_direct}/{st.census_hot}/{st.census_host}, misses {st.distinct_misses} "
        f"({st.host_bytes_copied} B from host), staging rows {st.staging_rows}, admissions {st.admissions}, "
        f"reclaims {st.reclaims} ({st.reclaimed_pages} pages), repopulated pages {st.repopulated_pages}, "
        f"backups {st.backup_rows} rows")
    say(f"memory: pool {res['mem'].pool_bytes} B, device allocated {res['mem'].device_bytes_allocated} B, host allocated "
        f"{res['mem'].host_bytes_allocated} B; invariants: {res['invariants']}")
    if not a.no_poison:
        say("the model cache's own K/V were NaN-poisoned after every update: attention read only dhisparse rows")
    ok = tok_equal and logit_equal and pre_equal and res["invariants"][0] == 0
    if st.distinct_misses == 0 or st.reclaims == 0:
        say(f"the device budget did not force misses ({st.distinct_misses}) and reclaims ({st.reclaims}): "
            "lower --spare-pages")
    ok = ok and st.distinct_misses > 0 and st.reclaims > 0
    if a.control and ctrl_differs is not True:
        say("negative control did not differ (or was skipped): the comparison could not have failed")
        ok = False
    if res["graph_wanted"] and (res["graph_error"] is not None or res["graphs"] != n_layers):
        ok = False
    res.update(tokens_equal=tok_equal, logits_equal=logit_equal, max_diff=maxdiff, control_differs=ctrl_differs,
               prefill_equal=pre_equal)
    say(f"RESULT: {'PASS' if ok else 'FAIL'}")
    return ok, res


def run(a):
    try:
        import torch
    except ImportError as e:
        raise SetupError(f"torch is not installed ({e})")
    if not torch.cuda.is_available():
        raise SetupError("torch sees no CUDA device")
    import dhisparse as dhs
    if not dhs.cuda_available(a.device):
        raise SetupError(f"{dhs.lib_path} has no CUDA backend or no device {a.device} (build with -DDHS_CUDA=ON)")
    mt, cfg_cls = find_model(torch, a.model)
    model = build_model(torch, a, mt, cfg_cls)
    v3 = V3Indexer(torch, model, a.topk) if mt == "deepseek_v3" else None
    n_layers = model.config.num_hidden_layers
    dev = torch.device(f"cuda:{a.device}")
    g = torch.Generator().manual_seed(a.seed + 1)
    prompts = torch.randint(2, a.vocab, (a.sessions, a.prompt), generator=g).to(dev)
    s = torch.cuda.Stream(device=dev)
    try:
        ok, _ = compare(a, torch, dhs, model, prompts, s, n_layers, v3)
    finally:
        if v3 is not None:
            v3.close()
    return 0 if ok else 1


def main(argv=None):
    a = parse_args(argv)
    say("args: " + " ".join(f"{k}={v}" for k, v in sorted(vars(a).items())))
    try:
        return run(a)
    except NoDsaModel as e:
        say(f"NO DSA MODEL: {e}")
        return 3
    except SetupError as e:
        say(f"SETUP: {e}")
        return 2
    except Exception:
        traceback.print_exc()
        say("RESULT: FAIL (exception above)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
