"""Chat data and its rendering: the chitchat and chatterbot loaders give well-formed alternating
conversations, the synthetic calculator conversations hold the exact answers, the mid/SFT splits are
deterministic and train/val disjoint, and render_conversation puts nanochat's special tokens where
they belong with the loss mask exactly on what the assistant writes (a byte-level fake tokenizer;
a small trained BPE too). Errors name the function and the fault."""

from __future__ import annotations

import importlib.util
import json
import re
from fractions import Fraction

import numpy as np
import pytest

from common.chat.render import (
    pack_rows,
    pack_stream,
    render_conversation,
    render_for_completion,
    to_training_rows,
)
from common.data.conversations import (
    HELD_OUT_OPERANDS,
    calculate,
    calculator_conversations,
    chat_splits,
    chatterbot_to_conversation,
    chitchat_to_conversation,
    identity_conversations,
    load_chatterbot,
    load_chitchat,
)
from common.data.fetch import DOWNLOADS, FETCH_COMMAND
from common.data.files import download_path

NAMES = ["<|bos|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>",
         "<|python_start|>", "<|python_end|>", "<|output_start|>", "<|output_end|>"]
BOS, US, UE, AS, AE, PS, PE, OS, OE = range(256, 265)


class ByteTokenizer:
    """Bytes are ids 0..255, the nine specials 256..264."""

    bos_id = BOS

    def encode_ordinary(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def special_id(self, name: str) -> int:
        return 256 + NAMES.index(name)


TOK = ByteTokenizer()


def b(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def _fetched(key: str) -> None:
    if not download_path(DOWNLOADS[key].filename).is_file():
        pytest.skip(f"{DOWNLOADS[key].filename} not in the cache: run `{FETCH_COMMAND}` first")


def check_conversation(conv: list) -> None:
    """Alternating user/assistant, starting with the user and ending with the assistant, no empty text."""
    roles = [m["role"] for m in conv]
    expected = ["user", "assistant"] * (len(conv) // 2)
    contents = [m["content"] for m in conv]
    parts = [p["text"] for c in contents if isinstance(c, list) for p in c]
    texts = [c for c in contents if isinstance(c, str)] + parts
    assert len(conv) >= 2 and roles == expected, roles
    assert all(t.strip() for t in texts), conv


# ---- loaders ----------------------------------------------------------------------------------------

def test_chitchat_conversion_merges_speakers_and_drops_monologues():
    turns = [[{"sender": "x", "text": "hi"}, {"sender": "x", "text": "you there?"}],
             [{"sender": "y", "text": "  "}], [{"sender": "x", "text": "hello?"}],
             [{"sender": "y", "text": "yes"}], [{"sender": "x", "text": "cool"}]]
    conv = chitchat_to_conversation(turns)
    assert conv == [{"role": "user", "content": "hi\nyou there?\nhello?"}, {"role": "assistant", "content": "yes"}]
    assert chitchat_to_conversation([[{"sender": "x", "text": "anyone?"}]]) is None


def test_load_chitchat():
    _fetched("chitchat")
    convs = load_chitchat()
    print(f"chitchat: {len(convs)} conversations, {sum(map(len, convs))} messages")
    assert 4000 <= len(convs) <= 4018  # 4,018 of 7,168 have two speakers; one of them has one non-empty side
    for conv in convs:
        check_conversation(conv)


def test_chatterbot_conversion():
    assert chatterbot_to_conversation(["Q", 1984, "unanswered"]) == [{"role": "user", "content": "Q"},
                                                                       {"role": "assistant", "content": "1984"}]
    assert chatterbot_to_conversation("In a game of bingo ... - '22'") is None  # the one malformed entry
    assert chatterbot_to_conversation(["alone"]) is None


def test_load_chatterbot():
    _fetched("chatterbot")
    convs = load_chatterbot()
    print(f"chatterbot: {len(convs)} conversations")
    assert len(convs) > 2000
    for conv in convs:
        check_conversation(conv)
    assert [{"role": "user", "content": "What is AI?"}] == [convs[0][0]]  # ai.yml comes first


# ---- calculator and identity --------------------------------------------------------------------

def exact(code: str) -> Fraction:
    """The exact value, independently of calculate(): every number made a Fraction, then Python's eval."""
    return eval(re.sub(r"\d+", lambda m: f"Fraction({m.group()})", code), {"Fraction": Fraction})


def test_calculate_formats_as_python():
    cases = {"37*91": "3367", "144/12": "12.0", "7/3": str(7 / 3), "(2+3)*4": "20", "-7*3": "-21", "5-8": "-3",
             "0.1+0.2": str(0.1 + 0.2)}
    got = {expr: calculate(expr) for expr in cases}
    assert got == cases
    for bad in ["__import__('os')", "1/0", "2**10", "", "x+1", "1+"]:
        with pytest.raises(ValueError, match="calculate: "):
            calculate(bad)


def test_the_report_cards_question_is_held_out():
    """The report card's "what is 37*91?" must be answered by copying, not remembered: no training
    expression holds both of its numbers, and no other conversation names the expression."""
    for conv in calculator_conversations(20000, seed=0):
        code = conv[1]["content"][1]["text"]
        assert not HELD_OUT_OPERANDS <= {int(n) for n in re.findall(r"\d+", code)}, code
    for conv in identity_conversations():
        assert "37*91" not in json.dumps(conv)


def test_calculator_conversations_hold_exact_answers():
    convs = calculator_conversations(600, seed=3)
    assert convs == calculator_conversations(600, seed=3)
    assert convs != calculator_conversations(600, seed=4)
    tool = None
    if importlib.util.find_spec("common.chat.calculator") is not None:
        from common.chat.calculator import evaluate as tool
    asked = []
    for conv in convs:
        check_conversation(conv)
        question, parts = conv[0]["content"], conv[1]["content"]
        assert [p["type"] for p in parts] == ["text", "python", "python_output", "text"]
        code, out = parts[1]["text"], parts[2]["text"]
        assert re.fullmatch(r"[0-9+\-*/()]+", code), code
        python_says = str(eval(code, {"__builtins__": {}}))  # the code is digits and operators only
        value = exact(code)
        assert out == python_says, (code, out)
        assert Fraction(out) == value if "/" not in code else abs(float(out) - value) <= 1e-12 * abs(value)
        assert tool is None or tool(code) == out
        assert out in parts[3]["text"]
        asked.append(question)
    assert any(re.fullmatch(r"what is \d+\*\d+\?", q) for q in asked)  # the report's own phrasing
    assert any("divided by" in q for q in asked) and any("/" in q for q in asked)


def test_identity_conversations():
    convs = identity_conversations()
    for conv in convs:
        check_conversation(conv)
    assert any(c[0]["content"] == "Hello! How are you?" for c in convs)
    assert len({json.dumps(c) for c in convs}) == len(convs)


# ---- splits ------------------------------------------------------------------------------------------

def test_chat_splits_are_deterministic_and_disjoint():
    _fetched("chitchat")
    _fetched("chatterbot")
    splits = chat_splits(seed=0)
    print({name: len(convs) for name, convs in splits.items()})
    assert set(splits) == {"mid_train", "mid_val", "sft_train", "sft_val"}
    keys = {name: {json.dumps(c, sort_keys=True) for c in convs} for name, convs in splits.items()}
    for name in splits:
        assert len(splits[name]) > 100
    assert not keys["mid_train"] & keys["mid_val"]
    assert not keys["sft_train"] & keys["sft_val"]
    assert not keys["mid_train"] & keys["sft_val"] and not keys["sft_train"] & keys["mid_val"]
    assert len(splits["sft_train"]) < len(splits["mid_train"])
    for conv in splits["sft_train"] + splits["sft_val"]:
        check_conversation(conv)
        ids, mask = render_conversation(TOK, conv)
        assert sum(mask) > 0
    again = chat_splits(seed=0)
    assert all(json.dumps(again[n]) == json.dumps(splits[n]) for n in splits)
    other = chat_splits(seed=1)
    assert json.dumps(other["sft_train"]) != json.dumps(splits["sft_train"])


# ---- rendering ---------------------------------------------------------------------------------------

def test_render_masks_exactly_the_assistant():
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "2*3?"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "python", "text": "2*3"},
                                              {"type": "python_output", "text": "6"}, {"type": "text", "text": "6"}]}]
    ids, mask = render_conversation(TOK, conv)
    expected = [(BOS, 0), (US, 0), *[(i, 0) for i in b("hi")], (UE, 0), (AS, 0), *[(i, 1) for i in b("yo")], (AE, 1),
                (US, 0), *[(i, 0) for i in b("2*3?")], (UE, 0), (AS, 0), *[(i, 1) for i in b("ok")],
                (PS, 1), *[(i, 1) for i in b("2*3")], (PE, 1), (OS, 0), (ord("6"), 0), (OE, 0), (ord("6"), 1), (AE, 1)]
    assert list(zip(ids, mask, strict=True)) == expected
    assert render_conversation(TOK, conv, max_tokens=9) == (ids[:9], mask[:9])


