"""Capture of pre-RoPE keys and values from a transformers Llama, Mistral or
Qwen model, by hooks on its attention's projections: what Store.encode and
the hf helpers store. Its own module so that store.py and hf.py both use it
without importing each other."""

from __future__ import annotations

from typing import Any, List, Tuple

from .arrays import as_int_array

__all__ = ["capture_kv"]


def _attention_modules(model: Any) -> list:
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    mods = [layer.self_attn for layer in decoder.layers]
    for m in mods:
        if not (hasattr(m, "k_proj") and hasattr(m, "v_proj")):
            raise TypeError(f"{type(m).__name__} has no k_proj/v_proj: not a Llama/Mistral/Qwen attention")
    return mods


def as_id_tensor(x: Any, device: Any, what: str = "token_ids"):
    import torch
    return torch.tensor(as_int_array(x, what, "int32"), dtype=torch.long, device=device).reshape(1, -1)


def capture_kv(model: Any, token_ids: Any, context_ids: Any = None) -> Tuple[Any, Any]:
    """Runs model over ``[context][tokens]`` and returns the tokens' pre-RoPE
    keys and values of every layer, each ``(n_layers, n_tokens, n_kv_heads, head_dim)``
    torch tensors on the model's device in its dtype. The context's KV is not
    returned: it only shapes the tokens' KV (context-window encoding)."""
    import torch
    attn = _attention_modules(model)
    device = next(model.parameters()).device
    ids = as_id_tensor(token_ids, device)
    n = ids.shape[1]
    if context_ids is not None and len(context_ids):
        ids = torch.cat([as_id_tensor(context_ids, device, "context_ids"), ids], dim=1)
    ks: List[Any] = [None] * len(attn)
    vs: List[Any] = [None] * len(attn)

    def keeper(store: list, i: int, head_dim: int):
        def hook(_module, _inputs, output):
            out = output[0] if isinstance(output, tuple) else output
            store[i] = out[0, -n:].reshape(n, -1, head_dim).detach()
        return hook

    handles = []
    try:
        for i, m in enumerate(attn):
            head_dim = int(m.head_dim)
            kmod = m.k_norm if getattr(m, "k_norm", None) is not None else m.k_proj
            handles.append(kmod.register_forward_hook(keeper(ks, i, head_dim)))
            handles.append(m.v_proj.register_forward_hook(keeper(vs, i, head_dim)))
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return torch.stack(ks), torch.stack(vs)
