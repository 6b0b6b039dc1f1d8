"""Where arguments break a tool's schema, said in one line: for an edit typed at the approval
question, and for a stub script's calls that `validate` checks."""

from __future__ import annotations

from collections.abc import Mapping

from cleveractors.approvals import PendingApproval
from cleveractors.cli.asking import EditCheck
from cleveractors.tools import Tool


def schema_problem(tool: Tool, arguments: Mapping[str, object]) -> str | None:
    """`at amount: 'all' is not of type 'number'` for the first field that breaks the tool's
    schema (`(the arguments)` when the object as a whole does); None when they fit."""
    problem = next(iter(tool.validator.iter_errors(dict(arguments))), None)
    if problem is None:
        return None
    where = "/".join(str(part) for part in problem.absolute_path) or "(the arguments)"
    return f"at {where}: {problem.message}"


def edit_check(tools: tuple[Tool, ...]) -> EditCheck:
    """Checks an edit against its tool's schema as it is typed (the run checks it again)."""
    by_name = {tool.name: tool for tool in tools}

    def check(call: PendingApproval, arguments: dict[str, object]) -> str | None:
        tool = by_name.get(call.name)
        problem = None if tool is None else schema_problem(tool, arguments)
        if problem is None:
            return None
        edited = f"the edited arguments of call {call.call_id!r} ({call.name})"
        return f"{edited} fail the tool's schema {problem}"

    return check
