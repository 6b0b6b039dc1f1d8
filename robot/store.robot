*** Settings ***
Documentation       Stored sessions and the usage ledger over real HTTP: `cleveractors serve --store`
...                 on a throwaway PostgreSQL (and SQLite), killed with SIGKILL mid-run, two
...                 servers sharing one database (also under one Idempotency-Key), and the ledger
...                 read back with `cleveractors usage`.
...                 What the ledger must hold is read from the actors' scripts (their billing record).
Library             Collections
Library             SeleniumLibrary    timeout=20s    run_on_failure=Capture Page Screenshot
Library             StoreLibrary.py
Suite Teardown      Stop Everything


*** Test Cases ***
A Server Killed Mid-Run Loses No Recorded Call And No Partial Turn, And The Session Goes On
    [Documentation]    ChatOpenAI against a scripted OpenAI server: the ledger must equal the
    ...    server's billing record of every call it answered in full.
    ${database}=    New Postgres Database
    ${provider}=    Start Scripted OpenAI Server    slow tool turn
    ${actor}=    Write Stored Actor    killed-mid-run    slow tool turn    lease_s=2
    ...    base_url=${provider}
    ${server}=    Start Stored Server    ${actor}    ${database}
    ${before}=    Chat Until Then Kill    ${server}    s-killed    Weather in Paris?    text_delta    2
    Should Contain    ${before.kinds}    tool_call_finished
    ${ledger}=    Ledger Report    ${actor}    ${database}
    ${billed}=    Completed Billed Calls
    Length Should Be    ${billed}    1    the lookup was answered; the answer was cut off
    Ledger Should Equal Billing Record    ${ledger}    ${billed}
    Should Be Equal    ${ledger}[rows][0][session_id]    s-killed
    ${server}=    Start Stored Server    ${actor}    ${database}
    ${stored}=    Session Turns    ${server}    s-killed
    Should Be Equal As Integers    ${stored.status_code}    200    the session began with the run
    Length Should Be    ${stored.json()}[turns]    0    the killed run left no turn
    # The dead run's hold on the session runs out after lease_s; then the session goes on.
    ${after}=    Wait Until Keyword Succeeds    20 s    0.5 s
    ...    Chat Finishes    ${server}    s-killed    And tomorrow?
    ${stored}=    Session Turns    ${server}    s-killed
    ${turns}=    Set Variable    ${stored.json()}[turns]
    Length Should Be    ${turns}    1
    Should Be Equal    ${turns}[0][messages][0][content]    And tomorrow?
    Should Be Equal    ${turns}[0][messages][1][tool_calls][0][name]    get_weather
    Should Be Equal    ${turns}[0][messages][2][role]    tool
    ${ledger}=    Ledger Report    ${actor}    ${database}    --session    s-killed
    ${billed}=    Completed Billed Calls
    Length Should Be    ${billed}    3
    Ledger Should Equal Billing Record    ${ledger}    ${billed}

Two Servers On One PostgreSQL Keep 100 Concurrent Sessions Whole And Reject A Busy One
    ${database}=    New Postgres Database
    ${slow_actor}=    Write Stored Actor    shared-slow    slow
    ${first}=    Start Stored Server    ${slow_actor}    ${database}
    ${second}=    Start Stored Server    ${slow_actor}    ${database}
    ${streams}=    Chat While Another Runs    ${first}    ${second}    s-busy
    Should Be Equal    ${streams[0].last}[kind]    run_finished
    Should Be Equal    ${streams[1].last}[kind]    run_failed
    Should Be Equal    ${streams[1].last}[error][type]    SessionBusyError
    Should Be Equal As Integers    ${streams[1].last}[result][total_tokens]    0
    ${stored}=    Session Turns    ${second}    s-busy
    Length Should Be    ${stored.json()}[turns]    1    the rejected run added no turn
    # Two more workers on the same database, whose stub answers quickly (a stub replays its
    # script for every run, so the slow actor would make every run slow).
    ${quick_actor}=    Write Stored Actor    shared-quick    quick
    ${third}=    Start Stored Server    ${quick_actor}    ${database}
    ${fourth}=    Start Stored Server    ${quick_actor}    ${database}
    ${problems}=    Run Concurrent Sessions    ${{ ["${third}", "${fourth}"] }}    100    3
    Should Be Empty    ${problems}
    ${ledger}=    Ledger Report    ${quick_actor}    ${database}
    ${quick}=    Scripted Call    quick answer
    ${slow}=    Scripted Call    slow answer
    Length Should Be    ${ledger}[rows]    301
    # The rejected run called no model: one slow run, then 300 quick ones.
    ${billed}=    Evaluate    300 * ${quick}[prompt_tokens] + ${slow}[prompt_tokens]
    Should Be Equal    ${ledger}[prompt_tokens]    ${billed}
    ${keys}=    Evaluate    {(row["run_id"], row["call_index"]) for row in $ledger["rows"]}
    Length Should Be    ${keys}    301    no row doubled

