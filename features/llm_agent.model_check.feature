Feature: An agent built in code is given a LangChain chat model, or says what it was given
  `LLMAgent` drives a `BaseChatModel`: it binds its tools, streams and reads usage itself. A
  runnable made from a chat model (`with_structured_output()`, `bind_tools()`, `bind()`), a
  model's name or any other object is refused when the agent is built, with a
  `ConfigurationError` naming the type given and what is expected, instead of an
  `AttributeError` from deep inside LangChain on the first message.

  Scenario Outline: <given> is refused, naming its type
    When an LLMAgent named "checked" is built from <given>
    Then building failed with a ConfigurationError naming the agent and the type it was given
    And the error says "model must be a LangChain chat model (a BaseChatModel, such as ChatOpenAI or ChatAnthropic)"
    And the error says "<hint>"

    Examples:
      | given                                                   | hint                                                                       |
      | a chat model's with_structured_output(a pydantic model) | pass the chat model itself (the agent binds its own tools)                 |
      | a chat model with tools bound                           | with_structured_output(), bind_tools() and bind() return runnables         |
      | the model name "gpt-4o-mini"                            | to use the model 'gpt-4o-mini', build its chat model, e.g. ChatOpenAI(model=...) |
      | None                                                    | not builtins.NoneType                                                      |

  Scenario: A chat model is accepted and answers
    When an LLMAgent named "checked" is built from a scripted chat model
    Then the agent answers "Hello." to "Hi"
