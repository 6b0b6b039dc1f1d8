*** Settings ***
Documentation       A person in the loop on the command line: `cleveractors run` asks about each
...                 gated tool call on a terminal (approve / edit / reject), and elsewhere prints
...                 the paused run and exits 3; `cleveractors resume` decides later, from the
...                 store; `cleveractors approvals` lists who decided what, and when. The actor
...                 (robot/actors/cli_approvals.yaml) refunds through a tool that needs approval
...                 and records each refund it makes, so a test tells whether it ran.
Library             Collections
Library             CliLibrary.py
Test Tags           cli    approvals
Test Timeout        90 seconds


*** Variables ***
${REQUEST}          Refund 30 on order A1.
${ASKED}            approval needed: refund(order="A1", amount=30)
${ASKED_B2}         approval needed: refund(order="B2", amount=15)
${QUESTION}         approve, edit or reject? [a/e/r]
${ANSWER}           That is settled.


*** Test Cases ***
On A Terminal An Approved Call Runs, The Run Answers And Every Segment Is Billed Once
    ${actor}    Actor Whose Refunds Need Approval
    Start Cleveractors In A Terminal    run    ${actor}    ${REQUEST}
    Terminal Should Show    tool refund(order="A1", amount=30) waits for approval
    Terminal Should Show    ${ASKED}
    Terminal Should Show    ${QUESTION}
    Type In Terminal    a
    Terminal Should Show    tool refund(order="A1", amount=30) approved
    Terminal Should Show    tool refund(order="A1", amount=30) finished
    Terminal Should Show    ${ANSWER}
    ${screen}    Terminal Command Should Exit With Code    0
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 30"] }}
    # One table with the calls of both segments (25 + 44 tokens), each once, and a line each.
    Usage Table Shown Should Total    ${screen}    69    calls=2
    Should Match Regexp    ${screen}    segment 1: run run_\\w+ paused, 1 call, 25 tokens
    Should Match Regexp    ${screen}    segment 2: run run_\\w+ answered, 1 call, 44 tokens
    Ledger Should Bill Tokens    ${actor}    69    runs=2
    [Teardown]    Stop Chat

On A Terminal A Rejected Call Never Runs And The Model Reads Why
    ${actor}    Actor Whose Refunds Need Approval
    Start Cleveractors In A Terminal    run    ${actor}    ${REQUEST}    --session    s-reject
    Terminal Should Show    ${QUESTION}
    Type In Terminal    r
    Terminal Should Show    reason (optional, Enter for none):
    Type In Terminal    over the refund limit
    Terminal Should Show    tool refund(order="A1", amount=30) rejected: over the refund limit
    Terminal Should Show    ${ANSWER}
    Terminal Command Should Exit With Code    0
    ${refunds}    Refunds Made By    ${actor}
    Should Be Empty    ${refunds}
    ${read}    Tool Output Read In Session    ${actor}    s-reject
    Should Contain    ${read}    a person declined this call to 'refund' (over the refund limit)
    Should Contain    ${read}    Do not retry it
    [Teardown]    Stop Chat

