@cancellation
Feature: Stopping a resumed segment part way bills once and loses nothing

  The caller reads the resumed segment's events and stops at a position; whatever the stop, the
  segment's model calls are billed once, in its result and in the ledger under its own run id,
  the approved refund ran at most once, the decision stays in the audit, and the pause cannot be
  resumed a second time (nothing runs twice).

  Scenario Outline: A resumed stream stopped by <style> at <position>
    Given a shop whose model replies
      | tool calls                                                          | text                                        | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} |                                             | 20            | 5                 |
      |                                                                     | The refund of 30 on order A1 is done now, thanks. | 40            | 10          |
    And the shop keeps its runs in sqlite
    When the shop is asked "Refund A1" in events mode
    And the resumed segment is stopped by <style> at <position>
      | call | decision |
      | r1   | approve  |
    Then the stopped segment billed its model call once and the tools ran once
    And the store's ledger holds each segment's calls under its own run id
    And the audit of the shop's session lists
      | segment | call | decision | resumed in |
      | 1       | r1   | approve  | 2          |
    When the first paused segment is resumed in events mode with
      | call | decision |
      | r1   | approve  |
    Then resuming is refused with ApprovalConflictError naming "already resumed"
    And the tools ran at most "lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"}"

    Examples:
      | style       | position       |
      | break       | decided        |
      | aclose      | decided        |
      | cancel task | decided        |
      | break       | tool started   |
      | cancel task | tool started   |
      | aclose      | tool finished  |
      | cancel task | tool finished  |
      | break       | first text     |
      | cancel task | first text     |
      | aclose      | mid-text       |
      | cancel task | mid-text       |
      | cancel task | usage recorded |