def test_render_merges_a_system_message():
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo"}]
    merged = [{"role": "user", "content": "Be brief.\n\nhi"}, {"role": "assistant", "content": "yo"}]
    assert render_conversation(TOK, conv) == render_conversation(TOK, merged)


@pytest.mark.parametrize("conv, message", [
    ([], "non-empty list"),
    ([{"role": "assistant", "content": "yo"}], "message 0 has role 'assistant', expected 'user'"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "message 1 has role 'user'"),
    ([{"role": "user", "content": ["a"]}], "a user's content must be a str"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"type": "sql", "text": "x"}]}],
     "an assistant part must be"),
    ([{"role": "system", "content": "s"}, {"role": "assistant", "content": "x"}], "followed by a user message"),
    ([{"content": "no role"}], "must be a dict with 'role' and 'content'"),
])
def test_render_errors_are_clear(conv, message):
    with pytest.raises(ValueError, match=re.escape("render_conversation: ") + ".*" + re.escape(message)):
        render_conversation(TOK, conv)


def test_render_for_completion_primes_the_assistant():
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "what is 37*91?"}, {"role": "assistant", "content": "ignored"}]
    prompt = render_for_completion(TOK, conv)
    assert prompt == render_conversation(TOK, conv[:3])[0] + [AS]
    assert render_for_completion(TOK, [*conv[:3], {"role": "assistant", "content": ""}]) == prompt
    with pytest.raises(ValueError, match="render_for_completion: .*must end with the assistant"):
        render_for_completion(TOK, conv[:3])


