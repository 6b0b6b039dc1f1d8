@property
Feature: The bill is exact whatever goes wrong (property-based)
  Hypothesis generates conversations for the scripted model: up to seven replies with text and
  parallel tool calls (the same tool twice, unknown tools, invalid arguments), provider errors,
  streams cut off after some chunks, replies without usage, failing tools, a caller cancelled
  while a tool runs, streaming consumers that stop after some events (break, aclose, their task
  cancelled), token budgets, round limits, output pruning and ends_turn tools. For each, the run
  must report exactly the tokens of the LLM calls the model served, estimates flagged, each call
  once; answer every tool call id exactly once; let only documented exceptions escape; and leave
  no task running. `nox -s property_tests` runs many more examples.

  Scenario: Generated conversations with faults are billed exactly, blocking and streaming
    Given the billing property's conversations are generated for the modes blocking, events and text
    When the billing property is checked on CLEVERACTORS_PROPERTY_EXAMPLES examples (default 1000)
    Then the billing property holds for every example
    And the billing property was checked on as many examples as asked for
