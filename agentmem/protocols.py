"""The seams where a host plugs in its own components.

agentmem never talks to a model provider, an embedding service or a
tokenizer download on its own. Everything that could need one is a small
:class:`typing.Protocol` here, so a host adapts its client in a few lines
and tests pass plain functions or the doubles from ``agentmem.testing``.

Protocols are structural: nothing needs to inherit from them. They are all
``runtime_checkable``, and :class:`~agentmem.memory.Memory` checks the
components it is given (``llm``, ``token_counter``, ``summarizer``,
``reporter``) against them at construction, raising
:class:`~agentmem.errors.ConfigurationError` naming the argument, so a wrong
object fails there and not on the first turn. The check only looks at
attribute names, never at signatures.

The shapes:

* :class:`LLM` -- ``llm(messages, tools=None) -> dict``. ``messages`` is a list
  of OpenAI Chat Completions message dicts, ``tools`` a list of OpenAI tool
  specs or ``None``; the return value is an OpenAI-format assistant message
  (``content`` and/or ``tool_calls``) that may carry
  ``usage = {"prompt_tokens", "completion_tokens", "cost_usd"}``.
  :class:`AsyncLLM` is the same with ``async def``; both are accepted
  wherever an LLM is.
* :class:`TokenCounter` -- ``count_text(text) -> int``.
* :class:`CalibratingCounter` -- a :class:`TokenCounter` that also learns
  from the provider's reported usage: ``observe(messages, prompt_tokens,
  tools=None)``, ``state() -> dict`` and ``restore(state)``. A session
  feeds it every reported prompt size and persists its state; each session
  calibrates its own copy (``copy.deepcopy`` of the host's counter), so
  sessions and resumes never overwrite each other's calibration.
* :class:`Embedder` -- ``embed(texts) -> list[list[float]]``.
* :class:`Summarizer` -- ``summarize(messages, previous_summary) -> str``.
* :class:`ProgressReporter` -- ``report(event, data)``.
* :class:`MemoryClient` -- semantic memory scoped by ``user_id`` (and
  optionally ``agent_id``/``run_id``): ``add``, ``search``, ``get_all``,
  ``delete``, ``delete_all``; results are :class:`MemoryRecord` objects.
  :class:`~agentmem.semantic.LocalMemoryClient` and
  :class:`~agentmem.semantic.Mem0Client` implement it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "LLM",
    "AsyncLLM",
    "CalibratingCounter",
    "Embedder",
    "MemoryClient",
    "MemoryRecord",
    "ProgressReporter",
    "Summarizer",
    "TokenCounter",
    "counter_epoch",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a piece of text costs for one model.

    Implementations must be deterministic for a given state and must never
    raise for any ``str`` (including text that contains special-token
    markers such as ``<|endoftext|>``).

    ``epoch``: an integer a counter increments whenever its counts change
    for the same text (the learning estimator does this when its ratio
    moves); every cache of counts (per message, system prompt, summary,
    notes, tools, the context manager's incremental state) is keyed by it.
    Every built-in counter has it (``0`` forever for the fixed ones). It is
    optional for a host's own counter: one without it is read as epoch ``0``
    (counts that never change), through :func:`counter_epoch`, the one place
    the attribute is read. It is not a protocol member, so a counter written
    before it existed still passes ``isinstance(obj, TokenCounter)``.
    """

    def count_text(self, text: str) -> int:
        """Return the number of tokens ``text`` costs (0 for the empty string)."""
        ...


def counter_epoch(counter: TokenCounter) -> int:
    """``counter.epoch``, or ``0`` for a counter without one (see :class:`TokenCounter`).

    The one tolerant read of the attribute: every cache keyed by the epoch
    asks here.
    """
    epoch: int = getattr(counter, "epoch", 0)
    return epoch


