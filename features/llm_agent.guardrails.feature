Feature: Guardrails stop a run on bad input or a bad answer
  An input guardrail checks the user's message before the first model call (or beside it: a
  tripwire then cancels the call, which is billed); an output guardrail checks the answer. A
  held answer reaches the client only once it passes; text sent before a tripwire is retracted
  by an `output_retracted` event. A tripwire ends the run with `GuardrailTripped` (the
  guardrail's name and reason), everything spent billed. A guardrail is a function (sync or
  async, found beside the actor file as tool handlers are) or a judge actor file.

  Scenario Outline: Passing guardrails change nothing (<mode>)
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the actor has these guardrails:
      | stage  | function          | name     | option      |
      | input  | always_pass       | before   |             |
      | input  | always_pass_async | beside   | in parallel |
      | output | refuse_passwords  | no-pw    | held        |
      | output | refuse_rain_async | no-rain  |             |
      | output | refuse_rain_object |         |             |
    When the actor is asked "How is Rome?" in <mode> mode
    Then the answer is "It is sunny in Rome."
    And the model was asked 1 time
    And the run's calls are billed as: round ok
    And no output_retracted event was sent

    Examples:
      | mode      |
      | blocking  |
      | streaming |
      | events    |

  Scenario Outline: An input guardrail trips before the model is asked (<mode>)
    Given the actor's model replies:
      | text        |
      | Never sent. |
    And the actor has these guardrails:
      | stage | function         |
      | input | refuse_passwords |
    When the actor is asked "My password is hunter2, keep it" in <mode> mode
    Then the run ended with GuardrailTripped: the input guardrail "refuse_passwords", because "the input names a password"
    And the model was never asked
    And nothing was billed

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario: An output tripwire after the text was sent retracts it
    Given the actor's model replies:
      | text                        |
      | Expect rain in Rome today.  |
    And the actor has these guardrails:
      | stage  | function          |
      | output | refuse_rain_async |
    When the actor is asked "How is Rome?" in events mode
    Then the run ended with GuardrailTripped: the output guardrail "refuse_rain_async", because "no rain talk"
    And text reached the caller, then output_retracted names "refuse_rain_async" and "no rain talk"
    And the run's calls are billed as: round ok

  Scenario: A held answer never reaches the client on a tripwire
    Given the actor's model replies:
      | text                         |
      | Your password is hunter2.    |
    And the actor has these guardrails:
      | stage  | function         | option |
      | output | refuse_passwords | held   |
    When the actor is asked "What is my password?" in events mode
    Then the run ended with GuardrailTripped: the output guardrail "refuse_passwords", because "the output names a password"
    And no text reached the caller
    And no output_retracted event was sent
    And the run's calls are billed as: round ok

  Scenario: Each verdict is a span of the run's trace and a log line
    Given the actor's model replies:
      | text                       |
      | Expect rain in Rome today. |
    And the actor has these guardrails:
      | stage  | function          |
      | input  | refuse_passwords  |
      | output | refuse_rain_async |
    And the actor's runs are traced into memory
    When the actor is asked "How is Rome?" in blocking mode
    Then the run's trace holds a span per guardrail with its verdict:
      | guardrail         | stage  | tripped | reason       |
      | refuse_passwords  | input  | False   |              |
      | refuse_rain_async | output | True    | no rain talk |
    And a log line says "input guardrail refuse_passwords passed"
    And a log line says "output guardrail refuse_rain_async tripped: no rain talk"

  Scenario: A held answer that passes is sent once it is checked
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the actor has these guardrails:
      | stage  | function         | option |
      | output | refuse_passwords | held   |
    When the actor is asked "How is Rome?" in events mode
    Then the answer is "It is sunny in Rome."
    And the text reached the caller after the model's call was billed

  Scenario: An output guardrail reads the typed answer and the run's deps
    Given an actor built in code whose typed answer is "{"city": "Rome", "temp": 40}", checked by too_hot
    When the typed actor is asked "How hot is Rome?" with the deps {"max_temp": 35}
    Then the run ended with GuardrailTripped: the output guardrail "too_hot", because "Rome at 40 is over 35"
    And the run's calls are billed as: round ok

  Scenario: A typed answer that passes its output guardrail is the run's object
    Given an actor built in code whose typed answer is "{"city": "Rome", "temp": 30}", checked by too_hot
    When the typed actor is asked "How hot is Rome?" with the deps {"max_temp": 35}
    Then the answer is the object {"city": "Rome", "temp": 30}

  Scenario: A judge actor's verdict trips the run, and its call is billed into the run
    Given the actor's model replies:
      | text                  |
      | Rome? Look it up.     |
    And the actor's answer is judged by "judge.yaml", an actor whose model replies "FAIL: the answer is rude"
    When the actor is asked "How is Rome?" in blocking mode
    Then the run ended with GuardrailTripped: the output guardrail "tone-judge", because "the answer is rude"
    And the run's calls are billed as: round ok, guardrail ok

  Scenario: A judge whose reply is no verdict trips the run, its reply the reason
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the actor's answer is judged by "judge.yaml", an actor whose model replies "Looks fine to me."
    When the actor is asked "How is Rome?" in blocking mode
    Then the run ended with GuardrailTripped: the output guardrail "tone-judge", because "Looks fine to me."

  Scenario: A judge whose model fails fails the run with that error, its failed call billed
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the actor's answer is judged by "judge.yaml", an actor whose model fails with "judge overloaded"
    When the actor is asked "How is Rome?" in blocking mode
    Then the call failed with ModelAPIError "judge overloaded"
    And the run's calls are billed as: round ok, guardrail failed

  Scenario: A judge that passes the answer costs one billed call, and changes nothing else
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the actor's answer is judged by "judge.yaml", an actor whose model replies "PASS"
    When the actor is asked "How is Rome?" in blocking mode
    Then the answer is "It is sunny in Rome."
    And the run's calls are billed as: round ok, guardrail ok

  Scenario: A guardrail function is found beside the actor file
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the module my_checks beside the actor file holds this guardrail:
      """
      from cleveractors import GuardrailResult

      def no_rome(checked):
          return GuardrailResult.trip("Rome is off limits") if "Rome" in checked.text else GuardrailResult.passed()
      """
    When the actor file is loaded with this input guardrail entry: {"function": "my_checks:no_rome", "name": "rome"}
    And the actor, loaded from its file, is asked "How is Rome?" in blocking mode
    Then the run ended with GuardrailTripped: the input guardrail "rome", because "Rome is off limits"
    And nothing was billed

  Scenario Outline: Loading errors name the guardrail entry: <problem>
    When the actor file is loaded with this <stage> guardrail entry: <entry>
    Then loading failed with a ConfigurationError saying "<message>"

    Examples:
      | problem              | stage  | entry                                                                  | message                                                                                  |
      | a missing module     | input  | {"function": "no_such_checks:check"}                                   | agent.input_guardrails.0: function 'no_such_checks:check' cannot be imported             |
      | not a function       | output | {"function": "support.guardrail_checks:NOT_CALLABLE"}                  | agent.output_guardrails.0: function 'support.guardrail_checks:NOT_CALLABLE' is not callable |
      | a missing judge file | output | {"judge": "nobody.yaml"}                                               | agent.output_guardrails.0: judge 'nobody.yaml': no actor config at                       |
      | both kinds           | input  | {"function": "support.guardrail_checks:always_pass", "judge": "judge.yaml"} | agent.input_guardrails.0.function: a guardrail needs exactly one of function             |
      | neither kind         | input  | {"name": "x"}                                                          | got neither                                                                              |
      | a misplaced option   | input  | {"function": "support.guardrail_checks:always_pass", "hold_until_checked": true} | agent.input_guardrails.0.hold_until_checked                                   |
      | an invalid judge     | output | {"judge": "broken.yaml"}                                               | broken.yaml: invalid actor config (1 problem(s)) |
      | a judge judging itself | output | {"judge": "self_judge.yaml"}                                         | self_judge.yaml is judged by itself |
      | two of one name      | input  | [{"function": "support.guardrail_checks:always_pass"}, {"function": "support.guardrail_checks:always_pass"}] | two input guardrails are named 'always_pass' |

  Scenario Outline: Guardrails made in code wrongly are ConfigurationErrors: <what>
    When a guardrail is made in code as <what>
    Then making it failed with a ConfigurationError saying "<message>"

    Examples:
      | what                               | message                                                    |
      | InputGuardrail()                   | InputGuardrail: give either a check function or a judge agent |
      | OutputGuardrail(42)                | OutputGuardrail: check must be callable, got 42            |
      | an LLMAgent with always_pass twice | agent 'assistant': two input guardrails are named 'always_pass' |

  Scenario: A guardrail that returns no verdict fails the run with a TypeError naming it
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the actor has these guardrails:
      | stage  | function          |
      | output | answers_with_text |
    And the actor's runs are traced into memory
    When the actor is asked "How is Rome?" in blocking mode
    Then the call failed with TypeError "guardrail 'answers_with_text' returned str, not a GuardrailResult"
    And the span "guardrail answers_with_text" records the error TypeError
    And the run's calls are billed as: round ok

  Scenario: A parallel input tripwire cancels the in-flight model call over the wire, and bills it
    Given a scripted OpenAI server streaming a long answer slowly, asked by ChatOpenAI
    And an actor over that wire whose input guardrail trips beside the model call, storing to SQLite
    When the wire actor is asked "Tell me a long story" in events mode
    Then the run ended with GuardrailTripped: the input guardrail "trip_once_model_streams", because "the message is off topic"
    And the server stopped streaming before the end of the answer
    And the store's ledger holds the cancelled call, its tokens estimated, under the run's id

  Scenario: On /chat a held answer never reaches the client; the run fails with run_failed
    Given the actor's model replies:
      | text                      |
      | Your password is hunter2. |
    And the actor has these guardrails:
      | stage  | function         | option |
      | output | refuse_passwords | held   |
    When the web app serving the actor is sent "What is my password?" to /chat
    Then the /chat stream ended with run_failed naming the guardrail "refuse_passwords", and no text

  Scenario: On /v1 a tripwire is a 400 in OpenAI's error format
    Given the actor's model replies:
      | text        |
      | Never sent. |
    And the actor has these guardrails:
      | stage | function         |
      | input | refuse_passwords |
    When the web app serving the actor is sent "My password is hunter2" to /v1/chat/completions
    Then the web app answered 400 with the GuardrailTripped reason "the input names a password"

  Scenario Outline: On <route> a tripwire ends the stream with the protocol's error event
    Given the actor's model replies:
      | text                 |
      | It is sunny in Rome. |
    And the actor has these guardrails:
      | stage  | function         | option |
      | output | refuse_rain_async | held  |
      | input  | refuse_passwords |        |
    When the web app serving the actor is sent "My password is hunter2" to <route>
    Then the <route> stream ended with its error event naming "the input names a password", and no text

    Examples:
      | route                           |
      | /ai-sdk                         |
      | /ag-ui                          |
      | /v1/chat/completions, streamed  |
