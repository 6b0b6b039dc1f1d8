"""The typed answer of an agent with an output type: how the model is asked for it, how its reply
is checked, and how it is asked again.

`TypedAnswers` is made once per agent (`TypedAnswers.of`, None without an output type, so an
untyped agent pays nothing). The loop asks it for the model a round sends (`round_model`) and the
model of a last request (`final_model`: a synthesis or a retry, where the answer must be the typed
one), and hands it the reply `decide()` calls a typed answer (`settle`). A reply that fails
validation goes back to the model with its errors, each retry its own billed call
(`output_retry`), until `retries` are spent: then `OutputValidationError`.

Three ways to ask (`OutputMode`):

- `native`: the provider's structured output. OpenAI Chat Completions gets `response_format`
  `json_schema` (strict where the schema allows it); the Responses API and Anthropic get the same
  through their LangChain integrations (`text.format`, `output_config.format`).
- `tool`: an output tool (`final_result`), declared beside the actor's tools; its arguments are
  the object. A reply in text instead is asked again, with the tool forced.
- `prompted`: the schema in the system prompt; the reply's text is the JSON.

A schema whose root is not an object (a scalar, a list, a union) is wrapped as
`{"response": ...}`: tool arguments and OpenAI's `json_schema` must be objects.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from jsonschema import Draft202012Validator
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json, to_jsonable_python

from cleveractors.agents.tool import unnamed_call_id
from cleveractors.errors import ConfigurationError, OutputValidationError
from cleveractors.events import Event, OutputDelta, TextDelta
from cleveractors.output import OUTPUT_TOOL, ModelRetry, OutputMode, OutputValidator
from cleveractors.tools import Tool
from cleveractors.usage import LLMCallUsage

__all__ = ["PartialOutputs", "TypedAnswers"]

ResolvedMode = Literal["native", "tool", "prompted"]

_WRAPPED = "response"
_PROMPT = (
    "Answer with a single JSON value matching this JSON Schema, and nothing else (no prose, no "
    "code fence):\n{schema}"
)
_TOOL_DESCRIPTION = "Give the final answer to the user's message: call this once, last."
_RETRY_TEXT = (
    "Your answer was not valid:\n{errors}\nAnswer again with a corrected JSON value matching the "
    "schema, and nothing else."
)
_RETRY_TOOL = "Your answer was not valid:\n{errors}\nCall {tool} again with corrected arguments."
_CALL_THE_TOOL = f"You must answer by calling the tool {OUTPUT_TOOL!r}, not in text."
_NOT_RUN = "Not run: the answer was given with {tool!r}."
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class _Invalid(Exception):
    """What is wrong with one attempt, one line each."""

    def __init__(self, errors: Sequence[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = tuple(errors)


@dataclass(frozen=True, slots=True)
class _Shape:
    """The schema the model is sent, and how a reply's JSON becomes the object."""

    schema: dict[str, Any]
    name: str
    is_wrapped: bool
    check: Callable[[object], object]
    """Raises `_Invalid`."""


