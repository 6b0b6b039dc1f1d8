Feature: What a paused turn leaves behind: expired pauses leave memory, ran tools stay in history
  Without a store, a paused run is kept in the executor's memory until it is resumed or its calls
  expire: then it is gone, and resuming it says it expired. With a store, a resumed segment that
  fails or is stopped keeps the tool calls that ran, and their results, in the session's history.

  Scenario: Without a store, a pause past its expiry is gone, and resuming it says it expired
    Given a shop whose model replies
      | tool calls                                                           | text   | prompt tokens | completion tokens | error         |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30}  |        | 20            | 5                 |               |
      |                                                                      |        | 40            | 0                 | the model fell over |
    And the shop's approvals expire after 0.2 seconds
    And the shop keeps its runs in memory
    When the shop is asked "Refund A1" in blocking mode
    Then the shop's executor keeps 1 paused run
    When the shop's pending calls have expired
    Then the shop's executor keeps 0 paused runs
    And reading the shop's paused run fails with ApprovalExpiredError naming "expired at"
    When the latest paused segment is resumed in blocking mode with no decision
    Then resuming is refused with ApprovalExpiredError naming "its calls were not run"
    And nothing of the refused resumption ran or was billed

  Scenario: Many expired or resumed pauses do not pile up in an executor's memory
    When a book of paused runs is kept 12000 pauses that expired and 1 that waits
    And the book is kept 300 pauses that are resumed before they expire, and 300 after
    Then the book holds 1 paused run
    And the book remembers at most 10000 ended pauses, and its expiry queue stays short
    And a pause that expired is refused with ApprovalExpiredError, the waiting one is found
    And a pause resumed before it expired is refused with ApprovalConflictError

  Scenario Outline: A resumed segment that fails keeps the tool results that ran in the session (<database>)
    Given a shop whose model replies
      | tool calls                                                           | text   | prompt tokens | completion tokens | error         |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30}  |        | 20            | 5                 |               |
      |                                                                      |        | 40            | 0                 | the model fell over |
    And the shop keeps its runs in <database>
    When the shop is asked "Refund A1" in blocking mode
    And the first paused segment is resumed with an approval of r1, and the model fails
    Then the resumed segment failed with "the model fell over", its tools having run
    And the shop's session history is "Refund A1", then the calls l1, r1 with their results

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario: A resumed segment stopped once its tool ran keeps the tool results in the session
    Given a shop whose model replies
      | tool calls                                                           | text                          | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30}  |                               | 20            | 5                 |
      |                                                                      | The refund of 30 is done now. | 40            | 10                |
    And the shop keeps its runs in sqlite
    When the shop is asked "Refund A1" in events mode
    And the resumed segment is stopped by cancel task at first text
      | call | decision |
      | r1   | approve  |
    Then the shop's session history is "Refund A1", then the calls l1, r1 with their results
