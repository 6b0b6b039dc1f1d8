@handoffs
Feature: Handoffs: an actor passes the conversation to another actor, and gets it back
  An actor's `handoffs` are offered to its model as tools `transfer_to_<name>`. When the model
  calls one, the rest of the turn runs on that actor (its system prompt, tools and model) in the
  same run, billed in the same result and ledger under the same budgets; a stored session's next
  turns run there until it hands the conversation back.

  Background:
    Given the handoff actor "triage" with the system prompt "You are the triage desk."
    And the handoff actor "billing" with the system prompt "You are the billing desk." and the demo tool get_weather
    And triage and billing hand off to each other

  Scenario Outline: A stored session moves to billing and back to triage (<mode>, <database>)
    Given the handoff actors keep sessions in a fresh <database> store
    And triage's model replies:
      | text                         | tool calls                                          | prompt tokens | completion tokens |
      |                              | transfer_to_billing#h1 {"reason": "a refund"}       | 30            | 6                 |
      | Back at triage: it is sunny. |                                                     | 80            | 7                 |
      | Triage again.                |                                                     | 90            | 3                 |
    And billing's model replies:
      | text                                     | tool calls                                    | prompt tokens | completion tokens |
      | Billing here: your refund is on its way. |                                               | 50            | 9                 |
      |                                          | transfer_to_triage#h2 {"reason": "weather"}   | 70            | 5                 |
    When session "s-1" is asked "I want a refund" in <mode> mode
    Then the handoff run answered "Billing here: your refund is on its way." on billing
    And billing's request 1 was sent with billing's system prompt, the user's message and tools get_weather, transfer_to_triage
    And the store says session "s-1" is with billing
    When session "s-1" is asked "Is it sunny?" in <mode> mode
    Then the handoff run answered "Back at triage: it is sunny." on triage
    And billing's request 2 was sent with billing's system prompt and the first turn before "Is it sunny?"
    And triage's request 2 was sent with triage's system prompt, the user's message and tools transfer_to_billing
    And the store says session "s-1" is with triage
    When session "s-1" is asked "Thanks" in <mode> mode
    Then the handoff run answered "Triage again." on triage
    And every handoff run's usage per agent adds up to its totals
    And the ledger for session "s-1" holds the calls of both actors of every run

    Examples:
      | mode      | database   |
      | blocking  | sqlite     |
      | streaming | sqlite     |
      | blocking  | postgresql |
      | streaming | postgresql |

  Scenario: A session left with an actor that is no longer among the handoffs goes on with the executor's own
    Given the handoff actors keep sessions in a fresh sqlite store
    And triage's model replies:
      | text          | tool calls                                    |
      |               | transfer_to_billing#h1 {"reason": "a refund"} |
      | Triage again. |                                               |
    And billing's model replies:
      | text         |
      | Billing here |
    When session "s-1" is asked "I want a refund" in blocking mode
    And triage no longer hands off to billing
    And session "s-1" is asked "Anything else?" in blocking mode
    Then the handoff run answered "Triage again." on triage
    And a warning says "actor 'billing', to which a handoff passed the conversation, is no longer among the handoffs of 'triage'"

  Scenario: An agent built in code refuses a handoff it cannot offer
    Then an agent named "Billing desk (EU)" is offered as the tool "transfer_to_Billing_desk_EU"
    Then triage refuses a handoff to itself, saying "an agent cannot hand off to itself"
    And an agent refuses handoffs to two agents named "billing", saying "would both be offered as tool 'transfer_to_billing'"
    And triage refuses a second agent named "billing", saying "two tools are named 'transfer_to_billing'"
    And an agent with a tool named "transfer_to_billing" refuses a handoff to billing, saying "two tools are named 'transfer_to_billing'"

  Scenario: The handoff event says who took over, from whom and why
    Given triage's model replies:
      | text | tool calls                                    |
      |      | transfer_to_billing#h1 {"reason": "a refund"} |
    And billing's model replies:
      | text         |
      | Billing here |
    When triage is asked "I want a refund" without a session in streaming mode
    Then the handoff events are round_started, usage_recorded, tool_call_requested, tool_call_started, tool_call_finished, handoff, round_started, usage_recorded
    And the handoff event says billing took over from triage in round 1 (call h1) because "a refund"
    And every event survives a JSON round trip through event_adapter

  Scenario: Without a store, the next message starts on the actor the executor runs
    Given triage's model replies:
      | text     | tool calls                                    |
      |          | transfer_to_billing#h1 {"reason": "a refund"} |
      | Triage.  |                                               |
    And billing's model replies:
      | text         |
      | Billing here |
    When triage is asked "I want a refund" without a session in blocking mode
    And triage is asked "Anything else?" without a session in blocking mode
    Then the handoff run answered "Triage." on triage

  Scenario: Within one turn, to an actor without a system prompt and back
    Given billing has no system prompt
    And triage's model replies:
      | text          | tool calls                                    |
      |               | transfer_to_billing#h1 {"reason": "a refund"} |
      | Triage again. |                                               |
    And billing's model replies:
      | text | tool calls                                  |
      |      | transfer_to_triage#h2 {"reason": "weather"} |
    When triage is asked "I want a refund" without a session in blocking mode
    Then the handoff run answered "Triage again." on triage
    And billing's request 1 was sent without a system prompt
    And triage's request 2 was sent with triage's system prompt, the user's message and tools transfer_to_billing

  Scenario Outline: The budgets count every call of the turn, both actors' (<mode>)
    Given billing has a token budget of 150
    And triage's model replies:
      | text | tool calls                                    | prompt tokens | completion tokens |
      |      | transfer_to_billing#h1 {"reason": "a refund"} | 90            | 10                |
    And billing's model replies:
      | text                   | tool calls                           | prompt tokens | completion tokens |
      |                        | get_weather#w1 {"city": "Paris"}     | 40            | 20                |
      | Sunny, from the budget |                                      | 60            | 5                 |
    When triage is asked "Weather?" without a session in <mode> mode
    Then the handoff run answered "Sunny, from the budget" on billing
    And the handoff run's synthesis reason is "budget"
    And every handoff run's usage per agent adds up to its totals

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A run paused after a handoff resumes on the actor it went to
    Given billing's tool get_weather needs approval
    And triage's model replies:
      | text | tool calls                                    |
      |      | transfer_to_billing#h1 {"reason": "a refund"} |
    And billing's model replies:
      | text           | tool calls                       |
      |                | get_weather#w1 {"city": "Paris"} |
      | Sunny, approved |                                 |
    When triage is asked "Weather?" without a session in blocking mode
    And the paused handoff run is resumed with get_weather approved
    Then the handoff run answered "Sunny, approved" on billing

  Scenario: A handoff beside a call that waits for approval takes effect when the run resumes
    Given triage has the demo tool get_weather
    And triage's tool get_weather needs approval
    And triage's model replies:
      | text | tool calls                                                                       |
      |      | transfer_to_billing#h1 {"reason": "a refund"} ; get_weather#w1 {"city": "Paris"} |
    And billing's model replies:
      | text                             |
      | Billing here, after the approval |
    When triage is asked "Refund, and the weather?" without a session in blocking mode
    And the paused handoff run is resumed with get_weather approved
    Then the handoff run answered "Billing here, after the approval" on billing

  Scenario Outline: A handoff that cannot be loaded is refused when the actor is (<problem>)
    Given the actor files of a handoff with <problem>
    When the first actor file is loaded
    Then loading it fails with ConfigurationError naming "<file>" and saying "<message>"

    Examples:
      | problem                   | file        | message                                                |
      | a missing file            | first.yaml  | handoffs.0: 'nowhere.yaml': no actor config at         |
      | an actor naming itself    | first.yaml  | is 'first' itself; an actor cannot hand the conversation to itself |
      | two files of one name     | second.yaml | names its actor 'first', as                            |
      | an invalid target         | second.yaml | agent.provider                                         |
      | a tool named like one     | first.yaml  | handoffs.0: agent 'first': two tools are named 'transfer_to_second' |

  Scenario: Two actor files that name each other load, each once
    Given the actor files of a handoff with two actors naming each other
    When the first actor file is loaded
    Then the first actor hands off to the second, which hands back to the very same first

  Scenario Outline: <route> carries the run past the handoff (the handoff event is /chat's alone)
    Given triage's model replies:
      | text | tool calls                                    |
      |      | transfer_to_billing#h1 {"reason": "a refund"} |
    And billing's model replies:
      | text                |
      | Billing here, hello |
    When the web app serving triage is sent "I want a refund" to <route>
    Then the response is 200 and holds "Billing here, hello"
    And the response holds <handoff frames> handoff SSE frame from triage to billing

    Examples:
      | route                | handoff frames |
      | /chat                | 1              |
      | /ai-sdk              | 0              |
      | /ag-ui               | 0              |
      | /v1/chat/completions | 0              |
