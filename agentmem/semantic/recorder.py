"""Recorder: hands the user's words to a memory client off the agent's turn.

Remembering can be slow (an LLM extracts facts, a remote mem0 server answers
over HTTP), and the agent's turn must not wait for it. A :class:`Recorder`
owns a bounded :class:`queue.Queue` and exactly one daemon worker thread that
calls ``client.add(...)`` for each queued item, in order.

Guarantees:

* :meth:`Recorder.record` never blocks: it puts without waiting. When the
  queue is full (the client is slower than the conversation), the item is
  dropped, a warning goes to the ``agentmem.semantic`` logger and
  :attr:`Recorder.dropped` counts it. Backpressure never reaches the turn.
* A client error is logged with its context (scope and size, never the
  user's words) and counted in :attr:`Recorder.failed`; the worker goes on
  with the next item. A ``KeyboardInterrupt`` (or any other
  ``BaseException``) in the worker is logged as an error, kept in
  :attr:`Recorder.worker_error`, and stops the worker; what is still queued
  is reported as left by :meth:`Recorder.close`.
* :meth:`Recorder.flush` waits, at most ``timeout`` seconds, until every
  queued item was handed to the client.
* :meth:`Recorder.close` flushes within its bound (``flush_timeout`` by
  default), stops the worker and returns a :class:`CloseReport` of what was
  left unflushed (also kept as :attr:`Recorder.close_report`). It is
  idempotent and never waits longer than its bound, even when the client is
  stuck in a call: the worker is a daemon thread, so a stuck call never keeps
  the host process alive, and it stops after that call returns. Async
  hosts use ``await recorder.aclose()`` (or ``async with``), which waits
  off the event loop.
* The worker is started on the first :meth:`record`, so a recorder that
  never records owns no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from agentmem._validate import check_flag
from agentmem.errors import ConfigurationError, InvalidArgumentError
from agentmem.protocols import MemoryClient
from agentmem.semantic._common import Scope

__all__ = ["DEFAULT_FLUSH_TIMEOUT", "DEFAULT_MAXSIZE", "CloseReport", "Recorder"]

_log = logging.getLogger("agentmem.semantic")

DEFAULT_MAXSIZE = 256
DEFAULT_FLUSH_TIMEOUT = 5.0

_STOP: Any = object()
"""Sentinel that tells the worker to exit."""

Payload = str | Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class CloseReport:
    """What :meth:`Recorder.close` could not hand to the client.

    Attributes:
        flushed: True when every recorded item reached the client before close returned.
        left: Items queued (or in a call that had not returned) when close gave up;
            they are not stored.
        dropped: Items dropped over the recorder's life (queue full, or recorded after
            close or after the worker stopped).
        failed: Items the client refused with an error over the recorder's life.
    """

    flushed: bool
    left: int
    dropped: int
    failed: int


def check_timeout(name: str, value: Any) -> float:
    """``value`` as non-negative finite seconds; ConfigurationError naming ``name`` if not."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigurationError(f"{name} must be a non-negative number of seconds, got {value!r}")
    return float(value)


def check_client(client: Any) -> MemoryClient:
    """``client`` when it has the :class:`~agentmem.protocols.MemoryClient` methods."""
    if not isinstance(client, MemoryClient):
        raise ConfigurationError(
            "client must be a MemoryClient (add, search, get_all, delete, delete_all), "
            f"got {type(client).__name__}"
        )
    return client