class TypedAnswers:
    """Asks for, checks and retries the typed answer of one agent. Shared by its runs; holds no
    run state.

    Attributes:
        mode: How the model is asked (never `auto`: resolved from the model's profile).
        output_tool: The output tool's name in `tool` mode; None otherwise.
    """

    __slots__ = (
        "_bound",
        "_format",
        "_shape",
        "_validators",
        "is_wrapped",
        "mode",
        "output_tool",
        "retries",
    )

    def __init__(
        self,
        shape: _Shape,
        *,
        mode: ResolvedMode,
        retries: int,
        validators: Sequence[OutputValidator],
    ) -> None:
        self._shape = shape
        self.mode: ResolvedMode = mode
        self.retries = retries
        self._validators = tuple(validators)
        self.output_tool = OUTPUT_TOOL if mode == "tool" else None
        self.is_wrapped = shape.is_wrapped
        self._format = _response_format(shape)
        self._bound: tuple[object, object, Runnable[LanguageModelInput, Any]] | None = None
        """The round's model, kept for the tool set it was bound with."""

    @classmethod
    def of(
        cls,
        model: BaseChatModel,
        *,
        output_type: object | None,
        output_schema: Mapping[str, Any] | None,
        mode: OutputMode,
        retries: int,
        validators: Sequence[OutputValidator],
        agent_name: str,
    ) -> TypedAnswers | None:
        """The agent's typed answers, or None when it has no output type.

        Raises:
            ConfigurationError: both `output_type` and `output_schema` given, a type pydantic
                cannot make a schema of, an invalid schema, negative retries or an unknown mode.
        """
        if output_type is None and output_schema is None:
            if validators:
                raise ConfigurationError(
                    f"agent {agent_name!r}: output_validators need an output_type"
                )
            return None
        where = f"agent {agent_name!r}"
        if output_type is not None and output_schema is not None:
            raise ConfigurationError(f"{where}: give output_type or output_schema, not both")
        if retries < 0:
            raise ConfigurationError(f"{where}: output_retries must be >= 0, got {retries!r}")
        if mode not in ("auto", "native", "tool", "prompted"):
            raise ConfigurationError(
                f"{where}: output_mode must be auto, native, tool or prompted, got {mode!r}"
            )
        shape = (
            _shape_of_schema(dict(output_schema), where)
            if output_schema is not None
            else _shape_of_type(output_type, where)
        )
        resolved: ResolvedMode = _auto_mode(model) if mode == "auto" else mode
        return cls(shape, mode=resolved, retries=retries, validators=validators)

    # -- asking ------------------------------------------------------------------------------

    def system_prompt(self, base: str | None) -> str | None:
        """The system prompt a run begins with: in `prompted` mode, with the schema."""
        if self.mode != "prompted":
            return base
        instructions = _PROMPT.format(schema=json.dumps(self._shape.schema))
        return f"{base}\n\n{instructions}" if base else instructions

    def round_model(
        self,
        model: BaseChatModel,
        with_tools: Runnable[LanguageModelInput, Any],
        *,
        tools: Mapping[str, Tool],
    ) -> Runnable[LanguageModelInput, Any]:
        """What a round sends: the actor's tools bound, and the way to give the typed answer
        (made once per model and version of the tools)."""
        bound = self._bound
        if bound is not None and bound[0] is tools and bound[1] is with_tools:
            return bound[2]
        if self.mode == "native":
            runnable = _with_response_format(model, with_tools, self._format)
        elif self.mode == "tool":
            runnable = model.bind_tools([*_schemas(tools), self._tool_schema()])
        else:
            runnable = with_tools
        self._bound = (tools, with_tools, runnable)
        return runnable

    def final_model(
        self,
        model: BaseChatModel,
        declaring: Runnable[LanguageModelInput, Any],
        *,
        tools: Mapping[str, Tool],
    ) -> Runnable[LanguageModelInput, Any]:
        """What a last request sends (a synthesis, a retry): the typed answer and nothing else.
        `declaring` is what the untyped request would send (the tools declared, calling them
        forbidden, where the transcript holds tool calls)."""
        if self.mode == "native":
            return _with_response_format(model, declaring, self._format)
        if self.mode == "tool":
            # A name as tool_choice forces that tool, in LangChain's words for every provider.
            return model.bind_tools(
                [*_schemas(tools), self._tool_schema()], tool_choice=OUTPUT_TOOL
            )
        return declaring

    def _tool_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": OUTPUT_TOOL,
                "description": _TOOL_DESCRIPTION,
                "parameters": self._shape.schema,
            },
        }

    # -- checking ----------------------------------------------------------------------------

    async def settle(
        self,
        reply: AIMessage,
        *,
        ask_again: Callable[[], Awaitable[AIMessage]],
        remember: Callable[[BaseMessage], None],
        show_text: Callable[[str], None],
        spent: Callable[[], tuple[LLMCallUsage, ...]],
        partials: PartialOutputs | None = None,
    ) -> tuple[AIMessage, object]:
        """The answer and its object, from a reply meant as the typed answer: validated, or sent
        back with its errors (`remember`: into the transcript the retry reads) and asked again,
        up to `retries` times.

        Raises:
            OutputValidationError: the last attempt failed too; every attempt is billed
                (`spent`: the run's calls so far).
        """
        attempts = 1
        while True:
            raw, call_id = self._raw(reply)
            try:
                if call_id is None and self.mode == "tool":
                    raise _Invalid([_CALL_THE_TOOL])
                value = await self._check(raw)
            except _Invalid as invalid:
                if attempts > self.retries:
                    raise OutputValidationError(
                        errors=invalid.errors,
                        raw_text=raw,
                        attempts=attempts,
                        usage_by_call=spent(),
                    ) from None
                for message in _sent_back(reply, call_id, invalid.errors):
                    remember(message)
                if partials is not None:
                    partials.start_again()
                reply = await ask_again()
                attempts += 1
                continue
            if partials is not None:
                partials.finish(value)
            if call_id is None:
                return reply, value
            show_text(raw)  # the output tool's arguments are the answer the user sees
            return AIMessage(content=raw), value

    def _raw(self, reply: AIMessage) -> tuple[str, str | None]:
        """The attempt's raw JSON, and the output tool call's id when it came as one."""
        if self.output_tool is not None:
            for call_id, name, arguments in _calls(reply):
                if name == self.output_tool:
                    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
                    return raw, call_id
        return reply.text, None

    async def _check(self, raw: str) -> object:
        shape = self._shape
        try:
            parsed = json.loads(_unfenced(raw))
        except json.JSONDecodeError as exc:
            raise _Invalid([f"not valid JSON: {exc}"]) from None
        if shape.is_wrapped:
            if not isinstance(parsed, dict) or _WRAPPED not in parsed:
                raise _Invalid([f"expected an object with the key {_WRAPPED!r}"])
            parsed = parsed[_WRAPPED]
        value = shape.check(parsed)
        for validator in self._validators:
            try:
                checked = validator(value)
                if inspect.isawaitable(checked):
                    checked = await checked
            except ModelRetry as retry:
                raise _Invalid([retry.reason]) from None
            if checked is not None:
                value = checked
        return value


