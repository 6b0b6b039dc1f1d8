Feature: Limits end in a synthesis answer, never a hang or a canned apology
  When the model still asks for tools after the last allowed round, when the token budget is
  spent, or when it replies with neither text nor tool calls, the loop asks it once more to
  answer from what was gathered, calling no tools. When the transcript holds tool calls, that
  request still declares the tools (providers reject tool blocks without them) with tool_choice
  "none"; a call the model makes anyway is not run. That call is counted like any other, and
  the result says which limit was hit.

  Background:
    Given the actor declares the demo tool get_weather

  Scenario Outline: After the last allowed tool round, the synthesis answers (<mode>)
    Given the actor allows at most 1 tool round
    And the actor's model replies:
      | text                                       | tool calls                       |
      |                                            | get_weather#w1 {"city": "Paris"} |
      |                                            | get_weather#w2 {"city": "Rome"}  |
      | Paris is rainy; Rome I could not check.    |                                  |
    When the actor is asked "Weather in Paris and Rome?" in <mode> mode
    Then the answer is "Paris is rainy; Rome I could not check."
    And the synthesis reason is "max_rounds"
    And the last request to the model declared the tools get_weather with tool_choice "none"
    And the handlers ran in this order:
      | tool        | arguments         |
      | get_weather | {"city": "Paris"} |
    And every tool call the model made is answered by exactly one tool message
    And the LLM calls were made for:
      | purpose   | round |
      | round     | 1     |
      | round     | 2     |
      | synthesis | 2     |
    And the reported tokens are what the model reported for each call
    And every scripted reply was used

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: When the token budget is spent, the synthesis answers (<mode>)
    Given the actor has a token budget of 30
    And the actor's model replies:
      | text                        | tool calls                       | prompt tokens | completion tokens |
      |                             | get_weather#w1 {"city": "Paris"} | 25            | 10                |
      | Paris: 18 C and light rain. |                                  | 40            | 6                 |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain."
    And the synthesis reason is "budget"
    And the tokens spent before the synthesis reached the budget of 30
    And the last request to the model declared the tools get_weather with tool_choice "none"
    And the LLM calls were made for:
      | purpose   | round |
      | round     | 1     |
      | synthesis | 1     |
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A budget that is not reached changes nothing
    Given the actor has a token budget of 10000
    And the actor's model replies:
      | text                        | tool calls                       |
      |                             | get_weather#w1 {"city": "Paris"} |
      | Paris: 18 C and light rain. |                                  |
    When the actor is asked "Weather in Paris?" in blocking mode
    Then the answer is "Paris: 18 C and light rain."
    And the answer is no synthesis
    And every request to the model had the tools get_weather bound

  Scenario Outline: A model stuck in tool-only mode gets the synthesis prompt (<mode>)
    Given the actor's model replies:
      | text                              | tool calls                       |
      |                                   | get_weather#w1 {"city": "Paris"} |
      |                                   |                                  |
      | It is 18 C with light rain there. |                                  |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "It is 18 C with light rain there."
    And the synthesis reason is "stuck"
    And the last request to the model declared the tools get_weather with tool_choice "none"
    And the LLM calls were made for:
      | purpose   | round |
      | round     | 1     |
      | round     | 2     |
      | synthesis | 2     |
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A model stuck before calling any tool gets a synthesis request without tools
    Given the actor's model replies:
      | text               | tool calls |
      |                    |            |
      | Paris, I believe.  |            |
    When the actor is asked "Capital of France?" in blocking mode
    Then the answer is "Paris, I believe."
    And the synthesis reason is "stuck"
    And the last request to the model had no tools bound

  Scenario Outline: A tool call in the synthesis reply is not run; the reply's text is the answer (<mode>)
    Given the actor allows at most 1 tool round
    And the actor's model replies:
      | text                             | tool calls                       |
      |                                  | get_weather#w1 {"city": "Paris"} |
      |                                  | get_weather#w2 {"city": "Rome"}  |
      | Paris is rainy; Rome is unknown. | get_weather#w3 {"city": "Rome"}  |
    When the actor is asked "Weather in Paris and Rome?" in <mode> mode
    Then the answer is "Paris is rainy; Rome is unknown."
    And the synthesis reason is "max_rounds"
    And the synthesis reply's calls of get_weather were ignored
    And the handlers ran in this order:
      | tool        | arguments         |
      | get_weather | {"city": "Paris"} |
    And every scripted reply was used

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A synthesis reply with tool calls and no text answers with a fixed message (<mode>)
    Given the actor allows at most 1 tool round
    And the actor's model replies:
      | text | tool calls                                                       |
      |      | get_weather#w1 {"city": "Paris"}                                 |
      |      | get_weather#w2 {"city": "Rome"}                                  |
      |      | get_weather#w3 {"city": "Rome"} ; get_weather#w4 {"city": "Oslo"} |
    When the actor is asked "Weather in Paris and Rome?" in <mode> mode
    Then the answer is the fixed message for a synthesis without an answer
    And the synthesis reply's calls of get_weather, get_weather were ignored
    And the handlers ran 1 time

    Examples:
      | mode      |
      | blocking  |
      | streaming |
      | events    |

  Scenario Outline: The synthesis request forbids tool calls in the configured provider's own words (<provider>)
    Given the actor allows at most 1 tool round
    And the actor's model stands in for "<model>" of <provider>
    And the actor's model replies:
      | text                             | tool calls                       |
      |                                  | get_weather#w1 {"city": "Paris"} |
      |                                  | get_weather#w2 {"city": "Rome"}  |
      | Paris is rainy; Rome is unknown. |                                  |
    When the actor is asked "Weather in Paris and Rome?" in blocking mode
    Then the answer is "Paris is rainy; Rome is unknown."
    And the last request to the model declared the tools get_weather with tool_choice <choice>
    And every call was recorded under provider <provider>

    Examples:
      | provider         | model                                     | choice           |
      | openai           | gpt-4o                                    | "none"           |
      | anthropic        | claude-sonnet-4-20250514                  | {"type": "none"} |
      | bedrock_converse | anthropic.claude-3-5-sonnet-20240620-v1:0 | null             |

  Scenario Outline: An agent built in code speaks the provider it names, else its model's (<named>, traced as <traced>)
    The provider is resolved once, when the agent is built: the one it is given, else the one
    its model is traced under (`ls_provider`). It names and prices the calls, and it chooses the
    words of the synthesis request's tool_choice.
    Given an agent built in code with the demo tool get_weather, at most 1 tool round and <named>, around a model traced as <traced> that replies:
      | text                             | tool calls                       |
      |                                  | get_weather#w1 {"city": "Paris"} |
      |                                  | get_weather#w2 {"city": "Rome"}  |
      | Paris is rainy; Rome is unknown. |                                  |
    When the actor is asked "Weather in Paris and Rome?" in blocking mode
    Then the answer is "Paris is rainy; Rome is unknown."
    And the last request to the model declared the tools get_weather with tool_choice <choice>
    And every call was recorded under provider <provider>

    Examples:
      | named                | traced         | choice           | provider       |
      | provider="anthropic" | openai         | {"type": "none"} | anthropic      |
      | provider="openai"    | anthropic      | "none"           | openai         |
      | no provider          | anthropic      | {"type": "none"} | anthropic      |
      | no provider          | amazon_bedrock | null             | amazon_bedrock |

  Scenario: A model whose bind_tools refuses tool_choice gets the tools declared without it
    Given the actor allows at most 1 tool round
    And the actor's model is built with a bind_tools refusing tool_choice
    And the actor's model replies:
      | text                             | tool calls                       |
      |                                  | get_weather#w1 {"city": "Paris"} |
      |                                  | get_weather#w2 {"city": "Rome"}  |
      | Paris is rainy; Rome is unknown. |                                  |
    When the actor is asked "Weather in Paris and Rome?" in blocking mode
    Then the answer is "Paris is rainy; Rome is unknown."
    And the last request to the model declared the tools get_weather with tool_choice null
