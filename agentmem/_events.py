"""Progress events: the one list of what agentmem tells a ProgressReporter, and how.

A host passes ``Memory(reporter=...)``, an object with ``report(event,
data)`` (:class:`~agentmem.protocols.ProgressReporter`), to show what takes
time or changes the user's files. Every event agentmem emits is named in
:data:`EVENTS` with the keys of its ``data``; docs/progress.md lists the same
(a test holds the two together, and every emitted event to its keys).

Operations that take time come as a pair: ``<operation>.started`` before
anything is done and ``<operation>.finished`` afterwards, on success and on
failure alike (``ok`` says which, ``error`` names the exception). The
``finished`` data repeats the ``started`` keys, so each event reads alone.
Two older names keep their shape: ``context.trim`` (one event per trim) and
``memory_update_started`` / ``memory_update_finished``.

A reporter must not slow the agent down or break it: :func:`emit` catches
whatever the reporter raises and logs it; agentmem never reads what it
returns. Events are reported on the thread doing the work.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from agentmem.protocols import ProgressReporter

__all__ = ["EVENTS", "emit", "operation"]

_log = logging.getLogger("agentmem.progress")

_CONTEXT_OVERFLOW = ("session_id", "attempt", "provider")
_RESTORE = ("session_id", "operation", "from_task", "to_task")
_INDEX = ("database", "reason")
_EXPORT = ("session_id", "path", "format")
_DONE = ("ok", "error")

EVENTS: Final[Mapping[str, tuple[str, ...]]] = {
    "context.trim": ("stage", "attempt", "tokens_before", "target_tokens", "evicted_messages"),
    "context.overflow.started": _CONTEXT_OVERFLOW,
    "context.overflow.finished": (*_CONTEXT_OVERFLOW, *_DONE, "tokens", "messages"),
    "restore.started": _RESTORE,
    "restore.finished": (*_RESTORE, *_DONE, "skipped"),
    "session.repaired": ("session_id", "repairs", "time_machine"),
    "recall.index_rebuild.started": _INDEX,
    "recall.index_rebuild.finished": (*_INDEX, *_DONE),
    "export.started": _EXPORT,
    "export.progress": (*_EXPORT, "done", "total"),
    "export.finished": (*_EXPORT, *_DONE, "bytes"),
    "doctor.started": ("root", "backend"),
    "doctor.store": ("store", "index", "total"),
    "doctor.finished": ("root", "backend", *_DONE),
    "memory_update_started": ("session_id", "task_id"),
    "memory_update_finished": (
        "session_id",
        "task_id",
        "topics",
        "truncated",
        "iterations",
        "cost_usd",
        "error",
    ),
}
"""Every event name -> the keys of its ``data`` (always all present; ``None`` when unknown)."""


def emit(reporter: ProgressReporter | None, event: str, data: Mapping[str, Any]) -> None:
    """Tell ``reporter`` (if any) about ``event``; a failing reporter is logged, never raised."""
    if reporter is None:
        return
    try:
        reporter.report(event, dict(data))
    except Exception:  # a reporter must never break the agent
        _log.warning("progress reporter failed on %s", event, exc_info=True)


@contextmanager
def operation(
    reporter: ProgressReporter | None, name: str, **data: Any
) -> Iterator[dict[str, Any]]:
    """Report ``<name>.started`` now and ``<name>.finished`` when the block ends.

    Yields a dict the block may fill with the ``finished`` event's own keys
    (or update the ``started`` ones, say the task a restore reached). An
    exception (``KeyboardInterrupt`` included) is reported with ``ok=False``
    and ``error="<Type>: <message>"``, then propagates.
    """
    emit(reporter, f"{name}.started", data)
    finished: dict[str, Any] = dict.fromkeys(EVENTS[f"{name}.finished"])
    finished.update(data)
    try:
        yield finished
    except BaseException as exc:
        finished.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        emit(reporter, f"{name}.finished", finished)
        raise
    finished.update(ok=True, error=None)
    emit(reporter, f"{name}.finished", finished)
