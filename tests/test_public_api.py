"""Pin the public surface: nothing leaks into or silently disappears from ``agentmem``."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import FunctionType, ModuleType

import pytest

import agentmem

EXPECTED = [
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


def _resolve_all() -> None:
    """Import every public name (``import agentmem`` binds them on first use, PEP 562)."""
    for name in agentmem.__all__:
        getattr(agentmem, name)


def test_namespace_is_exactly_all() -> None:
    # Submodules bind their names on the package whenever they are imported;
    # everything else public in the namespace must be in __all__, and back.
    _resolve_all()
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
    _resolve_all()
    owners: dict[str, list[str]] = {}
    for module in _public_modules():
        for name in getattr(module, "__all__", ()):
            if getattr(module, name) is vars(agentmem).get(name, object()):
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


MOVED = {
    "DEFAULT_ASK_TOOLS": "agentmem.yarn",
    "Decision": "agentmem.yarn",
    "MISSING_TOOL_RESULT": "agentmem.repair",
    "SessionLock": "agentmem.session_store",
    "SessionRecord": "agentmem.session_store",
    "SessionWriter": "agentmem.session_store",
}


@pytest.mark.parametrize("name", sorted(MOVED))
def test_moved_names_still_resolve_with_a_deprecation_warning(name: str) -> None:
    home = importlib.import_module(MOVED[name])
    assert name in home.__all__
    assert name not in agentmem.__all__ and name not in dir(agentmem)
    with pytest.warns(DeprecationWarning, match=f"import it from {MOVED[name]}"):
        value = getattr(agentmem, name)
    assert value is getattr(home, name)


def test_the_public_api_imports_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in agentmem.__all__:
            getattr(agentmem, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        agentmem.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_docs_index_lists_exactly_the_public_api() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "index.md").read_text()
    section = page.split("## The public API in one screen")[1].split("The building blocks")[0]
    assert set(re.findall(r"`(\w+)`", section)) - {"__all__"} == set(agentmem.__all__) - {
        "__version__"
    }


_FIRST_ACCESS_RACE = """
import random, sys, threading
import agentmem
names = list(agentmem.__all__)
random.seed(int(sys.argv[1]))
random.shuffle(names)
barrier = threading.Barrier(len(names))
errors = []
def first_access(name):
    barrier.wait()
    try:
        getattr(agentmem, name)
    except BaseException as exc:
        errors.append(f"{name}: {type(exc).__name__}: {exc}")
threads = [threading.Thread(target=first_access, args=(n,)) for n in names]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\\n".join(errors))
"""


def test_first_access_from_many_threads_at_once_never_fails() -> None:
    # `import agentmem` imports its parts on first use; threads racing to the first
    # use of different names used to meet in the parts' imports (deadlock errors,
    # partly initialised modules) about half the time.
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _FIRST_ACCESS_RACE, str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in range(6)
    ]
    results = [(run.communicate(timeout=120), run.returncode) for run in runs]
    for (out, err), returncode in results:
        assert returncode == 0, err
        assert out.strip() == "", out
