"""The fork's first request: the task's last request, continued.

Provider prompt caches key on the exact start of a request: the tool
schemas, then the system prompt, then the messages. The memory update runs
right after the task's last model call, so when its first request *starts
with that call's request unchanged* -- same tools, same system prompt, same
messages -- the provider serves the whole task from its cache and only the
new turns are paid in full. This module makes that request:

* :class:`TaskRequest` is the task's last request as the session sent it:
  the canonical messages behind the payload ``context()`` returned
  (:attr:`~agentmem.context.ContextBuild.messages`), whether the OpenAI
  rendering padded ``reasoning_content``, the messages the task added after
  it (its final answer, say) and the host's tool schemas.
  :func:`continued_request` makes one from the session's newest build, or
  says why the task's request cannot be continued (none was built, or the
  history was rewritten since: an undo, a deletion).
* :func:`plan` lays out the fork: the *prefix* (the last payload, rendered
  exactly as ``context()`` rendered it), then the *rest* (the messages added
  since, the memory-update instructions as a system message, and the user
  turn ``"Please proceed."``), the tools (the host's, unchanged, when they
  carry the three update tools; else the three update tools, which is a
  cache miss) and the tokens both requests share.
* When the prefix plus the new messages would not leave the update room in
  the window, or there is no request to continue, the fork starts from a
  payload rebuilt by the session's own context pipeline on a *scratch copy*
  of its window and archive (:func:`rebuild_request`): the same three-stage
  trim, with the window reduced by what the update adds, and the session's
  window, archive, checkpoint and state untouched. Nothing is shared then,
  and the result says why.

The fork never edits the prefix: the instructions are a new message, not an
addition to the system prompt, and repair runs on the new messages only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from agentmem._tool_specs import count_tools, provider_tools, tools_json
from agentmem.context import ContextBuild, ContextManager, ContextSettings
from agentmem.errors import ContextOverflowError, InvalidArgumentError
from agentmem.history import MessageHistory
from agentmem.memory_updater._tools import TOOL_NAMES
from agentmem.messages import Message, is_responses_only
from agentmem.protocols import Summarizer, TokenCounter
from agentmem.repair import build_payload, openai_view, select_task_chain
from agentmem.stm import ShortTermMemory
from agentmem.tokens import REPLY_PRIMING_TOKENS, count_message
from agentmem.tools import TOOL_NAME as MEMORY_TOOL
from agentmem.tools import TOPIC_OPERATIONS
from agentmem.yarn import YaRN

__all__ = [
    "Fork",
    "TaskRequest",
    "arebuild_request",
    "check_tools",
    "choose_tools",
    "continued_request",
    "fork_args",
    "plan",
    "rebuild_request",
    "tools_tokens",
]

_MIN_WINDOW = 256  # ContextSettings.context_window's lower bound


@dataclass(frozen=True, kw_only=True)
class TaskRequest:
    """The task's last request, as the session sent it: what the fork continues."""

    messages: tuple[Message, ...]
    """Canonical messages behind the payload (:attr:`ContextBuild.messages`); not modified."""
    pad_reasoning: bool = False
    """The OpenAI rendering gave every assistant message a ``reasoning_content``."""
    after: tuple[Message, ...] = ()
    """Canonical messages the task added after that request (its final answer, ...)."""


def check_tools(tools: object) -> None:
    """Raise :class:`InvalidArgumentError` unless ``tools`` is ``None`` or a list of tool specs."""
    if tools is None:
        return
    if (
        isinstance(tools, str | bytes | Mapping)
        or not isinstance(tools, Sequence)
        or not all(isinstance(spec, Mapping) for spec in tools)
    ):
        raise InvalidArgumentError(
            f"tools must be None or a list of OpenAI tool specs (dicts), got {type(tools).__name__}"
        )


def _has_reasoning(msg: Mapping[str, Any]) -> bool:
    return msg.get("role") == "assistant" and msg.get("reasoning_content") is not None


def _padded(build: ContextBuild) -> bool:
    """Whether ``build``'s OpenAI rendering padded ``reasoning_content`` (as ``_render`` does)."""
    if any(_has_reasoning(m) for m in build.messages):
        return True
    payload = build.payload
    # force_reasoning_content_pad leaves its trace on the returned list only.
    return isinstance(payload, list) and any(
        isinstance(m, Mapping) and m.get("role") == "assistant" and "reasoning_content" in m
        for m in payload
    )


def continued_request(
    build: ContextBuild | None,
    history: MessageHistory,
    *,
    sent_length: int,
    sent_revision: int,
    task_chain: Collection[int] | None,
) -> TaskRequest | str:
    """The session's newest build as a :class:`TaskRequest`, or why it cannot be continued.

    Args:
        build: The context manager's newest build (``None``: none yet).
        history: The session's history.
        sent_length: ``len(history)`` when ``build`` was made.
        sent_revision: ``history.revision`` when ``build`` was made.
        task_chain: The active task chain (messages added since of other tasks are left out).
    """
    if build is None:
        return "the task made no request through context()"
    if history.revision != sent_revision or len(history) < sent_length:
        return "the history was rewritten (undo, deletion) after the task's last request"
    after = tuple(select_task_chain(history[sent_length:], task_chain))
    return TaskRequest(
        messages=tuple(build.messages),
        pad_reasoning=_padded(build),
        after=after,
    )


