"""The library's tokenizer: byte-level BPE from a GGUF file or a Hugging Face
tokenizer.json, and chat prompt rendering."""

from __future__ import annotations

import os
from typing import Any, Dict, Sequence, Union

import numpy as np

from ._ffi import as_int, check, cpath, cstr, ffi, lib
from .arrays import as_int_array
from .geometry import _NamedEnum
from .handle import Handle

__all__ = ["Tokenizer", "ChatFormat"]


class ChatFormat(_NamedEnum):
    """Chat prompt formats (``infs_chat_format``); AUTO is the tokenizer's own."""
    AUTO = 0
    CHATML = 1
    LLAMA3 = 2
    MISTRAL = 3
    LLAMA31 = 4


def _sized(call, alloc, first: int):
    """Runs call(buffer, cap, n_out) with a guessed capacity, and again with
    the exact one when the library answers INFS_ERANGE."""
    n_out = ffi.new("size_t *")
    cap = max(first, 1)
    buf = alloc(cap)
    status = call(buf, cap, n_out)
    if status == lib.INFS_ERANGE and int(n_out[0]) >= cap:
        cap = int(n_out[0]) + 1
        buf = alloc(cap)
        status = call(buf, cap, n_out)
    check(status)
    return buf, int(n_out[0])


def _messages(messages: Sequence[Union[Dict[str, str], Any]]):
    keep = []
    arr = ffi.new("infs_chat_message[]", max(len(messages), 1))
    for i, m in enumerate(messages):
        role, content = (m["role"], m["content"]) if isinstance(m, dict) else (m.role, m.content)
        r, c = cstr(role, f"messages[{i}] role"), cstr(content, f"messages[{i}] content")
        keep += [r, c]
        arr[i].role, arr[i].content = r, c
    return arr, keep


