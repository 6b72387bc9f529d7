"""Chat conversations for nanochat's mid-training and SFT: two packaged corpora and two synthetic sets.

A conversation is a list of messages ``{"role": "user" | "assistant", "content": ...}`` alternating
and starting with the user (see common/chat/render.py for how they become tokens). Sources:

- ``load_chitchat``: chitchat-dataset 0.9.0 (BYU students chatting in pairs, 7,168 conversations).
  ``dataset.json`` maps a conversation id to ``{"messages": [[msg, ...], ...], "prompt", "ratings",
  "start"}``; each inner list is one turn, messages ``{"sender", "text", "timestamp"}``. The first
  sender becomes the user and the other the assistant; a speaker's consecutive messages are joined
  with newlines; empty messages are dropped, and so are the conversations where nobody answered
  (3,151: one sender with text) and a last user message left without a reply; 4,017 remain.
- ``load_chatterbot``: chatterbot-corpus 1.3.3's English YAML files; each ``conversations`` entry
  is a list of lines, alternately user and assistant (a malformed entry that is not a list is
  skipped; a trailing unanswered line is dropped). Its 2,025 conversations hold only 898 distinct
  ones (tech_support.yml repeats 10 pairs about 100 times each): ``chat_splits`` drops duplicates.
- ``calculator_conversations``: synthetic arithmetic questions in varied phrasings whose answer calls
  the calculator tool: text, a ``python`` part (the expression), a ``python_output`` part (what
  ``calculate`` returns for it) and a closing text that repeats the result.
- ``identity_conversations``: synthetic greetings and questions about the assistant itself (who it
  is, who made it), as nanochat mixes a small identity set into its chat phases.

``chat_splits(seed)`` splits each source once into train (90%) and val (10%) after removing exact
duplicates, so no val conversation is ever trained on, and builds the two phases from those pools:

- ``mid`` (as nanochat's mid-training: a large mix that teaches the format and the tool): every
  train conversation of all four sources (chitchat in full);
- ``sft`` (as nanochat's SFT: a smaller, cleaner mix): all of chatterbot (short curated question /
  answer pairs), the openings of 1,500 chitchat conversations (first two exchanges: greetings and
  small talk, short enough for one SFT row), 3,000 calculator conversations and the identity set.
"""

from __future__ import annotations

import ast
import json
import operator
import random
import zipfile
from typing import Any

from .fetch import FETCH_COMMAND, require_download

Conversation = list[dict[str, Any]]

CHITCHAT_JSON = "chitchat_dataset/dataset.json"
CHATTERBOT_PREFIX = "chatterbot_corpus/data/english/"
VAL_FRACTION = 0.1
CALCULATOR_COUNT = 12000  # mid-training gets 90% of these; at ~40 tokens each, ~18% of its tokens
SFT_CHITCHAT = 1500
SFT_CALCULATOR = 3000
OPENING_MESSAGES = 4  # an SFT chitchat conversation: its first two user/assistant exchanges


def _message(role: str, content: Any) -> dict[str, Any]:
    return {"role": role, "content": content}


# ---- chitchat-dataset ------------------------------------------------------------------------------

def chitchat_to_conversation(turns: list[list[dict[str, str]]]) -> Conversation | None:
    """One chitchat conversation -> alternating messages, or None when nobody answered."""
    speeches: list[tuple[str, list[str]]] = []  # (sender, texts) with consecutive same-sender merged
    for turn in turns:
        for msg in turn:
            text = msg["text"].strip()
            if not text:
                continue
            if speeches and speeches[-1][0] == msg["sender"]:
                speeches[-1][1].append(text)
            else:
                speeches.append((msg["sender"], [text]))
    senders = {sender for sender, _ in speeches}
    if len(senders) != 2:  # 1: a monologue with no reply (3,150 of them); never more than 2 in 0.9.0
        return None
    if len(speeches) % 2:  # a last user message nobody answered
        speeches.pop()
    roles = ("user", "assistant")
    return [_message(roles[i % 2], "\n".join(texts)) for i, (_, texts) in enumerate(speeches)]


def load_chitchat() -> list[Conversation]:
    """chitchat-dataset's two-person conversations (4,017 of the 7,168), in file order."""
    wheel = require_download("chitchat")
    try:
        with zipfile.ZipFile(wheel) as z:
            data = json.loads(z.read(CHITCHAT_JSON).decode("utf-8"))
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RuntimeError(f"load_chitchat: cannot read {CHITCHAT_JSON} from {wheel} ({e}); delete the file and "
                           f"run `{FETCH_COMMAND}`") from e
    conversations = [chitchat_to_conversation(entry["messages"]) for entry in data.values()]
    return [c for c in conversations if c]


# ---- chatterbot-corpus -----------------------------------------------------------------------------

