Feature: The README's example of a scripted OpenAI server behind an actor runs as written
  "Testing your own actors" shows `ScriptedOpenAIServer` behind an `openai` actor. The block
  after the marker comment `<!-- example: scripted-openai-server -->` is run here verbatim, so
  the README cannot drift from the library: its own asserts check the answer and the billing.

  Scenario: The README's scripted-server example runs, and its asserts hold
    Given the README's Python block marked "scripted-openai-server"
    When that README block is run as a script from an empty working directory
    Then that README block ran to its end
