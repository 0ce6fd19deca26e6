"""Arguments are checked before C is called: every integer argument of the
API refuses a bool, a float (even 2.0), a str, a float or bool array and a
value outside its C type's range (2**32 + x would wrap, -1 would wrap where
unsigned); every string argument refuses another type and a NUL character.
Each refusal leaves the store, the caches and the rotated array untouched."""

import dataclasses
import os
from typing import Any, Callable

import numpy as np
import pytest

import inferscale as infs
from conftest import random_kv

CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
SMOLLM2 = os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
MINILM = os.path.join(CACHE, "minilm")
NB, BS = 8, 4
CANARY = 7.0
RANGES = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
          "uint64": (0, 2**64 - 1), "int": (-2**31, 2**31 - 1), "size_t": (0, 2**64 - 1)}
BITS = {"int32": 32, "uint32": 32, "int": 32, "int64": 64, "uint64": 64, "size_t": 64}


@pytest.fixture(scope="module")
def model():
    assert os.path.exists(SMOLLM2), "run scripts/fetch-models.sh"
    with infs.Model(SMOLLM2) as m:
        yield m


class Env:
    """A store with two facts of 'alice', a paged cache to inject into, a
    paged cache of the model's shape (one slot per block) and an array to
    rotate; state() snapshots all of them and the files of tmp_path."""

    def __init__(self, tmp_path, geometry, request):
        self.tmp, self.geo, self._request = tmp_path, geometry, request
        self.store = infs.Store.create(tmp_path / "facts.infs", geometry, "m", sync="off")
        rng = np.random.default_rng(5)
        self.kv2 = random_kv(geometry, 2, rng)
        self.f1 = self.store.put("alice", np.arange(5), *random_kv(geometry, 5, rng), np.ones(16))
        self.f2 = self.store.put("alice", np.arange(3), *random_kv(geometry, 3, rng), np.ones(16))
        H, D = geometry.n_kv_heads, geometry.head_dim
        self.layout = infs.KVLayout.vllm([np.full((2, NB, BS, H, D), CANARY, np.float32)
                                          for _ in range(geometry.n_layers)])
        self.mcache = infs.KVLayout.vllm([np.full((2, 4, 1, 3, 64), CANARY, np.float32) for _ in range(30)])
        self.x = rng.standard_normal((2, H, D)).astype(np.float32)

    @property
    def model(self) -> infs.Model:
        return self._request.getfixturevalue("model")

    def put(self, tokens=(1, 2), **kwargs) -> int:
        return self.store.put("alice", tokens, *self.kv2, np.ones(16), **kwargs)

    def state(self):
        caches = [np.array(v) for lay in (self.layout, self.mcache) for v in lay.k_views + lay.v_views]
        return (sorted(os.listdir(self.tmp)), self.store.namespaces(), self.store.list("alice").tolist(),
                self.x.copy(), caches)


@pytest.fixture
def env(tmp_path, geometry, request):
    e = Env(tmp_path, geometry, request)
    yield e
    e.store.close()


def same_state(a, b) -> bool:
    return (a[:3] == b[:3] and np.array_equal(a[3], b[3])
            and all(np.array_equal(x, y) for x, y in zip(a[4], b[4])))


@dataclasses.dataclass
class Arg:
    name: str          # as the error message names it
    ctype: str
    call: Callable[[Env, Any], Any]
    good: Any          # a value the call takes (a list of two for arrays), or env -> values


def goods(arg: Arg, e: Env) -> list:
    """Good values to call with: arg.good as Python ints and as numpy int64."""
    if callable(arg.good):
        return arg.good(e)
    return [arg.good, np.array(arg.good, np.int64) if isinstance(arg.good, list) else np.int64(arg.good)]


def geometry_with(field):
    base = dict(n_layers=3, n_kv_heads=2, head_dim=8, rotary_dim=8, rope_original_max_pos=8192, embed_dim=16)
    return Arg(f"Geometry.{field}", "uint32", lambda e, v: infs.Geometry(**{**base, field: v}), base[field])


