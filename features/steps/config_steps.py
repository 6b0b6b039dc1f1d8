"""Steps about actor configs (YAML files and dicts, and what loading them says when they are
wrong) and about the API key never leaking."""

from __future__ import annotations

import copy
import json
import logging
import os
import socket
import tempfile
import warnings
from pathlib import Path
from typing import Any

import yaml
from behave import given, then, when
from behave.runner import Context

from cleveractors import ActorConfig, ActorExecutor, ConfigurationError

_VALID_ACTOR: dict[str, Any] = {
    "name": "weather-assistant",
    "agent": {
        "type": "llm",
        "provider": "stub",
        "max_tool_rounds": 3,
        "tools": [
            {
                "name": "get_weather",
                "handler": "cleveractors.demo:get_weather",
                "timeout_s": 5,
            }
        ],
        "script": [{"text": "Hello."}],
    },
}
_REMOVED = "(removed)"


def _config_file(context: Context, text: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-config-"))
    context.add_cleanup(lambda: [*map(Path.unlink, folder.iterdir()), folder.rmdir()])
    path = folder / "actor.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _set_field(config: dict[str, Any], dotted: str, value: str) -> None:
    *parents, last = dotted.split(".")
    target: Any = config
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    key: Any = int(last) if last.isdigit() else last
    if value == _REMOVED:
        del target[key]
    else:
        target[key] = yaml.safe_load(value)


# -- Given: config files -----------------------------------------------------------------------


@given("an actor config file where {dotted} is {value}")
def _given_mutated_file(context: Context, dotted: str, value: str) -> None:
    config = copy.deepcopy(_VALID_ACTOR)
    _set_field(config, dotted, value)
    context.config_source = _config_file(context, yaml.safe_dump(config))


@given("an actor config dict where {dotted} is {value}")
def _given_mutated_dict(context: Context, dotted: str, value: str) -> None:
    config = copy.deepcopy(_VALID_ACTOR)
    _set_field(config, dotted, value)
    context.config_source = config


@given("an actor config file with this text:")
def _given_file_text(context: Context) -> None:
    context.config_source = _config_file(context, context.text)


@given("an actor config path that does not exist")
def _given_missing_file(context: Context) -> None:
    context.config_source = Path(tempfile.gettempdir()) / "no-such-dir-cleveractors" / "actor.yaml"


@given("the actor is described by this config file:")
def _given_actor_file(context: Context) -> None:
    context.actor = str(_config_file(context, context.text))


@given("warnings are recorded")
def _given_warnings_recorded(context: Context) -> None:
    recorder = warnings.catch_warnings(record=True)
    context.warnings = recorder.__enter__()
    context.add_cleanup(recorder.__exit__, None, None, None)
    warnings.simplefilter("always")  # a warning already given elsewhere is given again


@given("the environment variable {name} is not set")
def _given_unset(context: Context, name: str) -> None:
    os.environ.pop(name, None)


# -- When: loading -----------------------------------------------------------------------------


@when("the actor is loaded from it")
def _when_loaded(context: Context) -> None:
    context.error = None
    try:
        context.executor = ActorExecutor.from_config(context.config_source)
    except ConfigurationError as exc:
        context.error = exc


@when("the actor is loaded from a validated ActorConfig of it")
def _when_loaded_validated(context: Context) -> None:
    context.error = None
    config = ActorConfig.model_validate(context.config_source)
    context.executor = ActorExecutor.from_config(config)


# -- Then: what loading said -------------------------------------------------------------------


@then('loading fails with a ConfigurationError naming the file and "{fragments}"')
def _then_fails_naming_file(context: Context, fragments: str) -> None:
    error = context.error
    assert isinstance(error, ConfigurationError), f"loading gave {error!r}"
    message = str(error)
    assert str(context.config_source) in message, f"the file is not named: {message}"
    for fragment in fragments.split(" ; "):
        assert fragment in message, f"{fragment!r} is not in: {message}"


@then('loading fails with a ConfigurationError saying "{fragments}"')
def _then_fails_saying(context: Context, fragments: str) -> None:
    error = context.error
    assert isinstance(error, ConfigurationError), f"loading gave {error!r}"
    for fragment in fragments.split(" ; "):
        assert fragment in str(error), f"{fragment!r} is not in: {error}"


@then("loading fails, naming the file, with exactly these problems:")
def _then_fails_with_problems(context: Context) -> None:
    """The text: the problems, one per line, in the order they are reported."""
    error = context.error
    assert isinstance(error, ConfigurationError), f"loading gave {error!r}"
    expected = context.text.splitlines()
    heading = f"{context.config_source}: invalid actor config ({len(expected)} problem(s))"
    lines = str(error).splitlines()
    assert lines[0] == heading, f"the heading is {lines[0]!r}, not {heading!r}"
    problems = [line.removeprefix("  ") for line in lines[1:]]
    assert problems == expected, "the problems are:\n" + "\n".join(problems)


@then("the error shows no traceback from inside the libraries it uses")
def _then_no_chained_trace(context: Context) -> None:
    error = context.error
    assert error.__cause__ is None, "a library error is chained"
    assert error.__suppress_context__, "a library error is chained"
    assert "Traceback" not in str(error)


@then("the actor loads, with the tool {name} declared")
def _then_loads(context: Context, name: str) -> None:
    assert context.error is None, context.error
    assert context.executor.name == "weather-assistant"
    assert list(context.executor.agent.tools) == [name]


@then("the DeprecationWarnings given were: {texts}")
def _then_deprecations(context: Context, texts: str) -> None:
    """TEXTS: `none`, or the warnings' messages separated by ` ; `."""
    expected = [] if texts == "none" else texts.split(" ; ")
    given = [
        str(record.message)
        for record in context.warnings
        if issubclass(record.category, DeprecationWarning)
    ]
    assert given == expected, f"the DeprecationWarnings were {given}"


# -- secrets -----------------------------------------------------------------------------------


@given("the environment variable {name} holds a canary API key")
def _given_canary(context: Context, name: str) -> None:
    context.canary = "sk-canary-" + os.urandom(12).hex()
    os.environ[name] = context.canary


@given("every log record is captured, down to DEBUG")
def _given_debug_logs(context: Context) -> None:
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    saved = [(logger, logger.level) for logger in loggers]
    context.add_cleanup(lambda: [logger.setLevel(level) for logger, level in saved])
    for logger in loggers:
        logger.setLevel(logging.DEBUG)


@given("an openai actor whose server port is closed, reading its key from {name}, with no retries")
def _given_unreachable_actor(context: Context, name: str) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = context.actor["agent"]
    del agent["script"]
    agent.update(
        provider="openai",
        model="gpt-4o-mini",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key_env=name,
        max_retries=0,
        request_timeout_s=5,
    )


@then("the canary API key appears nowhere")
def _then_no_canary(context: Context) -> None:
    canary, outcome, executor = context.canary, context.outcome, context.executor
    places: dict[str, str] = {
        "the result": outcome.last_result.model_dump_json(),
        "the executor": repr(executor) + repr(vars(executor)),
        "the agent": repr(executor.agent) + repr(vars(executor.agent)),
        "the model": repr(executor.agent.model) + str(executor.agent.model),
        "the model's fields": json.dumps(executor.agent.model.model_dump(), default=repr),
    }
    for number, record in enumerate(context.log_records):
        places[f"log record {number}"] = record.getMessage() + repr(record.args)
    error: BaseException | None = outcome.error
    depth = 0
    while error is not None:
        places[f"the exception (depth {depth})"] = f"{error} {error!r} {error.args!r}"
        error, depth = error.__cause__ or error.__context__, depth + 1
    assert outcome.error is not None, "the turn was meant to fail"
    debug_loggers = {r.name for r in context.log_records if r.levelno == logging.DEBUG}
    assert "openai._base_client" in debug_loggers, debug_loggers
    leaks = [where for where, text in places.items() if canary in text]
    assert not leaks, f"the API key leaked into: {leaks}"


@then('the error does not say "{text}"')
def _then_error_lacks(context: Context, text: str) -> None:
    assert text not in str(context.error), f"{text!r} is in: {context.error}"
