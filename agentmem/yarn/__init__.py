"""YaRN: the session's full archive, and a running summary of what left the window.

The working window (:mod:`agentmem.stm`) keeps the conversation inside the
model's context by evicting the oldest units. Evicted messages are not
deleted: the session's :class:`~agentmem.history.MessageHistory` still holds
them, and :class:`YaRN` ("yet another retention net") is the part that
remembers them *for the model*. It does two things:

* **Archive.** Every message of every thread is kept. The main thread is the
  session history itself (passed as ``main_thread``, so nothing is stored
  twice); side threads (sub-agents, tool sessions) are archived here as
  validated copies. Transient messages are never archived, matching what
  the history persists.
* **Compression.** :meth:`YaRN.compress` reads the messages that were just
  evicted and folds the facts an agent needs to keep working into a
  :class:`ThreadSummary`: the original request, the latest requests, the
  current task, git commits made (as a commit command reports them), files named in tool
  arguments, question-and-answer decisions, and tool usage counts. Each
  compression *merges* into the previous summary, so facts from the first
  trim survive the tenth (within fixed caps). The summary is rendered as one
  system message wrapped in ``<thread_summary>``.

Invariants:

* **Extraction never raises** on a valid message, however odd (``None`` or
  list content, non-JSON tool arguments, missing function names), and costs
  O(size of the evicted messages): every message is read once, every regex
  is linear, and merging touches only the bounded summary.
* **Compressing in pieces equals compressing at once.** The fold carries the
  two things that can straddle a batch boundary (an assistant question whose
  answer was not evicted yet, an ``ask_user``-style tool call whose result
  was not evicted yet), so ``compress(A); compress(B)`` yields the same
  summary as ``compress(A + B)`` in every field but ``cycles``. Merging is
  associative, caps included.
* **Deterministic rendering.** :meth:`ThreadSummary.render` contains no
  timestamps, ids or "now": the summary message only changes when a
  compression changes it, so the provider's prompt cache keeps hitting on
  the payload prefix between trims.
* **The extractive summary needs no LLM.** An optional
  :class:`~agentmem.protocols.Summarizer` adds prose (``llm_text``) on top;
  when it fails, one warning is logged and the extractive summary stands.
  :class:`LLMSummarizer` adapts any :class:`~agentmem.protocols.LLM`, sync
  or async; the synchronous :meth:`YaRN.compress` skips an async one with
  a warning naming ``Session.acontext()``, :meth:`YaRN.acompress` awaits it.

Where things live (the ``agentmem.yarn`` package): the extractive
heuristics (what counts as a request, a task, a commit, a file written, a
decision) are in :mod:`agentmem.yarn._extract` (shell commands in
:mod:`agentmem.yarn._shell`), the reading of saved threads in
:mod:`agentmem.yarn._state`, the LLM summarizer in
:mod:`agentmem.yarn.summarizer`; this module, the package's ``__init__``,
holds the summary model, its rendering and the archive. The helpers are
private to YaRN: no other part imports them.

What YaRN does not do: it does not decide *when* to trim (the window and the
context manager do), it does not search the archive (see :mod:`agentmem.recall`),
and it does not persist itself: :meth:`YaRN.state` and :meth:`YaRN.from_state`
hand a JSON-ready dict to whichever store the session uses.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from agentmem._json import type_name
from agentmem._storage.formats import check_format
from agentmem._truncate import truncate_text
from agentmem.errors import InvalidArgumentError
from agentmem.messages import (
    Message,
    normalize_messages,
)
from agentmem.protocols import Summarizer
from agentmem.yarn._extract import (
    MAX_COMMITS,
    MAX_DECISIONS,
    MAX_FILES,
    MAX_USER_REQUESTS,
    Facts,
    Fold,
    FrozenCounts,
    commit_key,
    dedupe_tail,
    same,
)
from agentmem.yarn._state import (
    MAIN_THREAD,
    check_thread_id,
    read_pending,
    read_saved,
    read_threads,
)
from agentmem.yarn.summarizer import (
    SUMMARY_INSTRUCTIONS,
    LLMSummarizer,
    SummaryRequest,
    asummary_text,
    summary_text,
)

__all__ = [
    "DEFAULT_ASK_TOOLS",
    "SUMMARY_INSTRUCTIONS",
    "Decision",
    "LLMSummarizer",
    "SummaryRequest",
    "ThreadSummary",
    "YaRN",
]

logger = logging.getLogger("agentmem.yarn")

FORMAT: Final = "agentmem.thread-summary"
"""``format`` tag of :meth:`ThreadSummary.to_json` documents."""

FORMAT_VERSION: Final = 1
"""Current version of the thread-summary format; older versions are upgraded on read."""

STATE_FORMAT: Final = "agentmem.yarn"
"""``format`` tag of :meth:`YaRN.state` documents."""

STATE_VERSION: Final = 1
"""Current version of the YaRN state format."""

SUMMARY_OPEN: Final = "<thread_summary>\n"
SUMMARY_CLOSE: Final = "\n</thread_summary>"

DEFAULT_ASK_TOOLS: Final[frozenset[str]] = frozenset(
    {"ask_user", "ask_followup_question", "interact", "request_user_input", "AskUserQuestion"}
)
"""Tool names whose call asks the user something and whose result is the answer."""

# --------------------------------------------------------------------------- helpers


def _describe_validation(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "(root)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {error['msg']}{more}"


# --------------------------------------------------------------------------- the summary model


_Count = Annotated[int, Field(strict=True, ge=0)]


class Decision(BaseModel):
    """One question put to the user and the answer given."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    question: StrictStr
    """The question (an ask tool's question argument, or the assistant's last sentence)."""

    answer: StrictStr
    """The answer (the ask tool's result, or the user's reply)."""


