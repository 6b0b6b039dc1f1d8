Feature: The billing rule the wire tests hold every call to
  A test over the real wire cannot choose where a hang-up lands: under load it may land after the
  next request went out, and that call is then estimated, as documented. So the wire tests check
  the rule, call by call against the request it answers (support.billing): a call not flagged is
  the server's bill for its request exactly (0 and 0 when the server billed nothing); a flagged
  call's prompt is exactly what the estimate rule gives for the messages it sent, or, cut off
  before the model saw them, more than the previous call's; a call the server never received
  got no completion; every request the server received is a call.

  Scenario Outline: Calls <calls> against the rule's prompts <rule prompts>: <problems>
    Given the billing rule's server billed one request, 8 prompt and 4 completion tokens
    And the estimate rule gave <rule prompts> prompt tokens for the messages of the calls
    When the billing rule checks the calls <calls>
    Then the billing rule finds <problems>

    Examples:
      | calls                    | rule prompts | problems                                                  |
      | 8/4                      | 16           | nothing                                                   |
      | 8/4 ; 37/0 estimated     | 16 ; 37      | nothing                                                   |
      | 16/2 estimated           | 16           | nothing                                                   |
      | 8/4 ; 0/0                | 16 ; 37      | nothing                                                   |
      | 8/4 ; 17/0 estimated     | 16           | nothing                                                   |
      | 8/5                      | 16           | "call 0: exact (8, 5), the server billed (8, 4)"          |
      | 8/4 ; 30/0               | 16 ; 37      | "call 1: exact (30, 0), the server billed (0, 0)"         |
      | 8/4 ; 38/0 estimated     | 16 ; 37      | "call 1: estimated prompt 38, the rule gives 37"          |
      | 15/4 estimated           | 16           | "call 0: estimated prompt 15, the rule gives 16"          |
      | 8/4 ; 16/0 estimated     | 16           | "call 1: estimated prompt 16, not above 16"               |
      | 8/4 ; 37/3 estimated     | 16 ; 37      | "bills a completion the server never sent"                |
      | none                     | none         | "request 0 (billed BilledCall(request_index=0"            |
