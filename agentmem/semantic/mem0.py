"""Mem0Client: the :class:`~agentmem.protocols.MemoryClient` calls against a mem0 server.

Speaks the REST API of mem0's self-hosted server (``server/main.py`` in
mem0ai/mem0; no ``/v1/`` prefix, unlike the hosted platform):

==============================  ===========================================
call                            request
==============================  ===========================================
``add``                         ``POST /memories`` ``{"messages": [...], "user_id", "agent_id",
                                "run_id", "metadata", "infer"}``
``search``                      ``POST /search`` ``{"query", "user_id", "agent_id", "run_id",
                                "filters", "limit", "threshold"}``
``get_all``                     ``GET /memories?user_id=...&agent_id=...&run_id=...``
``get``                         ``GET /memories/{id}``
``history``                     ``GET /memories/{id}/history``
``delete``                      ``GET /memories/{id}`` (is it there?), then
                                ``DELETE /memories/{id}``
``delete_all``                  ``GET /memories?...`` (to count), then ``DELETE /memories?...``
==============================  ===========================================

Absent ids are left out of bodies and query strings. Answers are read
whether they come as ``{"results": [...]}`` (mem0 1.x) or as a bare list
(earlier versions); each item becomes a :class:`~agentmem.protocols.MemoryRecord`
(``memory``, or ``data`` in old payloads, is the text). Servers that ignore
``limit``, ``threshold``, ``filters`` or scopes on ``get_all`` are covered:
the client applies all of them again to what comes back.

Only user-role content is sent (:func:`~agentmem.semantic._common.user_texts`),
secret-scrubbed like everything agentmem writes to durable memory. With an
``api_key`` every request carries an ``X-API-Key`` header (the server's
per-user key scheme).

Transport is :mod:`urllib.request` alone (no third-party HTTP client).
Each attempt has ``timeout`` seconds. A 5xx answer or a failed connection
is retried ``retries`` times, waiting ``backoff * 2**n`` seconds; a 4xx is
never retried, and neither is a timeout (the server may have acted on the
request; repeating an ``add`` could store twice). Every failure is a
:class:`~agentmem.errors.RemoteMemoryError` with ``.status`` and ``.kind``
(an unknown id is :class:`~agentmem.errors.MemoryNotFoundError`), never a
raw ``urllib`` or ``socket`` error.
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from agentmem.errors import (
    ConfigurationError,
    MemoryNotFoundError,
    RemoteMemoryError,
)
from agentmem.protocols import MemoryRecord
from agentmem.scrub import Scrubber, refuse_secret_names, resolve_scrubber, scrub_json
from agentmem.semantic._common import (
    HistoryEntry,
    Scope,
    check_filters,
    check_infer,
    check_limit,
    check_memory_id,
    check_metadata,
    check_query,
    check_scope,
    check_threshold,
    matches_filters,
    user_texts,
)

__all__ = ["Mem0Client"]

DETAIL_CHARS: Final = 500
"""How much of a server's error message an error repeats."""

_JSON: Final = "application/json"


