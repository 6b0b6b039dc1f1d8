Feature: The scripted Anthropic server streams like the Messages API, checked by the official SDK
  `ScriptedAnthropicServer` replays one scripted reply per `POST /v1/messages` over real HTTP on
  127.0.0.1. Its wire format is checked with the official `anthropic` SDK: the SDK's own stream
  accumulator (`messages.stream(...).get_final_message()`) and its blocking parser must rebuild
  exactly the scripted reply, with the usage the server billed. Faults (HTTP 529, a mid-stream
  `error` event, a dropped connection) and the API's 400 for a thinking turn without its signed
  thinking block reach the SDK as the real API's would.

  Background:
    Given the Anthropic server is started with the replies:
      | thinking                     | redacted      | text               | tool calls                                                   | cache read | cache write |
      | The user wants two cities.   | RedactedBlob1 | Checking both now. | get_weather#toolu_p {"city": "Paris"} ; get_weather#toolu_r {"city": "Rome", "unit": "celsius"} | 3          | 2           |

  Scenario Outline: The SDK's accumulated message is the scripted reply, usage as billed (<client>)
    When the Anthropic server is asked "Weather in Paris and Rome?" by the <client> client with thinking on
    Then the SDK message starts with a signed thinking block saying "The user wants two cities."
    And the SDK message then has the redacted thinking "RedactedBlob1" and the text "Checking both now."
    And the SDK message calls get_weather#toolu_p {"city": "Paris"} ; get_weather#toolu_r {"city": "Rome", "unit": "celsius"}
    And the SDK message stopped for tool_use
    And the SDK message's usage is what the server billed, 3 read from and 2 written to the cache
    And the SDK message reports the words of its thinking as thinking tokens

    Examples:
      | client                |
      | sync streaming        |
      | async streaming       |
      | sync blocking         |
      | async blocking        |

  Scenario: Streamed and blocking replies are the same Message apart from its id
    Given the Anthropic server is given the same reply again
    When the Anthropic server is asked "Weather in Paris and Rome?" by the sync streaming client with thinking on
    And the Anthropic server is asked "Weather in Paris and Rome?" by the sync blocking client with thinking on
    Then the two SDK messages are equal apart from their ids and signatures

  Scenario: The stream is framed as the API frames it
    When the Anthropic server is sent a streamed request with thinking on over plain HTTP
    Then every event's name is the type of its data
    And the events are message_start, ping, then start, deltas and stop per block, message_delta, message_stop
    And message_start reports the input usage with the cache parts and no content
    And each tool_use block starts with empty input and an empty input_json_delta, then its arguments in several pieces
    And the thinking block's signature arrives in a signature_delta after its thinking_deltas
    And the Anthropic server timed each content-block event it sent, in order

  Scenario: Without thinking enabled no thinking block is sent, even if scripted
    When the Anthropic server is asked "Weather in Paris and Rome?" by the sync streaming client with thinking off
    Then the SDK message's blocks are text, tool_use, tool_use

  Scenario: A tool-use turn echoed with its signed thinking block is accepted
    Given the Anthropic server is given the reply "Sunny in both."
    When the Anthropic server is asked "Weather in Paris and Rome?" by the sync streaming client with thinking on
    And the SDK message is sent back with the tool results, unchanged
    Then the Anthropic server answered "Sunny in both."

  Scenario Outline: A thinking turn that lost or changed its thinking block gets the API's 400 (<change>)
    Given the Anthropic server is given the reply "Sunny in both."
    When the Anthropic server is asked "Weather in Paris and Rome?" by the sync streaming client with thinking on
    And the SDK message is sent back with the tool results, <change>
    Then the SDK client failed with BadRequestError, an invalid_request_error saying "<message>"
    And the Anthropic server recorded 2 requests, billed 1 and still holds its reply

    Examples:
      | change                   | message                                                                                 |
      | without thinking blocks  | messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text` |
      | with the thinking edited | messages.1.content.0: Invalid `signature` in `thinking` block                           |
      | with another signature   | messages.1.content.0: Invalid `signature` in `thinking` block                           |
      | with the redacted data edited | messages.1.content.1: Invalid `data` in `redacted_thinking` block                  |

  Scenario: A request holding tool blocks without declaring tools gets the API's 400
    Given the Anthropic server is given the reply "Sunny in both."
    When the Anthropic server is asked "Weather in Paris and Rome?" by the sync streaming client with thinking on
    And the SDK message is sent back with the tool results, without declaring the tools
    Then the SDK client failed with BadRequestError, an invalid_request_error saying "Requests which include `tool_use` or `tool_result` blocks must define tools."
    And the Anthropic server recorded 2 requests, billed 1 and still holds its reply

  Scenario: Without thinking enabled the thinking rule does not apply
    Given the Anthropic server is given the reply "Sunny in both."
    When the Anthropic server is asked "Weather in Paris and Rome?" by the sync streaming client with thinking off
    And the SDK message is sent back with the tool results, unchanged
    Then the Anthropic server answered "Sunny in both."

  Scenario Outline: HTTP 529 reaches the SDK as OverloadedError with its Retry-After, and bills nothing (<client>)
    Given the Anthropic server's script starts with an overloaded reply
    When the Anthropic server is asked "Hi" by the <client> client with thinking on
    Then the SDK client failed with OverloadedError, an overloaded_error saying "Overloaded"
    And the SDK's error carried the header retry-after: 7
    And the Anthropic server billed nothing

    Examples:
      | client         |
      | sync streaming |
      | sync blocking  |

  Scenario: An error event mid-stream fails the SDK's stream, and the words sent are billed
    Given the Anthropic server's script starts with the text "one two three four five" and an error event after 4 events
    When the Anthropic server is asked "Hi there" by the sync streaming client with thinking off
    Then the SDK client failed with APIStatusError, an overloaded_error saying "Overloaded"
    And the Anthropic server billed 2 prompt and 3 completion tokens, not completed

  Scenario: A dropped stream fails the SDK's stream mid-body, and the words sent are billed
    Given the Anthropic server's script starts with the text "one two three four five" cut off after 3 events
    When the Anthropic server is asked "Hi there" by the sync streaming client with thinking off
    Then the SDK client failed with RemoteProtocolError
    And the Anthropic server billed 2 prompt and 2 completion tokens, not completed

  Scenario: A blocking reply cut off gets no response at all, and bills the prompt
    Given the Anthropic server's script starts with the text "one two three four five" cut off after 3 events
    When the Anthropic server is asked "Hi there" by the sync blocking client with thinking off
    Then the SDK client failed with APIConnectionError
    And the Anthropic server billed 2 prompt and 0 completion tokens, not completed

  Scenario: Once the script is exhausted every request gets HTTP 422
    When the Anthropic server is asked "Weather in Paris and Rome?" by the sync blocking client with thinking on
    And the Anthropic server is asked "Again?" by the sync blocking client with thinking on
    Then the SDK client failed with UnprocessableEntityError, a script_exhausted saying "ScriptedAnthropicServer: script exhausted for conversation 'Again?' (messages so far: 1; replies in the script: 1, all taken) (request 1)"

  Scenario Outline: A request the server cannot read gets a 400 or 404 and uses up no reply (<path>)
    When the Anthropic server is sent POST <path> with the body <body>
    Then the Anthropic server answered <status> with an invalid_request_error or not_found_error saying "<message>"
    And the Anthropic server recorded 0 requests, billed 0 and still holds its reply

    Examples:
      | path          | body                                                             | status | message                                                             |
      | /v1/messages  | not JSON                                                         | 400    | Body must be a JSON object with `model`, `max_tokens` and `messages` |
      | /v1/messages  | {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}  | 400    | Body must be a JSON object with `model`, `max_tokens` and `messages` |
      | /v1/messages  | {"model": "m", "max_tokens": 9, "messages": [{"role": "system", "content": "Hi"}]} | 400 | Body must be a JSON object with `model`, `max_tokens` and `messages` |
      | /v1/messages  | {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": 5}]} | 400 | Body must be a JSON object with `model`, `max_tokens` and `messages` |
      | /v1/complete  | {"model": "m", "max_tokens": 9, "messages": []}                  | 404    | No route for POST /v1/complete                                      |

  Scenario: A GET gets a 404 JSON error
    When the Anthropic server is sent GET /v1/models
    Then the Anthropic server answered 404 with an invalid_request_error or not_found_error saying "No route for GET /v1/models"

  Scenario: The API key reaches the server, and the bill sums what each request was billed
    When the Anthropic server is given the reply "Sunny in both." and asked twice by the sync blocking client
    Then the Anthropic server received the API key on both requests
    And the Anthropic server's billed total is the sum of its 2 bills

  Scenario: A reply's scripted token counts replace the counted words
    Given the Anthropic server's script starts with the text "one two three" billed as 40 prompt and 7 completion tokens
    When the Anthropic server is asked "Hi there" by the sync streaming client with thinking off
    Then the Anthropic server billed 40 prompt and 7 completion tokens, completed

  Scenario: The model named, cache writes by lifetime, and the older usage events, as scripted
    Given the Anthropic server's script starts with the text "Cached answer here." as model claude-sonnet-4-20250514, 3 tokens written to the 1h cache, input usage in message_start only
    When the Anthropic server is asked "Weather in Paris and Rome, please?" by the sync streaming client with thinking off
    And the Anthropic server is sent a streamed request with thinking on over plain HTTP
    Then the SDK message names the model claude-sonnet-4-20250514, its cache writes are 3 for 1h, and message_delta reported only the output tokens

  Scenario: A blocking request for a reply scripted to fail mid-stream gets HTTP 529
    Given the Anthropic server's script starts with the text "one two three four five" and an error event after 4 events
    When the Anthropic server is asked "Hi there" by the sync blocking client with thinking off
    Then the SDK client failed with OverloadedError, an overloaded_error saying "Overloaded"
    And the Anthropic server billed nothing

  Scenario: A client that leaves mid-stream is billed the prompt and the words it was sent
    Given the Anthropic server streams slowly, its script starting with the text "one two three four five six seven eight"
    When the Anthropic server is asked "Hi there" over plain HTTP and the client leaves after 2 text deltas
    Then the Anthropic server billed 2 prompt and at least 2 completion tokens, not completed

  Scenario: Arguments that are not JSON are streamed as written, and sent as a string when blocking
    Given the Anthropic server's script starts with a call of get_weather with the arguments {"city": "Paris", "oops":
    When the Anthropic server is sent the same blocking request twice over plain HTTP, streamed then blocking
    Then the streamed tool_use input is {"city": "Paris", "oops": and the blocking one is that text as a string

  Scenario: The server's lifecycle: a context manager, one start at a time, stop twice is harmless
    Then the Anthropic server refuses a second start and a base_url before its start, and stops twice

  Scenario: A reply without usage cannot be scripted: the Messages API always reports usage
    Then scripting the Anthropic server with a reply without usage fails with "the Messages API always reports usage: omit_usage is not served"

  Scenario Outline: ChatAnthropic reads the server's usage with its cache parts (<mode>)
    When ChatAnthropic asks the Anthropic server "Weather in Paris and Rome?" with thinking on, <mode>
    Then ChatAnthropic's usage is what the server billed, 3 read from the cache and 2 written to it for 5 minutes
    And ChatAnthropic's reply keeps the thinking block with its signature and calls get_weather twice

    Examples:
      | mode      |
      | invoked   |
      | streamed  |
