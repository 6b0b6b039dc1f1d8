*** Settings ***
Documentation       The frontends' own protocols over real HTTP, checked by their own client
...                 libraries under Node: the Vercel AI SDK's chat (`ai`, the class `useChat`
...                 wraps, with its `DefaultChatTransport`) against `POST /ai-sdk`, and
...                 `@ag-ui/client`'s `HttpAgent` against `POST /ag-ui`. The actor's model is a
...                 scripted OpenAI-compatible server; the usage a client holds must equal that
...                 server's billing record. The clients come from robot/node (`npm ci`, which
...                 `nox -s integration_tests` runs).
Library             Collections
Library             FrontendsLibrary.py
Suite Teardown      Stop Servers


*** Variables ***
${QUESTION}         What's the weather in Paris?
${BOOKING}          Book a table for two at Chez Marie.


*** Test Cases ***
A useChat Chat Holds A Two-Round Tool Turn With The Usage The Provider Billed
    ${server}=    Serve The Script With cleveractors serve    two rounds
    ${held}=    Run AI SDK Client    ${server}    ${QUESTION}
    ${round}=    Set Variable    ${held}[rounds][0]
    Should Be Equal    ${round}[status]    ready
    Should Be Empty    ${round}[errors]
    ${parts}=    Assistant Parts    ${held}
    ${texts}=    Texts Of Parts    ${parts}
    ${scripted}=    Scripted Texts    two rounds
    Should Be Equal    ${texts}    ${scripted}
    ${steps}=    Evaluate    [part["type"] for part in $parts].count("step-start")
    Should Be Equal As Integers    ${steps}    2    one step per model call
    ${tools}=    Tool Parts    ${parts}
    Length Should Be    ${tools}    1
    Should Be Equal    ${tools}[0][type]    tool-get_weather
    Should Be Equal    ${tools}[0][state]    output-available
    Should Be Equal    ${tools}[0][input]    ${{ {"city": "Paris"} }}
    ${weather}=    Evaluate    cleveractors.demo.get_weather("Paris")    modules=cleveractors.demo
    Should Be Equal    ${tools}[0][output]    ${weather}
    ${billed}=    Billed Usage
    Should Be Equal As Integers    ${billed}[completed]    2
    ${metadata}=    Set Variable    ${round}[finishes][0][metadata]
    Metadata Usage Should Equal Billed    ${metadata}    ${billed}
    Should Start With    ${metadata}[run_id]    run_
    # gpt-4o-mini has a price: the cost is a decimal string (a float would round it).
    Should Match Regexp    ${metadata}[cost_usd]    ^0\\.\\d+$

An AG-UI HttpAgent Holds A Two-Round Tool Turn With The Usage The Provider Billed
    ${server}=    Serve The Script With cleveractors serve    two rounds
    ${held}=    Run AG-UI Client    ${server}    ${QUESTION}
    ${run}=    Set Variable    ${held}[rounds][0]
    Should Be Equal    ${run}[error]    ${None}
    ${messages}=    Set Variable    ${run}[messages]
    ${roles}=    Evaluate    [message["role"] for message in $messages]
    Should Be Equal    ${roles}    ${{ ["user", "assistant", "tool", "assistant"] }}
    ${scripted}=    Scripted Texts    two rounds
    Should Be Equal    ${messages}[1][content]    ${scripted}[0]
    Should Be Equal    ${messages}[3][content]    ${scripted}[1]
    ${call}=    Set Variable    ${messages}[1][toolCalls][0]
    Should Be Equal    ${call}[function][name]    get_weather
    Should Be Equal    ${{ json.loads($call["function"]["arguments"]) }}    ${{ {"city": "Paris"} }}
    ${weather}=    Evaluate    cleveractors.demo.get_weather("Paris")    modules=cleveractors.demo
    Should Be Equal    ${messages}[2][content]    ${weather}
    Should Be Equal    ${messages}[2][toolCallId]    ${call}[id]
    ${finished}=    Events Of Type    ${run}    RUN_FINISHED
    Length Should Be    ${finished}    1
    ${billed}=    Billed Usage
    AG-UI Usage Should Equal Billed    ${finished}[0]    ${billed}
    ${started}=    Events Of Type    ${run}    RUN_STARTED
    Should Be Equal    ${started}[0][runId]    ${finished}[0][runId]
    Should Be Equal    ${finished}[0][metadata][cleveractors][run_id]    ${finished}[0][runId]

