"""The ``inferscale`` command: inspect a library build and a store from the shell.

    inferscale info                          version, features, library and headers
    inferscale stats STORE                   record counts and file sizes
    inferscale list STORE [NAMESPACE]        namespaces, or one namespace's ids
    inferscale retrieve STORE NS VECTORS     top-k ids and scores for query vectors

VECTORS is a .npy file (one vector or a batch) or a text file of whitespace-
separated floats, one vector per line. Add --json for machine-readable output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import List, Optional

import numpy as np


def _load_vectors(path: str) -> np.ndarray:
    if path.endswith(".npy"):
        a = np.load(path)
    else:
        a = np.loadtxt(path, dtype=np.float32, ndmin=2)
    return np.atleast_2d(np.asarray(a, dtype=np.float32))


def _emit(args: argparse.Namespace, obj, text: str) -> None:
    print(json.dumps(obj) if args.json else text)


def _info(args: argparse.Namespace) -> int:
    import inferscale as infs
    feats = infs.features()
    obj = {"version": infs.version(), "version_number": infs.version_number(),
           "features": feats, "library": infs.library_path(), "include": infs.get_include()}
    on = ", ".join(k for k, v in feats.items() if v) or "none"
    _emit(args, obj, f"inferscale {obj['version']}\nfeatures: {on}\nlibrary: {obj['library']}\n"
                     f"include: {obj['include']}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    import inferscale as infs
    with infs.Store.open(args.store, readonly=True) as store:
        stats = dataclasses.asdict(store.stats())
        geo = store.geometry
        obj = {"path": args.store, "identity": store.identity, "stats": stats,
               "geometry": {k: (v.name.lower() if hasattr(v, "name") else v)
                            for k, v in dataclasses.asdict(geo).items()}}
    lines = [f"{args.store}", f"identity: {obj['identity']}"]
    lines += [f"{k}: {v}" for k, v in stats.items()]
    lines.append("geometry: " + ", ".join(f"{k}={v}" for k, v in obj["geometry"].items()))
    _emit(args, obj, "\n".join(lines))
    return 0


def _list(args: argparse.Namespace) -> int:
    import inferscale as infs
    with infs.Store.open(args.store, readonly=True) as store:
        if args.namespace is None:
            names = store.namespaces()
            obj = {name: store.count(name) for name in names}
            _emit(args, obj, "\n".join(f"{n}\t{c}" for n, c in obj.items()))
        else:
            ids = [int(i) for i in store.list(args.namespace)]
            _emit(args, ids, "\n".join(str(i) for i in ids))
    return 0


def _retrieve(args: argparse.Namespace) -> int:
    import inferscale as infs
    queries = _load_vectors(args.vectors)
    with infs.Store.open(args.store, readonly=True) as store:
        results = store.retrieve(args.namespace, queries, args.k, metric=args.metric,
                                 backend=args.backend)
    obj = [{"ids": [int(i) for i in r.ids], "scores": [float(s) for s in r.scores]} for r in results]
    text = "\n".join(f"{q}\t{int(i)}\t{float(s):.6f}"
                     for q, r in enumerate(results) for i, s in zip(r.ids, r.scores))
    _emit(args, obj, text)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferscale", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("info", help="version and features of the library")
    s.set_defaults(func=_info)
    s = sub.add_parser("stats", help="counters of a store")
    s.add_argument("store")
    s.set_defaults(func=_stats)
    s = sub.add_parser("list", help="namespaces of a store, or the ids of one namespace")
    s.add_argument("store")
    s.add_argument("namespace", nargs="?")
    s.set_defaults(func=_list)
    s = sub.add_parser("retrieve", help="top-k facts of a namespace for query vectors")
    s.add_argument("store")
    s.add_argument("namespace")
    s.add_argument("vectors", help=".npy file or text file, one vector per line")
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--metric", default="cosine", choices=["cosine", "ip"])
    s.add_argument("--backend", default="auto", choices=["auto", "exact", "faiss", "cuda"])
    s.set_defaults(func=_retrieve)
    for action in sub.choices.values():
        action.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                            help="print JSON")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from .errors import InferscaleError
    try:
        return args.func(args)
    except InferscaleError as e:
        print(f"inferscale: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
