"""agentmem: an embeddable memory layer for LLM agents.

The public API is exactly what ``__all__`` lists; ``dir(agentmem)`` shows
only those names, and a test pins ``__all__`` against the module's real
namespace (importing a submodule still binds its name here, as Python
always does; those are not API).

``import agentmem`` loads only the errors and the repair passes; every other
public name is imported from its part on first use (PEP 562 ``__getattr__``, then
kept in the namespace),
so a program that needs one part (or the CLI's ``--help``) does not pay for
all of them. ``agentmem.Memory`` imports the facade and everything it wires.
Type checkers see every name through the ``TYPE_CHECKING`` imports below.
Import parts from the top level::

    import agentmem

    history = agentmem.MessageHistory()
    history.append({"role": "user", "content": "hi"})
    payload = history.to_api()                          # OpenAI Chat Completions
    system, messages = history.to_api(provider="anthropic")
"""

import importlib as _importlib
import threading as _threading
import typing as _typing
import warnings as _warnings

from agentmem.errors import (
    AgentMemError,
    ConfigurationError,
    ContextOverflowError,
    CorruptStoreError,
    FormatVersionError,
    InvalidArgumentError,
    InvalidMessageError,
    LLMError,
    RestoreError,
    SessionClosedError,
    SessionNotFoundError,
    StaleTaskError,
    StorageError,
    StoreLockedError,
    UnsafePathError,
)

# Bound now, not on first use: ``repair`` is also the name of its module, which the
# import system binds here whenever ``agentmem.repair`` is first imported, so a lazy
# binding would be shadowed by the module.
from agentmem.repair import build_payload, repair

if _typing.TYPE_CHECKING:
    from agentmem.context import ContextManager, ContextSettings, ContextStats, TrimEvent
    from agentmem.history import HistoryObserver, MessageHistory
    from agentmem.ltm import LongTermMemory, LTMEntry
    from agentmem.memory import Memory, Session, Usage
    from agentmem.memory_updater import MemoryUpdateResult, MemoryUpdateSettings
    from agentmem.messages import (
        INTERNAL_FIELDS,
        Message,
        from_anthropic,
        from_responses_items,
        normalize_message,
        sanitize_text,
        to_anthropic,
        to_responses_items,
    )
    from agentmem.notes import KeyValueStore
    from agentmem.protocols import (
        LLM,
        AsyncLLM,
        CalibratingCounter,
        Embedder,
        MemoryClient,
        MemoryRecord,
        ProgressReporter,
        Summarizer,
        TokenCounter,
    )
    from agentmem.recall import RecallHit
    from agentmem.scrub import scrub_secrets
    from agentmem.session_store import (
        BillingRecord,
        Durability,
        SessionInfo,
        SessionStore,
    )
    from agentmem.stm import ShortTermMemory
    from agentmem.time_machine import RestoreResult, TimeMachine
    from agentmem.tokens import (
        HeuristicCounter,
        LearningEstimator,
        TiktokenCounter,
        count_message,
        count_messages,
        counter_for_model,
    )
    from agentmem.tools import MemoryTools
    from agentmem.topics import TopicStore
    from agentmem.yarn import ThreadSummary, YaRN
    from agentmem.yarn.summarizer import LLMSummarizer

__version__ = "0.1.0"

__all__ = [
    "INTERNAL_FIELDS",
    "LLM",
    "AgentMemError",
    "AsyncLLM",
    "BillingRecord",
    "CalibratingCounter",
    "ConfigurationError",
    "ContextManager",
    "ContextOverflowError",
    "ContextSettings",
    "ContextStats",
    "CorruptStoreError",
    "Durability",
    "Embedder",
    "FormatVersionError",
    "HeuristicCounter",
    "HistoryObserver",
    "InvalidArgumentError",
    "InvalidMessageError",
    "KeyValueStore",
    "LLMError",
    "LLMSummarizer",
    "LTMEntry",
    "LearningEstimator",
    "LongTermMemory",
    "Memory",
    "MemoryClient",
    "MemoryRecord",
    "MemoryTools",
    "MemoryUpdateResult",
    "MemoryUpdateSettings",
    "Message",
    "MessageHistory",
    "ProgressReporter",
    "RecallHit",
    "RestoreError",
    "RestoreResult",
    "Session",
    "SessionClosedError",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "ShortTermMemory",
    "StaleTaskError",
    "StorageError",
    "StoreLockedError",
    "Summarizer",
    "ThreadSummary",
    "TiktokenCounter",
    "TimeMachine",
    "TokenCounter",
    "TopicStore",
    "TrimEvent",
    "UnsafePathError",
    "Usage",
    "YaRN",
    "__version__",
    "build_payload",
    "count_message",
    "count_messages",
    "counter_for_model",
    "from_anthropic",
    "from_responses_items",
    "normalize_message",
    "repair",
    "sanitize_text",
    "scrub_secrets",
    "to_anthropic",
    "to_responses_items",
]


