"""Provider codecs: canonical (OpenAI Chat Completions) messages <-> a provider's shape.

- :mod:`agentmem._codecs.anthropic`: Anthropic Messages, both directions.
- :mod:`agentmem._codecs.responses` (items -> canonical) and
  :mod:`agentmem._codecs.responses_render` (canonical -> items): the OpenAI
  Responses API's input items, with the tables both read from the SDK's
  types in :mod:`agentmem._codecs._responses_schema`.

A codec converts shapes and nothing else: validation of canonical messages
lives in :mod:`agentmem.messages`, which imports the codecs and re-exports
their public names (``from_anthropic``, ``to_anthropic``,
``from_responses_items``, ``to_responses_items``, ...). A codec
imports only the modules below :mod:`agentmem.messages`
(:mod:`agentmem._shape`, :mod:`agentmem._json`, :mod:`agentmem.errors`).
"""

__all__: list[str] = []
