"""SemanticMemoryExtension: mem0-style memory of the user, attached to a session.

Per user turn the extension does two things (seed: Pikuri's memory extension):

* **capture**: the user's own words go to a :class:`~agentmem.semantic.recorder.Recorder`,
  which hands them to the :class:`~agentmem.protocols.MemoryClient` on a
  background thread, so remembering never slows the turn down. Only the
  user's words are captured: the session passes the text of the user turn it
  just stored, never a system prompt, an assistant reply, a tool result or
  an injected block; and any ``<memory-context>...</memory-context>`` the
  text carries (a host that pasted a previous payload back, say) is removed
  first, so recalled memories are never stored again as if the user had
  said them.
* **prefetch**: the client is searched with those words and the top
  ``prefetch_k`` memories scoring at least ``threshold`` (checked here too,
  whatever the client did) come back as one ``<memory-context>`` block
  tagged with its provenance (``source="agentmem.semantic"`` and the
  ``user_id``), one line per memory with its id. A failing search is logged
  and yields no block: memory never breaks a turn.

The session (:meth:`agentmem.Memory.session` with ``extensions=[ext]``)
places the block right after the user turn in every payload, as a system
message for OpenAI and as a tagged text block of that user turn for
Anthropic. It is never written to the durable history.

Also here: the ``recall`` tool (:meth:`SemanticMemoryExtension.tool_schema`,
:meth:`SemanticMemoryExtension.handle_tool_call`,
:meth:`SemanticMemoryExtension.configure`), the resident persona
(:meth:`SemanticMemoryExtension.persona_prompt`), and
:class:`SessionExtensions`, the per-session state the facade keeps (the
persona computed once at session start, the block of each user turn).
"""

from __future__ import annotations

import html
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Mapping, MutableMapping, MutableSequence, Sequence
from typing import Any, cast

from agentmem._json import decode_arguments
from agentmem._prompt_budget import render_within
from agentmem._truncate import truncate_text
from agentmem._validate import check_flag
from agentmem.errors import AgentMemError, ConfigurationError, InvalidArgumentError
from agentmem.messages import Message, is_real_user, message_text
from agentmem.protocols import MemoryClient, MemoryRecord, TokenCounter
from agentmem.semantic._resume import (
    Blocks,
    StoredExtensions,
    StoredTurn,
    extensions_state,
    read_extensions_state,
    turn_key,
)
from agentmem.semantic.recorder import (
    DEFAULT_FLUSH_TIMEOUT,
    DEFAULT_MAXSIZE,
    CloseReport,
    Recorder,
    check_client,
    check_owner,
    check_timeout,
)
from agentmem.tokens import HeuristicCounter

__all__ = [
    "MEMORY_CONTEXT_TAG",
    "PERSONA_TAG",
    "RECALL_TOOL",
    "SOURCE",
    "SemanticMemoryExtension",
    "SessionExtensions",
    "read_extensions_state",
    "strip_memory_context",
]

_log = logging.getLogger("agentmem.semantic")

MEMORY_CONTEXT_TAG = "memory-context"
PERSONA_TAG = "user-persona"
SOURCE = "agentmem.semantic"
"""The provenance every injected block carries (its ``source`` attribute)."""
RECALL_TOOL = "recall"
MAX_PREFETCH_K = 100
MAX_RECALL_LIMIT = 20
MAX_QUERY_CHARS = 2000
MEMORY_LINE_CHARS = 500
"""A remembered text longer than this is shortened in blocks (the store keeps it whole)."""
PERSONA_TOKENS = 400
"""Default token budget of the resident persona."""
PERSONA_SCAN = 100
"""Memories :meth:`SemanticMemoryExtension.persona_prompt` reads (newest first)."""

