"""Steps of store.idempotency.feature: idempotency keys in `SqlStore`, on SQLite and PostgreSQL.

The store comes from store_steps.py's "a fresh <database> store" steps (`context.store_world`).
Steps that name no time use the store's own methods; steps "at second N" or "N days ago" call
`cleveractors.store.idempotency` with their own clock, which those methods hand the real one.
"""

from __future__ import annotations

import asyncio
import json
import subprocess  # nosec B404  # child Python processes of our own
import sys
import textwrap
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TypeVar

from behave import given, register_type, then, when
from behave.runner import Context
from langchain_core.messages import BaseMessage, convert_to_messages
from parse import with_pattern
from sqlalchemy import select, text, update

from cleveractors.errors import IdempotencyError, IdempotencyKeyInProgressError
from cleveractors.result import ErrorInfo, ExecutionResult, ToolCallRecord
from cleveractors.store import Claimed, IdempotencyClaim, Replay, SqlStore, request_digest
from cleveractors.store.idempotency import claim_key, renew_key
from cleveractors.store.schema import idempotency_keys, schema_version
from cleveractors.usage import LLMCallUsage, TokenUsage

T = TypeVar("T")


@with_pattern(r'[^"]*')
def _quoted(text: str) -> str:
    return text


@with_pattern(r"\w+")
def _word(text: str) -> str:
    return text


# `Quoted`: text between quotes, so "run "r-1" claims" never swallows a following "of caller".
register_type(Quoted=_quoted, Word=_word)


@dataclass(frozen=True, slots=True)
class _Contender:
    """What became of one of several concurrent claims: granted, or refused naming the run that
    holds the key (`holder`), or some other failure (`failure`)."""

    run_id: str
    is_granted: bool = False
    holder: str | None = None
    failure: str | None = None


def _store(context: Context) -> SqlStore:
    world = context.store_world
    return SqlStore(world.url, retention_days=world.retention_days, lease_s=world.lease_s)


def _using(context: Context, use: Callable[[SqlStore], Awaitable[T]]) -> T:
    async def run() -> T:
        async with _store(context) as store:
            return await use(store)

    return asyncio.run(run())


def _outcome(action: Callable[[], IdempotencyClaim]) -> IdempotencyClaim | Exception:
    try:
        return action()
    except Exception as exc:  # the Then step says which type it expects
        return exc


def _answer(run_id: str) -> ExecutionResult:
    """An answered run's result with something in every part a replay must give back."""
    calls = (
        LLMCallUsage(
            index=1,
            purpose="round",
            round=1,
            usage=TokenUsage(prompt_tokens=120, completion_tokens=14),
            provider="openai",
            model="gpt-4o-mini-2024-07-18",
            cost_usd=Decimal("0.00684"),
        ),
        LLMCallUsage(
            index=2,
            purpose="round",
            round=2,
            usage=TokenUsage(prompt_tokens=180, completion_tokens=40, cache_read_tokens=100),
            cost_usd=Decimal("0.0000000384"),
        ),
    )
    weather = ToolCallRecord(
        call_id="call_1",
        name="get_weather",
        arguments={"city": "Paris"},
        status="ok",
        output="Sunny, 24°C",
        duration_s=0.25,
        round=1,
    )
    return ExecutionResult(
        text="Let me look.\n\nIt is sunny in Paris.",
        usage_by_call=calls,
        tool_calls=(weather,),
        rounds=2,
        answer="It is sunny in Paris.",
        run_id=run_id,
    )


def _failure(run_id: str, *, is_cancelled: bool) -> ExecutionResult:
    spent = LLMCallUsage(
        index=1, purpose="round", round=1, usage=TokenUsage(prompt_tokens=50, completion_tokens=3)
    )
    error = ErrorInfo(type="CancelledError" if is_cancelled else "RuntimeError", message="")
    return ExecutionResult(
        text="", usage_by_call=(spent,), error=error, cancelled=is_cancelled, run_id=run_id
    )


def _result_for(outcome: str, run_id: str) -> ExecutionResult:
    endings = {
        "an answer": lambda: _answer(run_id),
        "a failure": lambda: _failure(run_id, is_cancelled=False),
        "answered it": lambda: _answer(run_id),
        "failed": lambda: _failure(run_id, is_cancelled=False),
        "was cancelled": lambda: _failure(run_id, is_cancelled=True),
    }
    return endings[outcome]()


