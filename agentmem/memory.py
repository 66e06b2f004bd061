"""Memory and Session: the facade that wires the parts together.

A host makes one :class:`Memory` per project and opens a :class:`Session`
per conversation::

    mem = agentmem.Memory(root=".agentmem", working_dir=".")
    with mem.session(name="fix tests", model="claude-sonnet-4-5", context_window=200_000) as s:
        s.start_task("Make the failing test pass.")
        while True:
            reply = my_llm(s.context(provider="anthropic"))     # fits the window, valid
            s.record_usage(usage=reply.usage)   # the provider's usage, as it comes
            s.append(reply_message)                             # durable when it returns
            ...
        s.finish_task()

The facade owns no logic a part should own. It builds the stores once;
:meth:`Memory.session` opens or creates the stored session, takes its lock
and hands the session a :class:`~agentmem.session.SessionWiring` made from
the memory's configuration at that moment: the stores, the host's
components, the settings and the paths a session uses (the session never
sees the ``Memory``). A session wires, from it:

* a :class:`~agentmem.history.MessageHistory` whose observer is the session
  store's writer, so every mutation (through ``s.append`` or ``s.history``)
  is on disk when the call returns;
* a :class:`~agentmem.stm.ShortTermMemory` window over that history, whose
  evictions go to :class:`~agentmem.yarn.YaRN` (which reads the history as
  its main thread, so nothing is stored twice);
* a :class:`~agentmem.context.ContextManager` that builds each payload and
  writes ``memory/session_progress.md`` before every trim;
* the token counter: the host's, or ``counter_for_model(model)`` -- exact
  tiktoken for OpenAI models, otherwise a learning estimator. Any
  :class:`~agentmem.protocols.CalibratingCounter` is calibrated by
  :meth:`Session.record_usage` with the provider's own counts; every session
  calibrates its own deep copy of the host's counter, so two sessions, or a
  resume, never overwrite each other's calibration;
* a :class:`~agentmem.tasks.TaskTracker` for per-task iteration counts
  (task ids and the active task belong to the session's time machine);
* the session's semantic memory extensions (``extensions=``, never
  inherited by sub-agents): :class:`~agentmem.semantic.extension.SessionExtensions`
  holds their persona and the ``<memory-context>`` block of each user turn.

A session is exclusive: a second open of the same id, from this process or
another, raises :class:`~agentmem.errors.StoreLockedError` until the first is
closed (or its process dies). Incognito memory writes nothing at all.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, get_args

from agentmem._storage.backend import NOTES_DIR, Backend, open_backend
from agentmem._storage.gc import gc_paused
from agentmem._validate import (
    check_component,
    check_flag,
    config_path,
    context_settings,
)
from agentmem.context import ContextSettings, session_tools
from agentmem.errors import (
    ConfigurationError,
    InvalidArgumentError,
    SessionNotFoundError,
    StorageError,
)
from agentmem.items import ItemStore
from agentmem.ltm import LongTermMemory
from agentmem.memory_updater import MemoryUpdateSettings, update_settings
from agentmem.notes import KeyValueStore
from agentmem.protocols import (
    LLM,
    CalibratingCounter,
    ProgressReporter,
    Summarizer,
    TokenCounter,
)
from agentmem.recall import RecallHit, recall
from agentmem.scrub import Scrubber, resolve_scrubber
from agentmem.semantic.extension import SemanticMemoryExtension, check_extensions
from agentmem.session import Session, SessionWiring, Usage
from agentmem.session.wiring import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MODEL,
    MAX_CONTEXT_WINDOW,
    MIN_CONTEXT_WINDOW,
    SNAPSHOTS_DIR,
)
from agentmem.session_store import Durability, SessionStore, open_session_store
from agentmem.time_machine import delete_stored_session, read_task_tree
from agentmem.tools import MemoryTools
from agentmem.topics import TopicStore

__all__ = ["Memory", "Session", "Usage"]


class Memory:
    """One project's memory: its sessions, long-term memory and notes.

    Args:
        root: Directory for everything agentmem stores. A relative path is
            taken relative to ``working_dir``. Nothing is written outside it.
        working_dir: The project the agent works in.
        llm: The host's model (sync or async callable, see
            :class:`~agentmem.protocols.LLM`); used by LLM-driven parts.
        token_counter: Counter for every session; default: chosen per model.
            A :class:`~agentmem.protocols.CalibratingCounter` is deep-copied
            per session, so each session keeps its own calibration.
        incognito: Write nothing at all (sessions live in memory only).
        ltm_enabled: Inject long-term memory into system prompts.
        durability: ``"full"`` (default): every append is fsynced before it
            returns and survives power loss. ``"normal"``: survives a process
            crash or kill -9, several times faster.
        summarizer: Optional LLM summarizer for thread summaries (the
            extractive summary is used without one, and whenever it fails).
        context: :class:`~agentmem.context.ContextSettings` (or a mapping) used
            as the default for sessions; ``context_window`` comes from
            :meth:`session`.
        reporter: Receives progress events (:class:`~agentmem.protocols.ProgressReporter`):
            trims, overflow recovery, undo/switch restores, resume repairs,
            recall index rebuilds, exports, memory updates (docs/progress.md).
        scrub_secrets: Redact secrets (API keys, tokens, passwords...) before
            anything reaches long-term memory, notes or topic files: ``True``
            (default, see :mod:`agentmem.scrub`), ``False``, or a callable
            ``(text) -> text``.
        memory_update: The memory updater (:mod:`agentmem.memory_updater`), run by
            ``Session.finish_task()`` at the end of long tasks when ``llm`` is set:
            ``True`` (default), ``False`` (never run it; topic files are still
            injected), or a :class:`~agentmem.memory_updater.MemoryUpdateSettings`
            (or a mapping of its fields: ``enabled``, ``min_iterations``,
            ``max_iterations``, ``max_tokens_per_file``, ``inject_topics``,
            ``prompt_tokens``).
        backend: Where the stores live: ``None`` (the ``AGENTMEM_BACKEND``
            environment variable, else embedded), ``"embedded"``/``"sqlite"``
            (``sessions.sqlite`` and the files under ``root``), or a
            ``"postgresql://user@host:port/db"`` DSN (the ``postgres`` extra;
            docs/backends.md): sessions with their recall index, long-term
            memory, notes and topics in that database, sharing one connection
            pool (a :class:`~agentmem.semantic.LocalMemoryClient` built from this
            memory follows it). What describes the local disk stays under
            ``root`` on every backend: the time machine's snapshots and the trim
            checkpoint. Checked, then unused, when ``incognito``.

    Attributes:
        ltm: :class:`~agentmem.ltm.LongTermMemory` in ``<root>/ltm.json``.
        notes: :class:`~agentmem.notes.KeyValueStore` in ``<root>/memory/``.
        topics: :class:`~agentmem.topics.TopicStore` in ``<root>/memories/``: the
            memory updater's topic files (in memory only when incognito).
        items: :class:`~agentmem.items.ItemStore` in ``<root>/items/`` (or the
            PostgreSQL backend): namespaced JSON items with timestamps, the storage of
            :class:`agentmem.integrations.langgraph.AgentMemStore` (in memory only
            when incognito).
        memory_update: The resolved :class:`~agentmem.memory_updater.MemoryUpdateSettings`.
        tools: :class:`~agentmem.tools.MemoryTools`: the ``memory_operations``
            tool schemas and dispatcher over this memory.
        scrubber: The secret scrubber every durable cross-session write uses
            (``None`` with ``scrub_secrets=False``); a
            :class:`~agentmem.semantic.LocalMemoryClient` built from this memory uses it too.
    """

    def __init__(
        self,
        root: str | Path = ".agentmem",
        working_dir: str | Path = ".",
        llm: LLM | Any | None = None,
        token_counter: TokenCounter | None = None,
        incognito: bool = False,
        ltm_enabled: bool = True,
        *,
        durability: Durability = "full",
        summarizer: Summarizer | None = None,
        context: ContextSettings | Mapping[str, Any] | None = None,
        reporter: ProgressReporter | None = None,
        scrub_secrets: bool | Scrubber = True,
        memory_update: bool | MemoryUpdateSettings | Mapping[str, Any] = True,
        backend: str | None = None,
    ) -> None:
        self.working_dir = config_path("working_dir", working_dir).resolve()
        if not self.working_dir.is_dir():
            raise ConfigurationError(
                f"working_dir {str(self.working_dir)!r} is not an existing directory"
            )
        root_path = config_path("root", root)
        if not str(root).strip():  # Path("") is ".": the project itself would become the root
            raise ConfigurationError("root must not be empty; default: '.agentmem'")
        self.root = root_path if root_path.is_absolute() else self.working_dir / root_path
        check_flag("incognito", incognito)
        check_flag("ltm_enabled", ltm_enabled)
        if durability not in get_args(Durability):
            raise ConfigurationError(
                f"durability must be one of {', '.join(map(repr, get_args(Durability)))}, "
                f"got {durability!r}"
            )
        check_component("llm", llm, LLM, "a callable llm(messages, tools=None) -> dict")
        check_component("token_counter", token_counter, TokenCounter, "count_text(text) -> int")
        check_component("summarizer", summarizer, Summarizer, "summarize(messages, previous)")
        check_component("reporter", reporter, ProgressReporter, "report(event, data)")
        if not isinstance(scrub_secrets, bool) and not callable(scrub_secrets):
            raise ConfigurationError(
                f"scrub_secrets must be True, False or a callable (text) -> text, "
                f"got {type(scrub_secrets).__name__}"
            )
        scrubber = resolve_scrubber(scrub_secrets)
        self.scrubber: Scrubber | None = scrubber
        self.memory_update = update_settings(memory_update)
        if isinstance(token_counter, CalibratingCounter):
            try:
                copy.deepcopy(token_counter)
            except Exception as exc:
                raise ConfigurationError(
                    f"token_counter is a CalibratingCounter but cannot be deep-copied, and "
                    f"each session calibrates its own copy: {exc!r}"
                ) from exc
        self.llm = llm
        self.token_counter = token_counter
        self.incognito = incognito
        self.ltm_enabled = ltm_enabled
        self.summarizer = summarizer
        self.reporter = reporter
        self._context = context_settings(context)
        self._backend: Backend | None = None
        # ConfigurationError before any write
        chosen = open_backend(self.root, backend, durability=durability)
        if incognito:
            self.sessions = SessionStore(None, durability=durability, reporter=reporter)
            self.ltm = LongTermMemory(None, scrubber=scrubber)
            self.notes = KeyValueStore(None, scrubber=scrubber)
            self.items = ItemStore(None)
            self.topics = TopicStore(
                None,
                scrubber=scrubber,
                token_counter=token_counter,
                max_tokens_per_file=self.memory_update.max_tokens_per_file,
            )
        else:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"root {str(self.root)!r} cannot be used as the memory directory: "
                    f"{exc.strerror or exc}",
                    path=self.root,
                ) from exc
            try:
                self.sessions = open_session_store(
                    chosen.sessions_database(),
                    durability=durability,
                    reporter=reporter,
                    purge=functools.partial(delete_stored_session, self.root / SNAPSHOTS_DIR),
                    task_tree=functools.partial(read_task_tree, self.root / SNAPSHOTS_DIR),
                )
            except BaseException:
                chosen.close()
                raise
            try:
                self.ltm = LongTermMemory(chosen.documents("ltm"), scrubber=scrubber)
                self.notes = KeyValueStore(
                    chosen.documents("notes"), scrubber=scrubber, progress=self.root / NOTES_DIR
                )
                self.topics = TopicStore(
                    chosen.documents("topics"),
                    scrubber=scrubber,
                    token_counter=token_counter,
                    max_tokens_per_file=self.memory_update.max_tokens_per_file,
                )
                self.items = ItemStore(chosen.documents("items"))
            except BaseException:
                chosen.close()
                self.sessions.close()
                raise
            self._backend = chosen
        self.tools = MemoryTools(self)
        self._open: dict[str, Session] = {}
        self._closed = False

    @property
    def backend(self) -> Backend | None:
        """Where the stores live (:attr:`Backend.name <agentmem._storage.backend.Backend>`
        says which); ``None`` when incognito."""
        return self._backend

    def session(
        self,
        session_id: str | None = None,
        name: str | None = None,
        model: str | None = None,
        context_window: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        create: bool = True,
        *,
        extensions: Sequence[SemanticMemoryExtension] = (),
        subagent: bool = False,
    ) -> Session:
        """Open a session: a new one, or the stored one when ``session_id`` exists.

        Args:
            session_id: Id to resume or to create; a new uuid when omitted.
            name: Display name (updates a resumed session's name when given).
            model: Model name (default ``"gpt-4o"``); chooses the token counter.
                A resumed session keeps its stored model unless one is given.
            context_window: The model's context window in tokens (default
                128,000; a resumed session keeps its stored window unless given).
            tools: Tool specs sent with every request of this session (OpenAI
                Chat, OpenAI Responses or Anthropic shape): the default of
                ``Session.context(tools=...)``, whose cost comes off the window.
                A frozen copy is kept; not stored: say it on every open.
            max_output_tokens: Tokens kept free for every answer: the default of
                ``Session.context(max_output_tokens=...)``. Not stored.
            create: ``False``: only resume. An unknown ``session_id`` raises
                :class:`~agentmem.errors.SessionNotFoundError` and creates
                nothing (no record, no lock file, no directory).
            extensions: :class:`~agentmem.semantic.SemanticMemoryExtension` objects
                for this session: each user turn is captured and gets its
                ``<memory-context>`` block, and resident personas join the system
                prompt. Nothing is inherited: a sub-agent's session has only the
                extensions passed to its own ``session()`` call.
            subagent: The session is a sub-agent's (kept as ``Session.subagent``): it
                reads memory but never runs the memory updater (recursion guard) and
                inherits no extension. Not stored: say it on every open.

        Raises:
            StoreLockedError: the session is already open (here or in another process).
            SessionNotFoundError: ``create=False`` and no session has this id.
            ConfigurationError: a ``context_window`` outside 256..2**31-1, a
                ``model`` that is not a non-empty string, ``extensions`` that are
                not extensions, a ``subagent`` or ``create`` that is not a bool,
                malformed ``tools``, or a ``max_output_tokens`` that is not an
                int >= 0 below the context window.
            InvalidArgumentError: bad id or name; ``create=False`` without an id.
        """
        if self._closed:
            raise InvalidArgumentError("this Memory is closed")
        check_flag("subagent", subagent)
        check_flag("create", create)
        frozen_tools = session_tools(tools, max_output_tokens, context_window)
        if context_window is not None and (
            isinstance(context_window, bool)
            or not isinstance(context_window, int)
            or not MIN_CONTEXT_WINDOW <= context_window <= MAX_CONTEXT_WINDOW
        ):
            raise ConfigurationError(
                f"context_window must be an int from {MIN_CONTEXT_WINDOW} to "
                f"{MAX_CONTEXT_WINDOW}, got {context_window!r}"
            )
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        if name is not None and not isinstance(name, str):
            raise InvalidArgumentError(f"name must be a string or None, got {name!r}")
        extensions = check_extensions(extensions)
        store = self.sessions
        wiring = self._session_wiring()
        if not create:
            if session_id is None:
                raise InvalidArgumentError("create=False needs the id of a stored session")
            # Look before locking: taking the lock would create a lock file for a typo.
            if not store.exists(session_id):
                raise SessionNotFoundError(session_id)
        # Lock before looking: two processes opening one new id must not both decide to
        # create it (the loser would get "already exists" instead of StoreLockedError).
        lock = store.lock(session_id) if session_id is not None else None
        try:
            exists = lock is not None and store.exists(lock.session_id)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        if lock is not None and not exists and not create:
            lock.discard()  # deleted since we looked: leave nothing behind
            raise SessionNotFoundError(lock.session_id)
        if lock is not None and exists:
            try:
                # A resume allocates per message and per task; nothing it builds holds a
                # cycle, so the cyclic collector would only re-scan the growing heap.
                with gc_paused():
                    record = store.load(lock.session_id)
                    if name is not None and name != record.info.name:
                        store.rename(record.info.id, name)
                    session = Session.resume(
                        wiring,
                        record,
                        lock,
                        model=model,
                        context_window=context_window,
                        name=name,
                        extensions=extensions,
                        subagent=subagent,
                        tools=frozen_tools,
                        max_output_tokens=max_output_tokens,
                    )
            except BaseException:
                lock.release()
                raise
        else:
            try:
                info = store.create(
                    session_id=session_id,
                    name=name,
                    working_directory=str(self.working_dir),
                    model=model or DEFAULT_MODEL,
                    context_window=context_window or DEFAULT_CONTEXT_WINDOW,
                )
                if lock is None:
                    lock = store.lock(info.id)
                session = Session.create(
                    wiring,
                    info,
                    lock,
                    extensions=extensions,
                    subagent=subagent,
                    tools=frozen_tools,
                    max_output_tokens=max_output_tokens,
                )
            except BaseException:
                if lock is not None:
                    lock.release()
                raise
        self._open[session.id] = session
        return session

    def _session_wiring(self) -> SessionWiring:
        """What a session is built from: this memory's stores, components and settings."""
        return SessionWiring(
            sessions=self.sessions,
            working_dir=self.working_dir,
            root=self.root,
            ltm=self.ltm,
            topics=self.topics,
            ltm_enabled=self.ltm_enabled,
            incognito=self.incognito,
            llm=self.llm,
            summarizer=self.summarizer,
            token_counter=self.token_counter,
            reporter=self.reporter,
            scrubber=self.scrubber,
            context=self._context,
            memory_update=self.memory_update,
            on_close=self._forget,
        )

    def recall(
        self,
        query: str,
        max_sessions: int | None = None,
        max_results: int = 5,
        *,
        session_ids: Sequence[str] | None = None,
        roles: Sequence[str] | None = None,
        since: datetime | float | None = None,
        until: datetime | float | None = None,
        exclude_session: str | None = None,
    ) -> list[RecallHit]:
        """Search every stored session for ``query``; see :func:`agentmem.recall.recall`."""
        return recall(
            self.sessions,
            query,
            max_sessions,
            max_results,
            session_ids=session_ids,
            roles=roles,
            since=since,
            until=until,
            exclude_session=exclude_session,
        )

    def _forget(self, session: Session) -> None:
        self._open.pop(session.id, None)

    def close(self) -> None:
        """Close every open session and the stores. Idempotent."""
        if self._closed:
            return
        for session in list(self._open.values()):
            session.close()
        self.sessions.close()
        if self._backend is not None:
            self._backend.close()
        self._closed = True

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "incognito" if self.incognito else str(self.root)
        return f"Memory({mode})"