def chatterbot_to_conversation(lines: Any) -> Conversation | None:
    """One YAML entry (a list of alternating lines) -> messages, or None if it is not usable."""
    if not isinstance(lines, list):
        return None
    texts = [str(line).strip() for line in lines]  # YAML reads an unquoted 1984 as an int
    if any(not t for t in texts) or any(isinstance(line, (list, dict)) for line in lines):
        return None
    texts = texts[: len(texts) - len(texts) % 2]
    if not texts:
        return None
    return [_message("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]


def load_chatterbot() -> list[Conversation]:
    """chatterbot-corpus's English conversations, file by file in name order."""
    import yaml  # PyYAML comes with the data extras; imported here so that importing this module needs none

    wheel = require_download("chatterbot")
    conversations = []
    try:
        with zipfile.ZipFile(wheel) as z:
            names = sorted(n for n in z.namelist() if n.startswith(CHATTERBOT_PREFIX) and n.endswith(".yml"))
            for name in names:
                entries = yaml.safe_load(z.read(name).decode("utf-8")).get("conversations") or []
                conversations += [c for c in map(chatterbot_to_conversation, entries) if c]
    except (zipfile.BadZipFile, UnicodeDecodeError, yaml.YAMLError) as e:
        raise RuntimeError(f"load_chatterbot: cannot read the YAML files in {wheel} ({e}); delete the file and "
                           f"run `{FETCH_COMMAND}`") from e
    if len(names) < 10:
        raise RuntimeError(f"load_chatterbot: expected ~21 English YAML files in {wheel}, found {len(names)}")
    return conversations


# ---- the calculator --------------------------------------------------------------------------------

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _evaluate(node: ast.AST, expr: str) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand, expr)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left, expr), _evaluate(node.right, expr)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError(f"calculate: division by zero in {expr!r}")
        return _OPS[type(node.op)](left, right)
    raise ValueError(f"calculate: {expr!r} is not arithmetic on numbers with + - * / and parentheses")


def calculate(expr: str) -> str:
    """What the calculator tool (common/chat/calculator.py) answers for these expressions: Python's
    own arithmetic and ``str`` of the result, so integers stay integers ("3367") and a division is
    a float ("144/12" -> "12.0", "7/3" -> "2.3333333333333335"). ValueError outside + - * / ( )."""
    if not isinstance(expr, str) or len(expr) > 200:
        raise ValueError(f"calculate: expected an expression of at most 200 characters, got {expr!r:.80}")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"calculate: {expr!r} is not an expression ({e.msg})") from e
    return str(_evaluate(tree.body, expr))


_WORDS = {"+": "plus", "-": "minus", "*": "times", "/": "divided by"}
_SYMBOL_QUESTIONS = ["what is {e}?", "what is {e}?", "What is {e}?", "What's {e}", "what's {e}?", "compute {e}",
                     "Compute {e}.", "calculate {e}", "Can you calculate {e}?", "Please work out {e}.",
                     "How much is {e}?", "{e} = ?", "{e}?", "Solve {e}", "Quick question: what is {e}?"]
_WORD_QUESTIONS = ["What is {a} {w} {b}?", "what is {a} {w} {b}", "How much is {a} {w} {b}?", "Tell me {a} {w} {b}."]
_INTROS = ["Let me calculate that.", "I'll use the calculator.", "Let me work that out.", "Let me compute it."]


def _operand(rng: random.Random) -> int:
    return rng.randint(1, rng.choice((9, 99, 999, 9999)))


# The report card asks "what is 37*91?" (common/chat/report.py): no training expression holds both numbers,
# so a right answer there is copied from the question, not remembered.
HELD_OUT_OPERANDS = frozenset({37, 91})


def _expression(rng: random.Random) -> tuple[str, list[str]]:
    """A random expression in Python syntax, and its tokens (numbers, operators, parentheses)."""
    op = rng.choice("+-*/*")  # products twice as often: the hardest to do in the head
    a, b = _operand(rng), _operand(rng)
    if op == "/" and rng.random() < 0.7:  # mostly exact divisions, whose result is a whole number
        a = b * rng.randint(1, 99)
    tokens = [str(a), op, str(b)]
    if rng.random() < 0.2:  # a few with three operands, half of them with the first two in parentheses
        tokens += [rng.choice("+-*"), str(_operand(rng))]
        if rng.random() < 0.5:
            tokens = ["(", *tokens[:3], ")", *tokens[3:]]
    return "".join(tokens), tokens


def _calculator_conversation(rng: random.Random) -> Conversation:
    code, tokens = _expression(rng)
    while HELD_OUT_OPERANDS <= {int(t) for t in tokens if t.isdigit()}:
        code, tokens = _expression(rng)
    result = calculate(code)
    if len(tokens) == 3 and rng.random() < 0.25:
        question = rng.choice(_WORD_QUESTIONS).format(a=tokens[0], w=_WORDS[tokens[1]], b=tokens[2])
    else:
        spaced = " ".join(tokens).replace("( ", "(").replace(" )", ")")
        shown = rng.choice((code, code, spaced))
        question = rng.choice(_SYMBOL_QUESTIONS).format(e=shown)
    closing = rng.choice((f"{code} = {result}.", f"The answer is {result}."))
    parts = [{"type": "text", "text": rng.choice(_INTROS)}, {"type": "python", "text": code},
             {"type": "python_output", "text": result}, {"type": "text", "text": closing}]
    return [_message("user", question), _message("assistant", parts)]


