"""The web UI's server without a browser (common/chat/web.py): replies stream as SSE one piece at a time and
end with the done marker; sampling settings are clamped (seen from the backend); every bad request gets
its 4xx and a message naming the fault, and never reaches the backend; /health, the page, unknown paths
and wrong methods; backend failures; a client that leaves stops the generation; one reply at a time."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from common.chat import web

WAIT = 5.0  # seconds any step may take before the test fails instead of hanging


class FakeBackend:
    """Yields ``pieces``; records each call's arguments. With ``gated``, piece i waits for ``gates[i]``."""

    def __init__(self, pieces: list[str], gated: bool = False, delay: float = 0.0):
        self.pieces, self.delay = pieces, delay
        self.gates = [threading.Event() for _ in pieces]
        if not gated:
            for gate in self.gates:
                gate.set()
        self.calls: list[dict] = []
        self.yielded = 0
        self.closed = threading.Event()

    def stream_reply(self, messages: list[dict], temperature: float, top_k: int, max_tokens: int,
                     seed: int | None = None) -> Iterator[str]:
        self.calls.append({"messages": messages, "temperature": temperature, "top_k": top_k,
                           "max_tokens": max_tokens, "seed": seed})
        try:
            for gate, piece in zip(self.gates, self.pieces, strict=True):
                if not gate.wait(WAIT):
                    raise TimeoutError("FakeBackend: the test never released the next piece")
                time.sleep(self.delay)
                self.yielded += 1
                yield piece
        finally:
            self.closed.set()


