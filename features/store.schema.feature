@store
Feature: Every table the store creates is prefixed, and a database made before keeps its rows
  The store shares a database with the application that points `store.url` at it, so every
  table it creates carries the `cleveractors_` prefix. Schema version 4 created the pause tables
  as `paused_runs` and `approvals` (a name an application may well use itself); opening such a
  database moves their rows into `cleveractors_paused_runs` and `cleveractors_approvals` and
  drops them. A database the store never wrote keeps a table of those names untouched.

  Scenario Outline: A database made by schema version 4 keeps its pauses and audit, under prefixed tables (<database>)
    Given a <database> database made by schema version 4, holding a resumed pause and its audit
    When the store opens it
    Then its tables are all prefixed: "paused_runs" and "approvals" are gone
    And the store reads the audit as version 4 kept it, at the current schema version

    Examples:
      | database   |
      | sqlite     |
      | postgresql |

  Scenario Outline: An application's own "approvals" table is left alone (<database>)
    Given a <database> database holding the application's own "approvals" table
    When the store opens it
    Then the application's "approvals" table still holds its row, and the store's are prefixed

    Examples:
      | database   |
      | sqlite     |
      | postgresql |
