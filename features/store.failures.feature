@store
Feature: A store that fails under a run leaves nothing half-written and keeps the bill
  The store writes at three moments of a run: when it starts (the session claimed, the run
  row), while it goes (the session's lease renewed every third of `lease_s`) and when it ends.
  A database error at the start fails the run with `StoreError` before anything is spent; a
  renewal that fails is tried again; a run whose session was taken over is told in the log and
  appends nothing; a run whose end cannot be written fails with `StoreError`, its usage kept.
  Each run below builds a fresh executor on a SQLite file; its tools reach into that file as
  another worker or a failing database would.

  Scenario Outline: A database error at the start fails the run with StoreError, nothing spent or kept (<mode>)
    Given the actor keeps sessions in a fresh sqlite store
    And the store's turns table is gone
    When the actor is asked "Hi" on session "s-1" in <mode> mode, its model replying:
      | text  | prompt tokens | completion tokens |
      | Hello | 30            | 2                 |
    Then the run failed with StoreError
    And the run's error says "while starting run"
    And nothing was billed for it
    And the store holds no session "s-1" and no run

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A run that ends before it begins frees its session, marked <status>
    Given a fresh sqlite store
    When a run of an agent that <ending> before it begins is asked "Hi" on session "s-1"
    Then the call ended with <error type>
    And the ledger's run is marked "<status>"
    And a new run on session "s-1" can start

    Examples:
      | ending          | error type     | status    |
      | is cancelled    | CancelledError | cancelled |
      | raises an error | RuntimeError   | failed    |

  Scenario: A lease renewal the database refuses is tried again, and the run keeps its turn
    Given the actor declares the store probe tools
    And the actor keeps sessions in a fresh sqlite store with a lease of 0.3 seconds
    When the actor is asked "Weather?" on session "s-1" in blocking mode, its model replying:
      | text | tool calls                             | prompt tokens | completion tokens |
      |      | hide_sessions_table#h1 {"seconds": 1}  | 20            | 6                 |
      | Ok.  |                                        | 40            | 2                 |
    Then the session "s-1" has 1 turn
    And a warning said "renewing the lease of run"
    And the ledger for session "s-1" holds every call of the run, as billed

  Scenario: A run whose session was taken over is told at its next renewal, and appends nothing
    Given the actor declares the store probe tools
    And the actor keeps sessions in a fresh sqlite store with a lease of 0.3 seconds
    When the actor is asked "Weather?" on session "s-1" in blocking mode, its model replying:
      | text | tool calls                                | prompt tokens | completion tokens |
      |      | steal_session_and_wait#t1 {"seconds": 1}  | 20            | 6                 |
      | Ok.  |                                           | 40            | 2                 |
    Then the run failed with StoreError
    And a warning said "lost its lease on session 's-1'; its turn will not be appended"
    And the session "s-1" has 0 turns
    And the ledger for session "s-1" holds every call of the run, as billed

  Scenario: A run whose record cannot be closed fails with StoreError, its usage kept, no turn appended
    Given the actor declares the store probe tools
    And the actor keeps sessions in a fresh sqlite store
    When the actor is asked "Weather?" on session "s-1" in blocking mode, its model replying:
      | text | tool calls                            | prompt tokens | completion tokens |
      |      | lose_runs_table#l1 {"city": "Paris"}  | 20            | 6                 |
      | Ok.  |                                       | 40            | 2                 |
    Then the run failed with StoreError
    And the run's error says "while ending run"
    And the failed run's result still bills 60 prompt and 8 completion tokens
    And the session "s-1" has 0 turns
    And the ledger for session "s-1" holds every call of the run, as billed
