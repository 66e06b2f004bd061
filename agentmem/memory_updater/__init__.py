"""MemoryUpdater: at the end of a long task, a forked agent consolidates what it learned.

Seed: Clacky's MemoryUpdater (DESIGN section 7). When a task took at least
:data:`MEMORY_UPDATE_MIN_ITERATIONS` LLM iterations, :meth:`Session.finish_task
<agentmem.session.Session.finish_task>` runs one memory update:

* **The fork is the task's own request, continued** (:mod:`._fork`). Its
  first request is the task's last request unchanged -- the payload the last
  ``context()`` returned, rendered the same way, and the host's tools when
  they include the three update tools -- followed by the messages the task
  added since (its final answer), the memory-update instructions
  (:func:`instructions`) as a new system message, and the user turn
  ``"Please proceed."``. The provider's prompt cache serves the whole task;
  :attr:`MemoryUpdateResult.shared_prefix_tokens` says how much of it the
  two requests share, :attr:`MemoryUpdateResult.cache_miss` why not all of it.
  When there is no request to continue, or it plus the update would not
  leave room in the window, the session's own context pipeline rebuilds the
  payload on a scratch copy of its window (nothing shared, reported). The
  session's history is never touched, nothing the fork says is stored in the
  session; it is not a session: no store, no task, no iteration counted, no
  recursion.
* **Three tools** (:data:`TOOL_NAMES`, OpenAI specs from :func:`tool_specs`):
  ``list_memories()``, ``read_memory(topic)`` and ``write_memory(topic,
  content)`` over a :class:`~agentmem.topics.TopicStore`
  (``memories/<topic>.md``: names checked, writes atomic, locked across
  processes, secret-scrubbed, cut to the per-file token limit by the
  library whatever the model does). Bad arguments, and calls of the host's
  other tools, come back to the model as an error text, never as an exception.
* **A bounded loop.** The model is called until it answers without tool
  calls, or :attr:`MemoryUpdateSettings.max_iterations` calls were made.
  Each later request is the first one with the fork's turns appended; the
  new messages go through :func:`agentmem.repair.build_payload`, so they are
  valid for the provider (dangling calls answered, orphans dropped).
* **Failures are reported, not raised.** An LLM error, an unusable reply or
  a tool's storage failure ends the update: it is logged on the
  ``agentmem.memory_updater`` logger with the session id, task id and
  iteration, and returned in :attr:`MemoryUpdateResult.error`. Topic files
  written before the failure stay. ``KeyboardInterrupt`` (and any other
  ``BaseException``) propagates: the driver never throws it into the flow.

The update is a *flow* (:mod:`agentmem.llm`): :meth:`MemoryUpdater.flow`
yields requests and never does I/O with the model itself, so
:meth:`MemoryUpdater.run` (sync LLM) and :meth:`MemoryUpdater.arun` (async
or sync LLM) give the same results. A sync run given an async LLM returns
a result whose error says to use ``afinish_task``.

What this module does not do: decide cost bookkeeping in the session (the
facade adds :attr:`MemoryUpdateResult.requests` to its usage and billing,
see :func:`billing_records`) or render topics into later prompts
(:meth:`agentmem.topics.TopicStore.render_for_prompt`).
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from agentmem._prompt_budget import block_budget
from agentmem.errors import AgentMemError, StorageError
from agentmem.llm import Flow, LLMRequest, arun_flow, is_async_llm, parse_usage, run_flow
from agentmem.memory_updater._fork import (
    Fork,
    TaskRequest,
    arebuild_request,
    check_tools,
    choose_tools,
    continued_request,
    fork_args,
    plan,
    rebuild_request,
    tools_tokens,
)
from agentmem.memory_updater._settings import (
    DEFAULT_MAX_ITERATIONS,
    MEMORY_UPDATE_MIN_ITERATIONS,
    TOPICS_PROMPT_TOKENS,
    MemoryUpdateSettings,
    skip_reason,
    update_settings,
)
from agentmem.memory_updater._tools import (
    PROCEED,
    TOOL_NAMES,
    BadArgument,
    assistant_message,
    instructions,
    string_arg,
    tool_specs,
)
from agentmem.messages import Message, message_text, normalize_message
from agentmem.protocols import ProgressReporter, TokenCounter
from agentmem.repair import select_task_chain
from agentmem.session_store import BillingRecord
from agentmem.tokens import HeuristicCounter, count_message
from agentmem.tools import TOOL_NAME as MEMORY_TOOL
from agentmem.tools import TOPIC_OPERATIONS
from agentmem.topics import (
    TopicStore,
    WriteResult,
    check_topic,
)

__all__ = [
    "BILLING_KIND",
    "DEFAULT_MAX_ITERATIONS",
    "MEMORY_UPDATE_MIN_ITERATIONS",
    "PROCEED",
    "TOOL_NAMES",
    "TOPICS_PROMPT_TOKENS",
    "MemoryUpdateResult",
    "MemoryUpdateSettings",
    "MemoryUpdater",
    "Rebuild",
    "RequestUsage",
    "TaskRequest",
    "arebuild_request",
    "billing_records",
    "check_tools",
    "continued_request",
    "fork_args",
    "instructions",
    "rebuild_request",
    "skip_reason",
    "tool_specs",
    "update_settings",
]

_log = logging.getLogger("agentmem.memory_updater")

BILLING_KIND = "memory_update"
_TOPIC_TOOLS = dict(zip(TOPIC_OPERATIONS, TOOL_NAMES, strict=True))
"""``memory_operations``' topic operations and the update tool each one is."""
_MAX_TOOL_TEXT = 200_000  # a read_memory answer longer than this is cut (a hand-edited file)

