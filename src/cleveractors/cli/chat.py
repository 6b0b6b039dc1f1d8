"""`cleveractors chat`: turn after turn in the terminal."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from cleveractors.cli.actor import (
    BASE_URL_OPTION,
    VERBOSE_OPTION,
    build_executor,
    check_run_options,
    run_error_line,
    show_library_logs,
)
from cleveractors.cli.command import ACTOR_ARGUMENT, Command, app, err, fail, out
from cleveractors.cli.render import EventRenderer, money, one_line, print_unsqueezed, usage_table
from cleveractors.cli.segments import Segments
from cleveractors.cli.turn import RUN_ERRORS, read_answer, run_live, run_to_the_end
from cleveractors.errors import ConfigurationError
from cleveractors.executor import ActorExecutor
from cleveractors.result import ExecutionResult
from cleveractors.turns import NewMessage
from cleveractors.usage import LLMCallUsage

_CHAT_HELP = (
    "/usage: tokens and cost so far; /new: a fresh conversation; /exit (or Ctrl-D): leave; "
    "Ctrl-C stops an answer"
)


@dataclass
class _Chat:
    """What a chat keeps between turns: the conversation so far, and every call it paid for."""

    session: str | None
    history: list[dict[str, object]] = field(default_factory=list)
    calls: list[LLMCallUsage] = field(default_factory=list)
    turns: int = 0

    def next_turn(self, message: str) -> NewMessage:
        if self.session is not None:  # the store holds the history
            return NewMessage(message, session_id=self.session)
        return NewMessage(message, history=list(self.history))

    def answered(self, message: str, segments: Segments) -> None:
        self.paid(segments)
        if self.session is None:
            text = "".join(result.text for result in segments.results)
            self.history.append({"role": "user", "content": message})
            self.history.append({"role": "assistant", "content": text})

    def paid(self, segments: Segments) -> None:
        """Count a turn's calls (of each of its segments), numbered on from the chat's earlier
        ones."""
        self.turns += 1
        first = len(self.calls) + 1
        self.calls += [
            call.model_copy(update={"index": first + offset})
            for offset, call in enumerate(segments.combined().usage_by_call)
        ]

    def fresh(self) -> str:
        """Forget the conversation (not what it cost); a stored chat moves to a new session."""
        self.history.clear()
        if self.session is None:
            return "a fresh conversation"
        self.session = f"chat-{uuid.uuid4().hex[:12]}"
        return f"a fresh conversation, in session {self.session}"

    def so_far(self) -> ExecutionResult:
        """Every call of the chat, as one result: its totals are the chat's."""
        return ExecutionResult(text="", usage_by_call=tuple(self.calls))


@app.command(cls=Command, short_help="Chat with an actor, turn after turn, in the terminal.")
def chat(
    actor: Annotated[Path, ACTOR_ARGUMENT],
    base_url: Annotated[str | None, BASE_URL_OPTION] = None,
    verbose: Annotated[bool, VERBOSE_OPTION] = False,
    session: Annotated[
        str | None,
        typer.Option(
            help="Keep the conversation in this stored session; needs `store:`.", metavar="ID"
        ),
    ] = None,
) -> None:
    """Chat with ACTOR: each answer streams live as in `run`, then the tokens and cost of the
    turn and of the chat so far. The conversation is kept in memory (in the store with
    --session). /usage shows every call so far, /new starts a fresh conversation, /exit or
    Ctrl-D leaves; Ctrl-C stops the current answer, and at the prompt leaves. A tool call that
    needs approval is asked about as `run` asks (Ctrl-D there leaves it undecided: the turn is
    not kept)."""
    check_run_options("chat", base_url, events=False, as_json=False, no_stream=False)
    view = EventRenderer(out)
    show_library_logs(verbose, view)
    try:
        executor = build_executor(actor, base_url=base_url)
        if session is not None and executor.store is None:
            raise ConfigurationError(
                f"{actor}: --session needs a store: add `store:` to its config"
            )
        with asyncio.Runner() as loop:
            loop.run(executor.open())
            try:
                _chat_loop(loop, executor, view, _Chat(session))
            finally:
                loop.run(executor.aclose())
    except RUN_ERRORS as exc:
        fail(run_error_line(exc, actor, base_url))
    except KeyboardInterrupt:  # while connecting or closing: nothing was said yet
        fail("interrupted", code=130)


def _chat_loop(
    loop: asyncio.Runner, executor: ActorExecutor, view: EventRenderer, chat: _Chat
) -> None:
    out.print(Text(f"Chatting with {executor.name}. {_CHAT_HELP}", style="dim"))
    while (line := _read_message()) is not None:
        message = line.strip()
        if message == "/exit":
            return
        if message == "/usage":
            print_unsqueezed(out, usage_table(chat.so_far()))
        elif message == "/new":
            out.print(Text(chat.fresh(), style="dim"))
        elif message.startswith("/"):
            out.print(Text(f"unknown command {message}; {_CHAT_HELP}", style="yellow"))
        elif message:
            _chat_turn(loop, executor, view, chat, line)


def _read_message() -> str | None:
    """The next line the user types; None when they leave (Ctrl-D, or Ctrl-C at the prompt)."""
    try:
        return out.input(Text("you> ", style="bold"))
    except (EOFError, KeyboardInterrupt):
        out.print()
        return None


def _chat_turn(
    loop: asyncio.Runner, executor: ActorExecutor, view: EventRenderer, chat: _Chat, message: str
) -> None:
    """One turn, shown as `run` shows it, its paused calls asked about as `run` asks. A
    stopped, failed or undecided turn is counted (it was paid for) but not kept in the
    conversation."""
    before = executor.last_result
    segments = Segments()
    turn = chat.next_turn(message)
    try:
        run = run_to_the_end(run_live, executor, turn, view, segments, ask=read_answer)
        result = loop.run(run)
    except (KeyboardInterrupt, *RUN_ERRORS) as exc:
        if executor.last_result is not before:
            segments.add(executor.last_result)
        reason = "stopped" if isinstance(exc, KeyboardInterrupt) else one_line(str(exc))
        _chat_not_kept(chat, segments, reason)
        return
    if result.status == "paused":
        _chat_not_kept(chat, segments, "the calls were left undecided")
        return
    chat.answered(message, segments)
    out.print(_chat_totals(chat, segments.combined()))


def _chat_not_kept(chat: _Chat, segments: Segments, reason: str) -> None:
    if segments.results:
        chat.paid(segments)
    err.print(Text(f"{reason}; this turn is not kept, the chat goes on", style="yellow"))
    out.print(_chat_totals(chat))


def _chat_totals(chat: _Chat, turn: ExecutionResult | None = None) -> Text:
    """One line after each turn: what it cost, and the chat so far."""
    so_far = chat.so_far()
    this = (
        ""
        if turn is None
        else f"this turn {turn.total_tokens} tokens (USD {money(turn.cost_usd)}); "
    )
    plural = "" if chat.turns == 1 else "s"
    return Text(
        f"{this}chat so far {so_far.total_tokens} tokens in {chat.turns} turn{plural} "
        f"(USD {money(so_far.cost_usd)})",
        style="dim",
    )