def _positive_number(value: object, name: str, *, zero: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        raise ConfigurationError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _scope_params(scope: Scope) -> dict[str, str]:
    return {k: v for k, v in scope._asdict().items() if v is not None}


class Mem0Client:
    """A mem0 server's memories through :class:`~agentmem.protocols.MemoryClient`.

    Args:
        base_url: The server, such as ``"http://localhost:8888"`` (``http``
            or ``https``; a trailing slash is ignored).
        api_key: Sent as ``X-API-Key`` when given.
        timeout: Seconds each attempt may take.
        retries: Further attempts after a 5xx answer or a failed connection.
        backoff: Seconds before the first retry, doubled for each next one.
        scrubber: Applied to the user's words before they are sent:
            ``True`` (default, :func:`~agentmem.scrub.scrub_secrets`),
            ``False``, or a callable ``(text) -> text``.
        sleep: How to wait between retries (tests pass a recorder).

    Raises:
        ConfigurationError: a bad argument (named).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.2,
        scrubber: bool | Scrubber = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(base_url, str):
            raise ConfigurationError(f"base_url must be a string, got {type(base_url).__name__}")
        parts = urllib.parse.urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(
                f"base_url must be an http(s) URL such as 'http://localhost:8888', got {base_url!r}"
            )
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ConfigurationError("api_key must be a non-empty string or None")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"retries must be an integer >= 0, got {retries!r}")
        if not (isinstance(scrubber, bool) or callable(scrubber)):
            raise ConfigurationError(
                f"scrubber must be True, False or a callable, got {type(scrubber).__name__}"
            )
        if not callable(sleep):
            raise ConfigurationError("sleep must be callable")
        self.base_url = base_url.strip().rstrip("/")
        self.timeout = _positive_number(timeout, "timeout")
        self.retries = retries
        self.backoff = _positive_number(backoff, "backoff", zero=True)
        self._api_key = api_key
        self._scrub = resolve_scrubber(scrubber)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"Mem0Client({self.base_url!r})"

    # ------------------------------------------------------------------ transport

    def _url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        url = self.base_url + path
        return f"{url}?{urllib.parse.urlencode(dict(query))}" if query else url

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> Any:
        """Send one request (with retries) and return the decoded JSON answer."""
        url = self._url(path, query)
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Accept": _JSON}
        if data is not None:
            headers["Content-Type"] = _JSON
        if self._api_key is not None:
            headers["X-API-Key"] = self._api_key
        what = f"{method} {url}"
        attempt = 0
        while True:
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    status = int(response.status)
                    raw = response.read()
                return _decode(raw, status, what, url)
            except urllib.error.HTTPError as exc:
                status = int(exc.code)
                detail = _detail(exc)
                if 500 <= status < 600 and attempt < self.retries:
                    self._wait(attempt)
                    attempt += 1
                    continue
                tried = f" after {attempt + 1} attempts" if attempt else ""
                raise RemoteMemoryError(
                    f"{what} failed with HTTP {status}{tried}" + (f": {detail}" if detail else ""),
                    kind="http",
                    status=status,
                    detail=detail,
                    url=url,
                ) from None
            except TimeoutError as exc:
                raise _timeout(what, url, self.timeout) from exc
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    raise _timeout(what, url, self.timeout) from exc
                failure: Exception = exc
            except (http.client.HTTPException, OSError) as exc:
                failure = exc
            if attempt >= self.retries:
                reason = getattr(failure, "reason", failure)
                raise RemoteMemoryError(
                    f"{what}: the memory server is unreachable after {attempt + 1} attempts "
                    f"({reason})",
                    kind="unreachable",
                    url=url,
                ) from failure
            self._wait(attempt)
            attempt += 1

    def _wait(self, attempt: int) -> None:
        if self.backoff:
            self._sleep(self.backoff * 2**attempt)

    # ------------------------------------------------------------------ answers

    def _on_memory(self, method: str, key: str, suffix: str = "") -> tuple[str, Any]:
        """``(path, answer)`` of ``method /memories/{key}{suffix}``; a 404 is
        :class:`~agentmem.errors.MemoryNotFoundError`."""
        path = "/memories/" + urllib.parse.quote(key, safe="") + suffix
        try:
            return path, self._request(method, path)
        except RemoteMemoryError as exc:
            if exc.status == 404:
                raise MemoryNotFoundError(key) from exc
            raise

    def _records(self, answer: Any, what: str) -> list[MemoryRecord]:
        return [_record(item, what) for item in _results(answer, what)]

    # ------------------------------------------------------------------ MemoryClient

    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
    ) -> list[dict[str, Any]]:
        """Send the user's words to ``POST /memories``; returns the server's events.

        Nothing is sent when ``messages`` holds no user words.

        Raises:
            InvalidArgumentError: a bad argument (named).
            RemoteMemoryError: the server failed, refused or did not answer.
        """
        scope = check_scope(user_id, agent_id, run_id)
        refuse_secret_names(self._scrub, scope._asdict())
        check_infer(infer)
        meta = scrub_json(self._scrub, check_metadata(metadata), "metadata")
        texts = user_texts(messages)
        if self._scrub is not None:
            texts = [self._scrub(text) for text in texts]
        if not texts:
            return []
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": text} for text in texts],
            **_scope_params(scope),
            "infer": infer,
        }
        if meta:
            body["metadata"] = meta
        answer = self._request("POST", "/memories", body=body)
        events = []
        for item in _results(answer, "POST /memories"):
            if not isinstance(item, Mapping):
                raise _bad(f"POST /memories answered with a {type(item).__name__} item", None)
            event = dict(item)
            event.setdefault("memory", event.get("data", ""))
            event.setdefault("event", "ADD")
            events.append(event)
        return events

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
    ) -> list[MemoryRecord]:
        """``POST /search``; ``limit``, ``filters`` and ``threshold`` are applied again here.

        A record without a score is left out when a ``threshold`` is given.

        Raises:
            InvalidArgumentError: a bad argument (named).
            RemoteMemoryError: the server failed, refused or did not answer.
        """
        check_query(query)
        scope = check_scope(user_id, agent_id, run_id)
        count = check_limit(limit)
        wanted = check_filters(filters)
        floor = check_threshold(threshold)
        body: dict[str, Any] = {"query": query, **_scope_params(scope), "limit": count}
        if wanted:
            body["filters"] = wanted
        if floor is not None:
            body["threshold"] = floor
        records = self._records(self._request("POST", "/search", body=body), "POST /search")
        kept = [
            r
            for r in records
            if _in_scope(r, scope)
            and matches_filters(r.metadata, wanted)
            and (floor is None or (r.score is not None and r.score >= floor))
        ]
        return kept[:count]

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
    ) -> list[MemoryRecord]:
        """``GET /memories``; most recently updated first, ``filters`` and ``limit`` applied here.

        Raises:
            InvalidArgumentError: a bad argument (named).
            RemoteMemoryError: the server failed, refused or did not answer.
        """
        scope = check_scope(user_id, agent_id, run_id)
        count = check_limit(limit)
        wanted = check_filters(filters)
        records = self._list(scope)
        return [r for r in records if matches_filters(r.metadata, wanted)][:count]

    def _list(self, scope: Scope) -> list[MemoryRecord]:
        answer = self._request("GET", "/memories", query=_scope_params(scope))
        records = [r for r in self._records(answer, "GET /memories") if _in_scope(r, scope)]
        # Newest first; records without timestamps keep the server's order (a stable sort).
        records.sort(key=lambda r: r.updated_at or r.created_at or "", reverse=True)
        return records

    def get(self, memory_id: str) -> MemoryRecord:
        """``GET /memories/{id}``.

        Raises:
            MemoryNotFoundError: the server has no memory with this id.
            RemoteMemoryError: the server failed, refused or did not answer.
        """
        key = check_memory_id(memory_id)
        path, answer = self._on_memory("GET", key)
        if answer is None or answer == {}:
            raise MemoryNotFoundError(key)
        return _record(answer, f"GET {path}")

    def history(self, memory_id: str) -> list[HistoryEntry]:
        """``GET /memories/{id}/history``, oldest first.

        Raises:
            MemoryNotFoundError: the server answered 404.
            RemoteMemoryError: the server failed, refused or did not answer.
        """
        key = check_memory_id(memory_id)
        path, answer = self._on_memory("GET", key, "/history")
        out = []
        for item in _results(answer, f"GET {path}"):
            if not isinstance(item, Mapping):
                raise _bad(f"GET {path} answered with a {type(item).__name__} item", None)
            out.append(
                HistoryEntry(
                    memory_id=str(item.get("memory_id", key)),
                    event=str(item.get("event", "")),
                    old_memory=_opt_str(item.get("old_memory")),
                    new_memory=_opt_str(item.get("new_memory")),
                    at=str(item.get("created_at") or item.get("updated_at") or ""),
                )
            )
        return out

    def delete(self, memory_id: str) -> None:
        """Forget one memory: ``GET`` it (mem0 answers an unknown id with ``null``), then delete.

        Raises:
            MemoryNotFoundError: the server has no memory with this id.
            RemoteMemoryError: the server failed, refused or did not answer.
        """
        key = check_memory_id(memory_id)
        self.get(key)
        self._on_memory("DELETE", key)

    def delete_all(
        self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        """``DELETE /memories?...`` for the scope; returns how many it held just before.

        Raises:
            InvalidArgumentError: ``user_id`` missing or empty (a scope is required).
            RemoteMemoryError: the server failed, refused or did not answer.
        """
        scope = check_scope(user_id, agent_id, run_id)
        count = len(self._list(scope))
        self._request("DELETE", "/memories", query=_scope_params(scope))
        return count


# --------------------------------------------------------------------------- helpers


def _decode(raw: bytes, status: int, what: str, url: str) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        text = raw[:DETAIL_CHARS].decode("utf-8", "replace")
        raise RemoteMemoryError(
            f"{what} answered HTTP {status} with a body that is not JSON: {text!r}",
            kind="bad_response",
            status=status,
            url=url,
        ) from exc


def _detail(exc: urllib.error.HTTPError) -> str | None:
    """The server's message from an error answer (FastAPI's ``{"detail": ...}``), else its text."""
    try:
        raw = exc.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        exc.close()
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return raw[:DETAIL_CHARS].decode("utf-8", "replace").strip() or None
    if isinstance(data, Mapping):
        for key in ("detail", "message", "error"):
            if key in data:
                value = data[key]
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                return text[:DETAIL_CHARS]
    return json.dumps(data, ensure_ascii=False)[:DETAIL_CHARS]


def _timeout(what: str, url: str, seconds: float) -> RemoteMemoryError:
    return RemoteMemoryError(
        f"{what}: no answer from the memory server within {seconds:g} s (not retried: the "
        "server may still act on the request)",
        kind="timeout",
        url=url,
    )


def _bad(message: str, status: int | None) -> RemoteMemoryError:
    return RemoteMemoryError(message, kind="bad_response", status=status)


def _results(answer: Any, what: str) -> list[Any]:
    """The item list of an answer: ``{"results": [...]}`` or a bare list."""
    if isinstance(answer, Mapping) and isinstance(answer.get("results"), list):
        return list(answer["results"])
    if isinstance(answer, list):
        return answer
    raise _bad(
        f'{what} answered {type(answer).__name__}, expected a list or {{"results": [...]}}',
        None,
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _record(item: Any, what: str) -> MemoryRecord:
    if not isinstance(item, Mapping) or item.get("id") in (None, ""):
        raise _bad(f"{what} answered an item without an id: {str(item)[:DETAIL_CHARS]}", None)
    score = item.get("score")
    metadata = item.get("metadata")
    return MemoryRecord(
        id=str(item["id"]),
        memory=str(item.get("memory", item.get("data")) or ""),
        user_id=_opt_str(item.get("user_id")),
        agent_id=_opt_str(item.get("agent_id")),
        run_id=_opt_str(item.get("run_id")),
        score=float(score)
        if isinstance(score, int | float) and not isinstance(score, bool)
        else None,
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        created_at=_opt_str(item.get("created_at")),
        updated_at=_opt_str(item.get("updated_at")),
    )


def _in_scope(record: MemoryRecord, scope: Scope) -> bool:
    """Drop what a server returned outside the scope asked for (an id it left out is trusted)."""
    return all(
        wanted is None or got is None or got == wanted
        for wanted, got in (
            (scope.user_id, record.user_id),
            (scope.agent_id, record.agent_id),
            (scope.run_id, record.run_id),
        )
    )