_BLOCK_RE = re.compile(
    rf"<{MEMORY_CONTEXT_TAG}\b[^>]*>.*?</{MEMORY_CONTEXT_TAG}\s*>", re.DOTALL | re.IGNORECASE
)
_STRAY_TAG_RE = re.compile(rf"</?{MEMORY_CONTEXT_TAG}\b[^>]*>", re.IGNORECASE)
_UNCLOSED_RE = re.compile(rf"<{MEMORY_CONTEXT_TAG}\b[^>]*>.*\Z", re.DOTALL | re.IGNORECASE)
_PERSONA_TAG_RE = re.compile(rf"</?{PERSONA_TAG}\b[^>]*>", re.IGNORECASE)
_EMPTY_REMINDER_RE = re.compile(r"<system-reminder>\s*</system-reminder>", re.IGNORECASE)

_RECALL_DESCRIPTION = (
    "Search what you remember about the user from earlier conversations (their "
    "preferences, facts they told you). Returns the best matching memories with ids."
)


def strip_memory_context(text: str) -> str:
    """``text`` without any ``<memory-context>`` block (recalled context is never re-captured).

    Removes whole blocks, an opening tag left unclosed (with everything after
    it), stray tags, and the empty ``<system-reminder>`` wrappers an Anthropic
    payload leaves around a removed block.
    """
    if MEMORY_CONTEXT_TAG not in text.lower():
        return text
    out = _BLOCK_RE.sub("", text)
    out = _UNCLOSED_RE.sub("", out)
    out = _STRAY_TAG_RE.sub("", out)
    return _EMPTY_REMINDER_RE.sub("", out)


