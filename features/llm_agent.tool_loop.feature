Feature: One private tool loop returns its counts, or raises them with the original error
  `process_message()` and `stream_message()` both delegate to `_execute_tool_loop()`, which
  returns a `_ToolLoopResult` (final message, counts, rounds, limits, tool records) or raises
  `_ToolLoopError`, wrapping the original exception and carrying what was spent before it.

  Background:
    Given the actor declares the demo tool get_weather

  Scenario Outline: The loop returns the final message and the counts of every call (<mode>)
    Given the actor's model replies:
      | text                        | tool calls                       | prompt tokens | completion tokens |
      |                             | get_weather#w1 {"city": "Paris"} | 21            | 8                 |
      | Paris: 18 C and light rain. |                                  | 34            | 7                 |
    When the agent's tool loop runs "Weather in Paris?" directly, <mode>
    Then the loop result holds the final message and the counts of every call the model answered

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: The loop raises the original error with the counts spent before it (<mode>)
    Given the actor's model replies:
      | text | tool calls                       | prompt tokens | completion tokens | error          |
      |      | get_weather#w1 {"city": "Paris"} | 21            | 8                 |                |
      |      |                                  |               |                   | quota exceeded |
    When the agent's tool loop runs "Weather in Paris?" directly, <mode>
    Then the loop raised _ToolLoopError wrapping ModelAPIError, with the counts of the calls before it

    Examples:
      | mode      |
      | blocking  |
      | streaming |
