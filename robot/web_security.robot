*** Settings ***
Documentation       `cleveractors serve` over real HTTP on 127.0.0.1, seen by callers it should
...                 refuse and by clients that stop reading or leave: API keys, the Host and
...                 Content-Type checks, hidden upstream errors, the docs switch, the send timeout,
...                 and a storm of concurrent runs with hang-ups billed exactly once each.
Library             WebLibrary.py
Suite Setup         Start Guarded Servers
Suite Teardown      Stop Servers


*** Variables ***
${WEATHER ACTOR}    ${CURDIR}/actors/web_weather.yaml
${LEAKY ACTOR}      ${CURDIR}/actors/web_leaky_failure.yaml
${SLOW ACTOR}       ${CURDIR}/actors/web_slow.yaml
${UPSTREAM TEXT}    Incorrect API key provided: sk-proj-****-123


*** Test Cases ***
A Missing Or Wrong API Key Gets 401, A Right One Is Answered
    ${response}=    Post Chat Message As    ${KEYED}/chat
    Should Be Equal As Integers    ${response}[status]    401
    Should Contain    ${response}[body][detail]    a valid API key is required
    ${response}=    Post Chat Message As    ${KEYED}/v1/chat/completions    key=k-wrong
    Should Be Equal As Integers    ${response}[status]    401
    Should Be Equal    ${response}[body][error][code]    invalid_api_key
    ${response}=    Post Chat Message As    ${KEYED}/chat    key=k-second
    Should Be Equal As Integers    ${response}[status]    200
    Should Contain    ${response}[text]    event: run_finished
    ${response}=    Post Chat Message As    ${KEYED}/v1/chat/completions    key=k-first
    Should Be Equal As Integers    ${response}[status]    200
    Should Be Equal    ${response}[body][object]    chat.completion

The OpenAI Client Hears Why Its Key Was Refused, On Every OpenAI Route
    FOR    ${call}    IN    chat.completions.create    models.list    models.retrieve
        ${error}=    OpenAI Client Error With Key    ${KEYED}    ${call}    k-wrong
        Should Be Equal    ${error}[type]    AuthenticationError
        Should Be Equal As Integers    ${error}[status]    401
        Should Contain    ${error}[message]    a valid API key is required
        Should Be Equal    ${error}[body][code]    invalid_api_key
        Should Be Equal    ${error}[body][type]    invalid_request_error
    END

The Chat Page Itself Needs No Key
    ${status}=    Status Of Get    ${KEYED}/
    Should Be Equal As Integers    ${status}    200

A Foreign Host Header Is Refused
    ${response}=    Post Chat Message As    ${OPEN}/chat    host=attacker.example:${OPEN.rsplit(":", 1)[1]}
    Should Be Equal As Integers    ${response}[status]    400
    ${response}=    Post Chat Message As    ${OPEN}/chat    host=localhost:${OPEN.rsplit(":", 1)[1]}
    Should Be Equal As Integers    ${response}[status]    200

A Text Plain Body Is Refused With 415
    ${response}=    Post Chat Message As    ${OPEN}/chat    content_type=text/plain
    Should Be Equal As Integers    ${response}[status]    415
    Should Contain    ${response}[body][detail]    the body must be application/json, not text/plain
    ${response}=    Post Chat Message As    ${OPEN}/v1/chat/completions    content_type=text/plain
    Should Be Equal As Integers    ${response}[status]    415

Error Bodies Carry No Upstream Text, The Server Log Does
    FOR    ${route}    ${stream}    IN    /chat    ${False}    /v1/chat/completions    ${False}
    ...    /v1/chat/completions    ${True}
        ${response}=    Post Chat Message As    ${LEAKY}${route}    stream=${stream}
        Should Not Contain    ${response}[text]    sk-proj
        Should Not Contain    ${response}[text]    Incorrect API key
        Should Contain    ${response}[text]    ModelAPIError
        Should Contain    ${response}[text]    ${response}[request_id]
        Server Log Should Contain    ${LEAKY}    ${response}[request_id]    ${UPSTREAM TEXT}
    END

The API Docs Are Off Unless Asked For
    FOR    ${path}    IN    /docs    /redoc    /openapi.json
        ${status}=    Status Of Get    ${OPEN}${path}
        Should Be Equal As Integers    ${status}    404
    END
    ${documented}=    Start Actor Server    ${WEATHER ACTOR}    --docs
    ${status}=    Status Of Get    ${documented}/docs
    Should Be Equal As Integers    ${status}    200
    ${status}=    Status Of Get    ${documented}/openapi.json
    Should Be Equal As Integers    ${status}    200