def _claim(
    context: Context, run_id: str, key: str, message: str, *, caller: str | None = None
) -> IdempotencyClaim | Exception:
    digest = request_digest(message, None, None)
    return _outcome(
        lambda: _using(
            context,
            lambda store: store.claim_idempotency_key(
                caller=caller, key=key, request_digest=digest, run_id=run_id
            ),
        )
    )


def _settle(
    context: Context, run_id: str, key: str, result: ExecutionResult, *, caller: str | None = None
) -> bool:
    return _using(
        context,
        lambda store: store.settle_idempotency_key(
            caller=caller, key=key, run_id=run_id, result=result
        ),
    )


def _moment(context: Context, second: int) -> datetime:
    """`second` seconds into the scenario's own clock."""
    if not hasattr(context, "clock_start"):
        context.clock_start = datetime.now(UTC)
    start: datetime = context.clock_start
    return start + timedelta(seconds=second)


def _claim_at(
    context: Context, moment: datetime, run_id: str, key: str, message: str
) -> IdempotencyClaim | Exception:
    async def claim(store: SqlStore) -> IdempotencyClaim:
        return await claim_key(
            store.engine,
            caller="",
            key=key,
            request_digest=request_digest(message, None, None),
            run_id=run_id,
            now=moment,
            lease_s=store.lease_s,
            retention_days=store.retention_days,
        )

    return _outcome(lambda: _using(context, claim))


def _answers(context: Context, run_id: str, key: str) -> ExecutionResult:
    """Settle the run's claim with its answer (through the store, on the real clock)."""
    result = _answer(run_id)
    assert _settle(context, run_id, key, result), f"{run_id} could not settle"
    context.answers = {**getattr(context, "answers", {}), run_id: result}
    return result


# -- Given -----------------------------------------------------------------------------------------


def _claimed_and(
    context: Context, run_id: str, key: str, message: str, state: str, *, caller: str | None
) -> None:
    claimed = _claim(context, run_id, key, message, caller=caller)
    assert claimed == Claimed(), claimed
    if state == "answered it":
        _answers(context, run_id, key)
    elif state != "is still going":
        result = _result_for(state, run_id)
        assert _settle(context, run_id, key, result, caller=caller), f"{run_id} could not settle"


@given('run "{run_id:Quoted}" claimed key "{key}" for the request "{message}" and {state}')
def claimed_and(context: Context, run_id: str, key: str, message: str, state: str) -> None:
    _claimed_and(context, run_id, key, message, state, caller=None)


@given(
    'run "{run_id:Quoted}" of caller "{caller}" claimed key "{key}" for the request "{message}" '
    "and {state}"
)
def caller_claimed_and(
    context: Context, run_id: str, caller: str, key: str, message: str, state: str
) -> None:
    _claimed_and(context, run_id, key, message, state, caller=caller)


@given(
    '{amount:d} {unit:Word} ago run "{run_id}" claimed key "{key}" for the request "{message}" '
    "and {state}"
)
def claimed_ago(
    context: Context, amount: int, unit: str, run_id: str, key: str, message: str, state: str
) -> None:
    then = datetime.now(UTC) - timedelta(**{unit: amount})
    claimed = _claim_at(context, then, run_id, key, message)
    assert claimed == Claimed(), claimed
    if state == "answered it":
        _answers(context, run_id, key)


@given('at second {second:d} run "{run_id}" claimed key "{key}" for the request "{message}"')
def claimed_at_second(context: Context, second: int, run_id: str, key: str, message: str) -> None:
    claimed = _claim_at(context, _moment(context, second), run_id, key, message)
    assert claimed == Claimed(), claimed


@given('run "{run_id}" renewed its claim at seconds {seconds}')
def renewed_at(context: Context, run_id: str, seconds: str) -> None:
    moments = [] if seconds == "none" else [int(second) for second in seconds.split(",")]
    for second in moments:
        renewed = _renew_at(context, _moment(context, second), run_id, "k-1")
        assert renewed, f"{run_id} could not renew at second {second}"