def _line_text(text: str) -> str:
    """A remembered text as one safe line: no line breaks, no tags that close the block."""
    one_line = " ".join(_PERSONA_TAG_RE.sub("", strip_memory_context(text)).split())
    return truncate_text(one_line, MEMORY_LINE_CHARS, ellipsis=True)


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _check_threshold(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(f"threshold must be None or a finite number, got {value!r}")
    return float(value)


class SemanticMemoryExtension:
    """Captures the user's words and injects what was remembered (module docstring).

    Args:
        client: The :class:`~agentmem.protocols.MemoryClient` (local or mem0).
        user_id: Whose memories to read and write; ``agent_id`` and ``run_id``
            narrow the scope.
        prefetch_k: Memories injected per user turn (0 turns prefetch off).
        threshold: Minimum score of an injected or recalled memory (``None``:
            no minimum). Passed to the client and checked again here; with a
            threshold, a memory without a score is left out.
        infer: Passed to ``client.add`` (let the client's LLM extract facts).
        resident_persona: Put :meth:`persona_prompt` in the session's system
            prompt, computed once at session start.
        flush_timeout: Bound, in seconds, of the recorder's flush on close.
        maxsize: The recorder's queue size.
        persona_tokens: Token budget of the persona summary.
        name: What the session state calls this extension, so a resumed
            session knows which extension placed its persona and blocks
            (default ``"semantic:<user_id>"``, with ``/agent:<agent_id>`` and
            ``/run:<run_id>`` when set). Give two extensions of one session
            different names.

    Raises:
        ConfigurationError: a bad argument (the message names it).

    Attributes:
        recorder: The :class:`~agentmem.semantic.recorder.Recorder` that captures
            the user's words (closed by the session's ``close()``).
    """

    def __init__(
        self,
        client: MemoryClient,
        user_id: str,
        *,
        prefetch_k: int = 5,
        threshold: float | None = None,
        infer: bool = True,
        resident_persona: bool = True,
        flush_timeout: float = DEFAULT_FLUSH_TIMEOUT,
        agent_id: str | None = None,
        run_id: str | None = None,
        maxsize: int = DEFAULT_MAXSIZE,
        persona_tokens: int = PERSONA_TOKENS,
        name: str | None = None,
    ) -> None:
        self.client = check_client(client)
        self.user_id, self.agent_id, self.run_id = check_owner(user_id, agent_id, run_id)
        self.name = _check_name(name) if name is not None else self._default_name()
        if (
            isinstance(prefetch_k, bool)
            or not isinstance(prefetch_k, int)
            or not 0 <= prefetch_k <= MAX_PREFETCH_K
        ):
            raise ConfigurationError(
                f"prefetch_k must be an int from 0 to {MAX_PREFETCH_K}, got {prefetch_k!r}"
            )
        if isinstance(persona_tokens, bool) or not isinstance(persona_tokens, int):
            raise ConfigurationError(f"persona_tokens must be an int, got {persona_tokens!r}")
        if persona_tokens < 1:
            raise ConfigurationError(f"persona_tokens must be at least 1, got {persona_tokens!r}")
        self.prefetch_k = prefetch_k
        self.threshold = _check_threshold(threshold)
        check_flag("infer", infer)
        check_flag("resident_persona", resident_persona)
        self.infer = infer
        self.resident_persona = resident_persona
        self.flush_timeout = check_timeout("flush_timeout", flush_timeout)
        self.persona_tokens = persona_tokens
        self.maxsize = maxsize
        self.recorder = self._new_recorder()
        self._sessions = 0  # open sessions using this extension
        self._attach_lock = threading.Lock()

    def _default_name(self) -> str:
        name = f"semantic:{self.user_id}"
        if self.agent_id is not None:
            name += f"/agent:{self.agent_id}"
        if self.run_id is not None:
            name += f"/run:{self.run_id}"
        return name

    def _new_recorder(self) -> Recorder:
        return Recorder(
            self.client,
            user_id=self.user_id,
            agent_id=self.agent_id,
            run_id=self.run_id,
            infer=self.infer,
            maxsize=self.maxsize,
            flush_timeout=self.flush_timeout,
        )

    def _attach(self) -> None:
        """A session opened with this extension (one extension may serve many sessions).

        A recorder closed by an earlier session is replaced, so an extension
        kept per user keeps capturing in every later conversation.
        """
        with self._attach_lock:
            if self.recorder.closed:
                self.recorder = self._new_recorder()
            self._sessions += 1

    def _detach(self) -> CloseReport | None:
        """A session using this extension closed; the last one closes the recorder."""
        with self._attach_lock:
            self._sessions = max(self._sessions - 1, 0)
            if self._sessions:
                return None
        return self.recorder.close()

    # ------------------------------------------------------------------ per turn

    def on_user_message(self, text: str) -> str | None:
        """Capture the user's words (off the turn's path) and return the memories to inject.

        Args:
            text: What the user said in this turn (only that).

        Returns:
            A ``<memory-context>`` block of the top ``prefetch_k`` memories
            above the threshold, or ``None`` when nothing qualifies, prefetch
            is off, or the search failed (logged).

        Raises:
            InvalidArgumentError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidArgumentError(f"text must be a string, got {type(text).__name__}")
        words = strip_memory_context(text).strip()
        if not words:
            return None
        self.recorder.record(words)
        if self.prefetch_k == 0:
            return None
        try:
            records = self._search(words, self.prefetch_k)
        except Exception as exc:
            _log.warning(
                "semantic memory: prefetch for user %r failed, no memory context this turn: %r",
                self.user_id,
                exc,
            )
            return None
        return self.render_block(records)

    def _search(self, query: str, limit: int) -> list[MemoryRecord]:
        """The client's results, checked here: the scope, the threshold, the limit, no repeats."""
        found = self.client.search(
            query,
            user_id=self.user_id,
            agent_id=self.agent_id,
            run_id=self.run_id,
            limit=limit,
            threshold=self.threshold,
        )
        out: list[MemoryRecord] = []
        seen: set[str] = set()
        for record in cast("list[Any]", found):
            if not isinstance(record, MemoryRecord) or record.id in seen:
                continue
            if record.user_id is not None and record.user_id != self.user_id:
                continue
            if self.threshold is not None and (
                record.score is None or not record.score >= self.threshold
            ):
                continue
            if not record.memory.strip():
                continue
            seen.add(record.id)
            out.append(record)
            if len(out) >= limit:
                break
        return out

    def render_block(self, records: Sequence[MemoryRecord]) -> str | None:
        """The ``<memory-context>`` block for ``records`` (``None`` when there are none)."""
        if not records:
            return None
        lines = [
            f'<{MEMORY_CONTEXT_TAG} source="{SOURCE}" user_id="{_attr(self.user_id)}">',
            "Recalled from earlier conversations with this user (not said in this turn; "
            "use only what is relevant):",
        ]
        for record in records:
            score = f" score={record.score:.2f}" if record.score is not None else ""
            lines.append(f"- [id={_attr(record.id)}{score}] {_line_text(record.memory)}")
        lines.append(f"</{MEMORY_CONTEXT_TAG}>")
        return "\n".join(lines)

    # ------------------------------------------------------------------ persona

    def persona_prompt(
        self, token_counter: TokenCounter | None = None, max_tokens: int | None = None
    ) -> str:
        """A summary of what is remembered about the user, for the system prompt.

        The newest memories first, as many as fit ``max_tokens`` (default
        ``persona_tokens``) by ``token_counter`` (default: a heuristic
        counter); one that does not fit is left out and older ones are still
        tried. ``""`` when nothing is remembered or the client failed (logged).
        """
        counter = token_counter if token_counter is not None else HeuristicCounter()
        budget = self.persona_tokens if max_tokens is None else max_tokens
        try:
            records = self.client.get_all(
                user_id=self.user_id, agent_id=self.agent_id, run_id=self.run_id, limit=PERSONA_SCAN
            )
        except Exception as exc:
            _log.warning("semantic memory: persona for user %r not built: %r", self.user_id, exc)
            return ""
        head = (
            f'<{PERSONA_TAG} source="{SOURCE}" user_id="{_attr(self.user_id)}">\n'
            "What you know about the user from earlier conversations:"
        )
        lines: dict[str, None] = {}  # in order, each memory once
        for record in cast("list[Any]", records):  # a host's client may return anything
            if not isinstance(record, MemoryRecord):
                continue
            if record.user_id is not None and record.user_id != self.user_id:
                continue
            text = _line_text(record.memory)
            if text:
                lines.setdefault(f"- {text}")
        # A memory too long for what is left is skipped; shorter, older ones may still fit.
        items = ((None, line) for line in lines)
        return render_within(items, budget, counter, head=head, tail=f"</{PERSONA_TAG}>")

    # ------------------------------------------------------------------ recall tool

    def tool_schema(self, provider: str = "openai") -> dict[str, Any]:
        """The ``recall`` tool definition for ``provider``.

        ``"openai"`` (Chat Completions), ``"openai-responses"`` (a Responses
        function tool) or ``"anthropic"``.

        Raises:
            InvalidArgumentError: unknown provider.
        """
        parameters = {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARS,
                    "description": "What to look for, in plain words.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RECALL_LIMIT,
                    "description": "How many memories to return at most (default 5).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        }
        if provider == "openai":
            return {
                "type": "function",
                "function": {
                    "name": RECALL_TOOL,
                    "description": _RECALL_DESCRIPTION,
                    "parameters": parameters,
                },
            }
        if provider == "openai-responses":
            return {
                "type": "function",
                "name": RECALL_TOOL,
                "description": _RECALL_DESCRIPTION,
                "parameters": parameters,
            }
        if provider == "anthropic":
            return {
                "name": RECALL_TOOL,
                "description": _RECALL_DESCRIPTION,
                "input_schema": parameters,
            }
        raise InvalidArgumentError(
            f"unknown provider {provider!r}; expected 'openai', 'openai-responses' or 'anthropic'"
        )

    def handle_tool_call(self, name: str, arguments: object) -> str:
        """Run one ``recall`` call; the JSON text to send back as the tool result.

        ``arguments`` is the model's JSON text or an already-decoded mapping.
        Never raises for bad input or a failing client: the result is then
        ``{"ok": false, "error": "..."}``, which the model can read and act on.
        Otherwise ``{"ok": true, "memories": [{"id", "memory", "score"}, ...]}``.
        """
        if name != RECALL_TOOL:
            return _tool_error(f"unknown tool {name!r}; this handler answers {RECALL_TOOL!r}")
        if isinstance(arguments, str):
            decoded = decode_arguments(arguments)
            if decoded is None:
                return _tool_error("arguments are not a JSON object")
            arguments = decoded
        if not isinstance(arguments, Mapping):
            return _tool_error("arguments must be a JSON object")
        unknown = sorted(str(k) for k in arguments if k not in ("query", "limit"))
        if unknown:
            return _tool_error(f"unknown argument(s): {', '.join(unknown)}; use query and limit")
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _tool_error("query must be a non-empty string")
        if len(query) > MAX_QUERY_CHARS:
            return _tool_error(f"query must be at most {MAX_QUERY_CHARS} characters")
        limit = arguments.get("limit", self.prefetch_k or 5)
        if type(limit) is not int or not 1 <= limit <= MAX_RECALL_LIMIT:
            return _tool_error(f"limit must be an integer from 1 to {MAX_RECALL_LIMIT}")
        try:
            records = self._search(query, limit)
        except Exception as exc:
            _log.warning("semantic memory: recall for user %r failed: %r", self.user_id, exc)
            return _tool_error(f"recall failed: {exc}")
        return json.dumps(
            {
                "ok": True,
                "memories": [{"id": r.id, "memory": r.memory, "score": r.score} for r in records],
            },
            ensure_ascii=False,
        )

    def configure(
        self,
        tools: MutableMapping[str, Callable[[object], str]] | MutableSequence[dict[str, Any]],
        *,
        provider: str | None = None,
    ) -> None:
        """Register the ``recall`` tool with a host's tool registry.

        Args:
            tools: Either a mapping of tool name to handler (``recall`` is added
                as ``handler(arguments) -> str``), or a list of tool definitions
                (the ``recall`` definition is appended, in the format of the
                ones already there, else ``provider``'s).
            provider: ``"openai"``, ``"openai-responses"`` or ``"anthropic"``
                for a list (default: as the list's entries, else OpenAI Chat).

        Raises:
            ConfigurationError: a tool named ``recall`` is already registered, or
                ``tools`` is neither a mapping nor a list.
        """
        if isinstance(tools, MutableMapping):
            if RECALL_TOOL in tools:
                raise ConfigurationError(
                    f"a tool named {RECALL_TOOL!r} is already registered; "
                    "the semantic memory extension cannot add its own"
                )
            tools[RECALL_TOOL] = self._recall_handler
            return
        if isinstance(tools, MutableSequence):
            names = {_tool_name(spec) for spec in tools}
            if RECALL_TOOL in names:
                raise ConfigurationError(
                    f"a tool named {RECALL_TOOL!r} is already registered; "
                    "the semantic memory extension cannot add its own"
                )
            if provider is None:
                specs = [s for s in tools if isinstance(s, Mapping)]
                if any("input_schema" in s for s in specs):
                    provider = "anthropic"
                elif any(s.get("type") == "function" and "parameters" in s for s in specs):
                    provider = "openai-responses"  # a Responses function tool: no "function" key
                else:
                    provider = "openai"
            try:
                tools.append(self.tool_schema(provider))
            except InvalidArgumentError as exc:
                raise ConfigurationError(str(exc)) from exc
            return
        raise ConfigurationError(
            "tools must be a mapping of tool names to handlers or a list of tool definitions, "
            f"got {type(tools).__name__}"
        )

    def _recall_handler(self, arguments: object) -> str:
        return self.handle_tool_call(RECALL_TOOL, arguments)

    def close(self, timeout: float | None = None) -> CloseReport:
        """Close the recorder (bounded flush); see :meth:`Recorder.close`."""
        return self.recorder.close(timeout)

    def __repr__(self) -> str:
        return (
            f"SemanticMemoryExtension(name={self.name!r}, user_id={self.user_id!r}, "
            f"prefetch_k={self.prefetch_k}, threshold={self.threshold!r})"
        )


MAX_NAME_CHARS = 200


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise ConfigurationError(
            f"name must be a non-empty string of at most {MAX_NAME_CHARS} characters, got {name!r}"
        )
    return name


def _tool_error(text: str) -> str:
    return json.dumps({"ok": False, "error": text}, ensure_ascii=False)


def _tool_name(spec: Any) -> str | None:
    if not isinstance(spec, Mapping):
        return None
    function = spec.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return str(function["name"])
    name = spec.get("name")
    return name if isinstance(name, str) else None


def check_extensions(extensions: Any) -> tuple[SemanticMemoryExtension, ...]:
    """``extensions`` as a tuple, or ConfigurationError naming what is wrong."""
    if isinstance(extensions, str | bytes) or not isinstance(extensions, Sequence):
        raise ConfigurationError(
            f"extensions must be a sequence of SemanticMemoryExtension, got "
            f"{type(extensions).__name__}"
        )
    for i, ext in enumerate(extensions):
        if not isinstance(ext, SemanticMemoryExtension):
            raise ConfigurationError(
                f"extensions[{i}] must be a SemanticMemoryExtension, got {type(ext).__name__}"
            )
        if any(other is ext for other in extensions[:i]):
            raise ConfigurationError(f"extensions[{i}] is given twice (it would capture twice)")
        if any(other.name == ext.name for other in extensions[:i]):
            raise ConfigurationError(
                f"extensions[{i}] has the name {ext.name!r} of an earlier extension; "
                "give each extension of a session its own name"
            )
    return tuple(extensions)


class SessionExtensions:
    """What one session keeps for its extensions (used by the facade).

    * :attr:`persona`: the resident personas, computed once when the session
      is created, so the system prompt stays the same (cacheable) all session.
    * the block of each user turn started with ``start_task``: kept next to
      the stored user message (never in the durable history itself) and
      placed right after it in every payload while that message is in the
      window, so a new turn never rewrites an earlier part of the payload.

    Both are saved in the session state (:meth:`state`, format in
    :mod:`agentmem.semantic._resume`) and restored from it on resume, so a
    resumed session's payload is the one it would have had without the
    close: the personas as they were placed, every old turn with its block.
    An extension the session was created with but not given on resume is
    named in a warning; what it placed is left out of the payload and kept
    in the state for an open that has it again.

    Args:
        extensions: The session's extensions.
        token_counter: The session's counter (persona budget).
        persona_budget: Most tokens the personas may take together.
        stored: The session state's ``extensions`` part (``None``: none saved).
        history: The session's messages (to find the stored turns again).
        session_id: Named in log messages.
    """

    def __init__(
        self,
        extensions: Sequence[SemanticMemoryExtension],
        *,
        token_counter: TokenCounter,
        persona_budget: int,
        stored: Any = None,
        history: Sequence[Message] = (),
        session_id: str = "",
    ) -> None:
        self.extensions = tuple(extensions)
        self._names = {ext.name for ext in self.extensions}
        self._session_id = session_id
        previous = self._read(stored)
        for ext in self.extensions:
            ext._attach()
        # id(user message) -> (message, its payload note or None, every stored block)
        self._turns: dict[int, tuple[Message, Message | None, Blocks]] = {}
        self._tuple: tuple[tuple[Message, Message], ...] = ()
        self._personas: dict[str, str | None] = {}
        left = persona_budget
        for ext in self.extensions:
            text: str | None
            if previous is not None and previous.personas.get(ext.name) is not None:
                text = previous.personas[ext.name]  # as the session was created with it
            elif not ext.resident_persona:
                text = None
            elif left <= 0:
                text = ""
            else:
                text = ext.persona_prompt(token_counter, min(ext.persona_tokens, left))
            if text:
                left -= token_counter.count_text(text)
            self._personas[ext.name] = text
        self.persona = "\n\n".join(t for t in self._personas.values() if t)
        if previous is not None:
            absent = [n for n in previous.personas if n not in self._names]
            for name in absent:  # kept for an open that has it again
                self._personas[name] = previous.personas[name]
            if absent:
                _log.warning(
                    "session %s was created with the semantic memory extension(s) %s, not "
                    "given now: their persona and memory-context blocks are left out of the "
                    "payload (kept in the session state; pass the extension to restore them)",
                    session_id,
                    ", ".join(repr(n) for n in absent),
                )
            self._restore_turns(previous.turns, history)

    def _read(self, stored: Any) -> StoredExtensions | None:
        if not stored:
            return None
        try:
            return read_extensions_state(stored)
        except AgentMemError as exc:
            _log.warning(
                "session %s: semantic memory state not restored, personas are computed "
                "afresh and old turns have no memory-context blocks (%s)",
                self._session_id,
                exc,
            )
            return None

    def _restore_turns(self, turns: Sequence[StoredTurn], history: Sequence[Message]) -> None:
        """Attach each stored turn's blocks to its user message again (newest first, so
        the scan stops as soon as every turn, all of them in the window, is found)."""
        wanted = {t.key: t for t in turns}
        found: list[tuple[Message, Blocks]] = []
        for i in range(len(history) - 1, -1, -1):
            if not wanted:
                break
            message = history[i]
            if message.get("role") != "user":
                continue
            key = turn_key(message)
            turn = wanted.pop(key, None) if key is not None else None
            if turn is not None:
                found.append((message, turn.blocks))
        for message, blocks in reversed(found):
            self._add(message, blocks)

    def _add(self, message: Message, blocks: Blocks) -> bool:
        """Keep ``blocks`` for ``message``; its note holds those of this open's extensions."""
        placed = [block for name, block in blocks if name in self._names]
        note: Message | None = (
            {"role": "system", "content": "\n\n".join(placed)} if placed else None
        )
        self._turns[id(message)] = (message, note, blocks)
        self._tuple = tuple((m, n) for m, n, _ in self._turns.values() if n is not None)
        return note is not None

    def on_user_turn(self, stored: Message) -> bool:
        """Prefetch and capture for a user turn just stored (its words only).

        Returns:
            Whether the turn got a block (then the session state changed).
        """
        if not self.extensions or not is_real_user(stored):
            return False
        text = message_text(stored)
        blocks = tuple(
            (ext.name, block)
            for ext in self.extensions
            if (block := ext.on_user_message(text)) is not None and block
        )
        if not blocks:
            return False
        return self._add(stored, blocks)

    def notes(self) -> tuple[tuple[Message, Message], ...]:
        """``(user message, block message)`` pairs for the context manager."""
        return self._tuple

    def keep_only(self, alive: Callable[[Message], bool]) -> None:
        """Forget the blocks of user turns that left the window (after a trim)."""
        if not self._turns:
            return
        self._turns = {k: v for k, v in self._turns.items() if alive(v[0])}
        self._tuple = tuple((m, n) for m, n, _ in self._turns.values() if n is not None)

    def state(self) -> dict[str, Any] | None:
        """The session state's ``extensions`` part (``None``: nothing to remember)."""
        if not self._personas and not self._turns:
            return None
        return extensions_state(
            self._personas, [(message, blocks) for message, _, blocks in self._turns.values()]
        )

    def close(self) -> list[CloseReport]:
        """Close the recorders no other open session uses (each flush bounded by its
        ``flush_timeout``); returns their reports."""
        reports = []
        for ext in self.extensions:
            try:
                report = ext._detach()
            except Exception:  # a close must release the session whatever happens here
                _log.exception("semantic memory: closing the recorder of %r failed", ext)
                continue
            if report is not None:
                reports.append(report)
        return reports