_LAZY: dict[str, str] = {
    "AsyncLLM": "agentmem.protocols",
    "BillingRecord": "agentmem.session_store",
    "CalibratingCounter": "agentmem.protocols",
    "ContextManager": "agentmem.context",
    "ContextSettings": "agentmem.context",
    "ContextStats": "agentmem.context",
    "Durability": "agentmem.session_store",
    "Embedder": "agentmem.protocols",
    "HeuristicCounter": "agentmem.tokens",
    "HistoryObserver": "agentmem.history",
    "INTERNAL_FIELDS": "agentmem.messages",
    "KeyValueStore": "agentmem.notes",
    "LLM": "agentmem.protocols",
    "LLMSummarizer": "agentmem.yarn.summarizer",
    "LTMEntry": "agentmem.ltm",
    "LearningEstimator": "agentmem.tokens",
    "LongTermMemory": "agentmem.ltm",
    "Memory": "agentmem.memory",
    "MemoryClient": "agentmem.protocols",
    "MemoryRecord": "agentmem.protocols",
    "MemoryTools": "agentmem.tools",
    "MemoryUpdateResult": "agentmem.memory_updater",
    "MemoryUpdateSettings": "agentmem.memory_updater",
    "Message": "agentmem.messages",
    "MessageHistory": "agentmem.history",
    "ProgressReporter": "agentmem.protocols",
    "RecallHit": "agentmem.recall",
    "RestoreResult": "agentmem.time_machine",
    "Session": "agentmem.memory",
    "SessionInfo": "agentmem.session_store",
    "SessionStore": "agentmem.session_store",
    "ShortTermMemory": "agentmem.stm",
    "Summarizer": "agentmem.protocols",
    "ThreadSummary": "agentmem.yarn",
    "TiktokenCounter": "agentmem.tokens",
    "TimeMachine": "agentmem.time_machine",
    "TokenCounter": "agentmem.protocols",
    "TopicStore": "agentmem.topics",
    "TrimEvent": "agentmem.context",
    "Usage": "agentmem.memory",
    "YaRN": "agentmem.yarn",
    "count_message": "agentmem.tokens",
    "count_messages": "agentmem.tokens",
    "counter_for_model": "agentmem.tokens",
    "from_anthropic": "agentmem.messages",
    "from_responses_items": "agentmem.messages",
    "normalize_message": "agentmem.messages",
    "sanitize_text": "agentmem.messages",
    "scrub_secrets": "agentmem.scrub",
    "to_anthropic": "agentmem.messages",
    "to_responses_items": "agentmem.messages",
}
"""Every public name not bound above, with the module it is imported from on first use."""

_MOVED = {
    "DEFAULT_ASK_TOOLS": "agentmem.yarn",
    "Decision": "agentmem.yarn",
    "MISSING_TOOL_RESULT": "agentmem.repair",
    "SessionLock": "agentmem.session_store",
    "SessionRecord": "agentmem.session_store",
    "SessionWriter": "agentmem.session_store",
}
"""Names that left ``__all__`` for the namespace of the part that defines them."""


_IMPORTING = _threading.RLock()
"""Held while a lazily imported name's module is first imported (see ``__getattr__``)."""


def __getattr__(name: str) -> _typing.Any:
    """A public name, imported on first use (PEP 562); a moved name, with a warning.

    ``agentmem.<moved name>`` still works, with a :class:`DeprecationWarning`, and
    ``agentmem.<submodule>`` works as it did when every part was imported eagerly.
    """
    home = _LAZY.get(name)
    if home is not None:
        # One first import at a time: the parts import each other, and two threads
        # importing two of them at once can meet in the middle (a deadlock error,
        # or a partly initialised module).
        with _IMPORTING:
            value = getattr(_importlib.import_module(home), name)
        globals()[name] = value  # the next lookup is a plain attribute
        return value
    home = _MOVED.get(name)
    if home is not None:
        _warnings.warn(
            f"agentmem.{name} is deprecated: import it from {home}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_importlib.import_module(home), name)
    if not name.startswith("__"):
        try:
            return _importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the submodule exists; something it imports is missing
    raise AttributeError(f"module 'agentmem' has no attribute {name!r}")


def __dir__() -> list[str]:
    """Only the public API, for ``dir(agentmem)`` and tab completion."""
    return sorted(__all__)
