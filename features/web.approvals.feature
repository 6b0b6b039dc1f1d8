Feature: A person approves tool calls over HTTP: the run pauses on /chat and resumes on /runs/{id}/decisions
  A run whose model asks for a tool that needs approval streams `tool_approval_requested` for
  the call and ends with `run_paused`; the lookup of the same batch has run. The run's owner
  reads it at `GET /runs/{id}` and decides at `POST /runs/{id}/decisions`, which streams the
  resumed segment with the same event types as /chat. Each segment is its own request: its own
  X-Run-Id, and on_usage hears of it once, with its own tokens. A decision that cannot be taken
  is refused before anything runs (404 / 409 / 422, as `{"detail": ...}`), and nobody but the
  run's owner may see or decide it. `/v1/chat/completions` cannot ask a person: a gated call is
  declined there, never run. The app is `create_app()`, authenticating the caller from an
  `X-Caller` header, driven through httpx's ASGI transport; robot/approvals.robot does the same
  over real HTTP, across processes.

  Scenario Outline: A paused run streams its pending call, then resumes with the owner's approval (<where>)
    Given the approvals app keeps its pauses <where>
    When "alice" chats "Refund order A1" over HTTP
    Then the response is 200 and the stream ends with run_paused
    And the stream carries tool_approval_requested for refund with the arguments {"order": "A1", "amount": 30}
    And the stream's run_paused result waits on the refund call and spent 20 prompt and 5 completion tokens
    And the response's X-Run-Id names the paused run
    And the app's lookup ran once and its refund never
    And on_usage heard of 1 segment
    When "alice" approves the refund over HTTP
    Then the response is 200 and the stream ends with run_finished
    And the stream starts with run_started resumed from the paused run, under the response's X-Run-Id
    And the stream carries tool_call_decided "approve" for the refund call
    And the resumed answer over HTTP is "Here is what happened with order A1."
    And the app's lookup ran once and its refund once
    And on_usage heard of 2 segments: 20 + 5 tokens, then 40 + 4, under their own run ids

    Examples:
      | where               |
      | in memory           |
      | in a sqlite store   |

  Scenario Outline: A rejection's reason reaches the model, and the call never runs (<where>)
    Given the approvals app keeps its pauses <where>
    And "alice" has a run over HTTP paused on the refund
    When "alice" rejects the refund over HTTP because "the customer already got a voucher"
    Then the response is 200 and the stream ends with run_finished
    And the stream carries tool_call_decided "reject" for the refund call
    And the model's last request answers the refund call with "a person declined this call to 'refund' (the customer already got a voucher)"
    And the app's lookup ran once and its refund never

    Examples:
      | where               |
      | in memory           |
      | in a sqlite store   |

  Scenario Outline: GET /runs/{id} shows the owner a run's status and pending calls, and nobody else anything (<where>)
    Given the approvals app keeps its pauses <where>
    And "alice" has a run over HTTP paused on the refund
    When "alice" reads the paused run over HTTP
    Then the response is 200 with the status "paused" and the pending refund call with its digest
    When "bob" reads the paused run over HTTP
    Then the response is 404 with the detail of an unknown run
    When "alice" approves the refund over HTTP
    And "alice" reads the paused run over HTTP
    Then the response is 200 with the status "resumed" and no pending call
    When "bob" reads the paused run over HTTP
    Then the response is 404 with the detail of an unknown run

    Examples:
      | where               |
      | in memory           |
      | in a sqlite store   |

  Scenario: The audit names the caller the server authenticated as the decider, never a name from the body
    Given the approvals app keeps its pauses in a sqlite store
    And "alice" has a run over HTTP paused on the refund
    When "alice" posts over HTTP the decisions [{"call_id": "c2", "decision": "reject", "decided_by": "mallory"}]
    Then the response is 422 with a JSON detail saying "decisions.0.decided_by: Extra inputs are not permitted"
    When "alice" rejects the refund over HTTP because "too late for a refund"
    Then the response is 200 and the stream ends with run_finished
    And the store's audit holds one decision on the refund: "reject" by "alice", because "too late for a refund"

  Scenario: With a store, GET /runs/{id} also shows a run that never paused
    Given the approvals app keeps its pauses in a sqlite store
    And "alice" has a run over HTTP paused on the refund
    When "alice" approves the refund over HTTP
    And "alice" reads the resumed segment over HTTP
    Then the response is 200 with the status "answered" and no pending call
    When "bob" reads the resumed segment over HTTP
    Then the response is 404 with the detail of an unknown run

  Scenario: A new message on the session declines the paused run's calls: the run shows superseded, a decision is 409
    Given the approvals app keeps its pauses in a sqlite store
    And "alice" has a run over HTTP paused on the refund in session "s-1"
    When "alice" chats "Never mind, no refund" over HTTP in session "s-1"
    Then the response is 200 and the stream ends with run_finished
    When "alice" reads the paused run over HTTP
    Then the response is 200 with the status "superseded" and no pending call
    When "alice" approves the refund over HTTP
    Then the response is 409 with a JSON detail saying "a new message on its session declined its calls"
    And the app's lookup ran once and its refund never

  Scenario: A decision while another request holds the run's session is 409, and can be sent again
    Given the approvals app keeps its pauses in a sqlite store
    And "alice" has a run over HTTP paused on the refund in session "s-1"
    And another request of "alice" holds session "s-1"
    When "alice" approves the refund over HTTP
    Then the response is 409 with a JSON detail saying "is being resumed or answered by another request"
    And the app's lookup ran once and its refund never
    When the other request lets session "s-1" go
    And "alice" approves the refund over HTTP
    Then the response is 200 and the stream ends with run_finished
    And the app's lookup ran once and its refund once

  Scenario Outline: Decisions that cannot be taken are refused before anything runs: <case> (<where>)
    Given the approvals app keeps its pauses <where>
    And "alice" has a run over HTTP paused on the refund
    When <who> posts over HTTP the decisions <decisions>
    Then the response is <status> with a JSON detail saying "<detail>"
    And the response carries no X-Run-Id
    And on_usage heard of 1 segment
    And the app's lookup ran once and its refund never
    When "alice" approves the refund over HTTP
    Then the response is 200 and the stream ends with run_finished

    Examples:
      | case                       | where             | who     | decisions                                                                                   | status | detail                                                 |
      | another caller's run       | in memory         | "bob"   | [{"call_id": "c2", "decision": "approve"}]                                                  | 404    | no paused run                                          |
      | another caller's run       | in a sqlite store | "bob"   | [{"call_id": "c2", "decision": "approve"}]                                                  | 404    | no paused run                                          |
      | an unknown field           | in memory         | "alice" | [{"call_id": "c2", "decision": "approve", "tool": "lookup"}]                                | 422    | decisions.0.tool: Extra inputs are not permitted       |
      | a stale digest             | in a sqlite store | "alice" | [{"call_id": "c2", "decision": "approve", "digest": "0000"}]                                | 422    | its digest does not match                              |
      | an edit failing the schema | in memory         | "alice" | [{"call_id": "c2", "decision": "edit", "arguments": {"order": "A1", "amount": "lots"}}]     | 422    | fail the tool's schema at amount                       |
      | an edit failing the schema | in a sqlite store | "alice" | [{"call_id": "c2", "decision": "edit", "arguments": {"order": "A1", "amount": "lots"}}]     | 422    | fail the tool's schema at amount                       |
      | an unknown call            | in memory         | "alice" | [{"call_id": "c9", "decision": "approve"}]                                                  | 422    | has no pending call 'c9'                               |
      | two decisions on one call  | in a sqlite store | "alice" | [{"call_id": "c2", "decision": "approve"}, {"call_id": "c2", "decision": "reject"}]         | 409    | has two decisions                                      |
      | no decision at all         | in memory         | "alice" | []                                                                                          | 422    | no decision was given                                  |

  Scenario Outline: A decision sent again after the run resumed is 409; to another caller it is still 404 (<where>)
    Given the approvals app keeps its pauses <where>
    And "alice" has a run over HTTP paused on the refund
    When "alice" approves the refund over HTTP
    And "alice" approves the refund over HTTP
    Then the response is 409 with a JSON detail saying "was already resumed"
    When "bob" approves the refund over HTTP
    Then the response is 404 with a JSON detail saying "no paused run"
    And the app's lookup ran once and its refund once
    And on_usage heard of 2 segments: 20 + 5 tokens, then 40 + 4, under their own run ids

    Examples:
      | where               |
      | in memory           |
      | in a sqlite store   |

  Scenario Outline: GET /runs/{id} shows a run whose every call expired as expired, not paused (<where>)
    Given the approvals app keeps its pauses <where>, its calls expiring at once
    And "alice" has a run over HTTP paused on the refund
    When "alice" reads the paused run over HTTP
    Then the response is 200 with the status "expired" and no pending call

    Examples:
      | where               |
      | in memory           |
      | in a sqlite store   |

  Scenario: A decision on a call that expired is 409
    Given the approvals app keeps its pauses in memory, its calls expiring at once
    And "alice" has a run over HTTP paused on the refund
    When "alice" approves the refund over HTTP
    Then the response is 409 with a JSON detail saying "expired"

  Scenario Outline: The decisions route checks the request as /chat does: <case>
    Given the approvals app keeps its pauses in memory
    And "alice" has a run over HTTP paused on the refund
    When "alice" posts an approval of the refund over HTTP <how>
    Then the response is <status> with a JSON detail saying "<detail>"
    And the app's lookup ran once and its refund never

    Examples:
      | case                 | how                                  | status | detail                                        |
      | no caller            | without naming the caller            | 401    | a valid API key is required                   |
      | a text body          | typed "text/plain"                   | 415    | the body must be application/json             |
      | a body too large     | padded to 2000000 bytes              | 413    | request body is larger than 1000000 bytes     |
      | a foreign Host       | for the host "evil.example"          | 400    | Invalid host header                           |
      | a body that is not a list | with the body {"decisions": {"call_id": "c2"}} | 422 | decisions: Input should be a valid array |

  Scenario: /v1/chat/completions declines a gated call, never runs it, and the model reads why
    Given the approvals app keeps its pauses in memory
    When "alice" asks "Refund order A1" over HTTP through /v1/chat/completions
    Then the completion answers "Here is what happened with order A1."
    And the model's last request answers the refund call with "needs a person's approval, which is not available on this endpoint"
    And the app's lookup ran once and its refund never
    And on_usage heard of 1 segment

  Scenario: GET /sessions/{id} counts an approval turn whole: both segments' tokens and calls, the rejected call declined
    Given the approvals app keeps its pauses in a sqlite store
    And "alice" has a run over HTTP paused on the refund in session "s-1"
    When "alice" rejects the refund over HTTP because "the customer already got a voucher"
    And "alice" reads session "s-1" over HTTP
    Then the session shows 1 turn, answered, made by the paused run and its resumption
    And the turn billed 60 prompt and 9 completion tokens in 2 LLM calls, as the ledger holds for session "s-1"
    And the turn's lookup answered, and its refund was "reject" because "the customer already got a voucher"

  Scenario: A turn that waits for a person shows in GET /sessions/{id} with its pending call, and is counted whole once decided
    Given the approvals app keeps its pauses in a sqlite store
    And "alice" has a run over HTTP paused on the refund in session "s-1"
    When "alice" reads session "s-1" over HTTP
    Then the session shows 1 turn, paused on the refund call with its digest, made by the paused run
    And the turn billed 20 prompt and 5 completion tokens in 1 LLM call, as the ledger holds for session "s-1"
    And the turn's lookup answered, and its refund has no answer yet
    When "alice" approves the refund over HTTP
    And "alice" reads session "s-1" over HTTP
    Then the session shows 1 turn, answered, made by the paused run and its resumption
    And the turn billed 60 prompt and 9 completion tokens in 2 LLM calls, as the ledger holds for session "s-1"
    And the turn's lookup answered, and its refund was "approve" and answered "refunded 30 on A1"

  Scenario: A turn whose calls a new message declined is counted apart from the new message's turn
    Given the approvals app keeps its pauses in a sqlite store
    And "alice" has a run over HTTP paused on the refund in session "s-1"
    When "alice" chats "Never mind, no refund" over HTTP in session "s-1"
    And "alice" reads session "s-1" over HTTP
    Then the session shows 2 turns, the first made by the paused run alone
    And the first turn billed 20 prompt and 5 completion tokens in 1 LLM call
    And the first turn's refund was "superseded"

  Scenario: A turn that paused twice is counted whole: its three segments
    Given the approvals app keeps its pauses in a sqlite store, its model asking for a second refund
    And "alice" has a run over HTTP paused on the refund in session "s-1"
    When "alice" approves the refund over HTTP
    Then the response is 200 and the stream ends with run_paused
    When "alice" reads session "s-1" over HTTP
    Then the session shows 1 turn, paused on the second refund, made by its 2 segments
    And the turn billed 50 prompt and 8 completion tokens in 2 LLM calls, as the ledger holds for session "s-1"
    When "alice" approves the second refund over HTTP
    Then the response is 200 and the stream ends with run_finished
    When "alice" reads session "s-1" over HTTP
    Then the session shows 1 turn, answered, made by its 3 segments
    And the turn billed 90 prompt and 12 completion tokens in 3 LLM calls, as the ledger holds for session "s-1"
