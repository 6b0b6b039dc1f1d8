@streaming
Feature: A streamed model call that stops sending chunks is ended by the loop's stall limit
  `stream_stall_timeout_s` (default 120 s): a streamed call that sends no chunk for that long,
  from the request to its first chunk or between two chunks, is ended with `StreamStalledError`
  (a `TimeoutError`) naming the limit, the model and the chunks received. It is billed like any
  cut-off call and retried like any timeout: only when it had not yet shown the caller text. A
  slow stream that keeps sending is never cut, and a stop during a stall stays a stop. The loop's
  limit replaces the client's own per-chunk timeout, which is turned off.

  Background:
    Given the actor declares the demo tool get_weather
    And the actor retries a failed model call up to 2 times, backing off 0.01 s
    And the actor ends a streamed call after 0.3 s without a chunk

  Scenario Outline: A stall after text was shown ends the run, the call billed by estimate (<mode>)
    Given the actor's model replies:
      | text                                         | stall after | stall |
      | It is eighteen degrees with light rain today | 3           | 30    |
      | Paris: 18 C and light rain.                  |             |       |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with StreamStalledError "model 'scripted' sent no stream chunk for 0.3 s (stream_stall_timeout_s) after 3 chunks"
    And the model was asked 1 time
    And no call was retried
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost     |
      | round   | 1     | 1       | failed | estimate |
    And the stalled call's completion is the estimate of the text streamed before the stall
    And last_result records the error StreamStalledError
    And no task is left running

    Examples:
      | mode      |
      | streaming |
      | events    |

  Scenario: A stall before any text is retried like a timeout, the stalled attempt estimated
    Given the actor's model replies:
      | text                        | tool calls                       | stall after | stall |
      |                             | get_weather#w1 {"city": "Paris"} | 0           | 30    |
      |                             | get_weather#w1 {"city": "Paris"} |             |       |
      | Paris: 18 C and light rain. |                                  |             |       |
    When the actor is asked "Weather in Paris?" in events mode
    Then the answer is "Paris: 18 C and light rain."
    And the attempts were recorded as:
      | purpose | round | attempt | status | cost     |
      | round   | 1     | 1       | failed | estimate |
      | round   | 1     | 2       | ok     | reported |
      | round   | 2     | 1       | ok     | reported |
    And call 1 is billed by an estimate of the messages sent to it
    And the call_retrying events were:
      | round | attempt | reason                                                                                                                        | delay   |
      | 1     | 2       | StreamStalledError: model 'scripted' sent no stream chunk for 0.3 s (stream_stall_timeout_s) after 0 chunks; the call was ended | backoff |

  Scenario Outline: A slow stream that keeps sending is not cut, however long it takes in all (<mode>)
    Given the actor ends a streamed call after 0.6 s without a chunk
    And the actor's model replies:
      | text                                                      | delay |
      | Paris has eighteen degrees and light rain this afternoon. | 0.1   |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris has eighteen degrees and light rain this afternoon."
    And the model was asked 1 time
    And no call was retried
    And the reply came in chunks whose pauses add up to more than the stall limit

    Examples:
      | mode      |
      | streaming |
      | events    |

  Scenario: A caller that reads slowly is no stall: time the run waits for its reader does not count
    Given the actor's model answers in 300 words at once
    When a caller reads one event, then nothing for 1 s, then the rest
    Then the reader got the whole answer of 300 words from one call

  Scenario Outline: A stop during a stall is a stop, not a stall, and is not retried (<mode>)
    Given the actor ends a streamed call after 5 s without a chunk
    And the actor's model replies:
      | text                        | stall after | stall |
      | Paris: 18 C and light rain. | 0           | 30    |
      | Paris: 18 C and light rain. |             |       |
    When the caller's task is cancelled while the model is answering, in <mode> mode
    Then the result is marked cancelled
    And the model was asked 1 time
    And the attempts were recorded as:
      | purpose | round | attempt | status    | cost     |
      | round   | 1     | 1       | cancelled | estimate |
    And no task is left running

    Examples:
      | mode      |
      | streaming |
      | events    |

  Scenario: A stop that the model's library swallowed during a stall is still a stop
    When the caller stops a run whose model stalls and swallows the stop, with a 0.5 s stall limit
    Then the stopped run and its call are marked cancelled, not stalled

  Scenario: A blocking call is not watched for stalls: its client's request timeout bounds it
    Given the actor's model replies:
      | text                        | delay |
      | Paris: 18 C and light rain. | 0.5   |
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the answer is "Paris: 18 C and light rain."
    And no call was retried

  Scenario Outline: ChatOpenAI's own per-chunk timeout gives way to the loop's stall limit (<loop limit>)
    When an agent is built in code around ChatOpenAI(stream_chunk_timeout=7) with the loop's stall limit <loop limit>
    Then the agent's ChatOpenAI has stream_chunk_timeout <client timeout>

    Examples:
      | loop limit | client timeout |
      | 120        | None           |
      | None       | 7.0            |

  Scenario: With the loop's limit off, the client's own per-chunk timeout rules
    When an agent built in code around ChatOpenAI(stream_chunk_timeout=0.3), without the loop's stall limit, streams a reply that stalls for 3 s
    Then the call failed with StreamChunkTimeoutError "No streaming chunk received for 0.3s"

  Scenario: An actor config built ChatOpenAI reads chunks without the client's per-chunk timeout
    When an actor config with provider openai is loaded
    Then the agent's ChatOpenAI has stream_chunk_timeout None

  Scenario Outline: A stall limit that is not a positive number of seconds is refused (<value>)
    When LoopLimits is made with stream_stall_timeout_s = <value>
    Then it is refused with a ConfigurationError saying "LoopLimits: stream_stall_timeout_s must be positive or None, got <value>"

    Examples:
      | value |
      | 0.0   |
      | -1.5  |