A Tool Error Reaches Both Clients As The Tool's Own Error Text
    ${server}=    Serve The Script    tool error
    ${held}=    Run AI SDK Client    ${server}    Look up the Paris weather.
    ${parts}=    Assistant Parts    ${held}
    ${tools}=    Tool Parts    ${parts}
    Should Be Equal    ${tools}[0][type]    tool-broken_lookup
    Should Be Equal    ${tools}[0][state]    output-error
    Should Be Equal    ${tools}[0][input]    ${{ {"query": "Paris weather"} }}
    Should Contain    ${tools}[0][errorText]    lookup backend unavailable for 'Paris weather'
    ${texts}=    Texts Of Parts    ${parts}
    Should Be Equal    ${texts}    ${{ ["The lookup is down; try again later."] }}
    ${billed}=    Billed Usage
    Metadata Usage Should Equal Billed    ${held}[rounds][0][finishes][0][metadata]    ${billed}
    ${server}=    Serve The Script    tool error
    ${held}=    Run AG-UI Client    ${server}    Look up the Paris weather.
    ${run}=    Set Variable    ${held}[rounds][0]
    Should Be Equal    ${run}[error]    ${None}
    ${results}=    Events Of Type    ${run}    TOOL_CALL_RESULT
    Should Contain    ${results}[0][content]    lookup backend unavailable for 'Paris weather'
    Should Be Equal    ${run}[messages][-1][content]    The lookup is down; try again later.
    ${finished}=    Events Of Type    ${run}    RUN_FINISHED
    ${billed}=    Billed Usage
    AG-UI Usage Should Equal Billed    ${finished}[0]    ${billed}

Stopping A useChat Answer Midway Stops The Run And Bills It Once
    ${usage file}=    Set Variable    ${OUTPUT DIR}/frontends-usage-${{time.time_ns()}}.jsonl
    ${server}=    Serve The Script    slow answer    ${usage file}
    ${held}=    Run AI SDK Client    ${server}    ${QUESTION}    stop-after-words=3
    Should Be True    ${held}[rounds][0][finishes][0][isAbort]    the chat did not stop
    Stopped Run Should Be Billed Once    ${usage file}

Aborting An AG-UI Run Midway Stops The Run And Bills It Once
    ${usage file}=    Set Variable    ${OUTPUT DIR}/frontends-usage-${{time.time_ns()}}.jsonl
    ${server}=    Serve The Script    slow answer    ${usage file}
    ${held}=    Run AG-UI Client    ${server}    ${QUESTION}    stop-after-words=3
    ${finished}=    Events Of Type    ${held}[rounds][0]    RUN_FINISHED
    Should Be Empty    ${finished}    the run was not stopped midway
    Stopped Run Should Be Billed Once    ${usage file}

A useChat Approval Resumes The Paused Run On The Server's Records
    [Documentation]    A gated call comes as a `tool-approval-request`; the chat's approval
    ...    response (`addToolApprovalResponse`, then `sendMessage()`) resumes the paused run,
    ...    whose segments are billed apart: each finish holds its own segment's usage.
    ${usage file}=    Set Variable    ${OUTPUT DIR}/frontends-usage-${{time.time_ns()}}.jsonl
    ${server}=    Serve The Script    booking    ${usage file}
    ${held}=    Run AI SDK Client    ${server}    ${BOOKING}    approve=yes
    ${paused}=    Tool Parts    ${{ $held["rounds"][0]["messages"][-1]["parts"] }}
    Should Be Equal    ${paused}[0][type]    tool-book_table
    Should Be Equal    ${paused}[0][state]    approval-requested
    Should Be Equal    ${paused}[0][input]    ${{ {"restaurant": "Chez Marie", "people": 2} }}
    ${first}=    Set Variable    ${held}[rounds][0][finishes][0][metadata]
    Should Start With    ${paused}[0][approval][id]    ${first}[run_id]:
    ${billed}=    Billed Usage    0    1
    Metadata Usage Should Equal Billed    ${first}    ${billed}
    ${round}=    Set Variable    ${held}[rounds][1]
    Should Be Equal    ${round}[status]    ready
    ${parts}=    Assistant Parts    ${held}
    ${tools}=    Tool Parts    ${parts}
    Length Should Be    ${tools}    1    the resumed run goes on in the same message
    Should Be Equal    ${tools}[0][state]    output-available
    Should Be Equal    ${tools}[0][output]    Booked a table for 2 at Chez Marie.
    ${texts}=    Texts Of Parts    ${parts}
    Should Be Equal    ${texts}    ${{ ["I will book it.", "Your table at Chez Marie is booked."] }}
    ${second}=    Set Variable    ${round}[finishes][1][metadata]
    Should Not Be Equal    ${second}[run_id]    ${first}[run_id]
    ${billed}=    Billed Usage    1    2
    Metadata Usage Should Equal Billed    ${second}    ${billed}
    ${lines}=    Wait For Usage Lines    ${usage file}    2
    Should Be Equal    ${lines}[1][resumed_from]    ${first}[run_id]

