*** Settings ***
Documentation       A person in the loop over real HTTP: a run pauses on `/chat` for two tool calls that
...                 need approval, and is decided on `POST /runs/{id}/decisions`: on another
...                 `cleveractors serve` process after the first was killed with SIGKILL (one
...                 PostgreSQL behind both), by two processes at once (one wins), and on the chat page
...                 in Chromium. The model is a scripted OpenAI server; what it was told about each
...                 decision is read from the requests it received.
Library             Collections
Library             OperatingSystem
Library             SeleniumLibrary    timeout=20s    run_on_failure=Capture Page Screenshot
Library             ApprovalsLibrary.py
Suite Teardown      Stop Everything


*** Variables ***
${ACTOR}            ${CURDIR}/actors/approvals_two_calls.yaml
${TREE}             ${CURDIR}/actors/tree_chief.yaml
${REASON}           not tonight, we are staying in


*** Test Cases ***
A Run Paused On A Killed Server Is Decided And Resumed On Another, And The Model Reads Each Decision
    ${database}=    New Postgres Database
    ${actor}=    Actor Over The Wire    ${ACTOR}
    ${first}=    Start Stored Server    ${actor}    ${database}
    ${paused}=    Chat And Read    ${first}    Plan my evening in Paris    session_id=s-evening
    Should Be Equal    ${paused.last}[kind]    run_paused
    ${pending}=    Evaluate    [call["call_id"] for call in $paused.last["result"]["pending_approvals"]]
    Should Be Equal    ${pending}    ${{ ["call_weather", "call_table"] }}
    ${requested}=    Events Of Kind    ${paused}    tool_approval_requested
    Length Should Be    ${requested}    2
    Should Not Contain    ${paused.kinds}    tool_call_started    no gated call ran
    ${run_id}=    Set Variable    ${paused.last}[result][run_id]
    Kill Server    ${first}
    ${second}=    Start Stored Server    ${actor}    ${database}
    ${waiting}=    Read Run    ${second}    ${run_id}
    Should Be Equal As Integers    ${waiting.status_code}    200
    Should Be Equal    ${waiting.json()}[status]    paused
    Length Should Be    ${waiting.json()}[pending_approvals]    2
    ${shown}=    Session Turns    ${second}    s-evening
    ${turn}=    Set Variable    ${shown.json()}[turns][0]
    Should Be Equal    ${turn}[status]    paused    the waiting turn is shown, on any worker
    Should Be Equal    ${turn}[run_id]    ${run_id}
    Length Should Be    ${turn}[pending_approvals]    2
    ${decisions}=    Decisions On    ${paused}    approve:call_weather    reject:call_table:${REASON}
    ${resumed}=    Post Decisions    ${second}    ${run_id}    ${decisions}
    Should Be Equal As Integers    ${resumed.status_code}    200    ${resumed.body}
    Should Be Equal    ${resumed.stream.events}[0][kind]    run_started
    Should Be Equal    ${resumed.stream.events}[0][resumed_from]    ${run_id}
    Should Be Equal    ${resumed.stream.events}[0][run_id]    ${resumed.run_id}
    Should Be Equal    ${resumed.stream.last}[kind]    run_finished
    ${finished}=    Events Of Kind    ${resumed.stream}    tool_call_finished
    ${ran}=    Evaluate    [(event["call_id"], event["output"]) for event in $finished]
    Should Be Equal    ${ran}    ${{ [("call_weather", "Paris: 18 C, light rain")] }}
    ${told}=    Model Was Told    call_weather
    Should Be Equal    ${told}    Paris: 18 C, light rain
    ${told}=    Model Was Told    call_table
    Should Contain    ${told}    a person declined this call to 'book_table' (${REASON})
    Should Be Equal As Integers    ${resumed.stream.last}[result][prompt_tokens]    121
    ...    the resumed segment bills its own call only
    ${ended}=    Read Run    ${second}    ${run_id}
    Should Be Equal    ${ended.json()}[status]    resumed
    ${stored}=    Session Turns    ${second}    s-evening
    ${messages}=    Set Variable    ${stored.json()}[turns][0][messages]
    Should Be Equal    ${messages}[0][content]    Plan my evening in Paris
    Should Be Equal    ${messages}[-1][content]    ${resumed.stream.last}[result][text]
    ${turn}=    Set Variable    ${stored.json()}[turns][0]
    Should Be Equal    ${turn}[segments]    ${{ ["${run_id}", "${resumed.run_id}"] }}
    Should Be Equal As Integers    ${turn}[usage][total_tokens]    ${{ 64 + 29 + 121 + 21 }}
    ...    the turn is both segments' calls
    Should Be Equal As Integers    ${turn}[usage][llm_calls]    2

