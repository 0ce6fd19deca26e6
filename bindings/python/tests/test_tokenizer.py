"""Tokenizer against the transformers goldens of tests/fixtures/tokenizer
(SmolLM2's GGUF tokenizer and a tiny GPT-2 tokenizer.json)."""

import json
import os

import numpy as np
import pytest

import inferscale as infs
from conftest import REPO

FIX = os.path.join(REPO, "tests", "fixtures", "tokenizer")
CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
SMOLLM2 = os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def smollm2():
    assert os.path.exists(SMOLLM2), "run scripts/fetch-models.sh"
    with infs.Tokenizer(SMOLLM2) as tok:
        yield tok


def test_adversarial_strings(smollm2):
    cases = fixture("adversarial_smollm2.json")["cases"]
    assert len(cases) >= 30
    for c in cases:
        text = bytes.fromhex(c["hex"])
        assert smollm2.encode(text, parse_special=True).tolist() == c["ids"], c["name"]
        assert smollm2.encode(text).tolist() == c["ids_no_special_parsing"], c["name"]
        ids = np.array(c["ids"], dtype=np.int32)
        assert smollm2.decode_bytes(ids) == bytes.fromhex(c["decoded_hex"]), c["name"]
        assert smollm2.decode_bytes(ids, skip_special=True) == bytes.fromhex(c["decoded_skip_special_hex"])


def test_chat(smollm2):
    assert smollm2.chat_format == infs.ChatFormat.CHATML
    for c in fixture("chat_smollm2.json")["cases"]:
        gen = c["add_generation_prompt"]
        assert smollm2.render_chat(c["messages"], add_generation_prompt=gen) == c["chatml"], c["name"]
        assert smollm2.encode_chat(c["messages"], add_generation_prompt=gen).tolist() == c["chatml_ids"]
        for fmt in ("llama3", "llama31", "mistral"):
            if c.get(fmt) is not None:
                assert smollm2.render_chat(c["messages"], format=fmt, add_generation_prompt=gen) == c[fmt], \
                    (c["name"], fmt)


def test_tiny_gpt2_tokenizer_json():
    g = fixture("tiny_gpt2_goldens.json")
    with infs.Tokenizer(os.path.join(FIX, "tiny_gpt2.json")) as tok:
        assert tok.bos == g["bos"] and tok.vocab_size == len(tok) == g["vocab_size"]
        for c in g["cases"]:
            text = bytes.fromhex(c["hex"]).decode("utf-8", "replace")
            assert tok.encode(text, add_special=True, parse_special=True).tolist() == c["ids"], c["name"]
            assert tok.encode(text, parse_special=True).tolist() == c["ids_no_bos"], c["name"]


def test_pieces_specials_and_lifetime(smollm2):
    ids = smollm2.encode("<|im_start|>user", parse_special=True)
    assert smollm2.is_special(int(ids[0])) and not smollm2.is_special(int(ids[-1]))
    assert b"".join(smollm2.piece(int(i)) for i in ids) == b"<|im_start|>user"
    assert smollm2.decode(smollm2.encode("héllo wörld " * 200)) == "héllo wörld " * 200
    assert smollm2.encode("").size == 0 and smollm2.decode([]) == ""
    with pytest.raises(infs.InvalidArgumentError):
        smollm2.decode([smollm2.vocab_size])
    with pytest.raises(infs.NotFoundError):
        infs.Tokenizer(os.path.join(FIX, "missing.json"))
    t = infs.Tokenizer(SMOLLM2)
    t.close()
    t.close()
    with pytest.raises(infs.InvalidArgumentError, match="closed"):
        t.encode("x")
