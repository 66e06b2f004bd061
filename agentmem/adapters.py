"""Turn an OpenAI-style or Anthropic-style client into an :class:`~agentmem.protocols.LLM`.

agentmem talks to models only through the ``llm(messages, tools=None) ->
dict`` protocol (OpenAI-format messages in, one OpenAI-format assistant
message out). These adapters wrap the two client shapes most hosts already
hold, without importing either SDK (neither is a dependency)::

    from openai import OpenAI
    from anthropic import Anthropic

    mem = Memory(llm=openai_llm(OpenAI(), "gpt-4o"))
    mem = Memory(llm=anthropic_llm(Anthropic(), "claude-sonnet-4-5", max_tokens=4096))

Duck typing: :func:`openai_llm` needs ``client.chat.completions.create`` and
reads ``response.choices[0].message`` and ``response.usage``;
:func:`anthropic_llm` needs ``client.messages.create`` and reads
``response.content`` (blocks with a ``type``) and ``response.usage``. The
response may be the SDK's objects (attribute access) or plain dicts. When
``create`` is a coroutine function, looking through decorators
(``AsyncOpenAI``, ``AsyncAnthropic``), the adapter returned is async (``async def __call__``), so
:func:`agentmem.llm.is_async_llm` is true for it and the ``a``-prefixed
entry points await it.

What goes out: the messages pass through :func:`agentmem.repair.build_payload`
for the client's provider, so whatever a flow hands over (a reply that still
carries its ``usage`` block or Anthropic ``thinking_blocks``, a forked
history) is sent provider-valid, internal fields stripped. For Anthropic the
system prompt is split out and the tools become ``{"name", "description",
"input_schema"}`` specs. ``tools`` is sent only when non-empty.

What comes back: an assistant dict with ``content``, ``tool_calls``
(``id``, ``type``, ``function: {name, arguments}``), ``reasoning_content``
and ``refusal`` when present (Anthropic thinking blocks are also kept
verbatim in ``thinking_blocks``, so they round-trip), and ``usage =
{"prompt_tokens", "completion_tokens", "cost_usd"}``, read by
:func:`agentmem.llm.parse_usage`, plus ``cached_prompt_tokens`` and
``cache_write_tokens`` when the provider reported cache reads or writes (so
``s.record_usage(reply)`` bills them apart). For Anthropic, ``prompt_tokens``
is ``input_tokens`` plus the cache-creation and cache-read input tokens (the
whole prompt, which is what token calibration needs). ``cost_usd`` is
``0.0`` unless a ``price`` (USD per token, keys ``prompt_tokens`` and
``completion_tokens``) was given.

Errors: whatever the client raises propagates unchanged (retries and
backoff are the host's policy). A response the adapter cannot read raises
:class:`~agentmem.errors.LLMError` naming the missing or bad field. Bad
adapter arguments (``price``, ``stream=True``, a non-function tool spec)
raise :class:`~agentmem.errors.InvalidArgumentError`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from agentmem._json import encode_arguments, type_name
from agentmem._tool_specs import provider_tools
from agentmem.errors import AgentMemError, InvalidArgumentError, LLMError
from agentmem.llm import check_reply, parse_usage
from agentmem.messages import from_anthropic, normalize_messages
from agentmem.protocols import LLM, AsyncLLM
from agentmem.repair import build_payload

__all__ = ["anthropic_llm", "anthropic_tools", "openai_llm"]

PRICE_KEYS: Final = ("prompt_tokens", "completion_tokens")
"""Keys of a ``price`` mapping: USD per prompt token and per completion token."""

_MISSING: Final[Any] = object()


# --------------------------------------------------------------------------- reading responses


def _field(obj: Any, key: str, where: str, *, required: bool = True) -> Any:
    """``obj[key]`` (a mapping) or ``obj.key`` (an SDK object); ``None`` if optional and absent."""
    if isinstance(obj, Mapping):
        value = obj.get(key, _MISSING)
    else:
        value = getattr(obj, key, _MISSING)
    if value is _MISSING or (required and value is None):
        if required:
            raise LLMError(f"the response has no {where}.{key}" if where else f"no {key}")
        return None
    return value


def _items(value: Any, where: str) -> list[Any]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise LLMError(f"the response's {where} is {type_name(value)}, not a list")
    return list(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise LLMError(f"the response's {where} is {type_name(value)}, not a string")
    return value


def _check_price(price: Mapping[str, Any] | None) -> tuple[float, float]:
    if price is None:
        return 0.0, 0.0
    if not isinstance(price, Mapping):
        raise InvalidArgumentError(f"price must be a mapping or None, got {type_name(price)}")
    unknown = sorted(str(k) for k in price if k not in PRICE_KEYS)
    if unknown:
        raise InvalidArgumentError(
            f"price has unknown key {unknown[0]!r}; expected {' and '.join(PRICE_KEYS)}"
        )
    rates = []
    for key in PRICE_KEYS:
        value = price.get(key, 0.0)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise InvalidArgumentError(
                f"price[{key!r}] must be a finite number >= 0 (USD per token), got {value!r}"
            )
        rates.append(float(value))
    return rates[0], rates[1]


def _usage(usage: Any, rates: tuple[float, float]) -> dict[str, Any]:
    """The reply's ``usage``: the provider's report read by the one parser
    (:func:`agentmem.llm.parse_usage`), cached and cache-written parts kept apart."""
    figures = parse_usage(usage)
    prompt, completion = figures.prompt_tokens, figures.completion_tokens
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_usd": prompt * rates[0] + completion * rates[1],
    }
    if figures.cached_prompt_tokens:
        out["cached_prompt_tokens"] = figures.cached_prompt_tokens
    if figures.cache_write_tokens:
        out["cache_write_tokens"] = figures.cache_write_tokens
    return out


def _check_params(params: Mapping[str, Any], reserved: Sequence[str]) -> None:
    if params.get("stream"):
        raise InvalidArgumentError("stream=True is not supported: an LLM returns one whole reply")
    clash = [key for key in reserved if key in params]
    if clash:
        raise InvalidArgumentError(f"{clash[0]!r} is set by the adapter; do not pass it in params")


def _create(client: Any, path: tuple[str, ...], name: str) -> Callable[..., Any]:
    target = client
    for part in path:
        target = getattr(target, part, None)
    if not callable(target):
        raise InvalidArgumentError(
            f"client must have a callable {'.'.join(('client', *path))} ({name}), "
            f"got {type_name(client)}"
        )
    return cast(Callable[..., Any], target)


def _is_async(create: Callable[..., Any]) -> bool:
    """Whether ``create`` is a coroutine function, looking through decorators.

    The SDKs wrap their async ``create`` in a plain ``def`` decorator (with
    ``functools.wraps``), so the wrapper itself does not look async.
    """
    if inspect.iscoroutinefunction(create):
        return True
    try:
        return inspect.iscoroutinefunction(inspect.unwrap(create))
    except ValueError:  # a __wrapped__ cycle
        return False


class _Adapter:
    """Shared shape of the four adapters: a sans-IO request builder and reply reader."""

    provider: str

    def __init__(self, create: Callable[..., Any], model: str, rates: tuple[float, float]) -> None:
        self._create = create
        self.model = model
        self._rates = rates

    def _request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _reply(self, response: Any) -> dict[str, Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        kind = "async " if inspect.iscoroutinefunction(type(self).__call__) else ""
        return f"<{kind}{self.provider} LLM adapter for {self.model!r}>"


def _read(reader: Callable[[Any], dict[str, Any]], response: Any) -> dict[str, Any]:
    """Run a reply reader; an ``AgentMemError`` from the codec becomes an ``LLMError``."""
    try:
        return check_reply(reader(response))
    except LLMError:
        raise
    except AgentMemError as exc:
        raise LLMError(f"the response could not be read: {exc}") from exc


# --------------------------------------------------------------------------- OpenAI


def _openai_tool_call(call: Any, where: str) -> dict[str, Any]:
    function = _field(call, "function", where)
    name = _text(_field(function, "name", f"{where}.function"), f"{where}.function.name")
    arguments = _field(function, "arguments", f"{where}.function", required=False)
    if arguments is None:
        arguments = "{}"
    elif isinstance(arguments, Mapping):  # some compatible servers send an object
        arguments = encode_arguments(arguments, field=f"{where}.function.arguments")
    return {
        "id": _text(_field(call, "id", where), f"{where}.id"),
        "type": "function",
        "function": {"name": name, "arguments": _text(arguments, f"{where}.function.arguments")},
    }


class _OpenAI(_Adapter):
    provider = "openai"

    def __init__(
        self,
        create: Callable[..., Any],
        model: str,
        rates: tuple[float, float],
        params: dict[str, Any],
    ) -> None:
        super().__init__(create, model, rates)
        self._params = params

    def _request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": build_payload(normalize_messages(messages), provider="openai"),
        }
        if tools:
            kwargs["tools"] = list(tools)
        kwargs.update(self._params)
        return kwargs

    def _reply(self, response: Any) -> dict[str, Any]:
        choices = _items(_field(response, "choices", ""), "choices")
        if not choices:
            raise LLMError("the response has no choices[0]")
        message = _field(choices[0], "message", "choices[0]")
        where = "choices[0].message"
        content = _field(message, "content", where, required=False)
        if content is not None and not isinstance(content, str | list):
            raise LLMError(f"the response's {where}.content is {type_name(content)}")
        reply: dict[str, Any] = {"role": "assistant", "content": content}
        raw_calls = _field(message, "tool_calls", where, required=False)
        if raw_calls:
            reply["tool_calls"] = [
                _openai_tool_call(call, f"{where}.tool_calls[{i}]")
                for i, call in enumerate(_items(raw_calls, f"{where}.tool_calls"))
            ]
        for key in ("reasoning_content", "refusal"):
            value = _field(message, key, where, required=False)
            if value is None and not isinstance(message, Mapping):
                extra = getattr(message, "model_extra", None)  # pydantic keeps unknown keys here
                value = extra.get(key) if isinstance(extra, Mapping) else None
            if value is not None:
                reply[key] = _text(value, f"{where}.{key}")
        usage = _field(response, "usage", "", required=False)
        reply["usage"] = _usage(usage, self._rates)
        return reply


class _SyncOpenAI(_OpenAI):
    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return _read(self._reply, self._create(**self._request(messages, tools)))


class _AsyncOpenAI(_OpenAI):
    async def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return _read(self._reply, await self._create(**self._request(messages, tools)))


def openai_llm(
    client: Any, model: str, *, price: Mapping[str, float] | None = None, **params: Any
) -> LLM | AsyncLLM:
    """An LLM that calls ``client.chat.completions.create`` (OpenAI and compatible servers).

    Args:
        client: An ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client, or
            anything with the same ``chat.completions.create``.
        model: The model name sent with every request.
        price: USD per token, ``{"prompt_tokens": ..., "completion_tokens": ...}``;
            the reply's ``usage.cost_usd`` is computed from it (``0.0`` without).
        **params: Extra arguments for every ``create`` call (``temperature``,
            ``max_tokens``, ``reasoning_effort``...).

    Returns:
        A sync LLM, or an async one when ``create`` is a coroutine function.

    Raises:
        InvalidArgumentError: no callable ``client.chat.completions.create``,
            an empty ``model``, a bad ``price``, ``stream=True``, or ``params``
            setting ``model``, ``messages`` or ``tools``.
    """
    create = _create(client, ("chat", "completions", "create"), "an OpenAI-style client")
    if not isinstance(model, str) or not model:
        raise InvalidArgumentError(f"model must be a non-empty string, got {model!r}")
    _check_params(params, ("model", "messages", "tools"))
    cls = _AsyncOpenAI if _is_async(create) else _SyncOpenAI
    return cls(create, model, _check_price(price), dict(params))


# --------------------------------------------------------------------------- Anthropic


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Convert OpenAI function tool specs to Anthropic ``{"name", "description", "input_schema"}``.

    Raises:
        InvalidArgumentError: a spec is not an OpenAI function tool with a name.
    """
    for i, spec in enumerate(tools):
        if not isinstance(spec, Mapping) or spec.get("type") != "function":
            raise InvalidArgumentError(
                f"tools[{i}] must be an OpenAI function tool "
                '({"type": "function", "function": {...}})'
            )
        function = spec.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidArgumentError(f"tools[{i}].function must have a string name")
    # The conversion itself is the window's (one rule for what Anthropic is sent and counted).
    return [
        {**tool, "input_schema": dict(tool["input_schema"])}
        for tool in provider_tools(list(tools), "anthropic")
    ]


