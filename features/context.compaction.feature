Feature: Long conversations fit the model's context window
  The loop sizes every prompt before sending it (the provider's exact prompt tokens of the last
  call plus an estimate of what was added since) and, past the context budget, compacts what it
  sends: the oldest turns' tool outputs cleared first, then the oldest turns summarised by a
  `compaction` call billed like any other. The session keeps the summary, so it is written once
  per window fill, and keeps every turn whole. These run `ChatOpenAI` over real HTTP against a
  scripted server that refuses, as OpenAI does, any prompt longer than its window.

  Scenario: A 300-turn session with large tool outputs never overflows a 16k window
    Given a scripted OpenAI server with a 16000-token window, whose tool reports are 150 facts long
    And a stored openai actor with the tool long_report and a context_window of 16000
    When 300 messages are sent on one session
    Then every turn was answered and no request was refused
    And every prompt the server received stayed within the context budget of 12000 tokens
    And every summarising call is a ledger row with purpose compaction and a cost
    And the summarising calls came at most once per window fill
    And no request carried a tool call without its result
    And the session keeps all 300 turns whole, the tool outputs included
