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

  Scenario Outline: Called past the callback machinery, ChatOpenAI replies as ainvoke and astream do (<reply>)
    With nothing listening the loop calls the integration's `_agenerate` and `_astream` itself
    (no callback manager, no chunk kept): the reply, and every streamed chunk, must be the one
    `ainvoke` and `astream` give, id aside (a run id, or the server's per-request id).
    Given a ChatOpenAI on a scripted OpenAI server that replies <reply>, twice per way of asking
    When it is asked once through ainvoke and once past it, with the weather tool bound
    Then both replies are the same, id aside
    When it is asked once through astream and once past it, with the weather tool bound
    Then both streams send the same chunks, id aside, and fold to the same reply

    Examples:
      | reply                                                                 |
      | {"text": "Sunny and warm."}                                           |
      | {"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]} |

  Scenario Outline: A ChatOpenAI the loop cannot call directly, or with a rate limiter, replies as through the public path (<settings>)
    A cache, v1 output, stop words and a bound config take the public path; a rate limiter is
    waited for on the direct path as `ainvoke` and `astream` wait for it.
    Given a ChatOpenAI with <settings> on a scripted OpenAI server that replies {"text": "Sunny and warm."}, twice per way of asking
    When it is asked once through ainvoke and once past it, with the weather tool bound
    Then both replies are the same, id aside
    When it is asked once through astream and once past it, with the weather tool bound
    Then both streams send the same chunks, id aside, and fold to the same reply

    Examples:
      | settings                                 |
      | {"rate_limiter_rps": 1000}               |
      | {"output_version": "v1"}                 |
      | {"bound": {"stop": ["never"]}}           |
      | {"config": {"tags": ["a-tag"]}}          |

  Scenario: A model with a cache is asked through ainvoke, and its cache answers again
    Given a ChatOpenAI with {"cache": "in_memory"} on a scripted OpenAI server that replies {"text": "Sunny and warm."}, twice per way of asking
    When it is asked twice past ainvoke, with the weather tool bound
    Then the server was asked once

  Scenario: A listening callback handler makes the loop take the public path
    Given a ChatOpenAI on a scripted OpenAI server that replies {"text": "Hi there."}, twice per way of asking
    And a callback handler on the model
    When it is asked once past ainvoke and once past astream, with the weather tool bound
    Then the handler saw both calls start and end

  Scenario: Told to, the openai SDK's stream yields each chunk as the JSON the server sent
    `ChunksAsSent` sets the SDK stream's private `_cast_to` to `object` before it is read.
    Given a scripted OpenAI server that replies {"text": "Sunny and warm."} to every request
    When the openai SDK streams a reply through ChunksAsSent
    Then every chunk is a dict, and their text is "Sunny and warm."
    And a reply it does not stream is a ChatCompletion as before
    And a copy of it streams dicts too
