"""The public exception tree.

```
CleverActorsError                 root of everything this library raises itself
 ├── ConfigurationError           you configured or called us wrong (field, file, value named)
 └── ExecutionError               a run went wrong at run time
      ├── McpServerError          an MCP server cannot be reached or answered wrongly (named)
      ├── ToolExecutionError      one tool call failed (tool name and call id named);
      │                           the loop turns it into an error ToolMessage, it never escapes
      ├── ScriptExhaustedError    the scripted (stub) model was asked for more turns than scripted
      ├── SessionBusyError        another run holds the session (in this process or another)
      ├── SessionNotFoundError    no such session for this caller (another's is never shown)
      └── StoreError              the store could not write the ledger or the session: the run
                                  fails (an answer that cannot be billed is not served)
```

Model failures are not wrapped: what a chat model raises (for `ChatOpenAI`, langchain-core's
provider-neutral `ModelError` family, which also subclasses the `openai` SDK errors) reaches the
caller unchanged, with its `is_retryable`. Whatever escapes `ActorExecutor.execute()` or a stream,
`executor.last_result` already holds the tokens spent before it.
"""

from __future__ import annotations

__all__ = [
    "CleverActorsError",
    "ConfigurationError",
    "ExecutionError",
    "McpServerError",
    "ScriptExhaustedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StoreError",
    "ToolExecutionError",
]


class CleverActorsError(Exception):
    """Root of every exception cleveractors raises itself."""


class ConfigurationError(CleverActorsError):
    """An actor config, a tool declaration or a call's arguments are wrong.

    The message names what is wrong: the file (when there is one), the field path and the value.
    """


class ExecutionError(CleverActorsError):
    """A run failed at run time."""


class McpServerError(ExecutionError):
    """An MCP server cannot be connected, or its answer cannot be used; the server is named.

    Raised when a toolbox opens (e.g. `async with executor:` or `cleveractors validate`); during
    a run, a failing MCP call becomes an error result the model reads instead.
    """


class ToolExecutionError(ExecutionError):
    """One tool call failed: its handler raised, timed out, or its arguments were invalid.

    Attributes:
        tool_name: The name the model called.
        call_id: The id of the model's tool call.
    """

    def __init__(self, message: str, *, tool_name: str, call_id: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.call_id = call_id


class ScriptExhaustedError(ExecutionError):
    """A `ScriptedChatModel` was called more times than it has scripted replies."""


class SessionBusyError(ExecutionError):
    """A run asked for a session that another run holds; raised at once, never queued."""


class SessionNotFoundError(ExecutionError):
    """No session by that id belongs to this caller. Another caller's session is reported the
    same way, so its existence is never revealed."""


class StoreError(ExecutionError):
    """The store failed to write what a run must keep (a ledger row, the session's new turn).
    The database's own exception is the `__cause__`; the run's usage is on its result."""
