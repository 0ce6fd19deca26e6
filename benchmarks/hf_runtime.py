#!/usr/bin/env python3
"""transformers' LlamaForCausalLM on the shapes of bench_model_gpu: the hf_full_ms column.

  hf_runtime.py --out hf.json [--k 0,10,20,50,100,200] [--batch 1,32] [--runs 10]
                [--warmup 2] [--tiny] [--device cuda]

Llama-3-8B geometry (32 layers, 4096 wide, 32 heads over 8 KV heads, FFN 14336,
vocabulary 128256, rope theta 500000 with llama3 scaling, untied head) with random
bf16 weights made on the device, attn_implementation "sdpa". Per case: a full
prefill of 32 + k * 24 + 32 random tokens (use_cache True, the logits of the last
token only), the median of --runs CUDA-event-timed calls after --warmup; batch 1 for
every k, batches above 1 at k = 50. Writes rows {"k", "batch", "hf_full_ms"} and one
{"transformers", "torch", "gpu"}. --tiny: 2 layers, small dims (a smoke run; with
--device cpu it runs without a GPU, timed with perf_counter).
"""
import argparse
import inspect
import json
import statistics
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

SYS, FACT, QUESTION = 32, 24, 32


def config(tiny):
    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}
    if tiny:
        dims = dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2)
    else:
        dims = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8)
    # transformers 5 holds theta in rope_parameters; 4.x takes rope_theta and rope_scaling.
    if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
        rope_kw = {"rope_parameters": dict(rope, rope_theta=500000.0)}
    else:
        rope_kw = {"rope_theta": 500000.0, "rope_scaling": rope}
    return LlamaConfig(**dims, **rope_kw, max_position_embeddings=8192, rms_norm_eps=1e-5,
                       tie_word_embeddings=False, attn_implementation="sdpa")


def build(cfg, dev):
    """The model with its weights made (and randomly initialised) on dev in bf16."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(dev):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    return model.eval()


def timer(dev):
    """A function timing fn() in milliseconds: CUDA events on a GPU, perf_counter on the CPU."""
    if dev.startswith("cuda"):
        def run(fn):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            return s.elapsed_time(e)
    else:
        def run(fn):
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e3
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="hf_runtime.json")
    ap.add_argument("--k", default="0,10,20,50,100,200")
    ap.add_argument("--batch", default="1,32", help="batch sizes; batches above 1 run k = 50 only")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--tiny", action="store_true", help="2 layers, small dims: a smoke run")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()

    torch.manual_seed(0)
    cfg = config(a.tiny)
    model = build(cfg, a.device)
    params = inspect.signature(model.forward).parameters
    keep = ({"logits_to_keep": 1} if "logits_to_keep" in params else
            {"num_logits_to_keep": 1} if "num_logits_to_keep" in params else {})
    time_ms = timer(a.device)
    rows = []
    with torch.inference_mode():
        for batch in [int(x) for x in a.batch.split(",")]:
            for k in ([int(x) for x in a.k.split(",")] if batch == 1 else [50]):
                n = SYS + k * FACT + QUESTION
                ids = torch.randint(0, cfg.vocab_size - 1, (batch, n), device=a.device)

                def full():
                    return model(input_ids=ids, use_cache=True, **keep).logits

                for _ in range(a.warmup):
                    full()
                logits = full()
                if logits.shape[1] != 1 and keep:
                    raise SystemExit(f"logits of {logits.shape[1]} tokens, expected the last one only")
                if not torch.isfinite(logits).all():
                    raise SystemExit(f"k={k} batch={batch}: logits are not finite")
                ms = statistics.median(time_ms(full) for _ in range(a.runs))
                rows.append({"k": k, "batch": batch, "hf_full_ms": round(ms, 3)})
                print(json.dumps(rows[-1]), flush=True)
    gpu = torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu"
    rows.append({"transformers": transformers.__version__, "torch": torch.__version__, "gpu": gpu,
                 "runs": a.runs, "logits": "last token" if keep else "all tokens"})
    print(json.dumps(rows[-1]), flush=True)
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
