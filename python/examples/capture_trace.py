#!/usr/bin/env python3
"""Capture a DSA model's indexer selections into a `dhs trace` file (docs/LOCALITY.md "Real traces").

Builds transformers' DeepseekV32ForCausalLM (or GlmMoeDsaForCausalLM) at a small size with random weights,
prefills a batch of random prompts, decodes greedily, and records every layer's top-k of every decode step
with dhisparse.trace.IndexerCapture. With a real checkpoint the same capture records real locality: load it
instead of build_model (the capture needs only the model object). A random model has NO real locality: its
selections say nothing about DeepSeek-V3.2's; the trace is a format and plumbing check.

    python3 python/examples/capture_trace.py --out tiny.dhst --sessions 2 --prompt 256 --steps 32
    build/dhs trace info tiny.dhst
    build/dhs trace stats tiny.dhst

Needs PyTorch, a CUDA device and transformers with a DSA model (the H200 machine has them)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hf_dsa_decode as hf  # noqa: E402  (the model-building helpers)
from dhisparse.trace import IndexerCapture  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="trace file to write")
    p.add_argument("--model", default="auto", help="deepseek_v32 | glm_moe_dsa | auto")
    p.add_argument("--sessions", type=int, default=2)
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--topk", type=int, default=64)
    p.add_argument("--row-bytes", type=int, default=656, help="bytes per KV row recorded in the trace header")
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("capture_trace: no CUDA device", file=sys.stderr)
        return 77
    mt, cfg_cls = hf.find_model(torch, a.model)
    if mt == "deepseek_v3":
        print("capture_trace: this transformers has no DSA model (deepseek_v32, glm_moe_dsa)", file=sys.stderr)
        return 77
    ha = hf.parse_args(["--model", mt, "--sessions", str(a.sessions), "--prompt", str(a.prompt), "--steps",
                        str(a.steps), "--layers", str(a.layers), "--topk", str(a.topk), "--seed", str(a.seed)])
    model = hf.build_model(torch, ha, mt, cfg_cls)
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    prompts = torch.randint(2, ha.vocab, (a.sessions, a.prompt), generator=g).to("cuda")
    meta = (f'{{"capture": "IndexerCapture", "model": "{type(model).__name__}", "weights": "random", '
            f'"layers": {a.layers}, "topk": {a.topk}, "seed": {a.seed}}}')
    cap = IndexerCapture(torch, model, a.out, k=a.topk, row_bytes=a.row_bytes, batch=a.sessions,
                         name=f"{mt} random weights (no real locality)", meta=meta)
    try:
        with torch.no_grad():
            logits, cache = hf.prefill(torch, model, prompts)
            cap.begin([a.prompt] * a.sessions)
            tok = logits.argmax(-1)
            for _ in range(a.steps):
                with cap.step():
                    out = model(input_ids=tok[:, None], past_key_values=cache, use_cache=True)
                tok = out.logits[:, -1].float().argmax(-1)
    finally:
        cap.close()
    print(f"capture_trace: {a.out}: {cap.L} layers x {a.steps} rounds x {a.sessions} sessions, k {a.topk}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
