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
from typing import Final

__all__ = [
    "CALLS",
    "IDLESS",
    "IMAGE_DETAILS",
    "INPUT_PARTS",
    "ITEM_KEYS",
    "MESSAGE_ROLES",
    "NAME_RE",
    "OPAQUE_ASSISTANT",
    "OPAQUE_CLIENT",
    "OUTPUTS",
    "OUTPUT_PARTS",
    "PART_KEYS",
    "RESPONSES_ITEM_TYPES",
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

# Keys each item type may carry, and the ones it must (openai.types.responses
# .ResponseInputItemParam, openai 3.57). "message" is handled apart.
ITEM_KEYS: Final[Mapping[str, tuple[frozenset[str], tuple[str, ...]]]] = {
    "file_search_call": (frozenset({"id", "queries", "results", "status"}), ("id", "queries")),
    "computer_call": (
        frozenset({"action", "actions", "call_id", "id", "pending_safety_checks", "status"}),
        ("call_id", "id", "pending_safety_checks", "status"),
    ),
    "computer_call_output": (
        frozenset({"acknowledged_safety_checks", "call_id", "id", "output", "status"}),
        ("call_id", "output"),
    ),
    "web_search_call": (frozenset({"action", "id", "status"}), ("action", "id", "status")),
    "function_call": (
        frozenset({"arguments", "async", "call_id", "caller", "id", "name", "namespace", "status"}),
        ("arguments", "call_id", "name"),
    ),
    "function_call_output": (
        frozenset({"call_id", "caller", "id", "name", "namespace", "output", "status"}),
        ("call_id", "output"),
    ),
    "tool_search_call": (
        frozenset({"arguments", "call_id", "execution", "id", "status"}),
        ("arguments",),
    ),
    "tool_search_output": (
        frozenset({"call_id", "execution", "id", "status", "tools"}),
        ("tools",),
    ),
    "additional_tools": (frozenset({"id", "role", "tools"}), ("role", "tools")),
    "configuration_update": (frozenset({"id", "reasoning", "text"}), ()),
    "reasoning": (
        frozenset({"content", "encrypted_content", "id", "status", "summary"}),
        ("id", "summary"),
    ),
    "compaction": (frozenset({"encrypted_content", "id"}), ("encrypted_content",)),
    "image_generation_call": (
        frozenset(
            {
                "action",
                "background",
                "error",
                "id",
                "output_format",
                "quality",
                "result",
                "revised_prompt",
                "size",
                "status",
                "svg_usage",
            }
        ),
        ("id", "result", "status"),
    ),
    "code_interpreter_call": (
        frozenset({"code", "container_id", "id", "outputs", "status"}),
        ("code", "container_id", "id", "outputs", "status"),
    ),
    "local_shell_call": (
        frozenset({"action", "call_id", "id", "status"}),
        ("action", "call_id", "id", "status"),
    ),
    "local_shell_call_output": (frozenset({"id", "output", "status"}), ("id", "output")),
    "shell_call": (
        frozenset({"action", "call_id", "caller", "environment", "id", "status"}),
        ("action", "call_id"),
    ),
    "shell_call_output": (
        frozenset({"call_id", "caller", "id", "max_output_length", "output", "status"}),
        ("call_id", "output"),
    ),
    "apply_patch_call": (
        frozenset({"call_id", "caller", "id", "operation", "status"}),
        ("call_id", "operation", "status"),
    ),
    "apply_patch_call_output": (
        frozenset({"call_id", "caller", "id", "output", "status"}),
        ("call_id", "status"),
    ),
    "mcp_list_tools": (
        frozenset({"error", "id", "server_label", "tools"}),
        ("id", "server_label", "tools"),
    ),
    "mcp_approval_request": (
        frozenset({"arguments", "id", "name", "server_label"}),
        ("arguments", "id", "name", "server_label"),
    ),
    "mcp_approval_response": (
        frozenset({"approval_request_id", "approve", "id", "reason"}),
        ("approval_request_id", "approve"),
    ),
    "mcp_call": (
        frozenset(
            {
                "approval_request_id",
                "arguments",
                "error",
                "id",
                "name",
                "output",
                "server_label",
                "status",
            }
        ),
        ("arguments", "id", "name", "server_label"),
    ),
    "custom_tool_call_output": (
        frozenset({"call_id", "caller", "id", "output"}),
        ("call_id", "output"),
    ),
    "custom_tool_call": (
        frozenset({"async", "call_id", "caller", "id", "input", "name", "namespace"}),
        ("call_id", "input", "name"),
    ),
    "compaction_trigger": (frozenset({"id"}), ()),
    "item_reference": (frozenset({"id"}), ("id",)),
    "program": (
        frozenset({"call_id", "code", "fingerprint", "id"}),
        ("call_id", "code", "fingerprint", "id"),
    ),
    "program_output": (
        frozenset({"call_id", "id", "result", "status"}),
        ("call_id", "id", "result", "status"),
    ),
}

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
