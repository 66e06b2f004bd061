"""LangChain 1.x agent middleware: agentmem's context pipeline before each model call.

``create_agent(model, tools, middleware=[AgentMemMiddleware(mem)])`` keeps the
agent's loop as it is and changes what the model is sent. Before each model
call the middleware

1. persists the messages of the agent's state that the thread's agentmem
   session does not hold yet (durable when the call returns), and
2. replaces the request's messages with the session's context: within the
   window (the tool schemas the request binds and ``max_output_tokens``
   counted), older turns folded into one ``<thread_summary>`` system message,
   and provider-valid (every tool call answered, no orphan tool message).

The agent's state is left alone: the checkpointer keeps the full thread, and
only the request to the model is windowed.

**One session per thread.** The session id is derived from the run's thread id
(``config={"configurable": {"thread_id": ...}}``; ``default_thread_id`` when the
run has none) by :meth:`AgentMemMiddleware.session_id_for`, which maps any string
to a distinct valid agentmem id. A session is opened on the thread's first model
call and released when the agent finishes (``after_agent``), so another process
can continue the thread; a run that ended in an exception or an interrupt keeps
its session open until the next run of that thread finishes, until
``max_open_sessions`` forces the least recently used idle one closed, or until
:meth:`AgentMemMiddleware.close`.

**What is stored.** Each stored message carries its LangChain id (``lc_id``)
and a fingerprint of its stored form (``lc_fp``) as internal fields, never sent
to a provider. The new messages of a request are those after the newest one
whose id is stored; a state whose ids are all unknown (a host that re-sends the
conversation without a checkpointer, so every message gets a fresh id) is
aligned with the stored tail by fingerprint. So a later call, a later run, or a
resumed thread in another process appends only what is new. A human message
starts an agentmem task (``Session.start_task``); the task is finished when
the agent finishes. The agent's system prompt (``request.system_message``) is
the session's system prompt; a ``SystemMessage`` inside the state is the host's
and is stored where it stands. A message agentmem cannot store as it is (a
content block no provider format has) is stored as its text, with the original
LangChain message kept beside it (``lc_message``), never dropped.

**What the model gets back.** A payload message that is the stored message
unchanged is handed over as the LangChain object of the request (ids, names,
``additional_kwargs`` and content blocks intact); a message the pipeline cut or
synthesised is converted from its OpenAI form, keeping its id, tool call ids
and tool name. The request's system message stays the object the agent built
(its content replaced only when agentmem adds to it, e.g. long-term memory);
the summary is a ``SystemMessage`` right after it.

**Overflow.** When the model raises LangChain's ``ContextOverflowError``, the
call is retried with ``Session.context_after_overflow(1..3)`` (stage 3).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agentmem import (
    InvalidArgumentError,
    InvalidMessageError,
    Memory,
    Session,
    SessionClosedError,
    normalize_message,
)
from agentmem._optional import require
from agentmem.integrations._ids import host_session_id

require("langchain.agents.middleware", "agentmem.integrations.langchain", "langchain")

from langchain.agents.middleware import (  # noqa: E402
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.exceptions import ContextOverflowError as LCContextOverflowError  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
    message_to_dict,
)
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402

__all__ = ["AgentMemMiddleware", "fingerprint", "to_openai_message"]

#: The internal fields this middleware adds to the messages it stores.
LC_ID = "lc_id"
LC_FP = "lc_fp"
LC_MESSAGE = "lc_message"
LC_SYSTEM = "lc_system"
#: The OpenAI Chat keys a fingerprint covers (what a provider is sent).
_API_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")
_OVERFLOW_ATTEMPTS = 3


def fingerprint(message: Mapping[str, Any]) -> str:
    """A short digest of what a stored message sends to a provider (its API keys)."""
    api = {k: message[k] for k in _API_KEYS if k in message}
    text = json.dumps(api, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "\n".join(parts)


def _reasoning_of(content: Any) -> str:
    """The text of the reasoning blocks of a LangChain content list."""
    parts: list[str] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, Mapping) and part.get("type") in ("reasoning", "thinking"):
            text = part.get("reasoning", part.get("thinking"))
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)


def to_openai_message(message: BaseMessage) -> dict[str, Any]:
    """One LangChain message as the canonical message agentmem stores (validated).

    The OpenAI Chat form of ``convert_to_openai_messages``, normalised by
    :func:`agentmem.normalize_message`, with the LangChain id and the fingerprint
    as internal fields. When that form is not a valid message, or LangChain
    cannot convert it (a content block no provider format carries, such as a
    ``reasoning`` or a ``video`` block), the message is stored as its text (its
    reasoning blocks as ``reasoning_content``) and the original rides along in
    ``lc_message``: counted as that text, and handed to the model as the
    original whenever the payload carries it unchanged.

    Raises:
        InvalidMessageError: the message cannot be stored even as text (e.g.
            a tool call whose name no provider accepts).
    """
    extra: dict[str, Any] = {LC_ID: message.id} if message.id else {}
    stored: Mapping[str, Any] | None = None
    try:
        (converted,) = convert_to_openai_messages([message])
        (stored,) = normalize_message({**converted, **extra})
    except (InvalidMessageError, ValueError, TypeError, NotImplementedError):
        text = _text_of(message.content)
        (converted,) = convert_to_openai_messages([message.model_copy(update={"content": text})])
        reduced = dict(converted)
        if reduced["role"] == "assistant":
            reasoning = _reasoning_of(message.content)
            if reasoning:
                reduced["reasoning_content"] = reasoning
            if not text and reduced.get("tool_calls"):
                reduced["content"] = None
        extra[LC_MESSAGE] = message_to_dict(message)
        (stored,) = normalize_message({**reduced, **extra})
    out = dict(stored)
    out[LC_FP] = fingerprint(out)
    return out


def _tool_specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The request's tools in the OpenAI shape agentmem counts."""
    specs: list[dict[str, Any]] = []
    for tool in tools:
        try:
            specs.append(dict(convert_to_openai_tool(tool)))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            if isinstance(tool, Mapping):
                specs.append(dict(tool))
            else:
                raise InvalidArgumentError(
                    f"cannot read the schema of tool {tool!r}: {exc}"
                ) from exc
    return specs


