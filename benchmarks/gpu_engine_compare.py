#!/usr/bin/env python3
"""The engine on a GPU against the torch reference engine and transformers, from one device run.

  gpu_engine_compare.py OURS.json [REF.json] [OUT.json] [--hf HF.json]

OURS.json is bench_engine_gpu's output: {"gpu", "embedder", "rows": [{"k", "ttft_inject_ms",
"embed_ms", "retrieve_ms", "inject_ms", "prefill_ms", "ttft_full_ms", ...}], "throughput":
{...}}. REF.json is shared/bench/torch_engine_ref.py's (rows {"k", "batch", "full_ms",
"q_graph_ms"}), HF.json benchmarks/hf_runtime.py's (rows {"k", "batch", "hf_full_ms"}); a
missing or unreadable one leaves its fields null. Writes OUT.json (default
benchmarks/results/gpu-engine-h200.json): {"gpu", "embedder", "rows": [{"k",
"ttft_inject_ms", "embed_ms", "retrieve_ms", "inject_ms", "prefill_ms", "ttft_full_ms",
"device_path" (the question's device path answered), "ttft_host_path_ms" (the same questions by
the host path), "ref_full_ms", "ref_question_graph_ms", "hf_full_ms"}], "throughput": {"concurrency",
"req_per_s_inject", "req_per_s_full", "prefill_tok_per_s_inject", "prefill_tok_per_s_full",
"gpu", ...}, "recovery": [...] (bench_engine_gpu's rows of accuracy recovery: "mode", "k",
"ttft_ms", "ttft_full_ms", ...)}; prints a markdown table and the issue's targets, met or not.
"""
import argparse
import json
import os
import sys


def rows_by_k(path, what):
    """{k: row} of the batch-1 rows of the JSON list at path, and its summary object."""
    if not path:
        return {}, {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"no {what} ({path}: {e}); its fields are null", file=sys.stderr)
        return {}, {}
    keyed = {r["k"]: r for r in data if "k" in r and r.get("batch", 1) == 1}
    summary = [r for r in data if "k" not in r]
    return keyed, summary[-1] if summary else {}


