"""Embedders: anything that turns text into the store's retrieval vectors.

Every call of the binding that needs a vector takes a numpy array or a torch
tensor, so any embedder works. ``Embedder`` is the library's built-in one (a
BERT-family sentence encoder such as all-MiniLM-L6-v2, no torch needed);
``SentenceTransformerEmbedder`` adapts any sentence-transformers model. Both
are called the same way: one text gives a vector, a list an (n, dim) array.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

import numpy as np

from ._ffi import as_int, check, cpath, cstr, device_index, ffi, lib
from .handle import Handle

__all__ = ["Embedder", "SentenceTransformerEmbedder"]


class Embedder(Handle):
    """The library's embedder, loaded from a sentence-transformers model
    directory (config.json, vocab.txt, model.safetensors, ...); computes what
    ``SentenceTransformer(path).encode(texts)`` does, on the CPU. Safe to share
    between threads; ``close()`` or ``with`` frees it, as does garbage
    collection, with the locking rule of ``Handle``. device (None: the CPU)
    is a CUDA device index, reserved for the library's CUDA embedder
    (UnsupportedError until it has one)."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], *, n_threads: int = 0,
                 max_seq_length: int = 0, device: Optional[int] = None) -> None:
        self._init_handle()
        opts = ffi.new("infs_embedder_options *")
        check(lib.infs_embedder_options_init(opts, lib.INFS_EMBEDDER_OPTIONS_VERSION))
        opts.n_threads = as_int(n_threads, "n_threads", "uint32")
        opts.max_seq_length = as_int(max_seq_length, "max_seq_length", "uint32")
        opts.device = device_index(device)
        out = ffi.new("infs_embedder **")
        check(lib.infs_embedder_load(out, cpath(path), opts))
        ptr = self._adopt(out[0], lib.infs_embedder_free)
        self.dim = int(lib.infs_embedder_dim(ptr))
        self.max_seq_length = int(lib.infs_embedder_max_seq_length(ptr))

    def _what(self) -> str:
        return "embedder"

    def __call__(self, texts: Union[str, Sequence[str]], *, prompt: Optional[str] = None) -> np.ndarray:
        """Embeddings (float32) of one text, or of a list of texts as (n, dim).
        prompt is prepended to every text (e5's "query: ", say)."""
        single = isinstance(texts, str)
        if not single and (isinstance(texts, (bytes, bytearray)) or not hasattr(texts, "__iter__")):
            raise TypeError(f"texts must be a str or a sequence of str, not {type(texts).__name__}")
        items = [texts] if single else list(texts)
        keep = [cstr(t, "texts" if single else f"texts[{i}]") for i, t in enumerate(items)]
        arr = ffi.new("const char *[]", keep) if keep else ffi.NULL
        opts = ffi.new("infs_embed_options *")
        check(lib.infs_embed_options_init(opts, lib.INFS_EMBED_OPTIONS_VERSION))
        p = cstr(prompt, "prompt", none_ok=True)
        opts.prompt = p
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        with self._use() as ptr:  # a closed embedder raises, even for no texts
            if items:
                check(lib.infs_embed(ffi.cast("float *", ffi.from_buffer(out)), ptr, arr, len(items), opts))
        return out[0] if single else out

    embed = __call__


class SentenceTransformerEmbedder:
    """Wraps a sentence-transformers model (or the name/path to load one).

    ``embedder("text")`` gives one float32 vector, ``embedder(["a", "b"])`` an
    ``(n, dim)`` array; ``dim`` is the store's ``embed_dim`` to use. With
    ``normalize=True`` (the default) vectors have unit length, so the inner
    product and cosine metrics agree.
    """

    def __init__(self, model: Any, *, normalize: bool = True, batch_size: int = 32,
                 device: Union[str, None] = None) -> None:
        if isinstance(model, str):
            from sentence_transformers import SentenceTransformer
            model = SentenceTransformer(model, device=device)
        self.model = model
        self.normalize = normalize
        self.batch_size = batch_size
        get_dim = (getattr(model, "get_embedding_dimension", None)
                   or getattr(model, "get_sentence_embedding_dimension", None))
        dim = get_dim() if get_dim else None
        if dim is None:
            dim = int(self._encode(["dimension probe"]).shape[1])
        self.dim = int(dim)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                normalize_embeddings=self.normalize, show_progress_bar=False)
        return np.ascontiguousarray(out, dtype=np.float32)

    def __call__(self, texts: Union[str, Sequence[str]]) -> np.ndarray:
        if isinstance(texts, str):
            return self._encode([texts])[0]
        return self._encode(texts)

    embed = __call__
