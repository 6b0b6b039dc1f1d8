Feature: The scripted OpenAI server hands each conversation its own replies
  Concurrent runs against one `ScriptedOpenAIServer` must not get each other's replies. With
  `per_conversation=True` every conversation walks its own copy of the script, and a request's
  reply depends on its whole conversation so far: messages that extend an earlier request's get
  the reply after the one it got, the same messages again get the same reply (or the next one
  after a scripted fault: the retry), anything else starts from the first reply. A mapping gives
  each first user message its own script; a plain list keeps the global order it always had. A
  request the script has no reply for gets HTTP 422 `script_exhausted`, which no client retries.

  Scenario: Twenty conversations at once each get the whole script, in order
    Given the conversation server replies "Let me check." then "It is sunny." to every conversation
    When 20 conversations send their first request at once
    Then every conversation was answered "Let me check."
    When the 20 conversations send their second request at once
    Then every conversation was answered "It is sunny."
    And the conversation server billed 40 replies

  Scenario: A conversation that has used up its copy gets HTTP 422 naming it; the others go on
    Given the conversation server replies "Let me check." then "It is sunny." to every conversation
    When the conversation "Paris?" sends 3 requests
    Then the conversation "Paris?" was answered "Let me check.", "It is sunny." and then 422 script_exhausted saying "ScriptedOpenAIServer: script exhausted for conversation 'Paris?' (messages so far: 5; replies in its script: 2, all taken) (request 2)"
    When the conversation "Rome?" sends 1 request
    Then the conversation "Rome?" was answered "Let me check."

  Scenario: A new conversation with the same first message starts from the first reply
    Given the conversation server replies "Let me check." then "It is sunny." to every conversation
    When the conversation "Paris?" sends 2 requests
    And another conversation "Paris?" sends 2 requests
    Then the conversation "Paris?" was answered "Let me check.", "It is sunny."
    And the other conversation "Paris?" was answered "Let me check.", "It is sunny."

  Scenario: The same message under different system prompts is two conversations
    Given the conversation server replies "Let me check." then "It is sunny." to every conversation
    When the conversation under the system prompt "Be brief." sends 1 request starting "Paris?"
    And the conversation under the system prompt "Be chatty." sends 2 requests starting "Paris?"
    Then the conversation under "Be brief." was answered "Let me check."
    And the conversation under "Be chatty." was answered "Let me check.", "It is sunny."

  Scenario: The same request again after a scripted fault is its retry, and gets the next reply
    Given the conversation server fails with HTTP 503 "overloaded" then replies "It is sunny." to every conversation
    When the conversation "Paris?" repeats its first request 2 times
    Then the conversation "Paris?" was answered 503 server_error saying "overloaded", "It is sunny."

  Scenario: An exhausted script fails the run at once, one request, not retried, saying so
    Given the conversation server replies only with a call of get_weather for Paris to every conversation
    And an openai actor with the tool get_weather, retrying failed calls twice, against the conversation server
    When the conversation server's actor is asked "Weather in Paris?"
    Then the conversation server's actor failed with HTTP 422 saying "ScriptedOpenAIServer: script exhausted for conversation 'Weather in Paris?'"
    And the conversation server received 2 requests: the tool round and the exhausted one

  Scenario: Each first message can have a script of its own
    Given the conversation server has the scripts:
      | first message | replies                    |
      | Paris?        | Sunny in Paris.            |
      | Rome?         | Rainy in Rome. ; Still wet. |
    When the conversation "Rome?" sends 2 requests
    And the conversation "Paris?" sends 1 request
    And the conversation "Oslo?" sends 1 request
    Then the conversation "Rome?" was answered "Rainy in Rome.", "Still wet."
    And the conversation "Paris?" was answered "Sunny in Paris."
    And the conversation "Oslo?" was answered 422 script_exhausted saying "ScriptedOpenAIServer: no script for the conversation 'Oslo?' (request 3)"

  Scenario: A plain list still hands replies out in the order requests arrive
    Given the conversation server replies "First." then "Second." in the order requests arrive
    When the conversation "Paris?" sends 1 request
    And the conversation "Rome?" sends 1 request
    Then the conversation "Paris?" was answered "First."
    And the conversation "Rome?" was answered "Second."
