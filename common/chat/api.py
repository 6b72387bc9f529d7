"""An OpenAI-compatible server for a nanochat checkpoint (``sitp serve``), on FastAPI and uvicorn.

Endpoints:

- ``GET /v1/models``: the one model served, in OpenAI's list shape;
- ``POST /v1/chat/completions``: OpenAI's chat completions. Fields: ``messages`` (a ``system`` message
  first is folded into the first user message, as nanochat does; content as a string or a list of text
  parts), ``model``, ``temperature`` (0..2), ``top_k`` (our extension), ``top_p`` (0..1, the nucleus,
  after top-k), ``max_tokens`` or ``max_completion_tokens``, ``stop`` (a string or up to 4),
  ``seed``, ``n`` (1), ``stream`` and ``stream_options.include_usage``. The answer has OpenAI's shape:
  ``chat.completion`` with ``usage`` and ``finish_reason`` (``stop`` at the end of the turn or a stop
  string, ``length`` at max_tokens or the model's window), or, streamed, ``chat.completion.chunk``
  Server-Sent Events and ``data: [DONE]``;
- ``GET /``, ``GET /health`` and ``POST /chat/completions``: the chat page and its own stream (web.py's).

A bad request gets a 4xx with OpenAI's error object, ``{"error": {"message", "type", "param", "code"}}``,
before the model is touched. One reply is generated at a time (the model runs on the CPU): requests wait
their turn in a queue of at most ``max_waiting``; past that the server answers 429 with ``Retry-After``
at once instead of holding the connection, so a burst of clients each gets an answer.

FastAPI and uvicorn are an optional extra (``pip install -e ".[serve]"``); this module imports them.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from .web import (
    MAX_BODY_BYTES,
    MAX_TOKENS_RANGE,
    PAGE_PATH,
    TEMPERATURE_RANGE,
    TOP_K_RANGE,
    Backend,
    Defaults,
    RequestError,
    _check_messages,
    parse_chat_request,
    sse_event,
)
from .web import (
    _number as web_number,
)

FIELDS = {"messages", "model", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "stop",
          "seed", "n", "stream", "stream_options", "user"}
MAX_STOPS = 4


class ApiError(Exception):
    """A refused request: its HTTP status and OpenAI's error fields."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


@dataclass
class ReplyStats:
    """What a backend reports about one reply, for OpenAI's usage and finish_reason."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    ended: bool = False  # the model closed its turn or said a stop string (else: max_tokens or its window)


@dataclass(frozen=True)
class CompletionRequest:
    messages: list[dict]
    temperature: float
    top_k: int | None
    max_tokens: int
    stop: tuple[str, ...]
    seed: int
    stream: bool
    include_usage: bool
    top_p: float = 1.0


def _number(body: dict, key: str, default: Any, low: float, high: float, integer: bool = False) -> Any:
    """web.py's check of a number field, plus OpenAI's rule: out of [low, high] is an error, not clamped."""
    try:
        value = web_number(body, key, default, integer)
    except RequestError as e:
        raise ApiError(e.status, e.message, key) from None
    if not low <= value <= high:
        raise ApiError(400, f"{key} must be in [{low}, {high}], got {json.dumps(value)}", key)
    return value


def _text(content: Any, i: int) -> str:
    """A message's content: a string, or OpenAI's list of parts of which only text parts are served."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                         and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)
    raise ApiError(400, f"messages[{i}].content must be a string or a list of text parts", f"messages[{i}].content")


def _messages(raw: Any) -> list[dict]:
    """OpenAI's messages as the user/assistant turns nanochat renders: a leading system message joins
    the first user message."""
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "messages must be a non-empty list of {role, content} objects", "messages")
    turns = []
    system = None
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ApiError(400, f"messages[{i}] must be an object with a role and a content", f"messages[{i}]")
        role, text = m["role"], _text(m["content"], i)
        if role == "system" and i == 0:
            system = text
            continue
        if role not in ("user", "assistant"):
            raise ApiError(400, f"messages[{i}].role {json.dumps(role)} is not served (user, assistant, "
                                "and system as the first message)", f"messages[{i}].role")
        turns.append({"role": role, "content": text})
    if system is not None and turns and turns[0]["role"] == "user":
        turns[0] = {"role": "user", "content": f"{system}\n\n{turns[0]['content']}"}
    try:
        return _check_messages(turns)
    except RequestError as e:
        raise ApiError(e.status, e.message, "messages") from None


