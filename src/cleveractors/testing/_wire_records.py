"""What a scripted server records and answers besides replies: the bill of each request
(`BilledCall`, built from its `WireExchange`), their sums, and the errors it answers instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from cleveractors._script import ScriptedReply

__all__ = [
    "SCRIPT_EXHAUSTED",
    "BilledCall",
    "BilledT",
    "BilledTotal",
    "Rejection",
    "WireExchange",
]


@dataclass(frozen=True)
class BilledCall:
    """What the server billed for one request that got a reply (errors bill nothing).

    A cut-off stream (or a client that went away mid-stream) bills the prompt in full and, as
    completion, the words of the output actually sent; `completed` is then False.
    """

    request_index: int
    """Position of the request among those the server received, from 0."""
    prompt_tokens: int
    completion_tokens: int
    streamed: bool
    completed: bool
    cached_tokens: int = 0
    """Of the prompt tokens, those reported as `prompt_tokens_details.cached_tokens`."""
    reasoning_tokens: int = 0
    """Of the completion tokens, those reported as `completion_tokens_details.reasoning_tokens`."""
    model: str = ""
    """The model the reply named."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class BilledTotal:
    """The sums of every `BilledCall`, as `ScriptedWireServer.billed_total` returns them."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Rejection:
    """A request answered with an error instead of a reply: it takes no reply, bills nothing."""

    status: int
    message: str
    kind: str | None = None
    """The error `type` to send, when not the one the protocol gives `status`."""


SCRIPT_EXHAUSTED = "script_exhausted"
"""The error `type` of a request the script has no reply for, answered HTTP 422: a status no
client retries, since asking again cannot help."""


BilledT = TypeVar("BilledT", bound=BilledCall)


@dataclass(frozen=True)
class WireExchange:
    """One request being answered: its place among the requests, its reply, and what every
    protocol's bill reads. A protocol's exchange adds what its replies need."""

    index: int
    reply: ScriptedReply
    model: str
    prompt_tokens: int
    is_streamed: bool

    def billed(self, kind: type[BilledT], completion_tokens: int, *, completed: bool) -> BilledT:
        """The bill of the request: the protocol's own fields are added with `replace`."""
        streamed = self.is_streamed
        return kind(
            self.index, self.prompt_tokens, completion_tokens, streamed, completed, model=self.model
        )
