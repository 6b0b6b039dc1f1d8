Feature: A failing tool call becomes an error the model reads; the turn goes on
  A handler that raises, a call that times out, arguments that are not valid JSON or do not
  match the tool's schema, a tool that was never declared: each becomes an error tool message
  for that call id, logged at WARNING with the tool name and call id, and the model is asked
  again. An undeclared tool runs nothing.

  Background:
    Given the actor declares these tools:
      | name          | handler       | timeout s |
      | get_weather   | get_weather   |           |
      | broken_lookup | broken_lookup |           |
      | slow_lookup   | slow_lookup   | 0.05      |

  Scenario Outline: A call with <failure> is answered with an error and the loop goes on (<mode>)
    Given the actor's model replies:
      | text                              | tool calls |
      |                                   | <call>     |
      | Sorry, I could not find that out. |            |
    When the actor is asked "Look it up, please." in <mode> mode
    Then the answer is "Sorry, I could not find that out."
    And the model's request 2 carries an error for call c1 mentioning "<error>"
    And the tool call c1 is recorded as an error
    And a WARNING log line names the tool <tool> and the call c1
    And the handlers ran <runs> times
    And the model was asked 2 times
    And the reported tokens are what the model reported for each call

    Examples: Failures, blocking
      | failure             | mode     | tool           | call                                                | runs | error                                                                    |
      | a handler exception | blocking | broken_lookup  | broken_lookup#c1 {"query": "Paris"}                 | 1    | raised LookupError: lookup backend unavailable for 'Paris'               |
      | a timeout           | blocking | slow_lookup    | slow_lookup#c1 {"query": "Paris", "seconds": 30}    | 1    | timed out after 0.05s                                                    |
      | invalid JSON        | blocking | get_weather    | get_weather#c1 {"city": "Par                        | 0    | arguments are not valid JSON                                             |
      | non-object JSON     | blocking | get_weather    | get_weather#c1 ["Paris"]                            | 0    | arguments are not valid JSON (not a JSON object)                         |
      | a schema mismatch   | blocking | get_weather    | get_weather#c1 {"city": 42}                         | 0    | do not match the schema at city: 42 is not of type 'string'              |
      | a missing argument  | blocking | get_weather    | get_weather#c1 {"town": "Paris"}                    | 0    | 'city' is a required property                                            |
      | an undeclared tool  | blocking | launch_rockets | launch_rockets#c1 {"target": "Moon"}                | 0    | unknown tool 'launch_rockets'; the declared tools are: get_weather, broken_lookup, slow_lookup |

    Examples: Failures, streaming
      | failure             | mode      | tool           | call                                                | runs | error                                                                    |
      | a handler exception | streaming | broken_lookup  | broken_lookup#c1 {"query": "Paris"}                 | 1    | raised LookupError: lookup backend unavailable for 'Paris'               |
      | a timeout           | streaming | slow_lookup    | slow_lookup#c1 {"query": "Paris", "seconds": 30}    | 1    | timed out after 0.05s                                                    |
      | invalid JSON        | streaming | get_weather    | get_weather#c1 {"city": "Par                        | 0    | arguments are not valid JSON                                             |
      | non-object JSON     | streaming | get_weather    | get_weather#c1 ["Paris"]                            | 0    | arguments are not valid JSON (not a JSON object)                         |
      | a schema mismatch   | streaming | get_weather    | get_weather#c1 {"city": 42}                         | 0    | do not match the schema at city: 42 is not of type 'string'              |
      | a missing argument  | streaming | get_weather    | get_weather#c1 {"town": "Paris"}                    | 0    | 'city' is a required property                                            |
      | an undeclared tool  | streaming | launch_rockets | launch_rockets#c1 {"target": "Moon"}                | 0    | unknown tool 'launch_rockets'; the declared tools are: get_weather, broken_lookup, slow_lookup |

  Scenario: A timed-out handler is cancelled, not left running
    Given the actor's model replies:
      | text                     | tool calls                                       |
      |                          | slow_lookup#c1 {"query": "Paris", "seconds": 30} |
      | The lookup took too long. |                                                 |
    When the actor is asked "Look it up, please." in blocking mode
    Then the slow_lookup handler was cancelled
    And no task is left running

  Scenario Outline: A failing call does not stop the other calls of its batch (<mode>)
    Given the actor's model replies:
      | text                                  | tool calls                                                                  |
      |                                       | broken_lookup#b1 {"query": "Paris"} ; get_weather#w1 {"city": "Paris"}      |
      | The lookup failed; Paris is rainy.    |                                                                             |
    When the actor is asked "Look up Paris and its weather." in <mode> mode
    Then the answer is "The lookup failed; Paris is rainy."
    And the handlers ran in this order:
      | tool          | arguments          |
      | broken_lookup | {"query": "Paris"} |
      | get_weather   | {"city": "Paris"}  |
    And the model's request 2 answers the calls b1 and w1 with one tool message each, in that order
    And the tool calls are recorded as:
      | call id | name          | status | output                                                                                            |
      | b1      | broken_lookup | error  | Error: tool 'broken_lookup' (call b1) raised LookupError: lookup backend unavailable for 'Paris' |
      | w1      | get_weather   | ok     | Paris: 18 C, light rain                                                                           |

    Examples:
      | mode      |
      | blocking  |
      | streaming |
