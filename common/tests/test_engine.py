"""The chat engine: greedy generation through the KV cache equals re-running the whole sequence, and
is the same on stage1, stage2 and stage3 from the same weights; seeded sampling repeats and rows
of one batch differ; rows stop at <|assistant_end|> / <|bos|>; the calculator tool forces
<|output_start|> result <|output_end|> into its row (mask 0) and the model reads them back; the
calculator computes arithmetic and string counts and refuses everything else, quickly."""

from __future__ import annotations

import time

import numpy as np
import pytest

from common.chat.calculator import evaluate
from common.chat.engine import Engine, decode_speed, greedy_cached, greedy_uncached, sample_tokens
from common.models.nanochat import NanoChat, NanoChatConfig, random_state
from common.train.checkpoint import load_model_weights

SPECIALS = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
            "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"]


class ByteTokenizer:
    """Bytes are ids 0-255, nanochat's nine special tokens 256-264 (a stand-in for the BPE)."""

    def __init__(self):
        self.specials = {name: 256 + i for i, name in enumerate(SPECIALS)}
        self.bos_id = self.specials["<|bos|>"]
        self.vocab_size = 256 + len(SPECIALS)

    def special_id(self, name: str) -> int:
        return self.specials[name]

    def encode_ordinary(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        names = {v: k for k, v in self.specials.items()}
        out, buf = [], bytearray()
        for i in ids:
            if i in names:
                out.append(buf.decode("utf-8", errors="replace") + names[i])
                buf = bytearray()
            else:
                buf.append(i)
        return "".join(out) + buf.decode("utf-8", errors="replace")


TOK = ByteTokenizer()
S = TOK.specials
CFG = NanoChatConfig(sequence_len=32, vocab_size=TOK.vocab_size, n_layer=2, n_head=4, n_kv_head=2, n_embd=32)
WEIGHTS = random_state(CFG, seed=11)
PROMPT = [S["<|bos|>"], S["<|user_start|>"], *TOK.encode_ordinary("hi"), S["<|user_end|>"], S["<|assistant_start|>"]]


def build(stage):
    model = NanoChat(stage, CFG)
    load_model_weights(stage, model, WEIGHTS)
    return model


@pytest.fixture(scope="module")
def engine(stage2):
    return Engine(build(stage2), TOK, stage2.Tensor)


def test_greedy_engine_equals_uncached_generation(stage2, engine):
    expected = greedy_uncached(engine.model, stage2.Tensor, PROMPT, 12)
    columns = list(engine.generate(PROMPT, max_tokens=12, temperature=0.0))
    tokens = [c[0][0] for c in columns]
    stop = next((i for i, t in enumerate(tokens) if t in engine.stops), len(tokens) - 1)
    assert tokens[:stop + 1] == expected[:stop + 1]
    assert all(m == [1] for _, m in columns)  # nothing forced


def test_chunked_prefill_same_tokens(stage2, engine):
    """A prompt of 7 run as chunks of 3, 3 and 1 padded to 3 gives the tokens of one whole prefill."""
    chunked = Engine(engine.model, TOK, stage2.Tensor, prefill_chunk=3)
    whole = engine.generate_batch(PROMPT, num_samples=2, max_tokens=8, temperature=1.0, seed=5)
    assert chunked.generate_batch(PROMPT, num_samples=2, max_tokens=8, temperature=1.0, seed=5) == whole
    with pytest.raises(ValueError, match="prefill_chunk"):
        Engine(engine.model, TOK, stage2.Tensor, prefill_chunk=0)


def test_greedy_same_on_every_stage(stage1, stage2):
    stage3 = pytest.importorskip("stage3_compiler")
    outs = [greedy_cached(build(s), s.Tensor, PROMPT, 10) for s in (stage1, stage2, stage3)]
    assert outs[0] == outs[1] == outs[2]
    assert len(set(outs[0])) > 1  # a real sequence, not one repeated token


def test_seeded_sampling(engine):
    a = engine.generate_batch(PROMPT, num_samples=3, max_tokens=10, temperature=1.0, seed=7)
    b = engine.generate_batch(PROMPT, num_samples=3, max_tokens=10, temperature=1.0, seed=7)
    c = engine.generate_batch(PROMPT, num_samples=3, max_tokens=10, temperature=1.0, seed=8)
    assert a == b
    assert a[0] != c[0]
    rows = [r[len(PROMPT):] for r in a[0]]
    assert len({tuple(r) for r in rows}) > 1  # each row samples its own tokens, the first one included
    assert all(r[:len(PROMPT)] == PROMPT for r in a[0])
    assert all(m[:len(PROMPT)] == [0] * len(PROMPT) for m in a[1])


def test_greedy_rows_agree_and_top_k_one_is_greedy(engine):
    greedy, _ = engine.generate_batch(PROMPT, num_samples=2, max_tokens=8, temperature=0.0)
    top1, _ = engine.generate_batch(PROMPT, num_samples=1, max_tokens=8, temperature=1.5, top_k=1, seed=3)
    assert greedy[0] == greedy[1] == top1[0]


def test_max_tokens_and_bad_arguments(engine):
    cols = list(engine.generate(PROMPT, num_samples=2, max_tokens=5, temperature=1.0))
    assert 1 <= len(cols) <= 5 and all(len(c) == 2 and len(m) == 2 for c, m in cols)
    with pytest.raises(ValueError, match="non-empty list of ints"):
        next(engine.generate([], max_tokens=3))
    with pytest.raises(ValueError, match="nothing to generate"):
        next(engine.generate(list(range(CFG.sequence_len)), max_tokens=None))
    with pytest.raises(ValueError, match="temperature"):
        sample_tokens(np.zeros((1, 4)), np.random.default_rng(0), temperature=-1.0)


class ScriptedModel:
    """A stand-in model whose next token is a function of the last input token (a table), so the
    engine's tool logic can be driven exactly; it records what it was fed."""

    def __init__(self, Tensor, table: dict[int, int], default: int, vocab_size: int = CFG.vocab_size):
        self.Tensor, self.table, self.default, self.vocab_size = Tensor, table, default, vocab_size
        self.config = CFG
        self.fed: list[list[int]] = []

    def new_kv_cache(self, Tensor, batch_size, max_len):
        return _NoCache()

    def __call__(self, idx, kv_cache=None):
        ids = idx.numpy()
        self.fed.append(ids[:, -1].tolist())
        logits = np.zeros((ids.shape[0], 1, self.vocab_size), dtype=np.float32)
        for row, last in enumerate(ids[:, -1].tolist()):
            logits[row, 0, self.table.get(last, self.default)] = 10.0  # a tuple: equally likely tokens
        return self.Tensor(logits)


class _NoCache:
    def replicate(self, batch_size):
        return self


def chain(*tokens: int) -> dict[int, int]:
    return dict(zip(tokens, tokens[1:], strict=False))


def bpe_tokenizer():
    from common.tokenizers.bpe import BPE

    return BPE.train("the sum 6*7 is 42; 6*7=42 and 12+30 is 42 " * 20, vocab_size=300)


@pytest.mark.parametrize("make_tok", [ByteTokenizer, bpe_tokenizer], ids=["bytes", "bpe"])
def test_calculator_tool_forces_output(stage2, make_tok):
    tok = make_tok()
    sid, b = tok.special_id, tok.encode_ordinary
    ps, pe, os_, oe, end = (sid(n) for n in ("<|python_start|>", "<|python_end|>", "<|output_start|>",
                                             "<|output_end|>", "<|assistant_end|>"))
    prompt = [tok.bos_id, sid("<|user_start|>"), *b("hi"), sid("<|user_end|>"), sid("<|assistant_start|>")]
    # the model writes <|python_start|>6*7<|python_end|>, then (fed the forced output) ends the reply
    table = chain(prompt[-1], ps, *b("6*7"), pe)
    table[oe] = end
    model = ScriptedModel(stage2.Tensor, table, default=b("?")[0], vocab_size=tok.vocab_size)
    engine = Engine(model, tok, stage2.Tensor)
    cols = list(engine.generate(prompt, max_tokens=20, temperature=0.0))
    tokens, masks = [c[0] for c, _ in cols], [m[0] for _, m in cols]
    n_expr, n_out = len(b("6*7")), len(b("42"))
    expected = [ps, *b("6*7"), pe, os_, *b("42"), oe, end]
    assert tokens == expected
    assert masks == [1] * (n_expr + 2) + [0] * (n_out + 2) + [1]
    assert [f[0] for f in model.fed[1:]] == expected[:-1]  # every token, forced ones too, is fed back
    out, out_masks = engine.generate_batch(prompt, max_tokens=20, temperature=0.0)
    assert out[0] == prompt + expected[:-1] and out_masks[0] == [0] * len(prompt) + masks[:-1]
    assert tok.decode(out[0][len(prompt):]) == "<|python_start|>6*7<|python_end|><|output_start|>42<|output_end|>"


def test_tool_refusal_forces_nothing_and_bos_stops(stage2):
    b = TOK.encode_ordinary
    ps, pe = S["<|python_start|>"], S["<|python_end|>"]
    table = chain(PROMPT[-1], ps, *b("__import__('os')"), pe, S["<|bos|>"])
    engine = Engine(ScriptedModel(stage2.Tensor, table, default=ord("?")), TOK, stage2.Tensor)
    cols = list(engine.generate(PROMPT, max_tokens=40, temperature=0.0))
    tokens, masks = [c[0] for c, _ in cols], [m[0] for _, m in cols]
    assert S["<|output_start|>"] not in tokens and set(masks) == {1}
    assert tokens[-1] == S["<|bos|>"] and len(tokens) < 40  # bos ends the row early


def test_rows_stop_independently(stage2):
    """Two rows from one prompt: the first token is a coin flip between <|assistant_end|> and "a"
    (then "b", then the end); a row that ended stays ended, the other goes on, and generation stops
    once both are done."""
    end, a, b = S["<|assistant_end|>"], ord("a"), ord("b")
    table = {PROMPT[-1]: (end, a), a: b, b: end}
    model = ScriptedModel(stage2.Tensor, table, default=ord("?"))
    engine = Engine(model, TOK, stage2.Tensor)
    for seed in range(20):
        cols = list(engine.generate(PROMPT, num_samples=2, max_tokens=10, temperature=1.0, seed=seed))
        if cols[0][0][0] != cols[0][0][1]:
            break
    first = cols[0][0]
    assert sorted(first) == sorted([end, a])
    going = first.index(a)
    assert [c[going] for c, _ in cols] == [a, b, end] and len(cols) == 3
    out, _ = engine.generate_batch(PROMPT, num_samples=2, max_tokens=10, temperature=1.0, seed=seed)
    assert out[1 - going] == PROMPT and out[going] == PROMPT + [a, b]


def test_calculator_arithmetic():
    assert evaluate("12*(3+4)") == "84"
    assert evaluate("1,000 * 3") == "3000"
    assert evaluate("7/2") == "3.5" and evaluate("7 // 2") == "3" and evaluate("7 % 4") == "3"
    assert evaluate("-(2**10) + +1") == "-1023"
    assert evaluate("2 ** -2") == "0.25"
    assert evaluate(' "strawberry".count("r") ') == "3"


@pytest.mark.parametrize("expr", [
    "__import__('os').system('echo hi')", "open('/etc/passwd').read()", "x + 1", "().__class__.__bases__",
    "[1, 2]", "lambda: 1", "1 if 1 else 2", "'ab' * 3", "'a'.upper()", "'a'.count('a', 0)", "'abc'",
    "True + 1", "1/0", "2 ** 100000", "9 ** 9 ** 9", "10.0 ** 400", "(-8) ** 0.5", "(" * 300 + "1" + ")" * 300,
    "1 +", "", "1; 2", "a = 1",
])
def test_calculator_refuses(expr):
    t0 = time.perf_counter()
    assert evaluate(expr) is None
    assert time.perf_counter() - t0 < 0.1  # refused before any large computation


def test_decode_speed_smoke(stage2):
    r = decode_speed(stage2, depth=1, tokens=8, prompt_len=4, vocab_size=64)
    assert r["same_tokens"] and r["cached_tok_s"] > 0 and r["uncached_tok_s"] > 0
