"""The LLM summarizer, and how YaRN calls any summarizer from sync or async code.

:class:`~agentmem.yarn.YaRN` works without a summarizer (its summary is
extractive); with one, the summarizer's prose is added on top of the
extracted facts. This module holds the two halves of that:

* :class:`LLMSummarizer`, a :class:`~agentmem.protocols.Summarizer` backed by
  any chat :class:`~agentmem.protocols.LLM`, sync or async. It is written as
  a flow (:meth:`LLMSummarizer.summarize_flow`, see :mod:`agentmem.llm`):
  :meth:`~LLMSummarizer.summarize` drives it with a sync LLM,
  :meth:`~LLMSummarizer.asummarize` awaits it with an async (or sync) one.
* :func:`summary_text` and :func:`asummary_text`, which call *any*
  summarizer for a compression and turn every failure into one warning on
  the ``agentmem.yarn`` logger and ``None`` (the extractive summary then
  stands). The synchronous one never leaves a coroutine un-awaited: an
  async summarizer (``async def summarize``, or ``is_async`` true, as for an
  :class:`LLMSummarizer` over an async LLM) is not called at all, and an
  awaitable a sync-looking summarizer returns is closed; both are logged
  with a pointer to the async entry points (``Session.acontext()``).
  ``KeyboardInterrupt`` and ``asyncio.CancelledError`` always propagate.

A compression is split in two around the summarizer call (the sans-IO shape
of the rest of the LLM plumbing): :meth:`YaRN.fold <agentmem.yarn.YaRN.fold>`
stores the extractive summary and returns a :class:`SummaryRequest` (the
call still owed), and :meth:`YaRN.summarize <agentmem.yarn.YaRN.summarize>`
or :meth:`YaRN.asummarize <agentmem.yarn.YaRN.asummarize>` settles it.
Re-exported by :mod:`agentmem.yarn`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentmem._json import type_name
from agentmem._truncate import truncate_text
from agentmem.errors import InvalidArgumentError
from agentmem.llm import Flow, LLMRequest, arun_flow, is_async_llm, run_flow
from agentmem.messages import message_text, sanitize_text
from agentmem.protocols import LLM, AsyncLLM, Summarizer
from agentmem.yarn._extract import UNKNOWN_TOOL

__all__ = [
    "ASYNC_HINT",
    "SUMMARY_INSTRUCTIONS",
    "LLMSummarizer",
    "SummaryRequest",
    "asummary_text",
    "is_async_summarizer",
    "summary_text",
]

logger = logging.getLogger("agentmem.yarn")

SUMMARY_INSTRUCTIONS: Final = (
    "Summarize the conversation so far for an agent that will continue the work. "
    "The messages below are leaving the agent's context window and your summary replaces "
    "them; merge them with the previous summary when there is one. Keep decisions, file "
    "paths, commands, errors and open questions; drop pleasantries and repetition. "
    "Be concise. Reply with the summary only, as plain text."
)
"""System instruction :class:`LLMSummarizer` sends by default."""

ASYNC_HINT: Final = (
    "build the context with Session.acontext() / acontext_after_overflow() "
    "(or call YaRN.acompress()) to await it"
)
"""What the warnings about an async summarizer in a synchronous compression suggest."""


# --------------------------------------------------------------------------- LLM summarizer


class LLMSummarizer:
    """A :class:`~agentmem.protocols.Summarizer` backed by any chat LLM, sync or async.

    It sends two messages: a system instruction (:data:`SUMMARY_INSTRUCTIONS`
    unless overridden) and one user message holding the previous summary and
    the new messages as plain text (``role: content``; tool calls as
    ``name(arguments)``; tool results and arguments cut to ``max_tool_chars``
    each). The prompt is a pure function of its inputs: no timestamps.

    With a synchronous LLM, :meth:`summarize` answers; with an async one,
    :meth:`asummarize` does (``summarize`` raises :class:`~agentmem.errors.LLMError`
    without calling it, and :attr:`is_async` tells YaRN to await it instead).

    Args:
        llm: A callable ``llm(messages, tools=None) -> dict`` (or ``async
            def``) returning an OpenAI-format assistant message.
        instructions: The system instruction.
        max_tool_chars: Longest tool result or argument string kept verbatim.

    Raises:
        InvalidArgumentError: ``llm`` is not callable, or a setting is bad.
    """

    def __init__(
        self,
        llm: LLM | AsyncLLM,
        *,
        instructions: str = SUMMARY_INSTRUCTIONS,
        max_tool_chars: int = 2_000,
    ) -> None:
        if not callable(llm):
            raise InvalidArgumentError(f"llm must be callable, got {type_name(llm)}")
        if not isinstance(instructions, str) or not instructions.strip():
            raise InvalidArgumentError("instructions must be a non-empty string")
        if isinstance(max_tool_chars, bool) or not isinstance(max_tool_chars, int):
            raise InvalidArgumentError("max_tool_chars must be an int")
        if max_tool_chars < 1:
            raise InvalidArgumentError(f"max_tool_chars must be >= 1, got {max_tool_chars}")
        self._llm = llm
        self.instructions = instructions
        self.max_tool_chars = max_tool_chars

    @property
    def is_async(self) -> bool:
        """Whether the LLM is async (then only :meth:`asummarize` can call it)."""
        return is_async_llm(self._llm)

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
            text = message_text(msg).strip()
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

    def summarize_flow(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None
    ) -> Flow[str]:
        """The summary as a flow: one request (:meth:`build_prompt`), the reply's text.

        Returns (as the flow's result):
            The reply's text content, stripped (possibly empty).
        """
        reply = yield LLMRequest(self.build_prompt(messages, previous_summary), purpose="summary")
        return message_text(reply).strip()

    def summarize(self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None) -> str:
        """Ask a synchronous LLM for a summary of ``messages`` merged with ``previous_summary``.

        Returns:
            The reply's text content, stripped (possibly empty).

        Raises:
            LLMError: the LLM is async (use :meth:`asummarize`), or did not
                return an assistant message dict.
            Exception: whatever the LLM raises propagates (YaRN logs it).
        """
        return run_flow(self.summarize_flow(messages, previous_summary), self._llm)

    async def asummarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None
    ) -> str:
        """The async twin of :meth:`summarize`: awaits an async LLM (or calls a sync one).

        Raises:
            LLMError: the LLM did not return an assistant message dict.
            Exception: whatever the LLM raises propagates (YaRN logs it).
        """
        return await arun_flow(self.summarize_flow(messages, previous_summary), self._llm)


# --------------------------------------------------------------------------- calling any summarizer


@dataclass(frozen=True)
class SummaryRequest:
    """A summarizer call a YaRN compression still owes (see the module docstring).

    Made by :meth:`YaRN.fold <agentmem.yarn.YaRN.fold>` after the extractive
    summary is stored; settled by ``YaRN.summarize`` or ``YaRN.asummarize``.
    """

    messages: tuple[Mapping[str, Any], ...]
    """The evicted batch, oldest first."""

    previous_summary: str | None
    """The summary before this batch, rendered (``None`` at the first compression)."""

    seq: int
    """Which compression this is (per YaRN): an older one's text never replaces a newer one's."""


def is_async_summarizer(summarizer: object) -> bool:
    """Whether a summarizer must be awaited.

    A bool ``is_async`` attribute decides (:class:`LLMSummarizer` has one);
    otherwise, whether ``summarize`` is an ``async def``.
    """
    flag = getattr(summarizer, "is_async", None)
    if isinstance(flag, bool):
        return flag
    return inspect.iscoroutinefunction(getattr(summarizer, "summarize", None))


def _failed(exc: Exception) -> None:
    logger.warning(
        "summarizer failed (%s: %s); keeping the extractive thread summary",
        type(exc).__name__,
        exc,
    )


def _checked(result: object) -> str | None:
    if not isinstance(result, str) or not result.strip():
        logger.warning(
            "summarizer returned %s instead of a non-empty string; "
            "keeping the extractive thread summary",
            "an empty string" if isinstance(result, str) else type_name(result),
        )
        return None
    return sanitize_text(result.strip())


def summary_text(summarizer: Summarizer, request: SummaryRequest) -> str | None:
    """Run ``summarizer`` synchronously for ``request``: its text, or ``None`` after one warning.

    An async summarizer is not called (there is nothing to await it with);
    an awaitable returned anyway is closed, never left pending.
    """
    if is_async_summarizer(summarizer):
        logger.warning(
            "the summarizer is async and this compression is synchronous; keeping the "
            "extractive thread summary: %s",
            ASYNC_HINT,
        )
        return None
    try:
        result: Any = summarizer.summarize(list(request.messages), request.previous_summary)
    except Exception as exc:
        _failed(exc)
        return None
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # a coroutine nobody will await: close it so no "never awaited" warning
        logger.warning(
            "the summarizer returned an awaitable to a synchronous compression (closed, not "
            "awaited); keeping the extractive thread summary: %s",
            ASYNC_HINT,
        )
        return None
    return _checked(result)


async def asummary_text(summarizer: Summarizer, request: SummaryRequest) -> str | None:
    """The async twin of :func:`summary_text`: awaits ``asummarize`` when the summarizer has one.

    Otherwise calls ``summarize`` and awaits its result when it is awaitable.
    """
    try:
        method = getattr(summarizer, "asummarize", None)
        if not callable(method):
            method = summarizer.summarize
        result: Any = method(list(request.messages), request.previous_summary)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:
        _failed(exc)
        return None
    return _checked(result)