Rebuild = Callable[[int], "TaskRequest | Awaitable[TaskRequest]"]
"""``rebuild(reserve)``: the task's payload rebuilt by the host's context pipeline with
``reserve`` tokens of the window kept free (sync for :meth:`MemoryUpdater.run`, sync or
async for :meth:`MemoryUpdater.arun`); raises when it cannot."""


class RequestUsage(NamedTuple):
    """One model call of an update, from its reply's ``usage`` (see :meth:`of`)."""

    prompt_tokens: int
    """The whole prompt, cached and cache-written parts included."""
    completion_tokens: int
    cost_usd: float
    cached_prompt_tokens: int = 0
    """Part of ``prompt_tokens`` read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Part of ``prompt_tokens`` written to the cache (Anthropic's cache creation)."""

    @classmethod
    def of(cls, reply: object) -> RequestUsage:
        """The usage of ``reply``, read by :func:`agentmem.llm.parse_usage` (zeros when absent).

        Any provider's shape (OpenAI Chat or Responses, Anthropic, DeepSeek);
        the cached parts are kept apart, as ``Session.record_usage`` keeps them.
        """
        figures = parse_usage(reply.get("usage") if isinstance(reply, Mapping) else None)
        return cls(
            figures.prompt_tokens,
            figures.completion_tokens,
            figures.cost_usd,
            figures.cached_prompt_tokens,
            figures.cache_write_tokens,
        )


