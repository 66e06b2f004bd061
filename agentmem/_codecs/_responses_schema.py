"""What the OpenAI Responses input items look like: the tables the Responses codec reads.

Transcribed from the SDK's request types (``openai.types.responses
.ResponseInputItemParam`` and the types it names, openai 3.57): for each item
``type``, the keys it may carry and the ones it must; the content part types
and their keys. :mod:`agentmem._codecs.responses` converts with them; the SDK
itself is never imported (it is an optional extra).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CALLS",
    "IDLESS",
    "IMAGE_DETAILS",
    "INPUT_PARTS",
    "ITEMS_FIELD",
    "ITEM_FIELDS",
    "ITEM_KEYS",
    "MESSAGE_ROLES",
    "NAME_RE",
    "OPAQUE_ASSISTANT",
    "OPAQUE_CLIENT",
    "OUTPUTS",
    "OUTPUT_PARTS",
    "PART_KEYS",
    "REQUIRED",
    "RESPONSES_ITEM_TYPES",
    "Spec",
    "is_opaque",
    "is_responses_only",
    "item_type",
    "part_type",
]

# A client call -> (the type of its output item, the output's key holding the call id).
CALLS: Final[Mapping[str, tuple[str, str]]] = {
    "function_call": ("function_call_output", "call_id"),
    "custom_tool_call": ("custom_tool_call_output", "call_id"),
    "computer_call": ("computer_call_output", "call_id"),
    "local_shell_call": ("local_shell_call_output", "id"),
    "shell_call": ("shell_call_output", "call_id"),
    "apply_patch_call": ("apply_patch_call_output", "call_id"),
}
OUTPUTS: Final[Mapping[str, str]] = dict(CALLS.values())
OPAQUE_ASSISTANT: Final = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "tool_search_call",
        "tool_search_output",
        "compaction",
        "program",
        "program_output",
    }
)
OPAQUE_CLIENT: Final = frozenset(
    {
        "mcp_approval_response",
        "item_reference",
        "compaction_trigger",
        "additional_tools",
        "configuration_update",
    }
)

Spec = str | frozenset[str]
"""What a field holds: ``"str"``, ``"bool"``, ``"int"``, ``"list"``, ``"dict"``,
``"str|list"``, ``"any"``, or the set of the strings it may be (a ``Literal``)."""

# For each item type but "message" (handled apart): its fields and what they hold, and
# the ones it must carry (openai.types.responses.ResponseInputItemParam, openai 3.57).
# Nested objects (an action, a tool list) are checked as objects or lists only.
ITEM_FIELDS: Final[Mapping[str, Mapping[str, Spec]]] = {
    "file_search_call": {
        "id": "str",
        "queries": "list",
        "results": "list",
        "status": frozenset({"completed", "failed", "in_progress", "incomplete", "searching"}),
    },
    "computer_call": {
        "action": "dict",
        "actions": "list",
        "call_id": "str",
        "id": "str",
        "pending_safety_checks": "list",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "computer_call_output": {
        "acknowledged_safety_checks": "list",
        "call_id": "str",
        "id": "str",
        "output": "dict",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "web_search_call": {
        "action": "dict",
        "id": "str",
        "status": frozenset({"completed", "failed", "in_progress", "incomplete", "searching"}),
    },
    "function_call": {
        "arguments": "str",
        "async": "bool",
        "call_id": "str",
        "caller": "dict",
        "id": "str",
        "name": "str",
        "namespace": "str",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "function_call_output": {
        "call_id": "str",
        "caller": "dict",
        "id": "str",
        "name": "str",
        "namespace": "str",
        "output": "str|list",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "tool_search_call": {
        "arguments": "any",
        "call_id": "str",
        "execution": frozenset({"client", "server"}),
        "id": "str",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "tool_search_output": {
        "call_id": "str",
        "execution": frozenset({"client", "server"}),
        "id": "str",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
        "tools": "list",
    },
    "additional_tools": {
        "id": "str",
        "role": frozenset({"developer"}),
        "tools": "list",
    },
    "configuration_update": {
        "id": "str",
        "reasoning": "dict",
        "text": "dict",
    },
    "reasoning": {
        "content": "list",
        "encrypted_content": "str",
        "id": "str",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
        "summary": "list",
    },
    "compaction": {
        "encrypted_content": "str",
        "id": "str",
    },
    "image_generation_call": {
        "action": frozenset({"auto", "edit", "generate"}),
        "background": frozenset({"auto", "opaque", "transparent"}),
        "error": "dict",
        "id": "str",
        "output_format": frozenset({"gif", "jpeg", "png", "svg", "webp"}),
        "quality": frozenset({"auto", "high", "low", "max", "medium", "xhigh"}),
        "result": "str",
        "revised_prompt": "str",
        "size": "str",
        "status": frozenset({"completed", "failed", "generating", "in_progress"}),
        "svg_usage": "dict",
    },
    "code_interpreter_call": {
        "code": "str",
        "container_id": "str",
        "id": "str",
        "outputs": "list",
        "status": frozenset({"completed", "failed", "in_progress", "incomplete", "interpreting"}),
    },
    "local_shell_call": {
        "action": "dict",
        "call_id": "str",
        "id": "str",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "local_shell_call_output": {
        "id": "str",
        "output": "str",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "shell_call": {
        "action": "dict",
        "call_id": "str",
        "caller": "dict",
        "environment": "dict",
        "id": "str",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "shell_call_output": {
        "call_id": "str",
        "caller": "dict",
        "id": "str",
        "max_output_length": "int",
        "output": "list",
        "status": frozenset({"completed", "in_progress", "incomplete"}),
    },
    "apply_patch_call": {
        "call_id": "str",
        "caller": "dict",
        "id": "str",
        "operation": "dict",
        "status": frozenset({"completed", "in_progress"}),
    },
    "apply_patch_call_output": {
        "call_id": "str",
        "caller": "dict",
        "id": "str",
        "output": "str",
        "status": frozenset({"completed", "failed"}),
    },
    "mcp_list_tools": {
        "error": "str",
        "id": "str",
        "server_label": "str",
        "tools": "list",
    },
    "mcp_approval_request": {
        "arguments": "str",
        "id": "str",
        "name": "str",
        "server_label": "str",
    },
    "mcp_approval_response": {
        "approval_request_id": "str",
        "approve": "bool",
        "id": "str",
        "reason": "str",
    },
    "mcp_call": {
        "approval_request_id": "str",
        "arguments": "str",
        "error": "dict",
        "id": "str",
        "name": "str",
        "output": "str",
        "server_label": "str",
        "status": frozenset({"calling", "completed", "failed", "in_progress", "incomplete"}),
    },
    "custom_tool_call_output": {
        "call_id": "str",
        "caller": "dict",
        "id": "str",
        "output": "str|list",
    },
    "custom_tool_call": {
        "async": "bool",
        "call_id": "str",
        "caller": "dict",
        "id": "str",
        "input": "str",
        "name": "str",
        "namespace": "str",
    },
    "compaction_trigger": {
        "id": "str",
    },
    "item_reference": {
        "id": "str",
    },
    "program": {
        "call_id": "str",
        "code": "str",
        "fingerprint": "str",
        "id": "str",
    },
    "program_output": {
        "call_id": "str",
        "id": "str",
        "result": "str",
        "status": frozenset({"completed", "incomplete"}),
    },
}
REQUIRED: Final[Mapping[str, tuple[str, ...]]] = {
    "file_search_call": ("id", "queries", "status"),
    "computer_call": ("call_id", "id", "pending_safety_checks", "status"),
    "computer_call_output": ("call_id", "output"),
    "web_search_call": ("action", "id", "status"),
    "function_call": ("arguments", "call_id", "name"),
    "function_call_output": ("output",),
    "tool_search_call": ("arguments",),
    "tool_search_output": ("tools",),
    "additional_tools": ("role", "tools"),
    "configuration_update": (),
    "reasoning": ("id", "summary"),
    "compaction": ("encrypted_content",),
    "image_generation_call": ("id", "result", "status"),
    "code_interpreter_call": ("code", "container_id", "id", "outputs", "status"),
    "local_shell_call": ("action", "call_id", "id", "status"),
    "local_shell_call_output": ("id", "output"),
    "shell_call": ("action", "call_id"),
    "shell_call_output": ("call_id", "output"),
    "apply_patch_call": ("call_id", "operation", "status"),
    "apply_patch_call_output": ("call_id", "status"),
    "mcp_list_tools": ("id", "server_label", "tools"),
    "mcp_approval_request": ("arguments", "id", "name", "server_label"),
    "mcp_approval_response": ("approval_request_id", "approve"),
    "mcp_call": ("arguments", "id", "name", "server_label"),
    "custom_tool_call_output": ("call_id", "output"),
    "custom_tool_call": ("call_id", "input", "name"),
    "compaction_trigger": (),
    "item_reference": ("id",),
    "program": ("call_id", "code", "fingerprint", "id"),
    "program_output": ("call_id", "id", "result", "status"),
}

ITEM_KEYS: Final[Mapping[str, tuple[frozenset[str], tuple[str, ...]]]] = {
    kind: (frozenset(fields), REQUIRED[kind]) for kind, fields in ITEM_FIELDS.items()
}
"""For each item type: the keys it may carry and the ones it must."""

RESPONSES_ITEM_TYPES: Final = frozenset({"message", *ITEM_KEYS})
"""Every ``type`` a Responses input item may have."""

INPUT_PARTS: Final = frozenset({"input_text", "input_image", "input_file"})
OUTPUT_PARTS: Final = frozenset({"output_text", "refusal"})
PART_KEYS: Final[Mapping[str, frozenset[str]]] = {
    "input_text": frozenset({"type", "text", "prompt_cache_breakpoint"}),
    "input_image": frozenset({"type", "image_url", "file_id", "detail", "prompt_cache_breakpoint"}),
    "input_file": frozenset(
        {
            "type",
            "file_data",
            "file_id",
            "file_url",
            "filename",
            "detail",
            "prompt_cache_breakpoint",
        }
    ),
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
}
IMAGE_DETAILS: Final = frozenset({"auto", "low", "high", "original"})
MESSAGE_ROLES: Final = frozenset({"user", "system", "developer", "assistant"})
NAME_RE: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


# Item types whose ``id`` is optional in the SDK's input type.
IDLESS: Final = frozenset(
    {
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "computer_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_approval_response",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
        "configuration_update",
        "compaction",
        "compaction_trigger",
    }
)


# --------------------------------------------------------------------------- readers

ITEMS_FIELD: Final = "responses_items"
"""The internal field holding the Responses items a canonical message was made from."""


def item_type(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def part_type(part: Any) -> str | None:
    kind = part.get("type") if isinstance(part, Mapping) else None
    return kind if isinstance(kind, str) else None


def is_opaque(item: Mapping[str, Any]) -> bool:
    kind = item_type(item)
    return kind in OPAQUE_ASSISTANT or kind in OPAQUE_CLIENT


def is_responses_only(message: Mapping[str, Any]) -> bool:
    """True for an assistant message that carries nothing but opaque Responses items.

    Reasoning or hosted-tool items with no text and no call of their own (a
    turn's items appended one at a time, a standalone ``mcp_approval_response``)
    have no Chat or Anthropic form: repair keeps such a message (it is not
    empty for the Responses API), and the Chat and Anthropic renderers leave it out.
    """
    if message.get("role") != "assistant" or message.get("tool_calls"):
        return False
    content = message.get("content")
    if content not in (None, "", []) or message.get("refusal") or message.get("audio"):
        return False
    items = message.get(ITEMS_FIELD)
    return isinstance(items, list) and any(
        isinstance(item, Mapping) and is_opaque(item) for item in items
    )
