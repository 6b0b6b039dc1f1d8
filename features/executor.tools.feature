Feature: The executor lists the tools its agent may call
  UIs and the CLI's `validate` ask the executor, never the agent inside it.

  Scenario: An executor lists its agent's tools in the order they were declared
    Given the actor is built in code, with get_weather as a plain function and get_time as a LangChain tool
    Then the executor lists the tools get_weather and get_time

  Scenario: An executor over an agent of your own, not an LLMAgent, lists no tools
    Given an executor over an agent of my own that is not an LLMAgent
    Then the executor lists no tools