_MIN_GROWTH = 64
"""Characters a streamed answer grows by before it is parsed again, at the least."""


class PartialOutputs:
    """The events of a streamed run of a typed actor, with `OutputDelta`s added: the answer's
    text parsed as partial JSON (pydantic-core's) as it grows. It is parsed again only once it
    has grown by a quarter since the last parse (and by `_MIN_GROWTH` characters), so the work
    stays linear in the answer's size however finely it is chunked. Made per run.

    In `native` and `prompted` modes the answer's text is parsed; in `tool` mode, the streamed
    arguments of the output tool's call (`add_calls`), and no text.
    """

    __slots__ = (
        "_attempt",
        "_call_index",
        "_is_finished",
        "_is_wrapped",
        "_last",
        "_parsed_size",
        "_pieces",
        "_reads_calls",
        "_round",
        "_sink",
        "_size",
    )

    def __init__(
        self, sink: Callable[[Event], None], *, is_wrapped: bool, reads_calls: bool = False
    ) -> None:
        self._sink = sink
        self._is_wrapped = is_wrapped
        self._reads_calls = reads_calls
        self._call_index: object = None
        self._attempt = 1
        self._round = 0
        self._pieces: list[str] = []
        self._size = self._parsed_size = 0
        self._last: object = None
        self._is_finished = False
        """Set by the validated object: text after it (the output tool's arguments shown) is
        no part of a partial object."""

    def __call__(self, event: Event) -> None:
        self._sink(event)
        if isinstance(event, TextDelta) and not (self._is_finished or self._reads_calls):
            self._add(event.round, event.text)

    def add_calls(self, piece: BaseMessage, round_number: int) -> None:
        """Read a streamed chunk's tool-call fragments: the output tool's arguments so far."""
        if not self._reads_calls or self._is_finished:
            return
        for fragment in getattr(piece, "tool_call_chunks", ()):
            if fragment.get("name") == OUTPUT_TOOL:
                self._call_index = fragment.get("index")
                self._restart(round_number)
            elif fragment.get("name") or fragment.get("index") != self._call_index:
                continue
            if arguments := fragment.get("args"):
                self._add(round_number, arguments)

    def _add(self, round_number: int, text: str) -> None:
        if round_number != self._round:
            self._restart(round_number)
        self._pieces.append(text)
        self._size += len(text)
        grown = self._size - self._parsed_size
        if grown >= _MIN_GROWTH and grown * 4 >= self._parsed_size:
            self._parse()

    def _parse(self) -> None:
        self._parsed_size = self._size
        text = "".join(self._pieces)
        self._pieces = [text]
        try:
            value = from_json(_unfenced_start(text), allow_partial="trailing-strings")
        except ValueError:
            return  # not (yet) JSON: the text of a round with tool calls, say
        if _may_end_in_a_cut_number(text, value):
            return  # `12` of `123`: the object would shrink when the number goes on
        if self._is_wrapped:
            if not isinstance(value, dict) or _WRAPPED not in value:
                return
            value = value[_WRAPPED]
        if value != self._last:
            self._last = value
            self._sink(OutputDelta(round=self._round, attempt=self._attempt, output=value))

    def _restart(self, round_number: int) -> None:
        self._round = round_number
        self._pieces, self._size, self._parsed_size, self._last = [], 0, 0, None

    def start_again(self) -> None:
        """The attempt was invalid: the next one's object starts over."""
        self._attempt += 1
        self._restart(self._round)

    def finish(self, value: object) -> None:
        """The validated object, as the last `OutputDelta`."""
        self._is_finished = True
        output = to_jsonable_python(value)
        self._sink(
            OutputDelta(round=self._round, attempt=self._attempt, output=output, is_final=True)
        )


