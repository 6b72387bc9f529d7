"""nanochat's web UI: a standard-library HTTP server that serves one chat page and streams replies.

Endpoints (the API of nanochat's ``scripts/chat_web.py``):

- ``GET /`` the page (``ui.html`` next to this file: inline CSS and JS, nothing fetched from elsewhere);
- ``GET /health`` ``{"status": "ok", "busy": bool, "defaults": {...}, "limits": {...}}``;
- ``POST /chat/completions`` with ``{"messages": [{"role": "user", "content": "..."}, ...],
  "temperature"?, "top_k"?, "max_tokens"?, "seed"?}`` answers a Server-Sent Events stream: one
  ``data: {"token": "..."}`` event per text piece the backend yields, then ``data: {"done": true}``
  (or ``data: {"error": "..."}`` when the backend fails half way).

A bad request gets a 4xx with ``{"error": "..."}`` naming what was wrong: 400 malformed JSON or fields,
408 body too slow, 411 no Content-Length, 413 over a size limit, 415 not JSON, 404 unknown path, 405 wrong method.
Sampling settings out of range are clamped to nanochat's ranges rather than refused.

The backend is any object with ``stream_reply(messages, temperature, top_k, max_tokens, seed) -> Iterator[str]``.
One reply is generated at a time (a lock; other requests wait their turn): the model runs on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

# nanochat's abuse limits (chat_web.py, Dec 2025), in characters of content
MAX_MESSAGES_PER_REQUEST = 500
MAX_MESSAGE_LENGTH = 8000
MAX_TOTAL_CONVERSATION_LENGTH = 32000
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_K_RANGE = (1, 200)
MAX_TOKENS_RANGE = (1, 4096)
# 32000 characters written as JSON escapes (12 bytes for an escaped surrogate pair) plus per-message
# syntax stay under this; a larger body is refused before it is read
MAX_BODY_BYTES = 512 * 1024

PAGE_PATH = Path(__file__).with_name("ui.html")
log = logging.getLogger(__name__)


class Backend(Protocol):
    def stream_reply(self, messages: list[dict], temperature: float, top_k: int, max_tokens: int,
                     seed: int | None = None) -> Iterator[str]: ...


class RequestError(Exception):
    """A request the server refuses: its HTTP status and the message sent back as ``{"error": ...}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class Defaults:
    """Sampling settings for requests that leave them out."""

    temperature: float = 0.8
    top_k: int = 50
    max_tokens: int = 512


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict]
    temperature: float
    top_k: int
    max_tokens: int
    seed: int | None


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def _number(body: dict, key: str, default: float, integer: bool) -> float:
    """``body[key]`` as a finite number (an integer when asked), or ``default`` when absent or null."""
    value = body.get(key)
    if value is None:
        return default
    # bool is an int subclass, but true/false is never a meaningful temperature
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        kind = "an integer" if integer else "a number"
        raise RequestError(400, f"{key} must be {kind}, got {json.dumps(value)}")
    if not math.isfinite(value):
        raise RequestError(400, f"{key} must be finite, got {value}")
    return value


def _check_messages(messages: Any) -> list[dict]:
    """Roles alternate user/assistant starting and ending with user; contents are strings within the limits."""
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects")
    if len(messages) > MAX_MESSAGES_PER_REQUEST:
        raise RequestError(413, f"too many messages: {len(messages)}, at most {MAX_MESSAGES_PER_REQUEST}")
    total = 0
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise RequestError(400, f"message {i} must be an object with exactly the keys role and content")
        role, content = message["role"], message["content"]
        expected = "user" if i % 2 == 0 else "assistant"
        if role != expected:
            raise RequestError(400, f"message {i} has role {json.dumps(role)}, expected {expected!r} "
                                    "(roles alternate user/assistant, starting with user)")
        if not isinstance(content, str):
            raise RequestError(400, f"message {i} content must be a string, got {json.dumps(content)[:40]}")
        # an assistant may have said nothing (it can end its turn at once); a user message must say something
        if role == "user" and not content.strip():
            raise RequestError(400, f"message {i} (user) is empty")
        if len(content) > MAX_MESSAGE_LENGTH:
            raise RequestError(413, f"message {i} is {len(content)} characters, at most {MAX_MESSAGE_LENGTH}")
        total += len(content)
    if total > MAX_TOTAL_CONVERSATION_LENGTH:
        raise RequestError(413, f"the conversation is {total} characters, at most {MAX_TOTAL_CONVERSATION_LENGTH}")
    if messages[-1]["role"] != "user":
        raise RequestError(400, "the last message must be the user's (the server writes the assistant's reply)")
    return messages


