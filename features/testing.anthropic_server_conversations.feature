Feature: The scripted Anthropic server hands each conversation its own replies, as the OpenAI one does
  `ScriptedAnthropicServer` takes the scripts `ScriptedOpenAIServer` takes: a list handed out in
  arrival order, a list with `per_conversation=True` that every conversation walks on its own
  copy of, and a mapping from a first user message to that conversation's list. A request's
  conversation so far is its top-level `system` and every message. Checked over the wire with
  `ChatAnthropic`.

  Scenario Outline: Ten conversations at once each get the whole script, in order (<mode>)
    Given the Anthropic conversation server replies "Let me check." then "It is sunny." to every conversation
    When 10 ChatAnthropic conversations each ask twice at once, <mode>
    Then every ChatAnthropic conversation was answered "Let me check." then "It is sunny."
    And the Anthropic conversation server billed 20 replies

    Examples:
      | mode     |
      | invoked  |
      | streamed |

  Scenario: A conversation that used up its copy gets HTTP 422 naming it; a new one starts over
    Given the Anthropic conversation server replies "Let me check." then "It is sunny." to every conversation
    When the ChatAnthropic conversation "Paris?" asks 3 times
    And the ChatAnthropic conversation "Rome?" asks 1 time
    Then the ChatAnthropic conversation "Paris?" was answered "Let me check.", "It is sunny."
    And the ChatAnthropic conversation "Paris?" was then refused with 422 saying "ScriptedAnthropicServer: script exhausted for conversation 'Paris?' (messages so far: 5; replies in its script: 2, all taken)"
    And the ChatAnthropic conversation "Rome?" was answered "Let me check."

  Scenario: The same message under different system prompts is two conversations
    Given the Anthropic conversation server replies "Let me check." then "It is sunny." to every conversation
    When the ChatAnthropic conversation under the system prompt "Be brief." asks 1 time, starting "Paris?"
    And the ChatAnthropic conversation under the system prompt "Be chatty." asks 2 times, starting "Paris?"
    Then the ChatAnthropic conversation under "Be brief." was answered "Let me check."
    And the ChatAnthropic conversation under "Be chatty." was answered "Let me check.", "It is sunny."

  Scenario: Each first message can have a script of its own
    Given the Anthropic conversation server has the scripts:
      | first message | replies                     |
      | Paris?        | Sunny in Paris.             |
      | Rome?         | Rainy in Rome. ; Still wet. |
    When the ChatAnthropic conversation "Rome?" asks 2 times
    And the ChatAnthropic conversation "Paris?" asks 1 time
    And the ChatAnthropic conversation "Oslo?" asks 1 time
    Then the ChatAnthropic conversation "Rome?" was answered "Rainy in Rome.", "Still wet."
    And the ChatAnthropic conversation "Paris?" was answered "Sunny in Paris."
    And the ChatAnthropic conversation "Oslo?" was answered nothing
    And the ChatAnthropic conversation "Oslo?" was then refused with 422 saying "ScriptedAnthropicServer: no script for the conversation 'Oslo?'"

  Scenario: What a script per conversation cannot do is refused, naming why
    Then the Anthropic conversation server refuses replies_left on a per-conversation script, saying "replies_left needs a script handed out in arrival order"
    And the Anthropic conversation server refuses add_replies on a script per first message, saying "add_replies() needs a single script, not one per conversation"
    And the Anthropic conversation server refuses a script per first message holding a reply without usage, saying "the Messages API always reports usage: omit_usage is not served"
