"""Steps of store.paths.feature: where a relative SQLite path in a config points, and stores
that must not create their database.

Scenarios that change the working directory put it back when they end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from behave import given, then, when
from behave.runner import Context
from sqlalchemy.engine import make_url

from cleveractors.config import load_actor_config
from cleveractors.errors import ConfigurationError
from cleveractors.executor import ActorExecutor
from cleveractors.store import SqlStore, resolve_sqlite_path


def _new_folder(context: Context, prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"cleveractors-{prefix}-")).resolve()
    context.add_cleanup(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _stub_config(url: str) -> dict[str, object]:
    return {
        "name": "shop",
        "agent": {"provider": "stub", "script": [{"text": "Noted."}]},
        "store": {"url": url},
    }


def _opened(executor: ActorExecutor) -> ActorExecutor:
    async def open_and_close() -> None:
        async with executor:
            pass

    asyncio.run(open_and_close())
    return executor


def _database_of(store: SqlStore | None) -> Path:
    assert store is not None, "the executor has no store"
    return Path(str(make_url(store.url).database))


# -- Given -----------------------------------------------------------------------------------------


@given('an actor file in a folder of its own keeps its store at "{url}"')
def actor_file_with_store(context: Context, url: str) -> None:
    context.actor_file = _new_folder(context, "actor") / "shop.yaml"
    context.actor_file.write_text(yaml.safe_dump(_stub_config(url)), encoding="utf-8")


@given("the working directory is another, empty folder")
def elsewhere(context: Context) -> None:
    before = Path.cwd()
    context.add_cleanup(os.chdir, before)
    context.working_folder = _new_folder(context, "cwd")
    os.chdir(context.working_folder)


# -- When ------------------------------------------------------------------------------------------


@given("the actor's executor is built {how} and opened")
@when("the actor's executor is built {how} and opened")
def build_from_file(context: Context, how: str) -> None:
    if how == "from the file's path":
        executor = ActorExecutor.from_config(context.actor_file)
    elif how == "from its loaded config and the file's folder":
        config = load_actor_config(context.actor_file)
        executor = ActorExecutor.from_config(config, config_dir=context.actor_file.parent)
    else:
        raise NotImplementedError(how)
    context.executor = _opened(executor)


@when('an executor is built from a dict config keeping its store at "{url}" and opened')
def build_from_dict(context: Context, url: str) -> None:
    context.executor = _opened(ActorExecutor.from_config(_stub_config(url)))


@when('a store on "{url}" that must not create its database is opened')
def open_existing_only(context: Context, url: str) -> None:
    context.store_error = _error_opening(SqlStore(url, should_create=False))


@when("a store for the actor file that must not create its database is opened")
def open_existing_beside(context: Context) -> None:
    config = load_actor_config(context.actor_file)
    assert config.store is not None
    context.store = SqlStore.from_config(
        config.store, config_dir=context.actor_file.parent, should_create=False
    )
    context.store_error = _error_opening(context.store)


def _error_opening(store: SqlStore) -> Exception | None:
    async def open_and_close() -> None:
        async with store:
            pass

    try:
        asyncio.run(open_and_close())
    except Exception as exc:  # the Then step says which type it expects
        return exc
    return None


@when("the sessions idle {days:d} days from now are listed")
def list_idle(context: Context, days: int) -> None:
    world = context.store_world
    later = datetime.now(UTC) + timedelta(days=days)

    async def listed() -> list[str]:
        async with SqlStore(world.url, retention_days=world.retention_days) as store:
            return await store.idle_sessions(now=later)

    context.idle_sessions = asyncio.run(listed())


# -- Then ------------------------------------------------------------------------------------------


@then("the store's database is \"{name}\" in the actor file's folder")
def database_beside_file(context: Context, name: str) -> None:
    expected = context.actor_file.parent / name
    assert _database_of(context.executor.store) == expected, context.executor.store.url
    assert expected.is_file(), f"{expected} was not created"


@then('the store\'s database is "{name}" in the working directory')
def database_in_cwd(context: Context, name: str) -> None:
    database = _database_of(context.executor.store)
    assert database == Path(name), f"{database} is not the relative {name}"
    assert (context.working_folder / name).is_file(), list(context.working_folder.iterdir())


@then("the working directory is still empty")
def cwd_empty(context: Context) -> None:
    found = list(context.working_folder.iterdir())
    assert not found, f"created in the working directory: {found}"


@then('"{url}" from the folder "{folder}" is "{resolved}"')
def resolved_url(context: Context, url: str, folder: str, resolved: str) -> None:
    got = resolve_sqlite_path(url, Path(folder))
    assert got == resolved, f"{url!r} from {folder} is {got!r}"


@then('it fails with ConfigurationError naming "{name}" in the working directory')
def refused_missing(context: Context, name: str) -> None:
    error = context.store_error
    expected = f"no store database at {context.working_folder / name} (nothing was created)"
    assert isinstance(error, ConfigurationError), f"opened, or failed otherwise: {error!r}"
    assert str(error) == expected, error


@then('it opens "{name}" in the actor file\'s folder')
def opened_existing(context: Context, name: str) -> None:
    assert context.store_error is None, context.store_error
    assert _database_of(context.store) == context.actor_file.parent / name, context.store.url


@then('the store on "{url}" is shown as "{shown}"')
def shown_url(context: Context, url: str, shown: str) -> None:
    assert SqlStore(url).shown_url == shown, SqlStore(url).shown_url


@then('the idle sessions are "{ids}"')
def idle_are(context: Context, ids: str) -> None:
    expected = [part.strip() for part in ids.split(",")]
    assert context.idle_sessions == expected, context.idle_sessions