One Idempotency-Key Sent To Two Servers At Once Runs Once And Is Billed Once
    [Documentation]    Two `serve --store` processes on one PostgreSQL, ChatOpenAI against one
    ...    scripted OpenAI server whose answer is slow, so the two requests overlap: one runs,
    ...    the other is refused as in progress (409) or, had it come after the answer, replayed.
    ${database}=    New Postgres Database
    ${provider}=    Start Scripted OpenAI Server    slow answers
    ${actor}=    Write Stored Actor    one-key    slow answers    base_url=${provider}
    ${first}=    Start Stored Server    ${actor}    ${database}
    ${second}=    Start Stored Server    ${actor}    ${database}
    ${answered}    ${other}=    Chat At Once Under Key    ${first}    ${second}    k-once
    ...    Weather in Paris?
    Should Be Equal    ${answered.stream.last}[kind]    run_finished
    Should Be Equal    ${answered.stream.events}[0][run_id]    ${answered.run_id}
    Refused As In Progress Or Replayed    ${other}    ${answered}
    ${billed}=    Completed Billed Calls
    Length Should Be    ${billed}    1    one run, one call
    ${ledger}=    Ledger Report    ${actor}    ${database}
    Ledger Should Equal Billing Record    ${ledger}    ${billed}
    Should Be Equal    ${ledger}[rows][0][run_id]    ${answered.run_id}
    FOR    ${server}    IN    ${first}    ${second}
        ${again}=    Chat Under Key    ${server}    k-once    Weather in Paris?
        Should Be Equal As Integers    ${again.status_code}    200    ${again.body}
        Should Be True    ${again.replayed}
        Should Be Equal    ${again.run_id}    ${answered.run_id}
        Should Be Equal    ${again.stream.last}[result][text]    ${answered.stream.last}[result][text]
    END
    ${requests}=    Scripted Server Requests
    Should Be Equal As Integers    ${requests}    1    the replays asked the provider nothing
    ${ledger}=    Ledger Report    ${actor}    ${database}
    Ledger Should Equal Billing Record    ${ledger}    ${billed}

A Run Whose Client Hung Up Frees Its Idempotency-Key For The Retry
    ${database}=    New Sqlite Database    hang-up-key
    ${actor}=    Write Stored Actor    hang-up-key    slow
    ${server}=    Start Stored Server    ${actor}    ${database}
    ${cancelled}=    Chat Under Key Then Hang Up    ${server}    k-retry    Weather in Paris?
    # The server stops the run and frees the key as it notices the hang-up: until then, 409.
    ${retry}=    Wait Until Keyword Succeeds    10 s    0.2 s
    ...    Chat Under Key Runs    ${server}    k-retry    Weather in Paris?
    Should Not Be Equal    ${retry.run_id}    ${cancelled}
    ${again}=    Chat Under Key    ${server}    k-retry    Weather in Paris?
    Should Be True    ${again.replayed}
    Should Be Equal    ${again.run_id}    ${retry.run_id}

The OpenAI SDK's Completion Sent Again Under Its Idempotency-Key Is Answered Once
    ${database}=    New Sqlite Database    sdk-key
    ${provider}=    Start Scripted OpenAI Server    quick
    ${actor}=    Write Stored Actor    sdk-key    quick    base_url=${provider}
    ${server}=    Start Stored Server    ${actor}    ${database}
    ${first}=    Complete With The OpenAI SDK    ${server}    Weather in Paris?    k-sdk
    ${again}=    Complete With The OpenAI SDK    ${server}    Weather in Paris?    k-sdk
    Should Be Equal    ${first}[content]    Noted.
    Should Be Equal    ${again}[content]    ${first}[content]
    Should Be Equal    ${again}[usage]    ${first}[usage]
    Should Be Equal    ${again}[run_id]    ${first}[run_id]
    ${requests}=    Scripted Server Requests
    Should Be Equal As Integers    ${requests}    1    the repeat asked the provider nothing
    ${billed}=    Completed Billed Calls
    ${ledger}=    Ledger Report    ${actor}    ${database}
    Ledger Should Equal Billing Record    ${ledger}    ${billed}

