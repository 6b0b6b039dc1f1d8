Feature: Every call names its model, carries its token details and is priced in US dollars
  Each usage record carries the cache read / cache write / reasoning counts the provider reported
  (parts of the prompt and completion counts), the provider and model that answered, and its cost
  from genai-prices' bundled table (or the actor's own `pricing`). A run's cost is the sum of its
  calls' costs only when every call was priced; otherwise it is None and the unpriced calls are
  listed. The expected costs below are computed from the published prices written in the tables.

  Scenario Outline: Cache and reasoning counts are on every call and summed over rounds, retries and pruning (<mode>)
    Given the actor declares the demo tools long_report and get_weather
    And tool outputs over 50 tokens are condensed
    And the actor's model replies:
      | text                             | tool calls                             | prompt tokens | completion tokens | cache read | cache write | reasoning | error      | status |
      |                                  | long_report#r1 {"topic": "the Louvre"} | 900           | 120               | 0          | 800         | 100       |            |        |
      | Key fact: the Louvre opens 9:00. |                                        | 400           | 12                | 0          | 0           | 7         |            |        |
      |                                  |                                        |               |                   |            |             |           | overloaded | 503    |
      | It opens at nine in the morning. |                                        | 1300          | 30                | 800        | 0           | 10        |            |        |
    When the actor is asked "When does the Louvre open?" in <mode> mode
    Then each call carries the prompt, completion, cache and reasoning counts the model reported
    And the result's counts are the sums over its calls

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: A known model's call costs what its published prices make of its tokens (<model>)
    Given the actor's model stands in for "<model>" of <provider>
    And the actor's model replies:
      | text | prompt tokens   | completion tokens | cache read | cache write | reasoning   |
      | Hi.  | <prompt tokens> | <completion>      | <read>     | <write>     | <reasoning> |
    When the actor is asked "Hello" in blocking mode
    Then the call is priced at USD <input> input, <cached> cache read, <written> cache write and <output> output per million tokens
    And the result's cost is the sum of its calls' costs, with no call unpriced

    Examples:
      | provider  | model                    | prompt tokens | read | write | completion | reasoning | input | cached | written | output |
      | openai    | gpt-4o                   | 2000          | 1536 | 0     | 300        | 0         | 2.50  | 1.25   | 2.50    | 10.00  |
      | openai    | o3-mini                  | 1000          | 0    | 0     | 500        | 400       | 1.10  | 0.55   | 1.10    | 4.40   |
      | anthropic | claude-sonnet-4-20250514 | 5000          | 1000 | 3000  | 400        | 0         | 3.00  | 0.30   | 3.75    | 15.00  |

  Scenario: The model a reply names is recorded, and priced, over the configured one
    Given the actor's model stands in for "gpt-4o" of openai
    And the actor's model replies:
      | text | prompt tokens | completion tokens | model       |
      | Hi.  | 1000          | 100               | gpt-4o-mini |
    When the actor is asked "Hello" in blocking mode
    Then call 1 was answered by gpt-4o-mini of openai
    And the call is priced at USD 0.15 input, 0.075 cache read, 0.15 cache write and 0.60 output per million tokens

  Scenario Outline: A model without a known price is unpriced, and listed (<provider> <model>)
    Given the actor declares the demo tool get_weather
    And the actor's model stands in for "<model>" of <provider>
    And the actor's model replies:
      | text        | tool calls                       | prompt tokens | completion tokens |
      |             | get_weather#w1 {"city": "Paris"} | 100           | 10                |
      | Sunny, 18 C |                                  | 150           | 8                 |
    When the actor is asked "Weather in Paris?" in blocking mode
    Then no call has a cost
    And the result's cost is unknown, with calls 1 and 2 unpriced

    Examples:
      | provider | model                |
      | openai   | my-private-finetune  |
      | ollama   | llama3.2             |

  Scenario: A call whose counts contradict themselves is unpriced, not mispriced
    Given the actor's model stands in for "gpt-4o" of openai
    And the actor's model replies:
      | text | prompt tokens | completion tokens | cache read |
      | Hi.  | 100           | 10                | 500        |
    When the actor is asked "Hello" in blocking mode
    Then no call has a cost
    And the result's cost is unknown, with call 1 unpriced

  Scenario: The actor's own prices override the table
    Given the actor's model stands in for "llama3.2" of ollama
    And the actor's prices are USD 0.40 input, 0.04 cache read, 0.50 cache write and 1.20 output per million tokens
    And the actor's model replies:
      | text | prompt tokens | completion tokens | cache read | cache write | reasoning |
      | Hi.  | 7000          | 900               | 2000       | 1000        | 300       |
    When the actor is asked "Hello" in blocking mode
    Then the call is priced at USD 0.40 input, 0.04 cache read, 0.50 cache write and 1.20 output per million tokens
    And the result's cost is the sum of its calls' costs, with no call unpriced

  Scenario Outline: A cost budget ends the tool rounds in a synthesized answer, that call included (<mode>)
    Given the actor declares the demo tool get_weather
    And the actor's model stands in for "gpt-4o" of openai
    And the actor has a cost budget of USD 0.01
    And the actor's model replies:
      | text                      | tool calls                       | prompt tokens | completion tokens |
      |                           | get_weather#w1 {"city": "Paris"} | 3000          | 100               |
      |                           | get_weather#w2 {"city": "Rome"}  | 4000          | 100               |
      | Paris is mild, Rome warm. |                                  | 5000          | 50                |
    When the actor is asked "Weather in Paris and Rome?" in <mode> mode
    Then the answer is "Paris is mild, Rome warm."
    And the synthesis reason is "cost_budget"
    And the cost spent before the synthesis reached the budget of USD 0.01
    And the result's cost is USD 0.0325 at 2.50 input and 10.00 output per million tokens, the synthesis call included

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario: A cost budget for a model without a known price is refused when the actor is built
    Given an actor config dict where agent.cost_budget_usd is 0.05
    When the actor is loaded from it
    Then loading fails with a ConfigurationError saying "<dict>: invalid actor config ; agent.cost_budget_usd ; model 'scripted' of provider 'stub' has no known price ; agent.pricing"

  Scenario: A cost budget with the actor's own prices is accepted
    Given an actor config file with this text:
      """
      name: budgeted
      agent:
        provider: stub
        cost_budget_usd: 0.05
        pricing: {input_per_mtok: 1, output_per_mtok: 2}
        script: [{text: Hello.}]
      """
    When the actor is loaded from it
    Then the actor loads, with a cost budget of USD 0.05

  Scenario Outline: Implausible usage is estimated, flagged and logged once per model (<case>)
    Given the actor declares the demo tool get_weather
    And the actor's model stands in for "<model>" of anthropic
    And the actor's model replies:
      | text        | tool calls                       | prompt tokens | completion tokens | usage   |
      |             | get_weather#w1 {"city": "Paris"} | <prompt>      | 12                | <usage> |
      | Sunny, 18 C |                                  | <prompt>      | 6                 | <usage> |
    When the actor is asked "Weather in Paris?" in blocking mode
    Then every call is billed an estimated prompt of the messages sent to it
    And <completion>
    And one warning names anthropic, <model> and "<problem>"

    Examples:
      | case                    | model                    | prompt | usage   | completion                                  | problem                               |
      | zero prompt tokens      | claude-implausible-zero  | 0      |         | each call keeps the completion it reported  | 0 prompt tokens for a non-empty prompt |
      | usage missing           | claude-implausible-none  |        | omitted | each call's completion is estimated        | no usage                              |