On A Terminal An Edit Is Asked Again Until It Is A JSON Object The Tool Accepts
    ${actor}    Actor Whose Refunds Need Approval
    Start Cleveractors In A Terminal    run    ${actor}    ${REQUEST}    --no-stream    --session    s-edit
    Terminal Should Show    ${QUESTION}
    Type In Terminal    maybe
    Terminal Should Show    type a (approve), e (edit) or r (reject)
    Type In Terminal    e
    Terminal Should Show    the arguments now: {"order": "A1", "amount": 30}
    Type In Terminal    {"amount": 20
    Terminal Should Show    that is not JSON
    Type In Terminal    [20]
    Terminal Should Show    the arguments must be a JSON object
    Type In Terminal    {"order": "A1", "amount": "twenty"}
    Terminal Should Show
    ...    the edit was refused: the edited arguments of call 'call_refund' (refund) fail the tool's schema at amount: 'twenty' is not of type 'number'
    Terminal Should Show    ${ASKED}
    Type In Terminal    e
    Type In Terminal    {"order": "A1", "amount": 20}
    Terminal Should Show    tool refund(order="A1", amount=20) edited
    Terminal Should Show    tool refund(order="A1", amount=20) finished
    Terminal Should Show    ${ANSWER}
    Terminal Command Should Exit With Code    0
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 20"] }}
    ${read}    Tool Output Read In Session    ${actor}    s-edit
    Should Contain    ${read}    A reviewer changed this call's arguments to {"amount": 20, "order": "A1"}
    [Teardown]    Stop Chat

An Edit That Breaks The Schema Is Refused As It Is Typed, Before The Next Call's Question
    ${actor}    Actor Whose Refunds Need Approval    calls=2
    Start Cleveractors In A Terminal    run    ${actor}    ${REQUEST}
    Terminal Should Show    ${QUESTION}
    Type In Terminal    e
    Type In Terminal    {"order": "A1", "amount": "twenty"}
    ${shown}    Terminal Should Show
    ...    the edit was refused: the edited arguments of call 'call_refund' (refund) fail the tool's schema at amount: 'twenty' is not of type 'number'
    Should Not Contain    ${shown}    ${ASKED_B2}
    ${shown}    Terminal Should Show    ${QUESTION}
    Should Contain    ${shown}    ${ASKED}
    Should Not Contain    ${shown}    ${ASKED_B2}
    Type In Terminal    e
    Type In Terminal    {"order": "A1", "amount": 20}
    Terminal Should Show    ${ASKED_B2}
    Terminal Should Show    ${QUESTION}
    Type In Terminal    a
    Terminal Should Show    tool refund(order="A1", amount=20) edited
    Terminal Should Show    tool refund(order="B2", amount=15) approved
    Terminal Should Show    ${ANSWER}
    Terminal Command Should Exit With Code    0
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 20", "B2 15"] }}
    [Teardown]    Stop Chat

Not On A Terminal The Run Pauses With Exit 3, And Resume Finishes It Once
    ${actor}    Actor Whose Refunds Need Approval
    Run Cleveractors Without A Terminal    run    ${actor}    ${REQUEST}
    Command Should Fail With Exit Code    3
    ${run_id}    Paused Run Id Should Be Printed
    Pending Call Should Be Printed    call_refund    refund    {"amount": 30, "order": "A1"}
    Output Should Contain Times    cleveractors resume ${actor} ${run_id} --approve call_refund    1
    Usage Table Total Should Be    25
    ${refunds}    Refunds Made By    ${actor}
    Should Be Empty    ${refunds}
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}    --approve    call_refund
    Command Should Succeed
    Output Should Show Line    tool refund(order="A1", amount=30) approved
    Output Should Show A Line Matching    tool refund\\(order="A1", amount=30\\) finished in \\d+\\.\\d\\ds
    Output Should Show Answer    ${ANSWER}
    Usage Table Total Should Be    44
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 30"] }}
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}    --approve    call_refund
    Command Should Fail With Exit Code    1
    Error Output Should Start With    ApprovalConflictError: run '${run_id}' was already resumed (by run run_
    Error Output Should Not Contain    Token usage
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 30"] }}
    Ledger Should Bill Tokens    ${actor}    69    runs=2
    # The ledger names each run whole, as `resume` and `approvals --run` take it.
    Run Cleveractors    usage    ${actor}
    Output Should Show A Line Matching    \\s*\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\s+${run_id}\\s+1\\s+round\\s.*

Approvals Lists Who Decided What, When, For Which Run And Call
    ${actor}    Actor Whose Refunds Need Approval
    Run Cleveractors Without A Terminal    run    ${actor}    ${REQUEST}    --session    s-audit
    ${run_id}    Paused Run Id Should Be Printed
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}    --reject    call_refund:too much
    Command Should Succeed
    Run Cleveractors    approvals    ${actor}
    Command Should Succeed
    Output Should Show A Line Matching
    ...    \\s*\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\s+-\\s+${run_id}\\s+call_refund\\s+refund\\s+reject\\s+too much\\s*
    Run Cleveractors    approvals    ${actor}    --session    s-audit    --json
    Approvals Should Be Listed As JSON    ${run_id}    reject    too much
    Run Cleveractors    approvals    ${actor}    --run    run_unknown
    Command Should Succeed
    Output Should Not Show    call_refund

