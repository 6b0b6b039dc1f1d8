@store
Feature: A request sent again under its idempotency key runs once, on SQLite and on PostgreSQL
  A client that lost its connection sends its request again under the same key. The store lets
  the first run claim the key (one caller's key, one request told by its digest); a repeat
  after the answer gets that run's result back and nothing runs, a repeat meanwhile is refused
  as in progress, and the key for another request is refused as a mismatch. A run that fails
  or is cancelled releases its key, so the retry runs anew. A claim is a lease its run renews:
  a claim whose process died is taken over once its lease runs out. Keys expire with the
  store's `retention_days`. Each step opens and closes the store, so what it reads back has
  been through the database; steps "at second N" give the store their own clock.

  Scenario Outline: The first request under a key claims it for its run (<database>)
    Given a fresh <database> store
    When run "r-1" claims key "k-1" for the request "hello"
    Then the claim is granted
    And a repeat by run "r-2" is refused as in progress, naming key "k-1" and run "r-1"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A repeat after the answer gets the answered run's result and runs nothing (<database>)
    Given a fresh <database> store
    And run "r-1" claimed key "k-1" for the request "hello" and answered it
    When run "r-2" claims key "k-1" for the request "hello"
    Then the claim replays run "r-1"'s result: equal, with its run id, usage and cost

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: The key of another request is refused, its run going or answered (<database>, <state>)
    Given a fresh <database> store
    And run "r-1" claimed key "k-1" for the request "hello" and <state>
    When run "r-2" claims key "k-1" for the request "goodbye"
    Then it is refused with IdempotencyKeyMismatchError naming key "k-1" and run "r-1"

    Examples:
      | database   | state           |
      | sqlite     | is still going  |
      | sqlite     | answered it     |
      | postgresql | is still going  |
      | postgresql | answered it     |

  Scenario Outline: A run that <ended> releases its key, and the retry runs anew (<database>)
    Given a fresh <database> store
    And run "r-1" claimed key "k-1" for the request "hello" and <ended>
    When run "r-2" claims key "k-1" for the request "hello"
    Then the claim is granted
    And once run "r-2" answered it, a repeat replays its result

    Examples:
      | database   | ended         |
      | sqlite     | failed        |
      | sqlite     | was cancelled |
      | postgresql | failed        |
      | postgresql | was cancelled |

  Scenario Outline: Only the claiming run settles its key (<database>, <outcome>)
    Given a fresh <database> store
    And run "r-1" claimed key "k-1" for the request "hello" and is still going
    When run "r-2" settles key "k-1" with <outcome>
    Then that settling is refused
    And a repeat by run "r-3" is refused as in progress, naming key "k-1" and run "r-1"
    And once run "r-1" answered it, a repeat replays its result

    Examples:
      | database   | outcome   |
      | sqlite     | an answer |
      | sqlite     | a failure |
      | postgresql | an answer |
      | postgresql | a failure |

  Scenario Outline: A claim not renewed for its lease is taken over; renewed, it holds (<database>, renewed at <renewals>)
    Given a fresh <database> store with a lease of 30.0 seconds
    And at second 0 run "r-1" claimed key "k-1" for the request "hello"
    And run "r-1" renewed its claim at seconds <renewals>
    When at second 45 run "r-2" claims key "k-1" for the request "hello"
    Then <outcome>

    Examples:
      | database   | renewals | outcome                                                                         |
      | sqlite     | none     | the claim is granted, and run "r-1" can neither renew nor settle key "k-1" now  |
      | sqlite     | 10       | the claim is granted, and run "r-1" can neither renew nor settle key "k-1" now  |
      | sqlite     | 10, 20   | it is refused as in progress, naming key "k-1" and run "r-1"                    |
      | postgresql | none     | the claim is granted, and run "r-1" can neither renew nor settle key "k-1" now  |
      | postgresql | 10, 20   | it is refused as in progress, naming key "k-1" and run "r-1"                    |

  Scenario Outline: A run past its lease that nobody took over still settles (<database>)
    Given a fresh <database> store with a lease of 30.0 seconds
    And 45 seconds ago run "r-1" claimed key "k-1" for the request "hello" and is still going
    When run "r-1" answers it
    Then a repeat by run "r-2" replays run "r-1"'s result

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: An expired key is claimed anew as if unseen (<database>)
    Given a fresh <database> store keeping sessions for 90 days
    And 91 days ago run "r-1" claimed key "k-1" for the request "hello" and answered it
    When run "r-2" claims key "k-1" for the request "goodbye"
    Then the claim is granted

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: Pruning removes the expired keys, never one a live run holds (<database>)
    Given a fresh <database> store keeping sessions for 90 days
    And 91 days ago run "r-1" claimed key "k-old" for the request "hello" and answered it
    And 91 days ago run "r-2" claimed key "k-abandoned" for the request "hello" and is still going
    And 91 days ago run "r-3" claimed key "k-renewed" for the request "hello" and is still going
    And run "r-3" renewed its claim on key "k-renewed" just now
    And run "r-4" claimed key "k-new" for the request "hello" and answered it
    When the store is pruned
    Then the store keeps the keys "k-new, k-renewed" only

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A store that keeps everything keeps its keys (<database>)
    Given a fresh <database> store
    And 1000 days ago run "r-1" claimed key "k-1" for the request "hello" and answered it
    When the store is pruned
    Then the store keeps the keys "k-1" only
    And a repeat by run "r-2" replays run "r-1"'s result

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: Of concurrent claims of one key exactly one wins (<database>, <contenders>)
    Given a fresh <database> store
    When <count> runs claim key "k-1" for the request "hello" at once, <contenders>
    Then exactly one claim is granted, and every other is refused as in progress naming its run

    Examples:
      | database   | count | contenders         |
      | sqlite     | 8     | through one store  |
      | sqlite     | 8     | through a store each |
      | sqlite     | 4     | from a process each |
      | postgresql | 8     | through one store  |
      | postgresql | 8     | through a store each |
      | postgresql | 4     | from a process each |

  Scenario Outline: A key is its caller's own (<database>)
    Given a fresh <database> store
    And run "r-1" of caller "alice" claimed key "k-1" for the request "hello" and is still going
    When run "r-2" of caller "bob" claims key "k-1" for the request "goodbye"
    Then the claim is granted
    And run "r-3" of no caller claims key "k-1" for the request "goodbye", and it is granted
    And a repeat by run "r-4" of caller "alice" is refused as in progress, naming key "k-1" and run "r-1"

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: A database of the version before idempotency keys gains their table when opened (<database>)
    Given a fresh <database> store
    And the database is as the schema version before idempotency keys left it
    When run "r-1" claims key "k-1" for the request "hello"
    Then the claim is granted
    And the database is at the current schema version

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario: A claim the database cannot write fails with StoreError naming the key
    Given a fresh sqlite store
    And the store's idempotency table is gone
    When run "r-1" claims key "k-1" for the request "hello"
    Then it is refused with StoreError saying "while claiming idempotency key 'k-1'"

  Scenario: An answer kept by a cleveractors that wrote results otherwise fails the repeat with StoreError
    Given a fresh sqlite store
    And run "r-1" claimed key "k-1" for the request "hello" and answered it
    And the answer kept for key "k-1" is one this cleveractors cannot read
    When run "r-2" claims key "k-1" for the request "hello"
    Then it is refused with StoreError saying "the answer of run r-1 kept under idempotency key 'k-1' cannot be read"

  Scenario Outline: A key that is <what> is a configuration error
    Given a fresh sqlite store
    When run "r-1" claims a key of <length> characters for the request "hello"
    Then it is refused with ConfigurationError saying "must be 1 to 255 characters, got <length>"

    Examples:
      | what     | length |
      | empty    | 0      |
      | too long | 256    |

  Scenario: A request's digest tells its message, history and session apart, not their spelling
    Then these requests have the same digest exactly when they are in the same group:
      | group | message | history                                         | session |
      | a     | hello   | none                                            | none    |
      | a     | hello   | []                                              | none    |
      | b     | Hello   | none                                            | none    |
      | c     | hello   | none                                            | s-1     |
      | d     | hello   | [{"role": "user", "content": "hi"}]             | none    |
      | d     | hello   | [{"content": "hi", "role": "user"}]             | none    |
      | e     | hello   | [{"role": "user", "content": "hi!"}]            | none    |
      | f     | hello   | [{"role": "user", "content": "hi"}]             | s-1     |
      | g     | hello   | messages [{"role": "user", "content": "hi"}]    | s-1     |
      | g     | hello   | messages [{"role": "user", "content": "hi"}]    | s-1     |
    And every digest is a sha256 in hex