SCALARS = {
    "Store-device": Arg("device", "int",
                        lambda e, v: infs.Store.create(e.tmp / "new.infs", e.geo, "m", device=v).close(), -1),
    "Store-device_budget_bytes": Arg("device_budget_bytes", "uint64", lambda e, v: infs.Store.create(
        e.tmp / "new.infs", e.geo, "m", device_budget_bytes=v).close(), 0),
    "Store-faiss_min_facts": Arg("faiss_min_facts", "uint64", lambda e, v: infs.Store.create(
        e.tmp / "new.infs", e.geo, "m", faiss_min_facts=v).close(), 1000),
    "put-source_id": Arg("source_id", "uint64", lambda e, v: e.put(source_id=v), 5),
    "put-timestamp": Arg("timestamp", "int64", lambda e, v: e.put(timestamp=v), 1700000000),
    "get-fact_id": Arg("fact_id", "uint64", lambda e, v: e.store.get("alice", v),
                       lambda e: [e.f1, np.int64(e.f2)]),
    "delete-fact_id": Arg("fact_id", "uint64", lambda e, v: e.store.delete("alice", v),
                          lambda e: [e.f1, np.uint64(e.f2)]),
    "retrieve-k": Arg("k", "size_t", lambda e, v: e.store.retrieve("alice", np.ones(16), v), 2),
    "inject-start_pos": Arg("start_pos", "uint32",
                            lambda e, v: e.store.inject("alice", [e.f1], e.layout, None, v), 3),
    **{f"Geometry-{f}": geometry_with(f) for f in
       ("n_layers", "n_kv_heads", "head_dim", "rotary_dim", "rope_original_max_pos", "embed_dim")},
    "Model-n_threads": Arg("n_threads", "uint32", lambda e, v: infs.Model(SMOLLM2, n_threads=v).close(), 1),
    "Model.geometry-embed_dim": Arg("embed_dim", "uint32", lambda e, v: e.model.geometry("f32", embed_dim=v), 384),
    "forward-n_past": Arg("n_past", "uint32", lambda e, v: e.model.forward(
        [1], [2], cache=e.mcache, block_table=[0, 1, 2, 3], n_past=v, write_cache=True), 2),
    "is_special-token": Arg("token", "int32", lambda e, v: e.model.tokenizer.is_special(v), 1),
    "piece-token": Arg("token", "int32", lambda e, v: e.model.tokenizer.piece(v), 1),
    "Embedder-n_threads": Arg("n_threads", "uint32", lambda e, v: infs.Embedder(MINILM, n_threads=v).close(), 1),
    "Embedder-max_seq_length": Arg("max_seq_length", "uint32",
                                   lambda e, v: infs.Embedder(MINILM, max_seq_length=v).close(), 64),
    "transformers-batch_index": Arg("batch_index", "int64", lambda e, v: infs.KVLayout.transformers(
        [(np.zeros((2, 2, 4, 8), np.float32),) * 2] * 3, batch_index=v), 1),
}

# Two-element arrays: the second element is the one that is wrong.
ARRAYS = {
    "put-tokens": Arg("tokens", "int32", lambda e, v: e.put(tokens=v), [1, 2]),
    "inject-ids": Arg("ids", "uint64", lambda e, v: e.store.inject("alice", v, e.layout, None, 0),
                      lambda e: [[e.f1, e.f2], np.array([e.f2, e.f1], np.int64), [e.f1, np.uint64(e.f2)]]),
    # f1's 5 tokens fill block_table[0] and one slot of block_table[1].
    "inject-block_table": Arg("block_table", "int32",
                              lambda e, v: e.store.inject("alice", [e.f1], e.layout, v, 0), [0, 1]),
    "rope_rotate-positions": Arg("positions", "int32", lambda e, v: infs.rope_rotate(e.x, v, e.geo), [0, 1]),
    "forward-tokens": Arg("tokens", "int32", lambda e, v: e.model.forward(v), [1, 2]),
    "forward-positions": Arg("positions", "int32", lambda e, v: e.model.forward([1, 2], v), [0, 1]),
    # One slot per block: position p is written to block_table[p].
    "forward-block_table": Arg("block_table", "int32", lambda e, v: e.model.forward(
        [1, 2], [0, 1], cache=e.mcache, block_table=v, write_cache=True), [0, 1]),
    "forward-seq_ids": Arg("seq_ids", "int32", lambda e, v: e.model.forward([1, 2], seq_ids=v), [0, 1]),
    "capture-tokens": Arg("tokens", "int32", lambda e, v: e.model.capture(v), [1, 2]),
    "capture-context": Arg("context", "int32", lambda e, v: e.model.capture([1], v), [1, 2]),
    "decode-tokens": Arg("tokens", "int32", lambda e, v: e.model.tokenizer.decode(v), [1, 2]),
}


def scalar_cases(ctype):
    """label: (value, exception, what the message must also name)."""
    lo, hi = RANGES[ctype]
    return {"2**bits+7": (2**BITS[ctype] + 7, infs.RangeError, ctype),
            "below": (-1 if lo == 0 else lo - 1, infs.RangeError, ctype),
            "1.9": (1.9, TypeError, "float"), "2.0": (2.0, TypeError, "float"),
            "True": (True, TypeError, "bool"), "str": ("3", TypeError, "str"),
            "np.float64": (np.float64(1.0), TypeError, "float64"),
            "np-out-of-range": (np.int64(-1) if lo == 0 else np.uint64(hi + 1), infs.RangeError, ctype)}


