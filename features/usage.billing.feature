Feature: Every token spent is on the bill, whatever fails
  The counts cover every LLM call of the message. When a run fails, the original exception
  reaches the caller, and `executor.last_result` and `last_token_usage_var` already hold every
  token spent before it. A call the provider never reported is estimated, and flagged.

  Background:
    Given the actor declares the demo tool get_weather

  Scenario Outline: A successful run is billed exactly, and recorded everywhere (<mode>)
    Given the actor's model replies:
      | text                        | tool calls                       | prompt tokens | completion tokens |
      |                             | get_weather#w1 {"city": "Paris"} | 113           | 17                |
      | Paris: 18 C and light rain. |                                  | 151           | 9                 |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the reported tokens are what the model reported for each call
    And no estimate is flagged
    And last_result is the call's own result
    And last_token_usage_var holds the usage of last_result

    Examples:
      | mode      |
      | blocking  |
      | streaming |
      | events    |

  Scenario Outline: A provider error on call 2 leaves call 1's tokens on the result (<mode>)
    Given the actor's model replies:
      | text | tool calls                       | error                       |
      |      | get_weather#w1 {"city": "Paris"} |                             |
      |      |                                  | upstream exploded (HTTP 500) |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with ModelAPIError "upstream exploded (HTTP 500)"
    And last_result records the error ModelAPIError
    And last_result is the call's own result
    And the result holds 2 billed calls
    And call 2 is recorded as attempt 1, failed, costing 0
    And the reported tokens are what the model reported for each call
    And last_token_usage_var holds the usage of last_result

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A script that runs out is a clear error, with what was spent (<mode>)
    Given the actor's model replies:
      | text | tool calls                       |
      |      | get_weather#w1 {"city": "Paris"} |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with ScriptExhaustedError "no reply left for call 2"
    And last_result records the error ScriptExhaustedError
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A stream cut off before its usage is billed by estimate, and flagged
    Given the actor's model replies:
      | text                                         | tool calls                       | cut off after |
      |                                              | get_weather#w1 {"city": "Paris"} |               |
      | It is eighteen degrees with light rain today |                                  | 3             |
    When the actor is asked "Weather in Paris?" in streaming mode
    Then the call failed with ModelConnectionError "stream cut off after 3 chunks"
    And call 1 is billed exactly what the model reported
    And call 2 is billed by an estimate of the messages sent to it
    And the cut-off call's completion is the estimate of the text streamed before the cut
    And the reported tokens are what the model reported for each call
    And last_result is the call's own result

  Scenario Outline: A provider that reports no usage is billed by estimate, and flagged (<mode>)
    Given the actor's model replies:
      | text                        | tool calls                       | usage    |
      |                             | get_weather#w1 {"city": "Paris"} | omitted  |
      | Paris: 18 C and light rain. |                                  |          |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain."
    And call 1 is billed by an estimate of the messages sent to it
    And call 2 is billed exactly what the model reported
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |
