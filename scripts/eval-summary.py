#!/usr/bin/env python3
"""Pools `inferscale eval` results (JSON files, one point or a list of
points each) over conversations: for every (k, mode, recompute ratio,
calibration) the means weighted by questions of first-token agreement with
full recompute, its floor (full recompute in two steps against one),
first-token KL and its floor, identical answers, answer token F1 against
full recompute's answer, F1 against the gold answers of both ways, and the
share of fact tokens recomputed. Prints a Markdown table (and writes it
with --md, the numbers with --json)."""
import argparse
import json
import sys
from collections import OrderedDict

METRICS = [
    ("first_token_agreement", "first token"),
    ("floor_first_token_agreement", "floor"),
    ("kl_first_token_mean", "KL"),
    ("floor_kl_first_token_mean", "floor KL"),
    ("answer_agreement", "same answer"),
    ("answer_f1_vs_full", "F1 vs full"),
    ("f1_inject", "F1 gold"),
    ("f1_full", "F1 gold (full)"),
    ("recompute_fraction", "recomputed"),
]


def points(paths):
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for p in data if isinstance(data, list) else [data]:
            yield path, p


def pool(paths):
    groups = OrderedDict()
    for path, p in points(paths):
        key = (p["k"], p["mode"], p["recompute_ratio"], p.get("fact_temperature", 1.0), p.get("fact_scale", 1.0))
        g = groups.setdefault(key, {"n": 0, "files": [], **{m: 0.0 for m, _ in METRICS}})
        n = p["n_questions"]
        g["n"] += n
        g["files"].append(path)
        for m, _ in METRICS:
            g[m] += p[m] * n
    rows = []
    for (k, mode, ratio, t, s), g in sorted(groups.items(), key=lambda kv: kv[0]):
        row = {"k": k, "mode": mode, "recompute_ratio": ratio, "fact_temperature": t, "fact_scale": s,
               "n_questions": g["n"], "n_files": len(g["files"])}
        for m, _ in METRICS:
            row[m] = g[m] / g["n"] if g["n"] else 0.0
        rows.append(row)
    return rows


def table(rows):
    head = ["k", "mode", "r", "T:S", "questions"] + [label for _, label in METRICS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["k"]), r["mode"], "%g" % r["recompute_ratio"],
                 "%g:%s" % (r["fact_temperature"], "%g" % r["fact_scale"] if r["fact_scale"] else "auto"),
                 str(r["n_questions"])]
        for m, _ in METRICS:
            v = r[m]
            cells.append("%.1f%%" % (100 * v) if m.endswith("agreement") else "%.3f" % v)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = pool(a.files)
    if not rows:
        sys.exit("eval-summary: no points in " + " ".join(a.files))
    md = table(rows)
    sys.stdout.write(md)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
