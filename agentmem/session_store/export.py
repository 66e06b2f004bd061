"""Export a session to one self-contained JSON or HTML file.

Pure functions of a :class:`~agentmem.session_store.records.SessionRecord`
(and, for the HTML page, of the session's task tree when the caller read
it): no database access, so any backend's records export the same bytes.
The page itself is built in :mod:`agentmem.session_store.html_page`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from agentmem.messages import Message
from agentmem.session_store.html_page import PROGRESS_EVERY, render_page
from agentmem.session_store.records import EXPORT_FORMAT, EXPORT_VERSION, SessionRecord, _iso
from agentmem.time_machine import TaskTreeView

__all__ = ["export_data", "export_html", "export_json"]


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


# Message keys in reading order; any other key follows, alphabetically.
_EXPORT_KEY_ORDER: Final = (
    "role",
    "name",
    "content",
    "refusal",
    "reasoning_content",
    "tool_calls",
    "tool_call_id",
)


def _export_message(message: Message) -> dict[str, Any]:
    rank = {key: i for i, key in enumerate(_EXPORT_KEY_ORDER)}
    keys = sorted(message, key=lambda k: (rank.get(k, len(rank)), k))
    return {key: _sorted_keys(message[key]) for key in keys}


def _messages(
    messages: list[Message], on_progress: Callable[[int, int], None] | None
) -> list[dict[str, Any]]:
    out = []
    total = len(messages)
    for i, message in enumerate(messages, 1):
        out.append(_export_message(message))
        if on_progress is not None and i % PROGRESS_EVERY == 0 and i < total:
            on_progress(i, total)
    if on_progress is not None:
        on_progress(total, total)
    return out


def export_data(
    record: SessionRecord, *, on_progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """The JSON export of a session, as a dict (see :meth:`SessionStore.export`).

    Top-level, ``session`` and billing keys come in a fixed order; a
    message starts with ``role``, ``name``, ``content``, ``refusal``,
    ``reasoning_content``, ``tool_calls``, ``tool_call_id`` and continues
    with its other keys alphabetically; keys nested deeper are sorted. Equal
    sessions export to equal bytes. ``on_progress(done, total)`` is called
    after every 1,000 messages and once at the end.
    """
    info = record.info
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": {
            "id": info.id,
            "name": info.name,
            "created_at": info.created_at,
            "created_at_iso": _iso(info.created_at),
            "updated_at": info.updated_at,
            "updated_at_iso": _iso(info.updated_at),
            "working_directory": info.working_directory,
            "model": info.model,
            "context_window": info.context_window,
            "message_count": info.message_count,
        },
        "messages": _messages(record.messages, on_progress),
        "state": _sorted_keys(record.state),
        "billing": [
            {
                "at": b.at,
                "at_iso": _iso(b.at),
                "kind": b.kind,
                "model": b.model,
                "prompt_tokens": b.prompt_tokens,
                "completion_tokens": b.completion_tokens,
                "cost_usd": b.cost_usd,
                "cached_prompt_tokens": b.cached_prompt_tokens,
                "cache_write_tokens": b.cache_write_tokens,
            }
            for b in record.billing
        ],
        "threads": {
            tid: [_export_message(m) for m in record.threads[tid]] for tid in sorted(record.threads)
        },
    }


def export_json(
    record: SessionRecord, *, on_progress: Callable[[int, int], None] | None = None
) -> str:
    """The JSON export of a session as text: UTF-8-ready, two-space indented, newline-terminated."""
    data = export_data(record, on_progress=on_progress)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def export_html(
    record: SessionRecord,
    *,
    tasks: TaskTreeView | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> str:
    """The HTML export of a session: one self-contained, script-free page.

    The page holds the session's details, a contents block, the thread
    summary (YaRN's, from the session state), the task index (from ``tasks``,
    the time machine's tree, when given: id, parent, status, request, files
    changed; else the tasks the messages name), billing totals with every
    request in a collapsed table, the transcript (a heading where each task
    starts; tool results, reasoning and long texts collapsed), the side
    threads and the session state.

    Every stored string goes through :func:`html.escape`; a
    Content-Security-Policy forbids scripts and every fetch; images are shown
    only when embedded as base64 raster ``data:`` URLs; remote URLs appear as
    text and are never loaded. ``on_progress(done, total)`` is called after
    every 1,000 messages and once at the end.
    """
    return render_page(record, tasks=tasks, on_progress=on_progress)