@dataclass
class _Thread:
    """One thread's open session and what it already stores (guarded by ``lock``)."""

    session: Session
    ids: set[str] = field(default_factory=set)
    fps: list[str] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    @classmethod
    def open(cls, session: Session) -> _Thread:
        thread = cls(session)
        for m in session.history.to_list():
            thread.remember(m)
        return thread

    def remember(self, stored: Mapping[str, Any]) -> None:
        if isinstance(stored.get(LC_ID), str):
            self.ids.add(stored[LC_ID])
        self.fps.append(str(stored.get(LC_FP) or fingerprint(stored)))


@dataclass(frozen=True)
class _View:
    """What the model is sent instead of the raw request."""

    system: SystemMessage | None
    messages: list[AnyMessage]


class AgentMemMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Persist each thread to an agentmem session; send the model its context.

    Args:
        memory: The :class:`agentmem.Memory` holding the sessions (embedded or
            PostgreSQL). The middleware does not close it.
        context_window: The window of each session (``None``: a new session's
            default, a resumed one's stored window).
        model: The model name for a new session's token counter (``None``: the
            memory's counter or agentmem's default).
        max_output_tokens: Room reserved for the answer on every call.
        default_thread_id: The thread of a run without a ``thread_id``.
        session_id: Maps a thread id to an agentmem session id (default
            :meth:`session_id_for`); must be injective.
        max_open_sessions: Sessions kept open at most; opening one more closes
            the least recently used idle one.
        finish_tasks: Call ``Session.finish_task()`` when the agent finishes
            (it may run the memory updater when the memory has an LLM).

    Raises:
        InvalidArgumentError: a bad argument.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        context_window: int | None = None,
        model: str | None = None,
        max_output_tokens: int | None = None,
        default_thread_id: str = "default",
        session_id: Callable[[str], str] | None = None,
        max_open_sessions: int = 32,
        finish_tasks: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(memory, Memory):
            raise InvalidArgumentError(
                f"memory must be an agentmem.Memory, got {type(memory).__name__}"
            )
        if not isinstance(default_thread_id, str) or not default_thread_id:
            raise InvalidArgumentError("default_thread_id must be a non-empty string")
        if (
            isinstance(max_open_sessions, bool)
            or not isinstance(max_open_sessions, int)
            or max_open_sessions < 1
        ):
            raise InvalidArgumentError(
                f"max_open_sessions must be an int >= 1, got {max_open_sessions!r}"
            )
        self.memory = memory
        self.context_window = context_window
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.default_thread_id = default_thread_id
        self._session_id = session_id or self.session_id_for
        self.max_open_sessions = max_open_sessions
        self.finish_tasks = finish_tasks
        self._threads: OrderedDict[str, _Thread] = OrderedDict()
        self._lock = threading.Lock()  # guards _threads and _closed; never held for I/O
        self._opening = threading.Lock()  # one open at a time: never two sessions for a thread
        self._closed = False

    # -- threads and sessions -------------------------------------------------

    @staticmethod
    def session_id_for(thread_id: str) -> str:
        """The agentmem session id of a LangChain thread id.

        Any string maps to a valid id (letters, digits, ``_``, ``-``, ``.``), and
        distinct thread ids map to distinct ids, case differences included:
        ``lc-<readable part>-<24 hex digits of the id's SHA-256>``.
        """
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidArgumentError(f"thread id must be a non-empty string, got {thread_id!r}")
        return host_session_id("lc-", thread_id, readable=True, digits=24)

    def thread_id_of(self, runtime: Runtime[Any] | None) -> str:
        """The run's thread id (``default_thread_id`` when it has none)."""
        info = getattr(runtime, "execution_info", None)
        thread_id = getattr(info, "thread_id", None)
        if thread_id is None:
            return self.default_thread_id
        return str(thread_id)

    @property
    def open_threads(self) -> list[str]:
        """The thread ids whose sessions are open now, least recently used first."""
        with self._lock:
            return list(self._threads)

    @contextmanager
    def _thread(self, thread_id: str) -> Iterator[_Thread]:
        """The thread's state, its lock held; its session opened when needed."""
        while True:
            with self._lock:
                if self._closed:
                    raise SessionClosedError("the AgentMemMiddleware is closed")
                thread = self._threads.get(thread_id)
                if thread is not None:
                    self._threads.move_to_end(thread_id)
            if thread is None:
                with self._opening:
                    with self._lock:
                        thread = self._threads.get(thread_id)
                    if thread is None:
                        thread = self._open(thread_id)
            with thread.lock:
                with self._lock:
                    current = self._threads.get(thread_id)
                if current is thread:  # not released while we waited for the lock
                    yield thread
                    return

    def _open(self, thread_id: str) -> _Thread:
        session = self.memory.session(
            session_id=self._session_id(thread_id),
            name=None,
            model=self.model,
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
        )
        try:
            thread = _Thread.open(session)
        except BaseException:
            session.close()
            raise
        evicted: list[_Thread] = []
        with self._lock:
            self._threads[thread_id] = thread
            for tid, other in list(self._threads.items()):
                if len(self._threads) <= self.max_open_sessions:
                    break
                if other is not thread and other.lock.acquire(blocking=False):
                    del self._threads[tid]
                    evicted.append(other)
        for other in evicted:
            try:
                other.session.close()
            finally:
                other.lock.release()
        return thread

    def release(self, thread_id: str) -> None:
        """Close the thread's session now (the next model call of the thread reopens it)."""
        with self._lock:
            thread = self._threads.get(thread_id)
        if thread is None:
            return
        with thread.lock:
            with self._lock:
                if self._threads.get(thread_id) is thread:
                    del self._threads[thread_id]
            thread.session.close()

    def close(self) -> None:
        """Release every open session; later model calls raise ``SessionClosedError``.

        Idempotent.
        """
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for thread_id in threads:
            self.release(thread_id)

    async def aclose(self) -> None:
        """:meth:`close` off the event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> AgentMemMiddleware:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- persisting -------------------------------------------------------------

    def _sync_system(self, thread: _Thread, system: SystemMessage | None) -> None:
        """Store the request's system prompt as the session's (or drop the one we stored)."""
        history = thread.session.history
        first = history[0] if history.has_system_prompt() else None
        if system is None:
            if first is not None and first.get(LC_SYSTEM):
                history.delete_where(lambda m: m["role"] == "system" and bool(m.get(LC_SYSTEM)))
            return
        (converted,) = convert_to_openai_messages([system])
        content = converted.get("content")
        if not isinstance(content, str) and not _all_text(content):
            content = _text_of(content)
        if first is not None and first.get("content") == content and first.get(LC_SYSTEM):
            return
        if first is not None and not first.get(LC_SYSTEM):
            # The thread starts with a system message of the host's own (stored from the
            # state): put the prompt before it rather than replace it.
            prompt = {"role": "system", "content": content, LC_SYSTEM: True}
            history.replace_all([prompt, *history.to_list()])
            return
        history.replace_system_prompt(content, **{LC_SYSTEM: True})

    def _persist(self, thread: _Thread, messages: Sequence[BaseMessage]) -> int:
        """Append the messages of the state the session does not hold; how many.

        The state never holds the agent's system prompt (``create_agent`` passes it
        as ``request.system_message``), so a ``SystemMessage`` in it is the host's
        and is stored in its place, like any other message.
        """
        new = self._new_messages(thread, messages)
        session = thread.session
        for message in new:  # a SystemMessage of the state is the host's, not the prompt
            stored = to_openai_message(message)
            if isinstance(message, HumanMessage) and _text_of(stored.get("content")).strip():
                session.start_task(stored)
            else:
                session.append(stored)
            thread.remember(stored)
        return len(new)

    @staticmethod
    def _new_messages(thread: _Thread, messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].id is not None and messages[i].id in thread.ids:
                return messages[i + 1 :]
        rest = list(messages)
        if not thread.fps or not rest:
            return rest
        # No id known: align the state's head with the stored tail by fingerprint (the
        # longest overlap wins), so a host re-sending the history appends only the rest.
        fps = [to_openai_message(m)[LC_FP] for m in rest]
        stored = thread.fps
        best = 0
        for start in range(max(0, len(stored) - len(fps)), len(stored)):
            j = len(stored) - start
            if stored[start] == fps[0] and stored[start:] == fps[:j]:
                best = j
                break
        return rest[best:]

    # -- the model call ------------------------------------------------------------

    def _prepare(self, request: ModelRequest[Any], attempt: int) -> tuple[_View, str]:
        thread_id = self.thread_id_of(request.runtime)
        tools = _tool_specs(request.tools)
        with self._thread(thread_id) as thread:
            self._sync_system(thread, request.system_message)
            self._persist(thread, request.messages)
            session = thread.session
            if attempt == 0:
                session.context(tools=tools)
            else:
                session.context_after_overflow(attempt, tools=tools)
            build = session.context_manager.last_build
            canonical = list(build.messages) if build is not None else []
            return self._view(session, canonical, request), thread_id

    @staticmethod
    def _view(
        session: Session, canonical: list[dict[str, Any]], request: ModelRequest[Any]
    ) -> _View:
        system = request.system_message
        body = canonical
        if (
            system is not None
            and body
            and body[0].get("role") == "system"
            and not body[0].get("compressed_summary")
        ):
            first = body[0]
            stored = session.history[0] if session.history.has_system_prompt() else {}
            if first.get("content") != stored.get("content"):  # agentmem added to it
                system = system.model_copy(update={"content": first.get("content")})
            body = body[1:]
        originals = {m.id: m for m in request.messages if m.id is not None}
        out: list[AnyMessage] = []
        for m in body:
            lc_id = m.get(LC_ID)
            original = originals.get(lc_id) if isinstance(lc_id, str) else None
            if original is not None and m.get(LC_FP) == fingerprint(m):
                out.append(original)
                continue
            out.append(_from_openai(m, original))
        return _View(system, out)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Persist the new messages, send the model the session's context."""
        for attempt in range(_OVERFLOW_ATTEMPTS + 1):
            view, thread_id = self._prepare(request, attempt)
            try:
                response = handler(
                    request.override(messages=view.messages, system_message=view.system)
                )
            except LCContextOverflowError:
                if attempt == _OVERFLOW_ATTEMPTS:
                    raise
                continue
            self._record_usage(thread_id, response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """The async twin of :meth:`wrap_model_call` (agentmem's work off the event loop)."""
        for attempt in range(_OVERFLOW_ATTEMPTS + 1):
            view, thread_id = await asyncio.to_thread(self._prepare, request, attempt)
            try:
                response = await handler(
                    request.override(messages=view.messages, system_message=view.system)
                )
            except LCContextOverflowError:
                if attempt == _OVERFLOW_ATTEMPTS:
                    raise
                continue
            await asyncio.to_thread(self._record_usage, thread_id, response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _record_usage(self, thread_id: str, response: ModelResponse[Any]) -> None:
        """Bill the payload just sent with the model's reported usage (calibrates the counter)."""
        for message in getattr(response, "result", ()):
            usage = getattr(message, "usage_metadata", None)
            if isinstance(message, AIMessage) and usage and usage.get("input_tokens"):
                with self._thread(thread_id) as thread:
                    thread.session.record_usage(
                        int(usage["input_tokens"]), int(usage.get("output_tokens") or 0)
                    )
                return

    # -- the end of a run --------------------------------------------------------------

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Persist the run's last messages, finish its task, release the session."""
        thread_id = self.thread_id_of(runtime)
        with self._thread(thread_id) as thread:
            self._persist(thread, state.get("messages", []))
            if self.finish_tasks and thread.session.open_task_id is not None:
                thread.session.finish_task()
        self.release(thread_id)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """The async twin of :meth:`after_agent`."""
        return await asyncio.to_thread(self.after_agent, state, runtime)


def _all_text(content: Any) -> bool:
    return isinstance(content, list) and all(
        isinstance(p, Mapping) and p.get("type") == "text" for p in content
    )


def _from_openai(message: Mapping[str, Any], original: BaseMessage | None) -> AnyMessage:
    """A payload message as a LangChain message, keeping its id and tool name."""
    api = {k: message[k] for k in _API_KEYS if k in message and k != "reasoning_content"}
    if api.get("role") == "assistant" and api.get("content") is None:
        api["content"] = ""
    (converted,) = convert_to_messages([api])
    update: dict[str, Any] = {}
    lc_id = message.get(LC_ID)
    if isinstance(lc_id, str):
        update["id"] = lc_id
    if isinstance(converted, ToolMessage):
        name = getattr(original, "name", None) or message.get("name")
        if name:
            update["name"] = name
    result = converted.model_copy(update=update) if update else converted
    return result  # type: ignore[return-value]
