*** Settings ***
Documentation       A stop ends the run, whatever the provider's client does with the cancellation.
...                 A consumer stops a streamed run over the real wire (ChatOpenAI against a
...                 scripted OpenAI-compatible server on 127.0.0.1) at every kind of event: the run
...                 is cancelled, no tool starts after the stop, the stop returns promptly and each
...                 request the server received is in the bill. A client hanging up on the web
...                 server while a tool is slow to stop costs the server almost no CPU, and a slow
...                 reader holds the run back from the provider.
Library             StopLibrary
Library             WebLibrary
Test Tags           cancellation
Test Timeout        90 seconds
Test Teardown       Stop Stop Servers


*** Variables ***
${SLOW TO STOP ACTOR}       ${CURDIR}/actors/web_slow_to_stop.yaml
${USAGE FILE}               ${OUTPUT DIR}/stop-usage.jsonl


*** Test Cases ***
A Stop At Every Kind Of Event Ends The Run Over The Wire
    [Documentation]    Each kind of event, each with a different way of stopping.
    [Template]    A Stop Should End The Run
    first text        aclose()
    mid-text          break
    usage recorded    async with
    tool requested    cancel task
    tool started      cancel scope
    tool finished     aclose()
    first text        cancel scope
    mid-text          cancel task

A Client Hanging Up While A Tool Takes 5 s To Stop Costs The Server Under 0.2 s Of CPU
    [Documentation]    The server waits 5 s for the cancelled tool to let go; waiting is not work.
    [Teardown]    Stop Servers
    ${url}=    Start Usage Recording Server    ${SLOW TO STOP ACTOR}    ${USAGE FILE}
    ${before}=    Count Usage Lines    ${USAGE FILE}
    ${response}=    Open Chat Until A Tool Starts    ${url}    Look up the Louvre.
    ${cpu before}=    Server CPU Seconds    ${url}
    Hang Up    ${response}
    Wait For Usage Lines    ${USAGE FILE}    ${before + 1}    timeout=60
    ${cpu after}=    Server CPU Seconds    ${url}
    ${spent}=    Evaluate    ${cpu after} - ${cpu before}
    Log    server CPU across the hang-up: ${spent} s
    Should Be True    ${spent} < 0.2    the server spent ${spent} s of CPU waiting for the run to stop

A Slow Reader Holds The Run Back From The Provider
    Read A Long Answer Slowly    3000
    Model Should Have Waited For The Reader
    Whole Long Answer Should Have Arrived As Billed    3000


*** Keywords ***
A Stop Should End The Run
    [Arguments]    ${position}    ${style}
    Stop A Run Over The Wire    wire_stop.yaml    ${position}    ${style}
    Run Should Have Been Cancelled
    No Tool Should Have Started After The Stop
    Stop Should Have Returned Within    0.5
    Every Request Should Be In The Bill
    No Task Of The Run Should Be Left
