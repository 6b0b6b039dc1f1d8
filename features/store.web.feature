@store
Feature: Stored sessions over the web router
  With a store, `POST /chat` takes a `session_id` instead of a history: the server keeps the
  conversation, `GET /sessions/{id}` shows it (whole turns, tool calls included) and
  `DELETE /sessions/{id}` removes it. A session exists from its first run's start: until a run
  answers in it, it shows no turns. A session belongs to its caller: to anyone else it does not
  exist (404, the same answer as for an id nobody used). The requests below go through the app's
  ASGI interface in process; robot/store.robot does the same over real HTTP.

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
