"""The ``inferscale`` command: inspect a library build and a store from the shell.

    inferscale info                          version, features, library and headers
    inferscale stats STORE                   record counts and file sizes
    inferscale list STORE [NAMESPACE]        namespaces, or one namespace's ids
    inferscale retrieve STORE NS VECTORS     top-k ids and scores for query vectors
    inferscale encode FACTS.jsonl --store S  encode facts (KV and embeddings) into a store
    inferscale ask QUESTION --store S -n NS  answer from memory, prefilling only the question

VECTORS is a .npy file (one vector or a batch) or a text file of whitespace-
separated floats, one vector per line. encode and ask run the library's model
runtime (--model, a GGUF file or HF directory) and embedder (--embedder, a
sentence-transformers directory), by default the ones scripts/fetch-models.sh
puts in $INFS_CACHE. Add --json for machine-readable output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import List, Optional, Tuple

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


_CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
_HEADER = "What you remember about the user:\n"
_MARK = "\u2063INFERSCALE-FACTS\u2063"


def _header_and_question(tok, question: str) -> Tuple[str, str]:
    """The memory header (the start of a system turn, up to where the facts
    go) and the text that follows the facts for question, both from the
    model's own chat template."""
    head = tok.render_chat([{"role": "system", "content": _HEADER + _MARK}], add_generation_prompt=False)
    full = tok.render_chat([{"role": "system", "content": _MARK}, {"role": "user", "content": question}])
    return head[:head.index(_MARK)], full[full.index(_MARK) + len(_MARK):]


def _nul_in(value, where: str) -> Optional[str]:
    """Where a string (a member's name or value) inside value holds a NUL
    character, which C would cut the string at; None if nowhere."""
    if isinstance(value, str):
        return where if "\0" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and "\0" in key:
            return f"the member name {json.dumps(key)} in {where}"
        found = _nul_in(item, f"{where}[{json.dumps(key)}]")
        if found:
            return found
    return None


def _read_facts(path: str, namespace: Optional[str]) -> List[dict]:
    """The rows of a facts JSONL file, each checked before anything is loaded:
    an object with a string "text" (and "namespace", unless one is given),
    no NUL character in any string; FormatError naming the line otherwise."""
    from .errors import FormatError
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise FormatError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise FormatError(f"{where}: expected a JSON object, got {type(row).__name__}")
        for key in ("text",) if namespace else ("text", "namespace"):
            if not isinstance(row.get(key), str):
                raise FormatError(f'{where}: "{key}" must be a string, got {type(row.get(key)).__name__}')
        nul = _nul_in(row, "row")
        if nul:
            raise FormatError(f"{where}: {nul} contains a NUL character")
        rows.append(row)
    return rows


def _encode(args: argparse.Namespace) -> int:
    import inferscale as infs
    rows = _read_facts(args.facts, args.namespace)
    # Refused before the models load or the store is touched.
    for no, row in enumerate(rows, 1):
        ns = args.namespace or row["namespace"]
        if ns.startswith(infs.RESERVED_PREFIX):
            raise infs.InvalidArgumentError(f"{args.facts}: fact {no}: namespace \"{ns}\" is reserved "
                                            f"(names starting with \"{infs.RESERVED_PREFIX}\" belong to the library)")
    model, emb = infs.Model(args.model, n_threads=args.threads), infs.Embedder(args.embedder)
    tok = model.tokenizer
    geo = model.geometry(args.kv_dtype, embed_dim=emb.dim)
    header = tok.encode(_header_and_question(tok, "")[0], parse_special=True)
    counts = {}
    with infs.Store.create(args.store, geo, model.identity(args.kv_dtype), sync="normal") as store:
        for row in rows:
            ns = args.namespace or row["namespace"]
            if store.count(ns) == 0:
                store.encode(ns, model, header, segment=True, text=_HEADER, metadata={"role": "header"})
            ids = tok.encode(row["text"] + "\n")
            meta = {k: v for k, v in row.items() if k not in ("text", "namespace")}
            store.encode(ns, model, ids, emb(row["text"]), context=header, text=row["text"], metadata=meta)
            counts[ns] = counts.get(ns, 0) + 1
    _emit(args, counts, "\n".join(f"{ns}\t{n} facts" for ns, n in counts.items()))
    return 0


def _ask(args: argparse.Namespace) -> int:
    import numpy as np
    import inferscale as infs
    model, emb = infs.Model(args.model, n_threads=args.threads), infs.Embedder(args.embedder)
    tok = model.tokenizer
    with infs.Store.open(args.store, readonly=True) as store:
        ids = store.list(args.namespace)
        if ids.size == 0:
            raise infs.NotFoundError(f"namespace {args.namespace!r} has no memory")
        header = store.get(args.namespace, int(ids[0]))
        if not header.is_segment:
            raise infs.FormatError("the namespace does not start with a header segment (use inferscale encode)")
        hits = store.retrieve(args.namespace, emb(args.question), args.k)
        chosen = [int(header.id)] + [int(i) for i in hits.ids[::-1]]  # best fact last
        facts = [store.get(args.namespace, i) for i in chosen[1:]]
        question = tok.encode(_header_and_question(tok, args.question)[1], parse_special=True)
        g = store.geometry
        n_mem = header.n_tokens + sum(f.n_tokens for f in facts)
        size = n_mem + len(question) + args.max_tokens
        shape = (size, g.n_kv_heads, g.head_dim)
        k = [np.zeros(shape, np.float32) for _ in range(g.n_layers)]
        v = [np.zeros(shape, np.float32) for _ in range(g.n_layers)]
        cache = infs.KVLayout.contiguous(k, v)
        pos = store.inject(args.namespace, chosen, cache, [0], 0)
    out, step = [], question
    for _ in range(args.max_tokens):
        logits = model.forward(step, np.arange(pos, pos + len(step)), cache=cache, block_table=[0],
                               n_past=pos, write_cache=True).logits
        pos += len(step)
        nxt = int(logits.argmax())
        if nxt == tok.eos:
            break
        out.append(nxt)
        step = np.array([nxt])
    answer = tok.decode(out, skip_special=True).strip()
    obj = {"answer": answer, "facts": [{"id": f.id, "text": f.text, "score": float(s)}
                                       for f, s in zip(facts[::-1], hits.scores)],
           "memory_tokens": n_mem, "prefilled_tokens": len(question)}
    text = answer + "\n" + "\n".join(f"  [{x['score']:.3f}] {x['text']}" for x in obj["facts"])
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
    runtime = argparse.ArgumentParser(add_help=False)
    runtime.add_argument("--store", required=True)
    runtime.add_argument("--model", default=os.path.join(_CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    runtime.add_argument("--embedder", default=os.path.join(_CACHE, "minilm"))
    runtime.add_argument("--threads", type=int, default=0)
    s = sub.add_parser("encode", parents=[runtime], help="encode facts from JSONL into a store")
    s.add_argument("facts", help='JSONL: "text", "namespace" and other members kept as metadata')
    s.add_argument("--namespace", "-n", help="namespace for every fact (default: each line's)")
    s.add_argument("--kv-dtype", default="f16", choices=["f16", "bf16", "f32"])
    s.set_defaults(func=_encode)
    s = sub.add_parser("ask", parents=[runtime], help="answer a question from a namespace's memory")
    s.add_argument("question")
    s.add_argument("--namespace", "-n", required=True)
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--max-tokens", type=int, default=64)
    s.set_defaults(func=_ask)
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
