Feature: A caller caps the output of each LLM call of its run (max_output_tokens)
  `execute(..., max_output_tokens=N)` (and `execute_events`, `execute_stream`; what the
  `max_tokens` of `/v1/chat/completions` becomes) binds the cap on the model for every call of
  that run, as the model's own `max_tokens`: ChatOpenAI sends it as `max_completion_tokens`. A
  cap never raises the limit the actor's config gives its model. Every scenario runs an
  `openai` actor against a scripted OpenAI server on 127.0.0.1 that calls a tool, then answers.

  Scenario Outline: Every call of a two-round turn is capped (<mode>)
    Given a capped-output actor over the wire whose model options are {}
    When the capped-output actor is run <mode> with max_output_tokens 64
    Then the capped-output server received 2 requests, each with max_completion_tokens 64

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: Without a cap a run sends none
    Given a capped-output actor over the wire whose model options are {}
    When the capped-output actor is run blocking with max_output_tokens none
    Then the capped-output server received 2 requests, each with max_completion_tokens none

  Scenario Outline: A cap never raises the model's own limit (cap <cap>, model's 200)
    Given a capped-output actor over the wire whose model options are {"max_tokens": 200}
    When the capped-output actor is run blocking with max_output_tokens <cap>
    Then the capped-output server received 2 requests, each with max_completion_tokens <sent>

    Examples:
      | cap  | sent |
      | none | 200  |
      | 50   | 50   |
      | 1000 | 200  |

  Scenario: A cap of no tokens is a mistake of the caller's
    Given a capped-output actor over the wire whose model options are {}
    Then running the capped-output actor with max_output_tokens 0 fails with ConfigurationError "max_output_tokens must be a positive number of tokens, not 0"
