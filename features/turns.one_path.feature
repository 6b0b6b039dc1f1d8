Feature: One turn type, one path: a message or decisions on a paused run, through the same calls
  `execute()`, `execute_events()` and `execute_stream()` take a `Turn`: a `str` (a `NewMessage`
  of it), a `NewMessage`, or a `Resumption` of a paused run. Every turn takes one path (begin,
  run, settle), stored or not, new or resumed.

  Scenario Outline: A str and a NewMessage of it give the same run (<mode>)
    Given an executor without a store whose model answers "Hello there." twice
    When it is given "Hi" as a str, then as a NewMessage, in <mode> mode
    Then both runs answered "Hello there." with the same events and the same usage

    Examples:
      | mode     |
      | blocking |
      | events   |
      | text     |

  Scenario Outline: A Resumption through execute_events resumes the paused run (<database>)
    Given a shop whose model replies
      | tool calls                                                           | text  | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30}  |       | 20            | 5                 |
      |                                                                      | Done. | 40            | 2                 |
    And the shop keeps its runs in <database>
    When the shop is asked "Refund A1" in events mode
    And the first paused segment is resumed in events mode with
      | call | decision |
      | r1   | approve  |
    Then the shop's run is answered
    And the segment's approval events are "run_started resumed, tool_call_decided r1 approve, run_finished"
    And each segment after the first resumed the one before it

    Examples:
      | database |
      | memory   |
      | sqlite   |

  Scenario Outline: A turn of the wrong type is a clear error (<entry point>)
    When an executor is given the number 42 through <entry point>
    Then it fails with ConfigurationError naming "a turn is a message (str), a NewMessage or a Resumption, not int"

    Examples:
      | entry point    |
      | execute        |
      | execute_events |
      | execute_stream |

  Scenario: A NewMessage given with keyword options is refused: they belong on the turn
    When an executor is given a NewMessage "Hi" with session_id "s-1" as a keyword
    Then it fails with ConfigurationError naming "session_id cannot be given with a NewMessage: set them on the turn itself"

  Scenario: A Resumption's decisions are checked as it is made
    When a Resumption of "run-1" is made with the decision {"call_id": "r1", "decision": "maybe"}
    Then it fails with InvalidDecisionError naming "decisions[0] is not a decision: decision:"

  Scenario: A Resumption's decisions are a list, not one decision
    When a Resumption of "run-1" is made with the decisions {"call_id": "r1", "decision": "approve"}
    Then it fails with InvalidDecisionError naming "decisions must be a list of decisions, not dict"

  Scenario: A NewMessage refuses a history beside a session
    When a NewMessage "Hi" is made with a history and the session "s-1"
    Then it fails with ConfigurationError naming "history cannot be given with session_id"

  Scenario: An agent of one's own implements run() alone, and answers through every entry point
    Given an agent of my own that implements only run(), echoing the message
    When it is asked "Hi" through process_message, stream_message, and an executor's execute and execute_stream
    Then each answered "echo: Hi"
