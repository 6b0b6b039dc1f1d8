Feature: Tools that know who is asking: the run's context and its deps
  A tool parameter annotated `RunContext` (or `RunContext[MyDeps]`) receives the run's id, its
  session and caller, the actor's name, the usage so far and the `deps` the application passed
  with `execute(..., deps=...)`: for handlers named in YAML, functions and LangChain tools, sync
  or async. The parameter is in no schema the model sees, and a model that sets it is refused
  as for any unknown argument. `deps` stays in memory: never in the store, a log line or a span;
  a resumed run gets it again from its caller, and a run whose tools need it cannot start
  without it. An MCP server can receive per-caller headers built from the context.

  Scenario: No tool schema lists an injected parameter
    Given an actor whose YAML names the handlers my_orders, my_orders_sync and whoami
    And an agent built in code with the function my_orders and the LangChain tool shop_owner
    Then the schemas the models see are
      | tool           | properties | required |
      | my_orders      | status     | status   |
      | my_orders_sync | status     | status   |
      | whoami         |            |          |
      | shop_owner     | greeting   | greeting |

  Scenario Outline: The model setting <argument> of <tool> is refused as an unknown argument (<mode>)
    Given an actor whose YAML names the handlers my_orders, my_orders_sync and whoami
    And the model calls [<tool>#c1 <arguments>], then answers "Done."
    When the actor is asked "My orders?" as "alice" with the deps of "Ada", <mode>
    Then the run answered "Done."
    And the tool call c1 failed with "tool '<tool>' (call c1) got unknown argument(s) '<argument>'; its arguments are: status"
    And the tool <tool> never ran

    Examples:
      | tool           | arguments                                    | argument | mode      |
      | my_orders      | {"status": "open", "ctx": {"deps": "mine"}}  | ctx      | blocking  |
      | my_orders_sync | {"status": "open", "context": "x"}           | context  | streaming |
      | my_orders      | {"status": "open", "colour": "red"}          | colour   | streaming |

  Scenario: A LangChain tool's injected field is refused the same way
    Given an agent built in code with the function my_orders and the LangChain tool shop_owner
    And the model calls [shop_owner#c1 {"greeting": "Hi", "ctx": null}], then answers "Done."
    When the actor is asked "Greet." as "alice" with the deps of "Ada", blocking
    Then the tool call c1 failed with "tool 'shop_owner' (call c1) got unknown argument(s) 'ctx'; its arguments are: greeting"

  Scenario Outline: A tool reads the run id, session, caller, actor, usage so far and deps (<mode>)
    Given an actor whose YAML names the handlers my_orders, my_orders_sync and whoami
    And the actor keeps its sessions in a SQLite store
    And the model calls [whoami#c1 {} ; my_orders#c2 {"status": "open"} ; my_orders_sync#c3 {"status": "shipped"}], then answers "Done."
    When the actor is asked "Who am I?" in the session "s1" by the caller "alice" with the deps of "Ada", <mode>
    Then the run answered "Done."
    And whoami saw the run's id, the session "s1", the caller "alice", the actor "shop" and the usage of the first call
    And the tool call c2 output is "Ada has 2 open orders"
    And the tool call c3 output is "Ada has 3 shipped orders"

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A function and a LangChain tool in code read the deps
    Given an agent built in code with the function my_orders and the LangChain tool shop_owner
    And the model calls [my_orders#c1 {"status": "open"} ; shop_owner#c2 {"greeting": "Hello"}], then answers "Done."
    When the actor is asked "Greet." as "alice" with the deps of "Grace", blocking
    Then the tool call c1 output is "Grace has 2 open orders"
    And the tool call c2 output is "Hello, Grace"

  Scenario: A secret in the deps is in no stored byte, log line or span
    Given an actor whose YAML names the handlers my_orders, my_orders_sync and whoami
    And the actor keeps its sessions in a SQLite store
    And the actor's runs are traced with message content, and logged at DEBUG
    And the model calls [my_orders#c1 {"status": "open"}], then answers "Done."
    When the actor is asked "My orders?" in the session "s1" by the caller "alice" with the deps of "Ada", blocking
    Then the tool call c1 output is "Ada has 2 open orders"
    And the deps' secret is in no file of the SQLite store, no log line and no span

  Scenario: A resumption without the deps its tools need fails before any call, and with them goes on
    Given an actor whose YAML names the handlers my_orders, my_orders_sync and whoami
    And my_orders needs a person's approval
    And the actor keeps its sessions in a SQLite store
    And the model calls [my_orders#c1 {"status": "open"}], then answers "Done."
    When the actor is asked "My orders?" in the session "s1" by the caller "alice" with the deps of "Ada", blocking
    And the paused run is approved without deps
    Then the resumption failed with DepsMissingError naming my_orders
    And the resumption wrote no ledger row and asked the model nothing
    When the paused run is approved with the deps of "Ada"
    Then the run answered "Done."
    And the tool call c1 output is "Ada has 2 open orders"

  Scenario: A new message without the deps its tools need is refused at the call
    Given an actor whose YAML names the handlers my_orders, my_orders_sync and whoami
    When the actor is asked "My orders?" without deps
    Then the run was refused at the call with DepsMissingError "the tool(s) my_orders, my_orders_sync need deps"

  Scenario: An MCP server gets each caller's own headers on its one shared session
    Given the MCP test server "shop" over streamable HTTP, its token from $SHOP_TOKEN
    And the MCP server "shop" has caller_headers "support.context_tools:caller_headers"
    And the model calls [whose_call#c1 {}], then answers "Done."
    When "alice" with the deps of "Ada" and "bob" with the deps of "Grace" ask at once, with the MCP servers open
    Then alice's call whose_call output is "caller=alice owner=Ada"
    And bob's call whose_call output is "caller=bob owner=Grace"
    And the schema the model sees for whose_call has no properties
    And the secret appears in no result, tool output or log line

  Scenario: A caller_headers function that fails is an error the model reads
    Given the MCP test server "shop" over streamable HTTP, its token from $SHOP_TOKEN
    And the MCP server "shop" has caller_headers "support.context_tools:broken_headers"
    And the model calls [whose_call#c1 {}], then answers "Done."
    When "alice" with the deps of "Ada" and "bob" with the deps of "Grace" ask at once, with the MCP servers open
    Then alice's call whose_call failed with "mcp server 'shop': caller_headers failed: LookupError: no token on file for Ada"
    And bob's call whose_call failed with "mcp server 'shop': caller_headers failed: LookupError: no token on file for Grace"

  Scenario: A caller_headers entry on a command server is refused
    Given the MCP test server "files" over stdio
    And the MCP server "files" has caller_headers "support.context_tools:caller_headers"
    When the actor's MCP servers are opened and closed
    Then opening failed with ConfigurationError "'caller_headers' are for a 'url' server"

  Scenario: The web app builds each request's deps from the request and its caller
    Given the web app serves an actor answering "unused"
    And the web app requires the API keys "k-first,k-second"
    And the web app's actor calls my_orders, its deps built per request from the X-Shop header
    When the web app is sent a message to /chat with the key "k-first" and the X-Shop "north"
    And the web app is sent a message to /v1/chat/completions with the key "k-second" and the X-Shop "south"
    Then the web app answered 200
    And the web app's run for the caller "key-1" read the deps "north for key-1"
    And the web app's run for the caller "key-2" read the deps "south for key-2"

  Scenario: A ToolAgent used on its own gives the tool a context of its name alone
    When a ToolAgent named "solo" runs whoami outside any run
    Then whoami saw the run id "-", the actor "solo", no caller and no LLM call

  Scenario: An agent called as a tool serves the same caller with the same deps
    Given a clerk agent whose tool whoami ends its turn, called as a tool by the shop agent
    When the shop agent is asked "Who is asking the clerk?" by "alice" with the deps of "Ada"
    Then the clerk's answer names the caller "alice", the actor "clerk" and its own run