@runtime_checkable
class CalibratingCounter(TokenCounter, Protocol):
    """A :class:`TokenCounter` that calibrates itself on the provider's reported usage.

    :class:`~agentmem.tokens.LearningEstimator` is the built-in one. A
    session keeps its own copy (``copy.deepcopy`` of the host's counter, so
    the counter must be deep-copyable), calls :meth:`observe` after every
    reported request and persists :meth:`state` with the session, and on
    resume hands the stored state to :meth:`restore`. ``count_text`` must
    stay constant while ``epoch`` does (see :class:`TokenCounter`).
    """

    epoch: int

    def observe(
        self,
        messages: Iterable[Mapping[str, Any]],
        prompt_tokens: int,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Learn from one request: the messages sent and the prompt size the provider reported.

        Must never raise; an uninformative observation is ignored.
        """
        ...

    def state(self) -> dict[str, Any]:
        """The calibration as a JSON-safe mapping (with its own format and version)."""
        ...

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume a calibration saved by :meth:`state`.

        Raises:
            AgentMemError: ``state`` cannot be used (a subclass such as
                :class:`~agentmem.errors.InvalidArgumentError`).
        """
        ...


@runtime_checkable
class LLM(Protocol):
    """A synchronous chat model: OpenAI-format messages in, one assistant message out."""

    def __call__(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Answer the conversation.

        Args:
            messages: OpenAI Chat Completions message dicts, already valid for
                the API (agentmem repairs them before calling).
            tools: OpenAI-format function tool specs, or ``None``.

        Returns:
            An OpenAI-format assistant message dict. It may carry a ``usage``
            mapping with ``prompt_tokens``, ``completion_tokens`` and
            ``cost_usd``; agentmem uses it for billing and token calibration.
        """
        ...


@runtime_checkable
class AsyncLLM(Protocol):
    """The asynchronous twin of :class:`LLM`."""

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Answer the conversation (see :meth:`LLM.__call__`)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into fixed-length vectors for semantic search."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector per text, all of the same length."""
        ...


@runtime_checkable
class Summarizer(Protocol):
    """Condenses archived messages into a running summary (optional, usually an LLM)."""

    def summarize(self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None) -> str:
        """Return a summary of ``messages`` merged with ``previous_summary``."""
        ...


@runtime_checkable
class ProgressReporter(Protocol):
    """Receives progress events for a host UI or log (``Memory(reporter=...)``).

    agentmem reports what takes time or changes the user's files: context
    trims (``context.trim``), overflow recovery (``context.overflow.*``),
    undo/switch restores (``restore.*``), repairs found when a session is
    resumed (``session.repaired``), recall index rebuilds
    (``recall.index_rebuild.*``), exports (``export.*``) and memory updates
    (``memory_update_started`` / ``memory_update_finished``). An operation
    that takes time sends ``<name>.started`` and then ``<name>.finished``
    (with ``ok`` and ``error``), on failure too. docs/progress.md lists every
    event and each key of its ``data``.
    """

    def report(self, event: str, data: Mapping[str, Any]) -> None:
        """Handle one event, on the thread doing the work: keep it quick.

        ``data`` is a fresh dict the reporter may keep. Whatever the reporter
        raises is logged (logger ``agentmem.progress``) and never reaches the
        agent; what it returns is ignored.
        """
        ...


@dataclass(frozen=True)
class MemoryRecord:
    """One semantic memory, as a :class:`MemoryClient` returns it.

    Attributes:
        id: The memory's stable id.
        memory: The remembered text (a fact, or the user's statement as is).
        user_id: The user it belongs to; ``agent_id``/``run_id`` narrow the scope.
        score: Relevance to the query for :meth:`MemoryClient.search` results
            (higher is better, in [0, 1] where the client can normalise),
            ``None`` elsewhere.
        metadata: Host metadata stored with the memory.
        created_at / updated_at: ISO-8601 UTC timestamps, or ``None`` when unknown.
    """

    id: str
    memory: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    updated_at: str | None = None


@runtime_checkable
class MemoryClient(Protocol):
    """Semantic memory scoped by user (the mem0 shape), local or remote.

    Every call takes its scope as keywords: ``user_id`` (required for
    writes), and optionally ``agent_id`` and ``run_id``. ``filters`` is a
    mapping of metadata keys to required values. Bad arguments raise an
    :class:`~agentmem.errors.AgentMemError` subclass naming them.
    """

    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
    ) -> list[dict[str, Any]]:
        """Remember what ``messages`` say (only user-role content is used).

        Returns one event per memory touched:
        ``{"id", "memory", "event": "ADD" | "UPDATE" | "DELETE" | "NOOP"}``.
        """
        ...

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
    ) -> list[MemoryRecord]:
        """The ``limit`` memories of the scope most relevant to ``query``, best first,
        leaving out those scoring below ``threshold``."""
        ...

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
    ) -> list[MemoryRecord]:
        """Every memory of the scope (newest first, at most ``limit``)."""
        ...

    def delete(self, memory_id: str) -> None:
        """Forget one memory (raises a ``KeyError``-derived AgentMemError if unknown)."""
        ...

    def delete_all(
        self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        """Forget every memory of the scope (``user_id`` required); returns how many."""
        ...