Resume Refuses What It Cannot Decide, And Keeps The Run Paused
    ${actor}    Actor Whose Refunds Need Approval
    Run Cleveractors Without A Terminal    resume    ${actor}    run_nowhere    --approve    call_refund
    Command Should Fail With Exit Code    1
    Error Output Should Be    RunNotFoundError: no paused run 'run_nowhere'
    Error Output Should Not Contain    Token usage
    Run Cleveractors Without A Terminal    run    ${actor}    ${REQUEST}
    ${run_id}    Paused Run Id Should Be Printed
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}    --approve    call_other
    Command Should Fail With Exit Code    1
    Error Output Should Be
    ...    InvalidDecisionError: run '${run_id}' has no pending call 'call_other' (it waits for call_refund)
    Error Output Should Not Contain    Token usage
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}
    ...    --edit    call_refund:{"order": "A1", "amount": "all"}
    Command Should Fail With Exit Code    1
    Error Output Should Be
    ...    InvalidDecisionError: the edited arguments of call 'call_refund' (refund) of run '${run_id}' fail the tool's schema at amount: 'all' is not of type 'number'
    Error Output Should Not Contain    Token usage
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}    --json    --approve    call_other
    Command Should Fail With Exit Code    1
    Output Should Be Empty
    ${refunds}    Refunds Made By    ${actor}
    Should Be Empty    ${refunds}
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}
    ...    --edit    call_refund:{"order": "A1", "amount": 10}    --json
    Command Should Succeed
    ${result}    Output Should Be An Execution Result
    Should Be Equal    ${result.resumed_from}    ${run_id}
    Should Be Equal    ${result.status}    answered
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 10"] }}
    Run Cleveractors    approvals    ${actor}    --run    ${run_id}
    Output Should Show A Line Matching    .*call_refund\\s+refund\\s+edit\\s+{"amount": 10, "order": "A1"}\\s*
    # The resumed segment's id names the same run: its whole chain of segments is listed.
    Run Cleveractors    approvals    ${actor}    --run    ${result.run_id}
    Output Should Show A Line Matching    .*${run_id}\\s+call_refund\\s+refund\\s+edit\\s+{"amount": 10, "order": "A1"}\\s*

Resume Options Of The Wrong Form Exit 2 Before Anything Runs
    [Template]    Resume Option Should Be Refused
    --edit    call_refund    --edit 'call_refund': expected ID:{JSON}
    --edit    call_refund:{"amount":    --edit 'call_refund:{"amount":': the arguments are not JSON (Expecting value: line 1 column 11 (char 10))
    --edit    call_refund:[10]    --edit 'call_refund:[10]': the arguments must be a JSON object
    --respond    call_refund    --respond 'call_refund': expected ID:TEXT
    --approve    ${SPACE}    --approve: the call id is empty
    --json    give at least one decision: --approve ID, --reject ID[:REASON], --edit 'ID:{JSON}' or --respond ID:TEXT

A Respond Decision Gives The Model A Person's Text Instead Of Running The Tool
    ${actor}    Actor Whose Refunds Need Approval
    Run Cleveractors Without A Terminal    run    ${actor}    ${REQUEST}    --session    s-respond
    ${run_id}    Paused Run Id Should Be Printed
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}
    ...    --respond    call_refund:Refunded by hand already.    --no-stream
    Command Should Succeed
    Output Should Show Line    tool refund(order="A1", amount=30) answered by a person
    ${refunds}    Refunds Made By    ${actor}
    Should Be Empty    ${refunds}
    ${read}    Tool Output Read In Session    ${actor}    s-respond
    Should Be Equal    ${read}    Refunded by hand already.

With JSON Or Events A Pause Keeps Standard Output Machine-Readable And Exits 3
    ${actor}    Actor Whose Refunds Need Approval
    Run Cleveractors In A Terminal    run    ${actor}    ${REQUEST}    --json
    Command Should Fail With Exit Code    3
    Run Cleveractors Without A Terminal    run    ${actor}    ${REQUEST}    --json
    Command Should Fail With Exit Code    3
    ${result}    Output Should Be An Execution Result
    Should Be Equal    ${result.status}    paused
    Should Be Equal    ${result.pending_approvals[0].call_id}    call_refund
    Error Output Should Contain    paused: run ${result.run_id} waits for approval of 1 call
    Run Cleveractors Without A Terminal    run    ${actor}    ${REQUEST}    --events
    Command Should Fail With Exit Code    3
    ${events}    Output Should Be Event Lines
    Events Should Include Kinds    ${events}    tool_approval_requested    run_paused
    Error Output Should Contain    waits for approval of 1 call

Without A Store The Pause Is Said To Be Lost, And Resume Asks For A Store
    ${actor}    Actor Whose Refunds Need Approval    store=${False}
    Run Cleveractors Without A Terminal    run    ${actor}    ${REQUEST}
    Command Should Fail With Exit Code    3
    ${run_id}    Paused Run Id Should Be Printed
    Output Should Show Line
    ...    no store: this pause is lost when the command exits (the calls above never run); add `store:` to the actor's config to decide later with `cleveractors resume`
    Run Cleveractors Without A Terminal    resume    ${actor}    ${run_id}    --approve    call_refund
    Command Should Fail With Exit Code    1
    Error Output Should Be
    ...    ${actor}: resume needs the store the run paused in: add `store:` to the actor's config or pass --store URL (without a store, a pause is gone when the command that paused exits)

