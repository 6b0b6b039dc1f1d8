Feature: A pending call expires: it never runs, a late decision is refused, the model reads it declined

  Background:
    Given a shop whose model replies
      | tool calls                                                           | text  | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30}  |       | 20            | 5                 |
      |                                                                      | Sorry. | 40           | 2                 |
    And the shop's approvals expire after 0.2 seconds

  Scenario Outline: A decision after the expiry is refused (<mode>, <database>)
    Given the shop keeps its runs in <database>
    When the shop is asked "Refund A1" in <mode> mode
    And the shop waits 0.3 seconds
    And the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
    Then resuming is refused with ApprovalExpiredError naming "expired at"
    And nothing of the refused resumption ran or was billed
    And the tools ran "lookup {"order": "A1"}"

    Examples:
      | mode     | database |
      | blocking | memory   |
      | events   | memory   |
      | blocking | sqlite   |
      | events   | sqlite   |

  Scenario Outline: Resumed with no decision after the expiry, the model reads the call as declined (<mode>)
    Given the shop keeps its runs in sqlite
    When the shop is asked "Refund A1" in <mode> mode
    And the shop waits 0.3 seconds
    And the latest paused segment is resumed in <mode> mode with no decision
    Then the shop's run is answered
    And the segment's approval events are "run_started resumed, tool_call_decided r1 expired, run_finished"
    And the model's last request ends with these tool results
      | call | status  | says                                                             |
      | l1   | success | order A1: 2 items                                                |
      | r1   | error   | declined because nobody approved it within 0.2 seconds \| Do not retry |
    And the tools ran "lookup {"order": "A1"}"
    And the audit of the shop's session lists
      | segment | call | decision | resumed in |
      | 1       | r1   | expired  | 2          |
    And the shop's session history is a valid transcript ending with "Sorry."

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario: Resumed with no decision before the expiry is refused: the call still waits
    When the shop is asked "Refund A1" in blocking mode
    And the latest paused segment is resumed in blocking mode with no decision
    Then resuming is refused with InvalidDecisionError naming "no decision was given"

  Scenario Outline: A call nobody decided is recorded expired when it expires, with no resumption (<database>)
    Given the shop keeps its runs in <database>
    When the shop is asked "Refund A1" in blocking mode
    And the shop waits 0.3 seconds
    Then the audit of the shop's session lists
      | segment | call | decision | resumed in |
      | 1       | r1   | expired  | -          |
    And with no resumption, the first paused segment reads as expired: call r1 decided at its expiry, the segment's status expired, the run still resumable
    And the shop's model was asked 1 times

    Examples:
      | database   |
      | sqlite     |
      | postgresql |
