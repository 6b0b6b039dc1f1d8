Feature: The web routes refuse conversations longer than their limits, naming the limit
  A long history costs server CPU on the event loop (every turn is converted for the provider),
  so `create_chat_router()` takes `max_history_turns` (default 200) and `max_turn_chars`
  (default 16000) and refuses what goes beyond them with 422 before running anything.

  Scenario Outline: A history at the limits is run (<path>)
    Given the web app serves an actor answering "Hello there."
    And the web app limits history to 3 turns of 10 characters
    When the web app is sent a message of 10 characters to <path> with 3 history turns of 10 characters
    Then the web app answered 200
    And on_usage heard once, from the caller "None"

    Examples:
      | path                 |
      | /chat                |
      | /v1/chat/completions |

  Scenario Outline: One turn too many is refused, naming max_history_turns (<path>)
    Given the web app serves an actor answering "Hello there."
    And the web app limits history to 3 turns of 10 characters
    When the web app is sent a message of 10 characters to <path> with 4 history turns of 10 characters
    Then the web app answered 422
    And the web app's refusal says "<where>: 4 earlier turns; at most 3 are accepted (max_history_turns)"
    And the web app ran nothing

    Examples:
      | path                 | where    |
      | /chat                | history  |
      | /v1/chat/completions | messages |

  Scenario Outline: A turn one character too long is refused, naming max_turn_chars (<path>, <which>)
    Given the web app serves an actor answering "Hello there."
    And the web app limits history to 3 turns of 10 characters
    When the web app is sent a message of <message> characters to <path> with 3 history turns of <turn> characters
    Then the web app answered 422
    And the web app's refusal says "<where>: 11 characters; at most 10 are accepted per turn (max_turn_chars)"
    And the web app ran nothing

    Examples:
      | path                 | which   | message | turn | where      |
      | /chat                | message | 11      | 10   | message    |
      | /chat                | history | 10      | 11   | history.0  |
      | /v1/chat/completions | history | 10      | 11   | messages.0 |

  Scenario: The defaults are 200 turns of 16000 characters
    Given the web app serves an actor answering "Hello there."
    And the web app accepts bodies of 4000000 bytes
    When the web app is sent a message of 10 characters to /chat with 200 history turns of 16000 characters
    Then the web app answered 200
    When the web app is sent a message of 10 characters to /chat with 201 history turns of 10 characters
    Then the web app answered 422
    And the web app's refusal says "history: 201 earlier turns; at most 200 are accepted (max_history_turns)"
    When the web app is sent a message of 16001 characters to /chat with 0 history turns of 10 characters
    Then the web app answered 422
    And the web app's refusal says "message: 16001 characters; at most 16000 are accepted per turn (max_turn_chars)"

  Scenario: cleveractors serve uses the router's defaults
    Then the web app's serve command defaults to 200 turns, 16000 characters and a 30 second send timeout
