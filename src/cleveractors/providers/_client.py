"""Settings every provider applies to the client of a model it builds from config."""

from __future__ import annotations

from typing import Final

__all__ = ["CLIENT_MAX_RETRIES"]

CLIENT_MAX_RETRIES: Final = 0
"""The retries a provider's own client makes: none. Retries are the tool loop's (config
`max_retries`), so that each attempt is a usage record and a `call_retrying` event; a client
retrying inside one call would resend (and be billed for) requests the loop never sees. Pass it
to the client's retry setting of every model built from config (`max_retries` for
langchain-openai and langchain-anthropic, `retries` or the equivalent elsewhere)."""
