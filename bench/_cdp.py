"""Drive a headless Chromium over the DevTools protocol with the standard library only.

For the export's browser tests (``tests/test_export_browser.py``) and its
benchmark (``bench/bench_export.py``). :class:`Browser` starts ``chromium
--headless`` with a throwaway profile and remote debugging on a free port,
and talks to its page over a minimal WebSocket client (RFC 6455 text
frames, masked as a client must); :meth:`Browser.load` opens a file and
returns what happened while it loaded: console messages, uncaught
exceptions, browser log entries (CSP violations land there), network
requests and JavaScript dialogs.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Browser", "Loaded", "find_chromium"]

_LISTENING = re.compile(r"DevTools listening on (ws://[^\s]+)")


def find_chromium() -> str | None:
    """The Chromium binary on ``PATH`` (``chromium``, ``chromium-browser``, ``google-chrome``)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _WebSocket:
    """A blocking WebSocket client: enough for the DevTools protocol (text frames, ping, close)."""

    def __init__(self, url: str, timeout: float) -> None:
        match = re.fullmatch(r"ws://([^/:]+):(\d+)(/.*)", url)
        if match is None:
            raise ValueError(f"not a ws:// URL: {url}")
        host, port, path = match.group(1), int(match.group(2)), match.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        self.reader = self.sock.makefile("rb")
        status = self.reader.readline()
        if b" 101 " not in status:
            raise ConnectionError(f"WebSocket handshake refused: {status!r}")
        while self.reader.readline() not in (b"\r\n", b""):
            pass

    def send(self, text: str) -> None:
        payload = text.encode()
        n = len(payload)
        header = bytearray([0x81])
        if n < 126:
            header.append(0x80 | n)
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes(header) + mask + masked)

    def _exactly(self, n: int) -> bytes:
        data = self.reader.read(n)
        if data is None or len(data) != n:
            raise ConnectionError("the browser closed the DevTools connection")
        return data

    def receive(self) -> str:
        parts: list[bytes] = []
        while True:
            first, second = self._exactly(2)
            opcode, n = first & 0x0F, second & 0x7F
            if n == 126:
                (n,) = struct.unpack(">H", self._exactly(2))
            elif n == 127:
                (n,) = struct.unpack(">Q", self._exactly(8))
            mask = self._exactly(4) if second & 0x80 else b""
            payload = self._exactly(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("the browser closed the DevTools connection")
            if opcode == 0x9:  # ping: answer with a masked pong carrying the same payload
                pong = os.urandom(4)
                body = bytes(b ^ pong[i % 4] for i, b in enumerate(payload))
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + pong + body)
                continue
            if opcode in (0x1, 0x2, 0x0):
                parts.append(payload)
                if first & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


@dataclass
class Loaded:
    """What happened while a page loaded, and figures measured in it."""

    url: str
    console: list[dict[str, Any]] = field(default_factory=list)
    """``Runtime.consoleAPICalled`` events."""
    exceptions: list[dict[str, Any]] = field(default_factory=list)
    """``Runtime.exceptionThrown`` events."""
    log: list[dict[str, Any]] = field(default_factory=list)
    """``Log.entryAdded`` entries (CSP violations, blocked loads...)."""
    requests: list[str] = field(default_factory=list)
    """URLs of every request the page made (``Network.requestWillBeSent``), itself included."""
    dialogs: list[dict[str, Any]] = field(default_factory=list)
    """``Page.javascriptDialogOpening`` events (an ``alert()`` would be one)."""
    wall_seconds: float = 0.0
    """From the navigation command to the load event, measured outside the browser."""

    def problems(self) -> list[str]:
        """Every console message, exception, log warning/error and dialog, as text."""
        out = [f"console.{c.get('type')}: {c.get('args')}" for c in self.console]
        out += [f"exception: {e.get('exceptionDetails')}" for e in self.exceptions]
        out += [
            f"log {e.get('level')} ({e.get('source')}): {e.get('text')}"
            for e in self.log
            if e.get("level") in ("warning", "error")
        ]
        out += [f"dialog: {d.get('message')}" for d in self.dialogs]
        return out

    def fetched(self) -> list[str]:
        """Requests other than the page itself and inline ``data:`` URLs."""
        return [u for u in self.requests if u != self.url and not u.startswith("data:")]