A useChat Refusal Leaves The Gated Call Denied
    ${server}=    Serve The Script    booking
    ${held}=    Run AI SDK Client    ${server}    ${BOOKING}    approve=no
    ${tools}=    Tool Parts    ${{ $held["rounds"][1]["messages"][-1]["parts"] }}
    Should Be Equal    ${tools}[0][state]    output-denied
    Should Be Equal    ${held}[rounds][1][status]    ready

An AG-UI Interrupt Is Answered By A Resume Entry, With Edited Arguments
    [Documentation]    A gated call ends the run with an interrupt outcome naming the call and
    ...    describing the answer (`responseSchema`); the next run's `resume` entry answers it.
    ${server}=    Serve The Script    booking
    ${held}=    Run AG-UI Client    ${server}    ${BOOKING}
    ...    approve=edit:{"restaurant": "Chez Marie", "people": 4}
    ${paused}=    Set Variable    ${held}[rounds][0]
    Should Be Equal    ${paused}[error]    ${None}
    ${finished}=    Events Of Type    ${paused}    RUN_FINISHED
    ${interrupts}=    Set Variable    ${finished}[0][outcome][interrupts]
    Length Should Be    ${interrupts}    1
    Should Be Equal    ${interrupts}[0][toolCallId]    call_book
    Should Be Equal    ${interrupts}[0][responseSchema][required]    ${{ ["approved"] }}
    Should Be Equal    ${paused}[pendingInterrupts][0][id]    ${interrupts}[0][id]
    ${billed}=    Billed Usage    0    1
    AG-UI Usage Should Equal Billed    ${finished}[0]    ${billed}
    ${resumed}=    Set Variable    ${held}[rounds][1]
    Should Be Equal    ${resumed}[error]    ${None}
    ${results}=    Events Of Type    ${resumed}    TOOL_CALL_RESULT
    Should Be Equal    ${results}[0][content]    Booked a table for 4 at Chez Marie.
    Should Be Equal    ${resumed}[messages][-1][content]    Your table at Chez Marie is booked.
    Should Be Empty    ${resumed}[pendingInterrupts]
    ${finished}=    Events Of Type    ${resumed}    RUN_FINISHED
    ${billed}=    Billed Usage    1    2
    AG-UI Usage Should Equal Billed    ${finished}[0]    ${billed}

A useChat Chat Holds A Typed Answer As One data-output Part That Grew In Place
    [Documentation]    A typed actor's object streams as `data-output` parts under one id: the
    ...    chat saw it grow (each version extends the one before), the message holds one
    ...    part, and the last is the blocking run's `result.output`.
    ${server}=    Serve The Typed Script
    ${held}=    Run AI SDK Client    ${server}    ${QUESTION}
    ${round}=    Set Variable    ${held}[rounds][0]
    Should Be Equal    ${round}[status]    ready
    Should Be Empty    ${round}[errors]
    ${seen}=    Evaluate    [part["data"] for part in $round["outputs"]]
    ${ids}=    Evaluate    {part["id"] for part in $round["outputs"]}
    Length Should Be    ${ids}    1    every version under one id
    Each Object Should Extend The One Before    ${seen}    minimum=4
    ${parts}=    Assistant Parts    ${held}
    ${data}=    Evaluate    [part for part in $parts if part["type"] == "data-output"]
    Length Should Be    ${data}    1    the client replaced the part in place
    ${blocking}=    Blocking Output    typed forecast    ${QUESTION}
    Should Be Equal    ${data}[0][data]    ${blocking}
    Should Be Equal    ${seen}[-1]    ${blocking}
    Should Be Equal    ${data}[0][id]    ${round}[finishes][0][metadata][run_id]-output

