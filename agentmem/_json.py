"""What agentmem accepts as JSON, and the one decoder of tool-call arguments.

Every value in a message ends up as JSON in three places: the store
(orjson), an OpenAI payload (``arguments`` as a string) and an Anthropic
payload (``arguments`` decoded into ``tool_use.input``). A value one of
them accepts and another refuses breaks a round trip. So there is one
rule, here, and every module that reads JSON values or tool-call arguments
goes through it.

**JSON values** (:func:`clean_value`, used on every incoming message):
strings are sanitised (lone surrogates become U+FFFD, see
:func:`sanitize_text`), ``bytes`` are decoded as UTF-8 with replacement,
tuples become lists; keys must be strings; integers must fit in signed
64 bits (``-2**63 <= n < 2**63``, what orjson writes and what every
provider's parser reads exactly); floats must be finite; containers nest
at most :data:`MAX_MESSAGE_DEPTH` levels (well inside orjson's limit of
254, with room for the payload envelope). Anything else raises
:class:`~agentmem.errors.InvalidMessageError` naming the field.

**Tool-call arguments** (:func:`parse_arguments`): a string holding one
JSON text (RFC 8259) that encodes an *object*:

- empty or whitespace-only text means no arguments and reads as ``{}``;
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON and are refused;
- numbers follow the value rule above: an integer outside signed 64 bits
  (``9223372036854775808``) or a number that overflows a double
  (``1e309``) is refused, never silently rounded;
- the object nests at most :data:`MAX_ARGUMENTS_DEPTH` levels (the object
  itself is level 1);
- duplicate keys are accepted and the last one wins, which is what
  ``JSON.parse``, Python's ``json`` and orjson all do, so the decoded
  object is the one a provider sees;
- JSON escapes of lone surrogates (``"\\ud800"``) are accepted and
  sanitised; the stored text is then re-encoded from the sanitised value.
  Otherwise the text is stored exactly as given.

Readers that must not fail on a stored message they only look into (the
YaRN extractor, the todo scan, the HTML export) call
:func:`decode_arguments`, which applies the same rule and returns ``None``
instead of raising.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import orjson

from agentmem.errors import InvalidArgumentError, InvalidMessageError

__all__ = [
    "MAX_ARGUMENTS_DEPTH",
    "MAX_MESSAGE_DEPTH",
    "ParsedArguments",
    "clean_value",
    "decode_arguments",
    "encode_arguments",
    "parse_arguments",
    "sanitize_text",
    "type_name",
]

INT_MIN: Final = -(2**63)
INT_LIMIT: Final = 2**63
"""Integers must satisfy ``INT_MIN <= n < INT_LIMIT`` (signed 64 bits)."""

MAX_ARGUMENTS_DEPTH: Final = 100
"""Deepest nesting of tool-call arguments; the arguments object itself is level 1."""

MAX_MESSAGE_DEPTH: Final = 128
"""Deepest nesting of any message value, the message dict being level 1.

At least :data:`MAX_ARGUMENTS_DEPTH` plus the Anthropic envelope (message,
content list, block: an ``input`` object sits at level 4), so any valid
arguments also pass as ``tool_use.input``; and far enough below orjson's
limit (254) for stores and payloads to wrap messages in a few more levels.
"""


class ParsedArguments(NamedTuple):
    """Tool-call arguments that follow the rule."""

    value: dict[str, Any]
    """The decoded object, strings sanitised."""
    text: str
    """The text to store: the input itself unless it was blank (``"{}"``) or had to be repaired."""


class _InexactInteger(Exception):
    """orjson decoded an integer outside 64 bits as a float; decode again exactly."""


# --------------------------------------------------------------------------- text


def sanitize_text(text: str) -> str:
    """Return ``text`` with every lone surrogate replaced by U+FFFD.

    Surrogate pairs that arrived as two separate code points (as produced by
    some JSON decoders and by ``surrogateescape``) are joined into the real
    character. Valid text is returned unchanged (same object).

    Raises:
        InvalidArgumentError: ``text`` is not a string.
    """
    if not isinstance(text, str):  # annotations are not enforced at runtime
        raise InvalidArgumentError(f"expected a string, got {type_name(text)}")
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# --------------------------------------------------------------------------- values


def type_name(value: Any) -> str:
    """The JSON-ish name of ``value``'s type for error messages (``null`` for ``None``)."""
    return "null" if value is None else type(value).__name__


