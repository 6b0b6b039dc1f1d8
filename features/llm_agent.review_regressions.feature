Feature: Review regressions: a misbehaving handler, config or caller never crashes or leaks
  Each scenario pins down one defect a review found. A handler that raises its own TimeoutError,
  returns a value JSON cannot encode, or fails next to concurrent calls becomes an error the
  model reads, and the run goes on. A handler module that fails to import and a config key that
  looks like a secret are refused with a ConfigurationError that names the field and never
  echoes the secret. A run stopped mid-batch still records the calls that ran. A malformed
  history is refused up front. An empty ends_turn answer streams no empty chunk. Tool calls
  without ids get distinct ids, each answered once.

  # -- 1. a handler's own TimeoutError is not our timeout ----------------------------------------

  Scenario Outline: A handler that raises TimeoutError itself is an error the model reads (<mode>, <declared>)
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

  Scenario Outline: A handler that sleeps past its declared timeout is reported as timed out (<mode>)
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

  # -- 2. an output JSON cannot encode -----------------------------------------------------------

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

  # -- 3. one failing call of a concurrent batch -------------------------------------------------

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

  # -- 4. a handler module that cannot be imported -----------------------------------------------

  Scenario Outline: A handler module that <problem> is refused as "cannot be imported"
    Given regression: the module "<module>" in a folder on sys.path holds this code:
      """
      <code>
      """
    And an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: [{text: Hello.}]
        tools:
          - name: lookup
            handler: "<module>:lookup"
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.tools.0 ; <module>:lookup ; cannot be imported"
    And the error shows no traceback from inside the libraries it uses
    And regression: the error message holds no traceback

    Examples:
      | problem                   | module                          | code                                      |
      | raises at import time     | regression_needs_database_url   | raise RuntimeError("needs DATABASE_URL")  |
      | has a syntax error        | regression_handler_syntax_error | def lookup(query:                         |

  # -- 5. a secret in a config is never echoed ---------------------------------------------------

  Scenario Outline: A config field <field> never echoes its value, which looks like a secret
    Given an actor config file where <field> is <value>
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "<message names>"
    And regression: the error does not show "sk-canary-123"

    Examples:
      | field                     | value                    | message names                                             |
      | agent.api_key             | sk-canary-123            | agent.api_key: unknown key             |
      | agent.access_token        | sk-canary-123            | agent.access_token: unknown key        |
      | agent.client_secret       | sk-canary-123            | agent.client_secret: unknown key       |
      | agent.tools.0.db_password | sk-canary-123            | agent.tools.0.db_password: unknown key |
      | agent.secrets             | {openai: sk-canary-123}  | agent.secrets: unknown key             |
      | agent.api_key_env         | [sk-canary-123]          | agent.api_key_env ; Input should be a valid string        |
      | agent.token_budget        | sk-canary-123            | agent.token_budget ; Input should be a valid integer      |

  Scenario: A secret-looking key in a config dict is not echoed either
    Given an actor config dict where agent.api_key is sk-canary-123
    When the actor is loaded from it
    Then loading fails with a ConfigurationError saying "<dict> ; agent.api_key: unknown key"
    And regression: the error does not show "sk-canary-123"

  # -- 6. a tool built in code cannot end the turn and be concurrent ------------------------------

  Scenario Outline: A tool built with <how> that ends the turn and is concurrent is refused
    When regression: a tool "book_now" is built with <how>, both ends_turn and concurrent
    Then building the agent fails with a ConfigurationError mentioning "book_now"

    Examples:
      | how                     |
      | Tool(...)               |
      | tool_from_callable(...) |

  # -- 7. a run stopped mid-batch keeps the calls that ran ---------------------------------------

  Scenario Outline: A run stopped by <how> during the second call still records the first
    Given the actor's model replies:
      | text             | tool calls                                                                |
      |                  | get_weather#w1 {"city": "Paris"} ; stalled_lookup#s1 {"query": "museum"} |
      | Never asked for. |                                                                           |
    And regression: the actor is built in code with these tools:
      | name           | handler        |
      | get_weather    | get_weather    |
      | stalled_lookup | stalled_lookup |
    When regression: the run is stopped by <how> while the tool "stalled_lookup" runs for "museum"
    Then the consumer's task ended cancelled
    And the result is marked cancelled
    And regression: the result records the call w1 of get_weather as ok, with the output "Paris: 18 C, light rain"
    And regression: the result does not record the call s1 as ok
    And regression: the handler for "museum" was cancelled
    And the model was asked 1 time
    And no task is left running

    Examples:
      | how                                    |
      | cancelling the blocking caller's task  |
      | cancelling the event consumer's task   |
      | closing the event stream with aclose() |

  # -- 8. a history that is not a list -----------------------------------------------------------

  Scenario Outline: A history that is <input> is refused, and last_result says so (<mode>)
    Given the actor's model replies:
      | text   |
      | Hello. |
    When regression: the actor is asked "hi" in <mode> mode with the history <history>
    Then the call failed with ConfigurationError "history"
    And last_result records the error ConfigurationError with zero usage
    And the model was never asked

    Examples:
      | input               | mode      | history          |
      | a string            | blocking  | "abc"            |
      | a string            | streaming | "abc"            |
      | a dict, not a list  | blocking  | {"role": "user"} |
      | a dict, not a list  | streaming | {"role": "user"} |
      | a number            | blocking  | 42               |

  # -- 9. an empty ends_turn answer --------------------------------------------------------------

  Scenario: An ends_turn tool that returns "" streams no empty chunk
    Given the actor's model replies:
      | text | tool calls                                   |
      |      | confirm_quietly#q1 {"booking": "table for 2"} |
    And regression: the actor is built in code with these tools:
      | name            | handler         | ends turn |
      | confirm_quietly | confirm_quietly | yes       |
    When the actor is asked "Book it, quietly." in streaming mode
    Then regression: the answer is empty, and no chunk the stream yielded was empty
    And the model was asked 1 time

  # -- 10. tool calls without ids ----------------------------------------------------------------

  Scenario Outline: Two tool calls without ids get distinct ids, each answered once (<mode>)
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
