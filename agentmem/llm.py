"""Driving an LLM from sync or async code: one sans-IO core, two runners.

Every part of agentmem that talks to a model (the LLM summarizer, the memory
updater, semantic fact extraction) is written as a *flow*: a generator that
yields :class:`LLMRequest` objects and receives each reply (an OpenAI-format
assistant message dict) back from ``yield``, then returns its result. The
flow does no I/O of its own, so the same code runs under both runners:

* :func:`run_flow` calls a synchronous :class:`~agentmem.protocols.LLM`;
* :func:`arun_flow` awaits an :class:`~agentmem.protocols.AsyncLLM` (and
  calls a synchronous one directly).

The library never calls ``asyncio.run``: a synchronous entry point given an
async LLM raises :class:`~agentmem.errors.LLMError` naming the async twin to
use, and closes the coroutine it got so no "never awaited" warning leaks::

    def ask(question: str) -> Flow[str]:
        reply = yield LLMRequest([{"role": "user", "content": question}])
        return str(reply.get("content") or "")

    answer = run_flow(ask("2+2?"), llm)          # sync LLM
    answer = await arun_flow(ask("2+2?"), allm)  # async (or sync) LLM

Replies are checked by :func:`check_reply` (a mapping with role
``assistant``; ``content`` a string, a list of parts or ``None``;
``tool_calls`` a list): anything else raises :class:`~agentmem.errors.LLMError`
naming what was wrong. An ``Exception`` raised by the LLM (or by that
check) is thrown into the flow at its ``yield``, so a flow may catch it and
still return a result (the memory updater reports its failures that way);
uncaught, it propagates unchanged. ``KeyboardInterrupt`` and other
``BaseException`` subclasses are never thrown into the flow: they propagate at once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from agentmem.errors import LLMError

__all__ = [
    "Flow",
    "LLMRequest",
    "UsageFigures",
    "arun_flow",
    "check_reply",
    "is_async_llm",
    "parse_usage",
    "reply_usage",
    "run_flow",
    "usage_has_prompt",
]

T = TypeVar("T")


@dataclass(frozen=True)
class LLMRequest:
    """One model call a flow wants made: ``llm(messages, tools)``."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    purpose: str = field(default="", compare=False)


Flow = Generator[LLMRequest, dict[str, Any], T]
"""A sans-IO flow: yields requests, receives replies, returns its result."""


def is_async_llm(llm: object) -> bool:
    """Whether ``llm`` is (or is an object whose ``__call__`` is) a coroutine function."""
    if inspect.iscoroutinefunction(llm):
        return True
    call = getattr(type(llm), "__call__", None)  # noqa: B004 - the class attribute, not callable()
    return call is not None and inspect.iscoroutinefunction(call)


def check_reply(reply: object) -> dict[str, Any]:
    """Return ``reply`` as an assistant message dict, or raise :class:`LLMError`.

    A missing ``role`` is taken as ``assistant`` (some adapters omit it).
    """
    if not isinstance(reply, Mapping):
        raise LLMError(f"the LLM returned {type(reply).__name__}, not a message dict")
    out = dict(reply)
    role = out.setdefault("role", "assistant")
    if role != "assistant":
        raise LLMError(f"the LLM returned a message with role {role!r}, not 'assistant'")
    content = out.get("content")
    if content is not None and not isinstance(content, str | list):
        raise LLMError(f"the LLM reply's content is {type(content).__name__}")
    calls = out.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise LLMError(f"the LLM reply's tool_calls is {type(calls).__name__}, not a list")
    return out


@dataclass(frozen=True)
class UsageFigures:
    """A provider's usage report, normalised (see :func:`parse_usage`)."""

    prompt_tokens: int = 0
    """The whole prompt, cached and cache-written parts included."""
    completion_tokens: int = 0
    """Output tokens."""
    cached_prompt_tokens: int = 0
    """Part of ``prompt_tokens`` read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Part of ``prompt_tokens`` written to the cache (Anthropic's cache creation)."""
    cost_usd: float = 0.0
    """``cost_usd`` when the usage carries one (the adapters add it), else 0."""


def _get(source: object, key: str) -> object:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(key)
    try:
        return getattr(source, key, None)
    except Exception:  # a property that raises: treat as absent
        return None


