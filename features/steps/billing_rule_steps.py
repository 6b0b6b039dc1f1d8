"""Steps for the billing rule of `support.billing`, fed by hand: what the server billed, what the
estimate rule gave for each call's messages, and the calls of a run.

Every step text starts with "the billing rule" or "the estimate rule", so none can shadow the
steps of other modules. Calls are written `prompt/completion`, `estimated` when flagged, `;`
between calls; `none` is an empty list.
"""

from __future__ import annotations

from behave import given, then, when
from behave.runner import Context
from support.billing import billing_problems

from cleveractors import TokenUsage
from cleveractors.testing import BilledCall


def _items(text: str) -> list[str]:
    return [] if text == "none" else [item.strip() for item in text.split(";")]


def _usage(text: str) -> TokenUsage:
    figures, _, flag = text.partition(" ")
    prompt, completion = (int(n) for n in figures.split("/"))
    return TokenUsage(
        prompt_tokens=prompt, completion_tokens=completion, estimated=flag == "estimated"
    )


@given(
    "the billing rule's server billed one request, {prompt:d} prompt and {completion:d} "
    "completion tokens"
)
def _given_billed(context: Context, prompt: int, completion: int) -> None:
    context.billed = [
        BilledCall(
            request_index=0,
            prompt_tokens=prompt,
            completion_tokens=completion,
            streamed=True,
            completed=True,
        )
    ]


@given("the estimate rule gave {prompts} prompt tokens for the messages of the calls")
def _given_rule_prompts(context: Context, prompts: str) -> None:
    context.rule_prompts = [int(n) for n in _items(prompts)]


@when("the billing rule checks the calls {calls}")
def _when_checks(context: Context, calls: str) -> None:
    usages = [_usage(call) for call in _items(calls)]
    context.problems = billing_problems(usages, context.billed, context.rule_prompts)


@then("the billing rule finds nothing")
def _then_nothing(context: Context) -> None:
    assert context.problems == [], context.problems


@then('the billing rule finds "{problem}"')
def _then_problem(context: Context, problem: str) -> None:
    assert len(context.problems) == 1, context.problems
    assert problem in context.problems[0], context.problems
