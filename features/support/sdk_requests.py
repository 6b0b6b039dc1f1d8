"""Request bodies checked against the official SDKs' own request types.

The `anthropic` and `openai` SDKs describe what a request may hold as TypedDicts
(`MessageCreateParams`, `CompletionCreateParams`). pydantic validates a body against them, but
it leaves lists typed `Iterable` to be checked as they are read, and it drops keys a TypedDict
does not name rather than refusing them: so the validated body is read whole, and it must come
back equal to the body sent. A misspelled `cache_control`, a `ttl` the API does not take or a
field the SDK does not know is a problem, named by its path.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

__all__ = ["anthropic_request_problems", "breakpoints", "openai_request_problems"]


@functools.cache
def _adapter(sdk: str, streamed: bool) -> TypeAdapter[Any]:
    if sdk == "anthropic":
        from anthropic.types import message_create_params as anthropic_params

        return TypeAdapter(
            anthropic_params.MessageCreateParamsStreaming
            if streamed
            else anthropic_params.MessageCreateParamsNonStreaming
        )
    from openai.types.chat import completion_create_params as openai_params

    return TypeAdapter(
        openai_params.CompletionCreateParamsStreaming
        if streamed
        else openai_params.CompletionCreateParamsNonStreaming
    )


def anthropic_request_problems(body: Mapping[str, Any]) -> list[str]:
    """What the anthropic SDK's `MessageCreateParams` does not accept in `body`."""
    return _problems("anthropic", body)


def openai_request_problems(body: Mapping[str, Any]) -> list[str]:
    """What the openai SDK's `CompletionCreateParams` does not accept in `body`."""
    return _problems("openai", body)


def _problems(sdk: str, body: Mapping[str, Any]) -> list[str]:
    adapter = _adapter(sdk, bool(body.get("stream")))
    try:
        accepted = _read_whole(adapter.validate_python(body))
    except ValidationError as exc:
        return [_first_error(exc)]
    return list(_differences(body, accepted, "body"))


def _first_error(exc: ValidationError) -> str:
    """The error of the best-matching union member: the one reaching deepest into the body."""
    error = max(exc.errors(include_url=False), key=lambda each: len(each["loc"]))
    return f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"


def _read_whole(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: _read_whole(item) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Iterable):
        return [_read_whole(item) for item in value]
    return value


def _differences(sent: object, accepted: object, path: str) -> Iterable[str]:
    if isinstance(sent, Mapping) and isinstance(accepted, Mapping):
        for key in sent:
            if key not in accepted:
                yield f"{path}.{key}: not a field of the SDK's type"
            else:
                yield from _differences(sent[key], accepted[key], f"{path}.{key}")
    elif isinstance(sent, list) and isinstance(accepted, list):
        for position, (item, kept) in enumerate(zip(sent, accepted, strict=True)):
            yield from _differences(item, kept, f"{path}.{position}")
    elif sent != accepted:
        yield f"{path}: {sent!r} was read as {accepted!r}"


def breakpoints(body: Mapping[str, Any]) -> list[tuple[str, object]]:
    """Every `cache_control` of an Anthropic request, by the path of the block it marks
    (`tools.0`, `system.0`, `messages.3.content.0`), in the API's order of the prefix."""
    found: list[tuple[str, object]] = []
    for part in ("tools", "system", "messages"):
        _collect(body.get(part), part, found)
    return found


def _collect(value: object, path: str, found: list[tuple[str, object]]) -> None:
    if isinstance(value, Mapping):
        if "cache_control" in value:
            found.append((path, value["cache_control"]))
        for key, item in value.items():
            if key != "cache_control":
                _collect(item, f"{path}.{key}", found)
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _collect(item, f"{path}.{position}", found)