def ms(x):
    return f"{x:.2f}" if x is not None else "-"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("ours")
    ap.add_argument("ref", nargs="?")
    ap.add_argument("out", nargs="?", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "gpu-engine-h200.json"))
    ap.add_argument("--hf")
    a = ap.parse_args()
    with open(a.ours) as f:
        ours = json.load(f)
    ref, _ = rows_by_k(a.ref, "reference")
    hf, hf_sum = rows_by_k(a.hf, "transformers run")
    keep = ("k", "prompt_tokens", "question_tokens", "ttft_inject_ms", "embed_ms", "retrieve_ms", "inject_ms",
            "prefill_ms", "ttft_full_ms", "device_path", "ttft_host_path_ms")
    rows = []
    for o in ours["rows"]:
        r = {key: o.get(key) for key in keep}
        r["ref_full_ms"] = ref.get(o["k"], {}).get("full_ms")
        r["ref_question_graph_ms"] = ref.get(o["k"], {}).get("q_graph_ms")
        r["hf_full_ms"] = hf.get(o["k"], {}).get("hf_full_ms")
        rows.append(r)
    tp = dict(ours["throughput"], gpu=ours.get("gpu"))
    result = {"gpu": ours.get("gpu"), "embedder": ours.get("embedder"), "facts": ours.get("facts"),
              "transformers": hf_sum.get("transformers"), "rows": rows, "throughput": tp,
              "recovery": ours.get("recovery", [])}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")

    print(f"The engine on a GPU, Llama-3-8B geometry, random bf16 weights, {ours.get('facts')} facts of "
          f"{ours.get('fact_tokens')} tokens, embedder on the {ours.get('embedder')} ({ours.get('gpu')})\n")
    print("| k | prompt | path | TTFT inject ms | host path ms | embed | retrieve | inject | prefill | TTFT full ms "
          "| full / inject | ref full ms | ref question (graph) ms | inject / ref question | hf full ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        path = "device" if r.get("device_path") else "host"
        print(f"| {r['k']} | {r['prompt_tokens']} | {path} | {ms(r['ttft_inject_ms'])} "
              f"| {ms(r.get('ttft_host_path_ms'))} | {ms(r['embed_ms'])} "
              f"| {r['retrieve_ms']:.3f} | {r['inject_ms']:.3f} | {ms(r['prefill_ms'])} | {ms(r['ttft_full_ms'])} "
              f"| {ratio(r['ttft_full_ms'], r['ttft_inject_ms'])} | {ms(r['ref_full_ms'])} "
              f"| {ms(r['ref_question_graph_ms'])} | {ratio(r['ttft_inject_ms'], r['ref_question_graph_ms'])} "
              f"| {ms(r['hf_full_ms'])} |")
    print(f"\n{tp['concurrency']} requests at k = {tp['k']}, {tp['answer_tokens']}-token answers: "
          f"{tp['req_per_s_inject']:.1f} req/s by injection, {tp['req_per_s_full']:.1f} by full recompute "
          f"({tp['req_per_s_inject'] / tp['req_per_s_full']:.2f}x); output {tp['out_tok_per_s_inject']:.0f} vs "
          f"{tp['out_tok_per_s_full']:.0f} tokens/s; prefill phase {tp['prefill_tok_per_s_inject']:.0f} vs "
          f"{tp['prefill_tok_per_s_full']:.0f} prompt positions/s "
          f"({tp['prefill_tok_per_s_inject'] / tp['prefill_tok_per_s_full']:.1f}x)")
    if result["recovery"]:
        print("\n| recovery mode | k | recomputed | TTFT ms | prefill + recompute ms | TTFT full ms | full / mode |")
        print("|---|---|---|---|---|---|---|")
        for r in result["recovery"]:
            print(f"| {r['mode']} | {r['k']} | {r['recomputed']} of {r['recomputable']} | {ms(r['ttft_ms'])} "
                  f"| {ms(r['prefill_ms'])} | {ms(r['ttft_full_ms'])} | {ratio(r['ttft_full_ms'], r['ttft_ms'])} |")
    by_k = {r["k"]: r for r in rows}
    k50, k200 = by_k.get(50, {}), by_k.get(200, {})

    def target(name, value, want, ok):
        print(f"- {name}: {value} (target {want}): {'met' if ok else 'MISSED'}")

    print("\nTargets:")
    t50 = k50.get("ttft_inject_ms")
    target("TTFT with injection at k = 50", f"{ms(t50)} ms", "<= 5 ms", t50 is not None and t50 <= 5)
    rq = k50.get("ref_question_graph_ms")
    target("... vs the reference's question-only graph", ratio(t50, rq), "<= 0.67x",
           t50 is not None and rq and t50 / rq <= 0.67)
    for k, want in ((50, 6), (200, 20)):
        r = by_k.get(k, {})
        v = r["ttft_full_ms"] / r["ttft_inject_ms"] if r.get("ttft_inject_ms") else None
        target(f"full recompute / injection at k = {k}", ratio(r.get("ttft_full_ms"), r.get("ttft_inject_ms")),
               f">= {want}x", v is not None and v >= want)
    rps = tp["req_per_s_inject"] / tp["req_per_s_full"]
    target("requests/s, injection / full recompute", f"{rps:.2f}x", ">= 5x", rps >= 5)
    pre = tp["prefill_tok_per_s_inject"] / tp["prefill_tok_per_s_full"]
    target("prefill-phase throughput, injection / full recompute", f"{pre:.1f}x", ">= 20x", pre >= 20)
    for r in result["recovery"]:
        if r["k"] == 50:
            v = r["ttft_full_ms"] / r["ttft_ms"] if r.get("ttft_ms") else None
            target(f"full recompute / recovery ({r['mode']}) at k = 50", ratio(r["ttft_full_ms"], r["ttft_ms"]),
                   ">= 4x", v is not None and v >= 4)
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
