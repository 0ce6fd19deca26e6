#!/usr/bin/env python3
"""LoCoMo (../shared/data/locomo/conv-*.json) as the inputs of `inferscale`:
facts.jsonl (every session_K_observation fact, namespace = the conversation,
with speaker, session date and the cited turn as metadata) and
questions.jsonl (categories 1-4; --per-conv N samples N per conversation,
seeded, for runs that cannot afford all 762 on a small CPU).

usage: locomo-jsonl.py LOCOMO-DIR OUT-DIR [--per-conv N] [--seed S]
Writes only derived files under OUT-DIR (outside the repository: build/)."""
import argparse
import glob
import json
import os
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("locomo")
    ap.add_argument("out")
    ap.add_argument("--per-conv", type=int, default=0, help="questions per conversation (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    n_facts = n_q = 0
    with open(os.path.join(a.out, "facts.jsonl"), "w") as ff, \
            open(os.path.join(a.out, "questions.jsonl"), "w") as qf:
        for path in sorted(glob.glob(os.path.join(a.locomo, "conv-*.json"))):
            ns = os.path.basename(path)[:-5]
            d = json.load(open(path))
            sessions = sorted(int(k.split("_")[1]) for k in d
                              if k.startswith("session_") and k.endswith("_observation"))
            for s in sessions:
                date = d.get("session_%d_date_time" % s, "")
                for speaker, facts in d["session_%d_observation" % s].items():
                    for text, dia in facts:
                        dia = dia if isinstance(dia, str) else ";".join(dia)
                        ff.write(json.dumps({"namespace": ns, "text": text, "speaker": speaker,
                                             "date": date, "evidence": dia}) + "\n")
                        n_facts += 1
            qs = [q for q in d["qa"] if q.get("category") in (1, 2, 3, 4) and "answer" in q]
            if a.per_conv:
                qs = random.Random(a.seed).sample(qs, min(a.per_conv, len(qs)))
            for q in qs:
                qf.write(json.dumps({"namespace": ns, "question": q["question"],
                                     "answer": str(q["answer"]), "category": q["category"]}) + "\n")
                n_q += 1
    print("%d facts, %d questions in %s" % (n_facts, n_q, a.out))


if __name__ == "__main__":
    main()
