@streaming
Feature: execute_stream() streams every round token by token, at no extra cost
  Each round is one streamed request with tools bound: text the model writes before its tool
  calls and the final answer both reach the caller as the provider sends them, and the bill is
  the same as blocking. `stream_tool_rounds: false` runs tool rounds blocking and yields the
  final answer as one chunk, for providers that cannot stream tool calls.

  Scenario: Without tools, the answer streams word by word with the same counts as blocking
    Given the actor's model replies:
      | text                                                   |
      | Paris is the capital of France and its largest city.   |
    When "What is the capital of France?" is sent blocking to one actor and streamed to an identical one
    Then the stream yielded the text of every reply, word by word
    And the blocking and the streamed run report the same tokens and calls
    And the reported tokens are what the model reported for each call
    And every request to the model was streamed

  Scenario: With tools, the text of every round streams word by word
    Given the actor declares the demo tool get_weather
    And the actor's model replies:
      | text                                  | tool calls                       | args chunk |
      | Let me check the weather first.       | get_weather#w1 {"city": "Paris"} | 4          |
      | It is 18 C with light rain in Paris.  |                                  |            |
    When "Weather in Paris?" is sent blocking to one actor and streamed to an identical one
    Then the stream yielded the text of every reply, word by word
    And every request to the model was streamed
    And every request to the model had the tools get_weather bound
    # Once for the blocking run, once for the streamed one: the streamed fragments of the
    # arguments were put back together into the same call.
    And the handlers ran in this order:
      | tool        | arguments         |
      | get_weather | {"city": "Paris"} |
      | get_weather | {"city": "Paris"} |
    And the blocking and the streamed run report the same tokens and calls
    And the reported tokens are what the model reported for each call

  Scenario: With stream_tool_rounds false, the final answer comes as one chunk, for the same requests
    Given the actor declares the demo tool get_weather
    And the actor does not stream tool rounds
    And the actor's model replies:
      | text                                  | tool calls                       |
      | Let me check the weather first.       | get_weather#w1 {"city": "Paris"} |
      | It is 18 C with light rain in Paris.  |                                  |
    When the actor is asked "Weather in Paris?" in streaming mode
    Then the stream yielded one chunk: "It is 18 C with light rain in Paris."
    And no request to the model was streamed
    And every scripted reply was used
    And the model was asked 2 times
    And the reported tokens are what the model reported for each call

  Scenario: With stream_tool_rounds false, an agent without tools still streams word by word
    Given the actor does not stream tool rounds
    And the actor's model replies:
      | text                                         |
      | Paris is the capital of France, of course.   |
    When the actor is asked "What is the capital of France?" in streaming mode
    Then the stream yielded the text of every reply, word by word
    And every request to the model was streamed

  Scenario: With stream_tool_rounds false, the synthesis answer still streams
    Given the actor declares the demo tool get_weather
    And the actor does not stream tool rounds
    And the actor allows at most 1 tool round
    And the actor's model replies:
      | text                                   | tool calls                       |
      |                                        | get_weather#w1 {"city": "Paris"} |
      |                                        | get_weather#w2 {"city": "Rome"}  |
      | Paris is rainy; Rome I could not check. |                                 |
    When the actor is asked "Weather in Paris and Rome?" in streaming mode
    Then the answer is "Paris is rainy; Rome I could not check."
    And the stream yielded the text of every reply, word by word
    And the synthesis reason is "max_rounds"