Ctrl-D At The Question Leaves The Call Waiting, For Resume Later
    ${actor}    Actor Whose Refunds Need Approval
    Start Cleveractors In A Terminal    run    ${actor}    ${REQUEST}
    Terminal Should Show    ${QUESTION}
    End Input In Terminal
    Terminal Should Show    paused: run
    ${screen}    Terminal Command Should Exit With Code    3
    Should Contain    ${screen}    --approve call_refund
    ${refunds}    Refunds Made By    ${actor}
    Should Be Empty    ${refunds}
    [Teardown]    Stop Chat

SIGTERM At The Question Exits 143 With The Usage Table, Billed
    ${actor}    Actor Whose Refunds Need Approval
    Start Cleveractors In A Terminal    run    ${actor}    ${REQUEST}
    Terminal Should Show    ${QUESTION}
    Terminate The Terminal Command
    Terminal Should Show    terminated (SIGTERM) at the approval question; run run_
    ${screen}    Terminal Command Should Exit With Code    143
    Usage Table Shown Should Total    ${screen}    25    calls=1
    Ledger Should Bill Tokens    ${actor}    25    runs=1
    ${stays}    Should Match Regexp    ${screen}    run (run_\\w+) stays paused: decide with `cleveractors resume`
    Run Cleveractors Without A Terminal    resume    ${actor}    ${stays}[1]    --approve    call_refund
    Command Should Succeed
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 30"] }}
    [Teardown]    Stop Chat

Ctrl-C At The Question Without A Store Says The Pause Is Lost
    ${actor}    Actor Whose Refunds Need Approval    store=${False}
    Start Cleveractors In A Terminal    run    ${actor}    ${REQUEST}
    Terminal Should Show    ${QUESTION}
    Press Ctrl-C In Chat
    Terminal Should Show    interrupted at the approval question; the pause is lost (no store), nothing ran
    ${screen}    Terminal Command Should Exit With Code    130
    Usage Table Shown Should Total    ${screen}    25    calls=1
    [Teardown]    Stop Chat

Chat Asks About A Gated Call As Run Does, And Keeps The Answered Turn
    ${actor}    Actor Whose Refunds Need Approval    store=${False}
    Start Chat In A Terminal    ${actor}
    Type In Chat    ${REQUEST}
    Chat Should Show    ${ASKED}
    Chat Should Show    ${QUESTION}
    Type In Chat    a
    Chat Should Show    tool refund(order="A1", amount=30) finished
    Chat Should Show    ${ANSWER}
    Chat Should Show    this turn 69 tokens
    Chat Should Show    in 1 turn
    Chat Should Prompt Again
    Type In Chat    ${REQUEST}
    Chat Should Show    ${QUESTION}
    Type In Chat    e
    Type In Chat    {"order": "A1", "amount": "twenty"}
    Chat Should Show
    ...    the edit was refused: the edited arguments of call 'call_refund' (refund) fail the tool's schema at amount: 'twenty' is not of type 'number'
    Chat Should Show    ${QUESTION}
    End Input In Terminal
    Chat Should Show    the calls were left undecided; this turn is not kept, the chat goes on
    Chat Should Show    in 2 turns
    Chat Should Prompt Again
    Type In Chat    /usage
    ${shown}    Chat Should Prompt Again
    Chat Usage Table Should Have Calls    ${shown}    3
    Type In Chat    /exit
    Chat Should Exit With Code    0
    ${refunds}    Refunds Made By    ${actor}
    Should Be Equal    ${refunds}    ${{ ["A1 30"] }}
    [Teardown]    Stop Chat

Help Documents The Approval Commands And Exit Code 3
    Run Cleveractors    run    --help
    Command Should Succeed
    Help Should Use Plain Metavars
    Output Should Contain Times    exits 3    1
    FOR    ${command}    IN    resume    approvals
        Run Cleveractors    ${command}    --help
        Command Should Succeed
        Help Should Use Plain Metavars
    END
    Run Cleveractors    resume    --help
    Output Should Show Line    Usage: cleveractors resume [OPTIONS] ACTOR RUN_ID
    Run Cleveractors    --help
    Output Should Contain Times    3 the run paused:    1


*** Keywords ***
Resume Option Should Be Refused
    [Arguments]    @{options_and_error}
    ${options}    Get Slice From List    ${options_and_error}    0    -1
    Run Cleveractors Without A Terminal    resume    actor.yaml    run_x    @{options}
    Command Should Fail With Exit Code    2
    Error Output Should Be    ${options_and_error}[-1]