A Grandchild's Approval Pauses The Run Tree On One Server, And It Resumes On Another
    [Documentation]    chief asks boss, boss asks careful, whose weather call needs a person: the
    ...    whole tree pauses (one scripted OpenAI server per agent, one PostgreSQL behind two
    ...    `serve` processes); the call is approved by its id on the second process, careful's
    ...    answer goes up the tree, and the ledger holds each of the six calls once.
    ${database}=    New Postgres Database
    ${actor}=    Actor Tree Over The Wire    ${TREE}
    ${first}=    Start Stored Server    ${actor}    ${database}
    ${paused}=    Chat And Read    ${first}    Weather?    session_id=s-tree
    Should Be Equal    ${paused.last}[kind]    run_paused
    ${pending}=    Set Variable    ${paused.last}[result][pending_approvals]
    Length Should Be    ${pending}    1
    Should Be Equal    ${pending}[0][call_id]    call_boss/call_careful/call_weather
    ...    the grandchild's call, by an id unique in the tree
    Should Be Equal    ${pending}[0][agent_path]    ${{ ["chief", "boss", "careful"] }}
    Should Be Equal As Integers    ${paused.last}[result][prompt_tokens]    ${{ 40 + 30 + 20 }}
    ...    the paused segment bills the first call of each agent
    ${run_id}=    Set Variable    ${paused.last}[result][run_id]
    Kill Server    ${first}
    ${second}=    Start Stored Server    ${actor}    ${database}
    ${waiting}=    Read Run    ${second}    ${run_id}
    Should Be Equal    ${waiting.json()}[pending_approvals][0][agent_path]    ${{ ["chief", "boss", "careful"] }}
    ${decision}=    Create Dictionary    call_id=${pending}[0][call_id]    decision=approve
    ...    digest=${pending}[0][digest]
    ${resumed}=    Post Decisions    ${second}    ${run_id}    ${{ [$decision] }}
    Should Be Equal As Integers    ${resumed.status_code}    200    ${resumed.body}
    Should Be Equal    ${resumed.stream.last}[kind]    run_finished
    Should Be Equal    ${resumed.stream.last}[result][answer]
    ...    The boss says it is 18 C with light rain in Paris.
    Should Be Equal As Integers    ${resumed.stream.last}[result][prompt_tokens]    ${{ 50 + 60 + 70 }}
    ...    the resumed segment bills the second call of each agent
    ${ledger}=    Stored Ledger    ${database}
    Length Should Be    ${ledger}[rows]    6
    ${billed}=    Evaluate    sum(row["prompt_tokens"] + row["completion_tokens"] for row in $ledger["rows"])
    Should Be Equal As Integers    ${billed}    ${{ 40 + 10 + 70 + 15 + 30 + 8 + 60 + 12 + 20 + 5 + 50 + 9 }}

Two Servers Posting Decisions On The Same Call At Once: One Streams The Resumed Run, The Other Is 409
    [Documentation]    With a session the loser finds it held by the winner's resumption; without
    ...    one, it loses the claim on the pause itself. Either way: 409, and nothing of it ran.
    FOR    ${session}    IN    s-race    ${EMPTY}
        Decisions Posted To Two Servers At Once Are Taken Once    ${session}
    END

