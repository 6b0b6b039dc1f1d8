Feature: The API key never leaks
  The openai provider reads its API key from an environment variable. Whatever happens, the
  key appears in no log line, result, exception message or repr.

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
