Feature: Every problem of a config is reported in one pass, each at its own field
  Loading (and `cleveractors validate`) checks the rules between fields even when other fields
  are wrong, so fixing what one report says never reveals a further problem. Each rule names the
  field it is about: a script on an actor whose provider is not `stub` is at `agent.script`, a
  repeated tool name at the tool that repeats it, and a scripted call of a tool the actor does
  not declare at that call's name. The provider's settings (the API key variable...) are checked
  on the valid part of an invalid config, in the same pass.

  Scenario: Repeated tool names are reported with a mistyped temperature
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        temperature: hot
        script: [{text: Hello.}]
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - {name: get_weather, handler: "cleveractors.demo:get_time"}
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.temperature: Input should be a valid number, unable to parse string as a number (got 'hot')
      agent.tools.1.name: tool names must be unique; tool 0 is named 'get_weather' too
      """

  Scenario: A script on an openai actor is reported at agent.script, with an unknown key
    Given the environment variable CLEVERACTORS_TEST_KEY holds a canary API key
    And an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: openai
        model: gpt-4o-mini
        api_key_env: CLEVERACTORS_TEST_KEY
        colour: blue
        script: [{text: Hello.}]
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.colour: unknown key
      agent.script: 'script' is only for provider 'stub', not 'openai'
      """

  Scenario: A stub script calling a tool the actor does not declare is refused at that call
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - {name: get_time, handler: "cleveractors.demo:get_time"}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: Paris is rainy.
          - tool_calls: [{name: get_wether, args: {city: Rome}}]
          - text: Rome I could not check.
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.script.2.tool_calls.0.name: calls 'get_wether', which the actor does not declare (declared: get_weather, get_time)
      """

  Scenario: A stub script of an actor without tools calls none
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.script.0.tool_calls.0.name: calls 'get_weather', which the actor does not declare (it declares no tools)
      """

  Scenario: A stub script may call a tool an MCP server will offer, unknown until it is connected
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        mcp_servers:
          - {name: files, command: [python, -m, files_server]}
        script:
          - tool_calls: [{name: read_file, args: {path: notes.txt}}]
          - text: Done.
      """
    When the actor is loaded from it
    Then the actor loads, with the tool get_weather declared

  Scenario: Five different problems are reported at once, each at its own field
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        temperature: hot
        colour: blue
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - name: get_weather
            handler: "cleveractors.demo:book_table"
            ends_turn: true
            concurrent: true
        script:
          - tool_calls: [{name: get_wether, args: {city: Paris}}]
          - text: Paris is rainy.
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.temperature: Input should be a valid number, unable to parse string as a number (got 'hot')
      agent.tools.1.concurrent: a tool with ends_turn: true cannot be concurrent: true (got True)
      agent.colour: unknown key
      agent.tools.1.name: tool names must be unique; tool 0 is named 'get_weather' too
      agent.script.0.tool_calls.0.name: calls 'get_wether', which the actor does not declare (declared: get_weather)
      """

  Scenario: The old and the new name of a key together are reported with the other problems
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        tool_max_rounds: 2
        max_tool_rounds: 0
        script: [{text: Hello.}]
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.max_tool_rounds: Input should be greater than 0 (got 0)
      agent.tool_max_rounds: the deprecated name of max_tool_rounds, given together with it; keep only agent.max_tool_rounds (got 2)
      """

  Scenario: An MCP server's rules are reported with its other fields' problems, each at its own field
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: [{text: Hello.}]
        mcp_servers:
          - name: web
            url: "http://127.0.0.1:1/mcp"
            timeout_s: 0
            env: {A: b}
            headers: {Authorization: "Bearer hunter2"}
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.mcp_servers.0.timeout_s: Input should be greater than 0
      agent.mcp_servers.0.env: 'env' is for a 'command' server; an HTTP server takes 'headers'
      agent.mcp_servers.0.headers.Authorization: looks like a credential: give it as '${VARIABLE}' and set the variable in the environment
      """

  Scenario: A missing API key variable is reported with the config's other problems
    Given the environment variable CLEVERACTORS_TEST_MISSING_KEY is not set
    And an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: openai
        model: gpt-4o-mini
        api_key_env: CLEVERACTORS_TEST_MISSING_KEY
        temperature: hot
        colour: blue
      """
    When the actor is loaded from it
    Then loading fails, naming the file, with exactly these problems:
      """
      agent.temperature: Input should be a valid number, unable to parse string as a number (got 'hot')
      agent.colour: unknown key
      agent.api_key_env: environment variable 'CLEVERACTORS_TEST_MISSING_KEY' is not set (provider 'openai' needs an API key; any value works for a server that ignores it)
      """
