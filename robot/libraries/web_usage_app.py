"""A test app that makes `on_usage` observable from outside the server process.

`create_usage_app()` serves the actor named by $CLEVERACTORS_WEB_ACTOR (YAML, or JSON when the
name ends in `.json`: a config with a script of megabytes loads in a moment) with
`create_app(..., on_usage=...)`, where `on_usage` appends each result as one JSON line to
$CLEVERACTORS_WEB_USAGE_FILE. $CLEVERACTORS_WEB_SEND_TIMEOUT_S, when set, is the app's
`send_timeout_s`.
Run it with `python -m uvicorn --factory web_usage_app:create_usage_app --app-dir robot/libraries`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fastapi import FastAPI

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.web import create_app
from cleveractors.web.router import DEFAULT_SEND_TIMEOUT_S

ACTOR_VARIABLE = "CLEVERACTORS_WEB_ACTOR"
USAGE_FILE_VARIABLE = "CLEVERACTORS_WEB_USAGE_FILE"
SEND_TIMEOUT_VARIABLE = "CLEVERACTORS_WEB_SEND_TIMEOUT_S"


def create_usage_app() -> FastAPI:
    actor = Path(os.environ[ACTOR_VARIABLE])
    if actor.suffix == ".json":
        executor = ActorExecutor.from_config(json.loads(actor.read_text(encoding="utf-8")))
    else:
        executor = ActorExecutor.from_config(actor)
    usage_file = Path(os.environ[USAGE_FILE_VARIABLE])

    def record_usage(result: ExecutionResult) -> None:
        with usage_file.open("a", encoding="utf-8") as lines:
            lines.write(result.model_dump_json() + "\n")

    send_timeout_s = float(os.environ.get(SEND_TIMEOUT_VARIABLE) or DEFAULT_SEND_TIMEOUT_S)
    return create_app(executor, on_usage=record_usage, send_timeout_s=send_timeout_s)
