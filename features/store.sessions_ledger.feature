@store
Feature: Sessions and the usage ledger survive, on SQLite and on PostgreSQL
  A chat product keeps conversations and bills from a durable record. `SqlStore` keeps each
  session's whole turns and one ledger row per LLM call, written as it happens. Every scenario
  runs on a SQLite file and on a real PostgreSQL server started for the suite; each opens and
  closes the store between steps, so what it reads back has been through the database.

  Scenario Outline: A committed turn is kept whole and read back after the store reopens (<database>)
    Given a fresh <database> store
    When a run on session "s-1" commits a turn with a tool call and its answer
    Then the session "s-1" has 1 turn
    And that turn holds the user message, the tool call, the tool result and the answer, in order
    And the run "r-1" is in the ledger with status "ok"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A run loads only the latest turns, oldest first (<database>)
    Given a fresh <database> store keeping 2 turns of history
    And the session "s-1" has 3 committed turns asking "one", "two" and "three"
    When a new run starts on session "s-1"
    Then the run's history asks "two" then "three"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A failed or cancelled run appends nothing and frees its session (<database>)
    Given a fresh <database> store
    When a run on session "s-1" ends with <ending> before committing
    Then the session "s-1" has 0 turns
    And the run "r-1" is in the ledger with status "<status>"
    And a new run on session "s-1" can start

    Examples:
      | database   | ending              | status    |
      | sqlite     | an error            | failed    |
      | sqlite     | a cancellation      | cancelled |
      | postgresql | an error            | failed    |
      | postgresql | a cancellation      | cancelled |

  Scenario Outline: A session held by a run in another process is refused at once (<database>)
    Given a fresh <database> store
    And another process holds session "s-1"
    When a run on session "s-1" starts in this process
    Then it is refused with SessionBusyError naming "s-1"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A run whose process was killed frees its session when its lease runs out (<database>)
    Given a fresh <database> store with a lease of 0.5 seconds
    And another process holds session "s-1" and is killed with SIGKILL
    When the lease has run out
    Then a new run on session "s-1" can start
    And the killed run "held-by-other" is in the ledger with status "running"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: Ledger rows are written once each, and totalled (<database>)
    Given a fresh <database> store
    When a run on session "s-1" records these LLM calls, each written twice:
      | index | purpose   | round | prompt | completion | estimated |
      | 1     | round     | 1     | 120    | 14         | no        |
      | 2     | round     | 2     | 180    | 40         | no        |
      | 3     | synthesis | 3     | 200    | 25         | yes       |
    Then the ledger for session "s-1" has 3 rows, one per call, in order
    And the ledger totals are 500 prompt and 79 completion tokens, estimated
    And the ledger has no rows for session "s-2"
    And the ledger since tomorrow has no rows

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: Each ledger row keeps its call's exact cost, and the total is their sum (<database>)
    Given a fresh <database> store
    When a run on session "s-1" records these LLM calls, each written twice:
      | index | purpose | round | prompt | completion | estimated | cost          |
      | 1     | round   | 1     | 2048   | 300        | no        | 0.00684       |
      | 2     | round   | 2     | 2400   | 40         | no        | 0.0000000384  |
    Then the ledger for session "s-1" has 2 rows, one per call, in order
    And the ledger's cost is USD 0.0068400384, each row's cost as recorded

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: Another caller's session does not exist for them (<database>)
    Given a fresh <database> store
    And caller "alice" has 1 committed turn in session "s-1"
    Then caller "bob" sees no turns in session "s-1"
    And caller "bob" cannot delete session "s-1"
    And a run of caller "bob" on session "s-1" is refused with SessionNotFoundError
    And caller "alice" still has 1 turn in session "s-1"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: Pruning removes idle sessions and keeps the bill (<database>)
    Given a fresh <database> store keeping sessions for 90 days
    And the session "s-1" has 1 committed turn
    When the store is pruned 91 days from now
    Then the session "s-1" has 0 turns
    And the ledger still holds the run "r-1"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: The schema is created on first open and kept on the next (<database>)
    Given a fresh <database> store
    Then the database is at the current schema version
    When the database says it was written by a newer cleveractors
    Then opening the store fails with ConfigurationError saying "upgrade cleveractors"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario: A URL that is not a database is a configuration error that never shows its password
    Then a store on "mysql://db/chat" fails with ConfigurationError saying "unsupported database 'mysql'"
    And a store on "not a url" fails with ConfigurationError saying "is not a database URL"
    And a store on "postgresql :// admin:hunter22@db/chat" fails with ConfigurationError saying "is not a database URL"
    And the store's error does not show "hunter22"
    And a store on "postgresql://admin:hunter22@db:five/chat" fails with ConfigurationError saying "is not a database URL"
    And the store's error does not show "hunter22"
