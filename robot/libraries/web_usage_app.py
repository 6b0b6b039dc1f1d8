"""A test app that makes `on_usage` observable from outside the server process.

`create_usage_app()` serves the actor named by $CLEVERACTORS_WEB_ACTOR (YAML, or JSON when the
name ends in `.json`: a config with a script of megabytes loads in a moment) with
`create_app(..., on_usage=...)`, where `on_usage` appends each result as one JSON line to
$CLEVERACTORS_WEB_USAGE_FILE. $CLEVERACTORS_WEB_SEND_TIMEOUT_S, when set, is the app's
`send_timeout_s`.

With $CLEVERACTORS_WEB_CALLER_HEADER set to a header name, each request is authenticated as the
value of that header (refused without it), and each line also holds `caller` (that value) and
`sent_prompt_tokens`: per model call of the run, what the estimate rule gives for the messages
it sent (`support.billing.SentPrompts`), so a test can hold every call of every run to the
billing rule. Then `features/` must be on PYTHONPATH.
Run it with `python -m uvicorn --factory web_usage_app:create_usage_app --app-dir robot/libraries`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.web import create_app
from cleveractors.web.router import DEFAULT_SEND_TIMEOUT_S
from cleveractors.web.security import current_caller

ACTOR_VARIABLE = "CLEVERACTORS_WEB_ACTOR"
USAGE_FILE_VARIABLE = "CLEVERACTORS_WEB_USAGE_FILE"
SEND_TIMEOUT_VARIABLE = "CLEVERACTORS_WEB_SEND_TIMEOUT_S"
CALLER_HEADER_VARIABLE = "CLEVERACTORS_WEB_CALLER_HEADER"


def create_usage_app() -> FastAPI:
    # An app's own logging: the library adds only a NullHandler, so its warnings (a silent
    # reader dropped, say) reach the server's log only where the app asks for them.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    actor = Path(os.environ[ACTOR_VARIABLE])
    if actor.suffix == ".json":
        executor = ActorExecutor.from_config(json.loads(actor.read_text(encoding="utf-8")))
    else:
        executor = ActorExecutor.from_config(actor)
    usage_file = Path(os.environ[USAGE_FILE_VARIABLE])
    send_timeout_s = float(os.environ.get(SEND_TIMEOUT_VARIABLE) or DEFAULT_SEND_TIMEOUT_S)
    caller_header = os.environ.get(CALLER_HEADER_VARIABLE)
    if caller_header is None:

        def record_usage(result: ExecutionResult) -> None:
            _append(usage_file, result.model_dump_json())

        return create_app(executor, on_usage=record_usage, send_timeout_s=send_timeout_s)
    return _caller_app(executor, usage_file, send_timeout_s, caller_header)


def _caller_app(
    executor: ActorExecutor, usage_file: Path, send_timeout_s: float, caller_header: str
) -> FastAPI:
    from support.billing import SentPrompts  # the test tree's rule; features/ is on the path

    sent = SentPrompts(key=lambda: current_caller() or "")
    executor.agent.model.callbacks = [sent]

    def caller_of(request: Request) -> str | None:
        return request.headers.get(caller_header)

    def record_usage(result: ExecutionResult) -> None:
        caller = current_caller() or ""
        line: dict[str, Any] = {"caller": caller, "sent_prompt_tokens": sent.pop(caller)}
        _append(usage_file, json.dumps({**line, **result.model_dump(mode="json")}))

    return create_app(
        executor, on_usage=record_usage, send_timeout_s=send_timeout_s, authenticate=caller_of
    )


def _append(usage_file: Path, line: str) -> None:
    with usage_file.open("a", encoding="utf-8") as lines:
        lines.write(line + "\n")
