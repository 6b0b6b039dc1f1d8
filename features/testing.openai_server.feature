Feature: The scripted OpenAI server answers like the API, and records what it billed
  `ScriptedOpenAIServer` replays one scripted reply per chat request over real HTTP on
  127.0.0.1. Wire-level tests rely on it answering wrong requests the way the API does, on its
  record of requests, headers, chunk times and bills, and on connections breaking where the
  script says. Every scenario here talks to it with a real client (`httpx` or `openai`).

  Scenario Outline: A request to a route the server does not have gets a 404 JSON error (<method> <path>)
    Given the scripted server is started with the reply "Hello there."
    When the scripted server is sent <method> <path> with the body {"messages": [{"role": "user", "content": "Hi"}]}
    Then the scripted server answered 404 with an invalid_request_error saying "No route for <method> <path>"
    And the scripted server recorded no chat request and billed nothing

    Examples:
      | method | path                       |
      | POST   | /v1/embeddings             |
      | POST   | /v1/chat/completions/extra |

  Scenario: A GET gets a 404 JSON error
    Given the scripted server is started with the reply "Hello there."
    When the scripted server is sent GET /v1/models
    Then the scripted server answered 404 with an invalid_request_error saying "No route for GET /v1/models"
    And the scripted server recorded no chat request and billed nothing

  Scenario Outline: A body that is not a chat request gets a 400 and uses up no reply (<body>)
    Given the scripted server is started with the reply "Hello there."
    When the scripted server is sent POST /v1/chat/completions with the body <body>
    Then the scripted server answered 400 with an invalid_request_error saying "Body must be a JSON object with `messages`"
    And the scripted server recorded no chat request and billed nothing
    When the scripted server is sent 1 chat request
    Then the scripted server answered request 2 with "Hello there."

    Examples:
      | body                                  |
      | not JSON at all                       |
      | [{"role": "user", "content": "Hi"}]   |
      | {"model": "gpt-4o-mini"}              |
      | {"messages": "Hi"}                    |
      | {"messages": ["Hi"]}                  |
      | {"messages": [{"role": "user", "content": "Hi"}], "stream_options": "yes"} |
      | {"messages": [{"role": "assistant", "content": null, "tool_calls": "get_weather"}]} |
      | {"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": "get_weather"}]}]} |

  Scenario: Once the script is exhausted every request gets HTTP 422, until replies are added
    Given the scripted server is started with the reply "Hello there."
    When the scripted server is sent 2 chat requests
    Then the scripted server answered request 1 with "Hello there."
    And the scripted server answered 422 with a script_exhausted saying "ScriptedOpenAIServer: script exhausted for conversation 'Question number 2' (messages so far: 1; replies in the script: 1, all taken) (request 1)"
    When the scripted server is given the reply "Back again." and sent 1 chat request
    Then the scripted server answered request 3 with "Back again."
    And the scripted server recorded 3 chat requests
    And the scripted server billed only the requests 0 and 2

  Scenario: A scripted error is answered with HTTP 500, and bills nothing
    Given the scripted server is started with the replies:
      | error                        |
      | upstream exploded (HTTP 500) |
    When the scripted server is asked "Hi" by the openai client, blocking
    Then the scripted server's client failed with InternalServerError saying "upstream exploded (HTTP 500)"
    And the scripted server recorded 1 chat request and billed nothing

  Scenario Outline: A blocking reply with tool calls has no content and finishes with tool_calls (usage <usage>)
    Given the scripted server is started with the replies:
      | tool calls                                                        | usage   |
      | get_weather#call_paris {"city": "Paris"} ; get_time {"city": "Paris"} | <usage> |
    When the scripted server is asked "Weather and time in Paris?" by the openai client, blocking
    Then the scripted server's completion has no content and finishes with tool_calls
    And the scripted server's completion calls get_weather#call_paris {"city": "Paris"} ; get_time#call_0_1 {"city": "Paris"}
    And the scripted server's completion reports <reported>
    And the scripted server billed the words of the request and of the reply received

    Examples:
      | usage    | reported            |
      |          | the usage it billed |
      | omitted  | no usage            |

  Scenario Outline: A streamed reply ends with the usage chunk only when asked for it and not omitted (<options>, usage <usage>)
    Given the scripted server is started with the replies:
      | text                  | usage   |
      | It is sunny in Paris. | <usage> |
    When the scripted server is asked "Weather in Paris?" by the openai client, streamed <options>
    Then the scripted server's stream carried "It is sunny in Paris." word by word, ending with stop
    And the scripted server's stream <ending>
    And the scripted server billed the words of the request and of the reply received

    Examples:
      | options                | usage   | ending                         |
      | with include_usage     |         | ended with the usage it billed |
      | with include_usage     | omitted | carried no usage               |
      | without stream_options |         | carried no usage               |

  Scenario: A blocking reply that is cut off drops the connection, billing the prompt only
    Given the scripted server is started with the replies:
      | text                  | cut off after |
      | It is sunny in Paris. | 2             |
    When the scripted server is asked "Weather in Paris?" by the openai client, blocking
    Then the scripted server's client failed with APIConnectionError
    And the scripted server billed the prompt in full and the words received, as not completed

  Scenario: A streamed reply that is cut off breaks the stream after its chunks
    Given the scripted server is started with the replies:
      | text                  | cut off after |
      | It is sunny in Paris. | 2             |
    When the scripted server is asked "Weather in Paris?" by the openai client, streamed with include_usage
    Then the scripted server's client failed with APIConnectionError
    And the scripted server's client received the first 2 words before the break
    And the scripted server billed the prompt in full and the words received, as not completed

  Scenario: A client that closes the stream early is billed for what was sent, quietly
    Given the scripted server is started with the replies:
      | text                                                                                                                                                                               | delay |
      | Paris will be sunny this morning, with clouds arriving from the west around noon and light rain expected by the evening, so take an umbrella if you plan to stay out late tonight. | 0.05  |
    When the scripted server is asked "Weather in Paris today?" and the client closes the stream after 1 word
    Then the scripted server billed the prompt in full and, as not completed, at least the words the client read but fewer than the reply's
    And the scripted server printed no traceback

  Scenario: The server times every streamed chunk it sends, and none for a blocking reply
    Given the scripted server is started with the replies:
      | text                  | tool calls                    | args chunk |
      | Checking the weather. | get_weather {"city": "Paris"} | 6          |
      | It is sunny.          |                               |            |
    When the scripted server is asked "Weather in Paris?" by the openai client, streamed with include_usage
    And the scripted server is asked "And now?" by the openai client, blocking
    Then the scripted server timed each content and tool-call chunk the client received, in order
    And the scripted server timed no chunk for the blocking request

  Scenario: The server keeps each request's headers, names in lower case
    Given the scripted server is started with the reply "Hello there."
    And the scripted server's client sends the header X-Trace-Id "trace-42"
    When the scripted server is asked "Hi" by the openai client, blocking
    Then the scripted server saw the header authorization "Bearer sk-scripted-test"
    And the scripted server saw the header x-trace-id "trace-42"
    And the scripted server saw every header name in lower case

  Scenario: The billed total adds up every call, blocking and streamed
    Given the scripted server is started with the replies:
      | text                              |
      | It is sunny in Paris.             |
      | Rain is expected in Rome tomorrow. |
    When the scripted server is asked "Weather in Paris?" by the openai client, streamed with include_usage
    And the scripted server is asked "And in Rome tomorrow?" by the openai client, blocking
    Then the scripted server's billed total adds up its calls and the words of every exchange

  Scenario: Text content parts are billed by their words, other parts by none
    Given the scripted server is started with the reply "Noted."
    When the scripted server is sent a message whose content parts are:
      | type      | text                          |
      | text      | What is the weather           |
      | image_url | data:image/png;base64,iVBORw0 |
      | text      | in Paris today?               |
    Then the scripted server billed the words of the text parts only

  Scenario: An earlier tool call is billed by its arguments, its output by its words
    Given the scripted server is started with the reply "It is sunny."
    When the scripted server is asked "So, sunny?" after the assistant called get_weather with {"city": "Paris"} and got "Sunny, 24 C"
    Then the scripted server billed the words of the request and of the reply received

  Scenario: Used as a context manager, the server serves inside the block and stops after it
    Given the scripted server is created with the replies "Hello there." and "Still here.", not started
    When the scripted server is used as a context manager for 1 chat request
    Then the scripted server answered request 1 with "Hello there."
    And the scripted server's base_url fails with RuntimeError "ScriptedOpenAIServer is not started"

  Scenario: The server starts once, has no base_url until started, and stops twice safely
    Given the scripted server is created with the replies "Hello there." and "Still here.", not started
    Then the scripted server's base_url fails with RuntimeError "ScriptedOpenAIServer is not started"
    When the scripted server is started
    Then the scripted server's base_url is an http URL on 127.0.0.1 ending in /v1
    When the scripted server is started again
    Then the scripted server refused with RuntimeError "ScriptedOpenAIServer is already started"
    When the scripted server is asked "Hi" by the openai client, blocking
    And the scripted server is stopped twice
    And the scripted server is asked "Anyone there?" by the openai client, blocking
    Then the scripted server's client got 1 answer before it failed with APIConnectionError
    And the scripted server's base_url fails with RuntimeError "ScriptedOpenAIServer is not started"