@given('run "{run_id}" renewed its claim on key "{key}" just now')
def renewed_now(context: Context, run_id: str, key: str) -> None:
    renewed = _using(
        context,
        lambda store: store.renew_idempotency_key(caller=None, key=key, run_id=run_id),
    )
    assert renewed, f"{run_id} could not renew"


def _renew_at(context: Context, moment: datetime, run_id: str, key: str) -> bool:
    return _using(
        context,
        lambda store: renew_key(
            store.engine, caller="", key=key, run_id=run_id, now=moment, lease_s=store.lease_s
        ),
    )


@given("the store's idempotency table is gone")
def idempotency_table_gone(context: Context) -> None:
    async def drop(store: SqlStore) -> None:
        async with store.engine.begin() as connection:
            await connection.execute(text(f"DROP TABLE {idempotency_keys.name}"))

    _using(context, drop)


@given("the database is as the schema version before idempotency keys left it")
def schema_before_keys(context: Context) -> None:
    async def downgrade(store: SqlStore) -> None:
        async with store.engine.begin() as connection:
            await connection.execute(text(f"DROP TABLE {idempotency_keys.name}"))
            await connection.execute(update(schema_version).values(version=1))

    _using(context, downgrade)


@given('the answer kept for key "{key}" is one this cleveractors cannot read')
def unreadable_answer(context: Context, key: str) -> None:
    async def spoil(store: SqlStore) -> None:
        async with store.engine.begin() as connection:
            await connection.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.key == key)
                .values(result='{"text": "hi", "answer_v0": "hi"}')
            )

    _using(context, spoil)


# -- When ------------------------------------------------------------------------------------------


@when('run "{run_id:Quoted}" claims key "{key}" for the request "{message}"')
def claims(context: Context, run_id: str, key: str, message: str) -> None:
    context.claim = _claim(context, run_id, key, message)


@when('run "{run_id:Quoted}" of caller "{caller}" claims key "{key}" for the request "{message}"')
def caller_claims(context: Context, run_id: str, caller: str, key: str, message: str) -> None:
    context.claim = _claim(context, run_id, key, message, caller=caller)


@when('run "{run_id}" claims a key of {length:d} characters for the request "{message}"')
def claims_key_of_length(context: Context, run_id: str, length: int, message: str) -> None:
    context.claim = _claim(context, run_id, "k" * length, message)


@when('at second {second:d} run "{run_id}" claims key "{key}" for the request "{message}"')
def claims_at_second(context: Context, second: int, run_id: str, key: str, message: str) -> None:
    context.claim = _claim_at(context, _moment(context, second), run_id, key, message)


@when('run "{run_id}" answers it')
def answers(context: Context, run_id: str) -> None:
    _answers(context, run_id, "k-1")


@when('run "{run_id}" settles key "{key}" with {outcome}')
def settles(context: Context, run_id: str, key: str, outcome: str) -> None:
    context.settled = _settle(context, run_id, key, _result_for(outcome, run_id))


@when("the store is pruned")
def pruned(context: Context) -> None:
    _using(context, lambda store: store.prune())


_CONTENDER = textwrap.dedent(
    """
    import asyncio, sys
    from cleveractors.errors import IdempotencyKeyInProgressError
    from cleveractors.store import SqlStore

    async def contend(url: str, key: str, digest: str, run_id: str) -> None:
        async with SqlStore(url) as store:
            print("ready", flush=True)
            sys.stdin.readline()
            try:
                await store.claim_idempotency_key(
                    caller=None, key=key, request_digest=digest, run_id=run_id
                )
            except IdempotencyKeyInProgressError as exc:
                print("held", exc.run_id, flush=True)
            else:
                print("granted", flush=True)

    asyncio.run(contend(*sys.argv[1:5]))
    """
)


def _contender(run_id: str, outcome: IdempotencyClaim | BaseException) -> _Contender:
    if isinstance(outcome, Claimed):
        return _Contender(run_id, is_granted=True)
    if isinstance(outcome, IdempotencyKeyInProgressError):
        return _Contender(run_id, holder=outcome.run_id)
    return _Contender(run_id, failure=repr(outcome))


