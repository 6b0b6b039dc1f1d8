@cancellation
Feature: A consumer that stops early cancels the run and keeps the bill
  When the consumer of a stream stops (it breaks out, calls aclose(), or its task is
  cancelled), the in-flight model request and running tools are cancelled, no task is left
  running, and the result holds every call's tokens: a call cut off before the provider sent
  its usage is estimated, and the result is flagged `usage_estimated` and `cancelled`. The tool
  calls that finished before the stop stay on the result.

  Background:
    Given the actor declares the demo tools get_weather and slow_lookup

  Scenario Outline: A consumer that stops mid-answer by <how> leaves no task and loses no token
    Given the actor's model replies:
      | text                                                            | tool calls                       | delay |
      |                                                                 | get_weather#w1 {"city": "Paris"} |       |
      | It is eighteen degrees with light rain in Paris this afternoon. |                                  | 0.005 |
    When the consumer stops reading after the answer chunk "light" by <how>
    Then no task is left running
    And the result is marked cancelled
    And the result holds 2 billed calls
    And call 1 is billed exactly what the model reported
    And call 2 is billed by an estimate of the messages sent to it
    And the cut-off call's completion counts the text received before the cut
    And last_result is the call's own result
    And nothing was logged at ERROR

    Examples:
      | how                                                 |
      | breaking out inside async with                      |
      | breaking out of the event stream inside async with  |
      | calling aclose()                                    |
      | a plain break, once the loop has finalised the stream |
      | a plain break out of the event stream, once the loop has finalised it |

  Scenario: A consumer task cancelled while a tool runs cancels the tool and keeps the bill
    Given the actor's model replies:
      | text                | tool calls                                              |
      |                     | slow_lookup#s1 {"query": "Louvre hours", "seconds": 30} |
      | Never asked for.    |                                                         |
    When the consumer's task is cancelled while the tool "slow_lookup" runs
    Then the consumer's task ended cancelled
    And the slow_lookup handler was cancelled
    And no task is left running
    And the result is marked cancelled
    And the result holds 1 billed call
    And call 1 is billed exactly what the model reported
    And no estimate is flagged
    And the model was asked 1 time
    And last_result is the call's own result

  Scenario: A consumer cancelled again while the run stops still leaves it settled
    Given the actor's model replies:
      | text             | tool calls                                                                       |
      |                  | slow_lookup#s1 {"query": "Louvre hours", "seconds": 30, "cleanup_seconds": 0.1} |
      | Never asked for. |                                                                                  |
    When the consumer's task is cancelled while the tool "slow_lookup" runs, and again while it stops
    Then the consumer's task ended cancelled
    And the slow_lookup handler was cancelled
    And no task is left running
    And the result is marked cancelled
    And call 1 is billed exactly what the model reported
    And last_result is the call's own result

  Scenario Outline: A caller cancelled while the model is answering bills that call by estimate (<mode>)
    Given the actor's model replies:
      | text                      | delay |
      | It is raining in Paris.   | 30    |
    When the caller's task is cancelled while the model is answering, in <mode> mode
    Then the call failed with CancelledError
    And no task is left running
    And the result is marked cancelled
    And the result holds 1 billed call
    And call 1 is billed by an estimate of the messages sent to it
    And last_result is the call's own result

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A <kind> stream closed before it is read never runs
    Given the actor's model replies:
      | text                    |
      | It is raining in Paris. |
    When the <kind> stream is closed before it is read
    Then the model was never asked
    And no result was settled
    And no task is left running

    Examples:
      | kind  |
      | text  |
      | event |

  Scenario Outline: A run stopped by <how> during the second call of a batch still records the first
    Given the actor's model replies:
      | text             | tool calls                                                                |
      |                  | get_weather#w1 {"city": "Paris"} ; stalled_lookup#s1 {"query": "museum"} |
      | Never asked for. |                                                                           |
    And regression: the actor is built in code with these tools:
      | name           | handler        |
      | get_weather    | get_weather    |
      | stalled_lookup | stalled_lookup |
    When regression: the run is stopped by <how> while the tool "stalled_lookup" runs for "museum"
    Then the consumer's task ended cancelled
    And the result is marked cancelled
    And regression: the result records the call w1 of get_weather as ok, with the output "Paris: 18 C, light rain"
    And regression: the result does not record the call s1 as ok
    And regression: the handler for "museum" was cancelled
    And the model was asked 1 time
    And no task is left running

    Examples:
      | how                                    |
      | cancelling the blocking caller's task  |
      | cancelling the event consumer's task   |
      | closing the event stream with aclose() |
