"""MemoryUpdater: at the end of a long task, a forked agent consolidates what it learned.

Seed: Clacky's MemoryUpdater (DESIGN section 7). When a task took at least
:data:`MEMORY_UPDATE_MIN_ITERATIONS` LLM iterations, :meth:`Session.finish_task
<agentmem.session.Session.finish_task>` runs one memory update:

* **The fork.** The task's conversation is *copied* (the session's history
  is never touched, nothing the fork says is stored in the session), the
  memory-update instructions (:func:`instructions`) are appended to its
  system prompt, and a user turn ``"Please proceed."`` follows. It is not a
  session: no store, no task, no iteration counted, no recursion.
* **Three tools** (:data:`TOOL_NAMES`, OpenAI specs from :func:`tool_specs`):
  ``list_memories()``, ``read_memory(topic)`` and ``write_memory(topic,
  content)`` over a :class:`~agentmem.topics.TopicStore`
  (``memories/<topic>.md``: names checked, writes atomic, locked across
  processes, secret-scrubbed, cut to the per-file token limit by the
  library whatever the model does). Bad arguments come back to the model as
  an error text, never as an exception.
* **A bounded loop.** The model is called until it answers without tool
  calls, or :attr:`MemoryUpdateSettings.max_iterations` calls were made.
  Every payload goes through :func:`agentmem.repair.build_payload`, so it is
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

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from agentmem._json import encode_arguments, parse_arguments
from agentmem.errors import AgentMemError, ConfigurationError, StorageError
from agentmem.llm import Flow, LLMRequest, arun_flow, is_async_llm, reply_usage, run_flow
from agentmem.message_tokens import count_message
from agentmem.messages import Message, content_text, normalize_message
from agentmem.protocols import ProgressReporter, TokenCounter
from agentmem.repair import build_payload, select_task_chain
from agentmem.session_store import BillingRecord
from agentmem.tokens import HeuristicCounter
from agentmem.topics import (
    DEFAULT_MAX_TOKENS_PER_FILE,
    MIN_TOKENS_PER_FILE,
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
    "RequestUsage",
    "billing_records",
    "instructions",
    "skip_reason",
    "tool_specs",
    "update_settings",
]

_log = logging.getLogger("agentmem.memory_updater")

MEMORY_UPDATE_MIN_ITERATIONS = 10
"""A task with fewer LLM iterations (``record_usage`` calls) is not consolidated."""
DEFAULT_MAX_ITERATIONS = 8
"""Model calls one memory update may make."""
TOPICS_PROMPT_TOKENS = 2000
"""Default budget of the topic files injected into a later session's system prompt."""
PROCEED = "Please proceed."
BILLING_KIND = "memory_update"
TOOL_NAMES = ("list_memories", "read_memory", "write_memory")
_MAX_TOOL_TEXT = 200_000  # a read_memory answer longer than this is cut (a hand-edited file)


@dataclass(frozen=True, kw_only=True)
class MemoryUpdateSettings:
    """How a :class:`~agentmem.memory.Memory` runs memory updates (``Memory(memory_update=...)``).

    Raises:
        ConfigurationError: a field out of range or of the wrong type.
    """

    enabled: bool = True
    """Run the updater at the end of long tasks (it also needs ``Memory(llm=...)``)."""
    min_iterations: int = MEMORY_UPDATE_MIN_ITERATIONS
    """Fewest LLM iterations a task needs before it is consolidated."""
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    """Most model calls one update makes (the tool loop's bound)."""
    max_tokens_per_file: int = DEFAULT_MAX_TOKENS_PER_FILE
    """Per-topic-file token limit, told to the model and enforced on every write."""
    inject_topics: bool = True
    """Inject the topic files into later sessions' system prompts."""
    prompt_tokens: int = TOPICS_PROMPT_TOKENS
    """Token budget of that injection (also capped at a tenth of the context window)."""

    def __post_init__(self) -> None:
        for name in ("enabled", "inject_topics"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"memory_update.{name} must be True or False, got {getattr(self, name)!r}"
                )
        for name, low in (
            ("min_iterations", 0),
            ("max_iterations", 1),
            ("max_tokens_per_file", MIN_TOKENS_PER_FILE),
            ("prompt_tokens", 0),
        ):
            value = getattr(self, name)
            if type(value) is not int or not low <= value <= 2**31 - 1:
                raise ConfigurationError(
                    f"memory_update.{name} must be an int from {low} to 2**31-1, got {value!r}"
                )


