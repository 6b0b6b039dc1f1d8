"""Token estimates, for calls the provider never reported (a stream cut off, a missing usage).

tiktoken's `o200k_base` encoding is used when it is in tiktoken's cache (`TIKTOKEN_CACHE_DIR`,
or tiktoken's default cache folder; fill it once with `cleveractors.tokens.download_encoding()`).
It is never downloaded during a run: tiktoken fetches without a timeout, and a run must not hang
on a network it does not need. Without it, estimates count about four characters a token. Either
way the figures are flagged `estimated=True` wherever they are reported. Pruning decisions and
the sizing of the next prompt against the context window (`count_message_tokens`, one message
at a time, each counted once) use the same counter.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage

if TYPE_CHECKING:
    from tiktoken import Encoding

__all__ = [
    "count_message_tokens",
    "count_tokens",
    "download_encoding",
    "estimate_prompt_tokens",
    "reload_encoding",
    "warm_up",
]

logger = logging.getLogger(__name__)

_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 3  # OpenAI's documented per-message framing overhead
_TOKENS_PER_REPLY = 3


_ENCODING_NAME = "o200k_base"
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
# tiktoken's own checksum of that file (tiktoken_ext/openai_public.py). A cached file that does
# not match is deleted by tiktoken and downloaded again, without a timeout: we check first.
_ENCODING_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def _cached_encoding_path() -> Path | None:
    """Where tiktoken caches the encoding file (its own rule), or None when caching is off."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None
    key = hashlib.sha1(_ENCODING_URL.encode(), usedforsecurity=False).hexdigest()
    return Path(cache_dir) / key


@functools.cache
def _encoding() -> Encoding | None:
    path = _cached_encoding_path()
    if path is None or not path.exists():
        logger.info("tiktoken's %s is not cached; estimating 4 chars per token", _ENCODING_NAME)
        return None
    if not _is_intact(path):
        logger.warning(
            "tiktoken's cached %s at %s is unusable (not the file tiktoken expects); "
            "estimating 4 chars per token",
            _ENCODING_NAME,
            path,
        )
        return None
    try:
        import tiktoken  # deferred: only estimates and pruning need it

        return tiktoken.get_encoding(_ENCODING_NAME)
    except Exception as exc:  # a corrupt cache or a broken install both mean "no encoding"
        logger.warning("tiktoken encoding unusable (%s); estimating 4 chars per token", exc)
        return None


def _is_intact(path: Path) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == _ENCODING_SHA256
    except OSError:  # a folder, or a file we may not read: unusable either way
        return False


def warm_up() -> None:
    """Load the encoding now (from the cache only), so no run pays for it inside the event loop."""
    _encoding()


def reload_encoding() -> None:
    """Look for the encoding again, from the cache only, and use what is found from now on.

    The counter looks once per process and keeps what it found (the encoding, or its absence).
    Call this after pointing `TIKTOKEN_CACHE_DIR` elsewhere, or after another process filled
    the cache; it never downloads.
    """
    _encoding.cache_clear()
    _encoding()


def download_encoding() -> None:
    """Fetch tiktoken's encoding into its cache (needs the network); later runs use it."""
    import tiktoken

    tiktoken.get_encoding(_ENCODING_NAME)
    reload_encoding()


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
    return _TOKENS_PER_REPLY + sum(count_message_tokens(message) for message in messages)


def count_message_tokens(message: BaseMessage) -> int:
    """Tokens one message adds to a request: its text, its tool calls' arguments and OpenAI's
    documented framing of a message."""
    total = _TOKENS_PER_MESSAGE + count_tokens(message.text)
    if isinstance(message, AIMessage):
        total += sum(count_tokens(str(call["args"])) for call in message.tool_calls)
    return total