def calculator_conversations(n: int, seed: int) -> list[Conversation]:
    """``n`` synthetic arithmetic conversations (the same ones for the same seed) that use the tool."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"calculator_conversations: n must be a non-negative int, got {n!r}")
    rng = random.Random(seed)
    return [_calculator_conversation(rng) for _ in range(n)]


# ---- identity (synthetic) --------------------------------------------------------------------------

NAME = "nanochat"
_IDENTITY = [
    (["hi", "Hi!", "hello", "Hello", "hey", "Hey there!", "Good morning!", "hi there"],
     ["Hello! How can I help you today?", "Hi! What can I do for you?", "Hey! How can I help?"]),
    (["Hello! How are you?", "how are you?", "How are you doing today?", "hi, how's it going?"],
     ["I'm doing well, thank you! How can I help you today?", "Great, thanks for asking! What can I do for you?"]),
    (["Who are you?", "what are you?", "What is your name?", "what's your name?", "Introduce yourself."],
     [f"I'm {NAME}, a small language model trained from scratch on a CPU.",
      f"My name is {NAME}. I'm a small chat model, trained from scratch on a laptop-sized computer."]),
    (["Who made you?", "who created you?", "Who trained you?"],
     [f"I'm {NAME}, built in the Structure and Interpretation of Tensor Programs project, after Andrej Karpathy's "
      "nanochat.", "I was trained by the Structure and Interpretation of Tensor Programs project, which rebuilds "
      "Karpathy's nanochat on its own tensor library."]),
    (["What can you do?", "how can you help me?", "What are you good at?"],
     ["I can chat with you, and I can do arithmetic with my calculator tool. Try asking me what 12*34 is!",
      "I can make small talk and work out arithmetic with a calculator. I'm small, so I make mistakes!"]),
    (["Are you ChatGPT?", "Are you a human?", "are you a robot?"],
     [f"No, I'm {NAME}, a small language model. I'm much smaller than ChatGPT!",
      f"I'm {NAME}, a tiny language model, not a person."]),
    (["thanks", "Thank you!", "thank you so much", "Thanks for your help."],
     ["You're welcome!", "Happy to help!", "Anytime!"]),
    (["bye", "Goodbye!", "see you later", "Good night!"],
     ["Goodbye! Have a great day.", "Bye! It was nice talking to you."]),
]


def identity_conversations() -> list[Conversation]:
    """Every question of the synthetic identity set paired with each of its answers (a fixed list),
    plus two-exchange conversations: a greeting, then a question about the assistant."""
    single = [[_message("user", q), _message("assistant", a)] for qs, answers in _IDENTITY for q in qs for a in answers]
    greetings, (who, who_answers) = _IDENTITY[0], _IDENTITY[2]
    double = [[_message("user", g), _message("assistant", greetings[1][i % len(greetings[1])]),
               _message("user", q), _message("assistant", who_answers[(i + j) % len(who_answers)])]
              for i, g in enumerate(greetings[0]) for j, q in enumerate(who)]
    return single + double


# ---- the phases' mixes -----------------------------------------------------------------------------

def _key(conversation: Conversation) -> str:
    return json.dumps(conversation, sort_keys=True)


def split_source(conversations: list[Conversation], seed: int, salt: int) -> tuple[list, list]:
    """Exact duplicates removed (first kept), then a seeded shuffle cut 90/10 into (train, val)."""
    unique = list({_key(c): c for c in reversed(conversations)}.values())[::-1]
    random.Random(f"{seed}-{salt}").shuffle(unique)
    n_val = max(1, round(len(unique) * VAL_FRACTION))
    return unique[n_val:], unique[:n_val]


def chat_splits(seed: int = 0) -> dict[str, list[Conversation]]:
    """``mid_train``, ``mid_val``, ``sft_train``, ``sft_val``: the two phases' mixes (see the module
    docstring), each shuffled; the same lists for the same seed, val always disjoint from train."""
    sources = {"chitchat": load_chitchat(), "chatterbot": load_chatterbot(),
               "calculator": calculator_conversations(CALCULATOR_COUNT, seed), "identity": identity_conversations()}
    pools = {name: split_source(convs, seed, i) for i, (name, convs) in enumerate(sources.items())}
    rng = random.Random(f"{seed}-mix")
    splits = {}
    for index, part in enumerate(("train", "val")):
        chitchat, chatterbot, calculator, identity = (pools[name][index] for name in sources)
        mid = chitchat + chatterbot + calculator + identity
        share = 1.0 if part == "train" else VAL_FRACTION / (1 - VAL_FRACTION)  # val keeps the train's proportions
        openings = [c[:OPENING_MESSAGES] for c in chitchat[: round(SFT_CHITCHAT * share)]]
        sft = chatterbot + openings + calculator[: round(SFT_CALCULATOR * share)] + identity
        rng.shuffle(mid)
        rng.shuffle(sft)
        splits[f"mid_{part}"], splits[f"sft_{part}"] = mid, sft
    return splits