def _may_end_in_a_cut_number(text: str, value: object) -> bool:
    """Whether TEXT, parsed as VALUE, may end in a number cut short: it ends in a digit, and one
    more digit changes the value, not in a string (which only grows) but a number."""
    if not text[-1:].isdigit():
        return False
    try:
        probe = from_json(_unfenced_start(text + "1"), allow_partial="trailing-strings")
    except ValueError:
        return True
    return bool(probe != value) and not isinstance(_last_leaf(probe), str)


def _last_leaf(value: object) -> object:
    """The value a JSON value ends with: its last item's or last key's, all the way down."""
    while True:
        if isinstance(value, list) and value:
            value = value[-1]
        elif isinstance(value, dict) and value:
            value = value[next(reversed(value))]
        else:
            return value


def _unfenced_start(text: str) -> str:
    """A streamed answer without the opening of a Markdown code fence, if it has one."""
    stripped = text.lstrip()
    if stripped.startswith("```"):
        return stripped.partition("\n")[2]
    return text


def _calls(reply: AIMessage) -> list[tuple[str, str, object]]:
    """Every call of a reply as (id, name, arguments), parsed ones first, each with the id its
    answer must name (the loop's rule for a call without one)."""
    sent = [
        *((call["id"], call["name"], call["args"]) for call in reply.tool_calls),
        *(
            (call["id"], call["name"] or "", call["args"] or "")
            for call in reply.invalid_tool_calls
        ),
    ]
    return [
        (call_id or unnamed_call_id(position), name, arguments)
        for position, (call_id, name, arguments) in enumerate(sent)
    ]


def _sent_back(reply: AIMessage, call_id: str | None, errors: Sequence[str]) -> list[BaseMessage]:
    """The failed attempt and its errors, as the transcript the retry reads holds them."""
    listed = "\n".join(f"- {error}" for error in errors)
    calls = _calls(reply)
    if not calls:
        return [reply, HumanMessage(_RETRY_TEXT.format(errors=listed))]
    # Every call of the reply is answered (by the id it is answered under), or the next request
    # is valid for no provider.
    ids = iter(call[0] for call in calls)
    named = reply.model_copy(
        update={
            "tool_calls": [{**call, "id": next(ids)} for call in reply.tool_calls],
            "invalid_tool_calls": [{**call, "id": next(ids)} for call in reply.invalid_tool_calls],
        }
    )
    answers: list[BaseMessage] = [named]
    for each_id, name, _arguments in calls:
        if each_id == call_id:
            content = _RETRY_TOOL.format(errors=listed, tool=OUTPUT_TOOL)
        elif call_id is None:
            content = _CALL_THE_TOOL
        else:
            content = _NOT_RUN.format(tool=OUTPUT_TOOL)
        answers.append(ToolMessage(content, tool_call_id=each_id, name=name))
    return answers


# -- the schema ------------------------------------------------------------------------------


def _shape_of_type(output_type: object, where: str) -> _Shape:
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)  # type: ignore[arg-type]  # any type
        schema = adapter.json_schema()
    except Exception as exc:  # pydantic raises several kinds for a type it cannot handle
        raise ConfigurationError(
            f"{where}: output_type {output_type!r} has no JSON schema ({exc})"
        ) from None

    def check(value: object) -> object:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            raise _Invalid(
                [
                    f"{_location(error['loc'])}: {error['msg']}"
                    for error in exc.errors(include_url=False)
                ]
            ) from None

    name = getattr(output_type, "__name__", None) or schema.get("title") or OUTPUT_TOOL
    return _wrapped(schema, str(name), check)


