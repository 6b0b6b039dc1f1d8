Feature: The frontends' own protocols: the AI SDK's UI message stream and AG-UI
  `POST /ai-sdk` answers the body `useChat`'s default transport sends with the Vercel AI SDK's UI
  message stream; `POST /ag-ui` answers an AG-UI `RunAgentInput` with AG-UI events. Both keep the
  guarantees of the other routes: the caller checked, the body checked before anything runs
  (clear 4xx errors naming what is wrong), one run id, and on_usage once per run however the
  client leaves. The requests below go through the app's ASGI interface in process;
  robot/frontends.robot drives the protocols' own client libraries over real HTTP.

  Background:
    Given the frontend actor looks the weather up, then answers

  Scenario Outline: A malformed body is refused with <status>, saying what is wrong (<route>)
    When the frontend route <route> is sent the body <body>
    Then the frontend route answered <status> saying "<says>"
    And on_usage heard of no frontend run

    Examples: The AI SDK's UI message stream
      | route   | status | body                                                                                                                                              | says                                                                  |
      | /ai-sdk | 422    | {"messages": []}                                                                                                                                  | id: Field required; messages: List should have at least 1 item       |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}, {"type": "image-url", "url": "x"}]}]}            | messages.0.parts.1: unknown part type 'image-url'                     |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "file", "mediaType": "image/png", "url": "x"}]}]}                        | messages.0.parts.0: 'file' parts are not supported: an actor takes text |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "robot", "parts": []}]}                                                                            | messages.0.role                                                       |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"text": "Hi"}]}]}                                                               | messages.0.parts.0.type: Field required                               |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "  "}]}]}                                                | messages.0: the last message (the user's) has no text                 |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "system", "parts": [{"type": "text", "text": "Be brief"}]}]}                                        | messages.0: the last message must be from the user                    |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "assistant", "parts": [{"type": "text", "text": "Hello"}]}]}                                        | messages.0: the last message is the assistant's and answers no approval request |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "assistant", "parts": [{"type": "tool-book", "toolCallId": "c9", "state": "approval-responded", "input": {}, "approval": {"id": "forged", "approved": true}}]}]} | messages.0.parts.0.approval.id: 'forged' is not an approval this server asked for |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "assistant", "parts": [{"type": "tool-book", "toolCallId": "c9", "state": "approval-responded", "input": {}, "approval": {"id": "run_1:c8", "approved": true}}]}]} | messages.0.parts.0: the approval 'run_1:c8' is not for this tool call |
      | /ai-sdk | 422    | {"id": "c1", "messages": [{"id": "m1", "role": "assistant", "parts": [{"type": "tool-a", "toolCallId": "c1", "state": "approval-responded", "input": {}, "approval": {"id": "run_1:c1", "approved": true}}, {"type": "tool-b", "toolCallId": "c2", "state": "approval-responded", "input": {}, "approval": {"id": "run_2:c2", "approved": false}}]}]} | messages.0: the answers name 2 paused runs, not one |
      | /ai-sdk | 404    | {"id": "c1", "messages": [{"id": "m1", "role": "assistant", "parts": [{"type": "tool-book", "toolCallId": "c9", "state": "approval-responded", "input": {}, "approval": {"id": "run_nobody:c9", "approved": true}}]}]} | no paused run 'run_nobody' |
      | /ai-sdk | 422    | {"id": "c1", "messages": [                                                                                                                         | Invalid JSON                                                          |

    Examples: AG-UI
      | route  | status | body                                                                                                                                            | says                                                                         |
      | /ag-ui | 422    | {"messages": []}                                                                                                                                | threadId: Field required; runId: Field required                              |
      | /ag-ui | 422    | {"threadId": "t1", "runId": "r1", "messages": []}                                                                                               | messages: no message to answer                                               |
      | /ag-ui | 422    | {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": [{"type": "sticker", "id": "s1"}]}]}                     | does not match any of the expected tags                                      |
      | /ag-ui | 422    | {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": [{"type": "image", "source": {"type": "url", "value": "https://x/y.png"}}]}]} | messages.0.content.0: only text content is supported, not 'image' parts |
      | /ag-ui | 422    | {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "assistant", "content": "Hello"}]}                                          | messages.0: the last message must be from the user, not 'assistant'          |
      | /ag-ui | 422    | {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": ""}]}                                                    | messages.0: the last message (the user's) has no text                        |
      | /ag-ui | 400    | {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "Hi"}], "tools": [{"name": "f", "description": "d"}]}    | tools: an actor runs its own tools server-side; it cannot call a client's    |
      | /ag-ui | 422    | {"threadId": "t1", "runId": "r1", "messages": [], "resume": [{"interruptId": "run_1:c1", "status": "resolved", "payload": {"approve": true}}]}  | resume.0.payload: approved: Field required; approve: Extra inputs are not permitted |
      | /ag-ui | 422    | {"threadId": "t1", "runId": "r1", "messages": [], "resume": [{"interruptId": "nope", "status": "resolved", "payload": {"approved": true}}]}     | resume.0.interruptId: 'nope' is not an approval this server asked for        |
      | /ag-ui | 404    | {"threadId": "t1", "runId": "r1", "messages": [], "resume": [{"interruptId": "run_nobody:c1", "status": "cancelled"}]}                          | no paused run 'run_nobody'                                                   |
      | /ag-ui | 422    | {"threadId": "t1"                                                                                                                               | Invalid JSON                                                                 |

  Scenario Outline: The routes check the caller and the Content-Type first (<route>)
    Given the frontend routes require the API key "sk-front"
    When the frontend route <route> is sent a message without a key
    Then the frontend route answered 401 saying "a valid API key is required"
    When the frontend route <route> is sent a message typed "text/plain" with the key "sk-front"
    Then the frontend route answered 415 saying "the body must be application/json, not text/plain"
    When the frontend route <route> is sent a message with the key "sk-front"
    Then the frontend route answered 200 with the run's id in X-Run-Id
    And on_usage heard of 1 frontend run

    Examples:
      | route   |
      | /ai-sdk |
      | /ag-ui  |

  Scenario: A useChat conversation becomes the actor's message and history
    When the frontend route /ai-sdk is sent the conversation "Hi" / "Hello!" / "Weather in Paris?"
    Then the frontend actor was asked "Weather in Paris?" after "Hi" and "Hello!"
    And the UI message stream starts with the run's id and ends with its usage, then [DONE]
    And the UI message stream has no cost, since the model is unpriced

  Scenario: An AG-UI conversation becomes the actor's message and history
    When the frontend route /ag-ui is sent the conversation "Hi" / "Hello!" / "Weather in Paris?"
    Then the frontend actor was asked "Weather in Paris?" after "Hi" and "Hello!"
    And the AG-UI stream starts with the run's id and ends with its usage

  Scenario: A typed answer on /ai-sdk: data-output parts under one id, the last the object
    Given the frontend actor answers with a forecast, its first one without the city
    When the frontend route /ai-sdk is sent a message
    Then the UI message stream sent the forecast as data-output parts under the id <run id>-output

  Scenario: A typed answer on /ag-ui: a state snapshot per attempt, then JSON Patch deltas
    Given the frontend actor answers with a forecast, its first one without the city
    When the frontend route /ag-ui is sent a message
    Then the AG-UI state, a snapshot per attempt and the patches between applied, is the forecast

  Scenario Outline: A failed run ends the stream with the generic error and the usage spent (<route>)
    Given the frontend actor's model fails after the lookup
    When the frontend route <route> is sent a message
    Then the frontend stream tells "ModelAPIError: the actor's run failed (request" and not "overloaded"
    And on_usage heard of 1 frontend run

    Examples:
      | route   |
      | /ai-sdk |
      | /ag-ui  |

  Scenario Outline: With a store, the chat id is the session id (<route>)
    Given the frontend actor keeps sessions in a fresh sqlite store
    When the frontend route <route> is sent, as chat "chat-7", the conversation "Hi" / "Hello!" / "Weather in Paris?"
    And the frontend route <route> is sent, as chat "chat-7", the conversation "Hi" / "Hello!" / "And tomorrow?"
    Then the frontend actor was asked "And tomorrow?" after "Weather in Paris?" and its answer, from the session
    And the session "chat-7" holds 2 turns

    Examples:
      | route   |
      | /ai-sdk |
      | /ag-ui  |

  Scenario Outline: Every stop position bills once (<route>)
    When the frontend route <route> is hung up on after each frame of its answer in turn
    Then on_usage heard of each of those runs exactly once
    And each run stopped before its last frame was cancelled, and the others answered with the script's usage

    Examples:
      | route   |
      | /ai-sdk |
      | /ag-ui  |

  Scenario: Without the ag-ui extra, /ag-ui answers 501 naming it
    Given the frontend app is built without the ag_ui package
    When the frontend route /ag-ui is sent a message
    Then the frontend route answered 501 saying "pip install 'cleveractors[ag-ui]'"