class ThreadSummary(BaseModel):
    """What an agent needs to remember about messages that left its context window.

    Built by :meth:`from_messages` (one batch) and accumulated with
    :meth:`merge`; :class:`YaRN` does both. Lists are oldest first and capped;
    see the module constants ``MAX_*``. Instances are immutable.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    original_request: StrictStr | None = None
    """The first user request ever compressed (at most 300 characters), kept forever."""

    user_requests: tuple[StrictStr, ...] = ()
    """The last 8 real user requests, each at most 300 characters (cut ones end in ``...``)."""

    current_task: StrictStr | None = None
    """The task being worked on (at most 300 characters), or ``None`` when none is known."""

    commits: tuple[StrictStr, ...] = ()
    """Commits made, as a commit command reported them (``"hash: subject"``), newest last, 15."""

    files_touched: tuple[StrictStr, ...] = ()
    """Paths named in tool-call arguments, most recently named last, at most 30."""

    decisions: tuple[Decision, ...] = ()
    """The last 5 question-and-answer exchanges with the user."""

    tool_counts: Mapping[StrictStr, _Count] = Field(default_factory=dict)
    """Number of calls per tool name, accumulated over every compression (read-only)."""

    compressed_messages: _Count = 0
    """Messages folded into this summary so far."""

    cycles: _Count = 0
    """Compressions that added messages to this summary."""

    llm_text: StrictStr | None = None
    """Prose from the last successful :class:`~agentmem.protocols.Summarizer` call, if any."""

    @field_validator("tool_counts", mode="after")
    @classmethod
    def _freeze_counts(cls, value: Mapping[str, int]) -> Mapping[str, int]:
        return value if isinstance(value, FrozenCounts) else FrozenCounts(value)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_messages(
        cls,
        messages: Iterable[Mapping[str, Any]],
        *,
        current_task: str | None = None,
        ask_tools: Collection[str] = DEFAULT_ASK_TOOLS,
    ) -> ThreadSummary:
        """Extract a summary from one batch of messages, on its own.

        Unlike :meth:`YaRN.compress`, nothing is carried in from an earlier
        batch: a question whose answer is in another batch is not paired.

        Args:
            messages: Canonical messages, oldest first.
            current_task: The task being worked on, when the caller knows it;
                used when it is substantive (not a confirmation like "ok").
            ask_tools: Tool names whose call asks the user a question.

        Returns:
            The summary of ``messages`` (``cycles`` is 1, or 0 when empty).

        Raises:
            InvalidArgumentError: ``messages`` is not a list of mappings, or
                ``current_task`` is not a string.
        """
        batch = _check_batch(messages)
        _check_task(current_task)
        fold = Fold(_check_ask_tools(ask_tools), None, {})
        for msg in batch:
            fold.feed(msg)
        return _summary_of(fold.facts(current_task))

    def merge(self, other: ThreadSummary) -> ThreadSummary:
        """Fold a newer summary into this one and return the result.

        Lists are concatenated (this one first), deduplicated where the field
        says so (a repeated commit or path moves to its newest position), and
        cut to their caps from the old end. Counts add up. The original
        request stays this one's; the current task and ``llm_text`` become
        ``other``'s unless it has none. The operation is associative.

        Args:
            other: The newer summary.

        Raises:
            InvalidArgumentError: ``other`` is not a :class:`ThreadSummary`.
        """
        if not isinstance(other, ThreadSummary):
            raise InvalidArgumentError(f"can only merge a ThreadSummary, got {type_name(other)}")
        counts = dict(self.tool_counts)
        for name, count in other.tool_counts.items():
            counts[name] = counts.get(name, 0) + count
        return ThreadSummary(
            original_request=(
                self.original_request
                if self.original_request is not None
                else other.original_request
            ),
            user_requests=(self.user_requests + other.user_requests)[-MAX_USER_REQUESTS:],
            current_task=other.current_task
            if other.current_task is not None
            else self.current_task,
            commits=dedupe_tail(self.commits + other.commits, MAX_COMMITS, commit_key),
            files_touched=dedupe_tail(self.files_touched + other.files_touched, MAX_FILES, same),
            decisions=(self.decisions + other.decisions)[-MAX_DECISIONS:],
            tool_counts=counts,
            compressed_messages=self.compressed_messages + other.compressed_messages,
            cycles=self.cycles + other.cycles,
            llm_text=other.llm_text if other.llm_text is not None else self.llm_text,
        )

    # ------------------------------------------------------------------ output

    def render(self, max_chars: int | None = None, *, keep_task: bool = False) -> str:
        """The summary as text for the model: deterministic, no timestamps or ids.

        A header line, then ``llm_text`` when present, then each non-empty
        section: ``Current task:``, ``Earlier requests:`` (the original one
        first, marked ``[original]``), ``Decisions:``, ``Git commits seen:``,
        ``Files touched:``, ``Tool usage:`` (by count, then name). The
        extractive sections follow the LLM text so that exact facts (hashes,
        paths) survive even when the prose leaves them out.

        Args:
            max_chars: When the full text is longer, a shorter rendering that
                fits: tool usage goes first, then each list keeps only its
                newest 5, 3, 2, 1 and finally 0 entries (the LLM text is cut
                alongside); the header and the current task stay, and only if
                they alone are too long is the text cut with a marker.
            keep_task: Never cut the header and current task: when they alone
                exceed ``max_chars``, return them whole.
        """
        text = self._render(None)
        if max_chars is None or len(text) <= max_chars:
            return text
        for keep in (5, 3, 2, 1, 0):
            text = self._render(keep)
            if len(text) <= max_chars:
                return text
        return text if keep_task else truncate_text(text, max_chars)

    def _render(self, keep: int | None) -> str:
        def newest(items: Sequence[Any]) -> Sequence[Any]:
            return items if keep is None else items[len(items) - keep :]

        count = self.compressed_messages
        noun = "message that is" if count == 1 else "messages that are"
        shortened = "" if keep is None else " (shortened to fit; newest entries kept)"
        blocks = [f"Summary of {count} earlier {noun} no longer shown{shortened}."]
        if self.llm_text:
            llm = self.llm_text if keep is None else truncate_text(self.llm_text, 150 * keep)
            if keep != 0:
                blocks.append(llm)
        if self.current_task:
            blocks.append(f"Current task: {self.current_task}")
        requests = list(self.user_requests)
        lines = []
        if self.original_request is not None and keep != 0:
            lines.append(f"- [original] {self.original_request}")
            if requests and requests[0] == self.original_request:
                del requests[0]
        lines.extend(f"- {request}" for request in newest(requests))
        if lines:
            blocks.append("Earlier requests:\n" + "\n".join(lines))
        if decisions := newest(self.decisions):
            blocks.append(
                "Decisions:\n" + "\n".join(f"- Q: {d.question}\n  A: {d.answer}" for d in decisions)
            )
        if commits := newest(self.commits):
            blocks.append("Git commits seen:\n" + "\n".join(f"- {c}" for c in commits))
        if files := newest(self.files_touched):
            blocks.append("Files touched:\n" + "\n".join(f"- {f}" for f in files))
        if self.tool_counts and keep is None:
            usage = sorted(self.tool_counts.items(), key=lambda item: (-item[1], item[0]))
            blocks.append("Tool usage: " + ", ".join(f"{name} x{n}" for name, n in usage))
        return "\n\n".join(blocks)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict tagged ``{"format": "agentmem.thread-summary", "version": 1}``."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "original_request": self.original_request,
            "user_requests": list(self.user_requests),
            "current_task": self.current_task,
            "commits": list(self.commits),
            "files_touched": list(self.files_touched),
            "decisions": [{"question": d.question, "answer": d.answer} for d in self.decisions],
            "tool_counts": dict(self.tool_counts),
            "compressed_messages": self.compressed_messages,
            "cycles": self.cycles,
            "llm_text": self.llm_text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ThreadSummary:
        """Load what :meth:`to_json` wrote, upgrading older versions.

        Missing fields take their defaults; unknown fields are rejected.

        Raises:
            InvalidArgumentError: ``data`` is not a thread summary of a known
                version, or a field has the wrong type; the message names it.
        """
        version = check_format(data, kind=FORMAT, version=FORMAT_VERSION, what="thread summary")
        payload = {k: v for k, v in data.items() if k not in ("format", "version")}
        while version < FORMAT_VERSION:
            payload = _UPGRADES[version](payload)
            version += 1
        try:
            return cls.model_validate(payload)
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"invalid thread summary: {_describe_validation(exc)}"
            ) from exc


# One function per past version, each returning the payload of the next version.
_UPGRADES: Final[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}


def _summary_of(facts: Facts) -> ThreadSummary:
    """The summary of one batch (``cycles`` is 1, or 0 when it was empty)."""
    return ThreadSummary(
        original_request=facts.original_request,
        user_requests=facts.user_requests,
        current_task=facts.current_task,
        commits=facts.commits,
        files_touched=facts.files_touched,
        decisions=tuple(Decision(question=q, answer=a) for q, a in facts.decisions),
        tool_counts=facts.tool_counts,
        compressed_messages=facts.compressed_messages,
        cycles=1 if facts.compressed_messages else 0,
    )


def _check_batch(messages: Any) -> list[Mapping[str, Any]]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidArgumentError(
            f"expected a list of message mappings, got {type_name(messages)}"
        )
    batch = list(messages)
    for i, msg in enumerate(batch):
        if not isinstance(msg, Mapping):
            raise InvalidArgumentError(f"message {i} is a {type_name(msg)}, not a mapping")
    return batch


def _check_task(current_task: Any) -> None:
    if current_task is not None and not isinstance(current_task, str):
        raise InvalidArgumentError(
            f"current_task must be a string or None, got {type_name(current_task)}"
        )


def _check_ask_tools(ask_tools: Any) -> frozenset[str]:
    if isinstance(ask_tools, str | bytes) or not isinstance(ask_tools, Iterable):
        raise InvalidArgumentError(
            f"ask_tools must be a collection of tool names, got {type_name(ask_tools)}"
        )
    names = frozenset(ask_tools)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise InvalidArgumentError(f"ask_tools must hold strings, got {bad[0]!r}")
    return names


# --------------------------------------------------------------------------- YaRN


class YaRN:
    """The archive of every thread of a session and the running summary of evicted messages.

    Args:
        summarizer: Optional :class:`~agentmem.protocols.Summarizer` (an LLM,
            usually via :class:`LLMSummarizer`) whose text is added to the
            extractive summary.
        ask_tools: Tool names whose call asks the user a question and whose
            result is the answer (see :data:`DEFAULT_ASK_TOOLS`).
        main_thread: The session's own message list, usually its
            :class:`~agentmem.history.MessageHistory`, which already holds
            every message. When given, :meth:`thread` reads it instead of
            keeping a second copy, and :meth:`archive` refuses the main thread.
            Must be re-iterable (a list or a history, not a generator).
        summary: A summary to continue from (for example after a resume).

    Raises:
        InvalidArgumentError: an argument has the wrong type.

    The object is thread-safe; :meth:`compress` holds its lock while the
    summarizer runs, so compressions apply in order.
    """

    def __init__(
        self,
        *,
        summarizer: Summarizer | None = None,
        ask_tools: Collection[str] = DEFAULT_ASK_TOOLS,
        main_thread: Iterable[Message] | None = None,
        summary: ThreadSummary | None = None,
    ) -> None:
        if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
            raise InvalidArgumentError(
                f"summarizer must have a summarize(messages, previous_summary) method, "
                f"got {type_name(summarizer)}"
            )
        if main_thread is not None and (
            isinstance(main_thread, str | bytes | Mapping | Iterator)
            or not isinstance(main_thread, Iterable)
        ):
            raise InvalidArgumentError(
                "main_thread must be a re-iterable sequence of messages (a list or a "
                f"MessageHistory), got {type_name(main_thread)}"
            )
        if summary is not None and not isinstance(summary, ThreadSummary):
            raise InvalidArgumentError(
                f"summary must be a ThreadSummary or None, got {type_name(summary)}"
            )
        self._lock = threading.RLock()
        self._summarizer = summarizer
        self._ask_tools = _check_ask_tools(ask_tools)
        self._main = main_thread
        self._threads: dict[str, list[Message]] = (
            {} if main_thread is not None else {MAIN_THREAD: []}
        )
        self._summary = summary
        self._pending_question: str | None = None
        self._pending_asks: dict[str, str] = {}
        self._folds = 0  # compressions that owed a summarizer call (SummaryRequest.seq)
        self._text_seq = 0  # the seq whose summarizer text is in the summary
        # Persistence hooks (a session stores side threads as rows, append-only):
        # messages of each thread its owner already stored, and the threads with more.
        self._saved: dict[str, int] = {}
        self._unsaved: dict[str, None] = {}  # an ordered set of thread ids

    # ------------------------------------------------------------------ archive

    def archive(self, messages: Iterable[Mapping[str, Any]], thread_id: str = MAIN_THREAD) -> None:
        """Append validated copies of ``messages`` to a thread, creating it if needed.

        Anthropic-shaped messages are converted to the canonical shape;
        messages marked ``transient`` are skipped. All or nothing: an invalid
        message leaves the thread unchanged.

        Args:
            messages: Messages to keep, oldest first.
            thread_id: The thread (``"main"`` for the session's conversation).

        Raises:
            InvalidArgumentError: ``thread_id`` is not a non-empty string, or is
                ``"main"`` while ``main_thread`` was given, or ``messages`` is
                not a list of messages.
            InvalidMessageError: a message is invalid (its index is named).
        """
        check_thread_id(thread_id)
        if thread_id == MAIN_THREAD and self._main is not None:
            raise InvalidArgumentError(
                "the main thread is the session history passed as main_thread; "
                "append to that history instead of archiving to 'main'"
            )
        copies = [m for m in normalize_messages(messages) if not m.get("transient")]
        with self._lock:
            self._threads.setdefault(thread_id, []).extend(copies)
            if copies:
                self._unsaved[thread_id] = None

    def thread(self, thread_id: str = MAIN_THREAD) -> list[Message]:
        """Every archived message of a thread, oldest first.

        The list is new, the dicts are the stored ones: read them, do not
        change them. For ``"main"`` with a ``main_thread``, they are that
        history's own messages (transient ones left out).

        Raises:
            InvalidArgumentError: no thread has this id.
        """
        check_thread_id(thread_id)
        if thread_id == MAIN_THREAD and self._main is not None:
            return [m for m in self._main if not m.get("transient")]
        with self._lock:
            messages = self._threads.get(thread_id)
            if messages is None:
                known = ", ".join(repr(t) for t in self.thread_ids())
                raise InvalidArgumentError(f"no thread {thread_id!r} (known: {known})")
            return list(messages)

    def thread_ids(self) -> list[str]:
        """``"main"`` first, then the other threads in the order they were created."""
        with self._lock:
            return [MAIN_THREAD, *(t for t in self._threads if t != MAIN_THREAD)]

    # ------------------------------------------------------------------ compression

    @property
    def summary(self) -> ThreadSummary | None:
        """The running summary, or ``None`` before the first non-empty :meth:`compress`."""
        return self._summary

    def compress(
        self, messages: Sequence[Mapping[str, Any]], *, current_task: str | None = None
    ) -> ThreadSummary:
        """Fold newly evicted messages into the running summary.

        The extractive summary of ``messages`` is merged into the previous one
        and stored before the summarizer (if any) runs, so it is kept even if
        the summarizer fails or the call is interrupted. A summarizer that
        raises or returns anything but a non-empty string is logged once as a
        warning on ``agentmem.yarn``; ``llm_text`` then keeps its old value.
        An async summarizer is skipped and logged the same way (use
        :meth:`acompress`). ``KeyboardInterrupt`` and ``asyncio.CancelledError``
        propagate. This is :meth:`fold` then :meth:`summarize`, under the lock.

        Args:
            messages: The messages just evicted from the window, oldest first.
            current_task: The task being worked on, when the caller knows it
                (for example the newest real user message, still in the
                window). Ignored when it is only a confirmation like "ok".

        Returns:
            The new summary. For empty ``messages``, the current summary
            unchanged (an empty :class:`ThreadSummary` before the first
            compression; nothing is stored and no cycle is counted).

        Raises:
            InvalidArgumentError: ``messages`` is not a list of mappings, or
                ``current_task`` is not a string.
        """
        with self._lock:
            request = self.fold(messages, current_task=current_task)
            if request is not None:
                self.summarize(request)
            return self._summary if self._summary is not None else ThreadSummary()

    async def acompress(
        self, messages: Sequence[Mapping[str, Any]], *, current_task: str | None = None
    ) -> ThreadSummary:
        """The async twin of :meth:`compress` (:meth:`fold`, then await :meth:`asummarize`)."""
        request = self.fold(messages, current_task=current_task)
        if request is not None:
            await self.asummarize(request)
        summary = self._summary
        return summary if summary is not None else ThreadSummary()

    def fold(
        self, messages: Sequence[Mapping[str, Any]], *, current_task: str | None = None
    ) -> SummaryRequest | None:
        """The extractive half of :meth:`compress`: merge, store, return the summarizer call owed.

        :attr:`summary` holds the new facts when this returns. The request
        (``None`` without a summarizer or for empty ``messages``) is settled
        by :meth:`summarize` or :meth:`asummarize`; a compression's text is
        never replaced by an earlier compression's (the lock is not held
        across an await).
        """
        batch = _check_batch(messages)
        _check_task(current_task)
        with self._lock:
            previous = self._summary
            if not batch:
                return None
            fold = Fold(self._ask_tools, self._pending_question, self._pending_asks)
            for msg in batch:
                fold.feed(msg)
            merged = (previous or ThreadSummary()).merge(_summary_of(fold.facts(current_task)))
            self._summary = merged
            self._pending_question = fold.pending_question
            self._pending_asks = fold.pending_asks
            if self._summarizer is None:
                return None
            self._folds += 1
            return SummaryRequest(
                tuple(batch), previous.render() if previous else None, self._folds
            )

    def summarize(self, request: SummaryRequest) -> None:
        """Run the summarizer for ``request`` synchronously and apply its text."""
        if self._summarizer is not None:
            self._apply(request, summary_text(self._summarizer, request))

    async def asummarize(self, request: SummaryRequest) -> None:
        """Await the summarizer for ``request`` and apply its text."""
        if self._summarizer is not None:
            self._apply(request, await asummary_text(self._summarizer, request))

    def _apply(self, request: SummaryRequest, text: str | None) -> None:
        with self._lock:
            if text is None or self._summary is None or request.seq <= self._text_seq:
                return
            self._summary = self._summary.model_copy(update={"llm_text": text})
            self._text_seq = request.seq

    def render_message(
        self, max_chars: int | None = None, *, keep_task: bool = False
    ) -> Message | None:
        """The summary as one system message, or ``None`` before the first compression.

        The message is ``{"role": "system", "content":
        "<thread_summary>\\n...\\n</thread_summary>", "compressed_summary": True}``;
        a fresh dict each call, identical while the summary is unchanged.

        Args:
            max_chars: Bound on the content's length: the tags always stay and
                the summary inside is shortened by :meth:`ThreadSummary.render`
                (newest, most useful lines kept); the message then carries
                ``"truncated": True``.
            keep_task: As for :meth:`ThreadSummary.render`.
        """
        summary = self._summary
        if summary is None:
            return None
        text = summary.render()
        shortened = False
        if max_chars is not None:
            inner = max(max_chars - len(SUMMARY_OPEN) - len(SUMMARY_CLOSE), 0)
            if len(text) > inner:
                text, shortened = summary.render(inner, keep_task=keep_task), True
        message: Message = {
            "role": "system",
            "content": f"{SUMMARY_OPEN}{text}{SUMMARY_CLOSE}",
            "compressed_summary": True,
        }
        if shortened:
            message["truncated"] = True
        return message

    # ------------------------------------------------------------------ persistence

    def state(self, *, include_threads: bool = True) -> dict[str, Any]:
        """A JSON-ready snapshot: the summary, the archived threads, the carried fold state.

        The main thread is included only when YaRN owns it (no ``main_thread``
        was given); otherwise the session persists it with its history.

        ``include_threads=False``: only the threads' order (``"thread_order"``), for an
        owner that stores the messages itself (:meth:`unsaved_threads`); O(threads).
        """
        with self._lock:
            state: dict[str, Any] = {
                "format": STATE_FORMAT,
                "version": STATE_VERSION,
                "summary": self._summary.to_json() if self._summary is not None else None,
            }
            if include_threads:
                threads = {tid: list(msgs) for tid, msgs in self._threads.items()}
                # Stored messages are validated plain JSON: a JSON round trip is a deep copy.
                state["threads"] = orjson.loads(orjson.dumps(threads))
            else:
                state["thread_order"] = list(self._threads)
            state["pending"] = {
                "question": self._pending_question,
                "asks": [[cid, q] for cid, q in self._pending_asks.items()],
            }
            return state

    def unsaved_threads(self) -> dict[str, tuple[int, list[Message]]]:
        """Thread id -> (count already saved, messages archived since); O(new messages).

        An owner storing threads append-only stores these (read-only dicts),
        then passes the same mapping to :meth:`mark_saved`.
        """
        with self._lock:
            return {
                tid: (self._saved.get(tid, 0), self._threads[tid][self._saved.get(tid, 0) :])
                for tid in self._unsaved
            }

    def mark_saved(self, saved: Mapping[str, tuple[int, Sequence[Message]]]) -> None:
        """Record what :meth:`unsaved_threads` returned as stored (later archives stay unsaved)."""
        with self._lock:
            for tid, (start, messages) in saved.items():
                count = start + len(messages)
                if count > self._saved.get(tid, 0):
                    self._saved[tid] = count
                if self._saved[tid] >= len(self._threads.get(tid, ())):
                    self._unsaved.pop(tid, None)

    @classmethod
    def from_state(
        cls,
        state: Mapping[str, Any],
        *,
        summarizer: Summarizer | None = None,
        ask_tools: Collection[str] = DEFAULT_ASK_TOOLS,
        main_thread: Iterable[Message] | None = None,
        saved_threads: Mapping[str, Sequence[Message]] | None = None,
    ) -> YaRN:
        """Rebuild a :class:`YaRN` from :meth:`state`.

        Args:
            state: What :meth:`state` returned (after a JSON round trip).
            summarizer: As for the constructor (not part of the state).
            ask_tools: As for the constructor (not part of the state).
            main_thread: The resumed session's history, when the state was
                taken with one.
            saved_threads: Threads the owner stored (id -> messages), saved, in
                ``"thread_order"`` then by id; messages the state itself holds
                (an older release's) follow them, unsaved (docs/yarn.md).

        Raises:
            InvalidArgumentError: ``state`` is malformed or of an unknown
                version, or holds its own non-empty main thread while
                ``main_thread`` is given.
        """
        check_format(state, kind=STATE_FORMAT, version=STATE_VERSION, what="YaRN state")
        raw_summary = state.get("summary")
        summary = ThreadSummary.from_json(raw_summary) if raw_summary is not None else None
        yarn = cls(
            summarizer=summarizer, ask_tools=ask_tools, main_thread=main_thread, summary=summary
        )
        main_given = main_thread is not None
        in_state = read_threads(state, main_given=main_given)
        if saved_threads is not None:
            for tid, copies in read_saved(saved_threads, state, main_given=main_given):
                yarn._threads.setdefault(tid, []).extend(copies)
                yarn._saved[tid] = len(yarn._threads[tid])
        for tid, copies in in_state:
            yarn._threads.setdefault(tid, []).extend(copies)
            if saved_threads is not None and copies:
                yarn._unsaved[tid] = None  # the owner's next save moves them
        yarn._pending_question, yarn._pending_asks = read_pending(state)
        return yarn

    def __repr__(self) -> str:
        summary = self._summary
        folded = summary.compressed_messages if summary is not None else 0
        return f"YaRN({len(self.thread_ids())} threads, {folded} messages compressed)"
