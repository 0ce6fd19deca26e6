"""transformers integration for Llama, Mistral and Qwen (2, 2.5, 3) models.

Filling a store from the model itself::

    geo = hf.geometry_from_config(model.config, embed_dim=emb.dim)
    store = Store.create(path, geo, hf.identity_for(model, tokenizer))
    header = hf.put_segment(store, model, "alice", header_ids)
    fid = hf.put_fact(store, model, "alice", fact_ids, emb(text), context_ids=header_ids)

and answering from memory without prefilling the facts::

    cache, prefix_ids = hf.build_cache(model, store, "alice", [header, *hits.ids])
    out = model.generate(torch.cat([prefix_ids, question_ids], 1), past_key_values=cache)

Capture hooks the attention's ``k_proj`` (``k_norm`` when the model has one,
as Qwen3 does) and ``v_proj`` outputs: keys before rotary embedding, exactly
the model's own arithmetic. Injection rotates them to their positions in the
cache, a transformers ``DynamicCache`` (one contiguous block per layer).
"""

from __future__ import annotations

import hashlib
import inspect
import os
from typing import Any, Sequence, Tuple

from .arrays import as_int_array
from .capture import as_id_tensor, capture_kv
from .geometry import DType, Geometry, RopeScaling
from .layout import KVLayout
from .store import Store

__all__ = ["geometry_from_config", "identity_for", "capture_kv", "put_fact", "put_segment",
           "build_cache", "generate", "cache_kwarg"]


def _text_config(config: Any) -> Any:
    get = getattr(config, "get_text_config", None)
    return get(decoder=True) if get else config


def _rope_parameters(cfg: Any) -> dict:
    params = getattr(cfg, "rope_parameters", None)
    if isinstance(params, dict) and "full_attention" in params:
        params = params["full_attention"]
    if not params:  # transformers 4: rope_theta + rope_scaling
        params = dict(getattr(cfg, "rope_scaling", None) or {})
        params.setdefault("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    params = dict(params)
    params.setdefault("rope_type", params.get("type", "default"))
    return params


def geometry_from_config(config: Any, *, kv_dtype: Any = None, embed_dim: int = 0) -> Geometry:
    """The store geometry of a transformers Llama/Mistral/Qwen config.

    kv_dtype defaults to the config's dtype (float32 when unset).
    """
    cfg = _text_config(config)
    n_heads = int(cfg.num_attention_heads)
    head_dim = getattr(cfg, "head_dim", None) or int(cfg.hidden_size) // n_heads
    rotary_dim = int(int(head_dim) * float(getattr(cfg, "partial_rotary_factor", 1.0) or 1.0))
    rope = _rope_parameters(cfg)
    kind = rope["rope_type"]
    geo = dict(n_layers=int(cfg.num_hidden_layers),
               n_kv_heads=int(getattr(cfg, "num_key_value_heads", None) or n_heads),
               head_dim=int(head_dim), rotary_dim=rotary_dim, rope_style="neox",
               rope_theta=float(rope.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))),
               embed_dim=embed_dim)
    orig = rope.get("original_max_position_embeddings")
    if kind == "default":
        geo["rope_scaling"] = RopeScaling.NONE
    elif kind == "linear":
        geo.update(rope_scaling=RopeScaling.LINEAR, rope_factor=float(rope["factor"]))
    elif kind == "llama3":
        geo.update(rope_scaling=RopeScaling.LLAMA3, rope_factor=float(rope["factor"]),
                   rope_low_freq_factor=float(rope["low_freq_factor"]),
                   rope_high_freq_factor=float(rope["high_freq_factor"]),
                   rope_original_max_pos=int(orig))
    elif kind == "yarn":
        geo.update(rope_scaling=RopeScaling.YARN, rope_factor=float(rope["factor"]),
                   rope_beta_fast=float(rope.get("beta_fast") or 32.0),
                   rope_beta_slow=float(rope.get("beta_slow") or 1.0),
                   rope_original_max_pos=int(orig or cfg.max_position_embeddings),
                   rope_attn_factor=float(rope.get("attention_factor") or 0.0))
    else:
        raise ValueError(f"rope_type {kind!r} depends on the sequence length and cannot be "
                         "re-applied per chunk; supported: default, linear, llama3, yarn")
    if kv_dtype is None:
        dt = str(getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None) or "float32")
        kv_dtype = dt.replace("torch.", "")
    geo["kv_dtype"] = DType.coerce(kv_dtype)
    return Geometry(**geo).validate()


