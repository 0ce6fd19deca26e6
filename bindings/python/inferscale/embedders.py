"""Embedders: anything that turns text into the store's retrieval vectors.

Every call of the binding that needs a vector takes a numpy array or a torch
tensor, so any embedder works; ``SentenceTransformerEmbedder`` adapts a
sentence-transformers model to the shape the store expects.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import numpy as np

__all__ = ["SentenceTransformerEmbedder"]


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
