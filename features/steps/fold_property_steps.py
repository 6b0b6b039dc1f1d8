"""Steps of streaming.fold_property.feature: the fold equals langchain-core's merge (issue 7).

Each step starts with "the fold property" or "streamed replies shaped", so it cannot collide
with other step files. The chunk shapes live in `features/support/fold_shapes.py`.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import traceback
from collections import Counter
from typing import Any

import hypothesis
from behave import given, then, when
from behave.runner import Context
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from support.fold_shapes import SHAPES, ReplySpec, Shape, chunks, reply_specs
from support.step_text import listed_names

from cleveractors.agents.fold import ReplyFold, output_text

_CALL_FIELDS = {"tool_calls", "invalid_tool_calls"}


@given("streamed replies shaped the way {shapes} stream them")
def step_shapes(context: Context, shapes: str) -> None:
    context.fold_shapes = listed_names(shapes, SHAPES, what="shapes")


@when("the fold property is checked on {variable} examples (default {default:d})")
def step_check_fold(context: Context, variable: str, default: int) -> None:
    examples = int(os.environ.get(variable, default))
    checked: Counter[str] = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,  # the same examples on every run, so CI results are stable
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @hypothesis.given(reply_specs(), st.sampled_from(context.fold_shapes))
    def fold_holds(spec: ReplySpec, shape: Shape) -> None:
        checked[shape] += 1
        _assert_fold(spec, shape)

    context.fold_failure = None
    try:
        fold_holds()
    except Exception as exc:  # the counterexample is the result this step reports
        context.fold_failure = "".join(traceback.format_exception(exc))
    context.fold_checked, context.fold_examples = checked, examples


@then("the fold property holds for every example")
def step_fold_holds(context: Context) -> None:
    if context.fold_failure is not None:
        print(context.fold_failure, file=sys.stderr)
    assert context.fold_failure is None, context.fold_failure
    total = sum(context.fold_checked.values())
    assert total >= context.fold_examples, (
        f"only {total} examples ran, {context.fold_examples} asked for"
    )


@then("the fold property was checked on at least {count:d} examples of each shape")
def step_fold_each_shape(context: Context, count: int) -> None:
    for shape in context.fold_shapes:
        assert context.fold_checked[shape] >= count, dict(context.fold_checked)


# -- the property ------------------------------------------------------------------------------


def _assert_fold(spec: ReplySpec, shape: Shape) -> None:
    streamed = chunks(spec, shape)
    reference = _merged_by_langchain(copy.deepcopy(streamed))
    fold = ReplyFold()
    deltas = [fold.add(chunk) for chunk in streamed]
    folded = fold.message()

    assert "".join(deltas) == spec.text == reference.text, (deltas, spec.text, reference.text)
    assert type(folded) is AIMessage, type(folded)
    assert _without_calls(folded) == _without_calls(reference), (
        f"fold:      {_without_calls(folded)}\nlangchain: {_without_calls(reference)}"
    )
    _assert_calls_by_our_rule(spec, folded)
    if all(_parses_to_object(call.arguments) for call in spec.calls):
        assert folded == reference, (folded, reference)  # then the rules agree, calls too
    _assert_usage(spec, folded)
    assert fold.has_usage
    assert fold.received_any
    if shape == "anthropic":
        _assert_thinking_kept(spec, folded)


def _merged_by_langchain(streamed: list[AIMessageChunk]) -> AIMessage:
    """What `ainvoke` returns when the model streams: langchain-core's `generate_from_stream`."""
    result = generate_from_stream(iter(ChatGenerationChunk(message=chunk) for chunk in streamed))
    message = result.generations[0].message
    assert isinstance(message, AIMessage)
    return message


def _without_calls(message: AIMessage) -> dict[str, Any]:
    return message.model_dump(exclude=_CALL_FIELDS)


def _parses_to_object(arguments: str) -> bool:
    try:
        return not arguments.strip() or isinstance(json.loads(arguments), dict)
    except json.JSONDecodeError:
        return False


def _assert_calls_by_our_rule(spec: ReplySpec, folded: AIMessage) -> None:
    """Every call the provider meant, in order, by its id; arguments that are not a JSON object
    kept raw as an invalid call, never repaired."""
    valid = [
        (call.call_id, call.name, json.loads(call.arguments) if call.arguments.strip() else {})
        for call in spec.calls
        if _parses_to_object(call.arguments)
    ]
    invalid = [
        (call.call_id, call.name, call.arguments)
        for call in spec.calls
        if not _parses_to_object(call.arguments)
    ]
    assert [(c["id"], c["name"], c["args"]) for c in folded.tool_calls] == valid, (
        folded.tool_calls,
        valid,
    )
    assert [(c["id"], c["name"], c["args"]) for c in folded.invalid_tool_calls] == invalid, (
        folded.invalid_tool_calls,
        invalid,
    )


def _assert_usage(spec: ReplySpec, folded: AIMessage) -> None:
    usage = folded.usage_metadata
    assert usage is not None
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (
        spec.input_tokens,
        spec.output_tokens,
        spec.input_tokens + spec.output_tokens,
    ), usage
    assert usage.get("input_token_details", {}).get("cache_read") == spec.cache_read, usage
    assert usage.get("output_token_details", {}).get("reasoning") == spec.reasoning_tokens, usage


def _assert_thinking_kept(spec: ReplySpec, folded: AIMessage) -> None:
    """The thinking block leads, whole, with its exact signature (Anthropic rejects a tool-use
    turn without it); redacted thinking follows as it came. The output text (what estimates
    count) is the thinking and the visible text."""
    assert output_text(folded) == spec.thinking + spec.text, output_text(folded)
    blocks = [block for block in folded.content if isinstance(block, dict)]
    if spec.thinking_pieces or spec.signature:
        thinking = blocks.pop(0)
        assert thinking["type"] == "thinking", thinking
        assert (thinking["thinking"], thinking["signature"]) == (spec.thinking, spec.signature)
    if spec.redacted_thinking is not None:
        assert blocks[0]["type"] == "redacted_thinking", blocks
        assert blocks[0]["data"] == spec.redacted_thinking, blocks
