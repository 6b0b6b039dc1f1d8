"""Server-Sent Events frames: a typed event as `event: <kind>` / `data: <json>`, or bare data."""

from __future__ import annotations

from sse_starlette import ServerSentEvent

from cleveractors.events import Event, event_adapter

__all__ = ["SSE_LINE_SEPARATOR", "data_frame", "event_frame"]

SSE_LINE_SEPARATOR = "\n"
"""CR, LF and CRLF are all valid SSE; plain LF keeps hand-written clients (the chat page) simple."""


def event_frame(event: Event) -> ServerSentEvent:
    """One SSE message per event: named by its `kind`, its JSON (`event_adapter`) as data."""
    return ServerSentEvent(
        event_adapter.dump_json(event).decode(), event=event.kind, sep=SSE_LINE_SEPARATOR
    )


def data_frame(data: str) -> ServerSentEvent:
    """One unnamed SSE message, as OpenAI's streaming API sends them (`data: {...}`)."""
    return ServerSentEvent(data, sep=SSE_LINE_SEPARATOR)
