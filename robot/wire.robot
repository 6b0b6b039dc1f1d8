*** Settings ***
Documentation       langchain-openai's `ChatOpenAI` (provider `openai`) over real HTTP against a
...                 scripted OpenAI-compatible server on 127.0.0.1: streamed SSE with tool-call
...                 fragments split across chunks, and the usage chunk. The server keeps its own
...                 record of what it billed; the counts the library reports must match it.
Resource            resources/common.resource
Test Tags           wire
Test Timeout        30 seconds
Test Teardown       Stop Scripted OpenAI Servers


*** Test Cases ***
Two Tool Rounds Report What The Server Billed, Blocking And Streaming
    [Documentation]    Two tool rounds then an answer: three requests, and the reported tokens
    ...    are the sums over the three as the server billed them, in both modes alike.
    Send Chat Message Over The Wire    wire_two_rounds.yaml    ${WEATHER QUESTION}    mode=blocking
    Server Should Have Received Requests    3
    Reported Tokens Should Equal Billed
    Send Chat Message Over The Wire    wire_two_rounds.yaml    ${WEATHER QUESTION}    mode=streaming
    Server Should Have Received Requests    3
    Reported Tokens Should Equal Billed
    Streaming And Blocking Turns Should Match

Cached And Reasoning Tokens And The Cost Are What The Server Billed
    [Documentation]    The server's usage reports prompt_tokens_details.cached_tokens and
    ...    completion_tokens_details.reasoning_tokens as OpenAI does; every call's details are
    ...    the server's, and its cost is what gpt-4o's published prices (USD 2.50 input, 1.25
    ...    cached input, 10.00 output per million tokens) make of the server's bill.
    Send Chat Message Over The Wire    wire_cached.yaml    ${WEATHER QUESTION}    mode=blocking
    Reported Tokens Should Equal Billed
    Token Details And Cost Should Equal Billed    2.50    1.25    10.00
    Send Chat Message Over The Wire    wire_cached.yaml    ${WEATHER QUESTION}    mode=streaming
    Reported Tokens Should Equal Billed
    Token Details And Cost Should Equal Billed    2.50    1.25    10.00    reported_model=${False}

A ChatOpenAI Built In Code Without stream_usage Still Bills Streamed Calls Exactly
    [Documentation]    ChatOpenAI asks for the usage chunk only on OpenAI's own URL; the agent
    ...    turns it on, so the request carries stream_options.include_usage and nothing is
    ...    estimated.
    Start Scripted OpenAI Server    wire_two_rounds.yaml
    Load ChatOpenAI Built In Code    wire_two_rounds.yaml
    Send Chat Message    ${WEATHER QUESTION}    mode=streaming
    Every Streamed Request Should Have Asked For Usage
    Reported Tokens Should Equal Billed

Provider Anthropic From Config Reports The Cache Tokens And Cost The Endpoint Billed
    [Documentation]    `provider: anthropic` with `model_options` builds ChatAnthropic, which talks
    ...    to a scripted Anthropic endpoint over real HTTP (JSON, and SSE): the options reach the
    ...    request, each call's prompt is uncached + cache reads + cache writes as billed, and its
    ...    cost is what claude-sonnet-4's published prices (USD 3.00 input, 0.30 cache read, 3.75
    ...    cache write, 15.00 output per million tokens) make of the bill.
    ...    One-hour cache writes are priced at their own USD 6.00.
    [Template]    Anthropic Usage And Cost Should Equal The Bill
    blocking     5m    3.75
    streaming    5m    3.75
    blocking     1h    6.00
    streaming    1h    6.00

The Older Anthropic Event Form Is Estimated And Flagged, Not Billed As Zero Prompt Tokens
    [Documentation]    Input usage only in message_start: langchain-anthropic reports 0 input
    ...    tokens; the library estimates the prompt, flags it and keeps the reported output.
    Load Actor Over The Anthropic Wire    wire_anthropic.yaml    usage_in_message_start_only=${True}
    Send Chat Message    ${WEATHER QUESTION}    mode=streaming
    Every Call Should Estimate The Prompt And Keep The Anthropic Output

Three Calls In One Reply Run In Model Order And Are Answered In One Re-Ask
    [Documentation]    One reply calls get_weather, get_time, get_weather: three handlers run in
    ...    that order, and the single next request answers each call id, in order.
    [Template]    Three Calls Should Run In Order And Be Answered Once
    blocking
    streaming

HTTP 500 On The Second Request Reaches The Caller With The First Call Billed
    [Documentation]    The model's own exception (langchain-core's ModelAPIError, also the openai
    ...    SDK's InternalServerError) reaches the caller, and last_result holds exactly what the
    ...    server billed for the first request.
    [Template]    Server Error Should Reach The Caller With The First Call Billed
    blocking
    streaming

