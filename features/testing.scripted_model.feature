Feature: The scripted chat model replays its script, and says when it runs out
  `ScriptedChatModel` is a real LangChain chat model for tests and offline demos: it replays
  one reply per call, blocking or streaming, bills words as tokens, streams tool calls as
  fragments (id and name on the first only) with the usage on the last chunk, and raises
  ScriptExhaustedError rather than wrapping around.

  Scenario: A script that runs out raises ScriptExhaustedError
    Given a scripted model with the replies:
      | text          | tool calls |
      | Hello there.  |            |
      | Goodbye now.  |            |
    When the scripted model is invoked 3 times without tools
    Then the replies were Hello there. ; Goodbye now.
    And the call after the last reply fails with ScriptExhaustedError naming call 3
    And each reply reports the words of the request and of the reply as its usage
    And assert_consumed passes

  Scenario: assert_consumed fails while replies are left
    Given a scripted model with the replies:
      | text          | tool calls |
      | Hello there.  |            |
      | Goodbye now.  |            |
    When the scripted model is invoked 1 time without tools
    Then assert_consumed fails saying "1 of 2 scripted replies were not used"

  Scenario: A synchronous stream carries text, then tool-call fragments, then the usage
    Given a scripted model with the replies:
      | text                  | tool calls                    |
      | Checking the weather. | get_weather {"city": "Paris"} |
    When the scripted model is streamed synchronously, with the tool get_weather bound
    Then the chunks carry the text word by word, then each call's fragments, then the usage
