"""agentmem: an embeddable memory layer for LLM agents.

The public API is exactly what ``__all__`` lists (a test pins it). Import
parts from the top level::

    import agentmem

    history = agentmem.MessageHistory()
    history.append({"role": "user", "content": "hi"})
    payload = history.to_api()                          # OpenAI Chat Completions
    system, messages = history.to_api(provider="anthropic")
"""

from __future__ import annotations

from agentmem.errors import (
    AgentMemError,
    ConfigurationError,
    CorruptStoreError,
    InvalidArgumentError,
    InvalidMessageError,
    StorageError,
    StoreLockedError,
    UnsafePathError,
)
from agentmem.history import HistoryObserver, MessageHistory
from agentmem.messages import (
    INTERNAL_FIELDS,
    Message,
    from_anthropic,
    normalize_message,
    sanitize_text,
    to_anthropic,
)
from agentmem.protocols import LLM, AsyncLLM, Embedder, ProgressReporter, Summarizer, TokenCounter
from agentmem.repair import MISSING_TOOL_RESULT, build_payload, repair
from agentmem.tokens import (
    HeuristicCounter,
    LearningEstimator,
    TiktokenCounter,
    count_message,
    count_messages,
    counter_for_model,
)

__version__ = "0.1.0"

__all__ = [
    "INTERNAL_FIELDS",
    "LLM",
    "MISSING_TOOL_RESULT",
    "AgentMemError",
    "AsyncLLM",
    "ConfigurationError",
    "CorruptStoreError",
    "Embedder",
    "HeuristicCounter",
    "HistoryObserver",
    "InvalidArgumentError",
    "InvalidMessageError",
    "LearningEstimator",
    "Message",
    "MessageHistory",
    "ProgressReporter",
    "StorageError",
    "StoreLockedError",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "UnsafePathError",
    "__version__",
    "build_payload",
    "count_message",
    "count_messages",
    "counter_for_model",
    "from_anthropic",
    "normalize_message",
    "repair",
    "sanitize_text",
    "to_anthropic",
]
