"""The small real model of the transformers tests (SmolLM2-135M-Instruct
through transformers' GGUF loading) and the measurements the tests and
docs/python.md share: next-token logits from memory against full recompute."""

from __future__ import annotations

import json
import os
from typing import Dict, List


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
GGUF_DIR = os.path.join(CACHE, "smollm2")
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_DIR = os.path.join(CACHE, "minilm")
HEADER = "<|im_start|>system\nWhat you remember about the user:\n"
SEPARATOR = "\n"


def load():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(GGUF_DIR, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(GGUF_DIR, gguf_file=GGUF_FILE)
    model.eval()
    return model, tok


def encode(tok, text: str) -> List[int]:
    return tok(text, add_special_tokens=False).input_ids


def question_ids(tok, question: str) -> List[int]:
    return encode(tok, f"<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")


def memory_facts(namespace: str = "maya") -> List[str]:
    with open(os.path.join(REPO, "examples", "memory", "facts.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["text"] for r in rows if r["namespace"] == namespace]


def memory_questions(namespace: str = "maya") -> List[str]:
    with open(os.path.join(REPO, "examples", "memory", "questions.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["question"] for r in rows if r["namespace"] == namespace]


def logits_full(model, ids: List[int]):
    import torch
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()


def logits_from_memory(model, store, namespace, record_ids, q_ids: List[int]):
    """Question logits with records injected from the store: only the
    question is run through the model."""
    import torch
    from inferscale import hf
    cache, prefix = hf.build_cache(model, store, namespace, record_ids)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([q_ids]), **{hf.cache_kwarg(model): cache})
    return out.logits[0].float(), prefix[0].tolist()


def compare(full, mem) -> Dict[str, float]:
    """KL(full || memory) of the next-token distributions at the last
    position, max |logit difference| there, and top-1 agreement over every
    question position."""
    import torch
    lp = torch.log_softmax(full, -1)
    lq = torch.log_softmax(mem, -1)
    kl = float((lp[-1].exp() * (lp[-1] - lq[-1])).sum())
    return {"kl_last": kl, "max_abs_logit_diff_last": float((full[-1] - mem[-1]).abs().max()),
            "top1_agreement": float((full.argmax(-1) == mem.argmax(-1)).float().mean()),
            "top1_last_equal": bool(full[-1].argmax() == mem[-1].argmax())}


def greedy(model, ids: List[int], n: int, cache=None) -> List[int]:
    import torch
    from inferscale import hf
    x = torch.tensor([ids])
    kw = {hf.cache_kwarg(model): cache} if cache is not None else {}
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                             pad_token_id=0, **kw)
    return out[0, x.shape[1]:].tolist()


def agreement(a: List[int], b: List[int]) -> float:
    """Share of positions where two greedy continuations agree; a position
    one of them did not reach (it stopped earlier) counts as a disagreement."""
    n = max(len(a), len(b), 1)
    return sum(x == y for x, y in zip(a, b)) / n


def fill(model, tok, store, namespace, embedder, texts):
    """The header segment and every fact, each encoded after the header
    (context-window encoding), embedded with embedder; returns the header's
    id and each fact id's tokens."""
    from inferscale import hf
    header = encode(tok, HEADER)
    header_id = hf.put_segment(store, model, namespace, header, text=HEADER)
    tokens = {}
    for text in texts:
        ids = encode(tok, text + SEPARATOR)
        fid = hf.put_fact(store, model, namespace, ids, embedder(text), context_ids=header, text=text)
        tokens[fid] = ids
    return header_id, tokens


def divergence(model, tok, store, namespace, header_id, fact_tokens, k_values, questions,
               embedder, n_greedy: int = 16) -> List[dict]:
    """For each k and question: the top-k facts by embedding (best last,
    nearest the question) injected after the header, against full recompute
    of [header][facts][question]; with, as a yardstick, the same numbers for
    no memory at all ([header][question])."""
    from inferscale import hf
    header = encode(tok, HEADER)
    rows = []
    for k in k_values:
        for question in questions:
            hits = store.retrieve(namespace, embedder(question), k)
            chosen = [int(i) for i in hits.ids][::-1]
            q_ids = question_ids(tok, question)
            full_ids = header + [t for i in chosen for t in fact_tokens[i]] + q_ids
            full = logits_full(model, full_ids)[-len(q_ids):]
            mem, prefix = logits_from_memory(model, store, namespace, [header_id] + chosen, q_ids)
            assert prefix + q_ids == full_ids
            none = logits_full(model, header + q_ids)[-len(q_ids):]
            cache, _ = hf.build_cache(model, store, namespace, [header_id] + chosen)
            g_full = greedy(model, full_ids, n_greedy)
            g_mem = greedy(model, full_ids, n_greedy, cache)
            rows.append({"k": k, "question": question, **compare(full, mem),
                         "greedy_agreement": agreement(g_full, g_mem),
                         "no_memory": compare(full, none),
                         "answer_full": tok.decode(g_full), "answer_memory": tok.decode(g_mem)})
    return rows


def main() -> None:
    """Prints the divergence table of docs/python.md as JSON lines."""
    import sys
    import tempfile
    import inferscale as infs
    from inferscale import hf
    from inferscale.embedders import SentenceTransformerEmbedder
    model, tok = load()
    emb = SentenceTransformerEmbedder(MINILM_DIR)
    ks = [int(k) for k in sys.argv[1:]] or [1, 2, 4, 8]
    with tempfile.TemporaryDirectory() as d:
        geo = hf.geometry_from_config(model.config, embed_dim=emb.dim)
        with infs.Store.create(os.path.join(d, "m.infs"), geo, hf.identity_for(model, tok), sync="off") as store:
            header_id, tokens = fill(model, tok, store, "maya", emb, memory_facts())
            for row in divergence(model, tok, store, "maya", header_id, tokens, ks, memory_questions(), emb):
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
