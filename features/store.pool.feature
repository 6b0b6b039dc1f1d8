@store
Feature: Work waiting for the store's connections is served in the order it came
  A store opens at most `max_connections` database connections at once (`SqlStore` takes it, as
  does an actor's `store:`; 30 on PostgreSQL, 15 on a SQLite file). When all of them are busy, what needs one (a run starting, a ledger row, a
  lease renewed) waits in its turn, first come first served, for at most `connection_wait_s`
  (30 seconds), then fails with `StoreError`. A request
  that arrives just as a connection comes back does not take it from one that has waited
  longer: under load no run waits much more than its share while later ones go ahead (the
  connection pool alone would let them, and the longest waits ran into its timeout).

  Scenario Outline: Runs waiting for the store's one connection start in the order they asked, before later arrivals (<database>)
    Given a fresh <database> store with at most 1 connection
    When its connection is busy while 4 runs ask to start, one after another
    And 3 more runs ask to start, each just as a connection comes back
    Then the 7 runs start in the order they asked: the 4 that waited, then the 3 that came later
    And all 7 runs answer, each with its call in the ledger

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: 40 runs at once on a store of 3 connections all start and answer (<database>)
    Given a fresh <database> store whose actor's config allows at most 3 connections
    When 40 runs on their own sessions start at once
    Then all 40 runs answer, each with its call in the ledger
    And never more than 3 connections were open at once

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A run that waits longer than the store allows for a connection fails with StoreError, and the next one starts (<database>)
    Given a fresh <database> store with at most 1 connection, waiting at most 0.2 seconds for one
    When a run asks to start while the connection stays busy, then another once it is free
    Then the first run failed with StoreError "every one of the store's 1 connections was busy for 0.2 s"
    And the other run answers, with its call in the ledger

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario: Runs at once on an in-memory SQLite store take its one shared connection in turn, and every one answers
    When 10 runs on their own sessions start at once on an in-memory SQLite store
    Then all 10 runs answered, as the store itself says before it closes

  Scenario: A store of no connections is a configuration error
    When a store is made with at most 0 connections
    Then it is refused with ConfigurationError naming max_connections