def parse_completion(raw: bytes, defaults: Defaults, model: str) -> CompletionRequest:
    """Validate a /v1/chat/completions body (OpenAI's ranges: out of range is an error, not clamped)."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ApiError(400, f"the body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise ApiError(400, f"unrecognized request argument(s): {', '.join(unknown)}", unknown[0])
    if body.get("model") not in (None, model):
        raise ApiError(404, f"the model {json.dumps(body['model'])} does not exist; this server has {model!r}",
                       "model", "model_not_found")
    messages = _messages(body.get("messages"))
    if _number(body, "n", 1, 1, 1, integer=True) != 1:
        raise ApiError(400, "n must be 1", "n")
    stop = body.get("stop")
    stops = () if stop is None else (stop,) if isinstance(stop, str) else stop
    if not isinstance(stops, (list, tuple)) or len(stops) > MAX_STOPS or \
            not all(isinstance(s, str) and s for s in stops):
        raise ApiError(400, f"stop must be a non-empty string or a list of at most {MAX_STOPS} of them", "stop")
    limit = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ApiError(400, f"seed must be an integer, got {json.dumps(seed)}", "seed")
    stream, options = body.get("stream", False), body.get("stream_options")
    if not isinstance(stream, bool) and stream is not None:
        raise ApiError(400, "stream must be a boolean", "stream")
    if options is not None and (not stream or not isinstance(options, dict)
                                or not isinstance(options.get("include_usage", False), bool)):
        raise ApiError(400, "stream_options is an object ({include_usage: bool}) and needs stream: true",
                       "stream_options")
    return CompletionRequest(
        messages=messages,
        temperature=float(_number(body, "temperature", defaults.temperature, *TEMPERATURE_RANGE)),
        top_k=int(_number(body, "top_k", defaults.top_k, *TOP_K_RANGE, integer=True)),
        max_tokens=int(_number(body, limit, defaults.max_tokens, *MAX_TOKENS_RANGE, integer=True)),
        stop=tuple(stops),
        seed=int(uuid.uuid4().int % 2**31) if seed is None else seed,
        stream=bool(stream),
        include_usage=bool(options and options.get("include_usage")),
        top_p=float(_number(body, "top_p", 1.0, 0.0, 1.0)),
    )


def cut_at_stops(pieces: Iterator[str], stops: tuple[str, ...], stats: ReplyStats) -> Iterator[str]:
    """The text up to the first stop string (which ends the reply: stats.ended); a stop may span pieces,
    so the last len(stop) - 1 characters wait until the next piece shows they are not one. Closes
    `pieces` when it stops."""
    if not stops:
        yield from pieces
        return
    hold, pending = max(map(len, stops)) - 1, ""
    try:
        for piece in pieces:
            pending += piece
            found = [i for i in (pending.find(s) for s in stops) if i >= 0]
            if found:
                stats.ended = True
                if min(found):
                    yield pending[:min(found)]
                return
            if len(pending) > hold:
                yield pending[:len(pending) - hold]
                pending = pending[len(pending) - hold:]
        if pending:
            yield pending
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()


@dataclass
class Turnstile:
    """One generation at a time, at most `max_waiting` requests waiting for it."""

    max_waiting: int
    generating: threading.Lock = field(default_factory=threading.Lock)
    count: threading.Lock = field(default_factory=threading.Lock)
    admitted: int = 0  # generating or waiting

    def enter(self) -> None:
        with self.count:
            if self.admitted > self.max_waiting:
                raise ApiError(429, f"the server is busy: one reply at a time and {self.max_waiting} waiting; "
                                    "retry shortly", kind="rate_limit_error", code="busy",
                               headers={"Retry-After": "1"})
            self.admitted += 1

    def leave(self) -> None:
        with self.count:
            self.admitted -= 1


class ChatService:
    """The app's state: the backend, its name, the defaults and the turnstile."""

    def __init__(self, backend: Backend, model: str, defaults: Defaults, max_waiting: int):
        self.backend, self.model, self.defaults = backend, model, defaults
        self.turnstile = Turnstile(max_waiting)
        self.created = int(time.time())

    def generate(self, request: CompletionRequest, stats: ReplyStats) -> Iterator[str]:
        """The reply's text, generated under the lock; the caller entered the turnstile, this leaves it."""
        try:
            with self.turnstile.generating:
                pieces = self.backend.stream_reply(request.messages, temperature=request.temperature,
                                                   top_k=request.top_k, max_tokens=request.max_tokens,
                                                   seed=request.seed, stats=stats, top_p=request.top_p)
                yield from cut_at_stops(iter(pieces), request.stop, stats)
        finally:
            self.turnstile.leave()

    def chunk(self, ident: str, delta: dict, finish: str | None, usage: dict | None = None) -> bytes:
        payload = {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()), "model": self.model,
                   "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage:
            payload["usage"] = usage
        return sse_event(payload)


def _usage(stats: ReplyStats) -> dict:
    return {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
            "total_tokens": stats.prompt_tokens + stats.completion_tokens}


