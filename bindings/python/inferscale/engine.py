"""The library's engine: a model, a prompt layout and a paged KV cache, in
host memory or on the model's CUDA device. It answers a question from a
user's memory by retrieving the top-k facts, injecting header, facts and
footer into its cache and prefilling only the question (or, with
full_recompute, prefilling the whole prompt), then decoding. See
docs/end-to-end.md and docs/python.md."""

from __future__ import annotations

import dataclasses
import contextlib
import json
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from ._ffi import as_int, check, cstr, device_index, ffi, lib, pystr
from .arrays import as_int_array
from .embedders import Embedder
from .geometry import DType, Metric
from .handle import Handle
from .model import Model
from .store import Store

__all__ = ["Engine", "Answer", "render_fact"]


@dataclasses.dataclass(frozen=True, eq=False)
class Answer:
    """``infs_answer``, copied out of the library: the answer's text, the
    tokens generated, the composed prompt's positions (n_prompt) and how many
    of them were prefilled (the rest were injected), the facts used best first
    (uint64 ids) with their retrieval scores (float32; 0 for given facts), the
    first answer token's logits (float32, n_vocab), the time to first token
    in milliseconds split into embed, retrieve, inject and prefill (ttft_ms is
    their sum) and the decoding time, what accuracy recovery could and did
    recompute, and how many facts retrieved (or given) the context could not
    hold next to the question and left out (n_left_out; the best-ranked that
    fit are the ones used)."""
    text: str
    n_tokens: int
    n_prompt: int
    n_prefilled: int
    fact_ids: np.ndarray
    scores: np.ndarray
    first_logits: np.ndarray
    embed_ms: float
    retrieve_ms: float
    inject_ms: float
    prefill_ms: float
    ttft_ms: float
    decode_ms: float
    n_recomputable: int
    n_recomputed: int
    n_left_out: int

    @classmethod
    def _from_c(cls, a: Any) -> "Answer":
        n = int(a.n_facts)
        ids = np.frombuffer(ffi.buffer(a.fact_ids, 8 * n), np.uint64).copy() if n else np.zeros(0, np.uint64)
        scores = np.frombuffer(ffi.buffer(a.scores, 4 * n), np.float32).copy() if n else np.zeros(0, np.float32)
        nv = int(a.n_vocab) if a.first_logits != ffi.NULL else 0
        logits = np.frombuffer(ffi.buffer(a.first_logits, 4 * nv), np.float32).copy() if nv else np.zeros(0, np.float32)
        return cls(pystr(a.text), int(a.n_tokens), int(a.n_prompt), int(a.n_prefilled), ids, scores, logits,
                   float(a.embed_ms), float(a.retrieve_ms), float(a.inject_ms), float(a.prefill_ms),
                   float(a.ttft_ms), float(a.decode_ms), int(a.n_recomputable), int(a.n_recomputed),
                   int(a.n_left_out))


def render_fact(text: str, metadata: Union[None, str, dict] = None) -> str:
    """A fact as it appears in the prompt (``infs_fact_render``):
    ``"- " ["(" date ") "] [speaker ": "] text "\\n"``, where date and speaker
    are the string members "date" and "speaker" of the JSON object metadata
    (a str, or a dict given as JSON; other members are left out)."""
    if isinstance(metadata, dict):
        metadata = json.dumps(metadata, ensure_ascii=False)
    ctext, cmeta = cstr(text, "text"), cstr(metadata, "metadata", none_ok=True)
    out = ffi.new("char **")
    check(lib.infs_fact_render(out, ctext, cmeta))
    try:
        return pystr(out[0])
    finally:
        lib.infs_free(out[0])


