Feature: The tool loop runs every call the model asks for, round after round
  An LLM agent binds its tools on every round, runs each call of a reply in the model's order,
  answers every call id with one tool message, and asks the model again once per batch, until
  the model answers in text. Blocking and streaming calls run the same loop. Calls the provider
  sent without ids are named by their position, so each is still answered once.

  Background:
    Given the actor declares the demo tools get_weather and get_time

  Scenario Outline: A reply without tool calls is the answer (<mode>)
    Given the actor's model replies:
      | text                                     |
      | Paris is the capital of France, of course. |
    When the actor is asked "What is the capital of France?" in <mode> mode
    Then the answer is "Paris is the capital of France, of course."
    And no tool ran
    And the model was asked 1 time
    And every request to the model had the tools get_weather and get_time bound
    And the run took 1 round
    And the reported tokens are what the model reported for each call
    And no estimate is flagged

    Examples:
      | mode            |
      | blocking        |
      | streaming       |
      | agent blocking  |
      | agent streaming |

  Scenario Outline: Two tool rounds, then the answer, billed for all three calls (<mode>)
    Given the actor's model replies:
      | text                                 | tool calls                        |
      |                                      | get_weather#w1 {"city": "Paris"}  |
      | Now the local time.                  | get_time#t1 {"city": "Paris"}     |
      | Paris: 18 C and light rain at 14:05. |                                   |
    When the actor is asked "Weather and time in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain at 14:05."
    And the handlers ran in this order:
      | tool        | arguments         |
      | get_weather | {"city": "Paris"} |
      | get_time    | {"city": "Paris"} |
    And the model's request 2 carries the tool results:
      | call id | status  | content                 |
      | w1      | success | Paris: 18 C, light rain |
    And the model's request 3 carries the tool results:
      | call id | status  | content                            |
      | w1      | success | Paris: 18 C, light rain            |
      | t1      | success | {"city": "Paris", "time": "14:05"} |
    And every request to the model had the tools get_weather and get_time bound
    And the run took 3 rounds
    And the prompt tokens are the sum of the prompt tokens the model reported for its 3 calls
    And the reported tokens are what the model reported for each call
    And the LLM calls were made for:
      | purpose | round |
      | round   | 1     |
      | round   | 2     |
      | round   | 3     |

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: Three calls in one reply, the same tool twice, all run in the model's order (<mode>)
    Given the actor's model replies:
      | text                                        | tool calls                                                                                |
      |                                             | get_weather#w1 {"city": "Paris"} ; get_weather#w2 {"city": "Rome"} ; get_time#t1 {"city": "Rome"} |
      | Rainy in Paris; sunny in Rome, at 14:05.    |                                                                                           |
    When the actor is asked "Weather in Paris and Rome, and the time in Rome?" in <mode> mode
    Then the answer is "Rainy in Paris; sunny in Rome, at 14:05."
    And the handlers ran in this order:
      | tool        | arguments         |
      | get_weather | {"city": "Paris"} |
      | get_weather | {"city": "Rome"}  |
      | get_time    | {"city": "Rome"}  |
    And the model was asked 2 times
    And the model's request 2 answers the calls w1, w2 and t1 with one tool message each, in that order
    And the model's request 2 carries the tool results:
      | call id | status  | content                           |
      | w1      | success | Paris: 18 C, light rain           |
      | w2      | success | Rome: 24 C, sunny                 |
      | t1      | success | {"city": "Rome", "time": "14:05"} |
    And an INFO log line names the agent "weather-assistant" and the tools get_weather, get_weather and get_time, in that order
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: The system prompt and the conversation so far reach the model before the message
    Given the actor has the system prompt "You are a concise assistant."
    And the actor's model replies:
      | text                 |
      | Still rainy, sorry.  |
    When the actor is asked "And tomorrow?" after this conversation, in blocking mode:
      | role      | content                   |
      | user      | Weather in Paris?         |
      | assistant | Light rain, 18 C.         |
    Then the answer is "Still rainy, sorry."
    And the model's request 1 holds these messages:
      | type   | text                         |
      | system | You are a concise assistant. |
      | human  | Weather in Paris?            |
      | ai     | Light rain, 18 C.            |
      | human  | And tomorrow?                |
    And the reported tokens are what the model reported for each call

  Scenario: An agent built in code runs plain functions and LangChain tools
    Given the actor's model replies:
      | text                          | tool calls                                                      |
      |                               | get_weather#w1 {"city": "Oslo"} ; get_time#t1 {"city": "Oslo"}  |
      | Snowing in Oslo; it is 14:05. |                                                                 |
    And the actor is built in code, with get_weather as a plain function and get_time as a LangChain tool
    When the actor is asked "Weather and time in Oslo?" in streaming mode
    Then the answer is "Snowing in Oslo; it is 14:05."
    And the tool calls are recorded as:
      | call id | name        | status | output                           |
      | w1      | get_weather | ok     | Oslo: 3 C, snow                  |
      | t1      | get_time    | ok     | {"city": "Oslo", "time": "14:05"} |
    And every request to the model had the tools get_weather and get_time bound
    And the reported tokens are what the model reported for each call

  Scenario: Earlier turns may carry their text as content parts
    Given the actor's model replies:
      | text                |
      | Still rainy, sorry. |
    When the actor is asked "And tomorrow?" with the history [{"role": "user", "content": [{"type": "text", "text": "Weather for Paris?"}]}, {"role": "assistant", "content": "Light rain."}] in blocking mode
    Then the answer is "Still rainy, sorry."
    And the model's request 1 holds these messages:
      | type  | text              |
      | human | Weather for Paris? |
      | ai    | Light rain.        |
      | human | And tomorrow?      |
    And the reported tokens are what the model reported for each call

  Scenario Outline: Tool calls without ids get distinct ids, each answered once (<mode>)
    Given the actor's model replies:
      | text                                | tool calls                                              |
      |                                     | get_weather {"city": "Paris"} ; get_weather {"city": "Rome"} |
      | Paris is rainy and Rome is sunny.   |                                                         |
    And regression: the actor is built in code, its model leaving out tool call ids, with:
      | name        | handler     |
      | get_weather | get_weather |
    When the actor is asked "Weather in Paris and Rome?" in <mode> mode
    Then the answer is "Paris is rainy and Rome is sunny."
    And the model's request 2 answers the calls call_unnamed_0 and call_unnamed_1 with one tool message each, in that order
    And every tool call the model made is answered by exactly one tool message
    And the tool calls are recorded as:
      | call id        | name        | status | output                  |
      | call_unnamed_0 | get_weather | ok     | Paris: 18 C, light rain |
      | call_unnamed_1 | get_weather | ok     | Rome: 24 C, sunny       |

    Examples:
      | mode      |
      | blocking  |
      | streaming |
