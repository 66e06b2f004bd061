"""Tool specs as the provider receives them, and what they cost in a request.

A request carries the host's tool schemas beside the messages, and the
provider bills them as prompt tokens: a window that counts only the
messages overflows by exactly the schemas (in a trial, 928 tokens, 23% of a
4,000-token window). Hosts keep their schemas in one of three shapes, and
any of them is accepted for any provider:

* OpenAI Chat Completions function tools:
  ``{"type": "function", "function": {"name", "description", "parameters"}}``;
* OpenAI Responses function tools:
  ``{"type": "function", "name", "description", "parameters"}``;
* Anthropic tool specs: ``{"name", "description", "input_schema"}`` (with or
  without ``"type": "custom"``).

:func:`provider_tools` converts each function tool to the provider's own
shape (``"openai"`` Chat, ``"openai-responses"`` or ``"anthropic"``); a
spec of any other kind (a provider's built-in tool such as
``{"type": "web_search_preview"}`` or ``{"type": "bash_20250124", "name":
"bash"}``) is sent, and counted, as given.

:func:`count_tools` is an approximation that errs high: the token count of
the compact JSON of the converted list, plus :data:`TOOL_OVERHEAD_TOKENS`
per tool and a per-request overhead when any tool is sent. OpenAI renders
function schemas into a terser text than JSON (so the JSON punctuation is
counted in full, an over-count); Anthropic adds a tool-use system prompt
of :data:`ANTHROPIC_TOOL_SYSTEM_TOKENS` tokens (Anthropic's published
figure for current models with ``tool_choice`` auto) whenever tools are
present, which is counted as that request overhead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentmem.errors import InvalidArgumentError
from agentmem.protocols import TokenCounter

__all__ = [
    "ANTHROPIC_TOOL_SYSTEM_TOKENS",
    "OPENAI_TOOLS_OVERHEAD_TOKENS",
    "TOOL_OVERHEAD_TOKENS",
    "count_tools",
    "provider_tools",
    "tools_json",
]

TOOL_OVERHEAD_TOKENS: Final = 8
"""Framing tokens counted per tool spec, beyond its JSON."""

OPENAI_TOOLS_OVERHEAD_TOKENS: Final = 12
"""Tokens counted once per OpenAI request that carries tools (the functions namespace)."""

ANTHROPIC_TOOL_SYSTEM_TOKENS: Final = 346
"""Anthropic's tool-use system prompt, added to every request that carries tools."""


def _function_parts(spec: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """``name``, ``description``, ``parameters`` (and ``strict``) of a function tool, else None."""
    if spec.get("type") == "function" and isinstance(spec.get("function"), Mapping):
        inner: Mapping[str, Any] = spec["function"]
        schema_key, source = "parameters", inner
    elif spec.get("type") == "function" and "name" in spec:
        schema_key, source = "parameters", spec
    elif "input_schema" in spec and spec.get("type") in (None, "custom"):
        schema_key, source = "input_schema", spec
    elif spec.get("type") == "function":
        raise InvalidArgumentError(f"{where} is a function tool without a name")
    else:
        return None
    name = source.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{where} must have a non-empty string name")
    schema = source.get(schema_key)
    if schema is None:
        schema = {"type": "object", "properties": {}}
    elif not isinstance(schema, Mapping):
        raise InvalidArgumentError(f"{where}.{schema_key} must be a JSON schema object")
    parts: dict[str, Any] = {"name": name, "parameters": schema}
    description = source.get("description")
    if description is not None:
        if not isinstance(description, str):
            raise InvalidArgumentError(f"{where}.description must be a string")
        if description:
            parts["description"] = description
    if "strict" in source:
        parts["strict"] = source["strict"]
    return parts


def _convert(parts: Mapping[str, Any], provider: str) -> dict[str, Any]:
    if provider == "anthropic":
        out: dict[str, Any] = {"name": parts["name"]}
        if "description" in parts:
            out["description"] = parts["description"]
        out["input_schema"] = parts["parameters"]
        return out
    function = {k: parts[k] for k in ("name", "description", "parameters", "strict") if k in parts}
    if provider == "openai-responses":
        return {"type": "function", **function}
    return {"type": "function", "function": function}


def provider_tools(
    tools: Sequence[Mapping[str, Any]] | None, provider: str
) -> list[dict[str, Any]]:
    """``tools`` (any accepted shape) in ``provider``'s shape; see the module docstring.

    Args:
        tools: Tool specs, or ``None`` (no tools).
        provider: ``"openai"``, ``"openai-responses"`` or ``"anthropic"``.

    Raises:
        InvalidArgumentError: ``tools`` is not a list or tuple of mappings, or a
            function tool has no name or a schema that is not an object.
    """
    if tools is None:
        return []
    if not isinstance(tools, list | tuple):
        raise InvalidArgumentError(
            f"tools must be None or a list of tool specs, got {type(tools).__name__}"
        )
    out = []
    for i, spec in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(spec, Mapping):
            raise InvalidArgumentError(f"{where} must be a tool spec mapping, got {spec!r}")
        parts = _function_parts(spec, where)
        out.append(dict(spec) if parts is None else _convert(parts, provider))
    return out


def tools_json(specs: Sequence[Mapping[str, Any]]) -> str:
    """The compact JSON of converted specs: the text that is counted.

    Raises:
        InvalidArgumentError: a spec holds something JSON cannot carry.
    """
    try:
        return json.dumps(specs, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"tools must be JSON-serialisable: {exc}") from None


def count_tools(text: str, n_tools: int, counter: TokenCounter, provider: str) -> int:
    """Tokens ``n_tools`` converted specs whose :func:`tools_json` is ``text`` cost a request.

    ``0`` when there are none; see the module docstring for the approximation.
    """
    if n_tools == 0:
        return 0
    request = (
        ANTHROPIC_TOOL_SYSTEM_TOKENS if provider == "anthropic" else OPENAI_TOOLS_OVERHEAD_TOKENS
    )
    return counter.count_text(text) + TOOL_OVERHEAD_TOKENS * n_tools + request