def identity_for(model: Any, tokenizer: Any = None, extra: str = "") -> str:
    """An identity string for a store filled from model: its name, type and
    attention/rope configuration, and the tokenizer's name and chat template."""
    cfg = _text_config(model.config)
    name = getattr(model.config, "_name_or_path", "") or type(model).__name__
    if os.path.isdir(name):  # a local copy: its path is not part of what the KV depends on
        name = os.path.basename(os.path.normpath(name))
    parts = [f"model={name}",
             f"type={getattr(cfg, 'model_type', '')}",
             f"rope={sorted(_rope_parameters(cfg).items())}"]
    if tokenizer is not None:
        tname = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        if os.path.isdir(tname):
            tname = os.path.basename(os.path.normpath(tname))
        parts.append(f"tokenizer={tname}")
        template = getattr(tokenizer, "chat_template", None)
        if template:
            parts.append("template=" + hashlib.sha256(str(template).encode()).hexdigest()[:16])
    if extra:
        parts.append(extra)
    return ";".join(parts)


def put_fact(store: Store, model: Any, namespace: str, token_ids: Any, embedding: Any, *,
             context_ids: Any = None, **put_kwargs: Any) -> int:
    """Captures the fact's KV from model (after context_ids, whose KV is not
    stored) and stores it with its embedding; returns the fact id."""
    k, v = capture_kv(model, token_ids, context_ids)
    return store.put(namespace, token_ids, k, v, embedding, **put_kwargs)


def put_segment(store: Store, model: Any, namespace: str, token_ids: Any, *,
                context_ids: Any = None, **put_kwargs: Any) -> int:
    """Captures and stores a segment (a memory header, separator or footer)."""
    k, v = capture_kv(model, token_ids, context_ids)
    return store.put_segment(namespace, token_ids, k, v, **put_kwargs)


def build_cache(model: Any, store: Store, namespace: str, ids: Sequence[int], *,
                stream: Any = None) -> Tuple[Any, Any]:
    """A DynamicCache holding records ``ids`` (segments and facts, in order) at
    positions 0.. with keys rotated to their positions, and the ``(1, n)``
    token ids it stands for. Generate with ``input_ids = cat([prefix_ids,
    question_ids])`` and the cache: only the question is prefilled."""
    import torch
    from transformers import DynamicCache

    ids = [int(i) for i in as_int_array(ids, "ids", "uint64")]
    tokens = [store.get(namespace, i).tokens for i in ids]
    total = sum(len(t) for t in tokens)
    param = next(model.parameters())
    geo = store.geometry
    cfg = _text_config(model.config)
    if geo.n_layers != cfg.num_hidden_layers:
        raise ValueError(f"store has {geo.n_layers} layers, the model {cfg.num_hidden_layers}")
    shape = (1, geo.n_kv_heads, total, geo.head_dim)
    cache = DynamicCache(config=model.config)
    for layer in range(geo.n_layers):
        cache.update(torch.zeros(shape, dtype=param.dtype, device=param.device),
                     torch.zeros(shape, dtype=param.dtype, device=param.device), layer)
    # The cache's own tensors are the injection target: no copy after this.
    layout = KVLayout.transformers(cache)
    end = store.inject(namespace, ids, layout, [0], 0, stream=stream)
    if end != total:
        raise RuntimeError(f"injected {end} tokens, expected {total}")
    prefix = torch.tensor([t for ts in tokens for t in ts.tolist()], dtype=torch.long,
                          device=param.device).reshape(1, -1)
    return cache, prefix


def cache_kwarg(model: Any) -> str:
    """The keyword model.forward and model.generate take a cache under:
    ``cache`` in recent transformers (where ``past_key_values`` is a
    deprecated alias), ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def generate(model: Any, store: Store, namespace: str, ids: Sequence[int], question_ids: Any,
             **generate_kwargs: Any) -> Any:
    """model.generate over ``[records ids][question]`` with the records injected
    from the store; returns the generated ids after the question."""
    import torch
    cache, prefix = build_cache(model, store, namespace, ids)
    q = as_id_tensor(question_ids, prefix.device, "question_ids")
    input_ids = torch.cat([prefix, q], dim=1)
    generate_kwargs[cache_kwarg(model)] = cache
    out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **generate_kwargs)
    return out[:, input_ids.shape[1]:]
