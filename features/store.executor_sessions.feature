@store
Feature: An executor with a store keeps sessions and bills every call in the ledger
  With `store:` in the actor config, `execute(message, session_id=...)` and the streams load the
  session's latest turns (whole: tool calls and results included), append the new turn when the
  run answers, and write one ledger row per LLM call the moment the call ends. Each run below
  builds a fresh executor, as a restarted server would.

  Scenario Outline: A follow-up reads the earlier turn's tool results, after a restart (<mode>, <database>)
    Given the actor declares the demo tools get_weather and get_time
    And the actor keeps sessions in a fresh <database> store
    When the actor is asked "Weather in Paris?" on session "s-1" in <mode> mode, its model replying:
      | text            | tool calls                       | prompt tokens | completion tokens |
      | Looking.        | get_weather#w1 {"city": "Paris"} | 40            | 12                |
      | Sunny in Paris. |                                  | 70            | 5                 |
    And the actor is asked "And tomorrow?" on session "s-1" in <mode> mode, its model replying:
      | text         | prompt tokens | completion tokens |
      | Still sunny. | 90            | 4                 |
    Then the second run's first request held the first turn whole before "And tomorrow?"
    And the session "s-1" has 2 turns
    And the ledger for session "s-1" holds every call of both runs, as billed

    Examples:
      | mode      | database   |
      | blocking  | sqlite     |
      | streaming | sqlite     |
      | blocking  | postgresql |
      | streaming | postgresql |

  Scenario Outline: A round's LLM call is in the ledger before its tools run (<mode>)
    Given the actor declares the ledger probe tool
    And the actor keeps sessions in a fresh sqlite store
    When the actor is asked "Weather?" on session "s-1" in <mode> mode, its model replying:
      | text | tool calls                              |
      |      | count_ledger_rows#p1 {"city": "Paris"}  |
      | Ok.  |                                         |
    Then the tool call p1 answered "ledger rows: 1"

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A failed run appends nothing, and what it spent is in the ledger (<mode>)
    Given the actor keeps sessions in a fresh sqlite store
    When the actor is asked "Hi" on session "s-1" in <mode> mode, its model replying:
      | text          | cut off after |
      | Hello there friend |  2       |
    Then the run failed
    And the session "s-1" has 0 turns
    And the ledger for session "s-1" holds every call of the run, as billed
    And the ledger's run is marked "failed"

    Examples:
      | mode      |
      | streaming |

  Scenario Outline: A second run on a running session is refused at once (<mode>)
    Given the actor keeps sessions in a fresh sqlite store
    And a run on session "s-1" is under way
    When the actor is asked "Hi" on session "s-1" in <mode> mode, its model replying:
      | text  |
      | Hello |
    Then the run failed with SessionBusyError
    And nothing was billed for it

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A run that lost its hold on the session appends nothing (<mode>)
    Given the actor declares the session thief tool
    And the actor keeps sessions in a fresh sqlite store
    When the actor is asked "Weather?" on session "s-1" in <mode> mode, its model replying:
      | text | tool calls                             |
      |      | steal_session#t1 {"city": "Paris"}     |
      | Ok.  |                                        |
    Then the run failed with StoreError
    And the session "s-1" has 0 turns
    And the ledger for session "s-1" holds every call of the run, as billed

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: on_call hears of every call, also the one that ended a failed run (<mode>)
    When an agent with an on_call recorder is asked "Hi" in <mode> mode, its model replying:
      | error                      |
      | the provider is overloaded |
    Then the run failed
    And the recorder heard of exactly the calls on the result

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A ledger that cannot be written fails the run, with its usage on the result
    Given the actor keeps sessions in a fresh sqlite store
    And the store's ledger table is gone
    When the actor is asked "Hi" on session "s-1" in blocking mode, its model replying:
      | text  | prompt tokens | completion tokens |
      | Hello | 30            | 2                 |
    Then the run failed with StoreError
    And the failed run's result still bills 30 prompt and 2 completion tokens

  Scenario: A session needs a store, and holds the history itself
    Then asking on session "s-1" without a store fails saying "session_id needs a store"
    And asking on session "s-1" with a history fails saying "the session holds the history"
