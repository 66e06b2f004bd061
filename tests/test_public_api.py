"""Pin the public surface: nothing leaks into or silently disappears from ``agentmem``."""

from __future__ import annotations

import importlib

import agentmem

EXPECTED = [
    "DEFAULT_ASK_TOOLS",
    "INTERNAL_FIELDS",
    "LLM",
    "MISSING_TOOL_RESULT",
    "AgentMemError",
    "AsyncLLM",
    "BillingRecord",
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
    "LLMSummarizer",
    "LearningEstimator",
    "Memory",
    "Message",
    "MessageHistory",
    "ProgressReporter",
    "Session",
    "SessionClosedError",
    "SessionInfo",
    "SessionLock",
    "SessionNotFoundError",
    "SessionRecord",
    "SessionStore",
    "SessionWriter",
    "ShortTermMemory",
    "StorageError",
    "StoreLockedError",
    "Summarizer",
    "ThreadSummary",
    "TiktokenCounter",
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
    "to_anthropic",
]


def test_all_is_pinned() -> None:
    assert agentmem.__all__ == EXPECTED


def test_all_is_sorted_like_ruff_sorts_it() -> None:
    # isort-style: SCREAMING_CASE constants, then CamelCase classes, then the rest.
    def key(name: str) -> tuple[int, str]:
        if name.isupper():
            return (0, name)
        if name[0].isupper():
            return (1, name)
        return (2, name)

    assert agentmem.__all__ == sorted(agentmem.__all__, key=key)


def test_every_name_resolves() -> None:
    for name in agentmem.__all__:
        assert getattr(agentmem, name) is not None


def test_errors_share_one_root() -> None:
    for name in agentmem.__all__:
        obj = getattr(agentmem, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, agentmem.AgentMemError)


def test_version_is_a_string() -> None:
    assert isinstance(agentmem.__version__, str)
    assert agentmem.__version__.count(".") == 2


def test_modules_declare_all() -> None:
    for module in (
        "errors",
        "protocols",
        "messages",
        "repair",
        "history",
        "tokens",
        "stm",
        "yarn",
        "context",
        "session_store",
        "memory",
    ):
        mod = importlib.import_module(f"agentmem.{module}")
        for name in mod.__all__:
            assert hasattr(mod, name), f"agentmem.{module}.__all__ names missing {name}"
