"""Provider codecs: canonical (OpenAI Chat Completions) messages <-> a provider's shape.

- :mod:`agentmem._codecs.anthropic`: Anthropic Messages, both directions.

A codec converts shapes and nothing else: validation of canonical messages
lives in :mod:`agentmem.messages`, which imports the codecs and re-exports
their public names (``from_anthropic``, ``to_anthropic``, ...). A codec
imports only the modules below :mod:`agentmem.messages`
(:mod:`agentmem._shape`, :mod:`agentmem._json`, :mod:`agentmem.errors`).
"""

__all__: list[str] = []
