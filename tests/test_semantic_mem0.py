"""Mem0Client against a small mem0-shaped HTTP server on 127.0.0.1 (an in-memory dict).

The server speaks the self-hosted mem0 server's endpoints (``POST /memories``,
``POST /search``, ``GET /memories``, ``GET /memories/{id}``,
``GET /memories/{id}/history``, ``DELETE /memories/{id}``, ``DELETE /memories``),
answers ``{"results": [...]}`` (or bare lists when told to), records every
request, and can be told to fail, stall or answer garbage.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from agentmem.errors import (
    AgentMemError,
    ConfigurationError,
    InvalidArgumentError,
    MemoryNotFoundError,
    RemoteMemoryError,
)
from agentmem.protocols import MemoryClient
from agentmem.semantic import Mem0Client

KEY = "sk-proj-4f9Qx2LmZ8rT1vB7nK3pW6yH0cJ5dA"
SCOPE_KEYS = ("user_id", "agent_id", "run_id")


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest forbids every IP connection; these tests may reach 127.0.0.1, nothing else."""
    guarded = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family == socket.AF_INET and address[0] == "127.0.0.1":
            return _REAL_CONNECT(self, address)
        return guarded(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


_REAL_CONNECT = socket.socket.connect


class FakeMem0:
    """The server's state and knobs."""

    def __init__(self) -> None:
        self.memories: dict[str, dict[str, Any]] = {}
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.fail: list[tuple[int, Any]] = []  # (status, body) answered before serving normally
        self.delay = 0.0
        self.bare = False
        self.garbage = False
        self.api_key: str | None = None
        self.lock = threading.Lock()

    def _scoped(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            m
            for m in self.memories.values()
            if all(params.get(k) is None or m.get(k) == params[k] for k in SCOPE_KEYS)
        ]

    def _wrap(self, items: Any) -> Any:
        return items if self.bare else {"results": items}

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        scope = {k: query.get(k) for k in SCOPE_KEYS}
        if method == "POST" and path == "/memories":
            if not any(body.get(k) for k in SCOPE_KEYS):
                return 400, {
                    "detail": "At least one identifier (user_id, agent_id, run_id) is required."
                }
            out = []
            for message in body["messages"]:
                memory_id = uuid.uuid4().hex
                now = f"2024-01-01T00:00:{len(self.memories):02d}Z"
                record = {
                    "id": memory_id,
                    "memory": message["content"],
                    **{k: body.get(k) for k in SCOPE_KEYS if body.get(k)},
                    "metadata": body.get("metadata") or {},
                    "created_at": now,
                    "updated_at": now,
                }
                self.memories[memory_id] = record
                self.history[memory_id] = [
                    {
                        "memory_id": memory_id,
                        "event": "ADD",
                        "old_memory": None,
                        "new_memory": message["content"],
                        "created_at": now,
                    }
                ]
                out.append({"id": memory_id, "memory": message["content"], "event": "ADD"})
            return 200, self._wrap(out)
        if method == "POST" and path == "/search":
            words = set(body["query"].lower().split())
            hits = []
            for m in self._scoped(body):
                held = words & set(m["memory"].lower().split())
                if held:
                    hits.append({**m, "score": len(held) / len(words)})
            hits.sort(key=lambda m: -m["score"])
            return 200, self._wrap(hits)  # ignores limit and threshold, like some versions
        if method == "GET" and path == "/memories":
            if not any(scope.values()):
                return 400, {"detail": "At least one identifier is required."}
            return 200, self._wrap(self._scoped(scope))
        if method == "DELETE" and path == "/memories":
            if not any(scope.values()):
                return 400, {"detail": "At least one identifier is required."}
            for m in self._scoped(scope):
                del self.memories[m["id"]]
            return 200, {"message": "All relevant memories deleted"}
        if path.startswith("/memories/"):
            rest = path[len("/memories/") :]
            if method == "GET" and rest.endswith("/history"):
                return 200, self.history.get(rest[: -len("/history")], [])
            if method == "GET":
                return 200, self.memories.get(rest)
            if method == "DELETE":
                if rest not in self.memories:
                    return 500, {"detail": "'NoneType' object has no attribute 'payload'"}
                del self.memories[rest]
                return 200, {"message": "Memory deleted successfully"}
        return 404, {"detail": "Not Found"}


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _serve(self, method: str) -> None:
        state = self.server.state
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with state.lock:
            state.requests.append((method, self.path, body))
            if state.api_key is not None and self.headers.get("X-API-Key") != state.api_key:
                status, answer = 401, {"detail": "Invalid API key"}
            elif state.fail:
                status, answer = state.fail.pop(0)
            else:
                status, answer = None, None
            delay, garbage = state.delay, state.garbage
        if delay:
            time.sleep(delay)
        if status is None:
            with state.lock:
                status, answer = state.handle(method, parts.path, query, body)
        data = b"<html>oops</html>" if garbage else json.dumps(answer).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if garbage else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = FakeMem0()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def client_for(server: Server, **kwargs: Any) -> Mem0Client:
    host, port = server.server_address[:2]
    kwargs.setdefault("sleep", Sleeps())
    return Mem0Client(f"http://{host}:{port}/", **kwargs)


def posted(server: Server, path: str) -> list[Any]:
    return [body for method, p, body in server.state.requests if method == "POST" and p == path]


# --------------------------------------------------------------------------- round trip


def test_round_trip(server: Server) -> None:
    client = client_for(server)
    assert isinstance(client, MemoryClient)
    events = client.add("I prefer tabs over spaces", user_id="martin", metadata={"topic": "code"})
    assert [(e["event"], e["memory"]) for e in events] == [("ADD", "I prefer tabs over spaces")]
    memory_id = events[0]["id"]
    [record] = client.get_all(user_id="martin")
    assert (record.id, record.memory, record.user_id, dict(record.metadata)) == (
        memory_id,
        "I prefer tabs over spaces",
        "martin",
        {"topic": "code"},
    )
    [hit] = client.search("tabs please", user_id="martin")
    assert hit.id == memory_id and hit.score == 0.5
    assert client.get(memory_id).memory == "I prefer tabs over spaces"
    assert [(h.event, h.new_memory) for h in client.history(memory_id)] == [
        ("ADD", "I prefer tabs over spaces")
    ]
    client.delete(memory_id)
    assert client.get_all(user_id="martin") == []
    with pytest.raises(MemoryNotFoundError) as info:
        client.delete(memory_id)
    assert isinstance(info.value, KeyError)
    assert [m for m, p, _ in server.state.requests[-1:]] == ["GET"]  # no DELETE of an unknown id
    assert posted(server, "/search") == [{"query": "tabs please", "user_id": "martin", "limit": 5}]


def test_scoping_and_delete_all(server: Server) -> None:
    client = client_for(server)
    client.add("alpha plain", user_id="u")
    client.add("alpha agent a", user_id="u", agent_id="a")
    client.add("alpha agent b", user_id="u", agent_id="b", run_id="r")
    client.add("alpha other user", user_id="v")
    assert {r.memory for r in client.get_all(user_id="u")} == {
        "alpha plain",
        "alpha agent a",
        "alpha agent b",
    }
    assert {r.memory for r in client.search("alpha", user_id="u", agent_id="a")} == {
        "alpha agent a"
    }
    assert client.delete_all(user_id="u", agent_id="a") == 1
    assert {r.memory for r in client.get_all(user_id="u")} == {"alpha plain", "alpha agent b"}
    assert client.delete_all(user_id="u") == 2
    assert [r.memory for r in client.get_all(user_id="v")] == ["alpha other user"]
    deletes = [p for m, p, _ in server.state.requests if m == "DELETE"]
    assert deletes == ["/memories?user_id=u&agent_id=a", "/memories?user_id=u"]


def test_only_user_words_are_sent_scrubbed(server: Server) -> None:
    client = client_for(server)
    client.add(
        [
            {"role": "system", "content": "system prompt"},
            {"role": "user", "content": f"my key is {KEY}"},
            {"role": "assistant", "content": "assistant words"},
            {"role": "user", "content": [{"type": "text", "text": "I like tea"}]},
            {"role": "user", "content": "recalled", "system_injected": True},
        ],
        user_id="u",
        infer=False,
    )
    [body] = posted(server, "/memories")
    assert [m["role"] for m in body["messages"]] == ["user", "user"]
    assert body["messages"][1]["content"] == "I like tea"
    assert KEY not in json.dumps(body) and "[REDACTED" in body["messages"][0]["content"]
    assert body["infer"] is False and body["user_id"] == "u" and "agent_id" not in body
    assert client.add([{"role": "assistant", "content": "only me"}], user_id="u") == []
    assert len(posted(server, "/memories")) == 1  # nothing to send, no request


def test_limit_threshold_and_filters_are_applied_client_side(server: Server) -> None:
    client = client_for(server)
    client.add("red green blue", user_id="u", metadata={"k": 1})
    client.add("red green", user_id="u", metadata={"k": 2})
    client.add("red", user_id="u", metadata={"k": True})
    hits = client.search("red green blue", user_id="u", limit=2)
    assert [h.memory for h in hits] == ["red green blue", "red green"]
    hits = client.search("red green blue", user_id="u", threshold=0.5)
    assert [h.memory for h in hits] == ["red green blue", "red green"]
    assert posted(server, "/search")[-1]["threshold"] == 0.5
    assert [h.memory for h in client.search("red", user_id="u", filters={"k": True})] == ["red"]
    assert [r.memory for r in client.get_all(user_id="u", filters={"k": 2})] == ["red green"]
    assert len(client.get_all(user_id="u", limit=1)) == 1


def test_bare_list_answers_are_read(server: Server) -> None:
    server.state.bare = True
    client = client_for(server)
    [event] = client.add("bare answers", user_id="u")
    assert event["event"] == "ADD"
    assert [r.memory for r in client.get_all(user_id="u")] == ["bare answers"]
    assert [r.memory for r in client.search("bare", user_id="u")] == ["bare answers"]


def test_the_api_key_is_sent(server: Server) -> None:
    server.state.api_key = "secret-key"
    with pytest.raises(RemoteMemoryError) as info:
        client_for(server).get_all(user_id="u")
    assert info.value.status == 401 and info.value.detail == "Invalid API key"
    assert client_for(server, api_key="secret-key").get_all(user_id="u") == []


# --------------------------------------------------------------------------- failures


def test_a_5xx_is_retried_with_backoff(server: Server) -> None:
    server.state.fail = [(503, {"detail": "busy"}), (500, {"detail": "busy"})]
    sleeps = Sleeps()
    client = client_for(server, sleep=sleeps, retries=2, backoff=0.2)
    [event] = client.add("persistent", user_id="u")
    assert event["event"] == "ADD"
    assert len(posted(server, "/memories")) == 3
    assert sleeps.waits == [0.2, 0.4]
    assert [r.memory for r in client.get_all(user_id="u")] == ["persistent"]


def test_a_5xx_after_the_retries_is_a_remote_error(server: Server) -> None:
    server.state.fail = [(500, {"detail": "database is down"})] * 3
    client = client_for(server, retries=2)
    with pytest.raises(RemoteMemoryError, match="database is down") as info:
        client.get_all(user_id="u")
    assert (info.value.status, info.value.kind) == (500, "http")
    assert "3 attempts" in str(info.value)
    assert len(server.state.requests) == 3


def test_a_4xx_is_not_retried(server: Server) -> None:
    server.state.fail = [(400, {"detail": "query is required"})]
    sleeps = Sleeps()
    client = client_for(server, sleep=sleeps)
    with pytest.raises(RemoteMemoryError) as info:
        client.search("x", user_id="u")
    assert (info.value.status, info.value.detail) == (400, "query is required")
    assert "query is required" in str(info.value)
    assert len(server.state.requests) == 1 and sleeps.waits == []
    assert isinstance(info.value, AgentMemError)


def test_a_timeout_is_reported_and_not_retried(server: Server) -> None:
    server.state.delay = 1.5
    client = client_for(server, timeout=0.2, retries=3)
    started = time.monotonic()
    with pytest.raises(RemoteMemoryError) as info:
        client.add("slow", user_id="u")
    assert time.monotonic() - started < 1.2
    assert (info.value.kind, info.value.status) == ("timeout", None)
    assert len(server.state.requests) == 1


def test_an_unreachable_server_is_retried_then_reported() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    sleeps = Sleeps()
    client = Mem0Client(f"http://127.0.0.1:{port}", retries=2, backoff=0.1, sleep=sleeps)
    with pytest.raises(RemoteMemoryError) as info:
        client.get_all(user_id="u")
    assert (info.value.kind, info.value.status) == ("unreachable", None)
    assert sleeps.waits == [0.1, 0.2]
    assert not isinstance(info.value, OSError)


def test_a_non_json_answer_is_a_bad_response(server: Server) -> None:
    server.state.garbage = True
    with pytest.raises(RemoteMemoryError, match="not JSON") as info:
        client_for(server).get_all(user_id="u")
    assert (info.value.kind, info.value.status) == ("bad_response", 200)


def test_an_answer_of_the_wrong_shape_is_a_bad_response(server: Server) -> None:
    server.state.fail = [(200, {"unexpected": True})]
    with pytest.raises(RemoteMemoryError, match="expected a list") as info:
        client_for(server).get_all(user_id="u")
    assert info.value.kind == "bad_response"
    server.state.fail = [(200, {"results": [{"memory": "no id"}]})]
    with pytest.raises(RemoteMemoryError, match="without an id"):
        client_for(server).get_all(user_id="u")


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "ftp://example"}, "base_url"),
        ({"base_url": "localhost:8888"}, "base_url"),
        ({"base_url": "http://x", "timeout": 0}, "timeout"),
        ({"base_url": "http://x", "retries": -1}, "retries"),
        ({"base_url": "http://x", "backoff": float("nan")}, "backoff"),
        ({"base_url": "http://x", "api_key": ""}, "api_key"),
    ],
)
def test_bad_configuration_is_named(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        Mem0Client(**kwargs)


def test_bad_arguments_fail_before_any_request(server: Server) -> None:
    client = client_for(server)
    with pytest.raises(InvalidArgumentError, match="user_id"):
        client.delete_all(user_id="")
    with pytest.raises(InvalidArgumentError, match="limit"):
        client.search("x", user_id="u", limit=0)
    with pytest.raises(InvalidArgumentError, match="filters"):
        client.get_all(user_id="u", filters={"k": {"nested": 1}})
    with pytest.raises(InvalidArgumentError, match="messages"):
        client.add(42, user_id="u")  # type: ignore[arg-type]
    assert server.state.requests == []