The Chat Page Shows An Approval Card Per Gated Call, Approves One, Rejects One, And Streams The Answer
    ${actor}=    Actor Over The Wire    ${ACTOR}
    ${server}=    Start Actor Server    ${actor}
    Open Chat Page In Chromium    ${server}/
    Input Text    id:message    Plan my evening in Paris
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="paused"]
    Page Should Contain Element    css:#current-turn .approval-card    limit=2
    Element Text Should Be    css:.approval-card[data-call-id="call_weather"] .approval-name    get_weather
    Element Should Contain    css:.approval-card[data-call-id="call_table"] .approval-args
    ...    "restaurant": "Le Train Bleu <img src=x onerror=\\"window.pwned=1\\">"
    Element Should Contain    css:.approval-card[data-call-id="call_table"] .approval-args
    ...    "people": 2
    Page Should Not Contain Element    css:#current-turn img    message=an argument's HTML was rendered
    Element Text Should Be    css:.tool-card[data-call-id="call_table"] .tool-status    waiting for approval
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-approvals.png
    Click Button    css:.approval-card[data-call-id="call_weather"] button.approve
    Input Text    css:.approval-card[data-call-id="call_table"] .approval-reason    ${REASON}
    Element Should Be Visible    css:#current-turn[data-state="paused"]    one card is still open
    Click Button    css:.approval-card[data-call-id="call_table"] button.reject
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Element Text Should Be    css:.approval-card[data-call-id="call_table"] .approval-status
    ...    rejected: ${REASON}
    Element Text Should Be    css:.tool-card[data-call-id="call_weather"] .tool-status    done
    Element Attribute Value Should Be    css:.tool-card[data-call-id="call_weather"]    title
    ...    Paris: 18 C, light rain
    Element Text Should Be    css:.tool-card[data-call-id="call_table"] .tool-status    declined
    Element Should Contain    id:answer    I did not book the table
    Element Attribute Value Should Be    id:usage    data-total-tokens    ${{ 64 + 29 + 121 + 21 }}
    ${told}=    Model Was Told    call_weather
    Should Be Equal    ${told}    Paris: 18 C, light rain
    ${told}=    Model Was Told    call_table
    Should Contain    ${told}    (${REASON})
    ${pwned}=    Execute Javascript    return window.pwned === undefined ? null : window.pwned
    Should Be Equal    ${pwned}    ${None}    msg=HTML from a tool call's arguments ran in the page
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-approvals-answered.png

The Chat Page Counts An Approval Turn Whole, Live And After A Reload
    [Documentation]    Approved and rejected on a server with a store: the turn's token line is
    ...    both segments', as `GET /sessions/{id}` and the ledger have it, and a reload draws the
    ...    turn exactly as it was live (the rejected call still declined, not failed).
    ${server}=    Start Page Server With A Store    approvals-page-whole
    Open Chat Page In Chromium    ${server}/
    Input Text    id:message    Plan my evening in Paris
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="paused"]
    Click Button    css:.approval-card[data-call-id="call_weather"] button.approve
    Input Text    css:.approval-card[data-call-id="call_table"] .approval-reason    ${REASON}
    Click Button    css:.approval-card[data-call-id="call_table"] button.reject
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Turn Should Be Counted Whole
    ${live}=    Rendered Turn
    Reload Page
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Page Should Contain Element    css:.turn    limit=1
    Turn Should Be Counted Whole
    ${reloaded}=    Rendered Turn
    Turns Should Be Drawn Alike    ${live}    ${reloaded}
    ${session}=    Execute Javascript    return localStorage.getItem("cleveractors-session:" + document.title)
    ${stored}=    Session Turns    ${server}    ${session}
    ${usage}=    Set Variable    ${stored.json()}[turns][0][usage]
    Should Be Equal As Integers    ${usage}[total_tokens]    ${{ 64 + 29 + 121 + 21 }}
    Should Be Equal As Integers    ${usage}[llm_calls]    2
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-approvals-reloaded.png

