"""Memory: a user's facts in one store file, answered from with the
library's model, embedder and engine, in five lines:

    mem = inferscale.Memory("alice.infs")
    mem.add(["Maya has a cat named Biscuit.", "Maya lives in Lisbon."])
    mem.search("What pet does Maya have?", k=3)
    mem.ask("What is the name of Maya's cat?").text
    mem.close()

Every argument is checked before anything is loaded or written. See
docs/python.md."""

from __future__ import annotations

import collections.abc
import dataclasses
import os
import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

from ._ffi import as_int, lib
from .embedders import Embedder
from .engine import Answer, Engine, render_fact
from .errors import InferscaleError, InvalidArgumentError, NotFoundError, RangeError
from .fetch import cache_dir
from .geometry import DType
from .model import Model
from .store import RESERVED_PREFIX, Store, _per_fact

__all__ = ["Memory", "MemoryHit", "default_model_path", "default_embedder_path"]

# The engine's context: room for a question at least, and the library's limit.
_N_CTX_MIN, _N_CTX_MAX = 65, 1 << 24


def default_model_path() -> str:
    """The C tool's default model: SmolLM2-135M-Instruct (Q4_1 GGUF) in
    $INFS_CACHE (default ~/.cache/inferscale), where fetch_models() and
    scripts/fetch-models.sh put it."""
    return os.path.join(cache_dir(), "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def default_embedder_path() -> str:
    """The C tool's default embedder: all-MiniLM-L6-v2 in $INFS_CACHE/minilm."""
    return os.path.join(cache_dir(), "minilm")


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
    ``ask`` questions answered from them, ``update`` and ``delete`` them.

    path: the store file, created with the model's geometry, kv_dtype and the
    embedder's dimension if it does not exist (its directory must), else
    reopened (MismatchError if it was made for another model). model and
    embedder: an inferscale.Model / inferscale.Embedder (used, not closed), a
    path, or None for the C tool's defaults (default_model_path(),
    default_embedder_path(); fetch_models() downloads them). namespace: the
    user the calls read and write unless they name another. n_ctx: the
    engine's context in tokens (prompt, facts and answer); a fact that cannot
    fit it is refused by add. Every argument is checked before a model is
    loaded. ``close()`` or ``with`` closes what the Memory opened.
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], model: Union[None, str, Model] = None,
                 embedder: Union[None, str, Embedder] = None, *, namespace: str = "default",
                 kv_dtype: Union[DType, str] = DType.F16, n_ctx: int = 4096) -> None:
        self._owned: List[Any] = []
        self._closed = True
        self.path = _store_path(path)
        self.namespace = _namespace(namespace)
        kv_dtype = DType.coerce(kv_dtype)
        self.n_ctx = as_int(n_ctx, "n_ctx", "uint32")
        if not _N_CTX_MIN <= self.n_ctx <= _N_CTX_MAX:
            raise RangeError(f"n_ctx = {self.n_ctx} is not in {_N_CTX_MIN}..{_N_CTX_MAX}")
        model = _model_arg(model, Model, "model", default_model_path())
        embedder = _model_arg(embedder, Embedder, "embedder", default_embedder_path())
        self._closed = False
        try:
            # An existing file is opened first: one that is not a store fails
            # before the models load.
            existing = os.path.exists(self.path)
            if existing:
                self.store = self._own(Store.open(self.path))
            self.model = model if isinstance(model, Model) else self._own(Model(model))
            self.embedder = embedder if isinstance(embedder, Embedder) else self._own(Embedder(embedder))
            if not existing:
                self.store = self._own(Store.create(
                    self.path, self.model.geometry(kv_dtype, embed_dim=self.embedder.dim),
                    self.model.identity(kv_dtype)))
            self.engine = self._own(Engine(self.model, n_ctx=self.n_ctx))
            if self.engine.max_fact_tokens == 0:
                raise RangeError(f"n_ctx = {self.n_ctx} leaves no room for a fact next to the prompt's header "
                                 "and a question: raise n_ctx")
            self.engine.prepare(self.store)
        except BaseException:
            self.close()
            raise

    def _own(self, obj: Any) -> Any:
        self._owned.append(obj)
        return obj

    def _live(self) -> None:
        if self._closed:
            raise InvalidArgumentError(f"Memory {self.path!r} is closed", lib.INFS_EINVAL)

    @property
    def max_fact_tokens(self) -> int:
        """The most tokens one fact may have (rendered as in the prompt):
        n_ctx less the prompt's header and room for a question."""
        self._live()
        return self.engine.max_fact_tokens

    def add(self, facts: Union[str, Sequence[str]], *, namespace: Optional[str] = None,
            metadata: Any = None, progress: Any = None) -> List[int]:
        """Stores facts (a str or a list of str) and returns their ids. Each
        is encoded as it appears in the engine's prompt (render_fact of the
        text and its metadata: date and speaker) right after the engine's
        header, embedded from its plain text, and stored with its plain text
        and metadata (one str or dict for all, or one per fact). Every fact
        is checked first and nothing is stored if one is refused: an empty or
        white-space text (InvalidArgumentError), or one longer than
        max_fact_tokens (RangeError). progress: a callable(done, total) or a
        tqdm-like bar (Store.encode_texts)."""
        self._live()
        ns = self._ns(namespace)
        if isinstance(facts, str):
            texts = [facts]
        elif isinstance(facts, (bytes, bytearray)) or not isinstance(facts, collections.abc.Iterable):
            raise TypeError(f"facts must be a str or a list of str, not {type(facts).__name__}")
        else:
            texts = list(facts)
        for i, t in enumerate(texts):
            _text(t, f"facts[{i}]")
        metas = _per_fact(metadata, len(texts), "metadata")
        return self._encode(ns, texts, metas, "facts[{}]", progress)

    def _encode(self, ns: str, texts: List[str], metas: List[Any], what: str, progress: Any = None) -> List[int]:
        """Checks every text against the engine's context, then encodes them
        all in one call."""
        for i, (t, m) in enumerate(zip(texts, metas)):
            try:
                self.engine.check_fact(t, m)
            except InferscaleError as e:
                raise type(e)(f"{what.format(i)}: {e.message}", e.code) from None
        tokenizer = self.model.tokenizer
        tokens = [tokenizer.encode(render_fact(t, m)) for t, m in zip(texts, metas)]
        ids = self.store.encode_texts(ns, self.model, texts, tokens=tokens, metadata=metas,
                                      embedder=self.embedder, context=self.engine.header, progress=progress)
        return [int(i) for i in ids]

    def update(self, fact_id: int, text: str, *, namespace: Optional[str] = None, metadata: Any = None) -> int:
        """Replaces fact fact_id's text (and its metadata when given, else
        the old one is kept) and returns the new fact's id: the store never
        rewrites a record, so the new fact is stored first, under a new id,
        and the old one deleted after it. A crash in between leaves both,
        never neither. NotFoundError if the namespace has no fact_id; the
        text is checked as add checks it, and a refused one changes nothing."""
        self._live()
        fid = as_int(fact_id, "fact_id", "uint64")
        _text(text, "text")
        ns = self._ns(namespace)
        old = self.store.get(ns, fid)
        meta = (old.metadata or None) if metadata is None else metadata
        (new,) = self._encode(ns, [text], [meta], "text")
        self.store.delete(ns, fid)
        return new

    def delete(self, fact_id: int, *, namespace: Optional[str] = None) -> None:
        """Deletes fact fact_id (NotFoundError if the namespace has none)."""
        self._live()
        self.store.delete(self._ns(namespace), as_int(fact_id, "fact_id", "uint64"))

    def search(self, query: str, k: int = 10, *, namespace: Optional[str] = None) -> List[MemoryHit]:
        """The k facts nearest to query (cosine of the embeddings), best
        first; k in 1..4096."""
        self._live()
        _text(query, "query")
        k = _k(k)
        ns = self._ns(namespace)
        hits = self.store.retrieve(ns, self.embedder(query), k)
        out = []
        for fid, score in zip(hits.ids, hits.scores):
            f = self.store.get(ns, int(fid))
            out.append(MemoryHit(int(fid), f.text, f.metadata, float(score)))
        return out

    def ask(self, question: str, k: int = 10, *, namespace: Optional[str] = None, **options: Any) -> Answer:
        """Answers question from the k best facts (Engine.ask: injected, only
        the question prefilled); k as in search; options are Engine.ask's
        (max_tokens, temperature, stop, full_recompute, ...). Warns
        (UserWarning) when the namespace has no facts, and when retrieved
        facts did not fit the context next to the question and were left out
        (Answer.n_left_out)."""
        self._live()
        _text(question, "question")
        k = _k(k)
        ns = self._ns(namespace)
        if self.store.count(ns) == 0:
            warnings.warn(f"namespace {ns!r} has no facts: the answer comes from the model alone", stacklevel=2)
        a = self.engine.ask(self.store, question, namespace=ns, embedder=self.embedder, k=k, **options)
        if a.n_left_out:
            warnings.warn(f"{a.n_left_out} of the {a.n_left_out + len(a.fact_ids)} facts retrieved did not fit "
                          f"the context (n_ctx {self.n_ctx}) next to the question and were left out", stacklevel=2)
        return a

    def _ns(self, namespace: Optional[str]) -> str:
        return self.namespace if namespace is None else _namespace(namespace)

    def close(self) -> None:
        """Closes the engine, the store and the model and embedder the Memory
        loaded itself (not those passed in). Idempotent."""
        self._closed = True
        owned, self._owned = self._owned, []
        for obj in reversed(owned):
            obj.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidArgumentError(f"{what} is empty")
    if value.isspace():
        raise InvalidArgumentError(f"{what} is only white space")
    return value


def _k(k: Any) -> int:
    k = as_int(k, "k", "uint32")
    if not 1 <= k <= lib.INFS_RETRIEVE_K_MAX:
        raise RangeError(f"k = {k} is not in 1..{lib.INFS_RETRIEVE_K_MAX}")
    return k


def _namespace(ns: Any) -> str:
    """A namespace the store takes for writing (the library's rules, checked
    here, before a model loads): not empty, at most INFS_NAMESPACE_MAX bytes
    of UTF-8, no control character, not reserved."""
    if not isinstance(ns, str):
        raise TypeError(f"namespace must be a str, not {type(ns).__name__}")
    if "\0" in ns:
        raise InvalidArgumentError(f"namespace contains a NUL character at index {ns.index(chr(0))}")
    if not ns:
        raise InvalidArgumentError("namespace is empty")
    try:
        size = len(ns.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"namespace is not valid text: {e.reason} at index {e.start}") from None
    if size > lib.INFS_NAMESPACE_MAX:
        raise InvalidArgumentError(f"namespace is longer than {lib.INFS_NAMESPACE_MAX} bytes ({size})")
    bad = next((i for i, c in enumerate(ns) if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f), None)
    if bad is not None:
        raise InvalidArgumentError(f"namespace contains a control character at index {bad}")
    if ns.startswith(RESERVED_PREFIX):
        raise InvalidArgumentError(f"namespace {ns!r} is reserved (names starting with {RESERVED_PREFIX!r} "
                                   "belong to the library)")
    return ns


