Feature: The scripted OpenAI server hands each conversation its own replies
  Concurrent runs against one `ScriptedOpenAIServer` must not get each other's replies. A
  conversation is identified by its first user message (every request of a run repeats it). With
  `per_conversation=True` every conversation walks its own copy of the script; a mapping gives
  each first message its own script; a plain list keeps the global order it always had.

  Scenario: Twenty conversations at once each get the whole script, in order
    Given the conversation server replies "Let me check." then "It is sunny." to every conversation
    When 20 conversations send their first request at once
    Then every conversation was answered "Let me check."
    When the 20 conversations send their second request at once
    Then every conversation was answered "It is sunny."
    And the conversation server billed 40 replies

  Scenario: A conversation that has used up its copy gets HTTP 500 naming it; the others go on
    Given the conversation server replies "Let me check." then "It is sunny." to every conversation
    When the conversation "Paris?" sends 3 requests
    Then the conversation "Paris?" was answered "Let me check.", "It is sunny." and then 500 saying "ScriptedOpenAIServer: the script is exhausted, conversation 'Paris?' (request 2)"
    When the conversation "Rome?" sends 1 request
    Then the conversation "Rome?" was answered "Let me check."

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
    And the conversation "Oslo?" was answered 500 saying "ScriptedOpenAIServer: no script for the conversation 'Oslo?' (request 3)"

  Scenario: A plain list still hands replies out in the order requests arrive
    Given the conversation server replies "First." then "Second." in the order requests arrive
    When the conversation "Paris?" sends 1 request
    And the conversation "Rome?" sends 1 request
    Then the conversation "Paris?" was answered "First."
    And the conversation "Rome?" was answered "Second."
