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
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentmem.errors import ScriptExhaustedError
from agentmem.tokens import HeuristicCounter, count_messages

__all__ = ["ScriptExhaustedError", "ScriptedLLM", "tool_call"]

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
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id or f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(arguments))},
            }
        ],
    }


Reply = Mapping[str, Any] | Callable[[list[dict[str, Any]]], Mapping[str, Any]]


class ScriptedLLM:
    """An offline LLM that answers from a script.

    Args:
        replies: Assistant messages to return in order. An item may also be
            a callable ``(messages) -> message`` to compute a reply from what
            was sent.
        usage: Attach a ``usage`` block (prompt tokens estimated with a
            heuristic counter, completion tokens likewise, cost 0).

    Attributes:
        calls: Every ``(messages, tools)`` the LLM received, in order.
    """

    def __init__(self, replies: Iterable[Reply], *, usage: bool = True) -> None:
        self._replies = list(replies)
        self._next = 0
        self._usage = usage
        self._counter = HeuristicCounter()
        self.calls: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = []

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Return the next scripted reply (a fresh copy).

        Raises:
            ScriptExhaustedError: no reply is left.
        """
        self.calls.append((messages, tools))
        if self._next >= len(self._replies):
            raise ScriptExhaustedError(
                f"ScriptedLLM has {len(self._replies)} replies but was called "
                f"{len(self.calls)} times"
            )
        item = self._replies[self._next]
        self._next += 1
        reply: dict[str, Any] = json.loads(json.dumps(item(messages) if callable(item) else item))
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
