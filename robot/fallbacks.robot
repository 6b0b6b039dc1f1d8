*** Settings ***
Documentation       Fallback models over the real wires: an agent on `ChatOpenAI` against
...                 `ScriptedOpenAIServer` (refusing, as the API does, content parts and tool
...                 messages it does not take) falls back to `ChatAnthropic` against
...                 `ScriptedAnthropicServer`, or the other way round, both on 127.0.0.1. The
...                 executor keeps a SQLite store: the ledger rows checked are the store's.
Library             FallbackLibrary
Test Tags           wire    fallbacks
Test Timeout        60 seconds
Test Teardown       Stop Fallback Servers


*** Test Cases ***
OpenAI 503 After Its Retries: Anthropic Answers, Each Attempt Priced At Its Own Model
    [Template]    OpenAI Outage Should Fall Back To Anthropic
    blocking
    events

A Failure After Streamed Text Never Falls Back
    [Documentation]    The text already shown cannot be taken back: the run fails as it would
    ...    without a fallback, and the Anthropic server is never asked.
    Start Fallback Actor    openai text then cut
    Ask The Fallback Actor    mode=events
    The Run Should Have Failed With    RemoteProtocolError
    The Servers Should Have Received    openai=1    anthropic=0
    The Ledger Should Hold    openai gpt-4o-mini 1 failed

A Transcript With Anthropic Thinking Replays On OpenAI Without A 400
    [Documentation]    Round 1 is Anthropic's, with thinking, redacted thinking and a tool call;
    ...    round 2 is refused 529 and OpenAI takes over the transcript: its thinking blocks
    ...    dropped, its tool call id kept. Sent as written, the OpenAI server refuses it.
    Start Fallback Actor    anthropic 529 after thinking    first=anthropic    thinking=${True}
    Ask The Fallback Actor    mode=events
    The Answer Should Be    Paris has light rain.
    The OpenAI Request Should Carry The Tool Call Without Thinking
    The Servers Should Have Received    openai=1    anthropic=2
    The OpenAI Server Should Refuse The Transcript As Anthropic Wrote It

An Immediate 529 Falls Back With No Retry
    Start Fallback Actor    anthropic 529    first=anthropic    max_retries=2
    Ask The Fallback Actor
    The Answer Should Be    Paris has light rain.
    The Servers Should Have Received    openai=1    anthropic=1
    The Ledger Should Hold    anthropic claude-sonnet-4-5 1 failed    openai gpt-4o-mini 1 ok
    The Last Run Should Have Been Answered By    gpt-4o-mini    claude-sonnet-4-5

A Sticky Session Stays On The Model That Answered
    [Documentation]    With `sticky: session` the second message goes straight to Anthropic,
    ...    which answered the first: the OpenAI server is not asked again.
    Start Fallback Actor    two turns on openai 503    sticky=session
    Ask The Fallback Actor
    The Answer Should Be    Paris has light rain.
    Ask The Fallback Actor    And in Rome?    events
    The Answer Should Be    Rome is sunny.
    The Servers Should Have Received    openai=2    anthropic=2
    The Last Run Should Have Been Answered By    claude-sonnet-4-5


*** Keywords ***
OpenAI Outage Should Fall Back To Anthropic
    [Arguments]    ${mode}
    Start Fallback Actor    openai 503
    Ask The Fallback Actor    mode=${mode}
    The Answer Should Be    Paris has light rain.
    The Servers Should Have Received    openai=2    anthropic=1
    The Ledger Should Hold
    ...    openai gpt-4o-mini 1 failed
    ...    openai gpt-4o-mini 2 failed
    ...    anthropic claude-sonnet-4-5 1 ok
    Refused Rows Should Cost Nothing And Answers Be Priced At Their Model
    Each Chat Span Should Name Its Model And Server
    The Last Run Should Have Been Answered By    claude-sonnet-4-5    gpt-4o-mini
