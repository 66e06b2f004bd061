"""MessageHistory: the conversation as stored, and the payloads made from it.

A :class:`MessageHistory` is the single owner of a session's message list.
It exposes operations that mean something to an agent loop (append a
turn, drop what was injected, roll back a failed speculative append,
replace the system prompt) instead of raw list surgery, and it guarantees
one thing above all: :meth:`MessageHistory.to_api` returns a payload the
provider accepts, whatever sequence of operations came before (see
:mod:`agentmem.repair` for the rules and how they are enforced).

What it stores:

* Every message is validated and copied on the way in
  (:func:`agentmem.messages.normalize_message`); bad input raises
  :class:`~agentmem.errors.InvalidMessageError` and leaves the history as it
  was. Anthropic-shaped messages are converted to the canonical OpenAI
  shape.
* Internal fields (``task_id``, ``created_at``, ...) are kept and stripped
  only from payloads. Messages marked ``transient`` take part in payloads
  but are not part of :meth:`~MessageHistory.to_list` and are never handed
  to the observer, so they are never persisted.
* The stored dicts returned by :meth:`~MessageHistory.append`,
  indexing and iteration are the history's own objects: read them, keep
  them for :meth:`~MessageHistory.rollback_before`, but change a message
  only through :meth:`~MessageHistory.mutate_last_matching`.

Durability is delegated: an optional :class:`HistoryObserver` (the session
store) is told about every change *before* it is applied in memory. If the
observer raises, the change is abandoned and the history is unchanged, so
memory never runs ahead of disk.

Token counts are cached per message (keyed by the counter's ``epoch``), so
counting a history again costs O(new messages).

The class is thread-safe: every operation takes one re-entrant lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, overload

import orjson

from agentmem.errors import InvalidArgumentError, InvalidMessageError, SessionClosedError
from agentmem.messages import Message, is_real_user, normalize_message, normalize_messages
from agentmem.protocols import TokenCounter, counter_epoch
from agentmem.repair import build_payload
from agentmem.tokens import HeuristicCounter, count_message

__all__ = ["HistoryObserver", "MessageHistory", "ValidatedMessages"]


class ValidatedMessages(list[Message]):
    """Messages known to be canonical already: what ``normalize_message`` returns unchanged.

    A :class:`MessageHistory` built from one takes the list's dicts as they
    are, without validating or copying them (the trusted load path: a
    session store that checked every row on load hands its messages over
    this way). Build one only from messages that passed that check, and
    hand the dicts over: the history owns them afterwards.
    """


class HistoryObserver(Protocol):
    """Receives every persistent change of a :class:`MessageHistory`, before it is applied.

    Indices count persistent (non-transient) messages only. Raising from a
    method aborts the change.
    """

    def on_append(self, messages: Sequence[Message]) -> None:
        """``messages`` are about to be appended at the end."""
        ...

    def on_replace(self, index: int, message: Message) -> None:
        """The message at persistent ``index`` is about to become ``message``."""
        ...

    def on_rewrite(self, start: int, tail: Sequence[Message]) -> None:
        """Everything from persistent ``start`` on is about to become ``tail``."""
        ...


def _copy(value: Any) -> Any:
    # Stored messages are plain JSON, so a JSON round trip is a deep copy at C speed.
    return orjson.loads(orjson.dumps(value))


def _is_transient(msg: Mapping[str, Any]) -> bool:
    return bool(msg.get("transient"))


def _require_callable(value: object, name: str) -> None:
    if not callable(value):
        raise InvalidArgumentError(f"{name} must be callable, got {type(value).__name__}")


def _has_unanswered_calls(msg: Mapping[str, Any]) -> bool:
    return msg.get("role") == "assistant" and bool(msg.get("tool_calls"))


class MessageHistory(Sequence[Message]):
    """An agent conversation: validated messages, durable mutations, valid payloads.

    Args:
        messages: Initial messages (validated; the observer is not told about
            them, they are assumed to be stored already).
        token_counter: Counter for :meth:`estimate_tokens`; defaults to a
            :class:`~agentmem.tokens.HeuristicCounter`.
        observer: Told about every persistent change before it happens.

    Raises:
        InvalidMessageError: an initial message is invalid.
    """

    def __init__(
        self,
        messages: Iterable[Mapping[str, Any]] = (),
        *,
        token_counter: TokenCounter | None = None,
        observer: HistoryObserver | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._messages: list[Message] = (
            list(messages) if type(messages) is ValidatedMessages else normalize_messages(messages)
        )
        self._n_transient = len([1 for m in self._messages if m.get("transient")])
        self._counter: TokenCounter = token_counter or HeuristicCounter()
        # Per-message token counts (-1 = not counted yet), valid for one counter epoch,
        # plus a running total over the first `_total_n` messages so that counting
        # again costs O(messages added since), not O(history).
        self._tokens: list[int] = [-1] * len(self._messages)
        self._tokens_epoch = counter_epoch(self._counter)
        self._total = 0
        self._total_n = 0
        self._observer = observer
        self._closed: str | None = None
        # Incremented by every change other than an append, so windows and caches built on
        # top of the history know when positions they remember may have moved.
        self._revision = 0

    # ------------------------------------------------------------------ internals

    def _pindex(self, index: int) -> int:
        """Persistent index of position ``index`` (transient messages do not count)."""
        if not self._n_transient:
            return index
        return sum(1 for m in self._messages[:index] if not _is_transient(m))

    def _refuse_if_closed(self) -> None:
        if self._closed is not None:
            raise SessionClosedError(self._closed)

    def close(self, reason: str = "the history is closed") -> None:
        """Refuse every later mutation with :class:`~agentmem.errors.SessionClosedError`.

        Reads keep working. A session closes its history when it releases its
        lock, so a stale reference can no longer write behind the next owner.
        """
        self._closed = reason

    def _commit_tail(self, start: int, tail: list[Message]) -> None:
        """Replace ``self._messages[start:]`` by ``tail``, observer first."""
        self._refuse_if_closed()
        if self._observer is not None:
            self._observer.on_rewrite(
                self._pindex(start), ValidatedMessages(m for m in tail if not _is_transient(m))
            )
        removed = self._messages[start:]
        self._revision += 1
        self._n_transient += sum(1 for m in tail if _is_transient(m)) - sum(
            1 for m in removed if _is_transient(m)
        )
        self._messages[start:] = tail
        if start < self._total_n:
            self._total -= sum(self._tokens[start : self._total_n])
            self._total_n = start
        self._tokens[start:] = [-1] * len(tail)

    def _commit_append(self, new: list[Message]) -> None:
        self._refuse_if_closed()
        persistent = [m for m in new if not _is_transient(m)]
        if self._observer is not None and persistent:
            # Validated on the way in: the store need not check them again.
            self._observer.on_append(ValidatedMessages(persistent))
        self._messages.extend(new)
        self._tokens.extend([-1] * len(new))
        self._n_transient += len(new) - len(persistent)

    def _commit_replace(self, index: int, message: Message) -> None:
        self._refuse_if_closed()
        old = self._messages[index]
        if _is_transient(old) != _is_transient(message):
            self._commit_tail(index, [message, *self._messages[index + 1 :]])
            return
        if self._observer is not None and not _is_transient(message):
            self._observer.on_replace(self._pindex(index), message)
        self._messages[index] = message
        self._revision += 1
        if index < self._total_n:
            # Keep the running total exact: swap the old count for the new one.
            # (If the counter's epoch moved meanwhile, the next read resets everything.)
            new_count = count_message(message, self._counter)
            self._total += new_count - self._tokens[index]
            self._tokens[index] = new_count
        else:
            self._tokens[index] = -1

    # ------------------------------------------------------------------ writes

    def append(self, message: Mapping[str, Any]) -> Message:
        """Append one message (OpenAI or Anthropic shape) and return the stored copy.

        A user message first drops a trailing assistant message whose tool
        calls were never answered (the turn was interrupted before its tools
        ran; leaving it would make the next payload invalid).

        An Anthropic user turn carrying ``tool_result`` blocks is stored as
        several canonical messages; the first is returned.

        Raises:
            InvalidMessageError: the message is invalid; nothing changed.
            StorageError: the observer could not persist it; nothing changed.
        """
        return self.extend([message])[0]

    def extend(self, messages: Iterable[Mapping[str, Any]]) -> list[Message]:
        """Append several messages atomically: all are validated before any is stored.

        Returns:
            The stored copies, in order.
        """
        # Errors name each message's index in this history, not in the batch.
        new = normalize_messages(messages, start=len(self._messages))
        if not new:
            return []
        with self._lock:
            # Apply the "user message drops a dangling assistant" rule in sequence.
            base_len = len(self._messages)
            tail: list[Message] = []
            cut = base_len
            for msg in new:
                if msg["role"] == "user":
                    if tail:
                        if _has_unanswered_calls(tail[-1]):
                            tail.pop()
                    elif cut > 0 and _has_unanswered_calls(self._messages[cut - 1]):
                        cut -= 1
                tail.append(msg)
            if cut == base_len:
                self._commit_append(tail)
            else:
                self._commit_tail(cut, tail)
            return tail

    def delete_where(self, predicate: Callable[[Message], bool]) -> int:
        """Delete every message for which ``predicate`` is true; return how many."""
        _require_callable(predicate, "predicate")
        with self._lock:
            first = next((i for i, m in enumerate(self._messages) if predicate(m)), None)
            if first is None:
                return 0
            tail = [m for m in self._messages[first:] if not predicate(m)]
            removed = len(self._messages) - first - len(tail)
            self._commit_tail(first, tail)
            return removed

    def replace_all(self, messages: Iterable[Mapping[str, Any]]) -> None:
        """Replace the whole history (all messages validated first)."""
        new = normalize_messages(messages)
        with self._lock:
            self._commit_tail(0, new)

    def pop_last(self) -> Message | None:
        """Remove and return the last message (``None`` when empty)."""
        with self._lock:
            if not self._messages:
                return None
            last = self._messages[-1]
            self._commit_tail(len(self._messages) - 1, [])
            return last

    def truncate_from(self, index: int) -> int:
        """Remove the message at ``index`` and everything after it; return how many.

        ``index`` follows Python slice rules: negative counts from the end,
        out-of-range values clamp (so ``truncate_from(len(h))`` is a no-op).

        Raises:
            InvalidArgumentError: ``index`` is not an integer.
        """
        if isinstance(index, bool) or not isinstance(index, int):
            raise InvalidArgumentError(f"index must be an int, got {type(index).__name__}")
        with self._lock:
            start, _, _ = slice(index, None).indices(len(self._messages))
            removed = len(self._messages) - start
            if removed:
                self._commit_tail(start, [])
            return removed

    def rollback_before(self, message: Mapping[str, Any]) -> bool:
        """Remove ``message`` (the stored object, by identity) and everything after it.

        Used to undo a failed speculative append. Returns ``False`` and
        changes nothing when the object is not in the history.
        """
        with self._lock:
            for i in range(len(self._messages) - 1, -1, -1):
                if self._messages[i] is message:
                    self._commit_tail(i, [])
                    return True
            return False

    def replace_system_prompt(self, content: Any, **extra: Any) -> Message:
        """Set the system prompt: replace a leading system message, or insert one first.

        Args:
            content: The prompt (string or list of text parts).
            **extra: Additional (usually internal) fields for the message.

        Returns:
            The stored system message.
        """
        (msg,) = normalize_message({**extra, "role": "system", "content": content})
        with self._lock:
            if self._messages and self._messages[0]["role"] == "system":
                self._commit_replace(0, msg)
            else:
                self._commit_tail(0, [msg, *self._messages])
            return msg

    def mutate_last_matching(
        self,
        predicate: Callable[[Message], bool],
        mutate: Callable[[Message], Message | None],
    ) -> Message | None:
        """Change the last message matching ``predicate``.

        ``mutate`` receives a deep copy; it may change it in place (and
        return ``None``) or return a replacement. The result is validated
        before it replaces the stored message.

        Returns:
            The new stored message, or ``None`` when nothing matched.

        Raises:
            InvalidMessageError: the mutated message is invalid; nothing changed.
        """
        _require_callable(predicate, "predicate")
        _require_callable(mutate, "mutate")
        with self._lock:
            for i in range(len(self._messages) - 1, -1, -1):
                if predicate(self._messages[i]):
                    draft: Message = _copy(self._messages[i])
                    result = mutate(draft)
                    converted = normalize_message(draft if result is None else result, index=i)
                    if len(converted) != 1:
                        raise InvalidMessageError(
                            "a mutation must produce exactly one message", index=i
                        )
                    self._commit_replace(i, converted[0])
                    return converted[0]
            return None

    # ------------------------------------------------------------------ queries

    def pending_tool_calls(self) -> list[str]:
        """Ids of tool calls of the latest assistant turn that still await a result.

        Empty when the history does not end in an assistant message with tool
        calls followed only by (some of) their results.
        """
        with self._lock:
            answered: list[str] = []
            for msg in reversed(self._messages):
                if msg["role"] == "tool":
                    answered.append(msg["tool_call_id"])
                    continue
                if not _has_unanswered_calls(msg):
                    return []
                pending = []
                for call in msg["tool_calls"]:
                    if call["id"] in answered:
                        answered.remove(call["id"])
                    else:
                        pending.append(call["id"])
                return pending
            return []

    def has_system_prompt(self) -> bool:
        """True when the history starts with a system message."""
        return bool(self._messages) and self._messages[0]["role"] == "system"

    def real_user_messages(self) -> list[Message]:
        """User messages typed by the user (not ``system_injected``)."""
        return [m for m in self._messages if is_real_user(m)]

    def last_real_user_index(self) -> int | None:
        """Index of the newest real (not ``system_injected``) user message."""
        for i in range(len(self._messages) - 1, -1, -1):
            if is_real_user(self._messages[i]):
                return i
        return None

    def last_session_context_date(self) -> str | None:
        """``session_date`` of the newest ``session_context`` message, if any."""
        for msg in reversed(self._messages):
            if msg.get("session_context"):
                date = msg.get("session_date")
                return date if isinstance(date, str) else None
        return None

    def last_injected_chunk_count(self) -> int:
        """``chunk_count`` of the newest ``chunk_index`` message (0 when none)."""
        for msg in reversed(self._messages):
            if msg.get("chunk_index"):
                count = msg.get("chunk_count")
                return count if isinstance(count, int) and not isinstance(count, bool) else 0
        return 0

    def subagent_instruction_message(self) -> Message | None:
        """The first message marked ``subagent_instructions``, if any."""
        return next((m for m in self._messages if m.get("subagent_instructions")), None)

    @property
    def revision(self) -> int:
        """Counts every change that was not a plain append (deletion, truncation, replacement).

        Positions remembered by a window or a cache stay valid while it is unchanged.
        """
        return self._revision

    @property
    def token_counter(self) -> TokenCounter:
        """The counter used by :meth:`estimate_tokens`."""
        return self._counter

    def _check_epoch(self) -> None:
        epoch = counter_epoch(self._counter)
        if epoch != self._tokens_epoch:
            self._tokens = [-1] * len(self._messages)
            self._tokens_epoch = epoch
            self._total = self._total_n = 0

    def message_tokens(self, index: int) -> int:
        """Token count of the message at ``index`` (cached)."""
        with self._lock:
            self._check_epoch()
            cached = self._tokens[index]
            if cached < 0:
                cached = count_message(self._messages[index], self._counter)
                self._tokens[index] = cached
            return cached

    def estimate_tokens(self) -> int:
        """Tokens the whole history costs.

        Counts are cached per message and summed incrementally: calling this
        again costs O(messages added or changed since the last call).
        """
        with self._lock:
            self._check_epoch()
            for i in range(self._total_n, len(self._messages)):
                self._total += self.message_tokens(i)
            self._total_n = len(self._messages)
            return self._total

    # ------------------------------------------------------------------ output

    def to_list(self) -> list[Message]:
        """Deep copies of the persistent (non-transient) messages, internal fields included."""
        with self._lock:
            return list(_copy([m for m in self._messages if not _is_transient(m)]))

    @overload
    def to_api(
        self,
        force_reasoning_content_pad: bool = ...,
        task_chain: Collection[int] | None = ...,
        provider: Literal["openai", "openai-responses"] = ...,
    ) -> list[dict[str, Any]]: ...

    @overload
    def to_api(
        self,
        force_reasoning_content_pad: bool = ...,
        task_chain: Collection[int] | None = ...,
        *,
        provider: Literal["anthropic"],
    ) -> tuple[str | None, list[dict[str, Any]]]: ...

    @overload
    def to_api(
        self,
        force_reasoning_content_pad: bool = ...,
        task_chain: Collection[int] | None = ...,
        *,
        provider: str,
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]: ...

    def to_api(
        self,
        force_reasoning_content_pad: bool = False,
        task_chain: Collection[int] | None = None,
        provider: str = "openai",
    ) -> list[dict[str, Any]] | tuple[str | None, list[dict[str, Any]]]:
        """A payload the provider accepts, repaired as described in :mod:`agentmem.repair`.

        Args:
            force_reasoning_content_pad: Give every assistant message a
                ``reasoning_content`` (``""`` when missing), for a retry after a
                thinking-mode provider asked for it. Without it the field is
                padded only when some assistant message already has it.
            task_chain: Active time-machine task ids; messages tagged with
                another ``task_id`` are left out.
            provider: ``"openai"``, ``"anthropic"`` or ``"openai-responses"``.

        Returns:
            OpenAI: a list of message dicts. Anthropic: ``(system, messages)``.
            OpenAI Responses: a list of input items.
            Either way a fresh deep copy the caller may modify.

        Raises:
            InvalidArgumentError: unknown ``provider``.
        """
        with self._lock:
            return build_payload(
                self._messages,
                provider=provider,
                force_reasoning_content_pad=force_reasoning_content_pad,
                task_chain=task_chain,
            )

    # ------------------------------------------------------------------ container protocol

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(list(self._messages))

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._messages[index]

    def __repr__(self) -> str:
        return f"MessageHistory({len(self._messages)} messages)"
