"""The OpenAI Agents SDK ``Session`` protocol on an agentmem session (extra ``openai-agents``).

:class:`AgentMemSession` is what ``Runner.run(agent, input, session=...)`` takes in
place of the SDK's ``SQLiteSession``: the same five members (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``,
``clear_session``) with the same answers, on a :class:`agentmem.Session`.

How items are kept. Every item the runner hands over becomes part of one agentmem
session: :func:`agentmem.messages.from_responses_items` turns a batch into canonical
chat messages, each carrying its exact original items in the internal field
``responses_items``, and the batch is appended with one ``history.extend`` (one
transaction: a batch is stored whole or not at all, durable when ``add_items``
returns). ``get_items`` hands back those originals, flattened in order and deep
copied, so an item comes back exactly as it was stored (fields agentmem does not
know, and their JSON types, included), while the session's messages are what recall
indexes and what the context window fits. ``pop_item`` removes the newest item: the
last message is dropped, or rewritten without its last item when it holds several.

A history drops an assistant turn whose tool calls were never answered when a user
message follows it (the payload rule of :meth:`agentmem.MessageHistory.extend`). The
SDK stores exactly that when a run stops for a tool approval and the next run starts
with new input instead of resuming, and its ``SQLiteSession`` keeps the call. So
before such a user message the adapter stores the unanswered turn without its
``tool_calls`` (its original items stay in ``responses_items``): nothing the runner
stored is lost, and the payload sends what the history would have sent. Popping that
user message gives the turn its calls back.

Session ids. The SDK accepts any string; agentmem session ids are 1-128 characters
of letters, digits, ``_``, ``.`` and ``-``, and each names a lock file. The agentmem
id is ``agents-`` + the SHA-256 of the SDK id's UTF-8 bytes in lower-case hex
(:func:`agentmem_session_id`): any string maps to a safe id, distinct strings to
distinct ids (ids that differ only in case too, on any file system), and the SDK id
is kept as the session's name.

Concurrency. The agentmem session is opened when the object is made and stays
locked until :meth:`AgentMemSession.close`: a second object or process opening the
same id gets :class:`~agentmem.errors.StoreLockedError`. Every call runs the blocking
store work in a worker thread (``asyncio.to_thread``) under one lock per object, so
``add_items`` from several asyncio tasks and threads (each with its own event loop)
interleave whole batches and lose nothing; a mutation whose caller is cancelled
finishes before the cancellation is re-raised, as the SDK's own sessions do.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import orjson

from agentmem import (
    INTERNAL_FIELDS,
    InvalidArgumentError,
    InvalidMessageError,
    Memory,
    Message,
    MessageHistory,
    SessionClosedError,
    sanitize_text,
)
from agentmem import Session as AgentMemStoreSession
from agentmem._optional import require
from agentmem.integrations._ids import host_session_id
from agentmem.messages import from_responses_items, to_responses_items

require("agents", "agentmem.integrations.openai_agents", "openai-agents")

from agents import RunContextWrapper  # noqa: E402  (after the extra check)
from agents.items import TResponseInputItem  # noqa: E402
from agents.memory.session_settings import (  # noqa: E402
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

__all__ = ["ITEMS_FIELD", "AgentMemSession", "agentmem_session_id"]

ITEMS_FIELD = "responses_items"
"""The internal message field holding a message's original Responses items."""

_ID_PREFIX = "agents-"
_T = TypeVar("_T")


def agentmem_session_id(session_id: str) -> str:
    """The agentmem session id of an Agents SDK session id.

    ``agents-`` followed by the SHA-256 of the id's UTF-8 bytes (lone surrogates
    kept distinct), in lower-case hex: 71 characters agentmem accepts as a session id
    and a lock-file name, equal for equal ids, different for different ones (case
    included).

    Raises:
        InvalidArgumentError: ``session_id`` is not a string.
    """
    if not isinstance(session_id, str):
        raise InvalidArgumentError(f"session_id must be a string, got {type(session_id).__name__}")
    return host_session_id(_ID_PREFIX, session_id)


