Feature: Typed answers over the real wires, in every mode, blocking and streamed alike
  `ChatOpenAI` and `ChatAnthropic` against the scripted servers on 127.0.0.1: the actor's tools
  run first, the typed answer comes last, and a streamed run sends the same requests as a
  blocking one. An answer that fails validation is sent back with its errors, each retry its
  own billed call, and the server's bill and ours agree.

  Scenario Outline: <provider> in <mode> mode: tool rounds, then the typed answer, the same requests either way
    Given a <provider> typed actor in <mode> mode, with the tool get_weather, whose server replies
      | reply                                  |
      | call get_weather {"city": "Paris"}     |
      | answer {"name": "Paris", "temp_c": 12} |
    When the typed actor is asked "Weather in Paris?" blocking, then streamed
    Then both typed runs answered City(name='Paris', temp_c=12) with the billed calls round, round
    And the typed server got the same requests from both runs, asking <how>

    Examples:
      | provider  | mode     | how                                        |
      | openai    | native   | with response_format json_schema, strict   |
      | openai    | tool     | with the tool final_result                 |
      | openai    | prompted | with the schema in the system prompt       |
      | openai    | auto     | with response_format json_schema, strict   |
      | anthropic | native   | with output_config.format json_schema      |
      | anthropic | tool     | with the tool final_result                 |
      | anthropic | prompted | with the schema in the system prompt       |

  Scenario Outline: An invalid answer, then a valid one: exactly two billed calls and a valid object (<mode>, <how>)
    Given a openai typed actor in <mode> mode, without tools, whose server replies
      | reply                                  |
      | answer {"name": "Paris"}               |
      | answer {"name": "Paris", "temp_c": 12} |
    When the typed actor is asked "Weather in Paris?" <how>
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's billed calls are round, output_retry
    And the typed server billed the same 2 calls as the run
    And the typed retry request told the model "temp_c: Field required"

    Examples:
      | mode   | how      |
      | native | blocking |
      | native | streamed |
      | tool   | blocking |
      | tool   | streamed |

  Scenario: Retries spent: OutputValidationError with the errors, the raw text and every attempt's usage
    Given a anthropic typed actor in native mode, with 1 output retry, whose server replies
      | reply                    |
      | answer {"name": "Paris"} |
      | answer {"name": "Rome"}  |
    When the typed actor is asked "Weather in Paris?" streamed
    Then the typed run failed with OutputValidationError saying "temp_c: Field required"
    And the typed error keeps the last raw text '{"name": "Rome"}' and the usage of 2 calls
    And the typed server billed the same 2 calls as the run

  Scenario: A run stopped by its token budget still answers with a valid object
    Given a openai typed actor in tool mode, with the tool get_weather and a token budget 1, whose server replies
      | reply                                  |
      | call get_weather {"city": "Paris"}     |
      | answer {"name": "Paris", "temp_c": 12} |
    When the typed actor is asked "Weather in Paris?" streamed
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's synthesis reason is budget
    And the typed run's billed calls are round, synthesis

  Scenario: ChatOpenAI on the Responses API asks for text.format and answers with the object
    Given a typed agent on ChatOpenAI's Responses API, in auto mode, whose API answers '{"name": "Paris", "temp_c": 12}'
    When the typed agent is asked "Weather in Paris?" blocking
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed Responses API request asked for text.format json_schema City, strict

  Scenario Outline: Partial objects stream over the wire as output_delta events (<provider>, <mode>)
    Given a <provider> typed actor in <mode> mode, answering a City with notes, whose server replies
      | reply |
      | answer {"name": "Paris", "temp_c": 12, "notes": ["note 0 about the rain", "note 1 about the rain", "note 2 about the rain", "note 3 about the rain", "note 4 about the rain", "note 5 about the rain", "note 6 about the rain", "note 7 about the rain", "note 8 about the rain", "note 9 about the rain", "note 10 about the rain", "note 11 about the rain", "note 12 about the rain", "note 13 about the rain", "note 14 about the rain", "note 15 about the rain", "note 16 about the rain", "note 17 about the rain", "note 18 about the rain", "note 19 about the rain", "note 20 about the rain", "note 21 about the rain", "note 22 about the rain", "note 23 about the rain", "note 24 about the rain", "note 25 about the rain", "note 26 about the rain", "note 27 about the rain", "note 28 about the rain", "note 29 about the rain"]} |
    When the typed agent's events are read for "Weather notes for Paris?"
    Then the typed run streamed at least 5 partial objects, each extending the one before
    And the typed run's last output delta is its output, and the only final one

    Examples:
      | provider  | mode   |
      | openai    | native |
      | openai    | tool   |
      | anthropic | native |
      | anthropic | tool   |
