"""inferscale: memory facts stored once as pre-RoPE KV, retrieved by
embedding and written straight into an LLM's KV cache with keys rotated to
the positions they land at (Chunked RoPE).

    import inferscale as infs
    geo = infs.Geometry(n_layers=30, n_kv_heads=3, head_dim=64, rope_theta=1e5,
                        kv_dtype="f32", embed_dim=384)
    with infs.Store.create("memory.infs", geo, identity="SmolLM2-135M-Instruct") as store:
        fid = store.put("alice", tokens, k, v, embedding)
        hits = store.retrieve("alice", query_vector, k=5)
        next_pos = store.inject("alice", hits.ids, infs.KVLayout.vllm(kv_caches), block_table)

See docs/python.md.
"""

from __future__ import annotations

import os
from typing import Dict

from ._ffi import ffi, lib, library_path
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .geometry import Backend, DType, Geometry, Metric, RopeScaling, RopeStyle, SyncMode, Tier
from .layout import KVLayout
from .store import RESERVED_PREFIX, Fact, Hits, Store, StoreStats, rope_rotate
from .tokenizer import ChatFormat, Tokenizer
from .model import ForwardResult, Model, ModelInfo
from .embedders import Embedder
from .engine import Answer, Engine, render_fact
from .memory import Memory, MemoryHit
from .fetch import fetch_models
from .device import Injector, Searcher, hit_ids, hit_scores

__all__ = [
    "Backend", "DType", "Geometry", "Metric", "RopeScaling", "RopeStyle", "SyncMode", "Tier",
    "KVLayout", "Fact", "Hits", "Store", "StoreStats", "RESERVED_PREFIX", "rope_rotate", "Tokenizer", "ChatFormat",
    "Model", "ModelInfo", "ForwardResult", "Embedder", "Engine", "Answer", "render_fact",
    "Memory", "MemoryHit", "fetch_models", "Searcher", "Injector", "hit_ids", "hit_scores",
    "version", "version_number", "features", "get_include", "library_path",
    "__version__", *_errors_all,
]


def version() -> str:
    """The C library's version string."""
    return ffi.string(lib.infs_version_string()).decode()


def version_number() -> int:
    """The C library's version as MAJOR * 10000 + MINOR * 100 + PATCH."""
    return int(lib.infs_version_number())


def features() -> Dict[str, bool]:
    """Which optional backends the bundled library was built with."""
    f = int(lib.infs_features())
    return {"cuda": bool(f & lib.INFS_FEATURE_CUDA), "faiss": bool(f & lib.INFS_FEATURE_FAISS),
            "blas": bool(f & lib.INFS_FEATURE_BLAS)}


def get_include() -> str:
    """The directory holding the C headers (``inferscale/inferscale.h``) that
    match the bundled library, for compiling against it."""
    env = os.environ.get("INFERSCALE_INCLUDE")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def __getattr__(name: str) -> str:
    # __version__ asks the library, which is loaded on first use only.
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
