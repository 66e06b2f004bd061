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
from agentmem.messages import (
    INTERNAL_FIELDS,
    Message,
    from_anthropic,
    normalize_message,
    sanitize_text,
    to_anthropic,
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
from agentmem.repair import MISSING_TOOL_RESULT, build_payload, repair
from agentmem.scrub import scrub_secrets
from agentmem.session_store import (
    BillingRecord,
    Durability,
    SessionInfo,
    SessionLock,
    SessionRecord,
    SessionStore,
    SessionWriter,
)
from agentmem.stm import ShortTermMemory
from agentmem.summarizer import LLMSummarizer
from agentmem.time_machine import TimeMachine
from agentmem.tokens import (
    HeuristicCounter,
    LearningEstimator,
    TiktokenCounter,
    count_message,
    count_messages,
    counter_for_model,
)
from agentmem.tools import MemoryTools
from agentmem.yarn import DEFAULT_ASK_TOOLS, Decision, ThreadSummary, YaRN

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ASK_TOOLS",
    "INTERNAL_FIELDS",
    "LLM",
    "MISSING_TOOL_RESULT",
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
    "Decision",
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
    "Message",
    "MessageHistory",
    "ProgressReporter",
    "RecallHit",
    "RestoreError",
    "Session",
    "SessionClosedError",
    "SessionInfo",
    "SessionLock",
    "SessionNotFoundError",
    "SessionRecord",
    "SessionStore",
    "SessionWriter",
    "ShortTermMemory",
    "StaleTaskError",
    "StorageError",
    "StoreLockedError",
    "Summarizer",
    "ThreadSummary",
    "TiktokenCounter",
    "TimeMachine",
    "TokenCounter",
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
    "normalize_message",
    "repair",
    "sanitize_text",
    "scrub_secrets",
    "to_anthropic",
]


def __dir__() -> list[str]:
    """Only the public API, for ``dir(agentmem)`` and tab completion."""
    return sorted(__all__)
