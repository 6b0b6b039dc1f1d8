Feature: A person's decisions resume a paused run as a new segment; wrong decisions are refused

  Background:
    Given a shop whose model replies
      | tool calls                                                                                   | text  | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} ; send_mail#m1 {"to": "ann"} |       | 20            | 5                 |
      |                                                                                              | Done. | 40            | 2                 |

  Scenario Outline: Each decision kind: one request with every result in the model's order (<mode>)
    When the shop is asked "Refund A1 and tell Ann" in <mode> mode
    And the first paused segment is resumed in <mode> mode with
      | call | decision | arguments                         | reason             | output              |
      | r1   | <refund> | <arguments>                       | <reason>           |                     |
      | m1   | respond  |                                   |                    | Ann was told by phone |
    Then the shop's run is answered
    And the segment's approval events are "run_started resumed, tool_call_decided r1 <refund>, tool_call_decided m1 respond, run_finished"
    And the shop's model was asked 2 times
    And the model's last request ends with these tool results
      | call | status   | says                  |
      | l1   | success  | order A1: 2 items     |
      | r1   | <status> | <says>                |
      | m1   | success  | Ann was told by phone |
    And the tools ran "<ran>"
    And each segment billed exactly its own model calls, none twice

    Examples:
      | mode     | refund  | arguments                         | reason       | status  | says                                                                                 | ran                                                                        |
      | blocking | approve |                                   |              | success | refunded 30 on A1                                                                    | lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"}              |
      | events   | approve |                                   |              | success | refunded 30 on A1                                                                    | lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"}              |
      | blocking | edit    | {"order": "A1", "amount": 20}     |              | success | A reviewer changed this call's arguments to {"amount": 20, "order": "A1"} \| refunded 20 on A1 | lookup {"order": "A1"} ; refund {"amount": 20, "order": "A1"}    |
      | events   | edit    | {"order": "A1", "amount": 20}     |              | success | A reviewer changed this call's arguments to {"amount": 20, "order": "A1"} \| refunded 20 on A1 | lookup {"order": "A1"} ; refund {"amount": 20, "order": "A1"}    |
      | blocking | reject  |                                   | over budget  | error   | a person declined this call to 'refund' (over budget) \| Do not retry it unless the user asks | lookup {"order": "A1"}                                   |
      | events   | reject  |                                   | over budget  | error   | a person declined this call to 'refund' (over budget) \| Do not retry it unless the user asks | lookup {"order": "A1"}                                   |

  Scenario Outline: Partial decisions: the run stays paused as a new segment, resumed next by its id (<mode>)
    When the shop is asked "Refund A1 and tell Ann" in <mode> mode
    And the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
    Then the shop's run is paused
    And the shop's run waits for "m1"
    And the segment's approval events are "run_started resumed, tool_call_decided r1 approve, tool_approval_requested m1, run_paused"
    And the tools ran "lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"}"
    And the shop's model was asked 1 times
    When the first paused segment is resumed in <mode> mode with
      | call | decision |
      | m1   | approve  |
    Then resuming is refused with ApprovalConflictError naming "already resumed"
    When the latest paused segment is resumed in <mode> mode with
      | call | decision |
      | m1   | approve  |
    Then the shop's run is answered
    And the tools ran "lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"} ; send_mail {"to": "ann"}"
    And the model's last request ends with these tool results
      | call | status  | says              |
      | l1   | success | order A1: 2 items |
      | r1   | success | refunded 30 on A1 |
      | m1   | success | mail sent to ann  |
    And each segment billed exactly its own model calls, none twice
    And each segment after the first resumed the one before it

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario Outline: A wrong decision is refused before anything runs: <case> (<mode>)
    When the shop is asked "Refund A1 and tell Ann" in <mode> mode
    And the first paused segment is resumed in <mode> mode with
      | call   | decision   | arguments   | digest   | extra   |
      | <call> | <decision> | <arguments> | <digest> | <extra> |
    Then resuming is refused with <error> naming "<words>"
    And nothing of the refused resumption ran or was billed
    And the tools ran "lookup {"order": "A1"}"
    When the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | reject   |
      | m1   | reject   |
    Then the shop's run is answered

    Examples:
      | case                         | mode     | call | decision | arguments                        | digest | extra                 | error                | words                                  |
      | an edit failing the schema   | blocking | r1   | edit     | {"order": "A1", "amount": "lots"} |        |                       | InvalidDecisionError | fail the tool's schema at amount        |
      | an edit failing the schema   | events   | r1   | edit     | {"order": "A1"}                   |        |                       | InvalidDecisionError | fail the tool's schema                  |
      | an edit switching tools      | blocking | r1   | edit     | {"to": "ann"}                     |        | {"name": "send_mail"} | InvalidDecisionError | name                                   |
      | an edit switching tools      | events   | r1   | edit     | {"to": "ann"}                     |        | {"name": "send_mail"} | InvalidDecisionError | name                                   |
      | an unknown call id           | blocking | x9   | approve  |                                   |        |                       | InvalidDecisionError | has no pending call 'x9'               |
      | an unknown call id           | events   | x9   | approve  |                                   |        |                       | InvalidDecisionError | has no pending call 'x9'               |
      | a stale digest               | blocking | r1   | approve  |                                   | stale  |                       | InvalidDecisionError | digest does not match                  |
      | a stale digest               | events   | r1   | approve  |                                   | stale  |                       | InvalidDecisionError | digest does not match                  |
      | a call that ran unasked      | blocking | l1   | approve  |                                   |        |                       | InvalidDecisionError | has no pending call 'l1'               |
      | arguments on an approval     | blocking | r1   | approve  | {"order": "A1", "amount": 1}      |        |                       | InvalidDecisionError | arguments are given with an edit       |
      | a respond without output     | events   | r1   | respond  |                                   |        |                       | InvalidDecisionError | output is given with a respond         |

  Scenario Outline: Two decisions for one call are a conflict, and nothing runs (<mode>)
    When the shop is asked "Refund A1 and tell Ann" in <mode> mode
    And the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
      | r1   | reject   |
    Then resuming is refused with ApprovalConflictError naming "has two decisions"
    And nothing of the refused resumption ran or was billed
    And the tools ran "lookup {"order": "A1"}"

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario Outline: A decision replayed after the resume is a conflict (<mode>)
    When the shop is asked "Refund A1 and tell Ann" in <mode> mode
    And the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
      | m1   | reject   |
    And the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
    Then resuming is refused with ApprovalConflictError naming "already resumed"
    And the tools ran "lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"}"

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario: Without a store, another caller is never told a resumed run exists
    When the shop is asked "Refund A1 and tell Ann" in blocking mode
    And the first paused segment is resumed in blocking mode with
      | call | decision |
      | r1   | reject   |
      | m1   | reject   |
    And the caller "mallory" resumes the latest paused segment with
      | call | decision |
      | r1   | approve  |
    Then resuming is refused with RunNotFoundError naming "no paused run"

  Scenario Outline: An agent whose approval rule cannot work is refused when built: <case>
    When a shop agent is built with approval <approval> and approval_timeout_s <timeout>
    Then building it fails with ConfigurationError naming "<words>"

    Examples:
      | case                 | approval                | timeout | words                                        |
      | a tool it lacks      | ["refund", "delete"]    | 60      | approval names tools it does not have: delete |
      | one string           | "refund"                | 60      | not the string 'refund'                      |
      | a timeout of zero    | ["refund"]              | 0       | approval_timeout_s must be positive          |
