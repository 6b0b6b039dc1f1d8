Feature: The library never loads its test doubles or test-only dependencies
  `cleveractors.testing` ships doubles for users' tests, and Hypothesis is a test dependency:
  an application that imports the library, or runs a `stub` actor, loads neither.

  Scenario: Importing the library's modules loads neither cleveractors.testing nor Hypothesis
    When a fresh Python interpreter imports these modules:
      | module                       |
      | cleveractors                 |
      | cleveractors.executor        |
      | cleveractors.config          |
      | cleveractors.providers       |
      | cleveractors.providers.stub  |
      | cleveractors.agents          |
      | cleveractors.tools           |
      | cleveractors.store           |
      | cleveractors.web             |
      | cleveractors.cli             |
      | cleveractors.tokens          |
      | cleveractors.demo            |
    Then that interpreter has not loaded cleveractors.testing
    And that interpreter has not loaded hypothesis

  Scenario: Running a stub actor to its answer does not load cleveractors.testing
    When a fresh Python interpreter runs the stub actor "What's the weather in Paris and in Rome?" from examples/demo_actor.yaml
    Then that interpreter printed the demo actor's answer
    And that interpreter has not loaded cleveractors.testing

  Scenario: The check sees cleveractors.testing when something does import it
    When a fresh Python interpreter imports these modules:
      | module               |
      | cleveractors.testing |
    Then that interpreter has loaded cleveractors.testing

  Scenario: The store is a service the executor calls: it imports no agent, no loop, no executor
    When the imports of the modules under src/cleveractors/store are read
    Then none of them is from cleveractors.agents, cleveractors.turns or cleveractors.executor

  Scenario: The import check sees an import of the agents where there is one
    When the imports of the modules under src/cleveractors/turns.py are read
    Then one of them is from cleveractors.agents
