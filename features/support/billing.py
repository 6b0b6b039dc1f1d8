"""The documented billing rule, checked call by call against a scripted server's record.

docs/tokens.md: a call the provider answered in full is billed exactly, with the
provider's own figures; a call cut off after the loop issued it, before its usage arrived (a
client hanging up, a stop, a dropped stream), is billed an estimate and flagged `estimated`, its
prompt counted from the messages it sent (`cleveractors.tokens.estimate_prompt_tokens`). Which of
the two a call becomes depends on when the cut lands, and under load that moves: a hang-up meant
to land during a tool may land just after the next request was sent. So a test that bills under
concurrency states the rule, not a timing: `billing_problems` holds each call to it, matched to
its own request (never only in sum, where one error can hide another).

The messages a call sent are seen where the model receives them: `SentPrompts`, a callback given
to the chat model, applies the estimate rule to them, per call, in order. The Behave steps, the
Robot libraries and the web test app (`robot/libraries/web_usage_app.py`) all check through here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import BaseMessage

from cleveractors import TokenUsage
from cleveractors.testing import BilledCall, conversation_of
from cleveractors.tokens import estimate_prompt_tokens


class SentPrompts(AsyncCallbackHandler):
    """Give it to a chat model as a callback: for every call the model starts, it records the
    prompt the estimate rule gives for the messages sent, in order, under `key()` (e.g. the web
    caller's identity, read from a context variable while the call starts)."""

    def __init__(self, key: Callable[[], str] = lambda: "") -> None:
        self._key = key
        self._prompts: defaultdict[str, list[int]] = defaultdict(list)

    async def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self._prompts[self._key()].append(estimate_prompt_tokens(messages[0]))

    def of(self, key: str = "") -> list[int]:
        """The prompts recorded under `key`, one per call started, in order."""
        return list(self._prompts.get(key, ()))

    def pop(self, key: str = "") -> list[int]:
        """The prompts recorded under `key`, forgotten once read."""
        return self._prompts.pop(key, [])


def requests_of_conversation(
    requests: Sequence[Mapping[str, Any]], billed: Sequence[BilledCall], conversation: str
) -> list[BilledCall | None]:
    """Per request of one conversation that a scripted server received, in order, what the server
    billed for it (None: refused, or not billed yet). A conversation is named by its first user
    message (`conversation_of`)."""
    by_request = {call.request_index: call for call in billed}
    return [
        by_request.get(index)
        for index, body in enumerate(requests)
        if conversation_of(body) == conversation
    ]


def billing_problems(
    calls: Sequence[TokenUsage],
    billed: Sequence[BilledCall | None],
    sent_prompts: Sequence[int],
) -> list[str]:
    """What breaks the billing rule in a run's calls (its `usage_by_call` usages, in order), given
    what the server billed for each request of that run (`billed`, in the order received) and the
    prompt the estimate rule gives for each call's messages (`sent_prompts`, from `SentPrompts`).
    Call `k` answers request `k`; empty when every call keeps the rule:

    - every request the server received is a call of the run: none goes unbilled;
    - a call not flagged `estimated` is exact: its prompt and completion are the server's bill
      for its request, or 0 and 0 when the server billed nothing (refused it, or never received
      it). No tolerance: these figures are the provider's own, copied.
    - a call flagged `estimated` bills exactly `sent_prompts[k]` prompt tokens. The bound is 0
      because the estimate is that rule over those same messages; a difference means it counted
      another call's messages, or one twice. When the call was cut off before the model saw its
      messages (no `sent_prompts[k]`), nothing was sent from a longer conversation than the
      previous call's, so its prompt must exceed `sent_prompts[k - 1]` (or 0 for a first call).
      The estimate is not compared with the server's figure: the scripted servers bill a word
      a token without framing, the estimate counts tiktoken tokens (or a token per four
      characters without tiktoken's cache) plus OpenAI's framing, and no fixed ratio holds
      between the two for every text.
    - a call the server never received received nothing, so its completion is 0.
    """
    problems = [
        f"request {k} (billed {billed[k]}) is not on the run's bill"
        for k in range(len(calls), len(billed))
    ]
    for k, usage in enumerate(calls):
        bill = billed[k] if k < len(billed) else None
        figures = (usage.prompt_tokens, usage.completion_tokens)
        if not usage.estimated:
            expected = (0, 0) if bill is None else (bill.prompt_tokens, bill.completion_tokens)
            if figures != expected:
                problems.append(f"call {k}: exact {figures}, the server billed {expected}")
            continue
        problems.extend(_estimate_problems(k, usage, sent_prompts))
        if k >= len(billed) and usage.completion_tokens:
            problems.append(f"call {k}: {usage} bills a completion the server never sent")
    return problems


def _estimate_problems(k: int, usage: TokenUsage, sent_prompts: Sequence[int]) -> list[str]:
    if k < len(sent_prompts):
        if usage.prompt_tokens != sent_prompts[k]:
            rule = sent_prompts[k]
            return [f"call {k}: estimated prompt {usage.prompt_tokens}, the rule gives {rule}"]
        return []
    floor = sent_prompts[k - 1] if 0 < k <= len(sent_prompts) else 0
    if usage.prompt_tokens <= floor:
        return [f"call {k}: estimated prompt {usage.prompt_tokens}, not above {floor}"]
    return []
