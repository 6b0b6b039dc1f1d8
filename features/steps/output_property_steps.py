"""Steps of output.partial_property.feature: partial objects only grow, the last the blocking
output, for any object and any chunking (issue 27).

Each step starts with "the partial output property", so it cannot collide with other step
files. The model is a small chat model that streams a given answer cut at given places: its
text (native mode), or the output tool's arguments (tool mode).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import hypothesis
from behave import then, when
from behave.runner import Context
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic_core import to_jsonable_python

from cleveractors import ActorExecutor, LLMAgent
from cleveractors.events import OutputDelta
from cleveractors.output import OUTPUT_TOOL

_MODES = ("native", "tool")
_TIMEOUT_S = 30.0

_scalars = (
    st.text(max_size=30)
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.booleans()
    | st.none()
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=40,
)
_objects = st.dictionaries(st.text(max_size=12), _values, min_size=1, max_size=8)


class _CutAnswerModel(BaseChatModel):
    """Answers with `answer` (JSON text), streamed in the pieces `cuts` makes of it: as text, or
    as the arguments of a call of the output tool (`as_tool_call`)."""

    answer: str
    cuts: list[int]
    as_tool_call: bool = False

    @property
    def _llm_type(self) -> str:
        return "cut-answer"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        return self.bind(**kwargs)

    def _pieces(self) -> list[str]:
        edges = [0, *sorted(set(self.cuts)), len(self.answer)]
        return [self.answer[a:b] for a, b in itertools.pairwise(edges) if b > a]

    def _chunks(self) -> Iterator[AIMessageChunk]:
        for n, piece in enumerate(self._pieces()):
            if not self.as_tool_call:
                yield AIMessageChunk(content=piece)
                continue
            name, call_id = (OUTPUT_TOOL, "call_out") if n == 0 else (None, None)
            fragment = tool_call_chunk(name=name, args=piece, id=call_id, index=0)
            yield AIMessageChunk(content="", tool_call_chunks=[fragment])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        merged = AIMessageChunk(content="")
        for chunk in self._chunks():
            merged = merged + chunk
        message = AIMessage(content=merged.content, tool_calls=merged.tool_calls)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks():
            yield ChatGenerationChunk(message=chunk)


@when("the partial output property is checked on {variable} examples (default {default:d})")
def step_check_partial_outputs(context: Context, variable: str, default: int) -> None:
    examples = int(os.environ.get(variable, default))
    checked: Counter[str] = Counter()

    # One property per mode, each on its share of the examples: a mode drawn at random got
    # fewer than its share on some Hypothesis versions, derandomized or not.
    def property_for(mode: str) -> Callable[[], None]:
        @settings(
            max_examples=-(-examples // len(_MODES)),
            deadline=None,
            derandomize=True,  # the same examples on every run, so CI results are stable
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @hypothesis.given(_objects, st.data())
        def partial_outputs_grow(answer: dict[str, Any], data: st.DataObject) -> None:
            checked[mode] += 1
            text = json.dumps(answer, ensure_ascii=data.draw(st.booleans()))
            cuts = data.draw(
                st.lists(st.integers(min_value=1, max_value=len(text) - 1), max_size=60)
            )
            if _assert_partial_outputs(answer, text, cuts, mode) >= 3:
                checked["grew"] += 1

        return partial_outputs_grow

    context.partial_failure = None
    try:
        for mode in _MODES:
            property_for(mode)()
    except Exception as exc:  # the counterexample is the result this step reports
        context.partial_failure = "".join(traceback.format_exception(exc))
    context.partial_checked, context.partial_examples = checked, examples


@then("the partial output property holds for every example")
def step_partial_outputs_hold(context: Context) -> None:
    if context.partial_failure is not None:
        print(context.partial_failure, file=sys.stderr)
    assert context.partial_failure is None, context.partial_failure
    total = context.partial_checked["native"] + context.partial_checked["tool"]
    assert total >= context.partial_examples, (total, context.partial_examples)


@then("at least {count:d} examples streamed 3 partial objects or more")
def step_partial_outputs_grew(context: Context, count: int) -> None:
    assert context.partial_checked["grew"] >= count, dict(context.partial_checked)


@then("the partial output property was checked on at least {count:d} examples of each mode")
def step_partial_outputs_each_mode(context: Context, count: int) -> None:
    for mode in _MODES:
        assert context.partial_checked[mode] >= count, dict(context.partial_checked)


def _assert_partial_outputs(answer: dict[str, Any], text: str, cuts: list[int], mode: str) -> int:
    """Check one example; how many partial objects it streamed."""

    def executor() -> ActorExecutor:
        model = _CutAnswerModel(answer=text, cuts=cuts, as_tool_call=mode == "tool")
        return ActorExecutor(LLMAgent(model, output_type=dict, output_mode=mode))

    async def both() -> tuple[list[OutputDelta], Any, Any]:
        streamed = executor()
        events = [event async for event in streamed.execute_events("Answer")]
        deltas = [event for event in events if isinstance(event, OutputDelta)]
        assert streamed.last_result is not None
        blocking = await executor().execute("Answer")
        return deltas, streamed.last_result.output, blocking.output

    deltas, streamed_output, blocking_output = asyncio.run(asyncio.wait_for(both(), _TIMEOUT_S))
    assert deltas, "no output_delta"
    assert deltas[-1].is_final, deltas
    assert [delta.is_final for delta in deltas].count(True) == 1, deltas
    for before, after in itertools.pairwise(delta.output for delta in deltas):
        assert _extends(before, after), (before, after)
    assert deltas[-1].output == to_jsonable_python(blocking_output) == answer, (
        deltas[-1].output,
        blocking_output,
    )
    assert streamed_output == blocking_output
    return len(deltas) - 1


def _extends(before: object, after: object) -> bool:
    """Whether `after` holds everything `before` does (a string may have grown at its end)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return all(key in after and _extends(value, after[key]) for key, value in before.items())
    if isinstance(before, list) and isinstance(after, list):
        return len(before) <= len(after) and all(map(_extends, before, after))
    if isinstance(before, str) and isinstance(after, str):
        return after.startswith(before)
    return type(before) is type(after) and before == after
