"""The chat page in a real headless Chromium: type a message, press Send, and watch the assistant's bubble
grow piece by piece as the server streams a slow fake reply; then a second turn (the page sends the whole
conversation), a server error shown in the page, and New conversation starting over.

Chromium is driven over the DevTools protocol (chromium.py); the test skips, saying so, when none is found.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from common.chat import web

from .chromium import BROWSERS, WAIT, Chromium, find_chromium


class SlowBackend:
    """Streams a fixed reply in pieces, ``delay`` seconds apart; a message saying "fail" is refused."""

    def __init__(self, pieces: list[str], delay: float):
        self.pieces, self.delay = pieces, delay
        self.calls: list[list[dict]] = []

    def stream_reply(self, messages: list[dict], temperature: float, top_k: int, max_tokens: int,
                     seed: int | None = None) -> Iterator[str]:
        self.calls.append(messages)
        if messages[-1]["content"] == "fail":
            raise ValueError("chat: the conversation is longer than the model's window")
        for piece in self.pieces:
            time.sleep(self.delay)
            yield piece


PIECES = ["Hello", " there", ", wörld", " ✓", " how", " are", " you?"]
REPLY = "".join(PIECES)
LAST_BUBBLE = "document.querySelector('.message.assistant:last-of-type')"


def watch_reply(browser: Chromium) -> list[str]:
    """The last assistant bubble's text at every poll until its reply has ended; ends with the final text."""
    browser.wait_for(f"{LAST_BUBBLE} !== null", "an assistant bubble")
    states = []
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        text, state = browser.evaluate(f"[{LAST_BUBBLE}.textContent, {LAST_BUBBLE}.dataset.state]")
        states.append(text)
        if state != "streaming":
            return states
        time.sleep(0.01)
    raise TimeoutError(f"the reply did not end within {WAIT} s; last text {states[-1]!r}")


@pytest.fixture(scope="module")
def page():
    """A browser on the page of a server whose fake model streams slowly."""
    binary = find_chromium()
    if binary is None:
        pytest.skip(f"no Chromium found (looked for {', '.join(BROWSERS)} on PATH and $SITP_CHROMIUM); "
                    "on Debian: apt-get install -y --no-install-recommends chromium")
    backend = SlowBackend(PIECES, delay=0.15)
    server = web.make_server(backend, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    browser = Chromium(binary)
    try:
        browser.send("Page.navigate", url=server.url)
        browser.wait_for("document.readyState === 'complete' && document.getElementById('send') !== null",
                         "the loaded page")
        yield browser, backend
    finally:
        browser.close()
        server.shutdown()
        server.server_close()


def test_typed_message_streams_into_the_page(page):
    browser, backend = page
    browser.type_text("#input", "hi, who are you?")
    browser.click("#send")
    states = watch_reply(browser)
    partial = [s for s in dict.fromkeys(states) if s and s != REPLY]  # distinct texts seen before the end
    assert len(partial) >= 2, f"expected the reply to grow in steps, saw {list(dict.fromkeys(states))}"
    assert all(REPLY.startswith(s) for s in partial)  # each state is a prefix of the reply: it only grows
    assert states[-1] == REPLY
    assert browser.evaluate(f"{LAST_BUBBLE}.dataset.state") == "done"
    assert browser.evaluate("document.querySelector('.message.user').textContent") == "hi, who are you?"
    assert backend.calls[-1] == [{"role": "user", "content": "hi, who are you?"}]
    assert browser.evaluate("document.getElementById('input').value") == ""


def test_second_turn_sends_the_whole_conversation(page):
    browser, backend = page
    browser.type_text("#input", "and again")
    browser.press_enter()
    assert watch_reply(browser)[-1] == REPLY
    assert backend.calls[-1] == [{"role": "user", "content": "hi, who are you?"},
                                 {"role": "assistant", "content": REPLY},
                                 {"role": "user", "content": "and again"}]
    assert browser.evaluate("document.querySelectorAll('.message').length") == 4


def test_server_error_shows_in_the_page(page):
    browser, backend = page
    browser.type_text("#input", "fail")
    browser.click("#send")
    watch_reply(browser)
    assert browser.evaluate(f"{LAST_BUBBLE}.dataset.state") == "error"
    error = browser.evaluate(f"{LAST_BUBBLE}.querySelector('.error').textContent")
    assert error == "Error: chat: the conversation is longer than the model's window"
    assert browser.evaluate("document.getElementById('input').value") == "fail"  # given back to retry
    assert len(backend.calls[-1]) == 5  # the failed turn is not kept: the next request resends from here


def test_new_conversation_starts_over(page):
    browser, backend = page
    browser.click("#new")
    assert browser.evaluate("document.querySelectorAll('.message').length") == 0
    browser.evaluate("document.getElementById('input').value = ''")
    browser.type_text("#input", "fresh start")
    browser.click("#send")
    assert watch_reply(browser)[-1] == REPLY
    assert backend.calls[-1] == [{"role": "user", "content": "fresh start"}]
