Feature: A broken config is reported whole, in words a person can act on
  Loading (and `cleveractors validate`) reports every problem of a config in one run: fields,
  repeated tool names, invalid schemas and handlers that cannot be imported together. Each
  problem names its field and that field's own value, says what was expected rather than a
  regex, offers the closest key for a misspelt one, and YAML errors point at the line.

  Scenario: Repeated tool names, an invalid schema and an unimportable handler in one report
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: [{text: Hello.}]
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - name: convert
            handler: "cleveractors.demo:convert_temperature"
            parameters: {type: objekt}
          - {name: get_time, handler: "nowhere.clock:get_time"}
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "(3 problem(s)) ; agent.tools.1.name: tool names must be unique; tool 0 is named 'get_weather' too ; agent.tools.2: tool 'convert': parameters is not a valid JSON schema ; agent.tools.3: tool 'get_time': handler 'nowhere.clock:get_time' cannot be imported"

  Scenario: A misspelt key gets the closest known key
    Given an actor config file where agent.tool_max_round is 3
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.tool_max_round: unknown key; did you mean 'max_tool_rounds'?"

  Scenario: A misspelt key of a tool gets the closest key a tool takes
    Given an actor config file where agent.tools.0.timeout is 3
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.tools.0.timeout: unknown key; did you mean 'timeout_s'?"

  Scenario: A malformed handler says what a handler looks like, not a regex
    Given an actor config file where agent.tools.0.handler is get_weather
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.tools.0.handler: expected 'module:function', e.g. 'mytools:get_weather' (got 'get_weather')"
    And the error does not say "String should match pattern"

  Scenario: A rule between two fields names the field and its own value, not the whole object
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: [{text: Hello.}]
        tools:
          - name: book_table
            handler: "cleveractors.demo:book_table"
            ends_turn: true
            concurrent: true
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.tools.0.concurrent: a tool with ends_turn: true cannot be concurrent: true (got True)"
    And the error does not say "'handler':"

  Scenario: An empty file says so
    Given an actor config file with this text:
      """
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and ": the file is empty; an actor config needs 'name' and 'agent'"

  Scenario: A YAML syntax error names the file, the line and the column
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: [{text: Hello.}
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "actor.yaml:4:26: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence started at line 4, column 11)"
    And the error does not say "<unicode string>"
