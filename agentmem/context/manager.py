"""ContextManager: the payload for each LLM call, within the model's window.

The pipeline: :meth:`ContextManager._build` runs named steps, each reading
one checked ``_Plan``, driven sync or async (a trim may await YaRN's
summarizer). Types are in :mod:`agentmem.context.types`; the state kept
between builds (one ``WindowState`` per working window in an
``IdentityCache``, every count keyed by the counter's epoch) in
``context/_state.py``; truncation, progress and the anchored decision in
``_shrink.py``, ``_progress.py`` and ``_anchored.py`` beside this module.

Every call needs a payload that (a) the provider accepts, (b) fits the
model's context window, and (c) changes as little as possible from one call
to the next, so provider prompt caching keeps paying off. The manager builds
it from four parts, in this order::

    system prompt (+ injections: long-term memory, persona)
    thread summary          (YaRN's <thread_summary>, when anything was trimmed)
    task anchor             (the newest real user message, pinned when a trim passed it)
    working window          (ShortTermMemory: the newest whole units)

Turn notes (``turn_notes=[(message, note)]``, the semantic memory block of a
user turn) ride in the payload only: each system ``note`` is placed right
after its history ``message`` wherever that message is sent, and counted in
every stage like the system prompt.

and keeps it inside the window in three stages. "The window" here is the
*budget*: ``context_window`` minus what the request's tool schemas cost (in
the provider's shape, see :mod:`agentmem._tool_specs`) and minus the
``max_output_tokens`` reserved for the answer; every threshold and target
below is a share of it:

1. **Proactive trim** (before building). When the estimate -- cached
   per-message counts, O(1) per turn -- passes ``proactive_threshold`` (75%)
   of the window (and the anchored estimate, when the counter has one and
   the payload extends the last billed request, does too: see
   ``context/_anchored.py``), whole units are evicted from the front of the working
   window into YaRN until the estimate is at ``trim_target`` (50%). The gap
   between the two is hysteresis: a trim frees a quarter of the window, so
   trims are rare and the prefix stays cacheable for long stretches.
2. **Validation trim** (just before sending). The repaired payload is counted
   exactly. If it (and the anchored estimate, as in stage 1) still passes
   ``validation_threshold`` (75%) -- a summary that grew, a synthesised
   result, a single giant tool output -- the window is trimmed to
   ``trim_target`` again, and if one unit alone is too big content is
   truncated *in the payload* (the stored history keeps every character):
   the summary first, then the largest tool outputs, then other messages,
   the anchor only if the window itself would be exceeded.
3. **Reactive trim** (after the provider rejected the request for length:
   :meth:`ContextManager.build_after_overflow`). Attempt 1 trims to 50% of
   the window, attempt 2 to 25%, attempt 3 keeps only the newest unit and
   gives it 10% of the window beside the system prompt, anchor, summary and
   recovery note (a short message is never cut). Each adds a *recovery injection*: a neutral
   note with the summary, the agent's todo list and recent git activity that
   tells the agent to keep working.

Priority when space is short: system prompt first, then the anchor, then the
newest units (a newest-first walk that keeps tool calls and their results
together), then the summary. Before every trim a progress checkpoint is
written through the ``checkpoint`` callback (the session writes
``memory/session_progress.md``).

Cost per turn is O(window): counts come from the history's per-message
cache, OpenAI views of stored messages are cached by identity, and the
payload is a structural copy (strings shared, containers fresh) rather than
a re-serialisation. The whole history is never recounted.

Guarantees: the payload satisfies the provider rules of
:mod:`agentmem.repair`; it always contains the system prompt and the newest
real user message; its estimate plus ``max_output_tokens`` never exceeds
the context window: the anchored estimate (tools included) when it decided
(``stats.estimate_source == "anchored"``; the ratio count may then be over
the budget), else its count by the history's token counter plus the tools'
count (the system prompt, tools and output alone exceeding the window raise
:class:`~agentmem.errors.ContextOverflowError`, because no payload can be
valid then); between trims, appending a message only appends to the payload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

from agentmem.context._anchored import anchored_fits, anchored_within, ratio_room
from agentmem.context._identity import IdentityCache
from agentmem.context._progress import (
    progress_of,
    render_progress,
)
from agentmem.context._state import (
    Repaired,
    WindowState,
    anthropic_extra,
    chat_visible,
    copy_view,
    other_payload,
    prompt_tokens_in,
)
from agentmem.context.types import (
    ContextBuild,
    ContextSettings,
    ContextStats,
    NoteCounts,
    NoteMap,
    Stage,
    ToolCost,
    ToolCounts,
    TrimEvent,
    TurnNote,
    check_max_output_tokens,
    note_map,
)
from agentmem.errors import ContextOverflowError, InvalidArgumentError
from agentmem.messages import Message, is_real_user, message_text
from agentmem.protocols import ProgressReporter, TokenCounter
from agentmem.repair import PROVIDERS, openai_view, task_chain_set
from agentmem.stm import ShortTermMemory
from agentmem.tokens import REPLY_PRIMING_TOKENS, count_message
from agentmem.yarn import SummaryRequest, YaRN

__all__ = ["RECOVERY_TAG", "WINDOW_STATES", "ContextManager", "check_overflow_attempt"]

_log = logging.getLogger("agentmem.context")

RECOVERY_TAG = "context_recovery"


WINDOW_STATES = 4
"""Working windows whose build state one manager keeps (least recently built dropped)."""


class _Plan(NamedTuple):
    """One build's fixed inputs, checked and resolved: what every pipeline step reads.

    (A NamedTuple rather than a frozen dataclass: one is made per build, and a
    tuple is several times cheaper to construct.)
    """

    window: ShortTermMemory
    yarn: YaRN | None
    state: WindowState
    attempt: int  # 0: stages 1-2; 1-3: a stage-3 attempt
    provider: str
    injections: Sequence[str]
    chain: frozenset[Any] | None
    force_pad: bool
    notes: NoteMap
    tool_cost: ToolCost
    reserved_output: int
    limit: int  # the budget: the window minus the tools and the reserved output

    @property
    def counter(self) -> TokenCounter:
        return self.window.history.token_counter

    @property
    def reserved(self) -> int:
        return self.tool_cost.tokens + self.reserved_output


class ContextManager:
    """Builds provider payloads that fit the window (see the module docstring).

    Args:
        settings: A :class:`ContextSettings` or a mapping of its fields.
        window: The working window to build from (its history is the
            conversation). Bound here, a build needs no ``window`` argument.
            A build may name another window: the manager keeps each window's
            build state apart (for the :data:`WINDOW_STATES` most recently
            built), so switching windows neither resets nor mixes them.
        yarn: Archive that receives evicted messages and supplies the summary.
        checkpoint: Called with a :class:`TrimEvent` before every trim (the
            session writes its progress checkpoint there). Errors are logged,
            never raised: a failed checkpoint must not stop the agent.
        reporter: Receives ``context.trim`` events.

    Raises:
        InvalidArgumentError: ``settings`` is neither settings nor a mapping.
        ConfigurationError: a setting is out of range (the message names it).
    """

    def __init__(
        self,
        settings: ContextSettings | Mapping[str, Any] | None = None,
        *,
        window: ShortTermMemory | None = None,
        yarn: YaRN | None = None,
        checkpoint: Callable[[TrimEvent], None] | None = None,
        reporter: ProgressReporter | None = None,
    ) -> None:
        if settings is None:
            settings = ContextSettings()
        elif isinstance(settings, Mapping):
            settings = ContextSettings(**settings)
        elif not isinstance(settings, ContextSettings):
            raise InvalidArgumentError(
                f"settings must be ContextSettings or a mapping, got {type(settings).__name__}"
            )
        self.settings = settings
        self.window = window
        self.yarn = yarn
        self.checkpoint = checkpoint
        self.reporter = reporter
        self.last_build: ContextBuild | None = None
        """The result of the newest build, or ``None`` before the first one."""
        # The build state of each working window, kept apart (see WindowState).
        self._windows: IdentityCache[ShortTermMemory, WindowState] = IdentityCache(WINDOW_STATES)
        self._note_counts = NoteCounts()
        self._tool_counts = ToolCounts()
        # The checked map of the newest turn-notes tuple: the session passes the same
        # tuple until a turn adds a note, so it is checked once.
        self._notes: IdentityCache[Sequence[TurnNote], NoteMap] = IdentityCache(1)

    @property
    def stats(self) -> ContextStats:
        """Stats of the newest build (empty before the first one)."""
        return self.last_build.stats if self.last_build is not None else ContextStats()

    # ------------------------------------------------------------------ public

    def build(
        self,
        window: ShortTermMemory | None = None,
        yarn: YaRN | None = None,
        *,
        provider: str = "openai",
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
        turn_notes: Sequence[TurnNote] = (),
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        """The payload for the next call (stages 1 and 2).

        Args:
            window: The working window; the bound one when omitted.
            yarn: Archive that receives evicted messages and supplies the
                summary; the bound one when omitted.
            provider: ``"openai"``, ``"anthropic"`` or ``"openai-responses"``.
            injections: Texts appended to the system prompt (long-term memory,
                persona, memory context), in order.
            task_chain: Active time-machine task ids (messages of other tasks
                are left out), or ``None``.
            force_reasoning_content_pad: See :meth:`MessageHistory.to_api`.
            turn_notes: ``(message, note)`` pairs: system message ``note`` goes right
                after history ``message`` (by identity) whenever it is sent. Pass the
                same note objects on every build (see :data:`TurnNote`).
            tools: The tool specs sent with the request (OpenAI Chat, OpenAI
                Responses or Anthropic shape); their cost in ``provider``'s shape
                comes off the window. ``None`` or empty: no tools.
            max_output_tokens: Tokens reserved for the answer (``None``: 0).

        Returns:
            OpenAI: a list of message dicts. Anthropic: ``(system, messages)``.
            A fresh structure the caller may modify.

        Raises:
            InvalidArgumentError: unknown provider, no window, malformed ``tools``
                or a ``max_output_tokens`` that is not an int >= 0.
            ContextOverflowError: the system prompt (beside the tools and the
                reserved output) does not fit the window.
        """
        return self.build_result(
            window,
            yarn,
            provider=provider,
            injections=injections,
            task_chain=task_chain,
            force_reasoning_content_pad=force_reasoning_content_pad,
            turn_notes=turn_notes,
            tools=tools,
            max_output_tokens=max_output_tokens,
        ).payload

    def build_after_overflow(
        self,
        window: ShortTermMemory | None = None,
        yarn: YaRN | None = None,
        attempt: int = 1,
        *,
        provider: str = "openai",
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
        turn_notes: Sequence[TurnNote] = (),
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        """The payload after the provider rejected the previous one for length (stage 3).

        Attempts 1 and 2 trim to ``overflow_targets[0]`` and ``[1]`` (50% and
        25%); attempt 3 keeps only the newest unit and gives it
        ``overflow_targets[2]`` of the window. Each adds the recovery injection.

        Raises:
            InvalidArgumentError: ``attempt`` is not 1, 2 or 3, or unknown provider.
        """
        check_overflow_attempt(attempt)
        return self.build_result(
            window,
            yarn,
            attempt=attempt,
            provider=provider,
            injections=injections,
            task_chain=task_chain,
            force_reasoning_content_pad=force_reasoning_content_pad,
            turn_notes=turn_notes,
            tools=tools,
            max_output_tokens=max_output_tokens,
        ).payload

    def build_result(
        self,
        window: ShortTermMemory | None = None,
        yarn: YaRN | None = None,
        *,
        attempt: int = 0,
        provider: str = "openai",
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
        turn_notes: Sequence[TurnNote] = (),
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> ContextBuild:
        """Like :meth:`build` (``attempt=0``) or :meth:`build_after_overflow`, with the stats.

        A trim's compression runs YaRN's summarizer synchronously; an async
        summarizer is skipped with a warning (the extractive summary stands):
        use :meth:`abuild_result` to await it.

        Returns:
            A :class:`ContextBuild`: the payload, the canonical messages sent
            and what the build did (also kept as :attr:`last_build`).

        Raises:
            InvalidArgumentError: ``attempt`` is not 0-3, unknown provider, or no window.
            ContextOverflowError: the system prompt alone does not fit the window.
        """
        plan = self._plan(
            window,
            yarn,
            attempt,
            provider,
            injections,
            task_chain,
            force_reasoning_content_pad,
            turn_notes,
            tools,
            max_output_tokens,
        )
        steps = self._build(plan)
        try:
            while True:
                owner, request = next(steps)
                owner.summarize(request)
        except StopIteration as stop:
            result: ContextBuild = stop.value
        finally:
            steps.close()
        self.last_build = result
        return result

    async def abuild_result(
        self,
        window: ShortTermMemory | None = None,
        yarn: YaRN | None = None,
        *,
        attempt: int = 0,
        provider: str = "openai",
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
        turn_notes: Sequence[TurnNote] = (),
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> ContextBuild:
        """The async twin of :meth:`build_result`: a trim awaits YaRN's summarizer.

        The same pipeline (:meth:`_build`), paused where a trim's compression
        owes a summary; the payload is the one :meth:`build_result` makes when
        the summarizer gives the same text. Raises as :meth:`build_result`.
        """
        plan = self._plan(
            window,
            yarn,
            attempt,
            provider,
            injections,
            task_chain,
            force_reasoning_content_pad,
            turn_notes,
            tools,
            max_output_tokens,
        )
        steps = self._build(plan)
        try:
            while True:
                owner, request = next(steps)
                await owner.asummarize(request)
        except StopIteration as stop:
            result: ContextBuild = stop.value
        finally:
            steps.close()
        self.last_build = result
        return result

    # ------------------------------------------------------------------ pipeline

    def _plan(
        self,
        window: ShortTermMemory | None,
        yarn: YaRN | None,
        attempt: int,
        provider: str,
        injections: Sequence[str],
        task_chain: Collection[int] | None,
        force_pad: bool,
        turn_notes: Sequence[TurnNote],
        tools: Sequence[Mapping[str, Any]] | None,
        max_output_tokens: int | None,
    ) -> _Plan:
        """Check a build's arguments (eagerly, before any step runs) and resolve them."""
        if isinstance(attempt, bool) or attempt not in (0, 1, 2, 3):
            raise InvalidArgumentError(f"attempt must be 0, 1, 2 or 3, got {attempt!r}")
        if provider not in PROVIDERS:
            raise InvalidArgumentError(
                f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}"
            )
        reserved_output = check_max_output_tokens(max_output_tokens) or 0
        if window is None:
            window = self.window
        if yarn is None:
            yarn = self.yarn
        if not isinstance(window, ShortTermMemory):
            raise InvalidArgumentError(
                "window must be a ShortTermMemory (pass one here or to the constructor), "
                f"got {type(window).__name__}"
            )
        tool_cost = self._tool_counts.cost(tools, provider, window.history.token_counter)
        return _Plan(
            window=window,
            yarn=yarn,
            state=self._windows.get_or_make(window, lambda _: WindowState()),
            attempt=attempt,
            provider=provider,
            injections=injections,
            chain=task_chain_set(task_chain),
            force_pad=force_pad,
            notes=self._note_map(turn_notes),
            tool_cost=tool_cost,
            reserved_output=reserved_output,
            limit=self.settings.context_window - tool_cost.tokens - reserved_output,
        )

    def _note_map(self, turn_notes: Sequence[TurnNote]) -> NoteMap:
        """:func:`note_map` of ``turn_notes``, reused while the same tuple is passed."""
        if type(turn_notes) is not tuple:
            return note_map(turn_notes)
        return self._notes.get_or_make(turn_notes, note_map)

    def _build(self, plan: _Plan) -> Generator[tuple[YaRN, SummaryRequest], None, ContextBuild]:
        """The pipeline; yields ``(yarn, request)`` for each summary a trim's compression owes.

        The driver settles it (``yarn.summarize`` or ``await yarn.asummarize``)
        and resumes; the return value is the build. Nothing else differs
        between the sync and the async build. Every step works within
        ``plan.limit``: the window minus the tool schemas and the reserved output.
        """
        stats = ContextStats(
            tool_tokens=plan.tool_cost.tokens,
            reserved_output_tokens=plan.reserved_output,
            budget=plan.limit,
        )
        system, system_tokens = plan.state.system_message(plan.window.history, plan.injections)
        self._check_system_fits(plan, system_tokens)
        # Turn notes (semantic memory blocks) sit beside their turns; trims count them
        # like the system prompt, as a fixed cost of the payload.
        fixed_tokens = system_tokens + self._note_counts.total(plan.notes, plan.counter)
        yield from self._trim_before_repair(plan, system, fixed_tokens, stats)
        repaired = yield from self._repair_and_validate(plan, system, fixed_tokens, stats)
        messages, total = repaired.messages, repaired.tokens
        if plan.attempt:
            recovery = self._recovery_message(plan.window, plan.yarn)
            recovery_tokens = count_message(recovery, plan.counter)
            messages = [*messages, recovery]
            total += recovery_tokens
            ceiling = self._overflow_ceiling(plan, messages, system_tokens + recovery_tokens)
        else:
            ceiling = max(
                int(self.settings.validation_threshold * plan.limit),
                system_tokens + REPLY_PRIMING_TOKENS,
            )
        messages, total = self._fit(plan, messages, total, ceiling, system, stats)
        stats.messages = len(messages)
        payload = self._render(plan, messages, plan.force_pad or repaired.reasoning)
        return ContextBuild(payload, tuple(messages), stats, plan.tool_cost.specs)

    def _check_system_fits(self, plan: _Plan, system_tokens: int) -> None:
        """Raise :class:`ContextOverflowError` when no payload can fit beside the system prompt."""
        if system_tokens + REPLY_PRIMING_TOKENS <= plan.limit:
            return
        extra = (
            f" beside the tool schemas ({plan.tool_cost.tokens} tokens) and the reserved "
            f"output ({plan.reserved_output} tokens)"
            if plan.reserved
            else ""
        )
        window = self.settings.context_window
        raise ContextOverflowError(
            f"the system prompt (with injections) costs {system_tokens} tokens; it does "
            f"not fit the {window}-token context window{extra}, so no payload can fit",
            needed=system_tokens + REPLY_PRIMING_TOKENS + plan.reserved,
            window=window,
        )

    def _trim_before_repair(
        self, plan: _Plan, system: Message | None, fixed_tokens: int, stats: ContextStats
    ) -> Generator[tuple[YaRN, SummaryRequest], None, None]:
        """Stage 3 (an overflow attempt: always) or stage 1 (the estimate passed the threshold)."""
        settings = self.settings
        if plan.attempt:
            target = int(settings.overflow_targets[plan.attempt - 1] * plan.limit)
            yield from self._trim(plan, fixed_tokens, stats, stage=3, target=target)
            return
        threshold = settings.proactive_threshold * plan.limit
        estimate = self._estimate(plan, fixed_tokens)
        repaired = partial(
            plan.state.repaired, plan.window, plan.yarn, system, plan.chain, plan.notes
        )
        if estimate > min(threshold, ratio_room(plan.counter, plan.limit)) and not (
            self._anchored_fits(plan, repaired, threshold, stats)
        ):
            target = int(settings.trim_target * plan.limit)
            yield from self._trim(plan, fixed_tokens, stats, stage=1, target=target)

    def _anchored_fits(
        self,
        plan: _Plan,
        repaired: Callable[[], Repaired],
        threshold: float,
        stats: ContextStats,
    ) -> bool:
        """:func:`~agentmem.context._anchored.anchored_fits` for stages 1-2 (never stage 3)."""
        return not plan.attempt and anchored_fits(
            plan.counter,
            lambda: repaired().messages,
            threshold,
            tools=plan.tool_cost.specs,
            tool_tokens=plan.tool_cost.tokens,
            stats=stats,
            known=None if stats.trims else stats.anchored_tokens,  # the same payload
        )

    def _repair_and_validate(
        self, plan: _Plan, system: Message | None, fixed_tokens: int, stats: ContextStats
    ) -> Generator[tuple[YaRN, SummaryRequest], None, Repaired]:
        """The repaired payload; stage 2 trims and repairs again when its exact count is high."""
        repaired = plan.state.repaired(plan.window, plan.yarn, system, plan.chain, plan.notes)
        limit = plan.limit
        threshold = self.settings.validation_threshold * limit
        fits = repaired.tokens <= min(threshold, ratio_room(plan.counter, limit)) or (
            self._anchored_fits(plan, lambda: repaired, threshold, stats)
        )
        if not plan.attempt and not fits:
            target = int(self.settings.trim_target * limit)
            yield from self._trim(plan, fixed_tokens, stats, stage=2, target=target)
            repaired = plan.state.repaired(plan.window, plan.yarn, system, plan.chain, plan.notes)
        return repaired

    def _overflow_ceiling(self, plan: _Plan, messages: Sequence[Message], fixed: int) -> int:
        """What a stage-3 payload may cost; ``fixed`` is its system prompt and recovery note."""
        settings = self.settings
        limit = plan.limit
        share = int(settings.overflow_targets[plan.attempt - 1] * limit)
        fixed += REPLY_PRIMING_TOKENS
        if plan.attempt != 3:
            return max(share, fixed)
        # Only the newest unit is left: it gets its share of the window beside
        # the parts that are never cut and the summary's reserve.
        history = plan.window.history
        anchor = next((m for m in reversed(messages) if is_real_user(m)), None)
        summary_tokens = plan.state.summary_message(plan.yarn, plan.counter)[1]
        reserve = int(settings.summary_max_fraction * limit)
        index = history.last_real_user_index()
        if index is not None and history[index] is anchor:
            fixed += history.message_tokens(index)
        elif anchor is not None:
            fixed += count_message(anchor, plan.counter)
        return min(fixed + min(summary_tokens, reserve) + share, limit)

    def _fit(
        self,
        plan: _Plan,
        messages: list[Message],
        total: int,
        ceiling: int,
        system: Message | None,
        stats: ContextStats,
    ) -> tuple[list[Message], int]:
        """Cut content down to ``ceiling`` (see :mod:`._shrink`); raise if even that cannot fit.

        Sets ``stats.tokens`` to the payload's count in the provider's shape.
        """
        # Anthropic's shape adds text of its own (a system note after the first turn is
        # sent as tagged user text, an empty turn as a placeholder): it takes room too.
        added = anthropic_extra(messages, plan.counter) if plan.provider == "anthropic" else 0
        room = plan.limit - added
        # A payload the anchored estimate let through stage 2 is capped by that estimate
        # (its ratio count may pass the budget); else by the ratio count (see _anchored).
        anchored = anchored_within(stats, room)
        if not anchored:
            ceiling = min(ceiling, room, ratio_room(plan.counter, plan.limit) - added)
        if not anchored and total > ceiling:
            messages, total = self._shrink(plan, messages, stats, ceiling, system, room)
        if not anchored and total > room:
            total += added
            window = self.settings.context_window
            raise ContextOverflowError(
                f"cannot fit the conversation into {plan.limit} tokens (the minimum is {total})"
                + (
                    f"; the {window}-token window also holds the tool schemas "
                    f"({plan.tool_cost.tokens} tokens) and the reserved output "
                    f"({plan.reserved_output})"
                    if plan.reserved
                    else ""
                ),
                needed=total + plan.reserved,
                window=window,
            )
        stats.tokens = total + added
        return messages, total

    # ------------------------------------------------------------------ parts

    def _estimate(self, plan: _Plan, system_tokens: int) -> int:
        """Cheap payload estimate from cached counts only."""
        window = plan.window
        # The window's own count includes a prompt at index 0, already in system_tokens.
        total = system_tokens + window.token_count() - prompt_tokens_in(window)
        return total + REPLY_PRIMING_TOKENS + plan.state.summary_message(plan.yarn, plan.counter)[1]

    def _trim(
        self,
        plan: _Plan,
        system_tokens: int,
        stats: ContextStats,
        *,
        stage: Stage,
        target: int,
    ) -> Generator[tuple[YaRN, SummaryRequest], None, None]:
        """Evict to ``target`` into YaRN; yields the summary the compression owes, if any."""
        window, yarn, attempt = plan.window, plan.yarn, plan.attempt
        history = window.history
        stats.estimate_source = "ratio"  # a trimmed payload no longer extends the bill
        if stage != 3 and len(window.unit_starts()) <= 1:
            # Only the newest unit is left: nothing can be evicted, and the payload-level
            # truncation that follows handles an oversized unit. Not a trim, no checkpoint.
            return
        before = self._estimate(plan, system_tokens)
        event = TrimEvent(
            stage=stage,
            attempt=attempt,
            tokens_before=before,
            target_tokens=target,
            window_messages=window.message_count(),
        )
        stats.trims.append(event)
        self._notify(event)
        reserve = int(self.settings.summary_max_fraction * plan.limit)
        budget = target - system_tokens - reserve - REPLY_PRIMING_TOKENS + prompt_tokens_in(window)
        if stage == 3 and attempt == 3:
            evicted = window.evict_to(max_messages=1)
        else:
            evicted = window.evict_to(max_tokens=max(budget, 0))
        request = None
        if yarn is not None and evicted:
            prompt = history[0] if len(history) else None
            anchor = history.last_real_user_index()
            request = yarn.fold(
                [m for m in evicted if m is not prompt],
                current_task=message_text(history[anchor]) if anchor is not None else None,
            )
        plan.state.after_trim(window.messages())
        self._report_trim(event, len(evicted))
        if yarn is not None and request is not None:
            # Last, so the manager's state is settled even if the summary is interrupted
            # (or its await cancelled): the driver runs or awaits it, then resumes.
            yield yarn, request

    def _notify(self, event: TrimEvent) -> None:
        if self.checkpoint is None:
            return
        try:
            self.checkpoint(event)
        except Exception:
            _log.warning(
                "progress checkpoint failed before a stage-%s trim", event.stage, exc_info=True
            )

    def _report_trim(self, event: TrimEvent, evicted: int) -> None:
        if self.reporter is None:
            return
        try:
            self.reporter.report(
                "context.trim",
                {
                    "stage": event.stage,
                    "attempt": event.attempt,
                    "tokens_before": event.tokens_before,
                    "target_tokens": event.target_tokens,
                    "evicted_messages": evicted,
                },
            )
        except Exception:  # a reporter must never break the agent
            _log.warning("progress reporter failed on context.trim", exc_info=True)

    def _shrink(
        self,
        plan: _Plan,
        messages: Sequence[Message],
        stats: ContextStats,
        ceiling: int,
        system: Message | None,
        anchor_ceiling: int,
    ) -> tuple[list[Message], int]:
        """Truncate content in the payload until it fits ``ceiling`` (see :mod:`._shrink`).

        Counts come from the caches (history, system prompt, summary); only
        synthesised entries are counted here, and they are small.
        """
        window, yarn = plan.window, plan.yarn
        history = window.history
        counter = history.token_counter
        known: IdentityCache[Message, int] = IdentityCache()
        for i in window.indices():
            known.put(history[i], i)
        if window.start > 0 and history.has_system_prompt():
            known.put(history[0], 0)
        summary, summary_tokens = plan.state.summary_message(plan.yarn, plan.counter)
        system_cache = plan.state.system

        def count(msg: Message) -> int:
            i = known.get(msg)
            if i is not None:
                return history.message_tokens(i)
            if msg is system and system_cache is not None and system_cache.message is msg:
                return system_cache.tokens
            if msg is summary:
                return summary_tokens
            return count_message(msg, counter)

        out, total, truncated = plan.state.shrinker.shrink(
            messages,
            count=count,
            counter=counter,
            summary=yarn.render_message if yarn is not None else None,
            system=system,
            ceiling=ceiling,
            anchor_ceiling=anchor_ceiling,
            summary_reserve=int(self.settings.summary_max_fraction * anchor_ceiling),
        )
        stats.truncated += truncated
        return out, total

    def _recovery_message(self, window: ShortTermMemory, yarn: YaRN | None) -> Message:
        """The neutral note added to every stage-3 payload."""
        progress = progress_of(window.history, yarn.summary if yarn is not None else None)
        lines = [
            f"<{RECOVERY_TAG}>",
            "The conversation was shortened to fit the model's context window. Earlier "
            "messages are kept in the session archive and summarized in <thread_summary>.",
            *render_progress(progress),
            "Continue with the current task from where you left off.",
            f"</{RECOVERY_TAG}>",
        ]
        return {"role": "system", "content": "\n".join(lines), "synthesized": True}

    def _render(
        self, plan: _Plan, messages: Sequence[Message], pad: bool
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        if plan.provider != "openai":
            return other_payload(plan.provider, messages, plan.state)
        messages = chat_visible(messages)  # reasoning / hosted-tool-only messages have no Chat form
        views = plan.state.views.get_or_make_many(messages, openai_view)
        out = [copy_view(view) for view in views]
        if pad:
            for msg, fresh in zip(messages, out, strict=True):
                if msg["role"] == "assistant" and "reasoning_content" not in fresh:
                    fresh["reasoning_content"] = ""
        return out


def check_overflow_attempt(attempt: Any) -> None:
    """Raise :class:`InvalidArgumentError` unless ``attempt`` is 1, 2 or 3 (a stage-3 attempt)."""
    if type(attempt) is not int or attempt not in (1, 2, 3):
        raise InvalidArgumentError(f"attempt must be 1, 2 or 3, got {attempt!r}")
