"""The ``memory_operations`` tool: schemas for the model, and a dispatcher that never raises.

One function, ``memory_operations``, with an ``operation`` argument
(:data:`OPERATIONS`): the notes (store, retrieve, search, list, delete),
long-term memory (add_discovery, add_solution, add_pattern, prune_ltm,
ltm_stats), cross-session recall (recall_sessions) and the topic files the
memory updater keeps (list_topics, read_topic, write_topic: the memory
updater's fork can work through this tool, so a host that sends it keeps
its tool set, and its prompt cache, for the update).

* :func:`openai_tools` / :func:`anthropic_tools`: the tool definitions in
  each provider's format (the same JSON schema inside).
* :class:`MemoryTools`: ``dispatch(arguments)`` validates the model's
  arguments (a JSON string or a mapping) with pydantic and runs the
  operation on a :class:`~agentmem.memory.Memory` (or anything with
  ``.notes`` and ``.ltm``). It returns ``{"ok": True, "result": ...}``
  (JSON-serialisable) or ``{"ok": False, "error": "..."}`` with a message the
  model can act on. Bad arguments, unsafe keys, storage errors: every
  :class:`~agentmem.errors.AgentMemError` and every validation problem comes
  back as an error result, never as an exception into the host loop.
  ``handle(tool_call)`` turns one OpenAI-format tool call into the tool
  message to append.

``recall_sessions`` calls ``memory.recall(query, max_sessions=..., max_results=...)``
when the memory has it, and otherwise answers "recall is not available".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agentmem._json import decode_arguments
from agentmem.errors import AgentMemError
from agentmem.ltm import LongTermMemory, LTMEntry
from agentmem.notes import KeyValueStore

__all__ = [
    "OPERATIONS",
    "TOOL_NAME",
    "TOPIC_OPERATIONS",
    "MemoryTools",
    "anthropic_tools",
    "openai_tools",
    "tool_schema",
]

_log = logging.getLogger("agentmem.tools")

TOOL_NAME = "memory_operations"
OPERATIONS = (
    "store",
    "retrieve",
    "search",
    "list",
    "delete",
    "add_discovery",
    "add_solution",
    "add_pattern",
    "prune_ltm",
    "ltm_stats",
    "recall_sessions",
    "list_topics",
    "read_topic",
    "write_topic",
)
TOPIC_OPERATIONS = ("list_topics", "read_topic", "write_topic")
"""The operations over the topic files (``memories/<topic>.md``)."""
_DESCRIPTION = (
    "Persistent memory across sessions. Notes (key-value): store, retrieve, search, list, "
    "delete. Long-term project knowledge: add_discovery (a fact about the project), "
    "add_solution (an error and what fixed it), add_pattern (a code convention), prune_ltm, "
    "ltm_stats. recall_sessions searches earlier conversations. Record a discovery when you "
    "find a root cause or a non-obvious fact; adding a known fact confirms it. Topic files "
    "(the project's consolidated knowledge): list_topics, read_topic, write_topic (replaces "
    "the whole file)."
)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


Key = Annotated[str, Field(min_length=1, max_length=128)]
Text = Annotated[str, Field(min_length=1, max_length=4000)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
Examples = Annotated[list[Annotated[str, Field(max_length=4000)]], Field(max_length=20)]


class _Store(_Args):
    operation: Literal["store"]
    key: Key
    content: Annotated[str, Field(max_length=1_000_000)]


class _Retrieve(_Args):
    operation: Literal["retrieve"]
    key: Key


class _Delete(_Args):
    operation: Literal["delete"]
    key: Key


class _Search(_Args):
    operation: Literal["search"]
    query: Text
    include_internal: bool = False


class _List(_Args):
    operation: Literal["list"]


class _Discovery(_Args):
    operation: Literal["add_discovery"]
    fact: Text
    confidence: Confidence = 0.8
    examples: Examples = []


class _Solution(_Args):
    operation: Literal["add_solution"]
    error: Text
    solution: Text
    examples: Examples = []


class _Pattern(_Args):
    operation: Literal["add_pattern"]
    pattern: Text
    confidence: Confidence = 0.7
    examples: Examples = []


class _Prune(_Args):
    operation: Literal["prune_ltm"]
    max_age_days: Annotated[float, Field(ge=0, le=100_000)] = 90
    min_confidence: Confidence = 0.3


class _Stats(_Args):
    operation: Literal["ltm_stats"]


class _Recall(_Args):
    operation: Literal["recall_sessions"]
    query: Text
    max_sessions: Annotated[int, Field(ge=1, le=100_000)] | None = None
    max_results: Annotated[int, Field(ge=1, le=100)] = 5


class _ListTopics(_Args):
    operation: Literal["list_topics"]


class _ReadTopic(_Args):
    operation: Literal["read_topic"]
    topic: Key


class _WriteTopic(_Args):
    operation: Literal["write_topic"]
    topic: Key
    content: Annotated[str, Field(max_length=1_000_000)]


_Request = Annotated[
    _Store
    | _Retrieve
    | _Delete
    | _Search
    | _List
    | _Discovery
    | _Solution
    | _Pattern
    | _Prune
    | _Stats
    | _Recall
    | _ListTopics
    | _ReadTopic
    | _WriteTopic,
    Field(discriminator="operation"),
]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(_Request)


def tool_schema() -> dict[str, Any]:
    """The JSON schema of ``memory_operations``' arguments (shared by both formats)."""
    text = {"type": "string", "minLength": 1, "maxLength": 4000}
    examples = {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": 20,
        "description": "Example file paths where this applies.",
    }
    return {
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": list(OPERATIONS)},
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "description": "Note key (store, retrieve, delete): a plain name, no '/' or '..'.",
            },
            "content": {
                "type": "string",
                "description": "Note text (store); the topic file's full content (write_topic).",
            },
            "topic": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "description": "Topic name (read_topic, write_topic), e.g. 'deploy': "
                "letters, digits, '-', '_'.",
            },
            "query": {**text, "description": "Words to look for (search, recall_sessions)."},
            "fact": {**text, "description": "A fact about the project (add_discovery)."},
            "error": {**text, "description": "The error or problem (add_solution)."},
            "solution": {**text, "description": "What fixed it (add_solution)."},
            "pattern": {**text, "description": "A code pattern or convention (add_pattern)."},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "examples": examples,
            "max_age_days": {"type": "number", "minimum": 0, "description": "prune_ltm"},
            "min_confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "max_sessions": {"type": "integer", "minimum": 1, "description": "recall_sessions"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 100},
            "include_internal": {
                "type": "boolean",
                "description": "search: also match notes agentmem writes itself "
                "(the session_progress checkpoint). Default false.",
            },
        },
        "required": ["operation"],
        "additionalProperties": False,
    }


