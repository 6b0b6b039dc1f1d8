Feature: Prompt caching is placed for the agent, and the saving is shown
  With `prompt_cache: auto` (the default) an actor on Anthropic marks its requests with
  `cache_control` breakpoints: the last tool, the system prompt, the last message of the
  session's earlier turns and the last message the run keeps (at most four, as the API allows);
  an actor on OpenAI sends `prompt_cache_key`: the session's id, or the actor's name without a
  session. `prompt_cache: off` sends none of it. The requests are the ones ChatAnthropic and
  ChatOpenAI send to the scripted servers of `cleveractors.testing` over HTTP, and each must be
  accepted by the official SDK's own request type (`MessageCreateParams`,
  `CompletionCreateParams`). What the cache saved is the price of the cached tokens at the
  input price, less what they cost (cache reads cheaper, cache writes dearer): on the result,
  in the usage table, in `cleveractors usage --json` and in the ledger's table.

  Scenario Outline: Anthropic requests carry a breakpoint on the tools, the system prompt, the earlier turns' end and the newest kept message (<mode>)
    Given the cached actor speaks to a scripted Anthropic server with prompt_cache_ttl "<ttl>", which answers:
      | text                  | tool calls                 |
      |                       | get_weather {"city": "Paris"} |
      | Light rain in Paris.  |                            |
      | Sunny in Rome.        |                            |
    When the cached actor is asked "Weather in Paris?" in session "s-1", <mode>
    And the cached actor is asked "And in Rome?" in session "s-1", <mode>
    Then every request is accepted by the anthropic SDK's MessageCreateParams
    And every breakpoint has the lifetime "<ttl>"
    And the requests carry breakpoints exactly at:
      | request | breakpoints                                                   |
      | 1       | tools.1, system.0, messages.0.content.0                       |
      | 2       | tools.1, system.0, messages.2.content.0                       |
      | 3       | tools.1, system.0, messages.3.content.0, messages.4.content.0 |

    Examples:
      | mode      | ttl |
      | blocking  | 5m  |
      | streaming | 1h  |

  Scenario: The synthesis request's instruction is never marked: the breakpoint stays on the last message the run keeps
    The model asks for a second tool after its one allowed round: the synthesis request is the
    transcript (its tool result last) and an instruction, which ChatAnthropic sends in the same
    user message as the tool result.
    Given the cached actor speaks to a scripted Anthropic server with max_tool_rounds 1, which answers:
      | text            | tool calls                 |
      |                 | get_weather {"city": "Paris"} |
      |                 | get_weather {"city": "Rome"}  |
      | Rain in Paris.  |                            |
    When the cached actor is asked "Weather in Paris and Rome?" in session "s-1", blocking
    Then every request is accepted by the anthropic SDK's MessageCreateParams
    And the requests carry breakpoints exactly at:
      | request | breakpoints                             |
      | 1       | tools.1, system.0, messages.0.content.0 |
      | 2       | tools.1, system.0, messages.2.content.0 |
      | 3       | tools.1, system.0, messages.2.content.0 |
    And request 3 ends with the synthesis instruction, unmarked

  Scenario: A breakpoint never sits on a thinking block or an empty tool output: it goes to the block or message before
    Thinking is on, so the earlier turn's answer is a thinking block and a text block; the
    tool's output is empty, which the API would refuse to mark, so the second request's
    breakpoint moves back past the reply that called it (a thinking and a tool_use block) to
    the user's message.
    Given the cached actor speaks to a scripted Anthropic server with model_options {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048}, which answers:
      | thinking        | text              | tool calls                  |
      |                 | Hello.            |                             |
      | Look it up.     |                   | find_nothing {"query": "rain"}  |
      | Nothing found.  | No rain on file.  |                             |
    When the cached actor is asked "Hi" in session "s-1", streaming
    And the cached actor is asked "Any rain?" in session "s-1", blocking
    Then every request is accepted by the anthropic SDK's MessageCreateParams
    And the requests carry breakpoints exactly at:
      | request | breakpoints                                                   |
      | 1       | tools.1, system.0, messages.0.content.0                       |
      | 2       | tools.1, system.0, messages.1.content.0, messages.2.content.0 |
      | 3       | tools.1, system.0, messages.1.content.0, messages.2.content.0 |

  Scenario: The scripted Anthropic server refuses a fifth breakpoint, as the API does
    Given the cached actor speaks to a scripted Anthropic server with prompt_cache "auto", which answers:
      | text   | tool calls |
      | Hello. |            |
    When a request with 5 breakpoints is sent to the scripted Anthropic server
    Then the scripted Anthropic server answered 400 "A maximum of 4 blocks with cache_control may be provided. Found 5."

  Scenario Outline: OpenAI requests carry the session's prompt_cache_key, or the actor's name without a session (<mode>)
    Given the cached actor speaks to a scripted OpenAI server with prompt_cache "auto", which answers:
      | text                  | tool calls                 |
      |                       | get_weather {"city": "Paris"} |
      | Light rain in Paris.  |                            |
      | Sunny in Rome.        |                            |
    When the cached actor is asked "Weather in Paris?" in session "s-1", <mode>
    And the cached actor is asked "And in Rome?" without a session, <mode>
    Then every request is accepted by the openai SDK's CompletionCreateParams
    And the requests carry the prompt_cache_keys "s-1, s-1, cached-weather"

    Examples:
      | mode      |
      | blocking  |
      | streaming |

  Scenario Outline: prompt_cache off sends no breakpoint and no key (<provider>)
    Given the cached actor speaks to a scripted <provider> server with prompt_cache "off", which answers:
      | text                  | tool calls                 |
      |                       | get_weather {"city": "Paris"} |
      | Light rain in Paris.  |                            |
    When the cached actor is asked "Weather in Paris?" in session "s-1", streaming
    Then no request carries cache_control or prompt_cache_key

    Examples:
      | provider  |
      | Anthropic |
      | OpenAI    |

  Scenario Outline: The saving shown is the price difference of the cached tokens the server billed (<provider>)
    The published prices: claude-sonnet-4-5 USD 3.00 input, 0.30 cache read, 3.75 cache write
    per million tokens; gpt-4o USD 2.50 input, 1.25 cached input. 1000 tokens read on Anthropic
    save 1000 x 2.70 / 1e6 = 0.0027, 200 written cost 200 x 0.75 / 1e6 = 0.00015 more: 0.00255.
    Given the cached actor speaks to a scripted <provider> server with prompt_cache "auto", which answers:
      | text                  | prompt tokens | cache read | cache write |
      | Light rain in Paris.  | 2000          | <read>     | <written>   |
    When the cached actor is asked "Weather in Paris?" in session "s-1", blocking
    Then the result's cache_read_tokens is <read>, cache_hit_rate <rate> and cache_savings_usd <saved>
    And the saving is the server's billed cache reads and writes at <input> input, <read price> read and <write price> write
    And the usage table's line under it reads "cache hit rate <percent>, saved USD <saved shown>"
    And cleveractors usage --json reports cache_read_tokens <read>, cache_hit_rate <rate> and cache_savings_usd <saved>
    And the ledger table's line under it reads "cache hit rate <percent>, saved USD <saved shown>"

    Examples:
      | provider  | read | written | rate  | percent | saved   | saved shown | input | read price | write price |
      | Anthropic | 1000 | 200     | 0.5   | 50.0%   | 0.00255 | 0.002550    | 3.00  | 0.30       | 3.75        |
      | OpenAI    | 1024 | 0       | 0.512 | 51.2%   | 0.00128 | 0.001280    | 2.50  | 1.25       | 2.50        |

  Scenario: A run that cached nothing saved 0, and its usage table has no cache column
    Given the cached actor speaks to a scripted OpenAI server with prompt_cache "auto", which answers:
      | text                  | prompt tokens | cache read | cache write |
      | Light rain in Paris.  | 2000          | 0          | 0           |
    When the cached actor is asked "Weather in Paris?" in session "s-1", blocking
    Then the result's cache_read_tokens is 0, cache_hit_rate 0 and cache_savings_usd 0
    And the usage table has no column "saved USD"

  Scenario: A model without a price saves an unknown amount, never 0
    Given the cached actor speaks to a scripted OpenAI server with model "my-local-model", which answers:
      | text                  | prompt tokens | cache read | cache write |
      | Light rain in Paris.  | 2000          | 500        | 0           |
    When the cached actor is asked "Weather in Paris?" in session "s-1", blocking
    Then the result's cache_read_tokens is 500, cache_hit_rate 0.25 and cache_savings_usd None
    And the usage table's line under it reads "cache hit rate 25.0%, saved USD n/a"

  Scenario: A ledger written before savings were kept gets the column; its old rows saved 0 where nothing was cached, else an unknown amount
    Given a SQLite ledger of schema version 5 with a priced call that cached nothing and a priced call that read 500 tokens from the cache
    When the cached actor's store opens it and reports the usage
    Then the ledger's rows saved "0, None" and the report's cache_savings_usd is None
    And the ledger has a cache_savings_usd column
