"""Reading the parts of a YaRN state that hold threads: checked, normalised, in order.

:meth:`agentmem.yarn.YaRN.from_state` calls these. Threads reach it two ways:
inside the state (``"threads"``: a standalone YaRN's state, or a session state
saved by an earlier release), and from an owner that stores them itself (a
session: rows of its store's threads table) with the state keeping only their
order (``"thread_order"``). Every function raises
:class:`~agentmem.errors.InvalidArgumentError` naming the bad part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentmem._json import type_name
from agentmem.errors import InvalidArgumentError, InvalidMessageError
from agentmem.messages import Message, normalize_messages

__all__ = ["MAIN_THREAD", "check_thread_id", "read_pending", "read_saved", "read_threads"]

MAIN_THREAD: Final = "main"
"""Id of the session's own conversation thread."""


def check_thread_id(thread_id: Any) -> None:
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidArgumentError(f"thread_id must be a non-empty string, got {thread_id!r}")


def read_threads(state: Mapping[str, Any], *, main_given: bool) -> list[tuple[str, list[Message]]]:
    """``state["threads"]`` as (thread id, messages), in the state's order.

    With ``main_given`` (the owner passes its history as the main thread), an
    empty ``"main"`` entry is skipped and a non-empty one raises: one of the
    two would be lost.
    """
    threads = state.get("threads", {})
    if not isinstance(threads, Mapping):
        raise InvalidArgumentError(f"state.threads must be an object, got {type_name(threads)}")
    out = []
    for tid, messages in threads.items():
        if not isinstance(tid, str) or not tid:
            raise InvalidArgumentError(f"state.threads has a bad thread id {tid!r}")
        if not isinstance(messages, list):
            raise InvalidArgumentError(
                f"state.threads[{tid!r}] must be a list, got {type_name(messages)}"
            )
        if tid == MAIN_THREAD and main_given:
            if messages:
                raise InvalidArgumentError(
                    "the state holds its own main thread; do not pass main_thread"
                )
            continue
        try:
            out.append((tid, normalize_messages(messages)))
        except InvalidMessageError as exc:
            raise InvalidArgumentError(f"state.threads[{tid!r}]: {exc}") from exc
    return out


def read_saved(
    saved: Mapping[str, Sequence[Message]], state: Mapping[str, Any], *, main_given: bool
) -> list[tuple[str, list[Message]]]:
    """The owner's stored side threads, in ``state["thread_order"]``, then the rest by id.

    A thread the order names without stored messages comes back empty (an
    empty thread has no rows, only its place).
    """
    order = state.get("thread_order", [])
    if not isinstance(order, list) or not all(isinstance(t, str) for t in order):
        raise InvalidArgumentError("state.thread_order must be a list of thread ids")
    ids = list(dict.fromkeys(order))
    listed = set(ids)
    ids += sorted(t for t in saved if t not in listed)
    out = []
    for tid in ids:
        check_thread_id(tid)
        if tid == MAIN_THREAD and main_given:
            raise InvalidArgumentError("a saved side thread is named 'main'")
        try:
            out.append((tid, normalize_messages(saved.get(tid, ()))))
        except InvalidMessageError as exc:
            raise InvalidArgumentError(f"saved thread {tid!r}: {exc}") from exc
    return out


def read_pending(state: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """``state["pending"]``: the question asked last, and the ask tools' open calls."""
    pending = state.get("pending", {})
    if not isinstance(pending, Mapping):
        raise InvalidArgumentError(f"state.pending must be an object, got {type_name(pending)}")
    question = pending.get("question")
    if question is not None and not isinstance(question, str):
        raise InvalidArgumentError("state.pending.question must be a string or null")
    asks = pending.get("asks", [])
    if not isinstance(asks, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(s, str) for s in pair)
        for pair in asks
    ):
        raise InvalidArgumentError("state.pending.asks must be a list of [call_id, question]")
    return question, dict(asks)