def _scope_id(name: str, value: Any, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")
    return value


def check_owner(user_id: Any, agent_id: Any, run_id: Any) -> Scope:
    """Whose memories a recorder (or extension) works on: ``user_id`` a non-empty
    string, ``agent_id`` and ``run_id`` ``None`` or non-empty strings.

    Raises:
        ConfigurationError: naming the bad id.
    """
    return Scope(
        user_id=str(_scope_id("user_id", user_id, required=True)),
        agent_id=_scope_id("agent_id", agent_id, required=False),
        run_id=_scope_id("run_id", run_id, required=False),
    )


class Recorder:
    """A bounded queue with one background worker that calls ``client.add`` (module docstring).

    Args:
        client: The :class:`~agentmem.protocols.MemoryClient` to remember with.
        user_id: Whose memories these are; ``agent_id`` and ``run_id`` narrow the scope.
        infer: Passed to ``client.add`` (extract facts with an LLM, or store as is).
        maxsize: Items the queue holds before :meth:`record` drops (at least 1).
        flush_timeout: Default bound, in seconds, of :meth:`close`.

    Raises:
        ConfigurationError: a bad argument (the message names it).

    Attributes:
        recorded: Items the client accepted.
        dropped: Items dropped (see :class:`CloseReport`).
        failed: Items the client refused with an error.
        worker_error: The ``BaseException`` that stopped the worker, if one did.
        close_report: The :class:`CloseReport` of the first :meth:`close`, or ``None``.
    """

    def __init__(
        self,
        client: MemoryClient,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        infer: bool = True,
        maxsize: int = DEFAULT_MAXSIZE,
        flush_timeout: float = DEFAULT_FLUSH_TIMEOUT,
    ) -> None:
        self.client = check_client(client)
        self.user_id, self.agent_id, self.run_id = check_owner(user_id, agent_id, run_id)
        check_flag("infer", infer)
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ConfigurationError(f"maxsize must be an int of at least 1, got {maxsize!r}")
        self.infer = infer
        self.maxsize = maxsize
        self.flush_timeout = check_timeout("flush_timeout", flush_timeout)
        self.recorded = 0
        self.dropped = 0
        self.failed = 0
        self.worker_error: BaseException | None = None
        self.close_report: CloseReport | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize)
        self._state = threading.Condition()
        self._pending = 0  # recorded items not yet answered by the client (queued or in a call)
        self._stop = threading.Event()
        self._closing = False
        self._worker: threading.Thread | None = None

    # ------------------------------------------------------------------ recording

    def record(self, text_or_messages: Payload) -> bool:
        """Queue the user's words for the client, without waiting. Never blocks.

        Args:
            text_or_messages: The user's text, or messages (only their user-role
                content is remembered by the client).

        Returns:
            True when queued; False when dropped (queue full, recorder closed,
            worker stopped) or when there was nothing to remember (blank text).

        Raises:
            InvalidArgumentError: neither a string nor a sequence of message mappings.
        """
        payload = _check_payload(text_or_messages)
        if payload is None:
            return False
        with self._state:
            if self._closing or self.worker_error is not None:
                self.dropped += 1
                why = "closed" if self._closing else "stopped"
                _log.warning(
                    "semantic recorder for user %r is %s: an item was dropped", self.user_id, why
                )
                return False
            self._start_worker()
            self._pending += 1
            try:
                self._queue.put_nowait(payload)
            except queue.Full:
                self._pending -= 1
                self.dropped += 1
                _log.warning(
                    "semantic recorder queue for user %r is full (%d items): an item was "
                    "dropped (%d so far)",
                    self.user_id,
                    self.maxsize,
                    self.dropped,
                )
                return False
        return True

    def _start_worker(self) -> None:
        if self._worker is None:
            self._worker = threading.Thread(
                target=self._run, name=f"agentmem-recorder-{self.user_id}", daemon=True
            )
            self._worker.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP or self._stop.is_set():
                return
            try:
                self.client.add(
                    item,
                    user_id=self.user_id,
                    agent_id=self.agent_id,
                    run_id=self.run_id,
                    infer=self.infer,
                )
            except Exception as exc:
                with self._state:
                    self.failed += 1
                    self._pending -= 1
                    self._state.notify_all()
                _log.error(
                    "semantic memory: %s.add failed for user %r (agent %r, run %r, %s); "
                    "the item is lost, the recorder goes on: %r",
                    type(self.client).__name__,
                    self.user_id,
                    self.agent_id,
                    self.run_id,
                    _describe(item),
                    exc,
                    exc_info=exc,
                )
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: stop, loudly
                _log.error(
                    "semantic recorder for user %r interrupted by %s; the worker stops and "
                    "queued items are left unrecorded",
                    self.user_id,
                    type(exc).__name__,
                    exc_info=exc,
                )
                with self._state:
                    self.worker_error = exc
                    self._state.notify_all()
                return
            else:
                with self._state:
                    self.recorded += 1
                    self._pending -= 1
                    self._state.notify_all()
            if self._stop.is_set():
                return

    # ------------------------------------------------------------------ flushing

    @property
    def pending(self) -> int:
        """Items recorded but not yet answered by the client."""
        with self._state:
            return self._pending

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued item was handed to the client, at most ``timeout`` seconds.

        Args:
            timeout: Seconds to wait at most (default ``flush_timeout``).

        Returns:
            True when nothing is pending; False when the time ran out or the
            worker stopped with items left.

        Raises:
            ConfigurationError: ``timeout`` is not a non-negative number.
        """
        bound = self.flush_timeout if timeout is None else check_timeout("timeout", timeout)
        deadline = time.monotonic() + bound
        with self._state:
            while self._pending and self.worker_error is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._state.wait(remaining)
            return self._pending == 0

    def close(self, timeout: float | None = None) -> CloseReport:
        """Flush within ``timeout`` (default ``flush_timeout``), stop the worker, report.

        Idempotent: a second call returns the first call's report at once.
        Never waits longer than the bound, even with a stuck client.

        Raises:
            ConfigurationError: ``timeout`` is not a non-negative number.
        """
        bound = self.flush_timeout if timeout is None else check_timeout("timeout", timeout)
        with self._state:
            if self.close_report is not None:
                return self.close_report
            self._closing = True
        deadline = time.monotonic() + bound
        flushed = self.flush(bound)
        self._stop.set()
        # A full queue means the worker is busy in a call; it sees the event afterwards.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        worker = self._worker
        if worker is not None and flushed:
            worker.join(max(deadline - time.monotonic(), 0.0))
        with self._state:
            # What never reached the client is discarded; the report says how much.
            left = self._pending
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
            report = CloseReport(
                flushed=left == 0, left=left, dropped=self.dropped, failed=self.failed
            )
            self.close_report = report
        if left:
            _log.warning(
                "semantic recorder for user %r closed with %d item(s) not recorded "
                "(flush bound %.1fs)",
                self.user_id,
                left,
                bound,
            )
        return report

    async def aclose(self, timeout: float | None = None) -> CloseReport:
        """:meth:`close` for async hosts: the bounded wait runs off the event loop."""
        return await asyncio.to_thread(self.close, timeout)

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` started."""
        return self._closing

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Recorder(user_id={self.user_id!r}, recorded={self.recorded}, "
            f"dropped={self.dropped}, failed={self.failed}, pending={self._pending})"
        )


def _check_payload(value: Any) -> Payload | None:
    """The payload to queue, ``None`` for blank text, InvalidArgumentError for the wrong type."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        if not all(isinstance(m, Mapping) for m in value):
            raise InvalidArgumentError(
                "text_or_messages must be a string or a sequence of message mappings"
            )
        return [dict(m) for m in value] if value else None
    raise InvalidArgumentError(
        f"text_or_messages must be a string or a sequence of message mappings, "
        f"got {type(value).__name__}"
    )


def _describe(item: Payload) -> str:
    """The size of an item, for logs that must not repeat the user's words."""
    if isinstance(item, str):
        return f"{len(item)} characters"
    return f"{len(item)} message(s)"