def array_cases(ctype, first):
    """As scalar_cases, for [first, wrong] lists and arrays."""
    lo, hi = RANGES[ctype]
    wrap, below = 2**BITS[ctype] + 3, -1 if lo == 0 else lo - 1
    wide = -1 if lo == 0 else 2**32 + 3
    out = {"2**bits+3": ([first, wrap], infs.RangeError, f"[1] = {wrap} "),
           "below": ([first, below], infs.RangeError, f"[1] = {below} "),
           "1.9": ([first, 1.9], TypeError, "[1]"), "2.0": ([first, 2.0], TypeError, "[1]"),
           "True": ([first, True], TypeError, "[1]"), "str-element": ([first, "3"], TypeError, "[1]"),
           "str": ("12", TypeError, "str"),
           "float-array": (np.array([float(first), 2.9]), TypeError, "float64"),
           "bool-array": (np.array([first, 1], bool), TypeError, "bool"),
           "int64-array": (np.array([first, wide], np.int64), infs.RangeError, f"[1] = {wide} ")}
    if hi < 2**63:
        out["uint64-array"] = (np.array([first, 2**63 + 3], np.uint64), infs.RangeError, f"[1] = {2**63 + 3} ")
    return out


def cases():
    for key, arg in SCALARS.items():
        for label in scalar_cases(arg.ctype):
            yield pytest.param(arg, label, id=f"{key}-{label}")
    for key, arg in ARRAYS.items():
        for label in array_cases(arg.ctype, 0):
            yield pytest.param(arg, label, id=f"{key}-{label}")


@pytest.mark.parametrize("arg,label", list(cases()))
def test_integer_argument_refused_before_c(env, arg, label):
    is_array = any(arg is a for a in ARRAYS.values())
    value, exc, also = (array_cases(arg.ctype, int(goods(arg, env)[0][0])) if is_array
                        else scalar_cases(arg.ctype))[label]
    before = env.state()
    with pytest.raises(exc) as e:
        arg.call(env, value)
    message = str(e.value)
    assert arg.name in message and also in message, message
    if exc is infs.RangeError:
        lo, hi = RANGES[arg.ctype]
        assert f"[{lo}, {hi}]" in message and e.value.code == infs.lib.INFS_ERANGE, message
    assert same_state(before, env.state())


@pytest.mark.parametrize("arg", [pytest.param(a, id=k) for k, a in {**SCALARS, **ARRAYS}.items()])
def test_integer_argument_good_values_are_taken(env, arg):
    """The same calls with a good value (a numpy int64 array or numpy scalar
    as well as Python ints) go through, so the refusals above are the
    checks' doing."""
    for good in goods(arg, env):
        arg.call(env, good)


def test_block_table_entry_past_int32_writes_nothing(env):
    """The reported hole: 2**32 + 3 used to wrap to block 3, and a float
    table [0.0, 2.9] to block 2."""
    for table in ([0, 2**32 + 3], np.array([0, 2**32 + 3]), [0.0, 2.9], np.array([0.0, 2.9])):
        before = env.state()
        with pytest.raises((infs.RangeError, TypeError), match="block_table"):
            env.store.inject("alice", [env.f1], env.layout, table, 0)
        assert same_state(before, env.state())
    assert env.store.inject("alice", [env.f1], env.layout, [0, 3], 0) == 5
    k = np.asarray(env.layout.k_views[0])
    assert (k[3, 0] != CANARY).any() and (k[3, 1:] == CANARY).all() and (k[2] == CANARY).all()


@pytest.mark.parametrize("enum,value", [(infs.DType, True), (infs.DType, 1.9), (infs.Metric, 1.0),
                                        (infs.SyncMode, np.float32(2))])
def test_enum_arguments_take_only_ints_and_names(enum, value):
    with pytest.raises(TypeError, match=enum.__name__):
        enum.coerce(value)
    with pytest.raises(ValueError, match="unknown"):
        enum.coerce(7)
    assert enum.coerce(1) is enum(1) and enum.coerce(np.int64(1)) is enum(1)


@pytest.fixture(scope="module")
def embedder():
    assert os.path.exists(os.path.join(MINILM, "model.safetensors")), "run scripts/fetch-models.sh"
    with infs.Embedder(MINILM) as emb:
        yield emb


