"""Session: one conversation, wired from the parts (see :mod:`agentmem.memory`).

A :class:`Session` is made by :meth:`agentmem.Memory.session`, which opens or
creates the stored session, takes its lock and calls :meth:`Session.create`
or :meth:`Session.resume` with a :class:`~agentmem.session.wiring.SessionWiring`.
A session never sees the :class:`~agentmem.memory.Memory`, so it can be built
and tested without one, and this package does not import the facade.

A session holds the durable :class:`~agentmem.history.MessageHistory` (observed by
the session store's writer), the working window, the YaRN archive, the
context manager, the session's own token counter and its task tracker, and
saves their positions as the session state (:mod:`agentmem.session.state`).
The context builders are in :mod:`agentmem.session.payload`
(:class:`~agentmem.session.payload.PayloadMixin`); this module holds
construction, tasks and undo, appends, usage, the end of a task (the memory
update) and persistence. The logic lives in the parts (context,
memory_updater, semantic.extension, time_machine, session.usage); what stays
here is argument checking, wiring and persistence of the state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from types import MappingProxyType, TracebackType
from typing import Any

from agentmem._events import emit, operation
from agentmem._prompt_budget import block_budget
from agentmem._storage.files import atomic_write_text, make_dirs
from agentmem._tool_specs import provider_tools
from agentmem.context import (
    ContextManager,
    TrimEvent,
    progress_of,
    render_progress,
)
from agentmem.errors import (
    AgentMemError,
    InvalidArgumentError,
    InvalidMessageError,
    SessionClosedError,
)
from agentmem.history import MessageHistory, ValidatedMessages
from agentmem.memory_updater import (
    MemoryUpdater,
    MemoryUpdateResult,
    billing_records,
    check_tools,
    fork_args,
    skip_reason,
)
from agentmem.messages import Message, message_mapping
from agentmem.protocols import CalibratingCounter, TokenCounter
from agentmem.scrub import scrub_with
from agentmem.semantic.extension import SemanticMemoryExtension, SessionExtensions
from agentmem.session.payload import PayloadMixin
from agentmem.session.state import STATE_FORMAT, STATE_VERSION, read_state
from agentmem.session.usage import Usage, billed_figures, message_summary, session_counter
from agentmem.session.wiring import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MODEL,
    PERSONA_PROMPT_TOKENS,
    PROGRESS_FILE,
    SNAPSHOTS_DIR,
    SessionWiring,
)
from agentmem.session_store import (
    BillingRecord,
    SessionInfo,
    SessionLock,
    SessionRecord,
)
from agentmem.stm import ShortTermMemory
from agentmem.tasks import TaskGate, TaskHandle, TaskTracker, finish_interrupted_start
from agentmem.time_machine import RestoreResult, TimeMachine
from agentmem.yarn import YaRN

__all__ = ["Session"]

_log = logging.getLogger("agentmem.memory")


class Session(PayloadMixin):
    """One conversation: durable history, working window, archive and context pipeline.

    Made by :meth:`Memory.session` (through :meth:`create` and :meth:`resume`,
    from a :class:`SessionWiring`); not constructed directly.

    Attributes:
        id: The session id.
        name: Display name (may be ``None``).
        model: Model name.
        context_window: Tokens the model accepts.
        tools: The default tool specs of :meth:`context` (``None``: no tools), as given
            to :meth:`Memory.session` (a frozen copy); counted in every payload's window.
        max_output_tokens: The default output reserve of :meth:`context` (``None``: 0).
        history: Every message of the session (durable on every mutation).
        window: The working window over ``history``.
        yarn: Archive and running summary of what the window evicted.
        context_manager: Builds each payload.
        token_counter: Counts tokens for this session's model (a calibrating
            counter is this session's own copy).
        tasks: Per-task iteration counts and the finished tasks (task ids and the
            active task belong to ``time_machine``; see :mod:`agentmem.tasks`).
        ltm_prompt: The long-term memory rendered when the session opened (``""`` with
            ``ltm_enabled=False``, in incognito mode, or when there is none); added to
            every payload's system prompt before the caller's injections.
        topics_prompt: The memory updater's topic files rendered when the session
            opened, newest first within a token budget (``""`` when there are none,
            in incognito mode, or with topic injection disabled); added after
            ``ltm_prompt``. Fixed for the session, so the prompt prefix stays cacheable.
        subagent: Opened with ``subagent=True``: never runs the memory updater.
        last_memory_update: What the last :meth:`finish_task` did about memory:
            ``None`` before any task finished; a
            :class:`~agentmem.memory_updater.MemoryUpdateResult` with ``ran=False``
            and ``skipped`` (why) when it did not run, else what the update did.
        last_restore: What the last :meth:`undo` / :meth:`switch_to_task` did to the
            working directory (:class:`~agentmem.time_machine.RestoreResult`: paths
            restored, removed, and ``skipped`` -- left alone because their earlier
            content is unknown; each is also logged), ``None`` before any.
        persona_prompt: The semantic extensions' resident persona summaries, rendered
            when the session was created and restored as they were on resume (``""``
            without them); added after ``topics_prompt``.
        extensions: The :class:`~agentmem.semantic.SemanticMemoryExtension` objects
            passed to :meth:`Memory.session` (never inherited: a sub-agent's session
            has only those passed to its own ``session()`` call).
        time_machine: File snapshots, undo/redo and the task tree (:mod:`agentmem.time_machine`).
        unreadable_state: Parts of the stored state this release cannot read (written
            by a newer release, or unknown to it): part name -> why. They are kept as
            stored and written back unchanged on every save, never overwritten.
        repairs: What loading the stored session found damaged and quarantined or
            repaired (the non-empty fields of
            :class:`~agentmem.session_store.SessionRecord`'s reports: ``quarantined``,
            ``repaired``, ``checksum_failed``, ...); empty when it loaded clean.
    """

    unreadable_state: Mapping[str, str] = MappingProxyType({})
    repairs: Mapping[str, Any] = MappingProxyType({})
    _kept_state: Mapping[str, Any] = MappingProxyType({})

    def __init__(
        self,
        wiring: SessionWiring,
        info: SessionInfo,
        lock: SessionLock,
        state: Mapping[str, Any] | None,
        messages: Sequence[Message],
        billing: Sequence[BillingRecord],
        *,
        model: str,
        context_window: int,
        name: str | None,
        extensions: Sequence[SemanticMemoryExtension] = (),
        subagent: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        threads: Mapping[str, Sequence[Message]] | None = None,
    ) -> None:
        self._wiring = wiring
        self.tools = tools
        self.max_output_tokens = max_output_tokens
        self.subagent = subagent
        self.last_memory_update: MemoryUpdateResult | None = None
        self.last_restore: RestoreResult | None = None
        self._sent = (0, -1)  # (len, revision) of the history at the newest build
        self._lock = lock
        self.id: str = info.id
        self.name = name
        self.model = model
        self.context_window = context_window
        self.created_at: float = info.created_at
        self.working_directory = info.working_directory
        self._writer = wiring.sessions.writer(self.id)
        self._saving = threading.Lock()  # one state save at a time (see _save_state)
        self.token_counter: TokenCounter = session_counter(wiring.token_counter, model)
        self._calibration: CalibratingCounter | None = (
            self.token_counter if isinstance(self.token_counter, CalibratingCounter) else None
        )
        self.history = MessageHistory(
            messages, token_counter=self.token_counter, observer=self._writer
        )
        state = dict(state or {})
        # YaRN reads the history as its main thread; its state carries the summary,
        # the side threads' order and, in a state saved by an earlier release, the
        # side threads themselves; the store's threads table (``threads``) holds
        # their messages. A state part that cannot be read is reported and replaced by a
        # fresh one: the messages, which matter most, are intact.
        self.yarn = self._restore_yarn(state.get("yarn"), threads or {})
        self.window = ShortTermMemory(self.history)
        if state.get("window"):
            try:
                self.window.restore(state["window"])
            except AgentMemError as exc:
                _log.warning("session %s: window position not restored (%s)", self.id, exc)
        settings = wiring.context.model_copy(update={"context_window": context_window})
        self.context_manager = ContextManager(
            settings,
            window=self.window,
            yarn=self.yarn,
            checkpoint=self._checkpoint,
            reporter=wiring.reporter,
        )
        estimator = state.get("estimator")
        if estimator and self._calibration is not None:
            try:
                self._calibration.restore(estimator)
            except AgentMemError as exc:
                _log.warning("session %s: token calibration not restored (%s)", self.id, exc)
        # The time machine owns task ids and the active task; the session reads both there.
        self.time_machine = TimeMachine(
            wiring.working_dir,
            self.id,
            None if wiring.incognito else wiring.root / SNAPSHOTS_DIR,
            memory_root=wiring.root,
            known_task_ids={m.get("task_id") for m in messages},
        )
        finish_interrupted_start(
            self.time_machine, messages, lambda m: message_summary(m, wiring.scrubber)
        )
        self.tasks = TaskTracker(state.get("tasks"), active=self.time_machine.active_task_id)
        self._gate = TaskGate(lambda: self.time_machine.active_task_id)
        self._usage = Usage.of(billing)
        self._closed = False
        # Long-term memory enters the system prompt once per open, not per turn, so the
        # prompt prefix stays the same (cacheable) for the whole session.
        self.ltm_prompt: str
        self.topics_prompt: str
        self.ltm_prompt, self.topics_prompt = wiring.prompt_blocks(
            self.token_counter, context_window
        )
        self.extensions = tuple(extensions)
        # Semantic memory: the persona joins the system prompt once, like LTM; each user
        # turn's <memory-context> block rides in the payload only (SessionExtensions).
        # Both are in the state, so a resume places them as they were.
        self._ext = SessionExtensions(
            self.extensions,
            token_counter=self.token_counter,
            persona_budget=block_budget(PERSONA_PROMPT_TOKENS, context_window),
            stored=state.get("extensions"),
            history=self.history,
            session_id=self.id,
        )
        self.persona_prompt: str = self._ext.persona

    # ------------------------------------------------------------------ construction

    @classmethod
    def create(
        cls,
        wiring: SessionWiring,
        info: SessionInfo,
        lock: SessionLock,
        *,
        extensions: Sequence[SemanticMemoryExtension] = (),
        subagent: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> Session:
        """A session over the new, empty stored session ``info`` (its first state saved).

        Hosts call :meth:`Memory.session`, which creates the record, takes
        ``lock`` (the session's, held until :meth:`close`) and passes its wiring.
        """
        session = cls(
            wiring,
            info,
            lock,
            None,
            (),
            (),
            model=info.model or DEFAULT_MODEL,
            context_window=info.context_window or DEFAULT_CONTEXT_WINDOW,
            name=info.name,
            extensions=extensions,
            subagent=subagent,
            tools=tools,
            max_output_tokens=max_output_tokens,
        )
        session._save_state()
        return session

    @classmethod
    def resume(
        cls,
        wiring: SessionWiring,
        record: SessionRecord,
        lock: SessionLock,
        *,
        model: str | None,
        context_window: int | None,
        name: str | None,
        extensions: Sequence[SemanticMemoryExtension] = (),
        subagent: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> Session:
        """A session over the stored session ``record`` (loaded under ``lock``).

        ``model``, ``context_window`` and ``name`` replace the stored ones when given.
        Hosts call :meth:`Memory.session` (see :meth:`create`).
        """
        info = record.info
        state, kept, reasons = read_state(record.state, info.id)
        # Every row was checked on load (trusted by checksum, or validated): no second pass.
        messages = ValidatedMessages(record.messages) if record.validated else record.messages
        session = cls(
            wiring,
            info,
            lock,
            state,
            messages,
            record.billing,
            model=model or info.model or DEFAULT_MODEL,
            context_window=context_window or info.context_window or DEFAULT_CONTEXT_WINDOW,
            name=name if name is not None else info.name,
            extensions=extensions,
            subagent=subagent,
            tools=tools,
            max_output_tokens=max_output_tokens,
            threads=record.threads,
        )
        session._kept_state = kept
        session.unreadable_state = reasons
        session.repairs = MappingProxyType(record.reports())
        session._report_repairs()
        return session

    def _report_repairs(self) -> None:
        """The ``session.repaired`` progress event, when opening repaired anything."""
        problems = list(self.time_machine.problems)
        if self.repairs or problems:
            emit(
                self._wiring.reporter,
                "session.repaired",
                {"session_id": self.id, "repairs": dict(self.repairs), "time_machine": problems},
            )

    # ------------------------------------------------------------------ turns

    def start_task(self, user_message: str | Mapping[str, Any]) -> int:
        """Start a task: append the user's turn under a new task id and return the id.

        With extensions, each one then sees the user's words (capture, off the
        turn's path) and may return a ``<memory-context>`` block, which every
        later payload carries right after this turn (never stored).

        Args:
            user_message: The user's text, or a full user message dict.

        Raises:
            InvalidArgumentError: the message is empty (``""``, whitespace only,
                or empty content); nothing is stored.
            InvalidMessageError: the message is not a valid user message.
        """
        self._check_open()
        message: dict[str, Any]
        if isinstance(user_message, str):
            message = {"role": "user", "content": user_message}
        elif isinstance(user_message, Mapping):
            message = dict(user_message)
            if message.get("role") != "user":
                raise InvalidMessageError("start_task needs a user message", field="role")
        else:
            raise InvalidMessageError(
                f"start_task needs a string or a user message, got {type(user_message).__name__}"
            )
        content = message.get("content")
        if content == [] or (isinstance(content, str) and not content.strip()):
            raise InvalidArgumentError(
                "start_task needs the user's request: user_message is empty"
                + (" (whitespace only)" if content else "")
            )
        message.setdefault("created_at", time.time())
        with self._gate.writing(), self._gate.switching():
            # The turn is stored first: a kill before the tree has the task is finished
            # on the next open (tasks.finish_interrupted_start): the turn is never orphaned.
            task_id = self.time_machine.next_task_id
            message["task_id"] = task_id
            stored = self.history.append(message)
            self.time_machine.start_new_task(
                message_summary(message, self._wiring.scrubber), task_id=task_id
            )
            self.tasks.start(task_id)
            self._save_state()
        if self._ext.on_user_turn(stored):
            self._save_state()  # the turn's block, for an exact resume
        return task_id

    def undo(self) -> int | None:
        """Undo the active task: its files go back and its messages leave the context.

        Returns:
            The task now active (``None``: the session's initial state).
        """
        self._check_open()
        with self._gate.switching(), self._restoring("undo", None) as done:
            self.last_restore = self.time_machine.undo_last_task()
            done["to_task"] = self.time_machine.active_task_id
            done["skipped"] = self._skipped()
            return self.time_machine.active_task_id

    def switch_to_task(self, task_id: int | None) -> int | None:
        """Make ``task_id``'s end state current (redo, or a branch); files and messages follow.

        Raises:
            InvalidArgumentError: not a task of this session.
            RestoreError: a snapshot is missing or damaged; nothing changed.
        """
        self._check_open()
        with self._gate.switching(), self._restoring("switch", task_id) as done:
            self.last_restore = self.time_machine.switch_to_task(task_id)
            done["skipped"] = self._skipped()
            return self.time_machine.active_task_id

    def _skipped(self) -> list[str]:
        """The paths the last restore left alone (``path: reason``), for its progress event."""
        result = self.last_restore
        return [f"{f.path}: {f.reason}" for f in result.skipped] if result is not None else []

    def task_handle(self) -> TaskHandle[Message]:
        """A handle whose appends land in the active task, or raise once the user moved on.

        Take it right after :meth:`start_task`, in that thread; its appends
        raise :class:`~agentmem.errors.StaleTaskError` once :meth:`start_task`,
        :meth:`undo` or :meth:`switch_to_task` ran (:class:`agentmem.tasks.TaskHandle`).
        """
        self._check_open()
        return self._gate.handle(self.append)

    def tie_to(self, handle: TaskHandle[Any]) -> None:
        """Tie this (sub-agent's) session to another session's task (``handle``).

        :meth:`append` and :meth:`start_task` here then raise
        :class:`~agentmem.errors.StaleTaskError` once ``handle`` is stale;
        :meth:`record_usage` still records (the requests were paid for).

        Raises:
            InvalidArgumentError: ``handle`` is not a task handle.
        """
        self._gate.tie_to(handle)

    def _restoring(self, kind: str, to_task: int | None) -> AbstractContextManager[dict[str, Any]]:
        """``restore.started`` now, ``restore.finished`` when the block ends (progress events)."""
        return operation(
            self._wiring.reporter,
            "restore",
            session_id=self.id,
            operation=kind,
            from_task=self.time_machine.active_task_id,
            to_task=to_task,
        )

    def append(self, message: Mapping[str, Any] | Any) -> Message:
        """Append a message (OpenAI or Anthropic shape); durable when it returns.

        An SDK message object (a pydantic model such as OpenAI's
        ``ChatCompletionMessage`` or Anthropic's ``Message``) is read with
        ``model_dump(exclude_none=True)``.

        The message is tagged with the active task's id (:attr:`active_task_id`)
        unless it has one; a ``task_id`` it carries must be a task of this
        session (see :meth:`start_task`), since messages of tasks off the
        active chain are not sent.

        Returns:
            The stored copy.

        Raises:
            InvalidMessageError: invalid message; nothing stored.
            StorageError: the store could not write it; nothing stored.
        """
        self._check_open()
        message = message_mapping(message, index=len(self.history))
        with self._gate.writing():  # no undo or switch between reading the task and storing
            if "task_id" not in message:
                active = self.time_machine.active_task_id
                if active is not None:
                    message = {**message, "task_id": active}
            elif self.time_machine.has_tasks and message["task_id"] not in self.time_machine:
                raise InvalidMessageError(
                    f"task_id {message['task_id']!r} is not a task of this session; "
                    "start tasks with start_task()",
                    index=len(self.history),
                    field="task_id",
                )
            return self.history.append(message)

    def record_usage(
        self,
        prompt_tokens: int | object = None,
        completion_tokens: int = 0,
        cost_usd: float = 0.0,
        *,
        usage: object = None,
    ) -> None:
        """Record one LLM request: billing, iteration count, token calibration.

        Pass the provider's usage as it comes -- ``s.record_usage(usage=reply.usage)``
        (or the reply/response itself) -- for OpenAI Chat Completions, the
        Responses API, Anthropic Messages and DeepSeek, as an SDK object or a
        dict; :func:`agentmem.llm.parse_usage` reads it, so the prompt count
        includes the cached and cache-written tokens (Anthropic's
        ``input_tokens`` alone does not) and the billing record keeps the
        cached parts apart. Or pass the figures positionally:
        ``record_usage(prompt_tokens, completion_tokens, cost_usd)``, where
        ``prompt_tokens`` is the whole prompt, cached parts included.

        Each call counts one LLM iteration of the open task. With a
        learning estimator, the prompt count (what the provider billed for
        the last :meth:`context` payload) calibrates the token counter and
        anchors the next estimate on that payload.

        Raises:
            InvalidArgumentError: negative, non-numeric or absurdly large
                figures (tokens above 2**53-1, an infinite or NaN cost), a
                ``usage`` with no prompt figure, or both ``usage`` and
                ``prompt_tokens``; nothing is recorded.
        """
        self._check_open()
        figures = billed_figures(prompt_tokens, completion_tokens, cost_usd, usage)
        record = BillingRecord(
            at=time.time(),
            kind="llm",
            model=self.model,
            prompt_tokens=figures.prompt_tokens,
            completion_tokens=figures.completion_tokens,
            cost_usd=figures.cost_usd,
            cached_prompt_tokens=figures.cached_prompt_tokens,
            cache_write_tokens=figures.cache_write_tokens,
        )
        self._writer.add_billing(record)
        self._usage = self._usage.plus(record)
        self._calibrate(figures.prompt_tokens)
        self.tasks.count_iteration(self.open_task_id)
        self._save_state()

    def finish_task(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> int | None:
        """Finish the open task; returns its id (``None`` when no task was open).

        The task stays the active one (later appends still belong to it) but
        is never open again: :attr:`open_task_id` is ``None`` and iterations
        are not counted while it is active (an undo or a switch back to it
        does not reopen it; the next :meth:`start_task` opens a new task).

        At the end of a long task (see :mod:`agentmem.memory_updater`: the
        Memory has an ``llm``, the task took at least
        ``MEMORY_UPDATE_MIN_ITERATIONS`` iterations, memory updates are
        enabled, not incognito, not a sub-agent) this runs the memory updater
        with the Memory's (synchronous) llm. Its first request continues the
        task's last :meth:`context` payload (and ``tools``) unchanged, so the
        provider's prompt cache serves the task. Its failures never raise: the
        outcome is in :attr:`last_memory_update`; its cost is added to
        :attr:`usage` (``memory_update_*``) and billed as ``"memory_update"``.
        With an async llm use :meth:`afinish_task`; here the result carries
        the error saying so. ``KeyboardInterrupt`` propagates (the task is
        finished and saved first).

        Args:
            tools: The OpenAI tool specs the host sent with its last request. When
                they include ``list_memories``, ``read_memory`` and ``write_memory``
                the update sends them unchanged; otherwise it sends its own three
                (a cache miss, reported in the result).

        Raises:
            InvalidArgumentError: ``tools`` is not a list of tool specs (nothing is finished).
        """
        check_tools(tools)
        task_id, updater = self._end_task()
        if updater is not None:
            self._take_update(updater.run(self.history, **self._fork(tools)))
        return task_id

    async def afinish_task(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> int | None:
        """The async twin of :meth:`finish_task`: awaits an async (or calls a sync) llm."""
        check_tools(tools)
        task_id, updater = self._end_task()
        if updater is not None:
            fork = self._fork(tools, asynchronous=True)
            self._take_update(await updater.arun(self.history, **fork))
        return task_id

    def _fork(self, tools: Any, *, asynchronous: bool = False) -> dict[str, Any]:
        """How the memory update continues the task's last request (see memory_updater)."""
        if tools is None and self.tools is not None:  # what the session's requests carried
            tools = provider_tools(self.tools, "openai")  # the fork speaks OpenAI's shape
        # A rebuild's window is already smaller by what the fork adds (its tools included).
        args = self._build_args("openai", (), None, False, tools=(), max_output_tokens=0)
        chain, summarizer = self._chain(None), self._wiring.summarizer
        return fork_args(
            self.context_manager,
            self._sent,
            chain,
            summarizer,
            args,
            tools,
            asynchronous=asynchronous,
        )

    def _end_task(self) -> tuple[int | None, MemoryUpdater | None]:
        """Finish and save the task; the updater to run, if the task qualifies."""
        self._check_open()
        task_id = self.open_task_id
        iterations = self.tasks.iterations(task_id)
        if task_id is not None:
            self.tasks.finish(task_id)
            self._save_state()
        wiring = self._wiring
        reason = skip_reason(
            has_llm=wiring.llm is not None,
            settings=wiring.memory_update,
            incognito=wiring.incognito,
            subagent=self.subagent,
            task_id=task_id,
            iterations=iterations,
        )
        if reason is not None or wiring.llm is None:
            self.last_memory_update = MemoryUpdateResult(
                ran=False, skipped=reason, session_id=self.id, task_id=task_id, stopped="skipped"
            )
            return task_id, None
        updater = MemoryUpdater(
            wiring.llm,
            wiring.topics,
            settings=wiring.memory_update,
            token_counter=self.token_counter,
            context_window=self.context_window,
            reporter=wiring.reporter,
            session_id=self.id,
            task_id=task_id,
        )
        return task_id, updater

    def _take_update(self, result: MemoryUpdateResult) -> None:
        """Bill the update's requests to this session (not to the task) and keep the result."""
        self.last_memory_update = result
        for record in billing_records(result, self.model):
            self._usage = self._usage.plus(record)
            try:
                self._writer.add_billing(record)
            except AgentMemError as exc:  # the update's outcome must not raise into the host
                _log.warning("session %s: memory update billing not stored (%s)", self.id, exc)

    @property
    def usage(self) -> Usage:
        """Totals over every recorded request of this session."""
        return self._usage

    @property
    def active_task_id(self) -> int | None:
        """The task being worked on (``None``: before any task), read from the time machine."""
        return self.time_machine.active_task_id

    @property
    def open_task_id(self) -> int | None:
        """The active task while it is open: ``None`` once :meth:`finish_task` ended it."""
        return self.tasks.open_task(self.time_machine.active_task_id)

    def task_iterations(self, task_id: int | None = None) -> int:
        """LLM iterations recorded for a task (default: the open one; 0 when none is open).

        Raises:
            InvalidArgumentError: ``task_id`` is neither ``None`` nor an int.
        """
        return self.tasks.iterations(self.open_task_id if task_id is None else task_id)

    # ------------------------------------------------------------------ persistence

    def _restore_yarn(
        self, part: Mapping[str, Any] | None, threads: Mapping[str, Sequence[Message]]
    ) -> YaRN:
        summarizer = self._wiring.summarizer
        if part:
            try:
                return YaRN.from_state(
                    part, summarizer=summarizer, main_thread=self.history, saved_threads=threads
                )
            except AgentMemError as exc:
                _log.warning("session %s: thread summary not restored (%s)", self.id, exc)
        # No readable YaRN part: the side threads' rows still come back.
        yarn = YaRN(summarizer=summarizer, main_thread=self.history)
        try:
            return YaRN.from_state(
                yarn.state(include_threads=False),
                summarizer=summarizer,
                main_thread=self.history,
                saved_threads=threads,
            )
        except AgentMemError as exc:  # the rows stay stored: threads are only appended
            _log.warning("session %s: side threads not restored (%s)", self.id, exc)
            return yarn

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "window": self.window.state(),
            # Side threads are rows of the threads table (_save_state), not state.
            "yarn": self.yarn.state(include_threads=False),
            "tasks": self.tasks.state(),
        }
        if self._calibration is not None:
            state["estimator"] = self._calibration.state()
        extensions = self._ext.state()
        if extensions is not None:
            state["extensions"] = extensions
        # Parts this release could not read (a newer release wrote them) go back as they were.
        state.update(self._kept_state)
        return state

    def _save_state(self) -> None:
        # The side-thread messages archived since the last save are appended to the
        # threads table in the same transaction as the state: O(new messages), and a
        # kill leaves both written or neither (the state's thread order matches the rows).
        # Saves from two threads (a task handle's worker) must not both append the same
        # unsaved messages: taking, writing and marking them is one step.
        with self._saving:
            unsaved = self.yarn.unsaved_threads()
            threads = {tid: messages for tid, (_, messages) in unsaved.items()}
            self._writer.save_state_and_threads(self._state(), threads)
            self.yarn.mark_saved(unsaved)

    def _checkpoint(self, event: TrimEvent) -> None:
        """Write ``memory/session_progress.md`` before a trim (never in incognito mode)."""
        if self._wiring.incognito:
            return
        progress = progress_of(self.history, self.yarn.summary, task_chars=2000)
        lines = [
            "# Session progress",
            "",
            f"- session: {self.name or '(unnamed)'} (`{self.id}`)",
            f"- written: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, before a "
            f"stage-{event.stage} context trim "
            f"({event.tokens_before} -> {event.target_tokens} tokens)",
            f"- messages: {len(self.history)}; window starts at {self.window.start}",
            "",
            *render_progress(progress, with_summary=True),
            "",
        ]
        root = self._wiring.root
        path = root / PROGRESS_FILE
        make_dirs(root, path.parent)  # refuses a symlinked memory/ (UnsafePathError)
        text = scrub_with(self._wiring.scrubber, "\n".join(lines))
        atomic_write_text(path, text, root=root)

    # ------------------------------------------------------------------ lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")

    def close(self) -> None:
        """Persist the session state, close the extensions' recorders (each flush
        bounded by its ``flush_timeout``; a recorder another open session still
        uses stays open) and release the session lock. Idempotent."""
        if self._closed:
            return
        try:
            self._ext.close()
            self._save_state()
        finally:
            self._closed = True
            # Refuse stale writes before the lock goes: the next owner may be writing already.
            self.history.close(f"session {self.id} is closed")
            self._writer.close()
            self._lock.release()
            if self._wiring.on_close is not None:
                self._wiring.on_close(self)

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.id!r}, name={self.name!r}, messages={len(self.history)})"
