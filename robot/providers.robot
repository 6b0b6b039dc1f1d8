*** Settings ***
Documentation       Provider integrations over the real wire: langchain-anthropic's `ChatAnthropic`
...                 against `ScriptedAnthropicServer` (extended thinking on and off) and
...                 `ChatOpenAI(use_responses_api=True)` against a scripted Responses API server,
...                 both on 127.0.0.1. The agent is built in code and run blocking (`execute`) and
...                 as events (`execute_events`); each run has its own server, whose record of
...                 requests and bills the library's counts and requests are compared with.
Library             ProvidersLibrary
Test Tags           wire    providers
Test Timeout        60 seconds
Test Teardown       Stop Provider Servers


*** Test Cases ***
Anthropic Without Thinking: One Tool Round, Blocking And As Events
    [Template]    Anthropic Conversation Should Succeed In Both Modes
    one tool round    thinking=${False}    cities=Paris

Anthropic Without Thinking: Two Tool Rounds, Blocking And As Events
    [Template]    Anthropic Conversation Should Succeed In Both Modes
    two tool rounds    thinking=${False}    cities=Paris,Rome

Anthropic Without Thinking: Parallel Calls Of The Same Tool, Blocking And As Events
    [Template]    Anthropic Conversation Should Succeed In Both Modes
    parallel calls    thinking=${False}    cities=Paris,Rome

Anthropic With Thinking: One Tool Round, Blocking And As Events
    [Documentation]    The second request must carry the first reply's thinking block with its
    ...    signature, or the server answers 400 as the Messages API does.
    [Template]    Anthropic Conversation Should Succeed In Both Modes
    one tool round    thinking=${True}    cities=Paris

Anthropic With Thinking: Two Tool Rounds, Blocking And As Events
    [Template]    Anthropic Conversation Should Succeed In Both Modes
    two tool rounds    thinking=${True}    cities=Paris,Rome

Anthropic With Thinking: Parallel Calls Of The Same Tool, Blocking And As Events
    [Template]    Anthropic Conversation Should Succeed In Both Modes
    parallel calls    thinking=${True}    cities=Paris,Rome

Anthropic Model With Streaming Off Runs As Events: Two Tool Rounds With Thinking
    [Documentation]    `ChatAnthropic(streaming=False)`: its `astream()` yields whole messages;
    ...    the run still answers, bills exactly and sends the blocking run's requests.
    Run Anthropic Conversation    two tool rounds    blocking    thinking=${True}
    Run Anthropic Conversation    two tool rounds    events    thinking=${True}
    ...    streaming_model=${False}
    Answer Should Be The Last Scripted Text
    Tool Should Have Run For    Paris    Rome
    Reported Tokens Should Equal The Server Record
    Server Requests Should Have Been Blocking
    Request Bodies Should Be The Same In Both Modes

Anthropic With Thinking Blocking: Every Tool-Use Turn Goes Back With Its Signed Thinking
    Run Anthropic Conversation    two tool rounds    blocking    thinking=${True}
    Answer Should Be The Last Scripted Text
    Every Assistant Turn Should Have Been Sent Back With Its Thinking
    Reported Tokens Should Equal The Server Record

Anthropic 529 On Request 2 Is Retried By The Loop, The Refused Attempt Recorded At No Cost
    [Template]    Overloaded Request Should Be Retried
    blocking
    events

Anthropic 529 On Request 2 Without Retries Reaches The Caller, Every Attempt Recorded
    [Documentation]    The refused attempt is a record too (0 tokens), so the calls reported
    ...    equal the requests the server received.
    [Template]    Overloaded Request Should Fail The Run
    blocking
    events

Anthropic Dropped Stream Mid-Answer Fails The Run, The Cut-Off Call Estimated
    [Documentation]    The answer's stream is cut after text reached the caller: the error
    ...    surfaces, round 1 is reported as billed and the cut-off call as a flagged estimate.
    Run Anthropic Conversation    dropped stream    events    thinking=${False}
    Run Should Have Failed With    RemoteProtocolError
    Tool Should Have Run For    Paris
    Cut-Off Call Should Be Estimated And The Rest Exact

Anthropic Dropped Stream Under execute() With A Streaming Model Is Billed, Not Lost
    [Documentation]    `ChatAnthropic(streaming=True)` streams inside `ainvoke`: a cut-off must be
    ...    billed (estimated, flagged), as under `execute_events`.
    Run Anthropic Conversation    dropped stream    blocking    thinking=${False}
    ...    streaming_model=${True}
    Run Should Have Failed With    RemoteProtocolError
    Cut-Off Call Should Be Estimated And The Rest Exact

