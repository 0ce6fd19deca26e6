"""The library's model runtime: a Llama-family decoder (llama, mistral,
qwen2, qwen3) from a GGUF file or a Hugging Face directory, run on the CPU in
float32. It gives the pre-RoPE KV a store keeps and next-token logits, and
can attend to a paged KV cache that injection filled."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple, Optional, Union

import numpy as np

from ._ffi import as_int, check, cpath, device_index, ffi, lib, pystr
from .arrays import as_int_array, fp8_bytes, fp8_quantized
from .geometry import DType, Geometry
from .handle import Handle
from .layout import KVLayout
from .tokenizer import Tokenizer

__all__ = ["Model", "ModelInfo", "ForwardResult"]


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """``infs_model_info``: architecture and shape of a loaded model."""
    architecture: str
    n_vocab: int
    n_embd: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_ff: int
    n_ctx_train: int
    sliding_window: int
    n_params: int


class ForwardResult(NamedTuple):
    """logits: (n_vocab,) for the last token, or (n_tokens, n_vocab) with
    all_logits; k, v: pre-RoPE (n_layers, n_tokens, n_kv_heads, head_dim) when
    asked for (kv=True), else None."""
    logits: np.ndarray
    k: Optional[np.ndarray]
    v: Optional[np.ndarray]


_NP = {DType.F32: np.float32, DType.F16: np.float16, DType.BF16: np.uint16}
# Model(device_weights=): the dtypes of the device copy's matrices.
_DEVICE_WEIGHTS = {"bf16": DType.BF16, "fp8": DType.FP8_E4M3}


class Model(Handle):
    """A model loaded by the library (read-only; forward is safe from many
    threads at once). ``close()`` or ``with`` frees it, after the engines
    made on it, as does garbage collection, with the locking rule of
    ``Handle``.

    int8_activations runs products of few tokens (decoding, calls of 2-4
    tokens) over Q4_0 / Q4_1 / Q8_0 matrices on activations rounded to 8 bits,
    as llama.cpp does: faster, the logits moved by an NMSE of about 1e-3
    (docs/model-runtime.md).

    device (None: the host only) also uploads the weights to that CUDA device
    in bf16, for an Engine on it, using at most device_budget_bytes of its
    memory (0: no limit), with a workspace for device_max_tokens tokens per
    forward call (0: 512). A build without CUDA raises UnsupportedError.
    device_weights="fp8" uploads the matrices in fp8 e4m3 instead (a scale per
    row, half the bytes, Hopper's fp8 GEMMs; docs/model-runtime.md): it needs
    a device (InvalidArgumentError without one) of compute capability 8.9 or
    above (UnsupportedError)."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], *, n_threads: int = 0,
                 int8_activations: bool = False, device: Optional[int] = None,
                 device_budget_bytes: int = 0, device_max_tokens: int = 0,
                 device_weights: str = "bf16") -> None:
        self._init_handle()
        opts = ffi.new("infs_model_options *")
        check(lib.infs_model_options_init(opts, lib.INFS_MODEL_OPTIONS_VERSION))
        opts.n_threads = as_int(n_threads, "n_threads", "uint32")
        if not isinstance(int8_activations, bool):
            raise TypeError(f"int8_activations must be True or False, not {int8_activations!r}")
        opts.int8_activations = int(int8_activations)
        if not isinstance(device_weights, str) or device_weights not in _DEVICE_WEIGHTS:
            raise ValueError(f"device_weights must be \"bf16\" or \"fp8\", not {device_weights!r}")
        opts.device_weights = int(_DEVICE_WEIGHTS[device_weights])
        opts.device = device_index(device)
        opts.device_budget_bytes = as_int(device_budget_bytes, "device_budget_bytes", "uint64")
        opts.device_max_tokens = as_int(device_max_tokens, "device_max_tokens", "uint32")
        out = ffi.new("infs_model **")
        check(lib.infs_model_load(out, cpath(path), opts))
        ptr = self._adopt(out[0], lib.infs_model_free)
        info = ffi.new("infs_model_info *")
        info.version = lib.INFS_MODEL_INFO_VERSION
        check(lib.infs_model_info_get(info, ptr))
        self.info = ModelInfo(pystr(info.architecture), *(int(getattr(info, f.name))
                                                          for f in dataclasses.fields(ModelInfo)[1:]))
        tok = lib.infs_model_tokenizer(ptr)
        self.tokenizer: Optional[Tokenizer] = None if tok == ffi.NULL else Tokenizer._borrowed(tok, self)

    def _what(self) -> str:
        return "model"

    def geometry(self, kv_dtype: Union[DType, str] = DType.F32, embed_dim: int = 0) -> Geometry:
        """The geometry of the model's KV, for Store.create."""
        g = ffi.new("infs_geometry *")
        with self._use() as p:
            check(lib.infs_model_geometry(g, p, int(DType.coerce(kv_dtype))))
        geo = Geometry._from_c(g)
        geo.embed_dim = as_int(embed_dim, "embed_dim", "uint32")
        return geo

    def identity(self, kv_dtype: Union[DType, str] = DType.F32) -> str:
        """Architecture, weight, tokenizer and template hashes and KV dtype: the
        identity string for Store.create."""
        out = ffi.new("char **")
        with self._use() as p:
            check(lib.infs_model_identity(out, p, int(DType.coerce(kv_dtype))))
        try:
            return pystr(out[0])
        finally:
            lib.infs_free(out[0])

    def forward(self, tokens: Any, positions: Any = None, *, all_logits: bool = False,
                kv: bool = False, kv_dtype: Union[DType, str] = DType.F32,
                cache: Optional[KVLayout] = None, block_table: Any = None, n_past: int = 0,
                write_cache: bool = False, seq_ids: Any = None) -> ForwardResult:
        """Runs the model over tokens at positions (default 0, 1, ...).

        With cache (a host KVLayout, e.g. filled by Store.inject) the tokens
        also attend to cache positions below n_past; write_cache stores their
        own K (rotated) and V there. seq_ids runs independent sequences in one
        call, each with its own positions. kv=True also returns the tokens'
        pre-RoPE K and V in kv_dtype, the store's layout."""
        tok = as_int_array(tokens, "tokens", "int32")
        n = int(tok.shape[0])
        keep = [tok]
        pos_p = ffi.NULL
        if positions is not None:
            pos = as_int_array(positions, "positions", "int32")
            if pos.shape[0] != n:
                raise ValueError(f"{pos.shape[0]} positions for {n} tokens")
            keep.append(pos)
            pos_p = ffi.cast("const int32_t *", ffi.from_buffer(pos))
        dt = DType.coerce(kv_dtype)
        opts = ffi.new("infs_forward_options *")
        check(lib.infs_forward_options_init(opts, lib.INFS_FORWARD_OPTIONS_VERSION))
        opts.all_logits = int(all_logits)
        opts.kv_dtype = int(dt)
        if cache is not None:
            bt = as_int_array(np.arange(cache.n_blocks) if block_table is None else block_table,
                              "block_table", "int32")
            keep.append(bt)
            opts.cache = cache._c
            opts.block_table = ffi.cast("const int32_t *", ffi.from_buffer(bt))
            opts.block_table_len = bt.shape[0]
            opts.n_past = as_int(n_past, "n_past", "uint32")
            opts.write_cache = int(write_cache)
        if seq_ids is not None:
            sid = as_int_array(seq_ids, "seq_ids", "int32")
            if sid.shape[0] != n:
                raise ValueError(f"{sid.shape[0]} seq_ids for {n} tokens")
            keep.append(sid)
            opts.seq_ids = ffi.cast("const int32_t *", ffi.from_buffer(sid))
        info = self.info
        logits = np.zeros((n if all_logits else 1, info.n_vocab), dtype=np.float32)
        k = v = None
        k_p = v_p = ffi.NULL
        if kv:
            shape = (info.n_layers, n, info.n_kv_heads, info.head_dim)
            if dt == DType.FP8_E4M3:  # refused by the library, with its reason
                k, v = np.zeros(fp8_bytes(shape), np.uint8), np.zeros(fp8_bytes(shape), np.uint8)
            else:
                k, v = np.zeros(shape, _NP[dt]), np.zeros(shape, _NP[dt])
            k_p, v_p = ffi.from_buffer(k), ffi.from_buffer(v)
        tok_p = ffi.cast("const int32_t *", ffi.from_buffer(tok)) if n else ffi.NULL
        with self._use() as p:
            check(lib.infs_model_forward(ffi.cast("float *", ffi.from_buffer(logits)), k_p, v_p, p,
                                         tok_p, pos_p, n, opts))
        return ForwardResult(logits if all_logits else logits[0], k, v)

    def capture(self, tokens: Any, context: Any = None, kv_dtype: Union[DType, str] = DType.F32):
        """The pre-RoPE (k, v) of tokens run after context (whose KV is not
        returned), ready for Store.put. kv_dtype "fp8" gives float32 arrays
        holding what an fp8 store keeps of the float32 KV (Store.get's
        values): quantized to e4m3 with a scale per token and KV head
        (infs_kv_convert), then dequantized."""
        tok = as_int_array(tokens, "tokens", "int32")
        ctx = as_int_array([] if context is None else context, "context", "int32")
        dt = DType.coerce(kv_dtype)
        fp8 = dt == DType.FP8_E4M3
        r = self.forward(np.concatenate([ctx, tok]), kv=True, kv_dtype=DType.F32 if fp8 else dt)
        k, v = np.ascontiguousarray(r.k[:, ctx.shape[0]:]), np.ascontiguousarray(r.v[:, ctx.shape[0]:])
        return (fp8_quantized(k), fp8_quantized(v)) if fp8 else (k, v)
