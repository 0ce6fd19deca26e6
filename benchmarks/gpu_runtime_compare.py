#!/usr/bin/env python3
"""The GPU model runtime against the torch reference engine and transformers, from one device run.

  gpu_runtime_compare.py OURS.json [REF.json] [OUT.json] [--hf HF.json]

OURS.json is bench_model_gpu's output: rows {"k", "batch", "ours_full_ms",
"ours_question_ms", "ours_question_eager_ms", ...} and one object holding "decode_ms"
and "decode_batch32_ms". REF.json is shared/bench/torch_engine_ref.py's: rows {"k",
"batch", "full_ms", "q_graph_ms", ...} and one object holding "gpu". HF.json is
benchmarks/hf_runtime.py's: rows {"k", "batch", "hf_full_ms"} and one object holding
"transformers". A missing or unreadable REF.json or HF.json leaves its fields null.
Writes OUT.json (default benchmarks/results/gpu-runtime-h200.json): rows {"k", "batch",
"ours_full_ms", "ours_full_eager_ms", "ours_full_graph_ms", "ours_question_ms",
"ours_question_eager_ms", "ref_full_ms", "ref_question_graph_ms", "hf_full_ms"}, then
{"decode_ms", "decode_batch32_ms", "weight_read_floor_ms", "encode_facts_per_s",
"encode_facts", "gpu", "transformers"}; prints a markdown table with the ratios ours / ref and ours /
transformers (below 1: ours is faster).
"""
import argparse
import json
import os
import sys


def split(rows):
    """(rows keyed by (k, batch), the one summary object without "k")."""
    keyed = {(r["k"], r["batch"]): r for r in rows if "k" in r}
    summary = [r for r in rows if "k" not in r]
    return keyed, summary[-1] if summary else {}


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def ms(x):
    return f"{x:.2f}" if x is not None else "-"


def load(path, what):
    """split() of the JSON at path, or empty when it cannot be read."""
    if not path:
        return {}, {}
    try:
        with open(path) as f:
            return split(json.load(f))
    except (OSError, ValueError) as e:
        print(f"no {what} ({path}: {e}); its fields are null", file=sys.stderr)
        return {}, {}


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("ours")
    ap.add_argument("ref", nargs="?")
    ap.add_argument("out", nargs="?", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "gpu-runtime-h200.json"))
    ap.add_argument("--hf")
    a = ap.parse_args()
    with open(a.ours) as f:
        ours, ours_sum = split(json.load(f))
    ref, ref_sum = load(a.ref, "reference")
    hf, hf_sum = load(a.hf, "transformers run")

    rows = []
    for key in sorted(ours):
        o, r, h = ours[key], ref.get(key, {}), hf.get(key, {})
        rows.append({"k": key[0], "batch": key[1], "ours_full_ms": o["ours_full_ms"],
                     "ours_full_eager_ms": o.get("ours_full_eager_ms"),
                     "ours_full_graph_ms": o.get("ours_full_graph_ms"),
                     "ours_question_ms": o["ours_question_ms"],
                     "ours_question_eager_ms": o.get("ours_question_eager_ms"),
                     "ref_full_ms": r.get("full_ms"), "ref_question_graph_ms": r.get("q_graph_ms"),
                     "hf_full_ms": h.get("hf_full_ms")})
    rows.append({"decode_ms": ours_sum.get("decode_ms"), "decode_batch32_ms": ours_sum.get("decode_batch32_ms"),
                 "weight_read_floor_ms": ours_sum.get("weight_read_floor_ms"),
                 "encode_facts_per_s": ours_sum.get("encode_facts_per_s"),
                 "encode_facts": ours_sum.get("encode_facts"), "gpu": ours_sum.get("gpu"),
                 "transformers": hf_sum.get("transformers")})
    for other, name in ((ref_sum, "the reference"), (hf_sum, "transformers")):
        if other.get("gpu") and other["gpu"] != ours_sum.get("gpu"):
            print(f"warning: ours ran on {ours_sum.get('gpu')}, {name} on {other['gpu']}", file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")

    print(f"GPU model runtime, Llama-3-8B geometry, random bf16 weights ({ours_sum.get('gpu')}; "
          f"transformers {hf_sum.get('transformers')})\n")
    print("| k | batch | ours full ms | ref full ms | hf full ms | full ours/ref | full ours/hf "
          "| ours question (graph) ms | ours question (eager) ms | ref question (graph) ms | question ours/ref |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows[:-1]:
        print(f"| {r['k']} | {r['batch']} | {ms(r['ours_full_ms'])} | {ms(r['ref_full_ms'])} "
              f"| {ms(r['hf_full_ms'])} | {ratio(r['ours_full_ms'], r['ref_full_ms'])} "
              f"| {ratio(r['ours_full_ms'], r['hf_full_ms'])} | {ms(r['ours_question_ms'])} "
              f"| {ms(r['ours_question_eager_ms'])} | {ms(r['ref_question_graph_ms'])} "
              f"| {ratio(r['ours_question_ms'], r['ref_question_graph_ms'])} |")
    s = rows[-1]
    print(f"\ndecode (graph, mean step of {ours_sum.get('decode_steps')} from n_past "
          f"{ours_sum.get('decode_n_past')}): batch 1 {ms(s['decode_ms'])} ms, batch 32 "
          f"{ms(s['decode_batch32_ms'])} ms; weight-read floor {ms(s['weight_read_floor_ms'])} ms "
          f"(batch-1 decode / floor {ratio(s['decode_ms'], s['weight_read_floor_ms'])})")
    rate = s["encode_facts_per_s"]
    print(f"fact encoding (device, {s['encode_facts']} facts of 24 tokens after a 32-token context, "
          f"K/V to the host in bf16): {f'{rate:.0f}' if rate is not None else '-'} facts/s")
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
