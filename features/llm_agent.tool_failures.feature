Feature: A failing tool call becomes an error the model reads; the turn goes on
  A handler that raises, a call that times out, arguments that are not valid JSON or do not
  match the tool's schema, a tool that was never declared: each becomes an error tool message
  for that call id, logged at WARNING with the tool name and call id, and the model is asked
  again. An undeclared tool runs nothing. A handler's own TimeoutError is its failure, not our
  timeout; an output JSON cannot encode is a failure too; a failing call of a concurrent batch
  cancels none of the others.

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

  Scenario Outline: A handler's own TimeoutError is an error the model reads, not a timeout of ours (<mode>, <declared>)
    Given the actor's model replies:
      | text                           | tool calls                           |
      |                                | upstream_lookup#u1 {"query": "Oslo"} |
      | The lookup service timed out. |                                      |
    And regression: the actor is built in code with these tools:
      | name            | handler         | timeout s |
      | upstream_lookup | upstream_lookup | <timeout> |
    When the actor is asked "Look up Oslo." in <mode> mode
    Then the answer is "The lookup service timed out."
    And the model's request 2 carries an error for call u1 mentioning "raised TimeoutError: upstream timed out"
    And the tool call u1 is recorded as an error
    And regression: the run succeeded and last_result records no error
    And the model was asked 2 times

    Examples:
      | mode      | declared                      | timeout |
      | blocking  | no timeout_s                  |         |
      | streaming | no timeout_s                  |         |
      | blocking  | a timeout_s it does not reach | 5       |
      | streaming | a timeout_s it does not reach | 5       |

  Scenario Outline: A tool built in code that sleeps past its timeout_s is reported timed out, and cancelled (<mode>)
    Given the actor's model replies:
      | text                      | tool calls                                       |
      |                           | slow_lookup#s1 {"query": "Oslo", "seconds": 30}  |
      | The lookup took too long. |                                                  |
    And regression: the actor is built in code with these tools:
      | name        | handler     | timeout s |
      | slow_lookup | slow_lookup | 0.05      |
    When the actor is asked "Look up Oslo." in <mode> mode
    Then the answer is "The lookup took too long."
    And the model's request 2 carries an error for call s1 mentioning "timed out after 0.05s"
    And the slow_lookup handler was cancelled
    And regression: the run succeeded and last_result records no error

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A handler returning a value JSON cannot encode is an error the model reads (<mode>)
    Given the actor's model replies:
      | text                            | tool calls                              |
      |                                 | tuple_keyed_lookup#t1 {"query": "Oslo"} |
      | The lookup gave an odd answer. |                                         |
    And regression: the actor is built in code with these tools:
      | name               | handler            |
      | tuple_keyed_lookup | tuple_keyed_lookup |
    When the actor is asked "Look up Oslo." in <mode> mode
    Then the answer is "The lookup gave an odd answer."
    And the model's request 2 carries an error for call t1 mentioning "raised TypeError"
    And the tool call t1 is recorded as an error
    And regression: the run succeeded and last_result records no error

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A concurrent call that <failure> does not cancel the others of its batch (<mode>)
    Given the actor's model replies:
      | text                          | tool calls                                                                                     |
      |                               | sibling_lookup#a1 {"query": "a"} ; <handler>#b1 {"query": "b"} ; sibling_lookup#c1 {"query": "c"} |
      | Two lookups worked, one not.  |                                                                                                |
    And regression: the actor is built in code with these tools:
      | name           | handler        | concurrent |
      | sibling_lookup | sibling_lookup | yes        |
      | <handler>      | <handler>      | yes        |
    When the actor is asked "Look up a, b and c." in <mode> mode
    Then the answer is "Two lookups worked, one not."
    And regression: no ExceptionGroup escaped the run
    And regression: the handlers for a and c completed, and none was cancelled
    And the model's request 2 answers the calls a1, b1 and c1 with one tool message each, in that order
    And the model's request 2 carries the tool results:
      | call id | content   | status  |
      | a1      | a: found  | success |
      | c1      | c: found  | success |
    And the model's request 2 carries an error for call b1 mentioning "<error>"

    Examples:
      | failure                          | handler            | mode      | error                                  |
      | raises LookupError               | missing_lookup     | blocking  | raised LookupError: no index for 'b'   |
      | raises LookupError               | missing_lookup     | streaming | raised LookupError: no index for 'b'   |
      | raises TimeoutError itself       | upstream_lookup    | blocking  | raised TimeoutError: upstream timed out |
      | raises TimeoutError itself       | upstream_lookup    | streaming | raised TimeoutError: upstream timed out |
      | returns a value JSON can't encode | tuple_keyed_lookup | blocking  | raised TypeError                       |
      | returns a value JSON can't encode | tuple_keyed_lookup | streaming | raised TypeError                       |