class Browser:
    """A headless Chromium with one page, driven over the DevTools protocol; close it."""

    def __init__(self, binary: str, *, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="agentmem-chromium-")
        args = [
            binary,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={self._profile.name}",
            "--window-size=1280,900",
            "about:blank",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self._process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.stderr: list[str] = []
        found = threading.Event()
        endpoint: list[str] = []

        def drain() -> None:
            assert self._process.stderr is not None
            for raw in self._process.stderr:
                line = raw.decode(errors="replace")
                self.stderr.append(line)
                match = _LISTENING.search(line)
                if match and not endpoint:
                    endpoint.append(match.group(1))
                    found.set()
            found.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        if not found.wait(timeout) or not endpoint:
            self.close()
            raise RuntimeError("chromium did not start: " + "".join(self.stderr[-20:]))
        port = int(endpoint[0].split(":")[2].split("/")[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = _WebSocket(page["webSocketDebuggerUrl"], timeout)
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        ident = self._next_id
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        while True:
            message = json.loads(self._ws.receive())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self._events.append(message)

    def _wait_for(self, event: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e["method"] == event for e in self._events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event} within {self.timeout} s")
            message = json.loads(self._ws.receive())
            if "method" in message:
                self._events.append(message)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluation failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def load(self, path: Path) -> Loaded:
        """Open ``path`` and wait for its load event; what happened meanwhile."""
        self._events.clear()
        self.call("Page.navigate", {"url": "about:blank"})
        self._wait_for("Page.loadEventFired")  # the previous page is gone, and its events
        self._events.clear()
        url = path.resolve().as_uri()
        started = time.perf_counter()
        self.call("Page.navigate", {"url": url})
        self._wait_for("Page.loadEventFired")
        loaded = Loaded(url=url, wall_seconds=time.perf_counter() - started)
        # Let what the load started settle (late console messages, paint), then collect.
        self.evaluate("new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))")
        for event in self._events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                loaded.console.append(params)
            elif method == "Runtime.exceptionThrown":
                loaded.exceptions.append(params)
            elif method == "Log.entryAdded":
                loaded.log.append(params.get("entry", {}))
            elif method == "Network.requestWillBeSent":
                loaded.requests.append(params.get("request", {}).get("url", ""))
            elif method == "Page.javascriptDialogOpening":
                loaded.dialogs.append(params)
                self.call("Page.handleJavaScriptDialog", {"accept": True})
        return loaded

    def timings(self) -> dict[str, float]:
        """The loaded page's timings in ms since navigation start, and a full layout's cost.

        ``dom_content_loaded``, ``load`` (the load event's end), ``first_paint``
        and ``first_contentful_paint`` (``0`` when the browser reported none),
        ``layout_ms``: forcing a layout of the whole page once more, then
        scrolling to its end and waiting two frames.
        """
        value = self.evaluate(
            """(async () => {
              const nav = performance.getEntriesByType('navigation')[0];
              const paint = name => {
                const e = performance.getEntriesByName(name)[0];
                return e ? e.startTime : 0;
              };
              const t0 = performance.now();
              document.body.getBoundingClientRect();
              window.scrollTo(0, document.body.scrollHeight);
              await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
              return {
                dom_content_loaded: nav.domContentLoadedEventEnd,
                load: nav.loadEventEnd,
                first_paint: paint('first-paint'),
                first_contentful_paint: paint('first-contentful-paint'),
                layout_ms: performance.now() - t0,
              };
            })()"""
        )
        assert isinstance(value, dict)
        return {str(k): float(v) for k, v in value.items()}

    def close(self) -> None:
        """Stop the browser and remove its profile (idempotent)."""
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
            self._ws = None
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._drain.join(5)
        if self._process.stderr is not None:
            self._process.stderr.close()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
