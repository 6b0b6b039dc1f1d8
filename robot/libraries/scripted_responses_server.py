"""A scripted OpenAI Responses API server on 127.0.0.1, for wire tests of
`ChatOpenAI(use_responses_api=True)`. Test machinery only: not shipped.

`POST /v1/responses` consumes one `ScriptedResponsesReply` and answers with a `response` object,
or, when the request says `stream: true`, with the API's semantic SSE events:
`response.created`, `response.in_progress`, per output item `response.output_item.added` /
`.done` (a `reasoning` item with its summary deltas and `encrypted_content`, a `message` with
`response.output_text.delta` per word, `function_call` items with
`response.function_call_arguments.delta` pieces), and `response.completed` with usage
(`input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`).

Like the real API, a request whose `input` carries a `function_call` item this server issued
without the `reasoning` item that preceded it (matched by id) gets HTTP 400. Built on
`cleveractors.testing.wire` like the shipped servers, it keeps their records (request bodies and
headers, what it billed) and their HTTP behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from pydantic import NonNegativeInt

from cleveractors.testing import BilledCall, ScriptedReply, call_arguments_text, count_words
from cleveractors.testing.wire import Rejection, ScriptedWireServer, WireHandler


class ScriptedResponsesReply(ScriptedReply):
    """A `ScriptedReply` with a reasoning item and the usage details the Responses API reports."""

    reasoning: str = ""
    """Summary text of a `reasoning` item sent before the output (billed as reasoning tokens)."""
    cached_tokens: NonNegativeInt = 0
    """Part of the prompt reported as `input_tokens_details.cached_tokens`."""


@dataclass(frozen=True)
class _Item:
    """One output item: its final form and the stream events between `added` and `done`."""

    final: dict[str, Any]
    added: dict[str, Any]
    events: tuple[dict[str, Any], ...]


class _Handler(WireHandler["ScriptedResponsesServer"]):
    route = "/v1/responses"
    bad_body_message = "Body must be a JSON object with `input`"
    event_field = "type"

    def accepts(self, body: dict[str, Any]) -> bool:
        return isinstance(body.get("input"), str | list)

    def error_payload(self, status: int, message: str) -> dict[str, Any]:
        return _error_payload(status, message)

    def send_rejection(self, rejection: Rejection) -> None:
        # Only the input check refuses a request (400); the API names the parameter.
        param = "input" if rejection.status == HTTPStatus.BAD_REQUEST else None
        self.send_json(rejection.status, _error_payload(rejection.status, rejection.message, param))

    def answer(self, index: int, reply: ScriptedReply, body: dict[str, Any]) -> None:
        items = _output_items(index, reply)
        billed = _bill(index, reply, body)
        self.owner.issue(dict(_reasoning_before(items)))
        self.owner.bill(billed)
        usage = _usage(billed)
        if not body.get("stream"):
            output = [item.final for item in items]
            self.send_json(HTTPStatus.OK, _response(index, body, output, usage))
            return
        self.start_event_stream()
        for number, event in enumerate(_stream_events(index, body, items, usage)):
            self.write_event({**event, "sequence_number": number})
        self.end_event_stream()


class ScriptedResponsesServer(ScriptedWireServer[BilledCall]):
    """Replays `script` over `POST /v1/responses` on a free port of 127.0.0.1."""

    handler = _Handler

    @property
    def base_url(self) -> str:
        """The OpenAI `base_url`, with `/v1`."""
        return f"{self.origin}/v1"

    def refusal(self, body: Mapping[str, Any], issued: Mapping[str, str]) -> Rejection | None:
        """The API's 400 for a function_call item sent without its reasoning item; `issued`
        maps each function_call id to the id of the reasoning item before it."""
        message = _missing_reasoning(body["input"], issued)
        return None if message is None else Rejection(HTTPStatus.BAD_REQUEST, message)


def _missing_reasoning(items: object, reasoning_before: Mapping[str, str]) -> str | None:
    """The API's 400 message for a function_call item sent without its reasoning item."""
    if not isinstance(items, list):
        return None
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "reasoning":
            seen.add(str(item.get("id")))
        required = reasoning_before.get(str(item.get("id")))
        if item.get("type") == "function_call" and required and required not in seen:
            return (
                f"Item '{item['id']}' of type 'function_call' was provided without its "
                f"required 'reasoning' item: '{required}'."
            )
    return None


def _input_words(body: Mapping[str, Any]) -> int:
    """Prompt billed: the words of the instructions and of every input item's text."""
    total = count_words(str(body.get("instructions") or ""))
    items = body["input"]
    for item in [items] if isinstance(items, str) else items:
        total += _words_of(item)
    return total


def _words_of(value: object) -> int:
    if isinstance(value, str):
        return count_words(value)
    if isinstance(value, list):
        return sum(_words_of(part) for part in value)
    if not isinstance(value, dict):
        return 0
    keys = ("content", "text", "arguments", "output", "summary")
    return sum(_words_of(value.get(key)) for key in keys)


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _words(text: str) -> list[str]:
    # Each piece keeps its leading space, so the pieces join back into the text.
    words = text.split(" ")
    return [words[0], *(" " + word for word in words[1:])] if text else []


