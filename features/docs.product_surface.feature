Feature: The docs name every event kind, result field, command, option, exit code and extra the product defines
  What the product defines is read from the code as it runs: the `kind` of each class in the
  `cleveractors.events.Event` union, the fields and properties of `ExecutionResult`, the commands
  and options of the `cleveractors` Click app and the exit codes its help lists and its code
  uses, and the extras of pyproject.toml. Each must be named where a reader looks
  for it: the event kinds on docs/streaming.md, the result fields in a table on
  docs/results-and-errors.md, each command with all of its options in the synopsis of
  docs/cli.md, each exit code in its exit-code table, and each extra in the extras table of
  docs/getting-started.md. A new one without a mention fails here, named.

  Scenario: Everything the product defines is named on its page
    Given the event kinds, result fields, commands, options, exit codes and extras the product defines
    When the docs are searched for each of them
    Then every one is named on its page
    And the product defines at least these, all read from the code:
      | what         | name                              |
      | event kind   | run_paused                        |
      | event kind   | tool_approval_requested           |
      | result field | pending_approvals                 |
      | result field | status                            |
      | result field | total_tokens                      |
      | command      | cleveractors resume               |
      | command      | cleveractors store prune          |
      | option       | cleveractors serve --graceful-timeout |
      | option       | cleveractors --version            |
      | exit code    | 3                                 |
      | exit code    | 143                               |
      | extra        | ag-ui                             |
      | extra        | postgres                          |

  Scenario: A new event kind, result field, command, option, exit code or extra without a mention is named
    Given the event kinds, result fields, commands, options, exit codes and extras the product defines
    And a new event kind "tool_call_teleported"
    And a new result field "carbon_grams"
    And a new command "teleport" with the option "--destination"
    And a new option "--fast-forward" of the command "run"
    And a new module of the CLI that exits with code 7
    And a new extra "quantum"
    When the docs are searched for each of them
    Then the docs are found not to name exactly:
      | missing                                                                       |
      | docs/streaming.md does not name the event kind `tool_call_teleported`         |
      | docs/results-and-errors.md does not name the result field `carbon_grams`      |
      | docs/cli.md does not name the option `cleveractors run --fast-forward`        |
      | docs/cli.md does not name the command `cleveractors teleport`                 |
      | docs/cli.md does not name the option `cleveractors teleport --destination`    |
      | docs/cli.md does not name the exit code `7`                                   |
      | docs/getting-started.md does not name the extra `quantum`                     |

  Scenario: Every page whose examples use top-level await says how to run them
    Given the README and every page under docs/, as they are
    When the pages with a top-level `await` are searched for "python -m asyncio"
    Then every such page says it before its first such example

  Scenario: A page with a top-level await that does not say how to run it is named
    Given a page "awaits.md" as:
      """
      # Awaits

      ```python
      async def main() -> None:
          await something()
      ```

      ```python
      result = await executor.execute("Hello")
      ```
      """
    When the pages with a top-level `await` are searched for "python -m asyncio"
    Then the pages that do not say it are exactly:
      | page        |
      | awaits.md:8 |