_BLOCK_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "text": ("text",),
    "tool_use": ("id", "name", "input"),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
}


def _anthropic_block(block: Any, where: str) -> dict[str, Any]:
    kind = _field(block, "type", where)
    keys = _BLOCK_KEYS.get(kind) if isinstance(kind, str) else None
    if keys is None:
        raise LLMError(
            f"the response's {where} has block type {kind!r}; the adapter reads "
            f"{', '.join(_BLOCK_KEYS)}"
        )
    out: dict[str, Any] = {"type": kind}
    for key in keys:
        value = _field(block, key, where, required=key != "signature")
        if value is not None:
            out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


class _Anthropic(_Adapter):
    provider = "anthropic"

    def __init__(
        self,
        create: Callable[..., Any],
        model: str,
        rates: tuple[float, float],
        max_tokens: int,
        params: dict[str, Any],
    ) -> None:
        super().__init__(create, model, rates)
        self.max_tokens = max_tokens
        self._params = params

    def _request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        system, turns = build_payload(normalize_messages(messages), provider="anthropic")
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": turns,
        }
        if system is not None:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = anthropic_tools(tools)
        kwargs.update(self._params)
        return kwargs

    def _reply(self, response: Any) -> dict[str, Any]:
        blocks = [
            _anthropic_block(block, f"content[{i}]")
            for i, block in enumerate(_items(_field(response, "content", ""), "content"))
        ]
        (reply,) = from_anthropic([{"role": "assistant", "content": blocks}])
        usage = _field(response, "usage", "", required=False)
        return {**reply, "usage": _usage(usage, self._rates)}


