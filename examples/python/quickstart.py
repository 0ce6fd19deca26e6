"""inferscale from Python in one script: create a store, fill it with a
user's memory facts, retrieve the facts a question needs and inject their KV
into a paged KV cache (vLLM's layout, in host memory).

    pip install .                 # from the repository root
    python examples/python/quickstart.py

With the SmolLM2 model fetched (scripts/fetch-models.sh), the facts' KV is
captured from the real model — through transformers when torch, transformers,
gguf and accelerate are installed, else through the library's own model
runtime — and the model answers from the injected memory without reading the
facts again. Without the model the KV is random and the script shows the same
store, retrieval and injection steps.
"""

import hashlib
import json
import os
import sys
import tempfile

import numpy as np

import inferscale as infs

HERE = os.path.dirname(os.path.abspath(__file__))
MEMORY = os.path.join(HERE, "..", "memory")
CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
GGUF_DIR, GGUF_FILE = os.path.join(CACHE, "smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf"
HEADER = "<|im_start|>system\nWhat you remember about the user:\n"


def read_jsonl(name, namespace):
    with open(os.path.join(MEMORY, name)) as f:
        return [r for r in map(json.loads, filter(str.strip, f)) if r["namespace"] == namespace]


def embedder():
    """The library's built-in embedder on all-MiniLM-L6-v2 (fetched by
    scripts/fetch-models.sh), else a hashed bag of words (enough to find
    facts sharing the question's words)."""
    path = os.path.join(CACHE, "minilm")
    if os.path.exists(os.path.join(path, "model.safetensors")):
        return infs.Embedder(path)
    dim = 256

    def embed(text):
        v = np.zeros(dim, np.float32)
        for word in text.lower().replace("?", " ").replace(".", " ").replace("'s", " ").split():
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
        return v / max(np.linalg.norm(v), 1e-6)
    embed.dim = dim
    return embed


def load_model():
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        import accelerate  # noqa: F401  (transformers needs it to read GGUF)
        import gguf  # noqa: F401
    except ImportError:
        return None, None
    if not os.path.exists(os.path.join(GGUF_DIR, GGUF_FILE)):
        return None, None
    tok = AutoTokenizer.from_pretrained(GGUF_DIR, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(GGUF_DIR, gguf_file=GGUF_FILE).eval()
    return model, tok


def answer_with_runtime(model, layout, block_table, n_past, question_ids, max_new=24):
    """Greedy decoding with the library's runtime over the paged cache that
    injection filled: the question is the only prompt the model runs."""
    tok = model.tokenizer
    ids, pos, out = np.asarray(question_ids), n_past, []
    for _ in range(max_new):
        positions = np.arange(pos, pos + len(ids))
        logits = model.forward(ids, positions, cache=layout, block_table=block_table, n_past=pos,
                               write_cache=True).logits
        pos += len(ids)
        nxt = int(logits.argmax())
        if nxt == tok.eos:
            break
        out.append(nxt)
        ids = np.array([nxt])
    return tok.decode(out, skip_special=True)


def main():
    print(f"inferscale {infs.version()}, features: {infs.features()}")
    facts = read_jsonl("facts.jsonl", "maya")
    questions = [r["question"] for r in read_jsonl("questions.jsonl", "maya")]
    embed = embedder()
    model, tok = load_model()
    runtime = None
    if model is None and os.path.exists(os.path.join(GGUF_DIR, GGUF_FILE)):
        runtime = infs.Model(os.path.join(GGUF_DIR, GGUF_FILE))
    workdir = tempfile.mkdtemp(prefix="inferscale-")
    path = os.path.join(workdir, "memory.infs")

    if model is not None:
        from inferscale import hf
        print("capturing KV from SmolLM2-135M-Instruct with transformers")
        geo = hf.geometry_from_config(model.config, embed_dim=embed.dim)
        store = infs.Store.create(path, geo, hf.identity_for(model, tok))
        encode = lambda text: tok(text, add_special_tokens=False).input_ids  # noqa: E731
        header = encode(HEADER)
        header_id = hf.put_segment(store, model, "maya", header, text=HEADER)
        for fact in facts:
            hf.put_fact(store, model, "maya", encode(fact["text"] + "\n"), embed(fact["text"]),
                        context_ids=header, text=fact["text"], metadata={"source": fact["source"]})
    elif runtime is not None:
        print("capturing KV from SmolLM2-135M-Instruct with inferscale's model runtime")
        geo = runtime.geometry("f32", embed_dim=embed.dim)
        store = infs.Store.create(path, geo, runtime.identity("f32"))
        header = runtime.tokenizer.encode(HEADER, parse_special=True)
        header_id = store.put_segment("maya", header, *runtime.capture(header), text=HEADER)
        for fact in facts:
            ids = runtime.tokenizer.encode(fact["text"] + "\n")
            store.put("maya", ids, *runtime.capture(ids, context=header), embed(fact["text"]),
                      text=fact["text"], metadata={"source": fact["source"]})
    else:
        print("the model is missing: random KV for a small made-up geometry")
        geo = infs.Geometry(n_layers=4, n_kv_heads=2, head_dim=64, rope_theta=100000.0, kv_dtype="f16",
                            embed_dim=embed.dim)
        store = infs.Store.create(path, geo, "example: random KV")
        rng = np.random.default_rng(0)
        header_id = store.put_segment("maya", np.arange(8), *rng.standard_normal((2, 4, 8, 2, 64)),
                                      text=HEADER)
        for fact in facts:
            n = len(fact["text"].split())
            k, v = rng.standard_normal((2, geo.n_layers, n, geo.n_kv_heads, geo.head_dim))
            store.put("maya", rng.integers(0, 1000, n), k, v, embed(fact["text"]), text=fact["text"])

    with store:
        print(f"store {path}: {store.count('maya')} records in {store.namespaces()}, "
              f"{store.stats().file_bytes / 1e6:.1f} MB")
        question = questions[0]
        hits = store.retrieve("maya", embed(question), k=3)
        print(f"\nQ: {question}")
        for fid, score in zip(hits.ids, hits.scores):
            print(f"  {score:.3f}  #{fid}  {store.get('maya', int(fid)).text}")

        # A vLLM-style paged cache: per layer (2, n_blocks, block_size, heads, dim).
        block_size, n_blocks = 16, 32
        cache_dtype = np.float32 if runtime is not None else np.float16  # the runtime reads f32 caches
        caches = [np.zeros((2, n_blocks, block_size, geo.n_kv_heads, geo.head_dim), cache_dtype)
                  for _ in range(geo.n_layers)]
        layout = infs.KVLayout.vllm(caches)
        block_table = np.random.default_rng(1).permutation(n_blocks).astype(np.int32)
        ids = [header_id] + [int(i) for i in hits.ids[::-1]]  # best fact last, next to the question
        end = store.inject("maya", ids, layout, block_table, start_pos=0)
        print(f"\ninjected header + {len(hits.ids)} facts = {end} tokens into {layout}")
        print(f"blocks used: {block_table[: (end + block_size - 1) // block_size].tolist()}; "
              f"the engine prefills the question from position {end}")

        if model is not None:
            from inferscale import hf
            q = tok(f"<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n",
                    add_special_tokens=False).input_ids
            answer = hf.generate(model, store, "maya", ids, q, max_new_tokens=24, do_sample=False)
            print(f"\nA (from injected memory, facts not prefilled): {tok.decode(answer[0], skip_special_tokens=True)}")
        elif runtime is not None:
            q = runtime.tokenizer.encode(f"<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
                                         "<|im_start|>assistant\n", parse_special=True)
            answer = answer_with_runtime(runtime, layout, block_table, end, q)
            print(f"\nA (from injected memory, facts not prefilled): {answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
