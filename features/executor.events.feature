Feature: execute_events() yields typed events, in order, that serialise to JSON
  A UI follows a run through typed events produced by the same loop: round started, text
  deltas, usage recorded, tool calls requested, started and finished (or skipped), output
  pruned, synthesis started, and last run finished or run failed. Each is a pydantic model
  that round-trips through `event_adapter`, for SSE.

  Background:
    Given the actor declares the demo tools get_weather and broken_lookup

  Scenario: A two-round turn with a parallel batch gives its events in a sensible order
    Given the actor's model replies:
      | text                         | tool calls                                                             |
      | Checking both cities.        | get_weather#w1 {"city": "Paris"} ; get_weather#w2 {"city": "Rome"}     |
      | Rainy in Paris, sunny in Rome. |                                                                      |
    When the actor is asked "Weather in Paris and Rome?" in events mode
    Then the event kinds are, a run of text deltas counted once:
      | kind                |
      | run_started         |
      | round_started       |
      | text_delta          |
      | usage_recorded      |
      | tool_call_requested |
      | tool_call_requested |
      | tool_call_started   |
      | tool_call_finished  |
      | tool_call_started   |
      | tool_call_finished  |
      | round_started       |
      | text_delta          |
      | usage_recorded      |
      | run_finished        |
    And the stream yielded the text of every reply, word by word
    And the tool_call_requested event for w2 carries:
      | field     | value            |
      | round     | 1                |
      | name      | get_weather      |
      | arguments | {'city': 'Rome'} |
    And the tool_call_finished event for w1 carries:
      | field  | value                   |
      | output | Paris: 18 C, light rain |
      | error  | None                    |
    And the tool_call_finished event for w1 reports a duration
    And the usage_recorded events carry each call and the running total
    And the last event is run_finished with the run's result
    And every event survives a JSON round trip through event_adapter

  Scenario: A blocking run shows its events as it goes, each reply's text before its tool calls
    The run's end is execute()'s return (or its exception), not an event.
    Given the actor's model replies:
      | text                         | tool calls                                                             |
      | Checking both cities.        | get_weather#w1 {"city": "Paris"} ; get_weather#w2 {"city": "Rome"}     |
      | Rainy in Paris, sunny in Rome. |                                                                      |
    When the actor is asked "Weather in Paris and Rome?" blocking, watching its events
    Then the event kinds are, a run of text deltas counted once:
      | kind                |
      | run_started         |
      | round_started       |
      | text_delta          |
      | usage_recorded      |
      | tool_call_requested |
      | tool_call_requested |
      | tool_call_started   |
      | tool_call_finished  |
      | tool_call_started   |
      | tool_call_finished  |
      | round_started       |
      | text_delta          |
      | usage_recorded      |
    And the stream yielded the chunks "Checking both cities." and "Rainy in Paris, sunny in Rome."

  Scenario: A failing tool call finishes with its error, and the run goes on
    Given the actor's model replies:
      | text                  | tool calls                          |
      |                       | broken_lookup#b1 {"query": "Paris"} |
      | The lookup is down.   |                                     |
    When the actor is asked "Look up Paris." in events mode
    Then the tool_call_finished event for b1 carries:
      | field  | value                                                                                    |
      | output | None                                                                                     |
      | error  | tool 'broken_lookup' (call b1) raised LookupError: lookup backend unavailable for 'Paris' |
    And the last event is run_finished with the run's result
    And every event survives a JSON round trip through event_adapter

  Scenario: A limit is announced by synthesis_started before the synthesis call
    Given the actor allows at most 1 tool round
    And the actor's model replies:
      | text                          | tool calls                       |
      |                               | get_weather#w1 {"city": "Paris"} |
      |                               | get_weather#w2 {"city": "Rome"}  |
      | Paris is rainy; Rome unknown. |                                  |
    When the actor is asked "Weather in Paris and Rome?" in events mode
    Then the synthesis_started event gives the reason "max_rounds" before the last round's usage
    And the last event is run_finished with the run's result
    And every event survives a JSON round trip through event_adapter

  Scenario: A failed run ends with run_failed, carrying the error and the usage so far
    Given the actor's model replies:
      | text | tool calls                       | error                 |
      |      | get_weather#w1 {"city": "Paris"} |                       |
      |      |                                  | upstream unavailable  |
    When the actor is asked "Weather in Paris?" in events mode
    Then the call failed with ModelAPIError "upstream unavailable"
    And the last event is run_failed with the error ModelAPIError and the usage so far
    And the reported tokens are what the model reported for each call
    And every event survives a JSON round trip through event_adapter

  Scenario: Every event kind is snake_case and written once
    When the event classes of cleveractors.events are listed
    Then each has a snake_case kind, written once, and is exported

  Scenario: An event stream is read once
    Given the actor's model replies:
      | text   |
      | Hello. |
    When one event stream is iterated twice
    Then the second iteration fails with RuntimeError "iterated only once"