A Chat Page Reloaded While Its Turn Waits Shows The Approval Cards Again, And They Decide It
    ${server}=    Start Page Server With A Store    approvals-page-paused
    Open Chat Page In Chromium    ${server}/
    Input Text    id:message    Plan my evening in Paris
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="paused"]
    Reload Page
    Wait Until Page Contains Element    css:#current-turn[data-state="paused"]
    Page Should Contain Element    css:#current-turn .approval-card    limit=2
    Element Text Should Be    css:.tool-card[data-call-id="call_table"] .tool-status    waiting for approval
    Element Attribute Value Should Be    id:usage    data-total-tokens    ${{ 64 + 29 }}
    Element Attribute Value Should Be    id:usage    data-llm-calls    1
    Page Should Not Contain Element    css:#current-turn img    message=an argument's HTML was rendered
    Element Should Be Disabled    id:send
    ${outside}=    Execute Javascript
    ...    const reply = document.querySelector("#current-turn .reply").getBoundingClientRect();
    ...    return [...document.querySelectorAll("#current-turn .tool-card")].filter((card) => card.getBoundingClientRect().right > reply.right).map((card) => card.dataset.callId);
    Should Be Empty    ${outside}    a tool card sticks out of its reply
    Capture Page Screenshot    ${OUTPUT DIR}/chat-page-approvals-paused-reloaded.png
    Click Button    css:.approval-card[data-call-id="call_weather"] button.approve
    Input Text    css:.approval-card[data-call-id="call_table"] .approval-reason    ${REASON}
    Click Button    css:.approval-card[data-call-id="call_table"] button.reject
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    Element Should Be Enabled    id:send
    Turn Should Be Counted Whole
    ${told}=    Model Was Told    call_table
    Should Contain    ${told}    (${REASON})
    ${live}=    Rendered Turn
    Reload Page
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]
    ${reloaded}=    Rendered Turn
    Turns Should Be Drawn Alike    ${live}    ${reloaded}
    ${pwned}=    Execute Javascript    return window.pwned === undefined ? null : window.pwned
    Should Be Equal    ${pwned}    ${None}    msg=HTML from a tool call's arguments ran in the page

A Client That Hangs Up On The Resumed Run Stops It, And on_usage Hears Of Each Segment Once
    ${actor}=    Actor Over The Wire    ${CURDIR}/actors/approvals_slow_answer.yaml
    ${usage file}=    Set Variable    ${OUTPUT DIR}/approvals-usage.jsonl
    Remove File    ${usage file}
    ${server}=    Start Usage Recording Server    ${actor}    ${usage file}
    ${paused}=    Chat And Read    ${server}    Weather in Paris?
    Should Be Equal    ${paused.last}[kind]    run_paused
    ${run_id}=    Set Variable    ${paused.last}[result][run_id]
    ${lines}=    Wait For Usage Lines    ${usage file}    1
    Should Be Equal    ${lines}[0][run_id]    ${run_id}
    Should Be Equal As Integers    ${lines}[0][prompt_tokens]    40    the paused segment, billed
    ${decisions}=    Decisions On    ${paused}    approve:call_weather
    ${read}=    Post Decisions And Hang Up    ${server}    ${run_id}    ${decisions}    5
    Should Not Contain    ${read.kinds}    run_finished
    ${lines}=    Wait For Usage Lines    ${usage file}    2
    Should Be Equal    ${lines}[1][resumed_from]    ${run_id}
    Should Be Equal    ${lines}[1][run_id]    ${read.events}[0][run_id]
    Should Be True    ${lines}[1][cancelled]    the run stopped when its client left
    Should Be True    ${lines}[1][prompt_tokens] > 0    the cut-off call is billed (estimated)
    Usage Lines Should Stay    ${usage file}    2


