Feature: Long conversations fit the model's context window
  The loop sizes every prompt before sending it (the provider's exact prompt tokens of the last
  call plus an estimate of what was added since) and, past the context budget, compacts what it
  sends: the oldest turns' tool outputs cleared first, then the oldest turns summarised by a
  `compaction` call billed like any other. The session keeps the summary, so it is written once
  per window fill, and keeps every turn whole. These run `ChatOpenAI` over real HTTP against a
  scripted server that refuses, as OpenAI does, any prompt longer than its window.

  Scenario: A 300-turn session with large tool outputs never overflows a 16k window
    Given a scripted OpenAI server with a 16000-token window, whose tool reports are 150 facts long
    And a stored openai actor with the tool long_report, a context_window of 16000, a context_budget of 12000 and the compaction_model gpt-4.1-nano
    When 300 messages are sent on one session
    Then every turn was answered and no request was refused
    And every prompt the server received stayed within the context budget of 12000 tokens
    And every summarising call is a ledger row with purpose compaction and a cost
    And the summarising calls were answered by gpt-4.1-nano
    And some compactions only cleared old tool outputs and the others also summarised
    And the summarising calls came at most once per window fill
    And no request carried a tool call without its result
    And the session keeps all 300 turns whole, the tool outputs included

  Scenario: A prompt refused as too long is compacted once and retried once, both billed
    Given a scripted OpenAI server with a 1500-token window that answers "Earlier: the user talked at length." then "Here is the answer."
    When an openai actor on that server is asked "What now?" after 4 turns of 200 words each
    Then the context run answered "Here is the answer."
    And the context run's calls were:
      | purpose    | attempt | status |
      | round      | 1       | failed |
      | compaction | 1       | ok     |
      | round      | 2       | ok     |
    And the compaction and the retried call each cost something
    And the context run emitted context_compacted for a context_length_error

  Scenario: The summarising call is a chat span of its own, a child of the run's span
    Given a scripted OpenAI server with a 1500-token window that answers "Earlier: the user talked at length." then "Here is the answer."
    When an openai actor on that server, its spans kept, is asked "What now?" after 4 turns of 200 words each
    Then the context run answered "Here is the answer."
    And the context run's chat spans were:
      | purpose    | status |
      | round      | error  |
      | compaction | ok     |
      | round      | ok     |

  Scenario: A prompt refused again after its compaction fails the run with ContextWindowExceededError
    Given a scripted OpenAI server with a 1500-token window that answers "Earlier: the user talked at length." then "Here is the answer."
    When an openai actor on that server is asked a 2500-word message after 2 turns of 200 words each
    Then the context run failed with ContextWindowExceededError saying "again after one compaction and one retry"
    And the context run's calls were:
      | purpose    | attempt | status |
      | round      | 1       | failed |
      | compaction | 1       | ok     |
      | round      | 2       | failed |

  Scenario: The scripted server refuses a prompt over its window as OpenAI does
    Given a scripted OpenAI server with a 5-token window that answers "one" then "two"
    When the openai SDK sends the windowed server a 6-word prompt
    Then the openai SDK raised BadRequestError with the code context_length_exceeded

  Scenario: A summarising request refused too fails the run with ContextWindowExceededError
    Given a stub actor whose model refuses 2 times with "prompt is too long: 250000 tokens > 200000 maximum"
    When the stub actor is asked "Hello?" after 3 turns of 50 words each
    Then the context run failed with ContextWindowExceededError saying "refused the prompt as too long"
    And the context run's calls were:
      | purpose    | attempt | status |
      | round      | 1       | failed |
      | compaction | 1       | failed |

  Scenario: A refusal with no history to compact fails the run at once with ContextWindowExceededError
    Given a stub actor whose model refuses 1 times with "prompt is too long: 250000 tokens > 200000 maximum"
    When the stub actor is asked "Hello?" after 0 turns of 50 words each
    Then the context run failed with ContextWindowExceededError saying "refused the prompt as too long"
    And the context run's calls were:
      | purpose | attempt | status |
      | round   | 1       | failed |

  Scenario: A context budget not below the context window is refused, naming the field
    When the context config with a context_window of 1000 and a context_budget of 1000 is loaded
    Then the context config failed saying "agent.context_budget: must be below context_window (1000), to leave room for the answer (got 1000)"

  Scenario: A summarising call that fails for another reason fails the run with its error
    Given a stub actor whose replies are:
      | error                                              | status | text |
      | prompt is too long: 250000 tokens > 200000 maximum | 400    |      |
      | the summariser is down                             | 503    |      |
    When the stub actor is asked "Hello?" after 3 turns of 50 words each
    Then the context run failed with ModelAPIError saying "the summariser is down"
    And the context run's calls were:
      | purpose    | attempt | status |
      | round      | 1       | failed |
      | compaction | 1       | failed |

  Scenario: A retry after compaction that fails for another reason fails the run with its error
    Given a stub actor whose replies are:
      | error                                              | status | text     |
      | prompt is too long: 250000 tokens > 200000 maximum | 400    |          |
      |                                                    |        | Earlier. |
      | the model is down                                  | 503    |          |
    When the stub actor is asked "Hello?" after 3 turns of 50 words each
    Then the context run failed with ModelAPIError saying "the model is down"
    And the context run's calls were:
      | purpose    | attempt | status |
      | round      | 1       | failed |
      | compaction | 1       | ok     |
      | round      | 2       | failed |

  Scenario: Anthropic's "prompt is too long" over the wire is compacted once and retried once
    Given a scripted Anthropic server that refuses with "prompt is too long: 210000 tokens > 200000 maximum" then answers "Earlier: long talk." then "Done."
    When an anthropic actor on that server is asked "So?" after 3 turns of 50 words each
    Then the context run answered "Done."
    And the context run's calls were:
      | purpose    | attempt | status |
      | round      | 1       | failed |
      | compaction | 1       | ok     |
      | round      | 2       | ok     |
    And the context run emitted context_compacted for a context_length_error
