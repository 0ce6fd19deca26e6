#!/usr/bin/env python3
"""The GPU model runtime against the torch reference engine, from one device run.

  gpu_runtime_compare.py OURS.json [REF.json] [OUT.json]

OURS.json is bench_model_gpu's output: rows {"k", "batch", "ours_full_ms",
"ours_question_ms", ...} and one object holding "decode_ms". REF.json is
shared/bench/torch_engine_ref.py's: rows {"k", "batch", "full_ms", "q_graph_ms", ...}
and one object holding "gpu"; when it is missing or unreadable the ref_* fields are
null. Writes OUT.json (default benchmarks/results/gpu-runtime-h200.json): rows
{"k", "batch", "ours_full_ms", "ours_question_ms", "ref_full_ms",
"ref_question_graph_ms", "hf_full_ms"} (hf_full_ms: null, transformers is not run),
then {"decode_ms", "weight_read_floor_ms", "encode_facts_per_s": null, "gpu"}; prints
a markdown table with the ratios ours / ref (below 1: ours is faster).
"""
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


def main():
    if not 2 <= len(sys.argv) <= 4:
        sys.exit(__doc__)
    ours, ours_sum = split(json.load(open(sys.argv[1])))
    ref, ref_sum = {}, {}
    ref_path = sys.argv[2] if len(sys.argv) > 2 else None
    if ref_path:
        try:
            ref, ref_sum = split(json.load(open(ref_path)))
        except (OSError, ValueError) as e:
            print(f"no reference ({ref_path}: {e}); ref_* fields are null", file=sys.stderr)
    out_path = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "gpu-runtime-h200.json")

    rows = []
    for key in sorted(ours):
        o, r = ours[key], ref.get(key, {})
        rows.append({"k": key[0], "batch": key[1], "ours_full_ms": o["ours_full_ms"],
                     "ours_question_ms": o["ours_question_ms"], "ref_full_ms": r.get("full_ms"),
                     "ref_question_graph_ms": r.get("q_graph_ms"), "hf_full_ms": None})
    rows.append({"decode_ms": ours_sum.get("decode_ms"),
                 "weight_read_floor_ms": ours_sum.get("weight_read_floor_ms"),
                 "encode_facts_per_s": None, "gpu": ours_sum.get("gpu")})
    if ref_sum.get("gpu") and ref_sum["gpu"] != ours_sum.get("gpu"):
        print(f"warning: ours ran on {ours_sum.get('gpu')}, the reference on {ref_sum['gpu']}", file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")

    print(f"GPU model runtime, Llama-3-8B geometry, random bf16 weights ({ours_sum.get('gpu')})\n")
    print("| k | batch | ours full ms | ref full ms | full ours/ref | ours question ms | ref question (graph) ms "
          "| question ours/ref |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows[:-1]:
        print(f"| {r['k']} | {r['batch']} | {ms(r['ours_full_ms'])} | {ms(r['ref_full_ms'])} "
              f"| {ratio(r['ours_full_ms'], r['ref_full_ms'])} | {ms(r['ours_question_ms'])} "
              f"| {ms(r['ref_question_graph_ms'])} | {ratio(r['ours_question_ms'], r['ref_question_graph_ms'])} |")
    s = rows[-1]
    print(f"\ndecode (1 token at n_past {ours_sum.get('decode_n_past')}): {ms(s['decode_ms'])} ms; "
          f"weight-read floor {ms(s['weight_read_floor_ms'])} ms "
          f"(decode / floor {ratio(s['decode_ms'], s['weight_read_floor_ms'])})")
    print(f"written: {out_path}")


if __name__ == "__main__":
    main()