def _reasoning_item(index: int, reply: ScriptedResponsesReply) -> _Item:
    item_id = f"rs_scripted_{index}"
    final = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": reply.reasoning}],
        "encrypted_content": f"enc_scripted_{index}",
    }
    part = {"type": "summary_text", "text": ""}
    where = {"item_id": item_id, "summary_index": 0}
    events = [
        {"type": "response.reasoning_summary_part.added", **where, "part": part},
        *(
            {"type": "response.reasoning_summary_text.delta", **where, "delta": word}
            for word in _words(reply.reasoning)
        ),
        {"type": "response.reasoning_summary_text.done", **where, "text": reply.reasoning},
        {
            "type": "response.reasoning_summary_part.done",
            **where,
            "part": {**part, "text": reply.reasoning},
        },
    ]
    added = {"id": item_id, "type": "reasoning", "summary": []}
    return _Item(final=final, added=added, events=tuple(events))


def _message_item(index: int, text: str) -> _Item:
    item_id = f"msg_scripted_{index}"
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    where = {"item_id": item_id, "content_index": 0}
    events = [
        {"type": "response.content_part.added", **where, "part": part},
        *(
            {"type": "response.output_text.delta", **where, "delta": word, "logprobs": []}
            for word in _words(text)
        ),
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": {**part, "text": text}},
    ]
    base = {"id": item_id, "type": "message", "role": "assistant"}
    final = {**base, "status": "completed", "content": [{**part, "text": text}]}
    added = {**base, "status": "in_progress", "content": []}
    return _Item(final=final, added=added, events=tuple(events))


def _function_call_item(index: int, position: int, reply: ScriptedReply) -> _Item:
    call = reply.tool_calls[position]
    arguments = call_arguments_text(call)
    base = {
        "id": f"fc_scripted_{index}_{position}",
        "type": "function_call",
        "call_id": call.id or f"call_scripted_{index}_{position}",
        "name": call.name,
    }
    where = {"item_id": base["id"]}
    events = [
        *(
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in _pieces(arguments, reply.args_chunk_size)
        ),
        {"type": "response.function_call_arguments.done", **where, "arguments": arguments},
    ]
    final = {**base, "arguments": arguments, "status": "completed"}
    added = {**base, "arguments": "", "status": "in_progress"}
    return _Item(final=final, added=added, events=tuple(events))


def _output_items(index: int, reply: ScriptedReply) -> list[_Item]:
    items = []
    if isinstance(reply, ScriptedResponsesReply) and reply.reasoning:
        items.append(_reasoning_item(index, reply))
    if reply.text:
        items.append(_message_item(index, reply.text))
    items.extend(_function_call_item(index, n, reply) for n in range(len(reply.tool_calls)))
    return items


def _bill(index: int, reply: ScriptedReply, body: Mapping[str, Any]) -> BilledCall:
    reasoning = reply.reasoning if isinstance(reply, ScriptedResponsesReply) else ""
    arguments = " ".join(call_arguments_text(call) for call in reply.tool_calls)
    output = count_words(f"{reasoning} {reply.text} {arguments}")
    prompt = _input_words(body) if reply.prompt_tokens is None else reply.prompt_tokens
    cached = reply.cached_tokens if isinstance(reply, ScriptedResponsesReply) else 0
    return BilledCall(
        request_index=index,
        prompt_tokens=max(prompt, cached),
        completion_tokens=output if reply.completion_tokens is None else reply.completion_tokens,
        streamed=bool(body.get("stream")),
        completed=True,
        cached_tokens=cached,
        reasoning_tokens=count_words(reasoning),
    )


def _usage(billed: BilledCall) -> dict[str, Any]:
    return {
        "input_tokens": billed.prompt_tokens,
        "input_tokens_details": {"cached_tokens": billed.cached_tokens},
        "output_tokens": billed.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": billed.reasoning_tokens},
        "total_tokens": billed.total_tokens,
    }


def _response(
    index: int, body: Mapping[str, Any], output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "id": f"resp_scripted_{index}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress" if usage is None else "completed",
        "model": str(body.get("model", "")),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": {},
        "text": {"format": {"type": "text"}},
    }


def _stream_events(
    index: int, body: Mapping[str, Any], items: list[_Item], usage: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    yield {"type": "response.created", "response": _response(index, body, [], None)}
    yield {"type": "response.in_progress", "response": _response(index, body, [], None)}
    for output_index, item in enumerate(items):
        yield {
            "type": "response.output_item.added",
            "output_index": output_index,
            "item": item.added,
        }
        for event in item.events:
            yield {**event, "output_index": output_index}
        yield {
            "type": "response.output_item.done",
            "output_index": output_index,
            "item": item.final,
        }
    output = [item.final for item in items]
    yield {"type": "response.completed", "response": _response(index, body, output, usage)}


def _error_payload(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def _reasoning_before(items: Sequence[_Item]) -> Iterator[tuple[str, str]]:
    """Each function_call item's id with the id of the reasoning item sent before it."""
    reasoning = None
    for item in items:
        if item.final["type"] == "reasoning":
            reasoning = item.final["id"]
        elif item.final["type"] == "function_call" and reasoning is not None:
            yield item.final["id"], reasoning
