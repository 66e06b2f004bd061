"""Pin the public surface: nothing leaks into or silently disappears from ``agentmem``."""

from __future__ import annotations

import importlib
import pkgutil
from types import FunctionType, ModuleType

import agentmem

EXPECTED = [
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


def _public_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"agentmem.{info.name}")
        for info in pkgutil.iter_modules(agentmem.__path__)
        if not info.name.startswith("_")
    ]


def test_namespace_is_exactly_all() -> None:
    # Submodules bind their names on the package whenever they are imported;
    # everything else public in the namespace must be in __all__, and back.
    modules = {module.__name__ for module in _public_modules()}
    public = {
        name
        for name, value in vars(agentmem).items()
        if not name.startswith("_")
        and not (isinstance(value, ModuleType) and value.__name__ in modules)
    }
    assert public == set(agentmem.__all__) - {"__version__"}
    assert "annotations" not in vars(agentmem)
    assert dir(agentmem) == sorted(agentmem.__all__)


def test_every_name_is_its_defining_module_public_object() -> None:
    owners: dict[str, list[str]] = {}
    for module in _public_modules():
        for name in getattr(module, "__all__", ()):
            if getattr(module, name) is getattr(agentmem, name, object()):
                owners.setdefault(name, []).append(module.__name__)
    for name in set(agentmem.__all__) - {"__version__"}:
        assert owners.get(name), f"agentmem.{name} is not a part's public object"
        obj = getattr(agentmem, name)
        if isinstance(obj, type | FunctionType) and not obj.__module__.startswith("agentmem._"):
            # Defined in a public module: that module must be one that exports it
            # (objects from a private implementation module are exported by the
            # public part that owns them, checked above).
            home = obj.__module__
            assert any(home == owner or home.startswith(owner + ".") for owner in owners[name]), (
                f"agentmem.{name} is re-exported stale"
            )


def test_errors_share_one_root() -> None:
    for name in agentmem.__all__:
        obj = getattr(agentmem, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, agentmem.AgentMemError)


def test_version_is_a_string() -> None:
    assert isinstance(agentmem.__version__, str)
    assert agentmem.__version__.count(".") == 2


def test_modules_declare_all() -> None:
    modules = _public_modules()
    assert {m.__name__ for m in modules} >= {
        "agentmem.memory",
        "agentmem.tasks",
        "agentmem.testing",
    }
    for mod in modules:
        assert isinstance(mod.__all__, list), f"{mod.__name__} has no __all__"
        for name in mod.__all__:
            assert hasattr(mod, name), f"{mod.__name__}.__all__ names missing {name}"