class Engine(Handle):
    """An engine over model (``infs_engine_create``): a paged KV cache of
    n_ctx tokens in blocks of block_size, of kv_dtype, in host memory
    (device None or -1) or on CUDA device ``device``, where the model must
    have been loaded (``Model(path, device=...)``). max_seqs: sequences
    decoded together by ask_batch (device 0: 32; host 0 or 1: one by one);
    n_blocks: the pool of blocks all sequences share (0: max_seqs *
    ceil(n_ctx / block_size)). system and memory_intro shape the prompt (None: the
    library's defaults).

    The engine keeps its model alive, and closing the model closes its
    engines first. One call at a time runs on an engine (calls from other
    threads wait their turn); ``close()`` or ``with`` frees it, after the
    call running, as does garbage collection: the locking rule of
    ``Handle``.
    """

    _exclusive = True

    def __init__(self, model: Model, *, n_ctx: int = 4096, block_size: int = 16,
                 kv_dtype: Union[DType, str] = DType.F16, device: Optional[int] = None,
                 max_seqs: int = 0, n_blocks: int = 0, system: Optional[str] = None,
                 memory_intro: Optional[str] = None) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"model must be an inferscale.Model, not {type(model).__name__}")
        self._init_handle(model)
        opts = ffi.new("infs_engine_options *")
        check(lib.infs_engine_options_init(opts, lib.INFS_ENGINE_OPTIONS_VERSION))
        opts.n_ctx = as_int(n_ctx, "n_ctx", "uint32")
        opts.block_size = as_int(block_size, "block_size", "uint32")
        opts.kv_dtype = int(DType.coerce(kv_dtype))
        opts.device = device_index(device)
        opts.max_seqs = as_int(max_seqs, "max_seqs", "uint32")
        opts.n_blocks = as_int(n_blocks, "n_blocks", "uint32")
        csys, cintro = cstr(system, "system", none_ok=True), cstr(memory_intro, "memory_intro", none_ok=True)
        opts.system, opts.memory_intro = csys, cintro
        out = ffi.new("infs_engine **")
        with model._use() as mptr:
            check(lib.infs_engine_create(out, mptr, opts))
        # The destructor holds the model's handle, so that a collected engine
        # is freed before its model.
        ptr = self._adopt(out[0], lib.infs_engine_free, keep=mptr)
        self.model = model
        self.device = int(opts.device)
        tokens, n = ffi.new("const int32_t **"), ffi.new("uint32_t *")
        check(lib.infs_engine_header(tokens, n, ptr))
        self._header = np.frombuffer(ffi.buffer(tokens[0], 4 * n[0]), np.int32).copy()

    def _what(self) -> str:
        return "engine"

    @property
    def header(self) -> np.ndarray:
        """The header's token ids (int32): the encoding context facts should be
        encoded after (``Store.encode(..., context=engine.header)``), so that a
        fact's KV is computed as it will be read, right after the header."""
        return self._header.copy()

    @property
    def max_fact_tokens(self) -> int:
        """The most tokens one fact may have and still fit a prompt of this
        engine with a question (``infs_engine_fact_limit``): n_ctx less the
        header, the footer and room for a question."""
        out = ffi.new("uint32_t *")
        with self._use() as p:
            check(lib.infs_engine_fact_limit(out, p))
        return int(out[0])

    def check_fact(self, text: str, metadata: Union[None, str, dict] = None) -> int:
        """The tokens fact text takes in this engine's prompt (rendered with
        metadata as render_fact renders it); RangeError, naming both counts and
        n_ctx, when it is above max_fact_tokens, InvalidArgumentError when it
        is empty or only white space (``infs_engine_fact_check``)."""
        if isinstance(metadata, dict):
            metadata = json.dumps(metadata, ensure_ascii=False)
        ctext, cmeta = cstr(text, "text"), cstr(metadata, "metadata", none_ok=True)
        out = ffi.new("uint32_t *")
        with self._use() as p:
            check(lib.infs_engine_fact_check(out, p, ctext, cmeta))
        return int(out[0])

    def prepare(self, store: Store) -> None:
        """Encodes the header and footer segments into the store's namespace
        "inferscale.segments" unless segments with the same tokens are already
        there: once per store, needed before ask on that store."""
        with self._use() as p, _store(store)._use() as sp:
            check(lib.infs_engine_prepare(p, sp))

    def ask(self, store: Store, question: str, *, namespace: str, embedder: Optional[Embedder] = None,
            k: int = 10, full_recompute: bool = False, metric: Union[Metric, str] = Metric.COSINE,
            fact_ids: Any = None, max_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
            seed: int = 0, stop: Optional[str] = None, recompute_ratio: float = 0.0, check_layer: int = 0,
            ignore_eos: bool = False, fact_temperature: float = 1.0, fact_scale: float = 1.0) -> Answer:
        """Answers question from namespace of store (``infs_engine_ask``):
        embeds it with embedder, retrieves the top k facts (or takes fact_ids,
        best first; then embedder may be None), lays out [header][fact k ..
        fact 1][footer][question] (best fact nearest the question), injects
        header and facts into the cache and prefills the footer and the
        question (or, with full_recompute, prefills all of it), then decodes.
        prepare must have run on store.

        k: facts retrieved (0 = 10); metric: the retrieval metric;
        max_tokens: the answer's token budget (0 = 64); temperature <= 0 is
        greedy, else sampling with nucleus top_p in (0, 1] from seed (same
        seed, same answer); stop: a stop string, cut from the answer;
        recompute_ratio and check_layer: accuracy recovery (0: plain
        injection, 1: full recompute); ignore_eos: decode on to the token
        budget past the tokens that end an answer (left out of the text);
        fact_temperature, fact_scale: attention calibration for the injected
        facts (their scores divided by the temperature, their weights
        multiplied by the scale; scale 0 = 1 / sqrt(facts injected); 1 and
        1, the default: off)."""
        cq, cns = cstr(question, "question"), cstr(namespace, "namespace")
        o, _alive = _ask_options(k, full_recompute, metric, fact_ids, max_tokens, temperature, top_p, seed, stop,
                                 recompute_ratio, check_layer, ignore_eos, fact_temperature, fact_scale)
        out = ffi.new("infs_answer **")
        with self._use() as p, _store(store)._use() as sp, _embedder_use(embedder) as ep:
            check(lib.infs_engine_ask(out, p, sp, ep, cns, cq, o))
        try:
            return Answer._from_c(out[0])
        finally:
            lib.infs_answer_free(out[0])

    def ask_batch(self, store: Store, questions: Sequence[str], *, namespace: str,
                  embedder: Optional[Embedder] = None, k: int = 10, full_recompute: bool = False,
                  metric: Union[Metric, str] = Metric.COSINE, fact_ids: Any = None, max_tokens: int = 64,
                  temperature: float = 0.0, top_p: float = 1.0, seed: int = 0, stop: Optional[str] = None,
                  recompute_ratio: float = 0.0, check_layer: int = 0, ignore_eos: bool = False,
                  fact_temperature: float = 1.0, fact_scale: float = 1.0) -> List[Answer]:
        """Answers every question as ask does, with the same options
        (``infs_engine_ask_batch``); answer i is question i's. On a device
        engine, and on a host engine made with max_seqs > 1, the requests run
        together with continuous batching: up to max_seqs sequences at once,
        a finished sequence's blocks returned to the pool and the next
        question admitted in its place; a request's time parts are those of
        the group it was admitted with. A host engine of max_seqs 0 or 1
        answers them one after another."""
        if isinstance(questions, str) or not hasattr(questions, "__iter__"):
            raise TypeError(f"questions must be a sequence of str, not {type(questions).__name__}")
        keep = [cstr(q, f"questions[{i}]") for i, q in enumerate(questions)]
        n = len(keep)
        cns = cstr(namespace, "namespace")
        o, _alive = _ask_options(k, full_recompute, metric, fact_ids, max_tokens, temperature, top_p, seed, stop,
                                 recompute_ratio, check_layer, ignore_eos, fact_temperature, fact_scale)
        qs = ffi.new("const char *[]", keep) if n else ffi.NULL
        out = ffi.new("infs_answer *[]", max(n, 1))
        with self._use() as p, _store(store)._use() as sp, _embedder_use(embedder) as ep:
            check(lib.infs_engine_ask_batch(out, p, sp, ep, cns, qs, n, o))
        try:
            return [Answer._from_c(out[i]) for i in range(n)]
        finally:
            for i in range(n):
                lib.infs_answer_free(out[i])


