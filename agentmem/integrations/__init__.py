"""Adapters to host frameworks, each behind its own optional extra (docs/integrations/).

Nothing here is imported by ``import agentmem``; each module imports its framework
when it is imported itself, and a missing framework raises
:class:`~agentmem.errors.ConfigurationError` naming the extra to install.

* :mod:`agentmem.integrations.openai_agents`: ``AgentMemSession``, the OpenAI Agents
  SDK ``Session`` protocol (extra ``openai-agents``);
* :mod:`agentmem.integrations.langgraph`: ``AgentMemStore``, a LangGraph ``BaseStore``
  (extra ``langgraph``);
* :mod:`agentmem.integrations.langchain`: ``AgentMemMiddleware``, LangChain 1.x agent
  middleware (extra ``langchain``);
* :mod:`agentmem.integrations.anthropic_memory`: ``AgentMemMemoryTool``, Anthropic's
  ``memory_20250818`` tool served from the topic files (extra ``anthropic``).

Integrations sit above the facade: they take a :class:`agentmem.Memory` and use only
its public API.
"""

__all__: list[str] = []
