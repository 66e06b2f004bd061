"""The memory update's tools and words: the three tool specs, the instructions, replies.

Private to :mod:`agentmem.memory_updater`, which re-exports :func:`tool_specs`,
:func:`instructions` and :data:`TOOL_NAMES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentmem._json import encode_arguments, parse_arguments
from agentmem.errors import AgentMemError

__all__ = [
    "PROCEED",
    "TOOL_NAMES",
    "BadArgument",
    "assistant_message",
    "instructions",
    "string_arg",
    "tool_specs",
]

PROCEED = "Please proceed."
TOOL_NAMES = ("list_memories", "read_memory", "write_memory")


def tool_specs() -> list[dict[str, Any]]:
    """The updater's three tools as OpenAI function tool specs (fresh copies)."""
    topic = {
        "type": "string",
        "description": "Topic name, e.g. 'deploy' (file memories/<topic>.md): "
        "letters, digits, '-', '_'; no '/' or '..'.",
    }
    return [
        {
            "type": "function",
            "function": {
                "name": "list_memories",
                "description": "List the existing topic files with their size and last update.",
                "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "read_memory",
                "description": "Read the whole content of one topic file.",
                "parameters": {
                    "type": "object",
                    "properties": {"topic": topic},
                    "required": ["topic"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "write_memory",
                "description": "Create or replace a topic file with the complete new content "
                "(markdown). Replaces the whole file: include what should be kept.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "topic": topic,
                        "content": {"type": "string", "description": "The full file content."},
                    },
                    "required": ["topic", "content"],
                    "additionalProperties": False,
                },
            },
        },
    ]


def instructions(
    max_tokens_per_file: int, existing: Sequence[str] = (), *, via_memory_tool: bool = False
) -> str:
    """The memory-update instructions: the system message after the task's conversation.

    ``via_memory_tool``: the update works through ``memory_operations``' topic
    operations (the host's tool) instead of the three update tools.
    """
    known = ", ".join(existing) if existing else "(none yet)"
    if via_memory_tool:
        tools = (
            "Use only the memory_operations tool's topic operations: list_topics, "
            "read_topic (topic) and write_topic (topic, content); its other operations and "
            "the task's other tools do not run now."
        )
        read, write = "read_topic", "write_topic"
    else:
        tools = (
            "Use only these three tools: list_memories(), read_memory(topic) and "
            "write_memory(topic, content); the task's other tools do not run now."
        )
        read, write = "read_memory", "write_memory"
    return "\n".join(
        [
            "# Memory update",
            "The task above is finished. Before the session moves on, consolidate what it "
            f"taught you into the project's topic files, so later sessions can reuse it. {tools}",
            "1. Decide the topics the task's lasting knowledge belongs to (for example "
            "deploy, testing, architecture, conventions, user-preferences): facts about the "
            "project, commands that worked, pitfalls and their fixes, decisions and the "
            "user's preferences. Leave out one-off details, secrets and what the code "
            "already says plainly.",
            "2. Choose which files to update and which to create: read a related existing "
            f"topic with {read} before writing it; prefer updating it over creating a "
            "near-duplicate.",
            "3. Merge: keep what is still true, add the new knowledge, correct what the task "
            f"proved wrong, remove duplicates. {write} replaces the whole file, so write "
            "the complete merged content.",
            f"4. Each topic file is limited to {max_tokens_per_file} tokens (about "
            f"{max_tokens_per_file * 4} characters). When the merged content would exceed "
            "it, drop the least useful or most outdated details first; anything beyond the "
            "limit is cut off the end of the file.",
            "5. Topic names are short and lowercase: letters, digits, '-' and '_'.",
            "6. If nothing is worth remembering, write nothing. When you are done, answer "
            "in one short line, without calling a tool.",
            f"Existing topics: {known}.",
        ]
    )


def assistant_message(
    reply: Mapping[str, Any], iteration: int
) -> tuple[dict[str, Any], list[tuple[str, str, dict[str, Any] | str]]]:
    """The reply as a storable assistant message, and its calls ``(id, name, args or error)``.

    Calls whose arguments cannot be decoded are kept with ``{}`` arguments, so the
    conversation stays valid and the model is told what was wrong.
    """
    calls: list[tuple[str, str, dict[str, Any] | str]] = []
    stored: list[dict[str, Any]] = []
    for index, call in enumerate(reply.get("tool_calls") or ()):
        function = call.get("function") if isinstance(call, Mapping) else None
        function = function if isinstance(function, Mapping) else {}
        call_id = call.get("id") if isinstance(call, Mapping) else None
        if not isinstance(call_id, str) or not call_id:
            call_id = f"memory_update_{iteration}_{index}"
        name = function.get("name")
        name = name if isinstance(name, str) and name else "unnamed"
        raw = function.get("arguments")
        args: dict[str, Any] | str
        text = "{}"
        if isinstance(raw, Mapping):
            args = {str(k): v for k, v in raw.items()}
            text = encode_arguments(args)
        elif raw is None or isinstance(raw, str):
            try:
                parsed = parse_arguments(raw or "")
                args, text = parsed.value, parsed.text
            except AgentMemError as exc:
                args = f"the arguments are not a JSON object: {exc}"
        else:
            args = f"the arguments must be a JSON object, got {type(raw).__name__}"
        stored.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
        )
        calls.append((call_id, name, args))
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if stored:
        message["tool_calls"] = stored
    elif not message["content"]:
        message["content"] = ""
    return message, calls


class BadArgument(Exception):
    pass


def string_arg(args: Mapping[str, Any], name: str, allowed: set[str]) -> str:
    extra = sorted(set(args) - allowed)
    if extra:
        raise BadArgument(f"unexpected argument(s) {', '.join(extra)}")
    value = args.get(name)
    if not isinstance(value, str):
        got = "missing" if name not in args else f"a {type(value).__name__}"
        raise BadArgument(f"argument {name!r} must be a string ({got})")
    return value
