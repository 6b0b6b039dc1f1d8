Feature: A stub actor replays its script from the first reply for every run
  The `stub` provider's script is one conversation. Every run of an executor (each `execute()`,
  each stream, each request of `serve`) replays it from its first reply, so the demo and the
  docs' examples work any number of times; concurrent runs each get their own replay. Within
  one run the script still never wraps around.

  Background:
    Given the stub actor file:
      """
      name: weather-assistant
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        script:
          - text: Let me look.
            tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: Paris is sunny.
      """

  Scenario Outline: Every run of one executor gets the whole script, <mode>
    When the stub actor is asked "Weather in Paris?" 3 times in <mode> mode
    Then every run answered "Paris is sunny." after 2 LLM calls
    And every run has its own run id

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: Concurrent runs each get their own replay
    When the stub actor is asked "Weather in Paris?" 5 times at once
    Then every run answered "Paris is sunny." after 2 LLM calls

  Scenario: A run that resumes a paused one goes on after the replies it already had
    The resumed segment's transcript holds the paused one's reply: replaying from the first
    reply would ask for the same call again, and pause again, forever.
    Given the stub actor file:
      """
      name: refunds
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - text: Let me look.
            tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: Paris is sunny.
      store:
        url: sqlite:///store.db
      """
    When the stub actor pauses on "Weather in Paris?", and a new executor of its file approves every call
    Then every run answered "Paris is sunny." after 1 LLM calls

  Scenario: Within one run the script still runs out rather than wrapping around
    Given the stub actor file:
      """
      name: weather-assistant
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        script:
          - text: Let me look.
            tool_calls: [{name: get_weather, args: {city: Paris}}]
      """
    When the stub actor is asked "Weather in Paris?" 2 times in blocking mode
    Then every run failed with ScriptExhaustedError "no reply left for call 2 (the script has 1)"