def update_settings(value: object) -> MemoryUpdateSettings:
    """``Memory(memory_update=...)`` as settings: a bool, MemoryUpdateSettings or a mapping.

    Raises:
        ConfigurationError: anything else, or a bad field.
    """
    if isinstance(value, MemoryUpdateSettings):
        return value
    if isinstance(value, bool):
        return MemoryUpdateSettings(enabled=value)
    if isinstance(value, Mapping):
        known = set(MemoryUpdateSettings.__dataclass_fields__)
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ConfigurationError(
                f"memory_update has unknown settings {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        return MemoryUpdateSettings(**{str(k): v for k, v in value.items()})
    raise ConfigurationError(
        "memory_update must be True, False, MemoryUpdateSettings or a mapping, "
        f"got {type(value).__name__}"
    )


def skip_reason(
    *,
    has_llm: bool,
    settings: MemoryUpdateSettings,
    incognito: bool,
    subagent: bool,
    task_id: int | None,
    iterations: int,
) -> str | None:
    """Why a finished task is not consolidated, or ``None`` when the updater should run."""
    if task_id is None:
        return "no task was running"
    if subagent:
        return "sub-agent sessions never update memory"
    if not settings.enabled:
        return "memory updates are disabled"
    if incognito:
        return "incognito memory writes nothing"
    if not has_llm:
        return "the Memory has no llm"
    if iterations < settings.min_iterations:
        return f"the task took {iterations} LLM iterations (fewer than {settings.min_iterations})"
    return None


def tool_specs() -> list[dict[str, Any]]:
    """The updater's three tools as OpenAI function tool specs (fresh copies)."""
    topic = {
        "type": "string",
        "description": "Topic name, e.g. 'deploy' (file memories/<topic>.md): "
        "letters, digits, '-', '_'; no '/' or '..'.",
    }
    return [
        {
            "type": "function",
            "function": {
                "name": "list_memories",
                "description": "List the existing topic files with their size and last update.",
                "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "read_memory",
                "description": "Read the whole content of one topic file.",
                "parameters": {
                    "type": "object",
                    "properties": {"topic": topic},
                    "required": ["topic"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "write_memory",
                "description": "Create or replace a topic file with the complete new content "
                "(markdown). Replaces the whole file: include what should be kept.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "topic": topic,
                        "content": {"type": "string", "description": "The full file content."},
                    },
                    "required": ["topic", "content"],
                    "additionalProperties": False,
                },
            },
        },
    ]


def instructions(max_tokens_per_file: int, existing: Sequence[str] = ()) -> str:
    """The memory-update instructions appended to the forked system prompt."""
    known = ", ".join(existing) if existing else "(none yet)"
    return "\n".join(
        [
            "# Memory update",
            "The task above is finished. Before the session moves on, consolidate what it "
            "taught you into the project's topic files, so later sessions can reuse it. You "
            "have three tools: list_memories(), read_memory(topic) and "
            "write_memory(topic, content).",
            "1. Decide the topics the task's lasting knowledge belongs to (for example "
            "deploy, testing, architecture, conventions, user-preferences): facts about the "
            "project, commands that worked, pitfalls and their fixes, decisions and the "
            "user's preferences. Leave out one-off details, secrets and what the code "
            "already says plainly.",
            "2. Choose which files to update and which to create: read a related existing "
            "topic with read_memory before writing it; prefer updating it over creating a "
            "near-duplicate.",
            "3. Merge: keep what is still true, add the new knowledge, correct what the task "
            "proved wrong, remove duplicates. write_memory replaces the whole file, so write "
            "the complete merged content.",
            f"4. Each topic file is limited to {max_tokens_per_file} tokens (about "
            f"{max_tokens_per_file * 4} characters). When the merged content would exceed "
            "it, drop the least useful or most outdated details first; anything beyond the "
            "limit is cut off the end of the file.",
            "5. Topic names are short and lowercase: letters, digits, '-' and '_'.",
            "6. If nothing is worth remembering, write nothing. When you are done, answer "
            "in one short line, without calling a tool.",
            f"Existing topics: {known}.",
        ]
    )


class RequestUsage(NamedTuple):
    """One model call of an update, from its reply's ``usage``."""

    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


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


class MemoryUpdater:
    """Runs one memory update over a copy of a task's conversation.

    Args:
        llm: The model (sync or async callable, the :class:`~agentmem.protocols.LLM` shape).
        topics: Where topic files are read and written.
        settings: Iteration bound and per-file limit (``enabled`` and
            ``min_iterations`` are the caller's business, see :func:`skip_reason`).
        token_counter: Counts tokens to fit the copied conversation into ``context_window``.
        context_window: The model's window; the copy keeps the system prompt and
            the newest messages within three quarters of it. ``None``: no limit.
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

    def run(self, messages: Sequence[Message], *, task_chain: Any = None) -> MemoryUpdateResult:
        """Run the update with a synchronous LLM; never raises an ``Exception``.

        An async LLM cannot be awaited here: the result's ``error`` says to use
        the async twin (``afinish_task`` / :meth:`arun`).
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
                result = run_flow(self.flow(messages, task_chain=task_chain), self.llm)
        except BaseException as exc:
            self._report("memory_update_finished", None, interrupted=exc)
            raise
        self._report("memory_update_finished", result)
        return result

    async def arun(
        self, messages: Sequence[Message], *, task_chain: Any = None
    ) -> MemoryUpdateResult:
        """Run the update with an async (or sync) LLM; never raises an ``Exception``."""
        self._report("memory_update_started", None)
        try:
            result = await arun_flow(self.flow(messages, task_chain=task_chain), self.llm)
        except BaseException as exc:
            self._report("memory_update_finished", None, interrupted=exc)
            raise
        self._report("memory_update_finished", result)
        return result

    # ------------------------------------------------------------------ the flow

    def flow(
        self, messages: Sequence[Message], *, task_chain: Any = None
    ) -> Flow[MemoryUpdateResult]:
        """The update as a sans-IO flow (see :mod:`agentmem.llm`); returns its result.

        Args:
            messages: The task's conversation (canonical messages); copied, never modified.
            task_chain: Active task ids (messages of other tasks are left out); ``None``: all.
        """
        run = _Run()
        try:
            conversation = self._fork(messages, task_chain)
        except Exception as exc:  # a part failing must not break the host's finished task
            return self._fail(run, f"cannot prepare the update: {exc}", exc)
        specs = tool_specs()
        for iteration in range(1, self.settings.max_iterations + 1):
            run.iterations = iteration
            try:
                payload = build_payload(conversation, provider="openai")
            except Exception as exc:
                return self._fail(run, f"cannot build the payload: {exc}", exc)
            try:
                reply = yield LLMRequest(payload, tools=specs, purpose="memory_update")
            except Exception as exc:  # the LLM failed (thrown in by the driver)
                return self._fail(run, f"the LLM failed: {type(exc).__name__}: {exc}", exc)
            run.requests.append(RequestUsage(*reply_usage(reply)))
            try:
                assistant, calls = self._assistant(reply, iteration)
                conversation.extend(normalize_message(assistant))
            except Exception as exc:
                return self._fail(run, f"the LLM's reply cannot be used: {exc}", exc)
            if not calls:
                return self._result(
                    run, stopped="answered", answer=content_text(reply.get("content"))
                )
            for call_id, name, args in calls:
                text = self._call_tool(run, name, args)
                conversation.append(
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

    def _fork(self, messages: Sequence[Message], task_chain: Any) -> list[Message]:
        """A copy of the conversation: instructions in the system prompt, then "Please proceed."."""
        selected = [dict(m) for m in select_task_chain(messages, task_chain)]
        try:
            existing = [info.topic for info in self.topics.list()]
        except AgentMemError:
            existing = []
        extra = instructions(self.settings.max_tokens_per_file, existing)
        if selected and selected[0].get("role") == "system":
            system = selected.pop(0)
            content = system.get("content")
            if isinstance(content, list):
                system["content"] = [*content, {"type": "text", "text": extra}]
            else:
                system["content"] = f"{content}\n\n{extra}" if content else extra
        else:
            system = {"role": "system", "content": extra, "memory_update": True}
        proceed: Message = {"role": "user", "content": PROCEED, "memory_update": True}
        kept = self._fit(system, selected, proceed)
        return [system, *kept, proceed]

    def _fit(self, system: Message, body: list[Message], proceed: Message) -> list[Message]:
        """The newest messages of ``body`` that fit three quarters of the window."""
        if self.context_window is None:
            return body
        budget = self.context_window * 3 // 4
        budget -= count_message(system, self.token_counter) + count_message(
            proceed, self.token_counter
        )
        kept: list[Message] = []
        for message in reversed(body):
            budget -= count_message(message, self.token_counter)
            if budget < 0:
                break
            kept.append(message)
        kept.reverse()
        if len(kept) < len(body):
            _log.info(
                "memory update of session %s task %s sees the newest %d of %d messages",
                self.session_id,
                self.task_id,
                len(kept),
                len(body),
            )
        return kept

    @staticmethod
    def _assistant(
        reply: Mapping[str, Any], iteration: int
    ) -> tuple[dict[str, Any], list[tuple[str, str, dict[str, Any] | str]]]:
        """The reply as a storable assistant message, and its calls ``(id, name, args or error)``.

        Calls whose arguments cannot be decoded are kept with ``{}`` arguments, so the
        conversation stays valid and the model is told what was wrong.
        """
        calls: list[tuple[str, str, dict[str, Any] | str]] = []
        stored: list[dict[str, Any]] = []
        for index, call in enumerate(reply.get("tool_calls") or ()):
            function = call.get("function") if isinstance(call, Mapping) else None
            function = function if isinstance(function, Mapping) else {}
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if not isinstance(call_id, str) or not call_id:
                call_id = f"memory_update_{iteration}_{index}"
            name = function.get("name")
            name = name if isinstance(name, str) and name else "unnamed"
            raw = function.get("arguments")
            args: dict[str, Any] | str
            text = "{}"
            if isinstance(raw, Mapping):
                args = {str(k): v for k, v in raw.items()}
                text = encode_arguments(args)
            elif raw is None or isinstance(raw, str):
                try:
                    parsed = parse_arguments(raw or "")
                    args, text = parsed.value, parsed.text
                except AgentMemError as exc:
                    args = f"the arguments are not a JSON object: {exc}"
            else:
                args = f"the arguments must be a JSON object, got {type(raw).__name__}"
            stored.append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
            )
            calls.append((call_id, name, args))
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        if stored:
            message["tool_calls"] = stored
        elif not message["content"]:
            message["content"] = ""
        return message, calls

    # ------------------------------------------------------------------ tools

    def _call_tool(self, run: _Run, name: str, args: dict[str, Any] | str) -> str:
        """Run one tool call; the text for the model. Never raises an ``Exception``."""
        if isinstance(args, str):
            return self._tool_error(run, name, args)
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
                topic = check_topic(_string_arg(args, "topic", {"topic"}))
                content = self.topics.read(topic)
                run.seen[topic] = content
                if content is None:
                    return f"There is no topic {topic!r} yet."
                return content[:_MAX_TOOL_TEXT]
            if name == "write_memory":
                topic = check_topic(_string_arg(args, "topic", {"topic", "content"}))
                content = _string_arg(args, "content", {"topic", "content"})
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
        except _BadArgument as exc:
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


class _BadArgument(Exception):
    pass


def _string_arg(args: Mapping[str, Any], name: str, allowed: set[str]) -> str:
    extra = sorted(set(args) - allowed)
    if extra:
        raise _BadArgument(f"unexpected argument(s) {', '.join(extra)}")
    value = args.get(name)
    if not isinstance(value, str):
        got = "missing" if name not in args else f"a {type(value).__name__}"
        raise _BadArgument(f"argument {name!r} must be a string ({got})")
    return value
