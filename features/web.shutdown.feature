Feature: A server shutting down ends every stream with its route's terminal event, and bills it
  When `cleveractors serve` is stopped (SIGTERM, Ctrl-C), uvicorn stops accepting, waits for the
  running requests up to the grace period, then cancels the rest. A cancelled stream still ends
  with the route's own terminal event, telling the client the server shut down
  (`ServerShuttingDown`: the turn may be sent again), and its run is billed once: the app closes
  the store only after the last run has settled. The server below is uvicorn in process, stopped
  as its signal handler stops it; robot/signals.robot sends SIGTERM to a real `serve`.

  Scenario Outline: A stream cancelled at the end of the grace period ends with its terminal event, billed once (<route>)
    Given an actor with a store is served by uvicorn with a grace period of 0.2 seconds
    When a stream on <route> is in flight when the server shuts down
    Then the stream's last events hold <ending>
    And the served actor's on_usage heard of 1 run, of 27 tokens, cancelled
    And the served actor's ledger bills 1 run, of 27 tokens

    Examples:
      | route                | ending                                                                |
      | /chat                | event: run_failed, "type":"ServerShuttingDown"                        |
      | /v1/chat/completions | "type":"api_error", "code":"ServerShuttingDown"                       |
      | /ai-sdk              | "type":"error","errorText":"ServerShuttingDown:, "finishReason":"error" |
      | /ag-ui               | "type":"RUN_ERROR", "code":"ServerShuttingDown"                       |

  Scenario: A stream that ends within the grace period is not cut, and is billed once
    Given an actor with a store is served by uvicorn with a grace period of 30 seconds
    When a stream on /chat is in flight when the server shuts down
    Then the stream's last events hold event: run_finished, "total_tokens":35
    And the served actor's on_usage heard of 1 run, of 35 tokens, answered
    And the served actor's ledger bills 1 run, of 35 tokens