@pytest.fixture
def serve_backend():
    """Start a server on a free port for a backend; shut down after the test."""
    servers = []

    def start(backend, defaults: web.Defaults | None = None) -> web.ChatServer:
        server = web.make_server(backend, "127.0.0.1", 0, defaults)
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()  # quick shutdown
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def connect(server: web.ChatServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(*server.server_address[:2], timeout=WAIT)


def post(server: web.ChatServer, body: object, headers: dict | None = None) -> http.client.HTTPResponse:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = connect(server)
    conn.request("POST", "/chat/completions", data, {"Content-Type": "application/json", **(headers or {})})
    return conn.getresponse()


def read_event(response: http.client.HTTPResponse) -> dict:
    """The next SSE event's data, read line by line (so nothing past it is waited for)."""
    line = response.readline()
    if not line.startswith(b"data: "):
        raise AssertionError(f"expected an SSE data line, got {line!r}")
    blank = response.readline()
    if blank != b"\n":
        raise AssertionError(f"expected the blank line ending the event, got {blank!r}")
    return json.loads(line[6:])


def chat(*contents: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]


PIECES = ["Hel", "lo", ", wörld", " ✓", " 🙂"]


def test_stream_arrives_piece_by_piece(serve_backend):
    # piece i+1 is generated only after the client has read piece i: a server that buffered the
    # reply would never deliver piece 0 and the read would time out
    backend = FakeBackend(PIECES, gated=True)
    server = serve_backend(backend)
    backend.gates[0].set()
    response = post(server, {"messages": chat("hi")})
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream; charset=utf-8"
    received = []
    for i in range(len(PIECES)):
        received.append(read_event(response)["token"])
        assert backend.yielded == i + 1
        if i + 1 < len(PIECES):
            backend.gates[i + 1].set()
    assert received == PIECES
    assert read_event(response) == {"done": True}
    assert response.read() == b""  # the stream ends with the connection


def test_conversation_reaches_backend(serve_backend):
    backend = FakeBackend(["ok"])
    server = serve_backend(backend)
    messages = chat("hi", "hello!", "what is 2+2?")
    response = post(server, {"messages": messages})
    assert [read_event(response), read_event(response)] == [{"token": "ok"}, {"done": True}]
    assert backend.calls[0]["messages"] == messages


@pytest.mark.parametrize("sent, received", [
    ({"temperature": 5.0, "top_k": 1000, "max_tokens": 10**6}, {"temperature": 2.0, "top_k": 200, "max_tokens": 4096}),
    ({"temperature": -1, "top_k": 0, "max_tokens": -5}, {"temperature": 0.0, "top_k": 1, "max_tokens": 1}),
    ({"temperature": 0.3, "top_k": 7, "max_tokens": 33}, {"temperature": 0.3, "top_k": 7, "max_tokens": 33}),
    ({"temperature": 1}, {"temperature": 1.0, "top_k": 11, "max_tokens": 22}),
    ({"temperature": None, "top_k": None}, {"temperature": 0.5, "top_k": 11, "max_tokens": 22}),
])
def test_settings_are_clamped_or_defaulted(serve_backend, sent, received):
    backend = FakeBackend(["x"])
    server = serve_backend(backend, web.Defaults(temperature=0.5, top_k=11, max_tokens=22))
    response = post(server, {"messages": chat("hi"), **sent})
    assert response.status == 200
    response.read()
    call = backend.calls[0]
    assert {key: call[key] for key in received} == received
    assert type(call["temperature"]) is float and type(call["top_k"]) is int and type(call["max_tokens"]) is int


def test_seed_passes_through_or_is_drawn(serve_backend):
    backend = FakeBackend(["x"])
    server = serve_backend(backend)
    post(server, {"messages": chat("hi"), "seed": 1234}).read()
    post(server, {"messages": chat("hi")}).read()
    post(server, {"messages": chat("hi")}).read()
    seeds = [call["seed"] for call in backend.calls]
    assert seeds[0] == 1234
    assert all(isinstance(s, int) and 0 <= s < 2**31 for s in seeds[1:])


def test_limits_are_inclusive(serve_backend):
    backend = FakeBackend(["x"])
    server = serve_backend(backend)
    longest = web.MAX_MESSAGES_PER_REQUEST - 1  # an odd count: the conversation ends with the user
    at_limits = [
        chat(*["a"] * longest),
        chat("a" * web.MAX_MESSAGE_LENGTH),
        chat(*["a" * web.MAX_MESSAGE_LENGTH] * 3, "a" * (web.MAX_MESSAGE_LENGTH - 1), "a"),
        chat("hi", "", "again"),  # an assistant turn may be empty
    ]
    for messages in at_limits:
        response = post(server, {"messages": messages})
        assert response.status == 200, response.read()
        response.read()
    assert len(backend.calls) == len(at_limits)


def body_cases() -> list:
    too_long = "a" * (web.MAX_MESSAGE_LENGTH + 1)
    over_total = chat(*["a" * 7000] * 5)
    return [
        (b"{not json", 400, "not valid JSON"),
        (b"\xff\xfe", 400, "not valid JSON"),
        ([], 400, "JSON object"),
        ({"messages": chat("hi"), "topk": 5}, 400, "unknown field(s) ['topk']"),
        ({}, 400, "messages must be a non-empty list"),
        ({"messages": []}, 400, "messages must be a non-empty list"),
        ({"messages": "hi"}, 400, "messages must be a non-empty list"),
        ({"messages": ["hi"]}, 400, "message 0 must be an object"),
        ({"messages": [{"role": "user", "content": "hi", "name": "x"}]}, 400, "message 0 must be an object"),
        ({"messages": [{"role": "system", "content": "hi"}]}, 400, 'message 0 has role "system"'),
        ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}, 400,
         'message 1 has role "user", expected \'assistant\''),
        ({"messages": chat("hi", "hello")}, 400, "last message must be the user's"),
        ({"messages": [{"role": "user", "content": 42}]}, 400, "message 0 content must be a string"),
        ({"messages": chat("   ")}, 400, "message 0 (user) is empty"),
        ({"messages": chat(*["a"] * (web.MAX_MESSAGES_PER_REQUEST + 2))}, 413, "too many messages: 502"),
        ({"messages": chat("hi", "x", too_long)}, 413, f"message 2 is {len(too_long)} characters"),
        ({"messages": over_total}, 413, "the conversation is 35000 characters"),
        ({"messages": chat("hi"), "temperature": "hot"}, 400, 'temperature must be a number, got "hot"'),
        ({"messages": chat("hi"), "top_k": 2.5}, 400, "top_k must be an integer, got 2.5"),
        ({"messages": chat("hi"), "max_tokens": True}, 400, "max_tokens must be an integer, got true"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', 400, "temperature must be finite"),
        ({"messages": chat("hi"), "seed": "7"}, 400, 'seed must be an integer, got "7"'),
    ]


@pytest.mark.parametrize("body, status, message", body_cases())
def test_bad_body_is_refused(serve_backend, body, status, message):
    backend = FakeBackend(["x"])
    server = serve_backend(backend)
    response = post(server, body)
    assert response.status == status
    assert response.getheader("Content-Type") == "application/json"
    assert message in json.loads(response.read())["error"]
    assert backend.calls == []


def raw_request(server: web.ChatServer, head: str, body: bytes = b"") -> tuple[int, dict]:
    """Send bytes as they are (http.client would add a Content-Length); the status and the JSON answer."""
    with socket.create_connection(server.server_address[:2], timeout=WAIT) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def test_bad_headers_are_refused(serve_backend):
    backend = FakeBackend(["x"])
    server = serve_backend(backend)
    body = json.dumps({"messages": chat("hi")}).encode()
    response = post(server, body, {"Content-Type": "text/plain"})
    assert response.status == 415
    assert "Content-Type must be application/json, got 'text/plain'" in json.loads(response.read())["error"]
    status, answer = raw_request(server, "POST /chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n", body)
    assert (status, answer) == (411, {"error": "a Content-Length header is required"})
    # refused from the header alone: the announced body is never sent
    head = f"POST /chat/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {10**7}\r\n"
    status, answer = raw_request(server, head)
    assert status == 413 and f"the body is {10**7} bytes, at most {web.MAX_BODY_BYTES}" in answer["error"]
    assert backend.calls == []


