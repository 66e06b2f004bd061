"""The memory updater's settings, and when a finished task is consolidated.

Private to :mod:`agentmem.memory_updater`, which re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentmem.errors import ConfigurationError
from agentmem.topics import DEFAULT_MAX_TOKENS_PER_FILE, MIN_TOKENS_PER_FILE

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "MEMORY_UPDATE_MIN_ITERATIONS",
    "TOPICS_PROMPT_TOKENS",
    "MemoryUpdateSettings",
    "skip_reason",
    "update_settings",
]

MEMORY_UPDATE_MIN_ITERATIONS = 10
"""A task with fewer LLM iterations (``record_usage`` calls) is not consolidated."""
DEFAULT_MAX_ITERATIONS = 8
"""Model calls one memory update may make."""
TOPICS_PROMPT_TOKENS = 2000
"""Default budget of the topic files injected into a later session's system prompt."""


@dataclass(frozen=True, kw_only=True)
class MemoryUpdateSettings:
    """How a :class:`~agentmem.memory.Memory` runs memory updates (``Memory(memory_update=...)``).

    Raises:
        ConfigurationError: a field out of range or of the wrong type.
    """

    enabled: bool = True
    """Run the updater at the end of long tasks (it also needs ``Memory(llm=...)``)."""
    min_iterations: int = MEMORY_UPDATE_MIN_ITERATIONS
    """Fewest LLM iterations a task needs before it is consolidated."""
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    """Most model calls one update makes (the tool loop's bound)."""
    max_tokens_per_file: int = DEFAULT_MAX_TOKENS_PER_FILE
    """Per-topic-file token limit, told to the model and enforced on every write."""
    inject_topics: bool = True
    """Inject the topic files into later sessions' system prompts."""
    prompt_tokens: int = TOPICS_PROMPT_TOKENS
    """Token budget of that injection (also capped at a tenth of the context window)."""

    def __post_init__(self) -> None:
        for name in ("enabled", "inject_topics"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"memory_update.{name} must be True or False, got {getattr(self, name)!r}"
                )
        for name, low in (
            ("min_iterations", 0),
            ("max_iterations", 1),
            ("max_tokens_per_file", MIN_TOKENS_PER_FILE),
            ("prompt_tokens", 0),
        ):
            value = getattr(self, name)
            if type(value) is not int or not low <= value <= 2**31 - 1:
                raise ConfigurationError(
                    f"memory_update.{name} must be an int from {low} to 2**31-1, got {value!r}"
                )


def update_settings(value: object) -> MemoryUpdateSettings:
    """``Memory(memory_update=...)`` as settings: a bool, MemoryUpdateSettings or a mapping.

    Raises:
        ConfigurationError: anything else, or a bad field.
    """
    if isinstance(value, MemoryUpdateSettings):
        return value
    if isinstance(value, bool):
        return MemoryUpdateSettings(enabled=value)
    if isinstance(value, Mapping):
        known = set(MemoryUpdateSettings.__dataclass_fields__)
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ConfigurationError(
                f"memory_update has unknown settings {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        return MemoryUpdateSettings(**{str(k): v for k, v in value.items()})
    raise ConfigurationError(
        "memory_update must be True, False, MemoryUpdateSettings or a mapping, "
        f"got {type(value).__name__}"
    )


def skip_reason(
    *,
    has_llm: bool,
    settings: MemoryUpdateSettings,
    incognito: bool,
    subagent: bool,
    task_id: int | None,
    iterations: int,
) -> str | None:
    """Why a finished task is not consolidated, or ``None`` when the updater should run."""
    if task_id is None:
        return "no task was running"
    if subagent:
        return "sub-agent sessions never update memory"
    if not settings.enabled:
        return "memory updates are disabled"
    if incognito:
        return "incognito memory writes nothing"
    if not has_llm:
        return "the Memory has no llm"
    if iterations < settings.min_iterations:
        return f"the task took {iterations} LLM iterations (fewer than {settings.min_iterations})"
    return None