An AG-UI HttpAgent's State Holds A Typed Answer, Patched As It Grew
    [Documentation]    A typed actor's object is the run's state `{"output": ...}`: one
    ...    `STATE_SNAPSHOT`, then `STATE_DELTA`s (JSON Patch) the client applies; the state grew
    ...    with each, and ends as the blocking run's `result.output`.
    ${server}=    Serve The Typed Script
    ${held}=    Run AG-UI Client    ${server}    ${QUESTION}
    ${run}=    Set Variable    ${held}[rounds][0]
    Should Be Equal    ${run}[error]    ${None}
    ${snapshots}=    Events Of Type    ${run}    STATE_SNAPSHOT
    Length Should Be    ${snapshots}    1
    ${deltas}=    Events Of Type    ${run}    STATE_DELTA
    Should Be True    len($deltas) >= 3    only ${{len($deltas)}} deltas
    ${types}=    Evaluate    [event["type"] for event in $run["events"]]
    Should Be True    $types.index("STATE_SNAPSHOT") < $types.index("STATE_DELTA")
    ${seen}=    Evaluate    [state["output"] for state in $run["states"]]
    Each Object Should Extend The One Before    ${seen}    minimum=4
    ${blocking}=    Blocking Output    typed forecast    ${QUESTION}
    Should Be Equal    ${run}[state][output]    ${blocking}
    Should Be Equal    ${seen}[-1]    ${blocking}


*** Keywords ***
Serve The Typed Script
    [Documentation]    `cleveractors serve` of a typed actor (the forecast's `output_schema`)
    ...    whose model looks the weather up, then answers with the forecast as JSON.
    ${provider}=    Start Scripted Provider    typed forecast
    ${actor}=    Write Frontend Actor    frontends-${{time.time_ns()}}    ${provider}    typed=True
    ${server}=    Start Actor Server    ${actor}
    RETURN    ${server}

Serve The Script With cleveractors serve
    [Documentation]    A scripted provider playing SCRIPT, and `cleveractors serve` of an actor
    ...    using it; the server's base URL.
    [Arguments]    ${script}
    ${provider}=    Start Scripted Provider    ${script}
    ${actor}=    Write Frontend Actor    frontends-${{time.time_ns()}}    ${provider}
    ${server}=    Start Actor Server    ${actor}
    RETURN    ${server}

Serve The Script
    [Documentation]    As `Serve The Script With cleveractors serve`, served by the app that
    ...    appends each `on_usage` result to USAGE FILE.
    [Arguments]    ${script}    ${usage file}=${OUTPUT DIR}/frontends-usage-${{time.time_ns()}}.jsonl
    ${provider}=    Start Scripted Provider    ${script}
    ${actor}=    Write Frontend Actor    frontends-${{time.time_ns()}}    ${provider}
    ${server}=    Start Usage Recording Server    ${actor}    ${usage file}
    RETURN    ${server}

Stopped Run Should Be Billed Once
    [Documentation]    The run behind USAGE FILE was cancelled when the client left, and
    ...    `on_usage` heard of it once, with the lookup billed as the provider billed it and
    ...    the cut-off answer as a flagged estimate.
    [Arguments]    ${usage file}
    ${lines}=    Wait For Usage Lines    ${usage file}    1
    ${reported}=    Set Variable    ${lines}[0]
    Should Be True    ${reported}[cancelled]
    Should Be Equal As Integers    ${reported}[llm_calls]    2
    ${lookup}=    Billed Usage    0    1
    Should Be Equal As Integers    ${reported}[usage_by_call][0][usage][prompt_tokens]    ${lookup}[prompt_tokens]
    Should Be Equal As Integers    ${reported}[usage_by_call][0][usage][completion_tokens]    ${lookup}[completion_tokens]
    Should Be True    ${reported}[usage_by_call][1][usage][estimated]
    Usage Lines Should Stay    ${usage file}    1    seconds=1.0