def _store(store: Store) -> Store:
    if not isinstance(store, Store):
        raise TypeError(f"store must be an inferscale.Store, not {type(store).__name__}")
    return store


def _embedder_use(embedder: Optional[Embedder]) -> Any:
    """embedder._use(), or NULL for no embedder."""
    if embedder is None:
        return contextlib.nullcontext(ffi.NULL)
    if not isinstance(embedder, Embedder):
        raise TypeError(f"embedder must be an inferscale.Embedder or None, not {type(embedder).__name__}")
    return embedder._use()


def _ask_options(k: int, full_recompute: bool, metric: Union[Metric, str], fact_ids: Any, max_tokens: int,
                 temperature: float, top_p: float, seed: int, stop: Optional[str], recompute_ratio: float,
                 check_layer: int, ignore_eos: bool, fact_temperature: float = 1.0, fact_scale: float = 1.0):
    """infs_ask_options from the library's defaults at the current version,
    fields set by name; returns it with what its pointers point into."""
    o = ffi.new("infs_ask_options *")
    check(lib.infs_ask_options_init(o, lib.INFS_ASK_OPTIONS_VERSION))
    o.k = as_int(k, "k", "uint32")
    o.full_recompute = int(bool(full_recompute))
    o.metric = int(Metric.coerce(metric))
    alive: List[Any] = []
    if fact_ids is not None:
        ids = as_int_array(fact_ids, "fact_ids", "uint64")
        # A non-NULL pointer even for no ids: no facts, rather than retrieval.
        buf = ids if ids.shape[0] else np.zeros(1, np.uint64)
        alive.append(buf)
        o.fact_ids = ffi.cast("const uint64_t *", ffi.from_buffer(buf))
        o.n_fact_ids = ids.shape[0]
    g = o.generate
    g.max_tokens = as_int(max_tokens, "max_tokens", "uint32")
    g.temperature = _float(temperature, "temperature")
    g.top_p = _float(top_p, "top_p")
    g.seed = as_int(seed, "seed", "uint64")
    cstop = cstr(stop, "stop", none_ok=True)
    alive.append(cstop)
    g.stop = cstop
    o.recompute_ratio = _float(recompute_ratio, "recompute_ratio")
    o.check_layer = as_int(check_layer, "check_layer", "uint32")
    o.ignore_eos = int(bool(ignore_eos))
    o.fact_temperature = _float(fact_temperature, "fact_temperature")
    o.fact_scale = _float(fact_scale, "fact_scale")
    return o, alive


def _float(value: Any, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    return float(value)
