@store
Feature: Stored sessions and idempotency keys over the web router
  With a store, `POST /chat` takes a `session_id` instead of a history: the server keeps the
  conversation, `GET /sessions/{id}` shows it (whole turns, tool calls included) and
  `DELETE /sessions/{id}` removes it. A session exists from its first run's start: until a run
  answers in it, it shows no turns. A session belongs to its caller: to anyone else it does not
  exist (404, the same answer as for an id nobody used). A request sent again under its
  `Idempotency-Key` header gets the first run's answer back, with its X-Run-Id, and is not billed
  again; a key still running is 409, another request's key 422, in each route's error format.
  The requests below go through the app's ASGI interface in process; robot/store.robot does the
  same over real HTTP.

  Background:
    Given a web actor that looks the weather up, then answers, with a fresh sqlite store

  Scenario: The server keeps the session's history, and on_usage still hears of every run
    When the client chats "Weather in Paris?" on session "s-1"
    And the client chats "And tomorrow?" on session "s-1"
    Then both chats finished
    And GET /sessions/s-1 shows the turns "Weather in Paris?" and "And tomorrow?"
    And each turn shows the get_weather call, its result and the answer
    And each turn holds the text its run showed and the usage on_usage heard for that run
    And on_usage was called once per chat, with the tokens the ledger holds for session "s-1"

  Scenario: A history sent beside a session id is refused
    When the client posts to /chat a session id "s-1" and a history
    Then the response is 422 naming "session_id"

  Scenario: Another caller's session does not exist for them
    Given caller "alice" chatted "Weather in Paris?" on session "s-alice"
    When caller "bob" reads session "s-alice"
    Then the response is 404 naming "s-alice"
    When caller "bob" deletes session "s-alice"
    Then the response is 404 naming "s-alice"
    When caller "alice" reads session "s-alice"
    Then the response is 200
    When caller "alice" deletes session "s-alice"
    Then the response is 204
    When caller "alice" reads session "s-alice"
    Then the response is 404 naming "s-alice"

  Scenario: A session shows no turns until a run answers in it; an id nobody used is 404
    Given another worker's first run on the web actor's session "s-new" is under way
    When the client reads session "s-new"
    Then the response is 200 with no turns
    When the client reads session "s-unused"
    Then the response is 404 naming "s-unused"

  Scenario: A session whose first run failed shows no turns, to its caller only
    Given caller "alice" started session "s-failed" with a run that failed
    When caller "alice" reads session "s-failed"
    Then the response is 200 with no turns
    When caller "bob" reads session "s-failed"
    Then the response is 404 naming "s-failed"

  Scenario: A server without a store keeps no sessions
    Given the web actor has no store
    When the client posts to /chat a session id "s-1" and no history
    Then the response is 422 naming "--store"
    When caller "alice" reads session "s-1"
    Then the response is 404 naming "s-1"

  Scenario Outline: A response names its run in X-Run-Id, the id its result and the ledger carry (<route>)
    When the client asks "Weather in Paris?" through <route>
    Then the response's X-Run-Id is the run id on_usage heard, and the ledger's rows carry it

    Examples:
      | route                                |
      | /chat                                |
      | /chat on session "s-9"               |
      | /v1/chat/completions                 |
      | /v1/chat/completions, streamed       |

  Scenario Outline: A request sent again under its Idempotency-Key is answered from the store (<route>)
    When under key "k-1" the client asks "Weather in Paris?" through <route>
    And under key "k-1" another worker is asked "Weather in Paris?" through <route>
    Then the second response is 200 and replays the first: the same X-Run-Id, text and usage
    And on_usage heard of the first run only
    And the second request's worker never asked its model
    And the ledger holds the calls of the first response's run, and no other

    Examples:
      | route                                |
      | /chat                                |
      | /chat on session "s-9"               |
      | /v1/chat/completions                 |
      | /v1/chat/completions, streamed       |

  Scenario Outline: Another request under a used Idempotency-Key is refused in the route's error format (<route>)
    When under key "k-1" the client asks "Weather in Paris?" through <route>
    And under key "k-1" another worker is asked "Weather in Rome?" through <route>
    Then the second response is 422 naming "Idempotency-Key" in the format of <route>
    And on_usage heard of the first run only
    And the second request's worker never asked its model

    Examples:
      | route                                |
      | /chat                                |
      | /v1/chat/completions                 |
      | /v1/chat/completions, streamed       |

  Scenario Outline: A request under an Idempotency-Key whose run is still going is 409 (<route>)
    Given the web actor answers slowly
    When while a worker answers "Weather in Paris?" under key "k-1" through /chat, another worker is asked the same through <route>
    Then the second response is 409 naming "Idempotency-Key" in the format of <route>
    And on_usage heard of the first run only
    And the second request's worker never asked its model

    Examples:
      | route                                |
      | /chat                                |
      | /v1/chat/completions                 |
      | /v1/chat/completions, streamed       |

  Scenario Outline: A run that failed frees its Idempotency-Key: the retry runs anew, billed on its own (<route>)
    Given the first worker's model refuses every request
    When under key "k-1" the client asks "Weather in Paris?" through <route>
    And under key "k-1" another worker is asked "Weather in Paris?" through <route>
    Then the first response told the failure
    And the second response is 200 with a run of its own, billed on its own
    When under key "k-1" another worker is asked "Weather in Paris?" through <route>
    Then the last response is 200 and replays the second response's run

    Examples:
      | route                                |
      | /chat                                |
      | /v1/chat/completions                 |
      | /v1/chat/completions, streamed       |

  Scenario Outline: An Idempotency-Key on a server without a store is refused, naming the fix (<route>)
    Given the web actor has no store
    When under key "k-1" the client asks "Weather in Paris?" through <route>
    Then the response is 422 naming "Idempotency-Key" and "--store" in the format of <route>
    And the web actor's model was never asked

    Examples:
      | route                                |
      | /chat                                |
      | /v1/chat/completions                 |
      | /v1/chat/completions, streamed       |

  Scenario Outline: An empty or overlong Idempotency-Key is refused (<length> characters, <route>)
    When under a key of <length> characters the client asks "Weather in Paris?" through <route>
    Then the response is 422 naming "Idempotency-Key" and "1 to 255 characters" in the format of <route>
    And the web actor's model was never asked

    Examples:
      | length | route                  |
      | 0      | /chat                  |
      | 256    | /v1/chat/completions   |

  Scenario: An authenticated caller's Idempotency-Key is theirs alone
    Given the web app authenticates its callers by their X-Caller header
    When under key "k-1" caller "alice" asks "Weather in Paris?" through /chat
    And under key "k-1" caller "bob" asks another worker "Weather in Paris?" through /chat
    Then the second response is 200 with a run of its own, billed on its own
    When under key "k-1" caller "alice" asks another worker "Weather in Paris?" through /chat
    Then the last response is 200 and replays the first response's run
