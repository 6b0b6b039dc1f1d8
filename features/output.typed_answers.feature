Feature: A typed agent answers with a validated object, and asks again while it is invalid
  `LLMAgent(output_type=...)` takes a pydantic model, a dataclass, a TypedDict or a scalar type;
  an actor file takes `output_schema:` (JSON Schema). `result.output` is the validated object,
  `result.text` the raw text. An invalid object goes back to the model with its errors, each
  retry billed as `output_retry`; output validators may ask again with a reason. A limit still
  ends in a typed answer.

  Scenario Outline: An output type of any kind gives an instance of it, the raw text kept (<kind>, <how>)
    Given a typed agent whose output type is <kind>, in native mode, whose model replies
      | reply          |
      | answer <reply> |
    When the typed agent is asked "Weather in Paris?" <how>
    Then the typed output is <output>
    And the typed result's text is '<reply>'

    Examples:
      | kind             | reply                           | how      | output                                |
      | a pydantic model | {"name": "Paris", "temp_c": 12} | blocking | City(name='Paris', temp_c=12)         |
      | a dataclass      | {"name": "Paris", "temp_c": 12} | streamed | CityRecord(name='Paris', temp_c=12)   |
      | a TypedDict      | {"name": "Paris", "temp_c": 12} | blocking | {'name': 'Paris', 'temp_c': 12}       |
      | int              | {"response": 12}                | streamed | 12                                    |
      | list[str]        | {"response": ["a", "b"]}        | blocking | ['a', 'b']                            |
      | list[City]       | {"response": [{"name": "Paris", "temp_c": 12}]} | streamed | [City(name='Paris', temp_c=12)] |

  Scenario: In prompted mode the schema is in the system prompt, and a fenced answer is read
    Given a typed agent whose output type is a pydantic model, in prompted mode, whose model replies
      | reply                                                |
      | text ```json {"name": "Paris", "temp_c": 12} ```     |
    When the typed agent is asked "Weather in Paris?" blocking
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed model's first request holds the schema in its system prompt

  Scenario Outline: A typed answer that is not JSON, or not the output type, is sent back until it is (<how>)
    Given a typed agent in native mode with the tool get_weather, 2 output retries, whose model replies
      | reply                                    |
      | call get_weather {"city": "Paris"}       |
      | answer It is 12 C in Paris.              |
      | answer {"name": "Paris", "temp_c": "x"}  |
      | answer {"name": "Paris", "temp_c": 12}   |
    When the typed agent is asked "Weather in Paris?" <how>
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's billed calls are round, round, output_retry, output_retry
    And the typed model was asked again with "temp_c: Input should be a valid integer"

    Examples:
      | how      |
      | blocking |
      | streamed |

  Scenario: A scalar answer must come under the key "response"
    Given a typed agent whose output type is int, in tool mode, whose model replies
      | reply                 |
      | answer {"value": 12}  |
      | answer {"response": 12} |
    When the typed agent is asked "How warm?" blocking
    Then the typed output is 12
    And the typed model was asked again with "expected an object with the key 'response'"

  Scenario: A reply calling a tool beside an invalid answer: every call is answered, none run
    Given a typed agent in tool mode with the tool get_weather, 1 output retry, whose model replies
      | reply                                                            |
      | call get_weather {"city": "Paris"} ; answer {"name": "Paris"}    |
      | answer {"name": "Paris", "temp_c": 12}                           |
    When the typed agent is asked "Weather in Paris?" blocking
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's billed calls are round, output_retry
    And the typed model was asked again with "Not run: the answer was given with 'final_result'"
    And the typed model was asked again with "temp_c: Field required"

  Scenario: Each retry of a typed answer is a chat span of its own
    Given a typed agent in native mode with the tool get_weather, 1 output retry, whose model replies
      | reply                                  |
      | answer {"name": "Paris"}               |
      | answer {"name": "Paris", "temp_c": 12} |
    When the typed agent, its spans kept, is asked "Weather in Paris?"
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's chat spans' purposes are round, output_retry

  Scenario: In tool mode a text answer is asked again, the output tool forced: never ends silently
    Given a typed agent in tool mode with the tool get_weather, 1 output retry, whose model replies
      | reply                                  |
      | text It is 12 C in Paris.              |
      | answer {"name": "Paris", "temp_c": 12} |
    When the typed agent is asked "Weather in Paris?" streamed
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's billed calls are round, output_retry
    And the typed model was asked again with "You must answer by calling the tool 'final_result'"
    And the typed model's last request forced the tool final_result
    And the typed result's text is 'It is 12 C in Paris.{"name": "Paris", "temp_c": 12}'

  Scenario: With no retries allowed, the first invalid answer fails the run with what it spent
    Given a typed agent in tool mode with the tool get_weather, 0 output retries, whose model replies
      | reply                    |
      | answer {"name": "Paris"} |
    When the typed agent is asked "Weather in Paris?" streamed
    Then the typed run failed with OutputValidationError saying "temp_c: Field required"
    And the typed error keeps the last raw text '{"name": "Paris"}' and the usage of 1 calls

  Scenario Outline: An output validator asks again with its reason; its result is the output (<validator>)
    Given a typed agent in tool mode checked by <validator>, whose model replies
      | reply          |
      | answer <first> |
      | answer <then>  |
    When the typed agent is asked "Weather in Paris?" blocking
    Then the typed output is <output>
    And the typed run's billed calls are round, output_retry
    And the typed model was asked again with "<reason>"

    Examples:
      | validator          | first                            | then                            | output                          | reason                  |
      | a sync validator   | {"name": "Oslo", "temp_c": -90}  | {"name": "Oslo", "temp_c": -9}  | City(name='Oslo', temp_c=-9)    | -90 C is too cold       |
      | an async validator | {"name": "oslo", "temp_c": 3}    | {"name": "Oslo", "temp_c": 3}   | City(name='Oslo!', temp_c=3)    | capitalise the name     |

  Scenario: Retries spent in process: OutputValidationError carries the errors and every call
    Given a typed agent in tool mode with the tool get_weather, 1 output retry, whose model replies
      | reply                         |
      | text Sunny.                   |
      | text Still sunny.             |
    When the typed agent is asked "Weather in Paris?" blocking
    Then the typed run failed with OutputValidationError saying "You must answer by calling the tool 'final_result'"
    And the typed error keeps the last raw text 'Still sunny.' and the usage of 2 calls

  Scenario Outline: Max rounds and a stuck model end in a typed synthesis answer (<mode>)
    Given a typed agent in <mode> mode with the tool get_weather, max 1 tool round, whose model replies
      | reply                                  |
      | call get_weather {"city": "Paris"}     |
      | <second>                               |
      | answer {"name": "Paris", "temp_c": 12} |
    When the typed agent is asked "Weather in Paris?" streamed
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's synthesis reason is <reason>
    And the typed run's billed calls are round, round, synthesis

    Examples:
      | mode     | second                             | reason     |
      | tool     | call get_weather {"city": "Rome"}  | max_rounds |
      | native   | text                               | stuck      |
      | prompted | call get_weather {"city": "Rome"}  | max_rounds |

  Scenario: A synthesis reply that calls a tool anyway runs nothing and is asked again
    Given a typed agent in tool mode with the tool get_weather, max 1 tool round, whose model replies
      | reply                                  |
      | call get_weather {"city": "Paris"}     |
      | call get_weather {"city": "Rome"}      |
      | call get_weather {"city": "Oslo"}      |
      | answer {"name": "Paris", "temp_c": 12} |
    When the typed agent is asked "Weather in Paris?" blocking
    Then the typed output is City(name='Paris', temp_c=12)
    And the typed run's billed calls are round, round, synthesis, output_retry
    And the typed model was asked again with "You must answer by calling the tool 'final_result'"

  Scenario: An ends_turn tool's output is the typed answer too, checked like any other
    Given a typed actor file
      """
      name: typed
      agent:
        provider: stub
        output_mode: native
        output_schema: {type: object, properties: {city: {type: string}}, required: [city]}
        tools:
          - {name: pick, handler: "cleveractors.demo:get_weather", ends_turn: true}
        script:
          - tool_calls: [{name: pick, args: {city: Paris}}]
          - text: '{"city": "Paris"}'
      """
    When the typed actor file is asked "Pick a city" blocking
    Then the typed output is {'city': 'Paris'}
    And the typed run's billed calls are round, output_retry

  Scenario: An actor file's output_schema gives the parsed JSON, answered through the output tool
    Given a typed actor file
      """
      name: typed
      agent:
        provider: stub
        output_schema:
          type: object
          properties: {city: {type: string}, rain: {type: boolean}}
          required: [city, rain]
        script:
          - tool_calls: [{name: final_result, args: {city: Paris, rain: maybe}}]
          - tool_calls: [{name: final_result, args: {city: Paris, rain: true}}]
      """
    When the typed actor file is asked "Rain in Paris?" streamed
    Then the typed output is {'city': 'Paris', 'rain': True}
    And the typed run's billed calls are round, output_retry

  Scenario: An invalid output_schema is refused at load, naming the field
    Given a typed actor file
      """
      name: typed
      agent:
        provider: stub
        output_schema: {type: objekt}
        script: [{text: hi}]
      """
    When the typed actor file is asked "Hi" blocking
    Then the typed agent was refused with a ConfigurationError saying "agent.output_schema: not a valid JSON Schema"

  Scenario Outline: An output that cannot be used is refused when the agent is built (<problem>)
    When the typed agent is built with <problem>
    Then the typed agent was refused with a ConfigurationError saying "<message>"

    Examples:
      | problem                                | message                                      |
      | both an output type and a schema       | give output_type or output_schema, not both  |
      | validators but no output type          | output_validators need an output_type        |
      | an output type pydantic cannot describe | has no JSON schema                          |
      | an invalid output schema               | output_schema is not a valid JSON Schema     |
      | -1 output retries                      | output_retries must be >= 0, got -1          |
      | the output mode json                   | output_mode must be auto, native, tool or prompted, got 'json' |

  Scenario: cleveractors run --json prints the object; validate checks the schema
    Given a typed actor file
      """
      name: typed
      agent:
        provider: stub
        output_mode: native
        output_schema: {type: object, properties: {city: {type: string}}, required: [city]}
        script:
          - text: '{"city": "Paris"}'
      """
    When the typed actor file is given to "cleveractors run --json --no-stream"
    Then the typed command printed the output {"city": "Paris"}
    Given a typed actor file
      """
      name: typed
      agent:
        provider: stub
        output_schema: {type: object, required: city}
        script: [{text: hi}]
      """
    When the typed actor file is given to "cleveractors validate"
    Then the typed command failed saying "agent.output_schema: not a valid JSON Schema"

  Scenario Outline: Partial objects stream as output_delta events that only grow, the last the output (<mode>)
    Given a typed agent in <mode> mode whose model streams a City with 40 notes
    When the typed agent's events are read for "Weather in Paris?"
    Then the typed run streamed at least <partials> partial objects, each extending the one before
    And the typed run's last output delta is its output, and the only final one

    Examples:
      | mode     | partials |
      | native   | 5        |
      | prompted | 5        |
      | tool     | 5        |

  Scenario: A wrapped answer streams as partial values of the type itself
    Given a typed agent whose output type is list[str], in native mode, whose model replies
      | reply |
      | answer {"response": ["item number 0", "item number 1", "item number 2", "item number 3", "item number 4", "item number 5", "item number 6", "item number 7", "item number 8", "item number 9", "item number 10", "item number 11", "item number 12", "item number 13", "item number 14", "item number 15", "item number 16", "item number 17", "item number 18", "item number 19", "item number 20", "item number 21", "item number 22", "item number 23", "item number 24", "item number 25", "item number 26", "item number 27", "item number 28", "item number 29", "item number 30", "item number 31", "item number 32", "item number 33", "item number 34", "item number 35", "item number 36", "item number 37", "item number 38", "item number 39"]} |
    When the typed agent's events are read for "Forty items?"
    Then the typed run streamed at least 3 partial objects, each extending the one before
    And the typed run's last output delta is its output, and the only final one

  Scenario: Each turn may carry its own schema, whatever schemas came before
    Given a typed agent whose output type is a dict, in native mode, whose model replies
      | reply |
      | answer {"field_0": 0} |
      | answer {"field_1": 1} |
      | answer {"field_2": 2} |
      | answer {"field_3": 3} |
      | answer {"field_4": 4} |
      | answer {"field_5": 5} |
      | answer {"field_6": 6} |
      | answer {"field_7": 7} |
      | answer {"field_8": 8} |
      | answer {"field_9": 9} |
      | answer {"field_10": 10} |
      | answer {"field_11": 11} |
      | answer {"field_12": 12} |
      | answer {"field_13": 13} |
      | answer {"field_14": 14} |
      | answer {"field_15": 15} |
      | answer {"field_16": 16} |
      | answer {"field_17": 17} |
      | answer {"field_18": 18} |
      | answer {"field_19": 19} |
      | answer {"field_20": 20} |
      | answer {"field_21": 21} |
      | answer {"field_22": 22} |
      | answer {"field_23": 23} |
      | answer {"field_24": 24} |
      | answer {"field_25": 25} |
      | answer {"field_26": 26} |
      | answer {"field_27": 27} |
      | answer {"field_28": 28} |
      | answer {"field_29": 29} |
      | answer {"field_30": 30} |
      | answer {"field_31": 31} |
      | answer {"field_32": 32} |
      | answer {"field_33": 33} |
      | answer {"field_34": 34} |
      | answer {"field_35": 35} |
      | answer {"field_36": 36} |
      | answer {"field_37": 37} |
      | answer {"field_38": 38} |
      | answer {"field_39": 39} |
      | answer {"field_40": 40} |
      | answer {"field_41": 41} |
      | answer {"field_42": 42} |
      | answer {"field_43": 43} |
      | answer {"field_44": 44} |
      | answer {"field_45": 45} |
      | answer {"field_46": 46} |
      | answer {"field_47": 47} |
      | answer {"field_48": 48} |
      | answer {"field_49": 49} |
      | answer {"field_50": 50} |
      | answer {"field_51": 51} |
      | answer {"field_52": 52} |
      | answer {"field_53": 53} |
      | answer {"field_54": 54} |
      | answer {"field_55": 55} |
      | answer {"field_56": 56} |
      | answer {"field_57": 57} |
      | answer {"field_58": 58} |
      | answer {"field_59": 59} |
      | answer {"field_60": 60} |
      | answer {"field_61": 61} |
      | answer {"field_62": 62} |
      | answer {"field_63": 63} |
      | answer {"field_64": 64} |
      | answer {"field_65": 65} |
      | answer {"field_66": 66} |
      | answer {"field_67": 67} |
      | answer {"field_68": 68} |
      | answer {"field_69": 69} |
      | answer {"field_0": 0} |
    When the typed agent is asked 70 times, each turn typed by a schema of its own
    Then every typed turn answered in its own schema
