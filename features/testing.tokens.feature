Feature: Token estimates work offline, without tiktoken's encoding
  When a provider reports no usage, the token counter estimates it. It uses tiktoken's
  o200k_base only if the encoding is already cached and never downloads it during a run; without
  it, about four characters make a token, and it says so in the log. The prompt estimate counts
  what OpenAI documents: each message's text and framing, and the arguments of tool calls.

  Scenario: An empty text costs nothing
    Given the token counter has an empty cache folder
    Then the token counter counts an empty text as 0 tokens

  Scenario Outline: Without a cached encoding, about four characters make a token (<cache>)
    Given the token counter has <cache>
    Then the token counter counts each text as a quarter of its characters, rounded up:
      | text                          |
      | a                             |
      | four                          |
      | fives                         |
      | What is the weather in Paris? |
    And the token counter logged at INFO that it estimates, saying "o200k_base is not cached"

    Examples:
      | cache                 |
      | an empty cache folder |
      | caching turned off    |

  Scenario: A cache entry tiktoken cannot read falls back to the estimate, with a warning
    Given the token counter finds a folder under o200k_base's cache key, with downloads blocked
    Then the token counter counts each text as a quarter of its characters, rounded up:
      | text                          |
      | What is the weather in Paris? |
    And the token counter logged at WARNING that it estimates, saying "unusable"
    And the token counter downloaded nothing

  Scenario: A damaged cached encoding falls back to the estimate, and is never downloaded mid-run
    Given the token counter finds a damaged o200k_base file in its cache folder, with downloads blocked
    Then the token counter counts each text as a quarter of its characters, rounded up:
      | text                          |
      | What is the weather in Paris? |
    And the token counter logged at WARNING that it estimates, saying "unusable"
    And the token counter downloaded nothing
    And the token counter left the damaged file in its cache folder

  Scenario: The arguments of an assistant's tool calls count towards the prompt estimate
    Given the token counter has an empty cache folder
    When the token counter estimates a conversation whose assistant message calls get_weather with {"city": "Paris", "unit": "celsius"}
    Then the token counter's estimate exceeds the same conversation without the call by the arguments
    And the token counter's estimate is each message's text plus 3 tokens, plus 3

  Scenario Outline: A chat model that returns no AIMessage fails the run with a TypeError, billing nothing (<mode>)
    Given a chat model that answers with plain text instead of an AIMessage, given the tool get_weather
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with TypeError "chat model returned str, not an AIMessage"
    And last_result records the error TypeError with zero usage
    And the model was never asked

    Examples:
      | mode      |
      | blocking  |
      | streaming |