@pytest.mark.parametrize("method, path, status, message", [
    ("GET", "/nope", 404, "no such path: /nope"),
    ("POST", "/chat", 404, "no such path: /chat"),
    ("GET", "/chat/completions", 405, "GET is not allowed on /chat/completions, only POST"),
    ("POST", "/health", 405, "POST is not allowed on /health, only GET"),
    ("PUT", "/", 405, "PUT is not allowed on /, only GET"),
    ("DELETE", "/chat/completions", 405, "DELETE is not allowed on /chat/completions, only POST"),
])
def test_wrong_path_or_method(serve_backend, method, path, status, message):
    server = serve_backend(FakeBackend(["x"]))
    conn = connect(server)
    conn.request(method, path, b"{}", {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == status
    assert message in json.loads(response.read())["error"]
    if status == 405:
        assert response.getheader("Allow") == ("POST" if path == "/chat/completions" else "GET")


def test_health_and_page(serve_backend):
    server = serve_backend(FakeBackend(["x"]), web.Defaults(temperature=0.7, top_k=9, max_tokens=99))
    conn = connect(server)
    conn.request("GET", "/health")
    response = conn.getresponse()
    health = json.loads(response.read())
    assert response.status == 200 and health["status"] == "ok" and health["busy"] is False
    assert health["defaults"] == {"temperature": 0.7, "top_k": 9, "max_tokens": 99}
    assert health["limits"]["message_length"] == web.MAX_MESSAGE_LENGTH
    conn = connect(server)
    conn.request("GET", "/?from=test")  # a query string does not change the route
    response = conn.getresponse()
    page = response.read().decode()
    assert response.status == 200 and response.getheader("Content-Type") == "text/html; charset=utf-8"
    assert page == web.PAGE_PATH.read_text(encoding="utf-8")
    for needed in ('id="input"', 'id="send"', 'id="new"', "/chat/completions", "getReader"):
        assert needed in page
    assert "http://" not in page and "https://" not in page  # nothing is fetched from elsewhere


class FailingBackend:
    def __init__(self, error: Exception, after: int):
        self.error, self.after = error, after

    def stream_reply(self, messages, temperature, top_k, max_tokens, seed=None):
        for i in range(self.after):
            yield f"piece{i} "
        raise self.error


def test_backend_refusal_up_front_is_a_400(serve_backend):
    server = serve_backend(FailingBackend(ValueError("chat: the conversation is 900 tokens, the window is 256"), 0))
    response = post(server, {"messages": chat("hi")})
    assert response.status == 400
    assert json.loads(response.read()) == {"error": "chat: the conversation is 900 tokens, the window is 256"}


def test_backend_crash_up_front_is_a_500(serve_backend):
    server = serve_backend(FailingBackend(RuntimeError("out of memory"), 0))
    response = post(server, {"messages": chat("hi")})
    assert response.status == 500
    assert json.loads(response.read()) == {"error": "the model failed: RuntimeError: out of memory"}


def test_backend_failure_mid_reply_is_an_error_event(serve_backend):
    server = serve_backend(FailingBackend(RuntimeError("lost the device"), 2))
    response = post(server, {"messages": chat("hi")})
    assert response.status == 200
    events = [read_event(response) for _ in range(3)]
    assert events == [{"token": "piece0 "}, {"token": "piece1 "},
                      {"error": "the model failed: RuntimeError: lost the device"}]
    assert response.read() == b""  # no done marker after an error


def test_client_leaving_stops_generation(serve_backend):
    backend = FakeBackend([f"{i} " for i in range(500)], delay=0.005)
    server = serve_backend(backend)
    response = post(server, {"messages": chat("hi")})
    assert read_event(response) == {"token": "0 "}
    response.close()  # closes the socket: the server's next writes fail
    assert backend.closed.wait(WAIT)
    assert backend.yielded < len(backend.pieces)
    assert not server.generating.locked()


def test_one_reply_at_a_time(serve_backend):
    backend = FakeBackend(["a", "b"], gated=True)
    server = serve_backend(backend)
    backend.gates[0].set()
    first = post(server, {"messages": chat("first")})
    assert read_event(first) == {"token": "a"}
    second: dict = {}
    thread = threading.Thread(target=lambda: second.update(response=post(server, {"messages": chat("second")})))
    thread.start()
    time.sleep(0.3)
    assert len(backend.calls) == 1  # the second request waits for the lock
    backend.gates[1].set()
    assert read_event(first) == {"token": "b"} and read_event(first) == {"done": True}
    thread.join(WAIT)
    events = [read_event(second["response"]) for _ in range(3)]
    assert events == [{"token": "a"}, {"token": "b"}, {"done": True}]
    assert [call["messages"][0]["content"] for call in backend.calls] == ["first", "second"]


def test_make_server_needs_a_backend():
    with pytest.raises(TypeError, match="make_server: backend object has no stream_reply method"):
        web.make_server(object(), "127.0.0.1", 0)
