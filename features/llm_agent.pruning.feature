Feature: A tool output over tool_output_max_tokens is condensed before the model reads it
  One extra LLM call, with no tools bound and focused on the user's message, condenses the
  output; it is counted like any other call. If it fails, the output is cut short with a
  visible marker and the turn still answers.

  Background:
    Given the actor declares the demo tools long_report and get_weather
    And tool outputs over 50 tokens are condensed

  Scenario Outline: A long tool output is condensed by one counted LLM call (<mode>)
    Given the actor's model replies:
      | text                             | tool calls                             |
      |                                  | long_report#r1 {"topic": "the Louvre"} |
      | Key fact: the Louvre opens 9:00. |                                        |
      | It opens at nine in the morning. |                                        |
    When the actor is asked "When does the Louvre open?" in <mode> mode
    Then the answer is "It opens at nine in the morning."
    And the model's request 2 asked to condense the output of long_report for "When does the Louvre open?"
    And the model's request 3 carries the tool results:
      | call id | status  | content                          |
      | r1      | success | Key fact: the Louvre opens 9:00. |
    And the LLM calls were made for:
      | purpose | round |
      | round   | 1     |
      | pruning | 1     |
      | round   | 2     |
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: The condensed output is for the model, not the user's screen
    Given the actor's model replies:
      | text                             | tool calls                             |
      | Let me look that up.             | long_report#r1 {"topic": "the Louvre"} |
      | Key fact: the Louvre opens 9:00. |                                        |
      | It opens at nine in the morning. |                                        |
    When the actor is asked "When does the Louvre open?" in events mode
    Then the user was never shown "Key fact"
    And the output_pruned event for r1 carries:
      | field  | value       |
      | name   | long_report |
      | method | condensed   |
    And the event kinds are, a run of text deltas counted once:
      | kind                |
      | run_started         |
      | round_started       |
      | text_delta          |
      | usage_recorded      |
      | tool_call_requested |
      | tool_call_started   |
      | tool_call_finished  |
      | usage_recorded      |
      | output_pruned       |
      | round_started       |
      | text_delta          |
      | usage_recorded      |
      | run_finished        |

  Scenario Outline: When condensing fails, the output is truncated with a visible marker (<mode>)
    Given the actor's model replies:
      | text                             | tool calls                             | error                        |
      |                                  | long_report#r1 {"topic": "the Louvre"} |                              |
      |                                  |                                        | condenser overloaded (HTTP 529) |
      | It opens at nine in the morning. |                                        |                              |
    When the actor is asked "When does the Louvre open?" in <mode> mode
    Then the answer is "It opens at nine in the morning."
    And the model's request 3 carries the output of r1 truncated, marked "[cleveractors: output truncated"
    And a WARNING log line names the tool long_report and the call r1
    And the LLM calls were made for:
      | purpose | round |
      | round   | 1     |
      | pruning | 1     |
      | round   | 2     |
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A failed condensing call is reported as a truncation event
    Given the actor's model replies:
      | text                             | tool calls                             | error                |
      |                                  | long_report#r1 {"topic": "the Louvre"} |                      |
      |                                  |                                        | condenser overloaded |
      | It opens at nine in the morning. |                                        |                      |
    When the actor is asked "When does the Louvre open?" in events mode
    Then the output_pruned event for r1 carries:
      | field  | value     |
      | method | truncated |

  Scenario: An output within the limit reaches the model as it is, with no extra call
    Given the actor's model replies:
      | text                        | tool calls                       |
      |                             | get_weather#w1 {"city": "Paris"} |
      | Paris: 18 C and light rain. |                                  |
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the model was asked 2 times
    And the model's request 2 carries the tool results:
      | call id | status  | content                 |
      | w1      | success | Paris: 18 C, light rain |
