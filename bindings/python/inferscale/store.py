"""The fact store: open/create, put/get/delete, namespaces, retrieval and
injection into a KV cache."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from typing import Any, List, NamedTuple, Optional, Sequence, Union, overload

import numpy as np

from ._ffi import as_int, check, cpath, cstr, ffi, lib, pystr
from .arrays import as_float32_vectors, as_int_array, host_kv, kv_from_c
from .capture import capture_kv
from .embedders import Embedder
from .errors import InvalidArgumentError
from .geometry import Backend, DType, Geometry, Metric, SyncMode, Tier
from .handle import Handle
from .layout import KVLayout
from .model import Model

__all__ = ["Store", "Fact", "Hits", "StoreStats", "RESERVED_PREFIX"]

# Namespaces starting with this belong to the library (INFS_RESERVED_PREFIX):
# put, delete and drop there raise InvalidArgumentError; reads are allowed.
RESERVED_PREFIX = "inferscale."

PathLike = Union[str, bytes, "os.PathLike[str]"]


@dataclasses.dataclass(frozen=True)
class Fact:
    """A stored fact or segment, copied out of the store.

    ``k`` and ``v`` are ``(n_layers, n_tokens, n_kv_heads, head_dim)`` arrays of the
    store's kv_dtype (bfloat16 comes back as float32), keys before rotary
    embedding; ``embedding`` is None for segments.
    """

    id: int
    flags: int
    tokens: np.ndarray
    embedding: Optional[np.ndarray]
    k: np.ndarray
    v: np.ndarray
    text: str
    metadata: str
    source_id: int
    timestamp: int

    @property
    def is_segment(self) -> bool:
        return bool(self.flags & lib.INFS_FACT_SEGMENT)

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[0])


class Hits(NamedTuple):
    """Result of retrieval for one query: ids (uint64) and scores (float32), best first."""
    ids: np.ndarray
    scores: np.ndarray


@dataclasses.dataclass(frozen=True)
class StoreStats:
    """Counters of ``infs_store_stats``."""
    n_facts: int
    n_segments: int
    n_namespaces: int
    file_bytes: int
    live_bytes: int
    dropped_tail_bytes: int
    device_bytes: int
    lost_records: int
    host_bytes: int
    kv_device_bytes: int
    kv_host_bytes: int
    device_evictions: int
    host_evictions: int
    promotions: int
    torn_bytes: int
    torn_records: int


def _ns(namespace: str):
    return cstr(namespace, "namespace")


class Store(Handle):
    """A fact store file bound to one model geometry and identity.

    ``Store.create(path, geometry, identity)`` makes a new store (or opens an
    existing one after checking both); ``Store(path)`` opens one. A store is
    safe to share between threads; close it with ``close()`` or a ``with``
    block (it is also closed when garbage collected), with the locking rule
    of ``Handle``: close waits for the calls in flight. A second writer on the
    same file raises BusyError. ``device`` is the CUDA device of the store's
    device copy, -1 for none. With a device copy, fact KV lives in tiers
    (docs/cuda.md, "Tiers"): the device within ``device_budget_bytes``,
    pinned host memory within ``host_budget_bytes`` (0: none), the file;
    least recently used namespaces are evicted, ``prefetch`` moves one up.
    """

    def __init__(self, path: PathLike, geometry: Optional[Geometry] = None,
                 identity: Optional[str] = None, *, create: bool = False, readonly: bool = False,
                 sync: Union[SyncMode, str] = SyncMode.FULL, device: int = -1,
                 device_budget_bytes: int = 0, faiss_index: Optional[str] = None,
                 faiss_min_facts: Optional[int] = None, host_budget_bytes: int = 0) -> None:
        self._init_handle()  # its dependents: the Searchers and Injectors made on it
        c_path = cpath(path)
        self.path = os.fsdecode(path)
        opts = ffi.new("infs_store_options *")
        check(lib.infs_store_options_init(opts, lib.INFS_STORE_OPTIONS_VERSION))
        opts.flags = (lib.INFS_OPEN_CREATE if create else 0) | (lib.INFS_OPEN_READONLY if readonly else 0)
        keep = []
        if geometry is not None:
            g = geometry._to_c()
            keep.append(g)
            opts.geometry = g
        if identity is not None:
            ident = cstr(identity, "identity")
            keep.append(ident)
            opts.identity = ident
        opts.sync = int(SyncMode.coerce(sync))
        opts.device = as_int(device, "device", "int")
        self.device = int(opts.device)
        opts.device_budget_bytes = as_int(device_budget_bytes, "device_budget_bytes", "uint64")
        opts.host_budget_bytes = as_int(host_budget_bytes, "host_budget_bytes", "uint64")
        if faiss_index is not None:
            fi = cstr(faiss_index, "faiss_index")
            keep.append(fi)
            opts.faiss_index = fi
        if faiss_min_facts is not None:
            opts.faiss_min_facts = as_int(faiss_min_facts, "faiss_min_facts", "uint64")
        out = ffi.new("infs_store **")
        check(lib.infs_store_open(out, c_path, opts))
        self._adopt(out[0], lib.infs_store_close)
        self._geometry = self._read_geometry()

    @classmethod
    def create(cls, path: PathLike, geometry: Geometry, identity: str, **kwargs: Any) -> "Store":
        """Creates the store at path, or opens it if it exists with the same
        geometry and identity (MismatchError otherwise)."""
        return cls(path, geometry, identity, create=True, **kwargs)

    @classmethod
    def open(cls, path: PathLike, **kwargs: Any) -> "Store":
        """Opens an existing store (NotFoundError if there is none)."""
        return cls(path, **kwargs)

    def _what(self) -> str:
        return f"store {self.path!r}"

    def close(self) -> None:
        """Flushes (per the sync mode) and closes the store, after the calls
        in flight and after closing the Searchers and Injectors made on it.
        Idempotent."""
        super().close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._geometry.kv_dtype.name.lower()
        return f"<inferscale.Store {self.path!r} {state}>"

    # Geometry and identity

    def _read_geometry(self) -> Geometry:
        g = ffi.new("infs_geometry *")
        with self._use() as p:
            check(lib.infs_store_geometry(g, p))
        return Geometry._from_c(g)

    @property
    def geometry(self) -> Geometry:
        """The geometry the store is bound to (a copy)."""
        return dataclasses.replace(self._geometry)

    @property
    def identity(self) -> str:
        """The identity string (model, tokenizer, template...) the store is bound to."""
        with self._use() as p:
            return pystr(lib.infs_store_identity(p))

    def sync(self) -> None:
        """Forces every acknowledged write to stable storage."""
        with self._use() as p:
            check(lib.infs_store_sync(p))

    def compact(self) -> None:
        """Rewrites the file without deleted records, atomically."""
        with self._use() as p:
            check(lib.infs_store_compact(p))

    def verify(self) -> None:
        """Re-reads the header and every record from the file and checks their
        checksums; raises CorruptError naming the first damaged record."""
        with self._use() as p:
            check(lib.infs_store_verify(p, ffi.NULL, ffi.NULL))

    def stats(self) -> StoreStats:
        s = ffi.new("infs_store_stats *")
        s.version = lib.INFS_STORE_STATS_VERSION
        with self._use() as p:
            check(lib.infs_store_stats_get(s, p))
        return StoreStats(*(int(getattr(s, f.name)) for f in dataclasses.fields(StoreStats)))

    # Facts

    def put(self, namespace: str, tokens: Any, k: Any, v: Any, embedding: Any = None, *,
            text: Optional[str] = None, metadata: Union[None, str, dict] = None,
            source_id: int = 0, timestamp: int = 0, segment: bool = False) -> int:
        """Stores a fact (or with segment=True a header/separator segment) and
        returns its id.

        tokens: the token ids (n_tokens). k, v: pre-RoPE keys and values of every
        layer, ``(n_layers, n_tokens, n_kv_heads, head_dim)``, numpy or torch, in
        the store's kv_dtype (passed without a copy) or any float type
        (converted). embedding: embed_dim floats, required for a fact and not
        given for a segment. metadata: a str, or a dict stored as JSON.
        """
        g = self._geometry
        tok = as_int_array(tokens, "tokens", "int32")
        shape = (g.n_layers, tok.shape[0], g.n_kv_heads, g.head_dim)
        # The second values hold converted copies (or the inputs) alive through the call.
        kp, _k_alive = host_kv(k, g.kv_dtype, shape, "k")
        vp, _v_alive = host_kv(v, g.kv_dtype, shape, "v")
        f = ffi.new("infs_fact *")
        f.version = lib.INFS_FACT_VERSION
        f.flags = lib.INFS_FACT_SEGMENT if segment else 0
        f.n_tokens = tok.shape[0]
        f.tokens = ffi.cast("const int32_t *", ffi.from_buffer(tok))
        emb = None
        if embedding is not None:
            emb = as_float32_vectors(embedding, g.embed_dim, "embedding")
            f.embedding = ffi.cast("const float *", ffi.from_buffer(emb))
        f.k, f.v = kp, vp
        if isinstance(metadata, dict):
            metadata = json.dumps(metadata, ensure_ascii=False)
        ctext, cmeta = cstr(text, "text", none_ok=True), cstr(metadata, "metadata", none_ok=True)
        f.text, f.metadata = ctext, cmeta
        f.source_id = as_int(source_id, "source_id", "uint64")
        f.timestamp = as_int(timestamp, "timestamp", "int64")
        out = ffi.new("uint64_t *")
        with self._use() as p:
            check(lib.infs_fact_put(out, p, _ns(namespace), f))
        return int(out[0])

    def encode(self, namespace: str, model: Any, tokens: Any, embedding: Any = None, *,
               context: Any = None, segment: bool = False, **put_kwargs: Any) -> int:
        """Captures the pre-RoPE KV of tokens from model run after context (whose
        KV is not stored: context-window encoding) and stores it; returns the id.
        model is an inferscale.Model or a transformers Llama/Mistral/Qwen model."""
        if hasattr(model, "capture"):
            kv_dtype = self._geometry.kv_dtype
            # fp8 is quantized by put from the model's float32
            k, v = model.capture(tokens, context, kv_dtype=DType.F32 if kv_dtype == DType.FP8_E4M3 else kv_dtype)
        else:
            k, v = capture_kv(model, tokens, context)
        return self.put(namespace, tokens, k, v, embedding, segment=segment, **put_kwargs)

    def encode_texts(self, namespace: str, model: Any, texts: Sequence[str], *, embedder: Any = None,
                     embeddings: Any = None, embed_texts: Optional[Sequence[str]] = None,
                     tokens: Optional[Sequence[Any]] = None, metadata: Any = None, context: Any = None,
                     progress: Any = None) -> np.ndarray:
        """Encodes and stores facts with the library's model runtime
        (``infs_fact_encode``): fact i's text texts[i] (stored; tokenized by
        the model unless tokens[i] is given) is run through model after
        context (the encoding context, run once per call, not stored), and its
        pre-RoPE KV is stored with its embedding: embeddings[i] if given, else
        embedder's of embed_texts[i] (default texts[i]). metadata: one str or
        dict for every fact, or a sequence with one per fact. Returns the ids
        (uint64), in order.

        progress is called after each fact is stored: a callable(done, total),
        or a tqdm-like bar (anything with ``update(n)``: its ``total`` is set
        and it advances by one per fact). An exception it raises stops the
        encoding and is raised here; the facts stored before stay stored."""
        if not isinstance(model, Model):
            raise TypeError(f"model must be an inferscale.Model, not {type(model).__name__}")
        if isinstance(texts, str) or not hasattr(texts, "__len__"):
            raise TypeError(f"texts must be a sequence of str, not {type(texts).__name__}")
        n = len(texts)
        metas = _per_fact(metadata, n, "metadata")
        for name, seq in (("embed_texts", embed_texts), ("tokens", tokens)):
            if seq is not None and len(seq) != n:
                raise InvalidArgumentError(f"{name} has {len(seq)} entries for {n} texts")
        emb = None
        if embeddings is not None:
            emb = as_float32_vectors(embeddings, self._geometry.embed_dim, "embeddings")
            if emb.shape[0] != n:
                raise InvalidArgumentError(f"embeddings has {emb.shape[0]} rows for {n} texts")
        facts = ffi.new("infs_fact_input[]", max(n, 1))
        alive: List[Any] = []
        for i in range(n):
            f = facts[i]
            check(lib.infs_fact_input_init(facts + i, lib.INFS_FACT_INPUT_VERSION))
            f.text = _keep(alive, cstr(texts[i], f"texts[{i}]"))
            if tokens is not None:
                tok = _keep(alive, as_int_array(tokens[i], f"tokens[{i}]", "int32"))
                f.tokens = ffi.cast("const int32_t *", ffi.from_buffer(tok))
                f.n_tokens = tok.shape[0]
            if embed_texts is not None:
                f.embed_text = _keep(alive, cstr(embed_texts[i], f"embed_texts[{i}]"))
            if emb is not None:
                f.embedding = ffi.cast("const float *", ffi.from_buffer(emb[i]))
            m = metas[i]
            if isinstance(m, dict):
                m = json.dumps(m, ensure_ascii=False)
            f.metadata = _keep(alive, cstr(m, f"metadata[{i}]", none_ok=True))
        o = ffi.new("infs_encode_options *")
        check(lib.infs_encode_options_init(o, lib.INFS_ENCODE_OPTIONS_VERSION))
        if context is not None:
            ctx = _keep(alive, as_int_array(context, "context", "int32"))
            o.context = ffi.cast("const int32_t *", ffi.from_buffer(ctx)) if ctx.size else ffi.NULL
            o.n_context = ctx.shape[0]
        if embedder is not None and not isinstance(embedder, Embedder):
            raise TypeError(f"embedder must be an inferscale.Embedder, not {type(embedder).__name__}")
        raised: List[BaseException] = []
        if progress is not None:
            o.progress = _keep(alive, _progress_callback(progress, raised))
        ids = np.zeros(max(n, 1), np.uint64)
        cns = _ns(namespace)
        with contextlib.ExitStack() as uses:
            p, mp = uses.enter_context(self._use()), uses.enter_context(model._use())
            if embedder is not None:
                o.embedder = uses.enter_context(embedder._use())
            status = lib.infs_fact_encode(ffi.cast("uint64_t *", ffi.from_buffer(ids)), p, cns, mp, facts, n, o)
        if raised:
            raise raised[0]
        check(status)
        return ids[:n]

    def put_segment(self, namespace: str, tokens: Any, k: Any, v: Any, **kwargs: Any) -> int:
        """Stores a segment (memory header, separator, footer): injectable, never retrieved."""
        return self.put(namespace, tokens, k, v, None, segment=True, **kwargs)

    def get(self, namespace: str, fact_id: int) -> Fact:
        """The fact (or segment) fact_id of namespace; NotFoundError if the
        namespace has no such id (also when another namespace has it)."""
        out = ffi.new("infs_fact_record **")
        with self._use() as p:
            check(lib.infs_fact_get(out, p, _ns(namespace), as_int(fact_id, "fact_id", "uint64")))
        r = out[0]
        try:
            g = self._geometry
            n = int(r.n_tokens)
            shape = (g.n_layers, n, g.n_kv_heads, g.head_dim)
            tokens = np.frombuffer(ffi.buffer(r.tokens, 4 * n), dtype=np.int32).copy()
            embedding = None
            if r.embedding != ffi.NULL and g.embed_dim:
                embedding = np.frombuffer(ffi.buffer(r.embedding, 4 * g.embed_dim), dtype=np.float32).copy()
            return Fact(id=int(r.id), flags=int(r.flags), tokens=tokens, embedding=embedding,
                        k=kv_from_c(r.k, g.kv_dtype, shape), v=kv_from_c(r.v, g.kv_dtype, shape),
                        text=pystr(r.text), metadata=pystr(r.metadata),
                        source_id=int(r.source_id), timestamp=int(r.timestamp))
        finally:
            lib.infs_fact_record_free(r)

    def delete(self, namespace: str, fact_id: int) -> None:
        """Deletes fact_id of namespace (NotFoundError if it has none)."""
        with self._use() as p:
            check(lib.infs_fact_delete(p, _ns(namespace), as_int(fact_id, "fact_id", "uint64")))

    def count(self, namespace: str) -> int:
        """Live facts and segments in namespace (0 for an unknown one)."""
        out = ffi.new("uint64_t *")
        with self._use() as p:
            check(lib.infs_fact_count(out, p, _ns(namespace)))
        return int(out[0])

    def list(self, namespace: str) -> np.ndarray:
        """The ids of namespace in increasing order (uint64 array)."""
        out_ids = ffi.new("uint64_t **")
        out_n = ffi.new("size_t *")
        with self._use() as p:
            check(lib.infs_fact_list(out_ids, out_n, p, _ns(namespace)))
        try:
            n = int(out_n[0])
            if n == 0:
                return np.zeros(0, dtype=np.uint64)
            return np.frombuffer(ffi.buffer(out_ids[0], 8 * n), dtype=np.uint64).copy()
        finally:
            lib.infs_free(out_ids[0])

    def namespaces(self) -> List[str]:
        """Names of the namespaces holding live records, sorted."""
        out_names = ffi.new("char ***")
        out_n = ffi.new("size_t *")
        with self._use() as p:
            check(lib.infs_namespace_list(out_names, out_n, p))
        try:
            return [pystr(out_names[0][i]) for i in range(int(out_n[0]))]
        finally:
            lib.infs_free(out_names[0])

    def drop(self, namespace: str) -> None:
        """Deletes every record of namespace."""
        with self._use() as p:
            check(lib.infs_namespace_drop(p, _ns(namespace)))

    def namespace_generation(self, namespace: str) -> int:
        """A number that changes with every change of namespace (a put, a
        delete, a drop) and never repeats while the store is open, 0 for a
        namespace without records (unknown, or dropped):
        a CUDA graph that captured Searcher.search or Injector.inject on
        namespace must be captured again once it has changed."""
        out = ffi.new("uint64_t *")
        with self._use() as p:
            check(lib.infs_namespace_generation(out, p, _ns(namespace)))
        return int(out[0])

    def prefetch(self, namespace: str) -> None:
        """Starts moving namespace's fact KV up to the device (as far as the
        budgets hold it) and returns at once; nothing to do on a store
        without a device copy."""
        with self._use() as p:
            check(lib.infs_prefetch(p, _ns(namespace)))

    def namespace_tier(self, namespace: str) -> Tier:
        """The slowest tier holding some of namespace's fact KV: Tier.FILE
        on a store without a device copy; the fastest tier for an empty
        namespace."""
        out = ffi.new("infs_tier *")
        with self._use() as p:
            check(lib.infs_namespace_tier(out, p, _ns(namespace)))
        return Tier(int(out[0]))

    def tier_wait(self) -> None:
        """Waits until the tier moves queued so far (prefetches, promotions
        after injections, evicted KV going down to pinned memory) are done."""
        with self._use() as p:
            check(lib.infs_tier_wait(p))

    def __contains__(self, namespace: str) -> bool:
        return self.count(namespace) > 0

    # Retrieval

    # For the type checkers: one vector gives Hits, a batch a list of Hits. A
    # numpy array or a torch tensor may be either (its ndim decides at run time).
    @overload
    def retrieve(self, namespace: str, query: Sequence[float], k: int = 10, *,
                 metric: Union[Metric, str] = Metric.COSINE,
                 backend: Union[Backend, str] = Backend.AUTO) -> Hits: ...

    @overload
    def retrieve(self, namespace: str, query: Sequence[Sequence[float]], k: int = 10, *,
                 metric: Union[Metric, str] = Metric.COSINE,
                 backend: Union[Backend, str] = Backend.AUTO) -> List[Hits]: ...

    @overload
    def retrieve(self, namespace: str, query: Any, k: int = 10, *,
                 metric: Union[Metric, str] = Metric.COSINE,
                 backend: Union[Backend, str] = Backend.AUTO) -> Union[Hits, List[Hits]]: ...

    def retrieve(self, namespace: str, query: Any, k: int = 10, *,
                 metric: Union[Metric, str] = Metric.COSINE,
                 backend: Union[Backend, str] = Backend.AUTO) -> Union[Hits, List[Hits]]:
        """The k best facts of namespace for query, best first (ties by increasing id).

        query: one vector (embed_dim floats) or a batch ``(n, embed_dim)``, numpy or
        torch on any device. Returns Hits(ids, scores) for one vector and a list of
        Hits for a batch; fewer than k when the namespace is smaller, none for an
        empty or unknown namespace. Segments and other namespaces' facts are
        never returned.
        """
        g = self._geometry
        k = as_int(k, "k", "size_t")
        single = np.ndim(query) == 1 if not hasattr(query, "dim") else query.dim() == 1
        q = as_float32_vectors(query, g.embed_dim, "query")
        nq = q.shape[0]
        opts = ffi.new("infs_retrieve_options *")
        check(lib.infs_retrieve_options_init(opts, lib.INFS_RETRIEVE_OPTIONS_VERSION))
        opts.metric = int(Metric.coerce(metric))
        opts.backend = int(Backend.coerce(backend))
        # k is checked by the library before it writes; a k past the maximum
        # needs no room for the error it gets.
        room = min(max(k, 1), int(lib.INFS_RETRIEVE_K_MAX))
        hits = np.zeros(nq * room, dtype=[("id", "<u8"), ("score", "<f4"), ("_pad", "<u4")])
        if ffi.sizeof("infs_hit") != hits.dtype.itemsize:
            raise RuntimeError("infs_hit layout differs from the binding's")
        counts = np.zeros(nq, dtype=np.uintp)
        with self._use() as p:
            check(lib.infs_retrieve(ffi.cast("infs_hit *", ffi.from_buffer(hits)),
                                    ffi.cast("size_t *", ffi.from_buffer(counts)), p, _ns(namespace),
                                    ffi.cast("const float *", ffi.from_buffer(q)), nq, k, opts))
        results = []
        for i in range(nq):
            row = hits[i * k: i * k + int(counts[i])]
            results.append(Hits(row["id"].copy(), row["score"].copy()))
        return results[0] if single else results

    # Injection

    def inject(self, namespace: str, ids: Sequence[int], cache: KVLayout, block_table: Any = None,
               start_pos: int = 0, *, stream: Any = None) -> int:
        """Writes the KV of records ``ids`` of namespace, in that order, into cache
        at consecutive positions from start_pos, keys rotated to their positions
        (Chunked RoPE). The token at position p lands in block
        ``block_table[p // block_size]``, slot ``p % block_size``. block_table
        defaults to ``range(n_blocks)``. Returns the first position after the
        injected tokens. Everything is checked before anything is written.

        For a CUDA cache the writes are queued on ``stream`` (a torch.cuda.Stream
        or a raw handle), by default ``torch.cuda.current_stream()``, and complete
        asynchronously in that stream's order.
        """
        id_arr = as_int_array(ids, "ids", "uint64")
        bt = as_int_array(np.arange(cache.n_blocks) if block_table is None else block_table,
                          "block_table", "int32")
        start_pos = as_int(start_pos, "start_pos", "uint32")
        opts = ffi.new("infs_inject_options *")
        check(lib.infs_inject_options_init(opts, lib.INFS_INJECT_OPTIONS_VERSION))
        opts.stream = cache.stream_for(stream)
        out = ffi.new("uint32_t *")
        ids_p = ffi.cast("const uint64_t *", ffi.from_buffer(id_arr)) if id_arr.size else ffi.NULL
        bt_p = ffi.cast("const int32_t *", ffi.from_buffer(bt)) if bt.size else ffi.NULL
        with self._use() as p:
            check(lib.infs_inject_into_blocks(out, p, _ns(namespace), ids_p, id_arr.size, start_pos,
                                              bt_p, bt.size, cache._c, opts))
        return int(out[0])


def _keep(alive: List[Any], obj: Any) -> Any:
    """obj, kept alive in alive for as long as the C call reads it."""
    alive.append(obj)
    return obj


def _per_fact(value: Any, n: int, what: str) -> List[Any]:
    """One value per fact: value repeated for a str, a dict or None, else the
    sequence itself (its length checked)."""
    if value is None or isinstance(value, (str, dict)):
        return [value] * n
    if not hasattr(value, "__len__") or len(value) != n:
        raise InvalidArgumentError(f"{what} must be a str, a dict or a sequence of {n}")
    return list(value)


def _progress_callback(progress: Any, raised: List[BaseException]):
    """An infs_progress_fn calling progress(done, total), or advancing a
    tqdm-like bar (update(n) and total); an exception is kept in raised and
    stops the encoding (the callback returns non-zero)."""
    if hasattr(progress, "update"):
        bar, last = progress, [0]

        def call(done: int, total: int) -> None:
            if bar.total != total:
                bar.total = total
            bar.update(done - last[0])
            last[0] = done
    elif callable(progress):
        call = progress
    else:
        raise TypeError(f"progress must be a callable(done, total) or a tqdm-like bar, not {type(progress).__name__}")

    def on_progress(_user: Any, done: int, total: int) -> int:
        try:
            call(int(done), int(total))
            return 0
        except BaseException as e:  # noqa: B036 - KeyboardInterrupt must stop the encoding too
            raised.append(e)
            return 1
    return ffi.callback("infs_progress_fn", on_progress)


def rope_rotate(x: np.ndarray, positions: Any, geometry: Geometry) -> np.ndarray:
    """Rotates x in place, ``(n_tokens, n_heads, head_dim)`` host memory of a KV dtype
    (float32/float16 numpy or torch CPU, any float type for bfloat16 torch), token t
    to position ``positions[t]``, with the geometry's rotary embedding: the same
    arithmetic as injection. Returns x."""
    from .arrays import dtype_of, is_torch
    dtype = dtype_of(x)
    if is_torch(x):
        if x.device.type != "cpu" or not x.is_contiguous():
            raise ValueError("rope_rotate: x must be a contiguous CPU tensor")
        ptr = ffi.cast("void *", x.data_ptr())
    else:
        if not (x.flags.c_contiguous and x.flags.writeable):
            raise ValueError("rope_rotate: x must be a writable C-contiguous array")
        ptr = ffi.cast("void *", ffi.from_buffer(x))
    if len(x.shape) != 3:
        raise ValueError(f"rope_rotate: x must be (n_tokens, n_heads, head_dim), got {tuple(x.shape)}")
    if int(x.shape[2]) != geometry.head_dim:
        raise ValueError(f"rope_rotate: head_dim {x.shape[2]} differs from the geometry's {geometry.head_dim}")
    pos = as_int_array(positions, "positions", "int32")
    if pos.shape[0] != x.shape[0]:
        raise ValueError(f"rope_rotate: {pos.shape[0]} positions for {x.shape[0]} tokens")
    g = geometry._to_c()
    check(lib.infs_rope_rotate(ptr, int(dtype), x.shape[0], x.shape[1],
                               ffi.cast("const int32_t *", ffi.from_buffer(pos)), g))
    return x
