@store
Feature: Spend limits per caller, held by the store across runs
  `spend_limits:` (or a hook giving each caller's limits) bounds what one caller spends per
  calendar day, calendar month or rolling window, in USD or tokens. Each LLM call reserves its
  estimated cost before it is sent and settles to the provider's figure with its ledger row, so
  concurrent runs cannot pass a limit by more than the calls in flight (and not at all with
  `strict`, which reserves each call's prompt plus its output cap). A caller at the limit is
  refused before any LLM call: `SpendLimitExceeded`, nothing billed, no ledger row. The actor's
  stub answers in one call of 3 prompt and 5 completion tokens, at $1 and $2 per million.
  robot/store.robot does the same with two `serve` processes on one PostgreSQL.

  Scenario Outline: 50 concurrent runs of one caller stay within the limit plus what was in flight (<database>, strict: <strict>)
    Given an actor on a fresh <database> store whose callers may spend $0.0001 a day, strict <strict>
    When caller "alice" sends 50 messages at once
    Then some runs answered and every other run was refused with SpendLimitExceeded, billing nothing
    And no refused run has a ledger row, and the ledger bills the answered runs only
    And the ledger's total is within the limit <bound>
    And alice's day window counts what the ledger billed, with nothing reserved

    Examples:
      | database   | strict | bound                                  |
      | sqlite     | false  | plus each answered call's reply beyond its estimate |
      | sqlite     | true   | exactly                                |
      | postgresql | false  | plus each answered call's reply beyond its estimate |
      | postgresql | true   | exactly                                |

  Scenario: A caller at the limit is refused before any LLM call, told the window and its reset
    Given an actor on a fresh sqlite store whose callers may spend 20 tokens a day, strict false
    And the clock reads 2026-03-14 18:30 UTC
    When caller "alice" sends a message
    And caller "alice" sends a message
    And caller "alice" sends a message
    Then the last run was refused: the day limit (tokens) of "alice", resetting at 2026-03-15 00:00 UTC
    And the last run's result marks the day window refused, with 4 tokens left
    And the model was asked 2 times, and the ledger holds 2 rows
    And caller "bob" still gets an answer

  Scenario Outline: A window that resets lets the caller in again (<window>)
    Given an actor on a fresh sqlite store whose callers may spend 10 tokens <per>, strict false
    And the clock reads 2026-01-31 23:00 UTC
    When caller "alice" sends a message
    And caller "alice" sends a message
    Then the last run was refused with SpendLimitExceeded
    When the clock reads <later> UTC
    And caller "alice" sends a message
    Then the last run answered, its result showing 8 tokens spent in the <window> window

    Examples:
      | window  | per                   | later            |
      | day     | a day                 | 2026-02-01 00:00 |
      | month   | a month               | 2026-02-01 00:00 |
      | rolling | in 2 hours rolling    | 2026-02-01 01:00 |

  Scenario: A plan changed through the hook applies to the caller's next turn
    Given an actor on a fresh sqlite store whose limits come from a hook of plans by caller
    And caller "alice" is on a plan of 10 tokens a day
    When caller "alice" sends a message
    And caller "alice" sends a message
    Then the last run was refused with SpendLimitExceeded
    When caller "alice" moves to a plan of 100 tokens a day
    And caller "alice" sends a message
    Then the last run answered, its result showing 16 tokens spent in the day window
    When caller "alice" moves to no plan
    And caller "alice" sends a message
    Then the last run answered, its result showing no spend limits

  Scenario: `cleveractors usage --caller` shows spent, reserved and left per window
    Given an actor on a fresh sqlite store whose callers may spend 20 tokens a day, strict false
    When caller "alice" sends a message
    And the operator runs `cleveractors usage` for caller "alice"
    Then it prints the day window: limit 20, spent 8, reserved 0, left 12
    When the operator runs `cleveractors usage` for caller "alice" --json
    Then its JSON names the caller and the day window: spent 8, left 12
    When the operator runs `cleveractors usage` for caller "bob"
    Then it prints the day window: limit 20, spent 0, reserved 0, left 20

  Scenario: A failed call releases what it reserved and did not spend
    Given an actor whose model answers 503, on a fresh sqlite store whose callers may spend 20 tokens a day
    When caller "alice" sends a message
    Then the last run failed, and alice's day window shows 0 spent and 0 reserved
    When caller "alice" sends a message
    Then the last run failed, and alice's day window shows 0 spent and 0 reserved

  Scenario: A paused run's resumption is held to the limit like a new message
    Given an actor whose weather lookup waits for approval, on a fresh sqlite store whose limits come from a hook of plans by caller
    And caller "alice" is on a plan of 60 tokens a day
    When caller "alice" sends a message
    Then the last run paused, its lookup billed: 52 tokens spent in the day window
    When caller "alice" approves the paused lookup
    Then the last run was refused with SpendLimitExceeded
    When caller "alice" moves to a plan of 200 tokens a day
    And caller "alice" approves the paused lookup
    Then the last run answered, its result showing 60 tokens spent in the day window

  Scenario: A run of several calls reserves each before it is sent, and the window counts them all
    Given an actor that looks the weather up then answers, on a fresh sqlite store whose callers may spend 200 tokens a day
    When caller "alice" sends a message
    Then the last run answered, its result showing 60 tokens spent in the day window

  Scenario: A run that fails before its first call lets go what its turn reserved
    Given an actor with an MCP server that cannot start, on a fresh sqlite store whose callers may spend 20 tokens a day
    When caller "alice" sends a message to the executor without opening it first
    Then the last run failed with McpServerError, and alice's day window shows 0 spent and 0 reserved

  Scenario: What a worker that died mid-call reserved holds for an hour at most
    Given an actor on a fresh sqlite store whose callers may spend 10 tokens a day, strict false
    And the clock reads 2026-03-14 10:00 UTC
    And a worker that died mid-call had reserved 8 tokens for caller "alice"
    When caller "alice" sends a message
    Then the last run was refused with SpendLimitExceeded
    When the clock reads 2026-03-14 11:01 UTC
    And caller "alice" sends a message
    Then the last run answered, its result showing 8 tokens spent in the day window

  Scenario: A run that reaches the limit after a tool round stops, typed and flagged
    Given an actor that looks the weather up then answers, on a fresh sqlite store whose callers may spend 60 tokens a day
    When caller "alice" sends a message
    Then the last run failed with SpendLimitExceeded after its tool round, flagged "spend_limit"
    And its lookup call is billed and in the ledger, and nothing more

  Scenario: Refusals are counted by actor, never by caller
    Given an actor on a fresh sqlite store whose callers may spend 10 tokens a day, strict false
    And the executor records metrics
    When caller "alice" sends a message
    And caller "alice" sends a message
    And caller "alice" sends a message
    Then the refusals metric counts 2 for the actor, with no caller among its attributes

  Scenario Outline: A refused request is a 429 with Retry-After in the format of <route>
    Given an actor on a fresh sqlite store whose callers may spend 10 tokens a day, strict false
    And the web app authenticates its callers by their X-Caller header
    When caller "alice" asks "Hello" through <route>
    And caller "alice" asks "Hello" through <route>
    Then the first response answered and told what alice has left, in the format of <route>
    And the last response is 429 with a Retry-After until the day's end, in the format of <route>

    Examples:
      | route                |
      | /chat                |
      | /v1/chat/completions |

  Scenario Outline: Spend limits that cannot hold are refused with a clear error (<problem>)
    Given an actor whose spend limits are <limits>
    Then building or running it fails naming "<message>"

    Examples:
      | problem           | limits                                  | message                                  |
      | no store          | 5 USD a day without a store             | spend_limits: needs a store              |
      | no amount         | a day limit with neither usd nor tokens | needs usd, tokens or both                |
      | window twice      | two day limits                          | day is given twice                       |
      | hours not rolling | a day limit of 5 hours                  | hours is required for a rolling window   |
      | strict, no cap    | strict for a model with no output cap   | the model has none; set agent.model_options.max_tokens |
      | USD, no price     | 5 USD a day for a model with no price   | a limit in USD needs the model's price   |
