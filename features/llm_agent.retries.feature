Feature: The loop retries a failed model call, and bills every attempt
  A model built from config never retries inside its client: the loop does, up to `max_retries`
  (default 2) retries of HTTP 408, 409, 429 and 5xx, connection errors, cut-off streams and
  timeouts, with exponential backoff and jitter, honouring `Retry-After`. Every attempt is a
  record in `usage_by_call` with its `attempt` and `status`: refused with an HTTP status, it
  costs 0; cut off after sending, it is estimated and flagged. A `call_retrying` event announces
  each retry. A streamed attempt that already showed the caller text is not retried.

  Background:
    Given the actor declares the demo tool get_weather
    And the actor retries a failed model call up to 2 times, backing off 0.01 s

  Scenario Outline: Two refusals, then an answer: three attempts, the refused ones costing 0 (<mode>)
    Given the actor's model replies:
      | text                        | tool calls                       | error        | status |
      |                             | get_weather#w1 {"city": "Paris"} | overloaded   | 503    |
      |                             | get_weather#w1 {"city": "Paris"} | rate limited | 429    |
      |                             | get_weather#w1 {"city": "Paris"} |              |        |
      | Paris: 18 C and light rain. |                                  |              |        |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain."
    And the model was asked 4 times
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost     |
      | round   | 1     | 1       | failed | 0        |
      | round   | 1     | 2       | failed | 0        |
      | round   | 1     | 3       | ok     | reported |
      | round   | 2     | 1       | ok     | reported |
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |
      | events    |

  Scenario Outline: HTTP <status> is retried (<mode>)
    Given the actor's model replies:
      | text                        | error             | status   |
      |                             | try again shortly | <status> |
      | Paris: 18 C and light rain. |                   |          |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain."
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost     |
      | round   | 1     | 1       | failed | 0        |
      | round   | 1     | 2       | ok     | reported |

    Examples:
      | status | mode      |
      | 408    | blocking  |
      | 409    | streaming |
      | 429    | blocking  |
      | 500    | streaming |
      | 502    | blocking  |
      | 529    | streaming |

  Scenario Outline: HTTP <status> is not retried: the error reaches the caller, costing 0 (<mode>)
    Given the actor's model replies:
      | text                        | error         | status   |
      |                             | you are wrong | <status> |
      | Paris: 18 C and light rain. |               |          |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with <error type> "you are wrong"
    And the model was asked 1 time
    And call 1 is recorded as attempt 1, failed, costing 0
    And no call was retried

    Examples:
      | status | mode      | error type                 |
      | 400    | blocking  | ModelInvalidRequestError   |
      | 400    | events    | ModelInvalidRequestError   |
      | 401    | blocking  | ModelAuthenticationError   |
      | 401    | streaming | ModelAuthenticationError   |
      | 403    | events    | ModelPermissionDeniedError |
      | 404    | blocking  | ModelNotFoundError         |

  Scenario Outline: The retries stop at max_retries, and the last error reaches the caller (<mode>)
    Given the actor's model replies:
      | text                        | error        | status |
      |                             | overloaded 1 | 503    |
      |                             | overloaded 2 | 503    |
      |                             | overloaded 3 | 503    |
      | Paris: 18 C and light rain. |              |        |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with ModelAPIError "overloaded 3"
    And the model was asked 3 times
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost |
      | round   | 1     | 1       | failed | 0    |
      | round   | 1     | 2       | failed | 0    |
      | round   | 1     | 3       | failed | 0    |
    And last_result records the error ModelAPIError

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: An actor config without max_retries retries twice
    Given the actor keeps the default max_retries, backing off 0.01 s
    And the actor's model replies:
      | text                        | error        | status |
      |                             | overloaded 1 | 500    |
      |                             | overloaded 2 | 500    |
      |                             | overloaded 3 | 500    |
      | Paris: 18 C and light rain. |              |        |
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the call failed with ModelAPIError "overloaded 3"
    And the model was asked 3 times

  Scenario: max_retries 0 never retries
    Given the actor retries a failed model call up to 0 times, backing off 0.01 s
    And the actor's model replies:
      | text                        | error      | status |
      |                             | overloaded | 503    |
      | Paris: 18 C and light rain. |            |        |
    When the actor is asked "Weather in Paris?" in events mode
    Then the call failed with ModelAPIError "overloaded"
    And the model was asked 1 time
    And no call was retried

  Scenario: Each retry is announced after the failed attempt's usage, with its reason and delay
    Given the actor's model replies:
      | text                        | tool calls                       | error        | status | retry after |
      |                             | get_weather#w1 {"city": "Paris"} | overloaded   | 503    |             |
      |                             | get_weather#w1 {"city": "Paris"} | rate limited | 429    | 1           |
      |                             | get_weather#w1 {"city": "Paris"} |              |        |             |
      | Paris: 18 C and light rain. |                                  |              |        |             |
    When the actor is asked "Weather in Paris?" in events mode
    Then the event kinds are, a run of text deltas counted once:
      | kind                |
      | run_started         |
      | round_started       |
      | usage_recorded      |
      | call_retrying       |
      | usage_recorded      |
      | call_retrying       |
      | usage_recorded      |
      | tool_call_requested |
      | tool_call_started   |
      | tool_call_finished  |
      | round_started       |
      | text_delta          |
      | usage_recorded      |
      | run_finished        |
    And the call_retrying events were:
      | round | attempt | reason   | delay   |
      | 1     | 2       | HTTP 503 | backoff |
      | 1     | 3       | HTTP 429 | 1       |
    And the usage_recorded events carry each call and the running total
    And every event survives a JSON round trip through event_adapter

  Scenario Outline: A retry's reason never shows the credentials of a URL in the error (<url>)
    Given the actor's model replies:
      | text                        | error               |
      |                             | cannot reach <url>  |
      | Paris: 18 C and light rain. |                     |
    When the actor is asked "Weather in Paris?" in events mode
    Then the answer is "Paris: 18 C and light rain."
    And the call_retrying events were:
      | round | attempt | reason                             | delay   |
      | 1     | 2       | ModelAPIError: cannot reach <told> | backoff |

    Examples:
      | url                                              | told                                 |
      | https://bob:hunter22@proxy.test/v1?key=sk-live-1 | https://***@proxy.test/v1?key=***    |
      | https://proxy.test/v1?key=sk-live-1&trace        | https://proxy.test/v1?key=***&trace  |
      | https://bob:hunter22@[proxy.test/v1              | https://***                          |

  Scenario: Retry-After as an HTTP date is honoured
    Given the actor's model replies:
      | text                        | error        | status |
      |                             | rate limited | 429    |
      | Paris: 18 C and light rain. |              |        |
    And reply 1 asks to retry at an HTTP date 2 seconds from now
    When the actor is asked "Weather in Paris?" in events mode
    Then the answer is "Paris: 18 C and light rain."
    And the call_retrying events were:
      | round | attempt | reason   | delay    |
      | 1     | 2       | HTTP 429 | up to 2  |

  Scenario Outline: A stream cut off before any text is retried, the cut attempt estimated (<mode>)
    Given the actor's model replies:
      | text                        | tool calls                       | cut off after |
      |                             | get_weather#w1 {"city": "Paris"} | 1             |
      |                             | get_weather#w1 {"city": "Paris"} |               |
      | Paris: 18 C and light rain. |                                  |               |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain."
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost     |
      | round   | 1     | 1       | failed | estimate |
      | round   | 1     | 2       | ok     | reported |
      | round   | 2     | 1       | ok     | reported |
    And call 1 is billed by an estimate of the messages sent to it
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | streaming |
      | events    |

  Scenario Outline: A stream that already showed text is not retried: its error surfaces, billed (<mode>)
    Given the actor's model replies:
      | text                                         | cut off after |
      | It is eighteen degrees with light rain today | 3             |
      | Paris: 18 C and light rain.                  |               |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with ModelConnectionError "stream cut off after 3 chunks"
    And the model was asked 1 time
    And no call was retried
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost     |
      | round   | 1     | 1       | failed | estimate |
    And the cut-off call's completion is the estimate of the text streamed before the cut

    Examples:
      | mode      |
      | streaming |
      | events    |

  Scenario Outline: <failure> is retried, the failed attempt costing <cost> (<mode>)
    Given an actor built in code, retrying once, whose model first fails with <failure>
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain."
    And the first attempt was retried, costing <cost>

    Examples: connection never made: nothing sent, nothing billed
      | failure                                                  | mode      | cost |
      | httpx.ConnectError                                       | blocking  | 0    |
      | httpx.ConnectTimeout                                     | streaming | 0    |
      | ConnectionRefusedError                                   | blocking  | 0    |
      | openai.APIConnectionError caused by ConnectionRefusedError | streaming | 0    |

    Examples: dropped or timed out after sending: the provider may have billed it
      | failure                   | mode      | cost     |
      | httpx.ReadTimeout         | blocking  | estimate |
      | httpx.RemoteProtocolError | streaming | estimate |
      | a bare TimeoutError       | blocking  | estimate |
      | ConnectionResetError      | streaming | estimate |
      | openai.APITimeoutError    | blocking  | estimate |
      | ModelTimeoutError         | streaming | estimate |

    Examples: refused with a retryable HTTP status, or a server error inside the stream
      | failure                                               | mode      | cost |
      | openai.ConflictError                                  | events    | 0    |
      | an OpenAI server_error inside the stream              | streaming | 0    |
      | an Anthropic overloaded_error event inside the stream | events    | 0    |

  Scenario Outline: <failure> is not retried
    Given an actor built in code, retrying once, whose model first fails with <failure>
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with <error type>
    And the first attempt was not retried, costing 0

    Examples:
      | failure                                    | mode      | error type |
      | ValueError                                 | blocking  | ValueError |
      | an invalid_request_error inside the stream | streaming | APIError   |

  Scenario Outline: Retry-After "<retry after>" waits <delay>
    Given the actor's model replies:
      | text                        | error        | status | retry after   |
      |                             | rate limited | 429    | <retry after> |
      | Paris: 18 C and light rain. |              |        |               |
    When the actor is asked "Weather in Paris?" in events mode
    Then the answer is "Paris: 18 C and light rain."
    And the call_retrying events were:
      | round | attempt | reason   | delay   |
      | 1     | 2       | HTTP 429 | <delay> |

    Examples:
      | retry after                     | delay   |
      | 0.2                             | 0.2     |
      | -3                              | 0       |
      | Sun, 06 Nov 1994 08:49:37 -0000 | 0       |
      | 120                             | backoff |
      | soon                            | backoff |

  Scenario Outline: Cancelling the run stops the wait before a retry at once (<mode>)
    Given the actor's model replies:
      | text                        | error        | status | retry after |
      |                             | rate limited | 429    | 30          |
      | Paris: 18 C and light rain. |              |        |             |
    When the caller's task is cancelled while the loop waits to retry, in <mode> mode
    Then the result is marked cancelled
    And the model was asked 1 time
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost |
      | round   | 1     | 1       | failed | 0    |
    And no task is left running

    Examples:
      | mode      |
      | blocking  |
      | events    |

  Scenario Outline: A negative retry setting is refused
    When a RetryPolicy is made with <setting> = -1
    Then it is refused with a ConfigurationError saying "RetryPolicy: <setting> must not be negative"

    Examples:
      | setting           |
      | max_retries       |
      | backoff_s         |
      | max_backoff_s     |
      | max_retry_after_s |
