"""`ToolAgent`: runs one tool call and returns its outcome, never raising for a tool's failure."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cleveractors.context import RunContext
from cleveractors.errors import ToolExecutionError
from cleveractors.runs import current_run_id
from cleveractors.tools import Tool
from cleveractors.tracing import ToolSpan, current_trace

if TYPE_CHECKING:
    from cleveractors.approvals import PausedRun

__all__ = [
    "RunningCall",
    "ToolAgent",
    "ToolCallRequest",
    "ToolOutcome",
    "ToolPaused",
    "current_call_var",
]

logger = logging.getLogger(__name__)

NOT_A_JSON_OBJECT = "not a JSON object"
"""Why arguments that are valid JSON still cannot be used (a tool takes a JSON object): one
wording, whether the reply was streamed (the fold) or came whole (the loop)."""


def unnamed_call_id(position: int) -> str:
    """The id of a call the provider gave none, by its position among the reply's calls: the
    model's next request must answer each call by an id, streamed or not."""
    return f"call_unnamed_{position}"


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call as the model asked for it: the call's id, the tool's name and its arguments
    (`parse_error` says why they could not be used, when they are not a JSON object)."""

    call_id: str
    name: str
    arguments: dict[str, Any] | str
    """Parsed arguments, or the raw text when it was not a JSON object."""
    parse_error: str | None = None


class ToolPaused(Exception):
    """Raised by a tool whose work waits for a person: an agent called as a tool whose run
    paused. The call gets no answer yet; the calling run pauses with `paused` under it."""

    def __init__(self, paused: PausedRun) -> None:
        super().__init__(f"run {paused.run_id} paused for approval")
        self.paused = paused


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a call produced: `output` is what the model reads next, an error text on failure;
    or, for a call whose work waits for a person, nothing yet (`paused`)."""

    output: str
    duration_s: float
    error: ToolExecutionError | None = None
    paused: PausedRun | None = None


@dataclass(frozen=True, slots=True)
class RunningCall:
    """The tool call whose tool is running now, and its span when the run is traced: what an
    agent called as a tool nests its events and its trace under."""

    call: ToolCallRequest
    span: ToolSpan | None = None


current_call_var: ContextVar[RunningCall | None] = ContextVar(
    "cleveractors_current_tool_call", default=None
)


class ToolAgent:
    """Runs one tool call: validates its arguments, applies the timeout, catches its failure.

    Made fresh for each call, so no state leaks from one call to the next. `tool` is None when the
    model named a tool that was not declared: then nothing runs and the model is told so. The
    run's `context` is what the tool's `RunContext` parameters receive.
    """

    def __init__(
        self,
        tool: Tool | None,
        *,
        agent_name: str,
        available: tuple[str, ...],
        context: RunContext[Any] | None = None,
    ) -> None:
        self._tool = tool
        self._agent_name = agent_name
        self._available = available
        self._context = context

    async def run(self, call: ToolCallRequest) -> ToolOutcome:
        """Run the call, inside its `execute_tool` span when the run is traced.

        A tool's failure (its exception, a timeout, arguments that do not match its schema, an
        undeclared tool) is the outcome's `error`, with an error text as its `output`.

        Raises:
            asyncio.CancelledError: the run was cancelled while the tool ran.
        """
        run_trace = current_trace()
        if run_trace is None:
            token = current_call_var.set(RunningCall(call))
            try:
                return await self._run(call)
            finally:
                current_call_var.reset(token)
        source = None if self._tool is None else self._tool.source
        span = run_trace.start_tool(call.name, call.call_id, call.arguments, source=source)
        token = current_call_var.set(RunningCall(call, span))
        try:
            outcome = await self._run(call)
        except BaseException as exc:  # cancelled (or broken) mid-call: the span still ends
            span.end(None, exc)
            raise
        finally:
            current_call_var.reset(token)
        span.end(outcome.output, outcome.error)
        return outcome

    async def _run(self, call: ToolCallRequest) -> ToolOutcome:
        started = time.perf_counter()
        try:
            output = await self._invoke(call)
        except ToolPaused as pause:
            return ToolOutcome(
                output="", duration_s=time.perf_counter() - started, paused=pause.paused
            )
        except ToolExecutionError as error:
            # The error names the tool and the call already.
            logger.warning("agent %s, run %s: %s", self._agent_name, current_run_id(), error)
            return ToolOutcome(
                output=f"Error: {error}", duration_s=time.perf_counter() - started, error=error
            )
        return ToolOutcome(output=output, duration_s=time.perf_counter() - started)

    async def _invoke(self, call: ToolCallRequest) -> str:
        tool = self._declared_tool(call)
        arguments = self._validated_arguments(tool, call)
        if tool.context_parameters:
            arguments = self._with_context(tool, arguments)
        deadline = asyncio.timeout(tool.timeout_s)
        try:
            async with deadline:
                value = await tool.run(arguments)
            return value if isinstance(value, str) else json.dumps(value, default=str)
        except ToolPaused:
            raise
        except TimeoutError as exc:
            if deadline.expired():
                raise self._failure(call, f"timed out after {tool.timeout_s:g}s") from None
            raise self._failure(call, f"raised TimeoutError: {exc}") from exc
        except Exception as exc:  # a handler's (or its output's) failure is the model's to read
            raise self._failure(call, f"raised {type(exc).__name__}: {exc}") from exc

    def _declared_tool(self, call: ToolCallRequest) -> Tool:
        if self._tool is None:
            available = ", ".join(self._available) or "none"
            raise self._failure(
                call, f"unknown tool {call.name!r}; the declared tools are: {available}"
            )
        return self._tool

    def _validated_arguments(self, tool: Tool, call: ToolCallRequest) -> dict[str, Any]:
        if call.parse_error is not None or not isinstance(call.arguments, dict):
            reason = call.parse_error or NOT_A_JSON_OBJECT
            raise self._failure(
                call, f"arguments are not valid JSON ({reason}): {call.arguments!r}"
            )
        problem = next(iter(tool.validator.iter_errors(call.arguments)), None)
        if problem is not None:
            where = "/".join(str(part) for part in problem.absolute_path) or "(arguments)"
            raise self._failure(
                call, f"arguments do not match the schema at {where}: {problem.message}"
            )
        unknown = [name for name in call.arguments if not _takes(tool, name)]
        if unknown:
            declared = tool.parameters.get("properties") or {}
            takes = ", ".join(sorted(declared)) or "none"
            raise self._failure(
                call,
                f"got unknown argument(s) {', '.join(repr(name) for name in unknown)}; "
                f"its arguments are: {takes}",
            )
        return call.arguments

    def _with_context(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments with the run's context under each of the tool's context parameters (a
        context of the run's id alone for a call run outside the loop)."""
        context = self._context or RunContext(
            run_id=current_run_id(), actor=self._agent_name, deps=None
        )
        return arguments | dict.fromkeys(tool.context_parameters, context)

    @staticmethod
    def _failure(call: ToolCallRequest, reason: str) -> ToolExecutionError:
        return ToolExecutionError(
            f"tool {call.name!r} (call {call.call_id}) {reason}",
            tool_name=call.name,
            call_id=call.call_id,
        )


def _takes(tool: Tool, name: str) -> bool:
    """Whether the model may set the argument `name`: never one the run's context fills in."""
    if name in tool.context_parameters:
        return False
    return tool.argument_names is None or name in tool.argument_names
