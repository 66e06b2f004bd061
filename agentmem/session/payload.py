"""The payload half of a session: ``context`` and its twins, built from the session's parts.

:class:`PayloadMixin` holds the four context builders of
:class:`~agentmem.session.Session` (:meth:`~PayloadMixin.context`,
:meth:`~PayloadMixin.acontext`, :meth:`~PayloadMixin.context_after_overflow`,
:meth:`~PayloadMixin.acontext_after_overflow`) and what they share: checking
a call's arguments, the fixed system-prompt blocks (long-term memory, topic
files, persona), the active task chain, and what a build leaves behind (the
state saved after a trim, the payload the memory update continues). The
building itself is the :class:`~agentmem.context.ContextManager`'s; the
state read here lives on the session (declared below, set by
``Session.__init__``). Each builder comes in a sync and an async twin, with
three typed overloads each, which is why this half is most of the lines.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal, overload

from agentmem._events import operation
from agentmem._validate import check_injections
from agentmem.context import ContextBuild, ContextManager, check_overflow_attempt
from agentmem.errors import InvalidArgumentError
from agentmem.history import MessageHistory
from agentmem.protocols import CalibratingCounter
from agentmem.semantic.extension import SessionExtensions
from agentmem.session.wiring import MAX_TOKENS, SessionWiring
from agentmem.stm import ShortTermMemory
from agentmem.time_machine import TimeMachine
from agentmem.tokens import LearningEstimator

__all__ = ["PayloadMixin"]


class PayloadMixin:
    """The context builders of :class:`~agentmem.session.Session` (its state lives there)."""

    id: str
    tools: Sequence[Mapping[str, Any]] | None
    max_output_tokens: int | None
    history: MessageHistory
    window: ShortTermMemory
    context_manager: ContextManager
    time_machine: TimeMachine
    ltm_prompt: str
    topics_prompt: str
    persona_prompt: str
    _wiring: SessionWiring
    _ext: SessionExtensions
    _sent: tuple[int, int]
    _calibration: CalibratingCounter | None

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...
        def _save_state(self) -> None: ...

    @overload
    def context(
        self,
        provider: Literal["openai", "openai-responses"] = ...,
        tools: Sequence[Mapping[str, Any]] | None = ...,
        max_output_tokens: int | None = ...,
        *,
        injections: Sequence[str] = ...,
        task_chain: Collection[int] | None = ...,
        force_reasoning_content_pad: bool = ...,
    ) -> list[dict[str, Any]]: ...

    @overload
    def context(
        self,
        provider: Literal["anthropic"],
        tools: Sequence[Mapping[str, Any]] | None = ...,
        max_output_tokens: int | None = ...,
        *,
        injections: Sequence[str] = ...,
        task_chain: Collection[int] | None = ...,
        force_reasoning_content_pad: bool = ...,
    ) -> tuple[str | None, list[dict[str, Any]]]: ...

    @overload
    def context(
        self,
        provider: str,
        tools: Sequence[Mapping[str, Any]] | None = ...,
        max_output_tokens: int | None = ...,
        *,
        injections: Sequence[str] = ...,
        task_chain: Collection[int] | None = ...,
        force_reasoning_content_pad: bool = ...,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]: ...

    def context(
        self,
        provider: str = "openai",
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        *,
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        """The API-ready payload for the next call, within the context window (stages 1-2).

        A trim runs the memory's summarizer synchronously; an async one is
        skipped with a warning (the extractive summary stands): use
        :meth:`acontext` to await it.

        Args:
            provider: ``"openai"``, ``"anthropic"`` or ``"openai-responses"``.
            tools: The tool specs sent with this request (OpenAI Chat, OpenAI
                Responses or Anthropic shape, any of them for any provider);
                their cost in ``provider``'s shape is taken off the window
                first. ``None``: the session's default (:attr:`tools`); ``[]``:
                none.
            max_output_tokens: Tokens kept free for the answer (the request's
                ``max_tokens``); ``None``: the session's default (0 without one).
                The payload, the tools and this reserve together fit
                ``context_window``.
            injections: Extra system-prompt texts for this call (persona, memory context).
            task_chain: Active task ids (time machine); ``None`` for all.
            force_reasoning_content_pad: Pad ``reasoning_content`` on every assistant message.

        Returns:
            OpenAI: list of messages. Anthropic: ``(system, messages)``.
            OpenAI Responses: list of input items.

        Raises:
            InvalidArgumentError: unknown provider, ``injections`` not a
                sequence of strings, a bad ``task_chain``, malformed ``tools``
                or a ``max_output_tokens`` that is not an int >= 0.
            ContextOverflowError: the system prompt, the tools and the
                reserved output alone leave no room in the window.
        """
        return self._finish_build(
            self.context_manager.build_result(
                **self._build_args(
                    provider,
                    injections,
                    task_chain,
                    force_reasoning_content_pad,
                    tools=tools,
                    max_output_tokens=max_output_tokens,
                )
            )
        )

    @overload
    async def acontext(
        self,
        provider: Literal["openai", "openai-responses"] = ...,
        tools: Sequence[Mapping[str, Any]] | None = ...,
        max_output_tokens: int | None = ...,
        *,
        injections: Sequence[str] = ...,
        task_chain: Collection[int] | None = ...,
        force_reasoning_content_pad: bool = ...,
    ) -> list[dict[str, Any]]: ...

    @overload
    async def acontext(
        self,
        provider: Literal["anthropic"],
        tools: Sequence[Mapping[str, Any]] | None = ...,
        max_output_tokens: int | None = ...,
        *,
        injections: Sequence[str] = ...,
        task_chain: Collection[int] | None = ...,
        force_reasoning_content_pad: bool = ...,
    ) -> tuple[str | None, list[dict[str, Any]]]: ...

    @overload
    async def acontext(
        self,
        provider: str,
        tools: Sequence[Mapping[str, Any]] | None = ...,
        max_output_tokens: int | None = ...,
        *,
        injections: Sequence[str] = ...,
        task_chain: Collection[int] | None = ...,
        force_reasoning_content_pad: bool = ...,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]: ...

    async def acontext(
        self,
        provider: str = "openai",
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        *,
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        """The async twin of :meth:`context`: a trim awaits an async summarizer.

        Use it when the memory's summarizer is async (an
        :class:`~agentmem.yarn.LLMSummarizer` over an async LLM);
        :meth:`context` would keep only the extractive summary and log a
        warning. Same arguments, same payload, same errors.
        """
        return self._finish_build(
            await self.context_manager.abuild_result(
                **self._build_args(
                    provider,
                    injections,
                    task_chain,
                    force_reasoning_content_pad,
                    tools=tools,
                    max_output_tokens=max_output_tokens,
                )
            )
        )

    def context_after_overflow(
        self,
        attempt: int,
        provider: str = "openai",
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        *,
        reported_tokens: int | None = None,
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        """The payload after the provider rejected the last one for length (stage 3).

        Args:
            attempt: 1, 2 or 3: trims to 50%, 25% and the minimum.
            provider: ``"openai"``, ``"anthropic"`` or ``"openai-responses"``.
            tools: As for :meth:`context`.
            max_output_tokens: As for :meth:`context`.
            reported_tokens: The prompt size the provider's error reported,
                if it did; calibrates a learning token estimator.
            injections: As for :meth:`context`.
            task_chain: As for :meth:`context`.
            force_reasoning_content_pad: As for :meth:`context`.

        Raises:
            InvalidArgumentError: ``attempt`` is not the int 1, 2 or 3,
                ``reported_tokens`` is not ``None`` or a token count, or an
                argument :meth:`context` refuses.
        """
        args = self._build_args(
            provider,
            injections,
            task_chain,
            force_reasoning_content_pad,
            tools=tools,
            max_output_tokens=max_output_tokens,
            attempt=attempt,
            reported_tokens=reported_tokens,
        )
        with self._recovering(attempt, provider) as done:
            result = self.context_manager.build_result(**args)
            done.update(tokens=result.stats.tokens, messages=result.stats.messages)
        return self._finish_build(result)

    async def acontext_after_overflow(
        self,
        attempt: int,
        provider: str = "openai",
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        *,
        reported_tokens: int | None = None,
        injections: Sequence[str] = (),
        task_chain: Collection[int] | None = None,
        force_reasoning_content_pad: bool = False,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        """The async twin of :meth:`context_after_overflow` (see :meth:`acontext`)."""
        args = self._build_args(
            provider,
            injections,
            task_chain,
            force_reasoning_content_pad,
            tools=tools,
            max_output_tokens=max_output_tokens,
            attempt=attempt,
            reported_tokens=reported_tokens,
        )
        with self._recovering(attempt, provider) as done:
            result = await self.context_manager.abuild_result(**args)
            done.update(tokens=result.stats.tokens, messages=result.stats.messages)
        return self._finish_build(result)

    def _recovering(self, attempt: int, provider: str) -> AbstractContextManager[dict[str, Any]]:
        """``context.overflow.started``/``.finished`` around one stage-3 build."""
        return operation(
            self._wiring.reporter,
            "context.overflow",
            session_id=self.id,
            attempt=attempt,
            provider=provider,
        )

    def _build_args(
        self,
        provider: str,
        injections: Sequence[str],
        task_chain: Collection[int] | None,
        force_reasoning_content_pad: bool,
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        max_output_tokens: int | None,
        attempt: int | None = None,
        reported_tokens: int | None = None,
    ) -> dict[str, Any]:
        """Check a context call's arguments; the keyword arguments of its build.

        ``attempt`` is ``None`` for :meth:`context` and the stage-3 attempt for
        :meth:`context_after_overflow`, whose reported prompt size (if any)
        calibrates the token counter here, before the build.
        """
        self._check_open()
        if attempt is not None:
            check_overflow_attempt(attempt)
            if reported_tokens is not None and (
                type(reported_tokens) is not int or not 0 <= reported_tokens <= MAX_TOKENS
            ):
                raise InvalidArgumentError(
                    "reported_tokens must be None or an int from 0 to 2**53-1, "
                    f"got {reported_tokens!r}"
                )
        check_injections(injections)
        if reported_tokens is not None:
            self._calibrate(reported_tokens)
        return {
            "attempt": attempt or 0,
            "provider": provider,
            "injections": self._with_ltm(injections),
            "task_chain": self._chain(task_chain),
            "force_reasoning_content_pad": force_reasoning_content_pad,
            "turn_notes": self._ext.notes(),
            # The session's defaults (Memory.session) stand in for an omitted argument.
            "tools": self.tools if tools is None else tools,
            "max_output_tokens": (
                self.max_output_tokens if max_output_tokens is None else max_output_tokens
            ),
        }

    def _with_ltm(self, injections: Sequence[str]) -> Sequence[str]:
        fixed = tuple(p for p in (self.ltm_prompt, self.topics_prompt, self.persona_prompt) if p)
        return (*fixed, *injections) if fixed else injections

    def _chain(self, task_chain: Collection[int] | None) -> Collection[int] | None:
        """The caller's task chain, or the time machine's active chain once tasks exist."""
        if task_chain is None and self.time_machine.has_tasks:
            return self.time_machine.active_chain_set()
        return task_chain

    def _finish_build(
        self, result: ContextBuild
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        self._sent = (len(self.history), self.history.revision)  # the memory update continues it
        if result.stats.trims:
            # Blocks of user turns the trim evicted are no longer needed (nor counted).
            alive = {id(m) for m in self.window.messages()}  # pins included
            self._ext.keep_only(lambda m: id(m) in alive)
            self._save_state()
        return result.payload

    def prompt_estimate(self) -> int | None:
        """The estimated prompt tokens of the last :meth:`context` payload, tools included.

        With a :class:`~agentmem.tokens.LearningEstimator` this is its prefix-anchored estimate
        (:meth:`~agentmem.tokens.LearningEstimator.estimate_payload`): the
        provider's bill for the previous payload plus the new messages, when
        the payload extends it (the common case between trims), else the
        ratio estimate. With another counter it is the build's own count
        (``stats.tokens + stats.tool_tokens``). ``None`` before the first build.
        """
        sent = self.context_manager.last_build
        if sent is None:
            return None
        if isinstance(self._calibration, LearningEstimator):
            return self._calibration.estimate_payload(sent.messages, tools=sent.tools or None)
        return sent.stats.tokens + sent.stats.tool_tokens

    def _calibrate(self, prompt_tokens: int) -> None:
        """Teach a learning counter the provider's size of the last payload built (if any)."""
        sent = self.context_manager.last_build
        if self._calibration is not None and sent is not None:
            self._calibration.observe(sent.messages, prompt_tokens, tools=sent.tools or None)
