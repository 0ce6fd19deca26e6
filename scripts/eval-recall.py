#!/usr/bin/env python3
"""The LoCoMo recall@k table and embedding throughput of sentence-transformers, as the
reference for benchmarks/embed_locomo (docs/embedder.md). Needs torch.

    python3 scripts/eval-recall.py [locomo-dir [model-dir]]

locomo-dir defaults to ../shared/data/locomo beside the checkout, model-dir to
$INFS_CACHE/minilm. The metric is embed_locomo's: a category 1-4 question is covered at
k when every evidence dia_id ("D8:6; D9:17" holds two) is cited by one of the k facts
of its conversation most similar to it; the ceiling uses all of them.
"""
import glob
import json
import os
import sys
import time

import numpy as np
from sentence_transformers import SentenceTransformer

KS = [10, 20, 50]


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    locomo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(repo, "..", "shared", "data", "locomo")
    cache = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
    model_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(cache, "minilm")
    model = SentenceTransformer(model_dir, device="cpu")
    model.encode(["warm up"])

    covered = {c: [0] * (len(KS) + 1) for c in range(5)}
    asked = [0] * 5
    n_texts, wall, cpu = 0, 0.0, 0.0
    for path in sorted(glob.glob(os.path.join(locomo, "conv-*.json"))):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        facts = []
        for key, sess in d.items():
            if key.startswith("session_") and key.endswith("_observation"):
                for items in sess.values():
                    for text, cites in items:
                        facts.append((text, cites if isinstance(cites, list) else [cites]))
        qs = [q for q in d["qa"] if q["category"] in (1, 2, 3, 4)]
        texts = [f[0] for f in facts] + [q["question"] for q in qs]
        t0, c0 = time.perf_counter(), time.process_time()
        emb = model.encode(texts, batch_size=32)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        n_texts += len(texts)
        fe, qe = emb[:len(facts)], emb[len(facts):]
        scores = qe @ fe.T
        for qi, q in enumerate(qs):
            evidence = [t for e in q["evidence"] for t in e.replace(";", " ").split()]
            order = np.argsort(-scores[qi], kind="stable")
            for i, k in enumerate(KS + [len(facts)]):
                cited = {c for f in order[:k] for c in facts[f][1]}
                ok = bool(evidence) and all(e in cited for e in evidence)
                covered[0][i] += ok
                covered[q["category"]][i] += ok
            asked[0] += 1
            asked[q["category"]] += 1

    names = ["all", "1", "2", "3", "4"]
    print(json.dumps({
        "model": model_dir,
        "questions": {names[c]: asked[c] for c in range(5)},
        "recall": {names[c]: dict(zip(["@%d" % k for k in KS] + ["ceiling"],
                                      [round(x / asked[c], 4) for x in covered[c]]))
                   for c in range(5) if asked[c]},
        "embedding": {"texts": n_texts, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                      "texts_per_s": round(n_texts / wall, 1)},
    }, indent=2))


if __name__ == "__main__":
    main()
