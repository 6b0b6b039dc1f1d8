Feature: The API key never leaks
  The openai provider reads its API key from an environment variable. Whatever happens, the
  key appears in no log line, result, exception message or repr. A config that puts a secret
  in a field is refused, and the error names the field, never the value.

  Scenario Outline: A whole failing turn leaves no trace of the API key (<mode>)
    Given the environment variable CLEVERACTORS_CANARY_KEY holds a canary API key
    And every log record is captured, down to DEBUG
    And the actor declares the demo tool get_weather
    And an openai actor whose server port is closed, reading its key from CLEVERACTORS_CANARY_KEY, with no retries
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with OpenAIConnectionError
    And last_result records the error OpenAIConnectionError with zero usage
    And the canary API key appears nowhere

    Examples:
      | mode      |
      | blocking  |
      | streaming |
      | events    |

  Scenario Outline: A config field <field> whose value looks like a secret is refused without echoing it
    Given an actor config file where <field> is <value>
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "<message names>"
    And regression: the error does not show "sk-canary-123"

    Examples:
      | field                     | value                    | message names                                             |
      | agent.api_key             | sk-canary-123            | agent.api_key: unknown key             |
      | agent.access_token        | sk-canary-123            | agent.access_token: unknown key        |
      | agent.client_secret       | sk-canary-123            | agent.client_secret: unknown key       |
      | agent.tools.0.db_password | sk-canary-123            | agent.tools.0.db_password: unknown key |
      | agent.secrets             | {openai: sk-canary-123}  | agent.secrets: unknown key             |
      | agent.api_key_env         | [sk-canary-123]          | agent.api_key_env ; Input should be a valid string        |
      | agent.token_budget        | sk-canary-123            | agent.token_budget ; Input should be a valid integer      |

  Scenario: A secret-looking key in a config dict is refused without echoing it either
    Given an actor config dict where agent.api_key is sk-canary-123
    When the actor is loaded from it
    Then loading fails with a ConfigurationError saying "<dict> ; agent.api_key: unknown key"
    And regression: the error does not show "sk-canary-123"