A Stored Session Is Read, Refused Beside A Client History, And Deleted
    ${database}=    New Sqlite Database    web
    ${actor}=    Write Stored Actor    web-sessions    quick
    ${server}=    Start Stored Server    ${actor}    ${database}
    Chat Finishes    ${server}    s-web    Hello
    Chat Finishes    ${server}    s-web    Again
    ${stored}=    Session Turns    ${server}    s-web
    ${questions}=    Evaluate    [turn["messages"][0]["content"] for turn in $stored.json()["turns"]]
    Should Be Equal    ${questions}    ${{ ["Hello", "Again"] }}
    ${refused}=    Post Chat    ${server}
    ...    ${{ {"message": "Hi", "session_id": "s-web", "history": [{"role": "user", "content": "x"}]} }}
    Should Be Equal As Integers    ${refused.status_code}    422
    Should Contain    ${refused.json()}[detail]    session_id
    ${deleted}=    Delete Stored Session    ${server}    s-web
    Should Be Equal As Integers    ${deleted}    204
    ${gone}=    Session Turns    ${server}    s-web
    Should Be Equal As Integers    ${gone.status_code}    404
    ${again}=    Delete Stored Session    ${server}    s-web
    Should Be Equal As Integers    ${again}    404

Sessions Are Invisible Across API Keys
    ${database}=    New Sqlite Database    keys
    ${actor}=    Write Stored Actor    two-keys    quick
    ${server}=    Start Stored Server    ${actor}    ${database}    api_keys=key-alpha,key-beta
    Chat Finishes    ${server}    s-alpha    Hello    key=key-alpha
    ${theirs}=    Session Turns    ${server}    s-alpha    key=key-beta
    ${unused}=    Session Turns    ${server}    s-unused    key=key-beta
    Should Be Equal As Integers    ${theirs.status_code}    404
    Should Be Equal    ${theirs.json()}[detail]    no session 's-alpha'
    Should Be Equal    ${unused.json()}[detail]    no session 's-unused'    the same answer
    ${deleted}=    Delete Stored Session    ${server}    s-alpha    key=key-beta
    Should Be Equal As Integers    ${deleted}    404
    ${hijack}=    Chat In Session    ${server}    s-alpha    Hijack    key=key-beta
    Should Be Equal    ${hijack.last}[kind]    run_failed
    Should Be Equal    ${hijack.last}[error][type]    SessionNotFoundError
    ${anonymous}=    Session Turns    ${server}    s-alpha
    Should Be Equal As Integers    ${anonymous.status_code}    401
    ${mine}=    Session Turns    ${server}    s-alpha    key=key-alpha
    Should Be Equal As Integers    ${mine.status_code}    200
    Length Should Be    ${mine.json()}[turns]    1    neither the hijack nor the delete touched it

The CLI Continues A Session, Prints The Ledger And Prunes Old Sessions
    ${database}=    New Sqlite Database    cli
    ${actor}=    Write Stored Actor    cli-sessions    quick    store_url=${database}
    FOR    ${message}    IN    Hello    Again
        ${ran}=    Run Store Cli    run    ${actor}    ${message}    --session    s-cli
        Should Be Equal As Integers    ${ran.returncode}    0    ${ran.stderr}
    END
    ${table}=    Run Store Cli    usage    ${actor}    --session    s-cli
    Should Contain    ${table.stdout}    2 calls
    ${quick}=    Scripted Call    quick answer
    ${ledger}=    Ledger Report    ${actor}    ${EMPTY}    --session    s-cli    --since    2020-01-01
    Length Should Be    ${ledger}[rows]    2
    Should Be Equal    ${ledger}[prompt_tokens]    ${{ 2 * ${quick}[prompt_tokens] }}
    ${bad}=    Run Store Cli    usage    ${actor}    --since    yesterday
    Should Be Equal As Integers    ${bad.returncode}    2
    Should Contain    ${bad.stderr}    --since
    Age Sessions    ${database}    31
    ${pruned}=    Run Store Cli    store    prune    ${actor}
    Should Contain    ${pruned.stdout}    removed 1 session
    ${ledger}=    Ledger Report    ${actor}    ${EMPTY}    --session    s-cli
    Length Should Be    ${ledger}[rows]    2    pruning keeps the bill
    ${foreign}=    Run Store Cli    store    prune    ${actor}    --store    mysql://db/chat
    Should Be Equal As Integers    ${foreign.returncode}    1
    Should Contain    ${foreign.stderr}    unsupported database 'mysql'


The Chat Page Keeps Its Session Across A Reload And Starts A New One
    ${database}=    New Sqlite Database    page
    ${actor}=    Write Stored Actor    chat-page-sessions    quick
    ${server}=    Start Stored Server    ${actor}    ${database}
    Open Chat Page In Chromium    ${server}/
    Send From The Chat Page    Remember me
    Reload Page
    Wait Until Element Contains    css:.turn .question    Remember me
    Element Text Should Be    css:.turn .answer    Noted.
    Page Should Contain Element    css:.turn    limit=1
    Click Button    id:new-chat
    Page Should Not Contain Element    css:.turn
    Send From The Chat Page    Fresh start
    Reload Page
    Wait Until Element Contains    css:.turn .question    Fresh start
    Page Should Contain Element    css:.turn    limit=1