# name as the message gives it, kind (True: a path, str, bytes or os.PathLike;
# False: a str; None: a str, its content only), the call
STRINGS = {
    **{f"{fn}-namespace": ("namespace", False, call) for fn, call in {
        "count": lambda e, s: e.store.count(s),
        "put": lambda e, s: e.store.put(s, [1, 2], *e.kv2, np.ones(16)),
        "get": lambda e, s: e.store.get(s, e.f1),
        "delete": lambda e, s: e.store.delete(s, e.f1),
        "list": lambda e, s: e.store.list(s),
        "drop": lambda e, s: e.store.drop(s),
        "contains": lambda e, s: s in e.store,
        "retrieve": lambda e, s: e.store.retrieve(s, np.ones(16), 2),
        "inject": lambda e, s: e.store.inject(s, [e.f1], e.layout),
    }.items()},
    "put-text": ("text", False, lambda e, s: e.put(text=s)),
    "put-metadata": ("metadata", False, lambda e, s: e.put(metadata=s)),
    "Store-identity": ("identity", False, lambda e, s: infs.Store.create(e.tmp / "new.infs", e.geo, s)),
    "Store-faiss_index": ("faiss_index", False,
                          lambda e, s: infs.Store.create(e.tmp / "new.infs", e.geo, "m", faiss_index=s)),
    "Store-path": ("path", True, lambda e, s: infs.Store.create(s, e.geo, "m")),
    "Model-path": ("path", True, lambda e, s: infs.Model(s)),
    "Tokenizer-path": ("path", True, lambda e, s: infs.Tokenizer(s)),
    "Embedder-path": ("path", True, lambda e, s: infs.Embedder(s)),
    "render_chat-role": ("messages[1] role", False, lambda e, s: e.model.tokenizer.render_chat(
        [{"role": "system", "content": "a"}, {"role": s, "content": "b"}])),
    "encode_chat-content": ("messages[0] content", False,
                            lambda e, s: e.model.tokenizer.encode_chat([{"role": "user", "content": s}])),
    "embed-text": ("texts", None, lambda e, s: e.embedder(s)),  # its types: test_other_string_arguments
    "embed-texts": ("texts[1]", False, lambda e, s: e.embedder(["fine", s])),
    "embed-prompt": ("prompt", False, lambda e, s: e.embedder("fine", prompt=s)),
}


def string_cases(is_path):
    """label: (value or env -> value, exception, what the message must also say)."""
    if is_path:
        return {"NUL": (lambda e: str(e.tmp / "a\0b"), infs.InvalidArgumentError, "NUL"),
                "NUL-bytes": (lambda e: os.fsencode(e.tmp / "a\0b"), infs.InvalidArgumentError, "NUL"),
                "int": (5, TypeError, "must be a str, bytes or os.PathLike, not int"),
                "None": (None, TypeError, "not NoneType")}
    content = {"NUL": ("ali\0ce", infs.InvalidArgumentError, "NUL character at index 3"),
               "surrogate": ("ali\ud800", infs.InvalidArgumentError, "not valid text")}
    if is_path is None:
        return content
    return {**content, "int": (5, TypeError, "must be a str, not int"),
            "bytes": (b"alice", TypeError, "must be a str, not bytes"),
            "list": (["alice"], TypeError, "must be a str, not list")}


@pytest.mark.parametrize("key,label", [(k, c) for k, (_, is_path, _) in STRINGS.items()
                                       for c in string_cases(is_path)])
def test_string_argument_refused_before_c(env, request, key, label):
    name, is_path, call = STRINGS[key]
    if "embed" in key:
        env.embedder = request.getfixturevalue("embedder")
    value, exc, also = string_cases(is_path)[label]
    value = value(env) if callable(value) else value
    before = env.state()
    with pytest.raises(exc) as e:
        call(env, value)
    assert f"{name} " in str(e.value) and also in str(e.value), str(e.value)
    assert same_state(before, env.state())


def test_count_of_a_non_str_namespace(env):
    with pytest.raises(TypeError, match="^namespace must be a str, not int$"):
        env.store.count(5)


def test_other_string_arguments(env, embedder):
    tok = env.model.tokenizer
    with pytest.raises(TypeError, match="text must be a str or bytes, not int"):
        tok.encode(5)
    assert tok.encode("a\0b").tolist() == tok.encode(b"a\0b").tolist()  # a length, not a C string
    for texts in (5, b"fine"):
        with pytest.raises(TypeError, match=f"texts must be a str or a sequence of str, not {type(texts).__name__}"):
            embedder(texts)
    with pytest.raises(TypeError, match="metadata must be a str, not list"):
        env.put(metadata=["a"])
    fid = env.put(metadata={"note": "a\0b"}, text="fine")  # a dict is stored as JSON: the NUL escaped
    assert env.store.get("alice", fid).metadata == '{"note": "a\\u0000b"}'