Refused Requests Are Retried By The Loop, Each Attempt On The Bill
    [Documentation]    ChatOpenAI built from config (its client never retries) against a server
    ...    that answers 503, then 429 with Retry-After: 1, then the tool call: the loop makes the
    ...    retries itself, the server sees every attempt, and usage_by_call holds one record per
    ...    request, the refused ones costing 0, the others exactly what the server billed.
    [Template]    Refusals Should Be Retried And Billed
    blocking
    streaming
    events

A Dropped Reply Is Retried By The Loop, The Dropped Attempt Estimated
    [Documentation]    The connection drops mid-reply (streamed: after a tool-call fragment, no
    ...    text shown; blocking: before any response): the loop retries, and the dropped attempt,
    ...    which the server billed, is on the result as a flagged estimate, not lost.
    [Template]    A Dropped Reply Should Be Retried And Estimated
    blocking
    streaming

A Streamed Tool Turn Delivers The Answer While The Server Is Still Sending It
    [Documentation]    Causality, not speed: the first answer chunk reached the caller before the
    ...    server had sent the answer's last token.
    Send Chat Message Over The Wire    wire_one_round.yaml    ${WEATHER QUESTION}    mode=streaming
    ...    first_token_delay_s=0.01    token_interval_s=0.01
    Answer Should Have Streamed Chunk By Chunk
    First Chunk Should Have Arrived Before The Server Sent The Last Token
    Reported Tokens Should Equal Billed

Streaming Without Tools Is Token By Token With The Blocking Counts
    Send Chat Message Over The Wire    wire_no_tools.yaml    ${CHAT QUESTION}    mode=blocking
    Reported Tokens Should Equal Billed
    Send Chat Message Over The Wire    wire_no_tools.yaml    ${CHAT QUESTION}    mode=streaming
    ...    token_interval_s=0.005
    Answer Should Have Streamed Chunk By Chunk
    Reported Tokens Should Equal Billed
    Streaming And Blocking Turns Should Match

A Consumer That Stops Reading Mid-Answer Leaves No Task And Pays For Every Call
    [Documentation]    The caller stops after three chunks of a slow answer: nothing is left
    ...    running, the server sees the client leave, and last_result holds the first call as
    ...    billed and the cut-off one estimated and flagged; no task fails unnoticed.
    [Template]    Stopping Mid-Answer Should Settle The Bill
    async with
    aclose
    break

Tool Rounds Without Streaming Make The Blocking Requests And Send The Answer In One Chunk
    [Documentation]    `stream_tool_rounds: false`: every round is a blocking request, as many as
    ...    a blocking turn makes, and the stream yields the answer as one chunk.
    Send Chat Message Over The Wire    wire_two_rounds.yaml    ${WEATHER QUESTION}    mode=blocking
    Send Chat Message Over The Wire    wire_two_rounds.yaml    ${WEATHER QUESTION}    mode=streaming
    ...    stream_tool_rounds=${False}
    Streaming And Blocking Turns Should Match
    Server Requests Should Be    blocking
    Answer Should Have Arrived As One Chunk
    Reported Tokens Should Equal Billed

The Synthesis Request Declares The Tools And Forbids Calling Them
    [Documentation]    Past max_tool_rounds the synthesis request still declares get_weather
    ...    (providers reject tool blocks without tool definitions) with tool_choice "none".
    [Template]    Synthesis Request Should Declare Tools Without Calls
    blocking
    streaming

A Streaming ChatOpenAI Under execute() Runs No Tool On Broken Arguments And Bills The Cut-Off
    [Documentation]    ChatOpenAI(streaming=True) streams inside ainvoke; the loop streams it
    ...    itself in blocking mode too: the call with arguments invalid on the wire is answered
    ...    with an error and never runs, and the answer cut off mid-stream is billed by estimate,
    ...    flagged, beside the first call as the server billed it.
    [Template]    Streaming Model Should Reject Broken Arguments And Bill The Cut-Off
    blocking
    streaming

A Stream That Stalls Is Ended By The Loop's Stall Limit, The Cut Call Estimated
    [Documentation]    The server sends three chunks of the answer, then nothing for 3 s; the
    ...    actor's stall limit is 0.5 s. The loop ends the call with StreamStalledError naming
    ...    the limit and the four chunks received (the role chunk and three of text), does
    ...    not retry it (its text was shown), and bills it by estimate while the
    ...    server sees the client leave.
    [Tags]    streaming
    FOR    ${mode}    IN    streaming    events
        Start Scripted OpenAI Server    wire_stalled_reply.yaml
        Load Actor Over The Wire    wire_stalled_reply.yaml    max_retries=2
        Run Keyword And Expect Error    ${STALLED}
        ...    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
        Last Error Should Be An Instance Of    cleveractors.StreamStalledError    builtins.TimeoutError
        Server Should Have Seen The Client Leave
        Every Attempt Should Be On The Bill    1:failed
        Stop Scripted OpenAI Servers
    END

