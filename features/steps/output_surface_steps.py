"""Steps of output.surfaces.feature: what the command line says of a typed actor (issue 27).

The actor file and the command are `output_steps.py`'s ("a typed actor file", "given to"); each
step here starts with "the typed command" and says what it printed.
"""

from __future__ import annotations

from behave import then
from behave.runner import Context


@then('the typed command succeeded saying "{text}"')
def typed_command_succeeded(context: Context, text: str) -> None:
    completed = context.typed_command
    assert completed.exit_code == 0, (completed.exit_code, completed.output)
    assert text in completed.output, completed.output


@then('the typed command did not say "{text}"')
def typed_command_did_not_say(context: Context, text: str) -> None:
    assert text not in context.typed_command.output, context.typed_command.output
