"""Message token counting's import path of earlier releases (now :mod:`agentmem.tokens.messages`).

``from agentmem.message_tokens import count_message`` keeps working; new code
imports these names from :mod:`agentmem.tokens`.
"""

from agentmem.tokens.messages import (
    IMAGE_TOKEN_ESTIMATE,
    MEDIA_PART_TYPES,
    MESSAGE_OVERHEAD_TOKENS,
    NAME_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    TOOL_CALL_OVERHEAD_TOKENS,
    count_message,
    count_messages,
    message_overhead,
    message_text_pieces,
)

__all__ = [
    "IMAGE_TOKEN_ESTIMATE",
    "MEDIA_PART_TYPES",
    "MESSAGE_OVERHEAD_TOKENS",
    "NAME_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TOOL_CALL_OVERHEAD_TOKENS",
    "count_message",
    "count_messages",
    "message_overhead",
    "message_text_pieces",
]
