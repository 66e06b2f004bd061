"""Test doubles for hosts and for agentmem's own tests: no network, fully scripted.

:class:`ScriptedLLM` satisfies the :class:`~agentmem.protocols.LLM` protocol
with queued replies, records every call, and fails loudly when the script
runs out, so a test that expected three model calls notices a fourth::

    llm = ScriptedLLM([
        tool_call("read_file", {"path": "setup.py"}),
        {"role": "assistant", "content": "Done."},
    ])
    reply = llm(messages)            # the first reply, with a usage block
    llm.assert_complete()            # every scripted reply was used

A script item may also be an exception instance, raised when the call
reaches it (``RuntimeError("provider down")`` to test failure handling,
``KeyboardInterrupt()`` to test that interrupts get through), a reply with
several tool calls (:func:`tool_calls`), or a callable computing the reply
from the messages. :class:`AsyncScriptedLLM` is the ``async def`` twin with
the same script semantics, for code that must work with async LLMs::

    llm = AsyncScriptedLLM([
        tool_calls([("read_memory", {"topic": "deploy"}), ("list_memories", {})]),
        RuntimeError("provider down"),
    ])
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from agentmem.errors import ScriptExhaustedError
from agentmem.tokens import HeuristicCounter, count_messages

__all__ = ["AsyncScriptedLLM", "ScriptExhaustedError", "ScriptedLLM", "tool_call", "tool_calls"]

_ids = itertools.count(1)


def tool_call(
    name: str, arguments: Mapping[str, Any], *, call_id: str | None = None
) -> dict[str, Any]:
    """An assistant message that calls one tool (OpenAI format).

    Args:
        name: The function name.
        arguments: The arguments (encoded as JSON).
        call_id: The call id; a fresh ``call_<n>`` when omitted.
    """
    return tool_calls([(name, arguments, call_id)])


Call = tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], str | None]
"""One call for :func:`tool_calls`: ``(name, arguments)`` or ``(name, arguments, call_id)``."""


def tool_calls(calls: Sequence[Call], *, content: str | None = None) -> dict[str, Any]:
    """An assistant message that calls several tools at once (OpenAI format).

    Args:
        calls: ``(name, arguments)`` or ``(name, arguments, call_id)`` tuples,
            in order; a call without an id gets a fresh ``call_<n>``.
        content: Text the assistant says alongside the calls.
    """
    out = []
    for call in calls:
        name, arguments = call[0], call[1]
        call_id = call[2] if len(call) > 2 else None
        out.append(
            {
                "id": call_id or f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(arguments))},
            }
        )
    return {"role": "assistant", "content": content, "tool_calls": out}


Reply = (
    Mapping[str, Any]
    | BaseException
    | Callable[[list[dict[str, Any]]], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]
)
"""A script item: a reply, an exception to raise, or a callable ``(messages) -> reply``."""


class _Script:
    """The script, the call log and the checks both scripted LLMs share."""

    def __init__(self, replies: Iterable[Reply], *, usage: bool = True) -> None:
        self._replies = list(replies)
        self._next = 0
        self._usage = usage
        self._counter = HeuristicCounter()
        self.calls: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = []

    def _take(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> Mapping[str, Any] | Callable[[list[dict[str, Any]]], Any]:
        """Record the call and return the next item; raise it when it is an exception."""
        self.calls.append((messages, tools))
        if self._next >= len(self._replies):
            raise ScriptExhaustedError(
                f"{type(self).__name__} has {len(self._replies)} replies but was called "
                f"{len(self.calls)} times"
            )
        item = self._replies[self._next]
        self._next += 1
        if isinstance(item, BaseException):
            raise item
        return item

    def _finish(self, item: Mapping[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(json.dumps(item))
        if self._usage and "usage" not in reply:
            reply["usage"] = {
                "prompt_tokens": count_messages(messages, self._counter),
                "completion_tokens": count_messages([reply], self._counter),
                "cost_usd": 0.0,
            }
        return reply

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self._replies) - self._next

    def assert_complete(self) -> None:
        """Raise unless every scripted reply was used.

        Raises:
            ScriptExhaustedError: some replies were never requested.
        """
        if self.remaining:
            raise ScriptExhaustedError(f"{self.remaining} scripted replies were never used")


class ScriptedLLM(_Script):
    """An offline LLM that answers from a script.

    Args:
        replies: Assistant messages to return in order. An item may also be
            an exception instance, raised (once) when a call reaches it, or a
            callable ``(messages) -> message`` to compute a reply from what
            was sent.
        usage: Attach a ``usage`` block (prompt tokens estimated with a
            heuristic counter, completion tokens likewise, cost 0).

    Attributes:
        calls: Every ``(messages, tools)`` the LLM received, in order (calls
            that raised included).
    """

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Return the next scripted reply (a fresh copy), or raise the scripted exception.

        Raises:
            ScriptExhaustedError: no reply is left.
            BaseException: the script's next item is this exception.
        """
        item = self._take(messages, tools)
        return self._finish(item(messages) if callable(item) else item, messages)


class AsyncScriptedLLM(_Script):
    """The ``async def`` twin of :class:`ScriptedLLM`: the same script, awaited.

    Satisfies :class:`~agentmem.protocols.AsyncLLM`. A callable script item
    may be sync or async. Everything else (exception items, ``calls``,
    ``remaining``, ``assert_complete``, the usage block) is as for
    :class:`ScriptedLLM`.
    """

    async def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Return the next scripted reply (a fresh copy), or raise the scripted exception.

        Raises:
            ScriptExhaustedError: no reply is left.
            BaseException: the script's next item is this exception.
        """
        item = self._take(messages, tools)
        if callable(item):
            result = item(messages)
            item = await result if inspect.isawaitable(result) else result
        return self._finish(item, messages)