def _clean(value: Any, field: str, index: int | None, depth: int, limit: int, exact: bool) -> Any:
    if isinstance(value, str):
        return sanitize_text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not INT_MIN <= value < INT_LIMIT:
            raise InvalidMessageError(
                "integer does not fit in signed 64 bits", index=index, field=field
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessageError(f"{value!r} is not a JSON number", index=index, field=field)
        if not exact and abs(value) >= INT_LIMIT and value.is_integer():
            raise _InexactInteger
        return value
    if isinstance(value, Mapping | list | tuple):
        if depth >= limit:
            raise InvalidMessageError(
                f"nested too deeply (more than {limit} levels)", index=index, field=field or None
            )
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidMessageError(
                        f"keys must be strings, got {type(key).__name__}",
                        index=index,
                        field=field or None,
                    )
                key = sanitize_text(key)
                where = f"{field}.{key}" if field else key
                out[key] = _clean(item, where, index, depth + 1, limit, exact)
            return out
        return [
            _clean(item, f"{field}[{i}]", index, depth + 1, limit, exact)
            for i, item in enumerate(value)
        ]
    if isinstance(value, bytes | bytearray | memoryview):
        return sanitize_text(bytes(value).decode("utf-8", "replace"))
    raise InvalidMessageError(
        f"{type_name(value)} is not JSON-serialisable", index=index, field=field or None
    )


def clean_value(
    value: Any, field: str = "", index: int | None = None, *, limit: int = MAX_MESSAGE_DEPTH
) -> Any:
    """Deep-copy ``value`` into plain JSON types under the value rule (module docstring).

    Args:
        value: Any Python value.
        field: Dotted path of ``value``, prefixed to the field an error names.
        index: Message index an error reports.
        limit: Deepest nesting allowed, ``value`` itself being level 1.

    Raises:
        InvalidMessageError: ``value`` breaks the rule; ``field`` says where.
    """
    try:
        return _clean(value, field, index, 0, limit, True)
    except RecursionError as exc:  # only when the caller's own stack is already deep
        raise InvalidMessageError("nested too deeply", index=index, field=field or None) from exc


# --------------------------------------------------------------------------- arguments


class _Invalid(Exception):
    """Internal: the arguments text breaks the rule (the message says how)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict_loads(text: str, orjson_error: Exception | None) -> Any:
    """The stdlib decoder (exact big integers, escaped lone surrogates), NaN/Infinity refused."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise _Invalid(f"nested too deeply (more than {MAX_ARGUMENTS_DEPTH} levels)") from exc
    except ValueError as exc:
        raise _Invalid(f"not valid JSON ({orjson_error or exc})") from exc


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(f"arguments must encode a JSON object, got {type_name(value)}")
    return value


def _fits(value: Any, depth: int) -> bool:
    """Whether an orjson-decoded container follows the rule (no copy, strings skipped).

    orjson already refused NaN, infinities and lone surrogates, so only numbers
    and depth are left to check. ``False`` sends the value to the full walk,
    which says what is wrong (or, for a large float, decodes exactly first).
    """
    if depth >= MAX_ARGUMENTS_DEPTH:
        return False
    items = value.values() if type(value) is dict else value
    for item in items:
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not INT_MIN <= item < INT_LIMIT:
                return False
        elif kind is float:
            if abs(item) >= INT_LIMIT:
                return False
        elif not _fits(item, depth + 1):
            return False
    return True


def _parse(text: str, index: int | None) -> ParsedArguments:
    if not text.strip():
        return ParsedArguments({}, "{}")
    try:
        decoded = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # orjson refuses escaped lone surrogates and nesting past 1024; the stdlib
        # decoder says which it was.
        decoded = _strict_loads(text, exc)
        exact = True
    else:
        exact = False
    _object(decoded)
    if not exact and _fits(decoded, 0):
        return ParsedArguments(decoded, text)
    try:
        try:
            value = _clean(decoded, "", index, 0, MAX_ARGUMENTS_DEPTH, exact)
        except _InexactInteger:
            decoded, exact = _strict_loads(text, None), True
            value = _clean(decoded, "", index, 0, MAX_ARGUMENTS_DEPTH, True)
    except InvalidMessageError as exc:
        where = f" at {exc.field!r}" if exc.field else ""
        raise _Invalid(f"{exc.reason}{where}") from exc
    if exact and value != decoded:
        # Lone surrogates were replaced: store what will be sent.
        return ParsedArguments(value, json.dumps(value, ensure_ascii=False))
    return ParsedArguments(value, text)


def parse_arguments(
    text: str, *, index: int | None = None, field: str | None = None
) -> ParsedArguments:
    """Decode tool-call arguments under the rule in the module docstring.

    Args:
        text: The ``function.arguments`` string.
        index: Message index an error reports.
        field: Field an error names (``tool_calls[0].function.arguments``).

    Returns:
        The decoded object and the text to store.

    Raises:
        InvalidMessageError: ``text`` breaks the rule; the reason says how.
    """
    try:
        return _parse(text, index)
    except _Invalid as exc:
        raise InvalidMessageError(str(exc), index=index, field=field) from exc


def encode_arguments(
    value: Mapping[str, Any], *, index: int | None = None, field: str | None = None
) -> str:
    """Compact JSON text of an arguments object (an Anthropic ``tool_use.input``), under the rule.

    Raises:
        InvalidMessageError: ``value`` breaks the rule (too deep, say).
    """
    return orjson.dumps(clean_value(value, field or "", index, limit=MAX_ARGUMENTS_DEPTH)).decode()


def decode_arguments(raw: object) -> dict[str, Any] | None:
    """The decoded arguments object when ``raw`` is a string that follows the rule, else ``None``.

    For readers of stored messages that must not fail (summaries, exports).
    """
    if not isinstance(raw, str):
        return None
    try:
        return _parse(raw, None).value
    except _Invalid:
        return None
