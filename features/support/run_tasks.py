"""The tasks of one run: every task created in its caller's context, watched from outside.

`consume()` (support.harness) uses a `TaskWatch` to tell what a run left behind: tasks still
pending, and exceptions that ended a task and that nobody retrieved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextvars import ContextVar
from typing import Any

__all__ = ["TaskWatch"]

_WATCH: ContextVar[TaskWatch | None] = ContextVar("_WATCH", default=None)
"""The watch of the caller whose context a task is created in: tasks inherit their creator's
context, so every task of a run (and asyncio's closing of its dropped generators) is its own,
even with several runs on one loop."""
_WATCHING: dict[asyncio.AbstractEventLoop, int] = {}
"""How many watches are open per loop: the task factory stays installed while any is."""


def _create_task(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **options: Any
) -> asyncio.Task[Any]:
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **options)
    watch = _WATCH.get()
    if watch is not None:
        watch.tasks.append(task)
    return task


def _closes_generator(task: asyncio.Task[Any]) -> bool:
    """Whether `task` is asyncio's own closing of a dropped async generator (its coroutine is
    the generator's `aclose()`)."""
    return repr(task.get_coro()).startswith("<async_generator_athrow")


class TaskWatch:
    """Keeps every task created in the caller's context, so none can hide."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.tasks: list[asyncio.Task[Any]] = []

    def __enter__(self) -> TaskWatch:
        if not _WATCHING.get(self._loop):
            self._loop.set_task_factory(_create_task)
        _WATCHING[self._loop] = _WATCHING.get(self._loop, 0) + 1
        return self

    def __exit__(self, *exc_info: object) -> None:
        _WATCHING[self._loop] -= 1
        if not _WATCHING[self._loop]:
            del _WATCHING[self._loop]
            self._loop.set_task_factory(None)

    def create_task(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `coro` in a task of its own, watched with every task created in its context."""
        token = _WATCH.set(self)
        try:
            return asyncio.create_task(coro)
        finally:
            _WATCH.reset(token)

    def pending(self, *, include_generator_closing: bool = True) -> tuple[str, ...]:
        """The tasks not done yet; asyncio's own tasks that close a dropped async generator
        only when asked for."""
        return tuple(
            sorted(
                repr(task.get_coro())
                for task in self.tasks
                if not task.done() and (include_generator_closing or not _closes_generator(task))
            )
        )

    async def settle(self, *, iterations: int | None) -> None:
        """Wait until asyncio has closed the generators the run dropped (new ones may be dropped
        meanwhile); with `iterations`, wait for every task, up to that many loop iterations.

        Other tasks are not waited for: the run must have ended them when its caller returned,
        and a resource the run opened (an MCP session) may rightly keep its own running."""
        if iterations is not None:
            for _ in range(iterations):
                if not self.pending():
                    return
                # Promptness is what is checked: count loop iterations, not seconds.
                await asyncio.sleep(0)
            return
        while closing := [t for t in self.tasks if not t.done() and _closes_generator(t)]:
            await asyncio.wait(closing)

    async def cancel_pending(self) -> None:
        stragglers = [task for task in self.tasks if not task.done()]
        for task in stragglers:
            task.cancel()
        if stragglers:
            await asyncio.wait(stragglers)

    def unretrieved_errors(self) -> tuple[str, ...]:
        errors = []
        for task in self.tasks:
            # asyncio's own flag for "log this exception when the task is collected": reading it
            # is the only way to tell a lost exception from one an awaiting caller received.
            if task.done() and not task.cancelled() and getattr(task, "_log_traceback", False):
                errors.append(f"{task.get_coro()!r}: {task.exception()!r}")
        return tuple(errors)
