"""Steps about `ScriptedAnthropicServer` choosing replies per conversation, over real HTTP on
127.0.0.1 with langchain-anthropic's `ChatAnthropic`. Every step text starts with "the Anthropic
conversation server", "the ChatAnthropic conversation", "every ChatAnthropic conversation" or a
count of ChatAnthropic conversations, so none can shadow the steps of other modules.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import anthropic
from behave import given, then, when
from behave.runner import Context
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from cleveractors.testing import ScriptedAnthropicServer, ScriptedReply

_MODEL = "claude-sonnet-4-5"
_FOLLOW_UP = "And then?"
_REFUSED = "refused with "


def _start(context: Context, server: ScriptedAnthropicServer) -> None:
    server.start()
    context.add_cleanup(server.stop)
    context.anthropic_conversations = server
    context.conversation_answers = {}


def _model(context: Context) -> ChatAnthropic:
    return ChatAnthropic(
        model=_MODEL,
        base_url=context.anthropic_conversations.base_url,
        api_key="sk-ant-conversations",
        max_retries=0,
        max_tokens=256,
    )


def _reply(model: ChatAnthropic, messages: list[BaseMessage], *, is_streamed: bool) -> str:
    # Synchronous: the conversations run in threads, and langchain-anthropic shares one async
    # client per URL, which an event loop per thread could not share.
    if not is_streamed:
        return model.invoke(messages).text
    return "".join(chunk.text for chunk in model.stream(messages))


def _converse(
    context: Context,
    first_message: str,
    times: int,
    *,
    system: str | None = None,
    is_streamed: bool = False,
) -> list[str]:
    """Ask `times` times in one conversation: each request repeats the conversation so far (the
    replies received and a follow-up), as a chat client does. Returns each reply, or the
    refusal that ended the conversation."""
    model = _model(context)
    messages: list[BaseMessage] = [] if system is None else [SystemMessage(content=system)]
    messages.append(HumanMessage(content=first_message))
    answers: list[str] = []
    for _ in range(times):
        try:
            text = _reply(model, messages, is_streamed=is_streamed)
        except anthropic.APIStatusError as exc:
            message = exc.body["error"]["message"] if isinstance(exc.body, dict) else exc.body
            answers.append(f"{_REFUSED}{exc.status_code} saying {message}")
            break
        answers.append(text)
        messages += [AIMessage(content=text), HumanMessage(content=_FOLLOW_UP)]
    return answers


@given('the Anthropic conversation server replies "{first}" then "{second}" to every conversation')
def _given_per_conversation(context: Context, first: str, second: str) -> None:
    script = [ScriptedReply(text=first), ScriptedReply(text=second)]
    _start(context, ScriptedAnthropicServer(script, per_conversation=True))


@given("the Anthropic conversation server has the scripts:")
def _given_scripts(context: Context) -> None:
    scripts = {
        row["first message"]: [
            ScriptedReply(text=text.strip()) for text in row["replies"].split(";")
        ]
        for row in context.table
    }
    _start(context, ScriptedAnthropicServer(scripts))


@when("{count:d} ChatAnthropic conversations each ask twice at once, {mode}")
def _when_many(context: Context, count: int, mode: str) -> None:
    questions = [f"Question {n}?" for n in range(count)]
    with ThreadPoolExecutor(count) as pool:
        answers = pool.map(
            lambda question: _converse(context, question, 2, is_streamed=mode == "streamed"),
            questions,
        )
        context.conversation_answers = dict(zip(questions, answers, strict=True))


@when('the ChatAnthropic conversation "{first_message}" asks {times:d} time')
@when('the ChatAnthropic conversation "{first_message}" asks {times:d} times')
def _when_asks(context: Context, first_message: str, times: int) -> None:
    context.conversation_answers[first_message] = _converse(context, first_message, times)


@when(
    'the ChatAnthropic conversation under the system prompt "{system}" asks {times:d} time, '
    'starting "{first_message}"'
)
@when(
    'the ChatAnthropic conversation under the system prompt "{system}" asks {times:d} times, '
    'starting "{first_message}"'
)
def _when_asks_under(context: Context, system: str, times: int, first_message: str) -> None:
    answers = _converse(context, first_message, times, system=system)
    context.conversation_answers[f"under {system}"] = answers


@then('every ChatAnthropic conversation was answered "{first}" then "{second}"')
def _then_every(context: Context, first: str, second: str) -> None:
    answers = context.conversation_answers
    assert answers, "no conversation"
    wrong = {question: got for question, got in answers.items() if got != [first, second]}
    assert not wrong, wrong


def _said(answers: list[str]) -> str:
    """The replies of a conversation as the feature writes them: quoted, comma-separated."""
    said = [f'"{answer}"' for answer in answers if not answer.startswith(_REFUSED)]
    return ", ".join(said) or "nothing"


@then('the ChatAnthropic conversation "{first_message}" was answered {answers}')
def _then_answered(context: Context, first_message: str, answers: str) -> None:
    got = _said(context.conversation_answers[first_message])
    assert got == answers, f"{got}\n!=\n{answers}"


@then('the ChatAnthropic conversation under "{system}" was answered {answers}')
def _then_answered_under(context: Context, system: str, answers: str) -> None:
    got = _said(context.conversation_answers[f"under {system}"])
    assert got == answers, f"{got}\n!=\n{answers}"


@then(
    'the ChatAnthropic conversation "{first_message}" was then refused with {status:d} saying '
    '"{text}"'
)
def _then_refused(context: Context, first_message: str, status: int, text: str) -> None:
    last = context.conversation_answers[first_message][-1]
    prefix = f"{_REFUSED}{status} saying "
    assert last.startswith(prefix), last
    assert last.removeprefix(prefix).startswith(text), f"{last}\n does not start with {text}"


@then("the Anthropic conversation server billed {count:d} replies")
def _then_billed(context: Context, count: int) -> None:
    billed = context.anthropic_conversations.billed
    assert len(billed) == count, billed
    assert all(call.completed for call in billed), billed


def _refusal(attempt: object) -> str:
    try:
        attempt()  # type: ignore[operator]  # a callable given by the step
    except (TypeError, ValueError) as exc:
        return str(exc)
    raise AssertionError("nothing was refused")


@then(
    "the Anthropic conversation server refuses replies_left on a per-conversation script, "
    'saying "{message}"'
)
def _then_no_replies_left(context: Context, message: str) -> None:
    server = ScriptedAnthropicServer([ScriptedReply(text="Hi")], per_conversation=True)
    assert _refusal(lambda: server.replies_left) == message


@then(
    "the Anthropic conversation server refuses add_replies on a script per first message, "
    'saying "{message}"'
)
def _then_no_add(context: Context, message: str) -> None:
    server = ScriptedAnthropicServer({"Paris?": [ScriptedReply(text="Hi")]})
    assert _refusal(lambda: server.add_replies([ScriptedReply(text="More")])) == message


@then(
    "the Anthropic conversation server refuses a script per first message holding a reply "
    'without usage, saying "{message}"'
)
def _then_no_omitted_usage(context: Context, message: str) -> None:
    script = {
        "Paris?": [ScriptedReply(text="Hi")],
        "Rome?": [ScriptedReply(text="Hi", omit_usage=True)],
    }
    assert _refusal(lambda: ScriptedAnthropicServer(script)) == message
