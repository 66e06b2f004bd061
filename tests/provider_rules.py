"""Independent oracle: would a chat payload be accepted by OpenAI / Anthropic?

This module is a *referee* for the library's payload-repair code. It re-states, from the
providers' documentation and from their real ``400 invalid_request_error`` messages, the
rules a request's message list must satisfy, and reports every rule a payload breaks.

It is deliberately independent of ``agentmem``: it imports nothing from the library and
shares no code or constants with it, so a misunderstanding baked into the library cannot
also be baked into the check that judges it. Keep it that way.

Two entry points, both pure functions returning human-readable violation strings (an
empty list means "no violation found"):

* :func:`openai_violations` -- the ``messages`` list of a Chat Completions request
  (``POST /v1/chat/completions``), including the DeepSeek/Kimi ``reasoning_content``
  convention used by OpenAI-compatible thinking models.
* :func:`anthropic_violations` -- ``system`` and ``messages`` of a Messages API request
  (``POST /v1/messages``).

Every violation string starts with the location it concerns (``messages[3]``,
``messages[3].content[1]``, ``system``...) followed by the rule, e.g.
``"messages[3]: tool message answers unknown id 'x'"``.

Each rule below carries a comment naming its source: a documentation URL or the literal
provider error message (as quoted in public bug reports) that the rule reproduces. Where
the oracle is deliberately stricter or looser than the provider, the comment says so.

Both functions also check, for every message: that every string (values *and* keys)
encodes to UTF-8 strictly (no lone surrogates), that the payload is JSON-serialisable
with ``allow_nan=False`` (no NaN/inf, no non-JSON types, no cycles, only ``str`` keys),
and that no key listed in ``internal_fields`` appears anywhere (leaked library fields).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any, TypeGuard

__all__ = ["anthropic_violations", "openai_violations"]

_MISSING: Any = object()


# ---------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------


def _is_array(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    # json.dumps serialises both lists and tuples as JSON arrays.
    return isinstance(value, (list, tuple))


def _type_name(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _child_path(path: str, key: object) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{key!r}]"


def _walk_generic(
    value: object,
    path: str,
    out: list[str],
    internal_fields: frozenset[str],
    active: set[int],
) -> None:
    """Check JSON-serialisability, strict UTF-8 and leaked internal fields, recursively."""
    # Strict UTF-8: a lone surrogate (e.g. "\ud800") cannot be encoded, so the HTTP body
    # cannot be produced (httpx / requests raise UnicodeEncodeError, or the provider
    # rejects the escaped JSON with "invalid ... surrogate"). Rule from the brief.
    if isinstance(value, str):
        try:
            value.encode("utf-8", errors="strict")
        except UnicodeEncodeError as exc:
            out.append(f"{path}: string is not valid UTF-8 ({exc.reason} at index {exc.start})")
        return
    if value is None or isinstance(value, (bool, int)):
        return
    # json.dumps(..., allow_nan=False) raises ValueError on NaN / +-inf.
    if isinstance(value, float):
        if not math.isfinite(value):
            out.append(f"{path}: float {value!r} is not JSON-serialisable (allow_nan=False)")
        return
    if isinstance(value, dict) or _is_array(value):
        if id(value) in active:
            out.append(f"{path}: circular reference; payload is not JSON-serialisable")
            return
        active.add(id(value))
        try:
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        # json.dumps silently coerces int/float/bool/None keys to strings
                        # and rejects others; either way the key is not what was meant.
                        out.append(
                            f"{path}: key {key!r} is not a string; payload does not "
                            "round-trip through JSON"
                        )
                    else:
                        try:
                            key.encode("utf-8", errors="strict")
                        except UnicodeEncodeError:
                            out.append(f"{path}: key {key!r} is not valid UTF-8")
                        if key in internal_fields:
                            out.append(f"{_child_path(path, key)}: internal field {key!r} leaked")
                    # A tool_use `input` is the tool's own arguments: any key is legitimate
                    # there (a tool may well take a `task_id`), so do not look for leaks in it.
                    inner_fields = frozenset() if key == "input" else internal_fields
                    _walk_generic(item, _child_path(path, key), out, inner_fields, active)
            else:
                assert isinstance(value, (list, tuple))
                for index, item in enumerate(value):
                    _walk_generic(item, f"{path}[{index}]", out, internal_fields, active)
        finally:
            active.discard(id(value))
        return
    out.append(f"{path}: value of type {_type_name(value)} is not JSON-serialisable")


def _generic_checks(
    label: str, items: Iterable[object], out: list[str], internal_fields: frozenset[str]
) -> None:
    for index, item in enumerate(items):
        try:
            _walk_generic(item, f"{label}[{index}]", out, internal_fields, set())
        except RecursionError:
            out.append(f"{label}[{index}]: nested too deeply to serialise as JSON")


def _json_backstop(payload: object, label: str, out: list[str], already_found: bool) -> None:
    # Belt and braces: the walker above should already have caught anything json.dumps
    # rejects; if it did not, still report it. Rule: json.dumps(..., allow_nan=False).
    if already_found:
        return
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        out.append(f"{label}: payload is not JSON-serialisable ({exc})")


# ---------------------------------------------------------------------------------------
# OpenAI Chat Completions
# ---------------------------------------------------------------------------------------

# Allowed keys per role. Source: API reference, "Create chat completion", request body
# `messages` (https://platform.openai.com/docs/api-reference/chat/create), plus
# `reasoning_content` on assistant messages for DeepSeek/Kimi thinking mode
# (https://api-docs.deepseek.com/guides/thinking_mode). Unknown keys are rejected by the
# API: "Additional properties are not allowed ('id' was unexpected) - 'messages.0'".
# The deprecated `function_call` and role "function" are deliberately not accepted.
_OA_KEYS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset(
        {"role", "content", "name", "tool_calls", "refusal", "audio", "reasoning_content"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}

# Content part types allowed per role (same API reference: system/developer/tool content
# is string or array of text parts; user adds image_url, input_audio and file parts;
# assistant content is string, array of text/refusal parts, or null).
_OA_PART_TYPES: dict[str, frozenset[str]] = {
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text"}),
}

# Source: "Invalid 'messages[1].name': string does not match pattern. Expected a string that
# matches the pattern '^[^\s<|\\/>]+$'." (older API versions enforced the stricter
# '^[a-zA-Z0-9_-]{1,64}$', e.g. "'J@ck' does not match ... - 'messages.0.name'").
_OA_NAME_RE = re.compile(r"^[^\s<|\\/>]+$")

# Source: "Invalid 'messages[9].tool_calls[0].function.name': string does not match pattern.
# Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'." and the older
# "'multi_tool_use.parallel' does not match '^[a-zA-Z0-9_-]{1,64}$' -
# 'messages.10.tool_calls.0.function.name'" (64 = the documented tool-name limit).
_OA_FUNCTION_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# Source: "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with
# maximum length 40, but got a string with length 41 instead."
_OA_TOOL_CALL_ID_MAX = 40


def _oa_check_part(part: object, where: str, role: str, out: list[str]) -> None:
    if not isinstance(part, dict):
        out.append(f"{where}: content part must be an object, got {_type_name(part)}")
        return
    ptype = part.get("type")
    if ptype not in _OA_PART_TYPES[role]:
        allowed = sorted(_OA_PART_TYPES[role])
        out.append(
            f"{where}: content part type {ptype!r} not allowed for {role} (allowed: {allowed})"
        )
        return
    # Each part is exactly {"type", <type>}; nested shapes from the API reference
    # (ChatCompletionContentPart{Text,Image,InputAudio,File,Refusal}).
    expected = frozenset({"type", ptype})
    extra = sorted(set(part) - expected)
    if extra:
        out.append(f"{where}: unexpected key(s) {extra} on {ptype} part")
    body = part.get(ptype, _MISSING)
    if ptype in ("text", "refusal"):
        if not isinstance(body, str):
            out.append(f"{where}: {ptype} part needs a string {ptype!r}, got {_type_name(body)}")
        return
    if not isinstance(body, dict):
        out.append(f"{where}: {ptype} part needs an object {ptype!r}, got {_type_name(body)}")
        return
    if ptype == "image_url":
        extra = sorted(set(body) - {"url", "detail"})
        if extra:
            out.append(f"{where}: unexpected key(s) {extra} in image_url")
        if not isinstance(body.get("url"), str) or not body.get("url"):
            out.append(f"{where}: image_url.url must be a non-empty string")
        if "detail" in body and body["detail"] not in ("auto", "low", "high"):
            out.append(f"{where}: image_url.detail must be 'auto', 'low' or 'high'")
    elif ptype == "input_audio":
        extra = sorted(set(body) - {"data", "format"})
        if extra:
            out.append(f"{where}: unexpected key(s) {extra} in input_audio")
        if not isinstance(body.get("data"), str):
            out.append(f"{where}: input_audio.data must be a string")
        if body.get("format") not in ("wav", "mp3"):
            out.append(f"{where}: input_audio.format must be 'wav' or 'mp3'")
    else:  # file
        extra = sorted(set(body) - {"file_data", "file_id", "filename"})
        if extra:
            out.append(f"{where}: unexpected key(s) {extra} in file")
        for key in ("file_data", "file_id", "filename"):
            if key in body and not isinstance(body[key], str):
                out.append(f"{where}: file.{key} must be a string")
        if "file_data" not in body and "file_id" not in body:
            out.append(f"{where}: file part needs file_data or file_id")


def _oa_check_content(message: dict[str, Any], where: str, role: str, out: list[str]) -> None:
    content = message.get("content", _MISSING)
    if role == "assistant":
        if content is _MISSING or content is None:
            # Source: API reference, assistant `content`: "Required unless tool_calls or
            # function_call is specified"; refusal/audio-only turns are also accepted.
            # Otherwise: "Invalid value for 'content': expected a string, got null."
            tool_calls = message.get("tool_calls")
            has_calls = _is_array(tool_calls) and len(tool_calls) > 0
            has_refusal = isinstance(message.get("refusal"), str)
            has_audio = isinstance(message.get("audio"), dict)
            if not (has_calls or has_refusal or has_audio):
                out.append(
                    f"{where}: assistant content is null/missing without tool_calls, "
                    "refusal or audio"
                )
            return
    elif content is _MISSING:
        out.append(f"{where}: {role} message is missing 'content'")
        return
    if isinstance(content, str):
        return
    if not _is_array(content):
        # Source: "Invalid value for 'content': expected a string, got null."
        out.append(
            f"{where}: {role} content must be a string or an array of parts, got "
            f"{_type_name(content)}"
        )
        return
    if len(content) == 0:
        # Source: "Invalid 'messages[0].content': empty array. Expected an array with minimum
        # length 1, but got an empty array instead." (every content array has minItems 1).
        out.append(f"{where}: {role} content array must not be empty")
        return
    for index, part in enumerate(content):
        _oa_check_part(part, f"{where}.content[{index}]", role, out)


def _oa_check_tool_calls(
    message: dict[str, Any],
    where: str,
    out: list[str],
    first_seen: dict[str, str],
) -> list[str]:
    """Validate ``tool_calls``; return the ids usable for pairing (str ids only)."""
    if "tool_calls" not in message:
        return []
    tool_calls = message["tool_calls"]
    if not _is_array(tool_calls):
        # Source: API reference types tool_calls as an array (not nullable); null or other
        # types are rejected by strict servers. Omit the key instead.
        out.append(f"{where}: tool_calls must be a non-empty array, got {_type_name(tool_calls)}")
        return []
    if len(tool_calls) == 0:
        # Source: "Invalid 'messages[1].tool_calls': empty array. Expected an array with
        # minimum length 1, but got an empty array instead."
        out.append(f"{where}: tool_calls must not be an empty array")
        return []
    ids: list[str] = []
    for index, call in enumerate(tool_calls):
        cwhere = f"{where}.tool_calls[{index}]"
        if not isinstance(call, dict):
            out.append(f"{cwhere}: tool call must be an object, got {_type_name(call)}")
            continue
        extra = sorted(set(call) - {"id", "type", "function"})
        if extra:
            out.append(f"{cwhere}: unexpected key(s) {extra} on tool call")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            out.append(f"{cwhere}: id must be a non-empty string")
        else:
            if len(call_id) > _OA_TOOL_CALL_ID_MAX:
                out.append(
                    f"{cwhere}: id is {len(call_id)} characters; maximum is {_OA_TOOL_CALL_ID_MAX}"
                )
            # Source: "Invalid parameter: Duplicate value for 'tool_call_id' of 'call_...',
            # in messages[7] and messages[8]." -- ids must be unique in the whole request.
            if call_id in first_seen:
                out.append(
                    f"{cwhere}: duplicate tool call id {call_id!r} (first used at "
                    f"{first_seen[call_id]})"
                )
            else:
                first_seen[call_id] = cwhere
            ids.append(call_id)
        if call.get("type") != "function":
            out.append(f"{cwhere}: type must be 'function', got {call.get('type')!r}")
        function = call.get("function")
        if not isinstance(function, dict):
            out.append(f"{cwhere}: function must be an object, got {_type_name(function)}")
            continue
        extra = sorted(set(function) - {"name", "arguments"})
        if extra:
            out.append(f"{cwhere}.function: unexpected key(s) {extra}")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            # Source: "Invalid 'messages[69].tool_calls[0].function.name': empty string.
            # Expected a string with minimum length 1, but got an empty string instead."
            out.append(f"{cwhere}.function: name must be a non-empty string")
        elif not _OA_FUNCTION_NAME_RE.match(name):
            out.append(f"{cwhere}.function: name {name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            out.append(f"{cwhere}.function: arguments must be a string (JSON text)")
        else:
            # Source: API reference, function.arguments: "The arguments to call the function
            # with, as generated by the model in JSON format"; OpenAI-compatible servers
            # (vLLM, DeepSeek, Anthropic-compat proxies) json-parse it and 400 otherwise.
            try:
                json.loads(arguments)
            except ValueError:
                out.append(f"{cwhere}.function: arguments is not valid JSON")
    return ids


def openai_violations(
    messages: list[dict[str, Any]],
    *,
    internal_fields: frozenset[str] = frozenset(),
    require_nonempty: bool = False,
) -> list[str]:
    """Return the reasons OpenAI Chat Completions would reject ``messages`` (``[]`` = valid).

    ``internal_fields`` names keys the library uses internally and must never send; any
    occurrence at any depth is a violation. With ``require_nonempty`` an empty list is
    reported (the API rejects it: "[] is too short - 'messages'").
    """
    out: list[str] = []
    if not _is_array(messages):
        return [f"messages: must be an array, got {_type_name(messages)}"]
    if len(messages) == 0:
        if require_nonempty:
            # Source: "Invalid 'messages': empty array. Expected an array with minimum
            # length 1, but got an empty array instead."
            out.append("messages: must contain at least one message")
        return out

    _generic_checks("messages", messages, out, internal_fields)
    _json_backstop(messages, "messages", out, already_found=bool(out))

    first_seen_call: dict[str, str] = {}
    # Open tool-call run: the assistant index owning it, its ids not yet answered, and
    # the ids already answered (to tell "answered twice" from "unknown").
    run_owner: int | None = None
    pending: list[str] = []
    answered: set[str] = set()
    reasoning_present: list[int] = []
    reasoning_absent: list[int] = []

    def close_run(before: str) -> None:
        nonlocal run_owner, pending, answered
        if run_owner is not None and pending:
            # Source: "An assistant message with 'tool_calls' must be followed by tool
            # messages responding to each 'tool_call_id'. The following tool_call_ids did
            # not have response messages: call_..."
            out.append(
                f"messages[{run_owner}]: tool_calls ids without tool responses {before}: "
                + ", ".join(repr(x) for x in pending)
            )
        run_owner, pending, answered = None, [], set()

    entries: list[object] = list(messages)
    for i, message in enumerate(entries):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            close_run(f"before {where}")
            out.append(f"{where}: message must be an object, got {_type_name(message)}")
            continue
        role = message.get("role")
        if not isinstance(role, str) or role not in _OA_KEYS:
            close_run(f"before {where}")
            # Source: API reference: role is one of developer, system, user, assistant, tool.
            out.append(
                f"{where}: role {role!r} is not one of system, developer, user, assistant, tool"
            )
            continue

        extra = sorted(k for k in message if k not in _OA_KEYS[role] and k not in internal_fields)
        if extra:
            out.append(f"{where}: unexpected key(s) {extra} for role {role!r}")
        if "name" in message:
            name = message["name"]
            if not isinstance(name, str) or not _OA_NAME_RE.match(name):
                out.append(f"{where}: name {name!r} does not match ^[^\\s<|\\\\/>]+$")
        _oa_check_content(message, where, role, out)

        if role == "tool":
            tool_call_id = message.get("tool_call_id", _MISSING)
            if not isinstance(tool_call_id, str) or not tool_call_id:
                out.append(f"{where}: tool_call_id must be a non-empty string")
                continue
            if run_owner is None:
                # Source: "Invalid parameter: messages with role 'tool' must be a response
                # to a preceeding message with 'tool_calls'."
                out.append(
                    f"{where}: tool message is not inside a tool-call run (it must follow an "
                    f"assistant message with tool_calls); answers id {tool_call_id!r}"
                )
            elif tool_call_id in pending:
                pending.remove(tool_call_id)
                answered.add(tool_call_id)
            elif tool_call_id in answered:
                # Source: "Duplicate value for 'tool_call_id' of 'call_...' in messages[7]
                # and messages[8]." -- each id is answered exactly once.
                out.append(f"{where}: tool message answers id {tool_call_id!r} a second time")
            else:
                out.append(f"{where}: tool message answers unknown id {tool_call_id!r}")
            continue

        # Any non-tool message ends the current run; unanswered ids are a violation.
        close_run(f"before {where}")

        if role == "assistant":
            if "refusal" in message and not (
                message["refusal"] is None or isinstance(message["refusal"], str)
            ):
                out.append(f"{where}: refusal must be a string or null")
            if "audio" in message and message["audio"] is not None:
                audio = message["audio"]
                # Source: API reference, assistant `audio`: object with required `id`.
                if (
                    not isinstance(audio, dict)
                    or set(audio) != {"id"}
                    or not isinstance(audio.get("id"), str)
                ):
                    out.append(f"{where}: audio must be an object {{'id': str}}")
            # Reasoning-content consistency (DeepSeek / Kimi thinking mode): "The
            # `reasoning_content` in the thinking mode must be passed back to the API."
            # (https://api-docs.deepseek.com/guides/thinking_mode). Oracle rule: all
            # assistant messages carry it or none does, and it is always a string.
            if "reasoning_content" in message:
                reasoning_present.append(i)
                if not isinstance(message["reasoning_content"], str):
                    out.append(f"{where}: reasoning_content must be a string")
            else:
                reasoning_absent.append(i)
            ids = _oa_check_tool_calls(message, where, out, first_seen_call)
            if ids:
                run_owner, pending, answered = i, list(dict.fromkeys(ids)), set()

    close_run("before the end of messages")

    if reasoning_present and reasoning_absent:
        missing = ", ".join(f"messages[{i}]" for i in reasoning_absent)
        out.append(
            f"{missing}: assistant message(s) lack reasoning_content while "
            f"messages[{reasoning_present[0]}] has it (thinking mode needs it on every "
            "assistant message)"
        )
    return out


# ---------------------------------------------------------------------------------------
# Anthropic Messages
# ---------------------------------------------------------------------------------------

# Source for tool_use ids: "messages.1.content.1.tool_use.id: String should match pattern
# '^[a-zA-Z0-9_-]+$'".
_AN_TOOL_USE_ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")

# Source: vision guide (https://docs.anthropic.com/en/docs/build-with-claude/vision),
# "supported image formats: image/jpeg, image/png, image/gif, image/webp".
_AN_IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})

# Block type -> (required keys, optional keys). Unknown keys are rejected by the API:
# "messages.65.content.1.tool_use.text: Extra inputs are not permitted". `cache_control`
# is accepted on content blocks but NOT on thinking blocks: "messages.1.content.0.thinking.
# cache_control: Extra inputs are not permitted". `citations` is part of the documented
# text/document block schema (https://docs.anthropic.com/en/api/messages).
_AN_BLOCK_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "text": (frozenset({"type", "text"}), frozenset({"cache_control", "citations"})),
    "image": (frozenset({"type", "source"}), frozenset({"cache_control"})),
    "document": (
        frozenset({"type", "source"}),
        frozenset({"cache_control", "title", "context", "citations"}),
    ),
    "tool_use": (frozenset({"type", "id", "name", "input"}), frozenset({"cache_control"})),
    "tool_result": (
        frozenset({"type", "tool_use_id"}),
        frozenset({"cache_control", "content", "is_error"}),
    ),
    "thinking": (frozenset({"type", "thinking", "signature"}), frozenset()),
    "redacted_thinking": (frozenset({"type", "data"}), frozenset()),
}

# Blocks restricted to one role. Source: tool use docs
# (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use):
# tool_use appears in assistant turns, tool_result in user turns; thinking blocks are
# produced by the model (extended thinking docs) and only returned in assistant turns.
_AN_BLOCK_ROLE: dict[str, str] = {
    "tool_use": "assistant",
    "thinking": "assistant",
    "redacted_thinking": "assistant",
    "tool_result": "user",
}

# Block types allowed inside tool_result.content. Source: "Handle tool calls"
# (https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls):
# "a string, a list of nested content blocks ... or a list of document blocks".
_AN_TOOL_RESULT_INNER = frozenset({"text", "image", "document"})


# Source: anthropic-sdk-python `CacheControlEphemeralParam` (generated from the API's
# OpenAPI spec): {"type": "ephemeral", "ttl"?: "5m" | "1h"}; null means "no breakpoint".
_AN_CACHE_TTLS = ("5m", "1h")

# Source: anthropic-sdk-python `TextCitationParam` and the citation location params
# (citation_{char,page,content_block}_location_param.py, and the web search / search
# result locations): the keys each citation type a request may carry back.
_AN_CITATION_KEYS: dict[str, frozenset[str]] = {
    "char_location": frozenset(
        {
            "type",
            "cited_text",
            "document_index",
            "document_title",
            "start_char_index",
            "end_char_index",
        }
    ),
    "page_location": frozenset(
        {
            "type",
            "cited_text",
            "document_index",
            "document_title",
            "start_page_number",
            "end_page_number",
        }
    ),
    "content_block_location": frozenset(
        {
            "type",
            "cited_text",
            "document_index",
            "document_title",
            "start_block_index",
            "end_block_index",
        }
    ),
    "web_search_result_location": frozenset(
        {"type", "cited_text", "encrypted_index", "title", "url"}
    ),
    "search_result_location": frozenset(
        {
            "type",
            "cited_text",
            "search_result_index",
            "source",
            "title",
            "start_block_index",
            "end_block_index",
        }
    ),
}


def _an_check_cache_control(value: object, where: str, out: list[str]) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        out.append(f"{where}.cache_control: must be an object, got {_type_name(value)}")
        return
    extra = sorted(set(value) - {"type", "ttl"})
    if extra:
        out.append(f"{where}.cache_control: unexpected key(s) {extra}")
    if value.get("type") != "ephemeral":
        out.append(f"{where}.cache_control: type must be 'ephemeral'")
    if "ttl" in value and value["ttl"] not in _AN_CACHE_TTLS:
        out.append(f"{where}.cache_control: ttl must be '5m' or '1h'")


def _an_check_text_citations(value: object, where: str, out: list[str]) -> None:
    if value is None:
        return
    if not _is_array(value):
        out.append(f"{where}.citations: must be an array, got {_type_name(value)}")
        return
    for index, citation in enumerate(value):
        cwhere = f"{where}.citations[{index}]"
        if not isinstance(citation, dict):
            out.append(f"{cwhere}: citation must be an object, got {_type_name(citation)}")
            continue
        ctype = citation.get("type")
        keys = _AN_CITATION_KEYS.get(ctype) if isinstance(ctype, str) else None
        if keys is None:
            out.append(f"{cwhere}: unknown citation type {ctype!r}")
            continue
        extra = sorted(set(citation) - keys)
        if extra:
            out.append(f"{cwhere}: unexpected key(s) {extra} on {ctype} citation")


def _an_check_document_citations(value: object, where: str, out: list[str]) -> None:
    # Source: anthropic-sdk-python `CitationsConfigParam`: {"enabled"?: bool}.
    if not isinstance(value, dict):
        out.append(f"{where}.citations: must be an object, got {_type_name(value)}")
        return
    extra = sorted(set(value) - {"enabled"})
    if extra:
        out.append(f"{where}.citations: unexpected key(s) {extra}")
    if "enabled" in value and not isinstance(value["enabled"], bool):
        out.append(f"{where}.citations: enabled must be a boolean")


def _an_check_text(text: object, where: str, out: list[str]) -> None:
    if not isinstance(text, str):
        out.append(f"{where}: text must be a string, got {_type_name(text)}")
    elif text == "":
        # Source: "messages: text content blocks must be non-empty"
        out.append(f"{where}: text content blocks must be non-empty")
    elif not text.strip():
        # Source: "messages: text content blocks must contain non-whitespace text".
        # (The API tolerates a whitespace-only block next to other non-blank text; the
        # oracle is stricter and flags every whitespace-only block.)
        out.append(f"{where}: text content blocks must contain non-whitespace text")


def _an_check_source_keys(
    source: dict[str, Any], allowed: set[str], where: str, out: list[str]
) -> None:
    extra = sorted(set(source) - allowed)
    if extra:
        out.append(f"{where}.source: unexpected key(s) {extra}")


def _an_check_image_source(source: object, where: str, out: list[str]) -> None:
    if not isinstance(source, dict):
        out.append(f"{where}: image source must be an object, got {_type_name(source)}")
        return
    stype = source.get("type")
    if stype == "base64":
        _an_check_source_keys(source, {"type", "media_type", "data"}, where, out)
        if source.get("media_type") not in _AN_IMAGE_MEDIA_TYPES:
            out.append(
                f"{where}: image media_type {source.get('media_type')!r} not in "
                f"{sorted(_AN_IMAGE_MEDIA_TYPES)}"
            )
        if not isinstance(source.get("data"), str):
            out.append(f"{where}: base64 image data must be a string")
    elif stype == "url":
        _an_check_source_keys(source, {"type", "url"}, where, out)
        if not isinstance(source.get("url"), str) or not source.get("url"):
            out.append(f"{where}: image url must be a non-empty string")
    elif stype == "file":
        # Files API source (https://docs.anthropic.com/en/docs/build-with-claude/files).
        _an_check_source_keys(source, {"type", "file_id"}, where, out)
        if not isinstance(source.get("file_id"), str):
            out.append(f"{where}: file_id must be a string")
    else:
        out.append(f"{where}: image source type {stype!r} must be 'base64', 'url' or 'file'")


def _an_check_document_source(source: object, where: str, out: list[str]) -> None:
    # Source: PDF support / citations docs (https://docs.anthropic.com/en/docs/
    # build-with-claude/pdf-support, .../citations): base64 PDF, plain text, URL, custom
    # content, or Files API file.
    if not isinstance(source, dict):
        out.append(f"{where}: document source must be an object, got {_type_name(source)}")
        return
    stype = source.get("type")
    if stype == "base64":
        _an_check_source_keys(source, {"type", "media_type", "data"}, where, out)
        if source.get("media_type") != "application/pdf":
            out.append(f"{where}: base64 document media_type must be 'application/pdf'")
        if not isinstance(source.get("data"), str):
            out.append(f"{where}: document data must be a string")
    elif stype == "text":
        _an_check_source_keys(source, {"type", "media_type", "data"}, where, out)
        if source.get("media_type") != "text/plain":
            out.append(f"{where}: text document media_type must be 'text/plain'")
        if not isinstance(source.get("data"), str):
            out.append(f"{where}: document data must be a string")
    elif stype == "url":
        _an_check_source_keys(source, {"type", "url"}, where, out)
        if not isinstance(source.get("url"), str) or not source.get("url"):
            out.append(f"{where}: document url must be a non-empty string")
    elif stype == "content":
        _an_check_source_keys(source, {"type", "content"}, where, out)
        inner = source.get("content")
        if isinstance(inner, str):
            if not inner:
                out.append(f"{where}: document content must be non-empty")
        elif _is_array(inner) and len(inner) > 0:
            for index, block in enumerate(inner):
                _an_check_block(
                    block,
                    f"{where}.source.content[{index}]",
                    "user",
                    out,
                    allowed=frozenset({"text", "image"}),
                )
        else:
            out.append(f"{where}: document content must be a string or non-empty block array")
    elif stype == "file":
        _an_check_source_keys(source, {"type", "file_id"}, where, out)
        if not isinstance(source.get("file_id"), str):
            out.append(f"{where}: file_id must be a string")
    else:
        out.append(f"{where}: document source type {stype!r} is not supported")


def _an_check_block(
    block: object,
    where: str,
    role: str,
    out: list[str],
    *,
    allowed: frozenset[str] | None = None,
) -> str | None:
    """Validate one content block; return its type if it is a known type, else None."""
    if not isinstance(block, dict):
        out.append(f"{where}: content block must be an object, got {_type_name(block)}")
        return None
    btype = block.get("type")
    if not isinstance(btype, str) or btype not in _AN_BLOCK_KEYS:
        out.append(f"{where}: unknown content block type {btype!r}")
        return None
    if allowed is not None and btype not in allowed:
        out.append(f"{where}: block type {btype!r} not allowed here (allowed: {sorted(allowed)})")
        return btype
    owner = _AN_BLOCK_ROLE.get(btype)
    if owner is not None and owner != role:
        out.append(f"{where}: {btype} block is only allowed in {owner} messages")
    required, optional = _AN_BLOCK_KEYS[btype]
    missing = sorted(required - set(block))
    if missing:
        out.append(f"{where}: {btype} block is missing key(s) {missing}")
    extra = sorted(set(block) - required - optional)
    if extra:
        out.append(f"{where}: unexpected key(s) {extra} on {btype} block")

    if "cache_control" in block:
        _an_check_cache_control(block["cache_control"], where, out)
    if btype == "text":
        if "text" in block:
            _an_check_text(block["text"], where, out)
        if "citations" in block:
            _an_check_text_citations(block["citations"], where, out)
    elif btype == "image":
        if "source" in block:
            _an_check_image_source(block["source"], where, out)
    elif btype == "document":
        if "source" in block:
            _an_check_document_source(block["source"], where, out)
        for key in ("title", "context"):
            if key in block and not (block[key] is None or isinstance(block[key], str)):
                out.append(f"{where}: document {key} must be a string")
        if "citations" in block:
            _an_check_document_citations(block["citations"], where, out)
    elif btype == "tool_use":
        tool_id = block.get("id")
        if not isinstance(tool_id, str) or not _AN_TOOL_USE_ID_RE.match(tool_id):
            out.append(f"{where}: tool_use id {tool_id!r} does not match ^[a-zA-Z0-9_-]+$")
        name = block.get("name")
        if not isinstance(name, str) or not name:
            out.append(f"{where}: tool_use name must be a non-empty string")
        if "input" in block and not isinstance(block["input"], dict):
            out.append(
                f"{where}: tool_use input must be an object, got {_type_name(block['input'])}"
            )
    elif btype == "tool_result":
        if not isinstance(block.get("tool_use_id"), str) or not block.get("tool_use_id"):
            out.append(f"{where}: tool_use_id must be a non-empty string")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            out.append(f"{where}: is_error must be a boolean")
        if "content" in block:
            inner = block["content"]
            if isinstance(inner, str):
                pass
            elif _is_array(inner):
                for index, item in enumerate(inner):
                    _an_check_block(
                        item,
                        f"{where}.content[{index}]",
                        "user",
                        out,
                        allowed=_AN_TOOL_RESULT_INNER,
                    )
            else:
                out.append(f"{where}: tool_result content must be a string or an array of blocks")
    elif btype == "thinking":
        # Source: extended thinking docs: thinking blocks carry `thinking` and `signature`.
        if not isinstance(block.get("thinking"), str):
            out.append(f"{where}: thinking must be a string")
        if not isinstance(block.get("signature"), str):
            out.append(f"{where}: signature must be a string")
    elif btype == "redacted_thinking" and not isinstance(block.get("data"), str):
        out.append(f"{where}: redacted_thinking data must be a string")
    return btype


def _an_check_system(system: object, out: list[str]) -> None:
    # Source: API reference, `system`: "string or array of text blocks"
    # (https://docs.anthropic.com/en/api/messages). None means the field is omitted.
    if system is None:
        return
    if isinstance(system, str):
        if not system:
            out.append("system: must be a non-empty string (omit it instead of sending '')")
        return
    if not _is_array(system):
        out.append(f"system: must be a string or an array of text blocks, got {_type_name(system)}")
        return
    for index, block in enumerate(system):
        where = f"system[{index}]"
        if not isinstance(block, dict) or block.get("type") != "text":
            out.append(f"{where}: system blocks must be text blocks")
            continue
        extra = sorted(set(block) - {"type", "text", "cache_control", "citations"})
        if extra:
            out.append(f"{where}: unexpected key(s) {extra} on text block")
        if "cache_control" in block:
            _an_check_cache_control(block["cache_control"], where, out)
        if "citations" in block:
            _an_check_text_citations(block["citations"], where, out)
        text = block.get("text")
        if not isinstance(text, str) or not text:
            out.append(f"{where}: text must be a non-empty string")


def anthropic_violations(
    system: object,
    messages: list[dict[str, Any]],
    *,
    internal_fields: frozenset[str] = frozenset(),
    require_nonempty: bool = False,
) -> list[str]:
    """Return the reasons the Anthropic Messages API would reject the request (``[]`` = valid).

    ``system`` is the top-level system prompt (``None`` = omitted). ``internal_fields``
    names keys that must never be sent; any occurrence at any depth is a violation. With
    ``require_nonempty`` an empty ``messages`` list is reported.
    """
    out: list[str] = []
    _an_check_system(system, out)
    if system is not None:
        _walk_generic(system, "system", out, internal_fields, set())
    if not _is_array(messages):
        out.append(f"messages: must be an array, got {_type_name(messages)}")
        return out
    if len(messages) == 0:
        if require_nonempty:
            out.append("messages: must contain at least one message")
        return out

    before = len(out)
    _generic_checks("messages", messages, out, internal_fields)
    _json_backstop(messages, "messages", out, already_found=len(out) > before)

    last = len(messages) - 1
    roles: list[str | None] = []
    block_lists: list[list[dict[str, Any]] | None] = []
    first_tool_use: dict[str, str] = {}

    entries: list[object] = list(messages)
    for i, message in enumerate(entries):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            out.append(f"{where}: message must be an object, got {_type_name(message)}")
            roles.append(None)
            block_lists.append(None)
            continue
        # Source: API reference: each input message is an object with `role` and
        # `content`; anything else is "Extra inputs are not permitted".
        extra = sorted(
            k for k in message if k not in ("role", "content") and k not in internal_fields
        )
        if extra:
            out.append(f"{where}: unexpected key(s) {extra} (only 'role' and 'content' allowed)")
        role = message.get("role")
        if role not in ("user", "assistant"):
            out.append(f"{where}: role {role!r} must be 'user' or 'assistant'")
            roles.append(None)
            block_lists.append(None)
            continue
        roles.append(role)
        if i == 0 and role != "user":
            # Source: "messages: first message must use the \"user\" role"
            out.append(f"{where}: first message must use the 'user' role")
        if i > 0 and roles[i - 1] == role:
            # Source: "messages: roles must alternate between \"user\" and \"assistant\", but
            # found multiple \"user\" roles in a row". NOTE: current docs say consecutive
            # same-role turns are merged ("Consecutive user or assistant turns in your request
            # will be combined into a single turn", https://docs.anthropic.com/en/api/messages);
            # the oracle keeps the strict rule because tool pairing is defined per message and
            # older versions / other hosts (Bedrock, Vertex) reject it.
            out.append(f"{where}: roles must alternate; two consecutive {role!r} messages")

        final_assistant = i == last and role == "assistant"
        content = message.get("content", _MISSING)
        blocks: list[dict[str, Any]] | None = None
        if content is _MISSING:
            out.append(f"{where}: message is missing 'content'")
        elif isinstance(content, str):
            if content == "":
                if not final_assistant:
                    # Source: "messages.0: all messages must have non-empty content except
                    # for the optional final assistant message"
                    out.append(
                        f"{where}: all messages must have non-empty content except "
                        "for the optional final assistant message"
                    )
            elif not content.strip():
                # A string is sent as a single text block. Source: "messages: text content
                # blocks must contain non-whitespace text".
                out.append(f"{where}: content must contain non-whitespace text")
            blocks = []
        elif _is_array(content):
            if len(content) == 0 and not final_assistant:
                out.append(
                    f"{where}: all messages must have non-empty content except "
                    "for the optional final assistant message"
                )
            blocks = []
            for index, block in enumerate(content):
                btype = _an_check_block(block, f"{where}.content[{index}]", role, out)
                if btype is not None:
                    assert isinstance(block, dict)
                    blocks.append(block)
                    if btype == "tool_use" and isinstance(block.get("id"), str):
                        tool_id = block["id"]
                        # Source: "messages.1.content.1: `tool_use` ids must be unique"
                        if tool_id in first_tool_use:
                            out.append(
                                f"{where}.content[{index}]: tool_use ids must be unique; "
                                f"{tool_id!r} already used at {first_tool_use[tool_id]}"
                            )
                        else:
                            first_tool_use[tool_id] = f"{where}.content[{index}]"
            _an_check_order(content, where, role, final_assistant, out)
        else:
            out.append(
                f"{where}: content must be a string or an array of blocks, got "
                f"{_type_name(content)}"
            )
        block_lists.append(blocks)

        if final_assistant:
            # Source: "messages: final assistant content cannot end with trailing whitespace"
            tail: object = content
            if _is_array(content) and len(content) > 0:
                last_block = content[-1]
                tail = (
                    last_block.get("text")
                    if isinstance(last_block, dict) and (last_block.get("type") == "text")
                    else None
                )
            if isinstance(tail, str) and tail != tail.rstrip():
                out.append(f"{where}: final assistant content cannot end with trailing whitespace")

    _an_check_pairing(messages, roles, block_lists, out)
    return out


def _an_check_order(
    content: list[object] | tuple[object, ...],
    where: str,
    role: str,
    final_assistant: bool,
    out: list[str],
) -> None:
    types = [b.get("type") if isinstance(b, dict) else None for b in content]
    if role == "user":
        # Source: "Did not find 1 tool_result block(s) at the beginning of this message.
        # Messages following tool_use blocks must begin with a matching number of
        # tool_result blocks." (anthropic-sdk-typescript#653) and the tool-use docs: in a
        # user message, tool_result blocks come first; text goes after all of them.
        seen_other = False
        for index, btype in enumerate(types):
            if btype == "tool_result":
                if seen_other:
                    out.append(
                        f"{where}.content[{index}]: tool_result blocks must come before any "
                        "other block in the message"
                    )
            else:
                seen_other = True
    elif any(t in _THINKING_TYPES for t in types):
        # Source: "messages.51.content.0: If an assistant message contains any thinking
        # blocks, the first block must be thinking or redacted_thinking. Found text."
        # (The brief's stronger "all thinking blocks before any other block" is NOT what
        # the API says: interleaved thinking puts thinking blocks after tool/server blocks
        # in one assistant turn, e.g. "messages.3.content.11: `thinking` ... blocks in the
        # latest assistant message cannot be modified". Only the first-block rule is kept.)
        if types[0] not in _THINKING_TYPES:
            out.append(
                f"{where}: if an assistant message contains thinking blocks, the first block "
                f"must be thinking or redacted_thinking (found {types[0]!r})"
            )
        if final_assistant and types[-1] in _THINKING_TYPES:
            # Source: "messages.N: The final block in an assistant message cannot be
            # `thinking`." -- measured to apply to the trailing (final) message only
            # (router-for-me/CLIProxyAPI#5321).
            out.append(
                f"{where}: the final block in the final assistant message cannot be {types[-1]!r}"
            )


def _an_check_pairing(
    messages: list[dict[str, Any]] | tuple[dict[str, Any], ...],
    roles: list[str | None],
    block_lists: list[list[dict[str, Any]] | None],
    out: list[str],
) -> None:
    def tool_use_ids(index: int) -> list[str]:
        blocks = block_lists[index]
        if roles[index] != "assistant" or not blocks:
            return []
        return [
            b["id"] for b in blocks if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
        ]

    def tool_result_ids(index: int) -> list[str]:
        blocks = block_lists[index]
        if roles[index] != "user" or not blocks:
            return []
        return [
            b["tool_use_id"]
            for b in blocks
            if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
        ]

    for i in range(len(messages)):
        where = f"messages[{i}]"
        uses = tool_use_ids(i)
        if uses:
            # Source: "messages.167: `tool_use` ids were found without `tool_result` blocks
            # immediately after: toolu_... Each `tool_use` block must have a corresponding
            # `tool_result` block in the next message."
            results = tool_result_ids(i + 1) if i + 1 < len(messages) else []
            missing = [u for u in dict.fromkeys(uses) if u not in results]
            if missing:
                out.append(
                    f"{where}: tool_use ids were found without tool_result blocks in the "
                    "immediately next (user) message: " + ", ".join(repr(m) for m in missing)
                )
        results = tool_result_ids(i)
        if results:
            previous = tool_use_ids(i - 1) if i > 0 else []
            counts: dict[str, int] = {}
            for result_id in results:
                counts[result_id] = counts.get(result_id, 0) + 1
            for result_id, count in counts.items():
                if result_id not in previous:
                    # Source: "messages.48.content.1: unexpected `tool_use_id` found in
                    # `tool_result` blocks: toolu_... Each `tool_result` block must have a
                    # corresponding `tool_use` block in the previous message."
                    out.append(
                        f"{where}: tool_result answers unknown id {result_id!r} (no matching "
                        "tool_use in the immediately previous assistant message)"
                    )
                elif count > 1:
                    out.append(f"{where}: tool_use id {result_id!r} is answered {count} times")
