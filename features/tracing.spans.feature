Feature: Every run is an OpenTelemetry trace whose tokens and cost equal the bill
  An executor given a tracer provider and a meter provider (the SDK's in-memory exporter and
  reader here) makes one `invoke_agent` span per run, one `chat` span per LLM call attempt and
  one `execute_tool` span per tool call, in the GenAI semantic conventions. Each chat span
  carries its call's usage record, and the ledger row of the call names the span.

  Background:
    Given a tracer provider and a meter provider that keep what they receive, and a sampler that notes what it is shown

  Scenario Outline: A two-round tool turn in <mode> mode is a run span with its calls as children
    Given a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers
    When the actor runs "Look up the Louvre" in <mode> mode
    Then the traced run answered
    And the spans are, in the order they ended:
      | name                        | kind     | parent                      |
      | chat gpt-4o-mini            | CLIENT   | invoke_agent museum-guide   |
      | execute_tool slow_lookup    | INTERNAL | invoke_agent museum-guide   |
      | chat gpt-4o-mini            | CLIENT   | invoke_agent museum-guide   |
      | invoke_agent museum-guide   | INTERNAL | (none)                      |
    And every span was ended exactly once, and all share one trace
    And the run span has cleveractors.run.outcome "answered", the run's id and the run's totals, and no gen_ai.usage attribute
    And each chat span has gen_ai.operation.name "chat", gen_ai.provider.name "openai", gen_ai.request.model "gpt-4o-mini", gen_ai.request.stream <stream>, the server's address and port, a response model, <response id> and a finish reason
    And the sampler saw each chat span's gen_ai.operation.name "chat", gen_ai.provider.name "openai", gen_ai.request.model "gpt-4o-mini", server address and port before it was created
    And each chat span <first chunk>
    And the chat spans are rounds 1 and 2, attempt 1, purpose "round"
    And the tool span has gen_ai.tool.name "slow_lookup", gen_ai.tool.call.id "louvre" and gen_ai.tool.type "function"
    And the chat spans' usage and cost equal the result's calls and totals
    And each ledger row names the trace and the span of its chat span

    Examples:
      # langchain-openai keeps the provider's id of a streamed reply to itself: never made up.
      | mode     | stream | response id    | first chunk                                                         |
      | blocking | false  | a response id  | has no gen_ai.response.time_to_first_chunk                          |
      | events   | true   | no response id | has gen_ai.response.time_to_first_chunk, above 0 and below its span |

  Scenario: A retried call is one span per attempt, the refused one an ERROR with no usage
    Given a traced actor retrying once over a scripted OpenAI server whose first reply is refused with HTTP 503 and whose second answers
    When the actor runs "Hello" in events mode
    Then the traced run answered
    And the chat spans are attempts 1 and 2 of round 1
    And chat span 1 ended with status ERROR, error.type "503" and finish reason "error", 0 input and 0 output tokens
    And chat span 2 ended with status UNSET
    And the chat spans' usage and cost equal the result's calls and totals
    And each ledger row names the trace and the span of its chat span

  Scenario: A stream cut off mid-reply is an ERROR span carrying the estimated usage
    Given a traced actor over a scripted OpenAI server whose reply is cut off after 3 chunks
    When the actor runs "Hello" in events mode
    Then the traced run failed
    And chat span 1 ended with status ERROR and its usage flagged estimated
    And the run span ended with status ERROR, cleveractors.run.outcome "failed" and an error.type
    And every span was ended exactly once, and all share one trace
    And the chat spans' usage and cost equal the result's calls and totals

  Scenario Outline: A stop at the <position> ends every span once, the run's as an ERROR
    Given a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers slowly
    When the traced run is stopped at the <position>
    Then the result is marked cancelled
    And every span was ended exactly once, and all share one trace
    And the run span ended with status ERROR, cleveractors.run.outcome "cancelled" and an error.type
    And the chat spans' usage and cost equal the result's calls and totals
    And each ledger row names the trace and the span of its chat span

    Examples:
      | position       |
      | first text     |
      | usage recorded |
      | tool requested |
      | tool started   |
      | mid-text       |

  Scenario: Message content is off by default
    Given a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers
    When the actor runs "Look up the Louvre" in events mode
    Then no span has gen_ai.input.messages, gen_ai.output.messages, gen_ai.system_instructions or tool arguments and results

  Scenario: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT turns content on, each value capped
    Given the environment holds OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="span_only"
    And the environment holds CLEVERACTORS_OTEL_CONTENT_MAX_BYTES="200"
    And a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers
    When the actor runs "Look up the Louvre, and tell me at length about every room, every painting, every sculpture, every staircase, every courtyard and every famous visitor it ever had, from its first day as a palace to this morning" in events mode
    Then chat span 1 has gen_ai.input.messages naming "Louvre" and gen_ai.output.messages naming "slow_lookup"
    And chat span 1 has gen_ai.system_instructions
    And the tool span has its arguments and its result
    And every content attribute is at most 200 bytes and more than that is marked truncated

  Scenario: The metrics carry low-cardinality attributes and the conventions' buckets
    Given a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers
    When the actor runs "Look up the Louvre" in events mode
    Then the metric gen_ai.client.operation.duration has 2 measurements with the conventions' buckets
    And the metric gen_ai.client.token.usage sums to the result's prompt tokens as input and its completion tokens as output
    And the metric gen_ai.client.operation.time_to_first_chunk has 2 measurements with the conventions' buckets
    And the metric gen_ai.client.operation.time_to_first_chunk sums to the chat spans' gen_ai.response.time_to_first_chunk
    And the metric gen_ai.client.operation.time_per_output_chunk has 2 measurements with the conventions' buckets
    And the metric cleveractors.client.cost sums to the result's cost
    And no metric attribute names a run, a session or a user

  Scenario: Given providers that record nothing, the run answers and its ledger rows name no span
    Given an actor with a store over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers, given providers that record nothing
    When the actor runs "Look up the Louvre" in events mode
    Then the traced run answered
    And the ledger rows name no trace and no span

  Scenario: With no SDK configured the run answers and its ledger rows name no span
    Given an actor with a store over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers, and no tracer provider
    When the actor runs "Look up the Louvre" in events mode
    Then the traced run answered
    And the ledger rows name no trace and no span

  Scenario: A run in a session names it as gen_ai.conversation.id
    Given a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers
    When the actor runs "Look up the Louvre" in events mode in session "visit-1"
    Then the traced run answered
    And the run span has gen_ai.conversation.id "visit-1"

  Scenario: A tool call cancelled by a stop is an ERROR span
    Given a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and whose second answers slowly
    When the traced run is stopped at the tool started
    Then the tool span ended with status ERROR and error.type "CancelledError"
    And every span was ended exactly once, and all share one trace

  Scenario: A ledger made before spans were recorded gains their columns
    Given a ledger database at schema version 2, made before spans were recorded
    And a traced actor over a scripted OpenAI server using that ledger, whose first reply calls slow_lookup and whose second answers
    When the actor runs "Look up the Louvre" in blocking mode
    Then the traced run answered
    And each ledger row names the trace and the span of its chat span
    And the ledger database is at the current schema version

  Scenario: An exception the loop does not catch still ends every span, as an ERROR
    Given a traced actor built in code whose model raises a BaseException of its own
    When the actor runs "Hello" in blocking mode, and the BaseException escapes
    Then every span was ended exactly once, and all share one trace
    And chat span 1 is an ERROR with error.type "_Escape"
    And the run span ended with status ERROR, cleveractors.run.outcome "failed" and an error.type

  Scenario: A call kept from running by an ends_turn call is a skipped ERROR span
    Given a traced actor whose slow_lookup ends the turn, over a scripted OpenAI server whose reply calls it twice
    When the actor runs "Look up the Louvre and the Orsay" in events mode
    Then the traced run answered
    And tool span 1 ended with status UNSET and tool span 2 with status ERROR and error.type "skipped"
    And every span was ended exactly once, and all share one trace

  Scenario: Streamed runs stopped at random positions log nothing and end every span once
    Given a traced actor over a scripted OpenAI server, each conversation of which calls slow_lookup and then answers
    When 200 streamed runs are each stopped after a random number of events
    Then every span was ended exactly once, in one trace per run
    And nothing was logged about a context that could not be detached
    And each run's chat spans' usage equals its result's

  Scenario: Pruning and synthesis calls are chat spans of their purpose
    Given a traced actor that condenses tool outputs over 1 token and allows 1 tool round, over a scripted OpenAI server whose model calls slow_lookup twice
    When the actor runs "Look up the Louvre" in events mode
    Then the traced run answered
    And the chat spans' purposes are round, pruning, round, synthesis, each a child of the run span
    And the chat spans' usage and cost equal the result's calls and totals
    And each ledger row names the trace and the span of its chat span

  Scenario Outline: An SDK set as the global provider, after the executor was built, traces its runs (<provider>)
    When a fresh interpreter builds a stub executor, then sets the SDK's <provider> as the global one, and runs it
    Then that interpreter <recorded>

    Examples:
      | provider        | recorded                                          |
      | tracer provider | recorded the run's invoke_agent and chat spans    |
      | meter provider  | recorded the token usage metric and no span       |
