Feature: The private langchain-core API we rely on still behaves as we rely on it
  cleveractors calls two private methods of langchain-core's `BaseChatModel`, each from one
  function of `cleveractors._langchain_private`:
  - `_get_ls_params()`: the provider and model an integration is traced under. An agent built in
    code without a provider reads its provider (prices, the synthesis tool_choice) and its model
    name from it.
  - `_should_stream(async_api=True, **bound options)`: whether `ainvoke` would stream and fold
    the reply itself. The loop then streams the call with its own fold instead, so a cut-off is
    billed and broken tool arguments stay broken.
  These scenarios call them directly: a langchain-core upgrade that changes them fails here.

  Scenario Outline: An integration is traced under its provider and its model's name (<integration> <settings>)
    Given a <integration> built offline with <settings>
    Then langchain-core traces it as provider "<provider>" and model "<model>"

    Examples:
      | integration   | settings                                                      | provider  | model             |
      | ChatOpenAI    | {"model": "gpt-4o-mini"}                                      | openai    | gpt-4o-mini       |
      | ChatOpenAI    | {"model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1"} | openai    | gpt-4o-mini       |
      | ChatAnthropic | {"model": "claude-sonnet-4-5"}                                | anthropic | claude-sonnet-4-5 |

  Scenario Outline: ainvoke streams by itself only for a model built to stream (<integration> <settings>)
    Given a <integration> built offline with <settings>
    Then langchain-core's ainvoke streams by itself: <alone>; with tools bound: <with tools>

    Examples:
      | integration   | settings                                                                         | alone | with tools |
      | ChatOpenAI    | {"model": "gpt-4o-mini"}                                                         | no    | no         |
      | ChatOpenAI    | {"model": "gpt-4o-mini", "streaming": false}                                     | no    | no         |
      | ChatOpenAI    | {"model": "gpt-4o-mini", "streaming": true}                                      | yes   | yes        |
      | ChatOpenAI    | {"model": "gpt-4o-mini", "streaming": true, "disable_streaming": true}           | no    | no         |
      | ChatOpenAI    | {"model": "gpt-4o-mini", "streaming": true, "disable_streaming": "tool_calling"} | yes   | no         |
      | ChatAnthropic | {"model": "claude-sonnet-4-5", "streaming": true}                                | yes   | yes        |
      | ChatAnthropic | {"model": "claude-sonnet-4-5"}                                                   | no    | no         |

  Scenario: The copy of a model an agent runs still streams by itself when its original did
    An agent runs a copy of its model with streamed usage turned on; `_should_stream` reads
    `streaming` only if it was set explicitly (`model_fields_set`), which the copy must keep.
    Given a ChatOpenAI built offline with {"model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1", "streaming": true}
    When an LLMAgent is built around it
    Then the agent runs a copy of it with streamed usage on
    And langchain-core's ainvoke streams by itself for the agent's model: yes; with tools bound: yes
