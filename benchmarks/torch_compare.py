#!/usr/bin/env python3
"""Runs the plain torch versions of the GPU benchmarks on the same shapes and
merges them with the C benchmarks' JSON:

  inject:   gather the facts' pre-RoPE K and V, rotate K in fp32 (NeoX pairs,
            llama3 frequencies, angles in float64), scatter K and V into a
            vLLM-layout cache (layers, 2, blocks * 16, heads, dim) by slot.
  retrieve: torch.topk(queries @ embeddings.T, k) in f16.

Usage: torch_compare.py inject.json retrieve.json out.json [out.md]
"""
import json
import math
import sys

import torch

L, H, D, T, BS, NB, FACTS, SETS = 32, 8, 128, 24, 16, 4096, 800, 8


def median_us(fn, reps=50, warmup=5):
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def llama3_inv_freq():
    inv = [1.0 / (500000.0 ** (2 * i / D)) for i in range(D // 2)]
    out = []
    for f in inv:
        wl = 2 * math.pi / f
        if wl > 8192 / 1.0:
            f = f / 8.0
        elif wl >= 8192 / 4.0:
            s = (8192 / wl - 1.0) / (4.0 - 1.0)
            f = (1 - s) * f / 8.0 + s * f
        out.append(f)
    return torch.tensor(out, dtype=torch.float32, device="cuda")


def bench_inject(ks):
    dev = "cuda"
    pool = torch.randn(FACTS, 2, L, T, H, D, dtype=torch.bfloat16, device=dev)
    cache = torch.zeros(L, 2, NB * BS, H, D, dtype=torch.bfloat16, device=dev)
    inv_freq = llama3_inv_freq().double()
    res = {}
    for k in ks:
        start = 37
        n = k * T
        sets = []
        for s in range(SETS):
            ids = torch.tensor([(s * 211 + f * 3) % FACTS for f in range(k)], device=dev)
            nblk = (start + n - 1) // BS - start // BS + 1
            blocks = torch.tensor([(s * 509 + b * 13) % NB for b in range(nblk)], device=dev)
            sets.append((ids, blocks))

        def run(i):
            ids, blocks = sets[i % SETS]
            kv = pool[ids]                                   # k, 2, L, T, H, D
            kk = kv[:, 0].permute(1, 0, 2, 3, 4).reshape(L, n, H, D)
            vv = kv[:, 1].permute(1, 0, 2, 3, 4).reshape(L, n, H, D)
            pos = torch.arange(start, start + n, device=dev)
            ang = pos.double()[:, None] * inv_freq[None, :]
            c = torch.cos(ang).float()[None, :, None, :]
            s_ = torch.sin(ang).float()[None, :, None, :]
            x = kk.float()
            x1, x2 = x[..., : D // 2], x[..., D // 2 :]
            rot = torch.cat((x1 * c - x2 * s_, x2 * c + x1 * s_), dim=-1).to(torch.bfloat16)
            slots = blocks[pos // BS - start // BS] * BS + pos % BS
            cache[:, 0, slots] = rot
            cache[:, 1, slots] = vv

        res[k] = median_us(run)
    del pool, cache
    torch.cuda.empty_cache()
    return res


def bench_retrieve(cases, k):
    dev = "cuda"
    res = {}
    for n, nq in cases:
        nbytes = n * 384 * 2
        copies = max(1, min(64, (512 << 20) // nbytes))
        embs = [torch.randn(n, 384, dtype=torch.float16, device=dev) / 20 for _ in range(copies)]
        q = torch.randn(nq, 384, dtype=torch.float16, device=dev) / 20

        def run(i):
            torch.topk(q @ embs[i % copies].T, k, dim=1)

        res[(n, nq)] = median_us(run)
        del embs
        torch.cuda.empty_cache()
    return res


def main():
    inj = json.load(open(sys.argv[1]))
    ret = json.load(open(sys.argv[2]))
    t_inj = bench_inject([r["k"] for r in inj["results"]])
    for r in inj["results"]:
        r["torch_us"] = round(t_inj[r["k"]], 2)
        r["speedup_vs_torch"] = round(t_inj[r["k"]] / r["inject_us"], 2)
    t_ret = bench_retrieve([(r["n"], r["queries"]) for r in ret["results"]], ret["k"])
    for r in ret["results"]:
        t = t_ret[(r["n"], r["queries"])]
        r["torch_us"] = round(t, 2)
        r["speedup_vs_torch"] = round(t / r["latency_us"], 2)
    out = {"torch": torch.__version__, "inject": inj, "retrieve": ret}
    json.dump(out, open(sys.argv[3], "w"), indent=2)

    lines = [f"GPU: {inj['gpu']} (driver {inj['driver']}, runtime {inj['runtime']}), torch {torch.__version__}", "",
             "| inject k | tokens | MB read+written | kernel us | GB/s | memcpy GB/s | vs memcpy | torch us | vs torch "
             "| API us |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    api = {r["k"]: r for r in inj.get("api", [])}
    for r in inj["results"]:
        a = api.get(r["k"], {}).get("inject_us", float("nan"))
        lines.append(f"| {r['k']} | {r['tokens']} | {(r['bytes_read'] + r['bytes_written']) / 1e6:.0f} | "
                     f"{r['inject_us']:.1f} | {r['inject_gbps']:.0f} | {r['memcpy_gbps']:.0f} | "
                     f"{r['ratio_vs_memcpy']:.2f}x | {r['torch_us']:.1f} | {r['speedup_vs_torch']:.1f}x | {a:.1f} |")
    lines += ["", f"copy bandwidth {ret['copy_gbps']:.0f} GB/s (read + written, 1 GiB), k = {ret['k']}", "",
              "| retrieve facts | queries | latency us | GEMM path us | memory bound us | vs bound "
              "| peak bound us | vs peak bound | torch us | vs torch |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in ret["results"]:
        lines.append(f"| {r['n']} | {r['queries']} | {r['latency_us']:.1f} | {r['gemm_path_us']:.1f} | {r['memory_bound_us']:.1f} | {r['ratio_vs_bound']:.2f}x | "
                     f"{r['peak_bound_us']:.1f} | {r['ratio_vs_peak_bound']:.2f}x | {r['torch_us']:.1f} | "
                     f"{r['speedup_vs_torch']:.2f}x |")
    if ret.get("api"):
        lines += ["", "| infs_retrieve (CUDA backend) facts | queries | latency us (host clock) |", "|---|---|---|"]
        for r in ret["api"]:
            lines.append(f"| {r['n']} | {r['queries']} | {r['latency_us']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if len(sys.argv) > 4:
        open(sys.argv[4], "w").write(text)


if __name__ == "__main__":
    main()
