"""A session's token and cost totals, and the small helpers the Session facade shares.

Part of the session package (:mod:`agentmem.session`); :class:`Usage` is
re-exported there and at the top level.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentmem._validate import cost_value
from agentmem.errors import InvalidArgumentError
from agentmem.llm import UsageFigures, parse_usage, usage_has_prompt
from agentmem.memory_updater import BILLING_KIND
from agentmem.protocols import CalibratingCounter, TokenCounter
from agentmem.session.wiring import MAX_TOKENS
from agentmem.session_store import BillingRecord
from agentmem.tokens import counter_for_model

__all__ = ["Usage", "billed_figures", "message_summary", "session_counter"]


@dataclass(frozen=True)
class Usage:
    """Token and cost totals of a session (all requests, memory updates included).

    The ``memory_update_*`` fields are the share of the totals spent by memory
    updates (:mod:`agentmem.memory_updater`); the task's own share is the
    difference (``cost_usd - memory_update_cost_usd``).
    """

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    memory_update_requests: int = 0
    """Model calls made by memory updates (included in ``requests``)."""
    memory_update_prompt_tokens: int = 0
    """Their prompt tokens (included in ``prompt_tokens``)."""
    memory_update_completion_tokens: int = 0
    """Their completion tokens (included in ``completion_tokens``)."""
    memory_update_cost_usd: float = 0.0
    """Their cost (included in ``cost_usd``)."""
    cached_prompt_tokens: int = 0
    """Prompt tokens read from the provider's cache (included in ``prompt_tokens``)."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's cache (included in ``prompt_tokens``)."""

    @classmethod
    def of(cls, billing: Sequence[BillingRecord]) -> Usage:
        """The totals of stored billing records (``"memory_update"`` ones counted apart too)."""
        updates = [b for b in billing if b.kind == BILLING_KIND]
        return cls(
            requests=len(billing),
            prompt_tokens=sum(b.prompt_tokens for b in billing),
            completion_tokens=sum(b.completion_tokens for b in billing),
            cost_usd=sum(b.cost_usd for b in billing),
            memory_update_requests=len(updates),
            memory_update_prompt_tokens=sum(b.prompt_tokens for b in updates),
            memory_update_completion_tokens=sum(b.completion_tokens for b in updates),
            memory_update_cost_usd=sum(b.cost_usd for b in updates),
            cached_prompt_tokens=sum(b.cached_prompt_tokens for b in billing),
            cache_write_tokens=sum(b.cache_write_tokens for b in billing),
        )

    def plus(self, record: BillingRecord) -> Usage:
        """These totals with one more billing record."""
        update = record.kind == BILLING_KIND
        return replace(
            self,
            requests=self.requests + 1,
            prompt_tokens=self.prompt_tokens + record.prompt_tokens,
            completion_tokens=self.completion_tokens + record.completion_tokens,
            cost_usd=self.cost_usd + record.cost_usd,
            memory_update_requests=self.memory_update_requests + update,
            memory_update_prompt_tokens=self.memory_update_prompt_tokens
            + (record.prompt_tokens if update else 0),
            memory_update_completion_tokens=self.memory_update_completion_tokens
            + (record.completion_tokens if update else 0),
            memory_update_cost_usd=self.memory_update_cost_usd
            + (record.cost_usd if update else 0.0),
            cached_prompt_tokens=self.cached_prompt_tokens + record.cached_prompt_tokens,
            cache_write_tokens=self.cache_write_tokens + record.cache_write_tokens,
        )


def message_summary(
    message: Mapping[str, Any], scrubber: Callable[[str], str] | None = None
) -> str:
    """The first 200 characters of the message's text, scrubbed first (so no key is cut in two)."""
    # Not messages.message_text: a one-line summary joins the parts with spaces (and is
    # stored in the task tree, so its shape stays as the stored summaries have it).
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    else:
        return ""
    return (text if scrubber is None else scrubber(text))[:200]


def session_counter(host: TokenCounter | None, model: str) -> TokenCounter:
    """The counter one session uses: its own copy of a calibrating one, else shared."""
    if host is None:
        return counter_for_model(model)
    if isinstance(host, CalibratingCounter):
        return copy.deepcopy(host)
    return host


def billed_figures(
    prompt_tokens: object, completion_tokens: object, cost_usd: object, usage: object
) -> UsageFigures:
    """The checked figures of one ``Session.record_usage`` call (see its docstring).

    ``prompt_tokens`` that is neither an int nor a float/str is taken as a
    usage object (``record_usage(reply.usage)``).

    Raises:
        InvalidArgumentError: a bad figure, a ``usage`` without a prompt
            figure, or both ``usage`` and ``prompt_tokens``.
    """
    cached = written = 0
    positional_usage = isinstance(prompt_tokens, Mapping) or not isinstance(
        prompt_tokens, int | float | str | None
    )
    if usage is None and positional_usage:  # record_usage(reply.usage)
        usage, prompt_tokens = prompt_tokens, None
    if usage is not None:
        if prompt_tokens is not None:
            raise InvalidArgumentError("pass either usage= or prompt_tokens, not both")
        if not usage_has_prompt(usage):
            raise InvalidArgumentError(
                "usage has no prompt figure (prompt_tokens, or input_tokens for the "
                f"Responses and Anthropic APIs); got {type(usage).__name__}"
            )
        parsed = parse_usage(usage)
        prompt_tokens = parsed.prompt_tokens
        completion_tokens = completion_tokens or parsed.completion_tokens
        cost_usd = cost_usd or parsed.cost_usd
        cached, written = parsed.cached_prompt_tokens, parsed.cache_write_tokens
    elif prompt_tokens is None:
        raise InvalidArgumentError("record_usage needs prompt_tokens or usage=")
    checked = []
    for label, value in (
        ("prompt_tokens", prompt_tokens),
        ("completion_tokens", completion_tokens),
    ):
        if type(value) is not int or not 0 <= value <= MAX_TOKENS:
            raise InvalidArgumentError(f"{label} must be an int from 0 to 2**53-1, got {value!r}")
        checked.append(value)
    prompt, completion = checked
    cost = cost_value(cost_usd)
    if cost is None:
        raise InvalidArgumentError(
            f"cost_usd must be a non-negative finite number, got {cost_usd!r}"
        )
    cached = min(cached, prompt)
    return UsageFigures(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_prompt_tokens=cached,
        cache_write_tokens=min(written, prompt - cached),
        cost_usd=cost,
    )
