Feature: One run of the tool loop ends in a result, or in the model's own error with what was spent
  `LLMAgent.run()` is what `process_message()`, `stream_message()` and the executor are made of:
  one run, its events into the sink it is given, never raising for a failed run. It returns the
  result (answer, counts of every call, rounds, tool calls) and the turn as the transcript keeps
  it; when the run fails, the model's own exception, unwrapped, beside a result that holds every
  token spent before it. Blocking and streaming runs go through the same loop.

  Background:
    Given the actor declares the demo tool get_weather

  Scenario Outline: A run that answers after a tool round returns the answer, every call's counts and the turn (<mode>)
    Given the actor's model replies:
      | text                        | tool calls                       | prompt tokens | completion tokens |
      |                             | get_weather#w1 {"city": "Paris"} | 21            | 8                 |
      | Paris: 18 C and light rain. |                                  | 34            | 7                 |
    When the agent runs "Weather in Paris?" with its events into a list, <mode>
    Then the run succeeded with the model's last reply as its answer
    And the run's result holds the counts of every call the model answered, one usage event each
    And the run's result records 2 rounds, no synthesis, and the tool calls as ok
    And the run's turn is "Weather in Paris?", the call w1, its result and the answer

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A run the model fails returns the model's own ModelAPIError, with the counts of the calls before it (<mode>)
    Given the actor's model replies:
      | text | tool calls                       | prompt tokens | completion tokens | error          |
      |      | get_weather#w1 {"city": "Paris"} | 21            | 8                 |                |
      |      |                                  |               |                   | quota exceeded |
    When the agent runs "Weather in Paris?" with its events into a list, <mode>
    Then the run ended in the model's own ModelAPIError "quota exceeded", which its result records
    And the run's result holds the counts of every call the model answered, one usage event each
    And the run kept no turn

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A run is named by the id it is given, answered or failed (<mode>, <ending>)
    An executor that names the run in its own records passes its id; the agent opens the run's
    scope with it, and its result carries it.
    Given the actor's model replies:
      | text   | error   |
      | <text> | <error> |
    When the agent runs "Hello" as run "run_0123456789abcdef", its events into a list, <mode>
    Then the run's result is named "run_0123456789abcdef"

    Examples:
      | mode      | ending   | text   | error          |
      | blocking  | answered | Hello. |                |
      | streaming | answered | Hello. |                |
      | blocking  | failed   |        | quota exceeded |
      | streaming | failed   |        | quota exceeded |

  Scenario: A run given no id is named by a new one
    Given the actor's model replies:
      | text   |
      | Hello. |
    When the agent runs "Hello" with its events into a list, blocking
    Then the run's result is named by a new run id
