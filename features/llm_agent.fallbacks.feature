Feature: Fallback models take over a call the agent's model gave up on
  `fallback_models` are tried in order when a model's retries are spent on an error a retry may
  fix, or at once on an error listed as immediate (by default HTTP 529, `overloaded_error` and
  HTTP 429 `insufficient_quota`). Never after text of that call reached the caller. Every
  attempt is a record priced at its own model; the result and the events name the model that
  answered and those it fell back from. A run stays on the model that answered; with
  `sticky: session` so does its session.

  Background:
    Given an actor whose model "first" fails and whose fallback is "second":
      """
      name: fallbacks
      agent:
        provider: stub
        model: first
        max_retries: 1
        retry_backoff_s: 0
        pricing: {input_per_mtok: 1, output_per_mtok: 2}
        tool_output_max_tokens: 20
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - {name: long_report, handler: "cleveractors.demo:long_report"}
        script:
          - {error: unavailable, error_status: 503}
          - {error: unavailable, error_status: 503}
        fallback_models:
          - provider: stub
            model: second
            pricing: {input_per_mtok: 3, output_per_mtok: 15}
            script:
              - tool_calls: [{name: get_weather, args: {city: Paris}}]
              - text: Paris is rainy.
      """

  Scenario Outline: The retries spent, the fallback answers the same call and the next round (<mode>)
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris is rainy."
    And the calls were made to:
      | model  | round | attempt | status |
      | first  | 1     | 1       | failed |
      | first  | 1     | 2       | failed |
      | second | 1     | 1       | ok     |
      | second | 2     | 1       | ok     |
    And every call is priced at its own model's prices, the refused ones at 0
    And the run was answered by "second", falling back from "first"

    Examples:
      | mode      |
      | blocking  |
      | streaming |
      | events    |

  Scenario: The events say which model took over, and why
    When the actor is asked "Weather in Paris?" in events mode
    Then the model_fell_back events were:
      | round | from  | to     | reason   | immediate |
      | 1     | first | second | HTTP 503 | false     |
    And the model_fell_back event came after the last failed attempt's usage_recorded

  Scenario: Each attempt's chat span names its model; the fallback's first names the one it took over from
    Given a tracer provider and a meter provider that keep what they receive, and a sampler that notes what it is shown
    And the actor is traced
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the chat spans were:
      | request model | attempt | fell back from |
      | first         | 1       |                |
      | first         | 2       |                |
      | second        | 1       | first          |
      | second        | 1       |                |

  Scenario Outline: HTTP <status> <type> moves on at once, without a retry
    Given the first model fails with HTTP <status> of type "<type>"
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the answer is "Paris is rainy."
    And the calls were made to:
      | model  | round | attempt | status |
      | first  | 1     | 1       | failed |
      | second | 1     | 1       | ok     |
      | second | 2     | 1       | ok     |

    Examples:
      | status | type               |
      | 529    | overloaded_error   |
      | 429    | insufficient_quota |

  Scenario: Errors listed as immediate are configurable
    Given the first model fails with HTTP 401 of type "invalid_api_key"
    And the actor falls back at once on:
      """
      [{status: 401}]
      """
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the answer is "Paris is rainy."
    And the run was answered by "second", falling back from "first"

  Scenario: An error a retry cannot fix, and not listed as immediate, fails the run as today
    Given the first model fails with HTTP 400 of type "invalid_request_error"
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the call failed with ModelInvalidRequestError "unavailable"
    And the calls were made to:
      | model | round | attempt | status |
      | first | 1     | 1       | failed |

  Scenario: A failure after streamed text never falls back
    Given the first model shows "Partly answered" and is then cut off
    When the actor is asked "Weather in Paris?" in streaming mode
    Then the call failed with ModelConnectionError
    And the calls were made to:
      | model | round | attempt | status |
      | first | 1     | 1       | failed |

  Scenario: The fallback's pruning and synthesis calls are its own
    Given the fallback's script is:
      """
      - tool_calls: [{name: long_report, args: {topic: Paris}}]
      - text: Paris, condensed.
      - tool_calls: [{name: get_weather, args: {city: Paris}}]
      - text: From what I have, Paris is rainy.
      """
    And the actor allows at most 1 tool round
    When the actor is asked "Tell me about Paris." in blocking mode
    Then the answer is "From what I have, Paris is rainy."
    And the LLM calls were made for:
      | purpose   | round |
      | round     | 1     |
      | round     | 1     |
      | round     | 1     |
      | pruning   | 1     |
      | round     | 2     |
      | synthesis | 2     |
    And the run was answered by "second", falling back from "first"

  Scenario: Budgets count the calls of every model
    Given the first model's script is:
      """
      - {tool_calls: [{name: get_weather, args: {city: Paris}}], prompt_tokens: 10, completion_tokens: 10}
      - {error: unavailable, error_status: 503}
      - {error: unavailable, error_status: 503}
      """
    And the fallback's script is:
      """
      - {text: not asked}  # a stub starts a run's script after the turn's replies so far
      - {tool_calls: [{name: get_weather, args: {city: Rome}}], prompt_tokens: 10, completion_tokens: 10}
      - {text: Paris is rainy; Rome I could not check., prompt_tokens: 5, completion_tokens: 5}
      """
    And the actor has a token budget of 30
    When the actor is asked "Weather in Paris and Rome?" in blocking mode
    Then the synthesis reason is "budget"
    And the calls were made to:
      | model  | round | attempt | status |
      | first  | 1     | 1       | ok     |
      | first  | 2     | 1       | failed |
      | first  | 2     | 2       | failed |
      | second | 2     | 1       | ok     |
      | second | 2     | 1       | ok     |

  Scenario Outline: A session <does> on the model that answered its last message (sticky: <sticky>)
    Given the actor keeps sessions in a fresh SQLite store, sticky "<sticky>"
    When the actor is asked "Weather in Paris?" in session "s1"
    And the actor is asked "And tomorrow?" in session "s1"
    Then the second message's calls were made to <calls>

    Examples:
      | sticky  | does          | calls                        |
      | session | stays         | second, second               |
      | run     | does not stay | first, first, second, second |

  Scenario: A transcript carried to another provider loses that provider's thinking, keeps its tool call ids
    Given an agent in code on a model of provider "anthropic" refused with HTTP 529, falling back to a scripted model of provider "openai"
    When it is asked "And Rome?" after an Anthropic turn with thinking, a tool call "toolu_paris" and its result
    Then the anthropic model was sent the turn's thinking blocks as written
    And the openai model was sent the turn without thinking or redacted thinking, its text and tool call "toolu_paris" kept
    And the tool result answering "toolu_paris" was sent to both

  Scenario: An agent handed the conversation after a fallback starts on its own model
    Given an agent in code on a model of provider "anthropic" refused with HTTP 529, falling back to a scripted model of provider "openai" that hands the conversation to "billing"
    When the agent is asked "I need a refund."
    Then the answer of the agent is "Billing here."
    And the agent's calls went to "claude-sonnet-4-5, gpt-4o-mini, billing-model"

  Scenario: A session whose last reply came from a model the agent no longer has starts on the agent's model
    Given an agent in code on a model of provider "anthropic" refused with HTTP 529, falling back to a scripted model of provider "openai"
    And the agent keeps a session on the model that answered
    When it is asked "And Rome?" after a reply of "openai:retired-model"
    Then the anthropic model was asked first

  Scenario: Fallback models are checked like the agent's model, every problem at once
    Given an actor config dict with these fallback models:
      """
      - {provider: anthropic}
      - {provider: stub}
      - {provider: openai, model: gpt-4o-mini, script: []}
      - {provider: stub, script: [{tool_calls: [{name: nope}]}]}
      """
    And the config's fallback moves on at once on "[{}]"
    When the actor is loaded from it
    Then loading fails with a ConfigurationError saying "agent.fallback.immediate.0: Value error, give a status, a code or both ; agent.fallback_models.0.model: Field required for provider 'anthropic' ; agent.fallback_models.1.script: provider 'stub' needs a 'script' ; agent.fallback_models.2.script: 'script' is only for provider 'stub' ; agent.fallback_models.3.script.0.tool_calls.0.name: calls 'nope'"

  Scenario: A fallback's missing API key is named by its position
    Given an actor config dict with these fallback models:
      """
      - {provider: anthropic, model: claude-sonnet-4-5, api_key_env: FALLBACK_KEY_NOT_SET}
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError saying "agent.fallback_models.0.api_key_env: environment variable 'FALLBACK_KEY_NOT_SET' is not set"

  Scenario: A cost budget needs every model's price
    Given an agent in code with a cost budget, falling back to a model of unknown price
    Then building it fails with ConfigurationError naming "agent.fallback_models.0.cost_budget_usd"