def _finish(stats: ReplyStats) -> str:
    return "stop" if stats.ended else "length"


async def _body(request: Request) -> bytes:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, f"Content-Type must be application/json, got {media or 'none'!r}")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise ApiError(413, f"the body is {length} bytes, at most {MAX_BODY_BYTES}")
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise ApiError(413, f"the body is {len(body)} bytes, at most {MAX_BODY_BYTES}")
    return body


def create_app(backend: Backend, model: str = "nanochat", defaults: Defaults | None = None,
               max_waiting: int = 16) -> FastAPI:
    if not callable(getattr(backend, "stream_reply", None)):
        raise TypeError(f"create_app: backend {type(backend).__name__} has no stream_reply method")
    service = ChatService(backend, model, defaults or Defaults(), max_waiting)
    app = FastAPI(title="sitp nanochat", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    page = PAGE_PATH.read_bytes()

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError) -> JSONResponse:
        return e.response()

    @app.exception_handler(404)
    async def not_found(request: Request, e: Exception) -> JSONResponse:
        return ApiError(404, f"no such path: {request.url.path}", code="not_found").response()

    @app.exception_handler(405)
    async def not_allowed(request: Request, e: Exception) -> JSONResponse:
        return ApiError(405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed",
                        headers=dict(getattr(e, "headers", None) or {})).response()

    @app.get("/")
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/health")
    async def health() -> dict:
        d = service.defaults
        return {"status": "ok", "busy": service.turnstile.generating.locked(), "model": model,
                "defaults": {"temperature": d.temperature, "top_k": d.top_k, "max_tokens": d.max_tokens}}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": model, "object": "model", "created": service.created,
                                            "owned_by": "sitp"}]}

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> Response:
        req = parse_completion(await _body(request), service.defaults, model)
        service.turnstile.enter()
        ident, stats = f"chatcmpl-{uuid.uuid4().hex[:24]}", ReplyStats()
        pieces = service.generate(req, stats)
        if not req.stream:
            try:
                text = await run_in_threadpool(lambda: "".join(pieces))
            except ValueError as e:  # the conversation does not fit the model's window
                raise ApiError(400, str(e), "messages", "context_length_exceeded") from None
            finish = _finish(stats)
            return JSONResponse({"id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                              "finish_reason": finish, "logprobs": None}],
                                 "usage": _usage(stats)})
        try:  # the first piece before the 200, so a refusal up front is still an error status
            first = await run_in_threadpool(lambda: next(pieces, None))
        except ValueError as e:
            raise ApiError(400, str(e), "messages", "context_length_exceeded") from None

        def events() -> Iterator[bytes]:
            try:
                yield service.chunk(ident, {"role": "assistant", "content": ""}, None)
                if first is not None:
                    yield service.chunk(ident, {"content": first}, None)
                for piece in pieces:
                    yield service.chunk(ident, {"content": piece}, None)
                yield service.chunk(ident, {}, _finish(stats))
                if req.include_usage:
                    yield service.chunk(ident, {}, None, _usage(stats))
                yield b"data: [DONE]\n\n"
            finally:
                pieces.close()

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.post("/chat/completions")
    async def page_completions(request: Request) -> Response:
        """The page's own stream (web.py's format), through the same turnstile."""
        try:
            chat = parse_chat_request(await _body(request), service.defaults)
        except RequestError as e:
            return JSONResponse({"error": e.message}, status_code=e.status)
        req = CompletionRequest(chat.messages, chat.temperature, chat.top_k, chat.max_tokens, (), chat.seed,
                                True, False)
        service.turnstile.enter()
        pieces = service.generate(req, ReplyStats())

        def events() -> Iterator[bytes]:
            try:
                for piece in pieces:
                    yield sse_event({"token": piece})
                yield sse_event({"done": True})
            except Exception as e:  # the status is sent: report the failure in the stream
                yield sse_event({"error": f"the model failed: {type(e).__name__}: {e}"})
            finally:
                pieces.close()

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    return app


def make_server(app: FastAPI, host: str = "127.0.0.1", port: int = 8000) -> uvicorn.Server:
    """A uvicorn server for the app (a deep listen backlog: a burst of clients is queued, never reset)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", backlog=2048, timeout_keep_alive=5)
    return uvicorn.Server(config)


def serve(backend: Backend, host: str = "127.0.0.1", port: int = 8000, defaults: Defaults | None = None,
          model: str = "nanochat") -> None:
    """Serve until Ctrl-C."""
    server = make_server(create_app(backend, model, defaults), host, port)
    print(f"nanochat at http://{host}:{port}/ (OpenAI API at http://{host}:{port}/v1; Ctrl-C to stop)", flush=True)
    server.run()
