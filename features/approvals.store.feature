Feature: Paused runs live in the store: any worker resumes them, once; every decision is audited

  Background:
    Given a shop whose model replies
      | tool calls                                                                                   | text  | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} ; send_mail#m1 {"to": "ann"} |       | 20            | 5                 |
      |                                                                                              | Done. | 40            | 2                 |

  Scenario Outline: Another executor on the same <database> database resumes the run after a restart
    Given the shop keeps its runs in <database>
    When the shop is asked "Refund A1 and tell Ann" in blocking mode
    And another executor on the same database resumes the latest paused segment with
      | call | decision | arguments                     | reason     |
      | r1   | edit     | {"order": "A1", "amount": 20} | too much   |
      | m1   | reject   |                               | not now    |
    Then the shop's run is answered
    And the tools ran "lookup {"order": "A1"} ; refund {"amount": 20, "order": "A1"}"
    And each segment billed exactly its own model calls, none twice
    And each segment after the first resumed the one before it
    And the store's ledger holds each segment's calls under its own run id
    And the store's run rows say paused, ok
    And the shop's session history is a valid transcript ending with "Done."
    And the audit of the shop's session lists
      | segment | call | decision | resumed in | reason   | edited                        |
      | 1       | m1   | reject   | 2          | not now  |                               |
      | 1       | r1   | edit     | 2          | too much | {"amount": 20, "order": "A1"} |
    And the audit by run id lists 2 decisions for the first paused segment

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: Partial decisions in the store: three segments, each billed and audited apart (<mode>)
    Given the shop keeps its runs in sqlite
    When the shop is asked "Refund A1 and tell Ann" in <mode> mode
    And the first paused segment is resumed in <mode> mode with
      | call | decision |
      | m1   | approve  |
    Then the shop's run is paused
    When the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
    Then resuming is refused with ApprovalConflictError naming "already resumed"
    When the latest paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
    Then the shop's run is answered
    And the tools ran "lookup {"order": "A1"} ; send_mail {"to": "ann"} ; refund {"amount": 30, "order": "A1"}"
    And each segment billed exactly its own model calls, none twice
    And each segment after the first resumed the one before it
    And the store's ledger holds each segment's calls under its own run id
    And the store's run rows say paused, paused, ok
    And the shop's session history is a valid transcript ending with "Done."
    And the audit of the shop's session lists
      | segment | call | decision | resumed in |
      | 1       | m1   | approve  | 2          |
      | 2       | r1   | approve  | 3          |

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario: Two executors resume the same paused run at once on PostgreSQL: exactly one wins
    Given the shop keeps its runs in postgresql
    When the shop is asked "Refund A1 and tell Ann" in blocking mode
    And two executors on the same database resume the latest paused segment at once with
      | call | decision |
      | r1   | approve  |
      | m1   | approve  |
    Then exactly one executor resumed it, the other was refused with ApprovalConflictError
    And the tools ran "lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"} ; send_mail {"to": "ann"}"
    And the store's run rows say paused, ok
    And the audit of the shop's session lists
      | segment | call | decision | resumed in |
      | 1       | m1   | approve  | 2          |
      | 1       | r1   | approve  | 2          |

  Scenario Outline: On <database>, a worker that read the pause just before another claimed it gets ApprovalConflictError
    Given the shop keeps its runs in <database>
    When the shop is asked "Refund A1 and tell Ann" in blocking mode
    And two executors resume the latest paused segment, the second reading the pause just before the first claims it, with
      | call | decision |
      | r1   | approve  |
      | m1   | approve  |
    Then exactly one executor resumed it, the other was refused with ApprovalConflictError
    And the tools ran "lookup {"order": "A1"} ; refund {"amount": 30, "order": "A1"} ; send_mail {"to": "ann"}"
    When the first paused segment is resumed in blocking mode with
      | call | decision |
      | r1   | approve  |
    Then resuming is refused with ApprovalConflictError naming "already resumed"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A new message over a pending approval declines the calls, then runs the message (<mode>)
    Given a shop whose model replies
      | tool calls                                                           | text         | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30}  |              | 20            | 5                 |
      |                                                                      | Nothing then. | 60           | 3                 |
    And the shop keeps its runs in <database>
    When the shop is asked "Refund A1" in <mode> mode
    And a new message "Forget it" is sent on the shop's session in <mode> mode
    Then the shop's run is answered
    And the model's last request holds the declined calls, then the new message
    And the tools ran "lookup {"order": "A1"}"
    And the shop's session history is a valid transcript ending with "Nothing then."
    And the audit of the shop's session lists
      | segment | call | decision   | resumed in |
      | 1       | r1   | superseded | -          |
    And each segment billed exactly its own model calls, none twice
    When the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
    Then resuming is refused with ApprovalConflictError naming "a new message on its session declined its calls"
    And the tools ran "lookup {"order": "A1"}"

    Examples:
      | mode     | database   |
      | blocking | sqlite     |
      | events   | sqlite     |
      | events   | postgresql |

  Scenario: Another caller's paused run is not found, and stays paused for its owner
    Given the shop keeps its runs in sqlite
    When the shop is asked "Refund A1 and tell Ann" in blocking mode
    And the caller "mallory" resumes the latest paused segment with
      | call | decision |
      | r1   | approve  |
      | m1   | approve  |
    Then resuming is refused with RunNotFoundError naming "no paused run"
    And the tools ran "lookup {"order": "A1"}"
