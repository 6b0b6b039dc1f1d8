"""Reading a request, below every route: who sends it, whether its body is JSON of an accepted
size and shape, and whether its conversation is within the limits. A request that fails a check
is refused (`RequestRejected`) before anything runs; each route words the refusal in its own
format.

The checks run in this order: the caller (`authenticate`, 401), the Content-Type
(`application/json`, 415), the body size (413), its shape (422), and the history limits
(`max_history_turns`, `max_turn_chars`; 422 naming the limit).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from cleveractors.web.openai_compat import ErrorResponse, error_response
from cleveractors.web.security import Authenticate, current_caller, set_current_caller
from cleveractors.web.sessions import CallerOf

__all__ = [
    "DEFAULT_MAX_HISTORY_TURNS",
    "DEFAULT_MAX_TURN_CHARS",
    "RequestPolicy",
    "RequestRejected",
    "as_provider_history",
    "authenticate_request",
    "caller_check",
    "check_history",
    "new_request_id",
    "openai_error",
    "read_request",
    "refusal_of",
]

DEFAULT_MAX_HISTORY_TURNS = 200
DEFAULT_MAX_TURN_CHARS = 16_000
"""About 4k tokens of English: a long pasted text fits; a turn is not a file upload. Sized with
the event loop in mind: every turn is converted for the provider on it, at every model call."""
_JSON = "application/json"

Body = TypeVar("Body", bound=BaseModel)


class RequestRejected(Exception):
    """A request we refuse before running anything; each route renders it in its own format."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.param = param
        self.code = code
        self._headers = dict(headers or {})

    @property
    def headers(self) -> dict[str, str]:
        asks_for_key = {"WWW-Authenticate": "Bearer"} if self.status_code == 401 else {}
        return {**asks_for_key, **self._headers}

    def as_detail(self) -> JSONResponse:
        """The refusal as FastAPI words its own: `{"detail": message}`."""
        return JSONResponse(
            {"detail": self.message}, status_code=self.status_code, headers=self.headers
        )

    def as_openai_error(self) -> JSONResponse:
        """The refusal in OpenAI's error format, which the `openai` client raises with."""
        # OpenAI's own word for a spent quota is both the error's type and its code.
        kind = (
            "insufficient_quota" if self.code == "insufficient_quota" else "invalid_request_error"
        )
        problem = error_response(self.message, type=kind, param=self.param, code=self.code)
        return openai_error(problem, self.status_code, self.headers)


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """What the routes check before they run anything."""

    authenticate: Authenticate | None
    max_body_bytes: int
    max_history_turns: int
    max_turn_chars: int


def new_request_id() -> str:
    """The id of one request: in its `X-Request-ID` header and in the log lines about it."""
    return uuid.uuid4().hex


def openai_error(
    problem: ErrorResponse, status_code: int, headers: dict[str, str] | None = None
) -> JSONResponse:
    """OpenAI's error body with its status."""
    return JSONResponse(problem.model_dump(mode="json"), status_code=status_code, headers=headers)


async def read_request(request: Request, model: type[Body], policy: RequestPolicy) -> Body:
    """The body of an authenticated caller (401), JSON by its Content-Type (415), size-checked
    (413), then validated (422).

    Raises:
        RequestRejected: the first check that fails.
    """
    await authenticate_request(request, policy.authenticate)
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != _JSON:
        # A page on any site may POST text/plain without a CORS preflight; JSON needs one.
        raise RequestRejected(415, f"the body must be {_JSON}, not {media_type or 'untyped'}")
    body = await _read_body(request, policy.max_body_bytes)
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise refusal_of(exc) from None


async def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    # A chunked body declares no length, and a declared one may lie: count what arrives.
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise _too_large(max_bytes)
    return bytes(body)


async def authenticate_request(request: Request, authenticate: Authenticate | None) -> None:
    """Make the request's caller the current one (`current_caller()`).

    Raises:
        RequestRejected: 401 when `authenticate` knows no caller; its own refusal (a 403) as it
            worded it.
    """
    if authenticate is None:
        return
    try:
        identity = authenticate(request)
        if inspect.isawaitable(identity):
            identity = await identity
    except StarletteHTTPException as refused:
        # An `authenticate` may refuse in its own words (a 403 for a known caller who may not
        # use the actor): each route then says it in its own format.
        raise RequestRejected(
            refused.status_code, str(refused.detail), headers=refused.headers
        ) from None
    if identity is None:
        message = "a valid API key is required (Authorization: Bearer <key>)"
        raise RequestRejected(401, message, code="invalid_api_key")
    set_current_caller(identity)


def caller_check(policy: RequestPolicy) -> CallerOf:
    """How the routes that run nothing learn whose request it is (401 for no one)."""

    async def caller_of(request: Request) -> str | None:
        """The authenticated caller, whose sessions and runs alone those routes show."""
        try:
            await authenticate_request(request, policy.authenticate)
        except RequestRejected as rejected:
            raise HTTPException(
                rejected.status_code, rejected.message, headers=rejected.headers
            ) from None
        return current_caller()

    return caller_of


def check_history(
    message: str, earlier: Iterable[str], policy: RequestPolicy, *, where: str = "history"
) -> None:
    """422 when the conversation is longer than `max_history_turns` or a turn longer than
    `max_turn_chars`: converting a long history for the provider runs on the event loop."""
    texts = list(earlier)
    if len(texts) > policy.max_history_turns:
        raise RequestRejected(
            422,
            f"{where}: {len(texts)} earlier turns; at most {policy.max_history_turns} "
            "are accepted (max_history_turns)",
            param=where,
        )
    for name, text in [("message", message)] + [(f"{where}.{n}", t) for n, t in enumerate(texts)]:
        if len(text) > policy.max_turn_chars:
            raise RequestRejected(
                422,
                f"{name}: {len(text)} characters; at most {policy.max_turn_chars} "
                "are accepted per turn (max_turn_chars)",
                param=name,
            )


def as_provider_history(turns: list[dict[str, object]]) -> list[dict[str, object]]:
    """The history with each assistant turn's text as one text block: langchain-openai looks at
    a plain-string assistant content character by character (its audio-block check), which at
    200 turns of 32k characters blocked the event loop for 2.5 s; one block costs one look."""
    return [
        {**turn, "content": [{"type": "text", "text": turn["content"]}]}
        if turn["role"] == "assistant"
        else turn
        for turn in turns
    ]


def _too_large(max_bytes: int) -> RequestRejected:
    return RequestRejected(413, f"request body is larger than {max_bytes} bytes")


def refusal_of(exc: ValidationError, status_code: int = 422) -> RequestRejected:
    """A body that failed validation, refused with every problem named by where it is."""
    problems: list[tuple[str, str]] = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        # Our own validators' messages read better without pydantic's "Value error, " prefix.
        cause = error.get("ctx", {}).get("error")
        problems.append((where, str(cause) if error["type"] == "value_error" else error["msg"]))
    message = "; ".join(f"{where or 'body'}: {problem}" for where, problem in problems)
    return RequestRejected(status_code, message, param=problems[0][0] or None)