Serve Refuses A Non-Loopback Address Without API Keys
    ${stderr}=    Serve Should Refuse To Start    ${WEATHER ACTOR}    --host    0.0.0.0    --port    1
    Should Contain    ${stderr}    refusing to serve 0.0.0.0 without API keys
    Should Contain    ${stderr}    --api-keys-env
    ${stderr}=    Serve Should Refuse To Start    ${WEATHER ACTOR}    --api-keys-env    CLEVERACTORS_NO_SUCH_VARIABLE
    Should Contain    ${stderr}    $CLEVERACTORS_NO_SUCH_VARIABLE is not set or holds no keys

A Silent SSE Reader Is Dropped After The Send Timeout, Its Run Cancelled And Billed Once
    ${before}=    Count Usage Lines    ${SILENT USAGE}
    Send Chat Message And Read Nothing    ${SILENT}    Tell me everything.
    ${lines}=    Wait For Usage Lines    ${SILENT USAGE}    ${before + 1}    timeout=20
    Should Be True    ${lines}[-1][cancelled]    the run of a dropped reader went on to its end
    Should Be True    ${lines}[-1][llm_calls] == 1
    Should Be True    ${lines}[-1][completion_tokens] > 0    the spent tokens were not billed
    Server Log Should Contain    ${SILENT}    read nothing for 1.0 s; dropped
    Usage Lines Should Stay    ${SILENT USAGE}    ${before + 1}    seconds=1.0

A Non-Streamed Client Leaving Mid-Run Stops The Run
    ${before}=    Count Usage Lines    ${SLOW USAGE}
    Ask For A Completion And Leave    ${SLOW}    What's the weather in Oslo?    after_s=0.5
    ${lines}=    Wait For Usage Lines    ${SLOW USAGE}    ${before + 1}
    Should Be True    ${lines}[-1][cancelled]    the run went on after its client left
    Should Be Equal    ${lines}[-1][error][type]    CancelledError
    # Longer than the rest of the answer would have taken: an uncancelled run would report again.
    Usage Lines Should Stay    ${SLOW USAGE}    ${before + 1}    seconds=1.0

300 Concurrent Streamed Chats With 50 Hang-Ups Are Each Billed Once, Each Exact Call As The Provider Billed
    # The hang-ups come while the lookup runs. Under load one may be noticed only after the next
    # model call went out: that call is then estimated and flagged, as the README says.
    ${scripted}=    Start Scripted Lookup Server    lookup_s=2.0
    ${actor}=    Write Actor Over The Wire    ${OUTPUT DIR}/web-lookup-actor.yaml    ${scripted}
    ...    lookup_tool=${True}
    ${usage}=    Set Variable    ${OUTPUT DIR}/web-storm-usage-${{time.time_ns()}}.jsonl
    ${storm}=    Start Usage Recording Server    ${actor}    ${usage}    callers=${True}
    ${outcomes}=    Send Concurrent Chats    ${storm}    300    hang_ups=50
    Should Be Equal    ${outcomes}    ${{ {"finished": 250, "hung_up": 50, "failed": 0} }}
    ${lines}=    Wait For Usage Lines    ${usage}    300    timeout=60
    ${cancelled}=    Evaluate    sum(line["cancelled"] for line in $lines)
    Should Be Equal As Integers    ${cancelled}    50
    Every Call Should Be Billed As The Scripted Server Billed It    ${usage}    callers=300
    Usage Lines Should Stay    ${usage}    300    seconds=1.0


*** Keywords ***
Start Guarded Servers
    ${keyed}=    Start Actor Server    ${WEATHER ACTOR}    api_keys=k-first,k-second
    ${open}=    Start Actor Server    ${WEATHER ACTOR}
    ${leaky}=    Start Actor Server    ${LEAKY ACTOR}
    ${long actor}=    Write Long Answer Actor    ${OUTPUT DIR}/web-long-answer.json
    ...    words=3000    word_length=4000
    ${silent usage}=    Set Variable    ${OUTPUT DIR}/web-silent-usage-${{time.time_ns()}}.jsonl
    ${silent}=    Start Usage Recording Server    ${long actor}    ${silent usage}    send_timeout_s=1
    ${slow usage}=    Set Variable    ${OUTPUT DIR}/web-slow-usage-${{time.time_ns()}}.jsonl
    ${slow}=    Start Usage Recording Server    ${SLOW ACTOR}    ${slow usage}
    VAR    ${KEYED}    ${keyed}    scope=SUITE
    VAR    ${OPEN}    ${open}    scope=SUITE
    VAR    ${LEAKY}    ${leaky}    scope=SUITE
    VAR    ${SILENT}    ${silent}    scope=SUITE
    VAR    ${SILENT USAGE}    ${silent usage}    scope=SUITE
    VAR    ${SLOW}    ${slow}    scope=SUITE
    VAR    ${SLOW USAGE}    ${slow usage}    scope=SUITE