def parse_chat_request(raw: bytes, defaults: Defaults) -> ChatRequest:
    """Validate a /chat/completions body; sampling settings fall back to ``defaults`` and are clamped."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(400, f"the body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise RequestError(400, "the body must be a JSON object with a messages list")
    unknown = sorted(set(body) - {"messages", "temperature", "top_k", "max_tokens", "seed"})
    if unknown:
        raise RequestError(400, f"unknown field(s) {unknown}; expected messages, temperature, top_k, max_tokens, seed")
    messages = _check_messages(body.get("messages"))
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RequestError(400, f"seed must be an integer, got {json.dumps(seed)}")
    return ChatRequest(
        messages=messages,
        temperature=float(_clamp(_number(body, "temperature", defaults.temperature, False), TEMPERATURE_RANGE)),
        top_k=int(_clamp(_number(body, "top_k", defaults.top_k, True), TOP_K_RANGE)),
        max_tokens=int(_clamp(_number(body, "max_tokens", defaults.max_tokens, True), MAX_TOKENS_RANGE)),
        # a fresh seed per request (as nanochat does), so asking again gives another sample
        seed=random.randrange(2**31) if seed is None else seed,
    )


def sse_event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True  # a client stuck mid-stream does not keep the process alive at shutdown

    def __init__(self, address: tuple[str, int], backend: Backend, defaults: Defaults):
        super().__init__(address, ChatHandler)
        self.backend, self.defaults = backend, defaults
        self.generating = threading.Lock()
        self.page = PAGE_PATH.read_bytes()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


class ChatHandler(BaseHTTPRequestHandler):
    server: ChatServer
    # HTTP/1.0: no chunked encoding needed, the stream ends when the connection closes
    protocol_version = "HTTP/1.0"
    timeout = 60  # seconds a socket read or write may stall (a body that never arrives frees its thread)
    routes = {"/": "GET", "/health": "GET", "/chat/completions": "POST"}

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def _send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> str | None:
        """The path if it is served for this method; otherwise answers 404/405 and returns None."""
        path = urlsplit(self.path).path
        allowed = self.routes.get(path)
        if allowed is None:
            self._send_json(404, {"error": f"no such path: {path} (try GET /, GET /health, POST /chat/completions)"})
            return None
        if allowed != method:
            self._send_json(405, {"error": f"{method} is not allowed on {path}, only {allowed}"}, {"Allow": allowed})
            return None
        return path

    def _refuse_method(self) -> None:
        self._route(self.command)

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse_method

    def do_GET(self) -> None:
        path = self._route("GET")
        if path == "/":
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(self.server.page)))
            self.end_headers()
            self.wfile.write(self.server.page)
        elif path == "/health":
            d = self.server.defaults
            self._send_json(200, {
                "status": "ok", "busy": self.server.generating.locked(),
                "defaults": {"temperature": d.temperature, "top_k": d.top_k, "max_tokens": d.max_tokens},
                "limits": {"messages": MAX_MESSAGES_PER_REQUEST, "message_length": MAX_MESSAGE_LENGTH,
                           "conversation_length": MAX_TOTAL_CONVERSATION_LENGTH, "temperature": TEMPERATURE_RANGE,
                           "top_k": TOP_K_RANGE, "max_tokens": MAX_TOKENS_RANGE},
            })

    def _read_body(self) -> bytes:
        # JSON only: a cross-site form post (text/plain, no preflight) cannot start a generation
        media_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise RequestError(415, f"Content-Type must be application/json, got {media_type or 'none'!r}")
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError(411, "a Content-Length header is required")
        if not length.isdigit():
            raise RequestError(400, f"bad Content-Length {length!r}")
        if int(length) > MAX_BODY_BYTES:
            raise RequestError(413, f"the body is {length} bytes, at most {MAX_BODY_BYTES}")
        try:
            return self.rfile.read(int(length))
        except TimeoutError:
            raise RequestError(408, f"the body did not arrive: {length} bytes announced") from None

    def do_POST(self) -> None:
        if self._route("POST") is None:
            return
        try:
            request = parse_chat_request(self._read_body(), self.server.defaults)
        except RequestError as e:
            self.close_connection = True  # an unread body must not be taken for the next request
            self._send_json(e.status, {"error": e.message})
            return
        with self.server.generating:
            self._stream(request)

    def _stream(self, request: ChatRequest) -> None:
        pieces = iter(self.server.backend.stream_reply(request.messages, temperature=request.temperature,
                                                       top_k=request.top_k, max_tokens=request.max_tokens,
                                                       seed=request.seed))
        # take the first piece before answering 200, so a refusal up front (e.g. the conversation is
        # longer than the model's window: ValueError) becomes a proper error status
        try:
            first = next(pieces, None)
        except ValueError as e:
            self._send_json(400, {"error": str(e)})
            return
        except Exception as e:
            log.exception("backend failed")
            self._send_json(500, {"error": f"the model failed: {type(e).__name__}: {e}"})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            if first is not None:
                self._write(sse_event({"token": first}))
                for piece in pieces:
                    self._write(sse_event({"token": piece}))
            self._write(sse_event({"done": True}))
        except (BrokenPipeError, ConnectionResetError):
            log.info("client left mid-reply; generation stopped")
        except Exception as e:  # the status is sent: report the failure in the stream
            log.exception("backend failed mid-reply")
            try:
                self._write(sse_event({"error": f"the model failed: {type(e).__name__}: {e}"}))
            except OSError:
                pass
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()  # stop a generator backend's loop now, not at garbage collection

    def _write(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()


def make_server(backend: Backend, host: str = "127.0.0.1", port: int = 8000,
                defaults: Defaults | None = None) -> ChatServer:
    """A bound server (port 0 picks a free port; ``server.url`` says which); run it with ``serve_forever()``."""
    if not callable(getattr(backend, "stream_reply", None)):
        raise TypeError(f"make_server: backend {type(backend).__name__} has no stream_reply method")
    return ChatServer((host, port), backend, defaults or Defaults())


def serve(backend: Backend, host: str = "127.0.0.1", port: int = 8000, defaults: Defaults | None = None) -> None:
    """Serve the UI until Ctrl-C."""
    server = make_server(backend, host, port, defaults)
    print(f"nanochat web UI at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print()
    finally:
        server.server_close()


run_web = serve  # the name ``sitp chat --web`` calls


def add_web_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (0: any free port)")
    parser.add_argument("--temperature", type=float, default=Defaults.temperature, help="default temperature")
    parser.add_argument("--top-k", dest="top_k", type=int, default=Defaults.top_k, help="default top-k")
    parser.add_argument("--max-tokens", dest="max_tokens", type=int, default=Defaults.max_tokens,
                        help="default reply length in tokens")


class EchoBackend:
    """A stand-in model for trying the page without a checkpoint: repeats the last message word by word."""

    def __init__(self, delay: float = 0.1):
        self.delay = delay

    def stream_reply(self, messages: list[dict], temperature: float, top_k: int, max_tokens: int,
                     seed: int | None = None, stats: Any = None) -> Iterator[str]:
        import time

        words = f"You said: {messages[-1]['content']}".split(" ")
        if stats is not None:
            stats.prompt_tokens = sum(len(m["content"].split(" ")) for m in messages)
        for i, word in enumerate(words[:max_tokens]):
            time.sleep(self.delay)
            if stats is not None:
                stats.completion_tokens += 1
                stats.ended = i == len(words) - 1
            yield word if i == 0 else " " + word


def main(argv: list[str] | None = None, backend: Backend | None = None) -> int:
    """``python -m common.chat.web`` serves the echo stand-in; a caller with a model passes ``backend``."""
    parser = argparse.ArgumentParser(prog="python -m common.chat.web", description=__doc__.split("\n")[0])
    add_web_arguments(parser)
    args = parser.parse_args(argv)
    defaults = Defaults(args.temperature, args.top_k, args.max_tokens)
    serve(backend or EchoBackend(), args.host, args.port, defaults)
    return 0


if __name__ == "__main__":
    sys.exit(main())
