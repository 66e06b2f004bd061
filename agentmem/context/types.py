"""The context pipeline's settings and results: what goes into a build and what comes out.

:class:`ContextSettings` (the window and the trim thresholds), :class:`TrimEvent`
(passed to the checkpoint callback before each trim), :class:`ContextStats`
and :class:`ContextBuild` (what a build did and returned), and :data:`TurnNote`
(a payload-only system note placed right after one history message). They are public
through :mod:`agentmem.context`, which re-exports them; the pipeline itself
(:class:`~agentmem.context.ContextManager`) lives in :mod:`agentmem.context.manager`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentmem._tool_specs import count_tools, provider_tools, tools_json
from agentmem.errors import ConfigurationError, InvalidArgumentError
from agentmem.messages import Message
from agentmem.protocols import TokenCounter, counter_epoch
from agentmem.tokens import count_message

__all__ = [
    "ContextBuild",
    "ContextSettings",
    "ContextStats",
    "NoteCounts",
    "NoteMap",
    "Stage",
    "ToolCost",
    "ToolCounts",
    "TrimEvent",
    "TurnNote",
    "check_max_output_tokens",
    "note_map",
    "session_tools",
]

Stage = Literal[1, 2, 3]
"""A trim stage: 1 proactive, 2 validation, 3 reactive (after a provider rejection)."""


class ContextSettings(BaseModel):
    """How the payload is kept inside the window. Fractions are of ``context_window``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    context_window: int = Field(default=128_000, ge=256)
    """Tokens the model accepts in one request (prompt side)."""
    proactive_threshold: float = Field(default=0.75, gt=0, le=1)
    """Stage 1 trims when the estimate passes this share of the window."""
    trim_target: float = Field(default=0.5, gt=0, le=1)
    """Stages 1 and 2 trim down to this share."""
    validation_threshold: float = Field(default=0.75, gt=0, le=1)
    """Stage 2 trims when the exact count of the payload passes this share."""
    overflow_targets: tuple[float, float, float] = (0.5, 0.25, 0.1)
    """Stage 3 targets for attempts 1, 2 and 3.

    Attempts 1 and 2 trim the whole payload to their share. Attempt 3 keeps
    only the newest unit and gives it this share of the window, on top of
    what the system prompt, the anchor, the recovery note and the summary
    (at most ``summary_max_fraction``) cost.
    """
    summary_max_fraction: float = Field(default=0.1, ge=0, le=0.5)
    """Room reserved for the thread summary when trimming; a longer summary is truncated."""

    def __init__(self, **data: Any) -> None:
        """Validate the settings.

        Raises:
            ConfigurationError: a field is unknown, of the wrong type or out of
                range, or the fields contradict each other; the message names them.
        """
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid context settings: {_describe(exc)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise ConfigurationError(
            f"context settings are immutable: cannot set {name!r}; "
            f"use settings.model_copy(update={{{name!r}: ...}}) or pass new settings"
        )

    @model_validator(mode="after")
    def _coherent(self) -> ContextSettings:
        if self.trim_target > self.proactive_threshold:
            raise ValueError("trim_target must not exceed proactive_threshold")
        if self.trim_target > self.validation_threshold:
            raise ValueError("trim_target must not exceed validation_threshold")
        if any(not 0 <= t <= 1 for t in self.overflow_targets):
            raise ValueError("overflow_targets must be shares between 0 and 1")
        return self


def _describe(exc: ValidationError) -> str:
    """Every error of ``exc`` as ``field: message``, joined (no pydantic wording about URLs)."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown setting; expected one of {', '.join(ContextSettings.model_fields)}"
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


@dataclass(frozen=True)
class TrimEvent:
    """Passed to the checkpoint callback and the progress reporter before a trim."""

    stage: Stage
    """1 proactive, 2 validation, 3 reactive (after a provider rejection)."""
    attempt: int
    """Stage 3 attempt number (1-3); 0 for stages 1 and 2."""
    tokens_before: int
    """Estimated payload tokens before the trim."""
    target_tokens: int
    """What the trim aims for."""
    window_messages: int
    """Messages in the working window before the trim."""


@dataclass
class ContextStats:
    """What the last build did (for logs, tests and benchmarks)."""

    tokens: int = 0
    """Count of the returned payload (in the provider's shape) by the history's counter.
    Over :attr:`budget` only when the anchored estimate decided (see :attr:`budget`)."""
    messages: int = 0
    """Messages in the returned payload (OpenAI shape)."""
    trims: list[TrimEvent] = field(default_factory=list)
    """Trims this build performed."""
    truncated: int = 0
    """Messages whose content was truncated in the payload."""
    tool_tokens: int = 0
    """What the tool schemas sent with the payload cost (see :mod:`agentmem._tool_specs`)."""
    reserved_output_tokens: int = 0
    """Tokens kept free for the answer (``max_output_tokens``)."""
    budget: int = 0
    """What the messages had to fit: the window minus the tools and the reserved output.
    ``tokens + tool_tokens + reserved_output_tokens <= context_window``, or, when
    :attr:`estimate_source` is ``"anchored"``, ``anchored_tokens +
    reserved_output_tokens <= context_window``."""
    estimate_source: str = "ratio"
    """What decided that the payload fits without a trim and capped it: ``"ratio"``
    (:attr:`tokens`, the counter's count) or ``"anchored"`` (the counter's prefix-anchored
    estimate, see :meth:`~agentmem.tokens.LearningEstimator.anchored_estimate`, when the
    ratio count passed a trim threshold and the payload extends the last billed request)."""
    anchored_tokens: int | None = None
    """The anchored estimate of the whole request (tools included) when the ratio count
    passed a threshold and one was available; ``None`` otherwise."""
    anchor_margin: float | None = None
    """The learned margin of that anchored estimate (its new part counted ``1 +
    anchor_margin`` times, see :attr:`~agentmem.tokens.LearningEstimator.anchor_margin`);
    ``None`` when no anchored estimate was computed."""


@dataclass(frozen=True)
class ContextBuild:
    """What one build returned: the payload, the canonical messages behind it, its stats."""

    payload: list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]
    """OpenAI: a list of message dicts. Anthropic: ``(system, messages)``. The caller may
    modify it."""
    messages: tuple[Message, ...]
    """The payload in canonical (OpenAI) shape, internal fields included; do not modify."""
    stats: ContextStats
    """What the build did."""
    tools: tuple[dict[str, Any], ...] = ()
    """The tool specs counted with the payload, in the provider's shape (empty: none)."""


TurnNote = tuple[Message, Message]
"""``(history message, system note)``: the note is placed right after that message
in every payload that contains the message (compared by identity). The
semantic memory block of a user turn travels this way: in the payload, never
in the history."""

NoteMap = dict[int, tuple[Message, Message]]
"""Turn notes by ``id()`` of the history message they follow."""


def note_map(turn_notes: Sequence[TurnNote]) -> NoteMap:
    """``turn_notes`` keyed by the identity of the message each one follows.

    Raises:
        InvalidArgumentError: an entry is not a ``(message, system message)`` pair.
    """
    out: NoteMap = {}
    for i, pair in enumerate(turn_notes):
        if (
            not isinstance(pair, tuple)
            or len(pair) != 2
            or not isinstance(pair[0], Mapping)
            or not isinstance(pair[1], Mapping)
            or pair[1].get("role") != "system"
            or not isinstance(pair[1].get("content"), str)
        ):
            raise InvalidArgumentError(
                f"turn_notes[{i}] must be a (message, system message with text content) pair"
            )
        out[id(pair[0])] = (pair[0], pair[1])
    return out


class NoteCounts:
    """Token counts of turn notes, each note counted once per counter epoch."""

    def __init__(self) -> None:
        self._counts: dict[int, tuple[Message, int, int]] = {}
        self._last: tuple[NoteMap, int, int] | None = None  # (notes, epoch, total)

    def total(self, notes: NoteMap, counter: TokenCounter) -> int:
        """Tokens of ``notes`` (forgetting the counts of notes no longer given).

        The same map (by identity, never modified) in the same epoch costs nothing.
        """
        epoch = counter_epoch(counter)
        last = self._last
        if last is not None and last[0] is notes and last[1] == epoch:
            return last[2]
        fresh: dict[int, tuple[Message, int, int]] = {}
        total = 0
        for _, note in notes.values():
            hit = self._counts.get(id(note))
            if hit is None or hit[0] is not note or hit[2] != epoch:
                hit = (note, count_message(note, counter), epoch)
            fresh[id(note)] = hit
            total += hit[1]
        self._counts = fresh
        self._last = (notes, epoch, total)
        return total


def check_max_output_tokens(value: object) -> int | None:
    """``value`` when it is ``None`` or an int >= 0 (tokens reserved for the answer).

    Raises:
        InvalidArgumentError: anything else (a bool, a float, a negative number).
    """
    if value is not None and (type(value) is not int or value < 0):
        raise InvalidArgumentError(f"max_output_tokens must be None or an int >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class ToolCost:
    """Tool specs as one provider receives them, and what they cost a request."""

    specs: tuple[dict[str, Any], ...]
    """The specs in the provider's shape."""
    tokens: int
    """Their cost (:func:`agentmem._tool_specs.count_tools`)."""


class ToolCounts:
    """What a tools list costs, counted once per distinct list (by its JSON) and counter epoch.

    The list is converted and serialised on every call (cheap, and safe if the
    caller mutated it in place); only the token count, the expensive part, is
    cached, keyed by the provider and that JSON text.
    """

    MAX_ENTRIES = 8

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}  # -> (tokens, epoch)

    def cost(
        self, tools: Sequence[Mapping[str, Any]] | None, provider: str, counter: TokenCounter
    ) -> ToolCost:
        """The cost of ``tools`` sent to ``provider`` (``None`` or empty: nothing).

        Raises:
            InvalidArgumentError: ``tools`` is malformed (see
                :func:`agentmem._tool_specs.provider_tools`).
        """
        specs = provider_tools(tools, provider)
        if not specs:
            return ToolCost((), 0)
        text = tools_json(specs)
        epoch = counter_epoch(counter)
        key = (provider, text)
        hit = self._counts.get(key)
        if hit is None or hit[1] != epoch:
            if len(self._counts) >= self.MAX_ENTRIES:
                self._counts.clear()
            hit = (count_tools(text, len(specs), counter, provider), epoch)
            self._counts[key] = hit
        return ToolCost(tuple(specs), hit[0])


def session_tools(
    tools: Sequence[Mapping[str, Any]] | None,
    max_output_tokens: int | None,
    context_window: int | None,
) -> tuple[dict[str, Any], ...] | None:
    """Check a session's default ``tools`` and ``max_output_tokens``; a frozen copy of the tools.

    The copy is the session's own, so a host that later edits its list does not
    change what the session sends (pass ``tools=`` per call for that).

    Raises:
        ConfigurationError: malformed ``tools``, or a ``max_output_tokens`` that is
            not an int >= 0 (below ``context_window`` when that is given).
    """
    try:
        check_max_output_tokens(max_output_tokens)
        if tools is not None:
            tools_json(provider_tools(tools, "openai"))
    except InvalidArgumentError as exc:
        raise ConfigurationError(str(exc)) from None
    if (
        max_output_tokens is not None
        and context_window is not None
        and max_output_tokens >= context_window
    ):
        raise ConfigurationError(
            f"max_output_tokens ({max_output_tokens}) must be below the "
            f"context_window ({context_window}): nothing would be left for the prompt"
        )
    if tools is None:
        return None
    return tuple(copy.deepcopy(dict(spec)) for spec in tools)
