"""Argument checks of the public API: each bad argument becomes an AgentMemError naming it.

:mod:`agentmem.memory` wires parts together; these helpers turn what a host
passes to ``Memory(...)``, ``Memory.session(...)``, the ``Session`` methods
and the stores' public methods (:mod:`agentmem.ltm`, :mod:`agentmem.notes`,
:mod:`agentmem.topics`) into validated values, raising
:class:`~agentmem.errors.ConfigurationError` for configuration and
:class:`~agentmem.errors.InvalidArgumentError` for per-call arguments, so no
``TypeError``, ``OverflowError`` or pydantic error escapes the public API.
The per-call checks (:func:`check_int`, :func:`check_count`,
:func:`check_number`, :func:`check_str`, :func:`check_strings`) import nothing
above :mod:`agentmem.errors`, so every part may use them: this is the one
module of argument validators (limits, counts, flags, components), and a part
that needs such a check calls it here rather than growing its own copy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from agentmem.errors import ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:
    from agentmem.context import ContextSettings

__all__ = [
    "check_component",
    "check_count",
    "check_flag",
    "check_injections",
    "check_int",
    "check_number",
    "check_path",
    "check_str",
    "check_strings",
    "config_path",
    "context_settings",
    "cost_value",
]


def check_int(
    label: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` when it is an int (not a bool) within the bounds, else
    :class:`InvalidArgumentError` naming ``label``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{label} must be an int, got {type(value).__name__}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "" if minimum is None else f" >= {minimum}"
        high = "" if maximum is None else f" <= {maximum}"
        joint = " and" if low and high else ""
        raise InvalidArgumentError(f"{label} must be{low}{joint}{high}, got {value!r}")
    return int(value)


def check_count(label: str, value: object, *, positive: bool = False) -> int:
    """``value`` when it is an int (not a bool) >= 0 (>= 1 with ``positive``), else
    :class:`InvalidArgumentError` naming ``label``: a limit, an index, a token count."""
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        bound = "a positive" if positive else "a non-negative"
        raise InvalidArgumentError(f"{label} must be {bound} integer, got {value!r}")
    return value


def check_number(
    label: str, value: object, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    """``value`` as a finite float within the bounds (bools refused), else
    :class:`InvalidArgumentError` naming ``label``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{label} must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{label} must be a finite number, got {value!r}")
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise InvalidArgumentError(
            f"{label} must be from {minimum if minimum is not None else '-inf'} to "
            f"{maximum if maximum is not None else 'inf'}, got {value!r}"
        )
    return number


def check_str(label: str, value: object, *, max_chars: int | None = None) -> str:
    """``value`` when it is a str (of at most ``max_chars``), else :class:`InvalidArgumentError`."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{label} must be a string, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise InvalidArgumentError(f"{label} is longer than {max_chars} characters")
    return value


def check_path(label: str, value: object) -> Path:
    """``value`` as a path, or an :class:`InvalidArgumentError` naming ``label`` (not
    ``str``/``os.PathLike``, a bytes path, a NUL byte, a name that cannot be encoded)."""
    try:
        return config_path(label, value)
    except ConfigurationError as exc:
        raise InvalidArgumentError(str(exc)) from exc


def check_strings(label: str, value: object) -> tuple[str, ...]:
    """``value`` as a tuple of strings (a single string is refused), else
    :class:`InvalidArgumentError` naming the bad item."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidArgumentError(
            f"{label} must be a sequence of strings, got {type(value).__name__}"
        )
    items = tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidArgumentError(
                f"{label}[{index}] must be a string, got {type(item).__name__}"
            )
    return items


def config_path(label: str, value: object) -> Path:
    """``value`` as a path (a leading ``~`` expanded), or a :class:`ConfigurationError`
    naming the argument."""
    if not isinstance(value, str | PathLike):
        raise ConfigurationError(
            f"{label} must be a path (str or os.PathLike), got {type(value).__name__}"
        )
    try:
        path = Path(value)
        if str(path).startswith("~"):
            path = path.expanduser()  # RuntimeError (no home directory) is caught below
        str(path).encode("utf-8")
        if "\x00" in str(path):
            raise ValueError("embedded null byte")
        return path
    except (TypeError, ValueError, RuntimeError) as exc:  # bytes, NUL, surrogates, no home
        raise ConfigurationError(f"{label} is not a usable path: {value!r} ({exc})") from exc


def cost_value(value: object) -> float | None:
    """``value`` as a non-negative finite float, or ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        cost = float(value)
    except OverflowError:
        return None
    return cost if 0 <= cost < math.inf else None


def check_injections(injections: object) -> None:
    if isinstance(injections, str | bytes) or not isinstance(injections, Sequence):
        raise InvalidArgumentError(
            f"injections must be a sequence of strings, got {type(injections).__name__}"
        )
    for index, text in enumerate(injections):
        if not isinstance(text, str):
            raise InvalidArgumentError(
                f"injections[{index}] must be a string, got {type(text).__name__}"
            )


def check_flag(label: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{label} must be True or False, got {value!r}")


def check_component(label: str, value: object, protocol: type, shape: str) -> None:
    """Refuse a component that does not have its protocol's shape (attribute names only)."""
    if value is not None and not isinstance(value, protocol):
        raise ConfigurationError(
            f"{label} must provide {shape} ({protocol.__name__}), got {type(value).__name__}"
        )


def context_settings(context: object) -> ContextSettings:
    """The ``context`` argument as settings, or a :class:`ConfigurationError` naming the field."""
    # Imported here so the stores can use the checks above without loading the context pipeline.
    from agentmem.context import ContextSettings

    if context is None:
        return ContextSettings()
    if isinstance(context, ContextSettings):
        return context
    if not isinstance(context, Mapping):
        raise ConfigurationError(
            f"context must be ContextSettings or a mapping, got {type(context).__name__}"
        )
    # ContextSettings raises ConfigurationError itself, naming the field.
    return ContextSettings(**{str(k): v for k, v in context.items()})
