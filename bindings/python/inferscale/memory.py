"""Memory: a user's facts in one store file, answered from with the
library's model, embedder and engine, in five lines:

    mem = inferscale.Memory("alice.infs")
    mem.add(["Maya has a cat named Biscuit.", "Maya lives in Lisbon."])
    mem.search("What pet does Maya have?", k=3)
    mem.ask("What is the name of Maya's cat?").text
    mem.close()

See docs/python.md."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, List, Optional, Sequence, Union

from .embedders import Embedder
from .engine import Answer, Engine, render_fact
from .geometry import DType
from .model import Model
from .store import Store, _per_fact

__all__ = ["Memory", "MemoryHit", "default_model_path", "default_embedder_path"]


def _cache() -> str:
    return os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))


def default_model_path() -> str:
    """The C tool's default model: SmolLM2-135M-Instruct (Q4_1 GGUF) in
    $INFS_CACHE (default ~/.cache/inferscale), as scripts/fetch-models.sh puts it."""
    return os.path.join(_cache(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def default_embedder_path() -> str:
    """The C tool's default embedder: all-MiniLM-L6-v2 in $INFS_CACHE/minilm."""
    return os.path.join(_cache(), "minilm")


@dataclasses.dataclass(frozen=True)
class MemoryHit:
    """A fact found by Memory.search: its id, text, metadata (the JSON str
    stored, "" for none) and retrieval score (higher is closer)."""
    id: int
    text: str
    metadata: str
    score: float


class Memory:
    """A memory file for agents: ``add`` facts (text), ``search`` them,
    ``ask`` questions answered from them.

    path: the store file, created with the model's geometry, kv_dtype and the
    embedder's dimension if it does not exist, else reopened (MismatchError
    if it was made for another model). model and embedder: an
    inferscale.Model / inferscale.Embedder (used, not closed), a path, or
    None for the C tool's defaults (default_model_path(),
    default_embedder_path()). namespace: the user the calls read and write
    unless they name another. n_ctx: the engine's context in tokens (prompt,
    facts and answer). ``close()`` or ``with`` closes what the Memory opened.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], model: Union[None, str, Model] = None,
                 embedder: Union[None, str, Embedder] = None, *, namespace: str = "default",
                 kv_dtype: Union[DType, str] = DType.F16, n_ctx: int = 4096) -> None:
        self.namespace = namespace
        self._owned: List[Any] = []
        try:
            self.model = self._open(model, Model, default_model_path())
            self.embedder = self._open(embedder, Embedder, default_embedder_path())
            if os.path.exists(path):
                self.store = Store.open(path)
            else:
                self.store = Store.create(path, self.model.geometry(kv_dtype, embed_dim=self.embedder.dim),
                                          self.model.identity(kv_dtype))
            self._owned.append(self.store)
            self.engine = Engine(self.model, n_ctx=n_ctx)
            self._owned.append(self.engine)
            self.engine.prepare(self.store)
        except BaseException:
            self.close()
            raise

    def _open(self, what: Any, cls: type, default: str) -> Any:
        if isinstance(what, cls):
            return what
        obj = cls(default if what is None else what)
        self._owned.append(obj)
        return obj

    def add(self, facts: Union[str, Sequence[str]], *, namespace: Optional[str] = None,
            metadata: Any = None, progress: Any = None) -> List[int]:
        """Stores facts (a str or a list of str) and returns their ids. Each
        is encoded as it appears in the engine's prompt (render_fact of the
        text and its metadata: date and speaker) right after the engine's
        header, embedded from its plain text, and stored with its plain text
        and metadata (one str or dict for all, or one per fact). progress: a
        callable(done, total) or a tqdm-like bar (Store.encode_texts)."""
        texts = [facts] if isinstance(facts, str) else list(facts)
        metas = _per_fact(metadata, len(texts), "metadata")
        tokenizer = self.model.tokenizer
        tokens = [tokenizer.encode(render_fact(t, m)) for t, m in zip(texts, metas)]
        ids = self.store.encode_texts(self._ns(namespace), self.model, texts, tokens=tokens, metadata=metas,
                                      embedder=self.embedder, context=self.engine.header, progress=progress)
        return [int(i) for i in ids]

    def search(self, query: str, k: int = 10, *, namespace: Optional[str] = None) -> List[MemoryHit]:
        """The k facts nearest to query (cosine of the embeddings), best first."""
        ns = self._ns(namespace)
        hits = self.store.retrieve(ns, self.embedder(query), k)
        out = []
        for fid, score in zip(hits.ids, hits.scores):
            f = self.store.get(ns, int(fid))
            out.append(MemoryHit(int(fid), f.text, f.metadata, float(score)))
        return out

    def ask(self, question: str, k: int = 10, *, namespace: Optional[str] = None, **options: Any) -> Answer:
        """Answers question from the k best facts (Engine.ask: injected, only
        the question prefilled); options are Engine.ask's (max_tokens,
        temperature, stop, full_recompute, ...)."""
        return self.engine.ask(self.store, question, namespace=self._ns(namespace), embedder=self.embedder,
                               k=k, **options)

    def _ns(self, namespace: Optional[str]) -> str:
        return self.namespace if namespace is None else namespace

    def close(self) -> None:
        """Closes the engine, the store and the model and embedder the Memory
        loaded itself (not those passed in). Idempotent."""
        owned, self._owned = self._owned, []
        for obj in reversed(owned):
            obj.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

