Feature: A tool declared ends_turn ends the turn with its output
  Once an ends_turn tool has run, the calls behind it in the batch are skipped (each still gets
  a tool message saying so, and a log line names them), the tool's output is the answer, and
  the model is not asked again. An empty output ends the turn as well, and streams no empty
  chunk.

  Background:
    Given the actor declares these tools:
      | name        | handler     | ends turn |
      | book_table  | book_table  | yes       |
      | get_weather | get_weather |           |

  Scenario Outline: The ends_turn tool's output is the answer; the calls behind it are skipped (<mode>)
    Given the actor's model replies:
      | text | tool calls                                                                                                      |
      |      | get_weather#w1 {"city": "Rome"} ; book_table#b1 {"restaurant": "Da Enzo", "people": 2} ; get_weather#w2 {"city": "Paris"} |
    When the actor is asked "Book Da Enzo for two, and how is the weather?" in <mode> mode
    Then the answer is "Booked a table for 2 at Da Enzo."
    And the handlers ran in this order:
      | tool        | arguments                                |
      | get_weather | {"city": "Rome"}                         |
      | book_table  | {"restaurant": "Da Enzo", "people": 2}   |
    And the tool calls are recorded as:
      | call id | name        | status  | output                                                                |
      | w1      | get_weather | ok      | Rome: 24 C, sunny                                                     |
      | b1      | book_table  | ok      | Booked a table for 2 at Da Enzo.                                      |
      | w2      | get_weather | skipped | Not run: tool 'book_table' (call b1) ended the turn before this call. |
    And the model was asked 1 time
    And an INFO log line names the skipped call w2 of get_weather
    And the reported tokens are what the model reported for each call

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A skipped call is announced as an event
    Given the actor's model replies:
      | text | tool calls                                                                                   |
      |      | book_table#b1 {"restaurant": "Da Enzo", "people": 2} ; get_weather#w2 {"city": "Paris"}      |
    When the actor is asked "Book Da Enzo for two." in events mode
    Then the tool_call_skipped event for w2 carries:
      | field  | value                                                                 |
      | name   | get_weather                                                           |
      | reason | Not run: tool 'book_table' (call b1) ended the turn before this call. |
    And the event kinds are, a run of text deltas counted once:
      | kind                |
      | run_started         |
      | round_started       |
      | usage_recorded      |
      | tool_call_requested |
      | tool_call_requested |
      | tool_call_started   |
      | tool_call_finished  |
      | tool_call_skipped   |
      | text_delta          |
      | run_finished        |

  Scenario: An ends_turn tool that fails does not end the turn
    Given the actor's model replies:
      | text                                  | tool calls                                                 |
      |                                       | book_table#b1 {"restaurant": "Da Enzo", "people": "two"}   |
      | I could not book: how many guests?    |                                                            |
    When the actor is asked "Book Da Enzo." in blocking mode
    Then the answer is "I could not book: how many guests?"
    And the tool call b1 is recorded as an error
    And the model was asked 2 times

  Scenario: An ends_turn tool that returns "" ends the turn without streaming an empty chunk
    Given the actor's model replies:
      | text | tool calls                                   |
      |      | confirm_quietly#q1 {"booking": "table for 2"} |
    And regression: the actor is built in code with these tools:
      | name            | handler         | ends turn |
      | confirm_quietly | confirm_quietly | yes       |
    When the actor is asked "Book it, quietly." in streaming mode
    Then regression: the answer is empty, and no chunk the stream yielded was empty
    And the model was asked 1 time
