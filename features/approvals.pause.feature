Feature: A tool call that needs a person pauses the run; the calls that need none run at once

  The shop's `lookup` needs no approval; `refund` and `send_mail` do. Each tool counts its calls,
  so "ran" below is what really ran, once per call.

  Scenario Outline: A gated call alone pauses the run, announced, and the tool never runs (<mode>)
    Given a shop whose model replies
      | tool calls                                | prompt tokens | completion tokens |
      | refund#r1 {"order": "A1", "amount": 30}   | 20            | 5                 |
    When the shop is asked "Refund A1" in <mode> mode
    Then the shop's run is paused
    And the shop's run waits for "r1"
    And the segment's approval events are "run_started, tool_approval_requested r1, run_paused"
    And the paused event's result is the paused result
    And the tools ran "nothing"
    And the shop's model was asked 1 times
    And each segment billed exactly its own model calls, none twice

    Examples:
      | mode     |
      | blocking |
      | events   |

  Scenario Outline: A mixed batch: the ungated call runs at once, and never again after the resume (<mode>)
    Given a shop whose model replies
      | tool calls                                                                      | text    | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} ; lookup#l2 {"order": "B2"} |         | 20            | 5                 |
      |                                                                                 | Done.   | 40            | 2                 |
    When the shop is asked "Refund A1" in <mode> mode
    Then the shop's run is paused
    And the tools ran "lookup {"order": "A1"} ; lookup {"order": "B2"}"
    When the first paused segment is resumed in <mode> mode with
      | call | decision |
      | r1   | approve  |
    Then the shop's run is answered
    And the tools ran "lookup {"order": "A1"} ; lookup {"order": "B2"} ; refund {"amount": 30, "order": "A1"}"
    And the model's last request ends with these tool results
      | call | status  | says              |
      | l1   | success | order A1: 2 items |
      | r1   | success | refunded 30 on A1 |
      | l2   | success | order B2: 2 items |
    And the shop's model was asked 2 times
    And each segment billed exactly its own model calls, none twice
    And each segment after the first resumed the one before it

    Examples:
      | mode     |
      | blocking |
      | events   |
      | text     |

  Scenario: A text stream pauses with no text, and the resumed text stream carries the answer
    Given a shop whose model replies
      | tool calls                                                          | text                | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} |                     | 20            | 5                 |
      |                                                                     | Refunded 30 on A1.  | 40            | 4                 |
    When the shop is asked "Refund A1" in text mode
    Then the shop's run is paused
    When the first paused segment is resumed in text mode with
      | call | decision |
      | r1   | approve  |
    Then the shop's run is answered
    And the text streamed was "nothing", then "Refunded 30 on A1."

  Scenario Outline: Tools gated by <gating>: the refund over 50 and the mail wait, the small refund runs
    Given the shop gates its calls by <gating>
    And a shop whose model replies
      | tool calls                                                                                            | prompt tokens | completion tokens |
      | refund#small {"order": "A1", "amount": 20} ; refund#big {"order": "B2", "amount": 80} ; send_mail#m1 {"to": "ann"} | 20 | 5 |
    When the shop is asked "Refunds" in blocking mode
    Then the shop's run is paused
    And the shop's run waits for "<waiting>"
    And the tools ran "<ran>"

    Examples:
      | gating         | waiting           | ran                                   |
      | needs_approval | small, big, m1    | nothing                               |
      | approval names | small, big, m1    | nothing                               |
      | sync policy    | big, m1           | refund {"amount": 20, "order": "A1"}  |
      | async policy   | big, m1           | refund {"amount": 20, "order": "A1"}  |
      | raising policy | small, big, m1    | nothing                               |

  Scenario: A policy that cannot read a call's arguments fails closed: the call waits
    Given the shop gates its calls by sync policy
    And a shop whose model replies
      | tool calls                  | prompt tokens | completion tokens |
      | refund#r1 {"order": "A1", ! | 20            | 5                 |
    When the shop is asked "Refund" in blocking mode
    Then the shop's run is paused
    And the shop's run waits for "r1"
    And the tools ran "nothing"

  Scenario: A tool configured with approval: required pauses; approved, it runs once
    Given an actor config whose book_table tool has approval: required
    When the config's actor is asked "Book Chez Marie", then its book_table call is approved
      | tool calls                                                                      | text      |
      | get_weather#w1 {"city": "Paris"} ; book_table#b1 {"restaurant": "Chez Marie", "people": 2} |           |
      |                                                                                 | Booked.   |
    Then the config's run paused for b1 with only get_weather run, then answered after booking

  Scenario Outline: An MCP server's approval <rule> gates <gated>, the rest runs at once
    Given the shop also has the MCP test server, its approval <rule>
    And a shop whose model replies
      | tool calls                                       | prompt tokens | completion tokens |
      | echo#e1 {"text": "hi"} ; add#a1 {"a": 1, "b": 2} | 20            | 5                 |
    When the shop is asked "Echo and add" in blocking mode
    Then the shop's run is paused
    And the shop's run waits for "<gated>"

    Examples:
      | rule     | gated  |
      | required | e1, a1 |
      | ["echo"] | e1     |

  Scenario: An approved MCP call runs on resume, beside the one that ran before the pause
    Given the shop also has the MCP test server, its approval ["echo"]
    And a shop whose model replies
      | tool calls                                       | text  | prompt tokens | completion tokens |
      | echo#e1 {"text": "hi"} ; add#a1 {"a": 1, "b": 2} |       | 20            | 5                 |
      |                                                  | Done. | 30            | 2                 |
    When the shop is asked "Echo and add" in blocking mode
    And the first paused segment is resumed in blocking mode with
      | call | decision |
      | e1   | approve  |
    Then the shop's run is answered
    And the model's last request ends with these tool results
      | call | status  | says |
      | e1   | success | hi   |
      | a1   | success | 3    |

  Scenario Outline: Where nobody can approve (the OpenAI endpoint), a gated call is declined, never run (<mode>)
    Given a shop whose model replies
      | tool calls                                                          | text      | prompt tokens | completion tokens |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} |           | 20            | 5                 |
      |                                                                     | Not done. | 40            | 2                 |
    When the shop is asked "Refund A1" where nobody can approve, in <mode> mode
    Then the shop's run is answered
    And the segment's approval events are "run_started, run_finished"
    And the tools ran "lookup {"order": "A1"}"
    And the model's last request ends with these tool results
      | call | status  | says                                                                  |
      | l1   | success | order A1: 2 items                                                     |
      | r1   | error   | needs a person's approval, which is not available on this endpoint \| Do not retry |

    Examples:
      | mode     |
      | blocking |
      | events   |
