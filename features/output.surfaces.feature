Feature: A typed actor on the command line: validate checks its output schema and says so
  `cleveractors validate` loads the actor file, whose `output_schema` must be a valid JSON
  Schema (a bad one is refused naming the field); for a typed actor it lists the answer's
  schema and mode beside the tools.

  Scenario: validate says the output schema was checked, with its mode
    Given a typed actor file
      """
      name: typed
      agent:
        provider: stub
        output_mode: tool
        output_schema:
          type: object
          properties: {city: {type: string}, rain: {type: boolean}}
          required: [city, rain]
        script: [{text: hi}]
      """
    When the typed actor file is given to "cleveractors validate"
    Then the typed command succeeded saying "output: object (city, rain): a valid JSON Schema, answered in tool mode"

  Scenario: validate of an actor without an output schema says nothing of one
    Given a typed actor file
      """
      name: plain
      agent:
        provider: stub
        script: [{text: hi}]
      """
    When the typed actor file is given to "cleveractors validate"
    Then the typed command succeeded saying "OK: plain (0 tools)"
    And the typed command did not say "output:"
