*** Settings ***
Documentation       The web router over real HTTP: `cleveractors serve` on 127.0.0.1, talked to by
...                 an SSE client, the official `openai` client and LangChain's `ChatOpenAI`.
...                 Expected answers and token counts come from the actors' scripts.
Library             Process
Library             WebLibrary.py
Suite Setup         Start Web Servers
Suite Teardown      Stop Servers


*** Variables ***
${WEATHER ACTOR}    ${CURDIR}/actors/web_weather.yaml
${FAILING ACTOR}    ${CURDIR}/actors/web_failing.yaml
${SLOW ACTOR}       ${CURDIR}/actors/web_slow.yaml
${QUESTION}         What's the weather in Paris?
@{OPENAI CONVERSATION}
...                 ${{ {"role": "system", "content": "You are a helpful assistant."} }}
...                 ${{ {"role": "user", "content": "Hi"} }}
...                 ${{ {"role": "assistant", "content": "Hello! How can I help?"} }}
...                 ${{ {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]} }}
...                 ${{ {"role": "tool", "tool_call_id": "c1", "content": "42"} }}
...                 ${{ {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Paris?"}]} }}


*** Test Cases ***
Chat Streams The Run's Typed Events And Ends With The Usage
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${chat}=    Send Chat Message    ${WEATHER}    ${QUESTION}
    Event Names Should Match Their Kinds    ${chat}
    Event Kinds Should Be    ${chat}
    ...    run_started    round_started    text_delta    usage_recorded
    ...    tool_call_requested    tool_call_started    tool_call_finished
    ...    round_started    text_delta    usage_recorded    run_finished
    ${round 1}=    Streamed Text Of Round    ${chat}    1
    ${round 2}=    Streamed Text Of Round    ${chat}    2
    Should Be Equal    ${round 1}    ${turn}[texts][0]
    Should Be Equal    ${round 2}    ${turn}[answer]
    ${finished}=    Events Of Kind    ${chat}    tool_call_finished
    ${expected output}=    Evaluate
    ...    cleveractors.demo.get_weather("Paris")    modules=cleveractors.demo
    Should Be Equal    ${finished}[0][output]    ${expected output}
    Should Be Equal    ${chat.last}[result][answer]    ${turn}[answer]
    ${everything shown}=    Evaluate    "\\n\\n".join($turn["texts"])
    Should Be Equal    ${chat.last}[result][text]    ${everything shown}
    Usage Should Match Script    ${chat.last}[result]    ${turn}

Chat History Is Accepted
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${history}=    Evaluate    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    ${chat}=    Send Chat Message    ${WEATHER}    ${QUESTION}    ${history}
    Should Be Equal    ${chat.last}[kind]    run_finished
    Usage Should Match Script    ${chat.last}[result]    ${turn}

A Failed Run Ends The Chat Stream With Run Failed And The Usage Spent
    ${turn}=    Scripted Turn    ${FAILING ACTOR}
    ${chat}=    Send Chat Message    ${FAILING}    What's the weather in Rome?
    Should Be Equal    ${chat.last}[kind]    run_failed
    # The client learns the error's type; the provider's own words stay in the server log.
    Should Be Equal    ${chat.last}[error][type]    ModelAPIError
    Should Contain    ${chat.last}[error][message]    the actor's run failed
    Should Not Contain    ${chat.last}[error][message]    ${turn}[error]
    Usage Should Match Script    ${chat.last}[result]    ${turn}

The OpenAI Client Gets A Completion With Usage
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${completion}=    Ask With OpenAI Client    ${WEATHER}    ${QUESTION}
    Should Be Equal    ${completion}[object]    chat.completion
    Should Be Equal    ${completion}[choices][0][finish_reason]    stop
    ${expected}=    Evaluate    "\\n\\n".join($turn["texts"])
    Should Be Equal    ${completion}[choices][0][message][content]    ${expected}
    Usage Should Match Script    ${completion}[usage]    ${turn}

The OpenAI Client Streams A Completion With Usage In The Last Chunk
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${streamed}=    Stream With OpenAI Client    ${WEATHER}    ${QUESTION}
    ${expected}=    Evaluate    "\\n\\n".join($turn["texts"])
    Should Be Equal    ${streamed}[content]    ${expected}
    Should Be True    ${streamed}[deltas] > 2    the answer arrived in one piece
    Should Be Equal    ${streamed}[finish_reasons]    ${{["stop"]}}
    Should Be Empty    ${streamed}[usage_chunk_choices]
    Usage Should Match Script    ${streamed}[usage]    ${turn}

The OpenAI Client Streams Text Parts, Without Usage Unless Asked
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${parts}=    Evaluate    [{"type": "text", "text": "What's the weather"}, {"type": "text", "text": "in Paris?"}]
    ${streamed}=    Stream With OpenAI Client    ${WEATHER}    ${parts}    include_usage=${False}
    ${expected}=    Evaluate    "\\n\\n".join($turn["texts"])
    Should Be Equal    ${streamed}[content]    ${expected}
    Should Be Equal    ${streamed}[finish_reasons]    ${{["stop"]}}
    Should Be Equal    ${streamed}[usage]    ${None}

An OpenAI Conversation Becomes The Actor's Message And History
    ${turn}=    OpenAI Conversation As Actor Turn    ${OPENAI CONVERSATION}
    Should Be Equal    ${turn}[message]    Weather\nin Paris?
    ${expected history}=    Evaluate    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"}]
    Should Be Equal    ${turn}[history]    ${expected history}

The OpenAI Client Sees A Failed Run As An API Error
    ${turn}=    Scripted Turn    ${FAILING ACTOR}
    ${error}=    OpenAI Client Error    ${FAILING}    What's the weather in Rome?
    Should Be Equal As Integers    ${error}[status]    502
    Should Contain    ${error}[message]    the actor's run failed
    Should Not Contain    ${error}[message]    ${turn}[error]
    Should Be Equal    ${error}[code]    ModelAPIError
    ${error}=    OpenAI Client Error    ${FAILING}    What's the weather in Rome?    stream=${True}
    Should Be Equal    ${error}[type]    APIError
    Should Contain    ${error}[message]    the actor's run failed
    Should Not Contain    ${error}[message]    ${turn}[error]
    Should Be Equal    ${error}[content]    ${turn}[texts][0]

The Text Of A Run Is The Same On /chat, /v1 Streamed And Not
    [Documentation]    One rule for the text of a run: everything the user saw, rounds set apart
    ...    by a blank line; `answer` is the last reply's text alone.
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${expected}=    Evaluate    "\\n\\n".join($turn["texts"])
    ${chat}=    Send Chat Message    ${WEATHER}    ${QUESTION}
    ${shown}=    Evaluate    "".join(e["text"] for k, e in $chat.frames if k == "text_delta")
    ${completion}=    Ask With OpenAI Client    ${WEATHER}    ${QUESTION}
    ${streamed}=    Stream With OpenAI Client    ${WEATHER}    ${QUESTION}
    Should Be Equal    ${chat.last}[result][text]    ${expected}
    Should Be Equal    ${completion}[choices][0][message][content]    ${expected}
    Should Be Equal    ${streamed}[content]    ${expected}
    Should Be Equal    ${chat.last}[result][answer]    ${turn}[answer]
    # Events carry each round's text as sent; joined by the rule, they are the result's text.
    Should Be Equal    ${shown}    ${{"".join($turn["texts"])}}

The OpenAI Client Lists And Retrieves The Actor As A Model
    ${models}=    List Models With OpenAI Client    ${WEATHER}
    ${ids}=    Evaluate    [model["id"] for model in $models]
    Should Be Equal    ${ids}    ${{["web-weather"]}}
    Should Be Equal    ${models}[0][object]    model
    Should Be Equal    ${models}[0][owned_by]    cleveractors
    ${model}=    Retrieve Model With OpenAI Client    ${WEATHER}    web-weather
    Should Be Equal    ${model}[id]    web-weather
    Should Be Equal    ${model}[created]    ${models}[0][created]
    ${missing}=    Retrieve Model With OpenAI Client    ${WEATHER}    gpt-4o
    Should Be Equal    ${missing}[type]    NotFoundError
    Should Be Equal As Integers    ${missing}[status]    404
    Should Contain    ${missing}[message]    this server serves 'web-weather'

Fields The Endpoint Cannot Honour Get 400 Naming The Param
    [Template]    Field Should Be Refused
    tools    ${{[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}}
    tool_choice    required
    n    ${2}
    logprobs    ${True}
    stop    ${{["END"]}}

A Client's max_tokens Caps Every LLM Call Of Its Turn, Over The Real Wire
    [Documentation]    Frontends often send `max_tokens`: it caps each model call of the run (a
    ...    tool round, then the answer), as ChatOpenAI sends it to an OpenAI server.
    ${provider}=    Start Scripted Lookup Server    0.01
    ${actor}=    Write Actor Over The Wire    ${OUTPUT DIR}/web_capped.yaml    ${provider}
    ...    lookup_tool=${True}
    ${server}=    Start Actor Server    ${actor}
    ${completion}=    Ask With OpenAI Client    ${server}    Weather, capped?    max_tokens=${57}
    Should Start With    ${completion}[choices][0][message][content]    It is sunny
    Scripted Server Requests Should Cap Output    57    last=2
    ${streamed}=    Stream With OpenAI Client    ${server}    Weather, streamed and capped?
    ...    max_completion_tokens=${41}
    Should Start With    ${streamed}[content]    It is sunny
    Scripted Server Requests Should Cap Output    41    last=2
    Ask With OpenAI Client    ${server}    Weather, uncapped?
    Scripted Server Requests Should Cap Output    none    last=2

Fields The Endpoint Honours Or Ignores Are Accepted
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${response}=    Post Raw Body    ${WEATHER}/v1/chat/completions
    ...    {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "n": 1, "user": "u-1", "temperature": 0.3, "tool_choice": "none", "response_format": {"type": "text"}, "stream_options": null}
    Should Be Equal As Integers    ${response}[status]    200
    Should Be Equal    ${response}[body][choices][0][message][content]    ${{"\n\n".join($turn["texts"])}}

A Failed Run Is Logged By The Server With Its Request Id
    OpenAI Client Error    ${FAILING}    What's the weather in Rome?
    ${line}=    Server Log Should Contain Line    ${FAILING}
    ...    request \\S+: the run failed: ModelAPIError: the model provider is overloaded
    Should Not Contain    ${line}    Traceback

LangChain's ChatOpenAI Talks To The Actor, Blocking And Streaming
    ${turn}=    Scripted Turn    ${WEATHER ACTOR}
    ${expected}=    Evaluate    "\\n\\n".join($turn["texts"])
    ${reply}=    Ask With LangChain    ${WEATHER}    ${QUESTION}
    Should Be Equal    ${reply}[content]    ${expected}
    Should Be Equal    ${reply}[usage_metadata][input_tokens]    ${turn}[prompt_tokens]
    Should Be Equal    ${reply}[usage_metadata][output_tokens]    ${turn}[completion_tokens]
    ${streamed}=    Stream With LangChain    ${WEATHER}    ${QUESTION}
    Should Be Equal    ${streamed}[content]    ${expected}
    Should Be True    ${streamed}[chunks] > 2    the answer arrived in one piece
    Should Be Equal    ${streamed}[usage_metadata][input_tokens]    ${turn}[prompt_tokens]
    Should Be Equal    ${streamed}[usage_metadata][output_tokens]    ${turn}[completion_tokens]

Bad Requests Get 422 With A Message
    ${response}=    Post Raw Body    ${WEATHER}/chat    {"history": []}
    Response Should Be Refused    ${response}    422    message: Field required
    ${response}=    Post Raw Body    ${WEATHER}/chat
    ...    {"message": "Hi", "history": [{"role": "robot", "content": "beep"}], "mood": "sunny"}
    Response Should Be Refused    ${response}    422    history.0.role    mood
    ${response}=    Post Raw Body    ${WEATHER}/chat    {"message": "${SPACE * 3}"}
    Response Should Be Refused    ${response}    422    message: must not be empty
    ${response}=    Post Raw Body    ${WEATHER}/chat    {"message": "Hi"
    Response Should Be Refused    ${response}    422    Invalid JSON
    ${response}=    Post Raw Body    ${WEATHER}/v1/chat/completions
    ...    {"model": "m", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    Response Should Be Refused    ${response}    422    the last message must be from the user
    Should Be Equal    ${response}[body][error][type]    invalid_request_error
    ${response}=    Post Raw Body    ${WEATHER}/v1/chat/completions
    ...    {"model": "m", "messages": [{"role": "user", "content": ""}]}
    Response Should Be Refused    ${response}    422    the last message (the user's) has no text
    ${response}=    Post Raw Body    ${WEATHER}/v1/chat/completions
    ...    {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
    Response Should Be Refused    ${response}    400    messages.0.content.0: 'image_url' parts are not supported
    Should Be Equal    ${response}[body][error][param]    messages.0.content.0
    ${response}=    Post Raw Body    ${WEATHER}/v1/chat/completions    {"messages": []}
    Response Should Be Refused    ${response}    422    model: Field required    messages: List should have at least 1 item

Bodies Over The Size Limit Get 413
    ${limit}=    Default Body Limit
    ${response}=    Post Body Of Size    ${WEATHER}/chat    ${limit}
    Response Should Be Refused    ${response}    422    Invalid JSON
    ${response}=    Post Body Of Size    ${WEATHER}/chat    ${limit + 1}
    Response Should Be Refused    ${response}    413    larger than ${limit} bytes
    ${response}=    Post Body Of Size    ${WEATHER}/chat    ${limit + 1}    chunked=${True}
    Response Should Be Refused    ${response}    413    larger than ${limit} bytes
    ${response}=    Post Body Of Size    ${WEATHER}/v1/chat/completions    ${limit + 1}    chunked=${True}
    Response Should Be Refused    ${response}    413    larger than ${limit} bytes

On Usage Is Called Once With The Usage Of A Completed Request
    ${turn}=    Scripted Turn    ${SLOW ACTOR}
    ${before}=    Count Usage Lines    ${USAGE FILE}
    ${chat}=    Send Chat Message    ${SLOW}    What's the weather in Oslo?
    ${lines}=    Wait For Usage Lines    ${USAGE FILE}    ${before + 1}
    ${reported}=    Set Variable    ${lines}[-1]
    Should Be Equal    ${reported}    ${chat.last}[result]
    Usage Should Match Script    ${reported}    ${turn}
    Should Not Be True    ${reported}[cancelled]
    Usage Lines Should Stay    ${USAGE FILE}    ${before + 1}    seconds=0.5

A Client Hanging Up Mid-Answer Cancels The Run And On Usage Gets The Spent Tokens Once
    ${turn}=    Scripted Turn    ${SLOW ACTOR}
    ${before}=    Count Usage Lines    ${USAGE FILE}
    ${chat}=    Send Chat Message And Hang Up    ${SLOW}    What's the weather in Oslo?    answer_words=3
    ${lines}=    Wait For Usage Lines    ${USAGE FILE}    ${before + 1}
    ${reported}=    Set Variable    ${lines}[-1]
    Should Be True    ${reported}[cancelled]
    Should Be Equal    ${reported}[error][type]    CancelledError
    # The lookup call completed: billed exactly as scripted. The answer was cut off: estimated.
    Should Be Equal As Integers    ${reported}[llm_calls]    2
    ...    msg=on_usage was not given the calls the run made: was the run settled before it was reported?
    Usage Should Match Script    ${reported}[usage_by_call][0][usage]    ${turn}[calls][0]
    Should Not Be True    ${reported}[usage_by_call][0][usage][estimated]
    Should Be True    ${reported}[usage_by_call][1][usage][estimated]
    Should Be True    ${reported}[usage_by_call][1][usage][completion_tokens] > 0
    Should Be True    ${reported}[usage_estimated]
    Should Be True    ${reported}[total_tokens] > ${turn}[calls][0][total_tokens]
    # Longer than the rest of the answer would have taken: an uncancelled run would report again.
    Usage Lines Should Stay    ${USAGE FILE}    ${before + 1}    seconds=1.0

An Event Stream Cancelled By An AnyIO Scope Settles Before Its Consumer Goes On
    [Documentation]    Starlette and sse-starlette cancel a response body through an anyio cancel
    ...    scope, which cancels again at every await until the scope exits. A consumer of
    ...    `execute_events()` that is cancelled this way must still find the run stopped and its
    ...    result settled when its loop ends, as when its task is cancelled once.
    ${seen}=    Consume Events Until An AnyIO Scope Is Cancelled    ${SLOW ACTOR}    What's the weather in Oslo?    events=8
    Should Be True    ${seen}[result_settled]    the stream's result was not settled when the consumer's loop ended
    Should Be Equal As Integers    ${seen}[runs_still_running]    0    msg=the run's task outlived the consumer's loop

Importing The Web Package Without Its Extra Names The Extra
    ${result}=    Run Process    ${{sys.executable}}    -c
    ...    import operator, sys; operator.setitem(sys.modules, "sse_starlette", None); import cleveractors.web
    Should Not Be Equal As Integers    ${result.rc}    0
    Should Contain    ${result.stderr}    pip install 'cleveractors[web]'
    Should Contain    ${result.stderr}    sse_starlette is missing


*** Keywords ***
Field Should Be Refused
    [Arguments]    ${field}    ${value}
    ${error}=    OpenAI Client Error For Field    ${WEATHER}    ${field}    ${value}
    Should Be Equal    ${error}[type]    BadRequestError
    Should Be Equal As Integers    ${error}[status]    400
    Should Be Equal    ${error}[param]    ${field}
    Should Contain    ${error}[message]    '${field}' is not supported by this endpoint

Start Web Servers
    ${weather}=    Start Actor Server    ${WEATHER ACTOR}
    ${failing}=    Start Actor Server    ${FAILING ACTOR}
    ${usage file}=    Set Variable    ${OUTPUT DIR}/web-usage-${{time.time_ns()}}.jsonl
    ${slow}=    Start Usage Recording Server    ${SLOW ACTOR}    ${usage file}
    Set Suite Variable    ${WEATHER}    ${weather}
    Set Suite Variable    ${FAILING}    ${failing}
    Set Suite Variable    ${SLOW}    ${slow}
    Set Suite Variable    ${USAGE FILE}    ${usage file}