def render_prefix(request: TaskRequest) -> list[dict[str, Any]]:
    """The payload ``context(provider="openai")`` returned for ``request`` (a fresh copy)."""
    out = []
    for msg in request.messages:
        if is_responses_only(msg):
            continue  # context(provider="openai") leaves these out too
        view = openai_view(msg)
        if request.pad_reasoning and msg["role"] == "assistant" and "reasoning_content" not in view:
            view["reasoning_content"] = ""
        out.append(view)
    copied = orjson.loads(orjson.dumps(out))
    assert isinstance(copied, list)
    return copied


def tools_tokens(tools: Sequence[Mapping[str, Any]] | None, counter: TokenCounter) -> int:
    """Tokens the (OpenAI-shape) tool schemas cost a request: the window's one rule
    (:func:`agentmem._tool_specs.count_tools`: compact JSON plus per-tool framing)."""
    specs = provider_tools(tools, "openai")
    return count_tools(tools_json(specs), len(specs), counter, "openai")


def _functions(tools: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The function specs of ``tools`` by name."""
    out: dict[str, Mapping[str, Any]] = {}
    for spec in tools:
        function = spec.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and isinstance(function, Mapping):
            out[name] = function
    return out


def _topic_operations(function: Mapping[str, Any] | None) -> bool:
    """Whether a ``memory_operations`` spec offers the three topic operations."""
    params = function.get("parameters") if function is not None else None
    props = params.get("properties") if isinstance(params, Mapping) else None
    operation = props.get("operation") if isinstance(props, Mapping) else None
    enum = operation.get("enum") if isinstance(operation, Mapping) else None
    return isinstance(enum, list) and all(op in enum for op in TOPIC_OPERATIONS)


def choose_tools(
    host: Sequence[Mapping[str, Any]] | None, update_specs: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None, bool]:
    """The fork's tools, why they are not the host's (a cache miss) or ``None``, and
    whether the update goes through ``memory_operations``' topic operations.

    The host's tools are kept, unchanged, when they include ``list_memories``,
    ``read_memory`` and ``write_memory``, or a ``memory_operations`` tool with
    the topic operations (:data:`agentmem.tools.TOPIC_OPERATIONS`).
    """
    if host is None:
        miss = "the task's request sent no tools; the fork sends the update tools"
        return update_specs, miss, False
    functions = _functions(host)
    missing = [n for n in TOOL_NAMES if n not in functions]
    via_memory_tool = bool(missing) and _topic_operations(functions.get(MEMORY_TOOL))
    if missing and not via_memory_tool:
        return (
            update_specs,
            (
                f"the task's tools lack {', '.join(missing)} (and a {MEMORY_TOOL} tool with "
                f"{', '.join(TOPIC_OPERATIONS)}); the fork sends the three update tools instead"
            ),
            False,
        )
    copied = orjson.loads(orjson.dumps(list(host)))
    assert isinstance(copied, list)
    return copied, None, via_memory_tool


@dataclass
class Fork:
    """The fork's conversation: the prefix sent unchanged, and the rest that grows."""

    prefix: list[dict[str, Any]]
    """OpenAI messages sent first in every request, never modified."""
    rest: list[Message]
    """Canonical messages after the prefix (repaired and rendered per request)."""
    tools: list[dict[str, Any]]
    via_memory_tool: bool = False
    """The update's tools are ``memory_operations``' topic operations."""
    pad_reasoning: bool = False
    shared_messages: int = 0
    shared_tokens: int = 0
    misses: list[str] = field(default_factory=list)

    def payload(self) -> list[dict[str, Any]]:
        """The next request's messages: the prefix, then the rest repaired and rendered."""
        prefix = orjson.loads(orjson.dumps(self.prefix))
        assert isinstance(prefix, list)
        tail = build_payload(self.rest, force_reasoning_content_pad=self.pad_reasoning)
        return [*prefix, *tail]

    def tokens(self, counter: TokenCounter) -> int:
        """Tokens of the next request: messages, reply priming and tool schemas."""
        return (
            sum(count_message(m, counter) for m in self.payload())
            + REPLY_PRIMING_TOKENS
            + tools_tokens(self.tools, counter)
        )

    @property
    def miss(self) -> str | None:
        return "; ".join(self.misses) if self.misses else None


def plan(
    request: TaskRequest,
    new: Callable[[bool], Sequence[Message]],
    *,
    host_tools: Sequence[Mapping[str, Any]] | None,
    update_specs: list[dict[str, Any]],
    counter: TokenCounter,
    shared: bool,
) -> Fork:
    """The fork of ``request`` with ``new(via_memory_tool)`` (instructions, "Please
    proceed.") after it.

    ``host_tools``: the tool specs the task's request was sent with. ``shared``:
    ``request`` is the task's own last request (not a rebuild), so the prefix counts
    as shared when the tools are the host's too.
    """
    tools, tools_miss, via_memory_tool = choose_tools(host_tools, update_specs)
    prefix = render_prefix(request)
    fork = Fork(
        prefix=prefix,
        rest=[dict(m) for m in (*request.after, *new(via_memory_tool))],
        tools=tools,
        via_memory_tool=via_memory_tool,
        pad_reasoning=request.pad_reasoning,
    )
    if tools_miss is not None:
        fork.misses.append(tools_miss)
    if shared and tools_miss is None:
        fork.shared_messages = len(prefix)
        fork.shared_tokens = sum(count_message(m, counter) for m in prefix)
    return fork


def _scratch(
    manager: ContextManager, summarizer: Summarizer | None, reserve: int
) -> ContextManager:
    """A manager over copies of ``manager``'s window and archive, ``reserve`` tokens smaller.

    Its trims move the copies only: the session's window, summary and state stay
    as they are, and no checkpoint is written.
    """
    settings = manager.settings
    size = settings.context_window - reserve
    if size < _MIN_WINDOW:
        raise ContextOverflowError(
            f"the memory update needs {reserve} tokens beside the conversation, which leaves "
            f"{size} of the {settings.context_window}-token window (at least {_MIN_WINDOW} needed)",
            needed=reserve + _MIN_WINDOW,
            window=settings.context_window,
        )
    window = manager.window
    if window is None:
        raise ContextOverflowError(
            "the context manager has no window to rebuild from",
            needed=reserve,
            window=settings.context_window,
        )
    copy = ShortTermMemory(window.history)
    copy.restore(window.state())
    yarn = manager.yarn
    yarn_copy = (
        YaRN.from_state(yarn.state(), summarizer=summarizer, main_thread=window.history)
        if yarn is not None
        else None
    )
    scratch_settings = ContextSettings(**{**settings.model_dump(), "context_window": size})
    return ContextManager(scratch_settings, window=copy, yarn=yarn_copy)


def _rebuilt(build: ContextBuild) -> TaskRequest:
    return TaskRequest(messages=tuple(build.messages), pad_reasoning=_padded(build))


def rebuild_request(
    manager: ContextManager,
    summarizer: Summarizer | None,
    reserve: int,
    build_args: Mapping[str, Any],
) -> TaskRequest:
    """The task's payload rebuilt by ``manager``'s pipeline with ``reserve`` tokens kept free.

    Args:
        manager: The session's context manager (its window and archive are copied, not moved).
        summarizer: The summarizer a trim's compression uses (sync here).
        reserve: Tokens of the window the update needs beside the payload.
        build_args: Keyword arguments of the session's builds (injections, task chain,
            turn notes, ...); ``provider`` is forced to ``"openai"`` and ``attempt`` to 0.

    Raises:
        ContextOverflowError: the window minus ``reserve`` cannot hold a payload.
    """
    args = {**build_args, "provider": "openai", "attempt": 0}
    return _rebuilt(_scratch(manager, summarizer, reserve).build_result(**args))


async def arebuild_request(
    manager: ContextManager,
    summarizer: Summarizer | None,
    reserve: int,
    build_args: Mapping[str, Any],
) -> TaskRequest:
    """The async twin of :func:`rebuild_request` (a trim awaits an async summarizer)."""
    args = {**build_args, "provider": "openai", "attempt": 0}
    return _rebuilt(await _scratch(manager, summarizer, reserve).abuild_result(**args))


def fork_args(
    manager: ContextManager,
    sent: tuple[int, int],
    task_chain: Collection[int] | None,
    summarizer: Summarizer | None,
    build_args: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    asynchronous: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of :meth:`MemoryUpdater.run` (or ``arun``) for a session.

    Args:
        manager: The session's context manager (its newest build is the task's request).
        sent: ``(len(history), history.revision)`` when that build was made.
        task_chain: The active task chain.
        summarizer: What a rebuild's trims summarize with.
        build_args: The keyword arguments of the session's builds.
        tools: The tool specs the host sent with the task's last request.
        asynchronous: Rebuild with the async pipeline (for ``arun``).
    """
    if manager.window is None:
        request: TaskRequest | str = "the context manager has no window"
    else:
        request = continued_request(
            manager.last_build,
            manager.window.history,
            sent_length=sent[0],
            sent_revision=sent[1],
            task_chain=task_chain,
        )
    rebuild = arebuild_request if asynchronous else rebuild_request
    return {
        "task_chain": task_chain,
        "request": request,
        "tools": tools,
        "rebuild": partial(rebuild, manager, summarizer, build_args=build_args),
    }