Two Servers On One PostgreSQL Hold One Caller's Spend Limit Under 50 Requests At Once
    [Documentation]    A limit of a few calls' cost a day: whichever worker a request reaches,
    ...    the ledger bills at most the limit plus what the calls in flight cost beyond their
    ...    estimates (nothing beyond it when strict), and every other request is a 429 with
    ...    `Retry-After`, no run and no ledger row. `usage --caller` tells what is left.
    [Template]    Spend Limit Holds Across Two Servers
    strict=${False}    route=/chat
    strict=${True}     route=/v1/chat/completions

*** Keywords ***
Send From The Chat Page
    [Arguments]    ${message}
    Input Text    id:message    ${message}
    Click Button    id:send
    Wait Until Page Contains Element    css:#current-turn[data-state="finished"]

Ledger Should Equal Billing Record
    [Arguments]    ${ledger}    ${billed}
    ${rows}=    Evaluate
    ...    [{"prompt_tokens": row["prompt_tokens"], "completion_tokens": row["completion_tokens"]} for row in $ledger["rows"]]
    Should Be Equal    ${rows}    ${billed}

Refused As In Progress Or Replayed
    [Documentation]    OTHER came while ANSWERED's run went on (409 naming it), or after (a replay).
    [Arguments]    ${other}    ${answered}
    IF    ${other.status_code} == 409
        Should Contain    ${other.body}[detail]    Idempotency-Key
        Should Contain    ${other.body}[detail]    ${answered.run_id}
    ELSE
        Should Be Equal As Integers    ${other.status_code}    200    ${other.body}
        Should Be True    ${other.replayed}
        Should Be Equal    ${other.run_id}    ${answered.run_id}
    END

Chat Under Key Runs
    [Arguments]    ${server}    ${key}    ${message}
    ${chat}=    Chat Under Key    ${server}    ${key}    ${message}
    Should Be Equal As Integers    ${chat.status_code}    200    ${chat.body}
    Should Not Be True    ${chat.replayed}
    Should Be Equal    ${chat.stream.last}[kind]    run_finished
    RETURN    ${chat}

Chat Finishes
    [Arguments]    ${server}    ${session}    ${message}    ${key}=${EMPTY}
    ${stream}=    Chat In Session    ${server}    ${session}    ${message}    key=${key}
    Should Be Equal    ${stream.last}[kind]    run_finished    ${stream.last}
    RETURN    ${stream}

Stop Everything
    Close All Browsers
    Remove Browser Profiles
    Stop Servers
    Stop Postgres

Spend Limit Holds Across Two Servers
    [Arguments]    ${strict}    ${route}
    ${database}=    New Postgres Database
    # One answer costs $0.000011 (5 + 3 x 2 tokens at $1 per million); it reserves $0.000008
    # (its prompt as estimated), or $0.000014 strict (with its output cap of 3 tokens).
    ${actor}=    Write Spend Limited Actor    spend-strict-${strict}    0.0001    ${strict}
    ${servers}=    Start Stored Servers    ${actor}    ${database}    2    k-alice
    ${responses}=    Send At Once To Both    ${servers}    50    k-alice    ${route}
    ${answered}=    Evaluate    [r for r in $responses if r["status"] == 200]
    ${refused}=    Evaluate    [r for r in $responses if r["status"] != 200]
    Should Not Be Empty    ${answered}
    Should Not Be Empty    ${refused}
    FOR    ${response}    IN    @{refused}
        Should Be Equal As Integers    ${response}[status]    429    ${response}[body]
        Should Be True    int(${response}[retry_after]) > 0
        Should Be Equal    ${response}[run_id]    ${None}
        Should Contain    ${response}[body]    day spend limit
    END
    ${ledger}=    Stored Ledger    ${database}
    ${run_ids}=    Evaluate    sorted(row["run_id"] for row in $ledger["rows"])
    ${answered_ids}=    Evaluate    sorted(r["run_id"] for r in $answered)
    Lists Should Be Equal    ${run_ids}    ${answered_ids}    only the answered runs are billed
    ${billed}=    Evaluate    decimal.Decimal($ledger["cost_usd"])    modules=decimal
    ${bound}=    Evaluate
    ...    decimal.Decimal("0.0001") + (0 if ${strict} else len($answered) * decimal.Decimal("0.000003"))
    ...    modules=decimal
    Should Be True    ${billed} <= ${bound}    billed ${billed}, bound ${bound}
    ${usage}=    Run Store CLI    usage    ${actor}    --store    ${database}    --caller    key-1
    ...    --json
    ${windows}=    Evaluate    json.loads($usage.stdout)["windows"]    modules=json
    Should Be Equal    ${windows}[0][window]    day
    Should Be Equal As Numbers    ${windows}[0][spent]    ${billed}
    Should Be Equal As Numbers    ${windows}[0][reserved]    0
