Feature: A renamed key still loads, with a warning; a provider's model is never guessed
  `max_tool_rounds` is the agent's round limit, as `LoopLimits.max_tool_rounds` is in code. Its old
  name `tool_max_rounds` loads until 1.0, with a DeprecationWarning naming the new one; both names
  at once is an error naming both. Every provider but `stub` needs its `model`, and a config
  without one is refused at load time, with the config's other problems, not at the first call.

  Scenario Outline: The round limit applies under its name <key>, warned about when it is the old one
    Given warnings are recorded
    And the actor is described by this config file:
      """
      name: weather-assistant
      agent:
        provider: stub
        <key>: 1
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}, id: w1}]
          - tool_calls: [{name: get_weather, args: {city: Rome}, id: w2}]
          - text: Paris is rainy; Rome I could not check.
      """
    When the actor is asked "Weather in Paris and Rome?" in blocking mode
    Then the answer is "Paris is rainy; Rome I could not check."
    And the synthesis reason is "max_rounds"
    And the model was asked 3 times
    And the DeprecationWarnings given were: <warnings>

    Examples:
      | key             | warnings                                                                                  |
      | max_tool_rounds | none                                                                                      |
      | tool_max_rounds | agent.tool_max_rounds is deprecated, use agent.max_tool_rounds; the old name goes in 1.0 |

  Scenario: The old and the new name of the round limit together are refused, naming both
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        tool_max_rounds: 2
        max_tool_rounds: 3
        script: [{text: Hello.}]
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "(1 problem(s)) ; agent.tool_max_rounds: the deprecated name of max_tool_rounds, given together with it; keep only agent.max_tool_rounds (got 2)"

  Scenario Outline: Provider <provider> without a model is refused at load time, with the config's other problems
    Given the environment variable CLEVERACTORS_TEST_KEY holds a canary API key
    And an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: <provider>
        api_key_env: CLEVERACTORS_TEST_KEY
        colour: blue
        tools:
          - {name: get_weather, handler: "nowhere.weather:get_weather"}
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "(3 problem(s)) ; agent.model: Field required for provider '<provider>' (only provider 'stub' has a default model) ; agent.colour: unknown key ; agent.tools.0: tool 'get_weather': handler 'nowhere.weather:get_weather' cannot be imported"

    Examples:
      | provider  |
      | openai    |
      | anthropic |

  Scenario: Provider stub without a model loads, its model named "scripted"
    Given an actor config dict where agent.tools.0.description is Weather now
    When the actor is loaded from it
    Then the actor loads, with the tool get_weather declared
    And the actor's calls are recorded as stub's scripted