def _store_path(path: Any) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    p = os.fsdecode(os.fspath(path))
    if "\0" in p:
        raise InvalidArgumentError("path contains a NUL character")
    if os.path.isdir(p):
        raise InvalidArgumentError(f"path {p!r} is a directory: give a store file in it")
    folder = os.path.dirname(p)
    if folder and not os.path.isdir(folder):
        raise NotFoundError(f"directory {folder} does not exist: create it first, or give a path in an "
                            "existing one", lib.INFS_ENOTFOUND)
    return p


def _model_arg(value: Any, cls: type, what: str, default: str) -> Union[str, Any]:
    """An open cls, or the path of one that exists (loaded later)."""
    if isinstance(value, cls):
        if value.closed:
            raise InvalidArgumentError(f"{what} is closed")
        return value
    if value is None:
        if not os.path.exists(default):
            raise NotFoundError(f"the default {what} {default} is not there: run inferscale.fetch_models() "
                                "(python -m inferscale fetch-models; in a source checkout scripts/fetch-models.sh) "
                                f"or give {what}=", lib.INFS_ENOTFOUND)
        return default
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{what} must be an inferscale.{cls.__name__}, a path or None, not {type(value).__name__}")
    path = os.fsdecode(os.fspath(value))
    if not os.path.exists(path):
        raise NotFoundError(f"{what} {path} does not exist", lib.INFS_ENOTFOUND)
    return path
