*** Settings ***
Documentation       `ActorExecutor.execute()` and `execute_stream()` (and `execute_events()`) on
...                 tool-using actors loaded from YAML with the offline `stub` provider. Each
...                 actor scripts its replies and their token counts, so the counts reported are
...                 checked call by call against the script.
Resource            resources/common.resource
Test Tags           executor
Test Timeout        30 seconds


*** Test Cases ***
Two Tool Rounds Stream Text And Count Every Round
    [Documentation]    The stream yields non-empty chunks (the text written before a tool call
    ...    too), both handlers run, and last_result counts every one of the three calls.
    [Template]    Two Tool Rounds Should Answer And Count Every Call
    streaming
    events
    blocking

Max Rounds End In The Synthesis Answer
    [Documentation]    The third tool call is past max_tool_rounds: it never runs, and the
    ...    synthesis prompt, with the tools declared and calling forbidden, gives the answer.
    [Template]    Limit Should End In The Synthesis Answer
    stub_max_rounds.yaml    max_rounds    blocking     call_paris    call_rome
    stub_max_rounds.yaml    max_rounds    streaming    call_paris    call_rome

Token Budget Ends In The Synthesis Answer
    [Template]    Limit Should End In The Synthesis Answer
    stub_budget.yaml    budget    blocking     call_paris
    stub_budget.yaml    budget    streaming    call_paris

Stuck Tool-Only Mode Ends In The Synthesis Answer
    [Template]    Limit Should End In The Synthesis Answer
    stub_stuck.yaml    stuck    blocking     call_rome
    stub_stuck.yaml    stuck    streaming    call_rome

An Ends-Turn Tool Answers And Skips The Calls Behind It
    [Template]    Booking Should End The Turn
    blocking
    streaming

A Provider Failure Reaches The Caller With The Tokens Already Spent
    [Documentation]    The second call fails: the model's own exception reaches the caller, and
    ...    last_result, set before it propagated, holds the first call's tokens.
    [Template]    Provider Failure Should Leave The Tokens Spent
    blocking
    streaming


*** Keywords ***
Two Tool Rounds Should Answer And Count Every Call
    [Arguments]    ${mode}
    Send Chat Message To Actor    stub_two_rounds.yaml    ${WEATHER QUESTION}    mode=${mode}
    Answer Should Be The Last Scripted Reply
    Tool Handlers Should Have Run For Calls    call_paris    call_rome
    Reported Tokens Should Equal The Script
    IF    $mode != "blocking"
        Streamed Chunks Should Not Be Empty
        Streamed Text Should Be Every Scripted Text In Order
    END

Limit Should End In The Synthesis Answer
    [Arguments]    ${actor}    ${reason}    ${mode}    @{calls that ran}
    Send Chat Message To Actor    ${actor}    ${WEATHER QUESTION}    mode=${mode}
    Turn Should Have Ended In Synthesis    ${reason}
    Tool Handlers Should Have Run For Calls    @{calls that ran}
    Reported Tokens Should Equal The Script

Booking Should End The Turn
    [Arguments]    ${mode}
    Send Chat Message To Actor    stub_ends_turn.yaml    ${BOOKING REQUEST}    mode=${mode}
    Answer Should Be The Output Of Tool Call    call_booking
    Tool Call Should Have Been Skipped    call_paris
    Tool Handlers Should Have Run For Calls    call_booking
    Reported Tokens Should Equal The Script

Provider Failure Should Leave The Tokens Spent
    [Arguments]    ${mode}
    Load Actor    stub_provider_error.yaml
    Run Keyword And Expect Error    ModelAPIError: The scripted provider is down
    ...    Send Chat Message    ${WEATHER QUESTION}    mode=${mode}
    Last Error Should Be An Instance Of    langchain_core.exceptions.ModelAPIError
    Tool Handlers Should Have Run For Calls    call_paris
    Reported Tokens Should Equal The Script
