@store
Feature: Leases are judged by the database's clock, so workers whose clocks differ agree
  A run holds its session, and its request's idempotency key, on a lease it renews while it
  goes. Whether a lease has run out is decided by the database's clock in the statement that
  claims or renews it, never by the clock of the process asking: two workers whose clocks
  differ by more than a lease cannot both hold one session or one key, and a worker whose clock
  is behind still takes over a lease that really ran out. Below, the second worker's clock is
  moved by an hour while it acts; the lease is 30 seconds.

  Scenario Outline: A worker whose clock is <skew> cannot take a session another worker holds (<database>)
    Given a fresh <database> store whose workers lease for 30 seconds
    When a worker holding session "s-1" meets a worker whose clock is <skew>
    Then the second worker is refused with SessionBusyError: the first one's lease holds

    Examples:
      | database   | skew           |
      | sqlite     | an hour ahead  |
      | postgresql | an hour ahead  |
      | sqlite     | an hour behind |

  Scenario Outline: A worker whose clock is an hour ahead cannot take an idempotency key another worker holds (<database>)
    Given a fresh <database> store whose workers lease for 30 seconds
    When a worker holding key "k-1" meets a worker whose clock is an hour ahead
    Then the second worker is refused with IdempotencyKeyInProgressError: the first one's lease holds

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A worker whose clock is an hour behind takes over a lease that ran out (<database>)
    Given a fresh <database> store whose workers lease for 30 seconds
    And session "s-1" is held by a run whose lease ran out a second ago
    When a worker whose clock is an hour behind starts a run on session "s-1"
    Then the late worker holds the session: the lease ran out by the database's clock

    Examples:
      | database   |
      | sqlite     |
      | postgresql |
