"""LLMSummarizer: a :class:`~agentmem.protocols.Summarizer` backed by any chat LLM.

:class:`~agentmem.yarn.YaRN` works without it (its summary is extractive);
with it, the LLM's prose is added on top of the extracted facts. Re-exported
by :mod:`agentmem.yarn`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentmem._extract import UNKNOWN_TOOL
from agentmem._json import type_name
from agentmem._truncate import truncate_text
from agentmem.errors import AgentMemError, InvalidArgumentError
from agentmem.messages import content_text, sanitize_text
from agentmem.protocols import LLM

__all__ = ["SUMMARY_INSTRUCTIONS", "LLMSummarizer"]

SUMMARY_INSTRUCTIONS: Final = (
    "Summarize the conversation so far for an agent that will continue the work. "
    "The messages below are leaving the agent's context window and your summary replaces "
    "them; merge them with the previous summary when there is one. Keep decisions, file "
    "paths, commands, errors and open questions; drop pleasantries and repetition. "
    "Be concise. Reply with the summary only, as plain text."
)
"""System instruction :class:`LLMSummarizer` sends by default."""


# --------------------------------------------------------------------------- LLM summarizer


class LLMSummarizer:
    """A :class:`~agentmem.protocols.Summarizer` backed by any synchronous chat LLM.

    It sends two messages: a system instruction (:data:`SUMMARY_INSTRUCTIONS`
    unless overridden) and one user message holding the previous summary and
    the new messages as plain text (``role: content``; tool calls as
    ``name(arguments)``; tool results and arguments cut to ``max_tool_chars``
    each). The prompt is a pure function of its inputs: no timestamps.

    Args:
        llm: A callable ``llm(messages, tools=None) -> dict`` returning an
            OpenAI-format assistant message.
        instructions: The system instruction.
        max_tool_chars: Longest tool result or argument string kept verbatim.

    Raises:
        InvalidArgumentError: ``llm`` is not callable or is async (an async
            LLM cannot be driven from the synchronous ``compress``).
    """

    def __init__(
        self,
        llm: LLM,
        *,
        instructions: str = SUMMARY_INSTRUCTIONS,
        max_tool_chars: int = 2_000,
    ) -> None:
        if not callable(llm):
            raise InvalidArgumentError(f"llm must be callable, got {type_name(llm)}")
        if inspect.iscoroutinefunction(llm) or inspect.iscoroutinefunction(type(llm).__call__):
            raise InvalidArgumentError(
                "LLMSummarizer needs a synchronous LLM; compress() cannot await an async one"
            )
        if not isinstance(instructions, str) or not instructions.strip():
            raise InvalidArgumentError("instructions must be a non-empty string")
        if isinstance(max_tool_chars, bool) or not isinstance(max_tool_chars, int):
            raise InvalidArgumentError("max_tool_chars must be an int")
        if max_tool_chars < 1:
            raise InvalidArgumentError(f"max_tool_chars must be >= 1, got {max_tool_chars}")
        self._llm = llm
        self.instructions = instructions
        self.max_tool_chars = max_tool_chars

    def build_prompt(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None
    ) -> list[dict[str, Any]]:
        """The messages sent to the LLM for one :meth:`summarize` call."""
        previous = previous_summary.strip() if previous_summary else ""
        body = (
            f"Previous summary:\n{previous or '(none)'}\n\n"
            f"New messages to fold in:\n\n{self._transcript(messages)}"
        )
        return [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": sanitize_text(body)},
        ]

    def _transcript(self, messages: Sequence[Mapping[str, Any]]) -> str:
        limit = self.max_tool_chars
        names: dict[str, str] = {}
        lines: list[str] = []
        for msg in messages:
            role = msg.get("role")
            role = role if isinstance(role, str) else "unknown"
            text = content_text(msg.get("content")).strip()
            if role == "tool":
                call_id = msg.get("tool_call_id")
                name = names.get(call_id, "tool") if isinstance(call_id, str) else "tool"
                lines.append(f"tool result ({name}): {truncate_text(text, limit)}")
                continue
            if text:
                lines.append(f"{role}: {text}")
            calls = msg.get("tool_calls") if role == "assistant" else None
            for call in calls if isinstance(calls, list) else ():
                if not isinstance(call, Mapping):
                    continue
                function = call.get("function")
                function = function if isinstance(function, Mapping) else {}
                raw_name = function.get("name")
                name = raw_name if isinstance(raw_name, str) and raw_name else UNKNOWN_TOOL
                raw_args = function.get("arguments")
                args = raw_args if isinstance(raw_args, str) else ""
                if isinstance(call.get("id"), str):
                    names[call["id"]] = name
                lines.append(f"assistant called {name}({truncate_text(args, limit)})")
        return "\n\n".join(lines) if lines else "(no text)"

    def summarize(self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None) -> str:
        """Ask the LLM for a summary of ``messages`` merged with ``previous_summary``.

        Returns:
            The reply's text content, stripped (possibly empty).

        Raises:
            AgentMemError: the LLM did not return an assistant message dict.
            Exception: whatever the LLM raises propagates (YaRN logs it).
        """
        reply: Any = self._llm(self.build_prompt(messages, previous_summary))
        if inspect.iscoroutine(reply):
            reply.close()
            raise AgentMemError("the LLM returned a coroutine; LLMSummarizer needs a sync LLM")
        if not isinstance(reply, Mapping):
            raise AgentMemError(
                f"the LLM returned {type_name(reply)}, expected an assistant message dict"
            )
        return content_text(reply.get("content")).strip()