def test_training_rows_shift_and_mask():
    ids, mask = [5, 6, 7, 8, 9], [0, 0, 1, 0, 1]
    x, y = to_training_rows(ids, mask)
    assert x.tolist() == [5, 6, 7, 8] and y.tolist() == [-1, 7, -1, 9]
    with pytest.raises(ValueError, match="to_training_rows"):
        to_training_rows([1], [1])


def test_pack_rows_pads_each_conversation():
    convs = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
             [{"role": "user", "content": "a long question"}, {"role": "assistant", "content": "a long answer"}]]
    rendered = [render_conversation(TOK, c) for c in convs]
    T = 12
    x, y = pack_rows(rendered, T, pad_id=AE)
    assert x.shape == y.shape == (2, T) and x.dtype == y.dtype == np.int64
    n = len(rendered[0][0]) - 1  # the short one: 9 tokens -> 8 positions, then padding
    x0, y0 = to_training_rows(*rendered[0])
    assert x[0, :n].tolist() == x0.tolist() and y[0, :n].tolist() == y0.tolist()
    assert (x[0, n:] == AE).all() and (y[0, n:] == -1).all()
    x1, y1 = to_training_rows(rendered[1][0][:T + 1], rendered[1][1][:T + 1])  # the long one is cut
    assert x[1].tolist() == x1.tolist() and y[1].tolist() == y1.tolist()


def test_pack_stream_cuts_one_stream():
    convs = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"answer {i}"}] for i in range(5)]
    rendered = [render_conversation(TOK, c) for c in convs]
    stream = [i for ids, _ in rendered for i in ids]
    mask = [m for _, ms in rendered for m in ms]
    T = 7
    x, y = pack_stream(rendered, T)
    assert x.shape == ((len(stream) - 1) // T, T)
    assert x.reshape(-1).tolist() == stream[:x.size] and y.reshape(-1).tolist() == stream[1:x.size + 1]
    _, ym = pack_stream(rendered, T, masked=True)
    masked = [t if k else -1 for t, k in zip(stream[1:x.size + 1], mask[1:x.size + 1], strict=True)]
    assert ym.reshape(-1).tolist() == masked


def test_render_with_a_trained_bpe():
    if importlib.util.find_spec("common.tokenizers.bpe") is None:
        pytest.skip("common/tokenizers/bpe.py is not there yet")
    from common.tokenizers.bpe import BPE

    tok = BPE.train("hello there, how are you? what is 37*91? " * 20, vocab_size=300)
    conv = [{"role": "user", "content": "what is 37*91?"},
            {"role": "assistant", "content": [{"type": "python", "text": "37*91"},
                                              {"type": "python_output", "text": "3367"},
                                              {"type": "text", "text": "ok"}]}]
    ids, mask = render_conversation(tok, conv)
    user = tok.encode_ordinary("what is 37*91?")
    code, out, text = tok.encode_ordinary("37*91"), tok.encode_ordinary("3367"), tok.encode_ordinary("ok")
    s = tok.special_id
    assert ids == [tok.bos_id, s("<|user_start|>"), *user, s("<|user_end|>"), s("<|assistant_start|>"),
                   s("<|python_start|>"), *code, s("<|python_end|>"), s("<|output_start|>"), *out,
                   s("<|output_end|>"), *text, s("<|assistant_end|>")]
    assert mask == [0] * (len(user) + 4) + [1] * (len(code) + 2) + [0] * (len(out) + 2) + [1] * (len(text) + 1)
    learned = [i for i, m in zip(ids, mask, strict=True) if m and i < tok.special_id("<|bos|>")]
    assert tok.decode(learned) == "37*91ok"
