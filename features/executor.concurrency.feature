Feature: Concurrent runs and concurrent tools keep to themselves
  One executor serves many messages at once: each run's counts are its own. Within a batch,
  calls to tools declared `concurrent: true` run at the same time; their results still stand
  in the model's order, and one failing call does not cancel the others.

  Scenario Outline: 50 messages at once on one executor each get exactly their own counts (<mode>)
    Given the actor's model answers every message with "Noted, I will remember that."
    And 50 messages of different lengths, each already sent alone to a fresh actor
    When the 50 messages are sent at once to one executor in <mode> mode
    Then each run reports exactly the tokens of its message sent alone
    And each run's last_token_usage_var holds its own usage
    And the model was asked once per message

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: Concurrent calls of a slow tool overlap, and their results keep the model's order
    Given the actor declares these tools:
      | name        | handler     | concurrent |
      | slow_lookup | slow_lookup | yes        |
    And the actor's model replies:
      | text             | tool calls                                                                                                                 |
      |                  | slow_lookup#s1 {"query": "a", "seconds": 0.2} ; slow_lookup#s2 {"query": "b", "seconds": 0.15} ; slow_lookup#s3 {"query": "c", "seconds": 0.1} |
      | All three found. |                                                                                                                            |
    When the actor is asked "Look up a, b and c." in blocking mode
    Then the answer is "All three found."
    And the slow_lookup calls overlapped in time
    And the slow_lookup handlers finished in the order of the queries c, b and a
    And the model's request 2 answers the calls s1, s2 and s3 with one tool message each, in that order
    And the model's request 2 carries the tool results:
      | call id | status  | content              |
      | s1      | success | a: found after 0.2s  |
      | s2      | success | b: found after 0.15s |
      | s3      | success | c: found after 0.1s  |

  Scenario Outline: A failing or timed-out concurrent call does not cancel its siblings (<mode>)
    Given the actor declares these tools:
      | name             | handler       | concurrent | timeout s |
      | slow_lookup      | slow_lookup   | yes        |           |
      | broken_lookup    | broken_lookup | yes        |           |
      | impatient_lookup | slow_lookup   | yes        | 0.05      |
    And the actor's model replies:
      | text                   | tool calls                                                                                                                               |
      |                        | slow_lookup#s1 {"query": "a", "seconds": 0.1} ; broken_lookup#b1 {"query": "b"} ; impatient_lookup#i1 {"query": "c", "seconds": 30} ; slow_lookup#s2 {"query": "d", "seconds": 0.1} |
      | Two of four found.     |                                                                                                                                          |
    When the actor is asked "Look up a, b, c and d." in <mode> mode
    Then the answer is "Two of four found."
    And the model's request 2 answers the calls s1, b1, i1 and s2 with one tool message each, in that order
    And the model's request 2 carries the tool results:
      | call id | status  | content             |
      | s1      | success | a: found after 0.1s |
      | s2      | success | d: found after 0.1s |
    And the model's request 2 carries an error for call b1 mentioning "raised LookupError"
    And the model's request 2 carries an error for call i1 mentioning "timed out after 0.05s"
    And the slow_lookup handlers ended like this:
      | query | ended     |
      | a     | ok        |
      | c     | cancelled |
      | d     | ok        |

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: Calls to tools not declared concurrent run one after another
    Given the actor declares the demo tool slow_lookup
    And the actor's model replies:
      | text          | tool calls                                                                         |
      |               | slow_lookup#s1 {"query": "a", "seconds": 0.05} ; slow_lookup#s2 {"query": "b", "seconds": 0.05} |
      | Both found.   |                                                                                    |
    When the actor is asked "Look up a and b." in blocking mode
    Then the answer is "Both found."
    And the slow_lookup calls ran one after another
