Feature: A wrong actor config or call is refused up front, saying what is wrong and where
  Loading a config validates it with pydantic (unknown keys are errors), imports every tool
  handler and reads the API key variable. Whatever is wrong raises one ConfigurationError
  naming the file, the field and the value, never a stack trace from deep inside LangChain.
  A malformed message or history is refused the same way, and `last_result` says so.

  Scenario Outline: A config with <problem> is refused, naming the file, the field and the value
    Given an actor config file where <field> is <value>
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "<message names>"
    And the error shows no traceback from inside the libraries it uses

    Examples:
      | problem                          | field                 | value      | message names                                                    |
      | a missing field                  | agent.provider        | (removed)  | agent.provider: Field required                                   |
      | a missing name                   | name                  | (removed)  | name: Field required                                             |
      | an agent that is not a mapping   | agent                 | [1, 2]     | agent: Input should be a valid dictionary ; (got [1, 2])        |
      | a mistyped field                 | agent.max_tool_rounds | many       | agent.max_tool_rounds ; (got 'many')                             |
      | a value out of range             | agent.max_tool_rounds | 0          | agent.max_tool_rounds ; greater than 0 ; (got 0)                 |
      | a stall limit of no time         | agent.stream_stall_timeout_s | 0   | agent.stream_stall_timeout_s ; greater than 0 ; (got 0)   |
      | an unknown provider              | agent.provider        | llamahub   | agent.provider ; 'openai', 'stub', 'anthropic' ; (got 'llamahub') |
      | an unknown key                   | agent.colour          | blue       | agent.colour: unknown key                                        |
      | an unknown key in a tool         | agent.tools.0.retries | 3          | agent.tools.0.retries: unknown key                               |
      | a malformed handler path         | agent.tools.0.handler | get_weather | agent.tools.0.handler ; (got 'get_weather')                     |
      | a tool name OpenAI refuses       | agent.tools.0.name    | get weather | agent.tools.0.name ; (got 'get weather')                        |
      | an empty name                    | name                  | ""         | name ; (got '')                                                  |
      | a stub provider without a script | agent.script          | (removed)  | agent.script: provider 'stub' needs a 'script'                   |
      | a malformed scripted reply       | agent.script.0.text   | [1, 2]     | agent.script.0.text ; (got [1, 2])                               |

  Scenario: A stub script for the openai provider is refused
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: openai
        model: gpt-4o-mini
        script: [{text: Hello.}]
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.script: 'script' is only for provider 'stub', not 'openai'"

  Scenario: A tool that ends the turn cannot also be concurrent
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
    Then loading fails with a ConfigurationError naming the file and "agent.tools.0 ; ends_turn: true cannot be concurrent: true"

  Scenario: Two tools with the same name are refused
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: stub
        script: [{text: Hello.}]
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - {name: get_weather, handler: "cleveractors.demo:get_time"}
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.tools.1.name: tool names must be unique; tool 0 is named 'get_weather' too"

  Scenario Outline: A handler that <problem> is refused at load time, naming the file and the handler
    Given an actor config file where agent.tools.0.handler is <handler>
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "handler '<handler>' ; <reason>"
    And the error shows no traceback from inside the libraries it uses

    Examples:
      | problem                    | handler                                       | reason                                  |
      | is in a missing module     | nowhere.tools:get_weather                     | cannot be imported: ModuleNotFoundError: No module named 'nowhere' |
      | is missing from its module | cleveractors.demo:get_wether    | cannot be imported ; 'get_wether'       |
      | is not callable            | cleveractors.demo:__all__       | is not callable                         |

  Scenario: A parameters schema that is not valid JSON schema is refused at load time
    Given an actor config file where agent.tools.0.parameters is {type: objekt}
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "tool 'get_weather': parameters is not a valid JSON schema ; 'objekt'"

  Scenario: A missing API key variable is refused at load time, naming the variable
    Given the environment variable CLEVERACTORS_TEST_MISSING_KEY is not set
    And an actor config file with this text:
      """
      name: weather-assistant
      agent:
        provider: openai
        model: gpt-4o-mini
        api_key_env: CLEVERACTORS_TEST_MISSING_KEY
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "agent.api_key_env ; 'CLEVERACTORS_TEST_MISSING_KEY' is not set"

  Scenario: A file that is not YAML is refused, naming the file
    Given an actor config file with this text:
      """
      name: weather-assistant
      agent: {provider: stub, script: [
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "not valid YAML"
    And the error shows no traceback from inside the libraries it uses

  Scenario: A YAML file that is not a mapping is refused, naming the file
    Given an actor config file with this text:
      """
      - name: weather-assistant
      """
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "(top level): expected a mapping with 'name' and 'agent', not a list"

  Scenario: A config file that does not exist is refused, naming the file
    Given an actor config path that does not exist
    When the actor is loaded from it
    Then loading fails with a ConfigurationError naming the file and "cannot read actor config (No such file or directory)"

  Scenario: A config given as a dict is named as such in the error
    Given an actor config dict where agent.provider is llamahub
    When the actor is loaded from it
    Then loading fails with a ConfigurationError saying "<dict>: invalid actor config (1 problem(s)) ; agent.provider"

  Scenario: A valid config, given as a dict or a validated ActorConfig, loads with its tools
    Given an actor config dict where agent.tools.0.description is Weather now
    When the actor is loaded from a validated ActorConfig of it
    Then the actor loads, with the tool get_weather declared

  Scenario: A tool's parameters are derived from its handler's signature when not declared
    Given an actor config dict where agent.tools.0.timeout_s is 2
    When the actor is loaded from it
    Then the actor loads, with the tool get_weather declared
    And the tool get_weather takes the arguments {"city": {"type": "string", "description": "The city's name, e.g. Paris."}} and requires "city"

  Scenario: A YAML actor file runs a tool-using turn
    Given the actor is described by this config file:
      """
      name: weather-assistant
      agent:
        type: llm
        provider: stub
        system_prompt: You are a concise assistant.
        max_tool_rounds: 4
        tools:
          - name: get_weather
            description: Current weather for a city
            handler: cleveractors.demo:get_weather
            parameters: {type: object, properties: {city: {type: string}}, required: [city]}
            timeout_s: 30
        script:
          - tool_calls: [{name: get_weather, args: {city: Rome}, id: w1}]
          - text: Sunny and 24 C in Rome.
      """
    When the actor is asked "Weather in Rome?" in streaming mode
    Then the answer is "Sunny and 24 C in Rome."
    And the handlers ran in this order:
      | tool        | arguments        |
      | get_weather | {"city": "Rome"} |
    And the reported tokens are what the model reported for each call

  Scenario Outline: A malformed <input> is refused with ConfigurationError, and last_result says so (<mode>)
    Given the actor's model replies:
      | text   |
      | Hello. |
    When the actor is asked <message> with the history <history> in <mode> mode
    Then the call failed with ConfigurationError "<error>"
    And last_result records the error ConfigurationError with zero usage
    And last_token_usage_var holds the usage of last_result
    And the model was never asked

    Examples:
      | input                    | mode      | message       | history                                            | error                                  |
      | empty message            | blocking  | ""            | null                                               | message must be a non-empty string     |
      | blank message            | streaming | "   "         | null                                               | message must be a non-empty string     |
      | history turn with no role | blocking | "Hi"          | [{"role": "user", "content": "a"}, {"content": "b"}] | history[1] is not a chat turn          |
      | history turn of an unknown role | streaming | "Hi" | [{"role": "wizard", "content": "abracadabra"}]     | history[0] is not a chat turn          |
      | history turn that is a number | blocking | "Hi"       | [42]                                               | history[0] is not a chat turn          |

  Scenario Outline: An agent built in code with <tools> is refused
    When an agent is built in code with <tools>
    Then building the agent fails with a ConfigurationError mentioning "<error>"

    Examples:
      | tools             | error                                           |
      | get_weather twice | two tools are named 'get_weather'               |
      | a number          | not a tool: 42                                  |
      | a function taking a callback | cannot derive a parameters schema ; declare 'parameters' explicitly |

  Scenario Outline: A tool built in code with <how> cannot both end the turn and be concurrent
    When regression: a tool "book_now" is built with <how>, both ends_turn and concurrent
    Then building the agent fails with a ConfigurationError mentioning "book_now"

    Examples:
      | how                     |
      | Tool(...)               |
      | tool_from_callable(...) |

  Scenario Outline: A history that is <input> is refused, and last_result says so (<mode>)
    Given the actor's model replies:
      | text   |
      | Hello. |
    When regression: the actor is asked "hi" in <mode> mode with the history <history>
    Then the call failed with ConfigurationError "history"
    And last_result records the error ConfigurationError with zero usage
    And the model was never asked

    Examples:
      | input               | mode      | history          |
      | a string            | blocking  | "abc"            |
      | a string            | streaming | "abc"            |
      | a dict, not a list  | blocking  | {"role": "user"} |
      | a dict, not a list  | streaming | {"role": "user"} |
      | a number            | blocking  | 42               |