def _display_name(session_id: str) -> str | None:
    """The agentmem session's name: the SDK id as text any backend stores (``None``: empty).

    Lone surrogates and NUL (PostgreSQL text cannot hold it) become U+FFFD; the name
    is only shown, the id is the hash of the exact string.
    """
    return sanitize_text(session_id).replace("\x00", "\ufffd") if session_id else None


def _copy(value: _T) -> _T:
    """A deep copy of a JSON value (what every stored item is)."""
    return cast(_T, orjson.loads(orjson.dumps(value)))


def _has_calls(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def _items_of(message: Mapping[str, Any]) -> list[Any]:
    """The Responses items a stored message stands for (its originals when it has them)."""
    items = message.get(ITEMS_FIELD)
    if isinstance(items, list):
        return items
    # A message appended through the agentmem session itself, not through this adapter.
    return list(to_responses_items([cast(Message, dict(message))]))


def _opaque(message: Message) -> Message:
    """``message`` without the internal fields it took from its items' keys.

    The codec lets an item's ``task_id``, ``transient``, ``created_at``... ride on its
    message; an SDK item's keys mean nothing to agentmem (a ``transient`` key would keep
    the item from being stored), so here they stay on the item only.
    """
    for key in INTERNAL_FIELDS.intersection(message).difference((ITEMS_FIELD,)):
        del message[key]
    return message


def _is(stored: Message) -> Callable[[Message], bool]:
    """A predicate matching the stored message ``stored`` itself."""
    return lambda message: message is stored


def _replaced_by(new: Message) -> Callable[[Message], Message]:
    """A mutation replacing a message by ``new``."""
    return lambda _old: new


def _without_calls(message: Message) -> Message:
    """``message`` (an assistant turn) without its tool calls; its original items kept."""
    kept: Message = {k: v for k, v in message.items() if k != "tool_calls"}
    if kept.get("content") is None:
        kept["content"] = ""
    return kept


async def _settle(work: Awaitable[_T]) -> _T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile.

    A store write cannot be taken back once its thread runs, so a cancelled caller
    waits for the outcome and then gets its :class:`asyncio.CancelledError`.
    """
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller sees
        raise cancelled
    return task.result()


class AgentMemSession:
    """An OpenAI Agents SDK session stored in an agentmem session.

    Example::

        mem = agentmem.Memory(root=".agentmem")
        with AgentMemSession("user-42", memory=mem) as session:
            result = await Runner.run(agent, "Hello", session=session)

    Args:
        session_id: The SDK session id (any string; see :func:`agentmem_session_id`).
        memory: The :class:`agentmem.Memory` that stores it (either backend).
        session_settings: The SDK's ``SessionSettings`` (or a dict of them); its
            ``limit`` is the default of :meth:`get_items`.
        windowed: ``True``: :meth:`get_items` without a limit returns the session's
            context window in Responses items (``s.context(provider="openai-responses")``:
            fitted to ``context_window``, provider-valid, with the thread summary and
            the long-term memory) instead of every stored item. A ``limit`` (given or
            from the settings) still reads the stored items.
        model, context_window, tools, max_output_tokens: Passed to
            :meth:`agentmem.Memory.session` (they size the window).

    Raises:
        StoreLockedError: the session is open in another object or process.
        InvalidArgumentError: ``session_id`` is not a string.
    """

    session_id: str
    """The SDK session id, as given."""
    session_settings: SessionSettings | None
    """The SDK settings; ``limit`` is :meth:`get_items`' default."""
    memory: Memory
    """The memory holding the session."""
    windowed: bool
    """Whether :meth:`get_items` without a limit returns the fitted window."""

    def __init__(
        self,
        session_id: str,
        *,
        memory: Memory,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        windowed: bool = False,
        model: str | None = None,
        context_window: int | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not isinstance(memory, Memory):
            raise InvalidArgumentError(
                f"memory must be an agentmem.Memory, got {type(memory).__name__}"
            )
        if not isinstance(windowed, bool):
            raise InvalidArgumentError(f"windowed must be a bool, got {windowed!r}")
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.memory = memory
        self.windowed = windowed
        self._lock = threading.Lock()
        self._closed = False
        self._open: Callable[[], AgentMemStoreSession] = lambda: memory.session(
            session_id=agentmem_session_id(session_id),
            name=_display_name(session_id),
            model=model,
            context_window=context_window,
            tools=tools,
            max_output_tokens=max_output_tokens,
        )
        self._session = self._open()

    @classmethod
    async def aopen(cls, session_id: str, *, memory: Memory, **kwargs: Any) -> AgentMemSession:
        """``AgentMemSession(session_id, memory=memory, **kwargs)`` made off the event loop.

        Opening a session reads (and may repair) it from the store: from async code,
        ``session = await AgentMemSession.aopen(...)`` keeps that off the loop.
        """
        return await asyncio.to_thread(lambda: cls(session_id, memory=memory, **kwargs))

    # ------------------------------------------------------------------ the protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The stored items, oldest first; with ``limit``, the newest ``limit`` of them.

        ``limit=None`` uses ``session_settings.limit``; ``0`` returns nothing; a
        negative limit returns every item (as the SDK's ``SQLiteSession`` does). In
        the windowed mode, no limit at all returns the fitted window (see the class).

        Raises:
            SessionClosedError: the session is closed.
        """
        self._check_open()
        resolved = resolve_session_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._get_items, resolved)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store ``items`` after the others: all of them or, on an error, none.

        Durable when it returns (with the memory's ``durability``).

        Raises:
            InvalidMessageError: an item is not a Responses input item agentmem can
                store (named by its index in the batch); nothing is stored.
            InvalidArgumentError: ``items`` is not a list of items.
            SessionClosedError: the session is closed.
        """
        self._check_open()
        batch = _check_items(items)
        if batch:
            await _settle(asyncio.to_thread(self._add_items, batch))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (``None`` when there is none)."""
        self._check_open()
        return await _settle(asyncio.to_thread(self._pop_item))

    async def clear_session(self) -> None:
        """Remove every item of the session, and what agentmem kept about them.

        The agentmem session is deleted (its messages, summary, billing, recall
        entries) and opened again, empty, under the same id: :attr:`agentmem_session`
        is a new object afterwards.

        Raises:
            StoreLockedError: another object or process opened the session while it
                was being made again; this object is closed.
        """
        self._check_open()
        await _settle(asyncio.to_thread(self._clear))

    # ------------------------------------------------------------------ beyond it

    @property
    def agentmem_session(self) -> AgentMemStoreSession:
        """The :class:`agentmem.Session` holding the items (usage, tasks, context)."""
        return self._session

    @property
    def memory_prompt(self) -> str:
        """The long-term memory and topic files rendered for this session ("" if none)."""
        parts = (self._session.ltm_prompt, self._session.topics_prompt)
        return "\n\n".join(p for p in parts if p)

    def instructions(self, base: str = "") -> Callable[[RunContextWrapper[Any], Any], str]:
        """Dynamic ``Agent(instructions=...)``: ``base`` followed by :attr:`memory_prompt`.

        How long-term memory and topics reach an agent whose session returns the
        stored items (the windowed view carries them in its system item already, so
        there this returns ``base`` alone).
        """
        if not isinstance(base, str):
            raise InvalidArgumentError(f"base must be a string, got {type(base).__name__}")

        def render(_context: RunContextWrapper[Any], _agent: Any) -> str:
            memory = "" if self.windowed else self.memory_prompt
            return "\n\n".join(p for p in (base, memory) if p)

        return render

    def close(self) -> None:
        """Close the agentmem session (its lock is released). Idempotent."""
        with self._lock:
            self._closed = True
            self._session.close()

    async def aclose(self) -> None:
        """:meth:`close` off the event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> AgentMemSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> AgentMemSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AgentMemSession({self.session_id!r}, agentmem id {self._session.id!r})"

    # ------------------------------------------------------------------ the work (threads)

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.session_id!r} is closed")

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        history = self._session.history
        with self._lock:
            if limit is None and self.windowed:
                view = self._session.context(provider="openai-responses")
                return cast(list[TResponseInputItem], _copy(view))
            if limit == 0:
                return []
            if limit is None or limit < 0:
                found = [item for m in history.to_list() for item in _items_of(m)]
            else:
                # The newest messages only: O(limit), however long the session.
                found = []
                for index in range(len(history) - 1, -1, -1):
                    message = history[index]
                    if not message.get("transient"):  # not stored: not an item
                        found[:0] = _items_of(message)
                    if len(found) >= limit:
                        break
                found = found[-limit:]
            return cast(list[TResponseInputItem], _copy(found))

    def _add_items(self, items: list[Any]) -> None:
        messages = [_opaque(m) for m in from_responses_items(items)]
        history = self._session.history
        with self._lock:
            self._check_open()
            last = history[-1] if len(history) else None
            fixed: list[Message] = []
            for message in messages:
                previous = fixed[-1] if fixed else last
                if message["role"] == "user" and previous is not None and _has_calls(previous):
                    if fixed:
                        fixed[-1] = _without_calls(fixed[-1])
                    else:
                        # The one case taking two writes. The first changes no stored item
                        # (only what the payload sends), so a kill between them loses nothing.
                        history.mutate_last_matching(_is(previous), _without_calls)
                fixed.append(message)
            history.extend(fixed)

    def _pop_item(self) -> TResponseInputItem | None:
        history = self._session.history
        with self._lock:
            self._check_open()
            while len(history):
                last = history[-1]
                items = _items_of(last)
                if len(items) <= 1:
                    history.pop_last()
                    if not items:  # a message that stands for no item: look further back
                        continue
                    _restore_calls(history)
                    return cast(TResponseInputItem, _copy(items[0]))
                rest = [_opaque(m) for m in from_responses_items(items[:-1])]
                if len(rest) == 1:
                    history.mutate_last_matching(_is(last), _replaced_by(rest[0]))
                else:
                    # The rest no longer forms one message: rewrite the history in one write.
                    history.replace_all([*history.to_list()[:-1], *rest])
                return cast(TResponseInputItem, _copy(items[-1]))
            return None

    def _clear(self) -> None:
        # Emptying the history would leave the window's summary of trimmed messages (and
        # the billing) behind: the session is deleted and made again, empty, under its id.
        with self._lock:
            self._check_open()
            self._session.close()
            try:
                self.memory.sessions.delete(self._session.id)
                self._session = self._open()
            except BaseException:
                self._closed = True  # another opener took the id meanwhile: say so, stay shut
                raise


def _restore_calls(history: MessageHistory) -> None:
    """Give the last message back the tool calls :func:`_without_calls` took away.

    Once the user message that followed an unanswered call is popped, the call is the
    newest turn again and may still be answered (an approval resumed), so it goes back
    into what the payload sends. A second write, after the pop: a kill between them
    leaves the turn as it was while the user message stood, every item intact.
    """
    if not len(history):
        return
    last = history[-1]
    items = last.get(ITEMS_FIELD)
    if last["role"] != "assistant" or last.get("tool_calls") or not isinstance(items, list):
        return
    again = [_opaque(m) for m in from_responses_items(items)]
    if len(again) == 1 and again[0].get("tool_calls"):
        history.mutate_last_matching(_is(last), _replaced_by(again[0]))


def _check_items(items: object) -> list[Any]:
    """``items`` as a list of items (mappings or SDK objects), or an error naming what is not.

    Raises:
        InvalidArgumentError: ``items`` is not a list (or another iterable) of items.
        InvalidMessageError: an element is not a mapping (named by its index).
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidArgumentError(
            f"add_items takes a list of Responses input items, got {type(items).__name__}"
        )
    checked = list(items)
    for index, item in enumerate(checked):
        # The SDK's pydantic items are read by the codec (model_dump, unset fields left out).
        if not isinstance(item, Mapping) and not hasattr(item, "model_dump"):
            raise InvalidMessageError(
                f"item {index} of the batch is a {type(item).__name__}, not a Responses "
                "input item (a dict or an SDK item object)",
                index=index,
            )
    return checked