async def _contend_in_process(
    stores: Sequence[SqlStore], key: str, digest: str, run_ids: Sequence[str]
) -> list[_Contender]:
    outcomes = await asyncio.gather(
        *(
            store.claim_idempotency_key(caller=None, key=key, request_digest=digest, run_id=run_id)
            for store, run_id in zip(stores, run_ids, strict=True)
        ),
        return_exceptions=True,
    )
    return [_contender(run_id, outcome) for run_id, outcome in zip(run_ids, outcomes, strict=True)]


def _contend_in_processes(
    context: Context, key: str, digest: str, run_ids: Sequence[str]
) -> list[_Contender]:
    # The schema is made first, so the contenders only read it.
    _using(context, lambda store: store.usage())
    children = [
        subprocess.Popen(  # nosec B603  # our own interpreter and script
            [sys.executable, "-c", _CONTENDER, context.store_world.url, key, digest, run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for run_id in run_ids
    ]
    for child in children:
        context.add_cleanup(child.kill)
    for child in children:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "ready", f"a contender said {line!r}"
    for child in children:  # all told as close together as we can
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    said = [child.communicate(timeout=60)[0].split() for child in children]
    return [_said(run_id, words) for run_id, words in zip(run_ids, said, strict=True)]


def _said(run_id: str, words: list[str]) -> _Contender:
    match words:
        case ["granted"]:
            return _Contender(run_id, is_granted=True)
        case ["held", holder]:
            return _Contender(run_id, holder=holder)
        case _:
            return _Contender(run_id, failure=" ".join(words))


@when('{count:d} runs claim key "{key}" for the request "{message}" at once, {contenders}')
def claim_at_once(context: Context, count: int, key: str, message: str, contenders: str) -> None:
    digest = request_digest(message, None, None)
    run_ids = [f"r-{number}" for number in range(1, count + 1)]

    async def through_stores(how_many: int) -> list[_Contender]:
        stores = [_store(context) for _ in range(how_many)]
        for store in stores:
            await store.open()
        try:
            chosen = stores if how_many > 1 else stores * count
            return await _contend_in_process(chosen, key, digest, run_ids)
        finally:
            for store in stores:
                await store.aclose()

    if contenders == "from a process each":
        context.contenders = _contend_in_processes(context, key, digest, run_ids)
    else:
        how_many = {"through one store": 1, "through a store each": count}[contenders]
        context.contenders = asyncio.run(through_stores(how_many))


# -- Then ------------------------------------------------------------------------------------------


@then("the claim is granted")
def granted(context: Context) -> None:
    assert context.claim == Claimed(), context.claim


@then('the claim is granted, and run "{run_id}" can neither renew nor settle key "{key}" now')
def granted_and_displaced(context: Context, run_id: str, key: str) -> None:
    granted(context)
    assert not _renew_at(context, _moment(context, 46), run_id, key), f"{run_id} renewed"
    assert not _settle(context, run_id, key, _answer(run_id)), f"{run_id} settled"


def _names(error: object, key: str, run_id: str) -> None:
    """`error` is about `key`, held by `run_id`: in its attributes and its message."""
    assert isinstance(error, IdempotencyError), repr(error)
    assert (error.key, error.run_id) == (key, run_id), (error.key, error.run_id)
    assert f"{key!r}" in str(error), error
    assert run_id in str(error), error


def _refused_in_progress(error: object, key: str, run_id: str) -> None:
    assert isinstance(error, IdempotencyKeyInProgressError), repr(error)
    _names(error, key, run_id)


@then('it is refused as in progress, naming key "{key}" and run "{run_id}"')
def refused_in_progress(context: Context, key: str, run_id: str) -> None:
    _refused_in_progress(context.claim, key, run_id)


@then(
    'a repeat by run "{repeat:Quoted}" is refused as in progress, naming key "{key}" and run '
    '"{run_id}"'
)
def repeat_in_progress(context: Context, repeat: str, key: str, run_id: str) -> None:
    _refused_in_progress(_claim(context, repeat, key, "hello"), key, run_id)


@then(
    'a repeat by run "{repeat:Quoted}" of caller "{caller}" is refused as in progress, naming key '
    '"{key}" and run "{run_id}"'
)
def caller_repeat_in_progress(
    context: Context, repeat: str, caller: str, key: str, run_id: str
) -> None:
    _refused_in_progress(_claim(context, repeat, key, "hello", caller=caller), key, run_id)


@then('it is refused with {error_type:Word} naming key "{key}" and run "{run_id}"')
def refused_naming(context: Context, error_type: str, key: str, run_id: str) -> None:
    assert type(context.claim).__name__ == error_type, repr(context.claim)
    _names(context.claim, key, run_id)


@then('it is refused with {error_type:Word} saying "{words}"')
def refused_saying(context: Context, error_type: str, words: str) -> None:
    error = context.claim
    assert type(error).__name__ == error_type, repr(error)
    assert words in str(error), error


def _replays(outcome: object, answered: ExecutionResult) -> None:
    assert isinstance(outcome, Replay), repr(outcome)
    replayed = outcome.result
    assert replayed == answered, (replayed, answered)
    assert replayed.run_id == answered.run_id, replayed.run_id
    assert replayed.usage_by_call == answered.usage_by_call, replayed.usage_by_call
    assert (replayed.total_tokens, replayed.cost_usd) == (354, Decimal("0.0068400384")), replayed


@then('the claim replays run "{run_id}"\'s result: equal, with its run id, usage and cost')
def claim_replays(context: Context, run_id: str) -> None:
    _replays(context.claim, context.answers[run_id])


@then('a repeat by run "{repeat}" replays run "{run_id}"\'s result')
def repeat_replays(context: Context, repeat: str, run_id: str) -> None:
    _replays(_claim(context, repeat, "k-1", "hello"), context.answers[run_id])


@then('once run "{run_id}" answered it, a repeat replays its result')
def once_answered_replays(context: Context, run_id: str) -> None:
    result = _answers(context, run_id, "k-1")
    _replays(_claim(context, f"{run_id}-repeat", "k-1", "hello"), result)


@then("that settling is refused")
def settling_refused(context: Context) -> None:
    assert context.settled is False, context.settled


@then(
    'run "{run_id}" of no caller claims key "{key}" for the request "{message}", and it is granted'
)
def no_caller_claims(context: Context, run_id: str, key: str, message: str) -> None:
    claimed = _claim(context, run_id, key, message)
    assert claimed == Claimed(), claimed


@then('the store keeps the keys "{keys}" only')
def store_keeps(context: Context, keys: str) -> None:
    async def read(store: SqlStore) -> list[str]:
        async with store.engine.connect() as connection:
            found = await connection.execute(select(idempotency_keys.c.key))
            return sorted(found.scalars())

    assert _using(context, read) == sorted(keys.split(", ")), _using(context, read)


@then("exactly one claim is granted, and every other is refused as in progress naming its run")
def exactly_one(context: Context) -> None:
    contenders: list[_Contender] = context.contenders
    winners = [one.run_id for one in contenders if one.is_granted]
    assert len(winners) == 1, contenders
    losers = [one for one in contenders if not one.is_granted]
    assert losers, contenders
    assert all(one.holder == winners[0] for one in losers), contenders


# -- the digest ------------------------------------------------------------------------------------


def _history(cell: str) -> list[BaseMessage | dict[str, object]] | None:
    if cell == "none":
        return None
    if cell.startswith("messages "):
        return list(convert_to_messages(json.loads(cell.removeprefix("messages "))))
    turns: list[BaseMessage | dict[str, object]] = json.loads(cell)
    return turns


@then("these requests have the same digest exactly when they are in the same group:")
def digests_by_group(context: Context) -> None:
    digests = [
        (
            row["group"],
            request_digest(
                row["message"],
                _history(row["history"]),
                None if row["session"] == "none" else row["session"],
            ),
        )
        for row in context.table
    ]
    for group, digest in digests:
        for other_group, other in digests:
            assert (digest == other) == (group == other_group), (group, other_group, digests)
    context.digests = [digest for _group, digest in digests]


@then("every digest is a sha256 in hex")
def digests_are_sha256(context: Context) -> None:
    for digest in context.digests:
        assert len(digest) == 64, digest
        assert set(digest) <= set("0123456789abcdef"), digest