Anthropic Broken Argument JSON Never Reaches The Tool, As Events
    [Documentation]    The tool_use input streamed is not valid JSON: the tool never runs, the
    ...    model is told, and its next reply is the answer.
    Run Anthropic Conversation    broken argument JSON    events    thinking=${False}
    Tool Should Have Run For
    Answer Should Be The Last Scripted Text
    Reported Tokens Should Equal The Server Record

Anthropic Broken Argument JSON Never Reaches The Tool Under execute() With A Streaming Model
    Run Anthropic Conversation    broken argument JSON    blocking    thinking=${False}
    ...    streaming_model=${True}
    Tool Should Have Run For
    Answer Should Be The Last Scripted Text
    Reported Tokens Should Equal The Server Record

Anthropic Stuck Model Ends In A Synthesis The Server Accepts, Blocking And As Events
    [Documentation]    After a tool round the model replies with nothing: the synthesis request
    ...    (tools still declared, as the Messages API requires once the transcript holds
    ...    tool_use blocks) gives the answer.
    [Template]    Stuck Model Should End In Synthesis
    blocking
    events

Responses API: Two Tool Rounds, Blocking And As Events
    [Documentation]    Each function call goes back after its reasoning item (by id, with its
    ...    encrypted content), or the server answers 400 as the API does.
    [Template]    Responses Conversation Should Succeed In Both Modes
    two tool rounds    cities=Paris,Rome

Responses API Blocking: Reasoning Items Go Back Before Their Function Calls
    Run Responses Conversation    two tool rounds    blocking
    Answer Should Be The Last Scripted Text
    Every Function Call Should Have Been Sent Back After Its Reasoning
    Tool Should Have Run For    Paris    Rome
    Reported Tokens Should Equal The Server Record

Responses Server Streams What The openai SDK Rebuilds Into The Scripted Response
    Openai SDK Should Rebuild The Scripted Response

Responses Server Rejects A Function Call Without Its Reasoning Item Like The API
    Responses Server Should Reject A Function Call Without Its Reasoning


*** Keywords ***
Anthropic Conversation Should Succeed In Both Modes
    [Documentation]    Runs `conversation` blocking and as events: both answer with the script's
    ...    last text after running get_weather for `cities`; counts equal each server's record;
    ...    both modes sent the same request bodies apart from the streaming flag.
    [Arguments]    ${conversation}    ${thinking}    ${cities}
    @{expected}=    Evaluate    "${cities}".split(",")
    FOR    ${mode}    IN    blocking    events
        Run Anthropic Conversation    ${conversation}    ${mode}    thinking=${thinking}
        Answer Should Be The Last Scripted Text
        Tool Should Have Run For    @{expected}
        Reported Tokens Should Equal The Server Record
    END
    Request Bodies Should Be The Same In Both Modes

Responses Conversation Should Succeed In Both Modes
    [Arguments]    ${conversation}    ${cities}
    @{expected}=    Evaluate    "${cities}".split(",")
    FOR    ${mode}    IN    blocking    events
        Run Responses Conversation    ${conversation}    ${mode}
        Answer Should Be The Last Scripted Text
        Tool Should Have Run For    @{expected}
        Every Function Call Should Have Been Sent Back After Its Reasoning
        Reported Tokens Should Equal The Server Record
    END
    Request Bodies Should Be The Same In Both Modes

Overloaded Request Should Be Retried
    [Arguments]    ${mode}
    Run Anthropic Conversation    529 on request 2    ${mode}    thinking=${False}    max_retries=2
    Answer Should Be The Last Scripted Text
    Server Should Have Received Requests    3
    Refused Attempt Should Be Recorded At No Cost
    Reported Tokens Should Equal The Server Record

Overloaded Request Should Fail The Run
    [Arguments]    ${mode}
    Run Anthropic Conversation    529 on request 2    ${mode}    thinking=${False}
    Run Should Have Failed With    OverloadedError
    Server Should Have Received Requests    2
    Tool Should Have Run For    Paris
    Reported Tokens Should Equal The Server Record

Stuck Model Should End In Synthesis
    [Arguments]    ${mode}
    Run Anthropic Conversation    stuck model    ${mode}    thinking=${True}
    Turn Should Have Ended In Synthesis    stuck
    Reported Tokens Should Equal The Server Record
