"""Token estimates, for calls the provider never reported (a stream cut off, a missing usage).

tiktoken's `o200k_base` encoding is used when it can be loaded (tiktoken fetches it once and
caches it; set TIKTOKEN_CACHE_DIR to ship it). Where it cannot (an offline machine with no
cache), estimates fall back to about four characters a token. Either way the figures are flagged
`estimated=True` wherever they are reported. Pruning decisions use the same counter.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage

if TYPE_CHECKING:
    from tiktoken import Encoding

__all__ = ["count_tokens", "estimate_prompt_tokens"]

logger = logging.getLogger(__name__)

_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 3  # OpenAI's documented per-message framing overhead
_TOKENS_PER_REPLY = 3


@functools.cache
def _encoding() -> Encoding | None:
    try:
        import tiktoken  # deferred: only estimates and pruning need it, and loading costs ~0.2 s

        return tiktoken.get_encoding("o200k_base")
    except Exception as exc:  # offline, no cache, or a broken install: all mean "no encoding"
        logger.warning("tiktoken encoding unavailable (%s); estimating 4 chars per token", exc)
        return None


def count_tokens(text: str) -> int:
    """Tokens in `text`: tiktoken's count, or a character-based estimate without tiktoken."""
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return -(-len(text) // _CHARS_PER_TOKEN)
    return len(encoding.encode(text, disallowed_special=()))


def estimate_prompt_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens a request with these messages costs, counted the way OpenAI documents it."""
    total = _TOKENS_PER_REPLY
    for message in messages:
        total += _TOKENS_PER_MESSAGE + count_tokens(message.text)
        if isinstance(message, AIMessage):
            total += sum(count_tokens(str(call["args"])) for call in message.tool_calls)
    return total