def _number(source: object, key: str) -> float:
    value = _get(source, key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    number = float(value)
    return number if number == number and 0 <= number < float("inf") else 0.0


def _has(source: object, key: str) -> bool:
    return _get(source, key) is not None


def usage_has_prompt(usage: object) -> bool:
    """Whether ``usage`` (or the ``usage`` of a reply) carries a prompt figure."""
    for source in (usage, _get(usage, "usage")):
        if _has(source, "prompt_tokens") or _has(source, "input_tokens"):
            return True
    return False


def parse_usage(usage: object) -> UsageFigures:
    """Normalise a provider's usage report, as an object (attributes, pydantic) or a dict.

    ``usage`` may also be a whole reply or response carrying a ``usage``.
    Understood shapes, the prompt total always including the cached parts:

    * OpenAI Chat Completions: ``prompt_tokens``, ``completion_tokens``,
      ``prompt_tokens_details.cached_tokens``;
    * DeepSeek: ``prompt_tokens``, ``completion_tokens``,
      ``prompt_cache_hit_tokens`` (cached; ``prompt_cache_miss_tokens`` is the rest);
    * OpenAI Responses: ``input_tokens`` (the total), ``output_tokens``,
      ``input_tokens_details.cached_tokens``;
    * Anthropic Messages: ``input_tokens`` (only the uncached part) +
      ``cache_creation_input_tokens`` + ``cache_read_input_tokens`` is the
      total; ``output_tokens``. Told apart from the Responses API by the
      two ``cache_*`` fields.

    Missing, negative or non-numeric figures count as 0; never raises.
    """
    inner = _get(usage, "usage")
    if inner is not None and not _has(usage, "prompt_tokens") and not _has(usage, "input_tokens"):
        usage = inner
    if usage is None:
        return UsageFigures()
    cost = _number(usage, "cost_usd")
    if _has(usage, "prompt_tokens"):  # Chat Completions and DeepSeek (adapters' dicts too)
        prompt = int(_number(usage, "prompt_tokens"))
        cached = (
            _number(usage, "prompt_cache_hit_tokens")
            or _number(_get(usage, "prompt_tokens_details"), "cached_tokens")
            or _number(usage, "cached_prompt_tokens")  # the adapters' own usage dict
        )
        written = int(_number(usage, "cache_write_tokens"))
        return UsageFigures(
            prompt_tokens=prompt,
            completion_tokens=int(_number(usage, "completion_tokens")),
            cached_prompt_tokens=min(prompt, int(cached)),
            cache_write_tokens=min(prompt, written),
            cost_usd=cost,
        )
    completion = int(_number(usage, "output_tokens"))
    if _has(usage, "cache_creation_input_tokens") or _has(usage, "cache_read_input_tokens"):
        written = int(_number(usage, "cache_creation_input_tokens"))
        read = int(_number(usage, "cache_read_input_tokens"))
        return UsageFigures(
            prompt_tokens=int(_number(usage, "input_tokens")) + written + read,
            completion_tokens=completion,
            cached_prompt_tokens=read,
            cache_write_tokens=written,
            cost_usd=cost,
        )
    prompt = int(_number(usage, "input_tokens"))  # the Responses API: already the total
    cached = int(_number(_get(usage, "input_tokens_details"), "cached_tokens"))
    return UsageFigures(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_prompt_tokens=min(prompt, cached),
        cost_usd=cost,
    )


def reply_usage(reply: Mapping[str, Any]) -> tuple[int, int, float]:
    """``(prompt_tokens, completion_tokens, cost_usd)`` of a reply; zeros where absent or bad.

    The reply's ``usage`` is read by :func:`parse_usage`, so any provider's
    shape works and the prompt count includes cached tokens.
    """
    figures = parse_usage(reply.get("usage") if isinstance(reply, Mapping) else None)
    return figures.prompt_tokens, figures.completion_tokens, figures.cost_usd


def _sync_call(llm: Callable[..., Any], request: LLMRequest) -> dict[str, Any]:
    reply = llm(request.messages, request.tools)
    if inspect.isawaitable(reply):
        close = getattr(reply, "close", None)
        if callable(close):
            close()
        raise LLMError(
            "the LLM is async (it returned an awaitable); use the async twin of this call "
            "(for example afinish_task / arun_flow) instead of the sync one"
        )
    return check_reply(reply)


def run_flow(flow: Flow[T], llm: Callable[..., Any]) -> T:
    """Drive ``flow`` with a synchronous LLM and return its result.

    Raises:
        LLMError: ``llm`` is async, or a reply is not an assistant message
            (and the flow did not catch it).
        Exception: whatever the LLM or the flow raises and the flow does not catch.
    """
    if is_async_llm(llm):
        flow.close()
        raise LLMError(
            "this LLM is async; a synchronous call cannot await it without asyncio.run "
            "(which agentmem never calls): use the async twin (for example afinish_task)"
        )
    try:
        request = next(flow)
        while True:
            try:
                reply = _sync_call(llm, request)
            except Exception as exc:  # handed to the flow, which may handle it or not
                request = flow.throw(exc)
            else:
                request = flow.send(reply)
    except StopIteration as stop:
        return cast(T, stop.value)
    finally:
        flow.close()


async def arun_flow(flow: Flow[T], llm: Callable[..., Any]) -> T:
    """Drive ``flow`` with an async or a sync LLM and return its result.

    Raises:
        LLMError: a reply is not an assistant message (and the flow did not catch it).
        Exception: whatever the LLM or the flow raises and the flow does not catch.
    """
    try:
        request = next(flow)
        while True:
            try:
                reply: Any = llm(request.messages, request.tools)
                if inspect.isawaitable(reply):
                    reply = await reply
                reply = check_reply(reply)
            except Exception as exc:  # handed to the flow, which may handle it or not
                request = flow.throw(exc)
            else:
                request = flow.send(reply)
    except StopIteration as stop:
        return cast(T, stop.value)
    finally:
        flow.close()
