"""The LLM summarizer's import path of earlier releases (now :mod:`agentmem.yarn.summarizer`).

``from agentmem.summarizer import LLMSummarizer`` keeps working; new code
imports it from :mod:`agentmem` or :mod:`agentmem.yarn`.
"""

from agentmem.yarn.summarizer import (
    ASYNC_HINT,
    SUMMARY_INSTRUCTIONS,
    LLMSummarizer,
    SummaryRequest,
    asummary_text,
    is_async_summarizer,
    summary_text,
)

__all__ = [
    "ASYNC_HINT",
    "SUMMARY_INSTRUCTIONS",
    "LLMSummarizer",
    "SummaryRequest",
    "asummary_text",
    "is_async_summarizer",
    "summary_text",
]
