Feature: An agent calls another agent as a tool, and the run tree has one bill
  A parent's model calls a child agent like any tool, with a message; the child runs a whole
  turn of its own (its own run id, its parent's named) and its answer is the tool's output. The
  parent's result counts every token of the tree exactly once, per agent too.

  Background:
    Given a folder holding the actor config "researcher.yaml":
      """
      name: researcher
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: It rains in Paris.
      """

  Scenario Outline: A parent calls an actor file as a tool; the tree's calls are the parent's totals (<mode>)
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
            description: Looks things up.
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather in Paris}}]
          - text: The researcher says it rains in Paris.
      """
    When the actor of "boss.yaml" is asked "Weather?" in <mode> mode
    Then the answer is "The researcher says it rains in Paris."
    And the tool researcher returned "It rains in Paris." to the parent's model
    And the run has one child run, of researcher, answered, its parent the run itself
    And the calls of researcher carry the child's run id and the parent's
    And the result's totals are the sum of every call of the tree, by agent: boss 2, researcher 2

    Examples:
      | mode     |
      | blocking |
      | streamed |

  Scenario: The tool of an actor file takes the name it is given, and one message
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - {agent: researcher.yaml, name: ask_researcher, description: Looks things up.}
        script:
          - text: Nothing to look up.
      """
    When the actor of "boss.yaml" is loaded
    Then its tool ask_researcher is described as "Looks things up." and takes a required string "message"

  Scenario: A child's events stream inside the parent's, tagged with the agent path
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather in Paris}}]
          - text: Done.
      """
    When the actor of "boss.yaml" is asked "Weather?" in streamed mode
    Then between the parent's tool_call_started and tool_call_finished of researcher come the child's events, each an agent_event with the path boss > researcher
    And the child's events include its get_weather call and its text "It rains in Paris."
    And the parent's own text deltas are "Done." alone
    And every event survives a JSON round trip through event_adapter

  Scenario: /chat streams the child's events as agent_event frames
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather in Paris}}]
          - text: Done.
      """
    When the actor of "boss.yaml" is sent "Weather?" on /chat
    Then the /chat stream has agent_event frames with the path boss > researcher, its own text "Done."

  Scenario: /ai-sdk streams the child's events as transient data parts, its answer as the tool's output
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather in Paris}}]
          - text: Done.
      """
    When the actor of "boss.yaml" is sent "Weather?" on /ai-sdk
    Then the /ai-sdk stream has data-agent-event parts with the path boss > researcher, and the researcher's answer "It rains in Paris." as its tool output

  Scenario: A grandchild's events carry the whole agent path, and its calls are the root's too
    Given in that folder the actor config "middle.yaml":
      """
      name: middle
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather}}]
          - text: The researcher says it rains.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: middle.yaml
        script:
          - tool_calls: [{name: middle, args: {message: "Weather?"}}]
          - text: Middle says it rains.
      """
    When the actor of "boss.yaml" is asked "Weather?" in streamed mode
    Then the answer is "Middle says it rains."
    And the events include agent_events with the path boss > middle > researcher
    And the result's totals are the sum of every call of the tree, by agent: boss 2, middle 2, researcher 2

  Scenario: A grandchild deeper than max_agent_depth is refused, and the model reads why
    Given in that folder the actor config "middle.yaml":
      """
      name: middle
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather}}]
          - text: I could not ask the researcher.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        max_agent_depth: 1
        tools:
          - agent: middle.yaml
        script:
          - tool_calls: [{name: middle, args: {message: "Weather?"}}]
          - text: Middle could not help.
      """
    When the actor of "boss.yaml" is asked "Weather?" in streamed mode
    Then the answer is "Middle could not help."
    And the child run of middle read the error "agent 'researcher' not called: agents may call agents 1 deep (max_agent_depth)" from its researcher call

  Scenario: Actor files that call each other in a cycle are refused when loading
    Given in that folder the actor config "a.yaml":
      """
      name: a
      agent:
        provider: stub
        tools:
          - agent: b.yaml
        script:
          - text: hi
      """
    And in that folder the actor config "b.yaml":
      """
      name: b
      agent:
        provider: stub
        tools:
          - agent: a.yaml
        script:
          - text: hi
      """
    When the actor of "a.yaml" is loaded
    Then loading fails with a ConfigurationError naming the cycle a.yaml -> b.yaml -> a.yaml

  Scenario: A child over its own budget answers by synthesis, and the parent finishes
    Given in that folder the actor config "thrifty.yaml":
      """
      name: thrifty
      agent:
        provider: stub
        token_budget: 5
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: From what I have, it rains in Paris.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        token_budget: 1000
        tools:
          - agent: thrifty.yaml
        script:
          - tool_calls: [{name: thrifty, args: {message: "Weather in Paris?"}}]
          - text: It rains, says thrifty.
      """
    When the actor of "boss.yaml" is asked "Weather?" in blocking mode
    Then the answer is "It rains, says thrifty."
    And the child run of thrifty answered by synthesis for "budget"
    And the result's totals are the sum of every call of the tree, by agent: boss 2, thrifty 2

  Scenario: A child draws from what is left of its parent's token budget
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        token_budget: 10
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather in Paris}}]
          - text: From what I have, it rains.
      """
    When the actor of "boss.yaml" is asked "Weather?" in blocking mode
    Then the child run of researcher answered by synthesis for "budget"
    And the run answered by synthesis for "budget"

  Scenario: An agent built in code is a tool of another, and an executor is too
    Given a researcher agent built in code that answers "It rains."
    And a boss agent built in code with the researcher as_tool named "ask" and an executor's as_tool
    When the boss agent is asked "Weather?"
    Then the answer is "Both say it rains."
    And the run has 2 child runs, of researcher and helper
    And the result's totals are the sum of every call of the tree, by agent: boss 2, researcher 1, helper 1

  Scenario: Every ledger row of the tree carries its run and its parent's; their sum is the parent's totals
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      store: {url: "sqlite:///ledger.db"}
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather in Paris}}]
          - text: The researcher says it rains in Paris.
      """
    When the actor of "boss.yaml" is asked "Weather?" in blocking mode
    Then the store's ledger has 4 rows, 2 of the child run naming the parent run, whose sum is the result's totals

  Scenario: The child's invoke_agent span is a child of the parent's execute_tool span
    Given a tracer provider and a meter provider that keep what they receive, and a sampler that notes what it is shown
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: researcher.yaml
        script:
          - tool_calls: [{name: researcher, args: {message: Find the weather in Paris}}]
          - text: Done.
      """
    When the traced actor of "boss.yaml" is asked "Weather?"
    Then the span "invoke_agent researcher" is a child of the span "execute_tool researcher"
    And the span "execute_tool get_weather" is a child of the span "invoke_agent researcher"
    And the researcher's chat spans are children of the span "invoke_agent researcher"

  Scenario: A child whose model fails is an error the parent's model reads, and the parent goes on
    Given in that folder the actor config "broken.yaml":
      """
      name: broken
      agent:
        provider: stub
        max_retries: 0
        script:
          - error: the provider is down
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: broken.yaml
        script:
          - tool_calls: [{name: broken, args: {message: "Anything?"}}]
          - text: The helper is down.
      """
    When the actor of "boss.yaml" is asked "Weather?" in blocking mode
    Then the answer is "The helper is down."
    And the tool broken failed with "agent 'broken' failed: " for the parent's model
    And the run has one child run, of broken, failed, its parent the run itself

  Scenario: An agent's tool needs a valid tool name, and an actor file's tools are built from the file
    Then an agent named "my helper" cannot be a tool without a name, but can be one named "helper"
    And LLMAgent.from_config refuses a config whose tools name an actor file

  Scenario: An agent's tool called outside any run runs the agent's turn on its own
    Given a researcher agent built in code that answers "It rains."
    When its tool is called directly with the message "Weather?"
    Then the tool's output is "It rains."

  Scenario Outline: A child's call that needs approval pauses the whole tree; a decision by its call id resumes it (<decision>)
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: <child answer>
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      store: {url: "sqlite:///tree.db"}
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
          - text: <answer>
      """
    When the actor of "boss.yaml" is asked "Weather?" in streamed mode
    Then the streamed run paused, the child announcing its call get_weather asked by boss > careful
    When that call is decided "<decision>" in streamed mode
    Then the answer is "<answer>"
    And the tool careful returned "<child answer>" to the parent's model
    And the child's get_weather call was <fate>
    And the store's ledger holds every call of the tree once, the sum of both segments' bills

    Examples:
      | decision | child answer                     | answer                          | fate     |
      | approve  | It rains in Paris.               | Careful says it rains in Paris. | run      |
      | reject   | I was not allowed to look it up. | Careful could not look it up.   | declined |

  Scenario: A grandchild's call pauses the tree two agents deep, and resumes by its call id
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: It rains in Paris.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
          - text: Careful says it rains in Paris.
      """
    And in that folder the actor config "chief.yaml":
      """
      name: chief
      agent:
        provider: stub
        tools:
          - agent: boss.yaml
        script:
          - tool_calls: [{name: boss, args: {message: "Weather?"}}]
          - text: The boss says it rains in Paris.
      """
    When the actor of "chief.yaml" is asked "Weather?" in blocking mode
    Then the run paused waiting on get_weather asked by chief > boss > careful
    And a decision on a call id the tree does not have is refused, naming it
    When that call is decided "approve" in blocking mode
    Then the answer is "The boss says it rains in Paris."
    And the tool boss returned "Careful says it rains in Paris." to the parent's model

  Scenario: A call of the parent's batch that ran before the pause does not run again on resuming
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: It rains in Paris.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather"}
          - agent: careful.yaml
        script:
          - tool_calls:
              - {name: get_weather, args: {city: Lyon}}
              - {name: careful, args: {message: "Weather in Paris?"}}
          - text: Lyon is sunny; careful says it rains in Paris.
      """
    When the actor of "boss.yaml" is asked "Weather?" in streamed mode
    Then the streamed run paused, the child announcing its call get_weather asked by boss > careful
    When that call is decided "approve" in streamed mode
    Then the answer is "Lyon is sunny; careful says it rains in Paris."
    And the parent's own get_weather call ran once over both segments

  Scenario: A new message instead of a decision declines the waiting child's call, and the session keeps a whole turn
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      store: {url: "sqlite:///superseded.db"}
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
      """
    When the actor of "boss.yaml" is asked "Weather?" in session "s-tree"
    And the actor is sent "Forget it." in session "s-tree"
    Then the session's first turn answers the careful call as declined for the new message

  Scenario: Where nobody can approve a call, a child's call that needs approval is declined and the tree answers
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: I was not allowed to look it up.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
          - text: Careful could not look it up.
      """
    When the actor of "boss.yaml" is asked "Weather?" where nobody can approve a call
    Then the answer is "Careful could not look it up."
    And the tool careful returned "I was not allowed to look it up." to the parent's model

  Scenario: A decision on a child's call is refused once the actor no longer offers the agent that asked
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      store: {url: "sqlite:///changed.db"}
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
      """
    When the actor of "boss.yaml" is asked "Weather?" in blocking mode
    Then the run paused waiting on get_weather asked by boss > careful
    Given in that folder the actor config "boss.yaml":
      """
      name: boss
      store: {url: "sqlite:///changed.db"}
      agent:
        provider: stub
        script:
          - text: I ask nobody now.
      """
    When the actor of "boss.yaml" is loaded
    Then a decision on that call is refused: agent tool 'careful' is no longer offered

  Scenario: /ai-sdk asks the client to approve a child's call, and its approval resumes the tree
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: It rains in Paris.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
          - text: Careful says it rains in Paris.
      """
    When the actor of "boss.yaml" is sent "Weather?" on /ai-sdk and the client approves what it is asked
    Then the first /ai-sdk stream asked to approve the get_weather call, the call shown as a tool part
    And the second /ai-sdk stream ends the get_weather call and then the careful call with "It rains in Paris."

  Scenario: A child's call that waited past its expiry is read as declined when the tree resumes with no decision
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        approval_timeout_s: 0.2
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: I was not allowed to look it up.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      store: {url: "sqlite:///expired.db"}
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
          - text: Careful could not look it up.
      """
    When the actor of "boss.yaml" is asked "Weather?" in streamed mode
    Then the streamed run paused, the child announcing its call get_weather asked by boss > careful
    When the tree waits 0.3 seconds and is resumed with no decision
    Then the answer is "Careful could not look it up."
    And the child's get_weather call was expired
    And the store's audit lists that call as expired under the paused run

  Scenario: /ag-ui interrupts for a child's call, and the answer to the interrupt resumes the tree
    Given in that folder the actor config "careful.yaml":
      """
      name: careful
      agent:
        provider: stub
        tools:
          - {name: get_weather, handler: "cleveractors.demo:get_weather", approval: required}
        script:
          - tool_calls: [{name: get_weather, args: {city: Paris}}]
          - text: It rains in Paris.
      """
    And in that folder the actor config "boss.yaml":
      """
      name: boss
      agent:
        provider: stub
        tools:
          - agent: careful.yaml
        script:
          - tool_calls: [{name: careful, args: {message: "Weather in Paris?"}}]
          - text: Careful says it rains in Paris.
      """
    When the actor of "boss.yaml" is sent "Weather?" on /ag-ui and the client approves the interrupt
    Then the first /ag-ui run ended with one interrupt, for get_weather asked by boss > careful
    And the second /ag-ui run gives the careful call the result "It rains in Paris." and finishes
