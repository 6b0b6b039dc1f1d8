Feature: Over the real wire, a paused then resumed turn is a request the provider accepts

  The scripted servers validate what they are sent as the providers do: the Anthropic one refuses
  (HTTP 400) a thinking turn whose tool use does not start with its signed thinking block, or a
  tool result without tools; the step below also checks each tool call is answered right after
  it, in the model's order, as both APIs require. The bills are the servers' own records.

  Scenario Outline: <provider>: paused, resumed from <store> with an edit and a rejection, accepted and billed once (<mode>)
    Given a shop whose model replies
      | tool calls                                                                                   | text  |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} ; send_mail#m1 {"to": "ann"} |       |
      |                                                                                              | Done. |
    And the shop's model is <provider> against its scripted server
    And the shop keeps its runs in <store>
    When the shop is asked "Refund A1 and tell Ann" in <mode> mode
    Then the shop's run is paused
    And the tools ran "lookup {"order": "A1"}"
    When the first paused segment is resumed in <mode> mode with
      | call | decision | arguments                     | reason  |
      | r1   | edit     | {"order": "A1", "amount": 20} |         |
      | m1   | reject   |                               | not now |
    Then the shop's run is answered
    And the server accepted every request, the resumed one answering l1, r1, m1 in order
    And the resumed request tells the model of the edit and the rejection
    And each segment's usage is what the server billed for it, none twice

    Examples:
      | provider                    | mode     | store  |
      | ChatOpenAI                  | blocking | memory |
      | ChatOpenAI                  | events   | memory |
      | ChatOpenAI                  | events   | sqlite |
      | ChatAnthropic with thinking | blocking | memory |
      | ChatAnthropic with thinking | events   | memory |
      | ChatAnthropic with thinking | blocking | sqlite |
      | ChatAnthropic with thinking | events   | sqlite |

  Scenario Outline: <provider>: a new message over the pause sends a transcript the provider accepts (<mode>)
    Given a shop whose model replies
      | tool calls                                                          | text          |
      | lookup#l1 {"order": "A1"} ; refund#r1 {"order": "A1", "amount": 30} |               |
      |                                                                     | Nothing then. |
    And the shop's model is <provider> against its scripted server
    And the shop keeps its runs in sqlite
    When the shop is asked "Refund A1" in <mode> mode
    And a new message "Forget it" is sent on the shop's session in <mode> mode
    Then the shop's run is answered
    And the server accepted every request, the last one answering l1, r1 in order, then "Forget it"
    And each segment's usage is what the server billed for it, none twice

    Examples:
      | provider                    | mode     |
      | ChatOpenAI                  | blocking |
      | ChatAnthropic with thinking | events   |