@dataclass(frozen=True)
class MemoryUpdateResult:
    """What one memory update did (``Session.last_memory_update``)."""

    ran: bool
    """Whether the updater ran (called the model, or tried to)."""
    skipped: str | None = None
    """Why it did not run (``ran`` is False), else ``None``."""
    session_id: str | None = None
    task_id: int | None = None
    writes: tuple[WriteResult, ...] = ()
    """Every successful ``write_memory``, in order (with truncation figures)."""
    iterations: int = 0
    """Model calls made (including a failed one)."""
    requests: tuple[RequestUsage, ...] = ()
    """Usage of each reply received."""
    error: str | None = None
    """What failed (the LLM, its reply, or a tool's storage), else ``None``."""
    tool_errors: tuple[str, ...] = ()
    """Error texts returned to the model as tool results (bad arguments and such)."""
    stopped: str = ""
    """``"answered"``, ``"max_iterations"``, ``"error"`` or ``"skipped"``."""
    answer: str = ""
    """The model's final text."""
    shared_prefix_messages: int = 0
    """Messages at the start of the fork's first request identical to the task's last
    request (its whole payload when the fork continues it), with the same tools."""
    shared_prefix_tokens: int = 0
    """Tokens of those messages (the session's counter): what a provider's prompt cache
    can serve from the task. The tool schemas, then identical too, come on top."""
    cache_miss: str | None = None
    """Why the fork's first request does not start with the task's last request and its
    tools (each reason, ``"; "``-joined), or ``None`` when it does."""
    first_request_tokens: int = 0
    """Tokens of the fork's first request: messages, reply priming and tool schemas."""
    duration_s: float = field(default=0.0, compare=False)

    @property
    def topics(self) -> tuple[str, ...]:
        """Topics written, each once, in the order first written."""
        return tuple(dict.fromkeys(w.topic for w in self.writes))

    @property
    def truncated(self) -> tuple[str, ...]:
        """Topics whose content the library cut to the per-file limit."""
        return tuple(dict.fromkeys(w.topic for w in self.writes if w.truncated))

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens for r in self.requests)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.requests)

    @property
    def cost_usd(self) -> float:
        return sum(r.cost_usd for r in self.requests)


def billing_records(
    result: MemoryUpdateResult, model: str | None, *, at: float | None = None
) -> list[BillingRecord]:
    """One ``"memory_update"`` billing record per model reply of ``result``."""
    when = time.time() if at is None else at
    return [
        BillingRecord(
            at=when,
            kind=BILLING_KIND,
            model=model,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            cost_usd=r.cost_usd,
            cached_prompt_tokens=r.cached_prompt_tokens,
            cache_write_tokens=r.cache_write_tokens,
        )
        for r in result.requests
    ]


class _Run:
    """What an update has done so far (mutable; frozen into the result at the end)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.writes: list[WriteResult] = []
        self.requests: list[RequestUsage] = []
        self.tool_errors: list[str] = []
        self.failure: str | None = None
        self.iterations = 0
        self.seen: dict[str, str | None] = {}  # topic -> content this update last read or wrote
        self.fork: Fork | None = None
        self.miss: str | None = None  # why the fork does not continue the task's request
        self.host_tools: Sequence[Mapping[str, Any]] | None = None
        self.first_tokens = 0


class _Refit(NamedTuple):
    """The fork cannot continue the task's request: rebuild it with ``reserve`` tokens free."""

    reserve: int
    reason: str