def openai_tools() -> list[dict[str, Any]]:
    """``tools=`` for OpenAI Chat Completions (``{"type": "function", "function": ...}``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": _DESCRIPTION,
                "parameters": tool_schema(),
            },
        }
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    """``tools=`` for Anthropic Messages (``{"name", "description", "input_schema"}``)."""
    return [{"name": TOOL_NAME, "description": _DESCRIPTION, "input_schema": tool_schema()}]


class _Host(Protocol):
    notes: KeyValueStore
    ltm: LongTermMemory


def _entry(entry: LTMEntry) -> dict[str, Any]:
    data = entry.to_json()
    return {k: data[k] for k in ("id", "kind", "text", "detail", "confidence", "applications")}


def _plain(value: Any) -> Any:
    """A recall hit (dataclass, pydantic model, mapping...) as JSON-serialisable data."""
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _validation_text(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"][1:] or error["loc"])
        problems.append(f"{loc or 'arguments'}: {error['msg']}")
    return "invalid arguments: " + "; ".join(problems[:5])


class MemoryTools:
    """Runs ``memory_operations`` calls against a memory; never raises into the host loop.

    Args:
        memory: A :class:`~agentmem.memory.Memory` (anything with ``.notes``,
            ``.ltm`` and, optionally, ``.recall``).
    """

    name = TOOL_NAME

    def __init__(self, memory: _Host) -> None:
        self.memory = memory

    def openai(self) -> list[dict[str, Any]]:
        """The OpenAI tool definitions."""
        return openai_tools()

    def anthropic(self) -> list[dict[str, Any]]:
        """The Anthropic tool definitions."""
        return anthropic_tools()

    def dispatch(self, arguments: object) -> dict[str, Any]:
        """Run one call; ``arguments`` is the model's JSON text or an already-decoded mapping.

        Returns:
            ``{"ok": True, "operation": ..., "result": ...}`` or
            ``{"ok": False, "error": "..."}``. Always JSON-serialisable.
        """
        if isinstance(arguments, str):
            decoded = decode_arguments(arguments)
            if decoded is None:
                return {"ok": False, "error": "arguments are not a JSON object"}
            arguments = decoded
        if not isinstance(arguments, Mapping):
            return {"ok": False, "error": "arguments must be a JSON object"}
        operation = arguments.get("operation")
        try:
            request = _ADAPTER.validate_python(dict(arguments))
        except ValidationError as exc:
            if operation not in OPERATIONS:
                return {
                    "ok": False,
                    "error": f"unknown operation {operation!r}; use one of {', '.join(OPERATIONS)}",
                }
            return {"ok": False, "operation": operation, "error": _validation_text(exc)}
        try:
            result = _plain(self._run(request))
        except AgentMemError as exc:
            return {"ok": False, "operation": operation, "error": str(exc)}
        except Exception as exc:  # a host-supplied part failed: report, do not crash the loop
            _log.exception("memory_operations %s failed", operation)
            return {"ok": False, "operation": operation, "error": f"internal error: {exc!r}"}
        return {"ok": True, "operation": operation, "result": result}

    def handle(self, tool_call: Mapping[str, Any]) -> dict[str, Any]:
        """The tool message answering one OpenAI-format tool call to ``memory_operations``."""
        call_id = str(tool_call.get("id", "")) if isinstance(tool_call, Mapping) else ""
        function = tool_call.get("function") if isinstance(tool_call, Mapping) else None
        if not isinstance(function, Mapping) or function.get("name") != TOOL_NAME:
            outcome: dict[str, Any] = {"ok": False, "error": f"not a {TOOL_NAME} call"}
        else:
            outcome = self.dispatch(function.get("arguments", "{}"))
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "content": json.dumps(outcome, ensure_ascii=False),
        }

    def _run(self, request: Any) -> Any:
        notes, ltm = self.memory.notes, self.memory.ltm
        handlers: dict[type, Callable[[Any], Any]] = {
            _Store: lambda r: notes.store(r.key, r.content),
            _Retrieve: lambda r: {"key": r.key, "content": notes.retrieve(r.key)},
            _Delete: lambda r: {"key": r.key, "deleted": notes.delete(r.key)},
            _Search: self._search,
            _List: lambda r: {"keys": notes.list()},
            _Discovery: lambda r: _entry(ltm.add_discovery(r.fact, r.confidence, r.examples)),
            _Solution: lambda r: _entry(ltm.add_solution(r.error, r.solution, r.examples)),
            _Pattern: lambda r: _entry(ltm.add_pattern(r.pattern, r.confidence, r.examples)),
            _Prune: lambda r: {
                "removed": [_entry(e) for e in ltm.prune(r.max_age_days, r.min_confidence)]
            },
            _Stats: lambda r: ltm.stats(),
            _Recall: self._recall,
            _ListTopics: self._topics,
            _ReadTopic: self._topics,
            _WriteTopic: self._topics,
        }
        return handlers[type(request)](request)

    def _search(self, request: _Search) -> Any:
        found = self.memory.notes.search(request.query, include_internal=request.include_internal)
        result: dict[str, Any] = {
            "notes": list(found),
            "ltm": [_entry(e) for e in self.memory.ltm.search(request.query)],
        }
        skipped = getattr(found, "skipped", ())
        if skipped:
            result["skipped"] = list(skipped)  # unreadable notes, left out: the model is told
        return result

    def _recall(self, request: _Recall) -> Any:
        recall = getattr(self.memory, "recall", None)
        if not callable(recall):
            raise _Unavailable("recall is not available in this agentmem memory")
        return {
            "hits": recall(
                request.query, max_sessions=request.max_sessions, max_results=request.max_results
            )
        }

    def _topics(self, request: _ListTopics | _ReadTopic | _WriteTopic) -> Any:
        topics = getattr(self.memory, "topics", None)
        if topics is None:
            raise _Unavailable("topic files are not available in this agentmem memory")
        if isinstance(request, _ListTopics):
            return {"topics": [{"topic": i.topic, "bytes": i.size} for i in topics.list()]}
        if isinstance(request, _ReadTopic):
            return {"topic": request.topic, "content": topics.read(request.topic)}
        written = topics.write(request.topic, request.content)
        return {
            "topic": written.topic,
            "tokens": written.tokens_after,
            "created": written.created,
            "truncated": written.truncated,
        }


class _Unavailable(AgentMemError):
    """An operation this memory does not offer (reported to the model as an error)."""