The API Key Reaches The Provider And Appears Nowhere Else
    [Documentation]    A failing turn with a canary key, blocking and as events: the server got
    ...    the key in its Authorization header, and no log record, result, event, chunk,
    ...    exception or repr contains it.
    [Setup]    Start Capturing Logs
    ${canary}=    Evaluate    "sk-canary-" + secrets.token_hex(16)    modules=secrets
    FOR    ${mode}    IN    blocking    events
        Start Scripted OpenAI Server    wire_provider_error.yaml
        Load Actor Over The Wire    wire_provider_error.yaml    api_key=${canary}
        Run Keyword And Expect Error    ${SERVER ERROR}
        ...    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
        Server Should Have Received API Key    ${canary}
    END
    Secret Should Appear Nowhere    ${canary}
    [Teardown]    Run Keywords    Stop Capturing Logs    AND    Stop Scripted OpenAI Servers


*** Variables ***
${SERVER ERROR}     OpenAIAPIError: Error code: 500 - The scripted provider is down
${STALLED}           StreamStalledError: model 'gpt-4o-mini' sent no stream chunk for 0.5 s
...                 (stream_stall_timeout_s) after 4 chunks; the call was ended


*** Keywords ***
Anthropic Usage And Cost Should Equal The Bill
    [Arguments]    ${mode}    ${cache_ttl}    ${cache_write_price}
    Load Actor Over The Anthropic Wire    wire_anthropic.yaml    cache_ttl=${cache_ttl}
    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
    Anthropic Requests Should Carry    max_tokens    2048
    Anthropic Requests Should Carry    top_k    5
    Usage And Cost Should Equal Anthropic Bill    3.00    0.30    ${cache_write_price}    15.00
    Stop Scripted OpenAI Servers

Three Calls Should Run In Order And Be Answered Once
    [Arguments]    ${mode}
    Send Chat Message Over The Wire    wire_three_calls.yaml    ${WEATHER QUESTION}    mode=${mode}
    Tool Handlers Should Have Run For Calls    call_weather_paris    call_time_tokyo    call_weather_rome
    Server Should Have Received One Tool Message Per Call In Model Order
    Server Should Have Received Requests    2
    Answer Should Be The Last Scripted Reply
    Reported Tokens Should Equal Billed

Synthesis Request Should Declare Tools Without Calls
    [Arguments]    ${mode}
    Send Chat Message Over The Wire    stub_max_rounds.yaml    ${WEATHER QUESTION}    mode=${mode}
    Answer Should Be The Last Scripted Reply
    Server Should Have Received Requests    4
    Last Server Request Should Declare Tools And Forbid Calls    get_weather
    Reported Tokens Should Equal Billed

Streaming Model Should Reject Broken Arguments And Bill The Cut-Off
    [Arguments]    ${mode}
    Start Scripted OpenAI Server    wire_broken_arguments.yaml
    Load Actor With A Streaming ChatOpenAI    wire_broken_arguments.yaml
    Run Keyword And Expect Error    OpenAIConnectionError: Connection error.
    ...    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
    Tool Handlers Should Have Run For Calls    call_paris
    Server Requests Should Be    streamed
    Reported Tokens Should Hold Billed Calls And Estimate The Cut-Off One    cancelled=${False}

Server Error Should Reach The Caller With The First Call Billed
    [Arguments]    ${mode}
    Start Scripted OpenAI Server    wire_provider_error.yaml
    Load Actor Over The Wire    wire_provider_error.yaml
    Run Keyword And Expect Error    ${SERVER ERROR}
    ...    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
    Last Error Should Be An Instance Of
    ...    langchain_core.exceptions.ModelAPIError    openai.InternalServerError
    Server Should Have Received Requests    2
    Server Should Have Billed Calls    1
    Reported Tokens Should Equal Billed

Refusals Should Be Retried And Billed
    [Arguments]    ${mode}
    Start Scripted OpenAI Server    wire_retried_refusals.yaml
    Load Actor Over The Wire    wire_retried_refusals.yaml    max_retries=2
    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
    Answer Should Be The Last Scripted Reply
    Server Should Have Received Requests    4
    Every Attempt Should Be On The Bill    1:failed    2:failed    3:ok    1:ok
    Reported Tokens Should Equal Billed
    IF    $mode == "events"    Retries Should Have Waited    backoff    1

A Dropped Reply Should Be Retried And Estimated
    [Arguments]    ${mode}
    Start Scripted OpenAI Server    wire_dropped_reply.yaml
    Load Actor Over The Wire    wire_dropped_reply.yaml    max_retries=2
    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
    Answer Should Be The Last Scripted Reply
    Server Should Have Received Requests    3
    Every Attempt Should Be On The Bill    1:failed    2:ok    1:ok

Stopping Mid-Answer Should Settle The Bill
    [Arguments]    ${style}
    Start Scripted OpenAI Server    wire_one_round.yaml    token_interval_s=0.02
    Load Actor Over The Wire    wire_one_round.yaml
    Send Chat Message And Stop Reading    ${WEATHER QUESTION}    after_chunks=3    style=${style}
    No Task Should Be Left Running
    Server Should Have Seen The Client Leave
    Reported Tokens Should Hold Billed Calls And Estimate The Cut-Off One
    Event Loop Should Have Reported No Error