*** Keywords ***
Decisions Posted To Two Servers At Once Are Taken Once
    [Arguments]    ${session}
    ${database}=    New Postgres Database
    ${actor}=    Actor Over The Wire    ${ACTOR}
    ${first}=    Start Stored Server    ${actor}    ${database}
    ${second}=    Start Stored Server    ${actor}    ${database}
    ${paused}=    Chat And Read    ${first}    Plan my evening in Paris    session_id=${session}
    Should Be Equal    ${paused.last}[kind]    run_paused
    ${run_id}=    Set Variable    ${paused.last}[result][run_id]
    ${decisions}=    Decisions On    ${paused}    approve:call_weather    reject:call_table
    ${both}=    Post Decisions At Once    ${first}    ${second}    ${run_id}    ${decisions}
    ${statuses}=    Evaluate    sorted(answer.status_code for answer in $both)
    Should Be Equal    ${statuses}    ${{ [200, 409] }}
    ${won}=    Evaluate    next(answer for answer in $both if answer.status_code == 200)
    ${lost}=    Evaluate    next(answer for answer in $both if answer.status_code == 409)
    Should Be Equal    ${won.stream.last}[kind]    run_finished
    Should Be Equal    ${lost.run_id}    ${None}    the refused request names no run
    Should Contain    ${lost.body}[detail]    ${run_id}
    ${requests}=    Model Requests
    Should Be Equal As Integers    ${requests}    2    the pause, and one resumption
    ${ledger}=    Ledger Report    ${actor}    ${database}
    ${segments}=    Evaluate    sorted({row["run_id"] for row in $ledger["rows"]})
    Should Be Equal    ${segments}    ${{ sorted(["${run_id}", "${won.run_id}"]) }}
    Length Should Be    ${ledger}[rows]    2    one call per segment, none doubled

Start Page Server With A Store
    [Documentation]    `cleveractors serve` of the two-call actor over the wire, with a fresh
    ...    SQLite store named NAME; its base URL.
    [Arguments]    ${name}
    ${actor}=    Actor Over The Wire    ${ACTOR}
    Remove File    ${OUTPUT DIR}/${name}.db
    ${server}=    Start Actor Server    ${actor}    --store    sqlite:///${OUTPUT DIR}/${name}.db
    RETURN    ${server}

Turn Should Be Counted Whole
    [Documentation]    The current turn shows both segments' tokens and calls, its preamble
    ...    above its tool cards, the approved call done and the rejected one declined.
    Element Attribute Value Should Be    id:usage    data-total-tokens    ${{ 64 + 29 + 121 + 21 }}
    Element Attribute Value Should Be    id:usage    data-llm-calls    2
    Element Should Contain    id:usage    235 total · 2 LLM call(s)
    Element Text Should Be    css:.tool-card[data-call-id="call_weather"] .tool-status    done
    Element Text Should Be    css:.tool-card[data-call-id="call_table"] .tool-status    declined
    Element Attribute Value Should Be    css:.tool-card[data-call-id="call_table"]    title    ${REASON}
    ${preamble}=    Get Vertical Position    css:#current-turn .round:first-child .round-text
    ${card}=    Get Vertical Position    css:#current-turn .tool-card[data-call-id="call_weather"]
    ${answer}=    Get Vertical Position    css:#current-turn .round:last-child .round-text
    Should Be True    ${preamble} < ${card} < ${answer}    the preamble, then the cards, then the answer
    Element Should Contain    css:#current-turn .round:first-child .round-text    I'll check the weather
    Element Should Contain    css:#current-turn .round:last-child .round-text    I did not book the table

Turns Should Be Drawn Alike
    [Arguments]    ${live}    ${reloaded}
    FOR    ${part}    IN    question    answer    tools    notice    error    usage
        Should Be Equal    ${reloaded}[${part}]    ${live}[${part}]
        ...    msg=the turn's ${part} is drawn differently after a reload
    END

Stop Everything
    Close All Browsers
    Remove Browser Profiles
    Stop Servers
    Stop Model Servers
    Stop Postgres
