Feature: The web app lets in only its callers, and tells them no secrets
  `create_app()` and `create_chat_router()` are reached over HTTP by anything on the machine,
  including the pages a user's browser has open. Every scenario talks to the app in-process
  through httpx's ASGI transport, as `http://127.0.0.1:8000` unless it names another host.

  Scenario Outline: Without the right API key a run is refused with 401 (<path>, key <key>)
    Given the web app serves an actor answering "Hello there."
    And the web app requires the API keys "k-first,k-second"
    When the web app is sent a message to <path> with the key "<key>"
    Then the web app answered 401
    And the web app's refusal says "a valid API key is required"
    And the web app asked for a bearer token
    And the web app ran nothing

    Examples:
      | path                 | key       |
      | /chat                | (none)    |
      | /chat                | k-third   |
      | /chat                | k-firs    |
      | /v1/chat/completions | (none)    |
      | /v1/chat/completions | k-first,k |

  Scenario Outline: With any of the keys a run is answered (<path>, <key>)
    Given the web app serves an actor answering "Hello there."
    And the web app requires the API keys "k-first,k-second"
    When the web app is sent a message to <path> with the key "<key>"
    Then the web app answered 200
    And the web app's answer says "Hello there."
    And on_usage heard once, from the caller "<caller>"

    Examples:
      | path                 | key      | caller |
      | /chat                | k-first  | key-1  |
      | /v1/chat/completions | k-second | key-2  |

  Scenario: An async authenticate names the caller that on_usage bills
    Given the web app serves an actor answering "Hello there."
    And the web app authenticates with an async check that knows the token "team-a-token" as "team-a"
    When the web app is sent a message to /chat with the key "team-a-token"
    Then the web app answered 200
    And on_usage heard once, from the caller "team-a"
    When the web app is sent a message to /chat with the key "team-b-token"
    Then the web app answered 401

  Scenario Outline: The openai client reads our words from a refused key on every OpenAI route (<call>)
    Given the web app serves an actor answering "Hello there."
    And the web app requires the API keys "k-first"
    When the openai client calls <call> with the key "k-wrong"
    Then the openai client raised AuthenticationError saying "a valid API key is required"
    And the openai client read the code "invalid_api_key" and the type "invalid_request_error"
    And the web app's refusal is in OpenAI's error format
    And the web app asked for a bearer token
    And the web app ran nothing

    Examples:
      | call                    |
      | chat.completions.create |
      | models.list             |
      | models.retrieve         |

  Scenario Outline: A caller the check forbids hears its words in OpenAI's error format (<call>)
    Given the web app serves an actor answering "Hello there."
    And the web app's check forbids every caller with "this key may not use the actor"
    When the openai client calls <call> with the key "k-any"
    Then the openai client raised PermissionDeniedError saying "this key may not use the actor"
    And the web app's refusal is in OpenAI's error format
    And the web app ran nothing

    Examples:
      | call                    |
      | chat.completions.create |
      | models.list             |
      | models.retrieve         |

  Scenario: /chat says a forbidden caller's refusal in its own format
    Given the web app serves an actor answering "Hello there."
    And the web app's check forbids every caller with "this key may not use the actor"
    When the web app is sent a message to /chat with the key "k-any"
    Then the web app answered 403
    And the web app's refusal is exactly {"detail": "this key may not use the actor"}

  Scenario Outline: A path or method the OpenAI routes do not have is refused in OpenAI's format (<method> <path>)
    Given the web app serves an actor answering "Hello there."
    When the web app is asked for <path> with <method>
    Then the web app answered <status>
    And the web app's refusal is in OpenAI's error format

    Examples:
      | method | path                 | status |
      | POST   | /v1/models           | 405    |
      | GET    | /v1/chat/completions | 405    |
      | GET    | /v1/embeddings       | 404    |

  Scenario: API keys must be given
    Then making an API key check of "(none)" fails with ValueError "api keys must be a non-empty list of non-empty keys"
    And making an API key check of "k-first," fails with ValueError "api keys must be a non-empty list of non-empty keys"

  Scenario Outline: A body that is not JSON by its Content-Type is refused with 415 (<content type>)
    Given the web app serves an actor answering "Hello there."
    When the web app is sent a JSON message to <path> typed "<content type>"
    Then the web app answered 415
    And the web app's refusal says "the body must be application/json"
    And the web app ran nothing

    Examples:
      | path                 | content type                      |
      | /chat                | text/plain                        |
      | /chat                | application/x-www-form-urlencoded |
      | /v1/chat/completions | multipart/form-data; boundary=x   |
      | /v1/chat/completions | (none)                            |

  Scenario: JSON with a charset parameter is JSON
    Given the web app serves an actor answering "Hello there."
    When the web app is sent a JSON message to /chat typed "application/json; charset=utf-8"
    Then the web app answered 200

  Scenario Outline: The loopback names are answered on any port (<host>)
    Given the web app serves an actor answering "Hello there."
    When the web app's chat page is asked for with the host "<host>"
    Then the web app answered 200

    Examples:
      | host            |
      | 127.0.0.1       |
      | 127.0.0.1:8000  |
      | localhost:3000  |
      | [::1]:8000      |

  Scenario Outline: Any other Host is refused, as a DNS rebinding attack would use (<host>)
    Given the web app serves an actor answering "Hello there."
    When the web app is sent a message to /chat for the host "<host>"
    Then the web app answered 400
    And the web app ran nothing

    Examples:
      | host                  |
      | attacker.example      |
      | attacker.example:8000 |
      | 127.0.0.1.nip.io      |
      | 10.0.0.5:8000         |

  Scenario: A host the operator adds is answered
    Given the web app serves an actor answering "Hello there."
    And the web app also answers the host "chat.internal"
    When the web app is sent a message to /chat for the host "chat.internal:8443"
    Then the web app answered 200

  Scenario: No CORS headers unless origins are named
    Given the web app serves an actor answering "Hello there."
    When the web app is sent a CORS preflight from "https://evil.example"
    Then the web app allowed no origin

  Scenario: A named origin may call the API, and only that one
    Given the web app serves an actor answering "Hello there."
    And the web app lets the origin "https://app.example" call it
    When the web app is sent a CORS preflight from "https://app.example"
    Then the web app allowed the origin "https://app.example"
    When the web app is sent a CORS preflight from "https://evil.example"
    Then the web app allowed no origin

  Scenario Outline: A failed run tells the client its error type, never the upstream text (<path>)
    Given the web app serves an actor whose model fails with "Incorrect API key provided: sk-proj-****-123"
    When the web app is sent a message to <path>
    Then the web app answered <status>
    And the web app's response names the error ModelAPIError and the request id
    And the web app's response does not contain "sk-proj"
    And the web app's response does not contain "Incorrect API key"
    And the web app logged "Incorrect API key provided: sk-proj-****-123" with the request id
    And on_usage heard once, from the caller "None"

    Examples:
      | path                           | status |
      | /chat                          | 200    |
      | /v1/chat/completions           | 502    |
      | /v1/chat/completions, streamed | 200    |

  Scenario: The API docs are off by default
    Given the web app serves an actor answering "Hello there."
    When the web app is asked for /docs, /redoc and /openapi.json
    Then the web app answered each with 404

  Scenario: With docs on, the docs page escapes the actor's name and loads nothing from elsewhere
    Given the web app serves an actor named "<script>alert('x')</script>" answering "Hello there."
    And the web app serves its docs
    When the web app is asked for /openapi.json
    Then the web app answered 200
    When the web app is asked for /docs
    Then the web app answered 200
    And the web app's page shows "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" and no "<script"
    And the web app's page lists POST /chat and POST /v1/chat/completions

  Scenario: The chat page escapes the actor's name and loads nothing from elsewhere
    Given the web app serves an actor named "</title><script>alert(1)</script>" answering "Hello there."
    When the web app is asked for /
    Then the web app answered 200
    And the web app's page has the title "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt; · cleveractors"
    And the web app's page loads nothing from another site
