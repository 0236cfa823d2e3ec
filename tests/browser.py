"""A real headless Chromium for the page tests, driven over the DevTools protocol (CDP).

:func:`chromium_binary` finds Debian's ``chromium`` (``.ci/run`` installs it with apt-get); without
one the tests that need it skip, saying so. :class:`Browser` starts it with
``--remote-debugging-port=0`` in a fresh profile directory, reads the port it chose from the
profile's ``DevToolsActivePort`` file, and talks CDP over one WebSocket (``websocket-client``):
one page target attached in flat mode. A :class:`Page` records every console error
(``Runtime.consoleAPICalled`` of type error/assert), uncaught exception (``Runtime.exceptionThrown``)
and error log entry (``Log.entryAdded``: a refused load, a CSP violation), evaluates JavaScript for
DOM queries, dispatches mouse input and captures PNG screenshots. Every wait is bounded; the
browser process is always killed and its profile removed, also when a test fails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

#: Seconds any one step (start, a command, a page load) may take.
TIMEOUT = 30.0
#: Names Chromium is installed under (Debian: ``chromium``).
BINARIES = ("chromium", "chromium-browser")


def chromium_binary() -> str | None:
    """The Chromium executable on PATH, or None."""
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    """The browser did not start, answer or load in time, or a command failed."""


class Browser:
    """One headless Chromium process with one CDP connection; use as a context manager."""

    def __init__(self, binary: str, *, width: int = 1400, height: int = 900, timeout: float = TIMEOUT) -> None:
        import websocket

        self.timeout = timeout
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="tk-chromium-")
        self._log = open(os.path.join(self._profile, "stderr.log"), "wb")  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-dev-shm-usage", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--mute-audio", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log)
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        try:
            port, path = self._devtools_address()
            self._ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=timeout,
                                                   suppress_origin=True)
        except BaseException:
            self.close()
            raise

    def _devtools_address(self) -> tuple[int, str]:
        """The port and browser path Chromium wrote to ``DevToolsActivePort`` once listening."""
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrowserError(f"chromium exited with {self._proc.returncode}: {self._stderr_tail()}")
            try:
                lines = marker.read_text().split()
            except OSError:
                lines = []
            if len(lines) >= 2:
                return int(lines[0]), lines[1]
            time.sleep(0.05)
        raise BrowserError(f"chromium did not open its DevTools port in {self.timeout:.0f} s: {self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        self._log.flush()
        try:
            return Path(self._profile, "stderr.log").read_text(errors="replace")[-600:]
        except OSError:
            return ""

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._receive(deadline, f"{method} got no reply")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _receive(self, deadline: float, what: str) -> dict[str, Any]:
        import websocket

        left = deadline - time.monotonic()
        if left <= 0:
            raise BrowserError(f"{what} in {self.timeout:.0f} s")
        self._ws.settimeout(left)
        try:
            return json.loads(self._ws.recv())
        except websocket.WebSocketTimeoutException:
            raise BrowserError(f"{what} in {self.timeout:.0f} s") from None

    def wait_event(self, method: str, session: str, *, after: int = 0) -> dict[str, Any]:
        """The first event ``method`` of ``session`` among events ``after`` onwards (waiting for it)."""
        deadline = time.monotonic() + self.timeout
        seen = after
        while True:
            for event in self._events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self._events)
            self._events.append(self._receive(deadline, f"no {method}"))

    def events(self, session: str) -> list[dict[str, Any]]:
        return [e for e in self._events if e.get("sessionId") == session]

    def new_page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                          "deviceScaleFactor": 1, "mobile": False}, session=session)
        return Page(self, session)

    def close(self) -> None:
        """End the browser (politely, then by force) and remove its profile."""
        ws = getattr(self, "_ws", None)
        if ws is not None:
            try:
                ws.send(json.dumps({"id": self._next_id + 1, "method": "Browser.close"}))
            except Exception:  # noqa: BLE001 - already gone; the process is killed below
                pass
            ws.close()
            self._ws = None
        if self._proc.poll() is None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._log.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab: navigate, evaluate, read its errors, take a screenshot."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session
        self._start = 0

    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait for its load event; errors are counted from here."""
        self._start = len(self.browser._events)
        result = self.browser.send("Page.navigate", {"url": url}, session=self.session)
        if result.get("errorText"):
            raise BrowserError(f"{url}: {result['errorText']}")
        self.browser.wait_event("Page.loadEventFired", self.session, after=self._start)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails'].get('exception', {}).get('description') or result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def mouse(self, kind: str, x: float, y: float, **extra: Any) -> None:
        """One mouse event (``mouseMoved``, ``mousePressed``, ``mouseReleased``, ``mouseWheel``)."""
        self.browser.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **extra}, session=self.session)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries since :meth:`open`, as text."""
        self.evaluate("0")  # a round trip, so events the page sent before now have arrived
        out = []
        for event in self.browser._events[self._start:]:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                   for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                out.append("exception: " + str(details.get("exception", {}).get("description") or details.get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}".strip())
        return out

    def dialogs(self) -> list[str]:
        """Messages of the JavaScript dialogs (alert, confirm, prompt) the page opened."""
        return [e["params"].get("message", "") for e in self.browser._events[self._start:]
                if e.get("sessionId") == self.session and e.get("method") == "Page.javascriptDialogOpening"]

    def screenshot(self, path: Path, *, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or of the whole page), written to ``path`` and returned."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        data = base64.b64decode(self.browser.send("Page.captureScreenshot", params, session=self.session)["data"])
        Path(path).write_bytes(data)
        return data


def png_colours(data: bytes, *, limit: int = 64) -> tuple[int, int, int]:
    """``(width, height, distinct colours, counted up to limit)`` of an 8-bit RGB(A) PNG, decoded
    here (zlib and the five scanline filters), so a blank screenshot is told from a drawn one."""
    import struct
    import zlib

    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks)), width * bpp
    previous, seen = bytearray(stride), set()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        if len(seen) < limit:
            seen.update(bytes(line[i:i + bpp]) for i in range(0, stride, bpp * 7))
        previous = line
    return width, height, min(len(seen), limit)


def main(argv: list[str] | None = None) -> int:
    """``python tests/browser.py PAGE.html OUT.png [--width W] [--height H]``: a screenshot of a page
    (how ``docs/report.png`` is made); console errors, if any, on stderr and exit 1."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(description=main.__doc__.split(":")[0])
    ap.add_argument("page", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args(argv)
    binary = chromium_binary()
    if binary is None:
        print("no chromium binary on PATH", file=sys.stderr)
        return 2
    with Browser(binary, width=args.width, height=args.height) as browser:
        page = browser.new_page()
        page.open(args.page.resolve().as_uri())
        page.screenshot(args.out)
        errors = page.errors()
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