class MemoryUpdater:
    """Runs one memory update over a copy of a task's conversation.

    Args:
        llm: The model (sync or async callable, the :class:`~agentmem.protocols.LLM` shape).
        topics: Where topic files are read and written.
        settings: Iteration bound and per-file limit (``enabled`` and
            ``min_iterations`` are the caller's business, see :func:`skip_reason`).
        token_counter: Counts the fork's requests (the session's counter).
        context_window: The model's window. The fork's first request must leave
            :meth:`loop_room` of it for the update's own turns; when the task's
            request plus the update does not, it is rebuilt smaller (``rebuild``
            of :meth:`run`). ``None``: no limit.
        reporter: Told ``memory_update_started`` and ``memory_update_finished``.
        session_id: For logs, events and the result.
        task_id: For logs, events and the result.
    """

    def __init__(
        self,
        llm: Callable[..., Any],
        topics: TopicStore,
        *,
        settings: MemoryUpdateSettings | None = None,
        token_counter: TokenCounter | None = None,
        context_window: int | None = None,
        reporter: ProgressReporter | None = None,
        session_id: str | None = None,
        task_id: int | None = None,
    ) -> None:
        self.llm = llm
        self.topics = topics
        self.settings = settings or MemoryUpdateSettings()
        self.token_counter = token_counter or HeuristicCounter()
        self.context_window = context_window
        self.reporter = reporter
        self.session_id = session_id
        self.task_id = task_id

    # ------------------------------------------------------------------ runners

    def run(
        self,
        messages: Sequence[Message],
        *,
        task_chain: Collection[int] | None = None,
        request: TaskRequest | str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        rebuild: Rebuild | None = None,
    ) -> MemoryUpdateResult:
        """Run the update with a synchronous LLM; never raises an ``Exception``.

        An async LLM cannot be awaited here: the result's ``error`` says to use
        the async twin (``afinish_task`` / :meth:`arun`).

        Args:
            messages: The task's conversation (canonical messages); copied, never modified.
            task_chain: Active task ids (messages of other tasks are left out); ``None``: all.
            request: The task's last request, which the fork continues
                (:func:`continued_request`), or why there is none.
            tools: The OpenAI tool specs the task's request was sent with: sent
                unchanged when they include the three update tools.
            rebuild: Rebuilds the task's payload smaller when it cannot be continued
                (:data:`Rebuild`, synchronous here); ``None``: the whole conversation.
        """
        self._report("memory_update_started", None)
        try:
            if is_async_llm(self.llm):
                error = (
                    "the Memory's llm is async; a synchronous finish_task() cannot await it: "
                    "use `await session.afinish_task()`"
                )
                self._log_failure(error, 0)
                result = self._result(_Run(), error=error, stopped="error")
            else:
                run = _Run()
                run.host_tools = tools
                step = self._prepare(run, messages, task_chain, request)
                if isinstance(step, _Refit):
                    rebuilt: Any = None
                    if rebuild is not None:
                        try:
                            rebuilt = rebuild(step.reserve)
                        except Exception as exc:
                            rebuilt = exc
                        if inspect.isawaitable(rebuilt):  # an async rebuild: arun's to await
                            close = getattr(rebuilt, "close", None)
                            if callable(close):
                                close()
                            rebuilt = TypeError("rebuild is async: use arun (afinish_task)")
                    step = self._refitted(run, step, rebuilt, messages, task_chain)
                result = (
                    step
                    if isinstance(step, MemoryUpdateResult)
                    else run_flow(self._flow(run, step), self.llm)
                )
        except BaseException as exc:
            self._report("memory_update_finished", None, interrupted=exc)
            raise
        self._report("memory_update_finished", result)
        return result

    async def arun(
        self,
        messages: Sequence[Message],
        *,
        task_chain: Collection[int] | None = None,
        request: TaskRequest | str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        rebuild: Rebuild | None = None,
    ) -> MemoryUpdateResult:
        """Run the update with an async (or sync) LLM; never raises an ``Exception``.

        Same arguments as :meth:`run`; ``rebuild`` may be async here.
        """
        self._report("memory_update_started", None)
        try:
            run = _Run()
            run.host_tools = tools
            step = self._prepare(run, messages, task_chain, request)
            if isinstance(step, _Refit):
                rebuilt: Any = None
                if rebuild is not None:
                    try:
                        rebuilt = rebuild(step.reserve)
                        if inspect.isawaitable(rebuilt):
                            rebuilt = await rebuilt
                    except Exception as exc:
                        rebuilt = exc
                step = self._refitted(run, step, rebuilt, messages, task_chain)
            result = (
                step
                if isinstance(step, MemoryUpdateResult)
                else await arun_flow(self._flow(run, step), self.llm)
            )
        except BaseException as exc:
            self._report("memory_update_finished", None, interrupted=exc)
            raise
        self._report("memory_update_finished", result)
        return result

    # ------------------------------------------------------------------ the fork

    def loop_room(self) -> int:
        """Tokens of the window the first request leaves for the update's own turns.

        Room for reading and writing a topic file, at most a tenth of the window.
        """
        return block_budget(self.settings.max_tokens_per_file, self.context_window or 0)

    def _new_messages(self, via_memory_tool: bool = False) -> list[Message]:
        """The memory-update instructions (a system message) and "Please proceed."."""
        try:
            existing = [info.topic for info in self.topics.list()]
        except AgentMemError:
            existing = []
        return [
            {
                "role": "system",
                "content": instructions(
                    self.settings.max_tokens_per_file, existing, via_memory_tool=via_memory_tool
                ),
                "memory_update": True,
            },
            {"role": "user", "content": PROCEED, "memory_update": True},
        ]

    def _prepare(
        self,
        run: _Run,
        messages: Sequence[Message],
        task_chain: Collection[int] | None,
        request: TaskRequest | str | None,
    ) -> Fork | _Refit | MemoryUpdateResult:
        """The fork continuing ``request``, or what rebuilding it needs, or a failure."""
        try:
            if not isinstance(request, TaskRequest):
                reason = request or "no request of the task was given"
                return _Refit(self._reserve(run.host_tools), reason)
            fork = plan(
                request,
                self._new_messages,
                host_tools=run.host_tools,
                update_specs=tool_specs(),
                counter=self.token_counter,
                shared=True,
            )
            tokens = fork.tokens(self.token_counter)
            budget = self._budget()
            if budget is not None and tokens > budget:
                return _Refit(
                    self._reserve(run.host_tools),
                    f"the task's last request plus the update ({tokens} tokens) would leave "
                    f"less than {self.loop_room()} of the {self.context_window}-token window "
                    "for the update's turns",
                )
            run.first_tokens = tokens
            return fork
        except Exception as exc:  # a part failing must not break the host's finished task
            return self._fail(run, f"cannot prepare the update: {exc}", exc)

    def _budget(self) -> int | None:
        return None if self.context_window is None else self.context_window - self.loop_room()

    def _reserve(self, host_tools: Any) -> int:
        """Tokens a rebuilt payload must leave free: new messages, tools, the loop's room."""
        counter = self.token_counter
        tools, _, via_memory_tool = choose_tools(host_tools, tool_specs())
        return (
            sum(count_message(m, counter) for m in self._new_messages(via_memory_tool))
            + tools_tokens(tools, counter)
            + self.loop_room()
        )

    def _refitted(
        self,
        run: _Run,
        refit: _Refit,
        rebuilt: TaskRequest | BaseException | None,
        messages: Sequence[Message],
        task_chain: Collection[int] | None,
    ) -> Fork | MemoryUpdateResult:
        """The fork over a rebuilt payload (or the whole conversation without a pipeline)."""
        run.miss = refit.reason
        if isinstance(rebuilt, BaseException):
            return self._fail(
                run,
                f"cannot fit the update into the window ({refit.reason}): {rebuilt}",
                rebuilt,
            )
        try:
            new = self._new_messages
            if rebuilt is None:
                # No pipeline to trim with: the whole conversation, when no window bounds it.
                conversation = tuple(dict(m) for m in select_task_chain(messages, task_chain))
                fork = plan(
                    TaskRequest(messages=()),
                    new,
                    host_tools=run.host_tools,
                    update_specs=tool_specs(),
                    counter=self.token_counter,
                    shared=False,
                )
                fork.rest[:0] = conversation
            else:
                if not isinstance(rebuilt, TaskRequest):
                    raise TypeError(f"rebuild returned {type(rebuilt).__name__}, not a TaskRequest")
                fork = plan(
                    rebuilt,
                    new,
                    host_tools=run.host_tools,
                    update_specs=tool_specs(),
                    counter=self.token_counter,
                    shared=False,
                )
            fork.misses[:0] = [
                refit.reason,
                "the fork starts from a payload rebuilt by the context pipeline"
                if rebuilt is not None
                else "the fork sends the whole conversation",
            ]
            tokens = fork.tokens(self.token_counter)
            budget = self._budget()
            if budget is not None and tokens > budget:
                raise ValueError(
                    f"the fork's first request has {tokens} tokens, over the {budget} the "
                    f"{self.context_window}-token window leaves it"
                )
        except Exception as exc:
            return self._fail(run, f"cannot prepare the update: {exc}", exc)
        _log.info(
            "memory update of session %s task %s does not continue the task's request: %s",
            self.session_id,
            self.task_id,
            fork.miss,
        )
        run.first_tokens = tokens
        return fork

    # ------------------------------------------------------------------ the flow

    def flow(
        self,
        messages: Sequence[Message],
        *,
        task_chain: Collection[int] | None = None,
        request: TaskRequest | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Flow[MemoryUpdateResult]:
        """The update as a sans-IO flow (see :mod:`agentmem.llm`); returns its result.

        Args:
            messages: The task's conversation (canonical messages); copied, never modified.
                Sent whole when ``request`` is ``None``.
            task_chain: Active task ids (messages of other tasks are left out); ``None``: all.
            request: The task's last request, continued (no rebuild here: a request
                that does not fit ends the update with an error).
            tools: As for :meth:`run`.
        """
        run = _Run()
        run.host_tools = tools
        step = self._prepare(run, messages, task_chain, request)
        if isinstance(step, _Refit):
            step = self._refitted(run, step, None, messages, task_chain)
        if isinstance(step, MemoryUpdateResult):
            return step
        return (yield from self._flow(run, step))

    def _flow(self, run: _Run, fork: Fork) -> Flow[MemoryUpdateResult]:
        run.fork = fork
        for iteration in range(1, self.settings.max_iterations + 1):
            run.iterations = iteration
            try:
                payload = fork.payload()
            except Exception as exc:
                return self._fail(run, f"cannot build the payload: {exc}", exc)
            try:
                reply = yield LLMRequest(
                    payload, tools=copy.deepcopy(fork.tools), purpose="memory_update"
                )
            except Exception as exc:  # the LLM failed (thrown in by the driver)
                return self._fail(run, f"the LLM failed: {type(exc).__name__}: {exc}", exc)
            run.requests.append(RequestUsage.of(reply))
            try:
                assistant, calls = assistant_message(reply, iteration)
                fork.rest.extend(normalize_message(assistant))
            except Exception as exc:
                return self._fail(run, f"the LLM's reply cannot be used: {exc}", exc)
            if not calls:
                return self._result(run, stopped="answered", answer=message_text(reply))
            for call_id, name, args in calls:
                text = self._call_tool(run, name, args)
                fork.rest.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": text,
                        "memory_update": True,
                    }
                )
            if run.failure is not None:
                return self._result(run, error=run.failure, stopped="error")
        _log.info(
            "memory update stopped after %d model calls (session %s, task %s)",
            run.iterations,
            self.session_id,
            self.task_id,
        )
        return self._result(run, stopped="max_iterations")

    # ------------------------------------------------------------------ tools

    def _call_tool(self, run: _Run, name: str, args: dict[str, Any] | str) -> str:
        """Run one tool call; the text for the model. Never raises an ``Exception``."""
        if isinstance(args, str):
            return self._tool_error(run, name, args)
        if name == MEMORY_TOOL and run.fork is not None and run.fork.via_memory_tool:
            operation = args.get("operation")
            target = _TOPIC_TOOLS.get(operation) if isinstance(operation, str) else None
            if target is None:
                return self._tool_error(
                    run,
                    name,
                    f"during the memory update {MEMORY_TOOL} runs only "
                    f"{', '.join(_TOPIC_TOOLS)}, not {operation!r}",
                )
            name, args = target, {k: v for k, v in args.items() if k != "operation"}
        try:
            if name == "list_memories":
                if args:
                    return self._tool_error(run, name, "list_memories takes no arguments")
                infos = self.topics.list()
                listing = [
                    {
                        "topic": i.topic,
                        "bytes": i.size,
                        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(i.updated_at)),
                    }
                    for i in infos
                ]
                return json.dumps(listing, ensure_ascii=False) if listing else "No topics yet."
            if name == "read_memory":
                topic = check_topic(string_arg(args, "topic", {"topic"}))
                content = self.topics.read(topic)
                run.seen[topic] = content
                if content is None:
                    return f"There is no topic {topic!r} yet."
                return content[:_MAX_TOOL_TEXT]
            if name == "write_memory":
                topic = check_topic(string_arg(args, "topic", {"topic", "content"}))
                content = string_arg(args, "content", {"topic", "content"})
                if topic in run.seen:
                    found = self.topics.write_if_unchanged(topic, content, expected=run.seen[topic])
                    if found is None:
                        run.seen.pop(topic)
                        return self._tool_error(
                            run,
                            name,
                            f"memories/{topic}.md was changed by another agent since you read "
                            "it; nothing was written. Call read_memory again and merge your "
                            "changes into its new content.",
                        )
                    written = found
                else:
                    written = self.topics.write(topic, content)
                run.seen[topic] = written.content
                run.writes.append(written)
                done = (
                    f"Wrote memories/{written.topic}.md ({written.tokens_after} tokens, "
                    f"{'created' if written.created else 'replaced'})."
                )
                if written.truncated:
                    done += (
                        f" The content had {written.tokens_before} tokens, over the "
                        f"{self.topics.max_tokens_per_file}-token limit, and its end was cut "
                        "off: write a shorter version if something important was lost."
                    )
                return done
            return self._tool_error(
                run, name, f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}"
            )
        except BadArgument as exc:
            return self._tool_error(run, name, str(exc))
        except StorageError as exc:
            run.failure = f"tool {name} failed: {exc}"
            self._log_failure(run.failure, run.iterations)
            return f"Error: {exc}"
        except AgentMemError as exc:  # unsafe topic names, bad content
            return self._tool_error(run, name, str(exc))
        except Exception as exc:
            run.failure = f"tool {name} failed: {type(exc).__name__}: {exc}"
            _log.exception(
                "memory update tool %s failed (session %s, task %s, iteration %d)",
                name,
                self.session_id,
                self.task_id,
                run.iterations,
            )
            return f"Error: {type(exc).__name__}: {exc}"

    @staticmethod
    def _tool_error(run: _Run, name: str, reason: str) -> str:
        run.tool_errors.append(f"{name}: {reason}")
        return f"Error: {reason}"

    # ------------------------------------------------------------------ results

    def _fail(self, run: _Run, error: str, exc: BaseException) -> MemoryUpdateResult:
        self._log_failure(error, run.iterations, exc)
        return self._result(run, error=error, stopped="error")

    def _log_failure(self, error: str, iteration: int, exc: BaseException | None = None) -> None:
        _log.warning(
            "memory update failed (session %s, task %s, iteration %d): %s",
            self.session_id,
            self.task_id,
            iteration,
            error,
            exc_info=exc,
        )

    def _result(
        self, run: _Run, *, error: str | None = None, stopped: str, answer: str = ""
    ) -> MemoryUpdateResult:
        return MemoryUpdateResult(
            ran=True,
            session_id=self.session_id,
            task_id=self.task_id,
            writes=tuple(run.writes),
            iterations=run.iterations,
            requests=tuple(run.requests),
            error=error,
            tool_errors=tuple(run.tool_errors),
            stopped=stopped,
            answer=answer,
            shared_prefix_messages=run.fork.shared_messages if run.fork else 0,
            shared_prefix_tokens=run.fork.shared_tokens if run.fork else 0,
            cache_miss=run.fork.miss if run.fork else run.miss,
            first_request_tokens=run.first_tokens,
            duration_s=time.monotonic() - run.started,
        )

    def _report(
        self,
        event: str,
        result: MemoryUpdateResult | None,
        *,
        interrupted: BaseException | None = None,
    ) -> None:
        if self.reporter is None:
            return
        data: dict[str, Any] = {"session_id": self.session_id, "task_id": self.task_id}
        if event == "memory_update_finished":
            data["topics"] = list(result.topics) if result else []
            data["truncated"] = list(result.truncated) if result else []
            data["iterations"] = result.iterations if result else 0
            data["cost_usd"] = result.cost_usd if result else 0.0
            data["error"] = result.error if result else f"interrupted: {type(interrupted).__name__}"
        try:
            self.reporter.report(event, data)
        except Exception:  # a reporter must never break the agent
            _log.warning("progress reporter failed on %s", event, exc_info=True)
