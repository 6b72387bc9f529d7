"""sitp serve's OpenAI-compatible API (common/chat/api.py), through the official `openai` client against a
running uvicorn on loopback: /v1/models; a completion at temperature 0 is the reply `sitp chat -p` prints,
streamed or not, with OpenAI's usage and finish reasons; stop strings, also across pieces; 20 malformed
requests each get a 4xx with OpenAI's error object and the server keeps serving; 64 concurrent requests
each get a 200 or a 429 with Retry-After, none a reset or a hang; the chat page and its stream."""

from __future__ import annotations

import builtins
import http.client
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

api = pytest.importorskip("common.chat.api", reason="sitp serve needs the `serve` extra (fastapi, uvicorn)")
openai = pytest.importorskip("openai", reason="the official client is in the `test` extra")

from common.chat.backend import ChatBackend  # noqa: E402
from common.chat.render import render_for_completion  # noqa: E402
from common.cli import main  # noqa: E402

WAIT = 20.0  # seconds any request may take before the test fails instead of hanging


class Running:
    """A uvicorn server for an app on a free loopback port, in a thread."""

    def __init__(self, app):
        self.server = api.make_server(app, "127.0.0.1", 0)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + WAIT
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def client(self):
        return openai.OpenAI(base_url=self.url + "/v1", api_key="unused", timeout=WAIT, max_retries=0)

    def post(self, path: str, body: bytes, headers: dict | None = None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        try:
            conn.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def stop(self):
        self.server.should_exit = True
        self.thread.join(WAIT)


@pytest.fixture
def serve():
    running = []

    def start(backend, **kwargs) -> Running:
        r = Running(api.create_app(backend, **kwargs))
        running.append(r)
        return r

    yield start
    for r in running:
        r.stop()


class Pieces:
    """A backend that yields fixed pieces (after `delay` seconds each) and fills the stats."""

    def __init__(self, pieces: list[str], delay: float = 0.0, ends: bool = True):
        self.pieces, self.delay, self.ends = pieces, delay, ends
        self.calls = 0

    def stream_reply(self, messages, temperature, top_k, max_tokens, seed=None, stats=None, top_p=None):
        self.calls += 1
        self.top_p = top_p
        stats.prompt_tokens = 3
        for piece in self.pieces[:max_tokens]:
            time.sleep(self.delay)
            stats.completion_tokens += 1
            yield piece
        stats.ended = self.ends and len(self.pieces) <= max_tokens


def test_models_and_the_reply_sitp_chat_gives(serve, chat_checkpoint, capsys):
    backend = ChatBackend.load(chat_checkpoint, 2)
    server = serve(backend, model="tiny-chat")
    client = server.client()
    assert [m.id for m in client.models.list().data] == ["tiny-chat"]
    assert main(["chat", "--ckpt", chat_checkpoint, "--stage", "2", "-p", "hello there", "--temperature", "0",
                 "--max-tokens", "12", "--seed", "0"]) == 0
    printed = capsys.readouterr().out[:-1]  # (without the newline the one-shot prints at the end)
    messages = [{"role": "user", "content": "hello there"}]
    reply = client.chat.completions.create(model="tiny-chat", messages=messages, temperature=0, max_tokens=12, seed=0)
    choice = reply.choices[0]
    assert reply.object == "chat.completion" and choice.message.role == "assistant"
    assert choice.message.content == printed
    prompt = render_for_completion(backend.tokenizer, [*messages, {"role": "assistant", "content": ""}])
    assert reply.usage.prompt_tokens == len(prompt)
    assert 1 <= reply.usage.completion_tokens <= 12
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert choice.finish_reason == ("length" if reply.usage.completion_tokens == 12 else "stop")
    stream = client.chat.completions.create(model="tiny-chat", messages=messages, temperature=0, max_tokens=12,
                                            seed=0, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == printed
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == choice.finish_reason
    assert chunks[-1].usage.completion_tokens == reply.usage.completion_tokens


def test_a_system_message_and_text_parts(serve):
    backend = Pieces(["ok"])
    client = serve(backend).client()
    reply = client.chat.completions.create(model="nanochat", messages=[
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": " you"}]}])
    assert reply.choices[0].message.content == "ok" and reply.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings_also_across_pieces(serve, stream):
    client = serve(Pieces(["The ans", "wer is 4", "2. Then", " more"])).client()
    kwargs = {"model": "nanochat", "messages": [{"role": "user", "content": "q"}], "stop": ["is 42", "zzz"]}
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kwargs))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = chunks[-1].choices[0].finish_reason
    else:
        reply = client.chat.completions.create(**kwargs)
        text, finish = reply.choices[0].message.content, reply.choices[0].finish_reason
    assert (text, finish) == ("The answer ", "stop")


def test_max_tokens_gives_length(serve):
    client = serve(Pieces(["a", "b", "c", "d"])).client()
    reply = client.chat.completions.create(model="nanochat", messages=[{"role": "user", "content": "q"}],
                                           max_tokens=2)
    assert reply.choices[0].message.content == "ab" and reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 2


def test_top_p_reaches_the_sampler(serve):
    backend = Pieces(["a"])
    client = serve(backend).client()
    client.chat.completions.create(model="nanochat", messages=[{"role": "user", "content": "q"}], top_p=0.25)
    assert backend.top_p == 0.25
    client.chat.completions.create(model="nanochat", messages=[{"role": "user", "content": "q"}])
    assert backend.top_p == 1.0


MALFORMED = [
    (b"{not json", 400), (b"[]", 400), (b'{"messages": []}', 400), (b'{"messages": "hi"}', 400),
    (b'{"messages": [{"role": "user"}]}', 400), (b'{"messages": [{"role": "tool", "content": "x"}]}', 400),
    (b'{"messages": [{"role": "assistant", "content": "x"}]}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]}', 400),
    (b'{"messages": [{"role": "user", "content": 5}]}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": 9}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "n": 3}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "top_p": 1.5}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "seed": 1.5}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "logit_bias": {}}', 400),
    (b'{"messages": [{"role": "user", "content": "x"}], "model": "gpt-9"}', 404),
    (b'{"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}}', 400),
    (json.dumps({"messages": [{"role": "user", "content": "x" * 9000}]}).encode(), 413),
]


def test_twenty_malformed_requests_get_openai_errors_and_the_server_keeps_serving(serve):
    backend = Pieces(["fine"])
    server = serve(backend)
    assert len(MALFORMED) == 20
    for body, status in MALFORMED:
        got, _, raw = server.post("/v1/chat/completions", body)
        error = json.loads(raw)["error"]
        assert got == status, (body[:60], got, error)
        assert isinstance(error["message"], str) and error["message"] and error["type"]
    got, _, raw = server.post("/v1/chat/completions", b'{"messages": []}', {"Content-Type": "text/plain"})
    assert got == 415
    assert backend.calls == 0  # none of them reached the model
    with pytest.raises(openai.NotFoundError):
        server.client().chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    reply = server.client().chat.completions.create(model="nanochat", messages=[{"role": "user", "content": "x"}])
    assert reply.choices[0].message.content == "fine"


def test_a_burst_of_64_requests_each_gets_an_answer(serve):
    server = serve(Pieces(["a", "b", "c"], delay=0.02), max_waiting=4)
    body = json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3}).encode()

    def one(stream: bool) -> tuple[int, dict, bytes]:
        payload = body if not stream else json.dumps({**json.loads(body), "stream": True}).encode()
        return server.post("/v1/chat/completions", payload)

    with ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(one, [i % 2 == 0 for i in range(64)]))
    statuses = [status for status, _, _ in answers]
    assert set(statuses) <= {200, 429} and statuses.count(200) >= 5, statuses
    for status, headers, raw in answers:
        if status == 429:
            assert headers.get("retry-after") == "1" and json.loads(raw)["error"]["type"] == "rate_limit_error"
        elif raw.startswith(b"data:"):
            assert raw.rstrip().endswith(b"data: [DONE]")
        else:
            assert json.loads(raw)["choices"][0]["message"]["content"] == "abc"


def test_the_page_and_its_stream(serve):
    server = serve(Pieces(["hel", "lo"]))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT)
    conn.request("GET", "/")
    page = conn.getresponse()
    assert page.status == 200 and b"<html" in page.read().lower()
    conn.close()
    body = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()
    status, _, raw = server.post("/chat/completions", body)
    events = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert status == 200 and events == [{"token": "hel"}, {"token": "lo"}, {"done": True}]
    assert server.post("/nowhere", b"{}")[0] == 404


def test_sitp_serve_without_the_extra_names_it(monkeypatch, capsys, tmp_path: Path):
    real = builtins.__import__

    def no_fastapi(name, *args, **kwargs):
        if name == "fastapi" or (args and args[2] and "api" in args[2] and name == ""):
            raise ModuleNotFoundError("No module named 'fastapi'", name="fastapi")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fastapi)
    monkeypatch.delitem(sys.modules, "common.chat.api")
    assert main(["serve", "--ckpt", str(tmp_path / "none.safetensors")]) == 1
    assert "fastapi is not installed" in capsys.readouterr().err