class _SyncAnthropic(_Anthropic):
    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return _read(self._reply, self._create(**self._request(messages, tools)))


class _AsyncAnthropic(_Anthropic):
    async def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return _read(self._reply, await self._create(**self._request(messages, tools)))


def anthropic_llm(
    client: Any,
    model: str,
    max_tokens: int = 4096,
    *,
    price: Mapping[str, float] | None = None,
    **params: Any,
) -> LLM | AsyncLLM:
    """An LLM that calls ``client.messages.create`` (the Anthropic Messages API).

    Args:
        client: An ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``
            client, or anything with the same ``messages.create``.
        model: The model name sent with every request.
        max_tokens: The reply's token limit (Anthropic requires one).
        price: As for :func:`openai_llm`.
        **params: Extra arguments for every ``create`` call (``temperature``,
            ``thinking``...).

    Returns:
        A sync LLM, or an async one when ``create`` is a coroutine function.

    Raises:
        InvalidArgumentError: no callable ``client.messages.create``, an
            empty ``model``, ``max_tokens`` not a positive int, a bad
            ``price``, ``stream=True``, or ``params`` setting ``model``,
            ``messages``, ``system``, ``tools`` or ``max_tokens``.
    """
    create = _create(client, ("messages", "create"), "an Anthropic-style client")
    if not isinstance(model, str) or not model:
        raise InvalidArgumentError(f"model must be a non-empty string, got {model!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidArgumentError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    _check_params(params, ("model", "messages", "system", "tools", "max_tokens"))
    cls = _AsyncAnthropic if _is_async(create) else _SyncAnthropic
    return cls(create, model, _check_price(price), max_tokens, dict(params))
