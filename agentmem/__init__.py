"""agentmem: an embeddable memory layer for LLM agents.

The public API is exactly what ``__all__`` lists; ``dir(agentmem)`` shows
only those names, and a test pins ``__all__`` against the module's real
namespace (importing a submodule still binds its name here, as Python
always does; those are not API). Import parts from the top level::

    import agentmem

    history = agentmem.MessageHistory()
    history.append({"role": "user", "content": "hi"})
    payload = history.to_api()                          # OpenAI Chat Completions
    system, messages = history.to_api(provider="anthropic")
"""

import importlib as _importlib
import typing as _typing
import warnings as _warnings

from agentmem.context import ContextManager, ContextSettings, ContextStats, TrimEvent
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
from agentmem.repair import build_payload, repair
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


_MOVED = {
    "DEFAULT_ASK_TOOLS": "agentmem.yarn",
    "Decision": "agentmem.yarn",
    "MISSING_TOOL_RESULT": "agentmem.repair",
    "SessionLock": "agentmem.session_store",
    "SessionRecord": "agentmem.session_store",
    "SessionWriter": "agentmem.session_store",
}
"""Names that left ``__all__`` for the namespace of the part that defines them."""


def __getattr__(name: str) -> _typing.Any:
    """``agentmem.<moved name>`` still works, with a :class:`DeprecationWarning`."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'agentmem' has no attribute {name!r}")
    _warnings.warn(
        f"agentmem.{name} is deprecated: import it from {home}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_importlib.import_module(home), name)


def __dir__() -> list[str]:
    """Only the public API, for ``dir(agentmem)`` and tab completion."""
    return sorted(__all__)
