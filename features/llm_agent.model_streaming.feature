Feature: Every chat model streams or falls back cleanly, and both modes send the same requests
  Blocking mode appends the provider's own reply to the transcript; streaming mode appends the
  fold of the streamed chunks, which is that same reply (thinking blocks with their signatures,
  redacted thinking, metadata, usage details). A model whose astream() falls back to one whole
  message (streaming disabled) still works under execute_stream(). A model that streams inside
  ainvoke (streaming=True) is streamed by the loop in blocking mode too, so that a cut-off is
  billed and broken tool arguments never reach a tool, as in streaming mode.

  Scenario Outline: Round 2 carries round 1's reply exactly as ainvoke returns it (<mode>)
    Given the actor's model streams like langchain-anthropic: it thinks, calls get_weather, answers
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the answer is "Paris: 18 C and light rain."
    And the model's request 2 carries its first reply exactly as ainvoke returns it
    And that reply starts with its thinking block and exact signature, then the redacted thinking

    Examples:
      | mode      |
      | blocking  |
      | streaming |
      | events    |

  Scenario Outline: A model that does not stream answers execute_stream() in one chunk (<setting>)
    Given the actor declares the demo tool get_weather
    And the actor's model is built with <setting>
    And the actor's model replies:
      | text                        | tool calls                       | prompt tokens | completion tokens |
      |                             | get_weather#w1 {"city": "Paris"} | 113           | 17                |
      | Paris: 18 C and light rain. |                                  | 151           | 9                 |
    When the actor is asked "Weather in Paris?" in streaming mode
    Then the answer is "Paris: 18 C and light rain."
    And the stream yielded one chunk: "Paris: 18 C and light rain."
    And no request to the model was streamed
    And the reported tokens are what the model reported for each call
    And no estimate is flagged

    Examples:
      | setting                          |
      | disable_streaming=True           |
      | disable_streaming="tool_calling" |

  Scenario Outline: A model streaming inside ainvoke never runs a tool on broken arguments (<mode>)
    Given the actor declares the demo tool get_weather
    And the actor's model is built with streaming=True
    And the actor's model replies:
      | text                              | tool calls                                                                 | args chunk |
      |                                   | get_weather#w1 {"city": "Paris"} ; get_weather#w2 {"city": "Rome", "oops": | 5          |
      | Paris is rainy; Rome I can't say. |                                                                            |            |
    When the actor is asked "Weather in Paris and Rome?" in <mode> mode
    Then the answer is "Paris is rainy; Rome I can't say."
    And the handlers ran in this order:
      | tool        | arguments         |
      | get_weather | {"city": "Paris"} |
    And the model's request 2 carries an error for call w2 mentioning "arguments are not valid JSON"
    And the tool call w2 is recorded as an error
    And every request to the model was streamed

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A model streaming inside ainvoke, cut off mid-answer, is billed an estimate (<mode>)
    Given the actor declares the demo tool get_weather
    And the actor's model is built with streaming=True
    And the actor's model replies:
      | text                                         | tool calls                       | cut off after |
      |                                              | get_weather#w1 {"city": "Paris"} |               |
      | It is eighteen degrees with light rain today |                                  | 3             |
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with ModelConnectionError "stream cut off after 3 chunks"
    And call 1 is billed exactly what the model reported
    And call 2 is billed by an estimate of the messages sent to it
    And the cut-off call's completion is the estimate of the text streamed before the cut
    And last_result is the call's own result

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A stream cut off after its thinking bills the thinking it received (<mode>)
    Given the actor's model streams like langchain-anthropic and is cut off after 7 chunks
    When the actor is asked "Weather in Paris?" in <mode> mode
    Then the call failed with ModelConnectionError "stream cut off after 7 chunks"
    And the cut-off call's completion is the estimate of the thinking and text streamed before it
    And last_result is the call's own result

    Examples:
      | mode      |
      | streaming |
      | events    |

  Scenario Outline: A stream that mixes chunks and a whole message is refused, naming what came
    When a stream of <pieces> is folded
    Then folding fails with TypeError "chat model streamed <second> after <first>; expected AIMessageChunks, or one whole AIMessage"

    Examples:
      | pieces                          | second         | first             |
      | a chunk, then a whole AIMessage | AIMessage      | 1 chunks          |
      | a whole AIMessage, then a chunk | AIMessageChunk | a whole AIMessage |
