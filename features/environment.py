"""Behave hooks and fixtures for the cleveractors unit suite.

Every scenario starts from the same world: an actor config for the `stub` provider with no tools
and an empty script (Given steps fill it in), an empty record of demo-tool calls, and a catcher
for the log records the scenario produces.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

from behave import fixture, use_fixture
from behave.model import Scenario
from behave.runner import Context
from langchain_anthropic._client_utils import _get_default_async_httpx_client
from langchain_openai.chat_models._client_utils import _cached_async_httpx_client
from support.postgres import TemporaryPostgres

from cleveractors import demo
from cleveractors.tokens import count_tokens

# ==============================================================================================
# FIXTURES
# ==============================================================================================


class _RecordCatcher(logging.Handler):
    """Keeps every log record it sees, so Then steps can search them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@fixture
def log_records(context: Context) -> Iterator[list[logging.LogRecord]]:
    """`context.log_records`: every record from INFO up (DEBUG once a step lowers the root)."""
    catcher = _RecordCatcher()
    root = logging.getLogger()
    library = logging.getLogger("cleveractors")
    root_level, library_level = root.level, library.level
    root.addHandler(catcher)
    library.setLevel(logging.INFO)
    context.log_records = catcher.records
    yield catcher.records
    root.removeHandler(catcher)
    root.setLevel(root_level)
    library.setLevel(library_level)


@fixture
def demo_tool_calls(context: Context) -> Iterator[None]:
    """The demo tools' record of handler calls starts empty in every scenario."""
    demo.clear_invocations()
    yield
    demo.clear_invocations()


@fixture
def stub_actor(context: Context) -> Iterator[dict[str, Any]]:
    """`context.actor`: the config dict Given steps build up; When steps load it. The loop does
    not retry (a scripted error reaches the caller) unless a scenario asks for retries."""
    context.actor = {
        "name": "weather-assistant",
        "agent": {
            "type": "llm",
            "provider": "stub",
            "tools": [],
            "script": [],
            "max_retries": 0,
        },
    }
    yield context.actor


@fixture
def restored_environment(context: Context) -> Iterator[None]:
    """Environment variables a scenario sets (API keys) are put back afterwards."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@fixture
def fresh_provider_clients(context: Context) -> Iterator[None]:
    """Each scenario's chat models get new HTTP clients.

    langchain-openai and langchain-anthropic share one cached httpx client per base URL and
    timeout, across event loops. Scenarios each run in a fresh loop against scripted servers on
    ports the OS hands out again: a scenario whose server got an earlier scenario's port would
    reuse that scenario's pooled connection, bound to its closed loop ("Event loop is closed").
    """
    yield
    _cached_async_httpx_client.cache_clear()
    _get_default_async_httpx_client.cache_clear()


# ==============================================================================================
# HOOKS
# ==============================================================================================


def before_all(context: Context) -> None:
    # The token counter loads tiktoken (or logs once that it falls back to a character estimate);
    # doing it here keeps that one-off cost and log line out of the scenarios.
    count_tokens("warm up")
    # Started by the first scenario that asks for a PostgreSQL database, stopped at the end.
    context.postgres = TemporaryPostgres()


def after_all(context: Context) -> None:
    context.postgres.stop()


def before_scenario(context: Context, scenario: Scenario) -> None:
    use_fixture(log_records, context)
    use_fixture(demo_tool_calls, context)
    use_fixture(stub_actor, context)
    use_fixture(restored_environment, context)
    use_fixture(fresh_provider_clients, context)
