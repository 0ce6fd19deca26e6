"""The model geometry a store is bound to, and the enums of the C ABI."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Optional, Union

import numpy as np

from ._ffi import as_int, check, ffi, lib

__all__ = ["DType", "RopeStyle", "RopeScaling", "Metric", "Backend", "SyncMode", "Tier", "Geometry"]


_ALIASES = {
    "DType": {"FLOAT32": "F32", "FLOAT": "F32", "FLOAT16": "F16", "HALF": "F16", "BFLOAT16": "BF16",
              "FP8": "FP8_E4M3", "FLOAT8_E4M3FN": "FP8_E4M3"},
    "RopeScaling": {"DEFAULT": "NONE"},
    "Metric": {"INNER_PRODUCT": "IP", "DOT": "IP"},
}


class _NamedEnum(enum.IntEnum):
    @classmethod
    def coerce(cls, value: Any) -> "_NamedEnum":
        """Accepts a member, its int value or its name in any case (TypeError
        for another type, a bool or a float; ValueError for an unknown value)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.strip().upper().replace("-", "_")
            member = cls.__members__.get(_ALIASES.get(cls.__name__, {}).get(key, key))
        elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{cls.__name__} must be a member, a name or an int, not {type(value).__name__}")
        else:
            member = next((m for m in cls if m.value == value), None)
        if member is None:
            names = ", ".join(m.name.lower() for m in cls)
            raise ValueError(f"unknown {cls.__name__} {value!r} (one of {names})")
        return member


class DType(_NamedEnum):
    """Element type of stored and injected KV (``infs_dtype``). FP8_E4M3
    (``"fp8"``) is a store kv_dtype only: e4m3 with an f32 scale per token and
    KV head, quantized by Store.put and dequantized to float32 by Store.get."""
    F32 = 0
    F16 = 1
    BF16 = 2
    FP8_E4M3 = 3

    @property
    def itemsize(self) -> int:
        return int(lib.infs_dtype_size(int(self)))


class RopeStyle(_NamedEnum):
    """Pairing of rotary dimensions: NEOX (i, i + d/2: Llama, Mistral, Qwen in
    transformers) or GPTJ (2i, 2i + 1)."""
    NEOX = 0
    GPTJ = 1


class RopeScaling(_NamedEnum):
    """Rotary frequency scaling (``infs_rope_scaling``)."""
    NONE = 0
    LINEAR = 1
    LLAMA3 = 2
    YARN = 3


class Metric(_NamedEnum):
    """Retrieval score: cosine similarity or inner product."""
    COSINE = 0
    IP = 1


class Backend(_NamedEnum):
    """Retrieval backend (``infs_backend``)."""
    AUTO = 0
    EXACT = 1
    FAISS = 2
    CUDA = 3


class SyncMode(_NamedEnum):
    """When acknowledged writes reach stable storage (``infs_sync_mode``)."""
    FULL = 0
    NORMAL = 1
    OFF = 2


class Tier(_NamedEnum):
    """Where a namespace's fact KV lies (``infs_tier``, Store.namespace_tier):
    all on the device, all on the device or in pinned host memory, or some
    only in the store file."""
    DEVICE = 0
    HOST = 1
    FILE = 2


_UINT32_FIELDS = ("n_layers", "n_kv_heads", "head_dim", "rotary_dim", "rope_original_max_pos", "embed_dim")


@dataclasses.dataclass
class Geometry:
    """Shape and position encoding of stored KV (``infs_geometry``).

    The defaults are those of ``INFS_GEOMETRY_INIT``, except ``rotary_dim``:
    ``None`` means the whole head is rotated (``rotary_dim = head_dim``).
    Enum fields accept members, ints or names (``kv_dtype="bf16"``).
    """

    n_layers: int
    n_kv_heads: int
    head_dim: int
    rotary_dim: Optional[int] = None
    rope_style: Union[RopeStyle, str, int] = RopeStyle.NEOX
    rope_theta: float = 10000.0
    rope_scaling: Union[RopeScaling, str, int] = RopeScaling.NONE
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_pos: int = 8192
    rope_beta_fast: float = 32.0
    rope_beta_slow: float = 1.0
    rope_attn_factor: float = 0.0
    kv_dtype: Union[DType, str, int] = DType.F16
    embed_dim: int = 0

    def __post_init__(self) -> None:
        if self.rotary_dim is None:
            self.rotary_dim = self.head_dim
        self._check()

    def _check(self) -> None:
        """Coerces the enum fields; TypeError or RangeError for an integer
        field that is not an int in uint32's range (fields may be set after
        construction, so _to_c checks again)."""
        self.rope_style = RopeStyle.coerce(self.rope_style)
        self.rope_scaling = RopeScaling.coerce(self.rope_scaling)
        self.kv_dtype = DType.coerce(self.kv_dtype)
        for name in _UINT32_FIELDS:
            setattr(self, name, as_int(getattr(self, name), f"Geometry.{name}", "uint32"))

    def _to_c(self):
        self._check()
        g = ffi.new("infs_geometry *")
        check(lib.infs_geometry_init(g, lib.INFS_GEOMETRY_VERSION))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            setattr(g, f.name, int(value) if isinstance(value, enum.IntEnum) else value)
        return g

    @classmethod
    def _from_c(cls, g) -> "Geometry":
        return cls(**{f.name: getattr(g, f.name) for f in dataclasses.fields(cls)})

    def validate(self) -> "Geometry":
        """Raises InvalidArgumentError naming the offending field; returns self."""
        check(lib.infs_geometry_validate(self._to_c()))
        return self

    @property
    def kv_token_bytes(self) -> int:
        """Bytes of K (or of V) one token occupies across all layers."""
        g = self._to_c()
        check(lib.infs_geometry_validate(g))
        return int(lib.infs_geometry_kv_token_bytes(g))

    @property
    def kv_shape(self) -> tuple:
        """Shape of one fact's K (or V) per token count: ``(n_layers, T, n_kv_heads, head_dim)``
        with ``T`` left as -1."""
        return (self.n_layers, -1, self.n_kv_heads, self.head_dim)
