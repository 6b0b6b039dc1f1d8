@store
Feature: Where a store's SQLite file is, and that looking at a store never creates one
  A relative `sqlite:///` path in an actor file names a file beside that file, so that `run`,
  `serve`, `usage` and `store prune` find the same store from whatever folder they run in. In
  code (a dict config, `SqlStore(url)`) it stays relative to the working directory, as SQLite
  takes it. A tool that only looks at a store (a usage report) never creates a database.

  Scenario Outline: A relative SQLite path in an actor file is in the file's folder (<built>)
    Given an actor file in a folder of its own keeps its store at "sqlite:///shop.db"
    And the working directory is another, empty folder
    When the actor's executor is built <built> and opened
    Then the store's database is "shop.db" in the actor file's folder
    And the working directory is still empty

    Examples:
      | built                                        |
      | from the file's path                         |
      | from its loaded config and the file's folder |

  Scenario: A relative SQLite path in a dict config is in the working directory
    Given the working directory is another, empty folder
    When an executor is built from a dict config keeping its store at "sqlite:///shop.db" and opened
    Then the store's database is "shop.db" in the working directory

  Scenario Outline: Only a relative SQLite file path is taken from the actor file's folder: <url>
    Then "<url>" from the folder "/srv/actors" is "<resolved>"

    Examples:
      | url                                | resolved                                      |
      | sqlite:///data/shop.db             | sqlite:////srv/actors/data/shop.db            |
      | sqlite:///shop.db?timeout=5        | sqlite:////srv/actors/shop.db?timeout=5       |
      | sqlite:////var/lib/shop.db         | sqlite:////var/lib/shop.db                    |
      | sqlite://                          | sqlite://                                     |
      | sqlite:///:memory:                 | sqlite:///:memory:                            |
      | postgresql://app:s3cret@db/chat    | postgresql://app:s3cret@db/chat               |

  Scenario: A store that must not create its database refuses a missing file, creating none
    Given the working directory is another, empty folder
    When a store on "sqlite:///missing.db" that must not create its database is opened
    Then it fails with ConfigurationError naming "missing.db" in the working directory
    And the working directory is still empty

  Scenario: A store that must not create its database opens an existing one
    Given an actor file in a folder of its own keeps its store at "sqlite:///shop.db"
    And the working directory is another, empty folder
    And the actor's executor is built from the file's path and opened
    When a store for the actor file that must not create its database is opened
    Then it opens "shop.db" in the actor file's folder

  Scenario: A store is shown without its driver, password or query
    Then the store on "postgresql://app:s3cret@db:5432/chat?sslpassword=zz" is shown as "postgresql://app:***@db:5432/chat"

  Scenario Outline: A dry run lists the sessions a prune would remove, and removes none (<database>)
    Given a fresh <database> store keeping sessions for 90 days
    And the session "s-1" has 1 committed turn
    When the sessions idle 91 days from now are listed
    Then the idle sessions are "s-1"
    And the session "s-1" has 1 turn

    Examples:
      | database   |
      | sqlite     |
      | postgresql |
