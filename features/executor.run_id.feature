@store
Feature: One id for a run, everywhere it is named
  An executor mints a run's id once, before the run opens, and every record of the run carries
  it: the result, the `run_started` event and the result on `run_finished` / `run_failed`, the
  ledger's rows, the store's `runs` row, the session's turn and the executor's log lines. A bill
  and a result join on it.

  Scenario Outline: A <ending> run carries one id (<mode>, <storage>)
    Given an actor whose run will end <ending>, kept <storage>
    When the actor is asked "Weather in Paris?" in <mode> mode, and the run ends <ending>
    Then the result has a run id
    And every event that names a run names the result's run id
    And every ledger row and the runs row carry the result's run id
    And the session's turn carries the result's run id, if it answered
    And every log line of the run names the result's run id, and no other

    Examples:
      | ending    | mode     | storage              |
      | answered  | blocking | without a store      |
      | answered  | events   | without a store      |
      | failed    | blocking | without a store      |
      | failed    | events   | without a store      |
      | cancelled | blocking | without a store      |
      | cancelled | events   | without a store      |
      | answered  | blocking | in a sqlite session  |
      | answered  | events   | in a sqlite session  |
      | failed    | blocking | in a sqlite session  |
      | failed    | events   | in a sqlite session  |
      | cancelled | blocking | in a sqlite session  |
      | cancelled | events   | in a sqlite session  |
      | answered  | events   | in a sqlite ledger   |
      | failed    | blocking | in a sqlite ledger   |
      | answered  | blocking | in a postgresql session |
      | cancelled | events   | in a postgresql session |

  Scenario: Two runs have two ids
    Given an actor whose run will end answered, kept without a store
    When the actor is asked "Weather in Paris?" twice
    Then the two results have different run ids

  Scenario: A run refused for a busy session still names its id, and writes no runs row for it
    Given an actor whose run will end answered, kept in a sqlite session
    And another run holds the actor's session
    When the actor is asked "Weather in Paris?" in events mode, and the run ends refused
    Then the result has a run id
    And the run_failed event names the result's run id, and no run_started came
    And the store has no runs row for the result's run id

  Scenario Outline: A run whose store cannot be opened fails with StoreError, and still names its id (<mode>)
    Given an actor whose run will end answered, kept in an unreachable sqlite ledger
    When the actor is asked "Weather in Paris?" in <mode> mode, and the run ends refused
    Then the result has a run id
    And the result's error is a StoreError naming the store
    And the run_failed event names the result's run id, and no run_started came

    Examples:
      | mode     |
      | blocking |
      | events   |