def _shape_of_schema(schema: dict[str, Any], where: str) -> _Shape:
    try:
        Draft202012Validator.check_schema(schema)
    except Exception as exc:  # SchemaError, or a schema jsonschema cannot read at all
        raise ConfigurationError(
            f"{where}: output_schema is not a valid JSON Schema ({exc})"
        ) from None
    validator = Draft202012Validator(schema)

    def check(value: object) -> object:
        errors = sorted(validator.iter_errors(value), key=lambda error: list(error.path))
        if errors:
            raise _Invalid([f"{_location(tuple(error.path))}: {error.message}" for error in errors])
        return value

    return _wrapped(schema, str(schema.get("title") or OUTPUT_TOOL), check)


def _wrapped(schema: dict[str, Any], name: str, check: Callable[[object], object]) -> _Shape:
    if schema.get("type") == "object":
        return _Shape(schema, _schema_name(name), False, check)
    definitions = schema.pop("$defs", None)
    outer: dict[str, Any] = {
        "type": "object",
        "properties": {_WRAPPED: schema},
        "required": [_WRAPPED],
    }
    if definitions is not None:
        outer["$defs"] = definitions
    return _Shape(outer, _schema_name(name), True, check)


def _schema_name(name: str) -> str:
    """A name OpenAI accepts for a `json_schema` (letters, digits, `_` and `-`, 64 at most)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or OUTPUT_TOOL


def _location(loc: Sequence[object]) -> str:
    return ".".join(str(part) for part in loc) or "the answer"


def _unfenced(raw: str) -> str:
    """The JSON of a reply that wrapped it in a Markdown code fence anyway."""
    fenced = _FENCE.match(raw)
    return fenced.group(1) if fenced else raw


def _response_format(shape: _Shape) -> dict[str, Any]:
    """OpenAI's `response_format` for the schema: strict where strict mode can take it (every
    property required, no further ones allowed)."""
    strict_schema = copy.deepcopy(shape.schema)
    is_strict = _make_strict(strict_schema)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": shape.name,
            "schema": strict_schema if is_strict else shape.schema,
            "strict": is_strict,
        },
    }


def _make_strict(schema: object) -> bool:
    """Close every object of `schema` (in place); False when one has an optional property."""
    if isinstance(schema, list):
        closed = [_make_strict(item) for item in schema]  # every item closed, not just the first
        return all(closed)
    if not isinstance(schema, dict):
        return True
    fits = True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        schema["additionalProperties"] = False
        # An object without properties (any object) cannot be strict: strict allows none.
        fits = "properties" in schema and set(schema.get("required", ())) == set(properties)
    closed = [_make_strict(value) for value in schema.values()]
    return fits and all(closed)


# -- the model -------------------------------------------------------------------------------


def _auto_mode(model: BaseChatModel) -> ResolvedMode:
    """`native` where the model's LangChain profile says it supports structured output."""
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping) and profile.get("structured_output") is True:
        return "native"
    return "tool"


def _with_response_format(
    model: BaseChatModel,
    runnable: Runnable[LanguageModelInput, Any],
    response_format: dict[str, Any],
) -> Runnable[LanguageModelInput, Any]:
    """`runnable` (the model, maybe with tools bound) asking for structured output.

    ChatOpenAI on Chat Completions sends a `response_format` option through the openai SDK's
    parsing helpers, which refuse tools that are not strict and add the final completion as one
    more chunk: the same field goes in the request body instead (`extra_body`), and the reply is
    read like any other. The Responses API and other integrations (ChatAnthropic's
    `output_config.format`) take `response_format` as LangChain's common option."""
    if "extra_body" in type(model).model_fields and not getattr(model, "use_responses_api", None):
        extra = dict(cast("Mapping[str, Any]", getattr(model, "extra_body", None) or {}))
        return runnable.bind(extra_body={**extra, "response_format": response_format})
    return runnable.bind(response_format=response_format)


def _schemas(tools: Mapping[str, Tool]) -> list[dict[str, Any]]:
    return [tool.openai_schema() for tool in tools.values()]