class Tokenizer(Handle):
    """A tokenizer loaded from a .gguf model file, a tokenizer.json, or a
    directory holding tokenizer.json (and tokenizer_config.json). Immutable
    and safe to share between threads; ``close()`` or ``with`` frees it, as
    does garbage collection, with the locking rule of ``Handle``. A model's
    tokenizer (``Model.tokenizer``) belongs to the model and closes with it."""

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self._init_handle()
        out = ffi.new("infs_tokenizer **")
        check(lib.infs_tokenizer_load(out, cpath(path)))
        self._adopt(out[0], lib.infs_tokenizer_free)

    load = classmethod(lambda cls, path: cls(path))

    @classmethod
    def _borrowed(cls, ptr: Any, owner: Any) -> "Tokenizer":
        """A tokenizer owned by another object (a Model), kept alive by it."""
        tok = cls.__new__(cls)
        tok._init_handle(owner)
        tok._adopt(ptr, None)
        return tok

    def _what(self) -> str:
        return "tokenizer"

    def _call(self, fn: Any, *args: Any) -> Any:
        """fn(pointer, *args) under _use."""
        with self._use() as p:
            return fn(p, *args)

    @property
    def bos(self) -> int:
        """Beginning-of-sequence token, -1 when the model has none."""
        return int(self._call(lib.infs_tokenizer_bos))

    @property
    def eos(self) -> int:
        """End-of-sequence token, -1 when the model has none."""
        return int(self._call(lib.infs_tokenizer_eos))

    @property
    def vocab_size(self) -> int:
        return int(self._call(lib.infs_tokenizer_vocab_size))

    def __len__(self) -> int:
        return self.vocab_size

    def is_special(self, token: int) -> bool:
        return bool(self._call(lib.infs_tokenizer_is_special, as_int(token, "token", "int32")))

    def encode(self, text: Union[str, bytes], *, add_special: bool = False,
               parse_special: bool = False) -> np.ndarray:
        """Token ids (int32) of text. add_special adds BOS/EOS as the model's
        configuration asks; parse_special reads special tokens written in the
        text ("<|im_start|>") as those tokens (leave it off for user input)."""
        if isinstance(text, str):
            data = text.encode("utf-8")
        elif isinstance(text, (bytes, bytearray, memoryview)):
            data = bytes(text)
        else:
            raise TypeError(f"text must be a str or bytes, not {type(text).__name__}")
        flags = ((lib.INFS_TOKENIZE_ADD_SPECIAL if add_special else 0)
                 | (lib.INFS_TOKENIZE_PARSE_SPECIAL if parse_special else 0))
        src = ffi.from_buffer(data)
        with self._use() as p:
            buf, n = _sized(lambda out, cap, n_out: lib.infs_tokenize(p, src, len(data), flags, out, cap, n_out),
                            lambda cap: ffi.new("infs_token[]", cap), len(data) + 8)
        return np.frombuffer(ffi.buffer(buf, 4 * n), dtype=np.int32).copy()

    def _tokens(self, tokens: Any):
        arr = as_int_array(tokens, "tokens", "int32")
        return arr, (ffi.cast("const infs_token *", ffi.from_buffer(arr)) if arr.size else ffi.NULL)

    def decode_bytes(self, tokens: Any, *, skip_special: bool = False) -> bytes:
        """The exact bytes the tokens stand for."""
        arr, ptr = self._tokens(tokens)
        flags = lib.INFS_DETOKENIZE_SKIP_SPECIAL if skip_special else 0
        with self._use() as p:
            buf, n = _sized(lambda out, cap, n_out: lib.infs_detokenize(p, ptr, arr.size, flags, out, cap, n_out),
                            lambda cap: ffi.new("char[]", cap), 8 * arr.size + 16)
        return ffi.buffer(buf, n)[:]

    def decode(self, tokens: Any, *, skip_special: bool = False) -> str:
        """The text of tokens (a cut UTF-8 sequence shows as U+FFFD)."""
        return self.decode_bytes(tokens, skip_special=skip_special).decode("utf-8", "replace")

    def piece(self, token: int) -> bytes:
        """The bytes of one token."""
        token = as_int(token, "token", "int32")
        with self._use() as p:
            buf, n = _sized(lambda out, cap, n_out: lib.infs_token_to_piece(p, token, out, cap, n_out),
                            lambda cap: ffi.new("char[]", cap), 64)
        return ffi.buffer(buf, n)[:]

    @property
    def chat_format(self) -> ChatFormat:
        """The format of the tokenizer's chat template (CHATML when it has none);
        UnsupportedError for a template of no known format."""
        out = ffi.new("infs_chat_format *")
        check(self._call(lib.infs_chat_format_detect, out))
        return ChatFormat(int(out[0]))

    def render_chat(self, messages: Sequence[Dict[str, str]], *,
                    format: Union[ChatFormat, str] = ChatFormat.AUTO,
                    add_generation_prompt: bool = True) -> str:
        """The prompt text for messages ([{"role": ..., "content": ...}]), as
        transformers' apply_chat_template(..., tokenize=False) gives it."""
        arr, keep = _messages(messages)
        fmt = int(ChatFormat.coerce(format))
        flags = lib.INFS_CHAT_ADD_GENERATION_PROMPT if add_generation_prompt else 0
        with self._use() as p:
            buf, n = _sized(lambda out, cap, n_out: lib.infs_chat_render(p, fmt, arr, len(messages), flags,
                                                                         out, cap, n_out),
                            lambda cap: ffi.new("char[]", cap), 256 + sum(len(m["content"]) for m in messages
                                                                          if isinstance(m, dict)) * 2)
        del keep
        return ffi.buffer(buf, n)[:].decode("utf-8", "replace")

    def encode_chat(self, messages: Sequence[Dict[str, str]], *,
                    format: Union[ChatFormat, str] = ChatFormat.AUTO,
                    add_generation_prompt: bool = True) -> np.ndarray:
        """The prompt's token ids: render_chat then encode with special tokens parsed."""
        arr, keep = _messages(messages)
        fmt = int(ChatFormat.coerce(format))
        flags = lib.INFS_CHAT_ADD_GENERATION_PROMPT if add_generation_prompt else 0
        with self._use() as p:
            buf, n = _sized(lambda out, cap, n_out: lib.infs_chat_tokenize(p, fmt, arr, len(messages), flags,
                                                                           out, cap, n_out),
                            lambda cap: ffi.new("infs_token[]", cap), 512)
        del keep
        return np.frombuffer(ffi.buffer(buf, 4 * n), dtype=np.int32).copy()
