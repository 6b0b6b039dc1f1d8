@store
Feature: A request sent again under its idempotency key is answered once
  `execute(..., idempotency_key=...)` (and the streams) with a store: a request sent again under
  the same key, by the same caller with the same message, history and session, gets the first
  run's result back, marked `replayed`, and nothing runs or is billed again; a stream replays it
  as `run_started` (replayed), the answer as one text delta, then `run_finished`. Each worker
  below is a fresh executor on the same database, as a retry reaching another process would be.

  Scenario Outline: A repeat after the answer is answered from the store (<mode>, <database>)
    Given an actor answering "Sunny in Paris." with a fresh <database> store
    When a worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    And another worker is asked "Weather in Paris?" under key "k-1" in <mode> mode
    Then the second answer is the first run's result, replayed: the same run id, text and usage
    And the second worker's model was never asked
    And the ledger holds the first run's calls, and no other

    Examples:
      | mode     | database   |
      | blocking | sqlite     |
      | events   | sqlite     |
      | text     | sqlite     |
      | blocking | postgresql |
      | events   | postgresql |

  Scenario: A replay's log lines name the first run alone, and bill nothing
    Given an actor answering "Sunny in Paris." with a fresh sqlite store
    When a worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    And another worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    Then the second worker logged only that it replayed the first run, naming no other run

  Scenario: A different cap on the output is a different request
    Given an actor answering "Sunny in Paris." with a fresh sqlite store
    When a worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    And another worker is asked "Weather in Paris?" under key "k-1", its output capped at 5 tokens
    Then the second request failed with IdempotencyKeyMismatchError naming the first run
    And the second worker's model was never asked

  Scenario: A different output schema is a different request
    Given an actor answering "Sunny in Paris." with a fresh sqlite store
    When a worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    And another worker is asked "Weather in Paris?" under key "k-1", its answer typed by a schema
    Then the second request failed with IdempotencyKeyMismatchError naming the first run
    And the second worker's model was never asked

  Scenario: A run that loses its key's claim to another run is stopped, and what it spent is billed
    Given an actor answering "Sunny in Paris." slowly with a fresh sqlite store leasing for 0.3 seconds
    When while a worker answers "Weather in Paris?" under key "k-1", another run takes the key over
    Then the first run was stopped: cancelled, its call billed in the ledger
    And the run logged that it lost its claim to another run

  Scenario: A replayed stream is the stored answer as one text delta between run_started and run_finished
    Given an actor answering "Sunny in Paris." with a fresh sqlite store
    When a worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    And another worker is asked "Weather in Paris?" under key "k-1" in events mode
    Then the second run's events are run_started (replayed, the first run's id), one text delta "Sunny in Paris.", run_finished

  Scenario Outline: A repeat while the first run is going is refused as in progress (<mode>)
    Given an actor answering "Sunny in Paris." slowly with a fresh sqlite store
    When while a worker answers "Weather in Paris?" under key "k-1", another worker is asked the same in <mode> mode
    Then the second request failed with IdempotencyKeyInProgressError naming the first run
    And the second request billed nothing
    And the first run answered "Sunny in Paris."

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario: The key of another request is refused, and nothing runs
    Given an actor answering "Sunny in Paris." with a fresh sqlite store
    When a worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    And another worker is asked "Weather in Rome?" under key "k-1" in blocking mode
    Then the second request failed with IdempotencyKeyMismatchError naming the first run
    And the second worker's model was never asked

  Scenario: A run that failed frees its key: the retry runs anew and is billed on its own
    Given an actor whose first answer fails, then answers "Sunny in Paris.", with a fresh sqlite store
    When a worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    And another worker is asked "Weather in Paris?" under key "k-1" in blocking mode
    Then the second request answered "Sunny in Paris." as a run of its own
    And the ledger holds the calls of both runs

  Scenario: Another caller's key of the same name is another key
    Given an actor answering "Sunny in Paris." with a fresh sqlite store
    When caller "alice" asks "Weather in Paris?" under key "k-1"
    And caller "bob" asks "Weather in Paris?" under key "k-1" of another worker
    Then the second request answered "Sunny in Paris." as a run of its own

  Scenario: A key without a store is refused, naming the fix
    Given an actor answering "Sunny in Paris." without a store
    Then asking under key "k-1" fails with ConfigurationError saying "idempotency_key needs a store"
