"""A headless Chromium driven over the DevTools protocol through ``--remote-debugging-pipe`` (JSON messages
ending in NUL on file descriptors 3 and 4), so that no websocket client, no playwright and no browser
download are needed; only a chromium binary (Debian: ``apt-get install -y --no-install-recommends
chromium``), found on PATH or named by $SITP_CHROMIUM. The browser tests of the chat page and of the viz
page share it.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

WAIT = 15.0  # seconds any browser step may take (a cold chromium start on a loaded 2-core machine)
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    explicit = os.environ.get("SITP_CHROMIUM")
    if explicit:
        return explicit
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Chromium:
    """A headless Chromium and one page of it, spoken to over the DevTools protocol on a pipe."""

    def __init__(self, binary: str):
        self.profile = tempfile.TemporaryDirectory()
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()
        # the browser's ends above fd 9, so that placing them at 3 and 4 cannot overwrite one with the other
        to_browser_read, from_browser_write = (self._above_9(fd) for fd in (to_browser_read, from_browser_write))
        flags = ["--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--no-default-browser-check", "--disable-extensions", "--disable-dev-shm-usage",
                 f"--user-data-dir={self.profile.name}"]
        # the browser reads commands on fd 3 and writes answers on fd 4 (subprocess cannot renumber
        # descriptors; posix_spawn can, and the rest of ours are close-on-exec)
        self.pid = os.posix_spawn(binary, [binary, *flags, "about:blank"], os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, to_browser_read, 3), (os.POSIX_SPAWN_DUP2, from_browser_write, 4),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.status: int | None = None
        self.next_id = 0
        self.answers: dict[int, dict] = {}
        self.answered = threading.Condition()
        self.reader = threading.Thread(target=self._read_answers, daemon=True)
        self.reader.start()
        self.session = None
        page = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=page, flatten=True)["sessionId"]

    @staticmethod
    def _above_9(fd: int) -> int:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return moved

    def _read_answers(self) -> None:
        buffer = b""
        while chunk := os.read(self.from_browser, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for message in map(json.loads, messages):
                if "id" in message:  # events (no id) are not needed: the test polls the page
                    with self.answered:
                        self.answers[message["id"]] = message
                        self.answered.notify_all()
        with self.answered:  # the browser is gone: wake any waiter
            self.answers[-1] = {}
            self.answered.notify_all()

    def send(self, method: str, **params) -> dict:
        """Send one command (to the page once attached) and wait for its result."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        with self.answered:
            if not self.answered.wait_for(lambda: self.next_id in self.answers or -1 in self.answers, WAIT):
                raise TimeoutError(f"Chromium did not answer {method} within {WAIT} s")
            answer = self.answers.pop(self.next_id, None)
        if answer is None:
            raise RuntimeError(f"Chromium exited before answering {method} (exit status {self.exit_status()})")
        if "error" in answer:
            raise RuntimeError(f"Chromium refused {method}: {answer['error']}")
        return answer["result"]

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str):
        """Poll a page expression until it is truthy; its value."""
        deadline = time.monotonic() + WAIT
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never showed {what} ({expression})")
            time.sleep(0.02)
        return value

    def click(self, selector: str) -> None:
        """A real mouse click at the middle of the element (scrolled into view first)."""
        x, y = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                             "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
                             "return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type_text(self, selector: str, text: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", text=text)

    def screenshot(self, path: Path, width: int = 1400, height: int = 900) -> Path:
        """A PNG of the page as it is now, at this viewport size."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))
        return path

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13)

    def exit_status(self) -> int | None:
        """None while the browser runs (and reaps it once it has exited)."""
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def close(self) -> None:
        try:
            os.write(self.to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        deadline = time.monotonic() + 5
        while self.exit_status() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.exit_status() is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        self.reader.join(5)  # it stops at the end of the browser's output
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.profile.cleanup()
